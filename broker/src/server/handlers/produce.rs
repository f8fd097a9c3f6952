//! Produce (key 0), v3–13 (v13 names topics by id).
//!
//! Contract:
//! - `acks` must be -1, 0 or 1, else every partition gets INVALID_REQUIRED_ACKS (21). The log's
//!   append returns once its flush policy is satisfied (I8), so `acks=1` and `acks=-1` wait
//!   for the same thing on a single node; `acks=0` gets no response (`handlers::handle`).
//! - Each partition's records must be exactly one record batch, core's
//!   [`check_single_batch`] (INVALID_RECORD, 87, otherwise; CORRUPT_MESSAGE, 2, when truncated
//!   or empty); the owning shard appends it, where the log validates it once
//!   (`log::produced_batch`: CRC, structure, size against the topic's `max.message.bytes`:
//!   CORRUPT_MESSAGE / MESSAGE_TOO_LARGE; on a compacted topic a record without a key is
//!   INVALID_RECORD, 87, as in Kafka) and then wakes the partition's long-polls (I7). This
//!   handler validates nothing itself: each batch is validated once on the produce path.
//! - Internal topics (`__consumer_offsets`) refuse user produce: INVALID_TOPIC_EXCEPTION (17).
//! - Record rules (applied in that one validation, core's `record_errors`): on a compacted
//!   topic a record without a key is INVALID_RECORD (87); on a CreateTime topic a record whose
//!   timestamp lies outside `[now - message.timestamp.before.max.ms, now +
//!   message.timestamp.after.max.ms]` is INVALID_TIMESTAMP (32). The batch is refused whole
//!   (I61) and, from v8 on, the response names each failing record by batch index
//!   (`record_errors`) with a message, and says why in `error_message` (KIP-467), so the
//!   producer fails those records and retries none of them.
//! - Partitions are appended concurrently (each on its owning shard) and answered in request
//!   order with base offset, log-append time (the stamp on a `message.timestamp.type=
//!   LogAppendTime` topic, else -1) and log start offset.

use std::rc::Rc;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::backend::Backend;
use minikafka_core::record::{check_single_batch, BatchCheck, BatchError};
use minikafka_core::record_errors::{batch_error_message, RecordFailure};

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

fn partition_response(index: i32, error_code: ErrorCode) -> PartitionProduceResponse {
    let mut response = PartitionProduceResponse::default();
    response.index = index;
    response.error_code = error_code.code();
    response.base_offset = -1;
    response
}

/// Names each failing record of a refused batch (KIP-467): its batch index with a message, and
/// the partition's `error_message`.
fn set_record_errors(entry: &mut PartitionProduceResponse, failures: &[RecordFailure]) {
    entry.error_message = Some(StrBytes::from_string(batch_error_message(failures)));
    entry.record_errors = failures
        .iter()
        .map(|failure| {
            let mut error = BatchIndexAndErrorMessage::default();
            error.batch_index = failure.batch_index;
            error.batch_index_error_message =
                Some(StrBytes::from_string(failure.violation.message()));
            error
        })
        .collect();
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
            let code = if !acks_ok {
                Some(ErrorCode::INVALID_REQUIRED_ACKS)
            } else {
                match &info {
                    None => Some(unknown),
                    Some(info) if index < 0 || index >= info.partition_count() => {
                        Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                    }
                    // Only the group coordinators append to internal topics (Kafka answers
                    // the same).
                    Some(info) if offsets_topic::is_internal(&info.name) => {
                        Some(ErrorCode::INVALID_TOPIC_EXCEPTION)
                    }
                    // The framing rule only: the log validates the batch, once.
                    Some(_) => match partition.records.as_deref().map(single_batch) {
                        None => Some(ErrorCode::CORRUPT_MESSAGE),
                        Some(Err(code)) => Some(code),
                        Some(Ok(())) => None,
                    },
                }
            };
            topic
                .partition_responses
                .push(partition_response(index, code.unwrap_or(ErrorCode::NONE)));
            if code.is_some() {
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
            Err(refusal) => {
                entry.error_code = refusal.code.code();
                // KIP-467's fields exist from v8 on; older versions carry the code alone.
                if version >= 8 && !refusal.record_failures.is_empty() {
                    set_record_errors(entry, &refusal.record_failures);
                }
            }
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
