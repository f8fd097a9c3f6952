//! The simulated transactional clients (raw requests, so every step is the seed's):
//! - producers with a `transactional.id` each (`tx-0`, `tx-1`, …, the same ids in every
//!   incarnation, so a restart's InitProducerId aborts what a crash left open): they add
//!   partitions of [`TXN_TOPIC`], produce transactional batches, and commit (3 in 4) or abort;
//!   some run a 1 s `transaction.timeout.ms` and sometimes stall past it, so the coordinator
//!   aborts them (their commit is then fenced); one may crash the broker a seeded number of
//!   scheduler steps after sending EndTxn(commit), so crashes land before the PrepareCommit
//!   record is durable, between it and the markers, between markers, and after;
//! - a read_committed reader fetching from random offsets while they run;
//! - at every restart, whole reads of each partition (read_uncommitted and read_committed, up
//!   to the last stable offset ListOffsets gave), and at the end, after every transactional id
//!   initialised again, the same with nothing left open.
//!
//! What is checked is [`crate::txn_model`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_backend_sim::{random_below, SimBackend};
use minikafka_client::admin::list_offsets_at;
use minikafka_client::{
    Consumer, ConsumerConfig, IsolationLevel, OffsetReset, OffsetSpec, SeekTo,
    TopicPartition as ClientTp,
};
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{compute_crc, BatchBuilder, NewRecord, CRC_START};
use minikafka_core::types::Offset;

use crate::broker_access::{connect, txn_partitions, SimConnection, TXN_TOPIC};
use crate::client_ops::{read_all, record_pairs, send_produce_with};
use crate::model::{Model, TopicPartition};

/// The short `transaction.timeout.ms` some producers run (the coordinator's scan for timed-out
/// transactions runs every 200 ms in these runs).
const SHORT_TIMEOUT_MS: i32 = 1_000;

/// The usual `transaction.timeout.ms`.
const LONG_TIMEOUT_MS: i32 = 60_000;

/// The `transactional.id` of producer `index`.
fn transactional_id(index: u32) -> String {
    format!("tx-{index}")
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Codes a coordinator answers while it cannot decide yet (loading, aborting the previous
/// transaction, moving): ask again.
fn retriable(code: i16) -> bool {
    [
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::NOT_COORDINATOR,
        ErrorCode::CONCURRENT_TRANSACTIONS,
    ]
    .iter()
    .any(|c| c.code() == code)
}

/// InitProducerId for `id`, retried while the coordinator is busy: the producer id and epoch,
/// `Ok(None)` when refused or still busy after the retries, `Err` on a connection failure.
async fn init_producer(
    backend: &SimBackend,
    conn: &mut SimConnection,
    id: &str,
    timeout_ms: i32,
) -> Result<Option<(i64, i16)>, ()> {
    for _ in 0..200 {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(text(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = conn.request(&request).await.map_err(|_| ())?;
        if r.error_code == 0 {
            return Ok(Some((r.producer_id.0, r.producer_epoch)));
        }
        if !retriable(r.error_code) {
            return Ok(None);
        }
        backend.sleep(Duration::from_millis(50)).await;
    }
    Ok(None)
}

/// AddPartitionsToTxn (v3 and below, as producers send it): whether every partition was
/// added; `Err` on a connection failure.
async fn add_partitions(
    backend: &SimBackend,
    conn: &mut SimConnection,
    id: &str,
    producer: (i64, i16),
    partitions: &[TopicPartition],
) -> Result<bool, ()> {
    for _ in 0..20 {
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(id)))
            .with_v3_and_below_producer_id(ProducerId(producer.0))
            .with_v3_and_below_producer_epoch(producer.1)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text(TXN_TOPIC.0)))
                .with_partitions(partitions.iter().map(|tp| tp.1).collect())]);
        let r = conn.request(&request).await.map_err(|_| ())?;
        let codes: Vec<i16> = r
            .results_by_topic_v3_and_below
            .iter()
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            })
            .collect();
        if codes.len() == partitions.len() && codes.iter().all(|c| *c == 0) {
            return Ok(true);
        }
        if !codes.iter().all(|c| *c == 0 || retriable(*c)) {
            return Ok(false);
        }
        backend.sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

fn end_txn_request(id: &str, producer: (i64, i16), commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit)
}

