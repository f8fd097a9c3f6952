//! Group commit bookkeeping: which offsets are written, which are durable, who waits.
//!
//! Contract:
//! - Shard-local state (`Cell`/`RefCell`), driven by the partition: `note_written` after each
//!   write, [`GroupCommit::begin_sync`] / [`GroupCommit::end_sync`] around each sync.
//! - One sync covers every offset written before it *started* (`written_up_to` is captured at
//!   [`GroupCommit::begin_sync`]); appends that finish their write while a sync is in flight
//!   wait for the next one, so K concurrent durable appends share far fewer than K syncs.
//! - A failed sync is sticky: it is recorded once, every waiter is woken and sees it, and no
//!   later call turns it into success (I8). The partition goes offline for writes.
//! - Waiting uses `futures` oneshot channels, so it works on any executor; a waiter registers
//!   and checks in the same synchronous step, so no wakeup is lost.

use std::cell::{Cell, RefCell};
use std::io;

use futures::channel::oneshot;
use minikafka_core::types::Offset;

/// The error that took a partition offline: its kind and OS error number.
pub type SyncFailure = (io::ErrorKind, Option<i32>);

/// Durability state of one partition.
#[derive(Debug)]
pub struct GroupCommit {
    written_up_to: Cell<Offset>,
    synced_up_to: Cell<Offset>,
    sync_in_flight: Cell<bool>,
    sync_count: Cell<u64>,
    failure: Cell<Option<SyncFailure>>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl GroupCommit {
    /// State for a log whose offsets below `next_offset` are durable (just recovered).
    pub fn new(next_offset: Offset) -> Self {
        GroupCommit {
            written_up_to: Cell::new(next_offset),
            synced_up_to: Cell::new(next_offset),
            sync_in_flight: Cell::new(false),
            sync_count: Cell::new(0),
            failure: Cell::new(None),
            waiters: RefCell::new(Vec::new()),
        }
    }

    /// Records that every offset below `end` has been written (reached the kernel).
    pub fn note_written(&self, end: Offset) {
        debug_assert!(
            end >= self.written_up_to.get(),
            "writes are in offset order (I1)"
        );
        self.written_up_to.set(end);
    }

    /// Offsets below this have been written.
    pub fn written_up_to(&self) -> Offset {
        self.written_up_to.get()
    }

    /// Offsets below this are durable.
    pub fn synced_up_to(&self) -> Offset {
        self.synced_up_to.get()
    }

    /// True when written data is not yet covered by a sync.
    pub fn has_unsynced(&self) -> bool {
        self.written_up_to.get() > self.synced_up_to.get()
    }

    /// Syncs started so far (successful or not).
    pub fn sync_count(&self) -> u64 {
        self.sync_count.get()
    }

    /// The failure that took the partition offline, if any (sticky, I8).
    pub fn failure(&self) -> Option<SyncFailure> {
        self.failure.get()
    }

    /// True while a sync is running.
    pub fn sync_in_flight(&self) -> bool {
        self.sync_in_flight.get()
    }

    /// Starts a sync if none is in flight and nothing failed: returns the offset it will
    /// cover (everything written so far). The caller must call [`GroupCommit::end_sync`].
    pub fn begin_sync(&self) -> Option<Offset> {
        if self.sync_in_flight.get() || self.failure.get().is_some() {
            return None;
        }
        self.sync_in_flight.set(true);
        self.sync_count.set(self.sync_count.get() + 1);
        Some(self.written_up_to.get())
    }

    /// Ends the sync begun with `target`: on success offsets below `target` are durable; on
    /// failure the partition is marked failed for good (I8). Wakes every waiter either way.
    pub fn end_sync(&self, target: Offset, result: &io::Result<()>) {
        debug_assert!(self.sync_in_flight.get(), "end_sync without begin_sync");
        self.sync_in_flight.set(false);
        match result {
            Ok(()) => {
                // I8: a sync covers only what was written before it began.
                assert!(
                    target <= self.written_up_to.get(),
                    "a sync covers only written offsets (I8)"
                );
                if target > self.synced_up_to.get() {
                    self.synced_up_to.set(target);
                }
            }
            Err(e) => self.fail(e),
        }
        self.wake_all();
    }

    /// Gives up the sync in flight without crediting it (its leader was cancelled, so whether
    /// it completed is unknown) and wakes every waiter; one of them leads the next sync.
    pub fn abandon_sync(&self) {
        self.sync_in_flight.set(false);
        self.wake_all();
    }

    /// Records a sync failure that happened outside [`GroupCommit::begin_sync`] (e.g. while
    /// rolling a segment) and wakes every waiter.
    pub fn fail(&self, e: &io::Error) {
        if self.failure.get().is_none() {
            self.failure.set(Some((e.kind(), e.raw_os_error())));
        }
        self.wake_all();
    }

    /// Records a sync that covered everything written, done outside `begin_sync` while no
    /// write could start (a segment roll holds the append lock).
    pub fn mark_all_synced(&self) {
        if self.failure.get().is_none() {
            self.synced_up_to.set(self.written_up_to.get());
            self.sync_count.set(self.sync_count.get() + 1);
            self.wake_all();
        }
    }

    /// Registers a waiter, woken at the end of the next sync (or failure).
    pub fn wait(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().push(tx);
        rx
    }

    fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for tx in waiters {
            // A dropped receiver (a cancelled append) is fine.
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sync_covers_what_was_written_before_it_began() {
        let gc = GroupCommit::new(Offset(0));
        gc.note_written(Offset(5));
        let target = gc.begin_sync().expect("idle");
        assert_eq!(target, Offset(5));
        assert!(gc.begin_sync().is_none(), "one sync at a time");
        gc.note_written(Offset(9));
        gc.end_sync(target, &Ok(()));
        assert_eq!(gc.synced_up_to(), Offset(5));
        assert!(gc.has_unsynced());
        assert_eq!(gc.sync_count(), 1);
    }

    /// I8: a failed sync is sticky and never becomes success.
    #[test]
    fn failed_sync_is_sticky_i8() {
        let gc = GroupCommit::new(Offset(0));
        gc.note_written(Offset(3));
        let mut rx = gc.wait();
        let target = gc.begin_sync().expect("idle");
        gc.end_sync(target, &Err(io::Error::from_raw_os_error(5)));
        assert_eq!(gc.synced_up_to(), Offset(0));
        assert_eq!(gc.failure().map(|f| f.1), Some(Some(5)));
        assert!(gc.begin_sync().is_none());
        gc.mark_all_synced();
        assert_eq!(gc.synced_up_to(), Offset(0));
        assert_eq!(rx.try_recv(), Ok(Some(())), "waiter woken");
    }
}
