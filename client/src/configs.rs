//! Configuration and record administration on [`Admin`]: describe and alter the
//! configuration of a topic or of the broker (IncrementalAlterConfigs: SET and DELETE), and
//! delete records below an offset (DeleteRecords).
//!
//! Contract:
//! - Inputs: names, [`ConfigChange`]s and offsets; outputs: plain structs.
//! - Every Kafka error code in a response becomes an [`Error`] naming the resource, with the
//!   broker's message when it sent one (which names the offending key).
//! - Never: retries, or falls back to the legacy AlterConfigs (which would drop every setting
//!   not named).

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::types::Offset;

use crate::admin::Admin;
use crate::error::{Error, Result};

/// Resource type TOPIC.
const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
const RESOURCE_BROKER: i8 = 4;
/// How long the broker may take over DeleteRecords.
const DELETE_TIMEOUT_MS: i32 = 30_000;

/// A configured resource: a topic, or the broker (by node id; `None` = the cluster-wide
/// default, Kafka's `--entity-default`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigResource {
    /// A topic, by name.
    Topic(String),
    /// A broker by node id, or the cluster-wide default.
    Broker(Option<i32>),
}

impl ConfigResource {
    fn wire(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(name) => (RESOURCE_TOPIC, name.clone()),
            ConfigResource::Broker(Some(id)) => (RESOURCE_BROKER, id.to_string()),
            ConfigResource::Broker(None) => (RESOURCE_BROKER, String::new()),
        }
    }

    fn describe(&self) -> String {
        match self {
            ConfigResource::Topic(name) => format!("topic {name}"),
            ConfigResource::Broker(Some(id)) => format!("broker {id}"),
            ConfigResource::Broker(None) => "the cluster default".into(),
        }
    }
}

/// One change of a setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigChange {
    /// Set `key` to a value.
    Set(String, String),
    /// Remove `key`'s setting (back to the default it falls back on).
    Delete(String),
}

/// Where a described value comes from (Kafka's ConfigSource).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic.
    Topic,
    /// Set at run time for this broker.
    DynamicBroker,
    /// Set at run time as the cluster-wide default.
    DynamicDefaultBroker,
    /// From the broker's properties file or command line.
    StaticBroker,
    /// Nobody set it.
    Default,
    /// Another code.
    Other(i8),
}

impl ConfigSource {
    fn from_code(code: i8) -> ConfigSource {
        match code {
            1 => ConfigSource::Topic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            other => ConfigSource::Other(other),
        }
    }

    /// Kafka's name of the source, as `kafka-configs --describe` prints it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Topic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::Other(_) => "UNKNOWN",
        }
    }
}

/// One described setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedConfig {
    /// The setting's name.
    pub name: String,
    /// Its value (`None` when sensitive).
    pub value: Option<String>,
    /// Where the value comes from.
    pub source: ConfigSource,
    /// Whether AlterConfigs refuses to change it.
    pub read_only: bool,
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn check_with_message(code: i16, message: Option<&StrBytes>, what: String) -> Result<()> {
    Error::check(code, || match message {
        Some(m) => format!("{what}: {m}"),
        None => what,
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin> Admin<S> {
    /// Every setting of `resource` with its value and source, sorted by name.
    pub async fn describe_configs(
        &mut self,
        resource: &ConfigResource,
    ) -> Result<Vec<DescribedConfig>> {
        let (resource_type, name) = resource.wire();
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(str_bytes(&name))
                .with_configuration_keys(None),
        ]);
        let response = self.connection().request(&request).await?;
        let result = response
            .results
            .into_iter()
            .find(|r| r.resource_type == resource_type && r.resource_name.as_str() == name)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "DescribeConfigs answered nothing for {}",
                    resource.describe()
                ))
            })?;
        check_with_message(
            result.error_code,
            result.error_message.as_ref(),
            format!("describe configs of {}", resource.describe()),
        )?;
        let mut out: Vec<DescribedConfig> = result
            .configs
            .into_iter()
            .map(|c| DescribedConfig {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                source: ConfigSource::from_code(c.config_source),
                read_only: c.read_only,
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Applies `changes` to `resource` (IncrementalAlterConfigs); with `validate_only` the
    /// broker checks them and changes nothing.
    pub async fn alter_configs(
        &mut self,
        resource: &ConfigResource,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<()> {
        let (resource_type, name) = resource.wire();
        let configs = changes
            .iter()
            .map(|change| match change {
                ConfigChange::Set(key, value) => AlterableConfig::default()
                    .with_name(str_bytes(key))
                    .with_config_operation(0)
                    .with_value(Some(str_bytes(value))),
                ConfigChange::Delete(key) => AlterableConfig::default()
                    .with_name(str_bytes(key))
                    .with_config_operation(1)
                    .with_value(None),
            })
            .collect();
        let request = IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(str_bytes(&name))
                .with_configs(configs)]);
        let response = self.connection().request(&request).await?;
        let result = response
            .responses
            .iter()
            .find(|r| r.resource_type == resource_type && r.resource_name.as_str() == name)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "IncrementalAlterConfigs answered nothing for {}",
                    resource.describe()
                ))
            })?;
        check_with_message(
            result.error_code,
            result.error_message.as_ref(),
            format!("alter configs of {}", resource.describe()),
        )
    }

    /// Deletes the records of `topic`/`partition` below `before` (DeleteRecords; `None`: all
    /// of them, up to the high watermark); the log start offset afterwards.
    pub async fn delete_records(
        &mut self,
        topic: &str,
        partition: i32,
        before: Option<Offset>,
    ) -> Result<Offset> {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(DELETE_TIMEOUT_MS)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(before.map_or(-1, |o| o.0))])]);
        let response = self.connection().request(&request).await?;
        let result = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "DeleteRecords answered nothing for {topic}-{partition}"
                ))
            })?;
        Error::check(result.error_code, || {
            format!("delete records of {topic}-{partition}")
        })?;
        Ok(Offset(result.low_watermark))
    }
}
