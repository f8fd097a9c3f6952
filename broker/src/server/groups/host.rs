//! The coordinator hosts of one shard: one [`Coordinator`] per `__consumer_offsets` partition
//! the shard owns, and the tasks that drive it.
//!
//! Contract:
//! - Placement: coordinator `p` lives on the shard that owns `__consumer_offsets` partition
//!   `p` (the partition routing), which is that partition's only writer (I1). Requests for
//!   it reach it through [`super::route`]; nothing here is `Send`.
//! - Startup ([`GroupHosts::load`], before the shard's partitions-open barrier, so before any
//!   shard accepts connections): each hosted coordinator replays its partition
//!   ([`super::offsets_log::replay_log`]), gets `handle_timeout(now)` once to arm stored
//!   members' sessions, and then its writer and timer tasks start.
//! - After every input ([`CoordinatorHost::submit`], an append's outcome, a timeout) the host
//!   drains the coordinator: `poll_append` into the writer's queue, `poll_response` to the
//!   waiting requests, and wakes the timer so it re-reads `poll_timeout`.
//! - What a host is handed ([`HostContext`]): the backend (clock, timers, tasks), the shared
//!   topic registry, the shard's stop signal, and an [`OffsetsAppender`]; never the shard
//!   itself. The shard, which holds the hosts, implements the appender, so the two modules
//!   import one way (shard → host).
//! - The writer appends queued records through the appender, i.e. the shard's normal local
//!   append path (the flush policy, group commit), several appends in one batch
//!   when they are queued together (a transactional append or a transaction's marker alone,
//!   the marker through the appender's marker path), one batch at a time, and reports each append with
//!   `handle_appended` in the order it was polled. An answer that depends on records is
//!   released only after that report (I20: a commit is acknowledged only once durable).
//! - The timer sleeps until the earliest `poll_timeout` deadline (or a wake-up) and then
//!   calls `handle_timeout(now)`.
//! - Shutdown: requests still waiting get `None` (answered NOT_COORDINATOR, so clients find
//!   the coordinator again after the restart); the writer finishes the batch it is writing
//!   (counted in flight, so the partition is not closed under it) and stops; the timer stops.
//! - Before a ConsumerGroupHeartbeat the coordinator gets the current topic registry (user
//!   topics only), from which the consumer protocol assigns, and the group's session timeout
//!   and heartbeat interval (its group configuration, else the broker's).
//! - Time: the backend's wall clock in milliseconds, read here, given to core as a value.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{select, Either, LocalBoxFuture};
use minikafka_core::backend::Backend;
use minikafka_core::group::assignor::Assignor;
use minikafka_core::group::consumer::{ConsumerGroupConfig, TopicInfo, TopicMetadata};
use minikafka_core::group::{
    Append, AppendError, AppendKind, Coordinator, GroupConfig, GroupRequest, GroupResponse,
    RequestToken, TxnResult,
};

use super::offsets_log::{append_bytes, batches_alone, encode_appends, replay_log};
use super::offsets_topic::{is_internal, OFFSETS_TOPIC};
use crate::config::BrokerConfig;
use crate::log::PartitionLog;
use crate::server::group_configs::{HEARTBEAT_INTERVAL, SESSION_TIMEOUT};
use crate::server::shared::Shared;
use minikafka_core::error_code::ErrorCode;

/// Appends record batches to the `__consumer_offsets` partitions of the shard that hosts the
/// coordinators (their only writer, I1), through that shard's local append path.
pub trait OffsetsAppender {
    /// Appends `batch` to `__consumer_offsets` partition `partition` (which this shard
    /// owns); the Kafka error code when it was not appended. The append counts as a request
    /// in flight, so shutdown does not close the partition under it.
    fn append(&self, partition: i32, batch: Bytes) -> LocalBoxFuture<'_, Result<(), ErrorCode>>;

