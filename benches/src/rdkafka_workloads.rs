//! librdkafka workloads for the client benchmarks: the producer (the `rdkafka` crate's
//! `ThreadedProducer`) at saturation, counted in acknowledged records, for a duration or a
//! fixed count; sequential confirmed writes; a bounded window of outstanding writes; and an
//! assigned consumer reading a partition from its start.
//!
//! Contract:
//! - Inputs: the broker's `host:port`, a topic with one partition, value size, and the
//!   producer settings ([`RdSettings`]: acks=all always; idempotence when asked).
//! - Outputs: counts of records whose delivery report said success (a record counts only once
//!   the broker acknowledged it under its flush policy, I8), failures, elapsed time, and for
//!   sequential writes each write's latency (send to delivery report), sorted.
//! - Any failed delivery report is an error of the run, not a lower figure.
//! - Delivery reports are served by the `ThreadedProducer`'s own polling thread and signalled
//!   to the sending thread through a condition variable: `BaseProducer::poll(timeout)` in
//!   rdkafka 0.39 returns only once `timeout` has passed, even after an event, so polling
//!   from the sending thread would put the poll timeout into every measured latency.
//! - Never: runs past its duration plus one bounded flush, or retries a failed record.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

use crate::error::BenchError;

/// Longest wait for the last delivery reports after sending stops.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// Producer settings beyond acks=all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdSettings {
    /// `enable.idempotence=true` (needs the broker's InitProducerId).
    pub idempotence: bool,
    /// `max.in.flight.requests.per.connection`, when set.
    pub max_in_flight: Option<usize>,
    /// `linger.ms`, when set.
    pub linger_ms: Option<u32>,
}

/// Counts delivery reports and wakes a sender waiting for one.
#[derive(Default)]
struct Reports {
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// Senders inside [`Reports::wait_past`]; reports notify only when there is one.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    changed: Condvar,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.ok.fetch_add(1, Ordering::Release);
            }
            Err((err, _)) => {
                if let Ok(mut first) = self.first_error.lock() {
                    first.get_or_insert_with(|| err.to_string());
                }
                self.failed.fetch_add(1, Ordering::SeqCst);
            }
        }
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.changed.notify_all();
        }
    }
}

impl Reports {
    fn answered(&self) -> u64 {
        self.ok.load(Ordering::SeqCst) + self.failed.load(Ordering::SeqCst)
    }

    /// Waits until more than `count` reports arrived, or `limit` passed.
    fn wait_past(&self, count: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut guard) = self.lock.lock() {
            while self.answered() <= count {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                // The 10 ms cap is a backstop only: reports notify while a waiter is counted.
                match self
                    .changed
                    .wait_timeout(guard, (deadline - now).min(Duration::from_millis(10)))
                {
                    Ok((g, _)) => guard = g,
                    Err(_) => break,
                }
            }
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), BenchError> {
        let failed = self.failed.load(Ordering::Acquire);
        if failed == 0 {
            return Ok(());
        }
        let first = self
            .first_error
            .lock()
            .ok()
            .and_then(|f| f.clone())
            .unwrap_or_default();
        Err(BenchError::Check(format!(
            "{failed} records were not acknowledged (first: {first})"
        )))
    }
}

/// The configuration every workload here uses; the keys are librdkafka's.
pub fn producer_config(bootstrap: &str, settings: RdSettings) -> Vec<(&'static str, String)> {
    let mut config = vec![
        ("bootstrap.servers", bootstrap.to_owned()),
        ("acks", "all".to_owned()),
        ("enable.idempotence", settings.idempotence.to_string()),
        ("message.timeout.ms", "60000".to_owned()),
        ("socket.nagle.disable", "true".to_owned()),
    ];
    if let Some(n) = settings.max_in_flight {
        config.push(("max.in.flight.requests.per.connection", n.to_string()));
    }
    if let Some(ms) = settings.linger_ms {
        config.push(("linger.ms", ms.to_string()));
    }
    config
}

type Rd = ThreadedProducer<Reports>;

fn producer(bootstrap: &str, settings: RdSettings) -> Result<Rd, BenchError> {
    producer_with(bootstrap, settings, &[])
}

/// A producer with [`producer_config`] and then `extra` (later keys win).
fn producer_with(
    bootstrap: &str,
    settings: RdSettings,
    extra: &[(&str, String)],
) -> Result<Rd, BenchError> {
    let mut config = ClientConfig::new();
    for (key, value) in producer_config(bootstrap, settings) {
        config.set(key, value);
    }
    for (key, value) in extra {
        config.set(*key, value);
    }
    Ok(config.create_with_context(Reports::default())?)
}

