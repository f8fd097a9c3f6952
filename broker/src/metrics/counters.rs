//! The counters themselves: shard-local cells updated by one-line calls on the hot paths.
//!
//! Contract:
//! - A [`ShardMetrics`] belongs to one shard (its `ShardState`) and a [`SyncStats`] to one
//!   partition log; both are `!Send` cells: counting takes no lock and no atomic, and never
//!   holds a `RefCell` borrow across an `.await`.
//! - Only the shard owning a partition counts its traffic (records and bytes in on append,
//!   out on read), so summing every shard's counts counts each event once.
//! - Counters only go up while the broker runs; a removed partition's traffic series go
//!   away with it, its sync counts are kept in the shard's totals.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use minikafka_core::record::BatchHeader;

use super::histogram::{Histogram, HistogramSnapshot, APPENDS_PER_SYNC, LATENCY_SECONDS};
use super::snapshot::{ApiSnapshot, PartitionTraffic, SyncSnapshot};

/// Why a client connection was closed by the broker (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnectionError {
    /// A frame over `socket.request.max.bytes` or with a negative size.
    Frame,
    /// A request the protocol layer refused (unknown API, bad version, undecodable).
    Request,
    /// A handler asked to close (e.g. an `acks=0` produce that failed).
    Handler,
    /// Idle longer than `connections.max.idle.ms`.
    Idle,
    /// A read or write on the socket failed.
    Io,
    /// SASL authentication failed, or a request came before it (I47).
    Authentication,
    /// The TLS handshake failed or timed out (not TLS, a refused certificate).
    Tls,
    /// A request came after the SASL session expired without re-authentication (KIP-368,
    /// Kafka's `expired-connections-killed-count`).
    SessionExpired,
}

impl ConnectionError {
    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            ConnectionError::Frame => "frame",
            ConnectionError::Request => "request",
            ConnectionError::Handler => "handler",
            ConnectionError::Idle => "idle",
            ConnectionError::Io => "io",
            ConnectionError::Authentication => "authentication",
            ConnectionError::Tls => "tls",
            ConnectionError::SessionExpired => "session_expired",
        }
    }
}

/// Requests of one API: how many, how long, which error codes.
#[derive(Debug)]
struct ApiCounters {
    latency: Histogram,
    errors: BTreeMap<i16, u64>,
}

impl ApiCounters {
    fn new() -> Self {
        ApiCounters {
            latency: Histogram::new(LATENCY_SECONDS),
            errors: BTreeMap::new(),
        }
    }
}

/// One shard's counters (see the module documentation).
#[derive(Debug, Default)]
pub struct ShardMetrics {
    /// By topic, then partition (a `&str` lookup: counting allocates only for a new topic).
    traffic: RefCell<HashMap<String, BTreeMap<i32, PartitionTraffic>>>,
    apis: RefCell<BTreeMap<i16, ApiCounters>>,
    connections_accepted: Cell<u64>,
    connections_refused: Cell<u64>,
    connection_errors: RefCell<BTreeMap<ConnectionError, u64>>,
    recovery: Cell<Option<Duration>>,
    /// Sync counts of partition logs this shard closed (topic deleted), so totals never drop.
    retired_syncs: RefCell<Option<SyncSnapshot>>,
}

