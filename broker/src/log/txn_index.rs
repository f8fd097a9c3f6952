//! A partition's transaction state on disk: the `.txnindex` file of each segment (Kafka's
//! format, `minikafka_core::txn_index`) and the rebuild of the transaction state
//! (`minikafka_core::partition::txn`) from the log at open.
//!
//! Contract:
//! - Live: when an ABORT marker ends an ongoing transaction, its [`AbortedTxn`] is appended
//!   to `<base>.txnindex` of the segment the marker went to ([`append_entries`]), after the
//!   marker's write and before the append mutex is released, and synced (a clean open trusts
//!   it). A failed append leaves the file short of the log: the partition's close then fails,
//!   so the next open is unclean and replays the log (I70).
//! - At open ([`rebuild`]): every batch from the log start is read back (headers, and the one
//!   record of each control batch) and replayed through the tracker, which gives the ongoing
//!   transactions (the LSO) and the aborted ranges per segment; each segment's `.txnindex`
//!   is then compared with what its markers say and rewritten when it differs (a crash lost
//!   an append, or recovery cut a torn tail), like the offset index (I70). The in-memory
//!   ranges, not the files, serve reads.
//! - A batch that does not parse below a segment's published size stops the replay with an
//!   error (the open fails rather than serve read_committed reads past a transaction it
//!   cannot see).

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::control_batch::decode_marker;
use minikafka_core::partition::txn::TxnTracker;
use minikafka_core::producer::ProducerBatch;
use minikafka_core::record::{BatchHeader, HEADER_BYTES};
use minikafka_core::txn_index::{decode_file, encode_file, AbortedTxn, ENTRY_BYTES};
use minikafka_core::types::Offset;

use super::atomic_file;
use super::segment::{txn_index_file_name, Segment};

/// The checkpoint of the ongoing transactions and marker epochs, written at a clean close
/// when there are any (`TxnTracker::encode_checkpoint`).
pub const CHECKPOINT_FILE: &str = "txn-state.checkpoint";
/// Largest checkpoint read back (I10): 16 MiB, a million ongoing transactions.
const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;
/// Bytes read per window while replaying a segment.
const REPLAY_WINDOW_BYTES: usize = 1 << 20;

/// What the open's listing of the partition directory showed of the transaction files. Only
/// this process writes the directory, so a file the listing did not show is not there: it is
/// not opened (an `openat` failing with `ENOENT` per segment at every restart).
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    /// The checkpoint ([`CHECKPOINT_FILE`]) was listed.
    pub checkpoint: bool,
    /// The base offsets of the `.txnindex` files listed, ascending.
    pub txn_indexes: &'a [Offset],
}

impl Listed<'_> {
    /// Whether the `.txnindex` of the segment at `base` was listed.
    fn has_txn_index(&self, base: Offset) -> bool {
        self.txn_indexes.binary_search(&base).is_ok()
    }
}

/// The path of the `.txnindex` of the segment at `base_offset` in `dir`.
pub fn txn_index_path(dir: &Path, base_offset: Offset) -> PathBuf {
    dir.join(txn_index_file_name(base_offset))
}

/// Appends `entries` to the `.txnindex` of the segment at `base_offset` (created if absent).
pub async fn append_entries<B: Backend>(
    backend: &B,
    dir: &Path,
    base_offset: Offset,
    entries: &[AbortedTxn],
) -> io::Result<()> {
    let file = backend
        .open(&txn_index_path(dir, base_offset), OpenMode::ReadWriteCreate)
        .await?;
    let len = file.len().await?;
    // A torn entry (a crash mid-append) is cut: entries start at multiples of 34 bytes.
    let at = len - len % ENTRY_BYTES as u64;
    let (written, _) = file.write_at(encode_file(entries), at).await;
    // Synced, and a new file's directory entry too: a clean open trusts these files (I70).
    let synced = match written {
        Ok(()) => file.sync_data().await,
        Err(e) => Err(e),
    };
    let closed = file.close().await;
    synced.and(closed)?;
    if len == 0 {
        backend.sync_dir(dir).await?;
    }
    Ok(())
}

