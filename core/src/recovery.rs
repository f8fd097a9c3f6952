//! Crash recovery for one segment: where its valid log ends, and whether its index can be
//! trusted (Kafka's `LogSegment.recover`; invariants I3, I4, I5).
//!
//! Contract:
//! - Inputs: the segment's facts as values ([`RecoveryChecks`], computed from the index bytes
//!   by [`checks_from_index`]) and, when a scan is needed, *windows* of the segment's bytes fed
//!   to a [`SegmentScanner`] at the positions it asks for ([`SegmentScanner::feed`]).
//! - Outputs: a labelled [`Case`] and an [`Action`] from the decision table ([`decide`]); from
//!   a scan ([`SegmentScanner::next_step`]), either the next window to read or a
//!   [`ScanOutcome`]: the length to truncate the log to, the next offset, the rebuilt index
//!   entries, the rebuilt time index entries (placed as the writer places them, see
//!   [`crate::time_index`]) and the reason the scan stopped.
//! - The time index is not a column of the decision table: a segment whose time index is
//!   missing or fails [`crate::time_index::validate`] is rebuilt by a scan like one whose
//!   offset index is (the broker applies that rule after the table says [`Action::Trust`]).
//! - Never: performs I/O, asks for the whole file at once, allocates a size read from the
//!   segment's or the index's bytes (index entries grow one per whole valid batch, so there are
//!   at most `file_len / interval + 1`), loops without progress, or panics on any bytes.
//!
//! # The decision table
//!
//! At startup every segment is classified by six boolean checks ([`RecoveryChecks`]). The table
//! ([`TABLE`]) is a list of rows; each row requires each check to hold ([`Req::Yes`]), to fail
//! ([`Req::No`]) or ignores it ([`Req::Any`]), and names the [`Case`] and the [`Action`]. Exactly
//! one row matches each of the 2^6 combinations (a test enumerates them all), so there is no
//! silent default and no order dependence.
//!
//! The reasoning, in prose:
//! - Only the active segment can be torn (I5): a segment is flushed before the next one is
//!   created. So the active segment after a crash is always scanned and truncated at the first
//!   invalid batch (I3), whatever its index looks like — the index is rebuilt from the scan.
//! - After a clean shutdown (a marker file says so) the active segment was flushed and closed
//!   like a sealed one, so it is treated like a sealed one: trusted when its index passes every
//!   check, rebuilt by a scan otherwise.
//! - A sealed segment whose index is present, made of whole entries, strictly increasing and
//!   within the log (I4) is trusted without reading the log: startup time must not grow with the
//!   number of sealed segments. The index is not checksummed (as in Kafka), so these structural
//!   checks are all that can be done without a scan; any failure means the index was not fully
//!   written or was damaged, and it is rebuilt by scanning the log.
//! - Whether the broker shut down cleanly does not matter for a sealed segment: it was flushed
//!   before it was sealed (I5).

use crate::index::{self, IndexEntry, IndexPlacer};
use crate::record::{
    validate_batch_with, BatchCheck, BatchHeader, OffsetRule, ValidateOptions, HEADER_BYTES,
    LOG_OVERHEAD,
};
use crate::time_index::{TimeIndexEntry, TimePlacer};
use crate::types::{FilePos, Offset};

/// Byte of a batch where `batchLength` lies (reported by [`StopReason::ImpossibleLength`]).
const BATCH_LENGTH_AT: u64 = 8;
/// Byte of a batch where `partitionLeaderEpoch` lies.
const LEADER_EPOCH_AT: u64 = 12;

/// What a [`SegmentScanner`] needs to know about the segment it scans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanConfig {
    /// The segment's base offset: the first batch must start there (I1).
    pub base_offset: Offset,
    /// The log file's length as the caller found it.
    pub file_len_bytes: u64,
    /// `index.interval.bytes`, for rebuilding the index with [`IndexPlacer`].
    pub index_interval_bytes: u32,
    /// Largest batch accepted, log overhead included (`message.max.bytes`).
    pub max_batch_bytes: usize,
    /// The leader epoch the broker patched into every batch of this segment.
    pub expected_leader_epoch: i32,
    /// Most bytes to ask for per read. Values below [`HEADER_BYTES`] are raised to it, so
    /// every window holds at least one whole header. The first window is at most
    /// [`FIRST_WINDOW_BYTES`] and each next one twice the last, up to this.
    pub window_bytes: usize,
    /// [`OffsetRule::Dense`] for the active segment (each batch starts where the previous
    /// ended, I1); [`OffsetRule::Compacted`] for a sealed one, which a cleaning may have left
    /// with gaps (a batch may start past the previous one's end, never before it).
    pub offsets: OffsetRule,
}

/// Why a scan stopped. Everything from the stopping batch on is not part of the valid log (I3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The last batch ended exactly at the end of the file.
    CleanEnd,
    /// Fewer bytes than a batch header remain: a torn write of a header.
    TruncatedHeader,
    /// `batchLength` is below the fixed header, runs past the end of the file (a torn write),
    /// or exceeds `max_batch_bytes`.
    ImpossibleLength,
    /// The batch's base offset is not the offset after the previous batch (I1); under
    /// [`OffsetRule::Compacted`], lies below it (a forward gap is what compaction leaves).
    WrongBaseOffset,
    /// The batch's partition leader epoch is not the one the broker patched in. The field lies
    /// outside the CRC, so this is what catches a flipped bit in it.
    WrongLeaderEpoch,
    /// The batch failed [`validate_batch_with`]: bad magic, CRC mismatch, bad records… (I3).
    InvalidBatch(BatchCheck),
    /// The batch's position or relative offset does not fit 32 bits, or its last offset
    /// overflows: the segment broke I6 and nothing past this point can be indexed.
    Overflow,
}

