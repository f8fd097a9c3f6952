//! Targets for what a client sends during SASL authentication (`core::auth`): the PLAIN
//! message, SCRAM's client-first and client-final messages through the server machine, and
//! OAUTHBEARER's initial response with its unsecured token, and a JWKS with a signed token.
//!
//! Contracts (I40, and each parser's own): no input panics; whatever parses re-encodes to
//! input that parses to the same value; the SCRAM machine either fails for good (no outputs,
//! every later input refused) or moves forward with the outputs its state promises, and never
//! authenticates a client that does not hold the password; a token that validates at `now`
//! has a principal and an expiry after `now`.

use std::sync::OnceLock;

use minikafka_core::auth::jwks::{
    token_kid, validate_signed, Jwks, SignedValidatorConfig, MAX_JWKS_BYTES, MAX_JWKS_KEYS,
};
use minikafka_core::auth::oauthbearer::{
    encode_client_initial_response, parse_client_initial_response, validate_unsecured,
    UnsecuredValidatorConfig,
};
use minikafka_core::auth::plain::{self, PlainUsers};
use minikafka_core::auth::scram::{
    client_proof, from_saslname, parse_client_final, parse_client_first, to_saslname,
    ScramCredential, ScramError, ScramMechanism, ScramOutput, ScramServer,
};
use minikafka_core::auth::ssl_principal::PrincipalMapper;
use minikafka_core::auth::{jaas, MAX_SASL_MESSAGE_BYTES};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use crate::input::Input;

/// The users every PLAIN input is checked against.
const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
    user_alice="alice-secret" user_bob="b\"ob";"#;

/// `sasl_plain`: a PLAIN message. Parsed ⇒ re-encodes to the same bytes; it authenticates iff
/// its user is listed with exactly its password and its authzid is empty or the user.
pub fn sasl_plain(data: &[u8]) {
    let entry = jaas::parse_single(PLAIN_JAAS).expect("the fixed JAAS entry parses");
    let users = PlainUsers::from_jaas(&entry).expect("a PlainLoginModule entry");
    let parsed = plain::parse(data);
    let authenticated = users.authenticate(data);
    match parsed {
        Ok(m) => {
            assert!(data.len() <= MAX_SASL_MESSAGE_BYTES);
            assert_eq!(plain::encode(m.authzid, m.username, m.password), data);
            let known = entry.options.get(&format!("user_{}", m.username));
            let should = known.is_some_and(|p| p == m.password)
                && (m.authzid.is_empty() || m.authzid == m.username);
            assert_eq!(authenticated.is_ok(), should, "{m:?}");
            if let Ok(user) = authenticated {
                assert_eq!(user, m.username);
            }
        }
        Err(_) => assert!(authenticated.is_err()),
    }
    // JAAS text from the same bytes: a value or an error.
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jaas::parse(text);
    }
}

const SCRAM_PASSWORD: &str = "pencil";

/// The one credential the SCRAM target uses (PBKDF2 runs once per process, not per input).
fn scram_credential(mechanism: ScramMechanism) -> &'static ScramCredential {
    static SHA256: OnceLock<ScramCredential> = OnceLock::new();
    static SHA512: OnceLock<ScramCredential> = OnceLock::new();
    let cell = match mechanism {
        ScramMechanism::Sha256 => &SHA256,
        ScramMechanism::Sha512 => &SHA512,
    };
    cell.get_or_init(|| {
        ScramCredential::from_password(mechanism, SCRAM_PASSWORD, b"fuzz-salt", 4096)
            .expect("a valid credential")
    })
}

/// `scram`: a mechanism flag, then a client-first and a client-final message separated by the
/// first NUL byte (neither message may hold one), driven through [`ScramServer`].
pub fn scram(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let rest = input.rest();
    let mechanism = ScramMechanism::ALL[usize::from(flags & 1)];
    let (first, last) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };

    // The parsers alone: a parsed message is its header plus its bare part, and names survive
    // saslname escaping.
    if let Ok(m) = parse_client_first(first) {
        assert_eq!(format!("{}{}", m.gs2_header, m.bare).as_bytes(), first);
        assert_eq!(
            from_saslname(&to_saslname(&m.username)).as_ref(),
            Ok(&m.username)
        );
    }
    if let Ok(m) = parse_client_final(last) {
        assert!(last.starts_with(m.without_proof.as_bytes()));
    }

    let mut server = ScramServer::new(mechanism, "fuzzserver").expect("a valid nonce");
    let step = server.handle_message(first);
    match step {
        Err(_) => {
            assert!(server.is_failed());
            assert_eq!(server.poll_output(), None);
            assert_eq!(server.handle_message(last), Err(ScramError::Failed));
            return;
        }
        Ok(()) => {
            assert!(matches!(
                server.poll_output(),
                Some(ScramOutput::LookupCredential { .. })
            ));
            assert_eq!(server.poll_output(), None);
        }
    }
    let credential = scram_credential(mechanism);
    server
        .handle_credential(Some(credential))
        .expect("a valid credential is accepted");
    let Some(ScramOutput::Send(server_first)) = server.poll_output() else {
        panic!("no server-first message after the credential");
    };
    assert_eq!(server.poll_output(), None);
    match server.handle_message(last) {
        Ok(()) => {
            // Only a client that knows the password gets here: its proof must be the one the
            // password gives for this exchange (I42).
            assert!(server.is_complete());
            let first = parse_client_first(first).expect("accepted before");
            let last = parse_client_final(last).expect("accepted now");
            let auth_message = format!(
                "{},{},{}",
                first.bare,
                String::from_utf8_lossy(&server_first),
                last.without_proof
            );
            let (proof, _) = client_proof(
                mechanism,
                SCRAM_PASSWORD,
                &credential.salt,
                credential.iterations,
                &auth_message,
            );
            assert_eq!(
                BASE64.encode(&last.proof),
                proof,
                "authenticated with a wrong proof"
            );
            assert!(matches!(server.poll_output(), Some(ScramOutput::Send(_))));
            assert!(matches!(
                server.poll_output(),
                Some(ScramOutput::Authenticated { .. })
            ));
            assert_eq!(server.poll_output(), None);
        }
        Err(_) => {
            assert!(server.is_failed());
            assert_eq!(server.poll_output(), None);
        }
    }
}

