//! The client library against the REAL broker binary (see `common`): produce/consume order,
//! murmur2 placement, exact seeks, every codec, acks, long-poll, admin.

mod common;

use std::time::{Duration, Instant};

use common::{poll_until, Broker};
use minikafka_client::admin::OffsetSpec;
use minikafka_client::partitioner::partition_for_key;
use minikafka_client::producer::{BatchConfig, DeliveryFuture, ProducerDriver};
use minikafka_client::{
    Acks, Compression, ConnectionConfig, Error, Offset, Producer, ProducerConfig, ProducerRecord,
    SeekTo, SmolRuntime, TopicPartition,
};
use smol::net::TcpStream;

async fn producer(broker: &Broker, config: ProducerConfig) -> (Producer, smol::Task<()>) {
    let (producer, driver): (Producer, ProducerDriver<TcpStream, SmolRuntime>) =
        Producer::connect(broker.stream().await, config, SmolRuntime)
            .await
            .expect("producer connect");
    (producer, smol::spawn(driver.run()))
}

async fn deliver_all(futures: Vec<DeliveryFuture>) -> Vec<minikafka_client::Delivery> {
    let mut out = Vec::new();
    for f in futures {
        out.push(f.await.expect("delivery"));
    }
    out
}

/// Produces 500 records per partition in batches of 7 with up to `per_partition` requests in
/// flight per partition (5 per connection) and checks offsets and consumed order.
fn produce_and_consume_in_order(partitions: i32, per_partition: usize) {
    let broker = Broker::start();
    smol::block_on(async {
        broker.create_topic("ordered", partitions).await;
        let config = ProducerConfig {
            connection: ConnectionConfig {
                max_in_flight: 5,
                ..ConnectionConfig::default()
            },
            max_in_flight_per_partition: per_partition,
            batch: BatchConfig {
                max_records: 7,
                max_bytes: 1 << 20,
                linger: Duration::from_millis(1),
            },
            ..ProducerConfig::default()
        };
        let (producer, driver) = producer(&broker, config).await;
        let mut futures = Vec::new();
        for i in 0..500 {
            for p in 0..partitions {
                futures.push(
                    producer
                        .send(
                            ProducerRecord::new("ordered", format!("value-{i}")).with_partition(p),
                        )
                        .await
                        .expect("send"),
                );
            }
        }
        let deliveries = deliver_all(futures).await;
        // Offsets follow send order exactly, per partition.
        for (n, d) in deliveries.iter().enumerate() {
            let i = n / partitions as usize;
            assert_eq!(d.partition, (n % partitions as usize) as i32);
            assert_eq!(
                d.offset,
                Some(Offset(i as i64)),
                "record {i} of partition {}",
                d.partition
            );
        }
        drop(producer);
        driver.await;

        let mut consumer = broker.consumer().await;
        consumer.assign((0..partitions).map(|p| TopicPartition::new("ordered", p)));
        let records = poll_until(&mut consumer, 500 * partitions as usize).await;
        for p in 0..partitions {
            let mine: Vec<_> = records.iter().filter(|r| r.partition == p).collect();
            assert_eq!(mine.len(), 500);
            for (i, r) in mine.iter().enumerate() {
                assert_eq!(r.offset, Offset(i as i64));
                assert_eq!(r.value.as_deref(), Some(format!("value-{i}").as_bytes()));
            }
        }
    });
}

/// The default (one request per partition in flight, five per connection): order is kept by
/// the client alone, while three partitions pipeline on one connection.
#[test]
fn produce_then_consume_preserves_order_with_pipelining() {
    produce_and_consume_in_order(3, 1);
}

/// Five requests in flight for ONE partition: order then rests on the broker processing a
/// connection's requests in order, as the Kafka protocol promises (librdkafka and the Java
/// client's idempotent producer pipeline a partition like this).
#[test]
fn broker_appends_pipelined_batches_of_one_partition_in_request_order() {
    produce_and_consume_in_order(1, 5);
}