    /// Appends the COMMIT or ABORT marker of `producer_id`'s transaction to
    /// `__consumer_offsets` partition `partition` (a control batch, I74), through the log's
    /// own way for markers; like [`OffsetsAppender::append`] otherwise.
    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        result: TxnResult,
    ) -> LocalBoxFuture<'_, Result<(), ErrorCode>>;
}

/// What a shard hands its coordinator hosts (see the module documentation).
pub struct HostContext<B: Backend> {
    /// The shard's backend: the wall clock, timers, task spawning, seeds.
    pub backend: B,
    /// The state all shards share (the topic registry the consumer protocol assigns from).
    pub shared: Arc<Shared>,
    /// Completes (with an error) once shutdown began on the shard.
    pub stop: async_channel::Receiver<()>,
    /// Where the writers append.
    pub appender: Rc<dyn OffsetsAppender>,
}

impl<B: Backend> HostContext<B> {
    /// Whether shutdown began on the shard.
    fn stopping(&self) -> bool {
        self.stop.is_closed()
    }
}

/// Longest the timer sleeps without looking at the coordinator's deadline again.
const TIMER_MAX_SLEEP: Duration = Duration::from_secs(60);

/// The coordinator settings from the broker's (`group.*`, `offset*` settings).
pub fn group_config(config: &BrokerConfig) -> GroupConfig {
    let g = &config.groups;
    GroupConfig {
        min_session_timeout_ms: g.min_session_timeout_ms,
        max_session_timeout_ms: g.max_session_timeout_ms,
        max_size: usize::try_from(g.max_size).unwrap_or(usize::MAX),
        initial_rebalance_delay_ms: i64::from(g.initial_rebalance_delay_ms),
        offset_metadata_max_bytes: usize::try_from(g.offset_metadata_max_bytes).unwrap_or(0),
        offsets_retention_ms: g.offsets_retention_minutes.saturating_mul(60_000),
        offsets_retention_check_interval_ms: g.offsets_retention_check_interval_ms,
        consumer: ConsumerGroupConfig {
            heartbeat_interval_ms: g.consumer_heartbeat_interval_ms,
            session_timeout_ms: g.consumer_session_timeout_ms,
            // Validated names (config.rs); an unknown one cannot get here.
            assignors: g
                .consumer_assignors
                .iter()
                .filter_map(|n| Assignor::from_name(n))
                .collect(),
            max_size: usize::try_from(g.consumer_max_size).unwrap_or(usize::MAX),
            ..ConsumerGroupConfig::default()
        },
        ..GroupConfig::default()
    }
}

