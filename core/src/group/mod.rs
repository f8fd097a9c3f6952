//! Consumer groups.
//!
//! - [`consumer`]: one group under the consumer protocol (KIP-848): heartbeats, member
//!   epochs, incremental reconciliation, describe.
//! - [`assignor`]: its server-side assignors, `uniform` and `range`.
//! - [`consumer_records`]: the records of its durable state, in Kafka's schemas.

pub mod assignor;
pub mod consumer;
pub mod consumer_records;
