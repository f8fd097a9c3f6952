//! Property tests of `core::group::Coordinator`: random runs of up to four clients following
//! the classic protocol (joins, syncs, heartbeats, leaves, commits — some with stale
//! generations or fenced ids), simple commits, fetches, deletions, time jumps, held and
//! failed appends. Against a simple model:
//! - committed offsets: the model applies a commit only when its answer says NONE, and every
//!   fetch must equal the model; an acknowledged commit's record is already in the log (I20);
//! - fencing (I22): a commit is accepted only from a member of the current generation
//!   outside CompletingRebalance, or as a simple commit to a group with no members; in each
//!   generation every delivered assignment is the one that generation's leader sent, and only
//!   after it is durable (the SyncGroup barrier);
//! - replay (I21): a fresh coordinator fed the log has the same durable state;
//! - every request is answered exactly once (the driver panics on a second answer).
//!
//! One client is static (`group.instance.id`) and may restart (forget its member id); its old
//! id keeps committing as a zombie and must be fenced once the new one joined. `Step` ops make
//! clients follow the protocol, so runs reach Stable and hand out assignments often.

mod group_common;

use std::collections::{BTreeMap, HashMap};

use group_common::*;
use minikafka_core::group::records::{GroupMetadataValue, RecordKey};
use minikafka_core::group::state::State;
use minikafka_core::group::*;
use proptest::prelude::*;

const CLIENTS: usize = 4;
const PARTITIONS: i32 = 4;

