//! [`MachineDriver`]: carries out a [`PartitionMachine`]'s I/O on a backend — the driver of
//! docs/DESIGN.md, "The partition log machine". [`super::PartitionLog`] owns one: the
//! machine is the one owner of the log's state (I170).
//!
//! Shape (I170): the machine sits in a `RefCell` beside the segment files and the request
//! table (`request_table::RequestTable`: each request's batch bytes and answer, by
//! [`RequestToken`]). A caller feeds its input inline (`handle_append` in arrival order, so
//! offsets follow arrival order, I27) and, when the machine has I/O to start, starts it
//! itself if the partition's one driver task is waiting (first poll with the task's waker),
//! or wakes the task; the task drains `poll_io` into a set of I/O futures run
//! concurrently (a write group beside a sync), feeds each completion back with
//! `handle_io_done`, and hands every `poll_ack` answer to its caller's slot. The machine is
//! never borrowed across an `.await`. A caller that goes away before its append was placed
//! cancels it (`handle_cancel`); once placed, the write goes on and the answer is dropped.
//! The driver reads no clock: `now_ms` comes with each input, and an I/O completion is
//! stamped with the latest `now_ms` seen.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use bytes::Bytes;
use minikafka_core::backend::{Backend, BackendFile};
use minikafka_core::partition::{
    Append, Done, Io, IoFailure, IoKind, IoToken, PartitionError, PartitionMachine, PlacedBatch,
    RequestToken,
};
use minikafka_core::record::{
    patch_base_offset, patch_leader_epoch, BatchError, BatchHeader, HEADER_BYTES,
};
use minikafka_core::types::Offset;

use super::producers;
use super::request_table::{Outcome, RequestTable};
use super::segment::Segment;
pub use super::segment::SegmentFiles;
use super::start_offset;
use super::txn_index;
use super::LEADER_EPOCH;
use crate::metrics::SyncStats;

/// A produced batch held in two pieces until it is written: its fixed header, copied out so
/// the driver can patch it (base offset, leader epoch; a log-append-time stamp), and the
/// records after it, which stay the caller's bytes (a slice of the request frame).
pub struct SplitBatch {
    /// The fixed header.
    pub head: [u8; HEADER_BYTES],
    /// The records, not copied.
    pub records: Bytes,
}

impl SplitBatch {
    /// Splits a batch; one shorter than [`HEADER_BYTES`] is core's truncated-header error
    /// (validation has refused it already).
    pub fn new(batch: Bytes) -> Result<SplitBatch, BatchError> {
        BatchHeader::parse(&batch)?;
        let mut head = [0u8; HEADER_BYTES];
        head.copy_from_slice(&batch[..HEADER_BYTES]);
        Ok(SplitBatch {
            head,
            records: batch.slice(HEADER_BYTES..),
        })
    }
}

