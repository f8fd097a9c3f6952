//! The ACL decision: a table of labelled cases (each a Kafka rule), and properties against a
//! simple model that expands each ACL into the (principal, host, operation) triples it
//! grants or refuses.

use super::*;
use proptest::prelude::*;
use Operation as Op;

fn acl(
    permission: Permission,
    principal: &str,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
    pattern_type: PatternType,
    name: &str,
) -> AclBinding {
    AclBinding {
        resource_type,
        pattern_type,
        resource_name: name.to_string(),
        principal: principal.to_string(),
        host: host.to_string(),
        operation,
        permission,
    }
}

fn allow(principal: &str, operation: Operation, pattern: PatternType, name: &str) -> AclBinding {
    acl(
        Permission::Allow,
        principal,
        "*",
        operation,
        ResourceType::Topic,
        pattern,
        name,
    )
}

fn deny(principal: &str, operation: Operation, pattern: PatternType, name: &str) -> AclBinding {
    acl(
        Permission::Deny,
        principal,
        "*",
        operation,
        ResourceType::Topic,
        pattern,
        name,
    )
}

use PatternType::{Literal, Prefixed};

fn topic_action<'a>(
    principal: &'a str,
    host: &'a str,
    name: &'a str,
    operation: Operation,
) -> Action<'a> {
    Action {
        principal,
        host,
        resource_type: ResourceType::Topic,
        resource_name: name,
        operation,
    }
}

struct Case {
    label: &'static str,
    acls: Vec<AclBinding>,
    allow_everyone: bool,
    action: Action<'static>,
    want: Decision,
}

