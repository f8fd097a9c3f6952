//! Hosting a sans-IO coordinator on the shard that owns its internal-topic partition: the
//! shape the group coordinator (`groups::host`) and the transaction coordinator
//! (`txns::host`) share.
//!
//! Contract:
//! - Placement: the machine of partition `p` lives on the shard that owns `p`, its only
//!   writer (I1); nothing here is `Send`. A [`Hosts`] holds one shard's machines by
//!   partition; [`Hosts::start`] starts one that its kind has replayed.
//! - After every input ([`Host::submit_with`], an append's outcome, a timeout) the host
//!   drains the machine: `poll_append` into the writer's queue, the kind's own outputs
//!   ([`HostedMachine::drain_more`]), `poll_response` to the waiting requests; then it wakes
//!   the writer (if anything was queued) and the timer, which re-reads `poll_timeout`.
//! - The writer takes the queued appends that fit one batch (at most the partition's
//!   largest batch, at least one; an append that [batches alone](HostedMachine::batches_alone)
//!   is a batch of its own), writes them through the appender the kind was handed
//!   ([`HostedMachine::write`]: the shard's local append path, so the flush policy and group
//!   commit apply), one batch at a time, and reports the outcome of each append in the order
//!   it was polled. An answer that depends on records is released only after that report.
//! - The timer sleeps until the earliest `poll_timeout` deadline (or a wake-up, at most
//!   [`TIMER_MAX_SLEEP`]) and then calls `handle_timeout(now)`.
//! - Shutdown (the context's stop signal): requests still waiting get `None` (answered
//!   NOT_COORDINATOR, so clients find the coordinator again after the restart); the writer
//!   finishes the batch it is writing (counted in flight by the appender, so the partition
//!   is not closed under it) and stops; the timer stops.
//! - Time: the backend's wall clock in milliseconds, read here, given to core as a value.

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{select, Either, LocalBoxFuture};
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;

/// Longest the timer sleeps without looking at the machine's deadline again.
pub const TIMER_MAX_SLEEP: Duration = Duration::from_secs(60);

/// A coordinator machine (or a machine with what its host keeps beside it) as a [`Host`]
/// drives it: its inputs and outputs, and what the kind adds (the appender, extra outputs).
pub trait HostedMachine<B: Backend>: Sized + 'static {
    /// A request's token.
    type Token: Copy + Eq + Hash;
    /// An answer to a request.
    type Response: 'static;
    /// Records to append, as the machine polls them.
    type Append: 'static;
    /// What the shard hands the hosts: the backend, the stop signal, the appender.
    type Context: 'static;

    /// The internal topic, named in log lines.
    const TOPIC: &'static str;

    /// The shard's backend (the wall clock, timers, tasks).
    fn backend(context: &Self::Context) -> &B;
    /// Completes (with an error) once shutdown began on the shard.
    fn stop(context: &Self::Context) -> &async_channel::Receiver<()>;

    /// The token numbered `n` (unique per host).
    fn token(n: u64) -> Self::Token;
    /// The machine's next append.
    fn poll_append(&mut self) -> Option<Self::Append>;
    /// The machine's next answer.
    fn poll_response(&mut self) -> Option<(Self::Token, Self::Response)>;
    /// The machine's earliest deadline, in wall-clock milliseconds.
    fn poll_timeout(&self) -> Option<i64>;
    /// Fires the deadlines due at `now`.
    fn handle_timeout(&mut self, now: i64);

    /// Upper bound on the encoded size of `append`'s records inside a batch.
    fn append_bytes(append: &Self::Append) -> usize;
    /// Whether `append` must be written as a batch of its own.
    fn batches_alone(append: &Self::Append) -> bool {
        let _ = append;
        false
    }
    /// Writes `appends` as one batch to partition `partition` through the appender in
    /// `context`; the Kafka error code when it was not appended.
    fn write<'a>(
        context: &'a Self::Context,
        partition: i32,
        appends: &'a [Self::Append],
        now_ms: i64,
    ) -> LocalBoxFuture<'a, Result<(), ErrorCode>>;
    /// Reports the outcome of writing `appends` to the machine, in poll order.
    fn handle_appended(
        &mut self,
        context: &Self::Context,
        appends: &[Self::Append],
        result: Result<(), ErrorCode>,
        now: i64,
    );

    /// Sees each append as it is polled; `after_timeout`: the input was `handle_timeout`.
    fn polled_append(context: &Self::Context, append: &Self::Append, after_timeout: bool) {
        let _ = (context, append, after_timeout);
    }
    /// Drains the kind's own outputs, after the appends and before the answers.
    fn drain_more(host: &Rc<Host<B, Self>>) {
        let _ = host;
    }
}

