//! The synchronisation shim: one import path for every primitive shared between threads.
//!
//! Contract:
//! - Inputs: none; this module only re-exports.
//! - Outputs: [`Arc`], the atomics ([`AtomicBool`], [`AtomicU64`], [`AtomicUsize`],
//!   [`Ordering`], [`fence`]) and a non-poisoning [`Mutex`]. Under `--cfg loom` they come from
//!   `loom::sync`, so a loom model explores every interleaving and every weak-memory outcome of
//!   the code built on them; otherwise they come from `std::sync`.
//! - Never: switches on `cfg(test)`. A separate crate (`loom-tests`) cannot see another crate's
//!   `cfg(test)` items, so the switch is `cfg(loom)` alone, and the API is the same on both
//!   sides.
//!
//! Code shared across shard threads (today [`crate::wakeup`]) imports from here, never from
//! `std::sync` directly; otherwise loom would not see those accesses and would prove nothing.

#[cfg(loom)]
use loom::sync as inner;
#[cfg(not(loom))]
use std::sync as inner;

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};

pub use inner::Arc;

/// The guard returned by [`Mutex::lock`]; the lock is released when it is dropped.
pub type MutexGuard<'a, T> = inner::MutexGuard<'a, T>;

/// A mutual-exclusion lock whose [`lock`](Mutex::lock) never reports poisoning.
///
/// The data behind our locks is kept consistent at every unlock (no invariant is ever broken
/// across a call that can panic), so a panic on another thread while holding the lock leaves
/// nothing to repair: the poison flag is discarded and the guard returned.
#[derive(Debug, Default)]
pub struct Mutex<T> {
    inner: inner::Mutex<T>,
}

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub fn new(value: T) -> Self {
        Mutex {
            inner: inner::Mutex::new(value),
        }
    }

    /// Blocks until the lock is held, then returns its guard (recovering from poison).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn lock_recovers_from_poison() {
        let m = Arc::new(Mutex::new(1_u32));
        let m2 = Arc::clone(&m);
        let joined = std::thread::spawn(move || {
            let mut guard = m2.lock();
            *guard = 2;
            panic!("poison the lock on purpose");
        })
        .join();
        assert!(joined.is_err(), "the helper thread must have panicked");
        assert_eq!(*m.lock(), 2, "the value written before the panic is kept");
        *m.lock() = 3;
        assert_eq!(*m.lock(), 3);
    }
}
