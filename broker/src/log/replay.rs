//! Reading a whole partition back, record by record, into a state machine: how the internal
//! topics (`__consumer_offsets`, `__transaction_state`, `_schemas`) rebuild their machine at
//! startup (the state is the replay of the records: I34, I50).
//!
//! Contract:
//! - [`replay_partition`] reads the partition from its log start to its high watermark in
//!   reads of at most [`REPLAY_READ_BYTES`] (a read returns at least one whole batch, so it
//!   always advances) and hands every keyed record of every data batch, in offset order, to
//!   [`ReplayVisitor::record`]; a control batch's records go to [`ReplayVisitor::control`]
//!   when the visitor [wants them](ReplayVisitor::VISITS_CONTROL), else the batch is passed
//!   over silently and uncounted.
//! - Skipped and counted in [`ReplayStats::skipped`], each with a warning line
//!   `{what} record skipped: …` (or `{what} batch skipped: …`), never stopping the start: a
//!   record the visitor refuses, a record without a key, every record of a compressed batch
//!   (the internal topics' writers never compress). A record that cannot be decoded is
//!   counted and ends its batch. A batch the log cannot read ends the replay with a warning
//!   (the log validated every batch on the way in and at recovery), as does a read that does
//!   not advance.
//! - Never: reads more than [`REPLAY_READ_BYTES`] plus one batch at a time, hands a record
//!   below the offset reached so far (a read may start inside a batch), or hands a record
//!   twice.

use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchHeader, BatchIter, BatchView, Compression, ValidateOptions};
use minikafka_core::types::Offset;

use super::error::LogError;
use super::partition::PartitionLog;

/// Most bytes one replay read asks for.
pub const REPLAY_READ_BYTES: usize = 1 << 20;

/// What a replay read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records applied.
    pub records: u64,
    /// Records skipped (refused, no key, compressed batch, or not decodable).
    pub skipped: u64,
    /// Bytes read.
    pub bytes: u64,
}

/// One keyed record handed to a [`ReplayVisitor`].
#[derive(Clone, Copy, Debug)]
pub struct ReplayRecord<'a> {
    /// The header of the batch the record is in (producer id and epoch, attributes).
    pub batch: &'a BatchHeader,
    /// The record's offset.
    pub offset: i64,
    /// The record's key.
    pub key: &'a [u8],
    /// The record's value; `None` is a tombstone.
    pub value: Option<&'a [u8]>,
}

/// What a replay does with the records it reads. A closure
/// `FnMut(ReplayRecord) -> Result<(), String>` is a visitor of data records alone.
pub trait ReplayVisitor {
    /// Whether control batches are handed to [`control`](Self::control), record by record;
    /// when `false` they are passed over silently and uncounted.
    const VISITS_CONTROL: bool = false;

    /// Applies one keyed record of a data batch; `Err(why)` counts it skipped with a warning.
    fn record(&mut self, record: ReplayRecord<'_>) -> Result<(), String>;

    /// Applies one keyed record of a control batch (only if
    /// [`VISITS_CONTROL`](Self::VISITS_CONTROL)); `Err(why)` counts it skipped with a warning.
    fn control(&mut self, record: ReplayRecord<'_>) -> Result<(), String> {
        let _ = record;
        Ok(())
    }
}

impl<F: FnMut(ReplayRecord<'_>) -> Result<(), String>> ReplayVisitor for F {
    fn record(&mut self, record: ReplayRecord<'_>) -> Result<(), String> {
        self(record)
    }
}

/// Replays `log` into `visitor` (see the module documentation). `what` names the log in
/// warning lines (`{what} record skipped: …`); `partition` is a field of each of them.
pub async fn replay_partition<B: Backend, V: ReplayVisitor>(
    log: &PartitionLog<B>,
    what: &str,
    partition: i32,
    visitor: &mut V,
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
                    tracing::warn!(partition, "{what} batch unreadable, replay stops: {e}");
                    return Ok(stats);
                }
            };
            let next = batch.header.next_offset();
            if next <= offset {
                continue;
            }
            let control = batch.header.is_control();
            if !control || V::VISITS_CONTROL {
                visit_batch(&batch, offset, what, partition, visitor, &mut stats);
            }
            offset = next;
        }
        if offset == before {
            // Nothing advanced (cannot happen with whole batches): stop rather than spin.
            tracing::warn!(
                partition,
                offset = offset.0,
                "{what} replay made no progress"
            );
            break;
        }
    }
    Ok(stats)
}

