//! Writing a transaction's COMMIT/ABORT markers to its partitions: what the coordinator's
//! `poll_marker` asks for, done on the shards that own the partitions.
//!
//! Contract:
//! - [`write_all`] writes one marker per partition of a [`MarkerWrite`], all partitions
//!   concurrently, each on its owning shard, and returns the partitions whose write failed
//!   (the coordinator retries those after its backoff; only once none is left does it append
//!   the Complete record, core's I32). A partition that no longer exists (its topic was
//!   deleted) counts as written, as in Kafka.
//! - A `__consumer_offsets` partition (added by AddOffsetsToTxn) gets its marker through the
//!   group coordinator that owns it, which makes the producer's pending transactional
//!   offsets visible (COMMIT) or drops them (ABORT).
//! - Every marker carries the Prepare record's producer id, epoch and result (core's I36) and
//!   the coordinator epoch (I65), and is appended under the partition's flush policy, so a
//!   marker reported written is durable as the policy defines (I64).

use std::rc::Rc;

use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{
    CompleteTxnRequest, GroupRequest, GroupResponse, TxnResult as GroupTxnResult,
};
use minikafka_core::record::{compute_crc, BatchBuilder, NewRecord};
use minikafka_core::txn::{MarkerWrite, TopicPartition, TxnResult, CONSUMER_OFFSETS_TOPIC};
use minikafka_core::types::Offset;

use crate::server::shard::ShardState;

/// Where a record batch's attributes are (`base_offset`, length, leader epoch, magic, CRC
/// come first).
const ATTRIBUTES_AT: usize = 21;
/// Where a record batch's CRC is.
const CRC_AT: usize = 17;
/// Attribute bits of a transactional control batch.
const CONTROL_TRANSACTIONAL: i16 = 0x20 | 0x10;

/// A control batch holding one COMMIT or ABORT marker (Kafka's `EndTransactionMarker`: key
/// version 0 and type 0 = ABORT, 1 = COMMIT; value version 0 and the coordinator epoch).
pub fn control_batch(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    result: TxnResult,
    now_ms: i64,
) -> Vec<u8> {
    let kind: i16 = match result {
        TxnResult::Abort => 0,
        TxnResult::Commit => 1,
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new();
    builder.producer_id = producer_id;
    builder.producer_epoch = producer_epoch;
    builder.base_sequence = -1;
    builder.push(&NewRecord {
        key: Some(&key),
        value: Some(&value),
        headers: Vec::new(),
        timestamp_ms: now_ms,
    });
    let mut batch = builder.build(Offset(0));
    batch[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&CONTROL_TRANSACTIONAL.to_be_bytes());
    let crc = compute_crc(&batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Writes every marker of `write` (see the module documentation); the partitions to retry.
pub async fn write_all<B: Backend>(
    state: &Rc<ShardState<B>>,
    write: MarkerWrite,
) -> Vec<TopicPartition> {
    let write = Rc::new(write);
    let each = write.partitions.iter().map(|tp| {
        let write = Rc::clone(&write);
        async move {
            let outcome = if tp.topic == CONSUMER_OFFSETS_TOPIC {
                group_marker(state, tp, &write).await
            } else {
                partition_marker(state, tp, &write).await
            };
            match outcome {
                Ok(()) => None,
                // The topic or partition is gone: nothing is left to mark.
                Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) | Err(ErrorCode::UNKNOWN_TOPIC_ID) => {
                    None
                }
                Err(code) => {
                    tracing::warn!(
                        topic = tp.topic,
                        partition = tp.partition,
                        %code,
                        "transaction marker not written"
                    );
                    Some(tp.clone())
                }
            }
        }
    });
    futures::future::join_all(each)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One marker on a data partition, appended by its owner under the flush policy.
async fn partition_marker<B: Backend>(
    state: &Rc<ShardState<B>>,
    tp: &TopicPartition,
    write: &MarkerWrite,
) -> Result<(), ErrorCode> {
    if state.shared.topic(&tp.topic).is_none() {
        return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    }
    let batch = control_batch(
        write.producer_id,
        write.producer_epoch,
        write.coordinator_epoch,
        write.result,
        state.backend.wall_clock_ms(),
    );
    state
        .append(tp.topic.clone(), tp.partition, batch.into())
        .await
        .map(|_| ())
        .map_err(|refusal| refusal.code)
}

/// One marker on a `__consumer_offsets` partition: the group coordinator owning it appends
/// the marker (its partition's only writer) and the producer's pending TxnOffsetCommit
/// offsets there become visible or vanish, in every group of the partition (s3-txn-offsets'
/// `CompleteTxn`; the group id only routes, and the marker write names the partition, so
/// it is sent to the partition directly).
async fn group_marker<B: Backend>(
    state: &Rc<ShardState<B>>,
    tp: &TopicPartition,
    write: &MarkerWrite,
) -> Result<(), ErrorCode> {
    let request = GroupRequest::CompleteTxn(CompleteTxnRequest {
        group_id: String::new(),
        producer_id: write.producer_id,
        producer_epoch: write.producer_epoch,
        result: match write.result {
            TxnResult::Commit => GroupTxnResult::Commit,
            TxnResult::Abort => GroupTxnResult::Abort,
        },
    });
    match state.group_request(tp.partition, request).await? {
        GroupResponse::CompleteTxn(r) if r.error_code.is_error() => Err(r.error_code),
        GroupResponse::CompleteTxn(_) => Ok(()),
        _ => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::BatchIter;

    #[test]
    fn control_batch_is_a_valid_transactional_control_batch() {
        let batch = control_batch(7, 3, 0, TxnResult::Commit, 1_000);
        let mut batches = BatchIter::new(&batch);
        let view = batches.next().expect("one batch").expect("valid crc");
        assert!(batches.next().is_none());
        assert!(view.header.is_control() && view.header.is_transactional());
        assert_eq!(view.header.producer_id, 7);
        assert_eq!(view.header.producer_epoch, 3);
        let record = view.records().next().expect("one record").expect("record");
        assert_eq!(record.key, Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(record.value, Some(&[0u8, 0, 0, 0, 0, 0][..]));
        let abort = control_batch(7, 3, 5, TxnResult::Abort, 1_000);
        let view = BatchIter::new(&abort)
            .next()
            .expect("batch")
            .expect("valid");
        let record = view.records().next().expect("record").expect("record");
        assert_eq!(record.key, Some(&[0u8, 0, 0, 0][..]));
        assert_eq!(record.value, Some(&[0u8, 0, 0, 0, 0, 5][..]));
    }
}
