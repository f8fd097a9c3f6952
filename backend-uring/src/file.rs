//! [`UringFile`]: a [`BackendFile`] over glommio's `BufferedFile`.
//!
//! Contract:
//! - Reads of at least [`CACHED_READ_MIN_BYTES`] of bytes the page cache holds are
//!   `preadv2(RWF_NOWAIT)`s on the shard's thread straight into the caller's buffer (the
//!   kernel answers from the cache or says it would block, never waits for the disk); what
//!   it does not hold (the rest of a short answer, or every read of a file whose filesystem
//!   refuses non-blocking reads) and smaller reads go through the ring, which copies once
//!   more, from glommio's read buffer. So a fetch of cached bytes costs no user-space copy
//!   and no ring round trip, and a cold read still never blocks the shard on the disk.
//! - `fdatasync`, close and the other reads are io_uring submissions (counted in
//!   [`crate::stats`]). Writes take the path the file's filesystem makes cheap, decided by
//!   the file's first write, which is a `pwritev2(RWF_NOWAIT)` on the shard's thread: where
//!   the filesystem does non-blocking buffered writes, later writes go through the ring, which completes them
//!   inline; where it refuses (`EOPNOTSUPP`: ext4, for one), io_uring would punt every
//!   buffered write to a kernel worker (a thread hop per write, after glommio's copy of the
//!   buffer), so every write is a plain `pwritev` on the shard's thread, from the caller's
//!   buffers (no copy). A large one costs the shard the kernel's copy into the page cache,
//!   about what the ring path's own copy cost it. A `write_parts_at` takes the same paths as
//!   one `pwritev` (core's `WriteCursor`): no copy on the shard, one concatenating copy for a
//!   ring submission.
//!   `truncate` runs `ftruncate` on glommio's blocking thread (glommio 0.9 has no io_uring
//!   truncate). `len` is a direct `fstat(2)` on the descriptor: it never blocks on the disk
//!   for an open inode, and unlike glommio's path-based `statx` it stays right after the file
//!   is renamed or unlinked.
//! - Buffered I/O on purpose: the page cache serves caught-up consumers (see docs/DESIGN.md).
//!   glommio's `DmaFile` is also unusable here: on this machine's disk its polled reads fail
//!   with `EOPNOTSUPP`.
//! - Never: allocates more than [`READ_CHUNK_BYTES`] ahead of the bytes actually read, so a
//!   large `len` at the end of a file costs only what the file holds.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, IoSlice};
use std::mem::ManuallyDrop;
use std::os::unix::io::{AsRawFd, FromRawFd};

use bytes::Bytes;
use glommio::io::BufferedFile;
use minikafka_core::backend::{BackendFile, WriteCursor, INLINE_WRITE_MAX_BYTES};

use crate::error::os_error;
use crate::stats;

