//! [`MonoioFile`]: a [`BackendFile`] over monoio's `File`.
//!
//! Contract:
//! - Reads of at least [`CACHED_READ_MIN_BYTES`] first try `preadv2(RWF_NOWAIT)` on the shard's
//!   thread straight into the caller's buffer (the kernel answers from the page cache or says
//!   it would block, never waits for the disk); the rest, and smaller reads, are io_uring
//!   `READ`s. The ring read fills the caller's own buffer (an owned buffer handed to the
//!   kernel and back), so neither path copies in user space.
//! - Writes take the path the file's filesystem makes cheap, decided by the file's first write,
//!   a `pwritev2(RWF_NOWAIT)` on the shard's thread: where the filesystem does non-blocking
//!   buffered writes, later writes are io_uring `WRITE`s of the caller's buffer (no copy for
//!   `write_at` and for a one-part `write_parts_at`; several parts are concatenated once per
//!   submission, monoio 0.2 having no positional vectored file write); where it refuses
//!   (`EOPNOTSUPP`: ext4), io_uring would punt every buffered write to a kernel worker, so
//!   every write is a plain `pwritev` from the caller's buffers on the shard's thread (core's
//!   `WriteCursor`), bounded in practice by what the broker appends at once.
//! - `sync_data` is an io_uring `FSYNC` with `DATASYNC`. `truncate` (and `preallocate`'s
//!   `fallocate` mode 0, monoio 0.2 having no FALLOCATE op) runs on the
//!   shard's blocking pool, on a duplicate of the descriptor (so a cancelled call can never
//!   truncate a descriptor number reused after the file closed). `len` is `fstat(2)` on the
//!   descriptor: it never waits for the disk on an open inode.
//! - `close` is an io_uring `CLOSE`; monoio 0.2 discards its result, so `close` reports no
//!   error. Durability never rests on it: data is durable only after `sync_data` (I8).
//! - Never: allocates more than [`READ_CHUNK_BYTES`] ahead of the bytes actually read, so a
//!   large `len` at the end of a file costs only what the file holds.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, IoSlice};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd};

use bytes::Bytes;
use minikafka_core::backend::{BackendFile, WriteCursor, INLINE_WRITE_MAX_BYTES};
use monoio::buf::{IoBuf, IoBufMut};

use crate::stats;

/// Largest single read submitted to the ring; longer reads are split.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Smallest read tried on the shard's thread first (see the module's contract); smaller reads
/// go through the ring: the 64 KiB inline bound (a small read's ring round trip is cheap, and
/// a large one answered from the cache skips it).
pub const CACHED_READ_MIN_BYTES: usize = INLINE_WRITE_MAX_BYTES;

/// How a file's writes are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritePath {
    /// Not known yet: the next write asks the filesystem (`RWF_NOWAIT`).
    Undecided,
    /// Through the ring: the filesystem does non-blocking buffered writes.
    Ring,
    /// `pwritev(2)` on the shard's thread: the filesystem refuses non-blocking buffered
    /// writes, so the ring would punt each one to a kernel worker.
    OnShard,
}

/// What the filesystem said to a non-blocking buffered write.
pub fn path_after_nowait(result: &io::Result<usize>) -> WritePath {
    match result {
        Ok(_) => WritePath::Ring,
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => WritePath::OnShard,
        // EAGAIN (it would block right now) and real errors say nothing about support.
        Err(_) => WritePath::Undecided,
    }
}

/// What a non-blocking read on the shard's thread got.
enum CachedRead {
    /// This many bytes (0: end of file).
    Got(usize),
    /// The page cache does not hold the next bytes (or the filesystem refuses non-blocking
    /// reads): read them through the ring.
    Ring,
}

/// What of a `write_parts_at` is left for the ring.
enum RingRest {
    /// The only part, whole.
    Part(Bytes),
    /// The rest, concatenated, and the file position it goes to.
    Joined(Vec<u8>, u64),
}

/// An open file on a monoio shard. Must be used on the shard that opened it.
pub struct MonoioFile {
    inner: monoio::fs::File,
    writes: Cell<WritePath>,
    /// Cleared when the filesystem answers a non-blocking read with `EOPNOTSUPP`: every read
    /// then goes through the ring.
    cached_reads: Cell<bool>,
}

impl std::fmt::Debug for MonoioFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonoioFile")
            .field("fd", &self.inner.as_raw_fd())
            .field("writes", &self.writes.get())
            .finish()
    }
}

impl MonoioFile {
    pub(crate) fn from_std(file: File) -> io::Result<MonoioFile> {
        Ok(MonoioFile {
            inner: monoio::fs::File::from_std(file)?,
            writes: Cell::new(WritePath::Undecided),
            cached_reads: Cell::new(true),
        })
    }

    /// How this file's writes go (decided by its first one).
    pub fn write_path(&self) -> WritePath {
        self.writes.get()
    }

    /// Makes this file's later writes take `path` whatever the filesystem would answer: for
    /// tests and measurements of the ring write path on a filesystem that refuses
    /// non-blocking buffered writes (ext4, tmpfs), where the backend would never take it.
    pub fn force_write_path(&self, path: WritePath) {
        self.writes.set(path);
    }

