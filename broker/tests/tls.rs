//! TLS over real TCP against the `minikafka` binary: SSL and SASL_SSL listeners served with
//! rustls (I90), the principal of a client certificate (I92) checked by ACLs, and what a TLS
//! listener refuses: a PLAINTEXT client, garbage, a truncated ClientHello, a client without a
//! certificate where one is required, and settings that cannot serve TLS (at startup, I91).
//!
//! The client is ours (`minikafka-client` over smol, rustls on its side too). The CA, the
//! broker's certificate (for 127.0.0.1 and localhost) and the client certificates are made at
//! test time with rcgen; no key material is committed. librdkafka over SSL and SASL_SSL is in
//! `tests/interop/test_security.py` (the `rdkafka` crate here is built without OpenSSL).
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_client::acls::{AclBinding, Operation, PatternType, Permission, ResourceType};
use minikafka_client::admin::Admin;
use minikafka_client::configs::{ConfigChange, ConfigResource};
use minikafka_client::connection::{Connection, ConnectionConfig};
use minikafka_client::sasl::SaslConfig;
use minikafka_client::tls::{MaybeTls, TlsConfig, TlsConnector};
use minikafka_core::auth::scram::ScramMechanism;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

use common::librdkafka::TEST_LIMIT;
use common::{bounded, Broker};

const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const TOPIC_DENIED: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();

type Stream = MaybeTls<smol::net::TcpStream>;

/// The password of the PKCS#12 stores the tests make.
const P12_PASSWORD: &str = "p12-secret";

/// A CA and the certificates it signed, as PEM files in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "minikafka test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let ca = params.self_signed(&ca_key).expect("CA");
        let pki = Pki {
            dir: tempfile::tempdir().expect("tempdir"),
            ca,
            ca_key,
        };
        std::fs::write(pki.path("ca.pem"), pki.ca.pem()).expect("write CA");
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Signs a certificate for `sans` with subject `CN=<cn>,O=test` (usable by a server and a
    /// client); writes `<file>.crt`, `<file>.key` and `<file>.pem` (key then chain, as
    /// `ssl.keystore.location` holds them).
    fn issue(&self, file: &str, cn: &str, sans: &[&str]) {
        let sans: Vec<String> = sans.iter().map(|s| s.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(sans).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "test");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .expect("sign");
        // The same key and chain as a PKCS#12 store (ssl.keystore.type=PKCS12, I161).
        let entry = p12_keystore::PrivateKeyChain::new(
            key.serialize_der(),
            b"1",
            [
                p12_keystore::Certificate::from_der(cert.der()).expect("leaf"),
                p12_keystore::Certificate::from_der(self.ca.der()).expect("CA"),
            ],
        );
        let mut store = p12_keystore::KeyStore::new();
        store.add_entry(file, p12_keystore::KeyStoreEntry::PrivateKeyChain(entry));
        let p12 = store.writer(P12_PASSWORD).write().expect("PKCS#12");
        std::fs::write(self.path(&format!("{file}.p12")), p12).expect("write");
        let (cert, key) = (cert.pem(), key.serialize_pem());
        std::fs::write(self.path(&format!("{file}.crt")), &cert).expect("write");
        std::fs::write(self.path(&format!("{file}.key")), &key).expect("write");
        std::fs::write(self.path(&format!("{file}.pem")), format!("{key}{cert}")).expect("write");
    }

    /// A client that trusts this CA and, for mutual TLS, presents `<file>.crt`.
    fn client(&self, certificate: Option<&str>) -> TlsConnector {
        let file = |f: &str, ext: &str| self.path(&format!("{f}.{ext}"));
        let cert = certificate.map(|f| file(f, "crt"));
        let key = certificate.map(|f| file(f, "key"));
        let config = TlsConfig::from_files(
            &self.path("ca.pem").to_string_lossy(),
            cert.as_deref().map(|p| p.to_str().expect("utf-8 path")),
            key.as_deref().map(|p| p.to_str().expect("utf-8 path")),
        )
        .expect("client PEM files");
        TlsConnector::new(&config).expect("client TLS config")
    }
}

