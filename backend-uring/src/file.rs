//! [`UringFile`]: a [`BackendFile`] over glommio's `BufferedFile`.
//!
//! Contract:
//! - Reads, writes, `fdatasync` and close are io_uring submissions (counted in [`crate::stats`]).
//!   `truncate` runs `ftruncate` on glommio's blocking thread (glommio 0.9 has no io_uring
//!   truncate). `len` is a direct `fstat(2)` on the descriptor: it never blocks on the disk
//!   for an open inode, and unlike glommio's path-based `statx` it stays right after the file
//!   is renamed or unlinked.
//! - Buffered I/O on purpose: the page cache serves caught-up consumers (see docs/DESIGN.md).
//!   glommio's `DmaFile` is also unusable here: on this machine's disk its polled reads fail
//!   with `EOPNOTSUPP`.
//! - Never: allocates more than [`READ_CHUNK_BYTES`] ahead of the bytes actually read, so a
//!   large `len` at the end of a file costs only what the file holds.

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::unix::io::{AsRawFd, FromRawFd};

use glommio::io::BufferedFile;
use minikafka_core::backend::BackendFile;

use crate::error::os_error;
use crate::stats;

/// Largest single read submitted to the ring; longer reads are split.
pub const READ_CHUNK_BYTES: usize = 1 << 20;

/// An open file on a uring shard. Must be used on the shard that opened it.
#[derive(Debug)]
pub struct UringFile {
    inner: BufferedFile,
}

impl UringFile {
    pub(crate) fn new(inner: BufferedFile) -> UringFile {
        UringFile { inner }
    }

    async fn read_into(&self, buf: &mut Vec<u8>, pos: u64, len: usize) -> io::Result<()> {
        while buf.len() < len {
            let want_bytes = (len - buf.len()).min(READ_CHUNK_BYTES);
            let at = pos
                .checked_add(buf.len() as u64)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past u64"))?;
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

    async fn write_from(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let mut done_bytes = 0usize;
        while done_bytes < buf.len() {
            let at = pos
                .checked_add(done_bytes as u64)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "write past u64"))?;
            // glommio 0.9's `BufferedFile::write_at` consumes its `Vec` and never returns it, so
            // the caller's buffer is copied once to honour the trait's "handed back" contract.
            let chunk = buf[done_bytes..].to_vec();
            let wrote_bytes = self.inner.write_at(chunk, at).await.map_err(os_error)?;
            stats::record_write();
            if wrote_bytes == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write_at accepted zero bytes",
                ));
            }
            done_bytes += wrote_bytes;
        }
        Ok(())
    }
}

impl BackendFile for UringFile {
    async fn read_at(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        buf.clear();
        let result = self.read_into(&mut buf, pos, len).await;
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        let result = self.write_from(&buf, pos).await;
        (result, buf)
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
        // SAFETY: the descriptor is owned by `self.inner`, open for the whole borrow of
        // `self`, and `ManuallyDrop` keeps this temporary `File` from closing it.
        let file = ManuallyDrop::new(unsafe { File::from_raw_fd(self.inner.as_raw_fd()) });
        Ok(file.metadata()?.len())
    }

    async fn close(self) -> io::Result<()> {
        self.inner.close().await.map_err(os_error)
    }
}
