//! One member of a classic-protocol group (JoinGroup / SyncGroup / Heartbeat), as a pure state
//! machine: the decisions of joining, rebalancing and fencing, with no I/O and no clock.
//!
//! Contract (quinn-proto's four kinds of methods):
//! - Getters: [`ClassicMember::state`], [`ClassicMember::member_id`],
//!   [`ClassicMember::generation`], [`ClassicMember::owned`], [`ClassicMember::is_leader`],
//!   [`ClassicMember::protocol`], [`ClassicMember::is_cooperative`].
//! - Inputs, with `now` passed in: [`ClassicMember::handle_join_response`],
//!   [`ClassicMember::handle_sync_response`], [`ClassicMember::handle_heartbeat_response`],
//!   [`ClassicMember::handle_timeout`].
//! - Mutators: [`ClassicMember::begin_join`] (the caller is about to send JoinGroup; an eager
//!   member revokes everything first), [`ClassicMember::begin_leave`], [`ClassicMember::rejoin`].
//! - Outputs, drained until `None` after every input: [`ClassicMember::poll_action`] (what to
//!   send next), [`ClassicMember::poll_event`] (partitions assigned, revoked or lost, for the
//!   rebalance callbacks), [`ClassicMember::poll_timeout`] (when to call back).
//!
//! Rebalance protocol: cooperative only when every configured assignor is (Kafka's rule), so
//! one member never mixes eager and cooperative. Eager: revoke all, join, take the new
//! assignment. Cooperative: join owning what it owns (sent in the subscription), then revoke
//! only what the new assignment lacks; if anything was revoked, rejoin at once so the
//! partitions held back can be handed over (the two-phase rebalance).
//!
//! | state \ input        | join ok          | join error                  | sync ok                      | sync / heartbeat error         | heartbeat ok | timeout past session |
//! |----------------------|------------------|-----------------------------|------------------------------|--------------------------------|--------------|----------------------|
//! | Unjoined             | ignored          | ignored                     | ignored                      | ignored                        | ignored      | -                    |
//! | Joining              | Syncing          | Unjoined (retry or fatal)   | ignored                      | ignored                        | ignored      | -                    |
//! | Syncing              | ignored          | ignored                     | Stable (Unjoined if revoked, cooperative) | Unjoined (fenced: lost) | ignored      | -                    |
//! | Stable               | ignored          | ignored                     | ignored                      | Unjoined (fenced: lost)        | Stable       | Unjoined, lost       |

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::assignor::{Assignor, MemberSubscription};
use super::member_metadata::{self, Subscription};
use crate::consumer::TopicPartition;

/// Kafka error codes this state machine acts on.
pub mod codes {
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    /// COORDINATOR_NOT_AVAILABLE.
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    /// NOT_COORDINATOR.
    pub const NOT_COORDINATOR: i16 = 16;
    /// ILLEGAL_GENERATION.
    pub const ILLEGAL_GENERATION: i16 = 22;
    /// INCONSISTENT_GROUP_PROTOCOL.
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    /// UNKNOWN_MEMBER_ID.
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    /// REBALANCE_IN_PROGRESS.
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    /// MEMBER_ID_REQUIRED (KIP-394).
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    /// FENCED_INSTANCE_ID (KIP-345).
    pub const FENCED_INSTANCE_ID: i16 = 82;
    /// FENCED_MEMBER_EPOCH (KIP-848).
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    /// UNRELEASED_INSTANCE_ID (KIP-848).
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;

    /// The coordinator is busy or elsewhere: retry after a backoff.
    pub fn is_coordinator_retriable(code: i16) -> bool {
        matches!(
            code,
            COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
        )
    }
}

/// Where the member is in the join/sync cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Not in a generation: JoinGroup is next.
    Unjoined,
    /// JoinGroup sent, awaiting its answer.
    Joining,
    /// Joined a generation, SyncGroup next or awaiting its answer.
    Syncing,
    /// Holding the generation's assignment; heartbeating.
    Stable,
}

/// What the caller should send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Call [`ClassicMember::begin_join`], drain events, send JoinGroup.
    Join,
    /// Send Heartbeat for the current generation.
    Heartbeat,
}

