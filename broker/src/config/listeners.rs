//! Listeners as Kafka names them: `listeners`, `listener.security.protocol.map`,
//! `advertised.listeners`.
//!
//! Contract:
//! - Input: the settings' text. A listener is `NAME://host:port`; `NAME` is one of Kafka's
//!   security protocols (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`) or a name that
//!   `listener.security.protocol.map` maps to one (`INTERNAL:SASL_SSL`).
//! - Output: [`Listener`]s (name, protocol, bind address, advertised address), or an error
//!   naming what was wrong (duplicate name or port, unknown protocol, unknown name).
//! - Never: accepts two listeners with one name, or an advertised listener no listener has.

use std::fmt;

use minikafka_core::auth::plain::PlainUsers;

/// Kafka's `security.protocol` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// No TLS, no authentication (principal `User:ANONYMOUS`).
    Plaintext,
    /// TLS; the principal comes from the client certificate, else `User:ANONYMOUS`.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name (`SASL_SSL`).
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (case-insensitive, as Kafka reads it).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
    }

    /// Whether connections on this protocol authenticate with SASL before other requests.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether connections on this protocol are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One listener's SASL settings (empty on a listener without SASL).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SaslSettings {
    /// `sasl.enabled.mechanisms`, upper case, in the order given.
    pub mechanisms: Vec<String>,
    /// PLAIN's users, from the listener's `PlainLoginModule` JAAS entry.
    pub plain: Option<PlainUsers>,
    /// OAUTHBEARER's unsecured validator options (set when OAUTHBEARER is enabled).
    pub oauthbearer: Option<minikafka_core::auth::oauthbearer::UnsecuredValidatorConfig>,
    /// OAUTHBEARER's signed-token validator, when `sasl.oauthbearer.jwks.endpoint.url` is set
    /// (then unsecured tokens are refused).
    pub oauthbearer_jwks: Option<super::jwks::JwksValidator>,
}

/// Kafka's default `listener.security.protocol.map`: each protocol names itself.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// One listener: where it binds, what it speaks and what clients that come through it are
/// told to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The name, upper case (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`); settings prefixed
    /// `listener.name.<name in lower case>.` apply to it alone.
    pub name: std::sync::Arc<str>,
    /// What it speaks.
    pub protocol: SecurityProtocol,
    /// Where it binds (port 0: a free port).
    pub bind: std::net::SocketAddr,
    /// The host Metadata gives clients of this listener.
    pub advertised_host: String,
    /// The port Metadata gives clients of this listener (0: the bound port).
    pub advertised_port: u16,
    /// SASL settings (on a SASL listener), resolved from the listener's settings.
    pub sasl: SaslSettings,
    /// TLS settings (on an SSL or SASL_SSL listener), loaded from the listener's settings.
    pub tls: Option<super::tls::TlsSettings>,
}

impl Listener {
    /// `listener.name.<name>.`: the prefix of settings for this listener alone.
    pub fn config_prefix(&self) -> String {
        format!("listener.name.{}.", self.name.to_ascii_lowercase())
    }
}

/// Resolves and loads every TLS listener's settings in place (at startup: a bad file stops the
/// broker, I91). Errors are `(key, value, why)`.
pub fn resolve_tls(
    listeners: &mut [Listener],
    settings: &std::collections::BTreeMap<String, String>,
) -> Result<(), super::tls::Failure> {
    for listener in listeners.iter_mut() {
        if !listener.protocol.uses_tls() {
            continue;
        }
        let wanted = super::tls::ListenerTls {
            name: &listener.name,
            protocol: listener.protocol.to_string(),
            prefix: listener.config_prefix(),
        };
        listener.tls = Some(super::tls::load(&wanted, settings)?);
    }
    Ok(())
}

/// One `NAME://host:port` entry of `listeners` or `advertised.listeners`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener name, upper case.
    pub name: String,
    /// The host as written (empty: every address).
    pub host: String,
    /// The port.
    pub port: u16,
}

