//! The Kafka-level experiment of `mk-bench kafka`: the broker sweeps (produce, consume,
//! end-to-end latency, cost of durability, producer scaling) and the client benchmarks
//! (librdkafka saturation, acks=all, idempotent; sequential durable writes, then pipeline
//! depths), each against baselines measured in the same run: loopback TCP stream
//! throughput, TCP request/response round trips, and fio's fdatasync latency.
//!
//! Contract:
//! - Inputs: [`KafkaOptions`]: sizes ([`KafkaSizes::full`] or [`KafkaSizes::quick`]), where the
//!   broker comes from ([`BrokerSource`]: a fresh `minikafka` per experiment and flush policy,
//!   or an external one), and whether to ask librdkafka for idempotence.
//! - Outputs: [`Section`]s of [`Row`]s (one per experiment, each written as CSV, JSONL and
//!   Markdown), SVG plots, and [`Target`]s: the performance goals, each measured and judged.
//! - Definitions: throughput counts record values only, in decimal MB; every
//!   throughput point is the median of `reps` repetitions with min and max; every row has
//!   the 1-minute load average; repetitions are the outer loop so drift of the shared machine
//!   falls on every point alike. Every topic is fresh and deleted after its point.
//! - Never: asserts a timing; a run whose outcome contradicts what it did (an error code, a
//!   missing record, a failed delivery report) is an error, not a figure.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use serde::Serialize;

use crate::broker_proc::{BrokerHandle, BrokerSource, FlushPolicy};
use crate::error::BenchError;
use crate::fio;
use crate::kafka_workloads::{
    self as kw, concurrent_produce, consume_run, create_topic, delete_topic, fill, latency_run,
    pre_encode, produce_run, LatencySpec, Limits, Measurement,
};
use crate::machine;
use crate::net_baselines::{tcp_echo, tcp_stream};
use crate::plots::{self, param, Chart};
use crate::rdkafka_workloads::{produce_acked, sequential_latency, RdSettings};
use crate::report::{self, Ratio, Row};
use crate::stats::{percentile, Summary};

mod consume;
mod durability;
pub mod goals;
mod latency;
mod output;
mod produce;
mod rdkafka_saturation;
pub mod recompress;
pub mod restart;
pub mod scale;
mod scaling;
mod sequential_writes;
pub mod side_by_side;
mod targets;

pub use consume::consume;
pub use durability::durability;
pub use latency::latency;
pub use output::{charts, run, write_outputs};
pub use produce::produce;
pub use rdkafka_saturation::rdkafka_saturation;
pub use scaling::scaling;
pub use sequential_writes::sequential_writes;
pub use targets::{evaluate_targets, targets_markdown, Target};

/// The experiment's name in rows.
pub const EXPERIMENT: &str = "kafka";

/// Bytes of the small response the TCP round-trip baseline answers with (about a Produce
/// v9 response for one partition).
pub const ECHO_RESPONSE_BYTES: usize = 64;

/// How much work each measurement does.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KafkaSizes {
    /// Repetitions of every throughput point and latency configuration.
    pub reps: usize,
    /// Record value sizes of the produce and consume sweeps.
    pub record_bytes: Vec<usize>,
    /// Records per Produce request.
    pub batches: Vec<usize>,
    /// Produce requests in flight (1 = a blocking client, one request at a time).
    pub depths: Vec<usize>,
    /// Longest time of one throughput point.
    pub point_duration: Duration,
    /// Most payload one throughput point sends.
    pub point_max_payload_bytes: u64,
    /// Fetch `max_bytes` of the consume sweep.
    pub fetch_sizes: Vec<i32>,
    /// Payload written before the consume sweep, per record size.
    pub consume_fill_bytes: u64,
    /// Target rates of the latency runs (records/s).
    pub latency_rates: Vec<f64>,
    /// Records per request of the latency runs.
    pub latency_batches: Vec<usize>,
    /// Length of one latency run, warm-up included.
    pub latency_duration: Duration,
    /// Warm-up excluded from the latency samples.
    pub latency_warmup: Duration,
    /// Value size of the latency runs.
    pub latency_value_bytes: usize,
    /// Records per request of the durability sweep.
    pub durability_batches: Vec<usize>,
    /// Producer counts of the scaling sweep.
    pub producer_counts: Vec<usize>,
    /// Records per request of the scaling sweep.
    pub scaling_batch: usize,
    /// Value size of the librdkafka saturation runs.
    pub rd_value_bytes: usize,
    /// Length of one librdkafka saturation run.
    pub rd_duration: Duration,
    /// How many sequential durable writes to time.
    pub sequential_writes: usize,
    /// Value size of the sequential durable writes.
    pub sequential_value_bytes: usize,
    /// Outstanding writes of the pipeline-depth runs.
    pub pipeline_depths: Vec<usize>,
    /// Length of one pipeline run.
    pub pipeline_duration: Duration,
    /// Length of each TCP baseline repetition.
    pub tcp_duration: Duration,
    /// Size of the fio fdatasync job (4 KiB per sync).
    pub fio_sync_bytes: u64,
}

