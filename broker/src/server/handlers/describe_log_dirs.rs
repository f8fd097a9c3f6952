//! DescribeLogDirs (key 35), v1–4: the one data directory and the size of every partition in
//! it.
//!
//! Contract:
//! - One result: the data directory (`log.dirs`, made absolute against the working
//!   directory), error NONE, with every requested partition this broker has: all topics and
//!   partitions (internal ones included, as Kafka lists them) when `topics` is null, else the
//!   named ones; named topics or partitions that do not exist are left out, as a Kafka broker
//!   leaves out partitions it does not host.
//! - Per partition: `partition_size` = the bytes of its segment files, read on the
//!   partition's owner; `offset_lag` 0 (a single node has no replica to lag);
//!   `is_future_key` false. A partition whose owner cannot answer is left out.
//! - v4's `total_bytes` / `usable_bytes`: -1 (Kafka's UNKNOWN_VOLUME_BYTES): the backends
//!   have no file-system statistics call, and a guessed number would mislead an operator.
//! - v3+ top-level error: NONE.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::str_bytes;
use crate::server::shard_context::{BrokerIdentity, PartitionOps, TopicCatalogue};

/// Kafka's "volume size not known" value for `total_bytes` and `usable_bytes`.
const UNKNOWN_VOLUME_BYTES: i64 = -1;

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps + BrokerIdentity),
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // (topic name, partitions wanted), in request order; every existing partition when null.
    let wanted: Vec<(String, Vec<i32>)> = match request.topics {
        None => state
            .all_topics()
            .iter()
            .map(|info| (info.name.clone(), (0..info.partition_count()).collect()))
            .collect(),
        Some(topics) => topics
            .into_iter()
            .filter_map(|t| {
                let info = state.topic(t.topic.0.as_str())?;
                let count = info.partition_count();
                let mut partitions: Vec<i32> = t
                    .partitions
                    .into_iter()
                    .filter(|p| (0..count).contains(p))
                    .collect();
                partitions.sort_unstable();
                partitions.dedup();
                Some((info.name.clone(), partitions))
            })
            .collect(),
    };
    let mut lookups = Vec::new();
    for (topic_index, (name, partitions)) in wanted.iter().enumerate() {
        for &partition in partitions {
            let name = name.clone();
            lookups.push(async move {
                let described = state.describe_partition(name, partition).await;
                (topic_index, partition, described)
            });
        }
    }
    let mut topics: Vec<DescribeLogDirsTopic> = wanted
        .iter()
        .map(|(name, _)| {
            let mut topic = DescribeLogDirsTopic::default();
            topic.name = TopicName(str_bytes(name));
            topic
        })
        .collect();
    for (topic_index, partition, described) in futures::future::join_all(lookups).await {
        if described.error_code.is_error() {
            continue;
        }
        let mut entry = DescribeLogDirsPartition::default();
        entry.partition_index = partition;
        entry.partition_size = i64::try_from(described.size_bytes).unwrap_or(i64::MAX);
        entry.offset_lag = 0;
        entry.is_future_key = false;
        topics[topic_index].partitions.push(entry);
    }
    topics.retain(|t| !t.partitions.is_empty());

    let configured = state.log_dir();
    let log_dir = std::path::absolute(configured).unwrap_or_else(|_| configured.to_path_buf());
    let mut result = DescribeLogDirsResult::default();
    result.log_dir = str_bytes(&log_dir.display().to_string());
    result.topics = topics;
    result.total_bytes = UNKNOWN_VOLUME_BYTES;
    result.usable_bytes = UNKNOWN_VOLUME_BYTES;
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![result];
    response
}
