//! Committed offsets: OffsetCommit (key 8, v2–9), OffsetFetch (key 9, v1–9; several groups
//! from v8) and OffsetDelete (key 47, v0).
//!
//! Contract:
//! - OffsetCommit: partitions of topics this broker does not have get
//!   UNKNOWN_TOPIC_OR_PARTITION (3) here, as Kafka answers, and never reach the coordinator;
//!   the rest go to the group's coordinator, whose answer comes only once the commit's record
//!   is durable under the flush policy (I20). Answers are in request order.
//! - OffsetFetch: before v8 one group (`topics` null from v2 = every committed partition);
//!   from v8 a batch of groups, split by coordinator, run in parallel, answered in request
//!   order. A partition never committed: offset -1, no error.
//! - OffsetDelete: the group's coordinator decides (GROUP_SUBSCRIBED_TO_TOPIC for a topic
//!   the group consumes).
//! - A coordinator that cannot take the request: its code on every partition (or group).

use std::collections::HashMap;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{self as core_group, GroupRequest, GroupResponse};

use super::groups::{ask_coordinators, refusal, text, text_since};
use super::str_bytes;
use crate::server::groups::route;
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// A commit's partitions (OffsetCommit, TxnOffsetCommit) in request order: those of topics
/// this broker has go to the group's coordinator; the rest are answered
/// UNKNOWN_TOPIC_OR_PARTITION (3) here, as Kafka answers, and never reach it.
pub(super) struct CommitShape {
    /// Each topic's partitions, in request order.
    slots: Vec<(String, Vec<PartitionSlot>)>,
}

/// One partition of a commit's answer: its index and, when known before the coordinator is
/// asked, its error code.
type PartitionSlot = (i32, Option<ErrorCode>);

impl CommitShape {
    /// Splits `topics` (each partition as core takes it) into the answer's shape and what
    /// the coordinator is asked (empty: nothing to ask).
    pub(super) fn split(
        state: &impl TopicCatalogue,
        topics: impl IntoIterator<Item = (String, Vec<core_group::CommitPartition>)>,
    ) -> (CommitShape, Vec<core_group::CommitTopic>) {
        let mut slots = Vec::new();
        let mut asked = Vec::new();
        for (name, partitions) in topics {
            let known = state.topic(&name).map(|t| 0..t.partition_count());
            let mut topic_slots = Vec::with_capacity(partitions.len());
            let mut topic_asked = Vec::new();
            for p in partitions {
                if known.as_ref().is_some_and(|k| k.contains(&p.partition)) {
                    topic_slots.push((p.partition, None));
                    topic_asked.push(p);
                } else {
                    topic_slots.push((p.partition, Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)));
                }
            }
            if !topic_asked.is_empty() {
                asked.push(core_group::CommitTopic {
                    name: name.clone(),
                    partitions: topic_asked,
                });
            }
            slots.push((name, topic_slots));
        }
        (CommitShape { slots }, asked)
    }

    /// Every partition's code, in request order: known here, else the coordinator's answer
    /// (`None`: it was not asked); a coordinator that could not take the request gives its
    /// code to every partition it was asked about.
    pub(super) fn codes(
        self,
        answer: Option<Result<GroupResponse, ErrorCode>>,
    ) -> Vec<(String, Vec<(i32, ErrorCode)>)> {
        let mut decided: HashMap<(String, i32), ErrorCode> = HashMap::new();
        let fallback = match answer {
            None => ErrorCode::NONE,
            Some(Ok(GroupResponse::OffsetCommit(r) | GroupResponse::TxnOffsetCommit(r))) => {
                for t in r.topics {
                    for p in t.partitions {
                        decided.insert((t.name.clone(), p.partition), p.error_code);
                    }
                }
                ErrorCode::UNKNOWN_SERVER_ERROR
            }
            Some(Ok(_)) => ErrorCode::UNKNOWN_SERVER_ERROR,
            Some(Err(code)) => code,
        };
        self.slots
            .into_iter()
            .map(|(name, slots)| {
                let codes = slots
                    .into_iter()
                    .map(|(index, code)| {
                        let code = code.unwrap_or_else(|| {
                            decided
                                .get(&(name.clone(), index))
                                .copied()
                                .unwrap_or(fallback)
                        });
                        (index, code)
                    })
                    .collect();
                (name, codes)
            })
            .collect()
    }
}

/// OffsetCommit.
pub async fn offset_commit(
    state: &(impl TopicCatalogue + GroupOps),
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group_id = text(&request.group_id.0);
    let (shape, topics) = CommitShape::split(
        state,
        request.topics.iter().map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| core_group::CommitPartition {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(text),
                })
                .collect();
            (text(&topic.name.0), partitions)
        }),
    );
    let mut answer = None;
    if !topics.is_empty() {
        let core_request = core_group::OffsetCommitRequest {
            version,
            group_id: group_id.clone(),
            generation_id: request.generation_id_or_member_epoch,
            member_id: text(&request.member_id),
            group_instance_id: text_since(version, 7, request.group_instance_id.as_ref()),
            retention_time_ms: if version <= 4 {
                request.retention_time_ms
            } else {
                -1
            },
            topics,
        };
        answer = Some(
            route::submit_for_group(state, &group_id, GroupRequest::OffsetCommit(core_request))
                .await,
        );
    }
    let mut response = OffsetCommitResponse::default();
    response.topics = shape
        .codes(answer)
        .into_iter()
        .map(|(name, codes)| {
            let mut topic = OffsetCommitResponseTopic::default();
            topic.partitions = codes
                .into_iter()
                .map(|(index, code)| {
                    let mut p = OffsetCommitResponsePartition::default();
                    p.partition_index = index;
                    p.error_code = code.code();
                    p
                })
                .collect();
            topic.name = TopicName(str_bytes(&name));
            topic
        })
        .collect();
    response
}