impl KafkaSizes {
    /// The full run (about 8–10 minutes on the 2-core development machine).
    pub fn full() -> KafkaSizes {
        KafkaSizes {
            reps: 3,
            record_bytes: vec![100, 1000, 10_000],
            batches: vec![1, 10, 100, 1000],
            depths: vec![1, 8],
            point_duration: Duration::from_millis(1000),
            point_max_payload_bytes: 1 << 30,
            fetch_sizes: vec![4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20],
            consume_fill_bytes: 128 << 20,
            latency_rates: vec![1_000.0, 10_000.0, 50_000.0],
            latency_batches: vec![1, 10],
            latency_duration: Duration::from_millis(2000),
            latency_warmup: Duration::from_millis(300),
            latency_value_bytes: 100,
            durability_batches: vec![1, 10, 100, 1000],
            producer_counts: vec![1, 2, 4, 8],
            scaling_batch: 100,
            rd_value_bytes: 256,
            rd_duration: Duration::from_secs(5),
            sequential_writes: 100_000,
            sequential_value_bytes: 16,
            pipeline_depths: vec![1, 8, 32, 128, 512],
            pipeline_duration: Duration::from_millis(1500),
            tcp_duration: Duration::from_millis(1000),
            fio_sync_bytes: 8 << 20,
        }
    }

    /// The CI smoke run: one repetition, short points (well under 2 minutes).
    pub fn quick() -> KafkaSizes {
        KafkaSizes {
            reps: 1,
            point_duration: Duration::from_millis(200),
            point_max_payload_bytes: 128 << 20,
            consume_fill_bytes: 16 << 20,
            latency_duration: Duration::from_millis(500),
            latency_warmup: Duration::from_millis(100),
            rd_duration: Duration::from_secs(1),
            sequential_writes: 2_000,
            pipeline_duration: Duration::from_millis(300),
            tcp_duration: Duration::from_millis(200),
            fio_sync_bytes: 1 << 20,
            ..KafkaSizes::full()
        }
    }
}

/// What to run, and against what.
#[derive(Clone, Debug)]
pub struct KafkaOptions {
    /// Sizes of the measurements.
    pub sizes: KafkaSizes,
    /// The broker under test.
    pub broker: BrokerSource,
    /// Ask librdkafka for `enable.idempotence=true` (when the broker advertises
    /// InitProducerId; otherwise the runs go without it and the rows say so).
    pub idempotence: bool,
    /// Directory on the data disk for the fio baseline (and the brokers' data).
    pub scratch: PathBuf,
    /// Block device of the data disk (`vda`), for its flush counter.
    pub device: Option<String>,
}

/// One experiment's rows, written as `<name>.csv|jsonl|md`.
#[derive(Clone, Debug)]
pub struct Section {
    /// File stem and heading (`produce`).
    pub name: String,
    /// The rows.
    pub rows: Vec<Row>,
}

/// The baselines every ratio divides by.
#[derive(Clone, Debug, PartialEq)]
pub struct Baselines {
    /// Loopback TCP stream, MB/s (median).
    pub stream_mb_s: f64,
    /// Per 1-record request size: (request bytes, round trips/s median, RTT p50 µs median).
    pub echo: Vec<(usize, f64, f64)>,
    /// fio fdatasync p50 of 4 KiB writes, µs (median).
    pub fdatasync_p50_us: f64,
}

impl Baselines {
    /// The echo figures for the request size closest to `request_bytes`.
    pub fn echo_for(&self, request_bytes: usize) -> Option<(usize, f64, f64)> {
        self.echo
            .iter()
            .copied()
            .min_by_key(|(bytes, _, _)| bytes.abs_diff(request_bytes))
    }
}

/// A row of this experiment, stamped with the load average at the time it is made.
fn row(workload: &str, backend: &str, params: String, unit: &str, reps: Vec<f64>) -> Row {
    Row {
        load_avg_1m: machine::load_avg_1m(),
        ..Row::new(EXPERIMENT, workload, backend, params, unit, reps)
    }
}

fn ratio_to(median: f64, name: &str, value: f64, unit: &str) -> Ratio {
    Ratio::of(median, name, value, unit)
}