impl ShardMetrics {
    /// No counts yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn traffic(&self, topic: &str, partition: i32, update: impl FnOnce(&mut PartitionTraffic)) {
        let mut traffic = self.traffic.borrow_mut();
        let partitions = match traffic.get_mut(topic) {
            Some(partitions) => partitions,
            None => traffic.entry(topic.to_string()).or_default(),
        };
        update(partitions.entry(partition).or_default());
    }

    /// An append of `records` records in `bytes` bytes to a partition this shard owns.
    pub fn appended(&self, topic: &str, partition: i32, records: u64, bytes: u64) {
        self.traffic(topic, partition, |t| {
            t.records_in += records;
            t.bytes_in += bytes;
        });
    }

    /// A read of `records` records in `bytes` bytes from a partition this shard owns.
    pub fn read(&self, topic: &str, partition: i32, records: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.traffic(topic, partition, |t| {
            t.records_out += records;
            t.bytes_out += bytes;
        });
    }

    /// Forgets a removed partition's traffic.
    pub fn partition_removed(&self, topic: &str, partition: i32, syncs: SyncSnapshot) {
        let mut traffic = self.traffic.borrow_mut();
        if let Some(partitions) = traffic.get_mut(topic) {
            partitions.remove(&partition);
            if partitions.is_empty() {
                traffic.remove(topic);
            }
        }
        drop(traffic);
        let mut retired = self.retired_syncs.borrow_mut();
        match retired.as_mut() {
            Some(total) => total.merge(&syncs),
            None => *retired = Some(syncs),
        }
    }

    /// One request of API `api_key` answered (or closed) after `took`.
    pub fn request(&self, api_key: i16, took: Duration) {
        let mut apis = self.apis.borrow_mut();
        apis.entry(api_key)
            .or_insert_with(ApiCounters::new)
            .latency
            .observe_duration(took);
    }

    /// Counts every error code in `codes` (zeros, meaning no error, are skipped) against API
    /// `api_key`.
    pub fn errors(&self, api_key: i16, codes: impl IntoIterator<Item = i16>) {
        let mut apis = self.apis.borrow_mut();
        for code in codes.into_iter().filter(|&c| c != 0) {
            let api = apis.entry(api_key).or_insert_with(ApiCounters::new);
            *api.errors.entry(code).or_insert(0) += 1;
        }
    }

    /// A connection was accepted.
    pub fn connection_accepted(&self) {
        self.connections_accepted
            .set(self.connections_accepted.get() + 1);
    }

    /// A connection was refused (`max.connections` reached).
    pub fn connection_refused(&self) {
        self.connections_refused
            .set(self.connections_refused.get() + 1);
    }

    /// The broker closed a connection because of `why`.
    pub fn connection_error(&self, why: ConnectionError) {
        *self.connection_errors.borrow_mut().entry(why).or_insert(0) += 1;
    }

    /// How long this shard's startup took to open (recover) its partitions and replay its
    /// group coordinators.
    pub fn recovered(&self, took: Duration) {
        self.recovery.set(Some(took));
    }

    /// Connections accepted and refused so far.
    pub fn connection_counts(&self) -> (u64, u64) {
        (
            self.connections_accepted.get(),
            self.connections_refused.get(),
        )
    }

    /// Connection errors by reason.
    pub fn connection_errors(&self) -> Vec<(&'static str, u64)> {
        let errors = self.connection_errors.borrow();
        errors.iter().map(|(why, n)| (why.label(), *n)).collect()
    }

    /// Every partition's traffic, keyed by topic and partition.
    pub fn traffic_snapshot(&self) -> HashMap<(String, i32), PartitionTraffic> {
        let traffic = self.traffic.borrow();
        traffic
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions
                    .iter()
                    .map(move |(&p, counts)| ((topic.clone(), p), *counts))
            })
            .collect()
    }

    /// Per-API counts, by API key.
    pub fn api_snapshot(&self) -> Vec<ApiSnapshot> {
        let apis = self.apis.borrow();
        apis.iter()
            .map(|(&api_key, c)| ApiSnapshot {
                api_key,
                latency: c.latency.snapshot(),
                errors: c.errors.iter().map(|(&code, &n)| (code, n)).collect(),
            })
            .collect()
    }

    /// The startup recovery time, once known.
    pub fn recovery_time(&self) -> Option<Duration> {
        self.recovery.get()
    }

    /// Sync counts of partitions already removed.
    pub fn retired_syncs(&self) -> Option<SyncSnapshot> {
        self.retired_syncs.borrow().clone()
    }
}

/// One partition log's fsync counts: how many, how long, how many appends each covered.
#[derive(Debug)]
pub struct SyncStats {
    latency: Histogram,
    appends_per_sync: Histogram,
    failures: Cell<u64>,
    /// Appends written since the last sync began (the next sync covers them).
    unsynced_appends: Cell<u64>,
}

