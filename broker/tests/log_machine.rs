//! The partition machine built from a reopened log (`PartitionLog::machine`, the first step of
//! driving the log by `core::partition::PartitionMachine`; DESIGN.md, "The partition log
//! machine") holds what the log holds and decides the next appends as the log does: the same
//! offsets, positions, segments, duplicates and refusals, the same last stable offset and
//! aborted ranges. The log is written (plain, idempotent and transactional batches, COMMIT
//! and ABORT markers, several segments), closed and reopened through recovery first: a fixed
//! run on the portable and io_uring backends, and 24 random runs (split anywhere by the
//! reopen) on the portable one.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use minikafka_broker::log::{AppendInfo, LogConfig, LogError, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::control_batch::{encode_marker, ControlType, TxnMarker};
use minikafka_core::partition::{
    Append, Done, Isolation, PartitionError, PartitionMachine, RequestToken,
};
use minikafka_core::record::BatchHeader;
use minikafka_core::types::Offset;
use minikafka_testkit::check::{ensure, run_check, scratch_dir};
use minikafka_testkit::log::{producer_batch, test_batch, transactional_batch, NOW_MS};

/// What one append did, as both sides can say it: offsets, segment, position and whether a
/// duplicate, or the Kafka error code of a refusal.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Appended {
        base: Offset,
        last: Offset,
        segment: Offset,
        position: u32,
        duplicate: bool,
    },
    Refused(i16),
}

fn from_log(result: Result<AppendInfo, LogError>) -> Result<Outcome, String> {
    match result {
        Ok(info) => Ok(Outcome::Appended {
            base: info.base_offset,
            last: info.last_offset,
            segment: info.segment_base_offset,
            position: info.position.0,
            duplicate: info.duplicate,
        }),
        Err(LogError::Producer(e)) => Ok(Outcome::Refused(e.kafka_error_code().0)),
        Err(e) => Err(format!("the log failed: {e}")),
    }
}

/// Appends `append` to the machine, completing every I/O it asks for, and returns its answer.
fn machine_append(m: &mut PartitionMachine, append: Append) -> Result<Outcome, String> {
    let token = append.token;
    m.handle_append([append], NOW_MS);
    for _ in 0..100 {
        let ios: Vec<_> = std::iter::from_fn(|| m.poll_io()).collect();
        if ios.is_empty() {
            break;
        }
        for io in ios {
            m.handle_io_done(io.token, Ok(()), NOW_MS);
        }
    }
    let answer = std::iter::from_fn(|| m.poll_ack())
        .find(|a| a.token == token)
        .ok_or("the machine did not answer")?;
    match answer.result {
        Ok(Done::Appended(info)) => Ok(Outcome::Appended {
            base: info.base_offset,
            last: info.last_offset,
            segment: info.segment_base_offset,
            position: info.position.0,
            duplicate: info.duplicate,
        }),
        Err(PartitionError::Producer(e)) => Ok(Outcome::Refused(e.kafka_error_code().0)),
        other => Err(format!("the machine answered {other:?}")),
    }
}

fn marker(producer_id: i64, commit: bool) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control_type: if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        },
    }
}

/// One next append, given to both.
enum Next {
    Batch(Vec<u8>),
    Marker(TxnMarker),
}

async fn both<B: Backend>(
    log: &PartitionLog<B>,
    m: &mut PartitionMachine,
    token: u64,
    next: Next,
) -> Result<(), String> {
    let (by_log, by_machine) = match next {
        Next::Batch(bytes) => {
            let header = BatchHeader::parse(&bytes).map_err(|e| e.to_string())?;
            let by_log = from_log(log.append(bytes, NOW_MS).await)?;
            let append = Append::produced(RequestToken(token), header);
            (by_log, machine_append(m, append)?)
        }
        Next::Marker(marker) => {
            let bytes = encode_marker(&marker, NOW_MS);
            let header = BatchHeader::parse(&bytes).map_err(|e| e.to_string())?;
            let by_log = from_log(log.append_marker(marker, NOW_MS).await)?;
            let append = Append::marker(RequestToken(token), header, marker);
            (by_log, machine_append(m, append)?)
        }
    };
    ensure(by_log == by_machine, || {
        format!("append {token}: the log did {by_log:?}, the machine {by_machine:?}")
    })?;
    same_state(log, m)
}

