//! Scenarios of `core::txn::Coordinator`, one per rule of Kafka's transaction coordinator:
//! the two phases (I31, I32, I36), fencing (I35), KIP-360 recovery, epoch exhaustion (I39),
//! KIP-890 (EndTxn v5 epoch bumps, verify-only AddPartitionsToTxn), timeouts, expiry,
//! loading, failed appends (I37), limits (I38), Describe/ListTransactions. The driver
//! (`txn_common`) checks I31, I32 and I36 on every output.

mod txn_common;

use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::records::{TxnLogKey, TxnLogValue};
use minikafka_core::txn::*;
use txn_common::*;

fn config() -> TxnConfig {
    TxnConfig {
        max_transaction_timeout_ms: 60_000,
        ..TxnConfig::default()
    }
}

/// InitProducerId for a new id: (pid, 0) once its Empty record is durable.
fn fresh(d: &mut Driver, id: &str) -> (i64, i16) {
    let r = d.call(init(id, 30_000, None));
    let r = init_answer(&r);
    assert_eq!(r.error_code, ErrorCode::NONE);
    (r.producer_id, r.producer_epoch)
}

/// Producer 7's record at its last bumpable epoch (`i16::MAX - 1`, I39) in `state`, with
/// `partitions` in the transaction and the client's transaction version `version`.
fn at_the_last_epoch(
    state: TxnState,
    partitions: Vec<minikafka_core::txn::records::TopicPartitions>,
    version: i16,
) -> TxnLogValue {
    TxnLogValue {
        producer_id: 7,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: i16::MAX - 1,
        timeout_ms: 30_000,
        state,
        partitions: Some(partitions),
        last_update_ms: 0,
        start_ms: 0,
        client_transaction_version: version,
    }
}

/// Appends `value` as `id`'s record to the log and restarts the coordinator on it.
fn load_stored(d: &mut Driver, id: &str, value: &TxnLogValue) {
    d.log.push(TxnRecord {
        key: TxnLogKey {
            transactional_id: id.into(),
        }
        .encode(),
        value: Some(value.encode()),
    });
    d.crash();
}

/// A loaded KIP-890 transaction of producer 7 at its last bumpable epoch, ongoing on a-0,
/// committed with EndTxn v5 (the epoch it would bump to is exhausted): the answer, once the
/// Prepare record is durable.
fn end_v5_at_an_exhausted_epoch(d: &mut Driver) -> EndTxnResponse {
    let partitions = vec![minikafka_core::txn::records::TopicPartitions {
        topic: "a".into(),
        partitions: vec![0],
    }];
    load_stored(
        d,
        "tx",
        &at_the_last_epoch(TxnState::Ongoing, partitions, 2),
    );
    let token = d.send(end("tx", 7, i16::MAX - 1, true, 5));
    d.complete_append(true);
    let r = end_answer(&d.answers[&token]).clone();
    assert_eq!(r.error_code, ErrorCode::NONE);
    r
}

