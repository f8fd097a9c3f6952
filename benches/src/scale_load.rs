//! Load of many connections on our client (`minikafka_client`): each connection produces to,
//! or consumes from, its own share of a topic's partitions, one request in flight at a time.
//! A few driver threads (at most [`DRIVER_THREADS`]) each run their connections' tasks on
//! one executor, so 1,000 connections do not need 1,000 threads on a 2-core machine.
//!
//! Contract:
//! - Inputs: the broker's address, a topic of `partitions` partitions the caller created, and
//!   the partitions of each connection ([`shares`]).
//! - Outputs: a [`ManyResult`]: records, requests, per-request latencies (ns, sorted) and the
//!   records each partition took or gave; the clock runs from the moment every connection is
//!   connected to the last answer (connecting is outside it).
//! - Every Produce response is checked (an error code is an error, not a slower figure); every
//!   consumed batch is CRC-checked by the client and each partition's offsets must come dense
//!   from 0 (I1).
//! - Never: asserts a timing, or keeps more than one request in flight per connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use minikafka_client::{Consumer, ConsumerConfig, Offset, OffsetReset, SeekTo, TopicPartition};

use crate::error::BenchError;
use crate::kafka_workloads::{self as kw};

/// Most driver threads one load uses (the client shares the machine with the broker).
pub const DRIVER_THREADS: usize = 2;

/// What one many-connection load did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ManyResult {
    /// Requests (Produce, or consumer polls) answered.
    pub requests: u64,
    /// Records produced or consumed.
    pub records: u64,
    /// Seconds from the start signal to the last answer.
    pub elapsed_s: f64,
    /// Latency of every request, ns, ascending.
    pub latencies_ns: Vec<u64>,
    /// Records per partition (index = partition).
    pub per_partition: Vec<u64>,
}

impl ManyResult {
    /// Records per second.
    pub fn records_per_s(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.records as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    fn merge(&mut self, other: ManyResult) {
        self.requests += other.requests;
        self.records += other.records;
        self.elapsed_s = self.elapsed_s.max(other.elapsed_s);
        self.latencies_ns.extend(other.latencies_ns);
        if self.per_partition.len() < other.per_partition.len() {
            self.per_partition.resize(other.per_partition.len(), 0);
        }
        for (a, b) in self.per_partition.iter_mut().zip(other.per_partition) {
            *a += b;
        }
    }
}

/// The partitions of each of `connections` connections over `partitions` partitions: with
/// at least as many partitions, connection `i` gets every partition `p` with
/// `p % connections == i`; with fewer, connection `i` gets partition `i % partitions` alone
/// (several connections share it).
pub fn shares(partitions: i32, connections: usize) -> Vec<Vec<i32>> {
    let connections = connections.max(1);
    let partitions = partitions.max(1);
    if partitions as usize >= connections {
        (0..connections)
            .map(|i| {
                (i as i32..partitions)
                    .step_by(connections)
                    .collect::<Vec<i32>>()
            })
            .collect()
    } else {
        (0..connections)
            .map(|i| vec![(i % partitions as usize) as i32])
            .collect()
    }
}

/// Splits `items` into at most [`DRIVER_THREADS`] runs of nearly equal length.
fn per_driver<T>(items: Vec<T>) -> Vec<Vec<T>> {
    let drivers = items.len().clamp(1, DRIVER_THREADS);
    let mut out: Vec<Vec<T>> = (0..drivers).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % drivers].push(item);
    }
    out
}

