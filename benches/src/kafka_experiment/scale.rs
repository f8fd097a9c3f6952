//! Scale: how the cost of the work grows with partitions and connections. For every pair of
//! a partition count (1, 100, 1,000, 4,000) and a connection count (1, 10, 100, 1,000), on a
//! fresh broker (ours, and the peer when one is given): produce from every connection for a
//! fixed time, consume everything back, then kill -9 and time the restart.
//!
//! Contract:
//! - Inputs: [`ScaleOptions`]: sizes ([`ScaleSizes::full`] or `quick`), our broker and, when
//!   given, the peer. Flush policy `none` on both (the curves show the broker's own cost of
//!   partitions and connections, not the disk's; the side-by-side covers `fsync`).
//! - Per point: a fresh broker on a fresh data directory and a topic of P partitions;
//!   connection `i` produces to its share of the partitions ([`scale_load::shares`]), one
//!   request of `batch_records` × `value_bytes` in flight at a time, acks=all, for
//!   `produce_duration`; then as many consumer connections read every partition back from
//!   offset 0 (capped at `consume_duration`); then the broker is killed with SIGKILL and
//!   started again on the same directory, timed until Metadata lists every partition led
//!   (probed every millisecond), and every partition's latest offset is checked against the
//!   records written to it (nothing acknowledged lost, I8).
//! - Figures per point: produce and consume records/s and p99 request latency, broker CPU
//!   per record of each phase (`/proc`), each shard thread's share of a core during the
//!   produce phase (`/proc/<pid>/task`: is one shard saturated while another idles?), peak
//!   RSS of the broker before the kill (`VmHWM`), the time until Metadata answers after the
//!   restart, and the load average.
//! - Never: asserts a timing; a produce error, a gap in offsets or a lost record is an error.

use bytes::Bytes;
use minikafka_client::admin::{Admin, OffsetSpec};

use super::side_by_side::{Contender, Side};
use super::*;
use crate::broker_proc::PeerCommand;
use crate::kafka_experiment::restart;
use crate::plots::Series;
use crate::proc_stats;
use crate::report::fmt_figure;
use crate::scale_load::{self, ManyResult};

/// Longest a restarted broker may take to answer Metadata.
const RESTART_TIMEOUT: Duration = Duration::from_secs(300);

/// Sizes of the scale experiment.
#[derive(Clone, Debug, Serialize)]
pub struct ScaleSizes {
    /// Partition counts of the topic.
    pub partitions: Vec<i32>,
    /// Connection counts (each producing, then each consuming).
    pub connections: Vec<usize>,
    /// Records per Produce request.
    pub batch_records: usize,
    /// Value size of every record.
    pub value_bytes: usize,
    /// How long every connection produces.
    pub produce_duration: Duration,
    /// Longest the consumers read.
    pub consume_duration: Duration,
}

impl ScaleSizes {
    /// The curves: 1–4,000 partitions × 1–1,000 connections, 2 s of produce each.
    pub fn full() -> ScaleSizes {
        ScaleSizes {
            partitions: vec![1, 100, 1000, 4000],
            connections: vec![1, 10, 100, 1000],
            batch_records: 10,
            value_bytes: 100,
            produce_duration: Duration::from_secs(2),
            consume_duration: Duration::from_secs(2),
        }
    }

    /// The CI smoke run: four small points (seconds).
    pub fn quick() -> ScaleSizes {
        ScaleSizes {
            partitions: vec![1, 100],
            connections: vec![1, 10],
            produce_duration: Duration::from_millis(200),
            consume_duration: Duration::from_millis(500),
            ..ScaleSizes::full()
        }
    }
}

/// What to run, and against what.
#[derive(Clone, Debug)]
pub struct ScaleOptions {
    /// Sizes of the runs.
    pub sizes: ScaleSizes,
    /// Our broker (started by the harness).
    pub ours: BrokerSource,
    /// The peer broker, when compared.
    pub peer: Option<PeerCommand>,
}

