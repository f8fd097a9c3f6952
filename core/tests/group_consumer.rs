//! Scenario tests of `core::group::consumer` (KIP-848 heartbeats), its record codecs and its
//! regex subscriptions, plus hostile record bytes.

use std::collections::BTreeSet;

use minikafka_core::group::consumer::{
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, ConsumerGroupState, DeadlineReason, ErrorCode, TopicInfo,
    TopicMetadata,
};
use minikafka_core::group::consumer_records::{
    ConsumerGroupRecord, CurrentMemberAssignmentValue, GroupMetadataValue, MemberMetadataValue,
    MemberState, PartitionMetadataValue, PartitionRacks, RecordError, RecordKind,
    TargetAssignmentMemberValue, TargetAssignmentMetadataValue, TopicMetadataEntry,
    TopicPartitions,
};
use proptest::prelude::*;

// Kafka's error codes.
const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
const INVALID_REQUEST: ErrorCode = ErrorCode(42);
const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
const FENCED_INSTANCE_ID: ErrorCode = ErrorCode(82);
const FENCED_MEMBER_EPOCH: ErrorCode = ErrorCode(110);
const UNRELEASED_INSTANCE_ID: ErrorCode = ErrorCode(111);
const UNSUPPORTED_ASSIGNOR: ErrorCode = ErrorCode(112);
const STALE_MEMBER_EPOCH: ErrorCode = ErrorCode(113);
const INVALID_REGULAR_EXPRESSION: ErrorCode = ErrorCode(130);

const ORDERS: [u8; 16] = [1; 16];

fn topics(list: &[(&str, u8, i32)]) -> TopicMetadata {
    let mut t = TopicMetadata::default();
    for (name, id, count) in list {
        t.topics.insert(
            name.to_string(),
            TopicInfo {
                topic_id: [*id; 16],
                partition_count: *count,
            },
        );
    }
    t
}

fn join(member_id: &str, names: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        version: 1,
        group_id: "g".to_string(),
        member_id: member_id.to_string(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|s| s.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        client_id: "rdkafka".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..Default::default()
    }
}

