//! Transaction markers as Kafka writes them: the control batch that ends a producer's
//! transaction in one partition (KIP-98), encoded and decoded.
//!
//! Format (Kafka's `EndTransactionMarker` / `ControlRecordType`): a v2 batch whose attributes
//! carry the control bit (0x20) and the transactional bit (0x10), uncompressed, CreateTime,
//! with the producer id and epoch of the transaction, base sequence -1, and exactly one
//! record:
//! - key: version i16 (0) + type i16 (0 = ABORT, 1 = COMMIT) — [`ControlType`];
//! - value: version i16 (0) + coordinator epoch i32.
//!
//! Only the transaction coordinator writes these (through the partition's marker path); a
//! client's Produce carrying a control batch is refused (INVALID_RECORD, as Kafka's
//! `LogValidator` does for an origin other than the coordinator).

use crate::record::{
    compute_crc, BatchBuilder, BatchHeader, NewRecord, RecordIter, CRC_START, HEADER_BYTES,
};
use crate::types::Offset;

/// The control bit of a batch's attributes.
pub const CONTROL_BIT: i16 = 0x20;
/// The transactional bit of a batch's attributes.
pub const TRANSACTIONAL_BIT: i16 = 0x10;
/// The version of the control record key we write (and the only one Kafka defines).
pub const CONTROL_KEY_VERSION: i16 = 0;
/// The version of the end-transaction marker value we write.
pub const MARKER_VALUE_VERSION: i16 = 0;

/// Which end a marker records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// The transaction's records are dropped by read_committed readers.
    Abort,
    /// The transaction's records become visible to read_committed readers.
    Commit,
}

impl ControlType {
    /// Kafka's code for the type (the control record key's second field).
    pub fn wire_type(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }

    /// The type of `code`; other codes (Kafka reserves more) are `None`.
    pub fn from_wire_type(code: i16) -> Option<ControlType> {
        match code {
            0 => Some(ControlType::Abort),
            1 => Some(ControlType::Commit),
            _ => None,
        }
    }
}

/// One end-of-transaction marker for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TxnMarker {
    /// The transaction's producer id (≥ 0).
    pub producer_id: i64,
    /// The producer epoch the coordinator ends the transaction with.
    pub producer_epoch: i16,
    /// The epoch of the coordinator writing it (fences a deposed coordinator).
    pub coordinator_epoch: i32,
    /// COMMIT or ABORT.
    pub control_type: ControlType,
}

