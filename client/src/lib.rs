//! # minikafka-client
//!
//! Will own the async, runtime-agnostic Kafka client used by our tools and benches: a producer
//! (per-partition batches sealed by count, bytes or linger; Kafka's murmur2 partitioner;
//! pipelined requests with ordering preserved; acks 0/1/all; compression) and a consumer
//! (assign/seek/poll over one long-poll fetch, CRC verified on every batch), plus the `mk` CLI.
//! Batches are encoded with `minikafka_core::record::BatchBuilder` and checked with
//! `minikafka_core::record::validate_batch`, the same code the broker trusts.
