//! The client's error type.
//!
//! Contract: every fallible call in this crate returns [`Error`]. Errors the broker reports with
//! a Kafka error code become [`Error::Kafka`], carrying kafka-protocol's [`ResponseError`] (which
//! names the code and says whether it is retriable) and where it was reported. The type is
//! `Clone` so one failed batch can fail each of its records' deliveries.

use std::sync::Arc;

pub use kafka_protocol::error::ResponseError;
use minikafka_core::record::BatchError;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to a broker.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Error {
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(Arc<std::io::Error>),
    /// The broker closed the connection.
    #[error("connection closed by the broker")]
    ConnectionClosed,
    /// A request could not be encoded or a response could not be decoded.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A response frame announced a size beyond the configured limit (I10).
    #[error("response frame of {size_bytes} bytes exceeds the limit of {limit_bytes}")]
    FrameTooLarge {
        /// The announced size.
        size_bytes: i64,
        /// The configured limit.
        limit_bytes: usize,
    },
    /// The broker and this client share no version of an API.
    #[error("broker does not support API {api_key} in versions we can speak")]
    UnsupportedApi {
        /// The Kafka API key.
        api_key: i16,
    },
    /// The broker answered with a Kafka error code.
    #[error("{context}: {error} (error code {code})")]
    Kafka {
        /// The decoded error.
        error: ResponseError,
        /// The raw error code.
        code: i16,
        /// What failed: the API, and the topic/partition where one applies.
        context: String,
    },
    /// A fetched record batch failed validation (bad CRC, bad lengths, …).
    #[error("corrupt record batch in {topic}-{partition}: {source}")]
    CorruptBatch {
        /// Topic of the batch.
        topic: String,
        /// Partition of the batch.
        partition: i32,
        /// What the validator found.
        source: BatchError,
    },
    /// Compressing or decompressing a records section failed.
    #[error("compression error: {0}")]
    Compression(String),
    /// The topic is unknown to the broker, or the partition is out of range.
    #[error("unknown topic or partition: {0}")]
    UnknownTopicOrPartition(String),
    /// The caller asked for something this client cannot do (bad configuration or argument).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The producer's background driver stopped before answering.
    #[error("producer closed")]
    ProducerClosed,
    /// A transactional producer's batch or request failed. `fatal`: the producer was fenced
    /// (or refused for good) and must be dropped; otherwise the transaction must be aborted
    /// with `abort_transaction`, after which the producer can begin a new one.
    #[error("transaction {}: {cause}", if *.fatal { "fatal error" } else { "abortable error" })]
    Transaction {
        /// True when the producer cannot continue.
        fatal: bool,
        /// What failed.
        cause: Box<Error>,
    },
    /// A transactional call came in a state that does not allow it (commit without begin, a
    /// send outside a transaction, …).
    #[error("illegal transaction state: {0}")]
    IllegalState(String),
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::ConnectionClosed
        } else {
            Error::Io(Arc::new(err))
        }
    }
}

impl Error {
    /// Maps a Kafka error code to `Ok(())` (code 0) or [`Error::Kafka`].
    pub fn check(code: i16, context: impl FnOnce() -> String) -> Result<()> {
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(ResponseError::UnknownTopicOrPartition) => {
                Err(Error::UnknownTopicOrPartition(context()))
            }
            Some(error) => Err(Error::Kafka {
                error,
                code,
                context: context(),
            }),
        }
    }

    /// The Kafka error code behind this error, if the broker sent one.
    pub fn kafka_code(&self) -> Option<i16> {
        match self {
            Error::Kafka { code, .. } => Some(*code),
            Error::UnknownTopicOrPartition(_) => Some(3),
            Error::Transaction { cause, .. } => cause.kafka_code(),
            _ => None,
        }
    }

    /// True when the connection itself failed (reset, closed, refused): the request may or
    /// may not have reached the broker, and a new connection can cure it.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Error::Io(_) | Error::ConnectionClosed)
    }

    /// True for a transactional error after which the producer must be dropped.
    pub fn is_fatal_transaction_error(&self) -> bool {
        matches!(self, Error::Transaction { fatal: true, .. })
    }

    /// True for a transactional error that `abort_transaction` clears.
    pub fn is_abortable_transaction_error(&self) -> bool {
        matches!(self, Error::Transaction { fatal: false, .. })
    }

    pub(crate) fn protocol(err: impl std::fmt::Display) -> Self {
        Error::Protocol(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_to_kinds() {
        assert!(Error::check(0, || "x".into()).is_ok());
        let err = Error::check(1, || "fetch t-0".into()).expect_err("code 1 is an error");
        match &err {
            Error::Kafka {
                error,
                code,
                context,
            } => {
                assert_eq!(*error, ResponseError::OffsetOutOfRange);
                assert_eq!(*code, 1);
                assert_eq!(context, "fetch t-0");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(err.kafka_code(), Some(1));
        let err = Error::check(3, || "t".into()).expect_err("code 3");
        assert!(matches!(err, Error::UnknownTopicOrPartition(_)));
        let err = Error::check(9999, || "t".into()).expect_err("unknown code");
        assert!(matches!(
            err,
            Error::Kafka {
                error: ResponseError::Unknown(9999),
                ..
            }
        ));
    }
}
