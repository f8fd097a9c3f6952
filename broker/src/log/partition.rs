//! [`PartitionLog`]: one partition's log — open (recovery), append, read, roll, flush,
//! retention, close.
//!
//! Contract:
//! - One instance per partition, on the shard that owns it; shared by that shard's tasks
//!   through `Rc`. Methods take `&self`; state lives in `Cell`/`RefCell`, never borrowed across
//!   an `.await`.
//! - Appends: validated first (I3), then queued in arrival order; the holder of an async
//!   mutex writes every queued batch (write coalescing, up to [`COALESCE_MAX_BYTES`], never
//!   across a roll) so offsets are assigned densely in file order (I1); one vectored write
//!   (`write_parts_at`: patched header copies beside the callers' record bytes) per group;
//!   index entries after the data (I4); the size and high watermark are published only
//!   after the writes completed (I2). Each batch is checked and answered on its own; a failed
//!   write is acknowledged to none of its group and publishes nothing; the next append first
//!   cuts the torn tail and writes at the same position.
//! - Acknowledgement per [`FlushPolicy`] (I8): `None` and `Interval` after the write,
//!   `Fsync` after a sync covering the batch, with group commit. A failed sync takes the
//!   partition offline for writes for good ([`LogError::Offline`]); it is never retried.
//! - Reads: snapshot the high watermark and the segment's published size, plan with core's
//!   [`FetchPlanner`] from the index floor, read whole batches below the snapshot (I2). They
//!   never take the append mutex.
//! - Retention and DeleteRecords move the log start offset forward only (I9), and only after
//!   the new value is checkpointed durably ([`super::start_offset`], I25); then they delete
//!   the whole segments (log, index, time index) below it from the front, never the active
//!   one. Open restores the start from the checkpoint and finishes a deletion a crash
//!   interrupted. A read holding a deleted segment completes (its files stay open until the
//!   read drops them).
//! - The configuration can be replaced while the log is live ([`PartitionLog::reconfigure`]).
//! - Timestamp lookups (ListOffsets): pick the first segment whose exact max timestamp reaches
//!   the target, start at its time index floor and let core's [`TimestampSearch`] read forward
//!   below the size snapshot (I2). Like reads, they never take the append mutex.
//! - Idempotent producers (KIP-98, `minikafka_core::producer`): an append of a batch with a
//!   producer id is checked against the partition's producer state under the append mutex,
//!   and recorded there before the mutex is released, so check and append are one step
//!   w.r.t. other appends. A duplicate of one of a producer's last five batches is answered
//!   with the original offsets ([`AppendInfo::duplicate`]) once those are durable per the
//!   flush policy (I8), and nothing is written; a refused batch is
//!   [`LogError::Producer`]. The state is snapshotted at each roll and at close and rebuilt
//!   at open ([`super::producers`]).
//! - Decisions are core's (table in `docs/DESIGN.md`, "Where decisions live"): the batch
//!   checks (`record`), when to roll (`roll`), the producer rules and which batches share a
//!   write (`producer::GroupAdmission`), the fetch plan and budget (`fetch`), retention, the
//!   timestamp search. This file carries them out: queueing, locking, I/O, publishing.
//! - Never reads a clock: time comes in as `now_ms`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::lock::Mutex;
use minikafka_core::backend::Backend;
use minikafka_core::control_batch::{decode_marker, encode_marker, TxnMarker};
use minikafka_core::fetch::{batches_below, FetchPlanner, FetchStep};
use minikafka_core::partition::rules::{self, Published, Verdict};
use minikafka_core::partition::txn::TxnTracker;
use minikafka_core::partition::{AppendKind, FlushRule, PartitionConfig, PartitionMachine};
use minikafka_core::producer::{
    BatchMetadata, Decision, GroupAdmission, ProducerBatch, ProducerEntry, ProducerLimits,
    ProducerStateTable,
};
use minikafka_core::record::{
    patch_base_offset, patch_leader_epoch, stamp_log_append_time_split, BatchHeader, HEADER_BYTES,
};
use minikafka_core::retention::{self, RetentionLimits, SegmentInfo};
use minikafka_core::roll::{self, ActiveSegment, RollLimits};
use minikafka_core::time_index::{SearchStep, TimestampHit, TimestampSearch};
use minikafka_core::txn_index::AbortedTxn;
use minikafka_core::types::{FilePos, Offset};

use super::commit::{GroupCommit, SyncFailure};
use super::config::{FlushPolicy, LogConfig, TimestampType};
use super::produced_batch::{recompressed, validate_produced};
use super::producers::{self, ProducerLoad};
use super::recover::{open_segment, SegmentRecovery};
use super::recovered_sync::{RecoveredLog, UnsyncedLog};
use super::schema_ids::KnownSchemaIds;
use super::segment::{classify, Segment, SegmentFile};
use super::start_offset;
use super::txn_index;
use super::{LogError, Result, LEADER_EPOCH};
use crate::metrics::SyncStats;

/// Most bytes of batches one coalesced write takes (a group always takes its first batch,
/// whatever its size).
pub const COALESCE_MAX_BYTES: u64 = 1 << 20;
/// Bytes read per window while planning a fetch past its first read (headers only are
/// looked at).
const PLAN_WINDOW_BYTES: usize = 16 * 1024;
/// Bytes read per window while searching a segment for a timestamp.
const SEARCH_WINDOW_BYTES: usize = 16 * 1024;

/// What an acknowledged append produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the batch's first record.
    pub base_offset: Offset,
    /// Offset of the batch's last record.
    pub last_offset: Offset,
    /// The log-append time the batch was stamped with, on a `LogAppendTime` log (`None`:
    /// CreateTime, or a duplicate, whose original was stamped earlier; Kafka's response
    /// then carries -1).
    pub log_append_time_ms: Option<i64>,
    /// Base offset of the segment the batch went to.
    pub segment_base_offset: Offset,
    /// Byte position of the batch in that segment. For a duplicate: the index floor of the
    /// original batch (a position at or before it).
    pub position: FilePos,
    /// True when the batch was a duplicate of an idempotent producer's earlier batch: nothing
    /// was written, and the offsets are the original's.
    pub duplicate: bool,
}

/// The answer to a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole batches starting with the one holding the fetch offset (empty at the high
    /// watermark). The first batch is whole even when larger than `max_bytes`. Shared, so a
    /// response can send it without a copy.
    pub bytes: Bytes,
    /// The offset the next append will get, as snapshotted for this read.
    pub high_watermark: Offset,
    /// The first offset in the log.
    pub log_start_offset: Offset,
    /// The last stable offset, snapshotted with the high watermark (I67).
    pub last_stable_offset: Offset,
    /// For a read_committed read: the aborted transactions overlapping the bytes returned
    /// (Kafka's `aborted_transactions`), in marker order; empty otherwise.
    pub aborted: Vec<AbortedTxn>,
}

/// What [`PartitionLog::apply_retention`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Base offsets of the segments deleted.
    pub deleted_base_offsets: Vec<Offset>,
    /// The log start offset afterwards.
    pub log_start_offset: Offset,
}

/// One partition's log. See the module documentation for the contract.
pub struct PartitionLog<B: Backend> {
    backend: B,
    dir: PathBuf,
    /// The configuration in force; replaced whole by [`PartitionLog::reconfigure`], read in
    /// short borrows (never across an `.await`).
    config: RefCell<LogConfig>,
    /// Ordered by base offset; the last is the active segment. Never empty.
    segments: RefCell<Vec<Rc<Segment<B>>>>,
    /// Moved only after [`start_offset`] made the new value durable (I25).
    log_start_offset: Cell<Offset>,
    /// Serializes moves of the log start offset (retention, DeleteRecords), so checkpoints are
    /// written in increasing order and segments are deleted by one task at a time.
    start_lock: Mutex<()>,
    /// The offset the next append gets; published after the write (I2).
    high_watermark: Cell<Offset>,
    /// One writer at a time (I1).
    append_lock: Mutex<()>,
    /// Validated appends waiting to be written, in arrival order; drained by the holder of
    /// `append_lock`.
    queue: RefCell<VecDeque<QueuedAppend>>,
    commit: GroupCommit,
    /// A write failed: bytes past the published size may be torn.
    torn_tail: Cell<bool>,
    closed: Cell<bool>,
    last_sync_ms: Cell<i64>,
    recovery: Vec<SegmentRecovery>,
    /// Idempotent producer state; checked and updated under `append_lock`.
    producers: RefCell<ProducerStateTable>,
    /// Transactions (ongoing per producer, aborted ranges; the LSO, I67); checked and updated
    /// under `append_lock`, with the producer state, in the same step as the high watermark.
    txns: RefCell<TxnTracker>,
    /// A transaction-state checkpoint is in the directory (`txn_index::CHECKPOINT_FILE`).
    txn_checkpoint_on_disk: Cell<bool>,
    /// The transaction state on disk no longer says what the log says: a `.txnindex` append
    /// or the close's checkpoint failed. A clean open trusts those files, so [`Self::close`]
    /// then fails, the broker writes no clean-shutdown marker, and the next open replays the
    /// log (I70; seed 800881 of the transactional simulator lost an aborted range this way).
    txn_state_stale: Cell<bool>,
    /// Offsets of the producer state snapshots on disk, ascending.
    snapshots: RefCell<Vec<Offset>>,
    producer_load: ProducerLoad,
    /// Fsync counts for the metrics endpoint (shard-local cells).
    sync_stats: SyncStats,
    /// Produced batches validated ([`validate_produced`]): one per append.
    batch_validations: Cell<u64>,
    /// The registry's schema ids, for `confluent.*.schema.validation` (I124); the broker's
    /// shared set once [`Self::use_schema_ids`] is called, else an empty one.
    schema_ids: RefCell<KnownSchemaIds>,
}

