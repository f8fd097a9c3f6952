//! The log start offset checkpoint: where a partition's log begins, kept durably so that
//! records deleted by retention or DeleteRecords never come back after a crash.
//!
//! Contract:
//! - One file per partition directory, [`CHECKPOINT_FILE`], in the text form of Kafka's
//!   checkpoint files: a version line (`0`), an entry count (`1`), then the offset. It is
//!   replaced atomically ([`super::atomic_file::write_atomically`]: temp file, sync, rename,
//!   directory sync).
//! - Write-ahead: the log moves its start offset only after the checkpoint holding the new
//!   value is durable, and deletes segments only after that (I25). A crash before the
//!   checkpoint is durable keeps the old start (nothing was acknowledged); after it, the new
//!   one, whatever segments were or were not removed yet: startup removes the segments wholly
//!   below it.
//! - Parsed defensively: a file over [`MAX_CHECKPOINT_BYTES`], of another version, or not a
//!   non-negative offset is a [`LogError::BadMetadata`], never a panic.
//! - No file (a partition that never moved its start) means: the first segment's base offset.

use std::path::Path;

use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;

use super::atomic_file::{read_bounded, write_atomically, ReadError};
use super::{LogError, Result};

/// The checkpoint's file name inside the partition directory.
pub const CHECKPOINT_FILE: &str = "log-start-offset.checkpoint";
/// Largest checkpoint file read back (three short lines).
pub const MAX_CHECKPOINT_BYTES: u64 = 64;
const VERSION: &str = "0";

/// The checkpoint file's contents for `offset`.
pub fn encode(offset: Offset) -> Vec<u8> {
    format!("{VERSION}\n1\n{}\n", offset.0).into_bytes()
}

/// Parses a checkpoint file's contents; the reason on failure.
pub fn decode(bytes: &[u8]) -> std::result::Result<Offset, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    match lines.next() {
        Some(VERSION) => {}
        other => return Err(format!("version {other:?} is not {VERSION:?}")),
    }
    match lines.next() {
        Some("1") => {}
        other => return Err(format!("entry count {other:?} is not \"1\"")),
    }
    let offset: i64 = lines
        .next()
        .and_then(|l| l.parse().ok())
        .ok_or_else(|| "no offset line".to_string())?;
    if offset < 0 {
        return Err(format!("offset {offset} is negative"));
    }
    if lines.next().is_some() {
        return Err("lines after the offset".into());
    }
    Ok(Offset(offset))
}

/// Makes `offset` the durable log start of the partition in `dir`.
pub async fn write<B: Backend>(backend: &B, dir: &Path, offset: Offset) -> Result<()> {
    let path = dir.join(CHECKPOINT_FILE);
    write_atomically(backend, dir, &path, encode(offset)).await?;
    Ok(())
}

/// The checkpointed log start of the partition in `dir`; `None` when there is none.
pub async fn read<B: Backend>(backend: &B, dir: &Path) -> Result<Option<Offset>> {
    let path = dir.join(CHECKPOINT_FILE);
    let bad = |reason: String| LogError::BadMetadata {
        path: path.clone(),
        line: 0,
        reason,
    };
    match read_bounded(backend, &path, MAX_CHECKPOINT_BYTES).await {
        Ok(None) => Ok(None),
        Ok(Some(bytes)) => decode(&bytes).map(Some).map_err(bad),
        Err(ReadError::Io(e)) => Err(e.into()),
        Err(e) => Err(bad(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_kafka_shape() {
        for offset in [0, 1, 4096, i64::MAX] {
            let bytes = encode(Offset(offset));
            assert_eq!(decode(&bytes), Ok(Offset(offset)));
        }
        assert_eq!(encode(Offset(42)), b"0\n1\n42\n");
    }

    #[test]
    fn damaged_files_are_refused() {
        for bad in [
            &b""[..],
            b"1\n1\n5\n",
            b"0\n2\n5\n",
            b"0\n1\n",
            b"0\n1\n-5\n",
            b"0\n1\nfive\n",
            b"0\n1\n5\n6\n",
            b"\xff\xfe",
        ] {
            assert!(decode(bad).is_err(), "accepted {bad:?}");
        }
    }

    proptest::proptest! {
        /// Any bytes decode to an error or to an offset that encodes back to them.
        #[test]
        fn decode_is_total(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24)) {
            if let Ok(offset) = decode(&bytes) {
                proptest::prop_assert_eq!(decode(&encode(offset)), Ok(offset));
            }
        }
    }
}