#[test]
fn a_committed_transaction_writes_commit_markers_after_its_prepare_record_then_completes() {
    // With the hold off, as Kafka (I134's hold is tested on its own below).
    let mut d = Driver::new(TxnConfig {
        hold_while_completing_ms: 0,
        ..config()
    });
    let (pid, epoch) = fresh(&mut d, "tx");
    assert_eq!(epoch, 0);
    assert_eq!(d.durable("tx").map(|v| v.state), Some(TxnState::Empty));

    let r = d.call(add("tx", pid, epoch, &[("a", 0), ("b", 1)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::NONE; 2]);
    let r = d.call(add_offsets("tx", pid, epoch, "g"));
    assert_eq!(
        r,
        TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse {
            error_code: ErrorCode::NONE
        })
    );
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.state, TxnState::Ongoing);
    assert_eq!(partitions_of(&v).len(), 3);

    // EndTxn: the answer waits for the Prepare record (I37), no marker before it (I31).
    let token = d.send(end("tx", pid, epoch, true, 4));
    assert!(!d.answers.contains_key(&token));
    assert!(d.held_markers.is_empty());
    d.complete_append(true);
    assert_eq!(end_answer(&d.answers[&token]).error_code, ErrorCode::NONE);
    assert_eq!(d.held_markers.len(), 1);
    // While the markers are written, the transaction is busy (the hold is off).
    let r = d.call(add("tx", pid, epoch, &[("a", 0)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::CONCURRENT_TRANSACTIONS]);
    d.settle();
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteCommit)
    );
    assert_eq!(d.markers.len(), 3);
    assert!(d.markers.iter().all(|m| m.result == TxnResult::Commit
        && m.producer_id == pid
        && m.producer_epoch == epoch));
    let offsets_partition = minikafka_core::group::group_partition("g", 50);
    assert!(d
        .markers
        .iter()
        .any(|m| m.partition == TopicPartition::new(CONSUMER_OFFSETS_TOPIC, offsets_partition)));
    d.check_replay();

    // A retried EndTxn(commit) v4 is answered NONE without a record; abort is INVALID_TXN_STATE.
    let before = d.log.len();
    let r = d.call(end("tx", pid, epoch, true, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::NONE);
    let r = d.call(end("tx", pid, epoch, false, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::INVALID_TXN_STATE);
    assert_eq!(d.log.len(), before);
}

#[test]
fn a_failed_marker_write_is_retried_and_complete_waits_for_it() {
    let mut d = Driver::new(config());
    let (pid, epoch) = fresh(&mut d, "tx");
    d.call(add("tx", pid, epoch, &[("a", 0), ("a", 1)]));
    d.send(end("tx", pid, epoch, false, 4));
    d.complete_append(true);
    d.complete_markers(&[TopicPartition::new("a", 1)]);
    assert!(
        d.held.is_empty(),
        "I32: no Complete record before the last marker"
    );
    d.advance(config().retry_backoff_ms);
    assert_eq!(d.held_markers.len(), 1);
    assert_eq!(
        d.held_markers[0].partitions,
        vec![TopicPartition::new("a", 1)]
    );
    d.settle();
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteAbort)
    );
    assert!(d.markers.iter().all(|m| m.result == TxnResult::Abort));
}

#[test]
fn a_new_producer_fences_the_old_one_and_aborts_its_transaction_first() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0)]));

    // The second producer's InitProducerId: the open transaction is aborted with a bumped
    // epoch, and the answer is CONCURRENT_TRANSACTIONS (retriable) once PrepareAbort is
    // durable.
    let r = d.call(init("tx", 30_000, None));
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteAbort)
    );
    assert!(d
        .markers
        .iter()
        .all(|m| m.result == TxnResult::Abort && m.producer_epoch == e0 + 1));
    let r = d.call(init("tx", 30_000, None));
    let r = init_answer(&r);
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!((r.producer_id, r.producer_epoch), (pid, e0 + 2));

    // I35: the old epoch is refused from now on, by every request.
    let r = d.call(add("tx", pid, e0, &[("a", 0)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::PRODUCER_FENCED]);
    let r = d.call(end("tx", pid, e0, true, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::PRODUCER_FENCED);
    let r = d.call(add_offsets("tx", pid, e0, "g"));
    assert_eq!(
        r,
        TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse {
            error_code: ErrorCode::PRODUCER_FENCED
        })
    );
    // KIP-360 recovery with the fenced epoch is refused too.
    let r = d.call(init("tx", 30_000, Some((pid, e0))));
    assert_eq!(init_answer(&r).error_code, ErrorCode::PRODUCER_FENCED);
    // A different producer id is not this id's producer.
    let r = d.call(add("tx", pid + 77, e0 + 2, &[("a", 0)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]);
    d.check_replay();
}

#[test]
fn kip_360_recovery_bumps_the_current_epoch_and_a_retry_gets_the_same_answer() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    let r = d.call(init("tx", 30_000, Some((pid, e0))));
    let first = init_answer(&r).clone();
    assert_eq!(first.error_code, ErrorCode::NONE);
    assert_eq!((first.producer_id, first.producer_epoch), (pid, e0 + 1));
    // The producer did not get the answer and retries with the same expected epoch.
    let r = d.call(init("tx", 30_000, Some((pid, e0))));
    assert_eq!(init_answer(&r), &first);
    // An unknown id with an expected pair is simply created.
    let r = d.call(init("other", 30_000, Some((5, 3))));
    assert_eq!(init_answer(&r).producer_epoch, 0);
}

