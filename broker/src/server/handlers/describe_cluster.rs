//! DescribeCluster (key 60), v0–2: this one broker, which is also the controller.
//!
//! Contract: endpoint type 1 (brokers) is served; 2 (controllers) gets
//! UNSUPPORTED_ENDPOINT_TYPE (119), as a broker that is not a KRaft controller answers.
//! The cluster's authorized operations (KIP-430) are every cluster operation when the request
//! asks, as Kafka grants with no authorizer, else Kafka's "not requested" sentinel.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};
use minikafka_core::authorized_operations::{authorized_operations, ResourceType};

use super::str_bytes;
use crate::server::session::RequestContext;
use crate::server::shard_context::BrokerIdentity;
use minikafka_core::error_code::ErrorCode;

/// Builds the response.
pub fn handle(
    state: &impl BrokerIdentity,
    request: DescribeClusterRequest,
    version: i16,
    ctx: &RequestContext,
) -> DescribeClusterResponse {
    let (host, port) = state.advertised_address(&ctx.listener);
    let node_id = state.node_id();
    let mut response = DescribeClusterResponse::default();
    if version >= 1 && request.endpoint_type != 1 {
        response.endpoint_type = request.endpoint_type;
        response.error_code = ErrorCode::UNSUPPORTED_ENDPOINT_TYPE.code();
        return response;
    }
    response.cluster_id = str_bytes(state.cluster_id());
    response.controller_id = node_id.into();
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = node_id.into();
    broker.host = str_bytes(&host);
    broker.port = i32::from(port);
    response.brokers = vec![broker];
    response.cluster_authorized_operations = authorized_operations(
        ResourceType::Cluster,
        request.include_cluster_authorized_operations,
    );
    response
}
