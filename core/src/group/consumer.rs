//! One consumer group under the consumer protocol (KIP-848): ConsumerGroupHeartbeat (API 68)
//! and ConsumerGroupDescribe (API 69), with the assignment computed by the broker.
//!
//! # What it models
//!
//! Kafka's `GroupMetadataManager` for a `consumer`-type group, as a sans-IO state machine:
//! - **Members** join with member epoch 0 (v0: the broker makes up the member id when it is
//!   empty; v1+: the client sends its own UUID), heartbeat with their current epoch, leave with
//!   epoch -1, or -2 for a static member (`group.instance.id`) that will come back: its
//!   partitions stay with it until its session expires or a new member with the same instance
//!   id takes its place.
//! - **Epochs.** The *group epoch* rises whenever a member's subscription or the subscribed
//!   topics change. The *target assignment* (what every member should eventually own, from the
//!   group's server assignor, [`Assignor`]) is recomputed when the group epoch is ahead of the
//!   *assignment epoch*. Each member has a *member epoch*: it reaches the assignment epoch once
//!   the member has given up everything that is no longer its.
//! - **Incremental reconciliation**, Kafka's `CurrentAssignmentBuilder`: a member that must give
//!   up partitions is told its assignment without them and stays in
//!   [`MemberState::UnrevokedPartitions`] at its old epoch until a heartbeat's `TopicPartitions`
//!   no longer lists them (the revocation is acknowledged). Only then does it move to the new
//!   epoch and receive partitions, and only those no other member still owns; the rest it waits
//!   for in [`MemberState::UnreleasedPartitions`]. A member that does not acknowledge within its
//!   rebalance timeout is fenced, as is one whose session
//!   (`group.consumer.session.timeout.ms`) runs out; a fenced member's partitions become free.
//!
//! **I22 — within one epoch a partition has at most one owner.** A member owns the partitions of
//! its current assignment: those assigned and those pending revocation. A partition enters a
//! member's current assignment only if no other member's current assignment holds it, and
//! leaves one only when its revocation is acknowledged or the member is fenced. So at every
//! point, and in every epoch, the members' current assignments are disjoint
//! (`tests/group_consumer_props.rs` checks it after every step of random runs).
//!
//! # The four kinds of methods
//!
//! - Getters: [`ConsumerGroup::describe`], [`ConsumerGroup::durable_state`],
//!   [`ConsumerGroup::durable_records`], [`ConsumerGroup::next_deadline`],
//!   [`ConsumerGroup::is_empty`], [`ConsumerGroup::is_deleted`], [`ConsumerGroup::state_name`],
//!   [`ConsumerGroup::validate_offset_commit`].
//! - Inputs, with the time passed in: [`ConsumerGroup::heartbeat`] and
//!   [`ConsumerGroup::handle_timeout`]; [`ConsumerGroup::activate`] after loading;
//!   [`ConsumerGroup::handle_append_failed`] when the records did not become durable.
//! - Mutators: [`ConsumerGroup::replay`] (a typed record) and [`ConsumerGroup::replay_stored`]
//!   (its bytes, from the log), the only ways durable state changes. An input computes the
//!   records for its change, applies each to itself at once (the next heartbeat must see what
//!   this one assigned, I22), and returns them; the caller appends them to
//!   `__consumer_offsets`, feeds them back through `replay_stored` as they become durable
//!   (which only confirms them), and answers then (I20). Loading at startup replays the same
//!   records, so the state after any run equals the replay of its records (I21).
//! - Outputs: the records and response returned by the inputs (the coordinator that owns the
//!   group drains them into its own `poll_*` queues), and [`ConsumerGroup::next_deadline`]
//!   for its timer.
//!
//! Never: reads a clock, does I/O, or lets a request allocate beyond its own size: a member
//! count is bounded by [`ConsumerGroupConfig::max_size`], a regex by
//! [`ConsumerGroupConfig::regex_size_limit_bytes`]. Timers (session and revocation deadlines)
//! are not durable, as in Kafka: after loading, [`ConsumerGroup::activate`] gives every member a
//! fresh session.
//!
//! Topic selection: a member's topics are its subscribed names plus, if it has a regex, every
//! topic whose whole name the regex matches (Kafka's RE2/J `matches()`; the `regex` crate has
//! the same syntax for what RE2/J accepts). An empty regex means no regex (librdkafka 2.1x sends
//! one beside topic names). Topics are what the caller passes in [`TopicMetadata`]; it leaves
//! internal topics out.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use regex::{Regex, RegexBuilder};
use thiserror::Error;

use super::assignor::{Assignment, Assignor};
use super::consumer_records::{
    ConsumerGroupRecord, CurrentMemberAssignmentValue, GroupMetadataValue, MemberMetadataValue,
    MemberState, PartitionMetadataValue, RecordError, RecordKind, TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue, TopicId, TopicMetadataEntry, TopicPartitions,
};
use super::records::GroupRecord;
pub use super::ErrorCode;

/// The member epoch that joins the group.
pub const JOIN_EPOCH: i32 = 0;
/// The member epoch that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// The member epoch with which a static member leaves for now, keeping its partitions.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Settings of consumer-protocol groups (broker configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms`: how often members heartbeat.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a member silent this long is fenced.
    pub session_timeout_ms: i32,
    /// `group.consumer.assignors`: the assignors members may ask for; the first is the default.
    pub assignors: Vec<Assignor>,
    /// `group.consumer.max.size`: members per group. Kafka's default is unbounded; ours is
    /// 1000 (as the classic `group.max.size` here) so a flood of joins has a bounded cost.
    pub max_size: usize,
    /// Compiled size limit of a subscription regex (`RegexBuilder::size_limit`).
    pub regex_size_limit_bytes: usize,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            heartbeat_interval_ms: 5_000,
            session_timeout_ms: 45_000,
            assignors: vec![Assignor::Uniform, Assignor::Range],
            max_size: 1_000,
            regex_size_limit_bytes: 1 << 20,
        }
    }
}

/// A `group.consumer.assignors` entry that names no assignor.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown consumer group assignor {0:?} (known: uniform, range)")]
pub struct UnknownAssignor(pub String);

