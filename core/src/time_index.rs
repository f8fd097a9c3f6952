//! The time index: entry codec, placement, floor lookup by timestamp, validation, and the
//! forward search from a floor to the first record at or after a timestamp (Kafka's
//! `.timeindex` and `LogSegment.findOffsetByTimestamp`, for ListOffsets by timestamp).
//!
//! Contract:
//! - Inputs: each appended batch's relative base offset, max timestamp and whether the offset
//!   index placed an entry for it ([`TimePlacer`]); entries to keep in memory ([`TimeIndex`]);
//!   the raw bytes of a `.timeindex` read back from disk with the segment's next relative
//!   offset ([`validate`]) and its offset index ([`check_against_offset_index`]); windows of
//!   segment bytes for a [`TimestampSearch`].
//! - Outputs: the entries to write, the floor entry to start a search from, a named
//!   [`TimeIndexCheck`] saying why a time index read from disk cannot be trusted, and the
//!   first record (or, for compressed batches, the first batch) at or after a timestamp.
//! - Never: performs I/O, decompresses, panics on bytes from a disk (only on programmer
//!   errors, which assert), or allocates more than the bytes it was handed (I10).
//!
//! Byte layout of one entry (Kafka's `.timeindex`), [`TIME_ENTRY_BYTES`] = 12:
//!
//! | bytes | field |
//! |-------|-------|
//! | 0..8  | timestamp (i64 BE): the segment's max timestamp so far |
//! | 8..12 | relative offset (u32 BE): base offset of the first batch that reached it |
//!
//! # Placement and meaning
//!
//! Entries are made at the offset index's placement points only (core's
//! [`IndexPlacer`](crate::index::IndexPlacer) decides when), and only when the segment's max
//! timestamp so far — over every batch up to and including the placed one — is greater than
//! the last entry's timestamp (the first entry must exceed [`NO_TIMESTAMP`], Kafka's empty
//! baseline). The entry's offset is the base offset of the *first* batch whose max timestamp
//! reached that max, as Kafka records `offsetOfMaxTimestampSoFar`. So entries are strictly
//! increasing in timestamp and in relative offset (I4, extended to the time index), and an entry
//! `(t, r)` promises: every batch before the one at `r` has a max timestamp below `t`.
//!
//! Hence the floor lookup ([`TimeIndex::lookup`]): the largest entry with timestamp `<= target`
//! gives a batch such that no earlier batch holds a record at or after `target`; the search
//! starts there (at the offset index's floor for that relative offset) and reads forward to the
//! first batch whose max timestamp reaches `target`. No entry means: start at the segment start.
//! Dropping entries keeps every lookup correct (the floor only moves back), so validation need
//! only be structural; it cannot see whole entries lost from the end (as for Kafka's indexes,
//! which carry no checksum either), which the crash model excludes: a sealed segment's files
//! were synced before it was sealed and the active segment is rebuilt after a crash (I5).
//!
//! The segment's exact max timestamp is the last entry's timestamp combined with the batches
//! after the offset index's last entry: any batch at or before that placement point that raised
//! the max made an entry there ([`TimePlacer::resume`] then [`TimePlacer::on_batch`]).

use crate::fetch::WindowMismatch;
use crate::index::IndexEntry;
use crate::record::{
    validate_batch_with, BatchError, BatchHeader, BatchView, Compression, ValidateOptions,
    HEADER_BYTES,
};
use crate::types::{FilePos, Offset, RelativeOffset};

/// Bytes of one encoded time index entry.
pub const TIME_ENTRY_BYTES: usize = 12;

/// Kafka's "no timestamp" value: the baseline the first entry must exceed, and the max
/// timestamp of a segment without batches.
pub const NO_TIMESTAMP: i64 = -1;

/// One time index entry: a max timestamp and the batch that first reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeIndexEntry {
    /// The segment's max timestamp at the placement point.
    pub timestamp_ms: i64,
    /// Base offset (relative to the segment) of the first batch whose max timestamp reached it.
    pub relative_offset: RelativeOffset,
}

impl TimeIndexEntry {
    /// Encodes the entry as 12 big-endian bytes.
    pub fn encode(&self) -> [u8; TIME_ENTRY_BYTES] {
        let mut out = [0u8; TIME_ENTRY_BYTES];
        out[..8].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        out[8..].copy_from_slice(&self.relative_offset.0.to_be_bytes());
        out
    }

    /// Decodes one entry. Any 12 bytes decode; whether the entry makes sense next to its
    /// neighbours is [`validate`]'s business.
    pub fn decode(bytes: &[u8; TIME_ENTRY_BYTES]) -> TimeIndexEntry {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&bytes[..8]);
        TimeIndexEntry {
            timestamp_ms: i64::from_be_bytes(ts),
            relative_offset: RelativeOffset(u32::from_be_bytes([
                bytes[8], bytes[9], bytes[10], bytes[11],
            ])),
        }
    }
}

