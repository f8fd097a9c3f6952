//! Per-partition log settings and the flush policy, with Kafka's topic-level override names.
//!
//! Contract:
//! - Inputs: defaults, or string overrides keyed by Kafka's names (`segment.bytes`, …) as a
//!   topic's metadata stores them.
//! - Outputs: a [`LogConfig`] whose [`validate`](LogConfig::validate) has passed, or a
//!   [`LogError::Config`] naming the bad key.
//! - Never: reads files or clocks.

use std::collections::BTreeMap;

use minikafka_core::compaction::policy::{parse_ratio_ppm, CleanupPolicy, CompactionConfig};

use super::error::LogError;

/// Default `segment.bytes`: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Default `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
/// Default `retention.ms`: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Default `message.max.bytes` (Kafka's): the largest batch accepted, log overhead included.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 1_048_588;

/// When appended data is made durable (the broker's `flush.policy` and a topic's override
/// alike: this one enum serves the configuration, the log and the benchmarks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FlushPolicy {
    /// Acknowledge once the write reached the kernel; the OS flushes when it likes.
    #[default]
    None,
    /// Acknowledge only after a sync covering the batch (group commit: appends waiting at the
    /// same time share one sync).
    Fsync,
    /// Acknowledge after the write; sync at most every `ms` milliseconds (see
    /// [`PartitionLog::tick`](super::PartitionLog::tick)).
    Interval {
        /// Milliseconds between syncs.
        ms: u64,
    },
}

impl FlushPolicy {
    /// The value of `flush.policy` (broker) and `minikafka.flush.policy` (topic) naming it.
    pub fn name(self) -> &'static str {
        match self {
            FlushPolicy::None => "none",
            FlushPolicy::Fsync => "fsync",
            FlushPolicy::Interval { .. } => "interval",
        }
    }
}

/// Which timestamp a partition's batches carry (`message.timestamp.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// The producer's timestamps are kept as sent.
    #[default]
    CreateTime,
    /// The broker stamps each batch with the time it appends it
    /// (`minikafka_core::record::stamp_log_append_time`).
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's name for the value.
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }

    /// The value named `value` (Kafka's names, exactly), if any.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }
}

/// Settings of one partition's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment before one would exceed this many bytes (`segment.bytes`). Never
    /// more than `u32::MAX` (I6).
    pub segment_bytes: u64,
    /// Roll a non-empty segment once it is this old (`segment.ms`); `None` = never by time.
    pub segment_ms: Option<i64>,
    /// Bytes between offset index entries (`index.interval.bytes`).
    pub index_interval_bytes: u32,
    /// Delete old segments while the log exceeds this size (`retention.bytes`); `None` =
    /// unlimited.
    pub retention_bytes: Option<u64>,
    /// Delete segments whose newest record is older than this (`retention.ms`); `None` =
    /// forever.
    pub retention_ms: Option<i64>,
    /// Largest batch accepted, log overhead included (`max.message.bytes`).
    pub max_batch_bytes: usize,
    /// When appends are made durable.
    pub flush: FlushPolicy,
    /// `cleanup.policy`: retention deletes, the cleaner compacts, or both.
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
    /// `delete.retention.ms` (used when `cleanup_policy.compact`).
    pub compaction: CompactionConfig,
    /// Whose timestamps batches carry (`message.timestamp.type`).
    pub timestamp_type: TimestampType,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: None,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            retention_bytes: None,
            retention_ms: Some(DEFAULT_RETENTION_MS),
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            flush: FlushPolicy::None,
            cleanup_policy: CleanupPolicy::DELETE,
            compaction: CompactionConfig::default(),
            timestamp_type: TimestampType::CreateTime,
        }
    }
}

