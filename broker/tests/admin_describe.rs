//! The describe APIs operators and clients use, over real TCP against the `minikafka` binary:
//! DescribeLogDirs (real partition sizes, checked against the segment files on disk),
//! OffsetForLeaderEpoch (the clients' truncation check: epoch 0 ends at the log end offset),
//! DescribeProducers (the idempotent producer librdkafka registered, across a restart),
//! DescribeTopicPartitions (KIP-966 cursor pagination) and DescribeConfigs' synonyms and
//! documentation (which librdkafka's admin API drops). Records are written by librdkafka;
//! the describe requests are `kafka-protocol`'s typed requests ([`common::typed`]), as
//! librdkafka's admin API does not expose these calls (kafka-python's does: see
//! `tests/interop/test_admin_describe.py`).
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::path::Path;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::librdkafka::{create_topics, expect_all_ok, now_ms, Rec, TestProducer, TEST_LIMIT};
use common::typed::TypedClient;
use common::{bounded, Broker};

fn topic(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Bytes of the segment (`.log`) files in `dir`: what a partition's size is made of.
fn segment_bytes_on_disk(dir: &Path) -> i64 {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::metadata(&p).expect("segment metadata").len() as i64)
        .sum()
}

/// Produces `count` records to `topic`/`partition` with librdkafka (idempotent when asked),
/// timestamps `base_ms + i`; returns the base timestamp.
fn produce(broker: &Broker, topic: &str, partition: i32, count: usize, idempotent: bool) -> i64 {
    let idempotence = if idempotent { "true" } else { "false" };
    let mut producer = TestProducer::new(broker, &[("enable.idempotence", idempotence)]);
    let base_ms = now_ms();
    let recs: Vec<Rec> = (0..count)
        .map(|i| Rec {
            timestamp_ms: Some(base_ms + i as i64),
            ..Rec::new(topic, Some(partition), format!("value {i}").as_bytes())
        })
        .collect();
    expect_all_ok(&producer.produce_all(&recs));
    base_ms
}

fn describe_log_dirs(
    client: &mut TypedClient,
    version: i16,
    topics: Option<Vec<(&str, Vec<i32>)>>,
) -> DescribeLogDirsResponse {
    let mut request = DescribeLogDirsRequest::default();
    request.topics = topics.map(|list| {
        list.into_iter()
            .map(|(name, partitions)| {
                let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
                t.topic = topic(name);
                t.partitions = partitions;
                t
            })
            .collect()
    });
    client.call(ApiKey::DescribeLogDirs, version, &request)
}

/// (topic, partition, size) rows of a DescribeLogDirs answer, sorted.
fn sizes(response: &DescribeLogDirsResponse) -> Vec<(String, i32, i64)> {
    let mut rows: Vec<_> = response
        .results
        .iter()
        .flat_map(|r| &r.topics)
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index, p.partition_size))
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn api_versions_lists_the_describe_apis() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        let response: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        let listed = |key: ApiKey| {
            response
                .api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .map(|k| (k.min_version, k.max_version))
        };
        assert_eq!(listed(ApiKey::OffsetForLeaderEpoch), Some((2, 4)));
        assert_eq!(listed(ApiKey::DescribeLogDirs), Some((1, 4)));
        assert_eq!(listed(ApiKey::DescribeProducers), Some((0, 0)));
        assert_eq!(listed(ApiKey::DescribeTopicPartitions), Some((0, 0)));
    });
}

/// DescribeLogDirs names the data directory and gives each partition the bytes of its
/// segment files, at every version; named partitions that do not exist are left out.
#[test]
fn describe_log_dirs_reports_the_partition_sizes_on_disk() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("sized", 2)]);
        produce(&broker, "sized", 0, 50, false);
        let mut client = TypedClient::connect(broker.addr());
        let on_disk = segment_bytes_on_disk(&broker.data_dir().join("sized-0"));
        assert!(on_disk > 50 * 7, "50 records take {on_disk} bytes");
        for version in 1..=4 {
            let all = describe_log_dirs(&mut client, version, None);
            assert_eq!(all.results.len(), 1, "one data directory");
            let result = &all.results[0];
            assert_eq!(result.error_code, 0);
            assert_eq!(
                Path::new(result.log_dir.as_str()),
                std::path::absolute(broker.data_dir()).expect("absolute")
            );
            if version >= 4 {
                assert_eq!((result.total_bytes, result.usable_bytes), (-1, -1));
            }
            let rows = sizes(&all);
            assert!(rows.contains(&("sized".into(), 0, on_disk)), "{rows:?}");
            assert!(rows.contains(&("sized".into(), 1, 0)), "{rows:?}");
            // Internal topics are listed too, as Kafka lists them.
            assert!(rows.iter().any(|(t, _, _)| t == "__consumer_offsets"));

            let named = describe_log_dirs(
                &mut client,
                version,
                Some(vec![("sized", vec![0, 7]), ("no-such-topic", vec![0])]),
            );
            assert_eq!(sizes(&named), vec![("sized".into(), 0, on_disk)]);
        }
    });
}

