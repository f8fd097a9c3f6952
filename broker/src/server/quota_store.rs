//! The client quota configuration, kept durably in the data directory and shared by every
//! shard.
//!
//! Contract:
//! - AlterClientQuotas builds the next [`QuotaConfigs`] and, under the admin lock, stores it
//!   ([`save`]) before putting it in force in [`Quotas`](super::quotas::Quotas) and answering:
//!   an answered change survives a crash, and a change whose write failed is neither answered
//!   as done nor in force (I95).
//! - Stored in `<data>/`[`QUOTA_FILE`]: a header line, then one value a line,
//!   `<user> <client-id> <key> <value>`, each side `-` (the entity has no such side), `*`
//!   (`<default>`) or `=<hex(name)>` (hex keeps any name on one line); an IP entity's line is
//!   `@ <ip side> connection_creation_rate <value>` (I160); the value is written
//!   as Rust writes an `f64`, which reads back exactly. Replaced atomically (temp file, sync,
//!   rename, directory sync); read back at startup with a size bound, each line checked: a
//!   line that does not parse stops the broker rather than drop or change a quota silently.
//! - Never: holds a lock across disk work (the admin lock, async, serializes writers).

use std::path::Path;

use minikafka_core::backend::Backend;
use minikafka_core::quota::{EntityName, QuotaConfigs, QuotaEntity, QuotaKind};

use crate::log::atomic_file::{read_bounded, tmp_path, write_atomically};

/// File name of the stored quotas in the data directory.
pub const QUOTA_FILE: &str = "client-quotas.v1";
/// Largest stored file read back (I10).
pub const MAX_QUOTA_FILE_BYTES: u64 = 16 * 1024 * 1024;
const HEADER_LINE: &str = "# minikafka client quotas v1";

fn encode_side(side: &Option<EntityName>) -> String {
    match side {
        None => "-".to_string(),
        Some(EntityName::Default) => "*".to_string(),
        Some(EntityName::Named(name)) => format!("={}", hex::encode(name)),
    }
}

fn decode_side(text: &str) -> Result<Option<EntityName>, String> {
    match text {
        "-" => Ok(None),
        "*" => Ok(Some(EntityName::Default)),
        _ => {
            let hex_name = text
                .strip_prefix('=')
                .ok_or_else(|| "expected -, * or =<hex>".to_string())?;
            let name = hex::decode(hex_name)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| "not hex of UTF-8".to_string())?;
            Ok(Some(EntityName::Named(name)))
        }
    }
}

/// The stored form of `configs`.
pub fn encode(configs: &QuotaConfigs) -> String {
    let mut out = format!("{HEADER_LINE}\n");
    for (entity, values) in configs.entries() {
        for (kind, value) in values {
            out.push_str(&format!(
                "{} {} {} {}\n",
                encode_side(&entity.user),
                encode_side(&entity.client_id),
                kind.key(),
                value
            ));
        }
    }
    for (ip, value) in configs.ip_entries() {
        let side = encode_side(&Some(ip.clone()));
        out.push_str(&format!("@ {side} connection_creation_rate {value}\n"));
    }
    out
}

/// The configuration stored as `text`, or the first line that is wrong and why.
pub fn decode(text: &str) -> Result<QuotaConfigs, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, HEADER_LINE)) => {}
        _ => return Err(format!("line 1: expected {HEADER_LINE:?}")),
    }
    let mut configs = QuotaConfigs::default();
    for (index, line) in lines {
        let bad = |why: &str| format!("line {}: {why}", index + 1);
        let fields: Vec<&str> = line.split(' ').collect();
        let [user, client, key, value] = fields[..] else {
            return Err(bad("expected 4 fields"));
        };
        if user == "@" {
            let ip = decode_side(client)
                .map_err(|e| bad(&e))?
                .ok_or_else(|| bad("an IP entity without an address"))?;
            if key != QuotaKind::ConnectionCreationRate.key() {
                return Err(bad("an IP entity's key is connection_creation_rate"));
            }
            let value: f64 = value.parse().map_err(|_| bad("not a number"))?;
            if !value.is_finite() || value < 0.0 {
                return Err(bad("not a finite, non-negative number"));
            }
            configs.set_ip(ip, Some(value));
            continue;
        }
        let entity = QuotaEntity {
            user: decode_side(user).map_err(|e| bad(&e))?,
            client_id: decode_side(client).map_err(|e| bad(&e))?,
        };
        if entity.user.is_none() && entity.client_id.is_none() {
            return Err(bad("an entity with neither user nor client id"));
        }
        let kind = QuotaKind::from_key(key).ok_or_else(|| bad("unknown quota key"))?;
        let value: f64 = value.parse().map_err(|_| bad("not a number"))?;
        if !value.is_finite() || value < 0.0 {
            return Err(bad("not a finite, non-negative number"));
        }
        configs.set(entity, kind, Some(value));
    }
    Ok(configs)
}

