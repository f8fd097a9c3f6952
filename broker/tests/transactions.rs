//! The transaction coordinator as the broker hosts it, over real TCP on 127.0.0.1 with real
//! data files (two shards, so requests also reach coordinators on the other shard): the
//! transaction APIs at Kafka 4.1's versions, markers written to the partitions, KIP-890's
//! produce verification, and `__transaction_state` replayed after kill -9 (docs/DESIGN.md,
//! "Transactions: coordinator hosting", I62–I66).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::control_batch::decode_marker;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{compute_crc, BatchBuilder, BatchHeader, NewRecord};
use minikafka_core::types::Offset;

use common::librdkafka::TEST_LIMIT;
use common::typed::TypedClient;
use common::{bounded, free_port, Broker};

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

const NONE: i16 = ErrorCode::NONE.code();

fn create_topic(client: &mut TypedClient, name: &str, partitions: i32) {
    let mut req = CreateTopicsRequest::default();
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = partitions;
    t.replication_factor = 1;
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, NONE, "create {name}");
}

/// InitProducerId (v4) for `id`: (error code, producer id, epoch).
fn init(client: &mut TypedClient, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.transaction_timeout_ms = timeout_ms;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let r: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &req);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// InitProducerId until it is not CONCURRENT_TRANSACTIONS (an abort in progress).
fn init_settled(client: &mut TypedClient, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = init(client, id, timeout_ms);
        if r.0 != ErrorCode::CONCURRENT_TRANSACTIONS.code() || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// AddPartitionsToTxn at `version` (0–3): each partition's code, in request order.
fn add_partitions(
    client: &mut TypedClient,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<(String, i32, i16)> {
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s(id));
    req.v3_and_below_producer_id = ProducerId(pid);
    req.v3_and_below_producer_epoch = epoch;
    let mut topics: Vec<add_partitions_to_txn_request::AddPartitionsToTxnTopic> = Vec::new();
    for (topic, p) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(*p),
            None => {
                let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                t.name = TopicName(s(topic));
                t.partitions = vec![*p];
                topics.push(t);
            }
        }
    }
    req.v3_and_below_topics = topics;
    let r: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, version, &req);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition.iter().map(move |p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect()
}

fn end_txn(client: &mut TypedClient, version: i16, id: &str, pe: (i64, i16), commit: bool) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.committed = commit;
    let r: EndTxnResponse = client.call(ApiKey::EndTxn, version, &req);
    r.error_code
}

fn describe(
    client: &mut TypedClient,
    ids: &[&str],
) -> Vec<describe_transactions_response::TransactionState> {
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = ids.iter().map(|id| TransactionalId(s(id))).collect();
    let r: DescribeTransactionsResponse = client.call(ApiKey::DescribeTransactions, 0, &req);
    r.transaction_states
}

