//! Property tests for `core::time_index` against simple references: floor lookup vs a linear
//! scan, placement vs a direct model of Kafka's rule, validation vs every corruption kind (I4),
//! the timestamp search vs a linear walk of every record, recovery's rebuilt time index vs the
//! writer's, and the resumed max timestamp vs the whole segment's.

use minikafka_core::index::{IndexPlacer, OffsetIndex};
use minikafka_core::record::{
    patch_base_offset, patch_leader_epoch, BatchBuilder, Compression, NewRecord, OffsetRule,
};
use minikafka_core::recovery::{scan_slice, ScanConfig, StopReason};
use minikafka_core::time_index::{
    encode_all, search_slice, validate, TimeIndex, TimeIndexCheck, TimeIndexEntry, TimePlacer,
    NO_TIMESTAMP, TIME_ENTRY_BYTES,
};
use minikafka_core::types::{FilePos, Offset, RelativeOffset};
use proptest::prelude::*;

const EPOCH: i32 = 3;

/// Entries strictly increasing in both fields, built from positive steps.
fn entries_strategy() -> impl Strategy<Value = Vec<TimeIndexEntry>> {
    (
        -1i64..1_000,
        prop::collection::vec((1i64..500, 1u32..50), 0..150),
    )
        .prop_map(|(start, steps)| {
            let mut ts = start;
            let mut rel = 0u32;
            steps
                .into_iter()
                .map(|(d_ts, d_rel)| {
                    ts += d_ts;
                    rel += d_rel;
                    TimeIndexEntry {
                        timestamp_ms: ts,
                        relative_offset: RelativeOffset(rel),
                    }
                })
                .collect()
        })
}

/// Reference floor: the last entry, scanning from the front, with timestamp at or below target.
fn linear_floor(entries: &[TimeIndexEntry], target: i64) -> Option<TimeIndexEntry> {
    let mut found = None;
    for e in entries {
        if e.timestamp_ms <= target {
            found = Some(*e);
        }
    }
    found
}

/// One batch of a generated segment: record timestamps, compressed or not, value size.
#[derive(Clone, Debug)]
struct Spec {
    timestamps: Vec<i64>,
    compressed: bool,
    value_bytes: usize,
}

fn specs_strategy() -> impl Strategy<Value = Vec<Spec>> {
    prop::collection::vec(
        (
            prop::collection::vec(-1i64..400, 1..5),
            prop::bool::weighted(0.15),
            0usize..120,
        )
            .prop_map(|(timestamps, compressed, value_bytes)| Spec {
                timestamps,
                compressed,
                value_bytes,
            }),
        0..40,
    )
}

/// One written batch: (relative base offset, position, size, header max timestamp).
type Written = (u32, u32, u32, i64);

/// The segment's bytes (dense offsets from `base`, epoch patched) and each batch as written.
fn build_segment(base: i64, specs: &[Spec]) -> (Vec<u8>, Vec<Written>) {
    let mut out = Vec::new();
    let mut batches = Vec::new();
    let mut next = base;
    for spec in specs {
        let mut builder = BatchBuilder::new();
        let value = vec![7u8; spec.value_bytes];
        for ts in &spec.timestamps {
            builder.push(&NewRecord {
                key: None,
                value: Some(&value),
                headers: vec![],
                timestamp_ms: *ts,
            });
        }
        let mut bytes = if spec.compressed {
            builder.build_with(Offset(0), Compression::Gzip, builder.records_bytes())
        } else {
            builder.build(Offset(0))
        };
        patch_base_offset(&mut bytes, Offset(next));
        patch_leader_epoch(&mut bytes, EPOCH);
        let max = spec.timestamps.iter().copied().max().unwrap_or(-1);
        batches.push((
            (next - base) as u32,
            out.len() as u32,
            bytes.len() as u32,
            max,
        ));
        out.extend_from_slice(&bytes);
        next += spec.timestamps.len() as i64;
    }
    (out, batches)
}

/// The writer: both placers over the batches, as the broker appends them.
fn writer_indexes(batches: &[Written], interval: u32) -> (OffsetIndex, TimeIndex) {
    let mut placer = IndexPlacer::new(interval);
    let mut time = TimePlacer::new();
    let (mut oi, mut ti) = (OffsetIndex::new(), TimeIndex::new());
    for &(rel, pos, size, max) in batches {
        let e = placer.on_batch(FilePos(pos), RelativeOffset(rel), size);
        if let Some(e) = e {
            oi.push(e);
        }
        if let Some(t) = time.on_batch(RelativeOffset(rel), max, e.is_some()) {
            ti.push(t);
        }
    }
    (oi, ti)
}

