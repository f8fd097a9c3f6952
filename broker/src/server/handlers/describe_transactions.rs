//! DescribeTransactions (key 65), v0: each transactional id's state, producer, timeout,
//! start time and partitions.
//!
//! Contract: ids are split by coordinator (`txns::route`), each coordinator asked once,
//! in parallel; the answer has one entry per requested id, in request order (an id asked
//! twice is answered twice). An unknown id is TRANSACTIONAL_ID_NOT_FOUND; a coordinator
//! that cannot be reached gives its ids the routing code.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{DescribeTransactionsRequest, DescribeTransactionsResponse};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, DescribedTransaction, TxnRequest, TxnResponse};

use super::str_bytes;
use crate::server::shard_context::{TopicCatalogue, TxnOps};
use crate::server::txns::route;

fn failed(transactional_id: &str, code: ErrorCode) -> DescribedTransaction {
    DescribedTransaction {
        error_code: code,
        transactional_id: transactional_id.to_string(),
        state: String::new(),
        timeout_ms: 0,
        start_ms: -1,
        producer_id: -1,
        producer_epoch: -1,
        topics: Vec::new(),
    }
}

fn to_wire(d: DescribedTransaction) -> TransactionState {
    let mut s = TransactionState::default();
    s.error_code = d.error_code.code();
    s.transactional_id = str_bytes(&d.transactional_id).into();
    s.transaction_state = str_bytes(&d.state);
    s.transaction_timeout_ms = d.timeout_ms;
    s.transaction_start_time_ms = d.start_ms;
    s.producer_id = d.producer_id.into();
    s.producer_epoch = d.producer_epoch;
    s.topics = d
        .topics
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = TopicData::default();
            t.topic = str_bytes(&topic).into();
            t.partitions = partitions;
            t
        })
        .collect();
    s
}

/// Handles the request (see the module documentation).
pub async fn handle(
    state: &(impl TopicCatalogue + TxnOps),
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let ids: Vec<String> = request
        .transactional_ids
        .iter()
        .map(|id| id.0.to_string())
        .collect();
    let mut answers: Vec<Option<DescribedTransaction>> = vec![None; ids.len()];
    let mut by_coordinator: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (index, id) in ids.iter().enumerate() {
        match route::coordinator_partition(state, id) {
            Some(p) => by_coordinator.entry(p).or_default().push(index),
            None => answers[index] = Some(failed(id, ErrorCode::COORDINATOR_NOT_AVAILABLE)),
        }
    }
    let ids = &ids;
    let asks = by_coordinator
        .into_iter()
        .map(|(partition, indexes)| async move {
            let wanted: Vec<String> = indexes.iter().map(|&i| ids[i].clone()).collect();
            let request = TxnRequest::DescribeTransactions(txn::DescribeTransactionsRequest {
                transactional_ids: wanted.clone(),
            });
            let described: Vec<DescribedTransaction> =
                match route::submit(state, partition, request).await {
                    Ok(TxnResponse::DescribeTransactions(r))
                        if r.transactions.len() == wanted.len() =>
                    {
                        r.transactions
                    }
                    Ok(_) => wanted
                        .iter()
                        .map(|id| failed(id, ErrorCode::UNKNOWN_SERVER_ERROR))
                        .collect(),
                    Err(code) => wanted.iter().map(|id| failed(id, code)).collect(),
                };
            indexes.into_iter().zip(described).collect::<Vec<_>>()
        });
    for answered in futures::future::join_all(asks).await {
        for (index, d) in answered {
            answers[index] = Some(d);
        }
    }
    let mut response = DescribeTransactionsResponse::default();
    response.transaction_states = answers
        .into_iter()
        .zip(ids)
        .map(|(d, id)| to_wire(d.unwrap_or_else(|| failed(id, ErrorCode::UNKNOWN_SERVER_ERROR))))
        .collect();
    response
}
