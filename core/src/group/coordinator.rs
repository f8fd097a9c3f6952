//! The coordinator of one `__consumer_offsets` partition: request handling, durable
//! application of records, timers. See the module docs of [`super`] for the contract.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::classic::{ClassicGroup, Member};
use super::codes::ErrorCode;
use super::consumer::{ConsumerGroup, ConsumerGroupConfig, TopicPartitionCounts};
use super::consumer_records::ConsumerGroupRecord;
use super::handles::{AppendId, Millis, RequestToken};
use super::messages::*;
use super::records::{
    group_metadata_key, GroupMetadataValue, GroupRecord, MemberMetadata, OffsetCommitValue,
    RecordError, RecordKey,
};
use super::state::{Event, State};
use super::{Group, GroupConfig};

/// Records to append, in order and as one unit, to this coordinator's offsets partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// Report this id to `handle_appended`.
    pub id: AppendId,
    /// The records.
    pub records: Vec<GroupRecord>,
    /// How the batch holding them is written: plain, transactional, or a marker.
    pub kind: AppendKind,
}

/// How an [`Append`] goes to the log, as Kafka writes each (I74). A transactional append or
/// a marker is a batch of its own (its header carries the producer), never merged with
/// others; replaying the log hands each back to the matching `replay_*` method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AppendKind {
    /// An ordinary batch (no producer): [`Coordinator::replay`].
    #[default]
    Plain,
    /// TxnOffsetCommit's records: a transactional batch with this producer id and epoch
    /// ([`Coordinator::replay_transactional`]).
    Transactional {
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
    },
    /// A control batch (no records of ours): the COMMIT or ABORT marker of the producer's
    /// transaction ([`Coordinator::replay_marker`]).
    Marker {
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
        /// The transaction coordinator's epoch, written into the marker.
        coordinator_epoch: i32,
        /// Commit or abort.
        result: TxnResult,
    },
}

/// Why an append did not become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The offsets partition cannot take writes now (offline after a failed sync, shutting
    /// down): COORDINATOR_NOT_AVAILABLE, the client retries.
    Unavailable,
    /// The records exceed the partition's size limit: INVALID_COMMIT_OFFSET_SIZE for a
    /// commit, UNKNOWN_SERVER_ERROR otherwise.
    TooLarge,
    /// Any other storage failure (a full disk, an offline offsets partition):
    /// NOT_COORDINATOR, as Kafka answers a storage error of its offsets log, so the client
    /// finds the coordinator again and retries; once space is freed the retry succeeds.
    Storage,
}

impl AppendError {
    /// The error code an answer that depended on the append gets.
    pub fn code(self, response: &GroupResponse) -> ErrorCode {
        match self {
            AppendError::Unavailable => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            AppendError::TooLarge
                if matches!(
                    response,
                    GroupResponse::OffsetCommit(_) | GroupResponse::TxnOffsetCommit(_)
                ) =>
            {
                ErrorCode::INVALID_COMMIT_OFFSET_SIZE
            }
            AppendError::TooLarge => ErrorCode::UNKNOWN_SERVER_ERROR,
            AppendError::Storage => ErrorCode::NOT_COORDINATOR,
        }
    }
}

/// Why [`Coordinator::poll_timeout`] wants to be woken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeoutReason {
    /// A member's session expires (it did not heartbeat).
    Session {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
    },
    /// A member id handed out with MEMBER_ID_REQUIRED was not used in time.
    PendingMember {
        /// Group id.
        group: String,
        /// Member id.
        member: String,
    },
    /// The join phase ends (rebalance timeout, or the initial rebalance delay).
    JoinPhase {
        /// Group id.
        group: String,
    },
    /// Members that did not sync within the rebalance timeout are removed.
    SyncPhase {
        /// Group id.
        group: String,
    },
    /// Periodic expiry of empty groups' offsets (`offsets.retention.check.interval.ms`).
    OffsetsRetention,
    /// A consumer-protocol group's earliest deadline: a member's session or its revocation
    /// (rebalance) timeout. The group keeps its own deadlines; this is the earliest of them.
    ConsumerGroup {
        /// Group id.
        group: String,
    },
}

/// A committed offset as the coordinator keeps it (durable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Offset.
    pub offset: i64,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Metadata.
    pub metadata: String,
    /// Commit time.
    pub commit_timestamp: Millis,
    /// Explicit expiry, from OffsetCommit v2–v4 retention.
    pub expire_timestamp: Option<Millis>,
}

/// The durable state of one group (I21): what replaying the log gives.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DurableGroup {
    /// The classic group's last GroupMetadataValue.
    pub metadata: Option<GroupMetadataValue>,
    /// A consumer-protocol group's records (key → value).
    pub consumer_records: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Committed offsets by (topic, partition).
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Transactional offsets still pending, by producer id (I73).
    pub pending_txn: BTreeMap<i64, BTreeMap<(String, i32), CommittedOffset>>,
}

/// The whole durable state, by group id.
pub type DurableState = BTreeMap<String, DurableGroup>;

/// What to do when an append's outcome is known.
#[derive(Debug)]
pub(super) enum Completion {
    /// Release this answer (or its failed form).
    Respond(RequestToken, GroupResponse),
    /// The leader's assignment for `generation` of `group`.
    Assignment { group: String, generation: i32 },
    /// A deletion or expiry of `group` (Dead until durable).
    Deletion { group: String },
    /// On failure, make `group` rebalance (a static member's replacement was not stored).
    RebalanceOnFailure { group: String, generation: i32 },
}

