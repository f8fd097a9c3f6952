//! What one connection may hold unsent: send-side back-pressure for clients that read slowly
//! or never.
//!
//! Contract:
//! - [`UnsentBytes`] counts the bytes of a connection's responses that are computed but not
//!   yet accepted by the kernel. While the count is at or above its limit the connection's
//!   reader dispatches no new request ([`UnsentBytes::wait_below_limit`]), as Kafka mutes a
//!   channel whose response is unsent; requests already dispatched (at most
//!   `MAX_IN_FLIGHT`) still complete. So a connection holds at most the limit plus its
//!   in-flight responses, whatever its client does (I10).
//! - [`set_send_buffer`] sets `SO_SNDBUF` of an accepted stream (`socket.send.buffer.bytes`),
//!   once here for every backend: left to Linux, the send buffer auto-tunes to megabytes per
//!   connection, all of which a client that never reads gets the broker to compute.
//! - Never: blocks the writer; loses a wakeup (the count and the doorbell live on one shard
//!   thread, and the reader re-checks the count after every ring).

use std::cell::Cell;

/// Responses computed and not yet sent beyond which a connection's reader stops dispatching
/// requests. One large Fetch answer reaches it alone: the reader then waits for the client to
/// read, as Kafka's broker does after every request.
pub const MAX_UNSENT_BYTES: usize = 1 << 20;

/// Bytes of a connection's responses computed but not yet written to its socket.
#[derive(Debug)]
pub struct UnsentBytes {
    bytes: Cell<usize>,
    limit: usize,
    /// Rung by the writer when the count falls below the limit; capacity one, so rings
    /// coalesce.
    doorbell_tx: async_channel::Sender<()>,
    doorbell_rx: async_channel::Receiver<()>,
}

impl UnsentBytes {
    /// An empty count with the given limit.
    pub fn new(limit: usize) -> Self {
        let (doorbell_tx, doorbell_rx) = async_channel::bounded(1);
        UnsentBytes {
            bytes: Cell::new(0),
            limit,
            doorbell_tx,
            doorbell_rx,
        }
    }

    /// A response of `n` bytes is ready to be written.
    pub fn queued(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_add(n));
    }

    /// The kernel accepted `n` of the queued bytes (or the writer dropped them).
    pub fn sent(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(n));
        if self.bytes.get() < self.limit {
            let _ = self.doorbell_tx.try_send(());
        }
    }

    /// Bytes queued and not yet sent.
    pub fn get(&self) -> usize {
        self.bytes.get()
    }

    /// Whether the reader must stop dispatching requests.
    pub fn over_limit(&self) -> bool {
        self.bytes.get() >= self.limit
    }

    /// Returns once the count is below the limit (at once if it already is).
    pub async fn wait_below_limit(&self) {
        while self.over_limit() {
            // A ring from before the count last rose is stale: drop it, then re-check.
            while self.doorbell_rx.try_recv().is_ok() {}
            if !self.over_limit() {
                return;
            }
            // The sender lives in `self`, so the channel never closes while we wait.
            let _ = self.doorbell_rx.recv().await;
        }
    }
}

/// Sets `SO_SNDBUF` of `socket` to `bytes` (Linux doubles it for its own bookkeeping). A
/// failure is logged and the OS default kept: the connection still works, only less bounded.
#[cfg(unix)]
pub fn set_send_buffer(socket: std::os::fd::BorrowedFd<'_>, bytes: usize) {
    if let Err(e) = socket2::SockRef::from(&socket).set_send_buffer_size(bytes) {
        tracing::warn!(bytes, reason = %e, "could not set socket.send.buffer.bytes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn waits_only_while_at_or_over_the_limit() {
        let unsent = UnsentBytes::new(100);
        assert!(unsent.wait_below_limit().now_or_never().is_some());
        unsent.queued(60);
        unsent.queued(40);
        assert!(unsent.over_limit());
        assert!(unsent.wait_below_limit().now_or_never().is_none());
        unsent.sent(1);
        assert_eq!(unsent.get(), 99);
        assert!(unsent.wait_below_limit().now_or_never().is_some());
    }

    #[test]
    fn a_stale_ring_does_not_release_a_reader_over_the_limit() {
        let unsent = UnsentBytes::new(10);
        unsent.queued(5);
        unsent.sent(5); // rings: below the limit
        unsent.queued(20);
        assert!(unsent.wait_below_limit().now_or_never().is_none());
        unsent.sent(20);
        assert!(unsent.wait_below_limit().now_or_never().is_some());
    }

    #[test]
    fn sending_more_than_queued_saturates_at_zero() {
        let unsent = UnsentBytes::new(10);
        unsent.queued(3);
        unsent.sent(7);
        assert_eq!(unsent.get(), 0);
    }
}
