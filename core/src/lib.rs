//! # minikafka-core
//!
//! The sans-IO heart of minikafka. Every storage and protocol *decision* lives here; every byte
//! moved and every clock read lives in the callers (the broker and its backends).
//!
//! This crate never touches a file, a socket, a thread or a clock: a test
//! (`tests/no_io.rs`) fails the build if it does. Time enters as a value (`now_ms`).
//! Nothing here allocates a size taken from untrusted bytes without first checking it
//! against the bytes actually present.
//!
//! Modules, each with its contract at the top:
//! - [`types`]: newtypes for offsets and file positions.
//! - [`record`]: Kafka record batch format v2 — parse, validate, patch, iterate; the
//!   one-batch-per-partition rule of a Produce request.
//! - [`index`]: the sparse offset index — placement, floor lookup, validation.
//! - [`time_index`]: the time index — placement, floor lookup by timestamp, validation, and
//!   the search for the first record at or after a timestamp.
//! - [`fetch`]: plan a read from an index floor; the fetch budget (the first batch is always
//!   whole) shared by a segment's plan and a Fetch response.
//! - [`field_codec`]: the field encoding (classic or flexible) of the coordinators' key and
//!   value records, shared by `group::records` and `txn::records`.
//! - [`group`]: consumer groups: the coordinator (classic protocol, committed offsets) and the
//!   consumer protocol (KIP-848) group state machine, its assignors and its records.
//! - [`control_batch`]: transaction markers (COMMIT/ABORT control batches) as Kafka writes them.
//! - [`txn_index`]: the aborted-transaction index entry (`.txnindex`), Kafka's 34 bytes.
//! - [`txn`]: the transaction coordinator: transactional ids, producer epochs, the
//!   two-phase end of a transaction (Prepare record, markers, Complete record), its
//!   `__transaction_state` records.
//! - [`quota`]: client quotas — Kafka's defaults-and-overrides resolution, the sampled rate
//!   and the throttle time it earns.
//! - [`recovery`]: find where a segment's valid log ends; the sealed-segment decision table.
//! - [`segment_trust`]: whether a segment's indexes and tail read back at startup are
//!   trusted, and the trusted segment's state.
//! - [`roll`]: when the active segment is sealed and a new one started.
//! - [`retention`]: which segments to delete.
//! - [`compaction`]: log compaction — which offsets to clean, the key map within a memory
//!   budget, which records survive, the batch rewrite and the segment swap's recovery table.
//! - [`partition`]: one partition's log as a sans-IO state machine (placement, dense
//!   offsets, group commit, index placement, log start, rolls, retention); the broker drives it.
//! - [`producer`]: idempotent producer state per partition (sequence checks, duplicates,
//!   epoch fencing), which batches may share a coalesced write, and its snapshot encoding.
//! - [`shard_sync`]: the phase barrier and shutdown signal shared by shard threads.
//! - [`wakeup`]: the long-poll protocol (no lost wakeups), on the [`sync`] shim.
//! - [`backend`]: the I/O interface that backends implement and the broker drives.
//! - [`auth`]: SASL mechanisms (PLAIN, SCRAM, OAUTHBEARER) as parsers and machines, Kafka's
//!   JAAS syntax, and the ACL decision as a pure function.
//! - [`error_code`]: the one table of Kafka error codes ([`error_code::ErrorCode`]).
//! - [`clock`]: the backend's monotonic time ([`clock::MonoTime`]), as a value.
//! - [`record_errors`]: which records of a produced batch break the topic's record rules
//!   (KIP-467's per-record errors).
//! - [`authorized_operations`]: KIP-430's authorized-operations bitfields, as a broker
//!   without an authorizer answers them.
//! - `mutants` (feature `sim-mutants`, the simulator's only): deliberately broken variants of
//!   the transaction logic that the simulator's model check must catch.
//!
//! Invariants (I1, I2, …) are numbered in `docs/DESIGN.md` and cited where they are enforced.
#![warn(missing_docs)]

pub mod accept;
pub mod auth;
pub mod authorized_operations;
pub mod backend;
pub mod clock;
pub mod compaction;
pub mod control_batch;
pub mod error_code;
pub mod fetch;
pub mod field_codec;
pub mod group;
pub mod index;
#[cfg(feature = "sim-mutants")]
pub mod mutants;
pub mod partition;
pub mod producer;
pub mod quota;
pub mod record;
pub mod record_errors;
pub mod recovery;
pub mod retention;
pub mod roll;
pub mod segment_trust;
pub mod shard_sync;
pub mod sync;
pub mod time_index;
pub mod txn;
pub mod txn_index;
pub mod types;
pub mod wakeup;
