//! The producer: batching, partitioning, pipelined Produce requests, per-record delivery.
//!
//! Contract:
//! - Inputs: [`ProducerRecord`]s through a cloneable [`Producer`] handle; a negotiated
//!   connection; a [`Runtime`] for the linger timer.
//! - Outputs: one [`DeliveryFuture`] per record, resolving to its partition and offset (no
//!   offset with acks=0) or to the error that failed its batch.
//! - Batching: records gather per partition in an [`Accumulator`] (sans-IO: time enters as
//!   `now`); a batch is sealed when it holds `max_records`, when the next record would take it
//!   past `max_bytes` (a lone record bigger than that still goes, alone), or `linger` after its
//!   first record; `flush` and shutdown seal everything.
//! - Partitioning: an explicit partition wins; keyed records go to
//!   `toPositive(murmur2(key)) % partitions` like the Java client; keyless ones stick to a
//!   partition until its batch is sealed.
//! - Ordering: sealed batches queue FIFO; each partition's batches go out in seal order, at
//!   most one per request, up to `max_in_flight` requests at once on one connection and at
//!   most `max_in_flight_per_partition` of them holding the same partition. With the default
//!   of 1 per partition, order needs nothing from the broker (other partitions still pipeline);
//!   above 1 it relies on Kafka's promise that a connection's requests are processed in order.
//!   This producer never retries, so nothing else can reorder a partition's records. (acks=0
//!   has no responses to wait for and always relies on that promise.)
//! - The work happens in a [`ProducerDriver`] future that the caller spawns; it reads
//!   `Instant::now()` and sleeps through the [`Runtime`]. It ends once every handle is dropped
//!   and everything queued is answered, or at the first connection error (which fails every
//!   pending record).
//! - Never: retries (a failed batch fails its records), or spawns tasks itself.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::Stream;
use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{BatchBuilder, Compression, NewRecord};
use minikafka_core::types::Offset;

use crate::admin;
use crate::compression;
use crate::connection::{Connection, ConnectionConfig, InFlight};
use crate::error::{Error, Result};
use crate::partitioner::Partitioner;
use crate::runtime::Runtime;

/// How many acknowledgements the broker must have before answering a Produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    /// No response at all; deliveries carry no offset.
    None,
    /// The leader wrote it.
    Leader,
    /// All in-sync replicas wrote it (on one node: per the broker's flush policy).
    All,
}

impl Acks {
    /// The `acks` field on the wire.
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// Parses `0`, `1`, `all` or `-1`.
    pub fn parse(text: &str) -> Result<Acks> {
        match text {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(Error::InvalidArgument(format!(
                "acks must be 0, 1 or all, not {other:?}"
            ))),
        }
    }
}

/// When a partition's open batch is sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchConfig {
    /// Most records in one batch.
    pub max_records: usize,
    /// Target size of one batch, uncompressed (Kafka's `batch.size`).
    pub max_bytes: usize,
    /// How long a batch waits for more records after its first (Kafka's `linger.ms`).
    pub linger: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            max_records: 10_000,
            max_bytes: 16 * 1024,
            linger: Duration::from_millis(5),
        }
    }
}

/// Producer settings.
#[derive(Clone, Debug)]
pub struct ProducerConfig {
    /// Connection settings; `max_in_flight` bounds the pipelined Produce requests.
    pub connection: ConnectionConfig,
    /// Acknowledgements required.
    pub acks: Acks,
    /// Most Produce requests in flight holding a batch of one partition. With 1 (the default)
    /// the client alone keeps each partition's batches in order; more relies on the broker
    /// processing a connection's requests in order, as the Kafka protocol promises.
    pub max_in_flight_per_partition: usize,
    /// Codec for every batch.
    pub compression: Compression,
    /// Batch sealing rules.
    pub batch: BatchConfig,
    /// How long the broker may wait for acknowledgements.
    pub request_timeout_ms: i32,
    /// Most batch bytes gathered into one Produce request (the first batch always goes).
    pub max_request_bytes: usize,
    /// Records queued between the handles and the driver before `send` waits.
    pub queue_capacity: usize,
    /// Let Metadata auto-create unknown topics (if the broker allows it).
    pub allow_auto_topic_creation: bool,
    /// Seed for the keyless (sticky) partition choice.
    pub partitioner_seed: u64,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            connection: ConnectionConfig::default(),
            acks: Acks::All,
            max_in_flight_per_partition: 1,
            compression: Compression::None,
            batch: BatchConfig::default(),
            request_timeout_ms: 30_000,
            max_request_bytes: 1024 * 1024,
            queue_capacity: 10_000,
            allow_auto_topic_creation: false,
            partitioner_seed: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed),
        }
    }
}