/// Wakes the driver task: set by a caller after an input, taken by the task.
#[derive(Default)]
struct Kick {
    set: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Kick {
    fn kick(&self) {
        self.set.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    fn take(&self, waker: &Waker) -> bool {
        if self.set.replace(false) {
            return true;
        }
        *self.waker.borrow_mut() = Some(waker.clone());
        false
    }

    /// The driver task's waker while it waits with no kick pending: I/O first polled with it
    /// wakes the task when it completes, without a turn of the task to start it.
    fn waiting_waker(&self) -> Option<Waker> {
        if self.set.get() {
            return None;
        }
        self.waker.borrow().clone()
    }
}

/// What the caller side and the driver task share.
struct Shared<B: Backend> {
    backend: B,
    dir: PathBuf,
    machine: RefCell<PartitionMachine>,
    files: RefCell<BTreeMap<Offset, Rc<SegmentFiles<B>>>>,
    /// Every request not yet handed back: its batch until the write, then its answer.
    requests: RefCell<RequestTable<SplitBatch>>,
    /// The latest `now_ms` an input brought (stamps I/O completions).
    now_ms: Cell<i64>,
    kick: Kick,
    /// The I/O in flight, polled by the driver task (and first by a caller that started it).
    in_flight: RefCell<Vec<IoFuture>>,
    /// The handle was dropped: the task ends once no I/O is in flight.
    dropped: Cell<bool>,
    /// Offsets of the producer snapshots on disk, ascending (pruned after each write).
    snapshots: RefCell<Vec<Offset>>,
    sync_stats: SyncStats,
    /// Appends are held back (the `hold_appends` test hook): fed to the machine together,
    /// in arrival order, when the hold ends.
    held: Cell<bool>,
    deferred: RefCell<Vec<Append>>,
    /// `log.preallocate`: reserve the active segment's blocks ahead of its writes (I190).
    preallocate: Cell<bool>,
}

type IoFuture = Pin<Box<dyn Future<Output = (IoToken, Result<(), IoFailure>)>>>;

/// Polls the I/O in flight (a handful: a write group or its index writes, a sync, a log
/// start move) and gives the first that finished. A plain list polled whole on each wakeup
/// costs less than a `FuturesUnordered`'s node and waker per I/O at this size; the machine
/// takes completions in any order.
fn poll_finished(
    in_flight: &mut Vec<IoFuture>,
    cx: &mut std::task::Context<'_>,
) -> Poll<(IoToken, Result<(), IoFailure>)> {
    for at in 0..in_flight.len() {
        if let Poll::Ready(done) = in_flight[at].as_mut().poll(cx) {
            // A finished future is never polled again.
            drop(in_flight.swap_remove(at));
            return Poll::Ready(done);
        }
    }
    Poll::Pending
}

/// A [`PartitionMachine`] driven on a backend. See the module documentation.
pub struct MachineDriver<B: Backend> {
    shared: Rc<Shared<B>>,
}

impl<B: Backend> MachineDriver<B> {
    /// Drives `machine` over the segment `files` (one per machine segment, by base offset) in
    /// `dir`, starting the partition's driver task on `backend`.
    pub fn start(
        backend: B,
        dir: PathBuf,
        machine: PartitionMachine,
        files: Vec<Rc<SegmentFiles<B>>>,
        snapshots: Vec<Offset>,
        now_ms: i64,
    ) -> Self {
        let files = files
            .into_iter()
            .map(|f| (f.base_offset(), f))
            .collect::<BTreeMap<_, _>>();
        assert!(
            machine
                .segments()
                .iter()
                .all(|s| files.contains_key(&s.base_offset)),
            "every segment of the machine has its files"
        );
        let shared = Rc::new(Shared {
            backend: backend.clone(),
            dir,
            machine: RefCell::new(machine),
            files: RefCell::new(files),
            requests: RefCell::new(RequestTable::default()),
            now_ms: Cell::new(now_ms),
            kick: Kick::default(),
            in_flight: RefCell::new(Vec::new()),
            dropped: Cell::new(false),
            snapshots: RefCell::new(snapshots),
            sync_stats: SyncStats::new(),
            held: Cell::new(false),
            deferred: RefCell::new(Vec::new()),
            preallocate: Cell::new(false),
        });
        backend.spawn_local(run(shared.clone()));
        MachineDriver { shared }
    }

    /// Reads the machine (getters, `fetch_plan`): never across an `.await`.
    pub fn with_machine<T>(&self, read: impl FnOnce(&PartitionMachine) -> T) -> T {
        read(&self.shared.machine.borrow())
    }

    /// Changes the machine with no I/O (`reconfigure`, `forget_aborted`): never across an
    /// `.await`.
    pub fn with_machine_mut<T>(&self, change: impl FnOnce(&mut PartitionMachine) -> T) -> T {
        change(&mut self.shared.machine.borrow_mut())
    }

    /// Turns preallocation of the active segment on or off (`log.preallocate`, I190). Turned
    /// off, what is reserved stays until the segment is sealed or closed.
    pub fn set_preallocate(&self, on: bool) {
        self.shared.preallocate.set(on);
    }

    /// The latest `now_ms` an input brought.
    pub fn now_ms(&self) -> i64 {
        self.shared.now_ms.get()
    }

    /// Snapshots of the machine's segments over their files, oldest first.
    pub fn segments(&self) -> Vec<Rc<Segment<B>>> {
        let machine = self.shared.machine.borrow();
        let files = self.shared.files.borrow();
        machine
            .segments()
            .iter()
            .map(|s| Rc::new(Segment::snapshot(files[&s.base_offset].clone(), s.clone())))
            .collect()
    }

    /// A snapshot of the active segment over its files.
    pub fn active_segment(&self) -> Rc<Segment<B>> {
        let machine = self.shared.machine.borrow();
        let active = &machine.segments()[machine.segments().len() - 1];
        let files = self.shared.files.borrow()[&active.base_offset].clone();
        Rc::new(Segment::snapshot(files, active.clone()))
    }

    /// The cleaner's swap (I24): `new` replaces the sealed segments at `old` in the machine,
    /// and its files theirs. False, changing nothing, when the machine refuses.
    pub fn replace_segments(&self, old: &[Offset], new: &Segment<B>) -> bool {
        let mut machine = self.shared.machine.borrow_mut();
        let mut state = new.machine_state();
        // The cleaned segment covers the run's offsets even when compaction removed the
        // run's last records (I1 allows gaps in a sealed segment): it ends where the run
        // ended, as the cleaner's own view of a sealed segment does (`segment_facts`).
        let run_end = old.last().and_then(|last| {
            machine
                .segments()
                .iter()
                .find(|s| s.base_offset == *last)
                .map(|s| s.next_offset)
        });
        if let Some(end) = run_end.filter(|end| state.next_offset <= *end) {
            state.next_offset = end;
        }
        let replaced = machine.replace_segments(old, state);
        drop(machine);
        if replaced {
            let mut files = self.shared.files.borrow_mut();
            for base in old {
                files.remove(base);
            }
            files.insert(new.base_offset(), new.files().clone());
        }
        replaced
    }

    /// Offsets of the producer snapshots on disk, ascending.
    pub fn snapshot_offsets(&self) -> Vec<Offset> {
        self.shared.snapshots.borrow().clone()
    }

    /// Holds appends back until [`release`](Self::release): they are then placed together,
    /// in arrival order (a test hook).
    pub fn hold(&self) {
        self.shared.held.set(true);
    }

    /// Ends a [`hold`](Self::hold): the driver task hands the appends held back to the
    /// machine together at its next turn (one whose caller went away before that is dropped).
    pub fn release(&self) {
        self.shared.held.set(false);
        self.shared.kick.kick();
    }

    /// Takes the files of every segment out of the driver (after the close), for the caller
    /// to close those no read holds.
    pub fn take_files(&self) -> Vec<Rc<SegmentFiles<B>>> {
        std::mem::take(&mut *self.shared.files.borrow_mut())
            .into_values()
            .collect()
    }

    /// The files of the segment at `base_offset`, while the machine holds it.
    pub fn segment_files(&self, base_offset: Offset) -> Option<Rc<SegmentFiles<B>>> {
        self.shared.files.borrow().get(&base_offset).cloned()
    }

    /// Requests whose slots the driver still holds (answered ones leave as their callers
    /// take the answers): 0 once every caller has its answer.
    pub fn open_requests(&self) -> usize {
        self.shared.requests.borrow().held_slots()
    }

    /// The sync counts for the metrics endpoint.
    pub fn sync_stats(&self) -> &SyncStats {
        &self.shared.sync_stats
    }

    /// Appends one validated batch (I3), answered under the flush policy; `append` makes the
    /// machine's input from the request's token. Its records are written as they are.
    pub async fn append(
        &self,
        held: SplitBatch,
        append: impl FnOnce(RequestToken) -> Append,
        now_ms: i64,
    ) -> Result<Done, PartitionError> {
        self.request(now_ms, Some(held), |machine, token| {
            // Behind the appends held back, in arrival order (I27).
            if self.shared.held.get() || !self.shared.deferred.borrow().is_empty() {
                self.shared.deferred.borrow_mut().push(append(token));
            } else {
                machine.handle_append([append(token)], now_ms);
            }
        })
        .await
    }

    /// Answered once everything written so far is durable.
    pub async fn flush(&self, now_ms: i64) -> Result<Done, PartitionError> {
        self.request(now_ms, None, |m, t| m.handle_flush(t, now_ms))
            .await
    }

    /// Seals the active segment (unless empty) and starts the next one.
    pub async fn roll(&self, now_ms: i64) -> Result<Done, PartitionError> {
        self.request(now_ms, None, |m, t| m.handle_roll(t, now_ms))
            .await
    }

    /// DeleteRecords below `before`.
    pub async fn delete_records(
        &self,
        before: Offset,
        now_ms: i64,
    ) -> Result<Done, PartitionError> {
        self.request(now_ms, None, |m, t| {
            m.handle_delete_records(t, before, now_ms)
        })
        .await
    }

    /// A retention pass at `now_ms`.
    pub async fn retention(&self, now_ms: i64) -> Result<Done, PartitionError> {
        self.request(now_ms, None, |m, t| m.handle_retention(t, now_ms))
            .await
    }

    /// Closes the machine: queued appends are written, the active segment synced, and then
    /// the blocks reserved past its data are freed (I190).
    pub async fn close(&self, now_ms: i64) -> Result<Done, PartitionError> {
        let closed = self
            .request(now_ms, None, |m, t| m.handle_close(t, now_ms))
            .await;
        // The machine is closed: it writes nothing more, so the active segment's length is
        // final whatever the answer was.
        let active = self.shared.files.borrow().values().next_back().cloned();
        if let Some(files) = active {
            self.shared.release_reservation(&files).await;
        }
        closed
    }

    /// The `interval` flush: when the machine's deadline has passed at `now_ms`, tells it.
    /// Returns whether a deadline was due.
    pub fn tick(&self, now_ms: i64) -> bool {
        self.shared.now_ms.set(self.shared.now_ms.get().max(now_ms));
        let mut machine = self.shared.machine.borrow_mut();
        let due = machine
            .poll_timeout()
            .is_some_and(|(deadline, _)| deadline <= now_ms);
        if due {
            machine.handle_timeout(now_ms);
            drop(machine);
            self.shared.kick.kick();
        }
        due
    }

    /// Opens the input's request (an append's with its `batch`), feeds it, wakes the task
    /// when the machine has I/O to start, and waits for the answer. An append (`batch`) not
    /// yet placed when this future is dropped is cancelled in the machine.
    async fn request(
        &self,
        now_ms: i64,
        batch: Option<SplitBatch>,
        input: impl FnOnce(&mut PartitionMachine, RequestToken),
    ) -> Result<Done, PartitionError> {
        let shared = &self.shared;
        shared.now_ms.set(shared.now_ms.get().max(now_ms));
        let cancellable = batch.is_some();
        let token = shared.requests.borrow_mut().open(batch);
        input(&mut shared.machine.borrow_mut(), token);
        // Answers the input made at once (a refusal, a closed log) go out now.
        shared.answer_ready();
        // An input queued behind a write in flight starts nothing: the task picks it up when
        // that write completes, so it is not woken for it (one wakeup per write group, not
        // per append). One that starts I/O starts it here when the task is waiting.
        Shared::start_io(shared);
        let guard = CancelOnDrop {
            shared,
            token,
            cancellable,
            now_ms,
        };
        let outcome =
            futures::future::poll_fn(|cx| shared.requests.borrow_mut().poll_answer(token, cx))
                .await;
        std::mem::forget(guard);
        outcome
    }
}

impl<B: Backend> Drop for MachineDriver<B> {
    fn drop(&mut self) {
        self.shared.dropped.set(true);
        self.shared.kick.kick();
    }
}

/// Cancels an append whose caller went away (its future was dropped before the answer).
struct CancelOnDrop<'a, B: Backend> {
    shared: &'a Shared<B>,
    token: RequestToken,
    cancellable: bool,
    now_ms: i64,
}

impl<B: Backend> Drop for CancelOnDrop<'_, B> {
    fn drop(&mut self) {
        // Held back, the append never reached the machine: no answer will come for it.
        let held_back = self.cancellable && {
            let mut deferred = self.shared.deferred.borrow_mut();
            let before = deferred.len();
            deferred.retain(|a| a.token != self.token);
            deferred.len() != before
        };
        if self.cancellable && !held_back {
            // Answered `Cancelled` when not placed yet; placed, it is written as usual.
            self.shared
                .machine
                .borrow_mut()
                .handle_cancel(self.token, self.now_ms);
        }
        self.shared
            .requests
            .borrow_mut()
            .abandon(self.token, !held_back);
        if self.cancellable {
            self.shared.answer_ready();
            self.shared.kick.kick();
        }
    }
}

