//! The little the client needs from an async runtime: a timer.
//!
//! Contract: the library never spawns and never sleeps on its own. The producer's linger timer
//! comes from a [`Runtime`] the caller passes in, and the producer's driver is a future the
//! caller spawns on its executor (`smol::spawn`, a backend's `spawn_local`, …). No `Send` bound:
//! a thread-per-core runtime's futures (monoio's) are `!Send`; a driver built from `Send` parts is itself `Send`.

use std::future::Future;
use std::time::Duration;

/// A source of timers.
pub trait Runtime: 'static {
    /// The future [`Runtime::sleep`] returns.
    type Sleep: Future<Output = ()>;

    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Self::Sleep;
}

/// [`Runtime`] on smol's timers (async-io's reactor).
#[cfg(feature = "smol")]
#[derive(Clone, Copy, Debug, Default)]
pub struct SmolRuntime;

#[cfg(feature = "smol")]
impl Runtime for SmolRuntime {
    type Sleep = SmolSleep;

    fn sleep(&self, duration: Duration) -> SmolSleep {
        SmolSleep(smol::Timer::after(duration))
    }
}

/// The sleep future of [`SmolRuntime`].
#[cfg(feature = "smol")]
#[derive(Debug)]
pub struct SmolSleep(smol::Timer);

#[cfg(feature = "smol")]
impl Future for SmolSleep {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}
