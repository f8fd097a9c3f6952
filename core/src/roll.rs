//! When the active segment must be sealed and a new one started (a roll).
//!
//! Contract:
//! - Decides: whether a batch about to be appended goes to a new segment instead of the
//!   active one ([`roll_reason`]).
//! - Inputs: the active segment as values ([`ActiveSegment`]: base offset, published size,
//!   creation time, emptiness), the limits ([`RollLimits`]: `segment.bytes`, `segment.ms`),
//!   the bytes of the write group already placed before the batch (`pending_bytes`), the
//!   batch's size and last offset, and the time as a value (`now_ms`).
//! - Output: `None` (append to the active segment) or the first [`RollReason`] that applies,
//!   in the order size, positions, relative offsets, age.
//! - Invariants: an empty active segment with nothing pending never rolls, whatever the batch
//!   (a batch larger than `segment.bytes` still has to go somewhere, and a fresh segment based
//!   at the batch's own base offset always holds its offsets); a segment never grows past
//!   32-bit positions nor holds an offset whose distance from its base does not fit the
//!   index's 32-bit relative offset (I6); a roll happens only between batches, so batches
//!   never straddle segments (I1).
//! - Never: reads a clock or the disk. The caller (the broker's `PartitionLog`) carries a
//!   roll out: sync the old segment (I5), create the new one, snapshot the producer state.

use crate::types::Offset;

/// The facts about the active segment that the roll decision looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveSegment {
    /// The segment's base offset.
    pub base_offset: Offset,
    /// Its published size in bytes.
    pub size_bytes: u64,
    /// When it was created (or opened, for a segment recovered at startup).
    pub created_ms: i64,
    /// True when it holds no batch.
    pub is_empty: bool,
}

/// The configured limits on one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RollLimits {
    /// `segment.bytes`: a batch that would push a non-empty segment past this rolls.
    pub segment_bytes: u64,
    /// `segment.ms`: a non-empty segment this old rolls before the next batch; `None` = never
    /// by time.
    pub segment_ms: Option<i64>,
}

/// Why a batch goes to a new segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RollReason {
    /// The segment would pass `segment.bytes`.
    Size,
    /// The segment would pass `u32::MAX` bytes, the largest position the index can hold (I6).
    /// Unreachable while `segment.bytes <= u32::MAX` (the broker's configuration enforces it);
    /// kept so the decision is right on its own.
    PositionOverflow,
    /// The batch's last offset lies more than `u32::MAX` past the segment's base (I6).
    RelativeOffsetOverflow,
    /// The segment is `segment.ms` old.
    Age,
}