/// Enqueues one record, serving delivery reports while the local queue is full.
fn enqueue(producer: &Rd, topic: &str, value: &[u8]) -> Result<(), BenchError> {
    loop {
        let record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).partition(0).payload(value);
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                let ctx = producer.context();
                ctx.wait_past(ctx.answered(), Duration::from_millis(1));
            }
            Err((err, _)) => return Err(err.into()),
        }
    }
}

/// What a throughput run acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Acked {
    /// Records whose delivery report was a success.
    pub records: u64,
    /// Seconds from the first send to the last delivery report.
    pub elapsed_s: f64,
}

impl Acked {
    /// Acknowledged records per second.
    pub fn per_s(&self) -> f64 {
        self.records as f64 / self.elapsed_s
    }
}

/// Sends `value_bytes` records as fast as the producer takes them for `duration`, with at
/// most `window` unacknowledged (`None`: librdkafka's own queue limit), then waits for every
/// delivery report.
pub fn produce_acked(
    bootstrap: &str,
    topic: &str,
    value_bytes: usize,
    duration: Duration,
    window: Option<u64>,
    settings: RdSettings,
) -> Result<Acked, BenchError> {
    let producer = producer(bootstrap, settings)?;
    let value = vec![b'r'; value_bytes];
    // One confirmed write first: connection, metadata (and InitProducerId) off the clock.
    enqueue(&producer, topic, &value)?;
    producer.flush(FLUSH_TIMEOUT)?;
    producer.context().check()?;
    let before = producer.context().ok.load(Ordering::Acquire);
    let mut sent = 0u64;
    let start = Instant::now();
    while start.elapsed() < duration {
        match window {
            Some(w) => {
                let ctx = producer.context();
                while sent - (ctx.answered() - before) < w {
                    enqueue(&producer, topic, &value)?;
                    sent += 1;
                }
                // Wait for the oldest outstanding write's report.
                ctx.wait_past(before + sent - w, Duration::from_millis(100));
            }
            None => {
                enqueue(&producer, topic, &value)?;
                sent += 1;
            }
        }
    }
    producer.flush(FLUSH_TIMEOUT)?;
    let elapsed_s = start.elapsed().as_secs_f64();
    producer.context().check()?;
    let records = producer.context().ok.load(Ordering::Acquire) - before;
    if records != sent {
        return Err(BenchError::Check(format!(
            "{sent} records sent but {records} acknowledged"
        )));
    }
    Ok(Acked { records, elapsed_s })
}

/// Sends exactly `records` records of `value_bytes` as fast as the producer takes them (the
/// librdkafka saturation workload: a fixed count, not a duration), then waits for every
/// delivery report. The clock starts after one unmeasured confirmed write.
pub fn produce_count(
    bootstrap: &str,
    topic: &str,
    value_bytes: usize,
    records: u64,
    settings: RdSettings,
) -> Result<Acked, BenchError> {
    produce_values(
        bootstrap,
        topic,
        &[vec![b'c'; value_bytes]],
        records,
        settings,
        &[],
    )
}

/// As [`produce_count`], with the values taken in turn from `values` (which must not be empty)
/// and `extra` producer settings (e.g. `compression.type`) after [`producer_config`]'s.
pub fn produce_values(
    bootstrap: &str,
    topic: &str,
    values: &[Vec<u8>],
    records: u64,
    settings: RdSettings,
    extra: &[(&str, String)],
) -> Result<Acked, BenchError> {
    if values.is_empty() {
        return Err(BenchError::Check("produce_values: no values".into()));
    }
    let producer = producer_with(bootstrap, settings, extra)?;
    enqueue(&producer, topic, &values[0])?;
    producer.flush(FLUSH_TIMEOUT)?;
    producer.context().check()?;
    let before = producer.context().ok.load(Ordering::Acquire);
    let start = Instant::now();
    for (_, value) in (0..records).zip(values.iter().cycle()) {
        enqueue(&producer, topic, value)?;
    }
    producer.flush(FLUSH_TIMEOUT)?;
    let elapsed_s = start.elapsed().as_secs_f64();
    producer.context().check()?;
    let acked = producer.context().ok.load(Ordering::Acquire) - before;
    if acked != records {
        return Err(BenchError::Check(format!(
            "{records} records sent but {acked} acknowledged"
        )));
    }
    Ok(Acked { records, elapsed_s })
}