/// Reference time placement, straight from the rule: at each offset-index placement point,
/// the max over batches so far and the first batch that reached it, entered when above the
/// last entry's timestamp (or -1).
fn reference_time_entries(batches: &[Written], placed: &[RelativeOffset]) -> Vec<TimeIndexEntry> {
    let mut out: Vec<TimeIndexEntry> = Vec::new();
    for (i, &(rel, ..)) in batches.iter().enumerate() {
        if !placed.contains(&RelativeOffset(rel)) {
            continue;
        }
        let max = batches[..=i].iter().map(|b| b.3).max().unwrap_or(-1);
        let last_ts = out.last().map_or(NO_TIMESTAMP, |e| e.timestamp_ms);
        if max > last_ts {
            let first = batches[..=i]
                .iter()
                .find(|b| b.3 == max)
                .map(|b| b.0)
                .unwrap_or(rel);
            out.push(TimeIndexEntry {
                timestamp_ms: max,
                relative_offset: RelativeOffset(first),
            });
        }
    }
    out
}

/// Reference answer: walk every record; a compressed batch answers with (base, max).
fn reference_search(base: i64, specs: &[Spec], target: i64) -> Option<(Offset, i64, bool)> {
    let mut next = base;
    for spec in specs {
        let max = spec.timestamps.iter().copied().max().unwrap_or(-1);
        if spec.compressed {
            if max >= target {
                return Some((Offset(next), max, false));
            }
        } else if let Some((i, ts)) = spec
            .timestamps
            .iter()
            .enumerate()
            .find(|(_, ts)| **ts >= target)
        {
            return Some((Offset(next + i as i64), *ts, true));
        }
        next += spec.timestamps.len() as i64;
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The floor lookup equals a linear scan for any target.
    #[test]
    fn lookup_matches_linear_floor(entries in entries_strategy(), targets in prop::collection::vec(-10i64..80_000, 1..30)) {
        let mut idx = TimeIndex::new();
        for e in &entries {
            idx.push(*e);
        }
        for target in targets.into_iter().chain([i64::MIN, i64::MAX]) {
            prop_assert_eq!(idx.lookup(target), linear_floor(&entries, target));
        }
    }

    /// (I4) Valid entries round-trip through bytes; each corruption is named by its kind.
    #[test]
    fn validate_names_each_corruption_i4(entries in entries_strategy().prop_filter("two entries", |e| e.len() >= 2), pick in any::<prop::sample::Index>(), cut in 1usize..TIME_ENTRY_BYTES) {
        let next = u64::from(entries.last().map_or(0, |e| e.relative_offset.0)) + 1;
        let bytes = encode_all(&entries);
        prop_assert_eq!(validate(&bytes, next), Ok(entries.clone()));
        prop_assert_eq!(
            TimeIndex::from_bytes(&bytes, next).map(|i| i.encode()),
            Ok(bytes.clone())
        );
        // A torn tail.
        prop_assert_eq!(
            validate(&bytes[..bytes.len() - cut], next),
            Err(TimeIndexCheck::PartialEntry { len_bytes: bytes.len() - cut })
        );
        let i = 1 + pick.index(entries.len() - 1);
        // A timestamp not above its predecessor (offset still increasing).
        let mut bad = entries.clone();
        bad[i].timestamp_ms = bad[i - 1].timestamp_ms;
        let is_ts_error = matches!(
            validate(&encode_all(&bad), next),
            Err(TimeIndexCheck::TimestampNotIncreasing { entry_index, .. }) if entry_index == i
        );
        prop_assert!(is_ts_error);
        // An offset not above its predecessor (timestamp still increasing).
        let mut bad = entries.clone();
        bad[i].relative_offset = bad[i - 1].relative_offset;
        let is_offset_error = matches!(
            validate(&encode_all(&bad), next),
            Err(TimeIndexCheck::OffsetNotIncreasing { entry_index, .. }) if entry_index == i
        );
        prop_assert!(is_offset_error);
        // The last entry at the segment's next offset.
        let is_past_end = matches!(
            validate(&bytes, next - 1),
            Err(TimeIndexCheck::OffsetPastSegmentEnd { entry_index, .. }) if entry_index == entries.len() - 1
        );
        prop_assert!(is_past_end);
    }

    /// (I10) Any bytes: no panic; accepted exactly when the reference checks pass, and then
    /// the entries are the decoded ones.
    #[test]
    fn validate_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200), next in any::<u64>()) {
        let whole = bytes.len() % TIME_ENTRY_BYTES == 0;
        let decoded: Vec<TimeIndexEntry> = bytes
            .chunks_exact(TIME_ENTRY_BYTES)
            .map(|c| {
                let mut raw = [0u8; TIME_ENTRY_BYTES];
                raw.copy_from_slice(c);
                TimeIndexEntry::decode(&raw)
            })
            .collect();
        let ordered = decoded.iter().enumerate().all(|(i, e)| {
            let prev_ts = if i == 0 { NO_TIMESTAMP } else { decoded[i - 1].timestamp_ms };
            e.timestamp_ms > prev_ts && (i == 0 || e.relative_offset > decoded[i - 1].relative_offset)
        });
        let in_segment = decoded.iter().all(|e| u64::from(e.relative_offset.0) < next);
        match validate(&bytes, next) {
            Ok(entries) => {
                prop_assert!(whole && ordered && in_segment);
                prop_assert_eq!(entries, decoded);
            }
            Err(_) => prop_assert!(!(whole && ordered && in_segment)),
        }
    }

    /// Placement equals the rule's direct model; recovery's scan rebuilds exactly the writer's
    /// time index; and resuming from the last time entry over the batches from the last offset
    /// entry on recovers the segment's exact max timestamp.
    #[test]
    fn placement_scan_and_resume_agree(specs in specs_strategy(), interval in 0u32..600) {
        let (bytes, batches) = build_segment(1_000, &specs);
        let (oi, ti) = writer_indexes(&batches, interval);
        let placed: Vec<RelativeOffset> = oi.entries().iter().map(|e| e.relative_offset).collect();
        prop_assert_eq!(ti.entries(), &reference_time_entries(&batches, &placed)[..]);

        let out = scan_slice(
            ScanConfig {
                base_offset: Offset(1_000),
                file_len_bytes: bytes.len() as u64,
                index_interval_bytes: interval,
                max_batch_bytes: 1 << 20,
                expected_leader_epoch: EPOCH,
                window_bytes: 300,
                offsets: OffsetRule::Dense,
            },
            &bytes,
        );
        prop_assert_eq!(out.stop, StopReason::CleanEnd);
        prop_assert_eq!(&out.index_entries[..], oi.entries());
        prop_assert_eq!(&out.time_index_entries[..], ti.entries());
        let whole_max = batches.iter().map(|b| b.3).fold(NO_TIMESTAMP, i64::max);
        prop_assert_eq!(out.time_placer.max_timestamp_ms(), whole_max);
        prop_assert_eq!(out.max_timestamp_ms, whole_max);

        // Resume as a trusted reopen does.
        let tail_from = oi.last().map_or(0, |e| e.relative_offset.0);
        let mut resumed = TimePlacer::resume(ti.last());
        for &(rel, _, _, max) in batches.iter().filter(|b| b.0 >= tail_from) {
            prop_assert_eq!(resumed.on_batch(RelativeOffset(rel), max, false), None);
        }
        prop_assert_eq!(resumed.max_timestamp_ms(), whole_max);
        prop_assert_eq!(&resumed, &out.time_placer);
    }

    /// The search from the time index floor (resolved through the offset index) finds what a
    /// linear walk of every record finds, for any window size.
    #[test]
    fn search_matches_linear_walk(specs in specs_strategy(), interval in 0u32..600, window in 1usize..500, targets in prop::collection::vec(-3i64..420, 1..25)) {
        let (bytes, batches) = build_segment(50, &specs);
        let (oi, ti) = writer_indexes(&batches, interval);
        let end = FilePos(bytes.len() as u32);
        for target in targets.into_iter().chain([i64::MIN, i64::MAX]) {
            let start = ti.lookup(target).map_or(FilePos(0), |e| oi.lookup(e.relative_offset));
            let got = search_slice(&bytes, target, Offset(0), start, end, window)
                .map_err(|e| TestCaseError::fail(format!("{e}")))?
                .map(|h| (h.offset, h.timestamp_ms, h.exact));
            prop_assert_eq!(got, reference_search(50, &specs, target), "target {}", target);
        }
    }
}
