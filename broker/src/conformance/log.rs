//! Partition log conformance: the behaviour [`PartitionLog`] must show on every backend, and
//! the fault suite that runs it on [`FaultyBackend`].
//!
//! Contract:
//! - Inputs: a backend instance (on a shard it runs) and a scratch directory; each check works
//!   in its own subdirectory. Time is a fixed value ([`NOW_MS`] and offsets from it).
//! - Outputs: each `check_*` returns `Err` with a message naming the step that failed;
//!   [`run_all`] and [`run_fault_suite`] run every check and panic listing all failures;
//!   [`log_suite_tests!`](crate::log_suite_tests) makes one `#[test]` per check.
//! - Files are touched through the backend only; a "crash" is dropping a log without
//!   [`PartitionLog::close`], then reopening with `clean_shutdown = false` (on the plain
//!   backend when the crash was injected by a [`FaultPlan`]).
//! - Every expectation is checked against a model built here (the batches appended, patched
//!   with the offsets they were acknowledged with), never against the log's own word.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::channel::oneshot;
use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::index::{IndexEntry, ENTRY_BYTES};
use minikafka_core::record::{
    patch_base_offset, patch_leader_epoch, BatchBuilder, BatchIter, Compression, NewRecord,
};
use minikafka_core::recovery::{Action, Case};
use minikafka_core::time_index::{TimeIndexCheck, TimeIndexEntry, TIME_ENTRY_BYTES};
use minikafka_core::types::Offset;

use crate::conformance::backend::{assert_none_failed, run_checks, run_on_one_shard};
use crate::fault::{FaultPlan, FaultyBackend, EIO_RAW, ENOSPC_RAW};
use crate::log::recover::TimeIndexProblem;
use crate::log::segment::{
    index_file_name, log_file_name, snapshot_file_name, time_index_file_name,
};
use crate::log::{
    AppendInfo, FlushPolicy, LogConfig, LogError, PartitionLog, TopicMeta, TopicStore,
};

/// The fixed "now" of the checks (2023-11-14T22:13:20Z).
pub const NOW_MS: i64 = 1_700_000_000_000;

type Check = Result<(), String>;

/// Fails with `message` unless `condition` holds.
fn ensure(condition: bool, message: impl FnOnce() -> String) -> Check {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// Names the step of an error.
trait Step<T> {
    fn step(self, what: &str) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Step<T> for Result<T, E> {
    fn step(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

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
fn stored(batch: &[u8], base: Offset) -> Vec<u8> {
    let mut out = batch.to_vec();
    patch_base_offset(&mut out, base);
    patch_leader_epoch(&mut out, crate::log::LEADER_EPOCH);
    out
}

fn config(segment_bytes: u64, index_interval_bytes: u32, flush: FlushPolicy) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        retention_ms: None,
        flush,
        ..LogConfig::default()
    }
}

async fn open<B: Backend>(
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
async fn append_all<B: Backend>(
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
async fn read_all<B: Backend>(log: &PartitionLog<B>) -> Result<Vec<(Offset, Vec<u8>)>, String> {
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
async fn expect_model<B: Backend>(log: &PartitionLog<B>, model: &BTreeMap<i64, Vec<u8>>) -> Check {
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

async fn read_file<B: Backend>(backend: &B, path: &Path) -> Result<Vec<u8>, String> {
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

async fn write_file<B: Backend>(backend: &B, path: &Path, bytes: &[u8]) -> Check {
    let file = backend
        .open(path, OpenMode::ReadWriteCreate)
        .await
        .step("open for writing")?;
    file.truncate(0).await.step("truncate")?;
    let (r, _) = file.write_at(bytes.to_vec(), 0).await;
    r.step("write_at")?;
    file.close().await.step("close")
}

async fn file_exists<B: Backend>(backend: &B, path: &Path) -> Result<bool, String> {
    let dir = path.parent().unwrap_or(path);
    let entries = backend.list_dir(dir).await.step("list_dir")?;
    Ok(entries.iter().any(|p| p == path))
}

// ---------------------------------------------------------------------------------------------
// The conformance checks.
// ---------------------------------------------------------------------------------------------

/// Batches of 1..4 records read back byte for byte with dense offsets 0..N (I1), from every
/// offset (including offsets inside a batch); the high watermark reads empty; offsets outside
/// `[log_start, hw]` are out of range; everything survives a clean reopen.
pub async fn check_append_read_round_trip<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 4096, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            test_batch(
                i,
                1 + (i as usize % 4),
                10 + i as usize * 13,
                NOW_MS + i as i64,
            )
        })
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    expect_model(&log, &model).await?;
    let hw = log.high_watermark();
    ensure(
        hw.0 == batches
            .iter()
            .enumerate()
            .map(|(i, _)| 1 + (i as i64 % 4))
            .sum::<i64>(),
        || format!("high watermark {hw}"),
    )?;
    // Every offset, including those inside a batch, reads from the batch holding it.
    for target in 0..hw.0 {
        let r = log.read(Offset(target), 1).await.step("read one")?;
        let first = BatchIter::new(&r.bytes)
            .next()
            .ok_or_else(|| format!("read({target}) empty"))?
            .step("first batch")?;
        ensure(
            first.header.base_offset.0 <= target && target < first.header.next_offset().0,
            || {
                format!(
                    "read({target}) starts at batch {}",
                    first.header.base_offset
                )
            },
        )?;
        ensure(r.bytes.len() == first.bytes.len(), || {
            format!("read({target}, max 1 byte) returned more than its first batch")
        })?;
        ensure(r.high_watermark == hw, || {
            "read reports a stale high watermark".into()
        })?;
    }
    let at_hw = log.read(hw, 1 << 20).await.step("read at hw")?;
    ensure(at_hw.bytes.is_empty(), || {
        "read at the high watermark is not empty".into()
    })?;
    for bad in [Offset(-1), hw.plus(1)] {
        match log.read(bad, 100).await {
            Err(LogError::OffsetOutOfRange { .. }) => {}
            other => {
                return Err(format!(
                    "read({bad}): expected OffsetOutOfRange, got {other:?}"
                ))
            }
        }
    }
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    expect_model(&log, &model).await?;
    ensure(log.high_watermark() == hw, || {
        "reopen changed the high watermark".into()
    })?;
    log.close().await.step("close again")
}

/// I3: a corrupt batch (bad CRC, truncated, trailing bytes, too large) is refused before
/// anything is written: the high watermark and the files stay as they were.
pub async fn check_invalid_batch_touches_nothing<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = LogConfig {
        max_batch_bytes: 4096,
        ..config(1 << 20, 4096, FlushPolicy::None)
    };
    let log = open(backend, dir, &cfg, false).await?;
    let mut model = BTreeMap::new();
    append_all(&log, &[test_batch(1, 2, 50, NOW_MS)], &mut model).await?;
    let size = log.size_bytes();
    let good = test_batch(2, 2, 50, NOW_MS);
    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x40;
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0u8; 5]);
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("bad crc", bad_crc),
        ("truncated", good[..good.len() - 3].to_vec()),
        ("trailing bytes", trailing),
        ("too large", test_batch(3, 1, 5000, NOW_MS)),
        ("empty", Vec::new()),
    ];
    for (what, batch) in bad {
        match log.append(batch, NOW_MS).await {
            Err(e @ LogError::Corrupt(_)) => {
                let code = e.kafka_error_code().code();
                ensure(code == 2 || code == 10, || {
                    format!("{what}: kafka code {code}")
                })?;
            }
            other => return Err(format!("append({what}): expected Corrupt, got {other:?}")),
        }
        ensure(
            log.size_bytes() == size && log.high_watermark() == Offset(2),
            || format!("append({what}) changed the log (I3)"),
        )?;
    }
    append_all(&log, &[good], &mut model).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// Rolls before a batch would push the active segment past `segment_bytes`: every segment
/// stays within the limit, segment files are named by their base offsets (which continue the
/// previous segment densely), and reads cross segment boundaries.
pub async fn check_segment_roll_at_segment_bytes<B: Backend>(backend: &B, dir: &Path) -> Check {
    let segment_bytes = 4000;
    let cfg = config(segment_bytes, 1024, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..60)
        .map(|i| {
            test_batch(
                i,
                1 + (i as usize % 3),
                100 + (i as usize * 37) % 400,
                NOW_MS,
            )
        })
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let segments = log.segments();
    ensure(segments.len() >= 5, || {
        format!("only {} segments", segments.len())
    })?;
    for pair in segments.windows(2) {
        ensure(pair[0].next_offset() == pair[1].base_offset(), || {
            format!(
                "segment {} ends at {}, next begins at {}",
                pair[0].base_offset(),
                pair[0].next_offset(),
                pair[1].base_offset()
            )
        })?;
        // The next batch (the first of the next segment) did not fit.
        let next_first = model
            .get(&pair[1].base_offset().0)
            .ok_or("no batch at a segment base")?;
        ensure(
            pair[0].size_bytes() + next_first.len() as u64 > segment_bytes,
            || format!("segment {} rolled early", pair[0].base_offset()),
        )?;
    }
    for segment in &segments {
        ensure(segment.size_bytes() <= segment_bytes, || {
            format!(
                "segment {} has {} bytes > {segment_bytes} (I6)",
                segment.base_offset(),
                segment.size_bytes()
            )
        })?;
        let log_path = dir.join(log_file_name(segment.base_offset()));
        ensure(file_exists(backend, &log_path).await?, || {
            format!("{log_path:?} missing")
        })?;
        ensure(
            file_exists(backend, &dir.join(index_file_name(segment.base_offset()))).await?,
            || "index file missing".to_string(),
        )?;
    }
    drop(segments);
    expect_model(&log, &model).await?;
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, false).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")?;

    // segment.ms: a non-empty segment rolls once it is that old, not before.
    let cfg = LogConfig {
        segment_ms: Some(1000),
        ..config(1 << 20, 1024, FlushPolicy::None)
    };
    let log = open(backend, &dir.join("by-time"), &cfg, false).await?;
    for (i, at_ms) in [0i64, 999, 1000, 1500, 2100].into_iter().enumerate() {
        log.append(test_batch(i as u64, 1, 10, NOW_MS + at_ms), NOW_MS + at_ms)
            .await
            .step("append (segment.ms)")?;
    }
    let bases = log.segment_base_offsets();
    ensure(bases == vec![Offset(0), Offset(2), Offset(4)], || {
        format!("segment.ms rolls gave segments {bases:?}, expected [0, 2, 4]")
    })?;
    log.close().await.step("close")
}

/// Checks a segment's index against a model of Kafka's placement rule (an entry at a batch,
/// never the one at 0, when `interval` or more bytes were written since the previous entry),
/// and that consecutive entries lie between `interval` and `interval` plus one batch apart (I4).
fn check_index_spacing(
    entries: &[IndexEntry],
    batch_starts: &BTreeMap<u32, (i64, u32)>,
    base: Offset,
    interval: u32,
) -> Check {
    let mut expected = Vec::new();
    let mut since = 0u64;
    let mut max_batch = 0u32;
    for (&pos, &(offset, len)) in batch_starts {
        if pos > 0 && since >= u64::from(interval) {
            expected.push((pos, offset));
            since = 0;
        }
        since += u64::from(len);
        max_batch = max_batch.max(len);
    }
    let got: Vec<(u32, i64)> = entries
        .iter()
        .map(|e| (e.position.0, base.plus(i64::from(e.relative_offset.0)).0))
        .collect();
    ensure(got == expected, || {
        format!("segment {base}: index {got:?} differs from the placement model {expected:?}")
    })?;
    let mut previous = 0u32;
    for (pos, _) in &got {
        let gap = pos - previous;
        ensure(gap >= interval && gap < interval + max_batch, || {
            format!("segment {base}: entry at {pos} is {gap} bytes after the previous one")
        })?;
        previous = *pos;
    }
    Ok(())
}

