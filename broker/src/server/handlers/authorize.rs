//! The authorizer's checks of each API, before its handler runs and on its answer (I48).
//!
//! Contract:
//! - A check either answers the whole request (a denial the handler never sees: one group,
//!   the cluster, one transactional id), or takes the denied elements out of the request
//!   (`split`) and gives back their answers with Kafka's code, to be put beside the
//!   handler's answer: the handler runs only on what the caller may do.
//! - The operations are Kafka's (`KafkaApis`/`AuthHelper`): Produce WRITE on each topic (and
//!   WRITE on the transactional id when one is given); Fetch READ; ListOffsets,
//!   OffsetForLeaderEpoch and Metadata DESCRIBE; CreateTopics CREATE on the cluster or the
//!   topic; DeleteTopics and DeleteRecords DELETE; CreatePartitions ALTER; the group
//!   membership APIs and OffsetCommit READ on the group (OffsetCommit also READ on each
//!   topic); OffsetFetch DESCRIBE on the group and on each topic; DeleteGroups and
//!   OffsetDelete DELETE on the group; DescribeGroups DESCRIBE; configs
//!   DESCRIBE_CONFIGS/ALTER_CONFIGS on the resource; DescribeCluster and DescribeLogDirs
//!   DESCRIBE on the cluster; FindCoordinator DESCRIBE on the group or transactional id;
//!   InitProducerId WRITE on the transactional id, or, without one, IDEMPOTENT_WRITE on the
//!   cluster or WRITE on some topic (KIP-679). The transactions: AddPartitionsToTxn v0–3
//!   WRITE on the transactional id and each topic (a denied topic fails the whole
//!   transaction), v4+ (brokers only) and WriteTxnMarkers CLUSTER_ACTION on the cluster;
//!   AddOffsetsToTxn and TxnOffsetCommit WRITE on the transactional id then READ on the
//!   group (TxnOffsetCommit also READ on each topic); EndTxn WRITE on the transactional id;
//!   DescribeTransactions and ListTransactions DESCRIBE on each id. SCRAM credentials:
//!   Describe DESCRIBE, Alter ALTER on the cluster.
//! - With no authorizer every check allows, so nothing is split and nothing changes.
//! - KIP-430 bitfields a handler filled (any value but the "not requested" sentinel) are
//!   replaced by the caller's own operations.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::acl::{Operation, ResourceType};
use minikafka_core::authorized_operations::OMITTED;
use minikafka_core::error_code::ErrorCode;
use uuid::Uuid;

use crate::server::authz::{
    allowed, any_topic_allowed, authorized_operations, cluster_allowed, group_allowed,
    topic_allowed, transactional_id_allowed, Caller,
};
use crate::server::groups::offsets_topic::is_internal;
use crate::server::shared::Shared;

const TOPIC_DENIED: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
const GROUP_DENIED: i16 = ErrorCode::GROUP_AUTHORIZATION_FAILED.code();
const CLUSTER_DENIED: i16 = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
const TXN_DENIED: i16 = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();

/// Kafka's config resource types (DescribeConfigs, AlterConfigs).
const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;
const CONFIG_BROKER_LOGGER: i8 = 8;
const CONFIG_GROUP: i8 = 32;

/// Takes the items `keep` refuses out of `items` (order kept on both sides).
fn split<T>(items: &mut Vec<T>, mut keep: impl FnMut(&T) -> bool) -> Vec<T> {
    let (kept, denied) = std::mem::take(items).into_iter().partition(|i| keep(i));
    *items = kept;
    denied
}

/// The name of a topic given by name or (when `id` is not nil) by id; `None` for an unknown
/// id, which the handler answers (UNKNOWN_TOPIC_ID) without saying whether it exists.
fn topic_name(shared: &Shared, name: &str, id: Uuid) -> Option<String> {
    if id.is_nil() {
        Some(name.to_string())
    } else {
        shared.topic_by_id(id).map(|t| t.name.clone())
    }
}

fn topic_ok(shared: &Shared, caller: &Caller, name: &str, id: Uuid, op: Operation) -> bool {
    topic_name(shared, name, id).is_none_or(|n| topic_allowed(shared, caller, &n, op))
}

/// Produce: the denied topics, answered; the rest left in `request`.
pub fn produce(
    shared: &Shared,
    caller: &Caller,
    request: &mut ProduceRequest,
) -> Vec<produce_response::TopicProduceResponse> {
    let txn_ok = request
        .transactional_id
        .as_ref()
        .is_none_or(|id| transactional_id_allowed(shared, caller, id, Operation::Write));
    let denied = split(&mut request.topic_data, |t| {
        txn_ok && topic_ok(shared, caller, &t.name, t.topic_id, Operation::Write)
    });
    let code = if txn_ok { TOPIC_DENIED } else { TXN_DENIED };
    denied
        .into_iter()
        .map(|t| {
            let mut topic = produce_response::TopicProduceResponse::default();
            topic.name = t.name;
            topic.topic_id = t.topic_id;
            topic.partition_responses = t
                .partition_data
                .iter()
                .map(|p| {
                    let mut r = produce_response::PartitionProduceResponse::default();
                    r.index = p.index;
                    r.error_code = code;
                    r.base_offset = -1;
                    r
                })
                .collect();
            topic
        })
        .collect()
}

