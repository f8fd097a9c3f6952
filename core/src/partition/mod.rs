//! One partition's log as a sans-IO state machine: placement and dense offsets, group commit,
//! index placement, the log start offset, the producer checks, transactions, roll and
//! retention decisions. The broker's `log` drives it (`broker/src/log/driver.rs`): it owns
//! the files and the batch bytes, carries out the I/O this machine asks for and reports each
//! completion back; `PartitionLog` holds no state of its own beside it (I170;
//! docs/DESIGN.md, "The partition log machine").
//!
//! # Contract (sans-IO, str0m / quinn-proto style)
//!
//! The machine never reads a clock, never does I/O and never spawns: time enters as a value
//! (`now_ms`), I/O leaves as values ([`Io`]), answers leave as values ([`Answer`]).
//! **After every input, drain every output until `None`**: [`PartitionMachine::poll_io`],
//! then [`PartitionMachine::poll_ack`], then re-arm the timer at
//! [`PartitionMachine::poll_timeout`]. Its methods are of four kinds:
//!
//! - **Getters** (`&self`, no effect): [`PartitionMachine::high_watermark`],
//!   [`PartitionMachine::log_start_offset`], [`PartitionMachine::last_stable_offset`],
//!   [`PartitionMachine::segments`], [`PartitionMachine::synced_up_to`],
//!   [`PartitionMachine::is_offline`], [`PartitionMachine::has_io`],
//!   [`PartitionMachine::producers`],
//!   [`PartitionMachine::txns`], [`PartitionMachine::aborted_transactions`],
//!   [`PartitionMachine::fetch_plan`] (a read's snapshot: reads never enter the machine's
//!   queue, I2).
//! - **Inputs, `handle_*`** (`&mut self`, with `now_ms` where time matters):
//!   [`PartitionMachine::handle_append`] (validated batch headers with caller-chosen
//!   [`RequestToken`]s), [`PartitionMachine::handle_io_done`] (an [`Io`] finished, in any
//!   order among those in flight), [`PartitionMachine::handle_flush`],
//!   [`PartitionMachine::handle_cancel`] (the caller of a queued append went away),
//!   [`PartitionMachine::handle_roll`], [`PartitionMachine::handle_close`],
//!   [`PartitionMachine::handle_delete_records`], [`PartitionMachine::handle_retention`],
//!   [`PartitionMachine::handle_timeout`] (the deadline from `poll_timeout` passed).
//! - **Outputs, `poll_*`**: [`PartitionMachine::poll_io`] gives writes, syncs, index writes,
//!   segment creations (rolls), checkpoint writes and deletions, each with an [`IoToken`] to
//!   report with `handle_io_done`; [`PartitionMachine::poll_ack`] gives answers, each
//!   released only once the flush policy is satisfied for it (I8);
//!   [`PartitionMachine::poll_timeout`] gives the next deadline and its [`TimeoutReason`].
//! - **Mutators with no I/O**: [`PartitionMachine::reconfigure`] (AlterConfigs) and
//!   [`PartitionMachine::replace_segments`] (the cleaner's swap, its files already in place,
//!   checked first with [`PartitionMachine::holds_segments`], I24).
//!
//! **The ordering rule (I27).** Offsets are assigned in the order `handle_append` is called:
//! batches are placed strictly in that order, each accepted batch gets the offsets right after
//! the previous accepted one (I1), and a batch refused (producer rules, offset space) or failed
//! (its write failed) takes none. The driver therefore calls `handle_append` in arrival order
//! and never needs an ordering rule of its own (no "queue on the first poll").
//!
//! Driving it, in short:
//! ```text
//! at open:       m = PartitionMachine::new(config, recovered segments, log start,
//!                                         producers, transactions, now)
//! on a produce:  m.handle_append([Append::produced(token, header)], now)   (validated, I3)
//! on a marker:   m.handle_append([Append::marker(token, header, marker)], now)
//! on an I/O end: m.handle_io_done(io_token, Ok(()) | Err(failure), now)
//! on a timer:    m.handle_timeout(now)
//! after each:    while let Some(io) = m.poll_io()  { start io.kind, report io.token when done }
//!                while let Some(a) = m.poll_ack()  { answer a.token with a.result }
//!                re-arm the timer at m.poll_timeout()
//! ```
//!
//! # What the driver does with each [`IoKind`]
//! - `WriteLog`: patch each batch's base offset (and leader epoch) and write the batches back
//!   to back at `position` of the segment's `.log`, with one vectored write.
//! - `WriteIndex` / `WriteTimeIndex`: write the bytes at the given byte position of the
//!   segment's `.index` / `.timeindex` (asked only after the log bytes they point at are
//!   written, I4).
//! - `TruncateLog`: cut the `.log` to `len_bytes` (a failed write's torn tail).
//! - `SyncLog`, `SyncIndexes` (truncating each index file first where a length is given),
//!   `CreateSegment` (create, truncate and sync the directory), `RemoveSegment` (`.log` first,
//!   then the indexes), `SyncDir`, `WriteStartCheckpoint` (durably, I25),
//!   `WriteProducerSnapshot` (its failure only makes the next open replay more),
//!   `AppendTxnIndex` (append the entries at the end of the segment's `.txnindex`, cutting a
//!   torn entry first, and sync it; its failure only makes the next open replay, I70).
//!
//! # State it owns
//! Per segment ([`SegmentState`]): the published size (I2), the bytes the file may hold, the
//! next offset, the in-memory offset and time indexes with their placers (I4). Per partition:
//! the high watermark, the log start offset (I9, I25), group-commit bookkeeping (what is
//! written, what is durable, one sync in flight), the producer state
//! ([`crate::producer::ProducerStateTable`]), the transaction state
//! ([`txn::TxnTracker`]), one write group, roll or `.txnindex` append in flight at a time,
//! one log-start move in flight at a time.
//!
//! # Transactions (KIP-98's data path)
//! Beside the producer table the machine owns the partition's
//! [`TxnTracker`](txn::TxnTracker): the ongoing transaction of each producer (its first
//! offset), the marker epochs that fence zombies and deposed coordinators, and the aborted
//! ranges. It applies the broker's rules, in the same places:
//! - An [`AppendKind::Produced`] batch passes the producer rules
//!   ([`crate::producer::GroupAdmission`]), then the transaction rules
//!   ([`txn::TxnTracker::check_data`]): a plain batch of a producer inside its transaction is
//!   INVALID_TXN_STATE, a transactional one older than its producer's last marker epoch
//!   INVALID_PRODUCER_EPOCH (I72).
//! - An [`AppendKind::Marker`] (a COMMIT or ABORT control batch, as WriteTxnMarkers writes
//!   it) joins a group like a batch of its producer (one per producer per group) and is
//!   checked by the transaction rules only ([`txn::TxnTracker::check_marker`] against the
//!   producer table's epoch): it carries no sequence.
//! - An [`AppendKind::Coordinator`] batch (a coordinator of this broker wrote it, I74)
//!   passes no producer rule.
//! - The state moves at publish, in the same step as the high watermark and the producer
//!   table, member by member in offset order (I67): a transactional batch starts its
//!   producer's transaction, a marker ends it and an ABORT records its aborted range (I68).
//!   The ranges a group's ABORT markers recorded are then appended to the segment's
//!   `.txnindex` ([`IoKind::AppendTxnIndex`]) before the next group is placed; a failure only
//!   marks the state on disk stale ([`PartitionMachine::txn_state_stale`], I70).
//! - [`PartitionMachine::last_stable_offset`] is the first offset of the oldest ongoing
//!   transaction, else the high watermark (I67); a read_committed
//!   [`PartitionMachine::fetch_plan`] stops there and carries the aborted ranges (I69);
//!   retention and DeleteRecords never move the log start past it (I71).
//!
//! # Invariants (docs/DESIGN.md)
//! - I1: dense offsets in placement order; asserted after each placement.
//! - I2: the published size never passes the bytes written (`size_bytes <= written_bytes`),
//!   and moves only after the group's writes completed.
//! - I4: index entries are asked for only after their log bytes are written, and are strictly
//!   increasing ([`crate::index::OffsetIndex::push`] asserts).
//! - I5: a roll syncs the old segment (log and indexes) before the new one is created.
//! - I171: a roll ends with its producer snapshot at the new base: the next group is placed
//!   only once that I/O finished (whatever its result).
//! - I6: rolls before a segment passes 32-bit positions or relative offsets ([`crate::roll`]).
//! - I8: an answer is released only under its flush policy; a failed sync is sticky.
//! - I9, I25: the log start offset only moves forward, after its checkpoint is durable, and
//!   segments below it are removed only after that; never the active segment.
//! - I67–I72: transactions, above; LSO ≤ high watermark is asserted after each publish.
//! - I27: offsets follow `handle_append` order. I28: at most one write group (or roll) and one
//!   sync are in flight. I29: a failed write publishes nothing and its tail is cut before the
//!   next write.

