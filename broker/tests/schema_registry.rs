//! The built-in schema registry end to end: the real `minikafka` binary, its REST API over
//! real HTTP on 127.0.0.1 (`schema.registry.listeners=http://127.0.0.1:0`, the bound address
//! read from the line the broker prints), its `_schemas` topic on disk.
//!
//! Contract:
//! - Register, read, look up: Confluent's bodies, status codes and error codes (40401,
//!   40403, 409, 42202, …); the same schema under two subjects has one id (I52).
//! - Compatibility: a BACKWARD-breaking change is answered 409 and stores nothing; an
//!   allowed evolution gets the next id.
//! - Deletes: a permanent delete before a soft one is refused (40405); soft hides the
//!   subject, permanent removes it, and both survive a restart (I55).
//! - Ids are stable across a clean restart and across kill -9 (I50, I53, I54, I57): every answered
//!   registration is replayed, and new ids continue after the highest.
//! - Hostile HTTP costs only its connection (I59): garbage, huge bodies, deep JSON, slow and
//!   excess connections; the registry keeps answering.
//! - Hostile records in `_schemas` are skipped with a log line at startup, never a crash (I58).
//! - Chunked request bodies are read within the same body bound (I128): a chunked
//!   registration works; an oversized chunked body is 413 and a bad chunk size 400, and the
//!   registry keeps answering.
//! - `schema.registry.authentication.method=BASIC` (I127): only a SCRAM user with its password
//!   gets in (one added at run time too); a wrong password, an unknown user or no header is 401
//!   with `WWW-Authenticate: Basic` and Confluent's error body.
//! - `confluent.value.schema.validation` / `confluent.key.schema.validation` (I124, I125): a
//!   validating topic takes records framed with a registered id (at once after the
//!   registration's answer) and null values, and refuses a batch with an unknown id, no magic
//!   byte or a short value with INVALID_RECORD and KIP-467 `record_errors`; a topic not
//!   validating takes anything, until AlterConfigs turns validation on.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::librdkafka::{admin, admin_options};
use common::typed::TypedClient;
use common::{bounded, Broker};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;
use serde_json::{json, Value};

const LIMIT: Duration = Duration::from_secs(120);

const USER_V1: &str =
    r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
const USER_V2: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
const USER_BREAKING: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}"#;
const ORDER: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;

fn start() -> Broker {
    Broker::builder()
        .with("schema.registry.listeners", "http://127.0.0.1:0")
        .start()
}

/// The registry's address in the broker's latest run.
fn registry(broker: &Broker) -> SocketAddr {
    let output = broker.output();
    let line = output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("minikafka: schema registry on http://"))
        .unwrap_or_else(|| panic!("no registry address printed\n{output}"));
    line.trim().parse().expect("a socket address")
}

/// Sends raw bytes, returns everything the broker answered before closing.
fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    stream.write_all(bytes).expect("send");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    response
}

/// Whether a fresh connection gets an answer to `GET /subjects` (false when the registry
/// closes it unanswered, as it does past its connection bound).
fn answers(addr: SocketAddr) -> bool {
    let request = b"GET /subjects HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut response = Vec::new();
    stream.write_all(request).is_ok()
        && stream.read_to_end(&mut response).is_ok()
        && response.starts_with(b"HTTP/1.1 200")
}

/// Status and body of an HTTP response.
fn parse_response(bytes: &[u8]) -> (u16, Vec<u8>) {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    assert!(
        head.contains("Content-Type: application/vnd.schemaregistry.v1+json"),
        "{head}"
    );
    (status, body.as_bytes().to_vec())
}

/// One request on its own connection: status and JSON body.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, body) = parse_response(&exchange(addr, request.as_bytes()));
    let value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    (status, value)
}

fn register(addr: SocketAddr, subject: &str, schema: &str) -> (u16, Value) {
    call(
        addr,
        "POST",
        &format!("/subjects/{subject}/versions"),
        Some(&json!({ "schema": schema })),
    )
}

