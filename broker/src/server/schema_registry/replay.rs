//! Reading `_schemas` back at startup into the registry machine (I50, I58).
//!
//! Contract:
//! - [`replay_log`] reads the partition from its log start to its high watermark in reads of
//!   at most [`REPLAY_READ_BYTES`] (a read returns at least one whole batch, so it always
//!   advances) and feeds every keyed record, in offset order, to `Registry::replay`.
//! - Skipped, each with a warning line and counted, never stopping the start: a record the
//!   machine refuses (not Confluent's JSON, over the bounds, contradicting the state: I51,
//!   I52), a record without a key, a compressed batch (the registry never writes one).
//!   Control batches are passed over silently. A batch the log cannot read ends the replay
//!   with a warning (the log validated every batch on the way in and at recovery).
//! - Never: reads more than [`REPLAY_READ_BYTES`] plus one batch at a time.

use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchIter, Compression, ValidateOptions};
use minikafka_schema::Registry;

use super::topic::SCHEMAS_TOPIC;
use crate::log::{LogError, PartitionLog};

/// Most bytes one replay read asks for.
pub const REPLAY_READ_BYTES: usize = 1 << 20;

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

/// Replays `log` into `registry` (see the module documentation).
pub async fn replay_log<B: Backend>(
    log: &PartitionLog<B>,
    registry: &mut Registry,
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
                    tracing::warn!("{SCHEMAS_TOPIC} batch unreadable, replay stops: {e}");
                    return Ok(stats);
                }
            };
            let next = batch.header.next_offset();
            if batch.header.is_control() || next <= offset {
                offset = offset.max(next);
                continue;
            }
            if !matches!(batch.header.compression(), Ok(Compression::None)) {
                tracing::warn!(
                    offset = batch.header.base_offset.0,
                    "{SCHEMAS_TOPIC} batch skipped: compressed (the registry never writes one)"
                );
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
                let replayed = match record.key {
                    Some(key) => registry
                        .replay(key, record.value)
                        .map_err(|e| e.to_string()),
                    None => Err("no key".to_string()),
                };
                match replayed {
                    Ok(()) => stats.records += 1,
                    Err(e) => {
                        stats.skipped += 1;
                        tracing::warn!(
                            offset = record_offset,
                            "{SCHEMAS_TOPIC} record skipped: {e}"
                        );
                    }
                }
            }
            offset = next;
        }
        if offset == before {
            // Nothing advanced (cannot happen with whole batches): stop rather than spin.
            tracing::warn!(offset = offset.0, "{SCHEMAS_TOPIC} replay made no progress");
            break;
        }
    }
    Ok(stats)
}
