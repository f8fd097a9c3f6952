//! The harness's error type.

use std::io;

use minikafka_broker::log::LogError;

use crate::fio::FioError;

/// What can stop a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file or shard operation of the harness itself failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The partition log failed during a workload.
    #[error("partition log: {0}")]
    Log(#[from] LogError),
    /// A fio baseline could not be measured.
    #[error(transparent)]
    Fio(#[from] FioError),
    /// A workload finished but its outcome contradicts what it did (e.g. a read returned
    /// fewer records than were appended).
    #[error("workload check failed: {0}")]
    Check(String),
    /// Results could not be serialized.
    #[error("serializing results: {0}")]
    Json(#[from] serde_json::Error),
    /// The Kafka client failed talking to the broker under test.
    #[error("kafka client: {0}")]
    Client(#[from] minikafka_client::Error),
    /// librdkafka failed (configuration, or a produce it could not complete).
    #[error("librdkafka: {0}")]
    Rdkafka(#[from] rdkafka::error::KafkaError),
    /// The broker under test could not be started or found.
    #[error("broker: {0}")]
    Broker(String),
    /// A plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
}
