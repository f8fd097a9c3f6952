//! The sparse offset index: entry codec, placement, floor lookup, validation.
//!
//! Contract:
//! - Inputs: batch positions and sizes as the writer appends them ([`IndexPlacer`]), entries
//!   to keep in memory ([`OffsetIndex`]), or the raw bytes of an index file read back from
//!   disk together with the size of its log ([`validate`], [`check`]).
//! - Outputs: the entries to write, a floor position to start a read from, or a named
//!   [`IndexCheck`] saying why an index read from disk cannot be trusted.
//! - Never: performs I/O, panics on bytes from a disk (only on programmer errors, which
//!   assert), or allocates more than the bytes it was handed (I10).
//!
//! Byte layout of one entry (see `docs/DESIGN.md`), [`ENTRY_BYTES`] = 8:
//!
//! | bytes | field |
//! |-------|-------|
//! | 0..4  | relative offset (u32 BE): batch base offset − segment base offset |
//! | 4..8  | file position (u32 BE) of that batch's first byte in the `.log` |
//!
//! We index a batch's *base* offset (Kafka indexes its last offset), so a floor lookup lands
//! on the batch that contains the target. Entries are strictly increasing in both fields and
//! point below the log's size (I4). There is never a need for an entry at position 0: a
//! lookup that finds no entry falls back to the segment start.

use crate::types::{FilePos, RelativeOffset};

/// Bytes of one encoded index entry.
pub const ENTRY_BYTES: usize = 8;

/// Kafka's default `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;

/// One index entry: a batch's base offset (relative to the segment) and its file position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// The batch's base offset minus the segment's base offset.
    pub relative_offset: RelativeOffset,
    /// Position of the batch's first byte in the segment's `.log`.
    pub position: FilePos,
}

impl IndexEntry {
    /// Encodes the entry as 8 big-endian bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[..4].copy_from_slice(&self.relative_offset.0.to_be_bytes());
        out[4..].copy_from_slice(&self.position.0.to_be_bytes());
        out
    }

    /// Decodes one entry. Any 8 bytes decode; whether the entry makes sense next to its
    /// neighbours is [`validate`]'s business.
    pub fn decode(bytes: &[u8; ENTRY_BYTES]) -> IndexEntry {
        IndexEntry {
            relative_offset: RelativeOffset(u32::from_be_bytes([
                bytes[0], bytes[1], bytes[2], bytes[3],
            ])),
            position: FilePos(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]])),
        }
    }
}

/// Encodes entries end to end, as an index file holds them.
pub fn encode_all(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for entry in entries {
        out.extend_from_slice(&entry.encode());
    }
    out
}

/// Decides where index entries go as batches are appended to one segment.
///
/// Kafka's rule: before adding a batch, if `index_interval_bytes` or more bytes were written
/// since the previous entry, the batch gets an entry and the count restarts at 0; then the
/// batch's size is added. The batch at position 0 never gets one (a lookup that finds no
/// entry starts at position 0 anyway). Pure state: the caller writes the entries it returns,
/// after the log bytes they point at (I4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexPlacer {
    interval_bytes: u32,
    bytes_since_last_entry: u64,
}

impl IndexPlacer {
    /// A placer for a new, empty segment.
    pub fn new(index_interval_bytes: u32) -> Self {
        Self::resume(index_interval_bytes, 0)
    }

    /// A placer that continues a segment reopened after `bytes_since_last_entry` bytes were
    /// written past its last entry (see [`IndexPlacer::bytes_since`]).
    pub fn resume(index_interval_bytes: u32, bytes_since_last_entry: u64) -> Self {
        IndexPlacer {
            interval_bytes: index_interval_bytes,
            bytes_since_last_entry,
        }
    }

    /// The count to [`resume`](IndexPlacer::resume) with, for a segment of `log_size_bytes`
    /// whose last index entry is `last` (`None` when the index is empty): the bytes from that
    /// entry's batch start to the end of the log.
    pub fn bytes_since(last: Option<&IndexEntry>, log_size_bytes: u64) -> u64 {
        let from = last.map_or(0, |e| e.position.as_u64());
        log_size_bytes.saturating_sub(from)
    }

    /// The configured interval.
    pub fn interval_bytes(&self) -> u32 {
        self.interval_bytes
    }

    /// Bytes written since the last entry was made (or since the segment began).
    pub fn bytes_since_last_entry(&self) -> u64 {
        self.bytes_since_last_entry
    }

