//! Smoke tests of the `minikafka` binary over TCP, with a tiny blocking client built on
//! `kafka-protocol` (no Kafka client library).
//!
//! Contract:
//! - Each test starts the real binary on a free port (`listeners=PLAINTEXT://127.0.0.1:0`;
//!   the broker prints the bound address) with a fresh temporary data directory, and kills
//!   it when the test ends.
//! - Every socket read has a timeout, so a broker that never answers fails the test.
//! - Covered: ApiVersions, CreateTopics, Metadata, Produce (acks 0, 1, -1), Fetch read back
//!   byte for byte, long-poll woken by a produce on another connection (I7), pipelined
//!   requests answered in order, the per-connection in-flight limits (other requests
//!   `MAX_IN_FLIGHT`, Produce deeper), ListOffsets (earliest, latest, by timestamp inside
//!   batches, max timestamp), `num.shards` 1 and 2, SIGTERM then restart with the data still there
//!   and the leader epochs unchanged (Metadata, OffsetForLeaderEpoch), bad settings exiting with
//!   code 2, librdkafka's all-topics Metadata v13 request with its 3 trailing bytes, DescribeGroups
//!   at v0–6 (I142), MirrorMaker 2's compacted internal topics (I143).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeConfigsRequest, DescribeConfigsResponse, FetchRequest,
    FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest,
    HeartbeatResponse, InitProducerIdRequest, InitProducerIdResponse, JoinGroupRequest,
    JoinGroupResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use minikafka_broker::server::connection::{MAX_IN_FLIGHT, MAX_IN_FLIGHT_PRODUCE};
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

/// Longest wait for a broker to start or stop, or for one response.
const LIMIT: Duration = Duration::from_secs(30);

fn binary() -> &'static str {
    option_env!("CARGO_BIN_EXE_minikafka")
        .or(option_env!("CARGO_BIN_EXE_minikafka-broker"))
        .expect("the package builds the broker binary")
}

/// A running broker; killed on drop.
struct Broker {
    child: Option<Child>,
    addr: SocketAddr,
    data_dir: PathBuf,
    shards: usize,
    /// Extra `key=value` overrides.
    extra: Vec<String>,
    stderr_path: PathBuf,
    _root: tempfile::TempDir,
}

impl Broker {
    fn start(shards: usize) -> Broker {
        Broker::start_with(shards, &[])
    }

    fn start_with(shards: usize, extra: &[&str]) -> Broker {
        let root = tempfile::tempdir().expect("temp dir");
        let data_dir = root.path().join("data");
        let stderr_path = root.path().join("stderr.log");
        let mut broker = Broker {
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir,
            shards,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            stderr_path,
            _root: root,
        };
        broker.spawn(0);
        broker
    }

    /// Spawns the binary on `port` (0 = any) and waits for its "listening on" line.
    fn spawn(&mut self, port: u16) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr_path)
            .expect("stderr log");
        let mut child = Command::new(binary())
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
            .arg("--override")
            .arg(format!("log.dirs={}", self.data_dir.display()))
            .arg("--override")
            .arg(format!("num.shards={}", self.shards))
            .args(self.extra.iter().flat_map(|kv| ["--override", kv.as_str()]))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn broker");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let line = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("broker did not start:\n{}", self.stderr()));
        let addr = line
            .strip_prefix("minikafka: listening on ")
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        assert!(
            line.contains(&format!("{} shards", self.shards)),
            "line {line:?}"
        );
        self.addr = addr.parse().expect("address");
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Sends SIGTERM and waits for exit; returns the exit code.
    fn terminate(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid");
        // SAFETY: plain kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code();
            }
            if started.elapsed() > LIMIT {
                let _ = child.kill();
                panic!("broker did not stop after SIGTERM:\n{}", self.stderr());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn restart(&mut self) {
        let port = self.addr.port();
        self.spawn(port);
    }

    fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!("--- broker stderr ---\n{}", self.stderr());
        }
    }
}

