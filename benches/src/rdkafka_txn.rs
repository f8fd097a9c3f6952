//! librdkafka transactional workloads for the side-by-side comparison: a transactional
//! producer committing every N records, and a `read_committed` consumer.
//!
//! Contract:
//! - Inputs: the broker's `host:port`, a topic with one partition, value size, records per
//!   transaction, and how long to run.
//! - Outputs: records committed (each delivery report a success, and the commit answered),
//!   elapsed time, and each commit's latency (`commit_transaction` call to return, which
//!   covers librdkafka's flush of the transaction's records and EndTxn), sorted.
//! - The producer's `InitProducerId` and one unmeasured transaction come first (coordinator
//!   lookup, the `__transaction_state` partition, metadata off the clock).
//! - Any failed delivery report or transactional error is an error of the run, not a lower
//!   figure; the consumer checks offsets only grow (control records take offsets, so they
//!   are not dense) and that exactly the committed records come.
//! - Delivery reports are served by the sending thread ([`flush`], every 200 µs) before each
//!   commit, not by rdkafka's 100 ms polls.
//! - Never: runs past its duration plus one bounded transaction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use crate::error::BenchError;
use crate::rdkafka_workloads::consume_from_start;

/// Longest one transactional call (init, commit) may take.
const TXN_TIMEOUT: Duration = Duration::from_secs(60);

/// Counts delivery reports.
#[derive(Default)]
struct Reports {
    ok: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => self.ok.fetch_add(1, Ordering::AcqRel),
            Err(_) => self.failed.fetch_add(1, Ordering::AcqRel),
        };
    }
}

type Rd = BaseProducer<Reports>;

/// How long [`flush`] sleeps between serving the producer's events.
const FLUSH_STEP: Duration = Duration::from_micros(200);

/// What a transactional run committed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Committed {
    /// Records in committed transactions (each delivery report a success).
    pub records: u64,
    /// Transactions committed (timed ones only).
    pub transactions: u64,
    /// Seconds from the first timed `begin_transaction` to the last commit's return.
    pub elapsed_s: f64,
    /// Each timed commit's latency, ns, ascending.
    pub commit_ns: Vec<u64>,
}

impl Committed {
    /// Committed records per second.
    pub fn per_s(&self) -> f64 {
        self.records as f64 / self.elapsed_s
    }
}

fn transactional_producer(bootstrap: &str, transactional_id: &str) -> Result<Rd, BenchError> {
    let producer: Rd = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", "60000")
        .set("transaction.timeout.ms", "60000")
        .set("socket.nagle.disable", "true")
        // Sent at once: librdkafka's default 5 ms linger (which its own flush skips, and the
        // serving loop here does not) would be a floor under every commit on any broker.
        .set("linger.ms", "0")
        .create_with_context(Reports::default())?;
    producer.init_transactions(TXN_TIMEOUT)?;
    Ok(producer)
}

fn send(producer: &Rd, topic: &str, value: &[u8]) -> Result<(), BenchError> {
    loop {
        let record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).partition(0).payload(value);
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::ZERO);
                std::thread::sleep(FLUSH_STEP);
            }
            Err((err, _)) => return Err(err.into()),
        }
    }
}

/// One transaction of `records` records; returns how long its commit took.
fn one_transaction(
    producer: &Rd,
    topic: &str,
    value: &[u8],
    records: u64,
) -> Result<Duration, BenchError> {
    producer.begin_transaction()?;
    for _ in 0..records {
        send(producer, topic, value)?;
    }
    let commit = Instant::now();
    flush(producer)?;
    producer.commit_transaction(TXN_TIMEOUT)?;
    Ok(commit.elapsed())
}

