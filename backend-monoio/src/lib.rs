//! # minikafka-backend-monoio
//!
//! The io_uring backend of minikafka and the broker's default on Linux (cargo feature
//! `monoio`): [`MonoioBackend`] implements [`minikafka_core::backend::Backend`] on [monoio]
//! 0.2, one runtime (one thread, one io_uring, its own timer wheel and a one-thread blocking
//! pool) per shard, pinned to its own CPU when there are enough. It replaced the glommio
//! backend, which lost the 2026-12-06 bake-off on every durable and latency row and is no
//! longer released (docs/perf-log/2026-12-06-glommio-removed.md).
//!
//! This crate owns: starting and joining shard runtimes (CPU pinning, the CPUs that take the
//! data disk's interrupts first: [`disk_cpus`]), the file, directory,
//! TCP, timer and task operations of the trait, and per-shard counters showing which path
//! each file operation took ([`MonoioBackend::io_stats`]). It owns no storage or protocol
//! logic: that is core's and the broker's.
//!
//! How each operation is carried out:
//!
//! | operation | mechanism |
//! |-----------|-----------|
//! | `open` | `openat(2)` on the shard's thread (a dentry-cache lookup), then monoio's `File::from_std` |
//! | `close` | io_uring `CLOSE` (monoio reports no error from it; see [`MonoioFile`]) |
//! | `read_at` | `preadv2(RWF_NOWAIT)` on the shard for large cached reads, else io_uring `READ` straight into the caller's buffer |
//! | `write_at`, `write_parts_at` | `pwritev(2)` on the shard where the filesystem refuses non-blocking buffered writes (ext4), else io_uring `WRITE` of the caller's buffer |
//! | `sync_data` | io_uring `FSYNC` with `DATASYNC` |
//! | `rename`, `remove_file` | io_uring `RENAMEAT`, `UNLINKAT` |
//! | `truncate`, `preallocate` (`fallocate` mode 0), `create_dir_all`, `remove_dir_all`, `sync_dir`, `sync_filesystem` | the shard's blocking pool (`monoio::spawn_blocking`, one thread) |
//! | `len`, `list_dir` | `fstat(2)`, `getdents64` on the shard's thread |
//! | `listen`, `accept`, `connect` | monoio's `TcpListener`/`TcpStream` (`SO_REUSEPORT`, `TCP_NODELAY`), io_uring `ACCEPT`/`CONNECT` |
//! | streams | monoio's poll-io streams (readiness from an epoll registered with the ring, then `recv`/`send`/`writev` from the caller's buffers) |
//! | `sleep`, `sleep_until` | `monoio::time::sleep` (the runtime's timer wheel; the ring wait carries its deadline) |
//! | `now`, `wall_clock_ms` | `std::time::Instant` from the process's first clock read, `SystemTime` |
//! | `spawn_local` | `monoio::spawn` (the handle dropped: detached) |
//!
//! Machine facts this crate was written against (the development machine: 2 cores, Linux
//! 6.18, io_uring enabled, ext4): ext4 refuses `RWF_NOWAIT` buffered writes (`EOPNOTSUPP`),
//! which is why writes there run on the shard (see [`file`]); io_uring rings no longer count
//! against `RLIMIT_MEMLOCK` on these kernels and monoio registers no buffers, so nothing is
//! sized to the memlock limit (`tests/shards.rs` starts shards under a tiny soft limit).
//!
//! [monoio]: https://docs.rs/monoio/0.2
#![warn(missing_docs)]

pub mod disk_cpus;
pub mod file;
pub mod net;
mod shards;
mod stats;

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use minikafka_core::backend::{Backend, OpenMode, ShardId};
use minikafka_core::clock::MonoTime;

pub use crate::file::{MonoioFile, WritePath, CACHED_READ_MIN_BYTES, READ_CHUNK_BYTES};
pub use crate::net::stream::MonoioStream;
pub use crate::net::MonoioListener;
pub use crate::shards::{allowed_cpus, shard_placements, RING_ENTRIES};
pub use crate::stats::MonoioIoStats;

/// One shard's monoio backend. Cheap to clone; tied to its shard's thread (`!Send`), since
/// every monoio call must run on the runtime that owns the ring.
#[derive(Clone, Debug)]
pub struct MonoioBackend {
    shard: ShardId,
    _not_send: PhantomData<Rc<()>>,
}

