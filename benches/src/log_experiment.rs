//! The partition-log experiment of `mk-bench log`: append throughput, durable appends at
//! several concurrencies, and read throughput, on each chosen backend, against fio baselines
//! measured in the same run on the same filesystem.
//!
//! Contract:
//! - Inputs: [`LogOptions`]: sizes ([`LogSizes::full`] or [`LogSizes::quick`]), the backends,
//!   and a scratch directory on the filesystem under test.
//! - Outputs: [`Row`]s, baselines first, each with median/min/max over its repetitions, the
//!   ratio to its baseline, the monoio (io_uring) ÷ portable ratio, syncs, and the load average.
//! - Each repetition runs on a fresh single shard ([`on_fresh_shard`]) with a fresh log
//!   directory; backends alternate within each repetition so slow drift of a shared machine
//!   spreads over both. The workloads are the generic ones of [`crate::log_workloads`]: the only
//!   per-backend code is [`dispatch`] choosing the type.
//! - Never: asserts timings, or leaves its scratch files behind on success.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use minikafka_backend_portable::PortableBackend;
use serde::Serialize;

use crate::error::BenchError;
use crate::fio::{self, Direction};
use crate::log_workloads::{
    append_then_read, concurrent_appends, durable_config, throughput_config, BatchShape,
    Measurement, FETCH_MAX_BYTES,
};
use crate::machine;
use crate::report::{Ratio, Row};
use crate::shard::{on_fresh_shard, SyncCounter};
use crate::stats::Summary;

/// The experiment's name in rows and file names.
pub const EXPERIMENT: &str = "log";

/// A backend to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BackendKind {
    /// `minikafka_backend_monoio::MonoioBackend` (monoio, io_uring; Linux only).
    Monoio,
    /// `minikafka_backend_portable::PortableBackend` (smol, blocking thread pool).
    Portable,
}

impl BackendKind {
    /// The backend's short name (as `Backend::name` gives it).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Monoio => "monoio",
            BackendKind::Portable => "portable",
        }
    }
}

/// How much work each measurement does.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogSizes {
    /// Repetitions of every measurement (fio baselines included).
    pub reps: usize,
    /// Bytes of each record's value.
    pub record_value_bytes: usize,
    /// Budget of each throughput batch (records are added while they fit).
    pub batch_max_bytes: usize,
    /// Payload appended per repetition of the throughput workload.
    pub append_payload_bytes: u64,
    /// Concurrent appenders of the durable workload, one measurement each.
    pub appender_counts: Vec<usize>,
    /// How long each durable measurement appends.
    pub durable_duration: Duration,
    /// Size of the fio sequential jobs.
    pub fio_seq_bytes: u64,
    /// Size of the fio fdatasync job (4 KiB per sync).
    pub fio_sync_bytes: u64,
}

impl LogSizes {
    /// The full run (a few minutes on the development machine).
    pub fn full() -> LogSizes {
        LogSizes {
            reps: 3,
            record_value_bytes: 1024,
            batch_max_bytes: 1 << 20,
            append_payload_bytes: 2 << 30,
            appender_counts: vec![1, 64],
            durable_duration: Duration::from_secs(4),
            fio_seq_bytes: 1 << 30,
            fio_sync_bytes: 8 << 20,
        }
    }

    /// The smoke run for CI: one repetition of everything, small sizes (seconds).
    pub fn quick() -> LogSizes {
        LogSizes {
            reps: 1,
            append_payload_bytes: 256 << 20,
            durable_duration: Duration::from_secs(1),
            fio_seq_bytes: 256 << 20,
            fio_sync_bytes: 1 << 20,
            ..LogSizes::full()
        }
    }
}

/// What to run, and where.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// Sizes of the measurements.
    pub sizes: LogSizes,
    /// Backends to measure, in this order within each repetition.
    pub backends: Vec<BackendKind>,
    /// Scratch directory on the filesystem under test (created; emptied of what the run
    /// wrote).
    pub data_dir: PathBuf,
}

