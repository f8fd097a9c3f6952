//! Transaction markers in a cleaning: when a COMMIT or ABORT marker may go (Kafka's
//! `CleanedTransactionMetadata` and KIP-534's delete horizon).
//!
//! Contract: [`MarkerPass`] is fed every batch a cleaning reads below its pass end, in offset
//! order from the log's first batch: [`MarkerPass::on_data`] after a transactional data batch
//! was filtered (did any of it survive?), [`MarkerPass::on_marker`] at a marker, which answers
//! what becomes of it ([`MarkerVerdict`]). Pure: `now_ms` is a value; no I/O.
//!
//! The rules (I154):
//! 1. A marker stays as it is while any batch of its transaction survives the pass: a reader
//!    needs it to end the transaction (an ABORT tells a read_committed reader to stop
//!    skipping the producer's batches). The transactional data batches of a producer read
//!    since its previous marker are that transaction's (a producer has one transaction at a
//!    time in a partition, and its marker follows its data).
//! 2. A marker whose transaction has no batch left after the pass is stamped with a delete
//!    horizon, `now + delete.retention.ms`, written into the batch (attribute bit 0x40, the
//!    base timestamp; [`crate::record::stamp_delete_horizon`]), so the horizon survives
//!    restarts and every later pass agrees on it.
//! 3. A stamped marker is removed by a pass that reads no batch of its transaction at all
//!    and runs at or after its horizon; an ABORT's aborted-transaction index entry goes with
//!    it (the broker drops it from the `.txnindex` and from memory).
//!
//! Why the horizon: a consumer that fetched the transaction's data before the cleaning still
//! finds the marker for `delete.retention.ms` (as it finds a tombstone). Why rule 3 asks for
//! a pass that read no data at all, rather than the stamping pass: the pass that drops the
//! last data may fail before every group of it is swapped in; only a later pass that finds
//! none proves the data gone for good, so a marker never leaves transactional data behind
//! (which a replay of the log would take for an open transaction, holding the LSO).

use std::collections::HashMap;

/// What becomes of one marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerVerdict {
    /// Batches of its transaction survive this pass: kept as it is.
    Keep,
    /// Nothing of its transaction is left and it has no horizon yet: kept, rewritten with
    /// this delete horizon.
    Stamp(i64),
    /// Stamped with this horizon, which has not passed (or this pass still dropped data of
    /// its transaction): kept as it is.
    Wait(i64),
    /// Stamped, its horizon passed, no data of its transaction read: removed.
    Remove,
}

impl MarkerVerdict {
    /// The horizon a kept marker waits for (the log is due for cleaning again then).
    pub fn pending_horizon(self) -> Option<i64> {
        match self {
            MarkerVerdict::Stamp(h) | MarkerVerdict::Wait(h) => Some(h),
            MarkerVerdict::Keep | MarkerVerdict::Remove => None,
        }
    }
}

/// The transactions a cleaning pass has read data of and not yet seen the marker of. See
/// the module documentation.
#[derive(Clone, Debug, Default)]
pub struct MarkerPass {
    /// Producer id → whether any batch of its current transaction survives the pass.
    open: HashMap<i64, bool>,
}

impl MarkerPass {
    /// A pass at the log's first batch.
    pub fn new() -> Self {
        MarkerPass::default()
    }

    /// Records a transactional data batch of `producer_id` read by the pass; `survives`:
    /// any of its records is written back.
    pub fn on_data(&mut self, producer_id: i64, survives: bool) {
        let any = self.open.entry(producer_id).or_insert(false);
        *any |= survives;
    }

