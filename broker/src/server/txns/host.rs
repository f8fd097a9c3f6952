//! The transaction coordinator hosts of one shard: one [`Coordinator`] per
//! `__transaction_state` partition the shard owns, and the tasks that drive it.
//!
//! Contract (the shape of `groups::host`, with markers and producer ids added):
//! - Placement: coordinator `p` lives on the shard that owns `__transaction_state`
//!   partition `p`, its only writer (I1). Requests reach it through [`super::route`].
//! - Startup ([`TxnHosts::load`], before the partitions-open barrier, so before any shard
//!   accepts connections): each coordinator replays its partition
//!   ([`super::state_log::replay_log`]) and gets `handle_loaded(now)`, which re-polls the
//!   markers of every transaction found in PrepareCommit/PrepareAbort (I64); then its
//!   writer and timer tasks start.
//! - After every input (a request, an append's outcome, a marker write's outcome, a timeout)
//!   the host drains the coordinator: `poll_append` into the writer's queue, `poll_marker`
//!   to a task that writes the markers through [`TxnIo::write_markers`] and reports them with
//!   `handle_markers_written`, `poll_response` to the waiting requests, and wakes the timer.
//! - The writer appends queued records as one batch through [`TxnIo::append`] (the shard's
//!   local append path: flush policy, group commit), one batch at a time, and reports each
//!   append with `handle_appended` in poll order. An answer waits for its record (I62).
//! - Producer ids: the coordinator takes fresh ids synchronously from a spare pool
//!   ([`TxnHost::submit`] fills it from the durable allocator, awaited, before an
//!   InitProducerId or EndTxn is handed over, so a fresh id is always ready; I63).
//! - Shutdown: waiting requests get `None` (answered NOT_COORDINATOR); the writer finishes
//!   its batch and stops; marker tasks stop reporting (a Prepare left without its Complete
//!   record is finished at the next start, I64); the timer stops.
//! - Time: the backend's wall clock in milliseconds, read here, given to core as a value.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{select, Either, LocalBoxFuture};
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::records::TxnLogValue;
use minikafka_core::txn::{
    Append, AppendError, Coordinator, MarkerWrite, RequestToken, TopicPartition, TxnConfig,
    TxnRequest, TxnResponse, TxnResult, TxnState,
};

use super::metrics::TxnMetrics;
use super::state_log::{append_bytes, encode_appends, replay_log};
use super::state_topic::TRANSACTION_STATE_TOPIC;
use crate::config::BrokerConfig;
use crate::log::PartitionLog;

/// What the hosts need from their shard: appends to `__transaction_state`, marker writes to
/// the transaction's partitions, fresh producer ids. The shard implements it, so the two
/// modules import one way (shard → host).
pub trait TxnIo {
    /// Appends `batch` to `__transaction_state` partition `partition` (this shard's); the
    /// Kafka error code when it was not appended.
    fn append(&self, partition: i32, batch: Bytes) -> LocalBoxFuture<'_, Result<(), ErrorCode>>;

    /// Writes `write`'s COMMIT/ABORT markers, one control batch per partition, each on the
    /// shard owning it (a `__consumer_offsets` partition completes the group coordinator's
    /// pending transactional offsets instead). Returns the partitions whose write failed and
    /// must be retried; a partition that no longer exists counts as written.
    fn write_markers(&self, write: MarkerWrite) -> LocalBoxFuture<'_, Vec<TopicPartition>>;

    /// A producer id never handed out before (the broker's durable allocator).
    fn fresh_producer_id(&self) -> LocalBoxFuture<'_, Result<i64, ErrorCode>>;
}

/// What a shard hands its transaction hosts.
pub struct TxnContext<B: Backend> {
    /// The shard's backend: clock, timers, tasks.
    pub backend: B,
    /// Completes (with an error) once shutdown began on the shard.
    pub stop: async_channel::Receiver<()>,
    /// Appends, markers, producer ids.
    pub io: Rc<dyn TxnIo>,
    /// The broker-wide transaction counters.
    pub metrics: Rc<TxnMetrics>,
}

