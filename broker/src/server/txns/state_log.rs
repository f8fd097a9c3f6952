//! `__transaction_state` records as bytes: the records of one or more coordinator
//! [`Append`]s as one record batch, and replaying a partition at startup.
//!
//! Contract (the transaction twin of `groups::offsets_log`):
//! - [`encode_appends`] writes the appends' records, in order, as one uncompressed v2 batch
//!   (a `None` value is a tombstone, an expired id), stamped `now_ms`: one write, one sync.
//! - [`replay_log`] feeds every keyed record of the partition, in offset order, to
//!   `Coordinator::replay` (I34 in core: the state is the replay of the records), through
//!   [`replay_partition`]: control batches are passed over; records without a key,
//!   compressed batches (never written here) and records the coordinator refuses are counted
//!   and skipped with a warning (`transaction record skipped`), so one bad record cannot
//!   keep a broker from starting.

use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::txn::{Append, Coordinator};
use minikafka_core::types::Offset;

use crate::log::replay::{replay_partition, ReplayRecord, ReplayStats};
use crate::log::{LogError, PartitionLog};

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

/// Replays `log` into `coordinator` (see the module documentation).
pub async fn replay_log<B: Backend>(
    log: &PartitionLog<B>,
    coordinator: &mut Coordinator,
    partition: i32,
) -> Result<ReplayStats, LogError> {
    replay_partition(log, "transaction", partition, &mut |r: ReplayRecord<'_>| {
        coordinator
            .replay(r.key, r.value)
            .map_err(|e| e.to_string())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::BatchIter;
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