/// Writes the checkpoint of `tracker` at log end `end` (atomically), or removes a stale one
/// when the tracker holds nothing it would save (`on_disk`: one is there). Returns whether
/// one is on disk afterwards.
pub async fn save_checkpoint<B: Backend>(
    backend: &B,
    dir: &Path,
    tracker: &TxnTracker,
    end: Offset,
    on_disk: bool,
) -> io::Result<bool> {
    let path = dir.join(CHECKPOINT_FILE);
    if tracker.has_no_live_state() {
        if on_disk {
            backend.remove_file(&path).await?;
            backend.sync_dir(dir).await?;
        }
        return Ok(false);
    }
    atomic_file::write_atomically(backend, dir, &path, tracker.encode_checkpoint(end)).await?;
    Ok(true)
}

/// The state a clean close left: the checkpoint (or none: nothing ongoing) if it describes
/// log end `end`, with the aborted ranges of every segment's `.txnindex`. `None` when any
/// of it is missing or damaged (the caller replays the log).
async fn load_clean<B: Backend>(
    backend: &B,
    dir: &Path,
    segments: &[Rc<Segment<B>>],
    listed: &Listed<'_>,
    end: Offset,
) -> Option<TxnTracker> {
    let mut tracker = if listed.checkpoint {
        let path = dir.join(CHECKPOINT_FILE);
        let bytes = atomic_file::read_bounded(backend, &path, MAX_CHECKPOINT_BYTES)
            .await
            .ok()??;
        let (at, tracker) = TxnTracker::decode_checkpoint(&bytes)?;
        (at == end).then_some(tracker)?
    } else {
        TxnTracker::new()
    };
    let mut aborted = Vec::new();
    for segment in segments {
        if let Some(entries) = read_file(backend, dir, segment, listed).await.ok()? {
            aborted.extend(entries);
        }
    }
    tracker.set_aborted(aborted);
    Some(tracker)
}

