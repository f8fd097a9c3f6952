//! A count of bytes a connection holds against a limit: the send side's computed, unsent
//! responses ([`super::send_queue`]) and the read side's requests read but not answered
//! ([`super::connection::MAX_UNANSWERED_REQUEST_BYTES`]). The connection also counts its
//! handlers of requests other than Produce in one, a unit per request
//! ([`super::connection::MAX_IN_FLIGHT`]).
//!
//! Contract:
//! - [`ByteBudget::add`] and [`ByteBudget::release`] move the count; a task that must not take
//!   more while the count is at or above the limit awaits [`ByteBudget::wait_below_limit`].
//! - Never: refuses bytes (the holder decides what to stop doing), or loses a wakeup (the
//!   count and the doorbell live on one shard thread, and the waiter re-checks the count after
//!   every ring).

use std::cell::Cell;

/// Bytes a connection holds against a limit, with a doorbell for a task waiting until they
/// fall below it.
#[derive(Debug)]
pub struct ByteBudget {
    bytes: Cell<usize>,
    limit: usize,
    /// Rung by the writer when the count falls below the limit; capacity one, so rings
    /// coalesce.
    doorbell_tx: async_channel::Sender<()>,
    doorbell_rx: async_channel::Receiver<()>,
}

impl ByteBudget {
    /// An empty count with the given limit.
    pub fn new(limit: usize) -> Self {
        let (doorbell_tx, doorbell_rx) = async_channel::bounded(1);
        ByteBudget {
            bytes: Cell::new(0),
            limit,
            doorbell_tx,
            doorbell_rx,
        }
    }

    /// `n` more bytes are held.
    pub fn add(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_add(n));
    }

    /// `n` of the held bytes are gone (sent, answered, dropped).
    pub fn release(&self, n: usize) {
        self.bytes.set(self.bytes.get().saturating_sub(n));
        if self.bytes.get() < self.limit {
            let _ = self.doorbell_tx.try_send(());
        }
    }

    /// Bytes held now.
    pub fn get(&self) -> usize {
        self.bytes.get()
    }

    /// Whether the holder must wait before taking more.
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn waits_only_while_at_or_over_the_limit() {
        let budget = ByteBudget::new(100);
        assert!(budget.wait_below_limit().now_or_never().is_some());
        budget.add(60);
        budget.add(40);
        assert!(budget.over_limit());
        assert!(budget.wait_below_limit().now_or_never().is_none());
        budget.release(1);
        assert_eq!(budget.get(), 99);
        assert!(budget.wait_below_limit().now_or_never().is_some());
    }

    #[test]
    fn a_stale_ring_does_not_release_a_reader_over_the_limit() {
        let budget = ByteBudget::new(10);
        budget.add(5);
        budget.release(5); // rings: below the limit
        budget.add(20);
        assert!(budget.wait_below_limit().now_or_never().is_none());
        budget.release(20);
        assert!(budget.wait_below_limit().now_or_never().is_some());
    }

    #[test]
    fn releasing_more_than_held_saturates_at_zero() {
        let budget = ByteBudget::new(10);
        budget.add(3);
        budget.release(7);
        assert_eq!(budget.get(), 0);
    }
}
