//! ApiVersions (key 18), v0–4: the served ranges ([`super::served_versions`]), error 0.
//!
//! Contract: lists exactly what [`super::served_versions`] accepts (an API served only in
//! part is left out of [`super::SERVED`] instead: clients pick features from this list);
//! never advertises an API we would refuse. `connection.rs` answers a request of a version we
//! lack with UNSUPPORTED_VERSION (in v0 for ApiVersions itself), from the same table.

use kafka_protocol::messages::ApiVersionsResponse;

use crate::protocol::api_versions_response;
use crate::server::shard_context::BrokerIdentity;
use minikafka_core::error_code::ErrorCode;

/// Builds the response.
pub fn handle(state: &impl BrokerIdentity, _version: i16) -> ApiVersionsResponse {
    api_versions_response(state.supported_versions(), ErrorCode::NONE)
}