impl LogConfig {
    /// Checks the settings: `segment.bytes` in `1..=u32::MAX` (I6), a positive index
    /// interval, a batch limit that fits a segment position, positive times.
    pub fn validate(&self) -> Result<(), LogError> {
        if self.segment_bytes == 0 || self.segment_bytes > u64::from(u32::MAX) {
            return Err(config_error(
                "segment.bytes",
                format!("{} is not in 1..={} (I6)", self.segment_bytes, u32::MAX),
            ));
        }
        if self.index_interval_bytes == 0 {
            return Err(config_error(
                "index.interval.bytes",
                "must be positive".into(),
            ));
        }
        if self.max_batch_bytes < minikafka_core::record::HEADER_BYTES
            || self.max_batch_bytes > u32::MAX as usize
        {
            return Err(config_error(
                "max.message.bytes",
                format!("{} is not a usable batch limit", self.max_batch_bytes),
            ));
        }
        if matches!(self.segment_ms, Some(ms) if ms <= 0) {
            return Err(config_error("segment.ms", "must be positive".into()));
        }
        if matches!(self.retention_ms, Some(ms) if ms < 0) {
            return Err(config_error("retention.ms", "must not be negative".into()));
        }
        if matches!(self.flush, FlushPolicy::Interval { ms: 0 }) {
            return Err(config_error("flush.ms", "must be positive".into()));
        }
        Ok(())
    }

    /// This configuration with Kafka topic-level overrides applied: `segment.bytes`,
    /// `segment.ms`, `index.interval.bytes`, `retention.bytes` (-1 = unlimited),
    /// `retention.ms` (-1 = forever), `max.message.bytes`, `message.timestamp.type`
    /// (`CreateTime` | `LogAppendTime`), and `flush.policy`
    /// (`none` | `fsync` | `interval`) with `flush.ms` (`flush.ms` alone means `interval`).
    /// Other keys are ignored here: which names a topic may carry at all is decided at
    /// creation by [`check_topic_config`]; a known key with a bad value is an error.
    pub fn with_overrides(&self, overrides: &BTreeMap<String, String>) -> Result<Self, LogError> {
        let mut out = self.clone();
        for (key, value) in overrides {
            match key.as_str() {
                "segment.bytes" => out.segment_bytes = parse(key, value)?,
                "segment.ms" => out.segment_ms = Some(parse(key, value)?),
                "index.interval.bytes" => out.index_interval_bytes = parse(key, value)?,
                "retention.bytes" => {
                    let v: i64 = parse(key, value)?;
                    out.retention_bytes = if v < 0 { None } else { Some(v as u64) };
                }
                "retention.ms" => {
                    let v: i64 = parse(key, value)?;
                    out.retention_ms = if v < 0 { None } else { Some(v) };
                }
                "max.message.bytes" => out.max_batch_bytes = parse(key, value)?,
                "cleanup.policy" => {
                    out.cleanup_policy =
                        CleanupPolicy::parse(value).map_err(|e| config_error(key, e.to_string()))?
                }
                "min.cleanable.dirty.ratio" => {
                    out.compaction.min_cleanable_dirty_ratio_ppm = parse_ratio_ppm(value)
                        .ok_or_else(|| config_error(key, format!("{value:?} is not in [0, 1]")))?
                }
                "min.compaction.lag.ms" => {
                    out.compaction.min_compaction_lag_ms = parse_non_negative(key, value)?
                }
                "max.compaction.lag.ms" => {
                    out.compaction.max_compaction_lag_ms = parse_non_negative(key, value)?
                }
                "delete.retention.ms" => {
                    out.compaction.delete_retention_ms = parse_non_negative(key, value)?
                }
                "message.timestamp.type" => {
                    out.timestamp_type = TimestampType::parse(value).ok_or_else(|| {
                        config_error(key, format!("{value:?} is not CreateTime or LogAppendTime"))
                    })?
                }
                // Read by the produce path's record rules (`handlers::produce`).
                "message.timestamp.before.max.ms" | "message.timestamp.after.max.ms" => {
                    parse_non_negative(key, value)?;
                }
                "flush.policy" | "flush.ms" => {}
                _ => {}
            }
        }
        // Kafka's `flush.ms` alone means "sync at least this often": the interval policy.
        if let (None, Some(ms)) = (overrides.get("flush.policy"), overrides.get("flush.ms")) {
            out.flush = FlushPolicy::Interval {
                ms: parse("flush.ms", ms)?,
            };
        }
        if let Some(policy) = overrides.get("flush.policy") {
            out.flush = match policy.as_str() {
                "none" => FlushPolicy::None,
                "fsync" => FlushPolicy::Fsync,
                "interval" => {
                    let ms = match overrides.get("flush.ms") {
                        Some(v) => parse("flush.ms", v)?,
                        None => 1000,
                    };
                    FlushPolicy::Interval { ms }
                }
                other => {
                    return Err(config_error(
                        "flush.policy",
                        format!("{other:?} is not none, fsync or interval"),
                    ))
                }
            };
        }
        out.validate()?;
        Ok(out)
    }
}

