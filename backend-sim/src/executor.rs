//! The seeded single-thread executor: every task of every shard (and the simulated clients) on
//! one thread. When several tasks are ready, the world's generator picks which one runs next;
//! when none is, the clock jumps to the next timer. Nothing here reads a real clock.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::world::with_world;

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Task ids woken and not yet polled. Behind a `Mutex` because `Waker` must be `Send + Sync`;
/// only this thread ever locks it.
#[derive(Default)]
struct ReadySet {
    order: Vec<u64>,
    queued: BTreeSet<u64>,
}

struct TaskWaker {
    id: u64,
    ready: Arc<Mutex<ReadySet>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.queued.insert(self.id) {
            ready.order.push(self.id);
        }
    }
}

/// Why [`Executor::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every shard's main finished.
    Finished,
    /// [`crate::crash_now`] was called; the disk crash has been applied.
    Crashed,
    /// Nothing was runnable and no timer was pending: every task waits on something that
    /// will never happen (a lost wakeup or a deadlock).
    Stalled,
    /// The poll budget ran out (a task that never stops waking itself).
    Livelocked,
}

/// The executor of one `run_shards` call.
pub(crate) struct Executor {
    tasks: RefCell<BTreeMap<u64, Task>>,
    next_id: Cell<u64>,
    ready: Arc<Mutex<ReadySet>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Executor>>> = const { RefCell::new(None) };
}

impl Executor {
    pub(crate) fn new() -> Rc<Self> {
        Rc::new(Executor {
            tasks: RefCell::new(BTreeMap::new()),
            next_id: Cell::new(0),
            ready: Arc::default(),
        })
    }

    /// Adds a task, ready to run.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.tasks.borrow_mut().insert(id, Box::pin(task));
        self.waker(id).wake();
    }

    fn waker(&self, id: u64) -> Waker {
        Waker::from(Arc::new(TaskWaker {
            id,
            ready: Arc::clone(&self.ready),
        }))
    }

    /// The ready task the seed picks, removed from the ready set.
    fn pick_ready(&self) -> Option<u64> {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if ready.order.is_empty() {
            return None;
        }
        let len = ready.order.len() as u64;
        let index = with_world(|w| w.rng.below(len)) as usize;
        let id = ready.order.swap_remove(index);
        ready.queued.remove(&id);
        Some(id)
    }

    /// Runs tasks until `finished()` holds, a crash is requested, or nothing can run.
    pub(crate) fn run(&self, finished: impl Fn() -> bool) -> RunOutcome {
        let max_polls = with_world(|w| w.config.max_polls);
        let mut polls = 0u64;
        loop {
            if with_world(|w| w.crash_requested) {
                return RunOutcome::Crashed;
            }
            if finished() {
                return RunOutcome::Finished;
            }
            let Some(id) = self.pick_ready() else {
                match with_world(|w| w.advance_to_next_timer()) {
                    Some(due) => due.into_iter().for_each(Waker::wake),
                    None => return RunOutcome::Stalled,
                }
                continue;
            };
            // Taken out while it runs, so it may spawn (which borrows the table).
            let Some(mut task) = self.tasks.borrow_mut().remove(&id) else {
                continue; // woken after it finished
            };
            polls += 1;
            if polls > max_polls {
                return RunOutcome::Livelocked;
            }
            with_world(|w| {
                w.stats.polls += 1;
                let at = u64::try_from(w.now.0.as_nanos()).unwrap_or(u64::MAX);
                w.trace_event(id);
                w.trace_event(at);
            });
            let waker = self.waker(id);
            let mut cx = Context::from_waker(&waker);
            if task.as_mut().poll(&mut cx).is_pending() {
                self.tasks.borrow_mut().insert(id, task);
            }
        }
    }

    /// Drops every task, in id order (a destructor may spawn; those go too).
    pub(crate) fn clear(&self) {
        loop {
            let taken = std::mem::take(&mut *self.tasks.borrow_mut());
            if taken.is_empty() {
                break;
            }
            for (_, task) in taken {
                drop(task);
            }
        }
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        ready.order.clear();
        ready.queued.clear();
    }
}

/// Makes `executor` this thread's current one until the guard drops.
pub(crate) fn enter(executor: &Rc<Executor>) -> CurrentGuard {
    CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(executor)));
    CurrentGuard
}

/// Clears the current executor (also when a task panics through `run`).
pub(crate) struct CurrentGuard;

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        let taken = CURRENT.with(|c| c.borrow_mut().take());
        if let Some(executor) = taken {
            executor.clear();
        }
    }
}

/// Spawns on this thread's current executor.
///
/// # Panics
/// Outside `run_shards` (there is no executor to run the task).
pub(crate) fn spawn_current(task: impl Future<Output = ()> + 'static) {
    let executor = CURRENT.with(|c| c.borrow().clone());
    match executor {
        Some(executor) => executor.spawn(task),
        None => panic!("SimBackend::spawn_local called outside a shard started by run_shards"),
    }
}

/// A future that is pending once (waking itself), so other ready tasks may run first.
pub(crate) struct YieldNow(pub(crate) bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}