mod machine;
pub mod rules;
#[cfg(test)]
mod tests;
pub mod txn;

pub use machine::PartitionMachine;

use std::collections::VecDeque;

use crate::control_batch::TxnMarker;
use crate::index::{IndexPlacer, OffsetIndex};
use crate::producer::{ProducerError, ProducerLimits};
use crate::record::BatchHeader;
use crate::retention::RetentionLimits;
use crate::time_index::{TimeIndex, TimePlacer};
use crate::txn_index::AbortedTxn;
use crate::types::{FilePos, Offset};

/// The caller's handle for one request (an append, a flush, a DeleteRecords, a retention
/// pass); its [`Answer`] comes back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Names one [`Io`]; report its completion with [`PartitionMachine::handle_io_done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IoToken(pub u64);

/// When an append is acknowledged (`flush.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushRule {
    /// After the write reached the kernel.
    None,
    /// After a sync that started after the write (group commit).
    Fsync,
    /// After the write; a timer syncs every `ms` milliseconds.
    Interval {
        /// The sync interval.
        ms: i64,
    },
}

/// The settings the machine decides with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    /// `segment.bytes`.
    pub segment_bytes: u64,
    /// `segment.ms` (`None`: never by age).
    pub segment_ms: Option<i64>,
    /// `index.interval.bytes`, for segments created from now on.
    pub index_interval_bytes: u32,
    /// `flush.policy`.
    pub flush: FlushRule,
    /// Retention limits (already `None` where `cleanup.policy` lacks `delete`).
    pub retention: RetentionLimits,
    /// Most bytes of batches one coalesced write takes (a group always takes its first
    /// batch). A throughput knob: it cannot make a write wrong.
    pub coalesce_max_bytes: u64,
    /// Bounds of the producer state.
    pub producer_limits: ProducerLimits,
}

