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
