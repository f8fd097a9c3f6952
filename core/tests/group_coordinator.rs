//! Scenario tests of the classic group protocol and committed offsets in
//! `core::group::Coordinator`, on a virtual clock (see `group_common`).
//! Invariants: I20 (commit acknowledged only once durable), I21 (state = replay of records),
//! I22 (one owner per partition per generation: stale generations fenced).

mod group_common;

use group_common::*;
use minikafka_core::group::records::{GroupMetadataValue, RecordKey};
use minikafka_core::group::state::State;
use minikafka_core::group::*;

const RANGE: (&str, &[u8]) = ("range", b"sub");

/// Two dynamic members through a whole first rebalance; returns (leader, follower, generation).
fn two_member_group(d: &mut Driver) -> (String, String, i32) {
    let (a, ta) = d.new_member(&[RANGE]);
    // The first member alone would complete the join at once (no initial delay in
    // `config()`); hold it with a second member joining before the first is answered is
    // not possible, so let the group stabilise with one, then add the second.
    let ja = d.join_answer(ta).expect("join completes");
    assert_eq!(ja.error_code, ErrorCode::NONE);
    assert_eq!(ja.leader, a);
    let ts = d.sync(&a, ja.generation_id, &[(&a, b"A1")]);
    assert_eq!(
        d.sync_answer(ts).expect("expected in this test").assignment,
        b"A1"
    );

    let (b, tb) = d.new_member(&[RANGE]);
    assert!(d.take(tb).is_none(), "b waits for a to rejoin");
    assert_eq!(
        d.heartbeat(&a, ja.generation_id),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    let ta = d.join(&a, None, &[RANGE]);
    let ja = d.join_answer(ta).expect("expected in this test");
    let jb = d.join_answer(tb).expect("expected in this test");
    assert_eq!(ja.generation_id, jb.generation_id);
    assert_eq!(ja.leader, a, "the leader stays the leader");
    assert_eq!(ja.members.len(), 2, "the leader gets every member");
    assert!(jb.members.is_empty(), "a follower gets no member list");
    (a, b, ja.generation_id)
}

#[test]
fn group_partition_matches_java_string_hash_code() {
    // "test-group".hashCode() = 627841412 (31-polynomial over UTF-16 units).
    assert_eq!(group_partition("test-group", 50), 627_841_412 % 50);
    assert_eq!(group_partition("test-group", 50), 12);
    // "my-group".hashCode() = -1906497762 → & 0x7fffffff = 240985886.
    assert_eq!(group_partition("my-group", 50), 240_985_886 % 50);
    // Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0 (Math.abs would stay negative).
    assert_eq!(group_partition("polygenelubricants", 50), 0);
    assert_eq!(group_partition("polygenelubricants", 7), 0);
    // Non-BMP characters count as two UTF-16 units: hashCode = -1039948164.
    assert_eq!(
        group_partition("grüppe-😀", 50),
        ((-1_039_948_164i32) & 0x7fff_ffff) % 50
    );
    assert_eq!(group_partition("", 50), 0);
    assert_eq!(group_partition("a", 50), 97 % 50);
    assert_eq!(group_partition("a", 0), 0);
}

#[test]
fn join_sync_barrier_and_assignment_from_the_leader() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    assert_eq!(d.state(), Some(State::CompletingRebalance));
    // The follower syncs first: it waits for the leader (the barrier).
    let tb = d.sync(&b, generation, &[]);
    assert!(d.take(tb).is_none());
    // Hold the leader's assignment record: nobody may see it before it is durable.
    d.auto_durable = false;
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    assert!(d.take(ta).is_none() && d.take(tb).is_none());
    assert_eq!(d.state(), Some(State::CompletingRebalance));
    d.release_held();
    assert_eq!(
        d.sync_answer(ta).expect("expected in this test").assignment,
        b"A"
    );
    assert_eq!(
        d.sync_answer(tb).expect("expected in this test").assignment,
        b"B"
    );
    assert_eq!(d.state(), Some(State::Stable));
    assert_eq!(d.heartbeat(&b, generation), ErrorCode::NONE);
    // The stored group says what the coordinator handed out (I21).
    let stored = match d.c.group(GROUP) {
        Some(Group::Classic(g)) => g.stored().cloned().expect("expected in this test"),
        _ => panic!("classic group"),
    };
    assert_eq!(stored.generation, generation);
    assert_eq!(stored.members.len(), 2);
}

#[test]
fn member_id_required_for_v4_and_direct_for_v3() {
    let mut d = Driver::new(config());
    let t = d.join("", None, &[RANGE]);
    let r = d.join_answer(t).expect("expected in this test");
    assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED);
    assert!(r.member_id.starts_with("client-"));
    let mut req = join_request(GROUP, "", None, &[RANGE], 10_000);
    req.version = 3;
    let t = d.send(GroupRequest::JoinGroup(req));
    // The pending id from the v9 join is outstanding: the join phase waits for it (Kafka).
    assert!(d.take(t).is_none());
    d.advance(10_001); // the handed-out id expires, the join completes
    let r = d.join_answer(t).expect("expected in this test");
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!(r.leader, r.member_id);
}

