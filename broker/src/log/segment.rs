//! One segment: `<20-digit base offset>.log` and its `.index`, open, with the in-memory index
//! and the published size.
//!
//! Contract:
//! - A [`Segment`] owns its two open files. It is shared through `Rc`: a read that snapshots
//!   a segment keeps its files open even if retention deletes the segment meanwhile (POSIX
//!   unlink semantics, see [`Backend::remove_file`]).
//! - The published size (`size_bytes`) only grows while the segment is written, and only after
//!   a write has completed: bytes below it never change (I2). Readers snapshot it and read
//!   below the snapshot only.
//! - An index entry is written after the log bytes it points at (I4); the in-memory index and
//!   the placer state advance only when both writes succeeded.
//! - Never: validates batches (the partition did, I3), decides placement itself (core's
//!   [`IndexPlacer`] does), or holds a `RefCell` borrow across an `.await`.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::index::{IndexEntry, IndexPlacer, OffsetIndex, ENTRY_BYTES};
use minikafka_core::record::BatchHeader;
use minikafka_core::types::{FilePos, Offset};

/// Extension of a segment's log file.
pub const LOG_SUFFIX: &str = "log";
/// Extension of a segment's offset index file.
pub const INDEX_SUFFIX: &str = "index";
/// Suffix of files being written before an atomic rename; removed at startup.
pub const TMP_SUFFIX: &str = "tmp";
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
        _ => SegmentFile::Unknown,
    }
}

/// The recovered facts a [`Segment`] starts from.
#[derive(Clone, Debug)]
pub(crate) struct SegmentState {
    pub size_bytes: u64,
    pub next_offset: Offset,
    pub max_timestamp_ms: i64,
    pub index: OffsetIndex,
    pub index_file_entries: u64,
}

/// One open segment.
pub struct Segment<B: Backend> {
    base_offset: Offset,
    log_path: PathBuf,
    index_path: PathBuf,
    log: B::File,
    index_file: B::File,
    index: RefCell<OffsetIndex>,
    placer: RefCell<IndexPlacer>,
    /// Published size (I2).
    size_bytes: Cell<u64>,
    /// Entry slots of the index file that may hold bytes: the in-memory entries, plus one
    /// when an entry write failed (the next entry overwrites it; a sync cuts it).
    index_file_entries: Cell<u64>,
    next_offset: Cell<Offset>,
    max_timestamp_ms: Cell<i64>,
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
        backend.sync_dir(dir).await?;
        let state = SegmentState {
            size_bytes: 0,
            next_offset: base_offset,
            max_timestamp_ms: -1,
            index: OffsetIndex::new(),
            index_file_entries: 0,
        };
        Ok(Self::from_parts(
            base_offset,
            (log_path, log),
            (index_path, index_file),
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
        state: SegmentState,
        index_interval_bytes: u32,
        created_ms: i64,
    ) -> Self {
        let since = IndexPlacer::bytes_since(state.index.last(), state.size_bytes);
        Segment {
            base_offset,
            log_path: log.0,
            index_path: index.0,
            log: log.1,
            index_file: index.1,
            index: RefCell::new(state.index),
            placer: RefCell::new(IndexPlacer::resume(index_interval_bytes, since)),
            size_bytes: Cell::new(state.size_bytes),
            index_file_entries: Cell::new(state.index_file_entries),
            next_offset: Cell::new(state.next_offset),
            max_timestamp_ms: Cell::new(state.max_timestamp_ms),
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

    /// The largest batch max timestamp seen (-1 when none).
    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms.get()
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

    /// Number of in-memory index entries.
    pub fn index_len(&self) -> usize {
        self.index.borrow().len()
    }

    /// A copy of the in-memory index entries.
    pub fn index_entries(&self) -> Vec<IndexEntry> {
        self.index.borrow().entries().to_vec()
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

    /// Writes `batch` (already validated and patched) at the published size, then its index
    /// entry if the placer asks for one (I4), then publishes the new size (I2). On error
    /// nothing is published and the in-memory index is unchanged; bytes past the published
    /// size may be torn and are overwritten by the next write (the caller truncates first).
    /// Returns the batch's position and hands the buffer back.
    pub(crate) async fn append_batch(
        &self,
        batch: Vec<u8>,
        header: &BatchHeader,
    ) -> (io::Result<FilePos>, Vec<u8>) {
        let position_u64 = self.size_bytes.get();
        let batch_bytes = batch.len() as u64;
        // The partition rolls before a segment would pass u32::MAX bytes or offsets (I6).
        let (Ok(position), Ok(batch_len32), Some(relative)) = (
            u32::try_from(position_u64),
            u32::try_from(batch_bytes),
            header.base_offset.relative_to(self.base_offset),
        ) else {
            return (
                Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "batch does not fit the segment's 32-bit positions (I6)",
                )),
                batch,
            );
        };
        let position = FilePos(position);
        let (written, batch) = self.log.write_at(batch, position_u64).await;
        if let Err(e) = written {
            return (Err(e), batch);
        }
        // I4: the entry goes to disk only after the data it points at.
        let mut placer = self.placer.borrow().clone();
        let entry = placer.on_batch(position, relative, batch_len32);
        if let Some(entry) = entry {
            let slot = self.index.borrow().len() as u64;
            self.index_file_entries
                .set(self.index_file_entries.get().max(slot + 1));
            let at = slot * ENTRY_BYTES as u64;
            let (written, _) = self.index_file.write_at(entry.encode().to_vec(), at).await;
            if let Err(e) = written {
                return (Err(e), batch);
            }
            self.index.borrow_mut().push(entry);
        }
        *self.placer.borrow_mut() = placer;
        self.max_timestamp_ms
            .set(self.max_timestamp_ms.get().max(header.max_timestamp));
        self.next_offset.set(header.next_offset());
        // I2: publish only now that every byte below the new size is written.
        self.size_bytes.set(position_u64 + batch_bytes);
        (Ok(position), batch)
    }

    /// Cuts the log file back to the published size, discarding a torn tail left by a failed
    /// write (the in-memory state never saw it).
    pub(crate) async fn discard_unpublished_tail(&self) -> io::Result<()> {
        self.log.truncate(self.size_bytes.get()).await
    }

    /// Makes the log durable.
    pub(crate) async fn sync_log(&self) -> io::Result<()> {
        self.log.sync_data().await
    }

    /// Makes the index durable, first cutting any slot written by a failed append.
    pub(crate) async fn sync_index(&self) -> io::Result<()> {
        let entries = self.index.borrow().len() as u64;
        if self.index_file_entries.get() != entries {
            self.index_file
                .truncate(entries * ENTRY_BYTES as u64)
                .await?;
            self.index_file_entries.set(entries);
        }
        self.index_file.sync_data().await
    }

    /// Closes both files, reporting errors the OS held back.
    pub(crate) async fn close(self) -> io::Result<()> {
        let log = self.log.close().await;
        let index = self.index_file.close().await;
        log.and(index)
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
            SegmentFile::Unknown
        );
        assert_eq!(classify("leader-epoch-checkpoint"), SegmentFile::Unknown);
    }
}
