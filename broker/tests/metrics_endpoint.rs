//! The Prometheus endpoint and the JSON logs, end to end: the real `minikafka` binary over
//! TCP on 127.0.0.1, driven by librdkafka (producer, consumer, offset commits) and by raw
//! Kafka and HTTP bytes.
//!
//! Contract:
//! - The numbers scraped from `GET /metrics` equal what the test did: records per partition,
//!   bytes (checked against the segment files on disk), log end offsets, consumer-group lag
//!   from offsets the test committed, and exact request, error and connection counts for raw
//!   requests the test sent while no other client was connected.
//! - The HTTP endpoint answers only `GET /metrics`; a garbage or oversized head costs only its
//!   own connection and the endpoint keeps serving.
//! - The schema registry's requests are counted by method, route template and status, with
//!   gauges of its schemas and subjects (I126); no raw subject appears in a label.
//! - A second broker told to use a metrics address another broker serves refuses to start.
//! - With `log.format=json` every log line is a JSON object, and a connection the broker
//!   closes for a bad frame gets one warn line carrying the peer address and the reason.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use common::librdkafka::*;
use common::raw::{connect, read_frame, request};
use common::{bounded, free_port, minikafka_bin, Broker};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

const LIMIT: Duration = Duration::from_secs(120);

/// One HTTP exchange: sends `head`, returns the status code and the body.
fn http(addr: SocketAddr, head: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream.write_all(head).expect("send request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    let text = String::from_utf8(response).expect("utf-8 response");
    let (status_line, rest) = text.split_once("\r\n").expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let body = rest.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The page parsed: `name{labels}` (labels as written, in order) to value. Checks the text
/// format on the way: every sample's family has `# HELP` and `# TYPE` lines before it.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (status, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
    assert_eq!(status, 200, "{body}");
    let (mut helped, mut typed) = (Vec::new(), Vec::new());
    let mut samples = BTreeMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.push(rest.split(' ').next().unwrap_or("").to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap_or("").to_string();
            let kind = parts.next().unwrap_or("");
            assert!(
                ["counter", "gauge", "histogram"].contains(&kind),
                "bad TYPE line: {line}"
            );
            assert_eq!(helped.last(), Some(&name), "TYPE without HELP: {line}");
            typed.push(name);
        } else if !line.is_empty() {
            let (series, value) = line.rsplit_once(' ').expect("sample line");
            let name = series.split('{').next().unwrap_or(series);
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    name.strip_suffix(s)
                        .filter(|f| typed.iter().any(|t| t == f))
                })
                .unwrap_or(name);
            assert!(
                typed.iter().any(|t| t == family),
                "undeclared family: {line}"
            );
            let value: f64 = value.parse().expect("numeric sample value");
            samples.insert(series.to_string(), value);
        }
    }
    samples
}

fn get(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    match samples.get(series) {
        Some(v) => *v,
        None => panic!("no sample {series}; have: {:#?}", samples.keys()),
    }
}

fn partition_series(name: &str, topic: &str, partition: i32) -> String {
    format!("{name}{{topic=\"{topic}\",partition=\"{partition}\"}}")
}

