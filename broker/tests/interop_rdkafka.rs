//! Interop suite: the real `minikafka` binary over TCP on 127.0.0.1, driven by librdkafka (the
//! `rdkafka` crate, bundled librdkafka; helpers in `common::rdkafka`) and, for crafted producer
//! ids and sequences, by a raw Kafka-protocol client. Hostile bytes over raw TCP are in
//! `protocol_hostile.rs`.
//!
//! Contract:
//! - Every test starts its own broker ([`common::Broker`]: free port, fresh data directory) and
//!   runs inside [`common::bounded`], so a broker that never answers fails the test instead of
//!   hanging it; every client wait has its own timeout as well.
//! - Assertions are what Apache Kafka would answer to the same client; nothing here is relaxed
//!   for minikafka.
//! - Consumers use `assign` only (no subscribe, no commits): consumer groups are not needed.
//!   librdkafka still wants a `group.id` string; auto commit and offset store are off.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::librdkafka::*;
use common::raw::{connect, frame, read_frame};
use common::{bounded, Broker};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

// ---------------------------------------------------------------------------------------------
// Topic administration
// ---------------------------------------------------------------------------------------------

/// CreateTopics, Metadata and DeleteTopics through librdkafka's AdminClient: created topics are
/// listed with their partition counts and a live leader, a duplicate create is refused with
/// TOPIC_ALREADY_EXISTS, a deleted topic disappears, deleting an unknown topic is refused with
/// UNKNOWN_TOPIC_OR_PARTITION.
#[test]
fn admin_create_list_delete_topics() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("auto.create.topics.enable", "false")
            .start();
        create_topics(&broker, &[("alpha", 1), ("beta", 3), ("gamma", 5)]);
        let admin = admin(&broker);

        let metadata = admin
            .inner()
            .fetch_metadata(None, CALL_LIMIT)
            .expect("metadata");
        assert_eq!(metadata.brokers().len(), 1, "single node");
        let node = &metadata.brokers()[0];
        assert_eq!(node.port(), i32::from(broker.port()), "advertised port");
        let counts: BTreeMap<&str, usize> = metadata
            .topics()
            .iter()
            .map(|t| (t.name(), t.partitions().len()))
            .collect();
        assert_eq!(counts.get("alpha"), Some(&1), "topics: {counts:?}");
        assert_eq!(counts.get("beta"), Some(&3), "topics: {counts:?}");
        assert_eq!(counts.get("gamma"), Some(&5), "topics: {counts:?}");
        for topic in metadata.topics() {
            assert!(topic.error().is_none(), "topic {} error", topic.name());
            let mut ids: Vec<i32> = topic.partitions().iter().map(|p| p.id()).collect();
            ids.sort_unstable();
            let expected: Vec<i32> = (0..i32::try_from(ids.len()).expect("count")).collect();
            assert_eq!(ids, expected, "partition ids of {}", topic.name());
            for p in topic.partitions() {
                assert_eq!(
                    p.leader(),
                    node.id(),
                    "leader of {}-{}",
                    topic.name(),
                    p.id()
                );
                assert!(
                    p.error().is_none(),
                    "partition {}-{} error",
                    topic.name(),
                    p.id()
                );
            }
        }

        // A second create of an existing topic is refused.
        let again = futures::executor::block_on(admin.create_topics(
            &[NewTopic::new("alpha", 2, TopicReplication::Fixed(1))],
            &admin_options(),
        ))
        .expect("CreateTopics request");
        assert_eq!(
            again,
            vec![Err((
                "alpha".to_owned(),
                RDKafkaErrorCode::TopicAlreadyExists
            ))]
        );

        // Delete one; the others stay.
        let deleted = futures::executor::block_on(admin.delete_topics(&["beta"], &admin_options()))
            .expect("DeleteTopics request");
        assert_eq!(deleted, vec![Ok("beta".to_owned())]);
        let deadline = Instant::now() + CALL_LIMIT;
        loop {
            let metadata = admin
                .inner()
                .fetch_metadata(None, CALL_LIMIT)
                .expect("metadata");
            let names: Vec<&str> = metadata.topics().iter().map(|t| t.name()).collect();
            if !names.contains(&"beta") {
                assert!(
                    names.contains(&"alpha") && names.contains(&"gamma"),
                    "{names:?}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "beta still listed: {names:?}");
            thread::sleep(Duration::from_millis(100));
        }

        let unknown =
            futures::executor::block_on(admin.delete_topics(&["no-such-topic"], &admin_options()))
                .expect("DeleteTopics request");
        assert_eq!(
            unknown,
            vec![Err((
                "no-such-topic".to_owned(),
                RDKafkaErrorCode::UnknownTopicOrPartition
            ))]
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Produce / fetch ordering
// ---------------------------------------------------------------------------------------------

/// Six producers, each on its own connection with a different batching setup, write 3,000
/// records each to ONE partition at the same time. Offsets are exactly 0..17,999 with no gap
/// or duplicate, each delivery report names the offset the record is read back at, and each
/// producer's records appear in the order it sent them (pipelined requests on one connection
/// are applied in order; retries are off so the client never reorders).
#[test]
fn six_concurrent_producers_one_partition_gapless_and_ordered() {
    bounded(TEST_LIMIT, || {
        const PER_PRODUCER: usize = 3_000;
        let broker = Broker::start();
        create_topics(&broker, &[("shared", 1)]);
        let setups: [(usize, &str, &str); 6] = [
            (0, "1", "0"),
            (1, "5", "1"),
            (2, "10", "2"),
            (3, "50", "5"),
            (4, "100", "10"),
            (5, "500", "20"),
        ];
        let all_acks: Vec<(usize, Vec<(i32, i64)>)> = thread::scope(|scope| {
            let handles: Vec<_> = setups
                .iter()
                .map(|&(id, batch, linger)| {
                    let broker = &broker;
                    scope.spawn(move || {
                        let mut producer = TestProducer::new(
                            broker,
                            &[
                                ("batch.num.messages", batch),
                                ("linger.ms", linger),
                                ("message.send.max.retries", "0"),
                                ("client.id", &format!("producer-{id}")),
                            ],
                        );
                        let recs: Vec<Rec> = (0..PER_PRODUCER)
                            .map(|seq| {
                                let pad = "x".repeat((seq * 7 + id) % 40);
                                let value = format!("p{id}:s{seq:05}:{pad}");
                                Rec::new("shared", Some(0), value.as_bytes())
                            })
                            .collect();
                        let acks = producer.produce_all(&recs);
                        (id, expect_all_ok(&acks))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("producer thread"))
                .collect()
        });

        // Delivery reports: 18,000 distinct offsets 0..17,999, increasing per producer.
        let total = PER_PRODUCER * setups.len();
        let mut acked_at: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
        for (id, acks) in &all_acks {
            let mut previous = -1;
            for (seq, (partition, offset)) in acks.iter().enumerate() {
                assert_eq!(*partition, 0);
                assert!(
                    *offset > previous,
                    "producer {id} acks out of order at seq {seq}: offsets around it {:?}",
                    &acks[seq.saturating_sub(5)..(seq + 5).min(acks.len())]
                );
                previous = *offset;
                assert!(
                    acked_at.insert(*offset, (*id, seq)).is_none(),
                    "offset {offset} acknowledged twice"
                );
            }
        }
        let expected: Vec<i64> = (0..i64::try_from(total).expect("total")).collect();
        assert_eq!(acked_at.keys().copied().collect::<Vec<_>>(), expected);

        // Read back: every offset once, in order, holding what its delivery report said.
        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "shared", 0, Offset::Beginning, total);
        let mut next_seq = [0_usize; 6];
        for (i, msg) in msgs.iter().enumerate() {
            assert_eq!(
                msg.offset(),
                i64::try_from(i).expect("index"),
                "gap or duplicate"
            );
            let value = std::str::from_utf8(msg.payload().expect("value")).expect("utf8");
            let mut parts = value.split(':');
            let id: usize = parts.next().expect("id")[1..].parse().expect("producer id");
            let seq: usize = parts.next().expect("seq")[1..].parse().expect("seq");
            assert_eq!(
                seq, next_seq[id],
                "producer {id} out of order at offset {i}"
            );
            next_seq[id] += 1;
            assert_eq!(acked_at[&msg.offset()], (id, seq), "ack vs log at {i}");
        }
        assert_eq!(next_seq, [PER_PRODUCER; 6]);
        assert_no_more(&consumer, Duration::from_millis(500));
    });
}

/// 10,000 keyed records over 3 partitions with librdkafka's default partitioner: every key
/// lands in exactly one partition, all partitions are used, and per key the records come back
/// in the order they were sent.
#[test]
fn keyed_records_stick_to_one_partition_in_order() {
    bounded(TEST_LIMIT, || {
        const RECORDS: usize = 10_000;
        const KEYS: usize = 97;
        let broker = Broker::start();
        create_topics(&broker, &[("keyed", 3)]);
        let mut producer = TestProducer::new(&broker, &[("linger.ms", "5")]);
        let recs: Vec<Rec> = (0..RECORDS)
            .map(|i| {
                let key = i % KEYS;
                let seq = i / KEYS;
                Rec {
                    key: Some(format!("key-{key}").into_bytes()),
                    ..Rec::new("keyed", None, format!("{key}:{seq}").as_bytes())
                }
            })
            .collect();
        let acks = expect_all_ok(&producer.produce_all(&recs));

        let consumer = consumer(&broker, &[]);
        let msgs = read_partitions(
            &consumer,
            "keyed",
            &[
                (0, Offset::Beginning),
                (1, Offset::Beginning),
                (2, Offset::Beginning),
            ],
            RECORDS,
        );
        assert_no_more(&consumer, Duration::from_millis(500));

        let mut partition_of: HashMap<Vec<u8>, i32> = HashMap::new();
        let mut next_seq: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut last_offset: HashMap<i32, i64> = HashMap::new();
        for msg in &msgs {
            let key = msg.key().expect("key").to_vec();
            let value = std::str::from_utf8(msg.payload().expect("value")).expect("utf8");
            let (key_num, seq) = value.split_once(':').expect("value format");
            assert_eq!(
                format!("key-{key_num}").as_bytes(),
                &key[..],
                "key/value mismatch"
            );
            let seq: usize = seq.parse().expect("seq");
            let partition = *partition_of.entry(key.clone()).or_insert(msg.partition());
            assert_eq!(
                partition,
                msg.partition(),
                "key {key_num} in two partitions"
            );
            let expected = next_seq.entry(key).or_insert(0);
            assert_eq!(seq, *expected, "key {key_num} out of order");
            *expected += 1;
            let last = last_offset.entry(msg.partition()).or_insert(-1);
            assert_eq!(
                msg.offset(),
                *last + 1,
                "gap in partition {}",
                msg.partition()
            );
            *last = msg.offset();
        }
        assert_eq!(partition_of.len(), KEYS);
        let mut used: Vec<i32> = partition_of.values().copied().collect();
        used.sort_unstable();
        used.dedup();
        assert_eq!(used, vec![0, 1, 2], "the partitioner used every partition");
        // Delivery reports agree with where each key was read.
        for (i, (partition, _)) in acks.iter().enumerate() {
            let key = format!("key-{}", i % KEYS).into_bytes();
            assert_eq!(
                partition_of[&key], *partition,
                "ack partition of record {i}"
            );
        }
    });
}

/// Headers (including a null-valued header and a repeated key, order kept), null values
/// (tombstones), empty keys, null keys and empty values come back exactly as sent.
#[test]
fn headers_tombstones_and_empty_keys_round_trip() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("shapes", 1)]);
        let h = |k: &str, v: Option<&[u8]>| (k.to_owned(), v.map(<[u8]>::to_vec));
        let recs = vec![
            Rec {
                key: Some(b"with-headers".to_vec()),
                headers: vec![
                    h("trace", Some(b"abc")),
                    h("null-header", None),
                    h("trace", Some(b"second")),
                    h("bin", Some(&[0, 255, 1, 254])),
                ],
                ..Rec::new("shapes", Some(0), b"value")
            },
            Rec {
                key: Some(b"tombstone".to_vec()),
                value: None,
                ..Rec::new("shapes", Some(0), b"")
            },
            Rec {
                key: Some(Vec::new()),
                ..Rec::new("shapes", Some(0), b"empty key")
            },
            Rec {
                key: None,
                ..Rec::new("shapes", Some(0), b"null key")
            },
            Rec {
                key: None,
                value: None,
                headers: vec![h("only", Some(b"headers"))],
                ..Rec::new("shapes", Some(0), b"")
            },
        ];
        let mut producer = TestProducer::new(&broker, &[("linger.ms", "20")]);
        let acks = expect_all_ok(&producer.produce_all(&recs));
        assert_eq!(
            acks,
            (0..5).map(|o| (0, o)).collect::<Vec<_>>(),
            "offsets in send order"
        );

        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "shapes", 0, Offset::Beginning, recs.len());
        for (rec, msg) in recs.iter().zip(&msgs) {
            assert_eq!(msg.key(), rec.key.as_deref(), "key at {}", msg.offset());
            assert_eq!(
                msg.payload(),
                rec.value.as_deref(),
                "value at {}",
                msg.offset()
            );
            assert_eq!(header_list(msg), rec.headers, "headers at {}", msg.offset());
        }
    });
}

