//! The transaction coordinator: transactional ids, their producer ids and epochs, and the
//! two-phase end of each transaction, one [`Coordinator`] per `__transaction_state`
//! partition.
//!
//! # Contract (sans-IO, in quinn-proto's shape, like [`crate::group`])
//!
//! The coordinator never reads a clock, never does I/O and never spawns: time enters as a
//! value (`now`, milliseconds), records and marker writes leave as values, and the caller
//! (the shard that owns the `__transaction_state` partition, its only writer) moves the
//! bytes. Its methods are of four kinds:
//!
//! - **Getters** (`&self`): [`Coordinator::transaction`], [`Coordinator::transactional_ids`],
//!   [`Coordinator::durable_state`], [`Coordinator::is_loading`], [`Coordinator::config`].
//! - **Inputs, `handle_*`** (`&mut self`, with `now`):
//!   [`Coordinator::handle_request`] (a decoded request, a caller-chosen [`RequestToken`],
//!   and the [`ProducerIdSource`] fresh producer ids come from),
//!   [`Coordinator::handle_appended`] (an [`Append`] is durable under the flush policy, or
//!   failed), [`Coordinator::handle_markers_written`] (a [`MarkerWrite`]'s control batches
//!   are durable on their partitions, or some must be retried),
//!   [`Coordinator::handle_timeout`] (the deadline from `poll_timeout` has passed), and
//!   [`Coordinator::handle_loaded`] (the partition was replayed).
//! - **Mutators**: [`Coordinator::replay`], while loading: every record of the partition in
//!   log order.
//! - **Outputs, `poll_*`**, drained until `None` after every input:
//!   [`Coordinator::poll_append`] (records to append, in order, to this coordinator's
//!   partition; report each with `handle_appended` in the same order),
//!   [`Coordinator::poll_marker`] (COMMIT/ABORT markers to write, one control batch per
//!   partition), [`Coordinator::poll_response`] (answers, each released only once the record
//!   it depends on is durable), [`Coordinator::poll_timeout`] (the next deadline and why).
//!
//! Driving it, in short (as `broker/src/server/groups/host.rs` drives the group coordinator):
//! ```text
//! at startup:   c = Coordinator::new(config, coordinator_epoch)
//!               for (key, value) in log { c.replay(key, value)? }   then c.handle_loaded(now)
//! on a request: c.handle_request(token, request, &mut producer_ids, now)
//! on a durable append (in poll order): c.handle_appended(id, Ok(()) | Err(e), now)
//! on durable markers: c.handle_markers_written(id, partitions_to_retry, now)
//! on a timer:   c.handle_timeout(now)
//! after each:   while let Some(a) = c.poll_append()   { append a.record, then report a.id }
//!               while let Some(m) = c.poll_marker()   { write m's markers, then report m.id }
//!               while let Some((t, r)) = c.poll_response() { answer t with r }
//!               re-arm the timer at c.poll_timeout()
//! ```
//!
//! # What is durable
//!
//! Per transactional id, its TransactionLogValue ([`records`]): producer id and epoch, the
//! previous and next producer ids (KIP-890), timeout, state, partitions, timestamps. State
//! changes only by applying records (I34), with the same code at replay and when an append is
//! reported durable; a failed append changes nothing and fails the answer that waited for it.
//! Requests see only durable state; while an id's record is in flight, requests that would
//! change it get CONCURRENT_TRANSACTIONS (I33), except the next transaction's first
//! AddPartitionsToTxn/AddOffsetsToTxn while the previous one completes, which waits (I134). Transient: the record in flight, markers in
//! flight, Kafka's `lastProducerEpoch` (not in the record, in Kafka either).
//!
//! # The two phases
//!
//! EndTxn (or a fence, or a timeout) writes PrepareCommit/PrepareAbort. Only once that
//! record is durable are its markers polled (I31), with the Prepare record's producer id,
//! epoch and result (I36); only once every marker is durable is CompleteCommit/CompleteAbort
//! appended (I32). A Prepare record found at load has its markers written again (a partition
//! ignores a marker it already has). EndTxn is answered when the Prepare record is durable,
//! as in Kafka.
//!
//! # The next transaction, while the last one completes (I134)
//!
//! A client starts its next transaction as soon as EndTxn is answered, while the markers
//! and the Complete record are still being written. Kafka answers its AddPartitionsToTxn
//! (and AddOffsetsToTxn) CONCURRENT_TRANSACTIONS, and clients back off (librdkafka 20 ms)
//! and retry: under `flush.policy=fsync` most commits paid that backoff. Here such a
//! request (its producer id and epoch checked first, so a fenced producer is answered at
//! once) is held, and handled again, in arrival order, once the Complete record is durable;
//! one that waits longer than `hold_while_completing_ms`, or beyond `max_held_requests`, is
//! answered CONCURRENT_TRANSACTIONS as Kafka would.
//!
//! # Invariants (docs/DESIGN.md, "Transaction coordinator")
//! I30 transitions follow Kafka's valid-previous table ([`state`]); I31 no marker before its
//! Prepare record is durable; I32 Complete only after every marker; I33 one record in flight
//! per id; I34 state is the replay of the records; I35 a fenced epoch is never accepted
//! again; I36 markers carry the Prepare record's result; I37 answers after durability; I38
//! bounded memory and decoding; I39 producer ids only from the allocator, rotations recorded;
//! I134 a request held while the previous transaction completes is answered only after its
//! Complete record is durable, or CONCURRENT_TRANSACTIONS at its bound.

