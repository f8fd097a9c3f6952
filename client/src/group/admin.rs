//! Group admin calls over one connection: FindCoordinator, ListGroups, DescribeGroups,
//! DeleteGroups, OffsetFetch, OffsetCommit. Shared by the group consumer and `mk groups`.
//!
//! Contract:
//! - Inputs: a negotiated [`Connection`] to the group's coordinator (minikafka is one node, so
//!   the bootstrap connection; [`find_coordinator`] checks that).
//! - Outputs: plain structs; a Kafka error code for the whole request or a group becomes
//!   [`Error::Kafka`] naming the group; per-partition codes of OffsetCommit/OffsetFetch are
//!   returned (a commit may succeed for some partitions and not others).
//! - Never: retries.

use std::collections::BTreeMap;

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    OffsetCommitRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use minikafka_core::types::Offset;

use super::member_metadata;
use crate::connection::Connection;
use crate::consumer::TopicPartition;
use crate::error::{Error, Result};

fn group_id(name: &str) -> GroupId {
    GroupId(StrBytes::from_string(name.to_string()))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// The coordinator of a group, as FindCoordinator names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinator {
    /// Broker id.
    pub node_id: i32,
    /// Host.
    pub host: String,
    /// Port.
    pub port: i32,
}

/// Asks which broker coordinates `group`.
pub async fn find_coordinator<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
) -> Result<Coordinator> {
    find_coordinator_of(conn, group, 0).await
}

/// Asks which broker coordinates `key`: a group (`key_type` 0) or a transactional id (1).
pub async fn find_coordinator_of<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    key: &str,
    key_type: i8,
) -> Result<Coordinator> {
    let what = if key_type == 1 {
        "transactional id"
    } else {
        "group"
    };
    let version = conn.version_of::<FindCoordinatorRequest>()?;
    let mut request = FindCoordinatorRequest::default().with_key_type(key_type);
    if version >= 4 {
        request.coordinator_keys = vec![StrBytes::from_string(key.to_string())];
    } else {
        request.key = StrBytes::from_string(key.to_string());
    }
    let response = conn.request(&request).await?;
    if version >= 4 {
        let c = response
            .coordinators
            .into_iter()
            .find(|c| c.key.as_str() == key)
            .ok_or_else(|| {
                Error::Protocol(format!("FindCoordinator answered nothing for {what} {key}"))
            })?;
        Error::check(c.error_code, || format!("find coordinator of {what} {key}"))?;
        return Ok(Coordinator {
            node_id: c.node_id.0,
            host: c.host.to_string(),
            port: c.port,
        });
    }
    Error::check(response.error_code, || {
        format!("find coordinator of {what} {key}")
    })?;
    Ok(Coordinator {
        node_id: response.node_id.0,
        host: response.host.to_string(),
        port: response.port,
    })
}

/// One group as ListGroups lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub group_id: String,
    /// Protocol type ("consumer" for consumer groups).
    pub protocol_type: String,
    /// State (v4+; empty before).
    pub state: String,
    /// Type, "classic" or "consumer" (v5+; empty before).
    pub group_type: String,
}

/// Every group the broker knows, sorted by id.
pub async fn list_groups<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
) -> Result<Vec<ListedGroup>> {
    let response = conn.request(&ListGroupsRequest::default()).await?;
    Error::check(response.error_code, || "list groups".to_string())?;
    let mut out: Vec<ListedGroup> = response
        .groups
        .into_iter()
        .map(|g| ListedGroup {
            group_id: g.group_id.0.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: g.group_state.to_string(),
            group_type: g.group_type.to_string(),
        })
        .collect();
    out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    Ok(out)
}

/// One member as DescribeGroups describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
    /// The client id the member sent.
    pub client_id: String,
    /// The member's host as the broker saw it.
    pub client_host: String,
    /// Its assigned partitions (decoded from the ConsumerProtocol assignment; empty if the
    /// group is not a consumer group or the bytes are unreadable).
    pub assignment: Vec<TopicPartition>,
}

/// One group as DescribeGroups describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// Group id.
    pub group_id: String,
    /// State: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
    /// Protocol type.
    pub protocol_type: String,
    /// The chosen protocol (assignor).
    pub protocol: String,
    /// Members.
    pub members: Vec<DescribedMember>,
}

/// Describes `group`. A group the coordinator does not know is `Dead` with no members, at
/// every version: DescribeGroups v6 (KIP-1043) answers it GROUP_ID_NOT_FOUND, v0–5 `Dead`.
pub async fn describe_group<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
) -> Result<GroupDescription> {
    let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
    let response = conn.request(&request).await?;
    let g = response
        .groups
        .into_iter()
        .find(|g| g.group_id.0.as_str() == group)
        .ok_or_else(|| Error::Protocol(format!("DescribeGroups answered nothing for {group}")))?;
    if g.error_code == ResponseError::GroupIdNotFound.code() {
        return Ok(GroupDescription {
            group_id: group.to_string(),
            state: "Dead".to_string(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        });
    }
    Error::check(g.error_code, || format!("describe group {group}"))?;
    let consumer = g.protocol_type.as_str() == "consumer";
    Ok(GroupDescription {
        group_id: group.to_string(),
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members: g
            .members
            .into_iter()
            .map(|m| DescribedMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assignment: if consumer {
                    member_metadata::decode_assignment(&m.member_assignment)
                        .map(|a| a.partitions)
                        .unwrap_or_default()
                } else {
                    Vec::new()
                },
            })
            .collect(),
    })
}