/// Batch start position → (base offset, length) of each batch of a segment, from its bytes.
fn batch_starts(
    model: &BTreeMap<i64, Vec<u8>>,
    base: Offset,
    next: Offset,
) -> BTreeMap<u32, (i64, u32)> {
    let mut pos = 0u32;
    let mut out = BTreeMap::new();
    for (offset, bytes) in model.range(base.0..next.0) {
        out.insert(pos, (*offset, bytes.len() as u32));
        pos += bytes.len() as u32;
    }
    out
}

/// Long runs of small batches get an index entry about every `index_interval_bytes`, at batch
/// starts (I4); lookups through the index read the right batch for every offset.
pub async fn check_index_placement_small_batches<B: Backend>(backend: &B, dir: &Path) -> Check {
    let interval = 4096;
    let cfg = config(200_000, interval, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..3000)
        .map(|i| test_batch(i, 1 + (i as usize % 2), 20 + (i as usize % 50), NOW_MS))
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let segments = log.segments();
    ensure(segments.len() >= 2, || "expected a roll".into())?;
    for segment in &segments {
        let starts = batch_starts(&model, segment.base_offset(), segment.next_offset());
        let entries = segment.index_entries();
        ensure(
            entries.len() as u64 >= segment.size_bytes() / u64::from(interval * 2),
            || {
                format!(
                    "segment {}: {} entries for {} bytes",
                    segment.base_offset(),
                    entries.len(),
                    segment.size_bytes()
                )
            },
        )?;
        check_index_spacing(&entries, &starts, segment.base_offset(), interval)?;
        // The index file holds the same entries.
        let on_disk = read_file(backend, &dir.join(index_file_name(segment.base_offset()))).await?;
        let encoded: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        ensure(on_disk == encoded, || {
            format!(
                "segment {}: index file differs from memory",
                segment.base_offset()
            )
        })?;
    }
    drop(segments);
    for target in (0..log.high_watermark().0).step_by(7) {
        let r = log.read(Offset(target), 1).await.step("read")?;
        let first = BatchIter::new(&r.bytes)
            .next()
            .ok_or("empty read")?
            .step("batch")?;
        ensure(
            first.header.base_offset.0 <= target && target < first.header.next_offset().0,
            || format!("read({target}) returned batch {}", first.header.base_offset),
        )?;
    }
    log.close().await.step("close")
}

/// Single huge batches (about 1 MB, within `message.max.bytes`): each after the first in a
/// segment gets its own entry; they read back whole.
pub async fn check_index_placement_huge_batches<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(4_500_000, 4096, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..6)
        .map(|i| test_batch(i, 1, 1_000_000, NOW_MS))
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let segments = log.segments();
    ensure(segments.len() == 2, || {
        format!("{} segments, expected 2 (4 + 2 batches)", segments.len())
    })?;
    for segment in &segments {
        let starts = batch_starts(&model, segment.base_offset(), segment.next_offset());
        let entries = segment.index_entries();
        ensure(entries.len() + 1 == starts.len(), || {
            format!(
                "segment {}: {} entries for {} huge batches",
                segment.base_offset(),
                entries.len(),
                starts.len()
            )
        })?;
        check_index_spacing(&entries, &starts, segment.base_offset(), 4096)?;
    }
    drop(segments);
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// I2: a reader task interleaved with a writer task only ever sees whole valid batches, dense,
/// byte-identical to what was appended, and never anything past the high watermark.
pub async fn check_reads_racing_appends<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(20_000, 512, FlushPolicy::None);
    let log = Rc::new(open(backend, dir, &cfg, false).await?);
    let model: Rc<RefCell<BTreeMap<i64, Vec<u8>>>> = Rc::default();
    let (done_tx, mut done_rx) = oneshot::channel::<Result<(), String>>();
    {
        let (log, model) = (Rc::clone(&log), Rc::clone(&model));
        backend.spawn_local(async move {
            let mut result = Ok(());
            for i in 0..400u64 {
                let batch = test_batch(
                    i,
                    1 + (i as usize % 3),
                    30 + (i as usize * 11) % 300,
                    NOW_MS,
                );
                match log.append(batch.clone(), NOW_MS).await {
                    Ok(info) => {
                        model
                            .borrow_mut()
                            .insert(info.base_offset.0, stored(&batch, info.base_offset));
                    }
                    Err(e) => {
                        result = Err(format!("writer: append #{i}: {e}"));
                        break;
                    }
                }
            }
            let _ = done_tx.send(result);
        });
    }
    let mut reads = 0u64;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    loop {
        let finished = done_rx.try_recv().step("writer channel")?;
        let hw = log.high_watermark();
        if hw.0 > 0 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let target = Offset((seed >> 33) as i64 % hw.0);
            let r = log.read(target, 2000).await.step("racing read")?;
            ensure(r.high_watermark >= hw, || "high watermark went back".into())?;
            let mut expected = None;
            for batch in BatchIter::new(&r.bytes) {
                let batch = batch.step(&format!(
                    "racing read({target}) saw a partial or bad batch (I2)"
                ))?;
                let base = batch.header.base_offset;
                if let Some(e) = expected {
                    ensure(base == e, || format!("racing read: gap before {base}"))?;
                }
                ensure(batch.header.next_offset() <= r.high_watermark, || {
                    format!(
                        "racing read saw batch {base} past the high watermark {}",
                        r.high_watermark
                    )
                })?;
                let want = model.borrow().get(&base.0).cloned();
                ensure(want.as_deref() == Some(batch.bytes), || {
                    format!("racing read: batch {base} differs from what was appended")
                })?;
                expected = Some(batch.header.next_offset());
            }
            reads += 1;
        } else {
            backend.sleep(std::time::Duration::from_millis(1)).await;
        }
        if let Some(result) = finished {
            result?;
            break;
        }
    }
    ensure(reads >= 10, || {
        format!("only {reads} reads raced the writer")
    })?;
    let model = model.borrow().clone();
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// Builds a log with one sealed segment and an active segment whose tail is `tail` small
/// batches; closes it and returns the model, the active segment's base and its bytes.
async fn build_tail<B: Backend>(
    backend: &B,
    dir: &Path,
    cfg: &LogConfig,
    tail: usize,
) -> Result<(BTreeMap<i64, Vec<u8>>, Offset, Vec<u8>), String> {
    let log = open(backend, dir, cfg, false).await?;
    let mut model = BTreeMap::new();
    let first: Vec<Vec<u8>> = (0..12).map(|i| test_batch(i, 2, 40, NOW_MS)).collect();
    append_all(&log, &first, &mut model).await?;
    let active_base = log.high_watermark();
    log.roll_now(NOW_MS).await.step("roll")?;
    let rest: Vec<Vec<u8>> = (0..tail as u64)
        .map(|i| test_batch(100 + i, 1 + (i as usize % 3), 5 + i as usize * 9, NOW_MS))
        .collect();
    append_all(&log, &rest, &mut model).await?;
    log.close().await.step("close")?;
    let bytes = read_file(backend, &dir.join(log_file_name(active_base))).await?;
    Ok((model, active_base, bytes))
}

/// Every segment's `.log` file is exactly as long as its published size (I3: recovery cut
/// what followed the last valid batch).
async fn expect_files_match_sizes<B: Backend>(backend: &B, log: &PartitionLog<B>) -> Check {
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

/// After a crash recovery, the log must hold exactly `model`'s batches below `survivors_end`
/// and accept the next append at that offset (dense, I1).
async fn expect_recovered<B: Backend>(
    backend: &B,
    dir: &Path,
    cfg: &LogConfig,
    model: &BTreeMap<i64, Vec<u8>>,
    survivors_end: Offset,
    what: &str,
) -> Check {
    let log = open(backend, dir, cfg, false).await.step(what)?;
    ensure(log.high_watermark() == survivors_end, || {
        format!(
            "{what}: recovered to {}, expected {survivors_end}",
            log.high_watermark()
        )
    })?;
    let kept: BTreeMap<i64, Vec<u8>> = model
        .range(..survivors_end.0)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    expect_model(&log, &kept).await.step(what)?;
    expect_files_match_sizes(backend, &log).await.step(what)?;
    let next = test_batch(999, 2, 17, NOW_MS);
    let info = log.append(next, NOW_MS).await.step(what)?;
    ensure(info.base_offset == survivors_end, || {
        format!(
            "{what}: append after recovery got {}, expected {survivors_end} (I1)",
            info.base_offset
        )
    })?;
    drop(log); // crash again: the next iteration rewrites the files
    Ok(())
}

/// I3: the active segment truncated at every byte of a multi-batch tail recovers to exactly
/// the whole batches before the cut (a stale index is ignored), and appending continues
/// densely.
pub async fn check_recovery_every_truncation_point<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 64, FlushPolicy::None);
    let (model, active_base, bytes) = build_tail(backend, dir, &cfg, 4).await?;
    let log_path = dir.join(log_file_name(active_base));
    let index_path = dir.join(index_file_name(active_base));
    let index_bytes = read_file(backend, &index_path).await?;
    // Batch boundaries in the active segment.
    let mut ends = vec![(0usize, active_base)];
    for (offset, batch) in model.range(active_base.0..) {
        let (end, _) = ends[ends.len() - 1];
        let records = BatchIter::new(batch)
            .next()
            .ok_or("no batch")?
            .step("batch")?
            .header
            .records_count;
        ends.push((end + batch.len(), Offset(offset + i64::from(records))));
    }
    ensure(ends[ends.len() - 1].0 == bytes.len(), || {
        "model and file disagree".into()
    })?;
    for cut in 0..=bytes.len() {
        write_file(backend, &log_path, &bytes[..cut]).await?;
        write_file(backend, &index_path, &index_bytes).await?;
        let survivors_end = ends
            .iter()
            .rev()
            .find(|(end, _)| *end <= cut)
            .map_or(active_base, |(_, o)| *o);
        expect_recovered(
            backend,
            dir,
            &cfg,
            &model,
            survivors_end,
            &format!("cut at {cut}"),
        )
        .await?;
    }
    Ok(())
}

/// I3: a flipped bit anywhere in the active segment's tail (header fields, CRC, records)
/// ends the log before the damaged batch; nothing after the first bad byte survives.
pub async fn check_recovery_bit_flips_in_tail<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 64, FlushPolicy::None);
    let (model, active_base, bytes) = build_tail(backend, dir, &cfg, 4).await?;
    let log_path = dir.join(log_file_name(active_base));
    let mut starts = Vec::new();
    let mut pos = 0usize;
    for (offset, batch) in model.range(active_base.0..) {
        starts.push((pos, Offset(*offset)));
        pos += batch.len();
    }
    // Every header byte of the last two batches, and a sample of every other byte.
    let last_two = starts[starts.len() - 2].0;
    let positions: Vec<usize> = (0..bytes.len())
        .filter(|p| *p >= last_two || p % 5 == 0)
        .collect();
    for (n, flip_at) in positions.into_iter().enumerate() {
        let mut damaged = bytes.clone();
        damaged[flip_at] ^= 1 << (n % 8);
        write_file(backend, &log_path, &damaged).await?;
        let survivors_end = starts
            .iter()
            .rev()
            .find(|(start, _)| *start <= flip_at)
            .map_or(active_base, |(_, o)| *o);
        expect_recovered(
            backend,
            dir,
            &cfg,
            &model,
            survivors_end,
            &format!("bit flip at {flip_at}"),
        )
        .await?;
    }
    Ok(())
}