/// The result of a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Bytes of whole valid batches from the start of the file: truncate the file here.
    pub valid_len_bytes: u64,
    /// The offset after the last valid batch (the segment's base offset when there is none).
    pub next_offset: Offset,
    /// The index rebuilt with [`IndexPlacer`] over the valid batches.
    pub index_entries: Vec<IndexEntry>,
    /// The largest batch `maxTimestamp` among the valid batches, -1 if there is none.
    pub max_timestamp_ms: i64,
    /// The time index rebuilt with [`TimePlacer`] at the offset index's placement points, as
    /// the writer makes it (see [`crate::time_index`]).
    pub time_index_entries: Vec<TimeIndexEntry>,
    /// The time placer's state after the last valid batch, to resume appends with.
    pub time_placer: TimePlacer,
    /// Why the scan stopped.
    pub stop: StopReason,
    /// The file position of the byte where the scan stopped: the failed field of the stopping
    /// batch, or the end of the file for [`StopReason::CleanEnd`] and
    /// [`StopReason::TruncatedHeader`].
    pub stop_at: u64,
    /// Number of valid batches.
    pub batches_count: u64,
}

/// The scanner's output: the next bytes it needs, or the outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanStep {
    /// Read `len` bytes at `pos` and hand them to [`SegmentScanner::feed`]. `len` never runs
    /// past the file's end.
    Need {
        /// File position to read from.
        pos: u64,
        /// Bytes to read.
        len: usize,
    },
    /// The scan is over.
    Done(ScanOutcome),
}

/// The first window of a scan: a page. The windows double from it, so a log of a few batches
/// followed by a long tail of zeros (a preallocated active segment after a crash, I190) costs
/// one small read, and a long log still reaches full windows after a few reads.
pub const FIRST_WINDOW_BYTES: usize = 4096;

/// Finds where a segment's valid log ends, reading it in windows (Kafka's
/// `LogSegment.recover`, I3).
///
/// Drive it by alternating [`SegmentScanner::next_step`] (an output: what to read, or the
/// outcome) and [`SegmentScanner::feed`] (an input: the bytes read). The windows grow from
/// [`FIRST_WINDOW_BYTES`], doubling per read, to `window_bytes`, each capped at the file's end; when a batch header says its batch is longer
/// than a window, the next request is for exactly that batch (it was already checked to fit the
/// file and `max_batch_bytes`), never more. Every whole batch in a window is consumed.
///
/// A batch is valid when its header parses, its length is at least a header, fits the file and
/// `max_batch_bytes`, its base offset is the expected next offset (the segment's base offset for
/// the first), its partition leader epoch is the expected one, and it passes
/// [`validate_batch_with`]. The first invalid batch ends the valid log (I3). Together these
/// checks cover every byte of a batch: base offset, length and epoch by the checks above, the
/// magic byte by parsing, everything from byte 17 by the CRC.
///
/// Progress: each feed consumes at least one batch, or raises the next request to a whole
/// batch (at most once per position), or ends the scan; so the number of feeds is at most
/// [`SegmentScanner::max_feeds`]. A feed shorter than requested means the file ends there.
#[derive(Clone, Debug)]
pub struct SegmentScanner {
    config: ScanConfig,
    /// The file's length; lowered when a read comes back short.
    file_len_bytes: u64,
    /// The next window: from [`FIRST_WINDOW_BYTES`] doubling to `window_bytes`, never below
    /// a header.
    window_bytes: usize,
    /// `config.window_bytes`, raised to a header: the largest window.
    max_window_bytes: usize,
    /// Start of the next batch, and the end of the valid log so far.
    pos: u64,
    next_offset: Offset,
    placer: IndexPlacer,
    index_entries: Vec<IndexEntry>,
    time_placer: TimePlacer,
    time_index_entries: Vec<TimeIndexEntry>,
    max_timestamp_ms: i64,
    batches_count: u64,
    /// Length of the batch at `pos` when it is larger than a window.
    batch_len_at_pos: Option<usize>,
    /// The file position up to which bytes were fed: a tail too short for a header is only
    /// reported once it was read, so a file shorter than the caller believed ends at its real
    /// end whatever the window size.
    fed_to: u64,
    stopped: Option<(StopReason, u64)>,
}

impl SegmentScanner {
    /// A scanner at the start of the segment.
    pub fn new(config: ScanConfig) -> Self {
        let mut scanner = SegmentScanner {
            config,
            file_len_bytes: config.file_len_bytes,
            window_bytes: config.window_bytes.clamp(HEADER_BYTES, FIRST_WINDOW_BYTES),
            max_window_bytes: config.window_bytes.max(HEADER_BYTES),
            pos: 0,
            next_offset: config.base_offset,
            placer: IndexPlacer::new(config.index_interval_bytes),
            index_entries: Vec::new(),
            time_placer: TimePlacer::new(),
            time_index_entries: Vec::new(),
            max_timestamp_ms: -1,
            batches_count: 0,
            batch_len_at_pos: None,
            fed_to: 0,
            stopped: None,
        };
        scanner.settle();
        scanner
    }

    /// An upper bound on the number of feeds before [`ScanStep::Done`]: two per batch that
    /// could fit the file, plus three (the last of them reads a tail too short for a header).
    pub fn max_feeds(&self) -> u64 {
        2 * (self.config.file_len_bytes / HEADER_BYTES as u64) + 3
    }

