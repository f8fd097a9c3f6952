//! Prometheus metrics: what is counted, and how it becomes a page.
//!
//! Contract:
//! - Counting is shard-local ([`counters::ShardMetrics`] per shard, [`counters::SyncStats`]
//!   per partition log): `Cell`s, no lock or atomic on a hot path, one-line calls from the
//!   connection, shard and log code.
//! - A scrape asks every shard for a [`snapshot::ShardSnapshot`] (plain numbers, `Send`):
//!   `crate::server::metrics_endpoint` does the asking and serves the page over HTTP.
//!   Each shard takes those requests on its [`inboxes::MetricsInboxes`] slot.
//! - [`exposition::render`] turns the snapshots into the Prometheus text format; [`http`]
//!   judges the request heads. Both pure.
//! - The schema registry's requests and sizes ([`registry_counters`]) are counted apart,
//!   shared by all shards (its HTTP listener is off the Kafka path).
//! - Never: reads a clock (durations are measured by callers on the backend's clock).

pub mod counters;
pub mod exposition;
pub mod histogram;
pub mod http;
pub mod inboxes;
pub mod registry_counters;
pub mod snapshot;

pub use counters::{ConnectionError, ShardMetrics, SyncStats};
