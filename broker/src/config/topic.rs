//! A topic's configuration: its stored overrides, checked against the topic rows of
//! [`SETTINGS`](super::SETTINGS), and the typed [`LogConfig`] they give under the broker's
//! settings.
//!
//! Contract:
//! - [`TopicConfig`] is parsed once, when the topic or the broker's dynamic settings change
//!   (create, alter, startup), never per request: a Produce reads [`TopicConfig::log`].
//! - [`check_topic_config`] decides whether a name and value may be stored (CreateTopics,
//!   AlterConfigs, IncrementalAlterConfigs): an unknown or refused name, or a value the
//!   broker cannot keep its word on, is an error naming the key.
//! - [`log_config`] lays the overrides over the broker's defaults; a bad number is an error
//!   naming the key, and the result has passed [`LogConfig::validate`].
//! - Never: reads files or clocks.

use std::collections::BTreeMap;

use super::table::{topic_setting, Effect, Kind};
use super::BrokerConfig;
use crate::log::{FlushPolicy, LogConfig, LogError};

/// A topic's overrides and the log configuration they give (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
    log: LogConfig,
}

impl TopicConfig {
    /// Parses `overrides` (stored names and values, reserved keys left out) under the
    /// effective broker configuration.
    pub fn parse(
        broker: &BrokerConfig,
        overrides: BTreeMap<String, String>,
    ) -> Result<Self, LogError> {
        let log = log_config(broker, &overrides)?;
        Ok(TopicConfig { overrides, log })
    }

    /// A configuration whose log configuration is already known (checked by the caller
    /// with [`log_config`] over the same overrides).
    pub fn new(overrides: BTreeMap<String, String>, log: LogConfig) -> Self {
        TopicConfig { overrides, log }
    }

    /// The overrides as stored, by Kafka's topic-level name.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The partitions' log configuration.
    pub fn log(&self) -> &LogConfig {
        &self.log
    }
}

/// The log configuration of a topic: the broker's settings with the topic's overrides.
pub fn log_config(
    config: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, LogError> {
    let base = LogConfig {
        segment_bytes: config.segment_bytes,
        segment_ms: config.segment_ms,
        index_interval_bytes: config.index_interval_bytes,
        retention_bytes: config.retention_bytes,
        retention_ms: config.retention_ms,
        max_batch_bytes: config.message_max_bytes,
        flush: config.flush_policy,
        cleanup_policy: config.cleaner.default_policy,
        compaction: config.cleaner.compaction_defaults(),
        timestamp_type: config.log_message_timestamp_type,
        timestamp_bounds: config.log_message_timestamp_bounds,
        compression: config.compression,
        schema_ids: Default::default(),
        preallocate: config.log_preallocate,
    };
    with_overrides(&base, overrides)
}

/// `base` with topic-level overrides applied by their rows; names without a log field of
/// their own are ignored here (which names a topic may carry is [`check_topic_config`]'s
/// call). The flush policy is two settings: `flush.policy` (`none` | `fsync` | `interval`)
/// with `flush.ms`, and `flush.ms` alone means `interval`.
pub fn with_overrides(
    base: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, LogError> {
    let mut out = base.clone();
    for (key, value) in overrides {
        let apply = topic_setting(key)
            .and_then(|s| s.topic)
            .and_then(|side| side.apply);
        if let Some(apply) = apply {
            apply(&mut out, value).map_err(|why| config_error(key, why))?;
        }
    }
    let interval_ms = |default: u64| -> Result<u64, LogError> {
        match overrides.get("flush.ms") {
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| config_error("flush.ms", format!("cannot parse {v:?}"))),
            None => Ok(default),
        }
    };
    out.flush = match overrides.get("flush.policy").map(String::as_str) {
        None if overrides.contains_key("flush.ms") => FlushPolicy::Interval {
            ms: interval_ms(0)?,
        },
        None => out.flush,
        Some("none") => FlushPolicy::None,
        Some("fsync") => FlushPolicy::Fsync,
        Some("interval") => FlushPolicy::Interval {
            ms: interval_ms(super::table::DEFAULT_FLUSH_INTERVAL_MS)?,
        },
        Some(other) => {
            return Err(config_error(
                "flush.policy",
                format!("{other:?} is not none, fsync or interval"),
            ))
        }
    };
    out.validate()?;
    Ok(out)
}

/// What the broker does with the topic-level name `key`; `None` for a name Kafka does not
/// define.
pub fn topic_config_status(key: &str) -> Option<Effect> {
    topic_setting(key).map(|s| s.effect)
}

/// Checks one requested topic-level setting by name and value: unknown and refused names are
/// errors naming the key, and the others take only the values their row's topic check
/// accepts (e.g. `compression.type` one of Kafka's six names). Numbers are checked by
/// [`log_config`].
pub fn check_topic_config(key: &str, value: &str) -> Result<Effect, LogError> {
    let setting =
        topic_setting(key).ok_or_else(|| config_error(key, "is not a topic configuration"))?;
    if let Effect::Refused(why) = setting.effect {
        return Err(config_error(key, why));
    }
    if let Some(side) = setting.topic {
        side.check
            .check(value.trim())
            .map_err(|why| config_error(key, format!("{value:?} is not supported: {why}")))?;
    }
    Ok(setting.effect)
}

/// For a topic setting whose value is a list, its default (APPEND and SUBTRACT start from it
/// when nothing is stored, as Kafka's do); `None` for one that is not a list.
pub fn topic_list_default(key: &str) -> Option<&'static str> {
    topic_setting(key)
        .filter(|s| s.kind == Kind::List)
        .map(|s| s.default)
}

