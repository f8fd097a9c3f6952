//! Moving coordinator records to and from an offsets partition's log: encoding the records
//! of one or more [`Append`]s as one record batch, and replaying a partition at startup.
//!
//! Contract:
//! - [`encode_appends`] writes the records of the appends, in order, as one uncompressed v2
//!   batch (key and value as the coordinator made them; a `None` value is a tombstone), all
//!   stamped with `now_ms`. One batch means one write and one sync for all of them.
//! - [`replay_log`] feeds every keyed record of the partition, in offset order, to
//!   `Coordinator::replay`, through [`replay_partition`] (bounded reads that always
//!   advance): records without a key, compressed batches (never written by the coordinator)
//!   and records the coordinator cannot decode are counted and skipped with a warning
//!   (`offsets record skipped`), so one bad record cannot keep a broker from starting.
//! - A transactional append or a marker ([`AppendKind`], I74) is a batch of its own, as
//!   Kafka writes them: TxnOffsetCommit's records in a transactional batch carrying the
//!   producer id and epoch; the transaction's end as a control batch with one COMMIT or
//!   ABORT record (key: version 0, type; value: version 0, coordinator epoch).
//!   [`encode_appends`] must be given such an append alone ([`batches_alone`]). Replay hands
//!   a transactional batch's records to `Coordinator::replay_transactional` and a control
//!   batch to `Coordinator::replay_marker`.

