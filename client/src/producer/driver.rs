//! The producer's I/O driver: takes commands from the [`Producer`](super::Producer) handles,
//! asks the [`Accumulator`] which batches are sealed, encodes them, sends pipelined Produce
//! requests within the in-flight limits, and answers every record from the responses. It reads
//! the clock (`Instant::now()`, the wall clock for timestamps) and sleeps through the
//! [`Runtime`]. A transactional producer's calls run here too, in channel order with the
//! records (bookkeeping in `txn`, requests in `txn_io`).
//!
//! Connections (module `links`, I162): on one node everything goes over the connection the
//! producer was built on. A routed producer (built with a [`Connector`](super::Connector))
//! sends each Produce to the partition's leader, as the last Metadata answer named it, one
//! request per broker connection, and the transactional requests to the coordinators. A batch
//! answered NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE goes back on the ready queue in its
//! sequence order (same producer id, epoch and sequence: the broker that did not write it
//! cannot have a copy) and the leaders are asked again after `txn_retry_backoff`; it fails
//! after retrying for `max_block`. The retry keeps a partition's order with
//! `max_in_flight_per_partition` 1 (the default). With more, a later batch can reach the new
//! leader before the retried one: a transactional producer's is refused there
//! (OUT_OF_ORDER_SEQUENCE) and fails the transaction; an idempotent one's is refused the same
//! way and fails its records (I163); a plain producer's is written first.
//!
//! A routed idempotent or transactional producer whose connection fails re-sends the batches
//! of every request that connection carried the same way (I182): each request remembers the
//! generation of the connection it went over, so it is found lost even after a new connection
//! to that broker opened.

use std::collections::{BTreeSet, HashMap, VecDeque};
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
use kafka_protocol::ResponseError;
use minikafka_core::record::{compute_crc, Compression, NewRecord, CRC_START};
use minikafka_core::types::Offset;

use super::idempotence::Idempotence;
use super::links::{Link, Links};
use super::txn::TxnManager;
use super::txn_io::{self, Retry};
use super::{Accumulator, Acks, Command, Delivery, ProducerConfig, Reply, SealedBatch, TxnOp};
use crate::admin;
use crate::compression;
use crate::connection::InFlight;
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
    /// Set at its first retry (routed producers): when retrying stops.
    retry_until: Option<Instant>,
}

struct SentRequest {
    link: Link,
    /// The generation of `link`'s connection it went over (I182).
    generation: u64,
    ticket: InFlight<ProduceRequest>,
    batches: Vec<ReadyBatch>,
}

enum Event {
    Command(Option<Command>),
    Response(usize, Result<ProduceResponse>),
    Timer,
}

