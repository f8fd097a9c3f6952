//! The group consumer: subscribe to topics as a member of a consumer group, over the classic
//! protocol (JoinGroup/SyncGroup/Heartbeat, client-side `range` or `cooperative-sticky`) or the
//! consumer protocol (ConsumerGroupHeartbeat, broker-side assignment).
//!
//! Contract:
//! - Inputs: two streams the caller connected to the broker (one for the coordinator, one for
//!   fetching, so a long-poll Fetch never delays a heartbeat's answer), a [`GroupConfig`], a
//!   [`Runtime`] for backoff sleeps, and a [`RebalanceListener`].
//! - Outputs: records of the partitions the group assigns, from [`GroupConsumer::poll`].
//! - Protocol decisions live in the pure state machines ([`ClassicMember`], [`EpochMember`])
//!   and assignors; this file only moves their requests and answers, and runs the callbacks.
//! - Poll-driven: heartbeats, rebalances and auto-commits happen inside [`GroupConsumer::poll`]
//!   (and `commit_*`, `close`), so a caller must poll more often than the session timeout;
//!   each Fetch waits at most the heartbeat interval. The library still never spawns.
//! - Offsets: a newly assigned partition resumes at the group's committed offset
//!   (OffsetFetch), else at `auto_offset_reset`. Auto-commit (every `auto_commit_interval`, at
//!   the start of a poll) commits the positions reached by the records already returned, and
//!   revoked partitions are committed before the revoked callback; lost partitions are not.
//! - Commits carry the generation (or member epoch) and member id: a member fenced out of the
//!   generation gets ILLEGAL_GENERATION (or FENCED_MEMBER_EPOCH) and moves no offset.
//! - minikafka is one node: the coordinator is the bootstrap broker. [`GroupConsumer::connect`]
//!   still asks FindCoordinator, to learn the group id is valid and the coordinator is up.
//! - Reads `Instant::now()` to feed the state machines (they never read a clock).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::types::Offset;
use uuid::Uuid;

use super::admin::{self, Committer};
use super::assignor::Assignor;
use super::classic::{
    codes, Action, ClassicMember, ClassicSettings, JoinOutcome, JoinResponse, MemberEvent, Outcome,
};
use super::consumer_protocol::{EpochMember, EpochState};
use super::member_metadata::{self, Assignment};
use crate::connection::Connection;
use crate::consumer::{
    Consumer, ConsumerConfig, ConsumerRecord, OffsetReset, SeekTo, TopicPartition,
};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Which group protocol the member speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    /// JoinGroup/SyncGroup/Heartbeat with a client-side assignor (`group.protocol=classic`).
    Classic,
    /// ConsumerGroupHeartbeat with broker-side assignment (`group.protocol=consumer`, KIP-848).
    Consumer,
}

/// Group consumer settings (Kafka's names in the field docs).
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.id`.
    pub group_id: String,
    /// Topics to subscribe to.
    pub topics: Vec<String>,
    /// `group.protocol`.
    pub protocol: GroupProtocol,
    /// `partition.assignment.strategy` (classic), in preference order.
    pub assignors: Vec<Assignor>,
    /// `session.timeout.ms` (classic).
    pub session_timeout: Duration,
    /// `max.poll.interval.ms`: the rebalance timeout sent to the coordinator.
    pub rebalance_timeout: Duration,
    /// `heartbeat.interval.ms` (classic; the consumer protocol's broker sets its own).
    pub heartbeat_interval: Duration,
    /// `auto.commit.interval.ms`; `None` is `enable.auto.commit=false`.
    pub auto_commit_interval: Option<Duration>,
    /// `auto.offset.reset` for partitions the group has no committed offset for.
    pub auto_offset_reset: OffsetReset,
    /// `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    /// `retry.backoff.ms`: wait before retrying a busy coordinator.
    pub retry_backoff: Duration,
    /// The fetching side.
    pub consumer: ConsumerConfig,
}

