//! Property tests for `core::index` against simple references: floor lookup vs a linear scan,
//! placement vs a direct model of Kafka's rule, validation vs every corruption kind (I4).

use minikafka_core::index::{
    self, encode_all, IndexCheck, IndexEntry, IndexPlacer, OffsetIndex, ENTRY_BYTES,
};
use minikafka_core::types::{FilePos, RelativeOffset};
use proptest::prelude::*;

/// Strictly increasing entries built from positive steps in both fields.
fn entries_strategy() -> impl Strategy<Value = Vec<IndexEntry>> {
    prop::collection::vec((1u32..50, 1u32..5_000), 0..200).prop_map(|steps| {
        let mut rel = 0u32;
        let mut pos = 0u32;
        steps
            .into_iter()
            .map(|(d_rel, d_pos)| {
                rel += d_rel;
                pos += d_pos;
                IndexEntry {
                    relative_offset: RelativeOffset(rel),
                    position: FilePos(pos),
                }
            })
            .collect()
    })
}

/// Reference floor: the last entry, scanning from the front, at or below the target.
fn linear_floor(entries: &[IndexEntry], target: RelativeOffset) -> FilePos {
    let mut found = FilePos(0);
    for e in entries {
        if e.relative_offset <= target {
            found = e.position;
        }
    }
    found
}

/// Reference placement: walk the batches keeping the position of the last indexed batch (or
/// of the segment start); a batch is indexed when it starts `interval` or more bytes after it.
fn reference_placement(sizes: &[u32], interval_bytes: u32) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let mut last_indexed_pos: u64 = 0;
    let mut pos: u64 = 0;
    for (i, size) in sizes.iter().enumerate() {
        if pos > 0 && pos - last_indexed_pos >= u64::from(interval_bytes) {
            out.push(IndexEntry {
                relative_offset: RelativeOffset(i as u32 * 3),
                position: FilePos(pos as u32),
            });
            last_indexed_pos = pos;
        }
        pos += u64::from(*size);
    }
    out
}