#[test]
fn protocol_selection_is_the_most_voted_common_protocol() {
    let mut d = Driver::new(GroupConfig {
        initial_rebalance_delay_ms: 1_000,
        ..config()
    });
    let p1: &[(&str, &[u8])] = &[("roundrobin", b""), ("range", b""), ("sticky", b"")];
    let p2: &[(&str, &[u8])] = &[("range", b""), ("roundrobin", b"")];
    let p3: &[(&str, &[u8])] = &[("range", b""), ("sticky", b""), ("roundrobin", b"")];
    let (_, t1) = d.new_member(p1);
    let (_, t2) = d.new_member(p2);
    let (_, t3) = d.new_member(p3);
    d.advance(30_000);
    let r1 = d.join_answer(t1).expect("expected in this test");
    assert_eq!(
        r1.protocol_name.as_deref(),
        Some("range"),
        "two votes beat one"
    );
    assert_eq!(
        d.join_answer(t2)
            .expect("expected in this test")
            .protocol_name
            .as_deref(),
        Some("range")
    );
    assert_eq!(
        d.join_answer(t3)
            .expect("expected in this test")
            .protocol_name
            .as_deref(),
        Some("range")
    );
}

#[test]
fn inconsistent_protocols_and_bad_session_timeouts_are_refused() {
    let mut d = Driver::new(config());
    let (_a, ta) = d.new_member(&[RANGE]);
    assert_eq!(
        d.join_answer(ta).expect("expected in this test").error_code,
        ErrorCode::NONE
    );
    // No protocol in common.
    let t = d.join("", None, &[("roundrobin", b"")]);
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    // Another protocol type.
    let mut req = join_request(GROUP, "", None, &[RANGE], 10_000);
    req.protocol_type = "connect".to_owned();
    let t = d.send(GroupRequest::JoinGroup(req));
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    // Empty protocol type or list, even for a new group.
    let mut req = join_request("other", "", None, &[], 10_000);
    let t = d.send(GroupRequest::JoinGroup(req.clone()));
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    req.protocols = vec![JoinProtocol {
        name: "range".into(),
        metadata: vec![],
    }];
    req.protocol_type.clear();
    let t = d.send(GroupRequest::JoinGroup(req));
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    // Session timeouts outside group.min/max.session.timeout.ms.
    for timeout in [5_999, 1_800_001] {
        let t = d.join_to("other", "", None, &[RANGE], timeout);
        assert_eq!(
            d.join_answer(t).expect("expected in this test").error_code,
            ErrorCode::INVALID_SESSION_TIMEOUT
        );
    }
    let t = d.join_to("", "", None, &[RANGE], 10_000);
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INVALID_GROUP_ID
    );
    assert!(
        d.c.group("other").is_none(),
        "refused joins leave nothing behind"
    );
}

#[test]
fn session_expiry_removes_the_member_and_rebalances() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    let tb = d.sync(&b, generation, &[]);
    assert!(d.sync_answer(ta).is_some() && d.sync_answer(tb).is_some());
    // a heartbeats, b goes silent.
    for _ in 0..3 {
        d.advance(3_000);
        assert_eq!(d.heartbeat(&a, generation), ErrorCode::NONE);
    }
    d.advance(1_500);
    assert_eq!(
        d.state(),
        Some(State::PreparingRebalance),
        "b expired at 10 s"
    );
    assert_eq!(d.heartbeat(&b, generation), ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(
        d.commit(&b, generation, "t", 0, 5),
        ErrorCode::UNKNOWN_MEMBER_ID,
        "I22"
    );
    let t = d.join(&a, None, &[RANGE]);
    let r = d.join_answer(t).expect("expected in this test");
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 1);
}

#[test]
fn rebalance_timeout_removes_members_that_do_not_rejoin() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    let tb = d.sync(&b, generation, &[]);
    assert!(d.sync_answer(ta).is_some() && d.sync_answer(tb).is_some());
    // a rejoins (leader rejoin → rebalance); b keeps heartbeating but never rejoins.
    let ta = d.join(&a, None, &[RANGE]);
    for _ in 0..11 {
        d.advance(2_900);
        if d.state() == Some(State::PreparingRebalance) {
            assert_eq!(
                d.heartbeat(&b, generation),
                ErrorCode::REBALANCE_IN_PROGRESS
            );
        }
    }
    let r = d
        .join_answer(ta)
        .expect("join phase ended at the rebalance timeout");
    assert_eq!(r.generation_id, generation + 1);
    assert_eq!(r.members.len(), 1);
    assert_eq!(d.heartbeat(&b, generation), ErrorCode::UNKNOWN_MEMBER_ID);
}

#[test]
fn members_that_do_not_sync_in_time_are_removed() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let tb = d.sync(&b, generation, &[]);
    // The leader heartbeats but never syncs: after the rebalance timeout (30 s) it is
    // removed, and b is told to rejoin.
    for _ in 0..10 {
        d.advance(2_900);
        assert_eq!(d.heartbeat(&a, generation), ErrorCode::NONE);
        assert_eq!(d.heartbeat(&b, generation), ErrorCode::NONE);
    }
    d.advance(1_100);
    let rb = d.sync_answer(tb).expect("expected in this test");
    assert_eq!(rb.error_code, ErrorCode::REBALANCE_IN_PROGRESS);
    assert_eq!(d.heartbeat(&a, generation), ErrorCode::UNKNOWN_MEMBER_ID);
    let tb = d.join(&b, None, &[RANGE]);
    let r = d.join_answer(tb).expect("expected in this test");
    assert_eq!(r.leader, b);
}

