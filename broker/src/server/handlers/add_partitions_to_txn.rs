//! AddPartitionsToTxn (key 24), v0–5: partitions join a producer's ongoing transaction.
//!
//! Contract:
//! - v0–3: one transaction (the request's top-level fields); the answer lists each
//!   partition's code by topic. v4+ (KIP-890 part 1): a batch of transactions, each with
//!   `verify_only` (only check that the partitions are already in the transaction: the
//!   defence against hanging transactions); the answer has one result per transaction, in
//!   request order.
//! - A transaction naming a partition that does not exist: those partitions
//!   UNKNOWN_TOPIC_OR_PARTITION, its others OPERATION_NOT_ATTEMPTED; the coordinator is not
//!   asked (as Kafka).
//! - Otherwise each transaction goes to the coordinator owning its transactional id
//!   (`txns::route`); transactions of one coordinator go together, coordinators in
//!   parallel. A coordinator that cannot be reached: its transactions' partitions get the
//!   routing code (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
//! - PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2.
//! - Hostile counts are refused by the bounded pre-check (I10); the coordinator bounds the
//!   partitions of one transaction.

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{self, TopicPartition, TxnRequest, TxnResponse};

use super::str_bytes;
use super::txn_shared::{for_version, partition_exists, topic_error};
use crate::server::shard_context::{TopicCatalogue, TxnOps, TxnVerification};
use crate::server::txns::route;

/// One transaction's codes, per partition in request order.
type Codes = Vec<(TopicPartition, ErrorCode)>;

fn partitions(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |&p| TopicPartition::new(t.name.0.to_string(), p))
        })
        .collect()
}

/// Codes grouped by topic, topics in first-seen order.
fn by_topic(codes: &Codes, version: i16) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in codes {
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = tp.partition;
        result.partition_error_code = for_version(*code, version, 2).code();
        match out.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(topic) => topic.results_by_partition.push(result),
            None => {
                let mut topic = AddPartitionsToTxnTopicResult::default();
                topic.name = str_bytes(&tp.topic).into();
                topic.results_by_partition.push(result);
                out.push(topic);
            }
        }
    }
    out
}

/// Handles the request (see the module documentation).
pub async fn handle(
    state: &(impl TopicCatalogue + TxnOps),
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let transactions: Vec<txn::AddPartitionsTxn> = if version <= 3 {
        vec![txn::AddPartitionsTxn {
            transactional_id: request.v3_and_below_transactional_id.0.to_string(),
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            partitions: partitions(&request.v3_and_below_topics),
        }]
    } else {
        request
            .transactions
            .iter()
            .map(|t| txn::AddPartitionsTxn {
                transactional_id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                producer_epoch: t.producer_epoch,
                verify_only: t.verify_only,
                partitions: partitions(&t.topics),
            })
            .collect()
    };
    let results = add_partitions(state, transactions).await;
    let mut response = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        if let Some((_, codes)) = results.first() {
            response.results_by_topic_v3_and_below = by_topic(codes, version);
        }
    } else {
        response.results_by_transaction = results
            .iter()
            .map(|(id, codes)| {
                let mut result = AddPartitionsToTxnResult::default();
                result.transactional_id = str_bytes(id).into();
                result.topic_results = by_topic(codes, version);
                result
            })
            .collect();
    }
    response
}

/// The produce path's verification, as the shard context names it (I150): whatever reaches
/// the catalogue and the transaction coordinators can ask them.
impl<S: TopicCatalogue + TxnOps> TxnVerification for S {
    async fn add_partitions(
        &self,
        transactions: Vec<txn::AddPartitionsTxn>,
    ) -> Vec<(String, Codes)> {
        add_partitions(self, transactions).await
    }
}

/// Runs `transactions` on their coordinators (see the module documentation): per
/// transaction, in order, its id and its partitions' codes. Also the produce path's
/// verification (KIP-890 part 1) uses it, with `verify_only` set.
pub async fn add_partitions(
    state: &(impl TopicCatalogue + TxnOps),
    transactions: Vec<txn::AddPartitionsTxn>,
) -> Vec<(String, Codes)> {
    let mut results: Vec<(String, Codes)> = Vec::with_capacity(transactions.len());
    // Coordinator partition → (index in `results`, transaction).
    let mut by_coordinator: BTreeMap<i32, Vec<(usize, txn::AddPartitionsTxn)>> = BTreeMap::new();
    for t in transactions {
        let index = results.len();
        let exists: Vec<bool> = t
            .partitions
            .iter()
            .map(|tp| partition_exists(state, &tp.topic, tp.partition))
            .collect();
        if exists.contains(&false) {
            let codes = t
                .partitions
                .iter()
                .zip(exists)
                .map(|(tp, e)| (tp.clone(), topic_error(e)))
                .collect();
            results.push((t.transactional_id, codes));
            continue;
        }
        results.push((t.transactional_id.clone(), Vec::new()));
        match route::coordinator_partition(state, &t.transactional_id) {
            Some(p) => by_coordinator.entry(p).or_default().push((index, t)),
            None => results[index].1 = every(&t.partitions, ErrorCode::COORDINATOR_NOT_AVAILABLE),
        }
    }
    let asks = by_coordinator
        .into_iter()
        .map(|(partition, group)| async move {
            let (indexes, transactions): (Vec<usize>, Vec<txn::AddPartitionsTxn>) =
                group.into_iter().unzip();
            let partitions: Vec<Vec<TopicPartition>> =
                transactions.iter().map(|t| t.partitions.clone()).collect();
            let request =
                TxnRequest::AddPartitionsToTxn(txn::AddPartitionsToTxnRequest { transactions });
            let answers: Vec<Codes> = match route::submit(state, partition, request).await {
                Ok(TxnResponse::AddPartitionsToTxn(r)) if r.results.len() == indexes.len() => {
                    r.results.into_iter().map(|t| t.partitions).collect()
                }
                Ok(_) => partitions
                    .iter()
                    .map(|ps| every(ps, ErrorCode::UNKNOWN_SERVER_ERROR))
                    .collect(),
                Err(code) => partitions.iter().map(|ps| every(ps, code)).collect(),
            };
            indexes.into_iter().zip(answers).collect::<Vec<_>>()
        });
    for answered in futures::future::join_all(asks).await {
        for (index, codes) in answered {
            results[index].1 = codes;
        }
    }
    results
}

fn every(partitions: &[TopicPartition], code: ErrorCode) -> Codes {
    partitions.iter().map(|tp| (tp.clone(), code)).collect()
}
