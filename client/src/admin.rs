//! Admin helpers: topics (create, list, describe, delete) and offsets (earliest, latest, by time).
//!
//! Contract:
//! - Inputs: a negotiated [`Connection`] and plain names/numbers.
//! - Outputs: plain structs; every Kafka error code in a response becomes an [`Error`] naming
//!   the topic (and partition) it concerns.
//! - The free functions ([`metadata`], [`list_offsets`]) are shared with the producer and the
//!   consumer, which own their connection; [`Admin`] wraps a connection of its own.
//! - Never: retries, or creates topics implicitly (Metadata is sent with auto-creation off,
//!   except where a caller asks for it).

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, ListOffsetsRequest,
    MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::types::Offset;

use crate::connection::Connection;
use crate::error::{Error, Result};

/// How long the broker may take over an admin request.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// ListOffsets timestamp asking for the log start offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets timestamp asking for the log end offset (the high watermark).
pub const LATEST_TIMESTAMP: i64 = -1;

/// One partition of a topic, as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// Partition index.
    pub partition: i32,
    /// Broker id of the leader (-1 when there is none).
    pub leader: i32,
    /// Kafka error code for this partition (0 when healthy).
    pub error_code: i16,
}

/// One topic, as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    /// Topic name.
    pub name: String,
    /// Kafka error code for this topic (0 when it exists and is healthy).
    pub error_code: i16,
    /// True for internal topics.
    pub is_internal: bool,
    /// Partitions, sorted by index.
    pub partitions: Vec<PartitionMetadata>,
}

impl TopicMetadata {
    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.partitions.len() as i32
    }
}

/// One configuration entry of a topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Config name, e.g. `retention.ms`.
    pub name: String,
    /// Value, `None` when sensitive or unset.
    pub value: Option<String>,
    /// True when the value is the broker's default rather than set on the topic.
    pub is_default: bool,
}

/// A topic's metadata and configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicDescription {
    /// Partitions and leaders.
    pub metadata: TopicMetadata,
    /// Configuration entries, as the broker lists them.
    pub configs: Vec<ConfigEntry>,
}

/// Which offset [`list_offsets`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (next offset to be written).
    Latest,
    /// The first offset whose timestamp is at or after this many ms since the epoch.
    Timestamp(i64),
}

impl OffsetSpec {
    /// The ListOffsets timestamp field for this spec.
    pub fn timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => EARLIEST_TIMESTAMP,
            OffsetSpec::Latest => LATEST_TIMESTAMP,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// One answer of [`list_offsets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffset {
    /// Partition index.
    pub partition: i32,
    /// The offset, or `None` when a timestamp query found no record at or after the time.
    pub offset: Option<Offset>,
    /// The timestamp of the record found (-1 for earliest/latest).
    pub timestamp_ms: i64,
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// The Metadata request for `topics` (all topics when `None`): the one way this crate asks
/// (admin calls, the producer's leaders, the mirror's leaders, the group consumer's topic ids).
pub(crate) fn metadata_request(
    topics: Option<&[&str]>,
    allow_auto_topic_creation: bool,
) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(allow_auto_topic_creation)
}

/// Asks for the metadata of `topics` (all topics when `None`), sorted by name.
pub async fn metadata<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    topics: Option<&[&str]>,
    allow_auto_topic_creation: bool,
) -> Result<Vec<TopicMetadata>> {
    let request = metadata_request(topics, allow_auto_topic_creation);
    let response = conn.request(&request).await?;
    let mut out: Vec<TopicMetadata> = response
        .topics
        .into_iter()
        .map(|t| {
            let mut partitions: Vec<PartitionMetadata> = t
                .partitions
                .into_iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader: p.leader_id.0,
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.partition);
            TopicMetadata {
                name: t.name.map(|n| n.0.to_string()).unwrap_or_default(),
                error_code: t.error_code,
                is_internal: t.is_internal,
                partitions,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Metadata of one topic, failing if the broker reports an error for it.
pub async fn topic_metadata<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    topic: &str,
    allow_auto_topic_creation: bool,
) -> Result<TopicMetadata> {
    let found = metadata(conn, Some(&[topic]), allow_auto_topic_creation).await?;
    let t = found
        .into_iter()
        .find(|t| t.name == topic)
        .ok_or_else(|| Error::UnknownTopicOrPartition(topic.to_string()))?;
    Error::check(t.error_code, || format!("metadata for topic {topic}"))?;
    if t.partitions.is_empty() {
        return Err(Error::UnknownTopicOrPartition(topic.to_string()));
    }
    Ok(t)
}

/// Asks for one offset per (partition, spec) of `topic`, in the order given.
pub async fn list_offsets<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    topic: &str,
    queries: &[(i32, OffsetSpec)],
) -> Result<Vec<PartitionOffset>> {
    list_offsets_at(conn, topic, queries, 0).await
}

/// [`list_offsets`] at an `isolation_level` (0 read_uncommitted, 1 read_committed: `Latest`
/// is then the last stable offset, before the first open transaction).
pub async fn list_offsets_at<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    topic: &str,
    queries: &[(i32, OffsetSpec)],
    isolation_level: i8,
) -> Result<Vec<PartitionOffset>> {
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_isolation_level(isolation_level)
        .with_timeout_ms(ADMIN_TIMEOUT_MS)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                queries
                    .iter()
                    .map(|&(p, spec)| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(spec.timestamp())
                    })
                    .collect(),
            )]);
    let response = conn.request(&request).await?;
    let mut out = Vec::with_capacity(queries.len());
    for &(partition, _) in queries {
        let answer = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "ListOffsets answered nothing for {topic}-{partition}"
                ))
            })?;
        Error::check(answer.error_code, || {
            format!("list offsets of {topic}-{partition}")
        })?;
        out.push(PartitionOffset {
            partition,
            offset: (answer.offset >= 0).then_some(Offset(answer.offset)),
            timestamp_ms: answer.timestamp,
        });
    }
    Ok(out)
}

