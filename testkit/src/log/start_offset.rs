//! The log start offset: DeleteRecords, live reconfiguration, and the durable start offset
//! checkpoint (I9, I25) — including a crash at every filesystem step of a deletion.

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_broker::log::segment::log_file_name;
use minikafka_broker::log::start_offset::CHECKPOINT_FILE;
use minikafka_broker::log::{FlushPolicy, LogConfig, LogError, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;

use super::model::{append_all, config, expect_model, file_exists, open, test_batch, NOW_MS};
use crate::check::{ensure, Check, Step};
use crate::fault::{FaultPlan, FaultyBackend};

/// A log of several sealed segments: `batch_count` batches of 2 records, 2 or 3 per segment.
async fn several_segments<B: Backend>(
    backend: &B,
    dir: &Path,
    cfg: &LogConfig,
    batch_count: u64,
) -> Result<(PartitionLog<B>, BTreeMap<i64, Vec<u8>>), String> {
    let log = open(backend, dir, cfg, false).await?;
    let batches: Vec<Vec<u8>> = (0..batch_count)
        .map(|i| test_batch(i, 2, 200, NOW_MS))
        .collect();
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    ensure(
        log.segments().len() as u64 >= 4.min(batch_count / 2),
        || format!("{} segments, expected rolls", log.segments().len()),
    )?;
    Ok((log, model))
}

fn cfg() -> LogConfig {
    config(900, 256, FlushPolicy::None)
}

/// DeleteRecords moves the log start (also into the middle of a batch and of a segment),
/// deletes the whole segments below it and nothing else, refuses an offset above the high
/// watermark, never moves the start back (I9), and the start survives a clean restart and a
/// crash (I25). Reads and timestamp lookups below the start are refused or skip it.
pub async fn check_delete_records_moves_log_start<B: Backend>(backend: &B, dir: &Path) -> Check {
    let cfg = cfg();
    let (log, model) = several_segments(backend, dir, &cfg, 24).await?;
    let bases = log.segment_base_offsets();
    let hw = log.high_watermark();
    // Into the middle of the third segment, in the middle of a batch (batches are 2 records).
    let target = bases[2].plus(1);
    let low = log.delete_records(target).await.step("delete_records")?;
    ensure(low == target && log.log_start_offset() == target, || {
        format!("low watermark {low}, log start {}", log.log_start_offset())
    })?;
    ensure(log.segment_base_offsets()[0] == bases[2], || {
        format!(
            "segments after deletion start at {}, expected {}",
            log.segment_base_offsets()[0],
            bases[2]
        )
    })?;
    for base in &bases[..2] {
        ensure(
            !file_exists(backend, &dir.join(log_file_name(*base))).await?,
            || format!("segment {base} still on disk"),
        )?;
    }
    match log.read(target.plus(-1), 1024).await {
        Err(LogError::OffsetOutOfRange { .. }) => {}
        other => return Err(format!("read below the log start: {other:?}")),
    }
    let read = log.read(target, 1024).await.step("read at the log start")?;
    ensure(
        !read.bytes.is_empty() && read.log_start_offset == target,
        || "read at the log start is empty or reports another start".into(),
    )?;
    // Smaller or equal: no change (I9).
    let low = log.delete_records(Offset(1)).await.step("delete lower")?;
    ensure(low == target, || format!("start moved back to {low} (I9)"))?;
    match log.delete_records(hw.plus(1)).await {
        Err(LogError::OffsetOutOfRange { .. }) => {}
        other => return Err(format!("delete above the high watermark: {other:?}")),
    }
    // Clean restart, then a crash (drop without close): the start holds.
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    ensure(log.log_start_offset() == target, || {
        format!(
            "after a clean restart the start is {}",
            log.log_start_offset()
        )
    })?;
    let batch_start = bases[3];
    log.delete_records(batch_start)
        .await
        .step("delete to a segment base")?;
    drop(log);
    let log = open(backend, dir, &cfg, false).await?;
    ensure(log.log_start_offset() == batch_start, || {
        format!("after a crash the start is {}", log.log_start_offset())
    })?;
    expect_model(&log, &model).await?;
    // Everything: the start reaches the high watermark, the active segment stays (I9), and
    // the next append continues the offsets.
    let low = log.delete_records(hw).await.step("delete everything")?;
    ensure(
        low == hw
            && log
                .read(hw, 1024)
                .await
                .step("read at hw")?
                .bytes
                .is_empty(),
        || "delete to the high watermark".into(),
    )?;
    let info = log
        .append(test_batch(99, 1, 10, NOW_MS), NOW_MS)
        .await
        .step("append after deleting everything")?;
    ensure(info.base_offset == hw, || {
        format!("append after deleting everything at {}", info.base_offset)
    })?;
    log.close().await.step("close")?;
    let log = open(backend, dir, &cfg, true).await?;
    ensure(
        log.log_start_offset() == hw && log.high_watermark() == hw.plus(1),
        || {
            format!(
                "after reopen: start {}, high watermark {}",
                log.log_start_offset(),
                log.high_watermark()
            )
        },
    )?;
    log.close().await.step("close")
}

/// A checkpointed start above the recovered end of the log (the tail a crash took was
/// already deleted) opens an empty log at the checkpoint: deleted offsets are never reused
/// and deleted records never come back (I25).
pub async fn check_checkpoint_above_log_end_starts_empty<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = cfg();
    let (log, _model) = several_segments(backend, dir, &cfg, 24).await?;
    let end = log.high_watermark();
    log.close().await.step("close")?;
    minikafka_broker::log::start_offset::write(backend, dir, end.plus(10))
        .await
        .step("write a checkpoint past the end")?;
    let log = open(backend, dir, &cfg, false).await?;
    ensure(
        log.log_start_offset() == end.plus(10) && log.high_watermark() == end.plus(10),
        || {
            format!(
                "start {}, high watermark {}",
                log.log_start_offset(),
                log.high_watermark()
            )
        },
    )?;
    ensure(log.segments().len() == 1 && log.size_bytes() == 0, || {
        "old segments kept".into()
    })?;
    log.close().await.step("close")
}