fn id_of(addr: SocketAddr, subject: &str, schema: &str) -> i64 {
    let (status, body) = register(addr, subject, schema);
    assert_eq!(status, 200, "{body}");
    body["id"].as_i64().expect("an id")
}

#[test]
fn register_look_up_evolve_and_refuse_an_incompatible_schema() {
    bounded(LIMIT, || {
        let broker = start();
        let addr = registry(&broker);
        assert_eq!(call(addr, "GET", "/subjects", None), (200, json!([])));
        assert_eq!(id_of(addr, "users-value", USER_V1), 1);
        // The same schema under another subject: the same id (I52); again: the same version.
        assert_eq!(id_of(addr, "users-copy", USER_V1), 1);
        assert_eq!(id_of(addr, "users-value", USER_V1), 1);

        let (status, body) = call(addr, "GET", "/subjects/users-value/versions/latest", None);
        assert_eq!(status, 200);
        assert_eq!(
            (
                &body["subject"],
                &body["version"],
                &body["id"],
                &body["schema"]
            ),
            (&json!("users-value"), &json!(1), &json!(1), &json!(USER_V1))
        );
        assert_eq!(
            call(addr, "GET", "/schemas/ids/1", None),
            (200, json!({ "schema": USER_V1 }))
        );
        let (status, body) = call(
            addr,
            "POST",
            "/subjects/users-value",
            Some(&json!({ "schema": USER_V1 })),
        );
        assert_eq!(
            (status, &body["version"], &body["id"]),
            (200, &json!(1), &json!(1))
        );
        let (status, body) = call(
            addr,
            "POST",
            "/subjects/users-value",
            Some(&json!({ "schema": ORDER })),
        );
        assert_eq!((status, &body["error_code"]), (404, &json!(40403)));

        // BACKWARD (the default): a new field without a default cannot read old data.
        let (status, body) = call(
            addr,
            "POST",
            "/compatibility/subjects/users-value/versions/latest",
            Some(&json!({ "schema": USER_BREAKING })),
        );
        assert_eq!((status, body), (200, json!({ "is_compatible": false })));
        let (status, body) = register(addr, "users-value", USER_BREAKING);
        assert_eq!((status, &body["error_code"]), (409, &json!(409)), "{body}");
        assert_eq!(
            call(addr, "GET", "/subjects/users-value/versions", None),
            (200, json!([1]))
        );
        // With a default it is allowed, and gets the next id.
        assert_eq!(id_of(addr, "users-value", USER_V2), 2);
        assert_eq!(
            call(addr, "GET", "/subjects/users-value/versions", None),
            (200, json!([1, 2]))
        );
        let (status, body) = call(
            addr,
            "GET",
            "/subjects/users-value/versions/latest/schema",
            None,
        );
        assert_eq!((status, &body["fields"][1]["name"]), (200, &json!("age")));
        assert_eq!(
            call(addr, "GET", "/schemas/ids/2/versions", None),
            (200, json!([{ "subject": "users-value", "version": 2 }]))
        );
        // Errors as Confluent's.
        let (status, body) = call(addr, "GET", "/subjects/nobody/versions/1", None);
        assert_eq!((status, &body["error_code"]), (404, &json!(40401)));
        let (status, body) = call(addr, "GET", "/subjects/users-value/versions/zero", None);
        assert_eq!((status, &body["error_code"]), (422, &json!(42202)));
        let (status, body) = register(addr, "bad", "{\"type\": \"nonsense\"}");
        assert_eq!((status, &body["error_code"]), (422, &json!(42201)));
        assert_eq!(
            call(addr, "GET", "/config", None),
            (200, json!({ "compatibilityLevel": "BACKWARD" }))
        );
        assert_eq!(
            call(addr, "GET", "/mode", None),
            (200, json!({ "mode": "READWRITE" }))
        );
    });
}