#[test]
fn initial_rebalance_delay_waits_for_more_members() {
    let mut d = Driver::new(GroupConfig {
        initial_rebalance_delay_ms: 3_000,
        ..config()
    });
    let (_a, ta) = d.new_member(&[RANGE]);
    d.advance(2_000);
    let (_b, tb) = d.new_member(&[RANGE]);
    d.advance(1_500); // the first delay ended with a new member: another delay
    assert!(d.take(ta).is_none());
    d.advance(3_000);
    let ra = d.join_answer(ta).expect("expected in this test");
    let rb = d.join_answer(tb).expect("expected in this test");
    assert_eq!(ra.generation_id, 1);
    assert_eq!(rb.generation_id, 1);
    assert_eq!(ra.members.len() + rb.members.len(), 2);
}

#[test]
fn group_max_size_is_enforced() {
    let mut d = Driver::new(GroupConfig {
        max_size: 2,
        initial_rebalance_delay_ms: 1_000,
        ..config()
    });
    let (_, _t1) = d.new_member(&[RANGE]);
    let (_, _t2) = d.new_member(&[RANGE]);
    let t = d.join("", None, &[RANGE]);
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::GROUP_MAX_SIZE_REACHED
    );
}

#[test]
fn static_member_rejoin_replaces_the_old_member_id_without_rebalance() {
    let mut d = Driver::new(config());
    let t = d.join("", Some("instance-1"), &[RANGE]);
    let r = d.join_answer(t).expect("expected in this test");
    assert_eq!(
        r.error_code,
        ErrorCode::NONE,
        "static members get an id at once"
    );
    let old = r.member_id.clone();
    let generation = r.generation_id;
    let ts = d.sync(&old, generation, &[(&old, b"P0")]);
    assert_eq!(
        d.sync_answer(ts).expect("expected in this test").assignment,
        b"P0"
    );
    // The instance restarts and rejoins without its member id.
    let t = d.join("", Some("instance-1"), &[RANGE]);
    let r = d.join_answer(t).expect("expected in this test");
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_ne!(r.member_id, old);
    assert_eq!(
        r.generation_id, generation,
        "no rebalance for an unchanged static rejoin"
    );
    assert!(
        r.skip_assignment,
        "the static leader keeps its assignment (v9)"
    );
    assert_eq!(d.state(), Some(State::Stable));
    let new = r.member_id;
    let ts = d.sync(&new, generation, &[]);
    assert_eq!(
        d.sync_answer(ts).expect("expected in this test").assignment,
        b"P0"
    );
    // The old id is fenced everywhere (I22).
    let t = d.send(GroupRequest::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: old.clone(),
        group_instance_id: Some("instance-1".into()),
    }));
    assert_eq!(
        d.take(t),
        Some(GroupResponse::Heartbeat(HeartbeatResponse {
            error_code: ErrorCode::FENCED_INSTANCE_ID
        }))
    );
    let mut req = commit_request(GROUP, &old, generation, "t", 0, 9, None);
    req.group_instance_id = Some("instance-1".into());
    let t = d.send(GroupRequest::OffsetCommit(req));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::FENCED_INSTANCE_ID
    );
    assert_eq!(d.fetch(GROUP, "t", 0), -1);
    // The replacement was stored: a restart knows the new id.
    let restarted = d.restarted();
    match restarted.group(GROUP) {
        Some(Group::Classic(g)) => assert_eq!(g.member_ids(), vec![new]),
        _ => panic!("classic group"),
    }
}

#[test]
fn leave_group_batch_and_rebalance() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let r = d.leave(&[(&b, None), ("nobody", None)]);
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!(r.members[0].error_code, ErrorCode::NONE);
    assert_eq!(r.members[1].error_code, ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(d.state(), Some(State::PreparingRebalance));
    let t = d.join(&a, None, &[RANGE]);
    assert_eq!(
        d.join_answer(t)
            .expect("expected in this test")
            .generation_id,
        generation + 1
    );
    let r = d.leave(&[(&a, None)]);
    assert_eq!(r.members[0].error_code, ErrorCode::NONE);
    assert_eq!(d.state(), Some(State::Empty));
    // Becoming empty is stored: generation + 1 with no members.
    let last = d.log.last().expect("expected in this test");
    assert!(matches!(
        RecordKey::decode(&last.key).expect("expected in this test"),
        RecordKey::GroupMetadata { .. }
    ));
    let v = GroupMetadataValue::decode(last.value.as_ref().expect("expected in this test"))
        .expect("expected in this test");
    assert!(v.members.is_empty());
    assert_eq!(v.generation, generation + 2);
}

