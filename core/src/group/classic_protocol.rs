//! The classic protocol's requests — JoinGroup, SyncGroup, Heartbeat, LeaveGroup — and the
//! rebalance they drive: join phase (initial delay, rebalance timeout), the SyncGroup barrier,
//! session expiry. Methods of [`Coordinator`]; state changes go through the state table.

use std::collections::BTreeMap;

use super::classic::{ClassicGroup, Member};
use super::codes::ErrorCode;
use super::coordinator::*;
use super::handles::{Millis, RequestToken};
use super::messages::*;
use super::records::*;
use super::state::{Event, State};
use super::Group;

impl Coordinator {
    // ------------------------------------------------------------ JoinGroup

    pub(super) fn join_error(
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

    pub(super) fn join_group(&mut self, token: RequestToken, req: JoinGroupRequest, now: Millis) {
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

    pub(super) fn add_member_and_rebalance(
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
    pub(super) fn replace_static_member(
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
    pub(super) fn prepare_rebalance(&mut self, gid: &str, event: Event, now: Millis) {
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
    pub(super) fn try_complete_join(&mut self, gid: &str, now: Millis) {
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

    pub(super) fn join_phase_expired(&mut self, gid: &str, now: Millis) {
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
    pub(super) fn complete_join(&mut self, gid: &str, now: Millis) {
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

    pub(super) fn sync_group(&mut self, token: RequestToken, req: SyncGroupRequest, now: Millis) {
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

    pub(super) fn sync_phase_expired(&mut self, gid: &str, now: Millis) {
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

    pub(super) fn heartbeat(&mut self, req: &HeartbeatRequest, now: Millis) -> ErrorCode {
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
    pub(super) fn remove_member(&mut self, gid: &str, member_id: &str) {
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

    pub(super) fn session_expired(&mut self, gid: &str, member_id: &str, now: Millis) {
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

    pub(super) fn leave_group(&mut self, token: RequestToken, req: LeaveGroupRequest, now: Millis) {
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
}
