//! The I/O boundary: the traits a backend implements and the broker drives.
//!
//! Contract:
//! - Core *declares* this interface and never calls it: defining a trait performs no I/O.
//!   It lives here so both backends and the broker see it without depending on each other.
//! - One backend instance per shard (per core). Futures are `!Send` (glommio's are, and so are
//!   shard-local structures): methods are plain `async fn`s with no `Send` bound.
//! - Buffers are owned and handed back (`(result, buf)`), so an io_uring backend can own a
//!   buffer while the kernel uses it, and callers reuse allocations.
//! - Errors are `std::io::Error`, unchanged from the OS, so callers can tell ENOSPC from EIO.
//! - Time is the backend's too: the broker reads no clock and starts no thread itself
//!   (`broker/tests/no_clock.rs` checks), so a simulated backend can run it on virtual time.
#![allow(async_fn_in_trait)]

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::clock::MonoTime;

/// Index of a shard: one executor thread (pinned to a core where the backend supports it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub usize);

/// How to open a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read and write; create the file if missing.
    ReadWriteCreate,
    /// Read and write; create the file, failing if it exists.
    CreateNew,
    /// Read and write an existing file.
    ReadWrite,
    /// Read only, existing file.
    ReadOnly,
}

/// Largest `write_at` a backend may do inline on the shard's thread (a `pwrite` into the page
/// cache, microseconds) rather than hand to a worker: both backends use this bound, so a
/// small append (a produce request) costs no thread hop, a large one does not stall the shard.
pub const INLINE_WRITE_MAX_BYTES: usize = 64 * 1024;

/// An open file. Reads and writes are positional; there is no cursor.
#[allow(clippy::len_without_is_empty)] // a file's length is an async query, not a container's
pub trait BackendFile: 'static {
    /// Reads up to `len` bytes at `pos` into `buf` (cleared first; its capacity is reused).
    /// Returns fewer bytes only at end of file. The buffer is handed back in every case.
    async fn read_at(&self, buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>);

    /// Writes all of `buf` at `pos`. A short write is retried until done or an error occurs;
    /// on error some prefix may have reached the file (a torn write). The buffer is handed back.
    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>);

    /// Makes the file's data durable: `fdatasync` on Linux, `fcntl(F_FULLFSYNC)` on macOS.
    /// After an error, nothing written before may be assumed durable (invariant I8).
    async fn sync_data(&self) -> io::Result<()>;

    /// Sets the file's length (truncating a torn tail, or preallocating nothing).
    async fn truncate(&self, len: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    async fn len(&self) -> io::Result<u64>;

    /// Closes the file, reporting any error the OS held back.
    async fn close(self) -> io::Result<()>;
}

/// A connected TCP stream, readable and writable with the `futures` I/O traits.
/// `poll_close` shuts down the write half, so the peer reads end of stream.
pub trait BackendStream: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + 'static {}

impl<T: futures_io::AsyncRead + futures_io::AsyncWrite + Unpin + 'static> BackendStream for T {}

/// A listening TCP socket.
pub trait BackendListener: 'static {
    /// The stream type this listener accepts.
    type Stream: BackendStream;

    /// Waits for the next connection.
    async fn accept(&self) -> io::Result<(Self::Stream, SocketAddr)>;

    /// The address actually bound (useful after binding port 0).
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// The stream's OS socket, for the socket options the broker sets itself (once, for every
    /// backend: `SO_SNDBUF`); `None` where a stream is no OS socket (a simulated one).
    #[cfg(unix)]
    fn socket(_stream: &Self::Stream) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// One shard's view of the operating system: files, directories, TCP, timers, tasks.
pub trait Backend: Clone + 'static {
    /// Open file handle.
    type File: BackendFile;
    /// Listening socket.
    type Listener: BackendListener;

    /// A short name for logs ("uring", "portable").
    fn name(&self) -> &'static str;

    /// This instance's shard.
    fn shard(&self) -> ShardId;

    /// Opens (or creates) a file.
    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Self::File>;

    /// Removes a file. Open handles keep working until dropped (POSIX unlink semantics).
    async fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Renames a file atomically within one directory.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Creates a directory and its parents.
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Removes a directory and everything in it.
    async fn remove_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Lists the entries of a directory (full paths), in no particular order.
    async fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;

    /// Makes a directory's entries (creations, renames, removals) durable.
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// Binds a TCP listener. Every shard may bind the same address (`SO_REUSEPORT`), so the
    /// kernel spreads connections over shards.
    async fn listen(&self, addr: SocketAddr) -> io::Result<Self::Listener>;

    /// Connects a TCP stream (for clients and tests).
    async fn connect(
        &self,
        addr: SocketAddr,
    ) -> io::Result<<Self::Listener as BackendListener>::Stream>;

    /// Completes after `duration`.
    async fn sleep(&self, duration: Duration);

    /// The monotonic clock: never goes backwards; comparable between shards of one process.
    fn now(&self) -> MonoTime;

    /// Wall-clock time, milliseconds since the Unix epoch (record timestamps, retention,
    /// segment age). May jump when the system clock is set.
    fn wall_clock_ms(&self) -> i64;

    /// 64 random bits, for identifiers that must differ between broker runs (the seed of
    /// generated group member ids). The default takes them from the standard library's
    /// per-process random hasher keys; the simulated backend draws them from its seed, so a
    /// simulated run replays exactly.
    fn random_u64(&self) -> u64 {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(self.shard().0);
        hasher.finish()
    }

    /// Completes once [`Backend::now`] has reached `deadline` (at once if it has).
    async fn sleep_until(&self, deadline: MonoTime);

    /// Runs `task` on this shard, detached.
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, task: F);

    /// Starts `count` shards, one executor thread each, and runs `main(backend)` on every one;
    /// returns when all of them have finished. Shards are numbered `ShardId(0..count)`.
    /// `main` is `Send + Sync` because it is shared by the threads; the futures it returns are
    /// not (they stay on their shard). A panicking shard is reported after every shard has
    /// been joined (as an error or a re-raised panic; the backend documents which).
    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static;
}