fn text(path: &Path) -> String {
    path.to_str().expect("utf-8 path").to_string()
}

/// A PKI with a broker certificate for 127.0.0.1/localhost and clients `CN=a` and `CN=b`.
fn pki() -> Pki {
    let pki = Pki::new();
    pki.issue("broker", "broker", &["127.0.0.1", "localhost"]);
    pki.issue("a", "a", &[]);
    pki.issue("b", "b", &[]);
    pki
}

async fn tcp(addr: SocketAddr) -> smol::net::TcpStream {
    smol::net::TcpStream::connect(addr).await.expect("connect")
}

/// A client connection: TLS with `tls` (when given), then SASL (when given), then ApiVersions.
async fn connect(
    addr: SocketAddr,
    tls: Option<&TlsConnector>,
    sasl: Option<SaslConfig>,
) -> minikafka_client::error::Result<Connection<Stream>> {
    let stream = match tls {
        Some(tls) => tls.connect("127.0.0.1", tcp(addr).await).await?,
        None => MaybeTls::Plain(tcp(addr).await),
    };
    let config = ConnectionConfig {
        sasl,
        ..ConnectionConfig::default()
    };
    Connection::connect(stream, config).await
}

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

/// Produces one record `value` to partition 0 of `topic`: the partition's error code and
/// base offset.
async fn produce(conn: &mut Connection<Stream>, topic: &str, value: &[u8]) -> (i16, i64) {
    let mut builder = BatchBuilder::new();
    builder.push(&NewRecord {
        timestamp_ms: 1_700_000_000_000,
        value: Some(value),
        ..NewRecord::default()
    });
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(builder.build(Offset(0)).into());
    let mut t = TopicProduceData::default();
    t.name = TopicName(s(topic));
    t.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    let response = conn.request(&request).await.expect("produce answered");
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Fetches partition 0 of `topic` from offset 0: the error code and the record bytes.
async fn fetch(conn: &mut Connection<Stream>, topic: &str) -> (i16, Vec<u8>) {
    let mut partition = fetch_request::FetchPartition::default();
    partition.partition = 0;
    partition.partition_max_bytes = 1 << 20;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = 5_000;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response = conn.request(&request).await.expect("fetch answered");
    let p = &response.responses[0].partitions[0];
    let records = p.records.as_ref().map(|r| r.to_vec()).unwrap_or_default();
    (p.error_code, records)
}

/// Whether `needle` occurs in `haystack`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The PLAINTEXT listener's admin client.
async fn admin(broker: &Broker) -> Admin<Stream> {
    Admin::new(
        connect(broker.addr(), None, None)
            .await
            .expect("plaintext connection"),
    )
}

#[test]
fn ssl_serves_produce_and_fetch_and_the_keystore_may_be_inline() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.type", "PEM")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .listener("INLINE")
            .with(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,INLINE:SSL",
            )
            // Kafka's inline PEM, as a properties line continued with `\` leaves it: one line.
            .with(
                "listener.name.inline.ssl.keystore.certificate.chain",
                &std::fs::read_to_string(pki.path("broker.crt"))
                    .expect("read")
                    .replace('\n', " "),
            )
            .with(
                "listener.name.inline.ssl.keystore.key",
                &std::fs::read_to_string(pki.path("broker.key"))
                    .expect("read")
                    .replace('\n', " "),
            )
            .start();
        let tls = pki.client(None);
        smol::block_on(async {
            admin(&broker)
                .await
                .create_topic("secure", 1, &[])
                .await
                .expect("create topic");
            for (i, listener) in ["SSL", "INLINE"].into_iter().enumerate() {
                let mut conn = connect(broker.listener_addr(listener), Some(&tls), None)
                    .await
                    .expect("TLS connection");
                let value = format!("over tls {listener}");
                let (code, offset) = produce(&mut conn, "secure", value.as_bytes()).await;
                assert_eq!((code, offset), (0, i as i64), "{listener}");
                let (code, records) = fetch(&mut conn, "secure").await;
                assert_eq!(code, 0);
                assert!(contains(&records, value.as_bytes()), "{listener}");
            }
        });
        // The broker's certificate names 127.0.0.1 and localhost, nothing else: a client that
        // connects by another name refuses it.
        smol::block_on(async {
            let stream = tcp(broker.listener_addr("SSL")).await;
            assert!(tls.connect("elsewhere.example", stream).await.is_err());
        });
    });
}

