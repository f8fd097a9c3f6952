//! # minikafka-backend-portable
//!
//! The portable backend: [`PortableBackend`] implements [`Backend`] on smol, for any Unix
//! (Linux and macOS). It is the backend of non-Linux builds and of `--features portable`.
//!
//! What this crate owns:
//! - **Shards**: [`PortableBackend::run_shards`] starts one OS thread per shard, each running a
//!   `smol::LocalExecutor` kept in a thread-local; [`Backend::spawn_local`] spawns (detached) on
//!   the current thread's executor. Threads are not pinned to cores.
//! - **Files and directories**: every call runs on smol's blocking thread pool
//!   (`smol::unblock`), with the buffer moved into the blocking closure and handed back,
//!   except a `write_at` (or `write_parts_at`, one `pwritev`) of at most
//!   [`INLINE_WRITE_MAX_BYTES`]: that one is a `pwrite` on the shard's own thread. A small buffered write only copies into the page cache (a few µs),
//!   while the hop to the pool and back cost ~30 µs per append (one-record produces were
//!   bound by it; measured with `mk-rtt`). As in Kafka, a page-cache
//!   write that the kernel throttles (dirty-page writeback) then stalls the whole shard for
//!   that time, not just its partition; larger writes, reads and syncs still use the pool.
//!   Reads and writes are positional (`pread`/`pwrite` loops: EINTR is retried, a short read
//!   is continued until `len` or end of file, a short write until done).
//! - **Durability**: [`BackendFile::sync_data`] is `fdatasync` on Linux and
//!   `fcntl(F_FULLFSYNC)` on macOS (plain `fsync` does not flush the drive's cache there);
//!   [`Backend::sync_dir`] opens the directory and syncs it the same way.
//! - **Preallocation**: [`BackendFile::preallocate`] is `fallocate` mode 0 on
//!   the pool on Linux (a no-op where the filesystem answers `EOPNOTSUPP`), a no-op elsewhere.
//! - **TCP**: listeners bind with `SO_REUSEADDR` and `SO_REUSEPORT` (so every shard can bind
//!   the same address) and are driven by `smol::Async`; streams get `TCP_NODELAY`, and their
//!   `close` shuts down the write half (the peer reads end of stream); a read into
//!   uninitialised room (`ReadUninit`, I199) is a `recv` straight into it.
//! - **Timers and clocks**: `smol::Timer`; [`Backend::now`] is `std::time::Instant` measured
//!   from the process's first clock read (one origin for every shard), [`Backend::wall_clock_ms`]
//!   is `SystemTime`.
//! - **Counters**: [`PortableBackend::stats`] reports syncs issued, reads and writes, shared by
//!   all clones of one shard's backend (and the files it opened).
//!
//! What it never does: retry an operation the OS failed (other than EINTR and short
//! transfers), alter an OS error (callers must tell ENOSPC from EIO), or call `fsync` where the
//! trait promises `fdatasync`/`F_FULLFSYNC`.

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::io::{AsyncRead, AsyncWrite};
use minikafka_core::backend::{
    parts_len, Backend, BackendFile, BackendListener, OpenMode, ReadUninit, ShardId, WriteCursor,
};
use minikafka_core::clock::MonoTime;
use smol::{Async, LocalExecutor};
use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel queues per listener.
const LISTEN_BACKLOG: i32 = 1024;

thread_local! {
    /// The executor of the shard running on this thread; set by `run_shards` for its lifetime.
    static EXECUTOR: RefCell<Option<Rc<LocalExecutor<'static>>>> = const { RefCell::new(None) };
}

/// Operation counters of one shard's backend, shared by its clones and files.
#[derive(Debug, Default)]
struct Counters {
    syncs: AtomicU64,
    dir_syncs: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// A snapshot of a backend's operation counters (see [`PortableBackend::stats`]).
///
/// Every operation is counted when issued, whether or not it then succeeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// `sync_data` calls issued (fdatasync / F_FULLFSYNC): what group commit saves.
    pub sync_count: u64,
    /// `sync_dir` calls issued.
    pub dir_sync_count: u64,
    /// `read_at` calls issued.
    pub read_count: u64,
    /// `write_at` calls issued.
    pub write_count: u64,
    /// Bytes returned by `read_at` calls.
    pub read_bytes: u64,
    /// Bytes handed to `write_at` calls.
    pub write_bytes: u64,
}

