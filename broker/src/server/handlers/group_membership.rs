//! Classic group membership: JoinGroup (key 11, v0–9), SyncGroup (key 14, v0–5), Heartbeat
//! (key 12, v0–4), LeaveGroup (key 13, v0–5).
//!
//! Contract:
//! - Each request is copied into its `core::group` form (v0 JoinGroup's rebalance timeout is
//!   its session timeout; fields a version lacks get their documented defaults), run on the
//!   coordinator of its group ([`route`]), and its answer written back at the request's
//!   version. JoinGroup and SyncGroup answers wait there for the rebalance barrier: that is
//!   the protocol, and the connection keeps serving its other requests meanwhile.
//! - LeaveGroup before v3 names one member (the request's `member_id`) and answers with the
//!   group-level code only; from v3 on a batch, answered per member.
//! - A coordinator that cannot take the request: its error code (NOT_COORDINATOR or
//!   COORDINATOR_NOT_AVAILABLE), which makes clients find the coordinator and retry.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use minikafka_core::group::{self as core_group, GroupRequest, GroupResponse};

use super::groups::{refusal, text, text_since, ClientInfo};
use super::str_bytes;
use crate::server::groups::route;
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// JoinGroup.
pub async fn join_group(
    state: &(impl TopicCatalogue + GroupOps),
    request: JoinGroupRequest,
    version: i16,
    client: &ClientInfo,
) -> JoinGroupResponse {
    let group_id = text(&request.group_id.0);
    let core_request = core_group::JoinGroupRequest {
        version,
        group_id: group_id.clone(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 {
            request.rebalance_timeout_ms
        } else {
            request.session_timeout_ms
        },
        member_id: text(&request.member_id),
        group_instance_id: text_since(version, 5, request.group_instance_id.as_ref()),
        protocol_type: text(&request.protocol_type),
        protocols: request
            .protocols
            .iter()
            .map(|p| core_group::JoinProtocol {
                name: text(&p.name),
                metadata: p.metadata.to_vec(),
            })
            .collect(),
        client_id: client.client_id.clone(),
        client_host: client.client_host.clone(),
    };
    let answer = route::submit_for_group(state, &group_id, GroupRequest::JoinGroup(core_request));
    let mut response = JoinGroupResponse::default();
    match answer.await {
        Ok(GroupResponse::JoinGroup(r)) => {
            response.error_code = r.error_code.0;
            response.generation_id = r.generation_id;
            if version >= 7 {
                response.protocol_type = r.protocol_type.as_deref().map(str_bytes);
                response.protocol_name = r.protocol_name.as_deref().map(str_bytes);
            } else {
                response.protocol_name = Some(str_bytes(r.protocol_name.as_deref().unwrap_or("")));
            }
            response.leader = str_bytes(&r.leader);
            response.skip_assignment = version >= 9 && r.skip_assignment;
            response.member_id = str_bytes(&r.member_id);
            response.members = r
                .members
                .into_iter()
                .map(|m| {
                    let mut member = JoinGroupResponseMember::default();
                    member.member_id = str_bytes(&m.member_id);
                    if version >= 5 {
                        member.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                    }
                    member.metadata = m.metadata.into();
                    member
                })
                .collect();
        }
        other => {
            response.error_code = refusal(other).code();
            response.generation_id = -1;
            response.member_id = request.member_id.clone();
            if version < 7 {
                response.protocol_name = Some(str_bytes(""));
            }
        }
    }
    response
}

/// SyncGroup.
pub async fn sync_group(
    state: &(impl TopicCatalogue + GroupOps),
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let group_id = text(&request.group_id.0);
    let core_request = core_group::SyncGroupRequest {
        version,
        group_id: group_id.clone(),
        generation_id: request.generation_id,
        member_id: text(&request.member_id),
        group_instance_id: text_since(version, 3, request.group_instance_id.as_ref()),
        protocol_type: text_since(version, 5, request.protocol_type.as_ref()),
        protocol_name: text_since(version, 5, request.protocol_name.as_ref()),
        assignments: request
            .assignments
            .iter()
            .map(|a| (text(&a.member_id), a.assignment.to_vec()))
            .collect(),
    };
    let answer = route::submit_for_group(state, &group_id, GroupRequest::SyncGroup(core_request));
    let mut response = SyncGroupResponse::default();
    match answer.await {
        Ok(GroupResponse::SyncGroup(r)) => {
            response.error_code = r.error_code.0;
            if version >= 5 {
                response.protocol_type = r.protocol_type.as_deref().map(str_bytes);
                response.protocol_name = r.protocol_name.as_deref().map(str_bytes);
            }
            response.assignment = r.assignment.into();
        }
        other => response.error_code = refusal(other).code(),
    }
    response
}

/// Heartbeat.
pub async fn heartbeat(
    state: &(impl TopicCatalogue + GroupOps),
    request: HeartbeatRequest,
    version: i16,
) -> HeartbeatResponse {
    let group_id = text(&request.group_id.0);
    let core_request = core_group::HeartbeatRequest {
        group_id: group_id.clone(),
        generation_id: request.generation_id,
        member_id: text(&request.member_id),
        group_instance_id: text_since(version, 3, request.group_instance_id.as_ref()),
    };
    let answer = route::submit_for_group(state, &group_id, GroupRequest::Heartbeat(core_request));
    let mut response = HeartbeatResponse::default();
    response.error_code = match answer.await {
        Ok(GroupResponse::Heartbeat(r)) => r.error_code.0,
        other => refusal(other).code(),
    };
    response
}

/// LeaveGroup.
pub async fn leave_group(
    state: &(impl TopicCatalogue + GroupOps),
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group_id = text(&request.group_id.0);
    let members = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| core_group::LeavingMember {
                member_id: text(&m.member_id),
                group_instance_id: m.group_instance_id.as_ref().map(text),
            })
            .collect()
    } else {
        vec![core_group::LeavingMember {
            member_id: text(&request.member_id),
            group_instance_id: None,
        }]
    };
    let core_request = core_group::LeaveGroupRequest {
        group_id: group_id.clone(),
        members,
    };
    let answer = route::submit_for_group(state, &group_id, GroupRequest::LeaveGroup(core_request));
    let mut response = LeaveGroupResponse::default();
    match answer.await {
        Ok(GroupResponse::LeaveGroup(r)) => {
            if version >= 3 {
                response.error_code = r.error_code.0;
                response.members = r
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut out = MemberResponse::default();
                        out.member_id = str_bytes(&m.member_id);
                        out.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                        out.error_code = m.error_code.0;
                        out
                    })
                    .collect();
            } else {
                // One member: its code stands for the request when the group had none.
                let member_code = r.members.first().map_or(0, |m| m.error_code.0);
                response.error_code = if r.error_code.is_ok() {
                    member_code
                } else {
                    r.error_code.0
                };
            }
        }
        other => response.error_code = refusal(other).code(),
    }
    response
}
