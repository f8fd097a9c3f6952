//! Whether one record survives a cleaning.
//!
//! Contract: a pure function of the record's facts, the pass's [`KeyOffsetMap`] and the
//! tombstone horizon. Applied to every record below the pass end:
//! 1. A record without a key is dropped (Kafka refuses keyless records on compacted topics;
//!    any left from before the topic was compacted have no key to keep a latest value for).
//! 2. A record whose key the pass saw at a later offset is dropped: superseded.
//! 3. A tombstone (null value) is dropped once `delete.retention.ms` has passed since its
//!    timestamp; until then it stays, so a consumer reading from the start still sees the
//!    delete.
//! 4. Everything else is kept, at its offset (I1).
//!
//! Why (2) is enough although the map sees only the dirty part: every cleaning leaves at most
//! one record per key below its pass end, so the clean head never holds two records of a key;
//! a key last seen in the head is not in the map and its one record stays (I23). Dropping an
//! expired tombstone therefore never uncovers an older value.

use super::offset_map::KeyOffsetMap;
use crate::types::Offset;

/// The facts about one record that the verdict needs.
#[derive(Clone, Copy, Debug)]
pub struct RecordFacts<'a> {
    /// The record's offset.
    pub offset: Offset,
    /// Its key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// True when its value is null (a tombstone).
    pub is_tombstone: bool,
    /// Its value, `None` when null (read by the produce path's schema-id rule, I124).
    pub value: Option<&'a [u8]>,
    /// Its timestamp (CreateTime, or the batch's LogAppendTime).
    pub timestamp_ms: i64,
}

/// When tombstones may go: those with a timestamp at or below `horizon_ms` are expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TombstoneHorizon {
    /// `now_ms - delete.retention.ms`.
    pub horizon_ms: i64,
}

impl TombstoneHorizon {
    /// The horizon at `now_ms` for a `delete.retention.ms` of `delete_retention_ms`.
    pub fn at(now_ms: i64, delete_retention_ms: i64) -> Self {
        TombstoneHorizon {
            horizon_ms: now_ms.saturating_sub(delete_retention_ms.max(0)),
        }
    }
}

/// Why a record was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// It has no key.
    Keyless,
    /// A later record has the same key.
    Superseded,
    /// A tombstone older than `delete.retention.ms`.
    TombstoneExpired,
}

/// The verdict on one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It stays, at its offset.
    Keep,
    /// It goes.
    Drop(DropReason),
}

/// Applies the rules of the module contract to one record below the pass end.
pub fn keep_record(
    record: &RecordFacts<'_>,
    map: &KeyOffsetMap,
    tombstones: TombstoneHorizon,
) -> Verdict {
    debug_assert!(
        record.offset < map.pass_end(),
        "only records below the pass end"
    );
    let Some(key) = record.key else {
        return Verdict::Drop(DropReason::Keyless);
    };
    if map.latest(key).is_some_and(|latest| latest > record.offset) {
        return Verdict::Drop(DropReason::Superseded);
    }
    if record.is_tombstone && record.timestamp_ms <= tombstones.horizon_ms {
        return Verdict::Drop(DropReason::TombstoneExpired);
    }
    Verdict::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(offset: i64, key: Option<&[u8]>, tombstone: bool, ts: i64) -> RecordFacts<'_> {
        RecordFacts {
            offset: Offset(offset),
            key,
            is_tombstone: tombstone,
            value: (!tombstone).then_some(b"v".as_slice()),
            timestamp_ms: ts,
        }
    }

    #[test]
    fn the_four_rules() {
        let mut map = KeyOffsetMap::new(1 << 20, Offset(0));
        map.add_batch(
            [(Offset(0), &b"a"[..]), (Offset(1), b"b"), (Offset(2), b"a")],
            Offset(3),
        )
        .expect("fits");
        let horizon = TombstoneHorizon::at(1_000, 100);
        assert_eq!(
            keep_record(&facts(0, None, false, 0), &map, horizon),
            Verdict::Drop(DropReason::Keyless)
        );
        assert_eq!(
            keep_record(&facts(0, Some(b"a"), false, 0), &map, horizon),
            Verdict::Drop(DropReason::Superseded)
        );
        assert_eq!(
            keep_record(&facts(2, Some(b"a"), false, 0), &map, horizon),
            Verdict::Keep
        );
        assert_eq!(
            keep_record(&facts(1, Some(b"b"), true, 900), &map, horizon),
            Verdict::Drop(DropReason::TombstoneExpired)
        );
        assert_eq!(
            keep_record(&facts(1, Some(b"b"), true, 901), &map, horizon),
            Verdict::Keep,
            "a young tombstone stays"
        );
        // A key the pass did not see (its one record lies in the clean head) stays.
        assert_eq!(
            keep_record(&facts(0, Some(b"z"), false, 0), &map, horizon),
            Verdict::Keep
        );
    }
}