/// One validated batch to append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Append {
    /// The caller's handle for the answer.
    pub token: RequestToken,
    /// The batch's header as validated (I3): its length, offset delta, max timestamp and
    /// producer fields are what the machine decides with.
    pub header: BatchHeader,
    /// Who wrote it, which says which rules apply.
    pub kind: AppendKind,
}

impl Append {
    /// A batch a client produced.
    pub fn produced(token: RequestToken, header: BatchHeader) -> Self {
        Append {
            token,
            header,
            kind: AppendKind::Produced,
        }
    }

    /// The control batch `header` of the transaction marker `marker`.
    pub fn marker(token: RequestToken, header: BatchHeader, marker: TxnMarker) -> Self {
        Append {
            token,
            header,
            kind: AppendKind::Marker(marker),
        }
    }
}

/// Who wrote a batch (the broker's `Origin`, and the marker path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendKind {
    /// A client's Produce: the producer rules, then the transaction rules (I72).
    Produced,
    /// A coordinator of this broker (its transactional offsets, I74): no producer rule, as
    /// Kafka skips them for its coordinators' appends; its transaction state still moves. A
    /// coordinator's control batch is a [`AppendKind::Marker`] (the broker decodes it).
    Coordinator,
    /// A COMMIT or ABORT marker (the control batch in `header`, I72): checked by the
    /// transaction rules only; it ends its producer's transaction.
    Marker(TxnMarker),
}

/// Why an I/O failed, as the driver saw it (kind and OS error number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoFailure {
    /// The error's kind.
    pub kind: std::io::ErrorKind,
    /// The OS error number, when there was one.
    pub raw_os_error: Option<i32>,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartitionError {
    /// The producer rules refused the batch (nothing written).
    Producer(ProducerError),
    /// The batch's offsets would pass `i64::MAX - 1`.
    OffsetOverflow,
    /// An I/O of this request failed (a write, a truncation, a segment creation, a
    /// checkpoint, a removal); the partition stays online.
    Io(IoFailure),
    /// A sync failed: the partition is offline for writes for good (I8).
    Offline(IoFailure),
    /// The caller went away before the append was placed ([`PartitionMachine::handle_cancel`]):
    /// nothing of it was written.
    Cancelled,
    /// The log was closed ([`PartitionMachine::handle_close`]).
    Closed,
    /// DeleteRecords past the high watermark.
    OffsetOutOfRange {
        /// The offset asked for.
        requested: Offset,
        /// The log start offset then.
        log_start_offset: Offset,
        /// The high watermark then.
        high_watermark: Offset,
    },
}