/// One shard's view of the OS through smol. Clones share the shard and its counters.
#[derive(Clone, Debug)]
pub struct PortableBackend {
    shard: ShardId,
    counters: Arc<Counters>,
}

impl PortableBackend {
    /// A backend for `shard` with zeroed counters. [`Backend::run_shards`] makes one per shard;
    /// this constructor is for callers that run their own executor (file and directory calls
    /// work anywhere smol runs; [`Backend::spawn_local`] needs a `run_shards` thread).
    pub fn new(shard: ShardId) -> Self {
        Self {
            shard,
            counters: Arc::new(Counters::default()),
        }
    }

    /// The operation counters of this backend (and of every clone and file opened through it).
    pub fn stats(&self) -> BackendStats {
        let c = &self.counters;
        BackendStats {
            sync_count: c.syncs.load(Ordering::Relaxed),
            dir_sync_count: c.dir_syncs.load(Ordering::Relaxed),
            read_count: c.reads.load(Ordering::Relaxed),
            write_count: c.writes.load(Ordering::Relaxed),
            read_bytes: c.read_bytes.load(Ordering::Relaxed),
            write_bytes: c.write_bytes.load(Ordering::Relaxed),
        }
    }
}

/// Largest `write_at` done inline on the shard's thread (`pwrite` into the page cache);
/// larger ones go to smol's blocking pool. See the crate documentation.
pub use minikafka_core::backend::INLINE_WRITE_MAX_BYTES;

/// An open file of the portable backend. The descriptor is shared (`Arc`) with the blocking
/// closures that use it, so a cancelled operation never leaves it dangling.
#[derive(Debug)]
pub struct PortableFile {
    file: Arc<File>,
    counters: Arc<Counters>,
}

/// A TCP stream of the portable backend: `smol::Async<TcpStream>` with `TCP_NODELAY`, whose
/// `close` flushes and then shuts down the write half (the peer reads end of stream), as
/// the monoio backend's does. Dropping it closes the socket.
#[derive(Debug)]
pub struct PortableStream {
    inner: Async<TcpStream>,
}

impl PortableStream {
    fn new(inner: Async<TcpStream>) -> io::Result<Self> {
        inner.get_ref().set_nodelay(true)?;
        Ok(Self { inner })
    }

    /// The underlying socket (for `peer_addr`, `local_addr` and socket options).
    pub fn get_ref(&self) -> &TcpStream {
        self.inner.get_ref()
    }
}

impl AsyncRead for PortableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }

    fn poll_read_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [io::IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_read_vectored(cx, bufs)
    }
}

impl ReadUninit for PortableStream {
    /// A `recv` straight into `buf` (I199), as `Async`'s own `poll_read`: try, and on
    /// `WouldBlock` wait for readiness and try again; nothing is zeroed first.
    fn poll_read_uninit(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        loop {
            // Sound by socket2's contract: `recv` hands the room's pointer to `recv(2)`,
            // which never reads it, and the count it returns is what the kernel wrote, at
            // most the room's length: the `n` bytes the caller then counts as initialised.
            match socket2::SockRef::from(self.inner.get_ref()).recv(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => return Poll::Ready(result),
            }
            std::task::ready!(self.inner.poll_readable(cx))?;
        }
    }
}

impl AsyncWrite for PortableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // `Async<TcpStream>::poll_close` only flushes; a close must send FIN.
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(self.inner.get_ref().shutdown(Shutdown::Write)),
            other => other,
        }
    }
}

/// A listening TCP socket of the portable backend (`SO_REUSEPORT`, non-blocking).
#[derive(Debug)]
pub struct PortableListener {
    inner: Async<TcpListener>,
}

impl BackendListener for PortableListener {
    type Stream = PortableStream;

