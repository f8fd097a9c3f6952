//! Startup: turn the files of one segment into an open [`Segment`], asking core's decision
//! table what to trust and core's scanner where the valid log ends.
//!
//! Contract:
//! - Inputs: a backend, the partition directory, a segment's base offset, whether it is the
//!   active (last) segment, whether the broker shut down cleanly, the log configuration.
//! - Outputs: an open [`Segment`] and a [`SegmentRecovery`] saying which case applied and how
//!   many bytes were cut.
//! - Reads: for a trusted segment only its two indexes and the tail after the last offset index
//!   entry (at most about `index.interval.bytes` plus one batch), so startup time does not grow
//!   with sealed segment bytes (I5); otherwise the whole log in windows of
//!   [`SCAN_WINDOW_BYTES`].
//! - The time index (`.timeindex`) is not a column of core's decision table: when the table
//!   says [`Action::Trust`] but the time index is missing, implausibly large, fails
//!   [`time_index::validate`] or [`time_index::check_against_offset_index`], the segment is
//!   rebuilt by a scan like one whose offset index failed ([`Action::RebuildIndex`], with
//!   [`SegmentRecovery::time_index_problem`] saying why). Every scan rewrites both indexes.
//! - The max timestamp of a trusted segment is exact: the time index's last entry combined
//!   with the batches of the tail (see `minikafka_core::time_index`).
//! - Writes: a truncated log (at the first invalid batch, I3) and rebuilt indexes, each written
//!   to a `.tmp` file, synced, renamed over the old one, with the directory synced.
//! - Never: trusts a tail that does not parse (it falls back to a scan), allocates more than
//!   the file's size for an index (I10), or loops without progress (the scanner's feed bound
//!   is asserted).

use std::io;
use std::path::Path;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::index::{self, IndexEntry, OffsetIndex, ENTRY_BYTES};
use minikafka_core::record::{BatchIter, ValidateOptions, HEADER_BYTES};
use minikafka_core::recovery::{
    checks_from_index, decide, Action, Case, RecoveryChecks, ScanConfig, ScanOutcome, ScanStep,
    SegmentScanner,
};
use minikafka_core::time_index::{self, TimeIndex, TimeIndexCheck, TimePlacer, TIME_ENTRY_BYTES};
use minikafka_core::types::{Offset, RelativeOffset};

use super::config::LogConfig;
use super::segment::{
    index_file_name, log_file_name, time_index_file_name, Segment, SegmentState, TMP_SUFFIX,
};
use super::{LogError, Result, LEADER_EPOCH};

/// Bytes read per window while scanning a segment.
pub const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// What recovery did with one segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentRecovery {
    /// The segment's base offset.
    pub base_offset: Offset,
    /// The decision table's case.
    pub case: Case,
    /// The action actually taken (a trusted segment whose tail does not parse is scanned).
    pub action: Action,
    /// Bytes cut from the end of the log (0 unless a scan found an invalid batch).
    pub truncated_bytes: u64,
    /// Why the time index could not be trusted when the decision table said
    /// [`Action::Trust`] (the segment was then rebuilt: `action` is [`Action::RebuildIndex`]).
    /// `None` when it was trusted, or when the table already chose a scan (which rebuilds the
    /// time index without looking at it).
    pub time_index_problem: Option<TimeIndexProblem>,
}

/// Why a segment's time index was not trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimeIndexProblem {
    /// No `.timeindex` file.
    Missing,
    /// Larger than any time index of the log could be (one entry per batch at most, I10).
    Implausible,
    /// The file failed a structural check.
    Invalid(TimeIndexCheck),
}