/// Reads partition 0 of `topic` from offset 0 with a librdkafka consumer that is *assigned*
/// the partition (no group), until `records` records came; offsets must come dense and in
/// order (I1). Returns the records and the seconds from the assignment to the last one.
/// librdkafka wants a `group.id` even for an assigned consumer; nothing is committed.
pub fn consume_assigned(bootstrap: &str, topic: &str, records: u64) -> Result<Acked, BenchError> {
    let (elapsed_s, _) = consume_from_start(
        bootstrap,
        topic,
        ("mk-bench-assigned", &[]),
        records,
        FLUSH_TIMEOUT,
        |next, offset| {
            if offset == next as i64 {
                Ok(())
            } else {
                Err(BenchError::Check(format!(
                    "consumed offset {offset} where {next} was next (I1)"
                )))
            }
        },
    )?;
    Ok(Acked { records, elapsed_s })
}

/// The consumer loop of [`consume_assigned`] and the read_committed reader: a librdkafka
/// consumer with `group.id` `consumer.0` and the settings `consumer.1`, assigned partition 0
/// of `topic` from its start, polls until `records` records came, handing each one's number
/// (from 0) and offset to `check_offset`; no record for `idle_limit` is an error. Returns the
/// seconds from the assignment to the last record, and from the first record to the last
/// (without the consumer's start: librdkafka queries the start offset only after a 500 ms
/// retry when the leader's connection is not up yet at the assignment, on any broker).
pub(crate) fn consume_from_start(
    bootstrap: &str,
    topic: &str,
    consumer: (&str, &[(&str, &str)]),
    records: u64,
    idle_limit: Duration,
    mut check_offset: impl FnMut(u64, i64) -> Result<(), BenchError>,
) -> Result<(f64, f64), BenchError> {
    let (group_id, extra) = consumer;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("socket.nagle.disable", "true");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    let consumer: BaseConsumer = config.create()?;
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(topic, 0, Offset::Beginning)?;
    let start = Instant::now();
    consumer.assign(&assignment)?;
    let mut seen = 0u64;
    let mut first: Option<Instant> = None;
    let mut last_progress = Instant::now();
    while seen < records {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                first.get_or_insert_with(Instant::now);
                check_offset(seen, message.offset())?;
                seen += 1;
                last_progress = Instant::now();
            }
            Some(Err(e)) => return Err(e.into()),
            None if last_progress.elapsed() > idle_limit => {
                return Err(BenchError::Check(format!(
                    "no record for {idle_limit:?} after {seen} of {records}"
                )));
            }
            None => {}
        }
    }
    let from_first = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    Ok((start.elapsed().as_secs_f64(), from_first))
}

/// `count` writes one at a time (each waits for its delivery report before the next is
/// sent), after `warmup` unmeasured ones, with `extra` producer settings (e.g.
/// `security.protocol`) after [`producer_config`]'s; returns each write's latency in ns,
/// ascending.
pub fn sequential_latency(
    bootstrap: &str,
    topic: &str,
    value_bytes: usize,
    count: usize,
    warmup: usize,
    settings: RdSettings,
    extra: &[(&str, String)],
) -> Result<Vec<u64>, BenchError> {
    let producer = producer_with(bootstrap, settings, extra)?;
    let value = vec![b's'; value_bytes];
    let mut samples = Vec::with_capacity(count);
    for i in 0..warmup + count {
        let answered = producer.context().answered();
        let t = Instant::now();
        enqueue(&producer, topic, &value)?;
        while producer.context().answered() == answered {
            if t.elapsed() > FLUSH_TIMEOUT {
                return Err(BenchError::Check(format!(
                    "no delivery report for write {i} within {FLUSH_TIMEOUT:?}"
                )));
            }
            producer
                .context()
                .wait_past(answered, Duration::from_millis(100));
        }
        producer.context().check()?;
        if i >= warmup {
            samples.push(t.elapsed().as_nanos() as u64);
        }
    }
    samples.sort_unstable();
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_always_asks_for_acks_all_and_flips_idempotence() {
        let settings = RdSettings {
            idempotence: false,
            max_in_flight: Some(1),
            linger_ms: Some(0),
        };
        let c = producer_config("127.0.0.1:1", settings);
        let get = |c: &[(&str, String)], k: &str| {
            c.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone())
        };
        assert_eq!(get(&c, "acks").as_deref(), Some("all"));
        assert_eq!(get(&c, "enable.idempotence").as_deref(), Some("false"));
        assert_eq!(
            get(&c, "max.in.flight.requests.per.connection").as_deref(),
            Some("1")
        );
        assert_eq!(get(&c, "linger.ms").as_deref(), Some("0"));
        let c = producer_config(
            "h:1",
            RdSettings {
                idempotence: true,
                max_in_flight: None,
                linger_ms: None,
            },
        );
        assert_eq!(get(&c, "enable.idempotence").as_deref(), Some("true"));
        assert_eq!(get(&c, "linger.ms"), None);
    }
}
