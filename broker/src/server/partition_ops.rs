//! The operations a shard runs on the partitions it owns, and the one message that carries
//! an operation to the shard owning its partition.
//!
//! Contract:
//! - One typed method per operation kind, in [`LocalPartitions`] (append, read, list offsets,
//!   open, remove, reconfigure, delete records, describe, group request, transaction
//!   request): what the owner runs
//!   on a partition it owns. The shard implements it (`ShardState`); nothing else does.
//! - A caller on the owning shard calls the method directly. A caller on another shard sends
//!   a [`PartitionCall`] through the owner's inbox: the partition's [`PartitionKey`] and a
//!   closure that calls that same method there and sends the answer back. So adding a kind
//!   is one method here, its body on the shard, and a typed entry point that routes it
//!   (`ShardState::on_owner`); there is no enum to keep in step.
//! - A call is `Send` (it crosses shard threads: its inputs and reply slot are `Send`) and
//!   holds no partition log (those stay on their shard, I1). It names the trait, never the
//!   shard's state, so the state every shard shares (`shared`, which holds the inboxes) does
//!   not import the shard.
//! - A dropped call (its shard stopped taking calls) drops its reply: the caller then answers
//!   with its "unavailable" value (UNKNOWN_SERVER_ERROR), never waits forever.

use std::sync::Arc;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use minikafka_core::control_batch::TxnMarker;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{GroupRequest, GroupResponse};
use minikafka_core::record_errors::RecordFailure;
use minikafka_core::txn::{TxnRequest, TxnResponse};
use minikafka_core::txn_index::AbortedTxn;
use minikafka_core::wakeup::PartitionSignal;

use crate::log::LogConfig;

/// Where an operation's answer goes.
pub type Reply<T> = oneshot::Sender<T>;

/// A partition of a topic: what [`super::routing::owner_shard`] maps to a shard.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// The topic's name.
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

/// The operations on a partition this shard owns, one typed method each (see the module
/// documentation). Each answers for `key`; a partition this shard does not have open
/// answers UNKNOWN_TOPIC_OR_PARTITION (or its kind's equivalent).
pub trait LocalPartitions {
    /// Appends one record batch (validated by the log) and wakes the partition's waiters
    /// (I7): the offsets, or the error code.
    fn append(
        &self,
        key: PartitionKey,
        batch: Bytes,
    ) -> LocalBoxFuture<'_, Result<Appended, AppendRefusal>>;

    /// Appends one transaction marker (a COMMIT or ABORT control batch, Kafka's format) and
    /// wakes the partition's waiters (the LSO may have moved, I69): the marker's offset once
    /// durable under the partition's flush policy (I8), or the error code
    /// (INVALID_PRODUCER_EPOCH for an older producer epoch, TRANSACTION_COORDINATOR_FENCED
    /// for an older coordinator epoch, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR…).
    fn write_marker(
        &self,
        key: PartitionKey,
        marker: TxnMarker,
    ) -> LocalBoxFuture<'_, Result<i64, ErrorCode>>;

    /// Reads whole batches from `fetch_offset`, at most `max_bytes` (the first batch whole);
    /// `read_committed`: nothing at or past the LSO, with the aborted transactions (I69).
    fn read(
        &self,
        key: PartitionKey,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> LocalBoxFuture<'_, PartitionRead>;

    /// Answers a ListOffsets query for `timestamp`, or -1, -2, -3, -4 (latest, earliest, max
    /// timestamp, earliest local); latest is the LSO when `read_committed` (I69).
    fn list_offset(
        &self,
        key: PartitionKey,
        timestamp: i64,
        read_committed: bool,
    ) -> LocalBoxFuture<'_, ListedOffset>;

    /// Opens (creating its directory) the partition's log and registers it here.
    fn open(
        &self,
        key: PartitionKey,
        config: LogConfig,
        signal: Arc<PartitionSignal>,
        clean_shutdown: bool,
    ) -> LocalBoxFuture<'_, Result<(), String>>;

    /// Closes the partition's log and deletes its directory.
    fn remove(&self, key: PartitionKey) -> LocalBoxFuture<'_, Result<(), String>>;

    /// Replaces the live log's configuration (AlterConfigs).
    fn reconfigure(&self, key: PartitionKey, config: LogConfig) -> Result<(), String>;

    /// Moves the log start offset to `before` and deletes the segments below it
    /// (DeleteRecords; -1 means the high watermark): `(error code, low watermark)`.
    fn delete_records(
        &self,
        key: PartitionKey,
        before: i64,
    ) -> LocalBoxFuture<'_, (ErrorCode, i64)>;

    /// Describes the partition: its size, offsets and live idempotent producers.
    fn describe(&self, key: PartitionKey) -> PartitionDescription;

    /// Runs a group request on the coordinator of this `__consumer_offsets` partition.
    fn group(
        &self,
        key: PartitionKey,
        request: GroupRequest,
    ) -> LocalBoxFuture<'_, Result<GroupResponse, ErrorCode>>;

    /// Runs a transaction request on the coordinator of this `__transaction_state` partition.
    fn txn(
        &self,
        key: PartitionKey,
        request: TxnRequest,
    ) -> LocalBoxFuture<'_, Result<TxnResponse, ErrorCode>>;
}

/// What a [`PartitionCall`] runs on the owner: one [`LocalPartitions`] method, its answer
/// sent to the caller's reply slot.
pub type RunOnOwner =
    Box<dyn for<'a> FnOnce(&'a dyn LocalPartitions) -> LocalBoxFuture<'a, ()> + Send>;