impl<B: Backend> Shared<B> {
    /// Hands every released answer to its request's slot, waking its caller (one gone away
    /// frees its slot).
    fn answer_ready(&self) {
        loop {
            let Some(answer) = self.machine.borrow_mut().poll_ack() else {
                return;
            };
            let outcome: Outcome = answer.result;
            self.requests.borrow_mut().answer(answer.token, outcome);
        }
    }

    /// Starts the machine's I/O from the caller's task when the driver task is waiting: each
    /// I/O is polled once with the task's waker (which submits it) and joins the I/O in
    /// flight, so the task wakes only when it completes. Waking the task to start it cost a
    /// turn of the task per write group, and on monoio an extra `io_uring_enter` with nothing
    /// to submit ([perf log](../../../docs/perf-log/2026-12-06-driver-start-inline.md)).
    /// Otherwise (the task already due to run) it is kicked as before. The order of inputs
    /// is the machine's (I27): this only changes which task first polls its I/O.
    fn start_io(shared: &Rc<Self>) {
        if !shared.machine.borrow().has_io() {
            return;
        }
        let Some(waker) = shared.kick.waiting_waker() else {
            shared.kick.kick();
            return;
        };
        let mut cx = std::task::Context::from_waker(&waker);
        loop {
            let io = shared.machine.borrow_mut().poll_io();
            let Some(io) = io else { break };
            let mut io: IoFuture = Box::pin(shared.clone().execute(io));
            match io.as_mut().poll(&mut cx) {
                Poll::Pending => shared.in_flight.borrow_mut().push(io),
                Poll::Ready((token, result)) => {
                    let now_ms = shared.now_ms.get();
                    shared
                        .machine
                        .borrow_mut()
                        .handle_io_done(token, result, now_ms);
                    shared.answer_ready();
                }
            }
        }
    }