#[test]
fn deletes_go_soft_then_permanent_and_survive_a_restart() {
    bounded(LIMIT, || {
        let mut broker = start();
        let addr = registry(&broker);
        id_of(addr, "gone", USER_V1);
        id_of(addr, "gone", USER_V2);
        id_of(addr, "kept", ORDER);
        let (status, body) = call(addr, "DELETE", "/subjects/gone?permanent=true", None);
        assert_eq!((status, &body["error_code"]), (404, &json!(40405)));
        assert_eq!(
            call(addr, "DELETE", "/subjects/gone/versions/1", None),
            (200, json!(1))
        );
        assert_eq!(
            call(
                addr,
                "DELETE",
                "/subjects/gone/versions/1?permanent=true",
                None
            ),
            (200, json!(1))
        );
        assert_eq!(
            call(addr, "DELETE", "/subjects/gone", None),
            (200, json!([2]))
        );
        let (status, body) = call(addr, "GET", "/subjects/gone/versions", None);
        assert_eq!((status, &body["error_code"]), (404, &json!(40401)));
        assert_eq!(
            call(addr, "GET", "/subjects?deleted=true", None),
            (200, json!(["gone", "kept"]))
        );

        broker.stop();
        broker.restart();
        let addr = registry(&broker);
        assert_eq!(call(addr, "GET", "/subjects", None), (200, json!(["kept"])));
        assert_eq!(
            call(addr, "GET", "/subjects/gone/versions?deleted=true", None),
            (200, json!([2]))
        );
        assert_eq!(
            call(addr, "DELETE", "/subjects/gone?permanent=true", None),
            (200, json!([2]))
        );
        assert_eq!(
            call(addr, "GET", "/subjects?deleted=true", None),
            (200, json!(["kept"]))
        );
        broker.stop();
        broker.restart();
        let addr = registry(&broker);
        assert_eq!(
            call(addr, "GET", "/subjects?deleted=true", None),
            (200, json!(["kept"]))
        );
        // The ids of the deleted schemas stay taken (I53).
        assert_eq!(id_of(addr, "new", USER_BREAKING), 4);
    });
}

#[test]
fn ids_are_stable_across_a_restart_and_a_kill_9() {
    bounded(LIMIT, || {
        let mut broker = start();
        let addr = registry(&broker);
        let user = id_of(addr, "users-value", USER_V1);
        let order = id_of(addr, "orders-value", ORDER);
        assert_eq!(id_of(addr, "users-value", USER_V2), 3);
        assert_eq!((user, order), (1, 2));
        assert_eq!(
            call(
                addr,
                "PUT",
                "/config/orders-value",
                Some(&json!({"compatibility": "FULL"}))
            ),
            (200, json!({ "compatibility": "FULL" }))
        );

        broker.stop();
        broker.restart();
        let addr = registry(&broker);
        assert_eq!(id_of(addr, "again", USER_V1), 1);
        assert_eq!(id_of(addr, "orders-value", ORDER), 2);
        assert_eq!(
            call(addr, "GET", "/config/orders-value", None),
            (200, json!({ "compatibilityLevel": "FULL" }))
        );
        // Answered registrations survive a crash: the answer came after the append (I54).
        assert_eq!(id_of(addr, "crash", USER_BREAKING), 4);

        broker.kill9();
        broker.restart();
        let addr = registry(&broker);
        assert_eq!(
            call(addr, "GET", "/subjects/crash/versions/1", None).1["id"],
            json!(4)
        );
        assert_eq!(
            call(addr, "GET", "/subjects", None),
            (
                200,
                json!(["again", "crash", "orders-value", "users-value"])
            )
        );
        assert_eq!(id_of(addr, "users-value", USER_V2), 3);
        let next = r#"{"type":"record","name":"Next","fields":[]}"#;
        assert_eq!(id_of(addr, "next", next), 5);
    });
}