impl GroupConfig {
    /// Kafka's defaults for `group_id` subscribing to `topics`.
    pub fn new(group_id: impl Into<String>, topics: Vec<String>) -> Self {
        GroupConfig {
            group_id: group_id.into(),
            topics,
            protocol: GroupProtocol::Classic,
            assignors: vec![Assignor::Range],
            session_timeout: Duration::from_secs(45),
            rebalance_timeout: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(3),
            auto_commit_interval: Some(Duration::from_secs(5)),
            auto_offset_reset: OffsetReset::Latest,
            group_instance_id: None,
            retry_backoff: Duration::from_millis(100),
            consumer: ConsumerConfig::default(),
        }
    }
}

/// Rebalance callbacks. Revoked partitions are already committed (with auto-commit) when
/// [`RebalanceListener::on_revoked`] runs; lost ones could not be.
pub trait RebalanceListener {
    /// Partitions newly assigned (their positions are set).
    fn on_assigned(&mut self, _partitions: &[TopicPartition]) {}
    /// Partitions given up in an orderly rebalance.
    fn on_revoked(&mut self, _partitions: &[TopicPartition]) {}
    /// Partitions lost without a chance to commit (fenced, session expired).
    fn on_lost(&mut self, _partitions: &[TopicPartition]) {}
}

/// A listener that does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoListener;

impl RebalanceListener for NoListener {}

/// A closure over each [`MemberEvent`] is a listener.
impl<F: FnMut(&MemberEvent)> RebalanceListener for F {
    fn on_assigned(&mut self, partitions: &[TopicPartition]) {
        self(&MemberEvent::Assigned(partitions.to_vec()))
    }
    fn on_revoked(&mut self, partitions: &[TopicPartition]) {
        self(&MemberEvent::Revoked(partitions.to_vec()))
    }
    fn on_lost(&mut self, partitions: &[TopicPartition]) {
        self(&MemberEvent::Lost(partitions.to_vec()))
    }
}

enum Member {
    Classic(ClassicMember),
    Consumer(EpochMember),
}

/// Bound on protocol round trips within one call before giving up (a group that never
/// settles is reported, not spun on forever).
const MAX_ROUND_TRIPS: usize = 200;

/// A consumer-group member (see the module docs).
pub struct GroupConsumer<S, R> {
    coordinator: Connection<S>,
    consumer: Consumer<S>,
    runtime: R,
    config: GroupConfig,
    member: Member,
    listener: Box<dyn RebalanceListener>,
    next_auto_commit: Option<Instant>,
    /// The last offsets committed per partition, so auto-commit skips what did not move.
    committed: BTreeMap<TopicPartition, Offset>,
    /// Topic ids (consumer protocol), both ways.
    topic_ids: HashMap<String, Uuid>,
    topic_names: HashMap<Uuid, String>,
}

impl<S, R> std::fmt::Debug for GroupConsumer<S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("group_id", &self.config.group_id)
            .field("protocol", &self.config.protocol)
            .finish()
    }
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A fresh member id for the consumer protocol (the client picks it, KIP-1082): 16 random
/// bytes from the standard library's per-process random hasher keys, as a UUID string.
fn random_member_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    Uuid::from_bytes(bytes).to_string()
}

