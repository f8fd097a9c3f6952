//! Every broker and topic setting, one row each, the way Kafka's `ConfigDef` declares them.
//!
//! Contract:
//! - [`SETTINGS`] is the only list of setting names in the broker. A row gives the name, the
//!   Kafka type, the default (as `server.properties` writes it), the validator of a broker
//!   value, the scope (broker, topic, or both, with the topic's name), whether AlterConfigs may
//!   change it at run time, its other spellings, what the broker does with it and a one-line
//!   doc; then how the broker side is applied to a [`BrokerConfig`] and shown, and how the
//!   topic side is checked, applied to a [`LogConfig`] and shown.
//! - Derived from it: parsing of `server.properties` and `--override`
//!   ([`BrokerConfig::from_settings`]), the dynamic broker keys
//!   (`server::dynamic_config`), DescribeConfigs (`server::config_entries`), the checks of
//!   CreateTopics, AlterConfigs and IncrementalAlterConfigs ([`super::topic`]), the README's
//!   settings tables ([`super::docs`]) and the test that `config/server.properties` matches.
//! - Rows apply in table order (a setting given as two, `flush.policy` then
//!   `flush.interval.ms`, relies on it); among a row's spellings the first one given wins
//!   (`log.retention.ms` over `.minutes` over `.hours`, as Kafka).
//! - Adding a setting is one row here plus the code that uses the value: a broker setting
//!   is a `broker` row whose `apply` stores the parsed value in a [`BrokerConfig`] field (or
//!   a group of them, as `groups` and `cleaner`) and whose `show` gives it back for
//!   DescribeConfigs; a topic setting adds `.topic(name, …)` (or is a topic-only row) with
//!   an `apply` to a [`LogConfig`] field; a Kafka setting meaning nothing on one node is an
//!   `inert` row. Parsing, validation, DescribeConfigs, the alter checks, the README and the
//!   `server.properties` test then know it (the last asks for a line in the file).

use minikafka_core::compaction::policy::{format_ratio_ppm, parse_ratio_ppm, CleanupPolicy};

use super::{
    listeners, parse_metrics_listener, parse_schema_registry_listener, resolve, security, tls,
    BrokerConfig, LogFormat, CONSUMER_ASSIGNORS,
};
use crate::log::{CompressionConfig, FlushPolicy, LogConfig, TimestampType};

/// Kafka's type of a setting (DescribeConfigs v3+ `config_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `true` or `false`.
    Boolean,
    /// Free text or one of a few names.
    String,
    /// A 16-bit integer.
    Short,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A floating-point number.
    Double,
    /// A comma-separated list.
    List,
    /// A secret: DescribeConfigs marks it sensitive and never answers its value.
    Password,
}

impl Kind {
    /// The code DescribeConfigs answers for this type.
    pub fn code(self) -> i8 {
        match self {
            Kind::Boolean => 1,
            Kind::String => 2,
            Kind::Int => 3,
            Kind::Short => 4,
            Kind::Long => 5,
            Kind::Double => 6,
            Kind::List => 7,
            Kind::Password => 9,
        }
    }
}

/// Where a setting applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A broker setting only.
    Broker,
    /// A topic setting only (named by the row's name).
    Topic,
    /// A broker setting that is the default of a topic setting named `topic` (Kafka's
    /// synonym: `log.retention.ms` ↔ `retention.ms`).
    Both {
        /// The topic-level name.
        topic: &'static str,
    },
}

/// What this broker does with a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Acted on.
    Honoured,
    /// Accepted and stored without effect here; the reason is what DescribeConfigs says.
    NoEffect(&'static str),
    /// Refused with INVALID_CONFIG: the broker cannot keep its word on it.
    Refused(&'static str),
}

/// Which values a setting takes.
#[derive(Clone, Copy, Debug)]
pub enum Valid {
    /// Any text.
    Any,
    /// `true` or `false`.
    Bool,
    /// An integer in `min..=max`.
    Range(i64, i64),
    /// A negative number (unlimited, as `-1`) or an integer in `0..=max`.
    Unlimited(i64),
    /// One of these names, exactly.
    OneOf(&'static [&'static str]),
    /// A check of its own, and how the README states it.
    Check(fn(&str) -> Result<(), String>, &'static str),
}

impl Valid {
    /// `Ok` when `value` is acceptable, else why not.
    pub fn check(&self, value: &str) -> Result<(), String> {
        match *self {
            Valid::Any => Ok(()),
            Valid::Bool => bool_value(value).map(drop),
            Valid::Range(min, max) => match value.parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(()),
                _ => Err(format!("expected an integer in {min}..={max}")),
            },
            Valid::Unlimited(max) => match value.parse::<i64>() {
                Ok(n) if n <= max => Ok(()),
                _ => Err(format!("expected -1 (unlimited) or an integer up to {max}")),
            },
            Valid::OneOf(names) => {
                if names.contains(&value) {
                    Ok(())
                } else {
                    Err(format!("expected {}", names.join(" or ")))
                }
            }
            Valid::Check(check, _) => check(value),
        }
    }

    /// The accepted values in words, for the README.
    pub fn describe(&self) -> String {
        match *self {
            Valid::Any => String::new(),
            Valid::Bool => "true, false".into(),
            Valid::Range(min, i64::MAX) => format!("at least {min}"),
            Valid::Range(min, max) => format!("{min}..{max}"),
            Valid::Unlimited(i64::MAX) => "-1 (unlimited), at least 0".into(),
            Valid::Unlimited(max) => format!("-1 (unlimited), 0..{max}"),
            Valid::OneOf(names) => names.join(", "),
            Valid::Check(_, words) => words.into(),
        }
    }
}

/// Applies a broker value (already validated) given under a key (the name or a synonym).
pub type ApplyBroker = fn(&mut BrokerConfig, &str, &str) -> Result<(), String>;
/// Applies a topic-level override to a partition's log configuration.
pub type ApplyTopic = fn(&mut LogConfig, &str) -> Result<(), String>;

/// How a broker setting reaches the typed configuration, and how it is shown.
#[derive(Clone, Copy, Debug)]
pub struct BrokerSide {
    /// Stores a value (already validated) given under `key` (the name or a synonym).
    pub apply: ApplyBroker,
    /// The value in force, as DescribeConfigs answers it.
    pub show: fn(&BrokerConfig) -> String,
}

/// How a topic setting is checked, applied to a partition's log and shown.
#[derive(Clone, Copy, Debug)]
pub struct TopicSide {
    /// Values the broker keeps its word on (numbers are checked when applied).
    pub check: Valid,
    /// Applies an override; `None` for a setting that changes no [`LogConfig`] field by itself.
    pub apply: Option<ApplyTopic>,
    /// The effective value, when DescribeConfigs always lists the setting.
    pub show: Option<fn(&LogConfig) -> String>,
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// Kafka's name (the broker's name for a [`Scope::Both`] row).
    pub name: &'static str,
    /// Kafka's type.
    pub kind: Kind,
    /// The default as `server.properties` writes it; empty when it depends on other settings
    /// or on the machine (the doc says how).
    pub default: &'static str,
    /// Which broker values are accepted.
    pub valid: Valid,
    /// Broker, topic or both.
    pub scope: Scope,
    /// Whether AlterConfigs may change the broker value at run time (topic values always may).
    pub dynamic: bool,
    /// Other broker spellings, by precedence after the name (Kafka's synonyms).
    pub synonyms: &'static [&'static str],
    /// What the broker does with it.
    pub effect: Effect,
    /// One line for the README.
    pub doc: &'static str,
    /// The broker side; `None` for a broker setting with no effect (or a topic-only row).
    pub broker: Option<BrokerSide>,
    /// The topic side; `None` for a broker-only row.
    pub topic: Option<TopicSide>,
}

impl Setting {
    /// The topic-level name, for a row with a topic side.
    pub fn topic_name(&self) -> Option<&'static str> {
        match self.scope {
            Scope::Broker => None,
            Scope::Topic => Some(self.name),
            Scope::Both { topic } => Some(topic),
        }
    }

    /// Whether the broker accepts this name in `server.properties`.
    pub fn is_broker(&self) -> bool {
        self.scope != Scope::Topic
    }

    /// The broker spellings: the name, then its synonyms.
    pub fn spellings(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.synonyms.iter().copied())
    }

    const fn dynamic(self) -> Self {
        Setting {
            dynamic: true,
            ..self
        }
    }

    const fn synonyms(self, synonyms: &'static [&'static str]) -> Self {
        Setting { synonyms, ..self }
    }

    const fn topic(self, topic: &'static str, side: TopicSide) -> Self {
        Setting {
            scope: Scope::Both { topic },
            topic: Some(side),
            ..self
        }
    }
}

/// A broker setting this broker acts on.
const fn broker(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    valid: Valid,
    doc: &'static str,
    apply: ApplyBroker,
    show: fn(&BrokerConfig) -> String,
) -> Setting {
    Setting {
        name,
        kind,
        default,
        valid,
        scope: Scope::Broker,
        dynamic: false,
        synonyms: &[],
        effect: Effect::Honoured,
        doc,
        broker: Some(BrokerSide { apply, show }),
        topic: None,
    }
}

/// A Kafka broker setting accepted, with no effect on a single node.
const fn inert(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    why: &'static str,
) -> Setting {
    Setting {
        name,
        kind,
        default,
        valid: Valid::Any,
        scope: Scope::Broker,
        dynamic: false,
        synonyms: &[],
        effect: Effect::NoEffect(why),
        doc: why,
        broker: None,
        topic: None,
    }
}

