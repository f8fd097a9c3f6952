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
//! - Success sets the connection's principal to `User:<name>` for every request read after
//!   it (I45).
//! - Never: allocates from a client's stated length beyond the frame bound, or answers a
//!   request of another API before authentication.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
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

/// What the connection does with a frame read before authentication completed.
#[derive(Debug)]
pub enum Step {
    /// Not a SASL frame: serve it as usual (ApiVersions).
    Serve,
    /// Write this answer; keep reading.
    Answer(Bytes),
    /// Write this answer; the client is now `User:<username>`.
    Authenticated(Bytes, String),
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
    /// Authenticated.
    Done,
}

/// One connection's authenticator.
#[derive(Debug)]
pub struct Authenticator {
    state: State,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            state: State::Handshake,
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
            State::Plain { raw: true } | State::Scram { raw: true, .. }
        )
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
    pub fn on_raw_token(&mut self, token: &[u8], sasl: &SaslSettings, scram: &ScramStore) -> Step {
        match self.exchange(token, sasl, scram) {
            Ok((reply, None)) => Step::Answer(raw_frame(&reply)),
            Ok((reply, Some(user))) => Step::Authenticated(raw_frame(&reply), user),
            // Kafka's legacy framing has no error answer: the connection just closes.
            Err(reason) => Step::Refuse(None, reason),
        }
    }

    /// A decoded SaslHandshake or SaslAuthenticate request ([`Step::Serve`] for anything else).
    pub fn on_request(
        &mut self,
        request: &DecodedRequest,
        sasl: &SaslSettings,
        scram: &ScramStore,
    ) -> Step {
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
                self.state = if !sasl.mechanisms.iter().any(|m| m == mechanism) {
                    response.error_code = ErrorCode::UNSUPPORTED_SASL_MECHANISM.code();
                    let answer = encode(version, correlation_id, &response).ok();
                    return Step::Refuse(
                        answer,
                        format!("unsupported SASL mechanism {mechanism:?}"),
                    );
                } else if mechanism == "PLAIN" {
                    State::Plain { raw }
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
                match self.exchange(&req.auth_bytes, sasl, scram) {
                    Ok((reply, user)) => {
                        response.auth_bytes = Bytes::from(reply);
                        match (encode(version, correlation_id, &response), user) {
                            (Ok(answer), None) => Step::Answer(answer),
                            (Ok(answer), Some(user)) => Step::Authenticated(answer, user),
                            (Err(e), _) => Step::Refuse(None, e),
                        }
                    }
                    Err(reason) => {
                        response.error_code = ErrorCode::SASL_AUTHENTICATION_FAILED.code();
                        response.error_message =
                            Some(StrBytes::from_static_str(AUTH_FAILED_MESSAGE));
                        let answer = encode(version, correlation_id, &response).ok();
                        Step::Refuse(answer, reason)
                    }
                }
            }
            _ => Step::Serve,
        }
    }

    /// One token of the chosen mechanism: the reply, and the username once authenticated;
    /// `Err` with the reason to log (no secret in it) on failure.
    fn exchange(
        &mut self,
        token: &[u8],
        sasl: &SaslSettings,
        scram: &ScramStore,
    ) -> Result<(Vec<u8>, Option<String>), String> {
        if token.len() > MAX_SASL_MESSAGE_BYTES {
            self.state = State::Handshake;
            return Err(format!("SASL token of {} bytes", token.len()));
        }
        match std::mem::replace(&mut self.state, State::Handshake) {
            State::Plain { .. } => {
                let Some(users) = &sasl.plain else {
                    return Err("PLAIN has no users".into());
                };
                match users.authenticate(token) {
                    Ok(user) => {
                        let user = user.to_string();
                        self.state = State::Done;
                        Ok((Vec::new(), Some(user)))
                    }
                    Err(e) => {
                        let user = minikafka_core::auth::plain::parse(token)
                            .map(|m| m.username.to_string())
                            .unwrap_or_default();
                        Err(format!("PLAIN authentication of {user:?} failed: {e}"))
                    }
                }
            }
            State::Scram { mut server, raw } => {
                let mechanism = server.mechanism().name();
                let failed = |server: &ScramServer, e: &dyn std::fmt::Display| {
                    let user = server.username().unwrap_or_default();
                    format!("{mechanism} authentication of {user:?} failed: {e}")
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
                        ScramOutput::Authenticated { username, .. } => user = Some(username),
                    }
                }
                self.state = if user.is_some() {
                    State::Done
                } else {
                    State::Scram { server, raw }
                };
                Ok((reply, user))
            }
            State::Handshake | State::Done => Err("a SASL token out of order".into()),
        }
    }
}
