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
//! is read-only unless it is one of the dynamic settings. A setting the broker accepts but
//! does not act on ([`Effect::NoEffect`]) carries that reason as its documentation. Names,
//! types, synonyms and values all come from the settings table (`crate::config::table`).

use std::collections::BTreeMap;

use super::dynamic_config::{DynamicBrokerConfig, Scope};
use crate::config::table::{Effect, Kind, Setting};
use crate::config::topic::log_config;
use crate::config::{topic_setting, BrokerConfig, SETTINGS};

/// Resource type TOPIC.
pub const RESOURCE_TOPIC: i8 = 2;
/// Resource type BROKER.
pub const RESOURCE_BROKER: i8 = 4;
/// Resource type CLIENT_METRICS (KIP-714 subscriptions; this broker collects no client
/// telemetry, so none exists: DescribeConfigs gives an empty list, alterations are refused).
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
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
    /// Where the value may come from, in precedence order (DescribeConfigs v1+ synonyms).
    pub synonyms: Vec<ConfigSynonym>,
}

/// One synonym of a described setting: a name its value may come from (the topic override,
/// a broker spelling in a dynamic scope or the static file, or the default), the value
/// there and that source. The first is the one in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    /// Kafka key (a topic name or a broker spelling).
    pub name: String,
    /// The value under that name.
    pub value: String,
    /// Its source (1 to 5).
    pub source: i8,
}

fn synonym(name: &str, value: &str, source: i8) -> ConfigSynonym {
    ConfigSynonym {
        name: name.to_string(),
        value: value.to_string(),
        source,
    }
}

/// The broker spellings of `setting` that hold a value, dynamic scopes first, then the
/// static file, then the default (`defaults` is a configuration of nothing but defaults).
fn broker_synonyms(
    setting: &Setting,
    config: &BrokerConfig,
    dynamic: &DynamicBrokerConfig,
    defaults: &BrokerConfig,
) -> Vec<ConfigSynonym> {
    let mut out = Vec::new();
    for (values, source) in [
        (&dynamic.broker, SOURCE_DYNAMIC_BROKER),
        (&dynamic.cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
        (&config.explicit, SOURCE_STATIC_BROKER),
    ] {
        for key in setting.spellings() {
            if let Some(value) = values.get(key) {
                out.push(synonym(key, value, source));
            }
        }
    }
    let default = match &setting.broker {
        Some(side) => (side.show)(defaults),
        None => setting.default.to_string(),
    };
    out.push(synonym(setting.name, &default, SOURCE_DEFAULT));
    out
}

/// The flush policy is given as two settings (`flush.policy` with `flush.interval.ms`, a
/// topic's `flush.policy` with `flush.ms`); the policy's source is that of either half.
fn flush_pair(setting: &Setting) -> Option<&'static Setting> {
    (setting.name == "flush.policy")
        .then(|| SETTINGS.iter().find(|s| s.name == "flush.interval.ms"))
        .flatten()
}

fn given(config: &BrokerConfig, keys: &[&str]) -> bool {
    keys.iter().any(|k| config.explicit.contains_key(*k))
}

/// The broker spellings behind a row (with its flush partner's).
fn broker_keys(setting: &Setting) -> Vec<&'static str> {
    if !setting.is_broker() {
        return Vec::new();
    }
    let mut keys: Vec<&str> = setting.spellings().collect();
    if let Some(pair) = flush_pair(setting) {
        keys.extend(pair.spellings());
    }
    keys
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

fn no_effect_reason(setting: Option<&Setting>) -> Option<String> {
    match setting.map(|s| s.effect) {
        Some(Effect::NoEffect(why)) => Some(why.to_string()),
        _ => None,
    }
}

