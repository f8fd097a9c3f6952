//! The log cleaner on real files (I1, I23, I24): a cleaning keeps the latest record per key at
//! its offset, the log reopens after it (crash or not) and takes appends; a crash at every
//! filesystem step of a cleaning leaves the old log or the new one, never a mix or a loss; a
//! read in flight keeps the segment it started on.

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_broker::log::cleaner::{
    checkpoint, clean_partition, load_checkpoint, CleanerCheckpoint, CleanerSettings,
};
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::compaction::policy::{CleanupPolicy, CompactionConfig};
use minikafka_core::record::{BatchBuilder, BatchIter, NewRecord, ValidateOptions};
use minikafka_core::types::Offset;

use super::model::{open, NOW_MS};
use crate::check::{ensure, Check, Step};
use crate::fault::{FaultPlan, FaultyBackend};

/// `(offset, key, value)` as read back; `None` value = tombstone.
pub type Row = (i64, Vec<u8>, Option<Vec<u8>>);

/// A compacted log: 1 MiB segments, no flush policy (only rolls, swaps and closes sync),
/// everything cleanable at once, tombstones kept 1 s.
pub fn compacted_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 128,
        retention_ms: None,
        flush: FlushPolicy::None,
        cleanup_policy: CleanupPolicy::COMPACT,
        compaction: CompactionConfig {
            min_cleanable_dirty_ratio_ppm: 0,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 1_000,
        },
        ..LogConfig::default()
    }
}

/// One batch of `(key, value)` records stamped `timestamp_ms`.
pub fn keyed_batch(records: &[(&str, Option<&str>)], timestamp_ms: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    for (key, value) in records {
        b.push(&NewRecord {
            key: Some(key.as_bytes()),
            value: value.map(str::as_bytes),
            headers: vec![],
            timestamp_ms,
        });
    }
    b.build(Offset(0))
}

/// The workload: `rounds` segments of overwrites of 5 keys, a tombstone for `k1` in the last;
/// an active segment with one more batch. Returns every row written, in offset order.
pub async fn write_workload<B: Backend>(
    log: &PartitionLog<B>,
    rounds: usize,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for round in 0..rounds {
        for batch in 0..3 {
            let values: Vec<String> = (0..5).map(|k| format!("v{round}.{batch}.{k}")).collect();
            let mut records: Vec<(String, Option<&str>)> = (0..5)
                .map(|k| (format!("k{k}"), Some(values[k].as_str())))
                .collect();
            if round + 1 == rounds && batch == 2 {
                records[1].1 = None; // delete k1
            }
            let refs: Vec<(&str, Option<&str>)> =
                records.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let info = log
                .append(keyed_batch(&refs, NOW_MS), NOW_MS)
                .await
                .step("append")?;
            for (i, (k, v)) in records.iter().enumerate() {
                rows.push((
                    info.base_offset.0 + i as i64,
                    k.clone().into_bytes(),
                    v.map(|v| v.as_bytes().to_vec()),
                ));
            }
        }
        log.roll_now(NOW_MS).await.step("roll")?;
    }
    let info = log
        .append(keyed_batch(&[("k0", Some("active"))], NOW_MS), NOW_MS)
        .await
        .step("append to the active segment")?;
    rows.push((info.base_offset.0, b"k0".to_vec(), Some(b"active".to_vec())));
    Ok(rows)
}

/// What a cleaning at `now_ms` must leave: below `end`, the latest row per key (tombstones
/// older than the retention gone); from `end` on, everything.
pub fn expected_after_clean(rows: &[Row], end: i64, tombstones_expired: bool) -> Vec<Row> {
    let mut latest: BTreeMap<&[u8], i64> = BTreeMap::new();
    for (offset, key, _) in rows.iter().filter(|r| r.0 < end) {
        latest.insert(key, *offset);
    }
    rows.iter()
        .filter(|(offset, key, value)| {
            *offset >= end
                || (latest[key.as_slice()] == *offset && !(value.is_none() && tombstones_expired))
        })
        .cloned()
        .collect()
}