    /// Carries out one I/O. Never holds a borrow across an `.await`.
    async fn execute(self: Rc<Self>, io: Io) -> (IoToken, Result<(), IoFailure>) {
        let result = self.execute_kind(io.kind).await;
        (io.token, result.map_err(|e| failure_of(&e)))
    }

    async fn execute_kind(&self, kind: IoKind) -> io::Result<()> {
        match kind {
            IoKind::WriteLog {
                segment,
                position,
                batches,
            } => {
                let files = self.files_of(segment)?;
                let parts = self.patched_parts(&batches);
                let write_end = position + parts.iter().map(|p| p.len() as u64).sum::<u64>();
                self.reserve_ahead(&files, write_end).await;
                let (written, _parts) = files.log.write_parts_at(parts, position).await;
                if written.is_ok() {
                    // The appends the next sync covers (the metrics' appends per sync).
                    self.sync_stats.written(batches.len() as u64);
                }
                written
            }
            IoKind::WriteIndex {
                segment,
                position,
                bytes,
            } => {
                let files = self.files_of(segment)?;
                files.index.write_at(bytes, position).await.0
            }
            IoKind::WriteTimeIndex {
                segment,
                position,
                bytes,
            } => {
                let files = self.files_of(segment)?;
                files.time_index.write_at(bytes, position).await.0
            }
            IoKind::TruncateLog { segment, len_bytes } => {
                let files = self.files_of(segment)?;
                // The cut frees the blocks reserved past it too.
                files.reservation.forget();
                files.log.truncate(len_bytes).await
            }
            IoKind::SyncLog { segment } => {
                let files = self.files_of(segment)?;
                let (covered, started) = (self.sync_stats.begin(), self.backend.now());
                let result = files.log.sync_data().await;
                let took = self.backend.now().saturating_duration_since(started);
                self.sync_stats.end(covered, took, result.is_ok());
                if let Err(e) = &result {
                    tracing::error!(dir = ?self.dir, error = %e, "sync failed: partition offline for writes (I8)");
                }
                result
            }
            IoKind::SyncIndexes {
                segment,
                truncate_index_bytes,
                truncate_time_index_bytes,
            } => {
                let files = self.files_of(segment)?;
                if let Some(len) = truncate_index_bytes {
                    files.index.truncate(len).await?;
                }
                files.index.sync_data().await?;
                if let Some(len) = truncate_time_index_bytes {
                    files.time_index.truncate(len).await?;
                }
                files.time_index.sync_data().await
            }
            IoKind::CreateSegment { base_offset } => {
                // The roll runs with the writer idle (I28): the segment it seals is written
                // to its end, and what was reserved past that end is freed now (I190).
                let sealed = self.files.borrow().values().next_back().cloned();
                if let Some(sealed) = sealed {
                    self.release_reservation(&sealed).await;
                }
                let files =
                    Rc::new(SegmentFiles::create(&self.backend, &self.dir, base_offset).await?);
                self.files.borrow_mut().insert(base_offset, files.clone());
                self.reserve_ahead(&files, 0).await;
                Ok(())
            }
            IoKind::WriteProducerSnapshot { offset, bytes } => {
                let written =
                    producers::write_snapshot(&self.backend, &self.dir, offset, bytes).await;
                if let Err(e) = &written {
                    tracing::warn!(dir = ?self.dir, offset = offset.0, error = %e, "writing a producer state snapshot failed");
                }
                written?;
                let mut list = std::mem::take(&mut *self.snapshots.borrow_mut());
                if let Err(i) = list.binary_search(&offset) {
                    list.insert(i, offset);
                }
                let pruned = producers::prune(&self.backend, &self.dir, &mut list).await;
                *self.snapshots.borrow_mut() = list;
                if let Err(e) = pruned {
                    tracing::warn!(dir = ?self.dir, error = %e, "removing old producer snapshots failed");
                }
                Ok(())
            }
            IoKind::WriteStartCheckpoint { start } => {
                start_offset::write(&self.backend, &self.dir, start)
                    .await
                    .map_err(|e| io::Error::other(e.to_string()))
            }
            IoKind::RemoveSegment { base_offset } => {
                let files = self.files.borrow_mut().remove(&base_offset);
                let Some(files) = files else {
                    return Ok(());
                };
                // The log first: a crash between leaves indexes without a log, which the
                // next open removes.
                remove_if_present(&self.backend, files.log_path()).await?;
                remove_if_present(&self.backend, files.index_path()).await?;
                remove_if_present(&self.backend, files.time_index_path()).await?;
                txn_index::remove(&self.backend, &self.dir, base_offset).await
            }
            IoKind::SyncDir => self.backend.sync_dir(&self.dir).await,
            IoKind::AppendTxnIndex { segment, entries } => {
                let appended =
                    txn_index::append_entries(&self.backend, &self.dir, segment, &entries).await;
                if let Err(e) = &appended {
                    tracing::warn!(dir = ?self.dir, error = %e, "appending to a txnindex failed (rebuilt at the next open)");
                }
                appended
            }
        }
    }

