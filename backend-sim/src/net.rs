//! In-memory TCP. A connection is two one-way pipes; a write is delivered after a seeded delay
//! (in order: never before an earlier write on the same pipe), a write may reset the
//! connection (both ends then fail), and a dropped end reads as end of stream on the other
//! side. Listeners are matched by port; several may share one (`SO_REUSEPORT`), and a connect
//! picks among them by seed. A crash drops every connection and listener.
//!
//! The listeners live in this module's own thread-local ([`with_net`]), beside the world
//! rather than in it: the streams read the world (clock, timers, fault plan), so the world
//! holding the network too would make the two modules import each other. Whoever crashes or
//! replaces the world calls [`reset`] with it.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use minikafka_core::backend::BackendListener;
use minikafka_core::clock::MonoTime;

use crate::world::{try_with_world, with_world};

thread_local! {
    static NET: RefCell<Net> = RefCell::new(Net::default());
}

/// Runs `f` on this thread's network.
pub(crate) fn with_net<R>(f: impl FnOnce(&mut Net) -> R) -> R {
    NET.with(|n| f(&mut n.borrow_mut()))
}

/// Like [`with_net`], but `None` instead of a panic when the network is being torn down or
/// already borrowed (drops at thread exit).
fn try_with_net<R>(f: impl FnOnce(&mut Net) -> R) -> Option<R> {
    NET.try_with(|n| n.try_borrow_mut().ok().map(|mut n| f(&mut n)))
        .ok()
        .flatten()
}

/// Forgets every listener and the connections queued on them (a crash, or a fresh world).
pub(crate) fn reset() {
    let old = NET.with(|n| std::mem::take(&mut *n.borrow_mut()));
    drop(old);
}

/// One direction of a connection.
#[derive(Default)]
struct Pipe {
    /// Bytes that arrived and were not read yet.
    arrived: VecDeque<u8>,
    /// Writes on their way, with their arrival times (non-decreasing).
    in_transit: VecDeque<(MonoTime, Vec<u8>)>,
    /// The writer shut down (or dropped) its end: end of stream once drained.
    closed: bool,
    /// The reader dropped its end: writes fail.
    reader_gone: bool,
    /// The connection was reset: everything fails.
    reset: bool,
    reader: Option<Waker>,
}

impl Pipe {
    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

/// One end of a simulated TCP connection.
pub struct SimStream {
    rx: Rc<RefCell<Pipe>>,
    tx: Rc<RefCell<Pipe>>,
}

impl std::fmt::Debug for SimStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimStream")
    }
}

fn reset_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset (simulated)",
    )
}

impl SimStream {
    fn pair() -> (SimStream, SimStream) {
        let (a, b) = (
            Rc::<RefCell<Pipe>>::default(),
            Rc::<RefCell<Pipe>>::default(),
        );
        (
            SimStream {
                rx: Rc::clone(&a),
                tx: Rc::clone(&b),
            },
            SimStream { rx: b, tx: a },
        )
    }

    fn reset(&self) {
        for pipe in [&self.rx, &self.tx] {
            let mut p = pipe.borrow_mut();
            p.reset = true;
            p.wake_reader();
        }
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        let mut tx = self.tx.borrow_mut();
        tx.closed = true;
        tx.wake_reader();
        drop(tx);
        self.rx.borrow_mut().reader_gone = true;
    }
}

impl futures_io::AsyncRead for SimStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut rx = self.rx.borrow_mut();
        if rx.reset {
            return Poll::Ready(Err(reset_error()));
        }
        let now = with_world(|w| w.now);
        while rx.in_transit.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, bytes)) = rx.in_transit.pop_front() {
                rx.arrived.extend(bytes);
            }
        }
        if !rx.arrived.is_empty() {
            let n = buf.len().min(rx.arrived.len());
            for (slot, byte) in buf.iter_mut().zip(rx.arrived.drain(..n)) {
                *slot = byte;
            }
            return Poll::Ready(Ok(n));
        }
        if buf.is_empty() || (rx.closed && rx.in_transit.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        rx.reader = Some(cx.waker().clone());
        if let Some((at, _)) = rx.in_transit.front() {
            let at = *at;
            with_world(|w| w.add_timer(at, cx.waker().clone()));
        }
        Poll::Pending
    }
}

