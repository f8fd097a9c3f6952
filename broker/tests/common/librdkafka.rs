//! librdkafka (the `rdkafka` crate) helpers for tests against the real broker: records to
//! produce, a producer that collects every delivery report, consumers assigned to partitions,
//! topic administration, and the time limits those waits use.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::Broker;

/// Limit for one whole test body.
pub const TEST_LIMIT: Duration = Duration::from_secs(180);
/// Limit for one client round trip (metadata, admin, watermarks).
pub const CALL_LIMIT: Duration = Duration::from_secs(15);
/// Limit for producing or consuming a test's whole data set.
pub const DATA_LIMIT: Duration = Duration::from_secs(90);

/// One record to produce.
#[derive(Clone, Debug, Default)]
pub struct Rec {
    pub topic: String,
    pub partition: Option<i32>,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp_ms: Option<i64>,
}

impl Rec {
    pub fn new(topic: &str, partition: Option<i32>, value: &[u8]) -> Rec {
        Rec {
            topic: topic.to_owned(),
            partition,
            value: Some(value.to_vec()),
            ..Rec::default()
        }
    }
}

/// Where a record landed, or why it did not.
pub type Ack = Result<(i32, i64), KafkaError>;

/// Producer context that files every delivery report under the id given at send time.
#[derive(Default)]
pub struct AckContext {
    /// Delivery reports so far, by the id given at send time.
    pub acks: Mutex<HashMap<usize, Ack>>,
}

impl ClientContext for AckContext {}

impl ProducerContext for AckContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, id: usize) {
        let ack = match result {
            Ok(msg) => Ok((msg.partition(), msg.offset())),
            Err((err, _)) => Err(err.clone()),
        };
        self.acks.lock().expect("acks lock").insert(id, ack);
    }
}

/// A `BaseProducer` whose delivery reports are collected by id.
pub struct TestProducer {
    /// The librdkafka producer, for what the helpers do not cover (flush, in-flight counts).
    pub inner: BaseProducer<AckContext>,
    next_id: usize,
}

impl TestProducer {
    pub fn new(broker: &Broker, extra: &[(&str, &str)]) -> TestProducer {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", broker.bootstrap())
            .set("acks", "all")
            .set("message.timeout.ms", "30000")
            .set("socket.timeout.ms", "10000")
            .set("reconnect.backoff.ms", "50")
            .set("reconnect.backoff.max.ms", "500");
        for (key, value) in extra {
            config.set(*key, *value);
        }
        let inner = config
            .create_with_context(AckContext::default())
            .expect("create producer");
        TestProducer { inner, next_id: 0 }
    }

    /// Enqueues one record (retrying while the local queue is full); returns its ack id.
    pub fn send(&mut self, rec: &Rec) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        let mut headers = OwnedHeaders::new();
        for (key, value) in &rec.headers {
            headers = headers.insert(Header {
                key: key.as_str(),
                value: value.as_deref(),
            });
        }
        let deadline = Instant::now() + DATA_LIMIT;
        loop {
            let mut record: BaseRecord<'_, [u8], [u8], usize> =
                BaseRecord::with_opaque_to(&rec.topic, id);
            if let Some(partition) = rec.partition {
                record = record.partition(partition);
            }
            if let Some(key) = rec.key.as_deref() {
                record = record.key(key);
            }
            if let Some(value) = rec.value.as_deref() {
                record = record.payload(value);
            }
            if !rec.headers.is_empty() {
                record = record.headers(headers.clone());
            }
            if let Some(ts) = rec.timestamp_ms {
                record = record.timestamp(ts);
            }
            match self.inner.send(record) {
                Ok(()) => return id,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                    if Instant::now() < deadline =>
                {
                    self.inner.poll(Duration::from_millis(10));
                }
                Err((err, _)) => panic!("enqueue of record {id} failed locally: {err}"),
            }
        }
    }

    /// Serves delivery callbacks for up to `wait`.
    pub fn poll(&self, wait: Duration) {
        self.inner.poll(wait);
    }

    /// Number of delivery reports received so far.
    pub fn acked(&self) -> usize {
        self.inner.context().acks.lock().expect("acks lock").len()
    }

    /// Waits (bounded) until every id below `next_id` has a delivery report; returns them all.
    pub fn wait_acks(&self) -> Vec<Ack> {
        let deadline = Instant::now() + DATA_LIMIT;
        while self.acked() < self.next_id {
            assert!(
                Instant::now() < deadline,
                "only {} of {} delivery reports within {DATA_LIMIT:?}",
                self.acked(),
                self.next_id
            );
            self.inner.poll(Duration::from_millis(20));
        }
        let acks = self.inner.context().acks.lock().expect("acks lock");
        (0..self.next_id)
            .map(|id| acks.get(&id).cloned().expect("ack present"))
            .collect()
    }

    /// Sends every record and waits for all delivery reports, in send order.
    pub fn produce_all(&mut self, recs: &[Rec]) -> Vec<Ack> {
        let first = self.next_id;
        for rec in recs {
            self.send(rec);
            self.inner.poll(Duration::ZERO);
        }
        self.wait_acks().split_off(first)
    }
}

