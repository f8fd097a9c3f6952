//! The producer: batching, partitioning, pipelined Produce requests, per-record delivery.
//!
//! Contract:
//! - Inputs: [`ProducerRecord`]s through a cloneable [`Producer`] handle; a negotiated
//!   connection; a [`Runtime`] for the linger timer.
//! - Outputs: one [`DeliveryFuture`] per record, resolving to its partition and offset (no
//!   offset with acks=0) or to the error that failed its batch.
//! - Batching: records gather per partition in an [`Accumulator`] (module `accumulator`,
//!   sans-IO: time enters as `now`); a batch is sealed when it holds `max_records`, when the next record would take it
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
//! - The work happens in a [`ProducerDriver`] future (module `driver`: all the I/O) that the
//!   caller spawns; it reads
//!   `Instant::now()` and sleeps through the [`Runtime`]. It ends once every handle is dropped
//!   and everything queued is answered, or at the first connection error (which fails every
//!   pending record; a routed idempotent or transactional producer re-sends instead, below).
//! - Never: retries (a failed batch fails its records; routed producers excepted, below), or
//!   spawns tasks itself.
//! - Transactions (with `transactional_id` set; KIP-98 as the Java client and librdkafka run
//!   them): [`Producer::init_transactions`] finds the transaction coordinator and gets a
//!   producer id and epoch (fencing older producers of the same id);
//!   [`Producer::begin_transaction`] opens a transaction; records may only be sent inside one,
//!   and each partition is added with AddPartitionsToTxn before its first batch goes out;
//!   [`Producer::send_offsets_to_transaction`] adds a consumer group's offsets;
//!   [`Producer::commit_transaction`] flushes and commits, [`Producer::abort_transaction`]
//!   drops unsent records and aborts. Batches carry the producer id, epoch, per-partition
//!   sequence and the transactional flag (idempotence is implied; acks must be all). Errors are
//!   [`Error::Transaction`]: fatal (fenced: drop the producer) or abortable (abort, then go
//!   on). Coordinator requests retry CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
//!   COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR every `txn_retry_backoff` for up to
//!   `max_block`.
//! - Brokers: built with [`Producer::new`] or [`Producer::connect`], the one connection must
//!   lead every partition and be both coordinators (one node). Built with
//!   [`Producer::new_routed`] and a [`Connector`], it follows the cluster (module `links`,
//!   I162): Metadata names each partition's leader, which gets that partition's Produce
//!   requests over its own connection; FindCoordinator names the transaction coordinator
//!   (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and the group coordinator
//!   (TxnOffsetCommit); NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE re-send the batch (same
//!   sequence) to the leader Metadata names next, NOT_COORDINATOR looks the coordinator up
//!   again. This is the one retry of a Produce, and only routed producers make it.
//! - Idempotence without transactions (`enable_idempotence`, module `idempotence`, I163): an
//!   InitProducerId with no transactional id (asked of the bootstrap broker) before the first
//!   record; every batch then carries the producer id, epoch and its partition's sequence, and
//!   the re-send after a moved leader keeps them, so it is written once.
//! - Lost connections (I182): a routed producer that is idempotent or transactional re-sends
//!   the batches of every Produce request a lost connection carried, unchanged, over a new
//!   connection after a Metadata refresh (so a batch the broker had written is answered as a
//!   duplicate with its first offsets), asks its transactional requests again over a new
//!   connection inside the open transaction, and replaces a lost bootstrap connection; all
//!   for at most `max_block`.
mod accumulator;
mod driver;
pub mod idempotence;
mod links;
mod sequences;
pub mod txn;
mod txn_io;

pub use accumulator::{Accumulator, BatchConfig, SealedBatch};
pub use driver::ProducerDriver;
pub use links::Connector;
pub use txn::ConsumerGroupMetadata;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::channel::oneshot;
use futures_io::{AsyncRead, AsyncWrite};
use minikafka_core::record::Compression;
use minikafka_core::types::Offset;

use crate::connection::{Connection, ConnectionConfig};
use crate::consumer::TopicPartition;
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use links::Links;

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
    /// Kafka's `transactional.id`: makes this a transactional (and idempotent) producer.
    pub transactional_id: Option<String>,
    /// Kafka's `enable.idempotence` for a producer without `transactional_id`: batches carry a
    /// producer id, epoch and sequences (module `idempotence`), so a routed producer's re-send
    /// after a moved leader is written once (I163). Needs acks=all. Off by default.
    pub enable_idempotence: bool,
    /// How long the coordinator lets a transaction stay open before aborting it
    /// (`transaction.timeout.ms`).
    pub transaction_timeout_ms: i32,
    /// Wait between retries of a coordinator request that answered a retriable error.
    pub txn_retry_backoff: Duration,
    /// How long a transactional call retries before failing (`max.block.ms`).
    pub max_block: Duration,
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
            transactional_id: None,
            enable_idempotence: false,
            transaction_timeout_ms: 60_000,
            txn_retry_backoff: Duration::from_millis(100),
            max_block: Duration::from_secs(60),
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

