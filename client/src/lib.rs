//! # minikafka-client
//!
//! An async, runtime-agnostic Kafka client: it talks over any
//! `futures_io::AsyncRead + AsyncWrite + Unpin` stream the caller connects, so it runs on smol,
//! on a thread-per-core runtime (a monoio shard), or over a backend's stream.
//!
//! - [`connection`]: framing, correlation ids, ApiVersions negotiation, pipelining.
//! - [`producer`]: per-partition batches sealed by count, bytes or linger; Kafka's murmur2
//!   partitioner; pipelined requests with ordering preserved; acks 0/1/all; compression.
//! - [`consumer`]: assign/seek/poll over one long-poll fetch, CRC verified on every batch.
//! - [`admin`]: create/list/describe/delete topics, list offsets.
//! - [`configs`]: describe and alter topic and broker configurations, delete records.
//! - [`txn_admin`]: list, describe and abort transactions (`kafka-transactions.sh`).
//! - [`schemas`]: a small Confluent Schema Registry REST client (`mk schemas`).
//! - [`group`]: consumer groups: the group consumer (classic protocol with `range` and
//!   `cooperative-sticky`, and the consumer protocol), commits, and group admin calls.
//! - [`mirror`]: `mk mirror`, topics, records and consumer positions copied to another broker.
//!
//! Batches are encoded with `minikafka_core::record::BatchBuilder` and checked with
//! `minikafka_core::record::validate_batch`, the same code the broker trusts.
//!
//! ```no_run
//! # #[cfg(feature = "smol")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use minikafka_client::{Producer, ProducerConfig, ProducerRecord, SmolRuntime};
//! smol::block_on(async {
//!     let stream = smol::net::TcpStream::connect("127.0.0.1:9092").await?;
//!     let (producer, driver) =
//!         Producer::connect(stream, ProducerConfig::default(), SmolRuntime).await?;
//!     let task = smol::spawn(driver.run()); // a monoio shard: `backend.spawn_local(driver.run())`
//!     let delivery = producer.send(ProducerRecord::new("events", "hello")).await?.await?;
//!     println!("partition {} offset {:?}", delivery.partition, delivery.offset);
//!     drop(producer); // the driver ends once every handle is gone and all is answered
//!     task.await;
//!     Ok(())
//! })
//! # }
//! # #[cfg(not(feature = "smol"))]
//! # fn main() {}
//! ```
//!
//! Contract: the library never spawns a task or reads a clock by itself except the producer's
//! driver, which reads `Instant::now()` and sleeps through the caller's [`Runtime`] (the caller
//! spawns that driver on its own executor), and the group consumer, which reads
//! `Instant::now()` to drive its heartbeats and sleeps through the caller's [`Runtime`].

pub mod acls;
pub mod admin;
pub mod compression;
pub mod configs;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod group;
pub mod mirror;
pub mod partitioner;
pub mod producer;
pub mod quotas;
pub mod runtime;
pub mod sasl;
pub mod schemas;
pub mod scram_users;
pub mod tls;
pub mod txn_admin;

pub use admin::{Admin, OffsetSpec};
pub use consumer::{
    Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, OffsetReset, SeekTo, TopicPartition,
};
pub use producer::{
    Acks, Connector, ConsumerGroupMetadata, Delivery, Producer, ProducerConfig, ProducerRecord,
};
pub use runtime::Runtime;
#[cfg(feature = "smol")]
pub use runtime::SmolRuntime;

pub use connection::{Connection, ConnectionConfig, InFlight};
pub use error::{Error, Result};
pub use group::{Assignor, GroupConfig, GroupConsumer, GroupProtocol, RebalanceListener};
pub use minikafka_core::record::Compression;
pub use minikafka_core::types::Offset;