/// Opens the segment based at `base_offset` in `dir` and recovers it.
pub(crate) async fn open_segment<B: Backend>(
    backend: &B,
    dir: &Path,
    base_offset: Offset,
    is_active: bool,
    clean_shutdown: bool,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(Segment<B>, SegmentRecovery)> {
    let log_path = dir.join(log_file_name(base_offset));
    let index_path = dir.join(index_file_name(base_offset));
    let time_index_path = dir.join(time_index_file_name(base_offset));
    let log = backend.open(&log_path, OpenMode::ReadWrite).await?;
    let log_len = log.len().await?;

    let index_bytes = read_index(backend, &index_path, log_len, ENTRY_BYTES).await?;
    let checks = match &index_bytes {
        IndexRead::Missing => checks_from_index(is_active, clean_shutdown, None, log_len),
        IndexRead::Bytes(bytes) => {
            checks_from_index(is_active, clean_shutdown, Some(bytes), log_len)
        }
        // More entries than the log could have batches: it cannot belong to this log.
        IndexRead::Implausible => RecoveryChecks {
            is_active_segment: is_active,
            clean_shutdown,
            index_present: true,
            index_whole_entries: true,
            index_monotonic: true,
            index_within_log: false,
        },
    };
    let (case, action) = decide(checks);

    let mut report = SegmentRecovery {
        base_offset,
        case,
        action,
        truncated_bytes: 0,
        time_index_problem: None,
    };
    if action == Action::Trust {
        let entries = match &index_bytes {
            IndexRead::Bytes(bytes) => index::validate(bytes, log_len).ok(),
            _ => None,
        };
        let time_read = read_index(backend, &time_index_path, log_len, TIME_ENTRY_BYTES).await?;
        let tail = match entries {
            Some(entries) => {
                read_trusted_tail(&log, base_offset, log_len, entries, &time_read, config).await?
            }
            None => Tail::Unparseable,
        };
        match tail {
            Tail::Trusted(state) => {
                let index_file = backend.open(&index_path, OpenMode::ReadWrite).await?;
                let time_index_file = backend.open(&time_index_path, OpenMode::ReadWrite).await?;
                let segment = Segment::from_parts(
                    base_offset,
                    (log_path, log),
                    (index_path, index_file),
                    (time_index_path, time_index_file),
                    state,
                    config.index_interval_bytes,
                    now_ms,
                );
                return Ok((segment, report));
            }
            Tail::TimeIndexUntrusted(problem) => {
                tracing::warn!(
                    ?time_index_path,
                    ?problem,
                    "time index cannot be trusted: rebuilding the segment's indexes by a scan"
                );
                report.action = Action::RebuildIndex;
                report.time_index_problem = Some(problem);
            }
            Tail::Unparseable => {
                tracing::warn!(
                    ?log_path,
                    "trusted index but the log tail does not parse: scanning"
                );
                report.action = if is_active {
                    Action::ScanAndTruncate
                } else {
                    Action::RebuildIndex
                };
            }
        }
    }

    // RebuildIndex or ScanAndTruncate: scan the whole log.
    let outcome = scan(&log, base_offset, log_len, config).await?;
    if outcome.valid_len_bytes < log_len {
        // I3: nothing after the first invalid byte is part of the log. For a sealed segment
        // (RebuildIndex) this means the log itself was damaged; truncating is still right.
        tracing::warn!(
            ?log_path,
            valid = outcome.valid_len_bytes,
            len = log_len,
            stop = ?outcome.stop,
            "truncating segment at the first invalid batch"
        );
        log.truncate(outcome.valid_len_bytes).await?;
        log.sync_data().await?;
        report.truncated_bytes = log_len - outcome.valid_len_bytes;
    }
    write_index_file(
        backend,
        dir,
        &index_path,
        index::encode_all(&outcome.index_entries),
    )
    .await?;
    write_index_file(
        backend,
        dir,
        &time_index_path,
        time_index::encode_all(&outcome.time_index_entries),
    )
    .await?;
    let index_file = backend.open(&index_path, OpenMode::ReadWrite).await?;
    let time_index_file = backend.open(&time_index_path, OpenMode::ReadWrite).await?;
    let mut index = OffsetIndex::new();
    for entry in &outcome.index_entries {
        index.push(*entry);
    }
    let mut time_index = TimeIndex::new();
    for entry in &outcome.time_index_entries {
        time_index.push(*entry);
    }
    let state = SegmentState {
        size_bytes: outcome.valid_len_bytes,
        next_offset: outcome.next_offset,
        index_file_entries: outcome.index_entries.len() as u64,
        index,
        time_index_file_entries: outcome.time_index_entries.len() as u64,
        time_index,
        time_placer: outcome.time_placer,
    };
    let segment = Segment::from_parts(
        base_offset,
        (log_path, log),
        (index_path, index_file),
        (time_index_path, time_index_file),
        state,
        config.index_interval_bytes,
        now_ms,
    );
    Ok((segment, report))
}

enum IndexRead {
    Missing,
    Bytes(Vec<u8>),
    Implausible,
}

/// Reads an index file (of `entry_bytes` entries) whole, unless it is missing or larger than
/// any index of a log of `log_len` bytes could be (one entry per batch at most, I10).
async fn read_index<B: Backend>(
    backend: &B,
    path: &Path,
    log_len: u64,
    entry_bytes: usize,
) -> Result<IndexRead> {
    let file = match backend.open(path, OpenMode::ReadOnly).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(IndexRead::Missing),
        Err(e) => return Err(e.into()),
    };
    let len = file.len().await?;
    let max_len = (log_len / HEADER_BYTES as u64 + 1) * entry_bytes as u64;
    if len > max_len {
        return Ok(IndexRead::Implausible);
    }
    let len_usize = usize::try_from(len).map_err(|_| io::Error::other("index too large"))?;
    let (result, bytes) = file
        .read_at(Vec::with_capacity(len_usize), 0, len_usize)
        .await;
    result?;
    let _ = file.close().await;
    Ok(IndexRead::Bytes(bytes))
}

