//! Transactions' data path over real TCP against the `minikafka` binary (issue 21 item 3):
//! transactional batches produced as a transactional producer sends them, COMMIT/ABORT
//! markers written with WriteTxnMarkers (key 27, as the coordinator sends them), then Fetch
//! under both isolation levels, ListOffsets, DescribeProducers, DeleteRecords, a read_committed
//! long-poll, a restart after SIGKILL, and librdkafka's read_committed consumer.
//!
//! Contract: each test starts its own broker (two shards, so some calls cross shards) inside
//! [`common::bounded`]; batches are built by core's builder and marked transactional the way
//! a client does (attribute bit 0x10, CRC recomputed). Invariants: I67 (LSO), I68 (aborted
//! ranges), I69 (read_committed reads and wake-ups), I70 (txnindex rebuilt), I71 (log start ≤
//! LSO).

mod common;

use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::control_batch::decode_marker;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{compute_crc, BatchBuilder, BatchHeader, NewRecord, CRC_START};
use minikafka_core::types::Offset;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset as RdOffset, TopicPartitionList};

use common::librdkafka::{admin, admin_options, consumer, create_topics};
use common::typed::TypedClient;
use common::{bounded, Broker};

const LIMIT: Duration = Duration::from_secs(60);

/// A batch of `values` for `producer_id`/`epoch` from `sequence`, transactional or not.
fn batch(producer_id: i64, epoch: i16, sequence: i32, values: &[&str], txn: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.producer_id = producer_id;
    b.producer_epoch = epoch;
    b.base_sequence = sequence;
    for v in values {
        b.push(&NewRecord {
            value: Some(v.as_bytes()),
            timestamp_ms: common::librdkafka::now_ms(),
            ..NewRecord::default()
        });
    }
    let mut bytes = b.build(Offset(0));
    if txn {
        set_attributes(&mut bytes, 0x10);
    }
    bytes
}