/// The effective configuration of a topic with `overrides` on this broker (`config` is the
/// effective broker configuration, `dynamic` what of it was set at run time): every topic
/// row that shows a value, then any other stored override.
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
    let defaults = BrokerConfig::default();
    let mut out = Vec::new();
    for setting in SETTINGS {
        let (Some(name), Some(show)) = (
            setting.topic_name(),
            setting.topic.and_then(|side| side.show),
        ) else {
            continue;
        };
        let partner = flush_pair(setting).and_then(Setting::topic_name);
        let source =
            if overrides.contains_key(name) || partner.is_some_and(|p| overrides.contains_key(p)) {
                SOURCE_TOPIC
            } else {
                broker_source(config, dynamic, &broker_keys(setting))
            };
        let value = show(&effective);
        let mut synonyms: Vec<ConfigSynonym> = overrides
            .get(name)
            .map(|v| synonym(name, v, SOURCE_TOPIC))
            .into_iter()
            .collect();
        if setting.is_broker() {
            synonyms.extend(broker_synonyms(setting, config, dynamic, &defaults));
        } else if synonyms.is_empty() {
            synonyms.push(synonym(name, &value, SOURCE_DEFAULT));
        }
        out.push(ConfigEntry {
            name: name.to_string(),
            value,
            source,
            read_only: false,
            config_type: setting.kind.code(),
            documentation: None,
            synonyms,
        });
    }
    for (key, value) in overrides {
        if !out.iter().any(|e| e.name == *key) {
            out.push(ConfigEntry {
                name: key.clone(),
                value: value.clone(),
                source: SOURCE_TOPIC,
                read_only: false,
                config_type: Kind::String.code(),
                documentation: no_effect_reason(topic_setting(key)),
                synonyms: vec![synonym(key, value, SOURCE_TOPIC)],
            });
        }
    }
    out
}