impl<B: Backend> PartitionLog<B> {
    /// Opens (creating if needed) the partition log in `dir` and recovers it: stray files
    /// (`*.tmp`, `*.deleted`, indexes and time indexes without a log) are removed; each segment is trusted,
    /// re-indexed or scanned and truncated as core's decision table says (I3, I5); a first
    /// segment at offset 0 is created when there is none. Under `fsync`, after an unclean stop,
    /// the recovered active segment is synced before this returns (I8; see
    /// [`PartitionLog::open_unsynced`] for a start that syncs many partitions at once).
    pub async fn open(
        backend: B,
        dir: &Path,
        config: LogConfig,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<Self> {
        Self::open_unsynced(backend, dir, config, clean_shutdown, now_ms)
            .await?
            .sync()
            .await
    }

    /// [`PartitionLog::open`] without its last step: the log comes back wrapped in an
    /// [`UnsyncedLog`] that says whether the recovered tail still needs a sync (I8), and
    /// gives the log out only once it is durable ([`UnsyncedLog::sync`], or
    /// [`super::recovered_sync::sync_recovered`] for many logs at once).
    pub async fn open_unsynced(
        backend: B,
        dir: &Path,
        config: LogConfig,
        clean_shutdown: bool,
        now_ms: i64,
    ) -> Result<UnsyncedLog<Self>> {
        config.validate()?;
        // An existing directory is listed once; a missing one is created durably first.
        let mut listing = match backend.list_dir(dir).await {
            Ok(listing) => listing,
            Err(_) => {
                super::create_dir_durably(&backend, dir).await?;
                backend.list_dir(dir).await?
            }
        };
        // A cleaning a crash interrupted is finished or discarded first (I24); the directory
        // is listed again only then.
        let swap_left = listing.iter().any(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .and_then(minikafka_core::compaction::swap::parse_file_name)
                .is_some()
        });
        if swap_left {
            super::cleaner::swap::recover_swaps(&backend, dir).await?;
            listing = backend.list_dir(dir).await?;
        }
        let mut log_bases = Vec::new();
        let mut index_bases = Vec::new();
        let mut snapshot_offsets = Vec::new();
        let mut removed_any = false;
        let mut start_checkpoint_listed = false;
        let mut txn_checkpoint_listed = false;
        for path in listing {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name == start_offset::CHECKPOINT_FILE {
                start_checkpoint_listed = true;
                continue;
            }
            if name == super::cleaner::checkpoint::CHECKPOINT_FILE {
                continue;
            }
            if name == txn_index::CHECKPOINT_FILE {
                txn_checkpoint_listed = true;
                continue;
            }
            match classify(name) {
                SegmentFile::Log(base) => log_bases.push(base),
                SegmentFile::Index(base)
                | SegmentFile::TimeIndex(base)
                | SegmentFile::TxnIndex(base) => index_bases.push((base, path)),
                SegmentFile::Snapshot(offset) => snapshot_offsets.push(offset),
                SegmentFile::Stray => {
                    tracing::info!(?path, "removing leftover file");
                    remove_if_present(&backend, &path).await?;
                    removed_any = true;
                }
                SegmentFile::Unknown => tracing::warn!(?path, "ignoring unknown file"),
            }
        }
        log_bases.sort();
        for (base, path) in index_bases {
            if log_bases.binary_search(&base).is_err() {
                tracing::info!(?path, "removing index without a log");
                remove_if_present(&backend, &path).await?;
                removed_any = true;
            }
        }
        if removed_any {
            backend.sync_dir(dir).await?;
        }

        let mut segments = Vec::with_capacity(log_bases.len().max(1));
        let mut recovery = Vec::with_capacity(log_bases.len());
        for (i, base) in log_bases.iter().enumerate() {
            let is_active = i + 1 == log_bases.len();
            let (segment, report) = open_segment(
                &backend,
                dir,
                *base,
                is_active,
                clean_shutdown,
                &config,
                now_ms,
            )
            .await?;
            if let Some(next) = log_bases.get(i + 1) {
                if segment.next_offset() != *next {
                    tracing::warn!(
                        ?dir,
                        segment = base.0,
                        end = segment.next_offset().0,
                        next = next.0,
                        "segment does not end where the next one begins"
                    );
                }
            }
            recovery.push(report);
            segments.push(Rc::new(segment));
        }
        if segments.is_empty() {
            let segment = Segment::create(
                &backend,
                dir,
                Offset(0),
                config.index_interval_bytes,
                now_ms,
            )
            .await?;
            segments.push(Rc::new(segment));
        }
        // Only this process writes the directory, so the listing says whether the checkpoint
        // is there: most partitions never had records deleted, and an open that fails costs a
        // path lookup per partition at every restart.
        let checkpoint = if start_checkpoint_listed {
            start_offset::read(&backend, dir).await?
        } else {
            None
        };
        let recovered_end = segments[segments.len() - 1].next_offset();
        if let Some(start) = checkpoint.filter(|start| *start > recovered_end) {
            // Every record left was deleted before the crash (the checkpoint is durable, the
            // tail it deleted was not): start empty at the checkpoint, as Kafka does.
            tracing::warn!(
                ?dir,
                start = start.0,
                end = recovered_end.0,
                "log ends below its checkpointed start: starting empty there"
            );
            for segment in segments.drain(..) {
                remove_segment_files(&backend, &segment).await?;
            }
            backend.sync_dir(dir).await?;
            let segment =
                Segment::create(&backend, dir, start, config.index_interval_bytes, now_ms).await?;
            segments.push(Rc::new(segment));
        }
        let log_start_offset = checkpoint
            .unwrap_or(Offset(0))
            .max(segments[0].base_offset());
        let next_offset = segments[segments.len() - 1].next_offset();
        // The active segment's tail may be only in the page cache: the previous process
        // stopped without syncing it (a crash of the process, not of the machine, or a
        // failed sync that took the partition offline). Everything recovered counts as
        // durable from here on (a duplicate is answered from it, readers see it), so it is
        // made durable before anything is served (I8; found by the simulator): the
        // `UnsyncedLog` returned gives the log out only after that sync.
        let needs_sync = !clean_shutdown && config.flush == FlushPolicy::Fsync;
        snapshot_offsets.sort();
        let (producers, producer_load) = producers::load(
            &backend,
            dir,
            &mut snapshot_offsets,
            &segments,
            log_start_offset,
            next_offset,
            ProducerLimits::default(),
            now_ms,
        )
        .await?;
        // The transaction state is the log's (I70): replayed whole, the txnindex files checked.
        let txns = txn_index::rebuild(
            &backend,
            dir,
            &segments,
            log_start_offset,
            clean_shutdown,
            txn_checkpoint_listed,
        )
        .await?;
        let log = PartitionLog {
            backend,
            dir: dir.to_path_buf(),
            config: RefCell::new(config),
            segments: RefCell::new(segments),
            log_start_offset: Cell::new(log_start_offset),
            start_lock: Mutex::new(()),
            high_watermark: Cell::new(next_offset),
            append_lock: Mutex::new(()),
            queue: RefCell::new(VecDeque::new()),
            commit: GroupCommit::new(next_offset),
            torn_tail: Cell::new(false),
            closed: Cell::new(false),
            last_sync_ms: Cell::new(now_ms),
            recovery,
            producers: RefCell::new(producers),
            txns: RefCell::new(txns),
            txn_checkpoint_on_disk: Cell::new(txn_checkpoint_listed),
            txn_state_stale: Cell::new(false),
            snapshots: RefCell::new(snapshot_offsets),
            producer_load,
            sync_stats: SyncStats::new(),
            batch_validations: Cell::new(0),
            schema_ids: RefCell::new(KnownSchemaIds::new()),
        };
        // A crash while deleting segments below a durable start leaves some behind (I25).
        log.remove_segments_below_start().await?;
        Ok(UnsyncedLog::new(log, needs_sync))
    }

    /// Syncs the active segment's log file (the recovered tail, I8).
    pub(super) async fn sync_active_log(&self) -> Result<()> {
        let active = self.active();
        active.sync_log().await?;
        Ok(())
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration in force (a copy: [`reconfigure`](Self::reconfigure) may replace it).
    pub fn config(&self) -> LogConfig {
        self.config.borrow().clone()
    }

    /// Replaces the configuration of the live log (AlterConfigs): after a successful
    /// [`LogConfig::validate`], the next append, roll decision, retention pass and interval
    /// tick use the new values. `segment.bytes`, `segment.ms`, `max.message.bytes`, the flush
    /// policy and retention take effect at once; `index.interval.bytes` from the next segment
    /// (the active one keeps the interval it was indexed with). An append already waiting for
    /// its sync keeps waiting for it.
    pub fn reconfigure(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        *self.config.borrow_mut() = config;
        Ok(())
    }

    fn flush_policy(&self) -> FlushPolicy {
        self.config.borrow().flush
    }

    /// The offset the next append gets (every offset below it is readable).
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark.get()
    }