#[test]
fn stale_generation_commit_is_rejected_and_never_moves_an_offset() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    // Completing rebalance: the new assignment is not out, commits wait.
    assert_eq!(
        d.commit(&a, generation, "t", 0, 1),
        ErrorCode::REBALANCE_IN_PROGRESS
    );
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    let tb = d.sync(&b, generation, &[]);
    assert!(d.sync_answer(ta).is_some() && d.sync_answer(tb).is_some());
    assert_eq!(d.commit(&a, generation, "t", 0, 10), ErrorCode::NONE);
    // Preparing a rebalance: members of the current generation may still commit (eager
    // clients commit as they revoke).
    let tb = d.join(&b, None, &[("range", b"changed")]);
    assert_eq!(d.state(), Some(State::PreparingRebalance));
    assert_eq!(d.commit(&a, generation, "t", 0, 11), ErrorCode::NONE);
    let ta = d.join(&a, None, &[RANGE]);
    let new_generation = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    assert!(d.join_answer(tb).is_some());
    // The old generation is fenced (I22), and the offset does not move.
    assert_eq!(
        d.commit(&a, generation, "t", 0, 99),
        ErrorCode::ILLEGAL_GENERATION
    );
    assert_eq!(
        d.commit(&a, new_generation + 1, "t", 0, 99),
        ErrorCode::ILLEGAL_GENERATION
    );
    assert_eq!(
        d.commit("intruder", new_generation, "t", 0, 99),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        d.commit("", -1, "t", 0, 99),
        ErrorCode::UNKNOWN_MEMBER_ID,
        "simple commit to a live group"
    );
    assert_eq!(d.fetch(GROUP, "t", 0), 11);
}

#[test]
fn simple_commits_metadata_limit_and_fetch() {
    let mut d = Driver::new(config());
    assert_eq!(d.commit("", -1, "t", 0, 5), ErrorCode::NONE);
    assert_eq!(d.commit("", -1, "t", 1, 7), ErrorCode::NONE);
    assert_eq!(d.commit("m", 3, "t", 0, 5), ErrorCode::UNKNOWN_MEMBER_ID);
    assert_eq!(
        d.commit("m", 3, "t-other-group", 0, 5),
        ErrorCode::UNKNOWN_MEMBER_ID
    );
    let big = "x".repeat(4097);
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        GROUP,
        "",
        -1,
        "t",
        0,
        6,
        Some(big),
    )));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::OFFSET_METADATA_TOO_LARGE
    );
    assert_eq!(d.fetch(GROUP, "t", 0), 5);
    assert_eq!(d.fetch(GROUP, "t", 9), -1);
    assert_eq!(d.fetch("unknown", "t", 0), -1);
    // A commit to a group that does not exist with a generation: ILLEGAL_GENERATION.
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        "nope", "m", 1, "t", 0, 1, None,
    )));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::ILLEGAL_GENERATION
    );
    // All partitions of several groups.
    let t = d.send(GroupRequest::OffsetFetch(OffsetFetchRequest {
        require_stable: false,
        groups: vec![
            OffsetFetchGroup {
                group_id: GROUP.into(),
                topics: None,
            },
            OffsetFetchGroup {
                group_id: "unknown".into(),
                topics: None,
            },
        ],
    }));
    let Some(GroupResponse::OffsetFetch(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(r.groups.len(), 2);
    let parts: Vec<(i32, i64)> = r.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.offset))
        .collect();
    assert_eq!(parts, vec![(0, 5), (1, 7)]);
    assert!(r.groups[1].topics.is_empty());
}

#[test]
fn a_commit_is_acknowledged_only_once_durable_and_a_failed_one_changes_nothing() {
    // I20.
    let mut d = Driver::new(config());
    d.auto_durable = false;
    let t = d.commit_async("", -1, "t", 0, 5);
    assert!(
        d.take(t).is_none(),
        "no answer before the record is durable"
    );
    assert_eq!(d.fetch(GROUP, "t", 0), -1, "not visible before durable");
    d.release_held();
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::NONE
    );
    assert_eq!(d.fetch(GROUP, "t", 0), 5);
    d.auto_durable = true;
    d.fail_next = 1;
    let before = d.c.durable_state();
    assert_eq!(
        d.commit("", -1, "t", 0, 6),
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(d.c.durable_state(), before);
    d.fail_next = 1;
    d.failure = AppendError::TooLarge;
    assert_eq!(
        d.commit("", -1, "t", 0, 6),
        ErrorCode::INVALID_COMMIT_OFFSET_SIZE
    );
    d.fail_next = 1;
    // A full disk or an offline offsets partition: retriable, as Kafka answers it.
    d.failure = AppendError::Storage;
    assert_eq!(d.commit("", -1, "t", 0, 6), ErrorCode::NOT_COORDINATOR);
    assert_eq!(d.fetch(GROUP, "t", 0), 5);
}

#[test]
fn a_failed_assignment_store_fails_every_sync_and_rebalances() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let tb = d.sync(&b, generation, &[]);
    d.fail_next = 1;
    let before = d.c.durable_state();
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    assert_eq!(
        d.sync_answer(ta).expect("expected in this test").error_code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    let rb = d.sync_answer(tb).expect("expected in this test");
    assert_eq!(rb.error_code, ErrorCode::COORDINATOR_NOT_AVAILABLE);
    assert!(
        rb.assignment.is_empty(),
        "nobody got the assignment that was not stored"
    );
    assert_eq!(d.c.durable_state(), before);
    assert_eq!(d.state(), Some(State::PreparingRebalance));
}

