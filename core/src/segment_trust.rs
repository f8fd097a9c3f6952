//! Whether a segment's indexes read back from disk at startup can be trusted, and what a
//! trusted segment's state is (the decisions the broker's `log/recover.rs` carries out).
//!
//! Contract:
//! - Decides, for one segment: (1) whether an index file is even plausible for its log
//!   ([`max_index_file_bytes`]) and the [`RecoveryChecks`] of its offset index
//!   ([`offset_index_checks`], fed to [`decide`](crate::recovery::decide)); (2) for a segment
//!   the table trusts, which tail of the log to read ([`plan_tail`]) and whether that tail and
//!   the time index check out ([`judge_tail`]); (3) what to do when they do not
//!   ([`action_when_untrusted`]).
//! - Inputs: values and bytes the caller read: the log's length, the index files' bytes (or
//!   that they are missing or too large to read), the tail's bytes, the limits in
//!   [`TailLimits`].
//! - Outputs: the checks, the byte range of the tail, a [`TailVerdict`]: the trusted state
//!   (next offset, time index entries, a [`TimePlacer`] giving the exact max timestamp) or why
//!   not ([`TimeIndexProblem`], or an unparseable tail).
//! - Invariants: a trusted segment reads only its two indexes and a tail of at most
//!   [`max_tail_bytes`] (I5: startup time does not grow with sealed bytes); the tail must be
//!   whole valid batches (I3), dense from the last index entry's offset (I1), stamped with the
//!   log's leader epoch, every batch's base offset within 32 bits of the segment's (I6); the time index must be
//!   present, plausible and pass [`time_index::validate`] and
//!   [`time_index::check_against_offset_index`] (I4). Anything else falls back to a scan,
//!   which is never wrong, only slower.
//! - Never: performs I/O, allocates more than the bytes handed in (I10: index files larger
//!   than [`max_index_file_bytes`] are not to be read at all), or panics on bytes.

use crate::index::IndexEntry;
use crate::record::{BatchIter, OffsetRule, ValidateOptions, HEADER_BYTES};
use crate::recovery::{checks_from_index, Action, RecoveryChecks};
use crate::time_index::{self, TimeIndexCheck, TimeIndexEntry, TimePlacer};
use crate::types::{Offset, RelativeOffset};

/// An index file (offset or time) as the caller found it on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexFile<'a> {
    /// No such file.
    Missing,
    /// Larger than [`max_index_file_bytes`]: not read (it cannot belong to this log).
    TooLarge,
    /// The whole file.
    Bytes(&'a [u8]),
}

/// Why a segment's time index was not trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeIndexProblem {
    /// No `.timeindex` file.
    Missing,
    /// Larger than any time index of the log could be (one entry per batch at most, I10).
    Implausible,
    /// The file failed a structural check.
    Invalid(TimeIndexCheck),
}

/// The largest index file of `entry_bytes` entries a log of `log_len_bytes` can have: one
/// entry per batch at most, and no batch is smaller than its header. A larger file cannot be
/// this log's, and reading it would allocate a size taken from the disk (I10).
pub fn max_index_file_bytes(log_len_bytes: u64, entry_bytes: usize) -> u64 {
    (log_len_bytes / HEADER_BYTES as u64 + 1).saturating_mul(entry_bytes as u64)
}

/// The decision table's checks for a segment whose offset index is `index`: computed from
/// the bytes by [`checks_from_index`]; a missing file fails every structural check; a file
/// too large for the log counts as present, whole and ordered but not within the log (its
/// entries cannot all point inside it), which the table rebuilds.
pub fn offset_index_checks(
    is_active: bool,
    clean_shutdown: bool,
    index: IndexFile<'_>,
    log_len_bytes: u64,
) -> RecoveryChecks {
    match index {
        IndexFile::Missing => checks_from_index(is_active, clean_shutdown, None, log_len_bytes),
        IndexFile::Bytes(bytes) => {
            checks_from_index(is_active, clean_shutdown, Some(bytes), log_len_bytes)
        }
        IndexFile::TooLarge => RecoveryChecks {
            is_active_segment: is_active,
            clean_shutdown,
            index_present: true,
            index_whole_entries: true,
            index_monotonic: true,
            index_within_log: false,
        },
    }
}

/// What to do with a segment the table trusted but whose tail or time index failed
/// [`judge_tail`]: the active segment is scanned and truncated at the first invalid batch
/// (I3), a sealed one has its indexes rebuilt by a scan (its log was synced before it was
/// sealed, I5; should the scan still stop early, the caller truncates there).
pub fn action_when_untrusted(is_active: bool, verdict: &TailVerdict) -> Action {
    match verdict {
        TailVerdict::Trusted(_) => Action::Trust,
        TailVerdict::TimeIndexUntrusted(_) => Action::RebuildIndex,
        TailVerdict::Unparseable if is_active => Action::ScanAndTruncate,
        TailVerdict::Unparseable => Action::RebuildIndex,
    }
}

