//! Consumer positions: committed group offsets on the source, translated through the offset map
//! and committed on the target for groups with no member there (I85). Each group is read and
//! committed at its coordinator on the target, as FindCoordinator names it (I162): on a cluster
//! only that broker knows the group's state and offsets.

use std::collections::BTreeMap;
use std::future::Future;

use super::Stream as TcpStream;
use kafka_protocol::ResponseError;
use regex::Regex;

use super::offset_map::OffsetMap;
use crate::connection::Connection;
use crate::consumer::TopicPartition;
use crate::error::Result;
use crate::group::admin::{self as group_admin, Committer};
use crate::Offset;

/// Group states in which the target has no member, so an admin commit is allowed.
const INACTIVE_STATES: [&str; 3] = ["Empty", "Dead", ""];

/// What happened to one group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSync {
    /// Group id.
    pub group: String,
    /// Partitions committed on the target: (source offset, target offset).
    pub committed: BTreeMap<TopicPartition, (i64, i64)>,
    /// Partitions whose committed source offset the map does not reach.
    pub untranslated: Vec<TopicPartition>,
    /// Why the group was left alone (active on the target, or an error).
    pub skipped: Option<String>,
}

/// Syncs every source group matching `groups` whose commits touch a mirrored partition.
/// `target` answers FindCoordinator; `connect` opens a connection to a coordinator's
/// `host:port` (one per coordinator and call).
pub async fn sync_groups<F, Fut>(
    source: &mut Connection<TcpStream>,
    target: &mut Connection<TcpStream>,
    connect: F,
    groups: &Regex,
    map: &OffsetMap,
) -> Result<Vec<GroupSync>>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<Connection<TcpStream>>>,
{
    let mut out = Vec::new();
    let mut coordinators: BTreeMap<String, Connection<TcpStream>> = BTreeMap::new();
    for listed in group_admin::list_groups(source).await? {
        if !groups.is_match(&listed.group_id) {
            continue;
        }
        let committed = group_admin::fetch_offsets(source, &listed.group_id, None).await?;
        let mut sync = GroupSync {
            group: listed.group_id.clone(),
            ..GroupSync::default()
        };
        let mut translated = BTreeMap::new();
        for (tp, offset) in committed {
            let Some(partition_map) = map.get(&tp) else {
                continue;
            };
            match partition_map.translate(offset.0) {
                Some(target_offset) => {
                    translated.insert(tp, (offset.0, target_offset));
                }
                None => sync.untranslated.push(tp),
            }
        }
        if translated.is_empty() && sync.untranslated.is_empty() {
            continue;
        }
        let addr = match group_admin::find_coordinator_of(target, &listed.group_id, 0).await {
            Ok(c) => format!("{}:{}", c.host, c.port),
            Err(err) if err.kafka_code().is_some() => {
                sync.skipped = Some(err.to_string());
                out.push(sync);
                continue;
            }
            Err(err) => return Err(err),
        };
        if !coordinators.contains_key(&addr) {
            let conn = connect(addr.clone()).await?;
            coordinators.insert(addr.clone(), conn);
        }
        let Some(coordinator) = coordinators.get_mut(&addr) else {
            continue;
        };
        match commit_on_target(coordinator, &listed.group_id, translated).await {
            Ok(Ok(committed)) => sync.committed = committed,
            Ok(Err(state)) => sync.skipped = Some(format!("active on the target ({state})")),
            Err(err) => sync.skipped = Some(err.to_string()),
        }
        out.push(sync);
    }
    Ok(out)
}

/// Commits the translated offsets that move the target group forward (a group that already
/// consumed further on the target is never rewound). `Ok(Err(state))`: the group is active.
async fn commit_on_target(
    target: &mut Connection<TcpStream>,
    group: &str,
    translated: BTreeMap<TopicPartition, (i64, i64)>,
) -> Result<std::result::Result<BTreeMap<TopicPartition, (i64, i64)>, String>> {
    // ListGroups names every group with its state, classic and consumer-protocol (KIP-848)
    // alike; DescribeGroups answers GROUP_ID_NOT_FOUND for the latter on Kafka 4.
    let state = group_admin::list_groups(target)
        .await?
        .into_iter()
        .find(|g| g.group_id == group)
        .map_or_else(|| "Dead".to_string(), |g| g.state);
    if !INACTIVE_STATES.contains(&state.as_str()) {
        return Ok(Err(state));
    }
    let partitions: Vec<TopicPartition> = translated.keys().cloned().collect();
    let existing = match group_admin::fetch_offsets(target, group, Some(&partitions)).await {
        Ok(existing) => existing,
        Err(err) if err.kafka_code() == Some(ResponseError::GroupIdNotFound.code()) => {
            BTreeMap::new()
        }
        Err(err) => return Err(err),
    };
    let forward: BTreeMap<TopicPartition, (i64, i64)> = translated
        .into_iter()
        .filter(|(tp, (_, t))| existing.get(tp).is_none_or(|e| e.0 < *t))
        .collect();
    if forward.is_empty() {
        return Ok(Ok(forward));
    }
    let offsets: BTreeMap<TopicPartition, Offset> = forward
        .iter()
        .map(|(tp, (_, t))| (tp.clone(), Offset(*t)))
        .collect();
    group_admin::commit_offsets_checked(target, group, &Committer::admin(), &offsets).await?;
    Ok(Ok(forward))
}
