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
//! 2. [`RecordRules::schema_ids`] (`confluent.key.schema.validation` /
//!    `confluent.value.schema.validation`, I124): a non-null key or value that does not start
//!    with the Confluent wire format's magic byte 0 and a 4-byte big-endian schema id the
//!    registry knows is INVALID_RECORD. A null key or value passes (a tombstone carries no
//!    schema, and the serializers write `null` for `None`, unframed).
//! 3. [`RecordRules::timestamps`] (a CreateTime topic with `message.timestamp.before.max.ms` or
//!    `message.timestamp.after.max.ms` set): a record whose timestamp lies before
//!    `now - before` or after `now + after` is INVALID_TIMESTAMP (32).
//!
//! The batch's error code ([`batch_error_code`]) is INVALID_TIMESTAMP when any record breaks
//! rule 3, else INVALID_RECORD, as Kafka answers. Which schema ids exist is the caller's
//! question, asked through [`failing_records`]'s `schema_id_known` (the broker answers it from
//! the registry's id set, without parsing anything per produce).

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
    /// Which parts of a record must carry a known schema id.
    pub schema_ids: SchemaIdRule,
}

/// Which parts of each record must carry a schema id the registry knows (I124): Confluent's
/// topic settings `confluent.key.schema.validation` and `confluent.value.schema.validation`,
/// both off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchemaIdRule {
    /// The key must be framed with a known id.
    pub key: bool,
    /// The value must be framed with a known id.
    pub value: bool,
}

impl SchemaIdRule {
    /// Whether either part is checked.
    pub fn checks_anything(&self) -> bool {
        self.key || self.value
    }
}

/// The Confluent wire format's first byte.
pub const SCHEMA_MAGIC_BYTE: u8 = 0;

/// Which part of a record a schema-id violation is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordPart {
    /// The key.
    Key,
    /// The value.
    Value,
}

impl RecordPart {
    fn name(self) -> &'static str {
        match self {
            RecordPart::Key => "key",
            RecordPart::Value => "value",
        }
    }
}

/// What is wrong with a part's schema id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaIdProblem {
    /// Fewer than 5 bytes, or the first is not the magic byte 0.
    NotFramed,
    /// Framed, with an id the registry does not know.
    Unknown(i32),
}