/// Parses a comma-separated list of `NAME://host:port` (IPv6 hosts in brackets). Names are
/// upper-cased (Kafka's `ListenerName.normalised`); a name may appear once.
pub fn parse_endpoints(value: &str) -> Result<Vec<Endpoint>, String> {
    let mut out: Vec<Endpoint> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = entry
            .split_once("://")
            .ok_or_else(|| format!("{entry:?}: expected NAME://host:port"))?;
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!("{entry:?}: bad listener name"));
        }
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("{entry:?}: expected NAME://host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{entry:?}: port must be 0..65535"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = name.to_ascii_uppercase();
        if out.iter().any(|e| e.name == name) {
            return Err(format!("listener {name} is given twice"));
        }
        out.push(Endpoint {
            name,
            host: host.to_string(),
            port,
        });
    }
    if out.is_empty() {
        return Err("expected at least one NAME://host:port".into());
    }
    Ok(out)
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,…`).
pub fn parse_protocol_map(value: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?}: expected NAME:PROTOCOL"))?;
        let protocol = SecurityProtocol::from_name(protocol.trim())
            .ok_or_else(|| format!("{entry:?}: unknown security protocol"))?;
        let name = name.trim().to_ascii_uppercase();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener {name} is mapped twice"));
        }
        out.push((name, protocol));
    }
    Ok(out)
}

/// The listeners of `listeners`, each with its protocol from `map`, advertised at its own
/// address (a wildcard one as 127.0.0.1) until `advertised.listeners` says otherwise.
pub fn resolve_listeners(
    endpoints: &[Endpoint],
    map: &[(String, SecurityProtocol)],
    resolve: impl Fn(&str, u16) -> Result<std::net::SocketAddr, String>,
) -> Result<Vec<Listener>, String> {
    let mut out: Vec<Listener> = Vec::new();
    for e in endpoints {
        let protocol = map
            .iter()
            .find(|(n, _)| *n == e.name)
            .map(|(_, p)| *p)
            .ok_or_else(|| {
                format!(
                    "listener {} has no entry in listener.security.protocol.map",
                    e.name
                )
            })?;
        let host = if e.host.is_empty() {
            "0.0.0.0"
        } else {
            &e.host
        };
        let bind = resolve(host, e.port)?;
        if e.port != 0 && out.iter().any(|l| l.bind.port() == e.port) {
            return Err(format!("port {} is used by two listeners", e.port));
        }
        let advertised_host = if bind.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            bind.ip().to_string()
        };
        out.push(Listener {
            name: std::sync::Arc::from(e.name.as_str()),
            protocol,
            bind,
            advertised_host,
            advertised_port: e.port,
            sasl: Default::default(),
            tls: None,
        });
    }
    Ok(out)
}

/// Applies `advertised.listeners` to `listeners`: each entry must name one of them.
pub fn apply_advertised(listeners: &mut [Listener], advertised: &[Endpoint]) -> Result<(), String> {
    for a in advertised {
        let listener = listeners
            .iter_mut()
            .find(|l| *l.name == *a.name)
            .ok_or_else(|| format!("advertised listener {} is not in listeners", a.name))?;
        if a.host.is_empty() {
            return Err(format!("advertised listener {} needs a host", a.name));
        }
        listener.advertised_host = a.host.clone();
        listener.advertised_port = a.port;
    }
    Ok(())
}

/// `listeners` as Kafka writes it.
pub fn show_listeners(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.bind))
        .collect::<Vec<_>>()
        .join(",")
}

/// `advertised.listeners` as Kafka writes it.
pub fn show_advertised(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
        .collect::<Vec<_>>()
        .join(",")
}

/// `listener.security.protocol.map` as Kafka writes it.
pub fn show_protocol_map(map: &[(String, SecurityProtocol)]) -> String {
    map.iter()
        .map(|(n, p)| format!("{n}:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(host: &str, port: u16) -> Result<std::net::SocketAddr, String> {
        format!("{host}:{port}").parse().map_err(|e| format!("{e}"))
    }

    #[test]
    fn two_listeners_with_kafkas_default_map() {
        let endpoints =
            parse_endpoints("PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094").expect("ok");
        let map = parse_protocol_map(DEFAULT_PROTOCOL_MAP).expect("ok");
        let listeners = resolve_listeners(&endpoints, &map, resolve).expect("ok");
        assert_eq!(listeners.len(), 2);
        assert_eq!(listeners[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(listeners[1].advertised_host, "127.0.0.1");
        assert_eq!(listeners[1].config_prefix(), "listener.name.sasl_ssl.");
        assert_eq!(
            show_listeners(&listeners),
            "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9094"
        );
    }

    #[test]
    fn named_listeners_need_the_map_and_advertised_names_must_exist() {
        let endpoints = parse_endpoints("internal://127.0.0.1:9093").expect("ok");
        let default = parse_protocol_map(DEFAULT_PROTOCOL_MAP).expect("ok");
        assert!(resolve_listeners(&endpoints, &default, resolve).is_err());
        let map = parse_protocol_map("INTERNAL:SASL_PLAINTEXT").expect("ok");
        let mut listeners = resolve_listeners(&endpoints, &map, resolve).expect("ok");
        assert_eq!(&*listeners[0].name, "INTERNAL");
        assert_eq!(listeners[0].protocol, SecurityProtocol::SaslPlaintext);
        let adv = parse_endpoints("INTERNAL://kafka.local:19093").expect("ok");
        apply_advertised(&mut listeners, &adv).expect("ok");
        assert_eq!(listeners[0].advertised_host, "kafka.local");
        assert_eq!(listeners[0].advertised_port, 19093);
        let other = parse_endpoints("EXTERNAL://x:1").expect("ok");
        assert!(apply_advertised(&mut listeners, &other).is_err());
    }

    #[test]
    fn bad_lists_are_refused() {
        for bad in [
            "",
            "PLAINTEXT://h",
            "PLAINTEXT://h:99999",
            "PLAINTEXT://a:1,PLAINTEXT://b:2",
            "://h:1",
            "host:1",
        ] {
            assert!(parse_endpoints(bad).is_err(), "{bad:?}");
        }
        assert!(parse_protocol_map("A:NOPE").is_err());
        assert!(parse_protocol_map("A:SSL,a:SSL").is_err());
        let endpoints = parse_endpoints("PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1").expect("ok");
        let map = parse_protocol_map(DEFAULT_PROTOCOL_MAP).expect("ok");
        assert!(resolve_listeners(&endpoints, &map, resolve).is_err());
    }
}
