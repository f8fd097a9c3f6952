//! The effective configuration of a topic or of the broker, as Kafka configuration entries
//! (name, value, source, type): what DescribeConfigs answers and CreateTopics returns for a
//! new topic.
//!
//! Contract: pure functions of the effective [`BrokerConfig`] (static with the dynamic
//! settings laid over it), the [`DynamicBrokerConfig`] and a topic's overrides. A topic
//! entry's source is 1 (DYNAMIC_TOPIC_CONFIG, Kafka's "topic config") for a topic override;
//! else that of the broker setting it falls back on: 2 (DYNAMIC_BROKER_CONFIG) when set
//! dynamically for this broker, 3 (DYNAMIC_DEFAULT_BROKER_CONFIG) when set as the dynamic
//! cluster default, 4 (STATIC_BROKER_CONFIG) when given in the properties file or as an
//! override, else 5 (DEFAULT_CONFIG); a broker entry's source follows the same rule, and it
//! is read-only unless it is one of the dynamic settings. A stored override the broker accepts but does not act on
//! ([`TopicConfigStatus::NotApplicable`]) carries that reason as its documentation.

use std::collections::BTreeMap;

use super::dynamic_config::{DynamicBrokerConfig, Scope, DYNAMIC_BROKER_KEYS};
use super::topics::log_config;
use crate::config::BrokerConfig;
use crate::log::config::{topic_config_status, TopicConfigStatus};
use crate::log::{FlushPolicy, LogConfig};

/// Resource type TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
pub const RESOURCE_BROKER: i8 = 4;
/// Config source DYNAMIC_TOPIC_CONFIG.
pub const SOURCE_TOPIC: i8 = 1;
/// Config source DYNAMIC_BROKER_CONFIG (set at run time for this broker).
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
/// Config source DYNAMIC_DEFAULT_BROKER_CONFIG (set at run time as the cluster default).
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
/// Config source STATIC_BROKER_CONFIG.
pub const SOURCE_STATIC_BROKER: i8 = 4;
/// Config source DEFAULT_CONFIG.
pub const SOURCE_DEFAULT: i8 = 5;

/// Config types (DescribeConfigs v3+).
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

/// One described setting: name, value, source, type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// Kafka key.
    pub name: String,
    /// Effective value.
    pub value: String,
    /// Where it comes from (1 to 5).
    pub source: i8,
    /// Whether AlterConfigs refuses to change it (a broker setting only a restart changes).
    pub read_only: bool,
    /// Kafka config type.
    pub config_type: i8,
    /// Why the setting has no effect here, for one that is accepted but not applicable.
    pub documentation: Option<String>,
}

fn opt_i64(v: Option<i64>) -> String {
    v.map_or_else(|| "-1".to_string(), |v| v.to_string())
}

fn topic_values(c: &LogConfig) -> Vec<(&'static str, String, i8)> {
    vec![
        (
            "cleanup.policy",
            c.cleanup_policy.as_str().to_string(),
            TYPE_LIST,
        ),
        (
            "min.cleanable.dirty.ratio",
            minikafka_core::compaction::policy::format_ratio_ppm(
                c.compaction.min_cleanable_dirty_ratio_ppm,
            ),
            TYPE_DOUBLE,
        ),
        (
            "min.compaction.lag.ms",
            c.compaction.min_compaction_lag_ms.to_string(),
            TYPE_LONG,
        ),
        (
            "max.compaction.lag.ms",
            c.compaction.max_compaction_lag_ms.to_string(),
            TYPE_LONG,
        ),
        (
            "delete.retention.ms",
            c.compaction.delete_retention_ms.to_string(),
            TYPE_LONG,
        ),
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
        ("compression.type", "producer".to_string(), TYPE_STRING),
        (
            "message.timestamp.type",
            c.timestamp_type.name().to_string(),
            TYPE_STRING,
        ),
    ]
}

/// The broker settings (any spelling) a topic-level setting falls back on.
fn broker_synonyms(topic_key: &str) -> &'static [&'static str] {
    match topic_key {
        "segment.bytes" => &["log.segment.bytes"],
        "segment.ms" => &["log.roll.ms", "log.roll.hours"],
        "retention.bytes" => &["log.retention.bytes"],
        "retention.ms" => &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
        "max.message.bytes" => &["message.max.bytes"],
        "index.interval.bytes" => &["log.index.interval.bytes"],
        "flush.policy" => &["flush.policy", "flush.interval.ms"],
        "cleanup.policy" => &["log.cleanup.policy"],
        "min.cleanable.dirty.ratio" => &["log.cleaner.min.cleanable.ratio"],
        "min.compaction.lag.ms" => &["log.cleaner.min.compaction.lag.ms"],
        "max.compaction.lag.ms" => &["log.cleaner.max.compaction.lag.ms"],
        "delete.retention.ms" => &["log.cleaner.delete.retention.ms"],
        "message.timestamp.type" => &["log.message.timestamp.type"],
        _ => &[],
    }
}

