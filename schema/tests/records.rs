//! The `_schemas` record codec against records written in the Confluent Schema Registry's
//! format (field order as its Jackson annotations give it), plus round trips and bad input (I51).

use minikafka_schema::records::{
    RecordError, RegistryKey, RegistryRecord, RegistryValue, SchemaValue, JSON_DEPTH_MAX,
    RECORD_BYTES_MAX,
};
use minikafka_schema::{CompatibilityLevel, Mode, SchemaReference, SchemaType};
use proptest::prelude::*;

/// (key, value) pairs as a Confluent registry writes them, and the record each means.
fn confluent_samples() -> Vec<(&'static str, Option<&'static str>, RegistryRecord)> {
    vec![
        (
            r#"{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}"#,
            Some(
                r#"{"subject":"orders-value","version":1,"id":1,"schemaType":"AVRO","schema":"\"string\"","deleted":false}"#,
            ),
            RegistryRecord {
                key: RegistryKey::Schema {
                    subject: "orders-value".into(),
                    version: 1,
                },
                value: Some(RegistryValue::Schema(SchemaValue {
                    subject: "orders-value".into(),
                    version: 1,
                    id: 1,
                    schema_type: SchemaType::Avro,
                    references: vec![],
                    schema: "\"string\"".into(),
                    deleted: false,
                })),
            },
        ),
        (
            r#"{"keytype":"SCHEMA","subject":"users-value","version":3,"magic":1}"#,
            Some(
                r#"{"subject":"users-value","version":3,"id":7,"schemaType":"JSON","references":[{"name":"addr.json","subject":"addr","version":2}],"schema":"{\"type\":\"object\"}","deleted":true}"#,
            ),
            RegistryRecord {
                key: RegistryKey::Schema {
                    subject: "users-value".into(),
                    version: 3,
                },
                value: Some(RegistryValue::Schema(SchemaValue {
                    subject: "users-value".into(),
                    version: 3,
                    id: 7,
                    schema_type: SchemaType::Json,
                    references: vec![SchemaReference {
                        name: "addr.json".into(),
                        subject: "addr".into(),
                        version: 2,
                    }],
                    schema: "{\"type\":\"object\"}".into(),
                    deleted: true,
                })),
            },
        ),
        (
            r#"{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}"#,
            None,
            RegistryRecord {
                key: RegistryKey::Schema {
                    subject: "orders-value".into(),
                    version: 2,
                },
                value: None,
            },
        ),
        (
            r#"{"keytype":"CONFIG","magic":0}"#,
            Some(r#"{"compatibilityLevel":"FULL_TRANSITIVE"}"#),
            RegistryRecord {
                key: RegistryKey::Config { subject: None },
                value: Some(RegistryValue::Config {
                    compatibility_level: Some(CompatibilityLevel::FullTransitive),
                }),
            },
        ),
        (
            r#"{"keytype":"CONFIG","subject":"orders-value","magic":0}"#,
            Some(r#"{"subject":"orders-value","compatibilityLevel":"NONE"}"#),
            RegistryRecord {
                key: RegistryKey::Config {
                    subject: Some("orders-value".into()),
                },
                value: Some(RegistryValue::Config {
                    compatibility_level: Some(CompatibilityLevel::None),
                }),
            },
        ),
        (
            r#"{"keytype":"MODE","magic":0}"#,
            Some(r#"{"mode":"READONLY"}"#),
            RegistryRecord {
                key: RegistryKey::Mode { subject: None },
                value: Some(RegistryValue::Mode {
                    mode: Mode::Readonly,
                }),
            },
        ),
        (
            r#"{"keytype":"MODE","subject":"legacy","magic":0}"#,
            Some(r#"{"subject":"legacy","mode":"IMPORT"}"#),
            RegistryRecord {
                key: RegistryKey::Mode {
                    subject: Some("legacy".into()),
                },
                value: Some(RegistryValue::Mode { mode: Mode::Import }),
            },
        ),
        (
            r#"{"keytype":"DELETE_SUBJECT","subject":"orders-value","magic":0}"#,
            Some(r#"{"subject":"orders-value","version":4}"#),
            RegistryRecord {
                key: RegistryKey::DeleteSubject {
                    subject: "orders-value".into(),
                },
                value: Some(RegistryValue::DeleteSubject {
                    subject: "orders-value".into(),
                    version: 4,
                }),
            },
        ),
        (
            r#"{"keytype":"CLEAR_SUBJECT","subject":"orders-value","magic":0}"#,
            Some(r#"{"subject":"orders-value"}"#),
            RegistryRecord {
                key: RegistryKey::ClearSubject {
                    subject: "orders-value".into(),
                },
                value: Some(RegistryValue::ClearSubject {
                    subject: "orders-value".into(),
                }),
            },
        ),
        (
            r#"{"keytype":"NOOP","magic":0}"#,
            None,
            RegistryRecord {
                key: RegistryKey::Noop,
                value: None,
            },
        ),
    ]
}

#[test]
fn confluent_records_decode_and_encode_byte_for_byte() {
    for (key, value, expected) in confluent_samples() {
        let decoded = RegistryRecord::decode(key.as_bytes(), value.map(str::as_bytes))
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(decoded, expected, "{key}");
        let (key_bytes, value_bytes) = expected.encode();
        assert_eq!(String::from_utf8(key_bytes).expect("utf8"), key);
        assert_eq!(
            value_bytes.map(|v| String::from_utf8(v).expect("utf8")),
            value.map(str::to_owned),
            "{key}"
        );
    }
}

#[test]
fn fields_from_other_registry_versions_are_read() {
    // Older registries wrote `"subject":null` in the global config key and field orders of
    // their own; newer ones add md5, metadata, ruleSet and an explicit AVRO schemaType.
    let record = RegistryRecord::decode(
        br#"{"magic":0,"subject":null,"keytype":"CONFIG"}"#,
        Some(br#"{"compatibilityLevel":"BACKWARD","alias":null,"normalize":true}"#),
    )
    .expect("decodes");
    assert_eq!(record.key, RegistryKey::Config { subject: None });
    let record = RegistryRecord::decode(
        br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#,
        Some(br#"{"deleted":false,"schema":"\"int\"","schemaType":"AVRO","md5":"abc","metadata":null,"ruleSet":null,"id":3,"version":1,"subject":"s"}"#),
    )
    .expect("decodes");
    let Some(RegistryValue::Schema(value)) = record.value else {
        panic!("a schema value");
    };
    assert_eq!((value.id, value.schema_type), (3, SchemaType::Avro));
    // Before Confluent 5.5 a schema value had no schemaType (AVRO) and a setting no subject.
    let record = RegistryRecord::decode(
        br#"{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}"#,
        Some(br#"{"subject":"s","version":2,"id":4,"schema":"\"long\"","deleted":false}"#),
    )
    .expect("decodes");
    let Some(RegistryValue::Schema(value)) = record.value else {
        panic!("a schema value");
    };
    assert_eq!(value.schema_type, SchemaType::Avro);
    let record = RegistryRecord::decode(
        br#"{"keytype":"MODE","subject":"s","magic":0}"#,
        Some(br#"{"mode":"READONLY"}"#),
    )
    .expect("decodes");
    assert_eq!(
        record.value,
        Some(RegistryValue::Mode {
            mode: Mode::Readonly
        })
    );
}

#[test]
fn bad_records_are_errors_not_panics() {
    let schema_key = br#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#;
    let cases: Vec<(&[u8], Option<&[u8]>)> = vec![
        (b"", None),
        (b"not json", None),
        (
            br#"{"keytype":"CONTEXT","tenant":"t","context":"c","magic":0}"#,
            None,
        ),
        (br#"{"keytype":"SCHEMA","subject":"s","magic":1}"#, None),
        (
            br#"{"keytype":"SCHEMA","subject":"s","version":0,"magic":1}"#,
            None,
        ),
        (br#"{"keytype":"DELETE_SUBJECT","magic":0}"#, None),
        (
            br#"{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}"#,
            None,
        ),
        (
            schema_key,
            Some(br#"{"subject":"other","version":1,"id":1,"schema":"x"}"#),
        ),
        (
            schema_key,
            Some(br#"{"subject":"s","version":2,"id":1,"schema":"x"}"#),
        ),
        (
            schema_key,
            Some(br#"{"subject":"s","version":1,"id":-1,"schema":"x"}"#),
        ),
        (
            schema_key,
            Some(br#"{"subject":"s","version":1,"id":1,"schema":"x","schemaType":"XML"}"#),
        ),
        (
            br#"{"keytype":"MODE","magic":0}"#,
            Some(br#"{"mode":"WRITEONLY"}"#),
        ),
        (
            br#"{"keytype":"CONFIG","magic":0}"#,
            Some(br#"{"compatibilityLevel":7}"#),
        ),
        (
            br#"{"keytype":"CONFIG","subject":"s","magic":0}"#,
            Some(br#"{"subject":"t","compatibilityLevel":"FULL"}"#),
        ),
        (
            br#"{"keytype":"MODE","magic":0}"#,
            Some(br#"{"subject":"t","mode":"IMPORT"}"#),
        ),
    ];
    for (key, value) in cases {
        assert!(
            RegistryRecord::decode(key, value).is_err(),
            "{:?} / {:?} decoded",
            String::from_utf8_lossy(key),
            value.map(String::from_utf8_lossy)
        );
    }
}

#[test]
fn decoding_is_bounded_in_size_and_depth() {
    let deep = format!(
        "{}{}",
        "[".repeat(JSON_DEPTH_MAX + 1),
        "]".repeat(JSON_DEPTH_MAX + 1)
    );
    assert_eq!(
        RegistryKey::decode(deep.as_bytes()),
        Err(RecordError::TooDeep)
    );
    // Brackets inside strings are text, not nesting.
    let in_string = format!(
        r#"{{"keytype":"SCHEMA","subject":"{}","version":1,"magic":1}}"#,
        "[".repeat(1000)
    );
    assert!(RegistryKey::decode(in_string.as_bytes()).is_ok());
    let huge = vec![b' '; RECORD_BYTES_MAX + 1];
    assert_eq!(
        RegistryKey::decode(&huge),
        Err(RecordError::TooLarge(RECORD_BYTES_MAX + 1))
    );
}

fn arb_subject() -> impl Strategy<Value = String> {
    "[a-z\\-\"\\\\é]{1,12}"
}

fn arb_record() -> impl Strategy<Value = RegistryRecord> {
    let schema = (
        arb_subject(),
        1..1000i32,
        0..i32::MAX,
        prop_oneof![
            Just(SchemaType::Avro),
            Just(SchemaType::Json),
            Just(SchemaType::Protobuf)
        ],
        proptest::collection::vec((arb_subject(), arb_subject(), 1..50i32), 0..3),
        ".{0,40}",
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(subject, version, id, schema_type, refs, schema, deleted, tombstone)| {
                RegistryRecord {
                    key: RegistryKey::Schema {
                        subject: subject.clone(),
                        version,
                    },
                    value: (!tombstone).then(|| {
                        RegistryValue::Schema(SchemaValue {
                            subject,
                            version,
                            id,
                            schema_type,
                            references: refs
                                .into_iter()
                                .map(|(name, subject, version)| SchemaReference {
                                    name,
                                    subject,
                                    version,
                                })
                                .collect(),
                            schema,
                            deleted,
                        })
                    }),
                }
            },
        );
    let config = (
        proptest::option::of(arb_subject()),
        proptest::option::of(proptest::sample::select(CompatibilityLevel::ALL.to_vec())),
    )
        .prop_map(|(subject, level)| RegistryRecord {
            key: RegistryKey::Config { subject },
            value: level.map(|level| RegistryValue::Config {
                compatibility_level: Some(level),
            }),
        });
    let mode = (
        proptest::option::of(arb_subject()),
        proptest::option::of(prop_oneof![
            Just(Mode::Readwrite),
            Just(Mode::Readonly),
            Just(Mode::Import)
        ]),
    )
        .prop_map(|(subject, mode)| RegistryRecord {
            key: RegistryKey::Mode { subject },
            value: mode.map(|mode| RegistryValue::Mode { mode }),
        });
    let delete = (arb_subject(), 1..100i32).prop_map(|(subject, version)| RegistryRecord {
        key: RegistryKey::DeleteSubject {
            subject: subject.clone(),
        },
        value: Some(RegistryValue::DeleteSubject { subject, version }),
    });
    let clear = arb_subject().prop_map(|subject| RegistryRecord {
        key: RegistryKey::ClearSubject {
            subject: subject.clone(),
        },
        value: Some(RegistryValue::ClearSubject { subject }),
    });
    prop_oneof![
        schema,
        config,
        mode,
        delete,
        clear,
        Just(RegistryRecord {
            key: RegistryKey::Noop,
            value: None
        })
    ]
}

proptest! {
    #[test]
    fn every_record_round_trips(record in arb_record()) {
        let (key, value) = record.encode();
        let decoded = RegistryRecord::decode(&key, value.as_deref());
        prop_assert_eq!(decoded, Ok(record));
    }

    #[test]
    fn arbitrary_bytes_never_panic(key in proptest::collection::vec(any::<u8>(), 0..200),
                                   value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200))) {
        let _ = RegistryRecord::decode(&key, value.as_deref());
    }
}
