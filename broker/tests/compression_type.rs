//! `compression.type` per topic and as the broker default, over real TCP against the
//! `minikafka` binary (I87–I89): a gzip batch produced to an lz4 topic is stored and fetched
//! as lz4 with the same records and header fields; a `producer` topic keeps gzip; an
//! `uncompressed` topic stores plain records; the broker-level value applies to topics that
//! do not set their own; a compression bomb is CORRUPT_MESSAGE and the broker lives on.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`];
//! batches are built with core's builder and compressed with the shared codec crate, so the
//! test compares bytes, not a client's view of them.

mod common;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{BatchBuilder, BatchHeader, Compression, NewRecord};
use minikafka_core::types::Offset;
use rdkafka::admin::{AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};

use common::librdkafka::*;
use common::typed::TypedClient;
use common::{bounded, Broker};

/// CORRUPT_MESSAGE.
const CORRUPT_MESSAGE: i16 = 2;

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

/// Twenty records (keys, values, a header) and their uncompressed records section.
fn records() -> BatchBuilder {
    let mut b = BatchBuilder::new();
    for i in 0..20 {
        let key = format!("key-{i}");
        let value = format!("value {i} ").repeat(20);
        b.push(&NewRecord {
            key: Some(key.as_bytes()),
            value: Some(value.as_bytes()),
            headers: vec![(b"h", Some(b"x"))],
            timestamp_ms: 1_000 + i,
        });
    }
    b
}

fn gzip_batch(builder: &BatchBuilder) -> Vec<u8> {
    let section =
        minikafka_codec::compress(Compression::Gzip, builder.records_bytes()).expect("gzip");
    builder.build_with(Offset(0), Compression::Gzip, &section)
}

/// Produce v9 of `batch` to `topic`/0: the partition's error code.
fn produce(client: &mut TypedClient, topic: &str, batch: Vec<u8>) -> i16 {
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(batch.into());
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request);
    response.responses[0].partition_responses[0].error_code
}

/// Fetch v11 of `topic`/0 from offset 0: the stored batches' bytes.
fn fetch(client: &mut TypedClient, topic: &str) -> Vec<Vec<u8>> {
    let mut p = fetch_request::FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = 0;
    p.partition_max_bytes = 1 << 20;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = 0;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request);
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch {topic}");
    let bytes = p.records.clone().unwrap_or_default();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let header = BatchHeader::parse(&bytes[at..]).expect("a batch header");
        out.push(bytes[at..at + header.total_bytes()].to_vec());
        at += header.total_bytes();
    }
    out
}

/// The one stored batch of `topic`: its codec, and header and uncompressed records section
/// checked against what was produced (offsets, timestamps, count and producer fields kept).
fn stored(client: &mut TypedClient, topic: &str, produced: &[u8], plain: &[u8]) -> Compression {
    let batches = fetch(client, topic);
    assert_eq!(batches.len(), 1, "{topic}: one batch");
    let got = BatchHeader::parse(&batches[0]).expect("header");
    let sent = BatchHeader::parse(produced).expect("header");
    assert_eq!(got.base_offset, Offset(0));
    assert_eq!(got.last_offset_delta, sent.last_offset_delta);
    assert_eq!(got.records_count, sent.records_count);
    assert_eq!(got.base_timestamp, sent.base_timestamp);
    assert_eq!(got.max_timestamp, sent.max_timestamp);
    assert_eq!(
        (got.producer_id, got.producer_epoch, got.base_sequence),
        (sent.producer_id, sent.producer_epoch, sent.base_sequence)
    );
    // The CRC and lengths are right: core's validation of a stored batch accepts it.
    minikafka_core::record::validate_batch_with(
        &batches[0],
        minikafka_core::record::ValidateOptions::stored(),
    )
    .unwrap_or_else(|e| panic!("{topic}: stored batch invalid: {e}"));
    let codec = got.compression().expect("known codec");
    let section = &batches[0][minikafka_core::record::HEADER_BYTES..];
    let records = minikafka_codec::decompress(codec, section, 16 << 20).expect("decompresses");
    assert_eq!(records, plain, "{topic}: records differ");
    codec
}

