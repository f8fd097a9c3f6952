//! A uring shard's TCP stream: glommio's, plus vectored writes.
//!
//! Contract:
//! - Reads, writes, flush and close are glommio's `TcpStream`'s, unchanged.
//! - `poll_write_vectored` sends all the given slices (at most `IOV_MAX`) with one
//!   non-blocking `sendmsg` on the shard's thread, as glommio's own `poll_write` starts with a
//!   non-blocking `send`; when the socket is full it falls back to glommio's `poll_write` of
//!   the first non-empty slice, which waits for the socket to drain. glommio 0.9 has no
//!   vectored write (the default writes one slice per call), so without this a response sent
//!   in parts (a Fetch response whose batches are the log's bytes) cost a system call a part.
//! - Never: blocks the shard's thread, or writes slices out of order.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use glommio::net::TcpStream;

use crate::error::os_error;

/// Most slices one `sendmsg` takes (Linux's `IOV_MAX`).
const MAX_SLICES: usize = 1024;

/// A connected TCP stream on a uring shard.
#[derive(Debug)]
pub struct UringStream {
    inner: TcpStream,
}

impl UringStream {
    pub(crate) fn new(inner: TcpStream) -> UringStream {
        UringStream { inner }
    }

    /// Whether `TCP_NODELAY` is set (it always is: see `net`).
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay().map_err(os_error)
    }

    /// One non-blocking `sendmsg` of `bufs`: bytes sent, or the OS error (`WouldBlock` when
    /// the socket is full).
    fn send_vectored_now(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let count = bufs.len().min(MAX_SLICES);
        // SAFETY: an all-zero `msghdr` is valid (no name, no control data); the slice array
        // is `IoSlice`s, which are ABI-compatible with `iovec`, and outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = count as _;
        // SAFETY: the descriptor is the stream's own, open while `self` lives; `msg` points at
        // `count` valid slices.
        let sent = unsafe {
            libc::sendmsg(
                self.inner.as_raw_fd(),
                &msg,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }
}

impl std::os::fd::AsRawFd for UringStream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsyncRead for UringStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for UringStream {
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
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs.iter().position(|b| !b.is_empty());
        let Some(first) = first else {
            return Poll::Ready(Ok(0));
        };
        if bufs.len() - first > 1 {
            match self.send_vectored_now(&bufs[first..]) {
                Ok(sent) => return Poll::Ready(Ok(sent)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        // One slice, or a full socket: glommio's write waits for room.
        Pin::new(&mut self.inner).poll_write(cx, &bufs[first])
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}