fn beat(
    member_id: &str,
    epoch: i32,
    owned: Option<Vec<TopicPartitions>>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest {
        version: 1,
        group_id: "g".to_string(),
        member_id: member_id.to_string(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: owned,
        client_id: "rdkafka".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..Default::default()
    }
}

fn parts(resp: &ConsumerGroupHeartbeatResponse) -> Vec<i32> {
    resp.assignment
        .as_ref()
        .expect("an assignment")
        .iter()
        .flat_map(|tp| tp.partitions.clone())
        .collect()
}

fn ok(
    g: &mut ConsumerGroup,
    req: ConsumerGroupHeartbeatRequest,
    now: i64,
    t: &TopicMetadata,
) -> ConsumerGroupHeartbeatResponse {
    g.heartbeat(&req, now, t).expect("heartbeat accepted").1
}

fn group() -> ConsumerGroup {
    ConsumerGroup::new("g")
}

#[test]
fn v0_join_with_empty_member_id_gets_one_and_every_partition() {
    let t = topics(&[("orders", 1, 3)]);
    let mut g = group();
    let mut req = join("", &["orders"]);
    req.version = 0;
    let (records, resp) = g.heartbeat(&req, 0, &t).expect("join");
    assert!(!resp.member_id.is_empty());
    assert_eq!(resp.member_epoch, 1);
    assert_eq!(resp.heartbeat_interval_ms, 5_000);
    assert_eq!(parts(&resp), vec![0, 1, 2]);
    // Member metadata, partition metadata, group epoch, target member, target epoch, current.
    let types: Vec<i16> = records.iter().map(ConsumerGroupRecord::key_type).collect();
    assert_eq!(types, vec![5, 4, 3, 7, 6, 8]);
    // v1 requires the client's own member id.
    assert_eq!(
        g.heartbeat(&join("", &["orders"]), 0, &t).err(),
        Some(INVALID_REQUEST)
    );
}

#[test]
fn a_partition_moves_only_after_its_revocation_is_acknowledged() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = group();
    let a = ok(&mut g, join("a", &["orders"]), 0, &t);
    assert_eq!((a.member_epoch, parts(&a)), (1, vec![0, 1, 2, 3]));

    // b joins: its target is two of a's partitions, which a still owns.
    let b = ok(&mut g, join("b", &["orders"]), 10, &t);
    assert_eq!(b.member_epoch, 2);
    assert!(parts(&b).is_empty());
    let target_b: Vec<i32> = g.describe().members[1].target_assignment[0]
        .partitions
        .clone();
    assert_eq!(target_b.len(), 2);

    // a is told to give up b's partitions; it stays at epoch 1 until it says it has.
    let a = ok(&mut g, beat("a", 1, None), 20, &t);
    assert_eq!(a.member_epoch, 1);
    let kept = parts(&a);
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().all(|p| !target_b.contains(p)));
    assert_eq!(
        g.describe().members[0].state,
        MemberState::UnrevokedPartitions
    );
    assert_eq!(g.describe().state, ConsumerGroupState::Reconciling);

    // b still gets nothing: a has not acknowledged.
    let b = ok(&mut g, beat("b", 2, Some(Vec::new())), 30, &t);
    assert!(b.assignment.is_none(), "unchanged assignment is not resent");
    // a heartbeats still listing everything: not an acknowledgement.
    let all = vec![TopicPartitions {
        topic_id: ORDERS,
        partitions: vec![0, 1, 2, 3],
    }];
    let a2 = ok(&mut g, beat("a", 1, Some(all)), 40, &t);
    assert_eq!(a2.member_epoch, 1);
    // a acknowledges: it moves to epoch 2.
    let owned = a.assignment.clone();
    let a = ok(&mut g, beat("a", 1, owned), 50, &t);
    assert_eq!(a.member_epoch, 2);
    assert_eq!(g.describe().members[0].state, MemberState::Stable);
    // Now b receives its partitions.
    let b = ok(&mut g, beat("b", 2, Some(Vec::new())), 60, &t);
    assert_eq!(parts(&b), target_b);
    assert_eq!(g.describe().state, ConsumerGroupState::Stable);
}

#[test]
fn epoch_rules() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    ok(&mut g, join("a", &["orders"]), 0, &t);
    assert_eq!(
        g.heartbeat(&beat("zz", 1, None), 1, &t).err(),
        Some(UNKNOWN_MEMBER_ID)
    );
    assert_eq!(
        g.heartbeat(&beat("a", 7, None), 1, &t).err(),
        Some(FENCED_MEMBER_EPOCH)
    );
    // Epoch 1 → 2 when the topic grows; the member may retry with the previous epoch.
    let t2 = topics(&[("orders", 1, 3)]);
    let r = ok(&mut g, beat("a", 1, None), 2, &t2);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(parts(&r), vec![0, 1, 2]);
    let owned = vec![TopicPartitions {
        topic_id: ORDERS,
        partitions: vec![0, 1],
    }];
    assert_eq!(
        ok(&mut g, beat("a", 1, Some(owned)), 3, &t2).member_epoch,
        2
    );
    // A rejoin with epoch 0 (the client lost its state) is answered with the full assignment.
    let r = ok(&mut g, join("a", &["orders"]), 4, &t2);
    assert_eq!((r.member_epoch, parts(&r)), (2, vec![0, 1, 2]));
    // Offset commits: current epoch ok, older stale, newer fenced, unknown member.
    assert_eq!(g.validate_offset_commit("a", 2), ErrorCode(0));
    assert_eq!(g.validate_offset_commit("a", 1), STALE_MEMBER_EPOCH);
    assert_eq!(g.validate_offset_commit("a", 3), FENCED_MEMBER_EPOCH);
    assert_eq!(g.validate_offset_commit("x", 2), UNKNOWN_MEMBER_ID);
    // An admin commit (no member, epoch -1) only while the group has no members.
    assert_eq!(g.validate_offset_commit("", -1), UNKNOWN_MEMBER_ID);
    assert_eq!(group().validate_offset_commit("", -1), ErrorCode(0));
}

