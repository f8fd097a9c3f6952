//! Transactional offsets in `core::group::Coordinator` (TxnOffsetCommit, the transaction's
//! end, `require_stable`), on a virtual clock (see `group_common`).
//! Invariants: I73 (pending until the marker: commit visible, abort vanishes), I74 (the
//! end is durable, replay rebuilds pending state), I75 (v3+ fenced by the group), I76
//! (require_stable answers UNSTABLE_OFFSET_COMMIT).

mod group_common;

use group_common::*;
use minikafka_core::group::*;

const PID: i64 = 4000;
const EPOCH: i16 = 3;
/// The transaction coordinator epoch `complete` sends: its marker must carry it (I175).
const COORDINATOR_EPOCH: i32 = 6;

fn txn_commit(
    version: i16,
    generation_id: i32,
    member_id: &str,
    instance: Option<&str>,
    offsets: &[(&str, i32, i64)],
) -> TxnOffsetCommitRequest {
    let mut topics: Vec<CommitTopic> = Vec::new();
    for (t, p, o) in offsets {
        if topics.last().map(|x| x.name.as_str()) != Some(*t) {
            topics.push(CommitTopic {
                name: (*t).to_owned(),
                partitions: Vec::new(),
            });
        }
        if let Some(topic) = topics.last_mut() {
            topic.partitions.push(CommitPartition {
                partition: *p,
                offset: *o,
                leader_epoch: -1,
                metadata: Some("m".into()),
            });
        }
    }
    TxnOffsetCommitRequest {
        version,
        transactional_id: "tx".into(),
        group_id: GROUP.into(),
        producer_id: PID,
        producer_epoch: EPOCH,
        generation_id,
        member_id: member_id.into(),
        group_instance_id: instance.map(str::to_owned),
        topics,
    }
}

fn codes(resp: GroupResponse) -> Vec<ErrorCode> {
    match resp {
        GroupResponse::TxnOffsetCommit(r) => r
            .topics
            .into_iter()
            .flat_map(|t| t.partitions.into_iter().map(|p| p.error_code))
            .collect(),
        other => panic!("not a TxnOffsetCommit answer: {other:?}"),
    }
}

fn send_txn(d: &mut Driver, req: TxnOffsetCommitRequest) -> Vec<ErrorCode> {
    let t = d.send(GroupRequest::TxnOffsetCommit(req));
    codes(d.take(t).expect("answered once durable"))
}

fn complete(d: &mut Driver, result: TxnResult) -> ErrorCode {
    let t = d.send(GroupRequest::CompleteTxn(CompleteTxnRequest {
        group_id: GROUP.into(),
        producer_id: PID,
        producer_epoch: EPOCH,
        coordinator_epoch: COORDINATOR_EPOCH,
        result,
    }));
    match d.take(t).expect("answered") {
        GroupResponse::CompleteTxn(r) => r.error_code,
        other => panic!("not a CompleteTxn answer: {other:?}"),
    }
}

/// OffsetFetch of one partition with `require_stable`: (offset, code).
fn fetch_stable(d: &mut Driver, require_stable: bool, p: i32) -> (i64, ErrorCode) {
    let t = d.send(GroupRequest::OffsetFetch(OffsetFetchRequest {
        require_stable,
        groups: vec![OffsetFetchGroup {
            group_id: GROUP.into(),
            topics: Some(vec![TopicPartitions {
                name: "t".into(),
                partitions: vec![p],
            }]),
        }],
    }));
    match d.take(t).expect("answered") {
        GroupResponse::OffsetFetch(r) => {
            let o = &r.groups[0].topics[0].partitions[0];
            (o.offset, o.error_code)
        }
        other => panic!("not a fetch answer: {other:?}"),
    }
}