    /// Whether large reads are still tried on the shard first: false once the filesystem
    /// refused a non-blocking read (`EOPNOTSUPP`: tmpfs, for one).
    pub fn reads_on_shard(&self) -> bool {
        self.cached_reads.get()
    }

    /// The descriptor as a `File` that does not close it.
    fn raw_file(&self) -> ManuallyDrop<File> {
        // SAFETY: the descriptor is owned by `self.inner`, open for the whole borrow of
        // `self`, and `ManuallyDrop` keeps this temporary `File` from closing it.
        ManuallyDrop::new(unsafe { File::from_raw_fd(self.inner.as_raw_fd()) })
    }

    /// One `pwritev2` of `slices` at `pos` on the shard's thread, with `flags` (`RWF_NOWAIT`
    /// for the probe, 0 for a plain positional vectored write).
    fn pwritev2(&self, slices: &[IoSlice<'_>], pos: u64, flags: libc::c_int) -> io::Result<usize> {
        let offset = libc::off_t::try_from(pos)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "write past off_t"))?;
        // SAFETY: `IoSlice` is ABI-compatible with `iovec` on Unix; the slices borrow buffers
        // alive and unaliased for the call, at most MAX_WRITE_PARTS (IOV_MAX) of them (the
        // cursor's bound); the descriptor is open for the borrow of `self`.
        let n = unsafe {
            libc::pwritev2(
                self.inner.as_raw_fd(),
                slices.as_ptr().cast::<libc::iovec>(),
                slices.len() as libc::c_int,
                offset,
                flags,
            )
        };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// A write on the shard's thread: the first one of the file asks the filesystem whether
    /// it does non-blocking buffered writes. `Ok(false)` when the rest should go through the
    /// ring instead.
    fn write_on_shard(&self, cursor: &mut WriteCursor<'_>) -> io::Result<bool> {
        if self.writes.get() == WritePath::Undecided {
            let first = self.pwritev2(cursor.slices(), cursor.pos(), libc::RWF_NOWAIT);
            self.writes.set(path_after_nowait(&first));
            match first {
                // The filesystem wrote without blocking: what is left goes through the ring,
                // as later writes will.
                Ok(n) => {
                    cursor.advance(n)?;
                    if cursor.is_done() {
                        stats::record_write_on_shard();
                        return Ok(true);
                    }
                    return Ok(false);
                }
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(false)
                }
                Err(e) => return Err(e),
            }
        }
        // Core's cursor retries EINTR and short writes, failing with WriteZero on none.
        cursor.write_all(|slices, at| self.pwritev2(slices, at, 0))?;
        stats::record_write_on_shard();
        Ok(true)
    }

    /// Writes all of `buf[done..]` at `pos + done` through the ring, retrying short writes;
    /// hands `buf` back.
    async fn ring_write_all<T: IoBuf>(
        &self,
        buf: T,
        pos: u64,
        mut done: usize,
    ) -> (io::Result<()>, T) {
        let mut buf = buf;
        while done < buf.bytes_init() {
            let Some(at) = pos.checked_add(done as u64) else {
                let err = io::Error::new(io::ErrorKind::InvalidInput, "write past u64");
                return (Err(err), buf);
            };
            let (result, slice) = self.inner.write_at(buf.slice(done..), at).await;
            buf = slice.into_inner();
            match result {
                Ok(0) => {
                    let err = io::Error::new(io::ErrorKind::WriteZero, "write accepted zero bytes");
                    return (Err(err), buf);
                }
                Ok(n) => {
                    stats::record_write();
                    done += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// One `preadv2(RWF_NOWAIT)` of up to `want_bytes` at `at` into the spare capacity of
    /// `buf` (which has room for them), on the shard's thread.
    fn read_cached(&self, buf: &mut Vec<u8>, at: u64, want_bytes: usize) -> io::Result<CachedRead> {
        if !self.cached_reads.get() {
            return Ok(CachedRead::Ring);
        }
        let offset = libc::off_t::try_from(at)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read past off_t"))?;
        let spare = buf.spare_capacity_mut();
        let want_bytes = want_bytes.min(spare.len());
        let iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: want_bytes,
        };
        // SAFETY: `iov` points at `want_bytes` bytes of `buf`'s spare capacity, which nothing
        // else borrows during the call; the kernel writes at most that many; the descriptor is
        // open for the borrow of `self`.
        let n = unsafe { libc::preadv2(self.inner.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
        match usize::try_from(n) {
            Ok(got) => {
                // SAFETY: the kernel initialised `got` (<= want_bytes <= spare) bytes past the
                // old length.
                unsafe { buf.set_len(buf.len() + got) };
                if got > 0 {
                    stats::record_read_on_shard(got);
                }
                Ok(CachedRead::Got(got))
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(CachedRead::Ring),
                    Some(libc::EOPNOTSUPP) => {
                        self.cached_reads.set(false);
                        Ok(CachedRead::Ring)
                    }
                    _ => Err(e),
                }
            }
        }
    }

    /// Reads up to `len` bytes at `pos` into `buf` (empty), handing it back.
    async fn read_into(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        let try_cache = len >= CACHED_READ_MIN_BYTES;
        while buf.len() < len {
            let want_bytes = (len - buf.len()).min(READ_CHUNK_BYTES);
            let Some(at) = pos.checked_add(buf.len() as u64) else {
                let err = io::Error::new(io::ErrorKind::InvalidInput, "read past u64");
                return (Err(err), buf);
            };
            // Room for this chunk only: never more than READ_CHUNK_BYTES ahead of what was read.
            buf.reserve_exact(want_bytes);
            if try_cache {
                match self.read_cached(&mut buf, at, want_bytes) {
                    Ok(CachedRead::Got(0)) => break, // End of file.
                    Ok(CachedRead::Got(_)) => continue,
                    Ok(CachedRead::Ring) => {}
                    Err(e) => return (Err(e), buf),
                }
            }
            // The kernel reads into `buf[len..len + want_bytes]` (spare capacity) and monoio
            // sets the length to what it wrote.
            let start = buf.len();
            let (result, slice) = self
                .inner
                .read_at(buf.slice_mut(start..start + want_bytes), at)
                .await;
            buf = slice.into_inner();
            match result {
                Ok(0) => break, // End of file.
                Ok(got) => stats::record_read(got),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// Writes what `cursor` holds on the shard where the filesystem refuses non-blocking
    /// buffered writes; `Ok(true)` when it did, `Ok(false)` when what is left (the cursor says
    /// what) goes through the ring.
    fn try_write_on_shard(&self, cursor: &mut WriteCursor<'_>) -> io::Result<bool> {
        if cursor.is_done() {
            return Ok(true);
        }
        if self.writes.get() == WritePath::Ring {
            return Ok(false);
        }
        self.write_on_shard(cursor)
    }
}

impl BackendFile for MonoioFile {
    async fn read_at(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        buf.clear();
        self.read_into(buf, pos, len).await
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        let done = {
            let mut cursor = WriteCursor::new([&buf[..]], pos);
            match self.try_write_on_shard(&mut cursor) {
                Ok(true) => return (Ok(()), buf),
                Ok(false) => buf.len() - cursor.remaining_bytes() as usize,
                Err(e) => return (Err(e), buf),
            }
        };
        // The caller's own buffer goes to the kernel: no copy.
        self.ring_write_all(buf, pos, done).await
    }

    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>) {
        let rest = {
            let mut cursor = WriteCursor::new(parts.iter().map(|part| &part[..]), pos);
            match self.try_write_on_shard(&mut cursor) {
                Ok(true) => return (Ok(()), parts),
                Ok(false) => {}
                Err(e) => return (Err(e), parts),
            }
            let mut non_empty = parts.iter().filter(|part| !part.is_empty());
            match (non_empty.next(), non_empty.next()) {
                // One part, nothing written yet: the part itself is the ring's buffer.
                (Some(part), None) if cursor.remaining_bytes() == part.len() as u64 => {
                    RingRest::Part(part.clone())
                }
                // monoio 0.2 has no positional vectored file write: one concatenating copy.
                _ => RingRest::Joined(cursor.remaining_to_vec(), cursor.pos()),
            }
        };
        let result = match rest {
            RingRest::Part(part) => self.ring_write_all(part, pos, 0).await.0,
            RingRest::Joined(joined, at) => self.ring_write_all(joined, at, 0).await.0,
        };
        (result, parts)
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data().await?;
        stats::record_sync();
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        let file = self.raw_file().try_clone()?;
        crate::blocking(move || file.set_len(len)).await
    }

    async fn preallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        // monoio 0.2 has no FALLOCATE op; the shard's blocking pool keeps the extent
        // allocation (tens of µs to ms, journalled) off the shard's thread. A duplicate
        // descriptor, as `truncate`, so a cancelled call never touches a reused number.
        let file = self.raw_file().try_clone()?;
        crate::blocking(move || fallocate_zeroed(&file, offset, len)).await
    }

    async fn len(&self) -> io::Result<u64> {
        Ok(self.raw_file().metadata()?.len())
    }

    async fn close(self) -> io::Result<()> {
        self.inner.close().await
    }
}

/// `fallocate` mode 0 of `len` bytes at `offset`: blocks allocated, reading as zeros, the
/// length extended to at least `offset + len` (I190). A filesystem that cannot (`EOPNOTSUPP`: tmpfs before 6.x, some FUSE) makes
/// it a no-op, as the trait promises; EINTR is retried.
pub fn fallocate_zeroed(file: &File, offset: u64, len: u64) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filesystems_answer_to_rwf_nowait_picks_the_write_path() {
        assert_eq!(path_after_nowait(&Ok(10)), WritePath::Ring);
        let refused = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        assert_eq!(path_after_nowait(&Err(refused)), WritePath::OnShard);
        let busy = io::Error::from_raw_os_error(libc::EAGAIN);
        assert_eq!(path_after_nowait(&Err(busy)), WritePath::Undecided);
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(path_after_nowait(&Err(full)), WritePath::Undecided);
    }
}