/// One hosted machine and what its tasks share (see the module documentation).
pub struct Host<B: Backend, M: HostedMachine<B>> {
    context: Rc<M::Context>,
    partition: i32,
    machine: RefCell<M>,
    waiters: RefCell<HashMap<M::Token, oneshot::Sender<M::Response>>>,
    next_token: Cell<u64>,
    queue: RefCell<VecDeque<M::Append>>,
    wake_writer: async_channel::Sender<()>,
    wake_timer: async_channel::Sender<()>,
    /// Largest batch the partition accepts.
    max_batch_bytes: usize,
}

impl<B: Backend, M: HostedMachine<B>> Host<B, M> {
    /// The internal-topic partition this machine owns.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// What the shard handed the host.
    pub fn context(&self) -> &Rc<M::Context> {
        &self.context
    }

    /// The machine, to read (never held across an `.await`).
    pub fn machine(&self) -> Ref<'_, M> {
        self.machine.borrow()
    }

    /// The machine, to change (never held across an `.await`; drain after an input).
    pub fn machine_mut(&self) -> RefMut<'_, M> {
        self.machine.borrow_mut()
    }

    /// Gives the machine a request through `hand` (the machine, the request's token, now)
    /// and waits for its answer; `None` when the shard began shutting down first.
    pub async fn submit_with(
        self: &Rc<Self>,
        hand: impl FnOnce(&mut M, M::Token, i64),
    ) -> Option<M::Response> {
        let token = M::token(self.next_token.get());
        self.next_token.set(self.next_token.get() + 1);
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().insert(token, tx);
        let now = M::backend(&self.context).wall_clock_ms();
        hand(&mut self.machine.borrow_mut(), token, now);
        self.drain(false);
        let stop = std::pin::pin!(M::stop(&self.context).recv());
        match select(rx, stop).await {
            Either::Left((Ok(response), _)) => Some(response),
            _ => {
                self.waiters.borrow_mut().remove(&token);
                None
            }
        }
    }

    /// Drains the machine's outputs (see the module documentation). `after_timeout`: the
    /// input was `handle_timeout`.
    pub fn drain(self: &Rc<Self>, after_timeout: bool) {
        let mut appended = false;
        loop {
            let next = self.machine.borrow_mut().poll_append();
            let Some(append) = next else { break };
            M::polled_append(&self.context, &append, after_timeout);
            self.queue.borrow_mut().push_back(append);
            appended = true;
        }
        M::drain_more(self);
        loop {
            let next = self.machine.borrow_mut().poll_response();
            let Some((token, response)) = next else { break };
            let waiter = self.waiters.borrow_mut().remove(&token);
            if let Some(waiter) = waiter {
                let _ = waiter.send(response);
            }
        }
        if appended {
            let _ = self.wake_writer.try_send(());
        }
        let _ = self.wake_timer.try_send(());
    }

    /// Takes the queued appends that fit one batch (at least one; one that batches alone,
    /// alone).
    fn take_batch(&self) -> Vec<M::Append> {
        let mut queue = self.queue.borrow_mut();
        let mut taken = Vec::new();
        let mut bytes = minikafka_core::record::HEADER_BYTES;
        while let Some(next) = queue.front() {
            let size = M::append_bytes(next);
            if !taken.is_empty() && (bytes + size > self.max_batch_bytes || M::batches_alone(next))
            {
                break;
            }
            let alone = M::batches_alone(next);
            bytes += size;
            taken.extend(queue.pop_front());
            if alone {
                break;
            }
        }
        taken
    }
}

