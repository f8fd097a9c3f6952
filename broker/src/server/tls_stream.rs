//! An established TLS connection's stream (after [`super::tls::accept`]'s handshake): rustls's
//! `ServerConnection` driven over the backend's stream with reads sized for Kafka's large
//! requests (I188).
//!
//! Why not futures-rustls's stream after the handshake: it lets rustls read the socket, and
//! rustls asks for at most one record's room (16 KiB, growing in 4 KiB steps) per `recv` and
//! stops at the first record that yields plaintext, so a 100 KB Produce request cost 7 to 13
//! `recv`s and as many wake-ups of the reader, against 2 on a PLAINTEXT listener
//! (docs/perf-log/2026-12-06-tls-cost.md).
//!
//! Contract (I188):
//! - Reads: one `recv` of up to [`TLS_READ_BYTES`] into this stream's buffer, then as many
//!   whole records as that holds are handed to rustls from memory and decrypted, and their
//!   plaintext copied into the caller's buffer, until it is full or the bytes read hold no
//!   further whole record; a socket read happens only when nothing decrypted is left to give.
//!   Bytes beyond the caller's room stay in rustls (bounded by its 16 KiB-per-record buffers)
//!   or in this buffer; nothing is dropped or reordered.
//! - Writes: plaintext is encrypted into rustls's outgoing buffer (bounded by rustls's 64 KiB
//!   limit: a full buffer accepts nothing until the socket takes some), then written with
//!   vectored writes, one `writev` for every record queued; `poll_flush` returns once the
//!   socket has taken every record; `poll_close` sends `close_notify` once, then closes the
//!   write half.
//! - The end of the socket without `close_notify` is an error (truncation), as rustls reports
//!   it; a record that fails to decrypt is an error (and rustls's alert is sent, best effort).
//! - Never: panics on anything the peer sent, or reads the socket while decrypted bytes wait.

use std::io::{self, IoSlice, Read as _, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{AsyncRead, AsyncWrite};
use minikafka_core::backend::ReadUninit;
use rustls::ServerConnection;

/// Bytes asked of the socket per read (I188): as [`super::connection`]'s plaintext reads.
pub const TLS_READ_BYTES: usize = 64 * 1024;

/// An established server-side TLS stream over `S`.
pub struct TlsStream<S> {
    io: S,
    session: ServerConnection,
    /// TLS bytes read from the socket and not yet given to rustls: `incoming[start..end]`.
    /// Allocated for a socket read and released when a read finds the socket empty with
    /// nothing kept, so an idle connection holds none of it (I189).
    incoming: Vec<u8>,
    start: usize,
    end: usize,
    /// Whether `close_notify` was queued.
    closing: bool,
}

impl<S> TlsStream<S> {
    /// Continues the connection `session` established over `io`.
    pub fn new(io: S, session: ServerConnection) -> TlsStream<S> {
        TlsStream {
            io,
            session,
            incoming: Vec::new(),
            start: 0,
            end: 0,
            closing: false,
        }
    }

    /// The stream and the TLS session.
    pub fn get_ref(&self) -> (&S, &ServerConnection) {
        (&self.io, &self.session)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream<S> {
    /// Gives rustls what it will take of the bytes read and decrypts the whole records among
    /// them; `Ok(false)` when it took nothing.
    fn feed(&mut self, cx: &mut Context<'_>) -> io::Result<bool> {
        if self.start == self.end {
            return Ok(false);
        }
        let mut pending = &self.incoming[self.start..self.end];
        // Errs only on a record larger than TLS allows (or plaintext not read first, which
        // `poll_read` always does).
        let taken = self.session.read_tls(&mut pending)?;
        self.start += taken;
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        self.process(cx)?;
        Ok(taken > 0)
    }

    /// Decrypts the whole records rustls holds; a failure sends its alert (best effort).
    fn process(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        match self.session.process_new_packets() {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = self.write_tls(cx);
                Err(io::Error::new(io::ErrorKind::InvalidData, e))
            }
        }
    }

    /// Writes what rustls has queued; `Pending` once the socket takes no more.
    fn write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.session.wants_write() {
            let mut socket = SocketWriter {
                io: &mut self.io,
                cx: &mut *cx,
            };
            match self.session.write_tls(&mut socket) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut filled = 0;
        loop {
            match this.session.reader().read(&mut buf[filled..]) {
                // `close_notify`: the end of the stream once what came before is given.
                Ok(0) => return Poll::Ready(Ok(filled)),
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Given by the next call (rustls keeps it), after the bytes before it.
                Err(_) if filled > 0 => return Poll::Ready(Ok(filled)),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if filled == buf.len() {
                return Poll::Ready(Ok(filled));
            }
            match this.feed(cx) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(_) if filled > 0 => return Poll::Ready(Ok(filled)),
                Err(e) => return Poll::Ready(Err(e)),
            }
            if filled > 0 {
                return Poll::Ready(Ok(filled));
            }
            // Nothing decrypted and nothing left to decrypt (`feed` emptied the buffer): read
            // the socket.
            if this.incoming.is_empty() {
                this.incoming = vec![0; TLS_READ_BYTES];
            }
            let room = &mut this.incoming[this.end..];
            match Pin::new(&mut this.io).poll_read(cx, room) {
                Poll::Pending => {
                    if this.end == 0 {
                        // Idle: hold no read buffer while waiting (I189).
                        this.incoming = Vec::new();
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Ok(0)) => {
                    // Tell rustls; its reader then says whether `close_notify` came first.
                    if let Err(e) = this.session.read_tls(&mut io::empty()) {
                        return Poll::Ready(Err(e));
                    }
                    if let Err(e) = this.process(cx) {
                        return Poll::Ready(Err(e));
                    }
                    return match this.session.reader().read(buf) {
                        Ok(n) => Poll::Ready(Ok(n)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()))
                        }
                        Err(e) => Poll::Ready(Err(e)),
                    };
                }
                Poll::Ready(Ok(n)) => this.end += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// The default (zeroing) uninit read (I199): plaintext comes out of rustls's reader, which
/// writes only into initialised memory on stable Rust.
impl<S: AsyncRead + AsyncWrite + Unpin> ReadUninit for TlsStream<S> {}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if bufs.iter().all(|b| b.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        loop {
            let accepted = this.session.writer().write_vectored(bufs)?;
            let blocked = match this.write_tls(cx) {
                Poll::Ready(Ok(())) => false,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => true,
            };
            match (accepted, blocked) {
                (0, true) => return Poll::Pending,
                // rustls's buffer was full and the socket took it all: try again.
                (0, false) => continue,
                (n, _) => return Poll::Ready(Ok(n)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.write_tls(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            this.closing = true;
            this.session.send_close_notify();
        }
        std::task::ready!(this.write_tls(cx))?;
        Pin::new(&mut this.io).poll_close(cx)
    }
}

/// The socket as rustls's `Write`, `WouldBlock` where the stream is not ready.
struct SocketWriter<'a, 'b, S> {
    io: &'a mut S,
    cx: &'a mut Context<'b>,
}

impl<S: AsyncWrite + Unpin> io::Write for SocketWriter<'_, '_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Pin::new(&mut *self.io).poll_flush(self.cx) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}