#[test]
fn keyed_records_land_on_murmur2_partitions() {
    let broker = Broker::start();
    smol::block_on(async {
        let partitions = 6;
        broker.create_topic("keyed", partitions).await;
        let (producer, driver) = producer(&broker, ProducerConfig::default()).await;
        let mut sent = Vec::new();
        for i in 0..120 {
            let key = format!("key-{i}");
            let f = producer
                .send(ProducerRecord::new("keyed", format!("v{i}")).with_key(key.clone()))
                .await
                .expect("send");
            sent.push((key, f));
        }
        let mut used = std::collections::BTreeSet::new();
        for (key, f) in sent {
            let d = f.await.expect("delivery");
            assert_eq!(
                d.partition,
                partition_for_key(key.as_bytes(), partitions),
                "key {key}"
            );
            used.insert(d.partition);
        }
        assert!(used.len() > 1, "keys spread over partitions");
        drop(producer);
        driver.await;

        // Read back every partition: each record sits where murmur2 says.
        let mut consumer = broker.consumer().await;
        consumer.assign((0..partitions).map(|p| TopicPartition::new("keyed", p)));
        let records = poll_until(&mut consumer, 120).await;
        for r in &records {
            let key = r.key.as_deref().expect("key");
            assert_eq!(r.partition, partition_for_key(key, partitions));
        }
    });
}

#[test]
fn seeking_into_the_middle_of_a_batch_returns_exactly_that_offset_first() {
    let broker = Broker::start();
    smol::block_on(async {
        broker.create_topic("seek", 1).await;
        let config = ProducerConfig {
            batch: BatchConfig {
                max_records: 1_000,
                max_bytes: 1 << 20,
                linger: Duration::from_secs(60),
            },
            ..ProducerConfig::default()
        };
        let (producer, driver) = producer(&broker, config).await;
        let mut futures = Vec::new();
        for i in 0..10 {
            futures.push(
                producer
                    .send(ProducerRecord::new("seek", format!("r{i}")).with_timestamp_ms(1_000 + i))
                    .await
                    .expect("send"),
            );
        }
        // One flush, one batch of 10 records at offsets 0..10.
        producer.flush().await.expect("flush");
        let deliveries = deliver_all(futures).await;
        assert_eq!(deliveries[9].offset, Some(Offset(9)));
        drop(producer);
        driver.await;

        let tp = TopicPartition::new("seek", 0);
        let mut consumer = broker.consumer().await;
        consumer.assign([tp.clone()]);
        for target in [4i64, 0, 9] {
            consumer
                .seek(&tp, SeekTo::Offset(Offset(target)))
                .expect("seek");
            let records = poll_until(&mut consumer, 1).await;
            assert_eq!(records[0].offset, Offset(target), "first record after seek");
            assert_eq!(
                records[0].value.as_deref(),
                Some(format!("r{target}").as_bytes())
            );
            let offsets: Vec<i64> = records.iter().map(|r| r.offset.0).collect();
            assert_eq!(offsets, (target..10).collect::<Vec<_>>());
            assert_eq!(consumer.position(&tp).await.expect("position"), Offset(10));
        }
        // By timestamp: the first record at or after 1_006 is offset 6.
        consumer.seek(&tp, SeekTo::Timestamp(1_006)).expect("seek");
        assert_eq!(consumer.position(&tp).await.expect("position"), Offset(6));
        let records = poll_until(&mut consumer, 1).await;
        assert_eq!(records[0].offset, Offset(6));
        assert_eq!(records[0].timestamp_ms, 1_006);
        consumer.seek(&tp, SeekTo::Latest).expect("seek");
        assert_eq!(consumer.position(&tp).await.expect("position"), Offset(10));
        consumer.seek(&tp, SeekTo::Earliest).expect("seek");
        assert_eq!(consumer.position(&tp).await.expect("position"), Offset(0));
    });
}

#[test]
fn every_compression_codec_round_trips() {
    let broker = Broker::start();
    smol::block_on(async {
        for (name, codec) in [
            ("none", Compression::None),
            ("gzip", Compression::Gzip),
            ("snappy", Compression::Snappy),
            ("lz4", Compression::Lz4),
            ("zstd", Compression::Zstd),
        ] {
            let topic = format!("codec-{name}");
            broker.create_topic(&topic, 1).await;
            let config = ProducerConfig {
                compression: codec,
                ..ProducerConfig::default()
            };
            let (producer, driver) = producer(&broker, config).await;
            let mut futures = Vec::new();
            for i in 0..50 {
                futures.push(
                    producer
                        .send(
                            ProducerRecord::new(
                                topic.clone(),
                                format!("{name} value {i} ").repeat(20),
                            )
                            .with_key(format!("k{i}"))
                            .with_header("codec", name),
                        )
                        .await
                        .expect("send"),
                );
            }
            deliver_all(futures).await;
            drop(producer);
            driver.await;
            let mut consumer = broker.consumer().await;
            consumer.assign([TopicPartition::new(topic.clone(), 0)]);
            // Start in the middle to exercise slicing of a compressed batch too.
            consumer
                .seek(
                    &TopicPartition::new(topic.clone(), 0),
                    SeekTo::Offset(Offset(3)),
                )
                .expect("seek");
            let records = poll_until(&mut consumer, 47).await;
            for (j, r) in records.iter().enumerate() {
                let i = j + 3;
                assert_eq!(r.offset, Offset(i as i64), "{name}");
                assert_eq!(
                    r.value.as_deref(),
                    Some(format!("{name} value {i} ").repeat(20).as_bytes()),
                    "{name}"
                );
                assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
                assert_eq!(r.headers.len(), 1);
                assert_eq!(r.headers[0].key, "codec");
                assert_eq!(r.headers[0].value.as_deref(), Some(name.as_bytes()));
            }
        }
    });
}