/// Sets the transactional bit of an encoded batch and recomputes its CRC (which covers the
/// attributes), as a transactional producer writes it.
fn mark_transactional(batch: &mut [u8]) {
    const CRC_AT: usize = CRC_START - 4;
    let attributes = i16::from_be_bytes([batch[CRC_START], batch[CRC_START + 1]]);
    batch[CRC_START..CRC_START + 2].copy_from_slice(&(attributes | 0x10).to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
}

/// Notes a failure in the model (the first one wins).
fn fail(model: &RefCell<Model>, e: String) {
    model.borrow_mut().failure.get_or_insert(e);
}

/// What one transactional producer does in one incarnation.
pub struct TxnProducerPlan {
    /// The incarnation (names its transactions).
    pub incarnation: u32,
    /// Which producer (its `transactional.id`).
    pub index: u32,
    /// Produce requests it makes at most.
    pub ops: u32,
    /// Crash the broker during its commit number `n` (counting from 0), a seeded number of
    /// scheduler steps after sending EndTxn.
    pub crash_at_commit: Option<u32>,
}

/// One transactional producer's life in an incarnation.
pub async fn run_producer(backend: SimBackend, model: Rc<RefCell<Model>>, plan: TxnProducerPlan) {
    let id = transactional_id(plan.index);
    let timeout_ms = if random_below(3) == 0 {
        SHORT_TIMEOUT_MS
    } else {
        LONG_TIMEOUT_MS
    };
    let Some(mut conn) = connect(&backend).await else {
        return;
    };
    let partitions = txn_partitions();
    let mut budget = plan.ops;
    let (mut serial, mut commits) = (0u32, 0u32);
    let mut stalled = false;
    // Each round initialises (bumping the epoch, aborting anything open) and runs
    // transactions until one fails or is fenced.
    for _ in 0..4 {
        let producer = match init_producer(&backend, &mut conn, &id, timeout_ms).await {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(()) => match connect(&backend).await {
                Some(c) => {
                    conn = c;
                    continue;
                }
                None => return,
            },
        };
        if let Err(e) = model.borrow_mut().txns.reinitialised(&id) {
            return fail(&model, e);
        }
        let mut sequences: BTreeMap<TopicPartition, i32> = BTreeMap::new();
        let mut broken = false;
        while !broken {
            if budget == 0 {
                return;
            }
            serial += 1;
            let txn = format!("{id}-i{}-n{serial}", plan.incarnation);
            model.borrow_mut().txns.begin(&id, &txn);
            let mut chosen: Vec<TopicPartition> = partitions
                .iter()
                .filter(|_| random_below(2) == 0)
                .cloned()
                .collect();
            if chosen.is_empty() {
                chosen.push(partitions[random_below(partitions.len() as u64) as usize].clone());
            }
            if plan.crash_at_commit.is_some() && chosen.len() < 2 {
                // A commit that may be crashed into spans partitions, so a crash between
                // its markers leaves some written and some not.
                let other = partitions.iter().find(|tp| !chosen.contains(tp));
                chosen.extend(other.cloned());
                chosen.sort();
            }
            match add_partitions(&backend, &mut conn, &id, producer, &chosen).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(()) => {
                    broken = true;
                    continue;
                }
            }
            'produce: for tp in &chosen {
                for _ in 0..random_below(2) + 1 {
                    budget = budget.saturating_sub(1);
                    if !produce_one(
                        &backend,
                        &model,
                        &mut conn,
                        &id,
                        producer,
                        &txn,
                        tp,
                        &mut sequences,
                    )
                    .await
                    {
                        broken = true;
                        break 'produce;
                    }
                }
            }
            if broken {
                break;
            }
            if timeout_ms == SHORT_TIMEOUT_MS && !stalled {
                // The first transaction of its life outlives the timeout (and the 200 ms
                // scan), so every seed with a short-timeout producer has the coordinator abort
                // one (not left to chance: how the draws fall depends on every answer before,
                // and I134 changed those).
                backend
                    .sleep(Duration::from_millis(1_300 + random_below(700)))
                    .await;
            } else if timeout_ms == SHORT_TIMEOUT_MS && random_below(3) == 0 {
                // May outlive the transaction's timeout: the coordinator then aborts it.
                backend
                    .sleep(Duration::from_millis(random_below(2_000)))
                    .await;
            }
            stalled = true;
            let commit = random_below(4) != 0;
            model.borrow_mut().txns.end_sent(&txn, commit);
            if commit && plan.crash_at_commit == Some(commits) {
                crash_during_commit(&backend, &mut conn, &id, producer).await;
                return;
            }
            commits += u32::from(commit);
            let answer = conn.request(&end_txn_request(&id, producer, commit)).await;
            match answer {
                Ok(r) if r.error_code == 0 => {
                    if let Err(e) = model.borrow_mut().txns.end_acked(&txn, commit) {
                        return fail(&model, e);
                    }
                }
                Ok(r) => {
                    let fenced = r.error_code == ErrorCode::PRODUCER_FENCED.code()
                        || r.error_code == ErrorCode::INVALID_PRODUCER_EPOCH.code();
                    if fenced && commit {
                        if let Err(e) = model.borrow_mut().txns.fenced(&txn) {
                            return fail(&model, e);
                        }
                    }
                    break; // initialise again
                }
                Err(_) => {
                    match connect(&backend).await {
                        Some(c) => conn = c,
                        None => return,
                    }
                    break;
                }
            }
        }
        if broken {
            match connect(&backend).await {
                Some(c) => conn = c,
                None => return,
            }
        }
    }
}

