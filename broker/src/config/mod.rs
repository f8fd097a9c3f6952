//! Broker settings, named as Kafka names them.
//!
//! Contract:
//! - Input: the text of a `server.properties` file (Java properties syntax: `key=value` or
//!   `key: value`, `#`/`!` comments, trailing `\` continues a line) and `--override key=value`
//!   pairs, applied in that order.
//! - Output: a validated [`BrokerConfig`], or a [`ConfigError`] naming the setting and why.
//! - Every setting is one row of [`table::SETTINGS`]; parsing, DescribeConfigs, the alter
//!   checks and the README's tables derive from it (docs/DESIGN.md, "Configuration").
//! - Unknown keys are rejected (a typo must not silently become a default), except Kafka
//!   settings we accept with no effect because they mean nothing on a single node (rows with
//!   [`Effect::NoEffect`]).

pub mod docs;
pub mod jwks;
pub mod listeners;
pub mod security;
pub mod table;
pub mod tls;
pub mod topic;

pub use table::{broker_setting, topic_setting, Effect, Setting, SETTINGS};

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use minikafka_core::record_errors::TimestampBounds;

use crate::log::{FlushPolicy, TimestampType};
pub use listeners::{Listener, SecurityProtocol};

/// Every setting the broker honours, with Kafka's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerConfig {
    /// `listeners` (with `listener.security.protocol.map` and `advertised.listeners`): where
    /// to accept connections, what each listener speaks and what it advertises; at least one.
    pub listeners: Vec<Listener>,
    /// `listener.security.protocol.map`: listener name → security protocol.
    pub listener_protocol_map: Vec<(String, SecurityProtocol)>,
    /// `sasl.enabled.mechanisms` (unprefixed): the mechanisms of a SASL listener whose own
    /// `listener.name.<l>.sasl.enabled.mechanisms` is not given.
    pub sasl_enabled_mechanisms: Vec<String>,
    /// `log.dirs` (or `log.dir`): the data directory. One directory is supported.
    pub log_dir: PathBuf,
    /// `log.segment.bytes`.
    pub segment_bytes: u64,
    /// `log.preallocate`: reserve the active segment's blocks ahead of its writes (I190).
    pub log_preallocate: bool,
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
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`: whether ACLs
    /// are enforced, and how (I48).
    pub authorizer: AuthorizerSettings,
    /// `message.max.bytes`: largest record batch accepted.
    pub message_max_bytes: usize,
    /// `socket.request.max.bytes`: largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`.
    pub connections_max_idle_ms: u64,
    /// `connections.max.reauth.ms` (KIP-368; 0: sessions have no configured limit).
    pub connections_max_reauth_ms: u64,
    /// `quota.window.num` samples of `quota.window.size.seconds`: the window client quota
    /// rates are measured over, and the longest throttle (I81).
    pub quota_window: minikafka_core::quota::Window,
    /// `socket.send.buffer.bytes`: `SO_SNDBUF` of every accepted connection; `None` (`-1`)
    /// keeps the OS default (auto-tuned, megabytes on Linux). Bounds what a client that never
    /// reads can make the broker compute before its writes stall.
    pub socket_send_buffer_bytes: Option<usize>,
    /// `max.connections`.
    pub max_connections: usize,
    /// `max.connection.creation.rate`: new connections per second, broker-wide (Kafka's
    /// default, `i32::MAX`, is no limit).
    pub max_connection_creation_rate: i64,
    /// `flush.policy` (`none`, `fsync`, `interval`) with `flush.interval.ms`.
    pub flush_policy: FlushPolicy,
    /// `log.message.timestamp.type`: the default `message.timestamp.type` of topics.
    pub log_message_timestamp_type: TimestampType,
    /// `log.message.timestamp.before.max.ms` / `log.message.timestamp.after.max.ms`: the
    /// default timestamp window of topics (unbounded, as in Kafka).
    pub log_message_timestamp_bounds: TimestampBounds,
    /// `compression.type` and `compression.{gzip,lz4,zstd}.level`: the default compression
    /// of topics (I87).
    pub compression: crate::log::CompressionConfig,
    /// `num.shards`: executor threads; by default one on up to two cores, else one per core
    /// ([`default_shard_count`]).
    pub num_shards: usize,
    /// `node.id` / `broker.id`.
    pub node_id: i32,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` when startup creates
    /// it (an existing topic keeps its count: groups map to partitions by it).
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.segment.bytes`: segment size of `__consumer_offsets`.
    pub offsets_topic_segment_bytes: u64,
    /// `offsets.topic.segment.ms` (ours; Kafka's offsets topic rolls at `log.roll.ms`, 7 days):
    /// the `segment.ms` stored with `__consumer_offsets` when startup creates it, so that its
    /// active segment rolls and is cleaned, and a restart replays the live keys plus at most
    /// this long of commits (or one segment).
    pub offsets_topic_segment_ms: i64,
    /// The group coordinator's settings.
    pub groups: GroupSettings,
    /// The transaction coordinator's settings.
    pub transactions: TxnSettings,
    /// The log cleaner's settings (`log.cleaner.*`, `log.cleanup.policy`).
    pub cleaner: crate::log::cleaner::CleanerSettings,
    /// `metrics.listener`: where the Prometheus endpoint (`GET /metrics`) listens, or `None`
    /// (the default: a broker opens no port it was not asked to, see docs/OPERATIONS.md).
    pub metrics_listener: Option<SocketAddr>,
    /// `schema.registry.listeners`: where the built-in schema registry's REST API listens
    /// (default `127.0.0.1:8081`, the port every registry client defaults to), or `None`
    /// (turned off with an empty value).
    pub schema_registry_listener: Option<SocketAddr>,
    /// `schema.registry.authentication.method=BASIC`: the registry's REST API asks for HTTP
    /// basic auth, checked against the broker's SCRAM users (I127); `NONE` (false) by default.
    pub schema_registry_basic_auth: bool,
    /// `log.format`: how log lines are written to stderr.
    pub log_format: LogFormat,
    /// The settings given in the properties file or as overrides, keys and values as written
    /// (so DescribeConfigs can say STATIC_BROKER_CONFIG for a setting given explicitly, even
    /// at its default value, list it among the synonyms, and report what was given for a
    /// setting without effect here).
    pub explicit: BTreeMap<String, String>,
}

