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

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use common::{bounded, Broker};
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
        std::thread::sleep(Duration::from_millis(200));
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
