//! AddOffsetsToTxn (key 25), v0–4: a consumer group's offsets join a producer's transaction
//! (the group's `__consumer_offsets` partition is added; TxnOffsetCommit follows).
//!
//! Contract: the coordinator owning the transactional id answers once its record is durable
//! (I62); a routing failure is that code; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, TxnRequest, TxnResponse};

use super::txn_shared::{for_version, run_for_id};
use crate::server::shard_context::{TopicCatalogue, TxnOps};

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + TxnOps),
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = request.transactional_id.0.to_string();
    let ask = TxnRequest::AddOffsetsToTxn(txn::AddOffsetsToTxnRequest {
        transactional_id: id.clone(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        group_id: request.group_id.0.to_string(),
    });
    let code = match run_for_id(state, &id, ask).await {
        Ok(TxnResponse::AddOffsetsToTxn(r)) => r.error_code,
        Ok(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
        Err(code) => code,
    };
    let mut response = AddOffsetsToTxnResponse::default();
    response.error_code = for_version(code, version, 2).code();
    response
}
