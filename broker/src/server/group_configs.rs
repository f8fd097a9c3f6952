//! Group configurations (resource type GROUP, KIP-848): settings of one consumer group,
//! kept durably in the data directory and described and altered as Kafka's are.
//!
//! Contract:
//! - Keys: [`GROUP_KEYS`], Kafka's consumer-protocol group settings
//!   (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`). A key that is not one
//!   of them is INVALID_CONFIG naming it (as Kafka's `GroupConfig.validateNames`).
//! - Defaults: the broker's `group.consumer.session.timeout.ms` and
//!   `group.consumer.heartbeat.interval.ms` in force. DescribeConfigs gives every key, source
//!   8 (GROUP_CONFIG) for a value set on the group, else 5 (DEFAULT_CONFIG); none is
//!   read-only.
//! - Bounds ([`check`]), as Kafka's `GroupConfig.validateValues`: an integer within the
//!   broker's `group.consumer.min.` / `.max.` setting of the same name, and the heartbeat
//!   interval (set or default) below the session timeout; else INVALID_CONFIG naming the key.
//! - Any group name but the empty one (INVALID_REQUEST), whether or not the group exists.
//! - Stored in `<data>/`[`GROUP_CONFIG_FILE`]: a header line, then `<hex(group)>/<key>=<value>`
//!   lines (the hex keeps any group name on one line), replaced atomically; read back
//!   defensively at startup (a line that does not parse, an unknown name or a value that is
//!   no integer is an error naming it; bounds are checked when a value is set, as Kafka's).
//! - Honoured by the consumer-protocol coordinator: before each ConsumerGroupHeartbeat the
//!   group's host hands it the group's values (`server::groups::host`).

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_core::backend::Backend;

use super::config_entries::{ConfigEntry, ConfigSynonym, SOURCE_DEFAULT};
use crate::config::BrokerConfig;
use crate::log::atomic_file::{read_bounded, tmp_path, write_atomically, ReadError};

/// Resource type GROUP.
pub const RESOURCE_GROUP: i8 = 32;
/// Config source GROUP_CONFIG (a value set on the group).
pub const SOURCE_GROUP: i8 = 8;
/// File name of the stored group configurations in the data directory.
pub const GROUP_CONFIG_FILE: &str = "group-configs.properties";
/// Largest stored file read back (I10).
pub const MAX_GROUP_CONFIG_BYTES: u64 = 1024 * 1024;
const HEADER_LINE: &str = "# minikafka group configs v1";

/// `consumer.session.timeout.ms`.
pub const SESSION_TIMEOUT: &str = "consumer.session.timeout.ms";
/// `consumer.heartbeat.interval.ms`.
pub const HEARTBEAT_INTERVAL: &str = "consumer.heartbeat.interval.ms";
/// Every group configuration key, sorted.
pub const GROUP_KEYS: [&str; 2] = [HEARTBEAT_INTERVAL, SESSION_TIMEOUT];
/// Kafka config type INT.
const TYPE_INT: i8 = 3;

