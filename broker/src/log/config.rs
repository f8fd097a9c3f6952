//! Per-partition log settings and the flush policy, with Kafka's topic-level override names.
//!
//! Contract:
//! - Inputs: defaults, or string overrides keyed by Kafka's names (`segment.bytes`, …) as a
//!   topic's metadata stores them.
//! - Outputs: a [`LogConfig`] whose [`validate`](LogConfig::validate) has passed, or a
//!   [`LogError::Config`] naming the bad key.
//! - Never: reads files or clocks.

use std::collections::BTreeMap;

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
    /// `retention.ms` (-1 = forever), `max.message.bytes`, and `flush.policy`
    /// (`none` | `fsync` | `interval`) with `flush.ms`. Unknown keys are ignored (Kafka has
    /// many that do not concern the log); a known key with a bad value is an error.
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
                "flush.policy" | "flush.ms" => {}
                _ => {}
            }
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
}
