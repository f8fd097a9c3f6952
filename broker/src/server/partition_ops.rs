//! The operations a shard runs on a partition it owns, as data: what travels through a shard's
//! inbox when the partition lives on another shard.
//!
//! Contract:
//! - One operation type, [`PartitionOp`]: one variant per kind (append, read, list offsets,
//!   open, remove, describe, reconfigure, delete records), each carrying its inputs and the
//!   [`Reply`] slot its answer goes to. A [`PartitionCall`] names the partition
//!   ([`PartitionKey`]) it is for.
//! - Everything here is `Send` (it crosses shard threads) and holds no partition log (those
//!   stay on their shard, I1). Running a call is the owner's business
//!   ([`ShardState::dispatch`](super::shard::ShardState::dispatch)).
//! - A dropped call (its shard stopped taking calls) drops its reply: the caller then answers
//!   with its "unavailable" value (UNKNOWN_SERVER_ERROR), never waits forever.
//! - Adding a kind is a new variant here and its arm in `ShardState::execute`; routing and
//!   shipping stay as they are. Group requests are one: [`PartitionOp::Group`], addressed to
//!   the `__consumer_offsets` partition whose coordinator owns the group.

use std::sync::Arc;

use futures::channel::oneshot;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{GroupRequest, GroupResponse};
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

/// An operation for the shard owning a partition, with the slot for its answer.
pub enum PartitionOp {
    /// Append one record batch and wake the partition's waiters (I7).
    Append {
        /// The batch, as the client sent it (validated by the log).
        batch: Vec<u8>,
        /// Where the offsets (or the error code) go.
        reply: Reply<Result<Appended, ErrorCode>>,
    },
    /// Read whole batches from `fetch_offset`, at most `max_bytes` (the first batch whole).
    Read {
        /// The first offset wanted.
        fetch_offset: i64,
        /// The partition's byte budget.
        max_bytes: usize,
        /// Where the bytes go.
        reply: Reply<PartitionRead>,
    },
    /// Answer a ListOffsets query for `timestamp` (see `ShardState::list_offset`).
    ListOffsets {
        /// The target timestamp, or -1, -2, -3, -4 (latest, earliest, max timestamp,
        /// earliest local).
        timestamp: i64,
        /// Where `(error code, offset, timestamp)` goes.
        reply: Reply<ListedOffset>,
    },
    /// Open (creating its directory) the partition's log.
    Open {
        /// Its log settings.
        config: LogConfig,
        /// Its wakeup signal (the same `Arc` the registry holds).
        signal: Arc<PartitionSignal>,
        /// Whether the previous run shut down cleanly.
        clean_shutdown: bool,
        /// Where success (or the reason it failed) goes.
        reply: Reply<Result<(), String>>,
    },
    /// Close the partition's log and delete its directory.
    Remove {
        /// Where success (or the reason it failed) goes.
        reply: Reply<Result<(), String>>,
    },
    /// Replace the live log's configuration (AlterConfigs).
    Reconfigure {
        /// The new settings (validated by the caller and again by the log).
        config: LogConfig,
        /// Where success (or the reason it failed) goes.
        reply: Reply<Result<(), String>>,
    },
    /// Move the log start offset to `before` and delete the segments below it
    /// (DeleteRecords); -1 means the high watermark.
    DeleteRecords {
        /// The new log start offset, or -1.
        before: i64,
        /// Where `(error code, low watermark)` goes; the low watermark is -1 on an error.
        reply: Reply<(ErrorCode, i64)>,
    },
    /// Describe the partition: its size, offsets and live idempotent producers (what
    /// DescribeLogDirs, OffsetForLeaderEpoch and DescribeProducers answer from).
    Describe {
        /// Where the description goes.
        reply: Reply<PartitionDescription>,
    },
    /// Run a group request on the coordinator of this `__consumer_offsets` partition.
    Group {
        /// The request, in core's form.
        request: GroupRequest,
        /// Where the answer (or why the coordinator could not take it) goes.
        reply: Reply<Result<GroupResponse, ErrorCode>>,
    },
}

/// An operation addressed to one partition: the message of a shard inbox.
pub struct PartitionCall {
    /// The partition.
    pub key: PartitionKey,
    /// What to do with it.
    pub op: PartitionOp,
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
}
