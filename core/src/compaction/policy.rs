//! `cleanup.policy` and the per-topic compaction settings, under Kafka's names.
//!
//! Contract: parsing and plain values; no I/O. The broker maps a parse error to
//! INVALID_CONFIG.

/// What happens to old data: deleted by retention, compacted, or both (Kafka's
/// `cleanup.policy`: `delete`, `compact`, or `compact,delete` in either order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CleanupPolicy {
    /// Retention (`retention.ms`, `retention.bytes`) deletes old segments.
    pub delete: bool,
    /// The cleaner keeps the latest record per key.
    pub compact: bool,
}

impl Default for CleanupPolicy {
    /// Kafka's default: `delete`.
    fn default() -> Self {
        CleanupPolicy::DELETE
    }
}

/// A `cleanup.policy` value that names no policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cleanup.policy {0:?}: expected delete, compact or compact,delete")]
pub struct PolicyParseError(pub String);

impl CleanupPolicy {
    /// `delete`.
    pub const DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: false,
    };
    /// `compact`.
    pub const COMPACT: CleanupPolicy = CleanupPolicy {
        delete: false,
        compact: true,
    };
    /// `compact,delete`.
    pub const COMPACT_DELETE: CleanupPolicy = CleanupPolicy {
        delete: true,
        compact: true,
    };

    /// Parses a comma-separated list of `delete` and `compact` (case-insensitive, spaces
    /// around items ignored, each at most once, at least one).
    pub fn parse(value: &str) -> Result<Self, PolicyParseError> {
        let mut policy = CleanupPolicy {
            delete: false,
            compact: false,
        };
        let bad = || PolicyParseError(value.to_string());
        for item in value.split(',') {
            let flag = match item.trim().to_ascii_lowercase().as_str() {
                "delete" => &mut policy.delete,
                "compact" => &mut policy.compact,
                _ => return Err(bad()),
            };
            if *flag {
                return Err(bad());
            }
            *flag = true;
        }
        Ok(policy)
    }

    /// The canonical text, as DescribeConfigs reports it.
    pub fn as_str(self) -> &'static str {
        match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        }
    }
}

/// A topic's compaction settings (Kafka's topic-level names, broker defaults from the
/// `log.cleaner.*` settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionConfig {
    /// `min.cleanable.dirty.ratio` in parts per million (Kafka: a double, default 0.5).
    /// Stored as an integer so core compares without floating point.
    pub min_cleanable_dirty_ratio_ppm: u32,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long (default 0).
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty record becomes cleanable after this long whatever
    /// the ratio (default `i64::MAX`, never).
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone is kept (default one day).
    pub delete_retention_ms: i64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            min_cleanable_dirty_ratio_ppm: 500_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// Parses a ratio in `[0, 1]` written as a decimal (`"0.5"`, `"1"`, `"0.01"`) into parts
/// per million, without floating point. `None` when it is not such a number.
pub fn parse_ratio_ppm(value: &str) -> Option<u32> {
    let value = value.trim();
    let (whole, fraction) = match value.split_once('.') {
        Some((w, f)) => (w, f),
        None => (value, ""),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    if !whole.chars().all(|c| c.is_ascii_digit()) || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut ppm = whole.checked_mul(1_000_000)?;
    let mut scale = 100_000u64;
    for digit in fraction.bytes() {
        let d = u64::from(digit - b'0');
        if scale == 0 {
            if d != 0 {
                return None; // finer than a millionth
            }
            continue;
        }
        ppm += d * scale;
        scale /= 10;
    }
    (ppm <= 1_000_000).then_some(ppm as u32)
}

/// Formats parts per million as the shortest decimal (`500000` → `"0.5"`).
pub fn format_ratio_ppm(ppm: u32) -> String {
    let whole = ppm / 1_000_000;
    let fraction = ppm % 1_000_000;
    if fraction == 0 {
        return format!("{whole}.0");
    }
    let digits = format!("{fraction:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_as_kafka_spells_them() {
        assert_eq!(CleanupPolicy::parse("delete"), Ok(CleanupPolicy::DELETE));
        assert_eq!(CleanupPolicy::parse("compact"), Ok(CleanupPolicy::COMPACT));
        assert_eq!(
            CleanupPolicy::parse("compact,delete"),
            Ok(CleanupPolicy::COMPACT_DELETE)
        );
        assert_eq!(
            CleanupPolicy::parse("Delete, Compact"),
            Ok(CleanupPolicy::COMPACT_DELETE)
        );
        for bad in ["", "compact,compact", "keep", "delete,", ","] {
            assert!(CleanupPolicy::parse(bad).is_err(), "{bad:?}");
        }
        for p in [
            CleanupPolicy::DELETE,
            CleanupPolicy::COMPACT,
            CleanupPolicy::COMPACT_DELETE,
        ] {
            assert_eq!(CleanupPolicy::parse(p.as_str()), Ok(p));
        }
    }

    #[test]
    fn ratios_parse_exactly() {
        assert_eq!(parse_ratio_ppm("0.5"), Some(500_000));
        assert_eq!(parse_ratio_ppm("1"), Some(1_000_000));
        assert_eq!(parse_ratio_ppm("1.0"), Some(1_000_000));
        assert_eq!(parse_ratio_ppm("0"), Some(0));
        assert_eq!(parse_ratio_ppm(".25"), Some(250_000));
        assert_eq!(parse_ratio_ppm("0.0000010"), Some(1));
        for bad in ["", ".", "1.5", "-0.1", "0.0000001", "abc", "1e-3"] {
            assert_eq!(parse_ratio_ppm(bad), None, "{bad:?}");
        }
        for ppm in [0, 1, 10, 500_000, 123_456, 1_000_000] {
            assert_eq!(parse_ratio_ppm(&format_ratio_ppm(ppm)), Some(ppm));
        }
    }
}
