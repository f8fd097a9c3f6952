//! The aborted-transaction index (`.txnindex`), one per segment, in Kafka's format: what a
//! read_committed fetch needs to drop aborted records without reading the log back.
//!
//! Each entry is 34 bytes, big-endian (Kafka's `AbortedTxn`): version i16 (0), producer id
//! i64, first offset i64, last offset i64 (the ABORT marker's offset), last stable offset i64
//! (the partition's LSO once the marker landed). A segment's file lists the transactions
//! whose ABORT marker lies in that segment, in marker order. The file is a cache of the log:
//! recovery rebuilds it from the markers, like the offset index (I70).

/// Bytes of one entry.
pub const ENTRY_BYTES: usize = 34;
/// The entry version we write (Kafka's only one).
pub const ENTRY_VERSION: i16 = 0;

/// One aborted transaction of one producer in one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbortedTxn {
    /// The producer id.
    pub producer_id: i64,
    /// Offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The last stable offset once the marker landed.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[0..2].copy_from_slice(&ENTRY_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry; `None` for a short slice or an unknown version.
    pub fn decode(bytes: &[u8]) -> Option<AbortedTxn> {
        let b = bytes.get(..ENTRY_BYTES)?;
        let i64_at = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(v)
        };
        if i16::from_be_bytes([b[0], b[1]]) != ENTRY_VERSION {
            return None;
        }
        Some(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// Encodes `entries` as a whole `.txnindex` file.
pub fn encode_file(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for e in entries {
        out.extend_from_slice(&e.encode());
    }
    out
}

/// Decodes a whole `.txnindex` file: `None` when its length is not a multiple of
/// [`ENTRY_BYTES`] or an entry does not decode (the caller rebuilds it from the log).
pub fn decode_file(bytes: &[u8]) -> Option<Vec<AbortedTxn>> {
    if !bytes.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    bytes
        .chunks_exact(ENTRY_BYTES)
        .map(AbortedTxn::decode)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_entry_is_kafkas_34_bytes() {
        let e = AbortedTxn {
            producer_id: 1,
            first_offset: 2,
            last_offset: 3,
            last_stable_offset: 4,
        };
        let b = e.encode();
        assert_eq!(b.len(), 34);
        assert_eq!(&b[0..2], &[0, 0]);
        assert_eq!(&b[2..10], &1i64.to_be_bytes());
        assert_eq!(&b[26..34], &4i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&b), Some(e));
        let mut bad = b;
        bad[1] = 1;
        assert_eq!(AbortedTxn::decode(&bad), None);
        assert_eq!(decode_file(&b[..33]), None);
    }

    proptest! {
        #[test]
        fn files_round_trip(raw in proptest::collection::vec(any::<(i64, i64, i64, i64)>(), 0..20)) {
            let entries: Vec<AbortedTxn> = raw
                .into_iter()
                .map(|(p, f, l, s)| AbortedTxn { producer_id: p, first_offset: f, last_offset: l, last_stable_offset: s })
                .collect();
            prop_assert_eq!(decode_file(&encode_file(&entries)), Some(entries));
        }
    }
}
