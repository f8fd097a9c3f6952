//! `__transaction_state` records as bytes: the records of one or more coordinator
//! [`Append`]s as one record batch, and replaying a partition at startup.
//!
//! Contract (the transaction twin of `groups::offsets_log`):
//! - [`encode_appends`] writes the appends' records, in order, as one uncompressed v2 batch
//!   (a `None` value is a tombstone, an expired id), stamped `now_ms`: one write, one sync.
//! - [`replay_log`] reads the partition from its log start to its high watermark in reads of
//!   at most [`REPLAY_READ_BYTES`] and feeds every record, in offset order, to
//!   `Coordinator::replay` (I34 in core: the state is the replay of the records). Control
//!   batches, records without a key, compressed batches (never written here) and records the
//!   coordinator refuses are counted and skipped with a warning, so one bad record cannot
//!   keep a broker from starting.

use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, BatchIter, Compression, NewRecord, ValidateOptions};
use minikafka_core::txn::{Append, Coordinator};
use minikafka_core::types::Offset;

use crate::log::{LogError, PartitionLog};

/// Most bytes one replay read asks for.
pub const REPLAY_READ_BYTES: usize = 1 << 20;

/// Bytes one record adds to a batch beyond its key and value, at most.
pub const RECORD_OVERHEAD_BYTES: usize = 32;

/// Upper bound on the encoded size of `append`'s record inside a batch.
pub fn append_bytes(append: &Append) -> usize {
    let r = &append.record;
    RECORD_OVERHEAD_BYTES + r.key.len() + r.value.as_ref().map_or(0, Vec::len)
}

/// The records of `appends`, in order, as one record batch (the log assigns the offsets).
pub fn encode_appends(appends: &[Append], now_ms: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    for append in appends {
        builder.push(&NewRecord {
            key: Some(&append.record.key),
            value: append.record.value.as_deref(),
            headers: Vec::new(),
            timestamp_ms: now_ms,
        });
    }
    builder.build(Offset(0))
}

/// What a replay read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records applied.
    pub records: u64,
    /// Records skipped.
    pub skipped: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// Replays `log` into `coordinator` (see the module documentation).
pub async fn replay_log<B: Backend>(
    log: &PartitionLog<B>,
    coordinator: &mut Coordinator,
    partition: i32,
) -> Result<ReplayStats, LogError> {
    let mut stats = ReplayStats::default();
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    while offset < end {
        let read = log.read(offset, REPLAY_READ_BYTES).await?;
        if read.bytes.is_empty() {
            break;
        }
        stats.bytes += read.bytes.len() as u64;
        let before = offset;
        for batch in BatchIter::new(&read.bytes)
            .with_options(ValidateOptions::stored())
            .lenient_tail()
        {
            let batch = match batch {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(
                        partition,
                        "transaction log batch unreadable, replay stops: {e}"
                    );
                    return Ok(stats);
                }
            };
            let next = batch.header.next_offset();
            if batch.header.is_control() || next <= offset {
                offset = offset.max(next);
                continue;
            }
            if !matches!(batch.header.compression(), Ok(Compression::None)) {
                stats.skipped += u64::from(batch.header.records_count.max(0) as u32);
                offset = next;
                continue;
            }
            for record in batch.records() {
                let Ok(record) = record else {
                    stats.skipped += 1;
                    break;
                };
                let record_offset = batch.header.base_offset.0 + record.offset_delta;
                if record_offset < offset.0 {
                    continue;
                }
                let Some(key) = record.key else {
                    stats.skipped += 1;
                    continue;
                };
                match coordinator.replay(key, record.value) {
                    Ok(()) => stats.records += 1,
                    Err(e) => {
                        stats.skipped += 1;
                        tracing::warn!(
                            partition,
                            offset = record_offset,
                            "transaction record skipped: {e}"
                        );
                    }
                }
            }
            offset = next;
        }
        if offset == before {
            tracing::warn!(
                partition,
                offset = offset.0,
                "transaction replay made no progress"
            );
            break;
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::txn::{AppendId, TxnRecord};

    #[test]
    fn appends_encode_as_one_batch_in_order_with_tombstones() {
        let appends = vec![
            Append {
                id: AppendId(1),
                record: TxnRecord {
                    key: b"k1".to_vec(),
                    value: Some(b"v1".to_vec()),
                },
            },
            Append {
                id: AppendId(2),
                record: TxnRecord {
                    key: b"k2".to_vec(),
                    value: None,
                },
            },
        ];
        let batch = encode_appends(&appends, 1_000);
        let mut batches = BatchIter::new(&batch);
        let view = batches.next().expect("one batch").expect("valid");
        assert!(batches.next().is_none());
        let records: Vec<_> = view
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
            ]
        );
        assert!(batch.len() <= 61 + appends.iter().map(append_bytes).sum::<usize>());
    }
}
