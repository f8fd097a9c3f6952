//! What the log suites share: the fixed time, test batches, opening a log, appending while
//! building the model of what the log must hold, reading it all back and comparing, and file
//! access through the backend.

use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use minikafka_broker::log::AppendInfo;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::LogConfig;
use minikafka_broker::log::LogError;
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_core::backend::BackendFile;
use minikafka_core::backend::OpenMode;
use minikafka_core::record::patch_base_offset;
use minikafka_core::record::patch_leader_epoch;
use minikafka_core::record::BatchBuilder;
use minikafka_core::record::BatchIter;
use minikafka_core::record::NewRecord;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

/// The fixed "now" of the checks (2023-11-14T22:13:20Z).
pub const NOW_MS: i64 = 1_700_000_000_000;

/// A batch of `records` records with `value_bytes`-byte values derived from `tag`, stamped
/// `timestamp_ms` (offsets as the producer sends them: base 0).
pub fn test_batch(tag: u64, records: usize, value_bytes: usize, timestamp_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    let key = tag.to_be_bytes();
    for i in 0..records.max(1) {
        let value: Vec<u8> = (0..value_bytes)
            .map(|j| (tag as usize).wrapping_mul(31).wrapping_add(i * 7 + j) as u8)
            .collect();
        builder.push(&NewRecord {
            key: Some(&key),
            value: Some(&value),
            headers: vec![],
            timestamp_ms,
        });
    }
    builder.build(Offset(0))
}

/// What a batch looks like on disk once appended at `base`: base offset and epoch patched.
pub(super) fn stored(batch: &[u8], base: Offset) -> Vec<u8> {
    let mut out = batch.to_vec();
    patch_base_offset(&mut out, base);
    patch_leader_epoch(&mut out, minikafka_broker::log::LEADER_EPOCH);
    out
}

pub(super) fn config(
    segment_bytes: u64,
    index_interval_bytes: u32,
    flush: FlushPolicy,
) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        retention_ms: None,
        flush,
        ..LogConfig::default()
    }
}

pub(super) async fn open<B: Backend>(
    backend: &B,
    dir: &Path,
    config: &LogConfig,
    clean_shutdown: bool,
) -> Result<PartitionLog<B>, String> {
    PartitionLog::open(backend.clone(), dir, config.clone(), clean_shutdown, NOW_MS)
        .await
        .step("open")
}

/// Appends `batches` in order; returns the model: base offset → stored bytes.
pub(super) async fn append_all<B: Backend>(
    log: &PartitionLog<B>,
    batches: &[Vec<u8>],
    model: &mut BTreeMap<i64, Vec<u8>>,
) -> Check {
    for (i, batch) in batches.iter().enumerate() {
        let expected_base = log.high_watermark();
        let info = log
            .append(batch.clone(), NOW_MS)
            .await
            .step(&format!("append #{i}"))?;
        let records = BatchIter::new(batch)
            .next()
            .and_then(Result::ok)
            .map_or(1, |b| i64::from(b.header.records_count));
        ensure(info.base_offset == expected_base, || {
            format!(
                "append #{i}: base {} != high watermark {expected_base} (I1)",
                info.base_offset
            )
        })?;
        ensure(info.last_offset == expected_base.plus(records - 1), || {
            format!(
                "append #{i}: last offset {} for {records} records",
                info.last_offset
            )
        })?;
        model.insert(info.base_offset.0, stored(batch, info.base_offset));
    }
    Ok(())
}

/// Reads the whole log batch by batch from the log start; every read must hold whole, valid,
/// dense batches (strict iteration: no partial tail).
pub(super) async fn read_all<B: Backend>(
    log: &PartitionLog<B>,
) -> Result<Vec<(Offset, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    let high_watermark = log.high_watermark();
    let mut reads = 0u32;
    while next < high_watermark {
        reads += 1;
        ensure(reads < 1_000_000, || {
            "read_all does not progress".to_string()
        })?;
        let result = log
            .read(next, 64 * 1024)
            .await
            .step(&format!("read({next})"))?;
        ensure(!result.bytes.is_empty(), || {
            format!("read({next}) below the high watermark {high_watermark} is empty")
        })?;
        for batch in BatchIter::new(&result.bytes) {
            let batch = batch.step(&format!("read({next}) returned a bad batch"))?;
            ensure(batch.header.base_offset == next, || {
                format!(
                    "read: batch at {} where {next} was expected (I1)",
                    batch.header.base_offset
                )
            })?;
            out.push((next, batch.bytes.to_vec()));
            next = batch.header.next_offset();
        }
    }
    ensure(next == high_watermark, || {
        format!("read_all ended at {next}, high watermark {high_watermark}")
    })?;
    Ok(out)
}

/// The log must hold exactly the model's batches, byte for byte, dense from the log start.
pub(super) async fn expect_model<B: Backend>(
    log: &PartitionLog<B>,
    model: &BTreeMap<i64, Vec<u8>>,
) -> Check {
    let got = read_all(log).await?;
    let want: Vec<(Offset, Vec<u8>)> = model
        .range(log.log_start_offset().0..)
        .map(|(o, b)| (Offset(*o), b.clone()))
        .collect();
    ensure(got.len() == want.len(), || {
        format!("log holds {} batches, model {}", got.len(), want.len())
    })?;
    for ((go, gb), (wo, wb)) in got.iter().zip(&want) {
        ensure(go == wo && gb == wb, || {
            format!("batch at {go} differs from the model's batch at {wo}")
        })?;
    }
    Ok(())
}