mod coordinator;
pub mod messages;
pub mod records;
pub mod state;

pub use coordinator::{
    Append, AppendError, AppendId, Coordinator, MarkerId, MarkerWrite, Millis, ProducerIdSource,
    RequestToken, TimeoutReason, TxnRecord, CONSUMER_OFFSETS_TOPIC,
};
pub use messages::*;
pub use state::{TxnResult, TxnState};

/// The coordinator's settings, named after Kafka's broker configs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms` (Kafka: 900,000): a larger requested timeout is
    /// INVALID_TRANSACTION_TIMEOUT.
    pub max_transaction_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (Kafka: 7 days): an id idle this long (in Empty or
    /// a Complete state) is removed (a tombstone is written).
    pub transactional_id_expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms` (Kafka: 3,600,000).
    pub expiration_check_interval_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (Kafka: 10,000): how
    /// often transactions past their timeout are aborted by the coordinator.
    pub abort_timed_out_interval_ms: i64,
    /// `offsets.topic.num.partitions` (Kafka: 50): which `__consumer_offsets` partition
    /// AddOffsetsToTxn adds for a group.
    pub offsets_topic_partitions: i32,
    /// `transaction.marker.retry.backoff.ms` (ours): backoff before writing failed markers or
    /// a failed Complete record again.
    pub retry_backoff_ms: i64,
    /// `transaction.max.transactional.ids` (ours; Kafka has none): transactional ids per
    /// coordinator; a new id beyond it gets COORDINATOR_NOT_AVAILABLE (retriable) until ids
    /// expire. Default 100,000.
    pub max_transactional_ids: usize,
    /// `transaction.max.partitions.per.transaction` (ours; Kafka has none): partitions one
    /// transaction may hold; beyond it, AddPartitionsToTxn gets INVALID_REQUEST. Default 10,000.
    pub max_partitions_per_transaction: usize,
    /// How long an AddPartitionsToTxn/AddOffsetsToTxn of the producer's next transaction
    /// waits for the previous one to complete before it is answered CONCURRENT_TRANSACTIONS
    /// (ours; Kafka answers at once, I134). 0 answers at once, as Kafka. Default 5,000, below
    /// every client's request timeout.
    pub hold_while_completing_ms: i64,
    /// `transaction.max.held.requests` (ours, I38): requests held that way at once, per
    /// coordinator; beyond it they are answered CONCURRENT_TRANSACTIONS at once. Default 10,000.
    pub max_held_requests: usize,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            max_transaction_timeout_ms: 900_000,
            transactional_id_expiration_ms: 7 * 24 * 60 * 60 * 1_000,
            expiration_check_interval_ms: 3_600_000,
            abort_timed_out_interval_ms: 10_000,
            offsets_topic_partitions: 50,
            retry_backoff_ms: 100,
            max_transactional_ids: 100_000,
            max_partitions_per_transaction: 10_000,
            hold_while_completing_ms: 5_000,
            max_held_requests: 10_000,
        }
    }
}

impl TxnConfig {
    /// The settings with every interval and backoff at least 1 ms (so a timer always fires
    /// strictly after the `now` that set it, and `handle_timeout` terminates).
    pub fn validated(mut self) -> TxnConfig {
        self.expiration_check_interval_ms = self.expiration_check_interval_ms.max(1);
        self.abort_timed_out_interval_ms = self.abort_timed_out_interval_ms.max(1);
        self.retry_backoff_ms = self.retry_backoff_ms.max(1);
        self.hold_while_completing_ms = self.hold_while_completing_ms.max(0);
        self
    }
}

/// The `__transaction_state` partition that coordinates `transactional_id`: the same hash
/// as [`crate::group::group_partition`] (Java's `String.hashCode`, made non-negative, modulo
/// `transaction.state.log.num.partitions`).
pub fn transaction_partition(transactional_id: &str, partition_count: i32) -> i32 {
    crate::group::group_partition(transactional_id, partition_count)
}
