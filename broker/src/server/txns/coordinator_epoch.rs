//! The transaction coordinators' epoch, which every COMMIT/ABORT marker they write carries
//! (I175).
//!
//! Kafka's coordinator epoch is the `__transaction_state` partition's leader epoch, which
//! grows with every leader election, so a partition that saw a marker from a newer
//! coordinator refuses an older one's with TRANSACTION_COORDINATOR_FENCED (I72). A single
//! node leads every partition at one leader epoch (`log::LEADER_EPOCH`) and loads every state
//! partition once per start, so the epoch is counted per start instead: shard 0 takes the
//! stored epoch plus one (0 the first time) and makes it durable before any coordinator
//! loads (`lifecycle::shard_main`, before the `TopicsLoaded` barrier); every shard's
//! coordinators then use it. A coordinator loaded later (after a clean stop or a kill -9)
//! therefore writes with a higher epoch than every earlier one, and a marker of an earlier
//! one is refused.
//!
//! Stored in `<data>/`[`EPOCH_FILE`]: two 8-byte slots, each an epoch (`i32`, big-endian) and
//! the CRC-32C of its 4 bytes. Epoch `e` is written in place into slot `e % 2` and synced, so
//! the other slot keeps `e - 1` whole: a torn write leaves one valid slot, and the larger
//! valid epoch is the stored one. Only the first start creates the file (temporary file,
//! sync, rename, directory sync); later starts cost one small write and one data sync. A file
//! with no valid slot stops the start: guessing could reuse an epoch.

use std::path::Path;

use minikafka_core::backend::{Backend, BackendFile, OpenMode};

use crate::log::atomic_file::{read_bounded, write_atomically};

/// The file in the data directory holding the coordinator epoch.
pub const EPOCH_FILE: &str = "txn_coordinator_epoch";
/// One slot: the epoch and its checksum.
const SLOT_BYTES: usize = 8;
/// The file: two slots.
const FILE_BYTES: usize = 2 * SLOT_BYTES;

/// A slot holding `epoch`.
fn encode_slot(epoch: i32) -> [u8; SLOT_BYTES] {
    let bytes = epoch.to_be_bytes();
    let mut slot = [0; SLOT_BYTES];
    slot[..4].copy_from_slice(&bytes);
    slot[4..].copy_from_slice(&crc32c::crc32c(&bytes).to_be_bytes());
    slot
}

/// The epoch in `slot`, if its checksum matches and it is not negative.
fn decode_slot(slot: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = slot.get(..4)?.try_into().ok()?;
    let crc: [u8; 4] = slot.get(4..SLOT_BYTES)?.try_into().ok()?;
    let epoch = i32::from_be_bytes(bytes);
    (crc32c::crc32c(&bytes) == u32::from_be_bytes(crc) && epoch >= 0).then_some(epoch)
}

/// The stored epoch in a file's `bytes`: the larger valid slot's.
fn stored_epoch(bytes: &[u8]) -> Option<i32> {
    if bytes.len() != FILE_BYTES {
        return None;
    }
    let (first, second) = bytes.split_at(SLOT_BYTES);
    decode_slot(first).max(decode_slot(second))
}

/// Takes the coordinator epoch for this start: one more than the stored one, or 0 when none
/// is stored; durable before it is returned (I175).
pub async fn next_epoch<B: Backend>(backend: &B, data_dir: &Path) -> Result<i32, String> {
    let path = data_dir.join(EPOCH_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    let io = |e: std::io::Error| what(e.to_string());
    let stored = read_bounded(backend, &path, FILE_BYTES as u64)
        .await
        .map_err(|e| what(e.to_string()))?;
    let Some(bytes) = stored else {
        let mut file = [0; FILE_BYTES];
        file[..SLOT_BYTES].copy_from_slice(&encode_slot(0));
        write_atomically(backend, data_dir, &path, file.to_vec())
            .await
            .map_err(io)?;
        return Ok(0);
    };
    let current = stored_epoch(&bytes).ok_or_else(|| what("no valid coordinator epoch".into()))?;
    let next = current
        .checked_add(1)
        .ok_or_else(|| what("the coordinator epoch is exhausted".into()))?;
    let slot = (next % 2) as u64 * SLOT_BYTES as u64;
    let file = backend.open(&path, OpenMode::ReadWrite).await.map_err(io)?;
    let (written, _) = file.write_at(encode_slot(next).to_vec(), slot).await;
    let synced = match written {
        Ok(()) => file.sync_data().await,
        Err(e) => Err(e),
    };
    let closed = file.close().await;
    synced.and(closed).map_err(io)?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(first: [u8; SLOT_BYTES], second: [u8; SLOT_BYTES]) -> Vec<u8> {
        [first, second].concat()
    }

    #[test]
    fn the_larger_valid_slot_is_the_stored_epoch() {
        assert_eq!(
            stored_epoch(&file(encode_slot(0), [0; SLOT_BYTES])),
            Some(0)
        );
        assert_eq!(stored_epoch(&file(encode_slot(6), encode_slot(5))), Some(6));
        assert_eq!(stored_epoch(&file(encode_slot(6), encode_slot(7))), Some(7));
        assert_eq!(
            stored_epoch(&file(encode_slot(i32::MAX), encode_slot(0))),
            Some(i32::MAX)
        );
    }

    /// A write torn anywhere in slot `e % 2` leaves the other slot's `e - 1`, or the whole
    /// new `e`: never a value that was not written.
    #[test]
    fn a_torn_slot_falls_back_to_the_other() {
        let old = encode_slot(4);
        let new = encode_slot(6);
        for torn_at in 0..=SLOT_BYTES {
            let mut slot = old;
            slot[..torn_at].copy_from_slice(&new[..torn_at]);
            let got = stored_epoch(&file(slot, encode_slot(5)));
            assert!(
                matches!(got, Some(5) | Some(6)),
                "torn at {torn_at}: {got:?}"
            );
        }
    }

    #[test]
    fn a_file_with_no_valid_slot_or_the_wrong_length_is_refused() {
        assert_eq!(stored_epoch(&[0; FILE_BYTES]), None);
        assert_eq!(stored_epoch(&encode_slot(3)), None);
        assert_eq!(stored_epoch(&[encode_slot(3); 3].concat()), None);
        assert_eq!(stored_epoch(&file(encode_slot(-1), [0; SLOT_BYTES])), None);
    }
}