#[test]
fn an_assignment_store_failing_for_storage_is_answered_not_coordinator() {
    // A full disk under the offsets log: SyncGroup gets a code the client retries (Kafka's
    // mapping of a storage error), and nobody gets the assignment that was not stored.
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let tb = d.sync(&b, generation, &[]);
    d.fail_next = 1;
    d.failure = AppendError::Storage;
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    let ra = d.sync_answer(ta).expect("expected in this test");
    let rb = d.sync_answer(tb).expect("expected in this test");
    assert_eq!(ra.error_code, ErrorCode::NOT_COORDINATOR);
    assert_eq!(rb.error_code, ErrorCode::NOT_COORDINATOR);
    assert!(rb.assignment.is_empty());
    assert_eq!(d.state(), Some(State::PreparingRebalance));
}

#[test]
fn delete_groups_list_describe_and_offset_delete() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    assert!(d.sync_answer(ta).is_some());
    let topic_sub = subscription(&["t"]);
    let _ = topic_sub;
    assert_eq!(d.commit("", -1, "x", 0, 3), ErrorCode::UNKNOWN_MEMBER_ID);
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        "simple", "", -1, "x", 0, 3, None,
    )));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::NONE
    );

    let t = d.send(GroupRequest::ListGroups(ListGroupsRequest::default()));
    let Some(GroupResponse::ListGroups(r)) = d.take(t) else {
        panic!()
    };
    let listed: Vec<(&str, &str)> = r
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.group_state.as_str()))
        .collect();
    assert_eq!(listed, vec![(GROUP, "Stable"), ("simple", "Empty")]);
    let t = d.send(GroupRequest::ListGroups(ListGroupsRequest {
        states_filter: vec!["empty".into()],
        types_filter: vec!["Classic".into()],
    }));
    let Some(GroupResponse::ListGroups(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].group_type, "classic");
    let t = d.send(GroupRequest::ListGroups(ListGroupsRequest {
        states_filter: vec![],
        types_filter: vec!["consumer".into()],
    }));
    let Some(GroupResponse::ListGroups(r)) = d.take(t) else {
        panic!()
    };
    assert!(r.groups.is_empty());

    let t = d.send(GroupRequest::DescribeGroups(DescribeGroupsRequest {
        group_ids: vec![GROUP.into(), "missing".into()],
    }));
    let Some(GroupResponse::DescribeGroups(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(r.groups[0].group_state, "Stable");
    assert_eq!(r.groups[0].protocol_data, "range");
    assert_eq!(r.groups[0].members.len(), 2);
    assert_eq!(r.groups[1].error_code, ErrorCode::GROUP_ID_NOT_FOUND);

    let t = d.send(GroupRequest::DeleteGroups(DeleteGroupsRequest {
        group_ids: vec![GROUP.into(), "simple".into(), "missing".into()],
    }));
    let Some(GroupResponse::DeleteGroups(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(
        r.results,
        vec![
            (GROUP.to_owned(), ErrorCode::NON_EMPTY_GROUP),
            ("simple".to_owned(), ErrorCode::NONE),
            ("missing".to_owned(), ErrorCode::GROUP_ID_NOT_FOUND),
        ]
    );
    assert!(d.c.group("simple").is_none());
    assert_eq!(d.fetch("simple", "x", 0), -1);
    // Deleted stays deleted after a restart: the tombstones replay.
    let restarted = d.restarted();
    assert!(restarted.group("simple").is_none());
    assert_eq!(restarted.durable_state(), d.c.durable_state());

    // OffsetDelete: refused for a subscribed topic of a live consumer group, allowed else.
    let mut d = Driver::new(config());
    let sub = subscription(&["t"]);
    let (a, ta) = d.new_member(&[("range", &sub)]);
    let generation = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    let ts = d.sync(&a, generation, &[(&a, b"")]);
    assert!(d.sync_answer(ts).is_some());
    assert_eq!(d.commit(&a, generation, "t", 0, 4), ErrorCode::NONE);
    assert_eq!(d.commit(&a, generation, "u", 0, 4), ErrorCode::NONE);
    let t = d.send(GroupRequest::OffsetDelete(OffsetDeleteRequest {
        group_id: GROUP.into(),
        topics: vec![
            TopicPartitions {
                name: "t".into(),
                partitions: vec![0],
            },
            TopicPartitions {
                name: "u".into(),
                partitions: vec![0],
            },
        ],
    }));
    let Some(GroupResponse::OffsetDelete(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC
    );
    assert_eq!(r.topics[1].partitions[0].error_code, ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 4);
    assert_eq!(d.fetch(GROUP, "u", 0), -1);
    let t = d.send(GroupRequest::OffsetDelete(OffsetDeleteRequest {
        group_id: "missing".into(),
        topics: vec![],
    }));
    let Some(GroupResponse::OffsetDelete(r)) = d.take(t) else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::GROUP_ID_NOT_FOUND);
}

#[test]
fn offsets_of_empty_groups_expire_never_while_members_remain() {
    let cfg = GroupConfig {
        offsets_retention_ms: 100_000,
        offsets_retention_check_interval_ms: 10_000,
        ..config()
    };
    let mut d = Driver::new(cfg);
    // A live member keeps the group's offsets forever.
    let (a, ta) = d.new_member(&[RANGE]);
    let generation = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    let ts = d.sync(&a, generation, &[(&a, b"")]);
    assert!(d.sync_answer(ts).is_some());
    assert_eq!(d.commit(&a, generation, "t", 0, 1), ErrorCode::NONE);
    assert_eq!(d.commit("", -1, "t", 0, 1), ErrorCode::UNKNOWN_MEMBER_ID);
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        "simple", "", -1, "t", 0, 2, None,
    )));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::NONE
    );
    for _ in 0..30 {
        d.advance(5_000);
        assert_eq!(d.heartbeat(&a, generation), ErrorCode::NONE);
    }
    assert_eq!(d.fetch(GROUP, "t", 0), 1, "members: never expired");
    assert_eq!(d.fetch("simple", "t", 0), -1, "empty group: expired");
    assert!(
        d.c.group("simple").is_none(),
        "an empty, offset-less group is removed"
    );
    // Once the member leaves, the retention runs from when the group became empty.
    d.leave(&[(&a, None)]);
    d.advance(90_000);
    assert_eq!(d.fetch(GROUP, "t", 0), 1);
    d.advance(20_000);
    assert_eq!(d.fetch(GROUP, "t", 0), -1);
    assert!(d.c.group(GROUP).is_none());
    let restarted = d.restarted();
    assert!(
        restarted.durable_state().is_empty(),
        "expiry tombstones replay"
    );
}