/// Describes `id` until its state is `want` (the markers are written in the background).
fn wait_for_state(
    client: &mut TypedClient,
    id: &str,
    want: &str,
) -> describe_transactions_response::TransactionState {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = describe(client, &[id]).remove(0);
        if d.transaction_state.as_str() == want || Instant::now() > deadline {
            assert_eq!(d.transaction_state.as_str(), want, "{id}: {d:?}");
            return d;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn list(
    client: &mut TypedClient,
    states: &[&str],
    pattern: Option<&str>,
) -> (i16, Vec<String>, Vec<String>) {
    let mut req = ListTransactionsRequest::default();
    req.state_filters = states.iter().map(|x| s(x)).collect();
    req.duration_filter = -1;
    req.transactional_id_pattern = pattern.map(s);
    let r: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 2, &req);
    (
        r.error_code,
        r.transaction_states
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect(),
        r.unknown_state_filters
            .iter()
            .map(|x| x.to_string())
            .collect(),
    )
}

/// A transactional batch of one record from producer `pe`.
fn txn_batch(pe: (i64, i16), sequence: i32, value: &[u8]) -> Bytes {
    let mut b = BatchBuilder::new();
    b.producer_id = pe.0;
    b.producer_epoch = pe.1;
    b.base_sequence = sequence;
    b.push(&NewRecord {
        value: Some(value),
        timestamp_ms: common::librdkafka::now_ms(),
        ..NewRecord::default()
    });
    let mut batch = b.build(Offset(0));
    // Attributes (bytes 21..23): the transactional bit; then the CRC (17..21) again.
    batch[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = compute_crc(&batch);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// Produces `batch` to `topic`/`partition` as transaction `id` (Produce v9): the code.
fn produce(client: &mut TypedClient, id: &str, topic: &str, partition: i32, batch: Bytes) -> i16 {
    let mut p = produce_request::PartitionProduceData::default();
    p.index = partition;
    p.records = Some(batch);
    let mut t = produce_request::TopicProduceData::default();
    t.name = TopicName(s(topic));
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![t];
    let r: ProduceResponse = client.call(ApiKey::Produce, 9, &req);
    r.responses[0].partition_responses[0].error_code
}

fn log_end(client: &mut TypedClient, topic: &str, partition: i32) -> i64 {
    let mut p = list_offsets_request::ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let r: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 5, &req);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    p.offset
}

/// The value of sample `series` (e.g. `minikafka_transactions_ongoing`) on the metrics page.
fn metric(addr: SocketAddr, series: &str) -> f64 {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .expect("send");
    let mut page = String::new();
    stream.read_to_string(&mut page).expect("read the page");
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {page}"))
}

/// A broker with two shards, 4 state partitions, fsync, a fast timeout scan, and a metrics
/// endpoint (returned beside it).
fn started() -> (Broker, SocketAddr) {
    let metrics: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let broker = Broker::builder()
        .with("metrics.listener", &format!("http://{metrics}"))
        .with("num.shards", "2")
        .with("transaction.state.log.num.partitions", "4")
        .with("offsets.topic.num.partitions", "4")
        .with("flush.policy", "fsync")
        .with(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "200",
        )
        .start();
    (broker, metrics)
}

#[test]
fn a_transaction_commits_with_its_markers_and_a_new_producer_fences_the_old() {
    bounded(TEST_LIMIT, || {
        let (broker, metrics) = started();
        let mut c = TypedClient::connect(broker.addr());
        let versions: ApiVersionsResponse =
            c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        for (api, max) in [
            (ApiKey::AddPartitionsToTxn, 5),
            (ApiKey::AddOffsetsToTxn, 4),
            (ApiKey::EndTxn, 5),
            (ApiKey::DescribeTransactions, 0),
            (ApiKey::ListTransactions, 2),
            (ApiKey::InitProducerId, 5),
        ] {
            let listed = versions
                .api_keys
                .iter()
                .find(|k| k.api_key == api as i16)
                .map(|k| (k.min_version, k.max_version));
            assert_eq!(listed, Some((0, max)), "{api:?}");
        }
        // FindCoordinator key type 1: this node, one key (v3) and a batch (v4).
        let mut find = FindCoordinatorRequest::default();
        find.key = s("tx-a");
        find.key_type = 1;
        let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &find);
        assert_eq!((r.error_code, r.port), (NONE, i32::from(broker.port())));
        let mut find = FindCoordinatorRequest::default();
        find.key_type = 1;
        find.coordinator_keys = vec![s("tx-a"), s("tx-b")];
        let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &find);
        assert!(r.coordinators.iter().all(|k| k.error_code == NONE), "{r:?}");

        create_topic(&mut c, "out", 2);
        assert_eq!(
            init(&mut c, "tx-a", 1_000_000).0,
            ErrorCode::INVALID_TRANSACTION_TIMEOUT.code(),
            "above transaction.max.timeout.ms"
        );
        let (code, pid, epoch) = init(&mut c, "tx-a", 60_000);
        assert_eq!((code, epoch), (NONE, 0));
        let pe = (pid, epoch);
        // A partition that does not exist: nothing is added (Kafka's codes).
        assert_eq!(
            add_partitions(&mut c, 3, "tx-a", pe, &[("out", 0), ("nope", 0)]),
            vec![
                ("out".into(), 0, ErrorCode::OPERATION_NOT_ATTEMPTED.code()),
                (
                    "nope".into(),
                    0,
                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
                ),
            ]
        );
        assert_eq!(
            add_partitions(&mut c, 3, "tx-a", pe, &[("out", 0)]),
            vec![("out".into(), 0, NONE)]
        );
        // I66 (KIP-890 part 1): a transactional batch for a partition outside the
        // transaction is refused before it reaches the log; one inside is appended.
        assert_eq!(
            produce(&mut c, "tx-a", "out", 1, txn_batch(pe, 0, b"stray")),
            ErrorCode::INVALID_TXN_STATE.code()
        );
        assert_eq!(log_end(&mut c, "out", 1), 0, "nothing appended to out-1");
        assert_eq!(
            produce(&mut c, "tx-a", "out", 0, txn_batch(pe, 0, b"v")),
            NONE
        );
        // Describe and List see the ongoing transaction.
        let d = describe(&mut c, &["tx-a", "tx-unknown"]);
        assert_eq!(d[0].error_code, NONE);
        assert_eq!(d[0].transaction_state.as_str(), "Ongoing");
        assert_eq!((d[0].producer_id.0, d[0].producer_epoch), pe);
        assert_eq!(d[0].transaction_timeout_ms, 60_000);
        assert_eq!(d[0].topics.len(), 1);
        assert_eq!(
            (
                d[0].topics[0].topic.0.as_str(),
                &d[0].topics[0].partitions[..]
            ),
            ("out", &[0][..])
        );
        assert_eq!(
            d[1].error_code,
            ErrorCode::TRANSACTIONAL_ID_NOT_FOUND.code()
        );
        let (code, ids, unknown) = list(&mut c, &["Ongoing", "Bogus"], None);
        assert_eq!(
            (code, ids, unknown),
            (NONE, vec!["tx-a".into()], vec!["Bogus".into()])
        );
        assert_eq!(list(&mut c, &[], Some("tx-.*")).1, vec!["tx-a".to_string()]);
        assert!(
            list(&mut c, &[], Some("x-.*")).1.is_empty(),
            "the whole id must match"
        );
        assert_eq!(
            list(&mut c, &[], Some("(")).0,
            ErrorCode::INVALID_REQUEST.code()
        );
        assert_eq!(metric(metrics, "minikafka_transactions_ongoing"), 1.0);
        // Commit: answered once PrepareCommit is durable; the marker follows (I64).
        assert_eq!(end_txn(&mut c, 3, "tx-a", pe, true), NONE);
        let d = wait_for_state(&mut c, "tx-a", "CompleteCommit");
        assert_eq!((d.producer_id.0, d.producer_epoch), pe);
        assert_eq!(
            log_end(&mut c, "out", 0),
            2,
            "the record and its COMMIT marker"
        );
        // A second producer with the same id bumps the epoch; the first is fenced, with the
        // code each version knows (I63).
        let (code, pid2, epoch2) = init(&mut c, "tx-a", 60_000);
        assert_eq!((code, pid2, epoch2), (NONE, pid, 1));
        assert_eq!(
            add_partitions(&mut c, 3, "tx-a", pe, &[("out", 1)]),
            vec![("out".into(), 1, ErrorCode::PRODUCER_FENCED.code())]
        );
        assert_eq!(
            add_partitions(&mut c, 1, "tx-a", pe, &[("out", 1)]),
            vec![("out".into(), 1, ErrorCode::INVALID_PRODUCER_EPOCH.code())]
        );
        assert_eq!(
            end_txn(&mut c, 1, "tx-a", pe, true),
            ErrorCode::INVALID_PRODUCER_EPOCH.code()
        );
        assert_eq!(
            produce(&mut c, "tx-a", "out", 0, txn_batch(pe, 1, b"zombie")),
            ErrorCode::INVALID_PRODUCER_EPOCH.code(),
            "a fenced producer's batch is refused by the verification"
        );
        // Abort with the new epoch: an empty transaction ends at once.
        assert_eq!(
            add_partitions(&mut c, 3, "tx-a", (pid, 1), &[("out", 1)]),
            vec![("out".into(), 1, NONE)]
        );
        assert_eq!(end_txn(&mut c, 5, "tx-a", (pid, 1), false), NONE);
        wait_for_state(&mut c, "tx-a", "CompleteAbort");
        assert_eq!(log_end(&mut c, "out", 1), 1, "the ABORT marker");
        let count = |result: &str| {
            metric(
                metrics,
                &format!("minikafka_transactions_total{{result=\"{result}\"}}"),
            )
        };
        assert_eq!(
            (count("committed"), count("aborted"), count("timed_out")),
            (1.0, 1.0, 0.0)
        );
        assert_eq!(metric(metrics, "minikafka_transactions_ongoing"), 0.0);
    });
}

