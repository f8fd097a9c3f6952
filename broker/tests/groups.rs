//! Consumer groups against the real `minikafka` binary, driven by librdkafka (the `rdkafka`
//! crate) in subscribe mode: the classic group protocol, committed offsets in
//! `__consumer_offsets`, and their durability.
//!
//! Contract:
//! - Every test starts its own broker ([`common::Broker`]: free port, fresh data directory,
//!   `group.initial.rebalance.delay.ms=0` so the first rebalance does not wait 3 s) and runs
//!   inside [`common::bounded`]; every client wait has its own deadline.
//! - What is asserted is what Apache Kafka gives the same client: a group resumes from its
//!   committed offsets after a restart, a new group starts from `auto.offset.reset`, members
//!   of one group split the partitions between them (I22), and a commit acknowledged under
//!   `flush.policy=fsync` survives `kill -9` (I20), as does a group deletion.
//! - Run with both backends: `cargo test -p minikafka-broker --test groups` and the same with
//!   `--no-default-features --features portable` (the binary under test is built with them).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{bounded, Broker};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// Limit for one whole test body.
const TEST_LIMIT: Duration = Duration::from_secs(240);
/// Limit for one client round trip.
const CALL_LIMIT: Duration = Duration::from_secs(15);
/// Limit for a group to settle or a data set to arrive.
const DATA_LIMIT: Duration = Duration::from_secs(90);

fn start_broker(extra: &[(&str, &str)]) -> Broker {
    let mut builder = Broker::builder()
        .with("group.initial.rebalance.delay.ms", "0")
        .with("offsets.topic.num.partitions", "8")
        .with("num.shards", "2");
    for (key, value) in extra {
        builder = builder.with(key, value);
    }
    builder.start()
}

fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("create admin client")
}

fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(CALL_LIMIT))
        .operation_timeout(Some(CALL_LIMIT))
}

fn create_topic(broker: &Broker, name: &str, partitions: i32) {
    let admin = admin(broker);
    let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let results = futures::executor::block_on(admin.create_topics([&topic], &admin_options()))
        .expect("CreateTopics request");
    for result in results {
        if let Err((name, code)) = result {
            panic!("creating topic {name} failed: {code:?}");
        }
    }
}

/// Produces `values` round-robin over `partitions` partitions and waits for every ack.
fn produce(broker: &Broker, topic: &str, partitions: i32, values: &[String]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("create producer");
    for (i, value) in values.iter().enumerate() {
        let partition = i as i32 % partitions;
        let mut record = BaseRecord::<(), str>::to(topic)
            .payload(value.as_str())
            .partition(partition);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, returned)) => {
                    record = returned;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer
        .flush(DATA_LIMIT)
        .expect("every record acknowledged");
}

/// A subscribe-mode consumer in `group` (classic protocol), auto commit off.
fn group_consumer(broker: &Broker, group: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut settings = vec![
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "500"),
    ];
    settings.extend_from_slice(extra);
    consumer_with(broker, group, &settings)
}

/// A subscribe-mode consumer of the consumer group protocol (KIP-848: the broker assigns;
/// session and heartbeat settings are the broker's).
fn protocol_consumer(broker: &Broker, group: &str) -> BaseConsumer {
    consumer_with(broker, group, &[("group.protocol", "consumer")])
}

fn consumer_with(broker: &Broker, group: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("socket.timeout.ms", "10000")
        .set("reconnect.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "500");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("create consumer")
}

/// Polls until `count` records arrived; returns their payloads.
fn consume(consumer: &BaseConsumer, count: usize) -> Vec<String> {
    let deadline = Instant::now() + DATA_LIMIT;
    let mut out = Vec::new();
    let mut errors = Vec::new();
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "consumed {} of {count} records within {DATA_LIMIT:?}: {out:?}; errors {errors:?}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(msg)) => {
                out.push(String::from_utf8_lossy(msg.payload().unwrap_or_default()).into_owned())
            }
            Some(Err(err)) => errors.push(err.to_string()),
            None => {}
        }
    }
    out
}

/// Polls for `wait`, failing on any record.
fn assert_nothing_more(consumer: &BaseConsumer, wait: Duration) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(100)) {
            panic!(
                "unexpected record {:?} at {}@{}",
                msg.payload().map(String::from_utf8_lossy),
                msg.partition(),
                msg.offset()
            );
        }
    }
}

/// The committed offset of every partition of `topic` for the consumer's group.
fn committed(consumer: &BaseConsumer, topic: &str, partitions: i32) -> BTreeMap<i32, Offset> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, CALL_LIMIT)
        .expect("OffsetFetch");
    got.elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The seed's smoke test with librdkafka: a group consumes and commits; after a restart
