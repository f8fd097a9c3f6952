//! Per-record validation of a produced batch (KIP-467): which records of a batch break one of
//! the topic's record rules, so the broker can refuse the batch and name those records in the
//! Produce response's `record_errors` (v8+).
//!
//! Contract: [`failing_records`] is a pure function of the batch's records (their facts, in
//! batch order: the n-th fact is batch index n), the topic's [`RecordRules`] and `now_ms` (the
//! broker's wall clock, passed in). It returns every failing record, in batch order, each
//! once, with the first rule it breaks; an empty list means the batch passes. The caller
//! refuses the batch whole when the list is not empty (I61): Kafka appends no part of a batch
//! with a failing record, and the producer learns which records failed (those are not
//! retriable) and that the others were refused only for sharing their batch.
//!
//! The rules, in the order each record is checked (Kafka's `LogValidator`):
//! 1. [`RecordRules::key_required`] (a compacted topic): a record without a key is
//!    INVALID_RECORD (87); the cleaner could keep no latest value for it.
//! 2. [`RecordRules::timestamps`] (a CreateTime topic with `message.timestamp.before.max.ms` or
//!    `message.timestamp.after.max.ms` set): a record whose timestamp lies before
//!    `now - before` or after `now + after` is INVALID_TIMESTAMP (32).
//!
//! The batch's error code ([`batch_error_code`]) is INVALID_TIMESTAMP when any record breaks
//! rule 2, else INVALID_RECORD, as Kafka answers.

use crate::compaction::retain::RecordFacts;
use crate::error_code::ErrorCode;

/// The window a record's timestamp must fall in, relative to the broker's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampBounds {
    /// `message.timestamp.before.max.ms`: how far in the past a timestamp may lie.
    pub before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a timestamp may lie.
    pub after_max_ms: i64,
}

impl TimestampBounds {
    /// The bounds that accept every timestamp (Kafka's defaults: `Long.MAX_VALUE` both ways).
    pub const UNBOUNDED: TimestampBounds = TimestampBounds {
        before_max_ms: i64::MAX,
        after_max_ms: i64::MAX,
    };

    /// The lowest and highest timestamp accepted at `now_ms`, saturating at `i64`'s ends; a
    /// side at `i64::MAX` (Kafka's default) bounds nothing, whatever `now_ms` is.
    pub fn window_at(&self, now_ms: i64) -> (i64, i64) {
        let lowest_ms = match self.before_max_ms {
            i64::MAX => i64::MIN,
            before => now_ms.saturating_sub(before.max(0)),
        };
        let highest_ms = match self.after_max_ms {
            i64::MAX => i64::MAX,
            after => now_ms.saturating_add(after.max(0)),
        };
        (lowest_ms, highest_ms)
    }
}

/// The record rules of a topic that [`failing_records`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRules {
    /// Every record needs a key (`cleanup.policy` includes `compact`).
    pub key_required: bool,
    /// The timestamp window, for a CreateTime topic; `None` checks no timestamp.
    pub timestamps: Option<TimestampBounds>,
}

impl RecordRules {
    /// Whether any rule can fail a record: when not, the caller need not decode the batch.
    pub fn checks_anything(&self) -> bool {
        self.key_required
            || self
                .timestamps
                .is_some_and(|bounds| bounds != TimestampBounds::UNBOUNDED)
    }
}

/// Why one record fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordViolation {
    /// No key on a topic that requires one (rule 1).
    MissingKey,
    /// The timestamp is outside `[lowest_ms, highest_ms]` (rule 2).
    TimestampOutOfRange {
        /// The record's timestamp.
        timestamp_ms: i64,
        /// The lowest timestamp accepted at the time of the check.
        lowest_ms: i64,
        /// The highest timestamp accepted at the time of the check.
        highest_ms: i64,
    },
}

impl RecordViolation {
    /// Kafka's error code for this violation.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RecordViolation::MissingKey => ErrorCode::INVALID_RECORD,
            RecordViolation::TimestampOutOfRange { .. } => ErrorCode::INVALID_TIMESTAMP,
        }
    }

    /// The message the Produce response carries for this record.
    pub fn message(&self) -> String {
        match self {
            RecordViolation::MissingKey => {
                "a compacted topic refuses a record without a key".to_string()
            }
            RecordViolation::TimestampOutOfRange {
                timestamp_ms,
                lowest_ms,
                highest_ms,
            } => format!(
                "timestamp {timestamp_ms} is out of range: it must be within \
                 [{lowest_ms}, {highest_ms}] (message.timestamp.before.max.ms / \
                 message.timestamp.after.max.ms)"
            ),
        }
    }
}

/// One failing record of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordFailure {
    /// Its position in the batch (0 for the first record).
    pub batch_index: i32,
    /// The first rule it breaks.
    pub violation: RecordViolation,
}

/// Every record of the batch that breaks one of `rules` at `now_ms`, in batch order (see the
/// module's contract). The list is never longer than the batch.
pub fn failing_records<'a>(
    records: impl IntoIterator<Item = RecordFacts<'a>>,
    rules: &RecordRules,
    now_ms: i64,
) -> Vec<RecordFailure> {
    let window = rules.timestamps.map(|bounds| bounds.window_at(now_ms));
    let mut failures = Vec::new();
    for (index, record) in records.into_iter().enumerate() {
        let violation = if rules.key_required && record.key.is_none() {
            Some(RecordViolation::MissingKey)
        } else {
            window.and_then(|(lowest_ms, highest_ms)| {
                (record.timestamp_ms < lowest_ms || record.timestamp_ms > highest_ms).then_some(
                    RecordViolation::TimestampOutOfRange {
                        timestamp_ms: record.timestamp_ms,
                        lowest_ms,
                        highest_ms,
                    },
                )
            })
        };
        if let Some(violation) = violation {
            // A batch holds at most i32::MAX records (its record count is an i32).
            let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
            failures.push(RecordFailure {
                batch_index,
                violation,
            });
        }
    }
    failures
}