/// Damages four sealed-segment index files (offset or time index, entries of `entry_bytes`
/// bytes) the four ways recovery must tell apart: `paths[0]` removed (missing), `paths[1]` cut
/// by `cut_bytes` (a partial trailing entry), `paths[2]` with its first two entries swapped
/// (disordered), and `paths[3]` with its last entry's final 4 bytes (the file position, or the
/// relative offset) set to `u32::MAX` (pointing past the segment's end).
async fn damage_four_ways<B: Backend>(
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

/// Sealed segments whose index is missing, ends in a partial entry, is disordered, or points
/// past the log end are rebuilt by a scan (the decision table's cases); the rebuilt index
/// equals the original and lookups read the right batches.
pub async fn check_sealed_index_rebuilt<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(6000, 512, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..200)
        .map(|i| test_batch(i, 1 + (i as usize % 2), 60, NOW_MS))
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let originals: Vec<(Offset, Vec<IndexEntry>)> = log
        .segments()
        .iter()
        .map(|s| (s.base_offset(), s.index_entries()))
        .collect();
    ensure(originals.len() >= 5, || {
        format!("{} segments", originals.len())
    })?;
    ensure(originals[..4].iter().all(|(_, e)| e.len() >= 3), || {
        "too few index entries".into()
    })?;
    log.close().await.step("close")?;
    let index_path = |i: usize| dir.join(index_file_name(originals[i].0));
    let paths = [index_path(0), index_path(1), index_path(2), index_path(3)];
    damage_four_ways(backend, &paths, ENTRY_BYTES, 3).await?;

    let log = open(backend, dir, &cfg, true).await?;
    let report = log.recovery_report().to_vec();
    let expected = [
        Case::SealedIndexMissing,
        Case::SealedIndexPartial,
        Case::SealedIndexDisordered,
        Case::SealedIndexPastLogEnd,
    ];
    for (i, case) in expected.iter().enumerate() {
        ensure(
            report[i].case == *case && report[i].action == Action::RebuildIndex,
            || {
                format!(
                    "segment {i}: {:?}, expected {case:?} / RebuildIndex",
                    report[i]
                )
            },
        )?;
        ensure(report[i].truncated_bytes == 0, || {
            format!("segment {i}: the log was cut")
        })?;
    }
    ensure(
        report[4..report.len() - 1]
            .iter()
            .all(|r| r.action == Action::Trust),
        || format!("intact sealed segments were not trusted: {report:?}"),
    )?;
    for (segment, (base, entries)) in log.segments().iter().zip(&originals) {
        ensure(segment.index_entries() == *entries, || {
            format!("segment {base}: rebuilt index differs from the original")
        })?;
        let on_disk = read_file(backend, &dir.join(index_file_name(*base))).await?;
        let encoded: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        ensure(on_disk == encoded, || {
            format!("segment {base}: rebuilt index file differs")
        })?;
    }
    for target in 0..log.high_watermark().0 {
        let r = log.read(Offset(target), 1).await.step("read")?;
        let first = BatchIter::new(&r.bytes)
            .next()
            .ok_or("empty read")?
            .step("batch")?;
        ensure(
            first.header.base_offset.0 <= target && target < first.header.next_offset().0,
            || {
                format!(
                    "read({target}) after rebuild returned batch {}",
                    first.header.base_offset
                )
            },
        )?;
    }
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// Retention by size deletes the oldest segments while the rest stays at or above
/// `retention.bytes`, never the active one (I9); the log start moves to the first kept
/// segment, reads below it are out of range, the files are gone, appends continue densely.
pub async fn check_retention_by_size<B: Backend>(backend: &B, dir: &Path) -> Check {
    let mut cfg = config(3000, 1024, FlushPolicy::None);
    cfg.retention_bytes = Some(7000);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..60).map(|i| test_batch(i, 1, 250, NOW_MS)).collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let before = log.segments();
    ensure(before.len() >= 6, || format!("{} segments", before.len()))?;
    drop(before);
    let outcome = log.apply_retention(NOW_MS).await.step("retention")?;
    ensure(!outcome.deleted_base_offsets.is_empty(), || {
        "nothing deleted".into()
    })?;
    let after = log.segments();
    let kept_bytes: u64 = after.iter().map(|s| s.size_bytes()).sum();
    ensure(kept_bytes >= 7000, || {
        format!("kept {kept_bytes} < retention.bytes")
    })?;
    ensure(kept_bytes - after[0].size_bytes() <= 7000, || {
        "kept a deletable segment".into()
    })?;
    ensure(log.log_start_offset() == after[0].base_offset(), || {
        "log start not at the first segment".into()
    })?;
    ensure(outcome.log_start_offset == log.log_start_offset(), || {
        "outcome disagrees".into()
    })?;
    drop(after);
    for base in &outcome.deleted_base_offsets {
        ensure(
            !file_exists(backend, &dir.join(log_file_name(*base))).await?,
            || format!("segment {base} still on disk"),
        )?;
        ensure(
            !file_exists(backend, &dir.join(index_file_name(*base))).await?,
            || format!("index {base} still on disk"),
        )?;
    }
    match log.read(Offset(0), 100).await {
        Err(LogError::OffsetOutOfRange { .. }) => {}
        other => return Err(format!("read below log start: {other:?}")),
    }
    expect_model(&log, &model).await?;
    // retention.bytes 0 would delete everything but the active segment, never it.
    let mut zero = cfg.clone();
    zero.retention_bytes = Some(0);
    log.close().await.step("close")?;
    let log = open(backend, dir, &zero, true).await?;
    let start = log.log_start_offset();
    log.apply_retention(NOW_MS).await.step("retention to 0")?;
    ensure(log.segments().len() == 1, || "active segment count".into())?;
    ensure(log.log_start_offset() >= start, || {
        "log start moved back (I9)".into()
    })?;
    let hw = log.high_watermark();
    let info = log
        .append(test_batch(7, 1, 10, NOW_MS), NOW_MS)
        .await
        .step("append after retention")?;
    ensure(info.base_offset == hw, || {
        "append after retention not dense".into()
    })?;
    log.close().await.step("close")
}

/// Retention by time deletes segments whose newest record is older than `retention.ms`, stops
/// at the first younger one, and never deletes for a timestamp in the future (I9).
pub async fn check_retention_by_time<B: Backend>(backend: &B, dir: &Path) -> Check {
    let mut cfg = config(2000, 1024, FlushPolicy::None);
    cfg.retention_ms = Some(10_000);
    let log = open(backend, dir, &cfg, false).await?;
    // Four segments' worth per age: ages 60 s, 30 s, 5 s, 0 s.
    let mut model = BTreeMap::new();
    for age_s in [60i64, 30, 5, 0] {
        let batches: Vec<Vec<u8>> = (0..12)
            .map(|i| test_batch(i, 1, 300, NOW_MS - age_s * 1000))
            .collect();
        append_all(&log, &batches, &mut model).await?;
    }
    let segments = log.segments();
    let young_from = segments
        .iter()
        .position(|s| s.max_timestamp_ms() >= NOW_MS - 10_000)
        .ok_or("no young segment")?;
    let expected: Vec<Offset> = segments[..young_from]
        .iter()
        .map(|s| s.base_offset())
        .collect();
    ensure(!expected.is_empty(), || "no old segment".into())?;
    drop(segments);
    let outcome = log.apply_retention(NOW_MS).await.step("retention")?;
    ensure(outcome.deleted_base_offsets == expected, || {
        format!(
            "deleted {:?}, expected {expected:?}",
            outcome.deleted_base_offsets
        )
    })?;
    ensure(
        log.segments()
            .iter()
            .all(|s| s.max_timestamp_ms() >= NOW_MS - 10_000),
        || "an old segment was kept".into(),
    )?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")?;

    // Future timestamps: nothing goes by time, however far the clock is behind.
    let future_dir = dir.join("future");
    let log = open(backend, &future_dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..30)
        .map(|i| test_batch(i, 1, 300, NOW_MS + 3_600_000))
        .collect();
    append_all(&log, &batches, &mut BTreeMap::new()).await?;
    let count = log.segments().len();
    let outcome = log
        .apply_retention(NOW_MS)
        .await
        .step("retention (future)")?;
    ensure(
        outcome.deleted_base_offsets.is_empty() && log.segments().len() == count,
        || "a segment stamped in the future was deleted (I9)".into(),
    )?;
    log.close().await.step("close")
}

/// A read in flight on a segment that retention deletes still completes with the right bytes
/// (the segment's files stay open while the read holds it), and a held segment stays readable.
pub async fn check_read_in_flight_survives_retention<B: Backend>(backend: &B, dir: &Path) -> Check {
    let mut cfg = config(3000, 1024, FlushPolicy::None);
    cfg.retention_bytes = Some(0);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..40).map(|i| test_batch(i, 1, 250, NOW_MS)).collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let held = log.segments()[0].clone();
    let read = log.read(Offset(0), 100_000);
    let retention = log.apply_retention(NOW_MS);
    let (read, retention) = futures::join!(read, retention);
    let deleted = retention.step("retention")?.deleted_base_offsets;
    ensure(deleted.contains(&Offset(0)), || {
        "segment 0 not deleted".into()
    })?;
    ensure(
        !file_exists(backend, &dir.join(log_file_name(Offset(0)))).await?,
        || "file still there".into(),
    )?;
    let read = read.step("read in flight")?;
    let first = BatchIter::new(&read.bytes)
        .next()
        .ok_or("empty")?
        .step("batch")?;
    ensure(Some(&first.bytes.to_vec()) == model.get(&0), || {
        "read in flight returned wrong bytes".into()
    })?;
    let bytes = held
        .read_log(0, held.size_bytes() as usize)
        .await
        .step("read held segment")?;
    let want: Vec<u8> = model
        .range(0..held.next_offset().0)
        .flat_map(|(_, b)| b.clone())
        .collect();
    ensure(bytes == want, || {
        "a held, deleted segment no longer reads back".into()
    })?;
    drop(held);
    log.close().await.step("close")
}

/// I8 group commit: 32 concurrent appends under `fsync` are all acknowledged, with dense
/// distinct offsets, and share far fewer than 32 syncs; everything is durable afterwards.
pub async fn check_group_commit_shares_syncs<B: Backend>(backend: &B, dir: &Path) -> Check {
    const K: u64 = 32;
    let cfg = config(1 << 20, 4096, FlushPolicy::Fsync);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..K).map(|i| test_batch(i, 1, 100, NOW_MS)).collect();
    let before = log.sync_count();
    let results =
        futures::future::join_all(batches.iter().map(|b| log.append(b.clone(), NOW_MS))).await;
    let syncs = log.sync_count() - before;
    let mut bases = Vec::new();
    let mut model = BTreeMap::new();
    for (i, r) in results.into_iter().enumerate() {
        let info = r.step(&format!("durable append #{i}"))?;
        bases.push(info.base_offset.0);
        model.insert(info.base_offset.0, stored(&batches[i], info.base_offset));
    }
    bases.sort_unstable();
    ensure(bases == (0..K as i64).collect::<Vec<_>>(), || {
        format!("offsets {bases:?}")
    })?;
    ensure((1..K).contains(&syncs), || {
        format!("{K} durable appends issued {syncs} syncs")
    })?;
    ensure(log.synced_up_to() == log.high_watermark(), || {
        "acknowledged data not durable".into()
    })?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// Appends `batches` concurrently while the append mutex is held until every one has queued,