#[test]
fn an_exhausted_epoch_moves_the_producer_to_a_new_id() {
    let mut d = Driver::new(config());
    // A stored id at the last bumpable epoch.
    let near = at_the_last_epoch(TxnState::CompleteCommit, vec![], 0);
    load_stored(&mut d, "tx", &near);
    let r = d.call(init("tx", 30_000, None));
    let r = init_answer(&r);
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_ne!(r.producer_id, 7);
    assert_eq!(r.producer_epoch, 0);
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.previous_producer_id, 7, "I39: the rotation is recorded");

    // No producer id ready: retriable, nothing written.
    load_stored(&mut d, "tx2", &near);
    d.ids_ready = false;
    let before = d.log.len();
    let r = d.call(init("tx2", 30_000, None));
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
    );
    assert_eq!(d.log.len(), before);
}

#[test]
fn end_txn_v5_bumps_the_epoch_every_transaction_and_recognises_retries() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0)]));
    let r = d.call(end("tx", pid, e0, true, 5));
    let r = end_answer(&r).clone();
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!((r.producer_id, r.producer_epoch), (pid, e0 + 1));
    assert!(d.markers.iter().all(|m| m.producer_epoch == e0 + 1));
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.client_transaction_version, 2);
    // A retry (old epoch) of the commit: NONE with the new epoch; of an abort: wrong state.
    let r = d.call(end("tx", pid, e0, true, 5));
    assert_eq!(end_answer(&r), &r_with(ErrorCode::NONE, pid, e0 + 1));
    let r = d.call(end("tx", pid, e0, false, 5));
    assert_eq!(end_answer(&r).error_code, ErrorCode::INVALID_TXN_STATE);
    // An epoch two behind is fenced.
    let r = d.call(end("tx", pid, e0 - 1, true, 5));
    assert_eq!(end_answer(&r).error_code, ErrorCode::PRODUCER_FENCED);
    // TV2 may abort with no transaction open (Empty or Complete): an epoch bump, no markers.
    let markers = d.markers.len();
    let r = d.call(end("tx", pid, e0 + 1, false, 5));
    assert_eq!(end_answer(&r), &r_with(ErrorCode::NONE, pid, e0 + 2));
    assert_eq!(d.markers.len(), markers);
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteAbort)
    );
    // The commit of nothing is still refused.
    let r = d.call(end("tx", pid, e0 + 2, true, 5));
    assert_eq!(end_answer(&r).error_code, ErrorCode::INVALID_TXN_STATE);
    d.check_replay();
}

fn r_with(error_code: ErrorCode, producer_id: i64, producer_epoch: i16) -> EndTxnResponse {
    EndTxnResponse {
        error_code,
        producer_id,
        producer_epoch,
    }
}

#[test]
fn end_txn_v5_at_an_exhausted_epoch_hands_over_to_a_new_producer_id() {
    // With the hold off, as Kafka (I134's hold for the new id is tested on its own below).
    let mut d = Driver::new(TxnConfig {
        hold_while_completing_ms: 0,
        ..config()
    });
    let r = end_v5_at_an_exhausted_epoch(&mut d);
    assert_eq!(r.producer_epoch, 0);
    let new_pid = r.producer_id;
    assert_ne!(new_pid, 7);
    // The new id is told to wait until the transaction completes.
    let busy = d.call(add("tx", new_pid, 0, &[("a", 1)]));
    assert_eq!(add_codes(&busy), vec![ErrorCode::CONCURRENT_TRANSACTIONS]);
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.state, TxnState::CompleteCommit);
    assert_eq!((v.producer_id, v.producer_epoch), (new_pid, 0));
    assert_eq!(v.previous_producer_id, 7);
    assert!(d
        .markers
        .iter()
        .all(|m| m.producer_id == 7 && m.producer_epoch == i16::MAX));
    // A retry from the old id's last epoch is recognised after the rotation.
    let r = d.call(end("tx", 7, i16::MAX - 1, true, 5));
    assert_eq!(end_answer(&r), &r_with(ErrorCode::NONE, new_pid, 0));
}

