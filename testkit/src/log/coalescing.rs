//! The coalescing suite: appends that wait behind one another share work — one sync per group
//! under `flush=fsync` (group commit) and one `write_at` per queued group (write coalescing) —
//! and a refused append in a group stays alone.

use super::model::{
    append_all, append_coalesced, config, expect_model, log_next, open, producer_batch, records_in,
    stored, test_batch, NOW_MS,
};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use crate::fault::FaultPlan;
use crate::fault::FaultyBackend;
use minikafka_broker::log::FlushPolicy;
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;

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
