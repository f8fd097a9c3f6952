//! [`RequestTable`]: the requests a partition's driver took in and has not yet handed back
//! to their callers, by [`RequestToken`], each with the payload the driver keeps for it (a
//! batch's bytes until its write) and its answer.
//!
//! Why not a map and a channel per request: the driver hands tokens out consecutively and the
//! machine answers them mostly in that order, so slot `token - first` of a deque is the
//! request's entry (no hashing, and no allocation once the deque has grown), and the answer is
//! handed over in place, waking the caller's task (no channel to allocate per append). This
//! is the per-append path of the 128-outstanding benchmark row
//! (docs/perf-log/2026-12-06-driver-per-append.md).
//!
//! A slot is freed when its caller takes the answer, or when the answer comes for a caller
//! that went away; the deque drops freed slots from its front (I183). Single-threaded: the table
//! lives in a `RefCell` of the partition's shard, never borrowed across an `.await`.

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use minikafka_core::partition::{Done, PartitionError, RequestToken};

/// What a request comes to: its answer from the machine.
pub type Outcome = Result<Done, PartitionError>;

/// The requests between their input and their caller's taking the answer, by token. See the
/// module documentation.
pub struct RequestTable<T> {
    /// The token of `slots[0]`.
    first: u64,
    /// `None`: freed (only ever behind a live slot: freed slots leave from the front).
    slots: VecDeque<Option<Entry<T>>>,
}

struct Entry<T> {
    /// What the driver keeps for the request until it is used (a batch until its write).
    payload: Option<T>,
    answer: AnswerSlot,
}

enum AnswerSlot {
    /// No answer yet; the caller's waker once it has waited.
    Waiting(Option<Waker>),
    /// Answered; the caller has not taken it yet.
    Ready(Outcome),
    /// The caller went away: the answer, when it comes, frees the slot.
    Abandoned,
}

impl<T> Default for RequestTable<T> {
    fn default() -> Self {
        RequestTable {
            first: 0,
            slots: VecDeque::new(),
        }
    }
}

impl<T> RequestTable<T> {
    /// Takes in a request with its payload; its token is the next one.
    pub fn open(&mut self, payload: Option<T>) -> RequestToken {
        let token = RequestToken(self.first + self.slots.len() as u64);
        self.slots.push_back(Some(Entry {
            payload,
            answer: AnswerSlot::Waiting(None),
        }));
        token
    }

    /// Takes the payload of request `token` (`None` when it has none, or already gave it).
    pub fn take_payload(&mut self, token: RequestToken) -> Option<T> {
        self.entry(token)?.payload.take()
    }

