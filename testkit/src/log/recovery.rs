//! The recovery suite: a torn or damaged tail at every truncation point and bit flip is cut back
//! to the last whole batch (I5), damaged sealed indexes are rebuilt, and a clean reopen scans
//! nothing.

use super::model::{
    append_all, config, damage_four_ways, expect_files_match_sizes, expect_model, open, read_file,
    test_batch, write_file, NOW_MS,
};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use crate::fault::FaultPlan;
use crate::fault::FaultyBackend;
use crate::fault::FileOp;
use minikafka_broker::log::segment::index_file_name;
use minikafka_broker::log::segment::log_file_name;
use minikafka_broker::log::segment::time_index_file_name;
use minikafka_broker::log::sync_recovered;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::LogConfig;
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_core::backend::BackendFile;
use minikafka_core::backend::OpenMode;
use minikafka_core::index::IndexEntry;
use minikafka_core::index::ENTRY_BYTES;
use minikafka_core::record::BatchIter;
use minikafka_core::recovery::Action;
use minikafka_core::recovery::Case;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;

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

/// Batch boundaries in the active segment (from `active_base` on): each whole batch's end as
/// a byte position in the file and the next offset after it, starting with `(0, active_base)`.
fn batch_ends(
    model: &BTreeMap<i64, Vec<u8>>,
    active_base: Offset,
) -> Result<Vec<(usize, Offset)>, String> {
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
    Ok(ends)
}

