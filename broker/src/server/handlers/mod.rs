//! Request handlers, one module per API, and the table of versions we serve.
//!
//! Contract:
//! - Input: a [`DecodedRequest`] (already judged against [`served_versions`]) on the shard
//!   that owns the connection.
//! - Output: an [`Outcome`]: the encoded response, nothing (`acks=0` produce), or a reason
//!   to close the connection (an encoding failure, an `acks=0` produce that failed). Every
//!   API the pre-check covers has a handler: the dispatch `match` is exhaustive.
//! - The dispatcher, like every handler, sees the shard through the narrow traits of
//!   [`super::shard_context`] (here all of them, as one [`ShardContext`], and the
//!   configuration changes' [`ConfigAdmin`]), never the shard itself (I150): `tests/narrow_handlers.rs` scans every file of this folder for it.
//! - Never: touches a partition log directly (they are reached through
//!   [`PartitionOps`](super::shard_context::PartitionOps)' routed calls), or answers for an
//!   API that [`served_versions`] does not list.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod api_versions;
pub mod authorize;
pub mod client_quotas;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod end_txn;
pub mod error_codes;
pub mod fetch;
pub mod find_coordinator;
pub mod group_consumer;
pub mod group_membership;
pub mod group_offsets;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod list_transactions;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod scram_credentials;
pub mod throttle;
pub mod txn_offset_commit;
pub mod txn_shared;
pub mod write_txn_markers;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use super::alter_configs::ConfigAdmin;
use super::authz::Caller;
use super::session::RequestContext;
use super::shard_context::{ApiMetrics, ShardContext};
use crate::protocol::spliced::encode_response_spliced;

/// Re-exported for the handlers (`super::str_bytes`): it lives with the protocol, so the
/// handlers and this dispatcher, which names them, do not import each other.
pub use crate::protocol::str_bytes;
use crate::protocol::{
    encode_response_for, ApiRange, DecodedRequest, RequestBody, SupportedVersions,
};
use error_codes::ErrorCodes;
use minikafka_core::error_code::ErrorCode;

/// What to do with a handled request.
#[derive(Debug)]
pub enum Outcome {
    /// Write these bytes (a size-prefixed response).
    Respond(Bytes),
    /// Write these parts in order, as one response (a Fetch response whose record batches
    /// are the log's own bytes, not copied: [`encode_response_spliced`]).
    RespondInParts(Vec<Bytes>),
    /// Write nothing (`acks=0` produce).
    Silent,
    /// Close the connection, logging the reason.
    Close(String),
}

/// The APIs and version ranges the broker accepts: each is the intersection of what the
/// protocol layer pre-checks and what the handler implements. An API left out closes the
/// connection.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
];

fn table(ranges: impl Iterator<Item = (ApiKey, i16, i16)>) -> SupportedVersions {
    let ranges = ranges
        .map(|(api_key, min_version, max_version)| ApiRange {
            api_key,
            min_version,
            max_version,
        })
        .collect();
    // Every range lies inside the protocol's schemas (checked by a unit test below).
    SupportedVersions::new(ranges).unwrap_or_else(|_| SupportedVersions::all_covered())
}

/// [`SERVED`] as a [`SupportedVersions`] table: what requests are decoded against and what
/// ApiVersions lists (clients decide features from it — kafka-python 3 and Java 3+ turn
/// idempotence on once InitProducerId is listed — so an API served only in part stays out).
pub fn served_versions() -> SupportedVersions {
    table(SERVED.iter().copied())
}

/// Encodes `response` for the request's version and correlation id.
pub fn respond<R: Encodable + HeaderVersion>(
    api_version: i16,
    correlation_id: i32,
    response: &R,
) -> Outcome {
    match encode_response_for(api_version, correlation_id, response) {
        Ok(bytes) => Outcome::Respond(bytes),
        Err(e) => Outcome::Close(e.to_string()),
    }
}

/// Counts the response's error codes against API `api`, then encodes it ([`respond`]).
fn answer<R: Encodable + HeaderVersion + ErrorCodes>(
    state: &impl ApiMetrics,
    api: i16,
    api_version: i16,
    correlation_id: i32,
    response: &R,
) -> Outcome {
    state.count_errors(api, response.error_codes());
    respond(api_version, correlation_id, response)
}

