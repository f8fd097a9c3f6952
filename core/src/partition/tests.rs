//! The partition machine against a plain model: unit tests of each path, and a proptest that
//! drives appends (plain, idempotent, transactional), COMMIT and ABORT markers, I/O
//! completions in any order, I/O failures, syncs, rolls, retention and DeleteRecords,
//! checking the machine against a vector of published batches and a model of the files after
//! every step.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;

use super::txn::TxnTracker;
use super::*;
use crate::control_batch::{encode_marker, ControlType, TxnMarker};
use crate::producer::{ProducerError, ProducerLimits, ProducerStateTable};
use crate::record::HEADER_BYTES;
use crate::txn_index::AbortedTxn;

const NOW: i64 = 1_000_000;

fn config(flush: FlushRule) -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 4_000,
        segment_ms: None,
        index_interval_bytes: 500,
        flush,
        retention: RetentionLimits::default(),
        coalesce_max_bytes: 3_000,
        producer_limits: ProducerLimits::default(),
    }
}

fn machine(config: PartitionConfig) -> PartitionMachine {
    PartitionMachine::new(
        config,
        vec![SegmentState::empty(
            Offset(0),
            config.index_interval_bytes,
            NOW,
        )],
        Offset(0),
        ProducerStateTable::new(config.producer_limits),
        TxnTracker::new(),
        NOW,
    )
}

/// A validated header of `records` records and `body_bytes` bytes after the fixed header.
fn header(records: i32, body_bytes: usize, producer: Option<(i64, i32)>, ts: i64) -> BatchHeader {
    let total = HEADER_BYTES + body_bytes;
    let (producer_id, producer_epoch, base_sequence) = match producer {
        Some((id, seq)) => (id, 0, seq),
        None => (-1, -1, -1),
    };
    BatchHeader {
        base_offset: Offset(0),
        batch_length: (total - 12) as i32,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: records - 1,
        base_timestamp: ts,
        max_timestamp: ts,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count: records,
    }
}

fn append(token: u64, header: BatchHeader) -> Append {
    Append::produced(RequestToken(token), header)
}

/// Attribute bit 4: a transactional batch.
const TRANSACTIONAL: i16 = 1 << 4;

/// A transactional batch of `producer` at `sequence` (epoch 0).
fn txn_header(records: i32, body_bytes: usize, producer: (i64, i32), ts: i64) -> BatchHeader {
    let mut h = header(records, body_bytes, Some(producer), ts);
    h.attributes |= TRANSACTIONAL;
    h
}

/// A marker of `producer_id` (epoch 0, coordinator epoch 0), as WriteTxnMarkers writes it.
fn marker_append(token: u64, producer_id: i64, commit: bool) -> Append {
    let marker = TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control_type: if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        },
    };
    let bytes = encode_marker(&marker, NOW);
    let header = BatchHeader::parse(&bytes).expect("an encoded marker parses");
    Append::marker(RequestToken(token), header, marker)
}

fn drain_io(m: &mut PartitionMachine) -> Vec<Io> {
    std::iter::from_fn(|| m.poll_io()).collect()
}

fn drain_acks(m: &mut PartitionMachine) -> Vec<Answer> {
    std::iter::from_fn(|| m.poll_ack()).collect()
}

/// Completes every I/O (and what it leads to) successfully, in order.
fn complete_all(m: &mut PartitionMachine) -> Vec<Io> {
    let mut done = Vec::new();
    for _ in 0..1_000 {
        let ios = drain_io(m);
        if ios.is_empty() {
            return done;
        }
        for io in ios {
            m.handle_io_done(io.token, Ok(()), NOW);
            done.push(io);
        }
    }
    panic!("I/O did not settle");
}

fn eio() -> IoFailure {
    IoFailure {
        kind: std::io::ErrorKind::Other,
        raw_os_error: Some(5),
    }
}

fn appended(answer: &Answer) -> AppendInfo {
    match &answer.result {
        Ok(Done::Appended(info)) => *info,
        other => panic!("expected an append, got {other:?}"),
    }
}

#[test]
fn appends_are_coalesced_and_dense_in_call_order_i1_i27() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append(
        [
            append(1, header(2, 100, None, 5)),
            append(2, header(3, 100, None, 6)),
        ],
        NOW,
    );
    let ios = drain_io(&mut m);
    assert_eq!(ios.len(), 1, "one coalesced write");
    let IoKind::WriteLog {
        batches, position, ..
    } = &ios[0].kind
    else {
        panic!("{ios:?}");
    };
    assert_eq!(*position, 0);
    assert_eq!(batches[0].base_offset, Offset(0));
    assert_eq!(batches[1].base_offset, Offset(2));
    assert_eq!(batches[1].position, FilePos(161));
    assert_eq!(
        m.high_watermark(),
        Offset(0),
        "nothing published before the write (I2)"
    );
    assert!(drain_acks(&mut m).is_empty());
    m.handle_io_done(ios[0].token, Ok(()), NOW);
    assert_eq!(m.high_watermark(), Offset(5));
    let acks = drain_acks(&mut m);
    assert_eq!(appended(&acks[0]).base_offset, Offset(0));
    assert_eq!(appended(&acks[1]).last_offset, Offset(4));
}