    /// What the scanner needs next. Calling it again without a feed returns the same step.
    pub fn next_step(&self) -> ScanStep {
        match &self.stopped {
            Some((stop, stop_at)) => ScanStep::Done(ScanOutcome {
                valid_len_bytes: self.pos,
                next_offset: self.next_offset,
                index_entries: self.index_entries.clone(),
                max_timestamp_ms: self.max_timestamp_ms,
                time_index_entries: self.time_index_entries.clone(),
                time_placer: self.time_placer.clone(),
                stop: stop.clone(),
                stop_at: *stop_at,
                batches_count: self.batches_count,
            }),
            None => ScanStep::Need {
                pos: self.pos,
                len: self.request_len(),
            },
        }
    }

    /// Bytes to ask for at `pos`; never past the file's end.
    fn request_len(&self) -> usize {
        let left_bytes = self.file_len_bytes - self.pos;
        let want = self.batch_len_at_pos.unwrap_or(self.window_bytes);
        usize::try_from(left_bytes).map_or(want, |left| want.min(left))
    }

    /// Hands over the bytes read at `pos` for the last [`ScanStep::Need`]; consumes every whole
    /// batch in them. Bytes past the file's end are ignored; fewer bytes than requested mean
    /// the file ends after them. Does nothing once the scan is done.
    ///
    /// Panics if `pos` is not the position of the last request (a caller bug).
    pub fn feed(&mut self, pos: u64, bytes: &[u8]) {
        if self.stopped.is_some() {
            return;
        }
        assert_eq!(pos, self.pos, "feed must answer the last ScanStep::Need");
        let requested = self.request_len();
        self.window_bytes = self
            .window_bytes
            .saturating_mul(2)
            .min(self.max_window_bytes);
        if bytes.len() < requested {
            // A short read: the file is shorter than the caller thought.
            self.file_len_bytes = pos + bytes.len() as u64;
        }
        let left_bytes = self.file_len_bytes - pos;
        let window = match usize::try_from(left_bytes) {
            Ok(left) if left < bytes.len() => &bytes[..left],
            _ => bytes,
        };
        self.fed_to = self.fed_to.max(pos + window.len() as u64);
        let mut cursor = 0usize;
        loop {
            self.settle();
            if self.stopped.is_some() {
                return;
            }
            let rest = &window[cursor..];
            if rest.len() < HEADER_BYTES {
                return; // the next window starts at the next batch
            }
            match self.check_header(rest) {
                Err(stop) => {
                    self.stopped = Some(stop);
                    return;
                }
                Ok(total) if total > rest.len() => {
                    if cursor == 0 {
                        if self.batch_len_at_pos.is_some() {
                            // The whole batch was asked for and did not come: the bytes
                            // changed between reads. End here rather than ask forever.
                            self.stop(StopReason::ImpossibleLength, BATCH_LENGTH_AT);
                        } else {
                            self.batch_len_at_pos = Some(total);
                        }
                    }
                    return;
                }
                Ok(total) => {
                    if let Err(stop) = self.accept(&rest[..total]) {
                        self.stopped = Some(stop);
                        return;
                    }
                    cursor += total;
                }
            }
        }
    }

    /// Ends the scan at the batch at `pos`, at byte `at` of that batch.
    fn stop(&mut self, stop: StopReason, at: u64) {
        self.stopped = Some((stop, self.pos + at));
    }

    /// Ends the scan when the file has no room for another batch.
    fn settle(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        let left_bytes = self.file_len_bytes - self.pos;
        if left_bytes == 0 {
            self.stopped = Some((StopReason::CleanEnd, self.file_len_bytes));
        } else if left_bytes < HEADER_BYTES as u64 && self.fed_to >= self.file_len_bytes {
            self.stopped = Some((StopReason::TruncatedHeader, self.file_len_bytes));
        }
    }

    /// Checks the header at the start of `rest` (which holds at least a header) against the
    /// file and the expected offset and epoch; returns the batch's total length.
    fn check_header(&self, rest: &[u8]) -> Result<usize, (StopReason, u64)> {
        let at = |offset: u64| self.pos + offset;
        let header = BatchHeader::parse(rest).map_err(|err| {
            let stop = match err.check {
                BatchCheck::BatchLengthTooSmall(_) => StopReason::ImpossibleLength,
                other => StopReason::InvalidBatch(other),
            };
            (stop, at(err.at as u64))
        })?;
        // parse guarantees batchLength >= HEADER_BYTES - LOG_OVERHEAD > 0.
        let total = header.total_bytes();
        debug_assert!(
            total >= HEADER_BYTES && total == LOG_OVERHEAD + header.batch_length as usize
        );
        if total > self.config.max_batch_bytes {
            return Err((StopReason::ImpossibleLength, at(BATCH_LENGTH_AT)));
        }
        // I1: compaction may remove whole batches from a sealed segment, so there a batch
        // may start past the previous batch's end, never before it.
        let in_order = match self.config.offsets {
            OffsetRule::Dense => header.base_offset == self.next_offset,
            OffsetRule::Compacted => header.base_offset >= self.next_offset,
        };
        if !in_order {
            return Err((StopReason::WrongBaseOffset, at(0)));
        }
        if header.partition_leader_epoch != self.config.expected_leader_epoch {
            return Err((StopReason::WrongLeaderEpoch, at(LEADER_EPOCH_AT)));
        }
        // Checked last: the file's length may still be the caller's belief (no short read
        // seen yet), so a check that depends on it must not decide before the header's own
        // checks, or the outcome would depend on the window size.
        if total as u64 > self.file_len_bytes - self.pos {
            return Err((StopReason::ImpossibleLength, at(BATCH_LENGTH_AT)));
        }
        Ok(total)
    }