/// The session timeout and heartbeat interval of consumer group `group_id`: its group
/// configuration ([`crate::server::group_configs`]), else the broker's `group.consumer.*`.
fn consumer_timeouts(shared: &Shared, group_id: &str) -> (i32, i32) {
    let groups = &shared.config.groups;
    let configs = shared.group_configs();
    let settings = configs.by_group.get(group_id);
    let value = |key: &str, default: i32| {
        settings
            .and_then(|s| s.get(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (
        value(SESSION_TIMEOUT, groups.consumer_session_timeout_ms),
        value(HEARTBEAT_INTERVAL, groups.consumer_heartbeat_interval_ms),
    )
}

/// The broker's user topics (internal ones are never assigned), as the consumer protocol
/// sees them.
fn topic_metadata(shared: &Shared) -> TopicMetadata {
    let mut out = TopicMetadata::new();
    for topic in shared.all_topics() {
        if is_internal(&topic.name) {
            continue;
        }
        out.topics.insert(
            topic.name.clone(),
            TopicInfo {
                topic_id: *topic.id.as_bytes(),
                partition_count: topic.partition_count(),
            },
        );
    }
    out
}

/// Maps an append failure of the partition log (a Kafka code) to the coordinator's kinds.
fn append_error(code: ErrorCode) -> AppendError {
    match code {
        ErrorCode::MESSAGE_TOO_LARGE => AppendError::TooLarge,
        ErrorCode::KAFKA_STORAGE_ERROR => AppendError::Storage,
        _ => AppendError::Unavailable,
    }
}

/// One hosted coordinator and what its tasks share.
pub struct CoordinatorHost<B: Backend> {
    context: Rc<HostContext<B>>,
    partition: i32,
    coordinator: RefCell<Coordinator>,
    waiters: RefCell<HashMap<RequestToken, futures::channel::oneshot::Sender<GroupResponse>>>,
    next_token: Cell<u64>,
    queue: RefCell<VecDeque<Append>>,
    wake_writer: async_channel::Sender<()>,
    wake_timer: async_channel::Sender<()>,
    /// Largest batch the offsets partition accepts.
    max_batch_bytes: usize,
}

impl<B: Backend> CoordinatorHost<B> {
    /// The `__consumer_offsets` partition this coordinator owns.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Hands `request` to the coordinator and waits for its answer; `None` when the shard
    /// began shutting down first.
    pub async fn submit(&self, request: GroupRequest) -> Option<GroupResponse> {
        let context = &self.context;
        let token = RequestToken(self.next_token.get());
        self.next_token.set(token.0 + 1);
        let (tx, rx) = futures::channel::oneshot::channel();
        self.waiters.borrow_mut().insert(token, tx);
        let now = context.backend.wall_clock_ms();
        if let GroupRequest::ConsumerGroupHeartbeat(heartbeat) = &request {
            // The consumer protocol assigns from the topics that exist now, and times the
            // group by its group configuration in force now.
            let topics = topic_metadata(&context.shared);
            let mut coordinator = self.coordinator.borrow_mut();
            coordinator.handle_topic_metadata(topics);
            let (session, interval) = consumer_timeouts(&context.shared, &heartbeat.group_id);
            coordinator.handle_consumer_group_timeouts(&heartbeat.group_id, session, interval);
        }
        self.coordinator
            .borrow_mut()
            .handle_request(token, request, now);
        self.drain();
        let stop = std::pin::pin!(context.stop.recv());
        match select(rx, stop).await {
            Either::Left((Ok(response), _)) => Some(response),
            _ => {
                self.waiters.borrow_mut().remove(&token);
                None
            }
        }
    }

    /// Drains the coordinator's outputs (see the module documentation).
    fn drain(&self) {
        let mut appended = false;
        loop {
            let next = self.coordinator.borrow_mut().poll_append();
            let Some(append) = next else { break };
            self.queue.borrow_mut().push_back(append);
            appended = true;
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

    /// Takes the queued appends that fit one batch (at least one; a transactional append or a
    /// marker alone).
    fn take_batch(&self) -> Vec<Append> {
        let mut queue = self.queue.borrow_mut();
        let mut taken = Vec::new();
        let mut bytes = minikafka_core::record::HEADER_BYTES;
        while let Some(next) = queue.front() {
            let size = append_bytes(next);
            if !taken.is_empty() && bytes + size > self.max_batch_bytes {
                break;
            }
            // A transactional append or a marker is a batch of its own (I74).
            if !taken.is_empty() && batches_alone(next) {
                break;
            }
            if batches_alone(next) {
                taken.extend(queue.pop_front());
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

/// Appends queued records, one batch at a time (see the module documentation).
async fn writer<B: Backend>(host: Rc<CoordinatorHost<B>>, wake: async_channel::Receiver<()>) {
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
        if context.stopping() {
            break;
        }
        let appends = host.take_batch();
        let result = match appends.as_slice() {
            // A marker goes through the log's marker path (it is alone in its batch).
            [Append {
                kind:
                    AppendKind::Marker {
                        producer_id,
                        producer_epoch,
                        result,
                    },
                ..
            }] => {
                context
                    .appender
                    .append_marker(host.partition, *producer_id, *producer_epoch, *result)
                    .await
            }
            _ => {
                let batch = encode_appends(&appends, context.backend.wall_clock_ms());
                context.appender.append(host.partition, batch.into()).await
            }
        };
        let result = result.map_err(|code| {
            tracing::warn!(
                partition = host.partition,
                %code,
                "offsets append failed; its answers get an error"
            );
            append_error(code)
        });
        let now = context.backend.wall_clock_ms();
        {
            let mut coordinator = host.coordinator.borrow_mut();
            for append in &appends {
                coordinator.handle_appended(append.id, result, now);
            }
        }
        host.drain();
    }
    tracing::debug!(partition = host.partition, "offsets writer stopped");
}

/// Fires the coordinator's deadlines (see the module documentation).
async fn timer<B: Backend>(host: Rc<CoordinatorHost<B>>, wake: async_channel::Receiver<()>) {
    let context = Rc::clone(&host.context);
    loop {
        let deadline = host.coordinator.borrow().poll_timeout().map(|(at, _)| at);
        let now = context.backend.wall_clock_ms();
        if deadline.is_some_and(|at| at <= now) {
            host.coordinator.borrow_mut().handle_timeout(now);
            host.drain();
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

/// The coordinators one shard hosts, by offsets partition.
pub struct GroupHosts<B: Backend> {
    hosts: RefCell<BTreeMap<i32, Rc<CoordinatorHost<B>>>>,
}

impl<B: Backend> Default for GroupHosts<B> {
    fn default() -> Self {
        GroupHosts {
            hosts: RefCell::new(BTreeMap::new()),
        }
    }
}

impl<B: Backend> GroupHosts<B> {
    /// No coordinators yet ([`GroupHosts::load`] creates them).
    pub fn new() -> Self {
        Self::default()
    }

    /// The coordinator of offsets partition `partition`, if this shard hosts it.
    pub fn get(&self, partition: i32) -> Option<Rc<CoordinatorHost<B>>> {
        self.hosts.borrow().get(&partition).cloned()
    }

    /// Every committed offset of the groups this shard coordinates, as
    /// `(group, topic, partition, offset)`.
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        let hosts = self.hosts.borrow();
        hosts
            .values()
            .flat_map(|host| host.coordinator.borrow().committed_offsets())
            .collect()
    }

    /// Replays and starts a coordinator for each `(partition, log)` of `logs`: the
    /// `__consumer_offsets` partitions the shard owns, open (see the module documentation).
    /// Returns how many it started.
    pub async fn load(
        &self,
        context: Rc<HostContext<B>>,
        logs: Vec<(i32, Rc<PartitionLog<B>>)>,
    ) -> Result<usize, String> {
        let config = group_config(&context.shared.config);
        let mut loaded = 0;
        for (partition, log) in logs {
            let seed = context.backend.random_u64();
            let mut coordinator = Coordinator::new(config.clone(), seed);
            let stats = replay_log(&log, &mut coordinator, partition)
                .await
                .map_err(|e| format!("replaying {OFFSETS_TOPIC}-{partition}: {e}"))?;
            if stats.records > 0 || stats.skipped > 0 {
                tracing::info!(
                    partition,
                    records = stats.records,
                    skipped = stats.skipped,
                    bytes = stats.bytes,
                    groups = coordinator.group_ids().len(),
                    "group coordinator loaded"
                );
            }
            coordinator.handle_timeout(context.backend.wall_clock_ms());
            let (wake_writer, writer_wake) = async_channel::bounded(1);
            let (wake_timer, timer_wake) = async_channel::bounded(1);
            let host = Rc::new(CoordinatorHost {
                context: Rc::clone(&context),
                partition,
                coordinator: RefCell::new(coordinator),
                waiters: RefCell::new(HashMap::new()),
                next_token: Cell::new(0),
                queue: RefCell::new(VecDeque::new()),
                wake_writer,
                wake_timer,
                max_batch_bytes: log.config().max_batch_bytes,
            });
            host.drain();
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