/// Requests and answers many TLS records long, each spanning several of the broker's 64 KiB
/// socket reads (I188): every byte arrives, in order, both ways.
#[test]
fn large_requests_and_answers_cross_records_and_reads_intact_over_ssl() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .start();
        let tls = pki.client(None);
        // Incompressible values of 300,000 bytes (xorshift), unlike each other.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let values: Vec<Vec<u8>> = (0..3)
            .map(|_| {
                (0..300_000)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect()
            })
            .collect();
        smol::block_on(async {
            admin(&broker)
                .await
                .create_topic("large", 1, &[])
                .await
                .expect("create topic");
            let mut conn = connect(broker.listener_addr("SSL"), Some(&tls), None)
                .await
                .expect("TLS connection");
            for (i, value) in values.iter().enumerate() {
                let (code, offset) = produce(&mut conn, "large", value).await;
                assert_eq!((code, offset), (0, i as i64));
            }
            // One answer of about 900 KB: more than rustls's 64 KiB outgoing buffer.
            let (code, records) = fetch(&mut conn, "large").await;
            assert_eq!(code, 0);
            assert!(records.len() > 900_000, "{} bytes fetched", records.len());
            for (i, value) in values.iter().enumerate() {
                assert!(contains(&records, value), "value {i} intact");
            }
        });
    });
}

/// A stream whose writes can be held back (`Pending`, as a full socket answers) once the
/// handshake is done.
struct Gate {
    inner: smol::net::TcpStream,
    held: std::rc::Rc<std::cell::Cell<bool>>,
}

impl futures::AsyncRead for Gate {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl futures::AsyncWrite for Gate {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.held.get() {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.held.get() {
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// I192: our client encrypts a request of up to `SEND_BUFFER_BYTES` whole, so that it reaches the
/// socket in one vectored write rather than in 64 KiB pieces (rustls's default buffer; a
/// 100 KB Produce request took two sends), and holds no more than that while the socket
/// takes nothing (docs/perf-log/2026-12-06-tls-unbuffered.md).
#[test]
fn our_client_encrypts_a_large_request_whole_and_holds_at_most_its_send_buffer() {
    use futures::AsyncWrite as _;
    use minikafka_client::tls::SEND_BUFFER_BYTES;
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .start();
        let tls = pki.client(None);
        smol::block_on(async {
            let held = std::rc::Rc::new(std::cell::Cell::new(false));
            let gate = Gate {
                inner: tcp(broker.listener_addr("SSL")).await,
                held: held.clone(),
            };
            let mut stream = tls.connect("127.0.0.1", gate).await.expect("handshake");
            // The socket now takes nothing: what a write is accepted is what rustls holds.
            held.set(true);
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            let mut write = |len: usize| match std::pin::Pin::new(&mut stream)
                .poll_write(&mut cx, &vec![7u8; len])
            {
                std::task::Poll::Ready(Ok(n)) => n,
                other => panic!("a write of {len} bytes: {other:?}"),
            };
            assert_eq!(write(300_000), 300_000, "a 300 KB request is taken whole");
            let more = write(2 * SEND_BUFFER_BYTES);
            assert!(
                more > 0 && 300_000 + more <= SEND_BUFFER_BYTES,
                "held beyond the send buffer: {more} more bytes"
            );
            let pending = std::pin::Pin::new(&mut stream).poll_write(&mut cx, &[7u8; 1000]);
            assert!(
                pending.is_pending(),
                "a full buffer takes nothing: {pending:?}"
            );
        });
    });
}

#[test]
fn plaintext_garbage_and_truncated_hellos_are_closed_and_stalled_handshakes_block_nobody() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .start();
        let addr = broker.listener_addr("SSL");
        // A Kafka client speaking PLAINTEXT to the TLS port: ApiVersions v3.
        let api_versions = common::raw::request(18, 3, 1, &[0, 0, 0]);
        common::raw::assert_closed_after(addr, "PLAINTEXT ApiVersions", &api_versions, false);
        common::raw::assert_closed_after(addr, "HTTP", b"GET / HTTP/1.1\r\n\r\n", false);
        common::raw::assert_closed_after(addr, "zeros", &[0u8; 300], false);
        // A handshake record announcing 16 KiB that stops after a few bytes, then EOF.
        let truncated = [
            0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x3f, 0xfc, 0x03, 0x03,
        ];
        common::raw::assert_closed_after(addr, "truncated ClientHello", &truncated, true);
        // A record length beyond TLS's limit.
        let oversized = [0x16, 0x03, 0x03, 0xff, 0xff, 0x01];
        common::raw::assert_closed_after(addr, "oversized record", &oversized, false);

