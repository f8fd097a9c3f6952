//! The records of `__transaction_state`, in Kafka's own schemas (`TransactionLogKey`,
//! `TransactionLogValue`), byte for byte, so Kafka's tools could read our log.
//!
//! Every record is a key and an optional value (`None` = tombstone: the transactional id
//! expired). Both start with a big-endian `int16` version.
//!
//! | part | versions read (written) | fields |
//! |---|---|---|
//! | TransactionLogKey | 0 (0) | transactionalId string (`int16` length) |
//! | TransactionLogValue | 0, 1 (1) | see below |
//!
//! TransactionLogValue: producerId int64; producerEpoch int16; transactionTimeoutMs int32;
//! transactionStatus int8 (the [`TxnState`] id); transactionPartitions nullable array of
//! { topic string; partitionIds array of int32 } (null for Empty);
//! transactionLastUpdateTimestampMs int64; transactionStartTimestampMs int64. Version 1 is
//! flexible (KIP-482): strings and arrays have unsigned-varint lengths plus one (0 = null),
//! and each struct ends with tagged fields — at the top level tag 0 PreviousProducerId
//! (int64, default −1), tag 1 NextProducerId (int64, default −1), tag 2
//! ClientTransactionVersion (int16, default 0), the KIP-890 fields, written only when not
//! their default, in tag order. Unknown tags are skipped.
//!
//! Decoding is bounded (I10, I38): every length and count is checked against the bytes
//! present before anything is allocated, and a damaged or hostile record is a
//! [`RecordError`], never a panic. Bytes after the last field are an error.

use thiserror::Error;

use crate::field_codec::{FieldError, FieldReader as Reader, FieldWriter as Writer};

use super::state::TxnState;

/// Key version written (and the only one read).
pub const TXN_KEY_VERSION: i16 = 0;
/// Value version written: 1, the flexible one with the KIP-890 tagged fields.
pub const TXN_VALUE_VERSION: i16 = 1;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// Why a `__transaction_state` record could not be decoded (or replayed).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// A field runs past the end of the record.
    #[error("record truncated: needed {needed} more bytes at byte {at}")]
    Truncated {
        /// Where the field starts.
        at: usize,
        /// How many bytes it needs beyond the end.
        needed: usize,
    },
    /// A length or count that is negative (other than null where null is allowed), larger
    /// than the bytes left could hold, or a varint longer than five bytes.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A string is not UTF-8.
    #[error("string is not UTF-8")]
    InvalidUtf8,
    /// A key version other than 0.
    #[error("unknown key version {0}")]
    UnknownKeyVersion(i16),
    /// A value version other than 0 or 1.
    #[error("unknown value version {0}")]
    UnknownValueVersion(i16),
    /// A `transactionStatus` byte that names no state.
    #[error("unknown transaction status {0}")]
    UnknownStatus(i8),
    /// A known tagged field of the wrong size.
    #[error("tagged field {tag} has size {size}")]
    InvalidTaggedField {
        /// The tag.
        tag: u32,
        /// Its declared size.
        size: usize,
    },
    /// Bytes after the last field.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    /// A record whose state is never stored (Dead, PrepareEpochFence), or a value that
    /// contradicts its state (partitions in Empty): refused at replay.
    #[error("a stored transaction cannot be in state {0:?}")]
    UnexpectedState(TxnState),
}

/// TransactionLogKey: which transactional id a record belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxnLogKey {
    /// The transactional id.
    pub transactional_id: String,
}

/// One topic's partitions in a stored transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartitions {
    /// Topic name.
    pub topic: String,
    /// Partition ids, as stored.
    pub partitions: Vec<i32>,
}

/// TransactionLogValue: a transactional id's whole metadata after one transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnLogValue {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last rotation (v1 tag 0; −1 none).
    pub previous_producer_id: i64,
    /// The producer id the transaction moves to when it completes, after an epoch ran out
    /// (v1 tag 1; −1 none).
    pub next_producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// Partitions in the transaction; `None` (null) for Empty.
    pub partitions: Option<Vec<TopicPartitions>>,
    /// When this transition was made (coordinator time).
    pub last_update_ms: i64,
    /// When the transaction started (its first partition), −1 none.
    pub start_ms: i64,
    /// The client's transaction version: 2 for EndTxn v5+ (KIP-890), else 0 (v1 tag 2).
    pub client_transaction_version: i16,
}

impl TxnLogKey {
    /// Encodes (key version 0).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(TXN_KEY_VERSION, false);
        w.string(&self.transactional_id);
        w.buf
    }

    /// Decodes key version 0.
    pub fn decode(bytes: &[u8]) -> Result<TxnLogKey, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if version != TXN_KEY_VERSION {
            return Err(RecordError::UnknownKeyVersion(version));
        }
        let transactional_id = r.string()?;
        finish(&r)?;
        Ok(TxnLogKey { transactional_id })
    }
}