/// Every compression codec (none, gzip, snappy, lz4, zstd) round trips: 300 records per codec,
/// batched so that batches hold many records, read back byte-exact with gapless offsets.
#[test]
fn every_compression_codec_round_trips() {
    bounded(TEST_LIMIT, || {
        const RECORDS: usize = 300;
        let broker = Broker::start();
        let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
        let topics: Vec<(String, i32)> = codecs.iter().map(|c| (format!("codec-{c}"), 1)).collect();
        let topic_refs: Vec<(&str, i32)> = topics.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        create_topics(&broker, &topic_refs);
        for codec in codecs {
            let topic = format!("codec-{codec}");
            let mut producer = TestProducer::new(
                &broker,
                &[
                    ("compression.codec", codec),
                    ("linger.ms", "50"),
                    ("batch.num.messages", "100"),
                ],
            );
            let recs: Vec<Rec> = (0..RECORDS)
                .map(|i| {
                    let value = format!("{codec} record {i} ").repeat(1 + i % 20);
                    Rec {
                        key: Some(format!("k{}", i % 10).into_bytes()),
                        headers: vec![("codec".to_owned(), Some(codec.as_bytes().to_vec()))],
                        ..Rec::new(&topic, Some(0), value.as_bytes())
                    }
                })
                .collect();
            let acks = expect_all_ok(&producer.produce_all(&recs));
            let offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
            let expected: Vec<i64> = (0..i64::try_from(RECORDS).expect("count")).collect();
            assert_eq!(offsets, expected, "{codec}: acknowledged offsets");

            let consumer = consumer(&broker, &[]);
            let msgs = read_partition(&consumer, &topic, 0, Offset::Beginning, RECORDS);
            for (i, (rec, msg)) in recs.iter().zip(&msgs).enumerate() {
                assert_eq!(
                    msg.offset(),
                    i64::try_from(i).expect("index"),
                    "{codec}: offset"
                );
                assert_eq!(msg.key(), rec.key.as_deref(), "{codec}: key at {i}");
                assert_eq!(msg.payload(), rec.value.as_deref(), "{codec}: value at {i}");
                assert_eq!(header_list(msg), rec.headers, "{codec}: headers at {i}");
            }
        }
    });
}