/// A record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerRecord {
    /// Topic.
    pub topic: String,
    /// Explicit partition, or `None` to let the partitioner choose.
    pub partition: Option<i32>,
    /// Key (`None` = null key).
    pub key: Option<Vec<u8>>,
    /// Value (`None` = null value, a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers: key and nullable value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Create time in ms since the epoch; `None` = now.
    pub timestamp_ms: Option<i64>,
}

impl ProducerRecord {
    /// A record of `topic` with `value`, no key.
    pub fn new(topic: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..ProducerRecord::default()
        }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets an explicit partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((key.into(), Some(value.into())));
        self
    }

    /// Sets the create time.
    pub fn with_timestamp_ms(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }
}

/// Where a record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The partition it was appended to.
    pub partition: i32,
    /// Its offset (`None` with acks=0: the broker does not answer).
    pub offset: Option<Offset>,
}

/// Resolves when a record's batch is answered.
#[derive(Debug)]
pub struct DeliveryFuture(oneshot::Receiver<Result<Delivery>>);

impl Future for DeliveryFuture {
    type Output = Result<Delivery>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Delivery>> {
        match Pin::new(&mut self.0).poll(cx) {
            Poll::Ready(Ok(result)) => Poll::Ready(result),
            Poll::Ready(Err(_)) => Poll::Ready(Err(Error::ProducerClosed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A batch the [`Accumulator`] sealed.
#[derive(Debug)]
pub struct SealedBatch<T> {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The records, ready to build.
    pub builder: BatchBuilder,
    /// One waiter per record, in record order.
    pub waiters: Vec<T>,
    /// Seal order: increases by one per sealed batch, starting at 1.
    pub seq: u64,
}

#[derive(Debug)]
struct OpenBatch<T> {
    builder: BatchBuilder,
    waiters: Vec<T>,
    deadline: Instant,
}

/// Per-partition open batches and the rules that seal them. Sans-IO: time enters as `now`.
#[derive(Debug)]
pub struct Accumulator<T> {
    config: BatchConfig,
    open: BTreeMap<(String, i32), OpenBatch<T>>,
    last_seq: u64,
}

/// A record's encoded size is at most this much more than its key, value and headers.
const RECORD_OVERHEAD_BYTES: usize = 21;
/// A header's encoded size is at most this much more than its key and value.
const HEADER_OVERHEAD_BYTES: usize = 10;

/// An upper bound on the bytes `record` adds to a batch.
fn record_estimate_bytes(record: &NewRecord<'_>) -> usize {
    RECORD_OVERHEAD_BYTES
        + record.key.map_or(0, <[u8]>::len)
        + record.value.map_or(0, <[u8]>::len)
        + record
            .headers
            .iter()
            .map(|(k, v)| HEADER_OVERHEAD_BYTES + k.len() + v.map_or(0, <[u8]>::len))
            .sum::<usize>()
}

impl<T> Accumulator<T> {
    /// An empty accumulator sealing per `config`.
    pub fn new(config: BatchConfig) -> Self {
        Accumulator {
            config,
            open: BTreeMap::new(),
            last_seq: 0,
        }
    }

    /// True when no batch is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The `seq` of the most recently sealed batch (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The earliest linger deadline among open batches.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.open.values().map(|b| b.deadline).min()
    }

    fn seal(&mut self, key: (String, i32)) -> Option<SealedBatch<T>> {
        let batch = self.open.remove(&key)?;
        self.last_seq += 1;
        Some(SealedBatch {
            topic: key.0,
            partition: key.1,
            builder: batch.builder,
            waiters: batch.waiters,
            seq: self.last_seq,
        })
    }

    /// Adds `record` to the open batch of `topic`/`partition`, returning the batches this
    /// sealed, oldest first: the open one if the record would take it past `max_bytes`, and
    /// the record's own if it is then full by count or bytes.
    pub fn push(
        &mut self,
        topic: &str,
        partition: i32,
        record: &NewRecord<'_>,
        waiter: T,
        now: Instant,
    ) -> Vec<SealedBatch<T>> {
        let mut sealed = Vec::new();
        let key = (topic.to_string(), partition);
        let estimate = record_estimate_bytes(record);
        if let Some(open) = self.open.get(&key) {
            if open.builder.encoded_bytes() + estimate > self.config.max_bytes {
                sealed.extend(self.seal(key.clone()));
            }
        }
        let linger = self.config.linger;
        let open = self.open.entry(key.clone()).or_insert_with(|| OpenBatch {
            builder: BatchBuilder::new(),
            waiters: Vec::new(),
            deadline: now + linger,
        });
        open.builder.push(record);
        open.waiters.push(waiter);
        if open.builder.len() >= self.config.max_records
            || open.builder.encoded_bytes() >= self.config.max_bytes
        {
            sealed.extend(self.seal(key));
        }
        sealed
    }

    /// Seals every batch whose linger deadline is at or before `now`.
    pub fn seal_expired(&mut self, now: Instant) -> Vec<SealedBatch<T>> {
        let due: Vec<(String, i32)> = self
            .open
            .iter()
            .filter(|(_, b)| b.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        due.into_iter().filter_map(|k| self.seal(k)).collect()
    }

    /// Seals every open batch.
    pub fn seal_all(&mut self) -> Vec<SealedBatch<T>> {
        let keys: Vec<(String, i32)> = self.open.keys().cloned().collect();
        keys.into_iter().filter_map(|k| self.seal(k)).collect()
    }
}

type Reply = oneshot::Sender<Result<Delivery>>;

enum Command {
    Record(ProducerRecord, Reply),
    Flush(oneshot::Sender<Result<()>>),
}

/// A cloneable handle that queues records for the [`ProducerDriver`].
#[derive(Clone, Debug)]
pub struct Producer {
    tx: async_channel::Sender<Command>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Record(r, _) => write!(f, "Record({}/{:?})", r.topic, r.partition),
            Command::Flush(_) => write!(f, "Flush"),
        }
    }
}

impl Producer {
    /// Negotiates versions over `stream` and returns the handle and the driver to spawn.
    pub async fn connect<S, R>(
        stream: S,
        config: ProducerConfig,
        runtime: R,
    ) -> Result<(Producer, ProducerDriver<S, R>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: Runtime,
    {
        let conn = Connection::connect(stream, config.connection.clone()).await?;
        Producer::new(conn, config, runtime)
    }

    /// Builds the handle and driver over a negotiated connection.
    pub fn new<S, R>(
        conn: Connection<S>,
        config: ProducerConfig,
        runtime: R,
    ) -> Result<(Producer, ProducerDriver<S, R>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: Runtime,
    {
        if config.batch.max_records == 0
            || config.queue_capacity == 0
            || config.max_in_flight_per_partition == 0
        {
            return Err(Error::InvalidArgument(
                "max_records, queue_capacity and max_in_flight_per_partition must be at least 1"
                    .into(),
            ));
        }
        let (tx, rx) = async_channel::bounded(config.queue_capacity);
        let driver = ProducerDriver {
            conn,
            runtime,
            rx: Box::pin(rx),
            rx_closed: false,
            partitioner: Partitioner::new(config.partitioner_seed),
            partition_counts: HashMap::new(),
            acc: Accumulator::new(config.batch),
            ready: VecDeque::new(),
            in_flight: VecDeque::new(),
            partition_in_flight: HashMap::new(),
            flushes: Vec::new(),
            timer: None,
            config,
        };
        Ok((Producer { tx }, driver))
    }

    /// Queues `record` (waiting if the queue is full) and returns its delivery future.
    pub async fn send(&self, record: ProducerRecord) -> Result<DeliveryFuture> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Record(record, reply))
            .await
            .map_err(|_| Error::ProducerClosed)?;
        Ok(DeliveryFuture(rx))
    }

    /// Seals every open batch and waits until every record queued before this call is answered.
    pub async fn flush(&self) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Flush(reply))
            .await
            .map_err(|_| Error::ProducerClosed)?;
        rx.await.map_err(|_| Error::ProducerClosed)?
    }
}

/// A sealed batch, encoded and waiting for a request.
struct ReadyBatch {
    topic: String,
    partition: i32,
    bytes: Bytes,
    waiters: Vec<Reply>,
    seq: u64,
}

struct SentRequest {
    ticket: InFlight<ProduceRequest>,
    batches: Vec<ReadyBatch>,
}

enum Event {
    Command(Option<Command>),
    Response(Result<ProduceResponse>),
    Timer,
}

/// The producer's work loop: spawn [`ProducerDriver::run`] on your executor.
pub struct ProducerDriver<S, R: Runtime> {
    conn: Connection<S>,
    runtime: R,
    config: ProducerConfig,
    rx: Pin<Box<async_channel::Receiver<Command>>>,
    rx_closed: bool,
    partitioner: Partitioner,
    partition_counts: HashMap<String, i32>,
    acc: Accumulator<Reply>,
    ready: VecDeque<ReadyBatch>,
    in_flight: VecDeque<SentRequest>,
    partition_in_flight: HashMap<(String, i32), usize>,
    flushes: Vec<(u64, oneshot::Sender<Result<()>>)>,
    timer: Option<(Instant, Pin<Box<R::Sleep>>)>,
}

impl<S, R: Runtime> std::fmt::Debug for ProducerDriver<S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProducerDriver")
            .field("ready", &self.ready.len())
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Errors after which the connection cannot be trusted.
fn is_fatal(err: &Error) -> bool {
    matches!(
        err,
        Error::Io(_) | Error::ConnectionClosed | Error::Protocol(_) | Error::FrameTooLarge { .. }
    )
}

impl<S: AsyncRead + AsyncWrite + Unpin, R: Runtime> ProducerDriver<S, R> {
    /// Runs until every [`Producer`] handle is dropped and all queued records are answered,
    /// or until the connection fails (every pending record then gets the error).
    pub async fn run(mut self) {
        if let Err(err) = self.run_inner().await {
            tracing::debug!(%err, "producer driver stopping");
            self.fail_all(err);
        }
    }

