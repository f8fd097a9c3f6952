//! [`PartitionLog`]: one partition's log — open (recovery), append, read, roll, flush,
//! retention, close — as the driver of core's [`PartitionMachine`].
//!
//! Contract:
//! - One instance per partition, on the shard that owns it; shared by that shard's tasks
//!   through `Rc`. Methods take `&self`; state lives in `Cell`/`RefCell`, never borrowed across
//!   an `.await`.
//! - The log's state — the high watermark, the log start, the last stable offset, the
//!   producer and transaction state, each segment's published size, indexes and placers, the
//!   group-commit and flush state — has one owner: the [`PartitionMachine`] in the log's
//!   [`MachineDriver`] (I170). This file opens the log (recovery builds the machine),
//!   validates each produced batch once (I3, I87, I124, LogAppendTime stamping), hands it to
//!   the machine and waits for its answer; the driver carries out the machine's I/O on the
//!   backend (one driver task per partition: a write group beside a sync) and feeds each
//!   completion back. Offsets follow the order in which appends reach the machine (I27).
//! - Acknowledgement per [`FlushPolicy`] (I8), decided by the machine: `None` and `Interval`
//!   after the write, `Fsync` after a sync covering the batch, with group commit. A failed
//!   sync takes the partition offline for writes for good ([`LogError::Offline`]).
//! - Reads: the machine's [`PartitionMachine::fetch_plan`] snapshots the high watermark, the
//!   LSO and each segment's published size together; the read plans with core's
//!   [`FetchPlanner`] from the index floor and reads whole batches below the snapshot (I2).
//!   Reads never enter the machine's queue.
//! - Retention and DeleteRecords move the log start offset forward only (I9), after the new
//!   value is checkpointed durably (I25), then delete whole segments below it, never the
//!   active one (the machine's `handle_retention`, `handle_delete_records`). Open restores
//!   the start from the checkpoint and finishes a deletion a crash interrupted. A read holding
//!   a deleted segment's files completes.
//! - The configuration can be replaced while the log is live ([`PartitionLog::reconfigure`]).
//! - Timestamp lookups (ListOffsets) search a snapshot of the segments below their sizes (I2)
//!   with core's [`TimestampSearch`].
//! - Never reads a clock: time comes in as `now_ms`.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use minikafka_core::backend::{Backend, BackendFile};
use minikafka_core::control_batch::{decode_marker, encode_marker, TxnMarker};
use minikafka_core::fetch::{batches_below, FetchPlanner, FetchStep};
use minikafka_core::partition::{
    Append, AppendKind, Done, FlushRule, IoFailure, Isolation, PartitionConfig, PartitionError,
    PartitionMachine,
};
use minikafka_core::producer::{ProducerEntry, ProducerLimits};
use minikafka_core::record::{stamp_log_append_time_split, BatchHeader, HEADER_BYTES};
use minikafka_core::retention::RetentionLimits;
use minikafka_core::time_index::{SearchStep, TimestampHit, TimestampSearch};
use minikafka_core::txn_index::AbortedTxn;
use minikafka_core::types::{FilePos, Offset};