/// The groups an OffsetFetch asks about, in request order.
fn fetch_groups(request: &OffsetFetchRequest, version: i16) -> Vec<core_group::OffsetFetchGroup> {
    let topic_partitions = |name: &TopicName, parts: &[i32]| core_group::TopicPartitions {
        name: text(&name.0),
        partitions: parts.to_vec(),
    };
    if version >= 8 {
        return request
            .groups
            .iter()
            .map(|g| core_group::OffsetFetchGroup {
                group_id: text(&g.group_id.0),
                topics: g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| topic_partitions(&t.name, &t.partition_indexes))
                        .collect()
                }),
            })
            .collect();
    }
    vec![core_group::OffsetFetchGroup {
        group_id: text(&request.group_id.0),
        topics: request.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| topic_partitions(&t.name, &t.partition_indexes))
                .collect()
        }),
    }]
}

/// A group whose coordinator did not answer: `code` on the group and every asked partition.
fn failed_group(group: &core_group::OffsetFetchGroup, code: ErrorCode) -> core_group::FetchedGroup {
    core_group::FetchedGroup {
        group_id: group.group_id.clone(),
        error_code: code,
        topics: group
            .topics
            .iter()
            .flatten()
            .map(|t| core_group::FetchedTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|&partition| core_group::FetchedOffset {
                        partition,
                        offset: -1,
                        leader_epoch: -1,
                        metadata: None,
                        error_code: code,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// OffsetFetch.
pub async fn offset_fetch(
    state: &(impl TopicCatalogue + GroupOps),
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let groups = fetch_groups(&request, version);
    // KIP-447 (v7+): pending transactional offsets answer UNSTABLE_OFFSET_COMMIT (I76).
    let require_stable = version >= 7 && request.require_stable;
    let ids: Vec<String> = groups.iter().map(|g| g.group_id.clone()).collect();
    let answers = ask_coordinators(
        state,
        &ids,
        |positions, _| {
            let groups = positions.iter().map(|&i| groups[i].clone()).collect();
            GroupRequest::OffsetFetch(core_group::OffsetFetchRequest {
                groups,
                require_stable,
            })
        },
        |response| match response {
            GroupResponse::OffsetFetch(r) => Some(r.groups),
            _ => None,
        },
    )
    .await;
    let fetched: Vec<core_group::FetchedGroup> = answers
        .into_iter()
        .zip(&groups)
        .map(|(answer, g)| answer.unwrap_or_else(|code| failed_group(g, code)))
        .collect();
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        response.groups = fetched
            .into_iter()
            .map(|g| {
                let mut out = OffsetFetchResponseGroup::default();
                out.group_id = GroupId(str_bytes(&g.group_id));
                out.error_code = g.error_code.0;
                out.topics = g
                    .topics
                    .into_iter()
                    .map(|t| {
                        let mut topic = OffsetFetchResponseTopics::default();
                        topic.name = TopicName(str_bytes(&t.name));
                        topic.partitions = t
                            .partitions
                            .into_iter()
                            .map(|p| {
                                let mut out = OffsetFetchResponsePartitions::default();
                                out.partition_index = p.partition;
                                out.committed_offset = p.offset;
                                out.committed_leader_epoch = p.leader_epoch;
                                out.metadata = p.metadata.as_deref().map(str_bytes);
                                out.error_code = p.error_code.0;
                                out
                            })
                            .collect();
                        topic
                    })
                    .collect();
                out
            })
            .collect();
        return response;
    }
    let Some(group) = fetched.into_iter().next() else {
        return response;
    };
    if version >= 2 {
        response.error_code = group.error_code.0;
    }
    response.topics = group
        .topics
        .into_iter()
        .map(|t| {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = TopicName(str_bytes(&t.name));
            topic.partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let mut out = OffsetFetchResponsePartition::default();
                    out.partition_index = p.partition;
                    out.committed_offset = p.offset;
                    if version >= 5 {
                        out.committed_leader_epoch = p.leader_epoch;
                    }
                    out.metadata = p.metadata.as_deref().map(str_bytes);
                    // v1 has no group-level code: a group error goes on every partition.
                    out.error_code = if p.error_code.is_ok() && version < 2 {
                        group.error_code.0
                    } else {
                        p.error_code.0
                    };
                    out
                })
                .collect();
            topic
        })
        .collect();
    response
}

/// OffsetDelete.
pub async fn offset_delete(
    state: &(impl TopicCatalogue + GroupOps),
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let group_id = text(&request.group_id.0);
    let core_request = core_group::OffsetDeleteRequest {
        group_id: group_id.clone(),
        topics: request
            .topics
            .iter()
            .map(|t| core_group::TopicPartitions {
                name: text(&t.name.0),
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
            })
            .collect(),
    };
    let mut response = OffsetDeleteResponse::default();
    match route::submit_for_group(state, &group_id, GroupRequest::OffsetDelete(core_request)).await
    {
        Ok(GroupResponse::OffsetDelete(r)) => {
            response.error_code = r.error_code.0;
            response.topics = r
                .topics
                .into_iter()
                .map(|t| {
                    let mut topic = OffsetDeleteResponseTopic::default();
                    topic.name = TopicName(str_bytes(&t.name));
                    topic.partitions = t
                        .partitions
                        .into_iter()
                        .map(|p| {
                            let mut out = OffsetDeleteResponsePartition::default();
                            out.partition_index = p.partition;
                            out.error_code = p.error_code.0;
                            out
                        })
                        .collect();
                    topic
                })
                .collect();
        }
        other => response.error_code = refusal(other).code(),
    }
    response
}
