//! The simulated clients of one broker incarnation: verify, set up topics, produce (acks 0, 1
//! and all, idempotent and plain), fetch and long-poll, create and delete a scratch topic, run
//! group members (`groups`), then crash or shut down the broker. Every random choice comes
//! from the world's generator, so the seed decides it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::InitProducerIdRequest;
use minikafka_backend_sim::{random_below, SimBackend};
use minikafka_client::{
    Admin, Consumer, ConsumerConfig, IsolationLevel, OffsetReset, SeekTo,
    TopicPartition as ClientTp,
};
use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

use crate::broker_access::{all_partitions, connect, SimConnection, TOPICS, TXN_TOPIC};
use crate::client_ops::{read_all, record_pairs, send_produce_with};
use crate::model::{Model, TopicPartition};

/// The topic one client creates and deletes.
pub const SCRATCH_TOPIC: &str = "scratch";

/// One incarnation's plan.
pub struct Plan {
    pub incarnation: u32,
    pub clients: usize,
    pub verify_only: bool,
    /// Requests per producing client.
    pub ops: u32,
    /// Group members to run (each joins one of the groups).
    pub members: u32,
    /// Transactional producers to run (`crate::txns`; none: no transactional workload).
    pub txn_producers: u32,
    /// Crash the broker during this commit of transactional producer 0.
    pub commit_crash: Option<u32>,
    pub shutdown: Arc<AtomicBool>,
    pub model: Rc<RefCell<Model>>,
}

/// Verifies every partition against the model; `Err` on a contradiction. Partitions that
/// cannot be read (a fault) are skipped unless `must_read`.
async fn verify(
    backend: &SimBackend,
    model: &RefCell<Model>,
    must_read: bool,
) -> Result<(), String> {
    for tp in all_partitions() {
        let mut read = None;
        for _ in 0..3 {
            read = read_all(backend, &tp, IsolationLevel::ReadUncommitted, None).await;
            if read.is_some() {
                break;
            }
        }
        match read {
            Some((records, end)) => model
                .borrow_mut()
                .check_partition(&tp, &records, Some(end))?,
            None if must_read && !model.borrow().damaged.contains(&tp) => {
                return Err(format!("{tp:?}: could not be read back after recovery"))
            }
            None => {}
        }
    }
    crate::groups::verify_commits(backend, model, must_read).await?;
    verify_scratch(backend, model, must_read).await
}

/// The scratch topic exists after a restart exactly when its last acknowledged create or
/// delete says so.
async fn verify_scratch(
    backend: &SimBackend,
    model: &RefCell<Model>,
    must_read: bool,
) -> Result<(), String> {
    let Some(expected) = model.borrow().scratch_exists else {
        return Ok(());
    };
    let mut listed = None;
    for _ in 0..3 {
        if let Some(conn) = connect(backend).await {
            if let Ok(topics) = Admin::new(conn).list_topics().await {
                listed = Some(topics.iter().any(|t| t.name == SCRATCH_TOPIC));
                break;
            }
        }
    }
    match listed {
        Some(exists) if exists != expected => Err(format!(
            "topic {SCRATCH_TOPIC}: exists={exists} after a restart, but its last acknowledged \
             {} said otherwise",
            if expected { "create" } else { "delete" }
        )),
        None if must_read => Err(format!("topic {SCRATCH_TOPIC}: metadata unreadable")),
        _ => Ok(()),
    }
}