/// A blocking Kafka client speaking one request at a time (or pipelined with `send`/`recv`).
struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(LIMIT)).expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Sends a request without waiting; returns its correlation id.
    fn send<R: Encodable>(&mut self, api_key: ApiKey, version: i16, request: &R) -> i32 {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = api_key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("smoke"));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, api_key.request_header_version(version))
            .expect("header");
        request.encode(&mut body, version).expect("body");
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).expect("write");
        correlation_id
    }

    /// Reads one response; returns its correlation id and body.
    fn recv<R: Decodable + HeaderVersion>(&mut self, version: i16) -> (i32, R) {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).expect("response size");
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).expect("response body");
        let mut bytes = Bytes::from(frame);
        let header =
            ResponseHeader::decode(&mut bytes, R::header_version(version)).expect("header");
        let body = R::decode(&mut bytes, version).expect("decode response");
        assert!(bytes.is_empty(), "trailing response bytes");
        (header.correlation_id, body)
    }

    fn call<Q: Encodable, R: Decodable + HeaderVersion>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &Q,
    ) -> R {
        let sent = self.send(api_key, version, request);
        let (got, response) = self.recv(version);
        assert_eq!(got, sent, "correlation id");
        response
    }

    fn create_topic(&mut self, name: &str, partitions: i32) {
        let mut topic = CreatableTopic::default();
        topic.name = topic_name(name);
        topic.num_partitions = partitions;
        topic.replication_factor = 1;
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![topic];
        request.timeout_ms = 5000;
        let response: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &request);
        assert_eq!(response.topics.len(), 1);
        assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        assert_eq!(response.topics[0].num_partitions, partitions);
        assert!(!response.topics[0].topic_id.is_nil());
    }

    fn produce(&mut self, topic: &str, partition: i32, acks: i16, batch: &[u8]) -> ProduceResponse {
        let request = produce_request(topic, partition, acks, batch);
        self.call(ApiKey::Produce, 9, &request)
    }

    fn fetch(&mut self, request: &FetchRequest) -> FetchResponse {
        self.call(ApiKey::Fetch, 12, request)
    }

    fn list_offset(&mut self, topic: &str, partition: i32, timestamp: i64) -> (i16, i64, i64) {
        self.list_offset_at(7, topic, partition, timestamp)
    }

    /// ListOffsets at `version` for one partition: `(error code, offset, timestamp)`.
    fn list_offset_at(
        &mut self,
        version: i16,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> (i16, i64, i64) {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition;
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = topic_name(topic);
        t.partitions = vec![p];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = (-1).into();
        request.topics = vec![t];
        let response: ListOffsetsResponse = self.call(ApiKey::ListOffsets, version, &request);
        let p = &response.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn batch(values: &[&str], timestamp_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    for (i, value) in values.iter().enumerate() {
        builder.push(&NewRecord {
            key: Some(b"k"),
            value: Some(value.as_bytes()),
            headers: vec![],
            timestamp_ms: timestamp_ms + i as i64,
        });
    }
    builder.build(Offset(0))
}

/// A batch with one record per timestamp in `timestamps_ms` (uncompressed, create time).
fn batch_at(timestamps_ms: &[i64]) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    for &timestamp_ms in timestamps_ms {
        builder.push(&NewRecord {
            key: None,
            value: Some(b"v"),
            headers: vec![],
            timestamp_ms,
        });
    }
    builder.build(Offset(0))
}

/// `batch` as the broker stores it at `base_offset` (only the base offset is patched; the
/// leader epoch stays 0).
fn at_offset(batch: &[u8], base_offset: i64) -> Vec<u8> {
    let mut out = batch.to_vec();
    out[..8].copy_from_slice(&base_offset.to_be_bytes());
    out
}

fn produce_request(topic: &str, partition: i32, acks: i16, batch: &[u8]) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(Bytes::copy_from_slice(batch));
    let mut t = TopicProduceData::default();
    t.name = topic_name(topic);
    t.partition_data = vec![p];
    let mut request = ProduceRequest::default();
    request.acks = acks;
    request.timeout_ms = 5000;
    request.topic_data = vec![t];
    request
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = topic_name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = max_wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 50 << 20;
    request.topics = vec![t];
    request
}

/// Produces (acks 1) and returns the base offset, asserting success.
fn produce_ok(client: &mut Client, topic: &str, partition: i32, acks: i16, batch: &[u8]) -> i64 {
    let response = client.produce(topic, partition, acks, batch);
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    p.base_offset
}

fn fetched_bytes(response: &FetchResponse) -> Vec<u8> {
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    p.records.as_ref().map(|b| b.to_vec()).unwrap_or_default()
}

#[test]
fn api_versions_advertises_served_ranges_only() {
    let broker = Broker::start(1);
    let mut client = broker.client();
    for version in [0i16, 3] {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request.client_software_name = StrBytes::from_static_str("smoke");
            request.client_software_version = StrBytes::from_static_str("1");
        }
        let response: ApiVersionsResponse = client.call(ApiKey::ApiVersions, version, &request);
        assert_eq!(response.error_code, 0);
        let range = |key: ApiKey| {
            response
                .api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .map(|k| (k.min_version, k.max_version))
        };
        assert_eq!(range(ApiKey::Produce), Some((3, 13)));
        assert_eq!(range(ApiKey::Fetch), Some((4, 18)));
        assert_eq!(range(ApiKey::Metadata), Some((0, 13)));
        assert_eq!(range(ApiKey::ApiVersions), Some((0, 4)));
        assert_eq!(range(ApiKey::FindCoordinator), Some((0, 6)));
        assert_eq!(range(ApiKey::JoinGroup), Some((0, 9)));
        assert_eq!(range(ApiKey::OffsetCommit), Some((2, 9)));
        assert_eq!(range(ApiKey::OffsetFetch), Some((1, 9)));
        assert_eq!(range(ApiKey::ConsumerGroupHeartbeat), Some((0, 1)));
        // Served and advertised: idempotent producers get their ids here.
        assert_eq!(range(ApiKey::InitProducerId), Some((0, 5)));
    }
}

/// Create, metadata, produce with acks 1 and -1 over several partitions, read back byte for
/// byte, list offsets — on `shards` shards (partitions spread over them).
fn round_trip(shards: usize) {
    let broker = Broker::start(shards);
    let mut client = broker.client();
    client.create_topic("orders", 4);

    let mut request = MetadataRequest::default();
    request.topics = Some(vec![{
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name("orders"));
        t
    }]);
    let metadata: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!(metadata.brokers[0].port, i32::from(broker.addr.port()));
    let topic = &metadata.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), 4);
    assert!(!topic.topic_id.is_nil());

    let ts = 1_700_000_000_000;
    for partition in 0..4 {
        let first = batch(&["a", "b", "c"], ts);
        let second = batch(&["d"], ts + 100);
        assert_eq!(produce_ok(&mut client, "orders", partition, 1, &first), 0);
        assert_eq!(produce_ok(&mut client, "orders", partition, -1, &second), 3);
        let response = client.fetch(&fetch_request("orders", partition, 0, 0));
        let p = &response.responses[0].partitions[0];
        assert_eq!((p.high_watermark, p.log_start_offset), (4, 0));
        assert_eq!(p.last_stable_offset, 4);
        let mut expected = at_offset(&first, 0);
        expected.extend_from_slice(&at_offset(&second, 3));
        assert_eq!(fetched_bytes(&response), expected, "partition {partition}");

        assert_eq!(client.list_offset("orders", partition, -2), (0, 0, -1));
        assert_eq!(client.list_offset("orders", partition, -1), (0, 4, -1));
        assert_eq!(client.list_offset("orders", partition, ts + 1).1, 1);
        assert_eq!(client.list_offset("orders", partition, ts + 50).1, 3);
        assert_eq!(client.list_offset("orders", partition, ts + 1000).1, -1);
    }
    // Out of range and unknown partitions are errors, not hangs.
    let response = client.fetch(&fetch_request("orders", 0, 99, 5000));
    assert_eq!(response.responses[0].partitions[0].error_code, 1);
    let response = client.produce("orders", 9, 1, &batch(&["x"], ts));
    assert_eq!(response.responses[0].partition_responses[0].error_code, 3);
}

