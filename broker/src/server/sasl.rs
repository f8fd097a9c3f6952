//! SASL authentication of one connection on a SASL listener (SASL_PLAINTEXT, SASL_SSL), as
//! Kafka's `SaslServerAuthenticator` does it.
//!
//! Contract:
//! - Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are served;
//!   any other request closes the connection (I47). Frames are bounded by
//!   [`MAX_SASL_MESSAGE_BYTES`] until then (I40).
//! - SaslHandshake v0–1 names a mechanism of `sasl.enabled.mechanisms`; another gets
//!   UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes.
//!   After a v1 handshake the tokens come in SaslAuthenticate v0–2; after a v0 handshake they
//!   come as raw size-prefixed tokens (Kafka's legacy framing) and are answered the same way.
//! - PLAIN checks the listener's JAAS users; SCRAM-SHA-256/512 runs
//!   [`ScramServer`] against the stored credentials. A failure answers
//!   SASL_AUTHENTICATION_FAILED ("Authentication failed: Invalid username or password", as
//!   Kafka says for both) and closes the connection; it is logged with the username and
//!   the mechanism, never a password, token or proof, and counted in the metrics.
//! - OAUTHBEARER (RFC 7628) validates the client's unsecured JWT as Kafka's default
//!   validator does (I138), or, on a listener with `sasl.oauthbearer.jwks.endpoint.url`, a
//!   signed JWT against that JWKS as Kafka's `OAuthBearerValidatorCallbackHandler` does
//!   (`core::auth::jwks`, I166–I168; unsecured tokens are refused there): a token refused gets Kafka's JSON error as the server's
//!   challenge (`{"status":"invalid_token"}`, or `insufficient_scope` with the required
//!   scope), the client acknowledges it with a lone `\x01`, and that is answered
//!   SASL_AUTHENTICATION_FAILED with the same JSON and the connection closes. A malformed
//!   initial response fails at once with Kafka's "invalid credentials" message.
//! - Success sets the connection's principal to `User:<name>` for every request read after
//!   it (I45). The session's lifetime (KIP-368, I139) is `connections.max.reauth.ms`, or the
//!   time left to the OAUTHBEARER token's `exp` if sooner, and 0 (no limit) when neither
//!   applies; SaslAuthenticate v1+ tells the client.
//! - Re-authentication (KIP-368): a SaslHandshake on an authenticated connection starts the
//!   exchange again ([`Authenticator::begin_reauthentication`]); it must use the same
//!   mechanism and end as the same principal, or it fails with Kafka's messages and the
//!   connection closes.
//! - Never: allocates from a client's stated length beyond the frame bound, or answers a
//!   request of another API before authentication.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::jwks;
use minikafka_core::auth::oauthbearer::{self, OAuthBearerError};
use minikafka_core::auth::scram::{
    server_nonce_from_entropy, ScramMechanism, ScramOutput, ScramServer,
};
use minikafka_core::auth::MAX_SASL_MESSAGE_BYTES;
use minikafka_core::error_code::ErrorCode;

use super::scram_store::ScramStore;
use crate::config::listeners::SaslSettings;
use crate::protocol::{encode_response_for, DecodedRequest, RequestBody};

/// Kafka's message for a failed PLAIN or SCRAM authentication.
pub const AUTH_FAILED_MESSAGE: &str = "Authentication failed: Invalid username or password";
/// Kafka's message for an OAUTHBEARER initial response it cannot parse (a `SaslException`,
/// whose text Kafka never sends).
pub const OAUTHBEARER_INVALID_MESSAGE: &str =
    "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER";

/// What the exchange needs besides the client's bytes.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// The listener's SASL settings.
    pub sasl: &'a SaslSettings,
    /// The SCRAM credentials.
    pub scram: &'a ScramStore,
    /// Wall-clock time, ms since the Unix epoch (an OAUTHBEARER token's `exp` and `iat`).
    pub now_ms: i64,
    /// `connections.max.reauth.ms` (0: none).
    pub max_reauth_ms: u64,
}

/// A completed authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The user the client is now (`User:<user>`).
    pub user: String,
    /// How long the session lasts, in ms (0: no limit); sent in SaslAuthenticate v1+.
    pub lifetime_ms: i64,
}

/// Why an exchange failed: what is logged and what the client is told.
#[derive(Debug)]
struct Failure {
    /// Logged (user and mechanism, never a secret).
    reason: String,
    /// The SaslAuthenticate error message.
    message: String,
}