/// Bytes of a partition's `.log` segment files on disk.
fn segment_bytes(data_dir: &Path, topic: &str, partition: i32) -> u64 {
    let dir = data_dir.join(format!("{topic}-{partition}"));
    std::fs::read_dir(&dir)
        .expect("partition dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

/// A Metadata v1 request for one topic.
fn metadata_request(topic: &str, correlation_id: i32) -> Vec<u8> {
    let mut body = 1_i32.to_be_bytes().to_vec();
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    request(3, 1, correlation_id, &body)
}

fn metrics_broker(extra: &[(&str, &str)]) -> (Broker, SocketAddr) {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let listener = format!("http://{addr}");
    let mut builder = Broker::builder()
        .with("metrics.listener", &listener)
        .with("num.shards", "2");
    for (key, value) in extra {
        builder = builder.with(key, value);
    }
    (builder.start(), addr)
}

/// Produces and consumes with librdkafka, commits offsets, then sends raw requests with no
/// other client connected, and checks every scraped number against what was done.
#[test]
fn scraped_numbers_equal_what_the_workload_did() {
    bounded(LIMIT, || {
        let (broker, metrics) = metrics_broker(&[
            ("flush.policy", "fsync"),
            ("auto.create.topics.enable", "false"),
        ]);
        let topic = "metered";
        create_topics(&broker, &[(topic, 2)]);
        let per_partition = [30_usize, 20];
        let mut recs = Vec::new();
        for (p, &n) in per_partition.iter().enumerate() {
            for i in 0..n {
                recs.push(Rec::new(
                    topic,
                    Some(p as i32),
                    format!("value-{p}-{i:04}").as_bytes(),
                ));
            }
        }
        {
            let mut producer = TestProducer::new(&broker, &[]);
            expect_all_ok(&producer.produce_all(&recs));
        }
        {
            let consumer = consumer(&broker, &[("group.id", "lagging")]);
            let starts = [(0, Offset::Beginning), (1, Offset::Beginning)];
            let got = read_partitions(&consumer, topic, &starts, recs.len());
            assert_eq!(got.len(), recs.len());
            // Committed: partition 0 at 10 (lag 20), partition 1 at its end (lag 0).
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, 0, Offset::Offset(10))
                .expect("add partition");
            tpl.add_partition_offset(topic, 1, Offset::Offset(20))
                .expect("add partition");
            consumer
                .commit(&tpl, CommitMode::Sync)
                .expect("commit offsets");
        }

        let before = scrape(metrics);
        for (p, &n) in per_partition.iter().enumerate() {
            let p = p as i32;
            let on_disk = segment_bytes(broker.data_dir(), topic, p) as f64;
            assert!(on_disk > 0.0);
            let s = |name| get(&before, &partition_series(name, topic, p));
            assert_eq!(s("minikafka_records_in_total"), n as f64, "partition {p}");
            assert_eq!(s("minikafka_log_end_offset"), n as f64);
            assert_eq!(s("minikafka_log_start_offset"), 0.0);
            assert_eq!(s("minikafka_bytes_in_total"), on_disk);
            assert_eq!(s("minikafka_log_size_bytes"), on_disk);
            // Each record was fetched once, in whole batches.
            assert_eq!(s("minikafka_records_out_total"), n as f64);
            assert_eq!(s("minikafka_bytes_out_total"), on_disk);
            assert_eq!(s("minikafka_partition_offline"), 0.0);
        }
        let group = |name: &str, p: i32| {
            let series = format!("{name}{{group=\"lagging\",topic=\"{topic}\",partition=\"{p}\"}}");
            get(&before, &series)
        };
        assert_eq!(group("minikafka_consumer_group_committed_offset", 0), 10.0);
        assert_eq!(group("minikafka_consumer_group_lag", 0), 20.0);
        assert_eq!(group("minikafka_consumer_group_lag", 1), 0.0);
        // Every acks=all append under flush.policy=fsync waited for a sync.
        let syncs = get(&before, "minikafka_fsync_total");
        assert!(syncs >= 1.0, "no fsync counted");
        assert_eq!(
            get(&before, "minikafka_fsync_duration_seconds_count"),
            syncs
        );
        assert_eq!(get(&before, "minikafka_appends_per_fsync_count"), syncs);
        assert!(get(&before, "minikafka_appends_per_fsync_sum") >= syncs);
        assert_eq!(get(&before, "minikafka_fsync_failures_total"), 0.0);
        assert!(get(&before, "minikafka_requests_total{api=\"Produce\"}") >= 1.0);
        assert!(get(&before, "minikafka_requests_total{api=\"Fetch\"}") >= 1.0);
        assert!(get(&before, "minikafka_requests_total{api=\"OffsetCommit\"}") >= 1.0);
        for shard in 0..2 {
            let series = format!("minikafka_recovery_seconds{{shard=\"{shard}\"}}");
            assert!(get(&before, &series) >= 0.0);
            let series = format!("minikafka_shard_inbox_depth{{shard=\"{shard}\"}}");
            assert_eq!(get(&before, &series), 0.0);
        }
        assert_eq!(get(&before, "minikafka_scrape_shards_missing"), 0.0);
        assert_eq!(get(&before, "minikafka_connections_refused_total"), 0.0);

        // Exact counts: the librdkafka clients are gone; 3 Metadata requests, 1 for an unknown
        // topic, over one new connection.
        let mut stream = connect(broker.addr());
        for (i, name) in [topic, topic, "no-such-topic"].iter().enumerate() {
            stream
                .write_all(&metadata_request(name, i as i32))
                .expect("send Metadata");
            read_frame(&mut stream).expect("Metadata response");
        }
        let after = scrape(metrics);
        let delta = |series: &str| {
            after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0)
        };
        assert_eq!(delta("minikafka_requests_total{api=\"Metadata\"}"), 3.0);
        assert_eq!(
            delta("minikafka_request_duration_seconds_count{api=\"Metadata\"}"),
            3.0
        );
        assert_eq!(
            delta("minikafka_request_errors_total{api=\"Metadata\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"}"),
            1.0
        );
        assert_eq!(delta("minikafka_connections_accepted_total"), 1.0);
        assert!(get(&after, "minikafka_connections_open") >= 1.0);
        drop(stream);
    });
}

