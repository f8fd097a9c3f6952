//! The long-poll wakeup protocol: a fetch that found nothing sleeps until an append may have
//! given it something, and no append is ever missed (I7).
//!
//! Contract:
//! - Inputs: [`PartitionSignal::notify_append`] from a partition's writer, called *after* the
//!   appended bytes are visible to readers (published with at least `Release`, e.g. the log
//!   length stored with `Ordering::Release`); [`Waiter::register`] from a fetch, once per
//!   partition it names, *before* its first read of that partition.
//! - Outputs: [`Waiter::poll_wait`] / [`Waiter::wait`] complete once any registered signal's
//!   epoch has moved past the waiter's snapshot; [`Waiter::is_notified`] tells the same without
//!   waiting.
//! - Never: allocates, locks or writes anything on the append path when nobody waits
//!   (`notify_append` is then one `SeqCst` fence and one load); blocks a thread (waiting is a
//!   future; the caller's executor parks); holds two signals' locks at once; calls a waker
//!   while holding a lock; leaks a waiter count (deregistration is in `Drop`, so a fetch
//!   future dropped mid-wait cleans up).
//!
//! # Protocol (I7)
//!
//! Fetch: `register` (count += 1, then snapshot the epoch) → read the log → if nothing new,
//! `wait` for the epoch to differ from the snapshot → read again. To wait again after a read
//! that still found too little, call [`Waiter::rearm`] (new snapshot) *before* that read.
//!
//! Append: make the bytes visible → `notify_append`: if the count is zero, stop; otherwise bump
//! the epoch and wake every registered waiter.
//!
//! Either the fetch's read sees the data or the waiter sees the newer epoch.
//!
//! # Ordering argument
//!
//! Three pairs of accesses carry the proof; everything else is `Relaxed` or under a lock.
//!
//! 1. **Count vs. data (a store-load pair on each side — Dekker).** The writer stores the data
//!    then loads the count; the fetch stores the count then loads the data. `Release`/`Acquire`
//!    cannot order a store before a later load (on x86 the store-buffer reorders exactly this),
//!    so both sides put a `fence(SeqCst)` between their store and their load. All `SeqCst`
//!    fences are totally ordered: if the writer's fence comes first, the fetch's data load
//!    (after its fence) sees the data store (before the writer's fence); if the fetch's fence
//!    comes first, the writer's count load sees the increment (or a later value of the count,
//!    which still includes this waiter: it only leaves in `Drop`). Hence: the read sees the
//!    data, or the writer sees a waiter and bumps the epoch. The count accesses themselves can
//!    stay `Relaxed`; the fences do the work. The price on the append path is that one fence.
//! 2. **Epoch publishes the data.** The bump is a `Release` RMW after the data store; every
//!    epoch load is `Acquire`. A fetch that sees a newer epoch (at snapshot or in `wait`) is
//!    therefore guaranteed to see the data on its next read. In particular a snapshot that
//!    already includes the bump is harmless: the read that follows it sees the data.
//! 3. **Waker vs. epoch (no lost wakeup while parking).** The writer bumps the epoch and only
//!    then takes each waiter's waker under that waiter's lock; `poll_wait` stores its waker
//!    under the same lock and only then re-checks the epochs. If the writer's lock comes
//!    second it finds the waker and wakes it; if it comes first, the unlock→lock edge makes
//!    the bump visible to the re-check, which returns `Ready`. A waiter that registered after
//!    the writer scanned the signal's waiter list is covered the same way by the list lock:
//!    registration pushes under it before snapshotting, so the snapshot sees the bump.
//!
//! `loom-tests/tests/wakeup.rs` checks this under every interleaving (bounded preemption),
//! including a deliberately wrong order (register after the read) that loom must catch.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::{fence, Arc, AtomicU64, AtomicUsize, Mutex, Ordering};