/// Longest the timer sleeps without looking at the coordinator's deadline again.
const TIMER_MAX_SLEEP: Duration = Duration::from_secs(60);

/// The coordinator settings from the broker's (`transaction.*` settings).
pub fn txn_config(config: &BrokerConfig) -> TxnConfig {
    let t = &config.transactions;
    TxnConfig {
        max_transaction_timeout_ms: t.max_timeout_ms,
        transactional_id_expiration_ms: t.id_expiration_ms,
        expiration_check_interval_ms: t.remove_expired_interval_ms,
        abort_timed_out_interval_ms: t.abort_timed_out_interval_ms,
        offsets_topic_partitions: config.offsets_topic_num_partitions,
        ..TxnConfig::default()
    }
}

/// Maps an append failure of the partition log to the coordinator's kinds.
fn append_error(code: ErrorCode) -> AppendError {
    match code {
        ErrorCode::MESSAGE_TOO_LARGE => AppendError::TooLarge,
        ErrorCode::KAFKA_STORAGE_ERROR => AppendError::Storage,
        _ => AppendError::Unavailable,
    }
}

/// One hosted coordinator and what its tasks share.
pub struct TxnHost<B: Backend> {
    context: Rc<TxnContext<B>>,
    partition: i32,
    coordinator: RefCell<Coordinator>,
    waiters: RefCell<HashMap<RequestToken, futures::channel::oneshot::Sender<TxnResponse>>>,
    next_token: Cell<u64>,
    queue: RefCell<VecDeque<Append>>,
    /// Fresh producer ids ready for the coordinator (I63).
    spare_ids: RefCell<Vec<i64>>,
    wake_writer: async_channel::Sender<()>,
    wake_timer: async_channel::Sender<()>,
    max_batch_bytes: usize,
}

impl<B: Backend> TxnHost<B> {
    /// The `__transaction_state` partition this coordinator owns.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Hands `request` to the coordinator and waits for its answer; `None` when the shard
    /// began shutting down first.
    pub async fn submit(self: &Rc<Self>, request: TxnRequest) -> Option<TxnResponse> {
        let context = &self.context;
        if matches!(
            request,
            TxnRequest::InitProducerId(_) | TxnRequest::EndTxn(_)
        ) && self.spare_ids.borrow().is_empty()
        {
            // Awaited before the request is handed over, with no await after it: the id is
            // in the pool when the coordinator asks (I63). A failure leaves the pool empty
            // and the coordinator answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
            match context.io.fresh_producer_id().await {
                Ok(id) => self.spare_ids.borrow_mut().push(id),
                Err(code) => tracing::error!(%code, "no producer id for the coordinator"),
            }
        }
        let token = RequestToken(self.next_token.get());
        self.next_token.set(token.0 + 1);
        let (tx, rx) = futures::channel::oneshot::channel();
        self.waiters.borrow_mut().insert(token, tx);
        let now = context.backend.wall_clock_ms();
        {
            let spare = &self.spare_ids;
            let mut ids = || spare.borrow_mut().pop();
            self.coordinator
                .borrow_mut()
                .handle_request(token, request, &mut ids, now);
        }
        self.drain(false);
        let stop = std::pin::pin!(context.stop.recv());
        match select(rx, stop).await {
            Either::Left((Ok(response), _)) => Some(response),
            _ => {
                self.waiters.borrow_mut().remove(&token);
                None
            }
        }
    }

    /// How many of this coordinator's transactions are open (Ongoing) now.
    pub fn ongoing(&self) -> u64 {
        let coordinator = self.coordinator.borrow();
        coordinator
            .transactional_ids()
            .iter()
            .filter(|id| {
                coordinator
                    .transaction(id)
                    .is_some_and(|v| v.state == TxnState::Ongoing)
            })
            .count() as u64
    }