/// Partitions changing hands, for the rebalance callbacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberEvent {
    /// Newly assigned: start fetching (resume from committed offsets).
    Assigned(Vec<TopicPartition>),
    /// Given up in an orderly way: commit what was consumed, then stop fetching.
    Revoked(Vec<TopicPartition>),
    /// Lost without a chance to commit (fenced, or the session expired): stop fetching.
    Lost(Vec<TopicPartition>),
}

/// The JoinGroup response fields the member needs.
#[derive(Clone, Debug, Default)]
pub struct JoinResponse {
    /// Kafka error code.
    pub error_code: i16,
    /// The new generation.
    pub generation_id: i32,
    /// This member's id (assigned by the coordinator).
    pub member_id: String,
    /// The leader's member id.
    pub leader: String,
    /// The chosen protocol (assignor) name.
    pub protocol_name: Option<String>,
    /// Every member's id and metadata (only the leader receives them).
    pub members: Vec<(String, Bytes)>,
}

/// What follows a JoinGroup response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinOutcome {
    /// Send JoinGroup again at once (a member id was handed out, or the group is rebalancing).
    RetryNow,
    /// Send JoinGroup again after a backoff (the coordinator is busy).
    RetryAfterBackoff,
    /// Joined as a follower: send SyncGroup with no assignments.
    Follower,
    /// Joined as the leader: run the assignor over these members, send SyncGroup with it.
    Leader(Vec<MemberSubscription>),
    /// The group refuses this member for good (the error code says why).
    Fatal(i16),
}

/// What follows a SyncGroup or Heartbeat response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Carry on (a rejoin, if needed, shows in [`ClassicMember::poll_action`]).
    Continue,
    /// Carry on after a backoff (the coordinator is busy).
    Backoff,
    /// The group refuses this member for good.
    Fatal(i16),
}

/// Timers and choices of a classic member.
#[derive(Clone, Debug)]
pub struct ClassicSettings {
    /// Topics subscribed to.
    pub topics: Vec<String>,
    /// Assignors offered, in preference order.
    pub assignors: Vec<Assignor>,
    /// The session timeout sent in JoinGroup; no successful heartbeat for this long loses the
    /// assignment.
    pub session_timeout: Duration,
    /// Time between heartbeats.
    pub heartbeat_interval: Duration,
}

/// One classic-protocol group member (see the module docs).
#[derive(Debug)]
pub struct ClassicMember {
    settings: ClassicSettings,
    state: MemberState,
    member_id: String,
    generation: i32,
    leader: String,
    protocol: Option<Assignor>,
    owned: BTreeSet<TopicPartition>,
    next_heartbeat: Option<Instant>,
    last_heartbeat_ok: Option<Instant>,
    events: VecDeque<MemberEvent>,
}

impl ClassicMember {
    /// A member that has not joined yet.
    pub fn new(settings: ClassicSettings) -> Self {
        ClassicMember {
            settings,
            state: MemberState::Unjoined,
            member_id: String::new(),
            generation: -1,
            leader: String::new(),
            protocol: None,
            owned: BTreeSet::new(),
            next_heartbeat: None,
            last_heartbeat_ok: None,
            events: VecDeque::new(),
        }
    }

    // --- getters ---

    /// Where the member is.
    pub fn state(&self) -> MemberState {
        self.state
    }