/// so they are written as coalesced groups in the order given (their arrival order).
async fn append_coalesced<B: Backend>(
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

/// Records in `batch` (1 when it does not parse).
fn records_in(batch: &[u8]) -> i64 {
    BatchIter::new(batch)
        .next()
        .and_then(Result::ok)
        .map_or(1, |b| i64::from(b.header.records_count))
}

/// Write coalescing (I1, I2): 28 appends issued together — 12 plain batches, then two rounds
/// of one batch from each of 8 idempotent producers — make far fewer than 28 filesystem calls
/// (each coalesced group is one `write_at`), are all acknowledged at dense offsets in arrival
/// order (so each producer's batches in sequence order), read back byte for byte, and survive
/// a clean reopen; a retry of a producer's batch sent along with new batches is answered as a
/// duplicate with its original offsets while the others append.
pub async fn check_coalesced_appends_share_writes<B: Backend>(backend: &B, dir: &Path) -> Check {
    const PLAIN: u64 = 12;
    const PRODUCERS: i64 = 8;
    let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
    let cfg = config(1 << 20, 1 << 20, FlushPolicy::None);
    let log = open(&faulty, dir, &cfg, false).await?;
    let mut batches: Vec<Vec<u8>> = (0..PLAIN)
        .map(|i| test_batch(i, 1 + (i as usize % 3), 50 + i as usize, NOW_MS))
        .collect();
    let mut producer_of: Vec<Option<(i64, i32)>> = vec![None; batches.len()];
    for round in 0..2i32 {
        for pid in 0..PRODUCERS {
            batches.push(producer_batch(
                100 + pid,
                0,
                round * 2,
                2,
                (pid * 10) as u64 + round as u64,
            ));
            producer_of.push(Some((100 + pid, round * 2)));
        }
    }
    let k = batches.len() as u64;
    let before = faulty.plan().op_count();
    let results = append_coalesced(&log, &batches).await;
    let ops = faulty.plan().op_count() - before;
    let mut model = BTreeMap::new();
    let mut next = Offset(0);
    // pid → (base sequence, offset) of its batches in offset order.
    let mut per_producer: BTreeMap<i64, Vec<(i32, Offset)>> = BTreeMap::new();
    for (i, r) in results.into_iter().enumerate() {
        let info = r.step(&format!("append #{i}"))?;
        ensure(info.base_offset == next && !info.duplicate, || {
            format!(
                "append #{i} at {} (duplicate {}), expected {next}: arrival order, dense (I1)",
                info.base_offset, info.duplicate
            )
        })?;
        let records = records_in(&batches[i]);
        ensure(info.last_offset == next.plus(records - 1), || {
            format!(
                "append #{i}: last offset {} for {records} records",
                info.last_offset
            )
        })?;
        if let Some((pid, sequence)) = producer_of[i] {
            per_producer
                .entry(pid)
                .or_default()
                .push((sequence, info.base_offset));
        }
        model.insert(info.base_offset.0, stored(&batches[i], info.base_offset));
        next = info.last_offset.plus(1);
    }
    ensure(log.high_watermark() == next, || {
        format!("high watermark {} after {next}", log.high_watermark())
    })?;
    ensure(ops * 8 <= k, || {
        format!("{k} concurrent appends made {ops} filesystem calls (no coalescing?)")
    })?;
    for (pid, appended) in &per_producer {
        let mut by_offset = appended.clone();
        by_offset.sort_by_key(|(_, offset)| *offset);
        let sequences: Vec<i32> = by_offset.iter().map(|(s, _)| *s).collect();
        ensure(sequences == [0, 2], || {
            format!("producer {pid}: sequences in log order {sequences:?}")
        })?;
    }
    expect_model(&log, &model).await?;

    // A retry of producer 100's first batch, between two new batches.
    let original = per_producer
        .get(&100)
        .and_then(|v| v.first())
        .map(|(_, offset)| *offset)
        .ok_or("producer 100 missing")?;
    let retry_round = [
        test_batch(500, 1, 30, NOW_MS),
        batches[PLAIN as usize].clone(),
        test_batch(501, 2, 30, NOW_MS),
    ];
    let answers = append_coalesced(&log, &retry_round).await;
    let mut answers = answers.into_iter();
    for (i, expected_dup) in [(0, false), (1, true), (2, false)] {
        let info = answers
            .next()
            .ok_or("missing answer")?
            .step(&format!("retry round #{i}"))?;
        if expected_dup {
            ensure(info.duplicate && info.base_offset == original, || {
                format!(
                    "retry answered base {} duplicate {}, expected {original}",
                    info.base_offset, info.duplicate
                )
            })?;
        } else {
            ensure(!info.duplicate && info.base_offset == next, || {
                format!("retry round #{i} at {}, expected {next}", info.base_offset)
            })?;
            model.insert(next.0, stored(&retry_round[i], next));
            next = info.last_offset.plus(1);
        }
    }
    expect_model(&log, &model).await?;
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close after reopen")
}

/// Write coalescing: refused batches among concurrent appends — a corrupt one (I3), one with
/// a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER, 45) and one of an old epoch
/// (INVALID_PRODUCER_EPOCH, 47) — get their own errors and are written nowhere; every other
/// batch of the group is acknowledged at dense offsets in arrival order and reads back byte
/// for byte; the refused producer's state is unchanged (its next batch in sequence appends).
/// An append dropped while queued is written nowhere.
pub async fn check_coalesced_refusal_stays_alone<B: Backend>(backend: &B, dir: &Path) -> Check {
    let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
    let cfg = config(1 << 20, 1 << 20, FlushPolicy::None);
    let log = open(&faulty, dir, &cfg, false).await?;
    let mut model = BTreeMap::new();
    let setup = [
        producer_batch(7, 1, 0, 1, 70),
        producer_batch(8, 0, 0, 1, 80),
    ];
    append_all(&log, &setup, &mut model).await?;
    let mut corrupt = test_batch(3, 2, 40, NOW_MS);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    // (batch, expected Kafka error code or 0 for acknowledged)
    let group: Vec<(Vec<u8>, i16)> = vec![
        (test_batch(1, 1, 40, NOW_MS), 0),
        (test_batch(2, 2, 40, NOW_MS), 0),
        (producer_batch(7, 1, 5, 1, 71), 45),
        (test_batch(4, 3, 40, NOW_MS), 0),
        (corrupt, 2),
        (producer_batch(8, 0, 1, 2, 81), 0),
        (producer_batch(7, 0, 1, 1, 72), 47),
        (test_batch(5, 1, 40, NOW_MS), 0),
    ];
    let before = faulty.plan().op_count();
    let batches: Vec<Vec<u8>> = group.iter().map(|(b, _)| b.clone()).collect();
    let results = append_coalesced(&log, &batches).await;
    let ops = faulty.plan().op_count() - before;
    let mut next = log_next(&model);
    for (i, (result, (batch, code))) in results.into_iter().zip(&group).enumerate() {
        match (result, *code) {
            (Ok(info), 0) => {
                ensure(info.base_offset == next && !info.duplicate, || {
                    format!("append #{i} at {}, expected {next} (I1)", info.base_offset)
                })?;
                model.insert(next.0, stored(batch, next));
                next = info.last_offset.plus(1);
            }
            (Err(e), code) if code != 0 => {
                ensure(e.kafka_error_code().code() == code, || {
                    format!(
                        "append #{i}: code {}, expected {code}: {e}",
                        e.kafka_error_code()
                    )
                })?;
            }
            (other, code) => {
                return Err(format!("append #{i}: expected code {code}, got {other:?}"))
            }
        }
    }
    ensure(log.high_watermark() == next, || {
        format!("high watermark {} after {next}", log.high_watermark())
    })?;
    ensure(ops <= 2, || {
        format!(
            "{} concurrent appends made {ops} filesystem calls",
            group.len()
        )
    })?;
    expect_model(&log, &model).await?;
    append_all(&log, &[producer_batch(7, 1, 1, 1, 73)], &mut model).await?;
    expect_model(&log, &model).await?;

    // An append dropped while queued is written nowhere; the next one takes its offsets.
    {
        let held = log.hold_appends().await;
        let dropped = log.append(test_batch(9, 1, 40, NOW_MS), NOW_MS);
        futures::pin_mut!(dropped);
        ensure(futures::poll!(&mut dropped).is_pending(), || {
            "an append did not queue behind the held mutex".into()
        })?;
        drop(held);
    }
    append_all(&log, &[test_batch(10, 2, 40, NOW_MS)], &mut model).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// The offset after the model's last batch.
fn log_next(model: &BTreeMap<i64, Vec<u8>>) -> Offset {
    model
        .iter()
        .next_back()
        .map_or(Offset(0), |(base, bytes)| Offset(*base + records_in(bytes)))
}

/// `flush.policy = interval`: appends do not sync; a tick syncs once the interval has passed
/// and only when something is unsynced.
pub async fn check_interval_flush_ticks<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 4096, FlushPolicy::Interval { ms: 100 });
    let log = open(backend, dir, &cfg, false).await?;
    append_all(&log, &[test_batch(1, 1, 10, NOW_MS)], &mut BTreeMap::new()).await?;
    ensure(log.sync_count() == 0, || {
        "append synced under interval".into()
    })?;
    ensure(!log.tick(NOW_MS + 50).await.step("tick 50")?, || {
        "synced before the interval".into()
    })?;
    ensure(log.tick(NOW_MS + 100).await.step("tick 100")?, || {
        "no sync after the interval".into()
    })?;
    ensure(
        log.sync_count() == 1 && log.synced_up_to() == log.high_watermark(),
        || "tick did not sync".into(),
    )?;
    ensure(!log.tick(NOW_MS + 300).await.step("tick 300")?, || {
        "synced with nothing to sync".into()
    })?;
    log.close().await.step("close")
}

