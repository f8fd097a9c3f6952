//! Errors of the partition log.
//!
//! Contract: every failure the log reports is one [`LogError`] variant; I/O errors keep the
//! raw OS error so ENOSPC and EIO stay distinguishable; each maps to a Kafka error code.

use std::io;
use std::path::PathBuf;

use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{BatchCheck, BatchError};
use minikafka_core::record_errors::{batch_error_code, batch_error_message, RecordFailure};
use minikafka_core::types::Offset;

/// What can go wrong in the partition log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The batch failed validation (I3); nothing was written.
    #[error("corrupt batch: {0}")]
    Corrupt(#[from] BatchError),
    /// The fetch offset lies outside `[log_start_offset, high_watermark]`.
    #[error("offset {requested} is out of range [{log_start_offset}, {high_watermark}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: Offset,
        /// The first offset still in the log.
        log_start_offset: Offset,
        /// The offset the next append will get.
        high_watermark: Offset,
    },
    /// A sync failed earlier: the data it covered may be gone, so the partition takes no more
    /// writes until it is reopened and recovered (I8).
    #[error("partition log {dir:?} is offline for writes after a failed sync ({cause:?}, os error {raw_os_error:?})")]
    Offline {
        /// The partition's directory.
        dir: PathBuf,
        /// Kind of the sync error that took it offline.
        cause: io::ErrorKind,
        /// The OS error number of that sync error, if any (EIO is 5).
        raw_os_error: Option<i32>,
    },
    /// Bytes below a segment's published size do not parse: the disk changed them (I2, I3).
    #[error("segment {path:?} is corrupt below its published size: {source}")]
    SegmentCorrupt {
        /// The segment's log file.
        path: PathBuf,
        /// What the fetch planner found.
        source: minikafka_core::fetch::FetchError,
    },
    /// The log was closed.
    #[error("partition log {0:?} is closed")]
    Closed(PathBuf),
    /// An I/O error, unchanged from the backend (the OS error number is kept).
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// A configuration value is unusable.
    #[error("invalid log configuration {key}: {reason}")]
    Config {
        /// The Kafka configuration key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A metadata file on disk cannot be parsed.
    #[error("bad metadata file {path:?} line {line}: {reason}")]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0 for the whole file).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A name (topic, configuration key or value) cannot be stored.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The offending name.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// An idempotent producer's batch was refused (sequence, epoch, transactions); nothing
    /// was written.
    #[error("producer batch refused: {0}")]
    Producer(#[from] minikafka_core::producer::ProducerError),
    /// The offset space of the partition is exhausted (an offset would pass `i64::MAX`).
    #[error("offset space exhausted")]
    OffsetOverflow,
    /// Records of the batch break the topic's record rules (a key on a compacted log, the
    /// CreateTime timestamp window): the batch is refused whole (I61), and the failing records
    /// go back to the producer (KIP-467).
    #[error("{}", batch_error_message(.0))]
    RecordRules(Vec<RecordFailure>),
    /// A compressed batch's records do not inflate (or inflate past the bound, I10), so the
    /// topic's record rules cannot be applied.
    #[error("records do not decode: {0}")]
    Undecodable(String),
}

impl LogError {
    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> ErrorCode {
        match self {
            LogError::Corrupt(BatchError {
                check: BatchCheck::BatchTooLarge { .. },
                ..
            }) => ErrorCode::MESSAGE_TOO_LARGE,
            LogError::Corrupt(_) | LogError::Undecodable(_) => ErrorCode::CORRUPT_MESSAGE,
            LogError::RecordRules(failures) => batch_error_code(failures),
            LogError::OffsetOutOfRange { .. } => ErrorCode::OFFSET_OUT_OF_RANGE,
            LogError::Config { .. } => ErrorCode::INVALID_CONFIG,
            LogError::InvalidName { .. } => ErrorCode::INVALID_TOPIC_EXCEPTION,
            LogError::Producer(e) => e.kafka_error_code(),
            _ => ErrorCode::KAFKA_STORAGE_ERROR,
        }
    }

    /// The OS error number behind this error, if it came from the OS.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            LogError::Io(e) => e.raw_os_error(),
            LogError::Offline { raw_os_error, .. } => *raw_os_error,
            _ => None,
        }
    }
}