/// Fetch: the denied topics, answered; the rest left in `request`. A request with a denial
/// is answered at once (no long poll), as one with an error is.
pub fn fetch(
    shared: &Shared,
    caller: &Caller,
    request: &mut FetchRequest,
) -> Vec<fetch_response::FetchableTopicResponse> {
    let denied = split(&mut request.topics, |t| {
        topic_ok(shared, caller, &t.topic, t.topic_id, Operation::Read)
    });
    if !denied.is_empty() {
        request.max_wait_ms = 0;
    }
    denied
        .into_iter()
        .map(|t| {
            let mut topic = fetch_response::FetchableTopicResponse::default();
            topic.topic = t.topic;
            topic.topic_id = t.topic_id;
            topic.partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let mut d = fetch_response::PartitionData::default();
                    d.partition_index = p.partition;
                    d.error_code = TOPIC_DENIED;
                    d.high_watermark = -1;
                    d.last_stable_offset = -1;
                    d.log_start_offset = -1;
                    d
                })
                .collect();
            topic
        })
        .collect()
}

/// ListOffsets: DESCRIBE on each topic.
pub fn list_offsets(
    shared: &Shared,
    caller: &Caller,
    request: &mut ListOffsetsRequest,
) -> Vec<list_offsets_response::ListOffsetsTopicResponse> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Describe)
    })
    .into_iter()
    .map(|t| {
        let mut topic = list_offsets_response::ListOffsetsTopicResponse::default();
        topic.name = t.name;
        topic.partitions = t
            .partitions
            .iter()
            .map(|p| {
                let mut r = list_offsets_response::ListOffsetsPartitionResponse::default();
                r.partition_index = p.partition_index;
                r.error_code = TOPIC_DENIED;
                r.timestamp = -1;
                r.offset = -1;
                r
            })
            .collect();
        topic
    })
    .collect()
}

/// OffsetForLeaderEpoch: DESCRIBE on each topic.
pub fn offset_for_leader_epoch(
    shared: &Shared,
    caller: &Caller,
    request: &mut OffsetForLeaderEpochRequest,
) -> Vec<offset_for_leader_epoch_response::OffsetForLeaderTopicResult> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.topic, Operation::Describe)
    })
    .into_iter()
    .map(|t| {
        let mut topic = offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default();
        topic.topic = t.topic;
        topic.partitions = t
            .partitions
            .iter()
            .map(|p| {
                let mut r = offset_for_leader_epoch_response::EpochEndOffset::default();
                r.partition = p.partition;
                r.error_code = TOPIC_DENIED;
                r.leader_epoch = -1;
                r.end_offset = -1;
                r
            })
            .collect();
        topic
    })
    .collect()
}

/// CreateTopics: CREATE on the cluster, or else on each topic.
pub fn create_topics(
    shared: &Shared,
    caller: &Caller,
    request: &mut CreateTopicsRequest,
) -> Vec<create_topics_response::CreatableTopicResult> {
    if cluster_allowed(shared, caller, Operation::Create) {
        return Vec::new();
    }
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Create)
    })
    .into_iter()
    .map(|t| {
        let mut r = create_topics_response::CreatableTopicResult::default();
        r.name = t.name;
        r.error_code = TOPIC_DENIED;
        r.topic_config_error_code = TOPIC_DENIED;
        r.num_partitions = -1;
        r.replication_factor = -1;
        r
    })
    .collect()
}

/// DeleteTopics: DELETE on each topic (by name, or by id from v6).
pub fn delete_topics(
    shared: &Shared,
    caller: &Caller,
    request: &mut DeleteTopicsRequest,
) -> Vec<delete_topics_response::DeletableTopicResult> {
    let mut answers: Vec<_> = split(&mut request.topic_names, |name| {
        topic_allowed(shared, caller, name, Operation::Delete)
    })
    .into_iter()
    .map(|name| {
        let mut r = delete_topics_response::DeletableTopicResult::default();
        r.name = Some(name);
        r.error_code = TOPIC_DENIED;
        r
    })
    .collect();
    answers.extend(
        split(&mut request.topics, |t| {
            let name = t.name.as_ref().map_or("", |n| n.as_str());
            topic_ok(shared, caller, name, t.topic_id, Operation::Delete)
        })
        .into_iter()
        .map(|t| {
            let mut r = delete_topics_response::DeletableTopicResult::default();
            r.name = t.name;
            r.topic_id = t.topic_id;
            r.error_code = TOPIC_DENIED;
            r
        }),
    );
    answers
}

