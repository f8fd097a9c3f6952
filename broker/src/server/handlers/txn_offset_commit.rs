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

use std::collections::HashMap;
use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{self as core_group, GroupRequest, GroupResponse};

use super::groups::{text, text_since};
use super::str_bytes;
use crate::server::groups::route;
use crate::server::shard::ShardState;

/// One partition of the answer: its index and, when known before the coordinator is asked,
/// its error code.
type PartitionSlot = (i32, Option<ErrorCode>);

fn known_partition<B: Backend>(state: &ShardState<B>, topic: &str, partition: i32) -> bool {
    state
        .shared
        .topic(topic)
        .is_some_and(|t| (0..t.partition_count()).contains(&partition))
}

/// TxnOffsetCommit.
pub async fn handle<B: Backend>(
    state: &Rc<ShardState<B>>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group_id = text(&request.group_id.0);
    // The answer's shape (request order) with the codes known here; `None` = ask core.
    let mut shape: Vec<(String, Vec<PartitionSlot>)> = Vec::new();
    let mut topics = Vec::new();
    for topic in &request.topics {
        let name = text(&topic.name.0);
        let mut partitions = Vec::new();
        let mut slots = Vec::new();
        for p in &topic.partitions {
            if known_partition(state, &name, p.partition_index) {
                partitions.push(core_group::CommitPartition {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(text),
                });
                slots.push((p.partition_index, None));
            } else {
                slots.push((
                    p.partition_index,
                    Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                ));
            }
        }
        if !partitions.is_empty() {
            topics.push(core_group::CommitTopic {
                name: name.clone(),
                partitions,
            });
        }
        shape.push((name, slots));
    }
    let mut decided: HashMap<(String, i32), ErrorCode> = HashMap::new();
    let mut fallback = ErrorCode::NONE;
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
        let answer = route::submit_for_group(
            state,
            &group_id,
            GroupRequest::TxnOffsetCommit(core_request),
        )
        .await;
        match answer {
            Ok(GroupResponse::TxnOffsetCommit(r)) => {
                for t in r.topics {
                    for p in t.partitions {
                        decided.insert((t.name.clone(), p.partition), p.error_code);
                    }
                }
                fallback = ErrorCode::UNKNOWN_SERVER_ERROR;
            }
            Ok(_) => fallback = ErrorCode::UNKNOWN_SERVER_ERROR,
            Err(code) => fallback = code,
        }
    }
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = shape
        .into_iter()
        .map(|(name, slots)| {
            let mut topic = TxnOffsetCommitResponseTopic::default();
            topic.partitions = slots
                .into_iter()
                .map(|(index, code)| {
                    let mut p = TxnOffsetCommitResponsePartition::default();
                    p.partition_index = index;
                    p.error_code = code
                        .unwrap_or_else(|| {
                            decided
                                .get(&(name.clone(), index))
                                .copied()
                                .unwrap_or(fallback)
                        })
                        .code();
                    p
                })
                .collect();
            topic.name = TopicName(str_bytes(&name));
            topic
        })
        .collect();
    response
}