/// Handles one request in `ctx`, the connection's principal and listener when the request
/// was read (I45). A handler that authorizes or answers per listener takes `ctx`.
/// `admitted` is what [`throttle::admit`] charged when the reader took the request.
pub async fn handle(
    state: &(impl ShardContext + ConfigAdmin),
    request: DecodedRequest,
    ctx: &RequestContext,
    admitted: throttle::Admitted,
) -> Outcome {
    let peer = ctx.client_address;
    let version = request.api_version;
    let api = request.api_key as i16;
    let correlation_id = request.header.correlation_id;
    // The connection's principal when the request was read (I45), checked by the
    // authorizer (I48).
    let caller = Caller::from_context(ctx);
    // The client id quotas are charged to (Kafka's: empty when the header has none).
    let client_id = request.header.client_id.as_deref().unwrap_or("");
    // Every answered request: its error codes counted, then encoded with its header.
    macro_rules! reply {
        ($response:expr) => {
            answer(state, api, version, correlation_id, &$response)
        };
    }
    match request.body {
        RequestBody::ApiVersions(_) => reply!(api_versions::handle(state, version)),
        RequestBody::Metadata(req) => reply!(metadata::handle(state, req, version, ctx).await),
        RequestBody::Produce(mut req) => {
            let acks = req.acks;
            let denied = authorize::PRODUCE.split(state, &caller, &mut req);
            let mut response = produce::handle(state, req, version).await;
            response.responses.extend(denied);
            // Charged when the reader admitted it (I98).
            response.throttle_time_ms = admitted.produce_throttle_ms;
            if acks == 0 {
                state.count_errors(api, response.error_codes());
                // Kafka closes an acks=0 connection on error so the producer notices.
                match produce::first_error(&response) {
                    Some(code) => {
                        Outcome::Close(format!("acks=0 produce failed with error {code}"))
                    }
                    None => Outcome::Silent,
                }
            } else {
                reply!(response)
            }
        }
        RequestBody::Fetch(mut req) => {
            let denied = authorize::FETCH.split(state, &caller, &mut req);
            if !denied.is_empty() {
                // Answered at once (no long poll), as a request with an error is.
                req.max_wait_ms = 0;
            }
            throttle::cap_fetch(state, ctx, client_id, &mut req);
            let mut response = fetch::handle(state, req, version).await;
            response.responses.extend(denied);
            throttle::charge_fetch(state, ctx, client_id, &mut response);
            state.count_errors(api, response.error_codes());
            let records = fetch::records_in_order(&response);
            match encode_response_spliced(version, correlation_id, &response, records) {
                Ok(parts) => Outcome::RespondInParts(parts),
                Err(e) => Outcome::Close(e.to_string()),
            }
        }
        RequestBody::ListOffsets(mut req) => {
            let denied = authorize::LIST_OFFSETS.split(state, &caller, &mut req);
            let mut response = list_offsets::handle(state, req, version).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::CreateTopics(mut req) => {
            let denied = authorize::CREATE_TOPICS.split(state, &caller, &mut req);
            let mut response = create_topics::handle(state, req, version).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::DeleteTopics(mut req) => {
            let mut denied = authorize::DELETE_TOPICS_BY_NAME.split(state, &caller, &mut req);
            denied.extend(authorize::DELETE_TOPICS.split(state, &caller, &mut req));
            let mut response = delete_topics::handle(state, req, version).await;
            response.responses.extend(denied);
            reply!(response)
        }
        RequestBody::DeleteRecords(mut req) => {
            let denied = authorize::DELETE_RECORDS.split(state, &caller, &mut req);
            let mut response = delete_records::handle(state, req).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::AlterConfigs(mut req) => {
            let denied = authorize::ALTER_CONFIGS.split(state, &caller, &mut req);
            let mut response = alter_configs::handle_alter(state, req).await;
            response.responses.extend(denied);
            reply!(response)
        }
        RequestBody::IncrementalAlterConfigs(mut req) => {
            let denied = authorize::INCREMENTAL_ALTER_CONFIGS.split(state, &caller, &mut req);
            let mut response = alter_configs::handle_incremental(state, req).await;
            response.responses.extend(denied);
            reply!(response)
        }
        RequestBody::CreatePartitions(mut req) => {
            let denied = authorize::CREATE_PARTITIONS.split(state, &caller, &mut req);
            let mut response = create_partitions::handle(state, req).await;
            response.results.extend(denied);
            reply!(response)
        }
        RequestBody::DescribeConfigs(mut req) => {
            let denied = authorize::DESCRIBE_CONFIGS.split(state, &caller, &mut req);
            let mut response = describe_configs::handle(state, req, version);
            response.results.extend(denied);
            reply!(response)
        }
        RequestBody::DescribeCluster(req) => {
            let mut response = describe_cluster::handle(state, req, version, ctx);
            authorize::describe_cluster_answer(state, &caller, &mut response);
            reply!(response)
        }
        RequestBody::FindCoordinator(req) => {
            let mut response = find_coordinator::handle(state, req.clone(), version, ctx);
            authorize::find_coordinator_answer(state, &caller, &req, &mut response);
            reply!(response)
        }
        RequestBody::JoinGroup(req) => {
            if let Some(denied) = authorize::JOIN_GROUP.denied(state, &caller, &req) {
                return reply!(denied);
            }
            let client = groups::ClientInfo::new(
                request.header.client_id.as_ref().map(|c| c.as_str()),
                peer,
            );
            reply!(group_membership::join_group(state, req, version, &client).await)
        }
        RequestBody::SyncGroup(req) => match authorize::SYNC_GROUP.denied(state, &caller, &req) {
            Some(denied) => reply!(denied),
            None => reply!(group_membership::sync_group(state, req, version).await),
        },
        RequestBody::Heartbeat(req) => match authorize::HEARTBEAT.denied(state, &caller, &req) {
            Some(denied) => reply!(denied),
            None => reply!(group_membership::heartbeat(state, req, version).await),
        },
        RequestBody::LeaveGroup(req) => match authorize::LEAVE_GROUP.denied(state, &caller, &req) {
            Some(denied) => reply!(denied),
            None => reply!(group_membership::leave_group(state, req, version).await),
        },
        RequestBody::OffsetCommit(mut req) => {
            let denied = authorize::OFFSET_COMMIT.split(state, &caller, &mut req);
            let mut response = group_offsets::offset_commit(state, req, version).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::OffsetFetch(req) => {
            let asked = req.clone();
            let mut response = group_offsets::offset_fetch(state, req, version).await;
            authorize::offset_fetch_answer(state, &caller, &asked, &mut response);
            reply!(response)
        }
        RequestBody::TxnOffsetCommit(mut req) => {
            let denied = authorize::TXN_OFFSET_COMMIT.split(state, &caller, &mut req);
            let mut response = txn_offset_commit::handle(state, req, version).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::OffsetDelete(mut req) => {
            match authorize::OFFSET_DELETE.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => {
                    let denied = authorize::OFFSET_DELETE_TOPICS.split(state, &caller, &mut req);
                    let mut response = group_offsets::offset_delete(state, req).await;
                    response.topics.extend(denied);
                    reply!(response)
                }
            }
        }
        RequestBody::DeleteGroups(mut req) => {
            let denied = authorize::DELETE_GROUPS.split(state, &caller, &mut req);
            let mut response = groups::delete_groups(state, req).await;
            response.results.extend(denied);
            reply!(response)
        }
        RequestBody::ListGroups(req) => {
            let mut response = groups::list_groups(state, req, version).await;
            authorize::LIST_GROUPS.retain(state, &caller, &mut response);
            reply!(response)
        }
        RequestBody::DescribeGroups(mut req) => {
            let denied = authorize::DESCRIBE_GROUPS.split(state, &caller, &mut req);
            let mut response = groups::describe_groups(state, req, version).await;
            authorize::DESCRIBE_GROUPS_OPERATIONS.fill(state, &caller, &mut response);
            response.groups.extend(denied);
            reply!(response)
        }
        RequestBody::ConsumerGroupHeartbeat(req) => {
            if let Some(denied) = authorize::CONSUMER_GROUP_HEARTBEAT.denied(state, &caller, &req) {
                return reply!(denied);
            }
            let client = groups::ClientInfo::new(
                request.header.client_id.as_ref().map(|c| c.as_str()),
                peer,
            );
            reply!(group_consumer::heartbeat(state, req, version, &client).await)
        }
        RequestBody::ConsumerGroupDescribe(mut req) => {
            let denied = authorize::CONSUMER_GROUP_DESCRIBE.split(state, &caller, &mut req);
            let mut response = group_consumer::describe(state, req, version).await;
            authorize::CONSUMER_GROUP_DESCRIBE_OPERATIONS.fill(state, &caller, &mut response);
            response.groups.extend(denied);
            reply!(response)
        }
        RequestBody::OffsetForLeaderEpoch(mut req) => {
            let denied = authorize::OFFSET_FOR_LEADER_EPOCH.split(state, &caller, &mut req);
            let mut response = offset_for_leader_epoch::handle(state, req).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::DescribeLogDirs(req) => {
            match authorize::DESCRIBE_LOG_DIRS.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(describe_log_dirs::handle(state, req).await),
            }
        }
        RequestBody::DescribeAcls(req) => reply!(acls::handle_describe(state, &caller, &req)),
        RequestBody::CreateAcls(req) => reply!(acls::handle_create(state, &caller, &req).await),
        RequestBody::DeleteAcls(req) => reply!(acls::handle_delete(state, &caller, &req).await),
        RequestBody::DescribeProducers(mut req) => {
            let denied = authorize::DESCRIBE_PRODUCERS.split(state, &caller, &mut req);
            let mut response = describe_producers::handle(state, req).await;
            response.topics.extend(denied);
            reply!(response)
        }
        RequestBody::DescribeTopicPartitions(mut req) => {
            let denied = authorize::DESCRIBE_TOPIC_PARTITIONS.split(state, &caller, &mut req);
            let mut response = describe_topic_partitions::handle(state, req);
            authorize::DESCRIBE_TOPIC_PARTITIONS_OPERATIONS.fill(state, &caller, &mut response);
            response.topics.extend(denied);
            reply!(response)
        }
        // A SASL request on a listener without SASL, or after authentication (the connection
        // answers them before): Kafka's KafkaApis answers ILLEGAL_SASL_STATE.
        RequestBody::SaslHandshake(_) => {
            let mut response = kafka_protocol::messages::SaslHandshakeResponse::default();
            response.error_code = ErrorCode::ILLEGAL_SASL_STATE.code();
            reply!(response)
        }
        RequestBody::SaslAuthenticate(_) => {
            let mut response = kafka_protocol::messages::SaslAuthenticateResponse::default();
            response.error_code = ErrorCode::ILLEGAL_SASL_STATE.code();
            response.error_message = Some(str_bytes(
                "SaslAuthenticate request received after successful authentication",
            ));
            reply!(response)
        }
        RequestBody::DescribeUserScramCredentials(req) => {
            match authorize::DESCRIBE_SCRAM.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(scram_credentials::describe(state, req)),
            }
        }
        RequestBody::AlterUserScramCredentials(req) => {
            match authorize::ALTER_SCRAM.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(scram_credentials::alter(state, req).await),
            }
        }
        RequestBody::WriteTxnMarkers(req) => {
            match authorize::WRITE_TXN_MARKERS.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(write_txn_markers::handle(state, req).await),
            }
        }
        RequestBody::InitProducerId(req) => {
            match authorize::init_producer_id_denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(init_producer_id::handle_request(state, req, version).await),
            }
        }
        RequestBody::AddPartitionsToTxn(req) => {
            let exists = |topic: &str, p: i32| txn_shared::partition_exists(state, topic, p);
            match authorize::add_partitions_to_txn_denied(state, &caller, &req, version, exists) {
                Some(denied) => reply!(denied),
                None => reply!(add_partitions_to_txn::handle(state, req, version).await),
            }
        }
        RequestBody::AddOffsetsToTxn(req) => {
            match authorize::ADD_OFFSETS_TO_TXN.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(add_offsets_to_txn::handle(state, req, version).await),
            }
        }
        RequestBody::EndTxn(req) => match authorize::END_TXN.denied(state, &caller, &req) {
            Some(denied) => reply!(denied),
            None => reply!(end_txn::handle(state, req, version).await),
        },
        RequestBody::DescribeTransactions(mut req) => {
            let denied = authorize::DESCRIBE_TRANSACTIONS.split(state, &caller, &mut req);
            let mut response = describe_transactions::handle(state, req).await;
            for txn in &mut response.transaction_states {
                authorize::DESCRIBE_TRANSACTION_TOPICS.retain(state, &caller, txn);
            }
            response.transaction_states.extend(denied);
            reply!(response)
        }
        RequestBody::DescribeClientQuotas(req) => {
            match authorize::DESCRIBE_CLIENT_QUOTAS.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(client_quotas::describe(state, &req)),
            }
        }
        RequestBody::AlterClientQuotas(req) => {
            match authorize::ALTER_CLIENT_QUOTAS.denied(state, &caller, &req) {
                Some(denied) => reply!(denied),
                None => reply!(client_quotas::alter(state, req).await),
            }
        }
        RequestBody::ListTransactions(req) => {
            let mut response = list_transactions::handle(state, req, version).await;
            authorize::LIST_TRANSACTIONS.retain(state, &caller, &mut response);
            reply!(response)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::schema;

    #[test]
    fn served_ranges_lie_inside_the_protocol_schemas() {
        let ranges: Vec<ApiRange> = SERVED
            .iter()
            .map(|&(api_key, min_version, max_version)| ApiRange {
                api_key,
                min_version,
                max_version,
            })
            .collect();
        let table = SupportedVersions::new(ranges).expect("served ranges are covered");
        assert_eq!(table.ranges().len(), SERVED.len());
        assert!(schema::schema_for(ApiKey::ElectLeaders).is_none());
        assert!(table.get(ApiKey::ElectLeaders).is_none());
    }
}