#[test]
fn pending_offsets_become_visible_on_commit() {
    // I73: invisible until the commit marker, then visible.
    let mut d = Driver::new(config());
    assert_eq!(
        send_txn(
            &mut d,
            txn_commit(0, -1, "", None, &[("t", 0, 10), ("t", 1, 20)])
        ),
        vec![ErrorCode::NONE; 2]
    );
    assert_eq!(
        d.fetch(GROUP, "t", 0),
        -1,
        "pending offsets are not visible"
    );
    assert!(
        matches!(d.batches.last(), Some((AppendKind::Transactional { producer_id: PID, producer_epoch: EPOCH }, r)) if r.len() == 2),
        "written as one transactional batch with the producer: {:?}",
        d.batches.last()
    );
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert!(matches!(
        d.batches.last(),
        Some((
            AppendKind::Marker {
                producer_id: PID,
                coordinator_epoch: COORDINATOR_EPOCH,
                result: TxnResult::Commit,
                ..
            },
            _
        ))
    ));
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
    assert_eq!(d.fetch(GROUP, "t", 1), 20);
    // A second completion (a retry) has nothing left to do and writes nothing.
    let before = d.batches.len();
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.batches.len(), before);
}

#[test]
fn aborted_offsets_vanish_and_earlier_commits_stay() {
    // I73: an abort discards the pending offsets; the committed offset before stays.
    let mut d = Driver::new(config());
    assert_eq!(d.commit("", -1, "t", 0, 5), ErrorCode::NONE);
    send_txn(&mut d, txn_commit(3, -1, "", None, &[("t", 0, 50)]));
    assert_eq!(d.fetch(GROUP, "t", 0), 5);
    assert_eq!(complete(&mut d, TxnResult::Abort), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 5, "the aborted offset vanished");
    assert!(d.c.durable_state()[GROUP].pending_txn.is_empty());
}

#[test]
fn aborted_offsets_of_an_unknown_group_leave_no_group() {
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 50)]));
    assert!(
        d.c.group(GROUP).is_some(),
        "a group with pending offsets exists"
    );
    complete(&mut d, TxnResult::Abort);
    assert!(
        d.c.group(GROUP).is_none(),
        "nothing left: the group is gone"
    );
}

#[test]
fn replay_rebuilds_pending_and_completed_offsets() {
    // I74, I21: a restart between the commit and the marker keeps the offsets pending; the
    // marker after the restart completes them; a replayed marker applies them.
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 10)]));
    let restarted = d.restarted();
    assert_eq!(restarted.durable_state(), d.c.durable_state());
    assert_eq!(
        restarted.durable_state()[GROUP].pending_txn[&PID].len(),
        1,
        "pending after replay"
    );
    d.c = restarted;
    assert_eq!(
        fetch_stable(&mut d, true, 0).1,
        ErrorCode::UNSTABLE_OFFSET_COMMIT
    );
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
    let restarted = d.restarted();
    assert_eq!(restarted.durable_state(), d.c.durable_state());
    assert!(restarted.durable_state()[GROUP].pending_txn.is_empty());
    assert_eq!(
        restarted.durable_state()[GROUP].offsets[&("t".to_string(), 0)].offset,
        10
    );
}

#[test]
fn completion_waits_for_its_marker_to_be_durable() {
    // I74: the end is acknowledged only once its marker is durable, and applied then.
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 10)]));
    d.auto_durable = false;
    let t = d.send(GroupRequest::CompleteTxn(CompleteTxnRequest {
        group_id: GROUP.into(),
        producer_id: PID,
        producer_epoch: EPOCH,
        coordinator_epoch: 0,
        result: TxnResult::Commit,
    }));
    assert!(d.take(t).is_none(), "not acknowledged before durable");
    assert_eq!(d.fetch(GROUP, "t", 0), -1, "not applied before durable");
    d.auto_durable = true;
    d.release_held();
    assert!(d.take(t).is_some());
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
}

#[test]
fn a_failed_marker_append_fails_the_completion_and_keeps_offsets_pending() {
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 10)]));
    d.fail_next = 1;
    assert_eq!(
        complete(&mut d, TxnResult::Commit),
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
    assert_eq!(
        fetch_stable(&mut d, true, 0).1,
        ErrorCode::UNSTABLE_OFFSET_COMMIT
    );
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
}