impl Failure {
    fn credentials(reason: String) -> Self {
        Failure {
            reason,
            message: AUTH_FAILED_MESSAGE.to_string(),
        }
    }
}

/// KIP-368's session lifetime at `now_ms`: `connections.max.reauth.ms`, or the time left to
/// the credential's expiry if that is sooner; 0 (no limit) when neither applies. A credential
/// already past its expiry gets 1 ms, so the session ends at once rather than never.
pub fn session_lifetime_ms(
    max_reauth_ms: u64,
    now_ms: i64,
    credential_expiry_ms: Option<i64>,
) -> i64 {
    let max = (max_reauth_ms > 0).then(|| i64::try_from(max_reauth_ms).unwrap_or(i64::MAX));
    let left = credential_expiry_ms.map(|exp| exp.saturating_sub(now_ms).max(1));
    match (max, left) {
        (None, None) => 0,
        (Some(max), None) => max,
        (None, Some(left)) => left,
        (Some(max), Some(left)) => max.min(left),
    }
}

/// Kafka's JSON error for a token its validator refused (`OAuthBearerSaslServer`'s
/// `jsonErrorResponse`): `insufficient_scope` with the required scope as a list, else
/// `invalid_token`.
fn oauthbearer_json_error(error: &OAuthBearerError, required_scope: &[String]) -> String {
    match error {
        OAuthBearerError::MissingScope(_) => format!(
            "{{\"status\":\"insufficient_scope\", \"scope\":\"[{}]\"}}",
            required_scope.join(", ").replace(['"', '\\'], "")
        ),
        _ => "{\"status\":\"invalid_token\"}".to_string(),
    }
}

/// What the connection does with a frame read before authentication completed.
#[derive(Debug)]
pub enum Step {
    /// Not a SASL frame: serve it as usual (ApiVersions).
    Serve,
    /// Write this answer; keep reading.
    Answer(Bytes),
    /// Write this answer; the client is now `User:<session.user>`.
    Authenticated(Bytes, Session),
    /// Write this answer (if any), then close: `reason` is logged.
    Refuse(Option<Bytes>, String),
}

/// Where the exchange is.
#[derive(Debug)]
enum State {
    /// Waiting for SaslHandshake.
    Handshake,
    /// A PLAIN token is next; `raw`: it comes without a Kafka header (handshake v0).
    Plain { raw: bool },
    /// SCRAM messages are next.
    Scram { server: Box<ScramServer>, raw: bool },
    /// The OAUTHBEARER initial response is next.
    OAuthBearer { raw: bool },
    /// The token was refused and the JSON error sent as a challenge: the client's `\x01`
    /// acknowledgement is next, answered with the failure.
    OAuthBearerRefused { raw: bool, failure: Failure },
    /// A re-authentication named another mechanism (Kafka's REAUTH_BAD_MECHANISM): the next
    /// token is answered with this failure.
    BadMechanism { raw: bool, failure: Failure },
    /// Authenticated.
    Done,
}

/// The authentication a re-authentication must repeat (KIP-368).
#[derive(Debug, Clone)]
struct Previous {
    mechanism: String,
    user: String,
}

/// One connection's authenticator.
#[derive(Debug)]
pub struct Authenticator {
    state: State,
    /// The mechanism of the exchange under way or done.
    mechanism: String,
    /// The authenticated user, once there is one.
    user: Option<String>,
    /// Set while re-authenticating.
    previous: Option<Previous>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            state: State::Handshake,
            mechanism: String::new(),
            user: None,
            previous: None,
        }
    }
}

fn encode<R>(version: i16, correlation_id: i32, response: &R) -> Result<Bytes, String>
where
    R: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
{
    encode_response_for(version, correlation_id, response).map_err(|e| e.to_string())
}

/// A raw (handshake v0) token answer: the bytes with a 4-byte size prefix.
fn raw_frame(bytes: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(4 + bytes.len());
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
    Bytes::from(out)
}

/// A fresh SCRAM server nonce from the OS's random source.
fn server_nonce() -> Result<String, String> {
    let mut random = [0u8; 24];
    getrandom::fill(&mut random).map_err(|e| format!("random source: {e}"))?;
    Ok(server_nonce_from_entropy(&random))
}

