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
//! The same keys served by an `http:` and an `https:` endpoint inside the test (I178): fetched
//! at startup (a broker whose endpoint fails does not start, as Kafka), rotated keys picked up
//! after the refresh interval, an oversized body refused, an `https:` endpoint trusted only
//! through the OAUTHBEARER JAAS entry's `ssl.truststore.location`, and a refresh that fails or
//! stalls keeps the keys while the broker serves on.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::io::Write as _;
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
/// Waits (up to 10 s, polling) until the broker accepts `token`: a key rotated in is read at
/// the next refresh, not at once.
fn await_accepted(broker: &Broker, token: &str, never: &str) {
    let mut tries = 0;
    while !authenticates(broker, token) {
        tries += 1;
        assert!(tries < 200, "{never}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
        await_accepted(&broker, &token, "the new key was never read");
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
            "ftp://idp.example/jwks".to_string(),
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

/// What the test's JWKS endpoint answers.
#[derive(Clone)]
enum Answer {
    /// 200 with this body.
    Json(String),
    /// This status, no body.
    Status(u16),
    /// Reads the request, then holds the connection, answering nothing, until released.
    Stall,
}

/// A JWKS endpoint on 127.0.0.1 (plain HTTP, or HTTPS when given a server config), one thread
/// per connection; every connection is answered and closed.
struct JwksServer {
    url: String,
    answer: Arc<Mutex<Answer>>,
    requests: Arc<AtomicUsize>,
    stalled: Arc<AtomicUsize>,
    release: Arc<AtomicBool>,
}

impl JwksServer {
    fn start(answer: Answer, tls: Option<Arc<rustls::ServerConfig>>) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = JwksServer {
            url: format!("{scheme}://127.0.0.1:{port}/.well-known/jwks.json"),
            answer: Arc::new(Mutex::new(answer)),
            requests: Arc::new(AtomicUsize::new(0)),
            stalled: Arc::new(AtomicUsize::new(0)),
            release: Arc::new(AtomicBool::new(false)),
        };
        let (answer, requests) = (Arc::clone(&server.answer), Arc::clone(&server.requests));
        let (stalled, release) = (Arc::clone(&server.stalled), Arc::clone(&server.release));
        // Detached: the listener lives as long as the test process, which ends with the test.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (answer, requests) = (Arc::clone(&answer), Arc::clone(&requests));
                let (stalled, release) = (Arc::clone(&stalled), Arc::clone(&release));
                let tls = tls.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let reply = |io: &mut dyn ReadWrite| {
                        serve_one(io, &answer, &requests, &stalled, &release);
                    };
                    match tls {
                        Some(config) => {
                            let conn = rustls::ServerConnection::new(config).expect("TLS");
                            let mut io = rustls::StreamOwned::new(conn, stream);
                            reply(&mut io);
                            io.conn.send_close_notify();
                            let _ = io.flush();
                        }
                        None => {
                            let mut io = stream;
                            reply(&mut io);
                        }
                    }
                });
            }
        });
        server
    }

    fn answer(&self, answer: Answer) {
        *self.answer.lock().expect("answer") = answer;
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `done()`.
    fn wait_for(&self, what: &str, done: impl Fn(&JwksServer) -> bool) {
        let mut tries = 0;
        while !done(self) {
            tries += 1;
            assert!(tries < 400, "never: {what}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

trait ReadWrite: std::io::Read + std::io::Write {}
impl<T: std::io::Read + std::io::Write> ReadWrite for T {}

fn serve_one(
    io: &mut dyn ReadWrite,
    answer: &Mutex<Answer>,
    requests: &AtomicUsize,
    stalled: &AtomicUsize,
    release: &AtomicBool,
) {
    let mut request = Vec::new();
    let mut buf = [0_u8; 1024];
    while !contains(&request, b"\r\n\r\n") {
        match io.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        if request.len() > 16 * 1024 {
            return;
        }
    }
    assert!(request.starts_with(b"GET /.well-known/jwks.json "), "a GET");
    requests.fetch_add(1, Ordering::SeqCst);
    let answer = answer.lock().expect("answer").clone();
    let reply = match answer {
        Answer::Json(body) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Answer::Status(code) => {
            format!("HTTP/1.1 {code} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
        Answer::Stall => {
            stalled.fetch_add(1, Ordering::SeqCst);
            for _ in 0..3000 {
                if release.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            stalled.fetch_sub(1, Ordering::SeqCst);
            return;
        }
    };
    let _ = io.write_all(reply.as_bytes());
    let _ = io.flush();
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn jwks_json(keys: &[Value]) -> String {
    json!({ "keys": keys }).to_string()
}

/// A broker whose OAUTHBEARER listener fetches its JWKS from `url`, with `extra` settings.
fn broker_with_endpoint(url: &str, extra: &[(&str, &str)]) -> Broker {
    let prefix = "listener.name.sasl_plaintext.oauthbearer.";
    let mut builder = Broker::builder()
        .listener("SASL_PLAINTEXT")
        // One shard: a fetch that blocked a shard's loop would block every connection.
        .with("num.shards", "1")
        .with(
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "OAUTHBEARER",
        )
        .with(&format!("{prefix}sasl.oauthbearer.jwks.endpoint.url"), url)
        .with(&format!("{prefix}sasl.oauthbearer.expected.issuer"), ISSUER);
    for (k, v) in extra {
        builder = builder.with(k, v);
    }
    builder.start()
}

/// Runs `minikafka` with an OAUTHBEARER listener whose JWKS is `url` (and `extra` overrides)
/// and returns its stderr; it must exit without serving.
fn refused_start(dir: &Path, url: &str, extra: &[String]) -> String {
    let mut cmd = std::process::Command::new(common::minikafka_bin());
    cmd.args(["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0"])
        .args(["--override", "sasl.enabled.mechanisms=OAUTHBEARER"])
        .arg("--override")
        .arg(format!("sasl.oauthbearer.jwks.endpoint.url={url}"))
        .arg("--override")
        .arg(format!("log.dirs={}", dir.join("data").display()));
    for e in extra {
        cmd.arg("--override").arg(e);
    }
    let out = cmd.output().expect("minikafka runs");
    assert!(!out.status.success(), "{url}: started");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("sasl.oauthbearer.jwks.endpoint.url"),
        "{url}: {err}"
    );
    err
}

#[test]
fn an_http_jwks_is_fetched_at_startup_and_rotated_keys_after_the_refresh_interval() {
    bounded(LIMIT, || {
        let old = EcKey::new();
        let new = EcKey::new();
        let server = JwksServer::start(Answer::Json(jwks_json(&[old.jwk("old")])), None);
        let broker = broker_with_endpoint(
            &server.url,
            &[("sasl.oauthbearer.jwks.endpoint.refresh.ms", "200")],
        );
        assert!(server.requests() >= 1, "fetched at startup");
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        let token = new.token("new", &claims("bob"));
        assert!(!authenticates(&broker, &token), "not in the JWKS yet");
        // Rotation at the identity provider: the new key beside the old one; no restart.
        server.answer(Answer::Json(jwks_json(&[old.jwk("old"), new.jwk("new")])));
        await_accepted(&broker, &token, "the new key was never fetched");
        assert_accepted(&broker, &old.token("old", &claims("carol")));
    });
}

#[test]
fn a_failed_or_stalled_refresh_keeps_the_keys_and_blocks_no_connection() {
    bounded(LIMIT, || {
        let old = EcKey::new();
        let new = EcKey::new();
        let server = JwksServer::start(Answer::Json(jwks_json(&[old.jwk("old")])), None);
        let broker = broker_with_endpoint(
            &server.url,
            &[
                ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "100"),
                ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "20"),
                ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "100"),
            ],
        );
        // The endpoint fails: fetches are retried, the keys kept.
        server.answer(Answer::Status(500));
        let before = server.requests();
        server.wait_for("retries after a failed fetch", |s| {
            s.requests() >= before + 3
        });
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        // An oversized set is refused and the keys kept (I166).
        let filler = " ".repeat(1024 * 1024);
        server.answer(Answer::Json(format!(
            "{}{filler}",
            jwks_json(&[new.jwk("new")])
        )));
        let before = server.requests();
        server.wait_for("an oversized set fetched", |s| s.requests() >= before + 2);
        assert!(!authenticates(&broker, &new.token("new", &claims("bob"))));
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        // The endpoint stalls mid-fetch: the one shard still authenticates and serves.
        server.answer(Answer::Stall);
        server.wait_for("a fetch stalled", |s| s.stalled.load(Ordering::SeqCst) >= 1);
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        assert_accepted(&broker, &old.token("old", &claims("dave")));
        assert!(
            server.stalled.load(Ordering::SeqCst) >= 1,
            "served while the fetch was still stalled"
        );
        // The endpoint recovers: the stalled fetch fails, the retry gets the new set.
        server.answer(Answer::Json(jwks_json(&[new.jwk("new")])));
        server.release.store(true, Ordering::SeqCst);
        let token = new.token("new", &claims("bob"));
        await_accepted(&broker, &token, "the new key was never fetched");
        assert!(!authenticates(&broker, &old.token("old", &claims("alice"))));
    });
}

#[test]
fn an_https_jwks_is_trusted_through_the_jaas_truststore_and_startup_needs_the_keys() {
    bounded(LIMIT, || {
        let dir = tempfile::tempdir().expect("temp dir");
        // A self-signed certificate for 127.0.0.1, made here (no key material is committed).
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        let ca = dir.path().join("idp-ca.pem");
        std::fs::write(&ca, cert.pem()).expect("written");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server config");
        let ec = EcKey::new();
        let server = JwksServer::start(
            Answer::Json(jwks_json(&[ec.jwk("k1")])),
            Some(Arc::new(tls)),
        );
        let jaas = format!(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ssl.truststore.type=\"PEM\" ssl.truststore.location=\"{}\";",
            ca.display()
        );
        let broker = broker_with_endpoint(
            &server.url,
            &[(
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
                &jaas,
            )],
        );
        assert_accepted(&broker, &ec.token("k1", &claims("alice")));
        drop(broker);

        // Without the truststore the endpoint's certificate is not trusted: no keys, no start.
        let err = refused_start(dir.path(), &server.url, &[]);
        assert!(err.contains("cannot fetch"), "{err}");
        // An endpoint that refuses connections, answers an error, or sends more than 1 MiB.
        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        refused_start(dir.path(), &format!("http://127.0.0.1:{port}/jwks"), &[]);
        let plain = JwksServer::start(Answer::Status(404), None);
        let err = refused_start(dir.path(), &plain.url, &[]);
        assert!(err.contains("404"), "{err}");
        plain.answer(Answer::Json(format!(
            "{}{}",
            jwks_json(&[]),
            " ".repeat(1024 * 1024)
        )));
        let err = refused_start(dir.path(), &plain.url, &[]);
        assert!(err.contains("larger than"), "{err}");
    });
}

#[test]
fn a_key_published_after_startup_is_fetched_when_a_token_names_it() {
    bounded(LIMIT, || {
        let old = EcKey::new();
        let new = EcKey::new();
        let server = JwksServer::start(Answer::Json(jwks_json(&[old.jwk("old")])), None);
        // The scheduled refresh is an hour away (Kafka's default): only the token's unknown
        // `kid` can have the keys fetched (I187).
        let broker = broker_with_endpoint(&server.url, &[]);
        let before = server.requests();
        server.answer(Answer::Json(jwks_json(&[old.jwk("old"), new.jwk("new")])));
        assert_accepted(&broker, &new.token("new", &claims("bob")));
        assert_eq!(
            server.requests(),
            before + 1,
            "one fetch for the unknown kid"
        );
        // A known kid fetches nothing.
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        assert_accepted(&broker, &new.token("new", &claims("carol")));
        assert_eq!(server.requests(), before + 1, "no fetch for known kids");
    });
}

#[test]
fn a_burst_of_unknown_kids_fetches_the_keys_once_per_backoff_interval() {
    bounded(LIMIT, || {
        let old = EcKey::new();
        let stranger = EcKey::new();
        let server = JwksServer::start(Answer::Json(jwks_json(&[old.jwk("old")])), None);
        // At most one fetch for unknown kids per `retry.backoff.max.ms`: ten minutes here, so
        // the whole burst falls in one interval (the bound is counted on the server).
        let broker = Arc::new(broker_with_endpoint(
            &server.url,
            &[(
                "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
                "600000",
            )],
        ));
        let before = server.requests();
        let burst: Vec<_> = (0..32)
            .map(|i| {
                let broker = Arc::clone(&broker);
                let token = stranger.token(&format!("made-up-{i}"), &claims("mallory"));
                std::thread::spawn(move || authenticates(&broker, &token))
            })
            .collect();
        for client in burst {
            assert!(!client.join().expect("client thread"), "refused");
        }
        assert_eq!(
            server.requests(),
            before + 1,
            "32 unknown kids, one fetch in the interval"
        );
        assert!(!authenticates(
            &broker,
            &stranger.token("made-up-again", &claims("mallory"))
        ));
        assert_eq!(server.requests(), before + 1, "still one");
        assert_accepted(&broker, &old.token("old", &claims("alice")));
    });
}

#[test]
fn a_stalled_fetch_for_an_unknown_kid_holds_only_its_own_connection() {
    bounded(LIMIT, || {
        let old = EcKey::new();
        let new = EcKey::new();
        let server = JwksServer::start(Answer::Json(jwks_json(&[old.jwk("old")])), None);
        let broker = Arc::new(broker_with_endpoint(&server.url, &[]));
        server.answer(Answer::Stall);
        let waiting = {
            let broker = Arc::clone(&broker);
            let token = new.token("new", &claims("bob"));
            std::thread::spawn(move || authenticates(&broker, &token))
        };
        server.wait_for("the fetch for the unknown kid stalled", |s| {
            s.stalled.load(Ordering::SeqCst) >= 1
        });
        // The one shard authenticates and serves others while that connection waits.
        assert_accepted(&broker, &old.token("old", &claims("alice")));
        assert_accepted(&broker, &old.token("old", &claims("dave")));
        assert!(
            server.stalled.load(Ordering::SeqCst) >= 1,
            "served while the fetch was still stalled"
        );
        server.release.store(true, Ordering::SeqCst);
        assert!(
            !waiting.join().expect("client thread"),
            "the stalled fetch got no keys: refused"
        );
    });
}