impl ConsumerGroupConfig {
    /// Parses `group.consumer.assignors` (names, first is the default).
    pub fn parse_assignors(names: &[&str]) -> Result<Vec<Assignor>, UnknownAssignor> {
        let mut out = Vec::new();
        for n in names {
            let a = Assignor::from_name(n.trim()).ok_or_else(|| UnknownAssignor(n.to_string()))?;
            if !out.contains(&a) {
                out.push(a);
            }
        }
        if out.is_empty() {
            return Err(UnknownAssignor(String::new()));
        }
        Ok(out)
    }

    fn default_assignor(&self) -> Assignor {
        self.assignors.first().copied().unwrap_or(Assignor::Uniform)
    }
}

/// One topic as the broker knows it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicInfo {
    /// Its id.
    pub topic_id: TopicId,
    /// Its partition count.
    pub partition_count: i32,
}

/// The broker's (non-internal) topics, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Name → id and partition count.
    pub topics: BTreeMap<String, TopicInfo>,
}

impl TopicMetadata {
    /// No topics.
    pub fn new() -> Self {
        TopicMetadata::default()
    }
}

/// The coordinator's name for the topics it passes to every heartbeat.
pub type TopicPartitionCounts = TopicMetadata;
/// The coordinator's name for a ConsumerGroupHeartbeat request.
pub type HeartbeatRequest = ConsumerGroupHeartbeatRequest;
/// The coordinator's name for a ConsumerGroupHeartbeat answer.
pub type HeartbeatResponse = ConsumerGroupHeartbeatResponse;
/// The coordinator's name for one group of a ConsumerGroupDescribe answer.
pub type DescribedConsumerGroup = ConsumerGroupDescription;

/// A ConsumerGroupDescribe request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeRequest {
    /// The groups to describe.
    pub group_ids: Vec<String>,
}

/// A ConsumerGroupDescribe answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeResponse {
    /// Per group, in request order.
    pub groups: Vec<ConsumerGroupDescription>,
}

/// A ConsumerGroupHeartbeat request (v0/v1), already decoded and pre-checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupHeartbeatRequest {
    /// The request's API version (0 or 1).
    pub version: i16,
    /// The group.
    pub group_id: String,
    /// The member id (v0: empty on join asks the broker for one).
    pub member_id: String,
    /// 0 joins, -1 leaves, -2 leaves a static member for now, otherwise the current epoch.
    pub member_epoch: i32,
    /// `group.instance.id`, for static membership.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// The rebalance timeout; -1 means unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names; `None` means unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed regex; `None` means unchanged, empty means none.
    pub subscribed_topic_regex: Option<String>,
    /// The server assignor asked for; `None` means unchanged.
    pub server_assignor: Option<String>,
    /// The partitions the member owns now; `None` means unchanged.
    pub topic_partitions: Option<Vec<TopicPartitions>>,
    /// The client id from the request header.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
}

/// A ConsumerGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupHeartbeatResponse {
    /// The error code (`NONE` in what [`ConsumerGroup::heartbeat`] returns; set by the
    /// coordinator when it answers an error, or when the records failed to append).
    pub error_code: ErrorCode,
    /// The member id (made up by the broker on a v0 join with an empty id).
    pub member_id: String,
    /// The member epoch to send next.
    pub member_epoch: i32,
    /// How long to wait before the next heartbeat.
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, only when it changed (or on a join or full request).
    pub assignment: Option<Vec<TopicPartitions>>,
}

impl ConsumerGroupHeartbeatResponse {
    /// An answer carrying only an error.
    pub fn error(error_code: ErrorCode) -> Self {
        ConsumerGroupHeartbeatResponse {
            error_code,
            member_epoch: -1,
            ..Default::default()
        }
    }
}

/// The group's state as ConsumerGroupDescribe reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment.
    Assigning,
    /// Some member has not reached the target assignment.
    Reconciling,
    /// Every member owns its target at the assignment epoch.
    Stable,
    /// The group does not exist (describe of an unknown group id).
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

/// Partitions of one topic, with its name, for describe output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedTopicPartitions {
    /// The topic id.
    pub topic_id: TopicId,
    /// The topic name ("" if the group no longer knows it).
    pub topic_name: String,
    /// The partitions.
    pub partitions: Vec<i32>,
}

/// One member in ConsumerGroupDescribe output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Its instance id, if static.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its member epoch.
    pub member_epoch: i32,
    /// Its reconciliation state.
    pub state: MemberState,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// Its subscribed names.
    pub subscribed_topic_names: Vec<String>,
    /// Its regex, if any.
    pub subscribed_topic_regex: Option<String>,
    /// What it owns and keeps.
    pub assignment: Vec<NamedTopicPartitions>,
    /// What it owns but must revoke.
    pub pending_revocation: Vec<NamedTopicPartitions>,
    /// What it should eventually own.
    pub target_assignment: Vec<NamedTopicPartitions>,
}

/// ConsumerGroupDescribe output for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    /// `NONE`, or GROUP_ID_NOT_FOUND for [`ConsumerGroupDescription::not_found`].
    pub error_code: ErrorCode,
    /// The group.
    pub group_id: String,
    /// Its state.
    pub state: ConsumerGroupState,
    /// The group epoch.
    pub group_epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// The server assignor in use.
    pub assignor_name: &'static str,
    /// Members, by member id.
    pub members: Vec<MemberDescription>,
}

impl ConsumerGroupDescription {
    /// The answer for a group id that names no consumer-protocol group.
    pub fn not_found(group_id: &str) -> Self {
        ConsumerGroupDescription {
            error_code: ErrorCode::GROUP_ID_NOT_FOUND,
            group_id: group_id.to_string(),
            state: ConsumerGroupState::Dead,
            group_epoch: -1,
            assignment_epoch: -1,
            assignor_name: "",
            members: Vec::new(),
        }
    }
}

/// Why a timer is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineReason {
    /// The member's session ends unless it heartbeats.
    Session,
    /// The member must have acknowledged its revocation by then.
    Revocation,
}

/// The next time [`ConsumerGroup::handle_timeout`] has work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadline {
    /// When, in milliseconds.
    pub at_ms: i64,
    /// Which member.
    pub member_id: String,
    /// What ends then.
    pub reason: DeadlineReason,
}

/// A record that cannot be replayed into this group.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplayError {
    /// The record is another group's.
    #[error("record of group {record:?} replayed into group {group:?}")]
    WrongGroup {
        /// This group.
        group: String,
        /// The record's group.
        record: String,
    },
}