/// Anything but `GET /metrics` is refused with a status and costs only its connection.
#[test]
fn the_endpoint_serves_only_get_metrics_and_survives_hostile_requests() {
    bounded(LIMIT, || {
        let (_broker, metrics) = metrics_broker(&[]);
        assert_eq!(http(metrics, b"GET / HTTP/1.1\r\n\r\n").0, 404);
        assert_eq!(http(metrics, b"POST /metrics HTTP/1.1\r\n\r\n").0, 404);
        assert_eq!(http(metrics, b"\x00\x00\x00\x20garbage\r\n\r\n").0, 400);
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
        let mut stream = TcpStream::connect(metrics).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        // The broker answers once the head passes its limit and closes; the rest of our
        // write may then fail, which is the point.
        let _ = stream.write_all(&huge);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        assert!(
            String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 431 "),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        // A client that connects and says nothing does not block the others.
        let _silent = TcpStream::connect(metrics).expect("connect");
        let page = scrape(metrics);
        assert!(page.contains_key("minikafka_connections_open"));
    });
}

/// Both brokers would bind the metrics port (SO_REUSEPORT) and scrapes would reach either at
/// random: the second refuses to start instead.
#[test]
fn a_second_broker_on_a_served_metrics_address_refuses_to_start() {
    bounded(LIMIT, || {
        let (_first, metrics) = metrics_broker(&[]);
        let data = tempfile::tempdir().expect("temp dir");
        let mut child = std::process::Command::new(minikafka_bin())
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{}", free_port()))
            .arg("--override")
            .arg(format!("log.dirs={}", data.path().display()))
            .arg("--override")
            .arg(format!("metrics.listener=http://{metrics}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn a second broker");
        // A broker that started instead would never exit: kill it and fail.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let output = loop {
            if child.try_wait().expect("wait").is_some() {
                break child.wait_with_output().expect("output");
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("a second broker started on a served metrics address");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&metrics.to_string()), "{stderr}");
    });
}

/// `log.format=json`: every line on stderr is a JSON object; requests are not logged one by
/// one; a bad frame gets one warn line with the peer's address and the reason.
#[test]
fn json_logs_parse_and_name_the_peer_of_a_hostile_connection() {
    bounded(LIMIT, || {
        let mut broker = Broker::builder()
            .with("log.format", "json")
            .with("socket.request.max.bytes", "1000")
            .with("message.max.bytes", "500")
            .start();
        // No line per request at the default level: 100 requests must not show up as 100 lines.
        let mut quiet = connect(broker.addr());
        for i in 0..100 {
            quiet
                .write_all(&metadata_request("absent", i))
                .expect("send Metadata");
            read_frame(&mut quiet).expect("Metadata response");
        }
        drop(quiet);
        let mut stream = connect(broker.addr());
        let peer = stream.local_addr().expect("local addr").to_string();
        stream
            .write_all(&1_000_000_i32.to_be_bytes())
            .expect("send frame size");
        assert!(
            read_frame(&mut stream).is_none(),
            "the connection is closed"
        );
        drop(stream);
        broker.stop();
        let output = broker.output();
        let lines = output.lines().filter(|l| l.starts_with('{')).count();
        assert!(lines < 100, "{lines} log lines for 100 requests:\n{output}");
        let mut found = false;
        for line in output.lines() {
            // Not log lines: the stdout readiness line and the harness's own markers.
            if line.starts_with("minikafka: ")
                || line.starts_with("=== harness")
                || line.trim().is_empty()
            {
                continue;
            }
            let value: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(e) => panic!("not a JSON log line ({e}): {line}"),
            };
            assert!(value["level"].is_string(), "{line}");
            assert!(value["timestamp"].is_string(), "{line}");
            if value["fields"]["peer"] == serde_json::Value::String(peer.clone()) {
                assert_eq!(value["level"], "WARN", "{line}");
                let reason = value["fields"]["reason"].as_str().unwrap_or("");
                assert!(!reason.is_empty(), "no reason: {line}");
                found = true;
            }
        }
        assert!(found, "no log line names peer {peer}:\n{output}");
    });
}