/// What an appended batch got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset of the batch's first record.
    pub base_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Base offset of the segment holding it.
    pub segment_base_offset: Offset,
    /// Its position in that segment; for a duplicate, the index floor of the original.
    pub position: FilePos,
    /// True when the batch duplicated an earlier one of its producer: nothing was written,
    /// the offsets are the original's.
    pub duplicate: bool,
}

/// What a request that succeeded did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// An append, acknowledged under the flush policy.
    Appended(AppendInfo),
    /// A flush: everything written when it was asked is durable.
    Flushed,
    /// The close ([`PartitionMachine::handle_close`]): everything written is durable; `clean`
    /// unless the transaction state on disk is stale (I70).
    Closed {
        /// Whether the next open may trust the files as a clean shutdown's.
        clean: bool,
    },
    /// A roll asked for with [`PartitionMachine::handle_roll`]: the new active segment's base
    /// offset, or `None` when the active segment was empty.
    Rolled {
        /// The new segment's base offset.
        base_offset: Option<Offset>,
    },
    /// DeleteRecords or retention: the log start offset afterwards and the segments removed.
    StartMoved {
        /// The log start offset afterwards.
        log_start_offset: Offset,
        /// Base offsets of the removed segments, oldest first.
        removed_base_offsets: Vec<Offset>,
    },
}

/// An answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The request's token.
    pub token: RequestToken,
    /// Its outcome.
    pub result: Result<Done, PartitionError>,
}

/// One batch of a [`IoKind::WriteLog`], in offset order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacedBatch {
    /// The append it came from.
    pub token: RequestToken,
    /// The base offset to patch in (I1).
    pub base_offset: Offset,
    /// Where it starts in the segment.
    pub position: FilePos,
    /// Its length in bytes.
    pub len_bytes: u32,
}

/// An I/O to carry out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Io {
    /// Report with [`PartitionMachine::handle_io_done`].
    pub token: IoToken,
    /// What to do.
    pub kind: IoKind,
}

/// The I/O operations the machine asks for. Segments are named by base offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// Write `batches` back to back at `position` of the segment's `.log` (one vectored write).
    WriteLog {
        /// The segment.
        segment: Offset,
        /// Where the first batch goes (the published size).
        position: u64,
        /// The batches, patched with these base offsets, in this order.
        batches: Vec<PlacedBatch>,
    },
    /// Write `bytes` at byte `position` of the segment's `.index`.
    WriteIndex {
        /// The segment.
        segment: Offset,
        /// Byte position in the index file.
        position: u64,
        /// Encoded entries.
        bytes: Vec<u8>,
    },
    /// Write `bytes` at byte `position` of the segment's `.timeindex`.
    WriteTimeIndex {
        /// The segment.
        segment: Offset,
        /// Byte position in the time index file.
        position: u64,
        /// Encoded entries.
        bytes: Vec<u8>,
    },
    /// Cut the segment's `.log` back to `len_bytes` (a failed write's torn tail).
    TruncateLog {
        /// The segment.
        segment: Offset,
        /// The published size.
        len_bytes: u64,
    },
    /// `fdatasync` the segment's `.log`.
    SyncLog {
        /// The segment.
        segment: Offset,
    },
    /// Sync the segment's `.index` and `.timeindex`, first truncating each to the length
    /// given (a slot a failed append wrote).
    SyncIndexes {
        /// The segment.
        segment: Offset,
        /// Truncate the `.index` to this many bytes first.
        truncate_index_bytes: Option<u64>,
        /// Truncate the `.timeindex` to this many bytes first.
        truncate_time_index_bytes: Option<u64>,
    },
    /// Create an empty segment at `base_offset` (three files) and sync the directory.
    CreateSegment {
        /// Its base offset.
        base_offset: Offset,
    },
    /// Write the producer state snapshot `bytes` covering the log below `offset`.
    WriteProducerSnapshot {
        /// The offset it covers up to.
        offset: Offset,
        /// The encoded snapshot.
        bytes: Vec<u8>,
    },
    /// Durably checkpoint `start` as the log start offset (I25).
    WriteStartCheckpoint {
        /// The new log start offset.
        start: Offset,
    },
    /// Remove a segment's files (`.log` first).
    RemoveSegment {
        /// The segment.
        base_offset: Offset,
    },
    /// Sync the partition directory.
    SyncDir,
    /// Append `entries` (the ranges a group's ABORT markers recorded, I68) at the end of the
    /// segment's `.txnindex`, cutting a torn entry first, and sync it. A failure only marks
    /// the transaction state on disk stale (I70).
    AppendTxnIndex {
        /// The segment the markers went to.
        segment: Offset,
        /// The aborted ranges, in marker order.
        entries: Vec<AbortedTxn>,
    },
}