fn offset_for_leader_epoch(
    client: &mut TypedClient,
    version: i16,
    partitions: &[(&str, i32, i32, i32)],
) -> Vec<(i16, i32, i64)> {
    let mut request = OffsetForLeaderEpochRequest::default();
    request.replica_id = (-1).into();
    for (name, partition, current, epoch) in partitions {
        let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
        t.topic = topic(name);
        let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
        p.partition = *partition;
        p.current_leader_epoch = *current;
        p.leader_epoch = *epoch;
        t.partitions = vec![p];
        request.topics.push(t);
    }
    let response: OffsetForLeaderEpochResponse =
        client.call(ApiKey::OffsetForLeaderEpoch, version, &request);
    response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect()
}

/// Epoch 0 (what Metadata reports) ends at the log end offset; an epoch the log never had is
/// undefined; a client ahead of the broker's epoch is told so.
#[test]
fn offset_for_leader_epoch_ends_epoch_0_at_the_log_end_offset() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("epochs", 2)]);
        produce(&broker, "epochs", 1, 30, false);
        let mut client = TypedClient::connect(broker.addr());
        for version in 2..=4 {
            let answers = offset_for_leader_epoch(
                &mut client,
                version,
                &[
                    ("epochs", 1, 0, 0),
                    ("epochs", 0, -1, 0),
                    ("epochs", 1, 0, 3),
                    ("epochs", 1, 5, 0),
                    ("epochs", 9, 0, 0),
                    ("no-such-topic", 0, 0, 0),
                ],
            );
            assert_eq!(
                answers,
                vec![
                    (0, 0, 30),
                    (0, 0, 0),
                    (0, -1, -1),
                    (75, -1, -1), // UNKNOWN_LEADER_EPOCH
                    (3, -1, -1),
                    (3, -1, -1),
                ],
                "v{version}"
            );
        }
    });
}

/// One listed producer: (id, epoch, last sequence, last timestamp).
type Described = (i64, i32, i32, i64);

fn describe_producers(
    client: &mut TypedClient,
    partitions: &[(&str, i32)],
) -> Vec<(i16, Vec<Described>)> {
    let mut request = DescribeProducersRequest::default();
    for (name, partition) in partitions {
        let mut t = describe_producers_request::TopicRequest::default();
        t.name = topic(name);
        t.partition_indexes = vec![*partition];
        request.topics.push(t);
    }
    let response: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &request);
    response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            let producers = p
                .active_producers
                .iter()
                .map(|s| {
                    assert_eq!((s.coordinator_epoch, s.current_txn_start_offset), (-1, -1));
                    (
                        s.producer_id.0,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                    )
                })
                .collect();
            (p.error_code, producers)
        })
        .collect()
}

/// The idempotent producer librdkafka registered is listed with its epoch, last sequence and
/// last timestamp, also after a restart (the producer state is rebuilt from disk); a
/// partition only a plain producer wrote has none.
#[test]
fn describe_producers_lists_the_idempotent_producer_and_survives_restart() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_topics(&broker, &[("producers", 2)]);
        let base_ms = produce(&broker, "producers", 0, 5, true);
        produce(&broker, "producers", 1, 5, false);
        let query = [("producers", 0), ("producers", 1), ("producers", 2)];
        let mut client = TypedClient::connect(broker.addr());
        let before = describe_producers(&mut client, &query);
        assert_eq!(before.len(), 3);
        let (code, listed) = &before[0];
        assert_eq!(*code, 0);
        assert_eq!(listed.len(), 1, "{listed:?}");
        let (producer_id, epoch, last_sequence, last_timestamp) = listed[0];
        assert!(producer_id >= 0);
        assert_eq!((epoch, last_sequence, last_timestamp), (0, 4, base_ms + 4));
        assert_eq!(before[1], (0, vec![]));
        assert_eq!(before[2], (3, vec![]), "UNKNOWN_TOPIC_OR_PARTITION");

        assert!(broker.stop().success(), "clean stop");
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(describe_producers(&mut client, &query), before);
    });
}

