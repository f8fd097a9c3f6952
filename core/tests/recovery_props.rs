//! Property tests for segment recovery (`core::recovery`, invariants I3, I4, I5): clean
//! segments, every truncation point, bit flips anywhere, any window size, hostile bytes.
//! Each outcome is compared with a simple model built by walking the same batches directly.

use minikafka_core::index::{self, IndexEntry, IndexPlacer};
use minikafka_core::record::{
    patch_base_offset, patch_leader_epoch, BatchBuilder, NewRecord, OffsetRule, HEADER_BYTES,
};
use minikafka_core::recovery::{
    checks_from_index, scan_slice, ScanConfig, ScanOutcome, ScanStep, SegmentScanner, StopReason,
    FIRST_WINDOW_BYTES,
};
use minikafka_core::types::{FilePos, Offset, RelativeOffset};
use proptest::prelude::*;

const EPOCH: i32 = 3;

/// One batch of the segment: its bytes (offsets and epoch patched) and facts for the model.
#[derive(Clone, Debug)]
struct Batch {
    bytes: Vec<u8>,
    records_count: i64,
    max_timestamp_ms: i64,
}

/// A segment: batches end to end with dense offsets from `base`.
#[derive(Clone, Debug)]
struct Segment {
    base: i64,
    batches: Vec<Batch>,
}

impl Segment {
    /// `spec[i]` = (records, value bytes, timestamp) of batch i.
    fn build(base: i64, spec: &[(usize, usize, i64)]) -> Segment {
        let mut next = base;
        let batches = spec
            .iter()
            .enumerate()
            .map(|(i, &(records, value_bytes, ts))| {
                let mut builder = BatchBuilder::new();
                let value = vec![i as u8; value_bytes];
                for r in 0..records {
                    builder.push(&NewRecord {
                        key: if r % 2 == 0 { Some(b"k") } else { None },
                        value: Some(&value),
                        headers: vec![],
                        timestamp_ms: ts + r as i64,
                    });
                }
                let mut bytes = builder.build(Offset(0));
                patch_base_offset(&mut bytes, Offset(next));
                patch_leader_epoch(&mut bytes, EPOCH);
                next += records as i64;
                Batch {
                    bytes,
                    records_count: records as i64,
                    max_timestamp_ms: ts + records as i64 - 1,
                }
            })
            .collect();
        Segment { base, batches }
    }

    fn bytes(&self) -> Vec<u8> {
        self.batches.iter().flat_map(|b| b.bytes.clone()).collect()
    }

    /// Start position of each batch, plus the end of the last.
    fn bounds(&self) -> Vec<u64> {
        let mut out = vec![0u64];
        for b in &self.batches {
            out.push(out[out.len() - 1] + b.bytes.len() as u64);
        }
        out
    }

