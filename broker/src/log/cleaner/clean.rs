//! One cleaning of one partition: core decides, this module reads and writes.
//!
//! Contract:
//! - Reads sealed segments in windows of whole batches (never the active segment), builds
//!   core's key map within `log.cleaner.dedupe.buffer.size`, filters every batch below the
//!   pass end with core's rules, writes the survivors to `.cleaned` files — consecutive
//!   segments grouped while the group fits `segment.bytes` and 32-bit relative offsets (I6) —
//!   and swaps each group in (I24). A group whose records all survive is left as it is.
//! - Transaction markers follow core's [`MarkerPass`] (I154): kept while their transaction
//!   has data, stamped with a delete horizon once it has none, removed once the horizon has
//!   passed. The `.txnindex` of a swapped-in segment holds the aborted ranges of the ABORT
//!   markers it kept, written before the swap's commit point; the ranges of removed markers
//!   are forgotten in memory once the swap is in.
//! - Throttled: after each window read or written it sleeps long enough to keep to
//!   `log.cleaner.io.max.bytes.per.second` (on the backend's timer; no clock is read).
//! - Readers in flight keep the `Rc<Segment>` they started on; its file stays open.
//! - Never: renumbers a record (I1), touches the active segment, or leaves a swap half-done
//!   except by a crash (which recovery finishes).

use std::rc::Rc;
use std::time::Duration;

use minikafka_codec::KafkaCodecs;
use minikafka_core::backend::Backend;
use minikafka_core::compaction::choose::{choose, CleanPlan, SegmentFacts};
use minikafka_core::compaction::markers::{MarkerPass, MarkerVerdict};
use minikafka_core::compaction::offset_map::KeyOffsetMap;
use minikafka_core::compaction::retain::{keep_record, TombstoneHorizon};
use minikafka_core::compaction::rewrite::{
    batch_records, filter_batch, FilterCounts, FilterError, Filtered,
};
use minikafka_core::compaction::swap::SwapRange;
use minikafka_core::control_batch::{decode_marker, ControlType};
use minikafka_core::partition::txn::in_aborted;
use minikafka_core::record::{
    peek_extent, stamp_delete_horizon, BatchHeader, BatchIter, BatchView, ValidateOptions,
    LOG_OVERHEAD,
};
use minikafka_core::txn_index::AbortedTxn;
use minikafka_core::types::Offset;

use super::checkpoint::{self, CleanerCheckpoint};
use super::settings::CleanerSettings;
use super::swap::{self, CleanedWriter};
use crate::log::partition::PartitionLog;
use crate::log::recover::open_segment;
use crate::log::segment::Segment;
use crate::log::txn_index;
use crate::log::{LogError, Result, MAX_DECOMPRESSED_BYTES};

/// Bytes read per window.
const WINDOW_BYTES: usize = 1 << 20;

/// The cleaner checkpoint `log`'s last cleaning left ([`checkpoint::load`], judged against
/// the log's active segment), or the default when there is none or it cannot be trusted.
pub async fn load_checkpoint<B: Backend>(backend: &B, log: &PartitionLog<B>) -> CleanerCheckpoint {
    let active_base = log.active_segment().base_offset();
    checkpoint::load(backend, log.dir(), active_base).await
}

/// What one cleaning did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanOutcome {
    /// Core's plan.
    pub plan: CleanPlan,
    /// The pass end: the next cleaning's first dirty offset.
    pub pass_end: Offset,
    /// Segment groups swapped.
    pub groups_swapped: usize,
    /// Bytes of the swapped segments before.
    pub bytes_before: u64,
    /// Bytes of their replacements.
    pub bytes_after: u64,
    /// Bytes read and written.
    pub io_bytes: u64,
    /// Records kept and dropped.
    pub counts: FilterCounts,
}

/// Keeps the cleaner to `log.cleaner.io.max.bytes.per.second` by sleeping after its I/O.
pub struct Throttle<'a, B: Backend> {
    backend: &'a B,
    bytes_per_second: Option<u64>,
    io_bytes: u64,
}

impl<'a, B: Backend> Throttle<'a, B> {
    /// A throttle at `bytes_per_second` (`None`: never sleeps).
    pub fn new(backend: &'a B, bytes_per_second: Option<u64>) -> Self {
        Throttle {
            backend,
            bytes_per_second,
            io_bytes: 0,
        }
    }

    async fn spent(&mut self, bytes: usize) {
        self.io_bytes += bytes as u64;
        if let Some(rate) = self.bytes_per_second.filter(|r| *r > 0) {
            let micros = (bytes as u128 * 1_000_000 / u128::from(rate)) as u64;
            if micros > 0 {
                self.backend.sleep(Duration::from_micros(micros)).await;
            }
        }
    }
}