/// The error code of a batch refused for `failures` (not empty): INVALID_TIMESTAMP when any
/// record's timestamp is out of range, else INVALID_RECORD.
pub fn batch_error_code(failures: &[RecordFailure]) -> ErrorCode {
    debug_assert!(
        !failures.is_empty(),
        "a batch with no failing record is not refused"
    );
    if failures
        .iter()
        .any(|f| f.violation.error_code() == ErrorCode::INVALID_TIMESTAMP)
    {
        ErrorCode::INVALID_TIMESTAMP
    } else {
        ErrorCode::INVALID_RECORD
    }
}

/// The batch-level message of a batch refused for `failures`: how many records failed and
/// the first three reasons.
pub fn batch_error_message(failures: &[RecordFailure]) -> String {
    let shown: Vec<String> = failures
        .iter()
        .take(3)
        .map(|f| format!("record {}: {}", f.batch_index, f.violation.message()))
        .collect();
    format!(
        "{} record(s) of the batch refused, so the batch is refused whole; the first {}: {}",
        failures.len(),
        shown.len(),
        shown.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Offset;

    fn record(index: i64, key: Option<&'static [u8]>, timestamp_ms: i64) -> RecordFacts<'static> {
        RecordFacts {
            offset: Offset(index),
            key,
            is_tombstone: false,
            timestamp_ms,
        }
    }

    const KEYED: RecordRules = RecordRules {
        key_required: true,
        timestamps: None,
    };

    #[test]
    fn keyless_records_fail_on_a_compacted_topic_and_only_they() {
        let batch: Vec<_> = (0..10)
            .map(|i| record(i, (i % 3 != 0).then_some(b"k".as_slice()), 0))
            .collect();
        let failures = failing_records(batch.iter().copied(), &KEYED, 0);
        let indexes: Vec<i32> = failures.iter().map(|f| f.batch_index).collect();
        assert_eq!(indexes, vec![0, 3, 6, 9]);
        assert!(failures
            .iter()
            .all(|f| f.violation == RecordViolation::MissingKey));
        assert_eq!(batch_error_code(&failures), ErrorCode::INVALID_RECORD);
        let no_rule = RecordRules {
            key_required: false,
            timestamps: None,
        };
        assert!(failing_records(batch.iter().copied(), &no_rule, 0).is_empty());
        assert!(!no_rule.checks_anything());
    }

    #[test]
    fn timestamps_outside_the_window_fail_with_invalid_timestamp() {
        let rules = RecordRules {
            key_required: false,
            timestamps: Some(TimestampBounds {
                before_max_ms: 1_000,
                after_max_ms: 100,
            }),
        };
        assert!(rules.checks_anything());
        let now = 10_000;
        let batch = [
            record(0, None, 8_999),  // too old
            record(1, None, 9_000),  // the lowest accepted
            record(2, None, 10_100), // the highest accepted
            record(3, None, 10_101), // too new
        ];
        let failures = failing_records(batch, &rules, now);
        assert_eq!(
            failures,
            vec![
                RecordFailure {
                    batch_index: 0,
                    violation: RecordViolation::TimestampOutOfRange {
                        timestamp_ms: 8_999,
                        lowest_ms: 9_000,
                        highest_ms: 10_100
                    }
                },
                RecordFailure {
                    batch_index: 3,
                    violation: RecordViolation::TimestampOutOfRange {
                        timestamp_ms: 10_101,
                        lowest_ms: 9_000,
                        highest_ms: 10_100
                    }
                },
            ]
        );
        assert_eq!(batch_error_code(&failures), ErrorCode::INVALID_TIMESTAMP);
    }

    #[test]
    fn a_missing_key_is_reported_before_a_bad_timestamp_and_the_code_prefers_timestamps() {
        let rules = RecordRules {
            key_required: true,
            timestamps: Some(TimestampBounds {
                before_max_ms: 0,
                after_max_ms: 0,
            }),
        };
        let batch = [record(0, None, 5), record(1, Some(b"k"), 5)];
        let failures = failing_records(batch, &rules, 0);
        assert_eq!(failures[0].violation, RecordViolation::MissingKey);
        assert!(matches!(
            failures[1].violation,
            RecordViolation::TimestampOutOfRange { .. }
        ));
        assert_eq!(batch_error_code(&failures), ErrorCode::INVALID_TIMESTAMP);
        let message = batch_error_message(&failures);
        assert!(message.starts_with("2 record(s)"), "{message}");
    }

    #[test]
    fn unbounded_windows_saturate_and_accept_every_timestamp() {
        let rules = RecordRules {
            key_required: false,
            timestamps: Some(TimestampBounds::UNBOUNDED),
        };
        assert!(!rules.checks_anything());
        let batch = [record(0, None, i64::MIN), record(1, None, i64::MAX)];
        for now in [i64::MIN, -1, 0, i64::MAX] {
            assert!(failing_records(batch, &rules, now).is_empty());
        }
    }
}
