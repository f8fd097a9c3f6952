//! EndTxn (key 26), v0–5: commit or abort a producer's transaction.
//!
//! Contract: the coordinator owning the transactional id writes PrepareCommit/PrepareAbort
//! and answers once it is durable (I62, as Kafka: the markers follow, and a PrepareCommit
//! found at startup has its markers written, I64). v5+ (KIP-890 part 2): every transaction
//! ends with an epoch bump, and the answer carries the producer id and epoch for the next
//! one. A routing failure is that code; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, TxnRequest, TxnResponse};

use super::txn_shared::{for_version, run_for_id};
use crate::server::shard_context::{TopicCatalogue, TxnOps};

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + TxnOps),
    request: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = request.transactional_id.0.to_string();
    let ask = TxnRequest::EndTxn(txn::EndTxnRequest {
        transactional_id: id.clone(),
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        committed: request.committed,
        version,
    });
    let (code, producer_id, producer_epoch) = match run_for_id(state, &id, ask).await {
        Ok(TxnResponse::EndTxn(r)) => (r.error_code, r.producer_id, r.producer_epoch),
        Ok(_) => (ErrorCode::UNKNOWN_SERVER_ERROR, -1, -1),
        Err(code) => (code, -1, -1),
    };
    let mut response = EndTxnResponse::default();
    response.error_code = for_version(code, version, 2).code();
    response.producer_id = producer_id.into();
    response.producer_epoch = producer_epoch;
    response
}
