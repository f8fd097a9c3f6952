//! ListOffsets (key 2), v1–10.
//!
//! Contract: per partition, on its owning shard ([`PartitionOps::list_offset`], a cross-shard
//! call): timestamp -2 (earliest) and -4 (earliest local) give the log start offset, -1
//! (latest) the high watermark (the last stable offset under `isolation_level=1`, I69), -3 (MAX_TIMESTAMP) the record holding the largest timestamp
//! (`PartitionLog::max_timestamp_offset`), any other timestamp the first record whose
//! timestamp is at least it (`PartitionLog::offset_for_timestamp`, through the segments' time
//! indexes); no such record: offset -1, timestamp -1, no error. Clients send -3 from v7 on
//! (-4 from v8); like Kafka brokers, the answer does not depend on the request version.
//! Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3). The leader epoch is 0 from v4
//! on (a single node never changes leader). Never reads the log itself. At most
//! [`LOOKUPS_IN_FLIGHT`] partitions are looked up at once (memory does not grow with the
//! partitions a request names beyond the response itself).

use futures::stream::StreamExt;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::server::shard_context::{PartitionOps, TopicCatalogue};
use minikafka_core::error_code::ErrorCode;

/// Partition lookups of one request running at once.
const LOOKUPS_IN_FLIGHT: usize = 64;

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps),
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // Kafka's isolation_level (v2+): latest is the LSO under read_committed (I69).
    let read_committed = version >= 2 && request.isolation_level == 1;
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut lookups = Vec::new();
    for (topic_index, wanted) in request.topics.into_iter().enumerate() {
        let info = state.topic(wanted.name.0.as_str());
        let mut topic = ListOffsetsTopicResponse::default();
        topic.name = wanted.name.clone();
        for (slot, partition) in wanted.partitions.into_iter().enumerate() {
            let mut entry = ListOffsetsPartitionResponse::default();
            entry.partition_index = partition.partition_index;
            entry.timestamp = -1;
            entry.offset = -1;
            match &info {
                Some(info)
                    if partition.partition_index >= 0
                        && partition.partition_index < info.partition_count() =>
                {
                    if version >= 4 {
                        entry.leader_epoch = 0;
                    }
                    let (p, ts) = (partition.partition_index, partition.timestamp);
                    lookups.push((topic_index, slot, info.name.clone(), p, ts));
                }
                _ => entry.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
            }
            topic.partitions.push(entry);
        }
        topics.push(topic);
    }
    // At most LOOKUPS_IN_FLIGHT lookup futures exist at once: each is a whole cross-shard
    // call's state (kilobytes), and creating them all up front for a request naming 4,000
    // partitions cost ~10 KB of peak RSS per partition (38 MB).
    let answers: Vec<_> = futures::stream::iter(lookups)
        .map(|(topic_index, slot, name, p, ts)| async move {
            (
                topic_index,
                slot,
                state.list_offset(name, p, ts, read_committed).await,
            )
        })
        .buffer_unordered(LOOKUPS_IN_FLIGHT)
        .collect()
        .await;
    for (topic_index, slot, (code, offset, timestamp)) in answers {
        let entry = &mut topics[topic_index].partitions[slot];
        entry.error_code = code.code();
        entry.offset = offset;
        entry.timestamp = timestamp;
    }
    let mut response = ListOffsetsResponse::default();
    response.topics = topics;
    response
}
