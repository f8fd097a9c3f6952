//! The sync a start owes what it recovered (I8), for one partition or for all of them at once.
//!
//! Contract:
//! - Inputs: logs opened by [`PartitionLog::open_unsynced`](super::PartitionLog::open_unsynced), each saying whether its
//!   recovered active segment still needs a sync (under `fsync`, after an unclean stop).
//! - Outputs: the [`PartitionLog`](super::PartitionLog)s, only once every recovered tail among them is durable; an
//!   error (and no log) otherwise. An [`UnsyncedLog`] gives its log out by no other path.
//! - Many logs ([`sync_recovered`]): one [`Backend::sync_filesystem`] of the data directory
//!   (`syncfs(2)`: one device flush for every partition instead of a synced file each, the
//!   sync that made 4,000-partition restarts three times slower than kfake's); where the
//!   backend cannot, or that sync fails (its error may be another program's file), each log
//!   syncs its own active segment, [`SYNCS_IN_FLIGHT`] at a time, and their errors decide.
//! - Never: hands out a log whose recovered tail may be only in the page cache.

use std::future::Future;
use std::io;
use std::path::Path;

use futures::stream::{StreamExt, TryStreamExt};
use minikafka_core::backend::Backend;

use super::Result;

/// What this module needs of a recovered log: a sync of its active segment. A narrow trait
/// (the partition log implements it) so that this module and the log it wraps, whose
/// `open_unsynced` returns an [`UnsyncedLog`], do not import each other.
pub trait RecoveredLog {
    /// Syncs the log's active segment (its recovered tail, I8).
    fn sync_recovered_tail(&self) -> impl Future<Output = Result<()>>;
}

/// Recovered segments synced at once when they are synced one by one.
pub const SYNCS_IN_FLIGHT: usize = 64;

/// A log opened after a stop whose recovered tail may not be durable yet (I8).
#[must_use = "the log is usable only once its recovered tail is synced"]
pub struct UnsyncedLog<L: RecoveredLog> {
    log: L,
    needs_sync: bool,
}

impl<L: RecoveredLog> UnsyncedLog<L> {
    pub(super) fn new(log: L, needs_sync: bool) -> Self {
        Self { log, needs_sync }
    }

    /// True when the recovered active segment must be synced before the log is served:
    /// under `flush.policy=fsync` after an unclean stop.
    pub fn needs_sync(&self) -> bool {
        self.needs_sync
    }

    /// The log, after syncing its recovered active segment when it needs it.
    pub async fn sync(self) -> Result<L> {
        if self.needs_sync {
            self.log.sync_recovered_tail().await?;
        }
        Ok(self.log)
    }

    /// The log, whose recovered tail a sync of its whole filesystem issued after it was
    /// opened made durable.
    fn synced_by_filesystem(self) -> L {
        self.log
    }
}

/// Makes every recovered tail among `logs` (all under `data_dir`, opened before this call)
/// durable and returns the logs in the same order (see the module documentation).
pub async fn sync_recovered<B: Backend, L: RecoveredLog>(
    backend: &B,
    data_dir: &Path,
    logs: Vec<UnsyncedLog<L>>,
) -> Result<Vec<L>> {
    if logs.iter().any(UnsyncedLog::needs_sync) {
        match backend.sync_filesystem(data_dir).await {
            Ok(()) => {
                return Ok(logs
                    .into_iter()
                    .map(UnsyncedLog::synced_by_filesystem)
                    .collect())
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => tracing::warn!(
                ?data_dir,
                error = %e,
                "syncing the filesystem failed: syncing each recovered segment instead"
            ),
        }
    }
    futures::stream::iter(logs)
        .map(UnsyncedLog::sync)
        .buffered(SYNCS_IN_FLIGHT)
        .try_collect()
        .await
}
