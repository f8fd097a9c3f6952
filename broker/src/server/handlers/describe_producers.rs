//! DescribeProducers (key 61), v0: the live idempotent producers of each partition.
//!
//! Contract:
//! - Per requested partition, read on its owner: every producer whose state has not expired
//!   (`producer.id.expiration.ms`), least recently appended first, with its newest epoch,
//!   the last sequence and max timestamp of its last batch, the coordinator epoch of its last
//!   marker here (-1: none) and the first offset of its ongoing transaction
//!   (`current_txn_start_offset`, -1: none).
//! - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3) with a message naming it.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse};
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;
use crate::server::partition_ops::ProducerDescription;
use crate::server::shard_context::{PartitionOps, TopicCatalogue};

fn producer_state(p: &ProducerDescription) -> ProducerState {
    let mut out = ProducerState::default();
    out.producer_id = p.producer_id.into();
    out.producer_epoch = i32::from(p.epoch);
    out.last_sequence = p.last_sequence;
    out.last_timestamp = p.last_timestamp_ms;
    out.coordinator_epoch = p.coordinator_epoch;
    out.current_txn_start_offset = p.current_txn_start_offset;
    out
}

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps),
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut lookups = Vec::new();
    for (topic_index, wanted) in request.topics.into_iter().enumerate() {
        let name = wanted.name.0.as_str().to_string();
        let info = state.topic(&name);
        let mut topic = TopicResponse::default();
        topic.name = wanted.name.clone();
        for (slot, partition) in wanted.partition_indexes.into_iter().enumerate() {
            let mut entry = PartitionResponse::default();
            entry.partition_index = partition;
            match &info {
                Some(info) if (0..info.partition_count()).contains(&partition) => {
                    let name = info.name.clone();
                    lookups.push(async move {
                        (
                            topic_index,
                            slot,
                            state.describe_partition(name, partition).await,
                        )
                    });
                }
                _ => {
                    entry.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();
                    entry.error_message = Some(str_bytes(&format!(
                        "{name}-{partition} does not exist on this broker"
                    )));
                }
            }
            topic.partitions.push(entry);
        }
        topics.push(topic);
    }
    for (topic_index, slot, described) in futures::future::join_all(lookups).await {
        let entry = &mut topics[topic_index].partitions[slot];
        entry.error_code = described.error_code.code();
        entry.active_producers = described.producers.iter().map(producer_state).collect();
    }
    let mut response = DescribeProducersResponse::default();
    response.topics = topics;
    response
}
