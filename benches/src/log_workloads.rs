//! The partition-log workloads, written once, generic over the backend.
//!
//! Contract:
//! - Inputs: a backend `B` on a shard freshly started for this measurement
//!   (see [`crate::shard::on_fresh_shard`]), an empty directory, a pre-built batch
//!   ([`BatchShape`]) and the workload's size.
//! - Outputs: [`Measurement`]s: elapsed wall time, payload bytes (record values only),
//!   operations, syncs counted by the log and by the backend, and the 1-minute load average
//!   read right after the timed part.
//! - Timed: only the appends (or reads) themselves. Opening, closing (which syncs under
//!   every policy) and removing the directory are outside the clock.
//! - Never: asserts on timings. It does check outcomes: every appended record is read back,
//!   in order, with dense offsets (I1), or the workload fails.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::record::{BatchBuilder, BatchHeader, NewRecord};
use minikafka_core::types::Offset;

use crate::error::BenchError;
use crate::machine;
use crate::shard::SyncCounter;

/// Timestamp written into every record (a fixed value: the log never reads a clock).
const RECORD_TIMESTAMP_MS: i64 = 1_700_000_000_000;
/// Upper bound of the bytes one record adds to a batch beyond its value: attributes,
/// timestamp and offset deltas, null key, value length, header count, record length.
const RECORD_OVERHEAD_MAX_BYTES: usize = 24;
/// Byte budget of each fetch in the read workload.
pub const FETCH_MAX_BYTES: usize = 1 << 20;

/// A batch built once and appended many times (cloned per append: `append` consumes it).
#[derive(Clone, Debug)]
pub struct BatchShape {
    /// The encoded batch (base offset 0; the log patches it).
    pub bytes: Vec<u8>,
    /// Records in the batch.
    pub record_count: u64,
    /// Bytes of each record's value (the payload).
    pub value_bytes: usize,
}

impl BatchShape {
    /// A batch of as many records with a `value_bytes`-byte value (and no key) as fit in
    /// `max_batch_bytes`, at least one.
    pub fn build(value_bytes: usize, max_batch_bytes: usize) -> BatchShape {
        let value: Vec<u8> = (0..value_bytes).map(|i| (i * 131 % 251) as u8).collect();
        let mut builder = BatchBuilder::new();
        loop {
            builder.push(&NewRecord {
                key: None,
                value: Some(&value),
                headers: Vec::new(),
                timestamp_ms: RECORD_TIMESTAMP_MS,
            });
            if builder.encoded_bytes() + value_bytes + RECORD_OVERHEAD_MAX_BYTES > max_batch_bytes {
                break;
            }
        }
        BatchShape {
            bytes: builder.build(Offset(0)),
            record_count: builder.len() as u64,
            value_bytes,
        }
    }

    /// Payload bytes (record values) in one batch.
    pub fn payload_bytes(&self) -> u64 {
        self.record_count * self.value_bytes as u64
    }
}

/// What one timed workload did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Wall time of the timed part, in seconds.
    pub elapsed_s: f64,
    /// Record value bytes appended or read.
    pub payload_bytes: u64,
    /// Appends or fetches completed.
    pub ops: u64,
    /// Syncs the partition log issued during the timed part.
    pub log_syncs: u64,
    /// `fdatasync`s the backend counted during the timed part.
    pub backend_syncs: u64,
    /// The 1-minute load average right after the timed part.
    pub load_avg_1m: Option<f64>,
}

impl Measurement {
    /// Payload throughput in decimal megabytes per second.
    pub fn mb_per_s(&self) -> f64 {
        self.payload_bytes as f64 / 1e6 / self.elapsed_s
    }

    /// Operations per second.
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.elapsed_s
    }
}

/// The log settings of the throughput workload: flush policy `none`, and segments as large
/// as the format allows (I6) so that no roll, which syncs the sealed segment (I5), lands
/// inside the timed loop.
pub fn throughput_config() -> LogConfig {
    LogConfig {
        segment_bytes: u64::from(u32::MAX),
        flush: FlushPolicy::None,
        ..LogConfig::default()
    }
}

/// The log settings of the durable workload: flush policy `fsync` (group commit).
pub fn durable_config() -> LogConfig {
    LogConfig {
        flush: FlushPolicy::Fsync,
        ..LogConfig::default()
    }
}

async fn open_fresh<B: SyncCounter>(
    backend: &B,
    dir: &Path,
    config: LogConfig,
) -> Result<PartitionLog<B>, BenchError> {
    let log = PartitionLog::open(backend.clone(), dir, config, false, RECORD_TIMESTAMP_MS).await?;
    if log.high_watermark() != Offset(0) {
        return Err(BenchError::Check(format!(
            "{dir:?} is not empty (high watermark {})",
            log.high_watermark().0
        )));
    }
    Ok(log)
}

async fn close_and_remove<B: SyncCounter>(
    backend: &B,
    log: &PartitionLog<B>,
    dir: &Path,
) -> Result<(), BenchError> {
    log.close().await?;
    backend.remove_dir_all(dir).await?;
    Ok(())
}

