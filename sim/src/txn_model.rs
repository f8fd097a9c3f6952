//! What the simulated transactional producers were promised, and the checks of what a
//! read_committed reader sees (DESIGN.md § Transactions; RELIABILITY.md § Deterministic
//! simulation soak):
//! - (a) a transaction whose EndTxn(commit) was acknowledged is committed in every partition,
//!   also after any crash (`flush.policy=fsync`);
//! - (b) a transaction never committed (no EndTxn(commit) sent, or an abort acknowledged, or
//!   fenced by the coordinator's timeout) never becomes visible; once every transactional id
//!   initialised again, nothing is left open (the last stable offset is the high watermark);
//! - (c) a read_committed reader never sees an aborted record, nor part of a transaction: below
//!   the last stable offset each transaction is, per partition, wholly visible or wholly
//!   invisible, and the same in every partition it wrote to; the LSO is at most the high
//!   watermark.
//!
//! A transaction's outcome is learnt from the broker's answers (EndTxn acknowledged), from its
//! producer (an abort, a re-initialisation, a fence) and from what readers saw; a contradiction
//! between any two is a failure.

use std::collections::{BTreeMap, BTreeSet};

/// A partition, `(topic, index)`: the same pair as `model::TopicPartition`, named here so the
/// transaction model does not import the model that holds it (I60).
type TopicPartition = (String, i32);

/// What the clients know of one transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Begun; no EndTxn sent.
    Open,
    /// EndTxn(commit) sent, its outcome unknown (unanswered, or an error answer).
    CommitSent,
    /// EndTxn(commit) acknowledged: committed everywhere, for ever (a).
    Committed,
    /// Never committed: EndTxn(abort) sent, or the producer initialised again (which aborts
    /// an open transaction), or the coordinator fenced its commit after a timeout.
    Aborted,
}

impl TxnStatus {
    /// Whether the transaction may be visible to a read_committed reader.
    fn may_commit(self) -> bool {
        matches!(self, TxnStatus::CommitSent | TxnStatus::Committed)
    }
}

/// The transactions of a run.
#[derive(Debug, Default)]
pub struct TxnModel {
    /// Per transaction (named `<transactional id>-i<incarnation>-n<serial>`): its status.
    status: BTreeMap<String, TxnStatus>,
    /// Per transactional id: its transactions, in order.
    by_id: BTreeMap<String, Vec<String>>,
    /// Per value a transactional producer sent: its transaction.
    txn_of: BTreeMap<String, String>,
    /// Per transaction: the outcome a reader saw (committed or not) and where.
    seen: BTreeMap<String, (bool, TopicPartition)>,
    /// EndTxn(commit) acknowledged.
    pub commits_acked: u64,
    /// Transactions aborted on purpose (EndTxn(abort) acknowledged).
    pub aborts_acked: u64,
    /// Commits the coordinator fenced (the transaction timed out first).
    pub timed_out: u64,
    /// Whole-partition read_committed checks done.
    pub ranges_checked: u64,
}

impl TxnModel {
    /// A transaction `txn` of `transactional_id` begins.
    pub fn begin(&mut self, transactional_id: &str, txn: &str) {
        self.status.insert(txn.to_string(), TxnStatus::Open);
        self.by_id
            .entry(transactional_id.to_string())
            .or_default()
            .push(txn.to_string());
    }

    /// `value` is sent in `txn`.
    pub fn sent(&mut self, txn: &str, value: &str) {
        self.txn_of.insert(value.to_string(), txn.to_string());
    }

    /// EndTxn is about to be sent.
    pub fn end_sent(&mut self, txn: &str, commit: bool) {
        let status = if commit {
            TxnStatus::CommitSent
        } else {
            TxnStatus::Aborted
        };
        self.status.insert(txn.to_string(), status);
    }