#[test]
fn invalid_requests_are_refused_without_records() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    let mut no_timeout = join("a", &["orders"]);
    no_timeout.rebalance_timeout_ms = -1;
    let mut no_subscription = join("a", &[]);
    no_subscription.subscribed_topic_names = None;
    let mut owns_on_join = join("a", &["orders"]);
    owns_on_join.topic_partitions = Some(vec![TopicPartitions {
        topic_id: ORDERS,
        partitions: vec![0],
    }]);
    let mut bad_epoch = beat("a", -3, None);
    bad_epoch.member_epoch = -3;
    let mut other_group = join("a", &["orders"]);
    other_group.group_id = "h".to_string();
    let mut empty_instance = join("a", &["orders"]);
    empty_instance.instance_id = Some(String::new());
    for req in [
        no_timeout,
        no_subscription,
        owns_on_join,
        bad_epoch,
        other_group,
        empty_instance,
    ] {
        assert_eq!(g.heartbeat(&req, 0, &t).err(), Some(INVALID_REQUEST));
    }
    let mut assignor = join("a", &["orders"]);
    assignor.server_assignor = Some("sticky".to_string());
    assert_eq!(
        g.heartbeat(&assignor, 0, &t).err(),
        Some(UNSUPPORTED_ASSIGNOR)
    );
    let mut regex = join("a", &[]);
    regex.subscribed_topic_regex = Some("orders(".to_string());
    assert_eq!(
        g.heartbeat(&regex, 0, &t).err(),
        Some(INVALID_REGULAR_EXPRESSION)
    );
    // Balanced only once wrapped for a whole-name match: still refused.
    regex.subscribed_topic_regex = Some("a)|(b".to_string());
    assert_eq!(
        g.heartbeat(&regex, 0, &t).err(),
        Some(INVALID_REGULAR_EXPRESSION)
    );
    assert!(g.is_empty());
    assert_eq!(g.durable_state().group_epoch, 0);
}

#[test]
fn group_max_size_is_enforced() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = ConsumerGroup::with_config(
        "g",
        ConsumerGroupConfig {
            max_size: 1,
            ..ConsumerGroupConfig::default()
        },
    );
    ok(&mut g, join("a", &["orders"]), 0, &t);
    assert_eq!(
        g.heartbeat(&join("b", &["orders"]), 0, &t).err(),
        Some(GROUP_MAX_SIZE_REACHED)
    );
}