#[test]
fn hostile_http_costs_only_its_connection() {
    bounded(LIMIT, || {
        let broker = start();
        let addr = registry(&broker);
        // Slow clients hold their connections, not the registry.
        let slow: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut s = TcpStream::connect(addr).expect("connect");
                s.write_all(b"POST /subjects/x/versions HTTP/1.1\r\nContent-Le")
                    .expect("send");
                s
            })
            .collect();
        // Garbage is 400 and closed.
        let (status, _) = parse_response(&exchange(addr, b"\x16\x03\x01 hello\r\n\r\n"));
        assert_eq!(status, 400);
        // A body over the bound is refused before it is read.
        let (status, _) = parse_response(&exchange(
            addr,
            b"POST /subjects/x/versions HTTP/1.1\r\nContent-Length: 1000000000\r\n\r\n",
        ));
        assert_eq!(status, 413);
        // A head over the bound.
        let mut long = b"GET /subjects HTTP/1.1\r\nX-Filler: ".to_vec();
        long.resize(64 * 1024, b'a');
        let (status, _) = parse_response(&exchange(addr, &long));
        assert_eq!(status, 431);
        // Malformed and deeply nested JSON.
        let (status, body) = call(addr, "POST", "/subjects/x/versions", None);
        assert_eq!((status, &body["error_code"]), (400, &json!(400)));
        let deep: String = "[".repeat(50_000) + &"]".repeat(50_000);
        let request = format!(
            "POST /subjects/x/versions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{deep}",
            deep.len()
        );
        assert_eq!(parse_response(&exchange(addr, request.as_bytes())).0, 400);
        // Unknown path and method.
        assert_eq!(call(addr, "GET", "/nowhere", None).0, 404);
        assert_eq!(call(addr, "PATCH", "/subjects", None).0, 405);
        // Keep-alive: two requests, one connection, answered in order.
        let two = b"GET /schemas/types HTTP/1.1\r\nHost: a\r\n\r\nGET /mode HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        let text = String::from_utf8(exchange(addr, two)).expect("utf-8");
        let first = text
            .find("[\"JSON\",\"PROTOBUF\",\"AVRO\"]")
            .expect("first answer");
        let second = text
            .find("{\"mode\":\"READWRITE\"}")
            .expect("second answer");
        assert!(first < second, "{text}");
        // Connections past the bound are closed at accept; the registry still answers after.
        let many: Vec<TcpStream> = (0..80)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        drop(many);
        drop(slow);
        // The registry frees their slots once it has seen them close: poll (bounded) for a
        // fresh connection to be answered rather than guess how long that takes.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !answers(addr) {
            assert!(
                Instant::now() < deadline,
                "no answer after the connections closed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(id_of(addr, "after", USER_V1), 1);
    });
}