fn config_error(key: &str, reason: impl Into<String>) -> LogError {
    LogError::Config {
        key: key.to_string(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SETTINGS;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn overrides_apply_and_reject_bad_values() {
        let mut o = map(&[
            ("segment.bytes", "1024"),
            ("retention.ms", "-1"),
            ("flush.policy", "interval"),
            ("flush.ms", "50"),
            ("cleanup.policy", "delete"),
        ]);
        let c = with_overrides(&LogConfig::default(), &o).expect("valid");
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.retention_ms, None);
        assert_eq!(c.flush, FlushPolicy::Interval { ms: 50 });
        o.insert("segment.bytes".to_string(), "lots".to_string());
        let err = with_overrides(&LogConfig::default(), &o).expect_err("bad");
        assert!(err.to_string().contains("segment.bytes"), "{err}");
    }

    #[test]
    fn flush_ms_alone_is_the_interval_policy() {
        let c = with_overrides(&LogConfig::default(), &map(&[("flush.ms", "250")])).expect("ok");
        assert_eq!(c.flush, FlushPolicy::Interval { ms: 250 });
        let c = with_overrides(&LogConfig::default(), &map(&[("flush.policy", "interval")]))
            .expect("ok");
        assert_eq!(c.flush, FlushPolicy::Interval { ms: 1000 });
    }

    /// The honoured topic names are exactly those the log, the produce path or the checks
    /// act on, and each honoured log setting changes the LogConfig it produces.
    #[test]
    fn honoured_topic_settings_each_have_an_effect() {
        let honoured: Vec<&str> = SETTINGS
            .iter()
            .filter(|s| s.effect == Effect::Honoured)
            .filter_map(|s| s.topic_name())
            .collect();
        let mut sorted = honoured.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            [
                "cleanup.policy",
                "compression.gzip.level",
                "compression.lz4.level",
                "compression.type",
                "compression.zstd.level",
                "confluent.key.schema.validation",
                "confluent.value.schema.validation",
                "delete.retention.ms",
                "flush.ms",
                "flush.policy",
                "index.interval.bytes",
                "max.compaction.lag.ms",
                "max.message.bytes",
                "message.timestamp.after.max.ms",
                "message.timestamp.before.max.ms",
                "message.timestamp.type",
                "min.cleanable.dirty.ratio",
                "min.compaction.lag.ms",
                "preallocate",
                "retention.bytes",
                "retention.ms",
                "segment.bytes",
                "segment.ms",
            ]
        );
        for (key, value) in [
            ("cleanup.policy", "compact"),
            ("compression.type", "lz4"),
            ("compression.gzip.level", "7"),
            ("compression.lz4.level", "7"),
            ("compression.zstd.level", "7"),
            ("confluent.key.schema.validation", "true"),
            ("confluent.value.schema.validation", "true"),
            ("delete.retention.ms", "7"),
            ("max.compaction.lag.ms", "7"),
            ("min.cleanable.dirty.ratio", "0.7"),
            ("min.compaction.lag.ms", "7"),
            ("preallocate", "false"),
            ("flush.ms", "7"),
            ("flush.policy", "fsync"),
            ("index.interval.bytes", "77"),
            ("max.message.bytes", "7777"),
            ("message.timestamp.type", "LogAppendTime"),
            ("message.timestamp.before.max.ms", "7"),
            ("message.timestamp.after.max.ms", "7"),
            ("retention.bytes", "7"),
            ("retention.ms", "7"),
            ("segment.bytes", "7777"),
            ("segment.ms", "7"),
        ] {
            let c = with_overrides(&LogConfig::default(), &map(&[(key, value)])).expect(key);
            assert_ne!(c, LogConfig::default(), "{key} has no effect");
        }
    }

    #[test]
    fn topic_config_checks_name_the_key() {
        let err = check_topic_config("retention.msec", "1").expect_err("unknown");
        assert!(err.to_string().contains("retention.msec"), "{err}");
        for (key, bad, good) in [
            ("compression.type", "brotli", "gzip"),
            ("compression.gzip.level", "10", "9"),
            ("compression.lz4.level", "0", "17"),
            ("cleanup.policy", "compact,keep", "compact,delete"),
            ("message.timestamp.type", "WallClock", "LogAppendTime"),
            ("min.insync.replicas", "2", "1"),
            ("remote.storage.enable", "true", "false"),
        ] {
            let err = check_topic_config(key, bad).expect_err(bad);
            assert!(err.to_string().contains(key), "{err}");
            assert!(err.to_string().contains(bad), "{err} names the value");
            assert!(check_topic_config(key, good).is_ok(), "{key}={good}");
        }
        let err = check_topic_config("flush.messages", "1").expect_err("refused");
        assert!(err.to_string().contains("flush.messages"), "{err}");
        assert!(matches!(
            check_topic_config("preallocate", "true"),
            Ok(Effect::Honoured)
        ));
        assert!(check_topic_config("preallocate", "yes").is_err());
        assert_eq!(topic_list_default("cleanup.policy"), Some("delete"));
        assert_eq!(
            topic_list_default("leader.replication.throttled.replicas"),
            Some("")
        );
        assert_eq!(topic_list_default("retention.ms"), None);
    }

    #[test]
    fn parsed_once_with_the_broker_defaults() {
        let broker = BrokerConfig::from_sources(
            None,
            &[("log.cleanup.policy".to_string(), "compact".to_string())],
        )
        .expect("valid");
        let topic = TopicConfig::parse(&broker, map(&[("retention.ms", "5")])).expect("valid");
        assert!(topic.log().cleanup_policy.compact);
        assert_eq!(topic.log().retention_ms, Some(5));
        assert_eq!(topic.overrides(), &map(&[("retention.ms", "5")]));
        assert!(TopicConfig::parse(&broker, map(&[("segment.ms", "0")])).is_err());
    }
}
