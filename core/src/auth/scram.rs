//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` serves
//! them: credentials, the message syntax, and the server as a message-in/message-out machine.
//!
//! Contract of [`ScramServer`] (quinn-proto style):
//! - Getters: [`ScramServer::mechanism`], [`ScramServer::username`],
//!   [`ScramServer::is_complete`], [`ScramServer::is_failed`].
//! - Inputs: [`ScramServer::handle_message`] (each client message, in order) and
//!   [`ScramServer::handle_credential`] (the answer to a [`ScramOutput::LookupCredential`]).
//!   An input in the wrong state, or one that fails a check, returns a [`ScramError`] and
//!   leaves the machine failed: every later input is refused ([`ScramError::Failed`]).
//! - Outputs: [`ScramServer::poll_output`], drained until `None` after every input:
//!   `LookupCredential` (after client-first), `Send` (server-first; server-final), then
//!   `Authenticated` (after a valid client-final; the server-final is queued before it).
//! - The exchange: client-first (`n,[a=authzid],n=user,r=nonce[,ext=value…]`) → lookup →
//!   server-first (`r=client+server nonce,s=salt,i=iterations`) → client-final
//!   (`c=biws,r=nonce[,ext…],p=proof`) → server-final (`v=signature`).
//! - Checks, each with Kafka's or the RFC's reason: the GS2 header is `n` (no channel
//!   binding, as Kafka); usernames are saslnames (`=2C` for `,`, `=3D` for `=`, no other `=`);
//!   a reserved `m=` attribute fails (RFC 5802 §5.1); extensions are `[A-Za-z]+=value` and
//!   only `tokenauth` means anything; an authzid must equal the username; the final nonce
//!   ends with the combined one (Kafka's check since 3.8.1: librdkafka before 2.6.1 sends its
//!   own nonce once more in front, librdkafka #4895; the proof covers the final message as
//!   sent, so nothing is accepted without the password); `c=` is the base64 of the client's GS2 header (`biws` for
//!   `n,,`); the proof is checked in constant time (I42). Messages are bounded before they are
//!   parsed (I40).
//! - Never: reads a clock or a random source (the server nonce is an input), sees or keeps a
//!   password on the server side: a [`ScramCredential`] holds salt, iterations, StoredKey and
//!   ServerKey only, with iterations ≥ 4096 (I41).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::{constant_time_eq, MAX_SASL_MESSAGE_BYTES};

/// The fewest PBKDF2 iterations a credential may have (Kafka's and RFC 7677's minimum: I41).
pub const MIN_ITERATIONS: u32 = 4096;
/// The most iterations a new credential may be created with (Kafka's `kafka-configs` limit).
pub const MAX_ITERATIONS: u32 = 16384;

/// A SCRAM mechanism: the hash behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (RFC 7677).
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// Every mechanism, in Kafka's order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub const fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a SASL mechanism name, if it is one of these.
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Bytes of the hash (and of StoredKey, ServerKey and a proof).
    pub const fn digest_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes a key of any length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
            ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    /// `Hi(password, salt, iterations)`: PBKDF2 with this HMAC (RFC 5802 §2.2).
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.digest_bytes()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