    /// Extends the `.log` ahead of a write that ends at `write_end` when the policy asks for
    /// it ([`super::preallocation::next_reservation`]), before the write, so the write lands
    /// inside the file's length and its sync commits no size change (I190). Awaited on the
    /// write's path: once per half step (0.5–8 MiB of writes), tens of µs on the blocking
    /// pool. A failure is logged and ends preallocation for that file; the write goes on.
    async fn reserve_ahead(&self, files: &Rc<SegmentFiles<B>>, write_end: u64) {
        if !self.preallocate.get() {
            return;
        }
        let segment_bytes = self.machine.borrow().config().segment_bytes;
        let Some(range) = files.reservation.start(write_end, segment_bytes) else {
            return;
        };
        let reserved = files
            .log
            .preallocate(range.start, range.end - range.start)
            .await;
        if let Err(e) = &reserved {
            tracing::warn!(dir = ?self.dir, segment = files.base_offset().0, error = %e, "preallocating the active segment failed: no more preallocation for it");
        }
        if files.reservation.finished(&range, reserved.is_ok()) {
            self.cut_to_data(files).await;
        }
    }

    /// Marks `files` released (sealed or closed) and cuts its `.log` to its data, unless a
    /// reservation in flight will (I190).
    async fn release_reservation(&self, files: &Rc<SegmentFiles<B>>) {
        if files.reservation.release() {
            self.cut_to_data(files).await;
        }
    }