/// The offset after the last whole batch that a cut at byte `cut` keeps (`active_base` when
/// none), from [`batch_ends`].
fn survivors_end(ends: &[(usize, Offset)], cut: usize, active_base: Offset) -> Offset {
    ends.iter()
        .rev()
        .find(|(end, _)| *end <= cut)
        .map_or(active_base, |(_, o)| *o)
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
    let ends = batch_ends(&model, active_base)?;
    ensure(ends[ends.len() - 1].0 == bytes.len(), || {
        "model and file disagree".into()
    })?;
    for cut in 0..=bytes.len() {
        write_file(backend, &log_path, &bytes[..cut]).await?;
        write_file(backend, &index_path, &index_bytes).await?;
        let survivors_end = survivors_end(&ends, cut, active_base);
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

/// I190, I29: a crash leaves the active segment's length up to 16 MiB past its data, the
/// preallocated tail reading as zeros (after a torn tail or not); recovery reads the zeros as
/// a torn tail, so they never surface as records and the file is cut back to the data. At
/// each batch boundary, one byte either side of it, and the empty file, the tail is cut there
/// and then extended by 1 MiB of zeros (`preallocate`, as the driver does), and the log
/// recovers to exactly the whole batches before the cut, with the file cut to them.
pub async fn check_recovery_preallocated_tail<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = LogConfig {
        preallocate: true,
        ..config(1 << 20, 64, FlushPolicy::Fsync)
    };
    let (model, active_base, bytes) = build_tail(backend, dir, &cfg, 4).await?;
    let log_path = dir.join(log_file_name(active_base));
    let index_path = dir.join(index_file_name(active_base));
    let index_bytes = read_file(backend, &index_path).await?;
    let ends = batch_ends(&model, active_base)?;
    let mut cuts: Vec<usize> = ends
        .iter()
        .flat_map(|(end, _)| [end.saturating_sub(1), *end, end + 1])
        .filter(|cut| *cut <= bytes.len())
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts {
        write_file(backend, &log_path, &bytes[..cut]).await?;
        write_file(backend, &index_path, &index_bytes).await?;
        let file = backend
            .open(&log_path, OpenMode::ReadWrite)
            .await
            .step("open the cut log")?;
        file.preallocate(cut as u64, 1 << 20)
            .await
            .step("preallocate past the cut")?;
        let len = file.len().await.step("len")?;
        ensure(len == cut as u64 + (1 << 20), || {
            format!("cut at {cut}: the preallocation left the length at {len}")
        })?;
        file.close().await.step("close")?;
        // What recovery reads is the cut prefix and then zeros: a batch whose bytes past the
        // cut were zeros anyway (a record ends with its header count, 0 here) is whole again.
        let whole_end = ends
            .iter()
            .map(|(end, _)| *end)
            .filter(|end| bytes[cut.min(*end)..*end].iter().all(|b| *b == 0))
            .max()
            .unwrap_or(0);
        let survivors_end = survivors_end(&ends, whole_end, active_base);
        expect_recovered(
            backend,
            dir,
            &cfg,
            &model,
            survivors_end,
            &format!("preallocated tail cut at {cut}"),
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

/// I5: after a clean shutdown, reopening trusts every segment and does not read the logs: a
/// byte damaged inside a sealed segment goes unnoticed, and the filesystem calls made by the
/// reopen do not grow with segment bytes (counted through a [`FaultyBackend`] with no faults).
pub async fn check_clean_reopen_does_not_scan<B: Backend>(backend: &B, dir: &Path) -> Check {
    async fn reopen_ops<B: Backend>(
        backend: &B,
        dir: &Path,
        cfg: &LogConfig,
    ) -> Result<
        (
            u64,
            Vec<minikafka_broker::log::recover::SegmentRecovery>,
            Vec<u64>,
        ),
        String,
    > {
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

/// After a kill (no close: the files are as the process left them, indexes whole) the
/// reopen scans the active segment (I3) but keeps its indexes, which already hold the rebuilt
/// bytes: no rename, no sync of a file or directory (startup cost per partition). An active
/// index that lost its last entry is still rewritten, and reads through it stay right.
pub async fn check_unclean_reopen_keeps_whole_indexes<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = config(6000, 512, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..60)
        .map(|i| test_batch(i, 1 + (i as usize % 2), 60, NOW_MS))
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let active = log
        .segments()
        .last()
        .map(|s| s.base_offset())
        .ok_or("no segment")?;
    let active_entries = log
        .segments()
        .last()
        .map(|s| s.index_entries())
        .unwrap_or_default();
    ensure(
        log.segments().len() >= 2 && active_entries.len() >= 2,
        || {
            format!(
                "{} segments, {} active index entries",
                log.segments().len(),
                active_entries.len()
            )
        },
    )?;
    drop(log); // killed: no close, no sync, no clean-shutdown marker
    let files_left = backend.list_dir(dir).await.step("list")?.len();

    let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
    let log = open(&faulty, dir, &cfg, false).await?;
    let report = log.recovery_report().to_vec();
    let last = report.last().ok_or("no recovery report")?;
    ensure(
        last.action == Action::ScanAndTruncate && last.truncated_bytes == 0,
        || format!("the active segment after a kill: {last:?}"),
    )?;
    let plan = faulty.plan();
    let (renames, syncs, dir_syncs, writes) = (
        plan.op_count_of(FileOp::Rename),
        plan.op_count_of(FileOp::SyncData),
        plan.op_count_of(FileOp::SyncDir),
        plan.op_count_of(FileOp::WriteAt),
    );
    ensure(renames + syncs + dir_syncs + writes == 0, || {
        format!(
            "reopen after a kill rewrote whole indexes: {renames} renames, {syncs} file \
             syncs, {dir_syncs} directory syncs, {writes} writes"
        )
    })?;
    // No transaction ever ran here: no `.txnindex` is looked for (each file the listing
    // showed is opened at most once) and none is removed.
    let (opens, removes) = (
        plan.op_count_of(FileOp::Open),
        plan.op_count_of(FileOp::RemoveFile),
    );
    ensure(opens <= files_left as u64 && removes == 0, || {
        format!(
            "reopen after a kill opened {opens} files of the {files_left} there and removed \
             {removes}"
        )
    })?;
    expect_model(&log, &model).await?;
    drop(log);

    // The active index loses its last entry (as if the kill came between the log write and
    // the index write): the scan's index differs, so it is rewritten.
    let index_path = dir.join(index_file_name(active));
    let whole = read_file(backend, &index_path).await?;
    write_file(backend, &index_path, &whole[..whole.len() - ENTRY_BYTES]).await?;
    let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
    let log = open(&faulty, dir, &cfg, false).await?;
    ensure(faulty.plan().op_count_of(FileOp::Rename) >= 1, || {
        "a short active index was kept".into()
    })?;
    ensure(read_file(backend, &index_path).await? == whole, || {
        "the rewritten active index differs from the one the appends wrote".into()
    })?;
    ensure(
        read_file(backend, &dir.join(time_index_file_name(active)))
            .await?
            .len()
            % minikafka_core::time_index::TIME_ENTRY_BYTES
            == 0,
        || "the active time index is not whole entries".into(),
    )?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// A start syncs what it recovered from several partitions with one filesystem sync (I8):
/// after a kill under `fsync` each unsynced open owes a sync, `sync_recovered` pays them all
/// with one `sync_filesystem` and no per-file sync; when that sync fails (a writeback error
/// that may be another program's), each partition syncs its own segment and their results
/// decide; a failed per-file sync hands out no log; a clean start owes none.
pub async fn check_recovered_partitions_synced_together<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    const PARTITIONS: usize = 3;
    let cfg = config(1 << 20, 4096, FlushPolicy::Fsync);
    let dirs: Vec<_> = (0..PARTITIONS)
        .map(|p| dir.join(format!("t-{p}")))
        .collect();
    let mut models = Vec::new();
    for (p, sub) in dirs.iter().enumerate() {
        let log = open(backend, sub, &cfg, false).await?;
        let mut model = BTreeMap::new();
        let batches: Vec<Vec<u8>> = (0..=p as u64)
            .map(|i| test_batch(i, 2, 40, NOW_MS))
            .collect();
        append_all(&log, &batches, &mut model).await?;
        models.push(model);
        drop(log); // killed: no close
    }

    // Opens every partition through a fresh fault plan, unsynced; then pays the sync.
    let reopen = |clean: bool, plan: FaultPlan| {
        let faulty = FaultyBackend::new(backend.clone(), plan);
        let dirs = dirs.clone();
        let cfg = cfg.clone();
        async move {
            let mut opened = Vec::new();
            for sub in &dirs {
                let log =
                    PartitionLog::open_unsynced(faulty.clone(), sub, cfg.clone(), clean, NOW_MS)
                        .await
                        .step("open unsynced")?;
                ensure(log.needs_sync() != clean, || {
                    format!("clean={clean}: the open owes a sync: {}", log.needs_sync())
                })?;
                opened.push(log);
            }
            let plan = faulty.plan();
            let before = (
                plan.op_count_of(FileOp::SyncFilesystem),
                plan.op_count_of(FileOp::SyncData),
            );
            let logs = sync_recovered(&faulty, dir, opened).await;
            let after = (
                plan.op_count_of(FileOp::SyncFilesystem),
                plan.op_count_of(FileOp::SyncData),
            );
            Ok::<_, String>((logs, (after.0 - before.0, after.1 - before.1)))
        }
    };

    let (logs, syncs) = reopen(false, FaultPlan::new()).await?;
    let logs = logs.step("sync recovered")?;
    ensure(syncs == (1, 0), || {
        format!(
            "{PARTITIONS} recovered partitions: (filesystem, file) syncs {syncs:?}, want (1, 0)"
        )
    })?;
    for (log, model) in logs.iter().zip(&models) {
        expect_model(log, model).await?;
    }
    drop(logs);

    let plan = FaultPlan::new();
    plan.eio_on_sync_filesystem(true);
    let (logs, syncs) = reopen(false, plan).await?;
    let logs = logs.step("sync recovered after a failed filesystem sync")?;
    ensure(syncs == (1, PARTITIONS as u64), || {
        format!(
            "a failed filesystem sync: (filesystem, file) syncs {syncs:?}, want (1, {PARTITIONS})"
        )
    })?;
    for (log, model) in logs.iter().zip(&models) {
        expect_model(log, model).await?;
    }
    drop(logs);

    let plan = FaultPlan::new();
    plan.eio_on_sync(true);
    let (logs, _) = reopen(false, plan).await?;
    ensure(logs.is_err(), || {
        "every sync failed, yet the recovered logs were handed out (I8)".into()
    })?;

    let (logs, syncs) = reopen(true, FaultPlan::new()).await?;
    let logs = logs.step("sync after a clean stop")?;
    ensure(syncs == (0, 0), || {
        format!("a clean start synced: (filesystem, file) syncs {syncs:?}")
    })?;
    for log in logs {
        log.close().await.step("close")?;
    }
    Ok(())
}

/// A `.txnindex` append that fails (I70): the ABORT marker is written and its range served
/// from memory, but the file lacks it, and a clean open trusts the file. So the close
/// reports the failure (the broker then writes no clean-shutdown marker) and the unclean
/// reopen rebuilds the range and the file from the log. The append is made to fail by a
/// directory where the file would go. Simulator seed 800881 lost a range this way.
pub async fn check_failed_txnindex_append_makes_close_unclean<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    use super::compaction::transactional_batch;
    use minikafka_broker::log::segment::txn_index_file_name;
    use minikafka_core::control_batch::{ControlType, TxnMarker};
    let cfg = config(1 << 20, 4096, FlushPolicy::Fsync);
    let log = open(backend, dir, &cfg, false).await?;
    let txnindex = dir.join(txn_index_file_name(Offset(0)));
    backend
        .create_dir_all(&txnindex)
        .await
        .step("block the txnindex")?;
    log.append(transactional_batch(1, 0, "k", "aborted"), NOW_MS)
        .await
        .step("txn")?;
    let abort = TxnMarker {
        producer_id: 1,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control_type: ControlType::Abort,
    };
    log.append_marker(abort, NOW_MS)
        .await
        .step("abort marker")?;
    ensure(
        log.aborted_transactions(Offset(0), Offset(2)).len() == 1,
        || "the aborted range is not in memory".into(),
    )?;
    ensure(log.close().await.is_err(), || {
        "close answered Ok (a clean shutdown) with the range missing from the txnindex".into()
    })?;
    backend
        .remove_dir_all(&txnindex)
        .await
        .step("unblock the txnindex")?;
    let log = open(backend, dir, &cfg, false).await?;
    let ranges = log.aborted_transactions(Offset(0), Offset(2));
    ensure(
        ranges.len() == 1 && ranges[0].first_offset == 0 && ranges[0].last_offset == 1,
        || format!("ranges after the unclean reopen: {ranges:?}"),
    )?;
    ensure(!read_file(backend, &txnindex).await?.is_empty(), || {
        "the txnindex was not rebuilt".into()
    })?;
    log.close().await.step("close after the rebuild")?;
    Ok(())
}
