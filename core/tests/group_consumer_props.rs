//! Property tests of `core::group::consumer` (the KIP-848 consumer group).
//!
//! Simulated clients join, heartbeat (acknowledging what they own or not), leave, leave
//! statically and come back, while time jumps (sessions and rebalance timeouts expire) and
//! topics are created and grow. After every step:
//! - I22: no partition is held (assigned or pending revocation) by two members' current
//!   assignments.
//!
//! After a run, every client heartbeats with what it owns for enough rounds; then:
//! - every member is stable at the assignment epoch and owns exactly its target;
//! - every partition of the subscribed topics is owned, and (uniform) sizes differ by ≤ 1;
//! - replaying the run's records — encoded to bytes and decoded again — into a fresh group
//!   gives the same durable state and the same describe output.

use std::collections::{BTreeMap, BTreeSet};

use minikafka_core::group::assignor::Assignor;
use minikafka_core::group::consumer::{
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupHeartbeatRequest, ErrorCode, TopicInfo,
    TopicMetadata,
};
use minikafka_core::group::consumer_records::{ConsumerGroupRecord, MemberState, TopicPartitions};
use proptest::prelude::*;

const GROUP: &str = "g";
const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 8_000;
const CLIENTS: usize = 4;
const STATIC_CLIENT: usize = 3;

const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
const UNRELEASED_INSTANCE_ID: ErrorCode = ErrorCode(111);

#[derive(Debug, Clone)]
enum Op {
    Heartbeat { client: usize, acknowledge: bool },
    Leave { client: usize },
    StaticLeave,
    Tick { ms: i64 },
    CreateThirdTopic,
    GrowSecondTopic,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..CLIENTS, any::<bool>())
            .prop_map(|(client, acknowledge)| Op::Heartbeat { client, acknowledge }),
        1 => (0..CLIENTS).prop_map(|client| Op::Leave { client }),
        1 => Just(Op::StaticLeave),
        2 => (0i64..12_000).prop_map(|ms| Op::Tick { ms }),
        1 => Just(Op::CreateThirdTopic),
        1 => Just(Op::GrowSecondTopic),
    ]
}

#[derive(Debug, Default, Clone)]
struct Client {
    joined: Option<(String, i32)>,
    owned: Vec<TopicPartitions>,
    incarnation: u32,
}

struct Sim {
    group: ConsumerGroup,
    topics: TopicMetadata,
    clients: Vec<Client>,
    records: Vec<ConsumerGroupRecord>,
    now: i64,
}

fn tid(n: u8) -> [u8; 16] {
    [n; 16]
}

impl Sim {
    fn new(assignors: Vec<Assignor>) -> Self {
        let config = ConsumerGroupConfig {
            session_timeout_ms: SESSION_MS,
            assignors,
            ..ConsumerGroupConfig::default()
        };
        let mut topics = TopicMetadata::default();
        for (name, id, count) in [("t0", 1, 3), ("t1", 2, 4)] {
            topics.topics.insert(
                name.to_string(),
                TopicInfo {
                    topic_id: tid(id),
                    partition_count: count,
                },
            );
        }
        Sim {
            group: ConsumerGroup::with_config(GROUP, config),
            topics,
            clients: vec![Client::default(); CLIENTS],
            records: Vec::new(),
            now: 1_000,
        }
    }

    fn request(&self, i: usize, acknowledge: bool) -> ConsumerGroupHeartbeatRequest {
        let c = &self.clients[i];
        let mut req = ConsumerGroupHeartbeatRequest {
            version: 1,
            group_id: GROUP.to_string(),
            client_id: format!("client-{i}"),
            client_host: "/127.0.0.1".to_string(),
            rebalance_timeout_ms: -1,
            instance_id: (i == STATIC_CLIENT).then(|| "static-3".to_string()),
            ..Default::default()
        };
        match &c.joined {
            None => {
                req.member_epoch = 0;
                // Client 0 speaks v0 and lets the broker pick its member id.
                if i == 0 {
                    req.version = 0;
                } else {
                    req.member_id = format!("c{i}-{}", c.incarnation);
                }
                req.rebalance_timeout_ms = REBALANCE_MS;
                if i == 1 {
                    // The same topics as the others, by regex.
                    req.subscribed_topic_regex = Some("t[0-9]+".to_string());
                } else {
                    req.subscribed_topic_names =
                        Some(vec!["t0".to_string(), "t1".to_string(), "t2".to_string()]);
                    // librdkafka 2.1x sends an empty regex beside names.
                    req.subscribed_topic_regex = Some(String::new());
                }
                req.topic_partitions = Some(Vec::new());
            }
            Some((id, epoch)) => {
                req.member_id = id.clone();
                req.member_epoch = *epoch;
                if acknowledge {
                    req.topic_partitions = Some(c.owned.clone());
                }
            }
        }
        req
    }

