//! The batch accumulator: which open batch a record joins and when a batch is sealed (full
//! by count, full by bytes, or lingered). Pure: no I/O, no clock (time enters as `now`), no
//! waiting; the [`ProducerDriver`](super::ProducerDriver) carries out what it decides.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use minikafka_core::record::{BatchBuilder, NewRecord};

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

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::validate_batch;
    use minikafka_core::types::Offset;

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
}
