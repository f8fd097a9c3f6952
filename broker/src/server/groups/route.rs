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
//!
//! [`CoordinatorHost`]: super::host::CoordinatorHost

use std::rc::Rc;

use minikafka_core::backend::Backend;
use minikafka_core::group::{group_partition, GroupRequest, GroupResponse};

use minikafka_core::error_code::ErrorCode;

use super::offsets_topic::OFFSETS_TOPIC;
use crate::server::shard::ShardState;

/// Partition count of `__consumer_offsets`, if it exists.
pub fn offsets_partition_count<B: Backend>(state: &ShardState<B>) -> Option<i32> {
    state
        .shared
        .topic(OFFSETS_TOPIC)
        .map(|t| t.partition_count())
        .filter(|&n| n > 0)
}

/// The offsets partition whose coordinator owns `group_id`.
pub fn coordinator_partition<B: Backend>(state: &ShardState<B>, group_id: &str) -> Option<i32> {
    offsets_partition_count(state).map(|n| group_partition(group_id, n))
}

/// Runs `request` on coordinator `partition` (see the module documentation).
pub async fn submit<B: Backend>(
    state: &Rc<ShardState<B>>,
    partition: i32,
    request: GroupRequest,
) -> Result<GroupResponse, ErrorCode> {
    state.group_request(partition, request).await
}

/// Runs `request` on the coordinator of `group_id`.
pub async fn submit_for_group<B: Backend>(
    state: &Rc<ShardState<B>>,
    group_id: &str,
    request: GroupRequest,
) -> Result<GroupResponse, ErrorCode> {
    match coordinator_partition(state, group_id) {
        Some(partition) => submit(state, partition, request).await,
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}
