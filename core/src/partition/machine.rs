//! [`PartitionMachine`]: the state and transitions. See the module documentation of
//! [`super`] for the contract.

use std::collections::VecDeque;

use super::rules::{self, Published, Verdict};
use super::txn::TxnTracker;
use super::{
    Answer, Append, AppendInfo, AppendKind, Done, FlushRule, Io, IoFailure, IoKind, IoToken,
    Isolation, PartitionConfig, PartitionError, Pending, PlacedBatch, Queue, ReadPlan,
    RequestToken, SegmentRead, SegmentState, TimeoutReason,
};
use crate::index::{IndexEntry, IndexPlacer, ENTRY_BYTES};
use crate::producer::{BatchMetadata, Decision, GroupAdmission, ProducerBatch, ProducerStateTable};
use crate::record::BatchHeader;
use crate::retention::{self, SegmentInfo};
use crate::roll::{self, ActiveSegment, RollLimits};
use crate::time_index::{TimeIndexEntry, TimePlacer, TIME_ENTRY_BYTES};
use crate::txn_index::AbortedTxn;
use crate::types::{FilePos, Offset};

/// One partition's log as a state machine (see [`super`]).
pub struct PartitionMachine {
    config: PartitionConfig,
    /// Ordered by base offset; the last is the active segment. Never empty.
    segments: Vec<SegmentState>,
    log_start_offset: Offset,
    /// The offset the next placed batch gets once everything placed is published (I2).
    high_watermark: Offset,
    producers: ProducerStateTable,
    /// Ongoing transactions, marker fences, aborted ranges (I67, I68); moves at publish.
    txns: TxnTracker,
    /// A `.txnindex` append failed: the files no longer say what the log says (I70).
    txn_state_stale: bool,
    /// Appends not yet placed, in `handle_append` order (I27).
    queue: Queue,
    /// Rolls asked for by `handle_roll`, served before the next group is placed.
    roll_requests: VecDeque<RequestToken>,
    life: Life,
    writer: Writer,
    /// A write failed: bytes past the active segment's published size may be torn (I29).
    torn_tail: bool,
    commit: Commit,
    /// Answers waiting for a sync to cover `end`.
    durable_waits: Vec<DurableWait>,
    start: StartMover,
    next_io: u64,
    io_out: VecDeque<Io>,
    acks_out: VecDeque<Answer>,
}

/// Group-commit bookkeeping: written, durable, the sync in flight, the sticky failure (I8).
#[derive(Debug)]
struct Commit {
    written_up_to: Offset,
    synced_up_to: Offset,
    in_flight: Option<(IoToken, Offset)>,
    sync_count: u64,
    failure: Option<IoFailure>,
    last_sync_ms: i64,
}

#[derive(Debug)]
struct DurableWait {
    end: Offset,
    answer: Answer,
}