/// Produces one transactional batch of 1–3 records to `tp` in `txn`; `false` when it was not
/// acknowledged (the transaction must then be abandoned).
#[allow(clippy::too_many_arguments)]
async fn produce_one(
    backend: &SimBackend,
    model: &RefCell<Model>,
    conn: &mut SimConnection,
    id: &str,
    producer: (i64, i16),
    txn: &str,
    tp: &TopicPartition,
    sequences: &mut BTreeMap<TopicPartition, i32>,
) -> bool {
    let count = random_below(3) as usize + 1;
    let sequence = *sequences.get(tp).unwrap_or(&0);
    let values: Vec<String> = (0..count)
        .map(|i| format!("{txn}-p{}-{}", tp.1, sequence as usize + i))
        .collect();
    let mut builder = BatchBuilder::new();
    builder.producer_id = producer.0;
    builder.producer_epoch = producer.1;
    builder.base_sequence = sequence;
    {
        let mut m = model.borrow_mut();
        for v in &values {
            builder.push(&NewRecord {
                key: None,
                value: Some(v.as_bytes()),
                headers: vec![],
                timestamp_ms: backend.wall_clock_ms(),
            });
            m.attempted.insert(v.clone());
            m.txns.sent(txn, v);
        }
    }
    let mut batch = builder.build(Offset(0));
    mark_transactional(&mut batch);
    match send_produce_with(conn, tp, -1, batch, Some(id)).await {
        Ok(Some(base)) => {
            let mut m = model.borrow_mut();
            for (i, v) in values.iter().enumerate() {
                if let Err(e) = m.ack(tp, base + i as i64, v) {
                    m.failure.get_or_insert(e);
                }
            }
            sequences.insert(tp.clone(), sequence + count as i32);
            true
        }
        _ => false,
    }
}

/// Sends EndTxn(commit) and, without waiting for the answer, crashes the broker at a chosen
/// point of the commit: half the time right after the 1st to 4th durable write from then on
/// (the PrepareCommit record, each marker, the Complete record, in the order the broker makes
/// them durable, with other clients' writes interleaved), else a seeded number of scheduler
/// steps later. So crashes land before the PrepareCommit record is durable, between it and
/// the markers, between markers, and after.
async fn crash_during_commit(
    backend: &SimBackend,
    conn: &mut SimConnection,
    id: &str,
    producer: (i64, i16),
) {
    let Ok(_ticket) = conn.send(&end_txn_request(id, producer, true)).await else {
        return;
    };
    if random_below(2) == 0 {
        minikafka_backend_sim::crash_after_syncs(random_below(4) as u32 + 1);
        // The crash comes with the write; if the commit never makes one, the incarnation's
        // own end comes instead.
        std::future::pending::<()>().await;
    }
    if random_below(2) == 0 {
        backend.sleep(Duration::from_millis(random_below(10))).await;
    }
    for _ in 0..random_below(400) {
        minikafka_backend_sim::yield_now().await;
    }
    minikafka_backend_sim::crash_now();
}