#[test]
fn acks_zero_and_one_deliver() {
    let broker = Broker::start();
    smol::block_on(async {
        broker.create_topic("acks", 1).await;
        for (acks, expect_offsets) in [(Acks::None, false), (Acks::Leader, true)] {
            let config = ProducerConfig {
                acks,
                ..ProducerConfig::default()
            };
            let (producer, driver) = producer(&broker, config).await;
            let mut futures = Vec::new();
            for i in 0..20 {
                futures.push(
                    producer
                        .send(ProducerRecord::new("acks", format!("{acks:?}-{i}")))
                        .await
                        .expect("send"),
                );
            }
            producer.flush().await.expect("flush");
            for d in deliver_all(futures).await {
                assert_eq!(d.offset.is_some(), expect_offsets, "{acks:?}");
            }
            drop(producer);
            driver.await;
        }
        let mut consumer = broker.consumer().await;
        consumer.assign([TopicPartition::new("acks", 0)]);
        let records = poll_until(&mut consumer, 40).await;
        let values: Vec<String> = records
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
            .collect();
        assert_eq!(values[0], "None-0");
        assert_eq!(values[20], "Leader-0");
    });
}

#[test]
fn a_long_poll_returns_as_soon_as_a_record_arrives() {
    let broker = Broker::start();
    smol::block_on(async {
        broker.create_topic("longpoll", 1).await;
        let tp = TopicPartition::new("longpoll", 0);
        let config = minikafka_client::ConsumerConfig {
            max_wait: Duration::from_secs(30),
            ..minikafka_client::ConsumerConfig::default()
        };
        let mut consumer = minikafka_client::Consumer::connect(broker.stream().await, config)
            .await
            .expect("consumer");
        consumer.assign([tp.clone()]);
        consumer.seek(&tp, SeekTo::Latest).expect("seek");
        assert_eq!(consumer.position(&tp).await.expect("position"), Offset(0));
        let (producer, driver) = producer(&broker, ProducerConfig::default()).await;
        let send = async {
            smol::Timer::after(Duration::from_millis(300)).await;
            producer
                .send(ProducerRecord::new("longpoll", "wake up"))
                .await
                .expect("send")
                .await
                .expect("delivery")
        };
        let started = Instant::now();
        let (records, delivery) = futures::join!(consumer.poll(), send);
        let waited = started.elapsed();
        let records = records.expect("poll");
        assert_eq!(delivery.offset, Some(Offset(0)));
        assert_eq!(records.len(), 1, "the parked fetch returns the new record");
        assert_eq!(records[0].value.as_deref(), Some(&b"wake up"[..]));
        // Woken at the append (300 ms in), not at max_wait (30 s): the bound sits far from
        // both, so a loaded machine cannot make one look like the other.
        assert!(
            waited < Duration::from_secs(15),
            "long-poll answered after {waited:?}, not at the append"
        );
        drop(producer);
        driver.await;
    });
}

#[test]
fn admin_creates_lists_describes_and_deletes_topics() {
    let broker = Broker::start();
    smol::block_on(async {
        let mut admin = broker.admin().await;
        admin
            .create_topic("adm", 3, &[("retention.ms".into(), "3600000".into())])
            .await
            .expect("create");
        let err = admin.create_topic("adm", 3, &[]).await.expect_err("exists");
        assert_eq!(err.kafka_code(), Some(36), "TOPIC_ALREADY_EXISTS: {err}");
        let names: Vec<String> = admin
            .list_topics()
            .await
            .expect("list")
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(names.contains(&"adm".to_string()), "{names:?}");
        let d = admin.describe_topic("adm").await.expect("describe");
        assert_eq!(d.metadata.partition_count(), 3);
        let retention = d
            .configs
            .iter()
            .find(|c| c.name == "retention.ms")
            .expect("retention.ms listed");
        assert_eq!(retention.value.as_deref(), Some("3600000"));
        assert!(!retention.is_default);

        let earliest = admin
            .list_offsets("adm", OffsetSpec::Earliest)
            .await
            .expect("earliest");
        let latest = admin
            .list_offsets("adm", OffsetSpec::Latest)
            .await
            .expect("latest");
        assert_eq!(earliest.len(), 3);
        assert!(earliest.iter().all(|p| p.offset == Some(Offset(0))));
        assert!(latest.iter().all(|p| p.offset == Some(Offset(0))));

        admin.delete_topic("adm").await.expect("delete");
        let err = admin.describe_topic("adm").await.expect_err("deleted");
        assert!(matches!(err, Error::UnknownTopicOrPartition(_)), "{err}");
        let err = admin
            .delete_topic("adm")
            .await
            .expect_err("already deleted");
        assert_eq!(err.kafka_code(), Some(3), "{err}");
    });
}