/// The write path: one group, roll, tail repair or `.txnindex` append at a time (I28).
#[derive(Debug)]
enum Writer {
    Idle,
    Truncating(IoToken),
    /// The aborted ranges of the last published group go to its segment's `.txnindex`
    /// before the next group is placed (the entries stay in marker order on file, I68).
    IndexingAborted(IoToken),
    /// The close: the active segment's log, then its indexes, then the producer snapshot.
    Closing {
        step: CloseStep,
        io: IoToken,
        token: RequestToken,
    },
    /// A roll: for the batch at the queue's front, or `requested` by `handle_roll`.
    Rolling {
        step: RollStep,
        io: IoToken,
        requested: Option<RequestToken>,
    },
    Writing {
        group: Box<Group>,
        step: WriteStep,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CloseStep {
    SyncLog,
    SyncIndexes,
    Snapshot,
}

/// Where the log is in its life: open, a close asked for (it runs once the writer is free),
/// or closed (every input fails).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    Open,
    Closing(RequestToken),
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RollStep {
    SyncLog,
    SyncIndexes,
    Create,
    /// The producer snapshot at the new segment's base (I171): the roll ends when it is
    /// done, so a snapshot exists at every roll before the next group is written (its failure
    /// only makes the next open replay more).
    Snapshot,
}

#[derive(Debug)]
enum WriteStep {
    Log(IoToken),
    Indexes {
        waiting: Vec<IoToken>,
        failure: Option<IoFailure>,
    },
}

/// A write group: its members in offset order and the index entries it will add.
#[derive(Debug)]
struct Group {
    segment: Offset,
    position: u64,
    len_bytes: u64,
    next_offset: Offset,
    admission: GroupAdmission,
    members: Vec<Member>,
    placer: IndexPlacer,
    time_placer: TimePlacer,
    entries: Vec<IndexEntry>,
    time_entries: Vec<TimeIndexEntry>,
}

#[derive(Debug)]
struct Member {
    token: RequestToken,
    kind: AppendKind,
    header: BatchHeader,
    producer_batch: ProducerBatch,
    decision: Decision,
    last_offset: Offset,
    position: FilePos,
    now_ms: i64,
}

/// What placing one queued append did.
enum Placement {
    Joined,
    Answered,
    EndsGroup,
    NeedsRoll,
}

/// Moves of the log start offset, one at a time, in arrival order (I9, I25).
#[derive(Debug, Default)]
struct StartMover {
    queue: VecDeque<StartRequest>,
    in_flight: Option<StartMove>,
}

#[derive(Clone, Copy, Debug)]
enum StartRequest {
    DeleteRecords { token: RequestToken, before: Offset },
    Retention { token: RequestToken, now_ms: i64 },
}

#[derive(Debug)]
struct StartMove {
    token: RequestToken,
    step: StartStep,
    removed: Vec<Offset>,
    failure: Option<IoFailure>,
}

#[derive(Debug)]
enum StartStep {
    Checkpoint { io: IoToken, start: Offset },
    Removing { waiting: Vec<IoToken> },
    SyncDir(IoToken),
}

impl PartitionMachine {
    /// A machine over recovered `segments` (ordered, non-empty, the last active; each one's
    /// published and written sizes equal, as recovery leaves them) whose durable start is
    /// `log_start_offset`, with the producer state and the transaction state (ongoing
    /// transactions, fences, aborted ranges: the log's, I70) rebuilt by the caller.
    /// Everything recovered counts as written and durable (the driver synced it, I8).
    ///
    /// Panics when `segments` is empty or out of order (a programmer error of the caller).
    pub fn new(
        config: PartitionConfig,
        segments: Vec<SegmentState>,
        log_start_offset: Offset,
        producers: ProducerStateTable,
        txns: TxnTracker,
        now_ms: i64,
    ) -> Self {
        assert!(!segments.is_empty(), "a partition has an active segment");
        assert!(
            segments
                .windows(2)
                .all(|pair| pair[0].base_offset < pair[1].base_offset),
            "segments are ordered by base offset"
        );
        assert!(
            segments.iter().all(|s| s.size_bytes == s.written_bytes),
            "recovered segments have no unpublished tail (I2)"
        );
        let high_watermark = segments[segments.len() - 1].next_offset;
        PartitionMachine {
            config,
            segments,
            log_start_offset,
            high_watermark,
            producers,
            txns,
            txn_state_stale: false,
            queue: VecDeque::new(),
            roll_requests: VecDeque::new(),
            life: Life::Open,
            writer: Writer::Idle,
            torn_tail: false,
            commit: Commit {
                written_up_to: high_watermark,
                synced_up_to: high_watermark,
                in_flight: None,
                sync_count: 0,
                failure: None,
                last_sync_ms: now_ms,
            },
            durable_waits: Vec::new(),
            start: StartMover::default(),
            next_io: 0,
            io_out: VecDeque::new(),
            acks_out: VecDeque::new(),
        }
    }

    // ----- getters -----

    /// The settings in force.
    pub fn config(&self) -> &PartitionConfig {
        &self.config
    }

    /// The offset the next append gets once the writes in flight are published; every offset
    /// below it is readable (I2).
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// The first offset of the log (I9).
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The last stable offset (I67): the first offset of the oldest ongoing transaction,
    /// else the high watermark; never above the high watermark.
    pub fn last_stable_offset(&self) -> Offset {
        self.txns.last_stable_offset(self.high_watermark)
    }

    /// The transaction state: ongoing transactions, marker epochs, aborted ranges (for
    /// DescribeProducers and the close's checkpoint).
    pub fn txns(&self) -> &TxnTracker {
        &self.txns
    }

    /// The aborted transactions a read_committed read of `[from, upper)` must report.
    pub fn aborted_transactions(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        self.txns.aborted_in(from, upper)
    }

    /// True once a `.txnindex` append failed: the transaction state on disk is stale, so the
    /// driver's close must not count as clean and the next open replays the log (I70).
    pub fn txn_state_stale(&self) -> bool {
        self.txn_state_stale
    }

    /// The segments, oldest first (the last is the active one).
    pub fn segments(&self) -> &[SegmentState] {
        &self.segments
    }

    /// Offsets below this are written (reached the kernel).
    pub fn written_up_to(&self) -> Offset {
        self.commit.written_up_to
    }

    /// Offsets below this are durable.
    pub fn synced_up_to(&self) -> Offset {
        self.commit.synced_up_to
    }

    /// Syncs started so far (group commit, interval, rolls).
    pub fn sync_count(&self) -> u64 {
        self.commit.sync_count
    }

    /// True once a failed sync took the partition offline for writes (I8).
    pub fn is_offline(&self) -> bool {
        self.commit.failure.is_some()
    }

    /// The failure that took the partition offline, if any.
    pub fn offline_failure(&self) -> Option<IoFailure> {
        self.commit.failure
    }

    /// The idempotent producer state.
    pub fn producers(&self) -> &ProducerStateTable {
        &self.producers
    }

    /// Total published bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size_bytes).sum()
    }

    /// A read's snapshot for `fetch_offset`: the high watermark, the log start, the last
    /// stable offset and, for each segment that may hold the offset, its index floor and
    /// published size (I2). Under read_committed nothing at or past the last stable offset
    /// is planned and the aborted ranges overlapping the read come with it (I69). Outside
    /// `[log_start_offset, high_watermark]` is [`PartitionError::OffsetOutOfRange`].
    pub fn fetch_plan(
        &self,
        fetch_offset: Offset,
        isolation: Isolation,
    ) -> Result<ReadPlan, PartitionError> {
        if fetch_offset < self.log_start_offset || fetch_offset > self.high_watermark {
            return Err(self.out_of_range(fetch_offset));
        }
        let last_stable_offset = self.last_stable_offset();
        let upper = match isolation {
            Isolation::ReadUncommitted => self.high_watermark,
            Isolation::ReadCommitted => last_stable_offset,
        };
        let mut plan = ReadPlan {
            high_watermark: self.high_watermark,
            log_start_offset: self.log_start_offset,
            last_stable_offset,
            upper,
            segments: Vec::new(),
            aborted: Vec::new(),
        };
        if fetch_offset >= upper {
            return Ok(plan);
        }
        if isolation == Isolation::ReadCommitted {
            plan.aborted = self.txns.aborted_in(fetch_offset, upper);
        }
        let floor = self
            .segments
            .partition_point(|s| s.base_offset <= fetch_offset)
            .saturating_sub(1);
        plan.segments = self.segments[floor..]
            .iter()
            .map(|s| SegmentRead {
                base_offset: s.base_offset,
                floor: s.floor_position(fetch_offset).min(end_pos(s.size_bytes)),
                end_bytes: s.size_bytes,
            })
            .collect();
        Ok(plan)
    }

    // ----- mutators -----

    /// Replaces the settings: the next placement, roll decision, retention pass and interval
    /// tick use them; `index_interval_bytes` applies from the next segment.
    pub fn reconfigure(&mut self, config: PartitionConfig) {
        self.config = config;
    }

    /// Forgets the aborted ranges of ABORT markers the cleaner removed (I154): no read past
    /// the cleaned segment reports them any more.
    pub fn forget_aborted(&mut self, gone: &[AbortedTxn]) {
        self.txns.forget_aborted(gone);
    }

    /// True when `old` (base offsets) is a run of consecutive sealed segments of the list:
    /// what the cleaner checks before it swaps (retention may have removed some meanwhile).
    pub fn holds_segments(&self, old: &[Offset]) -> bool {
        let Some(first) = old.first() else {
            return false;
        };
        let Some(at) = self.segments.iter().position(|s| s.base_offset == *first) else {
            return false;
        };
        at + old.len() < self.segments.len()
            && self.segments[at..at + old.len()]
                .iter()
                .zip(old)
                .all(|(s, base)| s.base_offset == *base)
    }

    /// Puts the cleaner's `new` segment (its files already swapped in) in place of the sealed
    /// segments `old` (I24). Returns false, changing nothing, when the list no longer holds
    /// them or `new` does not span exactly them (their first base, their last next offset,
    /// no unpublished tail). Reads planned before keep the old segments' snapshot (I2).
    pub fn replace_segments(&mut self, old: &[Offset], new: SegmentState) -> bool {
        if !self.holds_segments(old) {
            return false;
        }
        let at = self
            .segments
            .iter()
            .position(|s| s.base_offset == old[0])
            .unwrap_or_default();
        let last = &self.segments[at + old.len() - 1];
        if new.base_offset != old[0]
            || new.next_offset != last.next_offset
            || new.size_bytes != new.written_bytes
        {
            return false;
        }
        self.segments.splice(at..at + old.len(), [new]);
        true
    }

    // ----- inputs -----

    /// Queues validated batches (I3) in the order given, after every batch queued before
    /// (I27: offsets follow this order). Each gets exactly one [`Answer`].
    pub fn handle_append(&mut self, batches: impl IntoIterator<Item = Append>, now_ms: i64) {
        for append in batches {
            if self.life == Life::Open {
                self.queue.push_back(Pending { append, now_ms });
            } else {
                self.answer(append.token, Err(PartitionError::Closed));
            }
        }
        self.pump(now_ms);
    }

    /// Closes the log (the broker's `close`): appends queued before it are written first;
    /// then, unless offline, the active segment's log and indexes are synced and the producer
    /// snapshot at the high watermark is written. Answered [`Done::Closed`] (`clean` unless
    /// the transaction state on disk is stale, I70; the driver then checkpoints
    /// [`txns`](Self::txns)), or [`PartitionError::Offline`]. Every input after it fails with
    /// [`PartitionError::Closed`].
    pub fn handle_close(&mut self, token: RequestToken, now_ms: i64) {
        if self.life == Life::Open {
            self.life = Life::Closing(token);
        } else {
            self.answer(token, Err(PartitionError::Closed));
        }
        self.pump(now_ms);
    }

    /// True once a close was asked for.
    pub fn is_closed(&self) -> bool {
        self.life != Life::Open
    }

    /// The caller of the append `token` went away. Not placed yet, it is dropped (nothing of
    /// it is written, and no offset is taken: I27) and answered
    /// [`PartitionError::Cancelled`]; once placed it is written and answered as usual (the
    /// driver discards that answer). Returns whether it was dropped.
    pub fn handle_cancel(&mut self, token: RequestToken, now_ms: i64) -> bool {
        let Some(at) = self.queue.iter().position(|p| p.append.token == token) else {
            return false;
        };
        self.queue.remove(at);
        self.answer(token, Err(PartitionError::Cancelled));
        self.pump(now_ms);
        true
    }

    /// Seals the active segment and starts the next one at the high watermark, once the
    /// writer is free (before the next group is placed): the sealed segment is synced first
    /// (I5). Answered [`Done::Rolled`] with the new segment's base, or `None` when the active
    /// segment is empty (nothing to seal).
    pub fn handle_roll(&mut self, token: RequestToken, now_ms: i64) {
        if self.life == Life::Open {
            self.roll_requests.push_back(token);
        } else {
            self.answer(token, Err(PartitionError::Closed));
        }
        self.pump(now_ms);
    }

    /// Answers `token` once everything written so far is durable, whatever the policy.
    pub fn handle_flush(&mut self, token: RequestToken, now_ms: i64) {
        let end = self.commit.written_up_to;
        self.wait_durable(
            end,
            Answer {
                token,
                result: Ok(Done::Flushed),
            },
        );
        self.pump(now_ms);
    }

    /// DeleteRecords: makes `before` the log start offset (when above the current one) and
    /// removes the segments wholly below it; answered with the start afterwards. Past the
    /// high watermark (or negative) is [`PartitionError::OffsetOutOfRange`].
    pub fn handle_delete_records(&mut self, token: RequestToken, before: Offset, now_ms: i64) {
        if self.life == Life::Closed {
            self.answer(token, Err(PartitionError::Closed));
            return;
        }
        self.start
            .queue
            .push_back(StartRequest::DeleteRecords { token, before });
        self.pump(now_ms);
    }

    /// A retention pass at `now_ms`: core's [`retention::plan`] decides, the start moves (I9,
    /// I25), the segments below it are removed; answered with what was removed.
    pub fn handle_retention(&mut self, token: RequestToken, now_ms: i64) {
        if self.life == Life::Closed {
            self.answer(token, Err(PartitionError::Closed));
            return;
        }
        self.start
            .queue
            .push_back(StartRequest::Retention { token, now_ms });
        self.pump(now_ms);
    }

    /// The deadline of [`poll_timeout`](Self::poll_timeout) passed: under
    /// `flush.policy=interval`, syncs what is unsynced.
    pub fn handle_timeout(&mut self, now_ms: i64) {
        if let FlushRule::Interval { ms } = self.config.flush {
            let due = now_ms.saturating_sub(self.commit.last_sync_ms) >= ms;
            let idle = self.commit.in_flight.is_none() && self.commit.failure.is_none();
            if due && self.has_unsynced() && idle {
                self.commit.last_sync_ms = now_ms;
                self.start_sync();
            }
        }
        self.pump(now_ms);
    }

    /// The I/O `token` finished with `result`. I/O in flight may finish in any order.
    ///
    /// Panics on a token the machine did not hand out or that was already reported (a
    /// programmer error of the driver).
    pub fn handle_io_done(&mut self, token: IoToken, result: Result<(), IoFailure>, now_ms: i64) {
        if self.commit.in_flight.is_some_and(|(io, _)| io == token) {
            self.sync_done(result, now_ms);
        } else if self.writer_owns(token) {
            self.writer_done(token, result, now_ms);
        } else if self.start_owns(token) {
            self.start_done(token, result);
        } else {
            panic!("I/O {token:?} was not handed out or was already reported");
        }
        self.pump(now_ms);
    }

    // ----- outputs -----

    /// True when [`poll_io`](Self::poll_io) has an I/O to give: a driver that starts I/O on a
    /// task of its own wakes that task only then (an append queued behind a write in flight
    /// starts none).
    pub fn has_io(&self) -> bool {
        !self.io_out.is_empty()
    }

    /// The next I/O to start; report it with [`handle_io_done`](Self::handle_io_done).
    pub fn poll_io(&mut self) -> Option<Io> {
        self.io_out.pop_front()
    }

    /// The next answer, released under the flush policy (I8).
    pub fn poll_ack(&mut self) -> Option<Answer> {
        self.acks_out.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout), and why.
    pub fn poll_timeout(&self) -> Option<(i64, TimeoutReason)> {
        match self.config.flush {
            FlushRule::Interval { ms }
                if self.commit.failure.is_none()
                    && self.life != Life::Closed
                    && self.has_unsynced() =>
            {
                Some((
                    self.commit.last_sync_ms.saturating_add(ms),
                    TimeoutReason::IntervalFlush,
                ))
            }
            _ => None,
        }
    }

    // ----- the steps -----

    /// Runs every step the state allows: fails what an offline partition cannot do, starts
    /// the next write group (or roll, or tail repair), the next log-start move and a sync
    /// that waiters need. No step decides by the time yet (a placement reads each append's
    /// own `now_ms`); inputs pass it so one can.
    fn pump(&mut self, _now_ms: i64) {
        if let Some(failure) = self.commit.failure {
            while let Some(pending) = self.queue.pop_front() {
                self.answer(pending.append.token, Err(PartitionError::Offline(failure)));
            }
            while let Some(token) = self.roll_requests.pop_front() {
                self.answer(token, Err(PartitionError::Offline(failure)));
            }
            for wait in std::mem::take(&mut self.durable_waits) {
                self.answer(wait.answer.token, Err(PartitionError::Offline(failure)));
            }
        }
        if self.life == Life::Closed {
            for request in std::mem::take(&mut self.start.queue) {
                let token = match request {
                    StartRequest::DeleteRecords { token, .. } => token,
                    StartRequest::Retention { token, .. } => token,
                };
                self.answer(token, Err(PartitionError::Closed));
            }
        }
        if matches!(self.writer, Writer::Idle) {
            self.start_writer();
        }
        if self.start.in_flight.is_none() {
            self.start_next_move();
        }
        self.release_durable();
        if self
            .durable_waits
            .iter()
            .any(|w| w.end > self.commit.synced_up_to)
            && self.commit.in_flight.is_none()
            && self.commit.failure.is_none()
        {
            self.start_sync();
        }
    }

    /// With the writer idle: cuts a torn tail, or rolls, or places and writes the next group.
    fn start_writer(&mut self) {
        while !self.queue.is_empty() || !self.roll_requests.is_empty() {
            if self.torn_tail {
                let active = self.active();
                let kind = IoKind::TruncateLog {
                    segment: active.base_offset,
                    len_bytes: active.size_bytes,
                };
                self.writer = Writer::Truncating(self.emit(kind));
                return;
            }
            if let Some(token) = self.roll_requests.pop_front() {
                if self.active().is_empty() {
                    self.answer(token, Ok(Done::Rolled { base_offset: None }));
                    continue;
                }
                self.start_roll(Some(token));
                return;
            }
            let active = self.active();
            assert!(
                active.written_bytes == active.size_bytes,
                "a write starts at the published size, after any torn tail was cut (I2, I29)"
            );
            let mut group = Group {
                segment: active.base_offset,
                position: active.size_bytes,
                len_bytes: 0,
                next_offset: self.high_watermark,
                admission: GroupAdmission::new(),
                members: Vec::new(),
                placer: active.placer.clone(),
                time_placer: active.time_placer.clone(),
                entries: Vec::new(),
                time_entries: Vec::new(),
            };
            while let Some(pending) = self.queue.front().copied() {
                match self.place(&mut group, pending) {
                    Placement::Joined | Placement::Answered => {
                        self.queue.pop_front();
                    }
                    Placement::EndsGroup => break,
                    Placement::NeedsRoll => {
                        debug_assert!(group.members.is_empty(), "a roll only before a group");
                        self.start_roll(None);
                        return;
                    }
                }
            }
            if group.members.is_empty() {
                continue;
            }
            let batches = group
                .members
                .iter()
                .map(|m| PlacedBatch {
                    token: m.token,
                    base_offset: m.header.base_offset,
                    position: m.position,
                    len_bytes: m.header.total_bytes() as u32,
                })
                .collect();
            let kind = IoKind::WriteLog {
                segment: group.segment,
                position: group.position,
                batches,
            };
            // From here until the group is published the file may hold bytes past the
            // published size (I2); a failure leaves them torn (I29).
            self.torn_tail = true;
            let active = self.active_mut();
            active.written_bytes = group.position + group.len_bytes;
            let io = self.emit(kind);
            self.writer = Writer::Writing {
                group: Box::new(group),
                step: WriteStep::Log(io),
            };
            return;
        }
        if let Life::Closing(token) = self.life {
            self.start_close(token);
        }
    }

    /// Nothing is queued and the writer is free: the close starts (unless offline, which
    /// answers it at once).
    fn start_close(&mut self, token: RequestToken) {
        if let Some(failure) = self.commit.failure {
            self.life = Life::Closed;
            self.answer(token, Err(PartitionError::Offline(failure)));
            return;
        }
        let segment = self.active().base_offset;
        let io = self.emit(IoKind::SyncLog { segment });
        self.writer = Writer::Closing {
            step: CloseStep::SyncLog,
            io,
            token,
        };
    }

    fn close_step_done(
        &mut self,
        step: CloseStep,
        token: RequestToken,
        result: Result<(), IoFailure>,
        now_ms: i64,
    ) {
        let failure = match (step, result) {
            (CloseStep::Snapshot, _) => None,
            (_, Err(failure)) => {
                self.go_offline(failure);
                Some(failure)
            }
            (_, Ok(())) => self.commit.failure,
        };
        if let Some(failure) = failure {
            self.life = Life::Closed;
            self.answer(token, Err(PartitionError::Offline(failure)));
            return;
        }
        match step {
            CloseStep::SyncLog => {
                let kind = self.sync_indexes_io();
                let io = self.emit(kind);
                self.writer = Writer::Closing {
                    step: CloseStep::SyncIndexes,
                    io,
                    token,
                };
            }
            CloseStep::SyncIndexes => {
                self.commit.synced_up_to = self.commit.written_up_to;
                self.commit.sync_count += 1;
                self.commit.last_sync_ms = now_ms;
                let offset = self.high_watermark;
                let bytes = self.producers.encode_snapshot(offset);
                let io = self.emit(IoKind::WriteProducerSnapshot { offset, bytes });
                self.writer = Writer::Closing {
                    step: CloseStep::Snapshot,
                    io,
                    token,
                };
            }
            // A failed snapshot only makes the next open replay more.
            CloseStep::Snapshot => {
                self.life = Life::Closed;
                let clean = !self.txn_state_stale;
                self.answer(token, Ok(Done::Closed { clean }));
            }
        }
    }

    /// Syncs the active segment's indexes, cutting a slot a failed append wrote (I4), and
    /// notes the files as holding exactly the in-memory entries.
    fn sync_indexes_io(&mut self) -> IoKind {
        let active = self.active();
        let index_entries = active.index.len() as u64;
        let time_entries = active.time_index.len() as u64;
        let kind = IoKind::SyncIndexes {
            segment: active.base_offset,
            truncate_index_bytes: (active.index_file_entries != index_entries)
                .then_some(index_entries * ENTRY_BYTES as u64),
            truncate_time_index_bytes: (active.time_index_file_entries != time_entries)
                .then_some(time_entries * TIME_ENTRY_BYTES as u64),
        };
        let active = self.active_mut();
        active.index_file_entries = index_entries;
        active.time_index_file_entries = time_entries;
        kind
    }

    /// Puts one queued append into `group`, answers it, or says why the group ends first.
    /// The group ends before a batch core's producer rules want in the next group
    /// ([`GroupAdmission`]; a marker counts as a batch of its producer), before one past the
    /// coalescing cap, and before one that needs a roll ([`roll::roll_reason`]); a roll
    /// happens only before a group's first batch. Every check reads the state before the
    /// group (the producer table and the transactions move at publish), which is what each
    /// batch would see appended alone: one member per producer (I72).
    fn place(&mut self, group: &mut Group, pending: Pending) -> Placement {
        let Pending { append, now_ms } = pending;
        let producer_batch = ProducerBatch::from_header(&append.header);
        let decision = match rules::admit(
            &group.admission,
            &append.kind,
            &producer_batch,
            &self.producers,
            &self.txns,
            now_ms,
        ) {
            Verdict::WaitForNextGroup => return Placement::EndsGroup,
            Verdict::Duplicate(original) => {
                self.answer_duplicate(append.token, original);
                return Placement::Answered;
            }
            Verdict::Refuse(e) => {
                self.answer(append.token, Err(PartitionError::Producer(e)));
                return Placement::Answered;
            }
            Verdict::Admit(decision) => decision,
        };
        let base_offset = group.next_offset;
        let Some(last_offset) = base_offset
            .0
            .checked_add(i64::from(append.header.last_offset_delta))
            .filter(|last| *last < i64::MAX)
            .map(Offset)
        else {
            self.answer(append.token, Err(PartitionError::OffsetOverflow));
            return Placement::Answered;
        };
        let batch_bytes = append.header.total_bytes() as u64;
        let active = self.active();
        let roll = roll::roll_reason(
            ActiveSegment {
                base_offset: active.base_offset,
                size_bytes: active.size_bytes,
                created_ms: active.created_ms,
                is_empty: active.is_empty(),
            },
            RollLimits {
                segment_bytes: self.config.segment_bytes,
                segment_ms: self.config.segment_ms,
            },
            group.len_bytes,
            batch_bytes,
            last_offset,
            now_ms,
        );
        let over_cap = group.len_bytes + batch_bytes > self.config.coalesce_max_bytes;
        if !group.members.is_empty() && (roll.is_some() || over_cap) {
            return Placement::EndsGroup;
        }
        if roll.is_some() {
            return Placement::NeedsRoll;
        }
        rules::join(
            &mut group.admission,
            &append.kind,
            &producer_batch,
            &self.producers,
        );
        // I6: the roll decision keeps positions and relative offsets within 32 bits.
        let position = u32::try_from(group.position + group.len_bytes)
            .map(FilePos)
            .expect("the roll decision keeps positions within 32 bits (I6)");
        let relative = base_offset
            .relative_to(group.segment)
            .expect("the roll decision keeps relative offsets within 32 bits (I6)");
        let len = u32::try_from(batch_bytes).expect("a validated batch's length fits i32");
        let entry = group.placer.on_batch(position, relative, len);
        if let Some(entry) = entry {
            group.entries.push(entry);
        }
        if let Some(time_entry) =
            group
                .time_placer
                .on_batch(relative, append.header.max_timestamp, entry.is_some())
        {
            group.time_entries.push(time_entry);
        }
        // I1: dense offsets in placement order.
        debug_assert!(
            group
                .members
                .last()
                .map_or(base_offset == self.high_watermark, |m| m
                    .last_offset
                    .plus(1)
                    == base_offset),
            "offsets are dense (I1)"
        );
        let mut header = append.header;
        header.base_offset = base_offset;
        group.members.push(Member {
            token: append.token,
            kind: append.kind,
            header,
            producer_batch,
            decision,
            last_offset,
            position,
            now_ms,
        });
        group.len_bytes += batch_bytes;
        group.next_offset = last_offset.plus(1);
        Placement::Joined
    }

    /// Starts a roll of the active segment: sync its log, then its indexes (I5), then create
    /// the next segment at the high watermark.
    fn start_roll(&mut self, requested: Option<RequestToken>) {
        let segment = self.active().base_offset;
        let io = self.emit(IoKind::SyncLog { segment });
        self.writer = Writer::Rolling {
            step: RollStep::SyncLog,
            io,
            requested,
        };
    }

    fn writer_owns(&self, token: IoToken) -> bool {
        match &self.writer {
            Writer::Idle => false,
            Writer::Truncating(io)
            | Writer::IndexingAborted(io)
            | Writer::Rolling { io, .. }
            | Writer::Closing { io, .. } => *io == token,
            Writer::Writing { step, .. } => match step {
                WriteStep::Log(io) => *io == token,
                WriteStep::Indexes { waiting, .. } => waiting.contains(&token),
            },
        }
    }

    fn writer_done(&mut self, token: IoToken, result: Result<(), IoFailure>, now_ms: i64) {
        match std::mem::replace(&mut self.writer, Writer::Idle) {
            Writer::Idle => unreachable!("writer_owns said the writer is busy"),
            Writer::Truncating(_) => match result {
                Ok(()) => {
                    let active = self.active_mut();
                    active.written_bytes = active.size_bytes;
                    self.torn_tail = false;
                }
                // As a lone append would see it: the next queued append gets the error, the
                // ones after it try again.
                Err(failure) => self.fail_front(PartitionError::Io(failure)),
            },
            Writer::IndexingAborted(_) => {
                // I70: the file is a cache of the log; the in-memory ranges serve reads.
                if result.is_err() {
                    self.txn_state_stale = true;
                }
            }
            Writer::Rolling {
                step, requested, ..
            } => self.roll_step_done(step, requested, result, now_ms),
            Writer::Closing { step, token, .. } => {
                self.close_step_done(step, token, result, now_ms)
            }
            Writer::Writing { group, step } => match (step, result) {
                (WriteStep::Log(_), Ok(())) => self.write_indexes(group),
                (WriteStep::Log(_), Err(failure)) => self.fail_group(*group, failure),
                (
                    WriteStep::Indexes {
                        mut waiting,
                        failure,
                    },
                    result,
                ) => {
                    waiting.retain(|io| *io != token);
                    let failure = failure.or(result.err());
                    match (waiting.is_empty(), failure) {
                        (false, failure) => {
                            self.writer = Writer::Writing {
                                group,
                                step: WriteStep::Indexes { waiting, failure },
                            }
                        }
                        (true, Some(failure)) => self.fail_group(*group, failure),
                        (true, None) => self.publish(*group),
                    }
                }
            },
        }
    }

    /// The group's log bytes are written: asks for its index entries (I4: only now), or
    /// publishes at once when it made none.
    fn write_indexes(&mut self, group: Box<Group>) {
        let mut waiting = Vec::new();
        let segment = group.segment;
        if !group.entries.is_empty() {
            let active = self.active_mut();
            let slot = active.index.len() as u64;
            active.index_file_entries = active
                .index_file_entries
                .max(slot + group.entries.len() as u64);
            let kind = IoKind::WriteIndex {
                segment,
                position: slot * ENTRY_BYTES as u64,
                bytes: crate::index::encode_all(&group.entries),
            };
            waiting.push(self.emit(kind));
        }
        if !group.time_entries.is_empty() {
            let active = self.active_mut();
            let slot = active.time_index.len() as u64;
            active.time_index_file_entries = active
                .time_index_file_entries
                .max(slot + group.time_entries.len() as u64);
            let kind = IoKind::WriteTimeIndex {
                segment,
                position: slot * TIME_ENTRY_BYTES as u64,
                bytes: crate::time_index::encode_all(&group.time_entries),
            };
            waiting.push(self.emit(kind));
        }
        if waiting.is_empty() {
            self.publish(*group);
        } else {
            self.writer = Writer::Writing {
                group,
                step: WriteStep::Indexes {
                    waiting,
                    failure: None,
                },
            };
        }
    }

    /// A write of the group failed: none of it is acknowledged (I8), nothing is published,
    /// and the torn tail is cut before the next write (I29).
    fn fail_group(&mut self, group: Group, failure: IoFailure) {
        debug_assert!(self.torn_tail, "a write in flight marks the tail torn");
        for member in group.members {
            self.answer(member.token, Err(PartitionError::Io(failure)));
        }
    }

    /// Every write of the group completed: the indexes, placers, size and high watermark
    /// move together (I2, I4), the producer state records the group, and each member is
    /// answered under the flush policy (I8).
    fn publish(&mut self, group: Group) {
        let end_bytes = group.position + group.len_bytes;
        let next_offset = group.next_offset;
        {
            let active = self.active_mut();
            assert!(
                active.base_offset == group.segment && active.size_bytes == group.position,
                "a group is published where it was placed (I2)"
            );
            for entry in group.entries {
                active.index.push(entry);
            }
            for time_entry in group.time_entries {
                active.time_index.push(time_entry);
            }
            active.placer = group.placer;
            active.time_placer = group.time_placer;
            active.size_bytes = end_bytes;
            active.next_offset = next_offset;
            assert!(
                active.size_bytes <= active.written_bytes,
                "the published size never passes the written size (I2)"
            );
            assert!(
                active.index_file_entries >= active.index.len() as u64
                    && active.time_index_file_entries >= active.time_index.len() as u64,
                "index entries are on file before they are published (I4)"
            );
        }
        assert!(
            next_offset > self.high_watermark,
            "the high watermark only grows (I1)"
        );
        self.high_watermark = next_offset;
        self.commit.written_up_to = next_offset;
        self.torn_tail = false;
        // I67, I68: the transaction state moves in this same step, member by member in offset
        // order, so no reader sees the new high watermark with the old LSO.
        let mut aborted = Vec::new();
        for member in group.members {
            let published = Published {
                kind: &member.kind,
                batch: &member.producer_batch,
                decision: member.decision,
                base_offset: member.header.base_offset,
                last_offset: member.last_offset,
                max_timestamp_ms: member.header.max_timestamp,
                now_ms: member.now_ms,
            };
            if let Some(range) = rules::record(published, &mut self.producers, &mut self.txns) {
                aborted.push(range);
            }
            let answer = Answer {
                token: member.token,
                result: Ok(Done::Appended(AppendInfo {
                    base_offset: member.header.base_offset,
                    last_offset: member.last_offset,
                    segment_base_offset: group.segment,
                    position: member.position,
                    duplicate: false,
                })),
            };
            self.answer_under_policy(member.last_offset.plus(1), answer);
        }
        assert!(
            self.last_stable_offset() <= self.high_watermark,
            "LSO ≤ high watermark (I67)"
        );
        if !aborted.is_empty() {
            let io = self.emit(IoKind::AppendTxnIndex {
                segment: group.segment,
                entries: aborted,
            });
            self.writer = Writer::IndexingAborted(io);
        }
    }

    fn roll_step_done(
        &mut self,
        step: RollStep,
        requested: Option<RequestToken>,
        result: Result<(), IoFailure>,
        now_ms: i64,
    ) {
        match (step, result.err()) {
            // I5, I8: a failed sync of the sealed segment takes the partition offline.
            (RollStep::SyncLog | RollStep::SyncIndexes, Some(failure)) => {
                self.go_offline(failure);
                if let Some(token) = requested {
                    self.answer(token, Err(PartitionError::Offline(failure)));
                }
            }
            // Offline meanwhile (a group-commit sync failed): the roll stops, the queue fails.
            (RollStep::SyncLog | RollStep::SyncIndexes, None) if self.commit.failure.is_some() => {
                if let (Some(token), Some(failure)) = (requested, self.commit.failure) {
                    self.answer(token, Err(PartitionError::Offline(failure)));
                }
            }
            (RollStep::SyncLog, None) => {
                let kind = self.sync_indexes_io();
                let io = self.emit(kind);
                self.writer = Writer::Rolling {
                    step: RollStep::SyncIndexes,
                    io,
                    requested,
                };
            }
            (RollStep::SyncIndexes, None) => {
                // Everything written is in the sealed segment or older ones: durable.
                if self.commit.failure.is_none() {
                    self.commit.synced_up_to = self.commit.written_up_to;
                    self.commit.sync_count += 1;
                    self.commit.last_sync_ms = now_ms;
                }
                let base_offset = self.high_watermark;
                let io = self.emit(IoKind::CreateSegment { base_offset });
                self.writer = Writer::Rolling {
                    step: RollStep::Create,
                    io,
                    requested,
                };
            }
            (RollStep::Create, Some(failure)) => match requested {
                Some(token) => self.answer(token, Err(PartitionError::Io(failure))),
                None => self.fail_front(PartitionError::Io(failure)),
            },
            (RollStep::Create, None) => {
                let base_offset = self.high_watermark;
                assert!(
                    base_offset > self.active().base_offset,
                    "a roll never starts a segment at or below the active one's base"
                );
                self.segments.push(SegmentState::empty(
                    base_offset,
                    self.config.index_interval_bytes,
                    now_ms,
                ));
                // The sealed segment is synced: a snapshot at its end never covers bytes a
                // crash could take away (I5).
                let bytes = self.producers.encode_snapshot(base_offset);
                let io = self.emit(IoKind::WriteProducerSnapshot {
                    offset: base_offset,
                    bytes,
                });
                self.writer = Writer::Rolling {
                    step: RollStep::Snapshot,
                    io,
                    requested,
                };
            }
            (RollStep::Snapshot, _) => {
                if let Some(token) = requested {
                    let done = Done::Rolled {
                        base_offset: Some(self.high_watermark),
                    };
                    self.answer(token, Ok(done));
                }
            }
        }
    }

    /// Starts a sync of the active segment covering everything written (group commit: one
    /// sync at a time, I28).
    fn start_sync(&mut self) {
        debug_assert!(self.commit.in_flight.is_none());
        let segment = self.active().base_offset;
        let target = self.commit.written_up_to;
        let io = self.emit(IoKind::SyncLog { segment });
        self.commit.in_flight = Some((io, target));
        self.commit.sync_count += 1;
    }

    fn sync_done(&mut self, result: Result<(), IoFailure>, now_ms: i64) {
        let Some((_, target)) = self.commit.in_flight.take() else {
            unreachable!("sync_done only for the sync in flight");
        };
        match result {
            Ok(()) => {
                if self.commit.failure.is_none() && target > self.commit.synced_up_to {
                    self.commit.synced_up_to = target;
                }
                self.commit.last_sync_ms = now_ms;
            }
            // I8: never retried; the partition is offline for writes for good.
            Err(failure) => self.go_offline(failure),
        }
    }

    fn go_offline(&mut self, failure: IoFailure) {
        if self.commit.failure.is_none() {
            self.commit.failure = Some(failure);
        }
    }

    /// Answers `answer` now, or once durable when the policy is `fsync` (I8).
    fn answer_under_policy(&mut self, end: Offset, answer: Answer) {
        if self.config.flush == FlushRule::Fsync {
            self.wait_durable(end, answer);
        } else {
            self.acks_out.push_back(answer);
        }
    }

    fn wait_durable(&mut self, end: Offset, answer: Answer) {
        if let Some(failure) = self.commit.failure {
            self.answer(answer.token, Err(PartitionError::Offline(failure)));
        } else {
            self.durable_waits.push(DurableWait { end, answer });
        }
    }

    /// Releases every answer a sync now covers, in the order they were queued.
    fn release_durable(&mut self) {
        // Every input pumps: with no waiter (always so under `flush.policy=none`) there is
        // nothing to split.
        if self.durable_waits.is_empty() {
            return;
        }
        let synced = self.commit.synced_up_to;
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.durable_waits)
            .into_iter()
            .partition(|w| w.end <= synced);
        self.durable_waits = waiting;
        self.acks_out.extend(ready.into_iter().map(|w| w.answer));
    }

