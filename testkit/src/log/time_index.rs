//! The time index suite: lookups by timestamp match a reference computed from the model, the
//! time index is rebuilt after a crash, and lookups stay right after retention.

use super::model::{config, damage_four_ways, file_exists, open, read_file, write_file, NOW_MS};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use minikafka_broker::log::recover::TimeIndexProblem;
use minikafka_broker::log::segment::time_index_file_name;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_core::record::BatchBuilder;
use minikafka_core::record::Compression;
use minikafka_core::record::NewRecord;
use minikafka_core::recovery::Action;
use minikafka_core::recovery::Case;
use minikafka_core::time_index::TimeIndexCheck;
use minikafka_core::time_index::TimeIndexEntry;
use minikafka_core::time_index::TIME_ENTRY_BYTES;
use minikafka_core::types::Offset;
use std::path::Path;

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
