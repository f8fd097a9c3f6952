//! # minikafka-fuzz-targets
//!
//! One function per fuzz target: bytes in, the decoder's contract asserted, a panic when it is
//! broken. The cargo-fuzz crate (`fuzz/`, nightly) calls them from `fuzz_target!`, and
//! `tests/corpus_replay.rs` (stable, part of `cargo test --workspace`) runs every committed
//! corpus file through the same function, so the logic exists once.
//!
//! The contracts (I10 and the validators' own):
//! - No input panics, hangs, or allocates a size it declares rather than carries.
//! - A request frame that passes the header checks and the bounded pre-check is decoded without
//!   `kafka-protocol` aborting, and decoding allocates at most
//!   [`minikafka_broker::protocol::decode_budget_bytes`] of the frame (measured by
//!   [`alloc_meter`], which the fuzz binaries and the replay test install as their allocator).
//! - A batch that validates iterates: every record parses, the count is the declared one.
//! - The recovery scanner's outcome does not depend on the window size, stays within its feed
//!   bound, and its valid prefix iterates as whole valid batches with a valid index.
//! - An index (offset or time) that validates loads, and looks up consistently.
//! - A consumer-group record or consumer-protocol blob that decodes re-encodes to the same value.
//! - A `__transaction_state` record that decodes re-encodes to the same value, and replaying
//!   any record into a transaction coordinator never panics.
//! - A SASL message (PLAIN, SCRAM, OAUTHBEARER) that parses re-encodes to the same value; the
//!   SCRAM machine never authenticates without the password (I40, I42).
//! - `ssl.principal.mapping.rules` text never panics; rules that parse map or refuse (I140, I141).
//! - A stored ACL file that decodes re-encodes to the same ACL set (I49).
//! - A `_schemas` record that decodes re-encodes to the same record, and replaying any record
//!   into a schema registry never panics.
//!
//! [`TARGETS`] lists every target by the name its cargo-fuzz binary and corpus folder carry.

pub mod acl;
pub mod alloc_meter;
pub mod group;
pub mod input;
pub mod protocol;
pub mod sasl;
pub mod sasl_session;
pub mod schema;
pub mod storage;
pub mod txn;

/// A fuzz target: runs one input, panics when a contract is broken.
pub type Target = fn(&[u8]);

/// Every target, by the name of its cargo-fuzz binary and of its folder under `fuzz/corpus/`.
pub static TARGETS: &[(&str, Target)] = &[
    ("frame_stream", protocol::frame_stream),
    ("request_decode", protocol::request_decode),
    ("produce_request", protocol::produce_request),
    ("record_batch", storage::record_batch),
    ("segment_recovery", storage::segment_recovery),
    ("offset_index", storage::offset_index),
    ("time_index", storage::time_index),
    ("group_records", group::group_records),
    ("consumer_protocol", group::consumer_protocol),
    ("mirror_progress", group::mirror_progress),
    ("txn_records", txn::txn_records),
    ("txn_data", txn::txn_data),
    ("sasl_plain", sasl::sasl_plain),
    ("scram", sasl::scram),
    ("oauthbearer", sasl::oauthbearer),
    ("oauthbearer_jwks", sasl::oauthbearer_jwks),
    ("ssl_principal", sasl::ssl_principal),
    ("sasl_session", sasl_session::sasl_session),
    ("schema_records", schema::schema_records),
    ("schema_http", schema::schema_http),
    ("acl_store", acl::acl_store),
];
