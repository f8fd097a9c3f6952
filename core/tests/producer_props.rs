//! Property tests of `core::producer` against a simple reference model.
//!
//! The model keeps every producer's whole history of the current epoch in a `Vec` and applies
//! Kafka's rules literally (duplicate = one of the last five batches of the epoch, next
//! sequence by modular arithmetic, least recently appended evicted). Random runs of appends,
//! retries of old batches, epoch bumps, stale epochs, sequences near `i32::MAX`, clock ticks
//! and snapshot round trips must get the same decision from both, with the same offsets for
//! duplicates.

use std::collections::HashMap;

use minikafka_core::producer::{
    Decision, ProducerBatch, ProducerLimits, ProducerStateTable, SnapshotError,
};
use minikafka_core::types::Offset;
use proptest::prelude::*;

const LIMITS: ProducerLimits = ProducerLimits {
    max_producers: 3,
    producer_id_expiration_ms: 1_000,
};

/// One appended batch in the model: (first seq, last seq, base offset, last offset).
type ModelBatch = (i32, i32, i64, i64);

#[derive(Clone, Debug)]
struct ModelProducer {
    epoch: i16,
    history: Vec<ModelBatch>,
    last_update_ms: i64,
    last_append: u64,
}

#[derive(Default)]
struct Model {
    producers: HashMap<i64, ModelProducer>,
    appends: u64,
}

/// The model's answer: `Ok(None)` not idempotent, `Ok(Some(None))` append,
/// `Ok(Some(Some((base, last))))` duplicate, `Err(code)`.
type Answer = Result<Option<Option<(i64, i64)>>, i16>;

fn wrap_add(seq: i32, delta: i64) -> i32 {
    ((i64::from(seq) + delta) % (i64::from(i32::MAX) + 1)) as i32
}

impl Model {
    fn live(&self, pid: i64, now_ms: i64) -> Option<&ModelProducer> {
        self.producers
            .get(&pid)
            .filter(|p| now_ms - p.last_update_ms < LIMITS.producer_id_expiration_ms)
    }

    fn decide(&self, b: &ProducerBatch, now_ms: i64) -> Answer {
        if b.producer_id < 0 {
            return Ok(None);
        }
        let last_seq = wrap_add(b.base_sequence, i64::from(b.records_count) - 1);
        let Some(p) = self.live(b.producer_id, now_ms) else {
            return Ok(Some(None));
        };
        if b.producer_epoch < p.epoch {
            return Err(47);
        }
        if b.producer_epoch > p.epoch {
            return if b.base_sequence == 0 {
                Ok(Some(None))
            } else {
                Err(45)
            };
        }
        let recent = p.history.iter().rev().take(5);
        for &(first, last, base, last_offset) in recent {
            if first == b.base_sequence && last == last_seq {
                return Ok(Some(Some((base, last_offset))));
            }
        }
        let (_, last, _, _) = *p.history.last().expect("history is never empty");
        if b.base_sequence == wrap_add(last, 1) {
            Ok(Some(None))
        } else {
            Err(45)
        }
    }