    async fn run_inner(&mut self) -> Result<()> {
        loop {
            while !self.rx_closed {
                match self.rx.try_recv() {
                    Ok(cmd) => self.handle(cmd).await?,
                    Err(async_channel::TryRecvError::Empty) => break,
                    Err(async_channel::TryRecvError::Closed) => self.rx_closed = true,
                }
            }
            let sealed = if self.rx_closed {
                self.acc.seal_all()
            } else {
                self.acc.seal_expired(Instant::now())
            };
            self.enqueue(sealed);
            self.dispatch().await?;
            self.resolve_flushes();
            if self.rx_closed
                && self.acc.is_empty()
                && self.ready.is_empty()
                && self.in_flight.is_empty()
            {
                return Ok(());
            }
            match self.acc.next_deadline() {
                Some(deadline) => {
                    if self.timer.as_ref().map(|(d, _)| *d) != Some(deadline) {
                        let wait = deadline.saturating_duration_since(Instant::now());
                        self.timer = Some((deadline, Box::pin(self.runtime.sleep(wait))));
                    }
                }
                None => self.timer = None,
            }
            match poll_fn(|cx| self.poll_event(cx)).await {
                Event::Command(Some(cmd)) => self.handle(cmd).await?,
                Event::Command(None) => self.rx_closed = true,
                Event::Response(result) => {
                    let sent = self
                        .in_flight
                        .pop_front()
                        .ok_or_else(|| Error::Protocol("response without request".into()))?;
                    for b in &sent.batches {
                        let key = (b.topic.clone(), b.partition);
                        if let Some(n) = self.partition_in_flight.get_mut(&key) {
                            *n -= 1;
                            if *n == 0 {
                                self.partition_in_flight.remove(&key);
                            }
                        }
                    }
                    complete(result?, sent.batches);
                }
                Event::Timer => self.timer = None,
            }
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if let Some(front) = self.in_flight.front() {
            if let Poll::Ready(result) = self.conn.poll_receive(cx, &front.ticket) {
                return Poll::Ready(Event::Response(result));
            }
        }
        if !self.rx_closed {
            if let Poll::Ready(cmd) = self.rx.as_mut().poll_next(cx) {
                return Poll::Ready(Event::Command(cmd));
            }
        }
        if let Some((_, sleep)) = &mut self.timer {
            if sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Timer);
            }
        }
        Poll::Pending
    }