/// One point on one broker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleRun {
    /// Ours or the peer.
    pub side: Side,
    /// The broker (`minikafka uring`, `kfake`).
    pub broker: String,
    /// Partitions of the topic.
    pub partitions: i32,
    /// Connections producing, then consuming.
    pub connections: usize,
    /// Records acknowledged.
    pub produced: u64,
    /// Produce throughput, records/s.
    pub produce_records_per_s: f64,
    /// Produce request latency p99, µs.
    pub produce_p99_us: f64,
    /// Records consumed.
    pub consumed: u64,
    /// Consume throughput, records/s.
    pub consume_records_per_s: f64,
    /// Fetch (poll) latency p99, µs.
    pub consume_p99_us: f64,
    /// Broker CPU per record produced, µs.
    pub produce_cpu_us_per_record: Option<f64>,
    /// Broker CPU per record consumed, µs.
    pub consume_cpu_us_per_record: Option<f64>,
    /// The share of a core each shard thread used during the produce phase, in shard order
    /// (empty for a broker without named shard threads, such as the peer).
    pub produce_shard_core_shares: Vec<f64>,
    /// Peak RSS of the broker at the end of the produce phase, MB.
    pub produce_peak_rss_mb: Option<f64>,
    /// Peak RSS of the broker before the kill (produce and consume), MB.
    pub peak_rss_mb: Option<f64>,
    /// Seconds from the restarted process's start until Metadata lists every partition.
    pub restart_s: f64,
    /// 1-minute load average at the end of the point.
    pub load_avg_1m: Option<f64>,
}

fn us_p99(sorted_ns: &[u64]) -> f64 {
    percentile(sorted_ns, 0.99).map_or(f64::NAN, |x| x as f64 / 1e3)
}

fn cpu_per_record(before: Option<f64>, after: Option<f64>, records: u64) -> Option<f64> {
    before
        .zip(after)
        .filter(|_| records > 0)
        .map(|(a, b)| (b - a) * 1e6 / records as f64)
}

/// Fails unless every partition of `topic` ends where `written` says (I8).
fn check_latest_offsets(
    addr: std::net::SocketAddr,
    topic: &str,
    written: &[u64],
) -> Result<(), BenchError> {
    smol::block_on(async {
        let mut admin = Admin::new(kw::connect(addr, 1).await?);
        let offsets = admin.list_offsets(topic, OffsetSpec::Latest).await?;
        for o in &offsets {
            let want = written.get(o.partition as usize).copied().unwrap_or(0) as i64;
            if o.offset.map(|x| x.0) != Some(want) {
                return Err(BenchError::Check(format!(
                    "after the restart partition {} of {topic} ends at {:?}, not {want} (I8)",
                    o.partition, o.offset
                )));
            }
        }
        Ok(())
    })
}

/// One point on a fresh broker of `contender`.
fn run_point(
    contender: &Contender<'_>,
    partitions: i32,
    connections: usize,
    s: &ScaleSizes,
) -> Result<ScaleRun, BenchError> {
    let mut broker = contender.start(false, &format!("scale-p{partitions}-c{connections}"))?;
    let topic = format!("scale-{partitions}-{connections}");
    create_topic(broker.addr, &topic, partitions)?;
    let pid = broker.pid();
    let cpu_now = || pid.and_then(proc_stats::cpu_seconds);
    let batch = Bytes::from(kw::encode_batch(
        s.batch_records,
        s.value_bytes,
        0,
        kw::now_ms(),
    ));
    let shares = scale_load::shares(partitions, connections);
    let shard_cpu = || {
        pid.and_then(|p| proc_stats::thread_cpu_seconds(p, &proc_stats::SHARD_THREAD_PREFIXES))
            .unwrap_or_default()
    };
    let before = cpu_now();
    let shards_before = shard_cpu();
    let produce_started = std::time::Instant::now();
    let produced: ManyResult = scale_load::produce_many(
        broker.addr,
        &topic,
        partitions,
        shares.clone(),
        batch,
        s.batch_records as u64,
        s.produce_duration,
    )?;
    let after_produce = cpu_now();
    let produce_shard_core_shares = proc_stats::thread_core_shares(
        &shards_before,
        &shard_cpu(),
        produce_started.elapsed().as_secs_f64(),
    );
    let rss_mb = || {
        pid.and_then(proc_stats::peak_rss_bytes)
            .map(|b| b as f64 / 1e6)
    };
    let produce_peak_rss_mb = rss_mb();
    let consumed = scale_load::consume_many(
        broker.addr,
        &topic,
        shares,
        &produced.per_partition,
        s.consume_duration,
    )?;
    let after_consume = cpu_now();
    let peak_rss_mb = rss_mb();
    let took = broker.kill_and_restart(
        |addr| restart::answers_with_every_partition(addr, &topic, partitions),
        RESTART_TIMEOUT,
    )?;
    check_latest_offsets(broker.addr, &topic, &produced.per_partition)?;
    Ok(ScaleRun {
        side: contender.side(),
        broker: contender.broker_name(&broker),
        partitions,
        connections,
        produced: produced.records,
        produce_records_per_s: produced.records_per_s(),
        produce_p99_us: us_p99(&produced.latencies_ns),
        consumed: consumed.records,
        consume_records_per_s: consumed.records_per_s(),
        consume_p99_us: us_p99(&consumed.latencies_ns),
        produce_cpu_us_per_record: cpu_per_record(before, after_produce, produced.records),
        consume_cpu_us_per_record: cpu_per_record(after_produce, after_consume, consumed.records),
        produce_shard_core_shares,
        produce_peak_rss_mb,
        peak_rss_mb,
        restart_s: took.as_secs_f64(),
        load_avg_1m: machine::load_avg_1m(),
    })
}

