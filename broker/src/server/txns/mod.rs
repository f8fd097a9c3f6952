//! Transactions on the broker side: the internal `__transaction_state` topic and the
//! per-shard hosts that drive `core::txn`'s coordinators (one per state partition).
//!
//! Modules, a concept each:
//! - [`state_topic`]: `__transaction_state`, created at startup, protected from users.
//! - [`state_log`]: coordinator records to record batches and back (startup replay).
//! - [`coordinator_epoch`]: the coordinators' epoch in every marker, one more per start.
//! - [`host`]: one shard's coordinators, their writer, marker and timer tasks.
//! - [`markers`]: COMMIT/ABORT markers written to the partitions of a transaction.
//! - [`route`]: transactional id → state partition → owning shard; submitting there.
//! - [`shard_io`]: what a shard gives its hosts (appends, markers, producer ids); their start.
//! - [`metrics`]: the shard's transaction counters.
//!
//! The translation between kafka-protocol messages and core's transaction types lives with
//! the other handlers (`handlers::txn_*`). Invariants I62–I66 (docs/DESIGN.md,
//! "Transactions: coordinator hosting").

pub mod coordinator_epoch;
pub mod host;
pub mod markers;
pub mod metrics;
pub mod route;
pub mod shard_io;
pub mod state_log;
pub mod state_topic;