    /// Validates one whole batch at `pos` and, if it is valid, adds it to the valid log.
    fn accept(&mut self, batch: &[u8]) -> Result<(), (StopReason, u64)> {
        let opts = ValidateOptions {
            max_batch_bytes: self.config.max_batch_bytes,
            walk_records: true,
            offsets: OffsetRule::Compacted,
        };
        let header = validate_batch_with(batch, opts).map_err(|err| {
            (
                StopReason::InvalidBatch(err.check),
                self.pos + err.at as u64,
            )
        })?;
        let overflow = (StopReason::Overflow, self.pos);
        let position = u32::try_from(self.pos).map_err(|_| overflow.clone())?;
        let relative = header
            .base_offset
            .relative_to(self.config.base_offset)
            .ok_or_else(|| overflow.clone())?;
        let next = header
            .base_offset
            .0
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .ok_or_else(|| overflow.clone())?;
        let batch_bytes = u32::try_from(batch.len()).map_err(|_| overflow)?;
        let entry = self
            .placer
            .on_batch(FilePos(position), relative, batch_bytes);
        if let Some(entry) = entry {
            self.index_entries.push(entry);
        }
        // The time index is placed at the same points, as the writer does.
        if let Some(time_entry) =
            self.time_placer
                .on_batch(relative, header.max_timestamp, entry.is_some())
        {
            self.time_index_entries.push(time_entry);
        }
        self.max_timestamp_ms = self.max_timestamp_ms.max(header.max_timestamp);
        self.next_offset = Offset(next);
        self.batches_count += 1;
        self.pos += batch.len() as u64;
        self.batch_len_at_pos = None;
        Ok(())
    }
}

/// Scans an in-memory segment by driving a [`SegmentScanner`] with `config.window_bytes`
/// windows over `segment_bytes` (for tests and small files; callers with files drive the
/// scanner themselves). `config.file_len_bytes` is honoured: a longer slice is scanned only up
/// to it, a shorter one reads short, as a file shorter than expected would.
pub fn scan_slice(config: ScanConfig, segment_bytes: &[u8]) -> ScanOutcome {
    let mut scanner = SegmentScanner::new(config);
    let mut feeds: u64 = 0;
    loop {
        match scanner.next_step() {
            ScanStep::Done(outcome) => return outcome,
            ScanStep::Need { pos, len } => {
                feeds += 1;
                assert!(
                    feeds <= scanner.max_feeds(),
                    "scanner exceeded its feed bound"
                );
                let start = usize::try_from(pos)
                    .map_or(segment_bytes.len(), |p| p.min(segment_bytes.len()));
                let end = start.saturating_add(len).min(segment_bytes.len());
                scanner.feed(pos, &segment_bytes[start..end]);
            }
        }
    }
}

/// A requirement a decision-table row places on one boolean check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Req {
    /// The check must hold.
    Yes,
    /// The check must fail.
    No,
    /// The row does not look at this check.
    Any,
}

impl Req {
    /// True when `value` satisfies this requirement.
    pub fn matches(self, value: bool) -> bool {
        match self {
            Req::Yes => value,
            Req::No => !value,
            Req::Any => true,
        }
    }
}

/// The facts about one segment that the decision table looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecoveryChecks {
    /// The segment is the partition's last (active) segment, the only one appended to.
    pub is_active_segment: bool,
    /// The clean-shutdown marker file was present: the broker flushed and closed everything.
    pub clean_shutdown: bool,
    /// The `.index` file exists.
    pub index_present: bool,
    /// The index length is a whole number of 8-byte entries (no partial trailing entry).
    pub index_whole_entries: bool,
    /// Entries are strictly increasing in relative offset and in position (I4).
    pub index_monotonic: bool,
    /// Every entry's position lies below the log's size (I4).
    pub index_within_log: bool,
}

impl RecoveryChecks {
    /// The checks in table column order.
    pub fn as_array(&self) -> [bool; 6] {
        [
            self.is_active_segment,
            self.clean_shutdown,
            self.index_present,
            self.index_whole_entries,
            self.index_monotonic,
            self.index_within_log,
        ]
    }

    /// The checks from an array in table column order.
    pub fn from_array(values: [bool; 6]) -> Self {
        RecoveryChecks {
            is_active_segment: values[0],
            clean_shutdown: values[1],
            index_present: values[2],
            index_whole_entries: values[3],
            index_monotonic: values[4],
            index_within_log: values[5],
        }
    }
}

/// What to do with a segment at startup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Use the log and its index as they are; read nothing.
    Trust,
    /// Scan the whole log and replace the index with the scan's entries. The log is expected to
    /// be whole (I5); should the scan stop early anyway, the log itself is damaged and the
    /// caller truncates at the scan's `valid_len_bytes` as for [`Action::ScanAndTruncate`].
    RebuildIndex,
    /// Scan the log, truncate it at the first invalid batch (I3) and replace the index.
    ScanAndTruncate,
}

/// The labelled cases of the decision table. Each doc line says why its action is right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// The active segment after a crash may end in a torn write (I5): scan it and truncate at
    /// the first invalid batch (I3); its index may point past the truncation, so rebuild it.
    ActiveAfterCrash,
    /// After a clean shutdown the active segment was flushed and closed, and its index passes
    /// every structural check: trust both, scanning would only slow startup.
    ActiveCleanIndexValid,
    /// Clean shutdown but no index file (deleted, or never created): rebuild it by a scan.
    ActiveCleanIndexMissing,
    /// Clean shutdown but the index ends in a partial entry, so it was not written out
    /// completely: rebuild it.
    ActiveCleanIndexPartial,
    /// Clean shutdown but the index is not strictly increasing (I4), so it is damaged and a
    /// floor lookup on it could land anywhere: rebuild it.
    ActiveCleanIndexDisordered,
    /// Clean shutdown but an entry points at or past the log's end (I4: entries are written
    /// after their data), so the log lost bytes the index saw: rebuild it.
    ActiveCleanIndexPastLogEnd,
    /// A sealed segment was flushed before it was sealed (I5) and its index passes every
    /// structural check: trust it without reading the log, so startup time does not grow with
    /// the number of sealed segments.
    SealedIndexValid,
    /// A sealed segment without an index (deleted by an operator, or lost): the log is whole
    /// (I5), so rebuild the index by a scan.
    SealedIndexMissing,
    /// A sealed segment whose index ends in a partial entry: the index write was cut short,
    /// rebuild it.
    SealedIndexPartial,
    /// A sealed segment whose index is not strictly increasing (I4): the index is damaged,
    /// rebuild it.
    SealedIndexDisordered,
    /// A sealed segment whose index points at or past the log's end (I4): the index cannot
    /// belong to this log as it stands, rebuild it.
    SealedIndexPastLogEnd,
}

