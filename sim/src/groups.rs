//! Simulated consumer-group members (classic protocol, raw requests, so every step is the
//! seed's): join, sync (the leader assigns the partitions round robin), heartbeat, commit,
//! leave. The checks: no partition owned by two members in one generation, and a committed
//! offset read back is never below the last one acknowledged (also after a crash).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_backend_sim::{random_below, SimBackend};
use minikafka_client::group::admin::{commit_offsets, fetch_offsets, Committer};
use minikafka_client::TopicPartition as ClientTp;
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::types::Offset;

use crate::broker_access::{connect, group_partitions, SimConnection};
use crate::model::{Model, TopicPartition};

/// The groups the members join.
pub const GROUPS: [&str; 2] = ["billing", "audit"];

/// The protocol type and name the simulated members use (the broker treats both as opaque).
const PROTOCOL: &str = "sim";

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// An assignment as bytes: `topic:partition` lines (the broker relays it untouched).
fn encode(partitions: &[TopicPartition]) -> Bytes {
    let lines: Vec<String> = partitions.iter().map(|(t, p)| format!("{t}:{p}")).collect();
    Bytes::from(lines.join("\n"))
}

fn decode(bytes: &[u8]) -> Vec<TopicPartition> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| {
            let (t, p) = l.rsplit_once(':')?;
            Some((t.to_string(), p.parse().ok()?))
        })
        .collect()
}

/// Joins and syncs once; the generation and the partitions this member got, or `None` when
/// the round failed (it is retried by the caller).
async fn join_and_sync(
    conn: &mut SimConnection,
    group: &str,
    member_id: &mut String,
) -> Option<(i32, Vec<TopicPartition>)> {
    let mut response = None;
    for _ in 0..3 {
        let request = JoinGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_session_timeout_ms(6_000)
            .with_rebalance_timeout_ms(2_000)
            .with_member_id(text(member_id))
            .with_protocol_type(text(PROTOCOL))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text(PROTOCOL))
                .with_metadata(Bytes::new())]);
        let r = conn.request(&request).await.ok()?;
        if r.error_code == ErrorCode::MEMBER_ID_REQUIRED.code() {
            *member_id = r.member_id.to_string();
            continue;
        }
        response = Some(r);
        break;
    }
    let join = response.filter(|r| r.error_code == 0)?;
    *member_id = join.member_id.to_string();
    let assignments = if join.leader.as_str() == member_id.as_str() {
        let members: Vec<String> = join
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect();
        let mut shares: BTreeMap<&str, Vec<TopicPartition>> = BTreeMap::new();
        for (i, tp) in group_partitions().into_iter().enumerate() {
            if let Some(m) = members.get(i % members.len().max(1)) {
                shares.entry(m.as_str()).or_default().push(tp);
            }
        }
        members
            .iter()
            .map(|m| {
                SyncGroupRequestAssignment::default()
                    .with_member_id(text(m))
                    .with_assignment(encode(shares.get(m.as_str()).map_or(&[][..], |v| v)))
            })
            .collect()
    } else {
        Vec::new()
    };
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(join.generation_id)
        .with_member_id(text(member_id))
        .with_protocol_type(Some(text(PROTOCOL)))
        .with_protocol_name(Some(text(PROTOCOL)))
        .with_assignments(assignments);
    let r = conn.request(&sync).await.ok()?;
    (r.error_code == 0).then(|| (join.generation_id, decode(&r.assignment)))
}

/// One member's life in an incarnation: a few generations of heartbeats and commits, then
/// (usually) a clean leave.
pub async fn run_member(backend: SimBackend, model: Rc<RefCell<Model>>, incarnation: u32) {
    let group = GROUPS[random_below(GROUPS.len() as u64) as usize];
    let Some(mut conn) = connect(&backend).await else {
        return;
    };
    let mut member_id = String::new();
    for _ in 0..3 {
        let Some((generation, owned)) = join_and_sync(&mut conn, group, &mut member_id).await
        else {
            backend.sleep(Duration::from_millis(100)).await;
            continue;
        };
        if let Err(e) = model
            .borrow_mut()
            .own(incarnation, group, generation, &member_id, &owned)
        {
            model.borrow_mut().failure.get_or_insert(e);
            return;
        }
        let committer = Committer {
            generation_or_epoch: generation,
            member_id: member_id.clone(),
            group_instance_id: None,
        };
        let mut rejoin = false;
        for _ in 0..random_below(6) + 1 {
            backend
                .sleep(Duration::from_millis(random_below(1_000) + 50))
                .await;
            let heartbeat = HeartbeatRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id(generation)
                .with_member_id(text(&member_id));
            match conn.request(&heartbeat).await {
                Ok(r) if r.error_code == 0 => {}
                Ok(_) => {
                    rejoin = true;
                    break;
                }
                Err(_) => return,
            }
            if !owned.is_empty() && random_below(2) == 0 {
                commit_some(&mut conn, &model, group, &committer, &owned).await;
            }
        }
        if !rejoin {
            break;
        }
    }
    if random_below(4) != 0 {
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_member_id(text(&member_id))
            .with_members(vec![
                kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                    .with_member_id(text(&member_id)),
            ]);
        let _ = conn.request(&leave).await;
    }
}

/// Commits, for some owned partitions, an offset at or above the last one acknowledged;
/// checks what a fetch of the committed offsets then says.
async fn commit_some(
    conn: &mut SimConnection,
    model: &RefCell<Model>,
    group: &str,
    committer: &Committer,
    owned: &[TopicPartition],
) {
    let mut offsets = BTreeMap::new();
    for tp in owned {
        if random_below(2) == 0 {
            continue;
        }
        let floor = model.borrow().committed_floor(group, tp);
        let offset = floor + random_below(5) as i64;
        model.borrow_mut().commit_attempted(group, tp, offset);
        offsets.insert(ClientTp::new(tp.0.clone(), tp.1), Offset(offset));
    }
    if offsets.is_empty() {
        return;
    }
    let Ok(codes) = commit_offsets(conn, group, committer, &offsets).await else {
        return;
    };
    let mut m = model.borrow_mut();
    for (ctp, code) in codes {
        if code == 0 {
            if let Some(offset) = offsets.get(&ctp) {
                m.commit_acked(group, &(ctp.topic.clone(), ctp.partition), offset.0);
            }
        }
    }
}

/// After a restart: every group's committed offsets must be at or above the last ones
/// acknowledged, and be offsets some member tried to commit. `Err` on a contradiction;
/// unreadable (a fault) is skipped unless `must_read`.
pub async fn verify_commits(
    backend: &SimBackend,
    model: &RefCell<Model>,
    must_read: bool,
) -> Result<(), String> {
    for group in GROUPS {
        if !model.borrow().has_commits(group) {
            continue;
        }
        let mut fetched = None;
        for _ in 0..3 {
            if let Some(mut conn) = connect(backend).await {
                if let Ok(f) = fetch_offsets(&mut conn, group, None).await {
                    fetched = Some(f);
                    break;
                }
            }
        }
        let Some(fetched) = fetched else {
            if must_read {
                return Err(format!("group {group}: committed offsets unreadable"));
            }
            continue;
        };
        let fetched: BTreeMap<TopicPartition, i64> = fetched
            .into_iter()
            .map(|(tp, o)| ((tp.topic, tp.partition), o.0))
            .collect();
        model.borrow().check_commits(group, &fetched)?;
    }
    Ok(())
}
