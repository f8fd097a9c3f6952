//! Topic configurations over real TCP through librdkafka's admin API: CreateTopics refuses
//! names Kafka does not define and values this broker cannot honour with INVALID_CONFIG,
//! DescribeConfigs says where each value comes from (topic override, dynamic or static broker
//! setting, default), AlterConfigs changes topics and the dynamic broker settings live and
//! durably, and DeleteRecords moves the log start offset durably.
//!
//! Contract: every test starts its own `minikafka` binary ([`common::Broker`]) and runs inside
//! [`common::bounded`]; assertions are what Apache Kafka would answer to the same client.

mod common;

use common::librdkafka::*;
use common::{bounded, Broker};
use rdkafka::admin::{AlterConfig, ConfigSource, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

/// The outcome of creating one topic with `configs`.
fn create_with(
    broker: &Broker,
    name: &str,
    configs: &[(&str, &str)],
) -> Result<(), RDKafkaErrorCode> {
    let admin = admin(broker);
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = futures::executor::block_on(admin.create_topics(&[topic], &admin_options()))
        .expect("CreateTopics request");
    match results.into_iter().next().expect("one result") {
        Ok(_) => Ok(()),
        Err((_, code)) => Err(code),
    }
}

/// Unknown names, refused names and unsupported values are INVALID_CONFIG and create
/// nothing; Kafka names that are honoured or not applicable here are accepted.
#[test]
fn create_topics_refuses_configs_it_cannot_honour() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("auto.create.topics.enable", "false")
            .start();
        for (key, value) in [
            ("retention.msec", "1000"),
            ("compression.type", "brotli"),
            ("compression.gzip.level", "10"),
            ("cleanup.policy", "compact,keep"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("flush.messages", "1"),
            ("min.insync.replicas", "2"),
        ] {
            assert_eq!(
                create_with(&broker, "refused", &[(key, value)]),
                Err(RDKafkaErrorCode::InvalidConfig),
                "{key}={value}"
            );
        }
        let admin = admin(&broker);
        let metadata = admin
            .inner()
            .fetch_metadata(None, CALL_LIMIT)
            .expect("metadata");
        assert!(
            metadata.topics().iter().all(|t| t.name() != "refused"),
            "a refused topic was created"
        );
        create_with(
            &broker,
            "accepted",
            &[
                ("compression.type", "lz4"),
                ("compression.lz4.level", "12"),
                ("cleanup.policy", "compact,delete"),
                ("min.cleanable.dirty.ratio", "0.25"),
                ("min.insync.replicas", "1"),
                ("preallocate", "true"),
                ("retention.ms", "60000"),
            ],
        )
        .expect("Kafka names with supported values are accepted");
    });
}

/// DescribeConfigs sources: a topic override is DYNAMIC_TOPIC_CONFIG, a setting the broker
/// was started with is STATIC_BROKER_CONFIG (for the topic and the broker alike), the rest
/// DEFAULT_CONFIG.
#[test]
fn describe_configs_reports_sources() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("log.segment.bytes", "1048576")
            .start();
        create_with(&broker, "described", &[("retention.ms", "60000")]).expect("create");
        let admin = admin(&broker);
        let results = futures::executor::block_on(admin.describe_configs(
            &[
                ResourceSpecifier::Topic("described"),
                ResourceSpecifier::Broker(0),
            ],
            &admin_options(),
        ))
        .expect("DescribeConfigs request");
        let topic = results[0].as_ref().expect("topic described");
        let entry = |name: &str| {
            topic
                .get(name)
                .unwrap_or_else(|| panic!("{name} not described"))
        };
        assert_eq!(entry("retention.ms").value.as_deref(), Some("60000"));
        assert_eq!(entry("retention.ms").source, ConfigSource::DynamicTopic);
        assert_eq!(entry("segment.bytes").value.as_deref(), Some("1048576"));
        assert_eq!(entry("segment.bytes").source, ConfigSource::StaticBroker);
        assert_eq!(entry("max.message.bytes").source, ConfigSource::Default);
        assert_eq!(entry("compression.type").value.as_deref(), Some("producer"));
        assert_eq!(entry("compression.type").source, ConfigSource::Default);
        let node = results[1].as_ref().expect("broker described");
        let segment = node.get("log.segment.bytes").expect("log.segment.bytes");
        assert_eq!(segment.source, ConfigSource::StaticBroker);
        let partitions = node.get("num.partitions").expect("num.partitions");
        assert_eq!(partitions.source, ConfigSource::Default);
    });
}

