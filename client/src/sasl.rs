//! The client side of SASL (PLAIN, SCRAM-SHA-256/512) with Kafka's client settings
//! (`sasl.mechanism`, `sasl.username`, `sasl.password`), as pure message functions: the
//! connection sends what these build (SaslHandshake v1, then SaslAuthenticate).
//!
//! Contract:
//! - PLAIN sends `\0user\0password` once.
//! - SCRAM sends client-first with a random nonce, checks that server-first extends that
//!   nonce and asks for at least 4096 iterations, sends the proof, and accepts the session
//!   only when server-final carries the server signature the password predicts (the broker
//!   proved it holds the credential).
//! - Never: logs the password or puts it in an error.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use minikafka_core::auth::scram::{client_proof, to_saslname, ScramMechanism, MIN_ITERATIONS};

use crate::error::{Error, Result};

/// `sasl.mechanism` / `sasl.username` / `sasl.password`.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// The username.
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// A SCRAM exchange in progress, client side.
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    first_bare: String,
    nonce: String,
    expected_server_signature: Option<String>,
}

impl ScramClient {
    /// Starts an exchange for `mechanism`; also returns client-first.
    pub fn start(mechanism: ScramMechanism, username: &str) -> Result<(ScramClient, Vec<u8>)> {
        let mut random = [0u8; 18];
        getrandom::fill(&mut random).map_err(|e| Error::Protocol(format!("random nonce: {e}")))?;
        let nonce = BASE64.encode(random);
        let first_bare = format!("n={},r={nonce}", to_saslname(username));
        let first = format!("n,,{first_bare}").into_bytes();
        Ok((
            ScramClient {
                mechanism,
                first_bare,
                nonce,
                expected_server_signature: None,
            },
            first,
        ))
    }

    /// Server-first in, client-final out.
    pub fn client_final(&mut self, server_first: &[u8], password: &str) -> Result<Vec<u8>> {
        let bad = |why: &str| Error::Protocol(format!("SCRAM server-first: {why}"));
        let text = std::str::from_utf8(server_first).map_err(|_| bad("not UTF-8"))?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in text.split(',') {
            match part.split_at_checked(2) {
                Some(("r=", v)) => nonce = Some(v),
                Some(("s=", v)) => salt = Some(BASE64.decode(v).map_err(|_| bad("salt"))?),
                Some(("i=", v)) => iterations = Some(v.parse::<u32>().map_err(|_| bad("i"))?),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(bad("missing r, s or i"));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(bad("the nonce does not extend ours"));
        }
        if iterations < MIN_ITERATIONS {
            return Err(bad("too few iterations"));
        }
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.first_bare);
        let (proof, server_signature) =
            client_proof(self.mechanism, password, &salt, iterations, &auth_message);
        self.expected_server_signature = Some(server_signature);
        Ok(format!("{without_proof},p={proof}").into_bytes())
    }

    /// Server-final: the broker's signature must be the one the password predicts.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<()> {
        let expected = self.expected_server_signature.as_deref().unwrap_or("\0");
        if server_final == format!("v={expected}").as_bytes() {
            Ok(())
        } else {
            Err(Error::Protocol(
                "SCRAM server-final: the broker did not prove it holds the credential".into(),
            ))
        }
    }
}

/// The PLAIN message.
pub fn plain_message(username: &str, password: &str) -> Vec<u8> {
    minikafka_core::auth::plain::encode("", username, password)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::auth::scram::{ScramCredential, ScramOutput, ScramServer};

    /// A full exchange against the broker's SCRAM machine.
    #[test]
    fn scram_client_and_server_agree() {
        for m in ScramMechanism::ALL {
            let credential =
                ScramCredential::from_password(m, "pw", b"saltsalt", 4096).expect("ok");
            let mut server = ScramServer::new(m, "servernonce").expect("server");
            let (mut client, first) = ScramClient::start(m, "alice").expect("start");
            server.handle_message(&first).expect("first");
            assert!(matches!(
                server.poll_output(),
                Some(ScramOutput::LookupCredential { .. })
            ));
            server
                .handle_credential(Some(&credential))
                .expect("credential");
            let Some(ScramOutput::Send(server_first)) = server.poll_output() else {
                panic!("server-first")
            };
            let last = client.client_final(&server_first, "pw").expect("final");
            server.handle_message(&last).expect("proof accepted");
            let Some(ScramOutput::Send(server_final)) = server.poll_output() else {
                panic!("server-final")
            };
            client
                .verify_server_final(&server_final)
                .expect("server proved itself");
            assert!(client.verify_server_final(b"v=AAAA").is_err());
        }
    }
}