#[test]
fn fsync_acks_wait_for_a_sync_that_started_after_the_write_i8() {
    let mut m = machine(config(FlushRule::Fsync));
    m.handle_append([append(1, header(1, 10, None, 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_io_done(write.token, Ok(()), NOW);
    assert!(drain_acks(&mut m).is_empty());
    let sync = drain_io(&mut m).remove(0);
    assert!(matches!(sync.kind, IoKind::SyncLog { .. }));
    // A second append written while the sync runs waits for the next sync.
    m.handle_append([append(2, header(1, 10, None, 1))], NOW);
    let write2 = drain_io(&mut m).remove(0);
    m.handle_io_done(write2.token, Ok(()), NOW);
    assert!(drain_io(&mut m).is_empty(), "one sync at a time (I28)");
    m.handle_io_done(sync.token, Ok(()), NOW);
    let acks = drain_acks(&mut m);
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].token, RequestToken(1));
    let sync2 = drain_io(&mut m).remove(0);
    m.handle_io_done(sync2.token, Ok(()), NOW);
    assert_eq!(drain_acks(&mut m)[0].token, RequestToken(2));
    assert_eq!(m.sync_count(), 2);
}

#[test]
fn a_failed_sync_takes_the_partition_offline_for_good_i8() {
    let mut m = machine(config(FlushRule::Fsync));
    m.handle_append([append(1, header(1, 10, None, 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_io_done(write.token, Ok(()), NOW);
    let sync = drain_io(&mut m).remove(0);
    m.handle_io_done(sync.token, Err(eio()), NOW);
    let acks = drain_acks(&mut m);
    assert!(matches!(acks[0].result, Err(PartitionError::Offline(_))));
    assert!(m.is_offline());
    m.handle_append([append(2, header(1, 10, None, 1))], NOW);
    assert!(drain_io(&mut m).is_empty());
    assert!(matches!(
        drain_acks(&mut m)[0].result,
        Err(PartitionError::Offline(_))
    ));
}

#[test]
fn a_failed_write_publishes_nothing_and_its_tail_is_cut_first_i29() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 10, None, 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_io_done(write.token, Err(eio()), NOW);
    assert!(matches!(
        drain_acks(&mut m)[0].result,
        Err(PartitionError::Io(_))
    ));
    assert_eq!(m.high_watermark(), Offset(0));
    m.handle_append([append(2, header(1, 10, None, 1))], NOW);
    let truncate = drain_io(&mut m).remove(0);
    assert_eq!(
        truncate.kind,
        IoKind::TruncateLog {
            segment: Offset(0),
            len_bytes: 0
        }
    );
    m.handle_io_done(truncate.token, Ok(()), NOW);
    let write = drain_io(&mut m).remove(0);
    let IoKind::WriteLog { batches, .. } = &write.kind else {
        panic!("{write:?}");
    };
    assert_eq!(
        batches[0].base_offset,
        Offset(0),
        "the failed batch took no offsets"
    );
}

#[test]
fn a_roll_syncs_the_old_segment_before_creating_the_next_i5() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 3_000, None, 1))], NOW);
    complete_all(&mut m);
    m.handle_append([append(2, header(1, 3_000, None, 1))], NOW);
    let kinds: Vec<IoKind> = complete_all(&mut m).into_iter().map(|io| io.kind).collect();
    assert!(matches!(kinds[0], IoKind::SyncLog { segment: Offset(0) }));
    assert!(matches!(
        kinds[1],
        IoKind::SyncIndexes {
            segment: Offset(0),
            ..
        }
    ));
    assert_eq!(
        kinds[2],
        IoKind::CreateSegment {
            base_offset: Offset(1)
        }
    );
    assert!(kinds.iter().any(|k| matches!(
        k,
        IoKind::WriteLog {
            segment: Offset(1),
            ..
        }
    )));
    assert_eq!(m.segments().len(), 2);
    assert_eq!(
        appended(&drain_acks(&mut m).pop().expect("an answer")).segment_base_offset,
        Offset(1)
    );
}

#[test]
fn delete_records_checkpoints_before_it_removes_i25() {
    let mut m = machine(config(FlushRule::None));
    for token in 0..3 {
        m.handle_append([append(token, header(1, 3_000, None, 1))], NOW);
        complete_all(&mut m);
    }
    drain_acks(&mut m);
    assert_eq!(m.segments().len(), 3);
    m.handle_delete_records(RequestToken(10), Offset(2), NOW);
    let checkpoint = drain_io(&mut m).remove(0);
    assert_eq!(
        checkpoint.kind,
        IoKind::WriteStartCheckpoint { start: Offset(2) }
    );
    assert_eq!(
        m.log_start_offset(),
        Offset(0),
        "moved only once durable (I25)"
    );
    m.handle_io_done(checkpoint.token, Ok(()), NOW);
    assert_eq!(m.log_start_offset(), Offset(2));
    let removes = drain_io(&mut m);
    assert_eq!(removes.len(), 2);
    // Removals may finish in any order.
    m.handle_io_done(removes[1].token, Ok(()), NOW);
    m.handle_io_done(removes[0].token, Ok(()), NOW);
    let sync_dir = drain_io(&mut m).remove(0);
    assert_eq!(sync_dir.kind, IoKind::SyncDir);
    m.handle_io_done(sync_dir.token, Ok(()), NOW);
    assert_eq!(
        drain_acks(&mut m)[0].result,
        Ok(Done::StartMoved {
            log_start_offset: Offset(2),
            removed_base_offsets: vec![Offset(0), Offset(1)],
        })
    );
    assert!(m.fetch_plan(Offset(1), Isolation::ReadUncommitted).is_err());
    m.handle_delete_records(RequestToken(11), Offset(9), NOW);
    assert!(matches!(
        drain_acks(&mut m)[0].result,
        Err(PartitionError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn duplicates_are_answered_with_the_original_offsets() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(2, 10, Some((7, 0)), 1))], NOW);
    complete_all(&mut m);
    m.handle_append(
        [
            append(2, header(2, 10, Some((7, 0)), 1)),
            append(3, header(1, 10, Some((7, 5)), 1)),
        ],
        NOW,
    );
    complete_all(&mut m);
    let acks = drain_acks(&mut m);
    let dup = appended(&acks[1]);
    assert!(dup.duplicate);
    assert_eq!(dup.base_offset, Offset(0));
    assert!(matches!(acks[2].result, Err(PartitionError::Producer(_))));
    assert_eq!(m.high_watermark(), Offset(2));
}

#[test]
fn interval_policy_asks_for_a_timer_and_syncs_when_it_fires() {
    let mut m = machine(config(FlushRule::Interval { ms: 100 }));
    assert_eq!(m.poll_timeout(), None);
    m.handle_append([append(1, header(1, 10, None, 1))], NOW);
    complete_all(&mut m);
    assert_eq!(drain_acks(&mut m).len(), 1, "acknowledged after the write");
    assert_eq!(
        m.poll_timeout(),
        Some((NOW + 100, TimeoutReason::IntervalFlush))
    );
    m.handle_timeout(NOW + 50);
    assert!(drain_io(&mut m).is_empty());
    m.handle_timeout(NOW + 100);
    let sync = drain_io(&mut m).remove(0);
    m.handle_io_done(sync.token, Ok(()), NOW + 100);
    assert_eq!(m.synced_up_to(), Offset(1));
    assert_eq!(m.poll_timeout(), None);
}

fn refused(answer: &Answer) -> &ProducerError {
    match &answer.result {
        Err(PartitionError::Producer(e)) => e,
        other => panic!("expected a producer refusal, got {other:?}"),
    }
}