/// Every row of the log, read through [`PartitionLog::read`] from the log start (as a
/// consumer fetches: across offset gaps).
pub async fn read_rows<B: Backend>(log: &PartitionLog<B>) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut offset = log.log_start_offset();
    let mut reads = 0;
    while offset < log.high_watermark() {
        reads += 1;
        ensure(reads < 10_000, || "reading made no progress".into())?;
        let read = log.read(offset, 1 << 16).await.step("read")?;
        if read.bytes.is_empty() {
            return Err(format!("empty read at {offset} below the high watermark"));
        }
        for view in BatchIter::new(&read.bytes).with_options(ValidateOptions::stored()) {
            let view = view.step("stored batch")?;
            for record in view.records() {
                let record = record.step("record")?;
                let at = view.header.base_offset.0 + record.offset_delta;
                if at >= offset.0 {
                    rows.push((
                        at,
                        record.key.unwrap_or_default().to_vec(),
                        record.value.map(<[u8]>::to_vec),
                    ));
                }
            }
            offset = view.header.next_offset();
        }
    }
    Ok(rows)
}

/// One cleaning at `now_ms` from a fresh checkpoint with the default settings.
pub async fn clean_once<B: Backend>(
    backend: &B,
    log: &PartitionLog<B>,
    now_ms: i64,
) -> Result<Option<minikafka_broker::log::cleaner::CleanOutcome>, String> {
    let mut checkpoint = CleanerCheckpoint::default();
    clean_partition(
        backend,
        log,
        &mut checkpoint,
        &CleanerSettings::default(),
        now_ms,
    )
    .await
    .step("clean")
}

/// A cleaning keeps the latest record per key at its offset (gaps elsewhere), shrinks the log,
/// drops the tombstone only once `delete.retention.ms` has passed, survives a reopen after a
/// crash and a clean one, and appends continue densely at the high watermark.
pub async fn check_compaction_keeps_latest_per_key<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = compacted_config();
    let log = open(backend, dir, &cfg, false).await?;
    let rows = write_workload(&log, 4).await?;
    let size_before = log.size_bytes();
    let end = log.segments().last().ok_or("no segment")?.base_offset().0;
    let outcome = clean_once(backend, &log, NOW_MS)
        .await?
        .ok_or("a dirty log with ratio 0 was not cleaned")?;
    ensure(outcome.pass_end.0 == end, || {
        format!("pass end {} != active base {end}", outcome.pass_end)
    })?;
    let expected = expected_after_clean(&rows, end, false);
    ensure(read_rows(&log).await? == expected, || {
        "after cleaning: not the latest row per key".into()
    })?;
    ensure(log.size_bytes() < size_before, || {
        "the log did not shrink".into()
    })?;
    ensure(expected.iter().any(|r| r.2.is_none()), || {
        "the young tombstone went".into()
    })?;
    // A later cleaning past delete.retention.ms drops the tombstone.
    let later = NOW_MS + cfg.compaction.delete_retention_ms;
    let mut checkpoint = CleanerCheckpoint {
        first_dirty: Offset(end),
        oldest_kept_tombstone_ms: outcome.counts.oldest_kept_tombstone_ms,
    };
    clean_partition(
        backend,
        &log,
        &mut checkpoint,
        &CleanerSettings::default(),
        later,
    )
    .await
    .step("clean for tombstones")?
    .ok_or("an expired tombstone did not make the log due")?;
    let expected = expected_after_clean(&rows, end, true);
    ensure(read_rows(&log).await? == expected, || {
        "after the tombstone's expiry".into()
    })?;
    // Crash (no close) and reopen, then a clean close and reopen: the same rows.
    drop(log);
    let log = open(backend, dir, &cfg, false).await?;
    ensure(read_rows(&log).await? == expected, || {
        "after a crash".into()
    })?;
    let hw = log.high_watermark();
    let info = log
        .append(keyed_batch(&[("k9", Some("new"))], NOW_MS), NOW_MS)
        .await
        .step("append after reopen")?;
    ensure(info.base_offset == hw, || {
        "append not at the high watermark (I1)".into()
    })?;
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    let mut expected = expected;
    expected.push((hw.0, b"k9".to_vec(), Some(b"new".to_vec())));
    ensure(read_rows(&log).await? == expected, || {
        "after a clean reopen".into()
    })?;
    Ok(())
}