        // Stalled handshakes (open, half a record, then nothing) wait for their timeout on
        // their own; every shard still serves a real client meanwhile.
        let stalled: Vec<std::net::TcpStream> = (0..64)
            .map(|_| {
                let mut s = common::raw::connect(addr);
                std::io::Write::write_all(&mut s, &truncated).expect("write");
                s
            })
            .collect();
        let tls = pki.client(None);
        smol::block_on(async {
            admin(&broker)
                .await
                .create_topic("stall", 1, &[])
                .await
                .expect("create topic");
            for _ in 0..4 {
                let mut conn = connect(addr, Some(&tls), None)
                    .await
                    .expect("served while others stall");
                let (code, _) = produce(&mut conn, "stall", b"x").await;
                assert_eq!(code, 0);
            }
        });
        drop(stalled);
        let log = broker.output();
        assert!(log.contains("TLS handshake failed"), "{log}");
    });
}

#[test]
fn sasl_ssl_authenticates_scram_inside_tls() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SASL_SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .with("sasl.enabled.mechanisms", "SCRAM-SHA-512")
            .start();
        let addr = broker.listener_addr("SASL_SSL");
        let tls = pki.client(None);
        let scram = |password: &str| SaslConfig {
            mechanism: "SCRAM-SHA-512".into(),
            username: "alice".into(),
            password: password.into(),
        };
        smol::block_on(async {
            admin(&broker)
                .await
                .upsert_scram_user("alice", ScramMechanism::Sha512, "alice-secret", 4096)
                .await
                .expect("create SCRAM user");
            admin(&broker)
                .await
                .create_topic("scram", 1, &[])
                .await
                .expect("create topic");
            let mut conn = connect(addr, Some(&tls), Some(scram("alice-secret")))
                .await
                .expect("SCRAM over TLS");
            assert_eq!(produce(&mut conn, "scram", b"hello").await.0, 0);
            let (code, records) = fetch(&mut conn, "scram").await;
            assert_eq!(code, 0);
            assert!(contains(&records, b"hello"));
            assert!(
                connect(addr, Some(&tls), Some(scram("wrong")))
                    .await
                    .is_err(),
                "a wrong password is refused"
            );
            // SASL without TLS on the SASL_SSL port: closed in the handshake.
            assert!(connect(addr, None, Some(scram("alice-secret")))
                .await
                .is_err());
        });
    });
}

