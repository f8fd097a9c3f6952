//! The I/O boundary: the traits a backend implements and the broker drives.
//!
//! Contract:
//! - Core *declares* this interface and never calls it: defining a trait performs no I/O.
//!   It lives here so both backends and the broker see it without depending on each other.
//! - One backend instance per shard (per core). Futures are `!Send` (monoio's are, and so are
//!   shard-local structures): methods are plain `async fn`s with no `Send` bound.
//! - Buffers are owned and handed back (`(result, buf)`), so an io_uring backend can own a
//!   buffer while the kernel uses it, and callers reuse allocations. A write may also come in
//!   pieces ([`BackendFile::write_parts_at`], `Bytes`), so a caller holding a record batch as
//!   a patched header plus the request frame's bytes writes it without copying it together;
//!   [`WriteCursor`] is the bookkeeping every backend's vectored write shares.
//! - Errors are `std::io::Error`, unchanged from the OS, so callers can tell ENOSPC from EIO.
//! - Time is the backend's too: the broker reads no clock and starts no thread itself
//!   (`broker/tests/no_clock.rs` checks), so a simulated backend can run it on virtual time.
#![allow(async_fn_in_trait)]

use std::future::Future;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

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

    /// Writes `parts` back to back at `pos`, exactly as [`write_at`](Self::write_at) would
    /// write their concatenation (same retries, same torn-write rule), but without
    /// concatenating where the backend can: a positional vectored write (`pwritev`) through
    /// a [`WriteCursor`]. Empty parts are allowed. The parts are handed back.
    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>);

    /// Makes the file's data durable: `fdatasync` on Linux, `fcntl(F_FULLFSYNC)` on macOS.
    /// After an error, nothing written before may be assumed durable (invariant I8).
    async fn sync_data(&self) -> io::Result<()>;

    /// Sets the file's length (truncating a torn tail, or cutting a preallocated tail).
    async fn truncate(&self, len: u64) -> io::Result<()>;

    /// Extends the file to at least `offset + len` bytes with allocated blocks that read as
    /// zeros (`fallocate` mode 0 on Linux), so later writes there change neither the length
    /// nor the allocation and their `sync_data` commits no metadata: on ext4 that is 0.69–0.72 ×
    /// the cost of a sync that grows the file (docs/perf-log/2026-12-06-preallocation.md). The
    /// length then runs ahead of the data: the caller keeps where its data ends and cuts the
    /// rest (I190). Bytes already in the file are never changed. Where the OS or filesystem
    /// cannot (`EOPNOTSUPP`, macOS) it does nothing and returns `Ok`; other errors (ENOSPC,
    /// EIO) are returned for the caller to log, and nothing written is affected by one.
    async fn preallocate(&self, offset: u64, len: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    async fn len(&self) -> io::Result<u64>;

    /// Closes the file, reporting any error the OS held back.
    async fn close(self) -> io::Result<()>;
}

/// Most buffers handed to one vectored write call: `IOV_MAX` on Linux and macOS (1,024). A
/// [`WriteCursor`] offers at most this many at a time and continues with the rest.
pub const MAX_WRITE_PARTS: usize = 1024;

/// Where a vectored write stands: the parts not yet written (the first one possibly started)
/// and the file position the next byte goes to. Pure bookkeeping, shared by every backend's
/// [`BackendFile::write_parts_at`]: the backend issues the system call
/// ([`write_all`](Self::write_all) takes it as a closure), the cursor says what is left.
#[derive(Debug)]
pub struct WriteCursor<'a> {
    slices: Vec<IoSlice<'a>>,
    /// Index of the first slice not yet fully written.
    first: usize,
    pos: u64,
    remaining_bytes: u64,
}