/// A member's current assignment (durable, `ConsumerGroupCurrentMemberAssignment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// The member epoch.
    pub member_epoch: i32,
    /// The epoch before the last bump.
    pub previous_member_epoch: i32,
    /// Its reconciliation state.
    pub state: MemberState,
    /// Owned and kept.
    pub assigned: Assignment,
    /// Owned, to be revoked.
    pub pending_revocation: Assignment,
}

impl CurrentAssignment {
    fn new_member() -> Self {
        CurrentAssignment {
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
        }
    }
}

/// Everything of the group that its records carry; equal after a run and after its replay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DurableState {
    /// The group epoch.
    pub group_epoch: i32,
    /// The subscribed topics' metadata at the last change.
    pub subscribed_topics: Option<PartitionMetadataValue>,
    /// Member metadata by member id.
    pub members: BTreeMap<String, MemberMetadataValue>,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Assignment>,
    /// Current assignment by member id.
    pub current: BTreeMap<String, CurrentAssignment>,
}

/// One consumer-protocol group (see the module docs).
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    group_id: String,
    config: ConsumerGroupConfig,
    durable: DurableState,
    /// The durable state as of the last record the log confirmed (what a failed append
    /// reverts to).
    confirmed: DurableState,
    /// Records applied when emitted, not yet confirmed durable, oldest first.
    unconfirmed: VecDeque<ConsumerGroupRecord>,
    /// Set by the group metadata tombstone: the group was deleted.
    deleted: bool,
    /// Partition → the member whose current assignment holds it (derived from `current`, I22).
    owners: BTreeMap<(TopicId, i32), String>,
    session_deadlines: BTreeMap<String, i64>,
    revocation_deadlines: BTreeMap<String, i64>,
    regex_cache: HashMap<String, Option<Regex>>,
    member_id_counter: u64,
}

impl ConsumerGroup {
    /// An empty group with the default configuration.
    pub fn new(group_id: &str) -> Self {
        Self::with_config(group_id, ConsumerGroupConfig::default())
    }

    /// Sets the session timeout and heartbeat interval (the group's configuration, KIP-848):
    /// used from the next heartbeat on.
    pub fn set_timeouts(&mut self, session_timeout_ms: i32, heartbeat_interval_ms: i32) {
        self.config.session_timeout_ms = session_timeout_ms;
        self.config.heartbeat_interval_ms = heartbeat_interval_ms;
    }