    /// The outcome fields expected when exactly the first `kept` batches are valid.
    fn model(&self, kept: usize, interval_bytes: u32) -> Model {
        let bounds = self.bounds();
        let mut placer = IndexPlacer::new(interval_bytes);
        let mut entries = Vec::new();
        let mut next = self.base;
        let mut max_ts = -1;
        for (i, b) in self.batches[..kept].iter().enumerate() {
            let relative = RelativeOffset((next - self.base) as u32);
            if let Some(e) =
                placer.on_batch(FilePos(bounds[i] as u32), relative, b.bytes.len() as u32)
            {
                entries.push(e);
            }
            next += b.records_count;
            max_ts = max_ts.max(b.max_timestamp_ms);
        }
        Model {
            valid_len_bytes: bounds[kept],
            next_offset: Offset(next),
            index_entries: entries,
            max_timestamp_ms: max_ts,
            batches_count: kept as u64,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Model {
    valid_len_bytes: u64,
    next_offset: Offset,
    index_entries: Vec<IndexEntry>,
    max_timestamp_ms: i64,
    batches_count: u64,
}

fn observed(out: &ScanOutcome) -> Model {
    Model {
        valid_len_bytes: out.valid_len_bytes,
        next_offset: out.next_offset,
        index_entries: out.index_entries.clone(),
        max_timestamp_ms: out.max_timestamp_ms,
        batches_count: out.batches_count,
    }
}

fn config(base: i64, file_len: usize, interval_bytes: u32, window_bytes: usize) -> ScanConfig {
    ScanConfig {
        base_offset: Offset(base),
        file_len_bytes: file_len as u64,
        index_interval_bytes: interval_bytes,
        max_batch_bytes: 1 << 22,
        expected_leader_epoch: EPOCH,
        window_bytes,
        offsets: OffsetRule::Dense,
    }
}

/// Drives the scanner by hand, checking every request: inside the file, and either a plain
/// window (`window_bytes` raised to a header, capped at the file end) or one whole batch no
/// larger than `max_batch_bytes`; and the number of feeds within the scanner's bound.
fn drive(cfg: ScanConfig, bytes: &[u8]) -> ScanOutcome {
    let mut scanner = SegmentScanner::new(cfg);
    let bound = scanner.max_feeds();
    // The windows double from the first (a page at most) to the configured one.
    let max_window = cfg.window_bytes.max(HEADER_BYTES);
    let mut window = cfg.window_bytes.clamp(HEADER_BYTES, FIRST_WINDOW_BYTES);
    let mut feeds = 0u64;
    loop {
        match scanner.next_step() {
            ScanStep::Done(out) => {
                assert!(out.valid_len_bytes <= cfg.file_len_bytes);
                assert!(out.stop_at >= out.valid_len_bytes, "{out:?}");
                return out;
            }
            ScanStep::Need { pos, len } => {
                feeds += 1;
                assert!(feeds <= bound, "more than {bound} feeds");
                let left = cfg.file_len_bytes - pos;
                assert!(len as u64 <= left, "request past the file end");
                assert!(len > 0);
                let plain = len as u64 == left.min(window as u64);
                let whole_batch = len > window && len <= cfg.max_batch_bytes;
                assert!(
                    plain || whole_batch,
                    "request {len} at {pos}, window {window}"
                );
                let start = (pos as usize).min(bytes.len());
                let end = (start + len).min(bytes.len());
                scanner.feed(pos, &bytes[start..end]);
                window = window.saturating_mul(2).min(max_window);
            }
        }
    }
}

fn batch_spec() -> impl Strategy<Value = (usize, usize, i64)> {
    (1usize..5, 0usize..300, 0i64..1_000_000)
}

fn segment_strategy() -> impl Strategy<Value = Segment> {
    (0i64..1_000_000, prop::collection::vec(batch_spec(), 1..8))
        .prop_map(|(base, spec)| Segment::build(base, &spec))
}

fn interval_strategy() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), 1u32..2_000, Just(4096)]
}

fn window_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(HEADER_BYTES - 1),
        Just(HEADER_BYTES),
        Just(HEADER_BYTES + 1),
        62usize..2_000,
        Just(1 << 30),
    ]
}

