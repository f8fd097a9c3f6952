//! The log under injected faults (on [`FaultyBackend`](crate::fault::FaultyBackend)): a crash
//! after every filesystem op, torn writes, ENOSPC and a failed sync (I5, I8). Nothing
//! acknowledged is lost; a failed sync takes the partition offline.

use super::model::{
    append_all, append_coalesced, config, expect_files_match_sizes, expect_model, open, read_all,
    stored, test_batch, NOW_MS,
};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use crate::fault::FaultPlan;
use crate::fault::FaultyBackend;
use crate::fault::EIO_RAW;
use crate::fault::ENOSPC_RAW;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::LogConfig;
use minikafka_broker::log::LogError;
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_core::record::BatchIter;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

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
