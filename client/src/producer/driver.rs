//! The producer's I/O driver: takes commands from the [`Producer`](super::Producer) handles,
//! asks the [`Accumulator`] which batches are sealed, encodes them, sends pipelined Produce
//! requests within the in-flight limits, and answers every record from the responses. It reads
//! the clock (`Instant::now()`, the wall clock for timestamps) and sleeps through the
//! [`Runtime`].

use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::Stream;
use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::record::{Compression, NewRecord};
use minikafka_core::types::Offset;

use super::{Accumulator, Acks, Command, Delivery, ProducerConfig, Reply, SealedBatch};
use crate::admin;
use crate::compression;
use crate::connection::{Connection, InFlight};
use crate::error::{Error, Result};
use crate::partitioner::Partitioner;
use crate::runtime::Runtime;

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
    /// A driver for the handles whose commands arrive on `rx`, over `conn`.
    pub(super) fn new(
        conn: Connection<S>,
        runtime: R,
        rx: async_channel::Receiver<Command>,
        config: ProducerConfig,
    ) -> Self {
        ProducerDriver {
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
        }
    }

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
