//! One scenario per REST operation, at the machine level: every write goes through the
//! append-then-durable path of a test driver, and every scenario ends by replaying the log the
//! machine wrote into a fresh one and comparing states (I50).

mod support;

use minikafka_schema::records::RegistryRecord;
use minikafka_schema::{
    CompatibilityLevel, Mode, Registry, SchemaInput, SchemaReference, SchemaType, VersionSpec,
    WriteReply, WriteRequest,
};
use support::{avro, record, Harness};

const V1: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#;

fn code<T: std::fmt::Debug>(result: Result<T, minikafka_schema::RegistryError>) -> u32 {
    result.expect_err("an error").error_code()
}

#[test]
fn register_then_read_by_id_subject_version_and_latest() {
    let mut h = Harness::new();
    assert_eq!(h.register("users-value", V1), Ok((1, 1)));
    // The same schema, laid out differently: the same id and version, nothing appended.
    let log_len = h.log.len();
    let relaid =
        r#"{ "fields": [ {"type": "long", "name": "id"} ], "name": "User", "type": "record" }"#;
    assert_eq!(h.register("users-value", relaid), Ok((1, 1)));
    assert_eq!(h.log.len(), log_len);

    let by_id = h.registry.schema_by_id(1).expect("id 1");
    assert_eq!(
        (by_id.schema.as_str(), by_id.schema_type),
        (V1, SchemaType::Avro)
    );
    assert_eq!(code(h.registry.schema_by_id(2)), 40403);
    let latest = h
        .registry
        .subject_version("users-value", VersionSpec::Latest, false)
        .expect("latest");
    assert_eq!((latest.version, latest.id), (1, 1));
    assert_eq!(
        h.registry
            .subject_version("users-value", VersionSpec::Number(1), false),
        Ok(latest)
    );
    assert_eq!(
        code(
            h.registry
                .subject_version("users-value", VersionSpec::Number(2), false)
        ),
        40402
    );
    assert_eq!(
        code(
            h.registry
                .subject_version("nobody", VersionSpec::Latest, false)
        ),
        40401
    );
    assert_eq!(h.registry.subjects(false), vec!["users-value".to_owned()]);
    assert_eq!(h.registry.versions("users-value", false), Ok(vec![1]));
    assert_eq!(code(h.registry.versions("nobody", false)), 40401);
    h.assert_replay_matches();
}

#[test]
fn ids_are_global_one_per_canonical_schema() {
    let mut h = Harness::new();
    assert_eq!(h.register("a-value", V1), Ok((1, 1)));
    assert_eq!(
        h.register("b-value", V1),
        Ok((1, 1)),
        "I52: same schema, same id"
    );
    let other = record("Order", &[("id", "string", None)]);
    assert_eq!(h.register("c-value", &other), Ok((2, 1)));
    assert_eq!(
        h.registry.versions_of_id(1, false),
        vec![("a-value".to_owned(), 1), ("b-value".to_owned(), 1)]
    );
    // The same text as another type is another schema.
    let as_json = SchemaInput {
        schema: V1.into(),
        schema_type: SchemaType::Json,
        references: vec![],
    };
    assert_eq!(h.register_input("d-value", as_json), Ok((3, 1)));
    h.assert_replay_matches();
}

#[test]
fn lookup_finds_the_version_holding_a_schema() {
    let mut h = Harness::new();
    h.register("users-value", V1).expect("v1");
    let v2 = record(
        "User",
        &[("id", "long", None), ("name", "string", Some("\"\""))],
    );
    h.register("users-value", &v2).expect("v2");
    let found = h
        .registry
        .lookup("users-value", &avro(V1), false)
        .expect("found");
    assert_eq!((found.version, found.id), (1, 1));
    let unknown = record("User", &[("id", "int", None)]);
    assert_eq!(
        code(h.registry.lookup("users-value", &avro(&unknown), false)),
        40403
    );
    assert_eq!(code(h.registry.lookup("nobody", &avro(V1), false)), 40401);
    assert_eq!(
        code(h.registry.lookup("users-value", &avro("{"), false)),
        42201
    );
}