/// What the broker does with one topic-level configuration name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicConfigStatus {
    /// Applied to the topic (by the log, or by the produce path).
    Honoured,
    /// Accepted and stored, without effect here; DescribeConfigs reports it with this reason
    /// so no one mistakes it for an honoured setting.
    NotApplicable(&'static str),
    /// Refused with INVALID_CONFIG: the broker cannot do what it asks.
    Refused(&'static str),
}

use TopicConfigStatus::{Honoured, NotApplicable, Refused};

const ONE_REPLICA: &str = "not applicable on a single node: every partition has one replica";
const TIERED_ONLY: &str = "not applicable: applies to tiered storage, which this broker lacks";
const NO_RECOMPRESSION: &str =
    "not applicable: the broker never recompresses (compression.type is always producer)";

/// Every topic-level configuration name Apache Kafka (3.x and 4.x) defines, plus
/// minikafka's `flush.policy`, with what this broker does with it. CreateTopics refuses any
/// name not in this table. Some honoured names accept only some values; see
/// [`check_topic_config`].
pub const KAFKA_TOPIC_CONFIGS: &[(&str, TopicConfigStatus)] = &[
    ("cleanup.policy", Honoured),
    ("compression.gzip.level", NotApplicable(NO_RECOMPRESSION)),
    ("compression.lz4.level", NotApplicable(NO_RECOMPRESSION)),
    ("compression.type", Honoured),
    ("compression.zstd.level", NotApplicable(NO_RECOMPRESSION)),
    ("delete.retention.ms", Honoured),
    (
        "file.delete.delay.ms",
        NotApplicable("not applicable: segments past retention are deleted at once"),
    ),
    (
        "flush.messages",
        Refused("not supported: use flush.policy=fsync (sync every batch) or flush.ms"),
    ),
    ("flush.ms", Honoured),
    ("flush.policy", Honoured),
    (
        "follower.replication.throttled.replicas",
        NotApplicable(ONE_REPLICA),
    ),
    ("index.interval.bytes", Honoured),
    (
        "leader.replication.throttled.replicas",
        NotApplicable(ONE_REPLICA),
    ),
    ("local.retention.bytes", NotApplicable(TIERED_ONLY)),
    ("local.retention.ms", NotApplicable(TIERED_ONLY)),
    ("max.compaction.lag.ms", Honoured),
    ("max.message.bytes", Honoured),
    (
        "message.downconversion.enable",
        NotApplicable("not applicable: the broker never down-converts record batches"),
    ),
    (
        "message.format.version",
        NotApplicable("not applicable: batches are always record format v2"),
    ),
    ("message.timestamp.after.max.ms", Honoured),
    ("message.timestamp.before.max.ms", Honoured),
    (
        "message.timestamp.difference.max.ms",
        Refused("not supported: removed in Kafka 4.0; use message.timestamp.before.max.ms"),
    ),
    ("message.timestamp.type", Honoured),
    ("min.cleanable.dirty.ratio", Honoured),
    ("min.compaction.lag.ms", Honoured),
    ("min.insync.replicas", NotApplicable(ONE_REPLICA)),
    (
        "preallocate",
        NotApplicable("not applicable: segment files grow as they are written"),
    ),
    ("remote.log.copy.disable", NotApplicable(TIERED_ONLY)),
    ("remote.log.delete.on.disable", NotApplicable(TIERED_ONLY)),
    ("remote.storage.enable", NotApplicable(TIERED_ONLY)),
    ("retention.bytes", Honoured),
    ("retention.ms", Honoured),
    ("segment.bytes", Honoured),
    (
        "segment.index.bytes",
        NotApplicable("not applicable: offset indexes are sized by the segment they cover"),
    ),
    (
        "segment.jitter.ms",
        NotApplicable("not applicable: segments roll exactly at segment.ms"),
    ),
    ("segment.ms", Honoured),
    ("unclean.leader.election.enable", NotApplicable(ONE_REPLICA)),
];

/// The status of a topic-level configuration name; `None` for a name Kafka does not define.
pub fn topic_config_status(key: &str) -> Option<TopicConfigStatus> {
    KAFKA_TOPIC_CONFIGS
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, status)| *status)
}

