//! Time as a backend tells it: a point on its monotonic clock ([`MonoTime`]) and wall-clock
//! milliseconds since the Unix epoch (`i64`, as record timestamps and `now_ms` inputs are).
//!
//! Contract:
//! - Plain values: nothing here reads a clock. A backend's `now()` produces a [`MonoTime`]
//!   (real backends measure from the first clock read of the process; a simulated one can
//!   start at [`MonoTime::ZERO`] and move time itself), so a broker that asks only its
//!   backend for the time can run on virtual time.
//! - A [`MonoTime`] never goes backwards within one process and means nothing across
//!   processes or restarts (never persist one). Deadlines and drains use it; record
//!   timestamps, retention and segment age use wall-clock milliseconds, which may jump.
//! - Arithmetic saturates: a deadline too far away is "never", not an overflow panic.

use std::ops::Add;
use std::time::Duration;

/// A point on a backend's monotonic clock: the time elapsed since that clock's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MonoTime(pub Duration);

impl MonoTime {
    /// The clock's origin.
    pub const ZERO: MonoTime = MonoTime(Duration::ZERO);

    /// The time from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: MonoTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The time `duration` after this one, saturating at the largest representable time.
    pub fn saturating_add(self, duration: Duration) -> MonoTime {
        MonoTime(self.0.saturating_add(duration))
    }
}

impl Add<Duration> for MonoTime {
    type Output = MonoTime;

    /// Saturating, as [`MonoTime::saturating_add`].
    fn add(self, duration: Duration) -> MonoTime {
        self.saturating_add(duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = MonoTime(Duration::from_millis(5));
        assert_eq!(
            t + Duration::from_millis(2),
            MonoTime(Duration::from_millis(7))
        );
        assert_eq!(
            t.saturating_duration_since(MonoTime::ZERO),
            Duration::from_millis(5)
        );
        assert_eq!(MonoTime::ZERO.saturating_duration_since(t), Duration::ZERO);
        assert_eq!(t + Duration::MAX, MonoTime(Duration::MAX));
        assert!(MonoTime::ZERO < t);
    }
}
