//! Preallocation of the active segment's `.log` ahead of its write position (`log.preallocate`,
//! I190): where each extension goes, and what one segment's extension stands at.
//!
//! Why: an append that grows a file makes the `fdatasync` after it commit the size change
//! through the journal; an append inside a length that already covers it does not, which on
//! ext4 makes the sync 0.69–0.72 × as long and the broker's sequential durable p50 0.84 ×
//! (docs/perf-log/2026-12-06-preallocation.md, 2026-12-06-full-length-preallocation.md).
//!
//! Contract:
//! - An extension (`fallocate` mode 0) makes the file's length run ahead of the data with
//!   zeros; the machine's `written_bytes` is the data's end (I190). The driver extends before
//!   the write that needs it, on the write's path (once per half step).
//! - Bounded: at most [`AHEAD_MAX_BYTES`] past the write position, never past
//!   `segment.bytes`; a segment that has received little extends little (the step grows
//!   with what it holds, from [`AHEAD_MIN_BYTES`]), so thousands of quiet partitions do not
//!   hold 16 MiB of zeros each.
//! - Released: a sealed segment (at the roll, with the writer idle, I28) and the active one at
//!   close are cut to their data and the cut synced.
//!
//! The machine does not see any of it: an extension changes no state of the log, so the
//! driver decides it from the writes it carries out (core's machine stays the owner of every
//! state that recovery depends on, I170).

use std::cell::Cell;
use std::ops::Range;

/// Most bytes reserved ahead of the write position.
pub const AHEAD_MAX_BYTES: u64 = 16 << 20;

/// A segment starts being extended once its data reaches this: a partition that has received
/// less gains nothing worth its cost, which is a cut per partition at a clean close and at
/// recovery after a crash (on a filesystem mounted with `discard`, each cut waits for the
/// device: thousands of quiet partitions made a restart 2–3 × slower when they were all
/// extended; docs/perf-log/2026-12-06-full-length-preallocation.md).
pub const START_AT_BYTES: u64 = 64 << 10;

/// The first step ahead: what a new or still small segment reserves.
pub const AHEAD_MIN_BYTES: u64 = 1 << 20;

/// The range to reserve once the segment's data ends at `write_end`, with
/// `reserved_to` reserved so far: `None` below [`START_AT_BYTES`] of data and while at least
/// half a step is reserved ahead. The
/// step is the segment's own size clamped to `AHEAD_MIN_BYTES..=AHEAD_MAX_BYTES`, and nothing
/// is reserved past `segment_bytes` (the roll comes first).
pub fn next_reservation(
    write_end: u64,
    reserved_to: u64,
    segment_bytes: u64,
) -> Option<Range<u64>> {
    if write_end < START_AT_BYTES {
        return None;
    }
    let step = write_end.clamp(AHEAD_MIN_BYTES, AHEAD_MAX_BYTES);
    if reserved_to >= write_end.saturating_add(step / 2) {
        return None;
    }
    let from = reserved_to.max(write_end);
    let to = write_end.saturating_add(step).min(segment_bytes);
    (to > from).then_some(from..to)
}

/// One segment `.log`'s reservation: the driver's bookkeeping, on the shard (no lock).
#[derive(Debug, Default)]
pub struct Reservation {
    reserved_to: Cell<u64>,
    in_flight: Cell<bool>,
    /// Sealed or closed: nothing more is reserved, and the file is cut to its data.
    released: Cell<bool>,
    /// A reservation failed (ENOSPC, EIO): the file is not asked again.
    failed: Cell<bool>,
}

impl Reservation {
    /// The range to reserve now, marked in flight, after a write that ends at `write_end`
    /// (`None`: enough is reserved, one is in flight, or the file is released or failed).
    pub fn start(&self, write_end: u64, segment_bytes: u64) -> Option<Range<u64>> {
        if self.in_flight.get() || self.released.get() || self.failed.get() {
            return None;
        }
        let range = next_reservation(write_end, self.reserved_to.get(), segment_bytes)?;
        self.in_flight.set(true);
        Some(range)
    }

    /// A reservation ended; returns whether the file was released meanwhile (the caller then
    /// frees what it just reserved).
    pub fn finished(&self, range: &Range<u64>, ok: bool) -> bool {
        self.in_flight.set(false);
        if ok {
            self.reserved_to.set(self.reserved_to.get().max(range.end));
        } else {
            self.failed.set(true);
        }
        self.released.get()
    }