/// A topic-only setting.
const fn topic_only(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    effect: Effect,
    check: Valid,
    doc: &'static str,
) -> Setting {
    Setting {
        name,
        kind,
        default,
        valid: Valid::Any,
        scope: Scope::Topic,
        dynamic: false,
        synonyms: &[],
        effect,
        doc,
        broker: None,
        topic: Some(TopicSide {
            check,
            apply: None,
            show: None,
        }),
    }
}

/// A topic-only `confluent.*.schema.validation` setting (Confluent Server's names; I124):
/// honoured, a boolean, off by default, not listed by DescribeConfigs unless set.
const fn schema_validation(name: &'static str, doc: &'static str, apply: ApplyTopic) -> Setting {
    Setting {
        name,
        kind: Kind::Boolean,
        default: "false",
        valid: Valid::Bool,
        scope: Scope::Topic,
        dynamic: false,
        synonyms: &[],
        effect: Effect::Honoured,
        doc,
        broker: None,
        topic: Some(TopicSide {
            check: Valid::Bool,
            apply: Some(apply),
            show: None,
        }),
    }
}

/// A topic side that applies and shows a value.
const fn honoured(apply: ApplyTopic, show: fn(&LogConfig) -> String) -> TopicSide {
    TopicSide {
        check: Valid::Any,
        apply: Some(apply),
        show: Some(show),
    }
}

const SINGLE_NODE: &str = "accepted, no effect on a single node";
const ONE_REPLICA: &str = "not applicable on a single node: every partition has one replica";
const TIERED_ONLY: &str = "not applicable: applies to tiered storage, which this broker lacks";
const NO_TIMESTAMP_DIFFERENCE: &str =
    "not supported: removed in Kafka 4.0; use message.timestamp.before.max.ms";

const I32_MAX: i64 = i32::MAX as i64;
const U32_MAX: i64 = u32::MAX as i64;

/// `compression.gzip.level`: -1 (gzip's default) or 1..=9, as Kafka's validator.
fn gzip_level(value: &str) -> Result<(), String> {
    match value.trim().parse::<i32>() {
        Ok(-1 | 1..=9) => Ok(()),
        _ => Err("expected -1 or an integer in 1..=9".into()),
    }
}

/// An integer in `min..=max`.
fn ranged(value: &str, min: i32, max: i32) -> Result<i32, String> {
    let n: i32 = number(value)?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("expected an integer in {min}..={max}"))
    }
}

fn number<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("cannot parse {value:?}"))
}

/// `-1` (any negative) is `None`: unlimited, as in Kafka.
fn limit(value: &str) -> Result<Option<i64>, String> {
    let n: i64 = number(value)?;
    Ok((n >= 0).then_some(n))
}

fn non_negative(value: &str) -> Result<i64, String> {
    match number::<i64>(value)? {
        n if n < 0 => Err("must not be negative".into()),
        n => Ok(n),
    }
}

fn bool_value(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn show_limit(value: Option<i64>) -> String {
    value.map_or_else(|| "-1".to_string(), |v| v.to_string())
}

/// A setting read per listener, as given unprefixed (else its default), for DescribeConfigs.
fn explicit_or(c: &BrokerConfig, key: &str, default: &str) -> String {
    c.explicit
        .get(key)
        .cloned()
        .unwrap_or_else(|| default.to_string())
}

fn check_listeners(value: &str) -> Result<(), String> {
    listeners::parse_endpoints(value).map(drop)
}

fn check_mechanisms(value: &str) -> Result<(), String> {
    security::parse_mechanisms(value).map(drop)
}

fn check_protocol_map(value: &str) -> Result<(), String> {
    listeners::parse_protocol_map(value).map(drop)
}

fn check_authorizer(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value.is_empty() || super::AuthorizerSettings::ACCEPTED_CLASSES.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{value:?} is not an authorizer this broker provides"
        ))
    }
}

fn check_log_dirs(value: &str) -> Result<(), String> {
    if value.contains(',') {
        return Err("one data directory is supported".into());
    }
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(())
}

fn check_send_buffer(value: &str) -> Result<(), String> {
    match limit(value) {
        Ok(n) if !n.is_some_and(|n| n == 0 || n > I32_MAX) => Ok(()),
        _ => Err("expected -1 or 1 to 2147483647".into()),
    }
}

fn check_metrics_listener(value: &str) -> Result<(), String> {
    parse_metrics_listener(value).map(drop)
}

fn check_schema_registry_listener(value: &str) -> Result<(), String> {
    parse_schema_registry_listener(value).map(drop)
}

