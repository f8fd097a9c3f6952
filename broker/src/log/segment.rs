//! One segment: `<20-digit base offset>.log`, its `.index` and its `.timeindex`.
//!
//! Contract:
//! - [`SegmentFiles`] are the three open files, shared through `Rc`: a read that holds them
//!   keeps them open even if retention deletes the segment meanwhile (POSIX unlink semantics,
//!   see [`Backend::remove_file`]). The driver ([`super::driver`]) writes them as the
//!   partition machine asks.
//! - A [`Segment`] is the files with a snapshot of the segment's state (published size,
//!   in-memory indexes, placers: `core::partition::SegmentState`): recovery builds one per
//!   segment, the machine then owns that state (I170), and `PartitionLog::segments` hands out
//!   fresh snapshots. A snapshot never changes: a reader of it stays below the size it saw (I2).
//! - The max timestamp is exact: the time placer sees every batch (core's [`TimePlacer`]).
//! - Never: validates batches (the partition did, I3), decides placement (core's
//!   [`IndexPlacer`] and [`TimePlacer`] in the machine do).

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::index::{IndexEntry, IndexPlacer, OffsetIndex};
use minikafka_core::partition::SegmentState as MachineSegment;
use minikafka_core::time_index::{TimeIndex, TimeIndexEntry, TimePlacer};
use minikafka_core::types::{FilePos, Offset};

use super::preallocation::Reservation;

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

/// One segment's three open files, shared through `Rc` (a read holding them keeps them open
/// after the segment is removed). The driver writes them ([`super::driver`]); the machine
/// holds the segment's state.
pub struct SegmentFiles<B: Backend> {
    base_offset: Offset,
    log_path: PathBuf,
    index_path: PathBuf,
    time_index_path: PathBuf,
    pub(crate) log: B::File,
    pub(crate) index: B::File,
    pub(crate) time_index: B::File,
    /// What the driver has reserved of the `.log` past its data (I190).
    pub(crate) reservation: Reservation,
}

impl<B: Backend> SegmentFiles<B> {
    /// Creates the three files of an empty segment at `base_offset` in `dir` (cutting
    /// leftovers of the same name) and syncs the directory so their existence is durable
    /// (`IoKind::CreateSegment`).
    pub async fn create(backend: &B, dir: &Path, base_offset: Offset) -> io::Result<Self> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let time_index_path = dir.join(time_index_file_name(base_offset));
        let log = backend.open(&log_path, OpenMode::ReadWriteCreate).await?;
        log.truncate(0).await?;
        let index = backend.open(&index_path, OpenMode::ReadWriteCreate).await?;
        index.truncate(0).await?;
        let time_index = backend
            .open(&time_index_path, OpenMode::ReadWriteCreate)
            .await?;
        time_index.truncate(0).await?;
        backend.sync_dir(dir).await?;
        Ok(SegmentFiles {
            base_offset,
            log_path,
            index_path,
            time_index_path,
            log,
            index,
            time_index,
            reservation: Reservation::default(),
        })
    }

    /// The segment's base offset.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
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

    /// Reads up to `len` bytes at `pos` of the `.log` (fewer only at the end of the file).
    pub async fn read_log(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        let (result, buf) = self.log.read_at(Vec::with_capacity(len), pos, len).await;
        result.map(|()| buf)
    }

    /// Closes the three files, reporting errors the OS held back.
    pub(crate) async fn close(self) -> io::Result<()> {
        let log = self.log.close().await;
        let index = self.index.close().await;
        let time_index = self.time_index.close().await;
        log.and(index).and(time_index)
    }
}