    /// The machine answered `token`: the payload is dropped and the caller woken, or, when the
    /// caller went away, the slot freed. A token already freed is ignored.
    pub fn answer(&mut self, token: RequestToken, outcome: Outcome) {
        let Some(entry) = self.entry(token) else {
            return;
        };
        entry.payload = None;
        match std::mem::replace(&mut entry.answer, AnswerSlot::Ready(outcome)) {
            AnswerSlot::Waiting(waker) => {
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            AnswerSlot::Abandoned => {
                self.release(token);
            }
            AnswerSlot::Ready(_) => {
                debug_assert!(false, "the machine answers each request once ({token:?})")
            }
        }
    }

    /// The caller's poll: the answer, freeing the slot, or `Pending` with its waker kept.
    pub fn poll_answer(&mut self, token: RequestToken, cx: &mut Context<'_>) -> Poll<Outcome> {
        let Some(entry) = self.entry(token) else {
            // Only the caller frees a slot it still waits on; the driver never does.
            debug_assert!(false, "a waited request has its slot ({token:?})");
            return Poll::Ready(Err(PartitionError::Closed));
        };
        match &mut entry.answer {
            AnswerSlot::Waiting(waker) => {
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            AnswerSlot::Ready(_) => {
                let Some(Entry {
                    answer: AnswerSlot::Ready(outcome),
                    ..
                }) = self.release(token)
                else {
                    unreachable!("the slot was just seen answered");
                };
                Poll::Ready(outcome)
            }
            AnswerSlot::Abandoned => {
                debug_assert!(false, "an abandoned request is not polled ({token:?})");
                Poll::Ready(Err(PartitionError::Closed))
            }
        }
    }

    /// The caller of `token` went away. `answer_comes`: the machine still owes it an answer
    /// (the slot waits for it, keeping the payload a placed write needs); otherwise, or when
    /// the answer is already here, the slot is freed now.
    pub fn abandon(&mut self, token: RequestToken, answer_comes: bool) {
        let Some(entry) = self.entry(token) else {
            return;
        };
        if answer_comes && matches!(entry.answer, AnswerSlot::Waiting(_)) {
            entry.answer = AnswerSlot::Abandoned;
        } else {
            self.release(token);
        }
    }

    /// Slots held: the requests not yet freed, with the freed slots between them.
    pub fn held_slots(&self) -> usize {
        self.slots.len()
    }

    /// True when no request is open.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn entry(&mut self, token: RequestToken) -> Option<&mut Entry<T>> {
        let at = usize::try_from(token.0.checked_sub(self.first)?).ok()?;
        self.slots.get_mut(at)?.as_mut()
    }

    /// Frees the slot of `token`, returning its entry, and drops the freed slots at the front.
    fn release(&mut self, token: RequestToken) -> Option<Entry<T>> {
        let at = usize::try_from(token.0.checked_sub(self.first)?).ok()?;
        let entry = self.slots.get_mut(at)?.take();
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.first += 1;
        }
        debug_assert!(
            self.slots.front().is_none_or(|slot| slot.is_some()),
            "the front slot is live"
        );
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct CountWakes(AtomicUsize);

    impl Wake for CountWakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn flushed() -> Outcome {
        Ok(Done::Flushed)
    }

    #[test]
    fn answers_out_of_order_free_slots_from_the_front_only() {
        let wakes = Arc::new(CountWakes(AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut table = RequestTable::<u32>::default();
        let a = table.open(Some(1));
        let b = table.open(Some(2));
        let c = table.open(None);
        assert_eq!((a.0, b.0, c.0), (0, 1, 2));
        assert!(table.poll_answer(b, &mut cx).is_pending());
        assert_eq!(table.take_payload(b), Some(2));
        assert_eq!(table.take_payload(b), None);
        table.answer(b, flushed());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
        assert_eq!(table.poll_answer(b, &mut cx), Poll::Ready(flushed()));
        // `a` is still open: `b`'s freed slot stays behind it.
        assert_eq!(table.held_slots(), 3);
        table.answer(a, Err(PartitionError::Cancelled));
        assert_eq!(
            table.poll_answer(a, &mut cx),
            Poll::Ready(Err(PartitionError::Cancelled))
        );
        assert_eq!(table.held_slots(), 1, "a and b leave together");
        assert_eq!(table.open(None).0, 3, "tokens go on consecutively");
    }

    #[test]
    fn an_abandoned_request_keeps_its_payload_until_its_answer() {
        let mut table = RequestTable::<u32>::default();
        let placed = table.open(Some(7));
        let queued = table.open(Some(8));
        table.abandon(placed, true);
        assert_eq!(
            table.take_payload(placed),
            Some(7),
            "its write still needs it"
        );
        table.abandon(queued, false);
        assert_eq!(table.take_payload(queued), None, "freed at once");
        assert_eq!(
            table.held_slots(),
            2,
            "its slot leaves behind the placed one's"
        );
        table.answer(placed, flushed());
        assert!(table.is_empty(), "the answer freed the abandoned slot");
        // An answer for a freed slot is ignored.
        table.answer(queued, flushed());
        assert!(table.is_empty());
    }

    #[test]
    fn an_answer_before_the_caller_went_away_frees_at_abandon() {
        let mut table = RequestTable::<u32>::default();
        let token = table.open(None);
        table.answer(token, flushed());
        table.abandon(token, true);
        assert!(table.is_empty());
    }
}