#[test]
fn decision_table_i43() {
    use Decision::{Allowed, Denied};
    use Reason::*;
    let alice_read = |name: &'static str| topic_action("User:alice", "10.0.0.1", name, Op::Read);
    let cases = vec![
        Case {
            label: "no ACLs, default: denied",
            acls: vec![],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(NoAclFound),
        },
        Case {
            label: "no ACLs, allow.everyone.if.no.acl.found: allowed",
            acls: vec![],
            allow_everyone: true,
            action: alice_read("t"),
            want: Allowed(NoAclFound),
        },
        Case {
            label: "an ACL for another principal on the resource: denied even with allow.everyone",
            acls: vec![allow("User:bob", Op::Read, Literal, "t")],
            allow_everyone: true,
            action: alice_read("t"),
            want: Denied(NoMatchingAllow),
        },
        Case {
            label: "ACLs on other resources only: allow.everyone applies",
            acls: vec![allow("User:bob", Op::Read, Literal, "other")],
            allow_everyone: true,
            action: alice_read("t"),
            want: Allowed(NoAclFound),
        },
        Case {
            label: "literal allow",
            acls: vec![allow("User:alice", Op::Read, Literal, "t")],
            allow_everyone: false,
            action: alice_read("t"),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "literal names match exactly, not as prefixes",
            acls: vec![allow("User:alice", Op::Read, Literal, "t")],
            allow_everyone: false,
            action: alice_read("tt"),
            want: Denied(NoAclFound),
        },
        Case {
            label: "literal wildcard resource",
            acls: vec![allow("User:alice", Op::Read, Literal, "*")],
            allow_everyone: false,
            action: alice_read("anything"),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "prefixed allow",
            acls: vec![allow("User:alice", Op::Read, Prefixed, "orders-")],
            allow_everyone: false,
            action: alice_read("orders-eu"),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "prefixed does not match a shorter name",
            acls: vec![allow("User:alice", Op::Read, Prefixed, "orders-")],
            allow_everyone: false,
            action: alice_read("orders"),
            want: Denied(NoAclFound),
        },
        Case {
            label: "prefixed '*' is a literal prefix, not a wildcard",
            acls: vec![allow("User:alice", Op::Read, Prefixed, "*")],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(NoAclFound),
        },
        Case {
            label: "wildcard principal",
            acls: vec![allow("User:*", Op::Read, Literal, "t")],
            allow_everyone: false,
            action: alice_read("t"),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "host must match",
            acls: vec![acl(
                Permission::Allow,
                "User:alice",
                "10.0.0.2",
                Op::Read,
                ResourceType::Topic,
                Literal,
                "t",
            )],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(NoMatchingAllow),
        },
        Case {
            label: "exact host",
            acls: vec![acl(
                Permission::Allow,
                "User:alice",
                "10.0.0.1",
                Op::Read,
                ResourceType::Topic,
                Literal,
                "t",
            )],
            allow_everyone: false,
            action: alice_read("t"),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "deny over allow (deny listed last)",
            acls: vec![
                allow("User:alice", Op::Read, Literal, "t"),
                deny("User:alice", Op::Read, Literal, "t"),
            ],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(DenyAcl(1)),
        },
        Case {
            label: "a wildcard deny beats a literal allow",
            acls: vec![
                allow("User:alice", Op::Read, Literal, "t"),
                deny("User:*", Op::All, Literal, "*"),
            ],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(DenyAcl(1)),
        },
        Case {
            label: "a prefixed deny beats a literal allow",
            acls: vec![
                allow("User:alice", Op::Read, Literal, "secret-t"),
                deny("User:alice", Op::Read, Prefixed, "secret-"),
            ],
            allow_everyone: false,
            action: alice_read("secret-t"),
            want: Denied(DenyAcl(1)),
        },
        Case {
            label: "READ implies DESCRIBE",
            acls: vec![allow("User:alice", Op::Read, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "WRITE implies DESCRIBE",
            acls: vec![allow("User:alice", Op::Write, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "DELETE implies DESCRIBE",
            acls: vec![allow("User:alice", Op::Delete, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "ALTER implies DESCRIBE",
            acls: vec![allow("User:alice", Op::Alter, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "CREATE does not imply DESCRIBE",
            acls: vec![allow("User:alice", Op::Create, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Denied(NoMatchingAllow),
        },
        Case {
            label: "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
            acls: vec![allow("User:alice", Op::AlterConfigs, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::DescribeConfigs),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "DESCRIBE does not imply READ",
            acls: vec![allow("User:alice", Op::Describe, Literal, "t")],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(NoMatchingAllow),
        },
        Case {
            label: "a DENY of READ does not deny DESCRIBE",
            acls: vec![
                deny("User:alice", Op::Read, Literal, "t"),
                allow("User:alice", Op::Describe, Literal, "t"),
            ],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::Describe),
            want: Allowed(AllowAcl(1)),
        },
        Case {
            label: "ALL allows every operation",
            acls: vec![allow("User:alice", Op::All, Literal, "t")],
            allow_everyone: false,
            action: topic_action("User:alice", "h", "t", Op::IdempotentWrite),
            want: Allowed(AllowAcl(0)),
        },
        Case {
            label: "resource types are separate: a group ACL says nothing of a topic",
            acls: vec![acl(
                Permission::Allow,
                "User:alice",
                "*",
                Op::Read,
                ResourceType::Group,
                Literal,
                "t",
            )],
            allow_everyone: false,
            action: alice_read("t"),
            want: Denied(NoAclFound),
        },
        Case {
            label: "an action for ALL is invalid",
            acls: vec![allow("User:alice", Op::All, Literal, "t")],
            allow_everyone: true,
            action: topic_action("User:alice", "h", "t", Op::All),
            want: Denied(InvalidOperation),
        },
    ];
    for case in &cases {
        let config = AuthorizerConfig {
            super_users: BTreeSet::new(),
            allow_everyone_if_no_acl_found: case.allow_everyone,
        };
        assert_eq!(
            authorize(&config, &case.acls, &case.action),
            case.want,
            "{}",
            case.label
        );
    }
}

#[test]
fn super_users_are_allowed_even_against_a_deny_i43() {
    let config = AuthorizerConfig {
        super_users: AuthorizerConfig::parse_super_users(" User:admin ; User:ops;;"),
        allow_everyone_if_no_acl_found: false,
    };
    assert_eq!(config.super_users.len(), 2);
    let acls = [deny("User:*", Op::All, Literal, "*")];
    let action = topic_action("User:admin", "h", "t", Op::Write);
    assert_eq!(
        authorize(&config, &acls, &action),
        Decision::Allowed(Reason::SuperUser)
    );
    let action = topic_action("User:alice", "h", "t", Op::Write);
    assert_eq!(
        authorize(&config, &acls, &action),
        Decision::Denied(Reason::DenyAcl(0))
    );
}

#[test]
fn kafka_codes_round_trip_and_unknown_codes_are_none() {
    for code in i8::MIN..=i8::MAX {
        if let Some(op) = Operation::from_code(code) {
            assert_eq!(op.code(), code);
        }
        if let Some(t) = ResourceType::from_code(code) {
            assert_eq!(t.code(), code);
        }
    }
    assert_eq!(Operation::from_code(0), None); // UNKNOWN
    assert_eq!(Operation::from_code(1), None); // ANY
    assert_eq!(Operation::ALL_VALUES.len(), 13);
    assert_eq!(ResourceType::Cluster.code(), 4);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(Permission::Allow.code(), 3);
}

// ---------------------------------------------------------------------------------------------
// The model: each ACL expanded into explicit (principal, host, operation) triples over small
// alphabets, then Kafka's rules read off sets.

const PRINCIPALS: [&str; 3] = ["User:alice", "User:bob", "User:*"];
const HOSTS: [&str; 3] = ["h1", "h2", "*"];
const NAMES: [&str; 4] = ["a", "ab", "b", "*"];
const OPS: [Operation; 7] = [
    Op::All,
    Op::Read,
    Op::Write,
    Op::Describe,
    Op::Alter,
    Op::AlterConfigs,
    Op::DescribeConfigs,
];

/// Every (principal, host, operation) an ACL speaks for, spelled out.
fn expand(acl: &AclBinding) -> BTreeSet<(&'static str, &'static str, Operation)> {
    let mut out = BTreeSet::new();
    for principal in ["User:alice", "User:bob"] {
        if acl.principal != principal && acl.principal != "User:*" {
            continue;
        }
        for host in ["h1", "h2"] {
            if acl.host != host && acl.host != "*" {
                continue;
            }
            for op in OPS.into_iter().filter(|&op| op != Op::All) {
                let implied: &[Operation] = match (acl.permission, acl.operation) {
                    (_, Op::All) => &OPS,
                    (Permission::Allow, Op::Read | Op::Write | Op::Alter | Op::Delete) => {
                        &[Op::Describe]
                    }
                    (Permission::Allow, Op::AlterConfigs) => &[Op::DescribeConfigs],
                    _ => &[],
                };
                if acl.operation == op || implied.contains(&op) {
                    out.insert((principal, host, op));
                }
            }
        }
    }
    out
}

fn model(allow_everyone: bool, acls: &[AclBinding], action: &Action<'_>) -> bool {
    let on_resource: Vec<&AclBinding> = acls
        .iter()
        .filter(|a| {
            a.resource_type == action.resource_type
                && match a.pattern_type {
                    Literal => a.resource_name == "*" || a.resource_name == action.resource_name,
                    Prefixed => action.resource_name.starts_with(&a.resource_name),
                }
        })
        .collect();
    if on_resource.is_empty() {
        return allow_everyone;
    }
    let key = (action.principal, action.host, action.operation);
    let speaks = |p: Permission| {
        on_resource
            .iter()
            .filter(|a| a.permission == p)
            .any(|a| expand(a).iter().any(|&(pr, h, o)| (pr, h, o) == key))
    };
    !speaks(Permission::Deny) && speaks(Permission::Allow)
}

fn arb_acl() -> impl Strategy<Value = AclBinding> {
    (
        prop::sample::select(&PRINCIPALS[..]),
        prop::sample::select(&HOSTS[..]),
        prop::sample::select(&OPS[..]),
        prop::sample::select(&NAMES[..]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(principal, host, op, name, prefixed, deny, group)| {
            acl(
                if deny {
                    Permission::Deny
                } else {
                    Permission::Allow
                },
                principal,
                host,
                op,
                if group {
                    ResourceType::Group
                } else {
                    ResourceType::Topic
                },
                if prefixed { Prefixed } else { Literal },
                name,
            )
        })
}

proptest! {
    /// `authorize` agrees with the model on random ACL sets and actions.
    #[test]
    fn authorize_matches_the_model(
        acls in proptest::collection::vec(arb_acl(), 0..8),
        principal in prop::sample::select(&["User:alice", "User:bob"][..]),
        host in prop::sample::select(&["h1", "h2"][..]),
        name in prop::sample::select(&["a", "ab", "b", "c"][..]),
        op in prop::sample::select(&OPS[1..]),
        allow_everyone in any::<bool>(),
    ) {
        let config = AuthorizerConfig { super_users: BTreeSet::new(), allow_everyone_if_no_acl_found: allow_everyone };
        let action = topic_action(principal, host, name, op);
        let got = authorize(&config, &acls, &action);
        prop_assert_eq!(got.is_allowed(), model(allow_everyone, &acls, &action), "{:?}", got);
        // The order of the ACLs never changes the decision.
        let mut reversed = acls.clone();
        reversed.reverse();
        prop_assert_eq!(authorize(&config, &reversed, &action).is_allowed(), got.is_allowed());
        // Adding a DENY never turns a denial into an allowance.
        if !got.is_allowed() {
            let mut more = acls.clone();
            more.push(deny("User:*", Op::All, Literal, "*"));
            prop_assert!(!authorize(&config, &more, &action).is_allowed());
        }
    }
}

#[test]
fn by_resource_type_allows_when_some_allow_is_not_covered_by_a_deny() {
    let config = AuthorizerConfig::default();
    let any = |acls: &[AclBinding]| {
        authorize_by_resource_type(&config, acls, "User:a", "h", ResourceType::Topic, Op::Write)
    };
    assert!(!any(&[]), "no ACLs and allow.everyone off");
    let allow_t = allow("User:a", Op::Write, PatternType::Literal, "t");
    assert!(any(std::slice::from_ref(&allow_t)));
    let deny = |pattern, name: &str| AclBinding {
        permission: Permission::Deny,
        ..allow("User:a", Op::Write, pattern, name)
    };
    assert!(!any(&[allow_t.clone(), deny(PatternType::Literal, "t")]));
    assert!(!any(&[allow_t.clone(), deny(PatternType::Prefixed, "")]));
    assert!(!any(&[allow_t.clone(), deny(PatternType::Literal, "*")]));
    assert!(any(&[allow_t.clone(), deny(PatternType::Literal, "u")]));
    let read_only = allow("User:a", Op::Read, PatternType::Literal, "t");
    assert!(!any(&[read_only]), "READ does not grant WRITE");
    let mut supers = AuthorizerConfig::default();
    supers.super_users.insert("User:a".into());
    assert!(authorize_by_resource_type(
        &supers,
        &[],
        "User:a",
        "h",
        ResourceType::Topic,
        Op::Write
    ));
}
