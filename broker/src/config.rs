//! Broker settings, named as Kafka names them.
//!
//! Contract:
//! - Input: the text of a `server.properties` file (Java properties syntax: `key=value` or
//!   `key: value`, `#`/`!` comments, trailing `\` continues a line) and `--override key=value`
//!   pairs, applied in that order.
//! - Output: a validated [`BrokerConfig`], or a [`ConfigError`] naming the setting and why.
//! - Unknown keys are rejected (a typo must not silently become a default), except Kafka
//!   settings we accept and ignore because they have no meaning for a single node
//!   ([`IGNORED_KAFKA_KEYS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use crate::log::FlushPolicy;

/// Every setting the broker honours, with Kafka's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    /// `listeners`: where to accept connections (`PLAINTEXT://host:port`).
    pub listener: SocketAddr,
    /// `advertised.listeners`: host and port clients are told to connect to.
    pub advertised_host: String,
    /// Port part of `advertised.listeners`.
    pub advertised_port: u16,
    /// `log.dirs` (or `log.dir`): the data directory. One directory is supported.
    pub log_dir: PathBuf,
    /// `log.segment.bytes`.
    pub segment_bytes: u64,
    /// `log.roll.ms` (or `log.roll.hours`): roll the active segment after this age.
    pub segment_ms: Option<i64>,
    /// `log.retention.bytes` (-1 = unlimited).
    pub retention_bytes: Option<u64>,
    /// `log.retention.ms` (or `.minutes`, `.hours`; -1 = unlimited).
    pub retention_ms: Option<i64>,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// `log.index.interval.bytes`.
    pub index_interval_bytes: u32,
    /// `num.partitions`: partitions of auto-created topics.
    pub num_partitions: i32,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    /// `message.max.bytes`: largest record batch accepted.
    pub message_max_bytes: usize,
    /// `socket.request.max.bytes`: largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`.
    pub connections_max_idle_ms: u64,
    /// `max.connections`.
    pub max_connections: usize,
    /// `flush.policy` (`none`, `fsync`, `interval`) with `flush.interval.ms`.
    pub flush_policy: FlushPolicy,
    /// `num.shards`: executor threads, one per core by default.
    pub num_shards: usize,
    /// `node.id` / `broker.id`.
    pub node_id: i32,
    /// The keys given in the properties file or as overrides, as written (so DescribeConfigs
    /// can say STATIC_BROKER_CONFIG for a setting given explicitly, even at its default value).
    pub explicit: BTreeSet<String>,
}

/// Kafka settings accepted and ignored: they configure replication, security or JVM matters
/// that a single node without TLS does not have. Accepting them lets users start us with a
/// stock `server.properties`.
pub const IGNORED_KAFKA_KEYS: &[&str] = &[
    "process.roles",
    "controller.quorum.voters",
    "controller.listener.names",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "group.initial.rebalance.delay.ms",
    "default.replication.factor",
    "min.insync.replicas",
    "zookeeper.connect",
    "zookeeper.connection.timeout.ms",
    "controller.quorum.bootstrap.servers",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
];

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// The key is neither a setting we honour nor one we knowingly ignore.
    #[error("unknown setting `{0}` (see README for the supported settings)")]
    Unknown(String),
    /// The value does not parse or is out of range.
    #[error("invalid value `{value}` for `{key}`: {why}")]
    Invalid {
        /// The setting.
        key: String,
        /// The value given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// A line is not `key=value`.
    #[error("line {line}: expected `key=value`, found `{text}`")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let listener: SocketAddr = ([127, 0, 0, 1], 9092).into();
        BrokerConfig {
            listener,
            advertised_host: "127.0.0.1".into(),
            advertised_port: 9092,
            log_dir: PathBuf::from("./data"),
            segment_bytes: 1 << 30,
            segment_ms: Some(7 * 24 * 3_600_000),
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3_600_000),
            retention_check_interval_ms: 300_000,
            index_interval_bytes: 4096,
            num_partitions: 1,
            auto_create_topics: true,
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: 104_857_600,
            connections_max_idle_ms: 600_000,
            max_connections: i32::MAX as usize,
            flush_policy: FlushPolicy::None,
            num_shards: default_shard_count(),
            node_id: 0,
            explicit: BTreeSet::new(),
        }
    }
}