#[test]
fn client_certificates_name_the_principal_and_acls_apply_to_it() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .listener("OPTIONAL")
            .with(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,OPTIONAL:SSL",
            )
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .with("ssl.truststore.type", "PEM")
            .with("ssl.truststore.location", &text(&pki.path("ca.pem")))
            .with("listener.name.ssl.ssl.client.auth", "required")
            .with("listener.name.optional.ssl.client.auth", "requested")
            .with("authorizer.class.name", STANDARD)
            // The PLAINTEXT admin and a certificate-less client are User:ANONYMOUS.
            .with("super.users", "User:ANONYMOUS")
            .start();
        smol::block_on(async {
            let mut admin = admin(&broker).await;
            admin.create_topic("orders", 1, &[]).await.expect("create");
            let allow = |operation| AclBinding {
                resource_type: ResourceType::Topic,
                pattern_type: PatternType::Literal,
                resource_name: "orders".into(),
                // Kafka's default principal builder: the subject, RFC 2253.
                principal: "User:CN=a,O=test".into(),
                host: "*".into(),
                operation,
                permission: Permission::Allow,
            };
            admin
                .create_acls(&[allow(Operation::Write), allow(Operation::Describe)])
                .await
                .expect("create ACLs");

            let a = pki.client(Some("a"));
            let b = pki.client(Some("b"));
            let none = pki.client(None);
            for listener in ["SSL", "OPTIONAL"] {
                let addr = broker.listener_addr(listener);
                let mut conn_a = connect(addr, Some(&a), None).await.expect("CN=a");
                assert_eq!(
                    produce(&mut conn_a, "orders", b"a").await.0,
                    0,
                    "{listener}"
                );
                let mut conn_b = connect(addr, Some(&b), None).await.expect("CN=b");
                assert_eq!(
                    produce(&mut conn_b, "orders", b"b").await.0,
                    TOPIC_DENIED,
                    "{listener}"
                );
            }
            // required: no certificate, no connection.
            assert!(
                connect(broker.listener_addr("SSL"), Some(&none), None)
                    .await
                    .is_err(),
                "required refuses a client without a certificate"
            );
            // requested: served as User:ANONYMOUS (a super user here).
            let mut anonymous = connect(broker.listener_addr("OPTIONAL"), Some(&none), None)
                .await
                .expect("requested serves a client without a certificate");
            assert_eq!(produce(&mut anonymous, "orders", b"anon").await.0, 0);
        });
        // A certificate another CA signed is refused even where one is only requested.
        let other = Pki::new();
        other.issue("a", "a", &[]);
        let file = |name: &str| text(&other.path(name));
        let foreign = TlsConnector::new(
            &TlsConfig::from_files(
                &text(&pki.path("ca.pem")),
                Some(&file("a.crt")),
                Some(&file("a.key")),
            )
            .expect("PEM files"),
        )
        .expect("client TLS config");
        smol::block_on(async {
            assert!(
                connect(broker.listener_addr("OPTIONAL"), Some(&foreign), None)
                    .await
                    .is_err()
            );
        });
    });
}

#[test]
fn principal_mapping_rules_name_the_principal_acls_grant() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .with("ssl.truststore.location", &text(&pki.path("ca.pem")))
            .with("ssl.client.auth", "required")
            // Kafka's syntax: the first rule whose pattern matches the whole subject wins;
            // CN=b,O=test matches none and is refused (I140).
            .with(
                "listener.name.ssl.ssl.principal.mapping.rules",
                "RULE:^CN=(a),O=(.*?)$/$1@$2/U, RULE:^CN=c,.*$/c/",
            )
            .with("authorizer.class.name", STANDARD)
            .with("super.users", "User:ANONYMOUS")
            .start();
        smol::block_on(async {
            let mut admin = admin(&broker).await;
            admin.create_topic("orders", 1, &[]).await.expect("create");
            let allow = |principal: &str, operation| AclBinding {
                resource_type: ResourceType::Topic,
                pattern_type: PatternType::Literal,
                resource_name: "orders".into(),
                principal: principal.into(),
                host: "*".into(),
                operation,
                permission: Permission::Allow,
            };
            admin
                .create_acls(&[
                    allow("User:A@TEST", Operation::Write),
                    allow("User:A@TEST", Operation::Describe),
                    // The unmapped subject is not who the client is any more.
                    allow("User:CN=b,O=test", Operation::Write),
                    allow("User:CN=b,O=test", Operation::Describe),
                ])
                .await
                .expect("create ACLs");
            let addr = broker.listener_addr("SSL");
            let mut conn_a = connect(addr, Some(&pki.client(Some("a"))), None)
                .await
                .expect("CN=a maps to A@TEST");
            assert_eq!(produce(&mut conn_a, "orders", b"a").await.0, 0);
            assert!(
                connect(addr, Some(&pki.client(Some("b"))), None)
                    .await
                    .is_err(),
                "a subject no rule maps is refused"
            );
        });
        // Without the ACL for the mapped name the same certificate is denied: the grant above
        // is what let it write.
        let other = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .with("ssl.truststore.location", &text(&pki.path("ca.pem")))
            .with("ssl.client.auth", "required")
            .with(
                "ssl.principal.mapping.rules",
                "RULE:^CN=(a),O=(.*?)$/$1@$2/L,DEFAULT",
            )
            .with("authorizer.class.name", STANDARD)
            .with("super.users", "User:ANONYMOUS")
            .start();
        smol::block_on(async {
            let mut admin = admin(&other).await;
            admin.create_topic("orders", 1, &[]).await.expect("create");
            let addr = other.listener_addr("SSL");
            let mut conn_a = connect(addr, Some(&pki.client(Some("a"))), None)
                .await
                .expect("CN=a maps to a@test");
            assert_eq!(produce(&mut conn_a, "orders", b"a").await.0, TOPIC_DENIED);
        });
    });
}