/// ORs `bits` into the batch's attributes and recomputes its CRC, as a client would.
fn set_attributes(bytes: &mut [u8], bits: i16) {
    let attributes = i16::from_be_bytes([bytes[CRC_START], bytes[CRC_START + 1]]) | bits;
    bytes[CRC_START..CRC_START + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(bytes);
    bytes[CRC_START - 4..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

/// Produce v9 of one batch to `topic`/0: (error code, base offset).
fn produce(client: &mut TypedClient, topic: &str, records: Vec<u8>) -> (i16, i64) {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(records.into());
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request);
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// WriteTxnMarkers v1 of one marker for `topic`/0 at coordinator epoch 3: the partition's
/// error code.
fn write_marker(
    client: &mut TypedClient,
    topic: &str,
    producer_id: i64,
    epoch: i16,
    commit: bool,
) -> i16 {
    write_marker_at(client, topic, producer_id, epoch, commit, 3)
}

/// [`write_marker`] from the coordinator epoch `coordinator_epoch`.
fn write_marker_at(
    client: &mut TypedClient,
    topic: &str,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> i16 {
    let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
    t.name = name(topic);
    t.partition_indexes = vec![0];
    let mut marker = write_txn_markers_request::WritableTxnMarker::default();
    marker.producer_id = producer_id.into();
    marker.producer_epoch = epoch;
    marker.transaction_result = commit;
    marker.coordinator_epoch = coordinator_epoch;
    marker.topics = vec![t];
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![marker];
    let response: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, 1, &request);
    let m = &response.markers[0];
    assert_eq!(m.producer_id.0, producer_id);
    assert_eq!(m.topics[0].name, name(topic));
    m.topics[0].partitions[0].error_code
}

/// What a Fetch of `topic`/0 answered.
#[derive(Debug)]
struct Fetched {
    error_code: i16,
    high_watermark: i64,
    last_stable_offset: i64,
    /// (producer id, first offset); `None` when the field was null.
    aborted: Option<Vec<(i64, i64)>>,
    /// Each batch: (base offset, last offset, is control).
    batches: Vec<(i64, i64, bool)>,
    /// Data record values in order (control records left out).
    values: Vec<String>,
    /// Each control batch: (offset, the delete horizon a cleaner wrote into it).
    horizons: Vec<(i64, Option<i64>)>,
}

fn fetch_request(topic: &str, offset: i64, isolation: i8, wait_ms: i32) -> FetchRequest {
    let mut p = fetch_request::FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.isolation_level = isolation;
    request.topics = vec![t];
    request
}

fn fetch(client: &mut TypedClient, topic: &str, offset: i64, isolation: i8) -> Fetched {
    fetch_waiting(client, topic, offset, isolation, 0)
}

fn fetch_waiting(
    client: &mut TypedClient,
    topic: &str,
    offset: i64,
    isolation: i8,
    wait_ms: i32,
) -> Fetched {
    let request = fetch_request(topic, offset, isolation, wait_ms);
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request);
    let p = &response.responses[0].partitions[0];
    let bytes = p.records.clone().unwrap_or_default();
    let mut batches = Vec::new();
    let mut values = Vec::new();
    let mut horizons = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let header = BatchHeader::parse(&bytes[at..]).expect("a batch header");
        let whole = &bytes[at..at + header.total_bytes()];
        batches.push((
            header.base_offset.0,
            header.last_offset().0,
            header.is_control(),
        ));
        if header.is_control() {
            decode_marker(whole).expect("a marker");
            horizons.push((header.base_offset.0, header.delete_horizon_ms()));
        } else {
            let view = minikafka_core::record::validate_batch(whole).expect("valid");
            assert_eq!(view.records_count as usize, {
                let recs = minikafka_core::record::RecordIter::new(&whole[61..]);
                let mut n = 0;
                for r in recs {
                    let r = r.expect("record");
                    values.push(String::from_utf8_lossy(r.value.unwrap_or(b"")).into_owned());
                    n += 1;
                }
                n
            });
        }
        at += header.total_bytes();
    }
    Fetched {
        error_code: p.error_code,
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        aborted: p.aborted_transactions.as_ref().map(|list| {
            list.iter()
                .map(|a| (a.producer_id.0, a.first_offset))
                .collect()
        }),
        batches,
        values,
        horizons,
    }
}

/// ListOffsets v7 latest of `topic`/0 at `isolation`: the offset.
fn latest(client: &mut TypedClient, topic: &str, isolation: i8) -> i64 {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.partition_index = 0;
    partition.timestamp = -1;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = (-1).into();
    request.isolation_level = isolation;
    request.topics = vec![t];
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// DescribeProducers of `topic`/0: (producer id, epoch, current txn start offset).
fn producers(client: &mut TypedClient, topic: &str) -> Vec<(i64, i32, i64)> {
    let mut t = describe_producers_request::TopicRequest::default();
    t.name = name(topic);
    t.partition_indexes = vec![0];
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![t];
    let response: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &request);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let mut out: Vec<_> = p
        .active_producers
        .iter()
        .map(|s| {
            (
                s.producer_id.0,
                s.producer_epoch,
                s.current_txn_start_offset,
            )
        })
        .collect();
    out.sort();
    out
}

const INVALID_PRODUCER_EPOCH: i16 = ErrorCode::INVALID_PRODUCER_EPOCH.code();
const INVALID_TXN_STATE: i16 = ErrorCode::INVALID_TXN_STATE.code();
const INVALID_RECORD: i16 = ErrorCode::INVALID_RECORD.code();
const UNKNOWN_TOPIC_OR_PARTITION: i16 = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code();

/// Ongoing, aborted and committed transactions: what each isolation level reads, the LSO
/// everywhere it is reported, and the rules a batch or marker must pass.
#[test]
fn markers_decide_transactions_and_read_committed_stops_at_the_lso() {
    bounded(LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("t", 1)]);
        let mut c = TypedClient::connect(broker.addr());

        // Producer 1000 opens a transaction at 0; a plain batch and its second batch follow.
        assert_eq!(
            produce(&mut c, "t", batch(1000, 0, 0, &["a0", "a1"], true)),
            (0, 0)
        );
        assert_eq!(
            produce(&mut c, "t", batch(-1, -1, -1, &["plain"], false)),
            (0, 2)
        );
        assert_eq!(
            produce(&mut c, "t", batch(1000, 0, 2, &["a2"], true)),
            (0, 3)
        );
        // I67: the open transaction holds the LSO at its first offset.
        let uncommitted = fetch(&mut c, "t", 0, 0);
        assert_eq!(
            (uncommitted.high_watermark, uncommitted.last_stable_offset),
            (4, 0)
        );
        assert_eq!(uncommitted.values, ["a0", "a1", "plain", "a2"]);
        assert_eq!(uncommitted.aborted, None, "null under read_uncommitted");
        let committed = fetch(&mut c, "t", 0, 1);
        assert_eq!(committed.error_code, 0);
        assert_eq!(
            (committed.high_watermark, committed.last_stable_offset),
            (4, 0)
        );
        assert!(committed.batches.is_empty(), "{committed:?}");
        assert_eq!((latest(&mut c, "t", 0), latest(&mut c, "t", 1)), (4, 0));
        assert_eq!(producers(&mut c, "t"), [(1000, 0, 0)]);

        // A plain batch of a producer inside its transaction, and a produced control batch,
        // are refused.
        assert_eq!(
            produce(&mut c, "t", batch(1000, 0, 3, &["x"], false)).0,
            INVALID_TXN_STATE
        );
        let mut control = batch(1000, 0, 3, &["x"], true);
        set_attributes(&mut control, 0x20);
        assert_eq!(produce(&mut c, "t", control).0, INVALID_RECORD);
        let mut plain_control = batch(-1, -1, -1, &["x"], false);
        set_attributes(&mut plain_control, 0x20);
        assert_eq!(produce(&mut c, "t", plain_control).0, INVALID_RECORD);

        // ABORT: the marker takes offset 4; read_committed reads everything below the new
        // LSO with the aborted transaction listed (I68, I69).
        assert_eq!(write_marker(&mut c, "t", 1000, 0, false), 0);
        let committed = fetch(&mut c, "t", 0, 1);
        assert_eq!(
            (committed.high_watermark, committed.last_stable_offset),
            (5, 5)
        );
        assert_eq!(
            committed.batches,
            [(0, 1, false), (2, 2, false), (3, 3, false), (4, 4, true)]
        );
        assert_eq!(committed.aborted, Some(vec![(1000, 0)]));
        assert_eq!(fetch(&mut c, "t", 3, 1).aborted, Some(vec![(1000, 0)]));
        assert_eq!(producers(&mut c, "t"), [(1000, 0, -1)]);

        // Producer 2000 commits; its transaction is not listed as aborted.
        assert_eq!(
            produce(&mut c, "t", batch(2000, 0, 0, &["b0"], true)),
            (0, 5)
        );
        assert_eq!(latest(&mut c, "t", 1), 5);
        assert_eq!(write_marker(&mut c, "t", 2000, 0, true), 0);
        let committed = fetch(&mut c, "t", 5, 1);
        assert_eq!(committed.last_stable_offset, 7);
        assert_eq!(committed.values, ["b0"]);
        assert_eq!(committed.aborted, Some(vec![]));

        // A marker of an older epoch than the producer's is refused (and writes nothing).
        assert_eq!(
            produce(&mut c, "t", batch(3000, 2, 0, &["c0"], true)),
            (0, 7)
        );
        assert_eq!(
            write_marker(&mut c, "t", 3000, 1, true),
            INVALID_PRODUCER_EPOCH
        );
        assert_eq!(fetch(&mut c, "t", 0, 0).high_watermark, 8);
        assert_eq!(latest(&mut c, "t", 1), 7);
        // I71: DeleteRecords stops at the open transaction's first offset.
        assert_eq!(delete_records(&mut c, "t", 8), (0, 7));
        assert_eq!(write_marker(&mut c, "t", 3000, 2, false), 0);
        assert_eq!(latest(&mut c, "t", 1), 9);
        // Unknown partitions answer per partition.
        assert_eq!(
            write_marker(&mut c, "missing", 3000, 2, false),
            UNKNOWN_TOPIC_OR_PARTITION
        );
    });
}

