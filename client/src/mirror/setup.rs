//! Topics on the target: the mirror's progress topic, and each mirrored topic created with the
//! source's partition count and the topic configs the target accepts (I83).

use super::Stream as TcpStream;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::admin::{self, Admin, TopicMetadata};
use crate::configs::{ConfigChange, ConfigResource, ConfigSource};
use crate::error::{Error, Result};

/// How long the target may take over a CreateTopics.
const CREATE_TIMEOUT_MS: i32 = 30_000;

/// What topic setup did, for the report.
#[derive(Clone, Debug, Default)]
pub struct SetupReport {
    /// Topics created on the target.
    pub topics_created: Vec<String>,
    /// Topic configs the target refused.
    pub refused_configs: Vec<RefusedConfig>,
    /// Topics that cannot be mirrored, and why.
    pub problems: Vec<String>,
}

/// A config the target refused, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedConfig {
    /// Topic.
    pub topic: String,
    /// Config name.
    pub name: String,
    /// The source's value.
    pub value: String,
    /// The target's answer.
    pub reason: String,
}

/// Sends CreateTopics for one topic; `Ok(false)` when it already exists.
pub async fn create_topic(
    admin: &mut Admin<TcpStream>,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(String, String)],
) -> Result<bool> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(CREATE_TIMEOUT_MS)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
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
    let response = admin.connection().request(&request).await?;
    let result = response
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == topic)
        .ok_or_else(|| Error::Protocol(format!("CreateTopics answered nothing for {topic}")))?;
    if result.error_code == ResponseError::TopicAlreadyExists.code() {
        return Ok(false);
    }
    let message = result.error_message.as_ref().map(|m| m.to_string());
    Error::check(result.error_code, || match message {
        Some(m) => format!("create topic {topic} on the target: {m}"),
        None => format!("create topic {topic} on the target"),
    })?;
    Ok(true)
}

/// Creates the progress topic (one partition, compacted) unless it exists.
pub async fn ensure_progress_topic(
    target: &mut Admin<TcpStream>,
    topic: &str,
    replication_factor: i16,
) -> Result<()> {
    let configs = [("cleanup.policy".to_string(), "compact".to_string())];
    create_topic(target, topic, 1, replication_factor, &configs).await?;
    Ok(())
}

/// Makes `topic` ready on the target: created when missing (partition count and the source's
/// topic-level configs, each refused one reported), checked when present. `Ok(false)`: it
/// cannot be mirrored (partition counts differ), said in the report.
pub async fn ensure_topic(
    source: &mut Admin<TcpStream>,
    target: &mut Admin<TcpStream>,
    topic: &TopicMetadata,
    replication_factor: i16,
    report: &mut SetupReport,
) -> Result<bool> {
    let name = topic.name.as_str();
    let existing = admin::metadata(target.connection(), Some(&[name]), false).await?;
    if let Some(found) = existing
        .iter()
        .find(|t| t.name == name && t.error_code == 0 && !t.partitions.is_empty())
    {
        if found.partition_count() != topic.partition_count() {
            report.problems.push(format!(
                "topic {name}: {} partitions on the source, {} on the target: not mirrored",
                topic.partition_count(),
                found.partition_count()
            ));
            return Ok(false);
        }
        return Ok(true);
    }
    // Only what was set on the topic: defaults are the target's business.
    let configs: Vec<(String, String)> = source
        .describe_configs(&ConfigResource::Topic(name.to_string()))
        .await?
        .into_iter()
        .filter(|c| c.source == ConfigSource::Topic && !c.read_only)
        .filter_map(|c| c.value.map(|v| (c.name, v)))
        .collect();
    let partitions = topic.partition_count();
    match create_topic(target, name, partitions, replication_factor, &configs).await {
        Ok(created) => {
            if created {
                report.topics_created.push(name.to_string());
            }
            return Ok(true);
        }
        Err(err) if configs.is_empty() => return Err(err),
        Err(_) => {}
    }
    // Some config was refused: create bare, then set each config alone so that every refusal
    // is named.
    if create_topic(target, name, partitions, replication_factor, &[]).await? {
        report.topics_created.push(name.to_string());
    }
    let resource = ConfigResource::Topic(name.to_string());
    for (key, value) in configs {
        let change = [ConfigChange::Set(key.clone(), value.clone())];
        if let Err(err) = target.alter_configs(&resource, &change, false).await {
            // Said at once too: a continuous run prints its report only when it ends.
            eprintln!("mk mirror: config refused by the target: {name} {key}={value}: {err}");
            report.refused_configs.push(RefusedConfig {
                topic: name.to_string(),
                name: key,
                value,
                reason: err.to_string(),
            });
        }
    }
    Ok(true)
}