/// A stored SCRAM credential: never the password (I41).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations (≥ [`MIN_ITERATIONS`]).
    pub iterations: u32,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("salt", &BASE64.encode(&self.salt))
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// Salts and iterates `password` (its UTF-8 bytes, as Kafka's `ScramFormatter`; no
    /// SASLprep). `iterations` must lie in [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`] and the salt
    /// must not be empty.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        if salt.is_empty() {
            return Err(ScramError::Credential("empty salt"));
        }
        let salted = mechanism.hi(password.as_bytes(), salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        Ok(ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
            iterations,
        })
    }

    /// The credential of a SaltedPassword a client computed (`Hi(password, salt, i)`), as
    /// AlterUserScramCredentials carries it: the broker never sees the password (I41). The
    /// salted password must be the mechanism's digest length, the salt not empty and the
    /// iterations within [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`].
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<ScramCredential, ScramError> {
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        if salt.is_empty() {
            return Err(ScramError::Credential("empty salt"));
        }
        if salted_password.len() != mechanism.digest_bytes() {
            return Err(ScramError::Credential("salted password length"));
        }
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Ok(ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        })
    }

    /// Whether `password` is this credential's (HTTP basic auth of the schema registry,
    /// I127): its StoredKey derived from the stored salt and iterations equals the stored
    /// one, compared in constant time (I42). Costs one PBKDF2 of `iterations` rounds.
    pub fn verifies_password(&self, mechanism: ScramMechanism, password: &str) -> bool {
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&self.iterations) || self.salt.is_empty() {
            return false;
        }
        let salted = mechanism.hi(password.as_bytes(), &self.salt, self.iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        constant_time_eq(&mechanism.hash(&client_key), &self.stored_key)
    }

    /// `Hi(password, salt, iterations)`: what a client sends in AlterUserScramCredentials.
    pub fn salted_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Vec<u8> {
        mechanism.hi(password.as_bytes(), salt, iterations)
    }

    /// Kafka's text form (`ScramCredentialUtils.credentialToString`):
    /// `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
    pub fn to_kafka_string(&self) -> String {
        format!(
            "salt={},stored_key={},server_key={},iterations={}",
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key),
            self.iterations
        )
    }

    /// Reads Kafka's text form; the keys must be `mechanism`'s digest length and the
    /// iterations at least [`MIN_ITERATIONS`] (I41).
    pub fn from_kafka_string(
        mechanism: ScramMechanism,
        text: &str,
    ) -> Result<ScramCredential, ScramError> {
        let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
        for pair in text.split(',') {
            let (key, value) = pair
                .split_once('=')
                .ok_or(ScramError::Credential("a field without '='"))?;
            fields.insert(key, value);
        }
        let field = |name: &'static str| {
            fields
                .get(name)
                .copied()
                .ok_or(ScramError::Credential(name))
        };
        let bytes = |name: &'static str| -> Result<Vec<u8>, ScramError> {
            BASE64
                .decode(field(name)?)
                .map_err(|_| ScramError::Credential(name))
        };
        let iterations: u32 = field("iterations")?
            .parse()
            .map_err(|_| ScramError::Credential("iterations"))?;
        if iterations < MIN_ITERATIONS {
            return Err(ScramError::Iterations(iterations));
        }
        let credential = ScramCredential {
            salt: bytes("salt")?,
            stored_key: bytes("stored_key")?,
            server_key: bytes("server_key")?,
            iterations,
        };
        let n = mechanism.digest_bytes();
        if credential.salt.is_empty() {
            return Err(ScramError::Credential("salt"));
        }
        if credential.stored_key.len() != n || credential.server_key.len() != n {
            return Err(ScramError::Credential("key length"));
        }
        Ok(credential)
    }
}

/// Why a SCRAM exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// The message is longer than [`MAX_SASL_MESSAGE_BYTES`].
    #[error("SCRAM message of {0} bytes is too long")]
    TooLong(usize),
    /// The message does not follow the RFC 5802 grammar (what was wrong).
    #[error("Invalid SCRAM message: {0}")]
    Malformed(&'static str),
    /// The client asked for channel binding (`y` or `p=`); Kafka supports none.
    #[error("Invalid SCRAM client first message: channel binding is not supported")]
    ChannelBindingNotSupported,
    /// A reserved `m=` attribute: RFC 5802 §5.1 says it must fail.
    #[error("Invalid SCRAM message: mandatory extension 'm' is not supported")]
    MandatoryExtension,
    /// A saslname has an `=` not followed by `2C` or `3D`.
    #[error("Invalid username: {0}")]
    BadSaslName(String),
    /// The authzid is not the username.
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthzidMismatch,
    /// No credential for the user (or token).
    #[error("Authentication failed: Invalid user credentials")]
    UnknownUser,
    /// Iterations outside the allowed range (I41).
    #[error("SCRAM iterations {0} outside {MIN_ITERATIONS}..={MAX_ITERATIONS}")]
    Iterations(u32),
    /// A stored credential's text is not Kafka's form (the field at fault).
    #[error("Invalid SCRAM credential: {0}")]
    Credential(&'static str),
    /// The server nonce is empty or has characters a nonce may not have.
    #[error("Invalid SCRAM server nonce")]
    BadServerNonce,
    /// The final message's nonce does not end with the one the server sent.
    #[error("Invalid client nonce in the final client message.")]
    NonceMismatch,
    /// `c=` is not the client's GS2 header.
    #[error("Invalid channel binding in the final client message.")]
    ChannelBindingMismatch,
    /// The proof does not match the stored key.
    #[error("Invalid client credentials")]
    InvalidProof,
    /// An input arrived in a state that does not take it.
    #[error("Unexpected SCRAM input in state {0}")]
    UnexpectedInput(&'static str),
    /// The exchange already failed.
    #[error("SCRAM exchange already failed")]
    Failed,
}

/// A SCRAM username as sent in `n=` / `a=`: `,` is `=2C`, `=` is `=3D` (RFC 5802 §5.1).
pub fn to_saslname(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// The username a saslname names: `=2C` → `,`, `=3D` → `=`; any other `=` fails.
pub fn from_saslname(saslname: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::BadSaslName(saslname.to_string())),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Kafka's `value` characters: ASCII 0x01–0x7F except `,`.
fn is_value(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x01..=0x7f).contains(&b) && b != b',')
}

/// Kafka's `saslname`: `value` characters without a bare `=` (checked by [`from_saslname`]).
fn saslname(s: &str) -> Result<String, ScramError> {
    if !is_value(s) {
        return Err(ScramError::Malformed("username"));
    }
    from_saslname(s)
}

/// A nonce: printable ASCII (0x21–0x7E) except `,`.
fn is_printable(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn is_alpha(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic())
}

/// Parses `key=value` extension attributes into `out` (a later key wins, as Kafka's map).
fn extensions<'a>(
    attributes: impl Iterator<Item = &'a str>,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ScramError> {
    for attribute in attributes {
        let (key, value) = attribute
            .split_once('=')
            .ok_or(ScramError::Malformed("extension without '='"))?;
        if key == "m" {
            return Err(ScramError::MandatoryExtension);
        }
        if !is_alpha(key) || !is_value(value) {
            return Err(ScramError::Malformed("extension"));
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(())
}

fn bounded_text(message: &[u8]) -> Result<&str, ScramError> {
    if message.len() > MAX_SASL_MESSAGE_BYTES {
        return Err(ScramError::TooLong(message.len()));
    }
    std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))
}

