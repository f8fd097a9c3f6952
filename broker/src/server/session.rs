//! Who is on a connection: the authenticated principal and the listener it came through,
//! handed to every request's handler as a [`RequestContext`].
//!
//! Contract:
//! - A connection starts as [`KafkaPrincipal::anonymous`] (`User:ANONYMOUS`), as Kafka's
//!   PLAINTEXT and SSL-without-client-certificate listeners do; SASL (or a TLS client
//!   certificate) replaces the principal once authentication succeeds.
//! - Every request is handled with the context of the moment it was read (I45): a request
//!   read before authentication completed never runs as the authenticated principal, and one
//!   read after it always does.
//! - Never: holds a secret (passwords and tokens stay in the SASL exchange).

use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

pub use crate::config::listeners::SecurityProtocol;

use super::throttle_gate::ThrottleGate;

/// Kafka's `KafkaPrincipal`: a type (`User`) and a name; written `User:alice`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    /// The principal type; `User` for every principal this broker makes.
    pub principal_type: String,
    /// The name (`alice`, `ANONYMOUS`, or a certificate subject mapped by the rules).
    pub name: String,
}

impl KafkaPrincipal {
    /// Kafka's `KafkaPrincipal.USER_TYPE`.
    pub const USER_TYPE: &'static str = "User";
    /// The name of the unauthenticated principal.
    pub const ANONYMOUS_NAME: &'static str = "ANONYMOUS";

    /// `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        KafkaPrincipal {
            principal_type: Self::USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`, the principal of an unauthenticated connection.
    pub fn anonymous() -> Self {
        Self::user(Self::ANONYMOUS_NAME)
    }

    /// Whether this is `User:ANONYMOUS`.
    pub fn is_anonymous(&self) -> bool {
        self.principal_type == Self::USER_TYPE && self.name == Self::ANONYMOUS_NAME
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// What a handler knows about the connection a request came on. Cheap to clone (two
/// reference counts, an address and the connection's throttle gate).
#[derive(Clone, Debug)]
pub struct RequestContext {
    /// The authenticated principal (`User:ANONYMOUS` until authenticated).
    pub principal: Rc<KafkaPrincipal>,
    /// The listener's name as configured, upper case (`PLAINTEXT`, `SASL_SSL`, `INTERNAL`).
    pub listener: Arc<str>,
    /// The listener's security protocol.
    pub security_protocol: SecurityProtocol,
    /// The client's address.
    pub client_address: SocketAddr,
    /// The connection's quota mute: a handler answering with a throttle time mutes the
    /// connection through it (KIP-219; `super::throttle_gate`).
    pub throttle: ThrottleGate,
}

impl RequestContext {
    /// The context of a connection on the default PLAINTEXT listener, as `User:ANONYMOUS`.
    pub fn plaintext(client_address: SocketAddr) -> Self {
        RequestContext {
            principal: Rc::new(KafkaPrincipal::anonymous()),
            listener: Arc::from(SecurityProtocol::Plaintext.as_str()),
            security_protocol: SecurityProtocol::Plaintext,
            client_address,
            throttle: ThrottleGate::new(),
        }
    }

    /// The context of a new connection on `listener`, as `User:ANONYMOUS`.
    pub fn anonymous(listener: &crate::config::Listener, client_address: SocketAddr) -> Self {
        RequestContext {
            principal: Rc::new(KafkaPrincipal::anonymous()),
            listener: Arc::clone(&listener.name),
            security_protocol: listener.protocol,
            client_address,
            throttle: ThrottleGate::new(),
        }
    }

    /// The client's host as ACLs name it: its IP address as text (`127.0.0.1`).
    pub fn client_host(&self) -> String {
        self.client_address.ip().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_is_written_as_kafka_writes_it() {
        let p = KafkaPrincipal::anonymous();
        assert_eq!(p.to_string(), "User:ANONYMOUS");
        assert!(p.is_anonymous());
        assert!(!KafkaPrincipal::user("alice").is_anonymous());
        assert_eq!(KafkaPrincipal::user("alice").to_string(), "User:alice");
    }

    #[test]
    fn plaintext_context_names_the_default_listener() {
        let ctx = RequestContext::plaintext("127.0.0.1:5000".parse().expect("addr"));
        assert_eq!(&*ctx.listener, "PLAINTEXT");
        assert_eq!(ctx.security_protocol, SecurityProtocol::Plaintext);
        assert_eq!(ctx.client_host(), "127.0.0.1");
        assert_eq!(ctx.principal.to_string(), "User:ANONYMOUS");
    }
}