    /// The last stable offset (I67): the first offset of the oldest ongoing transaction, else
    /// the high watermark. Read with no await after the high watermark it is compared to.
    pub fn last_stable_offset(&self) -> Offset {
        self.txns
            .borrow()
            .last_stable_offset(self.high_watermark.get())
    }

    /// Forgets the aborted ranges of ABORT markers the cleaner removed (I154).
    pub fn forget_aborted(&self, gone: &[AbortedTxn]) {
        self.txns.borrow_mut().forget_aborted(gone);
    }

    /// The aborted transactions a read_committed read of `[from, upper)` must report.
    pub fn aborted_transactions(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        self.txns.borrow().aborted_in(from, upper)
    }

    /// The coordinator epoch of `producer_id`'s last marker here (DescribeProducers).
    pub fn coordinator_epoch(&self, producer_id: i64) -> Option<i32> {
        self.txns.borrow().coordinator_epoch(producer_id)
    }

    /// The first offset of `producer_id`'s ongoing transaction (DescribeProducers).
    pub fn ongoing_transaction(&self, producer_id: i64) -> Option<Offset> {
        self.txns.borrow().ongoing(producer_id)
    }

    /// The first offset in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset.get()
    }

    /// Syncs issued so far by this log (group commit, interval ticks, rolls, close).
    pub fn sync_count(&self) -> u64 {
        self.commit.sync_count()
    }

    /// Offsets below this are durable.
    pub fn synced_up_to(&self) -> Offset {
        self.commit.synced_up_to()
    }

    /// True when a failed sync took the partition offline for writes (I8).
    pub fn is_offline(&self) -> bool {
        self.commit.failure().is_some()
    }

    /// Base offsets of the segments, oldest first (the last is the active one).
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.segments
            .borrow()
            .iter()
            .map(|s| s.base_offset())
            .collect()
    }

    /// The segments, oldest first (shared handles: holding one keeps its files open).
    pub fn segments(&self) -> Vec<Rc<Segment<B>>> {
        self.segments.borrow().clone()
    }

    /// The partition machine over this log's state now: its segments as `SegmentState`s, the
    /// log start, copies of the producer table and the transaction state, and the settings
    /// in force. The first step of driving the log by the machine (`open` will build it this
    /// way; DESIGN.md, "The partition log machine"); a test checks that the machine built
    /// after a recovery decides the next appends as the log does. Call it with no append in
    /// flight (the segments then hold no unpublished tail).
    pub fn machine(&self, now_ms: i64) -> PartitionMachine {
        let segments = self
            .segments
            .borrow()
            .iter()
            .map(|s| s.machine_state())
            .collect();
        PartitionMachine::new(
            machine_config(&self.config.borrow()),
            segments,
            self.log_start_offset.get(),
            self.producers.borrow().clone(),
            self.txns.borrow().clone(),
            now_ms,
        )
    }

    /// What recovery did with each segment at open.
    pub fn recovery_report(&self) -> &[SegmentRecovery] {
        &self.recovery
    }

    /// What loading the producer state did at open.
    pub fn producer_load_report(&self) -> &ProducerLoad {
        &self.producer_load
    }

    /// Number of idempotent producers remembered.
    pub fn producer_count(&self) -> usize {
        self.producers.borrow().len()
    }

    /// The idempotent producers whose state is live at `now_ms`, least recently appended
    /// first, with what is remembered of each (DescribeProducers).
    pub fn live_producers(&self, now_ms: i64) -> Vec<(i64, ProducerEntry)> {
        self.producers
            .borrow()
            .live_producers(now_ms)
            .map(|(id, entry)| (id, entry.clone()))
            .collect()
    }

    /// Offsets of the producer state snapshots on disk, ascending.
    pub fn snapshot_offsets(&self) -> Vec<Offset> {
        self.snapshots.borrow().clone()
    }

    /// Produced batches validated by this log so far: exactly one per call of
    /// [`append`](Self::append), the produce path's only validation (issue 20 item 5;
    /// `tests/append_copies.rs` asserts it).
    pub fn batch_validations(&self) -> u64 {
        self.batch_validations.get()
    }

    /// Checks produced records' schema ids against `ids` (the broker's shared set, I124).
    pub fn use_schema_ids(&self, ids: KnownSchemaIds) {
        *self.schema_ids.borrow_mut() = ids;
    }

    /// Fsync counts (for the metrics endpoint).
    pub fn sync_stats(&self) -> &SyncStats {
        &self.sync_stats
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.borrow().iter().map(|s| s.size_bytes()).sum()
    }

    fn active(&self) -> Rc<Segment<B>> {
        let segments = self.segments.borrow();
        Rc::clone(&segments[segments.len() - 1])
    }

    fn offline_error(&self, failure: SyncFailure) -> LogError {
        LogError::Offline {
            dir: self.dir.clone(),
            cause: failure.0,
            raw_os_error: failure.1,
        }
    }

    fn check_writable(&self) -> Result<()> {
        if self.closed.get() {
            return Err(LogError::Closed(self.dir.clone()));
        }
        if let Some(failure) = self.commit.failure() {
            return Err(self.offline_error(failure));
        }
        Ok(())
    }

    /// Appends one record batch and returns once the flush policy is satisfied for it (I8).
    ///
    /// The batch is validated first, once ([`validate_produced`]: I3, and the key rule of a
    /// compacted log; an invalid batch touches nothing), then gets the next
    /// offsets by patching its base offset (I1) and the leader epoch ([`LEADER_EPOCH`]). The
    /// log rolls first when core's [`roll::roll_reason`] says so: the batch would push a
    /// non-empty active segment past `segment_bytes`, its offsets past 32 bits (I6), or
    /// `segment_ms` has passed. On an error
    /// nothing is acknowledged or published; a later append retries at the same position.
    ///
    /// Appends that queue while another holds the append mutex are written together (write
    /// coalescing): the next holder takes the queued batches in arrival order and writes them
    /// with one vectored write (no concatenating copy); each keeps its own offsets, checks and
    /// answer, and a failed write fails them all.
    ///
    /// A batch with a producer id is checked by core's producer rules first (under the append
    /// mutex): a refused one is [`LogError::Producer`] and touches nothing; a duplicate is
    /// answered with the original offsets and `duplicate: true` once they are durable.
    ///
    /// The batch's bytes are not copied: only its fixed header is (to be patched), and the
    /// rest — still the request frame's bytes when the Produce handler passes a slice of it —
    /// is written as it is, beside the patched header ([`BackendFile::write_parts_at`]).
    ///
    /// [`BackendFile::write_parts_at`]: minikafka_core::backend::BackendFile::write_parts_at
    pub async fn append(&self, batch: impl Into<Bytes>, now_ms: i64) -> Result<AppendInfo> {
        self.append_from(batch.into(), now_ms, Origin::Client).await
    }

    /// [`append`](Self::append) for a batch a coordinator of this broker wrote (the group
    /// coordinator's transactional offsets and their markers, I74): the producer rules are
    /// not applied (as Kafka skips them for its coordinators' appends), everything else is.
    pub async fn append_from_coordinator(
        &self,
        batch: impl Into<Bytes>,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.append_from(batch.into(), now_ms, Origin::Coordinator)
            .await
    }

    async fn append_from(&self, batch: Bytes, now_ms: i64, origin: Origin) -> Result<AppendInfo> {
        if origin == Origin::Coordinator && BatchHeader::parse(&batch).is_ok_and(|h| h.is_control())
        {
            // A coordinator's marker (the group coordinator's, on its offsets partition)
            // takes the marker path, so the partition's transaction state sees it.
            let marker = decode_marker(&batch).map_err(|e| {
                LogError::Io(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
            })?;
            return self.append_marker(marker, now_ms).await;
        }
        // The produce path's one validation of this batch (I3; the Produce handler applies
        // only the framing rule), counted for the tests.
        let mut header = validate_produced(
            &batch,
            &self.config.borrow(),
            now_ms,
            &self.batch_validations,
            &self.schema_ids.borrow(),
        )?;
        // `compression.type` (I87): a batch in another codec is rewritten in the topic's;
        // one already in it (or `producer`) goes on as the request's bytes.
        let recompressed = recompressed(&batch, header, &self.config.borrow())?;
        let batch = match recompressed {
            Some(rewritten) => {
                header = BatchHeader::parse(&rewritten)?;
                Bytes::from(rewritten)
            }
            None => batch,
        };
        let mut batch = SplitBatch::new(batch)?;
        if self.config.borrow().timestamp_type == TimestampType::LogAppendTime {
            // Before the batch is queued, so the time index, the producer state and the
            // answer all see the stamped max timestamp.
            stamp_log_append_time_split(&mut batch.head, &batch.records, now_ms);
            header = BatchHeader::parse(&batch.head)?;
        }
        self.queue_and_write(batch, header, now_ms, origin, None)
            .await
    }

    /// Appends the transaction marker `marker` (a COMMIT or ABORT control batch, Kafka's
    /// format: [`encode_marker`]) stamped `now_ms`, and returns once the flush policy is
    /// satisfied for it (I8), like [`append`](Self::append). The marker ends its producer's
    /// ongoing transaction (the LSO moves, I67); an ABORT records the aborted range (I68).
    /// Refused ([`LogError::Producer`]) when its producer epoch is older than the producer's,
    /// or its coordinator epoch older than the last marker's. The only way a control batch
    /// reaches the log: a produced one is refused by [`validate_produced`].
    pub async fn append_marker(&self, marker: TxnMarker, now_ms: i64) -> Result<AppendInfo> {
        let bytes = Bytes::from(encode_marker(&marker, now_ms));
        let header = BatchHeader::parse(&bytes)?;
        let batch = SplitBatch::new(bytes)?;
        self.queue_and_write(batch, header, now_ms, Origin::Coordinator, Some(marker))
            .await
    }

    /// Queues one checked batch (a marker with `marker`) and writes it (or waits for the
    /// writer that takes it), then waits for the flush policy.
    async fn queue_and_write(
        &self,
        batch: SplitBatch,
        header: BatchHeader,
        now_ms: i64,
        origin: Origin,
        marker: Option<TxnMarker>,
    ) -> Result<AppendInfo> {
        self.check_writable()?;

        // Queue first (arrival order), then take the mutex: whoever holds it writes every
        // queued batch, so ours may be done by the time we get it.
        let (reply, mut outcome) = oneshot::channel();
        self.queue.borrow_mut().push_back(QueuedAppend {
            batch,
            header,
            now_ms,
            origin,
            marker,
            reply,
        });
        let guard = self.append_lock.lock().await;
        let outcome = loop {
            match outcome.try_recv() {
                Ok(Some(result)) => break result,
                Ok(None) => self.write_group().await,
                Err(oneshot::Canceled) => {
                    // The task writing our group was dropped mid-write: nothing was
                    // published, and the next append cuts whatever it wrote.
                    return Err(LogError::Io(io::Error::other(
                        "append abandoned: the task writing it was cancelled",
                    )));
                }
            }
        };
        drop(guard);
        match outcome? {
            Outcome::Duplicate(original) => self.answer_duplicate(original).await,
            Outcome::Appended(info) => {
                if self.flush_policy() == FlushPolicy::Fsync {
                    self.wait_durable(info.last_offset.plus(1)).await?;
                }
                Ok(info)
            }
        }
    }

    /// Takes the append mutex and holds it while the guard lives: appends made meanwhile queue
    /// up and are written as one coalesced group once it is dropped (for the conformance
    /// checks, which need a deterministic group). A test hook: only with `test-hooks`.
    #[cfg(feature = "test-hooks")]
    pub async fn hold_appends(&self) -> futures::lock::MutexGuard<'_, ()> {
        self.append_lock.lock().await
    }

    /// Takes queued appends from the front, in arrival order, and writes them as one group.
    /// Called with the append lock held; takes at least one queued append when any is
    /// queued. The steps, each its own function:
    /// 1. [`fail_queue_if_unwritable`](Self::fail_queue_if_unwritable): closed or offline,
    ///    every waiting append fails;
    /// 2. [`repair_tail`](Self::repair_tail): cut what a failed write left;
    /// 3. [`gather_group`](Self::gather_group): drain the queue into a group, checking each
    ///    append as a lone append would be checked (producer rules, offset space), answering
    ///    a refused one at once, rolling before the group's first batch when core says so,
    ///    patching dense offsets in queue order (I1);
    /// 4. [`write_out`](Self::write_out): one vectored write (`write_parts_at`) plus index
    ///    entries (I4); a failure fails the whole group (I8);
    /// 5. [`publish`](Self::publish): the size and high watermark move (I2);
    /// 6. [`record_and_answer`](Self::record_and_answer): producer state, then each answer.
    async fn write_group(&self) {
        if self.fail_queue_if_unwritable() {
            return;
        }
        if let Err(e) = self.repair_tail().await {
            if let Some(front) = self.take_live_front() {
                let _ = front.reply.send(Err(e));
            }
            return;
        }
        let group = self.gather_group().await;
        if group.members.is_empty() {
            return;
        }
        let segment = self.active();
        let Some((positions, group)) = self.write_out(&segment, group).await else {
            return;
        };
        self.publish(group.next_offset);
        self.sync_stats.written(group.members.len() as u64);
        let aborted = self.record_and_answer(&segment, group, positions);
        if !aborted.is_empty() {
            self.index_aborted(&segment, &aborted).await;
        }
    }

    /// Step 1: when the log is closed or offline, fails every waiting append (the segments
    /// may be gone) and returns true.
    fn fail_queue_if_unwritable(&self) -> bool {
        if self.check_writable().is_ok() {
            return false;
        }
        while let Some(queued) = self.take_live_front() {
            if let Err(e) = self.check_writable() {
                let _ = queued.reply.send(Err(e));
            }
        }
        true
    }

    /// Step 3: drains the queue into a write group until it is empty or core ends the group
    /// (see [`place`](Self::place)). Appends refused on the way are answered here.
    async fn gather_group(&self) -> Group {
        let mut group = Group {
            members: Vec::new(),
            headers: Vec::new(),
            heads: Vec::new(),
            records: Vec::new(),
            len_bytes: 0,
            next_offset: self.high_watermark.get(),
            admission: GroupAdmission::new(),
        };
        while let Some(queued) = self.take_live_front() {
            if let Placement::EndsGroup(queued) = self.place(&mut group, queued).await {
                self.queue.borrow_mut().push_front(queued);
                break;
            }
        }
        group
    }

    /// Puts one queued append into `group`, answers it at once, or hands it back to start
    /// the next group. The group ends before a second batch of the same idempotent producer
    /// or any idempotent batch once a member may evict a producer (core's
    /// [`GroupAdmission`]: so every batch is checked against exactly the producer state it
    /// would see appended alone), and before a batch that would pass [`COALESCE_MAX_BYTES`]
    /// or need a roll (core's [`roll::roll_reason`]; a roll happens only before a group's
    /// first batch).
    async fn place(&self, group: &mut Group, queued: QueuedAppend) -> Placement {
        if let Err(e) = self.check_writable() {
            let _ = queued.reply.send(Err(e));
            return Placement::Answered;
        }
        let producer_batch = ProducerBatch::from_header(&queued.header);
        // The machine's rules (core::partition::rules), so the two cannot drift apart.
        let kind = queued.kind();
        let verdict = rules::admit(
            &group.admission,
            &kind,
            &producer_batch,
            &self.producers.borrow(),
            &self.txns.borrow(),
            queued.now_ms,
        );
        let decision = match verdict {
            Verdict::WaitForNextGroup => return Placement::EndsGroup(queued),
            Verdict::Duplicate(original) => {
                let _ = queued.reply.send(Ok(Outcome::Duplicate(original)));
                return Placement::Answered;
            }
            Verdict::Refuse(e) => {
                let _ = queued.reply.send(Err(e.into()));
                return Placement::Answered;
            }
            Verdict::Admit(decision) => decision,
        };
        let base_offset = group.next_offset;
        let Some(last_offset) = last_offset_of(base_offset, &queued.header) else {
            let _ = queued.reply.send(Err(LogError::OffsetOverflow));
            return Placement::Answered;
        };
        let batch_bytes = queued.batch.len_bytes();
        let pending_bytes = group.len_bytes;
        let roll = roll::roll_reason(
            active_facts(&self.active()),
            self.roll_limits(),
            pending_bytes,
            batch_bytes,
            last_offset,
            queued.now_ms,
        );
        if !group.members.is_empty()
            && (roll.is_some() || pending_bytes + batch_bytes > COALESCE_MAX_BYTES)
        {
            return Placement::EndsGroup(queued);
        }
        if let Some(reason) = roll {
            tracing::debug!(dir = ?self.dir, ?reason, "rolling before the next batch");
            if let Err(e) = self.roll(base_offset, queued.now_ms).await {
                let _ = queued.reply.send(Err(e));
                return Placement::Answered;
            }
        }
        rules::join(
            &mut group.admission,
            &kind,
            &producer_batch,
            &self.producers.borrow(),
        );
        group.push(
            queued.batch,
            queued.header,
            Member {
                producer_batch,
                decision,
                last_offset,
                now_ms: queued.now_ms,
                kind,
                reply: queued.reply,
            },
        );
        Placement::Joined
    }

    /// Step 4: writes the group's bytes and index entries to `segment`. On an error answers
    /// every member with it (I8: nothing of the group is acknowledged) and returns `None`;
    /// the torn tail is left marked for the next append to cut.
    async fn write_out(
        &self,
        segment: &Segment<B>,
        mut group: Group,
    ) -> Option<(Vec<FilePos>, Group)> {
        // Until the write is known complete, bytes past the published size may be torn (also
        // if this future is dropped mid-write).
        self.torn_tail.set(true);
        let parts = group.take_parts();
        let (written, _parts) = segment.append_batches(parts, &group.headers).await;
        match written {
            Ok(positions) => {
                self.torn_tail.set(false);
                Some((positions, group))
            }
            Err(e) => {
                for member in group.members {
                    let _ = member.reply.send(Err(LogError::Io(copy_io_error(&e))));
                }
                None
            }
        }
    }

    /// Step 5 (I2): the group's batches are whole on disk, below the segment's published
    /// size; readers may now see offsets below `next_offset`.
    fn publish(&self, next_offset: Offset) {
        // I1, I2: the high watermark only grows, and ends where the active segment ends.
        assert!(
            next_offset > self.high_watermark.get(),
            "a published group moves the high watermark forward (I1)"
        );
        assert!(
            self.active().next_offset() == next_offset,
            "the high watermark is the active segment's end (I2)"
        );
        self.high_watermark.set(next_offset);
        self.commit.note_written(next_offset);
    }

    /// Step 6: records each appended idempotent batch in the producer state and each
    /// transactional batch or marker in the transaction state (before the append mutex is
    /// released, so the next batch is checked against them, and with no await after
    /// [`publish`](Self::publish), so no reader sees the new high watermark with the old LSO,
    /// I67) and answers each member with its offsets and position. Returns the aborted
    /// ranges the group's ABORT markers recorded (for the segment's `.txnindex`).
    fn record_and_answer(
        &self,
        segment: &Segment<B>,
        group: Group,
        positions: Vec<FilePos>,
    ) -> Vec<AbortedTxn> {
        let mut aborted = Vec::new();
        for ((member, header), position) in
            group.members.into_iter().zip(&group.headers).zip(positions)
        {
            let published = Published {
                kind: &member.kind,
                batch: &member.producer_batch,
                decision: member.decision,
                base_offset: header.base_offset,
                last_offset: member.last_offset,
                max_timestamp_ms: header.max_timestamp,
                now_ms: member.now_ms,
            };
            if let Some(range) = rules::record(
                published,
                &mut self.producers.borrow_mut(),
                &mut self.txns.borrow_mut(),
            ) {
                aborted.push(range);
            }
            let log_append_time_ms = (self.config.borrow().timestamp_type
                == TimestampType::LogAppendTime)
                .then_some(member.now_ms);
            let _ = member.reply.send(Ok(Outcome::Appended(AppendInfo {
                base_offset: header.base_offset,
                last_offset: member.last_offset,
                log_append_time_ms,
                segment_base_offset: segment.base_offset(),
                position,
                duplicate: false,
            })));
        }
        let high_watermark = self.high_watermark.get();
        // I67: the LSO never passes the high watermark.
        assert!(
            self.txns.borrow().last_stable_offset(high_watermark) <= high_watermark,
            "LSO ≤ high watermark (I67)"
        );
        aborted
    }

    /// Appends the aborted ranges of a group's ABORT markers to the `.txnindex` of the segment
    /// they went to. A failure is logged, not returned: the file is a cache of the log and
    /// reads use the in-memory ranges; it marks the transaction state stale, so the close is
    /// unclean and the next open replays the log and rewrites the file (I70).
    async fn index_aborted(&self, segment: &Segment<B>, aborted: &[AbortedTxn]) {
        if let Err(e) =
            txn_index::append_entries(&self.backend, &self.dir, segment.base_offset(), aborted)
                .await
        {
            self.txn_state_stale.set(true);
            tracing::warn!(dir = ?self.dir, error = %e, "appending to a txnindex failed (rebuilt at the next open)");
        }
    }

    /// The roll limits of the configuration in force.
    fn roll_limits(&self) -> RollLimits {
        let config = self.config.borrow();
        RollLimits {
            segment_bytes: config.segment_bytes,
            segment_ms: config.segment_ms,
        }
    }

    /// Pops the first queued append whose caller still waits (a dropped append is skipped:
    /// nothing of it is written).
    fn take_live_front(&self) -> Option<QueuedAppend> {
        let mut queue = self.queue.borrow_mut();
        while let Some(queued) = queue.pop_front() {
            if !queued.reply.is_canceled() {
                return Some(queued);
            }
        }
        None
    }

    /// Answers a duplicate with its original offsets, once they are durable (I8).
    async fn answer_duplicate(&self, original: BatchMetadata) -> Result<AppendInfo> {
        if self.flush_policy() == FlushPolicy::Fsync {
            self.wait_durable(original.last_offset.plus(1)).await?;
        }
        let (segment_base_offset, position) = {
            let segments = self.segments.borrow();
            let floor = segments
                .partition_point(|s| s.base_offset() <= original.base_offset)
                .saturating_sub(1);
            let segment = &segments[floor];
            (
                segment.base_offset(),
                segment.floor_position(original.base_offset),
            )
        };
        Ok(AppendInfo {
            base_offset: original.base_offset,
            last_offset: original.last_offset,
            log_append_time_ms: None,
            segment_base_offset,
            position,
            duplicate: true,
        })
    }

    /// Writes a snapshot of the producer state below `offset` and prunes old ones. Called with
    /// the append lock held (the state then covers exactly the log below `offset`). A failure
    /// is logged, not returned: it only makes the next open replay more.
    async fn snapshot_producers(&self, offset: Offset) {
        let bytes = self.producers.borrow().encode_snapshot(offset);
        match producers::write_snapshot(&self.backend, &self.dir, offset, bytes).await {
            Ok(_) => {
                let mut list = std::mem::take(&mut *self.snapshots.borrow_mut());
                if let Err(i) = list.binary_search(&offset) {
                    list.insert(i, offset);
                }
                let pruned = producers::prune(&self.backend, &self.dir, &mut list).await;
                *self.snapshots.borrow_mut() = list;
                if let Err(e) = pruned {
                    tracing::warn!(dir = ?self.dir, error = %e, "removing old producer snapshots failed");
                }
            }
            Err(e) => {
                tracing::warn!(dir = ?self.dir, offset = offset.0, error = %e, "writing a producer state snapshot failed");
            }
        }
    }

    /// Saves the transaction state at the high watermark for the next clean open (I70).
    /// Called at close, with the append lock held. A failure is logged and marks the state
    /// stale (the close then fails, so the next open replays the log): a stale checkpoint
    /// would not name the log's end, but a missing one reads as "nothing ongoing".
    async fn checkpoint_txns(&self) {
        let tracker = self.txns.borrow().clone();
        let end = self.high_watermark.get();
        let on_disk = self.txn_checkpoint_on_disk.get();
        match txn_index::save_checkpoint(&self.backend, &self.dir, &tracker, end, on_disk).await {
            Ok(written) => self.txn_checkpoint_on_disk.set(written),
            Err(e) => {
                tracing::warn!(dir = ?self.dir, error = %e, "writing the transaction checkpoint failed");
                self.txn_checkpoint_on_disk.set(true);
                self.txn_state_stale.set(true);
            }
        }
    }

    /// Cuts a torn tail left by a failed write back to the published size. Called with the
    /// append lock held.
    async fn repair_tail(&self) -> Result<()> {
        if self.torn_tail.get() {
            self.active().discard_unpublished_tail().await?;
            self.torn_tail.set(false);
        }
        Ok(())
    }

    /// Seals the active segment now (unless it is empty) and starts a new one at the high
    /// watermark: the same path as a roll by size or time.
    pub async fn roll_now(&self, now_ms: i64) -> Result<()> {
        let _guard = self.append_lock.lock().await;
        self.check_writable()?;
        self.repair_tail().await?;
        if self.active().is_empty() {
            return Ok(());
        }
        self.roll(self.high_watermark.get(), now_ms).await
    }

    /// Seals the active segment and starts one at `next_base`. The old segment is synced
    /// first whatever the policy (I5: only the active segment can be torn); a failed sync
    /// takes the partition offline (I8). Called with the append lock held.
    async fn roll(&self, next_base: Offset, now_ms: i64) -> Result<()> {
        let old = self.active();
        let synced = match old.sync_log().await {
            Ok(()) => old.sync_index().await,
            Err(e) => Err(e),
        };
        if let Err(e) = synced {
            self.commit.fail(&e);
            return Err(self.offline_error((e.kind(), e.raw_os_error())));
        }
        self.commit.mark_all_synced();
        self.last_sync_ms.set(now_ms);
        let index_interval_bytes = self.config.borrow().index_interval_bytes;
        let segment = Segment::create(
            &self.backend,
            &self.dir,
            next_base,
            index_interval_bytes,
            now_ms,
        )
        .await?;
        // I1: the new segment starts exactly where the sealed one ends.
        assert!(
            next_base == old.next_offset() && next_base > old.base_offset(),
            "a roll starts the next segment at the sealed one's end (I1)"
        );
        tracing::debug!(dir = ?self.dir, base = next_base.0, "rolled to a new segment");
        self.segments.borrow_mut().push(Rc::new(segment));
        // The sealed segment is synced: a snapshot at its end never covers bytes a crash could
        // take away (I5).
        self.snapshot_producers(next_base).await;
        Ok(())
    }

    /// Waits until offsets below `end` are durable, leading a sync when none is in flight and
    /// otherwise joining the next one (group commit). Fails, and keeps failing, once a sync
    /// failed (I8).
    async fn wait_durable(&self, end: Offset) -> Result<()> {
        loop {
            if let Some(failure) = self.commit.failure() {
                return Err(self.offline_error(failure));
            }
            if self.commit.synced_up_to() >= end {
                return Ok(());
            }
            if self.closed.get() {
                return Err(LogError::Closed(self.dir.clone()));
            }
            match self.commit.begin_sync() {
                Some(target) => {
                    // Everything below `target` is in this segment or in sealed segments,
                    // which were synced when they were sealed.
                    let segment = self.active();
                    let leader = SyncLeader {
                        commit: &self.commit,
                    };
                    let (covered, started) = (self.sync_stats.begin(), self.backend.now());
                    let result = segment.sync_log().await;
                    let took = self.backend.now().saturating_duration_since(started);
                    self.sync_stats.end(covered, took, result.is_ok());
                    std::mem::forget(leader);
                    if let Err(e) = &result {
                        tracing::error!(dir = ?self.dir, error = %e, "sync failed: partition offline for writes (I8)");
                    }
                    self.commit.end_sync(target, &result);
                }
                None => {
                    let woken = self.commit.wait();
                    // A cancelled sender only means the leader was dropped: check again.
                    let _ = woken.await;
                }
            }
        }
    }

    /// Drives the `Interval` flush policy: syncs when `ms` have passed since the last sync and
    /// something is unsynced. Call it from a periodic task. Returns whether it synced. Does
    /// nothing under other policies.
    pub async fn tick(&self, now_ms: i64) -> Result<bool> {
        let FlushPolicy::Interval { ms } = self.flush_policy() else {
            return Ok(false);
        };
        if let Some(failure) = self.commit.failure() {
            return Err(self.offline_error(failure));
        }
        let due = now_ms.saturating_sub(self.last_sync_ms.get()) >= ms as i64;
        if !due || !self.commit.has_unsynced() {
            return Ok(false);
        }
        self.last_sync_ms.set(now_ms);
        self.wait_durable(self.commit.written_up_to()).await?;
        Ok(true)
    }

    /// Makes everything written so far durable, whatever the policy.
    pub async fn flush(&self) -> Result<()> {
        self.wait_durable(self.commit.written_up_to()).await
    }

    /// Reads whole batches starting with the one that holds `fetch_offset`, up to `max_bytes`
    /// (the first batch is always whole). `fetch_offset` equal to the high watermark gives an
    /// empty result; outside `[log_start_offset, high_watermark]` is
    /// [`LogError::OffsetOutOfRange`]. The read stops at the end of a segment.
    pub async fn read(&self, fetch_offset: Offset, max_bytes: usize) -> Result<ReadResult> {
        self.read_isolated(fetch_offset, max_bytes, false).await
    }

    /// [`read`](Self::read) at an isolation level. `read_committed` (Kafka's
    /// `isolation_level=1`): nothing at or past the last stable offset is returned (I69: the
    /// read stops at the first batch there), and the aborted transactions overlapping the
    /// returned range come with it. Both levels report the LSO, snapshotted with the high
    /// watermark (no await between, I67).
    pub async fn read_isolated(
        &self,
        fetch_offset: Offset,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult> {
        let mut read = self
            .read_snapshot(fetch_offset, max_bytes, read_committed)
            .await?;
        if read_committed {
            let keep = batches_below(&read.bytes, read.last_stable_offset);
            read.bytes.truncate(keep);
            if !read.bytes.is_empty() {
                read.aborted = self
                    .txns
                    .borrow()
                    .aborted_in(fetch_offset, read.last_stable_offset);
            }
        }
        Ok(read)
    }

    async fn read_snapshot(
        &self,
        fetch_offset: Offset,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult> {
        // Snapshot (I2): the high watermark and, below, the segment's published size, taken
        // together with no await in between; the LSO with them (I67).
        let high_watermark = self.high_watermark.get();
        let last_stable_offset = self.last_stable_offset();
        let log_start_offset = self.log_start_offset.get();
        if fetch_offset < log_start_offset || fetch_offset > high_watermark {
            return Err(LogError::OffsetOutOfRange {
                requested: fetch_offset,
                log_start_offset,
                high_watermark,
            });
        }
        let empty = ReadResult {
            bytes: Bytes::new(),
            high_watermark,
            log_start_offset,
            last_stable_offset,
            aborted: Vec::new(),
        };
        let upper = if read_committed {
            last_stable_offset
        } else {
            high_watermark
        };
        if fetch_offset >= upper {
            return Ok(empty);
        }
        // The segments that may hold the offset, each with its size snapshot.
        let candidates: Vec<(Rc<Segment<B>>, u64)> = {
            let segments = self.segments.borrow();
            let floor = segments
                .partition_point(|s| s.base_offset() <= fetch_offset)
                .saturating_sub(1);
            segments[floor..]
                .iter()
                .map(|s| (Rc::clone(s), s.size_bytes()))
                .collect()
        };
        for (segment, end_bytes) in candidates {
            // I2: a read stays below the size published when it was planned.
            debug_assert!(
                end_bytes <= segment.size_bytes(),
                "published sizes only grow (I2)"
            );
            if let Some(bytes) = self
                .read_segment(&segment, end_bytes, fetch_offset, max_bytes)
                .await?
            {
                return Ok(ReadResult {
                    bytes,
                    high_watermark,
                    log_start_offset,
                    last_stable_offset,
                    aborted: Vec::new(),
                });
            }
        }
        Ok(empty)
    }

    /// Plans and reads from one segment below `end_bytes`; `None` when the segment holds
    /// nothing at or after `fetch_offset` below the snapshot.
    ///
    /// Each byte is read once: one read from the index floor, of `max_bytes` plus
    /// [`fetch_skip_allowance`] (the bytes skipped to reach the target's batch, at most about
    /// an index interval), serves the planner (which looks at headers only) and the answer,
    /// which is a slice of it. Only when the planned range runs past that read (a first batch
    /// larger than it, or a longer skip) are further headers read in windows of
    /// [`PLAN_WINDOW_BYTES`] and the range read again whole, as before.
    async fn read_segment(
        &self,
        segment: &Segment<B>,
        end_bytes: u64,
        fetch_offset: Offset,
        max_bytes: usize,
    ) -> Result<Option<Bytes>> {
        let end = FilePos(
            u32::try_from(end_bytes)
                .map_err(|_| io::Error::other("segment larger than u32::MAX bytes (I6)"))?,
        );
        let start = segment.floor_position(fetch_offset).min(end);
        let corrupt = |source| LogError::SegmentCorrupt {
            path: segment.log_path().to_path_buf(),
            source,
        };
        let mut planner =
            FetchPlanner::new(fetch_offset, segment.base_offset(), start, end, max_bytes);
        // Below the snapshot, so bounded by the segment (I2) as well as by max_bytes.
        let first_len = ((end.0 - start.0) as usize).min(
            max_bytes
                .max(HEADER_BYTES)
                .saturating_add(self.fetch_skip_allowance()),
        );
        let first = if first_len == 0 {
            Vec::new()
        } else {
            let first = segment.read_log(start.as_u64(), first_len).await?;
            if first.len() != first_len {
                return Err(short_segment());
            }
            planner.feed(start, &first).map_err(corrupt)?;
            first
        };
        let plan = loop {
            match planner.next_step() {
                FetchStep::Done(plan) => break plan,
                FetchStep::Need { pos, len } => {
                    let left = (end.0 - pos.0) as usize;
                    let want = len.max(PLAN_WINDOW_BYTES.min(left));
                    let window = segment.read_log(pos.as_u64(), want).await?;
                    planner.feed(pos, &window).map_err(corrupt)?;
                }
            }
        };
        let Some((from, to)) = plan.range else {
            return Ok(None);
        };
        let first_end = start.as_u64() + first.len() as u64;
        if from >= start && to.as_u64() <= first_end {
            let at = (from.0 - start.0) as usize;
            let until = (to.0 - start.0) as usize;
            return Ok(Some(Bytes::from(first).slice(at..until)));
        }
        let len = (to.0 - from.0) as usize;
        let bytes = segment.read_log(from.as_u64(), len).await?;
        if bytes.len() != len {
            return Err(short_segment());
        }
        Ok(Some(Bytes::from(bytes)))
    }

    /// Bytes a fetch's first read takes beyond `max_bytes`, for the batches between the index
    /// floor and the target's batch: an index entry follows at most an index interval of
    /// bytes (plus the batch that crossed it), so two intervals cover the usual skip; capped
    /// at [`PLAN_WINDOW_BYTES`], past which the planner reads on in windows.
    fn fetch_skip_allowance(&self) -> usize {
        let interval = self.config.borrow().index_interval_bytes as usize;
        interval.saturating_mul(2).min(PLAN_WINDOW_BYTES)
    }

    /// The earliest offset whose record timestamp is at or after `target_ms`, with that
    /// record's timestamp (Kafka's ListOffsets by timestamp); `None` when no record in the log
    /// has such a timestamp.
    ///
    /// Takes the first segment whose max timestamp (exact, see [`Segment::max_timestamp_ms`])
    /// reaches the target, starts at its time index floor (resolved through the offset index)
    /// and reads forward in windows below the segment's size snapshot (I2) to the first batch
    /// whose max timestamp reaches the target. An uncompressed batch is walked record by record
    /// (base timestamp + timestamp delta) to the exact first record. A compressed batch answers
    /// with its base offset and max timestamp — an approximation, since this lookup does not
    /// decompress: the true record may come later in that batch and carry a smaller
    /// timestamp. (A batch in LogAppendTime answers the same way: all its records carry the
    /// max timestamp.) Offsets below the log start are never returned. Never takes the
    /// append mutex.
    pub async fn offset_for_timestamp(&self, target_ms: i64) -> Result<Option<(Offset, i64)>> {
        Ok(self
            .search_timestamp(target_ms)
            .await?
            .map(|hit| (hit.offset, hit.timestamp_ms)))
    }

    /// The offset and timestamp of the record with the largest timestamp in the log (Kafka's
    /// ListOffsets `-3`, MAX_TIMESTAMP); the earliest such record when several share it.
    /// `None` when the log holds no batch. Found as [`offset_for_timestamp`] of the largest
    /// segment max timestamp, so it is exact for uncompressed batches and batch-level (the
    /// batch's base offset) for compressed ones. Timestamps below -1 count as -1.
    ///
    /// [`offset_for_timestamp`]: PartitionLog::offset_for_timestamp
    pub async fn max_timestamp_offset(&self) -> Result<Option<(Offset, i64)>> {
        let max = {
            let segments = self.segments.borrow();
            if segments.iter().all(|s| s.is_empty()) {
                return Ok(None);
            }
            segments.iter().map(|s| s.max_timestamp_ms()).max()
        };
        match max {
            Some(max) => self.offset_for_timestamp(max).await,
            None => Ok(None),
        }
    }

    async fn search_timestamp(&self, target_ms: i64) -> Result<Option<TimestampHit>> {
        // Snapshot (I2): each segment's size and max timestamp move together in one step of
        // the append, so they agree here; no await in between.
        let log_start_offset = self.log_start_offset.get();
        let candidates: Vec<(Rc<Segment<B>>, u64)> = self
            .segments
            .borrow()
            .iter()
            .filter(|s| s.max_timestamp_ms() >= target_ms)
            .map(|s| (Rc::clone(s), s.size_bytes()))
            .collect();
        // Normally the first candidate answers; a later one only when a batch header's max
        // timestamp overstates its records.
        for (segment, end_bytes) in candidates {
            if let Some(hit) = self
                .search_segment(&segment, end_bytes, target_ms, log_start_offset)
                .await?
            {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }

    /// Drives core's [`TimestampSearch`] over one segment below `end_bytes`.
    async fn search_segment(
        &self,
        segment: &Segment<B>,
        end_bytes: u64,
        target_ms: i64,
        min_offset: Offset,
    ) -> Result<Option<TimestampHit>> {
        let end = FilePos(
            u32::try_from(end_bytes)
                .map_err(|_| io::Error::other("segment larger than u32::MAX bytes (I6)"))?,
        );
        let start = segment.time_floor_position(target_ms).min(end);
        let mut search =
            TimestampSearch::new(target_ms, min_offset, start, end, SEARCH_WINDOW_BYTES);
        loop {
            match search.next_step() {
                SearchStep::Done(hit) => return Ok(hit),
                SearchStep::Need { pos, len } => {
                    let window = segment.read_log(pos.as_u64(), len).await?;
                    search.feed(pos, &window).map_err(|e| {
                        LogError::Io(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "segment {:?} is corrupt below its published size: {e}",
                                segment.log_path()
                            ),
                        ))
                    })?;
                }
            }
        }
    }

    /// True when the segment list still holds `old` (consecutive, in order): nothing removed
    /// them since the cleaner read them.
    pub fn holds_segments(&self, old: &[Rc<Segment<B>>]) -> bool {
        let segments = self.segments.borrow();
        let Some(first) = old.first() else {
            return false;
        };
        let Some(at) = segments.iter().position(|s| Rc::ptr_eq(s, first)) else {
            return false;
        };
        at + old.len() < segments.len()
            && segments[at..at + old.len()]
                .iter()
                .zip(old)
                .all(|(a, b)| Rc::ptr_eq(a, b))
    }

    /// Puts the cleaner's `new` segment in place of the sealed segments `old` (I24); returns
    /// false, changing nothing, when the list no longer holds them. Readers in flight keep the
    /// old `Rc`s and their open files.
    pub fn replace_segments(&self, old: &[Rc<Segment<B>>], new: Rc<Segment<B>>) -> bool {
        if !self.holds_segments(old) {
            return false;
        }
        let mut segments = self.segments.borrow_mut();
        let at = segments
            .iter()
            .position(|s| Rc::ptr_eq(s, &old[0]))
            .unwrap_or_default();
        segments.splice(at..at + old.len(), [new]);
        true
    }

    /// Deletes the oldest segments that core's retention planner selects (by size, by time,
    /// below the log start), never the active one, and advances the log start offset (I9):
    /// the new start is checkpointed durably first, then the segments go (I25), so a crash
    /// part-way never brings deleted records back. Reads in flight on a deleted segment
    /// complete.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        let _start = self.start_lock.lock().await;
        let infos: Vec<SegmentInfo> = self
            .segments
            .borrow()
            .iter()
            .map(|s| SegmentInfo {
                base_offset: s.base_offset(),
                size_bytes: s.size_bytes(),
                // No record timestamp: fall back to when the segment was created or opened.
                max_timestamp_ms: if s.max_timestamp_ms() >= 0 {
                    s.max_timestamp_ms()
                } else {
                    s.created_ms()
                },
            })
            .collect();
        let limits = {
            let config = self.config.borrow();
            // `cleanup.policy` without `delete`: only what lies below the log start goes.
            let delete = config.cleanup_policy.delete;
            RetentionLimits {
                retention_bytes: config.retention_bytes.filter(|_| delete),
                retention_ms: config.retention_ms.filter(|_| delete),
            }
        };
        let plan = retention::plan(&infos, limits, now_ms, self.log_start_offset.get());
        if plan.delete_count == 0 {
            return Ok(RetentionOutcome {
                deleted_base_offsets: Vec::new(),
                log_start_offset: self.log_start_offset.get(),
            });
        }
        self.advance_start(plan.new_log_start_offset).await?;
        let deleted_base_offsets = self.remove_segments_below_start().await?;
        Ok(RetentionOutcome {
            deleted_base_offsets,
            log_start_offset: self.log_start_offset.get(),
        })
    }

    /// DeleteRecords: makes `before` the log start offset (when it is above the current one;
    /// capped at the last stable offset, I71) and deletes the segments wholly below it; returns the log start offset afterwards (the
    /// low watermark Kafka answers). `before` above the high watermark is
    /// [`LogError::OffsetOutOfRange`]; the caller maps Kafka's -1 to the high watermark. The
    /// new start is durable before this returns and before any segment is deleted (I25).
    pub async fn delete_records(&self, before: Offset) -> Result<Offset> {
        let _start = self.start_lock.lock().await;
        if self.closed.get() {
            return Err(LogError::Closed(self.dir.clone()));
        }
        let high_watermark = self.high_watermark.get();
        if before.0 < 0 || before > high_watermark {
            return Err(LogError::OffsetOutOfRange {
                requested: before,
                log_start_offset: self.log_start_offset.get(),
                high_watermark,
            });
        }
        self.advance_start(before).await?;
        self.remove_segments_below_start().await?;
        Ok(self.log_start_offset.get())
    }

    /// Moves the log start offset up to `start` (never down, I9), after checkpointing it
    /// durably (I25). Called with the start lock held.
    ///
    /// Never past the last stable offset (I71): the records of an ongoing transaction stay
    /// until its marker decides them, so retention and DeleteRecords stop at its first batch.
    async fn advance_start(&self, start: Offset) -> Result<()> {
        let start = start.min(self.last_stable_offset());
        if start <= self.log_start_offset.get() {
            return Ok(());
        }
        start_offset::write(&self.backend, &self.dir, start).await?;
        // I9: forward only (the start lock serializes moves), never past the log's end.
        assert!(
            start > self.log_start_offset.get() && start <= self.high_watermark.get(),
            "the log start offset moves forward, within the log (I9)"
        );
        self.log_start_offset.set(start);
        self.txns.borrow_mut().drop_below(start);
        Ok(())
    }

    /// Deletes the segments wholly below the log start offset (each one whose successor
    /// begins at or below it), never the active one, and syncs the directory; their base
    /// offsets. Called with the start lock held, or at open.
    async fn remove_segments_below_start(&self) -> Result<Vec<Offset>> {
        let start = self.log_start_offset.get();
        let deleted: Vec<Rc<Segment<B>>> = {
            let mut segments = self.segments.borrow_mut();
            let count = segments
                .windows(2)
                .take_while(|pair| pair[1].base_offset() <= start)
                .count();
            assert!(count < segments.len(), "never the active segment (I9)");
            segments.drain(..count).collect()
        };
        if deleted.is_empty() {
            return Ok(Vec::new());
        }
        let mut deleted_base_offsets = Vec::with_capacity(deleted.len());
        for segment in deleted {
            remove_segment_files(&self.backend, &segment).await?;
            deleted_base_offsets.push(segment.base_offset());
        }
        self.backend.sync_dir(&self.dir).await?;
        Ok(deleted_base_offsets)
    }

    /// Waits for appends in flight, syncs the active segment and its index (unless offline),
    /// and closes every file not held by a read in flight. Later calls fail with
    /// [`LogError::Closed`]. After an `Ok`, the next open may pass `clean_shutdown = true`.
    pub async fn close(&self) -> Result<()> {
        let _guard = self.append_lock.lock().await;
        if self.closed.replace(true) {
            return Err(LogError::Closed(self.dir.clone()));
        }
        let mut result = Ok(());
        if let Some(failure) = self.commit.failure() {
            result = Err(self.offline_error(failure));
        } else {
            let active = self.active();
            let synced = match active.sync_log().await {
                Ok(()) => active.sync_index().await,
                Err(e) => Err(e),
            };
            match synced {
                Ok(()) => {
                    self.commit.mark_all_synced();
                    self.snapshot_producers(self.high_watermark.get()).await;
                    self.checkpoint_txns().await;
                    if self.txn_state_stale.get() {
                        result = Err(LogError::Io(io::Error::other(
                            "the transaction state on disk is stale (a txnindex or checkpoint \
                             write failed): the next open replays the log (I70)",
                        )));
                    }
                }
                Err(e) => {
                    self.commit.fail(&e);
                    result = Err(self.offline_error((e.kind(), e.raw_os_error())));
                }
            }
        }
        let segments = std::mem::take(&mut *self.segments.borrow_mut());
        for segment in segments {
            if let Ok(segment) = Rc::try_unwrap(segment) {
                if let Err(e) = segment.close().await {
                    if result.is_ok() {
                        result = Err(e.into());
                    }
                }
            }
        }
        result
    }
}

