//! Per-partition log settings and the flush policy.
//!
//! Contract:
//! - A [`LogConfig`] is typed; the broker builds one from its settings and a topic's
//!   overrides (`crate::config::topic::log_config`, from the settings table) and checks it
//!   with [`validate`](LogConfig::validate), whose errors name Kafka's topic-level key.
//! - Never: reads files or clocks.

use minikafka_core::compaction::policy::{CleanupPolicy, CompactionConfig};
use minikafka_core::record::Compression;
use minikafka_core::record_errors::{SchemaIdRule, TimestampBounds};

use super::error::LogError;

/// Default `segment.bytes`: 1 GiB.
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Default `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
/// Default `retention.ms`: 7 days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Default `message.max.bytes` (Kafka's): the largest batch accepted, log overhead included.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 1_048_588;
/// Default `log.preallocate` (see docs/OPERATIONS.md, "Preallocation").
pub const DEFAULT_PREALLOCATE: bool = true;

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
    /// The window a CreateTime record's timestamp must fall in
    /// (`message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`; unbounded by
    /// default, as in Kafka). A batch with a record outside it is refused whole (I61).
    pub timestamp_bounds: TimestampBounds,
    /// `compression.type` and the KIP-390 levels: the codec produced batches are stored in
    /// (I87).
    pub compression: CompressionConfig,
    /// `confluent.key.schema.validation` / `confluent.value.schema.validation`: which parts of
    /// each produced record must carry a schema id the registry knows (I124; off by default).
    pub schema_ids: SchemaIdRule,
    /// `preallocate` (`log.preallocate`): extend the active segment's file with allocated
    /// zeros ahead of its writes once it holds 64 KiB (I190).
    pub preallocate: bool,
}

/// `compression.type` with `compression.{gzip,lz4,zstd}.level`, as Kafka honours them: a
/// produced batch in another codec than `target` is recompressed before it takes offsets
/// (I87); `producer` keeps the producer's codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressionConfig {
    /// `None` is `producer`; `Some(codec)` (`uncompressed` is `Compression::None`) the codec
    /// every stored batch has.
    pub target: Option<Compression>,
    /// `compression.gzip.level`: 1..=9, or -1 for gzip's default.
    pub gzip_level: i32,
    /// `compression.lz4.level`: 1..=17.
    pub lz4_level: i32,
    /// `compression.zstd.level`: -131072..=22.
    pub zstd_level: i32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            target: None,
            gzip_level: -1,
            lz4_level: 9,
            zstd_level: 3,
        }
    }
}

impl CompressionConfig {
    /// The values of `compression.type`, as Kafka names them.
    pub const NAMES: &'static [&'static str] =
        &["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"];

    /// Parses a `compression.type` value: `Ok(None)` for `producer`.
    pub fn parse_type(value: &str) -> Result<Option<Compression>, String> {
        Ok(Some(match value.trim() {
            "producer" => return Ok(None),
            "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => {
                return Err(format!(
                    "{other:?} is not one of {}",
                    Self::NAMES.join(", ")
                ))
            }
        }))
    }

    /// The `compression.type` name of `target`.
    pub fn type_name(target: Option<Compression>) -> &'static str {
        match target {
            None => "producer",
            Some(Compression::None) => "uncompressed",
            Some(Compression::Gzip) => "gzip",
            Some(Compression::Snappy) => "snappy",
            Some(Compression::Lz4) => "lz4",
            Some(Compression::Zstd) => "zstd",
        }
    }

    /// The level to compress `codec` at (`None`: the codec's default or no level).
    pub fn level(&self, codec: Compression) -> Option<i32> {
        match codec {
            Compression::Gzip if self.gzip_level >= 0 => Some(self.gzip_level),
            Compression::Lz4 => Some(self.lz4_level),
            Compression::Zstd => Some(self.zstd_level),
            _ => None,
        }
    }
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
            timestamp_bounds: TimestampBounds::UNBOUNDED,
            compression: CompressionConfig::default(),
            schema_ids: SchemaIdRule::default(),
            preallocate: DEFAULT_PREALLOCATE,
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
}