/// The bytes a Produce request of `pre` takes on the wire (size prefix, header v1/v2, body)
/// at `version`.
pub fn request_frame_bytes(pre: &kw::PreEncoded, version: i16) -> usize {
    let header = RequestHeader::default()
        .with_request_api_key(0)
        .with_request_api_version(version)
        .with_client_id(Some(StrBytes::from_static_str("mk-bench")));
    let header_version =
        <kafka_protocol::messages::ProduceRequest as HeaderVersion>::header_version(version);
    let header_bytes = header.compute_size(header_version).unwrap_or(0);
    let body_bytes = pre.request.compute_size(version).unwrap_or(0);
    4 + header_bytes + body_bytes
}

/// Finds the row of `workload` whose params contain every `key=value` of `want`.
pub fn find<'a>(rows: &'a [Row], workload: &str, want: &[(&str, &str)]) -> Option<&'a Row> {
    rows.iter().find(|r| {
        r.workload == workload && want.iter().all(|(k, v)| param(&r.params, k) == Some(*v))
    })
}

fn topic_name(prefix: &str, n: &mut u64) -> String {
    *n += 1;
    format!("{prefix}-{n}")
}

/// Runs `f` on a fresh topic of `partitions` partitions and deletes it afterwards.
fn on_topic<T>(
    broker: &BrokerHandle,
    name: &str,
    partitions: i32,
    f: impl FnOnce(&str) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    create_topic(broker.addr, name, partitions)?;
    let out = f(name);
    delete_topic(broker.addr, name)?;
    out
}

fn policies(source: &BrokerSource, wanted: &[FlushPolicy]) -> Vec<FlushPolicy> {
    if source.can_choose_flush() {
        wanted.to_vec()
    } else {
        wanted.iter().take(1).copied().collect()
    }
}

fn median_index_of(reps: &[f64]) -> usize {
    Summary::median_index(reps).unwrap_or(0)
}

/// The baselines: loopback TCP stream, round trips at each 1-record request size, and fio
/// fdatasync latency on the data disk.
pub fn baselines(
    opts: &KafkaOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<(Section, Baselines), BenchError> {
    let s = &opts.sizes;
    let mut rows = Vec::new();
    let mut stream = Vec::new();
    for rep in 1..=s.reps {
        let r = tcp_stream(s.tcp_duration, 1 << 20)?;
        progress(&format!("tcp stream rep {rep}: {:.0} MB/s", r.mb_per_s()));
        stream.push(r.mb_per_s());
    }
    let stream_row = row(
        "tcp_stream",
        "tcp",
        "chunk_bytes=1048576 receiver=thread".into(),
        "MB/s",
        stream,
    );
    let stream_mb_s = stream_row.summary.median;
    rows.push(stream_row);

    let mut echo = Vec::new();
    for &value_bytes in &s.record_bytes {
        let pre = pre_encode("p", 0, value_bytes, 1);
        let request_bytes = request_frame_bytes(&pre, 9);
        let (mut rates, mut p50s, mut p99s) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..s.reps {
            let r = tcp_echo(request_bytes, ECHO_RESPONSE_BYTES, s.tcp_duration)?;
            rates.push(r.per_s());
            p50s.push(percentile(&r.rtt_ns, 0.5).unwrap_or(0) as f64 / 1e3);
            p99s.push(percentile(&r.rtt_ns, 0.99).unwrap_or(0) as f64 / 1e3);
        }
        let params = format!(
            "request_bytes={request_bytes} response_bytes={ECHO_RESPONSE_BYTES} record_bytes={value_bytes}"
        );
        let rate = row(
            "tcp_echo_rate",
            "tcp",
            params.clone(),
            "round trips/s",
            rates,
        );
        let p50 = row("tcp_echo_rtt_p50", "tcp", params.clone(), "µs", p50s);
        let p99 = row("tcp_echo_rtt_p99", "tcp", params, "µs", p99s);
        progress(&format!(
            "tcp echo {request_bytes} B: {:.0}/s, p50 {:.1} µs",
            rate.summary.median, p50.summary.median
        ));
        echo.push((request_bytes, rate.summary.median, p50.summary.median));
        rows.extend([rate, p50, p99]);
    }

    let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
    fs::create_dir_all(&opts.scratch)?;
    for _ in 0..s.reps {
        let file = opts.scratch.join("fio-sync.tmp");
        let out = fio::run(&fio::fdatasync_args(&file, s.fio_sync_bytes))?;
        let lat = fio::parse_sync_latency(&out)?;
        let _ = fs::remove_file(&file);
        p50s.push(lat.p50_ns / 1e3);
        p99s.push(lat.p99_ns / 1e3);
    }
    let params = format!("bs=4k fdatasync=1 size_bytes={}", s.fio_sync_bytes);
    let p50 = row("fio_fdatasync_p50", "fio", params.clone(), "µs", p50s);
    let p99 = row("fio_fdatasync_p99", "fio", params, "µs", p99s);
    progress(&format!("fio fdatasync p50 {:.0} µs", p50.summary.median));
    let fdatasync_p50_us = p50.summary.median;
    rows.extend([p50, p99]);
    Ok((
        Section {
            name: "baselines".into(),
            rows,
        },
        Baselines {
            stream_mb_s,
            echo,
            fdatasync_p50_us,
        },
    ))
}

/// A finished experiment's section.
fn section(name: &str, rows: Vec<Row>) -> Result<Section, BenchError> {
    Ok(Section {
        name: name.into(),
        rows,
    })
}

/// The limits of one throughput point.
fn point_limits(s: &KafkaSizes) -> Limits {
    Limits {
        duration: s.point_duration,
        max_payload_bytes: s.point_max_payload_bytes,
    }
}

/// Runs `measure` on every point `reps` times, repetitions the outer loop (so drift of the
/// machine falls on every point alike); returns each point's runs, in point order.
fn repeat_points<P, T>(
    reps: usize,
    points: &[P],
    mut measure: impl FnMut(usize, &P) -> Result<T, BenchError>,
) -> Result<Vec<Vec<T>>, BenchError> {
    let mut runs: Vec<Vec<T>> = points.iter().map(|_| Vec::new()).collect();
    for rep in 1..=reps {
        for (point, point_runs) in points.iter().zip(runs.iter_mut()) {
            point_runs.push(measure(rep, point)?);
        }
    }
    Ok(runs)
}

/// The row of `runs` measured by `value`, and the run at its median.
fn median_row<'a, T>(
    workload: &str,
    backend: &str,
    params: String,
    unit: &str,
    runs: &'a [T],
    value: impl Fn(&T) -> f64,
) -> (Row, &'a T) {
    let values: Vec<f64> = runs.iter().map(value).collect();
    let median = &runs[median_index_of(&values)];
    (row(workload, backend, params, unit, values), median)
}