/// The machine's view equals the log's: high watermark, log start, LSO, aborted ranges,
/// segments and their sizes, and the read floor of every offset.
fn same_state<B: Backend>(log: &PartitionLog<B>, m: &PartitionMachine) -> Result<(), String> {
    let hw = log.high_watermark();
    ensure(m.high_watermark() == hw, || {
        format!("high watermark {hw:?} vs {:?}", m.high_watermark())
    })?;
    ensure(m.log_start_offset() == log.log_start_offset(), || {
        "log start".into()
    })?;
    ensure(m.last_stable_offset() == log.last_stable_offset(), || {
        format!(
            "LSO {:?} vs {:?}",
            log.last_stable_offset(),
            m.last_stable_offset()
        )
    })?;
    ensure(
        m.aborted_transactions(Offset(0), hw) == log.aborted_transactions(Offset(0), hw),
        || "aborted ranges".into(),
    )?;
    let segments = log.segments();
    let theirs: Vec<(Offset, u64)> = segments
        .iter()
        .map(|s| (s.base_offset(), s.size_bytes()))
        .collect();
    let ours: Vec<(Offset, u64)> = m
        .segments()
        .iter()
        .map(|s| (s.base_offset, s.size_bytes))
        .collect();
    ensure(theirs == ours, || {
        format!("segments {theirs:?} vs {ours:?}")
    })?;
    for offset in log.log_start_offset().0..hw.0 {
        let plan = m
            .fetch_plan(Offset(offset), Isolation::ReadUncommitted)
            .map_err(|e| format!("fetch plan at {offset}: {e:?}"))?;
        let first = plan.segments.first().ok_or("an empty plan below the end")?;
        let segment = segments
            .iter()
            .find(|s| s.base_offset() == first.base_offset)
            .ok_or("the plan names no segment of the log")?;
        ensure(
            first.floor == segment.floor_position(Offset(offset)),
            || format!("read floor of {offset}"),
        )?;
    }
    Ok(())
}

async fn check<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let config = LogConfig {
        segment_bytes: 2_048,
        index_interval_bytes: 512,
        ..LogConfig::default()
    };
    let open = |clean: bool| {
        let (backend, dir, config) = (backend.clone(), dir.clone(), config.clone());
        async move {
            PartitionLog::open(backend, Path::new(&dir), config, clean, NOW_MS)
                .await
                .map_err(|e| format!("open: {e}"))
        }
    };
    let log = open(false).await?;
    let step = |what: &str, r: Result<AppendInfo, LogError>| {
        r.map(|_| ()).map_err(|e| format!("{what}: {e}"))
    };
    for tag in 0..8 {
        step(
            "plain",
            log.append(test_batch(tag, 3, 200, NOW_MS), NOW_MS).await,
        )?;
    }
    step(
        "idempotent",
        log.append(producer_batch(7, 0, 0, 2, 1), NOW_MS).await,
    )?;
    step(
        "idempotent",
        log.append(producer_batch(7, 0, 2, 2, 2), NOW_MS).await,
    )?;
    step(
        "txn 9",
        log.append(transactional_batch(9, 0, "k", "v"), NOW_MS)
            .await,
    )?;
    step(
        "plain",
        log.append(test_batch(20, 2, 100, NOW_MS), NOW_MS).await,
    )?;
    step("abort 9", log.append_marker(marker(9, false), NOW_MS).await)?;
    step(
        "txn 11",
        log.append(transactional_batch(11, 0, "k", "w"), NOW_MS)
            .await,
    )?;
    step(
        "plain",
        log.append(test_batch(21, 1, 100, NOW_MS), NOW_MS).await,
    )?;
    log.close().await.map_err(|e| format!("close: {e}"))?;

    // Reopened through recovery (the active segment scanned, the producer and transaction
    // state replayed), as `open` will build the machine.
    let log = open(false).await?;
    ensure(log.segments().len() > 2, || "several segments".into())?;
    ensure(log.last_stable_offset() < log.high_watermark(), || {
        "transaction 11 is still open".into()
    })?;
    let mut m = log.machine(NOW_MS);
    same_state(&log, &m)?;

    let nexts = [
        Next::Batch(test_batch(30, 2, 150, NOW_MS)),
        // A retry of producer 7's last batch: a duplicate on both sides.
        Next::Batch(producer_batch(7, 0, 2, 2, 2)),
        // Out of order: OUT_OF_ORDER_SEQUENCE_NUMBER on both sides.
        Next::Batch(producer_batch(7, 0, 9, 1, 3)),
        Next::Batch(producer_batch(7, 0, 4, 1, 4)),
        // A plain batch of producer 11 inside its transaction: INVALID_TXN_STATE (I72).
        Next::Batch(producer_batch(11, 0, 1, 1, 5)),
        Next::Marker(marker(11, true)),
        Next::Batch(transactional_batch(13, 0, "k", "x")),
        Next::Batch(test_batch(31, 4, 400, NOW_MS)),
        Next::Marker(marker(13, false)),
        // A retried marker records nothing; an older producer epoch is refused.
        Next::Marker(marker(13, false)),
        Next::Marker(TxnMarker {
            producer_epoch: -1,
            ..marker(13, true)
        }),
    ];
    for (token, next) in (1u64..).zip(nexts) {
        both(&log, &mut m, token, next).await?;
    }
    // Until a roll, on both sides.
    let segments_before = log.segments().len();
    for token in 100u64..130 {
        both(
            &log,
            &mut m,
            token,
            Next::Batch(test_batch(token, 3, 300, NOW_MS)),
        )
        .await?;
        if log.segments().len() > segments_before + 1 {
            break;
        }
    }
    ensure(log.segments().len() > segments_before, || {
        "the appends rolled".into()
    })?;
    log.close().await.map_err(|e| format!("close: {e}"))
}