/// Checks one requested topic-level setting by name and value: unknown and refused names are
/// errors naming the key, and honoured or accepted names take only the values this broker
/// can keep its word on (`cleanup.policy` = `delete`, `compact` or `compact,delete`,
/// `compression.type=producer`,
/// `message.timestamp.type=CreateTime|LogAppendTime`, `min.insync.replicas=1`,
/// `remote.storage.enable=false`). Numeric values are checked by [`LogConfig::with_overrides`].
///
/// `compression.type` takes only `producer`: honouring a codec would mean decompressing and
/// re-encoding every batch on the produce path (CPU per byte, and memory up to the
/// decompressed size, which a compression bomb makes large) and would break the design's one
/// byte format from socket to disk; producers choose their codec instead.
pub fn check_topic_config(key: &str, value: &str) -> Result<TopicConfigStatus, LogError> {
    let status = topic_config_status(key)
        .ok_or_else(|| config_error(key, "is not a topic configuration".into()))?;
    if let Refused(why) = status {
        return Err(config_error(key, why.into()));
    }
    let only = |allowed: &str, why: &str| {
        if value.trim() == allowed {
            Ok(status)
        } else {
            Err(config_error(
                key,
                format!("{value:?} is not supported: {why}"),
            ))
        }
    };
    match key {
        "cleanup.policy" => CleanupPolicy::parse(value)
            .map(|_| status)
            .map_err(|e| config_error(key, e.to_string())),
        "compression.type" => only(
            "producer",
            "the broker never recompresses; batches keep the producer's codec",
        ),
        "message.timestamp.type" => match TimestampType::parse(value) {
            Some(_) => Ok(status),
            None => Err(config_error(
                key,
                format!("{value:?} is not supported: expected CreateTime or LogAppendTime"),
            )),
        },
        "min.insync.replicas" => only("1", "a single node has one in-sync replica"),
        "remote.storage.enable" => only("false", "tiered storage is not supported"),
        _ => Ok(status),
    }
}