/// The spellings a broker entry may have been given as.
fn broker_key_spellings(name: &str) -> &'static [&'static str] {
    match name {
        "log.dirs" => &["log.dirs", "log.dir"],
        "log.roll.ms" => &["log.roll.ms", "log.roll.hours"],
        "log.retention.ms" => &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
        "node.id" => &["node.id", "broker.id"],
        "flush.interval.ms" => &["flush.interval.ms"],
        "listeners" => &["listeners"],
        "advertised.listeners" => &["advertised.listeners", "listeners"],
        _ => &[],
    }
}

fn given(config: &BrokerConfig, keys: &[&str]) -> bool {
    keys.iter().any(|k| config.explicit.contains(*k))
}

/// The source of a broker setting known by `keys` (its spellings): dynamic scopes first.
fn broker_source(config: &BrokerConfig, dynamic: &DynamicBrokerConfig, keys: &[&str]) -> i8 {
    let scopes: Vec<Scope> = keys.iter().filter_map(|k| dynamic.scope_of(k)).collect();
    if scopes.contains(&Scope::Broker) {
        SOURCE_DYNAMIC_BROKER
    } else if !scopes.is_empty() {
        SOURCE_DYNAMIC_DEFAULT_BROKER
    } else if given(config, keys) {
        SOURCE_STATIC_BROKER
    } else {
        SOURCE_DEFAULT
    }
}

fn not_applicable_reason(key: &str) -> Option<String> {
    match topic_config_status(key) {
        Some(TopicConfigStatus::NotApplicable(why)) => Some(why.to_string()),
        _ => None,
    }
}