/// A produced batch held in two pieces until it is written: its fixed header, copied out so
/// the writer can patch it (base offset, leader epoch; a log-append-time stamp), and the
/// records after it, which stay the caller's bytes (a slice of the request frame).
struct SplitBatch {
    head: [u8; HEADER_BYTES],
    records: Bytes,
}

impl SplitBatch {
    /// Splits a batch; one shorter than [`HEADER_BYTES`] is core's truncated-header error
    /// (validation has refused it already).
    fn new(batch: Bytes) -> Result<SplitBatch> {
        BatchHeader::parse(&batch)?;
        let mut head = [0u8; HEADER_BYTES];
        head.copy_from_slice(&batch[..HEADER_BYTES]);
        Ok(SplitBatch {
            head,
            records: batch.slice(HEADER_BYTES..),
        })
    }

    fn len_bytes(&self) -> u64 {
        (HEADER_BYTES + self.records.len()) as u64
    }
}

/// A validated append waiting for the writer, with where to send its outcome.
struct QueuedAppend {
    batch: SplitBatch,
    header: BatchHeader,
    now_ms: i64,
    origin: Origin,
    /// The marker this control batch encodes (the marker path's batches only).
    marker: Option<TxnMarker>,
    reply: oneshot::Sender<Result<Outcome>>,
}

