//! Kafka-level workloads on our client (`minikafka_client`) against a running broker:
//! pre-encoded produce at a fixed pipeline depth, CRC-checked consume at a fetch size, paced
//! end-to-end latency, and concurrent producers.
//!
//! Contract:
//! - Inputs: the broker's address, a topic this module creates (or the caller created), and
//!   the shape of the work ([`PreEncoded`], [`Limits`], [`LatencySpec`]).
//! - Outputs: measurements of payload bytes (record values only, decimal MB), records,
//!   requests and elapsed time; latency samples in nanoseconds, sorted.
//! - Every Produce response is checked (a non-zero error code is an error, not a slower
//!   figure); every consumed batch is CRC-checked by the client and offsets are checked to be
//!   dense (I1). Connecting, topic creation and filling are outside the clock.
//! - Never: asserts a timing, or keeps more than `depth` requests in flight.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::Future;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use minikafka_client::{
    Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, Error as ClientError, InFlight,
    Offset, OffsetReset, SeekTo, TopicPartition,
};
use minikafka_core::record::{BatchBuilder, NewRecord};
use smol::net::TcpStream;

use crate::error::BenchError;

/// A Produce request built once and sent many times.
#[derive(Clone, Debug)]
pub struct PreEncoded {
    /// The request (acks and timeout set; one batch for one partition).
    pub request: ProduceRequest,
    /// Records in the batch.
    pub records: u64,
    /// Bytes of record values in the batch.
    pub payload_bytes: u64,
    /// Bytes of the encoded batch.
    pub batch_bytes: usize,
}

/// Wall-clock milliseconds, for record timestamps (a value the batch carries; never timed).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One v2 batch of `records` records with `value_bytes`-byte values (no key), the first 8
/// bytes of each value set to `stamp` (little-endian).
pub fn encode_batch(records: usize, value_bytes: usize, stamp: u64, timestamp_ms: i64) -> Vec<u8> {
    let mut value = vec![b'v'; value_bytes.max(8)];
    value[..8].copy_from_slice(&stamp.to_le_bytes());
    value.truncate(value_bytes.max(8));
    let mut builder = BatchBuilder::new();
    for _ in 0..records {
        builder.push(&NewRecord {
            key: None,
            value: Some(&value),
            headers: Vec::new(),
            timestamp_ms,
        });
    }
    builder.build(Offset(0))
}

/// A Produce request carrying `batch` for `topic`/`partition`.
pub fn produce_request(topic: &str, partition: i32, acks: i16, batch: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])])
}

/// Builds the request of `records` records of `value_bytes` once (BatchBuilder, as the
/// client does), acks=1 (on one node the same wait as acks=all: the flush policy, I8).
pub fn pre_encode(topic: &str, partition: i32, value_bytes: usize, records: usize) -> PreEncoded {
    let batch = encode_batch(records, value_bytes, 0, now_ms());
    let batch_bytes = batch.len();
    PreEncoded {
        request: produce_request(topic, partition, 1, Bytes::from(batch)),
        records: records as u64,
        payload_bytes: (records * value_bytes.max(8)) as u64,
        batch_bytes,
    }
}

/// When a timed loop stops: after `duration`, or once `max_payload_bytes` were sent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Longest time to run.
    pub duration: Duration,
    /// Most payload bytes to send (bounds the disk a fast point uses).
    pub max_payload_bytes: u64,
}

/// What one timed produce or consume loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measurement {
    /// Requests (Produce or Fetch) answered.
    pub requests: u64,
    /// Records produced or consumed.
    pub records: u64,
    /// Bytes of record values.
    pub payload_bytes: u64,
    /// Seconds the loop ran.
    pub elapsed_s: f64,
}

impl Measurement {
    /// Decimal MB of record values per second.
    pub fn mb_per_s(&self) -> f64 {
        self.payload_bytes as f64 / 1e6 / self.elapsed_s
    }
    /// Records per second.
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.elapsed_s
    }
    /// Requests per second.
    pub fn requests_per_s(&self) -> f64 {
        self.requests as f64 / self.elapsed_s
    }
}

/// A negotiated connection to `addr` allowing `max_in_flight` requests, TCP_NODELAY set.
pub async fn connect(
    addr: SocketAddr,
    max_in_flight: usize,
) -> Result<Connection<TcpStream>, BenchError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let config = ConnectionConfig {
        client_id: "mk-bench".into(),
        max_in_flight: max_in_flight.max(1),
        ..ConnectionConfig::default()
    };
    Ok(Connection::connect(stream, config).await?)
}

