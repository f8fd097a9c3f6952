//! The cleaner's checkpoint on disk (Kafka's `cleaner-offset-checkpoint`): where the last
//! cleaning of a partition ended, so that a restart neither cleans the whole log again nor
//! loses the dirty-ratio accounting, and the oldest tombstone it kept, so that a quiet log
//! still drops its expired deletes after a restart.
//!
//! Contract:
//! - One file per partition directory, [`CHECKPOINT_FILE`] (it goes with the directory when
//!   the topic is deleted, so a topic created again starts clean), in the text shape of
//!   Kafka's checkpoint files: a version line (`0`), the first dirty offset, the oldest kept
//!   tombstone's timestamp or `none`. Replaced atomically
//!   ([`crate::log::atomic_file::write_atomically`]).
//! - Written after a cleaning, once its swaps are durable (I24). It is a hint, never needed
//!   for correctness: a missing, damaged or lost file (or one a crash left at its old value)
//!   makes the next cleaning start from the log start, which re-cleans and loses nothing.
//! - Sound across crashes: every offset below the first dirty offset lies in a sealed segment,
//!   synced at its roll (or at its swap) with its directory entry, so no crash can bring the
//!   log end below it and no offset below it is ever assigned again (records there are all
//!   cleaned). A checkpoint above the active segment's base (which cannot be written) is
//!   ignored rather than trusted.
//! - Parsed defensively: over [`MAX_CHECKPOINT_BYTES`], another version or a bad number is
//!   ignored with a warning, never a panic.

use std::path::Path;

use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;

use crate::log::atomic_file::{read_bounded, write_atomically};
use crate::log::Result;

/// What the cleaner remembers of a partition between cleanings; kept across restarts in the
/// partition directory (this module's file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// Everything below has been cleaned at least once.
    pub first_dirty: Offset,
    /// The oldest tombstone the last cleaning kept (its expiry makes the log due again).
    pub oldest_kept_tombstone_ms: Option<i64>,
}

/// The checkpoint's file name inside the partition directory.
pub const CHECKPOINT_FILE: &str = "cleaner-offset.checkpoint";
/// Largest checkpoint file read back (three short lines).
pub const MAX_CHECKPOINT_BYTES: u64 = 96;
const VERSION: &str = "0";

/// The file's contents for `checkpoint`.
pub fn encode(checkpoint: &CleanerCheckpoint) -> Vec<u8> {
    let tombstone = checkpoint
        .oldest_kept_tombstone_ms
        .map_or_else(|| "none".to_string(), |ms| ms.to_string());
    format!("{VERSION}\n{}\n{tombstone}\n", checkpoint.first_dirty.0).into_bytes()
}

/// Parses the file's contents; the reason on failure.
pub fn decode(bytes: &[u8]) -> std::result::Result<CleanerCheckpoint, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    match lines.next() {
        Some(VERSION) => {}
        other => return Err(format!("version {other:?} is not {VERSION:?}")),
    }
    let first_dirty: i64 = lines
        .next()
        .and_then(|l| l.parse().ok())
        .filter(|o| *o >= 0)
        .ok_or_else(|| "no first dirty offset".to_string())?;
    let oldest_kept_tombstone_ms = match lines.next() {
        Some("none") => None,
        Some(ms) => Some(
            ms.parse::<i64>()
                .map_err(|_| format!("tombstone timestamp {ms:?}"))?,
        ),
        None => return Err("no tombstone line".into()),
    };
    if lines.next().is_some() {
        return Err("lines after the tombstone timestamp".into());
    }
    Ok(CleanerCheckpoint {
        first_dirty: Offset(first_dirty),
        oldest_kept_tombstone_ms,
    })
}

/// Makes `checkpoint` the durable cleaner checkpoint of the partition in `dir`.
pub async fn save<B: Backend>(
    backend: &B,
    dir: &Path,
    checkpoint: &CleanerCheckpoint,
) -> Result<()> {
    let path = dir.join(CHECKPOINT_FILE);
    write_atomically(backend, dir, &path, encode(checkpoint)).await?;
    Ok(())
}

/// The checkpoint of the partition in `dir` as the last run left it, or the default (clean
/// from the log start) when there is none or it cannot be trusted (see the module contract):
/// `active_base` is the base offset of the log's active segment.
pub async fn load<B: Backend>(backend: &B, dir: &Path, active_base: Offset) -> CleanerCheckpoint {
    let path = dir.join(CHECKPOINT_FILE);
    let checkpoint = match read_bounded(backend, &path, MAX_CHECKPOINT_BYTES).await {
        Ok(None) => return CleanerCheckpoint::default(),
        Ok(Some(bytes)) => decode(&bytes),
        Err(e) => Err(e.to_string()),
    };
    match checkpoint {
        Ok(c) if c.first_dirty <= active_base => c,
        Ok(c) => {
            tracing::warn!(
                ?path,
                first_dirty = c.first_dirty.0,
                active_base = active_base.0,
                "cleaner checkpoint beyond the sealed segments: cleaning from the log start"
            );
            CleanerCheckpoint::default()
        }
        Err(why) => {
            tracing::warn!(
                ?path,
                "cleaner checkpoint unreadable ({why}): cleaning from the log start"
            );
            CleanerCheckpoint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_shape() {
        for checkpoint in [
            CleanerCheckpoint::default(),
            CleanerCheckpoint {
                first_dirty: Offset(4096),
                oldest_kept_tombstone_ms: Some(1_700_000_000_000),
            },
            CleanerCheckpoint {
                first_dirty: Offset(i64::MAX),
                oldest_kept_tombstone_ms: Some(-1),
            },
        ] {
            assert_eq!(decode(&encode(&checkpoint)), Ok(checkpoint));
        }
        let c = CleanerCheckpoint {
            first_dirty: Offset(42),
            oldest_kept_tombstone_ms: None,
        };
        assert_eq!(encode(&c), b"0\n42\nnone\n");
    }

    #[test]
    fn damaged_files_are_refused() {
        for bad in [
            &b""[..],
            b"1\n5\nnone\n",
            b"0\n-5\nnone\n",
            b"0\nfive\nnone\n",
            b"0\n5\n",
            b"0\n5\nsoon\n",
            b"0\n5\nnone\nmore\n",
            b"\xff\xfe",
        ] {
            assert!(decode(bad).is_err(), "accepted {bad:?}");
        }
    }

    proptest::proptest! {
        /// Any bytes decode to an error or to a checkpoint that encodes back to them.
        #[test]
        fn decode_is_total(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..32)) {
            if let Ok(c) = decode(&bytes) {
                proptest::prop_assert_eq!(decode(&encode(&c)), Ok(c));
            }
        }
    }
}