#[test]
fn an_open_transaction_survives_kill_9_and_is_aborted_by_its_timeout() {
    bounded(TEST_LIMIT, || {
        let (mut broker, metrics) = started();
        let mut c = TypedClient::connect(broker.addr());
        create_topic(&mut c, "out", 1);
        let (code, pid, epoch) = init(&mut c, "tx-t", 2_000);
        assert_eq!((code, epoch), (NONE, 0));
        assert_eq!(
            add_partitions(&mut c, 3, "tx-t", (pid, 0), &[("out", 0)]),
            vec![("out".into(), 0, NONE)]
        );
        assert_eq!(
            produce(&mut c, "tx-t", "out", 0, txn_batch((pid, 0), 0, b"open")),
            NONE
        );
        // I62: the Ongoing record was durable before AddPartitionsToTxn was answered, so
        // the restarted coordinator replays it (I64).
        broker.kill9();
        broker.restart();
        let mut c = TypedClient::connect(broker.addr());
        // The coordinator aborts it when its timeout passes, bumping the epoch so the
        // producer is fenced, and writes the ABORT marker (I64).
        let d = wait_for_state(&mut c, "tx-t", "CompleteAbort");
        assert_eq!((d.producer_id.0, d.producer_epoch), (pid, 1));
        assert_eq!(
            log_end(&mut c, "out", 0),
            2,
            "the record and its ABORT marker"
        );
        assert_eq!(
            metric(
                metrics,
                "minikafka_transactions_total{result=\"timed_out\"}"
            ),
            1.0
        );
        assert_eq!(
            end_txn(&mut c, 3, "tx-t", (pid, 0), true),
            ErrorCode::PRODUCER_FENCED.code()
        );
        // The producer initialises again: the same id, the next epoch.
        assert_eq!(init_settled(&mut c, "tx-t", 2_000), (NONE, pid, 2));
    });
}

