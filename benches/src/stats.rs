//! Summaries of repeated measurements: median, minimum and maximum.
//!
//! Contract:
//! - Input: the values of a measurement's repetitions, in any order.
//! - Output: a [`Summary`] (`None` for no values, or when any value is NaN: a NaN would make
//!   the order, and so the median, meaningless).
//! - Never: reads clocks or drops values; the median of an even count is the mean of the two
//!   middle values.
//! - [`percentile`] of latency samples is nearest-rank on sorted values: the smallest sample
//!   with at least `q` of all samples at or below it (so p99.99 of 100,000 samples is the
//!   10th largest, and p99.9 of 1,000 is the largest but one).

use serde::Serialize;

/// Median, minimum and maximum of a measurement's repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The middle value (mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values were summarized.
    pub count: usize,
}

impl Summary {
    /// Summarizes `values`; `None` when empty or when a value is NaN.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Summary {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            count: sorted.len(),
        })
    }

    /// Index in `values` of the repetition whose value is the median (for an even count, the
    /// lower middle one): lets a caller report the side figures (syncs, load) of that run.
    pub fn median_index(values: &[f64]) -> Option<usize> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        Some(order[(values.len() - 1) / 2])
    }
}

/// Nearest-rank percentile `q` (0 < q ≤ 1) of `sorted` (ascending): the value at rank
/// `ceil(q × n)`. `None` for no samples or `q` outside (0, 1].
pub fn percentile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() || !(q > 0.0 && q <= 1.0) {
        return None;
    }
    let n = sorted.len();
    // Rounding guards against 0.999 × 1000 = 998.9999…: ranks are whole numbers.
    let exact = q * n as f64;
    let rank = if (exact - exact.round()).abs() < 1e-9 {
        exact.round()
    } else {
        exact.ceil()
    };
    let rank = (rank as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 0.999), Some(100));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&v, 0.001), Some(1));
        let thousand: Vec<u64> = (1..=1000).collect();
        // 0.999 × 1000 is 998.999… in floating point: still rank 999.
        assert_eq!(percentile(&thousand, 0.999), Some(999));
        let many: Vec<u64> = (1..=100_000).collect();
        assert_eq!(percentile(&many, 0.9999), Some(99_990));
    }

    #[test]
    fn percentile_of_nothing_or_a_bad_quantile_is_none() {
        assert_eq!(percentile::<u64>(&[], 0.5), None);
        assert_eq!(percentile(&[1u64], 0.0), None);
        assert_eq!(percentile(&[1u64], 1.5), None);
        assert_eq!(percentile(&[7u64], 0.5), Some(7));
    }

    #[test]
    fn percentile_matches_a_counting_reference() {
        // Reference: the smallest sample v with count(x <= v) >= q × n.
        let mut seed = 0x9e37_79b9_u64;
        for n in 1..200usize {
            let mut v: Vec<u64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % 50
                })
                .collect();
            v.sort_unstable();
            for q in [0.5, 0.9, 0.99, 0.999] {
                let need = q * n as f64;
                let expect = *v
                    .iter()
                    .find(|&&x| v.iter().filter(|&&y| y <= x).count() as f64 >= need - 1e-9)
                    .expect("the maximum always qualifies");
                assert_eq!(percentile(&v, q), Some(expect), "n {n} q {q}");
            }
        }
    }

    #[test]
    fn odd_count_takes_the_middle_value_whatever_the_order() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).expect("non-empty");
        assert_eq!(
            s,
            Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0,
                count: 3
            }
        );
    }

    #[test]
    fn even_count_averages_the_two_middle_values() {
        let s = Summary::of(&[10.0, 4.0, 1.0, 7.0]).expect("non-empty");
        assert_eq!((s.median, s.min, s.max, s.count), (5.5, 1.0, 10.0, 4));
    }

    #[test]
    fn single_value_is_median_min_and_max() {
        let s = Summary::of(&[42.5]).expect("non-empty");
        assert_eq!((s.median, s.min, s.max), (42.5, 42.5, 42.5));
    }

    #[test]
    fn empty_or_nan_gives_none() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::median_index(&[]), None);
    }

    #[test]
    fn median_index_points_at_the_median_repetition() {
        assert_eq!(Summary::median_index(&[9.0, 1.0, 5.0]), Some(2));
        assert_eq!(Summary::median_index(&[7.0]), Some(0));
        // Even count: the lower middle value (2.0 at index 3).
        assert_eq!(Summary::median_index(&[4.0, 1.0, 8.0, 2.0]), Some(3));
    }

    #[test]
    fn median_matches_a_sort_based_reference_on_many_inputs() {
        // A simple independent reference: sort, then pick by position.
        let mut seed = 0x2545_f491_u64;
        for len in 1..40usize {
            let values: Vec<f64> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 1000) as f64
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
            let expect = if len % 2 == 1 {
                sorted[len / 2]
            } else {
                (sorted[len / 2 - 1] + sorted[len / 2]) / 2.0
            };
            let s = Summary::of(&values).expect("non-empty");
            assert_eq!(s.median, expect, "len {len}");
            assert_eq!(s.min, sorted[0]);
            assert_eq!(s.max, sorted[len - 1]);
        }
    }
}