/// The batch containing byte `at`.
fn batch_of(bounds: &[u64], at: u64) -> usize {
    bounds
        .windows(2)
        .position(|w| w[0] <= at && at < w[1])
        .expect("inside")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A whole segment is valid to its end; the rebuilt index equals the placer fed directly.
    #[test]
    fn clean_segment_matches_model(
        seg in segment_strategy(),
        interval in interval_strategy(),
        window in window_strategy(),
    ) {
        let bytes = seg.bytes();
        let out = drive(config(seg.base, bytes.len(), interval, window), &bytes);
        prop_assert_eq!(&out.stop, &StopReason::CleanEnd);
        prop_assert_eq!(out.stop_at, bytes.len() as u64);
        prop_assert_eq!(observed(&out), seg.model(seg.batches.len(), interval));
    }

    /// (I3) Any truncation keeps exactly the whole batches that fit.
    #[test]
    fn truncation_keeps_whole_batches_i3(
        seg in segment_strategy(),
        cut in any::<prop::sample::Index>(),
        window in window_strategy(),
    ) {
        let bytes = seg.bytes();
        let t = cut.index(bytes.len() + 1);
        check_truncation(&seg, &bytes[..t], window);
    }

    /// (I3) A flipped bit anywhere ends the valid log exactly at the start of its batch:
    /// every byte of a batch is covered by some check.
    #[test]
    fn bit_flip_ends_log_at_its_batch_i3(
        seg in segment_strategy(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
        window in window_strategy(),
    ) {
        let mut bytes = seg.bytes();
        let at = at.index(bytes.len());
        bytes[at] ^= 1 << bit;
        check_flip(&seg, &bytes, at as u64, window);
    }

    /// Any window size gives the outcome of one giant window, on damaged segments too.
    #[test]
    fn window_size_does_not_change_outcome(
        seg in segment_strategy(),
        interval in interval_strategy(),
        window in window_strategy(),
        damage in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = seg.bytes();
        if let Some((at, x)) = damage {
            let at = at.index(bytes.len());
            bytes[at] ^= x;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        let reference = scan_slice(config(seg.base, bytes.len(), interval, 1 << 30), &bytes);
        let out = drive(config(seg.base, bytes.len(), interval, window), &bytes);
        prop_assert_eq!(out, reference);
    }

    /// Hostile bytes: no panic, bounded feeds, every request within the file and the limits.
    #[test]
    fn random_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..2_000),
        window in window_strategy(),
        max_batch_bytes in prop_oneof![Just(0usize), 1usize..4_000, Just(usize::MAX)],
    ) {
        let mut cfg = config(0, bytes.len(), 100, window);
        cfg.max_batch_bytes = max_batch_bytes;
        let out = drive(cfg, &bytes);
        prop_assert!(out.valid_len_bytes <= bytes.len() as u64);
    }

    /// A valid header prefix with a hostile length and random tail: still bounded.
    #[test]
    fn hostile_length_with_valid_prefix(
        seg in segment_strategy(),
        length in prop_oneof![Just(i32::MAX), Just(i32::MIN), Just(-1i32), any::<i32>()],
        which in any::<prop::sample::Index>(),
        window in window_strategy(),
    ) {
        let mut bytes = seg.bytes();
        let bounds = seg.bounds();
        let b = which.index(seg.batches.len());
        let at = bounds[b] as usize;
        bytes[at + 8..at + 12].copy_from_slice(&length.to_be_bytes());
        let out = drive(config(seg.base, bytes.len(), 100, window), &bytes);
        let original = seg.batches[b].bytes.len() as i64 - 12;
        if i64::from(length) != original {
            prop_assert_eq!(out.valid_len_bytes, bounds[b]);
            prop_assert!(out.stop != StopReason::CleanEnd);
        }
    }

    /// The index checks agree with `index::validate`: all pass exactly when it accepts.
    #[test]
    fn index_checks_agree_with_validate(
        entries in prop::collection::vec((0u32..50, 0u32..5_000), 0..8),
        tail in 0usize..8,
        log_size in 0u64..6_000,
    ) {
        let mut raw: Vec<u8> = entries
            .iter()
            .flat_map(|&(r, p)| {
                IndexEntry { relative_offset: RelativeOffset(r), position: FilePos(p) }.encode()
            })
            .collect();
        raw.resize(raw.len() + tail, 0);
        let c = checks_from_index(false, false, Some(&raw), log_size);
        prop_assert!(c.index_present);
        let all = c.index_whole_entries && c.index_monotonic && c.index_within_log;
        prop_assert_eq!(all, index::validate(&raw, log_size).is_ok());
    }
}

fn check_truncation(seg: &Segment, cut: &[u8], window: usize) {
    let bounds = seg.bounds();
    let t = cut.len() as u64;
    let kept = bounds.iter().rposition(|&b| b <= t).expect("0 <= t");
    let out = drive(config(seg.base, cut.len(), 100, window), cut);
    assert_eq!(observed(&out), seg.model(kept, 100), "cut at {t}");
    let expected = if bounds[kept] == t {
        StopReason::CleanEnd
    } else if t - bounds[kept] < HEADER_BYTES as u64 {
        StopReason::TruncatedHeader
    } else {
        StopReason::ImpossibleLength
    };
    assert_eq!(out.stop, expected, "cut at {t}");
    // The kept prefix is the original bytes, byte for byte.
    assert_eq!(
        &cut[..out.valid_len_bytes as usize],
        &seg.bytes()[..bounds[kept] as usize]
    );
}

