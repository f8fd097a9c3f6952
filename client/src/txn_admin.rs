//! Transaction admin calls over one connection, as `kafka-transactions.sh` makes them:
//! ListTransactions, DescribeTransactions, and aborting a hanging transaction with
//! WriteTxnMarkers. Used by `mk transactions`.
//!
//! Contract:
//! - Inputs: a negotiated [`Connection`] to the transaction coordinator (ListTransactions and
//!   DescribeTransactions) or to the partition's leader (WriteTxnMarkers); minikafka is one
//!   node, so the bootstrap connection serves both.
//! - Outputs: plain structs; a Kafka error code for the request, a transactional id or the
//!   aborted partition becomes [`Error::Kafka`] naming it.
//! - Never: retries.

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, ListTransactionsRequest, ProducerId, TopicName, TransactionalId,
    WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::connection::Connection;
use crate::error::{Error, Result};

/// One transactional id, as ListTransactions lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionListing {
    /// Transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// State (`Empty`, `Ongoing`, `PrepareCommit`, `CompleteAbort`…).
    pub state: String,
}

/// Which transactions to list (empty filters list every one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only these states.
    pub states: Vec<String>,
    /// Only these producer ids.
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ms; v1+), `None` for any.
    pub min_duration_ms: Option<i64>,
}

/// One transactional id, as DescribeTransactions describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionDescription {
    /// Transactional id.
    pub transactional_id: String,
    /// State.
    pub state: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    /// When the ongoing transaction started (ms since the epoch; −1 if none).
    pub start_time_ms: i64,
    /// The partitions in the transaction, as (topic, partition), sorted.
    pub partitions: Vec<(String, i32)>,
}

/// A hanging transaction to abort in one partition (`kafka-transactions.sh abort`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AbortSpec {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Producer id of the hanging transaction.
    pub producer_id: i64,
    /// Its producer epoch.
    pub producer_epoch: i16,
    /// The coordinator epoch written in the marker.
    pub coordinator_epoch: i32,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Lists the transactions `filter` selects, sorted by transactional id.
pub async fn list_transactions<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    filter: &ListFilter,
) -> Result<Vec<TransactionListing>> {
    let version = conn.version_of::<ListTransactionsRequest>()?;
    if filter.min_duration_ms.is_some() && version < 1 {
        return Err(Error::Protocol(
            "the broker's ListTransactions has no duration filter (needs v1)".into(),
        ));
    }
    let request = ListTransactionsRequest::default()
        .with_state_filters(filter.states.iter().map(|s| text(s)).collect())
        .with_producer_id_filters(filter.producer_ids.iter().map(|&p| ProducerId(p)).collect())
        .with_duration_filter(filter.min_duration_ms.unwrap_or(-1));
    let response = conn.request(&request).await?;
    Error::check(response.error_code, || "list transactions".to_string())?;
    let mut out: Vec<TransactionListing> = response
        .transaction_states
        .into_iter()
        .map(|t| TransactionListing {
            transactional_id: t.transactional_id.0.to_string(),
            producer_id: t.producer_id.0,
            state: t.transaction_state.to_string(),
        })
        .collect();
    out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    Ok(out)
}

/// Describes `ids`, in the order given.
pub async fn describe_transactions<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    ids: &[String],
) -> Result<Vec<TransactionDescription>> {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(ids.iter().map(|id| TransactionalId(text(id))).collect());
    let response = conn.request(&request).await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let t = response
            .transaction_states
            .iter()
            .find(|t| t.transactional_id.0.as_str() == id)
            .ok_or_else(|| {
                Error::Protocol(format!("DescribeTransactions answered nothing for {id}"))
            })?;
        Error::check(t.error_code, || format!("describe transaction {id}"))?;
        let mut partitions: Vec<(String, i32)> = t
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(move |&p| (topic.topic.0.to_string(), p))
            })
            .collect();
        partitions.sort();
        out.push(TransactionDescription {
            transactional_id: id.clone(),
            state: t.transaction_state.to_string(),
            producer_id: t.producer_id.0,
            producer_epoch: t.producer_epoch,
            timeout_ms: t.transaction_timeout_ms,
            start_time_ms: t.transaction_start_time_ms,
            partitions,
        });
    }
    Ok(out)
}

/// Aborts a hanging transaction in one partition: an ABORT marker written by WriteTxnMarkers,
/// as `kafka-transactions.sh abort` does (Kafka's `Admin.abortTransaction`).
pub async fn abort_transaction<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    spec: &AbortSpec,
) -> Result<()> {
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(spec.producer_id))
            .with_producer_epoch(spec.producer_epoch)
            .with_transaction_result(false)
            .with_coordinator_epoch(spec.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(text(&spec.topic)))
                .with_partition_indexes(vec![spec.partition])])]);
    let response = conn.request(&request).await?;
    let what = || {
        format!(
            "abort producer {} epoch {} in {}-{}",
            spec.producer_id, spec.producer_epoch, spec.topic, spec.partition
        )
    };
    let code = response
        .markers
        .iter()
        .filter(|m| m.producer_id.0 == spec.producer_id)
        .flat_map(|m| m.topics.iter())
        .filter(|t| t.name.0.as_str() == spec.topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == spec.partition)
        .map(|p| p.error_code)
        .ok_or_else(|| Error::Protocol(format!("WriteTxnMarkers answered nothing: {}", what())))?;
    Error::check(code, what)
}
