//! Copies of a produced batch on the log's write path, counted with a counting allocator: a
//! copy of a batch needs a buffer at least as large as the batch, so every allocation of at
//! least [`LARGE_BYTES`] made while appends run is a copy (or a buffer sized like one).
//!
//! - A lone batch of at most `INLINE_WRITE_MAX_BYTES` (64 KiB), passed as `Bytes` (as the
//!   Produce handler passes its slice of the request frame), is written with no such
//!   allocation on either backend: the log copies only its 61-byte header, and the backend
//!   writes header and records with one `pwritev`.
//! - A coalesced group of such batches, 64 KiB or less in all, is written the same way: no
//!   concatenating buffer. A larger group is one `pwritev` from the portable backend's pool
//!   (no copy) and, on the io_uring (monoio) backend, one `pwritev` on the shard (no copy)
//!   where the filesystem refuses non-blocking buffered writes (ext4).
//! - On a filesystem that does non-blocking buffered writes, the io_uring backend sends every
//!   write through the ring, and monoio 0.2 has no positional vectored file write, so a write
//!   of several parts (header and records) is joined into one buffer (one copy each); the test
//!   asks the backend which path this filesystem gets and expects accordingly.
//!
//! - Each batch is validated exactly once (`PartitionLog::batch_validations`): the log's
//!   `validate_produced` is the produce path's only validation.
//!
//! One `#[test]` in this binary, so no other test's allocations are counted; the shard's
//! other threads (the portable backend's pool, monoio's blocking pool) make no allocation that large
//! while an append runs. What is written is checked too, byte for byte.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog, LEADER_EPOCH};
use minikafka_core::backend::Backend;
use minikafka_core::record::{patch_base_offset, patch_leader_epoch};
use minikafka_core::types::Offset;
use minikafka_testkit::check::{assert_none_failed, run_on_one_shard};
use minikafka_testkit::log::{test_batch, NOW_MS};

/// The smallest allocation counted: smaller than every batch appended here (20 KB and up).
const LARGE_BYTES: usize = 16 * 1024;