/// One segment: its open files and a snapshot of its state as the partition machine held it
/// when the snapshot was taken (the machine is the one owner of that state, I170; a snapshot
/// never changes, so a reader of it stays below the size it saw, I2).
pub struct Segment<B: Backend> {
    files: Rc<SegmentFiles<B>>,
    state: MachineSegment,
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
        let files = SegmentFiles::create(backend, dir, base_offset).await?;
        Ok(Segment {
            files: Rc::new(files),
            state: MachineSegment::empty(base_offset, index_interval_bytes, now_ms),
        })
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
        let files = SegmentFiles {
            base_offset,
            log_path: log.0,
            index_path: index.0,
            time_index_path: time_index.0,
            log: log.1,
            index: index.1,
            time_index: time_index.1,
            reservation: Reservation::default(),
        };
        Segment {
            files: Rc::new(files),
            state: MachineSegment {
                base_offset,
                size_bytes: state.size_bytes,
                written_bytes: state.size_bytes,
                next_offset: state.next_offset,
                created_ms,
                index: state.index,
                placer: IndexPlacer::resume(index_interval_bytes, since),
                index_file_entries: state.index_file_entries,
                time_index: state.time_index,
                time_placer: state.time_placer,
                time_index_file_entries: state.time_index_file_entries,
            },
        }
    }

    /// A snapshot of the machine's segment `state` over its `files`.
    pub(crate) fn snapshot(files: Rc<SegmentFiles<B>>, state: MachineSegment) -> Self {
        debug_assert_eq!(files.base_offset, state.base_offset);
        Segment { files, state }
    }

    /// The segment's open files.
    pub(crate) fn files(&self) -> &Rc<SegmentFiles<B>> {
        &self.files
    }

    /// The offset of the segment's first batch.
    pub fn base_offset(&self) -> Offset {
        self.state.base_offset
    }

    /// The published size in bytes (I2): everything below it is whole, valid batches.
    pub fn size_bytes(&self) -> u64 {
        self.state.size_bytes
    }

    /// The offset after the segment's last batch.
    pub fn next_offset(&self) -> Offset {
        self.state.next_offset
    }

    /// The largest batch max timestamp in the segment (-1 when none): exact, also for a
    /// segment trusted at startup (its time index's last entry and the tail after the offset
    /// index's last entry). Timestamps below -1 count as -1 (Kafka's "no timestamp").
    pub fn max_timestamp_ms(&self) -> i64 {
        self.state.time_placer.max_timestamp_ms()
    }

    /// Base offset of the first batch whose max timestamp is the segment's max timestamp
    /// (`None` when no batch has a timestamp above -1).
    pub fn max_timestamp_batch_offset(&self) -> Option<Offset> {
        self.state
            .time_placer
            .max_timestamp_relative_offset()
            .map(|rel| self.state.base_offset.plus(i64::from(rel.0)))
    }

    /// When this segment was created or opened (for `segment.ms`).
    pub fn created_ms(&self) -> i64 {
        self.state.created_ms
    }

    /// True when no batch was written.
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// Path of the `.log` file.
    pub fn log_path(&self) -> &Path {
        self.files.log_path()
    }

    /// Path of the `.index` file.
    pub fn index_path(&self) -> &Path {
        self.files.index_path()
    }

    /// Path of the `.timeindex` file.
    pub fn time_index_path(&self) -> &Path {
        self.files.time_index_path()
    }

    /// Number of in-memory time index entries.
    pub fn time_index_len(&self) -> usize {
        self.state.time_index.len()
    }

    /// A copy of the in-memory time index entries.
    pub fn time_index_entries(&self) -> Vec<TimeIndexEntry> {
        self.state.time_index.entries().to_vec()
    }

    /// The position to start a search for the first record at or after `target_ms`: the time
    /// index's floor entry resolved through the offset index (segment start when none).
    pub fn time_floor_position(&self, target_ms: i64) -> FilePos {
        match self.state.time_index.lookup(target_ms) {
            Some(entry) => self.state.index.lookup(entry.relative_offset),
            None => FilePos(0),
        }
    }

    /// Number of in-memory index entries.
    pub fn index_len(&self) -> usize {
        self.state.index.len()
    }

    /// A copy of the in-memory index entries.
    pub fn index_entries(&self) -> Vec<IndexEntry> {
        self.state.index.entries().to_vec()
    }

    /// This segment as the partition machine holds it ([`MachineSegment`]).
    pub fn machine_state(&self) -> MachineSegment {
        self.state.clone()
    }

    /// The position to start reading from for `target` (floor lookup in the index).
    pub fn floor_position(&self, target: Offset) -> FilePos {
        self.state.floor_position(target)
    }

    /// Reads up to `len` bytes at `pos` of the log (fewer only at the end of the file).
    pub async fn read_log(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        self.files.read_log(pos, len).await
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