/// DeleteRecords: DELETE on each topic.
pub fn delete_records(
    shared: &Shared,
    caller: &Caller,
    request: &mut DeleteRecordsRequest,
) -> Vec<delete_records_response::DeleteRecordsTopicResult> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Delete)
    })
    .into_iter()
    .map(|t| {
        let mut topic = delete_records_response::DeleteRecordsTopicResult::default();
        topic.name = t.name;
        topic.partitions = t
            .partitions
            .iter()
            .map(|p| {
                let mut r = delete_records_response::DeleteRecordsPartitionResult::default();
                r.partition_index = p.partition_index;
                r.error_code = TOPIC_DENIED;
                r.low_watermark = -1;
                r
            })
            .collect();
        topic
    })
    .collect()
}

/// CreatePartitions: ALTER on each topic.
pub fn create_partitions(
    shared: &Shared,
    caller: &Caller,
    request: &mut CreatePartitionsRequest,
) -> Vec<create_partitions_response::CreatePartitionsTopicResult> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Alter)
    })
    .into_iter()
    .map(|t| {
        let mut r = create_partitions_response::CreatePartitionsTopicResult::default();
        r.name = t.name;
        r.error_code = TOPIC_DENIED;
        r
    })
    .collect()
}

/// DescribeProducers: READ on each topic.
pub fn describe_producers(
    shared: &Shared,
    caller: &Caller,
    request: &mut DescribeProducersRequest,
) -> Vec<describe_producers_response::TopicResponse> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Read)
    })
    .into_iter()
    .map(|t| {
        let mut topic = describe_producers_response::TopicResponse::default();
        topic.name = t.name;
        topic.partitions = t
            .partition_indexes
            .iter()
            .map(|&p| {
                let mut r = describe_producers_response::PartitionResponse::default();
                r.partition_index = p;
                r.error_code = TOPIC_DENIED;
                r
            })
            .collect();
        topic
    })
    .collect()
}

/// Whether `caller` may READ `group` (the membership APIs, OffsetCommit, the
/// consumer-protocol heartbeat).
pub fn group_read(shared: &Shared, caller: &Caller, group: &str) -> bool {
    group_allowed(shared, caller, group, Operation::Read)
}

/// A JoinGroup denial.
pub fn join_group_denied() -> JoinGroupResponse {
    let mut r = JoinGroupResponse::default();
    r.error_code = GROUP_DENIED;
    r.generation_id = -1;
    r
}

/// A SyncGroup denial.
pub fn sync_group_denied() -> SyncGroupResponse {
    let mut r = SyncGroupResponse::default();
    r.error_code = GROUP_DENIED;
    r
}

/// A Heartbeat denial.
pub fn heartbeat_denied() -> HeartbeatResponse {
    let mut r = HeartbeatResponse::default();
    r.error_code = GROUP_DENIED;
    r
}

/// A LeaveGroup denial.
pub fn leave_group_denied() -> LeaveGroupResponse {
    let mut r = LeaveGroupResponse::default();
    r.error_code = GROUP_DENIED;
    r
}

/// A ConsumerGroupHeartbeat denial.
pub fn consumer_heartbeat_denied() -> ConsumerGroupHeartbeatResponse {
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.error_code = GROUP_DENIED;
    r.member_epoch = -1;
    r
}

fn offset_commit_topic(
    t: &offset_commit_request::OffsetCommitRequestTopic,
    code: i16,
) -> offset_commit_response::OffsetCommitResponseTopic {
    let mut topic = offset_commit_response::OffsetCommitResponseTopic::default();
    topic.name = t.name.clone();
    topic.topic_id = t.topic_id;
    topic.partitions = t
        .partitions
        .iter()
        .map(|p| {
            let mut r = offset_commit_response::OffsetCommitResponsePartition::default();
            r.partition_index = p.partition_index;
            r.error_code = code;
            r
        })
        .collect();
    topic
}

/// OffsetCommit: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED and the
/// request emptied), then READ on each topic.
pub fn offset_commit(
    shared: &Shared,
    caller: &Caller,
    request: &mut OffsetCommitRequest,
) -> Vec<offset_commit_response::OffsetCommitResponseTopic> {
    if !group_read(shared, caller, &request.group_id) {
        return std::mem::take(&mut request.topics)
            .iter()
            .map(|t| offset_commit_topic(t, GROUP_DENIED))
            .collect();
    }
    split(&mut request.topics, |t| {
        topic_ok(shared, caller, &t.name, t.topic_id, Operation::Read)
    })
    .iter()
    .map(|t| offset_commit_topic(t, TOPIC_DENIED))
    .collect()
}

/// OffsetFetch, one group (v0–7 at the top level, v8+ each group): whether the caller may
/// DESCRIBE the group, and the topics it may not DESCRIBE (taken out of the request's list,
/// answered by the caller with TOPIC_AUTHORIZATION_FAILED). An all-topics fetch is
/// filtered afterwards by [`offset_fetch_visible`].
pub fn offset_fetch_group(shared: &Shared, caller: &Caller, group: &str) -> bool {
    group_allowed(shared, caller, group, Operation::Describe)
}

/// Whether an OffsetFetch answer may show `topic` to the caller.
pub fn offset_fetch_visible(shared: &Shared, caller: &Caller, topic: &str) -> bool {
    topic_allowed(shared, caller, topic, Operation::Describe)
}