    async fn accept(&self) -> io::Result<(PortableStream, SocketAddr)> {
        let (stream, peer) = self.inner.accept().await?;
        Ok((PortableStream::new(stream)?, peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    #[cfg(unix)]
    fn socket(stream: &PortableStream) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(stream.get_ref().as_fd())
    }
}

impl BackendFile for PortableFile {
    async fn read_at(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        Counters::add(&self.counters.reads, 1);
        let file = Arc::clone(&self.file);
        let (result, buf) = smol::unblock(move || {
            let result = read_full_at(&file, &mut buf, pos, len);
            (result, buf)
        })
        .await;
        Counters::add(&self.counters.read_bytes, buf.len() as u64);
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        Counters::add(&self.counters.writes, 1);
        Counters::add(&self.counters.write_bytes, buf.len() as u64);
        // `write_all_at` retries EINTR and short writes; it fails with WriteZero if the OS
        // accepts nothing.
        if buf.len() <= INLINE_WRITE_MAX_BYTES {
            let result = self.file.write_all_at(&buf, pos);
            return (result, buf);
        }
        let file = Arc::clone(&self.file);
        smol::unblock(move || {
            let result = file.write_all_at(&buf, pos);
            (result, buf)
        })
        .await
    }

    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>) {
        let total_bytes = parts_len(&parts);
        Counters::add(&self.counters.writes, 1);
        Counters::add(&self.counters.write_bytes, total_bytes as u64);
        if total_bytes <= INLINE_WRITE_MAX_BYTES {
            let result = write_all_parts_at(&self.file, &parts, pos);
            return (result, parts);
        }
        let file = Arc::clone(&self.file);
        smol::unblock(move || {
            let result = write_all_parts_at(&file, &parts, pos);
            (result, parts)
        })
        .await
    }

    async fn sync_data(&self) -> io::Result<()> {
        Counters::add(&self.counters.syncs, 1);
        let file = Arc::clone(&self.file);
        smol::unblock(move || sync_file_data(&file)).await
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let file = Arc::clone(&self.file);
        smol::unblock(move || file.set_len(len)).await
    }

    async fn preallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        if !PREALLOCATES {
            return Ok(());
        }
        let file = Arc::clone(&self.file);
        smol::unblock(move || fallocate_zeroed(&file, offset, len)).await
    }

    async fn len(&self) -> io::Result<u64> {
        let file = Arc::clone(&self.file);
        smol::unblock(move || file.metadata().map(|m| m.len())).await
    }

    async fn close(self) -> io::Result<()> {
        match Arc::try_unwrap(self.file) {
            Ok(file) => smol::unblock(move || close_reporting(file)).await,
            // A cancelled operation's closure still holds the descriptor; it is closed (without
            // a report) when that closure finishes.
            Err(_still_shared) => Ok(()),
        }
    }
}

/// Writes `parts` back to back at `pos` with `pwritev` calls (core's [`WriteCursor`]: EINTR
/// and short writes are continued, accepting nothing is WriteZero).
fn write_all_parts_at(file: &File, parts: &[Bytes], pos: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut cursor = WriteCursor::new(parts.iter().map(|part| &part[..]), pos);
    cursor.write_all(|slices, at| {
        let offset = libc::off_t::try_from(at)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "write past off_t"))?;
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix; the slices borrow `parts`,
        // alive for the call; at most MAX_WRITE_PARTS (IOV_MAX) of them; the descriptor is
        // borrowed from `file`, open for the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                slices.as_ptr().cast::<libc::iovec>(),
                slices.len() as libc::c_int,
                offset,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    })
}