static LARGE_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting allocations (and growths) of at least [`LARGE_BYTES`].
struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to `System`, which upholds the contract.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= LARGE_BYTES {
            LARGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= LARGE_BYTES && new_size > layout.size() {
            LARGE_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn large_allocations() -> u64 {
    LARGE_ALLOCATIONS.load(Ordering::Relaxed)
}

/// Copies the backend makes of one write: of a small one (at most 64 KiB) and a large one.
#[derive(Clone, Copy)]
struct WriteCopies {
    small: u64,
    large: u64,
}

/// Appends `batches` as one coalesced group (the first waits for the append lock while the
/// rest queue) and returns the large allocations made while the group was written.
async fn append_group<B: Backend>(log: &PartitionLog<B>, batches: &[Bytes]) -> Result<u64, String> {
    let held = log.hold_appends().await;
    let group = futures::future::join_all(batches.iter().map(|b| log.append(b.clone(), NOW_MS)));
    futures::pin_mut!(group);
    if futures::poll!(&mut group).is_ready() {
        return Err("appends finished while the append lock was held".into());
    }
    let before = large_allocations();
    drop(held);
    for (i, result) in group.await.into_iter().enumerate() {
        result.map_err(|e| format!("coalesced append #{i}: {e}"))?;
    }
    Ok(large_allocations() - before)
}

/// Appends one 40 KB batch alone, then three 20 KB batches as one coalesced group, then
/// three 40 KB ones (over 64 KiB together), counting large allocations during each; then
/// reads everything back and compares it with the batches as patched.
async fn count_copies<B: Backend>(
    backend: B,
    dir: &Path,
    expect: WriteCopies,
) -> Result<(), String> {
    let config = LogConfig {
        flush: FlushPolicy::None,
        ..LogConfig::default()
    };
    let log = PartitionLog::open(backend, dir, config, false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    let batches: Vec<Bytes> = (0..7)
        .map(|tag| {
            let value_bytes = if (1..4).contains(&tag) {
                20_000
            } else {
                40_000
            };
            Bytes::from(test_batch(tag, 1, value_bytes, NOW_MS))
        })
        .collect();

    let before = large_allocations();
    log.append(batches[0].clone(), NOW_MS)
        .await
        .map_err(|e| format!("lone append: {e}"))?;
    let lone = large_allocations() - before;
    if lone != expect.small {
        return Err(format!(
            "a lone 40 KB append made {lone} allocations of at least {LARGE_BYTES} bytes, \
             expected {}",
            expect.small
        ));
    }
    let small_group = append_group(&log, &batches[1..4]).await?;
    if small_group != expect.small {
        return Err(format!(
            "a coalesced group of three 20 KB batches made {small_group} allocations of at \
             least {LARGE_BYTES} bytes, expected {}",
            expect.small
        ));
    }
    let large_group = append_group(&log, &batches[4..]).await?;
    if large_group != expect.large {
        return Err(format!(
            "a coalesced group of three 40 KB batches made {large_group} allocations of at \
             least {LARGE_BYTES} bytes, expected {}",
            expect.large
        ));
    }

    // Each batch is validated exactly once on its way in (issue 20 item 5).
    if log.batch_validations() != batches.len() as u64 {
        return Err(format!(
            "{} batches appended, {} validations: expected one per batch",
            batches.len(),
            log.batch_validations()
        ));
    }

    let mut expected = Vec::new();
    for (offset, batch) in batches.iter().enumerate() {
        let mut stored = batch.to_vec();
        patch_base_offset(&mut stored, Offset(offset as i64));
        patch_leader_epoch(&mut stored, LEADER_EPOCH);
        expected.extend_from_slice(&stored);
    }
    let read = log
        .read(Offset(0), expected.len())
        .await
        .map_err(|e| format!("read: {e}"))?;
    if read.bytes != expected {
        return Err(format!(
            "read back {} bytes that differ from the {} appended (as patched)",
            read.bytes.len(),
            expected.len()
        ));
    }
    log.close().await.map_err(|e| format!("close: {e}"))
}

fn outcome(result: Result<(), String>) -> Vec<String> {
    match result {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

/// The io_uring backend's copies: one joined buffer for every write where this
/// filesystem takes non-blocking buffered writes, none where it refuses them (asked with a
/// probe file in `dir`, as the log's files will be).
#[cfg(all(target_os = "linux", feature = "monoio"))]
async fn monoio_copies(
    backend: &minikafka_backend_monoio::MonoioBackend,
    dir: &Path,
) -> Result<WriteCopies, String> {
    use minikafka_backend_monoio::WritePath;
    use minikafka_core::backend::{BackendFile, OpenMode};
    backend
        .create_dir_all(dir)
        .await
        .map_err(|e| format!("probe dir: {e}"))?;
    let probe = backend
        .open(&dir.join("probe"), OpenMode::CreateNew)
        .await
        .map_err(|e| format!("probe open: {e}"))?;
    let (written, _) = probe.write_at(b"probe".to_vec(), 0).await;
    written.map_err(|e| format!("probe write: {e}"))?;
    let copies = u64::from(probe.write_path() == WritePath::Ring);
    probe
        .close()
        .await
        .map_err(|e| format!("probe close: {e}"))?;
    Ok(WriteCopies {
        small: copies,
        large: copies,
    })
}

#[test]
fn appends_copy_only_the_batch_header_on_both_backends() {
    let dir = tempfile::tempdir().expect("scratch dir");
    let none = WriteCopies { small: 0, large: 0 };
    // Extended by the io_uring (monoio) run where that backend is built.
    #[cfg_attr(not(all(target_os = "linux", feature = "monoio")), allow(unused_mut))]
    let mut failures = run_on_one_shard::<minikafka_backend_portable::PortableBackend, _, _>(
        &dir.path().join("portable"),
        move |backend, root| async move { outcome(count_copies(backend, &root, none).await) },
    );
    #[cfg(all(target_os = "linux", feature = "monoio"))]
    failures.extend(
        run_on_one_shard::<minikafka_backend_monoio::MonoioBackend, _, _>(
            &dir.path().join("monoio"),
            |backend, root| async move {
                let copies = match monoio_copies(&backend, &root.join("probe")).await {
                    Ok(copies) => copies,
                    Err(e) => return vec![e],
                };
                outcome(count_copies(backend, &root.join("log"), copies).await)
            },
        )
        .into_iter()
        .map(|e| format!("monoio: {e}")),
    );
    assert_none_failed("append copies", &failures);
}
