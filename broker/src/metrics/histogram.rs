//! Fixed-bucket histograms, shard-local: observing is a few `Cell` updates, no lock, no
//! allocation; a scrape takes a [`HistogramSnapshot`] (plain numbers, `Send`) and sums the
//! snapshots of every shard.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds (seconds) for request and fsync latencies: 50 µs to 10 s.
pub const LATENCY_SECONDS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

/// Upper bounds for how many appends one fsync covered (group commit).
pub const APPENDS_PER_SYNC: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// A histogram with fixed upper bounds; the last bucket is `+Inf`.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound plus the `+Inf` bucket (not cumulative).
    buckets: Box<[Cell<u64>]>,
    sum: Cell<f64>,
}

impl Histogram {
    /// An empty histogram with these ascending upper bounds.
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| Cell::new(0)).collect(),
            sum: Cell::new(0.0),
        }
    }

    /// Records one value.
    pub fn observe(&self, value: f64) {
        let index = self.bounds.partition_point(|&bound| bound < value);
        let bucket = &self.buckets[index];
        bucket.set(bucket.get() + 1);
        self.sum.set(self.sum.get() + value);
    }

    /// Records one duration, in seconds.
    pub fn observe_duration(&self, duration: Duration) {
        self.observe(duration.as_secs_f64());
    }

    /// The counts so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            buckets: self.buckets.iter().map(Cell::get).collect(),
            sum: self.sum.get(),
        }
    }

    /// Adds a snapshot's counts to this histogram (same bounds; used to keep the counts of a
    /// partition that was removed, so shard totals never go down).
    pub fn absorb(&self, other: &HistogramSnapshot) {
        if other.bounds != self.bounds {
            return;
        }
        for (bucket, n) in self.buckets.iter().zip(&other.buckets) {
            bucket.set(bucket.get() + n);
        }
        self.sum.set(self.sum.get() + other.sum);
    }
}

/// A histogram's counts at one moment: what crosses shards on a scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// The upper bounds.
    pub bounds: &'static [f64],
    /// Per-bucket counts (not cumulative), the last being `+Inf`.
    pub buckets: Vec<u64>,
    /// Sum of every observed value.
    pub sum: f64,
}

impl HistogramSnapshot {
    /// An empty snapshot with these bounds.
    pub fn empty(bounds: &'static [f64]) -> Self {
        HistogramSnapshot {
            bounds,
            buckets: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds `other`'s counts (ignored unless the bounds are the same).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if other.bounds != self.bounds {
            return;
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.sum += other.sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 2.0, 3.0] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![2, 2, 1]);
        assert_eq!(s.count(), 5);
        assert_eq!(s.sum, 8.0);
    }

    #[test]
    fn merging_adds_counts_and_sums() {
        let a = Histogram::new(APPENDS_PER_SYNC);
        a.observe(3.0);
        let mut total = HistogramSnapshot::empty(APPENDS_PER_SYNC);
        total.merge(&a.snapshot());
        total.merge(&a.snapshot());
        assert_eq!(total.count(), 2);
        assert_eq!(total.sum, 6.0);
        a.absorb(&total);
        assert_eq!(a.snapshot().count(), 3);
    }
}