/// DeleteRecords v2 of `topic`/0 before `offset`: (error code, low watermark).
fn delete_records(client: &mut TypedClient, topic: &str, offset: i64) -> (i16, i64) {
    let mut p = delete_records_request::DeleteRecordsPartition::default();
    p.partition_index = 0;
    p.offset = offset;
    let mut t = delete_records_request::DeleteRecordsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut request = DeleteRecordsRequest::default();
    request.topics = vec![t];
    request.timeout_ms = 10_000;
    let response: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// I69: a read_committed long-poll parked at the LSO returns when the marker moves it, not
/// before and not at its deadline.
#[test]
fn a_read_committed_long_poll_wakes_when_the_lso_moves() {
    bounded(LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("w", 1)]);
        let mut c = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut c, "w", batch(7, 0, 0, &["v"], true)), (0, 0));
        let addr = broker.addr();
        let waiter = std::thread::spawn(move || {
            let mut reader = TypedClient::connect(addr);
            // The long-poll's own deadline is far beyond the test's bound: only the
            // wake-up on the LSO's move can end it in time.
            reader.set_read_timeout(LIMIT * 2);
            fetch_waiting(&mut reader, "w", 0, 1, 10 * 60 * 1_000)
        });
        std::thread::sleep(Duration::from_millis(500));
        // Ordering, not timing: a read_committed answer holding "v" with the LSO past it can
        // only have been made after the COMMIT marker was written, whenever the reader's
        // fetch arrived (before the marker, it would have to have waited for it).
        assert!(!waiter.is_finished(), "returned before the LSO moved");
        assert_eq!(write_marker(&mut c, "w", 7, 0, true), 0);
        let fetched = waiter.join().expect("the reader");
        assert_eq!(fetched.values, ["v"]);
        assert_eq!(fetched.last_stable_offset, 2);
    });
}