/// Encodes entries end to end, as a `.timeindex` file holds them.
pub fn encode_all(entries: &[TimeIndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * TIME_ENTRY_BYTES);
    for entry in entries {
        out.extend_from_slice(&entry.encode());
    }
    out
}

/// Decides where time index entries go as batches are appended to one segment, and tracks the
/// segment's max timestamp and the first batch that reached it.
///
/// Pure state, advanced once per batch in file order; the caller writes the entries it returns
/// after the log bytes they point at (I4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimePlacer {
    max_timestamp_ms: i64,
    max_timestamp_relative: Option<RelativeOffset>,
    last_entry: Option<TimeIndexEntry>,
}

impl Default for TimePlacer {
    fn default() -> Self {
        Self::new()
    }
}

impl TimePlacer {
    /// A placer for a new, empty segment.
    pub fn new() -> Self {
        TimePlacer {
            max_timestamp_ms: NO_TIMESTAMP,
            max_timestamp_relative: None,
            last_entry: None,
        }
    }

    /// A placer for a segment reopened with `last_entry` as its time index's last entry. Feed
    /// it the batches from the offset index's last entry to the end of the log (placed:
    /// `false`) to recover the exact max timestamp (see the module documentation).
    pub fn resume(last_entry: Option<&TimeIndexEntry>) -> Self {
        match last_entry {
            None => Self::new(),
            Some(e) => TimePlacer {
                max_timestamp_ms: e.timestamp_ms,
                max_timestamp_relative: Some(e.relative_offset),
                last_entry: Some(*e),
            },
        }
    }

    /// Records a batch with base offset `relative_offset` and header max timestamp
    /// `batch_max_timestamp_ms`; `indexed` says whether the offset index placed an entry for
    /// it. Returns the time index entry to write, if any: only at a placement point, only when
    /// the max so far exceeds the last entry's timestamp. An entry that would not strictly
    /// follow the last one in relative offset (possible only after resuming from an index that
    /// does not belong to the log) is not made, so [`TimeIndex::push`] never sees one.
    pub fn on_batch(
        &mut self,
        relative_offset: RelativeOffset,
        batch_max_timestamp_ms: i64,
        indexed: bool,
    ) -> Option<TimeIndexEntry> {
        if batch_max_timestamp_ms > self.max_timestamp_ms {
            self.max_timestamp_ms = batch_max_timestamp_ms;
            self.max_timestamp_relative = Some(relative_offset);
        }
        if !indexed {
            return None;
        }
        let relative = self.max_timestamp_relative?;
        let follows = match self.last_entry {
            None => self.max_timestamp_ms > NO_TIMESTAMP,
            Some(last) => {
                self.max_timestamp_ms > last.timestamp_ms && relative > last.relative_offset
            }
        };
        if !follows {
            return None;
        }
        let entry = TimeIndexEntry {
            timestamp_ms: self.max_timestamp_ms,
            relative_offset: relative,
        };
        self.last_entry = Some(entry);
        Some(entry)
    }

    /// The largest batch max timestamp seen ([`NO_TIMESTAMP`] when none exceeded it).
    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms
    }

    /// Base offset (relative) of the first batch that reached [`max_timestamp_ms`](Self::max_timestamp_ms),
    /// `None` when no batch exceeded [`NO_TIMESTAMP`].
    pub fn max_timestamp_relative_offset(&self) -> Option<RelativeOffset> {
        self.max_timestamp_relative
    }

    /// The last entry made (or resumed from).
    pub fn last_entry(&self) -> Option<TimeIndexEntry> {
        self.last_entry
    }
}

/// The in-memory time index of one segment: entries strictly increasing in timestamp and in
/// relative offset (I4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
}