/// I5: after a clean shutdown, reopening trusts every segment and does not read the logs: a
/// byte damaged inside a sealed segment goes unnoticed, and the filesystem calls made by the
/// reopen do not grow with segment bytes (counted through a [`FaultyBackend`] with no faults).
pub async fn check_clean_reopen_does_not_scan<B: Backend>(backend: &B, dir: &Path) -> Check {
    async fn reopen_ops<B: Backend>(
        backend: &B,
        dir: &Path,
        cfg: &LogConfig,
    ) -> Result<(u64, Vec<crate::log::recover::SegmentRecovery>, Vec<u64>), String> {
        let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
        let log = open(&faulty, dir, cfg, true).await?;
        let ops = faulty.plan().op_count();
        let report = log.recovery_report().to_vec();
        let sizes = log.segments().iter().map(|s| s.size_bytes()).collect();
        log.close().await.step("close")?;
        Ok((ops, report, sizes))
    }
    let mut ops = Vec::new();
    for (n, segment_bytes) in [(0, 20_000u64), (1, 80_000)] {
        let sub = dir.join(format!("size-{segment_bytes}"));
        let cfg = config(segment_bytes, 1024, FlushPolicy::None);
        let log = open(backend, &sub, &cfg, false).await?;
        let per_segment = segment_bytes / test_batch(0, 1, 450, NOW_MS).len() as u64;
        let batches: Vec<Vec<u8>> = (0..per_segment * 6 + 3)
            .map(|i| test_batch(i, 1, 450, NOW_MS))
            .collect();
        let mut model = BTreeMap::new();
        append_all(&log, &batches, &mut model).await?;
        ensure(log.segments().len() == 7, || {
            format!("{} segments", log.segments().len())
        })?;
        let hw = log.high_watermark();
        let sizes: Vec<u64> = log.segments().iter().map(|s| s.size_bytes()).collect();
        log.close().await.step("close")?;
        if n == 0 {
            // Damage the first batch of segment 1 (below its first index entry).
            let path = sub.join(log_file_name(Offset(per_segment as i64)));
            let file = backend
                .open(&path, OpenMode::ReadWrite)
                .await
                .step("open")?;
            let (r, _) = file.write_at(vec![0xFF; 4], 30).await;
            r.step("damage")?;
            file.close().await.step("close damaged")?;
        }
        let (count, report, reopened_sizes) = reopen_ops(backend, &sub, &cfg).await?;
        ensure(reopened_sizes == sizes, || {
            format!(
                "clean reopen changed segment sizes {sizes:?} to {reopened_sizes:?}: it scanned"
            )
        })?;
        ensure(report.iter().all(|r| r.action == Action::Trust), || {
            format!("clean reopen did not trust every segment: {report:?}")
        })?;
        ensure(
            report[report.len() - 1].case == Case::ActiveCleanIndexValid,
            || "active case".into(),
        )?;
        let log = open(backend, &sub, &cfg, true).await?;
        ensure(
            log.high_watermark() == hw && log.segments().len() == 7,
            || "clean reopen changed the log: it scanned a sealed segment".into(),
        )?;
        log.close().await.step("close")?;
        ops.push(count);
        if n == 0 {
            // A clean-shutdown claim does not make a damaged active tail trusted: the tail after
            // the last index entry is checked, and the scan cuts the damaged last batch (I3).
            let active_base = Offset((per_segment * 6) as i64);
            let path = sub.join(log_file_name(active_base));
            let last_len = test_batch(0, 1, 450, NOW_MS).len() as u64;
            let file = backend
                .open(&path, OpenMode::ReadWrite)
                .await
                .step("open")?;
            let (r, _) = file.write_at(vec![0xAA; 2], sizes[6] - last_len + 70).await;
            r.step("damage tail")?;
            file.close().await.step("close damaged")?;
            let log = open(backend, &sub, &cfg, true).await?;
            let active = &log.recovery_report()[6];
            ensure(
                active.action == Action::ScanAndTruncate && active.truncated_bytes == last_len,
                || format!("damaged active tail after a clean shutdown: {active:?}"),
            )?;
            ensure(log.high_watermark() == hw.plus(-1), || {
                "damaged batch kept".into()
            })?;
            log.close().await.step("close")?;
        }
    }
    ensure(ops[0] == ops[1], || {
        format!("clean reopen made {} calls for 20 KB segments, {} for 80 KB ones: it reads segment bytes", ops[0], ops[1])
    })
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

/// The Kafka error code of a refused append (`Ok` answers are an error here).
async fn refused_code<B: Backend>(
    log: &PartitionLog<B>,
    batch: Vec<u8>,
    what: &str,
) -> Result<i16, String> {
    let hw = log.high_watermark();
    match log.append(batch, NOW_MS).await {
        Ok(info) => Err(format!(
            "{what}: accepted at {} (duplicate {})",
            info.base_offset, info.duplicate
        )),
        Err(e) => {
            ensure(log.high_watermark() == hw, || {
                format!("{what}: refused but the log moved")
            })?;
            Ok(e.kafka_error_code().code())
        }
    }
}

/// Re-sends `batch` and expects a duplicate answered with `original` and nothing appended.
async fn expect_duplicate<B: Backend>(
    log: &PartitionLog<B>,
    batch: &[u8],
    original: Offset,
    what: &str,
) -> Check {
    let hw = log.high_watermark();
    let info = log.append(batch.to_vec(), NOW_MS).await.step(what)?;
    ensure(info.duplicate && info.base_offset == original, || {
        format!(
            "{what}: answered base {} duplicate {}, expected the original {original}",
            info.base_offset, info.duplicate
        )
    })?;
    ensure(log.high_watermark() == hw, || {
        format!("{what}: a duplicate was appended")
    })
}

/// Idempotent producers: in-sequence batches append; a retry of one of the last five batches
/// is answered with its original offset and not appended; older retries, gaps, a new epoch
/// not at 0 are OUT_OF_ORDER_SEQUENCE_NUMBER (45); an old epoch is INVALID_PRODUCER_EPOCH
/// (47). After a clean close the state comes back from the snapshot alone (nothing replayed)
/// and deduplicates the same way; the log holds each batch once.
pub async fn check_producer_dedup_survives_clean_restart<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = config(1 << 20, 4096, FlushPolicy::Fsync);
    let log = open(backend, dir, &cfg, false).await?;
    let mut model = BTreeMap::new();
    let batches: Vec<Vec<u8>> = (0..8)
        .map(|i| producer_batch(7, 0, i * 2, 2, i as u64))
        .collect();
    append_all(&log, &batches, &mut model).await?;
    let offset_of = |i: usize| Offset(i as i64 * 2);
    expect_duplicate(&log, &batches[7], offset_of(7), "retry of the last batch").await?;
    expect_duplicate(
        &log,
        &batches[3],
        offset_of(3),
        "retry of the fifth-last batch",
    )
    .await?;
    ensure(
        refused_code(&log, batches[2].clone(), "retry of the sixth-last batch").await? == 45,
        || "sixth-last retry not 45".into(),
    )?;
    ensure(
        refused_code(&log, producer_batch(7, 0, 17, 1, 99), "gap").await? == 45,
        || "gap not 45".into(),
    )?;
    ensure(
        refused_code(&log, producer_batch(7, 1, 16, 1, 99), "new epoch at 16").await? == 45,
        || "new epoch not at 0 not 45".into(),
    )?;
    let hw = log.high_watermark();
    log.close().await.step("close")?;

    let log = open(backend, dir, &cfg, true).await?;
    let load = log.producer_load_report().clone();
    ensure(
        load.snapshot_offset == Some(hw) && load.replayed_batches == 0 && load.producers == 1,
        || format!("clean reopen did not load the state from the snapshot at {hw}: {load:?}"),
    )?;
    expect_duplicate(&log, &batches[7], offset_of(7), "retry after restart").await?;
    expect_duplicate(&log, &batches[4], offset_of(4), "older retry after restart").await?;
    let next = producer_batch(7, 0, 16, 3, 100);
    append_all(&log, std::slice::from_ref(&next), &mut model).await?;
    expect_duplicate(&log, &next, hw, "retry of the first batch after restart").await?;
    let bumped = producer_batch(7, 1, 0, 1, 101);
    append_all(&log, std::slice::from_ref(&bumped), &mut model).await?;
    ensure(
        refused_code(&log, producer_batch(7, 0, 19, 1, 102), "old epoch").await? == 47,
        || "old epoch not 47".into(),
    )?;
    append_all(&log, &[test_batch(103, 2, 10, NOW_MS)], &mut model).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close again")
}