    /// Records a batch of `batch_bytes` appended at `position` with base offset
    /// `relative_offset`; returns the entry to write for it, if any.
    pub fn on_batch(
        &mut self,
        position: FilePos,
        relative_offset: RelativeOffset,
        batch_bytes: u32,
    ) -> Option<IndexEntry> {
        let entry =
            if position.0 > 0 && self.bytes_since_last_entry >= u64::from(self.interval_bytes) {
                self.bytes_since_last_entry = 0;
                Some(IndexEntry {
                    relative_offset,
                    position,
                })
            } else {
                None
            };
        self.bytes_since_last_entry = self
            .bytes_since_last_entry
            .saturating_add(u64::from(batch_bytes));
        entry
    }
}

/// The in-memory offset index of one segment: entries strictly increasing in relative offset
/// and in position (I4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<IndexEntry>,
}

impl OffsetIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses and validates an index read back from disk (see [`validate`]).
    pub fn from_bytes(index_bytes: &[u8], log_size_bytes: u64) -> Result<Self, IndexCheck> {
        validate(index_bytes, log_size_bytes).map(|entries| OffsetIndex { entries })
    }

    /// Appends an entry.
    ///
    /// Panics unless the entry is strictly greater than the last one in both relative offset
    /// and position (I4): placement is the writer's own arithmetic, so a violation is a bug.
    pub fn push(&mut self, entry: IndexEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.relative_offset > last.relative_offset && entry.position > last.position,
                "index entry {entry:?} does not follow {last:?} (I4)"
            );
        }
        self.entries.push(entry);
    }

    /// The position to start reading from to find `target_relative`: the position of the
    /// largest entry whose relative offset is at or below the target, or 0 when there is none.
    pub fn lookup(&self, target_relative: RelativeOffset) -> FilePos {
        self.lookup_entry(target_relative)
            .map_or(FilePos(0), |e| e.position)
    }

    /// The largest entry whose relative offset is at or below `target_relative`.
    pub fn lookup_entry(&self, target_relative: RelativeOffset) -> Option<IndexEntry> {
        let after = self
            .entries
            .partition_point(|e| e.relative_offset <= target_relative);
        after.checked_sub(1).map(|i| self.entries[i])
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[IndexEntry] {
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
    pub fn last(&self) -> Option<&IndexEntry> {
        self.entries.last()
    }

    /// Drops every entry at or past `position` (the log is being truncated there, so those
    /// entries would point past its end, I4).
    pub fn truncate_to_position(&mut self, position: FilePos) {
        let keep = self.entries.partition_point(|e| e.position < position);
        self.entries.truncate(keep);
    }

    /// The index file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        encode_all(&self.entries)
    }
}

/// Why an index read back from disk cannot be trusted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexCheck {
    /// The length is not a multiple of [`ENTRY_BYTES`]: a torn trailing entry.
    #[error("index of {len_bytes} bytes ends in a partial entry")]
    PartialEntry {
        /// Length of the index in bytes.
        len_bytes: usize,
    },
    /// An entry's relative offset is not greater than the previous entry's.
    #[error("entry {entry_index}: relative offset {found} does not exceed {previous}")]
    OffsetNotIncreasing {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The previous entry's relative offset.
        previous: u32,
        /// This entry's relative offset.
        found: u32,
    },
    /// An entry's position is not greater than the previous entry's.
    #[error("entry {entry_index}: position {found} does not exceed {previous}")]
    PositionNotIncreasing {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The previous entry's position.
        previous: u32,
        /// This entry's position.
        found: u32,
    },
    /// An entry points at or past the end of the log.
    #[error(
        "entry {entry_index}: position {position} is at or past the log's end {log_size_bytes}"
    )]
    PositionPastLogEnd {
        /// Zero-based index of the offending entry.
        entry_index: usize,
        /// The entry's position.
        position: u32,
        /// Size of the log.
        log_size_bytes: u64,
    },
}