/// Reads a segment's batches below `end_bytes` in windows holding whole batches only.
struct BatchWindows<'a, B: Backend> {
    segment: &'a Segment<B>,
    pos: u64,
    end_bytes: u64,
}

impl<'a, B: Backend> BatchWindows<'a, B> {
    fn new(segment: &'a Segment<B>) -> Self {
        BatchWindows {
            segment,
            pos: 0,
            end_bytes: segment.size_bytes(),
        }
    }

    /// The next window of whole batches, `None` at the end.
    async fn next(&mut self, throttle: &mut Throttle<'_, B>) -> Result<Option<Vec<u8>>> {
        if self.pos >= self.end_bytes {
            return Ok(None);
        }
        let left = (self.end_bytes - self.pos) as usize;
        let mut window = self
            .segment
            .read_log(self.pos, WINDOW_BYTES.min(left))
            .await?;
        let mut whole = whole_batches_len(&window);
        if whole == 0 {
            // A batch larger than the window: read exactly it.
            let total = peek_extent(&window)
                .and_then(|(_, len)| usize::try_from(len).ok())
                .map(|len| len + LOG_OVERHEAD)
                .filter(|total| *total <= left)
                .ok_or_else(|| {
                    corrupt(self.segment, self.pos, "batch length runs past the segment")
                })?;
            window = self.segment.read_log(self.pos, total).await?;
            whole = whole_batches_len(&window);
            if whole == 0 {
                return Err(corrupt(
                    self.segment,
                    self.pos,
                    "short read of a sealed segment",
                ));
            }
        }
        window.truncate(whole);
        throttle.spent(whole).await;
        self.pos += whole as u64;
        Ok(Some(window))
    }
}

/// Length of the whole batches at the start of `buf`, by their length fields.
fn whole_batches_len(buf: &[u8]) -> usize {
    let mut pos = 0usize;
    while let Some((_, len)) = peek_extent(&buf[pos..]) {
        let Some(total) = usize::try_from(len).ok().map(|l| l + LOG_OVERHEAD) else {
            break;
        };
        if len < 0 || pos + total > buf.len() {
            break;
        }
        pos += total;
    }
    pos
}

fn corrupt<B: Backend>(segment: &Segment<B>, pos: u64, what: &str) -> LogError {
    LogError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {what} at byte {pos}", segment.log_path().display()),
    ))
}

fn filter_error<B: Backend>(segment: &Segment<B>, e: FilterError) -> LogError {
    LogError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {e}", segment.log_path().display()),
    ))
}

/// The facts core's [`choose`] needs. A sealed segment ends where the next one begins (a
/// cleaned one may hold nothing up to there).
/// The facts core's planner reads. A segment reaching past the last stable offset counts as
/// not sealed: nothing at or past the LSO is cleaned (I71), as an open transaction may still
/// be aborted.
fn segment_facts<B: Backend>(segments: &[Rc<Segment<B>>], lso: Offset) -> Vec<SegmentFacts> {
    segments
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let next = segments.get(i + 1);
            let next_offset = next.map_or(s.next_offset(), |n| n.base_offset());
            SegmentFacts {
                base_offset: s.base_offset(),
                next_offset,
                size_bytes: s.size_bytes(),
                max_timestamp_ms: s.max_timestamp_ms(),
                sealed: next.is_some() && next_offset <= lso,
            }
        })
        .collect()
}

/// Whether `header` is a transactional data batch of an aborted transaction.
fn is_aborted(aborted: &[AbortedTxn], header: &BatchHeader) -> bool {
    header.is_transactional()
        && !header.is_control()
        && in_aborted(aborted, header.producer_id, header.base_offset)
}

/// Applies core's marker verdict to the control batch `view` (I154): appends what stays to
/// `out`, counts, and collects the aborted range of a removed ABORT marker into `gone`.
#[allow(clippy::too_many_arguments)]
fn clean_marker(
    view: &BatchView<'_>,
    markers: &mut MarkerPass,
    aborted: &[AbortedTxn],
    now_ms: i64,
    delete_retention_ms: i64,
    out: &mut Vec<u8>,
    counts: &mut FilterCounts,
    gone: &mut Vec<AbortedTxn>,
) {
    let header = &view.header;
    // A control batch that is not a transaction marker is kept, as Kafka keeps it.
    let Ok(marker) = decode_marker(view.bytes) else {
        counts.kept += header.records_count.max(0) as u64;
        out.extend_from_slice(view.bytes);
        return;
    };
    let verdict = markers.on_marker(
        marker.producer_id,
        header.delete_horizon_ms(),
        now_ms,
        delete_retention_ms,
    );
    let stamped = match verdict {
        MarkerVerdict::Remove => {
            counts.markers_removed += 1;
            if marker.control_type == ControlType::Abort {
                gone.extend(aborted.iter().copied().filter(|a| {
                    a.producer_id == marker.producer_id && a.last_offset == header.base_offset.0
                }));
            }
            return;
        }
        MarkerVerdict::Stamp(horizon) => stamp_delete_horizon(view.bytes, horizon),
        MarkerVerdict::Keep | MarkerVerdict::Wait(_) => None,
    };
    if let Some(horizon) = verdict.pending_horizon() {
        counts.note_expiry(horizon, delete_retention_ms);
    }
    counts.kept += 1;
    match stamped {
        Some(bytes) => {
            counts.markers_stamped += 1;
            out.extend_from_slice(&bytes);
        }
        None => out.extend_from_slice(view.bytes),
    }
}