#[test]
fn produce_fetch_list_offsets_round_trip_one_shard() {
    round_trip(1);
}

#[test]
fn produce_fetch_list_offsets_round_trip_two_shards() {
    round_trip(2);
}

/// I7: a fetch parked on an empty partition returns as soon as a produce on another
/// connection (possibly handled by another shard) lands, well before `max_wait_ms`.
#[test]
fn long_poll_fetch_wakes_on_produce_from_another_connection_i7() {
    for shards in [1, 2] {
        let broker = Broker::start(shards);
        let mut admin = broker.client();
        admin.create_topic("waits", 2);
        for partition in 0..2 {
            let mut fetcher = broker.client();
            let (sending, sent) = std::sync::mpsc::channel();
            let waiting = thread::spawn(move || {
                sending.send(()).expect("main thread waits");
                let response = fetcher.fetch(&fetch_request("waits", partition, 0, 20_000));
                (Instant::now(), response)
            });
            // Ordering, not a measured wait: the fetch is on its way before the 300 ms pause,
            // and its answer (which holds the record) cannot come before the produce.
            sent.recv().expect("fetch thread started");
            thread::sleep(Duration::from_millis(300));
            let mut producer = broker.client();
            let record = batch(&["wake"], 1);
            let produced_at = Instant::now();
            produce_ok(&mut producer, "waits", partition, 1, &record);
            let (answered_at, response) = waiting.join().expect("fetch thread");
            assert_eq!(fetched_bytes(&response), at_offset(&record, 0));
            // Woken by the append, not at max_wait (20 s): the bound sits far from both.
            let waited = answered_at.saturating_duration_since(produced_at);
            assert!(
                waited < Duration::from_secs(10),
                "shards {shards}: fetch answered {waited:?} after the produce"
            );
        }
        // With nothing produced, the fetch ends at max_wait (1 s) with an empty answer: it
        // waited, not answered at once (half of max_wait leaves room for the broker's clock,
        // read once per loop turn).
        let mut idle = broker.client();
        let started = Instant::now();
        let response = idle.fetch(&fetch_request("waits", 0, 1, 1_000));
        assert!(started.elapsed() >= Duration::from_millis(500));
        assert!(fetched_bytes(&response).is_empty());
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_and_acks_0_is_silent() {
    let broker = Broker::start(2);
    let mut client = broker.client();
    client.create_topic("pipe", 3);
    // acks=0 first: it gets no response, so the next response read is the next request's.
    client.send(
        ApiKey::Produce,
        9,
        &produce_request("pipe", 0, 0, &batch(&["silent"], 1)),
    );
    let mut sent = Vec::new();
    for i in 0..12 {
        let id = match i % 3 {
            0 => client.send(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default()),
            1 => client.send(
                ApiKey::Produce,
                9,
                &produce_request("pipe", i % 3, 1, &batch(&["p"], 1)),
            ),
            _ => client.send(ApiKey::Fetch, 12, &fetch_request("pipe", 2, 0, 200)),
        };
        sent.push((i % 3, id));
    }
    for (kind, id) in sent {
        let got = match kind {
            0 => client.recv::<ApiVersionsResponse>(0).0,
            1 => {
                let (got, response) = client.recv::<ProduceResponse>(9);
                assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
                got
            }
            _ => client.recv::<FetchResponse>(12).0,
        };
        assert_eq!(got, id, "responses come back in request order");
    }
    // The acks=0 record was appended.
    assert_eq!(client.list_offset("pipe", 0, -1), (0, 1, -1));
}

/// Requests other than Produce hold at most `MAX_IN_FLIGHT` handlers per connection: of
/// `MAX_IN_FLIGHT + 1` pipelined long-polling Fetches the last waits for a slot, and the
/// Produce behind it on the same connection is read only then. So the first Fetch (the
/// shortest wait, the first to end) times out empty; a Produce dispatched at once would have
/// woken it with the record. Produce requests pipeline deeper (`MAX_IN_FLIGHT_PRODUCE`):
/// three times that many one-record Produces are all answered, in order, at consecutive
/// offsets.
#[test]
fn other_requests_hold_at_most_max_in_flight_handlers_and_produces_pipeline_deeper() {
    let broker = Broker::start(2);
    let mut client = broker.client();
    client.create_topic("slots", 1);
    let mut fetches = vec![client.send(ApiKey::Fetch, 12, &fetch_request("slots", 0, 0, 300))];
    for _ in 0..MAX_IN_FLIGHT {
        fetches.push(client.send(ApiKey::Fetch, 12, &fetch_request("slots", 0, 0, 20_000)));
    }
    let produce = client.send(
        ApiKey::Produce,
        9,
        &produce_request("slots", 0, 1, &batch(&["behind"], 1)),
    );
    for (i, want) in fetches.iter().enumerate() {
        let (got, response) = client.recv::<FetchResponse>(12);
        assert_eq!(got, *want, "responses come back in request order");
        if i == 0 {
            assert!(
                fetched_bytes(&response).is_empty(),
                "the Produce behind the waiting Fetch was dispatched while {MAX_IN_FLIGHT} \
                 Fetches held their handlers"
            );
        }
    }
    let (got, response) = client.recv::<ProduceResponse>(9);
    assert_eq!(got, produce);
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 0);

    let sent: Vec<i32> = (0..3 * MAX_IN_FLIGHT_PRODUCE)
        .map(|_| {
            client.send(
                ApiKey::Produce,
                9,
                &produce_request("slots", 0, 1, &batch(&["deep"], 2)),
            )
        })
        .collect();
    for (i, want) in sent.iter().enumerate() {
        let (got, response) = client.recv::<ProduceResponse>(9);
        assert_eq!(got, *want, "responses come back in request order");
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 1 + i as i64));
    }
}