#[test]
fn a_completion_behind_an_inflight_commit_applies_it_in_log_order() {
    // The marker queued after a transactional append still in flight completes it too.
    let mut d = Driver::new(config());
    d.auto_durable = false;
    let tc = d.send(GroupRequest::TxnOffsetCommit(txn_commit(
        0,
        -1,
        "",
        None,
        &[("t", 0, 10)],
    )));
    let te = d.send(GroupRequest::CompleteTxn(CompleteTxnRequest {
        group_id: GROUP.into(),
        producer_id: PID,
        producer_epoch: EPOCH,
        coordinator_epoch: 0,
        result: TxnResult::Commit,
    }));
    assert_eq!(d.held.len(), 2, "the marker is written behind the commit");
    d.auto_durable = true;
    d.release_held();
    assert_eq!(codes(d.take(tc).expect("answered")), vec![ErrorCode::NONE]);
    assert!(d.take(te).is_some());
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
}

#[test]
fn require_stable_answers_unstable_while_pending() {
    // I76 (KIP-447).
    let mut d = Driver::new(config());
    assert_eq!(d.commit("", -1, "t", 0, 5), ErrorCode::NONE);
    send_txn(&mut d, txn_commit(2, -1, "", None, &[("t", 0, 50)]));
    assert_eq!(
        fetch_stable(&mut d, true, 0),
        (-1, ErrorCode::UNSTABLE_OFFSET_COMMIT)
    );
    assert_eq!(fetch_stable(&mut d, false, 0), (5, ErrorCode::NONE));
    assert_eq!(
        fetch_stable(&mut d, true, 1),
        (-1, ErrorCode::NONE),
        "other partitions are stable"
    );
    complete(&mut d, TxnResult::Commit);
    assert_eq!(fetch_stable(&mut d, true, 0), (50, ErrorCode::NONE));
}

#[test]
fn v3_commits_are_fenced_by_generation_and_member() {
    // I75: as Kafka fences a transactional commit of a classic group.
    let mut d = Driver::new(config());
    let (m, t) = d.new_member(&[("range", b"sub")]);
    let j = d.join_answer(t).expect("join completes");
    let ts = d.sync(&m, j.generation_id, &[(&m, b"A")]);
    d.sync_answer(ts).expect("synced");
    let gen = j.generation_id;
    let ok = send_txn(&mut d, txn_commit(3, gen, &m, None, &[("t", 0, 1)]));
    assert_eq!(ok, vec![ErrorCode::NONE]);
    assert_eq!(
        send_txn(&mut d, txn_commit(3, gen + 1, &m, None, &[("t", 0, 1)])),
        vec![ErrorCode::ILLEGAL_GENERATION]
    );
    assert_eq!(
        send_txn(&mut d, txn_commit(3, gen, "nobody", None, &[("t", 0, 1)])),
        vec![ErrorCode::UNKNOWN_MEMBER_ID]
    );
    // No generation and no member (every v0–v2 commit): not fenced by the group.
    assert_eq!(
        send_txn(&mut d, txn_commit(2, -1, "", None, &[("t", 0, 1)])),
        vec![ErrorCode::NONE]
    );
    // A generation for a group that does not exist.
    let mut other = txn_commit(3, 4, "m", None, &[("t", 0, 1)]);
    other.group_id = "nope".into();
    assert_eq!(send_txn(&mut d, other), vec![ErrorCode::ILLEGAL_GENERATION]);
}

#[test]
fn a_replaced_static_member_is_fenced() {
    // I75: FENCED_INSTANCE_ID for an instance id now owned by another member id.
    let mut d = Driver::new(config());
    let t = d.join("", Some("inst"), &[("range", b"sub")]);
    let j = d.join_answer(t).expect("static join completes");
    let ts = d.sync(&j.member_id, j.generation_id, &[(&j.member_id, b"A")]);
    d.sync_answer(ts).expect("synced");
    assert_eq!(
        send_txn(
            &mut d,
            txn_commit(3, j.generation_id, "old-id", Some("inst"), &[("t", 0, 1)])
        ),
        vec![ErrorCode::FENCED_INSTANCE_ID]
    );
    assert_eq!(
        send_txn(
            &mut d,
            txn_commit(
                3,
                j.generation_id,
                &j.member_id,
                Some("inst"),
                &[("t", 0, 1)]
            )
        ),
        vec![ErrorCode::NONE]
    );
}