/// The authorizer's settings: Kafka's switch (`authorizer.class.name`) and the decision's
/// configuration (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `authorizer.class.name` as written (empty: no authorizer).
    pub class_name: String,
    /// The decision's configuration (`core::auth::acl`).
    pub acl: minikafka_core::auth::acl::AuthorizerConfig,
}

impl AuthorizerSettings {
    /// The class names accepted as "on": Kafka's KRaft authorizer, and the ZooKeeper-era
    /// one that older `server.properties` files still name.
    pub const ACCEPTED_CLASSES: &'static [&'static str] = &[
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
    ];

    /// Whether ACLs are enforced and the ACL APIs served (else SECURITY_DISABLED).
    pub fn enabled(&self) -> bool {
        !self.class_name.is_empty()
    }
}

/// `log.format`: the shape of the broker's log lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event (the default).
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl LogFormat {
    /// The setting's value for this format.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// The group coordinator's settings, named and defaulted as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.min.session.timeout.ms`: shortest session timeout a member may ask for.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`: longest session timeout a member may ask for.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`: most members of one group (Kafka: unbounded; 1000 here, so a flood
    /// of joins has a bounded cost).
    pub max_size: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members.
    pub initial_rebalance_delay_ms: i32,
    /// `offsets.retention.minutes`: how long an empty group's committed offsets are kept.
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes`: longest metadata string of a committed offset.
    pub offset_metadata_max_bytes: i32,
    /// `group.consumer.heartbeat.interval.ms` (consumer protocol).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms` (consumer protocol).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.assignors` (consumer protocol), the first being the default.
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.min.session.timeout.ms` / `.max.`: bounds on
    /// `group.consumer.session.timeout.ms`.
    pub consumer_session_timeout_bounds_ms: (i32, i32),
    /// `group.consumer.min.heartbeat.interval.ms` / `.max.`: bounds on
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_bounds_ms: (i32, i32),
    /// `group.consumer.max.size`: most members of one consumer-protocol group (Kafka:
    /// unbounded; 1000 here, as `group.max.size`).
    pub consumer_max_size: i32,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: 1_000,
            initial_rebalance_delay_ms: 3_000,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4_096,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_session_timeout_ms: 45_000,
            consumer_assignors: vec!["uniform".into(), "range".into()],
            consumer_session_timeout_bounds_ms: (45_000, 60_000),
            consumer_heartbeat_interval_bounds_ms: (5_000, 15_000),
            consumer_max_size: 1_000,
        }
    }
}