impl QueuedAppend {
    /// Who wrote it, as the rules see it (`core::partition::rules`).
    fn kind(&self) -> AppendKind {
        match (self.marker, self.origin) {
            (Some(marker), _) => AppendKind::Marker(marker),
            (None, Origin::Client) => AppendKind::Produced,
            (None, Origin::Coordinator) => AppendKind::Coordinator,
        }
    }
}

/// The machine's settings for `config` (retention already filtered by `cleanup.policy`, as
/// [`PartitionLog::apply_retention`] does; the coalescing cap of this log).
pub fn machine_config(config: &LogConfig) -> PartitionConfig {
    let delete = config.cleanup_policy.delete;
    PartitionConfig {
        segment_bytes: config.segment_bytes,
        segment_ms: config.segment_ms,
        index_interval_bytes: config.index_interval_bytes,
        flush: match config.flush {
            FlushPolicy::None => FlushRule::None,
            FlushPolicy::Fsync => FlushRule::Fsync,
            FlushPolicy::Interval { ms } => FlushRule::Interval {
                ms: i64::try_from(ms).unwrap_or(i64::MAX),
            },
        },
        retention: RetentionLimits {
            retention_bytes: config.retention_bytes.filter(|_| delete),
            retention_ms: config.retention_ms.filter(|_| delete),
        },
        coalesce_max_bytes: COALESCE_MAX_BYTES,
        producer_limits: ProducerLimits::default(),
    }
}

