//! Loom models of the long-poll wakeup (`minikafka_core::wakeup`, invariant I7).
//!
//! Each model has producers that append (store the new log length with `Release`, then
//! `notify_append`) and fetchers that follow the protocol (register, read with `Acquire`, wait
//! if nothing is new, read again). A lost wakeup leaves a fetcher parked forever, which loom
//! reports as a deadlock; a fetcher woken before the data is visible fails an assertion.
//!
//! The last models call the same primitive in the wrong order (register after the read) and
//! check that loom catches it, so a green run here means something.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p minikafka-loom-tests --release --target-dir target-loom`.
#![cfg(loom)]

use std::panic::{self, AssertUnwindSafe};
use std::task::{Context, Poll, Wake, Waker};

use loom::future::block_on;
use loom::thread;
use minikafka_core::sync::{Arc, AtomicU64, Ordering};
use minikafka_core::wakeup::{PartitionSignal, Waiter};
use minikafka_loom_tests::model_builder;

/// A partition reduced to what the protocol touches: its published length and its signal.
struct Partition {
    len_bytes: AtomicU64,
    signal: Arc<PartitionSignal>,
}

impl Partition {
    fn new() -> Arc<Self> {
        Arc::new(Partition {
            len_bytes: AtomicU64::new(0),
            signal: Arc::new(PartitionSignal::new()),
        })
    }

    /// The writer's append: publish the bytes, then notify (I7).
    fn append(&self, new_len_bytes: u64) {
        self.len_bytes.store(new_len_bytes, Ordering::Release);
        self.signal.notify_append();
    }

    fn read(&self) -> u64 {
        self.len_bytes.load(Ordering::Acquire)
    }
}

fn spawn_append(partition: &Arc<Partition>, new_len_bytes: u64) -> thread::JoinHandle<()> {
    let partition = Arc::clone(partition);
    thread::spawn(move || partition.append(new_len_bytes))
}

/// The correct fetch: register (snapshot) before the first read; wait only if it saw nothing.
fn fetch(partition: &Partition) -> u64 {
    let mut waiter = Waiter::new();
    waiter.register(&partition.signal);
    let len_bytes = partition.read();
    if len_bytes > 0 {
        return len_bytes;
    }
    block_on(waiter.wait());
    partition.read()
}

/// DELIBERATELY WRONG: reads first and registers afterwards, so an append landing between the
/// read and the registration sees no waiter, bumps nothing, and the fetch sleeps forever.
fn fetch_register_after_read(partition: &Partition) -> u64 {
    let len_bytes = partition.read();
    let mut waiter = Waiter::new();
    waiter.register(&partition.signal);
    if len_bytes > 0 {
        return len_bytes;
    }
    block_on(waiter.wait());
    partition.read()
}

#[test]
fn one_producer_one_fetcher_no_lost_wakeup_i7() {
    model_builder().check(|| {
        let partition = Partition::new();
        let producer = spawn_append(&partition, 1);
        assert_eq!(fetch(&partition), 1, "woken fetch must see the append");
        producer.join().expect("producer");
        assert_eq!(partition.signal.waiter_count(), 0, "waiter deregistered");
    });
}

#[test]
fn one_producer_two_fetchers_both_woken_i7() {
    model_builder().check(|| {
        let partition = Partition::new();
        let fetchers: Vec<_> = (0..2)
            .map(|_| {
                let partition = Arc::clone(&partition);
                thread::spawn(move || fetch(&partition))
            })
            .collect();
        partition.append(1);
        for fetcher in fetchers {
            assert_eq!(fetcher.join().expect("fetcher"), 1);
        }
        assert_eq!(partition.signal.waiter_count(), 0);
    });
}

#[test]
fn one_fetcher_on_two_partitions_sees_both_appends_i7() {
    model_builder().check(|| {
        let a = Partition::new();
        let b = Partition::new();
        let producers = [spawn_append(&a, 1), spawn_append(&b, 1)];

        let mut waiter = Waiter::new();
        waiter.register(&a.signal);
        waiter.register(&b.signal);
        // At most one wait per partition: each append wakes at most once.
        let mut waits = 0;
        loop {
            let (len_a, len_b) = (a.read(), b.read());
            if len_a > 0 && len_b > 0 {
                break;
            }
            assert!(waits < 2, "woken without a new append");
            block_on(waiter.wait());
            waits += 1;
            // New snapshot before the next read (I7).
            waiter.rearm();
        }
        drop(waiter);
        for producer in producers {
            producer.join().expect("producer");
        }
        assert_eq!(a.signal.waiter_count() + b.signal.waiter_count(), 0);
    });
}

/// Wakes nobody: stands in for an executor whose task is about to be cancelled.
struct NoopWake;

