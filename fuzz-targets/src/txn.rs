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