    /// An empty group.
    pub fn with_config(group_id: &str, config: ConsumerGroupConfig) -> Self {
        ConsumerGroup {
            group_id: group_id.to_string(),
            config,
            durable: DurableState::default(),
            confirmed: DurableState::default(),
            unconfirmed: VecDeque::new(),
            deleted: false,
            owners: BTreeMap::new(),
            session_deadlines: BTreeMap::new(),
            revocation_deadlines: BTreeMap::new(),
            regex_cache: HashMap::new(),
            member_id_counter: 0,
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// Whether it has no members.
    pub fn is_empty(&self) -> bool {
        self.durable.members.is_empty()
    }

    /// The durable part of the state (what replaying its records rebuilds).
    pub fn durable_state(&self) -> &DurableState {
        &self.durable
    }

    /// The next deadline of a member's session or revocation, if any.
    pub fn next_deadline(&self) -> Option<Deadline> {
        let session = self
            .session_deadlines
            .iter()
            .map(|(m, &at)| (at, m, DeadlineReason::Session));
        let revocation = self
            .revocation_deadlines
            .iter()
            .map(|(m, &at)| (at, m, DeadlineReason::Revocation));
        session
            .chain(revocation)
            .min_by_key(|(at, m, _)| (*at, (*m).clone()))
            .map(|(at_ms, m, reason)| Deadline {
                at_ms,
                member_id: m.clone(),
                reason,
            })
    }

    /// Arms a session timer for every member that has none (after loading from records).
    pub fn activate(&mut self, now: i64) {
        let session = i64::from(self.config.session_timeout_ms);
        for m in self.durable.members.keys() {
            self.session_deadlines
                .entry(m.clone())
                .or_insert(now.saturating_add(session));
        }
    }

    /// Checks an OffsetCommit's member and epoch against the group, as Kafka does: a
    /// negative epoch (an admin client, or a consumer outside the group) may commit only while
    /// the group has no members; otherwise an unknown member → UNKNOWN_MEMBER_ID, an epoch
    /// ahead of the member's → FENCED_MEMBER_EPOCH, behind it → STALE_MEMBER_EPOCH.
    pub fn validate_offset_commit(&self, member_id: &str, member_epoch: i32) -> ErrorCode {
        if member_epoch < 0 && self.is_empty() {
            return ErrorCode::NONE;
        }
        let Some(cur) = self.durable.current.get(member_id) else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        match member_epoch.cmp(&cur.member_epoch) {
            std::cmp::Ordering::Greater => ErrorCode::FENCED_MEMBER_EPOCH,
            std::cmp::Ordering::Less => ErrorCode::STALE_MEMBER_EPOCH,
            std::cmp::Ordering::Equal => ErrorCode::NONE,
        }
    }

    /// Whether the group metadata tombstone was applied (the group was deleted; the
    /// coordinator drops it).
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// The state's name for ListGroups and DescribeGroups.
    pub fn state_name(&self) -> &'static str {
        self.state().name()
    }

    /// The latest record value per key (key bytes → value bytes), exactly what replaying
    /// the group's records leaves: used to compare durable state and to write the
    /// tombstones that delete the group.
    pub fn durable_records(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut out = BTreeMap::new();
        for kind in durable_kinds(&self.durable) {
            let r = ConsumerGroupRecord {
                group_id: self.group_id.clone(),
                kind,
            };
            if let Some(v) = r.encode_value() {
                out.insert(r.encode_key(), v);
            }
        }
        out
    }

    /// Applies one record read from the log (`__consumer_offsets`): at startup, or when an
    /// append the coordinator made is durable. A record this group emitted itself was applied
    /// when emitted (later heartbeats had to see it, I22); it is only confirmed here.
    pub fn replay_stored(&mut self, record: &GroupRecord) -> Result<(), RecordError> {
        let decoded = ConsumerGroupRecord::decode(&record.key, record.value.as_deref())?;
        if self.unconfirmed.front() == Some(&decoded) {
            self.unconfirmed.pop_front();
            apply_durable(&mut self.confirmed, &decoded.kind);
            return Ok(());
        }
        // Routed here by its group id, so it is ours; a mismatch would be a routing bug.
        let applied = self.replay(&decoded);
        debug_assert!(applied.is_ok(), "record of another group routed here");
        Ok(())
    }

    /// Records this group applied did not become durable: return to the state the log
    /// holds (everything applied since is dropped, as Kafka reverts to its last committed
    /// offset). Members whose heartbeats were not answered retry.
    ///
    /// Relies on the coordinator's order: appends are reported in the order they were made,
    /// and after a failed one every later one fails too (the offsets partition goes offline
    /// for writes, I8), so nothing dropped here becomes durable afterwards.
    pub fn handle_append_failed(&mut self) {
        self.unconfirmed.clear();
        self.durable = self.confirmed.clone();
        self.owners = owners_of(&self.durable);
        let members = &self.durable.members;
        self.session_deadlines
            .retain(|m, _| members.contains_key(m));
        self.revocation_deadlines
            .retain(|m, _| members.contains_key(m));
    }

    /// Handles one ConsumerGroupHeartbeat. Returns the records to append (already applied
    /// here) and the response to send once they are durable, or the error code to answer
    /// (nothing changed then).
    pub fn heartbeat(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        now: i64,
        topics: &TopicMetadata,
    ) -> Result<(Vec<ConsumerGroupRecord>, ConsumerGroupHeartbeatResponse), ErrorCode> {
        self.validate_request(req)?;
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(req, now);
        }
        let mut records = Vec::new();

        // 1. Who is it?
        let member_id = if req.member_epoch == JOIN_EPOCH {
            self.resolve_joining_member(req, now, &mut records)?
        } else {
            self.validate_existing_member(req)?;
            req.member_id.clone()
        };
        let before = self.durable.current.get(&member_id).cloned();

        // 2. Its metadata, and the group epoch if what it subscribes to changed.
        let old_meta = self.durable.members.get(&member_id).cloned();
        let new_meta = merged_metadata(old_meta.as_ref(), req);
        let mut bump = false;
        if old_meta.as_ref() != Some(&new_meta) {
            bump |= old_meta.as_ref().is_none_or(|o| {
                o.subscribed_topic_names != new_meta.subscribed_topic_names
                    || o.subscribed_topic_regex != new_meta.subscribed_topic_regex
                    || o.server_assignor != new_meta.server_assignor
                    || o.rack_id != new_meta.rack_id
            });
            self.emit(
                &mut records,
                RecordKind::MemberMetadata {
                    member_id: member_id.clone(),
                    value: Some(new_meta),
                },
            );
        }
        let subscribed = self.subscribed_topic_metadata(topics);
        let topics_changed = self
            .durable
            .subscribed_topics
            .as_ref()
            .map_or(!subscribed.is_empty(), |s| s.topics != subscribed);
        if bump || topics_changed {
            let epoch = self.durable.group_epoch.saturating_add(1);
            if topics_changed {
                self.emit(
                    &mut records,
                    RecordKind::PartitionMetadata(Some(PartitionMetadataValue {
                        epoch,
                        topics: subscribed,
                    })),
                );
            }
            self.emit(
                &mut records,
                RecordKind::GroupMetadata(Some(GroupMetadataValue { epoch })),
            );
        }
        let session = i64::from(self.config.session_timeout_ms);
        self.session_deadlines
            .insert(member_id.clone(), now.saturating_add(session));

        // 3. The target assignment, if the group epoch moved past it.
        if self.durable.group_epoch > self.durable.assignment_epoch {
            self.update_target(&mut records);
        }

        // 4. Reconcile this member toward its target.
        let current = self
            .durable
            .current
            .get(&member_id)
            .cloned()
            .unwrap_or_else(CurrentAssignment::new_member);
        let owned = req.topic_partitions.as_ref().map(|tps| to_pairs(tps));
        let next = self.reconcile(&member_id, &current, owned.as_ref());
        if before.as_ref() != Some(&next) {
            self.emit(
                &mut records,
                RecordKind::CurrentMemberAssignment {
                    member_id: member_id.clone(),
                    value: Some(to_current_value(&next)),
                },
            );
        }
        if next.state == MemberState::UnrevokedPartitions {
            if current.state != MemberState::UnrevokedPartitions
                || !self.revocation_deadlines.contains_key(&member_id)
            {
                let timeout = self
                    .durable
                    .members
                    .get(&member_id)
                    .map_or(0, |m| i64::from(m.rebalance_timeout_ms.max(0)));
                self.revocation_deadlines
                    .insert(member_id.clone(), now.saturating_add(timeout));
            }
        } else {
            self.revocation_deadlines.remove(&member_id);
        }

        // 5. Answer; the assignment only when it changed, on a join, or on a full request.
        let full_request = req.rebalance_timeout_ms != -1
            && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
            && req.topic_partitions.is_some();
        let changed = before.as_ref().map(|b| &b.assigned) != Some(&next.assigned);
        let assignment = (req.member_epoch == JOIN_EPOCH || full_request || changed)
            .then(|| from_assignment(&next.assigned));
        Ok((
            records,
            ConsumerGroupHeartbeatResponse {
                error_code: ErrorCode::NONE,
                member_id,
                member_epoch: next.member_epoch,
                heartbeat_interval_ms: self.config.heartbeat_interval_ms,
                assignment,
            },
        ))
    }

    /// Fences every member whose session or revocation deadline is at or before `now`,
    /// freeing its partitions. Returns the records (already applied).
    pub fn handle_timeout(&mut self, now: i64) -> Vec<ConsumerGroupRecord> {
        let expired: BTreeSet<String> = self
            .session_deadlines
            .iter()
            .chain(self.revocation_deadlines.iter())
            .filter(|(_, &at)| at <= now)
            .map(|(m, _)| m.clone())
            .collect();
        let mut records = Vec::new();
        for m in expired {
            self.fence(&m, &mut records);
        }
        records
    }

    /// Applies one record of this group: the only way its durable state changes. (The
    /// coordinator feeds log records through [`ConsumerGroup::replay_stored`].)
    pub fn replay(&mut self, record: &ConsumerGroupRecord) -> Result<(), ReplayError> {
        if record.group_id != self.group_id {
            return Err(ReplayError::WrongGroup {
                group: self.group_id.clone(),
                record: record.group_id.clone(),
            });
        }
        self.apply(&record.kind);
        apply_durable(&mut self.confirmed, &record.kind);
        Ok(())
    }

