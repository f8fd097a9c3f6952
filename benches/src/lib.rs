//! minikafka benches: criterion micro-benches (`benches/`) and the `mk-bench` harness
//! (`src/bin/mk-bench.rs`), whose experiments live here so they are unit-tested.
//!
//! Contract:
//! - Every experiment reports figures as ratios to baselines measured in the same run on the
//!   same machine (fio for the disk), with the load average at measurement time: the
//!   development machine is shared and noisy, so bare times mean little.
//! - Nothing here asserts a timing; tests check outcomes (records read back, counts) and the
//!   pure helpers (statistics, fio JSON, report formats).
//!
//! Modules:
//! - [`stats`]: median, min, max of repetitions.
//! - [`fio`]: running fio and parsing its JSON.
//! - [`machine`]: load average, kernel, filesystem.
//! - [`report`]: result rows as CSV, JSON Lines, Markdown.
//! - [`shard`]: one measurement on a fresh single shard of any backend.
//! - [`log_workloads`]: the partition-log workloads, generic over the backend.
//! - [`log_experiment`]: `mk-bench log`: the workloads on both backends against fio.
//! - [`broker_proc`]: the broker under test (a `minikafka` child, or an external one).
//! - [`net_baselines`]: loopback TCP stream and round-trip baselines.
//! - [`kafka_workloads`]: produce, consume, latency and scaling on our client.
//! - [`rdkafka_workloads`]: librdkafka producer workloads (saturation, sequential durable writes, pipeline depths).
//! - [`scale_load`]: many connections producing to and consuming from their share of partitions.
//! - [`plots`]: SVG charts of the sweeps.
//! - [`kafka_experiment`]: `mk-bench kafka`: the Kafka-level experiments against baselines.
//! - [`error`]: the harness error type, `BenchError`.

pub mod broker_proc;
pub mod doc_section;
pub mod error;
pub mod fio;
pub mod kafka_experiment;
pub mod kafka_workloads;
pub mod log_experiment;
pub mod log_workloads;
pub mod machine;
pub mod net_baselines;
pub mod plots;
pub mod proc_stats;
pub mod rdkafka_txn;
pub mod rdkafka_workloads;
pub mod report;
pub mod scale_load;
pub mod security_cost;
pub mod shard;
pub mod stats;