fn describe_topic_partitions(
    client: &mut TypedClient,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let mut request = DescribeTopicPartitionsRequest::default();
    request.topics = topics
        .iter()
        .map(|name| {
            let mut t = describe_topic_partitions_request::TopicRequest::default();
            t.name = topic(name);
            t
        })
        .collect();
    request.response_partition_limit = limit;
    request.cursor = cursor.map(|(name, partition)| {
        let mut c = describe_topic_partitions_request::Cursor::default();
        c.topic_name = topic(name);
        c.partition_index = partition;
        c
    });
    client.call(ApiKey::DescribeTopicPartitions, 0, &request)
}

/// (topic, error, partitions) of a page, and its next cursor.
type Page = (Vec<(String, i16, Vec<i32>)>, Option<(String, i32)>);

fn page(response: &DescribeTopicPartitionsResponse) -> Page {
    let topics = response
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
            (name, t.error_code, partitions)
        })
        .collect();
    let next = response
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (topics, next)
}

/// Pages of two partitions walk the named topics in name order, each partition once (an
/// unknown topic is UNKNOWN_TOPIC_OR_PARTITION and takes none of the limit); the topic ids
/// are Metadata's; a cursor outside the named topics is INVALID_REQUEST.
#[test]
fn describe_topic_partitions_pages_with_a_cursor() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        create_topics(&broker, &[("pages-a", 3), ("pages-b", 2)]);
        let mut client = TypedClient::connect(broker.addr());
        let named = ["pages-b", "missing", "pages-a"];
        let first = describe_topic_partitions(&mut client, &named, 2, None);
        assert_eq!(
            page(&first),
            (
                vec![
                    ("missing".into(), 3, vec![]),
                    ("pages-a".into(), 0, vec![0, 1])
                ],
                Some(("pages-a".into(), 2))
            )
        );
        let second = describe_topic_partitions(&mut client, &named, 2, Some(("pages-a", 2)));
        assert_eq!(
            page(&second),
            (
                vec![
                    ("pages-a".into(), 0, vec![2]),
                    ("pages-b".into(), 0, vec![0])
                ],
                Some(("pages-b".into(), 1))
            )
        );
        let third = describe_topic_partitions(&mut client, &named, 2, Some(("pages-b", 1)));
        assert_eq!(page(&third), (vec![("pages-b".into(), 0, vec![1])], None));
        for p in &second.topics[0].partitions {
            assert_eq!(p.leader_id.0, 0);
            assert_eq!(p.leader_epoch, 0);
            assert_eq!(p.replica_nodes.iter().map(|n| n.0).collect::<Vec<_>>(), [0]);
            assert_eq!(p.isr_nodes.iter().map(|n| n.0).collect::<Vec<_>>(), [0]);
        }

        // Topic ids and internal flags are Metadata's.
        let mut request = MetadataRequest::default();
        request.topics = None;
        let metadata: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
        let all = describe_topic_partitions(&mut client, &[], 2000, None);
        assert!(all.next_cursor.is_none());
        let mut names = Vec::new();
        for t in &all.topics {
            let name = t.name.as_ref().expect("name").0.to_string();
            let m = metadata
                .topics
                .iter()
                .find(|m| m.name.as_ref().map(|n| n.0.as_str()) == Some(name.as_str()))
                .unwrap_or_else(|| panic!("{name} not in Metadata"));
            assert_eq!((t.topic_id, t.is_internal), (m.topic_id, m.is_internal));
            assert_eq!(t.partitions.len(), m.partitions.len(), "{name}");
            names.push(name);
        }
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "topics in name order");
        assert!(names.contains(&"__consumer_offsets".to_string()));

        let bad = describe_topic_partitions(&mut client, &["pages-a"], 10, Some(("pages-b", 0)));
        assert_eq!(page(&bad), (vec![("pages-a".into(), 42, vec![])], None));
    });
}

