//! The partition log: segments of record batches on disk, a sparse offset index and a time
//! index per segment, crash recovery, retention and flush policies, lookups by timestamp —
//! generic over the I/O backend.
//!
//! Contract:
//! - Inputs: record batches from producers (validated by `minikafka-core` before anything is
//!   written, I3), fetch requests (an offset and a byte budget), the time as a value (`now_ms`;
//!   the log never reads a clock), and a
//!   [`Backend`](minikafka_core::backend::Backend) to do the I/O with.
//! - Outputs: acknowledgements that honour the flush policy (I8), the bytes of whole batches
//!   for a fetch (I2), files on disk in the layout of `docs/DESIGN.md`.
//! - Single writer: a [`PartitionLog`] lives on one shard and is shared by that shard's tasks
//!   through `Rc`; no borrow is held across an `.await`. Its state has one owner, core's
//!   partition machine (I170), driven by [`driver`]: the machine places appends in arrival
//!   order (one write group in flight per partition, offsets dense in file order, I1, I27),
//!   appends queued behind a write are written together with one vectored write (write
//!   coalescing); reads plan from the machine's snapshot and never wait for a write (I2).
//! - Never: parses bytes itself (every byte-level decision is asked of core), acknowledges an
//!   append before its flush policy is satisfied, retries a failed sync (I8), or deletes the
//!   active segment (I9).
//!
//! Modules, a concept each:
//! - [`config`]: [`LogConfig`] and [`FlushPolicy`], with Kafka's topic-level overrides.
//! - [`error`]: the [`LogError`] enum.
//! - [`segment`]: file naming, a segment's open files ([`segment::SegmentFiles`]) and a
//!   snapshot of one segment ([`Segment`]): `.log`, `.index`, `.timeindex`.
//! - [`recover`]: turning the files of a segment into an open [`Segment`] at startup.
//! - [`cleaner`]: log compaction — one cleaning of a partition, the segment swap, settings.
//! - [`partition`]: [`PartitionLog`] — append, read, offset by timestamp, roll, retention,
//!   flush, close.
//! - [`driver`]: [`driver::MachineDriver`] — carries out the partition machine's I/O on the
//!   backend (one task per partition) and answers the callers.
//! - [`preallocation`]: reserving the active segment's blocks ahead of its writes and
//!   freeing them at seal and close (`log.preallocate`, I190).
//! - `request_table`: the driver's requests by token (each batch until its write, each
//!   answer until its caller takes it), without a map or a channel per append.
//! - [`produced_batch`]: the one validation of a produced batch (I3, the key rule of a
//!   compacted log).
//! - [`producers`]: persistence of the idempotent producer state (snapshots at roll and
//!   close, replay at open).
//! - [`start_offset`]: the durable log start offset checkpoint (written before segments are
//!   deleted, I25).
//! - [`atomic_file`]: small files replaced atomically (temp file, sync, rename, dir sync).
//! - [`topics`]: [`TopicStore`], durable topic metadata.
//! - [`txn_index`]: the `.txnindex` files and the rebuild of the transaction state at open.
//! - [`producer_ids`]: [`ProducerIdAllocator`], durable producer-id blocks (InitProducerId).
//! - [`replay`]: reading a whole partition back into a state machine, record by record (how
//!   the internal topics load at startup).
//! - [`schema_ids`]: [`KnownSchemaIds`], the registry's ids shared with the produce path's
//!   schema-id rule (I124).

pub mod atomic_file;
pub mod cleaner;
pub mod config;
pub mod driver;
pub mod error;
pub mod partition;
pub mod preallocation;
pub mod produced_batch;
pub mod producer_ids;
pub mod producers;
pub mod recover;
pub mod recovered_sync;
pub mod replay;
mod request_table;
pub mod schema_ids;
pub mod segment;
pub mod start_offset;
pub mod topics;
pub mod txn_index;

pub use config::{CompressionConfig, FlushPolicy, LogConfig, TimestampType};

/// Largest decompressed records section the broker inflates for one batch (I10): the
/// cleaner's key scan and the produce path's key check on a compacted topic. A batch inflating
/// past it stops the cleaning of its partition (logged) or is refused, never the broker.
pub const MAX_DECOMPRESSED_BYTES: usize = 64 << 20;
pub use error::LogError;
pub use partition::{AppendInfo, PartitionLog, ReadResult};
pub use producer_ids::ProducerIdAllocator;
pub use recovered_sync::{sync_recovered, RecoveredLog, UnsyncedLog};
pub use schema_ids::KnownSchemaIds;
pub use segment::Segment;
pub use topics::{TopicMeta, TopicStore};

/// The partition leader epoch written into every batch: a single-node broker never changes
/// leader, so it is always 0 (the field lies outside the CRC, like the base offset).
pub const LEADER_EPOCH: i32 = 0;

/// Result type of the log.
pub type Result<T> = std::result::Result<T, LogError>;

/// Creates `dir` (and its parents) and makes its entry durable in its parent directory.
/// Without the parent's sync a crash may lose the directory itself, and with it every file
/// synced inside (found by the simulator: an acknowledged record lost with its partition
/// directory). A directory that already exists is left alone: the broker syncs its log
/// directory once at startup, beside the partitions' opening and before any is served
/// (`server::lifecycle`), which makes every directory an earlier run left there durable —
/// one sync per start instead of one per partition. Other callers opening an existing
/// directory sync its parent themselves.
pub async fn create_dir_durably<B: minikafka_core::backend::Backend>(
    backend: &B,
    dir: &std::path::Path,
) -> std::io::Result<()> {
    if backend.list_dir(dir).await.is_ok() {
        return Ok(());
    }
    backend.create_dir_all(dir).await?;
    match dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => backend.sync_dir(parent).await,
        _ => Ok(()),
    }
}
