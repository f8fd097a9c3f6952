//! The broker-level cleaner settings, under Kafka's names (`log.cleaner.*`,
//! `log.cleanup.policy`; their rows in `crate::config::table` call [`CleanerSettings::apply`]),
//! and the topic defaults they give.

use minikafka_core::compaction::policy::{parse_ratio_ppm, CleanupPolicy, CompactionConfig};

/// The cleaner's broker-level settings, Kafka's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable`: run the cleaner at all.
    pub enable: bool,
    /// `log.cleaner.backoff.ms`: how often each shard's cleaner looks for work.
    pub backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the key map's memory budget, per shard (Kafka splits
    /// it among cleaner threads; here one cleaner runs per shard).
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read-plus-write rate of each shard's cleaner;
    /// `None` = unthrottled (Kafka's default, `Double.MaxValue`).
    pub io_max_bytes_per_second: Option<u64>,
    /// `log.cleanup.policy`: the default `cleanup.policy` of topics.
    pub default_policy: CleanupPolicy,
    /// `log.cleaner.min.cleanable.ratio`, in parts per million.
    pub min_cleanable_ratio_ppm: u32,
    /// `log.cleaner.min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `log.cleaner.max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `log.cleaner.delete.retention.ms`.
    pub delete_retention_ms: i64,
}

impl Default for CleanerSettings {
    fn default() -> Self {
        let compaction = CompactionConfig::default();
        CleanerSettings {
            enable: true,
            backoff_ms: 15_000,
            dedupe_buffer_bytes: 128 << 20,
            io_max_bytes_per_second: None,
            default_policy: CleanupPolicy::DELETE,
            min_cleanable_ratio_ppm: compaction.min_cleanable_dirty_ratio_ppm,
            min_compaction_lag_ms: compaction.min_compaction_lag_ms,
            max_compaction_lag_ms: compaction.max_compaction_lag_ms,
            delete_retention_ms: compaction.delete_retention_ms,
        }
    }
}

impl CleanerSettings {
    /// The topic-level defaults these settings give.
    pub fn compaction_defaults(&self) -> CompactionConfig {
        CompactionConfig {
            min_cleanable_dirty_ratio_ppm: self.min_cleanable_ratio_ppm,
            min_compaction_lag_ms: self.min_compaction_lag_ms,
            max_compaction_lag_ms: self.max_compaction_lag_ms,
            delete_retention_ms: self.delete_retention_ms,
        }
    }

    /// Applies one setting; `Ok(false)` when `key` is not a cleaner setting, `Err(why)` for a
    /// bad value.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let v = value.trim();
        let number = |min: i64| -> Result<i64, String> {
            match v.parse::<i64>() {
                Ok(n) if n >= min => Ok(n),
                _ => Err(format!("expected an integer of at least {min}")),
            }
        };
        match key {
            "log.cleaner.enable" => {
                self.enable = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err("expected true or false".into()),
                }
            }
            "log.cleaner.backoff.ms" => self.backoff_ms = number(1)? as u64,
            "log.cleaner.dedupe.buffer.size" => {
                self.dedupe_buffer_bytes = usize::try_from(number(1)?).map_err(|e| e.to_string())?
            }
            "log.cleaner.io.max.bytes.per.second" => {
                // Kafka's default is Double.MaxValue: accept a decimal, keep whole bytes.
                let rate: f64 = v.parse().map_err(|_| "expected a number".to_string())?;
                if rate.is_nan() || rate < 1.0 {
                    return Err("expected at least 1".into());
                }
                self.io_max_bytes_per_second = (rate < u64::MAX as f64).then_some(rate as u64);
            }
            "log.cleanup.policy" => {
                self.default_policy = CleanupPolicy::parse(v).map_err(|e| e.to_string())?
            }
            "log.cleaner.min.cleanable.ratio" => {
                self.min_cleanable_ratio_ppm =
                    parse_ratio_ppm(v).ok_or_else(|| "expected a number in [0, 1]".to_string())?
            }
            "log.cleaner.min.compaction.lag.ms" => self.min_compaction_lag_ms = number(0)?,
            "log.cleaner.max.compaction.lag.ms" => self.max_compaction_lag_ms = number(1)?,
            "log.cleaner.delete.retention.ms" => self.delete_retention_ms = number(0)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_applies_and_bad_values_are_refused() {
        let mut s = CleanerSettings::default();
        for (key, value) in [
            ("log.cleaner.backoff.ms", "100"),
            ("log.cleaner.dedupe.buffer.size", "1024"),
            ("log.cleaner.delete.retention.ms", "5"),
            ("log.cleaner.enable", "false"),
            ("log.cleaner.io.max.bytes.per.second", "1048576"),
            ("log.cleaner.max.compaction.lag.ms", "9"),
            ("log.cleaner.min.cleanable.ratio", "0.1"),
            ("log.cleaner.min.compaction.lag.ms", "3"),
            ("log.cleanup.policy", "compact"),
        ] {
            let before = s.clone();
            assert_eq!(s.apply(key, value), Ok(true), "{key}");
            assert_ne!(s, before, "{key} has no effect");
            let row = crate::config::broker_setting(key).expect("a row of the settings table");
            assert_eq!(row.valid.check(value), Ok(()), "{key}");
        }
        assert_eq!(s.default_policy, CleanupPolicy::COMPACT);
        assert_eq!(s.io_max_bytes_per_second, Some(1 << 20));
        assert_eq!(
            s.compaction_defaults().min_cleanable_dirty_ratio_ppm,
            100_000
        );
        for (key, bad) in [
            ("log.cleaner.enable", "yes"),
            ("log.cleaner.backoff.ms", "0"),
            ("log.cleaner.min.cleanable.ratio", "2"),
            ("log.cleanup.policy", "keep"),
            ("log.cleaner.io.max.bytes.per.second", "0"),
        ] {
            assert!(s.apply(key, bad).is_err(), "{key}={bad}");
        }
        assert_eq!(s.apply("log.retention.ms", "1"), Ok(false));
        // Kafka's default for the rate parses as unthrottled.
        let mut d = CleanerSettings::default();
        d.apply(
            "log.cleaner.io.max.bytes.per.second",
            "1.7976931348623157E308",
        )
        .expect("Double.MaxValue");
        assert_eq!(d.io_max_bytes_per_second, None);
    }
}
