//! Transactions in one partition (KIP-98's data path): the transaction ongoing per producer,
//! the last stable offset (LSO), the aborted ranges read_committed fetches need, and the rules
//! a transactional batch or a marker must pass. Pure state: the log drives it, under the same
//! append mutex as the producer table, and rebuilds it at open by replaying the log.
//!
//! Rules (Kafka's `ProducerAppendInfo`):
//! - A transactional batch of a producer with no ongoing transaction starts one at its base
//!   offset; later ones continue it. A non-transactional batch of a producer whose
//!   transaction is ongoing is INVALID_TXN_STATE.
//! - A marker (COMMIT or ABORT) ends the producer's ongoing transaction. A marker whose
//!   producer epoch is older than the producer's (as the producer table or an earlier marker
//!   knows it) is INVALID_PRODUCER_EPOCH; one whose coordinator epoch is older than an
//!   earlier marker's for that producer is TRANSACTION_COORDINATOR_FENCED. A transactional
//!   batch older than the producer's last marker epoch is INVALID_PRODUCER_EPOCH (the
//!   zombie of a bumped epoch, KIP-890).
//! - An ABORT that ends an ongoing transaction records an [`AbortedTxn`] (first offset, the
//!   marker's offset, the LSO after it); a marker with no ongoing transaction records
//!   nothing (Kafka's coordinator retries markers).
//!
//! Invariants (docs/DESIGN.md): I67 the LSO is the first offset of the oldest ongoing
//! transaction, else the high watermark, so LSO ≤ high watermark and every record below the
//! LSO belongs to a decided transaction or none; I68 the aborted ranges are exactly the
//! transactions an ABORT marker ended, in marker order.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::control_batch::{ControlType, TxnMarker};
use crate::producer::{ProducerBatch, ProducerError};
use crate::txn_index::AbortedTxn;
use crate::types::Offset;

/// Most producers whose last marker epochs are remembered (the fencing of a deposed
/// coordinator or a zombie): beyond it the lowest producer ids are forgotten, which only
/// loses that check for them, never correctness of the LSO.
pub const MAX_FENCES: usize = 10_000;

/// What the last marker of a producer said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fence {
    producer_epoch: i16,
    coordinator_epoch: i32,
}

/// The transaction state of one partition. See the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnTracker {
    /// Producer id → first offset of its ongoing transaction.
    ongoing: BTreeMap<i64, Offset>,
    /// The same, ordered by first offset (the LSO is the first of it).
    by_first: BTreeSet<(Offset, i64)>,
    /// Producer id → its last marker's epochs.
    fences: BTreeMap<i64, Fence>,
    /// Aborted transactions, in marker order (so `last_offset` ascending).
    aborted: VecDeque<AbortedTxn>,
}

impl TxnTracker {
    /// No transaction known.
    pub fn new() -> Self {
        TxnTracker::default()
    }

    /// The first offset of `producer_id`'s ongoing transaction.
    pub fn ongoing(&self, producer_id: i64) -> Option<Offset> {
        self.ongoing.get(&producer_id).copied()
    }

    /// The coordinator epoch of `producer_id`'s last marker (if remembered).
    pub fn coordinator_epoch(&self, producer_id: i64) -> Option<i32> {
        self.fences.get(&producer_id).map(|f| f.coordinator_epoch)
    }

