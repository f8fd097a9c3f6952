//! Topic configurations over real TCP through librdkafka's admin API: CreateTopics refuses
//! names Kafka does not define and values this broker cannot honour with INVALID_CONFIG, and
//! DescribeConfigs says where each value comes from (topic override, static broker setting,
//! default).
//!
//! Contract: every test starts its own `minikafka` binary ([`common::Broker`]) and runs inside
//! [`common::bounded`]; assertions are what Apache Kafka would answer to the same client.

mod common;

use common::librdkafka::*;
use common::{bounded, Broker};
use rdkafka::admin::{ConfigSource, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;

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
            ("compression.type", "gzip"),
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
                ("compression.type", "producer"),
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