/// I70: after SIGKILL the restarted broker rebuilds the ongoing transactions (LSO) and the
/// aborted ranges from the log, and the `.txnindex` (deleted here) in Kafka's format; after a
/// clean stop it reads them back from its checkpoint and the `.txnindex`.
#[test]
fn a_restart_after_sigkill_rebuilds_the_lso_and_the_txnindex() {
    bounded(LIMIT, || {
        let mut broker = Broker::builder().with("flush.policy", "fsync").start();
        create_topics(&broker, &[("r", 1)]);
        let mut c = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut c, "r", batch(1, 0, 0, &["x0"], true)), (0, 0));
        assert_eq!(produce(&mut c, "r", batch(2, 0, 0, &["y0"], true)), (0, 1));
        assert_eq!(write_marker(&mut c, "r", 1, 0, false), 0); // offset 2
        assert_eq!(produce(&mut c, "r", batch(3, 0, 0, &["z0"], false)), (0, 3));
        let before = fetch(&mut c, "r", 0, 1);
        assert_eq!((before.high_watermark, before.last_stable_offset), (4, 1));
        assert_eq!(before.aborted, Some(vec![(1, 0)]));
        let dir = broker.data_dir().join("r-0");
        let txnindex = dir.join("00000000000000000000.txnindex");
        let bytes = std::fs::read(&txnindex).expect("the txnindex of the ABORT");
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[0..2], &[0, 0], "version 0");
        assert_eq!(&bytes[2..10], &1i64.to_be_bytes(), "producer id");
        assert_eq!(&bytes[10..18], &0i64.to_be_bytes(), "first offset");
        assert_eq!(&bytes[18..26], &2i64.to_be_bytes(), "last offset");
        assert_eq!(&bytes[26..34], &1i64.to_be_bytes(), "LSO then");

        drop(c);
        broker.kill9();
        std::fs::remove_file(&txnindex).expect("remove the txnindex");
        broker.restart();
        let mut c = TypedClient::connect(broker.addr());
        let after = fetch(&mut c, "r", 0, 1);
        assert_eq!((after.high_watermark, after.last_stable_offset), (4, 1));
        assert_eq!(after.values, ["x0"]);
        assert_eq!(after.aborted, Some(vec![(1, 0)]));
        assert_eq!(std::fs::read(&txnindex).expect("rebuilt"), bytes);
        assert_eq!(producers(&mut c, "r"), [(1, 0, -1), (2, 0, 1), (3, 0, -1)]);

        // A clean stop saves the open transaction (a checkpoint) and the next clean start
        // reads it back with the txnindex instead of replaying the log: the same state.
        drop(c);
        assert!(broker.stop().success(), "clean stop");
        assert!(
            dir.join("txn-state.checkpoint").is_file(),
            "checkpoint at close"
        );
        broker.restart();
        let mut c = TypedClient::connect(broker.addr());
        let clean = fetch(&mut c, "r", 0, 1);
        assert_eq!((clean.high_watermark, clean.last_stable_offset), (4, 1));
        assert_eq!(clean.aborted, Some(vec![(1, 0)]));
        assert!(
            !broker.output().contains("no usable transaction state"),
            "the clean start replayed the log"
        );
        // Producer 2's transaction survived as ongoing: its marker still ends it.
        assert_eq!(write_marker(&mut c, "r", 2, 0, true), 0);
        assert_eq!(latest(&mut c, "r", 1), 5);
    });
}

