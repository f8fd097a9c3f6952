//! Writing a transaction's COMMIT/ABORT markers to its partitions: what the coordinator's
//! `poll_marker` asks for, done on the shards that own the partitions.
//!
//! Contract:
//! - [`write_all`] writes one marker per partition of a [`MarkerWrite`], all partitions
//!   concurrently, each on its owning shard, and returns the partitions whose write failed
//!   (the coordinator retries those after its backoff; only once none is left does it append
//!   the Complete record, core's I32). A partition that no longer exists (its topic was
//!   deleted) counts as written, as in Kafka, and so does one that refuses the marker as
//!   obsolete (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED). A partition its topic
//!   still has but whose owner has not opened it yet (startup) is retried, never counted as
//!   written: that would commit the transaction without its marker there.
//! - A `__consumer_offsets` partition (added by AddOffsetsToTxn) gets its marker through the
//!   group coordinator that owns it, which makes the producer's pending transactional
//!   offsets visible (COMMIT) or drops them (ABORT).
//! - Every marker carries the Prepare record's producer id, epoch and result (core's I36) and
//!   the coordinator epoch (I65), and is appended under the partition's flush policy, so a
//!   marker reported written is durable as the policy defines (I64).

use std::rc::Rc;

use minikafka_core::backend::Backend;
use minikafka_core::control_batch::{ControlType, TxnMarker};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::TxnResult as GroupTxnResult;
use minikafka_core::txn::{MarkerWrite, TopicPartition, TxnResult, CONSUMER_OFFSETS_TOPIC};

use crate::server::groups::route::complete_txn_offsets_in_partition;
use crate::server::shard::ShardState;

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
                // The partition has seen a newer epoch of the producer or a newer
                // coordinator: this marker is obsolete there and retrying cannot change
                // that (Kafka's coordinator drops it too).
                Err(code @ ErrorCode::INVALID_PRODUCER_EPOCH)
                | Err(code @ ErrorCode::TRANSACTION_COORDINATOR_FENCED) => {
                    tracing::warn!(
                        topic = tp.topic,
                        partition = tp.partition,
                        %code,
                        "transaction marker obsolete; not retried"
                    );
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
    let Some(topic) = state.shared.topic(&tp.topic) else {
        return Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
    };
    let marker = TxnMarker {
        producer_id: write.producer_id,
        producer_epoch: write.producer_epoch,
        coordinator_epoch: write.coordinator_epoch,
        control_type: match write.result {
            TxnResult::Commit => ControlType::Commit,
            TxnResult::Abort => ControlType::Abort,
        },
    };
    // The owner appends it through the log's marker path (flush policy).
    match state
        .write_txn_marker(tp.topic.clone(), tp.partition, marker)
        .await
    {
        Ok(_) => Ok(()),
        // The topic has the partition but its owner has not opened it (yet): at startup a
        // coordinator re-writes the markers of prepared transactions as soon as its own shard
        // is open, possibly before the shard owning the partition is. Not gone: retried
        // (the simulator's seed 18 of `sim/tests/txn_seeds.rs` lost a commit's marker this way
        // when it counted as written). NOT_ENOUGH_REPLICAS: "cannot write it now", as the
        // produce path answers it; any code but the two "gone" ones takes the retry path.
        Err(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
            if (0..topic.partition_count()).contains(&tp.partition) =>
        {
            Err(ErrorCode::NOT_ENOUGH_REPLICAS)
        }
        Err(code) => Err(code),
    }
}

/// One marker on a `__consumer_offsets` partition: the group coordinator owning it appends
/// the marker (its partition's only writer) and the producer's pending TxnOffsetCommit
/// offsets there become visible or vanish, in every group of the partition (addressed by
/// partition, since the marker write names partitions, not groups).
async fn group_marker<B: Backend>(
    state: &Rc<ShardState<B>>,
    tp: &TopicPartition,
    write: &MarkerWrite,
) -> Result<(), ErrorCode> {
    let result = match write.result {
        TxnResult::Commit => GroupTxnResult::Commit,
        TxnResult::Abort => GroupTxnResult::Abort,
    };
    complete_txn_offsets_in_partition(
        state,
        tp.partition,
        write.producer_id,
        write.producer_epoch,
        write.coordinator_epoch,
        result,
    )
    .await
}