impl<'a> WriteCursor<'a> {
    /// A cursor over `parts`, to be written from `pos`. Empty parts are dropped here.
    pub fn new<I>(parts: I, pos: u64) -> Self
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let slices: Vec<IoSlice<'a>> = parts
            .into_iter()
            .filter(|part| !part.is_empty())
            .map(IoSlice::new)
            .collect();
        let remaining_bytes = slices.iter().map(|s| s.len() as u64).sum();
        WriteCursor {
            slices,
            first: 0,
            pos,
            remaining_bytes,
        }
    }

    /// The next buffers to write, in order: at most [`MAX_WRITE_PARTS`] of them.
    pub fn slices(&self) -> &[IoSlice<'a>] {
        let rest = &self.slices[self.first..];
        &rest[..rest.len().min(MAX_WRITE_PARTS)]
    }

    /// The file position of the next byte to write.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Bytes not yet written.
    pub fn remaining_bytes(&self) -> u64 {
        self.remaining_bytes
    }

    /// Whether every byte is written.
    pub fn is_done(&self) -> bool {
        self.remaining_bytes == 0
    }

    /// Records that the OS accepted `written` more bytes (a short write stops mid-slice).
    /// An OS reporting more than was offered is an error, as is a position past `u64`.
    pub fn advance(&mut self, written: usize) -> io::Result<()> {
        let written_u64 = written as u64;
        if written_u64 > self.remaining_bytes {
            return Err(io::Error::other("write reported more bytes than offered"));
        }
        self.pos = self
            .pos
            .checked_add(written_u64)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write past u64"))?;
        self.remaining_bytes -= written_u64;
        let mut left = written;
        while left > 0 {
            let slice = &mut self.slices[self.first];
            if left < slice.len() {
                slice.advance(left);
                break;
            }
            left -= slice.len();
            self.first += 1;
        }
        // Skip a slice the last write ended exactly at.
        while self.first < self.slices.len() && self.slices[self.first].is_empty() {
            self.first += 1;
        }
        Ok(())
    }

    /// Writes everything left with `write(slices, pos)` (a `pwritev`), retrying after EINTR
    /// and short writes; fails with `WriteZero` when the OS accepts nothing. On an error some
    /// prefix may have been written (a torn write), as with `write_at`.
    pub fn write_all<W>(&mut self, mut write: W) -> io::Result<()>
    where
        W: FnMut(&[IoSlice<'_>], u64) -> io::Result<usize>,
    {
        while !self.is_done() {
            match write(self.slices(), self.pos) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "vectored write accepted zero bytes",
                    ))
                }
                Ok(written) => self.advance(written)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The bytes left, copied into one buffer (for a backend that must hand the OS a single
    /// owned buffer, such as a ring submission).
    pub fn remaining_to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(self.remaining_bytes).unwrap_or(0));
        for slice in &self.slices[self.first..] {
            out.extend_from_slice(slice);
        }
        out
    }
}

/// The first `len` bytes of `parts` (cheap `Bytes` slices, no copy): what a torn vectored
/// write of `len` bytes leaves in the file.
pub fn parts_prefix(parts: &[Bytes], len: usize) -> Vec<Bytes> {
    let mut left = len;
    let mut out = Vec::new();
    for part in parts {
        if left == 0 {
            break;
        }
        let take = left.min(part.len());
        out.push(part.slice(..take));
        left -= take;
    }
    out
}

/// Total bytes of `parts`.
pub fn parts_len(parts: &[Bytes]) -> usize {
    parts.iter().map(Bytes::len).sum()
}

/// Most bytes [`ReadUninit::poll_read_uninit`]'s default body zeroes (and so reads) in one
/// call: a caller's room may be far larger (a frame's rest, up to 1 MiB), and zeroing all of
/// it on every poll would cost more than the read.
pub const ZEROED_READ_MAX_BYTES: usize = 64 * 1024;

/// A reader that can read into uninitialised memory (I199), so a caller's room for bytes
/// still to come need not be zeroed first: the socket's `recv` writes straight into it.
///
/// Contract of [`poll_read_uninit`](Self::poll_read_uninit) (I199), which callers' `unsafe`
/// code relies on (`set_len` by the count): on `Ready(Ok(n))`, `n <= buf.len()` and
/// `buf[..n]` holds the bytes read, initialised; nothing else of `buf` is promised, and no
/// byte of `buf` is read before it is written. `Ready(Ok(0))` for a non-empty `buf` is the end
/// of the stream, as for `poll_read`.
///
/// The default body is the safe fallback for a stream that cannot read into uninitialised
/// memory (TLS plaintext, simulated and test streams): it zeroes at most
/// [`ZEROED_READ_MAX_BYTES`] of `buf` and `poll_read`s into that. A stream over an OS socket
/// overrides it (monoio: tokio's `ReadBuf::uninit`; portable: `socket2`'s `recv`).
pub trait ReadUninit: futures_io::AsyncRead + Unpin {
    /// Reads what the stream has now into `buf`, which may be uninitialised (see the trait).
    fn poll_read_uninit(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len().min(ZEROED_READ_MAX_BYTES);
        let room = zeroed(&mut buf[..len]);
        let n = std::task::ready!(self.poll_read(cx, room))?;
        // A `poll_read` over-reporting its count would break the contract the caller's
        // `set_len` relies on: refuse it rather than pass it on.
        if n > len {
            return Poll::Ready(Err(io::Error::other(format!(
                "a read reported {n} bytes into {len} bytes of room"
            ))));
        }
        Poll::Ready(Ok(n))
    }
}