/// The coordinator's bounds on transactional-id state are settings (I38): with
/// `transaction.max.transactional.ids=2` on one coordinator a third id is
/// COORDINATOR_NOT_AVAILABLE (retriable) while the first two keep working, and with
/// `transaction.max.partitions.per.transaction=2` a third partition is INVALID_REQUEST while
/// the transaction keeps its two and commits.
#[test]
fn the_coordinator_caps_are_settings() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("transaction.state.log.num.partitions", "1")
            .with("transaction.max.transactional.ids", "2")
            .with("transaction.max.partitions.per.transaction", "2")
            .start();
        let mut c = TypedClient::connect(broker.addr());
        create_topic(&mut c, "caps", 3);
        let a = init_settled(&mut c, "cap-a", 60_000);
        let b = init_settled(&mut c, "cap-b", 60_000);
        assert_eq!((a.0, b.0), (0, 0));
        assert_eq!(
            init(&mut c, "cap-c", 60_000).0,
            ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
        );
        // A known id is not a new one.
        let a = init_settled(&mut c, "cap-a", 60_000);
        assert_eq!(a.0, 0);
        let pe = (a.1, a.2);
        let codes = add_partitions(&mut c, 3, "cap-a", pe, &[("caps", 0), ("caps", 1)]);
        assert!(codes.iter().all(|r| r.2 == 0), "{codes:?}");
        let codes = add_partitions(&mut c, 3, "cap-a", pe, &[("caps", 2)]);
        assert_eq!(
            codes,
            [("caps".to_string(), 2, ErrorCode::INVALID_REQUEST.code())]
        );
        assert_eq!(end_txn(&mut c, 3, "cap-a", pe, true), 0);
    });
}

