//! Signed OAUTHBEARER tokens (KIP-768's broker side, I166–I168) over real TCP against the
//! `minikafka` binary: the keys are made in the test (a P-256 key with ring, an RSA key with
//! `openssl genpkey`, which ring cannot generate), their public halves written as a JWKS file
//! the broker reads through `sasl.oauthbearer.jwks.endpoint.url=file://…`.
//!
//! Accepted: ES256 and RS256 tokens from listed keys. (The `rdkafka` crate here is built
//! without OpenSSL, so its librdkafka has no OAUTHBEARER; real clients with signed tokens run in
//! `tests/interop/test_security.py`.) Refused, as Kafka's
//! `OAuthBearerValidatorCallbackHandler` refuses them (`{"status":"invalid_token"}` as a
//! challenge, then SASL_AUTHENTICATION_FAILED after the client's `\x01`, and a closed
//! connection): another key's signature, another issuer, another audience, an expired token,
//! and an unsecured `alg: none` token. kfake (the peer) does not validate JWKS, so these run
//! against minikafka only.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use minikafka_core::auth::oauthbearer::unsecured_token;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::{json, Value};

use common::sasl::{authenticate, handshake, metadata};
use common::typed::TypedClient;
use common::{bounded, Broker};

const LIMIT: Duration = Duration::from_secs(90);
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;
const ISSUER: &str = "https://issuer.example";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now_s() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(now.as_secs()).expect("seconds fit")
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// A P-256 key made here (ES256).
struct EcKey(EcdsaKeyPair);

impl EcKey {
    fn new() -> EcKey {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng);
        EcKey(pair.expect("P-256 key"))
    }
    fn jwk(&self, kid: &str) -> Value {
        let point = self.0.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
               "x": b64(&point[1..33]), "y": b64(&point[33..65])})
    }
    fn token(&self, kid: &str, claims: &Value) -> String {
        let input = signing_input(&json!({"alg": "ES256", "kid": kid, "typ": "JWT"}), claims);
        let sig = self
            .0
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("signed");
        format!("{input}.{}", b64(sig.as_ref()))
    }
}

/// A 2048-bit RSA key made by `openssl genpkey` (RS256).
struct RsaKey(RsaKeyPair);

impl RsaKey {
    fn new() -> RsaKey {
        let out = std::process::Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .args(["-outform", "DER"])
            .output()
            .expect("openssl makes the test's RSA key");
        assert!(out.status.success(), "openssl genpkey failed");
        // OpenSSL 3.0 writes PKCS#1 RSAPrivateKey as DER; other versions PKCS#8.
        let pair =
            RsaKeyPair::from_der(&out.stdout).or_else(|_| RsaKeyPair::from_pkcs8(&out.stdout));
        RsaKey(pair.expect("an RSA key"))
    }
    fn jwk(&self, kid: &str) -> Value {
        let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(self.0.public());
        json!({"kty": "RSA", "kid": kid, "alg": "RS256", "n": b64(&c.n), "e": b64(&c.e)})
    }
    fn token(&self, kid: &str, claims: &Value) -> String {
        let input = signing_input(&json!({"alg": "RS256", "kid": kid}), claims);
        let mut sig = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .expect("signed");
        format!("{input}.{}", b64(&sig))
    }
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": ISSUER, "aud": ["kafka"], "iat": now_s(), "exp": now_s() + 120,
           "scope": "produce"})
}

/// A broker whose SASL_PLAINTEXT listener serves OAUTHBEARER with the JWKS at `jwks`, its
/// settings given with Kafka's listener-and-mechanism prefix.
fn broker_with_jwks(jwks: &Path) -> Broker {
    broker_with_jwks_and(jwks, &[])
}

fn broker_with_jwks_and(jwks: &Path, extra: &[(&str, &str)]) -> Broker {
    let prefix = "listener.name.sasl_plaintext.oauthbearer.";
    let mut builder = Broker::builder()
        .listener("SASL_PLAINTEXT")
        .with(
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "OAUTHBEARER",
        )
        .with(
            &format!("{prefix}sasl.oauthbearer.jwks.endpoint.url"),
            &format!("file://{}", jwks.display()),
        )
        .with(&format!("{prefix}sasl.oauthbearer.expected.issuer"), ISSUER)
        .with(
            &format!("{prefix}sasl.oauthbearer.expected.audience"),
            "kafka,other",
        )
        .with("sasl.oauthbearer.clock.skew.seconds", "5");
    for (k, v) in extra {
        builder = builder.with(k, v);
    }
    builder.start()
}

/// Whether `token` authenticates (a refused one's connection is closed by the broker).
fn authenticates(broker: &Broker, token: &str) -> bool {
    let mut client = TypedClient::connect(broker.listener_addr("SASL_PLAINTEXT"));
    let hs = handshake(&mut client, "OAUTHBEARER").expect("handshake answered");
    assert_eq!(hs.error_code, 0);
    let answer = authenticate(&mut client, &first_message(token)).expect("answered");
    answer.error_code == 0 && answer.auth_bytes.is_empty()
}

fn write_jwks(dir: &Path, keys: &[Value]) -> std::path::PathBuf {
    let path = dir.join("jwks.json");
    std::fs::write(&path, json!({ "keys": keys }).to_string()).expect("JWKS written");
    path
}