/// Runs `work` for each driver's share on its own thread, all starting together once each
/// has done its own set-up; merges what they did.
fn on_drivers<T: Send + 'static>(
    items: Vec<T>,
    partitions: usize,
    work: impl Fn(Vec<T>, Arc<Barrier>) -> Result<ManyResult, BenchError> + Send + Sync + 'static,
) -> Result<ManyResult, BenchError> {
    let groups = per_driver(items);
    let barrier = Arc::new(Barrier::new(groups.len()));
    let work = Arc::new(work);
    let handles: Vec<_> = groups
        .into_iter()
        .map(|group| {
            let (barrier, work) = (Arc::clone(&barrier), Arc::clone(&work));
            std::thread::spawn(move || work(group, barrier))
        })
        .collect();
    let mut total = ManyResult {
        per_partition: vec![0; partitions],
        ..ManyResult::default()
    };
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => total.merge(r),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(BenchError::Check("load thread panicked".into()));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    total.latencies_ns.sort_unstable();
    Ok(total)
}

/// Waits at `barrier` even when set-up failed, so the other drivers are not left waiting;
/// then passes the set-up's outcome on.
fn meet<T>(barrier: &Barrier, setup: Result<T, BenchError>) -> Result<T, BenchError> {
    barrier.wait();
    setup
}

/// One connection per entry of `shares` produces `batch` (of `batch_records` records) to its
/// partitions in turn, one request in flight, acks=all, until `duration` has passed.
pub fn produce_many(
    addr: SocketAddr,
    topic: &str,
    partitions: i32,
    shares: Vec<Vec<i32>>,
    batch: Bytes,
    batch_records: u64,
    duration: Duration,
) -> Result<ManyResult, BenchError> {
    let topic = topic.to_owned();
    on_drivers(shares, partitions as usize, move |group, barrier| {
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(async {
            let setup = async {
                let mut conns = Vec::with_capacity(group.len());
                for share in &group {
                    let requests: Vec<_> = share
                        .iter()
                        .map(|&p| (p, kw::produce_request(&topic, p, -1, batch.clone())))
                        .collect();
                    conns.push((kw::connect(addr, 1).await?, requests));
                }
                Ok::<_, BenchError>(conns)
            }
            .await;
            let conns = meet(&barrier, setup)?;
            let start = Instant::now();
            let tasks: Vec<_> = conns
                .into_iter()
                .map(|(mut conn, requests)| {
                    ex.spawn(async move {
                        let mut r = ManyResult::default();
                        let mut k = 0usize;
                        while start.elapsed() < duration {
                            let (partition, request) = &requests[k % requests.len()];
                            k += 1;
                            let sent = Instant::now();
                            let response = conn.request(request).await?;
                            kw::check_produce(&response)?;
                            r.latencies_ns.push(sent.elapsed().as_nanos() as u64);
                            r.requests += 1;
                            r.records += batch_records;
                            let p = *partition as usize;
                            if r.per_partition.len() <= p {
                                r.per_partition.resize(p + 1, 0);
                            }
                            r.per_partition[p] += batch_records;
                        }
                        r.elapsed_s = start.elapsed().as_secs_f64();
                        Ok::<_, BenchError>(r)
                    })
                })
                .collect();
            let mut total = ManyResult::default();
            for t in tasks {
                total.merge(t.await?);
            }
            Ok(total)
        }))
    })
}

/// Fetch sizes of the consumers: at most 64 KiB per partition and 1 MiB per response, so
/// 1,000 consumers of one partition cannot make the broker (or the client) hold more than
/// ~64 MB of answers at once.
fn consumer_config() -> ConsumerConfig {
    ConsumerConfig {
        max_wait: Duration::from_millis(100),
        min_bytes: 1,
        max_bytes: 1 << 20,
        partition_max_bytes: 64 << 10,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    }
}

