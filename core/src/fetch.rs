//! Plan a fetch from one segment, starting at an index floor.
//!
//! Contract:
//! - Inputs: the target offset, the segment's base offset, the index floor to start at, a
//!   snapshot of the segment's size taken before planning (I2: bytes below it never change
//!   and were validated, I3), the response's `max_bytes`; then windows of segment bytes that
//!   the caller read where [`FetchPlanner::next_step`] asked.
//! - Outputs: [`FetchStep::Need`] (read these bytes and [`feed`](FetchPlanner::feed) them) until
//!   [`FetchStep::Done`] with a [`FetchPlan`]: the byte range to send and the offset to fetch
//!   next. Drive it as: loop { match `next_step()` { Need → read, `feed`; Done → stop } }.
//! - Never: performs I/O, allocates (least of all from a header's length, I10), loops without
//!   progress (every header consumed advances the position by at least
//!   [`record::HEADER_BYTES`](crate::record::HEADER_BYTES), and a `feed` that cannot consume one
//!   is an error), reads at or past the size snapshot, or panics on segment bytes.
//!
//! The unit is the batch (Kafka sends whole batches): batches whose last offset is below the
//! target are skipped; the first batch whose last offset reaches the target starts the range;
//! following batches are added while the [`FetchBudget`] admits them. Only headers are read;
//! batch bodies are sent without being looked at.
//!
//! # The fetch budget
//!
//! One rule decides how many bytes a fetch returns, both inside one segment ([`FetchPlanner`])
//! and across the partitions of one Fetch response (the broker's handler, with
//! [`fit_batches`]): a [`FetchBudget`] of `max_bytes` admits whole batches while they fit
//! what is left, except that **the first batch is always admitted whole**, even when larger
//! than the budget, so an oversized batch cannot wedge a consumer (Kafka's rule). A response
//! shares one budget across its partitions, so only the first batch of the first non-empty
//! partition is exempt.

use crate::record::{peek_extent, BatchError, BatchHeader, HEADER_BYTES, LOG_OVERHEAD};
use crate::types::{FilePos, Offset};

/// Why planning failed. Bytes below the size snapshot were validated before they were
/// written (I3), so every variant but [`FetchError::WindowMismatch`] means corruption.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// A batch header below the size snapshot failed to parse.
    #[error("corrupt batch header at {pos}: {source}")]
    BadHeader {
        /// Where the header starts.
        pos: FilePos,
        /// What the parser found.
        source: BatchError,
    },
    /// A batch's extent runs past the size snapshot.
    #[error("batch at {pos} of {total_bytes} bytes runs past the segment end {end}")]
    BatchPastEnd {
        /// Where the batch starts.
        pos: FilePos,
        /// The batch's declared total size.
        total_bytes: u64,
        /// The size snapshot.
        end: FilePos,
    },
    /// A batch's base offset is below the segment's base or the previous batch's next offset.
    #[error("batch at {pos} has base offset {base_offset}, expected at least {expected_at_least}")]
    OffsetOutOfOrder {
        /// Where the batch starts.
        pos: FilePos,
        /// The batch's base offset.
        base_offset: Offset,
        /// The smallest base offset it could legally have.
        expected_at_least: Offset,
    },
    /// The window fed does not hold the header the planner asked for (a caller bug).
    #[error(transparent)]
    WindowMismatch(WindowMismatch),
}

/// A window fed to a sans-IO reader ([`FetchPlanner`], or
/// [`TimestampSearch`](crate::time_index::TimestampSearch)) that cannot serve what it asked
/// for, so no progress is possible: a short read or a caller bug.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("window of {window_bytes} bytes at {window_pos} does not hold {need_bytes} bytes at {pos}")]
pub struct WindowMismatch {
    /// Where the fed window starts.
    pub window_pos: FilePos,
    /// Length of the fed window.
    pub window_bytes: usize,
    /// The position asked for.
    pub pos: FilePos,
    /// The bytes asked for.
    pub need_bytes: usize,
}

/// What the planner needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchStep {
    /// Read `len` bytes at `pos` (never past the size snapshot) and feed them. A larger window
    /// starting at or before `pos` is welcome: one read can then serve many headers.
    Need {
        /// Where to read.
        pos: FilePos,
        /// How many bytes, at least.
        len: usize,
    },
    /// Planning is over.
    Done(FetchPlan),
}

