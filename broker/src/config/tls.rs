//! Each TLS listener's settings (`SSL`, `SASL_SSL`), resolved as Kafka resolves them and loaded
//! into a rustls [`ServerConfig`] at startup.
//!
//! Contract:
//! - Input: the listeners and every setting given (keys as written). A setting prefixed
//!   `listener.name.<listener>.` applies to that listener alone and wins over the unprefixed
//!   one, as in Kafka; the keystore's settings (and the truststore's) go as a group: a listener
//!   that names any of them with its prefix takes none of the unprefixed ones.
//! - Output: each TLS listener's [`TlsSettings`]: the certificate chain and key (PEM, from
//!   `ssl.keystore.location` or the inline `ssl.keystore.certificate.chain` /
//!   `ssl.keystore.key`; or a PKCS#12 store, `ssl.keystore.type=PKCS12`, opened with
//!   `ssl.keystore.password`, I161), the trusted CAs of client certificates
//!   (`ssl.truststore.*`, PEM or PKCS#12 with `ssl.truststore.password`), the
//!   client-certificate policy (`ssl.client.auth`) and how a certificate names its principal
//!   (`ssl.principal.mapping.rules`, I141), the protocol versions
//!   (`ssl.enabled.protocols`) and cipher suites (`ssl.cipher.suites`).
//! - Errors name the setting and say what to do: a JKS store, an encrypted PEM key, a
//!   PKCS#12 store that does not open with its password (or whose key has a password of its
//!   own), a
//!   missing or unreadable file, a file without a key or certificate, a key that does not
//!   match its certificate, client authentication without a truststore. A listener that
//!   cannot serve TLS does not start (I91).
//! - Never: echoes a key or an inline PEM back in an error, or keeps the key anywhere but in
//!   the rustls configuration.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use minikafka_core::auth::ssl_principal::PrincipalMapper;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The TLS settings a `listener.name.<listener>.` prefix may precede.
pub const PER_LISTENER: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.cipher.suites",
    "ssl.principal.mapping.rules",
];

/// Kafka's `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for; the principal is `User:ANONYMOUS` (or SASL's).
    None,
    /// A certificate is asked for; a client without one is still served, as `User:ANONYMOUS`.
    Requested,
    /// A client without a certificate the truststore vouches for is refused in the handshake.
    Required,
}

impl ClientAuth {
    /// Parses Kafka's value (`none`, `requested`, `required`; case-insensitive).
    pub fn parse(value: &str) -> Result<ClientAuth, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            _ => Err("expected none, requested or required".into()),
        }
    }
}

/// One TLS listener's loaded configuration. Equal when it is the same loaded configuration.
#[derive(Clone)]
pub struct TlsSettings {
    /// What rustls serves the listener's handshakes with: the key, the chain, the client
    /// verifier, the versions and suites.
    pub server: Arc<ServerConfig>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// Where the key and chain came from (a path, or `inline`), for log lines.
    pub keystore: String,
    /// `ssl.principal.mapping.rules`: a verified certificate's subject to its principal's
    /// name (I140).
    pub principal_mapper: PrincipalMapper,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("client_auth", &self.client_auth)
            .field("keystore", &self.keystore)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TlsSettings {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.server, &other.server)
    }
}

impl Eq for TlsSettings {}

/// Checks `ssl.keystore.type` / `ssl.truststore.type`: PEM or PKCS12.
pub fn check_store_type(value: &str) -> Result<(), String> {
    store_type(value).map(drop)
}

/// Whether a store type is PKCS12 (`false`: PEM); JKS and others are refused with what to do.
fn store_type(value: &str) -> Result<bool, String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("PEM") {
        return Ok(false);
    }
    if value.eq_ignore_ascii_case("PKCS12") {
        return Ok(true);
    }
    Err(format!(
        "{value} stores are not supported, only PEM and PKCS12: convert a JKS store with \
         `keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12`"
    ))
}

/// Largest PKCS#12 store read (a store holds a key and a few certificates).
const MAX_PKCS12_BYTES: u64 = 1 << 20;

/// Reads and opens the PKCS#12 store at `path` with `password` (its MAC checked).
fn open_pkcs12(path: &str, password: &str) -> Result<p12_keystore::KeyStore, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut data = Vec::new();
    file.take(MAX_PKCS12_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if data.len() as u64 > MAX_PKCS12_BYTES {
        return Err(format!("{path} is larger than {MAX_PKCS12_BYTES} bytes"));
    }
    p12_keystore::KeyStore::from_pkcs12(&data, password).map_err(|e| {
        format!("cannot open the PKCS12 store {path} (a wrong password or not PKCS#12): {e}")
    })
}

