//! InitProducerId (key 22), v0–5: refused until idempotent producers are implemented.
//!
//! Not advertised in ApiVersions (see [`super::NOT_ADVERTISED`]), so clients that choose
//! idempotence from ApiVersions stay non-idempotent; this answers those that send it anyway.
//!
//! Contract: every request is answered with CLUSTER_AUTHORIZATION_FAILED (31), producer id
//! -1. Why that code: it is non-retriable in every client we target — librdkafka raises it
//! as a fatal producer error (`rd_kafka_idemp_check_error`), the Java client throws
//! `ClusterAuthorizationException`, kafka-python fails the producer — so an idempotent or
//! transactional producer stops at once with an error instead of retrying forever, while
//! plain producers never send this request. A retriable code (e.g. COORDINATOR_NOT_AVAILABLE)
//! would make them hang.

use kafka_protocol::messages::InitProducerIdResponse;

use crate::server::errors;

/// Builds the refusal.
pub fn handle() -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.error_code = errors::CLUSTER_AUTHORIZATION_FAILED;
    response.producer_id = (-1).into();
    response.producer_epoch = -1;
    response
}