/// Every point on our broker and (when given) the peer, partitions the outer loop; the two
/// brokers alternate which goes first from point to point. `on_run` sees each run as soon as
/// it is done.
pub fn run(
    opts: &ScaleOptions,
    progress: &mut dyn FnMut(&str),
    on_run: &mut dyn FnMut(&ScaleRun) -> Result<(), BenchError>,
) -> Result<Vec<ScaleRun>, BenchError> {
    let s = &opts.sizes;
    let mut runs = Vec::new();
    let mut point = 0usize;
    for &partitions in &s.partitions {
        for &connections in &s.connections {
            point += 1;
            let mut order = vec![Contender::Ours(&opts.ours)];
            if let Some(peer) = &opts.peer {
                order.push(Contender::Peer(peer));
                if point.is_multiple_of(2) {
                    order.reverse();
                }
            }
            for contender in &order {
                let r = run_point(contender, partitions, connections, s)?;
                progress(&format!(
                    "{} partitions {partitions} connections {connections}: produce {} rec/s \
                     (p99 {} µs, shard cores {}), consume {} rec/s (p99 {} µs), peak RSS {} MB, \
                     restart {} s",
                    r.broker,
                    fmt_figure(r.produce_records_per_s),
                    fmt_figure(r.produce_p99_us),
                    shares(&r.produce_shard_core_shares),
                    fmt_figure(r.consume_records_per_s),
                    fmt_figure(r.consume_p99_us),
                    r.peak_rss_mb.map_or("–".into(), fmt_figure),
                    fmt_figure(r.restart_s),
                ));
                on_run(&r)?;
                runs.push(r);
            }
        }
    }
    Ok(runs)
}

/// Shares of a core, `0.93 / 0.41`, or `–` when there are none.
fn shares(v: &[f64]) -> String {
    if v.is_empty() {
        return "–".into();
    }
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), fmt_figure)
}

/// The table: one line per broker and point.
pub fn table_markdown(runs: &[ScaleRun]) -> String {
    let mut md = String::from(
        "| broker | partitions | connections | produce (records/s) | produce p99 (µs) | \
         consume (records/s) | consume p99 (µs) | broker CPU per record, produce / consume (µs) \
         | shard threads' share of a core, produce | peak RSS, after produce / after consume (MB) \
         | restart until Metadata (s) | load (1 min) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in runs {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} / {} | {} | {} |\n",
            r.broker,
            r.partitions,
            r.connections,
            fmt_figure(r.produce_records_per_s),
            fmt_figure(r.produce_p99_us),
            fmt_figure(r.consume_records_per_s),
            fmt_figure(r.consume_p99_us),
            opt(r.produce_cpu_us_per_record),
            opt(r.consume_cpu_us_per_record),
            shares(&r.produce_shard_core_shares),
            opt(r.produce_peak_rss_mb),
            opt(r.peak_rss_mb),
            fmt_figure(r.restart_s),
            r.load_avg_1m.map_or("–".into(), |l| format!("{l:.1}")),
        ));
    }
    md
}

/// One figure of a run, for the charts.
type Figure = fn(&ScaleRun) -> Option<f64>;

/// The charted figures: file name, title, unit, and whether the x axis is connections
/// (lines per broker and partition count) or partitions (lines per broker and connection
/// count).
const FIGURES: [(&str, &str, &str, bool, Figure); 7] = [
    ("produce_throughput", "produce", "records/s", true, |r| {
        Some(r.produce_records_per_s)
    }),
    (
        "produce_p99",
        "produce request latency p99",
        "µs",
        true,
        |r| Some(r.produce_p99_us),
    ),
    ("consume_throughput", "consume", "records/s", true, |r| {
        Some(r.consume_records_per_s)
    }),
    ("consume_p99", "fetch latency p99", "µs", true, |r| {
        Some(r.consume_p99_us)
    }),
    (
        "produce_cpu_per_record",
        "broker CPU per record produced",
        "µs",
        true,
        |r| r.produce_cpu_us_per_record,
    ),
    ("peak_rss", "broker peak RSS", "MB", false, |r| {
        r.peak_rss_mb
    }),
    (
        "restart",
        "restart after kill -9, until Metadata answers",
        "s",
        false,
        |r| Some(r.restart_s),
    ),
];