    async fn partition_count(&mut self, topic: &str) -> Result<i32> {
        if let Some(&n) = self.partition_counts.get(topic) {
            return Ok(n);
        }
        let meta =
            admin::topic_metadata(&mut self.conn, topic, self.config.allow_auto_topic_creation)
                .await?;
        let n = meta.partition_count();
        self.partition_counts.insert(topic.to_string(), n);
        Ok(n)
    }

    async fn handle(&mut self, cmd: Command) -> Result<()> {
        match cmd {
            Command::Record(record, reply) => {
                let count = match self.partition_count(&record.topic).await {
                    Ok(n) => n,
                    Err(err) if is_fatal(&err) => {
                        let _ = reply.send(Err(err.clone()));
                        return Err(err);
                    }
                    Err(err) => {
                        let _ = reply.send(Err(err));
                        return Ok(());
                    }
                };
                let partition = match record.partition {
                    Some(p) if (0..count).contains(&p) => p,
                    Some(p) => {
                        let _ = reply.send(Err(Error::UnknownTopicOrPartition(format!(
                            "{}-{p} (the topic has {count} partitions)",
                            record.topic
                        ))));
                        return Ok(());
                    }
                    None => self
                        .partitioner
                        .partition(&record.topic, record.key.as_deref(), count),
                };
                let new = NewRecord {
                    key: record.key.as_deref(),
                    value: record.value.as_deref(),
                    headers: record
                        .headers
                        .iter()
                        .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                        .collect(),
                    timestamp_ms: record.timestamp_ms.unwrap_or_else(now_ms),
                };
                let sealed = self
                    .acc
                    .push(&record.topic, partition, &new, reply, Instant::now());
                self.enqueue(sealed);
            }
            Command::Flush(reply) => {
                let sealed = self.acc.seal_all();
                self.enqueue(sealed);
                self.flushes.push((self.acc.last_seq(), reply));
            }
        }
        Ok(())
    }