    /// Every ongoing transaction: producer id and first offset, by producer id.
    pub fn ongoing_transactions(&self) -> impl Iterator<Item = (i64, Offset)> + '_ {
        self.ongoing.iter().map(|(p, o)| (*p, *o))
    }

    /// The first offset of the oldest ongoing transaction.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        self.by_first.first().map(|(o, _)| *o)
    }

    /// The last stable offset given the high watermark (I67).
    pub fn last_stable_offset(&self, high_watermark: Offset) -> Offset {
        #[cfg(feature = "sim-mutants")]
        if crate::mutants::active(crate::mutants::Mutant::LsoIgnoresOngoing) {
            return high_watermark;
        }
        let lso = self
            .first_unstable_offset()
            .map_or(high_watermark, |first| first.min(high_watermark));
        debug_assert!(lso <= high_watermark, "LSO ≤ high watermark (I67)");
        lso
    }

    /// Checks a data batch (before it is appended). Non-idempotent batches always pass.
    pub fn check_data(&self, batch: &ProducerBatch) -> Result<(), ProducerError> {
        if !batch.is_idempotent() {
            return Ok(());
        }
        let producer_id = batch.producer_id;
        if !batch.is_transactional && self.ongoing.contains_key(&producer_id) {
            return Err(ProducerError::InvalidTxnState { producer_id });
        }
        if let Some(fence) = self.fences.get(&producer_id) {
            if batch.is_transactional && batch.producer_epoch < fence.producer_epoch {
                return Err(ProducerError::InvalidProducerEpoch {
                    producer_id,
                    epoch: batch.producer_epoch,
                    current_epoch: Some(fence.producer_epoch),
                });
            }
        }
        Ok(())
    }

    /// Checks a marker (before it is appended) against the producer's epoch as the producer
    /// table knows it (`table_epoch`) and the earlier markers.
    pub fn check_marker(
        &self,
        table_epoch: Option<i16>,
        marker: &TxnMarker,
    ) -> Result<(), ProducerError> {
        let producer_id = marker.producer_id;
        let fence = self.fences.get(&producer_id);
        let current = match (table_epoch, fence.map(|f| f.producer_epoch)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if marker.producer_epoch < 0 || current.is_some_and(|c| marker.producer_epoch < c) {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: marker.producer_epoch,
                current_epoch: current,
            });
        }
        if let Some(fence) = fence {
            if marker.coordinator_epoch < fence.coordinator_epoch {
                return Err(ProducerError::CoordinatorFenced {
                    producer_id,
                    coordinator_epoch: marker.coordinator_epoch,
                    current: fence.coordinator_epoch,
                });
            }
        }
        Ok(())
    }

    /// Records an appended data batch at `base_offset` (after its write): a transactional one
    /// starts its producer's transaction unless one is ongoing.
    pub fn on_data(&mut self, batch: &ProducerBatch, base_offset: Offset) {
        if !batch.is_idempotent() || !batch.is_transactional || batch.is_control {
            return;
        }
        if let std::collections::btree_map::Entry::Vacant(slot) =
            self.ongoing.entry(batch.producer_id)
        {
            slot.insert(base_offset);
            self.by_first.insert((base_offset, batch.producer_id));
        }
    }

    /// Records an appended marker at `offset` (after its write): ends the producer's
    /// transaction, and returns the aborted range an ABORT of an ongoing one records (also
    /// kept here for reads).
    pub fn on_marker(&mut self, marker: &TxnMarker, offset: Offset) -> Option<AbortedTxn> {
        let producer_id = marker.producer_id;
        self.fences.insert(
            producer_id,
            Fence {
                producer_epoch: marker.producer_epoch,
                coordinator_epoch: marker.coordinator_epoch,
            },
        );
        while self.fences.len() > MAX_FENCES {
            self.fences.pop_first();
        }
        let first = self.ongoing.remove(&producer_id)?;
        self.by_first.remove(&(first, producer_id));
        if marker.control_type != ControlType::Abort {
            return None;
        }
        let after = offset.plus(1);
        let aborted = AbortedTxn {
            producer_id,
            first_offset: first.0,
            last_offset: offset.0,
            last_stable_offset: self.last_stable_offset(after).0,
        };
        self.aborted.push_back(aborted);
        Some(aborted)
    }

    /// Replaces the aborted ranges with `aborted` (at open: what the log and the `.txnindex`
    /// files say), sorted into marker order.
    pub fn set_aborted(&mut self, mut aborted: Vec<AbortedTxn>) {
        aborted.sort_by_key(|a| a.last_offset);
        self.aborted = aborted.into();
    }

    /// The aborted transactions a read of `[from, upper)` must report (Kafka's
    /// `collectAbortedTransactions`): those whose marker is at or after `from` and whose
    /// first offset is below `upper`, in marker order.
    pub fn aborted_in(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from.0);
        self.aborted
            .range(start..)
            .filter(|a| a.first_offset < upper.0)
            .copied()
            .collect()
    }

    /// Every aborted range known, in marker order.
    pub fn aborted(&self) -> impl Iterator<Item = &AbortedTxn> + '_ {
        self.aborted.iter()
    }

    /// Forgets the aborted ranges of `gone`: ABORT markers the cleaner removed after their
    /// transaction's records (I154), so no read reports a range that no marker ends (a
    /// read_committed client would skip the producer's later batches).
    pub fn forget_aborted(&mut self, gone: &[AbortedTxn]) {
        if !gone.is_empty() {
            self.aborted.retain(|a| !gone.contains(a));
        }
    }

    /// Forgets aborted ranges whose marker lies below `log_start` (their records are gone).
    pub fn drop_below(&mut self, log_start: Offset) {
        while self
            .aborted
            .front()
            .is_some_and(|a| a.last_offset < log_start.0)
        {
            self.aborted.pop_front();
        }
    }
}

