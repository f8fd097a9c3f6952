//! The group coordinator: consumer groups and their committed offsets, one [`Coordinator`]
//! per `__consumer_offsets` partition.
//!
//! # Contract (sans-IO, in quinn-proto's shape)
//!
//! The coordinator never reads a clock, never does I/O and never spawns: time enters as a
//! value (`now`, milliseconds), records leave as values, and the caller (the shard that owns
//! the offsets partition, its only writer) moves the bytes. Its methods are of four kinds:
//!
//! - **Getters** (`&self`): [`Coordinator::group`], [`Coordinator::group_state`],
//!   [`Coordinator::durable_state`], [`Coordinator::group_ids`], [`Coordinator::config`].
//!   No effect.
//! - **Inputs, `handle_*`** (`&mut self`, with `now` where time matters):
//!   [`Coordinator::handle_request`] (a decoded request and a caller-chosen
//!   [`RequestToken`]), [`Coordinator::handle_appended`] (the records of an [`Append`] are
//!   durable under the flush policy, or failed), [`Coordinator::handle_timeout`] (the
//!   deadline from `poll_timeout` has passed).
//! - **Mutators**: [`Coordinator::replay`], for startup: feed every record of the offsets
//!   partition in log order, then call `handle_timeout(now)` once to arm session timers.
//! - **Outputs, `poll_*`**, drained until `None` after every input:
//!   [`Coordinator::poll_append`] (records to append, in order, to this coordinator's
//!   offsets partition; report each with `handle_appended` in the same order),
//!   [`Coordinator::poll_response`] (answers, each released only once the records it depends
//!   on are durable), [`Coordinator::poll_timeout`] (the next deadline and why; call
//!   `handle_timeout` when it passes, and poll again after every input).
//!
//! Also an input: [`Coordinator::handle_topic_metadata`] (topic names and partition counts,
//! which the consumer protocol's assignors need). The caller chooses request tokens and must
//! report appends in the order it polled them (their log order).
//!
//! Driving it, in short:
//! ```text
//! at startup:   for (key, value) in log { c.replay(key, value)? }   then c.handle_timeout(now)
//! on a request: c.handle_request(token, request, now)
//! on a durable append (in poll order): c.handle_appended(id, Ok(()) | Err(e), now)
//! on a timer:   c.handle_timeout(now)
//! after each:   while let Some(a) = c.poll_append()   { append a.records, then report a.id }
//!               while let Some((t, r)) = c.poll_response() { answer t with r }
//!               re-arm the timer at c.poll_timeout()
//! ```
//!
//! # What is durable
//!
//! Durable state is exactly what the records say, and it changes only by replaying records
//! (I21): the coordinator appends records, and applies them with the same code as
//! [`Coordinator::replay`] when `handle_appended` reports them durable. A failed append
//! changes no durable state; the answers that depended on it get an error
//! ([`AppendError::code`]).
//! - Committed offsets (OffsetCommitKey/OffsetCommitValue) and their deletions.
//! - Per classic group, GroupMetadataValue as Kafka writes it: after each completed
//!   SyncGroup (generation, protocol, leader, members with subscriptions and assignments),
//!   when a static member is replaced, and when the group becomes empty; a tombstone when
//!   the group is deleted or expires (it stays deleted on replay).
//! - Consumer-protocol (KIP-848) groups: their own record types (key versions 3–8), see
//!   [`consumer`] (the group state machine), [`assignor`] (its server assignors) and
//!   [`consumer_records`] (the records' schemas).
//!
//! Transient, rebuilt by the protocol and never written: pending JoinGroup/SyncGroup
//! answers, members that joined since the last completed rebalance, session, join and sync
//! deadlines, and member ids handed out with MEMBER_ID_REQUIRED. After a restart a group
//! comes back Stable (or Empty) with its stored members, whose sessions start at the first
//! `now` seen.
//!
//! # Invariants (docs/DESIGN.md)
//! - I20: a commit is acknowledged only once its record is durable.
//! - I21: coordinator durable state equals the replay of the records it emitted.
//! - I73–I76: transactional offsets (TxnOffsetCommit) stay pending per (group, producer)
//!   until their transaction's marker, durably; see [`txn_offsets`].
//! - I22: within one generation a partition has at most one owner: only members of the
//!   current generation get an assignment (from that generation's leader) or may commit;
//!   stale generations and replaced members are fenced.