    /// Encodes (and compresses) sealed batches onto the ready queue.
    fn enqueue(&mut self, sealed: Vec<SealedBatch<Reply>>) {
        for batch in sealed {
            let count = self
                .partition_counts
                .get(&batch.topic)
                .copied()
                .unwrap_or(1);
            self.partitioner
                .on_batch_sealed(&batch.topic, batch.partition, count);
            let codec = self.config.compression;
            let encoded = if codec == Compression::None {
                Ok(batch.builder.build(Offset(0)))
            } else {
                compression::compress(codec, batch.builder.records_bytes())
                    .map(|records| batch.builder.build_with(Offset(0), codec, &records))
            };
            match encoded {
                Ok(bytes) => self.ready.push_back(ReadyBatch {
                    topic: batch.topic,
                    partition: batch.partition,
                    bytes: Bytes::from(bytes),
                    waiters: batch.waiters,
                    seq: batch.seq,
                }),
                Err(err) => {
                    for w in batch.waiters {
                        let _ = w.send(Err(err.clone()));
                    }
                }
            }
        }
    }

    /// Sends ready batches while the in-flight limits allow. A request holds at most one batch
    /// per partition; a partition at its in-flight limit is skipped along with every later batch
    /// of it, so each partition's batches still go out in seal order.
    async fn dispatch(&mut self) -> Result<()> {
        let acks = self.config.acks;
        let per_partition = self.config.max_in_flight_per_partition;
        while acks == Acks::None || self.in_flight.len() < self.config.connection.max_in_flight {
            let mut batches: Vec<ReadyBatch> = Vec::new();
            let mut blocked: Vec<(String, i32)> = Vec::new();
            let mut request_bytes = 0;
            let mut i = 0;
            while i < self.ready.len() {
                let b = &self.ready[i];
                let key = (b.topic.clone(), b.partition);
                let at_limit = acks != Acks::None
                    && self.partition_in_flight.get(&key).copied().unwrap_or(0) >= per_partition;
                let taken = batches
                    .iter()
                    .any(|t| t.topic == b.topic && t.partition == b.partition);
                if at_limit || taken || blocked.contains(&key) {
                    blocked.push(key);
                    i += 1;
                    continue;
                }
                if !batches.is_empty()
                    && request_bytes + b.bytes.len() > self.config.max_request_bytes
                {
                    break;
                }
                request_bytes += b.bytes.len();
                if let Some(b) = self.ready.remove(i) {
                    batches.push(b);
                }
            }
            if batches.is_empty() {
                break;
            }
            if acks != Acks::None {
                for b in &batches {
                    *self
                        .partition_in_flight
                        .entry((b.topic.clone(), b.partition))
                        .or_insert(0) += 1;
                }
            }
            let mut topics: Vec<TopicProduceData> = Vec::new();
            for b in &batches {
                let data = PartitionProduceData::default()
                    .with_index(b.partition)
                    .with_records(Some(b.bytes.clone()));
                match topics.iter_mut().find(|t| t.name.0.as_str() == b.topic) {
                    Some(t) => t.partition_data.push(data),
                    None => topics.push(
                        TopicProduceData::default()
                            .with_name(TopicName(StrBytes::from_string(b.topic.clone())))
                            .with_partition_data(vec![data]),
                    ),
                }
            }
            let request = ProduceRequest::default()
                .with_acks(acks.wire())
                .with_timeout_ms(self.config.request_timeout_ms)
                .with_topic_data(topics);
            if acks == Acks::None {
                if let Err(err) = self.conn.send_without_response(&request).await {
                    fail_batches(batches, &err);
                    return Err(err);
                }
                for b in batches {
                    for w in b.waiters {
                        let _ = w.send(Ok(Delivery {
                            partition: b.partition,
                            offset: None,
                        }));
                    }
                }
            } else {
                match self.conn.send(&request).await {
                    Ok(ticket) => self.in_flight.push_back(SentRequest { ticket, batches }),
                    Err(err) => {
                        fail_batches(batches, &err);
                        return Err(err);
                    }
                }
            }
        }
        Ok(())
    }

