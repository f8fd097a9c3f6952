//! The TLS side of an SSL or SASL_SSL connection: the handshake, run with rustls over the
//! backend's stream before the Kafka request loop starts, and the principal of a verified
//! client certificate.
//!
//! Contract:
//! - Input: an accepted stream and the listener's loaded [`TlsSettings`].
//! - Output: the encrypted stream (futures-rustls drives a sans-IO `rustls::ServerConnection`
//!   over any futures-io stream, `!Send` ones included, through the handshake; then
//!   [`super::tls_stream`], I188) and, when the client presented a
//!   certificate the truststore vouches for, its principal: `User:` and the subject DN
//!   (RFC 2253) mapped by the listener's `ssl.principal.mapping.rules` (Kafka's default
//!   principal builder); a subject no rule maps refuses the connection (I140).
//! - No Kafka request is read before the handshake completes (I90); the principal comes from
//!   the chain rustls verified and from nothing the client says later (I92).
//! - Bounded: the handshake must end within [`HANDSHAKE_TIMEOUT`] (a client that stalls or
//!   trickles costs one pending task for that long, never a blocked shard), and rustls buffers
//!   at most one handshake message (64 KiB) whatever length a peer announces. A client that
//!   speaks PLAINTEXT, or garbage, fails rustls's record check at its first bytes and is closed.
//! - Never: panics on anything the peer sent.

use std::fmt;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use futures::{AsyncRead, AsyncWrite};
use minikafka_core::backend::Backend;
use x509_cert::der::{Decode, Encode, Tag, Tagged};

use super::session::KafkaPrincipal;
use super::shard::ShardState;
use crate::config::tls::TlsSettings;

/// How long a client has to complete the TLS handshake once connected. Kafka bounds it only by
/// `connections.max.idle.ms` (ten minutes); a shorter bound keeps a flood of stalled
/// handshakes from holding connection slots for long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The encrypted stream of an accepted connection: futures-rustls runs the handshake, then
/// [`super::tls_stream`] carries the established session (I188).
pub type TlsStream<S> = super::tls_stream::TlsStream<S>;

/// Why a handshake did not complete.
#[derive(Debug)]
pub enum HandshakeError {
    /// The client did not complete it within [`HANDSHAKE_TIMEOUT`].
    TimedOut,
    /// The broker is shutting down.
    Stopping,
    /// rustls refused the peer (not TLS, a bad or missing certificate, no common version or
    /// suite) or the socket failed.
    Failed(io::Error),
    /// The verified client certificate's subject could not be read.
    Subject(String),
    /// No `ssl.principal.mapping.rules` rule maps the subject: Kafka refuses the
    /// connection, so does the broker (I140).
    NoMatchingRule(String),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::TimedOut => write!(
                f,
                "TLS handshake not completed within {}s",
                HANDSHAKE_TIMEOUT.as_secs()
            ),
            HandshakeError::Stopping => f.write_str("shutting down"),
            HandshakeError::Failed(e) => write!(f, "TLS handshake failed: {e}"),
            HandshakeError::Subject(why) => write!(f, "client certificate subject: {why}"),
            HandshakeError::NoMatchingRule(why) => f.write_str(why),
        }
    }
}

/// Runs the server side of the TLS handshake on `stream`: the encrypted stream and the
/// principal of the client certificate, if one was presented and verified.
pub async fn accept<B: Backend, S: AsyncRead + AsyncWrite + Unpin>(
    state: &Rc<ShardState<B>>,
    tls: &TlsSettings,
    stream: S,
) -> Result<(TlsStream<S>, Option<KafkaPrincipal>), HandshakeError> {
    let acceptor = futures_rustls::TlsAcceptor::from(Arc::clone(&tls.server));
    let handshake = std::pin::pin!(acceptor.accept(stream));
    let timer = std::pin::pin!(state.backend.sleep(HANDSHAKE_TIMEOUT));
    let stop = std::pin::pin!(state.stop.recv());
    let stream = match select(handshake, select(timer, stop)).await {
        Either::Left((Ok(stream), _)) => {
            let (io, session) = stream.into_inner();
            TlsStream::new(io, session)
        }
        Either::Left((Err(e), _)) => return Err(HandshakeError::Failed(e)),
        Either::Right((Either::Left(_), _)) => return Err(HandshakeError::TimedOut),
        Either::Right((Either::Right(_), _)) => return Err(HandshakeError::Stopping),
    };
    // rustls hands out peer certificates only once its verifier accepted the chain (I92).
    let principal = match stream.get_ref().1.peer_certificates() {
        Some([leaf, ..]) => {
            let subject = subject_rfc2253(leaf).map_err(HandshakeError::Subject)?;
            let name = tls
                .principal_mapper
                .map(&subject)
                .map_err(|e| HandshakeError::NoMatchingRule(e.to_string()))?;
            Some(KafkaPrincipal::user(name))
        }
        _ => None,
    };
    Ok((stream, principal))
}

/// The subject of DER certificate `der` as Java's `X500Principal.getName()` writes it
/// (RFC 2253), which is what Kafka's default principal builder names the principal:
/// `CN=client,OU=eng,O=org`.
pub fn subject_rfc2253(der: &[u8]) -> Result<String, String> {
    let cert = x509_cert::Certificate::from_der(der).map_err(|e| e.to_string())?;
    let rdns: Vec<String> = cert
        .tbs_certificate
        .subject
        .0
        .iter()
        .rev()
        .map(|rdn| {
            rdn.0
                .iter()
                .map(attribute_rfc2253)
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.join(","))
}

/// The attribute types Java's RFC 2253 form names by keyword; others are written as their
/// dotted OID with the value's DER in hex.
const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

fn attribute_rfc2253(atv: &x509_cert::attr::AttributeTypeAndValue) -> String {
    let oid = atv.oid.to_string();
    let keyword = KEYWORDS.iter().find(|(o, _)| *o == oid).map(|(_, k)| *k);
    let text = match atv.value.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::TeletexString => {
            std::str::from_utf8(atv.value.value()).ok()
        }
        _ => None,
    };
    match (keyword, text) {
        (Some(keyword), Some(text)) => format!("{keyword}={}", escape_rfc2253(text)),
        _ => {
            let der = atv.value.to_der().unwrap_or_default();
            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
            format!("{oid}=#{hex}")
        }
    }
}

/// RFC 2253 section 2.4's escapes: `,+"\<>;` anywhere, `#` first, a space first or last.
fn escape_rfc2253(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let last = text.chars().count().saturating_sub(1);
    for (i, c) in text.chars().enumerate() {
        let escape = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (c == '#' && i == 0)
            || (c == ' ' && (i == 0 || i == last));
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_written_as_java_writes_rfc2253() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "DE");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "eng");
        dn.push(rcgen::DnType::CommonName, "client-a");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params.self_signed(&key).expect("cert");
        assert_eq!(
            subject_rfc2253(cert.der()).expect("subject"),
            "CN=client-a,OU=eng,O=Acme\\, Inc.,C=DE"
        );
        assert!(subject_rfc2253(b"not a certificate").is_err());
    }

    #[test]
    fn escapes_follow_rfc2253() {
        assert_eq!(escape_rfc2253("#a b "), "\\#a b\\ ");
        assert_eq!(escape_rfc2253(" x"), "\\ x");
        assert_eq!(escape_rfc2253("a+b;c<d>\"e\\"), "a\\+b\\;c\\<d\\>\\\"e\\\\");
        assert_eq!(escape_rfc2253(""), "");
    }
}