    fn appended(&mut self, b: &ProducerBatch, base: i64, last: i64, now_ms: i64) {
        let last_seq = wrap_add(b.base_sequence, i64::from(b.records_count) - 1);
        self.appends += 1;
        let fresh = match self.live(b.producer_id, now_ms) {
            Some(p) => p.epoch != b.producer_epoch,
            None => true,
        };
        let is_new = !self.producers.contains_key(&b.producer_id);
        let p = self
            .producers
            .entry(b.producer_id)
            .or_insert_with(|| ModelProducer {
                epoch: b.producer_epoch,
                history: Vec::new(),
                last_update_ms: now_ms,
                last_append: 0,
            });
        if fresh {
            p.epoch = b.producer_epoch;
            p.history.clear();
        }
        p.history.push((b.base_sequence, last_seq, base, last));
        p.last_update_ms = now_ms;
        p.last_append = self.appends;
        if is_new && self.producers.len() > LIMITS.max_producers {
            let oldest = self
                .producers
                .iter()
                .min_by_key(|(_, p)| p.last_append)
                .map(|(pid, _)| *pid)
                .expect("non-empty");
            self.producers.remove(&oldest);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// The next batch in sequence for the producer's current epoch.
    Next { pid: i64, count: i32 },
    /// Re-send the batch `back` places from the end of everything this producer sent.
    Retry { pid: i64, back: usize },
    /// Epoch + 1, starting at `seq` (0 is valid).
    Bump { pid: i64, seq: i32 },
    /// Arbitrary fields.
    Random {
        pid: i64,
        epoch: i16,
        seq: i32,
        count: i32,
    },
    /// A batch starting just below `i32::MAX` (wraps when the count is large enough).
    NearWrap { pid: i64, below: i32, count: i32 },
    /// Time passes.
    Tick { ms: i64 },
    /// Encode a snapshot and continue with the decoded table.
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    let pid = -1i64..5;
    prop_oneof![
        6 => (pid.clone(), 1i32..4).prop_map(|(pid, count)| Op::Next { pid, count }),
        4 => (pid.clone(), 0usize..8).prop_map(|(pid, back)| Op::Retry { pid, back }),
        1 => (pid.clone(), prop_oneof![Just(0), 0i32..3]).prop_map(|(pid, seq)| Op::Bump { pid, seq }),
        1 => (pid.clone(), 0i16..3, 0i32..12, 1i32..3)
            .prop_map(|(pid, epoch, seq, count)| Op::Random { pid, epoch, seq, count }),
        1 => (pid, 0i32..3, 1i32..4).prop_map(|(pid, below, count)| Op::NearWrap { pid, below, count }),
        1 => (0i64..700).prop_map(|ms| Op::Tick { ms }),
        1 => Just(Op::Snapshot),
    ]
}

fn batch(pid: i64, epoch: i16, seq: i32, count: i32) -> ProducerBatch {
    ProducerBatch {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        records_count: count,
        is_transactional: false,
        is_control: false,
    }
}

fn answer(decision: Result<Decision, i16>) -> Answer {
    match decision {
        Ok(Decision::NotIdempotent) => Ok(None),
        Ok(Decision::Append) => Ok(Some(None)),
        Ok(Decision::Duplicate(m)) => Ok(Some(Some((m.base_offset.0, m.last_offset.0)))),
        Err(code) => Err(code),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The table decides like the model for every batch, duplicates carry the original
    /// offsets, memory stays within the cap, and a snapshot round trip changes nothing.
    #[test]
    fn table_matches_reference_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut table = ProducerStateTable::new(LIMITS);
        let mut model = Model::default();
        // What each producer sent, all epochs, in order (for retries).
        let mut sent: HashMap<i64, Vec<ProducerBatch>> = HashMap::new();
        let mut epochs: HashMap<i64, i16> = HashMap::new();
        let mut next_seq: HashMap<i64, i32> = HashMap::new();
        let mut now_ms = 0i64;
        let mut next_offset = 0i64;
        let mut log: Vec<(ProducerBatch, i64, i64, i64)> = Vec::new();
        for op in ops {
            let b = match op {
                Op::Tick { ms } => { now_ms += ms; continue; }
                Op::Snapshot => {
                    let bytes = table.encode_snapshot(Offset(next_offset));
                    let (offset, back) = ProducerStateTable::decode_snapshot(&bytes, LIMITS)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(offset, Offset(next_offset));
                    let before: Vec<_> = table.producers_by_recency().map(|(p, e)| (p, e.clone())).collect();
                    let after: Vec<_> = back.producers_by_recency().map(|(p, e)| (p, e.clone())).collect();
                    prop_assert_eq!(before, after);
                    table = back;
                    continue;
                }
                Op::Next { pid, count } => {
                    let epoch = *epochs.get(&pid).unwrap_or(&0);
                    let seq = *next_seq.get(&pid).unwrap_or(&0);
                    batch(pid, epoch, seq, count)
                }
                Op::Retry { pid, back } => {
                    let Some(list) = sent.get(&pid) else { continue };
                    let Some(b) = list.iter().rev().nth(back) else { continue };
                    *b
                }
                Op::Bump { pid, seq } => {
                    let epoch = epochs.get(&pid).map_or(0, |e| e + 1);
                    batch(pid, epoch, seq, 1)
                }
                Op::Random { pid, epoch, seq, count } => batch(pid, epoch, seq, count),
                Op::NearWrap { pid, below, count } => {
                    let epoch = *epochs.get(&pid).unwrap_or(&0);
                    batch(pid, epoch, i32::MAX - below, count)
                }
            };
            let got = answer(table.check_append(&b, now_ms).map_err(|e| e.kafka_error_code().code()));
            let want = model.decide(&b, now_ms);
            prop_assert_eq!(got, want, "batch {:?} at {}", b, now_ms);
            sent.entry(b.producer_id).or_default().push(b);
            if got == Ok(Some(None)) || got == Ok(None) {
                let base = next_offset;
                let last = base + i64::from(b.records_count) - 1;
                next_offset = last + 1;
                if got == Ok(Some(None)) {
                    table.on_appended(&b, Offset(base), Offset(last), now_ms, now_ms);
                    model.appended(&b, base, last, now_ms);
                    log.push((b, base, last, now_ms));
                    epochs.insert(b.producer_id, b.producer_epoch);
                    next_seq.insert(b.producer_id, b.last_sequence().wrapping_add(1).max(0));
                }
            }
            prop_assert!(table.len() <= LIMITS.max_producers);
            prop_assert_eq!(table.len(), model.producers.len());
        }
        // Replaying the appended batches in order rebuilds the same state (as at startup).
        let mut replayed = ProducerStateTable::new(LIMITS);
        for (b, base, last, at) in &log {
            replayed.on_appended(b, Offset(*base), Offset(*last), *at, *at);
        }
        let live: Vec<_> = table.producers_by_recency().map(|(p, e)| (p, e.clone())).collect();
        let rebuilt: Vec<_> = replayed.producers_by_recency().map(|(p, e)| (p, e.clone())).collect();
        prop_assert_eq!(live, rebuilt);
    }

    /// Any damage to a snapshot (a flipped bit anywhere, a cut) is refused, never a panic or
    /// a silently different table.
    #[test]
    fn damaged_snapshots_are_refused(
        producers in 0i64..6,
        flip_at in any::<proptest::sample::Index>(),
        bit in 0u8..8,
        cut_at in any::<proptest::sample::Index>(),
    ) {
        let mut table = ProducerStateTable::new(ProducerLimits::default());
        let mut offset = 0i64;
        for pid in 0..producers {
            for seq in 0..(pid as i32 + 1) {
                let b = batch(pid, 1, seq, 1);
                table.on_appended(&b, Offset(offset), Offset(offset), 5, 5);
                offset += 1;
            }
        }
        let bytes = table.encode_snapshot(Offset(offset));
        let mut flipped = bytes.clone();
        let i = flip_at.index(flipped.len());
        flipped[i] ^= 1 << bit;
        prop_assert!(ProducerStateTable::decode_snapshot(&flipped, ProducerLimits::default()).is_err());
        let cut = cut_at.index(bytes.len());
        let err = ProducerStateTable::decode_snapshot(&bytes[..cut], ProducerLimits::default()).err();
        let refused = matches!(err, Some(SnapshotError::TooShort { .. }) | Some(SnapshotError::Checksum));
        prop_assert!(refused, "a cut snapshot was not refused: {:?}", err);
    }
}