#[test]
fn a_silent_member_is_fenced_and_its_partitions_move() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    ok(&mut g, join("a", &["orders"]), 0, &t);
    let b = ok(&mut g, join("b", &["orders"]), 0, &t);
    let a = ok(&mut g, beat("a", 1, None), 0, &t);
    ok(&mut g, beat("a", 1, a.assignment.clone()), 0, &t);
    let b = ok(&mut g, beat("b", b.member_epoch, Some(Vec::new())), 0, &t);
    assert_eq!(parts(&b).len(), 1);
    // a keeps heartbeating, b goes silent.
    ok(&mut g, beat("a", 2, None), 40_000, &t);
    let d = g.next_deadline().expect("a deadline");
    assert_eq!(
        (d.member_id.as_str(), d.at_ms, d.reason),
        ("b", 45_000, DeadlineReason::Session)
    );
    assert!(g.handle_timeout(44_999).is_empty());
    let records = g.handle_timeout(45_000);
    assert!(records.iter().any(|r| r.is_tombstone()));
    assert_eq!(g.describe().members.len(), 1);
    let a = ok(&mut g, beat("a", 2, None), 45_001, &t);
    assert_eq!(a.member_epoch, 3);
    assert_eq!(parts(&a), vec![0, 1]);
    assert_eq!(
        g.heartbeat(&beat("b", 2, None), 45_002, &t).err(),
        Some(UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_fenced() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    ok(&mut g, join("a", &["orders"]), 0, &t);
    ok(&mut g, join("b", &["orders"]), 0, &t);
    ok(&mut g, beat("a", 1, None), 1_000, &t);
    let d = g.next_deadline().expect("a deadline");
    assert_eq!(
        (d.member_id.as_str(), d.at_ms, d.reason),
        ("a", 31_000, DeadlineReason::Revocation)
    );
    g.handle_timeout(31_000);
    let names: Vec<String> = g
        .describe()
        .members
        .iter()
        .map(|m| m.member_id.clone())
        .collect();
    assert_eq!(names, vec!["b".to_string()]);
    let b = ok(&mut g, beat("b", 2, Some(Vec::new())), 31_001, &t);
    assert_eq!(parts(&b), vec![0, 1]);
}

#[test]
fn leaving_frees_partitions() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    ok(&mut g, join("a", &["orders"]), 0, &t);
    let (records, resp) = g.heartbeat(&beat("a", -1, None), 1, &t).expect("leave");
    assert_eq!(resp.member_epoch, -1);
    assert!(resp.assignment.is_none());
    assert_eq!(records.iter().filter(|r| r.is_tombstone()).count(), 3);
    assert!(g.is_empty());
    assert_eq!(g.describe().state, ConsumerGroupState::Empty);
    let b = ok(&mut g, join("b", &["orders"]), 2, &t);
    assert_eq!(parts(&b), vec![0, 1]);
    assert_eq!(
        g.heartbeat(&beat("a", -1, None), 3, &t).err(),
        Some(UNKNOWN_MEMBER_ID)
    );
}

#[test]
fn static_member_keeps_its_partitions_across_a_restart() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    let mut j = join("a1", &["orders"]);
    j.instance_id = Some("inst".to_string());
    let a = ok(&mut g, j, 0, &t);
    assert_eq!(parts(&a), vec![0, 1]);
    // The same instance id cannot join while its holder is live.
    let mut j2 = join("a2", &["orders"]);
    j2.instance_id = Some("inst".to_string());
    assert_eq!(
        g.heartbeat(&j2.clone(), 1, &t).err(),
        Some(UNRELEASED_INSTANCE_ID)
    );
    // Another member's instance id is fenced.
    let mut wrong = beat("a1", 1, None);
    wrong.instance_id = Some("other".to_string());
    assert_eq!(g.heartbeat(&wrong, 1, &t).err(), Some(FENCED_INSTANCE_ID));
    // Static leave: epoch -2, partitions kept, no rebalance.
    let mut leave = beat("a1", -2, None);
    leave.instance_id = Some("inst".to_string());
    let (_, resp) = g.heartbeat(&leave, 2, &t).expect("static leave");
    assert_eq!(resp.member_epoch, -2);
    assert_eq!(g.durable_state().group_epoch, 1);
    // A new incarnation takes over the same partitions at the same epoch.
    let a2 = ok(&mut g, j2, 3, &t);
    assert_eq!(a2.member_epoch, 1);
    assert_eq!(parts(&a2), vec![0, 1]);
    let ids: Vec<String> = g
        .describe()
        .members
        .iter()
        .map(|m| m.member_id.clone())
        .collect();
    assert_eq!(ids, vec!["a2".to_string()]);
    assert_eq!(g.durable_state().group_epoch, 1);
}