/// DescribeConfigs (v4, synonyms and documentation asked for) over the wire: a value given
/// under another spelling is described under the setting's name with every spelling it may
/// come from as synonyms, in precedence order; a Kafka setting that means nothing on one
/// node is described with what was given and says it has no effect (settings table,
/// `broker/src/config/table.rs`).
#[test]
fn describe_configs_lists_synonyms_and_no_effect_settings() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with("log.retention.hours", "1")
            .with("num.io.threads", "4")
            .start();
        create_topics(&broker, &[("synonyms", 1)]);
        let mut client = TypedClient::connect(broker.addr());
        let mut request = DescribeConfigsRequest::default();
        request.include_synonyms = true;
        request.include_documentation = true;
        request.resources = [(4, "0"), (2, "synonyms")]
            .into_iter()
            .map(|(kind, name)| {
                let mut resource = describe_configs_request::DescribeConfigsResource::default();
                resource.resource_type = kind;
                resource.resource_name = StrBytes::from_string(name.to_string());
                resource.configuration_keys = None; // all of them
                resource
            })
            .collect();
        let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
        let entry = |resource: usize, name: &str| {
            let result = &response.results[resource];
            assert_eq!(result.error_code, 0, "{:?}", result.error_message);
            result
                .configs
                .iter()
                .find(|c| c.name.as_str() == name)
                .unwrap_or_else(|| panic!("{name} not described"))
                .clone()
        };
        let synonyms = |c: &describe_configs_response::DescribeConfigsResourceResult| {
            c.synonyms
                .iter()
                .map(|s| {
                    let value = s.value.as_ref().map_or("", |v| v.as_str()).to_string();
                    (s.name.as_str().to_string(), value, s.source)
                })
                .collect::<Vec<_>>()
        };
        let expected = vec![
            ("log.retention.hours".to_string(), "1".to_string(), 4),
            ("log.retention.ms".to_string(), "604800000".to_string(), 5),
        ];
        let retention = entry(0, "log.retention.ms");
        assert_eq!(retention.value.as_deref(), Some("3600000"));
        assert_eq!((retention.config_source, retention.read_only), (4, false));
        assert_eq!(synonyms(&retention), expected);
        let topic_retention = entry(1, "retention.ms");
        assert_eq!(topic_retention.config_source, 4);
        assert_eq!(synonyms(&topic_retention), expected);
        let threads = entry(0, "num.io.threads");
        assert_eq!(threads.value.as_deref(), Some("4"));
        // Dynamic cluster-wide in Kafka (KIP-226), so not read-only, though it changes nothing here.
        assert_eq!((threads.config_source, threads.read_only), (4, false));
        let why = threads.documentation.as_deref().unwrap_or("");
        assert!(why.contains("no effect on a single node"), "{why:?}");
        let kerberos = entry(0, "sasl.kerberos.min.time.before.relogin");
        assert_eq!(kerberos.config_source, 5);
    });
}

/// DescribeConfigs of a group (resource type 32): every key, source 8 when set on the group.
fn describe_group(client: &mut TypedClient, group: &str) -> Vec<(String, String, i8)> {
    let mut request = DescribeConfigsRequest::default();
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 32;
    resource.resource_name = StrBytes::from_string(group.to_string());
    resource.configuration_keys = None; // all of them
    request.resources = vec![resource];
    let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    let mut out: Vec<_> = result
        .configs
        .iter()
        .map(|c| {
            let value = c.value.as_ref().map_or("", |v| v.as_str()).to_string();
            (c.name.as_str().to_string(), value, c.config_source)
        })
        .collect();
    out.sort();
    out
}

/// IncrementalAlterConfigs of a group with `(key, operation, value)`; the resource's error
/// code.
fn alter_group(client: &mut TypedClient, group: &str, ops: &[(&str, i8, Option<&str>)]) -> i16 {
    let mut request = IncrementalAlterConfigsRequest::default();
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = 32;
    resource.resource_name = StrBytes::from_string(group.to_string());
    resource.configs = ops
        .iter()
        .map(|(key, op, value)| {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = StrBytes::from_string(key.to_string());
            config.config_operation = *op;
            config.value = value.map(|v| StrBytes::from_string(v.to_string()));
            config
        })
        .collect();
    request.resources = vec![resource];
    let response: IncrementalAlterConfigsResponse =
        client.call(ApiKey::IncrementalAlterConfigs, 1, &request);
    response.responses[0].error_code
}

