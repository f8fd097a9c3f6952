//! Group administration: ListGroups (key 16, v0–5), DescribeGroups (key 15, v0–6) and
//! DeleteGroups (key 42, v0–2), plus what every group handler shares.
//!
//! Contract:
//! - Requests are translated into `core::group` requests, run on the coordinators that own
//!   the groups ([`route`]), and their answers translated back at the request's version
//!   (fields a version lacks are left at their defaults: kafka-protocol refuses to encode
//!   them otherwise).
//! - ListGroups asks every coordinator (every `__consumer_offsets` partition) and answers
//!   the union sorted by group id, with the v4 state and v5 type filters applied by them.
//! - DescribeGroups and DeleteGroups split their groups by coordinator, run the parts in
//!   parallel and answer in request order. A group no coordinator knows (or one of the
//!   consumer protocol) is described as `Dead` with no error at v0–5, and as
//!   GROUP_ID_NOT_FOUND with `Group G not found.` at v6 (KIP-1043, I142).
//! - A coordinator that cannot take a request (shutting down, missing) gives its groups
//!   NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, which clients retry.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::authorized_operations::{self, ResourceType};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{self as core_group, GroupRequest, GroupResponse};

use super::str_bytes;
use crate::server::groups::route::{self, coordinator_partition, offsets_partition_count};
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// Who sent a group request (JoinGroup records it; DescribeGroups shows it).
#[derive(Clone, Debug)]
pub struct ClientInfo {
    /// The request header's client id.
    pub client_id: String,
    /// The peer, as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
}

impl ClientInfo {
    /// The client of a request with `client_id` from `peer`.
    pub fn new(client_id: Option<&str>, peer: SocketAddr) -> Self {
        ClientInfo {
            client_id: client_id.unwrap_or_default().to_string(),
            client_host: format!("/{}", peer.ip()),
        }
    }
}

/// A string field of a request.
pub fn text(s: &StrBytes) -> String {
    s.as_str().to_string()
}

/// The error code of a coordinator answer that is not the response expected: the
/// coordinator's refusal, or UNKNOWN_SERVER_ERROR for a response of another kind.
pub fn refusal(answer: Result<GroupResponse, ErrorCode>) -> ErrorCode {
    answer.err().unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR)
}

/// An optional string field of a request that exists from `since` on (`None` before).
pub fn text_since(version: i16, since: i16, field: Option<&StrBytes>) -> Option<String> {
    if version >= since {
        field.map(text)
    } else {
        None
    }
}

/// The groups of a request that one coordinator owns: their positions in the request, and
/// their ids.
type CoordinatorPart = (Vec<usize>, Vec<String>);

/// Groups of a request split by coordinator partition; `None` without an offsets topic.
fn split_by_coordinator(
    state: &impl TopicCatalogue,
    group_ids: &[String],
) -> Option<BTreeMap<i32, CoordinatorPart>> {
    let mut parts: BTreeMap<i32, CoordinatorPart> = BTreeMap::new();
    for (i, id) in group_ids.iter().enumerate() {
        let partition = coordinator_partition(state, id)?;
        let part = parts.entry(partition).or_default();
        part.0.push(i);
        part.1.push(id.clone());
    }
    Some(parts)
}

/// Each group's answer from the coordinator that owns it, in request order: `ask` builds the
/// request for one coordinator's share (the positions of its groups in `group_ids`, and their
/// ids) and `unpack` takes one answer per group, in that order, from its response. A group
/// whose coordinator is missing gets COORDINATOR_NOT_AVAILABLE; one whose coordinator
/// refused gets that error.
pub async fn ask_coordinators<T>(
    state: &(impl TopicCatalogue + GroupOps),
    group_ids: &[String],
    ask: impl Fn(&[usize], Vec<String>) -> GroupRequest,
    unpack: impl Fn(GroupResponse) -> Option<Vec<T>>,
) -> Vec<Result<T, ErrorCode>> {
    let mut answers: Vec<Result<T, ErrorCode>> = group_ids
        .iter()
        .map(|_| Err(ErrorCode::COORDINATOR_NOT_AVAILABLE))
        .collect();
    let Some(parts) = split_by_coordinator(state, group_ids) else {
        return answers;
    };
    let asks = parts.into_iter().map(|(partition, (positions, ids))| {
        let request = ask(&positions, ids);
        async move { (positions, route::submit(state, partition, request).await) }
    });
    for (positions, answer) in futures::future::join_all(asks).await {
        match answer.map(&unpack) {
            Ok(Some(items)) => {
                for (pos, item) in positions.into_iter().zip(items) {
                    answers[pos] = Ok(item);
                }
            }
            other => {
                let code = other.map_or_else(|code| code, |_| ErrorCode::UNKNOWN_SERVER_ERROR);
                for pos in positions {
                    answers[pos] = Err(code);
                }
            }
        }
    }
    answers
}