#[test]
fn a_transaction_holds_the_lso_until_its_marker_and_an_abort_is_indexed_i67_i68_i69() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append(
        [
            append(1, txn_header(2, 10, (5, 0), 1)),
            append(2, header(1, 10, None, 1)),
        ],
        NOW,
    );
    complete_all(&mut m);
    assert_eq!(drain_acks(&mut m).len(), 2);
    assert_eq!(m.high_watermark(), Offset(3));
    assert_eq!(
        m.last_stable_offset(),
        Offset(0),
        "the open transaction (I67)"
    );
    assert_eq!(m.txns().ongoing(5), Some(Offset(0)));
    // I72: a plain batch of a producer inside its transaction.
    m.handle_append([append(3, header(1, 10, Some((5, 2)), 1))], NOW);
    assert_eq!(
        refused(&drain_acks(&mut m)[0]),
        &ProducerError::InvalidTxnState { producer_id: 5 }
    );
    assert!(
        drain_io(&mut m).is_empty(),
        "a refused batch writes nothing"
    );
    // I69: read_committed plans nothing at or past the LSO.
    let committed = m
        .fetch_plan(Offset(0), Isolation::ReadCommitted)
        .expect("in range");
    assert_eq!((committed.upper, committed.segments.len()), (Offset(0), 0));
    let uncommitted = m
        .fetch_plan(Offset(0), Isolation::ReadUncommitted)
        .expect("in range");
    assert_eq!(
        (uncommitted.upper, uncommitted.last_stable_offset),
        (Offset(3), Offset(0))
    );

    m.handle_append([marker_append(4, 5, false)], NOW);
    let write = drain_io(&mut m).remove(0);
    assert!(matches!(write.kind, IoKind::WriteLog { .. }));
    m.handle_io_done(write.token, Ok(()), NOW);
    assert_eq!(appended(&drain_acks(&mut m)[0]).base_offset, Offset(3));
    assert_eq!(
        m.last_stable_offset(),
        Offset(4),
        "the marker ended it (I67)"
    );
    let range = AbortedTxn {
        producer_id: 5,
        first_offset: 0,
        last_offset: 3,
        last_stable_offset: 4,
    };
    let index = drain_io(&mut m).remove(0);
    assert_eq!(
        index.kind,
        IoKind::AppendTxnIndex {
            segment: Offset(0),
            entries: vec![range],
        }
    );
    // The next group waits for the .txnindex append (entries stay in marker order).
    m.handle_append([append(5, header(1, 10, None, 1))], NOW);
    assert!(drain_io(&mut m).is_empty());
    m.handle_io_done(index.token, Err(eio()), NOW);
    assert!(m.txn_state_stale(), "a failed .txnindex append (I70)");
    assert!(matches!(
        drain_io(&mut m).remove(0).kind,
        IoKind::WriteLog { .. }
    ));
    assert_eq!(m.aborted_transactions(Offset(0), Offset(4)), vec![range]);
    let committed = m
        .fetch_plan(Offset(1), Isolation::ReadCommitted)
        .expect("in range");
    assert_eq!(committed.upper, Offset(4));
    assert_eq!(committed.aborted, vec![range]);
    assert_eq!(committed.segments[0].base_offset, Offset(0));
}

#[test]
fn markers_are_fenced_by_producer_and_coordinator_epochs_i72() {
    let mut m = machine(config(FlushRule::None));
    let mut first = header(1, 10, Some((6, 0)), 1);
    first.producer_epoch = 2;
    m.handle_append([append(1, first)], NOW);
    complete_all(&mut m);
    drain_acks(&mut m);
    let marker = |token: u64, producer_epoch: i16, coordinator_epoch: i32| {
        let mut a = marker_append(token, 6, true);
        if let AppendKind::Marker(ref mut mk) = a.kind {
            mk.producer_epoch = producer_epoch;
            mk.coordinator_epoch = coordinator_epoch;
        }
        a
    };
    m.handle_append([marker(2, 1, 0)], NOW);
    assert!(matches!(
        refused(&drain_acks(&mut m)[0]),
        ProducerError::InvalidProducerEpoch { .. }
    ));
    m.handle_append([marker(3, 2, 5)], NOW);
    complete_all(&mut m);
    assert!(appended(&drain_acks(&mut m)[0]).base_offset == Offset(1));
    assert_eq!(m.txns().coordinator_epoch(6), Some(5));
    m.handle_append([marker(4, 2, 4)], NOW);
    assert!(matches!(
        refused(&drain_acks(&mut m)[0]),
        ProducerError::CoordinatorFenced { .. }
    ));
    // Two markers of one producer never share a group: the second is checked after the first.
    m.handle_append([marker(5, 3, 6), marker(6, 3, 5)], NOW);
    let write = drain_io(&mut m).remove(0);
    let IoKind::WriteLog { batches, .. } = &write.kind else {
        panic!("{write:?}");
    };
    assert_eq!(batches.len(), 1);
    m.handle_io_done(write.token, Ok(()), NOW);
    complete_all(&mut m);
    let acks = drain_acks(&mut m);
    assert!(acks[0].result.is_ok());
    assert!(matches!(
        refused(&acks[1]),
        ProducerError::CoordinatorFenced { .. }
    ));
}

#[test]
fn coordinator_batches_pass_no_producer_rule_but_move_the_transactions_i74() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 10, Some((7, 0)), 1))], NOW);
    complete_all(&mut m);
    drain_acks(&mut m);
    let mut offsets = Append::produced(RequestToken(2), txn_header(1, 10, (7, 9), 1));
    offsets.kind = AppendKind::Coordinator;
    m.handle_append([offsets], NOW);
    complete_all(&mut m);
    assert_eq!(appended(&drain_acks(&mut m)[0]).base_offset, Offset(1));
    assert_eq!(m.last_stable_offset(), Offset(1), "its transaction is open");
    // The same sequence produced by a client is out of order.
    m.handle_append([append(3, txn_header(1, 10, (7, 9), 1))], NOW);
    assert!(matches!(
        refused(&drain_acks(&mut m)[0]),
        ProducerError::OutOfOrderSequence { .. }
    ));
    m.handle_append([marker_append(4, 7, true)], NOW);
    complete_all(&mut m);
    drain_acks(&mut m);
    assert_eq!(m.last_stable_offset(), m.high_watermark());
    assert_eq!(
        m.txns().aborted().count(),
        0,
        "a COMMIT records no range (I68)"
    );
}

#[test]
fn the_log_start_never_passes_the_lso_i71() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 3_000, None, 1))], NOW);
    complete_all(&mut m);
    m.handle_append([append(2, txn_header(1, 3_000, (5, 0), 1))], NOW);
    complete_all(&mut m);
    m.handle_append([append(3, header(1, 3_000, None, 1))], NOW);
    complete_all(&mut m);
    drain_acks(&mut m);
    assert_eq!(m.segments().len(), 3);
    assert_eq!(m.last_stable_offset(), Offset(1));
    m.handle_delete_records(RequestToken(4), Offset(3), NOW);
    let ios = complete_all(&mut m);
    assert_eq!(
        ios[0].kind,
        IoKind::WriteStartCheckpoint { start: Offset(1) },
        "capped at the LSO"
    );
    assert_eq!(
        drain_acks(&mut m)[0].result,
        Ok(Done::StartMoved {
            log_start_offset: Offset(1),
            removed_base_offsets: vec![Offset(0)],
        })
    );
}

#[test]
fn new_restores_the_transaction_state_the_driver_recovered_i70() {
    let cfg = config(FlushRule::None);
    let mut segment = SegmentState::empty(Offset(0), cfg.index_interval_bytes, NOW);
    segment.next_offset = Offset(10);
    segment.size_bytes = 700;
    segment.written_bytes = 700;
    let mut txns = TxnTracker::new();
    let batch = crate::producer::ProducerBatch::from_header(&txn_header(1, 10, (5, 0), 1));
    txns.on_data(&batch, Offset(4));
    let mut m = PartitionMachine::new(
        cfg,
        vec![segment],
        Offset(0),
        ProducerStateTable::new(cfg.producer_limits),
        txns,
        NOW,
    );
    assert_eq!(m.last_stable_offset(), Offset(4));
    m.handle_append([append(1, header(1, 10, Some((5, 1)), 1))], NOW);
    assert_eq!(
        refused(&drain_acks(&mut m)[0]),
        &ProducerError::InvalidTxnState { producer_id: 5 }
    );
    m.handle_append([marker_append(2, 5, false)], NOW);
    let ios = complete_all(&mut m);
    assert!(ios.iter().any(|io| io.kind
        == IoKind::AppendTxnIndex {
            segment: Offset(0),
            entries: vec![AbortedTxn {
                producer_id: 5,
                first_offset: 4,
                last_offset: 10,
                last_stable_offset: 11,
            }],
        }));
    assert_eq!(m.last_stable_offset(), Offset(11));
}