/// The coordinator epoch DescribeProducers reports for `producer_id` on `topic`/`partition`:
/// the one in the last marker the partition took from its coordinator.
fn coordinator_epoch(
    client: &mut TypedClient,
    (topic, partition): (&str, i32),
    producer_id: i64,
) -> i32 {
    let mut t = describe_producers_request::TopicRequest::default();
    t.name = TopicName(s(topic));
    t.partition_indexes = vec![partition];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![t];
    let r: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &req);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    p.active_producers
        .iter()
        .find(|s| s.producer_id.0 == producer_id)
        .unwrap_or_else(|| panic!("producer {producer_id} on {topic}-{partition}: {p:?}"))
        .coordinator_epoch
}

/// Every COMMIT/ABORT marker in `topic`/`partition` (read whole, read_uncommitted), in log
/// order: (producer id, coordinator epoch), from each control record's value.
fn marker_epochs(client: &mut TypedClient, (topic, partition): (&str, i32)) -> Vec<(i64, i32)> {
    let mut p = fetch_request::FetchPartition::default();
    p.partition = partition;
    p.partition_max_bytes = 1 << 20;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    let r: FetchResponse = client.call(ApiKey::Fetch, 12, &req);
    let answer = &r.responses[0].partitions[0];
    assert_eq!(answer.error_code, NONE, "fetch {topic}-{partition}");
    let records = answer.records.clone().unwrap_or_default();
    let mut markers = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let header = BatchHeader::parse(&records[at..]).expect("a whole batch");
        let end = at + 12 + header.batch_length as usize;
        if header.is_control() {
            let marker = decode_marker(&records[at..end]).expect("a marker");
            markers.push((marker.producer_id, marker.coordinator_epoch));
        }
        at = end;
    }
    markers
}

/// AddOffsetsToTxn (v3) for `group`, then TxnOffsetCommit (v3) of offset `offset` of
/// `topic`/0 for it: the two codes.
fn send_offsets(
    client: &mut TypedClient,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
    (topic, offset): (&str, i64),
) -> (i16, i16) {
    let mut add = AddOffsetsToTxnRequest::default();
    add.transactional_id = TransactionalId(s(id));
    add.producer_id = ProducerId(pid);
    add.producer_epoch = epoch;
    add.group_id = GroupId(s(group));
    let added: AddOffsetsToTxnResponse = client.call(ApiKey::AddOffsetsToTxn, 3, &add);
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![p];
    let mut commit = TxnOffsetCommitRequest::default();
    commit.transactional_id = TransactionalId(s(id));
    commit.group_id = GroupId(s(group));
    commit.producer_id = ProducerId(pid);
    commit.producer_epoch = epoch;
    commit.generation_id = -1;
    commit.topics = vec![t];
    let committed: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 3, &commit);
    (
        added.error_code,
        committed.topics[0].partitions[0].error_code,
    )
}

