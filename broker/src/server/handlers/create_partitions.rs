//! CreatePartitions (key 37), v0–3: raise a topic's partition count.
//!
//! Contract: the new count must exceed the current one (INVALID_PARTITIONS, 37); a manual
//! assignment may only name this node (INVALID_REPLICA_ASSIGNMENT, 39); unknown topic:
//! UNKNOWN_TOPIC_OR_PARTITION (3); an internal topic (`__consumer_offsets`, whose partition
//! count places every group): TOPIC_AUTHORIZATION_FAILED (29). `validate_only` changes nothing.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::str_bytes;
use crate::server::shard_context::{BrokerIdentity, TopicAdmin};
use minikafka_core::error_code::ErrorCode;

/// Handles the request.
pub async fn handle(
    state: &(impl BrokerIdentity + TopicAdmin),
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let node_id = state.node_id();
    let mut response = CreatePartitionsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.as_str().to_string();
        let bad_assignment = topic.assignments.as_ref().is_some_and(|a| {
            a.iter()
                .any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != node_id)
        });
        let outcome = if bad_assignment {
            Err((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                format!("partitions can only be assigned to broker {node_id}"),
            ))
        } else {
            state
                .add_partitions(&name, topic.count, request.validate_only)
                .await
        };
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        result.error_message = None;
        if let Err((code, message)) = outcome {
            result.error_code = code.code();
            result.error_message = Some(str_bytes(&message));
        }
        response.results.push(result);
    }
    response
}
