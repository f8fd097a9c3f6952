//! The effective configuration of a topic or of the broker, as Kafka configuration entries
//! (name, value, source, type): what DescribeConfigs answers and CreateTopics returns for a
//! new topic.
//!
//! Contract: pure functions of the [`BrokerConfig`] and a topic's overrides; a topic entry's
//! source is 1 (DYNAMIC_TOPIC_CONFIG) for a topic override, 4 (STATIC_BROKER_CONFIG) when the
//! broker's setting differs from Kafka's default, else 5 (DEFAULT_CONFIG).

use std::collections::BTreeMap;

use super::topics::log_config;
use crate::config::BrokerConfig;
use crate::log::{FlushPolicy, LogConfig};

/// Resource type TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
pub const RESOURCE_BROKER: i8 = 4;
/// Config source DYNAMIC_TOPIC_CONFIG.
pub const SOURCE_TOPIC: i8 = 1;
/// Config source STATIC_BROKER_CONFIG.
pub const SOURCE_STATIC_BROKER: i8 = 4;
/// Config source DEFAULT_CONFIG.
pub const SOURCE_DEFAULT: i8 = 5;

/// Config types (DescribeConfigs v3+).
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;

/// One described setting: name, value, source, type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka key.
    pub name: String,
    /// Effective value.
    pub value: String,
    /// Where it comes from (1, 4 or 5).
    pub source: i8,
    /// Kafka config type.
    pub config_type: i8,
}

fn opt_i64(v: Option<i64>) -> String {
    v.map_or_else(|| "-1".to_string(), |v| v.to_string())
}

fn topic_values(c: &LogConfig) -> Vec<(&'static str, String, i8)> {
    vec![
        ("cleanup.policy", "delete".to_string(), TYPE_LIST),
        ("retention.ms", opt_i64(c.retention_ms), TYPE_LONG),
        (
            "retention.bytes",
            opt_i64(c.retention_bytes.map(|b| b as i64)),
            TYPE_LONG,
        ),
        ("segment.bytes", c.segment_bytes.to_string(), TYPE_INT),
        (
            "segment.ms",
            c.segment_ms.unwrap_or(i64::MAX).to_string(),
            TYPE_LONG,
        ),
        ("max.message.bytes", c.max_batch_bytes.to_string(), TYPE_INT),
        (
            "index.interval.bytes",
            c.index_interval_bytes.to_string(),
            TYPE_INT,
        ),
        ("flush.policy", c.flush.name().to_string(), TYPE_STRING),
    ]
}

/// The effective configuration of a topic with `overrides` on this broker.
pub fn topic_entries(
    config: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let empty = BTreeMap::new();
    let effective = log_config(config, overrides).or_else(|_| log_config(config, &empty));
    let broker_level = log_config(config, &empty);
    let kafka_default = log_config(&BrokerConfig::default(), &empty);
    let (Ok(effective), Ok(broker_level), Ok(kafka_default)) =
        (effective, broker_level, kafka_default)
    else {
        return Vec::new();
    };
    let broker_values = topic_values(&broker_level);
    let default_values = topic_values(&kafka_default);
    let mut out: Vec<ConfigEntry> = topic_values(&effective)
        .into_iter()
        .zip(broker_values.into_iter().zip(default_values))
        .map(
            |((name, value, config_type), ((_, broker, _), (_, default, _)))| {
                let source = if overrides.contains_key(name) {
                    SOURCE_TOPIC
                } else if broker != default {
                    SOURCE_STATIC_BROKER
                } else {
                    SOURCE_DEFAULT
                };
                ConfigEntry {
                    name: name.to_string(),
                    value,
                    source,
                    config_type,
                }
            },
        )
        .collect();
    for (key, value) in overrides {
        if !out.iter().any(|e| e.name == *key) {
            out.push(ConfigEntry {
                name: key.clone(),
                value: value.clone(),
                source: SOURCE_TOPIC,
                config_type: TYPE_STRING,
            });
        }
    }
    out
}

fn flush_setting(f: FlushPolicy) -> (&'static str, String) {
    match f {
        FlushPolicy::None => ("none", "1000".into()),
        FlushPolicy::Fsync => ("fsync", "1000".into()),
        FlushPolicy::Interval { ms } => ("interval", ms.to_string()),
    }
}

fn broker_values(c: &BrokerConfig) -> Vec<(&'static str, String, i8)> {
    let (flush_policy, flush_interval) = flush_setting(c.flush_policy);
    vec![
        (
            "listeners",
            format!("PLAINTEXT://{}", c.listener),
            TYPE_LIST,
        ),
        (
            "advertised.listeners",
            format!("PLAINTEXT://{}:{}", c.advertised_host, c.advertised_port),
            TYPE_LIST,
        ),
        ("log.dirs", c.log_dir.display().to_string(), TYPE_LIST),
        ("log.segment.bytes", c.segment_bytes.to_string(), TYPE_INT),
        ("log.roll.ms", opt_i64(c.segment_ms), TYPE_LONG),
        (
            "log.retention.bytes",
            opt_i64(c.retention_bytes.map(|b| b as i64)),
            TYPE_LONG,
        ),
        ("log.retention.ms", opt_i64(c.retention_ms), TYPE_LONG),
        (
            "log.retention.check.interval.ms",
            c.retention_check_interval_ms.to_string(),
            TYPE_LONG,
        ),
        (
            "log.index.interval.bytes",
            c.index_interval_bytes.to_string(),
            TYPE_INT,
        ),
        ("num.partitions", c.num_partitions.to_string(), TYPE_INT),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            TYPE_BOOLEAN,
        ),
        (
            "message.max.bytes",
            c.message_max_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "socket.request.max.bytes",
            c.socket_request_max_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "connections.max.idle.ms",
            c.connections_max_idle_ms.to_string(),
            TYPE_LONG,
        ),
        ("max.connections", c.max_connections.to_string(), TYPE_INT),
        ("flush.policy", flush_policy.to_string(), TYPE_STRING),
        ("flush.interval.ms", flush_interval, TYPE_LONG),
        ("num.shards", c.num_shards.to_string(), TYPE_INT),
        ("node.id", c.node_id.to_string(), TYPE_INT),
    ]
}

/// The broker's settings.
pub fn broker_entries(config: &BrokerConfig) -> Vec<ConfigEntry> {
    let defaults = broker_values(&BrokerConfig::default());
    broker_values(config)
        .into_iter()
        .zip(defaults)
        .map(
            |((name, value, config_type), (_, default, _))| ConfigEntry {
                name: name.to_string(),
                source: if value == default {
                    SOURCE_DEFAULT
                } else {
                    SOURCE_STATIC_BROKER
                },
                value,
                config_type,
            },
        )
        .collect()
}
