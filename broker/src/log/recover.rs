//! Startup: turn the files of one segment into an open [`Segment`], carrying out core's
//! decisions: the decision table ([`decide`]) and [`segment_trust`] say what to trust, core's
//! scanner says where the valid log ends. This file only reads, writes and logs.
//!
//! Contract:
//! - Inputs: a backend, the partition directory, a segment's base offset, whether it is the
//!   active (last) segment, whether the broker shut down cleanly, the log configuration.
//! - Outputs: an open [`Segment`] and a [`SegmentRecovery`] saying which case applied and how
//!   many bytes were cut.
//! - Reads: an index file only when it is no larger than
//!   [`segment_trust::max_index_file_bytes`] (I10); for a trusted segment only its two
//!   indexes and the tail [`segment_trust::plan_tail`] names (at most about
//!   `index.interval.bytes` plus one batch), so startup time does not grow with sealed
//!   segment bytes (I5); otherwise the whole log in windows of [`SCAN_WINDOW_BYTES`].
//! - The time index (`.timeindex`) is not a column of core's decision table: when the table
//!   says [`Action::Trust`], [`segment_trust::judge_tail`] checks the tail and the time index,
//!   and [`segment_trust::action_when_untrusted`] says what to do when they fail (a rebuild by
//!   a scan, with [`SegmentRecovery::time_index_problem`] saying why for the time index).
//!   Every scan rewrites both indexes.
//! - The max timestamp of a trusted segment is exact: the time index's last entry combined
//!   with the batches of the tail (see `minikafka_core::time_index`).
//! - Writes: a truncated log (at the first invalid batch, I3; synced here for a sealed
//!   segment, by the caller's recovered-tail sync for the active one, which
//!   [`SegmentRecovery::truncated_bytes`] tells it to do) and rebuilt indexes, each written
//!   to a `.tmp` file, synced, renamed over the old one, with the directory synced; an index
//!   file that already holds exactly the rebuilt bytes is left as it is.
//! - Never: trusts a tail that does not parse (it falls back to a scan), allocates more than
//!   the file's size for an index (I10), or loops without progress (the scanner's feed bound
//!   is asserted).

use std::io;
use std::path::Path;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::index::{self, OffsetIndex, ENTRY_BYTES};
use minikafka_core::record::OffsetRule;
use minikafka_core::recovery::{
    decide, Action, Case, ScanConfig, ScanOutcome, ScanStep, SegmentScanner,
};
use minikafka_core::segment_trust::{self, IndexFile, TailLimits, TailVerdict};
use minikafka_core::time_index::{self, TimeIndex, TIME_ENTRY_BYTES};
use minikafka_core::types::Offset;

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