/// A configuration replaced on the live log takes effect at once: a smaller `segment.bytes`
/// rolls at the next append, a smaller `max.message.bytes` refuses a batch that fitted, and
/// retention uses the new limits.
pub async fn check_reconfigure_applies_to_the_live_log<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = config(1 << 20, 256, FlushPolicy::None);
    let log = open(backend, dir, &cfg, false).await?;
    let mut model = BTreeMap::new();
    let batches: Vec<Vec<u8>> = (0..6).map(|i| test_batch(i, 1, 300, NOW_MS)).collect();
    append_all(&log, &batches, &mut model).await?;
    ensure(log.segments().len() == 1, || "rolled early".into())?;
    let mut smaller = cfg.clone();
    smaller.segment_bytes = 800;
    log.reconfigure(smaller.clone()).step("reconfigure")?;
    ensure(log.config() == smaller, || "config not replaced".into())?;
    append_all(&log, &batches[..3], &mut model).await?;
    ensure(log.segments().len() >= 3, || {
        format!("{} segments after segment.bytes=800", log.segments().len())
    })?;
    let mut strict = smaller.clone();
    strict.max_batch_bytes = 200;
    log.reconfigure(strict.clone()).step("reconfigure")?;
    match log.append(batches[0].clone(), NOW_MS).await {
        Err(e)
            if e.kafka_error_code() == minikafka_core::error_code::ErrorCode::MESSAGE_TOO_LARGE => {
        }
        other => return Err(format!("batch over the new max.message.bytes: {other:?}")),
    }
    let mut bad = strict.clone();
    bad.segment_bytes = 0;
    ensure(
        log.reconfigure(bad).is_err() && log.config() == strict,
        || "an invalid configuration was applied".into(),
    )?;
    let mut keep_little = strict;
    keep_little.retention_bytes = Some(1);
    log.reconfigure(keep_little).step("reconfigure")?;
    let outcome = log.apply_retention(NOW_MS).await.step("retention")?;
    ensure(
        !outcome.deleted_base_offsets.is_empty() && log.segments().len() == 1,
        || "retention.bytes set live was not applied".into(),
    )?;
    expect_model(&log, &model).await?;
    log.close().await.step("close")
}

/// I25 crash fuzzing: for every N, the filesystem fails every call after N operations of a
/// DeleteRecords (and, separately, of a retention pass) that deletes several segments.
/// Reopened on the plain backend, the log starts at the old start or at the new one — never
/// in between, which would bring deleted records back — and at the new one whenever the
/// deletion was acknowledged; the records from the start on are intact.
pub async fn check_fault_crash_during_deletion<B: Backend>(backend: &B, dir: &Path) -> Check {
    for retention in [false, true] {
        crash_during_deletion(backend, dir, retention).await?;
    }
    Ok(())
}