/// The transaction coordinator's settings, named and defaulted as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state` when
    /// startup creates it (an existing topic keeps its count: ids map to partitions by it).
    pub state_log_num_partitions: i32,
    /// `transaction.state.log.segment.bytes`: segment size of `__transaction_state`.
    pub state_log_segment_bytes: u64,
    /// `transaction.state.log.segment.ms` (ours, as `offsets.topic.segment.ms`): the
    /// `segment.ms` stored with `__transaction_state` when created, so it rolls and is cleaned.
    pub state_log_segment_ms: i64,
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle transactional id is forgotten after this.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: i64,
    /// `transaction.partition.verification.enable` (KIP-890 part 1): a transactional produce
    /// is checked against the coordinator's partitions of the transaction.
    pub partition_verification: bool,
    /// `transaction.hold.while.completing.ms` (ours): how long the next transaction's
    /// AddPartitionsToTxn/AddOffsetsToTxn waits for the previous one's Complete record
    /// instead of being refused CONCURRENT_TRANSACTIONS (I134); 0 refuses at once, as Kafka.
    pub hold_while_completing_ms: i64,
    /// `transaction.max.transactional.ids` (ours, I38): ids per coordinator.
    pub max_transactional_ids: usize,
    /// `transaction.max.partitions.per.transaction` (ours, I38).
    pub max_partitions_per_transaction: usize,
    /// `transaction.max.held.requests` (ours, I38, I134): requests held per coordinator.
    pub max_held_requests: usize,
    /// `transaction.marker.retry.backoff.ms` (ours): before failed markers are written again.
    pub retry_backoff_ms: i64,
}

impl Default for TxnSettings {
    fn default() -> Self {
        TxnSettings {
            state_log_num_partitions: 50,
            state_log_segment_bytes: 104_857_600,
            state_log_segment_ms: 600_000,
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_timed_out_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
            partition_verification: true,
            hold_while_completing_ms: 5_000,
            max_transactional_ids: 100_000,
            max_partitions_per_transaction: 10_000,
            max_held_requests: 10_000,
            retry_backoff_ms: 100,
        }
    }
}

/// The server-side assignors the consumer protocol offers (`group.consumer.assignors`).
pub const CONSUMER_ASSIGNORS: &[&str] = &["uniform", "range"];

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
        BrokerConfig {
            listeners: vec![Listener {
                name: std::sync::Arc::from("PLAINTEXT"),
                protocol: SecurityProtocol::Plaintext,
                bind: ([127, 0, 0, 1], 9092).into(),
                advertised_host: "127.0.0.1".into(),
                advertised_port: 9092,
                sasl: Default::default(),
                tls: None,
            }],
            sasl_enabled_mechanisms: vec![
                "PLAIN".into(),
                "SCRAM-SHA-256".into(),
                "SCRAM-SHA-512".into(),
            ],
            listener_protocol_map: listeners::parse_protocol_map(listeners::DEFAULT_PROTOCOL_MAP)
                .unwrap_or_default(),
            log_dir: PathBuf::from("./data"),
            segment_bytes: 1 << 30,
            log_preallocate: crate::log::config::DEFAULT_PREALLOCATE,
            segment_ms: Some(7 * 24 * 3_600_000),
            retention_bytes: None,
            retention_ms: Some(7 * 24 * 3_600_000),
            retention_check_interval_ms: 300_000,
            index_interval_bytes: 4096,
            num_partitions: 1,
            auto_create_topics: true,
            authorizer: AuthorizerSettings::default(),
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: 104_857_600,
            connections_max_idle_ms: 600_000,
            connections_max_reauth_ms: 0,
            quota_window: minikafka_core::quota::Window::default(),
            socket_send_buffer_bytes: Some(102_400),
            max_connections: i32::MAX as usize,
            max_connection_creation_rate: i32::MAX as i64,
            flush_policy: FlushPolicy::None,
            log_message_timestamp_type: TimestampType::CreateTime,
            log_message_timestamp_bounds: TimestampBounds::UNBOUNDED,
            compression: crate::log::CompressionConfig::default(),
            num_shards: default_shard_count(),
            node_id: 0,
            offsets_topic_num_partitions: 50,
            offsets_topic_segment_bytes: 104_857_600,
            offsets_topic_segment_ms: 600_000,
            groups: GroupSettings::default(),
            transactions: TxnSettings::default(),
            cleaner: crate::log::cleaner::CleanerSettings::default(),
            metrics_listener: None,
            schema_registry_listener: Some(SocketAddr::from(([127, 0, 0, 1], 8081))),
            schema_registry_basic_auth: false,
            log_format: LogFormat::Text,
            explicit: BTreeMap::new(),
        }
    }
}

