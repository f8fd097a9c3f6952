//! The coordinator of one `__consumer_offsets` partition: request handling, durable
//! application of records, timers. See the module docs of [`super`] for the contract.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::classic::{ClassicGroup, Member};
use super::codes::ErrorCode;
use super::consumer::{ConsumerGroup, TopicPartitionCounts};
use super::messages::*;
use super::records::{
    group_metadata_key, offset_commit_key, GroupMetadataValue, GroupRecord, MemberMetadata,
    OffsetCommitValue, RecordError, RecordKey,
};
use super::state::{Event, State};
use super::{Group, GroupConfig};

/// Milliseconds since the Unix epoch, as the caller's clock reads them.
pub type Millis = i64;

/// The caller's handle for one request; its answer comes back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Names one [`Append`]; report its outcome with [`Coordinator::handle_appended`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);

/// Records to append, in order and as one unit, to this coordinator's offsets partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// Report this id to `handle_appended`.
    pub id: AppendId,
    /// The records.
    pub records: Vec<GroupRecord>,
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
    /// Any other storage failure: UNKNOWN_SERVER_ERROR.
    Storage,
}

impl AppendError {
    /// The error code an answer that depended on the append gets.
    pub fn code(self, response: &GroupResponse) -> ErrorCode {
        match self {
            AppendError::Unavailable => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            AppendError::TooLarge if matches!(response, GroupResponse::OffsetCommit(_)) => {
                ErrorCode::INVALID_COMMIT_OFFSET_SIZE
            }
            AppendError::TooLarge | AppendError::Storage => ErrorCode::UNKNOWN_SERVER_ERROR,
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
}

/// The whole durable state, by group id.
pub type DurableState = BTreeMap<String, DurableGroup>;

/// What to do when an append's outcome is known.
#[derive(Debug)]
enum Completion {
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
struct PendingAppend {
    records: Vec<GroupRecord>,
    groups: Vec<String>,
    completions: Vec<Completion>,
}

/// The coordinator of one `__consumer_offsets` partition.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    groups: HashMap<String, Group>,
    /// Durable committed offsets by group (I21: written only by `apply`).
    offsets: HashMap<String, BTreeMap<(String, i32), CommittedOffset>>,
    topics: TopicPartitionCounts,
    timers: BTreeSet<(Millis, TimeoutReason)>,
    retention_deadline: Option<Millis>,
    appends: VecDeque<Append>,
    pending: BTreeMap<AppendId, PendingAppend>,
    /// In-flight appends per group (offsets of such a group are not expired meanwhile).
    inflight: HashMap<String, u32>,
    responses: VecDeque<(RequestToken, GroupResponse)>,
    next_append: u64,
    member_id_seed: u64,
    member_id_counter: u64,
    join_seq: u64,
    /// Set by replay: stored members' sessions and the retention timer start at the next `now`.
    needs_arming: bool,
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
            appends: VecDeque::new(),
            pending: BTreeMap::new(),
            inflight: HashMap::new(),
            responses: VecDeque::new(),
            next_append: 0,
            member_id_seed,
            member_id_counter: 0,
            join_seq: 0,
            needs_arming: true,
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
            GroupRequest::ConsumerGroupDescribe(r) => {
                let groups = r
                    .group_ids
                    .iter()
                    .map(|id| match self.groups.get(id) {
                        Some(Group::Consumer(c)) => c.describe(),
                        _ => super::consumer::DescribedConsumerGroup {
                            error_code: ErrorCode::GROUP_ID_NOT_FOUND,
                            group_id: id.clone(),
                            group_state: State::Dead.name().to_owned(),
                        },
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
                for record in &pending.records {
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
    fn apply(
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
                    if let Some(map) = self.offsets.get_mut(group) {
                        map.remove(&(topic.clone(), *partition));
                        if map.is_empty() {
                            self.offsets.remove(group);
                        }
                    }
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
                let entry = self
                    .groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::Consumer(ConsumerGroup::new(group)));
                if let Group::Classic(_) = entry {
                    *entry = Group::Consumer(ConsumerGroup::new(group));
                }
                if let Group::Consumer(c) = entry {
                    c.replay(key, record);
                    if c.is_deleted() {
                        self.groups.remove(group);
                    }
                }
            }
        }
        Ok(())
    }

    /// Removes a group that holds nothing: no durable metadata, no offsets, no members, no
    /// handed-out ids, not being deleted, nothing in flight.
    fn drop_if_unused(&mut self, group: &str) {
        if self.inflight.contains_key(group) || self.offsets.contains_key(group) {
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

    fn respond(&mut self, token: RequestToken, response: GroupResponse) {
        self.responses.push_back((token, response));
    }

    fn append(
        &mut self,
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
        });
        self.pending.insert(
            id,
            PendingAppend {
                records,
                groups,
                completions,
            },
        );
        id
    }

    fn set_timer(&mut self, slot_old: Option<Millis>, new: Option<Millis>, reason: TimeoutReason) {
        if let Some(old) = slot_old {
            self.timers.remove(&(old, reason.clone()));
        }
        if let Some(new) = new {
            self.timers.insert((new, reason));
        }
    }

    fn set_retention_timer(&mut self, at: Millis) {
        let old = self.retention_deadline.replace(at);
        self.set_timer(old, Some(at), TimeoutReason::OffsetsRetention);
    }

    /// After a replay, start stored members' sessions and the retention timer at `now`.
    fn arm(&mut self, now: Millis) {
        if !self.needs_arming {
            return;
        }
        self.needs_arming = false;
        if self.retention_deadline.is_none() {
            self.set_retention_timer(now + self.config.offsets_retention_check_interval_ms.max(1));
        }
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for gid in ids {
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
    fn touch_session(&mut self, group: &str, member: &str, deadline: Option<Millis>) {
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

    fn heartbeat_member(&mut self, group: &str, member: &str, now: Millis) {
        let timeout = match self.groups.get(group) {
            Some(Group::Classic(g)) => match g.members.get(member) {
                Some(m) => m.session_timeout_ms,
                None => return,
            },
            _ => return,
        };
        self.touch_session(group, member, Some(now + i64::from(timeout)));
    }

    fn set_group_deadline(
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

    fn classic(&mut self, group: &str) -> Option<&mut ClassicGroup> {
        match self.groups.get_mut(group) {
            Some(Group::Classic(g)) => Some(g),
            _ => None,
        }
    }

    /// A new member id: `<client id>-<uuid-like hex>` as Kafka forms them (the client id
    /// shortened to 255 bytes so the id stays a valid record string).
    fn new_member_id(&mut self, client_id: &str, group: &ClassicGroup) -> String {
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

    // ------------------------------------------------------------ JoinGroup

    fn join_error(
        token: RequestToken,
        member_id: &str,
        code: ErrorCode,
    ) -> (RequestToken, GroupResponse) {
        (
            token,
            GroupResponse::JoinGroup(JoinGroupResponse {
                error_code: code,
                generation_id: -1,
                member_id: member_id.to_owned(),
                ..JoinGroupResponse::default()
            }),
        )
    }

    fn join_group(&mut self, token: RequestToken, req: JoinGroupRequest, now: Millis) {
        let reject = |this: &mut Self, code| {
            let (t, r) = Self::join_error(token, &req.member_id, code);
            this.respond(t, r);
        };
        if req.group_id.is_empty() || too_long(&req.group_id) {
            return reject(self, ErrorCode::INVALID_GROUP_ID);
        }
        // Every string the group record will carry must fit its int16 length.
        let strings_fit = !too_long(&req.member_id)
            && !too_long(&req.client_id)
            && !too_long(&req.client_host)
            && !too_long(&req.protocol_type)
            && !req.group_instance_id.as_deref().is_some_and(too_long)
            && !req.protocols.iter().any(|p| too_long(&p.name));
        if !strings_fit {
            return reject(self, ErrorCode::INVALID_REQUEST);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return reject(self, ErrorCode::INVALID_SESSION_TIMEOUT);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return reject(self, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        let metadata_bytes: usize = req
            .protocols
            .iter()
            .map(|p| p.metadata.len() + p.name.len())
            .sum();
        if req.protocols.len() > self.config.member_protocols_max
            || metadata_bytes > self.config.member_metadata_max_bytes
        {
            return reject(self, ErrorCode::INVALID_REQUEST);
        }
        match self.groups.get(&req.group_id) {
            // A consumer-protocol group stays one while it has members or records: turning
            // it into a classic group would drop durable records without tombstones (I21).
            Some(Group::Consumer(c)) if !c.is_empty() || !c.durable_records().is_empty() => {
                return reject(self, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            }
            Some(Group::Consumer(_)) | None => {
                self.groups.insert(
                    req.group_id.clone(),
                    Group::Classic(ClassicGroup::new(&req.group_id, now)),
                );
            }
            Some(Group::Classic(_)) => {}
        }
        let gid = req.group_id.clone();
        let max_size = self.config.max_size;
        let Some(g) = self.classic(&gid) else { return };
        if g.state == State::Dead {
            return reject(self, ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        if !g.supports_protocols(&req.protocol_type, &req.protocols) {
            reject(self, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            return self.drop_if_unused(&gid);
        }
        let instance = if req.version >= 5 {
            req.group_instance_id.clone()
        } else {
            None
        };
        let full = g.members.len() + g.pending_members.len() >= max_size;

        if req.member_id.is_empty() {
            if let Some(instance) = &instance {
                if let Some(old_id) = g.static_members.get(instance).cloned() {
                    return self.replace_static_member(token, &req, &old_id, now);
                }
                if full {
                    return reject(self, ErrorCode::GROUP_MAX_SIZE_REACHED);
                }
                let new_id = {
                    let g = match self.groups.get(&gid) {
                        Some(Group::Classic(g)) => g.clone(),
                        _ => return,
                    };
                    self.new_member_id(&req.client_id, &g)
                };
                return self.add_member_and_rebalance(token, &req, new_id, now);
            }
            if full {
                reject(self, ErrorCode::GROUP_MAX_SIZE_REACHED);
                return self.drop_if_unused(&gid);
            }
            let snapshot = g.clone();
            let new_id = self.new_member_id(&req.client_id, &snapshot);
            if req.version >= 4 {
                // KIP-394: hand out the id; the member must come back with it.
                let deadline = now + i64::from(req.session_timeout_ms);
                if let Some(g) = self.classic(&gid) {
                    g.pending_members.insert(new_id.clone(), deadline);
                }
                self.set_timer(
                    None,
                    Some(deadline),
                    TimeoutReason::PendingMember {
                        group: gid.clone(),
                        member: new_id.clone(),
                    },
                );
                let (t, r) = Self::join_error(token, &new_id, ErrorCode::MEMBER_ID_REQUIRED);
                return self.respond(t, r);
            }
            return self.add_member_and_rebalance(token, &req, new_id, now);
        }

        // A member id was given.
        if let Some(deadline) = g.pending_members.get(&req.member_id).copied() {
            if let Some(g) = self.classic(&gid) {
                g.pending_members.remove(&req.member_id);
            }
            self.set_timer(
                Some(deadline),
                None,
                TimeoutReason::PendingMember {
                    group: gid.clone(),
                    member: req.member_id.clone(),
                },
            );
            let id = req.member_id.clone();
            return self.add_member_and_rebalance(token, &req, id, now);
        }
        if let Err(code) = g.validate_member(&req.member_id, instance.as_deref()) {
            reject(self, code);
            return self.drop_if_unused(&gid);
        }
        // A known member rejoins.
        let (changed, is_leader, state) = {
            let m = &g.members[&req.member_id];
            (
                m.protocols != req.protocols || m.protocol_type != req.protocol_type,
                g.leader.as_deref() == Some(req.member_id.as_str()),
                g.state,
            )
        };
        let needs_rebalance = match state {
            State::PreparingRebalance => true,
            State::CompletingRebalance => changed,
            State::Stable => changed || is_leader,
            State::Empty | State::Dead => true,
        };
        if !needs_rebalance {
            // Answer with the current generation (the member lost its earlier answer).
            let Some(g) = self.classic(&gid) else { return };
            if let Err(code) = g.transition(Event::JoinUnchanged, now) {
                return reject(self, code);
            }
            let resp = join_response(g, &req.member_id);
            self.respond(token, GroupResponse::JoinGroup(resp));
            return self.heartbeat_member(&gid, &req.member_id, now);
        }
        let Some(g) = self.classic(&gid) else { return };
        let old_join = {
            let m = g.members.get_mut(&req.member_id);
            match m {
                Some(m) => {
                    m.protocols = req.protocols.clone();
                    m.protocol_type = req.protocol_type.clone();
                    m.session_timeout_ms = req.session_timeout_ms;
                    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
                    m.awaiting_join.replace((token, req.version))
                }
                None => None,
            }
        };
        if let Some((old_token, _)) = old_join {
            // A duplicate join replaces the earlier one, which is told to rejoin.
            let (t, r) =
                Self::join_error(old_token, &req.member_id, ErrorCode::REBALANCE_IN_PROGRESS);
            self.respond(t, r);
        }
        self.touch_session(&gid, &req.member_id, None);
        self.prepare_rebalance(&gid, Event::JoinNeedsRebalance, now);
        self.try_complete_join(&gid, now);
    }

    fn add_member_and_rebalance(
        &mut self,
        token: RequestToken,
        req: &JoinGroupRequest,
        member_id: String,
        now: Millis,
    ) {
        self.join_seq += 1;
        let seq = self.join_seq;
        let gid = req.group_id.clone();
        let delay_active = {
            let Some(g) = self.classic(&gid) else { return };
            let instance = if req.version >= 5 {
                req.group_instance_id.clone()
            } else {
                None
            };
            if let Some(i) = &instance {
                g.static_members.insert(i.clone(), member_id.clone());
            }
            if g.members.is_empty() {
                g.protocol_type = Some(req.protocol_type.clone());
            }
            g.members.insert(
                member_id.clone(),
                Member {
                    member_id: member_id.clone(),
                    group_instance_id: instance,
                    client_id: req.client_id.clone(),
                    client_host: req.client_host.clone(),
                    session_timeout_ms: req.session_timeout_ms,
                    rebalance_timeout_ms: req.rebalance_timeout_ms,
                    protocol_type: req.protocol_type.clone(),
                    protocols: req.protocols.clone(),
                    assignment: Vec::new(),
                    awaiting_join: Some((token, req.version)),
                    session_deadline: None,
                    awaiting_sync: None,
                    join_seq: seq,
                },
            );
            if let Some((_, added)) = &mut g.initial_delay {
                *added = true;
                true
            } else {
                false
            }
        };
        if !delay_active {
            self.prepare_rebalance(&gid, Event::JoinNeedsRebalance, now);
        }
        self.try_complete_join(&gid, now);
    }

    /// KIP-345: a static member rejoined without its member id. It gets a new id; the old id
    /// is fenced (FENCED_INSTANCE_ID from now on, I22). A stable group with unchanged
    /// protocols keeps its assignment and skips the rebalance (the replacement is stored);
    /// otherwise the group rebalances.
    fn replace_static_member(
        &mut self,
        token: RequestToken,
        req: &JoinGroupRequest,
        old_id: &str,
        now: Millis,
    ) {
        let gid = req.group_id.clone();
        let snapshot = match self.groups.get(&gid) {
            Some(Group::Classic(g)) => g.clone(),
            _ => return,
        };
        let new_id = self.new_member_id(&req.client_id, &snapshot);
        let Some(g) = self.classic(&gid) else { return };
        let Some(mut member) = g.members.remove(old_id) else {
            return;
        };
        let unchanged =
            member.protocols == req.protocols && member.protocol_type == req.protocol_type;
        let fenced_join = member.awaiting_join.take();
        let fenced_sync = member.awaiting_sync.take();
        let old_deadline = member.session_deadline.take();
        member.member_id = new_id.clone();
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.protocols = req.protocols.clone();
        member.protocol_type = req.protocol_type.clone();
        if let Some(i) = &member.group_instance_id {
            g.static_members.insert(i.clone(), new_id.clone());
        }
        let was_leader = g.leader.as_deref() == Some(old_id);
        if was_leader {
            g.leader = Some(new_id.clone());
        }
        let state = g.state;
        g.members.insert(new_id.clone(), member);
        self.set_timer(
            old_deadline,
            None,
            TimeoutReason::Session {
                group: gid.clone(),
                member: old_id.to_owned(),
            },
        );
        if let Some((t, _)) = fenced_join {
            let (t, r) = Self::join_error(t, old_id, ErrorCode::FENCED_INSTANCE_ID);
            self.respond(t, r);
        }
        if let Some((t, _)) = fenced_sync {
            self.respond(
                t,
                GroupResponse::SyncGroup(SyncGroupResponse {
                    error_code: ErrorCode::FENCED_INSTANCE_ID,
                    ..SyncGroupResponse::default()
                }),
            );
        }
        if state == State::Stable && unchanged {
            let Some(g) = self.classic(&gid) else { return };
            let mut resp = join_response(g, &new_id);
            resp.skip_assignment = was_leader && req.version >= 9;
            let record = group_metadata_record(g);
            let generation = g.generation;
            self.heartbeat_member(&gid, &new_id, now);
            self.append(
                vec![record],
                vec![gid.clone()],
                vec![
                    Completion::Respond(token, GroupResponse::JoinGroup(resp)),
                    Completion::RebalanceOnFailure {
                        group: gid,
                        generation,
                    },
                ],
            );
            return;
        }
        if let Some(g) = self.classic(&gid) {
            if let Some(m) = g.members.get_mut(&new_id) {
                m.awaiting_join = Some((token, req.version));
            }
        }
        self.prepare_rebalance(&gid, Event::JoinNeedsRebalance, now);
        self.try_complete_join(&gid, now);
    }

    /// Starts (or continues) a rebalance: pending syncs are told to rejoin, the join phase's
    /// deadline is set (the initial delay for an empty group).
    fn prepare_rebalance(&mut self, gid: &str, event: Event, now: Millis) {
        let initial_delay_ms = self.config.initial_rebalance_delay_ms;
        let Some(g) = self.classic(gid) else { return };
        let from = g.state;
        if g.transition(event, now).is_err() {
            return;
        }
        if from == State::PreparingRebalance {
            return;
        }
        let mut told = Vec::new();
        if from == State::CompletingRebalance {
            for m in g.members.values_mut() {
                if let Some((t, _)) = m.awaiting_sync.take() {
                    told.push(t);
                }
            }
        }
        g.pending_assignment = None;
        let rebalance_ms = g.rebalance_timeout_ms();
        let deadline = if from == State::Empty && initial_delay_ms > 0 {
            let first = initial_delay_ms.min(rebalance_ms.max(1));
            g.initial_delay = Some(((rebalance_ms - first).max(0), false));
            now + first
        } else {
            g.initial_delay = None;
            now + rebalance_ms
        };
        for t in told {
            self.respond(
                t,
                GroupResponse::SyncGroup(SyncGroupResponse {
                    error_code: ErrorCode::REBALANCE_IN_PROGRESS,
                    ..SyncGroupResponse::default()
                }),
            );
        }
        self.set_group_deadline(gid, Some(Some(deadline)), Some(None));
    }

    /// Ends the join phase early when everyone is in (never during the initial delay).
    fn try_complete_join(&mut self, gid: &str, now: Millis) {
        let ready = match self.groups.get(gid) {
            Some(Group::Classic(g)) => {
                g.state == State::PreparingRebalance
                    && g.initial_delay.is_none()
                    && g.all_members_joined()
            }
            _ => false,
        };
        if ready {
            self.complete_join(gid, now);
        }
    }

    fn join_phase_expired(&mut self, gid: &str, now: Millis) {
        let initial_delay_ms = self.config.initial_rebalance_delay_ms;
        let Some(g) = self.classic(gid) else { return };
        g.join_deadline = None;
        if g.state != State::PreparingRebalance {
            return;
        }
        if let Some((remaining, added)) = g.initial_delay {
            // Kafka's InitialDelayedJoin: while members keep arriving, wait another delay,
            // until the rebalance timeout is used up.
            if added && remaining > 0 {
                let step = remaining.min(initial_delay_ms.max(1));
                g.initial_delay = Some((remaining - step, false));
                self.set_group_deadline(gid, Some(Some(now + step)), None);
                return;
            }
            g.initial_delay = None;
        }
        self.complete_join(gid, now);
    }

    /// The join phase ends: members that did not rejoin are removed; the rest get the new
    /// generation (the leader gets everyone's metadata). With nobody left the group is Empty
    /// and that is stored.
    fn complete_join(&mut self, gid: &str, now: Millis) {
        let Some(g) = self.classic(gid) else { return };
        let gone: Vec<String> = g
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        let mut cleared = Vec::new();
        for id in &gone {
            if let Some(m) = g.members.remove(id) {
                if let Some(i) = &m.group_instance_id {
                    if g.static_members.get(i) == Some(id) {
                        g.static_members.remove(i);
                    }
                }
                cleared.push((id.clone(), m.session_deadline));
            }
        }
        g.generation += 1;
        g.initial_delay = None;
        let empty = g.members.is_empty();
        if empty {
            if g.transition(Event::JoinPhaseEmpty, now).is_err() {
                return;
            }
            g.protocol = None;
            g.leader = None;
            let record = group_metadata_record(g);
            self.append(vec![record], vec![gid.to_owned()], Vec::new());
        } else {
            if g.transition(Event::JoinPhaseCompleted, now).is_err() {
                return;
            }
            g.protocol = g.select_protocol();
            g.protocol_type = g.members.values().next().map(|m| m.protocol_type.clone());
            let leader_ok = g.leader.as_ref().is_some_and(|l| g.members.contains_key(l));
            if !leader_ok {
                g.leader = g
                    .members
                    .values()
                    .min_by_key(|m| m.join_seq)
                    .map(|m| m.member_id.clone());
            }
            let mut answers = Vec::new();
            let ids: Vec<String> = g.members.keys().cloned().collect();
            for id in &ids {
                let resp = join_response(g, id);
                if let Some(m) = g.members.get_mut(id) {
                    m.assignment.clear();
                    if let Some((t, _)) = m.awaiting_join.take() {
                        answers.push((t, resp, id.clone(), m.session_timeout_ms));
                    }
                }
            }
            for (t, resp, id, timeout) in answers {
                self.respond(t, GroupResponse::JoinGroup(resp));
                self.touch_session(gid, &id, Some(now + i64::from(timeout)));
            }
        }
        for (id, deadline) in cleared {
            self.set_timer(
                deadline,
                None,
                TimeoutReason::Session {
                    group: gid.to_owned(),
                    member: id,
                },
            );
        }
        let sync_deadline = match self.groups.get(gid) {
            Some(Group::Classic(g)) if !empty => Some(now + g.rebalance_timeout_ms()),
            _ => None,
        };
        self.set_group_deadline(gid, Some(None), Some(sync_deadline));
    }

    // ------------------------------------------------------------ SyncGroup

    fn sync_group(&mut self, token: RequestToken, req: SyncGroupRequest, now: Millis) {
        let err = |code| {
            GroupResponse::SyncGroup(SyncGroupResponse {
                error_code: code,
                ..SyncGroupResponse::default()
            })
        };
        let Some(g) = self.classic(&req.group_id) else {
            return self.respond(token, err(ErrorCode::UNKNOWN_MEMBER_ID));
        };
        if g.state == State::Dead {
            return self.respond(token, err(ErrorCode::COORDINATOR_NOT_AVAILABLE));
        }
        if let Err(code) = g.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return self.respond(token, err(code));
        }
        if req.generation_id != g.generation {
            return self.respond(token, err(ErrorCode::ILLEGAL_GENERATION));
        }
        let type_mismatch = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| g.protocol_type.as_ref() != Some(t));
        let name_mismatch = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| g.protocol.as_ref() != Some(n));
        if type_mismatch || name_mismatch {
            return self.respond(token, err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL));
        }
        let state = match g.transition(Event::Sync, now) {
            Ok(s) => s,
            Err(code) => return self.respond(token, err(code)),
        };
        let gid = req.group_id.clone();
        if state == State::Stable {
            let resp = SyncGroupResponse {
                error_code: ErrorCode::NONE,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol.clone(),
                assignment: g.members[&req.member_id].assignment.clone(),
            };
            self.respond(token, GroupResponse::SyncGroup(resp));
            return self.heartbeat_member(&gid, &req.member_id, now);
        }
        // CompletingRebalance: the barrier. Park until the leader's assignment is durable.
        let previous = g
            .members
            .get_mut(&req.member_id)
            .and_then(|m| m.awaiting_sync.replace((token, req.version)));
        let is_leader = g.leader.as_deref() == Some(req.member_id.as_str());
        let mut to_store = None;
        if is_leader && g.pending_assignment.is_none() {
            let assignment: BTreeMap<String, Vec<u8>> = req
                .assignments
                .iter()
                .filter(|(id, _)| g.members.contains_key(id))
                .cloned()
                .collect();
            let mut value = group_metadata_value(g);
            for m in &mut value.members {
                m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
            }
            to_store = Some((value, assignment, g.generation));
        }
        if let Some((t, _)) = previous {
            self.respond(t, err(ErrorCode::REBALANCE_IN_PROGRESS));
        }
        self.heartbeat_member(&gid, &req.member_id, now);
        if let Some((value, assignment, generation)) = to_store {
            let record = GroupRecord {
                key: group_metadata_key(&gid),
                value: Some(value.encode()),
            };
            let id = self.append(
                vec![record],
                vec![gid.clone()],
                vec![Completion::Assignment {
                    group: gid.clone(),
                    generation,
                }],
            );
            if let Some(g) = self.classic(&gid) {
                g.pending_assignment = Some((id, assignment));
            }
        }
    }

    fn sync_phase_expired(&mut self, gid: &str, now: Millis) {
        let Some(g) = self.classic(gid) else { return };
        g.sync_deadline = None;
        if g.state != State::CompletingRebalance || g.pending_assignment.is_some() {
            return;
        }
        let late: Vec<String> = g
            .members
            .values()
            .filter(|m| m.awaiting_sync.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in late {
            self.remove_member(gid, &id);
        }
        self.prepare_rebalance(gid, Event::SyncTimeout, now);
        self.try_complete_join(gid, now);
    }

    // ------------------------------------------------------------ Heartbeat, LeaveGroup

    fn heartbeat(&mut self, req: &HeartbeatRequest, now: Millis) -> ErrorCode {
        let Some(g) = self.classic(&req.group_id) else {
            return ErrorCode::UNKNOWN_MEMBER_ID;
        };
        if g.state == State::Dead {
            return ErrorCode::COORDINATOR_NOT_AVAILABLE;
        }
        if let Err(code) = g.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return code;
        }
        if req.generation_id != g.generation {
            return ErrorCode::ILLEGAL_GENERATION;
        }
        let result = g.transition(Event::Heartbeat, now);
        // A member told to rejoin is still alive: its session is extended either way.
        self.heartbeat_member(&req.group_id, &req.member_id, now);
        match result {
            Ok(_) => ErrorCode::NONE,
            Err(code) => code,
        }
    }

    /// Removes a member (its parked answers get UNKNOWN_MEMBER_ID). Does not rebalance.
    fn remove_member(&mut self, gid: &str, member_id: &str) {
        let Some(g) = self.classic(gid) else { return };
        let Some(m) = g.members.remove(member_id) else {
            return;
        };
        if let Some(i) = &m.group_instance_id {
            if g.static_members.get(i).map(String::as_str) == Some(member_id) {
                g.static_members.remove(i);
            }
        }
        if let Some((t, _)) = m.awaiting_join {
            let (t, r) = Self::join_error(t, member_id, ErrorCode::UNKNOWN_MEMBER_ID);
            self.respond(t, r);
        }
        if let Some((t, _)) = m.awaiting_sync {
            self.respond(
                t,
                GroupResponse::SyncGroup(SyncGroupResponse {
                    error_code: ErrorCode::UNKNOWN_MEMBER_ID,
                    ..SyncGroupResponse::default()
                }),
            );
        }
        self.set_timer(
            m.session_deadline,
            None,
            TimeoutReason::Session {
                group: gid.to_owned(),
                member: member_id.to_owned(),
            },
        );
    }

    fn session_expired(&mut self, gid: &str, member_id: &str, now: Millis) {
        let (expired, keep_alive) = match self.groups.get_mut(gid) {
            Some(Group::Classic(g)) => match g.members.get_mut(member_id) {
                Some(m) => {
                    m.session_deadline = None;
                    // As in Kafka, a member waiting for its join or sync answer is alive; the
                    // join and sync phases' own deadlines bound that wait.
                    let waiting = m.awaiting_join.is_some() || m.awaiting_sync.is_some();
                    (true, waiting.then_some(m.session_timeout_ms))
                }
                None => (false, None),
            },
            _ => (false, None),
        };
        if let Some(timeout) = keep_alive {
            self.touch_session(gid, member_id, Some(now + i64::from(timeout).max(1)));
        } else if expired {
            self.remove_member(gid, member_id);
            self.prepare_rebalance(gid, Event::MemberRemoved, now);
            self.try_complete_join(gid, now);
        }
    }

    fn leave_group(&mut self, token: RequestToken, req: LeaveGroupRequest, now: Millis) {
        let top = |code| {
            GroupResponse::LeaveGroup(LeaveGroupResponse {
                error_code: code,
                members: Vec::new(),
            })
        };
        let Some(g) = self.classic(&req.group_id) else {
            return self.respond(token, top(ErrorCode::UNKNOWN_MEMBER_ID));
        };
        if g.state == State::Dead {
            return self.respond(token, top(ErrorCode::COORDINATOR_NOT_AVAILABLE));
        }
        let gid = req.group_id.clone();
        let mut results = Vec::with_capacity(req.members.len());
        let mut removed = false;
        for leaving in &req.members {
            let Some(g) = self.classic(&gid) else { break };
            let id = if leaving.member_id.is_empty() {
                leaving
                    .group_instance_id
                    .as_ref()
                    .and_then(|i| g.static_members.get(i).cloned())
                    .unwrap_or_default()
            } else {
                leaving.member_id.clone()
            };
            let code = if g.pending_members.remove(&id).is_some() {
                ErrorCode::NONE
            } else {
                match g.validate_member(&id, leaving.group_instance_id.as_deref()) {
                    Ok(()) => {
                        self.remove_member(&gid, &id);
                        removed = true;
                        ErrorCode::NONE
                    }
                    Err(code) => code,
                }
            };
            results.push(LeftMember {
                member_id: leaving.member_id.clone(),
                group_instance_id: leaving.group_instance_id.clone(),
                error_code: code,
            });
        }
        if removed {
            self.prepare_rebalance(&gid, Event::MemberRemoved, now);
        }
        self.try_complete_join(&gid, now);
        self.respond(
            token,
            GroupResponse::LeaveGroup(LeaveGroupResponse {
                error_code: ErrorCode::NONE,
                members: results,
            }),
        );
        self.drop_if_unused(&gid);
    }

    // ------------------------------------------------------------ offsets

    /// Kafka's OffsetCommit validation for the group (I22): members of the current generation
    /// may commit except while the new assignment is not out yet; a simple commit (generation
    /// < 0, no member) only to a group without members.
    fn validate_commit(&mut self, req: &OffsetCommitRequest, now: Millis) -> ErrorCode {
        let simple =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        match self.groups.get_mut(&req.group_id) {
            None if simple => {
                self.groups.insert(
                    req.group_id.clone(),
                    Group::Classic(ClassicGroup::new(&req.group_id, now)),
                );
                ErrorCode::NONE
            }
            None => ErrorCode::ILLEGAL_GENERATION,
            Some(Group::Consumer(c)) => c.validate_offset_commit(&req.member_id, req.generation_id),
            Some(Group::Classic(g)) => {
                if g.state == State::Dead {
                    return ErrorCode::COORDINATOR_NOT_AVAILABLE;
                }
                if simple {
                    return if g.members.is_empty() {
                        ErrorCode::NONE
                    } else {
                        ErrorCode::UNKNOWN_MEMBER_ID
                    };
                }
                if let Err(code) =
                    g.validate_member(&req.member_id, req.group_instance_id.as_deref())
                {
                    return code;
                }
                if req.generation_id != g.generation {
                    return ErrorCode::ILLEGAL_GENERATION;
                }
                match g.transition(Event::OffsetCommit, now) {
                    Ok(_) => ErrorCode::NONE,
                    Err(code) => code,
                }
            }
        }
    }

    fn offset_commit(&mut self, token: RequestToken, req: OffsetCommitRequest, now: Millis) {
        let group_code = if req.group_id.is_empty() || too_long(&req.group_id) {
            ErrorCode::INVALID_GROUP_ID
        } else if too_long(&req.member_id) || req.group_instance_id.as_deref().is_some_and(too_long)
        {
            ErrorCode::UNKNOWN_MEMBER_ID
        } else {
            self.validate_commit(&req, now)
        };
        let mut records = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|t| TopicResults {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let metadata = p.metadata.clone().unwrap_or_default();
                        let error_code = if !group_code.is_ok() {
                            group_code
                        } else if too_long(&t.name) {
                            // No topic has such a name (Kafka: at most 249 characters).
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                        } else if metadata.len() > self.config.offset_metadata_max_bytes
                            || too_long(&metadata)
                        {
                            ErrorCode::OFFSET_METADATA_TOO_LARGE
                        } else {
                            let value = OffsetCommitValue {
                                offset: p.offset,
                                leader_epoch: p.leader_epoch,
                                metadata,
                                commit_timestamp: now,
                                expire_timestamp: (req.version <= 4 && req.retention_time_ms >= 0)
                                    .then(|| now.saturating_add(req.retention_time_ms)),
                            };
                            records.push(GroupRecord {
                                key: offset_commit_key(&req.group_id, &t.name, p.partition),
                                value: Some(value.encode()),
                            });
                            ErrorCode::NONE
                        };
                        PartitionResult {
                            partition: p.partition,
                            error_code,
                        }
                    })
                    .collect(),
            })
            .collect();
        let response = GroupResponse::OffsetCommit(OffsetCommitResponse { topics });
        if records.is_empty() {
            self.respond(token, response);
            self.drop_if_unused(&req.group_id);
        } else {
            // I20: acknowledged only once durable.
            self.append(
                records,
                vec![req.group_id.clone()],
                vec![Completion::Respond(token, response)],
            );
        }
    }

    fn offset_fetch(&self, req: &OffsetFetchRequest) -> OffsetFetchResponse {
        let empty = BTreeMap::new();
        let groups = req
            .groups
            .iter()
            .map(|fg| {
                let offsets = self.offsets.get(&fg.group_id).unwrap_or(&empty);
                let fetched = |p: i32, o: Option<&CommittedOffset>| match o {
                    Some(o) => FetchedOffset {
                        partition: p,
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: Some(o.metadata.clone()),
                        error_code: ErrorCode::NONE,
                    },
                    None => FetchedOffset {
                        partition: p,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: Some(String::new()),
                        error_code: ErrorCode::NONE,
                    },
                };
                let topics = match &fg.topics {
                    None => {
                        let mut out: Vec<FetchedTopic> = Vec::new();
                        for ((topic, partition), o) in offsets {
                            if out.last().map(|t| &t.name) != Some(topic) {
                                out.push(FetchedTopic {
                                    name: topic.clone(),
                                    partitions: Vec::new(),
                                });
                            }
                            if let Some(t) = out.last_mut() {
                                t.partitions.push(fetched(*partition, Some(o)));
                            }
                        }
                        out
                    }
                    Some(list) => list
                        .iter()
                        .map(|tp| FetchedTopic {
                            name: tp.name.clone(),
                            partitions: tp
                                .partitions
                                .iter()
                                .map(|p| fetched(*p, offsets.get(&(tp.name.clone(), *p))))
                                .collect(),
                        })
                        .collect(),
                };
                FetchedGroup {
                    group_id: fg.group_id.clone(),
                    error_code: ErrorCode::NONE,
                    topics,
                }
            })
            .collect();
        OffsetFetchResponse { groups }
    }

    fn offset_delete(&mut self, token: RequestToken, req: OffsetDeleteRequest) {
        let group_error = |code| {
            GroupResponse::OffsetDelete(OffsetDeleteResponse {
                error_code: code,
                topics: Vec::new(),
            })
        };
        // Which topics may not be deleted: those the group subscribes to (all, when unknown).
        let subscribed: Result<Option<Vec<String>>, ErrorCode> =
            match self.groups.get(&req.group_id) {
                None => Err(ErrorCode::GROUP_ID_NOT_FOUND),
                Some(Group::Consumer(c)) => Ok(if c.is_empty() { Some(Vec::new()) } else { None }),
                Some(Group::Classic(g)) => match g.state {
                    State::Dead => Err(ErrorCode::GROUP_ID_NOT_FOUND),
                    State::Empty => Ok(Some(Vec::new())),
                    _ if g.protocol_type.as_deref() != Some("consumer") => {
                        Err(ErrorCode::NON_EMPTY_GROUP)
                    }
                    _ => Ok(g.subscribed_topics()),
                },
            };
        let subscribed = match subscribed {
            Ok(s) => s,
            Err(code) => return self.respond(token, group_error(code)),
        };
        let offsets = self.offset_keys(&req.group_id);
        let mut records = Vec::new();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let blocked = match &subscribed {
                    None => true,
                    Some(list) => list.contains(&t.name),
                };
                TopicResults {
                    name: t.name.clone(),
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| {
                            let error_code = if blocked {
                                ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC
                            } else {
                                if offsets.contains(&(t.name.clone(), *p)) {
                                    records.push(GroupRecord {
                                        key: offset_commit_key(&req.group_id, &t.name, *p),
                                        value: None,
                                    });
                                }
                                ErrorCode::NONE
                            };
                            PartitionResult {
                                partition: *p,
                                error_code,
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let response = GroupResponse::OffsetDelete(OffsetDeleteResponse {
            error_code: ErrorCode::NONE,
            topics,
        });
        if records.is_empty() {
            self.respond(token, response);
        } else {
            self.append(
                records,
                vec![req.group_id.clone()],
                vec![Completion::Respond(token, response)],
            );
        }
    }

    /// The partitions with a committed offset for `gid`: durable ones and those in appends
    /// still in flight (which will land in the log before anything appended now).
    fn offset_keys(&self, gid: &str) -> std::collections::BTreeSet<(String, i32)> {
        let mut keys: std::collections::BTreeSet<(String, i32)> = self
            .offsets
            .get(gid)
            .into_iter()
            .flat_map(|o| o.keys().cloned())
            .collect();
        for p in self.pending.values() {
            for r in &p.records {
                if let Ok(RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                }) = RecordKey::decode(&r.key)
                {
                    if group == gid && r.value.is_some() {
                        keys.insert((topic, partition));
                    }
                }
            }
        }
        keys
    }

    /// Tombstones for a group's offsets (durable or in flight) and metadata.
    fn group_tombstones(&self, gid: &str) -> Vec<GroupRecord> {
        let mut records: Vec<GroupRecord> = self
            .offset_keys(gid)
            .iter()
            .map(|(topic, partition)| GroupRecord {
                key: offset_commit_key(gid, topic, *partition),
                value: None,
            })
            .collect();
        match self.groups.get(gid) {
            Some(Group::Consumer(c)) => {
                records.extend(
                    c.durable_records()
                        .keys()
                        .filter(|k| k.get(..2) != Some(&[0, 3]))
                        .map(|k| GroupRecord {
                            key: k.clone(),
                            value: None,
                        }),
                );
                records.push(GroupRecord {
                    key: RecordKey::Consumer {
                        version: 3,
                        group: gid.to_owned(),
                    }
                    .encode(),
                    value: None,
                });
            }
            _ => records.push(GroupRecord {
                key: group_metadata_key(gid),
                value: None,
            }),
        }
        records
    }

    fn delete_groups(&mut self, token: RequestToken, req: DeleteGroupsRequest, now: Millis) {
        let mut records = Vec::new();
        let mut completions = Vec::new();
        let mut groups = Vec::new();
        let mut results = Vec::with_capacity(req.group_ids.len());
        for gid in &req.group_ids {
            let code = match self.groups.get_mut(gid) {
                None => ErrorCode::GROUP_ID_NOT_FOUND,
                Some(Group::Consumer(c)) => {
                    if c.is_empty() {
                        ErrorCode::NONE
                    } else {
                        ErrorCode::NON_EMPTY_GROUP
                    }
                }
                Some(Group::Classic(g)) => {
                    if g.state == State::Empty && !g.pending_members.is_empty() {
                        g.pending_members.clear();
                    }
                    match g.transition(Event::Delete, now) {
                        Ok(_) => ErrorCode::NONE,
                        Err(code) => code,
                    }
                }
            };
            if code.is_ok() && !groups.contains(gid) {
                records.extend(self.group_tombstones(gid));
                completions.push(Completion::Deletion { group: gid.clone() });
                groups.push(gid.clone());
            }
            results.push((gid.clone(), code));
        }
        let response = GroupResponse::DeleteGroups(DeleteGroupsResponse { results });
        if records.is_empty() {
            self.respond(token, response);
        } else {
            completions.push(Completion::Respond(token, response));
            self.append(records, groups, completions);
        }
    }

    /// `offsets.retention.minutes`: offsets of empty classic groups expire (never while the
    /// group has members or appends in flight); a group left with no offsets is removed.
    fn expire_offsets(&mut self, now: Millis) {
        let retention = self.config.offsets_retention_ms;
        let mut ids: Vec<String> = self.groups.keys().cloned().collect();
        ids.sort();
        for gid in ids {
            if self.inflight.contains_key(&gid) {
                continue;
            }
            let Some(Group::Classic(g)) = self.groups.get(&gid) else {
                continue;
            };
            if g.state != State::Empty || !g.pending_members.is_empty() {
                continue;
            }
            // An empty group that once had members expires from when it became empty.
            let empty_since = g.stored.as_ref().map(|_| g.state_since);
            let offsets = self.offsets.get(&gid);
            let mut records = Vec::new();
            let mut remaining = 0usize;
            for ((topic, partition), o) in offsets.into_iter().flatten() {
                let expired = match o.expire_timestamp {
                    Some(at) => now >= at,
                    None => {
                        now.saturating_sub(
                            empty_since
                                .unwrap_or(o.commit_timestamp)
                                .max(o.commit_timestamp),
                        ) >= retention
                    }
                };
                if expired {
                    records.push(GroupRecord {
                        key: offset_commit_key(&gid, topic, *partition),
                        value: None,
                    });
                } else {
                    remaining += 1;
                }
            }
            if remaining > 0 {
                if !records.is_empty() {
                    self.append(records, vec![gid.clone()], Vec::new());
                }
                continue;
            }
            // Nothing left: the group goes too (Dead until its tombstones are durable).
            if g.stored.is_some() {
                records.push(GroupRecord {
                    key: group_metadata_key(&gid),
                    value: None,
                });
            }
            if records.is_empty() {
                // Nothing durable to remove: a live-only empty group.
                self.groups.remove(&gid);
                continue;
            }
            if let Some(Group::Classic(g)) = self.groups.get_mut(&gid) {
                if g.transition(Event::Expire, now).is_err() {
                    continue;
                }
            }
            self.append(
                records,
                vec![gid.clone()],
                vec![Completion::Deletion { group: gid.clone() }],
            );
        }
    }

    // ------------------------------------------------------------ listing

    fn list_groups(&self, req: &ListGroupsRequest) -> ListGroupsResponse {
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

    fn describe_groups(&self, req: &DescribeGroupsRequest) -> DescribeGroupsResponse {
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

    fn consumer_heartbeat(
        &mut self,
        token: RequestToken,
        req: super::consumer::HeartbeatRequest,
        now: Millis,
    ) {
        let err = |code| {
            GroupResponse::ConsumerGroupHeartbeat(super::consumer::HeartbeatResponse {
                error_code: code,
            })
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
            self.groups
                .insert(gid.clone(), Group::Consumer(ConsumerGroup::new(&gid)))
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
            Ok((mut records, resp)) => {
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

    // ------------------------------------------------------------ completions

    fn complete(&mut self, c: Completion, failure: Option<AppendError>, now: Millis) {
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
    fn assignment_done(
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
            Some(_) => ErrorCode::UNKNOWN_SERVER_ERROR,
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
            if code.is_ok() {
                m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
            }
            if let Some((t, _)) = m.awaiting_sync.take() {
                answers.push((
                    t,
                    SyncGroupResponse {
                        error_code: code,
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol.clone(),
                        assignment: if code.is_ok() {
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
        if code.is_ok() {
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
fn too_long(s: &str) -> bool {
    s.len() > i16::MAX as usize
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The JoinGroup answer for `member_id` in the group's current generation; the leader gets
/// every member's metadata for the selected protocol.
fn join_response(g: &ClassicGroup, member_id: &str) -> JoinGroupResponse {
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
fn group_metadata_value(g: &ClassicGroup) -> GroupMetadataValue {
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

fn group_metadata_record(g: &ClassicGroup) -> GroupRecord {
    GroupRecord {
        key: group_metadata_key(&g.group_id),
        value: Some(group_metadata_value(g).encode()),
    }
}

/// Startup: the live group is what was stored (Stable with its members, or Empty).
fn load_from_stored(g: &mut ClassicGroup, v: &GroupMetadataValue, join_seq: &mut u64) {
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