    /// Cuts a released `.log` to the end of its data (the machine's `written_bytes` for it) and
    /// syncs the cut, so its length marks that end again before the next segment exists or
    /// the close counts as clean (I190). No byte of data changes; ext4 and XFS free the blocks
    /// past the cut. A failure is only logged: the zero tail then stays until the next open,
    /// whose tail check reads it as a torn tail and cuts it (I29).
    async fn cut_to_data(&self, files: &SegmentFiles<B>) {
        let data_end = self
            .machine
            .borrow()
            .segments()
            .iter()
            .find(|s| s.base_offset == files.base_offset())
            .map(|s| s.written_bytes);
        let Some(data_end) = data_end else {
            return;
        };
        let cut = match files.log.truncate(data_end).await {
            Ok(()) => files.log.sync_data().await,
            Err(e) => Err(e),
        };
        if let Err(e) = cut {
            tracing::warn!(dir = ?self.dir, segment = files.base_offset().0, error = %e, "cutting a segment's preallocated tail failed (the next open cuts it)");
        }
    }

    fn files_of(&self, segment: Offset) -> io::Result<Rc<SegmentFiles<B>>> {
        self.files.borrow().get(&segment).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("segment {} has no open files", segment.0),
            )
        })
    }

    /// The parts of one vectored write: each batch's patched header (base offset, leader
    /// epoch: outside the CRC, I1) then its records, in offset order. The batches leave the
    /// map: the machine never writes a batch twice (a failed group fails its members).
    fn patched_parts(&self, placed: &[PlacedBatch]) -> Vec<Bytes> {
        let mut requests = self.requests.borrow_mut();
        let mut heads = Vec::with_capacity(placed.len() * HEADER_BYTES);
        let mut records = Vec::with_capacity(placed.len());
        for batch in placed {
            let held = requests
                .take_payload(batch.token)
                .expect("a placed batch's bytes are held until its write (driver)");
            let mut head = held.head;
            patch_base_offset(&mut head, batch.base_offset);
            patch_leader_epoch(&mut head, LEADER_EPOCH);
            debug_assert_eq!(
                (HEADER_BYTES + held.records.len()) as u64,
                u64::from(batch.len_bytes),
                "the machine placed the batch with its length"
            );
            heads.extend_from_slice(&head);
            records.push(held.records);
        }
        let heads = Bytes::from(heads);
        let mut parts = Vec::with_capacity(2 * records.len());
        for (i, records) in records.into_iter().enumerate() {
            parts.push(heads.slice(i * HEADER_BYTES..(i + 1) * HEADER_BYTES));
            parts.push(records);
        }
        parts
    }
}