#[test]
fn settings_that_cannot_serve_tls_stop_the_broker_at_startup() {
    let pki = pki();
    let enc = pki.path("encrypted.pem");
    std::fs::write(
        &enc,
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
    )
    .expect("write");
    let keystore = format!("ssl.keystore.location={}", text(&pki.path("broker.pem")));
    let p12 = format!("ssl.keystore.location={}", text(&pki.path("broker.p12")));
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![], "ssl.keystore.location"),
        (
            vec![keystore.clone(), "ssl.keystore.type=JKS".into()],
            "only PEM",
        ),
        (
            vec!["ssl.keystore.location=/nonexistent/broker.pem".into()],
            "cannot read /nonexistent/broker.pem",
        ),
        (
            vec![format!("ssl.keystore.location={}", text(&enc))],
            "encrypted private keys are not supported",
        ),
        (
            vec![format!(
                "ssl.keystore.location={}",
                text(&pki.path("broker.crt"))
            )],
            "no private key",
        ),
        (
            vec![keystore.clone(), "ssl.client.auth=required".into()],
            "ssl.truststore.location",
        ),
        (
            vec![keystore.clone(), "ssl.enabled.protocols=TLSv1.1".into()],
            "TLSv1.1 is not supported",
        ),
        (
            vec![
                format!(
                    "ssl.keystore.certificate.chain={}",
                    std::fs::read_to_string(pki.path("a.crt")).expect("read")
                ),
                format!(
                    "ssl.keystore.key={}",
                    std::fs::read_to_string(pki.path("broker.key")).expect("read")
                ),
            ],
            "does not fit",
        ),
        (
            vec![
                keystore.clone(),
                "listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1".into(),
            ],
            "listener.name.ssl.ssl.principal.mapping.rules",
        ),
        (
            vec![p12.clone(), "ssl.keystore.type=PKCS12".into()],
            "needs ssl.keystore.password",
        ),
        (
            vec![
                p12.clone(),
                "ssl.keystore.type=PKCS12".into(),
                "ssl.keystore.password=not-the-password".into(),
            ],
            "cannot open the PKCS12 store",
        ),
        (
            vec![
                p12.clone(),
                "ssl.keystore.type=PKCS12".into(),
                format!("ssl.keystore.password={P12_PASSWORD}"),
                "ssl.key.password=another-password".into(),
            ],
            "a password of its own",
        ),
        (
            // A PEM file is not a PKCS#12 store.
            vec![
                keystore.clone(),
                "ssl.keystore.type=PKCS12".into(),
                format!("ssl.keystore.password={P12_PASSWORD}"),
            ],
            "cannot open the PKCS12 store",
        ),
    ];
    for (settings, expected) in cases {
        let mut command = std::process::Command::new(common::minikafka_bin());
        command.args([
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            "--override",
            "schema.registry.listeners=",
        ]);
        for s in &settings {
            command.args(["--override", s]);
        }
        let data = tempfile::tempdir().expect("tempdir");
        command.args(["--override", &format!("log.dirs={}", text(data.path()))]);
        let out = command.output().expect("run minikafka");
        assert!(!out.status.success(), "{settings:?} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{settings:?}: {stderr}");
        assert!(
            !stderr.contains("PRIVATE KEY-----"),
            "a key echoed: {stderr}"
        );
        assert!(
            !stderr.contains(P12_PASSWORD) && !stderr.contains("not-the-password"),
            "a password echoed: {stderr}"
        );
    }
}

