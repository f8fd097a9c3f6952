//! Each listener's SASL settings, resolved as Kafka resolves them: a setting prefixed
//! `listener.name.<listener>.` applies to that listener alone and wins over the unprefixed
//! one; a JAAS entry may also be prefixed by the mechanism
//! (`listener.name.sasl_ssl.plain.sasl.jaas.config`).
//!
//! Contract:
//! - Input: the listeners and every setting given (keys as written).
//! - Output: each SASL listener's enabled mechanisms, PLAIN users and OAUTHBEARER validator
//!   options, or an error naming the setting that is missing or wrong (a PLAIN listener
//!   without users does not start). OAUTHBEARER needs no JAAS entry: without one (or with
//!   an `OAuthBearerLoginModule` entry without `unsecuredValidator*` options) Kafka's
//!   unsecured validator runs with its defaults.
//! - Never: keeps a password anywhere but in [`PlainUsers`] (whose `Debug` hides them).

use std::collections::BTreeMap;

use minikafka_core::auth::jaas;
use minikafka_core::auth::jwks::SignedValidatorConfig;
use minikafka_core::auth::oauthbearer::UnsecuredValidatorConfig;
use minikafka_core::auth::plain::PlainUsers;

use super::jwks::{HttpEndpoint, JwksValidator};
use super::listeners::{Listener, SaslSettings};

/// The SASL mechanisms this broker serves.
pub const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Kafka's OAUTHBEARER login module, whose options configure the unsecured validator.
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// The settings a `listener.name.<listener>.` prefix may precede.
pub const PER_LISTENER: &[&str] = &[
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "max.connection.creation.rate",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
];

/// The settings of OAUTHBEARER's signed-token validator, which Kafka reads with the
/// mechanism's prefix (`listener.name.<l>.oauthbearer.sasl.oauthbearer.…`) as well.
const OAUTHBEARER_SETTINGS: &[&str] = &[
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
];

/// The base setting of a `listener.name.<l>.[<mechanism>.]<setting>` key, if `key` is one and
/// its setting may be given per listener.
pub fn per_listener_base(key: &str) -> Option<&'static str> {
    let rest = key.strip_prefix("listener.name.")?;
    let (_, setting) = rest.split_once('.')?;
    if let Some(base) = PER_LISTENER
        .iter()
        .chain(super::tls::PER_LISTENER)
        .find(|b| **b == setting)
    {
        return Some(base);
    }
    let (mechanism, setting) = setting.split_once(".sasl.")?;
    if mechanism.eq_ignore_ascii_case("oauthbearer") {
        if let Some(base) = OAUTHBEARER_SETTINGS
            .iter()
            .find(|b| b.strip_prefix("sasl.") == Some(setting))
        {
            return Some(base);
        }
    }
    (setting == "jaas.config" && MECHANISMS.iter().any(|m| m.eq_ignore_ascii_case(mechanism)))
        .then_some("sasl.jaas.config")
}

/// The value of `key` for `listener`: `listener.name.<l>.<key>`, else `<key>`.
fn listener_value<'a>(
    settings: &'a BTreeMap<String, String>,
    listener: &Listener,
    key: &str,
) -> Option<(String, &'a str)> {
    let prefixed = format!("{}{key}", listener.config_prefix());
    if let Some(v) = settings.get(&prefixed) {
        return Some((prefixed, v));
    }
    settings.get(key).map(|v| (key.to_string(), v.as_str()))
}

/// The JAAS text for `mechanism` on `listener`: the mechanism-prefixed listener key, the
/// listener key, then the unprefixed `sasl.jaas.config`.
fn jaas_for<'a>(
    settings: &'a BTreeMap<String, String>,
    listener: &Listener,
    mechanism: &str,
) -> Option<(String, &'a str)> {
    let key = format!(
        "{}{}.sasl.jaas.config",
        listener.config_prefix(),
        mechanism.to_ascii_lowercase()
    );
    match settings.get(&key) {
        Some(v) => Some((key, v.as_str())),
        None => listener_value(settings, listener, "sasl.jaas.config"),
    }
    .filter(|(_, v)| !v.trim().is_empty())
}