/// Encodes `marker` as a control batch at base offset 0 (the log patches the offset and the
/// leader epoch), stamped `timestamp_ms`.
pub fn encode_marker(marker: &TxnMarker, timestamp_ms: i64) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
    key.extend_from_slice(&marker.control_type.wire_type().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
    value.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let mut builder = BatchBuilder::new();
    builder.producer_id = marker.producer_id;
    builder.producer_epoch = marker.producer_epoch;
    builder.base_sequence = -1;
    builder.push(&NewRecord {
        key: Some(&key),
        value: Some(&value),
        headers: Vec::new(),
        timestamp_ms,
    });
    let mut batch = builder.build(Offset(0));
    let attributes = CONTROL_BIT | TRANSACTIONAL_BIT;
    batch[CRC_START..CRC_START + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&batch);
    batch[CRC_START - 4..CRC_START].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Why bytes are not a marker.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkerError {
    /// The batch's header does not parse, or it is not a control batch.
    #[error("not a control batch")]
    NotControl,
    /// The control record is missing, compressed, or its key or value is malformed.
    #[error("malformed control record: {0}")]
    Malformed(&'static str),
    /// A control record of a type that is not a transaction marker.
    #[error("control record type {0} is not a transaction marker")]
    UnknownType(i16),
}

/// Decodes the marker of `batch`, one whole control batch (header and records; CRC checked
/// by the caller where it matters). The control type is read from the first record's key;
/// the coordinator epoch from its value.
pub fn decode_marker(batch: &[u8]) -> Result<TxnMarker, MarkerError> {
    let header = BatchHeader::parse(batch).map_err(|_| MarkerError::NotControl)?;
    if !header.is_control() {
        return Err(MarkerError::NotControl);
    }
    if header.attributes & 0x07 != 0 {
        return Err(MarkerError::Malformed("compressed"));
    }
    let end = header.total_bytes().min(batch.len());
    let records = batch
        .get(HEADER_BYTES..end)
        .ok_or(MarkerError::Malformed("short batch"))?;
    let record = RecordIter::new(records)
        .next()
        .ok_or(MarkerError::Malformed("no record"))?
        .map_err(|_| MarkerError::Malformed("record"))?;
    let key = record.key.ok_or(MarkerError::Malformed("null key"))?;
    if key.len() < 4 {
        return Err(MarkerError::Malformed("short key"));
    }
    let code = i16::from_be_bytes([key[2], key[3]]);
    let control_type = ControlType::from_wire_type(code).ok_or(MarkerError::UnknownType(code))?;
    let value = record.value.ok_or(MarkerError::Malformed("null value"))?;
    if value.len() < 6 {
        return Err(MarkerError::Malformed("short value"));
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Ok(TxnMarker {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        coordinator_epoch,
        control_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::validate_batch;
    use proptest::prelude::*;

    #[test]
    fn a_marker_is_a_valid_control_batch_with_kafkas_record() {
        let marker = TxnMarker {
            producer_id: 7,
            producer_epoch: 3,
            coordinator_epoch: 9,
            control_type: ControlType::Commit,
        };
        let batch = encode_marker(&marker, 1_000);
        let header = validate_batch(&batch).expect("valid");
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(header.attributes, 0x30);
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 3, -1)
        );
        assert_eq!(header.records_count, 1);
        let record = RecordIter::new(&batch[HEADER_BYTES..])
            .next()
            .expect("one record")
            .expect("a valid record");
        assert_eq!(record.key, Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(record.value, Some(&[0u8, 0, 0, 0, 0, 9][..]));
        assert_eq!(decode_marker(&batch), Ok(marker));
    }

    #[test]
    fn the_bytes_match_an_independent_encoding_of_kafkas_format() {
        // Written by a separate encoder from Kafka's spec (the fuzz seed, after its selector
        // byte): COMMIT, producer 7, epoch 3, coordinator epoch 9, at 1000 ms.
        let seed = include_bytes!("../../fuzz/corpus/txn_data/marker-commit");
        let marker = TxnMarker {
            producer_id: 7,
            producer_epoch: 3,
            coordinator_epoch: 9,
            control_type: ControlType::Commit,
        };
        assert_eq!(encode_marker(&marker, 1000), seed[1..].to_vec());
        let abort = include_bytes!("../../fuzz/corpus/txn_data/marker-abort");
        assert_eq!(
            decode_marker(&abort[1..]).map(|m| (m.producer_id, m.control_type)),
            Ok((8, ControlType::Abort))
        );
        let unknown = include_bytes!("../../fuzz/corpus/txn_data/marker-unknown-type");
        assert_eq!(
            decode_marker(&unknown[1..]),
            Err(MarkerError::UnknownType(5))
        );
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            value: Some(b"v"),
            timestamp_ms: 1,
            ..NewRecord::default()
        });
        assert_eq!(
            decode_marker(&b.build(Offset(0))),
            Err(MarkerError::NotControl)
        );
    }

    proptest! {
        #[test]
        fn markers_round_trip(pid in 0i64.., epoch in 0i16.., coord in any::<i32>(), commit: bool, ts in 0i64..1<<40) {
            let marker = TxnMarker {
                producer_id: pid,
                producer_epoch: epoch,
                coordinator_epoch: coord,
                control_type: if commit { ControlType::Commit } else { ControlType::Abort },
            };
            prop_assert_eq!(decode_marker(&encode_marker(&marker, ts)), Ok(marker));
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_marker(&bytes);
        }
    }
}
