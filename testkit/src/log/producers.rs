//! The idempotent-producer suite: duplicate detection survives a clean restart and a crash.

use super::model::{
    append_all, config, expect_model, file_exists, open, producer_batch, read_file, test_batch,
    write_file, NOW_MS,
};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use minikafka_broker::log::segment::snapshot_file_name;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;

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