/// Reads up to `len` bytes at `pos` into `buf` (cleared first), stopping early only at end of
/// file. EINTR is retried. On error `buf` holds the bytes read before it.
fn read_full_at(file: &File, buf: &mut Vec<u8>, pos: u64, len: usize) -> io::Result<()> {
    buf.clear();
    buf.resize(len, 0);
    let mut filled = 0usize;
    let result = loop {
        if filled == len {
            break Ok(());
        }
        let Some(at) = pos.checked_add(filled as u64) else {
            break Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "read position overflows u64",
            ));
        };
        match file.read_at(&mut buf[filled..], at) {
            Ok(0) => break Ok(()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    buf.truncate(filled);
    result
}

/// Whether [`BackendFile::preallocate`] reserves anything here: Linux's
/// `fallocate` mode 0; elsewhere (macOS's `F_PREALLOCATE` would need a separate
/// `ftruncate`, not worth its cost) it is a no-op.
const PREALLOCATES: bool = cfg!(target_os = "linux");

/// `fallocate` mode 0 of `len` bytes at `offset` (I190): blocks allocated, reading as zeros,
/// the length extended to at least `offset + len`. `EOPNOTSUPP` (a filesystem that cannot) is a no-op; EINTR is retried.
#[cfg(target_os = "linux")]
fn fallocate_zeroed(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "preallocation past off_t",
        ));
    };
    if len == 0 {
        return Ok(());
    }
    loop {
        // SAFETY: a plain system call on a descriptor `file` keeps open for the call.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset, len) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) => return Ok(()),
            _ => return Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn fallocate_zeroed(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

/// Makes a file's data durable: `fdatasync` (std retries EINTR).
#[cfg(not(target_os = "macos"))]
fn sync_file_data(file: &File) -> io::Result<()> {
    file.sync_data()
}

/// Makes a file's data durable: `fcntl(F_FULLFSYNC)`, which also flushes the drive's cache
/// (plain `fsync` on macOS does not).
#[cfg(target_os = "macos")]
fn sync_file_data(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: the descriptor is borrowed from `file`, so it stays open for the call;
        // F_FULLFSYNC takes no pointer argument.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_FULLFSYNC) };
        if rc != -1 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Makes a directory's entries durable: `fsync` on its descriptor (Linux).
#[cfg(not(target_os = "macos"))]
fn sync_directory(dir: &File) -> io::Result<()> {
    dir.sync_all()
}

/// `syncfs(2)` of the filesystem holding `file` (Linux).
#[cfg(target_os = "linux")]
fn sync_filesystem_of(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is borrowed from `file`, so it stays open for the call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// No `syncfs(2)` here: the caller syncs its files one by one.
#[cfg(not(target_os = "linux"))]
fn sync_filesystem_of(_file: &File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no syncfs on this platform",
    ))
}

/// Makes a directory's entries durable on macOS: `F_FULLFSYNC`, falling back to `fsync` on a
/// file system that does not support it for directories (ENOTSUP / ENOTTY / EINVAL).
#[cfg(target_os = "macos")]
fn sync_directory(dir: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    match sync_file_data(dir) {
        Ok(()) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOTSUP) | Some(libc::ENOTTY) | Some(libc::EINVAL)
            ) =>
        {
            // SAFETY: the descriptor is borrowed from `dir`, so it stays open for the call.
            let rc = unsafe { libc::fsync(dir.as_raw_fd()) };
            if rc == -1 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
        Err(e) => Err(e),
    }
}

/// Closes `file` with `close(2)` and reports its error, which dropping a `File` would discard.
fn close_reporting(file: File) -> io::Result<()> {
    use std::os::fd::IntoRawFd;
    let fd = file.into_raw_fd();
    // SAFETY: `fd` comes from `into_raw_fd`, so this function owns it and closes it once.
    let rc = unsafe { libc::close(fd) };
    if rc == -1 {
        // Not retried even on EINTR: the descriptor is released either way.
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn open_options(mode: OpenMode) -> OpenOptions {
    let mut options = OpenOptions::new();
    match mode {
        OpenMode::ReadWriteCreate => options.read(true).write(true).create(true).truncate(false),
        OpenMode::CreateNew => options.read(true).write(true).create_new(true),
        OpenMode::ReadWrite => options.read(true).write(true),
        OpenMode::ReadOnly => options.read(true),
    };
    options
}

/// Extracts a readable message from a thread's panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Clears this thread's executor slot when a shard ends (normally or by panic), dropping any
/// detached tasks still pending.
struct ExecutorSlotGuard;

impl Drop for ExecutorSlotGuard {
    fn drop(&mut self) {
        // Take first, drop after the borrow ends: a task's destructor may look at the slot.
        let taken = EXECUTOR.with(|slot| slot.borrow_mut().take());
        drop(taken);
    }
}

/// Runs one shard on the current thread until `main`'s future finishes.
fn run_one_shard<F, Fut>(shard: ShardId, main: &F)
where
    F: Fn(PortableBackend) -> Fut,
    Fut: Future<Output = ()>,
{
    let executor = Rc::new(LocalExecutor::new());
    EXECUTOR.with(|slot| *slot.borrow_mut() = Some(Rc::clone(&executor)));
    let _guard = ExecutorSlotGuard;
    smol::block_on(executor.run(main(PortableBackend::new(shard))));
}

/// The origin of [`Backend::now`]: the process's first read of the monotonic clock, shared by
/// every shard so their times compare.
fn clock_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl Backend for PortableBackend {
    type File = PortableFile;
    type Listener = PortableListener;

    fn name(&self) -> &'static str {
        "portable"
    }

    fn shard(&self) -> ShardId {
        self.shard
    }

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<PortableFile> {
        let path = path.to_path_buf();
        let file = smol::unblock(move || open_options(mode).open(path)).await?;
        Ok(PortableFile {
            file: Arc::new(file),
            counters: Arc::clone(&self.counters),
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        smol::unblock(move || fs::remove_file(path)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        smol::unblock(move || fs::rename(from, to)).await
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        smol::unblock(move || fs::create_dir_all(path)).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        smol::unblock(move || fs::remove_dir_all(path)).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let path = path.to_path_buf();
        smol::unblock(move || {
            fs::read_dir(path)?
                .map(|entry| entry.map(|e| e.path()))
                .collect()
        })
        .await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        Counters::add(&self.counters.dir_syncs, 1);
        let path = path.to_path_buf();
        smol::unblock(move || sync_directory(&File::open(path)?)).await
    }

    async fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        smol::unblock(move || sync_filesystem_of(&File::open(path)?)).await
    }

    async fn listen(&self, addr: SocketAddr) -> io::Result<PortableListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.bind(&addr.into())?;
        socket.listen(LISTEN_BACKLOG)?;
        let listener: TcpListener = socket.into();
        Ok(PortableListener {
            inner: Async::new(listener)?,
        })
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<PortableStream> {
        PortableStream::new(Async::<TcpStream>::connect(addr).await?)
    }

    async fn sleep(&self, duration: Duration) {
        smol::Timer::after(duration).await;
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
        match clock_origin().checked_add(deadline.0) {
            Some(at) => {
                smol::Timer::at(at).await;
            }
            // Beyond what `Instant` can represent: never.
            None => std::future::pending::<()>().await,
        }
    }

    /// On smol's blocking pool (`smol::unblock`), which grows a thread while its others are
    /// busy, so a call that blocks for long delays no file operation.
    async fn run_blocking<R, F>(&self, func: F) -> io::Result<R>
    where
        F: FnOnce() -> io::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        smol::unblock(func).await
    }

    /// Spawns `task`, detached, on this thread's shard executor.
    ///
    /// # Panics
    /// If the current thread is not a shard started by [`Backend::run_shards`] (a programmer
    /// error: there is no executor to run the task).
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, task: F) {
        EXECUTOR.with(|slot| {
            let slot = slot.borrow();
            let executor = slot.as_ref().expect(
                "PortableBackend::spawn_local called outside a shard started by run_shards",
            );
            executor.spawn(task).detach();
        });
    }

    /// Starts `count` threads named `minikafka-shard-N`, each running a `LocalExecutor`, and
    /// runs `main` on each with its own [`PortableBackend`]. Returns once every thread has
    /// finished; tasks spawned with `spawn_local` and still pending when a shard's `main`
    /// finishes are dropped.
    ///
    /// Errors: `InvalidInput` if `count` is 0; the OS error if a thread cannot be started
    /// (shards already started are joined first); `Other`, naming the shard and its panic
    /// message, if any shard panicked (the panic is caught, not propagated, after all shards
    /// have been joined).
    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        if count == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "run_shards needs at least one shard",
            ));
        }
        let main = Arc::new(main);
        let mut handles = Vec::with_capacity(count);
        let mut spawn_error = None;
        for index in 0..count {
            let main = Arc::clone(&main);
            let started = std::thread::Builder::new()
                .name(format!("minikafka-shard-{index}"))
                .spawn(move || run_one_shard(ShardId(index), &*main));
            match started {
                Ok(handle) => handles.push((index, handle)),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        let mut panicked = None;
        for (index, handle) in handles {
            if let Err(payload) = handle.join() {
                panicked.get_or_insert_with(|| {
                    io::Error::other(format!(
                        "shard {index} panicked: {}",
                        panic_message(&*payload)
                    ))
                });
            }
        }
        match spawn_error.or(panicked) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn scratch_dir(label: &str) -> PathBuf {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "minikafka-portable-{}-{label}-{n}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).expect("create scratch dir");
        dir
    }

    #[test]
    fn read_full_at_returns_short_only_at_eof() {
        let dir = scratch_dir("read");
        let path = dir.join("f");
        fs::write(&path, b"0123456789").expect("write");
        let file = File::open(&path).expect("open");
        let mut buf = b"stale contents".to_vec();
        read_full_at(&file, &mut buf, 2, 4).expect("read");
        assert_eq!(buf, b"2345");
        read_full_at(&file, &mut buf, 7, 10).expect("read");
        assert_eq!(buf, b"789", "short only because the file ends");
        read_full_at(&file, &mut buf, 50, 10).expect("read");
        assert!(buf.is_empty());
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn small_writes_complete_inline_and_large_ones_via_the_pool() {
        let dir = scratch_dir("inline");
        let path = dir.join("f");
        let backend = PortableBackend::new(ShardId(0));
        let file = smol::block_on(backend.open(&path, OpenMode::ReadWriteCreate)).expect("open");
        // Reference: the bytes the file must hold after each write.
        let mut expected = Vec::new();
        let mut apply = |data: &[u8], pos: usize| {
            if expected.len() < pos + data.len() {
                expected.resize(pos + data.len(), 0);
            }
            expected[pos..pos + data.len()].copy_from_slice(data);
        };
        let large = vec![0x5au8; INLINE_WRITE_MAX_BYTES + 1];
        let writes: [(Vec<u8>, usize); 4] = [
            (b"small".to_vec(), 0),
            (large, 3),
            (vec![0xa5u8; INLINE_WRITE_MAX_BYTES], 10),
            (b"tail".to_vec(), 2 * INLINE_WRITE_MAX_BYTES),
        ];
        for (data, pos) in writes {
            let inline = data.len() <= INLINE_WRITE_MAX_BYTES;
            apply(&data, pos);
            let mut write = std::pin::pin!(file.write_at(data, pos as u64));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            match write.as_mut().poll(&mut cx) {
                Poll::Ready((r, _)) => r.expect("write"),
                // Only a write over the threshold may wait for the pool.
                Poll::Pending if !inline => smol::block_on(write).0.expect("write"),
                Poll::Pending => panic!("at {pos}: small write did not complete inline"),
            }
        }
        assert_eq!(fs::read(&path).expect("read back"), expected);
        smol::block_on(file.close()).expect("close");
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn parts_are_written_back_to_back_inline_when_small_and_via_the_pool_when_large() {
        let dir = scratch_dir("parts");
        let path = dir.join("f");
        let backend = PortableBackend::new(ShardId(0));
        let file = smol::block_on(backend.open(&path, OpenMode::ReadWriteCreate)).expect("open");
        let small = vec![
            Bytes::from_static(b"head"),
            Bytes::new(),
            Bytes::from_static(b"-records"),
        ];
        let (r, back) = {
            let mut write = std::pin::pin!(file.write_parts_at(small.clone(), 2));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let Poll::Ready(done) = write.as_mut().poll(&mut cx) else {
                panic!("a small vectored write did not complete inline");
            };
            done
        };
        r.expect("write");
        assert_eq!(back, small, "the parts are handed back");
        let large_part = Bytes::from(vec![0x5au8; INLINE_WRITE_MAX_BYTES]);
        let large = vec![
            Bytes::from_static(b"<"),
            large_part.clone(),
            Bytes::from_static(b">"),
        ];
        let (r, _) = smol::block_on(file.write_parts_at(large, 14));
        r.expect("large write");
        let mut expected = b"\0\0head-records<".to_vec();
        expected.extend_from_slice(&large_part);
        expected.push(b'>');
        assert_eq!(fs::read(&path).expect("read back"), expected);
        assert_eq!(backend.stats().write_count, 2);
        assert_eq!(backend.stats().write_bytes, expected.len() as u64 - 2);
        smol::block_on(file.close()).expect("close");
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn stats_count_syncs_reads_and_writes() {
        let dir = scratch_dir("stats");
        let path = dir.join("f");
        let seen = Arc::new(Mutex::new(None));
        let out = Arc::clone(&seen);
        PortableBackend::run_shards(1, move |backend| {
            let (path, out) = (path.clone(), Arc::clone(&out));
            async move {
                let file = backend
                    .open(&path, OpenMode::ReadWriteCreate)
                    .await
                    .expect("open");
                let (r, _) = file.write_at(b"abcdef".to_vec(), 0).await;
                r.expect("write");
                file.sync_data().await.expect("sync");
                file.sync_data().await.expect("sync");
                let (r, buf) = file.read_at(Vec::new(), 1, 3).await;
                r.expect("read");
                assert_eq!(buf, b"bcd");
                file.close().await.expect("close");
                *out.lock().expect("lock") = Some(backend.stats());
            }
        })
        .expect("run_shards");
        let stats = seen.lock().expect("lock").expect("main ran");
        assert_eq!(
            stats,
            BackendStats {
                sync_count: 2,
                dir_sync_count: 0,
                read_count: 1,
                write_count: 1,
                read_bytes: 3,
                write_bytes: 6,
            }
        );
        fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn run_shards_reports_a_panicking_shard() {
        let err = PortableBackend::run_shards(2, |backend| async move {
            if backend.shard() == ShardId(1) {
                panic!("boom on shard one");
            }
        })
        .expect_err("a panicking shard is an error");
        let text = err.to_string();
        assert!(
            text.contains("shard 1") && text.contains("boom on shard one"),
            "{text}"
        );
    }

    #[test]
    fn run_shards_rejects_zero_shards() {
        let err = PortableBackend::run_shards(0, |_| async {}).expect_err("zero shards");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn two_listeners_share_a_port_with_reuseport() {
        PortableBackend::run_shards(1, |backend| async move {
            let first = backend
                .listen("127.0.0.1:0".parse().expect("addr"))
                .await
                .expect("first listen");
            let addr = first.local_addr().expect("local addr");
            let second = backend
                .listen(addr)
                .await
                .expect("second listen on the same port (SO_REUSEPORT)");
            assert_eq!(second.local_addr().expect("local addr"), addr);
        })
        .expect("run_shards");
    }

    /// A socket read straight into uninitialised room (stale pattern 0xA5, which the data
    /// never holds) gives the bytes sent, each read initialising exactly what it counted
    /// (I199).
    #[test]
    fn an_uninit_read_gives_the_bytes_sent_into_uninitialised_room_i199() {
        use futures::AsyncWriteExt;
        let sent: Vec<u8> = (0..500_000u32).map(|i| (i % 160) as u8).collect();
        let want = sent.clone();
        let got = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&got);
        PortableBackend::run_shards(1, move |backend| {
            let (sent, out) = (sent.clone(), Arc::clone(&out));
            async move {
                let listener = backend
                    .listen("127.0.0.1:0".parse().expect("addr"))
                    .await
                    .expect("listen");
                let addr = listener.local_addr().expect("local addr");
                let server = async {
                    let (mut stream, _) = listener.accept().await.expect("accept");
                    let mut got = Vec::new();
                    loop {
                        let mut room = vec![MaybeUninit::new(0xA5u8); 100_000];
                        let n = futures::future::poll_fn(|cx| {
                            Pin::new(&mut stream).poll_read_uninit(cx, &mut room)
                        })
                        .await
                        .expect("uninit read");
                        assert!(n <= room.len());
                        if n == 0 {
                            return got;
                        }
                        // SAFETY: every byte of `room` was initialised (the pattern) first.
                        let room: Vec<u8> =
                            room.iter().map(|b| unsafe { b.assume_init() }).collect();
                        assert!(room[n..].iter().all(|&b| b == 0xA5), "wrote past {n}");
                        got.extend_from_slice(&room[..n]);
                    }
                };
                let client = async {
                    let mut stream = backend.connect(addr).await.expect("connect");
                    for piece in sent.chunks(70_001) {
                        stream.write_all(piece).await.expect("client write");
                    }
                    stream.close().await.expect("close");
                };
                let (got, ()) = futures::join!(server, client);
                *out.lock().expect("lock") = got;
            }
        })
        .expect("run_shards");
        let got = got.lock().expect("lock");
        assert_eq!(got.len(), want.len());
        assert!(*got == want, "bytes as sent");
    }

    #[test]
    #[should_panic(expected = "outside a shard")]
    fn spawn_local_outside_a_shard_panics() {
        PortableBackend::new(ShardId(0)).spawn_local(async {});
    }
}
