//! DeleteRecords (key 21), v0–2: move partitions' log start offsets forward.
//!
//! Contract:
//! - Per partition, on its owner ([`ShardState::delete_records`]): the offset becomes the log
//!   start offset (-1: the high watermark) and the whole segments below it are deleted; the
//!   answer's low watermark is the log start afterwards. The new start is durable before the
//!   answer (I25), so it survives a crash and a restart.
//! - Errors, per partition (low watermark -1): an offset above the high watermark, or below
//!   -1, OFFSET_OUT_OF_RANGE (1); unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION (3);
//!   the internal offsets topic INVALID_TOPIC_EXCEPTION (17), as Kafka refuses it; a failed
//!   checkpoint or deletion KAFKA_STORAGE_ERROR (56).
//! - An offset at or below the current start changes nothing (I9) and answers the start.

use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;

use crate::server::groups::offsets_topic::is_internal;
use crate::server::shard::ShardState;

/// Handles the request: the partitions are deleted from concurrently, each on its owner.
pub async fn handle<B: Backend>(
    state: &Rc<ShardState<B>>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let info = state.shared.topic(name);
        let answers = topic.partitions.iter().map(|p| {
            let info = info.clone();
            async move {
                let (code, low_watermark) = match info {
                    _ if is_internal(name) => (ErrorCode::INVALID_TOPIC_EXCEPTION, -1),
                    Some(info) if (0..info.partition_count()).contains(&p.partition_index) => {
                        if p.offset < -1 {
                            (ErrorCode::OFFSET_OUT_OF_RANGE, -1)
                        } else {
                            state
                                .delete_records(name.to_string(), p.partition_index, p.offset)
                                .await
                        }
                    }
                    _ => (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1),
                };
                let mut result = DeleteRecordsPartitionResult::default();
                result.partition_index = p.partition_index;
                result.error_code = code.code();
                result.low_watermark = low_watermark;
                result
            }
        });
        let mut result = DeleteRecordsTopicResult::default();
        result.name = topic.name.clone();
        result.partitions = futures::future::join_all(answers).await;
        response.topics.push(result);
    }
    response
}