/// OffsetFetch: group and topic DESCRIBE checks applied to the handler's answer. Denied
/// groups answer GROUP_AUTHORIZATION_FAILED with no topics; partitions of topics the caller
/// may not describe answer TOPIC_AUTHORIZATION_FAILED (asked for by name) or are left out
/// (an all-topics fetch).
pub fn offset_fetch_answer(
    shared: &Shared,
    caller: &Caller,
    request: &OffsetFetchRequest,
    response: &mut OffsetFetchResponse,
) {
    if !shared.config.authorizer.enabled() {
        return;
    }
    let asked_all = request.topics.is_none();
    if !request.group_id.is_empty() || !response.topics.is_empty() || request.groups.is_empty() {
        if !offset_fetch_group(shared, caller, &request.group_id) {
            response.topics.clear();
            response.error_code = GROUP_DENIED;
        } else {
            if asked_all {
                response
                    .topics
                    .retain(|t| offset_fetch_visible(shared, caller, &t.name));
            }
            for t in &mut response.topics {
                if !offset_fetch_visible(shared, caller, &t.name) {
                    for p in &mut t.partitions {
                        p.error_code = TOPIC_DENIED;
                        p.committed_offset = -1;
                    }
                }
            }
        }
    }
    for (asked, group) in request.groups.iter().zip(response.groups.iter_mut()) {
        if !offset_fetch_group(shared, caller, &group.group_id) {
            group.topics.clear();
            group.error_code = GROUP_DENIED;
            continue;
        }
        if asked.topics.is_none() {
            group
                .topics
                .retain(|t| offset_fetch_visible(shared, caller, &t.name));
        }
        for t in &mut group.topics {
            let name = topic_name(shared, &t.name, t.topic_id).unwrap_or_default();
            if !offset_fetch_visible(shared, caller, &name) {
                for p in &mut t.partitions {
                    p.error_code = TOPIC_DENIED;
                    p.committed_offset = -1;
                }
            }
        }
    }
}

/// OffsetDelete: DELETE on the group (else the whole answer GROUP_AUTHORIZATION_FAILED),
/// then READ on each topic.
pub fn offset_delete(
    shared: &Shared,
    caller: &Caller,
    request: &mut OffsetDeleteRequest,
) -> Result<Vec<offset_delete_response::OffsetDeleteResponseTopic>, OffsetDeleteResponse> {
    if !group_allowed(shared, caller, &request.group_id, Operation::Delete) {
        let mut r = OffsetDeleteResponse::default();
        r.error_code = GROUP_DENIED;
        return Err(r);
    }
    Ok(split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Read)
    })
    .into_iter()
    .map(|t| {
        let mut topic = offset_delete_response::OffsetDeleteResponseTopic::default();
        topic.name = t.name;
        topic.partitions = t
            .partitions
            .iter()
            .map(|p| {
                let mut r = offset_delete_response::OffsetDeleteResponsePartition::default();
                r.partition_index = p.partition_index;
                r.error_code = TOPIC_DENIED;
                r
            })
            .collect();
        topic
    })
    .collect())
}

/// DeleteGroups: DELETE on each group.
pub fn delete_groups(
    shared: &Shared,
    caller: &Caller,
    request: &mut DeleteGroupsRequest,
) -> Vec<delete_groups_response::DeletableGroupResult> {
    split(&mut request.groups_names, |g| {
        group_allowed(shared, caller, g, Operation::Delete)
    })
    .into_iter()
    .map(|g| {
        let mut r = delete_groups_response::DeletableGroupResult::default();
        r.group_id = g;
        r.error_code = GROUP_DENIED;
        r
    })
    .collect()
}

/// DescribeGroups: DESCRIBE on each group; the answer's bitfields made the caller's.
pub fn describe_groups(
    shared: &Shared,
    caller: &Caller,
    request: &mut DescribeGroupsRequest,
) -> Vec<describe_groups_response::DescribedGroup> {
    split(&mut request.groups, |g| {
        group_allowed(shared, caller, g, Operation::Describe)
    })
    .into_iter()
    .map(|g| {
        let mut r = describe_groups_response::DescribedGroup::default();
        r.group_id = g;
        r.error_code = GROUP_DENIED;
        r.authorized_operations = OMITTED;
        r
    })
    .collect()
}

/// The caller's bitfield in place of one a handler filled.
fn own_operations(
    shared: &Shared,
    caller: &Caller,
    field: &mut i32,
    resource_type: ResourceType,
    name: &str,
) {
    if *field != OMITTED {
        *field = authorized_operations(shared, caller, resource_type, name, true);
    }
}

/// DescribeGroups' answer: each group's bitfield the caller's.
pub fn describe_groups_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut DescribeGroupsResponse,
) {
    for g in &mut response.groups {
        own_operations(
            shared,
            caller,
            &mut g.authorized_operations,
            ResourceType::Group,
            &g.group_id,
        );
    }
}