impl TimeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses and validates a time index read back from disk (see [`validate`]).
    pub fn from_bytes(
        time_index_bytes: &[u8],
        next_relative_offset: u64,
    ) -> Result<Self, TimeIndexCheck> {
        validate(time_index_bytes, next_relative_offset).map(|entries| TimeIndex { entries })
    }

    /// Appends an entry.
    ///
    /// Panics unless the entry's timestamp exceeds the last one's (or [`NO_TIMESTAMP`] for the
    /// first) and its relative offset is greater than the last one's (I4): placement is the
    /// writer's own arithmetic ([`TimePlacer`]), so a violation is a bug.
    pub fn push(&mut self, entry: TimeIndexEntry) {
        match self.entries.last() {
            Some(last) => assert!(
                entry.timestamp_ms > last.timestamp_ms
                    && entry.relative_offset > last.relative_offset,
                "time index entry {entry:?} does not follow {last:?} (I4)"
            ),
            None => assert!(
                entry.timestamp_ms > NO_TIMESTAMP,
                "time index entry {entry:?} is not above NO_TIMESTAMP (I4)"
            ),
        }
        self.entries.push(entry);
    }

    /// The largest entry whose timestamp is at or below `target_ms`: no batch before the one
    /// at its relative offset holds a record at or after `target_ms`. `None` means: search from
    /// the segment start.
    pub fn lookup(&self, target_ms: i64) -> Option<TimeIndexEntry> {
        let after = self
            .entries
            .partition_point(|e| e.timestamp_ms <= target_ms);
        after.checked_sub(1).map(|i| self.entries[i])
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[TimeIndexEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The last entry.
    pub fn last(&self) -> Option<&TimeIndexEntry> {
        self.entries.last()
    }

    /// The `.timeindex` file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        encode_all(&self.entries)
    }
}

/// Why a time index read back from disk cannot be trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimeIndexCheck {
    /// The length is not a multiple of [`TIME_ENTRY_BYTES`]: a torn trailing entry.
    #[error("time index of {len_bytes} bytes ends in a partial entry")]
    PartialEntry {
        /// Length of the time index in bytes.
        len_bytes: usize,
    },
    /// An entry's timestamp does not exceed the previous entry's ([`NO_TIMESTAMP`] for the first).
    #[error("entry {entry_index}: timestamp {found} does not exceed {previous}")]
    TimestampNotIncreasing {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The previous entry's timestamp, or [`NO_TIMESTAMP`].
        previous: i64,
        /// This entry's timestamp.
        found: i64,
    },
    /// An entry's relative offset does not exceed the previous entry's.
    #[error("entry {entry_index}: relative offset {found} does not exceed {previous}")]
    OffsetNotIncreasing {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The previous entry's relative offset.
        previous: u32,
        /// This entry's relative offset.
        found: u32,
    },
    /// An entry's relative offset is at or past the segment's next offset: no such batch.
    #[error("entry {entry_index}: relative offset {relative_offset} is at or past the segment's next relative offset {next_relative_offset}")]
    OffsetPastSegmentEnd {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The entry's relative offset.
        relative_offset: u32,
        /// The segment's next offset, relative to its base.
        next_relative_offset: u64,
    },
    /// More entries than the offset index has: each entry is made at an offset index
    /// placement point, at most one per point.
    #[error("{time_entries} time index entries for {offset_entries} offset index entries")]
    MoreEntriesThanOffsetIndex {
        /// Entries in the time index.
        time_entries: usize,
        /// Entries in the offset index.
        offset_entries: usize,
    },
    /// An entry's relative offset lies past the offset index's last entry: entries point at
    /// or before the placement point they were made at.
    #[error("entry {entry_index}: relative offset {relative_offset} is past the offset index's last entry {last_indexed}")]
    OffsetPastLastPlacement {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The entry's relative offset.
        relative_offset: u32,
        /// The offset index's last relative offset.
        last_indexed: u32,
    },
}