/// Adds the ratio of `r`'s median to `value`.
fn push_ratio(r: &mut Row, name: &str, value: f64, unit: &str) {
    let ratio = ratio_to(r.summary.median, name, value, unit);
    r.baselines.push(ratio);
}

/// Adds the ratio of `r`'s median to that of the row of `workload` matching `want`, if any.
fn push_ratio_to_row(
    r: &mut Row,
    rows: &[Row],
    workload: &str,
    want: &[(&str, &str)],
    name: &str,
    unit: &str,
) {
    if let Some(other) = find(rows, workload, want) {
        push_ratio(r, name, other.summary.median, unit);
    }
}

/// The median of `runs` measured by `value` (NaN when there are none).
fn median_of<T>(runs: &[T], value: impl Fn(&T) -> f64) -> f64 {
    let values: Vec<f64> = runs.iter().map(value).collect();
    Summary::of(&values).map_or(f64::NAN, |x| x.median)
}

/// Sets a row's operations, device flushes and operations per flush.
fn set_syncs(r: &mut Row, ops: u64, syncs: Option<u64>) {
    r.ops = Some(ops);
    r.syncs = syncs;
    r.ops_per_sync = syncs.filter(|&x| x > 0).map(|x| ops as f64 / x as f64);
}

fn flushes(opts: &KafkaOptions) -> Option<u64> {
    opts.device.as_deref().and_then(machine::device_flushes)
}

/// Runs `f` and counts the data disk's flushes meanwhile (when the device is known).
fn with_flushes<T>(
    opts: &KafkaOptions,
    f: impl FnOnce() -> Result<T, BenchError>,
) -> Result<(T, Option<u64>), BenchError> {
    let before = flushes(opts);
    let out = f()?;
    Ok((out, before.zip(flushes(opts)).map(|(a, b)| b - a)))
}

/// Nanosecond percentile `q` of `v` in µs, `missing` when `v` is empty.
fn percentile_us(v: &[u64], q: f64, missing: f64) -> f64 {
    percentile(v, q).map_or(missing, |x| x as f64 / 1e3)
}