async fn crash_during_deletion<B: Backend>(backend: &B, dir: &Path, retention: bool) -> Check {
    let what = if retention {
        "retention"
    } else {
        "delete_records"
    };
    // A fault-free run counts the deletion's filesystem calls; then one run per crash point.
    let total = deletion_run(backend, dir, retention, None).await?;
    ensure(total >= 4, || {
        format!("{what}: only {total} filesystem ops")
    })?;
    for n in 0..=total {
        deletion_run(backend, dir, retention, Some(n)).await?;
    }
    Ok(())
}

/// One deletion (crashing after `crash_after` of its filesystem calls, if given), then a
/// recovery on the plain backend and its checks; the number of calls the deletion made.
async fn deletion_run<B: Backend>(
    backend: &B,
    dir: &Path,
    retention: bool,
    crash_after: Option<u64>,
) -> Result<u64, String> {
    let cfg = cfg();
    let what = if retention {
        "retention"
    } else {
        "delete_records"
    };
    let sub = dir.join(format!("{what}-{crash_after:?}"));
    // The log is built on the faulty backend before any fault is planned.
    let plan = FaultPlan::new();
    let faulty = FaultyBackend::new(backend.clone(), plan.clone());
    let (log, model) = several_segments(&faulty, &sub, &cfg, 6).await?;
    let old_start = log.log_start_offset();
    let bases = log.segment_base_offsets();
    let new_start = bases[bases.len() - 2];
    if retention {
        // Keep only the last sealed segment and the active one.
        let mut run_cfg = cfg.clone();
        let kept = log.segments()[bases.len() - 2..]
            .iter()
            .map(|s| s.size_bytes())
            .sum();
        run_cfg.retention_bytes = Some(kept);
        log.reconfigure(run_cfg).step("reconfigure")?;
    }
    let ops_before = plan.op_count();
    if let Some(n) = crash_after {
        plan.fail_after(n);
    }
    let acknowledged = if retention {
        log.apply_retention(NOW_MS)
            .await
            .is_ok_and(|o| o.log_start_offset == new_start)
    } else {
        log.delete_records(new_start).await.is_ok()
    };
    let ops = plan.op_count() - ops_before;
    drop(log);
    let step = format!("{what}, crash after {crash_after:?} ops");
    ensure(crash_after.is_some() || acknowledged, || {
        format!("{step}: the fault-free deletion failed")
    })?;
    // The process "dies" here; reopen on the plain backend (recovery).
    let log = open(backend, &sub, &cfg, false).await?;
    let start = log.log_start_offset();
    ensure(start == old_start || start == new_start, || {
        format!("{step}: log starts at {start}, neither {old_start} nor {new_start}: deleted records came back (I25)")
    })?;
    ensure(!acknowledged || start == new_start, || {
        format!("{step}: acknowledged deletion to {new_start} undone (start {start})")
    })?;
    ensure(log.segment_base_offsets()[0] <= start, || {
        format!("{step}: a segment at or above the start was deleted")
    })?;
    if start == new_start {
        ensure(log.segment_base_offsets()[0] == new_start, || {
            format!("{step}: segments below the start left after recovery")
        })?;
    }
    expect_model(&log, &model)
        .await
        .map_err(|e| format!("{step}: {e}"))?;
    drop(log);
    backend.remove_dir_all(&sub).await.step("cleanup")?;
    Ok(ops)
}

/// The checkpoint file is the partition's, not a stray: open neither warns about nor
/// removes it, and its leftover `.tmp` is removed.
pub async fn check_checkpoint_file_is_kept_and_tmp_removed<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Check {
    let cfg = cfg();
    let (log, _) = several_segments(backend, dir, &cfg, 24).await?;
    let start = log.segment_base_offsets()[1];
    log.delete_records(start).await.step("delete_records")?;
    log.close().await.step("close")?;
    let tmp = dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    super::model::write_file(backend, &tmp, b"0\n1\n999999\n").await?;
    let log = open(backend, dir, &cfg, true).await?;
    ensure(log.log_start_offset() == start, || "start lost".into())?;
    ensure(
        file_exists(backend, &dir.join(CHECKPOINT_FILE)).await?,
        || "checkpoint removed".into(),
    )?;
    ensure(!file_exists(backend, &tmp).await?, || "tmp kept".into())?;
    log.close().await.step("close")
}
