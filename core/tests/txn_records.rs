//! Property tests of the `__transaction_state` record codec (`core::txn::records`):
//! - round trip: any value encodes at version 0 and 1 and decodes to itself (version 0
//!   without the KIP-890 tagged fields, which read back as their defaults);
//! - hostile input (I10, I38): random bytes, and valid records with bytes flipped,
//!   truncated or spliced, decode to an error or to a value that round-trips — never a
//!   panic; a coordinator replaying them never panics either.

use minikafka_core::txn::records::{TopicPartitions, TxnLogKey, TxnLogValue};
use minikafka_core::txn::{Coordinator, TxnConfig, TxnState};
use proptest::prelude::*;

fn state() -> impl Strategy<Value = TxnState> {
    prop::sample::select(TxnState::ALL.to_vec())
}

fn value() -> impl Strategy<Value = TxnLogValue> {
    let topics = prop::collection::vec(
        ("[a-z_.-]{0,12}", prop::collection::vec(any::<i32>(), 0..5))
            .prop_map(|(topic, partitions)| TopicPartitions { topic, partitions }),
        0..4,
    );
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i16>()),
        (any::<i32>(), state(), prop::option::of(topics)),
        (any::<i64>(), any::<i64>(), any::<i16>()),
    )
        .prop_map(
            |(
                (producer_id, previous_producer_id, next_producer_id, producer_epoch),
                (timeout_ms, state, partitions),
                (last_update_ms, start_ms, client_transaction_version),
            )| TxnLogValue {
                producer_id,
                previous_producer_id,
                next_producer_id,
                producer_epoch,
                timeout_ms,
                state,
                partitions,
                last_update_ms,
                start_ms,
                client_transaction_version,
            },
        )
}

/// A valid encoding with damage: each `(position, byte)` overwrites one byte, then the
/// record is cut at `cut` (a fraction of its length).
fn damaged(bytes: &[u8], edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (at, b) in edits {
        if !out.is_empty() {
            let i = at % out.len();
            out[i] = *b;
        }
    }
    if let Some(cut) = cut {
        out.truncate(cut % (out.len() + 1));
    }
    out
}

fn decode_is_safe(bytes: &[u8]) {
    if let Ok(v) = TxnLogValue::decode(bytes) {
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        assert_eq!(TxnLogValue::decode(&v.encode_version(version)), Ok(v));
    }
    if let Ok(k) = TxnLogKey::decode(bytes) {
        assert_eq!(TxnLogKey::decode(&k.encode()), Ok(k));
    }
    let mut c = Coordinator::new(TxnConfig::default(), 0);
    let key = TxnLogKey {
        transactional_id: "t".into(),
    }
    .encode();
    let _ = c.replay(&key, Some(bytes));
    let _ = c.replay(bytes, None);
    c.handle_loaded(0);
    while c.poll_marker().is_some() {}
    while c.poll_append().is_some() {}
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn values_round_trip_at_both_versions(v in value()) {
        prop_assert_eq!(TxnLogValue::decode(&v.encode()), Ok(v.clone()));
        let mut v0 = v.clone();
        v0.previous_producer_id = -1;
        v0.next_producer_id = -1;
        v0.client_transaction_version = 0;
        prop_assert_eq!(TxnLogValue::decode(&v.encode_version(0)), Ok(v0));
    }

    #[test]
    fn keys_round_trip(id in "\\PC{0,40}") {
        let key = TxnLogKey { transactional_id: id };
        prop_assert_eq!(TxnLogKey::decode(&key.encode()), Ok(key));
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        decode_is_safe(&bytes);
    }

    #[test]
    fn damaged_records_never_panic(
        v in value(),
        version in 0i16..2,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in prop::option::of(any::<usize>()),
    ) {
        decode_is_safe(&damaged(&v.encode_version(version), &edits, cut));
    }
}