#[test]
fn regex_selects_whole_topic_names_and_empty_regex_means_none() {
    let t = topics(&[
        ("orders", 1, 1),
        ("orders-eu", 2, 1),
        ("payments", 3, 1),
        ("xorders", 4, 1),
    ]);
    let mut g = group();
    let mut r = join("a", &[]);
    r.subscribed_topic_names = None;
    r.subscribed_topic_regex = Some("orders.*".to_string());
    ok(&mut g, r, 0, &t);
    let mut names = vec!["payments".to_string()];
    let mut librdkafka = join("b", &["payments"]);
    librdkafka.subscribed_topic_regex = Some(String::new());
    ok(&mut g, librdkafka, 0, &t);
    let d = g.describe();
    let subscribed: BTreeSet<String> = g
        .durable_state()
        .subscribed_topics
        .as_ref()
        .expect("topics")
        .topics
        .iter()
        .map(|t| t.topic_name.clone())
        .collect();
    names.extend(["orders".to_string(), "orders-eu".to_string()]);
    assert_eq!(
        subscribed,
        names.into_iter().collect::<BTreeSet<_>>(),
        "xorders does not match"
    );
    assert_eq!(
        d.members[1].subscribed_topic_regex, None,
        "empty regex is stored as none"
    );
    let target_a: BTreeSet<String> = d.members[0]
        .target_assignment
        .iter()
        .map(|t| t.topic_name.clone())
        .collect();
    assert_eq!(
        target_a,
        ["orders", "orders-eu"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let target_b: Vec<String> = d.members[1]
        .target_assignment
        .iter()
        .map(|t| t.topic_name.clone())
        .collect();
    assert_eq!(target_b, vec!["payments".to_string()]);
    // A new topic matching the regex joins the subscription on the next heartbeat.
    let t2 = topics(&[
        ("orders", 1, 1),
        ("orders-eu", 2, 1),
        ("payments", 3, 1),
        ("orders-us", 5, 1),
    ]);
    ok(&mut g, beat("a", 1, None), 1, &t2);
    let target_a: BTreeSet<String> = g.describe().members[0]
        .target_assignment
        .iter()
        .map(|t| t.topic_name.clone())
        .collect();
    assert!(target_a.contains("orders-us"));
}

#[test]
fn an_oversized_regex_is_refused() {
    let t = topics(&[("orders", 1, 1)]);
    let mut g = ConsumerGroup::with_config(
        "g",
        ConsumerGroupConfig {
            regex_size_limit_bytes: 10_000,
            ..ConsumerGroupConfig::default()
        },
    );
    let mut r = join("a", &[]);
    r.subscribed_topic_regex = Some("(a|b|c|d){1000}".to_string());
    assert_eq!(
        g.heartbeat(&r, 0, &t).err(),
        Some(INVALID_REGULAR_EXPRESSION)
    );
}

#[test]
fn range_assignor_on_request() {
    let t = topics(&[("t0", 1, 3), ("t1", 2, 3)]);
    let mut g = group();
    let mut a = join("C0", &["t0", "t1"]);
    a.server_assignor = Some("range".to_string());
    ok(&mut g, a, 0, &t);
    let mut b = join("C1", &["t0", "t1"]);
    b.server_assignor = Some("range".to_string());
    ok(&mut g, b, 0, &t);
    let d = g.describe();
    assert_eq!(d.assignor_name, "range");
    let target = |i: usize| -> Vec<(u8, Vec<i32>)> {
        d.members[i]
            .target_assignment
            .iter()
            .map(|t| (t.topic_id[0], t.partitions.clone()))
            .collect()
    };
    assert_eq!(target(0), vec![(1, vec![0, 1]), (2, vec![0, 1])]);
    assert_eq!(target(1), vec![(1, vec![2]), (2, vec![2])]);
}

#[test]
fn assignor_configuration_is_parsed() {
    use minikafka_core::group::assignor::Assignor;
    assert_eq!(
        ConsumerGroupConfig::parse_assignors(&["range", "uniform"]),
        Ok(vec![Assignor::Range, Assignor::Uniform])
    );
    assert!(ConsumerGroupConfig::parse_assignors(&["sticky"]).is_err());
    assert!(ConsumerGroupConfig::parse_assignors(&[]).is_err());
}

#[test]
fn a_loaded_group_arms_sessions_on_activate() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    let (records, _) = g.heartbeat(&join("a", &["orders"]), 0, &t).expect("join");
    let mut loaded = group();
    for r in &records {
        loaded.replay(r).expect("replay");
    }
    assert_eq!(loaded.next_deadline(), None);
    loaded.activate(100);
    assert_eq!(loaded.next_deadline().map(|d| d.at_ms), Some(45_100));
    assert_eq!(loaded.durable_state(), g.durable_state());
    let mut other = ConsumerGroup::new("h");
    assert!(other.replay(&records[0]).is_err());
}

// ---- records ----

fn sample_records() -> Vec<ConsumerGroupRecord> {
    let tp = |id: u8, ps: &[i32]| TopicPartitions {
        topic_id: [id; 16],
        partitions: ps.to_vec(),
    };
    let rec = |kind| ConsumerGroupRecord {
        group_id: "group-1".to_string(),
        kind,
    };
    let member = |v| RecordKind::MemberMetadata {
        member_id: "m".to_string(),
        value: v,
    };
    vec![
        rec(RecordKind::GroupMetadata(Some(GroupMetadataValue {
            epoch: 7,
        }))),
        rec(RecordKind::GroupMetadata(None)),
        rec(RecordKind::PartitionMetadata(Some(
            PartitionMetadataValue {
                epoch: 7,
                topics: vec![TopicMetadataEntry {
                    topic_id: [9; 16],
                    topic_name: "orders".to_string(),
                    partition_count: 3,
                    partition_racks: vec![PartitionRacks {
                        partition: 0,
                        racks: vec!["r1".to_string(), "r2".to_string()],
                    }],
                }],
            },
        ))),
        rec(member(Some(MemberMetadataValue {
            instance_id: Some("i".to_string()),
            rack_id: None,
            client_id: "rdkafka".to_string(),
            client_host: "/127.0.0.1".to_string(),
            subscribed_topic_names: vec!["a".to_string(), "b".to_string()],
            subscribed_topic_regex: Some("o.*".to_string()),
            rebalance_timeout_ms: 30_000,
            server_assignor: Some("uniform".to_string()),
        }))),
        rec(member(None)),
        rec(RecordKind::TargetAssignmentMetadata(Some(
            TargetAssignmentMetadataValue {
                assignment_epoch: 7,
            },
        ))),
        rec(RecordKind::TargetAssignmentMember {
            member_id: "m".to_string(),
            value: Some(TargetAssignmentMemberValue {
                topic_partitions: vec![tp(1, &[0, 2]), tp(2, &[])],
            }),
        }),
        rec(RecordKind::CurrentMemberAssignment {
            member_id: "m".to_string(),
            value: Some(CurrentMemberAssignmentValue {
                member_epoch: 7,
                previous_member_epoch: 6,
                state: MemberState::UnrevokedPartitions,
                assigned_partitions: vec![tp(1, &[0])],
                partitions_pending_revocation: vec![tp(1, &[1])],
            }),
        }),
        rec(RecordKind::CurrentMemberAssignment {
            member_id: "m".to_string(),
            value: None,
        }),
    ]
}

#[test]
fn records_round_trip() {
    for r in sample_records() {
        let key = r.encode_key();
        let value = r.encode_value();
        assert_eq!(value.is_none(), r.is_tombstone());
        assert_eq!(ConsumerGroupRecord::decode(&key, value.as_deref()), Ok(r));
    }
}

#[test]
fn records_are_byte_exact() {
    let r = ConsumerGroupRecord {
        group_id: "g".to_string(),
        kind: RecordKind::GroupMetadata(Some(GroupMetadataValue { epoch: 5 })),
    };
    assert_eq!(r.encode_key(), vec![0, 3, 0, 1, b'g']);
    assert_eq!(r.encode_value(), Some(vec![0, 0, 0, 0, 0, 5, 0]));

    let r = ConsumerGroupRecord {
        group_id: "g".to_string(),
        kind: RecordKind::CurrentMemberAssignment {
            member_id: "m".to_string(),
            value: Some(CurrentMemberAssignmentValue {
                member_epoch: 2,
                previous_member_epoch: 1,
                state: MemberState::Stable,
                assigned_partitions: vec![TopicPartitions {
                    topic_id: [0xab; 16],
                    partitions: vec![0, 1],
                }],
                partitions_pending_revocation: vec![],
            }),
        },
    };
    assert_eq!(r.encode_key(), vec![0, 8, 0, 1, b'g', 0, 1, b'm']);
    let mut expected = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 2];
    expected.extend([0xab; 16]);
    expected.extend([3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0]);
    assert_eq!(r.encode_value(), Some(expected));

    let r = ConsumerGroupRecord {
        group_id: "g".to_string(),
        kind: RecordKind::MemberMetadata {
            member_id: "m".to_string(),
            value: Some(MemberMetadataValue {
                instance_id: None,
                rack_id: None,
                client_id: "c".to_string(),
                client_host: "h".to_string(),
                subscribed_topic_names: vec!["t".to_string()],
                subscribed_topic_regex: None,
                rebalance_timeout_ms: 300,
                server_assignor: None,
            }),
        },
    };
    assert_eq!(
        r.encode_value(),
        Some(vec![
            0, 0, 0, 0, 2, b'c', 2, b'h', 2, 2, b't', 0, 0, 0, 1, 44, 0, 0
        ])
    );
}