/// I24: a crash after every filesystem call of a cleaning, then a reopen on the plain
/// backend: the log reads back as before the cleaning or as after it, never a mix, never a
/// loss; and it takes appends.
pub async fn check_compaction_crash_at_every_step<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = compacted_config();
    // Count the calls a cleaning makes.
    let (rows, total_ops, end) = {
        let sub = dir.join("count");
        let log = open(backend, &sub, &cfg, false).await?;
        let rows = write_workload(&log, 2).await?;
        drop(log);
        let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
        let log = open(&faulty, &sub, &cfg, false).await?;
        let before = faulty.plan().op_count();
        let end = log.segments().last().ok_or("no segment")?.base_offset().0;
        clean_once(&faulty, &log, NOW_MS)
            .await?
            .ok_or("not cleaned")?;
        (rows, faulty.plan().op_count() - before, end)
    };
    let old = rows.clone();
    let new = expected_after_clean(&rows, end, false);
    ensure(old != new, || "the workload has nothing to clean".into())?;
    let (mut saw_old, mut saw_new) = (false, false);
    for n in 0..=total_ops {
        let sub = dir.join(format!("crash-{n}"));
        let log = open(backend, &sub, &cfg, false).await?;
        write_workload(&log, 2).await?;
        log.close().await.step("close")?;
        let plan = FaultPlan::new();
        let faulty = FaultyBackend::new(backend.clone(), plan.clone());
        let log = open(&faulty, &sub, &cfg, true).await?;
        plan.fail_after(n);
        let _ = clean_once(&faulty, &log, NOW_MS).await;
        drop(log);
        let log = open(backend, &sub, &cfg, false)
            .await
            .step(&format!("reopen after a crash at op {n}"))?;
        let got = read_rows(&log).await.step(&format!("crash at op {n}"))?;
        if got == old {
            saw_old = true;
        } else if got == new {
            saw_new = true;
        } else {
            return Err(format!(
                "crash at op {n}: the log is neither the old nor the new one"
            ));
        }
        let hw = log.high_watermark();
        let info = log
            .append(keyed_batch(&[("k0", Some("after"))], NOW_MS), NOW_MS)
            .await
            .step("append after recovery")?;
        ensure(info.base_offset == hw, || {
            format!("crash at op {n}: append off the end")
        })?;
        drop(log);
        backend.remove_dir_all(&sub).await.step("cleanup")?;
    }
    ensure(saw_old && saw_new, || {
        format!(
            "expected both outcomes over {total_ops} crash points (old {saw_old}, new {saw_new})"
        )
    })
}