pub use minikafka_core::segment_trust::TimeIndexProblem;

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

    let (index_read, index_handle) = read_index(backend, &index_path, log_len, ENTRY_BYTES).await?;
    let checks = segment_trust::offset_index_checks(
        is_active,
        clean_shutdown,
        index_read.as_file(),
        log_len,
    );
    let (case, action) = decide(checks);

    let mut report = SegmentRecovery {
        base_offset,
        case,
        action,
        truncated_bytes: 0,
        time_index_problem: None,
    };
    // The time index as read by the trust path, for the scan when the trust fails.
    let mut time_index_state = None;
    if action == Action::Trust {
        let (time_read, time_handle) =
            read_index(backend, &time_index_path, log_len, TIME_ENTRY_BYTES).await?;
        let limits = TailLimits {
            index_interval_bytes: config.index_interval_bytes,
            max_batch_bytes: config.max_batch_bytes,
            leader_epoch: LEADER_EPOCH,
        };
        let verdict = match &index_read {
            IndexRead::Bytes(bytes) => match index::validate(bytes, log_len) {
                Ok(entries) => {
                    read_trusted_tail(&log, base_offset, log_len, entries, &time_read, limits)
                        .await?
                }
                Err(_) => (TailVerdict::Unparseable, Vec::new()),
            },
            _ => (TailVerdict::Unparseable, Vec::new()),
        };
        match verdict {
            (TailVerdict::Trusted(trusted), entries) => {
                let index_file = kept_or_open(backend, &index_path, index_handle).await?;
                let time_index_file = kept_or_open(backend, &time_index_path, time_handle).await?;
                let mut index = OffsetIndex::new();
                for entry in &entries {
                    index.push(*entry);
                }
                let mut time_index = TimeIndex::new();
                for entry in &trusted.time_entries {
                    time_index.push(*entry);
                }
                let state = SegmentState {
                    size_bytes: log_len,
                    next_offset: trusted.next_offset,
                    index_file_entries: entries.len() as u64,
                    index,
                    time_index_file_entries: trusted.time_entries.len() as u64,
                    time_index,
                    time_placer: trusted.time_placer,
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
                return Ok((segment, report));
            }
            (verdict, _) => {
                time_index_state = Some((time_read, time_handle));
                report.action = segment_trust::action_when_untrusted(is_active, &verdict);
                if let TailVerdict::TimeIndexUntrusted(problem) = verdict {
                    tracing::warn!(
                        ?time_index_path,
                        ?problem,
                        "time index cannot be trusted: rebuilding the segment's indexes by a scan"
                    );
                    report.time_index_problem = Some(problem);
                } else {
                    tracing::warn!(
                        ?log_path,
                        "trusted index but the log tail does not parse: scanning"
                    );
                }
            }
        }
    }

    // RebuildIndex or ScanAndTruncate: scan the whole log.
    let outcome = scan(&log, base_offset, log_len, config, is_active).await?;
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
        // A sealed segment's cut is synced here. The active segment's is left to the sync
        // every recovered tail gets before its log is handed out (I8: `UnsyncedLog`, one
        // `syncfs` for all partitions at a start): after a crash with preallocation on
        // (I190) every active segment is cut, and a sync each made 4,000-partition restarts
        // slower.
        if !is_active {
            log.sync_data().await?;
        }
        report.truncated_bytes = log_len - outcome.valid_len_bytes;
    }
    // After a kill the active segment is scanned although its indexes are usually whole:
    // an index that already holds exactly the rebuilt bytes is kept, which saves two
    // synced rewrites per partition at startup. Kept files are as durable as rewritten
    // ones would be: an active segment's indexes are synced at every close and rescanned
    // after every unclean shutdown, a sealed one's were synced at its roll (I5).
    let index_bytes = index::encode_all(&outcome.index_entries);
    let index_file = keep_or_rewrite(
        backend,
        dir,
        &index_path,
        (&index_read, index_handle),
        index_bytes,
    )
    .await?;
    let (time_read, time_handle) = match time_index_state {
        Some(state) => state,
        None => read_index(backend, &time_index_path, log_len, TIME_ENTRY_BYTES).await?,
    };
    let time_index_bytes = time_index::encode_all(&outcome.time_index_entries);
    let time_index_file = keep_or_rewrite(
        backend,
        dir,
        &time_index_path,
        (&time_read, time_handle),
        time_index_bytes,
    )
    .await?;
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

/// An index file as read from disk (owned bytes); see [`IndexFile`] for core's view.
enum IndexRead {
    Missing,
    Bytes(Vec<u8>),
    TooLarge,
}

impl IndexRead {
    /// True when the file was read and holds exactly `bytes`.
    fn holds(&self, bytes: &[u8]) -> bool {
        matches!(self, IndexRead::Bytes(b) if b == bytes)
    }

    fn as_file(&self) -> IndexFile<'_> {
        match self {
            IndexRead::Missing => IndexFile::Missing,
            IndexRead::Bytes(bytes) => IndexFile::Bytes(bytes),
            IndexRead::TooLarge => IndexFile::TooLarge,
        }
    }
}