/// One step of the randomized run.
#[derive(Clone, Debug)]
enum Op {
    /// A plain batch of `records` records of `value_bytes` bytes.
    Plain { records: usize, value_bytes: usize },
    /// Idempotent producer 20 + `producer`: its next sequence, a retry of its last batch, or
    /// a gap (out of order).
    Idempotent { producer: i64, how: u8 },
    /// A transactional batch of producer 30 + `producer` at its next sequence.
    Transactional { producer: i64 },
    /// A plain idempotent batch of a transactional producer (refused inside its transaction).
    PlainOfTransactional { producer: i64 },
    /// A COMMIT or ABORT marker of a transactional producer.
    Marker { producer: i64, commit: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..5usize, 10..400usize)
            .prop_map(|(records, value_bytes)| Op::Plain { records, value_bytes }),
        2 => (0..2i64, 0..3u8).prop_map(|(producer, how)| Op::Idempotent { producer, how }),
        2 => (0..2i64).prop_map(|producer| Op::Transactional { producer }),
        1 => (0..2i64).prop_map(|producer| Op::PlainOfTransactional { producer }),
        1 => (0..2i64, any::<bool>()).prop_map(|(producer, commit)| Op::Marker { producer, commit }),
    ]
}

/// Turns `op` into the next append, tracking each producer's next sequence from the log's
/// outcome of the previous one.
struct Producers {
    next: std::collections::HashMap<i64, i32>,
    last: std::collections::HashMap<i64, (i32, usize)>,
}