    /// Drains the coordinator's outputs (see the module documentation). `after_timeout`:
    /// the input was `handle_timeout`, so a PrepareAbort polled now is a transaction the
    /// coordinator aborted for running past its timeout (the only abort a timer makes).
    fn drain(self: &Rc<Self>, after_timeout: bool) {
        let mut appended = false;
        loop {
            let next = self.coordinator.borrow_mut().poll_append();
            let Some(append) = next else { break };
            if after_timeout && state_of(&append) == Some(TxnState::PrepareAbort) {
                self.context.metrics.timed_out();
            }
            self.queue.borrow_mut().push_back(append);
            appended = true;
        }
        loop {
            let next = self.coordinator.borrow_mut().poll_marker();
            let Some(write) = next else { break };
            self.context
                .backend
                .spawn_local(write_markers(Rc::clone(self), write));
        }
        loop {
            let next = self.coordinator.borrow_mut().poll_response();
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

    /// Takes the queued appends that fit one batch (at least one).
    fn take_batch(&self) -> Vec<Append> {
        let mut queue = self.queue.borrow_mut();
        let mut taken = Vec::new();
        let mut bytes = minikafka_core::record::HEADER_BYTES;
        while let Some(next) = queue.front() {
            let size = append_bytes(next);
            if !taken.is_empty() && bytes + size > self.max_batch_bytes {
                break;
            }
            bytes += size;
            if let Some(append) = queue.pop_front() {
                taken.push(append);
            }
        }
        taken
    }
}

/// The state an append's record stores (`None` for a tombstone).
fn state_of(append: &Append) -> Option<TxnState> {
    let value = append.record.value.as_deref()?;
    TxnLogValue::decode(value).ok().map(|v| v.state)
}

/// Counts what a record made durable says about a transaction's end.
fn count_durable(metrics: &TxnMetrics, append: &Append) {
    match state_of(append) {
        Some(TxnState::CompleteCommit) => metrics.committed(),
        Some(TxnState::CompleteAbort) => metrics.aborted(),
        _ => {}
    }
}

/// Writes one transaction's markers and reports them (see the module documentation).
async fn write_markers<B: Backend>(host: Rc<TxnHost<B>>, write: MarkerWrite) {
    let context = Rc::clone(&host.context);
    let id = write.id;
    let (txn, result) = (write.transactional_id.clone(), write.result);
    let retry = {
        let written = std::pin::pin!(context.io.write_markers(write));
        let stop = std::pin::pin!(context.stop.recv());
        match select(written, stop).await {
            Either::Left((retry, _)) => retry,
            // Shutting down: the Prepare record stays; the next start writes the markers.
            Either::Right(_) => return,
        }
    };
    if !retry.is_empty() {
        tracing::warn!(
            transactional_id = txn,
            ?result,
            partitions = retry.len(),
            "transaction markers failed; retrying"
        );
    } else if matches!(result, TxnResult::Abort | TxnResult::Commit) {
        tracing::debug!(
            transactional_id = txn,
            ?result,
            "transaction markers written"
        );
    }
    let now = context.backend.wall_clock_ms();
    host.coordinator
        .borrow_mut()
        .handle_markers_written(id, retry, now);
    host.drain(false);
}

/// Appends queued records, one batch at a time (see the module documentation).
async fn writer<B: Backend>(host: Rc<TxnHost<B>>, wake: async_channel::Receiver<()>) {
    let context = Rc::clone(&host.context);
    loop {
        if host.queue.borrow().is_empty() {
            let woken = {
                let wake = std::pin::pin!(wake.recv());
                let stop = std::pin::pin!(context.stop.recv());
                matches!(select(wake, stop).await, Either::Left((Ok(()), _)))
            };
            if !woken {
                break;
            }
            continue;
        }
        if context.stop.is_closed() {
            break;
        }
        let appends = host.take_batch();
        let batch = encode_appends(&appends, context.backend.wall_clock_ms());
        let result = context.io.append(host.partition, batch.into()).await;
        let result = result.map_err(|code| {
            tracing::warn!(
                partition = host.partition,
                %code,
                "{TRANSACTION_STATE_TOPIC} append failed; its answers get an error"
            );
            append_error(code)
        });
        let now = context.backend.wall_clock_ms();
        {
            let mut coordinator = host.coordinator.borrow_mut();
            for append in &appends {
                if result.is_ok() {
                    count_durable(&context.metrics, append);
                }
                coordinator.handle_appended(append.id, result, now);
            }
        }
        host.drain(false);
    }
    tracing::debug!(partition = host.partition, "transaction writer stopped");
}

/// Fires the coordinator's deadlines: aborting timed-out transactions, expiring ids,
/// retrying markers (see the module documentation).
async fn timer<B: Backend>(host: Rc<TxnHost<B>>, wake: async_channel::Receiver<()>) {
    let context = Rc::clone(&host.context);
    loop {
        let deadline = host.coordinator.borrow().poll_timeout().map(|(at, _)| at);
        let now = context.backend.wall_clock_ms();
        if deadline.is_some_and(|at| at <= now) {
            host.coordinator.borrow_mut().handle_timeout(now);
            host.drain(true);
            continue;
        }
        let sleep_for = deadline.map_or(TIMER_MAX_SLEEP, |at| {
            Duration::from_millis(u64::try_from(at - now).unwrap_or(0)).min(TIMER_MAX_SLEEP)
        });
        let go_on = {
            let sleep = std::pin::pin!(context.backend.sleep(sleep_for));
            let wake = std::pin::pin!(wake.recv());
            let stop = std::pin::pin!(context.stop.recv());
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

/// The transaction coordinators one shard hosts, by `__transaction_state` partition.
pub struct TxnHosts<B: Backend> {
    hosts: RefCell<BTreeMap<i32, Rc<TxnHost<B>>>>,
}

impl<B: Backend> Default for TxnHosts<B> {
    fn default() -> Self {
        TxnHosts {
            hosts: RefCell::new(BTreeMap::new()),
        }
    }
}

impl<B: Backend> TxnHosts<B> {
    /// No coordinators yet ([`TxnHosts::load`] creates them).
    pub fn new() -> Self {
        Self::default()
    }

    /// The coordinator of `__transaction_state` partition `partition`, if this shard hosts it.
    pub fn get(&self, partition: i32) -> Option<Rc<TxnHost<B>>> {
        self.hosts.borrow().get(&partition).cloned()
    }

    /// Every hosted coordinator.
    pub fn all(&self) -> Vec<Rc<TxnHost<B>>> {
        self.hosts.borrow().values().cloned().collect()
    }

    /// Replays and starts a coordinator for each `(partition, log)` of `logs` (see the
    /// module documentation). Returns how many it started.
    pub async fn load(
        &self,
        context: Rc<TxnContext<B>>,
        config: TxnConfig,
        coordinator_epoch: i32,
        logs: Vec<(i32, Rc<PartitionLog<B>>)>,
    ) -> Result<usize, String> {
        let mut loaded = 0;
        for (partition, log) in logs {
            let mut coordinator = Coordinator::new(config.clone(), coordinator_epoch);
            let stats = replay_log(&log, &mut coordinator, partition)
                .await
                .map_err(|e| format!("replaying {TRANSACTION_STATE_TOPIC}-{partition}: {e}"))?;
            if stats.records > 0 || stats.skipped > 0 {
                tracing::info!(
                    partition,
                    records = stats.records,
                    skipped = stats.skipped,
                    bytes = stats.bytes,
                    ids = coordinator.transactional_ids().len(),
                    "transaction coordinator loaded"
                );
            }
            coordinator.handle_loaded(context.backend.wall_clock_ms());
            let (wake_writer, writer_wake) = async_channel::bounded(1);
            let (wake_timer, timer_wake) = async_channel::bounded(1);
            let host = Rc::new(TxnHost {
                context: Rc::clone(&context),
                partition,
                coordinator: RefCell::new(coordinator),
                waiters: RefCell::new(HashMap::new()),
                next_token: Cell::new(0),
                queue: RefCell::new(VecDeque::new()),
                spare_ids: RefCell::new(Vec::new()),
                wake_writer,
                wake_timer,
                max_batch_bytes: log.config().max_batch_bytes,
            });
            // Markers of transactions found prepared start here (I64).
            host.drain(false);
            context
                .backend
                .spawn_local(writer(Rc::clone(&host), writer_wake));
            context
                .backend
                .spawn_local(timer(Rc::clone(&host), timer_wake));
            self.hosts.borrow_mut().insert(partition, host);
            loaded += 1;
        }
        Ok(loaded)
    }
}
