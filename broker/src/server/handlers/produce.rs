//! Produce (key 0), v3–13 (v13 names topics by id).
//!
//! Contract:
//! - `acks` must be -1, 0 or 1, else every partition gets INVALID_REQUIRED_ACKS (21). The log's
//!   append returns once its flush policy is satisfied (I8), so `acks=1` and `acks=-1` wait
//!   for the same thing on a single node; `acks=0` gets no response (`handlers::handle`).
//! - Each partition's records must be exactly one record batch, core's
//!   [`check_single_batch`] (INVALID_RECORD, 87, otherwise; CORRUPT_MESSAGE, 2, when truncated
//!   or empty); the owning shard appends it,
//!   where core validates it (CRC, structure, size against the topic's `max.message.bytes`:
//!   CORRUPT_MESSAGE / MESSAGE_TOO_LARGE) and then wakes the partition's long-polls (I7).
//! - Internal topics (`__consumer_offsets`) refuse user produce: INVALID_TOPIC_EXCEPTION (17).
//! - Record rules (core's [`record_errors`]): on a compacted topic (`cleanup.policy` with
//!   `compact`) a record without a key is INVALID_RECORD (87); on a CreateTime topic with
//!   `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` set, a record whose
//!   timestamp lies outside `[now - before, now + after]` is INVALID_TIMESTAMP (32). The batch
//!   is refused whole (I27) and, from v8 on, the response names each failing record by batch
//!   index (`record_errors`) with a message, and says why in `error_message` (KIP-467), so the
//!   producer fails those records and retries none of them.
//! - Partitions are appended concurrently (each on its owning shard) and answered in request
//!   order with base offset, log-append time (the stamp on a `message.timestamp.type=
//!   LogAppendTime` topic, else -1) and log start offset.

use std::collections::BTreeMap;
use std::rc::Rc;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::backend::Backend;
use minikafka_core::compaction::policy::CleanupPolicy;
use minikafka_core::compaction::rewrite::batch_records;
use minikafka_core::record::{
    check_single_batch, validate_batch_with, BatchCheck, BatchError, BatchView, ValidateOptions,
};
use minikafka_core::record_errors::{
    batch_error_code, batch_error_message, failing_records, RecordFailure, RecordRules,
    TimestampBounds,
};

use crate::config::BrokerConfig;
use crate::log::cleaner::clean::MAX_DECOMPRESSED_BYTES;
use crate::log::cleaner::codec::KafkaCodecs;
use crate::log::config::TimestampType;

use crate::server::groups::offsets_topic;
use crate::server::shard::ShardState;
use minikafka_core::error_code::ErrorCode;

/// The first partition error in a response, if any.
pub fn first_error(response: &ProduceResponse) -> Option<ErrorCode> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| ErrorCode(p.error_code))
        .find(|code| code.is_error())
}

/// Core's one-batch rule ([`check_single_batch`]) as a Kafka error code: more than one batch
/// is INVALID_RECORD; a truncated, empty or negative-length one is CORRUPT_MESSAGE.
fn single_batch(records: &[u8]) -> Result<(), ErrorCode> {
    match check_single_batch(records) {
        Ok(_) => Ok(()),
        Err(BatchError {
            check: BatchCheck::TrailingBytes(_),
            ..
        }) => Err(ErrorCode::INVALID_RECORD),
        Err(_) => Err(ErrorCode::CORRUPT_MESSAGE),
    }
}

/// Why a partition's records are refused before they reach the log.
struct Refusal {
    code: ErrorCode,
    /// The failing records (KIP-467), when the refusal is about some of the batch's records.
    record_failures: Vec<RecordFailure>,
}

impl From<ErrorCode> for Refusal {
    fn from(code: ErrorCode) -> Self {
        Refusal {
            code,
            record_failures: Vec::new(),
        }
    }
}

/// Applies the topic's record rules (core's [`failing_records`]) to the batch. Compressed
/// batches are decompressed for the check, within the cleaner's bound (I10). A batch that does
/// not validate is left to the log's own checks.
fn check_record_rules(records: &[u8], rules: &RecordRules, now_ms: i64) -> Result<(), Refusal> {
    if !rules.checks_anything() {
        return Ok(());
    }
    let Ok(header) = validate_batch_with(records, ValidateOptions::default()) else {
        return Ok(());
    };
    let view = BatchView {
        start: 0,
        bytes: &records[..header.total_bytes()],
        header,
    };
    let decoded = batch_records(&view, &mut KafkaCodecs, MAX_DECOMPRESSED_BYTES)
        .map_err(|_| ErrorCode::CORRUPT_MESSAGE)?;
    let record_failures = failing_records(decoded.facts(), rules, now_ms);
    if record_failures.is_empty() {
        return Ok(());
    }
    Err(Refusal {
        code: batch_error_code(&record_failures),
        record_failures,
    })
}

