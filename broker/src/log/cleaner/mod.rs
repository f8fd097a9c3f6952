//! The log cleaner (`cleanup.policy=compact`): core's compaction decisions carried out on the
//! backend, one cleaner per shard.
//!
//! Contract:
//! - Inputs: a shard's partition logs with their [`LogConfig`](crate::log::LogConfig)
//!   (`cleanup.policy`, the compaction settings), the broker's [`CleanerSettings`], `now_ms`
//!   as a value.
//! - Outputs: sealed segments rewritten with the latest record per key, tombstones gone after
//!   `delete.retention.ms`, offsets kept (I1, I23), swapped in crash-safely (I24).
//! - Never: reads a clock or does I/O outside the backend; touches the active segment.
//!
//! Modules:
//! - [`settings`]: the broker-level `log.cleaner.*` settings.
//! - [`clean`]: one cleaning of one partition.
//! - [`swap`]: the swap steps and their recovery at open.
//! - [`checkpoint`]: where the last cleaning ended, kept across restarts.
//!
//! The codecs for compressed batches are `minikafka_codec::KafkaCodecs`.

pub mod checkpoint;
pub mod clean;
pub mod settings;
pub mod swap;

pub use checkpoint::CleanerCheckpoint;
pub use clean::{clean_partition, load_checkpoint, CleanOutcome};
pub use settings::CleanerSettings;