#[test]
fn the_coordinator_aborts_a_transaction_past_its_timeout_and_fences_its_producer() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0)]));
    d.advance(30_000);
    d.settle();
    assert_eq!(d.durable("tx").map(|v| v.state), Some(TxnState::Ongoing));
    d.advance(10_000);
    d.settle();
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.state, TxnState::CompleteAbort);
    assert_eq!(v.producer_epoch, e0 + 1);
    assert!(d.markers.iter().all(|m| m.result == TxnResult::Abort));
    let r = d.call(end("tx", pid, e0, true, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::PRODUCER_FENCED);
}

#[test]
fn idle_transactional_ids_expire_and_are_forgotten() {
    let cfg = TxnConfig {
        transactional_id_expiration_ms: 100_000,
        expiration_check_interval_ms: 50_000,
        ..config()
    };
    let mut d = Driver::new(cfg);
    let (pid, _) = fresh(&mut d, "idle");
    let (pid2, e2) = fresh(&mut d, "busy");
    d.call(add("busy", pid2, e2, &[("a", 0)]));
    // One jump past the expiration: "busy" is Ongoing when the scan runs (its timeout abort
    // is in flight then), so only "idle" expires.
    d.advance(150_000);
    d.settle();
    assert_eq!(d.durable("idle"), None, "expired: a tombstone is durable");
    assert!(d.c.transaction("idle").is_none());
    let r = d.call(TxnRequest::DescribeTransactions(
        DescribeTransactionsRequest {
            transactional_ids: vec!["idle".into()],
        },
    ));
    let TxnResponse::DescribeTransactions(r) = r else {
        panic!()
    };
    assert_eq!(
        r.transactions[0].error_code,
        ErrorCode::TRANSACTIONAL_ID_NOT_FOUND
    );
    d.check_replay();
    // The id starts over with a new producer id.
    let (again, _) = fresh(&mut d, "idle");
    assert_ne!(again, pid);
}

#[test]
fn requests_are_validated_before_anything_is_written() {
    let mut d = Driver::new(config());
    let r = d.call(init("tx", 60_001, None));
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::INVALID_TRANSACTION_TIMEOUT
    );
    let r = d.call(init("tx", 0, None));
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::INVALID_TRANSACTION_TIMEOUT
    );
    let r = d.call(init("", 1_000, None));
    assert_eq!(init_answer(&r).error_code, ErrorCode::INVALID_REQUEST);
    // An id longer than a record's string field could hold is refused, never stored cut
    // (I34: replay must read back the id that was acknowledged).
    let too_long = "t".repeat(i16::MAX as usize + 1);
    let r = d.call(init(&too_long, 1_000, None));
    assert_eq!(init_answer(&r).error_code, ErrorCode::INVALID_REQUEST);
    let r = d.call(add("nobody", 1, 0, &[("a", 0)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]);
    let r = d.call(end("nobody", 1, 0, true, 4));
    assert_eq!(
        end_answer(&r).error_code,
        ErrorCode::INVALID_PRODUCER_ID_MAPPING
    );
    assert!(d.log.is_empty());
    let (pid, e0) = fresh(&mut d, "tx");
    let r = d.call(end("tx", pid, e0, true, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::INVALID_TXN_STATE);
}

#[test]
fn a_second_request_while_a_record_is_in_flight_is_told_to_retry() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    let first = d.send(add("tx", pid, e0, &[("a", 0)]));
    let second = d.send(add("tx", pid, e0, &[("a", 1)]));
    assert_eq!(
        add_codes(&d.answers[&second]),
        vec![ErrorCode::CONCURRENT_TRANSACTIONS]
    );
    let init_token = d.send(init("tx", 30_000, None));
    assert_eq!(
        init_answer(&d.answers[&init_token]).error_code,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    d.settle();
    assert_eq!(add_codes(&d.answers[&first]), vec![ErrorCode::NONE]);
}

#[test]
fn a_failed_append_changes_nothing_and_fails_its_answer() {
    let mut d = Driver::new(config());
    let token = d.send(init("tx", 30_000, None));
    d.complete_append(false);
    assert_eq!(
        init_answer(&d.answers[&token]).error_code,
        ErrorCode::NOT_COORDINATOR
    );
    assert!(d.c.transaction("tx").is_none());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0)]));
    let token = d.send(end("tx", pid, e0, true, 4));
    d.complete_append(false);
    assert_eq!(
        end_answer(&d.answers[&token]).error_code,
        ErrorCode::NOT_COORDINATOR
    );
    assert!(
        d.held_markers.is_empty(),
        "I31: no marker for a failed Prepare"
    );
    assert_eq!(d.durable("tx").map(|v| v.state), Some(TxnState::Ongoing));
    // The client retries and succeeds.
    let r = d.call(end("tx", pid, e0, true, 4));
    assert_eq!(end_answer(&r).error_code, ErrorCode::NONE);
    // A failed Complete record is appended again after the backoff.
    let (pid2, e2) = fresh(&mut d, "tx2");
    d.call(add("tx2", pid2, e2, &[("b", 0)]));
    d.send(end("tx2", pid2, e2, false, 4));
    d.complete_append(true);
    d.complete_markers(&[]);
    d.complete_append(false);
    assert!(d.held.is_empty());
    d.advance(config().retry_backoff_ms);
    d.settle();
    assert_eq!(
        d.durable("tx2").map(|v| v.state),
        Some(TxnState::CompleteAbort)
    );
}