#[test]
fn tagged_fields_are_skipped_and_other_versions_refused() {
    // ConsumerGroupMetadataValue with tagged field 0 (MetadataHash, 8 bytes), as Kafka 4.1
    // writes it.
    let key = vec![0, 3, 0, 1, b'g'];
    let mut value = vec![0, 0, 0, 0, 0, 5, 1, 0, 8];
    value.extend([0x11; 8]);
    let r = ConsumerGroupRecord::decode(&key, Some(&value)).expect("decodes");
    assert_eq!(
        r.kind,
        RecordKind::GroupMetadata(Some(GroupMetadataValue { epoch: 5 }))
    );
    assert_eq!(
        ConsumerGroupRecord::decode(&key, Some(&[0, 1, 0, 0, 0, 5, 0])),
        Err(RecordError::UnsupportedValueVersion(1))
    );
    assert_eq!(
        ConsumerGroupRecord::decode(&[0, 2, 0, 1, b'g'], None),
        Err(RecordError::UnknownKeyType(2))
    );
    assert_eq!(
        ConsumerGroupRecord::decode(&key, Some(&[0, 0, 0, 0, 0, 5, 0, 9])),
        Err(RecordError::TrailingBytes(1))
    );
}

#[test]
fn every_truncation_is_an_error() {
    for r in sample_records() {
        let key = r.encode_key();
        let value = r.encode_value();
        for cut in 0..key.len() {
            assert!(ConsumerGroupRecord::decode(&key[..cut], value.as_deref()).is_err());
        }
        if let Some(v) = &value {
            for cut in 0..v.len() {
                assert!(ConsumerGroupRecord::decode(&key, Some(&v[..cut])).is_err());
            }
        }
    }
}