/// The charts: per figure, one line per broker and partition count over connections (or per
/// broker and connection count over partitions, for RSS and restart), log axes.
pub fn charts(runs: &[ScaleRun]) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    for (file, title, unit, over_connections, figure) in FIGURES {
        let mut series: Vec<Series> = Vec::new();
        for r in runs {
            let Some(y) = figure(r) else { continue };
            let (label, x) = if over_connections {
                (
                    format!("{}, {} partitions", r.broker, r.partitions),
                    r.connections as f64,
                )
            } else {
                (
                    format!("{}, {} connections", r.broker, r.connections),
                    r.partitions as f64,
                )
            };
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((x, y)),
                None => series.push(Series {
                    label,
                    points: vec![(x, y)],
                }),
            }
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        out.push((
            file.to_owned(),
            Chart {
                title: format!("scale: {title}"),
                x_label: if over_connections {
                    "connections".into()
                } else {
                    "partitions".into()
                },
                y_label: unit.into(),
                log_x: true,
                log_y: true,
                series,
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(broker: &str, partitions: i32, connections: usize, produce: f64) -> ScaleRun {
        ScaleRun {
            side: if broker == "kfake" {
                Side::Peer
            } else {
                Side::Ours
            },
            broker: broker.into(),
            partitions,
            connections,
            produced: 100,
            produce_records_per_s: produce,
            produce_p99_us: 500.0,
            consumed: 100,
            consume_records_per_s: 2.0 * produce,
            consume_p99_us: 300.0,
            produce_cpu_us_per_record: Some(1.5),
            consume_cpu_us_per_record: None,
            produce_shard_core_shares: if broker == "kfake" {
                vec![]
            } else {
                vec![0.9, 0.4]
            },
            produce_peak_rss_mb: Some(10.0),
            peak_rss_mb: Some(20.0 + partitions as f64 / 100.0),
            restart_s: 0.1,
            load_avg_1m: Some(3.0),
        }
    }

    #[test]
    fn the_table_has_a_line_per_broker_and_point() {
        let runs = vec![
            run("minikafka uring", 1, 10, 1000.0),
            run("kfake", 1, 10, 900.0),
        ];
        let md = table_markdown(&runs);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 4, "{md}");
        assert!(
            lines[2].starts_with("| minikafka uring | 1 | 10 | 1000 |"),
            "{}",
            lines[2]
        );
        assert!(
            lines[2].contains("| 1.50 / – | 0.90 / 0.40 |"),
            "{}",
            lines[2]
        );
        assert!(lines[3].contains("| 1.50 / – | – |"), "{}", lines[3]);
    }

    #[test]
    fn charts_draw_curves_over_connections_and_partitions() {
        let runs = vec![
            run("minikafka uring", 100, 10, 2000.0),
            run("minikafka uring", 100, 1, 1000.0),
            run("minikafka uring", 1, 1, 500.0),
            run("kfake", 100, 1, 900.0),
        ];
        let c = charts(&runs);
        assert_eq!(c.len(), FIGURES.len());
        let produce = &c[0].1;
        assert_eq!(produce.x_label, "connections");
        let ours_100: &Series = produce
            .series
            .iter()
            .find(|s| s.label == "minikafka uring, 100 partitions")
            .expect("a curve per broker and partition count");
        assert_eq!(ours_100.points, vec![(1.0, 1000.0), (10.0, 2000.0)]);
        assert_eq!(produce.series.len(), 3);
        let rss = &c
            .iter()
            .find(|(n, _)| n == "peak_rss")
            .expect("rss chart")
            .1;
        assert_eq!(rss.x_label, "partitions");
        let ours_1 = rss
            .series
            .iter()
            .find(|s| s.label == "minikafka uring, 1 connections")
            .expect("a curve per broker and connection count");
        assert_eq!(ours_1.points, vec![(1.0, 20.01), (100.0, 21.0)]);
    }

    #[test]
    fn quick_is_a_smaller_grid_of_the_same_shape() {
        let (q, f) = (ScaleSizes::quick(), ScaleSizes::full());
        assert_eq!(f.partitions, vec![1, 100, 1000, 4000]);
        assert_eq!(f.connections, vec![1, 10, 100, 1000]);
        assert!(
            q.partitions.len() * q.connections.len() < f.partitions.len() * f.connections.len()
        );
        assert!(q.produce_duration < f.produce_duration);
        assert_eq!(cpu_per_record(Some(1.0), Some(1.5), 1000), Some(500.0));
        assert_eq!(cpu_per_record(Some(1.0), Some(1.5), 0), None);
    }
}
