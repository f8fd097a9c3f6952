//! [`AcceptBackoff`]: how long an accept loop waits after `accept` failed, and when to log.
//!
//! Contract:
//! - `accept` fails for reasons that last while nothing changes: EMFILE/ENFILE (the process or
//!   system is out of file descriptors), ENOBUFS/ENOMEM. The failed connection stays in the
//!   listen backlog, so retrying at once fails again at once: a busy loop, and a log line each
//!   time. The wait doubles from [`AcceptBackoff::FIRST`] up to [`AcceptBackoff::MAX`] while
//!   failures follow one another and starts over after one success.
//! - Logging: the first failure of a streak is logged; later ones are counted and reported
//!   when the streak ends (or every [`AcceptBackoff::LOG_EVERY`] failures), so a process over
//!   its descriptor limit writes a few lines, not a hundred a second.
//! - Pure: no clock, no I/O; the caller sleeps for the returned duration.

use std::time::Duration;

/// Back-off state of one accept loop.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AcceptBackoff {
    /// Failures in the current streak.
    failures: u64,
}

/// What to do after a failed accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterFailure {
    /// Sleep this long before accepting again.
    pub wait: Duration,
    /// Log this failure, with `failures` in the streak so far (including this one).
    pub log: Option<u64>,
}

impl AcceptBackoff {
    /// The wait after the first failure of a streak.
    pub const FIRST: Duration = Duration::from_millis(5);
    /// The longest wait: also the longest a freed descriptor goes unused.
    pub const MAX: Duration = Duration::from_millis(200);
    /// A long streak is logged again every this many failures.
    pub const LOG_EVERY: u64 = 1000;

    /// A failed accept: how long to wait, and whether to log.
    pub fn on_failure(&mut self) -> AfterFailure {
        self.failures += 1;
        let doublings = (self.failures - 1).min(16) as u32;
        let wait = Self::FIRST.saturating_mul(1 << doublings).min(Self::MAX);
        let log = (self.failures == 1 || self.failures.is_multiple_of(Self::LOG_EVERY))
            .then_some(self.failures);
        AfterFailure { wait, log }
    }

    /// A successful accept ends a streak; returns how many failures it had (0 if none), to be
    /// logged when more than one.
    pub fn on_success(&mut self) -> u64 {
        std::mem::take(&mut self.failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_and_start_over_after_a_success() {
        let mut b = AcceptBackoff::default();
        let waits: Vec<u64> = (0..8)
            .map(|_| b.on_failure().wait.as_millis() as u64)
            .collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 200, 200]);
        for _ in 0..100 {
            assert_eq!(b.on_failure().wait, AcceptBackoff::MAX);
        }
        assert_eq!(b.on_success(), 108);
        assert_eq!(b.on_success(), 0);
        assert_eq!(b.on_failure().wait, AcceptBackoff::FIRST);
    }

    #[test]
    fn a_streak_logs_its_first_failure_then_every_thousandth() {
        let mut b = AcceptBackoff::default();
        let logged: Vec<u64> = (0..2500).filter_map(|_| b.on_failure().log).collect();
        assert_eq!(logged, [1, 1000, 2000]);
    }

    #[test]
    fn a_very_long_streak_neither_overflows_nor_exceeds_the_cap() {
        let mut b = AcceptBackoff {
            failures: u64::MAX / 2,
        };
        assert_eq!(b.on_failure().wait, AcceptBackoff::MAX);
    }
}