/// The default (zeroing) uninit read: a simulated stream's bytes are copied from memory.
impl minikafka_core::backend::ReadUninit for SimStream {}

impl futures_io::AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        {
            let tx = self.tx.borrow();
            if tx.reset {
                return Poll::Ready(Err(reset_error()));
            }
            if tx.reader_gone {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "peer closed (simulated)",
                )));
            }
        }
        let (reset, at) = with_world(|w| {
            let reset = w.fault(w.config.faults.connection_reset);
            if reset {
                w.stats.connection_resets += 1;
            }
            let max = w.config.net_delay_max.as_nanos() as u64;
            let delay = std::time::Duration::from_nanos(w.rng.below(max + 1));
            (reset, w.now + delay)
        });
        if reset {
            self.reset();
            return Poll::Ready(Err(reset_error()));
        }
        let mut tx = self.tx.borrow_mut();
        let at = tx.in_transit.back().map_or(at, |(last, _)| at.max(*last));
        tx.in_transit.push_back((at, buf.to_vec()));
        tx.wake_reader();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.tx.borrow().reset {
            return Poll::Ready(Err(reset_error()));
        }
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut tx = self.tx.borrow_mut();
        tx.closed = true;
        tx.wake_reader();
        Poll::Ready(Ok(()))
    }
}

struct ListenerState {
    addr: SocketAddr,
    backlog: VecDeque<(SimStream, SocketAddr)>,
    waker: Option<Waker>,
}

/// The network: listeners by id, and the next free port and client address.
pub(crate) struct Net {
    listeners: BTreeMap<u64, ListenerState>,
    next_id: u64,
    next_port: u16,
}

impl Default for Net {
    fn default() -> Self {
        Net {
            listeners: BTreeMap::new(),
            next_id: 0,
            next_port: 40_000,
        }
    }
}

impl Net {
    pub(crate) fn listen(&mut self, mut addr: SocketAddr) -> u64 {
        if addr.port() == 0 {
            addr.set_port(self.next_port);
            self.next_port = self.next_port.wrapping_add(1).max(40_000);
        }
        self.next_id += 1;
        self.listeners.insert(
            self.next_id,
            ListenerState {
                addr,
                backlog: VecDeque::new(),
                waker: None,
            },
        );
        self.next_id
    }

    /// The ids of the listeners on `addr`'s port.
    pub(crate) fn listeners_on(&self, addr: SocketAddr) -> Vec<u64> {
        self.listeners
            .iter()
            .filter(|(_, l)| l.addr.port() == addr.port())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Queues a new connection on listener `id`; the client's end.
    pub(crate) fn connect(&mut self, id: u64) -> Option<SimStream> {
        let peer = SocketAddr::from(([127, 0, 0, 1], self.next_port));
        self.next_port = self.next_port.wrapping_add(1).max(40_000);
        let listener = self.listeners.get_mut(&id)?;
        let (client, server) = SimStream::pair();
        listener.backlog.push_back((server, peer));
        if let Some(w) = listener.waker.take() {
            w.wake();
        }
        Some(client)
    }
}

/// A simulated listening socket.
pub struct SimListener {
    pub(crate) id: u64,
    pub(crate) addr: SocketAddr,
    pub(crate) epoch: u64,
}

impl std::fmt::Debug for SimListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimListener({})", self.addr)
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        let (id, epoch) = (self.id, self.epoch);
        if try_with_world(|w| w.epoch == epoch) == Some(true) {
            let backlog = try_with_net(|n| n.listeners.remove(&id));
            drop(backlog);
        }
    }
}

impl BackendListener for SimListener {
    type Stream = SimStream;

    async fn accept(&self) -> io::Result<(SimStream, SocketAddr)> {
        std::future::poll_fn(|cx| {
            if with_world(|w| w.epoch) != self.epoch {
                return Poll::Ready(Err(io::Error::other("listener died in a crash")));
            }
            with_net(|n| match n.listeners.get_mut(&self.id) {
                Some(l) => match l.backlog.pop_front() {
                    Some(accepted) => Poll::Ready(Ok(accepted)),
                    None => {
                        l.waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
                None => Poll::Ready(Err(io::Error::other("listener closed"))),
            })
        })
        .await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

impl Net {
    /// The port listener `id` is bound to.
    pub(crate) fn port_of(&self, id: u64) -> Option<u16> {
        self.listeners.get(&id).map(|l| l.addr.port())
    }
}