#[derive(Debug)]
pub(super) struct PendingAppend {
    pub(super) records: Vec<GroupRecord>,
    pub(super) kind: AppendKind,
    pub(super) groups: Vec<String>,
    completions: Vec<Completion>,
}

/// The coordinator of one `__consumer_offsets` partition.
#[derive(Debug)]
pub struct Coordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: HashMap<String, Group>,
    /// Durable committed offsets by group (I21: written only by `apply`).
    pub(super) offsets: HashMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    pub(super) topics: TopicPartitionCounts,
    pub(super) timers: BTreeSet<(Millis, TimeoutReason)>,
    pub(super) retention_deadline: Option<Millis>,
    /// The timer armed for each consumer-protocol group (its `next_deadline`).
    pub(super) consumer_deadlines: HashMap<String, Millis>,
    pub(super) appends: VecDeque<Append>,
    pub(super) pending: BTreeMap<AppendId, PendingAppend>,
    /// In-flight appends per group (offsets of such a group are not expired meanwhile).
    pub(super) inflight: HashMap<String, u32>,
    pub(super) responses: VecDeque<(RequestToken, GroupResponse)>,
    pub(super) next_append: u64,
    pub(super) member_id_seed: u64,
    pub(super) member_id_counter: u64,
    pub(super) join_seq: u64,
    /// Set by replay: stored members' sessions and the retention timer start at the next `now`.
    pub(super) needs_arming: bool,
    /// Per-group `(session timeout, heartbeat interval)` that differ from the configuration's
    /// (group configurations, KIP-848), as last handed in.
    pub(super) consumer_timeouts: HashMap<String, (i32, i32)>,
    /// Durable transactional offsets not completed yet, by group then producer id (I73:
    /// written only by `apply_txn_*`, invisible to OffsetFetch).
    pub(super) txn_pending: HashMap<String, BTreeMap<i64, TxnOffsets>>,
    /// Log order of the applied offset records: a counter bumped per applied commit (plain or
    /// transactional), the same order live and at replay (compaction keeps the relative order
    /// of what it keeps). Not durable state: only compared, never stored.
    pub(super) apply_seq: u64,
    /// Where in that order each committed offset was applied, by (group, topic, partition).
    pub(super) committed_seq: HashMap<(String, String, i32), u64>,
}

/// One producer's pending transactional offsets in one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TxnOffsets {
    /// The newest producer epoch that wrote to them.
    pub(super) producer_epoch: i16,
    /// Offsets by (topic, partition).
    pub(super) offsets: BTreeMap<(String, i32), CommittedOffset>,
    /// Where in the log order (`apply_seq`) each was applied.
    pub(super) seqs: BTreeMap<(String, i32), u64>,
}

impl Coordinator {
    /// A coordinator with no groups. `member_id_seed` makes generated member ids unique
    /// across restarts: pass a random value (the coordinator draws no randomness itself).
    pub fn new(config: GroupConfig, member_id_seed: u64) -> Coordinator {
        Coordinator {
            config,
            groups: HashMap::new(),
            offsets: HashMap::new(),
            topics: TopicPartitionCounts::new(),
            timers: BTreeSet::new(),
            retention_deadline: None,
            consumer_deadlines: HashMap::new(),
            appends: VecDeque::new(),
            pending: BTreeMap::new(),
            inflight: HashMap::new(),
            responses: VecDeque::new(),
            next_append: 0,
            member_id_seed,
            member_id_counter: 0,
            join_seq: 0,
            needs_arming: true,
            consumer_timeouts: HashMap::new(),
            txn_pending: HashMap::new(),
            apply_seq: 0,
            committed_seq: HashMap::new(),
        }
    }

    // ------------------------------------------------------------ getters

    /// The configuration.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The state of a classic group, if it exists.
    pub fn group_state(&self, group_id: &str) -> Option<State> {
        match self.groups.get(group_id)? {
            Group::Classic(g) => Some(g.state),
            Group::Consumer(_) => None,
        }
    }

    /// A group, for inspection.
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// Ids of every group, sorted.
    pub fn group_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.groups.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Every committed offset as `(group, topic, partition, offset)`, sorted (for the
    /// broker's consumer-lag metrics).
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        let mut out: Vec<_> = self
            .offsets
            .iter()
            .flat_map(|(group, offsets)| {
                offsets.iter().map(move |((topic, partition), committed)| {
                    (group.clone(), topic.clone(), *partition, committed.offset)
                })
            })
            .collect();
        out.sort();
        out
    }

    /// The durable state (I21): stored group metadata, consumer-group records and committed
    /// offsets, by group. Equal to what a fresh coordinator has after replaying every record
    /// this one had made durable.
    pub fn durable_state(&self) -> DurableState {
        let mut out = DurableState::new();
        for (id, g) in &self.groups {
            let d = match g {
                Group::Classic(c) => DurableGroup {
                    metadata: c.stored.clone(),
                    ..DurableGroup::default()
                },
                Group::Consumer(c) => DurableGroup {
                    consumer_records: c.durable_records().clone(),
                    ..DurableGroup::default()
                },
            };
            if d != DurableGroup::default() {
                out.insert(id.clone(), d);
            }
        }
        for (id, offsets) in &self.offsets {
            if !offsets.is_empty() {
                out.entry(id.clone()).or_default().offsets = offsets.clone();
            }
        }
        for (id, producers) in &self.txn_pending {
            let pending = &mut out.entry(id.clone()).or_default().pending_txn;
            for (pid, txn) in producers {
                pending.insert(*pid, txn.offsets.clone());
            }
        }
        out
    }

