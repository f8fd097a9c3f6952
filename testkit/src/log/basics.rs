//! The basic log suite: appends and reads (I1, I2), refused batches, segment rolls, index
//! placement, reads racing appends, retention (I9), the interval flush policy and durable topic
//! metadata.

use super::model::{
    append_all, config, expect_model, file_exists, open, read_file, stored, test_batch, write_file,
    NOW_MS,
};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use futures::channel::oneshot;
use minikafka_broker::log::segment::index_file_name;
use minikafka_broker::log::segment::log_file_name;
use minikafka_broker::log::FlushPolicy;
use minikafka_broker::log::LogConfig;
use minikafka_broker::log::LogError;
use minikafka_broker::log::TopicMeta;
use minikafka_broker::log::TopicStore;
use minikafka_core::backend::Backend;
use minikafka_core::index::IndexEntry;
use minikafka_core::record::BatchIter;
use minikafka_core::types::Offset;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

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