proptest! {
    #[test]
    fn lookup_matches_linear_scan(
        entries in entries_strategy(),
        targets in prop::collection::vec(0u32..12_000, 1..50),
    ) {
        let mut idx = OffsetIndex::new();
        for e in &entries {
            idx.push(*e);
        }
        prop_assert_eq!(idx.entries(), &entries[..]);
        for t in targets {
            let target = RelativeOffset(t);
            prop_assert_eq!(idx.lookup(target), linear_floor(&entries, target));
        }
        // Exactly at each entry and just below it.
        for e in &entries {
            prop_assert_eq!(idx.lookup(e.relative_offset), e.position);
            let below = RelativeOffset(e.relative_offset.0 - 1);
            prop_assert_eq!(idx.lookup(below), linear_floor(&entries, below));
        }
    }

    #[test]
    fn placer_matches_reference_and_resumes(
        // Multiples of 128 as well as arbitrary sizes, so sums land exactly on the interval.
        sizes in prop::collection::vec(
            prop_oneof![61u32..9_000, (1u32..40).prop_map(|k| k * 128)],
            0..120,
        ),
        interval_bytes in prop_oneof![Just(0u32), Just(4096u32), (1u32..64).prop_map(|k| k * 128), 1u32..20_000],
        reopen_at in 0usize..120,
    ) {
        let expected = reference_placement(&sizes, interval_bytes);
        let mut placer = IndexPlacer::new(interval_bytes);
        let mut idx = OffsetIndex::new();
        let mut pos = 0u32;
        for (i, size) in sizes.iter().enumerate() {
            if i == reopen_at {
                // The broker reopens the segment: the resumed placer must behave the same.
                let since = IndexPlacer::bytes_since(idx.last(), u64::from(pos));
                placer = IndexPlacer::resume(interval_bytes, since);
            }
            if let Some(e) = placer.on_batch(FilePos(pos), RelativeOffset(i as u32 * 3), *size) {
                idx.push(e); // asserts I4
            }
            pos += size;
        }
        prop_assert_eq!(idx.entries(), &expected[..]);
        // Every entry lies below the log's end and validates (I4).
        prop_assert_eq!(index::validate(&idx.encode(), u64::from(pos)), Ok(expected));
    }

    #[test]
    fn validate_accepts_any_valid_index(entries in entries_strategy(), extra_bytes in 1u64..1_000) {
        let log_size = entries.last().map_or(0, |e| e.position.as_u64()) + extra_bytes;
        let bytes = encode_all(&entries);
        prop_assert_eq!(bytes.len(), entries.len() * ENTRY_BYTES);
        prop_assert_eq!(index::validate(&bytes, log_size), Ok(entries.clone()));
        prop_assert!(index::check(&bytes, log_size).all_passed());
        let idx = OffsetIndex::from_bytes(&bytes, log_size).expect("valid");
        prop_assert_eq!(idx.encode(), bytes);
    }

    #[test]
    fn validate_rejects_each_corruption_kind(
        entries in entries_strategy().prop_filter("need two entries", |e| e.len() >= 2),
        pick in any::<prop::sample::Index>(),
        cut in 1usize..ENTRY_BYTES,
    ) {
        let last_pos = entries.last().map_or(0, |e| e.position.as_u64());
        let log_size = last_pos + 1;
        let bytes = encode_all(&entries);
        // A torn trailing entry.
        let torn = &bytes[..bytes.len() - cut];
        prop_assert_eq!(
            index::validate(torn, log_size),
            Err(IndexCheck::PartialEntry { len_bytes: torn.len() })
        );
        prop_assert!(!index::check(torn, log_size).whole_entries);

        // Entry i (>= 1) repeats the previous offset.
        let i = 1 + pick.index(entries.len() - 1);
        let mut bad = entries.clone();
        bad[i].relative_offset = bad[i - 1].relative_offset;
        let check = index::check(&encode_all(&bad), log_size);
        prop_assert!(!check.offsets_increasing && check.positions_increasing);
        prop_assert_eq!(
            index::validate(&encode_all(&bad), log_size),
            Err(IndexCheck::OffsetNotIncreasing {
                entry_index: i,
                previous: bad[i - 1].relative_offset.0,
                found: bad[i].relative_offset.0,
            })
        );

        // Entry i goes back to the previous position.
        let mut bad = entries.clone();
        bad[i].position = bad[i - 1].position;
        let check = index::check(&encode_all(&bad), log_size);
        prop_assert!(check.offsets_increasing && !check.positions_increasing);
        prop_assert_eq!(
            index::validate(&encode_all(&bad), log_size),
            Err(IndexCheck::PositionNotIncreasing {
                entry_index: i,
                previous: bad[i - 1].position.0,
                found: bad[i].position.0,
            })
        );

        // The log is shorter than the last entry's position (a truncated log).
        let short_log = last_pos;
        let first_past = entries.iter().position(|e| e.position.as_u64() >= short_log)
            .expect("the last entry is past");
        prop_assert_eq!(
            index::validate(&bytes, short_log),
            Err(IndexCheck::PositionPastLogEnd {
                entry_index: first_past,
                position: entries[first_past].position.0,
                log_size_bytes: short_log,
            })
        );
        prop_assert!(!index::check(&bytes, short_log).positions_in_log);
    }

    #[test]
    fn validate_and_check_agree_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..80),
        log_size in any::<u32>(),
    ) {
        let log_size = u64::from(log_size);
        prop_assert_eq!(
            index::validate(&bytes, log_size).is_ok(),
            index::check(&bytes, log_size).all_passed()
        );
    }

    #[test]
    fn truncate_to_position_keeps_exactly_entries_below(
        entries in entries_strategy(),
        cut in 0u32..1_000_000,
    ) {
        let mut idx = OffsetIndex::new();
        for e in &entries {
            idx.push(*e);
        }
        idx.truncate_to_position(FilePos(cut));
        let expected: Vec<_> = entries.iter().copied().filter(|e| e.position.0 < cut).collect();
        prop_assert_eq!(idx.entries(), &expected[..]);
    }
}