/// A read_committed reader: fetches from random offsets of [`TXN_TOPIC`] while the producers
/// run; what it gets must belong to transactions whose commit was sent, and commits them in
/// the model (a later abort of one is then a failure).
pub async fn run_reader(backend: SimBackend, model: Rc<RefCell<Model>>) {
    let partitions = txn_partitions();
    for _ in 0..40 {
        backend
            .sleep(Duration::from_millis(random_below(300) + 20))
            .await;
        let tp = partitions[random_below(partitions.len() as u64) as usize].clone();
        let Some(conn) = connect(&backend).await else {
            return;
        };
        let start = {
            let m = model.borrow();
            let known = m
                .acked
                .get(&tp)
                .and_then(|log| log.keys().next_back())
                .map_or(0, |o| o + 1);
            random_below(known as u64 + 1) as i64
        };
        let config = ConsumerConfig {
            max_wait: Duration::from_millis(random_below(200)),
            auto_offset_reset: OffsetReset::Earliest,
            isolation_level: IsolationLevel::ReadCommitted,
            ..ConsumerConfig::default()
        };
        let mut consumer = Consumer::new(conn, config);
        let ctp = ClientTp::new(tp.0.clone(), tp.1);
        consumer.assign([ctp.clone()]);
        if consumer.seek(&ctp, SeekTo::Offset(Offset(start))).is_err() {
            continue;
        }
        let Ok(records) = consumer.poll().await else {
            continue; // a fault or a reset: nothing to check
        };
        let records = record_pairs(&records);
        let result = model.borrow_mut().txns.check_visible(&tp, &records);
        if let Err(e) = result {
            return fail(&model, format!("read_committed fetch from {start}: {e}"));
        }
    }
}

/// The last stable offset of `tp` (ListOffsets latest under read_committed, I69).
async fn last_stable_offset(backend: &SimBackend, tp: &TopicPartition) -> Option<i64> {
    let mut conn = connect(backend).await?;
    let answer = list_offsets_at(&mut conn, &tp.0, &[(tp.1, OffsetSpec::Latest)], 1)
        .await
        .ok()?;
    answer.first().and_then(|p| p.offset).map(|o| o.0)
}

/// Verifies every partition of [`TXN_TOPIC`] after a restart: the durability checks of every
/// topic on a read_uncommitted read, and the transaction checks on a read_committed one (with
/// `open_allowed` false, nothing may be left open). Unreadable partitions (a fault) are
/// skipped unless `must_read`.
pub async fn verify(
    backend: &SimBackend,
    model: &RefCell<Model>,
    must_read: bool,
    open_allowed: bool,
) -> Result<(), String> {
    for tp in txn_partitions() {
        let mut done = false;
        for _ in 0..3 {
            let Some(stable) = last_stable_offset(backend, &tp).await else {
                continue;
            };
            let Some((uncommitted, hw)) =
                read_all(backend, &tp, IsolationLevel::ReadUncommitted, None).await
            else {
                continue;
            };
            let Some((committed, _)) =
                read_all(backend, &tp, IsolationLevel::ReadCommitted, Some(stable)).await
            else {
                continue;
            };
            let mut m = model.borrow_mut();
            m.check_partition(&tp, &uncommitted, Some(hw))?;
            m.txns
                .check_stable_range(&tp, &uncommitted, &committed, stable, hw, open_allowed)?;
            done = true;
            break;
        }
        if !done && must_read && !model.borrow().damaged.contains(&tp) {
            return Err(format!("{tp:?}: could not be read back after recovery"));
        }
    }
    Ok(())
}

/// Initialises every transactional id `0..producers` again (as their producers would after a
/// restart), which aborts whatever each left open; `Err` if one cannot be.
pub async fn reinitialise_all(
    backend: &SimBackend,
    model: &RefCell<Model>,
    producers: u32,
) -> Result<(), String> {
    for index in 0..producers {
        let id = transactional_id(index);
        let mut done = false;
        for _ in 0..3 {
            let Some(mut conn) = connect(backend).await else {
                continue;
            };
            if let Ok(Some(_)) = init_producer(backend, &mut conn, &id, LONG_TIMEOUT_MS).await {
                done = true;
                break;
            }
        }
        if !done {
            return Err(format!(
                "transactional id {id}: InitProducerId never succeeded"
            ));
        }
        model.borrow_mut().txns.reinitialised(&id)?;
    }
    Ok(())
}