    /// Decides on the marker of `producer_id` (which ends the transaction the batches since
    /// its previous marker belong to), given the horizon its batch carries, the time of the
    /// pass and `delete.retention.ms`.
    pub fn on_marker(
        &mut self,
        producer_id: i64,
        delete_horizon_ms: Option<i64>,
        now_ms: i64,
        delete_retention_ms: i64,
    ) -> MarkerVerdict {
        let data = self.open.remove(&producer_id);
        if data == Some(true) {
            return MarkerVerdict::Keep;
        }
        match delete_horizon_ms {
            None => MarkerVerdict::Stamp(now_ms.saturating_add(delete_retention_ms.max(0))),
            Some(horizon) if horizon <= now_ms && data.is_none() => MarkerVerdict::Remove,
            Some(horizon) => MarkerVerdict::Wait(horizon),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_three_steps() {
        let mut pass = MarkerPass::new();
        pass.on_data(7, false);
        pass.on_data(7, true);
        assert_eq!(pass.on_marker(7, None, 100, 10), MarkerVerdict::Keep);
        // Its last data dropped by this pass: stamped at once.
        pass.on_data(7, false);
        assert_eq!(pass.on_marker(7, None, 100, 10), MarkerVerdict::Stamp(110));
        // No data read: waits for its horizon, then goes.
        assert_eq!(
            pass.on_marker(7, Some(110), 109, 10),
            MarkerVerdict::Wait(110)
        );
        assert_eq!(pass.on_marker(7, Some(110), 110, 10), MarkerVerdict::Remove);
        // Stamped, past its horizon, but this pass still read its data: not yet.
        pass.on_data(7, false);
        assert_eq!(
            pass.on_marker(7, Some(110), 500, 10),
            MarkerVerdict::Wait(110)
        );
        // Other producers' data does not hold a marker.
        pass.on_data(8, true);
        assert_eq!(pass.on_marker(7, Some(110), 500, 10), MarkerVerdict::Remove);
        assert_eq!(pass.on_marker(8, None, 500, 10), MarkerVerdict::Keep);
    }

    #[test]
    fn a_stamped_marker_keeps_its_record_and_timestamp() {
        use crate::control_batch::{decode_marker, encode_marker, ControlType, TxnMarker};
        use crate::record::{
            stamp_delete_horizon, validate_batch_with, BatchIter, ValidateOptions,
        };
        let marker = TxnMarker {
            producer_id: 42,
            producer_epoch: 3,
            coordinator_epoch: 9,
            control_type: ControlType::Abort,
        };
        let bytes = encode_marker(&marker, 1_000);
        let stamped = stamp_delete_horizon(&bytes, 86_401_000).expect("uncompressed");
        let header = validate_batch_with(&stamped, ValidateOptions::stored()).expect("valid");
        assert_eq!(header.delete_horizon_ms(), Some(86_401_000));
        assert_eq!(header.max_timestamp, 1_000);
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(decode_marker(&stamped), Ok(marker));
        let view = BatchIter::new(&stamped)
            .next()
            .expect("one")
            .expect("valid");
        let record = view.records().next().expect("one").expect("record");
        assert_eq!(header.base_timestamp + record.timestamp_delta, 1_000);
        assert_eq!(
            validate_batch_with(&bytes, ValidateOptions::stored())
                .expect("valid")
                .delete_horizon_ms(),
            None
        );
    }

    /// One entry of a modelled log.
    #[derive(Clone, Debug)]
    enum Entry {
        /// A transactional data batch: producer, transaction number.
        Data(i64, usize),
        /// A marker: producer, transaction number, horizon.
        Marker(i64, usize, Option<i64>),
    }

    /// A log of transactions of 3 producers: each transaction `(producer, batches)` writes
    /// its batches then its marker, interleaved with the others by the given order.
    fn log_of(txns: &[(i64, usize)]) -> Vec<Entry> {
        let mut log = Vec::new();
        for (n, (producer, batches)) in txns.iter().enumerate() {
            for _ in 0..*batches {
                log.push(Entry::Data(*producer, n));
            }
            log.push(Entry::Marker(*producer, n, None));
        }
        log
    }

    proptest! {
        /// Over passes that drop data batches at random as time goes on (a pass may also
        /// fail part-way, keeping what it dropped after a point): no marker ever leaves data
        /// of its transaction behind; a removed marker was first found alone at least
        /// `delete.retention.ms` before; and once all data is gone, two passes past the
        /// retention remove every marker (I154).
        #[test]
        fn markers_never_outlive_their_data_nor_go_early(
            txns in prop::collection::vec((0i64..3, 0usize..3), 1..12),
            passes in prop::collection::vec(
                (prop::collection::vec(any::<bool>(), 40), 0i64..30, prop::option::of(0usize..40)),
                1..8,
            ),
            retention in 0i64..20,
        ) {
            let mut log = log_of(&txns);
            let mut now = 0i64;
            // Transaction → the time a pass first found its marker alone.
            let mut alone_since: HashMap<usize, i64> = HashMap::new();
            let mut run = |log: &mut Vec<Entry>, drops: &[bool], now: i64, fail_at: Option<usize>| -> Result<(), TestCaseError> {
                let mut pass = MarkerPass::new();
                let mut out = Vec::new();
                for (i, entry) in log.iter().enumerate() {
                    // A failed pass keeps the rest of the log as it was.
                    if fail_at.is_some_and(|f| i >= f) {
                        out.push(entry.clone());
                        continue;
                    }
                    match *entry {
                        Entry::Data(p, n) => {
                            let survives = !drops.get(i).copied().unwrap_or(false);
                            pass.on_data(p, survives);
                            if survives {
                                out.push(Entry::Data(p, n));
                            }
                        }
                        Entry::Marker(p, n, horizon) => {
                            match pass.on_marker(p, horizon, now, retention) {
                                MarkerVerdict::Keep => out.push(entry.clone()),
                                MarkerVerdict::Stamp(h) => {
                                    prop_assert_eq!(h, now + retention);
                                    alone_since.entry(n).or_insert(now);
                                    out.push(Entry::Marker(p, n, Some(h)));
                                }
                                MarkerVerdict::Wait(_) => out.push(entry.clone()),
                                MarkerVerdict::Remove => {
                                    let since = alone_since.get(&n).copied();
                                    prop_assert!(since.is_some_and(|s| s + retention <= now),
                                        "txn {} removed at {} though alone since {:?}", n, now, since);
                                }
                            }
                        }
                    }
                }
                // No data batch without its marker after it.
                for (i, entry) in out.iter().enumerate() {
                    if let Entry::Data(p, n) = entry {
                        prop_assert!(out[i..].iter().any(|e| matches!(e, Entry::Marker(q, m, _) if q == p && m == n)),
                            "data of txn {} left without its marker", n);
                    }
                }
                *log = out;
                Ok(())
            };
            for (drops, advance, fail_at) in &passes {
                now += advance;
                run(&mut log, drops, now, *fail_at)?;
            }
            // Liveness: drop all data, then two passes past the horizon leave no marker.
            let all = vec![true; log.len()];
            run(&mut log, &all, now, None)?;
            run(&mut log, &all, now + retention, None)?;
            now += retention;
            run(&mut log, &all, now + retention + 1, None)?;
            prop_assert!(log.is_empty(), "left: {:?}", log);
        }
    }
}