/// Joins consumer-protocol group `group` (a new member, ConsumerGroupHeartbeat v0); the
/// heartbeat interval the coordinator answers.
fn join_interval(client: &mut TypedClient, group: &str) -> i32 {
    let mut request = ConsumerGroupHeartbeatRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_string()));
    request.member_epoch = 0;
    request.rebalance_timeout_ms = 30_000;
    request.subscribed_topic_names = Some(Vec::new());
    request.topic_partitions = Some(Vec::new());
    let response: ConsumerGroupHeartbeatResponse =
        client.call(ApiKey::ConsumerGroupHeartbeat, 0, &request);
    assert_eq!(response.error_code, 0, "{:?}", response.error_message);
    response.heartbeat_interval_ms
}

/// Group configurations (KIP-848): described with the broker's `group.consumer.*` values as
/// defaults, set per group within the broker's bounds (INVALID_CONFIG outside them or for an
/// unknown name), deleted back to the default, kept across a restart, and honoured by the
/// consumer-protocol coordinator.
#[test]
fn group_configs_are_described_altered_and_stored() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder()
            .with("group.consumer.session.timeout.ms", "50000")
            .start();
        let mut client = TypedClient::connect(broker.addr());
        let defaults = vec![
            (
                "consumer.heartbeat.interval.ms".to_string(),
                "5000".to_string(),
                5,
            ),
            (
                "consumer.session.timeout.ms".to_string(),
                "50000".to_string(),
                5,
            ),
        ];
        assert_eq!(describe_group(&mut client, "no-such-group-yet"), defaults);
        let (invalid_config, invalid_request) = (40, 42);
        for ops in [
            vec![("consumer.session.timeout.ms", 0, Some("1000"))],
            vec![("consumer.session.timeout.ms", 0, Some("60001"))],
            vec![("consumer.heartbeat.interval.ms", 0, Some("lots"))],
            vec![("consumer.session.timeout", 0, Some("50000"))],
            vec![("consumer.session.timeout", 1, None)],
        ] {
            assert_eq!(
                alter_group(&mut client, "g", &ops),
                invalid_config,
                "{ops:?}"
            );
        }
        let set = [("consumer.session.timeout.ms", 0, None)];
        assert_eq!(alter_group(&mut client, "g", &set), invalid_request);
        assert_eq!(alter_group(&mut client, "", &[]), invalid_request);
        assert_eq!(
            describe_group(&mut client, "g"),
            defaults,
            "refusals change nothing"
        );
        let ops = [
            ("consumer.session.timeout.ms", 0, Some("55000")),
            ("consumer.heartbeat.interval.ms", 0, Some("7000")),
        ];
        assert_eq!(alter_group(&mut client, "g", &ops), 0);
        let altered = vec![
            (
                "consumer.heartbeat.interval.ms".to_string(),
                "7000".to_string(),
                8,
            ),
            (
                "consumer.session.timeout.ms".to_string(),
                "55000".to_string(),
                8,
            ),
        ];
        assert_eq!(describe_group(&mut client, "g"), altered);
        assert_eq!(describe_group(&mut client, "other"), defaults);
        drop(client);
        broker.stop();
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(describe_group(&mut client, "g"), altered, "after a restart");
        // The coordinator times the group by it: the heartbeat interval it answers.
        assert_eq!(join_interval(&mut client, "g"), 7000);
        assert_eq!(join_interval(&mut client, "other"), 5000);
        let delete = [("consumer.heartbeat.interval.ms", 1, None)];
        assert_eq!(alter_group(&mut client, "g", &delete), 0);
        let after_delete = vec![defaults[0].clone(), altered[1].clone()];
        assert_eq!(describe_group(&mut client, "g"), after_delete);
        assert_eq!(join_interval(&mut client, "g"), 5000);
    });
}

/// IncrementalAlterConfigs of the broker's loggers (resource type 8, named by `node.id`);
/// the resource's error code.
fn alter_loggers(client: &mut TypedClient, ops: &[(&str, i8, Option<&str>)]) -> i16 {
    let mut request = IncrementalAlterConfigsRequest::default();
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = 8;
    resource.resource_name = StrBytes::from_static_str("0");
    resource.configs = ops
        .iter()
        .map(|(key, op, value)| {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = StrBytes::from_string(key.to_string());
            config.config_operation = *op;
            config.value = value.map(|v| StrBytes::from_string(v.to_string()));
            config
        })
        .collect();
    request.resources = vec![resource];
    let response: IncrementalAlterConfigsResponse =
        client.call(ApiKey::IncrementalAlterConfigs, 1, &request);
    response.responses[0].error_code
}