/// Decodes and validates a time index read back from disk, for a segment whose next offset is
/// `next_relative_offset` past its base.
///
/// Checks, in order: whole entries only, then for each entry in turn: timestamp strictly
/// greater than the previous entry's (the first above [`NO_TIMESTAMP`]), relative offset
/// strictly greater than the previous entry's, relative offset below the segment's next
/// offset (I4). The first failure is returned, naming the entry. Allocates at most
/// `time_index_bytes.len() / TIME_ENTRY_BYTES` entries (I10).
pub fn validate(
    time_index_bytes: &[u8],
    next_relative_offset: u64,
) -> Result<Vec<TimeIndexEntry>, TimeIndexCheck> {
    let chunks = time_index_bytes.chunks_exact(TIME_ENTRY_BYTES);
    if !chunks.remainder().is_empty() {
        return Err(TimeIndexCheck::PartialEntry {
            len_bytes: time_index_bytes.len(),
        });
    }
    let mut entries: Vec<TimeIndexEntry> =
        Vec::with_capacity(time_index_bytes.len() / TIME_ENTRY_BYTES);
    for (entry_index, chunk) in chunks.enumerate() {
        let mut raw = [0u8; TIME_ENTRY_BYTES];
        raw.copy_from_slice(chunk);
        let entry = TimeIndexEntry::decode(&raw);
        let previous_ts = entries.last().map_or(NO_TIMESTAMP, |p| p.timestamp_ms);
        if entry.timestamp_ms <= previous_ts {
            return Err(TimeIndexCheck::TimestampNotIncreasing {
                entry_index,
                previous: previous_ts,
                found: entry.timestamp_ms,
            });
        }
        if let Some(previous) = entries.last() {
            if entry.relative_offset <= previous.relative_offset {
                return Err(TimeIndexCheck::OffsetNotIncreasing {
                    entry_index,
                    previous: previous.relative_offset.0,
                    found: entry.relative_offset.0,
                });
            }
        }
        if u64::from(entry.relative_offset.0) >= next_relative_offset {
            return Err(TimeIndexCheck::OffsetPastSegmentEnd {
                entry_index,
                relative_offset: entry.relative_offset.0,
                next_relative_offset,
            });
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Cross-checks validated time index entries against the segment's offset index: at most one
/// entry per offset index entry, none past the last one (entries are made at placement points
/// and point at or before them). Catches a time index left from another incarnation of the
/// log. Allocates nothing.
pub fn check_against_offset_index(
    entries: &[TimeIndexEntry],
    offset_index: &[IndexEntry],
) -> Result<(), TimeIndexCheck> {
    if entries.len() > offset_index.len() {
        return Err(TimeIndexCheck::MoreEntriesThanOffsetIndex {
            time_entries: entries.len(),
            offset_entries: offset_index.len(),
        });
    }
    let (Some(last), Some(last_indexed)) = (entries.last(), offset_index.last()) else {
        return Ok(()); // no time entries (an empty offset index implies none)
    };
    if last.relative_offset > last_indexed.relative_offset {
        return Err(TimeIndexCheck::OffsetPastLastPlacement {
            entry_index: entries.len() - 1,
            relative_offset: last.relative_offset.0,
            last_indexed: last_indexed.relative_offset.0,
        });
    }
    Ok(())
}

/// Where a timestamp search landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampHit {
    /// The offset of the first record at or after the target (of the batch, when inexact).
    pub offset: Offset,
    /// That record's timestamp (the batch's max timestamp, when inexact).
    pub timestamp_ms: i64,
    /// True when a record was found; false for a compressed or log-append-time batch, which
    /// answers with its base offset and max timestamp (the broker never decompresses).
    pub exact: bool,
}

/// The first record at or after `target_ms` in one whole batch, at offset `min_offset` or later.
///
/// `None` when the batch's max timestamp is below the target, its last offset below
/// `min_offset`, or (uncompressed) no record qualifies (a header whose max timestamp
/// overstates its records). An uncompressed CreateTime batch is walked record by record
/// (timestamp = base timestamp + delta); a compressed or LogAppendTime batch answers with
/// `max(base offset, min_offset)` and its max timestamp, inexact.
pub fn search_batch(
    batch: &BatchView<'_>,
    target_ms: i64,
    min_offset: Offset,
) -> Option<TimestampHit> {
    let header = &batch.header;
    if header.max_timestamp < target_ms || header.last_offset() < min_offset {
        return None;
    }
    let uncompressed = matches!(header.compression(), Ok(Compression::None));
    if !uncompressed || header.is_log_append_time() {
        return Some(TimestampHit {
            offset: header.base_offset.max(min_offset),
            timestamp_ms: header.max_timestamp,
            exact: false,
        });
    }
    batch.records().map_while(Result::ok).find_map(|record| {
        let offset = header.base_offset.0.checked_add(record.offset_delta)?;
        let timestamp_ms = header.base_timestamp.wrapping_add(record.timestamp_delta);
        (timestamp_ms >= target_ms && offset >= min_offset.0).then_some(TimestampHit {
            offset: Offset(offset),
            timestamp_ms,
            exact: true,
        })
    })
}

/// Why a timestamp search failed. Bytes below the size snapshot were validated before they were
/// written (I3), so every variant but [`SearchError::WindowMismatch`] means corruption.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// A batch below the size snapshot failed validation.
    #[error("corrupt batch at {pos}: {source}")]
    BadBatch {
        /// Where the batch starts.
        pos: FilePos,
        /// What validation found.
        source: BatchError,
    },
    /// A batch's extent (or a header) runs past the size snapshot.
    #[error("batch at {pos} of {total_bytes} bytes runs past the segment end {end}")]
    BatchPastEnd {
        /// Where the batch starts.
        pos: FilePos,
        /// The batch's declared total size (or the bytes left, for a torn header).
        total_bytes: u64,
        /// The size snapshot.
        end: FilePos,
    },
    /// The window fed does not start where asked or is too short to make progress (a short
    /// read, or a caller bug).
    #[error(transparent)]
    WindowMismatch(WindowMismatch),
}

/// What a [`TimestampSearch`] needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchStep {
    /// Read `len` bytes at `pos` (never past the size snapshot) and feed them.
    Need {
        /// Where to read.
        pos: FilePos,
        /// How many bytes.
        len: usize,
    },
    /// The search is over: the hit, or `None` when no batch below the snapshot qualifies.
    Done(Option<TimestampHit>),
}