#[derive(Clone, Debug)]
enum Op {
    Join(usize, bool),
    Sync(usize),
    Heartbeat(usize),
    Leave(usize),
    Commit {
        client: usize,
        partition: i32,
        offset: i64,
        stale: bool,
    },
    SimpleCommit {
        partition: i32,
        offset: i64,
    },
    Fetch,
    Advance(i64),
    FailNextAppend,
    Hold,
    Release,
    Delete,
    /// The static client restarts: it forgets its member id (and rejoins with its instance id).
    Restart,
    /// A well-behaved client takes its next protocol step.
    Step(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0..CLIENTS;
    prop_oneof![
        4 => (c.clone(), any::<bool>()).prop_map(|(c, alt)| Op::Join(c, alt)),
        4 => c.clone().prop_map(Op::Sync),
        3 => c.clone().prop_map(Op::Heartbeat),
        1 => c.clone().prop_map(Op::Leave),
        4 => (c, 0..PARTITIONS, 0i64..1000, any::<bool>())
            .prop_map(|(client, partition, offset, stale)| Op::Commit { client, partition, offset, stale }),
        1 => (0..PARTITIONS, 0i64..1000).prop_map(|(partition, offset)| Op::SimpleCommit { partition, offset }),
        2 => Just(Op::Fetch),
        3 => prop_oneof![Just(100i64), Just(2_000), Just(7_000), Just(12_000), Just(31_000)].prop_map(Op::Advance),
        1 => Just(Op::FailNextAppend),
        1 => Just(Op::Hold),
        2 => Just(Op::Release),
        1 => Just(Op::Delete),
        1 => Just(Op::Restart),
        12 => (0..CLIENTS).prop_map(Op::Step),
    ]
}

#[derive(Default, Debug)]
struct Client {
    /// `group.instance.id` of the static client (the last one), `None` for dynamic clients.
    instance: Option<String>,
    member_id: Option<String>,
    /// The member id before a restart (a zombie: its commits must be refused).
    last_id: Option<String>,
    /// The generation whose assignment this client holds.
    synced: Option<i32>,
    /// Told to rejoin (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION).
    rejoin: bool,
    generation: i32,
    members_if_leader: Vec<String>,
    pending_join: Option<RequestToken>,
    pending_sync: Option<(RequestToken, i32)>,
}

#[derive(Default)]
struct Model {
    offsets: BTreeMap<i32, i64>,
    /// Commits sent: token → (partition, offset).
    commits: HashMap<RequestToken, (i32, i64)>,
    deletes: Vec<RequestToken>,
    /// Per generation, the assignments leaders sent. A group that empties and is dropped
    /// starts again at generation 0 (as in Kafka), so one number can name several
    /// incarnations; member ids are never reused, so a member's generation is the one whose
    /// leader assigned to it.
    leader_assignment: HashMap<i32, Vec<BTreeMap<String, Vec<u8>>>>,
    /// Per (generation, leader assignment), which members got which assignment.
    delivered: HashMap<(i32, usize), BTreeMap<String, Vec<u8>>>,
    /// A static member's new id → the id it replaced without a rebalance (same assignment).
    aliases: HashMap<String, String>,
}

fn protocols(alt: bool) -> Vec<(&'static str, &'static [u8])> {
    if alt {
        vec![("cooperative-sticky", b"owned"), ("range", b"r")]
    } else {
        vec![("range", b"r"), ("cooperative-sticky", b"")]
    }
}

/// May this commit be accepted, judged from the coordinator's state before it?
fn commit_allowed(d: &Driver, member: &str, generation: i32) -> bool {
    match d.c.group(GROUP) {
        None => member.is_empty() && generation < 0,
        Some(Group::Classic(g)) => {
            if member.is_empty() && generation < 0 {
                g.member_ids().is_empty() && g.state() != State::Dead
            } else {
                g.member_ids().iter().any(|m| m == member)
                    && g.generation() == generation
                    && matches!(g.state(), State::Stable | State::PreparingRebalance)
            }
        }
        Some(Group::Consumer(_)) => false,
    }
}

/// Which of a generation's leader assignments holds this member, and under which id: its
/// own, else the static member it replaced (then the one that one replaced, and so on). The
/// nearest id wins: a static member that rejoins a deleted and recreated group keeps its
/// alias, but the new incarnation's leader assigned to its new id, while the old
/// incarnation (same generation number) assigned to the old one.
fn assigned_as(
    sent: &[BTreeMap<String, Vec<u8>>],
    member: &str,
    aliases: &HashMap<String, String>,
) -> Option<(usize, String)> {
    let mut id = member.to_string();
    // Bounded: each replacement adds one alias, ids are never reused.
    for _ in 0..1_000 {
        if let Some(index) = sent.iter().position(|a| a.contains_key(&id)) {
            return Some((index, id));
        }
        id = aliases.get(&id)?.clone();
    }
    None
}

fn durable_generations(d: &Driver) -> Vec<i32> {
    d.log
        .iter()
        .filter(|r| {
            matches!(
                RecordKey::decode(&r.key),
                Ok(RecordKey::GroupMetadata { .. })
            )
        })
        .filter_map(|r| r.value.as_ref())
        .filter_map(|v| GroupMetadataValue::decode(v).ok())
        .map(|v| v.generation)
        .collect()
}

fn collect(d: &mut Driver, clients: &mut [Client], m: &mut Model) {
    for c in clients.iter_mut() {
        if let Some(t) = c.pending_join {
            if let Some(r) = d.join_answer(t) {
                c.pending_join = None;
                if r.error_code == ErrorCode::NONE {
                    if c.member_id.is_none() {
                        // A static join without member id: the answer carries the new id.
                        if let Some(old) = &c.last_id {
                            m.aliases.insert(r.member_id.clone(), old.clone());
                        }
                        c.member_id = Some(r.member_id.clone());
                    }
                    c.generation = r.generation_id;
                    c.members_if_leader = r.members.iter().map(|m| m.member_id.clone()).collect();
                } else if r.error_code == ErrorCode::UNKNOWN_MEMBER_ID
                    || r.error_code == ErrorCode::FENCED_INSTANCE_ID
                {
                    c.member_id = None;
                }
            }
        }
        if let Some((t, generation)) = c.pending_sync {
            if let Some(r) = d.sync_answer(t) {
                c.pending_sync = None;
                if r.error_code == ErrorCode::REBALANCE_IN_PROGRESS
                    || r.error_code == ErrorCode::ILLEGAL_GENERATION
                {
                    c.rejoin = true;
                }
                if r.error_code == ErrorCode::NONE {
                    c.synced = Some(generation);
                    let me = c.member_id.clone().unwrap_or_default();
                    // I22 / barrier: the leader's assignment for this generation, already durable.
                    assert!(
                        durable_generations(d).contains(&generation),
                        "assignment released before durable"
                    );
                    let sent = m
                        .leader_assignment
                        .get(&generation)
                        .expect("a leader synced this generation");
                    let (index, me) = assigned_as(sent, &me, &m.aliases).expect(
                        "the member (or the static member it replaced) was assigned by its leader",
                    );
                    let sent = &sent[index];
                    assert_eq!(&r.assignment, &sent[&me], "not the leader's assignment");
                    let prev = m
                        .delivered
                        .entry((generation, index))
                        .or_default()
                        .insert(me, r.assignment.clone());
                    assert!(
                        prev.is_none() || prev == Some(r.assignment),
                        "two assignments in one generation"
                    );
                } else if r.error_code == ErrorCode::UNKNOWN_MEMBER_ID {
                    c.member_id = None;
                }
            }
        }
    }
    // Commits and deletions take effect in log order, which is their send (token) order.
    let mut tokens: Vec<RequestToken> = m.commits.keys().chain(m.deletes.iter()).copied().collect();
    tokens.sort();
    for t in tokens {
        let Some(resp) = d.take(t) else { continue };
        match resp {
            GroupResponse::OffsetCommit(_) => {
                let (partition, offset) = m.commits.remove(&t).expect("expected in this test");
                if commit_code(resp) == ErrorCode::NONE {
                    // I20: the acknowledged commit is in the log.
                    let key =
                        minikafka_core::group::records::offset_commit_key(GROUP, "t", partition);
                    assert!(
                        d.log.iter().any(|r| r.key == key && r.value.is_some()),
                        "acked before durable"
                    );
                    m.offsets.insert(partition, offset);
                }
            }
            GroupResponse::DeleteGroups(r) => {
                m.deletes.retain(|x| *x != t);
                if r.results[0].1 == ErrorCode::NONE {
                    m.offsets.clear();
                }
            }
            other => panic!("unexpected answer: {other:?}"),
        }
    }
}

fn check_fetch(d: &mut Driver, m: &Model) {
    for p in 0..PARTITIONS {
        let want = m.offsets.get(&p).copied().unwrap_or(-1);
        assert_eq!(d.fetch(GROUP, "t", p), want, "partition {p}");
    }
}

/// Applies one operation. `Step` is a well-behaved client: it does what the protocol asks
/// next (join, sync, heartbeat, rejoin when told), so runs reach Stable often.
fn apply(d: &mut Driver, clients: &mut [Client], m: &mut Model, op: Op) {
    match op {
        Op::Step(i) => {
            let c = &clients[i];
            if c.pending_join.is_some() || c.pending_sync.is_some() {
                return apply(d, clients, m, Op::Heartbeat(i));
            }
            if c.member_id.is_none() || c.rejoin {
                clients[i].rejoin = false;
                return apply(d, clients, m, Op::Join(i, false));
            }
            if c.synced != Some(c.generation) {
                return apply(d, clients, m, Op::Sync(i));
            }
            let (id, generation) = (c.member_id.clone().unwrap_or_default(), c.generation);
            match d.heartbeat(&id, generation) {
                ErrorCode::REBALANCE_IN_PROGRESS | ErrorCode::ILLEGAL_GENERATION => {
                    clients[i].rejoin = true
                }
                ErrorCode::UNKNOWN_MEMBER_ID | ErrorCode::FENCED_INSTANCE_ID => {
                    clients[i].member_id = None
                }
                _ => {}
            }
        }
        Op::Join(i, alt) => {
            if clients[i].pending_join.is_some() {
                return;
            }
            if let Some(inst) = clients[i].instance.clone() {
                let id = clients[i].member_id.clone().unwrap_or_default();
                clients[i].pending_join = Some(d.join(&id, Some(&inst), &protocols(alt)));
                return;
            }
            let id = match clients[i].member_id.clone() {
                Some(id) => id,
                None => {
                    let t = d.join("", None, &protocols(alt));
                    match d.join_answer(t) {
                        Some(r) if r.error_code == ErrorCode::MEMBER_ID_REQUIRED => r.member_id,
                        _ => return,
                    }
                }
            };
            clients[i].member_id = Some(id.clone());
            clients[i].pending_join = Some(d.join(&id, None, &protocols(alt)));
        }
        Op::Sync(i) => {
            let c = &clients[i];
            let (Some(id), None, None) = (c.member_id.clone(), c.pending_join, c.pending_sync)
            else {
                return;
            };
            let generation = c.generation;
            // The leader assigns the partitions round-robin: disjoint by construction.
            let assignment: Vec<(String, Vec<u8>)> = c
                .members_if_leader
                .iter()
                .enumerate()
                .map(|(k, mid)| {
                    let parts: Vec<u8> = (0..PARTITIONS as u8)
                        .filter(|p| *p as usize % c.members_if_leader.len() == k)
                        .collect();
                    (mid.clone(), parts)
                })
                .collect();
            if !assignment.is_empty() {
                let map: BTreeMap<String, Vec<u8>> = assignment.iter().cloned().collect();
                let known = m.leader_assignment.entry(generation).or_default();
                // A repeated leader sync of one generation sends the same assignment.
                if !known.iter().any(|k| k.keys().eq(map.keys())) {
                    known.push(map);
                }
            }
            let refs: Vec<(&str, &[u8])> = assignment
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_slice()))
                .collect();
            let t = d.sync(&id, generation, &refs);
            clients[i].pending_sync = Some((t, generation));
        }
        Op::Heartbeat(i) => {
            if let Some(id) = clients[i].member_id.clone() {
                let code = d.heartbeat(&id, clients[i].generation);
                if code == ErrorCode::UNKNOWN_MEMBER_ID {
                    clients[i].member_id = None;
                }
            }
        }
        Op::Leave(i) => {
            if let Some(id) = clients[i].member_id.take() {
                d.leave(&[(&id, None)]);
            }
        }
        Op::Commit {
            client,
            partition,
            offset,
            stale,
        } => {
            let Some(id) = clients[client]
                .member_id
                .clone()
                .or(clients[client].last_id.clone())
            else {
                return;
            };
            let generation = clients[client].generation - i32::from(stale);
            let allowed = commit_allowed(d, &id, generation);
            let t = d.commit_async(&id, generation, "t", partition, offset);
            m.commits.insert(t, (partition, offset));
            if !allowed {
                // I22: refused, whatever happens to appends.
                let resp = d.take(t).expect("a refused commit is answered at once");
                m.commits.remove(&t);
                assert_ne!(commit_code(resp), ErrorCode::NONE, "fenced commit accepted");
            }
        }
        Op::SimpleCommit { partition, offset } => {
            let allowed = commit_allowed(d, "", -1);
            let t = d.commit_async("", -1, "t", partition, offset);
            m.commits.insert(t, (partition, offset));
            if !allowed {
                let resp = d.take(t).expect("answered at once");
                m.commits.remove(&t);
                assert_ne!(commit_code(resp), ErrorCode::NONE);
            }
        }
        Op::Fetch => {
            if d.held.is_empty() {
                collect(d, clients, m);
                check_fetch(d, m);
            }
        }
        Op::Advance(ms) => d.advance(ms),
        Op::FailNextAppend => d.fail_next += 1,
        Op::Hold => d.auto_durable = false,
        Op::Release => {
            d.auto_durable = true;
            d.release_held();
        }
        Op::Restart => {
            let c = &mut clients[CLIENTS - 1];
            if c.pending_join.is_none() && c.pending_sync.is_none() && c.member_id.is_some() {
                c.last_id = c.member_id.take();
            }
        }
        Op::Delete => {
            let t = d.send(GroupRequest::DeleteGroups(DeleteGroupsRequest {
                group_ids: vec![GROUP.into()],
            }));
            m.deletes.push(t);
        }
    }
}