/// Creates `topic` with `partitions` partitions.
pub fn create_topic(addr: SocketAddr, topic: &str, partitions: i32) -> Result<(), BenchError> {
    create_topic_with(addr, topic, partitions, &[])
}

/// Creates `topic` with `partitions` partitions and the topic settings `configs`.
pub fn create_topic_with(
    addr: SocketAddr,
    topic: &str,
    partitions: i32,
    configs: &[(String, String)],
) -> Result<(), BenchError> {
    smol::block_on(async {
        let mut admin = Admin::new(connect(addr, 1).await?);
        admin.create_topic(topic, partitions, configs).await?;
        Ok(())
    })
}

/// Deletes `topic` (frees the disk a point used).
pub fn delete_topic(addr: SocketAddr, topic: &str) -> Result<(), BenchError> {
    smol::block_on(async {
        let mut admin = Admin::new(connect(addr, 1).await?);
        admin.delete_topic(topic).await?;
        Ok(())
    })
}

/// True when the broker advertises InitProducerId (API 22) in ApiVersions.
pub fn advertises_init_producer_id(addr: SocketAddr) -> Result<bool, BenchError> {
    smol::block_on(async { Ok(connect(addr, 1).await?.broker_versions().contains_key(&22)) })
}

/// Fails on any partition error in a Produce response.
pub fn check_produce(response: &ProduceResponse) -> Result<(), BenchError> {
    for topic in &response.responses {
        for p in &topic.partition_responses {
            ClientError::check(p.error_code, || {
                format!("produce {}-{}", topic.name.0.as_str(), p.index)
            })?;
        }
    }
    Ok(())
}

/// Sends `pre` over `conn` with up to `depth` requests in flight until `limits`, then waits
/// for every answer. The clock runs from the first send to the last answer.
pub async fn produce_loop<S: futures::AsyncRead + futures::AsyncWrite + Unpin>(
    conn: &mut Connection<S>,
    pre: &PreEncoded,
    depth: usize,
    limits: Limits,
) -> Result<Measurement, BenchError> {
    let mut tickets: VecDeque<InFlight<ProduceRequest>> = VecDeque::with_capacity(depth);
    let mut m = Measurement::default();
    let start = Instant::now();
    while start.elapsed() < limits.duration && m.payload_bytes < limits.max_payload_bytes {
        if tickets.len() >= depth.max(1) {
            if let Some(t) = tickets.pop_front() {
                check_produce(&conn.receive(t).await?)?;
                m.requests += 1;
            }
        }
        tickets.push_back(conn.send(&pre.request).await?);
        m.records += pre.records;
        m.payload_bytes += pre.payload_bytes;
    }
    while let Some(t) = tickets.pop_front() {
        check_produce(&conn.receive(t).await?)?;
        m.requests += 1;
    }
    m.elapsed_s = start.elapsed().as_secs_f64();
    Ok(m)
}

/// [`produce_loop`] on a fresh connection (connected outside the clock).
pub fn produce_run(
    addr: SocketAddr,
    pre: &PreEncoded,
    depth: usize,
    limits: Limits,
) -> Result<Measurement, BenchError> {
    smol::block_on(async {
        let mut conn = connect(addr, depth).await?;
        produce_loop(&mut conn, pre, depth, limits).await
    })
}

/// `producers` threads, each on its own connection sending its own request (`pres[i]`)
/// with `depth` in flight, started together after all have connected. Aggregate: the sum
/// of payloads over the longest elapsed time.
pub fn concurrent_produce(
    addr: SocketAddr,
    pres: Vec<PreEncoded>,
    depth: usize,
    limits: Limits,
) -> Result<Measurement, BenchError> {
    let barrier = Arc::new(Barrier::new(pres.len()));
    let handles: Vec<_> = pres
        .into_iter()
        .map(|pre| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                smol::block_on(async {
                    let conn = connect(addr, depth).await;
                    barrier.wait();
                    produce_loop(&mut conn?, &pre, depth, limits).await
                })
            })
        })
        .collect();
    let mut total = Measurement::default();
    for h in handles {
        let m = h
            .join()
            .map_err(|_| BenchError::Check("producer thread panicked".into()))??;
        total.requests += m.requests;
        total.records += m.records;
        total.payload_bytes += m.payload_bytes;
        total.elapsed_s = total.elapsed_s.max(m.elapsed_s);
    }
    Ok(total)
}