/// What reading a trusted segment's tail found.
enum Tail {
    /// Tail and time index check out: the segment's state.
    Trusted(SegmentState),
    /// The tail is fine but the time index is not.
    TimeIndexUntrusted(TimeIndexProblem),
    /// The tail does not parse, or is longer than an index interval plus one batch could leave.
    Unparseable,
}

/// For a trusted segment, reads the log from its last index entry to the end and checks the
/// batches there (whole, valid, dense from the entry's offset): the index says nothing about
/// them, and they give the next offset. Then checks the time index against that next offset
/// and the offset index, and resumes the time placer from its last entry over the tail's
/// batches, which gives the segment's exact max timestamp.
async fn read_trusted_tail<F: BackendFile>(
    log: &F,
    base_offset: Offset,
    log_len: u64,
    entries: Vec<IndexEntry>,
    time_read: &IndexRead,
    config: &LogConfig,
) -> Result<Tail> {
    let (from, mut expected) = match entries.last() {
        Some(e) => (
            e.position.as_u64(),
            base_offset.plus(i64::from(e.relative_offset.0)),
        ),
        None => (0, base_offset),
    };
    let tail_len = log_len - from;
    let bound = u64::from(config.index_interval_bytes) + 2 * config.max_batch_bytes as u64;
    if tail_len > bound {
        return Ok(Tail::Unparseable);
    }
    let tail_len = tail_len as usize; // <= bound, which fits in memory by configuration
    let (result, tail) = log
        .read_at(Vec::with_capacity(tail_len), from, tail_len)
        .await;
    result?;
    if tail.len() != tail_len {
        return Ok(Tail::Unparseable);
    }
    let opts = ValidateOptions {
        max_batch_bytes: config.max_batch_bytes,
        walk_records: true,
    };
    // (relative base offset, max timestamp) of each tail batch; at most one per header.
    let mut tail_batches: Vec<(RelativeOffset, i64)> = Vec::new();
    let mut end = 0usize;
    for batch in BatchIter::new(&tail).with_options(opts) {
        let Ok(batch) = batch else {
            return Ok(Tail::Unparseable);
        };
        if batch.header.base_offset != expected
            || batch.header.partition_leader_epoch != LEADER_EPOCH
        {
            return Ok(Tail::Unparseable);
        }
        let Some(relative) = batch.header.base_offset.relative_to(base_offset) else {
            return Ok(Tail::Unparseable); // I6 broken: not trustable
        };
        tail_batches.push((relative, batch.header.max_timestamp));
        expected = batch.header.next_offset();
        end = batch.start + batch.bytes.len();
    }
    if end != tail_len {
        return Ok(Tail::Unparseable);
    }
    // expected >= base_offset: it starts there or at an entry past it and only grows.
    let next_relative = u64::try_from(expected.0 - base_offset.0).unwrap_or(0);
    let time_entries = match time_read {
        IndexRead::Missing => return Ok(Tail::TimeIndexUntrusted(TimeIndexProblem::Missing)),
        IndexRead::Implausible => {
            return Ok(Tail::TimeIndexUntrusted(TimeIndexProblem::Implausible))
        }
        IndexRead::Bytes(bytes) => match time_index::validate(bytes, next_relative)
            .and_then(|t| time_index::check_against_offset_index(&t, &entries).map(|()| t))
        {
            Ok(t) => t,
            Err(check) => return Ok(Tail::TimeIndexUntrusted(TimeIndexProblem::Invalid(check))),
        },
    };
    let mut time_placer = TimePlacer::resume(time_entries.last());
    for (relative, max_timestamp_ms) in tail_batches {
        // Already placed when appended: only the max timestamp is recovered here.
        time_placer.on_batch(relative, max_timestamp_ms, false);
    }
    let mut index = OffsetIndex::new();
    for entry in &entries {
        index.push(*entry);
    }
    let mut time_index = TimeIndex::new();
    for entry in &time_entries {
        time_index.push(*entry);
    }
    Ok(Tail::Trusted(SegmentState {
        size_bytes: log_len,
        next_offset: expected,
        index_file_entries: entries.len() as u64,
        index,
        time_index_file_entries: time_entries.len() as u64,
        time_index,
        time_placer,
    }))
}