/// The client's first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirstMessage {
    /// The authorization id, unescaped (`None` when absent).
    pub authzid: Option<String>,
    /// The username, unescaped.
    pub username: String,
    /// The client nonce.
    pub nonce: String,
    /// Extensions after the nonce (Kafka: `tokenauth=true` for delegation tokens).
    pub extensions: BTreeMap<String, String>,
    /// The GS2 header, e.g. `n,,` (what `c=` must encode).
    pub gs2_header: String,
    /// Everything after the GS2 header (the first part of the AuthMessage).
    pub bare: String,
}

impl ClientFirstMessage {
    /// Whether the client authenticates with a delegation token (`tokenauth=true`, any case).
    pub fn token_authenticated(&self) -> bool {
        self.extensions
            .get("tokenauth")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// Parses a client-first message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirstMessage, ScramError> {
    let text = bounded_text(message)?;
    let Some(after_flag) = text.strip_prefix("n,") else {
        return Err(if text.starts_with("y,") || text.starts_with("p=") {
            ScramError::ChannelBindingNotSupported
        } else {
            ScramError::Malformed("GS2 header")
        });
    };
    let (authzid_part, bare) = after_flag
        .split_once(',')
        .ok_or(ScramError::Malformed("GS2 header"))?;
    let authzid = match authzid_part {
        "" => None,
        a => Some(saslname(
            a.strip_prefix("a=")
                .ok_or(ScramError::Malformed("authzid"))?,
        )?),
    };
    let gs2_header = text[..text.len() - bare.len()].to_string();
    let mut attributes = bare.split(',');
    let first = attributes.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(ScramError::MandatoryExtension);
    }
    let username = saslname(
        first
            .strip_prefix("n=")
            .ok_or(ScramError::Malformed("username"))?,
    )?;
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| is_printable(n))
        .ok_or(ScramError::Malformed("nonce"))?;
    let mut ext = BTreeMap::new();
    extensions(attributes, &mut ext)?;
    Ok(ClientFirstMessage {
        authzid,
        username,
        nonce: nonce.to_string(),
        extensions: ext,
        gs2_header,
        bare: bare.to_string(),
    })
}

/// The client's final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinalMessage {
    /// `c=`, decoded: the GS2 header (and channel binding data, which Kafka never uses).
    pub channel_binding: Vec<u8>,
    /// The combined nonce.
    pub nonce: String,
    /// Extensions between the nonce and the proof.
    pub extensions: BTreeMap<String, String>,
    /// The client proof, decoded.
    pub proof: Vec<u8>,
    /// The message without `,p=…` (the last part of the AuthMessage).
    pub without_proof: String,
}

