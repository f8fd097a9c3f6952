//! A failing disk under the whole broker, over real TCP: the broker's `server::run` on the
//! fault-injecting backend (`FaultyBackend` over the default backend), driven by librdkafka.
//!
//! EIO on sync under `flush.policy=fsync` (I8): the produce whose sync failed is never
//! acknowledged (KAFKA_STORAGE_ERROR), its partition stays offline for writes after the disk
//! heals (the failed sync may have dropped the data it covered), and the rest of the broker
//! serves: other partitions take produces, the offline one is still readable, Metadata and
//! OffsetCommit answer.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::librdkafka::{Ack, AckContext, CALL_LIMIT, TEST_LIMIT};
use minikafka_broker::config::BrokerConfig;
use minikafka_broker::server::{self, DefaultBackend};
use minikafka_testkit::fault::{FaultPlan, FaultyBackend};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// The broker running in this process on the fault backend; stopped (and joined) on drop.
struct InProcessBroker {
    addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InProcessBroker {
    fn start(plan: &FaultPlan, dir: &std::path::Path) -> InProcessBroker {
        let port = common::free_port();
        let overrides: Vec<(String, String)> = [
            ("listeners", format!("PLAINTEXT://127.0.0.1:{port}")),
            ("log.dirs", dir.display().to_string()),
            ("flush.policy", "fsync".to_string()),
            ("num.shards", "1".to_string()),
            ("offsets.topic.num.partitions", "1".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let config = BrokerConfig::from_sources(None, &overrides).expect("valid settings");
        let shutdown = Arc::new(AtomicBool::new(false));
        plan.use_for_next_run();
        let flag = Arc::clone(&shutdown);
        let thread = std::thread::spawn(move || {
            // The result is not asserted: a log offline at close reports its failure, which is
            // the point of the test, not a fault of the shutdown.
            let result = server::run::<FaultyBackend<DefaultBackend>>(config, flag);
            eprintln!("in-process broker stopped: {result:?}");
        });
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let deadline = Instant::now() + common::START_LIMIT;
        while TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
            assert!(Instant::now() < deadline, "in-process broker not listening");
            assert!(!thread.is_finished(), "in-process broker exited at start");
            std::thread::sleep(Duration::from_millis(20));
        }
        InProcessBroker {
            addr,
            shutdown,
            thread: Some(thread),
        }
    }

    fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn client_config(broker: &InProcessBroker) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        .set("socket.timeout.ms", "10000")
        .set("log_level", "2");
    config
}

/// An acks=all producer without retries, so each produce gets the broker's own answer.
fn producer(broker: &InProcessBroker) -> BaseProducer<AckContext> {
    client_config(broker)
        .set("acks", "all")
        .set("retries", "0")
        .set("linger.ms", "0")
        .set("message.timeout.ms", "15000")
        .create_with_context(AckContext::default())
        .expect("create producer")
}

/// Produces one record to partition 0 and waits for its delivery report.
fn produce_one(producer: &BaseProducer<AckContext>, id: usize, topic: &str) -> Ack {
    let value = format!("{topic}-{id}");
    producer
        .send(
            BaseRecord::<[u8], [u8], usize>::with_opaque_to(topic, id)
                .partition(0)
                .payload(value.as_bytes()),
        )
        .map_err(|(e, _)| e)
        .expect("enqueue");
    let deadline = Instant::now() + CALL_LIMIT;
    loop {
        producer.poll(Duration::from_millis(10));
        if let Some(ack) = producer.context().acks.lock().expect("acks lock").get(&id) {
            return ack.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no answer to produce {id} (hang)"
        );
    }
}

fn storage_error(ack: &Ack) -> bool {
    matches!(
        ack,
        Err(KafkaError::MessageProduction(
            RDKafkaErrorCode::KafkaStorageError
        ))
    )
}

#[test]
fn eio_on_sync_is_never_acknowledged_and_takes_only_its_partition_offline() {
    common::bounded(TEST_LIMIT, || {
        let dir = tempfile::tempdir().expect("temp dir");
        let plan = FaultPlan::new();
        let broker = InProcessBroker::start(&plan, dir.path());
        let admin: AdminClient<DefaultClientContext> =
            client_config(&broker).create().expect("admin client");
        let new = [
            NewTopic::new("failing", 1, TopicReplication::Fixed(1)),
            NewTopic::new("healthy", 1, TopicReplication::Fixed(1)),
        ];
        let options = AdminOptions::new().operation_timeout(Some(CALL_LIMIT));
        for result in
            futures::executor::block_on(admin.create_topics(&new, &options)).expect("CreateTopics")
        {
            result.expect("topic created");
        }
        let producer = producer(&broker);
        let mut id = 0;
        let mut next = |topic: &str| {
            id += 1;
            produce_one(&producer, id, topic)
        };
        let before = next("failing").expect("acknowledged before the fault");
        next("healthy").expect("acknowledged before the fault");

        // The disk fails every sync while one produce goes through: never acknowledged.
        plan.eio_on_sync(true);
        let during = next("failing");
        plan.heal();
        assert!(
            storage_error(&during),
            "produce over a failing sync: {during:?}"
        );

        // Healed disk: the partition stays offline for writes (I8)...
        let after = next("failing");
        assert!(
            storage_error(&after),
            "produce to the offline partition: {after:?}"
        );
        // ...and the rest of the broker serves.
        let healthy = next("healthy").expect("another partition takes produces");
        assert_eq!(healthy.1, 1);
        let metadata = producer
            .client()
            .fetch_metadata(None, CALL_LIMIT)
            .expect("Metadata answers");
        assert!(metadata.topics().iter().any(|t| t.name() == "failing"));

        let consumer: BaseConsumer = client_config(&broker)
            .set("group.id", "storage-faults")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset("failing", 0, Offset::Beginning)
            .expect("partition");
        consumer.assign(&assignment).expect("assign");
        let deadline = Instant::now() + CALL_LIMIT;
        let first = loop {
            assert!(Instant::now() < deadline, "offline partition not readable");
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(msg)) => break (msg.offset(), msg.payload().map(<[u8]>::to_vec)),
                Some(Err(e)) => panic!("fetch of the offline partition: {e}"),
                None => {}
            }
        };
        assert_eq!(first, (before.1, Some(b"failing-1".to_vec())));

        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("healthy", 0, Offset::Offset(2))
            .expect("partition");
        consumer
            .commit(&offsets, CommitMode::Sync)
            .expect("OffsetCommit answers with the offsets partition healthy");
        let mut query = TopicPartitionList::new();
        query.add_partition("healthy", 0);
        let committed = consumer
            .committed_offsets(query, CALL_LIMIT)
            .expect("OffsetFetch");
        let healthy_committed = committed
            .elements()
            .iter()
            .find(|e| e.topic() == "healthy")
            .map(|e| e.offset());
        assert_eq!(healthy_committed, Some(Offset::Offset(2)));
        assert!(
            plan.injected_count() > 0,
            "the fault plan injected nothing: the broker did not run on it"
        );
    });
}