fn parse_non_negative(key: &str, value: &str) -> Result<i64, LogError> {
    let v: i64 = parse(key, value)?;
    if v < 0 {
        return Err(config_error(key, "must not be negative".into()));
    }
    Ok(v)
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, LogError> {
    value
        .trim()
        .parse()
        .map_err(|_| config_error(key, format!("cannot parse {value:?}")))
}

fn config_error(key: &str, reason: String) -> LogError {
    LogError::Config {
        key: key.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_valid() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_batch_bytes, 1_048_588);
        assert_eq!(c.retention_ms, Some(604_800_000));
        c.validate().expect("defaults validate");
    }

    /// I6: a segment larger than u32::MAX bytes is refused.
    #[test]
    fn segment_bytes_above_u32_is_refused_i6() {
        let c = LogConfig {
            segment_bytes: u64::from(u32::MAX) + 1,
            ..LogConfig::default()
        };
        assert!(matches!(c.validate(), Err(LogError::Config { .. })));
    }

    #[test]
    fn overrides_apply_and_reject_bad_values() {
        let mut o = BTreeMap::new();
        o.insert("segment.bytes".to_string(), "1024".to_string());
        o.insert("retention.ms".to_string(), "-1".to_string());
        o.insert("flush.policy".to_string(), "interval".to_string());
        o.insert("flush.ms".to_string(), "50".to_string());
        o.insert("cleanup.policy".to_string(), "delete".to_string());
        let c = LogConfig::default().with_overrides(&o).expect("valid");
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.retention_ms, None);
        assert_eq!(c.flush, FlushPolicy::Interval { ms: 50 });
        o.insert("segment.bytes".to_string(), "lots".to_string());
        assert!(LogConfig::default().with_overrides(&o).is_err());
    }

    #[test]
    fn timestamp_bounds_take_non_negative_millis_only() {
        for key in [
            "message.timestamp.before.max.ms",
            "message.timestamp.after.max.ms",
        ] {
            assert!(check_topic_config(key, "3600000").is_ok());
            for bad in ["-1", "soon"] {
                let o = BTreeMap::from([(key.to_string(), bad.to_string())]);
                assert!(
                    LogConfig::default().with_overrides(&o).is_err(),
                    "{key}={bad}"
                );
            }
        }
        assert!(check_topic_config("message.timestamp.difference.max.ms", "1000").is_err());
    }

    #[test]
    fn flush_ms_alone_is_the_interval_policy() {
        let o = BTreeMap::from([("flush.ms".to_string(), "250".to_string())]);
        let c = LogConfig::default().with_overrides(&o).expect("valid");
        assert_eq!(c.flush, FlushPolicy::Interval { ms: 250 });
    }

    /// The table has each name once, sorted (so a reader finds a name), and every honoured
    /// name is one the log, the produce path or the checks below actually act on.
    #[test]
    fn topic_config_table_is_sorted_unique_and_honest() {
        let names: Vec<&str> = KAFKA_TOPIC_CONFIGS.iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        let honoured: Vec<&str> = KAFKA_TOPIC_CONFIGS
            .iter()
            .filter(|(_, s)| *s == Honoured)
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(
            honoured,
            [
                "cleanup.policy",
                "compression.type",
                "delete.retention.ms",
                "flush.ms",
                "flush.policy",
                "index.interval.bytes",
                "max.compaction.lag.ms",
                "max.message.bytes",
                // Honoured by the produce path's record rules (handlers::produce, I27).
                "message.timestamp.after.max.ms",
                "message.timestamp.before.max.ms",
                "message.timestamp.type",
                "min.cleanable.dirty.ratio",
                "min.compaction.lag.ms",
                "retention.bytes",
                "retention.ms",
                "segment.bytes",
                "segment.ms",
            ]
        );
        // Each honoured log setting changes the LogConfig it produces.
        for (key, value) in [
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "7"),
            ("max.compaction.lag.ms", "7"),
            ("min.cleanable.dirty.ratio", "0.7"),
            ("min.compaction.lag.ms", "7"),
            ("flush.ms", "7"),
            ("flush.policy", "fsync"),
            ("index.interval.bytes", "77"),
            ("max.message.bytes", "7777"),
            ("message.timestamp.type", "LogAppendTime"),
            ("retention.bytes", "7"),
            ("retention.ms", "7"),
            ("segment.bytes", "7777"),
            ("segment.ms", "7"),
        ] {
            let o = BTreeMap::from([(key.to_string(), value.to_string())]);
            let c = LogConfig::default().with_overrides(&o).expect(key);
            assert_ne!(c, LogConfig::default(), "{key} has no effect");
        }
    }

    #[test]
    fn topic_config_checks_name_the_key() {
        let err = check_topic_config("retention.msec", "1").expect_err("unknown");
        assert!(err.to_string().contains("retention.msec"), "{err}");
        for (key, bad, good) in [
            ("compression.type", "gzip", "producer"),
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
            Ok(TopicConfigStatus::NotApplicable(_))
        ));
    }
}