/// The outcome of planning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPlan {
    /// Bytes to send, `[start, end)`; `None` when the segment holds nothing at or after the
    /// target below the size snapshot.
    pub range: Option<(FilePos, FilePos)>,
    /// Base offset of the first batch in the range.
    pub first_offset: Option<Offset>,
    /// The offset after the last batch in the range; with no range, the offset after the last
    /// batch scanned (the next segment's territory). `None` when no batch was scanned.
    pub next_offset_hint: Option<Offset>,
    /// Number of batches in the range.
    pub batch_count: usize,
}

/// A byte budget for whole batches in which the first batch is always whole (see the module
/// documentation). Invariant: after [`take`](FetchBudget::take)s of batches it admitted, the
/// bytes taken exceed `max_bytes` only by the first batch's excess.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchBudget {
    left: u64,
    taken_any: bool,
}

impl FetchBudget {
    /// A budget of `max_bytes` from which nothing was taken yet.
    pub fn new(max_bytes: usize) -> Self {
        FetchBudget {
            left: max_bytes as u64,
            taken_any: false,
        }
    }

    /// Whether a whole batch of `batch_bytes` may be taken: always for the first batch,
    /// otherwise when it fits what is left.
    pub fn admits(&self, batch_bytes: u64) -> bool {
        !self.taken_any || batch_bytes <= self.left
    }

    /// Takes a batch of `batch_bytes` (one that [`admits`](FetchBudget::admits) said yes to).
    pub fn take(&mut self, batch_bytes: u64) {
        self.left = self.left.saturating_sub(batch_bytes);
        self.taken_any = true;
    }

    /// True when no further batch can be admitted: a batch was taken and less than a batch
    /// header is left (no batch is smaller than its header), so a reader can stop without
    /// reading the next one.
    pub fn is_spent(&self) -> bool {
        self.taken_any && self.left < HEADER_BYTES as u64
    }

    /// Bytes left (0 once the first batch used more than the budget).
    pub fn left(&self) -> u64 {
        self.left
    }
}

/// Length of the longest prefix of `bytes` made of whole batches that `budget` admits,
/// taking them from it. Batches are delimited by their length field only (the bytes come
/// from the log, validated when appended, I3); a batch cut off by the end of `bytes`, or with
/// a negative length, ends the prefix.
pub fn fit_batches(bytes: &[u8], budget: &mut FetchBudget) -> usize {
    let mut used = 0usize;
    while let Some((_, batch_length)) = peek_extent(&bytes[used..]) {
        let Some(total) = usize::try_from(batch_length)
            .ok()
            .and_then(|n| n.checked_add(LOG_OVERHEAD))
        else {
            break;
        };
        let end = used.saturating_add(total);
        if end > bytes.len() || !budget.admits(total as u64) {
            break;
        }
        budget.take(total as u64);
        used = end;
    }
    used
}

/// How many leading bytes of `bytes` (whole batches read from the log) are batches whose base
/// offset lies below `upper`: a read_committed read stops at the last stable offset, which
/// is always a batch boundary (I67). Delimited like [`fit_batches`].
pub fn batches_below(bytes: &[u8], upper: Offset) -> usize {
    let mut used = 0usize;
    while let Some((base_offset, batch_length)) = peek_extent(&bytes[used..]) {
        let Some(total) = usize::try_from(batch_length)
            .ok()
            .and_then(|n| n.checked_add(LOG_OVERHEAD))
        else {
            break;
        };
        let end = used.saturating_add(total);
        if base_offset >= upper || end > bytes.len() {
            break;
        }
        used = end;
    }
    used
}

/// A sans-IO state machine that plans which bytes of one segment answer a fetch.
#[derive(Clone, Debug)]
pub struct FetchPlanner {
    target: Offset,
    end: FilePos,
    budget: FetchBudget,
    /// Position of the next header to read.
    pos: FilePos,
    /// Smallest legal base offset of the next batch.
    min_next_offset: Offset,
    range: Option<(FilePos, FilePos)>,
    first_offset: Option<Offset>,
    next_offset_hint: Option<Offset>,
    batch_count: usize,
    done: bool,
    error: Option<FetchError>,
}