/// The cleaner's checkpoint survives a restart: saved after a cleaning, it loads back equal
/// from the reopened partition (which keeps the file), so the next cleaning finds nothing
/// dirty instead of re-cleaning the whole log (which a fresh checkpoint would), and after more
/// writes it keys only on the new segments (the dirty ratio counts them alone). A damaged
/// file, or one beyond the sealed segments, is not trusted: the cleaner starts over.
pub async fn check_cleaner_checkpoint_survives_restart<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = compacted_config();
    let settings = CleanerSettings::default();
    let log = open(backend, dir, &cfg, false).await?;
    write_workload(&log, 4).await?;
    ensure(
        load_checkpoint(backend, &log).await == CleanerCheckpoint::default(),
        || "a partition never cleaned has a checkpoint".into(),
    )?;
    let mut saved = CleanerCheckpoint::default();
    let first = clean_partition(backend, &log, &mut saved, &settings, NOW_MS)
        .await
        .step("clean")?
        .ok_or("a dirty log with ratio 0 was not cleaned")?;
    ensure(saved.first_dirty == first.pass_end, || {
        "the checkpoint is not the pass end".into()
    })?;
    checkpoint::save(backend, log.dir(), &saved)
        .await
        .step("save the checkpoint")?;
    log.close().await.step("close")?;

    let log = open(backend, dir, &cfg, true).await?;
    let loaded = load_checkpoint(backend, &log).await;
    ensure(loaded == saved, || {
        format!("loaded {loaded:?}, saved {saved:?}")
    })?;
    let mut resumed = loaded;
    let again = clean_partition(backend, &log, &mut resumed, &settings, NOW_MS)
        .await
        .step("clean after the restart")?;
    ensure(again.is_none(), || {
        format!("the restart re-cleaned a clean log: {again:?}")
    })?;
    let mut fresh = CleanerCheckpoint::default();
    let from_scratch = clean_partition(backend, &log, &mut fresh, &settings, NOW_MS)
        .await
        .step("clean from a fresh checkpoint")?;
    ensure(from_scratch.is_some(), || {
        "a fresh checkpoint found nothing to clean: the check cannot tell the two apart".into()
    })?;

    // More segments: only they are dirty, and the ratio counts the cleaned part as clean.
    write_workload(&log, 2).await?;
    let segments = log.segments();
    let sealed = &segments[..segments.len() - 1];
    let clean_bytes: u64 = sealed
        .iter()
        .filter(|s| s.base_offset() < saved.first_dirty)
        .map(|s| s.size_bytes())
        .sum();
    let dirty_bytes: u64 = sealed
        .iter()
        .filter(|s| s.base_offset() >= saved.first_dirty)
        .map(|s| s.size_bytes())
        .sum();
    let mut resumed = loaded;
    let next = clean_partition(backend, &log, &mut resumed, &settings, NOW_MS)
        .await
        .step("clean the new segments")?
        .ok_or("the new segments were not cleaned")?;
    ensure(next.plan.first_dirty == saved.first_dirty, || {
        format!(
            "the cleaning keyed from {} instead of the checkpoint {}",
            next.plan.first_dirty, saved.first_dirty
        )
    })?;
    ensure(
        (next.plan.clean_bytes, next.plan.dirty_bytes) == (clean_bytes, dirty_bytes)
            && clean_bytes > 0
            && dirty_bytes > 0,
        || {
            format!(
                "clean/dirty bytes {:?}, expected {clean_bytes}/{dirty_bytes}",
                next.plan
            )
        },
    )?;

    // Not trusted: a damaged file, or a first dirty offset past the active segment's base.
    let path = log.dir().join(checkpoint::CHECKPOINT_FILE);
    let file = backend
        .open(&path, OpenMode::ReadWriteCreate)
        .await
        .step("open the checkpoint")?;
    file.truncate(0).await.step("truncate")?;
    let (written, _) = file.write_at(b"0\nmany\n".to_vec(), 0).await;
    written.step("damage the checkpoint")?;
    file.close().await.step("close the checkpoint")?;
    ensure(
        load_checkpoint(backend, &log).await == CleanerCheckpoint::default(),
        || "a damaged checkpoint was trusted".into(),
    )?;
    let beyond = CleanerCheckpoint {
        first_dirty: Offset(log.high_watermark().0 + 1),
        oldest_kept_tombstone_ms: None,
    };
    checkpoint::save(backend, log.dir(), &beyond)
        .await
        .step("save")?;
    ensure(
        load_checkpoint(backend, &log).await == CleanerCheckpoint::default(),
        || "a checkpoint past the sealed segments was trusted".into(),
    )?;
    Ok(())
}