    /// The member id ("" before the coordinator handed one out).
    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The generation joined (-1 before the first).
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// Partitions owned now.
    pub fn owned(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// Whether this member led the last join.
    pub fn is_leader(&self) -> bool {
        !self.member_id.is_empty() && self.leader == self.member_id
    }

    /// The assignor the group chose at the last join.
    pub fn protocol(&self) -> Option<Assignor> {
        self.protocol
    }

    /// Cooperative rebalancing: every offered assignor is cooperative.
    pub fn is_cooperative(&self) -> bool {
        !self.settings.assignors.is_empty()
            && self.settings.assignors.iter().all(|a| a.is_cooperative())
    }

    /// The settings.
    pub fn settings(&self) -> &ClassicSettings {
        &self.settings
    }

    /// The protocols to offer in JoinGroup: each assignor's name with this member's
    /// subscription (owned partitions included, so a cooperative leader can be sticky).
    pub fn protocols(&self) -> Vec<(&'static str, Bytes)> {
        let subscription = Subscription {
            topics: self.settings.topics.clone(),
            user_data: None,
            owned_partitions: self.owned.iter().cloned().collect(),
            generation_id: self.generation,
            rack_id: None,
        };
        let metadata =
            member_metadata::encode_subscription(&subscription, member_metadata::CURRENT_VERSION);
        self.settings
            .assignors
            .iter()
            .map(|a| (a.name(), metadata.clone()))
            .collect()
    }

    // --- mutators ---

    /// The caller is about to send JoinGroup. An eager member revokes all it owns first (the
    /// caller drains the event, commits, then sends).
    pub fn begin_join(&mut self) {
        if !self.is_cooperative() && !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MemberEvent::Revoked(all));
        }
        self.state = MemberState::Joining;
        self.next_heartbeat = None;
    }

    /// Asks for a rejoin (e.g. the subscription changed).
    pub fn rejoin(&mut self) {
        self.state = MemberState::Unjoined;
        self.next_heartbeat = None;
    }

    /// The member leaves the group: everything owned is revoked (the member id and generation
    /// stay valid, so the revoked partitions can still be committed). Returns the member id to
    /// name in LeaveGroup, if the member ever joined; then call [`ClassicMember::finish_leave`].
    pub fn begin_leave(&mut self) -> Option<String> {
        if !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MemberEvent::Revoked(all));
        }
        self.state = MemberState::Unjoined;
        self.next_heartbeat = None;
        (!self.member_id.is_empty()).then(|| self.member_id.clone())
    }

    /// LeaveGroup went out: forget the membership.
    pub fn finish_leave(&mut self) {
        self.member_id.clear();
        self.generation = -1;
    }

    // --- inputs ---

    /// The answer to JoinGroup.
    pub fn handle_join_response(&mut self, response: JoinResponse, _now: Instant) -> JoinOutcome {
        if self.state != MemberState::Joining {
            return JoinOutcome::RetryNow;
        }
        self.state = MemberState::Unjoined;
        match response.error_code {
            0 => {}
            codes::MEMBER_ID_REQUIRED => {
                self.member_id = response.member_id;
                return JoinOutcome::RetryNow;
            }
            codes::UNKNOWN_MEMBER_ID | codes::ILLEGAL_GENERATION => {
                self.fence(response.error_code);
                return JoinOutcome::RetryNow;
            }
            codes::REBALANCE_IN_PROGRESS => return JoinOutcome::RetryNow,
            code if codes::is_coordinator_retriable(code) => return JoinOutcome::RetryAfterBackoff,
            code => return JoinOutcome::Fatal(code),
        }
        let Some(protocol) = response
            .protocol_name
            .as_deref()
            .and_then(Assignor::from_name)
            .filter(|a| self.settings.assignors.contains(a))
        else {
            return JoinOutcome::Fatal(codes::INCONSISTENT_GROUP_PROTOCOL);
        };
        self.member_id = response.member_id;
        self.generation = response.generation_id;
        self.leader = response.leader;
        self.protocol = Some(protocol);
        self.state = MemberState::Syncing;
        if !self.is_leader() {
            return JoinOutcome::Follower;
        }
        let members = response
            .members
            .into_iter()
            .map(|(member_id, metadata)| {
                // A member whose metadata cannot be read subscribes to nothing.
                let sub = member_metadata::decode_subscription(&metadata).unwrap_or_default();
                MemberSubscription {
                    member_id,
                    topics: sub.topics,
                    owned: sub.owned_partitions,
                    generation_id: sub.generation_id,
                }
            })
            .collect();
        JoinOutcome::Leader(members)
    }

    /// The answer to SyncGroup: `assignment` is this member's ConsumerProtocol assignment.
    pub fn handle_sync_response(
        &mut self,
        error_code: i16,
        assignment: &[u8],
        now: Instant,
    ) -> Outcome {
        if self.state != MemberState::Syncing {
            return Outcome::Continue;
        }
        if error_code != 0 {
            return self.on_generation_error(error_code);
        }
        let assigned: BTreeSet<TopicPartition> =
            match member_metadata::decode_assignment(assignment) {
                Ok(a) => a.partitions.into_iter().collect(),
                Err(_) => return Outcome::Fatal(codes::INCONSISTENT_GROUP_PROTOCOL),
            };
        let revoked: Vec<TopicPartition> = self.owned.difference(&assigned).cloned().collect();
        let added: Vec<TopicPartition> = assigned.difference(&self.owned).cloned().collect();
        if !revoked.is_empty() {
            self.events.push_back(MemberEvent::Revoked(revoked.clone()));
        }
        if !added.is_empty() {
            self.events.push_back(MemberEvent::Assigned(added));
        }
        self.owned = assigned;
        self.state = MemberState::Stable;
        self.last_heartbeat_ok = Some(now);
        self.next_heartbeat = Some(now + self.settings.heartbeat_interval);
        if self.is_cooperative() && !revoked.is_empty() {
            // Second phase: what we gave up can now be handed to its new owner.
            self.rejoin();
        }
        Outcome::Continue
    }

    /// The answer to Heartbeat.
    pub fn handle_heartbeat_response(&mut self, error_code: i16, now: Instant) -> Outcome {
        if self.state != MemberState::Stable {
            return Outcome::Continue;
        }
        match error_code {
            0 => {
                self.last_heartbeat_ok = Some(now);
                self.next_heartbeat = Some(now + self.settings.heartbeat_interval);
                Outcome::Continue
            }
            code if codes::is_coordinator_retriable(code) => {
                self.next_heartbeat = Some(now + self.settings.heartbeat_interval);
                Outcome::Backoff
            }
            code => self.on_generation_error(code),
        }
    }

    /// Time passed: a member with no successful heartbeat for a session timeout has been
    /// evicted by the coordinator, so its partitions are lost.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state != MemberState::Stable {
            return;
        }
        let expired = self
            .last_heartbeat_ok
            .is_some_and(|ok| now.saturating_duration_since(ok) > self.settings.session_timeout);
        if expired {
            self.lose_all();
            self.rejoin();
        }
    }

    // --- outputs ---

    /// What to send now, if anything.
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        match self.state {
            MemberState::Unjoined => Some(Action::Join),
            MemberState::Stable if self.next_heartbeat.is_some_and(|at| now >= at) => {
                Some(Action::Heartbeat)
            }
            _ => None,
        }
    }

    /// The next partition change for the callbacks.
    pub fn poll_event(&mut self) -> Option<MemberEvent> {
        self.events.pop_front()
    }

    /// When the member next needs [`ClassicMember::poll_action`] (the next heartbeat).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_heartbeat
    }

    fn on_generation_error(&mut self, code: i16) -> Outcome {
        match code {
            codes::REBALANCE_IN_PROGRESS => {
                self.rejoin();
                Outcome::Continue
            }
            codes::ILLEGAL_GENERATION | codes::UNKNOWN_MEMBER_ID | codes::FENCED_INSTANCE_ID => {
                self.fence(code);
                self.rejoin();
                if code == codes::FENCED_INSTANCE_ID {
                    // Another process took this group.instance.id.
                    return Outcome::Fatal(code);
                }
                Outcome::Continue
            }
            code if codes::is_coordinator_retriable(code) => {
                self.rejoin();
                Outcome::Backoff
            }
            code => Outcome::Fatal(code),
        }
    }

    /// Fenced out of the generation: what it owned is lost, and an unknown member id is
    /// forgotten so the next join asks for a new one.
    fn fence(&mut self, code: i16) {
        self.lose_all();
        self.generation = -1;
        if code == codes::UNKNOWN_MEMBER_ID {
            self.member_id.clear();
        }
    }

    fn lose_all(&mut self) {
        if !self.owned.is_empty() {
            let all = std::mem::take(&mut self.owned).into_iter().collect();
            self.events.push_back(MemberEvent::Lost(all));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::member_metadata::{encode_assignment, Assignment};

    fn settings(assignors: &[Assignor]) -> ClassicSettings {
        ClassicSettings {
            topics: vec!["t".into()],
            assignors: assignors.to_vec(),
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
        }
    }

    fn tps(parts: &[i32]) -> Vec<TopicPartition> {
        parts.iter().map(|p| TopicPartition::new("t", *p)).collect()
    }

    fn assignment(parts: &[i32]) -> Bytes {
        encode_assignment(
            &Assignment {
                partitions: tps(parts),
                user_data: None,
            },
            3,
        )
    }

    fn joined(generation: i32, leader: &str, protocol: &str) -> JoinResponse {
        JoinResponse {
            error_code: 0,
            generation_id: generation,
            member_id: "m1".into(),
            leader: leader.into(),
            protocol_name: Some(protocol.into()),
            members: Vec::new(),
        }
    }

    fn events(m: &mut ClassicMember) -> Vec<MemberEvent> {
        std::iter::from_fn(|| m.poll_event()).collect()
    }

    /// Joins and syncs `parts` in generation `generation`.
    fn stable(m: &mut ClassicMember, generation: i32, parts: &[i32], now: Instant) {
        assert_eq!(m.poll_action(now), Some(Action::Join));
        m.begin_join();
        let protocol = m.settings.assignors[0].name();
        let outcome = m.handle_join_response(joined(generation, "other", protocol), now);
        assert_eq!(outcome, JoinOutcome::Follower);
        assert_eq!(
            m.handle_sync_response(0, &assignment(parts), now),
            Outcome::Continue
        );
    }

    #[test]
    fn member_id_required_then_join_as_leader_with_every_subscription() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::Range]));
        assert_eq!(m.poll_action(now), Some(Action::Join));
        m.begin_join();
        let outcome = m.handle_join_response(
            JoinResponse {
                error_code: codes::MEMBER_ID_REQUIRED,
                member_id: "m1".into(),
                ..JoinResponse::default()
            },
            now,
        );
        assert_eq!(outcome, JoinOutcome::RetryNow);
        assert_eq!(m.member_id(), "m1");
        assert_eq!(m.poll_action(now), Some(Action::Join));
        m.begin_join();
        let metadata = m.protocols()[0].1.clone();
        let mut response = joined(4, "m1", "range");
        response.members = vec![
            ("m1".into(), metadata),
            ("m2".into(), Bytes::from_static(b"\x00")),
        ];
        let JoinOutcome::Leader(members) = m.handle_join_response(response, now) else {
            panic!("expected to lead");
        };
        assert_eq!(members[0].topics, vec!["t".to_string()]);
        assert!(
            members[1].topics.is_empty(),
            "unreadable metadata subscribes to nothing"
        );
        assert_eq!((m.generation(), m.state()), (4, MemberState::Syncing));
    }

    #[test]
    fn eager_members_revoke_everything_before_rejoining() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::Range]));
        stable(&mut m, 1, &[0, 1, 2], now);
        assert_eq!(events(&mut m), vec![MemberEvent::Assigned(tps(&[0, 1, 2]))]);
        let later = now + Duration::from_secs(3);
        assert_eq!(m.poll_action(later), Some(Action::Heartbeat));
        m.handle_heartbeat_response(codes::REBALANCE_IN_PROGRESS, later);
        stable(&mut m, 2, &[0, 1], later);
        assert_eq!(
            events(&mut m),
            vec![
                MemberEvent::Revoked(tps(&[0, 1, 2])),
                MemberEvent::Assigned(tps(&[0, 1]))
            ]
        );
    }

    #[test]
    fn cooperative_members_revoke_only_what_moves_then_rejoin() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::CooperativeSticky]));
        stable(&mut m, 1, &[0, 1, 2, 3], now);
        events(&mut m);
        m.handle_heartbeat_response(codes::REBALANCE_IN_PROGRESS, now);
        // The subscription sent on rejoin names what it owns.
        let sub = member_metadata::decode_subscription(&m.protocols()[0].1).expect("sub");
        assert_eq!(sub.owned_partitions, tps(&[0, 1, 2, 3]));
        assert_eq!(sub.generation_id, 1);
        stable(&mut m, 2, &[0, 1], now);
        assert_eq!(events(&mut m), vec![MemberEvent::Revoked(tps(&[2, 3]))]);
        // Something was revoked: the second phase starts at once.
        assert_eq!(m.poll_action(now), Some(Action::Join));
        stable(&mut m, 3, &[0, 1], now);
        assert_eq!(events(&mut m), vec![]);
        assert_eq!(m.state(), MemberState::Stable);
    }

    #[test]
    fn fencing_loses_partitions_without_revoking() {
        let now = Instant::now();
        for code in [codes::ILLEGAL_GENERATION, codes::UNKNOWN_MEMBER_ID] {
            let mut m = ClassicMember::new(settings(&[Assignor::Range]));
            stable(&mut m, 1, &[0], now);
            events(&mut m);
            assert_eq!(m.handle_heartbeat_response(code, now), Outcome::Continue);
            assert_eq!(events(&mut m), vec![MemberEvent::Lost(tps(&[0]))]);
            assert_eq!(m.generation(), -1);
            assert_eq!(m.member_id().is_empty(), code == codes::UNKNOWN_MEMBER_ID);
            assert_eq!(m.poll_action(now), Some(Action::Join));
        }
    }

    #[test]
    fn leaving_revokes_while_the_generation_is_still_valid() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::CooperativeSticky]));
        stable(&mut m, 5, &[0, 1], now);
        events(&mut m);
        assert_eq!(m.begin_leave().as_deref(), Some("m1"));
        assert_eq!(events(&mut m), vec![MemberEvent::Revoked(tps(&[0, 1]))]);
        // The revoked partitions are committed as this member of generation 5.
        assert_eq!((m.member_id(), m.generation()), ("m1", 5));
        m.finish_leave();
        assert_eq!((m.member_id(), m.generation()), ("", -1));
    }

    #[test]
    fn an_expired_session_loses_the_assignment() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::Range]));
        stable(&mut m, 1, &[0, 1], now);
        events(&mut m);
        m.handle_timeout(now + Duration::from_secs(5));
        assert_eq!(m.state(), MemberState::Stable);
        m.handle_timeout(now + Duration::from_secs(11));
        assert_eq!(events(&mut m), vec![MemberEvent::Lost(tps(&[0, 1]))]);
        assert_eq!(m.state(), MemberState::Unjoined);
    }

    #[test]
    fn a_protocol_we_did_not_offer_is_fatal() {
        let now = Instant::now();
        let mut m = ClassicMember::new(settings(&[Assignor::Range]));
        m.begin_join();
        let outcome = m.handle_join_response(joined(1, "x", "roundrobin"), now);
        assert_eq!(
            outcome,
            JoinOutcome::Fatal(codes::INCONSISTENT_GROUP_PROTOCOL)
        );
    }

    /// Every state × input: inputs that do not belong to the state are ignored (state kept).
    #[test]
    fn inputs_out_of_state_change_nothing() {
        let now = Instant::now();
        let make = |state: MemberState| {
            let mut m = ClassicMember::new(settings(&[Assignor::Range]));
            match state {
                MemberState::Unjoined => {}
                MemberState::Joining => m.begin_join(),
                MemberState::Syncing => {
                    m.begin_join();
                    m.handle_join_response(joined(1, "x", "range"), now);
                }
                MemberState::Stable => stable(&mut m, 1, &[0], now),
            }
            assert_eq!(m.state(), state);
            m
        };
        let states = [
            MemberState::Unjoined,
            MemberState::Joining,
            MemberState::Syncing,
            MemberState::Stable,
        ];
        for state in states {
            let mut m = make(state);
            let outcome = m.handle_join_response(joined(2, "x", "range"), now);
            let expect = if state == MemberState::Joining {
                MemberState::Syncing
            } else {
                assert_eq!(outcome, JoinOutcome::RetryNow);
                state
            };
            assert_eq!(m.state(), expect, "join in {state:?}");

            let mut m = make(state);
            m.handle_sync_response(0, &assignment(&[1]), now);
            let expect = if state == MemberState::Syncing {
                MemberState::Stable
            } else {
                state
            };
            assert_eq!(m.state(), expect, "sync in {state:?}");

            let mut m = make(state);
            m.handle_heartbeat_response(codes::REBALANCE_IN_PROGRESS, now);
            let expect = if state == MemberState::Stable {
                MemberState::Unjoined
            } else {
                state
            };
            assert_eq!(m.state(), expect, "heartbeat in {state:?}");

            let mut m = make(state);
            m.handle_timeout(now + Duration::from_secs(60));
            let expect = if state == MemberState::Stable {
                MemberState::Unjoined
            } else {
                state
            };
            assert_eq!(m.state(), expect, "timeout in {state:?}");
        }
    }
}
