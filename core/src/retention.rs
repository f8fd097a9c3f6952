//! Retention: which of a partition's oldest segments to delete.
//!
//! Contract:
//! - Inputs: the partition's segments ordered by base offset (the last one is the active
//!   segment), the limits, the current time as a value (`now_ms`), the current log start
//!   offset.
//! - Outputs: a [`RetentionPlan`]: how many segments to delete from the front, why each goes,
//!   and the new log start offset.
//! - Never: reads a clock or a file, deletes anything but a prefix, deletes the active (last)
//!   segment, moves the log start offset backwards, or deletes by time a segment whose
//!   timestamp lies in the future (I9).
//!
//! Rules, in Kafka's order (each continues the prefix the previous one left):
//! 1. Log start: a segment wholly below the log start offset (its successor's base offset is
//!    at or below it, e.g. after DeleteRecords) goes.
//! 2. Time: a segment goes when its largest timestamp is older than `now_ms - retention_ms`.
//!    A segment stamped in the future (`> now_ms`) never goes by time and ends this rule's
//!    prefix, so one bad clock cannot take later segments with it.
//! 3. Size: the oldest segments go while the bytes left after deleting one would still be at
//!    least `retention_bytes`, so the log keeps between the target and the target plus one
//!    segment.

use crate::types::Offset;

/// What retention needs to know about one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The segment's base offset.
    pub base_offset: Offset,
    /// The segment's size in bytes.
    pub size_bytes: u64,
    /// The largest record timestamp in the segment, or its file's mtime when it has none.
    pub max_timestamp_ms: i64,
}

/// Retention limits for one partition; `None` is unlimited (Kafka's -1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionLimits {
    /// `retention.bytes`: the size the log is trimmed towards.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: how long a segment is kept after its newest record. A negative value is
    /// treated as unlimited, as Kafka treats -1.
    pub retention_ms: Option<i64>,
}

/// Why a segment is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeleteReason {
    /// Every offset in it lies below the log start offset.
    BelowLogStart,
    /// Its newest record is older than `retention.ms`.
    Time,
    /// The log is larger than `retention.bytes` without it.
    Size,
}

/// The segments to delete: always a prefix, never the last segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionPlan {
    /// How many segments to delete from the front.
    pub delete_count: usize,
    /// The log start offset after deleting them; never below the one passed in (I9).
    pub new_log_start_offset: Offset,
    /// Why each deleted segment goes, one per deleted segment, in order.
    pub reasons: Vec<DeleteReason>,
}

