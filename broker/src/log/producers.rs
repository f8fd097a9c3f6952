//! Persistence of a partition's idempotent producer state (`minikafka_core::producer`), so
//! that duplicate detection survives a restart, clean or not.
//!
//! Design (Kafka's, minimal): the state is a function of the log — replaying every
//! idempotent batch in log order through
//! [`ProducerStateTable::on_appended`] rebuilds it — and a snapshot is a checkpoint of that
//! function at an offset, so only the batches after the checkpoint are replayed.
//! - `<20-digit offset>.snapshot` holds the state of every batch below `offset` (format in
//!   `minikafka_core::producer`, CRC-32C checked). It is written atomically (`.tmp`, sync,
//!   rename, directory sync) at each segment roll (offset = the new segment's base: the old
//!   segment was synced first, so the snapshot never covers bytes a crash could take away,
//!   I5) and at a clean close (offset = the high watermark, after the final sync). The newest
//!   [`SNAPSHOTS_KEPT`] are kept, older ones deleted. A failed snapshot write is logged and
//!   otherwise ignored: it only makes the next open replay more.
//! - At open ([`load`]): snapshots above the recovered log end (recovery cut what they
//!   covered) and snapshots that fail to decode are deleted; the newest remaining one at `S`
//!   is loaded, producers whose last batch lies below the log start are dropped (retention
//!   deleted their records, and a stale snapshot cannot vouch for them), and every batch at
//!   or above `S` is replayed from the segments (from the index floor of `S`). After a clean
//!   shutdown `S` is the log end and nothing is read beyond the snapshot; after a crash the
//!   active segment (which recovery scans anyway) is replayed; with no usable snapshot the
//!   whole log is. Producers idle for `producer_id_expiration_ms` are then dropped.
//! - Soundness: a replayed batch updates its producer to what the live append did, so the
//!   state after replay equals the live state whenever the replay covers every batch after
//!   `S` — true because the segments above the log start are contiguous and `S` ≥ the log
//!   start after the drop above. Forgetting a producer is always safe: an unknown producer is
//!   accepted at any sequence (rule 3 of `minikafka_core::producer`), it only loses
//!   deduplication of a retry.
//! - A batch that does not parse below a segment's published size (disk damage in a sealed
//!   segment, which startup does not scan) stops the replay: the table is cleared (every
//!   producer unknown) rather than left half-built, and the partition opens.
//! - Never: allocates a snapshot larger than the limits allow (I10), or fails the open
//!   because of a snapshot.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::producer::{
    ProducerBatch, ProducerLimits, ProducerStateTable, RETAINED_BATCHES, SNAPSHOT_BATCH_BYTES,
    SNAPSHOT_HEADER_BYTES, SNAPSHOT_PRODUCER_BYTES,
};
use minikafka_core::record::{BatchHeader, HEADER_BYTES};
use minikafka_core::types::Offset;

use super::segment::{snapshot_file_name, Segment, TMP_SUFFIX};
use super::Result;

/// Snapshots kept per partition (the newest ones): one spare if the newest is damaged.
pub const SNAPSHOTS_KEPT: usize = 2;
/// Bytes read per window while replaying a segment.
pub const REPLAY_WINDOW_BYTES: usize = 1 << 20;

/// What [`load`] did at open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerLoad {
    /// The offset of the snapshot loaded; `None` when none was usable (full replay).
    pub snapshot_offset: Option<Offset>,
    /// Snapshots deleted as unusable (damaged, or above the log end), with the reason.
    pub rejected: Vec<(Offset, String)>,
    /// Idempotent batches replayed from the segments.
    pub replayed_batches: u64,
    /// True when a batch did not parse and the state was cleared.
    pub replay_failed: bool,
    /// Producers known after the load.
    pub producers: usize,
}

/// The largest snapshot `limits` allow (anything larger is not ours, I10).
fn max_snapshot_bytes(limits: ProducerLimits) -> u64 {
    let per_producer = SNAPSHOT_PRODUCER_BYTES + RETAINED_BATCHES * SNAPSHOT_BATCH_BYTES;
    (SNAPSHOT_HEADER_BYTES + 4) as u64 + (limits.max_producers as u64) * per_producer as u64
}