/// The coordinator epochs DescribeProducers reports for `topic`/0, by producer id.
fn coordinator_epochs(client: &mut TypedClient, topic: &str) -> Vec<(i64, i32)> {
    let mut t = describe_producers_request::TopicRequest::default();
    t.name = name(topic);
    t.partition_indexes = vec![0];
    let mut request = DescribeProducersRequest::default();
    request.topics = vec![t];
    let response: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &request);
    let mut out: Vec<_> = response.topics[0].partitions[0]
        .active_producers
        .iter()
        .map(|s| (s.producer_id.0, s.coordinator_epoch))
        .collect();
    out.sort();
    out
}

/// The coordinator epoch in markers (I72): a marker carries it in its control record's value,
/// and a partition refuses one whose coordinator epoch is below the last it saw for that
/// producer with TRANSACTION_COORDINATOR_FENCED (52), leaving the transaction open; the
/// fence survives a kill -9 (rebuilt from the markers in the log) and a clean restart (the
/// transaction-state checkpoint).
#[test]
fn a_marker_from_an_older_coordinator_epoch_is_fenced() {
    bounded(LIMIT, || {
        const FENCED: i16 = ErrorCode::TRANSACTION_COORDINATOR_FENCED.code();
        assert_eq!(FENCED, 52);
        let mut broker = Broker::builder().with("flush.policy", "fsync").start();
        create_topics(&broker, &[("f", 1)]);
        let mut c = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut c, "f", batch(7, 0, 0, &["a"], true)), (0, 0));
        assert_eq!(write_marker_at(&mut c, "f", 7, 0, true, 5), 0); // offset 1
        assert_eq!(coordinator_epochs(&mut c, "f"), [(7, 5)]);
        // The control record's value: version 0, then the coordinator epoch.
        let read = fetch_request("f", 1, 0, 0);
        let response: FetchResponse = c.call(ApiKey::Fetch, 12, &read);
        let records = response.responses[0].partitions[0]
            .records
            .clone()
            .expect("records");
        let marker = decode_marker(&records).expect("a marker at 1");
        assert_eq!((marker.producer_id, marker.coordinator_epoch), (7, 5));

        // The next transaction: a marker from coordinator epoch 4 is fenced, the
        // transaction stays open (the LSO stays at its first offset).
        assert_eq!(produce(&mut c, "f", batch(7, 0, 1, &["b"], true)), (0, 2));
        assert_eq!(write_marker_at(&mut c, "f", 7, 0, true, 4), FENCED);
        assert_eq!(latest(&mut c, "f", 1), 2);

        for restart in ["kill -9", "clean stop"] {
            drop(c);
            if restart == "kill -9" {
                broker.kill9();
            } else {
                assert!(broker.stop().success(), "clean stop");
            }
            broker.restart();
            c = TypedClient::connect(broker.addr());
            assert_eq!(
                write_marker_at(&mut c, "f", 7, 0, false, 4),
                FENCED,
                "after {restart}"
            );
            assert_eq!(latest(&mut c, "f", 1), 2, "after {restart}");
        }
        // The same or a newer coordinator epoch ends it.
        assert_eq!(write_marker_at(&mut c, "f", 7, 0, true, 6), 0); // offset 3
        assert_eq!(latest(&mut c, "f", 1), 4);
        assert_eq!(coordinator_epochs(&mut c, "f"), [(7, 6)]);
        assert_eq!(write_marker_at(&mut c, "f", 7, 0, true, 5), FENCED);
    });
}