/// A sans-IO search of one segment, from a floor position to the first batch whose max
/// timestamp reaches the target, below a size snapshot (I2); see [`search_batch`] for the
/// answer within that batch.
///
/// Drive it as: loop { match `next_step()` { Need → read, `feed`; Done → stop } }. Windows are
/// `window_bytes` long (at least a header), capped at the snapshot; a batch larger than a
/// window is asked for whole, exactly, once. Every feed consumes a batch, raises the request
/// to a whole batch, ends the search or fails, so it never loops without progress.
#[derive(Clone, Debug)]
pub struct TimestampSearch {
    target_ms: i64,
    min_offset: Offset,
    pos: u64,
    end: u64,
    window_bytes: usize,
    batch_len_at_pos: Option<usize>,
    done: Option<Option<TimestampHit>>,
}

impl TimestampSearch {
    /// Searches for the first record at or after `target_ms` with an offset of at least
    /// `min_offset`, reading from `start` (a batch start: the time index floor resolved through
    /// the offset index) up to the size snapshot `end`.
    pub fn new(
        target_ms: i64,
        min_offset: Offset,
        start: FilePos,
        end: FilePos,
        window_bytes: usize,
    ) -> Self {
        TimestampSearch {
            target_ms,
            min_offset,
            pos: start.as_u64(),
            end: end.as_u64(),
            window_bytes: window_bytes.max(HEADER_BYTES),
            batch_len_at_pos: None,
            done: (start >= end).then_some(None),
        }
    }

    /// What to do next. Calling it again without a feed returns the same step.
    pub fn next_step(&self) -> SearchStep {
        match self.done {
            Some(hit) => SearchStep::Done(hit),
            None => SearchStep::Need {
                pos: FilePos(self.pos as u32),
                len: self.request_len(),
            },
        }
    }

    fn request_len(&self) -> usize {
        let left = self.end - self.pos;
        let want = self.batch_len_at_pos.unwrap_or(self.window_bytes);
        usize::try_from(left).map_or(want, |left| want.min(left))
    }

    /// Consumes `window`, read at `window_pos` (the position of the last request): every whole
    /// batch in it, until one answers. Bytes past the snapshot are ignored. Feeding a finished
    /// search does nothing.
    pub fn feed(&mut self, window_pos: FilePos, window: &[u8]) -> Result<(), SearchError> {
        if self.done.is_some() {
            return Ok(());
        }
        let need_bytes = self.request_len();
        let mismatch = SearchError::WindowMismatch(WindowMismatch {
            window_pos,
            window_bytes: window.len(),
            pos: FilePos(self.pos as u32),
            need_bytes,
        });
        if window_pos.as_u64() != self.pos {
            return Err(mismatch);
        }
        let usable = usize::try_from(self.end - self.pos)
            .map_or(window.len(), |left| left.min(window.len()));
        let window = &window[..usable];
        let opts = ValidateOptions::stored();
        let mut cursor = 0usize;
        loop {
            if self.pos >= self.end {
                self.done = Some(None);
                return Ok(());
            }
            let rest = &window[cursor..];
            let at = FilePos(self.pos as u32);
            let left = self.end - self.pos;
            if left < HEADER_BYTES as u64 {
                return Err(SearchError::BatchPastEnd {
                    pos: at,
                    total_bytes: left,
                    end: FilePos(self.end as u32),
                });
            }
            if rest.len() < HEADER_BYTES {
                return if cursor == 0 { Err(mismatch) } else { Ok(()) };
            }
            let header = BatchHeader::parse(rest)
                .map_err(|source| SearchError::BadBatch { pos: at, source })?;
            let total = header.total_bytes();
            if total as u64 > left {
                return Err(SearchError::BatchPastEnd {
                    pos: at,
                    total_bytes: total as u64,
                    end: FilePos(self.end as u32),
                });
            }
            if total > rest.len() {
                if cursor > 0 {
                    return Ok(());
                }
                if self.batch_len_at_pos.is_some() {
                    return Err(mismatch);
                }
                self.batch_len_at_pos = Some(total);
                return Ok(());
            }
            let header = validate_batch_with(&rest[..total], opts)
                .map_err(|source| SearchError::BadBatch { pos: at, source })?;
            let view = BatchView {
                start: cursor,
                bytes: &rest[..total],
                header,
            };
            if let Some(hit) = search_batch(&view, self.target_ms, self.min_offset) {
                self.done = Some(Some(hit));
                return Ok(());
            }
            cursor += total;
            self.pos += total as u64;
            self.batch_len_at_pos = None;
        }
    }
}