/// A COMMIT marker for `producer_id` at `producer_epoch` on `topic`/0 from coordinator epoch
/// `coordinator_epoch`, as WriteTxnMarkers v1 (the broker-to-broker API): its code.
fn write_marker(
    client: &mut TypedClient,
    topic: &str,
    (producer_id, producer_epoch): (i64, i16),
    coordinator_epoch: i32,
) -> i16 {
    let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
    t.name = TopicName(s(topic));
    t.partition_indexes = vec![0];
    let mut marker = write_txn_markers_request::WritableTxnMarker::default();
    marker.producer_id = ProducerId(producer_id);
    marker.producer_epoch = producer_epoch;
    marker.transaction_result = true;
    marker.coordinator_epoch = coordinator_epoch;
    marker.topics = vec![t];
    let mut req = WriteTxnMarkersRequest::default();
    req.markers = vec![marker];
    let r: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, 1, &req);
    r.markers[0].topics[0].partitions[0].error_code
}

/// I175: the coordinators' markers carry an epoch that grows with every start (Kafka's is the
/// `__transaction_state` partition's leader epoch), stored durably, so it survives kill -9
/// as well as a clean stop, on a data partition and on the group's `__consumer_offsets`
/// partition (written by the group coordinator, I65); a marker from an earlier start's
/// coordinator epoch is then refused by the partition with TRANSACTION_COORDINATOR_FENCED
/// (I72), and one from this start's is taken.
#[test]
fn each_start_marks_with_a_newer_coordinator_epoch_and_older_markers_are_fenced() {
    bounded(TEST_LIMIT, || {
        const FENCED: i16 = ErrorCode::TRANSACTION_COORDINATOR_FENCED.code();
        let (mut broker, _) = started();
        let mut c = TypedClient::connect(broker.addr());
        create_topic(&mut c, "ce", 1);
        // `started()` has 4 offsets partitions.
        let offsets = (
            "__consumer_offsets",
            minikafka_core::group::group_partition("g-ce", 4),
        );
        let mut epochs = Vec::new();
        let mut producer = (0, 0);
        for start in ["first start", "after kill -9", "after a clean stop"] {
            match start {
                "after kill -9" => broker.kill9(),
                "after a clean stop" => assert!(broker.stop().success(), "clean stop"),
                _ => {}
            }
            if start != "first start" {
                broker.restart();
                c = TypedClient::connect(broker.addr());
            }
            let (code, pid, epoch) = init_settled(&mut c, "tx-ce", 60_000);
            assert_eq!(code, NONE, "{start}");
            producer = (pid, epoch);
            assert_eq!(
                add_partitions(&mut c, 3, "tx-ce", producer, &[("ce", 0)]),
                vec![("ce".into(), 0, NONE)],
                "{start}"
            );
            let batch = txn_batch(producer, 0, start.as_bytes());
            assert_eq!(produce(&mut c, "tx-ce", "ce", 0, batch), NONE, "{start}");
            let sent = send_offsets(&mut c, "tx-ce", producer, "g-ce", ("ce", 1));
            assert_eq!(sent, (NONE, NONE), "{start}");
            assert_eq!(end_txn(&mut c, 3, "tx-ce", producer, true), NONE, "{start}");
            wait_for_state(&mut c, "tx-ce", "CompleteCommit");
            epochs.push(coordinator_epoch(&mut c, ("ce", 0), pid));
        }
        // One more per start, in the markers on the data partition and on the group's
        // offsets partition alike, and in the partition's fence.
        let pid = producer.0;
        assert_eq!(
            epochs,
            [0, 1, 2],
            "the data partition's fence after each start"
        );
        for partition in [("ce", 0), offsets] {
            assert_eq!(
                marker_epochs(&mut c, partition),
                [(pid, 0), (pid, 1), (pid, 2)],
                "the markers on {partition:?}"
            );
        }
        // The partition's fence is the newest coordinator's: the earlier ones' are refused,
        // the current one's is taken (an empty COMMIT, as a retried marker is).
        for older in [0, 1] {
            assert_eq!(write_marker(&mut c, "ce", producer, older), FENCED);
        }
        assert_eq!(write_marker(&mut c, "ce", producer, 2), NONE);
    });
}