/// ConsumerGroupDescribe: DESCRIBE on each group.
pub fn consumer_group_describe(
    shared: &Shared,
    caller: &Caller,
    request: &mut ConsumerGroupDescribeRequest,
) -> Vec<consumer_group_describe_response::DescribedGroup> {
    split(&mut request.group_ids, |g| {
        group_allowed(shared, caller, g, Operation::Describe)
    })
    .into_iter()
    .map(|g| {
        let mut r = consumer_group_describe_response::DescribedGroup::default();
        r.group_id = g;
        r.error_code = GROUP_DENIED;
        r.authorized_operations = OMITTED;
        r
    })
    .collect()
}

/// ConsumerGroupDescribe's answer: each group's bitfield the caller's.
pub fn consumer_group_describe_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut ConsumerGroupDescribeResponse,
) {
    for g in &mut response.groups {
        own_operations(
            shared,
            caller,
            &mut g.authorized_operations,
            ResourceType::Group,
            &g.group_id,
        );
    }
}

/// ListGroups: every group with DESCRIBE on the cluster, else those the caller may DESCRIBE.
pub fn list_groups_answer(shared: &Shared, caller: &Caller, response: &mut ListGroupsResponse) {
    if cluster_allowed(shared, caller, Operation::Describe) {
        return;
    }
    response
        .groups
        .retain(|g| group_allowed(shared, caller, &g.group_id, Operation::Describe));
}

/// The resource and denial code of a config resource, for `operation`.
fn config_check(
    shared: &Shared,
    caller: &Caller,
    resource_type: i8,
    name: &str,
    operation: Operation,
) -> Option<i16> {
    let (resource, name, code) = match resource_type {
        CONFIG_TOPIC => (ResourceType::Topic, name, TOPIC_DENIED),
        CONFIG_GROUP => (ResourceType::Group, name, GROUP_DENIED),
        CONFIG_BROKER | CONFIG_BROKER_LOGGER => (
            ResourceType::Cluster,
            crate::server::authz::CLUSTER_NAME,
            CLUSTER_DENIED,
        ),
        // CLIENT_METRICS and unknown types: the cluster, as Kafka guards them.
        _ => (
            ResourceType::Cluster,
            crate::server::authz::CLUSTER_NAME,
            CLUSTER_DENIED,
        ),
    };
    (!allowed(shared, caller, resource, name, operation)).then_some(code)
}

fn denied_message(code: i16) -> Option<StrBytes> {
    let text = match code {
        TOPIC_DENIED => "Topic authorization failed.",
        GROUP_DENIED => "Group authorization failed.",
        _ => "Cluster authorization failed.",
    };
    Some(StrBytes::from_static_str(text))
}

/// The resources of a configuration request (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs) that `caller` may not touch with `operation`, with their codes;
/// the rest left in `resources`.
fn split_config_resources<T>(
    shared: &Shared,
    caller: &Caller,
    resources: &mut Vec<T>,
    resource: impl Fn(&T) -> (i8, &StrBytes),
    operation: Operation,
) -> Vec<(T, i16)> {
    let mut codes = Vec::new();
    let denied = split(resources, |r| {
        let (resource_type, name) = resource(r);
        match config_check(shared, caller, resource_type, name, operation) {
            Some(code) => {
                codes.push(code);
                false
            }
            None => true,
        }
    });
    denied.into_iter().zip(codes).collect()
}

/// DescribeConfigs: DESCRIBE_CONFIGS on each resource.
pub fn describe_configs(
    shared: &Shared,
    caller: &Caller,
    request: &mut DescribeConfigsRequest,
) -> Vec<describe_configs_response::DescribeConfigsResult> {
    split_config_resources(
        shared,
        caller,
        &mut request.resources,
        |r| (r.resource_type, &r.resource_name),
        Operation::DescribeConfigs,
    )
    .into_iter()
    .map(|(r, code)| {
        let mut result = describe_configs_response::DescribeConfigsResult::default();
        result.error_code = code;
        result.error_message = denied_message(code);
        result.resource_type = r.resource_type;
        result.resource_name = r.resource_name;
        result
    })
    .collect()
}

/// AlterConfigs: ALTER_CONFIGS on each resource.
pub fn alter_configs(
    shared: &Shared,
    caller: &Caller,
    request: &mut AlterConfigsRequest,
) -> Vec<alter_configs_response::AlterConfigsResourceResponse> {
    split_config_resources(
        shared,
        caller,
        &mut request.resources,
        |r| (r.resource_type, &r.resource_name),
        Operation::AlterConfigs,
    )
    .into_iter()
    .map(|(r, code)| {
        let mut result = alter_configs_response::AlterConfigsResourceResponse::default();
        result.error_code = code;
        result.error_message = denied_message(code);
        result.resource_type = r.resource_type;
        result.resource_name = r.resource_name;
        result
    })
    .collect()
}

