//! One segment: `<20-digit base offset>.log`, its `.index` and its `.timeindex`, open, with the
//! in-memory indexes and the published size.
//!
//! Contract:
//! - A [`Segment`] owns its three open files. It is shared through `Rc`: a read that snapshots
//!   a segment keeps its files open even if retention deletes the segment meanwhile (POSIX
//!   unlink semantics, see [`Backend::remove_file`]).
//! - The published size (`size_bytes`) only grows while the segment is written, and only after
//!   a write has completed: bytes below it never change (I2). Readers snapshot it and read
//!   below the snapshot only.
//! - An index entry — offset or time — is written after the log bytes it points at (I4); the
//!   in-memory indexes and the placers' state advance only when every write succeeded.
//! - The max timestamp is exact: the time placer sees every batch (core's
//!   [`TimePlacer`]), and it is published in the same step as the size, so a reader's
//!   snapshot of both agrees.
//! - Never: validates batches (the partition did, I3), decides placement itself (core's
//!   [`IndexPlacer`] and [`TimePlacer`] do), or holds a `RefCell` borrow across an `.await`.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use minikafka_core::backend::{parts_len, Backend, BackendFile, OpenMode};
use minikafka_core::index::{IndexEntry, IndexPlacer, OffsetIndex, ENTRY_BYTES};
use minikafka_core::partition::SegmentState as MachineSegment;
use minikafka_core::record::BatchHeader;
use minikafka_core::time_index::{TimeIndex, TimeIndexEntry, TimePlacer, TIME_ENTRY_BYTES};
use minikafka_core::types::{FilePos, Offset, RelativeOffset};

/// Extension of a segment's log file.
pub const LOG_SUFFIX: &str = "log";
/// Extension of a segment's offset index file.
pub const INDEX_SUFFIX: &str = "index";
/// Extension of a segment's time index file.
pub const TIME_INDEX_SUFFIX: &str = "timeindex";
/// Extension of a producer state snapshot (`<20-digit offset>.snapshot`, see
/// [`super::producers`]).
pub const SNAPSHOT_SUFFIX: &str = "snapshot";
/// Suffix of files being written before an atomic rename; removed at startup.
pub const TMP_SUFFIX: &str = "tmp";
/// Suffix of a segment's aborted-transaction index.
pub const TXN_INDEX_SUFFIX: &str = "txnindex";
/// Suffix Kafka gives files scheduled for deletion; removed at startup.
pub const DELETED_SUFFIX: &str = "deleted";

/// The file name of a segment's log: the base offset in 20 digits, then `.log`.
pub fn log_file_name(base_offset: Offset) -> String {
    format!("{:020}.{LOG_SUFFIX}", base_offset.0)
}

/// The file name of a segment's offset index.
pub fn index_file_name(base_offset: Offset) -> String {
    format!("{:020}.{INDEX_SUFFIX}", base_offset.0)
}

/// The file name of a segment's time index.
pub fn time_index_file_name(base_offset: Offset) -> String {
    format!("{:020}.{TIME_INDEX_SUFFIX}", base_offset.0)
}

/// The file name of a segment's aborted-transaction index (`super::txn_index`).
pub fn txn_index_file_name(base_offset: Offset) -> String {
    format!("{:020}.{TXN_INDEX_SUFFIX}", base_offset.0)
}

/// The file name of a producer state snapshot covering the batches below `offset`.
pub fn snapshot_file_name(offset: Offset) -> String {
    format!("{:020}.{SNAPSHOT_SUFFIX}", offset.0)
}

/// The directory of a partition's segments: `<data_dir>/<topic>-<partition>`.
pub fn partition_dir(data_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    data_dir.join(format!("{topic}-{partition}"))
}

/// What a file in a partition directory is, judged by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentFile {
    /// `<base>.log`.
    Log(Offset),
    /// `<base>.index`.
    Index(Offset),
    /// `<base>.timeindex`.
    TimeIndex(Offset),
    /// `<base>.txnindex`: the segment's aborted transactions (`super::txn_index`).
    TxnIndex(Offset),
    /// `<offset>.snapshot`: producer state below that offset (not tied to a segment).
    Snapshot(Offset),
    /// A leftover of an interrupted operation (`*.tmp`, `*.deleted`): safe to remove.
    Stray,
    /// Anything else: left alone.
    Unknown,
}