/// Appends queued records, one batch at a time (see the module documentation).
async fn writer<B: Backend, M: HostedMachine<B>>(
    host: Rc<Host<B, M>>,
    wake: async_channel::Receiver<()>,
) {
    let context = Rc::clone(&host.context);
    loop {
        if host.queue.borrow().is_empty() {
            let woken = {
                let wake = std::pin::pin!(wake.recv());
                let stop = std::pin::pin!(M::stop(&context).recv());
                matches!(select(wake, stop).await, Either::Left((Ok(()), _)))
            };
            if !woken {
                break;
            }
            continue;
        }
        if M::stop(&context).is_closed() {
            break;
        }
        let appends = host.take_batch();
        let now = M::backend(&context).wall_clock_ms();
        let result = M::write(&context, host.partition, &appends, now).await;
        if let Err(code) = result {
            tracing::warn!(
                partition = host.partition,
                %code,
                "{} append failed; its answers get an error",
                M::TOPIC
            );
        }
        let now = M::backend(&context).wall_clock_ms();
        host.machine
            .borrow_mut()
            .handle_appended(&context, &appends, result, now);
        host.drain(false);
    }
    tracing::debug!(partition = host.partition, "{} writer stopped", M::TOPIC);
}

/// Fires the machine's deadlines (see the module documentation).
async fn timer<B: Backend, M: HostedMachine<B>>(
    host: Rc<Host<B, M>>,
    wake: async_channel::Receiver<()>,
) {
    let context = Rc::clone(&host.context);
    loop {
        let deadline = host.machine.borrow().poll_timeout();
        let now = M::backend(&context).wall_clock_ms();
        if deadline.is_some_and(|at| at <= now) {
            host.machine.borrow_mut().handle_timeout(now);
            host.drain(true);
            continue;
        }
        let sleep_for = deadline.map_or(TIMER_MAX_SLEEP, |at| {
            Duration::from_millis(u64::try_from(at - now).unwrap_or(0)).min(TIMER_MAX_SLEEP)
        });
        let go_on = {
            let sleep = std::pin::pin!(M::backend(&context).sleep(sleep_for));
            let wake = std::pin::pin!(wake.recv());
            let stop = std::pin::pin!(M::stop(&context).recv());
            match select(select(sleep, wake), stop).await {
                Either::Left((Either::Left(_), _)) => true,
                Either::Left((Either::Right((woken, _)), _)) => woken.is_ok(),
                Either::Right(_) => false,
            }
        };
        if !go_on {
            break;
        }
    }
}

/// The machines one shard hosts, by partition.
pub struct Hosts<B: Backend, M: HostedMachine<B>> {
    hosts: RefCell<BTreeMap<i32, Rc<Host<B, M>>>>,
}

impl<B: Backend, M: HostedMachine<B>> Default for Hosts<B, M> {
    fn default() -> Self {
        Hosts {
            hosts: RefCell::new(BTreeMap::new()),
        }
    }
}

impl<B: Backend, M: HostedMachine<B>> Hosts<B, M> {
    /// No machines yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The machine of partition `partition`, if this shard hosts it.
    pub fn get(&self, partition: i32) -> Option<Rc<Host<B, M>>> {
        self.hosts.borrow().get(&partition).cloned()
    }

    /// Every hosted machine, by partition.
    pub fn all(&self) -> Vec<Rc<Host<B, M>>> {
        self.hosts.borrow().values().cloned().collect()
    }

    /// Hosts `machine` (replayed, ready) for `partition`, whose batches may be at most
    /// `max_batch_bytes`: drains it once (what the replay left to do starts here) and starts
    /// its writer and timer tasks.
    pub fn start(
        &self,
        context: &Rc<M::Context>,
        partition: i32,
        machine: M,
        max_batch_bytes: usize,
    ) -> Rc<Host<B, M>> {
        let (wake_writer, writer_wake) = async_channel::bounded(1);
        let (wake_timer, timer_wake) = async_channel::bounded(1);
        let host = Rc::new(Host {
            context: Rc::clone(context),
            partition,
            machine: RefCell::new(machine),
            waiters: RefCell::new(HashMap::new()),
            next_token: Cell::new(0),
            queue: RefCell::new(VecDeque::new()),
            wake_writer,
            wake_timer,
            max_batch_bytes,
        });
        host.drain(false);
        let backend = M::backend(context);
        backend.spawn_local(writer(Rc::clone(&host), writer_wake));
        backend.spawn_local(timer(Rc::clone(&host), timer_wake));
        self.hosts.borrow_mut().insert(partition, Rc::clone(&host));
        host
    }
}