impl TxnLogValue {
    /// Encodes at [`TXN_VALUE_VERSION`].
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(TXN_VALUE_VERSION)
    }

    /// Encodes at `version` (0 or 1; anything else is treated as 1). Version 0 drops the
    /// tagged fields.
    pub fn encode_version(&self, version: i16) -> Vec<u8> {
        let flexible = version != 0;
        let mut w = Writer::new(if flexible { 1 } else { 0 }, flexible);
        w.i64(self.producer_id);
        w.i16(self.producer_epoch);
        w.i32(self.timeout_ms);
        w.i8(self.state.id());
        w.array_len(self.partitions.as_ref().map(Vec::len));
        for tp in self.partitions.iter().flatten() {
            w.string(&tp.topic);
            w.array_len(Some(tp.partitions.len()));
            for p in &tp.partitions {
                w.i32(*p);
            }
            w.tags(&[]);
        }
        w.i64(self.last_update_ms);
        w.i64(self.start_ms);
        let previous = self.previous_producer_id.to_be_bytes();
        let next = self.next_producer_id.to_be_bytes();
        let client_version = self.client_transaction_version.to_be_bytes();
        let mut tags: Vec<(u32, &[u8])> = Vec::new();
        if self.previous_producer_id != -1 {
            tags.push((TAG_PREVIOUS_PRODUCER_ID, &previous));
        }
        if self.next_producer_id != -1 {
            tags.push((TAG_NEXT_PRODUCER_ID, &next));
        }
        if self.client_transaction_version != 0 {
            tags.push((TAG_CLIENT_TRANSACTION_VERSION, &client_version));
        }
        w.tags(&tags);
        w.buf
    }

    /// Decodes value versions 0 and 1.
    pub fn decode(bytes: &[u8]) -> Result<TxnLogValue, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return Err(RecordError::UnknownValueVersion(version));
        }
        r.flexible = version >= 1;
        let producer_id = r.i64()?;
        let producer_epoch = r.i16()?;
        let timeout_ms = r.i32()?;
        let status = r.i8()?;
        let state = TxnState::from_id(status).ok_or(RecordError::UnknownStatus(status))?;
        // Smallest entry: an empty topic name and an empty partition array (plus the tag
        // count when flexible).
        let min_entry = if r.flexible { 3 } else { 6 };
        let partitions = match r.nullable_array_len(min_entry)? {
            None => None,
            Some(count) => {
                let mut topics = Vec::with_capacity(count);
                for _ in 0..count {
                    let topic = r.string()?;
                    let n = r
                        .nullable_array_len(4)?
                        .ok_or(RecordError::InvalidLength(-1))?;
                    let mut partitions = Vec::with_capacity(n);
                    for _ in 0..n {
                        partitions.push(r.i32()?);
                    }
                    r.skip_tags()?;
                    topics.push(TopicPartitions { topic, partitions });
                }
                Some(topics)
            }
        };
        let last_update_ms = r.i64()?;
        let start_ms = r.i64()?;
        let mut value = TxnLogValue {
            producer_id,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms,
            start_ms,
            client_transaction_version: 0,
        };
        if r.flexible {
            r.tags(|tag, size, data| {
                let bad = || RecordError::InvalidTaggedField { tag, size };
                match tag {
                    TAG_PREVIOUS_PRODUCER_ID | TAG_NEXT_PRODUCER_ID => {
                        let v = i64::from_be_bytes(data.try_into().map_err(|_| bad())?);
                        if tag == TAG_PREVIOUS_PRODUCER_ID {
                            value.previous_producer_id = v;
                        } else {
                            value.next_producer_id = v;
                        }
                    }
                    TAG_CLIENT_TRANSACTION_VERSION => {
                        value.client_transaction_version =
                            i16::from_be_bytes(data.try_into().map_err(|_| bad())?);
                    }
                    _ => {}
                }
                Ok::<(), RecordError>(())
            })?;
        }
        finish(&r)?;
        Ok(value)
    }
}

impl From<FieldError> for RecordError {
    fn from(e: FieldError) -> RecordError {
        match e {
            FieldError::Truncated { at, needed } => RecordError::Truncated { at, needed },
            FieldError::InvalidLength(n) => RecordError::InvalidLength(n),
            FieldError::InvalidUtf8 => RecordError::InvalidUtf8,
        }
    }
}