    // ------------------------------------------------------------ outputs

    /// The next records to append.
    pub fn poll_append(&mut self) -> Option<Append> {
        self.appends.pop_front()
    }

    /// The next answer to send.
    pub fn poll_response(&mut self) -> Option<(RequestToken, GroupResponse)> {
        self.responses.pop_front()
    }

    /// The earliest deadline and its reason.
    pub fn poll_timeout(&self) -> Option<(Millis, TimeoutReason)> {
        self.timers.first().cloned()
    }

    // ------------------------------------------------------------ mutators

    /// Startup: applies one record read back from the offsets partition, in log order. Call
    /// before any request; afterwards call `handle_timeout(now)` once so stored members'
    /// sessions start. A record that does not decode is an error and changes nothing.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), RecordError> {
        let record = GroupRecord {
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
        };
        let decoded = RecordKey::decode(&record.key)?;
        self.apply(&decoded, &record, true)
    }

    /// The topics and partition counts the consumer protocol assigns from.
    pub fn handle_topic_metadata(&mut self, topics: TopicPartitionCounts) {
        self.topics = topics;
    }

    /// The session timeout and heartbeat interval of consumer-protocol group `group_id`
    /// (its group configuration, or the configuration's defaults). The group uses them from
    /// its next heartbeat on: a member's session restarts with the new timeout when it next
    /// heartbeats, and the answer carries the new interval.
    pub fn handle_consumer_group_timeouts(
        &mut self,
        group_id: &str,
        session_timeout_ms: i32,
        heartbeat_interval_ms: i32,
    ) {
        let timeouts = (session_timeout_ms, heartbeat_interval_ms);
        let defaults = (
            self.config.consumer.session_timeout_ms,
            self.config.consumer.heartbeat_interval_ms,
        );
        if timeouts == defaults {
            self.consumer_timeouts.remove(group_id);
        } else {
            self.consumer_timeouts
                .insert(group_id.to_string(), timeouts);
        }
        if let Some(Group::Consumer(c)) = self.groups.get_mut(group_id) {
            c.set_timeouts(session_timeout_ms, heartbeat_interval_ms);
        }
    }

    /// The configuration of consumer-protocol group `group_id`: the coordinator's, with the
    /// timeouts last handed in for it.
    fn consumer_config_for(&self, group_id: &str) -> ConsumerGroupConfig {
        let mut config = self.config.consumer.clone();
        if let Some(&(session, heartbeat)) = self.consumer_timeouts.get(group_id) {
            config.session_timeout_ms = session;
            config.heartbeat_interval_ms = heartbeat;
        }
        config
    }

    // ------------------------------------------------------------ inputs

    /// Handles one request. Its answer comes out of `poll_response` with `token`, at once or
    /// after the records it needs are durable.
    pub fn handle_request(&mut self, token: RequestToken, request: GroupRequest, now: Millis) {
        self.arm(now);
        match request {
            GroupRequest::JoinGroup(r) => self.join_group(token, r, now),
            GroupRequest::SyncGroup(r) => self.sync_group(token, r, now),
            GroupRequest::Heartbeat(r) => {
                let error_code = self.heartbeat(&r, now);
                self.respond(
                    token,
                    GroupResponse::Heartbeat(HeartbeatResponse { error_code }),
                );
            }
            GroupRequest::LeaveGroup(r) => self.leave_group(token, r, now),
            GroupRequest::OffsetCommit(r) => self.offset_commit(token, r, now),
            GroupRequest::OffsetFetch(r) => {
                let resp = self.offset_fetch(&r);
                self.respond(token, GroupResponse::OffsetFetch(resp));
            }
            GroupRequest::OffsetDelete(r) => self.offset_delete(token, r),
            GroupRequest::DeleteGroups(r) => self.delete_groups(token, r, now),
            GroupRequest::ListGroups(r) => {
                let resp = self.list_groups(&r);
                self.respond(token, GroupResponse::ListGroups(resp));
            }
            GroupRequest::DescribeGroups(r) => {
                let resp = self.describe_groups(&r);
                self.respond(token, GroupResponse::DescribeGroups(resp));
            }
            GroupRequest::ConsumerGroupHeartbeat(r) => self.consumer_heartbeat(token, r, now),
            GroupRequest::TxnOffsetCommit(r) => self.txn_offset_commit(token, r, now),
            GroupRequest::CompleteTxn(r) => self.complete_txn(token, r),
            GroupRequest::ConsumerGroupDescribe(r) => {
                let groups = r
                    .group_ids
                    .iter()
                    .map(|id| match self.groups.get(id) {
                        Some(Group::Consumer(c)) => c.describe(),
                        _ => super::consumer::DescribedConsumerGroup::not_found(id),
                    })
                    .collect();
                self.respond(
                    token,
                    GroupResponse::ConsumerGroupDescribe(super::consumer::DescribeResponse {
                        groups,
                    }),
                );
            }
        }
    }

    /// The records of append `id` are durable (`Ok`) or not (`Err`). Report appends in the
    /// order they were polled, which is their order in the log, so that applying them now
    /// equals replaying the log later (I21). Unknown ids are ignored.
    pub fn handle_appended(&mut self, id: AppendId, result: Result<(), AppendError>, now: Millis) {
        self.arm(now);
        let Some(pending) = self.pending.remove(&id) else {
            return;
        };
        for g in &pending.groups {
            if let Some(n) = self.inflight.get_mut(g) {
                *n -= 1;
                if *n == 0 {
                    self.inflight.remove(g);
                }
            }
        }
        match result {
            Ok(()) => {
                match pending.kind {
                    AppendKind::Plain => {}
                    AppendKind::Transactional {
                        producer_id,
                        producer_epoch,
                    } => {
                        for record in &pending.records {
                            let applied =
                                self.apply_txn_record(producer_id, producer_epoch, record, now);
                            debug_assert!(applied.is_ok(), "own txn record failed to apply");
                        }
                    }
                    AppendKind::Marker {
                        producer_id,
                        result,
                        ..
                    } => self.apply_txn_marker(producer_id, result),
                }
                let plain = if pending.kind == AppendKind::Plain {
                    &pending.records[..]
                } else {
                    &[]
                };
                for record in plain {
                    // Our own records always decode; a failure would be a codec bug.
                    match RecordKey::decode(&record.key) {
                        Ok(key) => {
                            let applied = self.apply(&key, record, false);
                            debug_assert!(applied.is_ok(), "own record failed to apply");
                        }
                        Err(e) => debug_assert!(false, "own key failed to decode: {e}"),
                    }
                }
                for c in pending.completions {
                    self.complete(c, None, now);
                }
            }
            Err(e) => {
                // A consumer-protocol group applied its records when it produced them
                // (later heartbeats had to see them); return it to what the log holds.
                for g in &pending.groups {
                    if let Some(Group::Consumer(c)) = self.groups.get_mut(g) {
                        c.handle_append_failed();
                    }
                    self.sync_consumer_timer(g);
                }
                for c in pending.completions {
                    self.complete(c, Some(e), now);
                }
            }
        }
    }

    /// Fires every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Millis) {
        self.arm(now);
        // Bounded: each pass removes a timer; handlers only add timers strictly after `now`.
        while let Some((at, reason)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.remove(&(at, reason.clone()));
            match reason {
                TimeoutReason::Session { group, member } => {
                    self.session_expired(&group, &member, now)
                }
                TimeoutReason::PendingMember { group, member } => {
                    if let Some(Group::Classic(g)) = self.groups.get_mut(&group) {
                        g.pending_members.remove(&member);
                    }
                    self.try_complete_join(&group, now);
                    self.drop_if_unused(&group);
                }
                TimeoutReason::JoinPhase { group } => self.join_phase_expired(&group, now),
                TimeoutReason::SyncPhase { group } => self.sync_phase_expired(&group, now),
                TimeoutReason::ConsumerGroup { group } => {
                    self.consumer_deadlines.remove(&group);
                    self.consumer_group_expired(&group, now);
                }
                TimeoutReason::OffsetsRetention => {
                    self.retention_deadline = None;
                    self.expire_offsets(now);
                    self.set_retention_timer(
                        now + self.config.offsets_retention_check_interval_ms.max(1),
                    );
                }
            }
        }
    }

    // ------------------------------------------------------------ durable application (I21)

    /// Applies one durable record. The only code that writes durable state (I21). With
    /// `startup`, the live state of a classic group is rebuilt from its stored metadata.
    pub(super) fn apply(
        &mut self,
        key: &RecordKey,
        record: &GroupRecord,
        startup: bool,
    ) -> Result<(), RecordError> {
        match key {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => match &record.value {
                Some(v) => {
                    let v = OffsetCommitValue::decode(v)?;
                    self.apply_seq += 1;
                    self.committed_seq
                        .insert((group.clone(), topic.clone(), *partition), self.apply_seq);
                    self.offsets.entry(group.clone()).or_default().insert(
                        (topic.clone(), *partition),
                        CommittedOffset {
                            offset: v.offset,
                            leader_epoch: v.leader_epoch,
                            metadata: v.metadata,
                            commit_timestamp: v.commit_timestamp,
                            expire_timestamp: v.expire_timestamp,
                        },
                    );
                    // An offsets-only group is an empty classic group, as in Kafka.
                    if !self.groups.contains_key(group) {
                        self.groups.insert(
                            group.clone(),
                            Group::Classic(ClassicGroup::new(group, v.commit_timestamp)),
                        );
                    }
                }
                None => {
                    self.committed_seq
                        .remove(&(group.clone(), topic.clone(), *partition));
                    if let Some(map) = self.offsets.get_mut(group) {
                        map.remove(&(topic.clone(), *partition));
                        if map.is_empty() {
                            self.offsets.remove(group);
                        }
                    }
                    // As Kafka: a deletion removes the partition's pending transactional
                    // offsets too, so no later marker brings it back (I73).
                    self.drop_pending_txn_offset(group, topic, *partition);
                    self.drop_if_unused(group);
                }
            },
            RecordKey::GroupMetadata { group } => match &record.value {
                Some(v) => {
                    let v = GroupMetadataValue::decode(v)?;
                    let entry = self
                        .groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::Classic(ClassicGroup::new(group, 0)));
                    if let Group::Consumer(_) = entry {
                        *entry = Group::Classic(ClassicGroup::new(group, 0));
                    }
                    if let Group::Classic(g) = entry {
                        if startup {
                            load_from_stored(g, &v, &mut self.join_seq);
                            self.needs_arming = true;
                        }
                        g.stored = Some(v);
                    }
                }
                None => {
                    if let Some(Group::Classic(g)) = self.groups.get_mut(group) {
                        g.stored = None;
                        if startup {
                            *g = ClassicGroup::new(group, 0);
                        }
                    }
                    self.drop_if_unused(group);
                }
            },
            RecordKey::Consumer { group, .. } => {
                let consumer_config = self.consumer_config_for(group);
                let entry = self.groups.entry(group.clone()).or_insert_with(|| {
                    Group::Consumer(ConsumerGroup::with_config(group, consumer_config.clone()))
                });
                if let Group::Classic(_) = entry {
                    *entry =
                        Group::Consumer(ConsumerGroup::with_config(group, consumer_config.clone()));
                }
                if let Group::Consumer(c) = entry {
                    c.replay_stored(record)?;
                    if c.is_deleted() {
                        self.groups.remove(group);
                    } else if startup {
                        // Loaded members' sessions start at the next `now` (`arm`).
                        self.needs_arming = true;
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes a group that holds nothing: no durable metadata, no offsets, no members, no
    /// handed-out ids, not being deleted, nothing in flight.
    pub(super) fn drop_if_unused(&mut self, group: &str) {
        if self.inflight.contains_key(group)
            || self.offsets.contains_key(group)
            || self.txn_pending.contains_key(group)
        {
            return;
        }
        if let Some(Group::Classic(g)) = self.groups.get(group) {
            if g.stored.is_none()
                && g.members.is_empty()
                && g.pending_members.is_empty()
                && matches!(g.state, State::Empty | State::Dead)
            {
                self.groups.remove(group);
            }
        }
    }

    // ------------------------------------------------------------ plumbing

    pub(super) fn respond(&mut self, token: RequestToken, response: GroupResponse) {
        self.responses.push_back((token, response));
    }

    pub(super) fn append(
        &mut self,
        records: Vec<GroupRecord>,
        groups: Vec<String>,
        completions: Vec<Completion>,
    ) -> AppendId {
        self.append_kind(AppendKind::Plain, records, groups, completions)
    }

    /// [`Self::append`] for a transactional append or a marker.
    pub(super) fn append_kind(
        &mut self,
        kind: AppendKind,
        records: Vec<GroupRecord>,
        groups: Vec<String>,
        completions: Vec<Completion>,
    ) -> AppendId {
        let id = AppendId(self.next_append);
        self.next_append += 1;
        for g in &groups {
            *self.inflight.entry(g.clone()).or_insert(0) += 1;
        }
        self.appends.push_back(Append {
            id,
            records: records.clone(),
            kind,
        });
        self.pending.insert(
            id,
            PendingAppend {
                records,
                kind,
                groups,
                completions,
            },
        );
        id
    }

    pub(super) fn set_timer(
        &mut self,
        slot_old: Option<Millis>,
        new: Option<Millis>,
        reason: TimeoutReason,
    ) {
        if let Some(old) = slot_old {
            self.timers.remove(&(old, reason.clone()));
        }
        if let Some(new) = new {
            self.timers.insert((new, reason));
        }
    }

    pub(super) fn set_retention_timer(&mut self, at: Millis) {
        let old = self.retention_deadline.replace(at);
        self.set_timer(old, Some(at), TimeoutReason::OffsetsRetention);
    }

    /// After a replay, start stored members' sessions and the retention timer at `now`.
    pub(super) fn arm(&mut self, now: Millis) {
        if !self.needs_arming {
            return;
        }
        self.needs_arming = false;
        if self.retention_deadline.is_none() {
            self.set_retention_timer(now + self.config.offsets_retention_check_interval_ms.max(1));
        }
        let ids = self.group_ids(); // sorted: the timers it arms come out in one order
        for gid in ids {
            if let Some(Group::Consumer(c)) = self.groups.get_mut(&gid) {
                c.activate(now);
                self.sync_consumer_timer(&gid);
                continue;
            }
            let members: Vec<(String, i32)> = match self.groups.get(&gid) {
                Some(Group::Classic(g)) => g
                    .members
                    .values()
                    .filter(|m| m.session_deadline.is_none() && m.awaiting_join.is_none())
                    .map(|m| (m.member_id.clone(), m.session_timeout_ms))
                    .collect(),
                _ => continue,
            };
            for (mid, timeout) in members {
                self.touch_session(&gid, &mid, Some(now + i64::from(timeout)));
            }
        }
    }

    /// Sets (or clears) a member's session deadline and its timer.
    pub(super) fn touch_session(&mut self, group: &str, member: &str, deadline: Option<Millis>) {
        let Some(Group::Classic(g)) = self.groups.get_mut(group) else {
            return;
        };
        let Some(m) = g.members.get_mut(member) else {
            return;
        };
        let old = std::mem::replace(&mut m.session_deadline, deadline);
        self.set_timer(
            old,
            deadline,
            TimeoutReason::Session {
                group: group.to_owned(),
                member: member.to_owned(),
            },
        );
    }

    pub(super) fn heartbeat_member(&mut self, group: &str, member: &str, now: Millis) {
        let timeout = match self.groups.get(group) {
            Some(Group::Classic(g)) => match g.members.get(member) {
                Some(m) => m.session_timeout_ms,
                None => return,
            },
            _ => return,
        };
        self.touch_session(group, member, Some(now + i64::from(timeout)));
    }

    pub(super) fn set_group_deadline(
        &mut self,
        group: &str,
        join: Option<Option<Millis>>,
        sync: Option<Option<Millis>>,
    ) {
        let Some(Group::Classic(g)) = self.groups.get_mut(group) else {
            return;
        };
        let mut changes = Vec::new();
        if let Some(new) = join {
            let old = std::mem::replace(&mut g.join_deadline, new);
            changes.push((
                old,
                new,
                TimeoutReason::JoinPhase {
                    group: group.to_owned(),
                },
            ));
        }
        if let Some(new) = sync {
            let old = std::mem::replace(&mut g.sync_deadline, new);
            changes.push((
                old,
                new,
                TimeoutReason::SyncPhase {
                    group: group.to_owned(),
                },
            ));
        }
        for (old, new, reason) in changes {
            self.set_timer(old, new, reason);
        }
    }

    pub(super) fn classic(&mut self, group: &str) -> Option<&mut ClassicGroup> {
        match self.groups.get_mut(group) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// A new member id: `<client id>-<uuid-like hex>` as Kafka forms them (the client id
    /// shortened to 255 bytes so the id stays a valid record string).
    pub(super) fn new_member_id(&mut self, client_id: &str, group: &ClassicGroup) -> String {
        let mut cut = client_id.len().min(255);
        while !client_id.is_char_boundary(cut) {
            cut -= 1;
        }
        let client_id = &client_id[..cut];
        // Bounded: a collision of 64-bit mixes is practically impossible; after four tries the
        // counter itself is appended, which is unique within this run.
        for _ in 0..4 {
            self.member_id_counter += 1;
            let a = splitmix64(
                self.member_id_seed ^ self.member_id_counter.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            let b = splitmix64(a);
            let id = format!(
                "{client_id}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                (a >> 32) as u32,
                (a >> 16) as u16,
                a as u16,
                (b >> 48) as u16,
                b & 0xffff_ffff_ffff
            );
            if !group.members.contains_key(&id) && !group.pending_members.contains_key(&id) {
                return id;
            }
        }
        format!("{client_id}-{}", self.member_id_counter)
    }

    // ------------------------------------------------------------ listing

    pub(super) fn list_groups(&self, req: &ListGroupsRequest) -> ListGroupsResponse {
        let mut groups: Vec<ListedGroup> = self
            .groups
            .iter()
            .filter_map(|(id, g)| {
                let (protocol_type, state) = match g {
                    Group::Classic(c) if c.state == State::Dead => return None,
                    Group::Classic(c) => {
                        (c.protocol_type.clone().unwrap_or_default(), c.state.name())
                    }
                    Group::Consumer(c) => ("consumer".to_owned(), c.state_name()),
                };
                let keep_state = req.states_filter.is_empty()
                    || req
                        .states_filter
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(state));
                let keep_type = req.types_filter.is_empty()
                    || req
                        .types_filter
                        .iter()
                        .any(|t| t.eq_ignore_ascii_case(g.type_name()));
                (keep_state && keep_type).then(|| ListedGroup {
                    group_id: id.clone(),
                    protocol_type,
                    group_state: state.to_owned(),
                    group_type: g.type_name().to_owned(),
                })
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        ListGroupsResponse {
            error_code: ErrorCode::NONE,
            groups,
        }
    }

    pub(super) fn describe_groups(&self, req: &DescribeGroupsRequest) -> DescribeGroupsResponse {
        let groups = req
            .group_ids
            .iter()
            .map(|id| match self.groups.get(id) {
                Some(Group::Classic(g)) if g.state != State::Dead => {
                    let show_meta = matches!(g.state, State::Stable | State::CompletingRebalance);
                    DescribedGroup {
                        error_code: ErrorCode::NONE,
                        group_id: id.clone(),
                        group_state: g.state.name().to_owned(),
                        protocol_type: g.protocol_type.clone().unwrap_or_default(),
                        protocol_data: if show_meta {
                            g.protocol.clone().unwrap_or_default()
                        } else {
                            String::new()
                        },
                        members: g
                            .members
                            .values()
                            .map(|m| DescribedMember {
                                member_id: m.member_id.clone(),
                                group_instance_id: m.group_instance_id.clone(),
                                client_id: m.client_id.clone(),
                                client_host: m.client_host.clone(),
                                member_metadata: if show_meta {
                                    m.metadata_for(g.protocol.as_deref())
                                } else {
                                    Vec::new()
                                },
                                member_assignment: if g.state == State::Stable {
                                    m.assignment.clone()
                                } else {
                                    Vec::new()
                                },
                            })
                            .collect(),
                    }
                }
                _ => DescribedGroup {
                    error_code: ErrorCode::GROUP_ID_NOT_FOUND,
                    group_id: id.clone(),
                    group_state: State::Dead.name().to_owned(),
                    protocol_type: String::new(),
                    protocol_data: String::new(),
                    members: Vec::new(),
                },
            })
            .collect();
        DescribeGroupsResponse { groups }
    }

    // ------------------------------------------------------------ consumer protocol

    pub(super) fn consumer_heartbeat(
        &mut self,
        token: RequestToken,
        req: super::consumer::HeartbeatRequest,
        now: Millis,
    ) {
        let err = |code| {
            GroupResponse::ConsumerGroupHeartbeat(super::consumer::HeartbeatResponse::error(code))
        };
        let gid = req.group_id.clone();
        let created = match self.groups.get(&gid) {
            Some(Group::Classic(g)) if !g.members.is_empty() || g.state == State::Dead => {
                return self.respond(token, err(ErrorCode::GROUP_ID_NOT_FOUND));
            }
            Some(Group::Consumer(_)) => false,
            Some(Group::Classic(_)) | None => true,
        };
        let previous = if created {
            self.groups.insert(
                gid.clone(),
                Group::Consumer(ConsumerGroup::with_config(
                    &gid,
                    self.consumer_config_for(&gid),
                )),
            )
        } else {
            None
        };
        let Some(Group::Consumer(c)) = self.groups.get_mut(&gid) else {
            return;
        };
        match c.heartbeat(&req, now, &self.topics) {
            Err(code) => {
                if created {
                    // Nothing happened: put back what was there.
                    match previous {
                        Some(p) => {
                            self.groups.insert(gid, p);
                        }
                        None => {
                            self.groups.remove(&gid);
                        }
                    }
                }
                self.respond(token, err(code));
            }
            Ok((typed, resp)) => {
                let mut records: Vec<GroupRecord> = typed
                    .iter()
                    .map(ConsumerGroupRecord::to_group_record)
                    .collect();
                // An empty classic group became a consumer group: its stored metadata is
                // removed by a tombstone, so durable state still follows the records (I21).
                if let Some(Group::Classic(old)) = &previous {
                    if old.stored.is_some() && !records.is_empty() {
                        records.insert(
                            0,
                            GroupRecord {
                                key: group_metadata_key(&gid),
                                value: None,
                            },
                        );
                    }
                }
                let response = GroupResponse::ConsumerGroupHeartbeat(resp);
                self.sync_consumer_timer(&gid);
                if records.is_empty() {
                    self.respond(token, response);
                } else {
                    self.append(
                        records,
                        vec![gid],
                        vec![Completion::Respond(token, response)],
                    );
                }
            }
        }
    }

    /// A consumer-protocol group's deadline passed: it fences the members whose session or
    /// revocation timeout expired; their removal is appended like any other records (I21:
    /// the group applied them already, the log gets them in the same order).
    pub(super) fn consumer_group_expired(&mut self, gid: &str, now: Millis) {
        let Some(Group::Consumer(c)) = self.groups.get_mut(gid) else {
            return;
        };
        let records: Vec<GroupRecord> = c
            .handle_timeout(now)
            .iter()
            .map(ConsumerGroupRecord::to_group_record)
            .collect();
        self.sync_consumer_timer(gid);
        if !records.is_empty() {
            self.append(records, vec![gid.to_owned()], Vec::new());
        }
    }

    /// Re-arms the timer of a consumer-protocol group at its current earliest deadline (or
    /// clears it when the group has none or is gone).
    pub(super) fn sync_consumer_timer(&mut self, gid: &str) {
        let new = match self.groups.get(gid) {
            Some(Group::Consumer(c)) => c.next_deadline().map(|d| d.at_ms),
            _ => None,
        };
        let old = match new {
            Some(at) => self.consumer_deadlines.insert(gid.to_owned(), at),
            None => self.consumer_deadlines.remove(gid),
        };
        self.set_timer(
            old,
            new,
            TimeoutReason::ConsumerGroup {
                group: gid.to_owned(),
            },
        );
    }

    // ------------------------------------------------------------ completions

    pub(super) fn complete(&mut self, c: Completion, failure: Option<AppendError>, now: Millis) {
        match c {
            Completion::Respond(token, response) => {
                let response = match failure {
                    None => response,
                    Some(e) => {
                        let code = e.code(&response);
                        response.failed_with(code)
                    }
                };
                self.respond(token, response);
            }
            Completion::Assignment { group, generation } => {
                self.assignment_done(&group, generation, failure, now)
            }
            Completion::Deletion { group } => {
                if failure.is_some() {
                    if let Some(Group::Classic(g)) = self.groups.get_mut(&group) {
                        if g.state == State::Dead {
                            let _ = g.transition(Event::DeleteFailed, now);
                        }
                    }
                } else if let Some(Group::Classic(g)) = self.groups.get_mut(&group) {
                    if g.state == State::Dead {
                        // Its tombstones are durable; a join that raced with them found the
                        // group Dead and was refused, so nothing live remains.
                        self.groups.remove(&group);
                    }
                }
            }
            Completion::RebalanceOnFailure { group, generation } => {
                if failure.is_some() {
                    let same = matches!(self.groups.get(&group), Some(Group::Classic(g)) if g.generation == generation && g.state == State::Stable);
                    if same {
                        self.prepare_rebalance(&group, Event::JoinNeedsRebalance, now);
                    }
                }
            }
        }
    }

    /// The leader's assignment is durable (hand it to every parked SyncGroup: the barrier
    /// opens) or failed (every parked SyncGroup gets the error; the group rebalances).
    pub(super) fn assignment_done(
        &mut self,
        gid: &str,
        generation: i32,
        failure: Option<AppendError>,
        now: Millis,
    ) {
        let Some(g) = self.classic(gid) else { return };
        if g.generation != generation {
            return; // A stale generation's result: ignored (I22).
        }
        let assignment = match g.pending_assignment.take() {
            Some((_, a)) => a,
            None => return,
        };
        let code = match failure {
            None => ErrorCode::NONE,
            Some(AppendError::Unavailable) => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            Some(AppendError::Storage) => ErrorCode::NOT_COORDINATOR,
            Some(AppendError::TooLarge) => ErrorCode::UNKNOWN_SERVER_ERROR,
        };
        let event = if failure.is_none() {
            Event::AssignmentDurable
        } else {
            Event::AssignmentFailed
        };
        let from = g.state;
        if g.transition(event, now).is_err() || from != State::CompletingRebalance {
            return;
        }
        let mut answers = Vec::new();
        for m in g.members.values_mut() {
            if !code.is_error() {
                m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
            }
            if let Some((t, _)) = m.awaiting_sync.take() {
                answers.push((
                    t,
                    SyncGroupResponse {
                        error_code: code,
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol.clone(),
                        assignment: if !code.is_error() {
                            m.assignment.clone()
                        } else {
                            Vec::new()
                        },
                    },
                ));
            }
        }
        let members: Vec<String> = g.members.keys().cloned().collect();
        for (t, r) in answers {
            self.respond(t, GroupResponse::SyncGroup(r));
        }
        for id in members {
            self.heartbeat_member(gid, &id, now);
        }
        if !code.is_error() {
            self.set_group_deadline(gid, None, Some(None));
        } else {
            // Table: CompletingRebalance × AssignmentFailed → PreparingRebalance.
            let rebalance_ms = self
                .classic(gid)
                .map(|g| g.rebalance_timeout_ms())
                .unwrap_or(0);
            self.set_group_deadline(gid, Some(Some(now + rebalance_ms)), Some(None));
        }
    }
}

/// Longer than a record's int16 string length allows.
pub(super) fn too_long(s: &str) -> bool {
    s.len() > i16::MAX as usize
}

pub(super) fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The JoinGroup answer for `member_id` in the group's current generation; the leader gets
/// every member's metadata for the selected protocol.
pub(super) fn join_response(g: &ClassicGroup, member_id: &str) -> JoinGroupResponse {
    let is_leader = g.leader.as_deref() == Some(member_id);
    let members = if is_leader {
        let mut ms: Vec<&Member> = g.members.values().collect();
        ms.sort_by_key(|m| m.join_seq);
        ms.iter()
            .map(|m| JoinGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata_for(g.protocol.as_deref()),
            })
            .collect()
    } else {
        Vec::new()
    };
    JoinGroupResponse {
        error_code: ErrorCode::NONE,
        generation_id: g.generation,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol.clone(),
        leader: g.leader.clone().unwrap_or_default(),
        skip_assignment: false,
        member_id: member_id.to_owned(),
        members,
    }
}

/// The group as Kafka stores it: current generation, protocol, leader, members with their
/// metadata for the protocol and their current assignment.
pub(super) fn group_metadata_value(g: &ClassicGroup) -> GroupMetadataValue {
    let mut members: Vec<&Member> = g.members.values().collect();
    members.sort_by_key(|m| m.join_seq);
    GroupMetadataValue {
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        generation: g.generation,
        protocol: g.protocol.clone(),
        leader: g.leader.clone(),
        current_state_timestamp: g.state_since,
        members: members
            .iter()
            .map(|m| MemberMetadata {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                subscription: m.metadata_for(g.protocol.as_deref()),
                assignment: m.assignment.clone(),
            })
            .collect(),
    }
}

pub(super) fn group_metadata_record(g: &ClassicGroup) -> GroupRecord {
    GroupRecord {
        key: group_metadata_key(&g.group_id),
        value: Some(group_metadata_value(g).encode()),
    }
}

/// Startup: the live group is what was stored (Stable with its members, or Empty).
pub(super) fn load_from_stored(g: &mut ClassicGroup, v: &GroupMetadataValue, join_seq: &mut u64) {
    let mut fresh = ClassicGroup::new(&g.group_id, v.current_state_timestamp.max(0));
    fresh.generation = v.generation;
    fresh.protocol_type = (!v.protocol_type.is_empty()).then(|| v.protocol_type.clone());
    fresh.protocol = v.protocol.clone();
    fresh.leader = v.leader.clone();
    fresh.state = if v.members.is_empty() {
        State::Empty
    } else {
        State::Stable
    };
    for m in &v.members {
        *join_seq += 1;
        if let Some(i) = &m.group_instance_id {
            fresh.static_members.insert(i.clone(), m.member_id.clone());
        }
        fresh.members.insert(
            m.member_id.clone(),
            Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                session_timeout_ms: m.session_timeout_ms,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![JoinProtocol {
                    name: v.protocol.clone().unwrap_or_default(),
                    metadata: m.subscription.clone(),
                }],
                assignment: m.assignment.clone(),
                awaiting_join: None,
                awaiting_sync: None,
                session_deadline: None,
                join_seq: *join_seq,
            },
        );
    }
    *g = fresh;
}