/// Parses `sasl.enabled.mechanisms`: known mechanisms, comma-separated, at least one.
pub fn parse_mechanisms(value: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let upper = m.to_ascii_uppercase();
        if upper == "GSSAPI" {
            return Err("GSSAPI (Kerberos) is not supported".into());
        }
        if !MECHANISMS.contains(&upper.as_str()) {
            return Err(format!(
                "unknown mechanism {m} (expected {})",
                MECHANISMS.join(", ")
            ));
        }
        if !out.contains(&upper) {
            out.push(upper);
        }
    }
    if out.is_empty() {
        return Err("no mechanism given".into());
    }
    Ok(out)
}

/// Checks a `sasl.jaas.config` value (Kafka's JAAS syntax, one entry; empty: none).
pub fn check_jaas(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Ok(());
    }
    jaas::parse_single(value)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Resolves every SASL listener's settings in place; `default_mechanisms` is the
/// `sasl.enabled.mechanisms` row's value. Errors are `(key, value, why)`.
pub fn resolve(
    listeners: &mut [Listener],
    settings: &BTreeMap<String, String>,
    default_mechanisms: &[String],
) -> Result<(), (String, String, String)> {
    for listener in listeners.iter_mut() {
        if !listener.protocol.uses_sasl() {
            continue;
        }
        let mechanisms = match listener_value(settings, listener, "sasl.enabled.mechanisms") {
            Some((key, value)) => {
                parse_mechanisms(value).map_err(|why| (key, value.to_string(), why))?
            }
            None => default_mechanisms.to_vec(),
        };
        let mut plain = None;
        if mechanisms.iter().any(|m| m == "PLAIN") {
            let Some((key, text)) = jaas_for(settings, listener, "PLAIN") else {
                return Err((
                    format!("{}plain.sasl.jaas.config", listener.config_prefix()),
                    String::new(),
                    format!(
                        "listener {} enables PLAIN but no PlainLoginModule JAAS entry gives its users",
                        listener.name
                    ),
                ));
            };
            // Never echo the JAAS text back: it holds passwords.
            let hidden = || "[hidden]".to_string();
            let entry =
                jaas::parse_single(text).map_err(|e| (key.clone(), hidden(), e.to_string()))?;
            let users = PlainUsers::from_jaas(&entry)
                .map_err(|e| (key.clone(), hidden(), e.to_string()))?;
            plain = Some(users);
        }
        let mut oauthbearer = None;
        let mut oauthbearer_jwks = None;
        if mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            oauthbearer = Some(oauthbearer_validator(settings, listener)?);
            oauthbearer_jwks = jwks_validator(settings, listener)?;
        }
        listener.sasl = SaslSettings {
            mechanisms,
            plain,
            oauthbearer,
            oauthbearer_jwks,
        };
    }
    Ok(())
}

/// OAUTHBEARER's unsecured validator options for `listener`: from its
/// `OAuthBearerLoginModule` JAAS entry if it has one, else Kafka's defaults (an entry of
/// another login module, say PLAIN's given unprefixed, is not OAUTHBEARER's).
fn oauthbearer_validator(
    settings: &BTreeMap<String, String>,
    listener: &Listener,
) -> Result<UnsecuredValidatorConfig, (String, String, String)> {
    let Some((key, text)) = jaas_for(settings, listener, "OAUTHBEARER") else {
        return Ok(UnsecuredValidatorConfig::default());
    };
    let hidden = || "[hidden]".to_string();
    let entry = jaas::parse_single(text).map_err(|e| (key.clone(), hidden(), e.to_string()))?;
    if entry.login_module != OAUTHBEARER_LOGIN_MODULE {
        return Ok(UnsecuredValidatorConfig::default());
    }
    UnsecuredValidatorConfig::from_options(&entry.options)
        .map_err(|e| (key, hidden(), e.to_string()))
}

/// Where a JWKS URL points: a local file, or an `http(s):` endpoint.
#[derive(Debug, PartialEq, Eq)]
enum JwksLocation<'a> {
    /// A `file:` URL's absolute path.
    File(&'a str),
    /// An `http:` or `https:` URL with a host.
    Http,
}