    /// Applies a record to the live state and its derived indexes (not to `confirmed`).
    fn apply(&mut self, kind: &RecordKind) {
        match kind {
            RecordKind::GroupMetadata(None) => {
                self.deleted = true;
                self.owners.clear();
                self.session_deadlines.clear();
                self.revocation_deadlines.clear();
                self.regex_cache.clear();
            }
            RecordKind::GroupMetadata(Some(_)) => self.deleted = false,
            RecordKind::MemberMetadata {
                member_id,
                value: None,
            } => {
                self.session_deadlines.remove(member_id);
                self.revocation_deadlines.remove(member_id);
            }
            RecordKind::CurrentMemberAssignment { member_id, value } => {
                if let Some(old) = self.durable.current.get(member_id) {
                    for tp in pairs(&old.assigned).chain(pairs(&old.pending_revocation)) {
                        if self.owners.get(&tp) == Some(member_id) {
                            self.owners.remove(&tp);
                        }
                    }
                }
                if let Some(v) = value {
                    for tp in v
                        .assigned_partitions
                        .iter()
                        .chain(&v.partitions_pending_revocation)
                    {
                        for p in &tp.partitions {
                            self.owners.insert((tp.topic_id, *p), member_id.clone());
                        }
                    }
                }
            }
            _ => {}
        }
        apply_durable(&mut self.durable, kind);
        if let RecordKind::MemberMetadata { value: None, .. } = kind {
            let live: BTreeSet<&String> = self
                .durable
                .members
                .values()
                .filter_map(|m| m.subscribed_topic_regex.as_ref())
                .collect();
            self.regex_cache.retain(|r, _| live.contains(r));
        }
    }

    /// ConsumerGroupDescribe output.
    pub fn describe(&self) -> ConsumerGroupDescription {
        let d = &self.durable;
        let names: BTreeMap<TopicId, &str> = d
            .subscribed_topics
            .iter()
            .flat_map(|s| s.topics.iter())
            .map(|t| (t.topic_id, t.topic_name.as_str()))
            .collect();
        let named = |a: &Assignment| -> Vec<NamedTopicPartitions> {
            a.iter()
                .filter(|(_, ps)| !ps.is_empty())
                .map(|(t, ps)| NamedTopicPartitions {
                    topic_id: *t,
                    topic_name: names.get(t).copied().unwrap_or("").to_string(),
                    partitions: ps.iter().copied().collect(),
                })
                .collect()
        };
        let empty = Assignment::new();
        let members: Vec<MemberDescription> = d
            .members
            .iter()
            .map(|(id, meta)| {
                let cur = d.current.get(id);
                MemberDescription {
                    member_id: id.clone(),
                    instance_id: meta.instance_id.clone(),
                    rack_id: meta.rack_id.clone(),
                    member_epoch: cur.map_or(0, |c| c.member_epoch),
                    state: cur.map_or(MemberState::Stable, |c| c.state),
                    client_id: meta.client_id.clone(),
                    client_host: meta.client_host.clone(),
                    subscribed_topic_names: meta.subscribed_topic_names.clone(),
                    subscribed_topic_regex: meta.subscribed_topic_regex.clone(),
                    assignment: named(cur.map_or(&empty, |c| &c.assigned)),
                    pending_revocation: named(cur.map_or(&empty, |c| &c.pending_revocation)),
                    target_assignment: named(d.target.get(id).unwrap_or(&empty)),
                }
            })
            .collect();
        ConsumerGroupDescription {
            error_code: ErrorCode::NONE,
            group_id: self.group_id.clone(),
            state: self.state(),
            group_epoch: d.group_epoch,
            assignment_epoch: d.assignment_epoch,
            assignor_name: self.current_assignor().name(),
            members,
        }
    }

