//! A first-come, first-served gate: the order in which a partition's appends reach the log.
//!
//! Contract:
//! - [`FifoGate::enter`] completes for one caller at a time, in the order the callers first
//!   polled it (Kafka appends pipelined produce requests of one connection in request order;
//!   the log's own lock does not promise an order).
//! - A caller dropped while waiting leaves the line; a caller dropped after being let in
//!   passes its turn on. Shard-local (`!Send`), no locks, no allocation when uncontended.
//! - Never: lets two callers in at once, or skips a waiting caller.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// One waiting caller.
#[derive(Default)]
struct Ticket {
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// The gate. See the module documentation.
#[derive(Default)]
pub struct FifoGate {
    busy: Cell<bool>,
    queue: RefCell<VecDeque<Rc<Ticket>>>,
}

/// Holds the gate until dropped.
pub struct GatePass<'a> {
    gate: &'a FifoGate,
}

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        self.gate.release();
    }
}

/// Removes a waiting ticket from the line if its future is dropped before it is let in.
struct Waiting<'a> {
    gate: &'a FifoGate,
    ticket: Option<Rc<Ticket>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        if ticket.granted.get() {
            // Let in but never used: pass the turn on.
            self.gate.release();
        } else {
            self.gate
                .queue
                .borrow_mut()
                .retain(|t| !Rc::ptr_eq(t, &ticket));
        }
    }
}

impl FifoGate {
    /// An open gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits for this caller's turn.
    pub async fn enter(&self) -> GatePass<'_> {
        if !self.busy.get() && self.queue.borrow().is_empty() {
            self.busy.set(true);
            return GatePass { gate: self };
        }
        let ticket = Rc::new(Ticket::default());
        self.queue.borrow_mut().push_back(Rc::clone(&ticket));
        let mut waiting = Waiting {
            gate: self,
            ticket: Some(ticket),
        };
        poll_fn(|cx| match &waiting.ticket {
            Some(t) if !t.granted.get() => {
                *t.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        })
        .await;
        waiting.ticket = None;
        GatePass { gate: self }
    }

    /// Lets the next caller in, or opens the gate.
    fn release(&self) {
        let next = self.queue.borrow_mut().pop_front();
        match next {
            Some(ticket) => {
                ticket.granted.set(true);
                let waker = ticket.waker.borrow_mut().take();
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            None => self.busy.set(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use std::future::Future;

    /// Completes on its second poll, waking itself: a yield point.
    async fn yield_now() {
        let mut yielded = false;
        poll_fn(|cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }

    #[test]
    fn callers_enter_in_arrival_order_one_at_a_time() {
        let gate = Rc::new(FifoGate::new());
        let order = Rc::new(RefCell::new(Vec::new()));
        let inside = Rc::new(Cell::new(0));
        let mut pool = LocalPool::new();
        for i in 0..5 {
            let (gate, order, inside) = (Rc::clone(&gate), Rc::clone(&order), Rc::clone(&inside));
            pool.spawner()
                .spawn_local(async move {
                    let _pass = gate.enter().await;
                    inside.set(inside.get() + 1);
                    assert_eq!(inside.get(), 1, "one caller at a time");
                    for _ in 0..(5 - i) {
                        yield_now().await;
                    }
                    order.borrow_mut().push(i);
                    inside.set(inside.get() - 1);
                })
                .expect("spawn");
        }
        pool.run();
        assert_eq!(*order.borrow(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_late_caller_cannot_barge_past_a_granted_one() {
        let gate = FifoGate::new();
        let mut pool = LocalPool::new();
        let first = pool.run_until(gate.enter());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut second = Box::pin(gate.enter());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(first); // grants `second`, which has not run yet
        let mut late = Box::pin(gate.enter());
        assert!(
            late.as_mut().poll(&mut cx).is_pending(),
            "late caller waits"
        );
        assert!(second.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn dropped_waiter_leaves_the_line_and_granted_drop_passes_on() {
        let gate = FifoGate::new();
        let mut pool = LocalPool::new();
        let first = pool.run_until(gate.enter());
        {
            let mut second = Box::pin(gate.enter());
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            assert!(second.as_mut().poll(&mut cx).is_pending());
            assert_eq!(gate.queue.borrow().len(), 1);
        }
        assert!(
            gate.queue.borrow().is_empty(),
            "dropped waiter left the line"
        );
        drop(first);
        assert!(!gate.busy.get(), "gate open again");

        let first = pool.run_until(gate.enter());
        let mut second = Box::pin(gate.enter());
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(first); // grants `second`
        drop(second); // granted but unused: passes on, gate opens
        assert!(!gate.busy.get());
        let _third = pool.run_until(gate.enter());
    }
}