/// What bounds and stamps a trusted segment's tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailLimits {
    /// `index.interval.bytes`: at most this many bytes (plus one batch) follow the last entry.
    pub index_interval_bytes: u32,
    /// The largest batch the log accepts.
    pub max_batch_bytes: usize,
    /// The partition leader epoch every batch of the log carries.
    pub leader_epoch: i32,
}

/// The most bytes a trusted segment's tail can hold: the writer places an entry once
/// `index.interval.bytes` were written since the last, so fewer than that plus one batch
/// follow the last entry's batch start, which itself starts a batch (twice the largest batch
/// leaves room for both).
pub fn max_tail_bytes(limits: TailLimits) -> u64 {
    u64::from(limits.index_interval_bytes).saturating_add(2 * limits.max_batch_bytes as u64)
}

/// The bytes of a trusted segment to read: from its last offset index entry to the end of
/// the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailRead {
    /// Byte position of the tail's first batch.
    pub from: u64,
    /// Bytes to read (to the end of the log).
    pub len: usize,
    /// The base offset the tail's first batch must have.
    pub first_offset: Offset,
}

/// The tail to read for a segment based at `base_offset` of `log_len_bytes`, whose validated
/// offset index entries are `entries`; `None` when it would be longer than
/// [`max_tail_bytes`] (the index cannot be this log's: scan instead).
pub fn plan_tail(
    base_offset: Offset,
    entries: &[IndexEntry],
    log_len_bytes: u64,
    limits: TailLimits,
) -> Option<TailRead> {
    let (from, first_offset) = match entries.last() {
        Some(e) => (
            e.position.as_u64(),
            base_offset.plus(i64::from(e.relative_offset.0)),
        ),
        None => (0, base_offset),
    };
    let len = log_len_bytes.checked_sub(from)?;
    if len > max_tail_bytes(limits) {
        return None;
    }
    Some(TailRead {
        from,
        len: usize::try_from(len).ok()?,
        first_offset,
    })
}

/// The state of a segment whose indexes and tail were trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedSegment {
    /// The offset after the segment's last batch.
    pub next_offset: Offset,
    /// The time index's entries, validated.
    pub time_entries: Vec<TimeIndexEntry>,
    /// A placer resumed from the time index and fed the tail: its max timestamp is the
    /// segment's exact one.
    pub time_placer: TimePlacer,
}

/// What [`judge_tail`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailVerdict {
    /// Tail and time index check out.
    Trusted(TrustedSegment),
    /// The tail is fine but the time index is not: rebuild the indexes by a scan.
    TimeIndexUntrusted(TimeIndexProblem),
    /// The tail is not whole valid batches dense from the entry's offset: scan.
    Unparseable,
}