/// Produces at least `payload_bytes` of `value_bytes` records in ~1 MiB batches to
/// partition 0 of `topic`; returns the records written.
pub fn fill(
    addr: SocketAddr,
    topic: &str,
    value_bytes: usize,
    payload_bytes: u64,
) -> Result<u64, BenchError> {
    let per_batch = ((1 << 20) / (value_bytes + 16)).max(1);
    let pre = pre_encode(topic, 0, value_bytes, per_batch);
    let limits = Limits {
        duration: Duration::from_secs(600),
        max_payload_bytes: payload_bytes,
    };
    Ok(produce_run(addr, &pre, 4, limits)?.records)
}

/// Consumes partition 0 of `topic` (holding `records` records from offset 0) with fetches
/// of `fetch_max_bytes` (both the request and the partition limit), starting over at offset
/// 0 on reaching the end, until `limits`. Offsets must come dense and in order (I1).
pub fn consume_run(
    addr: SocketAddr,
    topic: &str,
    records: u64,
    fetch_max_bytes: i32,
    limits: Limits,
) -> Result<Measurement, BenchError> {
    smol::block_on(async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let config = ConsumerConfig {
            max_wait: Duration::from_millis(100),
            min_bytes: 1,
            max_bytes: fetch_max_bytes,
            partition_max_bytes: fetch_max_bytes,
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::connect(stream, config).await?;
        let tp = TopicPartition::new(topic, 0);
        consumer.assign([tp.clone()]);
        consumer.seek(&tp, SeekTo::Offset(Offset(0)))?;
        let mut expect = 0i64;
        let mut m = Measurement::default();
        let start = Instant::now();
        while start.elapsed() < limits.duration && m.payload_bytes < limits.max_payload_bytes {
            let batch = consumer.poll().await?;
            m.requests += 1;
            for r in &batch {
                if r.offset.0 != expect {
                    return Err(BenchError::Check(format!(
                        "consumed offset {} where {expect} was next (I1)",
                        r.offset.0
                    )));
                }
                expect += 1;
                m.records += 1;
                m.payload_bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
            }
            if expect as u64 >= records {
                consumer.seek(&tp, SeekTo::Offset(Offset(0)))?;
                expect = 0;
            }
        }
        m.elapsed_s = start.elapsed().as_secs_f64();
        Ok(m)
    })
}

/// Nanoseconds after the start at which request `i` of a paced producer is due: requests of
/// `batch_records` records at `rate_per_s` records per second, evenly spaced.
pub fn send_offset_ns(i: u64, rate_per_s: f64, batch_records: usize) -> u64 {
    (i as f64 * batch_records as f64 * 1e9 / rate_per_s).round() as u64
}

/// A paced end-to-end latency run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencySpec {
    /// Target records per second.
    pub rate_per_s: f64,
    /// Records per Produce request.
    pub batch_records: usize,
    /// Bytes of each value (at least 8: the stamp).
    pub value_bytes: usize,
    /// How long the producer sends.
    pub duration: Duration,
    /// Samples stamped before this are not counted.
    pub warmup: Duration,
    /// Most Produce requests in flight (the producer falls behind its schedule beyond it).
    pub max_in_flight: usize,
}

/// What a latency run saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencyRun {
    /// Send (stamp) to consumer receipt, ns, ascending; one per record after the warm-up.
    pub e2e_ns: Vec<u64>,
    /// Send to Produce acknowledgement, ns, ascending; one per request after the warm-up.
    pub ack_ns: Vec<u64>,
    /// How late each request left relative to its schedule, ns, ascending.
    pub lag_ns: Vec<u64>,
    /// Records sent after the warm-up, per second of the measured window.
    pub achieved_rate_per_s: f64,
    /// Records sent in all.
    pub sent: u64,
    /// Records received in all.
    pub received: u64,
}

enum Event {
    Due,
    Answer(Result<ProduceResponse, ClientError>),
}