/// Alters `resource` with librdkafka's AlterConfigs (the whole set of settings is replaced).
/// The rdkafka crate (0.39) reports every resource of an answered AlterConfigs as `Ok`,
/// dropping the per-resource error code, so callers check refusals by their (absent)
/// effect; the codes themselves are checked through `mk` (client crate) and kafka-python.
fn alter_with(
    broker: &Broker,
    resource: ResourceSpecifier<'_>,
    settings: &[(&str, &str)],
    validate_only: bool,
) {
    let admin = admin(broker);
    let mut alteration = AlterConfig::new(resource);
    for (key, value) in settings {
        alteration = alteration.set(key, value);
    }
    let options = admin_options().validate_only(validate_only);
    let results = futures::executor::block_on(admin.alter_configs(&[alteration], &options))
        .expect("AlterConfigs request");
    assert_eq!(results.len(), 1, "one result per resource");
}

/// `(value, source, read_only)` of each named setting of `resource`, by DescribeConfigs.
fn described(
    broker: &Broker,
    resource: ResourceSpecifier<'_>,
    names: &[&str],
) -> Vec<(Option<String>, ConfigSource, bool)> {
    let admin = admin(broker);
    let results =
        futures::executor::block_on(admin.describe_configs(&[resource], &admin_options()))
            .expect("DescribeConfigs request");
    let resource = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("described");
    let mut entries = resource.entries;
    names
        .iter()
        .map(|name| {
            let at = entries
                .iter()
                .position(|e| e.name == *name)
                .unwrap_or_else(|| panic!("{name} not described"));
            let entry = entries.swap_remove(at);
            (entry.value, entry.source, entry.is_read_only)
        })
        .collect()
}

/// The `.log` segment files of `topic`-`partition` in the broker's data directory.
fn segment_files(broker: &Broker, topic: &str, partition: i32) -> Vec<String> {
    let dir = broker.data_dir().join(format!("{topic}-{partition}"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

fn produce_values(broker: &Broker, topic: &str, count: usize, value_bytes: usize) {
    let mut producer = TestProducer::new(broker, &[("linger.ms", "0")]);
    let value = vec![b'x'; value_bytes];
    let recs: Vec<Rec> = (0..count)
        .map(|_| Rec::new(topic, Some(0), &value))
        .collect();
    expect_all_ok(&producer.produce_all(&recs));
}

/// librdkafka's AlterConfigs on a topic: unknown names, unsupported values and reserved
/// names change nothing, `validate_only` changes nothing, and an accepted
/// change reaches the live partition at once (a smaller `segment.bytes` rolls the next
/// appends into new segments, with no restart), is described as DYNAMIC_TOPIC_CONFIG, and
/// survives a clean restart and a crash.
#[test]
fn alter_configs_apply_to_live_topics_and_survive_restarts() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder()
            .with("auto.create.topics.enable", "false")
            .start();
        create_with(&broker, "altered", &[("retention.ms", "60000")]).expect("create");
        let topic = || ResourceSpecifier::Topic("altered");
        for (key, value) in [
            ("retention.msec", "1000"),
            ("compression.type", "brotli"),
            ("flush.messages", "1"),
            ("minikafka.topic.id", "x"),
        ] {
            alter_with(&broker, topic(), &[(key, value)], false);
            // Accepted, the replacement would have dropped retention.ms.
            let now = described(&broker, topic(), &["retention.ms"]);
            assert_eq!(
                now[0].0.as_deref(),
                Some("60000"),
                "{key}={value} was applied"
            );
        }
        alter_with(&broker, topic(), &[("segment.bytes", "2048")], true);
        let before = described(&broker, topic(), &["retention.ms", "segment.bytes"]);
        assert_eq!(before[0].0.as_deref(), Some("60000"));
        assert_eq!(
            before[1].1,
            ConfigSource::Default,
            "validate_only changed segment.bytes"
        );

        produce_values(&broker, "altered", 5, 300);
        assert_eq!(segment_files(&broker, "altered", 0).len(), 1);
        // AlterConfigs replaces the whole set: retention.ms goes back to the default.
        alter_with(&broker, topic(), &[("segment.bytes", "2048")], false);
        for _ in 0..10 {
            produce_values(&broker, "altered", 2, 300);
        }
        let segments = segment_files(&broker, "altered", 0);
        assert!(
            segments.len() >= 3,
            "segment.bytes=2048 did not reach the live partition: {segments:?}"
        );
        let expect_altered = |broker: &Broker, when: &str| {
            let now = described(broker, topic(), &["segment.bytes", "retention.ms"]);
            assert_eq!(now[0].0.as_deref(), Some("2048"), "{when}");
            assert_eq!(now[0].1, ConfigSource::DynamicTopic, "{when}");
            assert_eq!(now[1].1, ConfigSource::Default, "{when}: retention.ms kept");
        };
        expect_altered(&broker, "live");
        broker.stop();
        broker.restart();
        expect_altered(&broker, "after a clean restart");
        broker.kill9();
        broker.restart();
        expect_altered(&broker, "after a crash");
        // The partition still rolls at 2048 after the restarts (the stored setting is used).
        let count = segment_files(&broker, "altered", 0).len();
        for _ in 0..5 {
            produce_values(&broker, "altered", 2, 300);
        }
        assert!(segment_files(&broker, "altered", 0).len() > count);
    });
}

