//! TCP for a monoio shard: monoio's listener (io_uring `ACCEPT`) and its poll-io streams.
//!
//! Contract:
//! - [`MonoioListener`] binds with `SO_REUSEPORT` (and `SO_REUSEADDR`), so every shard binds
//!   the same address and the kernel spreads connections over shards.
//! - Every stream, accepted or connected, has `TCP_NODELAY` set (Kafka responses are small and
//!   latency-bound) and is switched to monoio's poll-io mode, which [`stream`] maps onto the
//!   `futures-io` traits the broker drives.
//! - Never: moves a stream to another shard (each is registered with its shard's ring).

pub mod stream;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

use minikafka_core::backend::BackendListener;
use monoio::net::{ListenerOpts, TcpListener, TcpStream};

use crate::net::stream::MonoioStream;

/// A listening socket on one shard.
pub struct MonoioListener {
    inner: TcpListener,
}

impl std::fmt::Debug for MonoioListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonoioListener")
            .field("local_addr", &self.inner.local_addr().ok())
            .finish()
    }
}

impl MonoioListener {
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<MonoioListener> {
        let opts = ListenerOpts::new().reuse_port(true).reuse_addr(true);
        let inner = TcpListener::bind_with_config(addr, &opts)?;
        Ok(MonoioListener { inner })
    }
}

impl BackendListener for MonoioListener {
    type Stream = MonoioStream;

    async fn accept(&self) -> io::Result<(MonoioStream, SocketAddr)> {
        let (stream, peer) = self.inner.accept().await?;
        Ok((into_backend_stream(stream)?, peer))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn socket(stream: &MonoioStream) -> Option<BorrowedFd<'_>> {
        // SAFETY: the descriptor belongs to `stream`, which outlives the borrow.
        Some(unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) })
    }
}

/// Sets `TCP_NODELAY` and switches `stream` to poll-io mode.
fn into_backend_stream(stream: TcpStream) -> io::Result<MonoioStream> {
    stream.set_nodelay(true)?;
    let poll = stream.try_into_poll_io().map_err(|(err, _stream)| err)?;
    Ok(MonoioStream::new(poll))
}

/// Connects to `addr` (io_uring `CONNECT`) and sets `TCP_NODELAY`.
pub(crate) async fn connect(addr: SocketAddr) -> io::Result<MonoioStream> {
    into_backend_stream(TcpStream::connect_addr(addr).await?)
}