/// The schema id `payload` is framed with: `Err(NotFramed)` when it does not start with the
/// magic byte and 4 bytes.
pub fn framed_schema_id(payload: &[u8]) -> Result<i32, SchemaIdProblem> {
    match payload {
        [SCHEMA_MAGIC_BYTE, a, b, c, d, ..] => Ok(i32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(SchemaIdProblem::NotFramed),
    }
}

/// The problem with `payload`'s schema id, `None` when it passes (null passes: rule 2).
fn schema_id_problem(
    payload: Option<&[u8]>,
    schema_id_known: &dyn Fn(i32) -> bool,
) -> Option<SchemaIdProblem> {
    let payload = payload?;
    match framed_schema_id(payload) {
        Ok(id) if schema_id_known(id) => None,
        Ok(id) => Some(SchemaIdProblem::Unknown(id)),
        Err(problem) => Some(problem),
    }
}

impl RecordRules {
    /// Whether any rule can fail a record: when not, the caller need not decode the batch.
    pub fn checks_anything(&self) -> bool {
        self.key_required
            || self.schema_ids.checks_anything()
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
    /// The key or value lacks a known schema id (rule 2).
    SchemaId {
        /// The key or the value.
        part: RecordPart,
        /// What is wrong.
        problem: SchemaIdProblem,
    },
    /// The timestamp is outside `[lowest_ms, highest_ms]` (rule 3).
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
            RecordViolation::MissingKey | RecordViolation::SchemaId { .. } => {
                ErrorCode::INVALID_RECORD
            }
            RecordViolation::TimestampOutOfRange { .. } => ErrorCode::INVALID_TIMESTAMP,
        }
    }

    /// The message the Produce response carries for this record.
    pub fn message(&self) -> String {
        match self {
            RecordViolation::MissingKey => {
                "a compacted topic refuses a record without a key".to_string()
            }
            RecordViolation::SchemaId { part, problem } => match problem {
                SchemaIdProblem::NotFramed => format!(
                    "the {} does not start with a schema id (magic byte 0 and a 4-byte id), \
                     which confluent.{}.schema.validation requires",
                    part.name(),
                    part.name()
                ),
                SchemaIdProblem::Unknown(id) => format!(
                    "the {}'s schema id {id} is not in the schema registry \
                     (confluent.{}.schema.validation)",
                    part.name(),
                    part.name()
                ),
            },
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
/// module's contract); `schema_id_known` says whether the registry has an id (asked only when
/// `rules.schema_ids` checks something). The list is never longer than the batch.
pub fn failing_records<'a>(
    records: impl IntoIterator<Item = RecordFacts<'a>>,
    rules: &RecordRules,
    now_ms: i64,
    schema_id_known: &dyn Fn(i32) -> bool,
) -> Vec<RecordFailure> {
    let window = rules.timestamps.map(|bounds| bounds.window_at(now_ms));
    let mut failures = Vec::new();
    for (index, record) in records.into_iter().enumerate() {
        let schema_id = |on: bool, part: RecordPart, payload: Option<&[u8]>| {
            on.then(|| schema_id_problem(payload, schema_id_known))
                .flatten()
                .map(|problem| RecordViolation::SchemaId { part, problem })
        };
        let violation = if rules.key_required && record.key.is_none() {
            Some(RecordViolation::MissingKey)
        } else if let Some(v) = schema_id(rules.schema_ids.key, RecordPart::Key, record.key)
            .or_else(|| schema_id(rules.schema_ids.value, RecordPart::Value, record.value))
        {
            Some(v)
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
            value: Some(b"v"),
            timestamp_ms,
        }
    }

    fn none_known(_: i32) -> bool {
        false
    }

    const KEYED: RecordRules = RecordRules {
        key_required: true,
        timestamps: None,
        schema_ids: SchemaIdRule {
            key: false,
            value: false,
        },
    };

    #[test]
    fn keyless_records_fail_on_a_compacted_topic_and_only_they() {
        let batch: Vec<_> = (0..10)
            .map(|i| record(i, (i % 3 != 0).then_some(b"k".as_slice()), 0))
            .collect();
        let failures = failing_records(batch.iter().copied(), &KEYED, 0, &none_known);
        let indexes: Vec<i32> = failures.iter().map(|f| f.batch_index).collect();
        assert_eq!(indexes, vec![0, 3, 6, 9]);
        assert!(failures
            .iter()
            .all(|f| f.violation == RecordViolation::MissingKey));
        assert_eq!(batch_error_code(&failures), ErrorCode::INVALID_RECORD);
        let no_rule = RecordRules {
            key_required: false,
            timestamps: None,
            schema_ids: SchemaIdRule::default(),
        };
        assert!(failing_records(batch.iter().copied(), &no_rule, 0, &none_known).is_empty());
        assert!(!no_rule.checks_anything());
    }

    #[test]
    fn timestamps_outside_the_window_fail_with_invalid_timestamp() {
        let rules = RecordRules {
            key_required: false,
            schema_ids: SchemaIdRule::default(),
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
        let failures = failing_records(batch, &rules, now, &none_known);
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
            schema_ids: SchemaIdRule::default(),
            timestamps: Some(TimestampBounds {
                before_max_ms: 0,
                after_max_ms: 0,
            }),
        };
        let batch = [record(0, None, 5), record(1, Some(b"k"), 5)];
        let failures = failing_records(batch, &rules, 0, &none_known);
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
            schema_ids: SchemaIdRule::default(),
        };
        assert!(!rules.checks_anything());
        let batch = [record(0, None, i64::MIN), record(1, None, i64::MAX)];
        for now in [i64::MIN, -1, 0, i64::MAX] {
            assert!(failing_records(batch, &rules, now, &none_known).is_empty());
        }
    }

    fn framed(id: i32, body: &[u8]) -> Vec<u8> {
        let mut out = vec![SCHEMA_MAGIC_BYTE];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    /// I124: with value validation on, only a value framed with a known id (or null) passes;
    /// the key is checked only when its own setting is on.
    #[test]
    fn schema_ids_must_be_framed_and_known() {
        let known = |id: i32| id == 7;
        let rules = RecordRules {
            key_required: false,
            timestamps: None,
            schema_ids: SchemaIdRule {
                key: false,
                value: true,
            },
        };
        assert!(rules.checks_anything());
        let good = framed(7, b"avro");
        let just_id = framed(7, b"");
        let unknown = framed(8, b"avro");
        let no_magic = {
            let mut v = framed(7, b"avro");
            v[0] = 1;
            v
        };
        let values: [Option<&[u8]>; 6] = [
            Some(&good),
            Some(&just_id),
            None,
            Some(&unknown),
            Some(&no_magic),
            Some(&[0, 0, 0, 7]),
        ];
        let batch: Vec<RecordFacts<'_>> = values
            .iter()
            .enumerate()
            .map(|(i, value)| RecordFacts {
                offset: Offset(i as i64),
                key: Some(b"not framed"),
                is_tombstone: value.is_none(),
                value: *value,
                timestamp_ms: 0,
            })
            .collect();
        let failures = failing_records(batch.iter().copied(), &rules, 0, &known);
        let got: Vec<(i32, RecordViolation)> = failures
            .iter()
            .map(|f| (f.batch_index, f.violation))
            .collect();
        let value = |problem| RecordViolation::SchemaId {
            part: RecordPart::Value,
            problem,
        };
        assert_eq!(
            got,
            vec![
                (3, value(SchemaIdProblem::Unknown(8))),
                (4, value(SchemaIdProblem::NotFramed)),
                (5, value(SchemaIdProblem::NotFramed)),
            ]
        );
        assert_eq!(batch_error_code(&failures), ErrorCode::INVALID_RECORD);
        assert!(failures[0].violation.message().contains("schema id 8"));
        // The key's setting on: the unframed key fails every record, reported before the value.
        let both = RecordRules {
            schema_ids: SchemaIdRule {
                key: true,
                value: true,
            },
            ..rules
        };
        let failures = failing_records(batch.iter().copied(), &both, 0, &known);
        assert_eq!(failures.len(), batch.len());
        assert!(failures.iter().all(|f| matches!(
            f.violation,
            RecordViolation::SchemaId {
                part: RecordPart::Key,
                problem: SchemaIdProblem::NotFramed
            }
        )));
        assert_eq!(framed_schema_id(&framed(-1, b"")), Ok(-1));
    }
}