/// ListGroups.
pub async fn list_groups(
    state: &(impl TopicCatalogue + GroupOps),
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    let Some(count) = offsets_partition_count(state) else {
        response.error_code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
        return response;
    };
    let core_request = core_group::ListGroupsRequest {
        states_filter: if version >= 4 {
            request.states_filter.iter().map(text).collect()
        } else {
            Vec::new()
        },
        types_filter: if version >= 5 {
            request.types_filter.iter().map(text).collect()
        } else {
            Vec::new()
        },
    };
    let asks = (0..count).map(|partition| {
        route::submit(
            state,
            partition,
            GroupRequest::ListGroups(core_request.clone()),
        )
    });
    let mut listed = Vec::new();
    for answer in futures::future::join_all(asks).await {
        match answer {
            Ok(GroupResponse::ListGroups(r)) => {
                if !r.error_code.is_ok() {
                    response.error_code = r.error_code.0;
                }
                listed.extend(r.groups);
            }
            Ok(_) => response.error_code = ErrorCode::UNKNOWN_SERVER_ERROR.code(),
            Err(code) => response.error_code = code.code(),
        }
    }
    listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    response.groups = listed
        .into_iter()
        .map(|g| {
            let mut out = ListedGroup::default();
            out.group_id = GroupId(str_bytes(&g.group_id));
            out.protocol_type = str_bytes(&g.protocol_type);
            if version >= 4 {
                out.group_state = str_bytes(&g.group_state);
            }
            if version >= 5 {
                out.group_type = str_bytes(&g.group_type);
            }
            out
        })
        .collect();
    response
}

fn described(group: core_group::DescribedGroup, version: i16, with_ops: bool) -> DescribedGroup {
    if group.error_code == ErrorCode::GROUP_ID_NOT_FOUND && version >= 6 {
        // v6 (KIP-1043): an unknown group, or one of the consumer protocol, is an error with
        // Kafka's message and no operations; Kafka 4's admin client reads it (I142).
        let mut out = describe_error(&group.group_id, group.error_code);
        out.error_message = Some(str_bytes(&format!("Group {} not found.", group.group_id)));
        return out;
    }
    let mut out = DescribedGroup::default();
    out.group_id = GroupId(str_bytes(&group.group_id));
    if group.error_code == ErrorCode::GROUP_ID_NOT_FOUND {
        // v0–5: an unknown group is Dead, without an error.
        out.group_state = str_bytes("Dead");
    } else {
        out.error_code = group.error_code.0;
        out.group_state = str_bytes(&group.group_state);
        out.protocol_type = str_bytes(&group.protocol_type);
        out.protocol_data = str_bytes(&group.protocol_data);
        out.members = group
            .members
            .into_iter()
            .map(|m| {
                let mut member = DescribedGroupMember::default();
                member.member_id = str_bytes(&m.member_id);
                if version >= 4 {
                    member.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                }
                member.client_id = str_bytes(&m.client_id);
                member.client_host = str_bytes(&m.client_host);
                member.member_metadata = m.member_metadata.into();
                member.member_assignment = m.member_assignment.into();
                member
            })
            .collect();
    }
    out.authorized_operations =
        authorized_operations::authorized_operations(ResourceType::Group, version >= 3 && with_ops);
    out
}

fn describe_error(group_id: &str, code: ErrorCode) -> DescribedGroup {
    let mut out = DescribedGroup::default();
    out.group_id = GroupId(str_bytes(group_id));
    out.error_code = code.code();
    out.authorized_operations = authorized_operations::OMITTED;
    out
}

/// DescribeGroups.
pub async fn describe_groups(
    state: &(impl TopicCatalogue + GroupOps),
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let ids: Vec<String> = request.groups.iter().map(|g| text(&g.0)).collect();
    let with_ops = version >= 3 && request.include_authorized_operations;
    let answers = ask_coordinators(
        state,
        &ids,
        |_, group_ids| {
            GroupRequest::DescribeGroups(core_group::DescribeGroupsRequest { group_ids })
        },
        |response| match response {
            GroupResponse::DescribeGroups(r) => Some(r.groups),
            _ => None,
        },
    )
    .await;
    let mut response = DescribeGroupsResponse::default();
    response.groups = answers
        .into_iter()
        .zip(&ids)
        .map(|(answer, id)| match answer {
            Ok(group) => described(group, version, with_ops),
            Err(code) => describe_error(id, code),
        })
        .collect();
    response
}

/// DeleteGroups.
pub async fn delete_groups(
    state: &(impl TopicCatalogue + GroupOps),
    request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let ids: Vec<String> = request.groups_names.iter().map(|g| text(&g.0)).collect();
    let answers = ask_coordinators(
        state,
        &ids,
        |_, group_ids| GroupRequest::DeleteGroups(core_group::DeleteGroupsRequest { group_ids }),
        |response| match response {
            GroupResponse::DeleteGroups(r) => {
                Some(r.results.into_iter().map(|(_, code)| code).collect())
            }
            _ => None,
        },
    )
    .await;
    let mut response = DeleteGroupsResponse::default();
    response.results = ids
        .iter()
        .zip(answers)
        .map(|(id, answer)| {
            let mut r = DeletableGroupResult::default();
            r.group_id = GroupId(str_bytes(id));
            r.error_code = answer.unwrap_or_else(|code| code).code();
            r
        })
        .collect();
    response
}