/// Runs a paced producer (stamping each value with its send time, monotonic ns since a
/// shared epoch) and a long-polling consumer on its own thread, on partition 0 of `topic`.
pub fn latency_run(
    addr: SocketAddr,
    topic: &str,
    spec: LatencySpec,
) -> Result<LatencyRun, BenchError> {
    let epoch = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let sent_total = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(Barrier::new(2));
    let warmup_ns = spec.warmup.as_nanos() as u64;
    // The stamps are ns since `epoch`; the producer starts after the barrier, so stamps of
    // the warm-up are those below start + warmup. Passed as an absolute ns threshold.
    let start_ns = Arc::new(AtomicU64::new(u64::MAX));
    let consumer = {
        let (done, sent_total, ready, start_ns) = (
            Arc::clone(&done),
            Arc::clone(&sent_total),
            Arc::clone(&ready),
            Arc::clone(&start_ns),
        );
        let topic = topic.to_owned();
        std::thread::spawn(move || -> Result<(Vec<u64>, u64), BenchError> {
            smol::block_on(async {
                let stream = TcpStream::connect(addr).await;
                let connected = match stream {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        let config = ConsumerConfig {
                            max_wait: Duration::from_millis(100),
                            min_bytes: 1,
                            auto_offset_reset: OffsetReset::Earliest,
                            ..ConsumerConfig::default()
                        };
                        Consumer::connect(s, config).await.map_err(BenchError::from)
                    }
                    Err(e) => Err(e.into()),
                };
                ready.wait();
                let mut consumer = connected?;
                let tp = TopicPartition::new(topic, 0);
                consumer.assign([tp.clone()]);
                consumer.seek(&tp, SeekTo::Offset(Offset(0)))?;
                let mut samples = Vec::new();
                let mut received = 0u64;
                let mut deadline = None;
                loop {
                    if done.load(Ordering::Acquire) {
                        if received >= sent_total.load(Ordering::Acquire) {
                            break;
                        }
                        let d = *deadline
                            .get_or_insert_with(|| Instant::now() + Duration::from_secs(10));
                        if Instant::now() > d {
                            break;
                        }
                    }
                    let records = consumer.poll().await?;
                    let now_ns = epoch.elapsed().as_nanos() as u64;
                    let threshold = start_ns.load(Ordering::Acquire).saturating_add(warmup_ns);
                    for r in &records {
                        received += 1;
                        let stamp = r
                            .value
                            .as_ref()
                            .and_then(|v| v.get(..8))
                            .and_then(|b| <[u8; 8]>::try_from(b).ok())
                            .map(u64::from_le_bytes)
                            .ok_or_else(|| BenchError::Check("record without a stamp".into()))?;
                        if stamp >= threshold {
                            samples.push(now_ns.saturating_sub(stamp));
                        }
                    }
                }
                Ok((samples, received))
            })
        })
    };

    let produced = smol::block_on(async {
        let conn = connect(addr, spec.max_in_flight).await;
        ready.wait();
        let mut conn = conn?;
        let mut run = LatencyRun::default();
        let mut in_flight: VecDeque<(InFlight<ProduceRequest>, u64)> = VecDeque::new();
        let depth = spec.max_in_flight.max(1);
        let start = Instant::now();
        let start_stamp = start.duration_since(epoch).as_nanos() as u64;
        start_ns.store(start_stamp, Ordering::Release);
        let mut next = 0u64;
        let mut sent_measured = 0u64;
        let on_answer = |response: Result<ProduceResponse, ClientError>,
                         stamp: u64,
                         run: &mut LatencyRun|
         -> Result<(), BenchError> {
            check_produce(&response?)?;
            if stamp >= start_stamp + warmup_ns {
                let now = epoch.elapsed().as_nanos() as u64;
                run.ack_ns.push(now.saturating_sub(stamp));
            }
            Ok(())
        };
        loop {
            let now = Instant::now();
            if now.duration_since(start) >= spec.duration {
                break;
            }
            let due_ns = send_offset_ns(next, spec.rate_per_s, spec.batch_records);
            let due = start + Duration::from_nanos(due_ns);
            if now >= due && in_flight.len() < depth {
                let stamp = now.duration_since(epoch).as_nanos() as u64;
                run.lag_ns.push(now.duration_since(due).as_nanos() as u64);
                let batch = encode_batch(spec.batch_records, spec.value_bytes, stamp, now_ms());
                let request = produce_request(topic, 0, 1, Bytes::from(batch));
                in_flight.push_back((conn.send(&request).await?, stamp));
                next += 1;
                run.sent += spec.batch_records as u64;
                if stamp >= start_stamp + warmup_ns {
                    sent_measured += spec.batch_records as u64;
                }
                continue;
            }
            let mut timer = smol::Timer::at(due.min(start + spec.duration));
            let window_open = in_flight.len() < depth;
            let event = poll_fn(|cx| {
                if let Some((ticket, _)) = in_flight.front() {
                    if let Poll::Ready(r) = conn.poll_receive(cx, ticket) {
                        return Poll::Ready(Event::Answer(r));
                    }
                }
                if (window_open || in_flight.is_empty()) && Pin::new(&mut timer).poll(cx).is_ready()
                {
                    return Poll::Ready(Event::Due);
                }
                Poll::Pending
            })
            .await;
            if let Event::Answer(r) = event {
                if let Some((_, stamp)) = in_flight.pop_front() {
                    on_answer(r, stamp, &mut run)?;
                }
            }
        }
        while let Some((ticket, stamp)) = in_flight.pop_front() {
            let r = conn.receive(ticket).await;
            on_answer(r, stamp, &mut run)?;
        }
        let window_s = spec.duration.saturating_sub(spec.warmup).as_secs_f64();
        run.achieved_rate_per_s = sent_measured as f64 / window_s.max(1e-9);
        Ok::<LatencyRun, BenchError>(run)
    });
    // Let the consumer finish whatever happened to the producer.
    if let Ok(run) = &produced {
        sent_total.store(run.sent, Ordering::Release);
    }
    done.store(true, Ordering::Release);
    let consumed = consumer
        .join()
        .map_err(|_| BenchError::Check("consumer thread panicked".into()))?;
    let mut run = produced?;
    let (mut e2e, received) = consumed?;
    if received < run.sent {
        return Err(BenchError::Check(format!(
            "consumer received {received} of {} records",
            run.sent
        )));
    }
    e2e.sort_unstable();
    run.e2e_ns = e2e;
    run.ack_ns.sort_unstable();
    run.lag_ns.sort_unstable();
    run.received = received;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::validate_batch;

    #[test]
    fn pacing_spaces_requests_evenly_by_records() {
        // 10,000 records/s in batches of 10: one request per millisecond.
        assert_eq!(send_offset_ns(0, 10_000.0, 10), 0);
        assert_eq!(send_offset_ns(1, 10_000.0, 10), 1_000_000);
        assert_eq!(send_offset_ns(250, 10_000.0, 10), 250_000_000);
        // 50,000/s one at a time: 20 µs apart; the schedule does not drift with i.
        assert_eq!(send_offset_ns(50_000, 50_000.0, 1), 1_000_000_000);
        for i in 0..1000 {
            let gap = send_offset_ns(i + 1, 1_000.0, 1) - send_offset_ns(i, 1_000.0, 1);
            assert_eq!(gap, 1_000_000);
        }
    }

    #[test]
    fn encoded_batch_validates_and_carries_the_stamp() {
        let batch = encode_batch(3, 100, 0x0102_0304_0506_0708, 1_700_000_000_000);
        let header = validate_batch(&batch).expect("valid batch");
        assert_eq!(header.records_count, 3);
        let view = minikafka_core::record::BatchIter::new(&batch)
            .next()
            .expect("one batch")
            .expect("valid");
        for record in view.records() {
            let value = record.expect("record").value.expect("value");
            assert_eq!(value.len(), 100);
            assert_eq!(value[..8], 0x0102_0304_0506_0708u64.to_le_bytes());
        }
    }

    #[test]
    fn pre_encoded_counts_payload_only() {
        let pre = pre_encode("t", 0, 1000, 10);
        assert_eq!(pre.records, 10);
        assert_eq!(pre.payload_bytes, 10_000);
        assert!(pre.batch_bytes > 10_000, "framing is on top of the payload");
    }

    #[test]
    fn measurement_rates_divide_by_elapsed() {
        let m = Measurement {
            requests: 10,
            records: 1000,
            payload_bytes: 2_000_000,
            elapsed_s: 2.0,
        };
        assert_eq!(m.mb_per_s(), 1.0);
        assert_eq!(m.records_per_s(), 500.0);
        assert_eq!(m.requests_per_s(), 5.0);
    }
}
