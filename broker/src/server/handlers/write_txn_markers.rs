//! WriteTxnMarkers (key 27), v1 (Kafka 4.x's only version): the transaction coordinator's
//! request to end a producer's transaction in each partition with a COMMIT or ABORT marker.
//!
//! Contract:
//! - Every (marker, partition) pair is written on the partition's owner through
//!   [`PartitionOps::write_txn_marker`] — the same path the in-process coordinator uses — all
//!   concurrently; each answers once its marker is durable under the partition's flush policy
//!   (I8), with NONE or the log's code: INVALID_PRODUCER_EPOCH (an epoch older than the
//!   producer's), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch),
//!   KAFKA_STORAGE_ERROR. An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION.
//! - The answer lists every marker, topic and partition of the request, in request order.
//! - Kafka requires CLUSTER_ACTION on the cluster for this API; this broker has no
//!   authorizer on it yet (the ACL branch decides), so any client may call it, as it may
//!   call every other API today.
//! - A marker for a `__consumer_offsets` partition is written like any other; completing
//!   the transaction's pending offsets in the group coordinator is the offsets branch's hook.

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use minikafka_core::control_batch::{ControlType, TxnMarker};
use minikafka_core::error_code::ErrorCode;

use crate::server::shard_context::{PartitionOps, TopicCatalogue};

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps),
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let mut markers = Vec::with_capacity(request.markers.len());
    let mut writes = Vec::new();
    for (m, wanted) in request.markers.iter().enumerate() {
        let marker = TxnMarker {
            producer_id: wanted.producer_id.0,
            producer_epoch: wanted.producer_epoch,
            coordinator_epoch: wanted.coordinator_epoch,
            control_type: if wanted.transaction_result {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
        };
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = wanted.producer_id;
        for (t, topic) in wanted.topics.iter().enumerate() {
            let name = topic.name.0.as_str();
            let info = state.topic(name);
            let mut topic_result = WritableTxnMarkerTopicResult::default();
            topic_result.name = topic.name.clone();
            for (p, &partition) in topic.partition_indexes.iter().enumerate() {
                let mut entry = WritableTxnMarkerPartitionResult::default();
                entry.partition_index = partition;
                match &info {
                    Some(info) if (0..info.partition_count()).contains(&partition) => {
                        let name = info.name.clone();
                        writes.push(async move {
                            let written = state.write_txn_marker(name, partition, marker).await;
                            ((m, t, p), written.err().unwrap_or(ErrorCode::NONE))
                        });
                    }
                    _ => entry.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
                }
                topic_result.partitions.push(entry);
            }
            result.topics.push(topic_result);
        }
        markers.push(result);
    }
    for ((m, t, p), code) in futures::future::join_all(writes).await {
        markers[m].topics[t].partitions[p].error_code = code.code();
    }
    let mut response = WriteTxnMarkersResponse::default();
    response.markers = markers;
    response
}