/// One shard per available core.
pub fn default_shard_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Parses Java-properties text into ordered `(key, value)` pairs.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    let mut pending = String::new();
    let mut pending_line = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if pending.is_empty() {
            pending_line = index + 1;
        }
        if let Some(stripped) = line.strip_suffix('\\') {
            pending.push_str(stripped);
            continue;
        }
        pending.push_str(line);
        let logical = std::mem::take(&mut pending);
        let split = logical
            .find(['=', ':'])
            .ok_or_else(|| ConfigError::Syntax {
                line: pending_line,
                text: logical.clone(),
            })?;
        let key = logical[..split].trim();
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                line: pending_line,
                text: logical.clone(),
            });
        }
        pairs.push((key.to_string(), logical[split + 1..].trim().to_string()));
    }
    if !pending.is_empty() {
        return Err(ConfigError::Syntax {
            line: pending_line,
            text: pending,
        });
    }
    Ok(pairs)
}

fn invalid(key: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value: value.into(),
        why: why.into(),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "expected a number in range"))
}

/// `-1` (or any negative) means unlimited, as in Kafka.
fn parse_limit(key: &str, value: &str) -> Result<Option<i64>, ConfigError> {
    let n: i64 = parse_num(key, value)?;
    Ok((n >= 0).then_some(n))
}

fn parse_positive<T>(key: &str, value: &str) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + Default,
{
    let n: T = parse_num(key, value)?;
    if n <= T::default() {
        return Err(invalid(key, value, "must be positive"));
    }
    Ok(n)
}

