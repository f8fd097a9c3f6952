//! Dynamic broker configuration: the broker settings AlterConfigs and
//! IncrementalAlterConfigs may change while the broker runs, kept durably in the data
//! directory and laid over the static configuration.
//!
//! Contract:
//! - Dynamic keys: exactly the rows of the settings table marked dynamic
//!   ([`dynamic_broker_keys`]: the log defaults every topic without an override falls back
//!   on). Any other broker setting is read-only: refused with
//!   INVALID_REQUEST ("cannot be updated dynamically"), as Kafka refuses a static setting; a
//!   name that is no broker setting at all is INVALID_CONFIG naming it.
//! - Two scopes, as Kafka's: settings for this broker (resource name = `node.id`, source
//!   DYNAMIC_BROKER_CONFIG) and cluster-wide defaults (empty resource name, source
//!   DYNAMIC_DEFAULT_BROKER_CONFIG). Precedence: this broker's, then the cluster default,
//!   then the static file and overrides, then Kafka's default.
//! - Stored in `<data>/`[`DYNAMIC_CONFIG_FILE`] as `key=value` lines under a header line,
//!   `broker.<key>` or `default.<key>`, replaced atomically; read back defensively at startup
//!   (an unknown line or a value that does not apply is an error naming it, never a panic).
//! - [`apply`] is a pure function: the effective [`BrokerConfig`] for a dynamic state.

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_core::backend::Backend;

use crate::config::table::dynamic_broker_keys;
use crate::config::{broker_setting, BrokerConfig, SETTINGS};
use crate::log::atomic_file::{read_bounded, tmp_path, write_atomically, ReadError};

/// File name of the stored dynamic configuration in the data directory.
pub const DYNAMIC_CONFIG_FILE: &str = "dynamic-broker.properties";
/// Largest stored file read back (I10).
pub const MAX_DYNAMIC_CONFIG_BYTES: u64 = 64 * 1024;
const HEADER_LINE: &str = "# minikafka dynamic broker config v1";
const BROKER_PREFIX: &str = "broker.";
const DEFAULT_PREFIX: &str = "default.";
const KEYSTORE_PREFIX: &str = "keystore.";
/// The setting every stored keystore key ends with.
const KEYSTORE_LOCATION: &str = "ssl.keystore.location";

/// Which dynamic scope a setting lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This broker's own (resource name = its `node.id`).
    Broker,
    /// The cluster-wide default (empty resource name).
    ClusterDefault,
}

/// The dynamic settings of both scopes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicBrokerConfig {
    /// Set for this broker.
    pub broker: BTreeMap<String, String>,
    /// Set as the cluster-wide default.
    pub cluster_default: BTreeMap<String, String>,
    /// The keystore locations altered at run time on this broker
    /// ([`keystore_reload`](super::keystore_reload)), by key as altered; stored here so that
    /// a restart keeps them, as Kafka keeps a dynamic broker config (I180). Not table rows:
    /// [`apply`] leaves them to the listeners' TLS.
    pub keystores: BTreeMap<String, String>,
}

impl DynamicBrokerConfig {
    /// The settings of one scope.
    pub fn scope(&self, scope: Scope) -> &BTreeMap<String, String> {
        match scope {
            Scope::Broker => &self.broker,
            Scope::ClusterDefault => &self.cluster_default,
        }
    }

    /// This state with `scope`'s settings replaced by `settings`.
    pub fn with_scope(&self, scope: Scope, settings: BTreeMap<String, String>) -> Self {
        let mut out = self.clone();
        match scope {
            Scope::Broker => out.broker = settings,
            Scope::ClusterDefault => out.cluster_default = settings,
        }
        out
    }

    /// The scope a key's dynamic value comes from, if it has one (this broker's first).
    pub fn scope_of(&self, key: &str) -> Option<Scope> {
        if self.broker.contains_key(key) {
            Some(Scope::Broker)
        } else if self.cluster_default.contains_key(key) {
            Some(Scope::ClusterDefault)
        } else {
            None
        }
    }

    /// Every dynamic setting in force: the cluster defaults overlaid by this broker's.
    pub fn merged(&self) -> BTreeMap<String, String> {
        let mut out = self.cluster_default.clone();
        out.extend(self.broker.clone());
        out
    }

