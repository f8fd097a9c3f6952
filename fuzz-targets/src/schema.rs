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

/// The registry's HTTP/JSON request path (`minikafka_schema::http` and `rest`): untrusted
/// bytes from any client on `schema.registry.listeners`. The input is one request as sent
/// (head, then body). Asserts that judging the head never panics and, for a complete head,
/// that routing it (writes run in memory against a registry holding one schema) answers with
/// a status the API uses and, except for the raw `/schema` reads, a JSON body; and that the
/// response encodes to an HTTP/1.1 response of the body's length.
pub fn schema_http(data: &[u8]) {
    use minikafka_schema::http::{encode_response, parse_head, ChunkedBody, HeadParse};
    use minikafka_schema::rest::handle_in_memory;

    let head = match parse_head(data) {
        HeadParse::Complete(head) => head,
        HeadParse::Refused(response) => {
            assert!(matches!(response.status, 400 | 413 | 431 | 501));
            return;
        }
        HeadParse::Incomplete => return,
    };
    let after = &data[head.head_bytes.min(data.len())..];
    // A chunked body (I128): decoding never keeps more than its limit nor uses more than it
    // was given, and a refusal is 400 or 413.
    let chunked_body;
    let body = if head.chunked {
        const LIMIT: usize = 4096;
        let mut chunks = ChunkedBody::new(LIMIT);
        match chunks.feed(after) {
            Ok((used, _)) => assert!(used <= after.len()),
            Err(response) => assert!(matches!(response.status, 400 | 413)),
        }
        chunked_body = chunks.into_body();
        assert!(chunked_body.len() <= LIMIT);
        &chunked_body[..]
    } else {
        &after[..head.content_length.min(after.len())]
    };

    let mut registry = Registry::new();
    assert!(registry.replay(SEEDED_KEY, Some(SEEDED_VALUE)).is_ok());
    let response = handle_in_memory(&mut registry, &head.method, &head.target, body);
    assert!(
        matches!(
            response.status,
            200 | 400 | 404 | 405 | 409 | 413 | 422 | 500
        ),
        "status {}",
        response.status
    );
    let raw_read = response.status == 200
        && head
            .target
            .split('?')
            .next()
            .is_some_and(|p| p.ends_with("/schema"));
    if !raw_read {
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&response.body);
        assert!(
            parsed.is_ok(),
            "not JSON: {:?}",
            String::from_utf8_lossy(&response.body)
        );
    }
    let encoded = encode_response(&response, head.keep_alive);
    assert!(encoded.starts_with(b"HTTP/1.1 "));
    assert!(encoded.ends_with(&response.body));
}
