//! Target for the transaction coordinator's records: `__transaction_state` keys and values
//! read back at startup (`core::txn::records`), untrusted bytes (a damaged log) that must be
//! refused with an error, never a panic or an allocation by a declared count (I10, I38).

use minikafka_core::txn::records::{TxnLogKey, TxnLogValue};
use minikafka_core::txn::{Coordinator, TxnConfig};

use crate::input::Input;

/// One `__transaction_state` record: `[flags: u8][key length: u16][key][value]`; flag bit 0
/// makes it a tombstone (no value). Asserts that a key or value that decodes re-encodes (at
/// the version it was read at) to bytes that decode to the same value, and that replaying
/// the record into a coordinator and ending its load (which writes the markers of a prepared
/// transaction) never panics.
pub fn txn_records(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let key_len = usize::from(input.u16());
    let rest = input.rest();
    let (key, value) = rest.split_at(key_len.min(rest.len()));
    let value = (flags & 1 == 0).then_some(value);

    if let Ok(decoded) = TxnLogKey::decode(key) {
        assert_eq!(TxnLogKey::decode(&decoded.encode()), Ok(decoded));
    }
    if let Some(value) = value {
        if let Ok(decoded) = TxnLogValue::decode(value) {
            let version = i16::from_be_bytes([value[0], value[1]]);
            let again = decoded.encode_version(version);
            assert_eq!(TxnLogValue::decode(&again), Ok(decoded));
        }
    }
    let mut coordinator = Coordinator::new(TxnConfig::default(), 0);
    if coordinator.replay(key, value).is_ok() {
        // Replay the same record twice (a log may repeat a key), then end the load.
        let _ = coordinator.replay(key, value);
    }
    coordinator.handle_loaded(0);
    while coordinator.poll_append().is_some() {}
    while coordinator.poll_marker().is_some() {}
    coordinator.handle_timeout(i64::MAX);
    while coordinator.poll_append().is_some() {}
}

/// The partition side of transactions, on untrusted bytes: `[selector: u8][rest]`. Selector
/// bit 0 clear: `rest` is one batch read back from a segment (recovery decodes a control
/// batch's marker, `core::control_batch`): decoding never panics, and a marker that decodes
/// re-encodes to a batch that decodes to it. Bit 0 set: `rest` is a `.txnindex` file read
/// back at open (`core::txn_index`): a file that decodes re-encodes to the same bytes, and
/// its entries fed to a tracker (`core::partition::txn`) as aborted ranges answer every
/// range query within bounds without panicking (I10: no allocation by a declared count).
pub fn txn_data(data: &[u8]) {
    use minikafka_core::control_batch::{decode_marker, encode_marker};
    use minikafka_core::partition::txn::TxnTracker;
    use minikafka_core::txn_index::{decode_file, encode_file};
    use minikafka_core::types::Offset;

    let mut input = Input::new(data);
    let selector = input.u8();
    let rest = input.rest();
    if selector & 1 == 0 {
        if let Ok(marker) = decode_marker(rest) {
            assert_eq!(decode_marker(&encode_marker(&marker, 0)), Ok(marker));
        }
        return;
    }
    let Some(entries) = decode_file(rest) else {
        return;
    };
    assert_eq!(encode_file(&entries), rest);
    let mut tracker = TxnTracker::new();
    tracker.set_aborted(entries.clone());
    let probes = entries.iter().take(16);
    for e in probes {
        for a in tracker.aborted_in(Offset(e.first_offset), Offset(e.last_offset)) {
            assert!(a.last_offset >= e.first_offset && a.first_offset < e.last_offset);
        }
    }
    tracker.drop_below(Offset(entries.first().map_or(0, |e| e.last_offset)));
}
