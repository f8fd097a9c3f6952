//! Restart after kill -9: a topic of many partitions, one record in each, the broker killed
//! with SIGKILL and started again on the same data directory; timed until a Metadata request
//! answers with every partition led, then every record checked still there.
//!
//! Contract:
//! - [`fill_every_partition`] writes one record to each partition in one Produce request and
//!   fails on any partition error.
//! - [`answers_with_every_partition`] is the readiness probe: true once Metadata lists the
//!   topic with all its partitions, each with a leader and no error; false on any failure
//!   (a refused connection is the usual one while the broker starts).
//! - [`check_every_partition_holds`] fails unless every partition's latest offset is the
//!   count written to it (nothing acknowledged is lost by a kill, I8).

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use minikafka_client::admin::{self, Admin, OffsetSpec};

use super::*;

/// Writes one record (of `value_bytes`) to each of the `partitions` partitions of `topic`.
pub fn fill_every_partition(
    addr: SocketAddr,
    topic: &str,
    partitions: i32,
    value_bytes: usize,
) -> Result<(), BenchError> {
    let batch = Bytes::from(kw::encode_batch(1, value_bytes, 0, kw::now_ms()));
    let mut request = kw::produce_request(topic, 0, -1, batch.clone());
    request.topic_data[0].partition_data = (0..partitions)
        .map(|p| {
            PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch.clone()))
        })
        .collect();
    smol::block_on(async {
        let mut conn = kw::connect(addr, 1).await?;
        kw::check_produce(&conn.request(&request).await?)
    })
}

/// True when Metadata lists `topic` with `partitions` partitions, each led and error-free.
pub fn answers_with_every_partition(addr: SocketAddr, topic: &str, partitions: i32) -> bool {
    smol::block_on(async {
        let Ok(mut conn) = kw::connect(addr, 1).await else {
            return false;
        };
        match admin::topic_metadata(&mut conn, topic, false).await {
            Ok(meta) => {
                meta.partition_count() == partitions
                    && meta
                        .partitions
                        .iter()
                        .all(|p| p.error_code == 0 && p.leader >= 0)
            }
            Err(_) => false,
        }
    })
}

/// Fails unless every partition of `topic` ends at offset `records` (latest offset).
pub fn check_every_partition_holds(
    addr: SocketAddr,
    topic: &str,
    records: i64,
) -> Result<(), BenchError> {
    smol::block_on(async {
        let mut admin = Admin::new(kw::connect(addr, 1).await?);
        let offsets = admin.list_offsets(topic, OffsetSpec::Latest).await?;
        match offsets
            .iter()
            .find(|o| o.offset.map(|x| x.0) != Some(records))
        {
            None => Ok(()),
            Some(o) => Err(BenchError::Check(format!(
                "after the restart partition {} of {topic} ends at {:?}, not {records}",
                o.partition, o.offset
            ))),
        }
    })
}