/// librdkafka's AlterConfigs on the broker: a dynamic setting (`log.retention.ms`) is
/// applied to every topic without an override and described as DYNAMIC_BROKER_CONFIG for
/// the broker and the topic, and is not read-only; a read-only setting, an unknown one and a
/// bad value change nothing; the change survives a restart.
#[test]
fn alter_configs_on_the_broker_change_dynamic_settings_only() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_with(&broker, "follows", &[]).expect("create");
        let node = || ResourceSpecifier::Broker(0);
        let dirs = described(&broker, node(), &["log.dirs"]);
        for (key, value) in [
            ("log.dirs", "/elsewhere"),
            ("log.retention.msec", "5"),
            ("log.segment.bytes", "lots"),
        ] {
            alter_with(&broker, node(), &[(key, value)], false);
            let now = described(&broker, node(), &["log.dirs", "log.segment.bytes"]);
            assert_eq!(now[0].0, dirs[0].0, "{key}={value}");
            assert_eq!(now[1].1, ConfigSource::Default, "{key}={value} was applied");
        }
        alter_with(&broker, node(), &[("log.retention.ms", "123456")], false);
        let check = |broker: &Broker, when: &str| {
            let b = described(broker, node(), &["log.retention.ms", "log.dirs"]);
            assert_eq!(b[0].0.as_deref(), Some("123456"), "{when}");
            assert_eq!(b[0].1, ConfigSource::DynamicBroker, "{when}");
            assert!(!b[0].2 && b[1].2, "{when}: read-only flags");
            let t = described(
                broker,
                ResourceSpecifier::Topic("follows"),
                &["retention.ms"],
            );
            assert_eq!(t[0].0.as_deref(), Some("123456"), "{when}");
            assert_eq!(t[0].1, ConfigSource::DynamicBroker, "{when}");
        };
        check(&broker, "live");
        broker.stop();
        broker.restart();
        check(&broker, "after a restart");
    });
}

/// librdkafka's DeleteRecords: the low watermark moves to the offset asked (End: the high
/// watermark), consumers from the beginning start there, an offset above the high watermark
/// is OFFSET_OUT_OF_RANGE, the segments below are deleted from disk, and the log start
/// survives a crash.
#[test]
fn delete_records_moves_the_log_start_and_survives_a_crash() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_with(&broker, "trimmed", &[("segment.bytes", "4096")]).expect("create");
        for _ in 0..10 {
            produce_values(&broker, "trimmed", 10, 200);
        }
        let before_files = segment_files(&broker, "trimmed", 0);
        assert!(before_files.len() >= 4, "{before_files:?}");
        let admin = admin(&broker);
        let delete = |offset: Offset| {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("trimmed", 0, offset).expect("tpl");
            let result = futures::executor::block_on(admin.delete_records(&tpl, &admin_options()))
                .expect("DeleteRecords request");
            let element = result.find_partition("trimmed", 0).expect("answered");
            element.error().map(|()| element.offset())
        };
        assert_eq!(delete(Offset::Offset(60)), Ok(Offset::Offset(60)));
        assert_eq!(
            delete(Offset::Offset(1000)),
            Err(rdkafka::error::KafkaError::OffsetFetch(
                RDKafkaErrorCode::OffsetOutOfRange
            ))
        );
        let watermarks = |broker: &Broker| {
            consumer(broker, &[])
                .fetch_watermarks("trimmed", 0, CALL_LIMIT)
                .expect("watermarks")
        };
        assert_eq!(watermarks(&broker), (60, 100));
        let after_files = segment_files(&broker, "trimmed", 0);
        assert!(
            after_files.len() < before_files.len() && after_files[0] > before_files[0],
            "no segment deleted: {after_files:?}"
        );
        let c = consumer(&broker, &[]);
        let first = read_partition(&c, "trimmed", 0, Offset::Beginning, 1);
        assert_eq!(first[0].offset(), 60);
        broker.kill9();
        broker.restart();
        assert_eq!(watermarks(&broker), (60, 100), "after a crash");
        let admin = common::librdkafka::admin(&broker);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("trimmed", 0, Offset::End)
            .expect("tpl");
        let result = futures::executor::block_on(admin.delete_records(&tpl, &admin_options()))
            .expect("DeleteRecords request");
        let element = result.find_partition("trimmed", 0).expect("answered");
        assert_eq!(element.error(), Ok(()));
        assert_eq!(element.offset(), Offset::Offset(100));
        broker.stop();
        broker.restart();
        assert_eq!(watermarks(&broker), (100, 100), "after deleting everything");
    });
}