/// IncrementalAlterConfigs: ALTER_CONFIGS on each resource.
pub fn incremental_alter_configs(
    shared: &Shared,
    caller: &Caller,
    request: &mut IncrementalAlterConfigsRequest,
) -> Vec<incremental_alter_configs_response::AlterConfigsResourceResponse> {
    split_config_resources(
        shared,
        caller,
        &mut request.resources,
        |r| (r.resource_type, &r.resource_name),
        Operation::AlterConfigs,
    )
    .into_iter()
    .map(|(r, code)| {
        let mut result =
            incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        result.error_code = code;
        result.error_message = denied_message(code);
        result.resource_type = r.resource_type;
        result.resource_name = r.resource_name;
        result
    })
    .collect()
}

/// DescribeCluster: DESCRIBE on the cluster, and the caller's cluster bitfield.
pub fn describe_cluster_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut DescribeClusterResponse,
) {
    if !cluster_allowed(shared, caller, Operation::Describe) {
        let mut denied = DescribeClusterResponse::default();
        denied.error_code = CLUSTER_DENIED;
        denied.error_message = denied_message(CLUSTER_DENIED);
        denied.endpoint_type = response.endpoint_type;
        denied.cluster_authorized_operations = OMITTED;
        *response = denied;
        return;
    }
    own_operations(
        shared,
        caller,
        &mut response.cluster_authorized_operations,
        ResourceType::Cluster,
        crate::server::authz::CLUSTER_NAME,
    );
}

/// DescribeLogDirs: DESCRIBE on the cluster (else no directories, CLUSTER_AUTHORIZATION_FAILED).
pub fn describe_log_dirs_denied(
    shared: &Shared,
    caller: &Caller,
) -> Option<DescribeLogDirsResponse> {
    if cluster_allowed(shared, caller, Operation::Describe) {
        return None;
    }
    let mut r = DescribeLogDirsResponse::default();
    r.error_code = CLUSTER_DENIED;
    Some(r)
}

/// FindCoordinator: DESCRIBE on each group (key type 0) or transactional id (key type 1).
/// Denied keys answer GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED, at the top level
/// (v0–3) or per key (v4+), with no node.
pub fn find_coordinator_answer(
    shared: &Shared,
    caller: &Caller,
    request: &FindCoordinatorRequest,
    response: &mut FindCoordinatorResponse,
) {
    if !shared.config.authorizer.enabled() {
        return;
    }
    let check = |key: &str| -> Option<i16> {
        if request.key_type == 1 {
            (!transactional_id_allowed(shared, caller, key, Operation::Describe))
                .then_some(TXN_DENIED)
        } else {
            (!group_allowed(shared, caller, key, Operation::Describe)).then_some(GROUP_DENIED)
        }
    };
    if response.coordinators.is_empty() {
        if let Some(code) = check(&request.key) {
            response.error_code = code;
            response.error_message = None;
            response.node_id = (-1).into();
            response.host = StrBytes::default();
            response.port = -1;
        }
    }
    for c in &mut response.coordinators {
        if let Some(code) = check(&c.key) {
            c.error_code = code;
            c.error_message = None;
            c.node_id = (-1).into();
            c.host = StrBytes::default();
            c.port = -1;
        }
    }
}

/// InitProducerId: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the
/// cluster or WRITE on some topic (KIP-679). The denial when refused.
pub fn init_producer_id_denied(
    shared: &Shared,
    caller: &Caller,
    request: &InitProducerIdRequest,
) -> Option<InitProducerIdResponse> {
    let code = match &request.transactional_id {
        Some(id) => {
            (!transactional_id_allowed(shared, caller, id, Operation::Write)).then_some(TXN_DENIED)
        }
        None => (!cluster_allowed(shared, caller, Operation::IdempotentWrite)
            && !any_topic_allowed(shared, caller, Operation::Write))
        .then_some(CLUSTER_DENIED),
    }?;
    let mut r = InitProducerIdResponse::default();
    r.error_code = code;
    r.producer_id = (-1).into();
    r.producer_epoch = -1;
    Some(r)
}

/// DescribeTopicPartitions: DESCRIBE on each topic (denied ones answered, the rest left).
pub fn describe_topic_partitions(
    shared: &Shared,
    caller: &Caller,
    request: &mut DescribeTopicPartitionsRequest,
) -> Vec<describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic> {
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Describe)
    })
    .into_iter()
    .map(|t| {
        let mut r =
            describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default();
        r.name = Some(t.name);
        r.error_code = TOPIC_DENIED;
        r.topic_authorized_operations = OMITTED;
        r
    })
    .collect()
}

/// DescribeTopicPartitions' answer: each topic's bitfield the caller's.
pub fn describe_topic_partitions_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut DescribeTopicPartitionsResponse,
) {
    for t in &mut response.topics {
        if t.error_code == ErrorCode::NONE.code() {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            own_operations(
                shared,
                caller,
                &mut t.topic_authorized_operations,
                ResourceType::Topic,
                &name,
            );
        }
    }
}