/// The producer's work loop: spawn [`ProducerDriver::run`] on your executor.
pub struct ProducerDriver<S, R: Runtime> {
    links: Links<S>,
    /// A batch met a moved leader: ask Metadata again (after a backoff) before the next send.
    metadata_stale: bool,
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
    /// Transactional state, when `transactional_id` is set.
    txn: Option<TxnManager>,
    /// Producer id and sequences of an idempotent, non-transactional producer.
    idempotence: Option<Idempotence>,
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
        links: Links<S>,
        runtime: R,
        rx: async_channel::Receiver<Command>,
        config: ProducerConfig,
    ) -> Self {
        ProducerDriver {
            links,
            metadata_stale: false,
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
            txn: config.transactional_id.clone().map(TxnManager::new),
            idempotence: (config.enable_idempotence && config.transactional_id.is_none())
                .then(Idempotence::new),
            config,
        }
    }

    /// Runs until every [`Producer`](super::Producer) handle is dropped and all queued records are answered,
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
                Event::Response(index, result) => self.on_response(index, result)?,
                Event::Timer => self.timer = None,
            }
        }
    }

    /// Answers the records of in-flight request `index` from its response; on a routed
    /// producer, batches whose leader moved go back on the ready queue.
    fn on_response(&mut self, index: usize, result: Result<ProduceResponse>) -> Result<()> {
        let sent = self
            .in_flight
            .remove(index)
            .ok_or_else(|| Error::Protocol("response without request".into()))?;
        self.release(&sent.batches);
        let result = match result {
            Err(err) if self.resends_lost() && err.is_connection_lost() => {
                return self.resend_lost(sent.link, sent.generation, sent.batches, err);
            }
            result => result,
        };
        let txn = &mut self.txn;
        let idempotence = &mut self.idempotence;
        let routed = self.links.routed();
        let max_block = self.config.max_block;
        let now = Instant::now();
        let again = complete(
            result?,
            sent.batches,
            |b, code| {
                if !routed || !is_leader_moved(code) {
                    return false;
                }
                *b.retry_until.get_or_insert(now + max_block) > now
            },
            |err| {
                if let Some(i) = idempotence.as_mut() {
                    i.on_batch_failed();
                }
                match txn {
                    Some(m) => m.on_batch_failed(err),
                    None => err,
                }
            },
        );
        if !again.is_empty() {
            tracing::debug!(batches = again.len(), "leader moved; asking Metadata again");
            self.links.forget_leaders();
            self.metadata_stale = true;
            self.requeue(again);
        }
        Ok(())
    }

    /// Puts batches back on the ready queue in sequence order: each before every later batch
    /// of its partition.
    fn requeue(&mut self, batches: Vec<ReadyBatch>) {
        for b in batches {
            let at = self
                .ready
                .iter()
                .position(|r| r.seq > b.seq)
                .unwrap_or(self.ready.len());
            self.ready.insert(at, b);
        }
    }

    /// `batches` are no longer in flight.
    fn release(&mut self, batches: &[ReadyBatch]) {
        for b in batches {
            let key = (b.topic.clone(), b.partition);
            if let Some(n) = self.partition_in_flight.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.partition_in_flight.remove(&key);
                }
            }
        }
    }

    /// A routed idempotent or transactional producer re-sends what a lost connection carried
    /// (I182), as Kafka's clients do: the same producer id, epoch and sequences, so the broker
    /// writes once a batch it had already written (and answers its first offsets). Leaders
    /// are asked again after the backoff first.
    fn resends_lost(&self) -> bool {
        self.links.routed() && (self.txn.is_some() || self.idempotence.is_some())
    }

    /// The `batches` of a request sent over `link`'s connection at `generation` were lost
    /// with it (`err`): they and those of every other request that went over that connection
    /// go back on the ready queue, and the connection is forgotten (a new one opens at the
    /// next send). Once a batch has been retried for `max_block`, `err` ends the driver as
    /// before.
    fn resend_lost(
        &mut self,
        link: Link,
        generation: u64,
        mut batches: Vec<ReadyBatch>,
        err: Error,
    ) -> Result<()> {
        let mut i = 0;
        while i < self.in_flight.len() {
            if self.in_flight[i].link == link && self.in_flight[i].generation == generation {
                if let Some(other) = self.in_flight.remove(i) {
                    self.release(&other.batches);
                    batches.extend(other.batches);
                }
            } else {
                i += 1;
            }
        }
        let now = Instant::now();
        let max_block = self.config.max_block;
        let expired = batches
            .iter_mut()
            .any(|b| *b.retry_until.get_or_insert(now + max_block) <= now);
        if expired {
            fail_batches(batches, &err);
            return Err(err);
        }
        tracing::debug!(%err, batches = batches.len(), "connection lost; re-sending its batches");
        self.links.lose(link, generation);
        self.links.forget_leaders();
        self.metadata_stale = true;
        self.requeue(batches);
        Ok(())
    }

    /// Polls the first in-flight request of each connection (a connection answers in order).
    fn poll_in_flight(&mut self, cx: &mut Context<'_>) -> Poll<(usize, Result<ProduceResponse>)> {
        if !self.links.routed() {
            // One connection: only its oldest request can be answered next.
            let Some(front) = self.in_flight.front() else {
                return Poll::Pending;
            };
            return self
                .links
                .bootstrap()
                .poll_receive(cx, &front.ticket)
                .map(|result| (0, result));
        }
        let mut polled: Vec<Link> = Vec::new();
        for (i, sent) in self.in_flight.iter().enumerate() {
            if polled.contains(&sent.link) {
                continue;
            }
            polled.push(sent.link);
            if self.links.generation(sent.link) != Some(sent.generation) {
                // Its connection was lost (and maybe replaced) while it waited (I182).
                return Poll::Ready((i, Err(Error::ConnectionClosed)));
            }
            let conn = match self.links.conn(sent.link) {
                Ok(conn) => conn,
                Err(err) => return Poll::Ready((i, Err(err))),
            };
            if let Poll::Ready(result) = conn.poll_receive(cx, &sent.ticket) {
                return Poll::Ready((i, result));
            }
        }
        Poll::Pending
    }

    /// Waits for the next answer of any connection and handles it.
    async fn next_response(&mut self) -> Result<()> {
        let (index, result) = poll_fn(|cx| self.poll_in_flight(cx)).await;
        self.on_response(index, result)
    }

    /// Waits for every in-flight request's response.
    async fn drain_in_flight(&mut self) -> Result<()> {
        while !self.in_flight.is_empty() {
            self.next_response().await?;
        }
        Ok(())
    }

    /// Seals, sends and waits for every record queued so far.
    async fn flush_all(&mut self) -> Result<()> {
        let sealed = self.acc.seal_all();
        self.enqueue(sealed);
        loop {
            self.dispatch().await?;
            if self.in_flight.is_empty() {
                if self.ready.is_empty() {
                    return Ok(());
                }
                // Nothing in flight yet nothing sent: the ready batches were failed instead.
                continue;
            }
            self.next_response().await?;
        }
    }

    /// Carries out a transactional call. `Err` only for errors that end the driver (the
    /// connection failed); the call's own answer is the inner result.
    async fn handle_txn(&mut self, op: TxnOp) -> Result<Result<()>> {
        let Some(mut m) = self.txn.take() else {
            return Ok(Err(Error::IllegalState(
                "transactional calls need transactional_id in the producer config".into(),
            )));
        };
        let result = self.run_txn_op(&mut m, op).await;
        self.txn = Some(m);
        match result {
            Err(err) if is_fatal(&err) => Err(err),
            Err(err) => Ok(Err(err)),
            Ok(answer) => Ok(answer),
        }
    }

    async fn run_txn_op(&mut self, m: &mut TxnManager, op: TxnOp) -> Result<Result<()>> {
        match op {
            TxnOp::Init => {
                if let Err(e) = m.check_init() {
                    return Ok(Err(e));
                }
                let retry = Retry::new(&self.runtime, &self.config);
                retry
                    .find_coordinator(&mut self.links, m.transactional_id(), 1)
                    .await?;
                match txn_io::init_producer_id(&mut self.links, &retry, m, false).await {
                    Ok((pid, epoch)) => m.on_initialized(pid, epoch),
                    Err(err) if is_fatal(&err) => return Err(err),
                    Err(err) => return Ok(Err(m.on_error(err))),
                }
                Ok(Ok(()))
            }
            TxnOp::Begin => Ok(m.begin()),
            TxnOp::SendOffsets(offsets, group) => {
                if let Err(e) = m.check_in_transaction() {
                    return Ok(Err(e));
                }
                let retry = Retry::new(&self.runtime, &self.config);
                match txn_io::send_offsets(&mut self.links, &retry, m, &offsets, &group).await {
                    Ok(()) => Ok(Ok(())),
                    Err(err) if is_fatal(&err) => Err(err),
                    Err(err) => Ok(Err(m.on_error(err))),
                }
            }
            TxnOp::Commit => {
                if let Err(e) = m.check_commit() {
                    return Ok(Err(e));
                }
                self.txn = Some(std::mem::replace(m, TxnManager::new(String::new())));
                let flushed = self.flush_all().await;
                if let Some(back) = self.txn.take() {
                    *m = back;
                }
                flushed?;
                // A record that failed leaves the transaction abortable: no commit.
                if let Err(e) = m.check_commit() {
                    return Ok(Err(e));
                }
                let retry = Retry::new(&self.runtime, &self.config);
                if m.has_started() {
                    match txn_io::end_txn(&mut self.links, &retry, m, true).await {
                        Ok(()) => {}
                        Err(err) if is_fatal(&err) => return Err(err),
                        Err(err) => return Ok(Err(m.on_error(err))),
                    }
                }
                m.on_completed();
                Ok(Ok(()))
            }
            TxnOp::Abort => {
                if let Err(e) = m.check_abort() {
                    return Ok(Err(e));
                }
                let dropped = Error::Transaction {
                    fatal: false,
                    cause: Box::new(Error::IllegalState(
                        "the transaction was aborted before this record was sent".into(),
                    )),
                };
                for batch in self.acc.seal_all() {
                    for w in batch.waiters {
                        let _ = w.send(Err(dropped.clone()));
                    }
                }
                fail_batches(self.ready.drain(..).collect(), &dropped);
                self.txn = Some(std::mem::replace(m, TxnManager::new(String::new())));
                let drained = self.drain_in_flight().await;
                if let Some(back) = self.txn.take() {
                    *m = back;
                }
                drained?;
                // Batches that met a moved leader while draining went back on the queue.
                fail_batches(self.ready.drain(..).collect(), &dropped);
                if let Err(e) = m.check_abort() {
                    return Ok(Err(e));
                }
                let retry = Retry::new(&self.runtime, &self.config);
                if m.has_started() {
                    match txn_io::end_txn(&mut self.links, &retry, m, false).await {
                        Ok(()) => {}
                        Err(err) if is_fatal(&err) => return Err(err),
                        Err(err) => return Ok(Err(m.on_error(err))),
                    }
                }
                m.on_completed();
                if m.needs_epoch_bump() {
                    // A failed batch may have left the broker's sequences ahead of ours (KIP-360).
                    match txn_io::init_producer_id(&mut self.links, &retry, m, true).await {
                        Ok((pid, epoch)) => m.on_initialized(pid, epoch),
                        Err(err) if is_fatal(&err) => return Err(err),
                        Err(err) => return Ok(Err(m.on_error(err))),
                    }
                }
                Ok(Ok(()))
            }
        }
    }

    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Event> {
        if let Poll::Ready((index, result)) = self.poll_in_flight(cx) {
            return Poll::Ready(Event::Response(index, result));
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
        let auto = self.config.allow_auto_topic_creation;
        let n = if self.links.routed() {
            // Routed: the same answer says the leaders.
            self.links.refresh_metadata(&[topic], auto).await?[0]
        } else {
            admin::topic_metadata(self.links.bootstrap(), topic, auto)
                .await?
                .partition_count()
        };
        self.partition_counts.insert(topic.to_string(), n);
        Ok(n)
    }

    /// An idempotent producer gets a producer id before its first record and after a batch
    /// failed (module `idempotence`).
    async fn ensure_producer_id(&mut self) -> Result<()> {
        if !self.idempotence.as_ref().is_some_and(Idempotence::needs_id) {
            return Ok(());
        }
        let retry = Retry::new(&self.runtime, &self.config);
        let (pid, epoch) = txn_io::init_idempotent(&mut self.links, &retry).await?;
        if let Some(m) = self.idempotence.as_mut() {
            m.on_initialized(pid, epoch);
        }
        Ok(())
    }

    async fn handle(&mut self, cmd: Command) -> Result<()> {
        match cmd {
            Command::Record(record, reply) => {
                if let Some(Err(e)) = self.txn.as_ref().map(TxnManager::check_in_transaction) {
                    let _ = reply.send(Err(e));
                    return Ok(());
                }
                if let Err(err) = self.ensure_producer_id().await {
                    let _ = reply.send(Err(err.clone()));
                    if is_fatal(&err) {
                        return Err(err);
                    }
                    return Ok(());
                }
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
            Command::Txn(op, reply) => {
                let answer = self.handle_txn(op).await;
                match answer {
                    Ok(answer) => {
                        let _ = reply.send(answer);
                    }
                    Err(err) => {
                        let _ = reply.send(Err(err.clone()));
                        return Err(err);
                    }
                }
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
            let mut batch = batch;
            if let Some(m) = self.txn.as_mut() {
                let (pid, epoch) = m.producer();
                batch.builder.producer_id = pid;
                batch.builder.producer_epoch = epoch;
                batch.builder.base_sequence =
                    m.take_sequence(&batch.topic, batch.partition, batch.builder.len() as i32);
            } else if let Some(m) = self.idempotence.as_mut() {
                // Same id, epoch and sequence on a re-send: the broker writes it once (I163).
                let (pid, epoch) = m.producer();
                batch.builder.producer_id = pid;
                batch.builder.producer_epoch = epoch;
                batch.builder.base_sequence =
                    m.take_sequence(&batch.topic, batch.partition, batch.builder.len() as i32);
            }
            let transactional = self.txn.is_some();
            let codec = self.config.compression;
            let encoded = if codec == Compression::None {
                Ok(batch.builder.build(Offset(0)))
            } else {
                compression::compress(codec, batch.builder.records_bytes())
                    .map(|records| batch.builder.build_with(Offset(0), codec, &records))
            };
            let encoded = encoded.map(|mut bytes| {
                if transactional {
                    mark_transactional(&mut bytes);
                }
                bytes
            });
            match encoded {
                Ok(bytes) => self.ready.push_back(ReadyBatch {
                    topic: batch.topic,
                    partition: batch.partition,
                    bytes: Bytes::from(bytes),
                    waiters: batch.waiters,
                    seq: batch.seq,
                    retry_until: None,
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
        loop {
            self.dispatch_once().await?;
            // A send met a lost connection (I182): route and send its batches again now, as
            // nothing else would wake the loop for them.
            if !self.metadata_stale || self.ready.is_empty() {
                return Ok(());
            }
        }
    }

    async fn dispatch_once(&mut self) -> Result<()> {
        let acks = self.config.acks;
        let per_partition = self.config.max_in_flight_per_partition;
        if self.links.routed() && !self.ready.is_empty() {
            self.route_ready().await?;
        }
        while acks == Acks::None || self.in_flight.len() < self.config.connection.max_in_flight {
            let mut batches: Vec<ReadyBatch> = Vec::new();
            let mut blocked: Vec<(String, i32)> = Vec::new();
            let mut request_bytes = 0;
            // One request goes to one broker: the leader of its first batch (I162).
            let mut link: Option<Link> = None;
            let mut i = 0;
            while i < self.ready.len() {
                let b = &self.ready[i];
                let key = (b.topic.clone(), b.partition);
                let leader = self.links.leader_now(&b.topic, b.partition);
                if leader.is_none() || (link.is_some() && leader != link) {
                    // Leaderless (route_ready failed it or asks again) or another broker's.
                    blocked.push(key);
                    i += 1;
                    continue;
                }
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
                link = leader;
                if let Some(b) = self.ready.remove(i) {
                    batches.push(b);
                }
            }
            let Some(link) = link.filter(|_| !batches.is_empty()) else {
                break;
            };
            if let Some(m) = self.txn.as_mut() {
                if let Err(e) = m.check_in_transaction() {
                    // The transaction failed: nothing more of it goes out.
                    fail_batches(batches, &e);
                    fail_batches(self.ready.drain(..).collect(), &e);
                    break;
                }
                let mut new: Vec<(String, i32)> = Vec::new();
                for b in &batches {
                    let key = (b.topic.clone(), b.partition);
                    if !m.has_partition(&b.topic, b.partition) && !new.contains(&key) {
                        new.push(key);
                    }
                }
                if !new.is_empty() {
                    let retry = Retry::new(&self.runtime, &self.config);
                    match txn_io::add_partitions(&mut self.links, &retry, m, &new).await {
                        Ok(()) => m.on_partitions_added(new),
                        Err(err) if is_fatal(&err) => {
                            fail_batches(batches, &err);
                            return Err(err);
                        }
                        Err(err) => {
                            let err = m.on_error(err);
                            fail_batches(batches, &err);
                            fail_batches(self.ready.drain(..).collect(), &err);
                            break;
                        }
                    }
                }
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
            let transactional_id = self.txn.as_ref().map(|m| {
                kafka_protocol::messages::TransactionalId(StrBytes::from_string(
                    m.transactional_id().to_string(),
                ))
            });
            let request = ProduceRequest::default()
                .with_transactional_id(transactional_id)
                .with_acks(acks.wire())
                .with_timeout_ms(self.config.request_timeout_ms)
                .with_topic_data(topics);
            if acks == Acks::None {
                if let Err(err) = self.links.conn(link)?.send_without_response(&request).await {
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
                let generation = self.links.generation(link).unwrap_or_default();
                match self.links.conn(link)?.send(&request).await {
                    Ok(ticket) => self.in_flight.push_back(SentRequest {
                        link,
                        generation,
                        ticket,
                        batches,
                    }),
                    Err(err) if self.resends_lost() && err.is_connection_lost() => {
                        self.release(&batches);
                        return self.resend_lost(link, generation, batches, err);
                    }
                    Err(err) => {
                        fail_batches(batches, &err);
                        return Err(err);
                    }
                }
            }
        }
        Ok(())
    }

    /// Routed producers: makes sure every ready batch's leader is known and connected, asking
    /// Metadata again (after `txn_retry_backoff` when a leader just moved) until it is, for at
    /// most `max_block`; the batches of a partition still without a leader then fail.
    async fn route_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.config.max_block;
        let resends = self.resends_lost();
        loop {
            let mut missing = self.metadata_stale;
            if !missing {
                for b in &self.ready {
                    if !has_leader(&mut self.links, &b.topic, b.partition, resends).await? {
                        missing = true;
                        break;
                    }
                }
            }
            if !missing {
                return Ok(());
            }
            if self.metadata_stale {
                self.runtime.sleep(self.config.txn_retry_backoff).await;
                self.metadata_stale = false;
            }
            let topics: BTreeSet<&str> = self.ready.iter().map(|b| b.topic.as_str()).collect();
            let topics: Vec<&str> = topics.into_iter().collect();
            match self.links.refresh_metadata(&topics, false).await {
                Ok(_) => {}
                Err(err) if is_fatal(&err) && !(resends && err.is_connection_lost()) => {
                    return Err(err)
                }
                Err(err) => tracing::debug!(%err, "metadata refresh failed; retrying"),
            }
            let mut leaderless = false;
            for b in &self.ready {
                if !has_leader(&mut self.links, &b.topic, b.partition, resends).await? {
                    leaderless = true;
                }
            }
            if !leaderless {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let err = Error::Kafka {
                    error: ResponseError::LeaderNotAvailable,
                    code: ResponseError::LeaderNotAvailable.code(),
                    context: format!(
                        "no leader after {:?} of Metadata retries",
                        self.config.max_block
                    ),
                };
                let (failed, kept): (Vec<ReadyBatch>, Vec<ReadyBatch>) = self
                    .ready
                    .drain(..)
                    .partition(|b| self.links.leader_now(&b.topic, b.partition).is_none());
                self.ready = kept.into();
                if let (Some(i), false) = (self.idempotence.as_mut(), failed.is_empty()) {
                    i.on_batch_failed();
                }
                let err = match self.txn.as_mut() {
                    Some(m) => m.on_batch_failed(err),
                    None => err,
                };
                fail_batches(failed, &err);
                return Ok(());
            }
            self.metadata_stale = true;
        }
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
                Command::Flush(reply) | Command::Txn(_, reply) => {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }
}

/// True when `topic`/`partition`'s leader is known and connected. For a producer that
/// `resends` what a lost connection carried, a leader that cannot be reached yet counts as no
/// leader (Metadata is asked again until `max_block`, I182); otherwise that error ends the driver.
async fn has_leader<S: AsyncRead + AsyncWrite + Unpin>(
    links: &mut Links<S>,
    topic: &str,
    partition: i32,
    resends: bool,
) -> Result<bool> {
    match links.leader(topic, partition).await {
        Ok(link) => Ok(link.is_some()),
        Err(err) if resends && err.is_connection_lost() => {
            tracing::debug!(%err, topic, partition, "leader unreachable; asking Metadata again");
            Ok(false)
        }
        Err(err) => Err(err),
    }
}

fn fail_batches(batches: Vec<ReadyBatch>, err: &Error) {
    for b in batches {
        for w in b.waiters {
            let _ = w.send(Err(err.clone()));
        }
    }
}

/// Attribute bit of a transactional batch.
const TRANSACTIONAL_BIT: i16 = 0x10;

/// Sets the transactional bit of an encoded batch and recomputes its CRC (which covers the
/// attributes).
fn mark_transactional(batch: &mut [u8]) {
    const CRC_AT: usize = CRC_START - 4;
    if batch.len() < CRC_START + 2 {
        return;
    }
    let attributes = i16::from_be_bytes([batch[CRC_START], batch[CRC_START + 1]]);
    batch[CRC_START..CRC_START + 2]
        .copy_from_slice(&(attributes | TRANSACTIONAL_BIT).to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

/// NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE: the batch was not written, and another
/// broker leads (or soon will lead) its partition.
fn is_leader_moved(code: i16) -> bool {
    code == ResponseError::NotLeaderOrFollower.code()
        || code == ResponseError::LeaderNotAvailable.code()
}

/// Answers each batch's records from the Produce response; a batch whose error `retry` accepts
/// is returned to be sent again instead; `on_error` maps a batch's error (and tells the
/// transaction about it) before its records get it.
fn complete(
    response: ProduceResponse,
    batches: Vec<ReadyBatch>,
    mut retry: impl FnMut(&mut ReadyBatch, i16) -> bool,
    mut on_error: impl FnMut(Error) -> Error,
) -> Vec<ReadyBatch> {
    let mut again = Vec::new();
    for mut b in batches {
        let answer = response
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == b.topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == b.partition);
        if let Some(p) = answer {
            if p.error_code != 0 && retry(&mut b, p.error_code) {
                again.push(b);
                continue;
            }
        }
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
                let err = on_error(err);
                for w in b.waiters {
                    let _ = w.send(Err(err.clone()));
                }
            }
        }
    }
    again
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::{validate_batch, BatchBuilder};

    #[test]
    fn a_marked_batch_is_transactional_and_its_crc_still_holds() {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            value: Some(b"v"),
            timestamp_ms: 1,
            ..NewRecord::default()
        });
        b.producer_id = 5;
        b.producer_epoch = 0;
        b.base_sequence = 0;
        let mut bytes = b.build(Offset(0));
        mark_transactional(&mut bytes);
        let header = validate_batch(&bytes).expect("valid after marking");
        assert!(header.is_transactional());
        assert!(!header.is_control());
        assert_eq!(header.producer_id, 5);
    }
}