#[test]
fn sigterm_shuts_down_cleanly_and_restart_keeps_the_data() {
    let mut broker = Broker::start(2);
    let mut client = broker.client();
    client.create_topic("durable", 3);
    let mut expected = Vec::new();
    for partition in 0..3 {
        let record = batch(&["kept", "also kept"], 5);
        produce_ok(&mut client, "durable", partition, -1, &record);
        expected.push(at_offset(&record, 0));
    }
    drop(client);
    assert_eq!(broker.terminate(), Some(0), "{}", broker.stderr());
    assert!(
        broker.data_dir().join("clean_shutdown").exists(),
        "clean-shutdown marker written"
    );
    broker.restart();
    assert!(
        !broker.data_dir().join("clean_shutdown").exists(),
        "marker removed at startup"
    );
    let mut client = broker.client();
    for (partition, bytes) in expected.iter().enumerate() {
        let response = client.fetch(&fetch_request("durable", partition as i32, 0, 0));
        assert_eq!(&fetched_bytes(&response), bytes);
    }
    // Still writable after the restart, at the next offset.
    assert_eq!(
        produce_ok(&mut client, "durable", 0, 1, &batch(&["after"], 6)),
        2
    );
    // Leader epochs are stable across the restart (what mirrors and consumers validate
    // positions with): Metadata says 0, and epoch 0 ends at each log end offset.
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![{
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name("durable"));
        t
    }]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    let epochs: Vec<i32> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.leader_epoch)
        .collect();
    assert_eq!(epochs, vec![0, 0, 0]);
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = (-1).into();
    let mut topic = OffsetForLeaderTopic::default();
    topic.topic = topic_name("durable");
    topic.partitions = (0..3)
        .map(|partition| {
            let mut p = OffsetForLeaderPartition::default();
            p.partition = partition;
            p.current_leader_epoch = 0;
            p.leader_epoch = 0;
            p
        })
        .collect();
    request.topics = vec![topic];
    let response: OffsetForLeaderEpochResponse =
        client.call(ApiKey::OffsetForLeaderEpoch, 4, &request);
    let ends: Vec<(i16, i32, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect();
    assert_eq!(ends, vec![(0, 0, 3), (0, 0, 2), (0, 0, 2)]);
}

#[test]
fn invalid_settings_exit_with_code_2() {
    for bad in ["no.such.setting=1", "num.partitions=zero", "novalue"] {
        let output = Command::new(binary())
            .arg("--override")
            .arg(bad)
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "one error line: {stderr}");
    }
}

/// Runs the binary with `overrides` and waits (bounded) for it to exit: (code, stderr).
fn run_to_exit(overrides: &[String]) -> (Option<i32>, String) {
    let mut command = Command::new(binary());
    for o in overrides {
        command.arg("--override").arg(o);
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("a second broker started instead of refusing");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    (status.code(), stderr)
}

#[test]
fn a_second_broker_on_the_same_port_or_data_dir_refuses_to_start() {
    let broker = Broker::start(1);
    let other = tempfile::tempdir().expect("temp dir");
    let (code, stderr) = run_to_exit(&[
        "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
        format!("log.dirs={}", broker.data_dir().display()),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    let (code, stderr) = run_to_exit(&[
        format!("listeners=PLAINTEXT://{}", broker.addr),
        format!("log.dirs={}", other.path().display()),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
    // The first broker still answers.
    let mut client = broker.client();
    let response: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(response.error_code, 0);
}

fn metadata_partitions(client: &mut Client, topic: &str) -> (i16, usize) {
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![{
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name(topic));
        t
    }]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    (
        response.topics[0].error_code,
        response.topics[0].partitions.len(),
    )
}

#[test]
fn admin_apis_create_describe_grow_delete() {
    let broker = Broker::start(2);
    let mut client = broker.client();

    // CreateTopics: a config override, then the refusals Kafka gives.
    let mut topic = CreatableTopic::default();
    topic.name = topic_name("admin");
    topic.num_partitions = -1;
    topic.replication_factor = -1;
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("retention.ms");
    config.value = Some(StrBytes::from_static_str("60000"));
    topic.configs = vec![config];
    let mut bad_name = CreatableTopic::default();
    bad_name.name = topic_name("no/slash");
    bad_name.num_partitions = 1;
    let mut bad_rf = CreatableTopic::default();
    bad_rf.name = topic_name("rf3");
    bad_rf.num_partitions = 1;
    bad_rf.replication_factor = 3;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic.clone(), bad_name, bad_rf];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request);
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, 17, 38]);
    assert_eq!(
        response.topics[0].num_partitions, 1,
        "num.partitions default"
    );
    let mut again = CreateTopicsRequest::default();
    again.topics = vec![topic];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &again);
    assert_eq!(response.topics[0].error_code, 36, "TOPIC_ALREADY_EXISTS");

    // DescribeConfigs: the override is a topic config, the rest defaults.
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_static_str("admin");
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    let entry = |name: &str| {
        result
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .map(|c| (c.value.as_ref().map(|v| v.to_string()), c.config_source))
    };
    assert_eq!(entry("retention.ms"), Some((Some("60000".into()), 1)));
    assert_eq!(entry("cleanup.policy"), Some((Some("delete".into()), 5)));
    assert!(
        entry("minikafka.topic.id").is_none(),
        "reserved keys stay hidden"
    );

    // CreatePartitions: grow only.
    let mut grow = CreatePartitionsTopic::default();
    grow.name = topic_name("admin");
    grow.count = 3;
    let mut request = CreatePartitionsRequest::default();
    request.topics = vec![grow.clone()];
    let response: CreatePartitionsResponse = client.call(ApiKey::CreatePartitions, 3, &request);
    assert_eq!(response.results[0].error_code, 0);
    assert_eq!(metadata_partitions(&mut client, "admin"), (0, 3));
    produce_ok(&mut client, "admin", 2, 1, &batch(&["new partition"], 1));
    grow.count = 2;
    request.topics = vec![grow];
    let response: CreatePartitionsResponse = client.call(ApiKey::CreatePartitions, 3, &request);
    assert_eq!(response.results[0].error_code, 37, "INVALID_PARTITIONS");

    // DeleteTopics v6 by name; afterwards the topic is unknown (auto-create off for v4+).
    let mut state = DeleteTopicState::default();
    state.name = Some(topic_name("admin"));
    let mut request = DeleteTopicsRequest::default();
    request.topics = vec![state];
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &request);
    assert_eq!(response.responses[0].error_code, 0);
    assert!(!response.responses[0].topic_id.is_nil());
    let mut request = MetadataRequest::default();
    request.allow_auto_topic_creation = false;
    request.topics = Some(vec![{
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name("admin"));
        t
    }]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    assert_eq!(response.topics[0].error_code, 3);
    assert!(!broker.data_dir().join("admin-0").exists(), "data removed");

    // InitProducerId: a fresh producer id at epoch 0.
    let mut request = InitProducerIdRequest::default();
    request.transaction_timeout_ms = 1000;
    let response: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &request);
    assert_eq!(response.error_code, 0);
    assert!(response.producer_id.0 >= 0, "{response:?}");
    assert_eq!(response.producer_epoch, 0);

    // An API we do not serve closes the connection (after answering what came before).
    client.send(ApiKey::ElectLeaders, 0, &ApiVersionsRequest::default());
    let mut byte = [0u8; 1];
    assert_eq!(client.stream.read(&mut byte).expect("read"), 0, "closed");
}

