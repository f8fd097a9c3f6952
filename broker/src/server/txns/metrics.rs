//! One shard's transaction counters, for the Prometheus endpoint: transactions committed,
//! aborted, and aborted by the coordinator for running past their timeout. Counted by the
//! hosts of this shard only (no sharing between threads); a scrape sums the shards.

use std::cell::Cell;

use crate::metrics::snapshot::TxnCounts;

/// A shard's transaction counters (monotonic since start).
#[derive(Debug, Default)]
pub struct TxnMetrics {
    committed: Cell<u64>,
    aborted: Cell<u64>,
    timed_out: Cell<u64>,
}

impl TxnMetrics {
    /// Zero counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// One more transaction committed.
    pub fn committed(&self) {
        self.committed.set(self.committed.get() + 1);
    }

    /// One more transaction aborted.
    pub fn aborted(&self) {
        self.aborted.set(self.aborted.get() + 1);
    }

    /// One more transaction aborted by its timeout.
    pub fn timed_out(&self) {
        self.timed_out.set(self.timed_out.get() + 1);
    }

    /// The counters now, with `ongoing` as given.
    pub fn counts(&self, ongoing: u64) -> TxnCounts {
        TxnCounts {
            committed: self.committed.get(),
            aborted: self.aborted.get(),
            timed_out: self.timed_out.get(),
            ongoing,
        }
    }
}