/// A registry broker's address for the REST API (printed after the Kafka listener's line).
fn registry_addr(broker: &Broker) -> SocketAddr {
    let output = broker.output();
    output
        .lines()
        .find_map(|l| l.strip_prefix("minikafka: schema registry on http://"))
        .unwrap_or_else(|| panic!("no registry address printed\n{output}"))
        .trim()
        .parse()
        .expect("a socket address")
}

/// One registry request with a JSON body: its status.
fn registry_call(addr: SocketAddr, method: &str, path: &str, body: &str) -> u16 {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    http(addr, head.as_bytes()).0
}

/// I126: registry requests by method, template and status; schemas and subjects gauges.
#[test]
fn schema_registry_requests_and_sizes_are_scraped() {
    bounded(LIMIT, || {
        let (broker, metrics) =
            metrics_broker(&[("schema.registry.listeners", "http://127.0.0.1:0")]);
        let registry = registry_addr(&broker);
        let page = scrape(metrics);
        assert_eq!(get(&page, "minikafka_schema_registry_schemas"), 0.0);
        assert_eq!(get(&page, "minikafka_schema_registry_subjects"), 0.0);
        let schema = |name: &str| {
            format!(r#"{{"schema":"{{\"type\":\"record\",\"name\":\"{name}\",\"fields\":[]}}"}}"#)
        };
        assert_eq!(
            registry_call(registry, "POST", "/subjects/a-value/versions", &schema("A")),
            200
        );
        assert_eq!(
            registry_call(registry, "POST", "/subjects/b-value/versions", &schema("B")),
            200
        );
        assert_eq!(
            registry_call(registry, "POST", "/subjects/c-value/versions", &schema("A")),
            200
        );
        for _ in 0..3 {
            assert_eq!(
                registry_call(registry, "GET", "/subjects/a-value/versions/1", ""),
                200
            );
        }
        assert_eq!(
            registry_call(registry, "GET", "/subjects/nope/versions/1", ""),
            404
        );
        assert_eq!(registry_call(registry, "GET", "/no/such/thing", ""), 404);
        let page = scrape(metrics);
        let requests = |method: &str, endpoint: &str, status: u16| {
            get(
                &page,
                &format!(
                    "minikafka_schema_registry_requests_total{{method=\"{method}\",endpoint=\"{endpoint}\",status=\"{status}\"}}"
                ),
            )
        };
        assert_eq!(requests("POST", "/subjects/{subject}/versions", 200), 3.0);
        assert_eq!(
            requests("GET", "/subjects/{subject}/versions/{version}", 200),
            3.0
        );
        assert_eq!(
            requests("GET", "/subjects/{subject}/versions/{version}", 404),
            1.0
        );
        assert_eq!(requests("GET", "other", 404), 1.0);
        // Two schemas (A is shared by two subjects), three subjects.
        assert_eq!(get(&page, "minikafka_schema_registry_schemas"), 2.0);
        assert_eq!(get(&page, "minikafka_schema_registry_subjects"), 3.0);
        assert!(
            !page
                .keys()
                .any(|k| k.contains("a-value") || k.contains("nope")),
            "a raw subject leaked into a label"
        );
    });
}