/// Who wrote a batch: a client (the producer rules apply) or one of the broker's
/// coordinators (they do not, as in Kafka).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Client,
    Coordinator,
}

/// What the writer did with one queued append (before any wait for durability).
enum Outcome {
    /// Written at these offsets.
    Appended(AppendInfo),
    /// A duplicate of this earlier batch of its producer: nothing written.
    Duplicate(BatchMetadata),
}

/// An append placed in the group being written.
struct Member {
    producer_batch: ProducerBatch,
    decision: Decision,
    last_offset: Offset,
    now_ms: i64,
    /// Who wrote it (the rules it passed; a marker's [`TxnMarker`]).
    kind: AppendKind,
    reply: oneshot::Sender<Result<Outcome>>,
}

/// A write group being gathered: its members with their patched batches, in offset order.
struct Group {
    members: Vec<Member>,
    /// Each member's header, as patched (base offset, leader epoch).
    headers: Vec<BatchHeader>,
    /// The members' patched fixed headers back to back ([`HEADER_BYTES`] each).
    heads: Vec<u8>,
    /// Each member's records, as the caller passed them (not copied).
    records: Vec<Bytes>,
    /// Bytes of the members' batches together: what the one write writes.
    len_bytes: u64,
    /// The offset the next member gets; the high watermark once the group is published.
    next_offset: Offset,
    /// Core's producer rules for which batches may share this group.
    admission: GroupAdmission,
}

