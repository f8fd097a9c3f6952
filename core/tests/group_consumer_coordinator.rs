//! The consumer protocol through `core::group::Coordinator`: ConsumerGroupHeartbeat answers
//! wait for their records to be durable (I20), the coordinator's state equals the replay of
//! what it appended (I21), a failed append leaves no trace in the group, and
//! ConsumerGroupDescribe reports members and assignments.

use minikafka_core::group::consumer::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupState, DescribeRequest, TopicInfo, TopicMetadata,
};
use minikafka_core::group::consumer_records::TopicPartitions;
use minikafka_core::group::*;

fn topics() -> TopicMetadata {
    let mut t = TopicMetadata::new();
    t.topics.insert(
        "orders".to_string(),
        TopicInfo {
            topic_id: [7; 16],
            partition_count: 4,
        },
    );
    t
}

fn join(member_id: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        version: 1,
        group_id: "g".to_string(),
        member_id: member_id.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["orders".to_string()]),
        subscribed_topic_regex: Some(String::new()),
        topic_partitions: Some(Vec::new()),
        client_id: "rdkafka".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..Default::default()
    }
}

struct Driver {
    coordinator: Coordinator,
    log: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    next_token: u64,
    now: Millis,
}

impl Driver {
    fn new() -> Self {
        let mut coordinator = Coordinator::new(GroupConfig::default(), 1);
        coordinator.handle_topic_metadata(topics());
        Driver {
            coordinator,
            log: Vec::new(),
            next_token: 0,
            now: 0,
        }
    }

