//! Property: any sequence of registrations, deletes, config and mode changes, driven through
//! the machine, leaves a `_schemas` log whose replay into a fresh machine rebuilds the same
//! state (I50); and ids stay one per canonical schema across subjects (I52) and only grow (I53).

mod support;

use minikafka_schema::{CompatibilityLevel, Mode, VersionSpec, WriteRequest};
use proptest::prelude::*;
use support::{avro, record, Harness};

const SUBJECTS: [&str; 3] = ["a", "b", "c"];

/// A small pool of schemas, some compatible with each other, some not, some laid out twice.
fn schema(index: usize) -> String {
    match index {
        0 => record("R", &[("x", "long", None)]),
        1 => record("R", &[("x", "long", None), ("y", "int", Some("0"))]),
        2 => record("R", &[("y", "int", None)]),
        3 => r#"{"fields":[{"type":"long","name":"x"}],"type":"record","name":"R"}"#.into(),
        4 => "\"string\"".into(),
        _ => record("S", &[("z", "string", Some("\"\""))]),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Register(usize, usize),
    DeleteVersion(usize, i32, bool),
    DeleteSubject(usize, bool),
    SetLevel(Option<usize>, usize),
    SetMode(usize, usize),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..6usize).prop_map(|(s, i)| Op::Register(s, i)),
        2 => (0..3usize, 0..5i32, any::<bool>()).prop_map(|(s, v, p)| Op::DeleteVersion(s, v, p)),
        1 => (0..3usize, any::<bool>()).prop_map(|(s, p)| Op::DeleteSubject(s, p)),
        1 => (proptest::option::of(0..3usize), 0..7usize).prop_map(|(s, l)| Op::SetLevel(s, l)),
        1 => (0..3usize, 0..2usize).prop_map(|(s, m)| Op::SetMode(s, m)),
    ]
}

fn to_write(op: &Op) -> WriteRequest {
    match op {
        Op::Register(s, i) => WriteRequest::Register {
            subject: SUBJECTS[*s].into(),
            input: avro(&schema(*i)),
            id: None,
            version: None,
        },
        Op::DeleteVersion(s, v, permanent) => WriteRequest::DeleteVersion {
            subject: SUBJECTS[*s].into(),
            version: if *v == 0 {
                VersionSpec::Latest
            } else {
                VersionSpec::Number(*v)
            },
            permanent: *permanent,
        },
        Op::DeleteSubject(s, permanent) => WriteRequest::DeleteSubject {
            subject: SUBJECTS[*s].into(),
            permanent: *permanent,
        },
        Op::SetLevel(s, l) => WriteRequest::SetConfig {
            subject: s.map(|s| SUBJECTS[s].to_owned()),
            level: CompatibilityLevel::ALL[*l],
        },
        Op::SetMode(s, m) => WriteRequest::SetMode {
            subject: Some(SUBJECTS[*s].into()),
            mode: [Mode::Readwrite, Mode::Readonly][*m],
            force: false,
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn replaying_the_log_rebuilds_the_state(ops in proptest::collection::vec(arb_op(), 1..40)) {
        let mut h = Harness::new();
        let mut max_id_seen = 0;
        for op in &ops {
            let reply = h.write(to_write(op));
            if let Ok(minikafka_schema::WriteReply::Registered { id, .. }) = reply {
                prop_assert!(id >= 1);
                max_id_seen = max_id_seen.max(id);
            }
            // I52: a canonical schema has one id under every subject that holds it live.
            for index in 0..6 {
                let input = avro(&schema(index));
                let ids: Vec<i32> = SUBJECTS
                    .iter()
                    .filter_map(|s| h.registry.lookup(s, &input, false).ok())
                    .map(|found| found.id)
                    .collect();
                prop_assert!(ids.windows(2).all(|w| w[0] == w[1]), "ids {:?} for schema {}", ids, index);
            }
        }
        let replayed = h.replayed();
        prop_assert_eq!(replayed.state(), h.registry.state());
        // The getters agree too, not only the internals.
        prop_assert_eq!(replayed.subjects(true), h.registry.subjects(true));
        for subject in SUBJECTS {
            prop_assert_eq!(replayed.versions(subject, true), h.registry.versions(subject, true));
            prop_assert_eq!(replayed.compatibility_level(Some(subject)), h.registry.compatibility_level(Some(subject)));
            prop_assert_eq!(replayed.mode(Some(subject)), h.registry.mode(Some(subject)));
        }
    }
}