impl Default for SyncStats {
    fn default() -> Self {
        SyncStats {
            latency: Histogram::new(LATENCY_SECONDS),
            appends_per_sync: Histogram::new(APPENDS_PER_SYNC),
            failures: Cell::new(0),
            unsynced_appends: Cell::new(0),
        }
    }
}

impl SyncStats {
    /// No syncs yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// `n` appends reached the kernel (one write group).
    pub fn written(&self, n: u64) {
        self.unsynced_appends.set(self.unsynced_appends.get() + n);
    }

    /// A sync begins: returns how many appends it covers.
    pub fn begin(&self) -> u64 {
        self.unsynced_appends.replace(0)
    }

    /// The sync begun by [`SyncStats::begin`] (covering `appends`) ended after `took`.
    pub fn end(&self, appends: u64, took: Duration, ok: bool) {
        self.latency.observe_duration(took);
        self.appends_per_sync.observe(appends as f64);
        if !ok {
            self.failures.set(self.failures.get() + 1);
        }
    }

    /// The counts so far.
    pub fn snapshot(&self) -> SyncSnapshot {
        SyncSnapshot {
            latency: self.latency.snapshot(),
            appends_per_sync: self.appends_per_sync.snapshot(),
            failures: self.failures.get(),
        }
    }
}

/// Records in the whole batches of `bytes` (a log read), from each batch header's count;
/// stops at the first bytes that are not a whole batch header.
pub fn records_in_batches(bytes: &[u8]) -> u64 {
    let mut records = 0u64;
    let mut at = 0usize;
    while let Some(rest) = bytes.get(at..) {
        let Ok(header) = BatchHeader::parse(rest) else {
            break;
        };
        records += u64::try_from(header.records_count).unwrap_or(0);
        at = at.saturating_add(header.total_bytes());
    }
    records
}

/// An empty [`SyncSnapshot`].
pub fn no_syncs() -> SyncSnapshot {
    SyncSnapshot {
        latency: HistogramSnapshot::empty(LATENCY_SECONDS),
        appends_per_sync: HistogramSnapshot::empty(APPENDS_PER_SYNC),
        failures: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_is_counted_per_partition() {
        let m = ShardMetrics::new();
        m.appended("t", 0, 3, 100);
        m.appended("t", 0, 2, 50);
        m.read("t", 0, 5, 150);
        m.read("t", 1, 0, 0);
        let traffic = m.traffic_snapshot();
        assert_eq!(traffic.len(), 1);
        let t = &traffic[&("t".to_string(), 0)];
        assert_eq!((t.records_in, t.bytes_in), (5, 150));
        assert_eq!((t.records_out, t.bytes_out), (5, 150));
    }

    #[test]
    fn a_sync_covers_the_appends_written_before_it_began() {
        let s = SyncStats::new();
        s.written(3);
        let covered = s.begin();
        s.written(1);
        s.end(covered, Duration::from_millis(2), true);
        let snap = s.snapshot();
        assert_eq!(snap.latency.count(), 1);
        assert_eq!(snap.appends_per_sync.sum, 3.0);
        assert_eq!(s.begin(), 1);
    }

    #[test]
    fn records_are_counted_from_each_batch_header() {
        use minikafka_core::record::{BatchBuilder, NewRecord};
        use minikafka_core::types::Offset;
        let batch = |n: usize| {
            let mut b = BatchBuilder::new();
            for _ in 0..n {
                b.push(&NewRecord {
                    value: Some(b"v"),
                    ..NewRecord::default()
                });
            }
            b.build(Offset(0))
        };
        let mut bytes = batch(3);
        bytes.extend(batch(2));
        assert_eq!(records_in_batches(&bytes), 5);
        assert_eq!(records_in_batches(&bytes[..bytes.len() - 70]), 3);
        assert_eq!(records_in_batches(&[]), 0);
    }

    #[test]
    fn errors_skip_code_zero() {
        let m = ShardMetrics::new();
        m.errors(0, [0, 3, 3, 0]);
        m.request(0, Duration::from_millis(1));
        let apis = m.api_snapshot();
        assert_eq!(apis[0].errors, vec![(3, 2)]);
        assert_eq!(apis[0].latency.count(), 1);
    }
}
