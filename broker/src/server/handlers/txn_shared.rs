//! What the transaction handlers share: running a request on the coordinator of a
//! transactional id, and the one version rule of their error codes.
//!
//! Contract:
//! - [`run_for_id`] routes to the coordinator owning the id (`txns::route`) and returns its
//!   answer, or the routing error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) for the
//!   handler to put into its API's shape.
//! - [`for_version`]: PRODUCER_FENCED exists only for clients that know it (InitProducerId
//!   v4+, AddPartitionsToTxn/AddOffsetsToTxn/EndTxn v2+); older versions get
//!   INVALID_PRODUCER_EPOCH, as Kafka's `KafkaApis` answers them.
//! - [`topic_error`]: the partitions of a request that name no existing partition get
//!   UNKNOWN_TOPIC_OR_PARTITION, and then the others OPERATION_NOT_ATTEMPTED (Kafka's
//!   AddPartitionsToTxn does the same); the coordinator is not asked.

use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{TxnRequest, TxnResponse};

use crate::server::shard_context::{TopicCatalogue, TxnOps};
use crate::server::txns::route;

/// Runs `request` on the coordinator of `transactional_id` (see the module documentation).
pub async fn run_for_id(
    state: &(impl TopicCatalogue + TxnOps),
    transactional_id: &str,
    request: TxnRequest,
) -> Result<TxnResponse, ErrorCode> {
    route::submit_for_id(state, transactional_id, request).await
}

/// `code` as a client of API version `version` knows it: PRODUCER_FENCED becomes
/// INVALID_PRODUCER_EPOCH below `fenced_since` (see the module documentation).
pub fn for_version(code: ErrorCode, version: i16, fenced_since: i16) -> ErrorCode {
    if code == ErrorCode::PRODUCER_FENCED && version < fenced_since {
        ErrorCode::INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}

/// Whether `topic`/`partition` exists and may join a transaction.
pub fn partition_exists(state: &impl TopicCatalogue, topic: &str, partition: i32) -> bool {
    state
        .topic(topic)
        .is_some_and(|t| (0..t.partition_count()).contains(&partition))
}

/// The code a partition gets when the request names partitions that do not exist: its own
/// UNKNOWN_TOPIC_OR_PARTITION, or OPERATION_NOT_ATTEMPTED (see the module documentation).
pub fn topic_error(exists: bool) -> ErrorCode {
    if exists {
        ErrorCode::OPERATION_NOT_ATTEMPTED
    } else {
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_fenced_only_for_versions_that_know_it() {
        let fenced = ErrorCode::PRODUCER_FENCED;
        assert_eq!(for_version(fenced, 3, 4), ErrorCode::INVALID_PRODUCER_EPOCH);
        assert_eq!(for_version(fenced, 4, 4), fenced);
        assert_eq!(for_version(fenced, 1, 2), ErrorCode::INVALID_PRODUCER_EPOCH);
        assert_eq!(
            for_version(ErrorCode::INVALID_TXN_STATE, 0, 2),
            ErrorCode::INVALID_TXN_STATE
        );
    }
}
