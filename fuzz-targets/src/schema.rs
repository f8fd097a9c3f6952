//! Target for the schema registry's `_schemas` records (`minikafka_schema::records`): keys and
//! values read back at startup, untrusted bytes (a damaged or foreign log) that must be
//! refused with an error, never a panic or an unbounded parse (I51).

use minikafka_schema::records::{RegistryKey, RegistryRecord};
use minikafka_schema::{Registry, VersionSpec};

use crate::input::Input;

/// A registered schema the replayed record can collide with (id 1, subject `s`, version 1).
const SEEDED_KEY: &[u8] = br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#;
const SEEDED_VALUE: &[u8] =
    br#"{"subject":"s","version":1,"id":1,"schema":"\"string\"","deleted":false}"#;

/// One `_schemas` record: `[flags: u8][key length: u16][key][value]`; flag bit 0 makes it a
/// tombstone (no value). Asserts that a key that decodes re-encodes to bytes that decode to
/// the same key, that a record that decodes re-encodes to the same record, and that replaying
/// it (twice: a log may repeat a key) into a registry holding one schema never panics and
/// leaves the getters answering.
pub fn schema_records(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let key_len = usize::from(input.u16());
    let rest = input.rest();
    let (key, value) = rest.split_at(key_len.min(rest.len()));
    let value = (flags & 1 == 0).then_some(value);

    if let Ok(decoded) = RegistryKey::decode(key) {
        assert_eq!(RegistryKey::decode(&decoded.encode()), Ok(decoded));
    }
    if let Ok(decoded) = RegistryRecord::decode(key, value) {
        let (key_again, value_again) = decoded.encode();
        assert_eq!(
            RegistryRecord::decode(&key_again, value_again.as_deref()),
            Ok(decoded)
        );
    }

    let mut registry = Registry::new();
    assert!(registry.replay(SEEDED_KEY, Some(SEEDED_VALUE)).is_ok());
    if registry.replay(key, value).is_ok() {
        let _ = registry.replay(key, value);
    }
    for subject in registry.subjects(true) {
        let _ = registry.versions(&subject, true);
        let _ = registry.subject_version(&subject, VersionSpec::Latest, true);
    }
    let _ = registry.schema_by_id(1);
}
