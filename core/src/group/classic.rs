//! A classic-protocol group's data: durable part (what the last GroupMetadataValue said) and
//! live part (members, pending answers, deadlines). The protocol logic that moves it lives in
//! the coordinator, which owns the timers and output queues; state changes go through
//! [`ClassicGroup::transition`], i.e. the table in [`super::state`].

use std::collections::BTreeMap;

use super::codes::ErrorCode;
use super::handles::{AppendId, Millis, RequestToken};
use super::messages::JoinProtocol;
use super::records::GroupMetadataValue;
use super::state::{transition, Event, Outcome, State};

/// One member of a classic group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) member_id: String,
    pub(crate) group_instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout_ms: i32,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) protocol_type: String,
    pub(crate) protocols: Vec<JoinProtocol>,
    /// The assignment handed out in the current generation (empty until Stable).
    pub(crate) assignment: Vec<u8>,
    /// A parked JoinGroup (token, version) waiting for the join phase to end.
    pub(crate) awaiting_join: Option<(RequestToken, i16)>,
    /// A parked SyncGroup (token, version) waiting for the leader's assignment.
    pub(crate) awaiting_sync: Option<(RequestToken, i16)>,
    /// When the session expires; `None` while awaiting a join answer (the join phase's own
    /// deadline bounds that wait) or before the first `now` after a replay.
    pub(crate) session_deadline: Option<Millis>,
    /// Order of first join; the earliest remaining member leads.
    pub(crate) join_seq: u64,
}

impl Member {
    /// The metadata this member offered for `protocol`.
    pub(crate) fn metadata_for(&self, protocol: Option<&str>) -> Vec<u8> {
        protocol
            .and_then(|p| self.protocols.iter().find(|jp| jp.name == p))
            .map(|jp| jp.metadata.clone())
            .unwrap_or_default()
    }
}

/// A classic group.
#[derive(Clone, Debug)]
pub struct ClassicGroup {
    pub(crate) group_id: String,
    pub(crate) state: State,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    pub(crate) protocol: Option<String>,
    pub(crate) leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    /// group.instance.id → member id, for static members.
    pub(crate) static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pub(crate) pending_members: BTreeMap<String, Millis>,
    /// When the group entered its current state (GroupMetadataValue.currentStateTimestamp).
    pub(crate) state_since: Millis,
    pub(crate) join_deadline: Option<Millis>,
    pub(crate) sync_deadline: Option<Millis>,
    /// In the initial delayed join of an empty group: rebalance time left to extend by, and
    /// whether a member joined during the current delay.
    pub(crate) initial_delay: Option<(i64, bool)>,
    /// The leader's assignment being made durable.
    pub(crate) pending_assignment: Option<(AppendId, BTreeMap<String, Vec<u8>>)>,
    /// Durable: the last GroupMetadataValue replayed (I21). Only replay writes it.
    pub(crate) stored: Option<GroupMetadataValue>,
}

impl ClassicGroup {
    pub(crate) fn new(group_id: &str, now: Millis) -> ClassicGroup {
        ClassicGroup {
            group_id: group_id.to_owned(),
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            state_since: now,
            join_deadline: None,
            sync_deadline: None,
            initial_delay: None,
            pending_assignment: None,
            stored: None,
        }
    }

    /// The group's state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The current generation.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The current leader.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// The selected protocol.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Member ids, sorted.
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// The assignment the member holds in the current generation, if it is a member.
    pub fn assignment_of(&self, member_id: &str) -> Option<&[u8]> {
        self.members.get(member_id).map(|m| m.assignment.as_slice())
    }

    /// The group's last durable metadata.
    pub fn stored(&self) -> Option<&GroupMetadataValue> {
        self.stored.as_ref()
    }

    /// Applies `event` through the state table. `Reject` leaves the state unchanged and is
    /// returned as the error; `Impossible` is a programmer error (asserted in debug builds,
    /// answered UNKNOWN_SERVER_ERROR in release).
    pub(crate) fn transition(&mut self, event: Event, now: Millis) -> Result<State, ErrorCode> {
        match transition(self.state, event) {
            Outcome::Goto(next) => {
                if next != self.state {
                    self.state = next;
                    self.state_since = now;
                }
                Ok(next)
            }
            Outcome::Reject(code) => Err(code),
            Outcome::Impossible => {
                debug_assert!(false, "impossible event {event:?} in {:?}", self.state);
                Err(ErrorCode::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    /// Checks `member_id` (and `group_instance_id`) against the membership: a static
    /// instance now owned by another member id is FENCED_INSTANCE_ID (I22), an unknown
    /// member UNKNOWN_MEMBER_ID.
    pub(crate) fn validate_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        if let Some(instance) = group_instance_id {
            if let Some(owner) = self.static_members.get(instance) {
                if owner != member_id {
                    return Err(ErrorCode::FENCED_INSTANCE_ID);
                }
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ErrorCode::UNKNOWN_MEMBER_ID)
        }
    }

    /// Kafka's rule for a join's protocols: an empty group takes any non-empty set; otherwise
    /// the protocol type must match and one of the protocols must be supported by every
    /// current member.
    pub(crate) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[JoinProtocol],
    ) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self
            .members
            .values()
            .any(|m| m.protocol_type != protocol_type)
        {
            return false;
        }
        protocols.iter().any(|p| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|mp| mp.name == p.name))
        })
    }

    /// Kafka's protocol selection: among the protocols every member supports, each member
    /// votes for the first in its own preference order; the most votes win (ties go to the
    /// candidate the earliest-joined member prefers).
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let mut by_join: Vec<&Member> = self.members.values().collect();
        by_join.sort_by_key(|m| m.join_seq);
        let first = by_join.first()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| {
                by_join
                    .iter()
                    .all(|m| m.protocols.iter().any(|mp| mp.name == *name))
            })
            .collect();
        let mut votes: Vec<(usize, &str)> = candidates.iter().map(|c| (0, *c)).collect();
        for m in &by_join {
            if let Some(choice) = m
                .protocols
                .iter()
                .find(|p| candidates.contains(&p.name.as_str()))
            {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == choice.name) {
                    v.0 += 1;
                }
            }
        }
        // max_by_key keeps the last maximum; iterate reversed so the first candidate wins ties.
        votes
            .iter()
            .rev()
            .max_by_key(|(n, _)| *n)
            .map(|(_, c)| (*c).to_owned())
    }

    /// Every member has a parked join and no handed-out member id is outstanding.
    pub(crate) fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// The largest rebalance timeout among members (the join and sync phases' length).
    pub(crate) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Topics the members subscribe to (from consumer subscription metadata of the selected
    /// protocol), or `None` if any subscription cannot be read (then every topic counts as
    /// subscribed, as in Kafka).
    pub(crate) fn subscribed_topics(&self) -> Option<Vec<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let mut topics = Vec::new();
        for m in self.members.values() {
            let meta = m.metadata_for(self.protocol.as_deref());
            topics.extend(parse_subscription_topics(&meta)?);
        }
        topics.sort();
        topics.dedup();
        Some(topics)
    }
}

/// The topics of a ConsumerProtocolSubscription (version int16, topics array of strings,
/// then fields we do not need). Bounded: `None` on anything malformed.
pub(crate) fn parse_subscription_topics(bytes: &[u8]) -> Option<Vec<String>> {
    let mut r = crate::field_codec::FieldReader::new(bytes);
    let _version = r.i16().ok()?;
    let count = r.array_len(2).ok()?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(r.string().ok()?);
    }
    Some(topics)
}