/// Cores up to which the default is one shard. Measured on a 2-core machine
/// (docs/perf-log/2026-12-01-write-and-fetch-paths.md, "Cross-shard hops"): with a second
/// shard, a request for a partition its connection's shard does not own wakes both
/// executors (~2.2 eventfd writes and 4× the `io_uring_enter` calls of a same-shard
/// request), the connection's shard is not the client's choice, and the clients share the
/// two cores; one shard answered more requests for fewer system calls. Not measured above 2 cores (no bigger machine was lent): re-measure
/// there before trusting the one-per-core default.
pub const ONE_SHARD_MAX_CORES: usize = 2;

/// The default `num.shards`: [`shard_count_for_cores`] of the available parallelism.
pub fn default_shard_count() -> usize {
    shard_count_for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// One shard on up to [`ONE_SHARD_MAX_CORES`] cores, else one per core.
pub fn shard_count_for_cores(cores: usize) -> usize {
    if cores <= ONE_SHARD_MAX_CORES {
        1
    } else {
        cores
    }
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

/// Parses `metrics.listener`: `http://host:port` (a trailing `/metrics` is allowed) or
/// `host:port`; empty or `none` turns the endpoint off.
fn parse_metrics_listener(value: &str) -> Result<Option<SocketAddr>, String> {
    if value.is_empty() || value == "none" {
        return Ok(None);
    }
    let rest = value.strip_prefix("http://").unwrap_or(value);
    let rest = rest.strip_suffix("/metrics").unwrap_or(rest);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':').ok_or("expected http://host:port")?;
    let port: u16 = port.parse().map_err(|_| "port must be 0..65535")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    resolve(value, host, port).map(Some)
}

/// The default of `schema.registry.listeners`.
pub const SCHEMA_REGISTRY_DEFAULT_LISTENER: &str = "http://127.0.0.1:8081";

/// Parses `schema.registry.listeners`: one `http://host:port` (Confluent's `listeners`
/// form; a list is refused, the registry serves one address); empty or `none` turns the
/// registry off.
fn parse_schema_registry_listener(value: &str) -> Result<Option<SocketAddr>, String> {
    let value = value.trim();
    if value.is_empty() || value == "none" {
        return Ok(None);
    }
    if value.contains(',') {
        return Err("name one listener, e.g. http://127.0.0.1:8081".into());
    }
    let rest = value
        .strip_prefix("http://")
        .ok_or("expected http://host:port (https is not served)")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = rest.rsplit_once(':').ok_or("expected http://host:port")?;
    let port: u16 = port.parse().map_err(|_| "port must be 0..65535")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    resolve(value, host, port).map(Some)
}

pub(crate) fn resolve(value: &str, host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{value}: {e}"))?
        .next()
        .ok_or_else(|| "host resolves to no address".to_string())
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

    /// Builds a configuration from resolved settings, as [`SETTINGS`] says: every key must be
    /// a broker setting (or a synonym) and pass its row's validator; then each row, in table
    /// order, applies the first of its spellings given; then [`BrokerConfig::check`].
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        for (key, value) in settings {
            let setting = broker_setting(key).ok_or_else(|| ConfigError::Unknown(key.clone()))?;
            setting
                .valid
                .check(value)
                .map_err(|why| invalid(key, value, why))?;
        }
        let mut config = BrokerConfig::default();
        for setting in SETTINGS.iter().filter(|s| s.is_broker()) {
            let Some((key, value)) = setting.spellings().find_map(|k| settings.get_key_value(k))
            else {
                continue;
            };
            if let Some(side) = &setting.broker {
                (side.apply)(&mut config, key, value).map_err(|why| invalid(key, value, why))?;
            }
        }
        security::resolve(
            &mut config.listeners,
            settings,
            &config.sasl_enabled_mechanisms.clone(),
        )
        .map_err(|(key, value, why)| invalid(&key, &value, why))?;
        // Certificates and keys load here, at startup: a bad file stops the broker (I91).
        listeners::resolve_tls(&mut config.listeners, settings)
            .map_err(|(key, value, why)| invalid(&key, &value, why))?;
        config.check()?;
        config.explicit = settings.clone();
        Ok(config)
    }

    /// The connection creation limits (connections per second, `None`: no limit): the
    /// broker-wide `max.connection.creation.rate`, and each listener's
    /// `listener.name.<l>.max.connection.creation.rate` (I160).
    pub fn connection_creation_limits(&self) -> (Option<f64>, Vec<Option<f64>>) {
        let limit = |rate: i64| (rate < i64::from(i32::MAX)).then_some(rate as f64);
        let key = "max.connection.creation.rate";
        let listeners = self
            .listeners
            .iter()
            .map(|l| {
                let prefixed = format!("{}{key}", l.config_prefix());
                self.explicit
                    .get(&prefixed)
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .and_then(limit)
            })
            .collect();
        (limit(self.max_connection_creation_rate), listeners)
    }

    /// Checks what spans several settings: session timeouts within their bounds, a batch
    /// limit within the frame limit.
    pub fn check(&self) -> Result<(), ConfigError> {
        let groups = &self.groups;
        if groups.min_session_timeout_ms > groups.max_session_timeout_ms {
            return Err(invalid(
                "group.min.session.timeout.ms",
                &groups.min_session_timeout_ms.to_string(),
                "must not exceed group.max.session.timeout.ms",
            ));
        }
        let within = |value: i32, (min, max): (i32, i32), key: &str| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(invalid(
                    key,
                    &value.to_string(),
                    format!("must be within {min}..={max} (its .min. and .max. settings)"),
                ))
            }
        };
        within(
            groups.consumer_session_timeout_ms,
            groups.consumer_session_timeout_bounds_ms,
            "group.consumer.session.timeout.ms",
        )?;
        within(
            groups.consumer_heartbeat_interval_ms,
            groups.consumer_heartbeat_interval_bounds_ms,
            "group.consumer.heartbeat.interval.ms",
        )?;
        if self.message_max_bytes > self.socket_request_max_bytes {
            return Err(invalid(
                "message.max.bytes",
                &self.message_max_bytes.to_string(),
                "must not exceed socket.request.max.bytes",
            ));
        }
        Ok(())
    }
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
        assert_eq!(config.listeners.len(), 1);
        assert_eq!(
            config.listeners[0].bind,
            "127.0.0.1:9092".parse().expect("addr")
        );
        assert_eq!(&*config.listeners[0].name, "PLAINTEXT");
        assert_eq!(config.log_dir, PathBuf::from("./data"));
        assert_eq!(config.flush_policy, FlushPolicy::None);
        assert_eq!(config.message_max_bytes, 1_048_588);
        assert_eq!(config.num_shards, default_shard_count());
    }

    #[test]
    fn one_shard_up_to_two_cores_then_one_per_core() {
        assert_eq!(shard_count_for_cores(1), 1);
        assert_eq!(shard_count_for_cores(2), 1);
        assert_eq!(shard_count_for_cores(3), 3);
        assert_eq!(shard_count_for_cores(16), 16);
    }

    #[test]
    fn properties_file_then_overrides() {
        let text = "# comment\nlisteners=PLAINTEXT://127.0.0.1:19092\nlog.dirs: /tmp/x\n\
                    log.retention.hours=1\nnum.partitions = 3\nflush.policy=interval\n\
                    flush.interval.ms=50\nnum.network.threads=3\n";
        let overrides = vec![("num.partitions".to_string(), "5".to_string())];
        let config = BrokerConfig::from_sources(Some(text), &overrides).expect("valid");
        assert_eq!(config.listeners[0].bind.port(), 19092);
        assert_eq!(config.listeners[0].advertised_port, 19092);
        assert_eq!(config.log_dir, PathBuf::from("/tmp/x"));
        assert_eq!(config.retention_ms, Some(3_600_000));
        assert_eq!(config.num_partitions, 5);
        assert_eq!(config.flush_policy, FlushPolicy::Interval { ms: 50 });
    }

    #[test]
    fn socket_send_buffer_defaults_to_kafkas_and_minus_one_keeps_the_os_default() {
        assert_eq!(
            with(&[]).expect("ok").socket_send_buffer_bytes,
            Some(102_400)
        );
        let config = with(&[("socket.send.buffer.bytes", "-1")]).expect("ok");
        assert_eq!(config.socket_send_buffer_bytes, None);
        let config = with(&[("socket.send.buffer.bytes", "16384")]).expect("ok");
        assert_eq!(config.socket_send_buffer_bytes, Some(16_384));
        for bad in ["0", "2147483648", "lots"] {
            assert!(with(&[("socket.send.buffer.bytes", bad)]).is_err(), "{bad}");
        }
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
        assert!(with(&[("listeners", "BOGUS://127.0.0.1:9093")]).is_err());
        assert!(with(&[("log.segment.bytes", "4294967296")]).is_err());
        assert!(with(&[("message.max.bytes", "200000000")]).is_err());
        assert!(with(&[("num.shards", "0")]).is_err());
    }

    /// A Kafka setting without meaning on a single node is accepted, kept for
    /// DescribeConfigs, and changes nothing else.
    #[test]
    fn no_effect_settings_are_accepted_and_kept() {
        let config = with(&[
            ("num.io.threads", "16"),
            ("sasl.kerberos.min.time.before.relogin", "60000"),
        ])
        .expect("accepted");
        assert_eq!(
            config.explicit.get("num.io.threads").map(String::as_str),
            Some("16")
        );
        let mut plain = config.clone();
        plain.explicit.clear();
        assert_eq!(plain, BrokerConfig::default());
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
    fn group_settings_have_kafkas_names_and_defaults() {
        let config = with(&[]).expect("defaults");
        assert_eq!(config.offsets_topic_num_partitions, 50);
        assert_eq!(config.groups.min_session_timeout_ms, 6_000);
        assert_eq!(config.groups.max_session_timeout_ms, 1_800_000);
        assert_eq!(config.groups.initial_rebalance_delay_ms, 3_000);
        assert_eq!(config.groups.offsets_retention_minutes, 10_080);
        assert_eq!(config.groups.offset_metadata_max_bytes, 4_096);
        let config = with(&[
            ("offsets.topic.num.partitions", "3"),
            ("offsets.topic.segment.ms", "60000"),
            ("offsets.topic.replication.factor", "3"),
            ("group.initial.rebalance.delay.ms", "0"),
            ("group.min.session.timeout.ms", "100"),
            ("group.max.size", "10"),
            ("group.consumer.assignors", "range, uniform"),
        ])
        .expect("valid");
        assert_eq!(config.offsets_topic_num_partitions, 3);
        assert_eq!(config.offsets_topic_segment_ms, 60_000);
        assert!(with(&[("offsets.topic.segment.ms", "0")]).is_err());
        assert_eq!(config.groups.initial_rebalance_delay_ms, 0);
        assert_eq!(config.groups.min_session_timeout_ms, 100);
        assert_eq!(config.groups.max_size, 10);
        assert_eq!(config.groups.consumer_assignors, vec!["range", "uniform"]);
        assert!(with(&[("offsets.topic.num.partitions", "0")]).is_err());
        assert!(with(&[("group.consumer.assignors", "sticky")]).is_err());
        let config = with(&[
            ("group.consumer.session.timeout.ms", "6000"),
            ("group.consumer.min.session.timeout.ms", "6000"),
        ])
        .expect("a 6 s consumer session within its bounds");
        assert_eq!(config.groups.consumer_session_timeout_ms, 6_000);
        assert!(with(&[("group.consumer.session.timeout.ms", "6000")]).is_err());
        assert!(with(&[("group.min.session.timeout.ms", "2000000")]).is_err());
        assert_eq!(
            with(&[("group.max.sise", "1")]),
            Err(ConfigError::Unknown("group.max.sise".into()))
        );
    }

    #[test]
    fn wildcard_listener_advertises_loopback() {
        let config = with(&[("listeners", "PLAINTEXT://0.0.0.0:9092")]).expect("ok");
        assert_eq!(config.listeners[0].advertised_host, "127.0.0.1");
        let config = with(&[
            ("listeners", "PLAINTEXT://0.0.0.0:9092"),
            ("advertised.listeners", "PLAINTEXT://kafka.local:9092"),
        ])
        .expect("ok");
        assert_eq!(config.listeners[0].advertised_host, "kafka.local");
    }

    #[test]
    fn several_named_listeners_each_with_its_protocol_and_advertised_address() {
        let config = with(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,INTERNAL://0.0.0.0:9093",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            ),
            ("advertised.listeners", "INTERNAL://broker.internal:19093"),
        ])
        .expect("ok");
        assert_eq!(config.listeners.len(), 2);
        let internal = &config.listeners[1];
        assert_eq!(internal.protocol, SecurityProtocol::Plaintext);
        assert_eq!(
            (internal.advertised_host.as_str(), internal.advertised_port),
            ("broker.internal", 19093)
        );
        assert_eq!(config.listeners[0].advertised_host, "127.0.0.1");
        assert!(with(&[("listeners", "INTERNAL://127.0.0.1:9093")]).is_err());
        assert!(with(&[("advertised.listeners", "OTHER://h:1")]).is_err());
    }

    #[test]
    fn metrics_listener_is_off_by_default_and_takes_an_http_url_or_host_port() {
        assert_eq!(with(&[]).expect("valid").metrics_listener, None);
        let expected: SocketAddr = ([127, 0, 0, 1], 9644).into();
        for value in [
            "http://127.0.0.1:9644",
            "http://127.0.0.1:9644/metrics",
            "127.0.0.1:9644",
        ] {
            let config = with(&[("metrics.listener", value)]).expect("valid");
            assert_eq!(config.metrics_listener, Some(expected), "{value}");
        }
        assert_eq!(
            with(&[("metrics.listener", "none")])
                .expect("valid")
                .metrics_listener,
            None
        );
        assert!(with(&[("metrics.listener", "http://127.0.0.1")]).is_err());
        assert!(with(&[("metrics.listener", "http://127.0.0.1:99999")]).is_err());
    }

    #[test]
    fn schema_registry_listens_on_8081_by_default_and_is_off_when_empty() {
        let default: SocketAddr = ([127, 0, 0, 1], 8081).into();
        assert_eq!(
            with(&[]).expect("valid").schema_registry_listener,
            Some(default)
        );
        let config = with(&[("schema.registry.listeners", "http://127.0.0.1:0")]).expect("ok");
        assert_eq!(
            config.schema_registry_listener,
            Some(([127, 0, 0, 1], 0).into())
        );
        for off in ["", "none"] {
            let config = with(&[("schema.registry.listeners", off)]).expect("valid");
            assert_eq!(config.schema_registry_listener, None, "{off:?}");
        }
        for bad in [
            "127.0.0.1:8081",
            "https://127.0.0.1:8081",
            "http://a:1,http://b:2",
            "http://127.0.0.1",
        ] {
            assert!(
                with(&[("schema.registry.listeners", bad)]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn log_format_is_text_or_json() {
        assert_eq!(with(&[]).expect("valid").log_format, LogFormat::Text);
        let json = with(&[("log.format", "json")]).expect("valid");
        assert_eq!(json.log_format, LogFormat::Json);
        assert!(with(&[("log.format", "xml")]).is_err());
    }
}
