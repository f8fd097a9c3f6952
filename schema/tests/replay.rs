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

/// Which schemas of the pool are the same canonical schema (3 is 0 laid out differently).
const CANONICAL_CLASS: [usize; 6] = [0, 1, 2, 0, 4, 5];

/// A plain model of subjects, versions, soft deletes and ids, with compatibility off (level
/// NONE), so every refusal it predicts comes from the delete rules (I55) alone.
#[derive(Default)]
struct Model {
    /// subject -> version -> (canonical class, deleted)
    subjects: std::collections::BTreeMap<usize, std::collections::BTreeMap<i32, (usize, bool)>>,
    max_id: i32,
    ids: std::collections::HashMap<usize, i32>,
}

impl Model {
    fn id_in_use(&self, class: usize) -> bool {
        self.subjects
            .values()
            .any(|versions| versions.values().any(|(c, _)| *c == class))
    }

    /// The reply as (id, version) or a deleted version list, or the error code.
    fn apply(&mut self, op: &Op) -> Result<Vec<i32>, u32> {
        match *op {
            Op::Register(s, index) => {
                let class = CANONICAL_CLASS[index];
                let versions = self.subjects.entry(s).or_default();
                if let Some((v, _)) = versions.iter().find(|(_, (c, d))| *c == class && !*d) {
                    let v = *v;
                    return Ok(vec![self.ids[&class], v]);
                }
                let version = versions.keys().next_back().copied().unwrap_or(0) + 1;
                versions.insert(version, (class, false));
                let id = match self.ids.get(&class) {
                    Some(id) => *id,
                    None => {
                        self.max_id += 1;
                        self.ids.insert(class, self.max_id);
                        self.max_id
                    }
                };
                Ok(vec![id, version])
            }
            Op::DeleteVersion(s, v, permanent) => {
                let versions = self
                    .subjects
                    .get_mut(&s)
                    .filter(|v| !v.is_empty())
                    .ok_or(40401u32)?;
                let version = if v == 0 {
                    *versions
                        .iter()
                        .rev()
                        .find(|(_, (_, d))| !*d || permanent)
                        .ok_or(40401u32)?
                        .0
                } else {
                    v
                };
                let (class, deleted) = *versions.get(&version).ok_or(40402u32)?;
                match (permanent, deleted) {
                    (false, true) => return Err(40406),
                    (true, false) => return Err(40407),
                    (false, false) => {
                        versions.insert(version, (class, true));
                    }
                    (true, true) => {
                        versions.remove(&version);
                        if !self.id_in_use(class) {
                            self.ids.remove(&class);
                        }
                    }
                }
                Ok(vec![version])
            }
            Op::DeleteSubject(s, permanent) => {
                let versions = self
                    .subjects
                    .get_mut(&s)
                    .filter(|v| !v.is_empty())
                    .ok_or(40401u32)?;
                let all_deleted = versions.values().all(|(_, d)| *d);
                if permanent {
                    if !all_deleted {
                        return Err(40405);
                    }
                    let gone: Vec<i32> = versions.keys().copied().collect();
                    let classes: Vec<usize> = versions.values().map(|(c, _)| *c).collect();
                    versions.clear();
                    for class in classes {
                        if !self.id_in_use(class) {
                            self.ids.remove(&class);
                        }
                    }
                    return Ok(gone);
                }
                if all_deleted {
                    return Err(40404);
                }
                let live: Vec<i32> = versions
                    .iter()
                    .filter(|(_, (_, d))| !*d)
                    .map(|(v, _)| *v)
                    .collect();
                for entry in versions.values_mut() {
                    entry.1 = true;
                }
                Ok(live)
            }
            Op::SetLevel(..) | Op::SetMode(..) => unreachable!("not generated for the model"),
        }
    }
}

fn arb_model_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..6usize).prop_map(|(s, i)| Op::Register(s, i)),
        3 => (0..3usize, 0..5i32, any::<bool>()).prop_map(|(s, v, p)| Op::DeleteVersion(s, v, p)),
        1 => (0..3usize, any::<bool>()).prop_map(|(s, p)| Op::DeleteSubject(s, p)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_machine_agrees_with_a_plain_model(ops in proptest::collection::vec(arb_model_op(), 1..60)) {
        let mut h = Harness::new();
        h.write(WriteRequest::SetConfig { subject: None, level: CompatibilityLevel::None })
            .expect("level NONE");
        let mut model = Model::default();
        for op in &ops {
            let expected = model.apply(op);
            let actual = match h.write(to_write(op)) {
                Ok(minikafka_schema::WriteReply::Registered { id, version }) => Ok(vec![id, version]),
                Ok(minikafka_schema::WriteReply::VersionDeleted(v)) => Ok(vec![v]),
                Ok(minikafka_schema::WriteReply::SubjectDeleted(vs)) => Ok(vs),
                Ok(other) => panic!("unexpected reply {other:?}"),
                Err(e) => Err(e.error_code()),
            };
            prop_assert_eq!(&actual, &expected, "op {:?}", op);
            for (index, subject) in SUBJECTS.iter().enumerate() {
                let versions = model.subjects.get(&index).cloned().unwrap_or_default();
                let all: Vec<i32> = versions.keys().copied().collect();
                let live: Vec<i32> = versions.iter().filter(|(_, (_, d))| !*d).map(|(v, _)| *v).collect();
                prop_assert_eq!(h.registry.versions(subject, true).unwrap_or_default(), all);
                prop_assert_eq!(h.registry.versions(subject, false).unwrap_or_default(), live);
                for (version, (class, deleted)) in versions {
                    let found = h.registry
                        .subject_version(subject, VersionSpec::Number(version), true)
                        .expect("a stored version reads");
                    prop_assert_eq!((found.id, found.deleted), (model.ids[&class], deleted));
                }
            }
        }
        let replayed = h.replayed();
        prop_assert_eq!(replayed.state(), h.registry.state());
    }
}