/// Parses a client-final message.
pub fn parse_client_final(message: &[u8]) -> Result<ClientFinalMessage, ScramError> {
    let text = bounded_text(message)?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or(ScramError::Malformed("proof"))?;
    let proof = BASE64
        .decode(proof)
        .map_err(|_| ScramError::Malformed("proof"))?;
    let mut attributes = without_proof.split(',');
    let first = attributes.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(ScramError::MandatoryExtension);
    }
    let channel_binding = first
        .strip_prefix("c=")
        .and_then(|c| BASE64.decode(c).ok())
        .ok_or(ScramError::Malformed("channel binding"))?;
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| is_printable(n))
        .ok_or(ScramError::Malformed("nonce"))?;
    let mut ext = BTreeMap::new();
    extensions(attributes, &mut ext)?;
    Ok(ClientFinalMessage {
        channel_binding,
        nonce: nonce.to_string(),
        extensions: ext,
        proof,
        without_proof: without_proof.to_string(),
    })
}

/// A server nonce from caller-supplied random bytes (base64: printable, no `,`).
pub fn server_nonce_from_entropy(random: &[u8]) -> String {
    BASE64.encode(random)
}

/// What the server asks of its caller.
#[derive(Clone, PartialEq, Eq)]
pub enum ScramOutput {
    /// Look up the credential of `username` (a delegation token id when
    /// `token_authenticated`) and answer with [`ScramServer::handle_credential`].
    LookupCredential {
        /// The username (unescaped).
        username: String,
        /// Whether the client asked for delegation-token authentication.
        token_authenticated: bool,
    },
    /// Send these bytes to the client.
    Send(Vec<u8>),
    /// The client proved it holds the credential of `username`.
    Authenticated {
        /// The authenticated username.
        username: String,
        /// Whether it was a delegation token.
        token_authenticated: bool,
    },
}

impl fmt::Debug for ScramOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScramOutput::LookupCredential { username, .. } => {
                write!(f, "LookupCredential({username:?})")
            }
            ScramOutput::Send(bytes) => write!(f, "Send({:?})", String::from_utf8_lossy(bytes)),
            ScramOutput::Authenticated { username, .. } => write!(f, "Authenticated({username:?})"),
        }
    }
}

#[derive(Debug)]
enum State {
    AwaitClientFirst,
    AwaitCredential {
        first: ClientFirstMessage,
    },
    AwaitClientFinal {
        first: ClientFirstMessage,
        server_first: String,
        credential: ScramCredential,
    },
    Complete {
        username: String,
    },
    Failed,
}

impl State {
    const fn name(&self) -> &'static str {
        match self {
            State::AwaitClientFirst => "await-client-first",
            State::AwaitCredential { .. } => "await-credential",
            State::AwaitClientFinal { .. } => "await-client-final",
            State::Complete { .. } => "complete",
            State::Failed => "failed",
        }
    }
}

/// The server side of one SCRAM exchange (see the module contract).
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    server_nonce: String,
    state: State,
    outputs: VecDeque<ScramOutput>,
}

impl ScramServer {
    /// A server for `mechanism` whose nonce part is `server_nonce` (printable, no `,`: use
    /// [`server_nonce_from_entropy`] with at least 18 random bytes).
    pub fn new(mechanism: ScramMechanism, server_nonce: &str) -> Result<ScramServer, ScramError> {
        if !is_printable(server_nonce) {
            return Err(ScramError::BadServerNonce);
        }
        Ok(ScramServer {
            mechanism,
            server_nonce: server_nonce.to_string(),
            state: State::AwaitClientFirst,
            outputs: VecDeque::new(),
        })
    }

    /// The mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The username, once the client-first message named it.
    pub fn username(&self) -> Option<&str> {
        match &self.state {
            State::AwaitCredential { first } | State::AwaitClientFinal { first, .. } => {
                Some(&first.username)
            }
            State::Complete { username } => Some(username),
            State::AwaitClientFirst | State::Failed => None,
        }
    }