impl Group {
    /// Adds a member: patches its batch's header with the next offsets (I1: the single writer
    /// assigns dense offsets; base offset and leader epoch lie outside the CRC).
    fn push(&mut self, mut batch: SplitBatch, mut header: BatchHeader, member: Member) {
        let base_offset = self.next_offset;
        debug_assert!(
            member.last_offset.0 == base_offset.0 + i64::from(header.last_offset_delta),
            "a member's last offset follows its base densely (I1)"
        );
        patch_base_offset(&mut batch.head, base_offset);
        patch_leader_epoch(&mut batch.head, LEADER_EPOCH);
        header.base_offset = base_offset;
        header.partition_leader_epoch = LEADER_EPOCH;
        self.len_bytes += batch.len_bytes();
        self.heads.extend_from_slice(&batch.head);
        self.records.push(batch.records);
        self.headers.push(header);
        self.next_offset = member.last_offset.plus(1);
        self.members.push(member);
    }

    /// The group's bytes as the parts of one vectored write, in offset order: each member's
    /// patched header (slices of one buffer) followed by its records.
    fn take_parts(&mut self) -> Vec<Bytes> {
        let heads = Bytes::from(std::mem::take(&mut self.heads));
        let records = std::mem::take(&mut self.records);
        let mut parts = Vec::with_capacity(2 * records.len());
        for (i, records) in records.into_iter().enumerate() {
            parts.push(heads.slice(i * HEADER_BYTES..(i + 1) * HEADER_BYTES));
            parts.push(records);
        }
        parts
    }
}