/// A TLS connection and the subject of the certificate the broker presented on it.
async fn connect_seeing(addr: SocketAddr, tls: &TlsConnector) -> (String, Connection<Stream>) {
    let stream = tls
        .connect("127.0.0.1", tcp(addr).await)
        .await
        .expect("TLS handshake");
    let MaybeTls::Tls(ref inner) = stream else {
        panic!("not a TLS connection");
    };
    let chain = inner
        .get_ref()
        .1
        .peer_certificates()
        .expect("server certificate");
    let subject = minikafka_broker::server::tls::subject_rfc2253(&chain[0]).expect("subject");
    let conn = Connection::connect(stream, ConnectionConfig::default())
        .await
        .expect("ApiVersions");
    (subject, conn)
}

#[test]
fn a_keystore_altered_at_run_time_serves_new_handshakes_and_a_bad_one_is_refused() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        let location = "listener.name.ssl.ssl.keystore.location";
        let mut broker = Broker::builder()
            .listener("SSL")
            .with("node.id", "1")
            .with("ssl.keystore.location", &text(&pki.path("broker.pem")))
            .start();
        let addr = broker.listener_addr("SSL");
        let client = pki.client(None);
        let set = |key: &str, value: &str| vec![ConfigChange::Set(key.into(), value.into())];
        let this_broker = ConfigResource::Broker(Some(1));
        smol::block_on(async {
            let mut admin = admin(&broker).await;
            admin.create_topic("orders", 1, &[]).await.expect("create");
            let (subject, mut old) = connect_seeing(addr, &client).await;
            assert_eq!(subject, "CN=broker,O=test");

            // A second certificate, picked up by the next handshake (I145).
            pki.issue("broker2", "broker2", &["127.0.0.1", "localhost"]);
            let second = text(&pki.path("broker2.pem"));
            admin
                .alter_configs(&this_broker, &set("ssl.keystore.location", &second), false)
                .await
                .expect("alter the keystore");
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker2,O=test");
            // The open connection keeps its own and is still served.
            assert_eq!(produce(&mut old, "orders", b"old").await.0, 0);

            // A bad file is refused before anything changes (I144).
            let bad = pki.path("bad.pem");
            std::fs::write(&bad, "not a keystore").expect("write");
            let refused = admin
                .alter_configs(&this_broker, &set(location, &text(&bad)), false)
                .await
                .expect_err("a file without a key");
            let why = format!("{refused}");
            assert!(why.contains("keystore in force is kept"), "{why}");
            let missing = admin
                .alter_configs(&this_broker, &set(location, "/nonexistent.pem"), true)
                .await
                .expect_err("a missing file");
            assert!(format!("{missing}").contains("cannot read"), "{missing}");
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker2,O=test");

            // Validate-only changes nothing; the cluster default and mixed requests are refused.
            admin
                .alter_configs(
                    &this_broker,
                    &set(location, &text(&pki.path("broker.pem"))),
                    true,
                )
                .await
                .expect("validate only");
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker2,O=test");
            assert!(admin
                .alter_configs(
                    &ConfigResource::Broker(None),
                    &set(location, &second),
                    false
                )
                .await
                .is_err());
            let mut mixed = set(location, &second);
            mixed.push(ConfigChange::Set("log.retention.ms".into(), "1000".into()));
            assert!(admin
                .alter_configs(&this_broker, &mixed, false)
                .await
                .is_err());

            // A certificate renewed in place: the same setting to the same path again is read
            // again.
            pki.issue("broker2", "broker3", &["127.0.0.1", "localhost"]);
            admin
                .alter_configs(&this_broker, &set("ssl.keystore.location", &second), false)
                .await
                .expect("re-read");
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker3,O=test");
        });
        // I180: the altered location was stored, as Kafka stores a dynamic broker config: a
        // restart serves it, not the static one.
        assert!(broker.stop().success());
        broker.restart();
        let addr = broker.listener_addr("SSL");
        smol::block_on(async {
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker3,O=test");
        });
        // A stored keystore that no longer loads is logged; the static one serves.
        std::fs::remove_file(pki.path("broker2.pem")).expect("removed");
        assert!(broker.stop().success());
        broker.restart();
        let addr = broker.listener_addr("SSL");
        smol::block_on(async {
            assert_eq!(connect_seeing(addr, &client).await.0, "CN=broker,O=test");
        });
        assert!(
            broker.output().contains("do not load"),
            "{}",
            broker.output()
        );
    });
}

