//! Routing transaction requests to their coordinator: transactional id →
//! `__transaction_state` partition (Kafka's `String.hashCode` placement,
//! `core::txn::transaction_partition`) → owning shard.
//!
//! Contract:
//! - [`coordinator_partition`] uses the topic's actual partition count (an existing topic
//!   keeps its count, I62).
//! - [`submit`] runs the request on the owning shard's [`TxnHost`] through
//!   `shard_context::TxnOps` (the `LocalPartitions::txn` operation addressed to the state
//!   partition: a direct call when this shard owns it, else through the owner's inbox); the
//!   routing needs only that and the topic catalogue, not the shard (I150). `Err(code)`: the coordinator could not take it:
//!   NOT_COORDINATOR (16) while shutting down, COORDINATOR_NOT_AVAILABLE (15) when the
//!   topic or the host is missing. The handler turns the code into the API's answer.
//! - Requests about many ids are split by partition by the handlers, each part submitted on
//!   its own, in parallel, and the answers put back in request order.
//!
//! [`TxnHost`]: super::host::TxnHost

use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{transaction_partition, TxnRequest, TxnResponse};

use super::state_topic::TRANSACTION_STATE_TOPIC;
use crate::server::shard_context::{TopicCatalogue, TxnOps};

/// Partition count of `__transaction_state`, if it exists.
pub fn state_partition_count(state: &impl TopicCatalogue) -> Option<i32> {
    state
        .topic(TRANSACTION_STATE_TOPIC)
        .map(|t| t.partition_count())
        .filter(|&n| n > 0)
}

/// The state partition whose coordinator owns `transactional_id`.
pub fn coordinator_partition(state: &impl TopicCatalogue, transactional_id: &str) -> Option<i32> {
    state_partition_count(state).map(|n| transaction_partition(transactional_id, n))
}

/// Runs `request` on coordinator `partition` (see the module documentation).
pub async fn submit(
    state: &impl TxnOps,
    partition: i32,
    request: TxnRequest,
) -> Result<TxnResponse, ErrorCode> {
    state.txn_request(partition, request).await
}

/// Runs `request` on the coordinator of `transactional_id`.
pub async fn submit_for_id(
    state: &(impl TopicCatalogue + TxnOps),
    transactional_id: &str,
    request: TxnRequest,
) -> Result<TxnResponse, ErrorCode> {
    match coordinator_partition(state, transactional_id) {
        Some(partition) => submit(state, partition, request).await,
        None => Err(ErrorCode::COORDINATOR_NOT_AVAILABLE),
    }
}