/// Largest single read submitted to the ring; longer reads are split.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// Smallest read tried on the shard's thread first (see the module's contract); smaller reads
/// go through the ring. Their copy is small, and a read answered on the shard completes
/// without the executor visiting its rings: a task that loops over small cached reads would
/// hold back other tasks' ring completions until glommio preempts it (the log suite's
/// reads-racing-appends check took 23 s instead of 0.4 s that way).
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
fn path_after_nowait(result: &io::Result<usize>) -> WritePath {
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

/// An open file on a uring shard. Must be used on the shard that opened it.
#[derive(Debug)]
pub struct UringFile {
    inner: BufferedFile,
    writes: Cell<WritePath>,
    /// Cleared when the filesystem answers a non-blocking read with `EOPNOTSUPP`: every read
    /// then goes through the ring.
    cached_reads: Cell<bool>,
}

impl UringFile {
    pub(crate) fn new(inner: BufferedFile) -> UringFile {
        UringFile {
            inner,
            writes: Cell::new(WritePath::Undecided),
            cached_reads: Cell::new(true),
        }
    }

    /// How this file's writes go (decided by its first one).
    pub fn write_path(&self) -> WritePath {
        self.writes.get()
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
    /// it does non-blocking buffered writes. `Ok(false)` when the write should go through the
    /// ring instead (nothing was written then).
    fn write_on_shard(&self, cursor: &mut WriteCursor<'_>) -> io::Result<bool> {
        if self.writes.get() == WritePath::Undecided {
            let first = self.pwritev2(cursor.slices(), cursor.pos(), libc::RWF_NOWAIT);
            self.writes.set(path_after_nowait(&first));
            let mut wrote_bytes = 0;
            match first {
                // The filesystem wrote without blocking: later writes go through the ring
                // (which completes them inline); this one finishes here.
                Ok(n) => wrote_bytes = n,
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
            if wrote_bytes == 0 && self.writes.get() == WritePath::Ring {
                return Ok(false);
            }
            cursor.advance(wrote_bytes)?;
        }
        // Core's cursor retries EINTR and short writes, failing with WriteZero on none.
        cursor.write_all(|slices, at| self.pwritev2(slices, at, 0))?;
        stats::record_write_on_shard();
        Ok(true)
    }

    /// Writes what `cursor` holds through the ring. glommio 0.9's `BufferedFile::write_at`
    /// consumes its `Vec` and never returns it, so the bytes are copied into one buffer per
    /// submission (once, unless the kernel writes short).
    async fn write_via_ring(&self, cursor: &mut WriteCursor<'_>) -> io::Result<()> {
        while !cursor.is_done() {
            let chunk = cursor.remaining_to_vec();
            let wrote_bytes = self
                .inner
                .write_at(chunk, cursor.pos())
                .await
                .map_err(os_error)?;
            stats::record_write();
            if wrote_bytes == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write_at accepted zero bytes",
                ));
            }
            cursor.advance(wrote_bytes)?;
        }
        Ok(())
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

    async fn read_into(&self, buf: &mut Vec<u8>, pos: u64, len: usize) -> io::Result<()> {
        let try_cache = len >= CACHED_READ_MIN_BYTES;
        while buf.len() < len {
            let want_bytes = (len - buf.len()).min(READ_CHUNK_BYTES);
            let at = pos
                .checked_add(buf.len() as u64)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past u64"))?;
            // Room for this chunk only: never more than READ_CHUNK_BYTES ahead of what was read.
            buf.reserve_exact(want_bytes);
            let cached = if try_cache {
                self.read_cached(buf, at, want_bytes)?
            } else {
                CachedRead::Ring
            };
            match cached {
                CachedRead::Got(0) => break, // End of file.
                CachedRead::Got(_) => continue,
                CachedRead::Ring => {}
            }
            let got = self.inner.read_at(at, want_bytes).await.map_err(os_error)?;
            stats::record_read();
            if got.is_empty() {
                break; // End of file.
            }
            // A read never returns more than asked; guard anyway so `buf` stays within `len`.
            let take_bytes = got.len().min(len - buf.len());
            buf.extend_from_slice(&got[..take_bytes]);
        }
        Ok(())
    }

    /// Writes what `cursor` holds: on the shard where the filesystem refuses non-blocking
    /// buffered writes (no copy), else through the ring.
    async fn write_from(&self, mut cursor: WriteCursor<'_>) -> io::Result<()> {
        if !cursor.is_done()
            && self.writes.get() != WritePath::Ring
            && self.write_on_shard(&mut cursor)?
        {
            return Ok(());
        }
        self.write_via_ring(&mut cursor).await
    }
}

impl BackendFile for UringFile {
    async fn read_at(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        buf.clear();
        let result = self.read_into(&mut buf, pos, len).await;
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        let result = self.write_from(WriteCursor::new([&buf[..]], pos)).await;
        (result, buf)
    }

    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>) {
        let cursor = WriteCursor::new(parts.iter().map(|part| &part[..]), pos);
        let result = self.write_from(cursor).await;
        (result, parts)
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.inner.fdatasync().await.map_err(os_error)?;
        stats::record_sync();
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len).await.map_err(os_error)
    }

    async fn len(&self) -> io::Result<u64> {
        Ok(self.raw_file().metadata()?.len())
    }

    async fn close(self) -> io::Result<()> {
        self.inner.close().await.map_err(os_error)
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