#[test]
fn a_huge_array_count_is_refused_before_allocating() {
    // TargetAssignmentMember value claiming 2^32-2 topics in 8 bytes.
    let key = vec![0, 7, 0, 1, b'g', 0, 1, b'm'];
    let value = vec![0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0];
    assert!(matches!(
        ConsumerGroupRecord::decode(&key, Some(&value)),
        Err(RecordError::Truncated { .. })
    ));
    // A compact string claiming 2^31 bytes.
    let key = vec![0, 5, 0, 1, b'g', 0, 1, b'm'];
    let value = vec![0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x08];
    assert!(ConsumerGroupRecord::decode(&key, Some(&value)).is_err());
    // A varint of more than five bytes.
    let value = vec![0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        ConsumerGroupRecord::decode(&key, Some(&value)),
        Err(RecordError::VarintTooLong { .. })
    ));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        key_type in 0i16..10,
        key_tail in proptest::collection::vec(any::<u8>(), 0..40),
        value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
    ) {
        let mut key = key_type.to_be_bytes().to_vec();
        key.extend(key_tail);
        let _ = ConsumerGroupRecord::decode(&key, value.as_deref());
    }

    #[test]
    fn mutated_records_never_panic(index in 0usize..9, flip in any::<(usize, u8)>()) {
        let r = &sample_records()[index];
        if let Some(mut v) = r.encode_value() {
            let at = flip.0 % v.len();
            v[at] ^= flip.1;
            // Typed error or a record; never a panic.
            let _ = ConsumerGroupRecord::decode(&r.encode_key(), Some(&v));
        }
    }
}