/// Per-waiter state shared with every signal the waiter registered on.
#[derive(Debug, Default)]
struct WaiterSlot {
    /// The waker of the latest `Pending` poll; taken (and woken) by a notify.
    waker: Mutex<Option<Waker>>,
}

/// One per partition, shared (via [`Arc`]) by the partition's writer and every fetch that may
/// wait on it, across shard threads.
#[derive(Debug, Default)]
pub struct PartitionSignal {
    /// Registered waiters; the only field the append path reads when nobody waits.
    waiter_count: AtomicUsize,
    /// Bumped by each append that found a registered waiter (I7).
    epoch: AtomicU64,
    /// The waiters to wake; its length equals `waiter_count` outside its critical sections.
    waiters: Mutex<Vec<Arc<WaiterSlot>>>,
}

impl PartitionSignal {
    /// A signal with no waiters at epoch 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells waiters that bytes were appended. Call after the bytes are visible (I7).
    ///
    /// With no registered waiter this is one `SeqCst` fence and one load: no lock, no write,
    /// no allocation. Otherwise it bumps the epoch and wakes every registered waiter.
    pub fn notify_append(&self) {
        // Pair 1 of the module's ordering argument: data store → fence → count load.
        fence(Ordering::SeqCst);
        if self.waiter_count.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Pair 2: the bump publishes the data to any `Acquire` load of the epoch.
        self.epoch.fetch_add(1, Ordering::Release);
        // Pair 3: take the wakers after the bump, each under its slot's lock. They are woken
        // after the list lock is released, so an executor that runs (and drops) the woken
        // fetch inline cannot re-enter `remove` on this signal and deadlock. The Vec is the
        // only allocation here, bounded by the waiter count, and made only when someone waits.
        let wakers: Vec<Waker> = {
            let waiters = self.waiters.lock();
            waiters
                .iter()
                .filter_map(|slot| slot.waker.lock().take())
                .collect()
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// The current epoch (number of appends that found a waiter).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// How many registrations are live on this signal.
    pub fn waiter_count(&self) -> usize {
        self.waiter_count.load(Ordering::Relaxed)
    }

    fn add(&self, slot: &Arc<WaiterSlot>) -> u64 {
        {
            let mut waiters = self.waiters.lock();
            waiters.push(Arc::clone(slot));
            self.waiter_count.fetch_add(1, Ordering::Relaxed);
        }
        // Pair 1: count store → fence → (snapshot, then the caller's) data load.
        fence(Ordering::SeqCst);
        self.epoch.load(Ordering::Acquire)
    }

    fn remove(&self, slot: &Arc<WaiterSlot>) {
        let mut waiters = self.waiters.lock();
        let at = waiters.iter().position(|s| Arc::ptr_eq(s, slot));
        debug_assert!(at.is_some(), "a registration is removed exactly once");
        if let Some(at) = at {
            waiters.swap_remove(at);
            self.waiter_count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One live registration: the signal and the epoch seen before the last read.
#[derive(Debug)]
struct Registration {
    signal: Arc<PartitionSignal>,
    seen_epoch: u64,
}

/// One per fetch request: registered on every partition the fetch names (possibly on other
/// shards), woken by an append to any of them. Deregisters everywhere on drop.
#[derive(Debug, Default)]
pub struct Waiter {
    slot: Arc<WaiterSlot>,
    registrations: Vec<Registration>,
}

impl Waiter {
    /// A waiter registered nowhere.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers on `signal` and snapshots its epoch. Call before the first read of the
    /// partition (I7). Registering twice on one signal is allowed and counts twice.
    pub fn register(&mut self, signal: &Arc<PartitionSignal>) {
        let seen_epoch = signal.add(&self.slot);
        self.registrations.push(Registration {
            signal: Arc::clone(signal),
            seen_epoch,
        });
    }

    /// Takes a new epoch snapshot on every registered signal, so the next wait ignores the
    /// appends already seen. Call before re-reading the partitions (I7).
    pub fn rearm(&mut self) {
        for reg in &mut self.registrations {
            reg.seen_epoch = reg.signal.epoch.load(Ordering::Acquire);
        }
    }

    /// Whether any registered signal's epoch moved past its snapshot (an append happened since).
    pub fn is_notified(&self) -> bool {
        self.registrations
            .iter()
            .any(|reg| reg.signal.epoch.load(Ordering::Acquire) != reg.seen_epoch)
    }

    /// How many registrations this waiter holds.
    pub fn registration_count(&self) -> usize {
        self.registrations.len()
    }

    /// Polls for a notification: `Ready` once [`is_notified`](Self::is_notified), otherwise
    /// stores `cx`'s waker (a notify on any thread wakes it) and returns `Pending`. A waiter
    /// registered nowhere stays `Pending` forever; the caller's timeout ends such a wait.
    pub fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_notified() {
            return Poll::Ready(());
        }
        {
            let mut waker = self.slot.waker.lock();
            match waker.as_ref() {
                Some(old) if old.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
        }
        // Pair 3: re-check after the waker is visible to notifiers.
        if self.is_notified() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// A future completing on the first notification; see [`poll_wait`](Self::poll_wait).
    pub fn wait(&mut self) -> Wait<'_> {
        Wait { waiter: self }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        for reg in &self.registrations {
            reg.signal.remove(&self.slot);
        }
    }
}

/// The future returned by [`Waiter::wait`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Wait<'a> {
    waiter: &'a mut Waiter,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.waiter.poll_wait(cx)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;
    use std::task::Wake;
    use std::thread;
    use std::time::Duration;

    /// Unparks the thread that made it.
    struct ThreadWaker(thread::Thread);

    impl Wake for ThreadWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Counts its wakes.
    #[derive(Default)]
    struct CountingWaker(StdAtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn block_on<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let waker = Waker::from(std::sync::Arc::new(ThreadWaker(thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            thread::park();
        }
    }

    fn counting() -> (std::sync::Arc<CountingWaker>, Waker) {
        let counter = std::sync::Arc::new(CountingWaker::default());
        let waker = Waker::from(std::sync::Arc::clone(&counter));
        (counter, waker)
    }

    #[test]
    fn notify_without_waiters_does_not_bump_epoch() {
        let signal = PartitionSignal::new();
        for _ in 0..3 {
            signal.notify_append();
        }
        assert_eq!(signal.epoch(), 0);
        assert_eq!(signal.waiter_count(), 0);
    }

    #[test]
    fn waiter_blocked_is_woken_by_notify_from_another_thread_i7() {
        let signal = Arc::new(PartitionSignal::new());
        let log_len = Arc::new(AtomicU64::new(0));
        let mut waiter = Waiter::new();
        waiter.register(&signal);
        assert_eq!(log_len.load(Ordering::Acquire), 0, "nothing appended yet");

        let producer = {
            let (signal, log_len) = (Arc::clone(&signal), Arc::clone(&log_len));
            thread::spawn(move || {
                // Give the fetch time to park, so the wake really crosses threads.
                thread::sleep(Duration::from_millis(20));
                log_len.store(1, Ordering::Release);
                signal.notify_append();
            })
        };
        block_on(waiter.wait());
        assert_eq!(
            log_len.load(Ordering::Acquire),
            1,
            "woken only after the data"
        );
        assert_eq!(signal.epoch(), 1);
        producer.join().expect("producer thread");
    }

    #[test]
    fn pending_poll_stores_waker_and_notify_wakes_it_once() {
        let signal = Arc::new(PartitionSignal::new());
        let mut waiter = Waiter::new();
        waiter.register(&signal);
        let (counter, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Pending);
        assert!(!waiter.is_notified());

        let remote = Arc::clone(&signal);
        thread::spawn(move || remote.notify_append())
            .join()
            .expect("notifier thread");
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert!(waiter.is_notified());
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Ready(()));

        // The waker was taken: a second notify without a new Pending poll wakes nobody.
        signal.notify_append();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn drop_deregisters_from_every_signal() {
        let a = Arc::new(PartitionSignal::new());
        let b = Arc::new(PartitionSignal::new());
        {
            let mut waiter = Waiter::new();
            waiter.register(&a);
            waiter.register(&b);
            assert_eq!(waiter.registration_count(), 2);
            assert_eq!((a.waiter_count(), b.waiter_count()), (1, 1));
            assert_eq!(a.waiters.lock().len(), 1);
        }
        assert_eq!((a.waiter_count(), b.waiter_count()), (0, 0));
        assert!(a.waiters.lock().is_empty() && b.waiters.lock().is_empty());
        a.notify_append();
        assert_eq!(
            a.epoch(),
            0,
            "a dropped waiter no longer costs the producer"
        );
    }

    #[test]
    fn drop_mid_wait_deregisters_and_releases_the_waker() {
        let signal = Arc::new(PartitionSignal::new());
        let (counter, waker) = counting();
        let mut waiter = Waiter::new();
        waiter.register(&signal);
        {
            let mut wait = waiter.wait();
            let mut cx = Context::from_waker(&waker);
            assert_eq!(Pin::new(&mut wait).poll(&mut cx), Poll::Pending);
        }
        drop(waiter);
        assert_eq!(signal.waiter_count(), 0);
        signal.notify_append();
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
        drop(waker);
        // Only our handle is left: the stored waker clone died with the waiter.
        assert_eq!(std::sync::Arc::strong_count(&counter), 1);
    }

    #[test]
    fn waiter_on_two_signals_is_woken_by_either() {
        let a = Arc::new(PartitionSignal::new());
        let b = Arc::new(PartitionSignal::new());
        let mut waiter = Waiter::new();
        waiter.register(&a);
        waiter.register(&b);
        let (counter, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Pending);
        b.notify_append();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Ready(()));
        assert_eq!((a.epoch(), b.epoch()), (0, 1));
    }

    #[test]
    fn rearm_forgets_seen_appends() {
        let signal = Arc::new(PartitionSignal::new());
        let mut waiter = Waiter::new();
        waiter.register(&signal);
        signal.notify_append();
        assert!(waiter.is_notified());
        waiter.rearm();
        assert!(!waiter.is_notified());
        signal.notify_append();
        assert!(waiter.is_notified());
    }

    #[test]
    fn snapshot_taken_at_register_sees_earlier_appends_as_old() {
        let signal = Arc::new(PartitionSignal::new());
        let mut first = Waiter::new();
        first.register(&signal);
        signal.notify_append();
        assert_eq!(signal.epoch(), 1);
        let mut second = Waiter::new();
        second.register(&signal);
        assert!(first.is_notified());
        assert!(
            !second.is_notified(),
            "the second fetch reads after the append"
        );
        assert_eq!(signal.waiter_count(), 2);
    }

    #[test]
    fn many_rounds_across_threads_never_lose_a_wakeup_i7() {
        const ROUNDS: u64 = 200;
        let signal = Arc::new(PartitionSignal::new());
        let log_len = Arc::new(AtomicU64::new(0));
        let producer = {
            let (signal, log_len) = (Arc::clone(&signal), Arc::clone(&log_len));
            thread::spawn(move || {
                for len in 1..=ROUNDS {
                    log_len.store(len, Ordering::Release);
                    signal.notify_append();
                    thread::yield_now();
                }
            })
        };
        let mut waiter = Waiter::new();
        waiter.register(&signal);
        let mut seen_len = 0;
        while seen_len < ROUNDS {
            let len = log_len.load(Ordering::Acquire);
            if len > seen_len {
                seen_len = len;
                waiter.rearm();
                continue;
            }
            block_on(waiter.wait());
            waiter.rearm();
        }
        producer.join().expect("producer thread");
        assert_eq!(seen_len, ROUNDS);
    }
}