use minikafka_core::backend::Backend;
use minikafka_core::group::{Append, AppendKind, Coordinator, TxnResult};
use minikafka_core::record::{compute_crc, BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

use crate::log::replay::{replay_partition, ReplayRecord, ReplayStats, ReplayVisitor};
use crate::log::{LogError, PartitionLog};

/// Bytes one record adds to a batch beyond its key and value (length, attributes, deltas,
/// key and value lengths, header count), at most.
pub const RECORD_OVERHEAD_BYTES: usize = 32;

/// Upper bound on the encoded size of `append`'s records inside a batch.
pub fn append_bytes(append: &Append) -> usize {
    append
        .records
        .iter()
        .map(|r| RECORD_OVERHEAD_BYTES + r.key.len() + r.value.as_ref().map_or(0, Vec::len))
        .sum()
}

/// Batch attribute bit of a transactional batch (Kafka's `isTransactional`).
const TRANSACTIONAL_BIT: i16 = 0x10;
/// Batch attribute bit of a control batch (Kafka's `isControlBatch`).
const CONTROL_BIT: i16 = 0x20;
/// Where a v2 batch keeps its attributes and its CRC (which covers from the attributes on).
const ATTRIBUTES_AT: usize = 21;
const CRC_AT: usize = 17;
/// Control record type of an ABORT and a COMMIT marker (Kafka's `ControlRecordType`).
const CONTROL_ABORT: i16 = 0;
const CONTROL_COMMIT: i16 = 1;

/// Whether `append` must be written as a batch of its own (a transactional batch or a
/// marker, I74).
pub fn batches_alone(append: &Append) -> bool {
    append.kind != AppendKind::Plain
}

/// Sets attribute `bits` on an encoded batch and recomputes its CRC.
fn set_attribute_bits(batch: &mut [u8], bits: i16) {
    let at = ATTRIBUTES_AT;
    let attributes = i16::from_be_bytes([batch[at], batch[at + 1]]) | bits;
    batch[at..at + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A COMMIT or ABORT control record's key and value (Kafka's `EndTransactionMarker`, v0,
/// carrying the transaction coordinator's epoch, I175).
pub fn marker_record(result: TxnResult, coordinator_epoch: i32) -> (Vec<u8>, Vec<u8>) {
    let kind = match result {
        TxnResult::Commit => CONTROL_COMMIT,
        TxnResult::Abort => CONTROL_ABORT,
    };
    let mut key = 0i16.to_be_bytes().to_vec();
    key.extend_from_slice(&kind.to_be_bytes());
    let mut value = 0i16.to_be_bytes().to_vec();
    // The coordinator epoch: the transaction coordinator's, one more per start (I65, I175).
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    (key, value)
}

/// The marker a control record's key names, if it is a COMMIT or ABORT key.
fn marker_result(key: &[u8]) -> Option<TxnResult> {
    match key {
        [0, 0, a, b] => match i16::from_be_bytes([*a, *b]) {
            CONTROL_COMMIT => Some(TxnResult::Commit),
            CONTROL_ABORT => Some(TxnResult::Abort),
            _ => None,
        },
        _ => None,
    }
}

/// The records of `appends`, in order, as one record batch (base offset 0: the log assigns
/// the real one). A transactional append or a marker must come alone ([`batches_alone`]);
/// it is encoded as Kafka writes it (see the module documentation).
pub fn encode_appends(appends: &[Append], now_ms: i64) -> Vec<u8> {
    debug_assert!(appends.len() == 1 || !appends.iter().any(batches_alone));
    if let [Append { kind, .. }] = appends {
        match *kind {
            AppendKind::Plain => {}
            AppendKind::Transactional {
                producer_id,
                producer_epoch,
            } => {
                let mut batch = encode_records(appends, now_ms, producer_id, producer_epoch);
                set_attribute_bits(&mut batch, TRANSACTIONAL_BIT);
                return batch;
            }
            AppendKind::Marker {
                producer_id,
                producer_epoch,
                coordinator_epoch,
                result,
            } => {
                return encode_marker(
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                    result,
                    now_ms,
                )
            }
        }
    }
    encode_records(appends, now_ms, -1, -1)
}

/// A COMMIT or ABORT marker of `producer_id` as one control batch (base offset 0).
pub fn encode_marker(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    result: TxnResult,
    now_ms: i64,
) -> Vec<u8> {
    let (key, value) = marker_record(result, coordinator_epoch);
    let mut builder = BatchBuilder::new();
    builder.producer_id = producer_id;
    builder.producer_epoch = producer_epoch;
    builder.push(&NewRecord {
        key: Some(&key),
        value: Some(&value),
        headers: Vec::new(),
        timestamp_ms: now_ms,
    });
    let mut batch = builder.build(Offset(0));
    set_attribute_bits(&mut batch, TRANSACTIONAL_BIT | CONTROL_BIT);
    batch
}

fn encode_records(appends: &[Append], now_ms: i64, producer_id: i64, epoch: i16) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    if producer_id >= 0 {
        builder.producer_id = producer_id;
        builder.producer_epoch = epoch;
        // Kafka's coordinators write sequence 0; no sequence rule applies to them.
        builder.base_sequence = 0;
    }
    for append in appends {
        for record in &append.records {
            builder.push(&NewRecord {
                key: Some(&record.key),
                value: record.value.as_deref(),
                headers: Vec::new(),
                timestamp_ms: now_ms,
            });
        }
    }
    builder.build(Offset(0))
}

/// Replays `log` into `coordinator` (see the module documentation).
pub async fn replay_log<B: Backend>(
    log: &PartitionLog<B>,
    coordinator: &mut Coordinator,
    partition: i32,
) -> Result<ReplayStats, LogError> {
    replay_partition(log, "offsets", partition, &mut OffsetsReplay(coordinator)).await
}

/// The coordinator as a replay visitor: plain records to `replay`, a transactional batch's
/// records to `replay_transactional`, a marker to `replay_marker` (I74).
struct OffsetsReplay<'c>(&'c mut Coordinator);

impl ReplayVisitor for OffsetsReplay<'_> {
    const VISITS_CONTROL: bool = true;

    fn record(&mut self, r: ReplayRecord<'_>) -> Result<(), String> {
        let replayed = if r.batch.is_transactional() {
            let (producer_id, epoch) = (r.batch.producer_id, r.batch.producer_epoch);
            self.0
                .replay_transactional(producer_id, epoch, r.key, r.value)
        } else {
            self.0.replay(r.key, r.value)
        };
        replayed.map_err(|e| e.to_string())
    }

    /// A transaction's end (I74): completes the producer's pending offsets.
    fn control(&mut self, r: ReplayRecord<'_>) -> Result<(), String> {
        let result = marker_result(r.key).ok_or("not a COMMIT or ABORT marker")?;
        self.0.replay_marker(r.batch.producer_id, result);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::group::records::GroupRecord;
    use minikafka_core::group::AppendId;
    use minikafka_core::record::BatchIter;

    #[test]
    fn appends_encode_as_one_batch_in_order_with_tombstones() {
        let appends = vec![
            Append {
                id: AppendId(1),
                kind: AppendKind::Plain,
                records: vec![GroupRecord {
                    key: b"k1".to_vec(),
                    value: Some(b"v1".to_vec()),
                }],
            },
            Append {
                id: AppendId(2),
                kind: AppendKind::Plain,
                records: vec![
                    GroupRecord {
                        key: b"k2".to_vec(),
                        value: None,
                    },
                    GroupRecord {
                        key: b"k3".to_vec(),
                        value: Some(Vec::new()),
                    },
                ],
            },
        ];
        let batch = encode_appends(&appends, 1_000);
        let mut batches = BatchIter::new(&batch);
        let view = batches.next().expect("one batch").expect("valid");
        assert!(batches.next().is_none());
        assert_eq!(view.header.records_count, 3);
        type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);
        let records: Vec<KeyValue> = view
            .records()
            .map(|r| {
                let r = r.expect("record");
                (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec))
            })
            .collect();
        assert_eq!(
            records,
            vec![
                (Some(b"k1".to_vec()), Some(b"v1".to_vec())),
                (Some(b"k2".to_vec()), None),
                (Some(b"k3".to_vec()), Some(Vec::new())),
            ]
        );
        assert!(batch.len() <= 61 + appends.iter().map(append_bytes).sum::<usize>());
    }
}