/// Reads a JWKS URL: `file:/p`, `file:///p`, `file://localhost/p`, or `http(s)://host...`.
fn jwks_location(url: &str) -> Result<JwksLocation<'_>, String> {
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
    {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        if host.is_empty() || host.starts_with(':') || host.contains('@') {
            return Err("an http(s): URL needs a host (and no user info)".into());
        }
        return Ok(JwksLocation::Http);
    }
    let rest = url
        .strip_prefix("file:")
        .ok_or_else(|| "a JWKS URL is file:, http: or https:".to_string())?;
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => authority_and_path
            .strip_prefix("localhost")
            .unwrap_or(authority_and_path),
        None => rest,
    };
    if !path.starts_with('/') {
        return Err("a file: URL needs an absolute path".into());
    }
    Ok(JwksLocation::File(path))
}

/// Checks `sasl.oauthbearer.jwks.endpoint.url`: empty, a `file:` URL with an absolute path,
/// or an `http(s):` URL with a host.
pub fn check_jwks_url(value: &str) -> Result<(), String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(());
    }
    jwks_location(value).map(drop)
}

/// The trust roots of an `https:` JWKS endpoint: the certificates of the PEM file that the
/// OAUTHBEARER JAAS entry's `ssl.truststore.location` option names (Kafka reads the JWKS
/// client's SSL settings from those options), or `None` for Mozilla's roots.
fn jwks_trust_roots(
    settings: &BTreeMap<String, String>,
    listener: &Listener,
) -> Result<Option<Vec<Vec<u8>>>, super::tls::Failure> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::CertificateDer;
    let Some((key, text)) = jaas_for(settings, listener, "OAUTHBEARER") else {
        return Ok(None);
    };
    let hidden = || "[hidden]".to_string();
    let entry = jaas::parse_single(text).map_err(|e| (key.clone(), hidden(), e.to_string()))?;
    if entry.login_module != OAUTHBEARER_LOGIN_MODULE {
        return Ok(None);
    }
    if let Some(kind) = entry.options.get("ssl.truststore.type") {
        if !kind.trim().eq_ignore_ascii_case("PEM") {
            return Err((key, hidden(), "the JWKS truststore must be PEM".into()));
        }
    }
    let Some(path) = entry.options.get("ssl.truststore.location") else {
        return Ok(None);
    };
    let certs: Vec<Vec<u8>> = CertificateDer::pem_file_iter(path.trim())
        .and_then(|certs| {
            certs
                .map(|c| c.map(|c| c.as_ref().to_vec()))
                .collect::<Result<_, _>>()
        })
        .map_err(|e| (key.clone(), hidden(), format!("cannot read {path}: {e}")))?;
    if certs.is_empty() {
        return Err((key, hidden(), format!("{path} holds no certificate")));
    }
    Ok(Some(certs))
}

/// Checks a claim-name setting: not empty.
pub fn check_claim_name(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("a claim name cannot be empty".into());
    }
    Ok(())
}

/// The value of an OAUTHBEARER setting for `listener`: mechanism-prefixed, listener-prefixed,
/// then unprefixed (Kafka's order).
fn oauthbearer_value<'a>(
    settings: &'a BTreeMap<String, String>,
    listener: &Listener,
    key: &str,
) -> Option<(String, &'a str)> {
    let mechanism_key = format!("{}oauthbearer.{key}", listener.config_prefix());
    match settings.get(&mechanism_key) {
        Some(v) => Some((mechanism_key, v.as_str())),
        None => listener_value(settings, listener, key),
    }
}