    fn heartbeat(&mut self, i: usize, acknowledge: bool) -> Result<(), TestCaseError> {
        let req = self.request(i, acknowledge);
        match self.group.heartbeat(&req, self.now, &self.topics) {
            Ok((records, resp)) => {
                self.records.extend(records);
                let c = &mut self.clients[i];
                c.joined = Some((resp.member_id, resp.member_epoch));
                if let Some(a) = resp.assignment {
                    c.owned = a;
                }
            }
            Err(e) if e == UNKNOWN_MEMBER_ID || e == FENCED_MEMBER_EPOCH => self.reset(i),
            // The static member's old incarnation still holds the instance id; retry later.
            Err(e) if e == UNRELEASED_INSTANCE_ID && i == STATIC_CLIENT => {}
            Err(e) => return Err(TestCaseError::fail(format!("client {i}: error {e:?}"))),
        }
        Ok(())
    }

    fn reset(&mut self, i: usize) {
        let c = &mut self.clients[i];
        c.joined = None;
        c.owned.clear();
        c.incarnation += 1;
    }

    fn leave(&mut self, i: usize, epoch: i32) -> Result<(), TestCaseError> {
        let Some((id, _)) = self.clients[i].joined.clone() else {
            return Ok(());
        };
        let mut req = self.request(i, false);
        req.member_id = id;
        req.member_epoch = epoch;
        match self.group.heartbeat(&req, self.now, &self.topics) {
            Ok((records, resp)) => {
                prop_assert_eq!(resp.member_epoch, epoch);
                prop_assert!(resp.assignment.is_none());
                self.records.extend(records);
            }
            Err(e) if e == UNKNOWN_MEMBER_ID => {}
            Err(e) => return Err(TestCaseError::fail(format!("leave {i}: error {e:?}"))),
        }
        self.reset(i);
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Heartbeat {
                client,
                acknowledge,
            } => self.heartbeat(*client, *acknowledge)?,
            Op::Leave { client } => self.leave(*client, -1)?,
            Op::StaticLeave => self.leave(STATIC_CLIENT, -2)?,
            Op::Tick { ms } => self.now += ms,
            Op::CreateThirdTopic => {
                self.topics
                    .topics
                    .entry("t2".to_string())
                    .or_insert(TopicInfo {
                        topic_id: tid(3),
                        partition_count: 2,
                    });
            }
            Op::GrowSecondTopic => {
                if let Some(t) = self.topics.topics.get_mut("t1") {
                    t.partition_count = (t.partition_count + 1).min(8);
                }
            }
        }
        let expired = self.group.handle_timeout(self.now);
        self.records.extend(expired);
        check_single_owner(&self.group)
    }

    fn settle(&mut self) -> Result<(), TestCaseError> {
        // Long enough for an old static incarnation's session to expire, then for two
        // reconciliation rounds per member.
        for _ in 0..(SESSION_MS / 1_000 + 2 * CLIENTS as i32 + 6) {
            self.now += 1_000;
            let expired = self.group.handle_timeout(self.now);
            self.records.extend(expired);
            for i in 0..CLIENTS {
                self.heartbeat(i, true)?;
                check_single_owner(&self.group)?;
            }
        }
        Ok(())
    }
}

/// I22: the members' current assignments (assigned and pending revocation) are disjoint.
fn check_single_owner(group: &ConsumerGroup) -> Result<(), TestCaseError> {
    let mut owner: BTreeMap<([u8; 16], i32), String> = BTreeMap::new();
    for (member, cur) in &group.durable_state().current {
        for (t, ps) in cur.assigned.iter().chain(cur.pending_revocation.iter()) {
            for p in ps {
                if let Some(other) = owner.insert((*t, *p), member.clone()) {
                    return Err(TestCaseError::fail(format!(
                        "partition {t:?}/{p} owned by {other} and {member}"
                    )));
                }
            }
        }
    }
    Ok(())
}