    fn answer_duplicate(&mut self, token: RequestToken, original: BatchMetadata) {
        let floor = self
            .segments
            .partition_point(|s| s.base_offset <= original.base_offset)
            .saturating_sub(1);
        let segment = &self.segments[floor];
        let answer = Answer {
            token,
            result: Ok(Done::Appended(AppendInfo {
                base_offset: original.base_offset,
                last_offset: original.last_offset,
                segment_base_offset: segment.base_offset,
                position: segment.floor_position(original.base_offset),
                duplicate: true,
            })),
        };
        self.answer_under_policy(original.last_offset.plus(1), answer);
    }

    // ----- log start moves (I9, I25) -----

    fn start_next_move(&mut self) {
        while self.start.in_flight.is_none() {
            let Some(request) = self.start.queue.pop_front() else {
                return;
            };
            let (token, target) = match request {
                StartRequest::DeleteRecords { token, before } => {
                    if before.0 < 0 || before > self.high_watermark {
                        let error = self.out_of_range(before);
                        self.answer(token, Err(error));
                        continue;
                    }
                    (token, before)
                }
                StartRequest::Retention { token, now_ms } => {
                    let infos: Vec<SegmentInfo> = self
                        .segments
                        .iter()
                        .map(|s| SegmentInfo {
                            base_offset: s.base_offset,
                            size_bytes: s.size_bytes,
                            // No record timestamp: fall back to when the segment was created.
                            max_timestamp_ms: match s.time_placer.max_timestamp_ms() {
                                ts if ts >= 0 => ts,
                                _ => s.created_ms,
                            },
                        })
                        .collect();
                    let plan = retention::plan(
                        &infos,
                        self.config.retention,
                        now_ms,
                        self.log_start_offset,
                    );
                    if plan.delete_count == 0 {
                        self.answer_start_moved(token, Vec::new());
                        continue;
                    }
                    (token, plan.new_log_start_offset)
                }
            };
            // I71: never past the last stable offset (an ongoing transaction's records stay
            // until its marker decides them). The LSO only grows, so the cap holds when the
            // checkpoint lands.
            let target = target.min(self.last_stable_offset());
            let mut mv = StartMove {
                token,
                step: StartStep::Removing {
                    waiting: Vec::new(),
                },
                removed: Vec::new(),
                failure: None,
            };
            if target > self.log_start_offset {
                let io = self.emit(IoKind::WriteStartCheckpoint { start: target });
                mv.step = StartStep::Checkpoint { io, start: target };
                self.start.in_flight = Some(mv);
            } else {
                self.remove_below_start(mv);
            }
        }
    }

