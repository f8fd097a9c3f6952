//! A TLS listener's keystore replaced at run time, as Kafka replaces it: AlterConfigs or
//! IncrementalAlterConfigs of `ssl.keystore.location` (or `listener.name.<l>.ssl.keystore.location`)
//! on this broker's resource.
//!
//! Contract:
//! - Keys: [`is_keystore_key`]: `ssl.keystore.location` and the per-listener one of a TLS
//!   listener, altered alone (with other keys in the same request: INVALID_REQUEST) and only on
//!   this broker (resource name = `node.id`; the cluster default: INVALID_REQUEST, as Kafka
//!   keeps keystores per broker). AlterConfigs replaces the set of altered keystore locations.
//! - Validated first (I144): every TLS listener's settings with the new locations laid over the
//!   static ones are loaded in full ([`crate::config::tls::load`]: the file read, its key and
//!   chain parsed, the key checked against the chain); any failure is INVALID_CONFIG naming the
//!   setting, and the keystores in force stay. Setting the same path again re-reads the file
//!   (how a certificate renewed in place is picked up).
//! - Then the new configurations are published whole; handshakes that start afterwards use
//!   them, connections already open keep the configuration they were accepted with (I145).
//! - Stored (I180) with the dynamic broker settings (`dynamic_config`, `keystore.<key>` lines)
//!   before it is used, and restored at startup, as Kafka keeps a dynamic broker config; a
//!   stored keystore that no longer loads at startup is logged and the static one serves.

use std::collections::BTreeMap;

use minikafka_core::error_code::ErrorCode;

use crate::config::tls::{self, ListenerTls, TlsSettings};
use crate::config::BrokerConfig;

const LOCATION: &str = "ssl.keystore.location";
const INLINE: [&str; 2] = ["ssl.keystore.certificate.chain", "ssl.keystore.key"];

/// The keystores altered at run time and each listener's configuration under them.
#[derive(Clone, Debug, Default)]
pub struct ReloadedKeystores {
    /// The keystore locations set at run time, by key as altered.
    pub locations: BTreeMap<String, String>,
    /// Each listener's TLS configuration under them, index = listener; `None` for a
    /// listener without TLS (or before any alteration: the static one is in force).
    pub tls: Vec<Option<TlsSettings>>,
}

/// Whether `key` names a keystore location that may be altered at run time.
pub fn is_keystore_key(config: &BrokerConfig, key: &str) -> bool {
    let tls_listeners = || config.listeners.iter().filter(|l| l.protocol.uses_tls());
    if key == LOCATION {
        return tls_listeners().next().is_some();
    }
    tls_listeners().any(|l| key == format!("{}{LOCATION}", l.config_prefix()))
}

/// Loads every TLS listener's settings with `locations` laid over the static ones.
fn load_all(
    config: &BrokerConfig,
    locations: &BTreeMap<String, String>,
) -> Result<Vec<Option<TlsSettings>>, (ErrorCode, String)> {
    let mut settings = config.explicit.clone();
    for (key, path) in locations {
        // A location replaces the inline keystore of the same scope (the two are exclusive).
        let prefix = key.strip_suffix(LOCATION).unwrap_or("");
        for inline in INLINE {
            settings.remove(&format!("{prefix}{inline}"));
        }
        settings.insert(key.clone(), path.clone());
    }
    config
        .listeners
        .iter()
        .map(|listener| {
            if !listener.protocol.uses_tls() {
                return Ok(None);
            }
            let wanted = ListenerTls {
                name: &listener.name,
                protocol: listener.protocol.to_string(),
                prefix: listener.config_prefix(),
            };
            tls::load(&wanted, &settings).map(Some).map_err(|(key, value, why)| {
                (
                    ErrorCode::INVALID_CONFIG,
                    format!("invalid value `{value}` for `{key}`: {why}; the keystore in force is kept"),
                )
            })
        })
        .collect()
}

/// The keystores after `locations` (the altered set, from
/// [`altered`](super::alter_configs::altered)): every TLS listener loaded and checked; an
/// error leaves nothing changed (I144).
pub fn reload(
    config: &BrokerConfig,
    locations: BTreeMap<String, String>,
) -> Result<ReloadedKeystores, (ErrorCode, String)> {
    let tls = load_all(config, &locations)?;
    Ok(ReloadedKeystores { locations, tls })
}

impl ReloadedKeystores {
    /// The TLS configuration a new connection on `listener` is handshaken with: the reloaded
    /// one once a keystore was altered at run time, else the static one (I145).
    pub fn listener_tls(&self, config: &BrokerConfig, listener: usize) -> Option<TlsSettings> {
        match self.tls.get(listener) {
            Some(tls) => tls.clone(),
            None => config.listeners.get(listener).and_then(|l| l.tls.clone()),
        }
    }
}