/// Zeroes `buf` and gives it back as initialised bytes.
fn zeroed(buf: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    for byte in buf.iter_mut() {
        byte.write(0);
    }
    // SAFETY: every element was just written, and `MaybeUninit<u8>` has `u8`'s layout, so
    // the slice is a valid `[u8]` of the same length, borrowed as `buf` is.
    unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) }
}

/// A connected TCP stream, readable (into uninitialised room too, [`ReadUninit`]) and
/// writable with the `futures` I/O traits. `poll_close` shuts down the write half, so the
/// peer reads end of stream.
pub trait BackendStream: ReadUninit + futures_io::AsyncWrite + Unpin + 'static {}

impl<T: ReadUninit + futures_io::AsyncWrite + Unpin + 'static> BackendStream for T {}

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

    /// A short name for logs ("monoio", "portable", "sim").
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

    /// Makes everything written on the filesystem holding `path` durable — every file's data
    /// and every directory's entries, whoever wrote them (`syncfs(2)`): one call instead of a
    /// sync per file, for a start that must make many recovered files durable at once.
    /// [`io::ErrorKind::Unsupported`] where the backend cannot; any other error may come from
    /// a file that is not ours (a filesystem-wide writeback error), so a caller that needs to
    /// know about its own files syncs them one by one after a failure.
    async fn sync_filesystem(&self, path: &Path) -> io::Result<()>;

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

    /// Runs `func`, a call that may block for long (a JWKS fetched over HTTP, with its own
    /// timeouts), off this shard's event loop and without delaying the shard's other blocking
    /// work (its file operations): on a thread of its own, or a blocking pool that grows. The
    /// simulated backend runs it in place (its world is single-threaded and replays exactly).
    async fn run_blocking<R, F>(&self, func: F) -> io::Result<R>
    where
        F: FnOnce() -> io::Result<R> + Send + 'static,
        R: Send + 'static;

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

    /// [`Backend::run_shards`] for shards whose files live under `data_dir`: a backend that
    /// pins its shards to CPUs may prefer the CPUs that take that disk's interrupts, so that a
    /// sync's completion wakes its shard on the same CPU. By default, `run_shards`.
    fn run_shards_for_data<F, Fut>(count: usize, data_dir: &Path, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let _ = data_dir;
        Self::run_shards(count, main)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader giving `data` at most `step` bytes a read, or reporting `lie` bytes read.
    struct Pattern {
        data: Vec<u8>,
        at: usize,
        step: usize,
        largest_offer: usize,
        lie: Option<usize>,
    }

    impl futures_io::AsyncRead for Pattern {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<io::Result<usize>> {
            self.largest_offer = self.largest_offer.max(buf.len());
            if let Some(n) = self.lie {
                return Poll::Ready(Ok(n));
            }
            let n = buf.len().min(self.step).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Poll::Ready(Ok(n))
        }
    }

    impl ReadUninit for Pattern {}

    fn pattern(data: Vec<u8>, step: usize) -> Pattern {
        Pattern {
            data,
            at: 0,
            step,
            largest_offer: 0,
            lie: None,
        }
    }

    fn read_uninit(reader: &mut Pattern, room: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(reader).poll_read_uninit(&mut cx, room) {
            Poll::Ready(result) => result,
            Poll::Pending => panic!("a pattern reader is always ready"),
        }
    }

    #[test]
    fn the_default_uninit_read_initialises_exactly_what_it_reports_i199() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut reader = pattern(data.clone(), 70_000);
        // Room holding stale bytes: a count too large, or bytes not written, would show.
        let mut room = vec![MaybeUninit::new(0xA5u8); 150_000];
        let mut got = Vec::new();
        loop {
            let n = read_uninit(&mut reader, &mut room).expect("read");
            assert!(n <= room.len());
            if n == 0 {
                break;
            }
            // SAFETY: the contract under test: `room[..n]` is initialised.
            got.extend(room[..n].iter().map(|b| unsafe { b.assume_init() }));
        }
        assert!(got == data, "bytes and counts as written");
        assert_eq!(
            reader.largest_offer, ZEROED_READ_MAX_BYTES,
            "the fallback zeroes and offers at most its bound, not the whole room"
        );
        // Room smaller than the bound is offered whole.
        let mut reader = pattern(vec![7; 10], 100);
        let mut room = [MaybeUninit::new(0xA5u8); 6];
        assert_eq!(read_uninit(&mut reader, &mut room).expect("read"), 6);
        assert_eq!(reader.largest_offer, 6);
    }

    #[test]
    fn a_default_uninit_read_over_reporting_its_count_is_an_error_i199() {
        let mut reader = pattern(Vec::new(), 1);
        reader.lie = Some(9);
        let mut room = [MaybeUninit::new(0u8); 8];
        assert!(read_uninit(&mut reader, &mut room).is_err());
    }

    /// A fake `pwritev` into `file` that accepts at most `limit` bytes per call.
    fn fake_pwritev<'f>(
        file: &'f mut Vec<u8>,
        limit: usize,
        calls: &'f mut usize,
    ) -> impl FnMut(&[IoSlice<'_>], u64) -> io::Result<usize> + 'f {
        move |slices, pos| {
            *calls += 1;
            let mut at = pos as usize;
            let mut done = 0;
            for slice in slices {
                for &byte in slice.iter() {
                    if done == limit {
                        return Ok(done);
                    }
                    if file.len() <= at {
                        file.resize(at + 1, 0);
                    }
                    file[at] = byte;
                    at += 1;
                    done += 1;
                }
            }
            Ok(done)
        }
    }

    #[test]
    fn short_writes_continue_mid_part_until_every_byte_is_written() {
        let parts: [&[u8]; 4] = [b"head", b"", b"middle", b"end"];
        for limit in 1..=13 {
            let mut file = b"xx".to_vec();
            let mut calls = 0;
            let mut cursor = WriteCursor::new(parts, 2);
            assert_eq!(cursor.remaining_bytes(), 13);
            cursor
                .write_all(fake_pwritev(&mut file, limit, &mut calls))
                .expect("written");
            assert_eq!(file, b"xxheadmiddleend", "limit {limit}");
            assert_eq!(calls, 13usize.div_ceil(limit), "limit {limit}");
            assert!(cursor.is_done());
            assert_eq!(cursor.pos(), 15);
        }
    }

    #[test]
    fn at_most_max_write_parts_slices_are_offered_per_call() {
        let parts: Vec<Vec<u8>> = (0..MAX_WRITE_PARTS + 5).map(|i| vec![i as u8]).collect();
        let mut cursor = WriteCursor::new(parts.iter().map(Vec::as_slice), 0);
        assert_eq!(cursor.slices().len(), MAX_WRITE_PARTS);
        let mut file = Vec::new();
        let mut calls = 0;
        cursor
            .write_all(fake_pwritev(&mut file, usize::MAX, &mut calls))
            .expect("written");
        assert_eq!(calls, 2);
        assert_eq!(file, parts.concat());
    }

    #[test]
    fn zero_bytes_accepted_is_write_zero_and_errors_stop_the_write() {
        let mut cursor = WriteCursor::new([&b"abc"[..]], 0);
        let err = cursor.write_all(|_, _| Ok(0)).expect_err("zero");
        assert_eq!(err.kind(), io::ErrorKind::WriteZero);
        let mut interrupted = 1;
        let err = cursor
            .write_all(|_, _| {
                if interrupted > 0 {
                    interrupted -= 1;
                    return Err(io::Error::from(io::ErrorKind::Interrupted));
                }
                Err(io::Error::from_raw_os_error(28))
            })
            .expect_err("enospc");
        assert_eq!(err.raw_os_error(), Some(28));
        assert!(cursor.advance(4).is_err(), "more than offered");
        assert_eq!(cursor.remaining_to_vec(), b"abc");
        cursor.advance(1).expect("one byte");
        assert_eq!(cursor.remaining_to_vec(), b"bc");
    }

    #[test]
    fn a_prefix_of_parts_is_the_concatenations_prefix() {
        let parts = vec![
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ];
        assert_eq!(parts_len(&parts), 5);
        for len in 0..=6 {
            let prefix: Vec<u8> = parts_prefix(&parts, len).concat();
            assert_eq!(prefix, b"abcde"[..len.min(5)], "len {len}");
        }
    }
}