/// The level DescribeConfigs gives each named logger of the broker.
fn logger_levels(client: &mut TypedClient, names: &[&str]) -> Vec<String> {
    let mut request = DescribeConfigsRequest::default();
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 8;
    resource.resource_name = StrBytes::from_static_str("0");
    resource.configuration_keys = None;
    request.resources = vec![resource];
    let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    names
        .iter()
        .map(|name| {
            let entry = result
                .configs
                .iter()
                .find(|c| c.name.as_str() == *name)
                .unwrap_or_else(|| panic!("logger {name} not described"));
            assert_eq!((entry.config_source, entry.read_only), (6, false), "{name}");
            entry.value.as_ref().map_or("", |v| v.as_str()).to_string()
        })
        .collect()
}

/// Broker loggers (`kafka-configs.sh --entity-type broker-loggers`): DescribeConfigs lists
/// root and the broker's targets with their levels; SET changes what the running broker logs
/// (a debug line appears only once its target is at DEBUG), DELETE gives a target root's
/// level back; deleting root, APPEND, a bad level and the legacy AlterConfigs are refused.
#[test]
fn broker_logger_levels_change_at_run_time() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        let debug_line = "alter configs refused";
        assert_eq!(alter_loggers(&mut client, &[("root", 0, Some("INFO"))]), 0);
        assert_eq!(
            alter_loggers(&mut client, &[("minikafka_broker", 1, None)]),
            0
        );
        assert_eq!(
            logger_levels(&mut client, &["root", "minikafka_broker"]),
            ["INFO", "INFO"]
        );
        let (invalid_config, invalid_request) = (40, 42);
        assert_eq!(
            alter_loggers(&mut client, &[("root", 1, None)]),
            invalid_request
        );
        assert!(
            !broker.output().contains(debug_line),
            "logged below its level"
        );
        assert_eq!(
            alter_loggers(&mut client, &[("minikafka_broker", 0, Some("DEBUG"))]),
            0
        );
        assert_eq!(
            logger_levels(&mut client, &["root", "minikafka_broker"]),
            ["INFO", "DEBUG"]
        );
        assert_eq!(
            alter_loggers(&mut client, &[("minikafka_broker", 2, Some("INFO"))]),
            invalid_request
        );
        assert_eq!(
            alter_loggers(&mut client, &[("minikafka_broker", 0, Some("LOUD"))]),
            invalid_config
        );
        assert!(
            broker.output().contains(debug_line),
            "the new level is in force"
        );
        let mut legacy = AlterConfigsRequest::default();
        let mut resource = alter_configs_request::AlterConfigsResource::default();
        resource.resource_type = 8;
        resource.resource_name = StrBytes::from_static_str("0");
        legacy.resources = vec![resource];
        let response: AlterConfigsResponse = client.call(ApiKey::AlterConfigs, 2, &legacy);
        assert_eq!(response.responses[0].error_code, invalid_request);
        assert_eq!(
            alter_loggers(&mut client, &[("minikafka_broker", 1, None)]),
            0
        );
        assert_eq!(logger_levels(&mut client, &["minikafka_broker"]), ["INFO"]);
    });
}

/// Client metrics subscriptions (resource type 16, KIP-714): this broker collects no client
/// telemetry, so a subscription is described with no entries and cannot be set.
#[test]
fn client_metrics_subscriptions_are_empty_and_cannot_be_set() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        let mut request = DescribeConfigsRequest::default();
        request.resources = ["every-client", ""]
            .into_iter()
            .map(|name| {
                let mut resource = describe_configs_request::DescribeConfigsResource::default();
                resource.resource_type = 16;
                resource.resource_name = StrBytes::from_string(name.to_string());
                resource.configuration_keys = None;
                resource
            })
            .collect();
        let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &request);
        let answer: Vec<_> = response
            .results
            .iter()
            .map(|r| (r.error_code, r.configs.len()))
            .collect();
        assert_eq!(answer, [(0, 0), (42, 0)]);
        let mut alter = IncrementalAlterConfigsRequest::default();
        let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
        resource.resource_type = 16;
        resource.resource_name = StrBytes::from_static_str("every-client");
        let mut config = incremental_alter_configs_request::AlterableConfig::default();
        config.name = StrBytes::from_static_str("interval.ms");
        config.value = Some(StrBytes::from_static_str("60000"));
        resource.configs = vec![config];
        alter.resources = vec![resource];
        let response: IncrementalAlterConfigsResponse =
            client.call(ApiKey::IncrementalAlterConfigs, 1, &alter);
        assert_eq!(response.responses[0].error_code, 42);
    });
}