impl MonoioBackend {
    /// A backend for `shard`. Call it on a running shard runtime (as [`Backend::run_shards`]
    /// does); its methods panic elsewhere.
    pub fn new(shard: ShardId) -> MonoioBackend {
        MonoioBackend {
            shard,
            _not_send: PhantomData,
        }
    }

    /// This shard's file I/O counters, cumulative since the shard's thread started.
    pub fn io_stats(&self) -> MonoioIoStats {
        stats::snapshot()
    }
}

/// Runs a blocking call on the shard's blocking pool (one thread per shard, attached to its
/// runtime by [`shards`]).
async fn blocking<R, F>(func: F) -> io::Result<R>
where
    F: FnOnce() -> io::Result<R> + Send + 'static,
    R: Send + 'static,
{
    match monoio::spawn_blocking(func).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::other(
            "the shard's blocking pool dropped the call",
        )),
    }
}

/// The origin of [`Backend::now`]: the process's first read of the monotonic clock, shared by
/// every shard so their times compare.
fn clock_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Backend for MonoioBackend {
    type File = MonoioFile;
    type Listener = MonoioListener;

    fn name(&self) -> &'static str {
        "monoio"
    }

    fn shard(&self) -> ShardId {
        self.shard
    }

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<MonoioFile> {
        // `openat(2)` on the shard's thread: a lookup in the dentry cache does not wait for
        // the disk, and a ring `OPENAT` is punted to a kernel worker (a thread hop per file,
        // three per partition at startup).
        let mut options = std::fs::OpenOptions::new();
        match mode {
            OpenMode::ReadWriteCreate => options.read(true).write(true).create(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::ReadOnly => options.read(true),
        };
        let file = options.open(path)?;
        stats::record_open_on_shard();
        MonoioFile::from_std(file)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        monoio::fs::remove_file(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        monoio::fs::rename(from, to).await
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std::fs::create_dir_all(path)).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std::fs::remove_dir_all(path)).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        // On the shard's thread, as `open` is: a restart lists every partition's directory (a
        // few entries, in the dentry cache), and a pool hop per listing costs more than it.
        let listing = std::fs::read_dir(path)?
            .map(|entry| entry.map(|e| e.path()))
            .collect();
        stats::record_list_on_shard();
        listing
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        // A full `fsync` of the directory: the documented way to make its entries durable.
        blocking(move || std::fs::File::open(path)?.sync_all()).await
    }

    async fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        // syncfs(2) waits for the whole filesystem's writeback: the blocking pool, not the ring
        // (io_uring has no syncfs) nor the shard's thread.
        blocking(move || {
            let dir = std::fs::File::open(path)?;
            // SAFETY: the descriptor is borrowed from `dir`, open for the call.
            if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) } == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
        .await
    }

    async fn listen(&self, addr: SocketAddr) -> io::Result<MonoioListener> {
        MonoioListener::bind(addr)
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<MonoioStream> {
        net::connect(addr).await
    }

    async fn sleep(&self, duration: Duration) {
        // monoio clamps a deadline past what `Instant` represents to its far future.
        monoio::time::sleep(duration).await;
    }

    fn now(&self) -> MonoTime {
        MonoTime(clock_origin().elapsed())
    }

    fn wall_clock_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    async fn sleep_until(&self, deadline: MonoTime) {
        let left = deadline.saturating_duration_since(self.now());
        if !left.is_zero() {
            monoio::time::sleep(left).await;
        }
    }

    async fn run_blocking<R, F>(&self, func: F) -> io::Result<R>
    where
        F: FnOnce() -> io::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        // A thread of its own, not the shard's blocking pool (one thread, which the shard's
        // file operations queue on): a call that blocks for long delays nothing else.
        let (answer, answered) = futures::channel::oneshot::channel();
        std::thread::Builder::new()
            .name("blocking-call".into())
            .spawn(move || {
                let _ = answer.send(func());
            })?;
        answered
            .await
            .unwrap_or_else(|_| Err(io::Error::other("the blocking call's thread ended")))
    }

    fn spawn_local<F: Future<Output = ()> + 'static>(&self, task: F) {
        // Dropping monoio's join handle detaches the task.
        drop(monoio::spawn(task));
    }

    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        shards::run_shards(count, None, move |shard| main(MonoioBackend::new(shard)))
    }

    fn run_shards_for_data<F, Fut>(count: usize, data_dir: &Path, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        shards::run_shards(count, Some(data_dir), move |shard| {
            main(MonoioBackend::new(shard))
        })
    }
}
