//! Target for what the broker reads on a SASL listener before a client has authenticated
//! (`broker::server::sasl`): a stream of frames through the connection's [`Authenticator`],
//! and the text parsers of the security settings and the stored SCRAM credentials.
//!
//! Contracts (I40, I47): no input panics; a frame whose API is not ApiVersions or SASL is
//! refused before authentication; only the right PLAIN password, a SCRAM proof made from
//! the stored credential's password, or an OAUTHBEARER initial response (an unsecured token
//! valid at the fixed `NOW_MS`, I138) authenticates; after a refusal nothing more is read.
//! Whatever `ScramStore::decode` accepts re-encodes to text that decodes to the same store;
//! `listeners` and protocol-map text parses or is refused, never panics.

use std::sync::OnceLock;

use minikafka_broker::config::listeners::{parse_endpoints, parse_protocol_map, SaslSettings};
use minikafka_broker::config::security::parse_mechanisms;
use minikafka_broker::protocol::{decode_request, SupportedVersions};
use minikafka_broker::server::handlers::served_versions;
use minikafka_broker::server::sasl::{Authenticator, Inputs, Step};
use minikafka_broker::server::scram_store::ScramStore;
use minikafka_core::auth::jaas;
use minikafka_core::auth::oauthbearer::UnsecuredValidatorConfig;
use minikafka_core::auth::plain::PlainUsers;
use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};

use crate::input::Input;

/// The wall clock the target's OAUTHBEARER validation runs at (2027-01-15).
const NOW_MS: i64 = 1_800_000_000_000;
const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;

fn fixture() -> &'static (SaslSettings, ScramStore, SupportedVersions) {
    static FIXTURE: OnceLock<(SaslSettings, ScramStore, SupportedVersions)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let entry = jaas::parse_single(JAAS).expect("fixed JAAS");
        let sasl = SaslSettings {
            mechanisms: vec![
                "PLAIN".into(),
                "SCRAM-SHA-256".into(),
                "SCRAM-SHA-512".into(),
                "OAUTHBEARER".into(),
            ],
            plain: Some(PlainUsers::from_jaas(&entry).expect("PLAIN users")),
            oauthbearer: Some(UnsecuredValidatorConfig::default()),
            oauthbearer_jwks: None,
        };
        let mut store = ScramStore::default();
        for m in ScramMechanism::ALL {
            let c = ScramCredential::from_password(m, "pencil", b"fuzz-salt", 4096).expect("ok");
            store.upsert("user", m, c);
        }
        (sasl, store, served_versions())
    })
}

/// `sasl_session`: the first byte picks what the rest is; see the module contract.
pub fn sasl_session(data: &[u8]) {
    let mut input = Input::new(data);
    let pick = input.u8();
    let rest = input.rest();
    match pick % 4 {
        0 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                if let Ok(store) = ScramStore::decode(text) {
                    let again = ScramStore::decode(&store.encode()).expect("re-encoded store");
                    assert_eq!(again, store);
                }
            }
        }
        1 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = parse_endpoints(text);
                let _ = parse_protocol_map(text);
                let _ = parse_mechanisms(text);
            }
        }
        _ => frames(rest),
    }
}

/// Splits `bytes` into size-prefixed frames (a 2-byte length each) and feeds them to one
/// authenticator as a connection would.
fn frames(mut bytes: &[u8]) {
    let (sasl, store, supported) = fixture();
    let mut auth = Authenticator::default();
    let inputs = Inputs {
        sasl,
        scram: store,
        now_ms: NOW_MS,
        max_reauth_ms: 0,
    };
    while bytes.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([bytes[0], bytes[1]])).min(bytes.len() - 2);
        let frame = bytes::Bytes::copy_from_slice(&bytes[2..2 + len]);
        bytes = &bytes[2 + len..];
        let step = if auth.expects_raw_token() {
            auth.on_raw_token(&frame, inputs)
        } else {
            let api_key = Authenticator::api_key_of(&frame);
            let allowed = api_key.is_some_and(Authenticator::allowed_before_authentication);
            if !allowed {
                // The connection closes here (I47); nothing of it is served.
                return;
            }
            match decode_request(frame.clone(), supported) {
                Ok(request) => auth.on_request(&request, inputs),
                Err(_) => return,
            }
        };
        match step {
            Step::Refuse(..) => return,
            Step::Authenticated(_, session) => {
                let user = session.user;
                assert!(auth.is_done());
                let contains = |needle: &[u8]| data_contains(&frame, needle);
                if contains(b"\x01auth=") {
                    // OAUTHBEARER: any principal an unsecured token names (I138), never an
                    // empty one; its session ends at the token's exp.
                    assert!(!user.trim().is_empty());
                    assert!(session.lifetime_ms > 0);
                    return;
                }
                // Only the fixture's users exist; authenticating without their password
                // would need a SHA-256 preimage or a SCRAM proof forgery.
                assert!(user == "alice" || user == "user", "authenticated {user:?}");
                if user == "alice" {
                    assert!(contains(b"alice-secret"), "PLAIN without the password");
                }
                return;
            }
            Step::Serve | Step::Answer(_) => {}
        }
    }
}

fn data_contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&api_key.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&1i32.to_be_bytes());
        f.extend_from_slice(&1i16.to_be_bytes());
        f.push(b'f');
        f.extend_from_slice(body);
        let mut out = (f.len() as u16).to_be_bytes().to_vec();
        out.extend(f);
        out
    }

    /// The seed a corpus file holds: a PLAIN login with the right password, over v0 raw
    /// tokens and over SaslAuthenticate v1.
    #[test]
    fn plain_logins_run_through_the_target() {
        let mut handshake = vec![0u8, 5];
        handshake.extend_from_slice(b"PLAIN");
        let token = b"\0alice\0alice-secret";
        let mut input = vec![2u8];
        input.extend(frame(17, 1, &handshake));
        let mut auth_body = (token.len() as i32).to_be_bytes().to_vec();
        auth_body.extend_from_slice(token);
        input.extend(frame(36, 1, &auth_body));
        sasl_session(&input);
        let committed = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fuzz/corpus/sasl_session/seed-plain-v1"
        ))
        .expect("the committed seed");
        assert_eq!(committed, input, "the seed is this login");
    }

    /// The OAUTHBEARER seed authenticates (so the fuzzer starts from a login that reaches the
    /// target's OAUTHBEARER assertions): an unsecured token for `fuzz`, exp in 2100.
    #[test]
    fn the_oauthbearer_seed_authenticates() {
        let seed = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fuzz/corpus/sasl_session/seed-oauthbearer-v1"
        ))
        .expect("the committed seed");
        let (sasl, store, supported) = fixture();
        let inputs = Inputs {
            sasl,
            scram: store,
            now_ms: NOW_MS,
            max_reauth_ms: 0,
        };
        let mut auth = Authenticator::default();
        let mut bytes = &seed[1..];
        let mut user = None;
        while bytes.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([bytes[0], bytes[1]]));
            let frame = bytes::Bytes::copy_from_slice(&bytes[2..2 + len]);
            bytes = &bytes[2 + len..];
            let request = decode_request(frame, supported).expect("a request");
            if let Step::Authenticated(_, session) = auth.on_request(&request, inputs) {
                user = Some(session.user);
            }
        }
        assert_eq!(user.as_deref(), Some("fuzz"));
        sasl_session(&seed);
    }
}