/// Dedup survives a crash: the state is the newest snapshot (written at the last roll) plus a
/// replay of the batches after it; with the newest snapshot damaged it falls back to the older
/// one, and with none at all to a replay of the whole log. Each time, retries of the last five
/// batches of every producer are duplicates with their original offsets, the next batch in
/// sequence appends, and the log holds each batch once.
pub async fn check_producer_dedup_survives_crash<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(6_000, 1024, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let mut model = BTreeMap::new();
    // (pid, batch, acknowledged base offset), in order.
    let mut sent: Vec<(i64, Vec<u8>, Offset)> = Vec::new();
    let mut next_seq = [0i32; 3];
    let mut send = |pid: i64, tag: u64| {
        let records = 1 + (tag % 3) as usize;
        let b = producer_batch(pid, 0, next_seq[pid as usize], records, tag);
        next_seq[pid as usize] += records as i32;
        (pid, b)
    };
    let mut pending = Vec::new();
    for tag in 0..60u64 {
        pending.push(send(1 + (tag % 2) as i64, tag));
    }
    for (pid, b) in pending {
        let base = log.high_watermark();
        append_all(&log, std::slice::from_ref(&b), &mut model).await?;
        sent.push((pid, b, base));
    }
    ensure(log.segments().len() >= 4, || {
        format!("{} segments", log.segments().len())
    })?;
    let active_base = log
        .segments()
        .last()
        .map(|s| s.base_offset())
        .unwrap_or_default();
    ensure(log.snapshot_offsets().last() == Some(&active_base), || {
        format!(
            "no snapshot at the last roll {active_base}: {:?}",
            log.snapshot_offsets()
        )
    })?;
    ensure(log.snapshot_offsets().len() == 2, || {
        format!("snapshots not pruned: {:?}", log.snapshot_offsets())
    })?;
    let snapshots = log.snapshot_offsets();
    drop(log); // crash

    async fn expect_dedup<B: Backend>(
        log: &PartitionLog<B>,
        sent: &[(i64, Vec<u8>, Offset)],
        what: &str,
    ) -> Check {
        for pid in [1i64, 2] {
            let mine: Vec<_> = sent.iter().filter(|(p, _, _)| *p == pid).collect();
            for (_, b, base) in mine.iter().rev().take(5) {
                expect_duplicate(
                    log,
                    b,
                    *base,
                    &format!("{what}: producer {pid} retry at {base}"),
                )
                .await?;
            }
            if let Some((_, b, _)) = mine.iter().rev().nth(5) {
                let code = refused_code(log, b.clone(), what).await?;
                ensure(code == 45, || {
                    format!("{what}: sixth-last retry answered {code}")
                })?;
            }
        }
        Ok(())
    }

    let log = open(backend, dir, &cfg, false).await?;
    let load = log.producer_load_report().clone();
    ensure(
        load.snapshot_offset == Some(active_base) && load.replayed_batches > 0,
        || {
            format!(
                "crash reopen: expected the roll snapshot at {active_base} plus a replay: {load:?}"
            )
        },
    )?;
    expect_dedup(&log, &sent, "after a crash").await?;
    drop(log);

    // The newest snapshot damaged: deleted, the older one used, more replayed.
    let newest = dir.join(snapshot_file_name(snapshots[1]));
    let mut bytes = read_file(backend, &newest).await?;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    write_file(backend, &newest, &bytes).await?;
    let log = open(backend, dir, &cfg, false).await?;
    let load = log.producer_load_report().clone();
    ensure(
        load.snapshot_offset == Some(snapshots[0])
            && load.rejected.iter().any(|(o, _)| *o == snapshots[1])
            && !file_exists(backend, &newest).await?,
        || format!("damaged newest snapshot: {load:?}"),
    )?;
    expect_dedup(&log, &sent, "after a damaged snapshot").await?;
    drop(log);

    // No snapshot at all: the whole log is replayed.
    for offset in snapshots {
        let path = dir.join(snapshot_file_name(offset));
        if file_exists(backend, &path).await? {
            backend.remove_file(&path).await.step("remove snapshot")?;
        }
    }
    let log = open(backend, dir, &cfg, false).await?;
    let load = log.producer_load_report().clone();
    ensure(
        load.snapshot_offset.is_none() && load.replayed_batches == 60,
        || format!("no snapshot: expected a full replay of 60 batches: {load:?}"),
    )?;
    expect_dedup(&log, &sent, "after a full replay").await?;
    let next = producer_batch(1, 0, next_seq[1], 1, 1_000);
    append_all(&log, std::slice::from_ref(&next), &mut model).await?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// Topic metadata survives a reopen of the store; replacing is atomic (no `.tmp` left);
/// leftover `.tmp` files are removed at open; a damaged file is an error, not a panic.
pub async fn check_topic_metadata_round_trip<B: Backend>(backend: &B, dir: &Path) -> Check {
    let store = TopicStore::open(backend.clone(), dir)
        .await
        .step("open store")?;
    let mut config = BTreeMap::new();
    config.insert("retention.ms".to_string(), "3600000".to_string());
    config.insert("segment.bytes".to_string(), "1048576".to_string());
    let orders = TopicMeta {
        name: "orders".into(),
        partition_count: 3,
        config,
    };
    let logs = TopicMeta {
        name: "app.logs_v2-x".into(),
        partition_count: 1,
        config: BTreeMap::new(),
    };
    store.save(&orders).await.step("save orders")?;
    store.save(&logs).await.step("save logs")?;
    let mut orders2 = orders.clone();
    orders2.partition_count = 6;
    orders2
        .config
        .insert("cleanup.policy".into(), "delete".into());
    store.save(&orders2).await.step("replace orders")?;
    write_file(
        backend,
        &store.dir().join("half.meta.tmp"),
        b"# minikafka topic v1\nna",
    )
    .await?;
    drop(store);
    let store = TopicStore::open(backend.clone(), dir)
        .await
        .step("reopen store")?;
    let all = store.load_all().await.step("load_all")?;
    ensure(all == vec![logs.clone(), orders2.clone()], || {
        format!("loaded {all:?}")
    })?;
    ensure(
        store.load("orders").await.step("load")? == Some(orders2),
        || "load(orders)".into(),
    )?;
    ensure(
        store.load("absent").await.step("load absent")?.is_none(),
        || "absent topic found".into(),
    )?;
    let leftovers = backend.list_dir(store.dir()).await.step("list")?;
    ensure(
        leftovers
            .iter()
            .all(|p| p.extension().and_then(|e| e.to_str()) == Some("meta")),
        || format!("leftover files: {leftovers:?}"),
    )?;
    store.remove("app.logs_v2-x").await.step("remove")?;
    ensure(store.load_all().await.step("load_all")?.len() == 1, || {
        "remove did not remove".into()
    })?;
    ensure(
        store
            .save(&TopicMeta {
                name: "../evil".into(),
                partition_count: 1,
                config: BTreeMap::new(),
            })
            .await
            .is_err(),
        || "saved a bad name".into(),
    )?;
    write_file(
        backend,
        &store.dir().join("broken.meta"),
        b"# minikafka topic v1\nname=broken\npartition_count=x\n",
    )
    .await?;
    ensure(store.load_all().await.is_err(), || {
        "a damaged metadata file loaded".into()
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The time index and lookups by timestamp.
// ---------------------------------------------------------------------------------------------

/// One appended batch as the model knows it: its offsets and its records' timestamps.
#[derive(Clone, Debug)]
struct TimedBatch {
    base: Offset,
    timestamps: Vec<i64>,
    compressed: bool,
}

/// A batch with one record per timestamp. `compressed` tags it gzip with the records left as
/// they are: the broker never decompresses, and validation checks only header and CRC.
fn timed_batch(tag: u64, timestamps: &[i64], compressed: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    let key = tag.to_be_bytes();
    for (i, ts) in timestamps.iter().enumerate() {
        let value = vec![(tag as u8).wrapping_add(i as u8); 40 + (tag as usize % 50)];
        builder.push(&NewRecord {
            key: Some(&key),
            value: Some(&value),
            headers: vec![],
            timestamp_ms: *ts,
        });
    }
    if compressed {
        builder.build_with(Offset(0), Compression::Gzip, builder.records_bytes())
    } else {
        builder.build(Offset(0))
    }
}

/// A deterministic xorshift generator, so every backend sees the same batches.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `count` batches of 1..4 records: first rising timestamps, then non-monotonic ones (jumps
/// back, repeats, records out of order inside a batch), every 7th batch compressed.
fn timed_batches(seed: u64, count: usize) -> Vec<(Vec<i64>, bool)> {
    let mut rng = Rng(seed | 1);
    let mut clock = NOW_MS - 1_000_000;
    (0..count)
        .map(|i| {
            let records = 1 + rng.below(4) as usize;
            let timestamps = (0..records)
                .map(|_| {
                    if i < count / 2 {
                        clock += 1 + rng.below(20) as i64;
                        clock
                    } else {
                        // Anywhere from well before to a little after the clock.
                        clock - 600_000 + rng.below(700_000) as i64
                    }
                })
                .collect();
            (timestamps, i % 7 == 3)
        })
        .collect()
}

/// Appends the batches, returning the model.
async fn append_timed<B: Backend>(
    log: &PartitionLog<B>,
    batches: &[(Vec<i64>, bool)],
    tag: u64,
) -> Result<Vec<TimedBatch>, String> {
    let mut out = Vec::with_capacity(batches.len());
    for (i, (timestamps, compressed)) in batches.iter().enumerate() {
        let bytes = timed_batch(tag + i as u64, timestamps, *compressed);
        let info = log
            .append(bytes, NOW_MS)
            .await
            .step(&format!("append timed #{i}"))?;
        out.push(TimedBatch {
            base: info.base_offset,
            timestamps: timestamps.clone(),
            compressed: *compressed,
        });
    }
    Ok(out)
}

/// The reference answer, by a linear walk of the model from `log_start`: the first record with
/// a timestamp at or after `target`; a compressed batch answers with its base offset and max
/// timestamp (the documented approximation).
fn reference_for_timestamp(
    model: &[TimedBatch],
    log_start: Offset,
    target: i64,
) -> Option<(Offset, i64)> {
    for batch in model.iter().filter(|b| b.base >= log_start) {
        let max = batch.timestamps.iter().copied().max().unwrap_or(-1);
        if batch.compressed {
            if max >= target {
                return Some((batch.base, max));
            }
            continue;
        }
        for (i, ts) in batch.timestamps.iter().enumerate() {
            if *ts >= target {
                return Some((batch.base.plus(i as i64), *ts));
            }
        }
    }
    None
}

/// Targets around every timestamp in the model, plus the extremes.
fn timestamp_targets(model: &[TimedBatch]) -> Vec<i64> {
    let mut targets: Vec<i64> = model
        .iter()
        .flat_map(|b| b.timestamps.iter())
        .flat_map(|ts| [*ts - 1, *ts, *ts + 1])
        .chain([i64::MIN, -1, 0, i64::MAX])
        .collect();
    targets.sort_unstable();
    targets.dedup();
    targets
}

/// Every target's answer from the log must equal the reference's; so must the max-timestamp
/// answer (the earliest record holding the largest timestamp).
async fn expect_timestamp_answers<B: Backend>(
    log: &PartitionLog<B>,
    model: &[TimedBatch],
    what: &str,
) -> Check {
    let log_start = log.log_start_offset();
    for target in timestamp_targets(model) {
        let got = log
            .offset_for_timestamp(target)
            .await
            .step(&format!("{what}: offset_for_timestamp({target})"))?;
        let want = reference_for_timestamp(model, log_start, target);
        ensure(got == want, || {
            format!("{what}: offset_for_timestamp({target}) = {got:?}, reference {want:?}")
        })?;
    }
    let max = model
        .iter()
        .filter(|b| b.base >= log_start)
        .flat_map(|b| b.timestamps.iter().copied())
        .max();
    let want = max.and_then(|m| reference_for_timestamp(model, log_start, m));
    let got = log
        .max_timestamp_offset()
        .await
        .step(&format!("{what}: max_timestamp_offset"))?;
    ensure(got == want, || {
        format!("{what}: max_timestamp_offset = {got:?}, reference {want:?}")
    })
}

/// Each segment's max timestamp must be exact: the largest record timestamp of its batches
/// (-1 when none is larger).
fn expect_exact_max_timestamps<B: Backend>(
    log: &PartitionLog<B>,
    model: &[TimedBatch],
    what: &str,
) -> Check {
    let segments = log.segments();
    for (i, segment) in segments.iter().enumerate() {
        let end = segments.get(i + 1).map_or(i64::MAX, |s| s.base_offset().0);
        let want = model
            .iter()
            .filter(|b| b.base >= segment.base_offset() && b.base.0 < end)
            .flat_map(|b| b.timestamps.iter().copied())
            .fold(-1, i64::max);
        ensure(segment.max_timestamp_ms() == want, || {
            format!(
                "{what}: segment {} max timestamp {} != {want}",
                segment.base_offset(),
                segment.max_timestamp_ms()
            )
        })?;
    }
    Ok(())
}

/// Every segment's `.timeindex` on disk must hold exactly its in-memory entries (I4: written
/// after the data; whole, in order).
async fn expect_time_index_files<B: Backend>(backend: &B, log: &PartitionLog<B>) -> Check {
    for segment in log.segments() {
        let on_disk = read_file(backend, segment.time_index_path()).await?;
        let encoded: Vec<u8> = segment
            .time_index_entries()
            .iter()
            .flat_map(|e| e.encode())
            .collect();
        ensure(on_disk == encoded, || {
            format!(
                "segment {}: .timeindex holds {} bytes, memory {}",
                segment.base_offset(),
                on_disk.len(),
                encoded.len()
            )
        })?;
    }
    Ok(())
}

type TimeIndexes = Vec<(Offset, Vec<TimeIndexEntry>)>;

fn time_indexes<B: Backend>(log: &PartitionLog<B>) -> TimeIndexes {
    log.segments()
        .iter()
        .map(|s| (s.base_offset(), s.time_index_entries()))
        .collect()
}

/// ListOffsets by timestamp over many batches with rising, then non-monotonic timestamps,
/// some compressed, across segment rolls: every answer equals a linear reference; segment max
/// timestamps are exact; `.timeindex` files match memory (I4). After a clean reopen (segments
/// trusted, not scanned) the max timestamps and answers are unchanged; appends continue the
/// time index as a fresh writer would (deleting every `.timeindex` and rebuilding gives the
/// same entries).
pub async fn check_offset_for_timestamp_matches_reference<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = config(2500, 200, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    ensure(
        log.offset_for_timestamp(0).await.step("empty")?.is_none(),
        || "an empty log answered a timestamp".into(),
    )?;
    ensure(
        log.max_timestamp_offset()
            .await
            .step("empty max")?
            .is_none(),
        || "an empty log answered max timestamp".into(),
    )?;
    let mut model = append_timed(&log, &timed_batches(0x5eed, 120), 0).await?;
    ensure(log.segments().len() >= 6, || {
        format!("{} segments", log.segments().len())
    })?;
    let entries: usize = log.segments().iter().map(|s| s.time_index_len()).sum();
    ensure(entries >= 12, || {
        format!("only {entries} time index entries")
    })?;
    expect_timestamp_answers(&log, &model, "live").await?;
    expect_exact_max_timestamps(&log, &model, "live")?;
    expect_time_index_files(backend, &log).await?;
    let maxes: Vec<i64> = log
        .segments()
        .iter()
        .map(|s| s.max_timestamp_ms())
        .collect();
    log.close().await.step("close")?;

    let log = open(backend, dir, &cfg, true).await?;
    ensure(
        log.recovery_report()
            .iter()
            .all(|r| r.action == Action::Trust && r.time_index_problem.is_none()),
        || format!("clean reopen did not trust: {:?}", log.recovery_report()),
    )?;
    let reopened: Vec<i64> = log
        .segments()
        .iter()
        .map(|s| s.max_timestamp_ms())
        .collect();
    ensure(reopened == maxes, || {
        format!("trusted segments' max timestamps {reopened:?} != {maxes:?}")
    })?;
    expect_timestamp_answers(&log, &model, "clean reopen").await?;
    // Appends after a trusted reopen resume the placer where it was.
    model.extend(append_timed(&log, &timed_batches(0xbeef, 40), 500).await?);
    expect_timestamp_answers(&log, &model, "after resume").await?;
    expect_exact_max_timestamps(&log, &model, "after resume")?;
    let before = time_indexes(&log);
    log.close().await.step("close")?;
    for (base, _) in &before {
        backend
            .remove_file(&dir.join(time_index_file_name(*base)))
            .await
            .step("remove .timeindex")?;
    }
    let log = open(backend, dir, &cfg, true).await?;
    ensure(time_indexes(&log) == before, || {
        "rebuilt time indexes differ from the ones the writer made".into()
    })?;
    expect_time_index_files(backend, &log).await?;
    expect_timestamp_answers(&log, &model, "rebuilt").await?;
    log.close().await.step("close")
}

/// A damaged `.timeindex` is rebuilt by a scan and answers the same: on sealed segments after
/// a clean shutdown (missing, partial trailing entry, disordered, entry past the segment's
/// end: each named in the report, the offset index being fine), and after a crash (the active
/// segment's torn `.timeindex` and a deleted sealed one).
pub async fn check_time_index_rebuilt_after_crash<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(2500, 200, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let mut rising = timed_batches(0xfeed, 160);
    rising.truncate(80); // the rising half: several time entries per segment
    let mut model = append_timed(&log, &rising, 0).await?;
    let originals = time_indexes(&log);
    ensure(originals.len() >= 6, || {
        format!("{} segments", originals.len())
    })?;
    ensure(originals[..4].iter().all(|(_, e)| e.len() >= 2), || {
        format!(
            "too few time entries: {:?}",
            originals.iter().map(|(_, e)| e.len()).collect::<Vec<_>>()
        )
    })?;
    log.close().await.step("close")?;
    let path = |i: usize| dir.join(time_index_file_name(originals[i].0));
    let paths = [path(0), path(1), path(2), path(3)];
    damage_four_ways(backend, &paths, TIME_ENTRY_BYTES, 5).await?;

    let log = open(backend, dir, &cfg, true).await?;
    let report = log.recovery_report().to_vec();
    let problems = [
        |p: &TimeIndexProblem| *p == TimeIndexProblem::Missing,
        |p: &TimeIndexProblem| {
            matches!(
                p,
                TimeIndexProblem::Invalid(TimeIndexCheck::PartialEntry { .. })
            )
        },
        |p: &TimeIndexProblem| {
            matches!(
                p,
                TimeIndexProblem::Invalid(TimeIndexCheck::TimestampNotIncreasing { .. })
            )
        },
        |p: &TimeIndexProblem| {
            matches!(
                p,
                TimeIndexProblem::Invalid(TimeIndexCheck::OffsetPastSegmentEnd { .. })
            )
        },
    ];
    for (i, expected) in problems.iter().enumerate() {
        let r = &report[i];
        ensure(
            r.case == Case::SealedIndexValid
                && r.action == Action::RebuildIndex
                && r.truncated_bytes == 0
                && r.time_index_problem.as_ref().is_some_and(expected),
            || format!("segment {i}: {r:?}"),
        )?;
    }
    ensure(
        report[4..]
            .iter()
            .all(|r| r.action == Action::Trust && r.time_index_problem.is_none()),
        || format!("intact segments were not trusted: {report:?}"),
    )?;
    ensure(time_indexes(&log) == originals, || {
        "rebuilt time indexes differ from the originals".into()
    })?;
    expect_time_index_files(backend, &log).await?;
    expect_exact_max_timestamps(&log, &model, "rebuilt")?;
    expect_timestamp_answers(&log, &model, "rebuilt").await?;

    // A crash: more appends, no close; then a torn active .timeindex and a lost sealed one.
    model.extend(append_timed(&log, &timed_batches(0xcafe, 30), 900).await?);
    let originals = time_indexes(&log);
    let active = originals.len() - 1;
    ensure(!originals[active].1.is_empty(), || {
        "the active segment has no time entry".into()
    })?;
    drop(log);
    let active_path = dir.join(time_index_file_name(originals[active].0));
    let bytes = read_file(backend, &active_path).await?;
    write_file(backend, &active_path, &bytes[..bytes.len() - 7]).await?;
    backend
        .remove_file(&dir.join(time_index_file_name(originals[1].0)))
        .await
        .step("remove sealed")?;
    let log = open(backend, dir, &cfg, false).await?;
    let report = log.recovery_report().to_vec();
    ensure(
        report[active].action == Action::ScanAndTruncate
            && report[1].action == Action::RebuildIndex
            && report[1].time_index_problem == Some(TimeIndexProblem::Missing),
        || format!("after a crash: {report:?}"),
    )?;
    ensure(time_indexes(&log) == originals, || {
        "time indexes rebuilt after a crash differ".into()
    })?;
    expect_time_index_files(backend, &log).await?;
    expect_exact_max_timestamps(&log, &model, "after crash")?;
    expect_timestamp_answers(&log, &model, "after crash").await?;
    log.close().await.step("close")
}

/// Retention deletes the early segments with their `.timeindex`; answers for timestamps that
/// lay in them move forward to the first record kept at or after the target (never below the
/// log start, I9), and the rest are unchanged.
pub async fn check_offset_for_timestamp_after_retention<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let mut cfg = config(2500, 200, FlushPolicy::None);
    cfg.retention_bytes = Some(6000);
    let log = open(backend, dir, &cfg, false).await?;
    let model = append_timed(&log, &timed_batches(0xabcd, 100), 0).await?;
    expect_timestamp_answers(&log, &model, "before retention").await?;
    let first_ts = model[0].timestamps[0];
    let before = log.offset_for_timestamp(first_ts).await.step("before")?;
    ensure(before == Some((Offset(0), first_ts)), || {
        format!("first record: {before:?}")
    })?;
    let outcome = log.apply_retention(NOW_MS).await.step("retention")?;
    ensure(!outcome.deleted_base_offsets.is_empty(), || {
        "nothing deleted".into()
    })?;
    for base in &outcome.deleted_base_offsets {
        ensure(
            !file_exists(backend, &dir.join(time_index_file_name(*base))).await?,
            || format!(".timeindex {base} still on disk"),
        )?;
    }
    let start = log.log_start_offset();
    let after = log.offset_for_timestamp(first_ts).await.step("after")?;
    ensure(after.is_some_and(|(o, _)| o >= start), || {
        format!("after retention the first timestamp answers {after:?}, log start {start}")
    })?;
    expect_timestamp_answers(&log, &model, "after retention").await?;
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    expect_timestamp_answers(&log, &model, "reopen after retention").await?;
    log.close().await.step("close")
}

// ---------------------------------------------------------------------------------------------
// The fault suite.
// ---------------------------------------------------------------------------------------------

/// Appends `batches` one by one on `log`, returning the acknowledged ones (offset → stored
/// bytes); errors are expected and skipped.
async fn append_acknowledged<B: Backend>(
    log: &PartitionLog<B>,
    batches: &[Vec<u8>],
) -> BTreeMap<i64, Vec<u8>> {
    let mut acked = BTreeMap::new();
    for batch in batches {
        if let Ok(info) = log.append(batch.clone(), NOW_MS).await {
            acked.insert(info.base_offset.0, stored(batch, info.base_offset));
        }
    }
    acked
}

/// After a crash, reopens on the plain backend and checks: every acknowledged batch is present
/// byte for byte (I8); the log is a dense prefix of the batches attempted, in order, made of
/// whole valid batches only (I3: nothing after the first bad byte); appending continues
/// densely. Returns the recovered high watermark.
async fn expect_survivors<B: Backend>(
    backend: &B,
    dir: &Path,
    cfg: &LogConfig,
    attempted: &[Vec<u8>],
    acked: &BTreeMap<i64, Vec<u8>>,
    what: &str,
) -> Result<Offset, String> {
    let log = open(backend, dir, cfg, false).await.step(what)?;
    let got = read_all(&log).await.step(what)?;
    ensure(got.len() <= attempted.len(), || {
        format!("{what}: more batches than appended")
    })?;
    let mut next = Offset(0);
    for (i, (offset, bytes)) in got.iter().enumerate() {
        ensure(*offset == next, || {
            format!("{what}: batch {i} at {offset}, expected {next}")
        })?;
        ensure(*bytes == stored(&attempted[i], next), || {
            format!("{what}: batch {i} is not the batch appended {i}th")
        })?;
        next = BatchIter::new(bytes)
            .next()
            .ok_or("empty")?
            .step("batch")?
            .header
            .next_offset();
    }
    for (offset, bytes) in acked {
        let found = got.iter().find(|(o, _)| o.0 == *offset);
        ensure(found.map(|(_, b)| b) == Some(bytes), || {
            format!("{what}: acknowledged batch at {offset} lost (I8)")
        })?;
    }
    expect_files_match_sizes(backend, &log).await.step(what)?;
    let hw = log.high_watermark();
    let segments_bytes: u64 = log.segments().iter().map(|s| s.size_bytes()).sum();
    let batch_bytes: u64 = got.iter().map(|(_, b)| b.len() as u64).sum();
    ensure(segments_bytes == batch_bytes, || {
        format!("{what}: {segments_bytes} bytes on disk for {batch_bytes} of batches")
    })?;
    let info = log
        .append(test_batch(4242, 1, 8, NOW_MS), NOW_MS)
        .await
        .step(what)?;
    ensure(info.base_offset == hw, || {
        format!("{what}: append after recovery not dense")
    })?;
    log.close().await.step(what)?;
    Ok(hw)
}

/// I8 crash fuzzing: for every N, the filesystem fails every call after N operations while
/// batches are appended under `fsync` (with segment rolls); after the crash, a reopen on the
/// plain backend finds every acknowledged batch, dense, and nothing torn.
pub async fn check_fault_crash_after_every_op<B: Backend>(backend: &B, dir: &Path) -> Check {
    crash_after_every_op(backend, dir, false).await
}

/// I8 crash fuzzing with write coalescing: as [`check_fault_crash_after_every_op`], but the
/// batches are appended all at once, so they are written in coalesced groups (one `write_at`
/// each, never across a roll); a failed group acknowledges none of its batches, and the
/// survivors are still a dense prefix in arrival order.
pub async fn check_fault_crash_after_every_op_coalesced<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    crash_after_every_op(backend, dir, true).await
}

/// Appends `batches` all at once (coalesced), returning the acknowledged ones.
async fn append_acknowledged_together<B: Backend>(
    log: &PartitionLog<B>,
    batches: &[Vec<u8>],
) -> BTreeMap<i64, Vec<u8>> {
    let results = append_coalesced(log, batches).await;
    let mut acked = BTreeMap::new();
    for (batch, result) in batches.iter().zip(results) {
        if let Ok(info) = result {
            acked.insert(info.base_offset.0, stored(batch, info.base_offset));
        }
    }
    acked
}

/// The body of the crash-after-every-op checks; `together` appends the batches concurrently.
async fn crash_after_every_op<B: Backend>(backend: &B, dir: &Path, together: bool) -> Check {
    let cfg = config(900, 256, FlushPolicy::Fsync);
    let attempted: Vec<Vec<u8>> = (0..8)
        .map(|i| test_batch(i, 1 + (i as usize % 3), 60 + i as usize * 20, NOW_MS))
        .collect();
    // Count the calls of a run without faults.
    let total_ops = {
        let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
        let sub = dir.join("count");
        let log = open(&faulty, &sub, &cfg, false).await?;
        let acked = if together {
            append_acknowledged_together(&log, &attempted).await
        } else {
            append_acknowledged(&log, &attempted).await
        };
        ensure(acked.len() == attempted.len(), || {
            "fault-free run failed".into()
        })?;
        ensure(log.segments().len() >= 3, || "expected rolls".into())?;
        drop(log);
        faulty.plan().op_count()
    };
    let mut crashed_runs = 0;
    for n in 0..=total_ops + 1 {
        let sub = dir.join(format!("crash-{n}"));
        let plan = FaultPlan::new();
        plan.fail_after(n);
        let faulty = FaultyBackend::new(backend.clone(), plan.clone());
        let acked = match PartitionLog::open(faulty, &sub, cfg.clone(), false, NOW_MS).await {
            Ok(log) => {
                if together {
                    append_acknowledged_together(&log, &attempted).await
                } else {
                    append_acknowledged(&log, &attempted).await
                }
            }
            Err(_) => BTreeMap::new(),
        };
        if plan.is_crashed() {
            crashed_runs += 1;
        }
        // The process "dies" here: nothing more reaches the files.
        expect_survivors(
            backend,
            &sub,
            &cfg,
            &attempted,
            &acked,
            &format!("crash after {n} ops"),
        )
        .await?;
        backend.remove_dir_all(&sub).await.step("cleanup")?;
    }
    ensure(crashed_runs as u64 >= total_ops * 9 / 10, || {
        format!("only {crashed_runs} of {total_ops} runs crashed")
    })
}

/// A torn write (at header bytes, mid-batch, last byte) is not acknowledged, leaves reads
/// unchanged (I2), and the next append overwrites it at the same offset and position; a crash
/// right after a tear recovers to the batches before it (I3).
pub async fn check_fault_torn_write<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 256, FlushPolicy::None);
    let batch = test_batch(77, 3, 120, NOW_MS);
    for tear_at in [0usize, 1, 8, 12, 20, 61, 200, batch.len() - 1] {
        for crash in [false, true] {
            let sub = dir.join(format!("tear-{tear_at}-{crash}"));
            let plan = FaultPlan::new();
            let faulty = FaultyBackend::new(backend.clone(), plan.clone());
            let log = open(&faulty, &sub, &cfg, false).await?;
            let before: Vec<Vec<u8>> = (0..5).map(|i| test_batch(i, 2, 90, NOW_MS)).collect();
            let mut model = BTreeMap::new();
            append_all(&log, &before, &mut model).await?;
            let hw = log.high_watermark();
            let size = log.size_bytes();
            plan.tear_next_write_at(tear_at);
            match log.append(batch.clone(), NOW_MS).await {
                Err(e) if e.raw_os_error() == Some(EIO_RAW) => {}
                other => {
                    return Err(format!(
                        "torn append at {tear_at}: expected EIO, got {other:?}"
                    ))
                }
            }
            ensure(
                log.high_watermark() == hw && log.size_bytes() == size,
                || "a torn append was published".into(),
            )?;
            expect_model(&log, &model).await?;
            let mut attempted = before.clone();
            if crash {
                drop(log);
                expect_survivors(
                    backend,
                    &sub,
                    &cfg,
                    &attempted,
                    &model,
                    &format!("crash after tear at {tear_at}"),
                )
                .await?;
            } else {
                let small = test_batch(78, 1, 5, NOW_MS);
                let info = log
                    .append(small.clone(), NOW_MS)
                    .await
                    .step("append after tear")?;
                ensure(
                    info.base_offset == hw && u64::from(info.position.0) == size,
                    || {
                        format!(
                            "append after tear at {}/{}, expected {hw}/{size}",
                            info.base_offset, info.position
                        )
                    },
                )?;
                model.insert(hw.0, stored(&small, hw));
                attempted.push(small);
                expect_model(&log, &model).await?;
                drop(log);
                expect_survivors(
                    backend,
                    &sub,
                    &cfg,
                    &attempted,
                    &model,
                    &format!("reopen after tear at {tear_at}"),
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// ENOSPC: the append fails with the OS error kept (28), is not acknowledged, the partition
/// stays readable; once space is back, appends work and offsets stay dense.
pub async fn check_fault_enospc<B: Backend>(backend: &B, dir: &Path) -> Check {
    for flush in [FlushPolicy::None, FlushPolicy::Fsync] {
        let sub = dir.join(format!("{flush:?}").replace([' ', '{', '}', ':'], ""));
        let cfg = config(1 << 20, 256, flush);
        let plan = FaultPlan::new();
        let faulty = FaultyBackend::new(backend.clone(), plan.clone());
        let log = open(&faulty, &sub, &cfg, false).await?;
        let mut model = BTreeMap::new();
        append_all(
            &log,
            &[test_batch(1, 2, 50, NOW_MS), test_batch(2, 1, 50, NOW_MS)],
            &mut model,
        )
        .await?;
        let hw = log.high_watermark();
        plan.enospc_on_write(true);
        for _ in 0..3 {
            match log.append(test_batch(3, 1, 50, NOW_MS), NOW_MS).await {
                Err(e) if e.raw_os_error() == Some(ENOSPC_RAW) => {}
                other => {
                    return Err(format!(
                        "append on a full disk: expected ENOSPC, got {other:?}"
                    ))
                }
            }
        }
        ensure(log.high_watermark() == hw && !log.is_offline(), || {
            "ENOSPC changed the log or took it offline".into()
        })?;
        expect_model(&log, &model).await?;
        plan.enospc_on_write(false);
        append_all(&log, &[test_batch(4, 3, 50, NOW_MS)], &mut model).await?;
        expect_model(&log, &model).await?;
        log.close().await.step("close")?;
        let log = open(backend, &sub, &cfg, false).await?;
        expect_model(&log, &model).await?;
        log.close().await.step("close")?;
    }
    Ok(())
}

/// I8: an EIO from sync under `fsync` is never acknowledged; the partition goes offline for
/// writes with a clear error (even after the disk heals: no retried sync), stays readable, and
/// a reopen recovers every acknowledged batch and takes writes again.
pub async fn check_fault_eio_on_sync_goes_offline<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = config(1 << 20, 256, FlushPolicy::Fsync);
    let plan = FaultPlan::new();
    let faulty = FaultyBackend::new(backend.clone(), plan.clone());
    let log = Rc::new(open(&faulty, dir, &cfg, false).await?);
    let mut acked = BTreeMap::new();
    append_all(&log, &[test_batch(1, 2, 50, NOW_MS)], &mut acked).await?;
    plan.eio_on_sync(true);
    let attempt = [test_batch(2, 1, 50, NOW_MS), test_batch(3, 1, 50, NOW_MS)];
    let results =
        futures::future::join_all(attempt.iter().map(|b| log.append(b.clone(), NOW_MS))).await;
    for r in &results {
        match r {
            Err(LogError::Offline {
                raw_os_error: Some(EIO_RAW),
                ..
            }) => {}
            other => {
                return Err(format!(
                    "append with a failing sync: expected Offline(EIO), got {other:?}"
                ))
            }
        }
    }
    ensure(log.is_offline(), || {
        "not offline after a failed sync".into()
    })?;
    plan.heal();
    let syncs = log.sync_count();
    match log.append(test_batch(4, 1, 50, NOW_MS), NOW_MS).await {
        Err(e @ LogError::Offline { .. }) => {
            ensure(e.kafka_error_code().code() == 56, || {
                "offline is not KAFKA_STORAGE_ERROR".into()
            })?;
        }
        other => {
            return Err(format!(
                "append while offline: expected Offline, got {other:?}"
            ))
        }
    }
    ensure(log.sync_count() == syncs, || {
        "a failed sync was retried (I8)".into()
    })?;
    let r = log
        .read(Offset(0), 1 << 20)
        .await
        .step("read while offline")?;
    ensure(!r.bytes.is_empty(), || {
        "offline partition not readable".into()
    })?;
    ensure(log.close().await.is_err(), || {
        "close of an offline log reported success".into()
    })?;
    drop(log);
    let attempted: Vec<Vec<u8>> = std::iter::once(test_batch(1, 2, 50, NOW_MS))
        .chain(attempt)
        .collect();
    expect_survivors(backend, dir, &cfg, &attempted, &acked, "reopen after EIO").await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Runners.
// ---------------------------------------------------------------------------------------------

/// Runs one check on one shard of `B` in `dir`; `Err` if it failed or never finished.
pub fn run_check<B, F, Fut>(dir: &Path, check: F) -> Result<(), String>
where
    B: Backend,
    F: Fn(B, PathBuf) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + 'static,
{
    crate::conformance::backend::run_check::<B, F, Fut>(dir, check)
}

/// The one list of log check names, handed to a callback macro: `checks` gives the
/// conformance checks, `fault_checks` the fault checks, each as `$callback! { args [names] }`.
/// Both [`run_all`]/[`run_fault_suite`] and [`log_suite_tests!`](crate::log_suite_tests)
/// take their lists from here, so a check cannot be run by one and missed by the other.
#[doc(hidden)]
#[macro_export]
macro_rules! log_check_names {
    (checks, {$($callback:tt)*}, {$($args:tt)*}) => {
        $($callback)*! { $($args)* [
            check_append_read_round_trip,
            check_invalid_batch_touches_nothing,
            check_segment_roll_at_segment_bytes,
            check_index_placement_small_batches,
            check_index_placement_huge_batches,
            check_reads_racing_appends,
            check_recovery_every_truncation_point,
            check_recovery_bit_flips_in_tail,
            check_sealed_index_rebuilt,
            check_retention_by_size,
            check_retention_by_time,
            check_read_in_flight_survives_retention,
            check_group_commit_shares_syncs,
            check_coalesced_appends_share_writes,
            check_coalesced_refusal_stays_alone,
            check_interval_flush_ticks,
            check_clean_reopen_does_not_scan,
            check_topic_metadata_round_trip,
            check_offset_for_timestamp_matches_reference,
            check_time_index_rebuilt_after_crash,
            check_offset_for_timestamp_after_retention,
            check_producer_dedup_survives_clean_restart,
            check_producer_dedup_survives_crash,
        ] }
    };
    (fault_checks, {$($callback:tt)*}, {$($args:tt)*}) => {
        $($callback)*! { $($args)* [
            check_fault_crash_after_every_op,
            check_fault_crash_after_every_op_coalesced,
            check_fault_torn_write,
            check_fault_enospc,
            check_fault_eio_on_sync_goes_offline,
        ] }
    };
}

fn run_list<B: Backend>(dir: &Path, fault: bool) {
    let failures = if fault {
        run_on_one_shard::<B, _, _>(dir, |backend, root| async move {
            crate::log_check_names!(fault_checks, {run_checks}, {backend, root,})
        })
    } else {
        run_on_one_shard::<B, _, _>(dir, |backend, root| async move {
            crate::log_check_names!(checks, {run_checks}, {backend, root,})
        })
    };
    assert_none_failed("log checks", &failures);
}

/// Runs every conformance check on one shard of `B`, each in its own subdirectory of `dir`.
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_all<B: Backend>(dir: &Path) {
    run_list::<B>(dir, false);
}

/// Runs every fault check (on [`FaultyBackend`]`<B>`, reopening on `B`) on one shard.
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_fault_suite<B: Backend>(dir: &Path) {
    run_list::<B>(dir, true);
}

/// Expands to one `#[test]` per log conformance and fault check, run on the backend type
/// given, each in a fresh scratch directory (removed when the check passes). A backend's test
/// file needs one line: `minikafka_broker::log_suite_tests!(my_backend::MyBackend);`.
#[macro_export]
macro_rules! log_suite_tests {
    ($backend:ty) => {
        $crate::log_check_names!(checks, {$crate::log_suite_tests}, {@tests $backend;});
        $crate::log_check_names!(fault_checks, {$crate::log_suite_tests}, {@tests $backend;});
    };
    (@tests $backend:ty; [$($check:ident),* $(,)?]) => {
        $(
            #[test]
            fn $check() {
                let dir = $crate::conformance::backend::scratch_dir(concat!("log-", stringify!($check)));
                let result = $crate::conformance::log::run_check::<$backend, _, _>(&dir, |backend, dir| async move {
                    $crate::conformance::log::$check(&backend, &dir).await
                });
                if let Err(e) = result {
                    panic!("{} failed: {e}", stringify!($check));
                }
                let _ = std::fs::remove_dir_all(&dir);
            }
        )*
    };
}