/// Classifies a file name found in a partition directory.
pub fn classify(file_name: &str) -> SegmentFile {
    if file_name.ends_with(&format!(".{TMP_SUFFIX}"))
        || file_name.ends_with(&format!(".{DELETED_SUFFIX}"))
    {
        return SegmentFile::Stray;
    }
    let Some((stem, ext)) = file_name.split_once('.') else {
        return SegmentFile::Unknown;
    };
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return SegmentFile::Unknown;
    }
    let Ok(base) = stem.parse::<i64>() else {
        return SegmentFile::Unknown;
    };
    match ext {
        LOG_SUFFIX => SegmentFile::Log(Offset(base)),
        INDEX_SUFFIX => SegmentFile::Index(Offset(base)),
        TIME_INDEX_SUFFIX => SegmentFile::TimeIndex(Offset(base)),
        SNAPSHOT_SUFFIX => SegmentFile::Snapshot(Offset(base)),
        TXN_INDEX_SUFFIX => SegmentFile::TxnIndex(Offset(base)),
        _ => SegmentFile::Unknown,
    }
}

/// The recovered facts a [`Segment`] starts from.
#[derive(Clone, Debug)]
pub(crate) struct SegmentState {
    pub size_bytes: u64,
    pub next_offset: Offset,
    pub index: OffsetIndex,
    pub index_file_entries: u64,
    pub time_index: TimeIndex,
    pub time_index_file_entries: u64,
    /// Placer state after the last batch: carries the exact max timestamp.
    pub time_placer: TimePlacer,
}

/// One open segment.
pub struct Segment<B: Backend> {
    base_offset: Offset,
    log_path: PathBuf,
    index_path: PathBuf,
    time_index_path: PathBuf,
    log: B::File,
    index_file: B::File,
    time_index_file: B::File,
    index: RefCell<OffsetIndex>,
    placer: RefCell<IndexPlacer>,
    time_index: RefCell<TimeIndex>,
    /// Holds the segment's exact max timestamp and the first batch that reached it.
    time_placer: RefCell<TimePlacer>,
    /// Like `index_file_entries`, for the time index.
    time_index_file_entries: Cell<u64>,
    /// Published size (I2).
    size_bytes: Cell<u64>,
    /// Entry slots of the index file that may hold bytes: the in-memory entries, plus one
    /// when an entry write failed (the next entry overwrites it; a sync cuts it).
    index_file_entries: Cell<u64>,
    next_offset: Cell<Offset>,
    created_ms: i64,
}

