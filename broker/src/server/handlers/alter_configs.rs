//! AlterConfigs (key 33), v0–2, and IncrementalAlterConfigs (key 44), v0–1: change topic
//! configurations and the dynamic broker settings, live and durably.
//!
//! Contract:
//! - Each resource is judged and applied on its own ([`crate::server::alter_configs`]): topic
//!   (type 2), broker (type 4, named by `node.id` or empty for the cluster default) or group
//!   (type 32, [`crate::server::group_configs`]), or, by IncrementalAlterConfigs only, broker
//!   loggers (type 8, [`crate::server::broker_loggers`]). Client metrics subscriptions (type
//!   16) are INVALID_REQUEST: this broker collects no client telemetry, so a subscription
//!   would be stored and never acted on. Any other type is INVALID_REQUEST. AlterConfigs replaces a resource's whole set of settings;
//!   IncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT as Kafka does.
//! - Errors, per resource: unknown topic UNKNOWN_TOPIC_OR_PARTITION (3); an unknown or
//!   refused name or a bad value INVALID_CONFIG (40) naming the key; a read-only broker
//!   setting, a duplicate key, a null value or an unknown operation INVALID_REQUEST (42); the
//!   internal offsets topic TOPIC_AUTHORIZATION_FAILED (29); a failed store
//!   KAFKA_STORAGE_ERROR (56).
//! - `validate_only` checks everything and changes nothing.

use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::server::alter_configs::{Alteration, ConfigAdmin, ConfigOp, OpKind};
use crate::server::broker_loggers::{self, RESOURCE_BROKER_LOGGER};
use crate::server::config_entries::{RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_TOPIC};
use crate::server::group_configs::RESOURCE_GROUP;
use crate::server::shard_context::BrokerIdentity;
use minikafka_core::error_code::ErrorCode;

/// Changes log levels (resource type BROKER_LOGGER, named by `node.id`): by
/// IncrementalAlterConfigs only, as Kafka.
fn alter_loggers(
    state: &impl BrokerIdentity,
    name: &str,
    alteration: &Alteration,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    let node = state.node_id();
    if name != node.to_string() {
        return Err((
            ErrorCode::INVALID_REQUEST,
            format!("this broker is node {node}, not {name}"),
        ));
    }
    match alteration {
        Alteration::Incremental(ops) => broker_loggers::alter(ops, validate_only),
        Alteration::Replace(_) => Err((
            ErrorCode::INVALID_REQUEST,
            "broker loggers are changed by IncrementalAlterConfigs only".to_string(),
        )),
    }
}

/// Applies `alteration` to one resource and gives the error code and message its response
/// carries back.
async fn alter_resource(
    state: &(impl BrokerIdentity + ConfigAdmin),
    resource_type: i8,
    name: &StrBytes,
    alteration: &Alteration,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let name = name.as_str();
    let outcome = match resource_type {
        RESOURCE_TOPIC => state.alter_topic(name, alteration, validate_only).await,
        RESOURCE_BROKER => state.alter_broker(name, alteration, validate_only).await,
        RESOURCE_GROUP => state.alter_group(name, alteration, validate_only).await,
        RESOURCE_BROKER_LOGGER => alter_loggers(state, name, alteration, validate_only),
        RESOURCE_CLIENT_METRICS => Err((
            ErrorCode::INVALID_REQUEST,
            "this broker collects no client telemetry (KIP-714): client metrics \
             subscriptions cannot be set"
                .to_string(),
        )),
        other => Err((
            ErrorCode::INVALID_REQUEST,
            format!(
                "resource type {other} cannot be altered here (topic 2, broker 4, broker logger 8 and group 32 can)"
            ),
        )),
    };
    match outcome {
        Ok(()) => (ErrorCode::NONE.code(), None),
        Err((code, message)) => {
            tracing::debug!(resource_type, name, %code, "alter configs refused: {message}");
            (code.code(), Some(str_bytes(&message)))
        }
    }
}

/// Handles AlterConfigs.
pub async fn handle_alter(
    state: &(impl BrokerIdentity + ConfigAdmin),
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in &request.resources {
        let alteration = Alteration::Replace(
            resource
                .configs
                .iter()
                .map(|c| {
                    (
                        c.name.as_str().to_string(),
                        c.value.as_ref().map(|v| v.as_str().to_string()),
                    )
                })
                .collect(),
        );
        let mut result = alter_configs_response::AlterConfigsResourceResponse::default();
        (result.error_code, result.error_message) = alter_resource(
            state,
            resource.resource_type,
            &resource.resource_name,
            &alteration,
            request.validate_only,
        )
        .await;
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        response.responses.push(result);
    }
    response
}

/// Handles IncrementalAlterConfigs.
pub async fn handle_incremental(
    state: &(impl BrokerIdentity + ConfigAdmin),
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in &request.resources {
        let alteration = Alteration::Incremental(
            resource
                .configs
                .iter()
                .map(|c| ConfigOp {
                    key: c.name.as_str().to_string(),
                    op: OpKind::from_code(c.config_operation),
                    value: c.value.as_ref().map(|v| v.as_str().to_string()),
                })
                .collect(),
        );
        let mut result =
            incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        (result.error_code, result.error_message) = alter_resource(
            state,
            resource.resource_type,
            &resource.resource_name,
            &alteration,
            request.validate_only,
        )
        .await;
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        response.responses.push(result);
    }
    response
}