/// The record rules of a topic with overrides `config` (see the module's contract).
fn record_rules(config: &BTreeMap<String, String>, broker: &BrokerConfig) -> RecordRules {
    let timestamp_type = config
        .get("message.timestamp.type")
        .and_then(|v| TimestampType::parse(v))
        .unwrap_or(broker.log_message_timestamp_type);
    // The values were checked when set (`check_topic_config`); unset is Kafka's default.
    let bound = |key: &str| {
        config
            .get(key)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(i64::MAX)
    };
    RecordRules {
        key_required: compacted(config, broker.cleaner.default_policy),
        timestamps: (timestamp_type == TimestampType::CreateTime).then(|| TimestampBounds {
            before_max_ms: bound("message.timestamp.before.max.ms"),
            after_max_ms: bound("message.timestamp.after.max.ms"),
        }),
    }
}

/// Whether the topic's `cleanup.policy` (or the broker's `log.cleanup.policy`) compacts.
fn compacted(config: &BTreeMap<String, String>, default: CleanupPolicy) -> bool {
    config
        .get("cleanup.policy")
        .and_then(|v| CleanupPolicy::parse(v).ok())
        .unwrap_or(default)
        .compact
}

fn partition_response(index: i32, refusal: Option<&Refusal>) -> PartitionProduceResponse {
    let mut response = PartitionProduceResponse::default();
    response.index = index;
    response.error_code = refusal.map_or(ErrorCode::NONE, |r| r.code).code();
    response.base_offset = -1;
    if let Some(failures) = refusal.map(|r| &r.record_failures[..]) {
        if !failures.is_empty() {
            // Encoded from v8 on (KIP-467); older versions carry the code alone.
            response.error_message = Some(StrBytes::from_string(batch_error_message(failures)));
            response.record_errors = failures
                .iter()
                .map(|f| {
                    let mut e = BatchIndexAndErrorMessage::default();
                    e.batch_index = f.batch_index;
                    e.batch_index_error_message =
                        Some(StrBytes::from_string(f.violation.message()));
                    e
                })
                .collect();
        }
    }
    response
}

