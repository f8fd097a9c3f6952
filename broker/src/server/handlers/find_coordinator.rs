//! FindCoordinator (key 10), v0–6: where a group's (or a transactional id's) coordinator runs.
//!
//! Contract:
//! - One key (v0–3: `key`, `key_type` from v1) or a batch (v4+: `coordinator_keys`, one
//!   answer per key, in request order).
//! - Key type 0 (group): this node, at the host and port Metadata advertises. The group's
//!   coordinator lives on the shard owning its `__consumer_offsets` partition; that is a
//!   detail inside this broker, invisible to clients.
//! - Key type 1 (transaction): this node too; the id's coordinator lives on the shard
//!   owning its `__transaction_state` partition. COORDINATOR_NOT_AVAILABLE (15) only if that
//!   topic is missing (as Kafka answers before its transaction coordinator is up).
//! - Any other key type (2 is share groups): INVALID_REQUEST (42).
//! - Never: fails the request as a whole; every key gets its own error code.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;
use crate::server::session::RequestContext;
use crate::server::shard_context::{BrokerIdentity, TopicCatalogue};
use crate::server::txns::route;

/// Key type of a consumer group.
pub const KEY_TYPE_GROUP: i8 = 0;
/// Key type of a transactional id.
pub const KEY_TYPE_TRANSACTION: i8 = 1;

/// One key's answer: error code, message, and whether this node is the coordinator.
/// `transactions`: whether the transaction coordinators are up.
fn answer(key_type: i8, transactions: bool) -> (ErrorCode, Option<&'static str>) {
    match key_type {
        KEY_TYPE_GROUP => (ErrorCode::NONE, None),
        KEY_TYPE_TRANSACTION if transactions => (ErrorCode::NONE, None),
        KEY_TYPE_TRANSACTION => (
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            Some("the transaction coordinator is not available"),
        ),
        _ => (
            ErrorCode::INVALID_REQUEST,
            Some("unknown coordinator key type"),
        ),
    }
}

/// Builds the response.
pub fn handle(
    state: &(impl TopicCatalogue + BrokerIdentity),
    request: FindCoordinatorRequest,
    version: i16,
    ctx: &RequestContext,
) -> FindCoordinatorResponse {
    let node_id = state.node_id();
    let (host, port) = state.advertised_address(&ctx.listener);
    let mut response = FindCoordinatorResponse::default();
    let key_type = if version >= 1 {
        request.key_type
    } else {
        KEY_TYPE_GROUP
    };
    let transactions = route::state_partition_count(state).is_some();
    let (code, message) = answer(key_type, transactions);
    let found = code == ErrorCode::NONE;
    if version >= 4 {
        response.coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key;
                c.error_code = code.code();
                c.error_message = message.map(str_bytes);
                if found {
                    c.node_id = node_id.into();
                    c.host = str_bytes(&host);
                    c.port = i32::from(port);
                } else {
                    c.node_id = (-1).into();
                    c.host = StrBytes::default();
                    c.port = -1;
                }
                c
            })
            .collect();
        return response;
    }
    response.error_code = code.code();
    if version >= 1 {
        response.error_message = message.map(str_bytes);
    }
    if found {
        response.node_id = node_id.into();
        response.host = str_bytes(&host);
        response.port = i32::from(port);
    } else {
        response.node_id = (-1).into();
        response.port = -1;
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_types_get_their_codes() {
        assert_eq!(answer(KEY_TYPE_GROUP, false).0, ErrorCode::NONE);
        assert_eq!(answer(KEY_TYPE_TRANSACTION, true).0, ErrorCode::NONE);
        assert_eq!(
            answer(KEY_TYPE_TRANSACTION, false).0,
            ErrorCode::COORDINATOR_NOT_AVAILABLE
        );
        assert_eq!(answer(2, true).0, ErrorCode::INVALID_REQUEST);
        assert_eq!(answer(-1, true).0, ErrorCode::INVALID_REQUEST);
    }
}