/// ListOffsets by timestamp finds the first record at or after the target even inside a batch
/// (not only at batch boundaries), and MAX_TIMESTAMP (-3) the record holding the largest
/// timestamp, even when it is neither the first nor the last of its batch; both from the
/// partition log's time index on the owning shard, before and after a restart (the index is
/// rebuilt). No match: offset -1, timestamp -1, no error.
#[test]
fn list_offsets_by_timestamp_inside_batches_and_max_timestamp() {
    let mut broker = Broker::start(2);
    let mut client = broker.client();
    client.create_topic("clock", 2);
    let ts = 1_700_000_000_000;
    for partition in 0..2 {
        // Empty partition: nothing has a timestamp at all.
        assert_eq!(client.list_offset("clock", partition, -3), (0, -1, -1));
        assert_eq!(client.list_offset("clock", partition, ts), (0, -1, -1));
        // Offsets 0..3 and 3..6, timestamps out of order inside each batch.
        let first = batch_at(&[ts, ts + 300, ts + 200]);
        let second = batch_at(&[ts + 320, ts + 400, ts + 330]);
        assert_eq!(produce_ok(&mut client, "clock", partition, 1, &first), 0);
        assert_eq!(produce_ok(&mut client, "clock", partition, 1, &second), 3);
    }
    let expectations: [(i64, (i16, i64, i64)); 9] = [
        (-3, (0, 4, ts + 400)), // max timestamp: the middle record of the second batch
        (-2, (0, 0, -1)),
        (-1, (0, 6, -1)),
        (0, (0, 0, ts)),
        (ts, (0, 0, ts)),
        (ts + 1, (0, 1, ts + 300)), // inside the first batch
        (ts + 301, (0, 3, ts + 320)),
        (ts + 321, (0, 4, ts + 400)), // inside the second batch, past its first record
        (ts + 401, (0, -1, -1)),      // nothing that late
    ];
    for round in ["before restart", "after restart"] {
        for partition in 0..2 {
            for (target, want) in expectations {
                assert_eq!(
                    client.list_offset("clock", partition, target),
                    want,
                    "{round}: partition {partition}, timestamp {target}"
                );
            }
            // Kafka brokers answer -3 by its meaning at every version (clients only send it
            // from v7 on).
            assert_eq!(
                client.list_offset_at(1, "clock", partition, -3),
                (0, 4, ts + 400),
                "{round}: v1"
            );
        }
        if round == "before restart" {
            assert_eq!(broker.terminate(), Some(0));
            broker.restart();
            client = broker.client();
        }
    }
}

/// librdkafka 2.12's all-topics Metadata v13 request (a 4-byte topics placeholder where a
/// 1-byte null compact array belongs: 3 bytes trail the body) is answered like any other, and
/// the connection stays usable: the pre-check ignores trailing bytes, as Kafka does.
#[test]
fn librdkafka_all_topics_metadata_v13_with_trailing_bytes_is_answered() {
    let broker = Broker::start(1);
    let mut client = broker.client();
    client.create_topic("everything", 3);
    let mut frame = vec![0, 3, 0, 13];
    frame.extend_from_slice(&77i32.to_be_bytes());
    frame.extend_from_slice(&[0, 7]);
    frame.extend_from_slice(b"rdkafka");
    frame.push(0); // header tagged fields
    frame.extend_from_slice(&[0, 0, 0, 0]); // null topics, then 3 placeholder zero bytes
    frame.extend_from_slice(&[1, 0, 0]); // allow auto create, topic ops, tags: ignored
    let mut wire = (frame.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(&frame);
    client.stream.write_all(&wire).expect("write");
    let (correlation_id, response): (i32, MetadataResponse) = client.recv(13);
    assert_eq!(correlation_id, 77);
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("everything"))
        .expect("all topics listed");
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), 3);
    // Still open and in step.
    let versions: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(versions.error_code, 0);
}

/// True when the broker answers an ApiVersions on `client`; false when it closed the
/// connection instead.
fn answers_api_versions(client: &mut Client) -> bool {
    client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let mut size = [0u8; 4];
    if client.stream.read_exact(&mut size).is_err() {
        return false;
    }
    let mut body = vec![0u8; i32::from_be_bytes(size).clamp(0, 1 << 20) as usize];
    client.stream.read_exact(&mut body).is_ok()
}