#[test]
fn producing_to_a_missing_partition_fails_that_record_only() {
    let broker = Broker::start();
    smol::block_on(async {
        broker.create_topic("small", 2).await;
        let (producer, driver) = producer(&broker, ProducerConfig::default()).await;
        let bad = producer
            .send(ProducerRecord::new("small", "x").with_partition(5))
            .await
            .expect("queued");
        let missing = producer
            .send(ProducerRecord::new("no-such-topic", "x"))
            .await
            .expect("queued");
        let good = producer
            .send(ProducerRecord::new("small", "y").with_partition(1))
            .await
            .expect("queued");
        assert!(matches!(bad.await, Err(Error::UnknownTopicOrPartition(_))));
        assert!(missing.await.is_err());
        assert_eq!(good.await.expect("good").partition, 1);
        drop(producer);
        driver.await;
    });
}

/// An idempotent, non-transactional producer (`enable_idempotence`, I163): its batches carry
/// a producer id and per-partition sequences the broker accepts in order, with several
/// requests in flight per partition; DescribeProducers names one producer per partition whose
/// last sequence is the partition's record count less one. Idempotence needs acks=all.
#[test]
fn an_idempotent_producer_numbers_its_batches_per_partition() {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let broker = Broker::start();
    let (partitions, per_partition) = (3, 400);
    smol::block_on(async {
        broker.create_topic("idem", partitions).await;
        let refused = Producer::connect(
            broker.stream().await,
            ProducerConfig {
                enable_idempotence: true,
                acks: Acks::Leader,
                ..ProducerConfig::default()
            },
            SmolRuntime,
        )
        .await;
        assert!(matches!(refused, Err(Error::InvalidArgument(_))));
        let config = ProducerConfig {
            enable_idempotence: true,
            connection: ConnectionConfig {
                max_in_flight: 5,
                ..ConnectionConfig::default()
            },
            max_in_flight_per_partition: 3,
            batch: BatchConfig {
                max_records: 7,
                max_bytes: 1 << 20,
                linger: Duration::from_millis(1),
            },
            ..ProducerConfig::default()
        };
        let (producer, driver) = producer(&broker, config).await;
        let mut futures = Vec::new();
        for i in 0..per_partition {
            for p in 0..partitions {
                let record = ProducerRecord::new("idem", format!("v{i}")).with_partition(p);
                futures.push(producer.send(record).await.expect("send"));
            }
        }
        let deliveries = deliver_all(futures).await;
        assert_eq!(deliveries.len(), (partitions * per_partition) as usize);
        drop(producer);
        driver.await;
        let mut conn = minikafka_client::Connection::connect(
            broker.stream().await,
            ConnectionConfig::default(),
        )
        .await
        .expect("connect");
        let request = DescribeProducersRequest::default()
            .with_topics(vec![TopicRequest::default()
                .with_name(TopicName(StrBytes::from_static_str("idem")))
                .with_partition_indexes((0..partitions).collect())]);
        let response = conn.request(&request).await.expect("DescribeProducers");
        let answers = &response.topics[0].partitions;
        assert_eq!(answers.len(), partitions as usize);
        let mut ids = Vec::new();
        for a in answers {
            assert_eq!(a.error_code, 0, "partition {}", a.partition_index);
            assert_eq!(
                a.active_producers.len(),
                1,
                "partition {}",
                a.partition_index
            );
            let s = &a.active_producers[0];
            assert!(s.producer_id.0 >= 0);
            assert_eq!(
                s.last_sequence,
                per_partition - 1,
                "partition {}",
                a.partition_index
            );
            ids.push(s.producer_id.0);
        }
        ids.dedup();
        assert_eq!(ids.len(), 1, "one producer id for every partition: {ids:?}");
    });
}