async fn ensure_topics(backend: &SimBackend, with_txn_topic: bool) -> bool {
    let Some(conn) = connect(backend).await else {
        return false;
    };
    let mut admin = Admin::new(conn);
    let Ok(existing) = admin.list_topics().await else {
        return false;
    };
    let txn_topic = with_txn_topic.then_some(TXN_TOPIC);
    for (topic, partitions, configs) in TOPICS.into_iter().chain(txn_topic) {
        if existing.iter().any(|t| t.name == topic) {
            continue;
        }
        let configs: Vec<(String, String)> = configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if admin
            .create_topic(topic, partitions, &configs)
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// The body of the clients' driver task.
pub async fn drive(backend: SimBackend, plan: Plan) {
    let model = Rc::clone(&plan.model);
    let mut result = verify(&backend, &model, plan.verify_only).await;
    if result.is_ok() && plan.txn_producers > 0 {
        result = if plan.verify_only {
            // The end: every transactional id initialises again (aborting what is open), then
            // nothing may be left open.
            match crate::txns::reinitialise_all(&backend, &model, plan.txn_producers).await {
                Ok(()) => crate::txns::verify(&backend, &model, true, false).await,
                Err(e) => Err(e),
            }
        } else {
            crate::txns::verify(&backend, &model, false, true).await
        };
    }
    if let Err(e) = result {
        model.borrow_mut().failure.get_or_insert(e);
        plan.shutdown.store(true, Ordering::SeqCst);
        return;
    }
    if plan.verify_only {
        plan.shutdown.store(true, Ordering::SeqCst);
        return;
    }
    let mut ready = false;
    for _ in 0..5 {
        if ensure_topics(&backend, plan.txn_producers > 0).await {
            ready = true;
            break;
        }
    }
    if ready {
        for client in 0..plan.clients {
            let (b, m) = (backend.clone(), Rc::clone(&model));
            let (incarnation, ops) = (plan.incarnation, plan.ops);
            backend.spawn_local(async move { run_client(b, m, incarnation, client, ops).await });
        }
        for index in 0..plan.txn_producers {
            let (b, m) = (backend.clone(), Rc::clone(&model));
            let txn_plan = crate::txns::TxnProducerPlan {
                incarnation: plan.incarnation,
                index,
                ops: plan.ops / 2,
                crash_at_commit: plan.commit_crash.filter(|_| index == 0),
            };
            backend.spawn_local(async move { crate::txns::run_producer(b, m, txn_plan).await });
        }
        if plan.txn_producers > 0 {
            let (b, m) = (backend.clone(), Rc::clone(&model));
            backend.spawn_local(async move { crate::txns::run_reader(b, m).await });
        }
        for _ in 0..plan.members {
            let (b, m) = (backend.clone(), Rc::clone(&model));
            let incarnation = plan.incarnation;
            backend.spawn_local(async move {
                crate::groups::run_member(b, m, incarnation).await;
            });
        }
    }
    backend
        .sleep(Duration::from_millis(random_below(3_000) + 100))
        .await;
    if random_below(10) < 7 {
        minikafka_backend_sim::crash_now();
    } else {
        plan.shutdown.store(true, Ordering::SeqCst);
    }
}

/// An idempotent producer identity and its next sequence per partition.
struct Idempotence {
    producer_id: i64,
    epoch: i16,
    next_sequence: std::collections::BTreeMap<TopicPartition, i32>,
}

async fn init_producer_id(conn: &mut SimConnection) -> Option<Idempotence> {
    let request = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    let response = conn.request(&request).await.ok()?;
    (response.error_code == 0).then(|| Idempotence {
        producer_id: response.producer_id.0,
        epoch: response.producer_epoch,
        next_sequence: Default::default(),
    })
}

/// Sends one produce; the acknowledged base offset, `Ok(None)` when refused or unanswered,
/// `Err` when the connection failed (the outcome is unknown).
async fn send_produce(
    conn: &mut SimConnection,
    tp: &TopicPartition,
    acks: i16,
    batch: Vec<u8>,
) -> Result<Option<i64>, ()> {
    send_produce_with(conn, tp, acks, batch, None).await
}

async fn run_client(
    backend: SimBackend,
    model: Rc<RefCell<Model>>,
    incarnation: u32,
    client: usize,
    ops: u32,
) {
    let Some(mut conn) = connect(&backend).await else {
        return;
    };
    let mut idempotence = if random_below(2) == 0 {
        init_producer_id(&mut conn).await
    } else {
        None
    };
    let partitions = all_partitions();
    let mut serial = 0u64;
    for _ in 0..ops {
        let tp = partitions[random_below(partitions.len() as u64) as usize].clone();
        if client == 0 && random_below(15) == 0 {
            if !scratch_topic_step(&backend, &model).await {
                return;
            }
            continue;
        }
        match random_below(8) {
            0 | 1 => {
                if !fetch_and_check(&backend, &model, &tp).await {
                    return;
                }
                continue;
            }
            2 => {
                if !long_poll_at_end(&backend, &model, &tp).await {
                    return;
                }
                continue;
            }
            _ => {}
        }
        let count = random_below(4) as usize + 1;
        let values: Vec<String> = (0..count)
            .map(|i| {
                serial += 1;
                format!("i{incarnation}-c{client}-{serial}-{i}")
            })
            .collect();
        let mut builder = BatchBuilder::new();
        let acks = [0i16, 1, -1][random_below(3) as usize];
        let idempotent = acks != 0 && idempotence.is_some();
        if let (true, Some(id)) = (idempotent, idempotence.as_ref()) {
            builder.producer_id = id.producer_id;
            builder.producer_epoch = id.epoch;
            builder.base_sequence = *id.next_sequence.get(&tp).unwrap_or(&0);
        }
        for v in &values {
            builder.push(&NewRecord {
                key: None,
                value: Some(v.as_bytes()),
                headers: vec![],
                timestamp_ms: backend.wall_clock_ms(),
            });
            model.borrow_mut().attempted.insert(v.clone());
        }
        let batch = builder.build(Offset(0));
        let mut outcome = send_produce(&mut conn, &tp, acks, batch.clone()).await;
        // An idempotent batch whose outcome is unknown is retried as is (same sequence): the
        // broker must answer it with the original offset, never append it twice.
        let mut retries = 0;
        while outcome.is_err() && idempotent && retries < 3 {
            retries += 1;
            let Some(c) = connect(&backend).await else {
                return;
            };
            conn = c;
            outcome = send_produce(&mut conn, &tp, acks, batch.clone()).await;
        }
        match outcome {
            Ok(Some(base)) => {
                let mut m = model.borrow_mut();
                let now = backend.now().0;
                m.last_ack
                    .insert(tp.clone(), (now, base + count as i64 - 1));
                for (i, v) in values.iter().enumerate() {
                    if let Err(e) = m.ack(&tp, base + i as i64, v) {
                        m.failure.get_or_insert(e);
                    }
                }
                if let (true, Some(id)) = (idempotent, idempotence.as_mut()) {
                    *id.next_sequence.entry(tp.clone()).or_insert(0) += count as i32;
                }
            }
            Ok(None) if idempotent => idempotence = None, // refused: sequence state unknown
            Ok(None) => {}
            Err(()) => {
                idempotence = None;
                match connect(&backend).await {
                    Some(c) => conn = c,
                    None => return,
                }
            }
        }
    }
}

/// One long-poll fetch from a random known offset; its records must agree with the model.
async fn fetch_and_check(
    backend: &SimBackend,
    model: &RefCell<Model>,
    tp: &TopicPartition,
) -> bool {
    let Some(conn) = connect(backend).await else {
        return false;
    };
    let start = {
        let m = model.borrow();
        let known = m.acked.get(tp).map_or(0, |log| log.len() as u64);
        random_below(known + 1) as i64
    };
    let config = ConsumerConfig {
        max_wait: Duration::from_millis(random_below(200)),
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(conn, config);
    let ctp = ClientTp::new(tp.0.clone(), tp.1);
    consumer.assign([ctp.clone()]);
    if consumer.seek(&ctp, SeekTo::Offset(Offset(start))).is_err() {
        return true;
    }
    let Ok(records) = consumer.poll().await else {
        return true; // a fault or a reset: nothing to check
    };
    let records = record_pairs(&records);
    let mut m = model.borrow_mut();
    if let Err(e) = m.check_partition(tp, &records, None) {
        m.failure.get_or_insert(format!("fetch from {start}: {e}"));
        return false;
    }
    true
}

/// Creates the scratch topic if the model thinks it absent, else deletes it; what the broker
/// acknowledged becomes the model's (an unknown outcome forgets it). `false` when the broker
/// could not be reached.
async fn scratch_topic_step(backend: &SimBackend, model: &RefCell<Model>) -> bool {
    let Some(conn) = connect(backend).await else {
        return false;
    };
    let mut admin = Admin::new(conn);
    let create = model.borrow().scratch_exists != Some(true);
    // Unknown while the request is in flight: a crash drops this task before the answer is
    // recorded, and the broker may have made the change durable before it did (I26).
    model.borrow_mut().scratch_exists = None;
    let result = if create {
        admin.create_topic(SCRATCH_TOPIC, 1, &[]).await
    } else {
        admin.delete_topic(SCRATCH_TOPIC).await
    };
    model.borrow_mut().scratch_exists = result.is_ok().then_some(create);
    true
}

/// A long poll at the end of a partition (I7): if a record was acknowledged in that
/// partition at or after the fetch offset while the fetch waited, the fetch must not come
/// back empty at its deadline. Skipped when a fault fired meanwhile.
async fn long_poll_at_end(
    backend: &SimBackend,
    model: &RefCell<Model>,
    tp: &TopicPartition,
) -> bool {
    let Some(conn) = connect(backend).await else {
        return false;
    };
    let start = model
        .borrow()
        .acked
        .get(tp)
        .and_then(|log| log.keys().next_back())
        .map_or(0, |o| o + 1);
    let max_wait = Duration::from_millis(random_below(1_500) + 200);
    let config = ConsumerConfig {
        max_wait,
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(conn, config);
    let ctp = ClientTp::new(tp.0.clone(), tp.1);
    consumer.assign([ctp.clone()]);
    if consumer.seek(&ctp, SeekTo::Offset(Offset(start))).is_err() {
        return true;
    }
    let faults_before = minikafka_backend_sim::stats().faults();
    let asked_at = backend.now().0;
    let Ok(records) = consumer.poll().await else {
        return true;
    };
    let answered_at = backend.now().0;
    if !records.is_empty() || minikafka_backend_sim::stats().faults() != faults_before {
        return true;
    }
    let mut m = model.borrow_mut();
    if let Some(&(acked_at, offset)) = m.last_ack.get(tp) {
        // The margin covers the network delays between the ack and the fetch's deadline.
        if offset >= start && acked_at + Duration::from_millis(50) < answered_at {
            m.failure.get_or_insert(format!(
                "{tp:?}: a long poll from {start} (waited {:?}) came back empty though offset \
                 {offset} was acknowledged {:?} before its answer (a missed wakeup, I7)",
                answered_at - asked_at,
                answered_at - acked_at
            ));
            return false;
        }
    }
    true
}
