//! # minikafka-backend-uring
//!
//! The io_uring backend of minikafka: [`UringBackend`] implements
//! [`minikafka_core::backend::Backend`] on [glommio] 0.9, one `LocalExecutor` (one thread,
//! three io_urings) per shard.
//!
//! This crate owns: starting and joining shard executors (CPU pinning, memlock sizing), the
//! file, directory, TCP, timer and task operations of the trait, and per-shard counters that
//! prove file I/O went through io_uring ([`UringBackend::io_stats`]). It owns no storage or
//! protocol logic: that is core's and the broker's.
//!
//! How each operation is carried out (glommio 0.9):
//!
//! | operation | mechanism |
//! |-----------|-----------|
//! | `open` | `openat(2)` on the shard's thread, the descriptor then a `BufferedFile` (glommio's ring open adds a punted `STATX`) |
//! | `close` | io_uring `CLOSE` |
//! | `read_at`, `write_at` | io_uring `READ` / `WRITE`, buffered (page cache) |
//! | `sync_data` | io_uring `FSYNC` with `DATASYNC` |
//! | `truncate`, `rename`, `remove_file` | glommio's blocking thread (glommio has no ring op) |
//! | `len` | `fstat(2)` on the descriptor (metadata only; see [`UringFile`]) |
//! | `create_dir_all`, `remove_dir_all`, `list_dir`, `sync_dir` | `std::fs` on glommio's blocking thread (`spawn_blocking`) |
//! | `listen`, `accept`, `connect`, streams | `glommio::net` (`SO_REUSEPORT`, `TCP_NODELAY`) |
//! | `sleep`, `sleep_until` | `glommio::timer::sleep` (a ring timeout) |
//! | `now`, `wall_clock_ms` | `std::time::Instant` from the process's first clock read, `SystemTime` |
//! | `spawn_local` | `glommio::spawn_local(..).detach()` |
//!
//! `sync_dir` uses a full `fsync` of the directory (`File::sync_all`) rather than glommio's
//! `Directory::sync`, which issues `fdatasync`: `fsync` is the documented way to make
//! directory entries durable.
//!
//! Machine facts this crate was written against (checked on the development machine: 2 cores,
//! Linux 6.x, io_uring enabled, `ulimit -l` hard limit 8 MiB, running as root):
//! - glommio's `DmaFile` probes polled reads on a new empty file, then fails `read_at` with
//!   `EOPNOTSUPP` on this disk; `BufferedFile` works and keeps the OS page cache, which the
//!   design relies on for caught-up consumers. This crate uses `BufferedFile` only.
//! - glommio's default registered io memory (10 MiB per executor, registered with each of its
//!   3 rings) exceeds the 8 MiB memlock limit; `run_shards` sizes it to fit (see
//!   [`io_memory_bytes`]) after raising the soft limit to the hard one.
//! - glommio submits `openat` with `dirfd = -1` rather than `AT_FDCWD`; relative paths did
//!   open in testing, but the backend makes every path it hands glommio absolute first so that
//!   never matters (`open` does not go through glommio's open).
//! - Shards are pinned one per allowed CPU when they fit, else all run unpinned.
//!
//! [glommio]: https://docs.rs/glommio/0.9
#![warn(missing_docs)]

mod error;
mod file;
mod net;
mod shards;
mod stats;
mod stream;

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use glommio::io::BufferedFile;
use minikafka_core::backend::{Backend, OpenMode, ShardId};
use minikafka_core::clock::MonoTime;

use crate::error::os_error;

pub use crate::file::{UringFile, WritePath, CACHED_READ_MIN_BYTES, READ_CHUNK_BYTES};
pub use crate::net::UringListener;
pub use crate::shards::{
    allowed_cpus, io_memory_bytes, memlock_limits, raise_memlock_soft_limit, shard_placements,
    IO_MEMORY_MAX_BYTES, IO_MEMORY_MIN_BYTES, MEMLOCK_MIN_BYTES, RINGS_PER_SHARD,
};
pub use crate::stats::UringIoStats;
pub use crate::stream::UringStream;

