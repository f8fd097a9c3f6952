//! Consumer groups on the broker side: the internal offsets topic and (with the group
//! coordinator) the per-shard hosts that drive `core::group`'s state machines.
//!
//! Modules:
//! - [`offsets_topic`]: `__consumer_offsets`, created at startup, protected from users.

pub mod offsets_topic;
