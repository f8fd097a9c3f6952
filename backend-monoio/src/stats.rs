//! Per-shard counters saying which path each file operation took (the ring or the shard's
//! own thread), for tests that prove file I/O goes through io_uring and for the benches'
//! count of `fdatasync`s.
//!
//! Contract:
//! - Inputs: one `record_*` call per file operation that completed successfully.
//! - Output: [`MonoioIoStats`], cumulative since the shard's thread started.
//! - Never: shared across threads. Each shard is one thread, so the counters are
//!   thread-locals and need no atomics; reading them from another thread sees that thread's.

use std::cell::Cell;

thread_local! {
    static COUNTERS: Counters = const { Counters::new() };
}

struct Counters {
    file_reads: Cell<u64>,
    file_bytes_read: Cell<u64>,
    file_writes: Cell<u64>,
    file_writes_on_shard: Cell<u64>,
    file_reads_on_shard: Cell<u64>,
    file_bytes_read_on_shard: Cell<u64>,
    file_syncs: Cell<u64>,
    files_opened_on_shard: Cell<u64>,
    dirs_listed_on_shard: Cell<u64>,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            file_reads: Cell::new(0),
            file_bytes_read: Cell::new(0),
            file_writes: Cell::new(0),
            file_writes_on_shard: Cell::new(0),
            file_reads_on_shard: Cell::new(0),
            file_bytes_read_on_shard: Cell::new(0),
            file_syncs: Cell::new(0),
            files_opened_on_shard: Cell::new(0),
            dirs_listed_on_shard: Cell::new(0),
        }
    }
}

fn bump(cell: &Cell<u64>, by: u64) {
    cell.set(cell.get().wrapping_add(by));
}

/// Counts of file operations on one shard, cumulative since the shard started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonoioIoStats {
    /// io_uring `READ`s that returned bytes.
    pub file_reads: u64,
    /// Bytes those reads returned.
    pub file_bytes_read: u64,
    /// io_uring `WRITE`s that completed (a short one counts, and its rest counts again).
    pub file_writes: u64,
    /// Writes done with `pwritev(2)` on the shard's own thread (the filesystem cannot do
    /// non-blocking buffered writes; see [`crate::file`]), including a file's first write,
    /// which asks the filesystem with `RWF_NOWAIT`.
    pub file_writes_on_shard: u64,
    /// Reads the page cache answered with `preadv2(RWF_NOWAIT)` on the shard's own thread.
    pub file_reads_on_shard: u64,
    /// Bytes those reads returned.
    pub file_bytes_read_on_shard: u64,
    /// io_uring `FSYNC`s (`DATASYNC`) that completed.
    pub file_syncs: u64,
    /// Files opened by `Backend::open` (`openat(2)` on the shard's thread).
    pub files_opened_on_shard: u64,
    /// Directories listed by `Backend::list_dir` on the shard's thread.
    pub dirs_listed_on_shard: u64,
}

/// Records one ring read of `bytes` (> 0).
pub(crate) fn record_read(bytes: usize) {
    COUNTERS.with(|c| {
        bump(&c.file_reads, 1);
        bump(&c.file_bytes_read, bytes as u64);
    });
}

/// Records one completed ring write.
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

/// This thread's totals.
pub(crate) fn snapshot() -> MonoioIoStats {
    COUNTERS.with(|c| MonoioIoStats {
        file_reads: c.file_reads.get(),
        file_bytes_read: c.file_bytes_read.get(),
        file_writes: c.file_writes.get(),
        file_writes_on_shard: c.file_writes_on_shard.get(),
        file_reads_on_shard: c.file_reads_on_shard.get(),
        file_bytes_read_on_shard: c.file_bytes_read_on_shard.get(),
        file_syncs: c.file_syncs.get(),
        files_opened_on_shard: c.files_opened_on_shard.get(),
        dirs_listed_on_shard: c.dirs_listed_on_shard.get(),
    })
}
