//! A driver for `core::group::Coordinator` in tests: a virtual clock, an in-memory offsets
//! log that makes every append durable (or fails the ones asked to fail), and the answers
//! collected by token.

#![allow(dead_code)]

use std::collections::HashMap;

use minikafka_core::group::records::GroupRecord;
use minikafka_core::group::*;

pub const GROUP: &str = "g";

pub struct Driver {
    pub c: Coordinator,
    pub now: Millis,
    next_token: u64,
    /// Every record made durable, in log order.
    pub log: Vec<GroupRecord>,
    /// Every durable append with its kind (transactional batches, markers), in log order.
    pub batches: Vec<(AppendKind, Vec<GroupRecord>)>,
    pub answers: HashMap<RequestToken, GroupResponse>,
    /// Fail this many of the next appends (with `failure`).
    pub fail_next: usize,
    pub failure: AppendError,
    /// When false, appends are held in `held` until `release_held` is called.
    pub auto_durable: bool,
    pub held: Vec<Append>,
}

pub fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

impl Driver {
    pub fn new(config: GroupConfig) -> Driver {
        let mut d = Driver {
            c: Coordinator::new(config, 42),
            now: 1_000_000,
            next_token: 0,
            log: Vec::new(),
            batches: Vec::new(),
            answers: HashMap::new(),
            fail_next: 0,
            failure: AppendError::Unavailable,
            auto_durable: true,
            held: Vec::new(),
        };
        let now = d.now;
        d.c.handle_timeout(now);
        d
    }

    pub fn send(&mut self, req: GroupRequest) -> RequestToken {
        self.next_token += 1;
        let token = RequestToken(self.next_token);
        self.c.handle_request(token, req, self.now);
        self.pump();
        token
    }