    /// Sends a heartbeat; completes its append with `result`; returns the answer.
    fn heartbeat(
        &mut self,
        req: ConsumerGroupHeartbeatRequest,
        result: Result<(), AppendError>,
    ) -> consumer::HeartbeatResponse {
        self.next_token += 1;
        let token = RequestToken(self.next_token);
        self.coordinator
            .handle_request(token, GroupRequest::ConsumerGroupHeartbeat(req), self.now);
        if let Some(append) = self.coordinator.poll_append() {
            assert!(
                self.coordinator.poll_response().is_none(),
                "no answer before its records are durable (I20)"
            );
            if result.is_ok() {
                self.log.extend(
                    append
                        .records
                        .iter()
                        .map(|r| (r.key.clone(), r.value.clone())),
                );
            }
            self.coordinator
                .handle_appended(append.id, result, self.now);
        }
        match self.coordinator.poll_response() {
            Some((t, GroupResponse::ConsumerGroupHeartbeat(resp))) => {
                assert_eq!(t, token);
                resp
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }

    fn describe(&mut self, group: &str) -> consumer::DescribedConsumerGroup {
        self.next_token += 1;
        let req = DescribeRequest {
            group_ids: vec![group.to_string()],
        };
        self.coordinator.handle_request(
            RequestToken(self.next_token),
            GroupRequest::ConsumerGroupDescribe(req),
            self.now,
        );
        match self.coordinator.poll_response() {
            Some((_, GroupResponse::ConsumerGroupDescribe(mut resp))) => {
                resp.groups.pop().expect("one group")
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }

    /// Moves the clock to `now`, fires the deadlines due, and makes what they append durable.
    fn advance(&mut self, now: Millis) {
        self.now = now;
        while let Some((at, _)) = self.coordinator.poll_timeout() {
            if at > now {
                break;
            }
            self.coordinator.handle_timeout(now);
        }
        while let Some(append) = self.coordinator.poll_append() {
            self.log.extend(
                append
                    .records
                    .iter()
                    .map(|r| (r.key.clone(), r.value.clone())),
            );
            self.coordinator.handle_appended(append.id, Ok(()), now);
        }
    }

    fn check_replay(&self) {
        let mut fresh = Coordinator::new(GroupConfig::default(), 1);
        fresh.handle_topic_metadata(topics());
        for (k, v) in &self.log {
            fresh.replay(k, v.as_deref()).expect("replays");
        }
        assert_eq!(fresh.durable_state(), self.coordinator.durable_state());
    }
}

#[test]
fn heartbeats_through_the_coordinator() {
    let mut d = Driver::new();
    let a = d.heartbeat(join("a"), Ok(()));
    assert_eq!(a.error_code, ErrorCode::NONE);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(
        a.assignment.as_ref().map(|tps| tps[0].partitions.clone()),
        Some(vec![0, 1, 2, 3])
    );
    d.check_replay();

    // b's join fails to append: the group forgets it.
    let failed = d.heartbeat(join("b"), Err(AppendError::Storage));
    assert_ne!(failed.error_code, ErrorCode::NONE);
    let desc = d.describe("g");
    assert_eq!(desc.members.len(), 1);
    d.check_replay();

    // b joins for real; a revokes, acknowledges; b gets its half.
    let b = d.heartbeat(join("b"), Ok(()));
    assert_eq!((b.error_code, b.member_epoch), (ErrorCode::NONE, 2));
    let mut beat = join("a");
    beat.member_epoch = 1;
    beat.rebalance_timeout_ms = -1;
    beat.subscribed_topic_names = None;
    beat.subscribed_topic_regex = None;
    beat.topic_partitions = None;
    let a = d.heartbeat(beat.clone(), Ok(()));
    let kept: Vec<TopicPartitions> = a.assignment.expect("revocation");
    assert_eq!(kept[0].partitions.len(), 2);
    beat.topic_partitions = Some(kept);
    let a = d.heartbeat(beat, Ok(()));
    assert_eq!(a.member_epoch, 2);
    let mut b_beat = join("b");
    b_beat.member_epoch = 2;
    b_beat.rebalance_timeout_ms = -1;
    b_beat.subscribed_topic_names = None;
    b_beat.subscribed_topic_regex = None;
    let b = d.heartbeat(b_beat, Ok(()));
    assert_eq!(b.assignment.map(|tps| tps[0].partitions.len()), Some(2));
    let desc = d.describe("g");
    assert_eq!(desc.state, ConsumerGroupState::Stable);
    assert_eq!(desc.members.len(), 2);
    d.check_replay();

    assert_eq!(d.describe("nope").error_code, ErrorCode::GROUP_ID_NOT_FOUND);
}

/// A steady heartbeat of a member that already has its assignment.
fn beat(member_id: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    let mut b = join(member_id);
    b.member_epoch = epoch;
    b.rebalance_timeout_ms = -1;
    b.subscribed_topic_names = None;
    b.subscribed_topic_regex = None;
    b.topic_partitions = None;
    b
}

#[test]
fn a_member_that_stops_heartbeating_is_fenced_and_its_partitions_move() {
    let session = i64::from(GroupConfig::default().consumer.session_timeout_ms);
    let mut d = Driver::new();
    assert_eq!(d.heartbeat(join("a"), Ok(())).member_epoch, 1);
    assert_eq!(d.heartbeat(join("b"), Ok(())).member_epoch, 2);
    // a gives up half of its partitions, then both are stable at epoch 2.
    let kept = d
        .heartbeat(beat("a", 1), Ok(()))
        .assignment
        .expect("revocation");
    let mut ack = beat("a", 1);
    ack.topic_partitions = Some(kept);
    assert_eq!(d.heartbeat(ack, Ok(())).member_epoch, 2);
    let b = d.heartbeat(beat("b", 2), Ok(()));
    assert_eq!(b.assignment.map(|tps| tps[0].partitions.len()), Some(2));
    assert_eq!(d.describe("g").members.len(), 2);

    // b goes silent; a keeps heartbeating within its session.
    let step = session / 3;
    for i in 1..=2 {
        d.advance(i * step);
        let a = d.heartbeat(beat("a", 2), Ok(()));
        assert_eq!(a.error_code, ErrorCode::NONE);
    }
    assert_eq!(
        d.describe("g").members.len(),
        2,
        "b's session has not expired yet"
    );
    let (deadline, _) = d.coordinator.poll_timeout().expect("b's session is armed");
    assert!(
        deadline <= session,
        "b's deadline is its last heartbeat plus the session"
    );

    // Past b's session: b is fenced by the coordinator's timer, through an append.
    let appended_before = d.log.len();
    d.advance(session + 1);
    assert!(
        d.log.len() > appended_before,
        "the fencing records were appended"
    );
    let desc = d.describe("g");
    assert_eq!(desc.members.len(), 1);
    assert_eq!(desc.members[0].member_id, "a");
    d.check_replay();

    // a's next heartbeat gets all four partitions; b is told it is unknown.
    let a = d.heartbeat(beat("a", 2), Ok(()));
    assert_eq!(a.error_code, ErrorCode::NONE);
    let mut parts = a.assignment.expect("new assignment")[0].partitions.clone();
    parts.sort_unstable();
    assert_eq!(parts, vec![0, 1, 2, 3]);
    let b = d.heartbeat(beat("b", 2), Ok(()));
    assert_eq!(b.error_code, ErrorCode::UNKNOWN_MEMBER_ID);
    d.check_replay();
}

#[test]
fn loaded_consumer_members_time_out_after_a_restart() {
    let session = i64::from(GroupConfig::default().consumer.session_timeout_ms);
    let mut d = Driver::new();
    d.heartbeat(join("a"), Ok(()));
    let mut restarted = Driver::new();
    for (k, v) in &d.log {
        restarted
            .coordinator
            .replay(k, v.as_deref())
            .expect("replays");
    }
    restarted.log = d.log.clone();
    // Sessions start at the first `now` after the load.
    restarted.advance(1_000);
    assert_eq!(restarted.describe("g").members.len(), 1);
    restarted.advance(1_000 + session + 1);
    assert!(restarted.describe("g").members.is_empty());
    restarted.check_replay();
}

/// A group's own session timeout and heartbeat interval (its group configuration, KIP-848),
/// handed in before a heartbeat: the answer carries the group's interval, a silent member is
/// fenced after the group's session, and handing the defaults back in restores them.
#[test]
fn a_groups_own_timeouts_are_honoured() {
    let defaults = GroupConfig::default().consumer;
    let (session, interval) = (defaults.session_timeout_ms + 5_000, 7_000);
    let mut d = Driver::new();
    d.coordinator
        .handle_consumer_group_timeouts("g", session, interval);
    let a = d.heartbeat(join("a"), Ok(()));
    assert_eq!(
        a.heartbeat_interval_ms, interval,
        "set before the group exists"
    );
    // Past the default session, within the group's: a is still a member.
    d.advance(i64::from(defaults.session_timeout_ms) + 1);
    assert_eq!(
        d.describe("g").members.len(),
        1,
        "fenced by the default session"
    );
    d.advance(i64::from(session) + 1);
    assert_eq!(
        d.describe("g").members.len(),
        0,
        "not fenced by the group's session"
    );
    // Back to the defaults: the next answer carries the default interval.
    d.coordinator.handle_consumer_group_timeouts(
        "g",
        defaults.session_timeout_ms,
        defaults.heartbeat_interval_ms,
    );
    let b = d.heartbeat(join("b"), Ok(()));
    assert_eq!(b.heartbeat_interval_ms, defaults.heartbeat_interval_ms);
}
