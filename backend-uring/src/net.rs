//! TCP for a uring shard: glommio's listener and stream (wrapped in [`UringStream`] for
//! vectored writes).
//!
//! Contract:
//! - [`UringListener`] binds with `SO_REUSEPORT` (glommio always sets it), so every shard binds
//!   the same address and the kernel spreads connections over shards.
//! - Every stream, accepted or connected, has `TCP_NODELAY` set: Kafka responses are small
//!   and latency-bound.
//! - Never: moves a stream to another shard (`accept` binds it to the accepting executor).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

use glommio::net::{TcpListener, TcpStream};
use minikafka_core::backend::BackendListener;

use crate::error::os_error;
use crate::stream::UringStream;

/// A listening socket on one shard.
#[derive(Debug)]
pub struct UringListener {
    inner: TcpListener,
}

impl UringListener {
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<UringListener> {
        let inner = TcpListener::bind(addr).map_err(os_error)?;
        Ok(UringListener { inner })
    }
}

impl BackendListener for UringListener {
    type Stream = UringStream;

    async fn accept(&self) -> io::Result<(UringStream, SocketAddr)> {
        let stream = self.inner.accept().await.map_err(os_error)?;
        stream.set_nodelay(true).map_err(os_error)?;
        let peer = stream.peer_addr().map_err(os_error)?;
        Ok((UringStream::new(stream), peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(os_error)
    }

    fn socket(stream: &UringStream) -> Option<BorrowedFd<'_>> {
        // SAFETY: the descriptor belongs to `stream`, which outlives the borrow.
        Some(unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) })
    }
}

/// Connects to `addr` and sets `TCP_NODELAY`.
pub(crate) async fn connect(addr: SocketAddr) -> io::Result<UringStream> {
    let stream = TcpStream::connect(addr).await.map_err(os_error)?;
    stream.set_nodelay(true).map_err(os_error)?;
    Ok(UringStream::new(stream))
}
