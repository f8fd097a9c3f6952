//! Authentication and authorization decisions, sans-IO: the SASL mechanisms as parsers and
//! message-in/message-out machines, and the ACL decision as a pure function.
//!
//! Contract (for every submodule):
//! - Inputs are bytes a client sent (bounded before anything is allocated from them:
//!   [`MAX_SASL_MESSAGE_BYTES`]), configuration text, credentials, and — where time matters —
//!   `now_ms` (milliseconds since the Unix epoch) passed in by the caller. Randomness (SCRAM's
//!   server nonce) is passed in too.
//! - Outputs are values: parsed messages, the next message to send, an authenticated
//!   principal, an allow/deny decision, or an error that names what was wrong (the broker maps
//!   it to SASL_AUTHENTICATION_FAILED or a closed connection). Never a panic on client bytes.
//! - Never: reads a clock, a random source, a file or a socket; stores or logs a password
//!   (SCRAM keeps only salted, iterated keys: I41).
//!
//! Modules:
//! - [`plain`]: SASL PLAIN's message (`authzid NUL authcid NUL passwd`) and the check of it
//!   against the users of a JAAS `PlainLoginModule` entry.
//! - [`jaas`]: Kafka's JAAS configuration syntax (`sasl.jaas.config`), as Kafka parses it.
//! - [`scram`]: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677): credentials, the message
//!   syntax, and the server as a machine ([`scram::ScramServer`]).
//! - [`oauthbearer`]: OAUTHBEARER's client initial response (RFC 7628) and Kafka's unsecured
//!   JWT validator.
//! - [`jwks`]: signed OAUTHBEARER tokens (KIP-768): a JWKS parsed with bounds, a JWS's
//!   signature verified with ring, the claims checked (I166–I168).
//! - [`ssl_principal`]: Kafka's `ssl.principal.mapping.rules`, a client certificate's subject
//!   to a principal name (I140, I141).
//! - [`acl_filter`]: ACL filters (DescribeAcls, DeleteAcls) and the checks of a new ACL.
//! - [`acl`]: the ACL decision (principal, host, resource, operation → allow/deny) with
//!   Kafka's `StandardAuthorizer` semantics.
//!
//! Invariants I40–I44 (`docs/DESIGN.md`, "Security (being built)") are cited where enforced.

pub mod acl;
pub mod acl_filter;
pub mod jaas;
pub mod jwks;
pub mod oauthbearer;
pub mod plain;
pub mod scram;
pub mod ssl_principal;

/// The largest SASL message any mechanism here accepts: Kafka's default
/// `sasl.server.max.receive.size` (512 KiB). Longer input is refused before it is parsed (I40).
pub const MAX_SASL_MESSAGE_BYTES: usize = 512 * 1024;

/// Compares two byte strings in time that depends only on their lengths, not on where they
/// first differ (password and proof checks: I42).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}
