//! The coordinator hosts of one shard: one [`Coordinator`] per `__consumer_offsets` partition
//! the shard owns, hosted in the shape both coordinators share
//! ([`crate::server::coordinator_host`]: the drain after every input, the writer, the timer,
//! shutdown).
//!
//! Contract:
//! - Placement: coordinator `p` lives on the shard that owns `__consumer_offsets` partition
//!   `p` (the partition routing), which is that partition's only writer (I1). Requests for
//!   it reach it through [`super::route`]; nothing here is `Send`.
//! - Startup ([`GroupHosts::load`], before the shard's partitions-open barrier, so before any
//!   shard accepts connections): each hosted coordinator replays its partition
//!   ([`super::offsets_log::replay_log`]), gets `handle_timeout(now)` once to arm stored
//!   members' sessions, and then its writer and timer tasks start.
//! - What a host is handed ([`HostContext`]): the backend (clock, timers, tasks), the shared
//!   topic registry, the shard's stop signal, and an [`OffsetsAppender`]; never the shard
//!   itself. The shard, which holds the hosts, implements the appender, so the two modules
//!   import one way (shard → host).
//! - The writer appends queued records through the appender, i.e. the shard's normal local
//!   append path (the flush policy, group commit), several appends in one batch
//!   when they are queued together (a transactional append or a transaction's marker alone,
//!   the marker through the appender's marker path), one batch at a time, and reports each
//!   append with `handle_appended` in the order it was polled. An answer that depends on
//!   records is released only after that report (I20: a commit is acknowledged only once
//!   durable).
//! - Shutdown: requests still waiting get `None` (answered NOT_COORDINATOR, so clients find
//!   the coordinator again after the restart); the writer finishes the batch it is writing
//!   and stops; the timer stops.
//! - Before a ConsumerGroupHeartbeat the coordinator gets the current topic registry (user
//!   topics only), from which the consumer protocol assigns, and the group's session timeout
//!   and heartbeat interval (its group configuration, else the broker's).
//! - Time: the backend's wall clock in milliseconds, read here, given to core as a value.

use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::LocalBoxFuture;
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
use crate::server::coordinator_host::{Host, HostedMachine, Hosts};
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
    /// `__consumer_offsets` partition `partition` (a control batch, I74) from transaction
    /// coordinator epoch `coordinator_epoch` (I175), through the log's own way for markers;
    /// like [`OffsetsAppender::append`] otherwise.
    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
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

/// One hosted group coordinator.
pub type CoordinatorHost<B> = Host<B, Coordinator>;

/// The group coordinators one shard hosts, by offsets partition.
pub type GroupHosts<B> = Hosts<B, Coordinator>;

impl<B: Backend> HostedMachine<B> for Coordinator {
    type Token = RequestToken;
    type Response = GroupResponse;
    type Append = Append;
    type Context = HostContext<B>;

    const TOPIC: &'static str = OFFSETS_TOPIC;

    fn backend(context: &HostContext<B>) -> &B {
        &context.backend
    }

    fn stop(context: &HostContext<B>) -> &async_channel::Receiver<()> {
        &context.stop
    }

    fn token(n: u64) -> RequestToken {
        RequestToken(n)
    }

    fn poll_append(&mut self) -> Option<Append> {
        Coordinator::poll_append(self)
    }

    fn poll_response(&mut self) -> Option<(RequestToken, GroupResponse)> {
        Coordinator::poll_response(self)
    }

    fn poll_timeout(&self) -> Option<i64> {
        Coordinator::poll_timeout(self).map(|(at, _)| at)
    }

    fn handle_timeout(&mut self, now: i64) {
        Coordinator::handle_timeout(self, now);
    }

    fn append_bytes(append: &Append) -> usize {
        append_bytes(append)
    }

    /// A transactional append or a marker is a batch of its own (I74).
    fn batches_alone(append: &Append) -> bool {
        batches_alone(append)
    }

    fn write<'a>(
        context: &'a HostContext<B>,
        partition: i32,
        appends: &'a [Append],
        now_ms: i64,
    ) -> LocalBoxFuture<'a, Result<(), ErrorCode>> {
        match appends {
            // A marker goes through the log's marker path (it is alone in its batch).
            [Append {
                kind:
                    AppendKind::Marker {
                        producer_id,
                        producer_epoch,
                        coordinator_epoch,
                        result,
                    },
                ..
            }] => context.appender.append_marker(
                partition,
                *producer_id,
                *producer_epoch,
                *coordinator_epoch,
                *result,
            ),
            _ => {
                let batch = encode_appends(appends, now_ms);
                context.appender.append(partition, batch.into())
            }
        }
    }

    fn handle_appended(
        &mut self,
        _context: &HostContext<B>,
        appends: &[Append],
        result: Result<(), ErrorCode>,
        now: i64,
    ) {
        let result = result.map_err(append_error);
        for append in appends {
            Coordinator::handle_appended(self, append.id, result, now);
        }
    }
}

impl<B: Backend> Host<B, Coordinator> {
    /// Hands `request` to the coordinator and waits for its answer; `None` when the shard
    /// began shutting down first.
    pub async fn submit(self: &Rc<Self>, request: GroupRequest) -> Option<GroupResponse> {
        let shared = Arc::clone(&self.context().shared);
        self.submit_with(|coordinator, token, now| {
            if let GroupRequest::ConsumerGroupHeartbeat(heartbeat) = &request {
                // The consumer protocol assigns from the topics that exist now, and times
                // the group by its group configuration in force now.
                coordinator.handle_topic_metadata(topic_metadata(&shared));
                let (session, interval) = consumer_timeouts(&shared, &heartbeat.group_id);
                coordinator.handle_consumer_group_timeouts(&heartbeat.group_id, session, interval);
            }
            coordinator.handle_request(token, request, now);
        })
        .await
    }
}

impl<B: Backend> Hosts<B, Coordinator> {
    /// Every committed offset of the groups this shard coordinates, as
    /// `(group, topic, partition, offset)`.
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        self.all()
            .iter()
            .flat_map(|host| host.machine().committed_offsets())
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
            self.start(
                &context,
                partition,
                coordinator,
                log.config().max_batch_bytes,
            );
            loaded += 1;
        }
        Ok(loaded)
    }
}
