//! Compacted topics with librdkafka (the `rdkafka` crate) against the real `minikafka` binary:
//! a topic created with `cleanup.policy=compact` refuses keyless records (INVALID_RECORD, in a
//! gzip batch),
//! shrinks to the latest record per key at their original offsets — its gzip batches
//! recompressed — (librdkafka reads across the gaps), and a consumer reading while the cleaner works sees offsets that only increase and,
//! at the end, the same latest value per key.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::librdkafka::*;
use common::{bounded, Broker};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::Offset;

const TOPIC: &str = "table";

fn keyed(key: &str, value: Option<&str>) -> Rec {
    Rec {
        topic: TOPIC.into(),
        partition: Some(0),
        key: Some(key.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        ..Rec::default()
    }
}

/// Reads partition 0 from the beginning up to and including `last_offset`, as `(offset, key,
/// value)`.
fn read_to(broker: &Broker, last_offset: i64) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let consumer = consumer(broker, &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("assignment");
    rdkafka::consumer::Consumer::assign(&consumer, &tpl).expect("assign");
    let deadline = Instant::now() + DATA_LIMIT;
    let mut rows = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "did not reach offset {last_offset}: {rows:?}"
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(msg)) => {
                rows.push((
                    msg.offset(),
                    msg.key().unwrap_or_default().to_vec(),
                    msg.payload().map(<[u8]>::to_vec),
                ));
                if msg.offset() >= last_offset {
                    return rows;
                }
            }
            Some(Err(e)) => panic!("consumer error: {e}"),
            None => {}
        }
    }
}

#[test]
fn compacted_topic_keeps_the_latest_value_per_key() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("log.cleaner.backoff.ms", "100")
            .start();
        let admin = admin(&broker);
        let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1))
            .set("cleanup.policy", "compact")
            .set("segment.ms", "200")
            .set("min.cleanable.dirty.ratio", "0.01");
        let results = futures::executor::block_on(admin.create_topics(&[topic], &admin_options()))
            .expect("CreateTopics");
        assert!(results.iter().all(Result::is_ok), "{results:?}");

        // gzip: the cleaner decompresses, filters and recompresses with the same codec, and
        // the produce path decompresses to find the keyless record.
        let mut producer = TestProducer::new(
            &broker,
            &[("linger.ms", "5"), ("compression.codec", "gzip")],
        );
        // A record without a key is refused, as Kafka refuses it.
        let keyless = producer.produce_all(&[Rec::new(TOPIC, Some(0), b"no key")]);
        assert!(
            matches!(
                &keyless[0],
                Err(KafkaError::MessageProduction(
                    RDKafkaErrorCode::InvalidRecord
                ))
            ),
            "{keyless:?}"
        );

        // Three rounds over ten keys, k3 deleted at the end.
        let mut expected: BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> = BTreeMap::new();
        let mut last_offset = 0;
        for round in 0..3 {
            let recs: Vec<Rec> = (0..10)
                .map(|k| {
                    let key = format!("k{k}");
                    let value = format!("r{round}-{k}");
                    let value = (round < 2 || k != 3).then_some(value);
                    keyed(&key, value.as_deref())
                })
                .collect();
            let acks = expect_all_ok(&producer.produce_all(&recs));
            for (rec, (_, offset)) in recs.iter().zip(acks) {
                expected.insert(rec.key.clone().expect("key"), (offset, rec.value.clone()));
                last_offset = last_offset.max(offset);
            }
            std::thread::sleep(Duration::from_millis(250)); // segment.ms passes: a roll
        }
        let total = 30;
        // A consumer reading while the cleaner runs: offsets only increase.
        let during = read_to(&broker, last_offset);
        assert!(
            during.windows(2).all(|w| w[0].0 < w[1].0),
            "offsets out of order"
        );

        // Wait (bounded) until the log holds exactly the latest record per key.
        let want: Vec<(i64, Vec<u8>, Option<Vec<u8>>)> = {
            let mut rows: Vec<_> = expected
                .iter()
                .map(|(k, (o, v))| (*o, k.clone(), v.clone()))
                .collect();
            rows.sort();
            rows
        };
        let deadline = Instant::now() + DATA_LIMIT;
        let mut got = read_to(&broker, last_offset);
        while got != want {
            assert!(
                Instant::now() < deadline,
                "not compacted to the latest per key: {got:?} (of {total} written)"
            );
            std::thread::sleep(Duration::from_millis(200));
            got = read_to(&broker, last_offset);
        }
        assert!(want.len() < total, "compaction removed records");
        // The tombstone stays until delete.retention.ms (a day by default).
        assert!(got.iter().any(|(_, k, v)| k == b"k3" && v.is_none()));
        // Appends continue after the last offset.
        let acks = expect_all_ok(&producer.produce_all(&[keyed("k0", Some("again"))]));
        assert_eq!(acks[0].1, last_offset + 1);
    });
}

/// Total bytes of the `.log` files under `dir`.
fn log_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// `__consumer_offsets` is compacted: 300 commits of one group's offset shrink to about one
/// record in the sealed segments, and after a restart the group's offset is the last commit
/// (startup replays the live keys).
#[test]
fn consumer_offsets_are_compacted_and_replayed() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder()
            .with("log.cleaner.backoff.ms", "100")
            .with("offsets.topic.num.partitions", "1")
            .with("offsets.topic.segment.bytes", "4096")
            .start();
        create_topics(&broker, &[("committed", 1)]);
        let group = consumer(&broker, &[("group.id", "compacted-group")]);
        for i in 1..=300 {
            let mut tpl = rdkafka::TopicPartitionList::new();
            tpl.add_partition_offset("committed", 0, Offset::Offset(i))
                .expect("offset");
            rdkafka::consumer::Consumer::commit(&group, &tpl, rdkafka::consumer::CommitMode::Sync)
                .expect("commit");
        }
        let dir = broker.data_dir().join("__consumer_offsets-0");
        let written = log_bytes(&dir);
        let deadline = Instant::now() + DATA_LIMIT;
        // The active segment (at most 4 KiB) plus one cleaned record per key; the 300 commit
        // batches (over 61 bytes of header each) took more than 18 KB.
        while log_bytes(&dir) > 4096 + 1024 {
            assert!(
                Instant::now() < deadline,
                "__consumer_offsets not compacted: {} of {written} bytes left",
                log_bytes(&dir)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // The cleaner's checkpoint is kept in the partition directory for the next run. It
        // is written after the swaps are durable, so it may land just after the log shrank.
        while !dir.join("cleaner-offset.checkpoint").exists() {
            assert!(
                Instant::now() < deadline,
                "no cleaner checkpoint after a cleaning"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(group);
        assert!(broker.stop().success(), "clean shutdown");
        broker.restart();
        let group = consumer(&broker, &[("group.id", "compacted-group")]);
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition("committed", 0);
        let got = rdkafka::consumer::Consumer::committed_offsets(&group, tpl, CALL_LIMIT)
            .expect("OffsetFetch");
        assert_eq!(got.elements()[0].offset(), Offset::Offset(300));
    });
}