/// The magic of a transaction-state checkpoint ([`TxnTracker::encode_checkpoint`]).
pub const CHECKPOINT_MAGIC: [u8; 4] = *b"MKTX";
/// Its version.
pub const CHECKPOINT_VERSION: u16 = 1;

impl TxnTracker {
    /// The ongoing transactions and marker epochs (not the aborted ranges, which live in the
    /// `.txnindex` files) as of log end `end`: magic, version u16, end i64, count u32, then
    /// (producer id i64, first offset i64) each, count u32, then (producer id i64, producer
    /// epoch i16, coordinator epoch i32) each; big-endian.
    pub fn encode_checkpoint(&self, end: Offset) -> Vec<u8> {
        let mut out = Vec::with_capacity(22 + 16 * self.ongoing.len() + 14 * self.fences.len());
        out.extend_from_slice(&CHECKPOINT_MAGIC);
        out.extend_from_slice(&CHECKPOINT_VERSION.to_be_bytes());
        out.extend_from_slice(&end.0.to_be_bytes());
        out.extend_from_slice(&(self.ongoing.len() as u32).to_be_bytes());
        for (pid, first) in &self.ongoing {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&first.0.to_be_bytes());
        }
        out.extend_from_slice(&(self.fences.len() as u32).to_be_bytes());
        for (pid, fence) in &self.fences {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&fence.producer_epoch.to_be_bytes());
            out.extend_from_slice(&fence.coordinator_epoch.to_be_bytes());
        }
        out
    }

    /// Decodes [`encode_checkpoint`](Self::encode_checkpoint)'s bytes: the log end they
    /// describe and the tracker (no aborted ranges). `None` for any damage; counts are checked
    /// against the bytes present before anything is allocated (I10).
    pub fn decode_checkpoint(bytes: &[u8]) -> Option<(Offset, TxnTracker)> {
        let mut at = 0usize;
        let mut take = |n: usize| {
            let slice = bytes.get(at..at.checked_add(n)?)?;
            at += n;
            Some(slice)
        };
        if take(4)? != CHECKPOINT_MAGIC {
            return None;
        }
        let be = |s: &[u8]| s.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        if be(take(2)?) != u64::from(CHECKPOINT_VERSION) {
            return None;
        }
        let end = Offset(be(take(8)?) as i64);
        let mut tracker = TxnTracker::new();
        let ongoing = be(take(4)?) as usize;
        for _ in 0..ongoing {
            let pid = be(take(8)?) as i64;
            let first = Offset(be(take(8)?) as i64);
            tracker.ongoing.insert(pid, first);
            tracker.by_first.insert((first, pid));
        }
        let fences = be(take(4)?) as usize;
        for _ in 0..fences {
            let pid = be(take(8)?) as i64;
            let producer_epoch = be(take(2)?) as u16 as i16;
            let coordinator_epoch = be(take(4)?) as u32 as i32;
            tracker.fences.insert(
                pid,
                Fence {
                    producer_epoch,
                    coordinator_epoch,
                },
            );
        }
        (at == bytes.len() && tracker.ongoing.len() == ongoing).then_some((end, tracker))
    }

    /// Whether nothing but aborted ranges is known (no checkpoint needed).
    pub fn has_no_live_state(&self) -> bool {
        self.ongoing.is_empty() && self.fences.is_empty()
    }
}