/// Plans retention for `segments` (ordered by base offset; the last is the active segment)
/// at time `now_ms`, given the current `log_start_offset`.
///
/// Panics if `segments` is not strictly ordered by base offset (the caller sorts them).
pub fn plan(
    segments: &[SegmentInfo],
    limits: RetentionLimits,
    now_ms: i64,
    log_start_offset: Offset,
) -> RetentionPlan {
    assert!(
        segments
            .windows(2)
            .all(|w| w[0].base_offset < w[1].base_offset),
        "segments must be ordered by base offset"
    );
    // Never the active (last) segment (I9).
    let deletable = segments.len().saturating_sub(1);
    let mut reasons = Vec::with_capacity(deletable);

    // 1. Wholly below the log start offset.
    while reasons.len() < deletable && segments[reasons.len() + 1].base_offset <= log_start_offset {
        reasons.push(DeleteReason::BelowLogStart);
    }

    // 2. Time. `cutoff` is None when there is no time limit.
    let cutoff_ms = limits
        .retention_ms
        .filter(|ms| *ms >= 0)
        .map(|ms| now_ms.saturating_sub(ms));
    if let Some(cutoff_ms) = cutoff_ms {
        while reasons.len() < deletable {
            let ts = segments[reasons.len()].max_timestamp_ms;
            // A future timestamp never triggers deletion (I9).
            if ts > now_ms || ts >= cutoff_ms {
                break;
            }
            reasons.push(DeleteReason::Time);
        }
    }

    // 3. Size, over what the earlier rules left.
    if let Some(target_bytes) = limits.retention_bytes {
        let mut remaining_bytes: u64 = segments[reasons.len()..]
            .iter()
            .fold(0u64, |acc, s| acc.saturating_add(s.size_bytes));
        while reasons.len() < deletable {
            let size = segments[reasons.len()].size_bytes;
            match remaining_bytes.checked_sub(size) {
                Some(left) if left >= target_bytes => {
                    remaining_bytes = left;
                    reasons.push(DeleteReason::Size);
                }
                _ => break,
            }
        }
    }

    let delete_count = reasons.len();
    let first_kept = segments.get(delete_count).map(|s| s.base_offset);
    // The log start offset only moves forward (I9).
    let new_log_start_offset = first_kept.map_or(log_start_offset, |b| b.max(log_start_offset));
    RetentionPlan {
        delete_count,
        new_log_start_offset,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(base: i64, size_bytes: u64, max_timestamp_ms: i64) -> SegmentInfo {
        SegmentInfo {
            base_offset: Offset(base),
            size_bytes,
            max_timestamp_ms,
        }
    }

    const UNLIMITED: RetentionLimits = RetentionLimits {
        retention_bytes: None,
        retention_ms: None,
    };

    #[test]
    fn unlimited_deletes_nothing() {
        let segs = [seg(0, 100, 0), seg(10, 100, 0)];
        let p = plan(&segs, UNLIMITED, 1_000_000, Offset(0));
        assert_eq!(p.delete_count, 0);
        assert_eq!(p.new_log_start_offset, Offset(0));
        assert!(p.reasons.is_empty());
        let p = plan(&[], UNLIMITED, 0, Offset(7));
        assert_eq!(p.new_log_start_offset, Offset(7));
    }

    #[test]
    fn size_keeps_between_target_and_target_plus_a_segment() {
        let segs = [
            seg(0, 100, 0),
            seg(10, 100, 0),
            seg(20, 100, 0),
            seg(30, 50, 0),
        ];
        let limits = RetentionLimits {
            retention_bytes: Some(200),
            retention_ms: None,
        };
        // 350 total: deleting the first leaves 250 >= 200; the second would leave 150 < 200.
        let p = plan(&segs, limits, 0, Offset(0));
        assert_eq!(p.delete_count, 1);
        assert_eq!(p.reasons, vec![DeleteReason::Size]);
        assert_eq!(p.new_log_start_offset, Offset(10));
        // Exactly at the target after deleting: deleted.
        let limits = RetentionLimits {
            retention_bytes: Some(150),
            retention_ms: None,
        };
        assert_eq!(plan(&segs, limits, 0, Offset(0)).delete_count, 2);
    }

    #[test]
    fn size_never_deletes_the_active_segment_i9() {
        let segs = [seg(0, 100, 0), seg(10, 100, 0)];
        let limits = RetentionLimits {
            retention_bytes: Some(0),
            retention_ms: Some(0),
        };
        let p = plan(&segs, limits, i64::MAX, Offset(0));
        assert_eq!(p.delete_count, 1);
        assert_eq!(p.new_log_start_offset, Offset(10));
    }

    #[test]
    fn time_deletes_expired_prefix_only() {
        // now 1000, retention 100: cutoff 900; a segment at 899 goes, 900 stays.
        let segs = [
            seg(0, 1, 899),
            seg(10, 1, 950),
            seg(20, 1, 100),
            seg(30, 1, 0),
        ];
        let limits = RetentionLimits {
            retention_bytes: None,
            retention_ms: Some(100),
        };
        let p = plan(&segs, limits, 1_000, Offset(0));
        assert_eq!(
            p.delete_count, 1,
            "an expired segment after a kept one stays"
        );
        assert_eq!(p.reasons, vec![DeleteReason::Time]);
        let segs = [seg(0, 1, 900), seg(10, 1, 0)];
        assert_eq!(plan(&segs, limits, 1_000, Offset(0)).delete_count, 0);
    }

    #[test]
    fn future_timestamp_never_deletes_and_stops_the_prefix_i9() {
        let segs = [seg(0, 1, 5_000), seg(10, 1, 0), seg(20, 1, 0)];
        let limits = RetentionLimits {
            retention_bytes: None,
            retention_ms: Some(0),
        };
        let p = plan(&segs, limits, 1_000, Offset(0));
        assert_eq!(p.delete_count, 0);
        // Even with a huge negative retention window trick: negative means unlimited.
        let limits = RetentionLimits {
            retention_bytes: None,
            retention_ms: Some(-1),
        };
        assert_eq!(plan(&segs, limits, 1_000, Offset(0)).delete_count, 0);
    }

    #[test]
    fn log_start_offset_only_moves_forward_i9() {
        let segs = [seg(0, 100, 0), seg(10, 100, 0), seg(20, 100, 0)];
        // A DeleteRecords moved the start into the second segment: the first goes.
        let p = plan(&segs, UNLIMITED, 0, Offset(15));
        assert_eq!(p.reasons, vec![DeleteReason::BelowLogStart]);
        assert_eq!(p.new_log_start_offset, Offset(15));
        // ... exactly at the second segment's base: the first goes, start stays.
        let p = plan(&segs, UNLIMITED, 0, Offset(10));
        assert_eq!(p.delete_count, 1);
        assert_eq!(p.new_log_start_offset, Offset(10));
        // Size deletion moves it to the first kept base.
        let limits = RetentionLimits {
            retention_bytes: Some(100),
            retention_ms: None,
        };
        let p = plan(&segs, limits, 0, Offset(3));
        assert_eq!(p.delete_count, 2);
        assert_eq!(p.new_log_start_offset, Offset(20));
    }

    #[test]
    fn reasons_are_in_rule_order() {
        let segs = [
            seg(0, 100, 0),
            seg(10, 100, 0),
            seg(20, 100, 2_000),
            seg(30, 100, 2_000),
            seg(40, 10, 2_000),
        ];
        let limits = RetentionLimits {
            retention_bytes: Some(10),
            retention_ms: Some(500),
        };
        let p = plan(&segs, limits, 1_000, Offset(10));
        assert_eq!(
            p.reasons,
            vec![
                DeleteReason::BelowLogStart,
                DeleteReason::Time,
                DeleteReason::Size,
                DeleteReason::Size
            ]
        );
        assert_eq!(p.new_log_start_offset, Offset(40));
    }

    /// Reference: each rule's prefix length computed on its own by brute force; the plan
    /// deletes the longest, and the reasons follow rule order.
    fn reference(
        segs: &[SegmentInfo],
        limits: RetentionLimits,
        now_ms: i64,
        start: Offset,
    ) -> (usize, Vec<DeleteReason>) {
        let n = segs.len();
        let max_k = n.saturating_sub(1);
        let below = (0..=max_k)
            .filter(|&k| (0..k).all(|i| segs[i + 1].base_offset <= start))
            .max()
            .unwrap_or(0);
        let timed = |i: usize| match limits.retention_ms {
            Some(ms) if ms >= 0 => {
                let t = segs[i].max_timestamp_ms;
                t <= now_ms && i128::from(t) < i128::from(now_ms) - i128::from(ms)
            }
            _ => false,
        };
        let time = (0..=max_k)
            .filter(|&k| (0..k).all(|i| i < below || timed(i)))
            .max()
            .unwrap_or(0);
        let total: u128 = segs.iter().map(|s| u128::from(s.size_bytes)).sum();
        let size = match limits.retention_bytes {
            None => 0,
            Some(target) => (0..=max_k)
                .filter(|&k| {
                    let deleted: u128 = segs[..k].iter().map(|s| u128::from(s.size_bytes)).sum();
                    total - deleted >= u128::from(target)
                })
                .max()
                .unwrap_or(0),
        };
        let count = below.max(time).max(size);
        let reasons = (0..count)
            .map(|i| {
                if i < below {
                    DeleteReason::BelowLogStart
                } else if i < time {
                    DeleteReason::Time
                } else {
                    DeleteReason::Size
                }
            })
            .collect();
        (count, reasons)
    }

    fn segments_strategy() -> impl Strategy<Value = Vec<SegmentInfo>> {
        // Coarse sizes and times so that ties with the limits happen often.
        prop::collection::vec((1i64..50, 0u64..10, -1i64..20), 0..8).prop_map(|v| {
            let mut base = 0;
            v.into_iter()
                .map(|(gap, size, ts)| {
                    let s = seg(base, size * 100, ts * 100);
                    base += gap;
                    s
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn plan_matches_reference_and_keeps_i9(
            segs in segments_strategy(),
            retention_bytes in prop::option::of((0u64..30).prop_map(|b| b * 100)),
            retention_ms in prop::option::of((-1i64..15).prop_map(|ms| ms * 100)),
            now_ms in (0i64..20).prop_map(|t| t * 100),
            start in 0i64..300,
        ) {
            let limits = RetentionLimits { retention_bytes, retention_ms };
            let p = plan(&segs, limits, now_ms, Offset(start));
            let (count, reasons) = reference(&segs, limits, now_ms, Offset(start));
            prop_assert_eq!(p.delete_count, count);
            prop_assert_eq!(&p.reasons, &reasons);
            prop_assert_eq!(p.reasons.len(), p.delete_count);
            // I9: never the active segment, start offset never backwards.
            prop_assert!(segs.is_empty() || p.delete_count < segs.len());
            prop_assert!(p.new_log_start_offset >= Offset(start));
            if let Some(kept) = segs.get(p.delete_count) {
                prop_assert!(p.new_log_start_offset >= kept.base_offset);
            }
            // I9: nothing stamped in the future is deleted by time.
            for (i, r) in p.reasons.iter().enumerate() {
                if *r == DeleteReason::Time {
                    prop_assert!(segs[i].max_timestamp_ms <= now_ms);
                }
            }
            // Size deletion leaves at least the target.
            if let (Some(target), true) = (retention_bytes, p.reasons.contains(&DeleteReason::Size)) {
                let left: u64 = segs[p.delete_count..].iter().map(|s| s.size_bytes).sum();
                prop_assert!(left >= target);
            }
        }
    }
}