/// One consumer connection per entry of `shares` is assigned its partitions, each from
/// offset 0, and reads until it has every record `written` says the partition holds or
/// `duration` has passed. Latency is that of each poll (one Fetch).
pub fn consume_many(
    addr: SocketAddr,
    topic: &str,
    shares: Vec<Vec<i32>>,
    written: &[u64],
    duration: Duration,
) -> Result<ManyResult, BenchError> {
    let topic = topic.to_owned();
    let written: Arc<Vec<u64>> = Arc::new(written.to_vec());
    let partitions = written.len();
    on_drivers(shares, partitions, move |group, barrier| {
        let ex = smol::LocalExecutor::new();
        let written = Arc::clone(&written);
        smol::block_on(ex.run(async {
            let setup = async {
                let mut consumers = Vec::with_capacity(group.len());
                for share in &group {
                    let mut c = Consumer::new(kw::connect(addr, 1).await?, consumer_config());
                    let tps: Vec<TopicPartition> = share
                        .iter()
                        .map(|&p| TopicPartition::new(topic.clone(), p))
                        .collect();
                    c.assign(tps.clone());
                    for tp in &tps {
                        c.seek(tp, SeekTo::Offset(Offset(0)))?;
                    }
                    let want: u64 = share
                        .iter()
                        .map(|&p| written.get(p as usize).copied().unwrap_or(0))
                        .sum();
                    consumers.push((c, want));
                }
                Ok::<_, BenchError>(consumers)
            }
            .await;
            let consumers = meet(&barrier, setup)?;
            let start = Instant::now();
            let tasks: Vec<_> = consumers
                .into_iter()
                .map(|(mut c, want)| {
                    ex.spawn(async move {
                        let mut r = ManyResult::default();
                        let mut next: HashMap<i32, i64> = HashMap::new();
                        while r.records < want && start.elapsed() < duration {
                            let polled = Instant::now();
                            let records = c.poll().await?;
                            r.latencies_ns.push(polled.elapsed().as_nanos() as u64);
                            r.requests += 1;
                            for rec in &records {
                                let expect = next.entry(rec.partition).or_insert(0);
                                if rec.offset.0 != *expect {
                                    return Err(BenchError::Check(format!(
                                        "partition {} gave offset {} where {} was next (I1)",
                                        rec.partition, rec.offset.0, expect
                                    )));
                                }
                                *expect += 1;
                                r.records += 1;
                                let p = rec.partition.max(0) as usize;
                                if r.per_partition.len() <= p {
                                    r.per_partition.resize(p + 1, 0);
                                }
                                r.per_partition[p] += 1;
                            }
                        }
                        r.elapsed_s = start.elapsed().as_secs_f64();
                        Ok::<_, BenchError>(r)
                    })
                })
                .collect();
            let mut total = ManyResult::default();
            for t in tasks {
                total.merge(t.await?);
            }
            Ok(total)
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_partition_once_or_every_connection_once() {
        let s = shares(10, 3);
        assert_eq!(s, vec![vec![0, 3, 6, 9], vec![1, 4, 7], vec![2, 5, 8]]);
        let s = shares(2, 5);
        assert_eq!(s, vec![vec![0], vec![1], vec![0], vec![1], vec![0]]);
        assert_eq!(shares(1, 1), vec![vec![0]]);
        let mut all: Vec<i32> = shares(4000, 1000).into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..4000).collect::<Vec<_>>());
    }

    #[test]
    fn drivers_split_evenly_and_never_exceed_the_cap() {
        let groups = per_driver((0..7).collect::<Vec<_>>());
        assert_eq!(groups.len(), DRIVER_THREADS.min(7));
        assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 7);
        assert_eq!(per_driver(vec![1]).len(), 1);
    }

    #[test]
    fn results_merge_counts_and_partitions_and_keep_the_longest_clock() {
        let mut a = ManyResult {
            requests: 1,
            records: 10,
            elapsed_s: 1.0,
            latencies_ns: vec![5],
            per_partition: vec![10],
        };
        a.merge(ManyResult {
            requests: 2,
            records: 20,
            elapsed_s: 2.0,
            latencies_ns: vec![3],
            per_partition: vec![0, 20],
        });
        assert_eq!((a.requests, a.records, a.elapsed_s), (3, 30, 2.0));
        assert_eq!(a.per_partition, vec![10, 20]);
        assert_eq!(a.records_per_s(), 15.0);
    }
}