/// Waits for every delivery report, serving them here every [`FLUSH_STEP`]. rdkafka 0.39's
/// own flush (inside `commit_transaction`) serves them with a 100 ms `poll` that returns only
/// when its timeout has passed, and the `ThreadedProducer`'s thread polls every 100 ms, either
/// of which put ~100 ms into every commit on any broker; after this one, its flush finds
/// nothing left and returns at once.
fn flush(producer: &Rd) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        producer.poll(Duration::ZERO);
        if producer.in_flight_count() == 0 {
            return Ok(());
        }
        if start.elapsed() > TXN_TIMEOUT {
            return Err(BenchError::Check(format!(
                "{} records not reported within {TXN_TIMEOUT:?}",
                producer.in_flight_count()
            )));
        }
        std::thread::sleep(FLUSH_STEP);
    }
}

fn check(producer: &Rd, expected_ok: u64) -> Result<(), BenchError> {
    let ctx = producer.context();
    let failed = ctx.failed.load(Ordering::Acquire);
    let ok = ctx.ok.load(Ordering::Acquire);
    if failed > 0 || ok != expected_ok {
        return Err(BenchError::Check(format!(
            "{expected_ok} records committed but {ok} delivered and {failed} failed"
        )));
    }
    Ok(())
}

/// A transactional producer (`transactional_id`) committing every `per_txn` records of
/// `value_bytes`, transaction after transaction, for `duration` (at least one timed
/// transaction).
pub fn produce_transactions(
    bootstrap: &str,
    topic: &str,
    transactional_id: &str,
    value_bytes: usize,
    per_txn: u64,
    duration: Duration,
) -> Result<Committed, BenchError> {
    let producer = transactional_producer(bootstrap, transactional_id)?;
    let value = vec![b't'; value_bytes];
    one_transaction(&producer, topic, &value, per_txn)?;
    check(&producer, per_txn)?;
    let mut run = Committed::default();
    let start = Instant::now();
    while run.transactions == 0 || start.elapsed() < duration {
        let took = one_transaction(&producer, topic, &value, per_txn)?;
        run.commit_ns.push(took.as_nanos() as u64);
        run.transactions += 1;
        run.records += per_txn;
    }
    run.elapsed_s = start.elapsed().as_secs_f64();
    check(&producer, per_txn + run.records)?;
    run.commit_ns.sort_unstable();
    Ok(run)
}

/// Fills `topic` with `records` records in transactions of `per_txn` (untimed), for the
/// read_committed consumer.
pub fn fill_transactions(
    bootstrap: &str,
    topic: &str,
    transactional_id: &str,
    value_bytes: usize,
    records: u64,
    per_txn: u64,
) -> Result<(), BenchError> {
    let producer = transactional_producer(bootstrap, transactional_id)?;
    let value = vec![b'f'; value_bytes];
    let mut sent = 0;
    while sent < records {
        let n = per_txn.min(records - sent);
        one_transaction(&producer, topic, &value, n)?;
        sent += n;
    }
    check(&producer, records)
}

/// What the read_committed reader read.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadCommitted {
    /// Records read.
    pub records: u64,
    /// Seconds from the assignment to the last record.
    pub elapsed_s: f64,
    /// Seconds from the first record to the last: the reading itself, without the consumer's
    /// start (librdkafka's 500 ms retry of the start-offset query, on any broker).
    pub from_first_s: f64,
}

/// Reads partition 0 of `topic` from its start with an assigned librdkafka consumer at
/// `isolation.level=read_committed` until `records` records came (offsets must grow; the
/// commit markers take offsets of their own).
pub fn consume_read_committed(
    bootstrap: &str,
    topic: &str,
    records: u64,
) -> Result<ReadCommitted, BenchError> {
    let mut last_offset = -1i64;
    let (elapsed_s, from_first_s) = consume_from_start(
        bootstrap,
        topic,
        (
            "mk-bench-read-committed",
            &[("isolation.level", "read_committed")],
        ),
        records,
        TXN_TIMEOUT,
        |_, offset| {
            if offset <= last_offset {
                return Err(BenchError::Check(format!(
                    "offset {offset} after {last_offset}"
                )));
            }
            last_offset = offset;
            Ok(())
        },
    )?;
    Ok(ReadCommitted {
        records,
        elapsed_s,
        from_first_s,
    })
}
