//! Allocations the consumer makes per record, counted by a global allocator (load
//! independent): decoding a fetched partition allocates per partition and for the record
//! list's growth, not per record — unless records carry headers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use minikafka_client::consumer::decode_records;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

/// Counts the allocations of the thread that asks (tests run on threads of their own).
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// thread-local `Cell` with a const initialiser, which allocates nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// `batches` batches of `per_batch` records (16-byte key, 256-byte value), as a fetch
/// response's records field holds them.
fn fetched(batches: usize, per_batch: usize, headers: &[(&str, &[u8])]) -> Bytes {
    let mut out = Vec::new();
    let key = [b'k'; 16];
    let value = [b'v'; 256];
    for b in 0..batches {
        let mut builder = BatchBuilder::new();
        for _ in 0..per_batch {
            builder.push(&NewRecord {
                key: Some(&key),
                value: Some(&value),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.as_bytes(), Some(*v)))
                    .collect(),
                timestamp_ms: 1_700_000_000_000,
            });
        }
        out.extend_from_slice(&builder.build(Offset((b * per_batch) as i64)));
    }
    Bytes::from(out)
}

/// Allocations made while decoding `records` from offset 0, with the record count.
fn count_decode(records: &Bytes) -> (u64, usize) {
    let before = allocations();
    let decoded = decode_records("topic", 0, records, Offset(0), 1 << 20).expect("decode");
    let made = allocations() - before;
    let n = decoded.records.len();
    drop(decoded);
    (made, n)
}

/// 10,000 records without headers: the count stays at the few allocations of the record
/// list's doubling and the shared topic (it was one per record or more: an owned topic
/// `String` each).
#[test]
fn decoding_records_without_headers_allocates_nothing_per_record() {
    let records = fetched(100, 100, &[]);
    let (made, n) = count_decode(&records);
    assert_eq!(n, 10_000);
    println!("{made} allocations for {n} records without headers");
    assert!(
        made * 100 < n as u64,
        "{made} allocations for {n} records: more than one per hundred"
    );
}

/// Records with headers allocate their header list and each header key, and nothing more.
#[test]
fn decoding_records_with_headers_allocates_only_for_the_headers() {
    let records = fetched(10, 100, &[("trace", b"abc"), ("kind", b"x")]);
    let (made, n) = count_decode(&records);
    assert_eq!(n, 1_000);
    println!("{made} allocations for {n} records with 2 headers each");
    // One list and two keys per record, plus the list's doubling and the topic.
    let per_record_headers = 3 * n as u64;
    assert!(
        made >= per_record_headers && made < per_record_headers + 64,
        "{made} allocations for {n} records with 2 headers each"
    );
}