/// A 900 KiB record is accepted and read back intact; a record over the broker's
/// `message.max.bytes` (the producer's own limit is raised, so it is sent) is refused by the
/// broker with MESSAGE_TOO_LARGE and takes no offset; the same producer then keeps working.
#[test]
fn large_record_accepted_oversized_rejected_and_producer_survives() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("big", 1)]);
        let mut producer = TestProducer::new(
            &broker,
            &[
                ("message.max.bytes", "10000000"),
                ("compression.codec", "none"),
                ("message.send.max.retries", "0"),
            ],
        );
        let large: Vec<u8> = (0..900 * 1024).map(|i| (i % 251) as u8).collect();
        let acks = producer.produce_all(&[Rec::new("big", Some(0), &large)]);
        assert_eq!(expect_all_ok(&acks), vec![(0, 0)]);

        let too_large = vec![7_u8; 1_048_588 + 10_000];
        let acks = producer.produce_all(&[Rec::new("big", Some(0), &too_large)]);
        match &acks[0] {
            Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)) => {}
            other => panic!("oversized record: expected MESSAGE_TOO_LARGE, got {other:?}"),
        }

        let acks = producer.produce_all(&[Rec::new("big", Some(0), b"after")]);
        assert_eq!(
            expect_all_ok(&acks),
            vec![(0, 1)],
            "producer works after rejection"
        );

        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "big", 0, Offset::Beginning, 2);
        assert_eq!(msgs[0].offset(), 0);
        assert!(
            msgs[0].payload() == Some(&large[..]),
            "900 KiB value intact"
        );
        assert_eq!(msgs[1].offset(), 1);
        assert_eq!(msgs[1].payload(), Some(&b"after"[..]));
        assert_no_more(&consumer, Duration::from_millis(300));
    });
}