#[test]
fn restart_replays_offsets_and_the_stable_group() {
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    assert!(d.sync_answer(ta).is_some());
    assert_eq!(d.commit(&a, generation, "t", 0, 42), ErrorCode::NONE);
    let mut c = d.restarted();
    assert_eq!(c.durable_state(), d.c.durable_state(), "I21");
    assert_eq!(c.group_state(GROUP), Some(State::Stable));
    // The stored members may keep committing and heartbeating in their generation.
    c.handle_request(
        RequestToken(1),
        GroupRequest::Heartbeat(HeartbeatRequest {
            group_id: GROUP.into(),
            generation_id: generation,
            member_id: b.clone(),
            group_instance_id: None,
        }),
        d.now,
    );
    assert_eq!(
        c.poll_response(),
        Some((
            RequestToken(1),
            GroupResponse::Heartbeat(HeartbeatResponse {
                error_code: ErrorCode::NONE
            })
        ))
    );
    // Their sessions started at the restart: silence expires them, and a group whose
    // members all expired ends its join phase at once, empty, in the next generation.
    c.handle_timeout(d.now + 10_001);
    assert_eq!(c.group_state(GROUP), Some(State::Empty));
    match c.group(GROUP) {
        Some(Group::Classic(g)) => assert_eq!(g.generation(), generation + 1),
        _ => panic!("classic group"),
    }
}

#[test]
fn cooperative_clients_rebalance_twice() {
    // cooperative-sticky: after the first rebalance a member revokes what moved and rejoins
    // at once with changed metadata (its owned partitions); a second rebalance follows.
    let mut d = Driver::new(config());
    let coop = |owned: &'static [u8]| [("cooperative-sticky", owned)];
    let (a, ta) = d.new_member(&coop(b"owned:p0,p1"));
    let g1 = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    let ts = d.sync(&a, g1, &[(&a, b"p0,p1")]);
    assert!(d.sync_answer(ts).is_some());
    let (b, tb) = d.new_member(&coop(b"owned:"));
    assert_eq!(d.heartbeat(&a, g1), ErrorCode::REBALANCE_IN_PROGRESS);
    // a may commit while revoking.
    assert_eq!(d.commit(&a, g1, "t", 0, 7), ErrorCode::NONE);
    let ta = d.join(&a, None, &coop(b"owned:p0,p1"));
    let g2 = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    assert!(d.join_answer(tb).is_some());
    // Leader keeps p0 for a, gives nothing to b yet (p1 must be revoked first).
    let ta = d.sync(&a, g2, &[(&a, b"p0"), (&b, b"")]);
    let tb = d.sync(&b, g2, &[]);
    assert_eq!(
        d.sync_answer(ta).expect("expected in this test").assignment,
        b"p0"
    );
    assert_eq!(
        d.sync_answer(tb).expect("expected in this test").assignment,
        b""
    );
    // a revoked p1 and rejoins immediately: second rebalance.
    let ta = d.join(&a, None, &coop(b"owned:p0"));
    assert_eq!(d.state(), Some(State::PreparingRebalance));
    assert_eq!(d.heartbeat(&b, g2), ErrorCode::REBALANCE_IN_PROGRESS);
    let tb = d.join(&b, None, &coop(b"owned:"));
    let g3 = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    assert_eq!(
        d.join_answer(tb)
            .expect("expected in this test")
            .generation_id,
        g3
    );
    let ta = d.sync(&a, g3, &[(&a, b"p0"), (&b, b"p1")]);
    let tb = d.sync(&b, g3, &[]);
    assert_eq!(
        d.sync_answer(ta).expect("expected in this test").assignment,
        b"p0"
    );
    assert_eq!(
        d.sync_answer(tb).expect("expected in this test").assignment,
        b"p1"
    );
    assert_eq!(d.state(), Some(State::Stable));
    assert_eq!(g3, g1 + 2);
}