/// One row of the decision table: a pattern over the six checks, then the case and action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Requirements in column order: active, clean shutdown, index present, whole entries,
    /// monotonic, within log.
    pub pattern: [Req; 6],
    /// The case this row names.
    pub case: Case,
    /// What to do.
    pub action: Action,
}

impl Row {
    /// True when every check satisfies the row's requirement.
    pub fn matches(&self, checks: &RecoveryChecks) -> bool {
        self.pattern
            .iter()
            .zip(checks.as_array())
            .all(|(req, value)| req.matches(value))
    }
}

const fn row(pattern: [Req; 6], case: Case, action: Action) -> Row {
    Row {
        pattern,
        case,
        action,
    }
}

use Req::{Any as ANY, No as NO, Yes as YES};

/// The decision table. Columns: active, clean shutdown, index present, whole entries,
/// monotonic, within log. Exactly one row matches any combination of the checks.
pub static TABLE: [Row; 11] = [
    // The active segment after a crash: everything about the index is ignored (I5).
    row(
        [YES, NO, ANY, ANY, ANY, ANY],
        Case::ActiveAfterCrash,
        Action::ScanAndTruncate,
    ),
    // The active segment after a clean shutdown: like a sealed one.
    row(
        [YES, YES, YES, YES, YES, YES],
        Case::ActiveCleanIndexValid,
        Action::Trust,
    ),
    row(
        [YES, YES, NO, ANY, ANY, ANY],
        Case::ActiveCleanIndexMissing,
        Action::RebuildIndex,
    ),
    row(
        [YES, YES, YES, NO, ANY, ANY],
        Case::ActiveCleanIndexPartial,
        Action::RebuildIndex,
    ),
    row(
        [YES, YES, YES, YES, NO, ANY],
        Case::ActiveCleanIndexDisordered,
        Action::RebuildIndex,
    ),
    row(
        [YES, YES, YES, YES, YES, NO],
        Case::ActiveCleanIndexPastLogEnd,
        Action::RebuildIndex,
    ),
    // Sealed segments: clean shutdown does not matter (flushed before sealing, I5).
    row(
        [NO, ANY, YES, YES, YES, YES],
        Case::SealedIndexValid,
        Action::Trust,
    ),
    row(
        [NO, ANY, NO, ANY, ANY, ANY],
        Case::SealedIndexMissing,
        Action::RebuildIndex,
    ),
    row(
        [NO, ANY, YES, NO, ANY, ANY],
        Case::SealedIndexPartial,
        Action::RebuildIndex,
    ),
    row(
        [NO, ANY, YES, YES, NO, ANY],
        Case::SealedIndexDisordered,
        Action::RebuildIndex,
    ),
    row(
        [NO, ANY, YES, YES, YES, NO],
        Case::SealedIndexPastLogEnd,
        Action::RebuildIndex,
    ),
];

/// Looks the checks up in [`TABLE`]. Exactly one row matches every combination (the
/// exhaustive test proves it); should that ever be broken, the safest action is returned.
pub fn decide(checks: RecoveryChecks) -> (Case, Action) {
    let mut matching = TABLE.iter().filter(|r| r.matches(&checks));
    let first = matching.next();
    debug_assert!(first.is_some(), "decision table has a gap at {checks:?}");
    debug_assert!(
        matching.next().is_none(),
        "decision table overlaps at {checks:?}"
    );
    match first {
        Some(r) => (r.case, r.action),
        // Unreachable by the exhaustive test; scanning is never wrong, only slower.
        None if checks.is_active_segment => (Case::ActiveAfterCrash, Action::ScanAndTruncate),
        None => (Case::SealedIndexMissing, Action::RebuildIndex),
    }
}