/// Fetching from an offset in the middle of a batch starts exactly there: 3 records, then a
/// batch of 10 produced in one request (long linger, one flush), then a consumer assigned at
/// base+5 receives base+5 first and then base+6..base+9.
#[test]
fn fetch_from_middle_of_batch_starts_exactly_there() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("middle", 1)]);
        let mut producer = TestProducer::new(&broker, &[("linger.ms", "0")]);
        let first: Vec<Rec> = (0..3)
            .map(|i| Rec::new("middle", Some(0), format!("pre-{i}").as_bytes()))
            .collect();
        expect_all_ok(&producer.produce_all(&first));

        let mut batcher = TestProducer::new(
            &broker,
            &[("linger.ms", "5000"), ("batch.num.messages", "10")],
        );
        for i in 0..10 {
            batcher.send(&Rec::new(
                "middle",
                Some(0),
                format!("batch-{i}").as_bytes(),
            ));
        }
        batcher
            .inner
            .flush(DATA_LIMIT)
            .expect("flush the batch of 10");
        let acks = expect_all_ok(&batcher.wait_acks());
        let base = acks[0].1;
        assert_eq!(base, 3);
        let offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
        assert_eq!(offsets, (base..base + 10).collect::<Vec<_>>());

        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "middle", 0, Offset::Offset(base + 5), 5);
        let got: Vec<(i64, Vec<u8>)> = msgs
            .iter()
            .map(|m| (m.offset(), m.payload().expect("value").to_vec()))
            .collect();
        let want: Vec<(i64, Vec<u8>)> = (5..10)
            .map(|i| (base + i, format!("batch-{i}").into_bytes()))
            .collect();
        assert_eq!(got, want);
        assert_no_more(&consumer, Duration::from_millis(300));
    });
}

/// A consumer parked on an empty partition (fetch.wait.max.ms=30000) receives a new record
/// promptly: the produce wakes the parked fetch instead of the fetch running to its max wait.
/// The bound (10 s) sits far from both outcomes (milliseconds when woken, at least 28.5 s when
/// not), so a loaded machine cannot make a woken fetch look unwoken.
#[test]
fn parked_fetch_wakes_on_new_record() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("park", 1)]);
        let mut producer = TestProducer::new(&broker, &[("linger.ms", "0")]);
        // Warm the producer's connection and metadata so the produce below is one round trip.
        producer
            .inner
            .client()
            .fetch_metadata(Some("park"), CALL_LIMIT)
            .expect("producer metadata");

        // librdkafka wants socket.timeout.ms at least 1 s above fetch.wait.max.ms.
        let consumer = consumer(
            &broker,
            &[
                ("fetch.wait.max.ms", "30000"),
                ("socket.timeout.ms", "45000"),
            ],
        );
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("park", 0, Offset::Offset(0))
            .expect("assignment");
        consumer.assign(&tpl).expect("assign");
        // Let the consumer connect and park a Fetch on the empty partition.
        let park_until = Instant::now() + Duration::from_millis(1500);
        while Instant::now() < park_until {
            if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(50)) {
                panic!("record on an empty partition at offset {}", msg.offset());
            }
        }

        let sent_at = Instant::now();
        producer.send(&Rec::new("park", Some(0), b"wake up"));
        let deadline = sent_at + Duration::from_secs(45);
        let received_at = loop {
            producer.poll(Duration::ZERO);
            match consumer.poll(Duration::from_millis(20)) {
                Some(Ok(msg)) => {
                    assert_eq!(msg.offset(), 0);
                    assert_eq!(msg.payload(), Some(&b"wake up"[..]));
                    break Instant::now();
                }
                Some(Err(_)) | None => {
                    assert!(Instant::now() < deadline, "record never arrived");
                }
            }
        };
        expect_all_ok(&producer.wait_acks());
        let latency = received_at - sent_at;
        assert!(
            latency < Duration::from_secs(10),
            "record took {latency:?} to reach the parked consumer (fetch not woken?)"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// ListOffsets
// ---------------------------------------------------------------------------------------------

/// ListOffsets: earliest/latest (watermarks) on an empty and a filled partition, and by
/// timestamp: the first offset whose timestamp is at or after the target, across batches;
/// a target after every record gives the end (-1 in the protocol).
#[test]
fn list_offsets_earliest_latest_and_by_time() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("times", 1)]);
        let consumer = consumer(&broker, &[]);
        let marks = consumer
            .fetch_watermarks("times", 0, CALL_LIMIT)
            .expect("watermarks");
        assert_eq!(marks, (0, 0), "empty partition");

        // 10 records 10 s apart (recent, so no retention applies), sent one batch each,
        // then 5 more in one batch at later timestamps.
        let t0 = now_ms() - 200_000;
        let mut producer = TestProducer::new(&broker, &[("linger.ms", "0")]);
        for i in 0..10 {
            let rec = Rec {
                timestamp_ms: Some(t0 + i * 10_000),
                ..Rec::new("times", Some(0), format!("t{i}").as_bytes())
            };
            expect_all_ok(&producer.produce_all(&[rec]));
        }
        let mut batcher = TestProducer::new(&broker, &[("linger.ms", "2000")]);
        for i in 10..15 {
            batcher.send(&Rec {
                timestamp_ms: Some(t0 + i * 10_000),
                ..Rec::new("times", Some(0), format!("t{i}").as_bytes())
            });
        }
        batcher.inner.flush(DATA_LIMIT).expect("flush");
        expect_all_ok(&batcher.wait_acks());

        let marks = consumer
            .fetch_watermarks("times", 0, CALL_LIMIT)
            .expect("watermarks");
        assert_eq!(marks, (0, 15));

        let lookup = |ts: i64| -> Offset {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("times", 0, Offset::Offset(ts))
                .expect("tpl");
            let found = consumer
                .offsets_for_times(tpl, CALL_LIMIT)
                .expect("offsets_for_times");
            let elem = found
                .find_partition("times", 0)
                .expect("partition in answer");
            assert!(
                elem.error().is_ok(),
                "ListOffsets error: {:?}",
                elem.error()
            );
            elem.offset()
        };
        assert_eq!(lookup(0), Offset::Offset(0), "before everything");
        assert_eq!(lookup(t0), Offset::Offset(0), "exact first timestamp");
        assert_eq!(lookup(t0 + 35_000), Offset::Offset(4), "between records");
        assert_eq!(lookup(t0 + 40_000), Offset::Offset(4), "exact timestamp");
        assert_eq!(
            lookup(t0 + 95_000),
            Offset::Offset(10),
            "start of the last batch"
        );
        assert_eq!(
            lookup(t0 + 125_000),
            Offset::Offset(13),
            "inside the last batch"
        );
        assert_eq!(lookup(t0 + 140_000), Offset::Offset(14), "last record");
        assert_eq!(lookup(t0 + 150_000), Offset::End, "after every record");
    });
}