/// `max.connections` counts the connections of every shard together (a `Permits` of
/// `core::shard_sync`, I11): beyond it a new connection is closed at once, and closing one
/// frees its place for the next.
#[test]
fn connections_beyond_max_connections_are_refused_across_shards() {
    let broker = Broker::start_with(2, &["max.connections=2"]);
    let mut first = broker.client();
    let mut second = broker.client();
    assert!(answers_api_versions(&mut first));
    assert!(answers_api_versions(&mut second));
    for _ in 0..4 {
        let mut refused = broker.client();
        assert!(
            !answers_api_versions(&mut refused),
            "a third connection was served"
        );
    }
    drop(first);
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut next = broker.client();
        if answers_api_versions(&mut next) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the freed place was never reused"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        answers_api_versions(&mut second),
        "the surviving connection still works"
    );
}

/// `__consumer_offsets` exists from the first start with `offsets.topic.num.partitions`
/// partitions (Kafka's 50 by default), is listed as internal, refuses user produce
/// (INVALID_TOPIC_EXCEPTION, as Kafka), deletion and new partitions
/// (TOPIC_AUTHORIZATION_FAILED), has retention off, and keeps its partition count across a
/// restart with another setting (groups are placed by it).
#[test]
fn the_offsets_topic_is_created_internal_and_protected() {
    let mut broker = Broker::start(2);
    let mut client = broker.client();
    let mut all = MetadataRequest::default();
    all.topics = None;
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &all);
    let offsets = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("__consumer_offsets"))
        .expect("listed with all topics");
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 50);
    assert_eq!(
        metadata_partitions(&mut client, "__consumer_offsets"),
        (0, 50)
    );

    let response = client.produce("__consumer_offsets", 0, 1, &batch(&["forged"], 1));
    assert_eq!(
        response.responses[0].partition_responses[0].error_code, 17,
        "INVALID_TOPIC_EXCEPTION"
    );
    let mut state = DeleteTopicState::default();
    state.name = Some(topic_name("__consumer_offsets"));
    let mut request = DeleteTopicsRequest::default();
    request.topics = vec![state];
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &request);
    assert_eq!(
        response.responses[0].error_code, 29,
        "TOPIC_AUTHORIZATION_FAILED"
    );
    let mut grow = CreatePartitionsTopic::default();
    grow.name = topic_name("__consumer_offsets");
    grow.count = 60;
    let mut request = CreatePartitionsRequest::default();
    request.topics = vec![grow];
    let response: CreatePartitionsResponse = client.call(ApiKey::CreatePartitions, 3, &request);
    assert_eq!(
        response.results[0].error_code, 29,
        "TOPIC_AUTHORIZATION_FAILED"
    );

    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_static_str("__consumer_offsets");
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
    let value = |name: &str| {
        response.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
    };
    assert_eq!(value("retention.ms").as_deref(), Some("-1"));
    assert_eq!(value("retention.bytes").as_deref(), Some("-1"));

    assert_eq!(broker.terminate(), Some(0));
    broker.extra.push("offsets.topic.num.partitions=3".into());
    broker.restart();
    let mut client = broker.client();
    assert_eq!(
        metadata_partitions(&mut client, "__consumer_offsets"),
        (0, 50)
    );
}

/// FindCoordinator v0-6: a group's (and a transactional id's) coordinator is this broker at
/// its advertised address, one answer per key from v4 on.
#[test]
fn find_coordinator_answers_this_broker_for_groups() {
    let broker = Broker::start_with(2, &["offsets.topic.num.partitions=4"]);
    let mut client = broker.client();
    let port = i32::from(broker.addr.port());
    for version in 0..=3i16 {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_static_str("my-group");
        let response: FindCoordinatorResponse =
            client.call(ApiKey::FindCoordinator, version, &request);
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(response.node_id.0, 0);
        assert_eq!(response.host.as_str(), "127.0.0.1");
        assert_eq!(response.port, port);
        if version >= 1 {
            request.key_type = 1;
            let response: FindCoordinatorResponse =
                client.call(ApiKey::FindCoordinator, version, &request);
            assert_eq!(
                (response.error_code, response.node_id.0, response.port),
                (0, 0, port),
                "v{version}: the transaction coordinator is this broker"
            );
        }
    }
    for version in 4..=6i16 {
        let mut request = FindCoordinatorRequest::default();
        request.coordinator_keys = ["a", "b", "c"]
            .iter()
            .map(|k| StrBytes::from_string(k.to_string()))
            .collect();
        let response: FindCoordinatorResponse =
            client.call(ApiKey::FindCoordinator, version, &request);
        let keys: Vec<&str> = response
            .coordinators
            .iter()
            .map(|c| c.key.as_str())
            .collect();
        assert_eq!(keys, vec!["a", "b", "c"], "v{version}");
        for c in &response.coordinators {
            assert_eq!((c.error_code, c.node_id.0, c.port), (0, 0, port));
        }
        request.key_type = 2;
        let response: FindCoordinatorResponse =
            client.call(ApiKey::FindCoordinator, version, &request);
        assert!(response.coordinators.iter().all(|c| c.error_code == 42));
    }
}

fn join(client: &mut Client, group: &str, member: &str, rebalance_ms: i32) -> JoinGroupResponse {
    let mut protocol =
        kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = Bytes::from_static(b"subscription");
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.session_timeout_ms = 6000;
    request.rebalance_timeout_ms = rebalance_ms;
    request.member_id = StrBytes::from_string(member.to_string());
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol];
    client.call(ApiKey::JoinGroup, 7, &request)
}

fn commit(client: &mut Client, group: &str, generation: i32, member: &str, offset: i64) -> i16 {
    let mut partition =
        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = offset;
    let mut topic =
        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = topic_name("fenced");
    topic.partitions = vec![partition];
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.generation_id_or_member_epoch = generation;
    request.member_id = StrBytes::from_string(member.to_string());
    request.topics = vec![topic];
    let response: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &request);
    response.topics[0].partitions[0].error_code
}

fn fetch_committed(client: &mut Client, group: &str) -> i64 {
    let mut topic =
        kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
    topic.name = topic_name("fenced");
    topic.partition_indexes = vec![0];
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.topics = Some(vec![topic]);
    let response: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 7, &request);
    assert_eq!(response.error_code, 0);
    response.topics[0].partitions[0].committed_offset
}