/// (SIGTERM) and one more record it sees only the new one; a new group sees everything.
#[test]
fn a_group_resumes_from_its_commits_after_a_restart() {
    bounded(TEST_LIMIT, || {
        let mut broker = start_broker(&[]);
        create_topic(&broker, "resume", 3);
        produce(&broker, "resume", 3, &values("first", 30));
        {
            let consumer = group_consumer(&broker, "resumers", &[]);
            consumer.subscribe(&["resume"]).expect("subscribe");
            let got: BTreeSet<String> = consume(&consumer, 30).into_iter().collect();
            assert_eq!(got, values("first", 30).into_iter().collect());
            consumer
                .commit_consumer_state(CommitMode::Sync)
                .expect("commit");
            let offsets = committed(&consumer, "resume", 3);
            assert_eq!(
                offsets.values().copied().collect::<Vec<_>>(),
                vec![Offset::Offset(10); 3],
                "committed positions"
            );
            consumer.unsubscribe();
        }
        assert!(broker.stop().success(), "clean shutdown");
        broker.restart();
        produce(&broker, "resume", 3, &["after-restart".to_string()]);
        let consumer = group_consumer(&broker, "resumers", &[]);
        consumer.subscribe(&["resume"]).expect("subscribe");
        assert_eq!(consume(&consumer, 1), vec!["after-restart".to_string()]);
        assert_nothing_more(&consumer, Duration::from_secs(2));
        drop(consumer);
        let fresh = group_consumer(&broker, "newcomers", &[]);
        fresh.subscribe(&["resume"]).expect("subscribe");
        assert_eq!(
            consume(&fresh, 31).len(),
            31,
            "a new group reads everything"
        );
    });
}

/// Waits until both consumers hold an assignment whose union is every partition (polling
/// both, as a rebalance needs), and returns them.
fn settled_assignments(
    a: &BaseConsumer,
    b: &BaseConsumer,
    topic: &str,
    partitions: i32,
) -> (BTreeSet<i32>, BTreeSet<i32>) {
    let deadline = Instant::now() + DATA_LIMIT;
    loop {
        let _ = a.poll(Duration::from_millis(50));
        let _ = b.poll(Duration::from_millis(50));
        let owned = |c: &BaseConsumer| -> BTreeSet<i32> {
            c.assignment()
                .map(|tpl| {
                    tpl.elements()
                        .iter()
                        .filter(|e| e.topic() == topic)
                        .map(|e| e.partition())
                        .collect()
                })
                .unwrap_or_default()
        };
        let (pa, pb) = (owned(a), owned(b));
        let union: BTreeSet<i32> = pa.union(&pb).copied().collect();
        if !pa.is_empty() && !pb.is_empty() && union.len() == partitions as usize {
            return (pa, pb);
        }
        assert!(
            Instant::now() < deadline,
            "no settled assignment within {DATA_LIMIT:?}: {pa:?} / {pb:?}"
        );
    }
}

/// Two members of one group split the partitions: disjoint assignments covering the topic
/// (I22), and each record reaches exactly one of them; with librdkafka's eager `range`
/// assignor and with `cooperative-sticky` (incremental rebalancing).
fn two_consumers_split_the_partitions(strategy: &'static str) {
    bounded(TEST_LIMIT, move || {
        let broker = start_broker(&[]);
        create_topic(&broker, "split", 4);
        let settings = [("partition.assignment.strategy", strategy)];
        let a = group_consumer(&broker, "splitters", &settings);
        let b = group_consumer(&broker, "splitters", &settings);
        a.subscribe(&["split"]).expect("subscribe a");
        b.subscribe(&["split"]).expect("subscribe b");
        let (pa, pb) = settled_assignments(&a, &b, "split", 4);
        assert!(pa.is_disjoint(&pb), "{pa:?} and {pb:?} overlap");
        produce(&broker, "split", 4, &values("s", 40));
        let deadline = Instant::now() + DATA_LIMIT;
        let mut seen: BTreeMap<String, (usize, i32)> = BTreeMap::new();
        while seen.len() < 40 {
            assert!(
                Instant::now() < deadline,
                "only {} of 40 arrived",
                seen.len()
            );
            for (who, c) in [(0usize, &a), (1, &b)] {
                if let Some(Ok(msg)) = c.poll(Duration::from_millis(50)) {
                    let value = String::from_utf8_lossy(msg.payload().unwrap_or_default());
                    let previous = seen.insert(value.into_owned(), (who, msg.partition()));
                    assert!(previous.is_none(), "a record arrived twice");
                }
            }
        }
        for (who, partition) in seen.values() {
            let owner = if pa.contains(partition) { 0 } else { 1 };
            assert_eq!(*who, owner, "partition {partition} read by a non-owner");
        }
    });
}