/// Loads the stored quotas (none when the file does not exist), removing a leftover temp
/// file.
pub async fn load<B: Backend>(backend: &B, data_dir: &Path) -> Result<QuotaConfigs, String> {
    let path = data_dir.join(QUOTA_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    match backend.remove_file(&tmp_path(&path)).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(what(e.to_string())),
        _ => {}
    }
    let bytes = match read_bounded(backend, &path, MAX_QUOTA_FILE_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(QuotaConfigs::default()),
        Err(e) => return Err(what(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| what("not UTF-8".into()))?;
    decode(&text).map_err(what)
}

/// Stores `configs` in `data_dir` durably (temp file, sync, rename, directory sync).
pub async fn save<B: Backend>(
    backend: &B,
    data_dir: &Path,
    configs: &QuotaConfigs,
) -> std::io::Result<()> {
    let path = data_dir.join(QUOTA_FILE);
    write_atomically(backend, data_dir, &path, encode(configs).into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(s: &str) -> Option<EntityName> {
        Some(EntityName::Named(s.to_string()))
    }

    #[test]
    fn the_stored_form_reads_back_whatever_the_names_and_values_hold() {
        let mut configs = QuotaConfigs::default();
        let odd = QuotaEntity {
            user: named("a b\nc é"),
            client_id: Some(EntityName::Default),
        };
        configs.set(odd, QuotaKind::ProducerByteRate, Some(1024.0));
        let client = QuotaEntity {
            user: None,
            client_id: named("app"),
        };
        configs.set(client.clone(), QuotaKind::ConsumerByteRate, Some(0.1 + 0.2));
        configs.set(client, QuotaKind::ProducerByteRate, Some(0.0));
        let user_default = QuotaEntity {
            user: Some(EntityName::Default),
            client_id: None,
        };
        configs.set(user_default, QuotaKind::ProducerByteRate, Some(1e300));
        configs.set(
            QuotaEntity {
                user: named("bob"),
                client_id: None,
            },
            QuotaKind::RequestPercentage,
            Some(12.5),
        );
        configs.set_ip(EntityName::Default, Some(7.0));
        configs.set_ip(EntityName::Named("::1".into()), Some(2.0));
        assert_eq!(decode(&encode(&configs)), Ok(configs));
        assert_eq!(
            decode(&encode(&QuotaConfigs::default())),
            Ok(QuotaConfigs::default())
        );
    }

    fn side() -> impl proptest::strategy::Strategy<Value = Option<EntityName>> {
        use proptest::prelude::*;
        prop_oneof![
            Just(None),
            Just(Some(EntityName::Default)),
            any::<String>().prop_map(|n| Some(EntityName::Named(n))),
        ]
    }

    proptest::proptest! {
        /// Any configuration reads back as stored: any names (spaces, newlines, any UTF-8),
        /// any finite non-negative value, to the bit.
        #[test]
        fn any_configuration_reads_back(
            values in proptest::collection::vec(
                (side(), side(), 0..4usize, 0.0..1e18f64),
                0..12,
            )
        ) {
            let mut configs = QuotaConfigs::default();
            for (user, client_id, kind, value) in values {
                if kind == 3 {
                    // An IP entity: the user side's name stands for the address.
                    if let Some(ip) = user {
                        configs.set_ip(ip, Some(value));
                    }
                    continue;
                }
                if user.is_none() && client_id.is_none() {
                    continue;
                }
                let kind = [
                    QuotaKind::ProducerByteRate,
                    QuotaKind::ConsumerByteRate,
                    QuotaKind::RequestPercentage,
                ][kind];
                configs.set(QuotaEntity { user, client_id }, kind, Some(value));
            }
            proptest::prop_assert_eq!(decode(&encode(&configs)), Ok(configs));
        }

        /// Any text decodes to an error or to a configuration that encodes back to it.
        #[test]
        fn decode_never_panics(body in "[-*=@ a-f0-9_.\n]{0,200}") {
            let text = format!("{HEADER_LINE}\n{body}");
            if let Ok(configs) = decode(&text) {
                proptest::prop_assert_eq!(decode(&encode(&configs)), Ok(configs));
            }
        }
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_the_line() {
        assert!(decode("").is_err());
        let h = HEADER_LINE;
        for (body, why) in [
            ("- =61 producer_byte_rate", "4 fields"),
            ("- - producer_byte_rate 1", "neither"),
            ("- =zz producer_byte_rate 1", "hex"),
            ("- =61 io_thread_units 1", "unknown quota key"),
            ("- =61 producer_byte_rate x", "not a number"),
            ("- =61 producer_byte_rate -1", "non-negative"),
            ("- =61 producer_byte_rate NaN", "non-negative"),
            ("@ - connection_creation_rate 1", "without an address"),
            ("@ * producer_byte_rate 1", "connection_creation_rate"),
            ("@ =31 connection_creation_rate inf", "non-negative"),
        ] {
            let err = decode(&format!("{h}\n{body}\n")).expect_err(body);
            assert!(
                err.starts_with("line 2") && err.contains(why),
                "{body}: {err}"
            );
        }
    }
}