    /// The stored file's text.
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER_LINE}\n");
        for (prefix, map) in [
            (BROKER_PREFIX, &self.broker),
            (DEFAULT_PREFIX, &self.cluster_default),
            (KEYSTORE_PREFIX, &self.keystores),
        ] {
            for (key, value) in map {
                out.push_str(&format!("{prefix}{key}={value}\n"));
            }
        }
        out
    }

    /// Parses the stored file's text: every key must be dynamic and every value valid.
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(HEADER_LINE) {
            return Err(format!("first line is not {HEADER_LINE:?}"));
        }
        let mut out = DynamicBrokerConfig::default();
        for (i, line) in lines {
            if line.is_empty() {
                continue;
            }
            let bad = |why: String| format!("line {}: {why}", i + 1);
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad("not a key=value line".into()))?;
            let (map, key) = if let Some(k) = key.strip_prefix(BROKER_PREFIX) {
                check_dynamic_key(k).map_err(|e| bad(e.to_string()))?;
                (&mut out.broker, k)
            } else if let Some(k) = key.strip_prefix(DEFAULT_PREFIX) {
                check_dynamic_key(k).map_err(|e| bad(e.to_string()))?;
                (&mut out.cluster_default, k)
            } else if let Some(k) = key.strip_prefix(KEYSTORE_PREFIX) {
                if !k.ends_with(KEYSTORE_LOCATION) || value.trim().is_empty() {
                    return Err(bad(format!("{k:?} is no keystore location")));
                }
                (&mut out.keystores, k)
            } else {
                return Err(bad(format!("unknown key {key:?}")));
            };
            if map.insert(key.to_string(), value.to_string()).is_some() {
                return Err(bad(format!("key {key:?} repeated")));
            }
        }
        Ok(out)
    }
}

/// Why a broker setting cannot be altered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicKeyError {
    /// A broker setting that only a restart changes.
    #[error("cannot update {0} dynamically: it is read-only (dynamic: {keys})", keys = dynamic_broker_keys().join(", "))]
    ReadOnly(String),
    /// Not a broker setting at all.
    #[error("{0} is not a broker configuration")]
    Unknown(String),
}

/// Checks that `key` names a dynamic broker setting (by its name, not a synonym).
pub fn check_dynamic_key(key: &str) -> Result<(), DynamicKeyError> {
    match broker_setting(key) {
        Some(setting) if setting.dynamic && setting.name == key => Ok(()),
        Some(_) => Err(DynamicKeyError::ReadOnly(key.to_string())),
        None => Err(DynamicKeyError::Unknown(key.to_string())),
    }
}

