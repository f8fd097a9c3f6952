//! # minikafka-broker
//!
//! Owns the shards, the partition log (segments, index, recovery, retention, flush policies;
//! generic over [`minikafka_core::backend::Backend`]), Kafka request handling and the
//! `minikafka` binary. Byte-level decisions are asked of `minikafka-core`; every I/O goes
//! through the backend chosen at build time (`uring` on Linux by default, `portable` otherwise).

pub mod config;
pub mod log;
pub mod metrics;
pub mod protocol;
pub mod server;