    /// The file was cut (a torn tail's repair removes the zeros past the cut): nothing counts
    /// as reserved any more.
    pub fn forget(&self) {
        self.reserved_to.set(0);
    }

    /// Marks the file released; returns whether it is to be cut to its data now (false when
    /// nothing was ever extended, or when an extension in flight will do it).
    pub fn release(&self) -> bool {
        let first = !self.released.replace(true);
        first && !self.in_flight.get() && self.reserved_to.get() > 0
    }

    /// Bytes reserved so far (the end of the furthest reservation that succeeded).
    pub fn reserved_to(&self) -> u64 {
        self.reserved_to.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEGMENT: u64 = 1 << 30;

    #[test]
    fn a_quiet_segment_is_not_extended() {
        assert_eq!(next_reservation(0, 0, SEGMENT), None);
        assert_eq!(next_reservation(START_AT_BYTES - 1, 0, SEGMENT), None);
    }

    #[test]
    fn a_segment_reserves_the_first_step_at_the_start_and_then_waits_for_half_of_it() {
        const S: u64 = START_AT_BYTES;
        assert_eq!(
            next_reservation(S, 0, SEGMENT),
            Some(S..S + AHEAD_MIN_BYTES)
        );
        assert_eq!(
            next_reservation(S + 100, S + AHEAD_MIN_BYTES, SEGMENT),
            None
        );
        let half = AHEAD_MIN_BYTES / 2;
        assert_eq!(
            next_reservation(S + half, S + AHEAD_MIN_BYTES, SEGMENT),
            None
        );
        assert_eq!(
            next_reservation(S + half + 1, S + AHEAD_MIN_BYTES, SEGMENT),
            Some(S + AHEAD_MIN_BYTES..S + half + 1 + AHEAD_MIN_BYTES)
        );
    }

    #[test]
    fn the_step_grows_with_the_segment_up_to_the_cap() {
        let at = 4 << 20;
        assert_eq!(next_reservation(at, at, SEGMENT), Some(at..2 * at));
        let big = 100 << 20;
        assert_eq!(
            next_reservation(big, big, SEGMENT),
            Some(big..big + AHEAD_MAX_BYTES)
        );
    }

    #[test]
    fn nothing_is_reserved_past_the_segment_size() {
        let segment = 3 << 20;
        assert_eq!(
            next_reservation(START_AT_BYTES, 0, segment),
            Some(START_AT_BYTES..START_AT_BYTES + AHEAD_MIN_BYTES)
        );
        assert_eq!(
            next_reservation(2 << 20, 2 << 20, segment),
            Some((2 << 20)..segment)
        );
        assert_eq!(next_reservation(segment - 10, segment, segment), None);
        assert_eq!(next_reservation(segment, segment, segment), None);
    }

    #[test]
    fn writes_that_outran_the_reservation_reserve_from_their_end() {
        assert_eq!(
            next_reservation(5 << 20, 1 << 20, SEGMENT),
            Some((5 << 20)..(10 << 20))
        );
    }

    #[test]
    fn one_reservation_at_a_time_and_none_after_release_or_failure() {
        const S: u64 = START_AT_BYTES;
        let r = Reservation::default();
        let first = r
            .start(S, SEGMENT)
            .expect("a segment at the start reserves");
        assert_eq!(r.start(S, SEGMENT), None, "one in flight");
        assert!(!r.finished(&first, true));
        assert_eq!(r.reserved_to(), S + AHEAD_MIN_BYTES);
        assert_eq!(r.start(S + 10, SEGMENT), None, "enough ahead");
        assert!(r.release(), "cut at release");
        assert!(!r.release(), "once");
        assert_eq!(r.start(S + AHEAD_MIN_BYTES, SEGMENT), None, "released");

        let failing = Reservation::default();
        let range = failing.start(S, SEGMENT).expect("reserves");
        assert!(!failing.finished(&range, false));
        assert_eq!(
            failing.start(AHEAD_MIN_BYTES, SEGMENT),
            None,
            "not asked again"
        );
        assert!(!failing.release(), "nothing reserved, nothing to free");
    }

    #[test]
    fn a_release_during_a_reservation_is_left_to_the_reservation() {
        let r = Reservation::default();
        let range = r.start(START_AT_BYTES, SEGMENT).expect("reserves");
        assert!(
            !r.release(),
            "in flight: the reservation frees when it ends"
        );
        assert!(r.finished(&range, true), "and it is told to");
    }
}