/// Whether librdkafka may ask for idempotence here: asked for and advertised.
fn idempotence_for(
    opts: &KafkaOptions,
    broker: &BrokerHandle,
) -> Result<(bool, &'static str), BenchError> {
    if !opts.idempotence {
        return Ok((false, "off"));
    }
    if kw::advertises_init_producer_id(broker.addr)? {
        Ok((true, "on"))
    } else {
        Ok((false, "unavailable"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(workload: &str, params: &str, median: f64, ratios: &[f64]) -> Row {
        let mut x = row(workload, "uring", params.into(), "u", vec![median]);
        x.baselines = ratios
            .iter()
            .map(|&q| Ratio {
                name: "b".into(),
                value: 1.0,
                unit: "u".into(),
                ratio: q,
            })
            .collect();
        x
    }

    #[test]
    fn find_matches_every_wanted_param() {
        let rows = vec![
            r(
                "produce",
                "record_bytes=1000 batch_records=1000 depth=8",
                1.0,
                &[],
            ),
            r(
                "produce",
                "record_bytes=1000 batch_records=1000 depth=1",
                2.0,
                &[],
            ),
        ];
        let hit = find(
            &rows,
            "produce",
            &[("batch_records", "1000"), ("depth", "1")],
        );
        assert_eq!(hit.map(|x| x.summary.median), Some(2.0));
        assert!(find(&rows, "produce", &[("depth", "2")]).is_none());
        assert!(find(&rows, "consume", &[]).is_none());
    }

    #[test]
    fn targets_are_judged_against_their_thresholds() {
        let rows = vec![
            r(
                "produce",
                "record_bytes=1000 batch_records=1000 depth=1",
                1.0,
                &[0.5],
            ),
            r(
                "produce",
                "record_bytes=100 batch_records=1 depth=1",
                1.0,
                &[0.01, 0.6],
            ),
            r(
                "consume",
                "record_bytes=100 fetch_max_bytes=1048576",
                1.0,
                &[0.39],
            ),
            r(
                "e2e_p50",
                "rate=10000 batch_records=1 flush=none",
                50.0,
                &[2.0],
            ),
            r("sequential_p50", "client=rdkafka", 180.0, &[]),
            r("confirmed_depth", "client=rdkafka depth=128", 1.0, &[25.0]),
        ];
        let t = evaluate_targets(&rows, 85.0);
        let met: Vec<Option<bool>> = t.iter().map(|x| x.met).collect();
        assert_eq!(
            met,
            vec![
                Some(true),
                Some(false),
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                None
            ]
        );
        assert!(t[4].measured.contains("+ 95.0 µs"), "{}", t[4].measured);
        let md = targets_markdown(&t);
        assert_eq!(md.lines().count(), 2 + t.len());
        assert!(md.contains("| **no** |"));
    }

    #[test]
    fn echo_baseline_is_the_closest_request_size() {
        let b = Baselines {
            stream_mb_s: 1.0,
            echo: vec![(200, 10.0, 30.0), (1100, 9.0, 31.0), (10_100, 5.0, 40.0)],
            fdatasync_p50_us: 80.0,
        };
        assert_eq!(b.echo_for(1000).map(|e| e.0), Some(1100));
        assert_eq!(b.echo_for(0).map(|e| e.0), Some(200));
        assert_eq!(b.echo_for(50_000).map(|e| e.0), Some(10_100));
    }

    #[test]
    fn request_frame_counts_the_batch_and_framing() {
        let pre = pre_encode("topic", 0, 1000, 1);
        let bytes = request_frame_bytes(&pre, 9);
        assert!(
            bytes > pre.batch_bytes && bytes < pre.batch_bytes + 120,
            "{bytes} vs {}",
            pre.batch_bytes
        );
    }

    #[test]
    fn quick_is_smaller_than_full() {
        let (q, f) = (KafkaSizes::quick(), KafkaSizes::full());
        assert!(q.reps <= f.reps && q.point_duration < f.point_duration);
        assert!(q.sequential_writes < f.sequential_writes);
        assert_eq!(f.sequential_writes, 100_000);
        assert_eq!(q.record_bytes, f.record_bytes, "quick covers every point");
    }

    #[test]
    fn charts_come_from_the_rows_of_each_sweep() {
        let sections = vec![Section {
            name: "produce".into(),
            rows: vec![
                r(
                    "produce",
                    "record_bytes=100 batch_records=1 depth=1",
                    3.0,
                    &[],
                ),
                r(
                    "produce",
                    "record_bytes=100 batch_records=10 depth=1",
                    30.0,
                    &[],
                ),
            ],
        }];
        let c = charts(&sections);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, "produce");
        assert_eq!(c[0].1.series[0].points, vec![(1.0, 3.0), (10.0, 30.0)]);
    }
}