/// A read that took its segment before a cleaning swapped it keeps reading the old bytes
/// (its file stays open); reads started after see the cleaned log.
pub async fn check_read_in_flight_survives_cleaning<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = compacted_config();
    let log = open(backend, dir, &cfg, false).await?;
    write_workload(&log, 4).await?;
    let first = log.segments().first().cloned().ok_or("no segment")?;
    let old_bytes = first
        .read_log(0, first.size_bytes() as usize)
        .await
        .step("read")?;
    clean_once(backend, &log, NOW_MS)
        .await?
        .ok_or("not cleaned")?;
    let again = first
        .read_log(0, old_bytes.len())
        .await
        .step("read in flight")?;
    ensure(again == old_bytes, || {
        "the old segment changed under its reader".into()
    })?;
    let now_first = log.segments().first().cloned().ok_or("no segment")?;
    ensure(now_first.size_bytes() < first.size_bytes(), || {
        "the cleaned segment is not in place".into()
    })?;
    Ok(())
}

/// A transactional batch of `(key, value)` records for `producer_id` (epoch 0, from
/// `sequence`): attribute bit 0x10 set and the CRC recomputed, as a client sends it.
pub fn transactional_batch(producer_id: i64, sequence: i32, key: &str, value: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.producer_id = producer_id;
    b.producer_epoch = 0;
    b.base_sequence = sequence;
    b.push(&NewRecord {
        key: Some(key.as_bytes()),
        value: Some(value.as_bytes()),
        headers: vec![],
        timestamp_ms: NOW_MS,
    });
    let mut bytes = b.build(Offset(0));
    let at = minikafka_core::record::CRC_START;
    let attributes = i16::from_be_bytes([bytes[at], bytes[at + 1]]) | 0x10;
    bytes[at..at + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = minikafka_core::record::compute_crc(&bytes);
    bytes[at - 4..at].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Compaction and transactions (I68, I71): a cleaning drops an aborted transaction's
/// records (and gives their keys no latest value, so a committed record of the same key
/// survives), keeps the markers, and cleans nothing at or past the last stable offset.
pub async fn check_compaction_drops_aborted_transactions_below_the_lso<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    use minikafka_core::control_batch::{ControlType, TxnMarker};
    let marker = |producer_id, control_type| TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control_type,
    };
    let cfg = compacted_config();
    let log = open(backend, dir, &cfg, false).await?;
    let append = |bytes: Vec<u8>| log.append(bytes, NOW_MS);
    append(transactional_batch(2, 0, "k1", "committed"))
        .await
        .step("txn 2")?;
    append(keyed_batch(&[("k2", Some("v"))], NOW_MS))
        .await
        .step("plain")?;
    append(transactional_batch(1, 0, "k1", "aborted"))
        .await
        .step("txn 1")?;
    log.append_marker(marker(2, ControlType::Commit), NOW_MS)
        .await
        .step("commit")?;
    log.append_marker(marker(1, ControlType::Abort), NOW_MS)
        .await
        .step("abort")?;
    log.roll_now(NOW_MS).await.step("roll")?;
    append(transactional_batch(3, 0, "k3", "open"))
        .await
        .step("txn 3")?;
    append(keyed_batch(&[("k2", Some("v2"))], NOW_MS))
        .await
        .step("plain 2")?;
    log.roll_now(NOW_MS).await.step("roll 2")?;
    ensure(log.last_stable_offset() == Offset(5), || {
        format!(
            "LSO {} with producer 3's transaction open at 5",
            log.last_stable_offset()
        )
    })?;
    let outcome = clean_once(backend, &log, NOW_MS)
        .await?
        .ok_or("a dirty log with ratio 0 was not cleaned")?;
    ensure(outcome.counts.aborted == 1, || {
        format!("aborted records dropped: {}", outcome.counts.aborted)
    })?;
    ensure(outcome.pass_end <= Offset(5), || {
        format!("cleaned up to {}, past the LSO 5", outcome.pass_end)
    })?;
    let rows = read_rows(&log).await?;
    let offsets: Vec<i64> = rows.iter().map(|r| r.0).collect();
    ensure(offsets == [0, 1, 3, 4, 5, 6], || {
        format!("offsets after cleaning: {offsets:?} (markers at 3 and 4 stay, 2 goes)")
    })?;
    ensure(rows[0].2.as_deref() == Some(&b"committed"[..]), || {
        "the committed k1 was dropped in favour of an aborted one".into()
    })?;
    ensure(rows[1].2.as_deref() == Some(&b"v"[..]), || {
        "k2 at 1 went: the cleaning read past the LSO".into()
    })?;
    // The aborted range stays known after the cleaning and after a reopen.
    ensure(
        log.aborted_transactions(Offset(0), Offset(5)).len() == 1,
        || "the aborted range went with the cleaning".into(),
    )?;
    drop(log);
    let log = open(backend, dir, &cfg, false).await?;
    ensure(log.last_stable_offset() == Offset(5), || {
        "the reopened log lost the open transaction".into()
    })?;
    ensure(read_rows(&log).await?.len() == 6, || {
        "rows after reopen".into()
    })?;
    Ok(())
}