/// A workload that can run on any backend: [`dispatch`] picks the type.
pub trait Workload {
    /// What one run yields.
    type Output;
    /// Runs the workload on a fresh shard of `B`.
    fn run<B: SyncCounter>(self) -> Result<Self::Output, BenchError>;
}

/// Runs `workload` on the backend `kind` names.
pub fn dispatch<W: Workload>(kind: BackendKind, workload: W) -> Result<W::Output, BenchError> {
    match kind {
        BackendKind::Portable => workload.run::<PortableBackend>(),
        #[cfg(target_os = "linux")]
        BackendKind::Monoio => workload.run::<minikafka_backend_monoio::MonoioBackend>(),
        #[cfg(not(target_os = "linux"))]
        BackendKind::Monoio => Err(BenchError::Check(
            "the io_uring (monoio) backend exists on Linux only".into(),
        )),
    }
}

/// One repetition of the throughput workload: append, then read back.
struct AppendRead {
    dir: PathBuf,
    batch: Arc<BatchShape>,
    batch_count: u64,
}

impl Workload for AppendRead {
    type Output = (Measurement, Measurement);
    fn run<B: SyncCounter>(self) -> Result<Self::Output, BenchError> {
        let AppendRead {
            dir,
            batch,
            batch_count,
        } = self;
        on_fresh_shard::<B, _, _, _>(move |backend| {
            append_then_read(backend, dir, batch, batch_count, throughput_config())
        })?
    }
}

/// One repetition of the durable workload.
struct Durable {
    dir: PathBuf,
    batch: Arc<BatchShape>,
    appenders: usize,
    duration: Duration,
}

impl Workload for Durable {
    type Output = Measurement;
    fn run<B: SyncCounter>(self) -> Result<Measurement, BenchError> {
        let Durable {
            dir,
            batch,
            appenders,
            duration,
        } = self;
        on_fresh_shard::<B, _, _, _>(move |backend| {
            concurrent_appends(backend, dir, batch, appenders, duration, durable_config())
        })?
    }
}

/// Figures of the fio baselines, for the ratios.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Baselines {
    /// Buffered 1 MiB sequential write with a final fsync, MB/s (median).
    pub seq_write_mb_s: f64,
    /// The same without the final fsync (the page cache alone), MB/s (median).
    pub seq_write_cached_mb_s: f64,
    /// Buffered 1 MiB sequential read of the file just written (page cache), MB/s (median).
    pub seq_read_mb_s: f64,
    /// Median over repetitions of the fdatasync p50 latency of 4 KiB writes, ns.
    pub fdatasync_p50_ns: f64,
}

/// A row of this experiment, stamped with the load average at the time it is made.
fn row(workload: &str, backend: &str, params: String, unit: &str, reps: Vec<f64>) -> Row {
    Row {
        load_avg_1m: machine::load_avg_1m(),
        ..Row::new(EXPERIMENT, workload, backend, params, unit, reps)
    }
}

/// One repetition of the sequential fio baselines in `dir` (its filesystem is the one under
/// test): MB/s of a write with a final fsync, of a cached read of that file, and of a write
/// without the fsync.
fn fio_seq_rep(sizes: &LogSizes, dir: &Path) -> Result<[f64; 3], BenchError> {
    let file = dir.join("fio.tmp");
    let out = fio::run(&fio::seq_write_args(&file, sizes.fio_seq_bytes, true))?;
    let write = fio::parse_bandwidth(&out, Direction::Write)? / 1e6;
    let out = fio::run(&fio::seq_read_args(&file, sizes.fio_seq_bytes))?;
    let read = fio::parse_bandwidth(&out, Direction::Read)? / 1e6;
    fs::remove_file(&file)?;
    let out = fio::run(&fio::seq_write_args(&file, sizes.fio_seq_bytes, false))?;
    let cached = fio::parse_bandwidth(&out, Direction::Write)? / 1e6;
    fs::remove_file(&file)?;
    Ok([write, read, cached])
}

