//! DeleteTopics (key 20), v1–6: by name (v1–5 `topic_names`; v6 `topics` by name or id).
//!
//! Contract: each topic is unpublished, its partitions closed and their data removed, its
//! metadata removed. Unknown name: UNKNOWN_TOPIC_OR_PARTITION (3); unknown id:
//! UNKNOWN_TOPIC_ID (100); an internal topic (`__consumer_offsets`):
//! TOPIC_AUTHORIZATION_FAILED (29).

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use uuid::Uuid;

use super::str_bytes;
use crate::server::shard_context::{TopicAdmin, TopicCatalogue};
use minikafka_core::error_code::ErrorCode;

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + TopicAdmin),
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    // (name if known, id asked for) per requested topic, in request order.
    let wanted: Vec<(Option<String>, Uuid, bool)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| match &t.name {
                Some(name) => (Some(name.0.as_str().to_string()), Uuid::nil(), false),
                None => (
                    state.topic_by_id(t.topic_id).map(|i| i.name.clone()),
                    t.topic_id,
                    true,
                ),
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.0.as_str().to_string()), Uuid::nil(), false))
            .collect()
    };
    let mut response = DeleteTopicsResponse::default();
    for (name, asked_id, by_id) in wanted {
        let mut result = DeletableTopicResult::default();
        result.name = name.as_ref().map(|n| TopicName(str_bytes(n)));
        let outcome = match &name {
            Some(name) => state.delete_topic(name).await,
            None => Err((
                ErrorCode::UNKNOWN_TOPIC_ID,
                format!("no topic has id {asked_id}"),
            )),
        };
        match outcome {
            Ok(id) => {
                if version >= 6 {
                    result.topic_id = id;
                }
            }
            Err((code, message)) => {
                result.error_code = if by_id && code == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
                    ErrorCode::UNKNOWN_TOPIC_ID
                } else {
                    code
                }
                .code();
                if version >= 6 {
                    result.topic_id = asked_id;
                }
                if version >= 5 {
                    result.error_message = Some(str_bytes(&message));
                }
            }
        }
        if version < 6 && result.name.is_none() {
            result.name = Some(TopicName::default());
        }
        response.responses.push(result);
    }
    response
}
