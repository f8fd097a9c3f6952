//! DescribeTopicPartitions (key 75), v0 (KIP-966): topic metadata with cursor pagination.
//!
//! Contract:
//! - Topics: the named ones, or every topic when the list is empty; sorted by name, as Kafka
//!   pages them. With a cursor, topics named before the cursor's topic are skipped and the
//!   cursor's topic starts at its partition; a cursor naming a topic the request does not
//!   list, or a negative partition, is INVALID_REQUEST (42) on every named topic.
//! - At most `response_partition_limit` partitions per response, taken within
//!   1..=[`MAX_PARTITIONS_PER_RESPONSE`] (Kafka's `max.request.partition.size.limit`
//!   default; at least 1 so a client paging with 0 still gets somewhere). When partitions
//!   are left, `next_cursor` names the first one not returned (the next topic's partition 0
//!   when a topic ended exactly at the limit); when none are left it is null.
//! - Per partition, as Metadata says: leader = replicas = ISR = this node, leader epoch 0;
//!   eligible leader replicas and last known ELR empty; no offline replicas. Unknown topic:
//!   UNKNOWN_TOPIC_OR_PARTITION (3) with no partitions (it takes none of the limit).
//! - Each described topic, unknown ones too, carries every topic operation as its authorized
//!   operations (KIP-430: the request has no flag, and Kafka without an authorizer grants all).
//! - Never reads a log: the answer comes from the topic registry alone.

use std::ops::Range;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use minikafka_core::authorized_operations::{self, ResourceType};
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;
use crate::log::LEADER_EPOCH;
use crate::server::groups::offsets_topic;
use crate::server::shard_context::{BrokerIdentity, TopicCatalogue};

/// Most partitions one response carries (Kafka's `max.request.partition.size.limit`).
pub const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

/// One topic of a page: the partitions of it the response carries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PageTopic {
    /// Index into the sorted topic list given to [`plan_page`].
    topic: usize,
    /// The partitions to describe (empty for an unknown topic).
    partitions: Range<i32>,
}

/// Where the next page starts: a topic name and a partition.
type PageCursor = (String, i32);

/// Plans one page over `topics` (sorted by name; `None` = unknown topic, else its partition
/// count) from `cursor`, carrying at most `limit` (>= 1) partitions. Returns the topics of
/// the page and the cursor of the next one.
fn plan_page(
    topics: &[(String, Option<i32>)],
    cursor: Option<&PageCursor>,
    limit: i32,
) -> (Vec<PageTopic>, Option<PageCursor>) {
    let mut page = Vec::new();
    let mut remaining = limit;
    for (index, (name, count)) in topics.iter().enumerate() {
        let start = match cursor {
            Some((cursor_topic, _)) if name < cursor_topic => continue,
            Some((cursor_topic, partition)) if name == cursor_topic => *partition,
            _ => 0,
        };
        let count = count.unwrap_or(0);
        let start = start.min(count);
        if remaining == 0 {
            // The previous topic ended exactly at the limit: the next page starts here
            // (only if this topic has anything left to describe).
            if start < count {
                return (page, Some((name.clone(), start)));
            }
            page.push(PageTopic {
                topic: index,
                partitions: start..start,
            });
            continue;
        }
        let end = count.min(start.saturating_add(remaining));
        remaining -= end - start;
        page.push(PageTopic {
            topic: index,
            partitions: start..end,
        });
        if end < count {
            return (page, Some((name.clone(), end)));
        }
    }
    (page, None)
}

fn partition_entry(node_id: i32, index: i32) -> DescribeTopicPartitionsResponsePartition {
    let mut p = DescribeTopicPartitionsResponsePartition::default();
    p.partition_index = index;
    p.leader_id = node_id.into();
    p.leader_epoch = LEADER_EPOCH;
    p.replica_nodes = vec![node_id.into()];
    p.isr_nodes = vec![node_id.into()];
    p.eligible_leader_replicas = Some(Vec::new());
    p.last_known_elr = Some(Vec::new());
    p.offline_replicas = Vec::new();
    p
}

fn error_topic(name: &str, code: ErrorCode) -> DescribeTopicPartitionsResponseTopic {
    let mut topic = DescribeTopicPartitionsResponseTopic::default();
    topic.error_code = code.code();
    topic.name = Some(TopicName(str_bytes(name)));
    topic
}