/// The effective broker configuration: `base` (the static one) with the dynamic settings in
/// force laid over it, each by its row, in table order (so a flush policy set alone keeps
/// the static interval). An invalid value is an error naming its key.
pub fn apply(base: &BrokerConfig, dynamic: &DynamicBrokerConfig) -> Result<BrokerConfig, String> {
    let merged = dynamic.merged();
    for key in merged.keys() {
        check_dynamic_key(key).map_err(|e| e.to_string())?;
    }
    let mut out = base.clone();
    for setting in SETTINGS.iter().filter(|s| s.dynamic) {
        let (Some(value), Some(side)) = (merged.get(setting.name), setting.broker) else {
            continue;
        };
        let invalid =
            |why: String| format!("invalid value `{value}` for `{}`: {why}", setting.name);
        setting.valid.check(value).map_err(invalid)?;
        (side.apply)(&mut out, setting.name, value).map_err(invalid)?;
    }
    out.check().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Loads the stored dynamic configuration of `data_dir` (empty when none was stored),
/// removing a leftover temporary file; checks it applies over `base`.
pub async fn load<B: Backend>(
    backend: &B,
    data_dir: &Path,
    base: &BrokerConfig,
) -> Result<DynamicBrokerConfig, String> {
    let path = data_dir.join(DYNAMIC_CONFIG_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    match backend.remove_file(&tmp_path(&path)).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(what(e.to_string())),
        _ => {}
    }
    let bytes = match read_bounded(backend, &path, MAX_DYNAMIC_CONFIG_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(DynamicBrokerConfig::default()),
        Err(ReadError::Io(e)) => return Err(what(e.to_string())),
        Err(e) => return Err(what(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| what("not UTF-8".into()))?;
    let dynamic = DynamicBrokerConfig::decode(&text).map_err(what)?;
    apply(base, &dynamic).map_err(what)?;
    Ok(dynamic)
}

/// Stores `dynamic` in `data_dir` durably (temp file, sync, rename, directory sync).
pub async fn save<B: Backend>(
    backend: &B,
    data_dir: &Path,
    dynamic: &DynamicBrokerConfig,
) -> std::io::Result<()> {
    let path = data_dir.join(DYNAMIC_CONFIG_FILE);
    write_atomically(backend, data_dir, &path, dynamic.encode().into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::FlushPolicy;

    fn state(broker: &[(&str, &str)], default: &[(&str, &str)]) -> DynamicBrokerConfig {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        DynamicBrokerConfig {
            broker: map(broker),
            cluster_default: map(default),
            keystores: BTreeMap::new(),
        }
    }

    #[test]
    fn keys_are_sorted_and_each_is_applied() {
        let keys = dynamic_broker_keys();
        let base = BrokerConfig::default();
        for (key, value) in [
            ("flush.interval.ms", "77"),
            ("flush.policy", "fsync"),
            ("log.index.interval.bytes", "77"),
            ("log.retention.bytes", "7777"),
            ("log.retention.ms", "7777"),
            ("log.roll.ms", "7777"),
            ("log.segment.bytes", "77777"),
            ("message.max.bytes", "7777"),
        ] {
            assert!(keys.contains(&key), "{key}");
            let applied = apply(&base, &state(&[(key, value)], &[])).expect(key);
            if key == "flush.interval.ms" {
                // Only meaningful with the interval policy; alone it keeps the policy.
                assert_eq!(applied.flush_policy, base.flush_policy);
                let both = state(&[(key, value), ("flush.policy", "interval")], &[]);
                let applied = apply(&base, &both).expect("both");
                assert_eq!(applied.flush_policy, FlushPolicy::Interval { ms: 77 });
            } else {
                assert_ne!(applied, base, "{key} has no effect");
            }
        }
    }

    #[test]
    fn broker_scope_wins_over_the_cluster_default() {
        let s = state(
            &[("log.retention.ms", "1000")],
            &[("log.retention.ms", "2000"), ("log.segment.bytes", "4096")],
        );
        let applied = apply(&BrokerConfig::default(), &s).expect("valid");
        assert_eq!(applied.retention_ms, Some(1000));
        assert_eq!(applied.segment_bytes, 4096);
        assert_eq!(s.scope_of("log.retention.ms"), Some(Scope::Broker));
        assert_eq!(s.scope_of("log.segment.bytes"), Some(Scope::ClusterDefault));
        assert_eq!(s.scope_of("log.roll.ms"), None);
    }

    #[test]
    fn read_only_and_unknown_keys_are_told_apart() {
        assert_eq!(
            check_dynamic_key("log.dirs"),
            Err(DynamicKeyError::ReadOnly("log.dirs".into()))
        );
        assert_eq!(
            check_dynamic_key("num.partitions"),
            Err(DynamicKeyError::ReadOnly("num.partitions".into()))
        );
        assert_eq!(
            check_dynamic_key("log.retention.msec"),
            Err(DynamicKeyError::Unknown("log.retention.msec".into()))
        );
        assert!(check_dynamic_key("log.retention.ms").is_ok());
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        let base = BrokerConfig::default();
        let err = apply(&base, &state(&[("log.segment.bytes", "lots")], &[])).expect_err("bad");
        assert!(err.contains("log.segment.bytes"), "{err}");
        // A value is taken exactly as written, never guessed at.
        let err = apply(&base, &state(&[("flush.policy", " fsync")], &[])).expect_err("spaced");
        assert!(err.contains("flush.policy"), "{err}");
        let err = apply(&base, &state(&[("message.max.bytes", "209715200")], &[]))
            .expect_err("above the frame limit");
        assert!(err.contains("message.max.bytes"), "{err}");
    }

    #[test]
    fn encode_decode_round_trip_and_refusals() {
        let mut s = state(
            &[("log.retention.ms", "1000")],
            &[("flush.policy", "fsync")],
        );
        s.keystores.insert(
            "listener.name.ssl.ssl.keystore.location".into(),
            "/etc/broker.pem".into(),
        );
        assert_eq!(DynamicBrokerConfig::decode(&s.encode()), Ok(s.clone()));
        assert!(s
            .encode()
            .contains("\nkeystore.listener.name.ssl.ssl.keystore.location=/etc/broker.pem\n"));
        let good = s.encode();
        for bad in [
            String::new(),
            good.replace(HEADER_LINE, "# other"),
            format!("{good}broker.log.dirs=/x\n"),
            format!("{good}other.log.retention.ms=1\n"),
            format!("{good}broker.log.retention.ms=2\n"),
            format!("{good}no equals\n"),
            format!("{good}keystore.ssl.truststore.location=/x\n"),
            format!("{good}keystore.ssl.keystore.location=\n"),
            format!("{good}keystore.listener.name.ssl.ssl.keystore.location=/y\n"),
        ] {
            assert!(
                DynamicBrokerConfig::decode(&bad).is_err(),
                "accepted {bad:?}"
            );
        }
    }
}