/// An operation addressed to one partition of another shard: the message of a shard inbox.
pub struct PartitionCall {
    /// The partition (its owner's inbox is where the call goes).
    pub key: PartitionKey,
    /// The operation, run by the owner.
    pub run: RunOnOwner,
}

impl PartitionCall {
    /// A call for `key` that runs `run` on the owner (a function, so the closure's
    /// signature is the higher-ranked one [`RunOnOwner`] needs).
    pub fn new<F>(key: PartitionKey, run: F) -> PartitionCall
    where
        F: for<'a> FnOnce(&'a dyn LocalPartitions) -> LocalBoxFuture<'a, ()> + Send + 'static,
    {
        PartitionCall {
            key,
            run: Box::new(run),
        }
    }
}

/// The answer of a partition read.
#[derive(Debug, Clone, Default)]
pub struct PartitionRead {
    /// Kafka error code ([`ErrorCode::NONE`] = none).
    pub error_code: ErrorCode,
    /// The high watermark (-1 when unknown).
    pub high_watermark: i64,
    /// The log start offset (-1 when unknown).
    pub log_start_offset: i64,
    /// The last stable offset (-1 when unknown; I67).
    pub last_stable_offset: i64,
    /// For a read_committed read, the aborted transactions overlapping the bytes.
    pub aborted: Vec<AbortedTxn>,
    /// Whole record batches.
    pub bytes: bytes::Bytes,
}

impl PartitionRead {
    /// A read that failed with `error_code` before reaching the log.
    pub fn failed(error_code: ErrorCode) -> PartitionRead {
        PartitionRead {
            error_code,
            high_watermark: -1,
            log_start_offset: -1,
            last_stable_offset: -1,
            aborted: Vec::new(),
            bytes: bytes::Bytes::new(),
        }
    }
}

/// A successful produce to one partition.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    /// Offset of the batch's first record.
    pub base_offset: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    /// The time the batch was stamped with on a `LogAppendTime` topic, else -1.
    pub log_append_time_ms: i64,
}

/// Why a produce to one partition was refused: Kafka's error code and, for a batch refused
/// by the topic's record rules (I61), its failing records (KIP-467's `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRefusal {
    /// The partition's error code.
    pub code: ErrorCode,
    /// The failing records, in batch order; empty when the refusal is not about records.
    pub record_failures: Vec<RecordFailure>,
}

impl From<ErrorCode> for AppendRefusal {
    fn from(code: ErrorCode) -> Self {
        AppendRefusal {
            code,
            record_failures: Vec::new(),
        }
    }
}

/// A ListOffsets answer: `(error code, offset, timestamp)`; offset and timestamp -1 when none.
pub type ListedOffset = (ErrorCode, i64, i64);

/// What the owner knows of one partition, for the describe APIs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionDescription {
    /// [`ErrorCode::NONE`], or why the partition could not be described.
    pub error_code: ErrorCode,
    /// Bytes of all its segment files.
    pub size_bytes: u64,
    /// The first offset in the log.
    pub log_start_offset: i64,
    /// The offset the next append gets (the high watermark: a single node has no lag).
    pub log_end_offset: i64,
    /// Its idempotent producers whose state is live, least recently appended first.
    pub producers: Vec<ProducerDescription>,
}

impl PartitionDescription {
    /// A description that failed with `error_code` before reaching the log.
    pub fn failed(error_code: ErrorCode) -> PartitionDescription {
        PartitionDescription {
            error_code,
            log_start_offset: -1,
            log_end_offset: -1,
            ..PartitionDescription::default()
        }
    }
}

/// One idempotent producer of a partition, as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerDescription {
    /// The producer id.
    pub producer_id: i64,
    /// Its newest epoch.
    pub epoch: i16,
    /// The last sequence of its last batch.
    pub last_sequence: i32,
    /// The max timestamp of its last batch.
    pub last_timestamp_ms: i64,
    /// The epoch of the coordinator of its last marker here (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its ongoing transaction (-1: none).
    pub current_txn_start_offset: i64,
}