/// Lower-case hex of `text`'s bytes (a group name on one line of the store).
fn hex_encode(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The bytes `hex_encode` wrote; `None` for anything else.
fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// The default of `key` (one of [`GROUP_KEYS`]) and its bounds, from the broker's settings.
fn default_and_bounds(key: &str, broker: &BrokerConfig) -> Option<(i32, (i32, i32))> {
    let g = &broker.groups;
    match key {
        SESSION_TIMEOUT => Some((
            g.consumer_session_timeout_ms,
            g.consumer_session_timeout_bounds_ms,
        )),
        HEARTBEAT_INTERVAL => Some((
            g.consumer_heartbeat_interval_ms,
            g.consumer_heartbeat_interval_bounds_ms,
        )),
        _ => None,
    }
}

/// Checks that a group's settings are known names with integer values (what a stored file
/// must hold; bounds are checked when a value is set, as Kafka's are, so a broker restarted
/// with narrower `group.consumer.*` bounds keeps what was stored).
pub fn check_format(settings: &BTreeMap<String, String>) -> Result<(), String> {
    for (key, value) in settings {
        if !GROUP_KEYS.contains(&key.as_str()) {
            return Err(format!("unknown group config name: {key}"));
        }
        value
            .parse::<i32>()
            .map_err(|_| format!("invalid value `{value}` for {key}: not an integer"))?;
    }
    Ok(())
}

/// Checks a group's settings under the broker's: known keys, integers within bounds, the
/// heartbeat interval below the session timeout. The error names the key.
pub fn check(settings: &BTreeMap<String, String>, broker: &BrokerConfig) -> Result<(), String> {
    let mut effective = BTreeMap::new();
    for key in GROUP_KEYS {
        let (default, (min, max)) = default_and_bounds(key, broker).unwrap_or((0, (0, 0)));
        let value = match settings.get(key) {
            None => default,
            Some(text) => {
                let value: i32 = text
                    .parse()
                    .map_err(|_| format!("invalid value `{text}` for {key}: not an integer"))?;
                if value < min || value > max {
                    return Err(format!(
                        "invalid value {value} for {key}: must be within {min}..={max} \
                         (the broker's group.{key} bounds)"
                    ));
                }
                value
            }
        };
        effective.insert(key, value);
    }
    if let Some(key) = settings.keys().find(|k| !GROUP_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown group config name: {key}"));
    }
    if effective[HEARTBEAT_INTERVAL] >= effective[SESSION_TIMEOUT] {
        return Err(format!(
            "{HEARTBEAT_INTERVAL} ({}) must be less than {SESSION_TIMEOUT} ({})",
            effective[HEARTBEAT_INTERVAL], effective[SESSION_TIMEOUT]
        ));
    }
    Ok(())
}

/// DescribeConfigs entries of a group with `settings` set on it.
pub fn group_entries(
    settings: Option<&BTreeMap<String, String>>,
    broker: &BrokerConfig,
) -> Vec<ConfigEntry> {
    GROUP_KEYS
        .iter()
        .map(|&key| {
            let default = default_and_bounds(key, broker)
                .map(|(d, _)| d.to_string())
                .unwrap_or_default();
            let default_synonym = ConfigSynonym {
                name: format!("group.{key}"),
                value: default.clone(),
                source: SOURCE_DEFAULT,
            };
            match settings.and_then(|s| s.get(key)) {
                Some(value) => ConfigEntry {
                    name: key.to_string(),
                    value: value.clone(),
                    source: SOURCE_GROUP,
                    read_only: false,
                    config_type: TYPE_INT,
                    documentation: None,
                    synonyms: vec![
                        ConfigSynonym {
                            name: key.to_string(),
                            value: value.clone(),
                            source: SOURCE_GROUP,
                        },
                        default_synonym,
                    ],
                },
                None => ConfigEntry {
                    name: key.to_string(),
                    value: default,
                    source: SOURCE_DEFAULT,
                    read_only: false,
                    config_type: TYPE_INT,
                    documentation: None,
                    synonyms: vec![default_synonym],
                },
            }
        })
        .collect()
}

/// The settings of every group that has any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupConfigs {
    /// Settings by group id; no group has an empty map.
    pub by_group: BTreeMap<String, BTreeMap<String, String>>,
}

impl GroupConfigs {
    /// This state with `group`'s settings replaced (removed when empty).
    pub fn with_group(&self, group: &str, settings: BTreeMap<String, String>) -> Self {
        let mut out = self.clone();
        if settings.is_empty() {
            out.by_group.remove(group);
        } else {
            out.by_group.insert(group.to_string(), settings);
        }
        out
    }

    /// The stored file's text.
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER_LINE}\n");
        for (group, settings) in &self.by_group {
            for (key, value) in settings {
                out.push_str(&format!("{}/{key}={value}\n", hex_encode(group)));
            }
        }
        out
    }

    /// Parses the stored file's text; every group's settings must be known names with
    /// integer values ([`check_format`]).
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut lines = text.lines().enumerate();
        if lines.next().map(|(_, l)| l) != Some(HEADER_LINE) {
            return Err(format!("first line is not {HEADER_LINE:?}"));
        }
        let mut out = GroupConfigs::default();
        for (i, line) in lines {
            if line.is_empty() {
                continue;
            }
            let bad = |why: String| format!("line {}: {why}", i + 1);
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| bad("not a key=value line".into()))?;
            let (group, key) = name
                .split_once('/')
                .ok_or_else(|| bad("not a <group>/<key> name".into()))?;
            let group = hex_decode(group)
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .filter(|g| !g.is_empty())
                .ok_or_else(|| bad("group name is not hex of UTF-8 text".into()))?;
            let settings = out.by_group.entry(group).or_default();
            if settings
                .insert(key.to_string(), value.to_string())
                .is_some()
            {
                return Err(bad(format!("key {key:?} repeated")));
            }
        }
        for (group, settings) in &out.by_group {
            check_format(settings).map_err(|e| format!("group {group:?}: {e}"))?;
        }
        Ok(out)
    }
}

