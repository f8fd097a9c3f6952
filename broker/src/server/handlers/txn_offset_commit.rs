//! TxnOffsetCommit (key 28, v0–5): offsets committed inside a transaction (KIP-98, KIP-447).
//!
//! Contract:
//! - Partitions of topics this broker does not have get UNKNOWN_TOPIC_OR_PARTITION (3), as
//!   Kafka answers, and never reach the coordinator; the rest go to the group's coordinator,
//!   which writes them as a transactional batch of the producer and answers once it is
//!   durable (I20). They stay pending, invisible to OffsetFetch, until the transaction
//!   coordinator ends the transaction through `groups::route::complete_txn_offsets` (I73,
//!   I74).
//! - v3+ carries the generation, member id and instance id, and the coordinator fences by
//!   them as Kafka does (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID: I75);
//!   before v3 they are −1, empty and null, and the group does not fence. The leader epoch
//!   exists from v2 (−1 before).
//! - A coordinator that cannot take the request: its code on every partition. Answers are
//!   in request order.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use minikafka_core::group::{self as core_group, GroupRequest};

use super::group_offsets::CommitShape;
use super::groups::{text, text_since};
use super::str_bytes;
use crate::server::groups::route;
use crate::server::shard_context::{GroupOps, TopicCatalogue};

/// TxnOffsetCommit.
pub async fn handle(
    state: &(impl TopicCatalogue + GroupOps),
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
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
                    leader_epoch: if version >= 2 {
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
        let core_request = core_group::TxnOffsetCommitRequest {
            version,
            transactional_id: text(&request.transactional_id.0),
            group_id: group_id.clone(),
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
            generation_id: if version >= 3 {
                request.generation_id
            } else {
                -1
            },
            member_id: if version >= 3 {
                text(&request.member_id)
            } else {
                String::new()
            },
            group_instance_id: text_since(version, 3, request.group_instance_id.as_ref()),
            topics,
        };
        answer = Some(
            route::submit_for_group(
                state,
                &group_id,
                GroupRequest::TxnOffsetCommit(core_request),
            )
            .await,
        );
    }
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = shape
        .codes(answer)
        .into_iter()
        .map(|(name, codes)| {
            let mut topic = TxnOffsetCommitResponseTopic::default();
            topic.partitions = codes
                .into_iter()
                .map(|(index, code)| {
                    let mut p = TxnOffsetCommitResponsePartition::default();
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