/// What [`PartitionLog::place`] did with one queued append.
enum Placement {
    /// It joined the group.
    Joined,
    /// It was answered (refused, a duplicate, or a failed roll); nothing of it is written.
    Answered,
    /// It must start the next group: back to the queue's front.
    EndsGroup(QueuedAppend),
}

/// The last offset of `header`'s batch placed at `base_offset`; `None` when the partition's
/// offset space would be exhausted (an offset reaching `i64::MAX`).
fn last_offset_of(base_offset: Offset, header: &BatchHeader) -> Option<Offset> {
    base_offset
        .0
        .checked_add(i64::from(header.last_offset_delta))
        .filter(|last| *last < i64::MAX)
        .map(Offset)
}

/// The facts about `segment` that core's roll decision looks at.
fn active_facts<B: Backend>(segment: &Segment<B>) -> ActiveSegment {
    ActiveSegment {
        base_offset: segment.base_offset(),
        size_bytes: segment.size_bytes(),
        created_ms: segment.created_ms(),
        is_empty: segment.is_empty(),
    }
}

/// A copy of `e` for each append of a failed group, keeping the OS error number.
fn copy_io_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Held by the task leading a sync: if that task is dropped mid-sync, the sync is abandoned
/// (covering nothing) and the waiters are woken so one of them leads the next.
struct SyncLeader<'a> {
    commit: &'a GroupCommit,
}

impl Drop for SyncLeader<'_> {
    fn drop(&mut self) {
        self.commit.abandon_sync();
    }
}

/// Removes a segment's files, the log first: a crash between leaves an index without a log,
/// which startup removes.
async fn remove_segment_files<B: Backend>(backend: &B, segment: &Segment<B>) -> io::Result<()> {
    remove_if_present(backend, segment.log_path()).await?;
    remove_if_present(backend, segment.index_path()).await?;
    remove_if_present(backend, segment.time_index_path()).await?;
    let dir = segment.log_path().parent().unwrap_or(Path::new("."));
    txn_index::remove(backend, dir, segment.base_offset()).await
}

async fn remove_if_present<B: Backend>(backend: &B, path: &Path) -> io::Result<()> {
    match backend.remove_file(path).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// A read below a segment's published size came back short: the file lost bytes it had.
fn short_segment() -> LogError {
    LogError::Io(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "segment shorter than its published size",
    ))
}

impl<B: Backend> RecoveredLog for PartitionLog<B> {
    async fn sync_recovered_tail(&self) -> Result<()> {
        self.sync_active_log().await
    }
}