impl FetchPlanner {
    /// Plans a fetch of `target` from the segment based at `segment_base`, starting at the
    /// index floor `start` and reading only below `end` (a snapshot of the segment's size,
    /// I2). A `start` at or past `end` means the target lies beyond the snapshot.
    pub fn new(
        target: Offset,
        segment_base: Offset,
        start: FilePos,
        end: FilePos,
        max_bytes: usize,
    ) -> Self {
        FetchPlanner {
            target,
            end,
            budget: FetchBudget::new(max_bytes),
            pos: start,
            min_next_offset: segment_base,
            range: None,
            first_offset: None,
            next_offset_hint: None,
            batch_count: 0,
            done: start >= end,
            error: None,
        }
    }

    /// What to do next. After [`feed`](FetchPlanner::feed) returned an error, this keeps
    /// asking for the same bytes and `feed` keeps returning that error: drop the planner.
    pub fn next_step(&self) -> FetchStep {
        if self.done {
            return FetchStep::Done(FetchPlan {
                range: self.range,
                first_offset: self.first_offset,
                next_offset_hint: self.next_offset_hint,
                batch_count: self.batch_count,
            });
        }
        FetchStep::Need {
            pos: self.pos,
            len: self.need_bytes(),
        }
    }

    /// Bytes asked for at the current position: one header, capped at the snapshot.
    fn need_bytes(&self) -> usize {
        HEADER_BYTES.min((self.end.0 - self.pos.0) as usize)
    }

