//! The transaction coordinator hosts of one shard: one [`Coordinator`] per
//! `__transaction_state` partition the shard owns, and the tasks that drive it.
//!
//! Contract (the shape both coordinators share, [`crate::server::coordinator_host`], with
//! markers and producer ids added):
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

use std::rc::Rc;

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
use crate::server::coordinator_host::{Host, HostedMachine, Hosts};

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

/// The coordinator settings from the broker's (`transaction.*` settings).
pub fn txn_config(config: &BrokerConfig) -> TxnConfig {
    let t = &config.transactions;
    TxnConfig {
        max_transaction_timeout_ms: t.max_timeout_ms,
        transactional_id_expiration_ms: t.id_expiration_ms,
        expiration_check_interval_ms: t.remove_expired_interval_ms,
        abort_timed_out_interval_ms: t.abort_timed_out_interval_ms,
        hold_while_completing_ms: t.hold_while_completing_ms,
        offsets_topic_partitions: config.offsets_topic_num_partitions,
        max_transactional_ids: t.max_transactional_ids,
        max_partitions_per_transaction: t.max_partitions_per_transaction,
        max_held_requests: t.max_held_requests,
        retry_backoff_ms: t.retry_backoff_ms,
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

/// A transaction coordinator and the fresh producer ids ready for it (I63).
pub struct TxnMachine {
    coordinator: Coordinator,
    spare_ids: Vec<i64>,
}

impl TxnMachine {
    /// The coordinator.
    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }
}

/// One hosted transaction coordinator.
pub type TxnHost<B> = Host<B, TxnMachine>;

/// The transaction coordinators one shard hosts, by `__transaction_state` partition.
pub type TxnHosts<B> = Hosts<B, TxnMachine>;

impl<B: Backend> HostedMachine<B> for TxnMachine {
    type Token = RequestToken;
    type Response = TxnResponse;
    type Append = Append;
    type Context = TxnContext<B>;

    const TOPIC: &'static str = TRANSACTION_STATE_TOPIC;

    fn backend(context: &TxnContext<B>) -> &B {
        &context.backend
    }

    fn stop(context: &TxnContext<B>) -> &async_channel::Receiver<()> {
        &context.stop
    }

    fn token(n: u64) -> RequestToken {
        RequestToken(n)
    }

    fn poll_append(&mut self) -> Option<Append> {
        self.coordinator.poll_append()
    }

    fn poll_response(&mut self) -> Option<(RequestToken, TxnResponse)> {
        self.coordinator.poll_response()
    }

    fn poll_timeout(&self) -> Option<i64> {
        self.coordinator.poll_timeout().map(|(at, _)| at)
    }

    fn handle_timeout(&mut self, now: i64) {
        self.coordinator.handle_timeout(now);
    }

    fn append_bytes(append: &Append) -> usize {
        append_bytes(append)
    }

    fn write<'a>(
        context: &'a TxnContext<B>,
        partition: i32,
        appends: &'a [Append],
        now_ms: i64,
    ) -> LocalBoxFuture<'a, Result<(), ErrorCode>> {
        context
            .io
            .append(partition, encode_appends(appends, now_ms).into())
    }

    fn handle_appended(
        &mut self,
        context: &TxnContext<B>,
        appends: &[Append],
        result: Result<(), ErrorCode>,
        now: i64,
    ) {
        let result = result.map_err(append_error);
        for append in appends {
            if result.is_ok() {
                count_durable(&context.metrics, append);
            }
            self.coordinator.handle_appended(append.id, result, now);
        }
    }

    /// After a timeout, a PrepareAbort polled is a transaction the coordinator aborted for
    /// running past its timeout (the only abort a timer makes).
    fn polled_append(context: &TxnContext<B>, append: &Append, after_timeout: bool) {
        if after_timeout && state_of(append) == Some(TxnState::PrepareAbort) {
            context.metrics.timed_out();
        }
    }

    /// Marker writes, each to a task that writes and reports them.
    fn drain_more(host: &Rc<TxnHost<B>>) {
        loop {
            let next = host.machine_mut().coordinator.poll_marker();
            let Some(write) = next else { break };
            host.context()
                .backend
                .spawn_local(write_markers(Rc::clone(host), write));
        }
    }
}

impl<B: Backend> Host<B, TxnMachine> {
    /// Hands `request` to the coordinator and waits for its answer; `None` when the shard
    /// began shutting down first.
    pub async fn submit(self: &Rc<Self>, request: TxnRequest) -> Option<TxnResponse> {
        if matches!(
            request,
            TxnRequest::InitProducerId(_) | TxnRequest::EndTxn(_)
        ) && self.machine().spare_ids.is_empty()
        {
            // Awaited before the request is handed over, with no await after it: the id is
            // in the pool when the coordinator asks (I63). A failure leaves the pool empty
            // and the coordinator answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
            match self.context().io.fresh_producer_id().await {
                Ok(id) => self.machine_mut().spare_ids.push(id),
                Err(code) => tracing::error!(%code, "no producer id for the coordinator"),
            }
        }
        self.submit_with(|machine, token, now| {
            let TxnMachine {
                coordinator,
                spare_ids,
            } = machine;
            let mut ids = || spare_ids.pop();
            coordinator.handle_request(token, request, &mut ids, now);
        })
        .await
    }

    /// How many of this coordinator's transactions are open (Ongoing) now.
    pub fn ongoing(&self) -> u64 {
        let machine = self.machine();
        let coordinator = &machine.coordinator;
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
    let context = Rc::clone(host.context());
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
    host.machine_mut()
        .coordinator
        .handle_markers_written(id, retry, now);
    host.drain(false);
}

impl<B: Backend> Hosts<B, TxnMachine> {
    /// Replays and starts a coordinator for each `(partition, log)` of `logs` (see the
    /// module documentation), each writing `coordinator_epoch` into its markers (this
    /// start's, I175). Returns how many it started.
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
                    coordinator_epoch,
                    "transaction coordinator loaded"
                );
            }
            coordinator.handle_loaded(context.backend.wall_clock_ms());
            let machine = TxnMachine {
                coordinator,
                spare_ids: Vec::new(),
            };
            // Markers of transactions found prepared start here, at the first drain (I64).
            self.start(&context, partition, machine, log.config().max_batch_bytes);
            loaded += 1;
        }
        Ok(loaded)
    }
}