/// Generation fencing over the wire (I22): a commit with a stale or future generation, or by
/// an unknown member, is refused (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID) and never moves the
/// offset; a member rebalanced away (it did not rejoin in time) cannot commit either.
#[test]
fn stale_generations_and_rebalanced_members_cannot_commit_i22() {
    let broker = Broker::start_with(
        2,
        &[
            "group.initial.rebalance.delay.ms=0",
            "offsets.topic.num.partitions=4",
        ],
    );
    let mut first = broker.client();
    first.create_topic("fenced", 1);
    let required = join(&mut first, "fence", "", 1000);
    assert_eq!(required.error_code, 79, "MEMBER_ID_REQUIRED");
    let m1 = required.member_id.to_string();
    let joined = join(&mut first, "fence", &m1, 1000);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.leader.as_str(), m1);
    let generation = joined.generation_id;
    let mut assignment =
        kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default();
    assignment.member_id = StrBytes::from_string(m1.clone());
    assignment.assignment = Bytes::from_static(b"all of it");
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(StrBytes::from_static_str("fence"));
    sync.generation_id = generation;
    sync.member_id = StrBytes::from_string(m1.clone());
    sync.assignments = vec![assignment];
    let synced: SyncGroupResponse = first.call(ApiKey::SyncGroup, 3, &sync);
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"all of it");

    assert_eq!(commit(&mut first, "fence", generation, &m1, 5), 0);
    assert_eq!(commit(&mut first, "fence", generation - 1, &m1, 9), 22);
    assert_eq!(commit(&mut first, "fence", generation + 1, &m1, 9), 22);
    assert_eq!(commit(&mut first, "fence", generation, "intruder", 9), 25);
    assert_eq!(fetch_committed(&mut first, "fence"), 5);

    // A second member joins; the first never rejoins and is dropped after its 1 s rebalance
    // timeout. The second then leads generation + 1 alone.
    let mut second = broker.client();
    let required = join(&mut second, "fence", "", 1000);
    let m2 = required.member_id.to_string();
    let mut heartbeat = HeartbeatRequest::default();
    heartbeat.group_id = GroupId(StrBytes::from_static_str("fence"));
    heartbeat.generation_id = generation;
    heartbeat.member_id = StrBytes::from_string(m1.clone());
    let joined = join(&mut second, "fence", &m2, 1000);
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.generation_id, generation + 1);
    assert_eq!(joined.leader.as_str(), m2);
    let beat: HeartbeatResponse = first.call(ApiKey::Heartbeat, 3, &heartbeat);
    assert_ne!(
        beat.error_code, 0,
        "the dropped member's heartbeat is refused"
    );
    let code = commit(&mut first, "fence", generation, &m1, 7);
    assert!(
        code == 25 || code == 22,
        "rebalanced-away member committed: {code}"
    );
    assert_eq!(
        fetch_committed(&mut first, "fence"),
        5,
        "the offset never moved"
    );
}

/// Hostile joins against the live broker: 4 MiB of protocol metadata, no protocols, and more
/// members than `group.max.size` get Kafka error codes (INVALID_REQUEST, INCONSISTENT_GROUP_PROTOCOL,
/// GROUP_MAX_SIZE_REACHED); the connection and the broker keep serving.
#[test]
fn hostile_joins_get_error_codes_and_the_broker_survives() {
    let broker = Broker::start_with(
        2,
        &["group.initial.rebalance.delay.ms=0", "group.max.size=50"],
    );
    let mut client = broker.client();
    let mut protocol =
        kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = Bytes::from(vec![0xab; 4 << 20]);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("hostile"));
    request.session_timeout_ms = 6000;
    request.rebalance_timeout_ms = 6000;
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol];
    let response: JoinGroupResponse = client.call(ApiKey::JoinGroup, 7, &request);
    assert_eq!(
        response.error_code, 42,
        "INVALID_REQUEST for 4 MiB of metadata"
    );
    request.protocols.clear();
    let response: JoinGroupResponse = client.call(ApiKey::JoinGroup, 7, &request);
    assert_eq!(
        response.error_code, 23,
        "INCONSISTENT_GROUP_PROTOCOL without protocols"
    );

    let mut codes = std::collections::BTreeMap::new();
    for _ in 0..60 {
        let response = join(&mut client, "crowded", "", 6000);
        *codes.entry(response.error_code).or_insert(0) += 1;
    }
    assert_eq!(
        codes,
        [(79, 50), (81, 10)].into_iter().collect(),
        "MEMBER_ID_REQUIRED up to group.max.size, then GROUP_MAX_SIZE_REACHED"
    );
    let versions: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(versions.error_code, 0);
    let mut other = broker.client();
    let versions: ApiVersionsResponse =
        other.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(versions.error_code, 0);
}

/// Shutdown answers a JoinGroup held at the rebalance barrier with NOT_COORDINATOR (the
/// client finds the coordinator again after the restart) instead of waiting for the barrier,
/// and the broker still exits cleanly.
#[test]
fn sigterm_answers_a_held_join_with_not_coordinator() {
    let mut broker = Broker::start_with(
        1,
        &[
            "group.initial.rebalance.delay.ms=600000",
            "group.max.session.timeout.ms=600000",
        ],
    );
    let mut member = broker.client();
    let mut protocol =
        kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("held"));
    request.session_timeout_ms = 600_000;
    request.rebalance_timeout_ms = 600_000;
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol];
    let required: JoinGroupResponse = member.call(ApiKey::JoinGroup, 4, &request);
    assert_eq!(required.error_code, 79);
    request.member_id = required.member_id.clone();
    member.send(ApiKey::JoinGroup, 4, &request);
    // The join is held once DescribeGroups shows the group rebalancing with its member.
    let mut observer = broker.client();
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut describe = kafka_protocol::messages::DescribeGroupsRequest::default();
        describe.groups = vec![GroupId(StrBytes::from_static_str("held"))];
        let response: kafka_protocol::messages::DescribeGroupsResponse =
            observer.call(ApiKey::DescribeGroups, 5, &describe);
        let group = &response.groups[0];
        if group.group_state.as_str() == "PreparingRebalance" && !group.members.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the join never arrived: {group:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(broker.terminate(), Some(0), "clean exit");
    let (_, held): (i32, JoinGroupResponse) = member.recv(4);
    assert_eq!(held.error_code, 16, "NOT_COORDINATOR");
}

