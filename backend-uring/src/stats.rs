//! Per-shard counters proving that file I/O goes through io_uring.
//!
//! Contract:
//! - Inputs: one `record_*` call per glommio file operation that completed successfully
//!   (reads, writes and `fdatasync`s are each a single io_uring submission in glommio 0.9);
//!   glommio's own per-ring counters, drained by [`snapshot`].
//! - Output: [`UringIoStats`], cumulative since the shard's thread started.
//! - Never: shared across threads. Each shard is one thread, so the counters are
//!   thread-locals and need no atomics; reading them from another thread sees that thread's.
//!
//! glommio's `executor().io_stats()` *resets* the ring counters it returns. [`snapshot`]
//! folds them into thread-local totals, so the totals are exact as long as nothing else on
//! the shard calls `glommio::executor().io_stats()` directly.

use std::cell::Cell;

thread_local! {
    static COUNTERS: Counters = const { Counters::new() };
}

struct Counters {
    file_reads: Cell<u64>,
    file_writes: Cell<u64>,
    file_writes_on_shard: Cell<u64>,
    file_reads_on_shard: Cell<u64>,
    file_bytes_read_on_shard: Cell<u64>,
    file_syncs: Cell<u64>,
    ring_buffered_reads: Cell<u64>,
    ring_buffered_bytes_read: Cell<u64>,
    ring_buffered_writes: Cell<u64>,
    ring_buffered_bytes_written: Cell<u64>,
    ring_files_opened: Cell<u64>,
    files_opened_on_shard: Cell<u64>,
    dirs_listed_on_shard: Cell<u64>,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            file_reads: Cell::new(0),
            file_writes: Cell::new(0),
            file_writes_on_shard: Cell::new(0),
            file_reads_on_shard: Cell::new(0),
            file_bytes_read_on_shard: Cell::new(0),
            file_syncs: Cell::new(0),
            ring_buffered_reads: Cell::new(0),
            ring_buffered_bytes_read: Cell::new(0),
            ring_buffered_writes: Cell::new(0),
            ring_buffered_bytes_written: Cell::new(0),
            ring_files_opened: Cell::new(0),
            files_opened_on_shard: Cell::new(0),
            dirs_listed_on_shard: Cell::new(0),
        }
    }
}

fn bump(cell: &Cell<u64>, by: u64) {
    cell.set(cell.get().wrapping_add(by));
}

/// Counts of file operations on one shard, cumulative since the shard started.
///
/// The `file_*` fields are counted by this backend around each glommio call; the `ring_*`
/// fields are counted by glommio's reactor when the io_uring completion arrives. For reads and
/// writes the two must agree: if they do not, something bypassed the ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UringIoStats {
    /// Buffered reads issued by this backend that completed (one io_uring `READ` each).
    pub file_reads: u64,
    /// Buffered writes issued by this backend that completed (one io_uring `WRITE` each).
    pub file_writes: u64,
    /// Writes done with `pwritev(2)` on the shard's own thread instead (see [`crate::file`]:
    /// the filesystem cannot do non-blocking buffered writes, so the ring would punt each one
    /// to a kernel worker), and the first write of a file, which asks the filesystem with
    /// `RWF_NOWAIT`.
    pub file_writes_on_shard: u64,
    /// Reads the page cache answered with `preadv2(RWF_NOWAIT)` on the shard's own thread,
    /// into the caller's buffer (see [`crate::file`]; a read the cache cannot answer goes
    /// through the ring and counts in `file_reads`).
    pub file_reads_on_shard: u64,
    /// Bytes those reads returned.
    pub file_bytes_read_on_shard: u64,
    /// `fdatasync`s issued by this backend that completed (one io_uring `FSYNC` each).
    pub file_syncs: u64,
    /// Buffered reads completed by glommio's rings (glommio's own count).
    pub ring_buffered_reads: u64,
    /// Bytes returned by those reads.
    pub ring_buffered_bytes_read: u64,
    /// Buffered writes completed by glommio's rings (glommio's own count).
    pub ring_buffered_writes: u64,
    /// Bytes accepted by those writes.
    pub ring_buffered_bytes_written: u64,
    /// Files opened through glommio's rings (io_uring `OPENAT`; `Backend::open` does not).
    pub ring_files_opened: u64,
    /// Files opened by `Backend::open`: `openat(2)` on the shard's thread.
    pub files_opened_on_shard: u64,
    /// Directories listed by `Backend::list_dir`: `getdents64` on the shard's thread (the
    /// counter is the shard's own, so a listing moved to another thread would not count).
    pub dirs_listed_on_shard: u64,
}

/// Records one completed read.
pub(crate) fn record_read() {
    COUNTERS.with(|c| bump(&c.file_reads, 1));
}

/// Records one completed write.
pub(crate) fn record_write() {
    COUNTERS.with(|c| bump(&c.file_writes, 1));
}

/// Records one completed write done on the shard's thread (not through the ring).
pub(crate) fn record_write_on_shard() {
    COUNTERS.with(|c| bump(&c.file_writes_on_shard, 1));
}

/// Records one file opened on the shard's thread.
pub(crate) fn record_open_on_shard() {
    COUNTERS.with(|c| bump(&c.files_opened_on_shard, 1));
}

/// Records one directory listed on the shard's thread.
pub(crate) fn record_list_on_shard() {
    COUNTERS.with(|c| bump(&c.dirs_listed_on_shard, 1));
}

/// Records one read of `bytes` answered by the page cache on the shard's thread.
pub(crate) fn record_read_on_shard(bytes: usize) {
    COUNTERS.with(|c| {
        bump(&c.file_reads_on_shard, 1);
        bump(&c.file_bytes_read_on_shard, bytes as u64);
    });
}

/// Records one completed `fdatasync`.
pub(crate) fn record_sync() {
    COUNTERS.with(|c| bump(&c.file_syncs, 1));
}

/// Drains glommio's ring counters into the totals and returns the totals.
///
/// Must run on a glommio executor thread (glommio panics otherwise).
pub(crate) fn snapshot() -> UringIoStats {
    let rings = glommio::executor().io_stats().all_rings();
    let (buffered_reads, buffered_bytes_read) = rings.file_buffered_reads();
    let (buffered_writes, buffered_bytes_written) = rings.file_buffered_writes();
    COUNTERS.with(|c| {
        bump(&c.ring_buffered_reads, buffered_reads);
        bump(&c.ring_buffered_bytes_read, buffered_bytes_read);
        bump(&c.ring_buffered_writes, buffered_writes);
        bump(&c.ring_buffered_bytes_written, buffered_bytes_written);
        bump(&c.ring_files_opened, rings.files_opened());
        UringIoStats {
            file_reads: c.file_reads.get(),
            file_writes: c.file_writes.get(),
            file_writes_on_shard: c.file_writes_on_shard.get(),
            file_reads_on_shard: c.file_reads_on_shard.get(),
            file_bytes_read_on_shard: c.file_bytes_read_on_shard.get(),
            file_syncs: c.file_syncs.get(),
            ring_buffered_reads: c.ring_buffered_reads.get(),
            ring_buffered_bytes_read: c.ring_buffered_bytes_read.get(),
            ring_buffered_writes: c.ring_buffered_writes.get(),
            ring_buffered_bytes_written: c.ring_buffered_bytes_written.get(),
            ring_files_opened: c.ring_files_opened.get(),
            files_opened_on_shard: c.files_opened_on_shard.get(),
            dirs_listed_on_shard: c.dirs_listed_on_shard.get(),
        }
    })
}