fn check_cleanup_policy(value: &str) -> Result<(), String> {
    CleanupPolicy::parse(value)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn check_ratio(value: &str) -> Result<(), String> {
    parse_ratio_ppm(value.trim())
        .map(drop)
        .ok_or_else(|| format!("{value:?} is not in [0, 1]"))
}

fn check_rate(value: &str) -> Result<(), String> {
    crate::log::cleaner::CleanerSettings::default()
        .apply("log.cleaner.io.max.bytes.per.second", value)
        .map(drop)
}

fn check_assignors(value: &str) -> Result<(), String> {
    let names = assignor_names(value);
    if names.is_empty() {
        return Err("name at least one assignor".into());
    }
    match names
        .iter()
        .find(|n| !CONSUMER_ASSIGNORS.contains(&n.as_str()))
    {
        Some(bad) => Err(format!("unknown assignor {bad} (known: uniform, range)")),
        None => Ok(()),
    }
}

fn assignor_names(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

/// The cleaner's own parser applies a `log.cleaner.*` / `log.cleanup.policy` value.
fn cleaner(config: &mut BrokerConfig, key: &str, value: &str) -> Result<(), String> {
    config.cleaner.apply(key, value).map(drop)
}

fn flush_kind(config: &mut BrokerConfig, value: &str) {
    config.flush_policy = match value {
        "fsync" => FlushPolicy::Fsync,
        "interval" => FlushPolicy::Interval {
            ms: match config.flush_policy {
                FlushPolicy::Interval { ms } => ms,
                _ => DEFAULT_FLUSH_INTERVAL_MS,
            },
        },
        _ => FlushPolicy::None,
    };
}

/// `flush.interval.ms` (and a topic's `flush.ms` under `flush.policy=interval`) by default.
pub const DEFAULT_FLUSH_INTERVAL_MS: u64 = 1000;

const HOUR_MS: i64 = 3_600_000;

/// The table. Broker rows first, grouped as `config/server.properties` groups them; then
/// the broker settings accepted without effect; then the topic-only settings.
pub static SETTINGS: &[Setting] = &[
    // Network.
    broker("listener.security.protocol.map", Kind::String, listeners::DEFAULT_PROTOCOL_MAP,
        Valid::Check(check_protocol_map, "NAME:PROTOCOL,… (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
        "the security protocol of each listener name (a listener named after a protocol speaks it)",
        |c, _, v| { c.listener_protocol_map = listeners::parse_protocol_map(v)?; Ok(()) },
        |c| listeners::show_protocol_map(&c.listener_protocol_map)),
    broker("listeners", Kind::List, "PLAINTEXT://127.0.0.1:9092",
        Valid::Check(check_listeners, "NAME://host:port,… (names from listener.security.protocol.map)"),
        "where to listen, one NAME://host:port per listener (loopback by default: open it to the network on purpose)",
        |c, k, v| {
            let endpoints = listeners::parse_endpoints(v)?;
            c.listeners = listeners::resolve_listeners(&endpoints, &c.listener_protocol_map,
                |host, port| resolve(k, host, port))?;
            Ok(())
        },
        |c| listeners::show_listeners(&c.listeners)),
    broker("advertised.listeners", Kind::List, "",
        Valid::Check(check_listeners, "NAME://host:port,… (names from listeners)"),
        "what Metadata tells the clients of each listener; by default its own address (a wildcard one advertises 127.0.0.1)",
        |c, k, v| {
            if k != "listeners" {
                listeners::apply_advertised(&mut c.listeners, &listeners::parse_endpoints(v)?)?;
            }
            Ok(())
        },
        |c| listeners::show_advertised(&c.listeners))
        .synonyms(&["listeners"]),
    // Security (docs/SECURITY.md). `listener.name.<listener>.` may precede these.
    broker("sasl.enabled.mechanisms", Kind::List, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        Valid::Check(check_mechanisms, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI is not supported)"),
        "the SASL mechanisms a SASL listener offers (Kafka's default, GSSAPI, is not served; OAUTHBEARER validates unsecured JWTs for development, or signed ones with sasl.oauthbearer.jwks.endpoint.url); may be prefixed listener.name.<listener>.",
        |c, _, v| { c.sasl_enabled_mechanisms = security::parse_mechanisms(v)?; Ok(()) },
        |c| c.sasl_enabled_mechanisms.join(",")),
    broker("sasl.jaas.config", Kind::Password, "",
        Valid::Check(security::check_jaas, "one JAAS entry, Kafka's syntax"),
        "JAAS entry of a SASL listener: PlainLoginModule's user_<name>=\"<password>\" options are PLAIN's users, OAuthBearerLoginModule's unsecuredValidator* options configure OAUTHBEARER; usually prefixed listener.name.<listener>.<mechanism>.",
        |_, _, _| Ok(()),
        |_| String::new()),
    // Signed OAUTHBEARER tokens (KIP-768, core::auth::jwks): read per listener by
    // config/security.rs, so each row only checks and shows; `listener.name.<listener>.` or
    // `listener.name.<listener>.oauthbearer.` may precede these.
    broker("sasl.oauthbearer.jwks.endpoint.url", Kind::String, "",
        Valid::Check(security::check_jwks_url, "empty, a file: URL, or an http(s): URL"),
        "KIP-768: the JWKS whose keys verify OAUTHBEARER tokens' signatures (RS256/384/512, PS256/384/512, ES256/384); set, unsecured tokens are refused; a file: URL is read, an http(s): URL fetched (10 s at most, no redirects, no proxy; https: trusts the OAUTHBEARER JAAS entry's ssl.truststore.location PEM, else Mozilla's roots), at startup (the broker does not start without the keys, as Kafka) then every sasl.oauthbearer.jwks.endpoint.refresh.ms; at most 1 MiB",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.jwks.endpoint.url", "")),
    broker("sasl.oauthbearer.expected.audience", Kind::List, "",
        Valid::Any,
        "with a JWKS: a token's aud must name one of these (comma-separated); empty: aud is not checked",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.expected.audience", "")),
    broker("sasl.oauthbearer.expected.issuer", Kind::String, "",
        Valid::Any,
        "with a JWKS: a token's iss must equal this; empty: iss is not checked",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.expected.issuer", "")),
    broker("sasl.oauthbearer.sub.claim.name", Kind::String, "sub",
        Valid::Check(security::check_claim_name, "a non-empty claim name"),
        "with a JWKS: the claim whose string is the principal",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.sub.claim.name", "sub")),
    broker("sasl.oauthbearer.scope.claim.name", Kind::String, "scope",
        Valid::Check(security::check_claim_name, "a non-empty claim name"),
        "with a JWKS: the claim holding the token's scopes",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.scope.claim.name", "scope")),
    broker("sasl.oauthbearer.clock.skew.seconds", Kind::Int, "30", Valid::Range(0, i32::MAX as i64),
        "with a JWKS: the clock difference allowed when checking a token's exp, nbf and iat",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.clock.skew.seconds", "30")),
    broker("sasl.oauthbearer.jwks.endpoint.refresh.ms", Kind::Long, "3600000", Valid::Range(1, i64::MAX),
        "with a JWKS: how long its keys are used before they are read again (a file: by the next token's check; an http(s): endpoint by a background task, off the shards' threads); a read or fetch that fails keeps the keys it had",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.jwks.endpoint.refresh.ms", "3600000")),
    broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Kind::Long, "100", Valid::Range(0, i64::MAX),
        "with an http(s): JWKS: the wait before fetching again after a failed fetch, doubled after each further failure",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "100")),
    broker("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Kind::Long, "10000", Valid::Range(0, i64::MAX),
        "with an http(s): JWKS: the longest wait between fetches after failed ones",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "10000")),
    // TLS of SSL and SASL_SSL listeners (docs/SECURITY.md, config/tls.rs): read per listener,
    // so each row only checks and shows; `listener.name.<listener>.` may precede these.
    broker("ssl.keystore.type", Kind::String, "PEM",
        Valid::Check(tls::check_store_type, "PEM, PKCS12 (JKS is refused: convert it with keytool)"),
        "format of the listener's key and certificate chain: PEM, or PKCS12 (a file, opened with ssl.keystore.password); Kafka's default, JKS, is not read",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.keystore.type", "PEM")),
    broker("ssl.keystore.location", Kind::String, "",
        Valid::Any,
        "a PEM file holding the TLS listener's private key (unencrypted PKCS#8, PKCS#1 or SEC1) and its certificate chain, leaf first; read at startup, and again when altered on the broker at run time (AlterConfigs, per listener too): new handshakes use the new file, a bad one is refused",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.keystore.location", "")),
    broker("ssl.keystore.certificate.chain", Kind::Password, "",
        Valid::Any,
        "the certificate chain inline, PEM, leaf first (instead of ssl.keystore.location, with ssl.keystore.key)",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.keystore.key", Kind::Password, "",
        Valid::Any,
        "the private key inline, PEM, unencrypted (instead of ssl.keystore.location, with ssl.keystore.certificate.chain)",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.keystore.password", Kind::Password, "",
        Valid::Any,
        "the password of a PKCS12 keystore (its integrity and its key); unused for PEM",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.key.password", Kind::Password, "",
        Valid::Any,
        "the password of the private key: an encrypted PEM key is refused at startup (decrypt with openssl pkey); a PKCS12 key must have the store's password (this, if given, must equal ssl.keystore.password)",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.truststore.type", Kind::String, "PEM",
        Valid::Check(tls::check_store_type, "PEM, PKCS12 (JKS is refused: convert it with keytool)"),
        "format of the CAs that vouch for client certificates: PEM, or PKCS12 (its certificate entries, opened with ssl.truststore.password)",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.truststore.type", "PEM")),
    broker("ssl.truststore.location", Kind::String, "",
        Valid::Any,
        "a PEM file (or PKCS12 store, ssl.truststore.type) of the CA certificates that vouch for client certificates (ssl.client.auth=requested or required); read at startup",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.truststore.location", "")),
    broker("ssl.truststore.password", Kind::Password, "",
        Valid::Any,
        "the password of a PKCS12 truststore (unset: opened with an empty one); unused for PEM",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.truststore.certificates", Kind::Password, "",
        Valid::Any,
        "the CA certificates of client certificates inline, PEM (with or instead of ssl.truststore.location)",
        |_, _, _| Ok(()),
        |_| String::new()),
    broker("ssl.client.auth", Kind::String, "none",
        Valid::Check(tls::check_client_auth, "none, requested or required"),
        "client certificates on a TLS listener: required refuses a client without one the truststore vouches for, requested serves it as User:ANONYMOUS; the principal is User:<the subject, RFC 2253>",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.client.auth", "none")),
    broker("ssl.enabled.protocols", Kind::List, "TLSv1.2,TLSv1.3",
        Valid::Check(tls::check_protocols, "TLSv1.2, TLSv1.3"),
        "the TLS versions a TLS listener accepts",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.enabled.protocols", "TLSv1.2,TLSv1.3")),
    Setting {
        valid: Valid::Check(tls::check_protocol, "TLS, TLSv1.2 or TLSv1.3"),
        ..inert("ssl.protocol", Kind::String, "TLSv1.3",
            "the versions a listener accepts are ssl.enabled.protocols (rustls has no SSLContext protocol)")
    },
    broker("ssl.cipher.suites", Kind::List, "",
        Valid::Check(tls::check_cipher_suites, "IANA names (TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, …); empty: all of rustls's"),
        "the cipher suites a TLS listener accepts, IANA names as Java writes them; empty: rustls's safe defaults",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.cipher.suites", "")),
    broker("ssl.principal.mapping.rules", Kind::String, "DEFAULT",
        Valid::Check(tls::check_mapping_rules, "comma-separated RULE:pattern/replacement/[LU] and DEFAULT"),
        "how a client certificate names its principal, as Kafka's SslPrincipalMapper: the rules in order on the subject DN (RFC 2253, as Java writes it), the first whose pattern matches the whole DN gives User:<the DN with $n replaced, L/U lower/upper-cased>; DEFAULT keeps the DN; a DN no rule matches is refused (connection closed)",
        |_, _, _| Ok(()),
        |c| explicit_or(c, "ssl.principal.mapping.rules", "DEFAULT")),
    inert("ssl.endpoint.identification.algorithm", Kind::String, "https",
        "not applicable: a single node makes no TLS connections of its own to verify"),
    broker("socket.request.max.bytes", Kind::Int, "104857600", Valid::Range(1, I32_MAX),
        "largest request frame; a larger one closes its connection",
        |c, _, v| { c.socket_request_max_bytes = number(v)?; Ok(()) },
        |c| c.socket_request_max_bytes.to_string()),
    broker("connections.max.idle.ms", Kind::Long, "600000", Valid::Range(1, i64::MAX),
        "close connections idle this long",
        |c, _, v| { c.connections_max_idle_ms = number(v)?; Ok(()) },
        |c| c.connections_max_idle_ms.to_string()),
    broker("connections.max.reauth.ms", Kind::Long, "0", Valid::Range(0, i64::MAX),
        "KIP-368: the longest a SASL session lasts before the client must re-authenticate on its connection (SaslAuthenticate v1+ tells it); an expired session's next request closes the connection; 0: no limit (an OAUTHBEARER token's exp still bounds its session)",
        |c, _, v| { c.connections_max_reauth_ms = number(v)?; Ok(()) },
        |c| c.connections_max_reauth_ms.to_string()),
    broker("quota.window.num", Kind::Int, "11", Valid::Range(1, 3600),
        "samples a client quota rate is measured over (Kafka's); the longest throttle is quota.window.num × quota.window.size.seconds",
        |c, _, v| { c.quota_window.samples = number(v)?; Ok(()) },
        |c| c.quota_window.samples.to_string()),
    broker("quota.window.size.seconds", Kind::Int, "1", Valid::Range(1, 3600),
        "length of one client quota sample, in seconds (Kafka's)",
        |c, _, v| { c.quota_window.sample_ms = number::<u64>(v)? * 1000; Ok(()) },
        |c| (c.quota_window.sample_ms / 1000).to_string()),
    broker("socket.send.buffer.bytes", Kind::Int, "102400",
        Valid::Check(check_send_buffer, "-1 (the OS default), 1..2147483647"),
        "SO_SNDBUF of each connection (-1: the OS default, auto-tuned); bounds what a client that never reads its answers costs",
        |c, _, v| { c.socket_send_buffer_bytes = limit(v)?.map(|n| n as usize); Ok(()) },
        |c| c.socket_send_buffer_bytes.map_or(-1, |n| n as i64).to_string()),
    broker("max.connections", Kind::Int, "2147483647", Valid::Range(1, i64::MAX),
        "refuse connections beyond this many",
        |c, _, v| { c.max_connections = number(v)?; Ok(()) },
        |c| c.max_connections.to_string()),
    broker("max.connection.creation.rate", Kind::Int, "2147483647", Valid::Range(0, I32_MAX),
        "new connections per second the broker accepts (Kafka's acceptor throttle): over it, each listener's accept loop waits (at most one quota sample) before serving the next; may be prefixed listener.name.<listener>. for one listener (the longer wait wins); 2147483647: no limit. Per IP address: the connection_creation_rate quota of an ip entity",
        |c, _, v| { c.max_connection_creation_rate = number(v)?; Ok(()) },
        |c| c.max_connection_creation_rate.to_string()),
    // Broker.
    broker("node.id", Kind::Int, "0", Valid::Range(i32::MIN as i64, I32_MAX),
        "this broker's id, reported in Metadata",
        |c, _, v| { c.node_id = number(v)?; Ok(()) },
        |c| c.node_id.to_string())
        .synonyms(&["broker.id"]),
    broker("num.shards", Kind::Int, "", Valid::Range(1, 1024),
        "executor threads owning the partitions; by default 1 on up to 2 cores, else one per core (measured on 2 cores: docs/perf-log/2026-12-01-write-and-fetch-paths.md)",
        |c, _, v| { c.num_shards = number(v)?; Ok(()) },
        |c| c.num_shards.to_string()),
    // Monitoring and logs.
    broker("metrics.listener", Kind::String, "none",
        Valid::Check(check_metrics_listener, "none, http://host:port"),
        "Prometheus endpoint (GET /metrics), e.g. http://127.0.0.1:9644; off by default so a broker opens no port it was not asked to",
        |c, _, v| { c.metrics_listener = parse_metrics_listener(v)?; Ok(()) },
        |c| c.metrics_listener.map_or_else(String::new, |a| format!("http://{a}"))),
    broker("schema.registry.listeners", Kind::String, "http://127.0.0.1:8081",
        Valid::Check(check_schema_registry_listener, "empty, http://host:port"),
        "the built-in schema registry's REST API (Confluent's v1 paths, schemas kept in the _schemas topic); empty turns it off. Failing to bind the default port is logged and the broker runs without a registry; failing to bind another address fails startup",
        |c, _, v| { c.schema_registry_listener = parse_schema_registry_listener(v)?; Ok(()) },
        |c| c.schema_registry_listener.map_or_else(String::new, |a| format!("http://{a}"))),
    broker("schema.registry.authentication.method", Kind::String, "NONE",
        Valid::OneOf(&["NONE", "BASIC"]),
        "BASIC: the schema registry's REST API asks for HTTP basic auth, a user and password of the broker's SCRAM users (SCRAM-SHA-256 or -512 credentials); NONE: open to whoever reaches its address",
        |c, _, v| { c.schema_registry_basic_auth = v == "BASIC"; Ok(()) },
        |c| if c.schema_registry_basic_auth { "BASIC" } else { "NONE" }.to_string()),
    broker("log.format", Kind::String, "text", Valid::OneOf(&["text", "json"]),
        "log lines on stderr: text, or json (one object per line); filter with RUST_LOG",
        |c, _, v| {
            c.log_format = if v == "json" { LogFormat::Json } else { LogFormat::Text };
            Ok(())
        },
        |c| c.log_format.as_str().to_string()),
    // Data directory and durability.
    broker("log.dirs", Kind::List, "./data",
        Valid::Check(check_log_dirs, "one directory"),
        "the data directory (one)",
        |c, _, v| { c.log_dir = v.into(); Ok(()) },
        |c| c.log_dir.display().to_string())
        .synonyms(&["log.dir"]),
    broker("flush.policy", Kind::String, "none", Valid::OneOf(&["none", "fsync", "interval"]),
        "when an append is acknowledged: none (written to the kernel), fsync (synced, group commit) or interval (synced every flush.interval.ms)",
        |c, _, v| { flush_kind(c, v); Ok(()) },
        |c| c.flush_policy.name().to_string())
        .dynamic()
        .topic("flush.policy", TopicSide {
            check: Valid::Any,
            apply: None, // with flush.ms, in `topic::with_overrides`
            show: Some(|l| l.flush.name().to_string()),
        }),
    broker("flush.interval.ms", Kind::Long, "1000", Valid::Range(1, i64::MAX),
        "milliseconds between syncs under flush.policy=interval (a topic's flush.ms alone means interval)",
        |c, _, v| {
            if let FlushPolicy::Interval { ms } = &mut c.flush_policy {
                *ms = number(v)?;
            }
            Ok(())
        },
        |c| match c.flush_policy {
            FlushPolicy::Interval { ms } => ms.to_string(),
            _ => DEFAULT_FLUSH_INTERVAL_MS.to_string(),
        })
        .dynamic()
        .topic("flush.ms", TopicSide { check: Valid::Any, apply: None, show: None }),
    // Segments, indexes and retention.
    broker("log.segment.bytes", Kind::Int, "1073741824", Valid::Range(14, I32_MAX),
        "roll to a new segment before one exceeds this size",
        |c, _, v| { c.segment_bytes = number(v)?; Ok(()) },
        |c| c.segment_bytes.to_string())
        .dynamic()
        .topic("segment.bytes", honoured(
            |l, v| { l.segment_bytes = number(v)?; Ok(()) },
            |l| l.segment_bytes.to_string())),
    broker("log.preallocate", Kind::Boolean, "true", Valid::Bool,
        "extend the active segment's file with allocated zeros 1-16 MiB ahead of its writes (fallocate), so a durable write's sync commits no size change; cut to the data at roll and clean close, and by recovery after a crash (Kafka's full-size files, in steps)",
        |c, _, v| { c.log_preallocate = bool_value(v)?; Ok(()) },
        |c| c.log_preallocate.to_string())
        .dynamic()
        .topic("preallocate", TopicSide {
            check: Valid::Bool,
            apply: Some(|l, v| { l.preallocate = bool_value(v)?; Ok(()) }),
            show: Some(|l| l.preallocate.to_string()),
        }),
    broker("log.roll.ms", Kind::Long, "604800000", Valid::Range(1, i64::MAX),
        "roll a non-empty segment once it is this old",
        |c, k, v| {
            let n: i64 = number(v)?;
            c.segment_ms = Some(if k == "log.roll.hours" { n.saturating_mul(HOUR_MS) } else { n });
            Ok(())
        },
        |c| show_limit(c.segment_ms))
        .synonyms(&["log.roll.hours"])
        .dynamic()
        .topic("segment.ms", honoured(
            |l, v| { l.segment_ms = Some(number(v)?); Ok(()) },
            |l| l.segment_ms.unwrap_or(i64::MAX).to_string())),
    broker("log.retention.bytes", Kind::Long, "-1", Valid::Unlimited(i64::MAX),
        "delete the oldest segments while a partition is larger than this",
        |c, _, v| { c.retention_bytes = limit(v)?.map(|n| n as u64); Ok(()) },
        |c| show_limit(c.retention_bytes.map(|b| b as i64)))
        .dynamic()
        .topic("retention.bytes", honoured(
            |l, v| { l.retention_bytes = limit(v)?.map(|n| n as u64); Ok(()) },
            |l| show_limit(l.retention_bytes.map(|b| b as i64)))),
    broker("log.retention.ms", Kind::Long, "604800000", Valid::Unlimited(i64::MAX),
        "delete segments whose newest record is older than this (ms wins over minutes, minutes over hours)",
        |c, k, v| {
            let unit = match k {
                "log.retention.hours" => HOUR_MS,
                "log.retention.minutes" => 60_000,
                _ => 1,
            };
            c.retention_ms = limit(v)?.map(|n| n.saturating_mul(unit));
            Ok(())
        },
        |c| show_limit(c.retention_ms))
        .synonyms(&["log.retention.minutes", "log.retention.hours"])
        .dynamic()
        .topic("retention.ms", honoured(
            |l, v| { l.retention_ms = limit(v)?; Ok(()) },
            |l| show_limit(l.retention_ms))),
    broker("log.retention.check.interval.ms", Kind::Long, "300000", Valid::Range(1, i64::MAX),
        "how often retention looks for segments to delete",
        |c, _, v| { c.retention_check_interval_ms = number(v)?; Ok(()) },
        |c| c.retention_check_interval_ms.to_string()),
    broker("log.index.interval.bytes", Kind::Int, "4096", Valid::Range(0, U32_MAX),
        "bytes between sparse offset index entries",
        |c, _, v| { c.index_interval_bytes = number(v)?; Ok(()) },
        |c| c.index_interval_bytes.to_string())
        .dynamic()
        .topic("index.interval.bytes", honoured(
            |l, v| { l.index_interval_bytes = number(v)?; Ok(()) },
            |l| l.index_interval_bytes.to_string())),
    // Compaction.
    broker("log.cleanup.policy", Kind::List, "delete",
        Valid::Check(check_cleanup_policy, "delete, compact, compact,delete"),
        "what happens to old records: retention deletes them, the cleaner compacts them, or both",
        cleaner,
        |c| c.cleaner.default_policy.as_str().to_string())
        .topic("cleanup.policy", TopicSide {
            check: Valid::Check(check_cleanup_policy, "delete, compact, compact,delete"),
            apply: Some(|l, v| {
                l.cleanup_policy = CleanupPolicy::parse(v).map_err(|e| e.to_string())?;
                Ok(())
            }),
            show: Some(|l| l.cleanup_policy.as_str().to_string()),
        }),
    broker("log.cleaner.enable", Kind::Boolean, "true", Valid::Bool,
        "run the log cleaner (one per shard) for compacted topics",
        cleaner,
        |c| c.cleaner.enable.to_string()),
    broker("log.cleaner.backoff.ms", Kind::Long, "15000", Valid::Range(1, i64::MAX),
        "how often each shard's cleaner looks for work",
        cleaner,
        |c| c.cleaner.backoff_ms.to_string()),
    broker("log.cleaner.min.cleanable.ratio", Kind::Double, "0.5",
        Valid::Check(check_ratio, "0..1"),
        "share of a log that must be uncleaned before the cleaner compacts it",
        cleaner,
        |c| format_ratio_ppm(c.cleaner.min_cleanable_ratio_ppm))
        .topic("min.cleanable.dirty.ratio", honoured(
            |l, v| {
                l.compaction.min_cleanable_dirty_ratio_ppm =
                    parse_ratio_ppm(v).ok_or_else(|| format!("{v:?} is not in [0, 1]"))?;
                Ok(())
            },
            |l| format_ratio_ppm(l.compaction.min_cleanable_dirty_ratio_ppm))),
    broker("log.cleaner.min.compaction.lag.ms", Kind::Long, "0", Valid::Range(0, i64::MAX),
        "records younger than this are never compacted",
        cleaner,
        |c| c.cleaner.min_compaction_lag_ms.to_string())
        .topic("min.compaction.lag.ms", honoured(
            |l, v| { l.compaction.min_compaction_lag_ms = non_negative(v)?; Ok(()) },
            |l| l.compaction.min_compaction_lag_ms.to_string())),
    broker("log.cleaner.max.compaction.lag.ms", Kind::Long, "9223372036854775807",
        Valid::Range(1, i64::MAX),
        "records older than this are compacted whatever the dirty ratio",
        cleaner,
        |c| c.cleaner.max_compaction_lag_ms.to_string())
        .topic("max.compaction.lag.ms", honoured(
            |l, v| { l.compaction.max_compaction_lag_ms = non_negative(v)?; Ok(()) },
            |l| l.compaction.max_compaction_lag_ms.to_string())),
    broker("log.cleaner.delete.retention.ms", Kind::Long, "86400000", Valid::Range(0, i64::MAX),
        "how long tombstones stay after compaction reached them",
        cleaner,
        |c| c.cleaner.delete_retention_ms.to_string())
        .topic("delete.retention.ms", honoured(
            |l, v| { l.compaction.delete_retention_ms = non_negative(v)?; Ok(()) },
            |l| l.compaction.delete_retention_ms.to_string())),
    broker("log.cleaner.dedupe.buffer.size", Kind::Long, "134217728", Valid::Range(1, i64::MAX),
        "key-map memory budget per shard (several passes when smaller than the key set)",
        cleaner,
        |c| c.cleaner.dedupe_buffer_bytes.to_string()),
    broker("log.cleaner.io.max.bytes.per.second", Kind::Double, "1.7976931348623157E308",
        Valid::Check(check_rate, "at least 1"),
        "cleaner read+write throttle per shard (the default is unlimited)",
        cleaner,
        |c| c.cleaner.io_max_bytes_per_second
            .map_or_else(|| "1.7976931348623157E308".to_string(), |r| r.to_string())),
    // Topics and records.
    broker("auto.create.topics.enable", Kind::Boolean, "true", Valid::Bool,
        "create a topic when Metadata asks for an unknown name",
        |c, _, v| { c.auto_create_topics = bool_value(v)?; Ok(()) },
        |c| c.auto_create_topics.to_string()),
    // Authorization (I48).
    broker("authorizer.class.name", Kind::String, "", Valid::Check(check_authorizer,
            "empty (none), org.apache.kafka.metadata.authorizer.StandardAuthorizer, kafka.security.authorizer.AclAuthorizer"),
        "turns ACL enforcement on (either class name: the same ACL authorizer); empty answers the ACL APIs with SECURITY_DISABLED",
        |c, _, v| { c.authorizer.class_name = v.trim().to_string(); Ok(()) },
        |c| c.authorizer.class_name.clone()),
    broker("super.users", Kind::String, "", Valid::Any,
        "principals allowed everything, separated by ';' (User:admin;User:ops)",
        |c, _, v| {
            c.authorizer.acl.super_users =
                minikafka_core::auth::acl::AuthorizerConfig::parse_super_users(v);
            Ok(())
        },
        |c| c.authorizer.acl.super_users.iter().cloned().collect::<Vec<_>>().join(";")),
    broker("allow.everyone.if.no.acl.found", Kind::Boolean, "false", Valid::Bool,
        "with the authorizer on, allow an action on a resource no ACL names",
        |c, _, v| { c.authorizer.acl.allow_everyone_if_no_acl_found = bool_value(v)?; Ok(()) },
        |c| c.authorizer.acl.allow_everyone_if_no_acl_found.to_string()),
    broker("num.partitions", Kind::Int, "1", Valid::Range(1, I32_MAX),
        "partitions of auto-created topics",
        |c, _, v| { c.num_partitions = number(v)?; Ok(()) },
        |c| c.num_partitions.to_string()),
    broker("message.max.bytes", Kind::Int, "1048588", Valid::Range(1, I32_MAX),
        "largest record batch (at most socket.request.max.bytes)",
        |c, _, v| { c.message_max_bytes = number(v)?; Ok(()) },
        |c| c.message_max_bytes.to_string())
        .dynamic()
        .topic("max.message.bytes", honoured(
            |l, v| { l.max_batch_bytes = number(v)?; Ok(()) },
            |l| l.max_batch_bytes.to_string())),
    broker("log.message.timestamp.type", Kind::String, "CreateTime",
        Valid::OneOf(&["CreateTime", "LogAppendTime"]),
        "CreateTime keeps the producer's timestamps; LogAppendTime has the broker stamp each batch with its append time",
        |c, _, v| {
            c.log_message_timestamp_type = TimestampType::parse(v).unwrap_or_default();
            Ok(())
        },
        |c| c.log_message_timestamp_type.name().to_string())
        .topic("message.timestamp.type", TopicSide {
            check: Valid::OneOf(&["CreateTime", "LogAppendTime"]),
            apply: Some(|l, v| {
                l.timestamp_type = TimestampType::parse(v)
                    .ok_or_else(|| format!("{v:?} is not CreateTime or LogAppendTime"))?;
                Ok(())
            }),
            show: Some(|l| l.timestamp_type.name().to_string()),
        }),
    broker("log.message.timestamp.before.max.ms", Kind::Long, "9223372036854775807",
        Valid::Range(0, i64::MAX),
        "how far before the broker's clock a CreateTime record's timestamp may lie; a batch with one earlier is refused whole (INVALID_TIMESTAMP, per-record errors)",
        |c, _, v| { c.log_message_timestamp_bounds.before_max_ms = number(v)?; Ok(()) },
        |c| c.log_message_timestamp_bounds.before_max_ms.to_string())
        .dynamic()
        .topic("message.timestamp.before.max.ms", TopicSide {
            check: Valid::Range(0, i64::MAX),
            apply: Some(|l, v| { l.timestamp_bounds.before_max_ms = number(v)?; Ok(()) }),
            show: Some(|l| l.timestamp_bounds.before_max_ms.to_string()),
        }),
    broker("log.message.timestamp.after.max.ms", Kind::Long, "9223372036854775807",
        Valid::Range(0, i64::MAX),
        "how far after the broker's clock a CreateTime record's timestamp may lie; a batch with one later is refused whole (INVALID_TIMESTAMP, per-record errors)",
        |c, _, v| { c.log_message_timestamp_bounds.after_max_ms = number(v)?; Ok(()) },
        |c| c.log_message_timestamp_bounds.after_max_ms.to_string())
        .dynamic()
        .topic("message.timestamp.after.max.ms", TopicSide {
            check: Valid::Range(0, i64::MAX),
            apply: Some(|l, v| { l.timestamp_bounds.after_max_ms = number(v)?; Ok(()) }),
            show: Some(|l| l.timestamp_bounds.after_max_ms.to_string()),
        }),
    // Consumer groups.
    broker("offsets.topic.num.partitions", Kind::Int, "50", Valid::Range(1, 1000),
        "partitions of __consumer_offsets when it is first created (an existing topic keeps its count)",
        |c, _, v| { c.offsets_topic_num_partitions = number(v)?; Ok(()) },
        |c| c.offsets_topic_num_partitions.to_string()),
    broker("offsets.topic.segment.bytes", Kind::Int, "104857600", Valid::Range(14, I32_MAX),
        "segment size of __consumer_offsets",
        |c, _, v| { c.offsets_topic_segment_bytes = number(v)?; Ok(()) },
        |c| c.offsets_topic_segment_bytes.to_string()),
    broker("offsets.topic.segment.ms", Kind::Long, "600000", Valid::Range(1, i64::MAX),
        "segment.ms of __consumer_offsets when first created (ours: Kafka rolls it at log.roll.ms), so a restart replays at most this long of commits",
        |c, _, v| { c.offsets_topic_segment_ms = number(v)?; Ok(()) },
        |c| c.offsets_topic_segment_ms.to_string()),
    broker("offsets.retention.minutes", Kind::Int, "10080", Valid::Range(1, i64::MAX),
        "how long an empty group's committed offsets are kept",
        |c, _, v| { c.groups.offsets_retention_minutes = number(v)?; Ok(()) },
        |c| c.groups.offsets_retention_minutes.to_string()),
    broker("offsets.retention.check.interval.ms", Kind::Long, "600000", Valid::Range(1, i64::MAX),
        "how often expired offsets are looked for",
        |c, _, v| { c.groups.offsets_retention_check_interval_ms = number(v)?; Ok(()) },
        |c| c.groups.offsets_retention_check_interval_ms.to_string()),
    broker("offset.metadata.max.bytes", Kind::Int, "4096", Valid::Range(0, I32_MAX),
        "longest metadata string of a committed offset",
        |c, _, v| { c.groups.offset_metadata_max_bytes = number(v)?; Ok(()) },
        |c| c.groups.offset_metadata_max_bytes.to_string()),
    broker("group.min.session.timeout.ms", Kind::Int, "6000", Valid::Range(1, I32_MAX),
        "shortest session timeout a group member may ask for",
        |c, _, v| { c.groups.min_session_timeout_ms = number(v)?; Ok(()) },
        |c| c.groups.min_session_timeout_ms.to_string()),
    broker("group.max.session.timeout.ms", Kind::Int, "1800000", Valid::Range(1, I32_MAX),
        "longest session timeout a group member may ask for",
        |c, _, v| { c.groups.max_session_timeout_ms = number(v)?; Ok(()) },
        |c| c.groups.max_session_timeout_ms.to_string()),
    broker("group.max.size", Kind::Int, "1000", Valid::Range(1, I32_MAX),
        "most members of one group (Kafka: unbounded)",
        |c, _, v| { c.groups.max_size = number(v)?; Ok(()) },
        |c| c.groups.max_size.to_string()),
    broker("group.initial.rebalance.delay.ms", Kind::Int, "3000", Valid::Range(0, I32_MAX),
        "how long the first rebalance of an empty group waits for more members",
        |c, _, v| { c.groups.initial_rebalance_delay_ms = number(v)?; Ok(()) },
        |c| c.groups.initial_rebalance_delay_ms.to_string()),
    broker("group.consumer.heartbeat.interval.ms", Kind::Int, "5000", Valid::Range(1, I32_MAX),
        "consumer protocol (KIP-848) heartbeat interval, within its .min. and .max. settings",
        |c, _, v| { c.groups.consumer_heartbeat_interval_ms = number(v)?; Ok(()) },
        |c| c.groups.consumer_heartbeat_interval_ms.to_string()),
    broker("group.consumer.min.heartbeat.interval.ms", Kind::Int, "5000", Valid::Range(1, I32_MAX),
        "lower bound of group.consumer.heartbeat.interval.ms",
        |c, _, v| { c.groups.consumer_heartbeat_interval_bounds_ms.0 = number(v)?; Ok(()) },
        |c| c.groups.consumer_heartbeat_interval_bounds_ms.0.to_string()),
    broker("group.consumer.max.heartbeat.interval.ms", Kind::Int, "15000", Valid::Range(1, I32_MAX),
        "upper bound of group.consumer.heartbeat.interval.ms",
        |c, _, v| { c.groups.consumer_heartbeat_interval_bounds_ms.1 = number(v)?; Ok(()) },
        |c| c.groups.consumer_heartbeat_interval_bounds_ms.1.to_string()),
    broker("group.consumer.session.timeout.ms", Kind::Int, "45000", Valid::Range(1, I32_MAX),
        "consumer protocol session timeout, within its .min. and .max. settings",
        |c, _, v| { c.groups.consumer_session_timeout_ms = number(v)?; Ok(()) },
        |c| c.groups.consumer_session_timeout_ms.to_string()),
    broker("group.consumer.min.session.timeout.ms", Kind::Int, "45000", Valid::Range(1, I32_MAX),
        "lower bound of group.consumer.session.timeout.ms",
        |c, _, v| { c.groups.consumer_session_timeout_bounds_ms.0 = number(v)?; Ok(()) },
        |c| c.groups.consumer_session_timeout_bounds_ms.0.to_string()),
    broker("group.consumer.max.session.timeout.ms", Kind::Int, "60000", Valid::Range(1, I32_MAX),
        "upper bound of group.consumer.session.timeout.ms",
        |c, _, v| { c.groups.consumer_session_timeout_bounds_ms.1 = number(v)?; Ok(()) },
        |c| c.groups.consumer_session_timeout_bounds_ms.1.to_string()),
    broker("group.consumer.assignors", Kind::List, "uniform,range",
        Valid::Check(check_assignors, "uniform, range (a list)"),
        "consumer protocol server-side assignors, the first is the default",
        |c, _, v| { c.groups.consumer_assignors = assignor_names(v); Ok(()) },
        |c| c.groups.consumer_assignors.join(",")),
    broker("group.consumer.max.size", Kind::Int, "1000", Valid::Range(1, I32_MAX),
        "most members of one consumer-protocol group (Kafka: unbounded)",
        |c, _, v| { c.groups.consumer_max_size = number(v)?; Ok(()) },
        |c| c.groups.consumer_max_size.to_string()),
    // Transactions.
    broker("transaction.state.log.num.partitions", Kind::Int, "50", Valid::Range(1, 1000),
        "partitions of __transaction_state when it is first created (an existing topic keeps its count)",
        |c, _, v| { c.transactions.state_log_num_partitions = number(v)?; Ok(()) },
        |c| c.transactions.state_log_num_partitions.to_string()),
    broker("transaction.state.log.segment.bytes", Kind::Int, "104857600", Valid::Range(14, I32_MAX),
        "segment size of __transaction_state",
        |c, _, v| { c.transactions.state_log_segment_bytes = number(v)?; Ok(()) },
        |c| c.transactions.state_log_segment_bytes.to_string()),
    broker("transaction.state.log.segment.ms", Kind::Long, "600000", Valid::Range(1, i64::MAX),
        "segment.ms of __transaction_state when first created (ours, as offsets.topic.segment.ms), so a restart replays at most this long of transitions",
        |c, _, v| { c.transactions.state_log_segment_ms = number(v)?; Ok(()) },
        |c| c.transactions.state_log_segment_ms.to_string()),
    broker("transaction.max.timeout.ms", Kind::Int, "900000", Valid::Range(1, I32_MAX),
        "longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT beyond)",
        |c, _, v| { c.transactions.max_timeout_ms = number(v)?; Ok(()) },
        |c| c.transactions.max_timeout_ms.to_string()),
    broker("transactional.id.expiration.ms", Kind::Int, "604800000", Valid::Range(1, I32_MAX),
        "how long a transactional id with no transaction open is kept after its last use",
        |c, _, v| { c.transactions.id_expiration_ms = number(v)?; Ok(()) },
        |c| c.transactions.id_expiration_ms.to_string()),
    broker("transaction.abort.timed.out.transaction.cleanup.interval.ms", Kind::Int, "10000",
        Valid::Range(1, I32_MAX),
        "how often the coordinator aborts transactions open longer than their timeout (fencing the producer)",
        |c, _, v| { c.transactions.abort_timed_out_interval_ms = number(v)?; Ok(()) },
        |c| c.transactions.abort_timed_out_interval_ms.to_string()),
    broker("transaction.remove.expired.transaction.cleanup.interval.ms", Kind::Int, "3600000",
        Valid::Range(1, I32_MAX),
        "how often expired transactional ids are removed",
        |c, _, v| { c.transactions.remove_expired_interval_ms = number(v)?; Ok(()) },
        |c| c.transactions.remove_expired_interval_ms.to_string()),
    broker("transaction.hold.while.completing.ms", Kind::Int, "5000", Valid::Range(0, I32_MAX),
        "how long the next transaction's AddPartitionsToTxn/AddOffsetsToTxn waits for the previous transaction's markers and Complete record before it is answered CONCURRENT_TRANSACTIONS (ours; 0 answers at once, as Kafka)",
        |c, _, v| { c.transactions.hold_while_completing_ms = number(v)?; Ok(()) },
        |c| c.transactions.hold_while_completing_ms.to_string()),
    broker("transaction.max.transactional.ids", Kind::Int, "100000", Valid::Range(1, I32_MAX),
        "transactional ids one coordinator (one __transaction_state partition) keeps (ours; Kafka has no bound): InitProducerId of a new id beyond it is COORDINATOR_NOT_AVAILABLE (retriable) until ids expire",
        |c, _, v| { c.transactions.max_transactional_ids = number(v)?; Ok(()) },
        |c| c.transactions.max_transactional_ids.to_string()),
    broker("transaction.max.partitions.per.transaction", Kind::Int, "10000", Valid::Range(1, I32_MAX),
        "partitions one transaction may hold (ours; Kafka has no bound): an AddPartitionsToTxn past it is INVALID_REQUEST",
        |c, _, v| { c.transactions.max_partitions_per_transaction = number(v)?; Ok(()) },
        |c| c.transactions.max_partitions_per_transaction.to_string()),
    broker("transaction.max.held.requests", Kind::Int, "10000", Valid::Range(0, I32_MAX),
        "requests one coordinator holds at once under transaction.hold.while.completing.ms (ours); beyond it they are answered CONCURRENT_TRANSACTIONS at once",
        |c, _, v| { c.transactions.max_held_requests = number(v)?; Ok(()) },
        |c| c.transactions.max_held_requests.to_string()),
    broker("transaction.marker.retry.backoff.ms", Kind::Int, "100", Valid::Range(1, I32_MAX),
        "how long the coordinator waits before writing failed markers or a failed Complete record again (ours)",
        |c, _, v| { c.transactions.retry_backoff_ms = number(v)?; Ok(()) },
        |c| c.transactions.retry_backoff_ms.to_string()),
    broker("transaction.partition.verification.enable", Kind::Boolean, "true", Valid::Bool,
        "a transactional produce to a partition not added to its transaction is refused (KIP-890 part 1, INVALID_TXN_STATE)",
        |c, _, v| { c.transactions.partition_verification = bool_value(v)?; Ok(()) },
        |c| c.transactions.partition_verification.to_string()),
    // Kafka broker settings accepted with no effect on a single node.
    // Those marked `.dynamic()` are dynamic in Kafka too (KIP-226: the thread pools
    // cluster-wide, the Kerberos settings and replication throttles per broker), so
    // AlterConfigs takes them as Kafka does: stored, described, still without effect.
    inert("process.roles", Kind::List, "", SINGLE_NODE),
    inert("controller.quorum.voters", Kind::List, "", SINGLE_NODE),
    inert("controller.quorum.bootstrap.servers", Kind::List, "", SINGLE_NODE),
    inert("controller.listener.names", Kind::List, "", SINGLE_NODE),
    inert("inter.broker.listener.name", Kind::String, "", SINGLE_NODE),
    inert("num.network.threads", Kind::Int, "3", SINGLE_NODE).dynamic(),
    inert("num.io.threads", Kind::Int, "8", SINGLE_NODE).dynamic(),
    inert("socket.receive.buffer.bytes", Kind::Int, "102400", SINGLE_NODE),
    inert("num.recovery.threads.per.data.dir", Kind::Int, "1", SINGLE_NODE).dynamic(),
    inert("offsets.topic.replication.factor", Kind::Int, "3", SINGLE_NODE),
    inert("offsets.topic.compression.codec", Kind::Int, "0", SINGLE_NODE),
    inert("offsets.commit.required.acks", Kind::Int, "-1", SINGLE_NODE),
    inert("offsets.commit.timeout.ms", Kind::Int, "5000", SINGLE_NODE),
    inert("offsets.load.buffer.size", Kind::Int, "5242880", SINGLE_NODE),
    inert("transaction.state.log.replication.factor", Kind::Int, "3", SINGLE_NODE),
    inert("transaction.state.log.min.isr", Kind::Int, "2", SINGLE_NODE),
    inert("default.replication.factor", Kind::Int, "1", SINGLE_NODE),
    Setting {
        effect: Effect::NoEffect(ONE_REPLICA),
        doc: ONE_REPLICA,
        ..inert("min.insync.replicas", Kind::Int, "1", SINGLE_NODE)
    }
    .topic("min.insync.replicas", TopicSide {
        check: Valid::OneOf(&["1"]),
        apply: None,
        show: None,
    }),
    inert("zookeeper.connect", Kind::String, "", SINGLE_NODE),
    inert("zookeeper.connection.timeout.ms", Kind::Int, "", SINGLE_NODE),
    inert("share.coordinator.state.topic.replication.factor", Kind::Short, "3", SINGLE_NODE),
    inert("share.coordinator.state.topic.min.isr", Kind::Short, "2", SINGLE_NODE),
    // More of Kafka's broker settings with no meaning on one node (issue 26): replication,
    // KRaft and ZooKeeper, racks, thread pools, Kerberos (GSSAPI is not offered).
    inert("replica.lag.time.max.ms", Kind::Long, "30000", SINGLE_NODE),
    inert("replica.fetch.max.bytes", Kind::Int, "1048576", SINGLE_NODE),
    inert("replica.fetch.min.bytes", Kind::Int, "1", SINGLE_NODE),
    inert("replica.fetch.wait.max.ms", Kind::Int, "500", SINGLE_NODE),
    inert("replica.fetch.backoff.ms", Kind::Int, "1000", SINGLE_NODE),
    inert("replica.fetch.response.max.bytes", Kind::Int, "10485760", SINGLE_NODE),
    inert("replica.socket.timeout.ms", Kind::Int, "30000", SINGLE_NODE),
    inert("replica.socket.receive.buffer.bytes", Kind::Int, "65536", SINGLE_NODE),
    inert("replica.high.watermark.checkpoint.interval.ms", Kind::Long, "5000", SINGLE_NODE),
    inert("replica.selector.class", Kind::String, "", SINGLE_NODE),
    inert("num.replica.fetchers", Kind::Int, "1", SINGLE_NODE).dynamic(),
    inert("num.replica.alter.log.dirs.threads", Kind::Int, "", SINGLE_NODE),
    inert("auto.leader.rebalance.enable", Kind::Boolean, "true", SINGLE_NODE),
    inert("leader.imbalance.check.interval.seconds", Kind::Long, "300", SINGLE_NODE),
    inert("leader.imbalance.per.broker.percentage", Kind::Int, "10", SINGLE_NODE),
    inert("broker.rack", Kind::String, "", SINGLE_NODE),
    inert("background.threads", Kind::Int, "10", SINGLE_NODE).dynamic(),
    inert("queued.max.requests", Kind::Int, "500", SINGLE_NODE),
    inert("controller.quorum.election.timeout.ms", Kind::Int, "1000", SINGLE_NODE),
    inert("controller.quorum.election.backoff.max.ms", Kind::Int, "1000", SINGLE_NODE),
    inert("controller.quorum.fetch.timeout.ms", Kind::Int, "2000", SINGLE_NODE),
    inert("metadata.log.dir", Kind::String, "", SINGLE_NODE),
    inert("metadata.log.segment.bytes", Kind::Int, "1073741824", SINGLE_NODE),
    inert("metadata.max.retention.bytes", Kind::Long, "104857600", SINGLE_NODE),
    inert("metadata.max.retention.ms", Kind::Long, "604800000", SINGLE_NODE),
    inert("zookeeper.session.timeout.ms", Kind::Int, "18000", SINGLE_NODE),
    inert("replica.alter.log.dirs.io.max.bytes.per.second", Kind::Long, "9223372036854775807", SINGLE_NODE).dynamic(),
    inert("leader.replication.throttled.rate", Kind::Long, "9223372036854775807", SINGLE_NODE).dynamic(),
    inert("follower.replication.throttled.rate", Kind::Long, "9223372036854775807", SINGLE_NODE).dynamic(),
    inert("replication.quota.window.num", Kind::Int, "11", SINGLE_NODE),
    inert("replication.quota.window.size.seconds", Kind::Int, "1", SINGLE_NODE),
    inert("controlled.shutdown.enable", Kind::Boolean, "true", SINGLE_NODE),
    inert("controlled.shutdown.max.retries", Kind::Int, "3", SINGLE_NODE),
    inert("controlled.shutdown.retry.backoff.ms", Kind::Long, "5000", SINGLE_NODE),
    inert("broker.id.generation.enable", Kind::Boolean, "true", SINGLE_NODE),
    inert("reserved.broker.max.id", Kind::Int, "1000", SINGLE_NODE),
    inert("broker.heartbeat.interval.ms", Kind::Int, "2000", SINGLE_NODE),
    inert("broker.session.timeout.ms", Kind::Int, "9000", SINGLE_NODE),
    inert("initial.broker.registration.timeout.ms", Kind::Int, "60000", SINGLE_NODE),
    inert("early.start.listeners", Kind::String, "", SINGLE_NODE),
    inert("controller.quorum.append.linger.ms", Kind::Int, "25", SINGLE_NODE),
    inert("controller.quorum.request.timeout.ms", Kind::Int, "2000", SINGLE_NODE),
    inert("controller.quorum.retry.backoff.ms", Kind::Int, "20", SINGLE_NODE),
    inert("controller.socket.timeout.ms", Kind::Int, "30000", SINGLE_NODE),
    inert("metadata.log.max.record.bytes.between.snapshots", Kind::Long, "20971520", SINGLE_NODE),
    inert("metadata.log.max.snapshot.interval.ms", Kind::Long, "3600000", SINGLE_NODE),
    inert("metadata.max.idle.interval.ms", Kind::Int, "500", SINGLE_NODE),
    inert("inter.broker.protocol.version", Kind::String, "", SINGLE_NODE),
    inert("zookeeper.max.in.flight.requests", Kind::Int, "10", SINGLE_NODE),
    inert("zookeeper.metadata.migration.enable", Kind::Boolean, "false", SINGLE_NODE),
    inert("sasl.kerberos.service.name", Kind::String, "", SINGLE_NODE).dynamic(),
    inert("sasl.kerberos.kinit.cmd", Kind::String, "/usr/bin/kinit", SINGLE_NODE).dynamic(),
    inert("sasl.kerberos.min.time.before.relogin", Kind::Long, "60000", SINGLE_NODE).dynamic(),
    inert("sasl.kerberos.ticket.renew.jitter", Kind::Double, "0.05", SINGLE_NODE).dynamic(),
    inert("sasl.kerberos.ticket.renew.window.factor", Kind::Double, "0.8", SINGLE_NODE).dynamic(),
    inert("sasl.kerberos.principal.to.local.rules", Kind::List, "DEFAULT", SINGLE_NODE).dynamic(),
    // Compression (I87, KIP-390), then topic-only settings.
    broker("compression.type", Kind::String, "producer", Valid::OneOf(CompressionConfig::NAMES),
        "the codec batches are stored in: producer keeps the producer's; another recompresses a batch in any other codec (I87)",
        |c, _, v| { c.compression.target = CompressionConfig::parse_type(v)?; Ok(()) },
        |c| CompressionConfig::type_name(c.compression.target).to_string())
        .dynamic()
        .topic("compression.type", TopicSide {
            check: Valid::OneOf(CompressionConfig::NAMES),
            apply: Some(|l, v| { l.compression.target = CompressionConfig::parse_type(v)?; Ok(()) }),
            show: Some(|l| CompressionConfig::type_name(l.compression.target).to_string()),
        }),
    broker("compression.gzip.level", Kind::Int, "-1", Valid::Check(gzip_level, "-1, 1..9"),
        "gzip level of batches the broker recompresses to gzip (KIP-390)",
        |c, _, v| { c.compression.gzip_level = number(v)?; Ok(()) },
        |c| c.compression.gzip_level.to_string())
        .dynamic()
        .topic("compression.gzip.level", TopicSide {
            check: Valid::Check(gzip_level, "-1, 1..9"),
            apply: Some(|l, v| { gzip_level(v)?; l.compression.gzip_level = number(v)?; Ok(()) }),
            show: Some(|l| l.compression.gzip_level.to_string()),
        }),
    broker("compression.lz4.level", Kind::Int, "9", Valid::Range(1, 17),
        "lz4 level of batches the broker recompresses to lz4 (KIP-390)",
        |c, _, v| { c.compression.lz4_level = number(v)?; Ok(()) },
        |c| c.compression.lz4_level.to_string())
        .dynamic()
        .topic("compression.lz4.level", TopicSide {
            check: Valid::Range(1, 17),
            apply: Some(|l, v| { l.compression.lz4_level = ranged(v, 1, 17)?; Ok(()) }),
            show: Some(|l| l.compression.lz4_level.to_string()),
        }),
    broker("compression.zstd.level", Kind::Int, "3", Valid::Range(-131_072, 22),
        "zstd level of batches the broker recompresses to zstd (KIP-390)",
        |c, _, v| { c.compression.zstd_level = number(v)?; Ok(()) },
        |c| c.compression.zstd_level.to_string())
        .dynamic()
        .topic("compression.zstd.level", TopicSide {
            check: Valid::Range(-131_072, 22),
            apply: Some(|l, v| { l.compression.zstd_level = ranged(v, -131_072, 22)?; Ok(()) }),
            show: Some(|l| l.compression.zstd_level.to_string()),
        }),
    schema_validation("confluent.key.schema.validation",
        "check that each produced record's key starts with the magic byte 0 and a schema id the built-in registry knows; a batch with one that does not is refused whole (INVALID_RECORD, per-record errors); a null key passes",
        |l, v| { l.schema_ids.key = bool_value(v)?; Ok(()) }),
    schema_validation("confluent.value.schema.validation",
        "check that each produced record's value starts with the magic byte 0 and a schema id the built-in registry knows; a batch with one that does not is refused whole (INVALID_RECORD, per-record errors); a null value (a tombstone) passes",
        |l, v| { l.schema_ids.value = bool_value(v)?; Ok(()) }),
    topic_only("file.delete.delay.ms", Kind::Long, "60000",
        Effect::NoEffect("not applicable: segments past retention are deleted at once"), Valid::Any,
        "not applicable: segments past retention are deleted at once"),
    topic_only("flush.messages", Kind::Long, "9223372036854775807",
        Effect::Refused("not supported: use flush.policy=fsync (sync every batch) or flush.ms"), Valid::Any,
        "not supported: use flush.policy=fsync (sync every batch) or flush.ms"),
    topic_only("follower.replication.throttled.replicas", Kind::List, "", Effect::NoEffect(ONE_REPLICA), Valid::Any, ONE_REPLICA),
    topic_only("leader.replication.throttled.replicas", Kind::List, "", Effect::NoEffect(ONE_REPLICA), Valid::Any, ONE_REPLICA),
    topic_only("local.retention.bytes", Kind::Long, "-2", Effect::NoEffect(TIERED_ONLY), Valid::Any, TIERED_ONLY),
    topic_only("local.retention.ms", Kind::Long, "-2", Effect::NoEffect(TIERED_ONLY), Valid::Any, TIERED_ONLY),
    topic_only("message.downconversion.enable", Kind::Boolean, "true",
        Effect::NoEffect("not applicable: the broker never down-converts record batches"), Valid::Any,
        "not applicable: the broker never down-converts record batches"),
    topic_only("message.format.version", Kind::String, "3.0-IV1",
        Effect::NoEffect("not applicable: batches are always record format v2"), Valid::Any,
        "not applicable: batches are always record format v2"),
    topic_only("message.timestamp.difference.max.ms", Kind::Long, "", Effect::Refused(NO_TIMESTAMP_DIFFERENCE), Valid::Any, NO_TIMESTAMP_DIFFERENCE),
    topic_only("remote.log.copy.disable", Kind::Boolean, "false", Effect::NoEffect(TIERED_ONLY), Valid::Any, TIERED_ONLY),
    topic_only("remote.log.delete.on.disable", Kind::Boolean, "false", Effect::NoEffect(TIERED_ONLY), Valid::Any, TIERED_ONLY),
    topic_only("remote.storage.enable", Kind::Boolean, "false", Effect::NoEffect(TIERED_ONLY),
        Valid::OneOf(&["false"]), TIERED_ONLY),
    topic_only("segment.index.bytes", Kind::Int, "10485760",
        Effect::NoEffect("not applicable: offset indexes are sized by the segment they cover"), Valid::Any,
        "not applicable: offset indexes are sized by the segment they cover"),
    topic_only("segment.jitter.ms", Kind::Long, "0",
        Effect::NoEffect("not applicable: segments roll exactly at segment.ms"), Valid::Any,
        "not applicable: segments roll exactly at segment.ms"),
    Setting {
        effect: Effect::NoEffect(ONE_REPLICA),
        doc: ONE_REPLICA,
        ..inert("unclean.leader.election.enable", Kind::Boolean, "false", SINGLE_NODE)
    }
    .topic("unclean.leader.election.enable", TopicSide {
        check: Valid::Any,
        apply: None,
        show: None,
    }),
];

/// The row of a broker setting named `key` (its name first, then a synonym).
/// A key prefixed `listener.name.<listener>.` names the row of its base setting when that
/// setting may be given per listener ([`super::security::PER_LISTENER`]).
pub fn broker_setting(key: &str) -> Option<&'static Setting> {
    let key = super::security::per_listener_base(key).unwrap_or(key);
    let broker = || SETTINGS.iter().filter(|s| s.is_broker());
    broker()
        .find(|s| s.name == key)
        .or_else(|| broker().find(|s| s.synonyms.contains(&key)))
}

/// The row of a topic setting named `key` (its topic-level name).
pub fn topic_setting(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.topic_name() == Some(key))
}

/// The broker settings AlterConfigs may change at run time, sorted.
pub fn dynamic_broker_keys() -> Vec<&'static str> {
    let mut keys: Vec<&str> = SETTINGS
        .iter()
        .filter(|s| s.dynamic)
        .map(|s| s.name)
        .collect();
    keys.sort_unstable();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name, synonym and topic name appears once, and each row is consistent: a topic
    /// row has a topic side and no broker side, a dynamic row is an honoured broker row, a
    /// default given passes its validator.
    #[test]
    fn the_table_is_consistent() {
        let mut broker_names = std::collections::BTreeSet::new();
        let mut topic_names = std::collections::BTreeSet::new();
        for s in SETTINGS {
            for name in s.spellings() {
                if s.name == "advertised.listeners" && name == "listeners" {
                    continue; // the one synonym that is also a setting of its own
                }
                if s.is_broker() {
                    assert!(broker_names.insert(name), "{name} twice");
                }
            }
            if let Some(topic) = s.topic_name() {
                assert!(topic_names.insert(topic), "topic {topic} twice");
                assert!(s.topic.is_some(), "{} lacks its topic side", s.name);
            } else {
                assert!(s.topic.is_none(), "{}", s.name);
            }
            if s.scope == Scope::Topic {
                assert!(s.broker.is_none() && !s.dynamic, "{}", s.name);
            }
            // A dynamic row is applied at run time, or is one of Kafka's dynamic settings
            // without effect on one node (stored and described only).
            if s.dynamic {
                assert!(
                    (s.broker.is_some() && s.effect == Effect::Honoured)
                        || (s.broker.is_none() && matches!(s.effect, Effect::NoEffect(_))),
                    "{}",
                    s.name
                );
            }
            assert_eq!(
                s.broker.is_some(),
                s.is_broker() && s.effect == Effect::Honoured,
                "{}",
                s.name
            );
            if s.broker.is_some() && !s.default.is_empty() {
                assert_eq!(s.valid.check(s.default), Ok(()), "{}", s.name);
            }
            assert!(!s.doc.is_empty() && !s.doc.contains('\n'), "{}", s.name);
        }
    }

    /// A row's default is the typed default: giving it changes nothing.
    #[test]
    fn each_default_is_the_typed_default() {
        for s in SETTINGS
            .iter()
            .filter(|s| s.broker.is_some() && !s.default.is_empty())
        {
            let given = [(s.name.to_string(), s.default.to_string())];
            let mut config = BrokerConfig::from_sources(None, &given).expect(s.name);
            config.explicit.clear();
            assert_eq!(config, BrokerConfig::default(), "{}", s.name);
        }
    }

    #[test]
    fn lookups_by_name_synonym_and_topic_name() {
        assert_eq!(
            broker_setting("log.retention.hours").map(|s| s.name),
            Some("log.retention.ms")
        );
        assert_eq!(
            broker_setting("listeners").map(|s| s.name),
            Some("listeners")
        );
        assert_eq!(broker_setting("retention.ms").map(|s| s.name), None);
        assert_eq!(
            topic_setting("retention.ms").map(|s| s.name),
            Some("log.retention.ms")
        );
        assert_eq!(topic_setting("log.retention.ms").map(|s| s.name), None);
        assert_eq!(
            dynamic_broker_keys(),
            [
                "background.threads",
                "compression.gzip.level",
                "compression.lz4.level",
                "compression.type",
                "compression.zstd.level",
                "flush.interval.ms",
                "flush.policy",
                "follower.replication.throttled.rate",
                "leader.replication.throttled.rate",
                "log.index.interval.bytes",
                "log.message.timestamp.after.max.ms",
                "log.message.timestamp.before.max.ms",
                "log.preallocate",
                "log.retention.bytes",
                "log.retention.ms",
                "log.roll.ms",
                "log.segment.bytes",
                "message.max.bytes",
                "num.io.threads",
                "num.network.threads",
                "num.recovery.threads.per.data.dir",
                "num.replica.fetchers",
                "replica.alter.log.dirs.io.max.bytes.per.second",
                "sasl.kerberos.kinit.cmd",
                "sasl.kerberos.min.time.before.relogin",
                "sasl.kerberos.principal.to.local.rules",
                "sasl.kerberos.service.name",
                "sasl.kerberos.ticket.renew.jitter",
                "sasl.kerberos.ticket.renew.window.factor",
            ]
        );
    }
}