    /// Answers each flush whose batches are all answered.
    fn resolve_flushes(&mut self) {
        let oldest = self
            .in_flight
            .iter()
            .flat_map(|r| r.batches.iter())
            .chain(self.ready.iter())
            .map(|b| b.seq)
            .min()
            .unwrap_or(u64::MAX);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(target, _)| *target < oldest);
        self.flushes = waiting;
        for (_, reply) in done {
            let _ = reply.send(Ok(()));
        }
    }

    fn fail_all(&mut self, err: Error) {
        for batch in self.acc.seal_all() {
            for w in batch.waiters {
                let _ = w.send(Err(err.clone()));
            }
        }
        fail_batches(self.ready.drain(..).collect(), &err);
        for sent in self.in_flight.drain(..) {
            fail_batches(sent.batches, &err);
        }
        for (_, reply) in self.flushes.drain(..) {
            let _ = reply.send(Err(err.clone()));
        }
        self.rx.close();
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Record(_, reply) => {
                    let _ = reply.send(Err(err.clone()));
                }
                Command::Flush(reply) => {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }
}

fn fail_batches(batches: Vec<ReadyBatch>, err: &Error) {
    for b in batches {
        for w in b.waiters {
            let _ = w.send(Err(err.clone()));
        }
    }
}

/// Answers each batch's records from the Produce response.
fn complete(response: ProduceResponse, batches: Vec<ReadyBatch>) {
    for b in batches {
        let answer = response
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == b.topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == b.partition);
        let result = match answer {
            None => Err(Error::Protocol(format!(
                "Produce response has no answer for {}-{}",
                b.topic, b.partition
            ))),
            Some(p) => {
                let message = p.error_message.as_ref().map(|m| m.to_string());
                Error::check(p.error_code, || match message {
                    Some(m) => format!("produce to {}-{}: {m}", b.topic, b.partition),
                    None => format!("produce to {}-{}", b.topic, b.partition),
                })
                .map(|()| p.base_offset)
            }
        };
        match result {
            Ok(base) => {
                for (i, w) in b.waiters.into_iter().enumerate() {
                    let _ = w.send(Ok(Delivery {
                        partition: b.partition,
                        offset: Some(Offset(base + i as i64)),
                    }));
                }
            }
            Err(err) => {
                for w in b.waiters {
                    let _ = w.send(Err(err.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::validate_batch;

    fn rec(value: &[u8]) -> NewRecord<'_> {
        NewRecord {
            key: None,
            value: Some(value),
            headers: Vec::new(),
            timestamp_ms: 1_000,
        }
    }

    fn config(max_records: usize, max_bytes: usize, linger_ms: u64) -> BatchConfig {
        BatchConfig {
            max_records,
            max_bytes,
            linger: Duration::from_millis(linger_ms),
        }
    }

    #[test]
    fn batches_seal_by_record_count() {
        let mut acc = Accumulator::new(config(3, 1 << 20, 1_000));
        let now = Instant::now();
        let mut sealed = Vec::new();
        for i in 0..7u32 {
            sealed.extend(acc.push("t", 0, &rec(&i.to_be_bytes()), i, now));
        }
        assert_eq!(sealed.len(), 2);
        assert_eq!(sealed[0].waiters, vec![0, 1, 2]);
        assert_eq!(sealed[1].waiters, vec![3, 4, 5]);
        assert_eq!((sealed[0].seq, sealed[1].seq), (1, 2));
        let rest = acc.seal_all();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].waiters, vec![6]);
        assert!(acc.is_empty());
        // Each sealed batch encodes to a valid batch with that many records.
        let header = validate_batch(&sealed[0].builder.build(Offset(0))).expect("valid");
        assert_eq!(header.records_count, 3);
    }

    #[test]
    fn batches_seal_by_bytes_without_exceeding_the_target() {
        let max_bytes = 400;
        let mut acc = Accumulator::new(config(10_000, max_bytes, 1_000));
        let now = Instant::now();
        let value = [7u8; 50];
        let mut sealed = Vec::new();
        for i in 0..40u32 {
            sealed.extend(acc.push("t", 0, &rec(&value), i, now));
        }
        sealed.extend(acc.seal_all());
        let total: usize = sealed.iter().map(|b| b.waiters.len()).sum();
        assert_eq!(total, 40, "every record is in exactly one batch");
        assert!(sealed.len() > 1);
        for b in &sealed {
            let bytes = b.builder.build(Offset(0)).len();
            assert!(
                bytes <= max_bytes,
                "batch of {bytes} bytes exceeds {max_bytes}"
            );
        }
        // Order is kept across batches.
        let order: Vec<u32> = sealed.iter().flat_map(|b| b.waiters.clone()).collect();
        assert_eq!(order, (0..40).collect::<Vec<_>>());
    }

    #[test]
    fn an_oversized_record_goes_alone() {
        let mut acc = Accumulator::new(config(10_000, 100, 1_000));
        let now = Instant::now();
        assert!(acc.push("t", 0, &rec(b"small"), 0, now).is_empty());
        let big = [1u8; 500];
        let sealed = acc.push("t", 0, &rec(&big), 1, now);
        assert_eq!(sealed.len(), 2, "the open batch, then the big record alone");
        assert_eq!(sealed[0].waiters, vec![0]);
        assert_eq!(sealed[1].waiters, vec![1]);
    }

    #[test]
    fn batches_seal_after_linger_per_partition() {
        let mut acc = Accumulator::new(config(10_000, 1 << 20, 10));
        let t0 = Instant::now();
        assert!(acc.push("t", 0, &rec(b"a"), 0, t0).is_empty());
        let t1 = t0 + Duration::from_millis(4);
        assert!(acc.push("t", 1, &rec(b"b"), 1, t1).is_empty());
        assert!(acc.push("t", 0, &rec(b"c"), 2, t1).is_empty());
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_millis(10)));
        assert!(acc.seal_expired(t0 + Duration::from_millis(9)).is_empty());
        let first = acc.seal_expired(t0 + Duration::from_millis(10));
        assert_eq!(first.len(), 1);
        assert_eq!(
            (first[0].partition, first[0].waiters.clone()),
            (0, vec![0, 2])
        );
        assert_eq!(acc.next_deadline(), Some(t1 + Duration::from_millis(10)));
        let second = acc.seal_expired(t1 + Duration::from_millis(10));
        assert_eq!(
            (second[0].partition, second[0].waiters.clone()),
            (1, vec![1])
        );
        assert_eq!(acc.next_deadline(), None);
        assert_eq!(acc.last_seq(), 2);
    }

    #[test]
    fn acks_parse() {
        assert_eq!(Acks::parse("all").expect("all").wire(), -1);
        assert_eq!(Acks::parse("1").expect("1").wire(), 1);
        assert_eq!(Acks::parse("0").expect("0").wire(), 0);
        assert!(Acks::parse("2").is_err());
    }
}