impl Wake for NoopWake {
    fn wake(self: std::sync::Arc<Self>) {}
}

#[test]
fn fetch_dropped_mid_wait_deregisters_while_producer_notifies() {
    model_builder().check(|| {
        let partition = Partition::new();
        let producer = spawn_append(&partition, 1);
        {
            let mut waiter = Waiter::new();
            waiter.register(&partition.signal);
            if partition.read() == 0 {
                let waker = Waker::from(std::sync::Arc::new(NoopWake));
                let mut cx = Context::from_waker(&waker);
                // Pending or Ready, the fetch then times out and its future is dropped.
                let _ = waiter.poll_wait(&mut cx);
            }
        }
        assert_eq!(partition.signal.waiter_count(), 0);
        producer.join().expect("producer");
        assert_eq!(partition.signal.waiter_count(), 0);
        assert!(partition.signal.epoch() <= 1);
        // With the waiter gone, further appends cost nothing.
        let epoch = partition.signal.epoch();
        partition.append(2);
        assert_eq!(partition.signal.epoch(), epoch);
    });
}

/// I7 stated directly, with time standing in for the fetch's `max_wait_ms`: once the append
/// has completed (joined), a fetch that read nothing must find its waiter notified. No model
/// thread blocks, so a violation is a plain assertion failure, which loom reports cleanly.
fn saw_data_or_notified_model(register_first: bool) {
    let partition = Partition::new();
    let producer = spawn_append(&partition, 1);
    let mut waiter = Waiter::new();
    let len_bytes = if register_first {
        waiter.register(&partition.signal);
        partition.read()
    } else {
        // DELIBERATELY WRONG order: read, then register.
        let len_bytes = partition.read();
        waiter.register(&partition.signal);
        len_bytes
    };
    producer.join().expect("producer");
    assert!(
        len_bytes > 0 || waiter.is_notified(),
        "lost wakeup: the read missed the append and the waiter was never notified (I7)"
    );
}

#[test]
fn read_saw_data_or_waiter_notified_i7() {
    model_builder().check(|| saw_data_or_notified_model(true));
}

#[test]
fn broken_order_register_after_read_is_caught() {
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        model_builder().check(|| saw_data_or_notified_model(false))
    }));
    let payload = match outcome {
        Ok(()) => panic!("loom accepted a fetch that registers after its read (I7 violated)"),
        Err(payload) => payload,
    };
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(
        message.contains("lost wakeup"),
        "loom must fail on the I7 assertion, got: {message:?}"
    );
}

/// Set in the child process that runs [`broken_order_blocking_model_child`].
const CHILD_ENV: &str = "MINIKAFKA_LOOM_BROKEN_CHILD";

/// Not a test on its own: the child half of
/// [`broken_order_blocking_fetch_deadlocks_under_loom`]. The wrong-order fetch sleeps forever
/// in some interleaving; loom reports the deadlock and, unwinding through loom's own objects,
/// aborts the process, which is why it runs in a child. Does nothing unless [`CHILD_ENV`] is set.
#[test]
#[ignore = "child process of broken_order_blocking_fetch_deadlocks_under_loom"]
fn broken_order_blocking_model_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    model_builder().check(|| {
        let partition = Partition::new();
        let producer = spawn_append(&partition, 1);
        assert_eq!(fetch_register_after_read(&partition), 1);
        producer.join().expect("producer");
    });
}

#[test]
fn broken_order_blocking_fetch_deadlocks_under_loom() {
    let exe = std::env::current_exe().expect("test binary path");
    let output = std::process::Command::new(exe)
        .args(["--ignored", "--exact", "broken_order_blocking_model_child"])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the child model");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "loom accepted a blocking fetch that registers after its read (I7 violated)"
    );
    assert!(
        text.contains("deadlock"),
        "the child must fail on loom's deadlock report, got: {text}"
    );
}

/// Guards the test above: the same interleaving-free run of the broken fetch (producer done
/// before the fetch starts) passes, so it is the race, not the harness, that loom catches.
#[test]
fn broken_order_passes_without_the_race() {
    model_builder().check(|| {
        let partition = Partition::new();
        partition.append(1);
        assert_eq!(fetch_register_after_read(&partition), 1);
    });
}

/// Sanity of the helpers themselves: a Pending poll really parks in `block_on` until notified.
#[test]
fn poll_wait_is_pending_until_an_append() {
    model_builder().check(|| {
        let partition = Partition::new();
        let mut waiter = Waiter::new();
        waiter.register(&partition.signal);
        let waker = Waker::from(std::sync::Arc::new(NoopWake));
        let mut cx = Context::from_waker(&waker);
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Pending);
        partition.append(1);
        assert_eq!(waiter.poll_wait(&mut cx), Poll::Ready(()));
    });
}