// ---------------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------------

/// Reads back every record of `topic` (all `partitions`) from the beginning up to the high
/// watermark, and returns (partition, offset) -> value; asserts offsets are gapless.
fn read_all(broker: &Broker, topic: &str, partitions: i32) -> BTreeMap<(i32, i64), Vec<u8>> {
    let consumer = consumer(broker, &[]);
    let mut out = BTreeMap::new();
    for partition in 0..partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, partition, CALL_LIMIT)
            .expect("watermarks");
        assert_eq!(low, 0, "nothing was deleted");
        let count = usize::try_from(high).expect("high watermark");
        let msgs = read_partition(&consumer, topic, partition, Offset::Beginning, count);
        for (i, msg) in msgs.iter().enumerate() {
            assert_eq!(msg.offset(), i64::try_from(i).expect("index"), "gapless");
            out.insert(
                (partition, msg.offset()),
                msg.payload().unwrap_or_default().to_vec(),
            );
        }
    }
    out
}

/// With flush.policy=fsync and acks=all: every acknowledged record survives a SIGTERM restart
/// (clean exit status), and every acknowledged record survives a kill -9 taken while a producer
/// is mid-stream; offsets continue after recovery without reuse.
#[test]
fn acknowledged_records_survive_sigterm_and_kill9() {
    bounded(TEST_LIMIT, || {
        const PARTITIONS: i32 = 2;
        let mut broker = Broker::builder().with("flush.policy", "fsync").start();
        create_topics(&broker, &[("durable", PARTITIONS)]);

        // Phase 1: acknowledged, then SIGTERM and restart.
        let mut expected: BTreeMap<(i32, i64), Vec<u8>> = BTreeMap::new();
        {
            let mut producer = TestProducer::new(&broker, &[("linger.ms", "2")]);
            let recs: Vec<Rec> = (0..2_000)
                .map(|i| {
                    let partition = i % PARTITIONS;
                    Rec::new("durable", Some(partition), format!("one-{i}").as_bytes())
                })
                .collect();
            let acks = expect_all_ok(&producer.produce_all(&recs));
            for (rec, pos) in recs.iter().zip(acks) {
                expected.insert(pos, rec.value.clone().expect("value"));
            }
        }
        let status = broker.stop();
        assert!(status.success(), "SIGTERM exit status: {status}");
        broker.restart();
        assert_eq!(read_all(&broker, "durable", PARTITIONS), expected);

        // Phase 2: kill -9 while a producer is mid-stream; keep whatever was acknowledged.
        {
            let mut producer = TestProducer::new(
                &broker,
                &[
                    ("linger.ms", "1"),
                    ("message.timeout.ms", "3000"),
                    ("message.send.max.retries", "0"),
                ],
            );
            let mut values: Vec<Vec<u8>> = Vec::new();
            let deadline = Instant::now() + DATA_LIMIT;
            let mut i = 0_i32;
            loop {
                let value = format!("two-{i}").into_bytes();
                producer.send(&Rec::new("durable", Some(i % PARTITIONS), &value));
                values.push(value);
                i += 1;
                producer.poll(Duration::ZERO);
                if i % 64 == 0 {
                    producer.poll(Duration::from_millis(1));
                }
                let ok = producer
                    .inner
                    .context()
                    .acks
                    .lock()
                    .expect("acks")
                    .values()
                    .filter(|a| a.is_ok())
                    .count();
                if ok >= 1_500 && producer.acked() + 50 < values.len() {
                    break; // enough acknowledged, and records still in flight
                }
                assert!(Instant::now() < deadline, "phase 2 producer stalled");
            }
            broker.kill9();
            // Collect the reports that arrive for what was in flight (all failures, unless the
            // broker had already written the response).
            let acks = producer.wait_acks();
            let mut acknowledged = 0;
            for (id, ack) in acks.iter().enumerate() {
                if let Ok(pos) = ack {
                    acknowledged += 1;
                    expected.insert(*pos, values[id].clone());
                }
            }
            assert!(acknowledged >= 1_500);
        }
        broker.restart();
        let after = read_all(&broker, "durable", PARTITIONS);
        for (pos, value) in &expected {
            assert_eq!(
                after.get(pos),
                Some(value),
                "acknowledged record at {pos:?} lost or changed after kill -9"
            );
        }

        // Offsets continue after recovery.
        let mut producer = TestProducer::new(&broker, &[]);
        for partition in 0..PARTITIONS {
            let next = after.keys().filter(|(p, _)| *p == partition).count();
            let acks = expect_all_ok(&producer.produce_all(&[Rec::new(
                "durable",
                Some(partition),
                b"after-crash",
            )]));
            assert_eq!(
                acks,
                vec![(partition, i64::try_from(next).expect("offset"))],
                "next offset after recovery"
            );
        }
    });
}

