//! A connection's mute for quota throttling (KIP-219): the answer that carries a throttle
//! time goes out at once, then the broker reads nothing more from that connection until the
//! throttle time has passed.
//!
//! Contract:
//! - One [`ThrottleGate`] per connection, shared (`Rc`, shard-local) by the connection's read
//!   loop and the handlers of its requests (through the
//!   [`RequestContext`](super::session::RequestContext)).
//! - A handler that answers with a throttle time calls [`ThrottleGate::mute_for`]; the read
//!   loop awaits [`ThrottleGate::wait_open`] before it takes the next request from its buffer
//!   and before it reads the socket again. A later mute never shortens an earlier one.
//! - The wait is bounded: a throttle time is at most the quota window (I81), and the read
//!   loop's own stop and writer-done signals still end it (I98).
//! - Never: reads a clock (the time is the backend's), or holds the borrow across an await.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use minikafka_core::backend::Backend;
use minikafka_core::clock::MonoTime;

/// Until when a connection is muted (see the module documentation). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ThrottleGate {
    until: Rc<Cell<MonoTime>>,
}

impl ThrottleGate {
    /// A gate that is open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mutes the connection for `throttle_ms` from `now` (no change for 0, or when already
    /// muted for longer).
    pub fn mute_for(&self, now: MonoTime, throttle_ms: u64) {
        if throttle_ms == 0 {
            return;
        }
        let until = now.saturating_add(Duration::from_millis(throttle_ms));
        if until > self.until.get() {
            self.until.set(until);
        }
    }

    /// Whether the connection is muted at `now`.
    pub fn is_muted(&self, now: MonoTime) -> bool {
        now < self.until.get()
    }

    /// Waits until the connection is no longer muted (at once when it is not).
    pub async fn wait_open<B: Backend>(&self, backend: &B) {
        // A handler may extend the mute while we sleep: look again after each wait.
        while self.is_muted(backend.now()) {
            backend.sleep_until(self.until.get()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_mute_never_shortens_an_earlier_one() {
        let gate = ThrottleGate::new();
        let t0 = MonoTime(Duration::from_secs(5));
        assert!(!gate.is_muted(t0));
        gate.mute_for(t0, 0);
        assert!(!gate.is_muted(t0));
        gate.mute_for(t0, 1_000);
        assert!(gate.is_muted(t0 + Duration::from_millis(999)));
        assert!(!gate.is_muted(t0 + Duration::from_millis(1_000)));
        gate.mute_for(t0, 10);
        assert!(gate.is_muted(t0 + Duration::from_millis(999)));
        let clone = gate.clone();
        clone.mute_for(t0, 2_000);
        assert!(gate.is_muted(t0 + Duration::from_millis(1_500)));
    }
}