/// Decodes and validates an index file read back from disk, for a log of `log_size_bytes`.
///
/// Checks, in order: whole entries only, then for each entry in turn: relative offset and
/// position strictly greater than the previous entry's, position below the log's size (I4).
/// The first failure is returned, naming the entry. Allocates at most
/// `index_bytes.len() / ENTRY_BYTES` entries (I10). Does not check that positions are batch
/// starts: that needs the log (recovery rebuilds the index when in doubt).
pub fn validate(index_bytes: &[u8], log_size_bytes: u64) -> Result<Vec<IndexEntry>, IndexCheck> {
    if !whole_entries(index_bytes) {
        return Err(IndexCheck::PartialEntry {
            len_bytes: index_bytes.len(),
        });
    }
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(index_bytes.len() / ENTRY_BYTES);
    for (entry_index, entry) in entries_of(index_bytes).enumerate() {
        if let Some(previous) = entries.last() {
            if entry.relative_offset <= previous.relative_offset {
                return Err(IndexCheck::OffsetNotIncreasing {
                    entry_index,
                    previous: previous.relative_offset.0,
                    found: entry.relative_offset.0,
                });
            }
            if entry.position <= previous.position {
                return Err(IndexCheck::PositionNotIncreasing {
                    entry_index,
                    previous: previous.position.0,
                    found: entry.position.0,
                });
            }
        }
        if entry.position.as_u64() >= log_size_bytes {
            return Err(IndexCheck::PositionPastLogEnd {
                entry_index,
                position: entry.position.0,
                log_size_bytes,
            });
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// True when `index_bytes` holds whole entries only (no torn tail).
fn whole_entries(index_bytes: &[u8]) -> bool {
    // Not `is_multiple_of`: the workspace's minimum Rust is 1.80.
    index_bytes.chunks_exact(ENTRY_BYTES).remainder().is_empty()
}

/// Decodes the whole entries of `index_bytes`, ignoring a partial tail.
fn entries_of(index_bytes: &[u8]) -> impl Iterator<Item = IndexEntry> + '_ {
    index_bytes.chunks_exact(ENTRY_BYTES).map(|chunk| {
        let mut raw = [0u8; ENTRY_BYTES];
        raw.copy_from_slice(chunk);
        IndexEntry::decode(&raw)
    })
}

/// Each of [`validate`]'s checks evaluated on its own, for a decision table that wants to
/// name every way an index is off rather than the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IndexChecks {
    /// The length is a multiple of [`ENTRY_BYTES`].
    pub whole_entries: bool,
    /// Relative offsets strictly increase over the whole entries.
    pub offsets_increasing: bool,
    /// Positions strictly increase over the whole entries.
    pub positions_increasing: bool,
    /// Every whole entry's position is below the log's size.
    pub positions_in_log: bool,
}

impl IndexChecks {
    /// True when every check passed, which is exactly when [`validate`] succeeds.
    pub fn all_passed(&self) -> bool {
        self.whole_entries
            && self.offsets_increasing
            && self.positions_increasing
            && self.positions_in_log
    }
}

/// Evaluates each of [`validate`]'s checks independently over `index_bytes` (the entry checks
/// over the whole entries, ignoring a partial tail). Allocates nothing.
pub fn check(index_bytes: &[u8], log_size_bytes: u64) -> IndexChecks {
    let mut checks = IndexChecks {
        whole_entries: whole_entries(index_bytes),
        offsets_increasing: true,
        positions_increasing: true,
        positions_in_log: true,
    };
    let mut previous: Option<IndexEntry> = None;
    for entry in entries_of(index_bytes) {
        if let Some(prev) = previous {
            checks.offsets_increasing &= entry.relative_offset > prev.relative_offset;
            checks.positions_increasing &= entry.position > prev.position;
        }
        checks.positions_in_log &= entry.position.as_u64() < log_size_bytes;
        previous = Some(entry);
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(rel: u32, pos: u32) -> IndexEntry {
        IndexEntry {
            relative_offset: RelativeOffset(rel),
            position: FilePos(pos),
        }
    }

    #[test]
    fn entry_round_trips_big_endian() {
        let e = entry(0x0102_0304, 0xA0B0_C0D0);
        let bytes = e.encode();
        assert_eq!(bytes, [1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]);
        assert_eq!(IndexEntry::decode(&bytes), e);
    }

    #[test]
    fn placer_skips_position_zero_and_fires_at_interval() {
        let mut p = IndexPlacer::new(100);
        assert_eq!(p.on_batch(FilePos(0), RelativeOffset(0), 150), None);
        // 150 >= 100 bytes since the (virtual) start: this batch is indexed.
        assert_eq!(
            p.on_batch(FilePos(150), RelativeOffset(3), 40),
            Some(entry(3, 150))
        );
        assert_eq!(p.bytes_since_last_entry(), 40);
        assert_eq!(p.on_batch(FilePos(190), RelativeOffset(5), 59), None);
        // 99 bytes: not yet.
        assert_eq!(p.on_batch(FilePos(249), RelativeOffset(6), 1), None);
        // exactly 100: yes (">= interval").
        assert_eq!(
            p.on_batch(FilePos(250), RelativeOffset(7), 10),
            Some(entry(7, 250))
        );
    }

    #[test]
    fn placer_with_zero_interval_indexes_every_batch_but_the_first() {
        let mut p = IndexPlacer::new(0);
        assert_eq!(p.on_batch(FilePos(0), RelativeOffset(0), 70), None);
        assert_eq!(
            p.on_batch(FilePos(70), RelativeOffset(1), 70),
            Some(entry(1, 70))
        );
        assert_eq!(
            p.on_batch(FilePos(140), RelativeOffset(2), 70),
            Some(entry(2, 140))
        );
    }

    #[test]
    fn placer_resumes_where_a_fresh_one_would_be() {
        let sizes = [300u32, 1000, 2900, 4096, 10, 5000, 61, 4000, 100];
        let mut fresh = IndexPlacer::new(DEFAULT_INDEX_INTERVAL_BYTES);
        let mut index = OffsetIndex::new();
        let mut pos = 0u32;
        for (i, size) in sizes.iter().enumerate() {
            if let Some(e) = fresh.on_batch(FilePos(pos), RelativeOffset(i as u32), *size) {
                index.push(e);
            }
            pos += size;
            let since = IndexPlacer::bytes_since(index.last(), u64::from(pos));
            assert_eq!(since, fresh.bytes_since_last_entry(), "after batch {i}");
            let resumed = IndexPlacer::resume(DEFAULT_INDEX_INTERVAL_BYTES, since);
            assert_eq!(resumed, fresh);
        }
        assert!(!index.is_empty());
    }

    #[test]
    fn lookup_is_a_floor() {
        let mut idx = OffsetIndex::new();
        assert_eq!(idx.lookup(RelativeOffset(5)), FilePos(0));
        idx.push(entry(10, 1000));
        idx.push(entry(20, 2000));
        idx.push(entry(30, 3000));
        assert_eq!(idx.lookup(RelativeOffset(0)), FilePos(0));
        assert_eq!(idx.lookup(RelativeOffset(9)), FilePos(0));
        assert_eq!(idx.lookup(RelativeOffset(10)), FilePos(1000));
        assert_eq!(idx.lookup(RelativeOffset(19)), FilePos(1000));
        assert_eq!(idx.lookup(RelativeOffset(20)), FilePos(2000));
        assert_eq!(idx.lookup(RelativeOffset(u32::MAX)), FilePos(3000));
        assert_eq!(idx.lookup_entry(RelativeOffset(25)), Some(entry(20, 2000)));
    }

    #[test]
    #[should_panic(expected = "I4")]
    fn push_rejects_equal_offset_i4() {
        let mut idx = OffsetIndex::new();
        idx.push(entry(10, 1000));
        idx.push(entry(10, 2000));
    }

    #[test]
    #[should_panic(expected = "I4")]
    fn push_rejects_decreasing_position_i4() {
        let mut idx = OffsetIndex::new();
        idx.push(entry(10, 1000));
        idx.push(entry(11, 999));
    }

    #[test]
    fn truncate_drops_entries_at_or_past_position() {
        let mut idx = OffsetIndex::new();
        for i in 1..=5u32 {
            idx.push(entry(i * 10, i * 100));
        }
        idx.truncate_to_position(FilePos(301));
        assert_eq!(idx.last(), Some(&entry(30, 300)));
        idx.truncate_to_position(FilePos(300));
        assert_eq!(idx.last(), Some(&entry(20, 200)));
        idx.truncate_to_position(FilePos(0));
        assert!(idx.is_empty());
    }

    #[test]
    fn validate_round_trips_and_names_each_corruption_i4() {
        let good = [entry(1, 100), entry(5, 200), entry(9, 300)];
        let bytes = encode_all(&good);
        assert_eq!(validate(&bytes, 301), Ok(good.to_vec()));
        assert_eq!(validate(&[], 0), Ok(vec![]));
        assert_eq!(
            OffsetIndex::from_bytes(&bytes, 301).map(|i| i.encode()),
            Ok(bytes.clone())
        );

        assert_eq!(
            validate(&bytes[..bytes.len() - 3], 301),
            Err(IndexCheck::PartialEntry { len_bytes: 21 })
        );
        let bad = encode_all(&[entry(1, 100), entry(1, 200)]);
        assert_eq!(
            validate(&bad, 301),
            Err(IndexCheck::OffsetNotIncreasing {
                entry_index: 1,
                previous: 1,
                found: 1
            })
        );
        let bad = encode_all(&[entry(1, 100), entry(2, 300), entry(3, 250)]);
        assert_eq!(
            validate(&bad, 301),
            Err(IndexCheck::PositionNotIncreasing {
                entry_index: 2,
                previous: 300,
                found: 250
            })
        );
        assert_eq!(
            validate(&bytes, 300),
            Err(IndexCheck::PositionPastLogEnd {
                entry_index: 2,
                position: 300,
                log_size_bytes: 300
            })
        );
    }

    #[test]
    fn check_reports_every_failure_independently() {
        let ok = encode_all(&[entry(1, 100), entry(5, 200)]);
        assert!(check(&ok, 201).all_passed());
        let mut all_bad = encode_all(&[entry(5, 300), entry(5, 200)]);
        all_bad.push(0);
        let c = check(&all_bad, 250);
        assert_eq!(
            c,
            IndexChecks {
                whole_entries: false,
                offsets_increasing: false,
                positions_increasing: false,
                positions_in_log: false,
            }
        );
        assert!(validate(&all_bad, 250).is_err());
    }
}
