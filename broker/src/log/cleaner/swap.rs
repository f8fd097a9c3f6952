//! The segment swap on the backend: the steps of `minikafka_core::compaction::swap` (I24)
//! carried out, forward by the cleaner and to completion by recovery.
//!
//! Contract:
//! - [`CleanedWriter`] makes `<base>-<end>.log.cleaned` durable; [`commit`] renames it to
//!   `.swap` and syncs the directory (the commit point); [`finish`] removes the old segments
//!   of the range and renames the swap file over `<base>.log`, each step synced.
//! - [`recover_swaps`] runs at partition open, before the segments are listed: for each swap
//!   range found it applies core's decision table (discard a `.cleaned`, finish a `.swap`).
//! - Never: removes an old segment before the swap file is durable under its committed name.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use minikafka_core::compaction::swap::{
    file_name, parse_file_name, recovery_case, SwapChecks, SwapRange, SwapRecovery, SwapStage,
};
use minikafka_core::types::Offset;

use crate::log::segment::{
    classify, index_file_name, log_file_name, time_index_file_name, SegmentFile,
};

/// Removes `path`, treating a missing file as removed.
pub(crate) async fn remove_if_present<B: Backend>(backend: &B, path: &Path) -> io::Result<()> {
    match backend.remove_file(path).await {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Writes a cleaning's output to `<base>-<end>.log.cleaned` (step 1): whole batches in offset
/// order, then [`CleanedWriter::finish`] syncs it.
pub struct CleanedWriter<F: BackendFile> {
    file: F,
    pos: u64,
}

impl<F: BackendFile> CleanedWriter<F> {
    /// Creates the file, replacing any leftover of an earlier attempt.
    pub async fn create<B: Backend<File = F>>(
        backend: &B,
        dir: &Path,
        range: SwapRange,
    ) -> io::Result<Self> {
        let path = dir.join(file_name(range, SwapStage::Cleaned));
        remove_if_present(backend, &path).await?;
        let file = backend.open(&path, OpenMode::CreateNew).await?;
        Ok(CleanedWriter { file, pos: 0 })
    }

    /// Appends `bytes` (whole batches).
    pub async fn write(&mut self, bytes: Vec<u8>) -> io::Result<()> {
        let len = bytes.len() as u64;
        let (result, _) = self.file.write_at(bytes, self.pos).await;
        result?;
        self.pos += len;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len_bytes(&self) -> u64 {
        self.pos
    }

    /// Syncs and closes the file; returns its length.
    pub async fn finish(self) -> io::Result<u64> {
        self.file.sync_data().await?;
        self.file.close().await?;
        Ok(self.pos)
    }
}

/// Removes a `.cleaned` file the cleaner gave up on (nothing to swap, or an error).
pub async fn discard_cleaned<B: Backend>(
    backend: &B,
    dir: &Path,
    range: SwapRange,
) -> io::Result<()> {
    remove_if_present(backend, &dir.join(file_name(range, SwapStage::Cleaned))).await
}

/// Step 2, the commit point: `.cleaned` → `.swap`, then the directory synced.
pub async fn commit<B: Backend>(backend: &B, dir: &Path, range: SwapRange) -> io::Result<()> {
    backend
        .rename(
            &dir.join(file_name(range, SwapStage::Cleaned)),
            &dir.join(file_name(range, SwapStage::Swap)),
        )
        .await?;
    backend.sync_dir(dir).await
}

/// Steps 3 and 4: removes the old segments based in `(base, end)` (`old_bases`, as the caller
/// or the directory listing knows them) and the first one's indexes, syncs, renames the swap
/// file over `<base>.log`, syncs. Idempotent: recovery calls it again after a crash inside.
pub async fn finish<B: Backend>(
    backend: &B,
    dir: &Path,
    range: SwapRange,
    old_bases: &[Offset],
) -> io::Result<()> {
    for base in old_bases
        .iter()
        .filter(|b| **b > range.base && **b < range.end)
    {
        remove_if_present(backend, &dir.join(log_file_name(*base))).await?;
        remove_if_present(backend, &dir.join(index_file_name(*base))).await?;
        remove_if_present(backend, &dir.join(time_index_file_name(*base))).await?;
    }
    // The first segment's indexes describe the old file: stale once the rename lands.
    remove_if_present(backend, &dir.join(index_file_name(range.base))).await?;
    remove_if_present(backend, &dir.join(time_index_file_name(range.base))).await?;
    backend.sync_dir(dir).await?;
    backend
        .rename(
            &dir.join(file_name(range, SwapStage::Swap)),
            &dir.join(log_file_name(range.base)),
        )
        .await?;
    backend.sync_dir(dir).await
}

/// Recovery of interrupted swaps in `dir` (core's decision table). Returns what was done for
/// each range found, in range order.
pub async fn recover_swaps<B: Backend>(
    backend: &B,
    dir: &Path,
) -> io::Result<Vec<(SwapRange, SwapRecovery)>> {
    let mut found: BTreeMap<SwapRange, SwapChecks> = BTreeMap::new();
    let mut log_bases = Vec::new();
    for path in backend.list_dir(dir).await? {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let SegmentFile::Log(base) = classify(name) {
            log_bases.push(base);
        }
        if let Some((range, stage)) = parse_file_name(name) {
            let checks = found.entry(range).or_insert(SwapChecks {
                cleaned_present: false,
                swap_present: false,
                first_old_present: false,
            });
            match stage {
                SwapStage::Cleaned => checks.cleaned_present = true,
                SwapStage::Swap => checks.swap_present = true,
            }
        }
    }
    let mut done = Vec::with_capacity(found.len());
    for (range, mut checks) in found {
        checks.first_old_present = log_bases.contains(&range.base);
        let case = recovery_case(checks);
        match case {
            SwapRecovery::DiscardCleaned => {
                remove_if_present(backend, &dir.join(file_name(range, SwapStage::Cleaned))).await?;
                backend.sync_dir(dir).await?;
            }
            SwapRecovery::FinishSwap | SwapRecovery::FinishSwapNoFirst => {
                if checks.cleaned_present {
                    remove_if_present(backend, &dir.join(file_name(range, SwapStage::Cleaned)))
                        .await?;
                }
                finish(backend, dir, range, &log_bases).await?;
            }
            SwapRecovery::Nothing => {}
        }
        tracing::info!(
            ?dir,
            base = range.base.0,
            end = range.end.0,
            ?case,
            "segment swap recovered"
        );
        done.push((range, case));
    }
    Ok(done)
}