/// The workload of the marker checks: producer 2's committed `k1` at 0 (superseded at 4),
/// producer 1's aborted `k2` at 1, COMMIT at 2, ABORT at 3, plain `k3` at 5; a roll, and `k4`
/// at 6 in the active segment.
async fn write_txn_marker_workload<B: Backend>(log: &PartitionLog<B>) -> Check {
    use minikafka_core::control_batch::{ControlType, TxnMarker};
    let marker = |producer_id, control_type| TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control_type,
    };
    let append = |bytes: Vec<u8>| log.append(bytes, NOW_MS);
    append(transactional_batch(2, 0, "k1", "committed"))
        .await
        .step("txn 2")?;
    append(transactional_batch(1, 0, "k2", "aborted"))
        .await
        .step("txn 1")?;
    log.append_marker(marker(2, ControlType::Commit), NOW_MS)
        .await
        .step("commit")?;
    log.append_marker(marker(1, ControlType::Abort), NOW_MS)
        .await
        .step("abort")?;
    append(keyed_batch(&[("k1", Some("new"))], NOW_MS))
        .await
        .step("k1 again")?;
    append(keyed_batch(&[("k3", Some("v"))], NOW_MS))
        .await
        .step("k3")?;
    log.roll_now(NOW_MS).await.step("roll")?;
    append(keyed_batch(&[("k4", Some("v"))], NOW_MS))
        .await
        .step("active")?;
    Ok(())
}

/// The transaction state agrees with the log (I154, I68, I70): nothing ongoing (no
/// transactional batch left without its marker), and every aborted range a read_committed
/// read would report ends at a marker still in the log.
async fn markers_consistent<B: Backend>(log: &PartitionLog<B>) -> Check {
    ensure(log.last_stable_offset() == log.high_watermark(), || {
        format!(
            "LSO {} below the high watermark {}: a transaction without its marker",
            log.last_stable_offset(),
            log.high_watermark()
        )
    })?;
    let markers = control_offsets(log).await?;
    for range in log.aborted_transactions(Offset(0), log.high_watermark()) {
        ensure(
            markers.iter().any(|(at, _)| *at == range.last_offset),
            || format!("aborted range {range:?} has no marker in the log"),
        )?;
    }
    Ok(())
}