/// Judges the `tail` read as `read` planned, of the segment based at `base_offset` with
/// validated offset index `entries` and time index file `time_index`; see the module
/// documentation for the rules. The tail is checked first (it gives the next offset the time
/// index is checked against).
pub fn judge_tail(
    base_offset: Offset,
    read: TailRead,
    tail: &[u8],
    entries: &[IndexEntry],
    time_index: IndexFile<'_>,
    limits: TailLimits,
) -> TailVerdict {
    if tail.len() != read.len {
        return TailVerdict::Unparseable;
    }
    let opts = ValidateOptions {
        max_batch_bytes: limits.max_batch_bytes,
        walk_records: true,
        // The tail is the active segment's, which the cleaner never touches: dense (I1).
        offsets: OffsetRule::Dense,
    };
    // (relative base offset, max timestamp) of each tail batch; at most one per header.
    let mut tail_batches: Vec<(RelativeOffset, i64)> = Vec::new();
    let mut expected = read.first_offset;
    let mut end = 0usize;
    for batch in BatchIter::new(tail).with_options(opts) {
        let Ok(batch) = batch else {
            return TailVerdict::Unparseable;
        };
        if batch.header.base_offset != expected
            || batch.header.partition_leader_epoch != limits.leader_epoch
        {
            return TailVerdict::Unparseable;
        }
        let Some(relative) = batch.header.base_offset.relative_to(base_offset) else {
            return TailVerdict::Unparseable; // I6 broken: not trustable
        };
        tail_batches.push((relative, batch.header.max_timestamp));
        expected = batch.header.next_offset();
        end = batch.start + batch.bytes.len();
    }
    if end != tail.len() {
        return TailVerdict::Unparseable;
    }
    // expected >= base_offset: it starts there or at an entry past it and only grows.
    let next_relative = u64::try_from(expected.0 - base_offset.0).unwrap_or(0);
    let time_entries = match time_index {
        IndexFile::Missing => return TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Missing),
        IndexFile::TooLarge => {
            return TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Implausible)
        }
        IndexFile::Bytes(bytes) => match time_index::validate(bytes, next_relative)
            .and_then(|t| time_index::check_against_offset_index(&t, entries).map(|()| t))
        {
            Ok(t) => t,
            Err(check) => return TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Invalid(check)),
        },
    };
    let mut time_placer = TimePlacer::resume(time_entries.last());
    for (relative, max_timestamp_ms) in tail_batches {
        // Already placed when appended: only the max timestamp is recovered here.
        time_placer.on_batch(relative, max_timestamp_ms, false);
    }
    TailVerdict::Trusted(TrustedSegment {
        next_offset: expected,
        time_entries,
        time_placer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{self, IndexPlacer};
    use crate::record::{patch_base_offset, patch_leader_epoch, BatchBuilder, NewRecord};
    use crate::recovery::{decide, Case};
    use crate::types::FilePos;

    const EPOCH: i32 = 0;
    const LIMITS: TailLimits = TailLimits {
        index_interval_bytes: 300,
        max_batch_bytes: 1 << 20,
        leader_epoch: EPOCH,
    };

    /// What the writer leaves on disk for `batches` (record count, timestamp) from `base`,
    /// plus each batch boundary with the writer's state there: (end position, next offset,
    /// offset entries, time entries, max timestamp).
    struct Written {
        log: Vec<u8>,
        boundaries: Vec<Boundary>,
    }

    /// (end position, next offset, offset entries, time entries, max timestamp).
    type Boundary = (usize, Offset, Vec<IndexEntry>, Vec<TimeIndexEntry>, i64);

    fn write(base: i64, batches: &[(usize, i64)]) -> Written {
        let mut log = Vec::new();
        let mut placer = IndexPlacer::new(LIMITS.index_interval_bytes);
        let mut time = TimePlacer::new();
        let (mut entries, mut time_entries) = (Vec::new(), Vec::new());
        let mut next = Offset(base);
        let mut boundaries = vec![(0, next, Vec::new(), Vec::new(), time.max_timestamp_ms())];
        for (count, ts) in batches {
            let mut b = BatchBuilder::new();
            for r in 0..*count {
                b.push(&NewRecord {
                    value: Some(b"value"),
                    timestamp_ms: ts + r as i64,
                    ..NewRecord::default()
                });
            }
            let mut bytes = b.build(Offset(0));
            patch_base_offset(&mut bytes, next);
            patch_leader_epoch(&mut bytes, EPOCH);
            let relative = next.relative_to(Offset(base)).expect("fits");
            let entry = placer.on_batch(FilePos(log.len() as u32), relative, bytes.len() as u32);
            let max_ts = ts + *count as i64 - 1;
            if let Some(e) = time.on_batch(relative, max_ts, entry.is_some()) {
                time_entries.push(e);
            }
            entries.extend(entry);
            log.extend_from_slice(&bytes);
            next = next.plus(*count as i64);
            boundaries.push((
                log.len(),
                next,
                entries.clone(),
                time_entries.clone(),
                time.max_timestamp_ms(),
            ));
        }
        Written { log, boundaries }
    }

    fn judge(base: i64, log: &[u8], entries: &[IndexEntry], time: &[u8]) -> TailVerdict {
        let Some(read) = plan_tail(Offset(base), entries, log.len() as u64, LIMITS) else {
            return TailVerdict::Unparseable;
        };
        let tail = &log[read.from as usize..];
        judge_tail(
            Offset(base),
            read,
            tail,
            entries,
            IndexFile::Bytes(time),
            LIMITS,
        )
    }

    proptest::proptest! {
        /// A log cut anywhere, with the indexes the writer had made below the cut: trusted,
        /// with the writer's next offset and max timestamp, exactly when the cut is at a batch
        /// boundary; otherwise the tail is unparseable (I3).
        #[test]
        fn trusted_exactly_at_batch_boundaries(
            batches in proptest::collection::vec((1usize..4, 0i64..1_000), 1..20),
            base in 0i64..1_000,
            cut in 0usize..4_000,
        ) {
            let w = write(base, &batches);
            let cut = cut.min(w.log.len());
            let log = &w.log[..cut];
            // The writer's state at the last boundary at or below the cut.
            let (at, next, entries, time_entries, max_ts) = w
                .boundaries
                .iter()
                .rev()
                .find(|b| b.0 <= cut)
                .expect("boundary 0")
                .clone();
            let time = time_index::encode_all(&time_entries);
            let verdict = judge(base, log, &entries, &time);
            if at == cut {
                let TailVerdict::Trusted(state) = verdict else {
                    return Err(proptest::test_runner::TestCaseError::fail(format!("{verdict:?}")));
                };
                proptest::prop_assert_eq!(state.next_offset, next);
                proptest::prop_assert_eq!(state.time_entries, time_entries);
                proptest::prop_assert_eq!(state.time_placer.max_timestamp_ms(), max_ts);
            } else {
                proptest::prop_assert_eq!(verdict, TailVerdict::Unparseable);
            }
        }

        /// A byte changed in the tail is never trusted (CRC, offsets, epoch, lengths).
        #[test]
        fn a_damaged_tail_is_never_trusted(
            batches in proptest::collection::vec((1usize..4, 0i64..1_000), 1..10),
            at in 0usize..10_000,
            flip in 1u8..=255,
        ) {
            let w = write(0, &batches);
            let (_, _, entries, time_entries, _) = w.boundaries.last().expect("end").clone();
            let mut log = w.log.clone();
            let from = entries.last().map_or(0, |e| e.position.as_usize());
            let i = from + at % (log.len() - from);
            log[i] ^= flip;
            let verdict = judge(0, &log, &entries, &time_index::encode_all(&time_entries));
            proptest::prop_assert_eq!(verdict, TailVerdict::Unparseable);
        }
    }

    #[test]
    fn time_index_problems_are_named() {
        let w = write(0, &[(2, 10), (2, 20), (2, 30), (2, 40), (2, 50), (2, 60)]);
        let (_, _, entries, time_entries, _) = w.boundaries.last().expect("end").clone();
        assert!(!entries.is_empty() && !time_entries.is_empty());
        let read = plan_tail(Offset(0), &entries, w.log.len() as u64, LIMITS).expect("tail");
        let tail = &w.log[read.from as usize..];
        let with = |file| judge_tail(Offset(0), read, tail, &entries, file, LIMITS);
        assert_eq!(
            with(IndexFile::Missing),
            TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Missing)
        );
        assert_eq!(
            with(IndexFile::TooLarge),
            TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Implausible)
        );
        let mut partial = time_index::encode_all(&time_entries);
        partial.pop();
        assert!(matches!(
            with(IndexFile::Bytes(&partial)),
            TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Invalid(
                TimeIndexCheck::PartialEntry { .. }
            ))
        ));
        let verdict = with(IndexFile::Bytes(&time_index::encode_all(&time_entries)));
        assert!(matches!(verdict, TailVerdict::Trusted(_)));
        assert_eq!(action_when_untrusted(true, &verdict), Action::Trust);
        let untrusted = TailVerdict::TimeIndexUntrusted(TimeIndexProblem::Missing);
        assert_eq!(
            action_when_untrusted(true, &untrusted),
            Action::RebuildIndex
        );
        assert_eq!(
            action_when_untrusted(true, &TailVerdict::Unparseable),
            Action::ScanAndTruncate
        );
        assert_eq!(
            action_when_untrusted(false, &TailVerdict::Unparseable),
            Action::RebuildIndex
        );
    }

    #[test]
    fn a_tail_longer_than_an_interval_and_a_batch_is_not_read() {
        let w = write(0, &[(1, 1)]);
        // An index with no entries for a log far longer than the bound.
        assert_eq!(
            plan_tail(Offset(0), &[], max_tail_bytes(LIMITS) + 1, LIMITS),
            None
        );
        assert!(plan_tail(Offset(0), &[], w.log.len() as u64, LIMITS).is_some());
        // An entry past the log's end (a validated index has none) plans nothing.
        let past = IndexEntry {
            relative_offset: RelativeOffset(1),
            position: FilePos(w.log.len() as u32 + 1),
        };
        assert_eq!(
            plan_tail(Offset(0), &[past], w.log.len() as u64, LIMITS),
            None
        );
    }

    #[test]
    fn an_index_too_large_for_its_log_is_rebuilt_not_read_i10() {
        let log_len = 10 * HEADER_BYTES as u64;
        let max = max_index_file_bytes(log_len, index::ENTRY_BYTES);
        assert_eq!(max, 11 * index::ENTRY_BYTES as u64);
        for is_active in [false, true] {
            let checks = offset_index_checks(is_active, true, IndexFile::TooLarge, log_len);
            let (case, action) = decide(checks);
            assert_eq!(action, Action::RebuildIndex);
            let expected = if is_active {
                Case::ActiveCleanIndexPastLogEnd
            } else {
                Case::SealedIndexPastLogEnd
            };
            assert_eq!(case, expected);
        }
        let missing = offset_index_checks(false, true, IndexFile::Missing, log_len);
        assert_eq!(decide(missing).0, Case::SealedIndexMissing);
        let empty = offset_index_checks(false, true, IndexFile::Bytes(&[]), log_len);
        assert_eq!(decide(empty), (Case::SealedIndexValid, Action::Trust));
    }
}