/// The chain and key of the PKCS#12 keystore at `path` (its first key entry).
fn pkcs12_keystore(
    path: &str,
    password: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let store = open_pkcs12(path, password)?;
    let (_, entry) = store
        .private_key_chain()
        .ok_or_else(|| format!("the PKCS12 store {path} holds no private key"))?;
    let chain = entry
        .chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(entry.key().to_vec().into());
    Ok((chain, key))
}

/// The certificates of the PKCS#12 truststore at `path`.
fn pkcs12_truststore(path: &str, password: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let store = open_pkcs12(path, password)?;
    Ok(store
        .entries()
        .filter_map(|(_, entry)| match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => {
                Some(CertificateDer::from(c.as_der().to_vec()))
            }
            _ => None,
        })
        .collect())
}

/// Checks `ssl.client.auth`.
pub fn check_client_auth(value: &str) -> Result<(), String> {
    ClientAuth::parse(value).map(drop)
}

/// Parses `ssl.enabled.protocols` (`TLSv1.2`, `TLSv1.3`; older ones are refused).
pub fn parse_protocols(value: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let version = match p {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            "TLSv1" | "TLSv1.1" | "SSLv3" => {
                return Err(format!("{p} is not supported (TLSv1.2 and TLSv1.3 are)"))
            }
            _ => return Err(format!("unknown protocol {p} (expected TLSv1.2, TLSv1.3)")),
        };
        if !out.iter().any(|v| v.version == version.version) {
            out.push(version);
        }
    }
    if out.is_empty() {
        return Err("no protocol given (expected TLSv1.2, TLSv1.3)".into());
    }
    Ok(out)
}

/// Checks `ssl.enabled.protocols`.
pub fn check_protocols(value: &str) -> Result<(), String> {
    parse_protocols(value).map(drop)
}

/// Checks `ssl.protocol`: Kafka's SSLContext protocol; with rustls the versions are
/// `ssl.enabled.protocols`, so only the values Kafka uses for TLS 1.2/1.3 are accepted.
pub fn check_protocol(value: &str) -> Result<(), String> {
    match value.trim() {
        "TLS" | "TLSv1.2" | "TLSv1.3" => Ok(()),
        other => Err(format!("{other} is not supported (TLS, TLSv1.2, TLSv1.3)")),
    }
}

/// Checks `ssl.principal.mapping.rules` (Kafka's `RULE:pattern/replacement/[LU]` and
/// `DEFAULT`, parsed by `minikafka_core::auth::ssl_principal`; I141).
pub fn check_mapping_rules(value: &str) -> Result<(), String> {
    PrincipalMapper::parse(value).map(drop)
}

/// The cipher suites of `provider` named by `ssl.cipher.suites` (IANA names, as Java writes
/// them: `TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`); empty: all.
fn select_suites(provider: &mut CryptoProvider, value: &str) -> Result<(), String> {
    let names: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let name_of = |s: &rustls::SupportedCipherSuite| {
        // rustls writes TLS 1.3 suites `TLS13_…`; IANA and Java write them `TLS_…`.
        format!("{:?}", s.suite()).replacen("TLS13_", "TLS_", 1)
    };
    for n in &names {
        if !provider.cipher_suites.iter().any(|s| name_of(s) == *n) {
            let known: Vec<String> = provider.cipher_suites.iter().map(name_of).collect();
            return Err(format!(
                "unknown or unsupported cipher suite {n} (supported: {})",
                known.join(", ")
            ));
        }
    }
    provider
        .cipher_suites
        .retain(|s| names.contains(&name_of(s).as_str()));
    Ok(())
}

/// Checks `ssl.cipher.suites`.
pub fn check_cipher_suites(value: &str) -> Result<(), String> {
    select_suites(&mut rustls::crypto::ring::default_provider(), value)
}