use super::config::{FlushPolicy, LogConfig, TimestampType};
use super::driver::{MachineDriver, SplitBatch};
use super::produced_batch::{recompressed, validate_produced};
use super::producers::{self, ProducerLoad};
use super::recover::{open_segment, SegmentRecovery};
use super::recovered_sync::{RecoveredLog, UnsyncedLog};
use super::schema_ids::KnownSchemaIds;
use super::segment::{classify, Segment, SegmentFile, SegmentFiles};
use super::start_offset;
use super::txn_index;
use super::{LogError, Result};
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
    /// The machine (the one owner of the log's state, I170), its segment files and its task.
    driver: MachineDriver<B>,
    recovery: Vec<SegmentRecovery>,
    /// A transaction-state checkpoint is in the directory (`txn_index::CHECKPOINT_FILE`).
    txn_checkpoint_on_disk: Cell<bool>,
    producer_load: ProducerLoad,
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
        let mut txn_index_bases = Vec::new();
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
                SegmentFile::TxnIndex(base) => {
                    txn_index_bases.push(base);
                    index_bases.push((base, path));
                }
                SegmentFile::Index(base) | SegmentFile::TimeIndex(base) => {
                    index_bases.push((base, path))
                }
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
        // The active segment's recovery cut is not synced by `open_segment` either: the same
        // sync makes it durable, whatever the flush policy (I3, I190).
        let active_cut = recovery.last().is_some_and(|r| {
            r.truncated_bytes > 0 && r.base_offset == segments[segments.len() - 1].base_offset()
        });
        let needs_sync = (!clean_shutdown && config.flush == FlushPolicy::Fsync) || active_cut;
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
        // A `.txnindex` without a log was removed above; one the listing did not show is
        // not there (only this process writes the directory).
        txn_index_bases.sort();
        let listed = txn_index::Listed {
            checkpoint: txn_checkpoint_listed,
            txn_indexes: &txn_index_bases,
        };
        let txns = txn_index::rebuild(
            &backend,
            dir,
            &segments,
            log_start_offset,
            clean_shutdown,
            &listed,
        )
        .await?;
        // A crash while deleting segments below a durable start leaves some behind (I25): they
        // go before the machine is built, which holds only the segments at or above the start.
        let below = segments
            .windows(2)
            .take_while(|pair| pair[1].base_offset() <= log_start_offset)
            .count();
        if below > 0 {
            for segment in segments.drain(..below) {
                remove_segment_files(&backend, &segment).await?;
            }
            backend.sync_dir(dir).await?;
        }
        let machine = PartitionMachine::new(
            machine_config(&config),
            segments.iter().map(|s| s.machine_state()).collect(),
            log_start_offset,
            producers,
            txns,
            now_ms,
        );
        let files = segments
            .iter()
            .map(|s| Rc::clone(s.files()))
            .collect::<Vec<_>>();
        drop(segments);
        let driver = MachineDriver::start(
            backend.clone(),
            dir.to_path_buf(),
            machine,
            files,
            snapshot_offsets,
            now_ms,
        );
        driver.set_preallocate(config.preallocate);
        let log = PartitionLog {
            backend,
            dir: dir.to_path_buf(),
            config: RefCell::new(config),
            driver,
            recovery,
            txn_checkpoint_on_disk: Cell::new(txn_checkpoint_listed),
            producer_load,
            batch_validations: Cell::new(0),
            schema_ids: RefCell::new(KnownSchemaIds::new()),
        };
        Ok(UnsyncedLog::new(log, needs_sync))
    }

    /// Syncs the active segment's log file (the recovered tail, I8).
    pub(super) async fn sync_active_log(&self) -> Result<()> {
        let active = self
            .driver
            .with_machine(|m| m.segments()[m.segments().len() - 1].base_offset);
        if let Some(files) = self.driver.segment_files(active) {
            files.log.sync_data().await?;
        }
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
        let machine = machine_config(&config);
        self.driver.set_preallocate(config.preallocate);
        *self.config.borrow_mut() = config;
        self.driver.with_machine_mut(|m| m.reconfigure(machine));
        Ok(())
    }

    /// The offset the next append gets (every offset below it is readable).
    pub fn high_watermark(&self) -> Offset {
        self.driver.with_machine(|m| m.high_watermark())
    }

    /// The last stable offset (I67): the first offset of the oldest ongoing transaction, else
    /// the high watermark.
    pub fn last_stable_offset(&self) -> Offset {
        self.driver.with_machine(|m| m.last_stable_offset())
    }

    /// Forgets the aborted ranges of ABORT markers the cleaner removed (I154).
    pub fn forget_aborted(&self, gone: &[AbortedTxn]) {
        self.driver.with_machine_mut(|m| m.forget_aborted(gone));
    }

    /// The aborted transactions a read_committed read of `[from, upper)` must report.
    pub fn aborted_transactions(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        self.driver
            .with_machine(|m| m.aborted_transactions(from, upper))
    }

    /// The coordinator epoch of `producer_id`'s last marker here (DescribeProducers).
    pub fn coordinator_epoch(&self, producer_id: i64) -> Option<i32> {
        self.driver
            .with_machine(|m| m.txns().coordinator_epoch(producer_id))
    }

    /// The first offset of `producer_id`'s ongoing transaction (DescribeProducers).
    pub fn ongoing_transaction(&self, producer_id: i64) -> Option<Offset> {
        self.driver.with_machine(|m| m.txns().ongoing(producer_id))
    }

    /// The first offset in the log.
    pub fn log_start_offset(&self) -> Offset {
        self.driver.with_machine(|m| m.log_start_offset())
    }

    /// Syncs issued so far by this log (group commit, interval ticks, rolls, close).
    pub fn sync_count(&self) -> u64 {
        self.driver.with_machine(|m| m.sync_count())
    }

    /// Offsets below this are durable.
    pub fn synced_up_to(&self) -> Offset {
        self.driver.with_machine(|m| m.synced_up_to())
    }

    /// True when a failed sync took the partition offline for writes (I8).
    pub fn is_offline(&self) -> bool {
        self.driver.with_machine(|m| m.is_offline())
    }

    /// Base offsets of the segments, oldest first (the last is the active one).
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        self.driver
            .with_machine(|m| m.segments().iter().map(|s| s.base_offset).collect())
    }

    /// Snapshots of the segments, oldest first (holding one keeps its files open). Each
    /// copies the segment's in-memory indexes: for one segment, [`Self::active_segment`].
    pub fn segments(&self) -> Vec<Rc<Segment<B>>> {
        self.driver.segments()
    }

    /// A snapshot of the active segment.
    pub fn active_segment(&self) -> Rc<Segment<B>> {
        self.driver.active_segment()
    }

    /// A copy of the partition machine (the log's state now, settings included), built anew
    /// at `now_ms`: for the tests that check the machine decides as the log does. Call it
    /// with no append in flight (the segments then hold no unpublished tail).
    pub fn machine(&self, now_ms: i64) -> PartitionMachine {
        self.driver.with_machine(|m| {
            PartitionMachine::new(
                *m.config(),
                m.segments().to_vec(),
                m.log_start_offset(),
                m.producers().clone(),
                m.txns().clone(),
                now_ms,
            )
        })
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
        self.driver.with_machine(|m| m.producers().len())
    }

    /// The idempotent producers whose state is live at `now_ms`, least recently appended
    /// first, with what is remembered of each (DescribeProducers).
    pub fn live_producers(&self, now_ms: i64) -> Vec<(i64, ProducerEntry)> {
        self.driver.with_machine(|m| {
            m.producers()
                .live_producers(now_ms)
                .map(|(id, entry)| (id, entry.clone()))
                .collect()
        })
    }

    /// Offsets of the producer state snapshots on disk, ascending.
    pub fn snapshot_offsets(&self) -> Vec<Offset> {
        self.driver.snapshot_offsets()
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
        self.driver.sync_stats()
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.driver.with_machine(|m| m.size_bytes())
    }

    /// The machine's answer as the log's error.
    fn log_error(&self, e: PartitionError) -> LogError {
        match e {
            PartitionError::Producer(e) => LogError::Producer(e),
            PartitionError::OffsetOverflow => LogError::OffsetOverflow,
            PartitionError::Io(failure) => LogError::Io(io_error(failure)),
            PartitionError::Offline(failure) => LogError::Offline {
                dir: self.dir.clone(),
                cause: failure.kind,
                raw_os_error: failure.raw_os_error,
            },
            PartitionError::Cancelled => LogError::Io(io::Error::other(
                "append abandoned: its caller went away before it was placed",
            )),
            PartitionError::Closed => LogError::Closed(self.dir.clone()),
            PartitionError::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            } => LogError::OffsetOutOfRange {
                requested,
                log_start_offset,
                high_watermark,
            },
        }
    }

    /// Appends one record batch and returns once the flush policy is satisfied for it (I8).
    ///
    /// The batch is validated first, once ([`validate_produced`]: I3, and the key rule of a
    /// compacted log; an invalid batch touches nothing), then handed to the machine, which
    /// gives it the next offsets (I1, I27; the driver patches its base offset and the leader
    /// epoch), rolls first when core's roll rule says so, checks it by the producer and
    /// transaction rules, and groups it with the appends queued beside it into one vectored
    /// write (write coalescing). A refused batch is [`LogError::Producer`] and touches
    /// nothing; a duplicate is answered with the original offsets and `duplicate: true` once
    /// they are durable. On an error nothing is acknowledged or published; a later append
    /// retries at the same position.
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
        let log_append_time = self.config.borrow().timestamp_type == TimestampType::LogAppendTime;
        if log_append_time {
            // Before the batch reaches the machine, so the time index, the producer state and
            // the answer all see the stamped max timestamp.
            stamp_log_append_time_split(&mut batch.head, &batch.records, now_ms);
            header = BatchHeader::parse(&batch.head)?;
        }
        let kind = match origin {
            Origin::Client => AppendKind::Produced,
            Origin::Coordinator => AppendKind::Coordinator,
        };
        self.append_placed(batch, header, kind, now_ms).await
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
        self.append_placed(batch, header, AppendKind::Marker(marker), now_ms)
            .await
    }

    /// Hands one checked batch to the machine and waits for its answer.
    async fn append_placed(
        &self,
        batch: SplitBatch,
        header: BatchHeader,
        kind: AppendKind,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        let log_append_time = self.config.borrow().timestamp_type == TimestampType::LogAppendTime;
        let done = self
            .driver
            .append(
                batch,
                |token| Append {
                    token,
                    header,
                    kind,
                },
                now_ms,
            )
            .await
            .map_err(|e| self.log_error(e))?;
        let Done::Appended(info) = done else {
            return Err(LogError::Io(io::Error::other(format!(
                "the partition machine answered an append with {done:?}"
            ))));
        };
        Ok(AppendInfo {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_append_time_ms: (log_append_time && !info.duplicate).then_some(now_ms),
            segment_base_offset: info.segment_base_offset,
            position: info.position,
            duplicate: info.duplicate,
        })
    }

    /// Holds appends back while the guard lives: appends made meanwhile queue up and reach
    /// the machine together once it is dropped, so they are written as one coalesced group
    /// (for the conformance checks, which need a deterministic group). A test hook: only with
    /// `test-hooks`.
    #[cfg(feature = "test-hooks")]
    pub async fn hold_appends(&self) -> AppendHold<'_, B> {
        self.driver.hold();
        AppendHold { log: self }
    }

    /// Seals the active segment now (unless it is empty) and starts a new one at the high
    /// watermark: the same path as a roll by size or time (the sealed segment is synced
    /// first, I5).
    pub async fn roll_now(&self, now_ms: i64) -> Result<()> {
        self.driver
            .roll(now_ms)
            .await
            .map(|_| ())
            .map_err(|e| self.log_error(e))
    }

    /// Drives the `Interval` flush policy: syncs when `ms` have passed since the last sync and
    /// something is unsynced. Call it from a periodic task. Returns whether it synced. Does
    /// nothing under other policies.
    pub async fn tick(&self, now_ms: i64) -> Result<bool> {
        if !matches!(self.config.borrow().flush, FlushPolicy::Interval { .. }) {
            return Ok(false);
        }
        if let Some(failure) = self.driver.with_machine(|m| m.offline_failure()) {
            return Err(self.log_error(PartitionError::Offline(failure)));
        }
        if !self.driver.tick(now_ms) {
            return Ok(false);
        }
        self.flush_at(now_ms).await?;
        Ok(true)
    }

    /// Makes everything written so far durable, whatever the policy.
    pub async fn flush(&self) -> Result<()> {
        self.flush_at(self.driver.now_ms()).await
    }

    async fn flush_at(&self, now_ms: i64) -> Result<()> {
        self.driver
            .flush(now_ms)
            .await
            .map(|_| ())
            .map_err(|e| self.log_error(e))
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
    /// watermark by the machine's fetch plan (I67).
    pub async fn read_isolated(
        &self,
        fetch_offset: Offset,
        max_bytes: usize,
        read_committed: bool,
    ) -> Result<ReadResult> {
        let isolation = if read_committed {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        };
        // Snapshot (I2): the plan's sizes, high watermark and LSO, and the files of its
        // segments, taken together with no await in between.
        let (plan, files) = self
            .driver
            .with_machine(|m| {
                m.fetch_plan(fetch_offset, isolation).map(|plan| {
                    let files: Vec<_> = plan
                        .segments
                        .iter()
                        .map(|s| self.driver.segment_files(s.base_offset))
                        .collect();
                    (plan, files)
                })
            })
            .map_err(|e| self.log_error(e))?;
        let mut read = ReadResult {
            bytes: Bytes::new(),
            high_watermark: plan.high_watermark,
            log_start_offset: plan.log_start_offset,
            last_stable_offset: plan.last_stable_offset,
            aborted: Vec::new(),
        };
        for (segment, files) in plan.segments.iter().zip(files) {
            let Some(files) = files else { continue };
            if let Some(bytes) = self
                .read_segment(
                    &files,
                    segment.floor,
                    segment.end_bytes,
                    fetch_offset,
                    max_bytes,
                )
                .await?
            {
                read.bytes = bytes;
                break;
            }
        }
        if read_committed {
            let keep = batches_below(&read.bytes, plan.upper);
            read.bytes.truncate(keep);
            if !read.bytes.is_empty() {
                read.aborted = plan.aborted;
            }
        }
        Ok(read)
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
        segment: &SegmentFiles<B>,
        floor: FilePos,
        end_bytes: u64,
        fetch_offset: Offset,
        max_bytes: usize,
    ) -> Result<Option<Bytes>> {
        let end = FilePos(
            u32::try_from(end_bytes)
                .map_err(|_| io::Error::other("segment larger than u32::MAX bytes (I6)"))?,
        );
        let start = floor.min(end);
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
        let max = self.driver.with_machine(|m| {
            let segments = m.segments();
            if segments.iter().all(|s| s.is_empty()) {
                return None;
            }
            segments
                .iter()
                .map(|s| s.time_placer.max_timestamp_ms())
                .max()
        });
        match max {
            Some(max) => self.offset_for_timestamp(max).await,
            None => Ok(None),
        }
    }

    async fn search_timestamp(&self, target_ms: i64) -> Result<Option<TimestampHit>> {
        // Snapshot (I2): each segment's size and max timestamp move together in one step of
        // the append, so they agree here; no await in between.
        // Each candidate's files, size and time floor, read from the machine in one borrow.
        let (log_start_offset, candidates) = self.driver.with_machine(|m| {
            let candidates: Vec<_> = m
                .segments()
                .iter()
                .filter(|s| s.time_placer.max_timestamp_ms() >= target_ms)
                .filter_map(|s| {
                    let floor = match s.time_index.lookup(target_ms) {
                        Some(entry) => s.index.lookup(entry.relative_offset),
                        None => FilePos(0),
                    };
                    let files = self.driver.segment_files(s.base_offset)?;
                    Some((files, floor, s.size_bytes))
                })
                .collect();
            (m.log_start_offset(), candidates)
        });
        // Normally the first candidate answers; a later one only when a batch header's max
        // timestamp overstates its records.
        for (segment, floor, end_bytes) in candidates {
            if let Some(hit) = self
                .search_segment(&segment, floor, end_bytes, target_ms, log_start_offset)
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
        segment: &SegmentFiles<B>,
        floor: FilePos,
        end_bytes: u64,
        target_ms: i64,
        min_offset: Offset,
    ) -> Result<Option<TimestampHit>> {
        let end = FilePos(
            u32::try_from(end_bytes)
                .map_err(|_| io::Error::other("segment larger than u32::MAX bytes (I6)"))?,
        );
        let start = floor.min(end);
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

    /// True when the segment list still holds `old` (consecutive sealed segments, in order,
    /// by base offset): nothing removed them since the cleaner read them.
    pub fn holds_segments(&self, old: &[Rc<Segment<B>>]) -> bool {
        let bases: Vec<Offset> = old.iter().map(|s| s.base_offset()).collect();
        self.driver.with_machine(|m| m.holds_segments(&bases))
    }

    /// Puts the cleaner's `new` segment in place of the sealed segments `old` (I24); returns
    /// false, changing nothing, when the list no longer holds them. Readers in flight keep the
    /// old segments' files open.
    pub fn replace_segments(&self, old: &[Rc<Segment<B>>], new: Rc<Segment<B>>) -> bool {
        let bases: Vec<Offset> = old.iter().map(|s| s.base_offset()).collect();
        self.driver.replace_segments(&bases, &new)
    }

    /// Deletes the oldest segments that core's retention planner selects (by size, by time,
    /// below the log start), never the active one, and advances the log start offset (I9,
    /// never past the LSO, I71): the new start is checkpointed durably first, then the
    /// segments go (I25), so a crash part-way never brings deleted records back. Reads in
    /// flight on a deleted segment complete.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome> {
        match self.driver.retention(now_ms).await {
            Ok(Done::StartMoved {
                log_start_offset,
                removed_base_offsets,
            }) => Ok(RetentionOutcome {
                deleted_base_offsets: removed_base_offsets,
                log_start_offset,
            }),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(self.log_error(e)),
        }
    }

    /// DeleteRecords: makes `before` the log start offset (when it is above the current one;
    /// capped at the last stable offset, I71) and deletes the segments wholly below it;
    /// returns the log start offset afterwards (the low watermark Kafka answers). `before`
    /// above the high watermark is [`LogError::OffsetOutOfRange`]; the caller maps Kafka's -1
    /// to the high watermark. The new start is durable before this returns and before any
    /// segment is deleted (I25).
    pub async fn delete_records(&self, before: Offset) -> Result<Offset> {
        match self
            .driver
            .delete_records(before, self.driver.now_ms())
            .await
        {
            Ok(Done::StartMoved {
                log_start_offset, ..
            }) => Ok(log_start_offset),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(self.log_error(e)),
        }
    }

    /// Saves the transaction state at the high watermark for the next clean open (I70).
    /// Called at close, after the machine closed. A failure is logged and returned: a stale
    /// checkpoint would not name the log's end, but a missing one reads as "nothing
    /// ongoing", so the close then fails and the next open replays the log.
    async fn checkpoint_txns(&self) -> io::Result<()> {
        let (tracker, end) = self
            .driver
            .with_machine(|m| (m.txns().clone(), m.high_watermark()));
        let on_disk = self.txn_checkpoint_on_disk.get();
        match txn_index::save_checkpoint(&self.backend, &self.dir, &tracker, end, on_disk).await {
            Ok(written) => {
                self.txn_checkpoint_on_disk.set(written);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(dir = ?self.dir, error = %e, "writing the transaction checkpoint failed");
                self.txn_checkpoint_on_disk.set(true);
                Err(e)
            }
        }
    }

    /// Waits for appends in flight, syncs the active segment and its index (unless offline),
    /// writes the producer snapshot and the transaction checkpoint, and closes every file not
    /// held by a read in flight. Later calls fail with [`LogError::Closed`]. After an `Ok`,
    /// the next open may pass `clean_shutdown = true`.
    pub async fn close(&self) -> Result<()> {
        let closed = self.driver.close(self.driver.now_ms()).await;
        let mut result = match closed {
            Ok(Done::Closed { clean }) => match self.checkpoint_txns().await {
                Ok(()) if clean => Ok(()),
                _ => Err(LogError::Io(io::Error::other(
                    "the transaction state on disk is stale (a txnindex or checkpoint write \
                     failed): the next open replays the log (I70)",
                ))),
            },
            Ok(other) => Err(unexpected(&other)),
            Err(PartitionError::Closed) => return Err(LogError::Closed(self.dir.clone())),
            Err(e) => Err(self.log_error(e)),
        };
        for files in self.driver.take_files() {
            if let Ok(files) = Rc::try_unwrap(files) {
                if let Err(e) = files.close().await {
                    if result.is_ok() {
                        result = Err(e.into());
                    }
                }
            }
        }
        result
    }
}

/// Ends [`PartitionLog::hold_appends`] when dropped.
#[cfg(feature = "test-hooks")]
pub struct AppendHold<'a, B: Backend> {
    log: &'a PartitionLog<B>,
}

#[cfg(feature = "test-hooks")]
impl<B: Backend> Drop for AppendHold<'_, B> {
    fn drop(&mut self) {
        self.log.driver.release();
    }
}

/// The machine's settings for `config` (retention already filtered by `cleanup.policy`: a
/// policy without `delete` removes only what lies below the log start; the coalescing cap of
/// this log).
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

/// An I/O error as the machine reported it (kind and OS error number kept).
fn io_error(failure: IoFailure) -> io::Error {
    match failure.raw_os_error {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(failure.kind, format!("{:?}", failure.kind)),
    }
}

/// The machine answered a request with another request's kind of answer (a bug).
fn unexpected(done: &Done) -> LogError {
    LogError::Io(io::Error::other(format!(
        "the partition machine answered with {done:?}"
    )))
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