#[test]
fn a_prepared_transaction_found_at_load_finishes_its_markers() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0), ("b", 0)]));
    d.send(end("tx", pid, e0, true, 4));
    d.complete_append(true);
    assert_eq!(d.held_markers.len(), 1);
    // Crash before the markers are reported.
    let mut loading = d.reloaded(9);
    let r = {
        let mut ids = || Some(1);
        loading.handle_request(RequestToken(1), init("tx", 30_000, None), &mut ids, d.now);
        loading.poll_response()
    };
    let (_, r) = r.expect("answered at once");
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
    );
    assert!(
        loading.poll_marker().is_none(),
        "no markers before the load ends"
    );
    d.crash();
    assert_eq!(d.held_markers.len(), 1);
    assert_eq!(d.held_markers[0].result, TxnResult::Commit);
    d.settle();
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteCommit)
    );
    assert!(d.markers.iter().all(|m| m.result == TxnResult::Commit));
}

#[test]
fn verify_only_reports_which_partitions_are_in_the_transaction() {
    let mut d = Driver::new(config());
    let (pid, e0) = fresh(&mut d, "tx");
    d.call(add("tx", pid, e0, &[("a", 0)]));
    let before = d.log.len();
    let r = d.call(verify("tx", pid, e0, &[("a", 0), ("a", 1)]));
    assert_eq!(
        add_codes(&r),
        vec![ErrorCode::NONE, ErrorCode::TRANSACTION_ABORTABLE]
    );
    let r = d.call(verify("tx", pid, e0 + 1, &[("a", 0)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::PRODUCER_FENCED]);
    assert_eq!(d.log.len(), before, "verification writes nothing");
}

#[test]
fn a_batch_answers_every_transaction_once_all_are_done() {
    let mut d = Driver::new(config());
    let (p1, e1) = fresh(&mut d, "one");
    let (p2, e2) = fresh(&mut d, "two");
    let batch = TxnRequest::AddPartitionsToTxn(AddPartitionsToTxnRequest {
        transactions: vec![
            AddPartitionsTxn {
                transactional_id: "one".into(),
                producer_id: p1,
                producer_epoch: e1,
                verify_only: false,
                partitions: vec![TopicPartition::new("a", 0)],
            },
            AddPartitionsTxn {
                transactional_id: "two".into(),
                producer_id: p2,
                producer_epoch: e2 + 5,
                verify_only: false,
                partitions: vec![TopicPartition::new("a", 1)],
            },
            AddPartitionsTxn {
                transactional_id: "missing".into(),
                producer_id: 1,
                producer_epoch: 0,
                verify_only: true,
                partitions: vec![TopicPartition::new("a", 2)],
            },
        ],
    });
    let token = d.send(batch);
    assert!(!d.answers.contains_key(&token));
    d.settle();
    let TxnResponse::AddPartitionsToTxn(r) = &d.answers[&token] else {
        panic!()
    };
    let codes: Vec<_> = r.results.iter().map(|t| t.partitions[0].1).collect();
    assert_eq!(
        codes,
        vec![
            ErrorCode::NONE,
            ErrorCode::PRODUCER_FENCED,
            ErrorCode::INVALID_PRODUCER_ID_MAPPING
        ]
    );
}

#[test]
fn the_partitions_of_one_transaction_are_bounded() {
    let cfg = TxnConfig {
        max_partitions_per_transaction: 2,
        max_transactional_ids: 1,
        ..config()
    };
    let mut d = Driver::new(cfg);
    let (pid, e0) = fresh(&mut d, "tx");
    let r = d.call(add("tx", pid, e0, &[("a", 0), ("a", 1), ("a", 2)]));
    assert_eq!(add_codes(&r), vec![ErrorCode::INVALID_REQUEST; 3]);
    let r = d.call(init("second", 30_000, None));
    assert_eq!(
        init_answer(&r).error_code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE
    );
}

#[test]
fn describe_and_list_report_the_durable_state_with_filters() {
    let mut d = Driver::new(config());
    let (p1, e1) = fresh(&mut d, "one");
    fresh(&mut d, "two");
    d.advance(1_000);
    d.call(add("one", p1, e1, &[("a", 0), ("b", 3), ("a", 2)]));
    d.advance(5_000);
    let r = d.call(TxnRequest::DescribeTransactions(
        DescribeTransactionsRequest {
            transactional_ids: vec!["one".into(), "nope".into()],
        },
    ));
    let TxnResponse::DescribeTransactions(r) = r else {
        panic!()
    };
    let one = &r.transactions[0];
    assert_eq!(one.state, "Ongoing");
    assert_eq!((one.producer_id, one.producer_epoch), (p1, e1));
    assert_eq!(one.start_ms, 1_000);
    assert_eq!(
        one.topics,
        vec![("a".to_string(), vec![0, 2]), ("b".to_string(), vec![3])]
    );
    assert_eq!(
        r.transactions[1].error_code,
        ErrorCode::TRANSACTIONAL_ID_NOT_FOUND
    );

    let list = |d: &mut Driver, states: &[&str], pids: &[i64], duration: i64| {
        let r = d.call(TxnRequest::ListTransactions(ListTransactionsRequest {
            state_filters: states.iter().map(|s| s.to_string()).collect(),
            producer_id_filters: pids.to_vec(),
            duration_filter_ms: duration,
        }));
        let TxnResponse::ListTransactions(r) = r else {
            panic!()
        };
        r
    };
    let all = list(&mut d, &[], &[], -1);
    assert_eq!(all.transactions.len(), 2);
    let ongoing = list(&mut d, &["Ongoing", "Bogus"], &[], -1);
    assert_eq!(ongoing.unknown_state_filters, vec!["Bogus".to_string()]);
    assert_eq!(ongoing.transactions.len(), 1);
    assert_eq!(ongoing.transactions[0].transactional_id, "one");
    assert_eq!(list(&mut d, &[], &[p1 + 1], -1).transactions.len(), 1);
    assert_eq!(list(&mut d, &[], &[], 5_000).transactions.len(), 1);
    assert_eq!(list(&mut d, &[], &[], 5_001).transactions.len(), 0);
    assert_eq!(list(&mut d, &["Bogus"], &[], -1).transactions.len(), 0);
}

#[test]
fn records_of_states_never_stored_are_refused_at_replay() {
    let mut c = Coordinator::new(config(), 0);
    let key = TxnLogKey {
        transactional_id: "tx".into(),
    }
    .encode();
    for state in [TxnState::Dead, TxnState::PrepareEpochFence] {
        let v = TxnLogValue {
            producer_id: 1,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 0,
            timeout_ms: 1,
            state,
            partitions: Some(vec![]),
            last_update_ms: 0,
            start_ms: -1,
            client_transaction_version: 0,
        };
        assert!(c.replay(&key, Some(&v.encode())).is_err());
    }
    assert!(c.replay(&key, Some(&[0, 1, 2])).is_err());
    assert!(c.durable_state().is_empty());
}

// ---------------------------------------------------------------- I134: the held request

/// A transaction of `pid` with `a-0`, committed with EndTxn `version`; returns when its
/// Prepare record is durable and EndTxn answered (its markers not yet written), with the
/// ids EndTxn handed back.
fn committing(d: &mut Driver, id: &str, version: i16) -> (i64, i16) {
    let (pid, epoch) = fresh(d, id);
    assert_eq!(
        add_codes(&d.call(add(id, pid, epoch, &[("a", 0)]))),
        vec![ErrorCode::NONE]
    );
    let token = d.send(end(id, pid, epoch, true, version));
    d.complete_append(true);
    let r = end_answer(&d.answers[&token]).clone();
    assert_eq!(r.error_code, ErrorCode::NONE);
    assert_eq!(
        d.durable(id).map(|v| v.state),
        Some(TxnState::PrepareCommit)
    );
    assert_eq!(d.held_markers.len(), 1);
    if version >= 5 {
        (r.producer_id, r.producer_epoch)
    } else {
        (pid, epoch)
    }
}

fn is_complete(record: &TxnRecord) -> bool {
    record.value.as_ref().is_some_and(|v| {
        matches!(
            TxnLogValue::decode(v).expect("value").state,
            TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    })
}

#[test]
fn i134_the_next_transactions_adds_wait_for_the_complete_record_then_join_in_order() {
    for version in [4, 5] {
        let mut d = Driver::new(config());
        let (pid, epoch) = committing(&mut d, "tx", version);
        // The next transaction starts while the markers are written: held, not refused.
        let first = d.send(add("tx", pid, epoch, &[("b", 0)]));
        let second = d.send(add_offsets("tx", pid, epoch, "g"));
        assert!(!d.answers.contains_key(&first));
        assert!(!d.answers.contains_key(&second));
        // Markers durable, the Complete record in flight: still held.
        d.complete_markers(&[]);
        assert_eq!(d.held.len(), 1);
        assert!(!d.answers.contains_key(&first));
        assert!(!d.answers.contains_key(&second));
        // The Complete record is durable: the first is handled, its Ongoing record appended;
        // the second waits for that record (one in flight per id, I33), then joins.
        d.complete_append(true);
        assert!(is_complete(d.log.last().expect("log")));
        let complete_at = d.log.len();
        assert!(
            !d.answers.contains_key(&first),
            "answered before durable (I37)"
        );
        d.complete_append(true);
        assert_eq!(add_codes(&d.answers[&first]), vec![ErrorCode::NONE]);
        d.settle();
        assert_eq!(
            d.answers[&second],
            TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse {
                error_code: ErrorCode::NONE
            })
        );
        let v = d.durable("tx").expect("durable");
        assert_eq!(v.state, TxnState::Ongoing);
        assert_eq!(v.producer_epoch, epoch);
        let offsets = minikafka_core::group::group_partition("g", 50);
        assert_eq!(
            partitions_of(&v),
            [
                TopicPartition::new("b", 0),
                TopicPartition::new(CONSUMER_OFFSETS_TOPIC, offsets)
            ]
            .into_iter()
            .collect()
        );
        // Nothing of the next transaction was written before the Complete record.
        assert!(d.log[..complete_at - 1].iter().all(|r| !partitions_of(
            &TxnLogValue::decode(r.value.as_ref().expect("value")).expect("value")
        )
        .contains(&TopicPartition::new("b", 0))));
        d.check_replay();
    }
}

#[test]
fn i134_a_held_request_past_its_bound_is_told_to_retry_and_changes_nothing() {
    let mut d = Driver::new(TxnConfig {
        hold_while_completing_ms: 1_000,
        ..config()
    });
    let (pid, epoch) = committing(&mut d, "tx", 4);
    let token = d.send(add("tx", pid, epoch, &[("b", 0)]));
    d.advance(999);
    assert!(!d.answers.contains_key(&token));
    d.advance(1);
    assert_eq!(
        add_codes(&d.answers[&token]),
        vec![ErrorCode::CONCURRENT_TRANSACTIONS]
    );
    d.settle();
    let v = d.durable("tx").expect("durable");
    assert_eq!(v.state, TxnState::CompleteCommit);
    assert!(partitions_of(&v).is_empty());
    // The retry, now that the transaction is complete, is taken at once.
    assert_eq!(
        add_codes(&d.call(add("tx", pid, epoch, &[("b", 0)]))),
        vec![ErrorCode::NONE]
    );
}

#[test]
fn i134_held_requests_are_bounded() {
    let mut d = Driver::new(TxnConfig {
        max_held_requests: 1,
        ..config()
    });
    let (pid, epoch) = committing(&mut d, "tx", 4);
    let held = d.send(add("tx", pid, epoch, &[("b", 0)]));
    let refused = d.send(add("tx", pid, epoch, &[("b", 1)]));
    assert!(!d.answers.contains_key(&held));
    assert_eq!(
        add_codes(&d.answers[&refused]),
        vec![ErrorCode::CONCURRENT_TRANSACTIONS]
    );
    d.settle();
    assert_eq!(add_codes(&d.answers[&held]), vec![ErrorCode::NONE]);
}

#[test]
fn i134_a_fenced_or_foreign_producer_is_not_held() {
    // EndTxn v5 bumped the epoch: a zombie at the old epoch is fenced at once.
    let mut d = Driver::new(config());
    let (pid, epoch) = committing(&mut d, "tx", 5);
    let stale = d.send(add("tx", pid, epoch - 1, &[("b", 0)]));
    assert_eq!(
        add_codes(&d.answers[&stale]),
        vec![ErrorCode::PRODUCER_FENCED]
    );
    let stale = d.send(add_offsets("tx", pid, epoch - 1, "g"));
    assert_eq!(
        d.answers[&stale],
        TxnResponse::AddOffsetsToTxn(AddOffsetsToTxnResponse {
            error_code: ErrorCode::PRODUCER_FENCED
        })
    );
    let foreign = d.send(add("tx", pid + 100, 0, &[("b", 0)]));
    assert_eq!(
        add_codes(&d.answers[&foreign]),
        vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]
    );
    d.settle();
    assert_eq!(
        d.durable("tx").map(|v| v.state),
        Some(TxnState::CompleteCommit)
    );
}