/// A gzip batch to lz4, producer and uncompressed topics (I87, I88); a bomb refused (I89).
#[test]
fn topics_store_batches_in_their_compression_type() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create(&broker, "lz4", &[("compression.type", "lz4")]);
        create(&broker, "kept", &[("compression.type", "producer")]);
        create(&broker, "plain", &[("compression.type", "uncompressed")]);
        create(
            &broker,
            "zstd",
            &[
                ("compression.type", "zstd"),
                ("compression.zstd.level", "19"),
            ],
        );
        let builder = records();
        let plain = builder.records_bytes().to_vec();
        let batch = gzip_batch(&builder);
        let mut client = TypedClient::connect(broker.addr());
        for topic in ["lz4", "kept", "plain", "zstd"] {
            assert_eq!(produce(&mut client, topic, batch.clone()), 0, "{topic}");
        }
        assert_eq!(stored(&mut client, "lz4", &batch, &plain), Compression::Lz4);
        assert_eq!(
            stored(&mut client, "kept", &batch, &plain),
            Compression::Gzip
        );
        // The copy-free path: a batch already in the topic's codec is stored as produced.
        assert_eq!(fetch(&mut client, "kept")[0][17..], batch[17..]);
        assert_eq!(
            stored(&mut client, "plain", &batch, &plain),
            Compression::None
        );
        assert_eq!(
            stored(&mut client, "zstd", &batch, &plain),
            Compression::Zstd
        );

        // A bomb: 80 MiB of zeros in a few kilobytes of zstd, past the 64 MiB bound.
        let mut bomb = BatchBuilder::new();
        bomb.push(&NewRecord {
            value: Some(b"v"),
            ..NewRecord::default()
        });
        let zeros = vec![0u8; 80 << 20];
        let section = minikafka_codec::compress(Compression::Zstd, &zeros).expect("zstd");
        drop(zeros);
        assert!(section.len() < 1 << 20, "bomb of {} bytes", section.len());
        let bomb = bomb.build_with(Offset(0), Compression::Zstd, &section);
        assert_eq!(produce(&mut client, "lz4", bomb), CORRUPT_MESSAGE);
        // The broker lives on, and nothing was appended.
        assert_eq!(fetch(&mut client, "lz4").len(), 1);
        assert_eq!(produce(&mut client, "lz4", batch.clone()), 0);
        assert_eq!(fetch(&mut client, "lz4").len(), 2);
    });
}

/// The broker-level `compression.type` applies to a topic without its own (I87); a topic
/// override wins.
#[test]
fn the_broker_compression_type_is_the_default() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder().with("compression.type", "snappy").start();
        create(&broker, "by-default", &[]);
        create(&broker, "own", &[("compression.type", "producer")]);
        let builder = records();
        let plain = builder.records_bytes().to_vec();
        let batch = gzip_batch(&builder);
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut client, "by-default", batch.clone()), 0);
        assert_eq!(produce(&mut client, "own", batch.clone()), 0);
        assert_eq!(
            stored(&mut client, "by-default", &batch, &plain),
            Compression::Snappy
        );
        assert_eq!(
            stored(&mut client, "own", &batch, &plain),
            Compression::Gzip
        );
    });
}

/// A dynamic change of the broker's `compression.type` (AlterConfigs) reaches live topics
/// without their own value at once (I87): the next batch is stored in the new codec.
#[test]
fn a_dynamic_broker_compression_type_applies_to_live_topics() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create(&broker, "live", &[]);
        let builder = records();
        let plain = builder.records_bytes().to_vec();
        let batch = gzip_batch(&builder);
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(produce(&mut client, "live", batch.clone()), 0);
        assert_eq!(
            stored(&mut client, "live", &batch, &plain),
            Compression::Gzip
        );

        let admin = admin(&broker);
        let alteration = AlterConfig::new(ResourceSpecifier::Broker(0))
            .set("compression.type", "lz4")
            .set("compression.lz4.level", "3");
        let results =
            futures::executor::block_on(admin.alter_configs(&[alteration], &admin_options()))
                .expect("AlterConfigs request");
        assert_eq!(results.len(), 1);

        assert_eq!(produce(&mut client, "live", batch.clone()), 0);
        let batches = fetch(&mut client, "live");
        assert_eq!(batches.len(), 2);
        let second = BatchHeader::parse(&batches[1]).expect("header");
        assert_eq!(second.compression(), Ok(Compression::Lz4));
        let section = &batches[1][minikafka_core::record::HEADER_BYTES..];
        let records =
            minikafka_codec::decompress(Compression::Lz4, section, 16 << 20).expect("lz4");
        assert_eq!(records, plain);
    });
}