#[test]
fn two_consumers_in_one_group_split_the_partitions_i22() {
    two_consumers_split_the_partitions("range");
}

#[test]
fn two_cooperative_sticky_consumers_split_the_partitions_i22() {
    two_consumers_split_the_partitions("cooperative-sticky");
}

/// With `flush.policy=fsync` a commit is acknowledged only once durable (I20): it survives
/// `kill -9`; a group deletion acknowledged before the crash stays deleted too.
#[test]
fn commits_and_group_deletions_survive_kill_9_with_fsync_i20() {
    bounded(TEST_LIMIT, || {
        let mut broker = start_broker(&[("flush.policy", "fsync")]);
        create_topic(&broker, "durable", 2);
        produce(&broker, "durable", 2, &values("d", 20));
        for group in ["keepers", "doomed"] {
            let consumer = group_consumer(&broker, group, &[]);
            consumer.subscribe(&["durable"]).expect("subscribe");
            consume(&consumer, 20);
            consumer
                .commit_consumer_state(CommitMode::Sync)
                .expect("commit");
            consumer.unsubscribe();
        }
        let admin = admin(&broker);
        let deleted =
            futures::executor::block_on(admin.delete_groups(&["doomed"], &admin_options()))
                .expect("DeleteGroups");
        assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
        broker.kill9();
        // The killed process's listener may linger briefly (io_uring tears down
        // asynchronously): wait, bounded, until the port refuses connections.
        let deadline = Instant::now() + CALL_LIMIT;
        while std::net::TcpStream::connect(broker.addr()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "the killed broker's port stays open"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        broker.restart();
        let keeper = group_consumer(&broker, "keepers", &[]);
        assert_eq!(
            committed(&keeper, "durable", 2)
                .values()
                .copied()
                .collect::<Vec<_>>(),
            vec![Offset::Offset(10); 2],
            "the acknowledged commit survived kill -9"
        );
        let doomed = group_consumer(&broker, "doomed", &[]);
        assert_eq!(
            committed(&doomed, "durable", 2)
                .values()
                .copied()
                .collect::<Vec<_>>(),
            vec![Offset::Invalid; 2],
            "the deleted group's offsets stayed deleted"
        );
        keeper.subscribe(&["durable"]).expect("subscribe");
        produce(&broker, "durable", 2, &["late".to_string()]);
        assert_eq!(consume(&keeper, 1), vec!["late".to_string()]);
    });
}

/// librdkafka with `group.protocol=consumer` (KIP-848): the broker's assignor splits the
/// partitions between two members without overlap (I22), commits go through the same
/// offsets log, and a restarted member resumes from them.
#[test]
fn consumer_protocol_members_split_partitions_and_resume_i22() {
    bounded(TEST_LIMIT, || {
        let mut broker = start_broker(&[]);
        create_topic(&broker, "kip848", 4);
        let a = protocol_consumer(&broker, "next-gen");
        let b = protocol_consumer(&broker, "next-gen");
        a.subscribe(&["kip848"]).expect("subscribe a");
        b.subscribe(&["kip848"]).expect("subscribe b");
        let (pa, pb) = settled_assignments(&a, &b, "kip848", 4);
        assert!(pa.is_disjoint(&pb), "{pa:?} and {pb:?} overlap");
        produce(&broker, "kip848", 4, &values("n", 40));
        let deadline = Instant::now() + DATA_LIMIT;
        let mut seen = BTreeSet::new();
        while seen.len() < 40 {
            assert!(
                Instant::now() < deadline,
                "only {} of 40 arrived",
                seen.len()
            );
            for c in [&a, &b] {
                if let Some(Ok(msg)) = c.poll(Duration::from_millis(50)) {
                    let value = String::from_utf8_lossy(msg.payload().unwrap_or_default());
                    assert!(seen.insert(value.into_owned()), "a record arrived twice");
                }
            }
        }
        for c in [&a, &b] {
            c.commit_consumer_state(CommitMode::Sync).expect("commit");
        }
        drop(a);
        drop(b);
        assert!(broker.stop().success(), "clean shutdown");
        broker.restart();
        produce(&broker, "kip848", 4, &["after-restart".to_string()]);
        let c = protocol_consumer(&broker, "next-gen");
        c.subscribe(&["kip848"]).expect("subscribe");
        assert_eq!(consume(&c, 1), vec!["after-restart".to_string()]);
        assert_nothing_more(&c, Duration::from_secs(2));
    });
}
