//! Loom models of the cross-shard coordination primitives (`minikafka_core::shard_sync`,
//! invariant I11): what a shard wrote before arriving at a phase barrier, or before requesting
//! shutdown, is visible to a shard that observes the phase complete or the request.
//!
//! The data each shard writes lives in loom's `UnsafeCell`, so an access that is not ordered
//! by the primitive is reported by loom as a causality violation. The last model reads before
//! waiting and checks that loom catches it, so a green run here means something.
#![cfg(loom)]

use std::panic::{self, AssertUnwindSafe};

use loom::cell::UnsafeCell;
use loom::thread;
use minikafka_core::shard_sync::{Permits, PhaseBarrier, PhaseState, ShutdownSignal};
use minikafka_core::sync::Arc;
use minikafka_loom_tests::model_builder;

/// Two shards' private state, written by its owner before it arrives at the barrier.
struct Shards {
    barrier: PhaseBarrier,
    state: [UnsafeCell<u64>; 2],
}

// SAFETY: every access to `state` is ordered by the barrier, which is what loom checks.
unsafe impl Sync for Shards {}

fn wait_for_phase(barrier: &PhaseBarrier) -> PhaseState {
    loop {
        match barrier.state() {
            PhaseState::Waiting => thread::yield_now(),
            done => return done,
        }
    }
}

/// Shard `me` writes its state, arrives, waits for the phase, then reads the other's state.
fn shard(shards: &Shards, me: usize, wait_first: bool) -> u64 {
    shards.state[me].with_mut(|v| unsafe { *v = 10 + me as u64 });
    shards.barrier.arrive();
    if wait_first {
        assert_eq!(wait_for_phase(&shards.barrier), PhaseState::Complete);
    }
    shards.state[1 - me].with(|v| unsafe { *v })
}

fn two_shards(wait_first: bool) {
    model_builder().check(move || {
        let shards = Arc::new(Shards {
            barrier: PhaseBarrier::new(2),
            state: [UnsafeCell::new(0), UnsafeCell::new(0)],
        });
        let other = Arc::clone(&shards);
        let handle = thread::spawn(move || shard(&other, 1, wait_first));
        let seen_by_0 = shard(&shards, 0, wait_first);
        let seen_by_1 = handle.join().expect("shard 1");
        assert_eq!(
            (seen_by_0, seen_by_1),
            (11, 10),
            "a write before arrival was not seen"
        );
    });
}

/// Both shards write, arrive, wait, read each other's state: always seen (I11).
#[test]
fn barrier_publishes_writes_made_before_arrival_i11() {
    two_shards(true);
}

/// A failed shard releases the waiter: it never waits forever on a shard that gave up.
#[test]
fn failure_releases_waiters() {
    model_builder().check(|| {
        let barrier = Arc::new(PhaseBarrier::new(2));
        let other = Arc::clone(&barrier);
        let handle = thread::spawn(move || other.fail());
        barrier.arrive();
        assert_eq!(wait_for_phase(&barrier), PhaseState::Failed);
        handle.join().expect("failing shard");
    });
}

/// What a shard wrote before requesting shutdown is visible to a shard that sees the request.
#[test]
fn shutdown_request_publishes_prior_writes_i11() {
    struct Flagged {
        signal: ShutdownSignal,
        reason: UnsafeCell<u64>,
    }
    // SAFETY: `reason` is written before `request` and read after `is_requested`.
    unsafe impl Sync for Flagged {}
    model_builder().check(|| {
        let flagged = Arc::new(Flagged {
            signal: ShutdownSignal::new(),
            reason: UnsafeCell::new(0),
        });
        let writer = Arc::clone(&flagged);
        let handle = thread::spawn(move || {
            writer.reason.with_mut(|v| unsafe { *v = 7 });
            writer.signal.request();
        });
        while !flagged.signal.is_requested() {
            thread::yield_now();
        }
        assert_eq!(flagged.reason.with(|v| unsafe { *v }), 7);
        handle.join().expect("writer");
    });
}

/// Two shards race for the last permit: exactly one wins, the count never exceeds the limit,
/// and a released permit can be taken again.
#[test]
fn permits_never_exceed_the_limit() {
    model_builder().check(|| {
        let permits = Arc::new(Permits::new(1));
        let other = Arc::clone(&permits);
        let handle = thread::spawn(move || {
            let won = other.try_acquire();
            assert!(other.in_use() <= 1);
            won
        });
        let won_here = permits.try_acquire();
        assert!(permits.in_use() <= 1);
        let won_there = handle.join().expect("shard 1");
        assert!(
            won_here ^ won_there,
            "exactly one shard gets the last permit"
        );
        permits.release();
        assert!(permits.try_acquire(), "a released permit is free again");
    });
}

/// Reading the other shard's state WITHOUT waiting for the phase is a race, and loom must
/// report it: proof that the model above can fail.
#[test]
fn broken_read_before_the_phase_completes_is_caught() {
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| two_shards(false)));
    assert!(
        outcome.is_err(),
        "loom accepted a read that the barrier does not order"
    );
}
