//! Which part of a partition's log the cleaner should clean now, if any.
//!
//! Contract: a pure function of the segments' facts, the cleaner's checkpoint, the topic's
//! [`CompactionConfig`] and `now_ms`. Kafka's rules:
//! - The log splits at the *first dirty offset* (the checkpoint: everything below it has been
//!   cleaned at least once) into a clean head and a dirty tail, and at the *first uncleanable
//!   offset* (the active segment's base, or the first sealed segment holding a record younger
//!   than `min.compaction.lag.ms`, whichever is lower).
//! - A segment counts as dirty when any of its offsets lies at or above the checkpoint (a pass
//!   may end inside a segment), as clean otherwise; the dirty ratio is dirty bytes over all
//!   bytes below the first uncleanable offset.
//! - The partition is due when the ratio reaches `min.cleanable.dirty.ratio`, or when its
//!   first dirty segment's newest record is older than `max.compaction.lag.ms`, or when a
//!   tombstone an earlier cleaning kept has passed `delete.retention.ms` (so a quiet log
//!   still drops its deletes; Kafka does the same since KIP-534). Such a cleaning may have an
//!   empty dirty part: `first_dirty == end`, and only expired tombstones go.
//! - Never: plans over the active segment, or past a segment too young for the minimum lag.

use super::policy::CompactionConfig;
use crate::types::Offset;

/// What the cleaner needs to know about one segment. Segments are given oldest first and
/// contiguous (each `next_offset` is the next one's `base_offset`); the last is the active one
/// unless `sealed` says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentFacts {
    /// The segment's base offset (its file name).
    pub base_offset: Offset,
    /// The offset after its last record.
    pub next_offset: Offset,
    /// Its log file's size.
    pub size_bytes: u64,
    /// The largest record timestamp in it (`-1` when none is known: treated as old).
    pub max_timestamp_ms: i64,
    /// False for the active segment, which is never cleaned.
    pub sealed: bool,
}

/// Why the cleaner cleans this partition now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// The dirty ratio reached `min.cleanable.dirty.ratio`.
    DirtyRatio,
    /// A dirty record is older than `max.compaction.lag.ms`.
    MaxCompactionLag,
    /// A tombstone kept by an earlier cleaning has passed `delete.retention.ms`.
    TombstoneExpired,
}

/// A cleaning to carry out: rewrite `[log start, end)`, keying on the dirty part
/// `[first_dirty, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanPlan {
    /// The checkpoint, raised to the log start if it lay below it.
    pub first_dirty: Offset,
    /// The first uncleanable offset: nothing at or above it is touched.
    pub end: Offset,
    /// Bytes of segments wholly below `first_dirty`.
    pub clean_bytes: u64,
    /// Bytes of segments between `first_dirty` and `end`.
    pub dirty_bytes: u64,
    /// `dirty_bytes / (clean_bytes + dirty_bytes)` in parts per million.
    pub dirty_ratio_ppm: u32,
    /// Which rule made the partition due.
    pub due: Due,
}

/// Why there is nothing to clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// No sealed segment old enough for `min.compaction.lag.ms`.
    NothingCleanable,
    /// Every cleanable segment lies below the checkpoint.
    NothingDirty,
    /// The dirty ratio (parts per million) is below the minimum and no record is past the
    /// maximum lag.
    BelowRatio(u32),
}