/// `_schemas`-0's newest segment file.
fn schemas_segment(broker: &Broker) -> PathBuf {
    let dir = broker.data_dir().join("_schemas-0");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the partition directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

#[test]
fn hostile_records_in_schemas_are_skipped_at_startup() {
    bounded(LIMIT, || {
        let mut broker = start();
        let addr = registry(&broker);
        assert_eq!(id_of(addr, "users-value", USER_V1), 1);
        broker.kill9();
        // Records only someone with the data directory could write: a key that is not JSON,
        // a schema value that is not JSON, a schema claiming an id another schema has.
        let mut builder = BatchBuilder::new();
        let bad_id = json!({"subject":"evil","version":1,"id":1,"schema":ORDER,"deleted":false});
        let records: [(&[u8], Option<Vec<u8>>); 3] = [
            (b"\xff\xfe not json", Some(b"{}".to_vec())),
            (
                br#"{"keytype":"SCHEMA","subject":"evil","version":1,"magic":1}"#,
                Some(b"{\"subject\": [[[".to_vec()),
            ),
            (
                br#"{"keytype":"SCHEMA","subject":"evil","version":1,"magic":1}"#,
                Some(bad_id.to_string().into_bytes()),
            ),
        ];
        for (key, value) in &records {
            builder.push(&NewRecord {
                key: Some(key),
                value: value.as_deref(),
                headers: Vec::new(),
                timestamp_ms: 1,
            });
        }
        let batch = builder.build(Offset(1));
        let mut segment = std::fs::OpenOptions::new()
            .append(true)
            .open(schemas_segment(&broker))
            .expect("open the segment");
        segment.write_all(&batch).expect("append the batch");
        drop(segment);

        broker.restart();
        let addr = registry(&broker);
        let output = broker.output();
        assert_eq!(
            output.matches("_schemas record skipped").count(),
            3,
            "{output}"
        );
        assert_eq!(
            call(addr, "GET", "/subjects", None),
            (200, json!(["users-value"]))
        );
        assert_eq!(id_of(addr, "orders-value", ORDER), 2);
    });
}

#[test]
fn a_slow_request_is_closed_after_the_request_timeout() {
    // Slowloris: a head trickling in is cut REQUEST_TIMEOUT (30 s) after its first byte, with
    // no answer, while other clients are served meanwhile (I59).
    bounded(LIMIT, || {
        let broker = start();
        let addr = registry(&broker);
        let mut slow = TcpStream::connect(addr).expect("connect");
        slow.set_read_timeout(Some(Duration::from_millis(100)))
            .expect("read timeout");
        let started = std::time::Instant::now();
        let mut closed_after = None;
        for byte in b"GET /subjects HTTP/1.1\r\nX-Slow: "
            .iter()
            .chain(b"a".repeat(400).iter())
        {
            if slow.write_all(&[*byte]).is_err() {
                closed_after = Some(started.elapsed());
                break;
            }
            let mut answer = [0u8; 64];
            match slow.read(&mut answer) {
                Ok(0) => {
                    closed_after = Some(started.elapsed());
                    break;
                }
                Ok(n) => panic!("answered a head that never ended: {:?}", &answer[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    closed_after = Some(started.elapsed());
                    break;
                }
            }
            if started.elapsed() > Duration::from_secs(5)
                && started.elapsed() < Duration::from_secs(6)
            {
                // Meanwhile the registry serves others.
                assert_eq!(call(addr, "GET", "/subjects", None), (200, json!([])));
            }
        }
        let closed_after = closed_after.expect("the slow connection was never closed");
        assert!(
            closed_after >= Duration::from_secs(29) && closed_after < Duration::from_secs(40),
            "closed after {closed_after:?}"
        );
    });
}

#[test]
fn concurrent_registrations_get_distinct_ids_that_survive_a_restart() {
    // Writes run one at a time (I54) whatever the number of connections: 8 clients register
    // 20 distinct schemas each at once; the ids are 1..=160, each once, and replay keeps them.
    bounded(LIMIT, || {
        let mut broker = start();
        let addr = registry(&broker);
        let threads: Vec<_> = (0..8)
            .map(|client| {
                std::thread::spawn(move || {
                    (0..20)
                        .map(|n| {
                            let schema = format!(
                                r#"{{"type":"record","name":"R{client}x{n}","fields":[]}}"#
                            );
                            let subject = format!("client-{client}-{n}");
                            (
                                subject.clone(),
                                schema.clone(),
                                id_of(addr, &subject, &schema),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let registered: Vec<(String, String, i64)> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("client thread"))
            .collect();
        let mut ids: Vec<i64> = registered.iter().map(|(_, _, id)| *id).collect();
        ids.sort_unstable();
        assert_eq!(ids, (1..=160).collect::<Vec<i64>>());

        broker.kill9();
        broker.restart();
        let addr = registry(&broker);
        for (subject, schema, id) in &registered {
            let (status, body) = call(
                addr,
                "POST",
                &format!("/subjects/{subject}"),
                Some(&json!({ "schema": schema })),
            );
            assert_eq!((status, &body["id"]), (200, &json!(id)), "{subject}");
        }
    });
}

/// The Confluent wire format: magic byte 0, the 4-byte big-endian id, the payload.
fn framed(id: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Produce v9 of one batch with `values` (keys `key-N`) to `topic`/0: the partition's error
/// code, its `record_errors` as `(batch index, message)` and its `error_message`.
fn produce_values(
    client: &mut TypedClient,
    topic: &str,
    values: &[Option<Vec<u8>>],
) -> (i16, Vec<(i32, String)>, Option<String>) {
    let mut builder = BatchBuilder::new();
    for (i, value) in values.iter().enumerate() {
        let key = format!("key-{i}");
        builder.push(&NewRecord {
            key: Some(key.as_bytes()),
            value: value.as_deref(),
            timestamp_ms: 1_000,
            ..NewRecord::default()
        });
    }
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(builder.build(Offset(0)).into());
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request);
    let p = &response.responses[0].partition_responses[0];
    let errors = p
        .record_errors
        .iter()
        .map(|e| {
            let message = e.batch_index_error_message.as_deref().unwrap_or("");
            (e.batch_index, message.to_string())
        })
        .collect();
    (
        p.error_code,
        errors,
        p.error_message.as_deref().map(str::to_string),
    )
}

/// INVALID_RECORD.
const INVALID_RECORD: i16 = 87;

/// I124, I125: a validating topic takes only records framed with a registered id (or null),
/// refusing the batch whole with per-record errors; another topic takes anything.
#[test]
fn a_validating_topic_refuses_records_without_a_registered_schema_id() {
    bounded(LIMIT, || {
        let broker = start();
        let addr = registry(&broker);
        let admin = admin(&broker);
        let topics = [
            rdkafka::admin::NewTopic::new("checked", 1, rdkafka::admin::TopicReplication::Fixed(1))
                .set("confluent.value.schema.validation", "true"),
            rdkafka::admin::NewTopic::new("keys", 1, rdkafka::admin::TopicReplication::Fixed(1))
                .set("confluent.key.schema.validation", "true"),
            rdkafka::admin::NewTopic::new("free", 1, rdkafka::admin::TopicReplication::Fixed(1)),
        ];
        let created = futures::executor::block_on(admin.create_topics(&topics, &admin_options()))
            .expect("CreateTopics");
        assert!(created.iter().all(Result::is_ok), "{created:?}");
        let mut client = TypedClient::connect(broker.addr());

        // Nothing registered yet: id 1 is unknown.
        let (code, errors, _) = produce_values(&mut client, "checked", &[Some(framed(1, b"x"))]);
        assert_eq!(code, INVALID_RECORD);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].1.contains("schema id 1"), "{errors:?}");

        // Registered: usable as soon as the registration is answered (I125).
        let id = id_of(addr, "checked-value", USER_V1) as i32;
        let good = framed(id, b"\x06ann");
        let (code, errors, _) = produce_values(
            &mut client,
            "checked",
            &[Some(good.clone()), None, Some(framed(id, b""))],
        );
        assert_eq!(
            (code, errors),
            (0, vec![]),
            "a framed value and a tombstone pass"
        );

        // A batch with an unknown id, no magic byte and a short value: refused whole, each
        // bad record named with its index; the good ones are named by none.
        let mut no_magic = good.clone();
        no_magic[0] = 1;
        let (code, errors, message) = produce_values(
            &mut client,
            "checked",
            &[
                Some(good.clone()),
                Some(framed(id + 100, b"x")),
                Some(no_magic),
                Some(vec![0, 0, 0]),
                Some(good.clone()),
            ],
        );
        assert_eq!(code, INVALID_RECORD);
        let indexes: Vec<i32> = errors.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, vec![1, 2, 3], "{errors:?}");
        assert!(
            errors[0].1.contains(&format!("schema id {}", id + 100)),
            "{errors:?}"
        );
        assert!(errors[1].1.contains("magic byte"), "{errors:?}");
        assert!(errors[2].1.contains("magic byte"), "{errors:?}");
        assert!(message.is_some_and(|m| m.contains("3 record(s)")));

        // The key's setting checks keys only (the keys `key-N` are not framed).
        let (code, errors, _) = produce_values(&mut client, "keys", &[Some(good.clone())]);
        assert_eq!(code, INVALID_RECORD);
        assert!(errors[0].1.contains("key"), "{errors:?}");
        // A topic not validating takes anything.
        let (code, _, _) = produce_values(&mut client, "free", &[Some(b"plain".to_vec())]);
        assert_eq!(code, 0);
        // Turned on at run time (AlterConfigs): the next batch is checked.
        let alteration =
            rdkafka::admin::AlterConfig::new(rdkafka::admin::ResourceSpecifier::Topic("free"))
                .set("confluent.value.schema.validation", "true");
        let altered =
            futures::executor::block_on(admin.alter_configs(&[alteration], &admin_options()))
                .expect("AlterConfigs");
        assert!(altered.iter().all(Result::is_ok), "{altered:?}");
        let (code, _, _) = produce_values(&mut client, "free", &[Some(b"plain".to_vec())]);
        assert_eq!(code, INVALID_RECORD, "validation turned on at run time");
        let (code, _, _) = produce_values(&mut client, "free", &[Some(good.clone())]);
        assert_eq!(code, 0);

        // After a restart the replayed registry still knows the id.
        drop((client, admin));
        let mut broker = broker;
        assert!(broker.stop().success());
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        let (code, errors, _) = produce_values(&mut client, "checked", &[Some(good)]);
        assert_eq!((code, errors), (0, vec![]));
    });
}

/// A registration sent `Transfer-Encoding: chunked`, in three chunks: status and body.
fn chunked_registration(addr: SocketAddr, subject: &str, schema: &str) -> (u16, Value) {
    let body = json!({ "schema": schema }).to_string();
    let (a, rest) = body.split_at(body.len() / 3);
    let (b, c) = rest.split_at(rest.len() / 2);
    let mut request = format!(
        "POST /subjects/{subject}/versions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    for chunk in [a, b, c] {
        request.push_str(&format!("{:x};note=x\r\n{chunk}\r\n", chunk.len()));
    }
    request.push_str("0\r\n\r\n");
    let (status, body) = parse_response(&exchange(addr, request.as_bytes()));
    (status, serde_json::from_slice(&body).expect("json"))
}

/// I128: a chunked body is read like a sized one and bounded the same way.
#[test]
fn chunked_bodies_are_read_and_bounded() {
    bounded(LIMIT, || {
        let broker = start();
        let addr = registry(&broker);
        assert_eq!(
            chunked_registration(addr, "chunky", USER_V1),
            (200, json!({ "id": 1 }))
        );
        assert_eq!(id_of(addr, "chunky", USER_V1), 1, "the same schema, sized");

        // A chunk announcing more than the body bound: 413 before its data is sent.
        let huge = format!(
            "POST /subjects/x/versions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            minikafka_schema::http::BODY_BYTES_MAX + 1
        );
        assert_eq!(parse_response(&exchange(addr, huge.as_bytes())).0, 413);
        // Many chunks adding up past the bound: 413 too, having kept at most the bound.
        let mut stream =
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        stream
            .write_all(b"POST /subjects/x/versions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            .expect("head");
        // Eight chunks of 1 MiB fill the bound exactly; the ninth's size line passes it. Nothing
        // more is sent, so the broker reads all of it before closing (no reset).
        let chunk = format!("100000\r\n{}\r\n", "a".repeat(0x10_0000));
        for _ in 0..minikafka_schema::http::BODY_BYTES_MAX / 0x10_0000 {
            stream
                .write_all(chunk.as_bytes())
                .expect("a chunk within the bound");
        }
        stream
            .write_all(b"100000\r\n")
            .expect("the size line past it");
        let mut answered = Vec::new();
        let _ = stream.read_to_end(&mut answered);
        assert_eq!(parse_response(&answered).0, 413);
        // A chunk size that is not hex, and one past u64: 400.
        for bad in ["zz", "ffffffffffffffffffffff"] {
            let request = format!(
                "POST /subjects/x/versions HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{bad}\r\nabc\r\n0\r\n\r\n"
            );
            assert_eq!(
                parse_response(&exchange(addr, request.as_bytes())).0,
                400,
                "{bad}"
            );
        }
        // Transfer-Encoding with Content-Length (request smuggling): 400.
        let both = b"POST /subjects/x/versions HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n";
        assert_eq!(parse_response(&exchange(addr, both)).0, 400);
        // The registry answers on.
        assert_eq!(
            call(addr, "GET", "/subjects", None),
            (200, json!(["chunky"]))
        );
    });
}

/// Creates (or replaces) SCRAM-SHA-512 user `user` over the Kafka listener.
fn scram_user(broker: &Broker, user: &str, password: &str) {
    use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};
    let salt = b"registry-test-salt".to_vec();
    let mut upsertion = ScramCredentialUpsertion::default();
    upsertion.name = StrBytes::from_string(user.to_string());
    upsertion.mechanism = 2;
    upsertion.iterations = 4096;
    upsertion.salted_password =
        ScramCredential::salted_password(ScramMechanism::Sha512, password, &salt, 4096).into();
    upsertion.salt = salt.into();
    let mut request = AlterUserScramCredentialsRequest::default();
    request.upsertions = vec![upsertion];
    let mut client = TypedClient::connect(broker.addr());
    let response: AlterUserScramCredentialsResponse =
        client.call(ApiKey::AlterUserScramCredentials, 0, &request);
    assert_eq!(response.results[0].error_code, 0, "creating {user}");
}

/// One GET with an optional `Authorization` value: the raw response.
fn get_with(addr: SocketAddr, path: &str, authorization: Option<&str>) -> Vec<u8> {
    let auth = authorization.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n").as_bytes(),
    )
}

/// I127: BASIC lets in a SCRAM user with its password only; everything else is 401.
#[test]
fn basic_auth_checks_the_scram_users() {
    bounded(LIMIT, || {
        let broker = Broker::builder()
            .with("schema.registry.listeners", "http://127.0.0.1:0")
            .with("schema.registry.authentication.method", "BASIC")
            .start();
        let addr = registry(&broker);
        scram_user(&broker, "alice", "alice-secret");
        let alice = "Basic YWxpY2U6YWxpY2Utc2VjcmV0";
        assert_eq!(
            parse_response(&get_with(addr, "/subjects", Some(alice))).0,
            200
        );
        // "alice:nope", "bob:bob-secret" (no such user yet), a bearer token, nothing.
        for refused in [
            Some("Basic YWxpY2U6bm9wZQ=="),
            Some("Basic Ym9iOmJvYi1zZWNyZXQ="),
            Some("Bearer x"),
            None,
        ] {
            let answer = get_with(addr, "/subjects", refused);
            let text = String::from_utf8_lossy(&answer).into_owned();
            let (status, body) = parse_response(&answer);
            assert_eq!(status, 401, "{refused:?}: {text}");
            assert!(
                text.contains("\r\nWWW-Authenticate: Basic realm=\"SchemaRegistry\"\r\n"),
                "{text}"
            );
            let body: Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(body, json!({"error_code": 401, "message": "Unauthorized"}));
        }
        // A user added at run time gets in at once.
        scram_user(&broker, "bob", "bob-secret");
        assert_eq!(
            parse_response(&get_with(
                addr,
                "/subjects",
                Some("Basic Ym9iOmJvYi1zZWNyZXQ=")
            ))
            .0,
            200
        );
        // A write with a body, authenticated.
        let body = json!({ "schema": USER_V1 }).to_string();
        let request = format!(
            "POST /subjects/s/versions HTTP/1.1\r\nHost: t\r\nAuthorization: {alice}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let (status, body) = parse_response(&exchange(addr, request.as_bytes()));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    });
}