/// Computes the checks for a segment from its index file's bytes (`None` when the file is
/// missing) and its log's size, with [`index::check`]: each index check is evaluated on its
/// own over the whole entries present, so a partial tail does not hide a disorder and vice
/// versa. A missing index reports its structural checks as failed. Allocates nothing.
pub fn checks_from_index(
    is_active: bool,
    clean_shutdown: bool,
    index_bytes: Option<&[u8]>,
    log_size_bytes: u64,
) -> RecoveryChecks {
    let mut checks = RecoveryChecks {
        is_active_segment: is_active,
        clean_shutdown,
        ..RecoveryChecks::default()
    };
    if let Some(bytes) = index_bytes {
        let found = index::check(bytes, log_size_bytes);
        checks.index_present = true;
        checks.index_whole_entries = found.whole_entries;
        checks.index_monotonic = found.offsets_increasing && found.positions_increasing;
        checks.index_within_log = found.positions_in_log;
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::record::{patch_base_offset, patch_leader_epoch, BatchBuilder, NewRecord};

    const EPOCH: i32 = 7;

    /// A segment of batches with `sizes[i]` records each, dense offsets from `base`, and the
    /// expected epoch patched in; returns the bytes and each batch's start.
    fn segment(base: i64, sizes: &[usize], value_bytes: usize) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut starts = Vec::new();
        let mut next = base;
        for (b, &n) in sizes.iter().enumerate() {
            let mut builder = BatchBuilder::new();
            let value = vec![b as u8; value_bytes];
            for r in 0..n {
                builder.push(&NewRecord {
                    key: Some(b"key"),
                    value: Some(&value),
                    headers: vec![],
                    timestamp_ms: 1_000 + (b * 10 + r) as i64,
                });
            }
            let mut batch = builder.build(Offset(0));
            patch_base_offset(&mut batch, Offset(next));
            patch_leader_epoch(&mut batch, EPOCH);
            starts.push(out.len());
            out.extend_from_slice(&batch);
            next = next.wrapping_add(n as i64);
        }
        (out, starts)
    }

    fn config(base: i64, file_len: usize, window_bytes: usize) -> ScanConfig {
        ScanConfig {
            base_offset: Offset(base),
            file_len_bytes: file_len as u64,
            index_interval_bytes: 200,
            max_batch_bytes: 1 << 20,
            expected_leader_epoch: EPOCH,
            window_bytes,
            offsets: OffsetRule::Dense,
        }
    }

    #[test]
    fn clean_segment_scans_to_its_end() {
        let (bytes, starts) = segment(100, &[3, 1, 4, 1, 5], 40);
        let out = scan_slice(config(100, bytes.len(), 128), &bytes);
        assert_eq!(out.stop, StopReason::CleanEnd);
        assert_eq!(out.valid_len_bytes, bytes.len() as u64);
        assert_eq!(out.stop_at, bytes.len() as u64);
        assert_eq!(out.next_offset, Offset(114));
        assert_eq!(out.batches_count, 5);
        assert_eq!(out.max_timestamp_ms, 1_044);
        // Every entry points at a batch start, in order (I4).
        assert!(!out.index_entries.is_empty());
        for e in &out.index_entries {
            assert!(starts.contains(&e.position.as_usize()), "{e:?}");
        }
    }

    #[test]
    fn empty_segment_is_a_clean_end() {
        let out = scan_slice(config(5, 0, 4096), &[]);
        assert_eq!(out.stop, StopReason::CleanEnd);
        assert_eq!((out.valid_len_bytes, out.next_offset), (0, Offset(5)));
        assert_eq!(out.max_timestamp_ms, -1);
        assert_eq!(out.batches_count, 0);
    }

    /// (I3) A torn last batch is cut; a torn header is reported as such.
    #[test]
    fn torn_tail_is_truncated_i3() {
        let (bytes, starts) = segment(0, &[2, 2, 2], 30);
        let cut = &bytes[..bytes.len() - 1];
        let out = scan_slice(config(0, cut.len(), 4096), cut);
        assert_eq!(out.stop, StopReason::ImpossibleLength);
        assert_eq!(out.valid_len_bytes, starts[2] as u64);
        assert_eq!(out.next_offset, Offset(4));
        let cut = &bytes[..starts[2] + 10];
        let out = scan_slice(config(0, cut.len(), 4096), cut);
        assert_eq!(out.stop, StopReason::TruncatedHeader);
        assert_eq!(out.valid_len_bytes, starts[2] as u64);
    }

    /// The leader epoch lies outside the CRC; the expected-epoch check catches a flip in it.
    #[test]
    fn flipped_leader_epoch_is_caught() {
        let (mut bytes, starts) = segment(0, &[1, 1, 1], 10);
        bytes[starts[1] + 14] ^= 0x10;
        let out = scan_slice(config(0, bytes.len(), 4096), &bytes);
        assert_eq!(out.stop, StopReason::WrongLeaderEpoch);
        assert_eq!(out.valid_len_bytes, starts[1] as u64);
        assert_eq!(out.stop_at, starts[1] as u64 + 12);
        assert_eq!(out.next_offset, Offset(1));
    }

    /// (I1) A batch whose base offset does not follow the previous one ends the log; in a
    /// sealed (possibly compacted) segment only a step back does.
    #[test]
    fn gap_in_offsets_ends_the_log_i1() {
        let (mut bytes, starts) = segment(0, &[2, 2], 10);
        patch_base_offset(&mut bytes[starts[1]..], Offset(3));
        let sealed = ScanConfig {
            offsets: OffsetRule::Compacted,
            ..config(0, bytes.len(), 4096)
        };
        let out = scan_slice(sealed, &bytes);
        assert_eq!(
            (out.stop, out.next_offset),
            (StopReason::CleanEnd, Offset(5))
        );
        patch_base_offset(&mut bytes[starts[1]..], Offset(1));
        assert_eq!(scan_slice(sealed, &bytes).stop, StopReason::WrongBaseOffset);
        patch_base_offset(&mut bytes[starts[1]..], Offset(3));
        let out = scan_slice(config(0, bytes.len(), 4096), &bytes);
        assert_eq!(out.stop, StopReason::WrongBaseOffset);
        assert_eq!(out.valid_len_bytes, starts[1] as u64);
        // And the first batch must start at the segment's base offset.
        let out = scan_slice(config(1, bytes.len(), 4096), &bytes);
        assert_eq!(
            (out.stop, out.valid_len_bytes),
            (StopReason::WrongBaseOffset, 0)
        );
    }

    /// A batch larger than a window is asked for whole, exactly, once.
    #[test]
    fn big_batch_is_requested_exactly() {
        let (bytes, starts) = segment(0, &[1, 3, 1], 500);
        let big = starts[2] - starts[1];
        let mut scanner = SegmentScanner::new(config(0, bytes.len(), 100));
        let mut requests = Vec::new();
        while let ScanStep::Need { pos, len } = scanner.next_step() {
            requests.push((pos, len));
            let end = (pos as usize + len).min(bytes.len());
            scanner.feed(pos, &bytes[pos as usize..end]);
        }
        assert!(requests.contains(&(starts[1] as u64, big)), "{requests:?}");
        assert!(requests
            .iter()
            .all(|&(_, len)| len == 100 || len > 100 && len <= big + 1_000));
        let ScanStep::Done(out) = scanner.next_step() else {
            unreachable!()
        };
        assert_eq!(out.stop, StopReason::CleanEnd);
        assert_eq!(out, scan_slice(config(0, bytes.len(), 1 << 30), &bytes));
    }

    /// Bytes that change between reads (a caller or disk fault) cannot make the scanner ask
    /// for ever-larger batches: having asked for a whole batch once, it ends there.
    #[test]
    fn changing_bytes_between_reads_still_finish() {
        let (bytes, _) = segment(0, &[3], 500);
        let total = bytes.len();
        let mut scanner = SegmentScanner::new(config(0, total + 100, 100));
        scanner.feed(0, &bytes[..100]);
        assert_eq!(scanner.next_step(), ScanStep::Need { pos: 0, len: total });
        let mut changed = bytes.clone();
        let longer = (total - LOG_OVERHEAD + 10) as i32;
        changed[8..12].copy_from_slice(&longer.to_be_bytes());
        scanner.feed(0, &changed);
        let ScanStep::Done(out) = scanner.next_step() else {
            panic!("asked again after the whole batch was read once")
        };
        assert_eq!(
            (out.stop, out.valid_len_bytes),
            (StopReason::ImpossibleLength, 0)
        );
    }

    /// A batch above `max_batch_bytes` is never asked for: the length is impossible.
    #[test]
    fn batch_over_the_limit_is_not_read() {
        let (bytes, _) = segment(0, &[4], 500);
        let mut cfg = config(0, bytes.len(), 100);
        cfg.max_batch_bytes = bytes.len() - 1;
        let mut scanner = SegmentScanner::new(cfg);
        let ScanStep::Need { pos, len } = scanner.next_step() else {
            unreachable!()
        };
        assert_eq!((pos, len), (0, 100));
        scanner.feed(0, &bytes[..100]);
        let ScanStep::Done(out) = scanner.next_step() else {
            panic!("should stop without asking for the oversized batch")
        };
        assert_eq!(
            (out.stop, out.valid_len_bytes, out.stop_at),
            (StopReason::ImpossibleLength, 0, 8)
        );
    }

    /// A read that comes back short means the file ends there.
    #[test]
    fn short_read_ends_the_file() {
        let (bytes, starts) = segment(0, &[1, 1, 1], 10);
        let have = &bytes[..starts[2] + 5];
        let out = scan_slice(config(0, bytes.len(), 4096), have);
        assert_eq!(out.stop, StopReason::TruncatedHeader);
        assert_eq!(out.valid_len_bytes, starts[2] as u64);
        assert_eq!(out.stop_at, have.len() as u64);
    }

    /// A file shorter than the caller believed, ending in a tail too short for a header, ends
    /// at its real end whatever the window: the tail is read before it is reported (found by
    /// the `segment_recovery` fuzz target, which compares windows).
    #[test]
    fn short_tail_stops_at_the_real_end_for_any_window() {
        let (bytes, starts) = segment(0, &[1, 1], 10);
        let have = &bytes[..starts[1] + 18];
        let believed = have.len() + 9;
        let expected = scan_slice(config(0, believed, believed), have);
        assert_eq!(expected.stop, StopReason::TruncatedHeader);
        assert_eq!(expected.stop_at, have.len() as u64);
        for window_bytes in [1, 61, 64, 100, starts[1] + 1, 4096] {
            let out = scan_slice(config(0, believed, window_bytes), have);
            assert_eq!(out, expected, "window {window_bytes}");
        }
        // A believed length one header short of the real one, with nothing after the last
        // batch in reality, is a clean end.
        let exact = &bytes[..starts[1]];
        let out = scan_slice(config(0, exact.len() + 20, 64), exact);
        assert_eq!(
            (out.stop, out.stop_at),
            (StopReason::CleanEnd, exact.len() as u64)
        );
    }

    /// Hostile lengths: i32::MAX and negative; no allocation, no panic.
    #[test]
    fn hostile_lengths_stop_cleanly() {
        for length in [i32::MAX, -1, i32::MIN, 0, 48] {
            let (mut bytes, _) = segment(0, &[1], 10);
            bytes[8..12].copy_from_slice(&length.to_be_bytes());
            let out = scan_slice(config(0, bytes.len(), 4096), &bytes);
            assert_eq!(out.stop, StopReason::ImpossibleLength, "{length}");
            assert_eq!((out.valid_len_bytes, out.stop_at), (0, 8));
        }
    }

    #[test]
    fn overflowing_offsets_stop_i6() {
        // record validation bounds the base offset (its last offset would overflow i64)
        let (bytes, _) = segment(i64::MAX - 1, &[3], 10);
        let out = scan_slice(config(i64::MAX - 1, bytes.len(), 4096), &bytes);
        assert_eq!(
            (out.stop, out.valid_len_bytes),
            (
                StopReason::InvalidBatch(BatchCheck::BadBaseOffset(i64::MAX - 1)),
                0
            )
        );
        // a valid batch whose offset is more than u32::MAX past the segment base
        let far = i64::from(u32::MAX) + 1;
        let (bytes, _) = segment(far, &[3], 10);
        let out = scan_slice(config(0, bytes.len(), 4096), &bytes);
        assert_eq!(out.stop, StopReason::WrongBaseOffset);
    }

    fn all_combinations() -> impl Iterator<Item = RecoveryChecks> {
        (0u32..64).map(|bits| {
            let mut values = [false; 6];
            for (i, v) in values.iter_mut().enumerate() {
                *v = bits & (1 << i) != 0;
            }
            RecoveryChecks::from_array(values)
        })
    }

    /// Every one of the 2^6 combinations matches exactly one row: no gaps, no overlaps.
    #[test]
    fn table_matches_every_combination_exactly_once() {
        let mut rows_used = [0usize; TABLE.len()];
        for checks in all_combinations() {
            let matching: Vec<usize> = TABLE
                .iter()
                .enumerate()
                .filter(|(_, r)| r.matches(&checks))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(matching.len(), 1, "{checks:?} matched rows {matching:?}");
            rows_used[matching[0]] += 1;
            let (case, action) = decide(checks);
            assert_eq!(
                (case, action),
                (TABLE[matching[0]].case, TABLE[matching[0]].action)
            );
        }
        assert!(
            rows_used.iter().all(|&n| n > 0),
            "a row is never reached: {rows_used:?}"
        );
        assert_eq!(rows_used.iter().sum::<usize>(), 64);
    }

    /// Every case label appears in exactly one row, so a label names one situation.
    #[test]
    fn each_case_has_one_row() {
        for r in &TABLE {
            assert_eq!(
                TABLE.iter().filter(|o| o.case == r.case).count(),
                1,
                "{:?}",
                r.case
            );
        }
    }

    /// (I5) The active segment after a crash is scanned and truncated even with a perfect index.
    #[test]
    fn active_after_crash_always_scans_i5() {
        for checks in all_combinations().filter(|c| c.is_active_segment && !c.clean_shutdown) {
            assert_eq!(
                decide(checks),
                (Case::ActiveAfterCrash, Action::ScanAndTruncate)
            );
        }
    }

    /// (I5) A sealed segment is never truncated, and is trusted exactly when its index is good,
    /// whatever the shutdown marker says.
    #[test]
    fn sealed_segments_never_truncate_i5() {
        for checks in all_combinations().filter(|c| !c.is_active_segment) {
            let (_, action) = decide(checks);
            let good = checks.index_present
                && checks.index_whole_entries
                && checks.index_monotonic
                && checks.index_within_log;
            let expected = if good {
                Action::Trust
            } else {
                Action::RebuildIndex
            };
            assert_eq!(action, expected, "{checks:?}");
        }
    }

    fn entry(relative: u32, position: u32) -> [u8; 8] {
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&relative.to_be_bytes());
        out[4..].copy_from_slice(&position.to_be_bytes());
        out
    }

    fn index_of(entries: &[(u32, u32)]) -> Vec<u8> {
        entries.iter().flat_map(|&(r, p)| entry(r, p)).collect()
    }

    #[test]
    fn named_cases_from_index_bytes() {
        let good = index_of(&[(0, 0), (10, 4096), (25, 9000)]);
        let log = 10_000;
        let case = |active, clean, index: Option<&[u8]>| {
            decide(checks_from_index(active, clean, index, log))
        };
        assert_eq!(
            case(false, false, Some(&good)),
            (Case::SealedIndexValid, Action::Trust)
        );
        assert_eq!(
            case(false, true, Some(&good)),
            (Case::SealedIndexValid, Action::Trust)
        );
        assert_eq!(
            case(true, true, Some(&good)),
            (Case::ActiveCleanIndexValid, Action::Trust)
        );
        assert_eq!(
            case(true, false, Some(&good)),
            (Case::ActiveAfterCrash, Action::ScanAndTruncate)
        );
        assert_eq!(
            case(false, true, None),
            (Case::SealedIndexMissing, Action::RebuildIndex)
        );
        assert_eq!(
            case(true, true, None),
            (Case::ActiveCleanIndexMissing, Action::RebuildIndex)
        );
        // A torn last entry.
        let partial = &good[..good.len() - 3];
        assert_eq!(
            case(false, true, Some(partial)),
            (Case::SealedIndexPartial, Action::RebuildIndex)
        );
        // Equal offsets are not strictly increasing (I4).
        let repeated = index_of(&[(0, 0), (10, 4096), (10, 9000)]);
        assert_eq!(
            case(false, true, Some(&repeated)),
            (Case::SealedIndexDisordered, Action::RebuildIndex)
        );
        let backwards = index_of(&[(0, 0), (10, 4096), (25, 100)]);
        assert_eq!(
            case(true, true, Some(&backwards)),
            (Case::ActiveCleanIndexDisordered, Action::RebuildIndex)
        );
        // A position equal to the log size points at no batch (I4).
        let past = index_of(&[(0, 0), (10, 4096), (25, 10_000)]);
        assert_eq!(
            case(false, false, Some(&past)),
            (Case::SealedIndexPastLogEnd, Action::RebuildIndex)
        );
        assert_eq!(
            case(true, true, Some(&past)),
            (Case::ActiveCleanIndexPastLogEnd, Action::RebuildIndex)
        );
        // An empty index is whole, ordered and within any log: a small segment has no entry.
        assert_eq!(
            case(false, false, Some(&[])),
            (Case::SealedIndexValid, Action::Trust)
        );
    }

    /// The index checks are independent: a partial tail does not mask a disorder before it.
    #[test]
    fn index_checks_are_computed_independently() {
        let mut bytes = index_of(&[(5, 100), (4, 200)]);
        bytes.extend_from_slice(&[1, 2, 3]);
        let checks = checks_from_index(false, false, Some(&bytes), 150);
        assert!(checks.index_present);
        assert!(!checks.index_whole_entries);
        assert!(!checks.index_monotonic);
        assert!(!checks.index_within_log);
    }
}