/// One repetition of the fio fdatasync baseline in `dir`: p50 and p99 in µs.
fn fio_sync_rep(sizes: &LogSizes, dir: &Path) -> Result<[f64; 2], BenchError> {
    let file = dir.join("fio-sync.tmp");
    let out = fio::run(&fio::fdatasync_args(&file, sizes.fio_sync_bytes))?;
    let lat = fio::parse_sync_latency(&out)?;
    fs::remove_file(&file)?;
    Ok([lat.p50_ns / 1e3, lat.p99_ns / 1e3])
}

/// The baseline rows and the figures the ratios divide by; `seq_load` and `sync_load` are
/// the load averages read after the last repetition of each kind of job.
fn baseline_rows(
    sizes: &LogSizes,
    seq: &[[f64; 3]],
    sync: &[[f64; 2]],
    seq_load: Option<f64>,
    sync_load: Option<f64>,
) -> (Vec<Row>, Baselines) {
    let column = |reps: &[[f64; 3]], i: usize| reps.iter().map(|r| r[i]).collect::<Vec<f64>>();
    let seq_params =
        |extra: &str| format!("bs=1M size_bytes={} direct=0{extra}", sizes.fio_seq_bytes);
    let sync_params = format!("bs=4k fdatasync=1 size_bytes={}", sizes.fio_sync_bytes);
    let mut rows = vec![
        row(
            "fio_seq_write",
            "fio",
            seq_params(" end_fsync=1"),
            "MB/s",
            column(seq, 0),
        ),
        row(
            "fio_seq_write_no_fsync",
            "fio",
            seq_params(" end_fsync=0"),
            "MB/s",
            column(seq, 2),
        ),
        row(
            "fio_seq_read_cached",
            "fio",
            seq_params(" invalidate=0"),
            "MB/s",
            column(seq, 1),
        ),
        row(
            "fio_fdatasync_p50",
            "fio",
            sync_params.clone(),
            "µs",
            sync.iter().map(|r| r[0]).collect(),
        ),
        row(
            "fio_fdatasync_p99",
            "fio",
            sync_params,
            "µs",
            sync.iter().map(|r| r[1]).collect(),
        ),
    ];
    for (i, r) in rows.iter_mut().enumerate() {
        r.load_avg_1m = if i < 3 { seq_load } else { sync_load };
    }
    let baselines = Baselines {
        seq_write_mb_s: rows[0].summary.median,
        seq_write_cached_mb_s: rows[1].summary.median,
        seq_read_mb_s: rows[2].summary.median,
        fdatasync_p50_ns: rows[3].summary.median * 1e3,
    };
    (rows, baselines)
}

/// Fills a row's side figures from the repetition whose value is the median.
fn with_side_figures(mut row: Row, runs: &[Measurement], with_syncs: bool) -> Row {
    row.load_avg_1m = runs.last().and_then(|m| m.load_avg_1m);
    if let Some(m) = Summary::median_index(&row.reps).and_then(|i| runs.get(i)) {
        row.ops = Some(m.ops);
        if with_syncs {
            row.syncs = Some(m.log_syncs);
            row.backend_syncs = Some(m.backend_syncs);
            row.ops_per_sync = (m.log_syncs > 0).then(|| m.ops as f64 / m.log_syncs as f64);
        }
    }
    row
}

/// Sets `vs_portable` on every backend row that has a portable row with the same workload
/// and parameters.
pub fn fill_vs_portable(rows: &mut [Row]) {
    let portable: Vec<(String, String, f64)> = rows
        .iter()
        .filter(|r| r.backend == BackendKind::Portable.name())
        .map(|r| (r.workload.clone(), r.params.clone(), r.summary.median))
        .collect();
    for row in rows.iter_mut().filter(|r| r.backend != "fio") {
        row.vs_portable = portable
            .iter()
            .find(|(w, p, _)| *w == row.workload && *p == row.params)
            .map(|(_, _, median)| row.summary.median / median);
    }
}