fn first_message(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// A token accepted: no error, a session bounded by the token's exp, requests served.
fn assert_accepted(broker: &Broker, token: &str) {
    let mut client = TypedClient::connect(broker.listener_addr("SASL_PLAINTEXT"));
    let hs = handshake(&mut client, "OAUTHBEARER").expect("handshake answered");
    assert_eq!(hs.error_code, 0);
    let answer = authenticate(&mut client, &first_message(token)).expect("answered");
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert!(answer.auth_bytes.is_empty());
    assert!(
        (1..=120_000).contains(&answer.session_lifetime_ms),
        "{}",
        answer.session_lifetime_ms
    );
    assert!(
        metadata(&mut client).is_some(),
        "served after authentication"
    );
}

/// A token refused as Kafka refuses it (see the file's doc comment).
fn assert_refused(broker: &Broker, token: &str) {
    let mut client = TypedClient::connect(broker.listener_addr("SASL_PLAINTEXT"));
    let hs = handshake(&mut client, "OAUTHBEARER").expect("handshake answered");
    assert_eq!(hs.error_code, 0);
    let challenge = authenticate(&mut client, &first_message(token)).expect("answered");
    assert_eq!(challenge.error_code, 0, "{:?}", challenge.error_message);
    assert_eq!(
        String::from_utf8_lossy(&challenge.auth_bytes),
        INVALID_TOKEN
    );
    let failed = authenticate(&mut client, b"\x01").expect("answered");
    assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(failed.error_message.as_deref(), Some(INVALID_TOKEN));
    assert!(client.is_closed_by_broker(), "closed after a refused token");
}

#[test]
fn signed_tokens_from_listed_keys_authenticate_and_others_are_refused() {
    bounded(LIMIT, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let ec = EcKey::new();
        let rsa = RsaKey::new();
        let jwks = write_jwks(dir.path(), &[ec.jwk("ec-1"), rsa.jwk("rsa-1")]);
        let broker = broker_with_jwks(&jwks);

        assert_accepted(&broker, &ec.token("ec-1", &claims("alice")));
        assert_accepted(&broker, &rsa.token("rsa-1", &claims("bob")));

        // I167: another key's signature, even under a listed kid.
        assert_refused(&broker, &EcKey::new().token("ec-1", &claims("alice")));
        // I167: with a JWKS the unsecured token Kafka's default validator takes is refused.
        assert_refused(&broker, &unsecured_token(&claims("alice")));
        // I168: issuer, audience, expiry (beyond the 5 s skew).
        let mut c = claims("alice");
        c["iss"] = json!("https://elsewhere");
        assert_refused(&broker, &ec.token("ec-1", &c));
        let mut c = claims("alice");
        c["aud"] = json!("not-kafka");
        assert_refused(&broker, &ec.token("ec-1", &c));
        let mut c = claims("alice");
        c["iat"] = json!(now_s() - 600);
        c["exp"] = json!(now_s() - 60);
        assert_refused(&broker, &rsa.token("rsa-1", &c));
    });
}

#[test]
fn a_key_added_to_the_jwks_file_is_used_after_the_refresh_interval() {
    bounded(LIMIT, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let old = EcKey::new();
        let new = EcKey::new();
        let jwks = write_jwks(dir.path(), &[old.jwk("old")]);
        let broker = broker_with_jwks_and(
            &jwks,
            &[("sasl.oauthbearer.jwks.endpoint.refresh.ms", "200")],
        );
        let token = new.token("new", &claims("alice"));
        assert!(!authenticates(&broker, &token), "not in the JWKS yet");
        // Rotation: the new key is published beside the old one; no restart.
        let staged = dir.path().join("jwks.json.new");
        std::fs::write(
            &staged,
            json!({"keys": [old.jwk("old"), new.jwk("new")]}).to_string(),
        )
        .expect("written");
        std::fs::rename(&staged, &jwks).expect("replaced");
        let mut tries = 0;
        while !authenticates(&broker, &token) {
            tries += 1;
            assert!(tries < 200, "the new key was never read");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_accepted(&broker, &old.token("old", &claims("bob")));
    });
}

#[test]
fn a_missing_or_oversized_jwks_stops_the_broker_from_starting() {
    bounded(LIMIT, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let big = dir.path().join("big.json");
        // I166: one byte over the 1 MiB read.
        let filler = " ".repeat(1024 * 1024);
        std::fs::write(&big, format!("{{\"keys\":[]}}{filler}")).expect("written");
        for url in [
            format!("file://{}", big.display()),
            format!("file://{}", dir.path().join("absent.json").display()),
            "https://idp.example/jwks".to_string(),
        ] {
            let out = std::process::Command::new(common::minikafka_bin())
                .arg("--override")
                .arg("listeners=SASL_PLAINTEXT://127.0.0.1:0")
                .arg("--override")
                .arg("sasl.enabled.mechanisms=OAUTHBEARER")
                .arg("--override")
                .arg(format!("sasl.oauthbearer.jwks.endpoint.url={url}"))
                .arg("--override")
                .arg(format!("log.dirs={}", dir.path().join("data").display()))
                .output()
                .expect("minikafka runs");
            assert!(!out.status.success(), "{url}: started");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("sasl.oauthbearer.jwks.endpoint.url"),
                "{url}: {err}"
            );
        }
    });
}
