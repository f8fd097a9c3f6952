//! The partition machine against a plain model: unit tests of each path, and a proptest that
//! drives appends, I/O completions in any order, I/O failures, syncs, rolls, retention and
//! DeleteRecords, checking the machine against a vector of published batches and a model of
//! the files after every step.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::producer::{ProducerLimits, ProducerStateTable};
use crate::record::HEADER_BYTES;

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
    Append {
        token: RequestToken(token),
        header,
    }
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
    assert!(m.fetch_plan(Offset(1)).is_err());
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
}

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
        }
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
            }
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
            assert!(m.fetch_plan(m.log_start_offset().plus(-1)).is_err());
        }
        assert_eq!(
            m.fetch_plan(m.high_watermark())
                .map(|plan| plan.segments.len()),
            Ok(0)
        );
        if let Some(b) = self.log.iter().find(|b| b.last >= m.log_start_offset()) {
            let plan = m
                .fetch_plan(b.base.max(m.log_start_offset()))
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
                m.handle_append([Append { token, header: h }], self.now);
            }
            Op::Complete { pick, ok } => self.complete(m, pick, ok),
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