#[test]
fn a_cancelled_append_not_yet_placed_takes_no_offset_i27() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 10, None, 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_append(
        [
            append(2, header(1, 10, None, 1)),
            append(3, header(1, 10, None, 1)),
        ],
        NOW,
    );
    assert!(!m.handle_cancel(RequestToken(1), NOW), "already placed");
    assert!(m.handle_cancel(RequestToken(2), NOW));
    assert_eq!(drain_acks(&mut m)[0].result, Err(PartitionError::Cancelled));
    m.handle_io_done(write.token, Ok(()), NOW);
    complete_all(&mut m);
    let acks = drain_acks(&mut m);
    assert_eq!(appended(&acks[0]).base_offset, Offset(0));
    assert_eq!(acks[1].token, RequestToken(3));
    assert_eq!(
        appended(&acks[1]).base_offset,
        Offset(1),
        "dense without it (I1)"
    );
}

#[test]
fn a_requested_roll_waits_for_the_writer_and_syncs_first_i5() {
    let mut m = machine(config(FlushRule::None));
    m.handle_roll(RequestToken(1), NOW);
    assert_eq!(
        drain_acks(&mut m)[0].result,
        Ok(Done::Rolled { base_offset: None }),
        "an empty active segment is not sealed"
    );
    m.handle_append([append(2, header(2, 10, None, 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_roll(RequestToken(3), NOW);
    assert!(drain_io(&mut m).is_empty(), "the roll waits for the group");
    m.handle_io_done(write.token, Ok(()), NOW);
    let kinds: Vec<IoKind> = complete_all(&mut m).into_iter().map(|io| io.kind).collect();
    assert!(matches!(kinds[0], IoKind::SyncLog { segment: Offset(0) }));
    assert!(matches!(kinds[1], IoKind::SyncIndexes { .. }));
    assert_eq!(
        kinds[2],
        IoKind::CreateSegment {
            base_offset: Offset(2)
        }
    );
    let acks = drain_acks(&mut m);
    assert_eq!(
        acks.last().map(|a| &a.result),
        Some(&Ok(Done::Rolled {
            base_offset: Some(Offset(2))
        }))
    );
    assert_eq!(m.segments().len(), 2);
    assert_eq!(
        m.synced_up_to(),
        Offset(2),
        "the sealed segment is durable (I5)"
    );
}

#[test]
fn a_close_writes_what_was_queued_then_syncs_and_refuses_the_rest() {
    let mut m = machine(config(FlushRule::None));
    m.handle_append([append(1, header(1, 10, Some((3, 0)), 1))], NOW);
    let write = drain_io(&mut m).remove(0);
    m.handle_append([append(2, header(1, 10, None, 1))], NOW);
    m.handle_close(RequestToken(3), NOW);
    m.handle_append([append(4, header(1, 10, None, 1))], NOW);
    assert_eq!(drain_acks(&mut m)[0].result, Err(PartitionError::Closed));
    m.handle_io_done(write.token, Ok(()), NOW);
    let kinds: Vec<IoKind> = complete_all(&mut m).into_iter().map(|io| io.kind).collect();
    assert!(
        matches!(kinds[0], IoKind::WriteLog { .. }),
        "queued before the close"
    );
    assert!(matches!(kinds[1], IoKind::SyncLog { .. }));
    assert!(matches!(kinds[2], IoKind::SyncIndexes { .. }));
    assert!(matches!(
        kinds[3],
        IoKind::WriteProducerSnapshot {
            offset: Offset(2),
            ..
        }
    ));
    let acks = drain_acks(&mut m);
    assert_eq!(acks.len(), 3);
    assert_eq!(acks[2].result, Ok(Done::Closed { clean: true }));
    assert_eq!(m.synced_up_to(), Offset(2));
    m.handle_delete_records(RequestToken(5), Offset(1), NOW);
    assert_eq!(drain_acks(&mut m)[0].result, Err(PartitionError::Closed));
}

#[test]
fn the_cleaners_segment_replaces_a_run_of_sealed_segments_i24() {
    let mut m = machine(config(FlushRule::None));
    for token in 0..3 {
        m.handle_append([append(token, header(1, 3_000, None, 1))], NOW);
        complete_all(&mut m);
    }
    let bases: Vec<Offset> = m.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![Offset(0), Offset(1), Offset(2)]);
    assert!(m.holds_segments(&[Offset(0), Offset(1)]));
    assert!(
        !m.holds_segments(&[Offset(1), Offset(2)]),
        "never the active segment"
    );
    assert!(!m.holds_segments(&[Offset(0), Offset(2)]), "a run");
    let mut cleaned = SegmentState::empty(Offset(0), 500, NOW);
    cleaned.size_bytes = 100;
    cleaned.written_bytes = 100;
    cleaned.next_offset = Offset(1);
    assert!(
        !m.replace_segments(&[Offset(0), Offset(1)], cleaned.clone()),
        "it must span the run"
    );
    cleaned.next_offset = Offset(2);
    assert!(m.replace_segments(&[Offset(0), Offset(1)], cleaned));
    let bases: Vec<Offset> = m.segments().iter().map(|s| s.base_offset).collect();
    assert_eq!(bases, vec![Offset(0), Offset(2)]);
    assert_eq!(m.segments()[0].size_bytes, 100);
    assert!(
        !m.holds_segments(&[Offset(0), Offset(1)]),
        "already swapped"
    );
}

// ----- the model-based property test -----

/// One step the proptest chooses.
#[derive(Clone, Debug)]
enum Op {
    /// Appends a batch; with a producer id, at the producer's next sequence, or (retry) at
    /// the sequence of one of its earlier batches.
    Append {
        records: i32,
        body_bytes: usize,
        producer: Option<(i64, bool)>,
    },
    /// A transactional batch of a transactional producer (2 or 3, which also send plain
    /// idempotent batches through `Append`), at its next sequence.
    TxnAppend {
        records: i32,
        body_bytes: usize,
        producer: i64,
    },
    /// A COMMIT or ABORT marker of a transactional producer (WriteTxnMarkers).
    Marker {
        producer: i64,
        commit: bool,
    },
    /// The caller of one of the unanswered appends goes away.
    Cancel {
        pick: usize,
    },
    /// A roll asked for (the broker's `roll_now`).
    Roll,
    /// The log closes: everything after it is refused.
    Close,
    /// Completes one of the I/Os in flight (any of them), successfully or not.
    Complete {
        pick: usize,
        ok: bool,
    },
    Flush,
    Tick {
        ms: i64,
    },
    Retention,
    DeleteRecords {
        per_mille: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1..4i32, 0..1_500usize, prop::option::of((1..4i64, any::<bool>())))
            .prop_map(|(records, body_bytes, producer)| Op::Append { records, body_bytes, producer }),
        2 => (1..4i32, 0..1_500usize, 2..4i64)
            .prop_map(|(records, body_bytes, producer)| Op::TxnAppend { records, body_bytes, producer }),
        1 => (2..4i64, any::<bool>()).prop_map(|(producer, commit)| Op::Marker { producer, commit }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => Just(Op::Roll),
        1 => prop::bool::weighted(0.1).prop_map(|close| if close { Op::Close } else { Op::Flush }),
        8 => (any::<usize>(), prop::bool::weighted(0.93))
            .prop_map(|(pick, ok)| Op::Complete { pick, ok }),
        1 => Just(Op::Flush),
        1 => (0..300i64).prop_map(|ms| Op::Tick { ms }),
        1 => Just(Op::Retention),
        1 => (0..=1000i64).prop_map(|per_mille| Op::DeleteRecords { per_mille }),
    ]
}

fn flush_rule() -> impl Strategy<Value = FlushRule> {
    prop_oneof![
        Just(FlushRule::None),
        Just(FlushRule::Fsync),
        Just(FlushRule::Interval { ms: 100 }),
    ]
}

/// An idempotent batch's producer id, first and last sequence.
type ProducerSeqs = (i64, i32, i32);

/// A batch in the model log.
#[derive(Clone, Copy, Debug)]
struct ModelBatch {
    token: RequestToken,
    base: Offset,
    last: Offset,
    len_bytes: u64,
    segment: Offset,
    position: FilePos,
}

/// What the test's "disk" and log look like, kept from the I/O it carried out.
struct World {
    flush: FlushRule,
    /// Published batches in offset order: the plain-vector model of the log.
    log: Vec<ModelBatch>,
    /// What each append asked for: producer (id, first seq, last seq).
    appends: HashMap<RequestToken, (BatchHeader, Option<ProducerSeqs>)>,
    next_token: u64,
    next_seq: HashMap<i64, i32>,
    sent_seqs: HashMap<i64, Vec<(i32, i32)>>,
    answered: HashMap<RequestToken, Result<Done, PartitionError>>,
    in_flight: Vec<Io>,
    /// Length of each segment's `.log` file.
    files: BTreeMap<Offset, u64>,
    /// The group written by the last `WriteLog`, until it is published or failed.
    group: Option<Vec<PlacedBatch>>,
    /// Writes completed per segment, and how many of them a completed sync covers.
    writes_done: HashMap<Offset, u64>,
    writes_synced: HashMap<Offset, u64>,
    /// Per sync in flight: (segment, writes it covers, written_up_to it covers).
    syncs: HashMap<IoToken, (Offset, u64, Offset)>,
    durable_up_to: Offset,
    checkpoint: Offset,
    log_start: Offset,
    sync_failed: bool,
    now: i64,
    /// The markers asked for: token → COMMIT (true) or ABORT.
    markers: HashMap<RequestToken, bool>,
    /// What each segment's `.txnindex` holds.
    txn_files: BTreeMap<Offset, Vec<AbortedTxn>>,
    /// A `.txnindex` append failed.
    txn_stale: bool,
    /// Appends the machine dropped on a cancel.
    cancelled: HashSet<RequestToken>,
    /// A close was asked for.
    closing: bool,
}

/// One transaction of the model log: its producer, first offset and the marker that ended
/// it (offset, COMMIT?), if any.
type ModelTxn = (i64, Offset, Option<(Offset, bool)>);

impl World {
    fn new(flush: FlushRule) -> Self {
        World {
            flush,
            log: Vec::new(),
            appends: HashMap::new(),
            next_token: 0,
            next_seq: HashMap::new(),
            sent_seqs: HashMap::new(),
            answered: HashMap::new(),
            in_flight: Vec::new(),
            files: BTreeMap::from([(Offset(0), 0)]),
            group: None,
            writes_done: HashMap::new(),
            writes_synced: HashMap::new(),
            syncs: HashMap::new(),
            durable_up_to: Offset(0),
            checkpoint: Offset(0),
            log_start: Offset(0),
            sync_failed: false,
            now: NOW,
            markers: HashMap::new(),
            txn_files: BTreeMap::new(),
            txn_stale: false,
            cancelled: HashSet::new(),
            closing: false,
        }
    }

    /// A published batch as a transaction event: its producer, and `None` for a
    /// transactional data batch or `Some(commit)` for a marker.
    fn txn_event(&self, b: &ModelBatch) -> Option<(i64, Option<bool>)> {
        let h = &self.appends[&b.token].0;
        if let Some(commit) = self.markers.get(&b.token) {
            return Some((h.producer_id, Some(*commit)));
        }
        (h.is_transactional() && h.producer_id >= 0).then_some((h.producer_id, None))
    }

    /// The transactions of the published log, by definition: a transaction of a producer is
    /// a run of its transactional batches with no marker of it between them; it is ongoing
    /// until a marker of its producer follows, and aborted when that marker is an ABORT.
    fn model_txns(&self) -> Vec<ModelTxn> {
        let mut txns = Vec::new();
        for (i, b) in self.log.iter().enumerate() {
            let Some((pid, None)) = self.txn_event(b) else {
                continue;
            };
            let previous = self.log[..i]
                .iter()
                .rev()
                .filter_map(|x| self.txn_event(x))
                .find(|(p, _)| *p == pid);
            if matches!(previous, Some((_, None))) {
                continue; // not the first batch of its transaction
            }
            let end = self.log[i + 1..]
                .iter()
                .find_map(|x| match self.txn_event(x) {
                    Some((p, Some(commit))) if p == pid => Some((x.base, commit)),
                    _ => None,
                });
            txns.push((pid, b.base, end));
        }
        txns
    }

    /// The model's last stable offset: the first offset of the oldest ongoing transaction,
    /// else the high watermark (I67).
    fn model_lso(txns: &[ModelTxn], hw: Offset) -> Offset {
        txns.iter()
            .filter(|t| t.2.is_none())
            .map(|t| t.1)
            .min()
            .map_or(hw, |first| first.min(hw))
    }

    /// The model's aborted ranges in marker order, each with the LSO once its marker landed
    /// (the first offset of a transaction still open across the marker, else after it).
    fn model_aborted(txns: &[ModelTxn]) -> Vec<AbortedTxn> {
        let mut aborted: Vec<AbortedTxn> = txns
            .iter()
            .filter_map(|&(producer_id, first, end)| {
                let (marker, false) = end? else {
                    return None;
                };
                let open_across = txns
                    .iter()
                    .filter(|t| t.1 <= marker && t.2.is_none_or(|(e, _)| e > marker))
                    .map(|t| t.1)
                    .min();
                Some(AbortedTxn {
                    producer_id,
                    first_offset: first.0,
                    last_offset: marker.0,
                    last_stable_offset: open_across.unwrap_or(marker.plus(1)).0,
                })
            })
            .collect();
        aborted.sort_by_key(|a| a.last_offset);
        aborted
    }

    fn model_next(&self) -> Offset {
        self.log.last().map_or(Offset(0), |b| b.last.plus(1))
    }

    fn new_token(&mut self) -> RequestToken {
        self.next_token += 1;
        RequestToken(self.next_token)
    }

    /// Takes the machine's I/O, checking each request as it is asked for.
    fn take_io(&mut self, m: &mut PartitionMachine) {
        while let Some(io) = m.poll_io() {
            match &io.kind {
                IoKind::WriteLog {
                    segment,
                    position,
                    batches,
                } => {
                    assert_eq!(
                        self.files[segment], *position,
                        "a write starts at the file's end: no torn tail left (I29)"
                    );
                    assert_eq!(batches[0].base_offset, self.model_next(), "dense (I1)");
                    let mut expected_pos = *position;
                    for pair in batches.windows(2) {
                        let first = &self.appends[&pair[0].token].0;
                        assert_eq!(
                            pair[1].base_offset,
                            pair[0]
                                .base_offset
                                .plus(i64::from(first.last_offset_delta) + 1),
                            "dense (I1)"
                        );
                        assert!(pair[0].token < pair[1].token, "handle_append order (I27)");
                    }
                    if let Some(last) = self.log.last() {
                        assert!(last.token < batches[0].token, "handle_append order (I27)");
                    }
                    for b in batches {
                        assert_eq!(u64::from(b.position.0), expected_pos);
                        expected_pos += u64::from(b.len_bytes);
                    }
                    assert!(self.group.is_none(), "one write group at a time (I28)");
                    self.group = Some(batches.clone());
                }
                IoKind::CreateSegment { base_offset } => {
                    let old = *self.files.keys().next_back().expect("a segment");
                    assert_eq!(
                        self.writes_done.get(&old).copied().unwrap_or(0),
                        self.writes_synced.get(&old).copied().unwrap_or(0),
                        "the sealed segment is synced before the next is created (I5)"
                    );
                    assert!(*base_offset > old);
                }
                IoKind::SyncLog { segment } => {
                    assert!(!self.sync_failed, "no sync after a failed one (I8)");
                    let covers = self.writes_done.get(segment).copied().unwrap_or(0);
                    self.syncs
                        .insert(io.token, (*segment, covers, m.written_up_to()));
                }
                IoKind::RemoveSegment { base_offset } => {
                    assert_ne!(
                        Some(base_offset),
                        self.files.keys().next_back(),
                        "never the active segment (I9)"
                    );
                    assert!(
                        m.log_start_offset() <= self.checkpoint,
                        "removed only below a durable start (I25)"
                    );
                }
                IoKind::TruncateLog { segment, len_bytes } => {
                    assert_eq!(
                        *len_bytes,
                        m.segments().last().expect("an active segment").size_bytes
                    );
                    assert_eq!(Some(segment), self.files.keys().next_back());
                }
                IoKind::AppendTxnIndex { segment, entries } => {
                    assert_eq!(Some(segment), self.files.keys().next_back());
                    assert!(!entries.is_empty());
                    let aborted = Self::model_aborted(&self.model_txns());
                    for e in entries {
                        assert!(
                            e.last_offset >= segment.0 && aborted.contains(e),
                            "a .txnindex entry is an aborted range of its segment (I68)"
                        );
                    }
                }
                _ => {}
            }
            self.in_flight.push(io);
        }
    }

    fn complete(&mut self, m: &mut PartitionMachine, pick: usize, ok: bool) {
        if self.in_flight.is_empty() {
            return;
        }
        let io = self.in_flight.swap_remove(pick % self.in_flight.len());
        let result = if ok { Ok(()) } else { Err(eio()) };
        match (&io.kind, ok) {
            (
                IoKind::WriteLog {
                    segment,
                    position,
                    batches,
                },
                _,
            ) => {
                let len: u64 = batches.iter().map(|b| u64::from(b.len_bytes)).sum();
                // A failed write may leave a torn tail.
                let written = if ok { len } else { len / 2 };
                let file = self.files.get_mut(segment).expect("segment file");
                *file = (*file).max(position + written);
                if ok {
                    *self.writes_done.entry(*segment).or_default() += 1;
                } else {
                    self.group = None;
                }
            }
            (IoKind::WriteIndex { .. } | IoKind::WriteTimeIndex { .. }, false) => {
                self.group = None;
            }
            (IoKind::TruncateLog { segment, len_bytes }, true) => {
                self.files.insert(*segment, *len_bytes);
            }
            (IoKind::CreateSegment { base_offset }, true) => {
                self.files.insert(*base_offset, 0);
            }
            (IoKind::SyncLog { .. }, _) => {
                let (segment, covers, up_to) = self.syncs.remove(&io.token).expect("sync");
                if ok {
                    let synced = self.writes_synced.entry(segment).or_default();
                    *synced = (*synced).max(covers);
                    if !self.sync_failed {
                        self.durable_up_to = self.durable_up_to.max(up_to);
                    }
                } else {
                    self.sync_failed = true;
                }
            }
            (IoKind::SyncIndexes { .. }, false) => self.sync_failed = true,
            (IoKind::WriteStartCheckpoint { start }, true) => {
                self.checkpoint = self.checkpoint.max(*start);
            }
            (IoKind::RemoveSegment { base_offset }, true) => {
                self.files.remove(base_offset);
                self.txn_files.remove(base_offset);
            }
            (IoKind::AppendTxnIndex { segment, entries }, true) => {
                self.txn_files
                    .entry(*segment)
                    .or_default()
                    .extend_from_slice(entries);
            }
            (IoKind::AppendTxnIndex { .. }, false) => self.txn_stale = true,
            _ => {}
        }
        let hw_before = m.high_watermark();
        m.handle_io_done(io.token, result, self.now);
        if m.high_watermark() != hw_before {
            // The group of the last write was published.
            let group = self.group.take().expect("a published group was written");
            for b in group {
                let header = self.appends[&b.token].0;
                self.log.push(ModelBatch {
                    token: b.token,
                    base: b.base_offset,
                    last: b.base_offset.plus(i64::from(header.last_offset_delta)),
                    len_bytes: u64::from(b.len_bytes),
                    segment: m.segments().last().expect("an active segment").base_offset,
                    position: b.position,
                });
            }
        }
    }

    /// Takes the machine's answers, checking each against the model.
    fn take_acks(&mut self, m: &mut PartitionMachine) {
        while let Some(answer) = m.poll_ack() {
            assert!(
                !self.answered.contains_key(&answer.token),
                "one answer per request: {answer:?}"
            );
            if let Ok(Done::Appended(info)) = &answer.result {
                let modelled = if info.duplicate {
                    let (_, producer) = self.appends[&answer.token];
                    let (id, first, last) = producer.expect("only idempotent batches duplicate");
                    self.log
                        .iter()
                        .find(|b| {
                            b.base == info.base_offset
                                && self.appends[&b.token].1 == Some((id, first, last))
                        })
                        .copied()
                        .expect("a duplicate names an appended batch of its producer")
                } else {
                    self.log
                        .iter()
                        .find(|b| b.token == answer.token)
                        .copied()
                        .expect("acknowledged only once published (I2)")
                };
                assert_eq!(modelled.base, info.base_offset);
                assert_eq!(modelled.last, info.last_offset);
                if !info.duplicate {
                    assert_eq!(modelled.position, info.position);
                    assert_eq!(modelled.segment, info.segment_base_offset);
                }
                if self.flush == FlushRule::Fsync {
                    assert!(
                        info.last_offset < self.durable_up_to,
                        "fsync: acknowledged only once durable (I8)"
                    );
                }
            }
            if let Err(PartitionError::Producer(e)) = &answer.result {
                assert!(
                    !self.markers.contains_key(&answer.token),
                    "no marker of epoch 0 is fenced: {e:?}"
                );
                if let ProducerError::InvalidTxnState { producer_id } = e {
                    // Checked against the published log, which the model holds now (a
                    // refusal is answered as its group is placed, after the last publish).
                    assert!(
                        self.model_txns()
                            .iter()
                            .any(|t| t.0 == *producer_id && t.2.is_none()),
                        "INVALID_TXN_STATE only inside an ongoing transaction (I72)"
                    );
                }
                if let ProducerError::OutOfOrderSequence {
                    producer_id,
                    expected: Some(expected),
                    ..
                } = e
                {
                    // Resynchronise the producer (a refused or failed batch left a gap).
                    self.next_seq.insert(*producer_id, *expected);
                }
            }
            assert_eq!(
                answer.result == Err(PartitionError::Cancelled),
                self.cancelled.contains(&answer.token),
                "Cancelled answers exactly the dropped appends"
            );
            if let Ok(Done::Rolled {
                base_offset: Some(base),
            }) = &answer.result
            {
                assert_eq!(
                    m.segments().last().map(|s| s.base_offset),
                    Some(*base),
                    "a requested roll answers with the new active segment"
                );
            }
            if answer.result == Err(PartitionError::Closed) {
                assert!(self.closing, "Closed only after a close");
            }
            if let Ok(Done::Closed { clean }) = &answer.result {
                assert_eq!(*clean, !self.txn_stale);
                assert_eq!(m.synced_up_to(), m.high_watermark());
                assert!(
                    self.durable_up_to >= m.high_watermark(),
                    "closed only once everything written is durable"
                );
            }
            if let Ok(Done::Flushed) = &answer.result {
                assert!(
                    m.synced_up_to() <= self.durable_up_to,
                    "flushed only when durable"
                );
            }
            self.answered.insert(answer.token, answer.result);
        }
    }

    /// The machine's state agrees with the model and its invariants hold.
    fn check(&mut self, m: &PartitionMachine) {
        assert_eq!(
            m.high_watermark(),
            self.model_next(),
            "high watermark = model end"
        );
        assert!(m.synced_up_to() <= self.durable_up_to || self.sync_failed);
        assert!(
            m.log_start_offset() >= self.log_start,
            "the start only moves forward (I9)"
        );
        self.log_start = m.log_start_offset();
        assert!(m.log_start_offset() <= m.high_watermark());
        assert!(m.log_start_offset() <= self.checkpoint || m.log_start_offset() == Offset(0));
        let segments = m.segments();
        assert!(segments[0].base_offset <= m.log_start_offset());
        assert_eq!(
            segments.last().expect("an active segment").next_offset,
            m.high_watermark()
        );
        for pair in segments.windows(2) {
            assert_eq!(
                pair[0].next_offset, pair[1].base_offset,
                "segments are contiguous"
            );
        }
        for s in segments {
            assert!(s.size_bytes <= s.written_bytes, "published <= written (I2)");
            let batches: Vec<&ModelBatch> = self
                .log
                .iter()
                .filter(|b| b.segment == s.base_offset)
                .collect();
            let bytes: u64 = batches.iter().map(|b| b.len_bytes).sum();
            assert_eq!(
                s.size_bytes, bytes,
                "the published size is the model's bytes"
            );
            let starts: HashSet<(u32, i64)> = batches
                .iter()
                .map(|b| (b.position.0, b.base.0 - s.base_offset.0))
                .collect();
            for pair in s.index.entries().windows(2) {
                assert!(pair[0].position < pair[1].position, "monotonic index (I4)");
                assert!(pair[0].relative_offset < pair[1].relative_offset);
            }
            for e in s.index.entries() {
                assert!(
                    starts.contains(&(e.position.0, i64::from(e.relative_offset.0))),
                    "an index entry points at a published batch start (I4)"
                );
            }
            for e in s.time_index.entries() {
                assert!(batches
                    .iter()
                    .any(|b| b.base.0 - s.base_offset.0 == i64::from(e.relative_offset.0)));
            }
        }
        // Reads: below the start is out of range, the high watermark is empty, and any offset
        // in between is planned from a segment that holds it and a floor at or before it.
        if m.log_start_offset() > Offset(0) {
            assert!(m
                .fetch_plan(m.log_start_offset().plus(-1), Isolation::ReadUncommitted)
                .is_err());
        }
        assert_eq!(
            m.fetch_plan(m.high_watermark(), Isolation::ReadUncommitted)
                .map(|plan| plan.segments.len()),
            Ok(0)
        );
        if let Some(b) = self.log.iter().find(|b| b.last >= m.log_start_offset()) {
            let plan = m
                .fetch_plan(b.base.max(m.log_start_offset()), Isolation::ReadUncommitted)
                .expect("in range");
            let first = plan.segments[0];
            assert_eq!(first.base_offset, b.segment);
            assert!(first.floor <= b.position);
            assert_eq!(
                Some(first.end_bytes),
                segments
                    .iter()
                    .find(|s| s.base_offset == b.segment)
                    .map(|s| s.size_bytes)
            );
        }
        self.check_txns(m);
    }

    /// The transaction state against the model (I67–I72).
    fn check_txns(&self, m: &PartitionMachine) {
        let txns = self.model_txns();
        let hw = m.high_watermark();
        let lso = Self::model_lso(&txns, hw);
        assert_eq!(m.last_stable_offset(), lso, "LSO = the model's (I67)");
        assert!(m.last_stable_offset() <= hw, "LSO ≤ high watermark (I67)");
        assert!(
            m.log_start_offset() <= m.last_stable_offset(),
            "the log start never passes the LSO (I71)"
        );
        let aborted: Vec<AbortedTxn> = Self::model_aborted(&txns)
            .into_iter()
            .filter(|a| a.last_offset >= m.log_start_offset().0)
            .collect();
        let got: Vec<AbortedTxn> = m.txns().aborted().copied().collect();
        assert_eq!(got, aborted, "aborted ranges = the model's (I68)");
        // No plain batch of a producer was published inside its ongoing transaction (I72).
        for b in &self.log {
            let h = &self.appends[&b.token].0;
            if h.producer_id >= 0 && !h.is_transactional() && !self.markers.contains_key(&b.token) {
                assert!(
                    !txns.iter().any(|t| t.0 == h.producer_id
                        && t.1 < b.base
                        && t.2.is_none_or(|(end, _)| end > b.base)),
                    "a plain batch inside its producer's transaction (I72)"
                );
            }
        }
        // read_committed from the log start: stops at the LSO with the overlapping ranges (I69).
        let from = m.log_start_offset();
        let plan = m
            .fetch_plan(from, Isolation::ReadCommitted)
            .expect("the log start is in range");
        assert_eq!((plan.last_stable_offset, plan.upper), (lso, lso));
        assert_eq!(plan.segments.is_empty(), from >= lso);
        if from < lso {
            let overlapping: Vec<AbortedTxn> = aborted
                .iter()
                .filter(|a| a.last_offset >= from.0 && a.first_offset < lso.0)
                .copied()
                .collect();
            assert_eq!(plan.aborted, overlapping);
        }
        // The .txnindex files hold model ranges of their segment; unless an append failed,
        // every range in memory is in its marker's segment's file once no append is in flight.
        assert_eq!(
            m.txn_state_stale(),
            self.txn_stale,
            "stale only after a failure (I70)"
        );
        let all = Self::model_aborted(&txns);
        for (segment, entries) in &self.txn_files {
            for e in entries {
                assert!(e.last_offset >= segment.0 && all.contains(e));
            }
        }
        let indexing = self
            .in_flight
            .iter()
            .any(|io| matches!(io.kind, IoKind::AppendTxnIndex { .. }));
        if !self.txn_stale && !indexing {
            for a in &got {
                let floor = m
                    .segments()
                    .partition_point(|s| s.base_offset.0 <= a.last_offset)
                    - 1;
                let segment = m.segments()[floor].base_offset;
                assert!(
                    self.txn_files.get(&segment).is_some_and(|f| f.contains(a)),
                    "an aborted range is in its segment's .txnindex (I68, I70)"
                );
            }
        }
    }

    fn step(&mut self, m: &mut PartitionMachine, op: Op) {
        match op {
            Op::Append {
                records,
                body_bytes,
                producer,
            } => {
                let token = self.new_token();
                let producer = producer.map(|(id, retry)| {
                    let sent = self.sent_seqs.entry(id).or_default();
                    match (retry, sent.last()) {
                        (true, Some(&(first, last))) => (id, first, last - first + 1),
                        _ => {
                            let next = self.next_seq.entry(id).or_default();
                            let first = *next;
                            *next += records;
                            sent.push((first, first + records - 1));
                            (id, first, records)
                        }
                    }
                });
                let (records, producer_fields) = match producer {
                    Some((id, first, count)) => (count, Some((id, first))),
                    None => (records, None),
                };
                let h = header(records, body_bytes, producer_fields, self.now);
                self.appends.insert(
                    token,
                    (
                        h,
                        producer.map(|(id, first, count)| (id, first, first + count - 1)),
                    ),
                );
                m.handle_append([Append::produced(token, h)], self.now);
            }
            Op::TxnAppend {
                records,
                body_bytes,
                producer,
            } => {
                let token = self.new_token();
                let next = self.next_seq.entry(producer).or_default();
                let first = *next;
                *next += records;
                self.sent_seqs
                    .entry(producer)
                    .or_default()
                    .push((first, first + records - 1));
                let h = txn_header(records, body_bytes, (producer, first), self.now);
                self.appends
                    .insert(token, (h, Some((producer, first, first + records - 1))));
                m.handle_append([Append::produced(token, h)], self.now);
            }
            Op::Marker { producer, commit } => {
                let token = self.new_token();
                let a = marker_append(token.0, producer, commit);
                self.appends.insert(token, (a.header, None));
                self.markers.insert(token, commit);
                m.handle_append([a], self.now);
            }
            Op::Complete { pick, ok } => self.complete(m, pick, ok),
            Op::Cancel { pick } => {
                let mut waiting: Vec<RequestToken> = self
                    .appends
                    .keys()
                    .filter(|t| !self.answered.contains_key(t))
                    .copied()
                    .collect();
                waiting.sort();
                if !waiting.is_empty() {
                    let token = waiting[pick % waiting.len()];
                    if m.handle_cancel(token, self.now) {
                        self.cancelled.insert(token);
                    }
                }
            }
            Op::Roll => {
                let token = self.new_token();
                m.handle_roll(token, self.now);
            }
            Op::Close => {
                let token = self.new_token();
                self.closing = true;
                m.handle_close(token, self.now);
            }
            Op::Flush => {
                let token = self.new_token();
                m.handle_flush(token, self.now);
            }
            Op::Tick { ms } => {
                self.now += ms;
                m.handle_timeout(self.now);
            }
            Op::Retention => {
                let token = self.new_token();
                m.handle_retention(token, self.now);
            }
            Op::DeleteRecords { per_mille } => {
                let token = self.new_token();
                let hw = m.high_watermark().0;
                m.handle_delete_records(token, Offset(hw * per_mille / 1000), self.now);
            }
        }
        self.take_io(m);
        self.take_acks(m);
        self.check(m);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The machine against the model under any interleaving of appends, completions (in any
    /// order, some failing), flushes, interval ticks, retention and DeleteRecords; then every
    /// I/O completes and every request must have exactly one answer.
    #[test]
    fn machine_matches_a_plain_log_model(
        flush in flush_rule(),
        retention_bytes in prop::option::of(2_000..20_000u64),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut cfg = config(flush);
        cfg.retention.retention_bytes = retention_bytes;
        let mut m = machine(cfg);
        let mut world = World::new(flush);
        for op in ops {
            world.step(&mut m, op);
        }
        // Settle: everything in flight completes, ticks fire, until nothing is left.
        for _ in 0..10_000 {
            if world.in_flight.is_empty() {
                world.now += 1_000;
                m.handle_timeout(world.now);
                world.take_io(&mut m);
                world.take_acks(&mut m);
                if world.in_flight.is_empty() {
                    break;
                }
            }
            world.complete(&mut m, 0, true);
            world.take_io(&mut m);
            world.take_acks(&mut m);
            world.check(&m);
        }
        prop_assert!(world.in_flight.is_empty(), "I/O settles");
        for token in 1..=world.next_token {
            prop_assert!(
                world.answered.contains_key(&RequestToken(token)),
                "request {} was answered", token
            );
        }
        for b in &world.log {
            let answer = &world.answered[&b.token];
            match answer {
                Ok(Done::Appended(info)) => prop_assert_eq!(info.base_offset, b.base),
                // Refusing an acknowledgement is always safe (I8); only after a failed sync.
                Err(PartitionError::Offline(_)) => prop_assert!(world.sync_failed),
                other => prop_assert!(false, "published batch answered {:?}", other),
            }
        }
    }
}
