//! The simulated clients of one broker incarnation: verify, set up topics, produce and fetch
//! at random, then crash or shut down the broker. Every random choice comes from the world's
//! generator, so the seed decides it.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use minikafka_backend_sim::{random_below, SimBackend, SimStream};
use minikafka_client::{
    Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, OffsetReset, SeekTo,
    TopicPartition as ClientTp,
};
use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

use crate::model::{Model, TopicPartition};

/// The topics every run keeps, with their partition counts.
pub const TOPICS: [(&str, i32); 2] = [("events", 2), ("orders", 3)];

/// One incarnation's plan.
pub struct Plan {
    pub incarnation: u32,
    pub clients: usize,
    pub verify_only: bool,
    pub shutdown: Arc<AtomicBool>,
    pub model: Rc<RefCell<Model>>,
}

fn broker_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9092))
}

async fn connect(backend: &SimBackend) -> Option<Connection<SimStream>> {
    for _ in 0..50 {
        if let Ok(stream) = backend.connect(broker_addr()).await {
            let config = ConnectionConfig {
                client_id: "mk-sim".into(),
                ..ConnectionConfig::default()
            };
            if let Ok(conn) = Connection::connect(stream, config).await {
                return Some(conn);
            }
        }
        backend.sleep(Duration::from_millis(20)).await;
    }
    None
}

fn all_partitions() -> Vec<TopicPartition> {
    TOPICS
        .iter()
        .flat_map(|(t, n)| (0..*n).map(move |p| (t.to_string(), p)))
        .collect()
}

/// Reads a partition whole from its start; `None` when the broker could not be read (a fault).
async fn read_all(backend: &SimBackend, tp: &TopicPartition) -> Option<Vec<(i64, String)>> {
    let conn = connect(backend).await?;
    let config = ConsumerConfig {
        max_wait: Duration::from_millis(0),
        auto_offset_reset: OffsetReset::Earliest,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(conn, config);
    let ctp = ClientTp::new(tp.0.clone(), tp.1);
    consumer.assign([ctp.clone()]);
    consumer.seek(&ctp, SeekTo::Earliest).ok()?;
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let records = consumer.poll().await.ok()?;
        for r in &records {
            let value = r.value.as_ref().map_or_else(String::new, |v: &Bytes| {
                String::from_utf8_lossy(v).into_owned()
            });
            out.push((r.offset.0, value));
        }
        let position = consumer.position(&ctp).await.ok()?;
        match consumer.high_watermark(&ctp) {
            Some(hw) if position >= hw => return Some(out),
            _ => {}
        }
    }
    None
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
            read = read_all(backend, &tp).await;
            if read.is_some() {
                break;
            }
        }
        match read {
            Some(records) => model.borrow_mut().check_partition(&tp, &records, true)?,
            None if must_read && !model.borrow().damaged.contains(&tp) => {
                return Err(format!("{tp:?}: could not be read back after recovery"))
            }
            None => {}
        }
    }
    Ok(())
}

async fn ensure_topics(backend: &SimBackend) -> bool {
    let Some(conn) = connect(backend).await else {
        return false;
    };
    let mut admin = Admin::new(conn);
    let Ok(existing) = admin.list_topics().await else {
        return false;
    };
    for (topic, partitions) in TOPICS {
        if existing.iter().any(|t| t.name == topic) {
            continue;
        }
        if admin.create_topic(topic, partitions, &[]).await.is_err() {
            return false;
        }
    }
    true
}

/// The body of the clients' driver task.
pub async fn drive(backend: SimBackend, plan: Plan) {
    let model = Rc::clone(&plan.model);
    let result = verify(&backend, &model, plan.verify_only).await;
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
        if ensure_topics(&backend).await {
            ready = true;
            break;
        }
    }
    if ready {
        for client in 0..plan.clients {
            let (b, m) = (backend.clone(), Rc::clone(&model));
            let incarnation = plan.incarnation;
            backend.spawn_local(async move { run_client(b, m, incarnation, client).await });
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

async fn init_producer_id(conn: &mut Connection<SimStream>) -> Option<Idempotence> {
    let request = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    let response = conn.request(&request).await.ok()?;
    (response.error_code == 0).then(|| Idempotence {
        producer_id: response.producer_id.0,
        epoch: response.producer_epoch,
        next_sequence: Default::default(),
    })
}

fn produce_request(tp: &TopicPartition, acks: i16, batch: Vec<u8>) -> ProduceRequest {
    let data = PartitionProduceData::default()
        .with_index(tp.1)
        .with_records(Some(Bytes::from(batch)));
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(tp.0.clone())))
            .with_partition_data(vec![data])])
}

/// Sends one produce; the acknowledged base offset, `Ok(None)` when refused or unanswered,
/// `Err` when the connection failed (the outcome is unknown).
async fn send_produce(
    conn: &mut Connection<SimStream>,
    tp: &TopicPartition,
    acks: i16,
    batch: Vec<u8>,
) -> Result<Option<i64>, ()> {
    let request = produce_request(tp, acks, batch);
    if acks == 0 {
        return conn
            .send_without_response(&request)
            .await
            .map(|_| None)
            .map_err(|_| ());
    }
    let response = conn.request(&request).await.map_err(|_| ())?;
    let partition = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first());
    Ok(partition
        .filter(|p| p.error_code == 0)
        .map(|p| p.base_offset))
}

async fn run_client(
    backend: SimBackend,
    model: Rc<RefCell<Model>>,
    incarnation: u32,
    client: usize,
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
    for _ in 0..200 {
        let tp = partitions[random_below(partitions.len() as u64) as usize].clone();
        if random_below(4) == 0 {
            if !fetch_and_check(&backend, &model, &tp).await {
                return;
            }
            continue;
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
    let records: Vec<(i64, String)> = records
        .iter()
        .map(|r| {
            let value = r
                .value
                .as_ref()
                .map_or_else(String::new, |v| String::from_utf8_lossy(v).into_owned());
            (r.offset.0, value)
        })
        .collect();
    let mut m = model.borrow_mut();
    if let Err(e) = m.check_partition(tp, &records, false) {
        m.failure.get_or_insert(format!("fetch from {start}: {e}"));
        return false;
    }
    true
}