/// Whether the batch of `producer_id` at `offset` belongs to one of `aborted` (in marker
/// order): what compaction drops (Kafka's cleaner removes aborted transactional records).
pub fn in_aborted(aborted: &[AbortedTxn], producer_id: i64, offset: Offset) -> bool {
    let from = aborted.partition_point(|a| a.last_offset < offset.0);
    aborted[from..]
        .iter()
        .any(|a| a.producer_id == producer_id && a.first_offset <= offset.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data(pid: i64, txn: bool) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: 0,
            records_count: 1,
            is_transactional: txn,
            is_control: false,
        }
    }

    fn marker(pid: i64, commit: bool) -> TxnMarker {
        TxnMarker {
            producer_id: pid,
            producer_epoch: 0,
            coordinator_epoch: 0,
            control_type: if commit {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
        }
    }

    #[test]
    fn an_ongoing_transaction_holds_the_lso_until_its_marker() {
        let mut t = TxnTracker::new();
        t.on_data(&data(1, true), Offset(0));
        t.on_data(&data(2, false), Offset(1));
        t.on_data(&data(1, true), Offset(2));
        assert_eq!(t.last_stable_offset(Offset(3)), Offset(0));
        assert_eq!(
            t.check_data(&data(1, false)),
            Err(ProducerError::InvalidTxnState { producer_id: 1 })
        );
        let aborted = t
            .on_marker(&marker(1, false), Offset(3))
            .expect("an abort of an ongoing transaction");
        assert_eq!((aborted.first_offset, aborted.last_offset), (0, 3));
        assert_eq!(aborted.last_stable_offset, 4);
        assert_eq!(t.last_stable_offset(Offset(4)), Offset(4));
        assert_eq!(t.aborted_in(Offset(0), Offset(4)), vec![aborted]);
        assert_eq!(t.aborted_in(Offset(4), Offset(10)), vec![]);
        // A retried marker records nothing.
        assert_eq!(t.on_marker(&marker(1, false), Offset(4)), None);
    }

    proptest! {
        #[test]
        fn checkpoints_round_trip_and_damage_is_refused(
            events in proptest::collection::vec(event(), 0..40),
            cut in 0usize..200,
        ) {
            let mut t = TxnTracker::new();
            for (i, e) in events.iter().enumerate() {
                match e {
                    Event::Data { pid, txn } => t.on_data(&data(*pid, *txn), Offset(i as i64)),
                    Event::Marker { pid, commit } => {
                        t.on_marker(&marker(*pid, *commit), Offset(i as i64));
                    }
                }
            }
            let bytes = t.encode_checkpoint(Offset(77));
            let (end, back) = TxnTracker::decode_checkpoint(&bytes).expect("decodes");
            prop_assert_eq!(end, Offset(77));
            prop_assert_eq!(&back.ongoing, &t.ongoing);
            prop_assert_eq!(&back.fences, &t.fences);
            prop_assert_eq!(back.last_stable_offset(Offset(100)), t.last_stable_offset(Offset(100)));
            if cut < bytes.len() {
                prop_assert!(TxnTracker::decode_checkpoint(&bytes[..cut]).is_none());
            }
        }
    }

    #[test]
    fn a_batch_is_aborted_only_inside_its_producers_range() {
        let ranges = [
            AbortedTxn {
                producer_id: 1,
                first_offset: 0,
                last_offset: 4,
                last_stable_offset: 5,
            },
            AbortedTxn {
                producer_id: 2,
                first_offset: 2,
                last_offset: 9,
                last_stable_offset: 10,
            },
        ];
        assert!(in_aborted(&ranges, 1, Offset(3)));
        assert!(!in_aborted(&ranges, 1, Offset(5)));
        assert!(!in_aborted(&ranges, 2, Offset(1)));
        assert!(in_aborted(&ranges, 2, Offset(8)));
        assert!(!in_aborted(&ranges, 3, Offset(3)));
    }

    #[test]
    fn older_marker_epochs_and_coordinators_are_refused() {
        let mut t = TxnTracker::new();
        let mut m = marker(1, true);
        m.producer_epoch = 5;
        m.coordinator_epoch = 3;
        assert_eq!(t.check_marker(Some(5), &m), Ok(()));
        assert!(matches!(
            t.check_marker(Some(6), &m),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
        t.on_marker(&m, Offset(0));
        let mut older_coordinator = m;
        older_coordinator.coordinator_epoch = 2;
        assert!(matches!(
            t.check_marker(None, &older_coordinator),
            Err(ProducerError::CoordinatorFenced { .. })
        ));
        let mut zombie = data(1, true);
        zombie.producer_epoch = 4;
        assert!(matches!(
            t.check_data(&zombie),
            Err(ProducerError::InvalidProducerEpoch { .. })
        ));
    }

    /// An event of the model log.
    #[derive(Clone, Debug)]
    enum Event {
        Data { pid: i64, txn: bool },
        Marker { pid: i64, commit: bool },
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0i64..4, any::<bool>()).prop_map(|(pid, txn)| Event::Data { pid, txn }),
            (0i64..4, any::<bool>()).prop_map(|(pid, commit)| Event::Marker { pid, commit }),
        ]
    }

    /// The model: a transaction is the run of one producer's transactional batches after its
    /// last marker; recomputed from the whole log at every step.
    fn model(log: &[(Offset, Event)], hw: Offset) -> (Offset, Vec<(i64, i64, i64)>) {
        let mut lso = hw;
        let mut aborted = Vec::new();
        for (i, (off, e)) in log.iter().enumerate() {
            let Event::Data { pid, txn: true } = e else {
                continue;
            };
            // The first batch of a transaction: none of the producer's before it, or a marker
            // after its last transactional one.
            let prev = log[..i].iter().rev().find(|(_, prev)| {
                matches!(prev, Event::Data { pid: p, txn: true } | Event::Marker { pid: p, .. } if p == pid)
            });
            let starts = matches!(prev, None | Some((_, Event::Marker { .. })));
            if !starts {
                continue;
            }
            let end = log[i + 1..]
                .iter()
                .find(|(_, later)| matches!(later, Event::Marker { pid: p, .. } if p == pid));
            match end {
                None => lso = lso.min(*off),
                Some((m, Event::Marker { commit: false, .. })) => aborted.push((*pid, off.0, m.0)),
                Some(_) => {}
            }
        }
        aborted.sort_by_key(|a| a.2);
        (lso, aborted)
    }

    proptest! {
        #[test]
        fn the_tracker_agrees_with_the_model(events in proptest::collection::vec(event(), 0..60)) {
            let mut t = TxnTracker::new();
            let mut log: Vec<(Offset, Event)> = Vec::new();
            let mut next = Offset(0);
            for e in events {
                match &e {
                    Event::Data { pid, txn } => {
                        let b = data(*pid, *txn);
                        if t.check_data(&b).is_err() {
                            // The model log holds only accepted batches.
                            prop_assert!(!txn && t.ongoing(*pid).is_some());
                            continue;
                        }
                        t.on_data(&b, next);
                    }
                    Event::Marker { pid, commit } => {
                        let m = marker(*pid, *commit);
                        prop_assert_eq!(t.check_marker(Some(0), &m), Ok(()));
                        t.on_marker(&m, next);
                    }
                }
                log.push((next, e));
                next = next.plus(1);
                let (lso, aborted) = model(&log, next);
                prop_assert_eq!(t.last_stable_offset(next), lso);
                prop_assert!(t.last_stable_offset(next) <= next);
                let got: Vec<_> = t.aborted().map(|a| (a.producer_id, a.first_offset, a.last_offset)).collect();
                prop_assert_eq!(got, aborted);
                // Every aborted range a read of [from, next) reports overlaps it.
                for from in 0..next.0 {
                    for a in t.aborted_in(Offset(from), next) {
                        prop_assert!(a.last_offset >= from && a.first_offset < next.0);
                    }
                }
            }
        }
    }
}
