//! The built-in schema registry on the broker side: the Confluent Schema Registry REST API
//! over HTTP (`schema.registry.listeners`), with its state kept in the `_schemas` topic.
//! The registry itself (records, state, compatibility, REST routes, HTTP framing) is the
//! sans-IO crate `minikafka-schema`; this module gives it storage and sockets.
//!
//! Modules, a concept each:
//! - [`topic`]: `_schemas`, created at startup when the registry is on, internal.
//! - [`host`]: the registry machine on the shard owning `_schemas`-0: replay at startup, its
//!   writes appended through that shard's append path and answered once durable (I54).
//! - [`replay`]: `_schemas` read back into the machine at startup, bad records skipped.
//! - [`auth`]: HTTP basic auth against the broker's SCRAM users (I127).
//! - [`listener`]: the HTTP listener on that shard's backend, bounded in every dimension.

pub mod auth;
pub mod host;
pub mod listener;
pub mod replay;
pub mod topic;