/// The partition's driver task: runs the machine's I/O concurrently, feeds completions back,
/// sends answers, until the handle is dropped and nothing is in flight.
async fn run<B: Backend>(shared: Rc<Shared<B>>) {
    loop {
        if !shared.held.get() && !shared.deferred.borrow().is_empty() {
            let deferred = std::mem::take(&mut *shared.deferred.borrow_mut());
            let now_ms = shared.now_ms.get();
            shared.machine.borrow_mut().handle_append(deferred, now_ms);
        }
        loop {
            let io = shared.machine.borrow_mut().poll_io();
            let Some(io) = io else { break };
            let io: IoFuture = Box::pin(shared.clone().execute(io));
            shared.in_flight.borrow_mut().push(io);
        }
        shared.answer_ready();
        if shared.dropped.get() && shared.in_flight.borrow().is_empty() {
            return;
        }
        let done = futures::future::poll_fn(|cx| {
            // No I/O future borrows `in_flight`: only this task and `start_io` (another
            // task, never during this poll) touch it.
            if let Poll::Ready(done) = poll_finished(&mut shared.in_flight.borrow_mut(), cx) {
                return Poll::Ready(Some(done));
            }
            if shared.kick.take(cx.waker()) {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        if let Some((token, result)) = done {
            let now_ms = shared.now_ms.get();
            shared
                .machine
                .borrow_mut()
                .handle_io_done(token, result, now_ms);
        }
    }
}

/// The machine's view of an I/O error: its kind and OS error number.
pub fn failure_of(e: &io::Error) -> IoFailure {
    IoFailure {
        kind: e.kind(),
        raw_os_error: e.raw_os_error(),
    }
}

async fn remove_if_present<B: Backend>(backend: &B, path: &Path) -> io::Result<()> {
    match backend.remove_file(path).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