/// DescribeGroups at every served version (I142): an unknown group is `Dead` without an error
/// at v0–5 and GROUP_ID_NOT_FOUND with Kafka's message at v6 (KIP-1043, what Kafka 4's admin
/// client and MirrorMaker 2 negotiate); a live group is described the same way at v5 and v6,
/// with its member's instance id, and ApiVersions advertises v6.
#[test]
fn describe_groups_v6_answers_unknown_groups_with_group_id_not_found_i142() {
    let broker = Broker::start_with(1, &["group.initial.rebalance.delay.ms=0"]);
    let mut client = broker.client();
    let versions: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let advertised = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::DescribeGroups as i16)
        .map(|k| (k.min_version, k.max_version));
    assert_eq!(advertised, Some((0, 6)));

    let required = join(&mut client, "live", "", 1000);
    assert_eq!(required.error_code, 79, "MEMBER_ID_REQUIRED");
    let member = required.member_id.to_string();
    let joined = join(&mut client, "live", &member, 1000);
    assert_eq!(joined.error_code, 0, "{joined:?}");

    let describe = |client: &mut Client, version: i16| {
        let mut request = kafka_protocol::messages::DescribeGroupsRequest::default();
        request.groups = vec![
            GroupId(StrBytes::from_static_str("nobody")),
            GroupId(StrBytes::from_static_str("live")),
        ];
        request.include_authorized_operations = version >= 3;
        let response: kafka_protocol::messages::DescribeGroupsResponse =
            client.call(ApiKey::DescribeGroups, version, &request);
        response
    };
    for version in 0..=5 {
        let response = describe(&mut client, version);
        let unknown = &response.groups[0];
        assert_eq!(unknown.group_id.as_str(), "nobody");
        assert_eq!(unknown.error_code, 0, "v{version}: {unknown:?}");
        assert_eq!(unknown.group_state.as_str(), "Dead", "v{version}");
        let live = &response.groups[1];
        assert_eq!(live.error_code, 0, "v{version}: {live:?}");
        assert_eq!(live.members.len(), 1, "v{version}");
        assert_eq!(live.members[0].member_id.as_str(), member, "v{version}");
    }
    let response = describe(&mut client, 6);
    let unknown = &response.groups[0];
    assert_eq!(unknown.group_id.as_str(), "nobody");
    assert_eq!(unknown.error_code, 69, "GROUP_ID_NOT_FOUND: {unknown:?}");
    assert_eq!(
        unknown.error_message.as_ref().map(|m| m.as_str()),
        Some("Group nobody not found.")
    );
    assert_eq!(
        unknown.authorized_operations,
        i32::MIN,
        "operations omitted"
    );
    let live = &response.groups[1];
    assert_eq!(live.error_code, 0, "{live:?}");
    assert_eq!(live.error_message, None);
    assert_eq!(live.group_state.as_str(), "CompletingRebalance");
    assert_eq!(live.protocol_type.as_str(), "consumer");
    assert_eq!(live.protocol_data.as_str(), "range");
    assert_eq!(live.members.len(), 1);
    assert_eq!(live.members[0].member_id.as_str(), member);
    assert_eq!(&live.members[0].member_metadata[..], b"subscription");
}

/// MirrorMaker 2's internal topics on a one-node source (I143): its `createCompactedTopic`
/// (one partition, `cleanup.policy=compact`) with the default replication factor 3 gets
/// INVALID_REPLICATION_FACTOR and a message, as from a one-broker Kafka (MM2 then fails the
/// connector); with 1, as docs/SCALING.md's properties set it, or -1, it is created compacted.
#[test]
fn mirror_maker_2_compacted_internal_topics_need_replication_factor_1_i143() {
    let broker = Broker::start(1);
    let mut client = broker.client();
    let compacted = |name: &str, replication_factor: i16| {
        let mut config = CreatableTopicConfig::default();
        config.name = StrBytes::from_static_str("cleanup.policy");
        config.value = Some(StrBytes::from_static_str("compact"));
        let mut topic = CreatableTopic::default();
        topic.name = topic_name(name);
        topic.num_partitions = 1;
        topic.replication_factor = replication_factor;
        topic.configs = vec![config];
        topic
    };
    let mut codes = Vec::new();
    for (name, replication_factor) in [
        ("mm2-offset-syncs.kafka.internal", 3),
        ("mm2-offset-syncs.kafka.internal", 1),
        ("heartbeats", -1),
    ] {
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = 30_000;
        request.topics = vec![compacted(name, replication_factor)];
        let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request);
        let result = &response.topics[0];
        if result.error_code == 38 {
            let message = result.error_message.as_ref().map(|m| m.to_string());
            assert!(
                message
                    .as_deref()
                    .is_some_and(|m| m.contains("replication factor 3")),
                "{message:?}"
            );
        }
        codes.push(result.error_code);
    }
    assert_eq!(
        codes,
        vec![38, 0, 0],
        "INVALID_REPLICATION_FACTOR, then created"
    );
    for name in ["mm2-offset-syncs.kafka.internal", "heartbeats"] {
        assert_eq!(metadata_partitions(&mut client, name), (0, 1), "{name}");
        let mut resource = DescribeConfigsResource::default();
        resource.resource_type = 2;
        resource.resource_name = StrBytes::from_string(name.to_string());
        resource.configuration_keys = Some(vec![StrBytes::from_static_str("cleanup.policy")]);
        let mut describe = DescribeConfigsRequest::default();
        describe.resources = vec![resource];
        let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &describe);
        let config = &response.results[0].configs[0];
        assert_eq!(config.value.as_ref().map(|v| v.as_str()), Some("compact"));
        assert_eq!(config.config_source, 1, "a topic config");
    }
}
