//! The client requests the workloads share: a partition read whole at an isolation level, and
//! one produce request (idempotent or transactional). Its own module so that the plain workload
//! (`workload`) and the transactional one (`txns`), which call each other's entry points, both
//! import it rather than each other (I60).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use minikafka_backend_sim::SimBackend;
use minikafka_client::{
    Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, OffsetReset, SeekTo,
    TopicPartition as ClientTp,
};

use crate::broker_access::{connect, SimConnection};
use crate::model::TopicPartition;

/// The (offset, value) pairs of records, as the model reads them.
pub(crate) fn record_pairs(records: &[ConsumerRecord]) -> Vec<(i64, String)> {
    records
        .iter()
        .map(|r| {
            let value = r.value.as_ref().map_or_else(String::new, |v: &Bytes| {
                String::from_utf8_lossy(v).into_owned()
            });
            (r.offset.0, value)
        })
        .collect()
}

/// Reads a partition whole from its start at `isolation`, up to its high watermark (or, with
/// `stop_at`, until the position reaches that offset): its records and its high watermark;
/// `None` when the broker could not be read (a fault).
pub(crate) async fn read_all(
    backend: &SimBackend,
    tp: &TopicPartition,
    isolation: IsolationLevel,
    stop_at: Option<i64>,
) -> Option<(Vec<(i64, String)>, i64)> {
    let conn = connect(backend).await?;
    let config = ConsumerConfig {
        max_wait: Duration::from_millis(0),
        auto_offset_reset: OffsetReset::Earliest,
        isolation_level: isolation,
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(conn, config);
    let ctp = ClientTp::new(tp.0.clone(), tp.1);
    consumer.assign([ctp.clone()]);
    consumer.seek(&ctp, SeekTo::Earliest).ok()?;
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let records = consumer.poll().await.ok()?;
        out.extend(record_pairs(&records));
        let position = consumer.position(&ctp).await.ok()?;
        match (consumer.high_watermark(&ctp), stop_at) {
            (Some(hw), None) if position >= hw => return Some((out, hw.0)),
            (Some(hw), Some(stop)) if position.0 >= stop => return Some((out, hw.0)),
            _ => {}
        }
    }
    None
}

fn produce_request(
    tp: &TopicPartition,
    acks: i16,
    batch: Vec<u8>,
    transactional_id: Option<&str>,
) -> ProduceRequest {
    let data = PartitionProduceData::default()
        .with_index(tp.1)
        .with_records(Some(Bytes::from(batch)));
    ProduceRequest::default()
        .with_transactional_id(
            transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_string()))),
        )
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(tp.0.clone())))
            .with_partition_data(vec![data])])
}

/// Sends one produce, with a transactional id in the request when given (a transactional
/// producer's): the acknowledged base offset, `Ok(None)` when refused or unanswered, `Err` when
/// the connection failed (the outcome is unknown).
pub(crate) async fn send_produce_with(
    conn: &mut SimConnection,
    tp: &TopicPartition,
    acks: i16,
    batch: Vec<u8>,
    transactional_id: Option<&str>,
) -> Result<Option<i64>, ()> {
    let request = produce_request(tp, acks, batch, transactional_id);
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