/// Removes the `.txnindex` of the segment at `base_offset`, if present.
pub async fn remove<B: Backend>(backend: &B, dir: &Path, base_offset: Offset) -> io::Result<()> {
    match backend.remove_file(&txn_index_path(dir, base_offset)).await {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Rebuilds the transaction state of the log made of `segments`, and makes each segment's
/// `.txnindex` say what its ABORT markers say. See the module docs.
///
/// The replay starts at the first segment's base (below the log start the bytes of that
/// segment are still there); an entry already in a `.txnindex` whose transaction began
/// below that (its first batches were deleted with their segment) cannot be derived again and
/// is kept from the file.
///
/// After a clean shutdown the state is read back instead ([`load_clean`]): the checkpoint
/// the close wrote (none when nothing was ongoing) if it describes the log's end, and the
/// `.txnindex` files (synced as they were written); anything missing or damaged falls back
/// to the replay.
pub async fn rebuild<B: Backend>(
    backend: &B,
    dir: &Path,
    segments: &[Rc<Segment<B>>],
    log_start: Offset,
    clean_shutdown: bool,
    listed: &Listed<'_>,
) -> io::Result<TxnTracker> {
    let end = segments.last().map_or(log_start, |s| s.next_offset());
    if clean_shutdown {
        if let Some(mut tracker) = load_clean(backend, dir, segments, listed, end).await {
            tracker.drop_below(log_start);
            return Ok(tracker);
        }
        tracing::info!(
            ?dir,
            "no usable transaction state from the clean close: replaying the log"
        );
    }
    let mut tracker = TxnTracker::new();
    let from = segments.first().map_or(log_start, |s| s.base_offset());
    let mut all = Vec::new();
    for segment in segments {
        let base = segment.base_offset();
        // A damaged file is rewritten below (or removed), like a missing one.
        let read = read_file(backend, dir, segment, listed).await;
        let absent = matches!(read, Ok(None));
        let on_disk = read.unwrap_or(None);
        let before = tracker.aborted().count();
        replay_segment(segment, from, &mut tracker).await?;
        let mut entries: Vec<AbortedTxn> = on_disk
            .iter()
            .flatten()
            .filter(|e| e.first_offset < from.0 && e.last_offset >= base.0)
            .copied()
            .collect();
        entries.extend(tracker.aborted().skip(before).copied());
        entries.sort_by_key(|e| e.last_offset);
        entries.dedup();
        // No file is what no ABORT marker asks for: nothing to remove (a removal of a missing
        // file is an `unlinkat` a kernel worker runs, one per partition at every restart).
        let nothing_to_do = absent && entries.is_empty();
        if !nothing_to_do && on_disk.as_deref() != Some(entries.as_slice()) {
            rewrite(backend, dir, base, &entries, on_disk.is_some()).await?;
        }
        all.extend(entries);
    }
    tracker.set_aborted(all);
    tracker.drop_below(log_start);
    Ok(tracker)
}

/// The entries of the segment's `.txnindex`: `Ok(None)` when it is missing, `Err(())` when
/// it is damaged.
async fn read_file<B: Backend>(
    backend: &B,
    dir: &Path,
    segment: &Segment<B>,
    listed: &Listed<'_>,
) -> Result<Option<Vec<AbortedTxn>>, ()> {
    if !listed.has_txn_index(segment.base_offset()) {
        return Ok(None);
    }
    let path = txn_index_path(dir, segment.base_offset());
    // Bounded by what the segment can hold (one entry per marker batch at most), never by
    // the file's own length (I10): a larger file is damaged and rebuilt.
    let limit = (segment.size_bytes() / HEADER_BYTES as u64 + 1) * ENTRY_BYTES as u64;
    match atomic_file::read_bounded(backend, &path, limit).await {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => decode_file(&bytes).map(Some).ok_or(()),
        Err(_) => Err(()),
    }
}

/// Makes the `.txnindex` of the segment a cleaning swaps in at `base` hold exactly `entries`
/// (none: no file), atomically (I154).
pub async fn write_cleaned<B: Backend>(
    backend: &B,
    dir: &Path,
    base: Offset,
    entries: &[AbortedTxn],
) -> io::Result<()> {
    if entries.is_empty() {
        return remove(backend, dir, base).await;
    }
    atomic_file::write_atomically(
        backend,
        dir,
        &txn_index_path(dir, base),
        encode_file(entries),
    )
    .await
}

/// Makes the segment's `.txnindex` hold exactly `entries` (none: no file).
async fn rewrite<B: Backend>(
    backend: &B,
    dir: &Path,
    base: Offset,
    entries: &[AbortedTxn],
    exists: bool,
) -> io::Result<()> {
    let path = txn_index_path(dir, base);
    if entries.is_empty() {
        if exists {
            tracing::info!(?path, "removing a txnindex with no ABORT marker behind it");
        }
        return remove(backend, dir, base).await;
    }
    tracing::info!(?path, "rebuilding the txnindex from the log (I70)");
    atomic_file::write_atomically(backend, dir, &path, encode_file(entries)).await
}

/// Replays every batch of `segment` at or above `from` into `tracker`.
async fn replay_segment<B: Backend>(
    segment: &Segment<B>,
    from: Offset,
    tracker: &mut TxnTracker,
) -> io::Result<()> {
    if segment.next_offset() <= from || segment.is_empty() {
        return Ok(());
    }
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let end = segment.size_bytes();
    let mut pos = if segment.base_offset() <= from {
        segment.floor_position(from).as_u64()
    } else {
        0
    };
    let mut want = REPLAY_WINDOW_BYTES;
    while pos < end {
        let len = want.min((end - pos) as usize);
        let window = segment.read_log(pos, len).await?;
        if window.len() != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment shorter than its published size",
            ));
        }
        let mut at = 0usize;
        while window.len() - at >= HEADER_BYTES {
            let header = BatchHeader::parse(&window[at..]).map_err(|e| invalid(e.to_string()))?;
            let total = header.total_bytes();
            if window.len() - at < total {
                break;
            }
            if header.base_offset >= from {
                if header.is_control() {
                    // A control batch that is not a transaction marker is skipped, as Kafka does.
                    if let Ok(marker) = decode_marker(&window[at..at + total]) {
                        tracker.on_marker(&marker, header.base_offset);
                    }
                } else {
                    tracker.on_data(&ProducerBatch::from_header(&header), header.base_offset);
                }
            }
            at += total;
        }
        if at == 0 {
            // One batch larger than the window: read it whole next time.
            let header = BatchHeader::parse(&window).map_err(|e| invalid(e.to_string()))?;
            let total = header.total_bytes();
            if total as u64 > end - pos || total <= window.len() {
                return Err(invalid(
                    "batch extends past the segment's published size".into(),
                ));
            }
            want = total;
            continue;
        }
        want = REPLAY_WINDOW_BYTES;
        pos += at as u64;
    }
    Ok(())
}