/// Admin operations over a connection of its own.
#[derive(Debug)]
pub struct Admin<S> {
    conn: Connection<S>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Admin<S> {
    /// Wraps a negotiated connection.
    pub fn new(conn: Connection<S>) -> Self {
        Admin { conn }
    }

    /// The underlying connection.
    pub fn connection(&mut self) -> &mut Connection<S> {
        &mut self.conn
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1) and `configs`.
    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<()> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(ADMIN_TIMEOUT_MS)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )]);
        let response = self.conn.request(&request).await?;
        let result = response
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == topic)
            .ok_or_else(|| Error::Protocol(format!("CreateTopics answered nothing for {topic}")))?;
        let message = result.error_message.as_ref().map(|m| m.to_string());
        Error::check(result.error_code, || match message {
            Some(m) => format!("create topic {topic}: {m}"),
            None => format!("create topic {topic}"),
        })
    }

    /// All topics with their partitions, sorted by name.
    pub async fn list_topics(&mut self) -> Result<Vec<TopicMetadata>> {
        metadata(&mut self.conn, None, false).await
    }

    /// Partitions and configuration of `topic`.
    pub async fn describe_topic(&mut self, topic: &str) -> Result<TopicDescription> {
        let meta = topic_metadata(&mut self.conn, topic, false).await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2) // TOPIC
                .with_resource_name(StrBytes::from_string(topic.to_string()))
                .with_configuration_keys(None),
        ]);
        let response = self.conn.request(&request).await?;
        let mut configs = Vec::new();
        for result in response.results {
            if result.resource_name.as_str() != topic {
                continue;
            }
            Error::check(result.error_code, || format!("describe configs of {topic}"))?;
            for c in result.configs {
                configs.push(ConfigEntry {
                    name: c.name.to_string(),
                    value: c.value.map(|v| v.to_string()),
                    // ConfigSource 5 = DEFAULT_CONFIG (v1+); v0 had is_default instead.
                    is_default: c.config_source == 5,
                });
            }
        }
        configs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(TopicDescription {
            metadata: meta,
            configs,
        })
    }

    /// Deletes `topic`.
    pub async fn delete_topic(&mut self, topic: &str) -> Result<()> {
        let version = self.conn.version_of::<DeleteTopicsRequest>()?;
        let mut request = DeleteTopicsRequest::default().with_timeout_ms(ADMIN_TIMEOUT_MS);
        if version >= 6 {
            request.topics = vec![DeleteTopicState::default().with_name(Some(topic_name(topic)))];
        } else {
            request.topic_names = vec![topic_name(topic)];
        }
        let response = self.conn.request(&request).await?;
        let result = response
            .responses
            .iter()
            .find(|r| r.name.as_ref().map(|n| n.0.as_str()) == Some(topic))
            .ok_or_else(|| Error::Protocol(format!("DeleteTopics answered nothing for {topic}")))?;
        Error::check(result.error_code, || format!("delete topic {topic}"))
    }

    /// Offsets of every partition of `topic` per `spec`, sorted by partition.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        spec: OffsetSpec,
    ) -> Result<Vec<PartitionOffset>> {
        let meta = topic_metadata(&mut self.conn, topic, false).await?;
        let queries: Vec<(i32, OffsetSpec)> = meta
            .partitions
            .iter()
            .map(|p| (p.partition, spec))
            .collect();
        list_offsets(&mut self.conn, topic, &queries).await
    }
}