fn check_converged(sim: &Sim, balanced: bool) -> Result<(), TestCaseError> {
    let d = sim.group.durable_state();
    prop_assert_eq!(d.members.len(), CLIENTS, "every client is a member");
    prop_assert_eq!(d.group_epoch, d.assignment_epoch);
    let mut all = BTreeSet::new();
    let mut sizes = Vec::new();
    for (id, cur) in &d.current {
        prop_assert_eq!(cur.state, MemberState::Stable, "member {}", id);
        prop_assert_eq!(cur.member_epoch, d.assignment_epoch, "member {}", id);
        prop_assert!(cur.pending_revocation.is_empty());
        let target = d.target.get(id).cloned().unwrap_or_default();
        prop_assert_eq!(&cur.assigned, &target, "member {} owns its target", id);
        let mut n = 0;
        for (t, ps) in &cur.assigned {
            for p in ps {
                all.insert((*t, *p));
                n += 1;
            }
        }
        sizes.push(n);
    }
    let expected: BTreeSet<([u8; 16], i32)> = sim
        .topics
        .topics
        .values()
        .flat_map(|t| (0..t.partition_count).map(move |p| (t.topic_id, p)))
        .collect();
    prop_assert_eq!(all, expected, "every partition is owned");
    if balanced {
        let (min, max) = (sizes.iter().min(), sizes.iter().max());
        if let (Some(min), Some(max)) = (min, max) {
            prop_assert!(max - min <= 1, "unbalanced: {:?}", sizes);
        }
    }
    // The clients see what the group says they own.
    for c in &sim.clients {
        let (id, epoch) = c.joined.clone().expect("joined after settling");
        prop_assert_eq!(epoch, d.assignment_epoch);
        let owned: BTreeSet<([u8; 16], i32)> = c
            .owned
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic_id, *p)))
            .collect();
        let assigned: BTreeSet<([u8; 16], i32)> = d.current[&id]
            .assigned
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect();
        prop_assert_eq!(owned, assigned);
    }
    Ok(())
}

fn config(assignors: Vec<Assignor>) -> ConsumerGroupConfig {
    ConsumerGroupConfig {
        session_timeout_ms: SESSION_MS,
        assignors,
        ..ConsumerGroupConfig::default()
    }
}

fn check_replay(sim: &Sim, assignors: Vec<Assignor>) -> Result<(), TestCaseError> {
    let mut fresh = ConsumerGroup::with_config(GROUP, config(assignors.clone()));
    for r in &sim.records {
        let key = r.encode_key();
        let value = r.encode_value();
        let decoded = ConsumerGroupRecord::decode(&key, value.as_deref())
            .map_err(|e| TestCaseError::fail(format!("decode {r:?}: {e}")))?;
        prop_assert_eq!(&decoded, r);
        fresh
            .replay(&decoded)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    prop_assert_eq!(fresh.durable_state(), sim.group.durable_state());
    prop_assert_eq!(fresh.describe(), sim.group.describe());
    prop_assert_eq!(fresh.durable_records(), sim.group.durable_records());
    // The log path: the same records, as bytes, confirmed into the live group change
    // nothing (they were applied when emitted), and loaded into a new group rebuild it.
    let mut live = sim.group.clone();
    let mut loaded = ConsumerGroup::with_config(GROUP, config(assignors.clone()));
    for r in &sim.records {
        let stored = r.to_group_record();
        live.replay_stored(&stored)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        loaded
            .replay_stored(&stored)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    prop_assert_eq!(live.durable_state(), sim.group.durable_state());
    prop_assert_eq!(loaded.durable_state(), sim.group.durable_state());
    // A failed append afterwards has nothing unconfirmed to revert.
    live.handle_append_failed();
    prop_assert_eq!(live.durable_state(), sim.group.durable_state());
    Ok(())
}

fn run(ops: &[Op], assignors: Vec<Assignor>, balanced: bool) -> Result<(), TestCaseError> {
    let mut sim = Sim::new(assignors.clone());
    for op in ops {
        sim.step(op)?;
    }
    check_replay(&sim, assignors.clone())?;
    sim.settle()?;
    check_converged(&sim, balanced)?;
    check_replay(&sim, assignors)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn uniform_single_owner_converges_balanced_and_replays(ops in proptest::collection::vec(op(), 0..80)) {
        run(&ops, vec![Assignor::Uniform, Assignor::Range], true)?;
    }

    #[test]
    fn range_single_owner_converges_and_replays(ops in proptest::collection::vec(op(), 0..80)) {
        run(&ops, vec![Assignor::Range], false)?;
    }
}