/// Where a record's delivery is answered.
pub(crate) type Reply = oneshot::Sender<Result<Delivery>>;

/// A transactional call, carried out by the driver in channel order with the records.
#[derive(Debug)]
pub(crate) enum TxnOp {
    Init,
    Begin,
    SendOffsets(BTreeMap<TopicPartition, Offset>, ConsumerGroupMetadata),
    Commit,
    Abort,
}

/// What a [`Producer`] handle asks of its driver.
pub(crate) enum Command {
    Record(ProducerRecord, Reply),
    Flush(oneshot::Sender<Result<()>>),
    Txn(TxnOp, oneshot::Sender<Result<()>>),
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
            Command::Txn(op, _) => write!(f, "Txn({op:?})"),
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

    /// Builds the handle and driver over a negotiated connection to a broker that leads every
    /// partition it will send to and coordinates its transactions (one node).
    pub fn new<S, R>(
        conn: Connection<S>,
        config: ProducerConfig,
        runtime: R,
    ) -> Result<(Producer, ProducerDriver<S, R>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: Runtime,
    {
        Producer::build(Links::new(conn, None), config, runtime)
    }

    /// Builds the handle and driver for a cluster: `bootstrap` answers Metadata and
    /// FindCoordinator, and `connector` opens a connection to each broker those answers name
    /// (partition leaders, coordinators) when it is first needed (I162).
    pub fn new_routed<S, R>(
        bootstrap: Connection<S>,
        connector: Connector<S>,
        config: ProducerConfig,
        runtime: R,
    ) -> Result<(Producer, ProducerDriver<S, R>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: Runtime,
    {
        Producer::build(Links::new(bootstrap, Some(connector)), config, runtime)
    }

    fn build<S, R>(
        links: Links<S>,
        config: ProducerConfig,
        runtime: R,
    ) -> Result<(Producer, ProducerDriver<S, R>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        R: Runtime,
    {
        if config.transactional_id.is_some() && config.acks != Acks::All {
            return Err(Error::InvalidArgument(
                "a transactional producer needs acks=all (idempotence is implied)".into(),
            ));
        }
        if config.enable_idempotence && config.acks != Acks::All {
            return Err(Error::InvalidArgument(
                "an idempotent producer needs acks=all".into(),
            ));
        }
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
        let driver = ProducerDriver::new(links, runtime, rx, config);
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

    async fn txn(&self, op: TxnOp) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Command::Txn(op, reply))
            .await
            .map_err(|_| Error::ProducerClosed)?;
        rx.await.map_err(|_| Error::ProducerClosed)?
    }

    /// Finds the transaction coordinator and gets this `transactional_id`'s producer id and a
    /// new epoch, fencing any older producer of the id and ending its open transaction.
    /// Call once, before anything else, on a producer with `transactional_id` set.
    pub async fn init_transactions(&self) -> Result<()> {
        self.txn(TxnOp::Init).await
    }

    /// Opens a transaction: records sent from now on belong to it.
    pub async fn begin_transaction(&self) -> Result<()> {
        self.txn(TxnOp::Begin).await
    }

    /// Commits `offsets` (the next offset to consume, per partition) for the consumer group
    /// `group` as part of the open transaction: they count only if it commits (KIP-98; the
    /// group metadata lets the coordinator refuse a zombie generation, KIP-447).
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: BTreeMap<TopicPartition, Offset>,
        group: ConsumerGroupMetadata,
    ) -> Result<()> {
        self.txn(TxnOp::SendOffsets(offsets, group)).await
    }

    /// Flushes every record of the open transaction and commits it. If a record failed the
    /// answer is an abortable error and the transaction stays open for `abort_transaction`.
    pub async fn commit_transaction(&self) -> Result<()> {
        self.txn(TxnOp::Commit).await
    }

    /// Aborts the open transaction: records not yet sent fail, those sent are rolled back.
    pub async fn abort_transaction(&self) -> Result<()> {
        self.txn(TxnOp::Abort).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_parse() {
        assert_eq!(Acks::parse("all").expect("all").wire(), -1);
        assert_eq!(Acks::parse("1").expect("1").wire(), 1);
        assert_eq!(Acks::parse("0").expect("0").wire(), 0);
        assert!(Acks::parse("2").is_err());
    }
}