/// The broker's settings (`config` is the effective configuration, `dynamic` what of it was
/// set at run time): every broker row, those without effect here with the reason.
pub fn broker_entries(config: &BrokerConfig, dynamic: &DynamicBrokerConfig) -> Vec<ConfigEntry> {
    let defaults = BrokerConfig::default();
    SETTINGS
        .iter()
        .filter(|s| s.is_broker())
        .map(|setting| {
            let value = match &setting.broker {
                Some(side) => (side.show)(config),
                None => setting
                    .spellings()
                    .find_map(|k| config.explicit.get(k))
                    .map_or(setting.default, String::as_str)
                    .to_string(),
            };
            let keys: Vec<&str> = setting.spellings().collect();
            ConfigEntry {
                name: setting.name.to_string(),
                source: broker_source(config, dynamic, &keys),
                read_only: !setting.dynamic,
                value,
                config_type: setting.kind.code(),
                documentation: no_effect_reason(Some(setting)),
                synonyms: broker_synonyms(setting, config, dynamic, &defaults),
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

    /// Every `log.cleaner.*` setting is described for the broker under Kafka's name, with the
    /// value in force and where it came from.
    #[test]
    fn cleaner_settings_are_described_with_their_sources() {
        let config = broker(&[
            ("log.cleaner.backoff.ms", "250"),
            ("log.cleaner.min.cleanable.ratio", "0.1"),
            ("log.cleanup.policy", "compact,delete"),
        ]);
        let brokers = broker_entries(&config, &DynamicBrokerConfig::default());
        let value_of = |name: &str| {
            brokers
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.value.clone())
                .unwrap_or_else(|| panic!("{name} not described"))
        };
        for key in crate::config::SETTINGS
            .iter()
            .map(|s| s.name)
            .filter(|n| n.starts_with("log.clean"))
        {
            let expected = if [
                "log.cleaner.backoff.ms",
                "log.cleaner.min.cleanable.ratio",
                "log.cleanup.policy",
            ]
            .contains(&key)
            {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            };
            assert_eq!(source_of(&brokers, key), expected, "{key}");
        }
        assert_eq!(value_of("log.cleaner.backoff.ms"), "250");
        assert_eq!(value_of("log.cleaner.min.cleanable.ratio"), "0.1");
        assert_eq!(value_of("log.cleanup.policy"), "compact,delete");
        assert_eq!(value_of("log.cleaner.enable"), "true");
        assert_eq!(value_of("log.cleaner.dedupe.buffer.size"), "134217728");
        assert_eq!(
            value_of("log.cleaner.io.max.bytes.per.second"),
            "1.7976931348623157E308"
        );
        assert_eq!(value_of("log.cleaner.delete.retention.ms"), "86400000");
        assert_eq!(
            value_of("log.cleaner.max.compaction.lag.ms"),
            i64::MAX.to_string()
        );
        assert_eq!(value_of("offsets.topic.segment.ms"), "600000");
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

    /// Every broker row is described; a Kafka setting without effect on a single node is
    /// described with what was given (or its default) and says why it does nothing.
    #[test]
    fn every_broker_row_is_described_and_no_effect_ones_say_so() {
        let config = broker(&[("num.network.threads", "5")]);
        let brokers = broker_entries(&config, &DynamicBrokerConfig::default());
        let broker_rows = SETTINGS.iter().filter(|s| s.is_broker()).count();
        assert_eq!(brokers.len(), broker_rows);
        let threads = brokers
            .iter()
            .find(|e| e.name == "num.network.threads")
            .expect("described");
        assert_eq!(
            (threads.value.as_str(), threads.source, threads.read_only),
            // Dynamic in Kafka (KIP-226), so not read-only, though it changes nothing here.
            ("5", SOURCE_STATIC_BROKER, false)
        );
        let why = threads.documentation.as_deref().unwrap_or("");
        assert!(why.contains("no effect on a single node"), "{why:?}");
        let io = brokers.iter().find(|e| e.name == "num.io.threads");
        assert_eq!(
            io.map(|e| (e.value.as_str(), e.source)),
            Some(("8", SOURCE_DEFAULT))
        );
        let honoured = brokers.iter().find(|e| e.name == "log.segment.bytes");
        assert_eq!(honoured.and_then(|e| e.documentation.clone()), None);
    }

    /// Synonyms follow Kafka's precedence (topic override, dynamic broker, dynamic cluster
    /// default, static, default) under the table's spellings; the first is the source in force.
    #[test]
    fn synonyms_list_every_source_in_precedence_order() {
        let base = broker(&[("log.retention.hours", "1")]);
        let dynamic = DynamicBrokerConfig {
            broker: BTreeMap::new(),
            cluster_default: BTreeMap::from([("log.retention.ms".to_string(), "5000".to_string())]),
            ..DynamicBrokerConfig::default()
        };
        let effective = crate::server::dynamic_config::apply(&base, &dynamic).expect("applies");
        let overrides = BTreeMap::from([("flush.ms".to_string(), "100".to_string())]);
        let topic = topic_entries(&effective, &dynamic, &overrides);
        let retention = topic
            .iter()
            .find(|e| e.name == "retention.ms")
            .expect("described");
        let listed: Vec<(&str, &str, i8)> = retention
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_str(), s.source))
            .collect();
        assert_eq!(
            listed,
            [
                ("log.retention.ms", "5000", SOURCE_DYNAMIC_DEFAULT_BROKER),
                ("log.retention.hours", "1", SOURCE_STATIC_BROKER),
                ("log.retention.ms", "604800000", SOURCE_DEFAULT),
            ]
        );
        let brokers = broker_entries(&effective, &dynamic);
        for entry in topic.iter().chain(&brokers) {
            let first = entry.synonyms.first().map(|s| s.source);
            if entry.name == "flush.policy" && entry.source == SOURCE_TOPIC {
                continue; // set by the topic's flush.ms, the other half of the pair
            }
            assert_eq!(first, Some(entry.source), "{}", entry.name);
        }
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
            ..DynamicBrokerConfig::default()
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
        let mut writable: Vec<&str> = brokers
            .iter()
            .filter(|e| !e.read_only)
            .map(|e| e.name.as_str())
            .collect();
        writable.sort_unstable();
        assert!(
            writable == crate::config::table::dynamic_broker_keys(),
            "{writable:?}"
        );
        assert!(writable.contains(&"log.retention.ms") && !writable.contains(&"log.dirs"));
    }
}
