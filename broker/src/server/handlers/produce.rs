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
//! - KIP-890 part 1 (`transaction.partition.verification.enable`, on by default): when the
//!   request names a transactional id, each transactional batch's partition is verified
//!   with the id's coordinator first (a verify-only AddPartitionsToTxn, one per producer id
//!   and epoch, all partitions of the request together): a partition not in the producer's
//!   ongoing transaction is refused INVALID_TXN_STATE and not appended, so a late or zombie
//!   batch cannot start a hanging transaction (I66). A fenced epoch is
//!   INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now (loading, moving, a
//!   transition in flight) NOT_ENOUGH_REPLICAS, which producers retry (as Kafka).
//! - Partitions are appended concurrently (each on its owning shard) and answered in request
//!   order with base offset, log-append time (the stamp on a `message.timestamp.type=
//!   LogAppendTime` topic, else -1) and log start offset.

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{check_single_batch, BatchCheck, BatchError, BatchHeader};
use minikafka_core::record_errors::{batch_error_message, RecordFailure};
use minikafka_core::txn::{AddPartitionsTxn, TopicPartition};

use crate::server::groups::offsets_topic;
use crate::server::shard_context::{ConfigLookup, PartitionOps, TopicCatalogue, TxnVerification};
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

/// A verification answer as the produce API reports it (see the module documentation).
fn verification_code(code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::TRANSACTION_ABORTABLE => ErrorCode::INVALID_TXN_STATE,
        ErrorCode::PRODUCER_FENCED => ErrorCode::INVALID_PRODUCER_EPOCH,
        ErrorCode::CONCURRENT_TRANSACTIONS
        | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        | ErrorCode::COORDINATOR_NOT_AVAILABLE
        | ErrorCode::NOT_COORDINATOR => ErrorCode::NOT_ENOUGH_REPLICAS,
        other => other,
    }
}

/// A partition's batch waiting to be appended: where its answer goes, and what to append.
struct Pending {
    topic_index: usize,
    slot: usize,
    name: String,
    index: i32,
    records: bytes::Bytes,
}

/// Verifies the transactional batches of `pending` with the coordinator of
/// `transactional_id` (see the module documentation): the code of each refused one, by
/// position in `pending`.
async fn verify(
    state: &impl TxnVerification,
    transactional_id: &str,
    pending: &[Pending],
) -> Vec<(usize, ErrorCode)> {
    // (producer id, epoch) → positions in `pending`.
    let mut producers: Vec<((i64, i16), Vec<usize>)> = Vec::new();
    for (at, p) in pending.iter().enumerate() {
        let Ok(header) = BatchHeader::parse(&p.records) else {
            continue;
        };
        if !header.is_transactional() || header.is_control() {
            continue;
        }
        let producer = (header.producer_id, header.producer_epoch);
        match producers.iter_mut().find(|(k, _)| *k == producer) {
            Some((_, positions)) => positions.push(at),
            None => producers.push((producer, vec![at])),
        }
    }
    if producers.is_empty() {
        return Vec::new();
    }
    let transactions = producers
        .iter()
        .map(
            |((producer_id, producer_epoch), positions)| AddPartitionsTxn {
                transactional_id: transactional_id.to_string(),
                producer_id: *producer_id,
                producer_epoch: *producer_epoch,
                verify_only: true,
                partitions: positions
                    .iter()
                    .map(|&at| TopicPartition::new(pending[at].name.clone(), pending[at].index))
                    .collect(),
            },
        )
        .collect();
    let answers = state.add_partitions(transactions).await;
    let mut refused = Vec::new();
    for ((_, positions), (_, codes)) in producers.iter().zip(answers) {
        for (&at, (_, code)) in positions.iter().zip(codes) {
            if code.is_error() {
                refused.push((at, verification_code(code)));
            }
        }
    }
    refused
}

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps + ConfigLookup + TxnVerification),
    request: ProduceRequest,
    version: i16,
) -> ProduceResponse {
    let acks_ok = matches!(request.acks, -1..=1);
    let mut topics = Vec::with_capacity(request.topic_data.len());
    let mut pending = Vec::new();
    for topic_data in request.topic_data {
        let info = if version >= 13 {
            state.topic_by_id(topic_data.topic_id)
        } else {
            state.topic(topic_data.name.0.as_str())
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
                pending.push(Pending {
                    topic_index,
                    slot,
                    name: info.name.clone(),
                    index,
                    records,
                });
            }
        }
        topics.push(topic);
    }
    let transactional_id = request
        .transactional_id
        .as_ref()
        .map(|id| id.0.as_str())
        .filter(|id| !id.is_empty());
    if let Some(id) =
        transactional_id.filter(|_| state.settings().transactions.partition_verification)
    {
        let refused = verify(state, id, &pending).await;
        let mut keep = vec![true; pending.len()];
        for (at, code) in refused {
            let p = &pending[at];
            topics[p.topic_index].partition_responses[p.slot].error_code = code.code();
            keep[at] = false;
        }
        let mut keep = keep.into_iter();
        pending.retain(|_| keep.next().unwrap_or(true));
    }
    let appends = pending.into_iter().map(|p| async move {
        // The records stay a slice of the request frame: no copy (the log copies only the
        // batch's header, to patch it).
        let result = state.append(p.name, p.index, p.records).await;
        (p.topic_index, p.slot, result)
    });
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
