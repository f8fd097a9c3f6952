//! # minikafka-schema
//!
//! The core of minikafka's built-in, Confluent-compatible schema registry: no I/O, no clock.
//! The broker's HTTP side (`schema.registry.listeners`) turns REST requests into this crate's
//! getters and [`registry::Registry::handle_write`] inputs, appends the records it asks for to
//! the compacted `_schemas` topic, and replays that topic at startup.
//!
//! A crate of its own rather than `core/src/schema/`: it needs `apache-avro`, `serde_json`,
//! `protox-parse` and `prost-types`, which `minikafka-core` (the hot path of every partition) has
//! no reason to compile.
//!
//! - [`records`]: the `_schemas` key and value JSON, byte-compatible with Confluent's (I51).
//! - [`state`]: the durable state, changed only by applying records (I50, I52, I53).
//! - [`registry`]: the machine: reads, writes answered after their append is durable (I54),
//!   deletes soft then permanent (I55).
//! - [`format`](mod@format): per schema type parsing, canonical forms and compatibility checks;
//!   [`protobuf`] for `.proto` schemas.
//! - [`http`]: HTTP/1.1 framing of the REST listener (`httparse`), sans-IO.
//! - [`rest`]: the REST API's routes, sans-IO: a request in, a response or a write out.
//! - [`types`], [`error`]: the vocabulary and Confluent's error codes.

pub mod error;
pub mod format;
pub mod http;
pub mod protobuf;
pub mod records;
pub mod registry;
pub mod rest;
pub mod state;
pub mod types;

pub use error::RegistryError;
pub use registry::{Registry, RequestId, SchemaInput, WriteReply, WriteRequest};
pub use types::{CompatibilityLevel, Mode, SchemaReference, SchemaType, VersionSpec};