/// A crash (or an I/O error the broker lives through, then a clean stop) at every filesystem
/// step of the cleaning that removes the markers (I154, I24): the reopened log is the old one
/// (markers present) or the new one (markers gone), the transaction state agrees with it
/// (nothing ongoing, no aborted range without its marker), and it takes appends.
pub async fn check_marker_removal_crash_at_every_step<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = compacted_config();
    let horizon = NOW_MS + cfg.compaction.delete_retention_ms;
    // The log with both markers stamped, closed cleanly.
    let prepare = |sub: std::path::PathBuf| {
        let cfg = cfg.clone();
        async move {
            let log = open(backend, &sub, &cfg, false).await?;
            write_txn_marker_workload(&log).await?;
            let stamped = clean_once(backend, &log, NOW_MS)
                .await?
                .ok_or("not cleaned")?;
            ensure(stamped.counts.markers_stamped == 2, || {
                format!("stamping cleaning: {:?}", stamped.counts)
            })?;
            log.close().await.step("close")?;
            Ok::<_, String>(())
        }
    };
    let total_ops = {
        let sub = dir.join("count");
        prepare(sub.clone()).await?;
        let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
        let log = open(&faulty, &sub, &cfg, true).await?;
        let before = faulty.plan().op_count();
        let removed = clean_once(&faulty, &log, horizon)
            .await?
            .ok_or("not cleaned")?;
        ensure(removed.counts.markers_removed == 2, || {
            format!("removing cleaning: {:?}", removed.counts)
        })?;
        faulty.plan().op_count() - before
    };
    let (old, new) = (vec![2, 3, 4, 5, 6], vec![4, 5, 6]);
    let (mut saw_old, mut saw_new) = (false, false);
    for n in 0..=total_ops {
        for lives_on in [false, true] {
            let sub = dir.join(format!("crash-{n}-{lives_on}"));
            prepare(sub.clone()).await?;
            let plan = FaultPlan::new();
            let faulty = FaultyBackend::new(backend.clone(), plan.clone());
            let log = open(&faulty, &sub, &cfg, true).await?;
            plan.fail_after(n);
            let _ = clean_once(&faulty, &log, horizon).await;
            let what = format!("fault at op {n} (lives on: {lives_on})");
            let clean_close = if lives_on {
                plan.heal();
                markers_consistent(&log).await.step(&what)?;
                log.close().await.is_ok()
            } else {
                false
            };
            drop(log);
            let log = open(backend, &sub, &cfg, clean_close)
                .await
                .step(&format!("reopen after a {what}"))?;
            markers_consistent(&log).await.step(&what)?;
            let offsets: Vec<i64> = read_rows(&log).await?.iter().map(|r| r.0).collect();
            if offsets == old {
                saw_old = true;
            } else if offsets == new {
                saw_new = true;
            } else {
                return Err(format!("{what}: rows at {offsets:?}"));
            }
            let hw = log.high_watermark();
            let info = log
                .append(keyed_batch(&[("k0", Some("after"))], NOW_MS), NOW_MS)
                .await
                .step("append after recovery")?;
            ensure(info.base_offset == hw, || {
                format!("{what}: append off the end")
            })?;
            drop(log);
            backend.remove_dir_all(&sub).await.step("cleanup")?;
        }
    }
    ensure(saw_old && saw_new, || {
        format!(
            "expected both outcomes over {total_ops} fault points (old {saw_old}, new {saw_new})"
        )
    })
}

/// `(offset, delete horizon)` of every control batch of `log`.
async fn control_offsets<B: Backend>(
    log: &PartitionLog<B>,
) -> Result<Vec<(i64, Option<i64>)>, String> {
    let read = log.read(Offset(0), 1 << 20).await.step("read")?;
    let mut found = Vec::new();
    for view in BatchIter::new(&read.bytes).with_options(ValidateOptions::stored()) {
        let view = view.step("batch")?;
        if view.header.is_control() {
            found.push((view.header.base_offset.0, view.header.delete_horizon_ms()));
        }
    }
    Ok(found)
}

/// The `.txnindex` files in `dir`.
async fn txn_index_files<B: Backend>(backend: &B, dir: &Path) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = backend
        .list_dir(dir)
        .await
        .step("list")?
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .filter(|n| n.ends_with(".txnindex"))
        .collect();
    names.sort();
    Ok(names)
}