/// PEM text written on one line (a `server.properties` value continued with `\`) back on
/// lines: the base64 between each `-----BEGIN X-----` and `-----END X-----`, whitespace
/// removed, 64 characters a line. Text outside the blocks is dropped.
fn reline_pem(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_and_rest = &after[label_end + "-----".len()..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_rest.find(&end_marker) else {
            break;
        };
        let body: String = body_and_rest[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        // Base64 is ASCII: splitting at byte offsets is at char boundaries.
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_rest[body_end + end_marker.len()..];
    }
    out
}

/// The certificates of PEM `text`.
fn certificates(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM certificate: {e}"))
}

/// The private key of PEM `text`; an encrypted one is refused with what to do.
fn private_key(text: &str) -> Result<PrivateKeyDer<'static>, String> {
    if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(
            "encrypted private keys are not supported: decrypt it once with \
                    `openssl pkey -in key.pem -out key-plain.pem` (and keep that file readable \
                    by the broker's user only)"
                .into(),
        );
    }
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => {
            "no private key (PKCS#8, PKCS#1 or SEC1 PEM block) found".to_string()
        }
        e => format!("bad PEM private key: {e}"),
    })
}

/// Reads a PEM file named by a setting.
fn read_pem_file(path: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// The value of `key` for `listener`: `listener.name.<l>.<key>`, else `<key>`; empty is unset.
fn value<'a>(
    settings: &'a BTreeMap<String, String>,
    listener: &ListenerTls<'_>,
    key: &str,
) -> Option<(String, &'a str)> {
    let prefixed = format!("{}{key}", listener.prefix);
    if let Some(v) = settings.get(&prefixed) {
        return Some((prefixed, v.as_str())).filter(|(_, v)| !v.trim().is_empty());
    }
    settings
        .get(key)
        .map(|v| (key.to_string(), v.as_str()))
        .filter(|(_, v)| !v.trim().is_empty())
}

/// The values of a group of settings that describe one thing together (the keystore's three,
/// the truststore's two) for `listener`: the prefixed ones if any of them is prefixed, else
/// the unprefixed ones, so a listener's own keystore never mixes with the broker-wide one.
fn group<'a, const N: usize>(
    settings: &'a BTreeMap<String, String>,
    listener: &ListenerTls<'_>,
    keys: [&str; N],
) -> [Option<(String, &'a str)>; N] {
    let prefix = &listener.prefix;
    let prefixed = keys
        .iter()
        .any(|k| settings.contains_key(&format!("{prefix}{k}")));
    keys.map(|key| {
        let key = if prefixed {
            format!("{prefix}{key}")
        } else {
            key.to_string()
        };
        settings
            .get(&key)
            .map(|v| (key, v.as_str()))
            .filter(|(_, v)| !v.trim().is_empty())
    })
}

/// An error about `key`; the value is shown unless the setting may hold a secret.
pub type Failure = (String, String, String);

fn fail(key: &str, value: &str, why: impl Into<String>) -> Failure {
    let secret = key.ends_with("ssl.keystore.key")
        || key.ends_with("ssl.keystore.certificate.chain")
        || key.ends_with("ssl.key.password")
        || key.ends_with("ssl.keystore.password")
        || key.ends_with("ssl.truststore.password")
        || key.ends_with("ssl.truststore.certificates");
    let shown = if secret { "[hidden]" } else { value };
    (key.to_string(), shown.to_string(), why.into())
}

/// What loading a listener's TLS settings needs to know of the listener: kept narrow, so this
/// module does not import `listeners`, whose `Listener` holds what is loaded here (I60).
pub struct ListenerTls<'a> {
    /// The listener's name, for messages.
    pub name: &'a str,
    /// The protocol it speaks, for messages.
    pub protocol: String,
    /// `listener.name.<name>.`: the prefix of its own settings.
    pub prefix: String,
}