/// One shard's io_uring backend. Cheap to clone; tied to its shard's thread (`!Send`), since
/// every glommio call must run on the executor that owns the rings.
#[derive(Clone, Debug)]
pub struct UringBackend {
    shard: ShardId,
    _not_send: PhantomData<Rc<()>>,
}

impl UringBackend {
    /// A backend for `shard`. Call it on a running glommio executor thread (as
    /// [`Backend::run_shards`] does); its methods panic elsewhere.
    pub fn new(shard: ShardId) -> UringBackend {
        UringBackend {
            shard,
            _not_send: PhantomData,
        }
    }

    /// This shard's file I/O counters, cumulative since the shard started. Reads, writes and
    /// syncs counted here are io_uring operations (a trait call may issue several, e.g. a read
    /// longer than [`READ_CHUNK_BYTES`] or one that reaches the end of the file).
    pub fn io_stats(&self) -> UringIoStats {
        stats::snapshot()
    }
}

/// Makes `path` absolute against the current directory (glommio opens with `dirfd = -1`).
fn absolute(path: &Path) -> io::Result<PathBuf> {
    std::path::absolute(path)
}

/// Runs a blocking `std::fs` call on glommio's blocking thread.
async fn blocking<R, F>(func: F) -> io::Result<R>
where
    F: FnOnce() -> io::Result<R> + Send + 'static,
    R: Send + 'static,
{
    glommio::executor().spawn_blocking(func).await
}

/// The origin of [`Backend::now`]: the process's first read of the monotonic clock, shared by
/// every shard so their times compare.
fn clock_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Backend for UringBackend {
    type File = UringFile;
    type Listener = UringListener;

    fn name(&self) -> &'static str {
        "uring"
    }

    fn shard(&self) -> ShardId {
        self.shard
    }

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<UringFile> {
        // `openat(2)` on the shard's thread: glommio's ring open follows each `OPENAT` with a
        // path `STATX` that io_uring punts to a kernel worker (a thread hop per file, three
        // per partition at startup) for an inode number this crate never uses. A lookup in
        // the dentry cache does not wait for the disk.
        let mut options = std::fs::OpenOptions::new();
        match mode {
            OpenMode::ReadWriteCreate => options.read(true).write(true).create(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::ReadOnly => options.read(true),
        };
        let file = options.open(path)?;
        // SAFETY: the descriptor was just opened and is owned by nothing else: `into_raw_fd`
        // gives up the `File`'s ownership, the `BufferedFile` takes it (and closes it).
        let file = unsafe { BufferedFile::from_raw_fd(file.into_raw_fd()) };
        stats::record_open_on_shard();
        Ok(UringFile::new(file))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        glommio::io::remove(absolute(path)?).await.map_err(os_error)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        glommio::io::rename(absolute(from)?, absolute(to)?)
            .await
            .map_err(os_error)
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
        // On the shard's thread, as `open` is: a restart lists every partition's directory
        // (a few entries, in the dentry cache after a kill -9), and glommio's blocking thread
        // made each listing two thread hops and a wake-up of the shard.
        let listing = std::fs::read_dir(path)?
            .map(|entry| entry.map(|e| e.path()))
            .collect();
        stats::record_list_on_shard();
        listing
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std::fs::File::open(path)?.sync_all()).await
    }

    async fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        // syncfs(2) waits for the whole filesystem's writeback: glommio's blocking thread,
        // not the ring (io_uring has no syncfs) nor the shard's thread.
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

    async fn listen(&self, addr: SocketAddr) -> io::Result<UringListener> {
        UringListener::bind(addr)
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<UringStream> {
        net::connect(addr).await
    }

    async fn sleep(&self, duration: Duration) {
        glommio::timer::sleep(duration).await;
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
        if clock_origin().checked_add(deadline.0).is_none() {
            // Beyond what `Instant` can represent (glommio would overflow adding it): never.
            return std::future::pending::<()>().await;
        }
        let left = deadline.saturating_duration_since(self.now());
        if !left.is_zero() {
            glommio::timer::sleep(left).await;
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
        glommio::spawn_local(task).detach();
    }

    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        shards::run_shards(count, move |shard| main(UringBackend::new(shard)))
    }
}