    /// EndTxn was acknowledged; a failure if a reader already saw the opposite.
    pub fn end_acked(&mut self, txn: &str, commit: bool) -> Result<(), String> {
        if commit {
            self.commits_acked += 1;
            self.status.insert(txn.to_string(), TxnStatus::Committed);
        } else {
            self.aborts_acked += 1;
        }
        match self.seen.get(txn) {
            Some((seen, tp)) if *seen != commit => Err(format!(
                "transaction {txn}: EndTxn({}) acknowledged, but a read_committed reader saw it \
                 {} in {tp:?}",
                if commit { "commit" } else { "abort" },
                if *seen { "committed" } else { "aborted" },
            )),
            _ => Ok(()),
        }
    }

    /// The coordinator refused `txn`'s commit as fenced: it had timed out and was aborted.
    pub fn fenced(&mut self, txn: &str) -> Result<(), String> {
        self.timed_out += 1;
        self.status.insert(txn.to_string(), TxnStatus::Aborted);
        match self.seen.get(txn) {
            Some((true, tp)) => Err(format!(
                "transaction {txn}: its commit was fenced (timed out, aborted), but a \
                 read_committed reader saw it committed in {tp:?}"
            )),
            _ => Ok(()),
        }
    }

    /// `transactional_id` initialised again: its open transactions are aborted (b); one whose
    /// commit is unanswered keeps its unknown outcome.
    pub fn reinitialised(&mut self, transactional_id: &str) -> Result<(), String> {
        for txn in self.by_id.get(transactional_id).into_iter().flatten() {
            if let Some(status) = self.status.get_mut(txn) {
                if *status == TxnStatus::Open {
                    *status = TxnStatus::Aborted;
                    if let Some((true, tp)) = self.seen.get(txn) {
                        return Err(format!(
                            "transaction {txn}: never committed, aborted on re-init, but a \
                             read_committed reader saw it in {tp:?}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A reader saw `txn` committed (`true`) or aborted in `tp`.
    fn observe(&mut self, txn: &str, committed: bool, tp: &TopicPartition) -> Result<(), String> {
        let status = self.status.get(txn).copied().unwrap_or(TxnStatus::Open);
        if committed && !status.may_commit() {
            return Err(format!(
                "{tp:?}: a read_committed reader saw transaction {txn}, which was never \
                 committed ({status:?}): an uncommitted or aborted record is visible (b, c)"
            ));
        }
        if !committed && status == TxnStatus::Committed {
            return Err(format!(
                "{tp:?}: transaction {txn} is aborted there, but its EndTxn(commit) was \
                 acknowledged (a)"
            ));
        }
        match self.seen.get(txn) {
            Some((other, other_tp)) if *other != committed => Err(format!(
                "transaction {txn}: {} in {other_tp:?} but {} in {tp:?} (not atomic, c)",
                if *other { "committed" } else { "aborted" },
                if committed { "committed" } else { "aborted" },
            )),
            Some(_) => Ok(()),
            None => {
                self.seen.insert(txn.to_string(), (committed, tp.clone()));
                Ok(())
            }
        }
    }

    /// Records a read_committed reader got from `tp`: each transactional one must belong to a
    /// transaction whose commit was sent, and commits it in the model.
    pub fn check_visible(
        &mut self,
        tp: &TopicPartition,
        records: &[(i64, String)],
    ) -> Result<(), String> {
        let txns: BTreeSet<String> = records
            .iter()
            .filter_map(|(_, v)| self.txn_of.get(v).cloned())
            .collect();
        for txn in txns {
            self.observe(&txn, true, tp)?;
        }
        Ok(())
    }

    /// A whole read of `tp`: `uncommitted` (read_uncommitted, from the log start to the high
    /// watermark `high_watermark`) and `committed` (read_committed, at least up to
    /// `stable`, the last stable offset ListOffsets answered before both reads). Below
    /// `stable` each transaction must be wholly visible or wholly invisible; `open_allowed`
    /// false (every producer initialised again) also requires `stable == high_watermark`.
    pub fn check_stable_range(
        &mut self,
        tp: &TopicPartition,
        uncommitted: &[(i64, String)],
        committed: &[(i64, String)],
        stable: i64,
        high_watermark: i64,
        open_allowed: bool,
    ) -> Result<(), String> {
        self.ranges_checked += 1;
        if stable > high_watermark {
            return Err(format!(
                "{tp:?}: last stable offset {stable} above the high watermark {high_watermark}"
            ));
        }
        if !open_allowed && stable != high_watermark {
            return Err(format!(
                "{tp:?}: last stable offset {stable} below the high watermark {high_watermark} \
                 after every transactional id initialised again: a transaction left open (b)"
            ));
        }
        self.check_visible(tp, committed)?;
        let visible: BTreeSet<(i64, &str)> =
            committed.iter().map(|(o, v)| (*o, v.as_str())).collect();
        // Per transaction below the LSO: (records visible, records in the log).
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (offset, value) in uncommitted.iter().filter(|(o, _)| *o < stable) {
            let Some(txn) = self.txn_of.get(value) else {
                continue;
            };
            let c = counts.entry(txn.clone()).or_default();
            c.1 += 1;
            if visible.contains(&(*offset, value.as_str())) {
                c.0 += 1;
            }
        }
        for (txn, (shown, stored)) in counts {
            if shown != 0 && shown != stored {
                return Err(format!(
                    "{tp:?}: a read_committed reader saw {shown} of the {stored} records of \
                     transaction {txn} below the last stable offset {stable} (part of a \
                     transaction, c)"
                ));
            }
            self.observe(&txn, shown != 0, tp)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        ("txns".to_string(), p)
    }

    fn rec(o: i64, v: &str) -> (i64, String) {
        (o, v.to_string())
    }

    fn model() -> TxnModel {
        let mut m = TxnModel::default();
        m.begin("tx-0", "a");
        m.sent("a", "a1");
        m.sent("a", "a2");
        m
    }

    #[test]
    fn an_open_transaction_seen_by_read_committed_fails() {
        let mut m = model();
        assert!(m.check_visible(&tp(0), &[rec(0, "a1")]).is_err());
    }

    #[test]
    fn part_of_a_transaction_below_the_lso_fails() {
        let mut m = model();
        m.end_sent("a", true);
        let log = [rec(0, "a1"), rec(1, "a2")];
        assert!(m
            .check_stable_range(&tp(0), &log, &[rec(0, "a1")], 3, 3, true)
            .is_err());
        m.check_stable_range(&tp(0), &log, &log, 3, 3, true)
            .expect("whole");
    }

    #[test]
    fn committed_in_one_partition_aborted_in_another_fails() {
        let mut m = model();
        m.end_sent("a", true);
        m.check_stable_range(&tp(0), &[rec(0, "a1")], &[rec(0, "a1")], 2, 2, true)
            .expect("committed in 0");
        assert!(m
            .check_stable_range(&tp(1), &[rec(0, "a2")], &[], 2, 2, true)
            .is_err());
    }

    #[test]
    fn an_acknowledged_commit_aborted_fails() {
        let mut m = model();
        m.end_sent("a", true);
        m.end_acked("a", true).expect("ack");
        assert!(m
            .check_stable_range(&tp(0), &[rec(0, "a1")], &[], 2, 2, true)
            .is_err());
        // Above the LSO nothing is decided yet.
        let mut m = model();
        m.end_sent("a", true);
        m.end_acked("a", true).expect("ack");
        m.check_stable_range(&tp(0), &[rec(0, "a1")], &[], 0, 2, true)
            .expect("still open there");
    }

    #[test]
    fn lso_above_hw_or_left_open_after_reinit_fails() {
        let mut m = model();
        assert!(m.check_stable_range(&tp(0), &[], &[], 3, 2, true).is_err());
        assert!(m.check_stable_range(&tp(0), &[], &[], 1, 2, false).is_err());
    }

    #[test]
    fn reinit_aborts_open_but_not_unanswered_commits() {
        let mut m = model();
        m.begin("tx-0", "b");
        m.sent("b", "b1");
        m.end_sent("b", true);
        m.reinitialised("tx-0").expect("reinit");
        assert!(
            m.check_visible(&tp(0), &[rec(0, "a1")]).is_err(),
            "a aborted"
        );
        m.check_visible(&tp(0), &[rec(2, "b1")])
            .expect("b may have committed");
    }
}