/// A restart right after `kill -9` on the same port starts: the killed broker's listener goes
/// on accepting for a few milliseconds after the process was reaped (io_uring releases the
/// ring's files after exit), and startup must not take it for another broker and exit. Several
/// rounds, each with a client connected at the kill, as a supervisor's restart would see it.
#[test]
fn restart_right_after_kill9_on_the_same_port_starts() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder().with("flush.policy", "fsync").start();
        for _ in 0..10 {
            let client = TcpStream::connect(broker.addr()).expect("connect before the kill");
            broker.kill9();
            broker.restart();
            drop(client);
        }
        let mut producer = TestProducer::new(&broker, &[]);
        let acks = producer.produce_all(&[Rec::new("after-restarts", Some(0), b"still serving")]);
        assert_eq!(expect_all_ok(&acks), vec![(0, 0)]);
    })
}

// ---------------------------------------------------------------------------------------------
// Idempotent producers (KIP-98)
// ---------------------------------------------------------------------------------------------

/// Producer ids of the batches in a partition's log files, in file order (read from the data
/// directory with core's batch iterator).
fn producer_ids_on_disk(broker: &Broker, topic: &str, partition: i32) -> Vec<i64> {
    let dir = broker.data_dir().join(format!("{topic}-{partition}"));
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .expect("partition dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut ids = Vec::new();
    for path in logs {
        let bytes = std::fs::read(&path).expect("read segment");
        for batch in minikafka_core::record::BatchIter::new(&bytes) {
            match batch {
                Ok(batch) => ids.push(batch.header.producer_id),
                // The active segment of a running broker is preallocated: zeros past its
                // data (I190).
                Err(e) if bytes[e.at..].iter().all(|b| *b == 0) => break,
                Err(e) => panic!("{}: invalid batch on disk: {e:?}", path.display()),
            }
        }
    }
    ids
}

/// librdkafka with `enable.idempotence=true` (acks=all, up to 5 requests in flight per
/// connection, retries on) sends 20,000 records over 4 partitions in small pipelined batches:
/// every record is acknowledged once, and each partition holds each of its records exactly
/// once, in send order, at dense offsets. The batches on disk carry the producer id the broker
/// issued.
#[test]
fn idempotent_producer_pipelined_exactly_once_in_order() {
    bounded(TEST_LIMIT, || {
        const RECORDS: usize = 20_000;
        const PARTITIONS: i32 = 4;
        let broker = Broker::start();
        create_topics(&broker, &[("idem", PARTITIONS)]);
        let mut producer = TestProducer::new(
            &broker,
            &[
                ("enable.idempotence", "true"),
                ("max.in.flight.requests.per.connection", "5"),
                ("batch.num.messages", "50"),
                ("linger.ms", "1"),
            ],
        );
        let recs: Vec<Rec> = (0..RECORDS)
            .map(|i| {
                let partition = (i % PARTITIONS as usize) as i32;
                Rec::new("idem", Some(partition), format!("r{i:06}").as_bytes())
            })
            .collect();
        let acks = expect_all_ok(&producer.produce_all(&recs));
        let mut acked = BTreeMap::new();
        for (i, (partition, offset)) in acks.iter().enumerate() {
            assert_eq!(*partition, (i % PARTITIONS as usize) as i32);
            assert!(
                acked.insert((*partition, *offset), i).is_none(),
                "({partition}, {offset}) acknowledged twice"
            );
        }
        drop(producer);

        let consumer = consumer(&broker, &[]);
        let starts: Vec<(i32, Offset)> = (0..PARTITIONS).map(|p| (p, Offset::Beginning)).collect();
        let msgs = read_partitions(&consumer, "idem", &starts, RECORDS);
        assert_no_more(&consumer, Duration::from_millis(500));
        let mut per_partition: BTreeMap<i32, Vec<(i64, usize)>> = BTreeMap::new();
        for msg in &msgs {
            let value = std::str::from_utf8(msg.payload().expect("value")).expect("utf8");
            let i: usize = value[1..].parse().expect("record number");
            per_partition
                .entry(msg.partition())
                .or_default()
                .push((msg.offset(), i));
        }
        for (partition, records) in &per_partition {
            let want: Vec<(i64, usize)> = (0..RECORDS)
                .filter(|i| (i % PARTITIONS as usize) as i32 == *partition)
                .enumerate()
                .map(|(n, i)| (n as i64, i))
                .collect();
            assert_eq!(
                records, &want,
                "partition {partition}: not each record once, in order, at dense offsets"
            );
            for (offset, i) in records {
                assert_eq!(acked[&(*partition, *offset)], *i, "ack vs log");
            }
        }
        assert_eq!(per_partition.len(), PARTITIONS as usize);
        let ids = producer_ids_on_disk(&broker, "idem", 0);
        assert!(
            !ids.is_empty() && ids.iter().all(|&id| id == ids[0] && id >= 0),
            "{ids:?}"
        );
    });
}

/// A new idempotent producer instance gets a new producer id and writes normally after the
/// previous one; after a broker crash (SIGKILL) and after a clean restart the next instance's
/// id is new again (ids are never reused across restarts), and every record is in the log
/// once.
#[test]
fn restarted_idempotent_producer_gets_a_new_id_and_works() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_topics(&broker, &[("idem-restart", 1)]);
        let produce = |broker: &Broker, round: usize| {
            let mut producer = TestProducer::new(broker, &[("enable.idempotence", "true")]);
            let recs: Vec<Rec> = (0..100)
                .map(|i| Rec::new("idem-restart", Some(0), format!("{round}:{i}").as_bytes()))
                .collect();
            let acks = expect_all_ok(&producer.produce_all(&recs));
            let offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
            let first = (round * 100) as i64;
            assert_eq!(
                offsets,
                (first..first + 100).collect::<Vec<_>>(),
                "round {round}"
            );
        };
        produce(&broker, 0);
        produce(&broker, 1);
        // A crash loses the allocator's in-memory block; the persisted mark still holds.
        broker.kill9();
        // The killed process's listener may linger briefly (io_uring tears down
        // asynchronously): wait, bounded, until the port refuses connections.
        let deadline = Instant::now() + CALL_LIMIT;
        while TcpStream::connect(broker.addr()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "port still accepting after SIGKILL"
            );
            thread::sleep(Duration::from_millis(50));
        }
        broker.restart();
        produce(&broker, 2);
        broker.stop();
        broker.restart();
        produce(&broker, 3);

        let mut ids = producer_ids_on_disk(&broker, "idem-restart", 0);
        ids.dedup();
        assert_eq!(
            ids.len(),
            4,
            "one producer id per instance, in order: {ids:?}"
        );
        let distinct: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
        assert_eq!(distinct.len(), 4, "a producer id was reused: {ids:?}");
        assert!(ids.iter().all(|&id| id >= 0));

        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "idem-restart", 0, Offset::Beginning, 400);
        assert_no_more(&consumer, Duration::from_millis(300));
        let values: Vec<String> = msgs
            .iter()
            .map(|m| String::from_utf8(m.payload().expect("value").to_vec()).expect("utf8"))
            .collect();
        let want: Vec<String> = (0..4)
            .flat_map(|r| (0..100).map(move |i| format!("{r}:{i}")))
            .collect();
        assert_eq!(values, want);
    });
}