    /// Whether the client has authenticated.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete { .. })
    }

    /// Whether the exchange failed (every later input is refused).
    pub fn is_failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<ScramOutput> {
        self.outputs.pop_front()
    }

    fn fail(&mut self, error: ScramError) -> ScramError {
        self.state = State::Failed;
        self.outputs.clear();
        error
    }

    /// A client message: client-first, then (after the credential) client-final.
    pub fn handle_message(&mut self, message: &[u8]) -> Result<(), ScramError> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::AwaitClientFirst => {
                let first = parse_client_first(message).map_err(|e| self.fail(e))?;
                if first.authzid.as_ref().is_some_and(|a| *a != first.username) {
                    return Err(self.fail(ScramError::AuthzidMismatch));
                }
                self.outputs.push_back(ScramOutput::LookupCredential {
                    username: first.username.clone(),
                    token_authenticated: first.token_authenticated(),
                });
                self.state = State::AwaitCredential { first };
                Ok(())
            }
            State::AwaitClientFinal {
                first,
                server_first,
                credential,
            } => {
                let last = parse_client_final(message).map_err(|e| self.fail(e))?;
                let nonce = format!("{}{}", first.nonce, self.server_nonce);
                // Kafka's `endsWith`, not `equals` (see the module doc): librdkafka before
                // 2.6.1 repeats its nonce in front of the combined one.
                if !last.nonce.ends_with(&nonce) {
                    return Err(self.fail(ScramError::NonceMismatch));
                }
                if last.channel_binding != first.gs2_header.as_bytes() {
                    return Err(self.fail(ScramError::ChannelBindingMismatch));
                }
                let auth_message =
                    format!("{},{},{}", first.bare, server_first, last.without_proof);
                let m = self.mechanism;
                let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
                if last.proof.len() != client_signature.len() {
                    return Err(self.fail(ScramError::InvalidProof));
                }
                let client_key: Vec<u8> = last
                    .proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(p, s)| p ^ s)
                    .collect();
                // I42: the stored key is compared in constant time.
                if !constant_time_eq(&m.hash(&client_key), &credential.stored_key) {
                    return Err(self.fail(ScramError::InvalidProof));
                }
                let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
                let server_final = format!("v={}", BASE64.encode(server_signature));
                self.outputs
                    .push_back(ScramOutput::Send(server_final.into_bytes()));
                self.outputs.push_back(ScramOutput::Authenticated {
                    username: first.username.clone(),
                    token_authenticated: first.token_authenticated(),
                });
                self.state = State::Complete {
                    username: first.username,
                };
                Ok(())
            }
            State::Failed => Err(ScramError::Failed),
            other => {
                let name = other.name();
                Err(self.fail(ScramError::UnexpectedInput(name)))
            }
        }
    }

    /// The answer to [`ScramOutput::LookupCredential`]: the user's credential, or `None`.
    pub fn handle_credential(
        &mut self,
        credential: Option<&ScramCredential>,
    ) -> Result<(), ScramError> {
        match std::mem::replace(&mut self.state, State::Failed) {
            State::AwaitCredential { first } => {
                let Some(credential) = credential else {
                    return Err(self.fail(ScramError::UnknownUser));
                };
                // I41: a credential below the minimum is refused, never used.
                if credential.iterations < MIN_ITERATIONS {
                    return Err(self.fail(ScramError::Iterations(credential.iterations)));
                }
                let server_first = format!(
                    "r={}{},s={},i={}",
                    first.nonce,
                    self.server_nonce,
                    BASE64.encode(&credential.salt),
                    credential.iterations
                );
                self.outputs
                    .push_back(ScramOutput::Send(server_first.clone().into_bytes()));
                self.state = State::AwaitClientFinal {
                    first,
                    server_first,
                    credential: credential.clone(),
                };
                Ok(())
            }
            State::Failed => Err(ScramError::Failed),
            other => {
                let name = other.name();
                Err(self.fail(ScramError::UnexpectedInput(name)))
            }
        }
    }
}

/// The client's side of the proof, for tests and the client crate: given the password, the
/// client-first-bare, server-first and client-final-without-proof messages, the proof
/// (base64) and the server signature the server must answer with (base64).
pub fn client_proof(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
    auth_message: &str,
) -> (String, String) {
    let m = mechanism;
    let salted = m.hi(password.as_bytes(), salt, iterations);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let client_signature = m.hmac(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&client_signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let server_key = m.hmac(&salted, b"Server Key");
    let server_signature = m.hmac(&server_key, auth_message.as_bytes());
    (BASE64.encode(proof), BASE64.encode(server_signature))
}

#[cfg(test)]
mod tests;
