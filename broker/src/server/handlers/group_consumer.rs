//! The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (key 68, v0–1) and
//! ConsumerGroupDescribe (key 69, v0–1).
//!
//! Contract:
//! - A heartbeat is copied into `core::group::consumer`'s request (topic ids as 16 bytes;
//!   v0 has no regex field) and run on the group's coordinator, which assigns partitions of
//!   the broker's topics (the host hands it the current topic registry first). The answer's
//!   assignment names topics by id, as the protocol does.
//! - Describe splits its groups by coordinator, runs the parts in parallel and answers in
//!   request order; an unknown group gets GROUP_ID_NOT_FOUND (69), as Kafka answers.
//! - A coordinator that cannot take the request: its code (NOT_COORDINATOR or
//!   COORDINATOR_NOT_AVAILABLE), which clients retry.

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member,
    TopicPartitions as DescribedTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions as AssignedTopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use minikafka_core::authorized_operations::{self, ResourceType};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::consumer::{
    ConsumerGroupDescription, ConsumerGroupHeartbeatRequest as CoreHeartbeat, DescribeRequest,
    NamedTopicPartitions,
};
use minikafka_core::group::consumer_records::TopicPartitions;
use minikafka_core::group::{GroupRequest, GroupResponse};
use uuid::Uuid;

use super::groups::{ask_coordinators, refusal, text, text_since, ClientInfo};
use super::str_bytes;
use crate::server::groups::route;
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// ConsumerGroupDescribe v1's member type of a consumer-protocol member.
const MEMBER_TYPE_CONSUMER: i8 = 1;

/// ConsumerGroupHeartbeat.
pub async fn heartbeat(
    state: &(impl TopicCatalogue + GroupOps),
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    client: &ClientInfo,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = text(&request.group_id.0);
    let core_request = CoreHeartbeat {
        version,
        group_id: group_id.clone(),
        member_id: text(&request.member_id),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(text),
        rack_id: request.rack_id.as_ref().map(text),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| text(&n.0)).collect()),
        subscribed_topic_regex: text_since(version, 1, request.subscribed_topic_regex.as_ref()),
        server_assignor: request.server_assignor.as_ref().map(text),
        topic_partitions: request.topic_partitions.as_ref().map(|owned| {
            owned
                .iter()
                .map(|t| TopicPartitions {
                    topic_id: *t.topic_id.as_bytes(),
                    partitions: t.partitions.clone(),
                })
                .collect()
        }),
        client_id: client.client_id.clone(),
        client_host: client.client_host.clone(),
    };
    let answer = route::submit_for_group(
        state,
        &group_id,
        GroupRequest::ConsumerGroupHeartbeat(core_request),
    );
    let mut response = ConsumerGroupHeartbeatResponse::default();
    match answer.await {
        Ok(GroupResponse::ConsumerGroupHeartbeat(r)) => {
            response.error_code = r.error_code.0;
            response.member_id = (!r.member_id.is_empty()).then(|| str_bytes(&r.member_id));
            response.member_epoch = r.member_epoch;
            response.heartbeat_interval_ms = r.heartbeat_interval_ms;
            response.assignment = r.assignment.map(|topics| {
                let mut assignment = Assignment::default();
                assignment.topic_partitions = topics
                    .into_iter()
                    .map(|t| {
                        let mut out = AssignedTopicPartitions::default();
                        out.topic_id = Uuid::from_bytes(t.topic_id);
                        out.partitions = t.partitions;
                        out
                    })
                    .collect();
                assignment
            });
        }
        other => {
            response.error_code = refusal(other).code();
            response.member_epoch = -1;
        }
    }
    response
}

fn described_assignment(topics: Vec<NamedTopicPartitions>) -> DescribedAssignment {
    let mut assignment = DescribedAssignment::default();
    assignment.topic_partitions = topics
        .into_iter()
        .map(|t| {
            let mut out = DescribedTopicPartitions::default();
            out.topic_id = Uuid::from_bytes(t.topic_id);
            out.topic_name = TopicName(str_bytes(&t.topic_name));
            out.partitions = t.partitions;
            out
        })
        .collect();
    assignment
}

fn describe_error(group_id: &str, code: ErrorCode) -> DescribedGroup {
    let mut out = DescribedGroup::default();
    out.group_id = GroupId(str_bytes(group_id));
    out.error_code = code.code();
    out.authorized_operations = authorized_operations::OMITTED;
    out
}

/// One described group at `version`.
fn described_group(g: ConsumerGroupDescription, version: i16, with_ops: bool) -> DescribedGroup {
    let mut out = DescribedGroup::default();
    out.error_code = g.error_code.0;
    out.group_id = GroupId(str_bytes(&g.group_id));
    out.group_state = str_bytes(g.state.name());
    out.group_epoch = g.group_epoch;
    out.assignment_epoch = g.assignment_epoch;
    out.assignor_name = str_bytes(g.assignor_name);
    out.authorized_operations =
        authorized_operations::authorized_operations(ResourceType::Group, with_ops);
    out.members = g
        .members
        .into_iter()
        .map(|m| {
            let mut member = Member::default();
            member.member_id = str_bytes(&m.member_id);
            member.instance_id = m.instance_id.as_deref().map(str_bytes);
            member.rack_id = m.rack_id.as_deref().map(str_bytes);
            member.member_epoch = m.member_epoch;
            member.client_id = str_bytes(&m.client_id);
            member.client_host = str_bytes(&m.client_host);
            member.subscribed_topic_names = m
                .subscribed_topic_names
                .iter()
                .map(|n| TopicName(str_bytes(n)))
                .collect();
            member.subscribed_topic_regex = m.subscribed_topic_regex.as_deref().map(str_bytes);
            member.assignment = described_assignment(m.assignment);
            member.target_assignment = described_assignment(m.target_assignment);
            if version >= 1 {
                member.member_type = MEMBER_TYPE_CONSUMER;
            }
            member
        })
        .collect();
    out
}

/// ConsumerGroupDescribe.
pub async fn describe(
    state: &(impl TopicCatalogue + GroupOps),
    request: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let ids: Vec<String> = request.group_ids.iter().map(|g| text(&g.0)).collect();
    let answers = ask_coordinators(
        state,
        &ids,
        |_, group_ids| GroupRequest::ConsumerGroupDescribe(DescribeRequest { group_ids }),
        |response| match response {
            GroupResponse::ConsumerGroupDescribe(r) => Some(r.groups),
            _ => None,
        },
    )
    .await;
    let mut response = ConsumerGroupDescribeResponse::default();
    response.groups = answers
        .into_iter()
        .zip(&ids)
        .map(|(answer, id)| match answer {
            Ok(group) => described_group(group, version, request.include_authorized_operations),
            Err(code) => describe_error(id, code),
        })
        .collect();
    response
}