/// Parses `PLAINTEXT://host:port` (the only listener security protocol we speak).
fn parse_listener(key: &str, value: &str) -> Result<(String, u16), ConfigError> {
    let first = value.split(',').next().unwrap_or("").trim();
    if value.contains(',') {
        return Err(invalid(key, value, "one listener is supported"));
    }
    let rest = first
        .strip_prefix("PLAINTEXT://")
        .ok_or_else(|| invalid(key, value, "expected PLAINTEXT://host:port"))?;
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| invalid(key, value, "expected PLAINTEXT://host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| invalid(key, value, "port must be 0..65535"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok((host.to_string(), port))
}

impl BrokerConfig {
    /// Builds a configuration from properties text and overrides (applied after the file).
    pub fn from_sources(
        properties: Option<&str>,
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let mut settings: BTreeMap<String, String> = BTreeMap::new();
        if let Some(text) = properties {
            settings.extend(parse_properties(text)?);
        }
        settings.extend(overrides.iter().cloned());
        Self::from_settings(&settings)
    }

    /// Builds a configuration from resolved settings.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut config = BrokerConfig::default();
        let mut advertised: Option<(String, u16)> = None;
        let mut flush_interval_ms: u64 = 1000;
        let mut flush_kind = "none".to_string();
        let (mut retention_ms, mut retention_minutes, mut retention_hours) = (None, None, None);
        let (mut roll_ms, mut roll_hours) = (None, None);
        for (key, value) in settings {
            let (k, v) = (key.as_str(), value.as_str());
            match k {
                "listeners" => {
                    let (host, port) = parse_listener(k, v)?;
                    config.listener = resolve(k, v, &host, port)?;
                }
                "advertised.listeners" => advertised = Some(parse_listener(k, v)?),
                "log.dirs" | "log.dir" => {
                    if v.contains(',') {
                        return Err(invalid(k, v, "one data directory is supported"));
                    }
                    if v.is_empty() {
                        return Err(invalid(k, v, "must not be empty"));
                    }
                    config.log_dir = PathBuf::from(v);
                }
                "log.segment.bytes" => {
                    let n: u64 = parse_positive(k, v)?;
                    // A segment holds 32-bit positions (I6); Kafka's minimum is 14 bytes.
                    if !(14..=i32::MAX as u64).contains(&n) {
                        return Err(invalid(k, v, "must be between 14 and 2147483647"));
                    }
                    config.segment_bytes = n;
                }
                "log.roll.ms" => roll_ms = Some(parse_positive::<i64>(k, v)?),
                "log.roll.hours" => roll_hours = Some(parse_positive::<i64>(k, v)?),
                "log.retention.bytes" => {
                    config.retention_bytes = parse_limit(k, v)?.map(|n| n as u64)
                }
                "log.retention.ms" => retention_ms = Some(parse_limit(k, v)?),
                "log.retention.minutes" => retention_minutes = Some(parse_limit(k, v)?),
                "log.retention.hours" => retention_hours = Some(parse_limit(k, v)?),
                "log.retention.check.interval.ms" => {
                    config.retention_check_interval_ms = parse_positive(k, v)?
                }
                "log.index.interval.bytes" => config.index_interval_bytes = parse_num(k, v)?,
                "num.partitions" => config.num_partitions = parse_positive(k, v)?,
                "auto.create.topics.enable" => {
                    config.auto_create_topics = match v {
                        "true" => true,
                        "false" => false,
                        _ => return Err(invalid(k, v, "expected true or false")),
                    }
                }
                "message.max.bytes" => {
                    let n: usize = parse_positive(k, v)?;
                    if n > i32::MAX as usize {
                        return Err(invalid(k, v, "must fit in 31 bits"));
                    }
                    config.message_max_bytes = n;
                }
                "socket.request.max.bytes" => {
                    let n: usize = parse_positive(k, v)?;
                    if n > i32::MAX as usize {
                        return Err(invalid(k, v, "must fit in 31 bits"));
                    }
                    config.socket_request_max_bytes = n;
                }
                "connections.max.idle.ms" => config.connections_max_idle_ms = parse_positive(k, v)?,
                "max.connections" => config.max_connections = parse_positive(k, v)?,
                "flush.policy" => match v {
                    "none" | "fsync" | "interval" => flush_kind = v.to_string(),
                    _ => return Err(invalid(k, v, "expected none, fsync or interval")),
                },
                "flush.interval.ms" => flush_interval_ms = parse_positive(k, v)?,
                "num.shards" => {
                    let n: usize = parse_positive(k, v)?;
                    if n > 1024 {
                        return Err(invalid(k, v, "at most 1024 shards"));
                    }
                    config.num_shards = n;
                }
                "node.id" | "broker.id" => config.node_id = parse_num(k, v)?,
                _ if IGNORED_KAFKA_KEYS.contains(&k) => {}
                _ => return Err(ConfigError::Unknown(key.clone())),
            }
        }
        // Kafka's precedence: ms, then minutes, then hours.
        if let Some(ms) = retention_ms
            .or(retention_minutes.map(|m| m.map(|m| m.saturating_mul(60_000))))
            .or(retention_hours.map(|h| h.map(|h| h.saturating_mul(3_600_000))))
        {
            config.retention_ms = ms;
        }
        if let Some(ms) = roll_ms.or(roll_hours.map(|h| h.saturating_mul(3_600_000))) {
            config.segment_ms = Some(ms);
        }
        config.flush_policy = match flush_kind.as_str() {
            "fsync" => FlushPolicy::Fsync,
            "interval" => FlushPolicy::Interval {
                ms: flush_interval_ms,
            },
            _ => FlushPolicy::None,
        };
        if config.message_max_bytes > config.socket_request_max_bytes {
            return Err(invalid(
                "message.max.bytes",
                &config.message_max_bytes.to_string(),
                "must not exceed socket.request.max.bytes",
            ));
        }
        let (host, port) = advertised.unwrap_or_else(|| {
            let ip = config.listener.ip();
            let host = if ip.is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                ip.to_string()
            };
            (host, config.listener.port())
        });
        config.advertised_host = host;
        config.advertised_port = port;
        config.explicit = settings.keys().cloned().collect();
        Ok(config)
    }
}