/// Drives core's [`SegmentScanner`] over the log with reads of [`SCAN_WINDOW_BYTES`].
async fn scan<F: BackendFile>(
    log: &F,
    base_offset: Offset,
    log_len: u64,
    config: &LogConfig,
) -> Result<ScanOutcome> {
    let mut scanner = SegmentScanner::new(ScanConfig {
        base_offset,
        file_len_bytes: log_len,
        index_interval_bytes: config.index_interval_bytes,
        max_batch_bytes: config.max_batch_bytes,
        expected_leader_epoch: LEADER_EPOCH,
        window_bytes: SCAN_WINDOW_BYTES,
    });
    let mut buf = Vec::new();
    let mut feeds = 0u64;
    loop {
        match scanner.next_step() {
            ScanStep::Done(outcome) => return Ok(outcome),
            ScanStep::Need { pos, len } => {
                feeds += 1;
                if feeds > scanner.max_feeds() {
                    return Err(LogError::Io(io::Error::other(
                        "segment scan made no progress",
                    )));
                }
                let (result, read) = log.read_at(buf, pos, len).await;
                result?;
                scanner.feed(pos, &read);
                buf = read;
            }
        }
    }
}

/// Writes `bytes` as the index (offset or time) at `index_path`, atomically: a `.tmp` file,
/// synced, renamed, then the directory synced.
async fn write_index_file<B: Backend>(
    backend: &B,
    dir: &Path,
    index_path: &Path,
    bytes: Vec<u8>,
) -> Result<()> {
    let mut tmp = index_path.as_os_str().to_owned();
    tmp.push(format!(".{TMP_SUFFIX}"));
    let tmp = std::path::PathBuf::from(tmp);
    let file = backend.open(&tmp, OpenMode::ReadWriteCreate).await?;
    file.truncate(0).await?;
    if !bytes.is_empty() {
        let (result, _) = file.write_at(bytes, 0).await;
        result?;
    }
    file.sync_data().await?;
    file.close().await?;
    backend.rename(&tmp, index_path).await?;
    backend.sync_dir(dir).await?;
    Ok(())
}