/// AddPartitionsToTxn v0–3 (one transaction, from a client): WRITE on the transactional id
/// (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
/// (never on an internal one);
/// any denied topic fails the whole transaction, as Kafka: the denied partitions
/// TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED, or
/// UNKNOWN_TOPIC_OR_PARTITION where `exists` says no (I48). v4+ comes only from brokers
/// and needs CLUSTER_ACTION on the cluster, answered at the top level.
pub fn add_partitions_to_txn_denied(
    shared: &Shared,
    caller: &Caller,
    request: &AddPartitionsToTxnRequest,
    version: i16,
    exists: impl Fn(&str, i32) -> bool,
) -> Option<AddPartitionsToTxnResponse> {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    if !shared.config.authorizer.enabled() {
        return None;
    }
    let mut response = AddPartitionsToTxnResponse::default();
    if version >= 4 {
        if cluster_allowed(shared, caller, Operation::ClusterAction) {
            return None;
        }
        response.error_code = CLUSTER_DENIED;
        return Some(response);
    }
    let txn_ok = transactional_id_allowed(
        shared,
        caller,
        &request.v3_and_below_transactional_id,
        Operation::Write,
    );
    let topics = &request.v3_and_below_topics;
    // Internal topics are never authorized here, as Kafka: only the broker writes them.
    let topic_ok = |name: &str| {
        txn_ok && !is_internal(name) && topic_allowed(shared, caller, name, Operation::Write)
    };
    if txn_ok && topics.iter().all(|t| topic_ok(&t.name)) {
        return None;
    }
    response.results_by_topic_v3_and_below = topics
        .iter()
        .map(|t| {
            let allowed = topic_ok(&t.name);
            let mut topic = AddPartitionsToTxnTopicResult::default();
            topic.name = t.name.clone();
            topic.results_by_partition = t
                .partitions
                .iter()
                .map(|&p| {
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = p;
                    r.partition_error_code = if !txn_ok {
                        TXN_DENIED
                    } else if !allowed {
                        TOPIC_DENIED
                    } else if exists(&t.name, p) {
                        ErrorCode::OPERATION_NOT_ATTEMPTED.code()
                    } else {
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                    };
                    r
                })
                .collect();
            topic
        })
        .collect();
    Some(response)
}

/// AddOffsetsToTxn: WRITE on the transactional id, then READ on the group.
pub fn add_offsets_to_txn_denied(
    shared: &Shared,
    caller: &Caller,
    request: &AddOffsetsToTxnRequest,
) -> Option<AddOffsetsToTxnResponse> {
    let code =
        if !transactional_id_allowed(shared, caller, &request.transactional_id, Operation::Write) {
            TXN_DENIED
        } else if !group_read(shared, caller, &request.group_id) {
            GROUP_DENIED
        } else {
            return None;
        };
    let mut r = AddOffsetsToTxnResponse::default();
    r.error_code = code;
    Some(r)
}

/// EndTxn: WRITE on the transactional id.
pub fn end_txn_denied(
    shared: &Shared,
    caller: &Caller,
    request: &EndTxnRequest,
) -> Option<EndTxnResponse> {
    if transactional_id_allowed(shared, caller, &request.transactional_id, Operation::Write) {
        return None;
    }
    let mut r = EndTxnResponse::default();
    r.error_code = TXN_DENIED;
    r.producer_id = (-1).into();
    r.producer_epoch = -1;
    Some(r)
}

fn txn_offset_commit_topic(
    t: &txn_offset_commit_request::TxnOffsetCommitRequestTopic,
    code: i16,
) -> txn_offset_commit_response::TxnOffsetCommitResponseTopic {
    let mut topic = txn_offset_commit_response::TxnOffsetCommitResponseTopic::default();
    topic.name = t.name.clone();
    topic.partitions = t
        .partitions
        .iter()
        .map(|p| {
            let mut r = txn_offset_commit_response::TxnOffsetCommitResponsePartition::default();
            r.partition_index = p.partition_index;
            r.error_code = code;
            r
        })
        .collect();
    topic
}

/// TxnOffsetCommit: WRITE on the transactional id, then READ on the group (either denial
/// answers every partition and empties the request), then READ on each topic.
pub fn txn_offset_commit(
    shared: &Shared,
    caller: &Caller,
    request: &mut TxnOffsetCommitRequest,
) -> Vec<txn_offset_commit_response::TxnOffsetCommitResponseTopic> {
    let whole =
        if !transactional_id_allowed(shared, caller, &request.transactional_id, Operation::Write) {
            Some(TXN_DENIED)
        } else if !group_read(shared, caller, &request.group_id) {
            Some(GROUP_DENIED)
        } else {
            None
        };
    if let Some(code) = whole {
        return std::mem::take(&mut request.topics)
            .iter()
            .map(|t| txn_offset_commit_topic(t, code))
            .collect();
    }
    split(&mut request.topics, |t| {
        topic_allowed(shared, caller, &t.name, Operation::Read)
    })
    .iter()
    .map(|t| txn_offset_commit_topic(t, TOPIC_DENIED))
    .collect()
}