impl Authenticator {
    /// Whether the client has authenticated.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Whether the next frame is a raw token (after a v0 handshake), not a Kafka request.
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self.state,
            State::Plain { raw: true }
                | State::Scram { raw: true, .. }
                | State::OAuthBearer { raw: true }
                | State::OAuthBearerRefused { raw: true, .. }
                | State::BadMechanism { raw: true, .. }
        )
    }

    /// Whether the next token is an OAUTHBEARER client's initial response (its `kid` may
    /// need the JWKS fetched first: I187).
    pub fn awaits_oauthbearer_token(&self) -> bool {
        matches!(self.state, State::OAuthBearer { .. })
    }

    /// The `kid` named by the token in OAUTHBEARER initial response `message`, unverified
    /// (I187).
    pub fn oauthbearer_kid(message: &[u8]) -> Option<String> {
        let response = oauthbearer::parse_client_initial_response(message).ok()?;
        jwks::token_kid(&response.token)
    }

    /// Starts a re-authentication (KIP-368) of an authenticated connection: the next frame
    /// is its SaslHandshake. Does nothing before the first authentication completed.
    pub fn begin_reauthentication(&mut self) {
        if let (State::Done, Some(user)) = (&self.state, &self.user) {
            self.previous = Some(Previous {
                mechanism: std::mem::take(&mut self.mechanism),
                user: user.clone(),
            });
            self.state = State::Handshake;
        }
    }

    /// "authentication" or "re-authentication", as Kafka's messages say.
    fn phase(&self) -> &'static str {
        if self.previous.is_some() {
            "re-authentication"
        } else {
            "authentication"
        }
    }

    /// The API key a frame's header names, if it has one.
    pub fn api_key_of(frame: &[u8]) -> Option<i16> {
        Some(i16::from_be_bytes([*frame.first()?, *frame.get(1)?]))
    }

    /// Whether a request of `api_key` may be served before authentication (I47).
    pub fn allowed_before_authentication(api_key: i16) -> bool {
        api_key == ApiKey::ApiVersions as i16
            || api_key == ApiKey::SaslHandshake as i16
            || api_key == ApiKey::SaslAuthenticate as i16
    }

    /// A raw token (after a v0 handshake).
    pub fn on_raw_token(&mut self, token: &[u8], inputs: Inputs<'_>) -> Step {
        match self.exchange(token, inputs) {
            Ok((reply, None)) => Step::Answer(raw_frame(&reply)),
            Ok((reply, Some(session))) => Step::Authenticated(raw_frame(&reply), session),
            // Kafka's legacy framing has no error answer: the connection just closes.
            Err(failure) => Step::Refuse(None, failure.reason),
        }
    }

    /// A decoded SaslHandshake or SaslAuthenticate request ([`Step::Serve`] for anything else).
    pub fn on_request(&mut self, request: &DecodedRequest, inputs: Inputs<'_>) -> Step {
        let sasl = inputs.sasl;
        let version = request.api_version;
        let correlation_id = request.header.correlation_id;
        match &request.body {
            RequestBody::SaslHandshake(req) => {
                let mechanism = req.mechanism.as_str();
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = sasl
                    .mechanisms
                    .iter()
                    .map(|m| StrBytes::from_string(m.clone()))
                    .collect();
                if !matches!(self.state, State::Handshake) {
                    response.error_code = ErrorCode::ILLEGAL_SASL_STATE.code();
                    let answer = encode(version, correlation_id, &response).ok();
                    return Step::Refuse(answer, "a second SaslHandshake".into());
                }
                let raw = version == 0;
                self.mechanism = mechanism.to_string();
                let changed = self
                    .previous
                    .as_ref()
                    .filter(|p| p.mechanism != mechanism)
                    .map(|p| p.mechanism.clone());
                self.state = if !sasl.mechanisms.iter().any(|m| m == mechanism) {
                    response.error_code = ErrorCode::UNSUPPORTED_SASL_MECHANISM.code();
                    let answer = encode(version, correlation_id, &response).ok();
                    return Step::Refuse(
                        answer,
                        format!("unsupported SASL mechanism {mechanism:?}"),
                    );
                } else if let Some(previous) = changed {
                    let message = format!(
                        "SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{previous}'"
                    );
                    State::BadMechanism {
                        raw,
                        failure: Failure {
                            reason: message.clone(),
                            message,
                        },
                    }
                } else if mechanism == "PLAIN" {
                    State::Plain { raw }
                } else if mechanism == "OAUTHBEARER" {
                    State::OAuthBearer { raw }
                } else if let Some(m) = ScramMechanism::from_name(mechanism) {
                    let server = server_nonce()
                        .and_then(|nonce| ScramServer::new(m, &nonce).map_err(|e| e.to_string()));
                    match server {
                        Ok(server) => State::Scram {
                            server: Box::new(server),
                            raw,
                        },
                        Err(e) => return Step::Refuse(None, e),
                    }
                } else {
                    return Step::Refuse(None, format!("mechanism {mechanism} has no server"));
                };
                match encode(version, correlation_id, &response) {
                    Ok(answer) => Step::Answer(answer),
                    Err(e) => Step::Refuse(None, e),
                }
            }
            RequestBody::SaslAuthenticate(req) => {
                let mut response = SaslAuthenticateResponse::default();
                if matches!(self.state, State::Handshake | State::Done) || self.expects_raw_token()
                {
                    response.error_code = ErrorCode::ILLEGAL_SASL_STATE.code();
                    response.error_message = Some(StrBytes::from_static_str(
                        "Unexpected SaslAuthenticate request",
                    ));
                    let answer = encode(version, correlation_id, &response).ok();
                    return Step::Refuse(answer, "SaslAuthenticate out of order".into());
                }
                match self.exchange(&req.auth_bytes, inputs) {
                    Ok((reply, session)) => {
                        response.auth_bytes = Bytes::from(reply);
                        response.session_lifetime_ms =
                            session.as_ref().map_or(0, |s| s.lifetime_ms);
                        match (encode(version, correlation_id, &response), session) {
                            (Ok(answer), None) => Step::Answer(answer),
                            (Ok(answer), Some(session)) => Step::Authenticated(answer, session),
                            (Err(e), _) => Step::Refuse(None, e),
                        }
                    }
                    Err(failure) => {
                        response.error_code = ErrorCode::SASL_AUTHENTICATION_FAILED.code();
                        response.error_message = Some(StrBytes::from_string(failure.message));
                        let answer = encode(version, correlation_id, &response).ok();
                        Step::Refuse(answer, failure.reason)
                    }
                }
            }
            _ => Step::Serve,
        }
    }

    /// One token of the chosen mechanism: the reply, and the session once authenticated (a
    /// re-authentication must end as the same user); `Err` on failure.
    fn exchange(
        &mut self,
        token: &[u8],
        inputs: Inputs<'_>,
    ) -> Result<(Vec<u8>, Option<Session>), Failure> {
        let (reply, done) = self.step(token, inputs)?;
        let Some((user, credential_expiry_ms)) = done else {
            return Ok((reply, None));
        };
        if let Some(previous) = self.previous.take() {
            if previous.user != user {
                let message = format!(
                    "Cannot change principals during re-authentication from User.{}: User.{user}",
                    previous.user
                );
                self.state = State::Handshake;
                return Err(Failure {
                    reason: message.clone(),
                    message,
                });
            }
        }
        let lifetime_ms =
            session_lifetime_ms(inputs.max_reauth_ms, inputs.now_ms, credential_expiry_ms);
        self.user = Some(user.clone());
        Ok((reply, Some(Session { user, lifetime_ms })))
    }

    /// One token: the reply, and once authenticated the user and the credential's expiry
    /// (ms since the epoch) if it has one.
    #[allow(clippy::type_complexity)]
    fn step(
        &mut self,
        token: &[u8],
        inputs: Inputs<'_>,
    ) -> Result<(Vec<u8>, Option<(String, Option<i64>)>), Failure> {
        let Inputs { sasl, scram, .. } = inputs;
        if token.len() > MAX_SASL_MESSAGE_BYTES {
            self.state = State::Handshake;
            return Err(Failure::credentials(format!(
                "SASL token of {} bytes",
                token.len()
            )));
        }
        match std::mem::replace(&mut self.state, State::Handshake) {
            State::Plain { .. } => {
                let Some(users) = &sasl.plain else {
                    return Err(Failure::credentials("PLAIN has no users".into()));
                };
                match users.authenticate(token) {
                    Ok(user) => {
                        let user = user.to_string();
                        self.state = State::Done;
                        Ok((Vec::new(), Some((user, None))))
                    }
                    Err(e) => {
                        let user = minikafka_core::auth::plain::parse(token)
                            .map(|m| m.username.to_string())
                            .unwrap_or_default();
                        Err(Failure::credentials(format!(
                            "PLAIN authentication of {user:?} failed: {e}"
                        )))
                    }
                }
            }
            State::OAuthBearer { raw } => {
                let Some(config) = &sasl.oauthbearer else {
                    return Err(Failure::credentials("OAUTHBEARER has no validator".into()));
                };
                let response = match oauthbearer::parse_client_initial_response(token) {
                    Ok(response) => response,
                    Err(e) => {
                        return Err(Failure {
                            reason: format!("OAUTHBEARER {}: {e}", self.phase()),
                            message: OAUTHBEARER_INVALID_MESSAGE.replace(
                                "during authentication",
                                &format!("during {}", self.phase()),
                            ),
                        })
                    }
                };
                // With a JWKS only signed tokens are accepted (I167); else Kafka's default,
                // unsecured validator.
                let (validated, required_scope) = match &sasl.oauthbearer_jwks {
                    Some(signed) => (
                        jwks::validate_signed(
                            &response.token,
                            &signed.keys(inputs.now_ms),
                            &signed.config,
                            inputs.now_ms,
                        ),
                        &[][..],
                    ),
                    None => (
                        oauthbearer::validate_unsecured(&response.token, config, inputs.now_ms),
                        &config.required_scope[..],
                    ),
                };
                match validated {
                    Ok(token)
                        if !response.authzid.is_empty() && response.authzid != token.principal =>
                    {
                        let message = format!(
                            "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                            response.authzid, token.principal
                        );
                        Err(Failure {
                            reason: message.clone(),
                            message,
                        })
                    }
                    Ok(token) => {
                        self.state = State::Done;
                        Ok((Vec::new(), Some((token.principal, Some(token.lifetime_ms)))))
                    }
                    Err(e) => {
                        // RFC 7628 §3.2.2: the error goes to the client as a challenge; its
                        // `\x01` acknowledgement is answered with the failure.
                        let json = oauthbearer_json_error(&e, required_scope);
                        self.state = State::OAuthBearerRefused {
                            raw,
                            failure: Failure {
                                reason: format!("OAUTHBEARER token refused: {e}"),
                                message: json.clone(),
                            },
                        };
                        Ok((json.into_bytes(), None))
                    }
                }
            }
            State::OAuthBearerRefused { failure, .. } | State::BadMechanism { failure, .. } => {
                Err(failure)
            }
            State::Scram { mut server, raw } => {
                let mechanism = server.mechanism().name();
                // The user named by the client-first message, kept for the log: a failed
                // machine forgets it.
                let known = server.username().map(str::to_string);
                let failed = |server: &ScramServer, e: &dyn std::fmt::Display| {
                    let user = server.username().or(known.as_deref()).unwrap_or_default();
                    Failure::credentials(format!(
                        "{mechanism} authentication of {user:?} failed: {e}"
                    ))
                };
                if let Err(e) = server.handle_message(token) {
                    return Err(failed(&server, &e));
                }
                let mut reply = Vec::new();
                let mut user = None;
                while let Some(output) = server.poll_output() {
                    match output {
                        ScramOutput::LookupCredential { username, .. } => {
                            let credential = scram.get(&username, server.mechanism()).cloned();
                            if let Err(e) = server.handle_credential(credential.as_ref()) {
                                return Err(failed(&server, &e));
                            }
                        }
                        ScramOutput::Send(bytes) => reply = bytes,
                        ScramOutput::Authenticated { username, .. } => {
                            user = Some((username, None))
                        }
                    }
                }
                self.state = if user.is_some() {
                    State::Done
                } else {
                    State::Scram { server, raw }
                };
                Ok((reply, user))
            }
            State::Handshake | State::Done => {
                Err(Failure::credentials("a SASL token out of order".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lasts_the_setting_or_the_token_whichever_is_sooner() {
        // Neither: no limit (Kafka's default for PLAIN and SCRAM).
        assert_eq!(session_lifetime_ms(0, 1_000, None), 0);
        assert_eq!(session_lifetime_ms(5_000, 1_000, None), 5_000);
        // A token bounds its session even without the setting.
        assert_eq!(session_lifetime_ms(0, 1_000, Some(4_000)), 3_000);
        assert_eq!(session_lifetime_ms(5_000, 1_000, Some(4_000)), 3_000);
        assert_eq!(session_lifetime_ms(2_000, 1_000, Some(4_000)), 2_000);
        // Already past its exp (allowed by the clock skew): the session ends at once.
        assert_eq!(session_lifetime_ms(2_000, 5_000, Some(4_000)), 1);
        assert_eq!(session_lifetime_ms(u64::MAX, 0, None), i64::MAX);
    }

    #[test]
    fn refused_tokens_get_kafkas_json() {
        let scope = ["a".to_string(), "b".to_string()];
        assert_eq!(
            oauthbearer_json_error(&OAuthBearerError::MissingScope("b".into()), &scope),
            r#"{"status":"insufficient_scope", "scope":"[a, b]"}"#
        );
        assert_eq!(
            oauthbearer_json_error(&OAuthBearerError::Time("expired"), &scope),
            r#"{"status":"invalid_token"}"#
        );
    }
}
