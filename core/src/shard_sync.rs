//! Cross-shard coordination: a phase barrier for startup and shutdown, a shutdown signal, and
//! a permit count (the broker's `max.connections`, shared by every shard's accept loop).
//!
//! Contract:
//! - Inputs: calls from shard threads (`arrive`, `fail`, `request`), each a single atomic step.
//! - Outputs: answers to "has every shard arrived?", "did a shard fail?", "was shutdown
//!   requested?". Waiting is the caller's business (a shard polls on its own timer between
//!   other work), so nothing here blocks or allocates after construction.
//! - Guarantee (I11): everything a shard wrote before it arrived at a phase (or before it
//!   requested shutdown) is visible to any shard that then observes the phase complete (or the
//!   request). Arrivals are `AcqRel` read-modify-writes on one counter, so every arrival's
//!   release is in the chain an observer acquires; the signal is a release store and an
//!   acquire load.
//! - Never: blocks, spins, or reads a clock. Built on [`crate::sync`], so the loom models in
//!   `loom-tests/tests/shard_sync.rs` check these guarantees over every interleaving.

use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// A one-shot barrier for `parties` shards: each arrives once; the phase is complete when all
/// have. A shard that cannot continue marks the barrier failed so the others stop waiting.
#[derive(Debug)]
pub struct PhaseBarrier {
    parties: usize,
    arrived: AtomicUsize,
    failed: AtomicBool,
}

/// What a shard waiting at a [`PhaseBarrier`] should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseState {
    /// Some shards have not arrived yet: wait and ask again.
    Waiting,
    /// Every shard arrived: continue.
    Complete,
    /// A shard failed: stop.
    Failed,
}

impl PhaseBarrier {
    /// A barrier for `parties` shards (at least one).
    pub fn new(parties: usize) -> Self {
        assert!(parties > 0, "a barrier needs at least one party");
        PhaseBarrier {
            parties,
            arrived: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        }
    }

    /// Records this shard's arrival (once per shard) and returns the barrier's state.
    pub fn arrive(&self) -> PhaseState {
        let before = self.arrived.fetch_add(1, Ordering::AcqRel);
        assert!(before < self.parties, "more arrivals than parties");
        self.state()
    }

    /// Marks the barrier failed: every waiter sees [`PhaseState::Failed`].
    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// The barrier's state now. Failure wins over completion.
    pub fn state(&self) -> PhaseState {
        if self.failed.load(Ordering::Acquire) {
            PhaseState::Failed
        } else if self.arrived.load(Ordering::Acquire) >= self.parties {
            PhaseState::Complete
        } else {
            PhaseState::Waiting
        }
    }
}

/// A process-wide "please shut down" flag: set once by whoever notices (a signal watcher, a
/// shard that hit a fatal error), observed by every shard's timer.
#[derive(Debug, Default)]
pub struct ShutdownSignal {
    requested: AtomicBool,
}

impl ShutdownSignal {
    /// A signal not yet requested.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests shutdown. Idempotent.
    pub fn request(&self) {
        self.requested.store(true, Ordering::Release);
    }

    /// True once shutdown was requested.
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }
}

/// A limit shared by all shards: at most `limit` permits are held at once. Acquiring is a
/// compare-and-swap loop, so the count never exceeds the limit even transiently (a
/// `fetch_add`-then-undo would let a racing acquirer see a full count that is not real).
#[derive(Debug)]
pub struct Permits {
    limit: usize,
    in_use: AtomicUsize,
}

impl Permits {
    /// Permits for at most `limit` holders.
    pub fn new(limit: usize) -> Self {
        Permits {
            limit,
            in_use: AtomicUsize::new(0),
        }
    }

    /// Takes a permit if one is free.
    pub fn try_acquire(&self) -> bool {
        let mut current = self.in_use.load(Ordering::Relaxed);
        loop {
            if current >= self.limit {
                return false;
            }
            match self.in_use.compare_exchange_weak(
                current,
                current + 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(seen) => current = seen,
            }
        }
    }

    /// Returns a permit taken by [`Permits::try_acquire`].
    pub fn release(&self) {
        let before = self.in_use.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "released a permit that was not held");
    }

    /// Permits held now.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn barrier_completes_when_every_party_arrived() {
        let barrier = PhaseBarrier::new(3);
        assert_eq!(barrier.state(), PhaseState::Waiting);
        assert_eq!(barrier.arrive(), PhaseState::Waiting);
        assert_eq!(barrier.arrive(), PhaseState::Waiting);
        assert_eq!(barrier.arrive(), PhaseState::Complete);
        assert_eq!(barrier.state(), PhaseState::Complete);
    }

    #[test]
    fn failure_wins_over_completion() {
        let barrier = PhaseBarrier::new(1);
        barrier.fail();
        assert_eq!(barrier.arrive(), PhaseState::Failed);
    }

    #[test]
    #[should_panic(expected = "more arrivals than parties")]
    fn arriving_twice_too_often_is_a_bug() {
        let barrier = PhaseBarrier::new(1);
        barrier.arrive();
        barrier.arrive();
    }

    #[test]
    fn permits_stop_at_the_limit_and_come_back() {
        let permits = Permits::new(2);
        assert!(permits.try_acquire());
        assert!(permits.try_acquire());
        assert!(!permits.try_acquire());
        assert_eq!(permits.in_use(), 2);
        permits.release();
        assert!(permits.try_acquire());
        assert!(!Permits::new(0).try_acquire());
    }

    #[test]
    fn shutdown_signal_is_sticky() {
        let signal = ShutdownSignal::new();
        assert!(!signal.is_requested());
        signal.request();
        signal.request();
        assert!(signal.is_requested());
    }
}