/// Loads one SSL or SASL_SSL listener's TLS settings. Errors are `(key, value, why)`.
pub fn load(
    listener: &ListenerTls<'_>,
    settings: &BTreeMap<String, String>,
) -> Result<TlsSettings, Failure> {
    let get = |key: &str| value(settings, listener, key);
    let prefix = listener.prefix.clone();
    let is_pkcs12 = |key: &str| match get(key) {
        Some((k, v)) => store_type(v).map_err(|why| fail(&k, v, why)),
        None => Ok(false),
    };
    let (keystore_pkcs12, truststore_pkcs12) = (
        is_pkcs12("ssl.keystore.type")?,
        is_pkcs12("ssl.truststore.type")?,
    );
    let principal_mapper = match get("ssl.principal.mapping.rules") {
        Some((k, v)) => PrincipalMapper::parse(v).map_err(|why| fail(&k, v, why))?,
        None => PrincipalMapper::default(),
    };
    if let Some((k, v)) = get("ssl.protocol") {
        check_protocol(v).map_err(|why| fail(&k, v, why))?;
    }

    // The key and its chain: a PEM file holding both, or the two inline values.
    let [location, inline_chain, inline_key] = group(
        settings,
        listener,
        [
            "ssl.keystore.location",
            "ssl.keystore.certificate.chain",
            "ssl.keystore.key",
        ],
    );
    let keystore_key = location
        .as_ref()
        .map(|(k, _)| k.clone())
        .unwrap_or_else(|| format!("{prefix}ssl.keystore.certificate.chain"));
    let (chain, key, keystore) = match (location, inline_chain, inline_key) {
        (Some((k, path)), None, None) if keystore_pkcs12 => {
            let (_, password) = get("ssl.keystore.password").ok_or_else(|| {
                fail(
                    &format!("{prefix}ssl.keystore.password"),
                    "",
                    "a PKCS12 keystore needs ssl.keystore.password",
                )
            })?;
            // One password opens the store and its key (keytool's and openssl's default).
            if let Some((kk, key_password)) = get("ssl.key.password") {
                if key_password != password {
                    return Err(fail(
                        &kk,
                        key_password,
                        "a PKCS12 key with a password of its own is not supported: give it \
                         the store's password (`keytool -keypasswd`), or leave \
                         ssl.key.password unset",
                    ));
                }
            }
            let (chain, key) =
                pkcs12_keystore(path, password).map_err(|why| fail(&k, path, why))?;
            (chain, key, path.to_string())
        }
        (None, Some((k, _)), _) | (None, _, Some((k, _))) if keystore_pkcs12 => {
            return Err(fail(
                &k,
                "",
                "a PKCS12 keystore is a file: give ssl.keystore.location (the inline \
                 settings are PEM)",
            ))
        }
        (Some((k, path)), None, None) => {
            let text = read_pem_file(path).map_err(|why| fail(&k, path, why))?;
            let chain = certificates(&text).map_err(|why| fail(&k, path, why))?;
            let key = private_key(&text).map_err(|why| fail(&k, path, why))?;
            (chain, key, path.to_string())
        }
        (None, Some((ck, chain)), Some((kk, key))) => {
            let chain = certificates(&reline_pem(chain)).map_err(|why| fail(&ck, "", why))?;
            let key = private_key(&reline_pem(key)).map_err(|why| fail(&kk, "", why))?;
            (chain, key, "inline".to_string())
        }
        (None, None, None) => {
            return Err(fail(
                &format!("{prefix}ssl.keystore.location"),
                "",
                format!(
                    "listener {} speaks {} and needs its certificate and key: \
                     ssl.keystore.location (one PEM file with the key and the chain) or \
                     ssl.keystore.certificate.chain with ssl.keystore.key",
                    listener.name, listener.protocol
                ),
            ))
        }
        (Some((k, v)), _, _) => {
            return Err(fail(
                &k,
                v,
                "give ssl.keystore.location or the inline ssl.keystore.certificate.chain and \
                 ssl.keystore.key, not both",
            ))
        }
        (None, Some((k, _)), None) | (None, None, Some((k, _))) => {
            return Err(fail(
                &k,
                "",
                "ssl.keystore.certificate.chain and ssl.keystore.key go together",
            ))
        }
    };
    if chain.is_empty() {
        return Err(fail(
            &keystore_key,
            &keystore,
            "no certificate (PEM CERTIFICATE block) found",
        ));
    }

    let client_auth = match get("ssl.client.auth") {
        Some((k, v)) => ClientAuth::parse(v).map_err(|why| fail(&k, v, why))?,
        None => ClientAuth::None,
    };

    // The CAs that vouch for client certificates.
    let mut trusted: Vec<CertificateDer<'static>> = Vec::new();
    let mut truststore_key = None;
    let [trust_location, trust_inline] = group(
        settings,
        listener,
        ["ssl.truststore.location", "ssl.truststore.certificates"],
    );
    if let Some((k, path)) = trust_location {
        let certs = if truststore_pkcs12 {
            // Kafka reads a PKCS12 truststore without a password too (unchecked integrity);
            // the store is opened with an empty one then.
            let password = get("ssl.truststore.password").map_or("", |(_, p)| p);
            pkcs12_truststore(path, password).map_err(|why| fail(&k, path, why))?
        } else {
            let text = read_pem_file(path).map_err(|why| fail(&k, path, why))?;
            certificates(&text).map_err(|why| fail(&k, path, why))?
        };
        if certs.is_empty() {
            return Err(fail(
                &k,
                path,
                "no certificate (PEM CERTIFICATE block) found",
            ));
        }
        trusted.extend(certs);
        truststore_key = Some(k);
    }
    if let Some((k, text)) = trust_inline {
        let certs = certificates(&reline_pem(text)).map_err(|why| fail(&k, "", why))?;
        if certs.is_empty() {
            return Err(fail(&k, "", "no certificate (PEM CERTIFICATE block) found"));
        }
        trusted.extend(certs);
        truststore_key = Some(k);
    }

    let mut provider = rustls::crypto::ring::default_provider();
    if let Some((k, v)) = get("ssl.cipher.suites") {
        select_suites(&mut provider, v).map_err(|why| fail(&k, v, why))?;
    }
    let provider = Arc::new(provider);
    let versions = match get("ssl.enabled.protocols") {
        Some((k, v)) => parse_protocols(v).map_err(|why| fail(&k, v, why))?,
        None => vec![&rustls::version::TLS12, &rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| {
            fail(
                &format!("{prefix}ssl.cipher.suites"),
                "",
                format!("no cipher suite left for the enabled protocols: {e}"),
            )
        })?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Requested | ClientAuth::Required => {
            let auth_key = get("ssl.client.auth")
                .map(|(k, _)| k)
                .unwrap_or_else(|| format!("{prefix}ssl.client.auth"));
            if trusted.is_empty() {
                return Err(fail(
                    &auth_key,
                    "",
                    "client certificates need the CAs that vouch for them: set \
                     ssl.truststore.location (a PEM file) or ssl.truststore.certificates",
                ));
            }
            let truststore_key = truststore_key.unwrap_or(auth_key);
            let mut roots = RootCertStore::empty();
            for cert in trusted {
                roots
                    .add(cert)
                    .map_err(|e| fail(&truststore_key, "", format!("bad CA certificate: {e}")))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| fail(&truststore_key, "", format!("{e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let server = builder.with_single_cert(chain, key).map_err(|e| {
        fail(
            &keystore_key,
            &keystore,
            format!("the key does not fit the certificate chain: {e}"),
        )
    })?;
    Ok(TlsSettings {
        server: Arc::new(server),
        client_auth,
        keystore,
        principal_mapper,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_on_one_line_is_put_back_on_lines() {
        let one = "-----BEGIN CERTIFICATE----- QUJD REVG -----END CERTIFICATE----- \
                   -----BEGIN PRIVATE KEY-----R0hJ-----END PRIVATE KEY-----";
        assert_eq!(
            reline_pem(one),
            "-----BEGIN CERTIFICATE-----\nQUJDREVG\n-----END CERTIFICATE-----\n\
             -----BEGIN PRIVATE KEY-----\nR0hJ\n-----END PRIVATE KEY-----\n"
        );
        assert_eq!(reline_pem("no pem here"), "");
        assert_eq!(reline_pem("-----BEGIN X----- unterminated"), "");
    }

    #[test]
    fn stores_protocols_and_suites_are_checked() {
        assert!(check_store_type("PEM").is_ok());
        assert!(check_store_type("pem").is_ok());
        let jks = check_store_type("JKS").expect_err("refused");
        assert!(jks.contains("only PEM"), "{jks}");
        assert!(check_store_type("PKCS12").is_ok());
        assert!(check_store_type("pkcs12").is_ok());
        assert_eq!(parse_protocols("TLSv1.2,TLSv1.3").expect("ok").len(), 2);
        assert!(parse_protocols("TLSv1.1").is_err());
        assert!(parse_protocols("").is_err());
        assert!(check_cipher_suites("").is_ok());
        assert!(check_cipher_suites("TLS_AES_128_GCM_SHA256").is_ok());
        assert!(check_cipher_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256").is_ok());
        assert!(check_cipher_suites("TLS_RSA_WITH_RC4_128_MD5").is_err());
        assert_eq!(
            ClientAuth::parse("REQUIRED").expect("ok"),
            ClientAuth::Required
        );
        assert!(ClientAuth::parse("sometimes").is_err());
        assert!(check_mapping_rules("DEFAULT").is_ok());
        assert!(check_mapping_rules("RULE:^CN=(.*?)$/$1/").is_ok());
        assert!(check_mapping_rules("RULE:^CN=(.*?)$/$1").is_err());
    }

    #[test]
    fn encrypted_keys_are_refused_with_what_to_do() {
        let why = private_key(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .expect_err("refused");
        assert!(why.contains("openssl pkey"), "{why}");
        assert!(private_key("").is_err());
    }
}
