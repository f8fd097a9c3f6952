//! A monoio shard's TCP stream as `futures-io` [`AsyncRead`]/[`AsyncWrite`].
//!
//! Contract:
//! - Wraps monoio's poll-io stream (`TcpStreamPoll`): readiness comes from an epoll instance
//!   registered with the shard's io_uring, then `recv`, `send` or `writev` runs on the shard's
//!   thread from the caller's own buffers, so no byte is copied through an intermediate buffer
//!   (monoio's completion-mode streams want owned buffers, which `futures-io`'s borrowed
//!   slices are not).
//! - `poll_write_vectored` is one `writev` of all the slices (a Fetch response in parts costs
//!   one system call, not one a part); `poll_flush` has nothing to flush; `poll_close` shuts
//!   down the write half (`shutdown(SHUT_WR)`), so the peer reads end of stream.
//! - `poll_read_uninit` (I199) is the same `recv` into the caller's uninitialised room
//!   (tokio's `ReadBuf::uninit`), so a connection's room for a frame is never zeroed.
//! - Never: blocks the shard's thread, or writes slices out of order.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use minikafka_core::backend::ReadUninit;
use monoio::net::tcp::stream_poll::TcpStreamPoll;

/// A connected TCP stream on a monoio shard.
#[derive(Debug)]
pub struct MonoioStream {
    inner: TcpStreamPoll,
}

impl MonoioStream {
    pub(crate) fn new(inner: TcpStreamPoll) -> MonoioStream {
        MonoioStream { inner }
    }

    /// Whether `TCP_NODELAY` is set (it always is: see [`crate::net`]).
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.nodelay()
    }
}

impl AsRawFd for MonoioStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl AsyncRead for MonoioStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.recv(cx, tokio::io::ReadBuf::new(buf))
    }
}

impl MonoioStream {
    /// One `recv` into `read_buf`'s unfilled part; the count it filled.
    fn recv(
        &mut self,
        cx: &mut Context<'_>,
        mut read_buf: tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        ready!(tokio::io::AsyncRead::poll_read(
            Pin::new(&mut self.inner),
            cx,
            &mut read_buf
        ))?;
        Poll::Ready(Ok(read_buf.filled().len()))
    }
}

impl ReadUninit for MonoioStream {
    /// One `recv` straight into `buf` (I199): nothing is zeroed first.
    fn poll_read_uninit(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        // SAFETY (of the caller's `set_len`, I199): `ReadBuf::uninit` takes the room as it
        // is, and a `ReadBuf` only ever counts as filled bytes that were initialised
        // (`assume_init` is the reader's promise). monoio's poll-io `recv`s into the unfilled
        // part's raw pointer, never reading it, then marks the `n` bytes the kernel wrote as
        // initialised and filled; `filled()` is at most the room's length by construction.
        self.recv(cx, tokio::io::ReadBuf::uninit(buf))
    }
}

impl AsyncWrite for MonoioStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        tokio::io::AsyncWrite::poll_write(Pin::new(&mut self.inner), cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Linux's IOV_MAX: `writev` refuses more slices (EINVAL); the caller writes the rest.
        let bufs = &bufs[..bufs.len().min(minikafka_core::backend::MAX_WRITE_PARTS)];
        tokio::io::AsyncWrite::poll_write_vectored(Pin::new(&mut self.inner), cx, bufs)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_flush(Pin::new(&mut self.inner), cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        tokio::io::AsyncWrite::poll_shutdown(Pin::new(&mut self.inner), cx)
    }
}