#[test]
fn hostile_joins_are_bounded() {
    let mut d = Driver::new(GroupConfig {
        max_size: 1_000,
        initial_rebalance_delay_ms: 60_000,
        ..config()
    });
    // Thousands of joins: at most group.max.size are admitted (ids handed out count).
    let mut refused = 0;
    for _ in 0..3_000 {
        let t = d.join("", None, &[RANGE]);
        if d.join_answer(t).expect("expected in this test").error_code
            == ErrorCode::GROUP_MAX_SIZE_REACHED
        {
            refused += 1;
        }
    }
    assert_eq!(refused, 2_000);
    // Huge protocol metadata and too many protocols: INVALID_REQUEST, nothing kept.
    let huge = vec![0u8; (1 << 20) + 1];
    let t = d.join_to("h", "", None, &[("range", &huge)], 10_000);
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INVALID_REQUEST
    );
    let names: Vec<String> = (0..65).map(|i| format!("p{i}")).collect();
    let many: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let t = d.join_to("h", "", None, &many, 10_000);
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::INVALID_REQUEST
    );
    assert!(d.c.group("h").is_none());
    // An unknown protocol type is fine for a new group (Kafka accepts any), and then must
    // match for everyone else.
    let mut req = join_request("h", "", None, &[RANGE], 10_000);
    req.protocol_type = "\u{0}weird".into();
    let t = d.send(GroupRequest::JoinGroup(req));
    assert_eq!(
        d.join_answer(t).expect("expected in this test").error_code,
        ErrorCode::MEMBER_ID_REQUIRED
    );
}

#[test]
fn the_table_outcome_is_what_requests_get() {
    // Heartbeat in each live state answers what the state table says.
    use minikafka_core::group::state::{transition, Event, Outcome};
    let mut d = Driver::new(config());
    let (a, b, generation) = two_member_group(&mut d);
    let expect = |s: State| match transition(s, Event::Heartbeat) {
        Outcome::Goto(_) => ErrorCode::NONE,
        Outcome::Reject(code) => code,
        Outcome::Impossible => unreachable!(),
    };
    assert_eq!(
        d.heartbeat(&b, generation),
        expect(State::CompletingRebalance)
    );
    let ta = d.sync(&a, generation, &[(&a, b"A"), (&b, b"B")]);
    assert!(d.sync_answer(ta).is_some());
    assert_eq!(d.heartbeat(&b, generation), expect(State::Stable));
    let _ = d.join(&a, None, &[RANGE]);
    assert_eq!(
        d.heartbeat(&b, generation),
        expect(State::PreparingRebalance)
    );
}