/// Transaction markers and compaction (I154): a committed transaction whose record is
/// superseded and an aborted one; the first cleaning drops their data and stamps both markers
/// with a delete horizon (`delete.retention.ms` ahead), the aborted range staying in memory
/// and in the new segment's `.txnindex`; the log is not due again before the horizon; a
/// cleaning at the horizon removes both markers and the aborted range, in memory and on disk;
/// a read_committed read then reports no aborted range, and a clean and a crash reopen agree.
pub async fn check_compaction_removes_markers_past_the_delete_horizon<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = compacted_config();
    let retention = cfg.compaction.delete_retention_ms;
    let log = open(backend, dir, &cfg, false).await?;
    write_txn_marker_workload(&log).await?;
    let offsets = |rows: &[Row]| rows.iter().map(|r| r.0).collect::<Vec<i64>>();
    let aborted_ranges =
        |log: &PartitionLog<B>| log.aborted_transactions(Offset(0), log.last_stable_offset());

    let mut checkpoint = CleanerCheckpoint::default();
    let settings = CleanerSettings::default();
    let first = clean_partition(backend, &log, &mut checkpoint, &settings, NOW_MS)
        .await
        .step("clean 1")?
        .ok_or("a dirty log with ratio 0 was not cleaned")?;
    ensure(
        (first.counts.aborted, first.counts.superseded) == (1, 1),
        || format!("first cleaning dropped {:?}", first.counts),
    )?;
    ensure(
        (first.counts.markers_stamped, first.counts.markers_removed) == (2, 0),
        || format!("first cleaning: markers {:?}", first.counts),
    )?;
    let horizon = NOW_MS + retention;
    let controls = control_offsets(&log).await?;
    ensure(controls == [(2, Some(horizon)), (3, Some(horizon))], || {
        format!("markers after the first cleaning: {controls:?}")
    })?;
    // Rows include the control records (the markers at 2 and 3).
    ensure(offsets(&read_rows(&log).await?) == [2, 3, 4, 5, 6], || {
        "rows after the first cleaning".into()
    })?;
    ensure(aborted_ranges(&log).len() == 1, || {
        "the aborted range went while its marker stays".into()
    })?;
    ensure(
        txn_index_files(backend, dir).await? == ["00000000000000000000.txnindex"],
        || "the cleaned segment has no .txnindex for the ABORT marker it keeps".into(),
    )?;

    // Not due before the horizon (nothing dirty, no marker expired).
    let early = clean_partition(backend, &log, &mut checkpoint, &settings, horizon - 1)
        .await
        .step("clean 2")?;
    ensure(early.is_none(), || {
        format!("cleaned before the horizon: {early:?}")
    })?;
    // A cleaning that runs anyway keeps them (a fresh checkpoint: everything is dirty).
    let anyway = clean_once(backend, &log, horizon - 1)
        .await?
        .ok_or("a forced cleaning did not run")?;
    ensure(anyway.counts.markers_removed == 0, || {
        format!("markers removed before the horizon: {:?}", anyway.counts)
    })?;

    // At the horizon the log is due again and both markers go, with the aborted range.
    let last = clean_partition(backend, &log, &mut checkpoint, &settings, horizon)
        .await
        .step("clean 3")?
        .ok_or("the log was not due at the markers' horizon")?;
    ensure(last.counts.markers_removed == 2, || {
        format!("last cleaning: {:?}", last.counts)
    })?;
    ensure(control_offsets(&log).await?.is_empty(), || {
        "markers left past the horizon".into()
    })?;
    ensure(aborted_ranges(&log).is_empty(), || {
        "an aborted range outlived its marker (a read_committed reader would skip the \
         producer's later batches)"
            .into()
    })?;
    let read = log
        .read_isolated(Offset(0), 1 << 20, true)
        .await
        .step("read_committed")?;
    ensure(read.aborted.is_empty(), || {
        format!("read_committed reports {:?}", read.aborted)
    })?;
    ensure(txn_index_files(backend, dir).await?.is_empty(), || {
        "a .txnindex outlived the ABORT marker".into()
    })?;
    ensure(offsets(&read_rows(&log).await?) == [4, 5, 6], || {
        "data rows after the last cleaning".into()
    })?;

    // Reopened after a clean close, then after a crash: the same log, nothing ongoing.
    log.close().await.step("close")?;
    drop(log);
    for clean in [true, false] {
        let log = open(backend, dir, &cfg, clean).await?;
        ensure(
            log.last_stable_offset() == log.high_watermark()
                && aborted_ranges(&log).is_empty()
                && offsets(&read_rows(&log).await?) == [4, 5, 6],
            || {
                format!(
                    "reopened (clean: {clean}): LSO {}",
                    log.last_stable_offset()
                )
            },
        )?;
        drop(log);
    }
    Ok(())
}