/// Deletes `group` (the broker refuses with NON_EMPTY_GROUP while it has members).
pub async fn delete_group<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
) -> Result<()> {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
    let response = conn.request(&request).await?;
    let r = response
        .results
        .into_iter()
        .find(|r| r.group_id.0.as_str() == group)
        .ok_or_else(|| Error::Protocol(format!("DeleteGroups answered nothing for {group}")))?;
    Error::check(r.error_code, || format!("delete group {group}"))
}

/// The committed offsets of `group`: for `partitions`, or every partition it has committed
/// when `None`. Partitions without a commit are left out; a group the broker does not know
/// has none.
pub async fn fetch_offsets<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
    partitions: Option<&[TopicPartition]>,
) -> Result<BTreeMap<TopicPartition, Offset>> {
    let version = conn.version_of::<OffsetFetchRequest>()?;
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions.unwrap_or_default() {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut request = OffsetFetchRequest::default().with_require_stable(version >= 7);
    if version >= 8 {
        let topics = partitions.map(|_| {
            by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps.clone())
                })
                .collect()
        });
        request.groups = vec![OffsetFetchRequestGroup::default()
            .with_group_id(group_id(group))
            .with_member_epoch(-1)
            .with_topics(topics)];
    } else {
        request.group_id = group_id(group);
        request.topics = partitions.map(|_| {
            by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partition_indexes(ps.clone())
                })
                .collect()
        });
    }
    let response = conn.request(&request).await?;
    let mut out = BTreeMap::new();
    let mut keep = |topic: &str, partition: i32, offset: i64, code: i16| -> Result<()> {
        Error::check(code, || {
            format!("fetch committed offset of {topic}-{partition} for group {group}")
        })?;
        if offset >= 0 {
            out.insert(TopicPartition::new(topic, partition), Offset(offset));
        }
        Ok(())
    };
    if version >= 8 {
        let g = response
            .groups
            .into_iter()
            .find(|g| g.group_id.0.as_str() == group)
            .ok_or_else(|| Error::Protocol(format!("OffsetFetch answered nothing for {group}")))?;
        if g.error_code == ResponseError::GroupIdNotFound.code() {
            // kfake's answer for a group it does not know; Kafka's is no offsets, the same.
            return Ok(BTreeMap::new());
        }
        Error::check(g.error_code, || format!("fetch offsets of group {group}"))?;
        for t in g.topics {
            for p in t.partitions {
                keep(
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )?;
            }
        }
    } else {
        Error::check(response.error_code, || {
            format!("fetch offsets of group {group}")
        })?;
        for t in response.topics {
            for p in t.partitions {
                keep(
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )?;
            }
        }
    }
    Ok(out)
}

/// Who commits: a member of the current generation, or nobody (an admin commit, accepted only
/// while the group has no members).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committer {
    /// Generation (classic) or member epoch (consumer protocol); -1 for an admin commit.
    pub generation_or_epoch: i32,
    /// Member id; empty for an admin commit.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl Committer {
    /// An admin commit, outside any generation.
    pub fn admin() -> Self {
        Committer {
            generation_or_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// The group a consumer belongs to, as a transactional producer's `send_offsets_to_transaction`
/// commits for it (KIP-447: the group coordinator refuses a commit from a zombie generation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// Group id.
    pub group_id: String,
    /// Generation; -1 when the offsets are not tied to a generation.
    pub generation_id: i32,
    /// Member id; empty when not tied to a member.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata for `group_id` outside any generation (accepted while the group has no
    /// members, like an admin commit).
    pub fn new(group_id: impl Into<String>) -> Self {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

/// Commits `offsets` for `group`; returns each partition's error code (0 = committed).
pub async fn commit_offsets<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
    committer: &Committer,
    offsets: &BTreeMap<TopicPartition, Offset>,
) -> Result<BTreeMap<TopicPartition, i16>> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        by_topic.entry(&tp.topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(offset.0)
                .with_committed_leader_epoch(-1),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(committer.generation_or_epoch)
        .with_member_id(StrBytes::from_string(committer.member_id.clone()))
        .with_group_instance_id(
            committer
                .group_instance_id
                .clone()
                .map(StrBytes::from_string),
        )
        .with_retention_time_ms(-1)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let response = conn.request(&request).await?;
    let mut out = BTreeMap::new();
    for t in response.topics {
        for p in t.partitions {
            out.insert(
                TopicPartition::new(t.name.0.as_str(), p.partition_index),
                p.error_code,
            );
        }
    }
    for tp in offsets.keys() {
        if !out.contains_key(tp) {
            return Err(Error::Protocol(format!(
                "OffsetCommit answered nothing for {tp} in group {group}"
            )));
        }
    }
    Ok(out)
}

/// [`commit_offsets`], failing with the first partition's error.
pub async fn commit_offsets_checked<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    group: &str,
    committer: &Committer,
    offsets: &BTreeMap<TopicPartition, Offset>,
) -> Result<()> {
    for (tp, code) in commit_offsets(conn, group, committer, offsets).await? {
        Error::check(code, || format!("commit offset of {tp} for group {group}"))?;
    }
    Ok(())
}