#[test]
fn i134_a_held_request_is_checked_again_when_released() {
    // EndTxn v5 at an exhausted epoch: the Prepare record is at (7, MAX) and the next
    // transaction uses a new producer id. The new id's add waits and joins; an add of the
    // old id at the Prepare record's epoch was held too, and once the Complete record moved
    // the id to the new producer id it is answered as Kafka answers the old id then.
    let mut d = Driver::new(config());
    let r = end_v5_at_an_exhausted_epoch(&mut d);
    let new_pid = r.producer_id;
    let old = d.send(add("tx", 7, i16::MAX, &[("a", 2)]));
    let new = d.send(add("tx", new_pid, 0, &[("a", 1)]));
    assert!(!d.answers.contains_key(&old));
    assert!(!d.answers.contains_key(&new));
    d.settle();
    assert_eq!(
        add_codes(&d.answers[&old]),
        vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]
    );
    assert_eq!(add_codes(&d.answers[&new]), vec![ErrorCode::NONE]);
    let v = d.durable("tx").expect("durable");
    assert_eq!(
        (v.state, v.producer_id, v.producer_epoch),
        (TxnState::Ongoing, new_pid, 0)
    );
    assert_eq!(
        partitions_of(&v),
        [TopicPartition::new("a", 1)].into_iter().collect()
    );
}