impl<B: Backend> Segment<B> {
    /// Creates a new, empty segment at `base_offset` in `dir` (truncating leftovers of the
    /// same name) and syncs the directory so the files' existence is durable.
    pub async fn create(
        backend: &B,
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u32,
        now_ms: i64,
    ) -> io::Result<Self> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let log = backend.open(&log_path, OpenMode::ReadWriteCreate).await?;
        log.truncate(0).await?;
        let index_file = backend.open(&index_path, OpenMode::ReadWriteCreate).await?;
        index_file.truncate(0).await?;
        let time_index_path = dir.join(time_index_file_name(base_offset));
        let time_index_file = backend
            .open(&time_index_path, OpenMode::ReadWriteCreate)
            .await?;
        time_index_file.truncate(0).await?;
        backend.sync_dir(dir).await?;
        let state = SegmentState {
            size_bytes: 0,
            next_offset: base_offset,
            index: OffsetIndex::new(),
            index_file_entries: 0,
            time_index: TimeIndex::new(),
            time_index_file_entries: 0,
            time_placer: TimePlacer::new(),
        };
        Ok(Self::from_parts(
            base_offset,
            (log_path, log),
            (index_path, index_file),
            (time_index_path, time_index_file),
            state,
            index_interval_bytes,
            now_ms,
        ))
    }

    /// Assembles a segment from open files and recovered state.
    pub(crate) fn from_parts(
        base_offset: Offset,
        log: (PathBuf, B::File),
        index: (PathBuf, B::File),
        time_index: (PathBuf, B::File),
        state: SegmentState,
        index_interval_bytes: u32,
        created_ms: i64,
    ) -> Self {
        let since = IndexPlacer::bytes_since(state.index.last(), state.size_bytes);
        Segment {
            base_offset,
            log_path: log.0,
            index_path: index.0,
            time_index_path: time_index.0,
            log: log.1,
            index_file: index.1,
            time_index_file: time_index.1,
            index: RefCell::new(state.index),
            placer: RefCell::new(IndexPlacer::resume(index_interval_bytes, since)),
            time_index: RefCell::new(state.time_index),
            time_placer: RefCell::new(state.time_placer),
            time_index_file_entries: Cell::new(state.time_index_file_entries),
            size_bytes: Cell::new(state.size_bytes),
            index_file_entries: Cell::new(state.index_file_entries),
            next_offset: Cell::new(state.next_offset),
            created_ms,
        }
    }

    /// The offset of the segment's first batch.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// The published size in bytes (I2): everything below it is whole, valid batches.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.get()
    }

    /// The offset after the segment's last batch.
    pub fn next_offset(&self) -> Offset {
        self.next_offset.get()
    }

    /// The largest batch max timestamp in the segment (-1 when none): exact, also for a
    /// segment trusted at startup (its time index's last entry and the tail after the offset
    /// index's last entry). Timestamps below -1 count as -1 (Kafka's "no timestamp").
    pub fn max_timestamp_ms(&self) -> i64 {
        self.time_placer.borrow().max_timestamp_ms()
    }

    /// Base offset of the first batch whose max timestamp is the segment's max timestamp
    /// (`None` when no batch has a timestamp above -1).
    pub fn max_timestamp_batch_offset(&self) -> Option<Offset> {
        self.time_placer
            .borrow()
            .max_timestamp_relative_offset()
            .map(|rel| self.base_offset.plus(i64::from(rel.0)))
    }

    /// When this segment was created or opened (for `segment.ms`).
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }

    /// True when no batch was written.
    pub fn is_empty(&self) -> bool {
        self.size_bytes.get() == 0
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Path of the `.index` file.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// Path of the `.timeindex` file.
    pub fn time_index_path(&self) -> &Path {
        &self.time_index_path
    }

    /// Number of in-memory time index entries.
    pub fn time_index_len(&self) -> usize {
        self.time_index.borrow().len()
    }

    /// A copy of the in-memory time index entries.
    pub fn time_index_entries(&self) -> Vec<TimeIndexEntry> {
        self.time_index.borrow().entries().to_vec()
    }

    /// The position to start a search for the first record at or after `target_ms`: the time
    /// index's floor entry resolved through the offset index (segment start when none).
    pub fn time_floor_position(&self, target_ms: i64) -> FilePos {
        match self.time_index.borrow().lookup(target_ms) {
            Some(entry) => self.index.borrow().lookup(entry.relative_offset),
            None => FilePos(0),
        }
    }

    /// Number of in-memory index entries.
    pub fn index_len(&self) -> usize {
        self.index.borrow().len()
    }

    /// A copy of the in-memory index entries.
    pub fn index_entries(&self) -> Vec<IndexEntry> {
        self.index.borrow().entries().to_vec()
    }

    /// This segment as the partition machine holds it ([`MachineSegment`]): its published size
    /// (with nothing past it: call it with no write in flight), next offset, creation time,
    /// and copies of its in-memory indexes and placers.
    pub fn machine_state(&self) -> MachineSegment {
        let size_bytes = self.size_bytes.get();
        MachineSegment {
            base_offset: self.base_offset,
            size_bytes,
            written_bytes: size_bytes,
            next_offset: self.next_offset.get(),
            created_ms: self.created_ms,
            index: self.index.borrow().clone(),
            placer: self.placer.borrow().clone(),
            index_file_entries: self.index_file_entries.get(),
            time_index: self.time_index.borrow().clone(),
            time_placer: self.time_placer.borrow().clone(),
            time_index_file_entries: self.time_index_file_entries.get(),
        }
    }

    /// The position to start reading from for `target` (floor lookup in the index).
    pub fn floor_position(&self, target: Offset) -> FilePos {
        match target.relative_to(self.base_offset) {
            Some(rel) => self.index.borrow().lookup(rel),
            None => FilePos(0),
        }
    }

    /// Reads up to `len` bytes at `pos` of the log (fewer only at the end of the file).
    pub async fn read_log(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let (result, buf) = self.log.read_at(Vec::with_capacity(len), pos, len).await;
        result.map(|()| buf)
    }

    /// Writes `parts` — the batches of `headers`, already validated and patched, back to back
    /// in offset order — with one `write_parts_at` at the published size, then the index and
    /// time index
    /// entries the placers ask for, each file's new entries with one `write_at` (I4: after the
    /// data), then publishes the new size and max timestamp (I2). On error nothing is
    /// published and the in-memory indexes are unchanged; bytes past the published size may be
    /// torn and are overwritten by the next write (the caller truncates first). Returns each
    /// batch's position and hands the parts back.
    pub(crate) async fn append_batches(
        &self,
        buf: Vec<Bytes>,
        headers: &[BatchHeader],
    ) -> (io::Result<Vec<FilePos>>, Vec<Bytes>) {
        let start_u64 = self.size_bytes.get();
        let total_bytes = parts_len(&buf) as u64;
        // I1: the group continues this segment densely and its batches are dense.
        debug_assert!(
            headers
                .first()
                .is_none_or(|h| h.base_offset == self.next_offset.get()),
            "a group starts at the segment's next offset (I1)"
        );
        debug_assert!(
            headers
                .windows(2)
                .all(|pair| pair[1].base_offset == pair[0].next_offset()),
            "a group's batches are dense (I1)"
        );
        let Some(placed) = self.place(start_u64, total_bytes, headers) else {
            return (
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "batches do not fit the segment's 32-bit positions (I6)",
                )),
                buf,
            );
        };
        let (written, buf) = self.log.write_parts_at(buf, start_u64).await;
        if let Err(e) = written {
            return (Err(e), buf);
        }
        // I4: the entries go to disk only after the data they point at.
        let mut placer = self.placer.borrow().clone();
        let mut time_placer = self.time_placer.borrow().clone();
        let mut entries = Vec::new();
        let mut time_entries = Vec::new();
        for (header, &(position, relative, len)) in headers.iter().zip(&placed) {
            let entry = placer.on_batch(position, relative, len);
            if let Some(entry) = entry {
                entries.push(entry);
            }
            // The time index: same placement points (I4).
            if let Some(time_entry) =
                time_placer.on_batch(relative, header.max_timestamp, entry.is_some())
            {
                time_entries.push(time_entry);
            }
        }
        if !entries.is_empty() {
            let slot = self.index.borrow().len() as u64;
            self.index_file_entries.set(
                self.index_file_entries
                    .get()
                    .max(slot + entries.len() as u64),
            );
            let bytes = minikafka_core::index::encode_all(&entries);
            let (written, _) = self
                .index_file
                .write_at(bytes, slot * ENTRY_BYTES as u64)
                .await;
            if let Err(e) = written {
                return (Err(e), buf);
            }
        }
        if !time_entries.is_empty() {
            let slot = self.time_index.borrow().len() as u64;
            self.time_index_file_entries.set(
                self.time_index_file_entries
                    .get()
                    .max(slot + time_entries.len() as u64),
            );
            let bytes = minikafka_core::time_index::encode_all(&time_entries);
            let (written, _) = self
                .time_index_file
                .write_at(bytes, slot * TIME_ENTRY_BYTES as u64)
                .await;
            if let Err(e) = written {
                return (Err(e), buf);
            }
        }
        // No await from here on: the indexes, the max timestamp and the size move together.
        {
            let mut index = self.index.borrow_mut();
            for entry in entries {
                index.push(entry);
            }
            let mut time_index = self.time_index.borrow_mut();
            for time_entry in time_entries {
                time_index.push(time_entry);
            }
        }
        *self.placer.borrow_mut() = placer;
        *self.time_placer.borrow_mut() = time_placer;
        if let Some(last) = headers.last() {
            self.next_offset.set(last.next_offset());
        }
        // I2: publish only now that every byte below the new size is written; the size only
        // grows.
        assert!(
            self.size_bytes.get() == start_u64,
            "nothing else published while this group was written (I2)"
        );
        self.size_bytes.set(start_u64 + total_bytes);
        let positions = placed.iter().map(|&(position, _, _)| position).collect();
        (Ok(positions), buf)
    }

    /// Position, relative offset and length of each batch of `headers` laid out from `start`;
    /// `None` when one does not fit the 32-bit positions or relative offsets (the partition
    /// rolls before that happens, I6) or the lengths do not add up to `total_bytes`.
    fn place(
        &self,
        start: u64,
        total_bytes: u64,
        headers: &[BatchHeader],
    ) -> Option<Vec<(FilePos, RelativeOffset, u32)>> {
        u32::try_from(start.checked_add(total_bytes)?).ok()?;
        let mut position = start;
        let mut placed = Vec::with_capacity(headers.len());
        for header in headers {
            let len = u32::try_from(header.total_bytes()).ok()?;
            let relative = header.base_offset.relative_to(self.base_offset)?;
            placed.push((FilePos(u32::try_from(position).ok()?), relative, len));
            position += u64::from(len);
        }
        (position == start + total_bytes).then_some(placed)
    }

    /// Cuts the log file back to the published size, discarding a torn tail left by a failed
    /// write (the in-memory state never saw it).
    pub(crate) async fn discard_unpublished_tail(&self) -> io::Result<()> {
        let published = self.size_bytes.get();
        self.log.truncate(published).await?;
        // I2: the cut never reaches below the published size.
        assert!(
            self.size_bytes.get() == published,
            "the published size moved while a torn tail was cut (I2)"
        );
        Ok(())
    }

    /// Makes the log durable.
    pub(crate) async fn sync_log(&self) -> io::Result<()> {
        self.log.sync_data().await
    }

    /// Makes both indexes durable, first cutting any slot written by a failed append.
    pub(crate) async fn sync_index(&self) -> io::Result<()> {
        let entries = self.index.borrow().len() as u64;
        if self.index_file_entries.get() != entries {
            self.index_file
                .truncate(entries * ENTRY_BYTES as u64)
                .await?;
            self.index_file_entries.set(entries);
        }
        self.index_file.sync_data().await?;
        let time_entries = self.time_index.borrow().len() as u64;
        if self.time_index_file_entries.get() != time_entries {
            self.time_index_file
                .truncate(time_entries * TIME_ENTRY_BYTES as u64)
                .await?;
            self.time_index_file_entries.set(time_entries);
        }
        self.time_index_file.sync_data().await
    }

    /// Closes the three files, reporting errors the OS held back.
    pub(crate) async fn close(self) -> io::Result<()> {
        let log = self.log.close().await;
        let index = self.index_file.close().await;
        let time_index = self.time_index_file.close().await;
        log.and(index).and(time_index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(log_file_name(Offset(42)), "00000000000000000042.log");
        assert_eq!(
            classify("00000000000000000042.log"),
            SegmentFile::Log(Offset(42))
        );
        assert_eq!(
            classify(&index_file_name(Offset(i64::MAX))),
            SegmentFile::Index(Offset(i64::MAX))
        );
        assert_eq!(
            classify("00000000000000000042.index.tmp"),
            SegmentFile::Stray
        );
        assert_eq!(
            classify("00000000000000000042.log.deleted"),
            SegmentFile::Stray
        );
        assert_eq!(classify("42.log"), SegmentFile::Unknown);
        assert_eq!(classify("0000000000000000004x.log"), SegmentFile::Unknown);
        assert_eq!(classify("99999999999999999999.log"), SegmentFile::Unknown);
        assert_eq!(
            classify("00000000000000000042.timeindex"),
            SegmentFile::TimeIndex(Offset(42))
        );
        assert_eq!(
            classify(&time_index_file_name(Offset(7))),
            SegmentFile::TimeIndex(Offset(7))
        );
        assert_eq!(
            classify(&snapshot_file_name(Offset(9))),
            SegmentFile::Snapshot(Offset(9))
        );
        assert_eq!(
            classify("00000000000000000009.snapshot.tmp"),
            SegmentFile::Stray
        );
        assert_eq!(
            classify("00000000000000000042.timeindex.tmp"),
            SegmentFile::Stray
        );
        assert_eq!(classify("leader-epoch-checkpoint"), SegmentFile::Unknown);
        assert_eq!(
            classify("00000000000000000005.txnindex"),
            SegmentFile::TxnIndex(Offset(5))
        );
    }
}