/// `oauthbearer`: 8 bytes of `now_ms`, then an initial response. Parsed ⇒ re-encoding parses
/// to the same value; a token that validates has a principal and expires after `now_ms`.
pub fn oauthbearer(data: &[u8]) {
    let mut input = Input::new(data);
    let now_ms = i64::from(input.u32()) << 32 | i64::from(input.u32());
    let message = input.rest();
    let config = UnsecuredValidatorConfig {
        required_scope: vec!["fuzz".to_string()],
        allowable_clock_skew_ms: 1000,
        ..UnsecuredValidatorConfig::default()
    };
    let Ok(response) = parse_client_initial_response(message) else {
        // The token validator still sees the bytes as a token.
        let _ = validate_unsecured(&String::from_utf8_lossy(message), &config, now_ms);
        return;
    };
    let again =
        encode_client_initial_response(&response.authzid, &response.token, &response.extensions);
    let reparsed = parse_client_initial_response(&again).expect("re-encoded response parses");
    assert_eq!(reparsed, response);
    for config in [UnsecuredValidatorConfig::default(), config] {
        if let Ok(token) = validate_unsecured(&response.token, &config, now_ms) {
            assert!(!token.principal.trim().is_empty());
            let skew = i64::try_from(config.allowable_clock_skew_ms).unwrap_or(i64::MAX);
            assert!(token.lifetime_ms > now_ms.saturating_sub(skew));
            if let Some(iat) = token.start_time_ms {
                assert!(iat < token.lifetime_ms);
            }
            for scope in &config.required_scope {
                assert!(token.scope.contains(scope));
            }
        }
    }
}

/// `oauthbearer_jwks`: 8 bytes of `now_ms`, a JWKS document, a NUL, then a signed token.
/// Neither part panics or allocates beyond its bound (I166); a document over
/// `MAX_JWKS_BYTES` is refused; a token that validates against the parsed set has a non-empty
/// principal, expires after `now` minus the skew, and was verified by a key of the set (I167,
/// I168). The unverified `kid` read to decide on a fetch (I187) never panics either.
pub fn oauthbearer_jwks(data: &[u8]) {
    let mut input = Input::new(data);
    let now_ms = i64::from(input.u32()) << 32 | i64::from(input.u32());
    let rest = input.rest();
    let (document, token) = match rest.iter().position(|b| *b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &b""[..]),
    };
    let parsed = Jwks::parse(document);
    if document.len() > MAX_JWKS_BYTES {
        assert!(parsed.is_err());
    }
    let jwks = parsed.unwrap_or_default();
    assert!(jwks.keys.len() <= MAX_JWKS_KEYS);
    let token = String::from_utf8_lossy(token);
    if let Some(kid) = token_kid(&token) {
        // Decoded from the token's first part: never longer than the token.
        assert!(kid.len() <= token.len());
    }
    let config = SignedValidatorConfig::default();
    if let Ok(valid) = validate_signed(&token, &jwks, &config, now_ms) {
        assert!(!jwks.keys.is_empty());
        assert!(!valid.principal.trim().is_empty());
        assert!(valid.lifetime_ms > now_ms.saturating_sub(30_000));
    }
}

/// `ssl_principal`: `ssl.principal.mapping.rules` text, a NUL, then a certificate subject.
/// No rule text panics when parsed (I141); rules that parse map any subject to a name or refuse
/// it (I140); the same rules with `,DEFAULT` appended, when they parse, refuse no subject.
pub fn ssl_principal(data: &[u8]) {
    let (rules, dn) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"CN=a,O=b"[..]),
    };
    let rules = String::from_utf8_lossy(rules);
    let dn = String::from_utf8_lossy(dn);
    if let Ok(mapper) = PrincipalMapper::parse(&rules) {
        let _ = mapper.map(&dn);
    }
    if let Ok(mapper) = PrincipalMapper::parse(&format!("{rules},DEFAULT")) {
        assert!(mapper.map(&dn).is_ok(), "DEFAULT last refuses {dn:?}");
    }
}