/// Handles the request.
pub fn handle(
    state: &(impl TopicCatalogue + BrokerIdentity),
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let node_id = state.node_id();
    let mut names: Vec<String> = if request.topics.is_empty() {
        state.all_topics().iter().map(|t| t.name.clone()).collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.0.as_str().to_string())
            .collect()
    };
    names.sort_unstable();
    names.dedup();
    let cursor: Option<PageCursor> = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.as_str().to_string(), c.partition_index));
    let mut response = DescribeTopicPartitionsResponse::default();
    if let Some((topic, partition)) = &cursor {
        let listed = request.topics.is_empty() || names.binary_search(topic).is_ok();
        if !listed || *partition < 0 {
            response.topics = names
                .iter()
                .filter(|_| !request.topics.is_empty())
                .map(|n| error_topic(n, ErrorCode::INVALID_REQUEST))
                .collect();
            return response;
        }
    }
    let infos: Vec<_> = names.iter().map(|n| state.topic(n)).collect();
    let counts: Vec<(String, Option<i32>)> = names
        .iter()
        .zip(&infos)
        .map(|(n, info)| (n.clone(), info.as_ref().map(|i| i.partition_count())))
        .collect();
    let limit = request
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE);
    let (page, next) = plan_page(&counts, cursor.as_ref(), limit);
    for PageTopic { topic, partitions } in page {
        let name = &names[topic];
        let Some(info) = &infos[topic] else {
            // Kafka answers the operations of every topic it describes, unknown ones too.
            let mut unknown = error_topic(name, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
            unknown.topic_authorized_operations =
                authorized_operations::all_operations(ResourceType::Topic);
            response.topics.push(unknown);
            continue;
        };
        let mut entry = DescribeTopicPartitionsResponseTopic::default();
        entry.name = Some(TopicName(str_bytes(name)));
        entry.topic_id = info.id;
        entry.is_internal = offsets_topic::is_internal(name);
        entry.partitions = partitions.map(|p| partition_entry(node_id, p)).collect();
        // The request has no flag: Kafka always answers a described topic's operations (KIP-430).
        entry.topic_authorized_operations =
            authorized_operations::all_operations(ResourceType::Topic);
        response.topics.push(entry);
    }
    response.next_cursor = next.map(|(topic, partition)| {
        let mut c = Cursor::default();
        c.topic_name = TopicName(str_bytes(&topic));
        c.partition_index = partition;
        c
    });
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(list: &[(&str, Option<i32>)]) -> Vec<(String, Option<i32>)> {
        list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    fn ranges(page: &[PageTopic]) -> Vec<(usize, Range<i32>)> {
        page.iter()
            .map(|t| (t.topic, t.partitions.clone()))
            .collect()
    }

    #[test]
    fn a_page_stops_mid_topic_and_the_cursor_names_the_next_partition() {
        let t = topics(&[("a", Some(3)), ("b", Some(4))]);
        let (page, next) = plan_page(&t, None, 5);
        assert_eq!(ranges(&page), vec![(0, 0..3), (1, 0..2)]);
        assert_eq!(next, Some(("b".to_string(), 2)));
        let (page, next) = plan_page(&t, next.as_ref(), 5);
        assert_eq!(ranges(&page), vec![(1, 2..4)]);
        assert_eq!(next, None);
    }

    #[test]
    fn a_topic_ending_at_the_limit_points_the_cursor_at_the_next_topic() {
        let t = topics(&[("a", Some(2)), ("b", Some(1))]);
        let (page, next) = plan_page(&t, None, 2);
        assert_eq!(ranges(&page), vec![(0, 0..2)]);
        assert_eq!(next, Some(("b".to_string(), 0)));
        let (_, next) = plan_page(&t, None, 3);
        assert_eq!(next, None);
    }

    #[test]
    fn unknown_topics_take_none_of_the_limit() {
        let t = topics(&[("a", None), ("b", Some(1)), ("c", None)]);
        let (page, next) = plan_page(&t, None, 1);
        assert_eq!(ranges(&page), vec![(0, 0..0), (1, 0..1), (2, 0..0)]);
        assert_eq!(next, None);
    }

    /// Paging with every limit visits every partition exactly once, in order.
    #[test]
    fn paging_with_any_limit_covers_every_partition_once() {
        let t = topics(&[
            ("a", Some(3)),
            ("b", Some(0)),
            ("c", Some(5)),
            ("d", Some(1)),
        ]);
        for limit in 1..=10 {
            let mut seen = Vec::new();
            let mut cursor = None;
            for _ in 0..100 {
                let (page, next) = plan_page(&t, cursor.as_ref(), limit);
                let carried: i32 = page.iter().map(|p| p.partitions.len() as i32).sum();
                assert!(carried <= limit);
                for p in &page {
                    seen.extend(p.partitions.clone().map(|i| (p.topic, i)));
                }
                cursor = next;
                if cursor.is_none() {
                    break;
                }
            }
            let want: Vec<(usize, i32)> = t
                .iter()
                .enumerate()
                .flat_map(|(i, (_, c))| (0..c.unwrap_or(0)).map(move |p| (i, p)))
                .collect();
            assert_eq!(seen, want, "limit {limit}");
        }
    }
}