/// Whether a batch of `batch_bytes` ending at `last_offset` must go to a new segment, with
/// `pending_bytes` of its write group already placed after the segment's published size.
/// See the module documentation for the rules.
pub fn roll_reason(
    active: ActiveSegment,
    limits: RollLimits,
    pending_bytes: u64,
    batch_bytes: u64,
    last_offset: Offset,
    now_ms: i64,
) -> Option<RollReason> {
    if active.is_empty && pending_bytes == 0 {
        return None;
    }
    let end = active
        .size_bytes
        .saturating_add(pending_bytes)
        .saturating_add(batch_bytes);
    if end > limits.segment_bytes {
        return Some(RollReason::Size);
    }
    if end > u64::from(u32::MAX) {
        return Some(RollReason::PositionOverflow);
    }
    if last_offset.relative_to(active.base_offset).is_none() {
        return Some(RollReason::RelativeOffsetOverflow);
    }
    let too_old = limits
        .segment_ms
        .is_some_and(|ms| now_ms.saturating_sub(active.created_ms) >= ms);
    too_old.then_some(RollReason::Age)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(size_bytes: u64, is_empty: bool) -> ActiveSegment {
        ActiveSegment {
            base_offset: Offset(100),
            size_bytes,
            created_ms: 1_000,
            is_empty,
        }
    }

    const LIMITS: RollLimits = RollLimits {
        segment_bytes: 1_000,
        segment_ms: Some(500),
    };

    #[test]
    fn empty_segment_with_nothing_pending_never_rolls() {
        let huge_old = roll_reason(
            segment(0, true),
            LIMITS,
            0,
            10_000,
            Offset(100 + i64::from(u32::MAX) + 5),
            1_000_000,
        );
        assert_eq!(huge_old, None);
    }

    #[test]
    fn size_counts_published_pending_and_batch_bytes() {
        let s = segment(600, false);
        assert_eq!(roll_reason(s, LIMITS, 300, 100, Offset(101), 1_000), None);
        assert_eq!(
            roll_reason(s, LIMITS, 300, 101, Offset(101), 1_000),
            Some(RollReason::Size)
        );
        // Pending bytes alone make an empty segment count as non-empty.
        assert_eq!(
            roll_reason(segment(0, true), LIMITS, 900, 101, Offset(101), 1_000),
            Some(RollReason::Size)
        );
    }

    #[test]
    fn positions_past_u32_roll_even_under_a_larger_limit_i6() {
        let limits = RollLimits {
            segment_bytes: u64::MAX,
            segment_ms: None,
        };
        let s = segment(u64::from(u32::MAX) - 10, false);
        assert_eq!(roll_reason(s, limits, 0, 10, Offset(101), 0), None);
        assert_eq!(
            roll_reason(s, limits, 0, 11, Offset(101), 0),
            Some(RollReason::PositionOverflow)
        );
    }

    #[test]
    fn relative_offsets_past_u32_roll_i6() {
        let s = segment(10, false);
        let last_fits = Offset(100 + i64::from(u32::MAX));
        assert_eq!(roll_reason(s, LIMITS, 0, 10, last_fits, 1_000), None);
        assert_eq!(
            roll_reason(s, LIMITS, 0, 10, last_fits.plus(1), 1_000),
            Some(RollReason::RelativeOffsetOverflow)
        );
    }

    #[test]
    fn age_rolls_at_segment_ms_and_never_without_it() {
        let s = segment(10, false);
        assert_eq!(roll_reason(s, LIMITS, 0, 10, Offset(101), 1_499), None);
        assert_eq!(
            roll_reason(s, LIMITS, 0, 10, Offset(101), 1_500),
            Some(RollReason::Age)
        );
        let no_age = RollLimits {
            segment_ms: None,
            ..LIMITS
        };
        assert_eq!(roll_reason(s, no_age, 0, 10, Offset(101), i64::MAX), None);
        // A clock that went backwards never rolls by age.
        assert_eq!(roll_reason(s, LIMITS, 0, 10, Offset(101), i64::MIN), None);
    }

    proptest::proptest! {
        /// Against a model written from the rules in prose: the decision rolls exactly when a
        /// non-empty segment would break one of the limits, and appending after a "no" keeps
        /// every limit (I6).
        #[test]
        fn matches_the_rules(
            size_bytes in 0u64..2_000,
            is_empty in proptest::bool::ANY,
            pending_bytes in 0u64..1_000,
            batch_bytes in 61u64..1_000,
            delta in 0i64..(1i64 << 33),
            segment_bytes in 1u64..3_000,
            segment_ms in proptest::option::of(1i64..1_000),
            age in -10i64..2_000,
        ) {
            let active = ActiveSegment {
                base_offset: Offset(7),
                size_bytes: if is_empty { 0 } else { size_bytes },
                created_ms: 5_000,
                is_empty,
            };
            let limits = RollLimits { segment_bytes, segment_ms };
            let last = Offset(7 + delta);
            let got = roll_reason(active, limits, pending_bytes, batch_bytes, last, 5_000 + age);
            let non_empty = !is_empty || pending_bytes > 0;
            let end = active.size_bytes + pending_bytes + batch_bytes;
            let breaks = end > segment_bytes
                || delta > i64::from(u32::MAX)
                || segment_ms.is_some_and(|ms| age >= ms);
            proptest::prop_assert_eq!(got.is_some(), non_empty && breaks);
            if got.is_none() && non_empty {
                proptest::prop_assert!(end <= segment_bytes);
                proptest::prop_assert!(last.relative_to(active.base_offset).is_some());
            }
        }
    }
}