/// librdkafka's read_committed consumer drops the aborted records and the markers; its
/// read_uncommitted consumer sees every data record.
#[test]
fn librdkafka_read_committed_skips_aborted_records() {
    bounded(LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("k", 1)]);
        let mut c = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut c, "k", batch(10, 0, 0, &["keep1"], true)).0, 0);
        assert_eq!(
            produce(&mut c, "k", batch(11, 0, 0, &["drop1", "drop2"], true)).0,
            0
        );
        assert_eq!(
            produce(&mut c, "k", batch(-1, -1, -1, &["plain"], false)).0,
            0
        );
        assert_eq!(write_marker(&mut c, "k", 11, 0, false), 0);
        assert_eq!(produce(&mut c, "k", batch(10, 0, 1, &["keep2"], true)).0, 0);
        assert_eq!(write_marker(&mut c, "k", 10, 0, true), 0);
        assert_eq!(
            produce(&mut c, "k", batch(-1, -1, -1, &["last"], false)).0,
            0
        );

        let read = |isolation: &str, count: usize| {
            let consumer = consumer(&broker, &[("isolation.level", isolation)]);
            read_values(&consumer, "k", count)
        };
        assert_eq!(
            read("read_committed", 4),
            ["keep1", "plain", "keep2", "last"]
        );
        assert_eq!(
            read("read_uncommitted", 6),
            ["keep1", "drop1", "drop2", "plain", "keep2", "last"]
        );
    });
}

/// Reads `count` values of `topic`/0 from the start with `consumer` (bounded), then checks
/// nothing more comes.
fn read_values(consumer: &BaseConsumer, topic: &str, count: usize) -> Vec<String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, RdOffset::Beginning)
        .expect("partition");
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                out.push(String::from_utf8_lossy(m.payload().unwrap_or(b"")).into_owned())
            }
            Some(Err(e)) => panic!("consume: {e}"),
            None if out.len() >= count => break,
            None => {}
        }
    }
    out
}

/// One batch of `(key, value)` records for `producer_id` (epoch 0) from `sequence`,
/// transactional or not (`producer_id` -1: a plain batch).
fn keyed_batch(producer_id: i64, sequence: i32, records: &[(&str, &str)], txn: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.producer_id = producer_id;
    b.producer_epoch = if producer_id < 0 { -1 } else { 0 };
    b.base_sequence = if producer_id < 0 { -1 } else { sequence };
    for (key, value) in records {
        b.push(&NewRecord {
            key: Some(key.as_bytes()),
            value: Some(value.as_bytes()),
            timestamp_ms: common::librdkafka::now_ms(),
            ..NewRecord::default()
        });
    }
    let mut bytes = b.build(Offset(0));
    if txn {
        set_attributes(&mut bytes, 0x10);
    }
    bytes
}