    fn state(&self) -> ConsumerGroupState {
        let d = &self.durable;
        if d.members.is_empty() {
            ConsumerGroupState::Empty
        } else if d.group_epoch > d.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if d.current.values().any(|c| {
            (c.member_epoch != d.assignment_epoch && c.member_epoch != STATIC_LEAVE_EPOCH)
                || c.state != MemberState::Stable
        }) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    // ---- internals ----

    fn emit(&mut self, records: &mut Vec<ConsumerGroupRecord>, kind: RecordKind) {
        let record = ConsumerGroupRecord {
            group_id: self.group_id.clone(),
            kind,
        };
        // Applied now, so the next heartbeat sees it (I22); confirmed by `replay_stored`.
        self.apply(&record.kind);
        self.unconfirmed.push_back(record.clone());
        records.push(record);
    }

    fn validate_request(&mut self, req: &ConsumerGroupHeartbeatRequest) -> Result<(), ErrorCode> {
        if req.group_id.is_empty() || req.group_id != self.group_id {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if req.instance_id.as_deref() == Some("") || req.rack_id.as_deref() == Some("") {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if req.member_epoch < STATIC_LEAVE_EPOCH {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if req.member_id.is_empty() && (req.version >= 1 || req.member_epoch != JOIN_EPOCH) {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if req.member_epoch == JOIN_EPOCH {
            if req.rebalance_timeout_ms == -1 {
                return Err(ErrorCode::INVALID_REQUEST);
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return Err(ErrorCode::INVALID_REQUEST);
            }
            if req.topic_partitions.as_ref().is_some_and(|t| !t.is_empty()) {
                return Err(ErrorCode::INVALID_REQUEST);
            }
        }
        if req.rebalance_timeout_ms < -1 {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if let Some(name) = &req.server_assignor {
            match Assignor::from_name(name) {
                Some(a) if self.config.assignors.contains(&a) => {}
                _ => return Err(ErrorCode::UNSUPPORTED_ASSIGNOR),
            }
        }
        if let Some(r) = req
            .subscribed_topic_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            if self.compiled_regex(r).is_none() {
                return Err(ErrorCode::INVALID_REGULAR_EXPRESSION);
            }
        }
        Ok(())
    }

    fn compiled_regex(&mut self, regex: &str) -> Option<&Regex> {
        let limit = self.config.regex_size_limit_bytes;
        self.regex_cache
            .entry(regex.to_string())
            .or_insert_with(|| {
                let build = |pattern: &str| {
                    RegexBuilder::new(pattern)
                        .size_limit(limit)
                        .dfa_size_limit(limit)
                        .build()
                        .ok()
                };
                // The regex must stand on its own first, so that wrapping it cannot change
                // its meaning (`a)|(b` would otherwise become `^(?:a)|(b)$`).
                build(regex)?;
                // RE2/J `matches()`: the whole topic name must match.
                build(&format!("^(?:{regex})$"))
            })
            .as_ref()
    }

    fn resolve_joining_member(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        now: i64,
        records: &mut Vec<ConsumerGroupRecord>,
    ) -> Result<String, ErrorCode> {
        let member_id = if req.member_id.is_empty() {
            self.generate_member_id(now)
        } else {
            req.member_id.clone()
        };
        if let Some(instance) = &req.instance_id {
            let holder = self
                .durable
                .members
                .iter()
                .find(|(id, m)| **id != member_id && m.instance_id.as_ref() == Some(instance))
                .map(|(id, _)| id.clone());
            if let Some(old_id) = holder {
                let old = self.durable.current.get(&old_id).cloned();
                if old.as_ref().map(|c| c.member_epoch) != Some(STATIC_LEAVE_EPOCH) {
                    return Err(ErrorCode::UNRELEASED_INSTANCE_ID);
                }
                self.replace_static_member(&old_id, &member_id, old, records);
                return Ok(member_id);
            }
        }
        if !self.durable.members.contains_key(&member_id)
            && self.durable.members.len() >= self.config.max_size
        {
            return Err(ErrorCode::GROUP_MAX_SIZE_REACHED);
        }
        Ok(member_id)
    }

    /// A new member with a static member's instance id takes over its metadata, target and
    /// current assignment (so its partitions never have two owners, I22).
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: &str,
        old_current: Option<CurrentAssignment>,
        records: &mut Vec<ConsumerGroupRecord>,
    ) {
        let meta = self.durable.members.get(old_id).cloned();
        let target = self.durable.target.get(old_id).cloned();
        self.remove_member_records(old_id, records);
        if let Some(meta) = meta {
            self.emit(
                records,
                RecordKind::MemberMetadata {
                    member_id: new_id.to_string(),
                    value: Some(meta),
                },
            );
        }
        if let Some(target) = target {
            self.emit(
                records,
                RecordKind::TargetAssignmentMember {
                    member_id: new_id.to_string(),
                    value: Some(TargetAssignmentMemberValue {
                        topic_partitions: from_assignment(&target),
                    }),
                },
            );
        }
        if let Some(mut cur) = old_current {
            cur.member_epoch = cur.previous_member_epoch;
            self.emit(
                records,
                RecordKind::CurrentMemberAssignment {
                    member_id: new_id.to_string(),
                    value: Some(to_current_value(&cur)),
                },
            );
        }
    }

    fn generate_member_id(&mut self, now: i64) -> String {
        loop {
            self.member_id_counter = self.member_id_counter.wrapping_add(1);
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in self
                .group_id
                .bytes()
                .chain(now.to_be_bytes())
                .chain(self.member_id_counter.to_be_bytes())
            {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            let id = format!("{h:016x}{:016x}", self.member_id_counter);
            if !self.durable.members.contains_key(&id) {
                return id;
            }
        }
    }

    fn validate_existing_member(
        &self,
        req: &ConsumerGroupHeartbeatRequest,
    ) -> Result<(), ErrorCode> {
        let meta = self
            .durable
            .members
            .get(&req.member_id)
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if req.instance_id.is_some() && meta.instance_id != req.instance_id {
            return Err(ErrorCode::FENCED_INSTANCE_ID);
        }
        let cur = self
            .durable
            .current
            .get(&req.member_id)
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if req.member_epoch > cur.member_epoch {
            return Err(ErrorCode::FENCED_MEMBER_EPOCH);
        }
        if req.member_epoch < cur.member_epoch {
            // A member that lost the response of its last epoch bump may retry with the
            // previous epoch, as long as it owns nothing beyond what it is assigned now.
            let subset = req.topic_partitions.as_ref().is_none_or(|tps| {
                to_pairs(tps)
                    .iter()
                    .all(|(t, p)| cur.assigned.get(t).is_some_and(|ps| ps.contains(p)))
            });
            if req.member_epoch != cur.previous_member_epoch || !subset {
                return Err(ErrorCode::FENCED_MEMBER_EPOCH);
            }
        }
        Ok(())
    }

    fn leave(
        &mut self,
        req: &ConsumerGroupHeartbeatRequest,
        now: i64,
    ) -> Result<(Vec<ConsumerGroupRecord>, ConsumerGroupHeartbeatResponse), ErrorCode> {
        let meta = self
            .durable
            .members
            .get(&req.member_id)
            .cloned()
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if req.instance_id.is_some() && meta.instance_id != req.instance_id {
            return Err(ErrorCode::FENCED_INSTANCE_ID);
        }
        let mut records = Vec::new();
        if req.member_epoch == STATIC_LEAVE_EPOCH && meta.instance_id.is_some() {
            // The static member keeps its partitions until its session expires or a new
            // member with its instance id replaces it.
            if let Some(mut cur) = self.durable.current.get(&req.member_id).cloned() {
                if cur.member_epoch != STATIC_LEAVE_EPOCH {
                    cur.previous_member_epoch = cur.member_epoch;
                    cur.member_epoch = STATIC_LEAVE_EPOCH;
                    self.emit(
                        &mut records,
                        RecordKind::CurrentMemberAssignment {
                            member_id: req.member_id.clone(),
                            value: Some(to_current_value(&cur)),
                        },
                    );
                }
            }
            let session = i64::from(self.config.session_timeout_ms);
            self.session_deadlines
                .insert(req.member_id.clone(), now.saturating_add(session));
            self.revocation_deadlines.remove(&req.member_id);
        } else {
            self.fence(&req.member_id, &mut records);
        }
        Ok((
            records,
            ConsumerGroupHeartbeatResponse {
                error_code: ErrorCode::NONE,
                member_id: req.member_id.clone(),
                member_epoch: req.member_epoch,
                heartbeat_interval_ms: self.config.heartbeat_interval_ms,
                assignment: None,
            },
        ))
    }

    /// Removes a member and bumps the group epoch so the others get its partitions.
    fn fence(&mut self, member_id: &str, records: &mut Vec<ConsumerGroupRecord>) {
        if !self.durable.members.contains_key(member_id) {
            return;
        }
        self.remove_member_records(member_id, records);
        let epoch = self.durable.group_epoch.saturating_add(1);
        self.emit(
            records,
            RecordKind::GroupMetadata(Some(GroupMetadataValue { epoch })),
        );
    }

    fn remove_member_records(&mut self, member_id: &str, records: &mut Vec<ConsumerGroupRecord>) {
        self.emit(
            records,
            RecordKind::CurrentMemberAssignment {
                member_id: member_id.to_string(),
                value: None,
            },
        );
        self.emit(
            records,
            RecordKind::TargetAssignmentMember {
                member_id: member_id.to_string(),
                value: None,
            },
        );
        self.emit(
            records,
            RecordKind::MemberMetadata {
                member_id: member_id.to_string(),
                value: None,
            },
        );
    }

    /// The metadata of every existing topic some member subscribes to, by name.
    fn subscribed_topic_metadata(&mut self, topics: &TopicMetadata) -> Vec<TopicMetadataEntry> {
        let metas: Vec<MemberMetadataValue> = self.durable.members.values().cloned().collect();
        let mut names: BTreeSet<&str> = BTreeSet::new();
        for m in &metas {
            for n in &m.subscribed_topic_names {
                if topics.topics.contains_key(n) {
                    names.insert(n);
                }
            }
            if let Some(r) = &m.subscribed_topic_regex {
                if let Some(re) = self.compiled_regex(r) {
                    names.extend(
                        topics
                            .topics
                            .keys()
                            .filter(|t| re.is_match(t))
                            .map(String::as_str),
                    );
                }
            }
        }
        names
            .into_iter()
            .filter_map(|n| {
                topics.topics.get(n).map(|info| TopicMetadataEntry {
                    topic_id: info.topic_id,
                    topic_name: n.to_string(),
                    partition_count: info.partition_count,
                    partition_racks: Vec::new(),
                })
            })
            .collect()
    }

    /// The assignor members asked for most (ties: by name), else the configured default.
    fn current_assignor(&self) -> Assignor {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.durable.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .and_then(|(name, _)| Assignor::from_name(name))
            .filter(|a| self.config.assignors.contains(a))
            .unwrap_or_else(|| self.config.default_assignor())
    }

    fn update_target(&mut self, records: &mut Vec<ConsumerGroupRecord>) {
        let known: Vec<TopicMetadataEntry> = self
            .durable
            .subscribed_topics
            .as_ref()
            .map(|s| s.topics.clone())
            .unwrap_or_default();
        let metas: Vec<(String, MemberMetadataValue)> = self
            .durable
            .members
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut subscriptions: BTreeMap<String, BTreeSet<TopicId>> = BTreeMap::new();
        for (id, m) in &metas {
            let mut ids: BTreeSet<TopicId> = known
                .iter()
                .filter(|t| m.subscribed_topic_names.contains(&t.topic_name))
                .map(|t| t.topic_id)
                .collect();
            if let Some(r) = &m.subscribed_topic_regex {
                if let Some(re) = self.compiled_regex(r) {
                    ids.extend(
                        known
                            .iter()
                            .filter(|t| re.is_match(&t.topic_name))
                            .map(|t| t.topic_id),
                    );
                }
            }
            subscriptions.insert(id.clone(), ids);
        }
        let counts: BTreeMap<TopicId, i32> = known
            .iter()
            .map(|t| (t.topic_id, t.partition_count))
            .collect();
        let assignor = self.current_assignor();
        let target = assignor.assign(&subscriptions, &counts, &self.durable.target);
        for (member_id, a) in target {
            if self.durable.target.get(&member_id) != Some(&a) {
                self.emit(
                    records,
                    RecordKind::TargetAssignmentMember {
                        member_id,
                        value: Some(TargetAssignmentMemberValue {
                            topic_partitions: from_assignment(&a),
                        }),
                    },
                );
            }
        }
        let assignment_epoch = self.durable.group_epoch;
        self.emit(
            records,
            RecordKind::TargetAssignmentMetadata(Some(TargetAssignmentMetadataValue {
                assignment_epoch,
            })),
        );
    }

    /// The next current assignment of a member (Kafka's `CurrentAssignmentBuilder`).
    fn reconcile(
        &self,
        member_id: &str,
        cur: &CurrentAssignment,
        owned: Option<&BTreeSet<(TopicId, i32)>>,
    ) -> CurrentAssignment {
        let target_epoch = self.durable.assignment_epoch;
        match cur.state {
            MemberState::Stable | MemberState::Unknown if cur.member_epoch == target_epoch => {
                cur.clone()
            }
            MemberState::UnrevokedPartitions => {
                // Acknowledged only by a heartbeat that lists what it owns, none of them
                // pending revocation.
                let still_owns =
                    owned.is_none_or(|o| pairs(&cur.pending_revocation).any(|tp| o.contains(&tp)));
                if still_owns {
                    cur.clone()
                } else {
                    self.next_assignment(member_id, cur)
                }
            }
            _ => self.next_assignment(member_id, cur),
        }
    }

    fn next_assignment(&self, member_id: &str, cur: &CurrentAssignment) -> CurrentAssignment {
        let target_epoch = self.durable.assignment_epoch;
        let empty = Assignment::new();
        let target = self.durable.target.get(member_id).unwrap_or(&empty);
        let assigned: BTreeSet<(TopicId, i32)> = pairs(&cur.assigned).collect();
        let wanted: BTreeSet<(TopicId, i32)> = pairs(target).collect();
        let kept: BTreeSet<(TopicId, i32)> = assigned.intersection(&wanted).copied().collect();
        let revoke: BTreeSet<(TopicId, i32)> = assigned.difference(&wanted).copied().collect();
        if !revoke.is_empty() {
            return CurrentAssignment {
                member_epoch: cur.member_epoch,
                previous_member_epoch: cur.previous_member_epoch,
                state: MemberState::UnrevokedPartitions,
                assigned: from_pairs(&kept),
                pending_revocation: from_pairs(&revoke),
            };
        }
        let mut next = kept;
        let mut unreleased = false;
        for tp in wanted.difference(&assigned) {
            // I22: only a partition nobody else holds may be given.
            match self.owners.get(tp) {
                Some(owner) if owner != member_id => unreleased = true,
                _ => {
                    next.insert(*tp);
                }
            }
        }
        let previous_member_epoch = if cur.member_epoch != target_epoch {
            cur.member_epoch
        } else {
            cur.previous_member_epoch
        };
        CurrentAssignment {
            member_epoch: target_epoch,
            previous_member_epoch,
            state: if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            },
            assigned: from_pairs(&next),
            pending_revocation: Assignment::new(),
        }
    }
}

/// Applies a record to durable state: every record sets an absolute value (or removes one).
fn apply_durable(d: &mut DurableState, kind: &RecordKind) {
    match kind {
        RecordKind::GroupMetadata(Some(v)) => d.group_epoch = v.epoch,
        // The group was deleted.
        RecordKind::GroupMetadata(None) => *d = DurableState::default(),
        RecordKind::PartitionMetadata(v) => d.subscribed_topics = v.clone(),
        RecordKind::MemberMetadata { member_id, value } => match value {
            Some(v) => {
                d.members.insert(member_id.clone(), v.clone());
            }
            None => {
                d.members.remove(member_id);
            }
        },
        RecordKind::TargetAssignmentMetadata(v) => {
            d.assignment_epoch = v.as_ref().map_or(0, |v| v.assignment_epoch)
        }
        RecordKind::TargetAssignmentMember { member_id, value } => match value {
            Some(v) => {
                d.target
                    .insert(member_id.clone(), to_assignment(&v.topic_partitions));
            }
            None => {
                d.target.remove(member_id);
            }
        },
        RecordKind::CurrentMemberAssignment { member_id, value } => match value {
            Some(v) => {
                d.current.insert(
                    member_id.clone(),
                    CurrentAssignment {
                        member_epoch: v.member_epoch,
                        previous_member_epoch: v.previous_member_epoch,
                        state: v.state,
                        assigned: to_assignment(&v.assigned_partitions),
                        pending_revocation: to_assignment(&v.partitions_pending_revocation),
                    },
                );
            }
            None => {
                d.current.remove(member_id);
            }
        },
    }
}

/// The records whose replay rebuilds `d` (one per key).
fn durable_kinds(d: &DurableState) -> Vec<RecordKind> {
    let mut out = Vec::new();
    if d.group_epoch != 0 || !d.members.is_empty() {
        out.push(RecordKind::GroupMetadata(Some(GroupMetadataValue {
            epoch: d.group_epoch,
        })));
    }
    if let Some(s) = &d.subscribed_topics {
        out.push(RecordKind::PartitionMetadata(Some(s.clone())));
    }
    for (m, v) in &d.members {
        out.push(RecordKind::MemberMetadata {
            member_id: m.clone(),
            value: Some(v.clone()),
        });
    }
    if d.assignment_epoch != 0 {
        out.push(RecordKind::TargetAssignmentMetadata(Some(
            TargetAssignmentMetadataValue {
                assignment_epoch: d.assignment_epoch,
            },
        )));
    }
    for (m, a) in &d.target {
        out.push(RecordKind::TargetAssignmentMember {
            member_id: m.clone(),
            value: Some(TargetAssignmentMemberValue {
                topic_partitions: from_assignment(a),
            }),
        });
    }
    for (m, c) in &d.current {
        out.push(RecordKind::CurrentMemberAssignment {
            member_id: m.clone(),
            value: Some(to_current_value(c)),
        });
    }
    out
}

/// Partition → holder, from the members' current assignments (I22).
fn owners_of(d: &DurableState) -> BTreeMap<(TopicId, i32), String> {
    let mut out = BTreeMap::new();
    for (m, c) in &d.current {
        for tp in pairs(&c.assigned).chain(pairs(&c.pending_revocation)) {
            out.insert(tp, m.clone());
        }
    }
    out
}

fn merged_metadata(
    old: Option<&MemberMetadataValue>,
    req: &ConsumerGroupHeartbeatRequest,
) -> MemberMetadataValue {
    let regex = match req.subscribed_topic_regex.as_deref() {
        Some("") => None,
        Some(r) => Some(r.to_string()),
        None => old.and_then(|o| o.subscribed_topic_regex.clone()),
    };
    MemberMetadataValue {
        instance_id: req
            .instance_id
            .clone()
            .or_else(|| old.and_then(|o| o.instance_id.clone())),
        rack_id: req
            .rack_id
            .clone()
            .or_else(|| old.and_then(|o| o.rack_id.clone())),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        subscribed_topic_names: match &req.subscribed_topic_names {
            Some(n) => {
                let mut n = n.clone();
                n.sort();
                n.dedup();
                n
            }
            None => old
                .map(|o| o.subscribed_topic_names.clone())
                .unwrap_or_default(),
        },
        subscribed_topic_regex: regex,
        rebalance_timeout_ms: if req.rebalance_timeout_ms == -1 {
            old.map_or(-1, |o| o.rebalance_timeout_ms)
        } else {
            req.rebalance_timeout_ms
        },
        server_assignor: req
            .server_assignor
            .clone()
            .or_else(|| old.and_then(|o| o.server_assignor.clone())),
    }
}

fn pairs(a: &Assignment) -> impl Iterator<Item = (TopicId, i32)> + '_ {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
}

fn from_pairs(set: &BTreeSet<(TopicId, i32)>) -> Assignment {
    let mut a = Assignment::new();
    for (t, p) in set {
        a.entry(*t).or_default().insert(*p);
    }
    a
}

fn to_pairs(tps: &[TopicPartitions]) -> BTreeSet<(TopicId, i32)> {
    tps.iter()
        .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic_id, *p)))
        .collect()
}

fn to_assignment(tps: &[TopicPartitions]) -> Assignment {
    from_pairs(&to_pairs(tps))
}

fn from_assignment(a: &Assignment) -> Vec<TopicPartitions> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| TopicPartitions {
            topic_id: *t,
            partitions: ps.iter().copied().collect(),
        })
        .collect()
}

fn to_current_value(c: &CurrentAssignment) -> CurrentMemberAssignmentValue {
    CurrentMemberAssignmentValue {
        member_epoch: c.member_epoch,
        previous_member_epoch: c.previous_member_epoch,
        state: c.state,
        assigned_partitions: from_assignment(&c.assigned),
        partitions_pending_revocation: from_assignment(&c.pending_revocation),
    }
}