/// WriteTxnMarkers: CLUSTER_ACTION on the cluster (only brokers write markers); denied,
/// every marker's partitions CLUSTER_AUTHORIZATION_FAILED.
pub fn write_txn_markers_denied(
    shared: &Shared,
    caller: &Caller,
    request: &WriteTxnMarkersRequest,
) -> Option<WriteTxnMarkersResponse> {
    use write_txn_markers_response::*;
    if cluster_allowed(shared, caller, Operation::ClusterAction) {
        return None;
    }
    let mut response = WriteTxnMarkersResponse::default();
    response.markers = request
        .markers
        .iter()
        .map(|m| {
            let mut marker = WritableTxnMarkerResult::default();
            marker.producer_id = m.producer_id;
            marker.topics = m
                .topics
                .iter()
                .map(|t| {
                    let mut topic = WritableTxnMarkerTopicResult::default();
                    topic.name = t.name.clone();
                    topic.partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            let mut r = WritableTxnMarkerPartitionResult::default();
                            r.partition_index = p;
                            r.error_code = CLUSTER_DENIED;
                            r
                        })
                        .collect();
                    topic
                })
                .collect();
            marker
        })
        .collect();
    Some(response)
}

/// DescribeTransactions: DESCRIBE on each transactional id (denied ids answered, the rest
/// left in `request`).
pub fn describe_transactions(
    shared: &Shared,
    caller: &Caller,
    request: &mut DescribeTransactionsRequest,
) -> Vec<describe_transactions_response::TransactionState> {
    split(&mut request.transactional_ids, |id| {
        transactional_id_allowed(shared, caller, id, Operation::Describe)
    })
    .into_iter()
    .map(|id| {
        let mut r = describe_transactions_response::TransactionState::default();
        r.transactional_id = id;
        r.error_code = TXN_DENIED;
        r.transaction_state = StrBytes::default();
        r.producer_id = (-1).into();
        r.producer_epoch = -1;
        r.transaction_start_time_ms = -1;
        r
    })
    .collect()
}

/// DescribeTransactions' answer: a described transaction lists only the topics the caller
/// may DESCRIBE, as Kafka.
pub fn describe_transactions_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut DescribeTransactionsResponse,
) {
    for s in &mut response.transaction_states {
        s.topics
            .retain(|t| topic_allowed(shared, caller, &t.topic, Operation::Describe));
    }
}

/// ListTransactions' answer: only the ids the caller may DESCRIBE.
pub fn list_transactions_answer(
    shared: &Shared,
    caller: &Caller,
    response: &mut ListTransactionsResponse,
) {
    response.transaction_states.retain(|s| {
        transactional_id_allowed(shared, caller, &s.transactional_id, Operation::Describe)
    });
}

/// DescribeUserScramCredentials: DESCRIBE on the cluster (else the top-level code).
pub fn describe_scram_denied(
    shared: &Shared,
    caller: &Caller,
) -> Option<DescribeUserScramCredentialsResponse> {
    if cluster_allowed(shared, caller, Operation::Describe) {
        return None;
    }
    let mut r = DescribeUserScramCredentialsResponse::default();
    r.error_code = CLUSTER_DENIED;
    r.error_message = denied_message(CLUSTER_DENIED);
    Some(r)
}

/// AlterUserScramCredentials: ALTER on the cluster (else every user CLUSTER_AUTHORIZATION_FAILED).
pub fn alter_scram_denied(
    shared: &Shared,
    caller: &Caller,
    request: &AlterUserScramCredentialsRequest,
) -> Option<AlterUserScramCredentialsResponse> {
    if cluster_allowed(shared, caller, Operation::Alter) {
        return None;
    }
    let mut users: Vec<&StrBytes> = request
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(request.upsertions.iter().map(|u| &u.name))
        .collect();
    users.sort();
    users.dedup();
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = users
        .into_iter()
        .map(|u| {
            let mut r =
                alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default();
            r.user = u.clone();
            r.error_code = CLUSTER_DENIED;
            r.error_message = denied_message(CLUSTER_DENIED);
            r
        })
        .collect();
    Some(response)
}

/// DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster (else the top-level code).
pub fn describe_client_quotas_denied(
    shared: &Shared,
    caller: &Caller,
) -> Option<DescribeClientQuotasResponse> {
    if cluster_allowed(shared, caller, Operation::DescribeConfigs) {
        return None;
    }
    let mut r = DescribeClientQuotasResponse::default();
    r.error_code = CLUSTER_DENIED;
    r.error_message = denied_message(CLUSTER_DENIED);
    Some(r)
}

/// AlterClientQuotas: ALTER_CONFIGS on the cluster (else every entry
/// CLUSTER_AUTHORIZATION_FAILED, nothing changed).
pub fn alter_client_quotas_denied(
    shared: &Shared,
    caller: &Caller,
    request: &AlterClientQuotasRequest,
) -> Option<AlterClientQuotasResponse> {
    if cluster_allowed(shared, caller, Operation::AlterConfigs) {
        return None;
    }
    let mut response = AlterClientQuotasResponse::default();
    let message = denied_message(CLUSTER_DENIED);
    response.entries = request
        .entries
        .iter()
        .map(|entry| {
            super::client_quotas::result(
                entry,
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                message.as_deref(),
            )
        })
        .collect();
    Some(response)
}
