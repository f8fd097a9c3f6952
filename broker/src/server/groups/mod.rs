//! Consumer groups on the broker side: the internal offsets topic, and the per-shard hosts
//! that drive `core::group`'s coordinators (one per `__consumer_offsets` partition).
//!
//! Modules, a concept each:
//! - [`offsets_topic`]: `__consumer_offsets`, created at startup, protected from users.
//! - [`offsets_log`]: coordinator records to record batches and back (startup replay).
//! - [`host`]: one shard's coordinators, their writer and timer tasks.
//! - [`route`]: group id → offsets partition → owning shard; submitting a request there.
//!
//! The translation between kafka-protocol messages and core's group types lives with the
//! other handlers (`handlers::group_*`).

pub mod host;
pub mod offsets_log;
pub mod offsets_topic;
pub mod route;