pub(super) async fn read_file<B: Backend>(backend: &B, path: &Path) -> Result<Vec<u8>, String> {
    let file = backend
        .open(path, OpenMode::ReadOnly)
        .await
        .step("open for reading")?;
    let len = file.len().await.step("len")? as usize;
    let (r, bytes) = file.read_at(Vec::new(), 0, len).await;
    r.step("read_at")?;
    file.close().await.step("close")?;
    Ok(bytes)
}

pub(super) async fn write_file<B: Backend>(backend: &B, path: &Path, bytes: &[u8]) -> Check {
    let file = backend
        .open(path, OpenMode::ReadWriteCreate)
        .await
        .step("open for writing")?;
    file.truncate(0).await.step("truncate")?;
    let (r, _) = file.write_at(bytes.to_vec(), 0).await;
    r.step("write_at")?;
    file.close().await.step("close")
}

pub(super) async fn file_exists<B: Backend>(backend: &B, path: &Path) -> Result<bool, String> {
    let dir = path.parent().unwrap_or(path);
    let entries = backend.list_dir(dir).await.step("list_dir")?;
    Ok(entries.iter().any(|p| p == path))
}

/// A batch of idempotent producer `pid` (epoch, base sequence, `records` records) whose
/// values are derived from `tag`.
pub fn producer_batch(
    pid: i64,
    epoch: i16,
    base_sequence: i32,
    records: usize,
    tag: u64,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    builder.producer_id = pid;
    builder.producer_epoch = epoch;
    builder.base_sequence = base_sequence;
    let key = tag.to_be_bytes();
    for i in 0..records.max(1) {
        let value: Vec<u8> = (0..200)
            .map(|j| (tag as usize).wrapping_mul(13).wrapping_add(i * 5 + j) as u8)
            .collect();
        builder.push(&NewRecord {
            key: Some(&key),
            value: Some(&value),
            headers: vec![],
            timestamp_ms: NOW_MS,
        });
    }
    builder.build(Offset(0))
}

/// Records in `batch` (1 when it does not parse).
pub(super) fn records_in(batch: &[u8]) -> i64 {
    BatchIter::new(batch)
        .next()
        .and_then(Result::ok)
        .map_or(1, |b| i64::from(b.header.records_count))
}

/// The offset after the model's last batch.
pub(super) fn log_next(model: &BTreeMap<i64, Vec<u8>>) -> Offset {
    model
        .iter()
        .next_back()
        .map_or(Offset(0), |(base, bytes)| Offset(*base + records_in(bytes)))
}

/// Damages four sealed-segment index files (offset or time index, entries of `entry_bytes`
/// bytes) the four ways recovery must tell apart: `paths[0]` removed (missing), `paths[1]` cut
/// by `cut_bytes` (a partial trailing entry), `paths[2]` with its first two entries swapped
/// (disordered), and `paths[3]` with its last entry's final 4 bytes (the file position, or the
/// relative offset) set to `u32::MAX` (pointing past the segment's end).
pub(super) async fn damage_four_ways<B: Backend>(
    backend: &B,
    paths: &[PathBuf; 4],
    entry_bytes: usize,
    cut_bytes: usize,
) -> Check {
    backend
        .remove_file(&paths[0])
        .await
        .step(&format!("remove {}", paths[0].display()))?;
    let bytes = read_file(backend, &paths[1]).await?;
    write_file(backend, &paths[1], &bytes[..bytes.len() - cut_bytes]).await?;
    let mut bytes = read_file(backend, &paths[2]).await?;
    let (a, b) = bytes.split_at_mut(entry_bytes);
    a.swap_with_slice(&mut b[..entry_bytes]);
    write_file(backend, &paths[2], &bytes).await?;
    let mut bytes = read_file(backend, &paths[3]).await?;
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&u32::MAX.to_be_bytes());
    write_file(backend, &paths[3], &bytes).await
}

/// Every segment's `.log` file is exactly as long as its published size (I3: recovery cut
/// what followed the last valid batch).
pub(super) async fn expect_files_match_sizes<B: Backend>(
    backend: &B,
    log: &PartitionLog<B>,
) -> Check {
    for segment in log.segments() {
        let file = backend
            .open(segment.log_path(), OpenMode::ReadOnly)
            .await
            .step("open segment")?;
        let len = file.len().await.step("len")?;
        file.close().await.step("close")?;
        ensure(len == segment.size_bytes(), || {
            format!(
                "segment {}: file has {len} bytes, log {} (a torn tail was kept)",
                segment.base_offset(),
                segment.size_bytes()
            )
        })?;
    }
    Ok(())
}

/// Appends `batches` concurrently while the append mutex is held until every one has queued,
/// so they are written as coalesced groups in the order given (their arrival order).
pub(super) async fn append_coalesced<B: Backend>(
    log: &PartitionLog<B>,
    batches: &[Vec<u8>],
) -> Vec<Result<AppendInfo, LogError>> {
    let held = log.hold_appends().await;
    let all = futures::future::join_all(batches.iter().map(|b| log.append(b.clone(), NOW_MS)));
    futures::pin_mut!(all);
    let early = futures::poll!(&mut all);
    drop(held);
    match early {
        std::task::Poll::Ready(results) => results,
        std::task::Poll::Pending => all.await,
    }
}