#[test]
fn pkcs12_keystores_and_truststores_serve_tls_and_mutual_tls() {
    bounded(TEST_LIMIT, || {
        let pki = pki();
        // The keystore written by openssl too (a foreign writer: PBES2/AES-256, HMAC-SHA256).
        let openssl = std::process::Command::new("openssl")
            .args(["pkcs12", "-export", "-passout"])
            .arg(format!("pass:{P12_PASSWORD}"))
            .args(["-inkey", &text(&pki.path("broker.key"))])
            .args(["-in", &text(&pki.path("broker.crt"))])
            .args(["-certfile", &text(&pki.path("ca.pem"))])
            .args(["-out", &text(&pki.path("broker-openssl.p12"))])
            .output()
            .expect("run openssl");
        assert!(openssl.status.success(), "{openssl:?}");
        // The truststore written by Java's keytool (a trusted-certificate entry).
        let keytool = std::process::Command::new("keytool")
            .args([
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-storetype",
                "PKCS12",
            ])
            .args(["-file", &text(&pki.path("ca.pem"))])
            .args(["-keystore", &text(&pki.path("ca-keytool.p12"))])
            .args(["-storepass", P12_PASSWORD])
            .output()
            .expect("run keytool");
        assert!(keytool.status.success(), "{keytool:?}");
        let broker = Broker::builder()
            .listener("SSL")
            .with("ssl.keystore.type", "PKCS12")
            .with(
                "ssl.keystore.location",
                &text(&pki.path("broker-openssl.p12")),
            )
            .with("ssl.keystore.password", P12_PASSWORD)
            .with("ssl.key.password", P12_PASSWORD)
            .listener("MTLS")
            .with(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            )
            .with("listener.name.mtls.ssl.keystore.type", "PKCS12")
            .with(
                "listener.name.mtls.ssl.keystore.location",
                &text(&pki.path("broker.p12")),
            )
            .with("listener.name.mtls.ssl.keystore.password", P12_PASSWORD)
            .with("listener.name.mtls.ssl.truststore.type", "PKCS12")
            .with(
                "listener.name.mtls.ssl.truststore.location",
                &text(&pki.path("ca-keytool.p12")),
            )
            .with("listener.name.mtls.ssl.truststore.password", P12_PASSWORD)
            .with("listener.name.mtls.ssl.client.auth", "required")
            .start();
        smol::block_on(async {
            // The SSL listener presents the broker certificate from the openssl store.
            // (connect_seeing also completed ApiVersions over it.)
            let (subject, _conn) =
                connect_seeing(broker.listener_addr("SSL"), &pki.client(None)).await;
            assert_eq!(subject, "CN=broker,O=test");
            // The mutual-TLS listener trusts the CA of its PKCS12 truststore: a client with
            // a certificate it signed is served, one without is refused in the handshake.
            let mtls = broker.listener_addr("MTLS");
            let (subject, _conn) = connect_seeing(mtls, &pki.client(Some("a"))).await;
            assert_eq!(subject, "CN=broker,O=test");
            assert!(connect(mtls, Some(&pki.client(None)), None).await.is_err());
        });
    });
}