/// Raw Kafka-protocol client (kafka-protocol encodings) for crafted producer ids and
/// sequences.
struct RawClient {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl RawClient {
    fn connect(broker: &Broker) -> RawClient {
        RawClient {
            stream: connect(broker.addr()),
            next_correlation_id: 1,
        }
    }

    fn call<Q, R>(
        &mut self,
        api_key: kafka_protocol::messages::ApiKey,
        version: i16,
        request: &Q,
    ) -> R
    where
        Q: kafka_protocol::protocol::Encodable,
        R: kafka_protocol::protocol::Decodable + kafka_protocol::protocol::HeaderVersion,
    {
        use kafka_protocol::messages::{RequestHeader, ResponseHeader};
        use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = api_key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("raw-idem"));
        let mut body = bytes::BytesMut::new();
        header
            .encode(&mut body, api_key.request_header_version(version))
            .expect("header");
        request.encode(&mut body, version).expect("body");
        self.stream.write_all(&frame(&body)).expect("write request");
        let response = read_frame(&mut self.stream).expect("response");
        let mut bytes = bytes::Bytes::from(response);
        let header =
            ResponseHeader::decode(&mut bytes, R::header_version(version)).expect("header");
        assert_eq!(header.correlation_id, correlation_id);
        R::decode(&mut bytes, version).expect("decode response")
    }