#[test]
fn a_stale_producer_epoch_is_refused() {
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 1)]));
    let mut stale = txn_commit(0, -1, "", None, &[("t", 0, 2)]);
    stale.producer_epoch = EPOCH - 1;
    assert_eq!(
        send_txn(&mut d, stale),
        vec![ErrorCode::INVALID_PRODUCER_EPOCH]
    );
    let mut bad = txn_commit(0, -1, "", None, &[("t", 0, 2)]);
    bad.producer_id = -1;
    assert_eq!(
        send_txn(&mut d, bad),
        vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]
    );
}

#[test]
fn a_marker_completes_the_producer_in_every_group_of_the_coordinator() {
    // As Kafka's marker on an offsets partition: per producer, not per group.
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 1)]));
    let mut other = txn_commit(0, -1, "", None, &[("t", 0, 7)]);
    other.group_id = "g2".into();
    send_txn(&mut d, other);
    complete(&mut d, TxnResult::Commit);
    assert_eq!(d.fetch(GROUP, "t", 0), 1);
    assert_eq!(d.fetch("g2", "t", 0), 7);
}

#[test]
fn pending_offsets_keep_their_group_through_the_retention_check() {
    // I73: a group holding only pending offsets is not expired; the commit marker finds it.
    let mut d = Driver::new(GroupConfig {
        offsets_retention_ms: 1_000,
        offsets_retention_check_interval_ms: 1_000,
        ..config()
    });
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 10)]));
    d.advance(10_000);
    assert!(d.c.group(GROUP).is_some(), "kept while offsets are pending");
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 10);
    assert_eq!(d.restarted().durable_state(), d.c.durable_state());
    // Once committed, the offsets expire like any other.
    d.advance(10_000);
    assert_eq!(d.fetch(GROUP, "t", 0), -1);
    assert!(d.c.group(GROUP).is_none());
}

#[test]
fn deleting_the_group_removes_its_pending_offsets() {
    // As Kafka: the group's tombstones cover pending transactional offsets, and a commit
    // marker afterwards brings nothing back (I73, I74).
    let mut d = Driver::new(config());
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 0, 10)]));
    let t = d.send(GroupRequest::DeleteGroups(DeleteGroupsRequest {
        group_ids: vec![GROUP.into()],
    }));
    match d.take(t).expect("answered") {
        GroupResponse::DeleteGroups(r) => assert_eq!(r.results[0].1, ErrorCode::NONE),
        other => panic!("{other:?}"),
    }
    assert!(d.c.durable_state().is_empty(), "{:?}", d.c.durable_state());
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), -1);
    assert!(d.c.group(GROUP).is_none());
    assert_eq!(d.restarted().durable_state(), d.c.durable_state());
}

#[test]
fn of_a_transactional_and_a_regular_commit_the_later_in_the_log_wins() {
    // Kafka's rule when the marker lands: a regular commit written after the transactional
    // one is kept; one written before is replaced. The same after a restart (I21).
    let mut d = Driver::new(config());
    send_txn(
        &mut d,
        txn_commit(0, -1, "", None, &[("t", 0, 50), ("t", 1, 51)]),
    );
    assert_eq!(d.commit("", -1, "t", 0, 60), ErrorCode::NONE);
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 0), 60, "the later regular commit wins");
    assert_eq!(d.fetch(GROUP, "t", 1), 51);
    assert_eq!(d.restarted().durable_state(), d.c.durable_state());
    // And a regular commit before the transactional one is replaced by it.
    assert_eq!(d.commit("", -1, "t", 2, 5), ErrorCode::NONE);
    send_txn(&mut d, txn_commit(0, -1, "", None, &[("t", 2, 70)]));
    assert_eq!(complete(&mut d, TxnResult::Commit), ErrorCode::NONE);
    assert_eq!(d.fetch(GROUP, "t", 2), 70);
    assert_eq!(d.restarted().durable_state(), d.c.durable_state());
}