pub mod assignor;
mod classic;
mod classic_protocol;
mod codes;
pub mod consumer;
pub mod consumer_records;
mod coordinator;
mod handles;
mod messages;
mod offsets;
pub mod records;
pub mod state;
mod txn_offsets;

pub use classic::ClassicGroup;
pub use codes::ErrorCode;
pub use coordinator::{
    Append, AppendError, AppendKind, CommittedOffset, Coordinator, DurableGroup, DurableState,
    TimeoutReason,
};
pub use handles::{AppendId, Millis, RequestToken};
pub use messages::*;

/// The coordinator's settings, named after Kafka's broker configs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms` (Kafka: 6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (Kafka: 1,800,000).
    pub max_session_timeout_ms: i32,
    /// `group.max.size`: members per group, counting ids handed out by MEMBER_ID_REQUIRED
    /// that have not joined yet. Kafka's default is unbounded; ours is 1000 so a flood of
    /// joins has a bounded cost.
    pub max_size: usize,
    /// `group.initial.rebalance.delay.ms` (Kafka: 3000): how long the first rebalance of an
    /// empty group waits for more members (extended per join, up to the rebalance timeout).
    pub initial_rebalance_delay_ms: i64,
    /// `offset.metadata.max.bytes` (Kafka: 4096).
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms (Kafka: 7 days): offsets of an empty group expire
    /// this long after the group became empty (or after the commit, for groups never joined).
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (Kafka: 600,000).
    pub offsets_retention_check_interval_ms: i64,
    /// Sum of one member's protocol metadata bytes in a JoinGroup (ours; Kafka has none, the
    /// request size is its only bound). Beyond it: INVALID_REQUEST. Default 1 MiB.
    pub member_metadata_max_bytes: usize,
    /// Protocols one member may offer (ours). Beyond it: INVALID_REQUEST. Default 64.
    pub member_protocols_max: usize,
    /// Settings of consumer-protocol (KIP-848) groups (`group.consumer.*`).
    pub consumer: consumer::ConsumerGroupConfig,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: 1_000,
            initial_rebalance_delay_ms: 3_000,
            offset_metadata_max_bytes: 4_096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1_000,
            offsets_retention_check_interval_ms: 600_000,
            member_metadata_max_bytes: 1 << 20,
            member_protocols_max: 64,
            consumer: consumer::ConsumerGroupConfig::default(),
        }
    }
}

/// The `__consumer_offsets` partition that coordinates `group_id`, as Kafka computes it:
/// Java's `String.hashCode` over UTF-16 code units with wrapping `i32` arithmetic, made
/// non-negative as `Utils.abs` does (`h & 0x7fffffff`), modulo `partition_count`.
///
/// `partition_count` must be positive (`offsets.topic.num.partitions`); 0 or less maps to 0.
pub fn group_partition(group_id: &str, partition_count: i32) -> i32 {
    if partition_count <= 0 {
        return 0;
    }
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    (hash & 0x7fff_ffff) % partition_count
}

/// A group of either protocol. One group id has one type at a time.
// The consumer-protocol placeholder is small; the real consumer group is as large as the
// classic one, and groups live in a map by value either way.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Group {
    /// A classic-protocol group (JoinGroup/SyncGroup/Heartbeat), or an offsets-only group.
    Classic(ClassicGroup),
    /// A KIP-848 consumer-protocol group (ConsumerGroupHeartbeat).
    Consumer(consumer::ConsumerGroup),
}

impl Group {
    /// `classic` or `consumer`, as ListGroups v5 names the types.
    pub fn type_name(&self) -> &'static str {
        match self {
            Group::Classic(_) => "classic",
            Group::Consumer(_) => "consumer",
        }
    }
}
