//! SASL over real TCP against the `minikafka` binary, as Kafka's clients speak it:
//! SaslHandshake v1 then SaslAuthenticate, with PLAIN users from a JAAS entry and SCRAM users
//! created with AlterUserScramCredentials (stored in the data directory, across a restart).
//! Also every refusal: a wrong password, an unknown user, an unknown mechanism, a request
//! before authentication, an oversized SASL frame. librdkafka (without OpenSSL here, so
//! PLAIN only) produces and consumes over SASL_PLAINTEXT; SCRAM with real clients is in
//! `tests/interop/test_security.py`.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::io::Write;

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::scram::{client_proof, ScramCredential, ScramMechanism};

use common::librdkafka::{
    consumer, create_topics, expect_all_ok, read_partition, Rec, TestProducer,
};
use common::sasl::{authenticate, handshake, metadata, offered_then_plain};
use common::typed::TypedClient;
use common::{bounded, Broker};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(90);
const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const RESOURCE_NOT_FOUND: i16 = 91;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;

fn sasl_broker() -> Broker {
    sasl_broker_with(&[])
}

fn sasl_broker_with(extra: &[(&str, &str)]) -> Broker {
    let mut builder = Broker::builder()
        .listener("SASL_PLAINTEXT")
        .with("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS);
    for (k, v) in extra {
        builder = builder.with(k, v);
    }
    builder.start()
}

/// The value of `series` on the broker's Prometheus endpoint at `addr`.
fn scrape(addr: std::net::SocketAddr, series: &str) -> Option<f64> {
    let mut stream = common::raw::connect(addr);
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .expect("scrape request");
    let mut page = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut page);
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// A PLAIN login; the handshake offers every enabled mechanism.
fn plain_login(client: &mut TypedClient, user: &str, password: &str) -> SaslAuthenticateResponse {
    let (offered, answer) = offered_then_plain(client, user, password);
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    answer
}

#[test]
fn plain_authenticates_then_serves_and_refuses_a_wrong_password() {
    bounded(LIMIT, || {
        let broker = sasl_broker();
        let addr = broker.listener_addr("SASL_PLAINTEXT");
        let mut ok = TypedClient::connect(addr);
        // ApiVersions is served before authentication (I47) and lists the SASL APIs.
        let versions: ApiVersionsResponse =
            ok.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        for key in [ApiKey::SaslHandshake, ApiKey::SaslAuthenticate] {
            assert!(versions.api_keys.iter().any(|k| k.api_key == key as i16));
        }
        let answer = plain_login(&mut ok, "alice", "alice-secret");
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        assert!(metadata(&mut ok).is_some(), "served after authentication");
        // A second handshake on an authenticated connection: ILLEGAL_SASL_STATE.
        assert_eq!(
            handshake(&mut ok, "PLAIN").expect("answered").error_code,
            ILLEGAL_SASL_STATE
        );

        for (user, password) in [("alice", "wrong"), ("mallory", "alice-secret")] {
            let mut bad = TypedClient::connect(addr);
            let answer = plain_login(&mut bad, user, password);
            assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
            assert_eq!(
                answer.error_message.as_deref(),
                Some("Authentication failed: Invalid username or password")
            );
            assert!(bad.is_closed_by_broker(), "closed after a failed login");
        }
        let log = broker.output();
        assert!(log.contains("authentication failed"), "{log}");
        assert!(!log.contains("alice-secret"), "a password in the log");
    });
}

#[test]
fn refusals_before_authentication_close_the_connection() {
    bounded(LIMIT, || {
        let metrics: std::net::SocketAddr = ([127, 0, 0, 1], common::free_port()).into();
        let broker = sasl_broker_with(&[("metrics.listener", &format!("http://{metrics}"))]);
        let addr = broker.listener_addr("SASL_PLAINTEXT");
        // A request other than ApiVersions and SASL before authentication: no answer.
        let mut early = TypedClient::connect(addr);
        assert!(
            metadata(&mut early).is_none(),
            "Metadata answered before auth"
        );

        let mut unknown = TypedClient::connect(addr);
        let hs = handshake(&mut unknown, "GSSAPI").expect("answered");
        assert_eq!(hs.error_code, UNSUPPORTED_SASL_MECHANISM);
        assert!(unknown.is_closed_by_broker());

        let mut out_of_order = TypedClient::connect(addr);
        let answer = authenticate(&mut out_of_order, b"\0alice\0alice-secret").expect("answered");
        assert_eq!(answer.error_code, ILLEGAL_SASL_STATE);
        assert!(out_of_order.is_closed_by_broker());

        // A frame larger than a SASL message may be (I40) closes before it is read whole.
        let mut huge = common::raw::connect(addr);
        let _ = huge.write_all(&(8 * 1024 * 1024_i32).to_be_bytes());
        let _ = huge.write_all(&[0u8; 1024]);
        let mut probe = [0u8; 1];
        let n = std::io::Read::read(&mut huge, &mut probe).unwrap_or(0);
        assert_eq!(n, 0, "an 8 MiB frame before authentication was not refused");

        // The PLAINTEXT listener still serves anyone, as User:ANONYMOUS.
        let mut plain = TypedClient::connect(broker.addr());
        assert!(metadata(&mut plain).is_some());
        let log = broker.output();
        assert!(log.contains("before authentication"), "{log}");
        // The three refusals are counted (the oversized frame is a frame error).
        assert_eq!(
            scrape(
                metrics,
                "minikafka_connection_errors_total{reason=\"authentication\"}"
            ),
            Some(3.0)
        );
    });
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn upsert(
    client: &mut TypedClient,
    user: &str,
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> AlterUserScramCredentialsResponse {
    let salt = b"minikafka-test-salt".to_vec();
    let mut u = ScramCredentialUpsertion::default();
    u.name = StrBytes::from_string(user.to_string());
    u.mechanism = if m == ScramMechanism::Sha256 { 1 } else { 2 };
    u.iterations = iterations;
    u.salted_password = Bytes::from(ScramCredential::salted_password(
        m,
        password,
        &salt,
        iterations.max(4096) as u32,
    ));
    u.salt = Bytes::from(salt);
    let mut request = AlterUserScramCredentialsRequest::default();
    request.upsertions = vec![u];
    client.call(ApiKey::AlterUserScramCredentials, 0, &request)
}

/// A full SCRAM exchange; the SaslAuthenticate error code of the final message.
fn scram_login(client: &mut TypedClient, m: ScramMechanism, user: &str, password: &str) -> i16 {
    assert_eq!(handshake(client, m.name()).expect("answered").error_code, 0);
    let first_bare = format!("n={user},r=clientnonce0123456789");
    let first = authenticate(client, format!("n,,{first_bare}").as_bytes()).expect("answered");
    if first.error_code != 0 {
        return first.error_code;
    }
    let server_first = String::from_utf8(first.auth_bytes.to_vec()).expect("utf8");
    let salt = b"minikafka-test-salt";
    assert!(
        server_first.contains(&format!("s={}", b64(salt))) && server_first.ends_with(",i=4096"),
        "{server_first}"
    );
    let nonce = server_first
        .strip_prefix("r=")
        .and_then(|r| r.split(',').next())
        .expect("nonce");
    assert!(nonce.starts_with("clientnonce0123456789") && nonce.len() > 30);
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let (proof, server_signature) = client_proof(m, password, salt, 4096, &auth_message);
    let last =
        authenticate(client, format!("{without_proof},p={proof}").as_bytes()).expect("answered");
    if last.error_code == 0 {
        assert_eq!(
            last.auth_bytes.as_ref(),
            format!("v={server_signature}").as_bytes()
        );
    }
    last.error_code
}

#[test]
fn scram_users_are_managed_by_the_admin_apis_stored_and_authenticate() {
    bounded(LIMIT, || {
        let mut broker = sasl_broker();
        let mut admin = TypedClient::connect(broker.addr());
        let created = upsert(
            &mut admin,
            "alice",
            ScramMechanism::Sha512,
            "s3cret-512",
            4096,
        );
        assert_eq!(created.results[0].error_code, 0);
        let weak = upsert(&mut admin, "bob", ScramMechanism::Sha256, "pw", 10);
        assert_eq!(weak.results[0].error_code, UNACCEPTABLE_CREDENTIAL);

        let described: DescribeUserScramCredentialsResponse = admin.call(
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default(),
        );
        assert_eq!(described.results.len(), 1);
        assert_eq!(described.results[0].user.as_str(), "alice");
        let info = &described.results[0].credential_infos;
        assert_eq!((info[0].mechanism, info[0].iterations), (2, 4096));

        // Stored salted and iterated, durably, never the password (I41, I46).
        let stored = std::fs::read_to_string(broker.data_dir().join("scram-credentials"))
            .expect("credentials file");
        assert!(stored.contains("SCRAM-SHA-512 salt=") && !stored.contains("s3cret"));
        broker.stop();
        broker.restart();

        let addr = broker.listener_addr("SASL_PLAINTEXT");
        let mut good = TypedClient::connect(addr);
        assert_eq!(
            scram_login(&mut good, ScramMechanism::Sha512, "alice", "s3cret-512"),
            0
        );
        assert!(metadata(&mut good).is_some());
        let mut wrong = TypedClient::connect(addr);
        assert_eq!(
            scram_login(&mut wrong, ScramMechanism::Sha512, "alice", "nope"),
            SASL_AUTHENTICATION_FAILED
        );
        assert!(wrong.is_closed_by_broker());
        let mut other_mechanism = TypedClient::connect(addr);
        assert_eq!(
            scram_login(
                &mut other_mechanism,
                ScramMechanism::Sha256,
                "alice",
                "s3cret-512"
            ),
            SASL_AUTHENTICATION_FAILED
        );

        // Deleting the credential ends its logins; deleting it again: RESOURCE_NOT_FOUND.
        let mut admin = TypedClient::connect(broker.addr());
        let mut deletion = ScramCredentialDeletion::default();
        deletion.name = StrBytes::from_static_str("alice");
        deletion.mechanism = 2;
        let mut request = AlterUserScramCredentialsRequest::default();
        request.deletions = vec![deletion];
        let deleted: AlterUserScramCredentialsResponse =
            admin.call(ApiKey::AlterUserScramCredentials, 0, &request);
        assert_eq!(deleted.results[0].error_code, 0);
        let again: AlterUserScramCredentialsResponse =
            admin.call(ApiKey::AlterUserScramCredentials, 0, &request);
        assert_eq!(again.results[0].error_code, RESOURCE_NOT_FOUND);
        let mut gone = TypedClient::connect(addr);
        assert_eq!(
            scram_login(&mut gone, ScramMechanism::Sha512, "alice", "s3cret-512"),
            SASL_AUTHENTICATION_FAILED
        );
    });
}

/// librdkafka over SASL_PLAINTEXT with PLAIN: it authenticates, produces and consumes, and
/// Metadata tells it the SASL listener's address (else it would reconnect to PLAINTEXT).
#[test]
fn librdkafka_produces_and_consumes_over_sasl_plaintext_with_plain() {
    bounded(LIMIT, || {
        let broker = sasl_broker();
        create_topics(&broker, &[("secured", 1)]);
        let addr = broker.listener_addr("SASL_PLAINTEXT").to_string();
        let sasl = [
            ("bootstrap.servers", addr.as_str()),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "alice-secret"),
        ];
        let mut producer = TestProducer::new(&broker, &sasl);
        let acks = producer.produce_all(&[Rec::new("secured", Some(0), b"over sasl")]);
        assert_eq!(expect_all_ok(&acks), [(0, 0)]);
        let reader = consumer(&broker, &sasl);
        let got = read_partition(&reader, "secured", 0, rdkafka::Offset::Beginning, 1);
        assert_eq!(rdkafka::Message::payload(&got[0]), Some(&b"over sasl"[..]));
        let log = broker.output();
        assert!(log.contains("authenticated"), "{log}");

        // With a wrong password librdkafka gets no metadata: the broker refused it.
        let wrong = [
            ("bootstrap.servers", addr.as_str()),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "wrong"),
        ];
        let refused = consumer(&broker, &wrong);
        let metadata = rdkafka::consumer::Consumer::fetch_metadata(
            &refused,
            Some("secured"),
            std::time::Duration::from_secs(3),
        );
        assert!(metadata.is_err(), "metadata with a wrong password");
    });
}