/// Cleans `log` once if core says it is due. `Ok(None)`: nothing to do.
pub async fn clean_partition<B: Backend>(
    backend: &B,
    log: &PartitionLog<B>,
    checkpoint: &mut CleanerCheckpoint,
    settings: &CleanerSettings,
    now_ms: i64,
) -> Result<Option<CleanOutcome>> {
    let config = log.config().clone();
    let segments = log.segments();
    // The LSO and the aborted ranges below it, read together (no await between).
    let lso = log.last_stable_offset();
    let aborted = log.aborted_transactions(Offset(0), lso);
    let facts = segment_facts(&segments, lso);
    let Ok(plan) = choose(
        &facts,
        checkpoint.first_dirty,
        checkpoint.oldest_kept_tombstone_ms,
        &config.compaction,
        now_ms,
    ) else {
        return Ok(None);
    };
    let mut throttle = Throttle::new(backend, settings.io_max_bytes_per_second);
    let mut codec = KafkaCodecs;
    let opts = ValidateOptions {
        max_batch_bytes: config.max_batch_bytes,
        ..ValidateOptions::stored()
    };

    // The key map: one pass over the dirty part, until the budget is full.
    let mut map = KeyOffsetMap::new(settings.dedupe_buffer_bytes, plan.first_dirty);
    {
        'build: for (segment, fact) in segments.iter().zip(&facts) {
            if fact.next_offset <= plan.first_dirty {
                continue;
            }
            // Only sealed segments are cleaned: the active one (even when empty, just rolled)
            // grows while this pass awaits its reads.
            if fact.next_offset > plan.end || !fact.sealed {
                break;
            }
            let mut windows = BatchWindows::new(segment);
            'segment: while let Some(window) = windows.next(&mut throttle).await? {
                for view in BatchIter::new(&window).with_options(opts) {
                    let view = view.map_err(|e| corrupt(segment, e.at as u64, &e.to_string()))?;
                    if view.header.base_offset >= fact.next_offset {
                        break 'segment;
                    }
                    if view.header.base_offset < plan.first_dirty {
                        continue;
                    }
                    // Markers and aborted transactions give no key a latest value.
                    if view.header.is_control() || is_aborted(&aborted, &view.header) {
                        map.skip_to(view.header.next_offset());
                        continue;
                    }
                    let decoded = batch_records(&view, &mut codec, MAX_DECOMPRESSED_BYTES)
                        .map_err(|e| filter_error(segment, e))?;
                    if map
                        .add_batch(decoded.keyed(), view.header.next_offset())
                        .is_err()
                    {
                        break 'build;
                    }
                }
            }
            // The whole segment fit: the pass covers up to where the next one begins.
            map.skip_to(fact.next_offset);
        }
    }
    let pass_end = map.pass_end();
    let horizon = TombstoneHorizon::at(now_ms, config.compaction.delete_retention_ms);

    // Groups of consecutive sealed segments below the pass end.
    let mut groups: Vec<(SwapRange, Vec<Rc<Segment<B>>>)> = Vec::new();
    for (segment, fact) in segments.iter().zip(&facts) {
        if !fact.sealed || fact.base_offset >= pass_end {
            break;
        }
        let fits = groups.last().is_some_and(|(range, members)| {
            let bytes: u64 = members.iter().map(|s| s.size_bytes()).sum();
            bytes + fact.size_bytes <= config.segment_bytes
                && fact.next_offset.0 - range.base.0 <= i64::from(u32::MAX)
        });
        if fits {
            let (range, members) = groups.last_mut().expect("a group");
            range.end = fact.next_offset;
            members.push(Rc::clone(segment));
        } else {
            groups.push((
                SwapRange {
                    base: fact.base_offset,
                    end: fact.next_offset,
                },
                vec![Rc::clone(segment)],
            ));
        }
    }

    let dir = log.dir().to_path_buf();
    let mut outcome = CleanOutcome {
        plan,
        pass_end,
        groups_swapped: 0,
        bytes_before: 0,
        bytes_after: 0,
        io_bytes: 0,
        counts: FilterCounts::default(),
    };
    let delete_retention_ms = config.compaction.delete_retention_ms;
    // Read from the log's first batch, group after group, in offset order (I154).
    let mut markers = MarkerPass::new();
    for (range, members) in groups {
        let mut writer = CleanedWriter::create(backend, &dir, range).await?;
        let mut group_counts = FilterCounts::default();
        let mut gone: Vec<AbortedTxn> = Vec::new();
        for segment in &members {
            let mut windows = BatchWindows::new(segment);
            while let Some(window) = windows.next(&mut throttle).await? {
                let mut out = Vec::with_capacity(window.len());
                for view in BatchIter::new(&window).with_options(opts) {
                    let view = view.map_err(|e| corrupt(segment, e.at as u64, &e.to_string()))?;
                    if view.header.next_offset() > pass_end {
                        out.extend_from_slice(view.bytes);
                        continue;
                    }
                    if view.header.is_control() {
                        clean_marker(
                            &view,
                            &mut markers,
                            &aborted,
                            now_ms,
                            delete_retention_ms,
                            &mut out,
                            &mut group_counts,
                            &mut gone,
                        );
                        continue;
                    }
                    if is_aborted(&aborted, &view.header) {
                        // Kafka's cleaner drops an aborted transaction's records; its marker
                        // stays until a later pass finds the transaction empty (I154).
                        group_counts.aborted += view.header.records_count.max(0) as u64;
                        markers.on_data(view.header.producer_id, false);
                        continue;
                    }
                    let (filtered, counts) =
                        filter_batch(&view, &mut codec, MAX_DECOMPRESSED_BYTES, |facts| {
                            keep_record(facts, &map, horizon)
                        })
                        .map_err(|e| filter_error(segment, e))?;
                    group_counts.add(counts);
                    if view.header.is_transactional() {
                        markers.on_data(
                            view.header.producer_id,
                            !matches!(filtered, Filtered::Removed),
                        );
                    }
                    match filtered {
                        Filtered::Unchanged => out.extend_from_slice(view.bytes),
                        Filtered::Removed => {}
                        Filtered::Rewritten(bytes) => out.extend_from_slice(&bytes),
                    }
                }
                let written = out.len();
                writer.write(out).await?;
                throttle.spent(written).await;
            }
        }
        outcome.counts.add(group_counts);
        let bytes_before: u64 = members.iter().map(|s| s.size_bytes()).sum();
        if !group_counts.changed() && members.len() == 1 {
            // Nothing to gain: leave the segment as it is.
            drop(writer);
            swap::discard_cleaned(backend, &dir, range).await?;
            continue;
        }
        let bytes_after = writer.finish().await?;
        if !log.holds_segments(&members) {
            // Retention removed some meanwhile: it wins, the output is dropped.
            swap::discard_cleaned(backend, &dir, range).await?;
            continue;
        }
        // The new segment's `.txnindex`: the aborted ranges of the ABORT markers it keeps,
        // durable before the commit point (I154). Until the swap lands, the old segments'
        // files still hold the same ranges: a duplicate range is harmless to a reader, a
        // missing one is only ever that of a marker whose transaction has no data left.
        let kept: Vec<AbortedTxn> = aborted
            .iter()
            .filter(|a| a.last_offset >= range.base.0 && a.last_offset < range.end.0)
            .filter(|a| !gone.contains(a))
            .copied()
            .collect();
        txn_index::write_cleaned(backend, &dir, range.base, &kept).await?;
        swap::commit(backend, &dir, range).await?;
        let old_bases: Vec<Offset> = members.iter().map(|s| s.base_offset()).collect();
        swap::finish(backend, &dir, range, &old_bases).await?;
        for base in &old_bases[1..] {
            txn_index::remove(backend, &dir, *base).await?;
        }
        // Opening it as a sealed segment rebuilds its indexes from the new file.
        let (segment, _) =
            open_segment(backend, &dir, range.base, false, false, &config, now_ms).await?;
        // Retention of a compacted topic runs in this same task (see the shard's cleaner), so
        // nothing else removes segments between the check above and here.
        if !log.replace_segments(&members, Rc::new(segment)) {
            tracing::error!(
                ?dir,
                base = range.base.0,
                "cleaned segment could not be put in place"
            );
        }
        log.forget_aborted(&gone);
        outcome.groups_swapped += 1;
        outcome.bytes_before += bytes_before;
        outcome.bytes_after += bytes_after;
    }
    outcome.io_bytes = throttle.io_bytes;
    checkpoint.first_dirty = pass_end;
    checkpoint.oldest_kept_tombstone_ms = outcome.counts.oldest_kept_tombstone_ms;
    Ok(Some(outcome))
}
