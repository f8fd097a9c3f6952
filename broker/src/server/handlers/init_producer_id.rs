//! InitProducerId (key 22), v0–5: producer ids for idempotent producers (KIP-98), from the
//! durable allocator [`crate::log::producer_ids`], and for transactional ones (their coordinator).
//!
//! Contract ([`handle_request`]):
//! - No transactional id: a fresh producer id with epoch 0. Ids come from
//!   [`ProducerIdAllocator`](crate::log::producer_ids::ProducerIdAllocator): blocks of [`PRODUCER_ID_BLOCK_SIZE`](crate::log::producer_ids::PRODUCER_ID_BLOCK_SIZE) reserved by persisting the
//!   block's end in `<log.dirs>/producer_id_block` (written to a `.tmp`, synced, renamed,
//!   directory synced) *before* any id of the block is handed out, so an id never repeats,
//!   whatever the crash; ids left unused in a block are skipped after a restart.
//! - KIP-360 epoch bump (v3+): a request carrying a producer id this broker may have issued
//!   (below the persisted high-water mark) and its epoch gets the same id with epoch + 1:
//!   the new epoch restarts at sequence 0 in every partition, and once it has written to a
//!   partition, batches of the old epoch are fenced there (INVALID_PRODUCER_EPOCH). The
//!   broker keeps no per-id state for this (as Kafka keeps none for producers without a
//!   transactional id): the partitions do the fencing. At the end of the epoch range
//!   (`i16::MAX - 1`), or for an id we never issued, a fresh id with epoch 0 instead (Kafka
//!   does the same on exhaustion).
//! - A (non-empty) transactional id: the transaction coordinator owning it answers
//!   (`core::txn`, hosted by `txns::host`): a new id gets a fresh producer id; a known one
//!   is bumped and its previous producer fenced, an open transaction aborted first
//!   (CONCURRENT_TRANSACTIONS until its markers are written), a KIP-360 retry (v3+: the
//!   producer id and epoch it has) recovered, an exhausted epoch moved to a fresh producer
//!   id. The answer waits for the coordinator's record to be durable (I62). PRODUCER_FENCED
//!   is INVALID_PRODUCER_EPOCH below v4. A transaction timeout above
//!   `transaction.max.timeout.ms` is INVALID_TRANSACTION_TIMEOUT.
//! - The high-water mark cannot be read or written: KAFKA_STORAGE_ERROR (56) (a damaged file
//!   is never reset to 0, which could repeat ids).
//! - Never: hands out an id before the block holding it is durable.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use super::txn_shared::{for_version, run_for_id};
use crate::server::shard_context::{ProducerIds, TopicCatalogue, TxnOps};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, TxnRequest, TxnResponse};

fn response(
    error_code: ErrorCode,
    producer_id: i64,
    producer_epoch: i16,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.error_code = error_code.code();
    response.producer_id = producer_id.into();
    response.producer_epoch = producer_epoch;
    response
}

/// Handles the request (see the module documentation).
pub async fn handle_request(
    state: &(impl TopicCatalogue + TxnOps + ProducerIds),
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    // An empty transactional id counts as none (some clients send "" for null).
    if let Some(id) = request
        .transactional_id
        .as_ref()
        .filter(|id| !id.0.is_empty())
    {
        let id = id.0.to_string();
        let expected = (version >= 3 && request.producer_id.0 >= 0)
            .then_some((request.producer_id.0, request.producer_epoch));
        let ask = TxnRequest::InitProducerId(txn::InitProducerIdRequest {
            transactional_id: id.clone(),
            transaction_timeout_ms: request.transaction_timeout_ms,
            expected,
        });
        return match run_for_id(state, &id, ask).await {
            Ok(TxnResponse::InitProducerId(r)) => response(
                for_version(r.error_code, version, 4),
                r.producer_id,
                r.producer_epoch,
            ),
            Ok(_) => response(ErrorCode::UNKNOWN_SERVER_ERROR, -1, -1),
            Err(code) => response(code, -1, -1),
        };
    }
    let current = (version >= 3 && request.producer_id.0 >= 0)
        .then_some((request.producer_id.0, request.producer_epoch));
    match state.allocate_producer_id(current).await {
        Ok((id, epoch)) => {
            tracing::debug!(producer_id = id, epoch, "producer id issued");
            response(ErrorCode::NONE, id, epoch)
        }
        Err(e) => {
            tracing::error!("allocating a producer id: {e}");
            response(ErrorCode::KAFKA_STORAGE_ERROR, -1, -1)
        }
    }
}