/// Decides whether and over which offsets to clean. See the module contract.
///
/// `oldest_kept_tombstone_ms` is the smallest timestamp of a tombstone the last cleaning kept
/// below its pass end (`None` when it kept none).
pub fn choose(
    segments: &[SegmentFacts],
    first_dirty: Offset,
    oldest_kept_tombstone_ms: Option<i64>,
    config: &CompactionConfig,
    now_ms: i64,
) -> Result<CleanPlan, Idle> {
    let Some(first) = segments.first() else {
        return Err(Idle::NothingCleanable);
    };
    let first_dirty = first_dirty.max(first.base_offset);
    let young_after = now_ms.saturating_sub(config.min_compaction_lag_ms.max(0));
    let cleanable = segments
        .iter()
        .take_while(|s| s.sealed && s.max_timestamp_ms <= young_after);
    let mut end = None;
    let mut clean_bytes = 0u64;
    let mut dirty_bytes = 0u64;
    let mut first_dirty_max_ts = None;
    for segment in cleanable {
        end = Some(segment.next_offset);
        if segment.next_offset <= first_dirty {
            clean_bytes += segment.size_bytes;
        } else {
            dirty_bytes += segment.size_bytes;
            first_dirty_max_ts.get_or_insert(segment.max_timestamp_ms);
        }
    }
    let Some(end) = end else {
        return Err(Idle::NothingCleanable);
    };
    let tombstone_expired = oldest_kept_tombstone_ms
        .is_some_and(|ts| ts <= now_ms.saturating_sub(config.delete_retention_ms.max(0)));
    let Some(first_dirty_max_ts) = first_dirty_max_ts else {
        if tombstone_expired {
            let first_dirty = first_dirty.min(end);
            return Ok(CleanPlan {
                first_dirty,
                end: first_dirty,
                clean_bytes,
                dirty_bytes: 0,
                dirty_ratio_ppm: 0,
                due: Due::TombstoneExpired,
            });
        }
        return Err(Idle::NothingDirty);
    };
    let total = clean_bytes + dirty_bytes;
    let dirty_ratio_ppm = if total == 0 {
        1_000_000
    } else {
        (u128::from(dirty_bytes) * 1_000_000 / u128::from(total)) as u32
    };
    let lag_passed =
        now_ms.saturating_sub(first_dirty_max_ts.max(0)) > config.max_compaction_lag_ms.max(0);
    let due = if dirty_ratio_ppm >= config.min_cleanable_dirty_ratio_ppm {
        Due::DirtyRatio
    } else if lag_passed {
        Due::MaxCompactionLag
    } else if tombstone_expired {
        Due::TombstoneExpired
    } else {
        return Err(Idle::BelowRatio(dirty_ratio_ppm));
    };
    Ok(CleanPlan {
        first_dirty,
        end,
        clean_bytes,
        dirty_bytes,
        dirty_ratio_ppm,
        due,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(spec: &[(i64, u64, i64, bool)]) -> Vec<SegmentFacts> {
        let mut base = 0;
        spec.iter()
            .map(|&(count, size_bytes, max_timestamp_ms, sealed)| {
                let s = SegmentFacts {
                    base_offset: Offset(base),
                    next_offset: Offset(base + count),
                    size_bytes,
                    max_timestamp_ms,
                    sealed,
                };
                base += count;
                s
            })
            .collect()
    }

    #[test]
    fn the_active_segment_is_never_planned() {
        let s = segs(&[(10, 100, 0, false)]);
        let c = CompactionConfig::default();
        assert_eq!(
            choose(&s, Offset(0), None, &c, 1000),
            Err(Idle::NothingCleanable)
        );
        let s = segs(&[(10, 100, 0, true), (5, 100, 0, false)]);
        let plan = choose(&s, Offset(0), None, &c, 1000).expect("due");
        assert_eq!((plan.first_dirty, plan.end), (Offset(0), Offset(10)));
        assert_eq!(plan.due, Due::DirtyRatio);
    }

    #[test]
    fn min_lag_stops_at_the_first_young_segment() {
        let s = segs(&[
            (10, 100, 100, true),
            (10, 100, 900, true),
            (10, 100, 0, true),
        ]);
        let c = CompactionConfig {
            min_compaction_lag_ms: 500,
            ..CompactionConfig::default()
        };
        let plan = choose(&s, Offset(0), None, &c, 1000).expect("due");
        assert_eq!(
            plan.end,
            Offset(10),
            "the old third segment waits behind the young one"
        );
        assert_eq!(
            choose(&s, Offset(0), None, &c, 500),
            Err(Idle::NothingCleanable)
        );
    }

    #[test]
    fn ratio_and_max_lag_decide() {
        let s = segs(&[(10, 300, 0, true), (10, 100, 50, true), (1, 10, 0, false)]);
        let c = CompactionConfig::default(); // 0.5
        assert_eq!(
            choose(&s, Offset(10), None, &c, 100),
            Err(Idle::BelowRatio(250_000))
        );
        assert_eq!(
            choose(&s, Offset(20), None, &c, 100),
            Err(Idle::NothingDirty)
        );
        let lagged = CompactionConfig {
            max_compaction_lag_ms: 40,
            ..c
        };
        let plan = choose(&s, Offset(10), None, &lagged, 100).expect("lag passed");
        assert_eq!(plan.due, Due::MaxCompactionLag);
        assert_eq!((plan.clean_bytes, plan.dirty_bytes), (300, 100));
        // A checkpoint below the log start is raised to it.
        let plan = choose(&s, Offset(-5), None, &c, 100).expect("all dirty");
        assert_eq!(plan.first_dirty, Offset(0));
        assert_eq!(plan.dirty_ratio_ppm, 1_000_000);
    }

    #[test]
    fn an_expired_kept_tombstone_makes_a_clean_log_due() {
        let s = segs(&[(10, 300, 0, true), (1, 10, 0, false)]);
        let c = CompactionConfig {
            delete_retention_ms: 100,
            ..CompactionConfig::default()
        };
        assert_eq!(
            choose(&s, Offset(10), Some(50), &c, 149),
            Err(Idle::NothingDirty)
        );
        let plan = choose(&s, Offset(10), Some(50), &c, 150).expect("due");
        assert_eq!(plan.due, Due::TombstoneExpired);
        assert_eq!((plan.first_dirty, plan.end), (Offset(10), Offset(10)));
    }
}
