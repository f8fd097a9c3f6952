//! Writes the seed corpus of the `schema_records` target (`fuzz/corpus/schema_records/`):
//! `_schemas` records in the Confluent Schema Registry's format, one per key type, with a
//! tombstone, references, a non-AVRO type, and the extra fields newer registries write. The
//! broker does not serve the registry yet, so these stand in for records read back from a log.
//! Run: `cargo run -p minikafka-fuzz-targets --example write_schema_seeds`.

use std::path::Path;

/// `[flags][key length: u16][key][value]`, the `schema_records` input layout.
fn record_input(key: &str, value: Option<&str>) -> Vec<u8> {
    let mut out = vec![u8::from(value.is_none())];
    let key_len = u16::try_from(key.len()).expect("a short seed key");
    out.extend_from_slice(&key_len.to_be_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(value.unwrap_or_default().as_bytes());
    out
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/schema_records");
    std::fs::create_dir_all(&dir).expect("corpus folder");
    let schema_key = r#"{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}"#;
    let seeds: [(&str, &str, Option<&str>); 11] = [
        (
            "schema-avro",
            schema_key,
            Some(
                r#"{"subject":"orders-value","version":1,"id":2,"schema":"{\"type\":\"record\",\"name\":\"Order\",\"fields\":[{\"name\":\"id\",\"type\":\"long\"}]}","deleted":false}"#,
            ),
        ),
        (
            "schema-same-as-seeded",
            r#"{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}"#,
            Some(r#"{"subject":"s","version":2,"id":1,"schema":"\"string\"","deleted":true}"#),
        ),
        (
            "schema-json-references",
            r#"{"keytype":"SCHEMA","subject":"users-value","version":3,"magic":1}"#,
            Some(
                r#"{"subject":"users-value","version":3,"id":7,"schemaType":"JSON","references":[{"name":"addr.json","subject":"s","version":1}],"schema":"{\"type\":\"object\"}","deleted":false}"#,
            ),
        ),
        (
            "schema-protobuf-newer-fields",
            schema_key,
            Some(
                r#"{"subject":"orders-value","version":1,"id":9,"md5":"AAAA","schemaType":"PROTOBUF","metadata":null,"ruleSet":null,"schema":"syntax = \"proto3\";\nmessage Order { int64 id = 1; }","deleted":false}"#,
            ),
        ),
        (
            "schema-tombstone",
            r#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#,
            None,
        ),
        (
            "config-global",
            r#"{"keytype":"CONFIG","subject":null,"magic":0}"#,
            Some(r#"{"compatibilityLevel":"FULL_TRANSITIVE"}"#),
        ),
        (
            "config-subject",
            r#"{"keytype":"CONFIG","subject":"s","magic":0}"#,
            Some(r#"{"compatibilityLevel":"NONE"}"#),
        ),
        (
            "mode-global",
            r#"{"keytype":"MODE","magic":0}"#,
            Some(r#"{"mode":"READONLY"}"#),
        ),
        (
            "delete-subject",
            r#"{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}"#,
            Some(r#"{"subject":"s","version":1}"#),
        ),
        (
            "clear-subject",
            r#"{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}"#,
            Some(r#"{"subject":"s"}"#),
        ),
        ("noop", r#"{"keytype":"NOOP","magic":0}"#, None),
    ];
    for (name, key, value) in seeds {
        std::fs::write(dir.join(name), record_input(key, value)).expect("seed written");
    }
}
