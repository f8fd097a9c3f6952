//! `message.timestamp.type=LogAppendTime`, per topic and as the broker default
//! (`log.message.timestamp.type`), over real TCP against the `minikafka` binary: the broker
//! stamps each batch with its append time, librdkafka consumers see the LogAppendTime
//! timestamp type with that time, the produce response carries it, an idempotent producer's
//! batches keep their producer fields (its state is described with the stamped time), and a
//! CreateTime topic keeps the producer's timestamps.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].
//! Stamps are checked against the wall clock read before and after producing (the broker's
//! clock is the same machine's).

mod common;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;
use rdkafka::admin::{ConfigSource, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::message::{Message, Timestamp};
use rdkafka::Offset as RdOffset;

use common::librdkafka::*;
use common::typed::TypedClient;
use common::{bounded, Broker};

/// The producer's timestamp on every record: long ago, so a stamp cannot be mistaken for it.
const CREATE_TIME_MS: i64 = 1_000_000;

fn create(broker: &Broker, name: &str, configs: &[(&str, &str)]) {
    let admin = admin(broker);
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = futures::executor::block_on(admin.create_topics(&[topic], &admin_options()))
        .expect("CreateTopics request");
    for result in results {
        result.unwrap_or_else(|(name, code)| panic!("creating {name}: {code:?}"));
    }
}

/// Produces `count` records (idempotent, acks=all) at CREATE_TIME_MS and reads them back
/// with librdkafka: their timestamps, and the wall-clock window the produce ran in.
fn produce_and_read(broker: &Broker, topic: &str, count: usize) -> (Vec<Timestamp>, i64, i64) {
    let mut producer = TestProducer::new(broker, &[("enable.idempotence", "true")]);
    let recs: Vec<Rec> = (0..count)
        .map(|i| Rec {
            timestamp_ms: Some(CREATE_TIME_MS),
            ..Rec::new(topic, Some(0), format!("r{i}").as_bytes())
        })
        .collect();
    let before_ms = now_ms();
    expect_all_ok(&producer.produce_all(&recs));
    let after_ms = now_ms();
    let consumer = consumer(broker, &[]);
    let read = read_partition(&consumer, topic, 0, RdOffset::Beginning, count);
    (
        read.iter().map(|m| m.timestamp()).collect(),
        before_ms,
        after_ms,
    )
}

fn assert_stamped(timestamps: &[Timestamp], before_ms: i64, after_ms: i64) {
    for ts in timestamps {
        match ts {
            Timestamp::LogAppendTime(ms) => assert!(
                (before_ms..=after_ms).contains(ms),
                "stamp {ms} outside the produce window {before_ms}..={after_ms}"
            ),
            other => panic!("expected a LogAppendTime timestamp, got {other:?}"),
        }
    }
}

/// Produce v9 of one batch built by core's builder: the partition's response.
fn produce_raw(client: &mut TypedClient, topic: &str) -> (i16, i64) {
    let mut builder = BatchBuilder::new();
    builder.push(&NewRecord {
        timestamp_ms: CREATE_TIME_MS,
        value: Some(b"raw"),
        ..NewRecord::default()
    });
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
    (p.error_code, p.log_append_time_ms)
}

/// ListOffsets v7 of `timestamp` on `topic`/0: (error code, offset).
fn list_offset(client: &mut TypedClient, topic: &str, timestamp: i64) -> (i16, i64) {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.partition_index = 0;
    partition.timestamp = timestamp;
    let mut t = list_offsets_request::ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = (-1).into();
    request.topics = vec![t];
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset)
}

/// A topic override: consumers see LogAppendTime stamps; timestamp lookups use them; the produce response carries the
/// stamp; the idempotent producer is described with it; a CreateTime topic beside it keeps
/// the producer's timestamps and answers -1.
#[test]
fn a_log_append_time_topic_is_stamped_and_a_create_time_topic_is_not() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create(
            &broker,
            "stamped",
            &[("message.timestamp.type", "LogAppendTime")],
        );
        create(&broker, "kept", &[]);

        let (timestamps, before_ms, after_ms) = produce_and_read(&broker, "stamped", 20);
        assert_stamped(&timestamps, before_ms, after_ms);
        let (kept, _, _) = produce_and_read(&broker, "kept", 5);
        assert!(kept
            .iter()
            .all(|ts| *ts == Timestamp::CreateTime(CREATE_TIME_MS)));

        // The idempotent producer's state carries its last stamped batch.
        let mut client = TypedClient::connect(broker.addr());
        let mut request = DescribeProducersRequest::default();
        let mut t = describe_producers_request::TopicRequest::default();
        t.name = TopicName(StrBytes::from_static_str("stamped"));
        t.partition_indexes = vec![0];
        request.topics = vec![t];
        let described: DescribeProducersResponse =
            client.call(ApiKey::DescribeProducers, 0, &request);
        let producers = &described.topics[0].partitions[0].active_producers;
        assert_eq!(producers.len(), 1);
        assert_eq!(producers[0].last_sequence, 19);
        assert!((before_ms..=after_ms).contains(&producers[0].last_timestamp));

        // Timestamp lookups go by the stamps: the first record at or after the produce
        // began is offset 0 on the stamped topic; the kept topic has none that late.
        assert_eq!(list_offset(&mut client, "stamped", before_ms), (0, 0));
        assert_eq!(list_offset(&mut client, "kept", before_ms), (0, -1));
        assert_eq!(list_offset(&mut client, "kept", CREATE_TIME_MS), (0, 0));

        let before_ms = now_ms();
        let (code, stamp) = produce_raw(&mut client, "stamped");
        let after_ms = now_ms();
        assert_eq!(code, 0);
        assert!(
            (before_ms..=after_ms).contains(&stamp),
            "response stamp {stamp}"
        );
        assert_eq!(produce_raw(&mut client, "kept"), (0, -1));
    });
}

/// The broker default: a topic without an override is stamped, DescribeConfigs reports the
/// value as a static broker setting, and a topic may still choose CreateTime.
#[test]
fn log_message_timestamp_type_is_the_broker_default() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("log.message.timestamp.type", "LogAppendTime")
            .start();
        create(&broker, "by-default", &[]);
        create(
            &broker,
            "opted-out",
            &[("message.timestamp.type", "CreateTime")],
        );
        let (timestamps, before_ms, after_ms) = produce_and_read(&broker, "by-default", 5);
        assert_stamped(&timestamps, before_ms, after_ms);
        let (kept, _, _) = produce_and_read(&broker, "opted-out", 5);
        assert!(kept
            .iter()
            .all(|ts| *ts == Timestamp::CreateTime(CREATE_TIME_MS)));

        let admin = admin(&broker);
        let results = futures::executor::block_on(admin.describe_configs(
            &[
                ResourceSpecifier::Topic("by-default"),
                ResourceSpecifier::Topic("opted-out"),
            ],
            &admin_options(),
        ))
        .expect("DescribeConfigs request");
        let entry = |i: usize| {
            let r = results[i].as_ref().expect("described");
            let e = r.get("message.timestamp.type").expect("described entry");
            (e.value.clone(), format!("{:?}", e.source))
        };
        let source = |s: ConfigSource| format!("{s:?}");
        assert_eq!(
            entry(0),
            (
                Some("LogAppendTime".into()),
                source(ConfigSource::StaticBroker)
            )
        );
        assert_eq!(
            entry(1),
            (
                Some("CreateTime".into()),
                source(ConfigSource::DynamicTopic)
            )
        );
    });
}