fn check_flip(seg: &Segment, bytes: &[u8], at: u64, window: usize) {
    let bounds = seg.bounds();
    let b = batch_of(&bounds, at);
    let out = drive(config(seg.base, bytes.len(), 100, window), bytes);
    assert_eq!(observed(&out), seg.model(b, 100), "flip at {at}");
    assert_ne!(out.stop, StopReason::CleanEnd, "flip at {at}");
    assert!(
        out.stop_at < bounds[b + 1],
        "flip at {at}: stopped at {}",
        out.stop_at
    );
    assert!(out.valid_len_bytes <= at);
}

fn small_segment() -> Segment {
    Segment::build(42, &[(1, 5, 10), (3, 20, 20), (2, 0, 5), (1, 70, 30)])
}

/// (I3) Exhaustive: every truncation point of a small segment, with several windows.
#[test]
fn every_truncation_point_i3() {
    let seg = small_segment();
    let bytes = seg.bytes();
    for window in [1, HEADER_BYTES + 1, 100, 4096] {
        for t in 0..=bytes.len() {
            check_truncation(&seg, &bytes[..t], window);
        }
    }
}

/// (I3) Exhaustive: every bit of a small segment flipped in turn.
#[test]
fn every_bit_flip_i3() {
    let seg = small_segment();
    let bytes = seg.bytes();
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << bit;
            check_flip(&seg, &damaged, at as u64, 64);
        }
    }
}

/// A single batch far larger than the window is read in one exact request.
#[test]
fn huge_single_batch() {
    let seg = Segment::build(0, &[(3, 400_000, 1)]);
    let bytes = seg.bytes();
    let reference = scan_slice(config(0, bytes.len(), 4096, 1 << 30), &bytes);
    assert_eq!(reference.stop, StopReason::CleanEnd);
    for window in [
        0,
        HEADER_BYTES,
        4096,
        bytes.len() - 1,
        bytes.len(),
        bytes.len() + 1,
    ] {
        let mut scanner = SegmentScanner::new(config(0, bytes.len(), 4096, window));
        let mut requests = Vec::new();
        while let ScanStep::Need { pos, len } = scanner.next_step() {
            requests.push(len);
            let end = (pos as usize + len).min(bytes.len());
            scanner.feed(pos, &bytes[pos as usize..end]);
        }
        let first = window.clamp(HEADER_BYTES, FIRST_WINDOW_BYTES);
        let expected: Vec<usize> = if first >= bytes.len() {
            vec![bytes.len()]
        } else {
            vec![first, bytes.len()]
        };
        assert_eq!(requests, expected, "window {window}");
        let ScanStep::Done(out) = scanner.next_step() else {
            unreachable!()
        };
        assert_eq!(out, reference);
    }
}

/// Windows with one byte of headroom past each batch boundary give the same outcome.
#[test]
fn windows_around_batch_sizes() {
    let seg = small_segment();
    let bytes = seg.bytes();
    let reference = scan_slice(config(42, bytes.len(), 50, 1 << 30), &bytes);
    for b in &seg.batches {
        for window in [b.bytes.len() - 1, b.bytes.len(), b.bytes.len() + 1] {
            assert_eq!(
                drive(config(42, bytes.len(), 50, window), &bytes),
                reference
            );
        }
    }
}

/// An all-zero file (a preallocated or zero-filled tail) has no valid batch.
#[test]
fn all_zero_file() {
    for len in [0usize, 1, 60, 61, 62, 4096, 100_000] {
        let zeros = vec![0u8; len];
        let out = drive(config(0, len, 4096, 4096), &zeros);
        assert_eq!(out.valid_len_bytes, 0);
        assert_eq!(out.batches_count, 0);
        let expected_clean = len == 0;
        assert_eq!(out.stop == StopReason::CleanEnd, expected_clean, "{len}");
    }
}

/// Zeros after a valid segment (a crash after the file grew) are cut off.
#[test]
fn zero_tail_after_valid_segment() {
    let seg = small_segment();
    let mut bytes = seg.bytes();
    let valid = bytes.len() as u64;
    bytes.resize(bytes.len() + 5_000, 0);
    let out = drive(config(42, bytes.len(), 100, 256), &bytes);
    assert_eq!(observed(&out), seg.model(seg.batches.len(), 100));
    assert_eq!(out.valid_len_bytes, valid);
}