fn run(ops: Vec<Op>) {
    let mut d = Driver::new(GroupConfig {
        initial_rebalance_delay_ms: 500,
        ..config()
    });
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::default()).collect();
    clients[CLIENTS - 1].instance = Some("static-instance".into());
    let mut m = Model::default();
    for op in ops {
        apply(&mut d, &mut clients, &mut m, op);
        collect(&mut d, &mut clients, &mut m);
        // I21 after every step, not only at the end.
        assert_eq!(d.restarted().durable_state(), d.c.durable_state());
    }
    // Drain: make everything durable, let every phase and session run out.
    d.auto_durable = true;
    d.fail_next = 0;
    d.release_held();
    for _ in 0..4 {
        d.advance(40_000);
    }
    collect(&mut d, &mut clients, &mut m);
    for c in &clients {
        assert!(
            c.pending_join.is_none() && c.pending_sync.is_none(),
            "unanswered: {c:?}"
        );
    }
    assert!(
        m.commits.is_empty() && m.deletes.is_empty(),
        "unanswered commit or delete"
    );
    check_fetch(&mut d, &m);
    // I21: the durable state is the replay of the log.
    assert_eq!(d.restarted().durable_state(), d.c.durable_state());
    // Every generation's deliveries are disjoint (the leader's round-robin).
    for (g, delivered) in &m.delivered {
        let mut seen = Vec::new();
        for a in delivered.values() {
            for p in a {
                assert!(
                    !seen.contains(p),
                    "partition {p} owned twice in generation {g:?}"
                );
                seen.push(*p);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn coordinator_matches_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops);
    }
}

/// A shrunk failure of the model (CI, 2026-12-01): the static member's group is deleted and
/// recreated, the new incarnation reaches generation 1 again, and the member's old id (its
/// alias) was in the old incarnation's generation-1 assignment. Its own id must win.
#[test]
fn static_member_rejoins_a_recreated_group() {
    use Op::*;
    run(vec![
        Step(1),
        FailNextAppend,
        Step(3),
        Advance(2000),
        Step(0),
        Step(1),
        Sync(3),
        Step(3),
        Join(0, false),
        Hold,
        Hold,
        Step(1),
        Advance(12000),
        Delete,
        Restart,
        Release,
        Join(3, false),
        Advance(2000),
        Step(3),
    ]);
}