/// Runs the whole experiment and returns its rows: fio baselines, then append, read and
/// durable rows per backend. Within each repetition: the sequential fio jobs, then append and
/// read on every backend; later, per repetition: the fdatasync fio job, then the durable
/// workloads at every concurrency on every backend.
pub fn run(opts: &LogOptions, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>, BenchError> {
    let sizes = &opts.sizes;
    fs::create_dir_all(&opts.data_dir)?;
    // Each repetition measures its fio baseline right before the workloads it is the
    // baseline of, so a disk whose speed drifts during the run drifts under both.
    let mut seq = Vec::with_capacity(sizes.reps);
    let mut sync = Vec::with_capacity(sizes.reps);
    let (mut seq_load, mut sync_load) = (None, None);

    // Throughput: append then read, on every backend in turn within each repetition.
    let batch = Arc::new(BatchShape::build(
        sizes.record_value_bytes,
        sizes.batch_max_bytes,
    ));
    let batch_count = sizes.append_payload_bytes.div_ceil(batch.payload_bytes());
    let mut appends: Vec<Vec<Measurement>> = vec![Vec::new(); opts.backends.len()];
    let mut reads: Vec<Vec<Measurement>> = vec![Vec::new(); opts.backends.len()];
    for rep in 1..=sizes.reps {
        let [write, read, cached] = fio_seq_rep(sizes, &opts.data_dir)?;
        progress(&format!(
            "fio rep {rep}/{}: seq write {write:.0} MB/s (no fsync {cached:.0}), cached read {read:.0} MB/s",
            sizes.reps
        ));
        seq.push([write, read, cached]);
        seq_load = machine::load_avg_1m();
        for (i, &kind) in opts.backends.iter().enumerate() {
            let dir = opts.data_dir.join(format!("{}-append-{rep}", kind.name()));
            let workload = AppendRead {
                dir,
                batch: Arc::clone(&batch),
                batch_count,
            };
            let (append, read) = dispatch(kind, workload)?;
            progress(&format!(
                "append rep {rep}/{} {}: {:.0} MB/s; read {:.0} MB/s",
                sizes.reps,
                kind.name(),
                append.mb_per_s(),
                read.mb_per_s()
            ));
            appends[i].push(append);
            reads[i].push(read);
        }
    }

    // Durable appends at each concurrency.
    let small = Arc::new(BatchShape::build(sizes.record_value_bytes, 1));
    let mut durable: Vec<Vec<Vec<Measurement>>> =
        vec![vec![Vec::new(); sizes.appender_counts.len()]; opts.backends.len()];
    for rep in 1..=sizes.reps {
        let [p50, p99] = fio_sync_rep(sizes, &opts.data_dir)?;
        progress(&format!(
            "fio rep {rep}/{}: fdatasync p50 {p50:.0} µs p99 {p99:.0} µs",
            sizes.reps
        ));
        sync.push([p50, p99]);
        sync_load = machine::load_avg_1m();
        for (c, &appenders) in sizes.appender_counts.iter().enumerate() {
            for (i, &kind) in opts.backends.iter().enumerate() {
                let dir = opts
                    .data_dir
                    .join(format!("{}-durable{appenders}-{rep}", kind.name()));
                let workload = Durable {
                    dir,
                    batch: Arc::clone(&small),
                    appenders,
                    duration: sizes.durable_duration,
                };
                let m = dispatch(kind, workload)?;
                progress(&format!(
                    "durable rep {rep}/{} {} x{appenders}: {:.0} appends/s, {} syncs ({:.1} appends/sync)",
                    sizes.reps,
                    kind.name(),
                    m.ops_per_s(),
                    m.log_syncs,
                    m.ops as f64 / m.log_syncs.max(1) as f64
                ));
                durable[i][c].push(m);
            }
        }
    }

    let (mut rows, base) = baseline_rows(sizes, &seq, &sync, seq_load, sync_load);
    let append_params = format!(
        "record_bytes={} batch_records={} batch_bytes={} payload_bytes={} flush=none segment_bytes={}",
        sizes.record_value_bytes,
        batch.record_count,
        batch.bytes.len(),
        batch_count * batch.payload_bytes(),
        throughput_config().segment_bytes
    );
    let read_params = format!(
        "fetch_max_bytes={FETCH_MAX_BYTES} payload_bytes={} page_cache=hot",
        batch_count * batch.payload_bytes()
    );
    let sync_rate = 1e9 / base.fdatasync_p50_ns;
    for (i, kind) in opts.backends.iter().enumerate() {
        let values: Vec<f64> = appends[i].iter().map(Measurement::mb_per_s).collect();
        let mut r = row("append", kind.name(), append_params.clone(), "MB/s", values);
        r.baselines = vec![
            Ratio::of(
                r.summary.median,
                "fio seq write",
                base.seq_write_mb_s,
                "MB/s",
            ),
            Ratio::of(
                r.summary.median,
                "fio seq write no fsync",
                base.seq_write_cached_mb_s,
                "MB/s",
            ),
        ];
        rows.push(with_side_figures(r, &appends[i], true));

        let values: Vec<f64> = reads[i].iter().map(Measurement::mb_per_s).collect();
        let mut r = row("read", kind.name(), read_params.clone(), "MB/s", values);
        r.baselines = vec![Ratio::of(
            r.summary.median,
            "fio seq read cached",
            base.seq_read_mb_s,
            "MB/s",
        )];
        rows.push(with_side_figures(r, &reads[i], false));

        for (c, &appenders) in sizes.appender_counts.iter().enumerate() {
            let runs = &durable[i][c];
            let values: Vec<f64> = runs.iter().map(Measurement::ops_per_s).collect();
            let params = format!(
                "appenders={appenders} record_bytes={} batch_records=1 flush=fsync duration_s={}",
                sizes.record_value_bytes,
                sizes.durable_duration.as_secs_f64()
            );
            let mut r = row("durable_append", kind.name(), params, "appends/s", values);
            // appends/s ÷ (1 / fdatasync p50) = appends per fdatasync latency.
            r.baselines = vec![Ratio::of(
                r.summary.median,
                "1/fio fdatasync p50",
                sync_rate,
                "syncs/s",
            )];
            rows.push(with_side_figures(r, runs, true));
        }
    }
    fill_vs_portable(&mut rows);
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend_row(workload: &str, backend: &str, median: f64) -> Row {
        row(workload, backend, "p=1".into(), "MB/s", vec![median])
    }

    #[test]
    fn vs_portable_divides_by_the_matching_portable_row() {
        let mut rows = vec![
            backend_row("fio_seq_write", "fio", 500.0),
            backend_row("append", "monoio", 300.0),
            backend_row("append", "portable", 200.0),
            backend_row("read", "monoio", 100.0),
        ];
        fill_vs_portable(&mut rows);
        assert_eq!(rows[0].vs_portable, None);
        assert_eq!(rows[1].vs_portable, Some(1.5));
        assert_eq!(rows[2].vs_portable, Some(1.0));
        assert_eq!(rows[3].vs_portable, None, "no portable read row");
    }

    #[test]
    fn side_figures_come_from_the_median_repetition() {
        let m = |ops: u64, syncs: u64| Measurement {
            elapsed_s: 1.0,
            ops,
            log_syncs: syncs,
            backend_syncs: syncs,
            ..Measurement::default()
        };
        let runs = [m(300, 10), m(100, 50), m(200, 20)];
        let r = row(
            "durable_append",
            "monoio",
            "p".into(),
            "appends/s",
            vec![300.0, 100.0, 200.0],
        );
        let r = with_side_figures(r, &runs, true);
        assert_eq!(
            (r.ops, r.syncs, r.ops_per_sync),
            (Some(200), Some(20), Some(10.0))
        );
    }

    #[test]
    fn quick_is_smaller_than_full_in_every_size() {
        let (q, f) = (LogSizes::quick(), LogSizes::full());
        assert!(q.reps <= f.reps);
        assert!(q.append_payload_bytes < f.append_payload_bytes);
        assert!(q.durable_duration < f.durable_duration);
        assert!(q.fio_seq_bytes < f.fio_seq_bytes && q.fio_sync_bytes < f.fio_sync_bytes);
    }
}