/// Hands the records of `batch` at or past `from` to `visitor`, counting into `stats`.
fn visit_batch<V: ReplayVisitor>(
    batch: &BatchView<'_>,
    from: Offset,
    what: &str,
    partition: i32,
    visitor: &mut V,
    stats: &mut ReplayStats,
) {
    let header = &batch.header;
    if !matches!(header.compression(), Ok(Compression::None)) {
        tracing::warn!(
            partition,
            offset = header.base_offset.0,
            "{what} batch skipped: compressed (never written by the broker)"
        );
        stats.skipped += u64::from(header.records_count.max(0) as u32);
        return;
    }
    for record in batch.records() {
        let Ok(record) = record else {
            stats.skipped += 1;
            break;
        };
        let offset = header.base_offset.0 + record.offset_delta;
        if offset < from.0 {
            continue;
        }
        let applied = match record.key {
            Some(key) => {
                let record = ReplayRecord {
                    batch: header,
                    offset,
                    key,
                    value: record.value,
                };
                if header.is_control() {
                    visitor.control(record)
                } else {
                    visitor.record(record)
                }
            }
            None => Err("no key".to_string()),
        };
        match applied {
            Ok(()) => stats.records += 1,
            Err(e) => {
                stats.skipped += 1;
                tracing::warn!(partition, offset, "{what} record skipped: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{FlushPolicy, LogConfig};
    use minikafka_backend_portable::PortableBackend;
    use minikafka_core::record::{BatchBuilder, NewRecord};
    use std::path::{Path, PathBuf};

    const NOW: i64 = 1_700_000_000_000;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("minikafka-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    /// A record's key and value (`None`: null).
    type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

    fn batch(records: &[KeyValue<'_>]) -> Vec<u8> {
        let mut builder = BatchBuilder::new();
        for (key, value) in records {
            builder.push(&NewRecord {
                key: *key,
                value: *value,
                headers: Vec::new(),
                timestamp_ms: NOW,
            });
        }
        builder.build(Offset(0))
    }

    /// A control batch of one record keyed `key` (attributes: transactional and control).
    fn control_batch(key: &[u8]) -> Vec<u8> {
        let mut builder = BatchBuilder::new();
        builder.producer_id = 7;
        builder.producer_epoch = 0;
        builder.push(&NewRecord {
            key: Some(key),
            value: Some(&[0, 0, 0, 0, 0, 0]),
            headers: Vec::new(),
            timestamp_ms: NOW,
        });
        let mut bytes = builder.build(Offset(0));
        set_attributes(&mut bytes, 0x30);
        bytes
    }

    /// Sets attribute bits on an encoded batch and recomputes its CRC.
    fn set_attributes(batch: &mut [u8], bits: i16) {
        let attributes = i16::from_be_bytes([batch[21], batch[22]]) | bits;
        batch[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = minikafka_core::record::compute_crc(batch);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    /// Records every key it is handed; refuses the key `bad`.
    #[derive(Default)]
    struct Keys {
        data: Vec<(i64, Vec<u8>, Option<Vec<u8>>)>,
        control: Vec<(i64, Vec<u8>)>,
    }

    impl ReplayVisitor for Keys {
        const VISITS_CONTROL: bool = true;
        fn record(&mut self, r: ReplayRecord<'_>) -> Result<(), String> {
            if r.key == b"bad" {
                return Err("refused".into());
            }
            self.data
                .push((r.offset, r.key.to_vec(), r.value.map(<[u8]>::to_vec)));
            Ok(())
        }
        fn control(&mut self, r: ReplayRecord<'_>) -> Result<(), String> {
            assert!(r.batch.is_control());
            self.control.push((r.offset, r.key.to_vec()));
            Ok(())
        }
    }

    async fn append(log: &PartitionLog<PortableBackend>, bytes: Vec<u8>) {
        log.append_from_coordinator(bytes, NOW)
            .await
            .expect("append");
    }

    async fn replay_checks(backend: PortableBackend, dir: &Path) {
        let config = LogConfig {
            flush: FlushPolicy::None,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(backend.clone(), dir, config.clone(), false, NOW)
            .await
            .expect("open");
        // Offsets: 0 a, 1 (no key), 2 bad, 3 c (tombstone) | 4 control | 5 d.
        append(
            &log,
            batch(&[
                (Some(b"a"), Some(b"1")),
                (None, Some(b"x")),
                (Some(b"bad"), Some(b"2")),
                (Some(b"c"), None),
            ]),
        )
        .await;
        append(&log, control_batch(b"\0\0\0\x01")).await;
        append(&log, batch(&[(Some(b"d"), Some(b"4"))])).await;
        log.close().await.expect("close");

        let log = PartitionLog::open(backend, dir, config, true, NOW)
            .await
            .expect("reopen");
        let mut keys = Keys::default();
        let stats = replay_partition(&log, "test", 0, &mut keys)
            .await
            .expect("replay");
        assert_eq!(
            keys.data,
            vec![
                (0, b"a".to_vec(), Some(b"1".to_vec())),
                (3, b"c".to_vec(), None),
                (5, b"d".to_vec(), Some(b"4".to_vec())),
            ]
        );
        assert_eq!(keys.control, vec![(4, b"\0\0\0\x01".to_vec())]);
        assert_eq!((stats.records, stats.skipped), (4, 2));
        assert!(stats.bytes > 0);

        // A closure visits data records alone: the control batch is passed over, uncounted.
        let mut seen = Vec::new();
        let stats = replay_partition(&log, "test", 0, &mut |r: ReplayRecord<'_>| {
            seen.push(r.offset);
            Ok(())
        })
        .await
        .expect("replay");
        assert_eq!(seen, vec![0, 2, 3, 5]);
        assert_eq!((stats.records, stats.skipped), (4, 1));
        log.close().await.expect("close");
    }

    #[test]
    fn every_keyed_record_is_handed_over_once_in_offset_order_and_the_rest_counted() {
        let dir = scratch("order");
        let d = dir.clone();
        PortableBackend::run_shards(1, move |backend| {
            let d = d.join("p-0");
            async move { replay_checks(backend, &d).await }
        })
        .expect("run");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