impl<S: AsyncRead + AsyncWrite + Unpin, R: Runtime> GroupConsumer<S, R> {
    /// Negotiates both connections and finds the coordinator. Nothing is joined until the
    /// first [`GroupConsumer::poll`].
    pub async fn connect(
        coordinator_stream: S,
        fetch_stream: S,
        mut config: GroupConfig,
        runtime: R,
    ) -> Result<Self> {
        if config.group_id.is_empty() {
            return Err(Error::InvalidArgument("group id must not be empty".into()));
        }
        if config.topics.is_empty() {
            return Err(Error::InvalidArgument(
                "subscribe to at least one topic".into(),
            ));
        }
        if config.protocol == GroupProtocol::Classic && config.assignors.is_empty() {
            return Err(Error::InvalidArgument("name at least one assignor".into()));
        }
        let mut coordinator =
            Connection::connect(coordinator_stream, config.consumer.connection.clone()).await?;
        let mut fetch_config = config.consumer.clone();
        // A fetch never holds the member past its next heartbeat.
        fetch_config.max_wait = fetch_config.max_wait.min(config.heartbeat_interval);
        // Where a partition starts is decided here (committed offset or reset), not there.
        fetch_config.auto_offset_reset = config.auto_offset_reset;
        config.consumer = fetch_config.clone();
        let consumer = Consumer::connect(fetch_stream, fetch_config).await?;
        let member = match config.protocol {
            GroupProtocol::Classic => Member::Classic(ClassicMember::new(ClassicSettings {
                topics: config.topics.clone(),
                assignors: config.assignors.clone(),
                session_timeout: config.session_timeout,
                heartbeat_interval: config.heartbeat_interval,
            })),
            GroupProtocol::Consumer => {
                coordinator.version_of::<ConsumerGroupHeartbeatRequest>()?;
                Member::Consumer(EpochMember::new(random_member_id(), config.topics.clone()))
            }
        };
        let mut tries = 0;
        loop {
            match admin::find_coordinator(&mut coordinator, &config.group_id).await {
                Ok(_) => break,
                Err(e)
                    if tries < MAX_ROUND_TRIPS
                        && e.kafka_code().is_some_and(codes::is_coordinator_retriable) =>
                {
                    tries += 1;
                    runtime.sleep(config.retry_backoff).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(GroupConsumer {
            coordinator,
            consumer,
            runtime,
            next_auto_commit: None,
            config,
            member,
            listener: Box::new(NoListener),
            committed: BTreeMap::new(),
            topic_ids: HashMap::new(),
            topic_names: HashMap::new(),
        })
    }

    /// Sets the rebalance callbacks.
    pub fn with_listener(mut self, listener: impl RebalanceListener + 'static) -> Self {
        self.listener = Box::new(listener);
        self
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.config.group_id
    }

    /// Partitions assigned now, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.consumer.assignment()
    }

    /// The member id ("" before the first join).
    pub fn member_id(&self) -> &str {
        match &self.member {
            Member::Classic(m) => m.member_id(),
            Member::Consumer(m) => m.member_id(),
        }
    }

    /// The generation (classic) or member epoch (consumer protocol).
    pub fn generation(&self) -> i32 {
        match &self.member {
            Member::Classic(m) => m.generation(),
            Member::Consumer(m) => m.epoch(),
        }
    }

    /// What a transactional producer's `send_offsets_to_transaction` needs to commit this
    /// member's offsets (KIP-447): group id, generation, member id, `group.instance.id`.
    pub fn group_metadata(&self) -> admin::ConsumerGroupMetadata {
        admin::ConsumerGroupMetadata {
            group_id: self.config.group_id.clone(),
            generation_id: self.generation(),
            member_id: self.member_id().to_string(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    /// The position (next offset to return) of an assigned partition.
    pub async fn position(&mut self, tp: &TopicPartition) -> Result<Offset> {
        self.consumer.position(tp).await
    }

    /// Takes part in the group (joins, heartbeats, rebalances, auto-commits), then fetches
    /// once from the assigned partitions.
    pub async fn poll(&mut self) -> Result<Vec<ConsumerRecord>> {
        self.drive().await?;
        self.maybe_auto_commit().await?;
        if self.consumer.assignment().is_empty() {
            // Nothing to fetch: wait for the next heartbeat instead of spinning.
            let wait = self.until_next_timer().min(self.config.consumer.max_wait);
            self.runtime.sleep(wait).await;
            return Ok(Vec::new());
        }
        self.consumer.poll().await
    }

    /// Commits the positions of every assigned partition and waits for the answer.
    pub async fn commit_sync(&mut self) -> Result<()> {
        let offsets = self.positions(&self.consumer.assignment()).await?;
        self.commit(&offsets).await
    }

    /// Commits `offsets` (the next offset to consume, per partition) as this member.
    pub async fn commit(&mut self, offsets: &BTreeMap<TopicPartition, Offset>) -> Result<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let committer = self.committer();
        admin::commit_offsets_checked(
            &mut self.coordinator,
            &self.config.group_id,
            &committer,
            offsets,
        )
        .await?;
        self.committed
            .extend(offsets.iter().map(|(tp, o)| (tp.clone(), *o)));
        Ok(())
    }

    /// Commits (with auto-commit on), revokes everything and leaves the group.
    pub async fn close(mut self) -> Result<()> {
        match &mut self.member {
            Member::Classic(m) => {
                let member_id = m.begin_leave();
                self.dispatch_events().await?;
                if let Some(member_id) = member_id {
                    let version = self.coordinator.version_of::<LeaveGroupRequest>()?;
                    let mut request = LeaveGroupRequest::default()
                        .with_group_id(GroupId(str_bytes(&self.config.group_id)));
                    if version >= 3 {
                        request.members = vec![MemberIdentity::default()
                            .with_member_id(str_bytes(&member_id))
                            .with_group_instance_id(
                                self.config.group_instance_id.as_deref().map(str_bytes),
                            )
                            .with_reason(Some(StrBytes::from_static_str(
                                "the consumer is closing",
                            )))];
                    } else {
                        request.member_id = str_bytes(&member_id);
                    }
                    let response = self.coordinator.request(&request).await?;
                    if let Member::Classic(m) = &mut self.member {
                        m.finish_leave();
                    }
                    Error::check(response.error_code, || {
                        format!("leave group {}", self.config.group_id)
                    })?;
                }
            }
            Member::Consumer(m) => {
                m.begin_leave();
                self.dispatch_events().await?;
                self.drive_consumer_protocol().await?;
            }
        }
        Ok(())
    }

    fn committer(&self) -> Committer {
        Committer {
            generation_or_epoch: self.generation(),
            member_id: self.member_id().to_string(),
            group_instance_id: self.config.group_instance_id.clone(),
        }
    }

    fn until_next_timer(&self) -> Duration {
        let next = match &self.member {
            Member::Classic(m) => m.poll_timeout(),
            Member::Consumer(m) => m.poll_timeout(),
        };
        next.map_or(self.config.retry_backoff, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    async fn positions(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Result<BTreeMap<TopicPartition, Offset>> {
        let mut out = BTreeMap::new();
        for tp in partitions {
            out.insert(tp.clone(), self.consumer.position(tp).await?);
        }
        Ok(out)
    }

    async fn maybe_auto_commit(&mut self) -> Result<()> {
        let Some(interval) = self.config.auto_commit_interval else {
            return Ok(());
        };
        let now = Instant::now();
        let due = *self.next_auto_commit.get_or_insert(now + interval);
        if now < due {
            return Ok(());
        }
        self.next_auto_commit = Some(now + interval);
        self.auto_commit(&self.consumer.assignment()).await
    }

    /// Commits the positions of `partitions` that moved since their last commit.
    async fn auto_commit(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        let mut offsets = self.positions(partitions).await?;
        offsets.retain(|tp, o| self.committed.get(tp) != Some(o));
        match self.commit(&offsets).await {
            // A fenced member's commit is refused; the rebalance that follows sorts it out.
            Err(e)
                if matches!(
                    e.kafka_code(),
                    Some(
                        codes::ILLEGAL_GENERATION
                            | codes::UNKNOWN_MEMBER_ID
                            | codes::REBALANCE_IN_PROGRESS
                            | codes::FENCED_MEMBER_EPOCH
                    )
                ) =>
            {
                tracing::warn!(group = %self.config.group_id, "auto-commit refused: {e}");
                Ok(())
            }
            other => other,
        }
    }

    /// Runs the member's state machine until it has nothing to send now.
    async fn drive(&mut self) -> Result<()> {
        match self.member {
            Member::Classic(_) => self.drive_classic().await,
            Member::Consumer(_) => self.drive_consumer_protocol().await,
        }
    }

    async fn drive_classic(&mut self) -> Result<()> {
        for _ in 0..MAX_ROUND_TRIPS {
            let now = Instant::now();
            let Member::Classic(m) = &mut self.member else {
                return Ok(());
            };
            m.handle_timeout(now);
            let action = m.poll_action(now);
            self.dispatch_events().await?;
            match action {
                None => return Ok(()),
                Some(Action::Join) => self.join_and_sync().await?,
                Some(Action::Heartbeat) => {
                    let Member::Classic(m) = &self.member else {
                        return Ok(());
                    };
                    let request = HeartbeatRequest::default()
                        .with_group_id(GroupId(str_bytes(&self.config.group_id)))
                        .with_generation_id(m.generation())
                        .with_member_id(str_bytes(m.member_id()))
                        .with_group_instance_id(
                            self.config.group_instance_id.as_deref().map(str_bytes),
                        );
                    let response = self.coordinator.request(&request).await?;
                    let Member::Classic(m) = &mut self.member else {
                        return Ok(());
                    };
                    let outcome = m.handle_heartbeat_response(response.error_code, Instant::now());
                    self.on_outcome(outcome, "heartbeat").await?;
                }
            }
        }
        Err(Error::Protocol(format!(
            "group {} did not settle after {MAX_ROUND_TRIPS} round trips",
            self.config.group_id
        )))
    }

    async fn on_outcome(&mut self, outcome: Outcome, what: &str) -> Result<()> {
        match outcome {
            Outcome::Continue => Ok(()),
            Outcome::Backoff => {
                self.runtime.sleep(self.config.retry_backoff).await;
                Ok(())
            }
            Outcome::Fatal(code) => {
                Error::check(code, || format!("{what} in group {}", self.config.group_id))
            }
        }
    }

    /// One JoinGroup (and, when joined, one SyncGroup).
    async fn join_and_sync(&mut self) -> Result<()> {
        let group = GroupId(str_bytes(&self.config.group_id));
        let Member::Classic(m) = &mut self.member else {
            return Ok(());
        };
        m.begin_join();
        // An eager member's revocation (and its commit) happens before the join goes out.
        self.dispatch_events().await?;
        let Member::Classic(m) = &self.member else {
            return Ok(());
        };
        let request = JoinGroupRequest::default()
            .with_group_id(group.clone())
            .with_session_timeout_ms(duration_ms(self.config.session_timeout))
            .with_rebalance_timeout_ms(duration_ms(self.config.rebalance_timeout))
            .with_member_id(str_bytes(m.member_id()))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(str_bytes))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(
                m.protocols()
                    .into_iter()
                    .map(|(name, metadata)| {
                        JoinGroupRequestProtocol::default()
                            .with_name(StrBytes::from_static_str(name))
                            .with_metadata(metadata)
                    })
                    .collect(),
            );
        let response = self.coordinator.request(&request).await?;
        let join = JoinResponse {
            error_code: response.error_code,
            generation_id: response.generation_id,
            member_id: response.member_id.to_string(),
            leader: response.leader.to_string(),
            protocol_name: response.protocol_name.map(|p| p.to_string()),
            members: response
                .members
                .into_iter()
                .map(|mm| (mm.member_id.to_string(), mm.metadata))
                .collect(),
        };
        let Member::Classic(m) = &mut self.member else {
            return Ok(());
        };
        let assignments = match m.handle_join_response(join, Instant::now()) {
            JoinOutcome::RetryNow => return Ok(()),
            JoinOutcome::RetryAfterBackoff => {
                self.runtime.sleep(self.config.retry_backoff).await;
                return Ok(());
            }
            JoinOutcome::Fatal(code) => {
                return Error::check(code, || format!("join group {}", self.config.group_id))
            }
            JoinOutcome::Follower => Vec::new(),
            JoinOutcome::Leader(members) => {
                let assignor = m.protocol().unwrap_or(Assignor::Range);
                let mut topics: BTreeSet<String> = BTreeSet::new();
                for member in &members {
                    topics.extend(member.topics.iter().cloned());
                }
                let counts = self.partition_counts(&topics).await?;
                assignor
                    .assign(&members, &counts)
                    .into_iter()
                    .map(|(member_id, partitions)| {
                        let bytes = member_metadata::encode_assignment(
                            &Assignment {
                                partitions,
                                user_data: None,
                            },
                            member_metadata::CURRENT_VERSION,
                        );
                        SyncGroupRequestAssignment::default()
                            .with_member_id(str_bytes(&member_id))
                            .with_assignment(bytes)
                    })
                    .collect()
            }
        };
        let Member::Classic(m) = &self.member else {
            return Ok(());
        };
        let request = SyncGroupRequest::default()
            .with_group_id(group)
            .with_generation_id(m.generation())
            .with_member_id(str_bytes(m.member_id()))
            .with_group_instance_id(self.config.group_instance_id.as_deref().map(str_bytes))
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(m.protocol().map(|a| StrBytes::from_static_str(a.name())))
            .with_assignments(assignments);
        let response = self.coordinator.request(&request).await?;
        let Member::Classic(m) = &mut self.member else {
            return Ok(());
        };
        let outcome =
            m.handle_sync_response(response.error_code, &response.assignment, Instant::now());
        self.on_outcome(outcome, "sync").await
    }

    /// Partition counts of `topics` that exist (others are left out: nothing to assign).
    async fn partition_counts(
        &mut self,
        topics: &BTreeSet<String>,
    ) -> Result<BTreeMap<String, i32>> {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let found = crate::admin::metadata(&mut self.coordinator, Some(&names), false).await?;
        Ok(found
            .into_iter()
            .filter(|t| t.error_code == 0 && !t.partitions.is_empty())
            .map(|t| {
                let count = t.partition_count();
                (t.name, count)
            })
            .collect())
    }

    async fn drive_consumer_protocol(&mut self) -> Result<()> {
        for _ in 0..MAX_ROUND_TRIPS {
            self.dispatch_events().await?;
            let Member::Consumer(m) = &mut self.member else {
                return Ok(());
            };
            let Some(hb) = m.poll_heartbeat(Instant::now()) else {
                return Ok(());
            };
            let leaving = hb.member_epoch == -1;
            if !leaving && self.topic_ids.len() < self.config.topics.len() {
                self.refresh_topic_ids().await?;
            }
            let owned = self.to_topic_ids(&hb.owned);
            let request = ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes(&self.config.group_id)))
                .with_member_id(str_bytes(&hb.member_id))
                .with_member_epoch(hb.member_epoch)
                .with_instance_id(self.config.group_instance_id.as_deref().map(str_bytes))
                .with_rebalance_timeout_ms(duration_ms(self.config.rebalance_timeout))
                .with_subscribed_topic_names(Some(
                    hb.topics.iter().map(|t| TopicName(str_bytes(t))).collect(),
                ))
                .with_topic_partitions(Some(owned));
            let response = match self.coordinator.request(&request).await {
                Ok(r) => r,
                Err(e) => {
                    if let Member::Consumer(m) = &mut self.member {
                        m.handle_heartbeat_failure(Instant::now());
                    }
                    return Err(e);
                }
            };
            let assignment = match response.assignment {
                Some(a) => {
                    let unknown = a
                        .topic_partitions
                        .iter()
                        .any(|t| !self.topic_names.contains_key(&t.topic_id));
                    if unknown {
                        self.refresh_topic_ids().await?;
                    }
                    let mut out = Vec::new();
                    for t in a.topic_partitions {
                        // A topic we cannot name (deleted meanwhile) cannot be fetched.
                        if let Some(name) = self.topic_names.get(&t.topic_id) {
                            out.extend(
                                t.partitions
                                    .iter()
                                    .map(|p| TopicPartition::new(name.clone(), *p)),
                            );
                        }
                    }
                    Some(out)
                }
                None => None,
            };
            let Member::Consumer(m) = &mut self.member else {
                return Ok(());
            };
            if response.error_code == 0 {
                m.handle_member_id(response.member_id.as_deref().unwrap_or_default());
            }
            let result = m.handle_heartbeat_response(
                response.error_code,
                response.member_epoch,
                response.heartbeat_interval_ms,
                assignment,
                Instant::now(),
            );
            if let Err(code) = result {
                let message = response.error_message.map(|m| m.to_string());
                self.dispatch_events().await?;
                return Error::check(code, || match message {
                    Some(msg) => format!(
                        "consumer group heartbeat in {}: {msg}",
                        self.config.group_id
                    ),
                    None => format!("consumer group heartbeat in {}", self.config.group_id),
                });
            }
            if leaving || m.state() == EpochState::Left {
                self.dispatch_events().await?;
                return Ok(());
            }
        }
        Err(Error::Protocol(format!(
            "group {} did not settle after {MAX_ROUND_TRIPS} heartbeats",
            self.config.group_id
        )))
    }

    fn to_topic_ids(&self, partitions: &[TopicPartition]) -> Vec<TopicPartitions> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        by_topic
            .into_iter()
            .filter_map(|(topic, partitions)| {
                self.topic_ids.get(topic).map(|id| {
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_partitions(partitions)
                })
            })
            .collect()
    }

    async fn refresh_topic_ids(&mut self) -> Result<()> {
        let topics: Vec<&str> = self.config.topics.iter().map(String::as_str).collect();
        let request = crate::admin::metadata_request(Some(&topics), false);
        let response = self.coordinator.request(&request).await?;
        for t in response.topics {
            if let (Some(name), false) = (t.name, t.topic_id.is_nil()) {
                self.topic_ids.insert(name.0.to_string(), t.topic_id);
                self.topic_names.insert(t.topic_id, name.0.to_string());
            }
        }
        Ok(())
    }

    /// Runs the callbacks for the member's partition changes, keeping the fetcher in step.
    async fn dispatch_events(&mut self) -> Result<()> {
        loop {
            let event = match &mut self.member {
                Member::Classic(m) => m.poll_event(),
                Member::Consumer(m) => m.poll_event(),
            };
            let Some(event) = event else {
                return Ok(());
            };
            match event {
                MemberEvent::Assigned(partitions) => {
                    let mut all = self.consumer.assignment();
                    all.extend(partitions.iter().cloned());
                    self.consumer.assign(all);
                    self.seek_to_committed(&partitions).await?;
                    self.listener.on_assigned(&partitions);
                }
                MemberEvent::Revoked(partitions) => {
                    if self.config.auto_commit_interval.is_some() {
                        self.auto_commit(&partitions).await?;
                    }
                    self.listener.on_revoked(&partitions);
                    self.unassign(&partitions);
                }
                MemberEvent::Lost(partitions) => {
                    self.listener.on_lost(&partitions);
                    self.unassign(&partitions);
                }
            }
        }
    }

    fn unassign(&mut self, partitions: &[TopicPartition]) {
        let gone: BTreeSet<&TopicPartition> = partitions.iter().collect();
        let keep: Vec<TopicPartition> = self
            .consumer
            .assignment()
            .into_iter()
            .filter(|tp| !gone.contains(tp))
            .collect();
        self.consumer.assign(keep);
        for tp in partitions {
            self.committed.remove(tp);
        }
    }

    /// Resumes `partitions` at the group's committed offsets, else per `auto_offset_reset`.
    async fn seek_to_committed(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        let committed = admin::fetch_offsets(
            &mut self.coordinator,
            &self.config.group_id,
            Some(partitions),
        )
        .await?;
        for tp in partitions {
            let to = match (committed.get(tp), self.config.auto_offset_reset) {
                (Some(offset), _) => {
                    self.committed.insert(tp.clone(), *offset);
                    SeekTo::Offset(*offset)
                }
                (None, OffsetReset::Earliest) => SeekTo::Earliest,
                (None, OffsetReset::Latest) => SeekTo::Latest,
                (None, OffsetReset::None) => {
                    return Err(Error::InvalidArgument(format!(
                        "no committed offset for {tp} in group {} and auto.offset.reset is none",
                        self.config.group_id
                    )))
                }
            };
            self.consumer.seek(tp, to)?;
        }
        Ok(())
    }
}

fn duration_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
