//! DescribeConfigs (key 32), v1–4: topic, broker and group configuration.
//!
//! Contract:
//! - Topic resources (type 2): every topic setting of the settings table that has a value
//!   of its own (`cleanup.policy`, retention, segments, compaction, `flush.policy`,
//!   `compression.type` and its levels, `message.timestamp.type`, …), plus any other
//!   stored override; one the broker accepts without acting on it says why in its
//!   documentation (v3+). Source: 1
//!   (DYNAMIC_TOPIC_CONFIG) for a topic override, else the source of the broker setting it
//!   falls back on: 2/3 (dynamic broker / dynamic cluster default), 4 (STATIC_BROKER_CONFIG)
//!   when given explicitly, else 5 (DEFAULT_CONFIG). Unknown topic:
//!   UNKNOWN_TOPIC_OR_PARTITION (3).
//! - Broker resources (type 4, named by `node.id` or empty): every broker row of the table
//!   (one without effect on a single node says so in its documentation), source 2 to 5 as
//!   above (2 and 3 for settings altered at run time, which alone
//!   are not read-only). Another broker id: INVALID_REQUEST.
//! - Group resources (type 32, any group id, existing or not): its group configurations
//!   ([`crate::server::group_configs`]); an empty name: INVALID_REQUEST.
//! - Broker logger resources (type 8, named by `node.id`): the log level of each target
//!   ([`crate::server::broker_loggers`]); another name: INVALID_REQUEST.
//! - Client metrics resources (type 16, KIP-714 subscriptions): this broker collects no
//!   client telemetry, so no subscription exists and any name is described with no entries,
//!   as Kafka describes a subscription never set; an empty name: INVALID_REQUEST.
//! - Any other resource type: INVALID_REQUEST.
//! - `configuration_keys` filters; synonyms (when asked) list where the value may come from,
//!   in precedence order (the topic override, each broker spelling set dynamically for this
//!   broker, as the cluster default, or in the static file, then the default), from the
//!   settings table's synonyms.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::str_bytes;
use crate::server::broker_loggers::{self, RESOURCE_BROKER_LOGGER};
use crate::server::config_entries::{
    broker_entries, topic_entries, ConfigEntry, RESOURCE_BROKER, RESOURCE_CLIENT_METRICS,
    RESOURCE_TOPIC,
};
use crate::server::group_configs::{group_entries, RESOURCE_GROUP};
use crate::server::shard_context::{BrokerIdentity, ConfigLookup, TopicCatalogue};
use crate::server::topics::unknown_topic;
use minikafka_core::error_code::ErrorCode;

fn to_result(entry: &ConfigEntry, synonyms: bool, version: i16) -> DescribeConfigsResourceResult {
    let mut result = DescribeConfigsResourceResult::default();
    result.name = str_bytes(&entry.name);
    // A secret (`sasl.jaas.config`) is described as Kafka describes a password: sensitive,
    // with no value.
    let sensitive = entry.config_type == crate::config::table::Kind::Password.code();
    result.value = (!sensitive).then(|| str_bytes(&entry.value));
    result.is_sensitive = sensitive;
    result.config_source = entry.source;
    result.read_only = entry.read_only;
    if version >= 3 {
        result.config_type = entry.config_type;
    }
    result.documentation = if version >= 3 {
        entry.documentation.as_deref().map(str_bytes)
    } else {
        None
    };
    if synonyms {
        result.synonyms = entry
            .synonyms
            .iter()
            .map(|s| {
                let mut synonym = DescribeConfigsSynonym::default();
                synonym.name = str_bytes(&s.name);
                synonym.value = (!sensitive).then(|| str_bytes(&s.value));
                synonym.source = s.source;
                synonym
            })
            .collect();
    }
    result
}

/// Handles the request.
pub fn handle(
    state: &(impl TopicCatalogue + BrokerIdentity + ConfigLookup),
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let node = state.node_id().to_string();
    let effective = state.effective_config();
    let dynamic = state.dynamic_config();
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        result.error_message = None;
        let name = resource.resource_name.as_str();
        let entries = match resource.resource_type {
            RESOURCE_TOPIC => state
                .topic(name)
                .map(|info| topic_entries(&effective, &dynamic, info.config.overrides()))
                .ok_or_else(|| unknown_topic(name)),
            RESOURCE_BROKER if name.is_empty() || name == node => {
                Ok(broker_entries(&effective, &dynamic))
            }
            RESOURCE_BROKER => Err((
                ErrorCode::INVALID_REQUEST,
                format!("this broker is node {node}, not {name}"),
            )),
            RESOURCE_BROKER_LOGGER if name == node => {
                broker_loggers::current().map(|levels| levels.entries())
            }
            RESOURCE_BROKER_LOGGER => Err((
                ErrorCode::INVALID_REQUEST,
                format!("this broker is node {node}, not {name}"),
            )),
            RESOURCE_CLIENT_METRICS if name.is_empty() => Err((
                ErrorCode::INVALID_REQUEST,
                "client metrics subscription name must not be empty".to_string(),
            )),
            RESOURCE_CLIENT_METRICS => Ok(Vec::new()),
            RESOURCE_GROUP if name.is_empty() => Err((
                ErrorCode::INVALID_REQUEST,
                "group name must not be empty".to_string(),
            )),
            RESOURCE_GROUP => Ok(group_entries(
                state.group_configs().by_group.get(name),
                &effective,
            )),
            other => Err((
                ErrorCode::INVALID_REQUEST,
                format!("resource type {other} is not supported"),
            )),
        };
        match entries {
            Ok(entries) => {
                let keys = resource.configuration_keys.as_ref();
                result.configs = entries
                    .iter()
                    .filter(|e| keys.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name)))
                    .map(|e| to_result(e, request.include_synonyms, version))
                    .collect();
            }
            Err((code, message)) => {
                result.error_code = code.code();
                result.error_message = Some(str_bytes(&message));
            }
        }
        response.results.push(result);
    }
    response
}
