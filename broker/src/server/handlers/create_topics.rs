//! CreateTopics (key 19), v2–7.
//!
//! Contract, per topic: a legal name (Kafka's rules: 1..=249 of `[a-zA-Z0-9._-]`, not `.`
//! or `..`; else INVALID_TOPIC_EXCEPTION, 17); not a duplicate within the request
//! (INVALID_REQUEST, 42) nor an existing topic (TOPIC_ALREADY_EXISTS, 36);
//! `num_partitions` -1 means `num.partitions`, other non-positive counts are
//! INVALID_PARTITIONS (37); replication factor -1 or 1 (else INVALID_REPLICATION_FACTOR, 38);
//! a manual assignment may only name this node (else INVALID_REPLICA_ASSIGNMENT, 39) and then
//! gives the partition count; each config must be a Kafka topic config name with a value
//! this broker honours or knowingly ignores ([`check_topic_config`]; else INVALID_CONFIG, 40,
//! naming the key), then becomes a topic override checked by the log. `validate_only` checks and creates nothing. v5+ answers with the
//! partition count, replication factor and the topic's configuration; v7+ with its id.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::str_bytes;
use crate::config::topic::{check_topic_config, topic_config_status};
use crate::log::topics::validate_topic_name;
use crate::server::config_entries::topic_entries;
use crate::server::shard_context::{ConfigLookup, TopicAdmin};
use crate::server::shared::RESERVED_CONFIG_PREFIX;
use crate::server::topics::AdminError;
use minikafka_core::error_code::ErrorCode;

/// Partition count and overrides of a creatable topic, or why it is refused.
fn judge(
    topic: &CreatableTopic,
    node_id: i32,
    default_partitions: i32,
) -> Result<(i32, BTreeMap<String, String>), AdminError> {
    if let Err(e) = validate_topic_name(topic.name.0.as_str()) {
        return Err((ErrorCode::INVALID_TOPIC_EXCEPTION, e.to_string()));
    }
    if !matches!(topic.replication_factor, -1 | 1) {
        return Err((
            ErrorCode::INVALID_REPLICATION_FACTOR,
            format!(
                "replication factor {} is not possible on a single broker",
                topic.replication_factor
            ),
        ));
    }
    let partitions = if topic.assignments.is_empty() {
        match topic.num_partitions {
            -1 => default_partitions,
            n => n,
        }
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ErrorCode::INVALID_REQUEST,
                "a manual assignment requires num_partitions and replication_factor -1".into(),
            ));
        }
        let mut seen = HashSet::new();
        for assignment in &topic.assignments {
            if assignment.broker_ids.len() != 1 || assignment.broker_ids[0].0 != node_id {
                return Err((
                    ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                    format!("partitions can only be assigned to broker {node_id}"),
                ));
            }
            seen.insert(assignment.partition_index);
        }
        let count = topic.assignments.len() as i32;
        if (0..count).any(|p| !seen.contains(&p)) {
            return Err((
                ErrorCode::INVALID_REPLICA_ASSIGNMENT,
                "assigned partitions must be 0..count".into(),
            ));
        }
        count
    };
    let mut overrides = BTreeMap::new();
    for config in &topic.configs {
        let key = config.name.as_str();
        // Reserved keys keep their own message (checked when the topic is created).
        if !key.starts_with(RESERVED_CONFIG_PREFIX) {
            let checked = match &config.value {
                Some(value) => check_topic_config(key, value.as_str()).map(drop),
                // A null value asks for the default: only the name must be known.
                None if topic_config_status(key).is_some() => Ok(()),
                None => check_topic_config(key, "").map(drop),
            };
            checked.map_err(|e| (ErrorCode::INVALID_CONFIG, e.to_string()))?;
        }
        if let Some(value) = &config.value {
            overrides.insert(config.name.as_str().to_string(), value.as_str().to_string());
        }
    }
    Ok((partitions, overrides))
}

/// Handles the request.
pub async fn handle(
    state: &(impl ConfigLookup + TopicAdmin),
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let config = state.settings();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for topic in &request.topics {
        *counts.entry(topic.name.0.as_str().to_string()).or_default() += 1;
    }
    let mut response = CreateTopicsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.as_str().to_string();
        let outcome = if counts.get(&name).copied().unwrap_or(0) > 1 {
            Err((
                ErrorCode::INVALID_REQUEST,
                format!("topic {name} appears more than once in the request"),
            ))
        } else {
            match judge(topic, config.node_id, config.num_partitions) {
                Ok((partitions, overrides)) => {
                    state
                        .create_topic(&name, partitions, overrides, request.validate_only)
                        .await
                }
                Err(e) => Err(e),
            }
        };
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        result.error_message = None;
        match outcome {
            Ok(info) => {
                if version >= 7 {
                    result.topic_id = info.id;
                }
                if version >= 5 {
                    result.num_partitions = info.partition_count();
                    result.replication_factor = 1;
                    result.configs = Some(
                        topic_entries(
                            &state.effective_config(),
                            &state.dynamic_config(),
                            info.config.overrides(),
                        )
                        .into_iter()
                        .map(|e| {
                            let mut c = CreatableTopicConfigs::default();
                            c.name = str_bytes(&e.name);
                            c.value = Some(str_bytes(&e.value));
                            c.config_source = e.source;
                            c
                        })
                        .collect(),
                    );
                }
            }
            Err((code, message)) => {
                tracing::debug!(topic = name, %code, "create refused: {message}");
                result.error_code = code.code();
                result.error_message = Some(str_bytes(&message));
                result.configs = if version >= 5 { Some(Vec::new()) } else { None };
            }
        }
        response.topics.push(result);
    }
    response
}