/// Unwraps acks that must all have succeeded.
pub fn expect_all_ok(acks: &[Ack]) -> Vec<(i32, i64)> {
    acks.iter()
        .enumerate()
        .map(|(i, ack)| match ack {
            Ok(pos) => *pos,
            Err(err) => panic!("record {i} was not acknowledged: {err}"),
        })
        .collect()
}

pub fn consumer(broker: &Broker, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "minikafka-interop-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("socket.timeout.ms", "10000")
        .set("reconnect.backoff.ms", "50")
        .set("reconnect.backoff.max.ms", "500");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("create consumer")
}

pub fn admin(broker: &Broker) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("create admin client")
}

pub fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(CALL_LIMIT))
        .operation_timeout(Some(CALL_LIMIT))
}

/// Creates topics (name, partitions) and asserts each creation succeeded.
pub fn create_topics(broker: &Broker, topics: &[(&str, i32)]) {
    let admin = admin(broker);
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, partitions)| NewTopic::new(name, *partitions, TopicReplication::Fixed(1)))
        .collect();
    let results = futures::executor::block_on(admin.create_topics(&new, &admin_options()))
        .expect("CreateTopics request");
    for result in results {
        if let Err((name, code)) = result {
            panic!("creating topic {name} failed: {code:?}");
        }
    }
}

/// Consumes `partition` of `topic` from `from` until `count` records arrived (bounded).
pub fn read_partition(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
    from: Offset,
    count: usize,
) -> Vec<OwnedMessage> {
    read_partitions(consumer, topic, &[(partition, from)], count)
}

/// Consumes the given partitions from the given offsets until `count` records arrived in all.
pub fn read_partitions(
    consumer: &BaseConsumer,
    topic: &str,
    starts: &[(i32, Offset)],
    count: usize,
) -> Vec<OwnedMessage> {
    let mut tpl = TopicPartitionList::new();
    for (partition, offset) in starts {
        tpl.add_partition_offset(topic, *partition, *offset)
            .expect("add partition to assignment");
    }
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + DATA_LIMIT;
    let mut out = Vec::with_capacity(count);
    let mut errors = Vec::new();
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "consumed {} of {count} records from {topic} within {DATA_LIMIT:?}; errors: {errors:?}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(msg)) => out.push(msg.detach()),
            Some(Err(err)) => errors.push(err.to_string()),
            None => {}
        }
    }
    out
}

/// Asserts that nothing more arrives for a short while (no duplicates, no extra records).
pub fn assert_no_more(consumer: &BaseConsumer, wait: Duration) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(Ok(msg)) = consumer.poll(Duration::from_millis(50)) {
            panic!(
                "unexpected extra record at {}:{}@{}",
                msg.topic(),
                msg.partition(),
                msg.offset()
            );
        }
    }
}

pub fn header_list(msg: &OwnedMessage) -> Vec<(String, Option<Vec<u8>>)> {
    match msg.headers() {
        None => Vec::new(),
        Some(headers) => headers
            .iter()
            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
            .collect(),
    }
}

pub fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("millis fit i64")
}