/// Reads an index file (of `entry_bytes` entries) whole, unless it is missing or larger than
/// core says any index of a log of `log_len` bytes could be (I10). The file is opened for
/// writing and handed back open, so a segment that keeps it opens it once (each open is an
/// `openat` and a `statx` on the ring, the `statx` punted to a kernel worker).
async fn read_index<B: Backend>(
    backend: &B,
    path: &Path,
    log_len: u64,
    entry_bytes: usize,
) -> Result<(IndexRead, Option<B::File>)> {
    let file = match backend.open(path, OpenMode::ReadWrite).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((IndexRead::Missing, None)),
        Err(e) => return Err(e.into()),
    };
    let len = file.len().await?;
    if len > segment_trust::max_index_file_bytes(log_len, entry_bytes) {
        return Ok((IndexRead::TooLarge, Some(file)));
    }
    let len_usize = usize::try_from(len).map_err(|_| io::Error::other("index too large"))?;
    let (result, bytes) = file
        .read_at(Vec::with_capacity(len_usize), 0, len_usize)
        .await;
    result?;
    Ok((IndexRead::Bytes(bytes), Some(file)))
}

/// The index file `handle` read, or `path` opened when there was none.
async fn kept_or_open<B: Backend>(
    backend: &B,
    path: &Path,
    handle: Option<B::File>,
) -> Result<B::File> {
    match handle {
        Some(file) => Ok(file),
        None => Ok(backend.open(path, OpenMode::ReadWrite).await?),
    }
}

/// The index file at `path` holding `bytes`: the one read (`read`, still open) when it holds
/// exactly them, else a rewrite ([`write_index_file`]) opened afresh (the old handle names
/// the replaced file).
async fn keep_or_rewrite<B: Backend>(
    backend: &B,
    dir: &Path,
    path: &Path,
    read: (&IndexRead, Option<B::File>),
    bytes: Vec<u8>,
) -> Result<B::File> {
    let (read, handle) = read;
    if read.holds(&bytes) {
        if let Some(file) = handle {
            return Ok(file);
        }
    } else if let Some(file) = handle {
        let _ = file.close().await;
    }
    write_index_file(backend, dir, path, bytes).await?;
    Ok(backend.open(path, OpenMode::ReadWrite).await?)
}

/// For a segment the table trusts, with validated offset index `entries`: reads the tail core
/// plans (from the last entry to the end of the log) and asks core to judge it and the time
/// index. Returns the verdict with the entries (for the trusted segment's state).
async fn read_trusted_tail<F: BackendFile>(
    log: &F,
    base_offset: Offset,
    log_len: u64,
    entries: Vec<index::IndexEntry>,
    time_read: &IndexRead,
    limits: TailLimits,
) -> Result<(TailVerdict, Vec<index::IndexEntry>)> {
    let Some(read) = segment_trust::plan_tail(base_offset, &entries, log_len, limits) else {
        return Ok((TailVerdict::Unparseable, entries));
    };
    let (result, tail) = log
        .read_at(Vec::with_capacity(read.len), read.from, read.len)
        .await;
    result?;
    let verdict = segment_trust::judge_tail(
        base_offset,
        read,
        &tail,
        &entries,
        time_read.as_file(),
        limits,
    );
    Ok((verdict, entries))
}

/// Drives core's [`SegmentScanner`] over the log with reads of [`SCAN_WINDOW_BYTES`].
async fn scan<F: BackendFile>(
    log: &F,
    base_offset: Offset,
    log_len: u64,
    config: &LogConfig,
    is_active: bool,
) -> Result<ScanOutcome> {
    let mut scanner = SegmentScanner::new(ScanConfig {
        base_offset,
        file_len_bytes: log_len,
        index_interval_bytes: config.index_interval_bytes,
        max_batch_bytes: config.max_batch_bytes,
        expected_leader_epoch: LEADER_EPOCH,
        window_bytes: SCAN_WINDOW_BYTES,
        // A sealed segment may have been compacted (offset gaps); the active one never is.
        offsets: if is_active {
            OffsetRule::Dense
        } else {
            OffsetRule::Compacted
        },
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
