//! Counts the bytes the current thread allocates, so a target can assert a decode budget.
//!
//! libFuzzer's `-malloc_limit_mb` catches one huge allocation; this catches the sum (many
//! medium `Vec`s that a hostile array count could ask for). The fuzz binaries and the replay
//! test install [`MeteredAllocator`] as their `#[global_allocator]`; [`installed`] lets a target
//! refuse to pass vacuously when it is not.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// Bytes allocated by this thread since it started (growth of reallocations included).
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting per thread the bytes it hands out.
#[derive(Debug, Default, Clone, Copy)]
pub struct MeteredAllocator;

fn note(bytes: usize) {
    // `try_with`: during thread teardown the counter may be gone; allocations then go uncounted.
    let _ = ALLOCATED_BYTES.try_with(|c| c.set(c.get().saturating_add(bytes as u64)));
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches only a
// const-initialised thread-local `Cell` and never allocates.
unsafe impl GlobalAlloc for MeteredAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size.saturating_sub(layout.size()));
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Bytes this thread has allocated so far.
pub fn allocated_bytes() -> u64 {
    ALLOCATED_BYTES.try_with(Cell::get).unwrap_or(0)
}

/// Runs `f` and returns its result with the bytes it allocated on this thread.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = allocated_bytes();
    let out = f();
    (out, allocated_bytes().saturating_sub(before))
}

/// Whether [`MeteredAllocator`] is this program's allocator (a probe allocation is seen).
pub fn installed() -> bool {
    let (probe, bytes) = measure(|| std::hint::black_box(Vec::<u8>::with_capacity(4096)));
    drop(std::hint::black_box(probe));
    bytes >= 4096
}