/// Searches an in-memory segment from `start` to `end` with `window_bytes` windows (for tests;
/// callers with files drive [`TimestampSearch`] themselves).
pub fn search_slice(
    segment_bytes: &[u8],
    target_ms: i64,
    min_offset: Offset,
    start: FilePos,
    end: FilePos,
    window_bytes: usize,
) -> Result<Option<TimestampHit>, SearchError> {
    let mut search = TimestampSearch::new(target_ms, min_offset, start, end, window_bytes);
    loop {
        match search.next_step() {
            SearchStep::Done(hit) => return Ok(hit),
            SearchStep::Need { pos, len } => {
                let from = pos.as_usize().min(segment_bytes.len());
                let to = from.saturating_add(len).min(segment_bytes.len());
                search.feed(pos, &segment_bytes[from..to])?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexPlacer, OffsetIndex};
    use crate::record::{BatchBuilder, NewRecord};

    fn te(ts: i64, rel: u32) -> TimeIndexEntry {
        TimeIndexEntry {
            timestamp_ms: ts,
            relative_offset: RelativeOffset(rel),
        }
    }

    fn ie(rel: u32, pos: u32) -> IndexEntry {
        IndexEntry {
            relative_offset: RelativeOffset(rel),
            position: FilePos(pos),
        }
    }

    /// A batch with one record per timestamp, base offset `base`.
    fn batch(base: i64, timestamps: &[i64]) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for ts in timestamps {
            b.push(&NewRecord {
                key: None,
                value: Some(b"v"),
                headers: vec![],
                timestamp_ms: *ts,
            });
        }
        b.build(Offset(base))
    }

    #[test]
    fn entry_round_trips_big_endian() {
        let e = te(0x0102_0304_0506_0708, 0xA0B0_C0D0);
        let bytes = e.encode();
        assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8, 0xA0, 0xB0, 0xC0, 0xD0]);
        assert_eq!(TimeIndexEntry::decode(&bytes), e);
        let neg = te(-5, 1);
        assert_eq!(TimeIndexEntry::decode(&neg.encode()), neg);
    }

    #[test]
    fn placer_enters_max_so_far_at_placement_points_only() {
        let mut p = TimePlacer::new();
        // Not a placement point: tracked, not entered.
        assert_eq!(p.on_batch(RelativeOffset(0), 100, false), None);
        assert_eq!(p.max_timestamp_ms(), 100);
        // A placement point with a lower batch timestamp: the entry carries the max so far
        // and the batch that first reached it.
        assert_eq!(p.on_batch(RelativeOffset(3), 50, true), Some(te(100, 0)));
        // No increase since: no entry.
        assert_eq!(p.on_batch(RelativeOffset(5), 100, true), None);
        assert_eq!(p.on_batch(RelativeOffset(6), 200, false), None);
        assert_eq!(p.on_batch(RelativeOffset(7), 200, false), None);
        assert_eq!(p.on_batch(RelativeOffset(8), 150, true), Some(te(200, 6)));
        assert_eq!(p.max_timestamp_relative_offset(), Some(RelativeOffset(6)));
    }

    #[test]
    fn placer_ignores_no_timestamp() {
        let mut p = TimePlacer::new();
        assert_eq!(p.on_batch(RelativeOffset(1), -1, true), None);
        assert_eq!(p.on_batch(RelativeOffset(2), -7, true), None);
        assert_eq!(p.max_timestamp_ms(), NO_TIMESTAMP);
        assert_eq!(p.max_timestamp_relative_offset(), None);
        assert_eq!(p.on_batch(RelativeOffset(3), 0, true), Some(te(0, 3)));
    }

    #[test]
    fn placer_resumes_from_last_entry() {
        let mut p = TimePlacer::resume(Some(&te(500, 10)));
        assert_eq!(p.max_timestamp_ms(), 500);
        // A batch that does not raise the max, at a placement point: nothing.
        assert_eq!(p.on_batch(RelativeOffset(12), 400, true), None);
        assert_eq!(p.on_batch(RelativeOffset(13), 600, false), None);
        assert_eq!(p.on_batch(RelativeOffset(14), 1, true), Some(te(600, 13)));
        // An inconsistent resume (a batch before the last entry raising the max) makes no entry
        // that would break the order.
        let mut p = TimePlacer::resume(Some(&te(500, 10)));
        assert_eq!(p.on_batch(RelativeOffset(4), 900, true), None);
        assert_eq!(p.max_timestamp_ms(), 900);
    }

    #[test]
    fn lookup_is_a_floor_by_timestamp() {
        let mut idx = TimeIndex::new();
        assert_eq!(idx.lookup(1_000), None);
        idx.push(te(100, 2));
        idx.push(te(200, 5));
        idx.push(te(300, 9));
        assert_eq!(idx.lookup(99), None);
        assert_eq!(idx.lookup(100), Some(te(100, 2)));
        assert_eq!(idx.lookup(199), Some(te(100, 2)));
        assert_eq!(idx.lookup(200), Some(te(200, 5)));
        assert_eq!(idx.lookup(i64::MAX), Some(te(300, 9)));
        assert_eq!(idx.lookup(i64::MIN), None);
    }

    #[test]
    #[should_panic(expected = "I4")]
    fn push_rejects_equal_timestamp_i4() {
        let mut idx = TimeIndex::new();
        idx.push(te(100, 1));
        idx.push(te(100, 2));
    }

    #[test]
    #[should_panic(expected = "I4")]
    fn push_rejects_equal_offset_i4() {
        let mut idx = TimeIndex::new();
        idx.push(te(100, 1));
        idx.push(te(101, 1));
    }

    #[test]
    #[should_panic(expected = "I4")]
    fn push_rejects_no_timestamp_i4() {
        TimeIndex::new().push(te(-1, 1));
    }

    #[test]
    fn validate_round_trips_and_names_each_corruption_i4() {
        let good = [te(10, 1), te(20, 5), te(30, 9)];
        let bytes = encode_all(&good);
        assert_eq!(validate(&bytes, 10), Ok(good.to_vec()));
        assert_eq!(validate(&[], 0), Ok(vec![]));
        assert_eq!(
            TimeIndex::from_bytes(&bytes, 10).map(|i| i.encode()),
            Ok(bytes.clone())
        );
        assert_eq!(
            validate(&bytes[..bytes.len() - 5], 10),
            Err(TimeIndexCheck::PartialEntry { len_bytes: 31 })
        );
        assert_eq!(
            validate(&encode_all(&[te(10, 1), te(10, 2)]), 10),
            Err(TimeIndexCheck::TimestampNotIncreasing {
                entry_index: 1,
                previous: 10,
                found: 10
            })
        );
        assert_eq!(
            validate(&encode_all(&[te(-1, 1)]), 10),
            Err(TimeIndexCheck::TimestampNotIncreasing {
                entry_index: 0,
                previous: NO_TIMESTAMP,
                found: -1
            })
        );
        assert_eq!(
            validate(&encode_all(&[te(10, 3), te(11, 2)]), 10),
            Err(TimeIndexCheck::OffsetNotIncreasing {
                entry_index: 1,
                previous: 3,
                found: 2
            })
        );
        assert_eq!(
            validate(&bytes, 9),
            Err(TimeIndexCheck::OffsetPastSegmentEnd {
                entry_index: 2,
                relative_offset: 9,
                next_relative_offset: 9
            })
        );
    }

    #[test]
    fn validate_allocates_by_bytes_present_i10() {
        // A huge-looking file is only as many entries as its bytes hold.
        let bytes = vec![0xFFu8; TIME_ENTRY_BYTES * 3];
        assert!(validate(&bytes, u64::MAX).is_err());
        let v = validate(&[], u64::MAX).expect("empty");
        assert_eq!(v.capacity(), 0);
    }

    #[test]
    fn cross_check_against_offset_index() {
        let offsets = [ie(3, 100), ie(8, 200)];
        assert_eq!(check_against_offset_index(&[], &[]), Ok(()));
        assert_eq!(
            check_against_offset_index(&[te(5, 2), te(6, 8)], &offsets),
            Ok(())
        );
        assert_eq!(
            check_against_offset_index(&[te(5, 2)], &[]),
            Err(TimeIndexCheck::MoreEntriesThanOffsetIndex {
                time_entries: 1,
                offset_entries: 0
            })
        );
        assert_eq!(
            check_against_offset_index(&[te(5, 2), te(6, 9)], &offsets),
            Err(TimeIndexCheck::OffsetPastLastPlacement {
                entry_index: 1,
                relative_offset: 9,
                last_indexed: 8
            })
        );
    }

    /// Builds a segment from batches of record timestamps, with both indexes as the writer
    /// makes them; returns the bytes, the batch starts and the indexes.
    fn segment(batches: &[Vec<i64>], interval: u32) -> (Vec<u8>, OffsetIndex, TimeIndex) {
        let mut out = Vec::new();
        let mut placer = IndexPlacer::new(interval);
        let mut time = TimePlacer::new();
        let (mut oi, mut ti) = (OffsetIndex::new(), TimeIndex::new());
        let mut next = 0i64;
        for ts in batches {
            let b = batch(next, ts);
            let rel = RelativeOffset(next as u32);
            let e = placer.on_batch(FilePos(out.len() as u32), rel, b.len() as u32);
            if let Some(e) = e {
                oi.push(e);
            }
            let max = ts.iter().copied().max().unwrap_or(-1);
            if let Some(t) = time.on_batch(rel, max, e.is_some()) {
                ti.push(t);
            }
            out.extend_from_slice(&b);
            next += ts.len() as i64;
        }
        (out, oi, ti)
    }

    fn search(
        bytes: &[u8],
        oi: &OffsetIndex,
        ti: &TimeIndex,
        target: i64,
        window: usize,
    ) -> Option<TimestampHit> {
        let start = ti
            .lookup(target)
            .map_or(FilePos(0), |e| oi.lookup(e.relative_offset));
        search_slice(
            bytes,
            target,
            Offset(0),
            start,
            FilePos(bytes.len() as u32),
            window,
        )
        .expect("search")
    }

    #[test]
    fn search_finds_the_exact_first_record() {
        let batches = vec![
            vec![100, 90, 120],
            vec![50, 60],
            vec![130, 125],
            vec![10],
            vec![200, 140],
        ];
        let (bytes, oi, ti) = segment(&batches, 0);
        assert!(!ti.is_empty());
        let hit = |t| search(&bytes, &oi, &ti, t, 64).map(|h| (h.offset.0, h.timestamp_ms));
        assert_eq!(hit(0), Some((0, 100)));
        assert_eq!(hit(95), Some((0, 100)));
        assert_eq!(hit(101), Some((2, 120)));
        assert_eq!(hit(121), Some((5, 130)));
        assert_eq!(hit(126), Some((5, 130)));
        assert_eq!(hit(131), Some((8, 200)));
        assert_eq!(hit(200), Some((8, 200)));
        assert_eq!(hit(201), None);
    }

    #[test]
    fn compressed_batch_answers_with_its_base_offset() {
        let mut b = BatchBuilder::new();
        for ts in [5i64, 30, 20] {
            b.push(&NewRecord {
                key: None,
                value: Some(b"x"),
                headers: vec![],
                timestamp_ms: ts,
            });
        }
        // Records are not really compressed: the broker never looks inside.
        let bytes = b.build_with(Offset(7), Compression::Gzip, b.records_bytes());
        let end = FilePos(bytes.len() as u32);
        let hit = search_slice(&bytes, 20, Offset(0), FilePos(0), end, 4096).expect("search");
        assert_eq!(
            hit,
            Some(TimestampHit {
                offset: Offset(7),
                timestamp_ms: 30,
                exact: false
            })
        );
        assert_eq!(
            search_slice(&bytes, 31, Offset(0), FilePos(0), end, 4096),
            Ok(None)
        );
    }

    #[test]
    fn big_batch_is_requested_whole_once() {
        let batches = vec![vec![1; 200], vec![2; 3]];
        let (bytes, _, _) = segment(&batches, 4096);
        let mut s =
            TimestampSearch::new(2, Offset(0), FilePos(0), FilePos(bytes.len() as u32), 100);
        let first = s.next_step();
        assert_eq!(
            first,
            SearchStep::Need {
                pos: FilePos(0),
                len: 100
            }
        );
        s.feed(FilePos(0), &bytes[..100]).expect("feed");
        let SearchStep::Need { pos, len } = s.next_step() else {
            panic!("done too early")
        };
        assert!(len > 100 && pos == FilePos(0));
        // The same short window again cannot make it loop: it is an error.
        assert!(matches!(
            s.feed(FilePos(0), &bytes[..100]),
            Err(SearchError::WindowMismatch { .. })
        ));
        let hit = search_slice(
            &bytes,
            2,
            Offset(0),
            FilePos(0),
            FilePos(bytes.len() as u32),
            100,
        )
        .expect("search");
        assert_eq!(hit.map(|h| h.offset), Some(Offset(200)));
    }

    #[test]
    fn corrupt_and_torn_bytes_are_errors_not_panics() {
        let (mut bytes, _, _) = segment(&[vec![1, 2], vec![3]], 4096);
        let end = FilePos(bytes.len() as u32);
        let torn = FilePos(bytes.len() as u32 - 3);
        assert!(search_slice(&bytes, 3, Offset(0), FilePos(0), torn, 4096).is_err());
        bytes[30] ^= 0xFF;
        assert!(matches!(
            search_slice(&bytes, 3, Offset(0), FilePos(0), end, 4096),
            Err(SearchError::BadBatch { .. })
        ));
        let garbage = vec![0xFFu8; 500];
        assert!(search_slice(&garbage, 3, Offset(0), FilePos(0), FilePos(500), 64).is_err());
    }

    #[test]
    fn min_offset_skips_earlier_records() {
        let (bytes, _, _) = segment(&[vec![10, 20, 30]], 4096);
        let end = FilePos(bytes.len() as u32);
        let hit = search_slice(&bytes, 0, Offset(2), FilePos(0), end, 4096).expect("search");
        assert_eq!(
            hit.map(|h| (h.offset, h.timestamp_ms)),
            Some((Offset(2), 30))
        );
    }
}