    /// Consumes `window`, the segment bytes starting at `window_pos`: every batch header it
    /// holds from the current position on. Bytes at or past the size snapshot are ignored.
    /// The window must start at or before the position asked for and hold at least the bytes
    /// asked for. Feeding a finished planner does nothing.
    pub fn feed(&mut self, window_pos: FilePos, window: &[u8]) -> Result<(), FetchError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        let result = self.consume(window_pos, window);
        if let Err(err) = &result {
            self.error = Some(err.clone());
        }
        result
    }

    fn consume(&mut self, window_pos: FilePos, window: &[u8]) -> Result<(), FetchError> {
        // The window's usable end: its own end, clipped to the snapshot (I2).
        let window_end = (window_pos.as_u64() + window.len() as u64).min(self.end.as_u64());
        let mut consumed_any = false;
        while !self.done {
            let pos = self.pos.as_u64();
            let to_end = self.end.as_u64() - pos;
            if to_end < HEADER_BYTES as u64 {
                // Fewer bytes than a header remain below the snapshot: a torn header.
                let have = window_end.saturating_sub(pos);
                if pos >= window_pos.as_u64() && have == to_end {
                    let from = (pos - window_pos.as_u64()) as usize;
                    let bytes = &window[from..from + to_end as usize];
                    if let Err(source) = BatchHeader::parse(bytes) {
                        return Err(FetchError::BadHeader {
                            pos: self.pos,
                            source,
                        });
                    }
                }
                return self.window_mismatch(window_pos, window, consumed_any);
            }
            if pos < window_pos.as_u64() || window_end < pos + HEADER_BYTES as u64 {
                return self.window_mismatch(window_pos, window, consumed_any);
            }
            let from = (pos - window_pos.as_u64()) as usize;
            let header =
                BatchHeader::parse(&window[from..from + HEADER_BYTES]).map_err(|source| {
                    FetchError::BadHeader {
                        pos: self.pos,
                        source,
                    }
                })?;
            self.on_header(&header)?;
            consumed_any = true;
        }
        Ok(())
    }

    /// A window that cannot serve the next header: fine once something was consumed (the
    /// caller reads again), an error otherwise (no progress is possible).
    fn window_mismatch(
        &self,
        window_pos: FilePos,
        window: &[u8],
        consumed_any: bool,
    ) -> Result<(), FetchError> {
        if consumed_any {
            return Ok(());
        }
        Err(FetchError::WindowMismatch(WindowMismatch {
            window_pos,
            window_bytes: window.len(),
            pos: self.pos,
            need_bytes: self.need_bytes(),
        }))
    }

    /// Takes one parsed header at `self.pos` into the plan and advances.
    fn on_header(&mut self, header: &BatchHeader) -> Result<(), FetchError> {
        let total_bytes = header.total_bytes() as u64;
        let batch_end = self.pos.as_u64() + total_bytes;
        if batch_end > self.end.as_u64() {
            return Err(FetchError::BatchPastEnd {
                pos: self.pos,
                total_bytes,
                end: self.end,
            });
        }
        if header.base_offset < self.min_next_offset {
            return Err(FetchError::OffsetOutOfOrder {
                pos: self.pos,
                base_offset: header.base_offset,
                expected_at_least: self.min_next_offset,
            });
        }
        // batch_end <= end <= u32::MAX, so the cast is exact.
        let batch_end = FilePos(batch_end as u32);
        let next_offset = header.next_offset();
        match self.range {
            None if header.last_offset() < self.target => {}
            None => {
                // The first batch: the budget always admits it whole.
                self.budget.take(total_bytes);
                self.range = Some((self.pos, batch_end));
                self.first_offset = Some(header.base_offset);
                self.batch_count = 1;
            }
            Some((start, _)) => {
                if !self.budget.admits(total_bytes) {
                    self.done = true;
                    return Ok(());
                }
                self.budget.take(total_bytes);
                self.range = Some((start, batch_end));
                self.batch_count += 1;
            }
        }
        self.next_offset_hint = Some(next_offset);
        self.min_next_offset = next_offset;
        self.pos = batch_end;
        // Stop without reading a header that cannot fit.
        if self.budget.is_spent() {
            self.done = true;
        }
        if self.pos >= self.end {
            self.done = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BatchBuilder, NewRecord};

    /// One built batch: (start, end, base offset, last offset).
    type Span = (u32, u32, i64, i64);

    /// A segment of batches, each `(record count, value bytes)`, based at `base`; returns the
    /// bytes and each batch's span.
    fn segment(base: i64, batches: &[(usize, usize)]) -> (Vec<u8>, Vec<Span>) {
        let mut out = Vec::new();
        let mut spans = Vec::new();
        let mut offset = base;
        for (count, value_bytes) in batches {
            let mut b = BatchBuilder::new();
            let value = vec![7u8; *value_bytes];
            for _ in 0..*count {
                b.push(&NewRecord {
                    key: None,
                    value: Some(&value),
                    headers: vec![],
                    timestamp_ms: 1,
                });
            }
            let bytes = b.build(Offset(offset));
            let start = out.len() as u32;
            out.extend_from_slice(&bytes);
            spans.push((start, out.len() as u32, offset, offset + *count as i64 - 1));
            offset += *count as i64;
        }
        (out, spans)
    }

    #[test]
    fn a_read_committed_read_stops_at_the_first_batch_at_or_past_the_lso() {
        let (seg, spans) = segment(10, &[(2, 5), (3, 5), (1, 5)]);
        assert_eq!(batches_below(&seg, Offset(10)), 0);
        assert_eq!(batches_below(&seg, Offset(12)), spans[0].1 as usize);
        assert_eq!(batches_below(&seg, Offset(14)), spans[1].1 as usize);
        assert_eq!(batches_below(&seg, Offset(100)), seg.len());
        assert_eq!(
            batches_below(&seg[..seg.len() - 1], Offset(100)),
            spans[1].1 as usize
        );
    }

    /// Drives the planner, feeding windows of `window_bytes` (or the asked length if larger).
    fn drive(
        planner: &mut FetchPlanner,
        seg: &[u8],
        window_bytes: usize,
    ) -> Result<FetchPlan, FetchError> {
        for _ in 0..10_000 {
            match planner.next_step() {
                FetchStep::Done(plan) => return Ok(plan),
                FetchStep::Need { pos, len } => {
                    let from = pos.as_usize();
                    let to = (from + len.max(window_bytes)).min(seg.len());
                    planner.feed(pos, &seg[from..to])?;
                }
            }
        }
        panic!("planner did not finish");
    }

    /// Reference: walks every validated batch from `start` below `end` and applies the rules
    /// directly.
    fn reference(seg: &[u8], target: i64, start: u32, end: u32, max_bytes: usize) -> FetchPlan {
        let views: Vec<_> = crate::record::BatchIter::new(&seg[start as usize..end as usize])
            .collect::<Result<_, _>>()
            .expect("reference segment is valid");
        let mut plan = FetchPlan {
            range: None,
            first_offset: None,
            next_offset_hint: views.last().map(|v| v.header.next_offset()),
            batch_count: 0,
        };
        let Some(first) = views
            .iter()
            .position(|v| v.header.last_offset() >= Offset(target))
        else {
            return plan;
        };
        let range_start = start as usize + views[first].start;
        let mut count = 1;
        while first + count < views.len() {
            let v = &views[first + count];
            let batch_end = start as usize + v.start + v.bytes.len();
            if batch_end - range_start > max_bytes {
                break;
            }
            count += 1;
        }
        let last = &views[first + count - 1];
        plan.range = Some((
            FilePos(range_start as u32),
            FilePos((start as usize + last.start + last.bytes.len()) as u32),
        ));
        plan.first_offset = Some(views[first].header.base_offset);
        plan.next_offset_hint = Some(last.header.next_offset());
        plan.batch_count = count;
        plan
    }

    proptest::proptest! {
        #[test]
        fn planner_matches_reference(
            batches in proptest::collection::vec((1usize..5, 0usize..300), 1..25),
            base in 0i64..1_000,
            target_delta in -5i64..120,
            interval_bytes in 0u32..2_000,
            end_cut in 0usize..25,
            max_bytes in 0usize..3_000,
            window_bytes in 0usize..1_500,
        ) {
            let (seg, spans) = segment(base, &batches);
            // The snapshot ends at a batch boundary (I2).
            let kept = spans.len() - end_cut.min(spans.len() - 1);
            let end = spans[kept - 1].1;
            // Build the index the writer would have built, and take the floor from it.
            let mut placer = crate::index::IndexPlacer::new(interval_bytes);
            let mut index = crate::index::OffsetIndex::new();
            for (start, stop, first, _) in &spans[..kept] {
                let rel = Offset(*first).relative_to(Offset(base)).expect("fits");
                if let Some(e) = placer.on_batch(FilePos(*start), rel, stop - start) {
                    index.push(e);
                }
            }
            let target = base + target_delta;
            let start = match Offset(target).relative_to(Offset(base)) {
                Some(rel) => index.lookup(rel),
                None => FilePos(0),
            };
            let expected = reference(&seg, target, start.0, end, max_bytes);
            let mut planner =
                FetchPlanner::new(Offset(target), Offset(base), start, FilePos(end), max_bytes);
            let plan = drive(&mut planner, &seg[..end as usize], window_bytes)
                .expect("valid segment plans");
            proptest::prop_assert_eq!(&plan, &expected);
            // The floor never skips the target's batch: a plan from position 0 agrees.
            let mut from_zero =
                FetchPlanner::new(Offset(target), Offset(base), FilePos(0), FilePos(end), max_bytes);
            let plan0 = drive(&mut from_zero, &seg[..end as usize], window_bytes)
                .expect("valid segment plans");
            proptest::prop_assert_eq!(plan.range, plan0.range);
        }

        #[test]
        fn planner_never_panics_or_spins_on_corruption(
            batches in proptest::collection::vec((1usize..4, 0usize..100), 1..8),
            flips in proptest::collection::vec((0usize..1_000, proptest::prelude::any::<u8>()), 1..6),
            target in -3i64..30,
            max_bytes in 0usize..1_000,
            window_bytes in 0usize..200,
        ) {
            let (mut bytes, _) = segment(0, &batches);
            for (at, value) in flips {
                let len = bytes.len();
                bytes[at % len] = value;
            }
            let mut planner = FetchPlanner::new(
                Offset(target), Offset(0), FilePos(0), FilePos(bytes.len() as u32), max_bytes);
            let _ = drive(&mut planner, &bytes, window_bytes);
        }
    }

    #[test]
    fn skips_below_target_and_stops_at_max_bytes() {
        let (seg, spans) = segment(100, &[(3, 10), (2, 10), (4, 10), (1, 10)]);
        let end = FilePos(seg.len() as u32);
        // target 104 lies in the second batch (103..=104).
        let max_bytes = (spans[2].1 - spans[1].0) as usize;
        let mut p = FetchPlanner::new(Offset(104), Offset(100), FilePos(0), end, max_bytes);
        let plan = drive(&mut p, &seg, 0).expect("plan");
        assert_eq!(plan.range, Some((FilePos(spans[1].0), FilePos(spans[2].1))));
        assert_eq!(plan.first_offset, Some(Offset(103)));
        assert_eq!(plan.next_offset_hint, Some(Offset(109)));
        assert_eq!(plan.batch_count, 2);
    }

    #[test]
    fn first_batch_is_whole_even_when_larger_than_max_bytes() {
        let (seg, spans) = segment(0, &[(5, 500), (1, 10)]);
        let end = FilePos(seg.len() as u32);
        let mut p = FetchPlanner::new(Offset(2), Offset(0), FilePos(0), end, 1);
        let plan = drive(&mut p, &seg, 4096).expect("plan");
        assert_eq!(plan.range, Some((FilePos(0), FilePos(spans[0].1))));
        assert_eq!(plan.batch_count, 1);
        assert_eq!(plan.next_offset_hint, Some(Offset(5)));
    }

    #[test]
    fn target_past_last_batch_gives_no_range() {
        let (seg, _) = segment(10, &[(3, 10), (3, 10)]);
        let end = FilePos(seg.len() as u32);
        let mut p = FetchPlanner::new(Offset(16), Offset(10), FilePos(0), end, 1 << 20);
        let plan = drive(&mut p, &seg, 0).expect("plan");
        assert_eq!(plan.range, None);
        assert_eq!(plan.next_offset_hint, Some(Offset(16)));
        // start at the snapshot: nothing to read at all.
        let p = FetchPlanner::new(Offset(16), Offset(10), end, end, 1 << 20);
        assert!(matches!(
            p.next_step(),
            FetchStep::Done(FetchPlan { range: None, .. })
        ));
    }

    #[test]
    fn one_window_serves_many_headers() {
        let (seg, _) = segment(0, &[(1, 1); 20]);
        let end = FilePos(seg.len() as u32);
        let mut p = FetchPlanner::new(Offset(0), Offset(0), FilePos(0), end, 1 << 20);
        p.feed(FilePos(0), &seg).expect("feed");
        let FetchStep::Done(plan) = p.next_step() else {
            panic!("one window should finish the plan");
        };
        assert_eq!(plan.range, Some((FilePos(0), end)));
        assert_eq!(plan.batch_count, 20);
    }

    #[test]
    fn batch_running_past_snapshot_is_corruption_i3() {
        let (seg, spans) = segment(0, &[(2, 10), (2, 10)]);
        // A snapshot that cuts the second batch: bytes below it should be whole batches.
        let end = FilePos(spans[1].1 - 1);
        let mut p = FetchPlanner::new(Offset(0), Offset(0), FilePos(0), end, 1 << 20);
        let err = drive(&mut p, &seg, 0).expect_err("corrupt");
        assert!(matches!(err, FetchError::BatchPastEnd { pos, .. } if pos == FilePos(spans[1].0)));
        // the error sticks
        assert_eq!(p.feed(FilePos(0), &seg), Err(err));
    }

    #[test]
    fn torn_header_below_snapshot_is_corruption_i3() {
        let (seg, spans) = segment(0, &[(2, 10), (2, 10)]);
        let end = FilePos(spans[0].1 + 20);
        let mut p = FetchPlanner::new(Offset(0), Offset(0), FilePos(0), end, 1 << 20);
        let err = drive(&mut p, &seg, 0).expect_err("corrupt");
        assert!(matches!(err, FetchError::BadHeader { pos, .. } if pos == FilePos(spans[0].1)));
    }

    #[test]
    fn bad_magic_and_backwards_offsets_are_corruption() {
        let (mut seg, spans) = segment(0, &[(2, 10), (2, 10)]);
        let end = FilePos(seg.len() as u32);
        let mut bad = seg.clone();
        bad[spans[1].0 as usize + 16] = 1; // magic
        let mut p = FetchPlanner::new(Offset(3), Offset(0), FilePos(0), end, 1 << 20);
        assert!(matches!(
            drive(&mut p, &bad, 0),
            Err(FetchError::BadHeader { .. })
        ));
        crate::record::patch_base_offset(&mut seg[spans[1].0 as usize..], Offset(1));
        let mut p = FetchPlanner::new(Offset(3), Offset(0), FilePos(0), end, 1 << 20);
        assert!(matches!(
            drive(&mut p, &seg, 0),
            Err(FetchError::OffsetOutOfOrder { .. })
        ));
    }

    #[test]
    fn misplaced_or_short_window_is_an_error_not_a_spin() {
        let (seg, _) = segment(0, &[(2, 10), (2, 10)]);
        let end = FilePos(seg.len() as u32);
        let mut p = FetchPlanner::new(Offset(0), Offset(0), FilePos(0), end, 1 << 20);
        assert!(matches!(
            p.feed(FilePos(1), &seg[1..]),
            Err(FetchError::WindowMismatch { .. })
        ));
        let mut p = FetchPlanner::new(Offset(0), Offset(0), FilePos(0), end, 1 << 20);
        assert!(matches!(
            p.feed(FilePos(0), &seg[..HEADER_BYTES - 1]),
            Err(FetchError::WindowMismatch { .. })
        ));
    }

    #[test]
    fn fit_cuts_at_batch_boundaries_but_first_batch_is_whole() {
        let (both, spans) = segment(0, &[(1, 100), (1, 100)]);
        let a = spans[0].1 as usize;
        let fit = |bytes: &[u8], max: usize, taken_before: bool| {
            let mut budget = FetchBudget::new(max);
            if taken_before {
                budget.take(0);
            }
            fit_batches(bytes, &mut budget)
        };
        assert_eq!(fit(&both, usize::MAX, false), both.len());
        assert_eq!(fit(&both, a + 1, false), a);
        assert_eq!(fit(&both, 10, false), a, "first batch whole");
        assert_eq!(fit(&both, 10, true), 0, "only the first batch is exempt");
        assert_eq!(
            fit(&both[..a + 5], usize::MAX, false),
            a,
            "cut batch ends the prefix"
        );
        assert_eq!(fit(&[], 100, false), 0);
    }

    #[test]
    fn one_budget_across_partitions_exempts_only_the_first_batch() {
        let (p, spans) = segment(0, &[(1, 100)]);
        let one = spans[0].1 as usize;
        let mut budget = FetchBudget::new(one + 10);
        assert_eq!(
            fit_batches(&[], &mut budget),
            0,
            "an empty partition takes nothing"
        );
        assert_eq!(fit_batches(&p, &mut budget), one);
        assert_eq!(budget.left(), 10);
        assert_eq!(
            fit_batches(&p, &mut budget),
            0,
            "the second partition must fit"
        );
        let mut small = FetchBudget::new(1);
        assert_eq!(fit_batches(&p, &mut small), one, "first batch whole");
        assert!(small.is_spent());
        assert_eq!(fit_batches(&p, &mut small), 0);
    }

    proptest::proptest! {
        /// `fit_batches` over partitions sharing one budget, against the rule in prose: whole
        /// batches in order while the bytes taken stay within `max_bytes`, the very first batch
        /// exempt; a partition's answer is a prefix of its batches.
        #[test]
        fn fit_matches_the_rule_across_partitions(
            partitions in proptest::collection::vec(
                proptest::collection::vec((1usize..3, 0usize..200), 0..5), 1..5),
            max_bytes in 0usize..2_000,
        ) {
            let mut budget = FetchBudget::new(max_bytes);
            let mut taken = 0usize;
            let mut first = true;
            for batches in &partitions {
                let (bytes, spans) = segment(0, batches);
                let mut expected = 0usize;
                for (start, stop, _, _) in &spans {
                    let len = (stop - start) as usize;
                    if !first && taken + len > max_bytes {
                        break;
                    }
                    first = false;
                    taken += len;
                    expected = *stop as usize;
                }
                proptest::prop_assert_eq!(fit_batches(&bytes, &mut budget), expected);
            }
        }

        /// The planner and `fit_batches` apply the same budget: the planner's range is exactly
        /// what `fit_batches` keeps of the bytes from the range's start.
        #[test]
        fn planner_and_fit_agree(
            batches in proptest::collection::vec((1usize..4, 0usize..300), 1..15),
            target in 0i64..40,
            max_bytes in 0usize..3_000,
        ) {
            let (seg, _) = segment(0, &batches);
            let end = FilePos(seg.len() as u32);
            let mut planner = FetchPlanner::new(Offset(target), Offset(0), FilePos(0), end, max_bytes);
            let plan = drive(&mut planner, &seg, 0).expect("valid segment plans");
            if let Some((from, to)) = plan.range {
                let kept = fit_batches(&seg[from.as_usize()..], &mut FetchBudget::new(max_bytes));
                proptest::prop_assert_eq!(kept, (to.0 - from.0) as usize);
            }
        }
    }
}