fn resolve(key: &str, value: &str, host: &str, port: u16) -> Result<SocketAddr, ConfigError> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| invalid(key, value, e.to_string()))?
        .next()
        .ok_or_else(|| invalid(key, value, "host resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(overrides: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let pairs: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_sources(None, &pairs)
    }

    #[test]
    fn defaults_match_the_readme() {
        let config = with(&[]).expect("defaults");
        assert_eq!(config.listener, "127.0.0.1:9092".parse().expect("addr"));
        assert_eq!(config.log_dir, PathBuf::from("./data"));
        assert_eq!(config.flush_policy, FlushPolicy::None);
        assert_eq!(config.message_max_bytes, 1_048_588);
        assert!(config.num_shards >= 1);
    }

    #[test]
    fn properties_file_then_overrides() {
        let text = "# comment\nlisteners=PLAINTEXT://127.0.0.1:19092\nlog.dirs: /tmp/x\n\
                    log.retention.hours=1\nnum.partitions = 3\nflush.policy=interval\n\
                    flush.interval.ms=50\nnum.network.threads=3\n";
        let overrides = vec![("num.partitions".to_string(), "5".to_string())];
        let config = BrokerConfig::from_sources(Some(text), &overrides).expect("valid");
        assert_eq!(config.listener.port(), 19092);
        assert_eq!(config.advertised_port, 19092);
        assert_eq!(config.log_dir, PathBuf::from("/tmp/x"));
        assert_eq!(config.retention_ms, Some(3_600_000));
        assert_eq!(config.num_partitions, 5);
        assert_eq!(config.flush_policy, FlushPolicy::Interval { ms: 50 });
    }

    #[test]
    fn retention_precedence_and_unlimited() {
        let config = with(&[("log.retention.ms", "-1"), ("log.retention.hours", "2")]).expect("ok");
        assert_eq!(config.retention_ms, None);
        let config = with(&[("log.retention.bytes", "1000")]).expect("ok");
        assert_eq!(config.retention_bytes, Some(1000));
    }

    #[test]
    fn unknown_and_invalid_settings_are_rejected_with_their_name() {
        assert_eq!(
            with(&[("log.segmnt.bytes", "10")]),
            Err(ConfigError::Unknown("log.segmnt.bytes".into()))
        );
        let err = with(&[("num.partitions", "zero")]).expect_err("invalid");
        assert!(err.to_string().contains("num.partitions"), "{err}");
        assert!(with(&[("flush.policy", "sometimes")]).is_err());
        assert!(with(&[("listeners", "SSL://127.0.0.1:9093")]).is_err());
        assert!(with(&[("log.segment.bytes", "4294967296")]).is_err());
        assert!(with(&[("message.max.bytes", "200000000")]).is_err());
        assert!(with(&[("num.shards", "0")]).is_err());
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let err = parse_properties("a=1\njust words\n").expect_err("syntax");
        assert_eq!(
            err,
            ConfigError::Syntax {
                line: 2,
                text: "just words".into()
            }
        );
        let pairs = parse_properties("a=1\\\n2\n").expect("continuation");
        assert_eq!(pairs, vec![("a".to_string(), "12".to_string())]);
    }

    #[test]
    fn wildcard_listener_advertises_loopback() {
        let config = with(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]).expect("ok");
        assert_eq!(config.advertised_host, "127.0.0.1");
        let config = with(&[
            ("listeners", "PLAINTEXT://0.0.0.0:9092"),
            ("advertised.listeners", "PLAINTEXT://kafka.local:9092"),
        ])
        .expect("ok");
        assert_eq!(config.advertised_host, "kafka.local");
    }
}