/// The effective configuration of a topic with `overrides` on this broker (`config` is the
/// effective broker configuration, `dynamic` what of it was set at run time).
pub fn topic_entries(
    config: &BrokerConfig,
    dynamic: &DynamicBrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let empty = BTreeMap::new();
    let effective = log_config(config, overrides).or_else(|_| log_config(config, &empty));
    let Ok(effective) = effective else {
        return Vec::new();
    };
    let mut out: Vec<ConfigEntry> = topic_values(&effective)
        .into_iter()
        .map(|(name, value, config_type)| {
            let source = if overrides.contains_key(name)
                || (name == "flush.policy" && overrides.contains_key("flush.ms"))
            {
                SOURCE_TOPIC
            } else {
                broker_source(config, dynamic, broker_synonyms(name))
            };
            ConfigEntry {
                name: name.to_string(),
                value,
                source,
                read_only: false,
                config_type,
                documentation: None,
            }
        })
        .collect();
    for (key, value) in overrides {
        if !out.iter().any(|e| e.name == *key) {
            out.push(ConfigEntry {
                name: key.clone(),
                value: value.clone(),
                source: SOURCE_TOPIC,
                read_only: false,
                config_type: TYPE_STRING,
                documentation: not_applicable_reason(key),
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
        (
            "socket.send.buffer.bytes",
            c.socket_send_buffer_bytes
                .map_or(-1, |n| n as i64)
                .to_string(),
            TYPE_INT,
        ),
        ("max.connections", c.max_connections.to_string(), TYPE_INT),
        (
            "log.message.timestamp.type",
            c.log_message_timestamp_type.name().to_string(),
            TYPE_STRING,
        ),
        ("flush.policy", flush_policy.to_string(), TYPE_STRING),
        ("flush.interval.ms", flush_interval, TYPE_LONG),
        ("num.shards", c.num_shards.to_string(), TYPE_INT),
        ("node.id", c.node_id.to_string(), TYPE_INT),
        (
            "metrics.listener",
            c.metrics_listener
                .map_or_else(String::new, |a| format!("http://{a}")),
            TYPE_STRING,
        ),
        ("log.format", c.log_format.as_str().to_string(), TYPE_STRING),
    ]
}

/// The broker's settings (`config` is the effective configuration, `dynamic` what of it was
/// set at run time).
pub fn broker_entries(config: &BrokerConfig, dynamic: &DynamicBrokerConfig) -> Vec<ConfigEntry> {
    broker_values(config)
        .into_iter()
        .map(|(name, value, config_type)| {
            let spellings = broker_key_spellings(name);
            let own = [name];
            let keys = if spellings.is_empty() {
                &own[..]
            } else {
                spellings
            };
            ConfigEntry {
                name: name.to_string(),
                source: broker_source(config, dynamic, keys),
                read_only: !DYNAMIC_BROKER_KEYS.contains(&name),
                value,
                config_type,
                documentation: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(settings: &[(&str, &str)]) -> BrokerConfig {
        let pairs: Vec<(String, String)> = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_sources(None, &pairs).expect("valid settings")
    }

    fn source_of(entries: &[ConfigEntry], name: &str) -> i8 {
        entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{name} not described"))
            .source
    }

    /// A setting given explicitly is STATIC_BROKER_CONFIG even at Kafka's default value; a
    /// topic override is DYNAMIC_TOPIC_CONFIG; the rest are DEFAULT_CONFIG.
    #[test]
    fn sources_follow_where_a_value_came_from() {
        let config = broker(&[
            ("log.segment.bytes", "1073741824"),
            ("log.retention.hours", "1"),
            ("broker.id", "0"),
        ]);
        let overrides = BTreeMap::from([
            ("retention.bytes".to_string(), "4096".to_string()),
            ("flush.ms".to_string(), "100".to_string()),
        ]);
        let topic = topic_entries(&config, &DynamicBrokerConfig::default(), &overrides);
        assert_eq!(source_of(&topic, "segment.bytes"), SOURCE_STATIC_BROKER);
        assert_eq!(source_of(&topic, "retention.ms"), SOURCE_STATIC_BROKER);
        assert_eq!(source_of(&topic, "retention.bytes"), SOURCE_TOPIC);
        assert_eq!(source_of(&topic, "flush.policy"), SOURCE_TOPIC);
        assert_eq!(source_of(&topic, "max.message.bytes"), SOURCE_DEFAULT);
        assert_eq!(source_of(&topic, "compression.type"), SOURCE_DEFAULT);
        let retention = topic.iter().find(|e| e.name == "retention.ms");
        assert_eq!(retention.map(|e| e.value.as_str()), Some("3600000"));
        let brokers = broker_entries(&config, &DynamicBrokerConfig::default());
        assert_eq!(
            source_of(&brokers, "log.segment.bytes"),
            SOURCE_STATIC_BROKER
        );
        assert_eq!(
            source_of(&brokers, "log.retention.ms"),
            SOURCE_STATIC_BROKER
        );
        assert_eq!(source_of(&brokers, "node.id"), SOURCE_STATIC_BROKER);
        assert_eq!(source_of(&brokers, "num.partitions"), SOURCE_DEFAULT);
    }

    /// An accepted-but-inert override is described with the reason it has no effect.
    #[test]
    fn not_applicable_overrides_say_so() {
        let overrides = BTreeMap::from([("min.insync.replicas".to_string(), "1".to_string())]);
        let topic = topic_entries(
            &BrokerConfig::default(),
            &DynamicBrokerConfig::default(),
            &overrides,
        );
        let entry = topic
            .iter()
            .find(|e| e.name == "min.insync.replicas")
            .expect("described");
        assert_eq!(entry.source, SOURCE_TOPIC);
        let why = entry.documentation.as_deref().unwrap_or("");
        assert!(why.contains("not applicable"), "{why:?}");
        let honoured = topic.iter().find(|e| e.name == "segment.bytes");
        assert_eq!(honoured.and_then(|e| e.documentation.clone()), None);
    }

    /// A broker setting changed at run time is DYNAMIC_BROKER_CONFIG (this broker) or
    /// DYNAMIC_DEFAULT_BROKER_CONFIG (cluster default), for the broker entry and for every
    /// topic falling back on it; only dynamic settings are writable.
    #[test]
    fn dynamic_settings_have_dynamic_sources() {
        let base = broker(&[("log.retention.hours", "1")]);
        let dynamic = DynamicBrokerConfig {
            broker: BTreeMap::from([("log.retention.ms".to_string(), "5000".to_string())]),
            cluster_default: BTreeMap::from([(
                "log.segment.bytes".to_string(),
                "4096".to_string(),
            )]),
        };
        let effective = crate::server::dynamic_config::apply(&base, &dynamic).expect("applies");
        let topic = topic_entries(&effective, &dynamic, &BTreeMap::new());
        assert_eq!(source_of(&topic, "retention.ms"), SOURCE_DYNAMIC_BROKER);
        assert_eq!(
            source_of(&topic, "segment.bytes"),
            SOURCE_DYNAMIC_DEFAULT_BROKER
        );
        assert_eq!(source_of(&topic, "max.message.bytes"), SOURCE_DEFAULT);
        let retention = topic.iter().find(|e| e.name == "retention.ms");
        assert_eq!(retention.map(|e| e.value.as_str()), Some("5000"));
        let brokers = broker_entries(&effective, &dynamic);
        assert_eq!(
            source_of(&brokers, "log.retention.ms"),
            SOURCE_DYNAMIC_BROKER
        );
        assert_eq!(
            source_of(&brokers, "log.segment.bytes"),
            SOURCE_DYNAMIC_DEFAULT_BROKER
        );
        let writable: Vec<&str> = brokers
            .iter()
            .filter(|e| !e.read_only)
            .map(|e| e.name.as_str())
            .collect();
        assert!(
            writable.iter().all(|n| DYNAMIC_BROKER_KEYS.contains(n)),
            "{writable:?}"
        );
        assert!(writable.contains(&"log.retention.ms") && !writable.contains(&"log.dirs"));
    }
}
