//! Routing group requests to their coordinator: group id → `__consumer_offsets` partition
//! (Kafka's `String.hashCode` placement, `core::group::group_partition`) → owning shard.
//!
//! Contract:
//! - [`coordinator_partition`] uses the topic's actual partition count (not the setting: an
//!   existing topic keeps its count).
//! - [`submit`] runs the request on the owning shard's [`CoordinatorHost`] (the
//!   `LocalPartitions::group` operation addressed to the offsets partition: a direct call when
//!   this shard owns it, else through the owner's inbox, like every partition operation) and
//!   returns its
//!   answer. `Err(code)`: the coordinator could not take it: NOT_COORDINATOR (16) while
//!   shutting down, COORDINATOR_NOT_AVAILABLE (15) if the offsets topic or the host is
//!   missing. The caller turns the code into the API's error response.
//! - Requests about many groups are split by partition by the handlers, and each part
//!   submitted on its own, in parallel.
//! - [`complete_txn_offsets`] is the transaction coordinator's way in (what Kafka's
//!   WriteTxnMarkers to an offsets partition does): from any shard, it ends a producer's
//!   transactional offsets in the group's coordinator and returns once the marker is
//!   durable (I73, I74).
//!
//! [`CoordinatorHost`]: super::host::CoordinatorHost

use minikafka_core::group::{
    group_partition, CompleteTxnRequest, GroupRequest, GroupResponse, TxnResult,
};

use minikafka_core::error_code::ErrorCode;

use super::offsets_topic::OFFSETS_TOPIC;
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// Partition count of `__consumer_offsets`, if it exists.
pub fn offsets_partition_count(state: &impl TopicCatalogue) -> Option<i32> {
    state
        .topic(OFFSETS_TOPIC)
        .map(|t| t.partition_count())
        .filter(|&n| n > 0)
}

/// The offsets partition whose coordinator owns `group_id`.
pub fn coordinator_partition(state: &impl TopicCatalogue, group_id: &str) -> Option<i32> {
    offsets_partition_count(state).map(|n| group_partition(group_id, n))
}

/// Runs `request` on coordinator `partition` (see the module documentation).
pub async fn submit(
    state: &impl GroupOps,
    partition: i32,
    request: GroupRequest,
) -> Result<GroupResponse, ErrorCode> {
    state.group_request(partition, request).await
}

/// Runs `request` on the coordinator of `group_id`.
pub async fn submit_for_group(
    state: &(impl TopicCatalogue + GroupOps),
    group_id: &str,
    request: GroupRequest,
) -> Result<GroupResponse, ErrorCode> {
    match coordinator_partition(state, group_id) {
        Some(partition) => submit(state, partition, request).await,
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

/// Ends producer `producer_id`'s transaction in the coordinator of `group_id` (callable from
/// any shard; the group's coordinator lives on one): a COMMIT or ABORT marker with
/// `producer_epoch` (and the transaction coordinator's `coordinator_epoch`, I175) is appended
/// to the group's `__consumer_offsets` partition, and once it is
/// durable the producer's pending TxnOffsetCommit offsets there become visible (commit) or
/// vanish (abort) — in every group of that partition, as Kafka's marker does (I73, I74).
/// `Ok(())` once durable, or at once when the producer has nothing pending there (so a retry
/// is harmless). `Err(code)`: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or the failed
/// append's code; retry later, the offsets stay pending.
pub async fn complete_txn_offsets(
    state: &(impl TopicCatalogue + GroupOps),
    group_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    result: TxnResult,
) -> Result<(), ErrorCode> {
    match coordinator_partition(state, group_id) {
        Some(partition) => {
            let (id, epoch) = (producer_id, producer_epoch);
            complete_txn_offsets_in_partition(
                state,
                partition,
                id,
                epoch,
                coordinator_epoch,
                result,
            )
            .await
        }
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}

/// [`complete_txn_offsets`] addressed by `__consumer_offsets` partition, for a marker that
/// names partitions (WriteTxnMarkers, the transaction coordinator's marker writer): a marker
/// for an offsets partition must come here rather than be appended to it directly, so the
/// coordinator stays its only writer (I1) and applies the marker live as replay will (I21,
/// I74).
pub async fn complete_txn_offsets_in_partition(
    state: &impl GroupOps,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    result: TxnResult,
) -> Result<(), ErrorCode> {
    let request = GroupRequest::CompleteTxn(CompleteTxnRequest {
        // Only routes a request; the marker completes the producer in every group here.
        group_id: String::new(),
        producer_id,
        producer_epoch,
        coordinator_epoch,
        result,
    });
    match submit(state, partition, request).await? {
        GroupResponse::CompleteTxn(r) if r.error_code.is_error() => Err(r.error_code),
        GroupResponse::CompleteTxn(_) => Ok(()),
        _ => Err(ErrorCode::UNKNOWN_SERVER_ERROR),
    }
}