/// OAUTHBEARER's signed-token validator for `listener`, when its JWKS URL is set.
fn jwks_validator(
    settings: &BTreeMap<String, String>,
    listener: &Listener,
) -> Result<Option<JwksValidator>, (String, String, String)> {
    let value = |key: &str| oauthbearer_value(settings, listener, key);
    let Some((url_key, url)) =
        value("sasl.oauthbearer.jwks.endpoint.url").filter(|(_, v)| !v.trim().is_empty())
    else {
        return Ok(None);
    };
    let url = url.trim();
    let location = jwks_location(url).map_err(|why| (url_key.clone(), url.to_string(), why))?;
    let mut config = SignedValidatorConfig::default();
    if let Some((_, v)) = value("sasl.oauthbearer.expected.audience") {
        config.expected_audience = v
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
    }
    if let Some((_, v)) = value("sasl.oauthbearer.expected.issuer") {
        config.expected_issuer = Some(v.trim().to_string()).filter(|i| !i.is_empty());
    }
    for (key, field) in [
        ("sasl.oauthbearer.sub.claim.name", &mut config.sub_claim),
        ("sasl.oauthbearer.scope.claim.name", &mut config.scope_claim),
    ] {
        if let Some((k, v)) = value(key) {
            check_claim_name(v).map_err(|why| (k, v.to_string(), why))?;
            *field = v.trim().to_string();
        }
    }
    let mut refresh_ms = 3_600_000;
    if let Some((k, v)) = value("sasl.oauthbearer.jwks.endpoint.refresh.ms") {
        refresh_ms = v
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|ms| *ms > 0)
            .ok_or_else(|| (k, v.to_string(), "not a positive number of ms".to_string()))?;
    }
    if let Some((k, v)) = value("sasl.oauthbearer.clock.skew.seconds") {
        config.clock_skew_seconds = v
            .trim()
            .parse::<u32>()
            .map(u64::from)
            .map_err(|_| (k, v.to_string(), "not a number of seconds".to_string()))?;
    }
    let validator = match location {
        JwksLocation::File(path) => JwksValidator::open(url, path, refresh_ms, config),
        JwksLocation::Http => {
            let mut backoff = [100_u64, 10_000];
            for (key, slot) in [
                ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 0),
                ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 1),
            ] {
                if let Some((k, v)) = value(key) {
                    backoff[slot] = v
                        .trim()
                        .parse::<u64>()
                        .map_err(|_| (k, v.to_string(), "not a number of ms".to_string()))?;
                }
            }
            let trust = jwks_trust_roots(settings, listener)?;
            let endpoint = HttpEndpoint::new(trust, backoff[0], backoff[1]);
            JwksValidator::fetch(url, endpoint, refresh_ms, config)
        }
    };
    validator
        .map(Some)
        .map_err(|why| (url_key, url.to_string(), why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::listeners::SecurityProtocol;

    fn listener(name: &str, protocol: SecurityProtocol) -> Listener {
        Listener {
            name: std::sync::Arc::from(name),
            protocol,
            bind: "127.0.0.1:0".parse().expect("addr"),
            advertised_host: "127.0.0.1".into(),
            advertised_port: 0,
            sasl: SaslSettings::default(),
            tls: None,
        }
    }

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;

    #[test]
    fn oauthbearer_jwks_settings_resolve_per_listener_and_mechanism() {
        assert_eq!(
            per_listener_base(
                "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.issuer"
            ),
            Some("sasl.oauthbearer.expected.issuer")
        );
        assert_eq!(
            per_listener_base("listener.name.sasl_ssl.sasl.oauthbearer.jwks.endpoint.url"),
            Some("sasl.oauthbearer.jwks.endpoint.url")
        );
        assert_eq!(
            per_listener_base("listener.name.x.plain.sasl.oauthbearer.expected.issuer"),
            None
        );
        let file = |u| {
            jwks_location(u).map(|l| match l {
                JwksLocation::File(p) => p.to_string(),
                JwksLocation::Http => "http".to_string(),
            })
        };
        assert_eq!(file("file:///etc/jwks.json"), Ok("/etc/jwks.json".into()));
        assert_eq!(file("file:/etc/jwks.json"), Ok("/etc/jwks.json".into()));
        assert_eq!(file("https://idp.example/jwks"), Ok("http".into()));
        assert_eq!(file("HTTP://127.0.0.1:8080/jwks"), Ok("http".into()));
        assert!(check_jwks_url("https:///jwks").is_err());
        assert!(check_jwks_url("https://user@idp.example/jwks").is_err());
        assert!(check_jwks_url("ftp://idp.example/jwks").is_err());
        assert_eq!(file("file://localhost/etc/j"), Ok("/etc/j".into()));
        assert!(jwks_location("file:jwks.json").is_err());
        assert!(check_jwks_url("").is_ok());

        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, r#"{"keys":[]}"#).expect("written");
        let url = format!("file://{}", path.display());
        let mut listeners = vec![listener("SASL_SSL", SecurityProtocol::SaslSsl)];
        let given = settings(&[
            (
                "listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
                url.as_str(),
            ),
            ("sasl.oauthbearer.expected.audience", "a, b"),
            (
                "listener.name.sasl_ssl.sasl.oauthbearer.clock.skew.seconds",
                "7",
            ),
        ]);
        resolve(&mut listeners, &given, &["OAUTHBEARER".to_string()]).expect("resolves");
        let signed = listeners[0]
            .sasl
            .oauthbearer_jwks
            .as_ref()
            .expect("a JWKS validator");
        assert_eq!(signed.config.expected_audience, ["a", "b"]);
        assert_eq!(signed.config.clock_skew_seconds, 7);
        assert_eq!(signed.config.expected_issuer, None);
        // Read again once the refresh interval has passed; a bad file keeps the keys.
        let key = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#;
        let mut given = given.clone();
        given.insert(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms".into(),
            "1000".into(),
        );
        let mut listeners = vec![listener("SASL_SSL", SecurityProtocol::SaslSsl)];
        resolve(&mut listeners, &given, &["OAUTHBEARER".to_string()]).expect("resolves");
        let signed = listeners[0]
            .sasl
            .oauthbearer_jwks
            .clone()
            .expect("a JWKS validator");
        let start = 1_700_000_000_000;
        assert!(signed.keys(start).keys.is_empty());
        std::fs::write(&path, key).expect("written");
        let later = start + 1000;
        assert_eq!(signed.keys(later).keys.len(), 1);
        std::fs::write(&path, "not json").expect("written");
        assert_eq!(
            signed.keys(later + 999).keys.len(),
            1,
            "not read before the interval"
        );
        assert_eq!(
            signed.keys(later + 1000).keys.len(),
            1,
            "a bad file keeps the keys"
        );
        // Without OAUTHBEARER enabled the JWKS is not read.
        let mut listeners = vec![listener("SASL_SSL", SecurityProtocol::SaslSsl)];
        let given = settings(&[("sasl.oauthbearer.jwks.endpoint.url", "file:///absent")]);
        let mut with_plain = given.clone();
        with_plain.insert("sasl.jaas.config".into(), JAAS.into());
        resolve(&mut listeners, &with_plain, &["PLAIN".to_string()]).expect("resolves");
        assert!(listeners[0].sasl.oauthbearer_jwks.is_none());
        let err =
            resolve(&mut listeners, &given, &["OAUTHBEARER".to_string()]).expect_err("absent");
        assert_eq!(err.0, "sasl.oauthbearer.jwks.endpoint.url");
    }

    #[test]
    fn prefixed_keys_name_their_base_setting() {
        assert_eq!(
            per_listener_base("listener.name.sasl_ssl.plain.sasl.jaas.config"),
            Some("sasl.jaas.config")
        );
        assert_eq!(
            per_listener_base("listener.name.internal.sasl.enabled.mechanisms"),
            Some("sasl.enabled.mechanisms")
        );
        assert_eq!(
            per_listener_base("listener.name.x.gssapi.sasl.jaas.config"),
            None
        );
        assert_eq!(per_listener_base("listener.name.x.log.dirs"), None);
        assert_eq!(per_listener_base("sasl.jaas.config"), None);
    }

    #[test]
    fn the_listener_prefix_wins_and_plain_needs_users() {
        let mut ls = vec![
            listener("SASL_SSL", SecurityProtocol::SaslSsl),
            listener("PLAINTEXT", SecurityProtocol::Plaintext),
        ];
        let given = settings(&[
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", JAAS),
            ("listener.name.sasl_ssl.sasl.enabled.mechanisms", "plain"),
        ]);
        resolve(&mut ls, &given, &["SCRAM-SHA-512".to_string()]).expect("ok");
        assert_eq!(ls[0].sasl.mechanisms, ["PLAIN"]);
        let users = ls[0].sasl.plain.as_ref().expect("users");
        assert_eq!(users.usernames().collect::<Vec<_>>(), ["alice"]);
        assert_eq!(ls[1].sasl, SaslSettings::default());

        let mut ls = vec![listener("SASL_SSL", SecurityProtocol::SaslSsl)];
        let (key, value, why) =
            resolve(&mut ls, &settings(&[]), &["PLAIN".to_string()]).expect_err("no users");
        assert_eq!(key, "listener.name.sasl_ssl.plain.sasl.jaas.config");
        assert!(value.is_empty() && why.contains("PLAIN"), "{why}");

        let mut ls = vec![listener("SASL_SSL", SecurityProtocol::SaslSsl)];
        resolve(
            &mut ls,
            &settings(&[("sasl.jaas.config", JAAS)]),
            &["PLAIN".to_string()],
        )
        .expect("the unprefixed form");
    }

    #[test]
    fn mechanisms_are_checked() {
        assert_eq!(
            parse_mechanisms("scram-sha-512, PLAIN").expect("ok"),
            ["SCRAM-SHA-512", "PLAIN"]
        );
        assert!(parse_mechanisms("GSSAPI")
            .expect_err("no kerberos")
            .contains("GSSAPI"));
        assert!(parse_mechanisms("FOO").is_err());
        assert_eq!(
            parse_mechanisms("oauthbearer").expect("ok"),
            ["OAUTHBEARER"]
        );
        assert!(parse_mechanisms("").is_err());
    }
}

#[cfg(test)]
mod oauthbearer_tests {
    use super::*;
    use crate::config::listeners::SecurityProtocol;

    #[test]
    fn oauthbearer_takes_its_login_modules_options_or_the_defaults() {
        let listener = || Listener {
            name: std::sync::Arc::from("SASL_SSL"),
            protocol: SecurityProtocol::SaslSsl,
            bind: "127.0.0.1:0".parse().expect("addr"),
            advertised_host: "127.0.0.1".into(),
            advertised_port: 0,
            sasl: SaslSettings::default(),
            tls: None,
        };
        let oauth = ["OAUTHBEARER".to_string()];
        let mut ls = vec![listener()];
        resolve(&mut ls, &BTreeMap::new(), &oauth).expect("no JAAS needed");
        assert_eq!(
            ls[0].sasl.oauthbearer,
            Some(UnsecuredValidatorConfig::default())
        );

        let given: BTreeMap<String, String> = [(
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config".to_string(),
            format!("{OAUTHBEARER_LOGIN_MODULE} required unsecuredValidatorRequiredScope=\"read,write\" unsecuredValidatorAllowableClockSkewMs=\"500\";"),
        )]
        .into();
        let mut ls = vec![listener()];
        resolve(&mut ls, &given, &oauth).expect("ok");
        let config = ls[0].sasl.oauthbearer.clone().expect("validator");
        assert_eq!(config.required_scope, ["read", "write"]);
        assert_eq!(config.allowable_clock_skew_ms, 500);

        // PLAIN's entry given unprefixed is not OAUTHBEARER's.
        let given: BTreeMap<String, String> = [(
            "sasl.jaas.config".to_string(),
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";"#
                .to_string(),
        )]
        .into();
        let mut ls = vec![listener()];
        resolve(&mut ls, &given, &oauth).expect("ok");
        assert_eq!(
            ls[0].sasl.oauthbearer,
            Some(UnsecuredValidatorConfig::default())
        );

        let given: BTreeMap<String, String> = [(
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config".to_string(),
            format!("{OAUTHBEARER_LOGIN_MODULE} required unsecuredValidatorAllowableClockSkewMs=\"soon\";"),
        )]
        .into();
        let mut ls = vec![listener()];
        let (key, _, _) = resolve(&mut ls, &given, &oauth).expect_err("a bad option");
        assert_eq!(key, "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config");
    }
}