/// Loads the producer state of a partition whose segments were just recovered (see the module
/// documentation). `snapshots` lists the snapshot offsets found in `dir`, ascending; it is
/// left listing the files that remain.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn load<B: Backend>(
    backend: &B,
    dir: &Path,
    snapshots: &mut Vec<Offset>,
    segments: &[Rc<Segment<B>>],
    log_start: Offset,
    log_end: Offset,
    limits: ProducerLimits,
    now_ms: i64,
) -> Result<(ProducerStateTable, ProducerLoad)> {
    let mut report = ProducerLoad::default();
    let mut loaded: Option<(Offset, ProducerStateTable)> = None;
    let mut keep = Vec::with_capacity(snapshots.len());
    for &offset in snapshots.iter().rev() {
        if loaded.is_some() {
            keep.push(offset);
            continue;
        }
        let path = dir.join(snapshot_file_name(offset));
        let problem = if offset > log_end {
            Some(format!("above the log end {log_end}"))
        } else {
            match read_snapshot(backend, &path, limits).await? {
                Err(problem) => Some(problem),
                Ok((found, _)) if found != offset => {
                    Some(format!("names offset {offset} but holds {found}"))
                }
                Ok((_, table)) => {
                    loaded = Some((offset, table));
                    keep.push(offset);
                    None
                }
            }
        };
        if let Some(problem) = problem {
            tracing::warn!(?path, %problem, "ignoring producer state snapshot");
            remove_if_present(backend, &path).await?;
            report.rejected.push((offset, problem));
        }
    }
    if !report.rejected.is_empty() {
        backend.sync_dir(dir).await?;
    }
    keep.sort();
    *snapshots = keep;

    let (from, mut table) = match loaded {
        Some((offset, table)) => {
            report.snapshot_offset = Some(offset);
            (offset, table)
        }
        None => (Offset(0), ProducerStateTable::new(limits)),
    };
    table.remove_below(log_start);
    match replay(segments, from, &mut table, now_ms).await {
        Ok(count) => report.replayed_batches = count,
        Err(e) => {
            tracing::warn!(
                ?dir,
                error = %e,
                "producer state replay failed: every producer starts unknown"
            );
            table = ProducerStateTable::new(limits);
            report.replay_failed = true;
        }
    }
    table.remove_expired(now_ms);
    report.producers = table.len();
    Ok((table, report))
}

/// Reads and decodes one snapshot: `Ok(Err(reason))` when it is unusable.
async fn read_snapshot<B: Backend>(
    backend: &B,
    path: &Path,
    limits: ProducerLimits,
) -> Result<std::result::Result<(Offset, ProducerStateTable), String>> {
    let file = match backend.open(path, OpenMode::ReadOnly).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err("vanished".into())),
        Err(e) => return Err(e.into()),
    };
    let len = file.len().await?;
    if len > max_snapshot_bytes(limits) {
        let _ = file.close().await;
        return Ok(Err(format!(
            "{len} bytes is larger than any snapshot (I10)"
        )));
    }
    let len = len as usize; // bounded above
    let (result, bytes) = file.read_at(Vec::with_capacity(len), 0, len).await;
    let _ = file.close().await;
    result?;
    if bytes.len() != len {
        return Ok(Err("short read".into()));
    }
    Ok(ProducerStateTable::decode_snapshot(&bytes, limits).map_err(|e| e.to_string()))
}

/// Replays every batch at or above `from` into `table`; returns how many idempotent batches
/// it applied.
async fn replay<B: Backend>(
    segments: &[Rc<Segment<B>>],
    from: Offset,
    table: &mut ProducerStateTable,
    now_ms: i64,
) -> io::Result<u64> {
    let mut applied = 0u64;
    for segment in segments {
        if segment.next_offset() <= from || segment.is_empty() {
            continue;
        }
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
                let header = BatchHeader::parse(&window[at..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let total = header.total_bytes();
                if window.len() - at < total {
                    break;
                }
                if header.base_offset >= from {
                    let batch = ProducerBatch::from_header(&header);
                    // Transactional batches carry sequences like any idempotent batch; markers
                    // carry none (their epochs are the transaction state's, `txn_index`).
                    if batch.is_idempotent() && !batch.is_control {
                        table.on_appended(
                            &batch,
                            header.base_offset,
                            header.last_offset(),
                            header.max_timestamp,
                            now_ms,
                        );
                        applied += 1;
                    }
                }
                at += total;
            }
            if at == 0 {
                // One batch larger than the window: read it whole next time.
                let header = BatchHeader::parse(&window)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let total = header.total_bytes();
                if total as u64 > end - pos || total <= window.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "batch extends past the segment's published size",
                    ));
                }
                want = total;
                continue;
            }
            want = REPLAY_WINDOW_BYTES;
            pos += at as u64;
        }
    }
    Ok(applied)
}

/// Writes `bytes` as the snapshot at `offset` in `dir`, atomically: a `.tmp` file, synced,
/// renamed, then the directory synced.
pub(crate) async fn write_snapshot<B: Backend>(
    backend: &B,
    dir: &Path,
    offset: Offset,
    bytes: Vec<u8>,
) -> io::Result<PathBuf> {
    let path = dir.join(snapshot_file_name(offset));
    let tmp = dir.join(format!("{}.{TMP_SUFFIX}", snapshot_file_name(offset)));
    let file = backend.open(&tmp, OpenMode::ReadWriteCreate).await?;
    file.truncate(0).await?;
    let (result, _) = file.write_at(bytes, 0).await;
    result?;
    file.sync_data().await?;
    file.close().await?;
    backend.rename(&tmp, &path).await?;
    backend.sync_dir(dir).await?;
    Ok(path)
}

/// Deletes all but the newest [`SNAPSHOTS_KEPT`] of `snapshots` (ascending), keeping the list
/// in step with the files.
pub(crate) async fn prune<B: Backend>(
    backend: &B,
    dir: &Path,
    snapshots: &mut Vec<Offset>,
) -> io::Result<()> {
    while snapshots.len() > SNAPSHOTS_KEPT {
        let oldest = snapshots[0];
        remove_if_present(backend, &dir.join(snapshot_file_name(oldest))).await?;
        snapshots.remove(0);
    }
    Ok(())
}

async fn remove_if_present<B: Backend>(backend: &B, path: &Path) -> io::Result<()> {
    match backend.remove_file(path).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