/// Appends `batch_count` copies of `batch` to a fresh log in `dir`, then reads the whole
/// partition back with sequential fetches of [`FETCH_MAX_BYTES`]. Returns the append and
/// the read measurements; removes `dir` afterwards.
pub async fn append_then_read<B: SyncCounter>(
    backend: B,
    dir: PathBuf,
    batch: Arc<BatchShape>,
    batch_count: u64,
    config: LogConfig,
) -> Result<(Measurement, Measurement), BenchError> {
    let log = open_fresh(&backend, &dir, config).await?;

    let log_syncs = log.sync_count();
    let backend_syncs = backend.syncs_issued();
    let start = Instant::now();
    for _ in 0..batch_count {
        log.append(batch.bytes.clone(), RECORD_TIMESTAMP_MS).await?;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let append = Measurement {
        elapsed_s,
        payload_bytes: batch_count * batch.payload_bytes(),
        ops: batch_count,
        log_syncs: log.sync_count() - log_syncs,
        backend_syncs: backend.syncs_issued() - backend_syncs,
        load_avg_1m: machine::load_avg_1m(),
    };

    let end = log.high_watermark();
    let expected_end = Offset((batch_count * batch.record_count) as i64);
    if end != expected_end {
        return Err(BenchError::Check(format!(
            "high watermark {} after appending {} records (I1)",
            end.0, expected_end.0
        )));
    }
    let mut next = Offset(0);
    let mut fetches = 0u64;
    let start = Instant::now();
    while next < end {
        let result = log.read(next, FETCH_MAX_BYTES).await?;
        next = walk_batches(&result.bytes, next)?;
        fetches += 1;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let read = Measurement {
        elapsed_s,
        payload_bytes: next.0 as u64 * batch.value_bytes as u64,
        ops: fetches,
        log_syncs: 0,
        backend_syncs: 0,
        load_avg_1m: machine::load_avg_1m(),
    };

    close_and_remove(&backend, &log, &dir).await?;
    Ok((append, read))
}

/// Walks the batch headers of a fetch that started at `from`, checking that offsets continue
/// densely (I1), and returns the offset after the last batch.
pub fn walk_batches(bytes: &[u8], from: Offset) -> Result<Offset, BenchError> {
    if bytes.is_empty() {
        return Err(BenchError::Check(format!(
            "empty fetch at offset {} below the high watermark",
            from.0
        )));
    }
    let mut at = 0usize;
    let mut next = from;
    while at < bytes.len() {
        let header = BatchHeader::parse(&bytes[at..])
            .map_err(|e| BenchError::Check(format!("fetched batch at byte {at}: {e}")))?;
        if header.base_offset != next {
            return Err(BenchError::Check(format!(
                "batch at byte {at} starts at offset {}, expected {} (I1)",
                header.base_offset.0, next.0
            )));
        }
        at += header.total_bytes();
        next = header.next_offset();
    }
    if at != bytes.len() {
        return Err(BenchError::Check("fetch ends inside a batch (I2)".into()));
    }
    Ok(next)
}

/// Runs `appenders` tasks on this shard, each appending `batch` to one fresh log in `dir`
/// (flush policy from `config`, normally `fsync`) until `duration` has passed (each appends
/// at least once). Counts the
/// appends acknowledged and the syncs issued; removes `dir` afterwards.
pub async fn concurrent_appends<B: SyncCounter>(
    backend: B,
    dir: PathBuf,
    batch: Arc<BatchShape>,
    appenders: usize,
    duration: Duration,
    config: LogConfig,
) -> Result<Measurement, BenchError> {
    let log = Rc::new(open_fresh(&backend, &dir, config).await?);
    let log_syncs = log.sync_count();
    let backend_syncs = backend.syncs_issued();
    let start = Instant::now();
    let deadline = start + duration;
    let mut done = Vec::with_capacity(appenders);
    for _ in 0..appenders {
        let (tx, rx) = oneshot::channel();
        let log = Rc::clone(&log);
        let batch = Arc::clone(&batch);
        backend.spawn_local(async move {
            // At least one append each, so every appender takes part however late it starts.
            let mut count = 0u64;
            let outcome = loop {
                match log.append(batch.bytes.clone(), RECORD_TIMESTAMP_MS).await {
                    Ok(_) => count += 1,
                    Err(e) => break Err(e),
                }
                if Instant::now() >= deadline {
                    break Ok(count);
                }
            };
            let _ = tx.send(outcome);
        });
        done.push(rx);
    }
    let mut appends = 0u64;
    for rx in done {
        let outcome = rx
            .await
            .map_err(|_| BenchError::Check("an appender task vanished".into()))?;
        appends += outcome?;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let measurement = Measurement {
        elapsed_s,
        payload_bytes: appends * batch.payload_bytes(),
        ops: appends,
        log_syncs: log.sync_count() - log_syncs,
        backend_syncs: backend.syncs_issued() - backend_syncs,
        load_avg_1m: machine::load_avg_1m(),
    };
    let end = log.high_watermark();
    if end.0 as u64 != appends * batch.record_count {
        return Err(BenchError::Check(format!(
            "high watermark {} after {appends} acknowledged appends (I1)",
            end.0
        )));
    }
    close_and_remove(&backend, &log, &dir).await?;
    Ok(measurement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_backend_portable::PortableBackend;
    use minikafka_broker::log::config::DEFAULT_MAX_BATCH_BYTES;
    use minikafka_core::record::validate_batch;

    use crate::shard::on_fresh_shard;

    #[test]
    fn megabyte_batch_holds_about_a_thousand_kib_records_and_is_accepted() {
        let shape = BatchShape::build(1024, 1 << 20);
        let header = validate_batch(&shape.bytes).expect("valid batch");
        assert_eq!(header.records_count as u64, shape.record_count);
        assert!(
            (990..=1024).contains(&shape.record_count),
            "{}",
            shape.record_count
        );
        assert!(shape.bytes.len() <= 1 << 20);
        assert!(shape.bytes.len() <= DEFAULT_MAX_BATCH_BYTES);
        assert_eq!(shape.payload_bytes(), shape.record_count * 1024);
    }

    #[test]
    fn tiny_budget_still_gives_one_record() {
        let shape = BatchShape::build(1024, 100);
        assert_eq!(shape.record_count, 1);
        validate_batch(&shape.bytes).expect("valid batch");
    }

    #[test]
    fn walk_batches_follows_dense_offsets_and_rejects_a_gap() {
        let mut builder = BatchBuilder::new();
        for _ in 0..3 {
            builder.push(&NewRecord {
                value: Some(b"v"),
                timestamp_ms: 1,
                ..NewRecord::default()
            });
        }
        let mut bytes = builder.build(Offset(10));
        bytes.extend(builder.build(Offset(13)));
        assert_eq!(walk_batches(&bytes, Offset(10)).expect("dense"), Offset(16));
        assert!(walk_batches(&bytes, Offset(9)).is_err());
        let mut gap = builder.build(Offset(10));
        gap.extend(builder.build(Offset(14)));
        assert!(walk_batches(&gap, Offset(10)).is_err());
        assert!(walk_batches(&bytes[..bytes.len() - 1], Offset(10)).is_err());
        assert!(walk_batches(&[], Offset(0)).is_err());
    }

    fn scratch_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("mk-bench-test-{}-{name}", std::process::id()))
    }

    /// Appends 20 batches and reads them back on a fresh shard of `B`.
    fn append_then_read_on<B: SyncCounter>(name: &str) {
        let shape = Arc::new(BatchShape::build(1024, 64 << 10));
        let dir = scratch_dir(name);
        let dir_for_shard = dir.clone();
        let (append, read) = on_fresh_shard::<B, _, _, _>(move |backend| {
            append_then_read(backend, dir_for_shard, shape, 20, throughput_config())
        })
        .expect("shard")
        .expect("workload");
        assert_eq!(append.ops, 20);
        assert_eq!(append.payload_bytes, read.payload_bytes);
        assert_eq!(append.log_syncs, 0, "flush.policy=none syncs nothing");
        assert_eq!(append.backend_syncs, 0);
        assert!(read.ops >= 1);
        assert!(!dir.exists(), "the workload removes its directory");
    }

    /// Eight appenders under flush.policy=fsync for 200 ms on a fresh shard of `B` (I8).
    fn concurrent_fsync_appends_on<B: SyncCounter>(name: &str) {
        let shape = Arc::new(BatchShape::build(1024, 1));
        let dir = scratch_dir(name);
        let dir_for_shard = dir.clone();
        let m = on_fresh_shard::<B, _, _, _>(move |backend| {
            concurrent_appends(
                backend,
                dir_for_shard,
                shape,
                8,
                Duration::from_millis(200),
                durable_config(),
            )
        })
        .expect("shard")
        .expect("workload");
        assert!(m.ops >= 8, "every appender completes at least one append");
        assert!(m.log_syncs >= 1 && m.log_syncs <= m.ops);
        assert_eq!(
            m.log_syncs, m.backend_syncs,
            "the log's count matches the backend's"
        );
        assert!(!dir.exists());
    }

    #[test]
    fn append_then_read_reads_back_every_record_on_portable() {
        append_then_read_on::<PortableBackend>("append-read-portable");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn append_then_read_reads_back_every_record_on_monoio() {
        append_then_read_on::<minikafka_backend_monoio::MonoioBackend>("append-read-monoio");
    }

    #[test]
    fn concurrent_fsync_appends_are_acknowledged_and_synced_on_portable() {
        concurrent_fsync_appends_on::<PortableBackend>("durable-portable");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn concurrent_fsync_appends_are_acknowledged_and_synced_on_monoio() {
        concurrent_fsync_appends_on::<minikafka_backend_monoio::MonoioBackend>("durable-monoio");
    }
}