    /// InitProducerId (v4); `current` asks for an epoch bump.
    fn init_producer_id(&mut self, current: Option<(i64, i16)>) -> (i16, i64, i16) {
        use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse};
        let mut request = InitProducerIdRequest::default();
        request.transactional_id = None;
        request.transaction_timeout_ms = 60_000;
        let (id, epoch) = current.unwrap_or((-1, -1));
        request.producer_id = id.into();
        request.producer_epoch = epoch;
        let r: InitProducerIdResponse = self.call(ApiKey::InitProducerId, 4, &request);
        (r.error_code, r.producer_id.0, r.producer_epoch)
    }

    /// Produce v9 of one batch to `topic`/0: (error code, base offset).
    fn produce(&mut self, topic: &str, batch: Vec<u8>) -> (i16, i64) {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let mut p = PartitionProduceData::default();
        p.index = 0;
        p.records = Some(bytes::Bytes::from(batch));
        let mut t = TopicProduceData::default();
        t.name = TopicName(StrBytes::from_string(topic.to_owned()));
        t.partition_data = vec![p];
        let mut request = ProduceRequest::default();
        request.acks = -1;
        request.timeout_ms = 5_000;
        request.topic_data = vec![t];
        let r: ProduceResponse = self.call(ApiKey::Produce, 9, &request);
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }
}

/// An idempotent batch (producer id, epoch, base sequence) of `records` records.
fn idempotent_batch(
    pid: i64,
    epoch: i16,
    base_sequence: i32,
    records: usize,
    tag: &str,
) -> Vec<u8> {
    let mut builder = minikafka_core::record::BatchBuilder::new();
    builder.producer_id = pid;
    builder.producer_epoch = epoch;
    builder.base_sequence = base_sequence;
    for i in 0..records {
        let value = format!("{tag}-{i}");
        builder.push(&minikafka_core::record::NewRecord {
            value: Some(value.as_bytes()),
            timestamp_ms: now_ms(),
            ..Default::default()
        });
    }
    builder.build(minikafka_core::types::Offset(0))
}

/// Over the raw protocol: a re-sent batch (same producer id, epoch, sequences) is answered
/// with error 0 and its ORIGINAL base offset and is not appended again; a gap in the sequence
/// is OUT_OF_ORDER_SEQUENCE_NUMBER (45); after an epoch bump (InitProducerId with the current
/// id and epoch) the old epoch is INVALID_PRODUCER_EPOCH (47) and the new one starts at 0; a
/// transactional id gets a producer id of its own from its coordinator. The log holds exactly
/// the accepted batches.
#[test]
fn raw_duplicate_batch_answers_original_offset_and_out_of_order_is_45() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("raw-idem", 1)]);
        let mut client = RawClient::connect(&broker);
        let (code, pid, epoch) = client.init_producer_id(None);
        assert_eq!((code, epoch), (0, 0), "InitProducerId");
        assert!(pid >= 0);

        let first = idempotent_batch(pid, 0, 0, 3, "a");
        assert_eq!(client.produce("raw-idem", first.clone()), (0, 0));
        let second = idempotent_batch(pid, 0, 3, 2, "b");
        assert_eq!(client.produce("raw-idem", second.clone()), (0, 3));
        // Duplicates: the original offsets, nothing appended.
        assert_eq!(
            client.produce("raw-idem", first),
            (0, 0),
            "duplicate of the first"
        );
        assert_eq!(
            client.produce("raw-idem", second),
            (0, 3),
            "duplicate of the second"
        );
        // Out of order: a gap, and a retry that overlaps without matching a batch.
        assert_eq!(
            client
                .produce("raw-idem", idempotent_batch(pid, 0, 7, 1, "gap"))
                .0,
            45
        );
        assert_eq!(
            client
                .produce("raw-idem", idempotent_batch(pid, 0, 4, 1, "overlap"))
                .0,
            45
        );
        // The next in sequence lands right after the originals: nothing was appended twice.
        assert_eq!(
            client.produce("raw-idem", idempotent_batch(pid, 0, 5, 1, "c")),
            (0, 5)
        );

        // Epoch bump (KIP-360): same id, epoch 1, which must start at sequence 0; once it
        // wrote to the partition, the old epoch is fenced there.
        let (code, bumped_pid, bumped_epoch) = client.init_producer_id(Some((pid, 0)));
        assert_eq!((code, bumped_pid, bumped_epoch), (0, pid, 1));
        let not_zero = idempotent_batch(pid, 1, 3, 1, "not0");
        assert_eq!(client.produce("raw-idem", not_zero).0, 45);
        let bumped = idempotent_batch(pid, 1, 0, 2, "d");
        assert_eq!(client.produce("raw-idem", bumped), (0, 6));
        let stale = idempotent_batch(pid, 0, 6, 1, "old");
        assert_eq!(client.produce("raw-idem", stale).0, 47);

        // Another InitProducerId without an id: a different id.
        let (code, other, _) = client.init_producer_id(None);
        assert_eq!(code, 0);
        assert_ne!(other, pid);

        // A transactional id: its coordinator hands out a fresh producer id at epoch 0.
        {
            use kafka_protocol::messages::{
                ApiKey, InitProducerIdRequest, InitProducerIdResponse, TransactionalId,
            };
            use kafka_protocol::protocol::StrBytes;
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
            request.transaction_timeout_ms = 60_000;
            request.producer_id = (-1).into();
            request.producer_epoch = -1;
            let r: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &request);
            assert_eq!((r.error_code, r.producer_epoch), (0, 0));
            assert!(r.producer_id.0 >= 0 && r.producer_id.0 != pid && r.producer_id.0 != other);
        }

        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "raw-idem", 0, Offset::Beginning, 8);
        assert_no_more(&consumer, Duration::from_millis(300));
        let values: Vec<String> = msgs
            .iter()
            .map(|m| String::from_utf8(m.payload().expect("value").to_vec()).expect("utf8"))
            .collect();
        assert_eq!(
            values,
            ["a-0", "a-1", "a-2", "b-0", "b-1", "c-0", "d-0", "d-1"]
        );
    });
}