/// Why [`PartitionMachine::poll_timeout`] wants to be woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// `flush.policy=interval`: the next sync is due.
    IntervalFlush,
}

/// One segment as the machine knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentState {
    /// Its base offset.
    pub base_offset: Offset,
    /// Published size (I2): bytes below it are whole, valid batches, never changed.
    pub size_bytes: u64,
    /// Bytes the `.log` may hold: the published size plus a written but unpublished (or torn)
    /// tail. Never below `size_bytes` (I2).
    pub written_bytes: u64,
    /// The offset after its last batch.
    pub next_offset: Offset,
    /// When it was created or opened (for `segment.ms`, and retention's fallback).
    pub created_ms: i64,
    /// The in-memory offset index (I4).
    pub index: OffsetIndex,
    /// Where the next offset index entry goes.
    pub placer: IndexPlacer,
    /// Entry slots of the `.index` that may hold bytes (a failed append may leave one more
    /// than the in-memory entries; the next sync cuts it).
    pub index_file_entries: u64,
    /// The in-memory time index (I4).
    pub time_index: TimeIndex,
    /// Where the next time index entry goes; holds the exact max timestamp.
    pub time_placer: TimePlacer,
    /// Like `index_file_entries`, for the `.timeindex`.
    pub time_index_file_entries: u64,
}

impl SegmentState {
    /// A new, empty segment.
    pub fn empty(base_offset: Offset, index_interval_bytes: u32, created_ms: i64) -> Self {
        SegmentState {
            base_offset,
            size_bytes: 0,
            written_bytes: 0,
            next_offset: base_offset,
            created_ms,
            index: OffsetIndex::new(),
            placer: IndexPlacer::new(index_interval_bytes),
            index_file_entries: 0,
            time_index: TimeIndex::new(),
            time_placer: TimePlacer::new(),
            time_index_file_entries: 0,
        }
    }

    /// True when it holds no batch.
    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// The position to start reading from for `target` (index floor; 0 below the base).
    pub fn floor_position(&self, target: Offset) -> FilePos {
        match target.relative_to(self.base_offset) {
            Some(rel) => self.index.lookup(rel),
            None => FilePos(0),
        }
    }
}

/// Where a read starts in one segment, below its published size (I2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRead {
    /// The segment.
    pub base_offset: Offset,
    /// The index floor of the fetch offset in it.
    pub floor: FilePos,
    /// Its published size when the plan was made: read nothing at or past it.
    pub end_bytes: u64,
}

/// Which records a read may see (Kafka's `isolation_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Everything below the high watermark.
    ReadUncommitted,
    /// Only batches below the last stable offset, with the aborted ranges (I69).
    ReadCommitted,
}

/// A read's snapshot: what [`PartitionMachine::fetch_plan`] gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    /// The high watermark snapshotted with the sizes.
    pub high_watermark: Offset,
    /// The log start offset then.
    pub log_start_offset: Offset,
    /// The last stable offset then (I67).
    pub last_stable_offset: Offset,
    /// Return no batch whose base offset is at or past this: the high watermark, or under
    /// read_committed the last stable offset (a batch boundary, I69).
    pub upper: Offset,
    /// The segments that may hold the fetch offset, in order (empty at or past `upper`).
    pub segments: Vec<SegmentRead>,
    /// Under read_committed, the aborted transactions overlapping `[fetch offset, upper)`,
    /// in marker order (Kafka's `aborted_transactions`; the driver sends none when the read
    /// returns no batch). Empty under read_uncommitted.
    pub aborted: Vec<AbortedTxn>,
}

/// The producer-state side of a request waiting in the queue (kept small: bytes stay with
/// the driver).
#[derive(Clone, Copy, Debug)]
struct Pending {
    append: Append,
    now_ms: i64,
}

/// Requests waiting in arrival order.
type Queue = VecDeque<Pending>;
