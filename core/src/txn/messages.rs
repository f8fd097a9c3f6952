//! Decoded transaction requests and their answers, as the coordinator sees them.
//!
//! Core's own types, not kafka-protocol's: the broker decodes a request (after the bounded
//! pre-check, I10), copies the fields below into one of these, and encodes the answer at the
//! request's version. Errors are the codes Kafka's coordinator answers; mapping
//! PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for request versions whose clients predate it
//! (InitProducerId < v4, AddPartitionsToTxn/AddOffsetsToTxn < v2, EndTxn < v2) is the
//! encoder's job, as in Kafka's `KafkaApis`. FindCoordinator is answered by the broker, and an
//! InitProducerId without a transactional id never reaches this coordinator.

use crate::error_code::ErrorCode;

/// A topic and partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic partition.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// One decoded request for the transaction coordinator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnRequest {
    /// InitProducerId (API 22) with a transactional id.
    InitProducerId(InitProducerIdRequest),
    /// AddPartitionsToTxn (API 24): one transaction before v4, a batch from v4 (those of the
    /// batch that this coordinator owns).
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    /// AddOffsetsToTxn (API 25).
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    /// EndTxn (API 26).
    EndTxn(EndTxnRequest),
    /// DescribeTransactions (API 65), for the ids this coordinator owns.
    DescribeTransactions(DescribeTransactionsRequest),
    /// ListTransactions (API 66).
    ListTransactions(ListTransactionsRequest),
}

/// The answer to one [`TxnRequest`], same variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnResponse {
    /// Answer to InitProducerId.
    InitProducerId(InitProducerIdResponse),
    /// Answer to AddPartitionsToTxn.
    AddPartitionsToTxn(AddPartitionsToTxnResponse),
    /// Answer to AddOffsetsToTxn.
    AddOffsetsToTxn(AddOffsetsToTxnResponse),
    /// Answer to EndTxn.
    EndTxn(EndTxnResponse),
    /// Answer to DescribeTransactions.
    DescribeTransactions(DescribeTransactionsResponse),
    /// Answer to ListTransactions.
    ListTransactions(ListTransactionsResponse),
}

/// InitProducerId fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// The transactional id (non-null here).
    pub transactional_id: String,
    /// `transaction.timeout.ms`.
    pub transaction_timeout_ms: i32,
    /// v3+ (KIP-360): the producer id and epoch the producer has, when it is recovering from
    /// an error; `None` for a fresh producer (−1/−1 on the wire).
    pub expected: Option<(i64, i16)>,
}

/// InitProducerId answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitProducerIdResponse {
    /// Error.
    pub error_code: ErrorCode,
    /// Producer id (−1 on error).
    pub producer_id: i64,
    /// Producer epoch (−1 on error).
    pub producer_epoch: i16,
}

/// One transaction of an AddPartitionsToTxn request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsTxn {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// v4+ (KIP-890 part 1): only check that the partitions are in the transaction.
    pub verify_only: bool,
    /// The partitions.
    pub partitions: Vec<TopicPartition>,
}

/// AddPartitionsToTxn fields: one transaction (v0–v3) or several (v4+, sent by brokers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnRequest {
    /// The transactions, each handled on its own.
    pub transactions: Vec<AddPartitionsTxn>,
}

/// One transaction's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsTxnResult {
    /// The transactional id.
    pub transactional_id: String,
    /// One code per requested partition, in request order.
    pub partitions: Vec<(TopicPartition, ErrorCode)>,
}

/// AddPartitionsToTxn answer: one result per transaction, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddPartitionsToTxnResponse {
    /// Results.
    pub results: Vec<AddPartitionsTxnResult>,
}

/// AddOffsetsToTxn fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// The consumer group whose offsets the transaction will commit.
    pub group_id: String,
}

/// AddOffsetsToTxn answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddOffsetsToTxnResponse {
    /// Error.
    pub error_code: ErrorCode,
}

/// EndTxn fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndTxnRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// `true` to commit, `false` to abort.
    pub committed: bool,
    /// The request version: v5+ bumps the epoch on every transaction (KIP-890 part 2).
    pub version: i16,
}

/// EndTxn answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndTxnResponse {
    /// Error.
    pub error_code: ErrorCode,
    /// v5+: the producer id for the next transaction (−1 on error).
    pub producer_id: i64,
    /// v5+: the epoch for the next transaction (−1 on error).
    pub producer_epoch: i16,
}

/// DescribeTransactions fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeTransactionsRequest {
    /// The transactional ids.
    pub transactional_ids: Vec<String>,
}

/// One described transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedTransaction {
    /// Error (TRANSACTIONAL_ID_NOT_FOUND, COORDINATOR_LOAD_IN_PROGRESS, or NONE).
    pub error_code: ErrorCode,
    /// The transactional id.
    pub transactional_id: String,
    /// Kafka's state name (empty on error).
    pub state: String,
    /// Transaction timeout.
    pub timeout_ms: i32,
    /// When the transaction started (−1 none).
    pub start_ms: i64,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Partitions in the transaction, by topic (sorted).
    pub topics: Vec<(String, Vec<i32>)>,
}

/// DescribeTransactions answer, one entry per requested id, in request order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribeTransactionsResponse {
    /// The transactions.
    pub transactions: Vec<DescribedTransaction>,
}

/// ListTransactions fields (all filters conjunctive; empty = no filter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListTransactionsRequest {
    /// State names to include.
    pub state_filters: Vec<String>,
    /// Producer ids to include.
    pub producer_id_filters: Vec<i64>,
    /// v1+ (KIP-994): only transactions running at least this long; −1 none.
    pub duration_filter_ms: i64,
}

/// One listed transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// Kafka's state name.
    pub state: String,
}

/// ListTransactions answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListTransactionsResponse {
    /// Error (COORDINATOR_LOAD_IN_PROGRESS while loading).
    pub error_code: ErrorCode,
    /// State filters that name no state.
    pub unknown_state_filters: Vec<String>,
    /// Matching transactions, sorted by transactional id.
    pub transactions: Vec<ListedTransaction>,
}