#[test]
fn sync_v5_checks_protocol_type_and_name() {
    let mut d = Driver::new(config());
    let (a, ta) = d.new_member(&[RANGE]);
    let generation = d
        .join_answer(ta)
        .expect("expected in this test")
        .generation_id;
    let mut req = SyncGroupRequest {
        version: 5,
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: a.clone(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("roundrobin".into()),
        assignments: vec![],
    };
    let t = d.send(GroupRequest::SyncGroup(req.clone()));
    assert_eq!(
        d.sync_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    req.protocol_name = Some("range".into());
    req.protocol_type = Some("connect".into());
    let t = d.send(GroupRequest::SyncGroup(req.clone()));
    assert_eq!(
        d.sync_answer(t).expect("expected in this test").error_code,
        ErrorCode::INCONSISTENT_GROUP_PROTOCOL
    );
    req.protocol_type = Some("consumer".into());
    req.generation_id = generation + 1;
    let t = d.send(GroupRequest::SyncGroup(req.clone()));
    assert_eq!(
        d.sync_answer(t).expect("expected in this test").error_code,
        ErrorCode::ILLEGAL_GENERATION
    );
    req.generation_id = generation;
    req.assignments = vec![(a.clone(), b"mine".to_vec())];
    let t = d.send(GroupRequest::SyncGroup(req));
    let r = d.sync_answer(t).expect("expected in this test");
    assert_eq!(
        (r.error_code, r.assignment.as_slice()),
        (ErrorCode::NONE, &b"mine"[..])
    );
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
}

#[test]
fn commit_retention_time_is_an_explicit_expiry() {
    let mut d = Driver::new(GroupConfig {
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    let mut req = commit_request(GROUP, "", -1, "t", 0, 5, Some("meta".into()));
    req.version = 2;
    req.retention_time_ms = 5_000;
    let t = d.send(GroupRequest::OffsetCommit(req));
    assert_eq!(
        commit_code(d.take(t).expect("expected in this test")),
        ErrorCode::NONE
    );
    let rec = d.log.last().expect("expected in this test");
    let v = records::OffsetCommitValue::decode(rec.value.as_ref().expect("expected in this test"))
        .expect("expected in this test");
    assert_eq!(v.expire_timestamp, Some(d.now + 5_000));
    assert_eq!(
        rec.value.as_ref().expect("expected in this test")[..2],
        [0, 1],
        "value version 1 carries the expiry"
    );
    d.advance(4_000);
    assert_eq!(d.fetch(GROUP, "t", 0), 5);
    d.advance(2_000);
    assert_eq!(d.fetch(GROUP, "t", 0), -1);
}

#[test]
fn consumer_protocol_requests_and_records_route_to_the_consumer_group() {
    let mut d = Driver::new(config());
    // A heartbeat creates a consumer group and is answered once its records are durable.
    let mut topics = consumer::TopicMetadata::new();
    topics.topics.insert(
        "t".into(),
        consumer::TopicInfo {
            topic_id: [1; 16],
            partition_count: 2,
        },
    );
    d.c.handle_topic_metadata(topics);
    let t = d.send(GroupRequest::ConsumerGroupHeartbeat(
        consumer::HeartbeatRequest {
            version: 1,
            group_id: "cg".into(),
            member_id: "m".into(),
            rebalance_timeout_ms: 10_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            topic_partitions: Some(Vec::new()),
            ..Default::default()
        },
    ));
    let Some(GroupResponse::ConsumerGroupHeartbeat(r)) = d.take(t) else {
        panic!("heartbeat answered")
    };
    assert_eq!((r.error_code, r.member_epoch), (ErrorCode::NONE, 1));
    assert!(matches!(d.c.group("cg"), Some(Group::Consumer(_))));
    assert!(!d.log.is_empty());
    // Its records (key versions 3–8) replay into a consumer group and stay durable (I21)...
    let mut c = Coordinator::new(config(), 1);
    let record = |kind| consumer_records::ConsumerGroupRecord {
        group_id: "cg".into(),
        kind,
    };
    let metadata = record(consumer_records::RecordKind::GroupMetadata(Some(
        consumer_records::GroupMetadataValue { epoch: 1 },
    )));
    let member = record(consumer_records::RecordKind::MemberMetadata {
        member_id: "m".into(),
        value: Some(consumer_records::MemberMetadataValue {
            instance_id: None,
            rack_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 10_000,
            server_assignor: None,
        }),
    });
    let topics_seen = record(consumer_records::RecordKind::PartitionMetadata(Some(
        consumer_records::PartitionMetadataValue {
            epoch: 1,
            topics: Vec::new(),
        },
    )));
    let key3 = metadata.encode_key();
    for r in [&metadata, &member] {
        c.replay(&r.encode_key(), r.encode_value().as_deref())
            .expect("expected in this test");
    }
    assert!(matches!(c.group("cg"), Some(Group::Consumer(_))));
    assert_eq!(c.durable_state()["cg"].consumer_records.len(), 2);
    // ...show up in ListGroups as type consumer, are refused by DescribeGroups (not classic)...
    c.handle_request(
        RequestToken(1),
        GroupRequest::ListGroups(ListGroupsRequest {
            states_filter: vec![],
            types_filter: vec!["consumer".into()],
        }),
        0,
    );
    let Some((_, GroupResponse::ListGroups(r))) = c.poll_response() else {
        panic!()
    };
    assert_eq!(r.groups.len(), 1);
    assert_eq!(r.groups[0].group_type, "consumer");
    c.handle_request(
        RequestToken(2),
        GroupRequest::JoinGroup(join_request("cg", "", None, &[RANGE], 10_000)),
        0,
    );
    let Some((_, GroupResponse::JoinGroup(r))) = c.poll_response() else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
    assert!(matches!(c.group("cg"), Some(Group::Consumer(_))));
    // ...and DeleteGroups (of a group without members) tombstones all of them; the group's
    // metadata tombstone, last, removes it.
    let mut c = Coordinator::new(config(), 1);
    for r in [&metadata, &topics_seen] {
        c.replay(&r.encode_key(), r.encode_value().as_deref())
            .expect("expected in this test");
    }
    c.handle_request(
        RequestToken(3),
        GroupRequest::DeleteGroups(DeleteGroupsRequest {
            group_ids: vec!["cg".into()],
        }),
        0,
    );
    let append = c.poll_append().expect("expected in this test");
    assert!(append.records.iter().all(|r| r.value.is_none()));
    assert_eq!(
        append.records.last().expect("expected in this test").key,
        key3
    );
    c.handle_appended(append.id, Ok(()), 0);
    assert!(c.group("cg").is_none());
    assert!(c.durable_state().is_empty());
}

#[test]
fn strings_too_long_for_a_record_are_refused() {
    let mut d = Driver::new(config());
    let long = "g".repeat(40_000);
    let t = d.join_to(&long, "", None, &[RANGE], 10_000);
    assert_eq!(
        d.join_answer(t).expect("answered").error_code,
        ErrorCode::INVALID_GROUP_ID
    );
    let mut req = join_request(GROUP, "", None, &[RANGE], 10_000);
    req.client_id = long.clone();
    let t = d.send(GroupRequest::JoinGroup(req));
    assert_eq!(
        d.join_answer(t).expect("answered").error_code,
        ErrorCode::INVALID_REQUEST
    );
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        GROUP, "", -1, &long, 0, 1, None,
    )));
    assert_eq!(
        commit_code(d.take(t).expect("answered")),
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
    );
    let t = d.send(GroupRequest::OffsetCommit(commit_request(
        &long, "", -1, "t", 0, 1, None,
    )));
    assert_eq!(
        commit_code(d.take(t).expect("answered")),
        ErrorCode::INVALID_GROUP_ID
    );
    assert!(d.c.durable_state().is_empty());
    // A long (but valid) client id makes a member id that still fits a record.
    let mut req = join_request(GROUP, "", None, &[RANGE], 10_000);
    req.client_id = "c".repeat(30_000);
    let t = d.send(GroupRequest::JoinGroup(req));
    let r = d.join_answer(t).expect("answered");
    assert_eq!(r.error_code, ErrorCode::MEMBER_ID_REQUIRED);
    assert!(r.member_id.len() < 300);
}