/// Compaction and transaction markers end to end (I154): on a compacted topic the broker's
/// cleaner drops an aborted transaction's record, then its ABORT marker once
/// `delete.retention.ms` has passed, and with it the aborted range; a later committed
/// transaction of the same producer stays readable by librdkafka's read_committed consumer
/// (a range left without its marker would make it skip that producer's batches), and the
/// COMMIT marker of a transaction whose record survives stays.
#[test]
fn compaction_removes_a_spent_abort_marker_and_read_committed_keeps_the_later_commit() {
    bounded(LIMIT, || {
        let broker = Broker::builder()
            .with("log.cleaner.backoff.ms", "100")
            .start();
        let admin = admin(&broker);
        let topic = NewTopic::new("cm", 1, TopicReplication::Fixed(1))
            .set("cleanup.policy", "compact")
            .set("segment.ms", "200")
            .set("min.cleanable.dirty.ratio", "0.01")
            .set("delete.retention.ms", "300");
        let results = futures::executor::block_on(admin.create_topics(&[topic], &admin_options()))
            .expect("CreateTopics");
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let mut c = TypedClient::connect(broker.addr());
        let p = |c: &mut TypedClient, bytes| produce(c, "cm", bytes);
        assert_eq!(
            p(&mut c, keyed_batch(20, 0, &[("k1", "aborted")], true)),
            (0, 0)
        );
        assert_eq!(write_marker(&mut c, "cm", 20, 0, false), 0); // offset 1
        assert_eq!(
            p(&mut c, keyed_batch(20, 1, &[("k2", "committed")], true)),
            (0, 2)
        );
        assert_eq!(write_marker(&mut c, "cm", 20, 0, true), 0); // offset 3
        assert_eq!(
            p(&mut c, keyed_batch(-1, 0, &[("k3", "plain")], false)),
            (0, 4)
        );
        // Before the roll nothing is sealed, so nothing is cleaned yet.
        let before = fetch(&mut c, "cm", 0, 1);
        assert_eq!(before.aborted, Some(vec![(20, 0)]));
        std::thread::sleep(Duration::from_millis(250)); // segment.ms passes: the next append rolls
        assert_eq!(
            p(&mut c, keyed_batch(-1, 0, &[("k4", "next")], false)),
            (0, 5)
        );

        // Bounded wait: the aborted record and then its marker go; the commit's stays.
        let want = vec![(2, 2, false), (3, 3, true), (4, 4, false), (5, 5, false)];
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = fetch(&mut c, "cm", 0, 0).batches;
        while got != want {
            assert!(Instant::now() < deadline, "batches left: {got:?}");
            std::thread::sleep(Duration::from_millis(100));
            got = fetch(&mut c, "cm", 0, 0).batches;
        }
        let committed = fetch(&mut c, "cm", 0, 1);
        assert!(
            committed.aborted.clone().unwrap_or_default().is_empty(),
            "an aborted range outlived its marker: {:?}",
            committed.aborted
        );
        assert_eq!(committed.values, ["committed", "plain", "next"]);
        let consumer = consumer(&broker, &[("isolation.level", "read_committed")]);
        assert_eq!(
            read_values(&consumer, "cm", 3),
            ["committed", "plain", "next"]
        );
    });
}

/// A marker stamped with its delete horizon (KIP-534, I154) by the broker's cleaner, once its
/// transaction's record was superseded, stays until `delete.retention.ms` (a day here) and
/// librdkafka reads across it under both isolation levels.
#[test]
fn librdkafka_reads_across_a_marker_stamped_with_its_delete_horizon() {
    bounded(LIMIT, || {
        let broker = Broker::builder()
            .with("log.cleaner.backoff.ms", "100")
            .start();
        let admin = admin(&broker);
        let topic = NewTopic::new("cs", 1, TopicReplication::Fixed(1))
            .set("cleanup.policy", "compact")
            .set("segment.ms", "200")
            .set("min.cleanable.dirty.ratio", "0.01");
        let results = futures::executor::block_on(admin.create_topics(&[topic], &admin_options()))
            .expect("CreateTopics");
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let mut c = TypedClient::connect(broker.addr());
        let p = |c: &mut TypedClient, bytes| produce(c, "cs", bytes);
        let start = common::librdkafka::now_ms();
        assert_eq!(
            p(&mut c, keyed_batch(30, 0, &[("k1", "old")], true)),
            (0, 0)
        );
        assert_eq!(write_marker(&mut c, "cs", 30, 0, true), 0); // offset 1
        assert_eq!(
            p(&mut c, keyed_batch(-1, 0, &[("k1", "new")], false)),
            (0, 2)
        );
        std::thread::sleep(Duration::from_millis(250)); // segment.ms passes: the next append rolls
        assert_eq!(p(&mut c, keyed_batch(-1, 0, &[("k2", "x")], false)), (0, 3));

        let deadline = Instant::now() + Duration::from_secs(30);
        let mut read = fetch(&mut c, "cs", 0, 0);
        while read.batches != [(1, 1, true), (2, 2, false), (3, 3, false)] {
            assert!(
                Instant::now() < deadline,
                "batches left: {:?}",
                read.batches
            );
            std::thread::sleep(Duration::from_millis(100));
            read = fetch(&mut c, "cs", 0, 0);
        }
        let horizon = read.horizons[0]
            .1
            .expect("the marker carries a delete horizon");
        let day = 86_400_000;
        assert!(
            horizon >= start + day && horizon <= common::librdkafka::now_ms() + day,
            "horizon {horizon} is not a day after the cleaning"
        );
        for isolation in ["read_committed", "read_uncommitted"] {
            let consumer = consumer(&broker, &[("isolation.level", isolation)]);
            assert_eq!(read_values(&consumer, "cs", 2), ["new", "x"], "{isolation}");
        }
    });
}