impl Producers {
    fn next(&mut self, op: &Op, tag: u64) -> (Next, Option<(i64, i32, usize)>) {
        match *op {
            Op::Plain {
                records,
                value_bytes,
            } => (
                Next::Batch(test_batch(tag, records, value_bytes, NOW_MS)),
                None,
            ),
            Op::Idempotent { producer, how } => {
                let pid = 20 + producer;
                let next = *self.next.get(&pid).unwrap_or(&0);
                let (seq, records) = match (how, self.last.get(&pid)) {
                    (1, Some(&(seq, records))) => (seq, records),
                    (2, _) => (next + 3, 1),
                    _ => (next, 2),
                };
                (
                    Next::Batch(producer_batch(pid, 0, seq, records, tag)),
                    Some((pid, seq, records)),
                )
            }
            Op::Transactional { producer } => {
                let pid = 30 + producer;
                let seq = *self.next.get(&pid).unwrap_or(&0);
                (
                    Next::Batch(transactional_batch(pid, seq, "k", "v")),
                    Some((pid, seq, 1)),
                )
            }
            Op::PlainOfTransactional { producer } => {
                let pid = 30 + producer;
                let seq = *self.next.get(&pid).unwrap_or(&0);
                (
                    Next::Batch(producer_batch(pid, 0, seq, 1, tag)),
                    Some((pid, seq, 1)),
                )
            }
            Op::Marker { producer, commit } => (Next::Marker(marker(30 + producer, commit)), None),
        }
    }

    /// The log accepted (not as a duplicate) the batch of `pid` at `seq`.
    fn accepted(&mut self, pid: i64, seq: i32, records: usize) {
        self.next.insert(pid, seq + records as i32);
        self.last.insert(pid, (seq, records));
    }
}

/// Writes `before` to the log alone, reopens it through recovery, builds the machine, then
/// gives `after` to both and compares each outcome and the state after it.
async fn random_run<B: Backend>(
    backend: B,
    dir: PathBuf,
    before: Vec<Op>,
    after: Vec<Op>,
) -> Result<(), String> {
    let config = LogConfig {
        segment_bytes: 2_048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    let open = || PartitionLog::open(backend.clone(), &dir, config.clone(), false, NOW_MS);
    let log = open().await.map_err(|e| format!("open: {e}"))?;
    let mut producers = Producers {
        next: Default::default(),
        last: Default::default(),
    };
    for (tag, op) in (0u64..).zip(&before) {
        let (next, seqs) = producers.next(op, tag);
        let outcome = match next {
            Next::Batch(bytes) => from_log(log.append(bytes, NOW_MS).await)?,
            Next::Marker(marker) => from_log(log.append_marker(marker, NOW_MS).await)?,
        };
        if let (
            Some((pid, seq, records)),
            Outcome::Appended {
                duplicate: false, ..
            },
        ) = (seqs, outcome)
        {
            producers.accepted(pid, seq, records);
        }
    }
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let log = open().await.map_err(|e| format!("reopen: {e}"))?;
    let mut m = log.machine(NOW_MS);
    same_state(&log, &m)?;
    for (tag, op) in (1_000u64..).zip(&after) {
        let (next, seqs) = producers.next(op, tag);
        let hw = log.high_watermark();
        both(&log, &mut m, tag, next).await?;
        if let Some((pid, seq, records)) = seqs {
            // Accepted as new when the high watermark moved past it.
            if log.high_watermark() > hw {
                producers.accepted(pid, seq, records);
            }
        }
    }
    log.close().await.map_err(|e| format!("close: {e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any sequence of appends and markers, split anywhere by a close and a reopen: the machine
    /// built at the reopen decides every later append as the log does.
    #[test]
    fn random_appends_after_a_reopen_are_decided_alike(
        before in prop::collection::vec(op(), 0..40),
        after in prop::collection::vec(op(), 1..40),
    ) {
        let dir = scratch_dir("log-machine-random");
        let result = run_check::<minikafka_backend_portable::PortableBackend, _, _>(
            &dir,
            move |backend, dir| random_run(backend, dir, before.clone(), after.clone()),
        );
        let _ = std::fs::remove_dir_all(&dir);
        prop_assert!(result.is_ok(), "{:?}", result);
    }
}

#[test]
fn the_machine_built_from_a_reopened_log_decides_as_the_log_portable() {
    let dir = scratch_dir("log-machine-portable");
    run_check::<minikafka_backend_portable::PortableBackend, _, _>(&dir, check).expect("check");
}

#[cfg(all(target_os = "linux", feature = "monoio"))]
#[test]
fn the_machine_built_from_a_reopened_log_decides_as_the_log_monoio() {
    let dir = scratch_dir("log-machine-monoio");
    run_check::<minikafka_backend_monoio::MonoioBackend, _, _>(&dir, check).expect("check");
}