    /// Drains the coordinator's outputs.
    pub fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(append) = self.c.poll_append() {
                progressed = true;
                if self.auto_durable {
                    self.report(append);
                } else {
                    self.held.push(append);
                }
            }
            while let Some((token, resp)) = self.c.poll_response() {
                progressed = true;
                let previous = self.answers.insert(token, resp);
                assert!(previous.is_none(), "two answers for {token:?}");
            }
            if !progressed {
                break;
            }
        }
    }

    fn report(&mut self, append: Append) {
        if self.fail_next > 0 {
            self.fail_next -= 1;
            self.c
                .handle_appended(append.id, Err(self.failure), self.now);
        } else {
            if append.kind == AppendKind::Plain {
                self.log.extend(append.records.iter().cloned());
            }
            self.batches.push((append.kind, append.records.clone()));
            self.c.handle_appended(append.id, Ok(()), self.now);
        }
    }

    /// Reports every held append (in order) as durable.
    pub fn release_held(&mut self) {
        for a in std::mem::take(&mut self.held) {
            self.report(a);
        }
        self.pump();
    }

    /// Advances the virtual clock to `now + ms`, firing each deadline at its own time.
    pub fn advance(&mut self, ms: i64) {
        let target = self.now + ms;
        while let Some((at, _)) = self.c.poll_timeout() {
            if at > target {
                break;
            }
            self.now = self.now.max(at);
            let now = self.now;
            self.c.handle_timeout(now);
            self.pump();
        }
        self.now = target;
    }

    pub fn take(&mut self, token: RequestToken) -> Option<GroupResponse> {
        self.answers.remove(&token)
    }

    pub fn join_answer(&mut self, token: RequestToken) -> Option<JoinGroupResponse> {
        match self.take(token)? {
            GroupResponse::JoinGroup(r) => Some(r),
            other => panic!("not a join answer: {other:?}"),
        }
    }

    pub fn sync_answer(&mut self, token: RequestToken) -> Option<SyncGroupResponse> {
        match self.take(token)? {
            GroupResponse::SyncGroup(r) => Some(r),
            other => panic!("not a sync answer: {other:?}"),
        }
    }

    /// A fresh coordinator that replayed this one's log (a restart).
    pub fn restarted(&self) -> Coordinator {
        let mut c = Coordinator::new(self.c.config().clone(), 7);
        for (kind, records) in &self.batches {
            match *kind {
                AppendKind::Plain => {
                    for r in records {
                        c.replay(&r.key, r.value.as_deref())
                            .expect("own record replays");
                    }
                }
                AppendKind::Transactional {
                    producer_id,
                    producer_epoch,
                } => {
                    for r in records {
                        c.replay_transactional(
                            producer_id,
                            producer_epoch,
                            &r.key,
                            r.value.as_deref(),
                        )
                        .expect("own record replays");
                    }
                }
                AppendKind::Marker {
                    producer_id,
                    result,
                    ..
                } => c.replay_marker(producer_id, result),
            }
        }
        c.handle_timeout(self.now);
        c
    }

    // ---------------------------------------------------------------- request helpers

    pub fn join(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        protocols: &[(&str, &[u8])],
    ) -> RequestToken {
        self.join_to(GROUP, member_id, instance, protocols, 10_000)
    }

    pub fn join_to(
        &mut self,
        group: &str,
        member_id: &str,
        instance: Option<&str>,
        protocols: &[(&str, &[u8])],
        session_timeout_ms: i32,
    ) -> RequestToken {
        self.send(GroupRequest::JoinGroup(join_request(
            group,
            member_id,
            instance,
            protocols,
            session_timeout_ms,
        )))
    }

    /// A v5+ dynamic member's first join: MEMBER_ID_REQUIRED, then the join with the id.
    /// Returns the member id and the parked join's token.
    pub fn new_member(&mut self, protocols: &[(&str, &[u8])]) -> (String, RequestToken) {
        let t = self.join("", None, protocols);
        let r = self
            .join_answer(t)
            .expect("member id required is immediate");
        assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED);
        let id = r.member_id;
        let t = self.join(&id, None, protocols);
        (id, t)
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        generation: i32,
        assignments: &[(&str, &[u8])],
    ) -> RequestToken {
        self.send(GroupRequest::SyncGroup(SyncGroupRequest {
            version: 5,
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: None,
            protocol_type: Some("consumer".to_owned()),
            protocol_name: None,
            assignments: assignments
                .iter()
                .map(|(m, a)| ((*m).to_owned(), a.to_vec()))
                .collect(),
        }))
    }

    pub fn heartbeat(&mut self, member_id: &str, generation: i32) -> ErrorCode {
        let t = self.send(GroupRequest::Heartbeat(HeartbeatRequest {
            group_id: GROUP.to_owned(),
            generation_id: generation,
            member_id: member_id.to_owned(),
            group_instance_id: None,
        }));
        match self.take(t) {
            Some(GroupResponse::Heartbeat(r)) => r.error_code,
            other => panic!("heartbeat answer: {other:?}"),
        }
    }

    pub fn leave(&mut self, members: &[(&str, Option<&str>)]) -> LeaveGroupResponse {
        let t = self.send(GroupRequest::LeaveGroup(LeaveGroupRequest {
            group_id: GROUP.to_owned(),
            members: members
                .iter()
                .map(|(m, i)| LeavingMember {
                    member_id: (*m).to_owned(),
                    group_instance_id: i.map(str::to_owned),
                })
                .collect(),
        }));
        match self.take(t) {
            Some(GroupResponse::LeaveGroup(r)) => r,
            other => panic!("leave answer: {other:?}"),
        }
    }

    /// Commits `offset` to partition `p` of topic `t`; returns the token.
    pub fn commit_async(
        &mut self,
        member_id: &str,
        generation: i32,
        t: &str,
        p: i32,
        offset: i64,
    ) -> RequestToken {
        self.send(GroupRequest::OffsetCommit(commit_request(
            GROUP, member_id, generation, t, p, offset, None,
        )))
    }

    /// Commits and returns the partition's code (the answer must be there: appends are durable).
    pub fn commit(
        &mut self,
        member_id: &str,
        generation: i32,
        t: &str,
        p: i32,
        offset: i64,
    ) -> ErrorCode {
        let token = self.commit_async(member_id, generation, t, p, offset);
        commit_code(self.take(token).expect("commit answered"))
    }

    pub fn fetch(&mut self, group: &str, t: &str, p: i32) -> i64 {
        let token = self.send(GroupRequest::OffsetFetch(OffsetFetchRequest {
            require_stable: false,
            groups: vec![OffsetFetchGroup {
                group_id: group.to_owned(),
                topics: Some(vec![TopicPartitions {
                    name: t.to_owned(),
                    partitions: vec![p],
                }]),
            }],
        }));
        match self.take(token) {
            Some(GroupResponse::OffsetFetch(r)) => r.groups[0].topics[0].partitions[0].offset,
            other => panic!("fetch answer: {other:?}"),
        }
    }

    pub fn state(&self) -> Option<minikafka_core::group::state::State> {
        self.c.group_state(GROUP)
    }
}

pub fn join_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    protocols: &[(&str, &[u8])],
    session_timeout_ms: i32,
) -> JoinGroupRequest {
    JoinGroupRequest {
        version: 9,
        group_id: group.to_owned(),
        session_timeout_ms,
        rebalance_timeout_ms: 30_000,
        member_id: member_id.to_owned(),
        group_instance_id: instance.map(str::to_owned),
        protocol_type: "consumer".to_owned(),
        protocols: protocols
            .iter()
            .map(|(n, m)| JoinProtocol {
                name: (*n).to_owned(),
                metadata: m.to_vec(),
            })
            .collect(),
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
    }
}

pub fn commit_request(
    group: &str,
    member_id: &str,
    generation: i32,
    t: &str,
    p: i32,
    offset: i64,
    metadata: Option<String>,
) -> OffsetCommitRequest {
    OffsetCommitRequest {
        version: 8,
        group_id: group.to_owned(),
        generation_id: generation,
        member_id: member_id.to_owned(),
        group_instance_id: None,
        retention_time_ms: -1,
        topics: vec![CommitTopic {
            name: t.to_owned(),
            partitions: vec![CommitPartition {
                partition: p,
                offset,
                leader_epoch: -1,
                metadata,
            }],
        }],
    }
}

pub fn commit_code(resp: GroupResponse) -> ErrorCode {
    match resp {
        GroupResponse::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("commit answer: {other:?}"),
    }
}

/// A ConsumerProtocolSubscription v0 for `topics`.
pub fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}