/// Loads the stored group configurations of `data_dir` (empty when none were stored),
/// removing a leftover temporary file.
pub async fn load<B: Backend>(backend: &B, data_dir: &Path) -> Result<GroupConfigs, String> {
    let path = data_dir.join(GROUP_CONFIG_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    match backend.remove_file(&tmp_path(&path)).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(what(e.to_string())),
        _ => {}
    }
    let bytes = match read_bounded(backend, &path, MAX_GROUP_CONFIG_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(GroupConfigs::default()),
        Err(ReadError::Io(e)) => return Err(what(e.to_string())),
        Err(e) => return Err(what(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| what("not UTF-8".into()))?;
    GroupConfigs::decode(&text).map_err(what)
}

/// Stores `configs` in `data_dir` durably (temp file, sync, rename, directory sync).
pub async fn save<B: Backend>(
    backend: &B,
    data_dir: &Path,
    configs: &GroupConfigs,
) -> std::io::Result<()> {
    let path = data_dir.join(GROUP_CONFIG_FILE);
    write_atomically(backend, data_dir, &path, configs.encode().into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bounds_follow_the_broker_settings() {
        let broker = BrokerConfig::default();
        assert!(check(&map(&[(SESSION_TIMEOUT, "50000")]), &broker).is_ok());
        assert!(check(&map(&[(HEARTBEAT_INTERVAL, "6000")]), &broker).is_ok());
        for (key, value) in [
            (SESSION_TIMEOUT, "44999"),
            (SESSION_TIMEOUT, "60001"),
            (SESSION_TIMEOUT, "x"),
            (HEARTBEAT_INTERVAL, "4999"),
            (HEARTBEAT_INTERVAL, "15001"),
            ("consumer.session.timeout", "1"),
        ] {
            let err = check(&map(&[(key, value)]), &broker).expect_err(key);
            assert!(err.contains(key), "{err}");
        }
        let mut wide = broker.clone();
        wide.groups.consumer_session_timeout_bounds_ms = (1_000, 60_000);
        let err = check(
            &map(&[(SESSION_TIMEOUT, "5000"), (HEARTBEAT_INTERVAL, "5000")]),
            &wide,
        )
        .expect_err("heartbeat not below session");
        assert!(err.contains(HEARTBEAT_INTERVAL), "{err}");
    }

    #[test]
    fn entries_show_defaults_and_group_values() {
        let broker = BrokerConfig::default();
        let entries = group_entries(None, &broker);
        assert_eq!(entries.len(), 2);
        assert!(entries.iter().all(|e| e.source == SOURCE_DEFAULT));
        let set = map(&[(SESSION_TIMEOUT, "50000")]);
        let entries = group_entries(Some(&set), &broker);
        let session = entries.iter().find(|e| e.name == SESSION_TIMEOUT);
        assert_eq!(
            session.map(|e| (e.value.as_str(), e.source)),
            Some(("50000", SOURCE_GROUP))
        );
    }

    #[test]
    fn encode_decode_round_trip_and_refusals() {
        let configs = GroupConfigs::default()
            .with_group("g=1\nx/y", map(&[(SESSION_TIMEOUT, "50000")]))
            .with_group("h", map(&[(HEARTBEAT_INTERVAL, "6000")]));
        let text = configs.encode();
        assert_eq!(GroupConfigs::decode(&text), Ok(configs.clone()));
        // Out of today's bounds, but stored when they allowed it: kept.
        let wide = format!("{text}{}/{SESSION_TIMEOUT}=1\n", hex_encode("k"));
        assert!(GroupConfigs::decode(&wide).is_ok());
        assert_eq!(configs.with_group("h", BTreeMap::new()).by_group.len(), 1);
        for bad in [
            String::new(),
            text.replace(HEADER_LINE, "# other"),
            format!("{text}zz/{SESSION_TIMEOUT}=50000\n"),
            format!("{text}{}/{SESSION_TIMEOUT}=soon\n", hex_encode("k")),
            format!("{text}{}/consumer.session=1\n", hex_encode("k")),
            format!("{text}{}/{HEARTBEAT_INTERVAL}=7000\n", hex_encode("h")),
            format!("{text}no equals\n"),
        ] {
            assert!(GroupConfigs::decode(&bad).is_err(), "accepted {bad:?}");
        }
    }
}