    /// Removes the segments wholly below the log start (each whose successor begins at or
    /// below it), never the active one.
    fn remove_below_start(&mut self, mut mv: StartMove) {
        let start = self.log_start_offset;
        let count = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset <= start)
            .count();
        assert!(
            count < self.segments.len(),
            "retention never removes the active segment (I9)"
        );
        let removed: Vec<Offset> = self
            .segments
            .drain(..count)
            .map(|s| s.base_offset)
            .collect();
        if removed.is_empty() {
            self.answer_start_moved(mv.token, Vec::new());
            return;
        }
        let waiting = removed
            .iter()
            .map(|base_offset| {
                self.emit(IoKind::RemoveSegment {
                    base_offset: *base_offset,
                })
            })
            .collect();
        mv.removed = removed;
        mv.step = StartStep::Removing { waiting };
        self.start.in_flight = Some(mv);
    }

    fn start_owns(&self, token: IoToken) -> bool {
        match self.start.in_flight.as_ref().map(|mv| &mv.step) {
            Some(StartStep::Checkpoint { io, .. }) | Some(StartStep::SyncDir(io)) => *io == token,
            Some(StartStep::Removing { waiting }) => waiting.contains(&token),
            None => false,
        }
    }

    fn start_done(&mut self, token: IoToken, result: Result<(), IoFailure>) {
        let Some(mut mv) = self.start.in_flight.take() else {
            unreachable!("start_owns said a move is in flight");
        };
        match std::mem::replace(
            &mut mv.step,
            StartStep::Removing {
                waiting: Vec::new(),
            },
        ) {
            StartStep::Checkpoint { start, .. } => match result {
                Ok(()) => {
                    // I9, I25: forward only, and only once the checkpoint is durable.
                    assert!(
                        start > self.log_start_offset,
                        "the log start only moves forward (I9)"
                    );
                    self.log_start_offset = start;
                    self.txns.drop_below(start);
                    self.remove_below_start(mv);
                }
                Err(failure) => self.answer(mv.token, Err(PartitionError::Io(failure))),
            },
            StartStep::Removing { mut waiting } => {
                waiting.retain(|io| *io != token);
                mv.failure = mv.failure.or(result.err());
                if waiting.is_empty() {
                    let io = self.emit(IoKind::SyncDir);
                    mv.step = StartStep::SyncDir(io);
                } else {
                    mv.step = StartStep::Removing { waiting };
                }
                self.start.in_flight = Some(mv);
            }
            StartStep::SyncDir(_) => match mv.failure.or(result.err()) {
                Some(failure) => self.answer(mv.token, Err(PartitionError::Io(failure))),
                None => self.answer_start_moved(mv.token, mv.removed),
            },
        }
    }

    fn answer_start_moved(&mut self, token: RequestToken, removed: Vec<Offset>) {
        let done = Done::StartMoved {
            log_start_offset: self.log_start_offset,
            removed_base_offsets: removed,
        };
        self.answer(token, Ok(done));
    }

    // ----- helpers -----

    fn emit(&mut self, kind: IoKind) -> IoToken {
        let token = IoToken(self.next_io);
        self.next_io += 1;
        self.io_out.push_back(Io { token, kind });
        token
    }

    fn answer(&mut self, token: RequestToken, result: Result<Done, PartitionError>) {
        self.acks_out.push_back(Answer { token, result });
    }

    /// Fails the request the writer serves next (a repair or roll it needed failed): a
    /// requested roll first, else the first queued append.
    fn fail_front(&mut self, error: PartitionError) {
        if let Some(token) = self.roll_requests.pop_front() {
            self.answer(token, Err(error));
        } else if let Some(pending) = self.queue.pop_front() {
            self.answer(pending.append.token, Err(error));
        }
    }

    fn has_unsynced(&self) -> bool {
        self.commit.written_up_to > self.commit.synced_up_to
    }

    fn active(&self) -> &SegmentState {
        &self.segments[self.segments.len() - 1]
    }

    fn active_mut(&mut self) -> &mut SegmentState {
        let last = self.segments.len() - 1;
        &mut self.segments[last]
    }

    fn out_of_range(&self, requested: Offset) -> PartitionError {
        PartitionError::OffsetOutOfRange {
            requested,
            log_start_offset: self.log_start_offset,
            high_watermark: self.high_watermark,
        }
    }
}

/// A published size as a position (segments never pass 32 bits, I6).
fn end_pos(size_bytes: u64) -> FilePos {
    FilePos(u32::try_from(size_bytes).unwrap_or(u32::MAX))
}