#[test]
fn a_failed_append_reverts_to_what_the_log_holds() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    let (first, _) = g.heartbeat(&join("a", &["orders"]), 0, &t).expect("join");
    for r in &first {
        g.replay_stored(&r.to_group_record()).expect("confirmed");
    }
    let durable = g.durable_state().clone();
    // b's join is applied at once (a's next heartbeat must see it) ...
    let (second, _) = g.heartbeat(&join("b", &["orders"]), 1, &t).expect("join");
    assert!(!second.is_empty());
    assert_eq!(g.describe().members.len(), 2);
    // ... and undone when its append fails.
    g.handle_append_failed();
    assert_eq!(g.durable_state(), &durable);
    assert_eq!(g.describe().members.len(), 1);
    // b retries and gets the same partitions as before the failure would have given it.
    let (_, resp) = g
        .heartbeat(&join("b", &["orders"]), 2, &t)
        .expect("join again");
    assert_eq!(resp.member_epoch, 2);
}

#[test]
fn the_group_metadata_tombstone_deletes_the_group() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = group();
    let (records, _) = g.heartbeat(&join("a", &["orders"]), 0, &t).expect("join");
    for r in &records {
        g.replay_stored(&r.to_group_record()).expect("confirmed");
    }
    assert!(!g.is_deleted());
    assert_eq!(g.state_name(), "Stable");
    let keys: Vec<Vec<u8>> = g.durable_records().keys().cloned().collect();
    assert_eq!(
        keys.len(),
        6,
        "one record per key: metadata, topics, member, target x2, current"
    );
    let tombstone = ConsumerGroupRecord {
        group_id: "g".to_string(),
        kind: RecordKind::GroupMetadata(None),
    };
    g.replay_stored(&tombstone.to_group_record())
        .expect("applied");
    assert!(g.is_deleted());
    assert!(g.durable_records().is_empty());
}

#[test]
fn hostile_heartbeats_are_bounded() {
    let t = topics(&[("orders", 1, 4)]);
    let mut g = group();
    // Thousands of unknown subscribed topics and a regex that would backtrack
    // catastrophically elsewhere (the regex crate matches in linear time).
    let names: Vec<String> = (0..5_000).map(|i| format!("missing-{i}")).collect();
    let mut req = join("a", &[]);
    req.subscribed_topic_names = Some(names);
    req.subscribed_topic_regex = Some("(a*)*b".to_string());
    let a = ok(&mut g, req, 0, &t);
    assert!(parts(&a).is_empty());
    // Claims to own 100,000 partitions of topics that do not exist: not an acknowledgement
    // of anything, changes nothing, answers at once.
    let junk = (0..100u8)
        .map(|i| TopicPartitions {
            topic_id: [i; 16],
            partitions: (0..1_000).collect(),
        })
        .collect();
    let before = g.durable_state().clone();
    let r = ok(&mut g, beat("a", 1, Some(junk)), 1, &t);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(g.durable_state(), &before);
    // The member bound holds against a flood of joins (default 1000; 100 here for speed).
    assert_eq!(ConsumerGroupConfig::default().max_size, 1_000);
    let mut g = ConsumerGroup::with_config(
        "g",
        ConsumerGroupConfig {
            max_size: 100,
            ..ConsumerGroupConfig::default()
        },
    );
    let mut refused = 0;
    for i in 0..300 {
        match g.heartbeat(&join(&format!("m{i}"), &["orders"]), 2, &t) {
            Ok(_) => assert!(i < 100),
            Err(code) => {
                assert_eq!(code, GROUP_MAX_SIZE_REACHED);
                refused += 1;
            }
        }
    }
    assert_eq!((g.describe().members.len(), refused), (100, 200));
}