#[test]
fn backward_incompatible_evolution_is_refused_and_compatible_accepted() {
    let mut h = Harness::new();
    h.register("users-value", V1).expect("v1");
    // A new field without a default cannot be read from v1 data: 409.
    let no_default = record("User", &[("id", "long", None), ("email", "string", None)]);
    assert_eq!(code(h.register("users-value", &no_default)), 409);
    // With a default it can.
    let with_default = record(
        "User",
        &[("id", "long", None), ("email", "string", Some("\"\""))],
    );
    assert_eq!(h.register("users-value", &with_default), Ok((2, 2)));
    // Removing a field is backward-compatible (the reader ignores it).
    let removed = record("User", &[("email", "string", Some("\"\""))]);
    assert_eq!(h.register("users-value", &removed), Ok((3, 3)));
    // An invalid schema is 42201, before any compatibility check.
    assert_eq!(
        code(h.register("users-value", r#"{"type":"record","name":"User"}"#)),
        42201
    );
    h.assert_replay_matches();
}

#[test]
fn transitive_levels_check_every_live_version() {
    let mut h = Harness::new();
    let set_level = |h: &mut Harness, level| {
        h.write(WriteRequest::SetConfig {
            subject: Some("s".into()),
            level,
        })
        .expect("config set")
    };
    h.register("s", &record("R", &[("a", "long", None)]))
        .expect("v1");
    h.register(
        "s",
        &record("R", &[("a", "long", None), ("b", "long", Some("0"))]),
    )
    .expect("v2");
    // v3 drops `a` (a reader ignores written fields it lacks) and needs `b` without a default:
    // v2 data has `b`, v1 data does not.
    let v3 = record("R", &[("b", "long", None)]);
    set_level(&mut h, CompatibilityLevel::BackwardTransitive);
    assert_eq!(code(h.register("s", &v3)), 409);
    set_level(&mut h, CompatibilityLevel::Backward);
    assert_eq!(h.register("s", &v3), Ok((3, 3)));
    h.assert_replay_matches();
}

#[test]
fn forward_full_and_none_levels() {
    let mut h = Harness::new();
    h.write(WriteRequest::SetConfig {
        subject: None,
        level: CompatibilityLevel::Forward,
    })
    .expect("global level");
    h.register("s", V1).expect("v1");
    // Forward: v1 readers must read the new data. Adding a field without default is fine,
    // removing `id` (which v1 needs, without default) is not.
    let added = record("User", &[("id", "long", None), ("x", "int", None)]);
    assert_eq!(h.register("s", &added), Ok((2, 2)));
    let removed_id = record("User", &[("x", "int", None)]);
    assert_eq!(code(h.register("s", &removed_id)), 409);
    // Full: both directions; a field added with a default passes.
    h.write(WriteRequest::SetConfig {
        subject: Some("s".into()),
        level: CompatibilityLevel::Full,
    })
    .expect("subject level");
    assert_eq!(
        h.registry.compatibility_level(Some("s")),
        CompatibilityLevel::Full
    );
    assert_eq!(
        h.registry.compatibility_level(None),
        CompatibilityLevel::Forward
    );
    let with_default = record(
        "User",
        &[
            ("id", "long", None),
            ("x", "int", None),
            ("y", "int", Some("1")),
        ],
    );
    assert_eq!(h.register("s", &with_default), Ok((3, 3)));
    assert_eq!(code(h.register("s", "\"string\"")), 409);
    // None: anything goes.
    h.write(WriteRequest::SetConfig {
        subject: Some("s".into()),
        level: CompatibilityLevel::None,
    })
    .expect("none");
    assert_eq!(h.register("s", "\"string\""), Ok((4, 4)));
    h.assert_replay_matches();
}

#[test]
fn test_compatibility_answers_without_writing() {
    let mut h = Harness::new();
    h.register("s", V1).expect("v1");
    let log_len = h.log.len();
    let bad = avro(&record(
        "User",
        &[("id", "long", None), ("e", "string", None)],
    ));
    let good = avro(&record(
        "User",
        &[("id", "long", None), ("e", "string", Some("\"\""))],
    ));
    assert!(h
        .registry
        .test_compatibility("s", None, &bad)
        .expect("checked")
        .is_err());
    assert_eq!(
        h.registry
            .test_compatibility("s", Some(VersionSpec::Latest), &good),
        Ok(Ok(()))
    );
    assert_eq!(
        code(
            h.registry
                .test_compatibility("s", Some(VersionSpec::Number(9)), &good)
        ),
        40402
    );
    assert_eq!(h.log.len(), log_len);
}

#[test]
fn versions_are_soft_deleted_before_permanently() {
    let mut h = Harness::new();
    h.register("s", V1).expect("v1");
    let v2 = record("User", &[("id", "long", None), ("n", "int", Some("0"))]);
    h.register("s", &v2).expect("v2");
    let delete = |h: &mut Harness, version, permanent| {
        h.write(WriteRequest::DeleteVersion {
            subject: "s".into(),
            version,
            permanent,
        })
    };
    assert_eq!(
        code(delete(&mut h, VersionSpec::Number(2), true)),
        40407,
        "I55"
    );
    assert_eq!(
        delete(&mut h, VersionSpec::Latest, false),
        Ok(WriteReply::VersionDeleted(2))
    );
    assert_eq!(code(delete(&mut h, VersionSpec::Number(2), false)), 40406);
    assert_eq!(code(delete(&mut h, VersionSpec::Number(7), false)), 40402);
    assert_eq!(h.registry.versions("s", false), Ok(vec![1]));
    assert_eq!(h.registry.versions("s", true), Ok(vec![1, 2]));
    assert_eq!(
        code(
            h.registry
                .subject_version("s", VersionSpec::Number(2), false)
        ),
        40402
    );
    assert!(
        h.registry
            .subject_version("s", VersionSpec::Number(2), true)
            .expect("seen")
            .deleted
    );
    // The id still resolves while a soft-deleted version holds it.
    assert!(h.registry.schema_by_id(2).is_ok());
    assert_eq!(
        delete(&mut h, VersionSpec::Number(2), true),
        Ok(WriteReply::VersionDeleted(2))
    );
    assert_eq!(h.registry.versions("s", true), Ok(vec![1]));
    assert_eq!(code(h.registry.schema_by_id(2)), 40403);
    // The next version follows the highest remaining one; the id is not reused (I53).
    let v3 = record("User", &[("id", "long", None), ("m", "int", Some("0"))]);
    assert_eq!(h.register("s", &v3), Ok((3, 2)));
    h.assert_replay_matches();
}

#[test]
fn subjects_are_soft_deleted_before_permanently() {
    let mut h = Harness::new();
    h.register("s", V1).expect("v1");
    h.write(WriteRequest::SetConfig {
        subject: Some("s".into()),
        level: CompatibilityLevel::None,
    })
    .expect("config");
    let delete = |h: &mut Harness, permanent| {
        h.write(WriteRequest::DeleteSubject {
            subject: "s".into(),
            permanent,
        })
    };
    assert_eq!(code(delete(&mut h, true)), 40405, "I55");
    assert_eq!(
        delete(&mut h, false),
        Ok(WriteReply::SubjectDeleted(vec![1]))
    );
    assert_eq!(code(delete(&mut h, false)), 40404);
    assert!(h.registry.subjects(false).is_empty());
    assert_eq!(h.registry.subjects(true), vec!["s".to_owned()]);
    assert_eq!(code(h.registry.versions("s", false)), 40401);
    // A soft delete keeps the subject's own config; the permanent one removes it, as Confluent.
    assert_eq!(
        h.registry.subject_compatibility_level("s"),
        Ok(CompatibilityLevel::None)
    );
    h.assert_replay_matches();
    assert_eq!(
        delete(&mut h, true),
        Ok(WriteReply::SubjectDeleted(vec![1]))
    );
    assert!(h.registry.subjects(true).is_empty());
    assert_eq!(code(h.registry.subject_compatibility_level("s")), 40408);
    assert_eq!(code(delete(&mut h, false)), 40401);
    // Re-registered, the subject starts again at version 1.
    assert_eq!(h.register("s", V1), Ok((2, 1)));
    h.assert_replay_matches();
}

#[test]
fn config_global_and_per_subject() {
    let mut h = Harness::new();
    assert_eq!(
        h.registry.compatibility_level(None),
        CompatibilityLevel::Backward
    );
    assert_eq!(
        h.write(WriteRequest::SetConfig {
            subject: None,
            level: CompatibilityLevel::FullTransitive
        }),
        Ok(WriteReply::ConfigSet(CompatibilityLevel::FullTransitive))
    );
    assert_eq!(
        h.registry.compatibility_level(Some("any")),
        CompatibilityLevel::FullTransitive
    );
    assert_eq!(code(h.registry.subject_compatibility_level("any")), 40408);
    assert_eq!(
        code(h.write(WriteRequest::DeleteConfig {
            subject: Some("any".into())
        })),
        40408
    );
    h.write(WriteRequest::SetConfig {
        subject: Some("any".into()),
        level: CompatibilityLevel::Forward,
    })
    .expect("subject");
    assert_eq!(
        h.registry.subject_compatibility_level("any"),
        Ok(CompatibilityLevel::Forward)
    );
    assert_eq!(
        h.write(WriteRequest::DeleteConfig {
            subject: Some("any".into())
        }),
        Ok(WriteReply::ConfigDeleted(CompatibilityLevel::Forward))
    );
    assert_eq!(
        h.write(WriteRequest::DeleteConfig { subject: None }),
        Ok(WriteReply::ConfigDeleted(
            CompatibilityLevel::FullTransitive
        ))
    );
    assert_eq!(
        h.registry.compatibility_level(None),
        CompatibilityLevel::Backward
    );
    assert_eq!(
        CompatibilityLevel::parse("full_transitive"),
        Ok(CompatibilityLevel::FullTransitive)
    );
    assert_eq!(code(CompatibilityLevel::parse("SIDEWAYS")), 42203);
    h.assert_replay_matches();
}

#[test]
fn modes_readonly_and_import() {
    let mut h = Harness::new();
    h.write(WriteRequest::SetMode {
        subject: None,
        mode: Mode::Readonly,
        force: false,
    })
    .expect("readonly");
    assert_eq!(code(h.register("s", V1)), 42205);
    // A subject may be opened on its own.
    h.write(WriteRequest::SetMode {
        subject: Some("s".into()),
        mode: Mode::Readwrite,
        force: false,
    })
    .expect("subject readwrite");
    assert_eq!(h.register("s", V1), Ok((1, 1)));
    assert_eq!(h.registry.subject_mode("s"), Ok(Mode::Readwrite));
    assert_eq!(code(h.registry.subject_mode("t")), 40409);
    assert_eq!(
        h.write(WriteRequest::DeleteMode { subject: None }),
        Ok(WriteReply::ModeDeleted(Mode::Readonly))
    );

    // An explicit id is refused outside IMPORT; IMPORT over existing subjects needs force.
    let import = |id, version| WriteRequest::Register {
        subject: "imported".into(),
        input: avro("\"string\""),
        id: Some(id),
        version: Some(version),
    };
    assert_eq!(code(h.write(import(100, 5))), 42205);
    let set_import = |force| WriteRequest::SetMode {
        subject: None,
        mode: Mode::Import,
        force,
    };
    assert_eq!(code(h.write(set_import(false))), 42205);
    h.write(set_import(true)).expect("forced import");
    assert_eq!(
        h.write(import(100, 5)),
        Ok(WriteReply::Registered {
            id: 100,
            version: 5
        })
    );
    // Id 1 is taken by another schema.
    assert_eq!(code(h.write(import(1, 6))), 42205);
    assert_eq!(code(Mode::parse("WRITEONLY")), 42204);
    h.write(WriteRequest::DeleteMode { subject: None })
        .expect("back to readwrite");
    // New ids continue above the imported one (I53).
    assert_eq!(
        h.register("t", &record("T", &[("a", "int", None)])),
        Ok((101, 1))
    );
    h.assert_replay_matches();
}

#[test]
fn references_resolve_and_protect_what_they_reference() {
    let mut h = Harness::new();
    let address = record("Address", &[("street", "string", None)]);
    assert_eq!(h.register("address", &address), Ok((1, 1)));
    let user = r#"{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}"#;
    let reference = SchemaReference {
        name: "Address".into(),
        subject: "address".into(),
        version: 1,
    };
    let with_ref = SchemaInput {
        schema: user.into(),
        schema_type: SchemaType::Avro,
        references: vec![reference.clone()],
    };
    assert_eq!(
        h.register_input("users-value", with_ref.clone()),
        Ok((2, 1))
    );
    assert_eq!(
        h.registry.schema_by_id(2).expect("2").references,
        vec![reference]
    );
    // Without the reference the name does not resolve; a dangling reference neither.
    assert_eq!(code(h.register("other", user)), 42201);
    let dangling = SchemaInput {
        references: vec![SchemaReference {
            name: "Address".into(),
            subject: "address".into(),
            version: 9,
        }],
        ..with_ref
    };
    assert_eq!(code(h.register_input("other", dangling)), 42201);
    // The referenced version cannot go while a live schema refers to it.
    let delete_address = WriteRequest::DeleteVersion {
        subject: "address".into(),
        version: VersionSpec::Number(1),
        permanent: false,
    };
    assert_eq!(code(h.write(delete_address.clone())), 42206);
    h.write(WriteRequest::DeleteSubject {
        subject: "users-value".into(),
        permanent: false,
    })
    .expect("referrer deleted");
    assert_eq!(h.write(delete_address), Ok(WriteReply::VersionDeleted(1)));
    h.assert_replay_matches();
}

#[test]
fn a_failed_append_answers_50001_and_changes_nothing() {
    let mut registry = Registry::new();
    let write = |subject: &str| WriteRequest::Register {
        subject: subject.into(),
        input: avro(V1),
        id: None,
        version: None,
    };
    registry.handle_write(1, write("a"));
    registry.handle_write(2, write("b"));
    let first = registry.poll_append().expect("append for 1");
    assert_eq!(first.request, 1);
    // I54: the second write waits for the first; nothing is answered before durability.
    assert!(registry.poll_append().is_none());
    assert!(registry.poll_reply().is_none());
    registry.handle_append_done(1, Err("disk full".into()));
    let (request, reply) = registry.poll_reply().expect("reply 1");
    assert_eq!(
        (request, reply.map_err(|e| e.error_code())),
        (1, Err(50001))
    );
    assert!(registry.subjects(true).is_empty());
    // The queued write goes on, with the id the failed one did not take.
    let second = registry.poll_append().expect("append for 2");
    assert_eq!(second.request, 2);
    registry.handle_append_done(2, Ok(()));
    assert_eq!(
        registry.poll_reply(),
        Some((2, Ok(WriteReply::Registered { id: 1, version: 1 })))
    );
}

#[test]
fn replay_skips_records_it_cannot_use() {
    let mut h = Harness::new();
    h.register("s", V1).expect("v1");
    let mut fresh = Registry::new();
    for (key, value) in &h.log {
        fresh.replay(key, value.as_deref()).expect("replays");
    }
    assert!(fresh.replay(b"garbage", None).is_err());
    assert!(fresh
        .replay(
            br#"{"keytype":"CONTEXT","tenant":"t","context":"c","magic":0}"#,
            Some(b"{}")
        )
        .is_err());
    // Id 1 bound to another schema contradicts the state and is refused (I52).
    let conflicting = RegistryRecord::decode(
        br#"{"keytype":"SCHEMA","subject":"t","version":1,"magic":1}"#,
        Some(br#"{"subject":"t","version":1,"id":1,"schema":"\"int\"","deleted":false}"#),
    )
    .expect("decodes");
    let (key, value) = conflicting.encode();
    assert!(fresh.replay(&key, value.as_deref()).is_err());
    assert_eq!(fresh.state(), h.registry.state());
}

#[test]
fn error_codes_map_to_http_statuses() {
    assert_eq!(code(VersionSpec::parse("0")), 42202);
    assert_eq!(code(VersionSpec::parse("abc")), 42202);
    assert_eq!(VersionSpec::parse("latest"), Ok(VersionSpec::Latest));
    assert_eq!(VersionSpec::parse("-1"), Ok(VersionSpec::Latest));
    let error = minikafka_schema::RegistryError::SubjectNotFound("s".into());
    assert_eq!((error.error_code(), error.http_status()), (40401, 404));
    let error = minikafka_schema::RegistryError::Incompatible {
        subject: "s".into(),
        reason: String::new(),
    };
    assert_eq!((error.error_code(), error.http_status()), (409, 409));
    assert_eq!(code(SchemaType::parse("XML")), 42201);
}

#[test]
fn json_and_protobuf_schemas_are_identified_and_checked() {
    let mut h = Harness::new();
    let input = |schema_type, schema: &str| SchemaInput {
        schema: schema.into(),
        schema_type,
        references: vec![],
    };
    let proto_v1 = "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; }\n";
    assert_eq!(
        h.register_input("orders-value", input(SchemaType::Protobuf, proto_v1)),
        Ok((1, 1))
    );
    let commented = "syntax = \"proto3\";\n// orders\npackage shop;\nmessage Order {\n  int64 id = 1; // key\n}";
    assert_eq!(
        h.register_input("orders-value", input(SchemaType::Protobuf, commented)),
        Ok((1, 1))
    );
    let changed_kind = "syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; }";
    assert_eq!(
        code(h.register_input("orders-value", input(SchemaType::Protobuf, changed_kind))),
        409
    );
    let added =
        "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; string note = 2; }";
    assert_eq!(
        h.register_input("orders-value", input(SchemaType::Protobuf, added)),
        Ok((2, 2))
    );
    assert_eq!(
        code(h.register_input("orders-value", input(SchemaType::Protobuf, "message {"))),
        42201
    );

    let json_v1 = r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#;
    assert_eq!(
        h.register_input("n-value", input(SchemaType::Json, json_v1)),
        Ok((3, 1))
    );
    let required = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
    assert_eq!(
        code(h.register_input("n-value", input(SchemaType::Json, required))),
        409
    );
    // A type change across formats is refused under any level but NONE.
    assert_eq!(
        code(h.register_input("n-value", input(SchemaType::Avro, "\"long\""))),
        409
    );
    h.assert_replay_matches();
}

#[test]
fn a_write_whose_record_could_not_be_read_back_is_refused() {
    // A control character is six bytes in the record's JSON (`\u0001`): a `.proto` text within
    // the text limit, with such a comment, makes a record over the decode limit (I51), which
    // replay would refuse, losing the write at the next start.
    let mut h = Harness::new();
    let comment = "\u{1}".repeat(1_500_000);
    let input = SchemaInput {
        schema: format!("syntax = \"proto3\";\n// {comment}\nmessage A {{ int64 id = 1; }}\n"),
        schema_type: SchemaType::Protobuf,
        references: vec![],
    };
    assert!(input.schema.len() < minikafka_schema::format::SCHEMA_TEXT_BYTES_MAX);
    // Control characters in a comment parse: only the size refuses the long one.
    let short = SchemaInput {
        schema: input.schema.replace(&comment, "\u{1}\u{1}"),
        ..input.clone()
    };
    assert_eq!(code(h.register_input("big", input)), 42201);
    assert!(h.log.is_empty());
    assert_eq!(h.register_input("ctl", short), Ok((1, 1)));
    let log_len = h.log.len();
    let huge_subject = "s".repeat(minikafka_schema::records::RECORD_BYTES_MAX);
    assert_eq!(
        code(h.write(WriteRequest::SetConfig {
            subject: Some(huge_subject),
            level: CompatibilityLevel::Full,
        })),
        42205
    );
    assert_eq!(h.log.len(), log_len);
}
