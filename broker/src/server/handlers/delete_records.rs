//! DeleteRecords (key 21), v0–2: move partitions' log start offsets forward.
//!
//! Contract:
//! - Per partition, on its owner ([`PartitionOps::delete_records`]): the offset becomes the log
//!   start offset (-1: the high watermark) and the whole segments below it are deleted; the
//!   answer's low watermark is the log start afterwards. The new start is durable before the
//!   answer (I25), so it survives a crash and a restart.
//! - Errors, per partition (low watermark -1): an offset above the high watermark, or below
//!   -1, OFFSET_OUT_OF_RANGE (1); unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION (3);
//!   the internal offsets topic INVALID_TOPIC_EXCEPTION (17), as Kafka refuses it; a failed
//!   checkpoint or deletion KAFKA_STORAGE_ERROR (56).
//! - An offset at or below the current start changes nothing (I9) and answers the start.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use minikafka_core::error_code::ErrorCode;

use crate::server::groups::offsets_topic::is_internal;
use crate::server::shard_context::{PartitionOps, TopicCatalogue};

/// Handles the request: the partitions are deleted from concurrently, each on its owner.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps),
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let info = state.topic(name);
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::TopicName;
    use minikafka_core::control_batch::TxnMarker;
    use minikafka_core::wakeup::PartitionSignal;
    use uuid::Uuid;

    use super::*;
    use crate::config::topic::TopicConfig;
    use crate::log::LogConfig;
    use crate::server::groups::offsets_topic::OFFSETS_TOPIC;
    use crate::server::partition_ops::{
        AppendRefusal, Appended, ListedOffset, PartitionDescription, PartitionRead,
    };
    use crate::server::shared::TopicInfo;

    /// A shard that knows some topics and records the DeleteRecords calls that reach a
    /// partition (I150: the handler sees only these two traits).
    struct FakeShard {
        topics: Vec<Arc<TopicInfo>>,
        deleted: RefCell<Vec<(String, i32, i64)>>,
    }

    fn topic(name: &str, partitions: usize) -> Arc<TopicInfo> {
        Arc::new(TopicInfo {
            name: name.to_string(),
            id: Uuid::new_v4(),
            config: TopicConfig::new(BTreeMap::new(), LogConfig::default()),
            signals: (0..partitions)
                .map(|_| Arc::new(PartitionSignal::new()))
                .collect(),
        })
    }

    impl TopicCatalogue for FakeShard {
        fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
            self.topics.iter().find(|t| t.name == name).cloned()
        }
        fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
            self.topics.iter().find(|t| t.id == id).cloned()
        }
        fn all_topics(&self) -> Vec<Arc<TopicInfo>> {
            self.topics.clone()
        }
    }

    impl PartitionOps for FakeShard {
        async fn append(&self, _: String, _: i32, _: Bytes) -> Result<Appended, AppendRefusal> {
            unreachable!("DeleteRecords does not append")
        }
        async fn write_txn_marker(
            &self,
            _: String,
            _: i32,
            _: TxnMarker,
        ) -> Result<i64, ErrorCode> {
            unreachable!("DeleteRecords writes no marker")
        }
        async fn read(&self, _: String, _: i32, _: i64, _: usize, _: bool) -> PartitionRead {
            unreachable!("DeleteRecords does not read")
        }
        async fn list_offset(&self, _: String, _: i32, _: i64, _: bool) -> ListedOffset {
            unreachable!("DeleteRecords lists no offset")
        }
        async fn delete_records(
            &self,
            topic: String,
            partition: i32,
            before: i64,
        ) -> (ErrorCode, i64) {
            self.deleted.borrow_mut().push((topic, partition, before));
            (ErrorCode::NONE, before)
        }
        async fn describe_partition(&self, _: String, _: i32) -> PartitionDescription {
            unreachable!("DeleteRecords describes no partition")
        }
    }

    fn wanted(name: &str, partitions: &[(i32, i64)]) -> DeleteRecordsTopic {
        DeleteRecordsTopic::default()
            .with_name(TopicName(name.to_string().into()))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(p, offset)| {
                        DeleteRecordsPartition::default()
                            .with_partition_index(p)
                            .with_offset(offset)
                    })
                    .collect(),
            )
    }

    #[test]
    fn only_valid_partitions_of_user_topics_reach_their_owner() {
        let shard = FakeShard {
            topics: vec![topic("t", 2), topic(OFFSETS_TOPIC, 1)],
            deleted: RefCell::new(Vec::new()),
        };
        let request = DeleteRecordsRequest::default().with_topics(vec![
            wanted("t", &[(0, 5), (1, -2), (7, 3)]),
            wanted(OFFSETS_TOPIC, &[(0, 1)]),
            wanted("missing", &[(0, 1)]),
        ]);
        let response = futures::executor::block_on(handle(&shard, request));
        let answers: Vec<(String, i32, i16, i64)> = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.error_code,
                        p.low_watermark,
                    )
                })
            })
            .collect();
        let code = |c: ErrorCode| c.code();
        assert_eq!(
            answers,
            vec![
                ("t".into(), 0, code(ErrorCode::NONE), 5),
                ("t".into(), 1, code(ErrorCode::OFFSET_OUT_OF_RANGE), -1),
                (
                    "t".into(),
                    7,
                    code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                    -1
                ),
                (
                    OFFSETS_TOPIC.into(),
                    0,
                    code(ErrorCode::INVALID_TOPIC_EXCEPTION),
                    -1
                ),
                (
                    "missing".into(),
                    0,
                    code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                    -1
                ),
            ]
        );
        assert_eq!(*shard.deleted.borrow(), vec![("t".to_string(), 0, 5)]);
    }
}