/// Handles the request.
pub async fn handle<B: Backend>(
    state: &Rc<ShardState<B>>,
    request: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    let shared = &state.shared;
    let acks_ok = matches!(request.acks, -1..=1);
    let mut topics = Vec::with_capacity(request.topic_data.len());
    let mut appends = Vec::new();
    for topic_data in request.topic_data {
        let info = if version >= 13 {
            shared.topic_by_id(topic_data.topic_id)
        } else {
            shared.topic(topic_data.name.0.as_str())
        };
        let unknown = if version >= 13 {
            ErrorCode::UNKNOWN_TOPIC_ID
        } else {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        };
        let mut topic = TopicProduceResponse::default();
        if version >= 13 {
            topic.topic_id = topic_data.topic_id;
        } else {
            topic.name = topic_data.name.clone();
        }
        let topic_index = topics.len();
        for partition in topic_data.partition_data {
            let slot = topic.partition_responses.len();
            let index = partition.index;
            let refusal: Option<Refusal> = if !acks_ok {
                Some(ErrorCode::INVALID_REQUIRED_ACKS.into())
            } else {
                match &info {
                    None => Some(unknown.into()),
                    Some(info) if index < 0 || index >= info.partition_count() => {
                        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.into())
                    }
                    // Only the group coordinators append to internal topics (Kafka answers
                    // the same).
                    Some(info) if offsets_topic::is_internal(&info.name) => {
                        Some(ErrorCode::INVALID_TOPIC_EXCEPTION.into())
                    }
                    Some(info) => match partition.records.as_deref().map(|records| {
                        single_batch(records)?;
                        let rules = record_rules(&info.config, &shared.config);
                        check_record_rules(records, &rules, state.backend.wall_clock_ms())
                    }) {
                        None => Some(ErrorCode::CORRUPT_MESSAGE.into()),
                        Some(Err(refusal)) => Some(refusal),
                        Some(Ok(())) => None,
                    },
                }
            };
            topic
                .partition_responses
                .push(partition_response(index, refusal.as_ref()));
            if refusal.is_some() {
                continue;
            }
            if let (Some(info), Some(records)) = (&info, partition.records) {
                let name = info.name.clone();
                appends.push(async move {
                    // The records stay a slice of the request frame: no copy (the log
                    // copies only the batch's header, to patch it).
                    let result = state.append(name, index, records).await;
                    (topic_index, slot, result)
                });
            }
        }
        topics.push(topic);
    }
    for (topic_index, slot, result) in futures::future::join_all(appends).await {
        let entry = &mut topics[topic_index].partition_responses[slot];
        match result {
            Ok(appended) => {
                entry.base_offset = appended.base_offset;
                entry.log_start_offset = appended.log_start_offset;
                entry.log_append_time_ms = appended.log_append_time_ms;
            }
            Err(code) => entry.error_code = code.code(),
        }
    }
    let mut response = ProduceResponse::default();
    response.responses = topics;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::{BatchBuilder, NewRecord};
    use minikafka_core::types::Offset;

    fn batch() -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            value: Some(b"v"),
            timestamp_ms: 1,
            ..NewRecord::default()
        });
        b.build(Offset(0))
    }

    fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_topics_record_rules_follow_its_overrides() {
        let broker = BrokerConfig::default();
        let plain = record_rules(&overrides(&[]), &broker);
        assert!(!plain.key_required);
        assert!(!plain.checks_anything(), "Kafka's defaults bound nothing");
        let compacted = record_rules(&overrides(&[("cleanup.policy", "compact,delete")]), &broker);
        assert!(compacted.key_required);
        let bounded = record_rules(
            &overrides(&[
                ("message.timestamp.before.max.ms", "1000"),
                ("message.timestamp.after.max.ms", "10"),
            ]),
            &broker,
        );
        assert_eq!(
            bounded.timestamps,
            Some(TimestampBounds {
                before_max_ms: 1000,
                after_max_ms: 10
            })
        );
        // A LogAppendTime topic stamps its own time: the producer's timestamps are not checked.
        let stamped = record_rules(
            &overrides(&[
                ("message.timestamp.type", "LogAppendTime"),
                ("message.timestamp.before.max.ms", "1000"),
            ]),
            &broker,
        );
        assert_eq!(stamped.timestamps, None);
    }

    #[test]
    fn a_refused_batch_names_its_failing_records_in_the_response() {
        let mut b = BatchBuilder::new();
        for (i, key) in [Some(b"k".as_slice()), None, Some(b"k"), None]
            .iter()
            .enumerate()
        {
            b.push(&NewRecord {
                key: *key,
                value: Some(b"v"),
                timestamp_ms: i as i64,
                ..NewRecord::default()
            });
        }
        let records = b.build(Offset(0));
        let rules = record_rules(
            &overrides(&[("cleanup.policy", "compact")]),
            &BrokerConfig::default(),
        );
        let refusal = match check_record_rules(&records, &rules, 0) {
            Err(refusal) => refusal,
            Ok(()) => panic!("keyless records on a compacted topic must be refused"),
        };
        let response = partition_response(3, Some(&refusal));
        assert_eq!(response.error_code, ErrorCode::INVALID_RECORD.code());
        let indexes: Vec<i32> = response
            .record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect();
        assert_eq!(indexes, vec![1, 3]);
        assert!(response.error_message.is_some());
        // An error that is not about records carries no record errors.
        let plain = partition_response(3, Some(&ErrorCode::CORRUPT_MESSAGE.into()));
        assert!(plain.record_errors.is_empty() && plain.error_message.is_none());
    }

    #[test]
    fn exactly_one_batch_is_accepted() {
        let one = batch();
        assert_eq!(single_batch(&one), Ok(()));
        let mut two = one.clone();
        two.extend_from_slice(&one);
        assert_eq!(single_batch(&two), Err(ErrorCode::INVALID_RECORD));
        assert_eq!(
            single_batch(&one[..one.len() - 1]),
            Err(ErrorCode::CORRUPT_MESSAGE)
        );
        assert_eq!(single_batch(&one[..5]), Err(ErrorCode::CORRUPT_MESSAGE));
        assert_eq!(single_batch(&[]), Err(ErrorCode::CORRUPT_MESSAGE));
    }
}
