//! Summaries of repeated measurements: median, minimum and maximum.
//!
//! Contract:
//! - Input: the values of a measurement's repetitions, in any order.
//! - Output: a [`Summary`] (`None` for no values, or when any value is NaN: a NaN would make
//!   the order, and so the median, meaningless).
//! - Never: reads clocks or drops values; the median of an even count is the mean of the two
//!   middle values.

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

#[cfg(test)]
mod tests {
    use super::*;

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