/// Bytes after the last field are an error.
fn finish(r: &Reader<'_>) -> Result<(), RecordError> {
    match r.remaining() {
        0 => Ok(()),
        n => Err(RecordError::TrailingBytes(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value() -> TxnLogValue {
        TxnLogValue {
            producer_id: 1000,
            previous_producer_id: 999,
            next_producer_id: -1,
            producer_epoch: 5,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: Some(vec![TopicPartitions {
                topic: "t".into(),
                partitions: vec![0, 2],
            }]),
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
            client_transaction_version: 2,
        }
    }

    #[test]
    fn the_key_is_kafkas_bytes() {
        let key = TxnLogKey {
            transactional_id: "tx-1".into(),
        };
        assert_eq!(key.encode(), b"\x00\x00\x00\x04tx-1".to_vec());
        assert_eq!(TxnLogKey::decode(&key.encode()), Ok(key));
    }

    /// The version-1 layout written out by hand from TransactionLogValue.json: fixed fields,
    /// compact array and string lengths (+1), an empty tag section per partition entry, and
    /// the non-default top-level tags in tag order.
    #[test]
    fn a_version_1_value_is_kafkas_bytes() {
        let mut want = vec![0, 1];
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&5i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.push(2); // one topic
        want.extend_from_slice(&[2, b't']);
        want.push(3); // two partitions
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.push(0); // the entry's tags
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        want.push(2); // two tags: previous producer id, client transaction version
        want.extend_from_slice(&[0, 8]);
        want.extend_from_slice(&999i64.to_be_bytes());
        want.extend_from_slice(&[2, 2, 0, 2]);
        assert_eq!(value().encode(), want);
        assert_eq!(TxnLogValue::decode(&want), Ok(value()));
    }

    #[test]
    fn version_0_drops_the_tags_and_encodes_null_as_minus_one() {
        let mut v = value();
        v.state = TxnState::Empty;
        v.partitions = None;
        let bytes = v.encode_version(0);
        let mut want = vec![0, 0];
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&5i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(0);
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(bytes, want);
        let back = TxnLogValue::decode(&bytes).expect("decodes");
        assert_eq!(back.previous_producer_id, -1);
        assert_eq!(back.client_transaction_version, 0);
        assert_eq!(back.partitions, None);
    }

    #[test]
    fn unknown_tags_are_skipped_and_bad_sizes_refused() {
        let mut bytes = value().encode();
        // Replace the tag section with: tag 9 (3 bytes) then tag 1 (8 bytes).
        let tags_at = bytes.len() - (1 + 2 + 8 + 4);
        bytes.truncate(tags_at);
        bytes.extend_from_slice(&[2, 9, 3, 1, 2, 3, 1, 8]);
        bytes.extend_from_slice(&77i64.to_be_bytes());
        let v = TxnLogValue::decode(&bytes).expect("decodes");
        assert_eq!(v.next_producer_id, 77);
        assert_eq!(v.previous_producer_id, -1);
        bytes.truncate(tags_at);
        bytes.extend_from_slice(&[1, 2, 1, 9]);
        assert_eq!(
            TxnLogValue::decode(&bytes),
            Err(RecordError::InvalidTaggedField { tag: 2, size: 1 })
        );
    }

    #[test]
    fn hostile_lengths_are_refused_before_allocating() {
        // A key claiming a 32767-byte id in 4 bytes.
        assert!(matches!(
            TxnLogKey::decode(&[0, 0, 0x7f, 0xff]),
            Err(RecordError::Truncated { .. })
        ));
        assert_eq!(
            TxnLogKey::decode(&[0, 0, 0xff, 0xff]),
            Err(RecordError::InvalidLength(-1))
        );
        assert_eq!(
            TxnLogKey::decode(&[0, 1, 0, 0]),
            Err(RecordError::UnknownKeyVersion(1))
        );
        assert_eq!(
            TxnLogKey::decode(&[0, 0, 0, 0, 7]),
            Err(RecordError::TrailingBytes(1))
        );
        // A v0 value claiming 2^31-1 topics.
        let mut v0 = vec![0, 0];
        v0.extend_from_slice(&[0; 8 + 2 + 4]);
        v0.push(1);
        v0.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            TxnLogValue::decode(&v0),
            Err(RecordError::InvalidLength(i64::from(i32::MAX)))
        );
        // A v1 value with a six-byte varint count.
        let mut v1 = vec![0, 1];
        v1.extend_from_slice(&[0; 8 + 2 + 4]);
        v1.push(1);
        v1.extend_from_slice(&[0xff; 6]);
        assert_eq!(
            TxnLogValue::decode(&v1),
            Err(RecordError::InvalidLength(-1))
        );
        // An unknown status byte and an unknown version.
        let mut bad = value().encode();
        bad[2 + 8 + 2 + 4] = 8;
        assert_eq!(
            TxnLogValue::decode(&bad),
            Err(RecordError::UnknownStatus(8))
        );
        assert_eq!(
            TxnLogValue::decode(&[0, 2]),
            Err(RecordError::UnknownValueVersion(2))
        );
        // Every prefix of a valid value is refused, none panics.
        let whole = value().encode();
        for end in 0..whole.len() {
            assert!(TxnLogValue::decode(&whole[..end]).is_err(), "prefix {end}");
        }
    }
}
