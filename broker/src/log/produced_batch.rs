//! The one validation of a produced batch: everything the log checks about the bytes of an
//! append before it takes offsets.
//!
//! Contract:
//! - [`validate_produced`] is the only place a produced batch is validated on its way to the
//!   log (issue 20 item 5): the Produce handler applies only the one-batch framing rule
//!   (a length field, to tell INVALID_RECORD from CORRUPT_MESSAGE) and routes the bytes; the
//!   log calls this once per append ([`super::PartitionLog::batch_validations`] counts the
//!   calls, and `tests/append_copies.rs` proves one per batch).
//! - Checks, in order: core's [`validate_batch_with`] (CRC, structure, dense offsets, the
//!   log's `max.message.bytes`; I3), core's one-batch rule [`check_single_batch`] (no
//!   trailing bytes), and on a compacted log Kafka's key rule: every record has a key, or the
//!   append is INVALID_RECORD ([`LogError::KeyRequired`]). Compressed records are inflated
//!   for the key rule within the cleaner's bound (I10); records that do not inflate are
//!   CORRUPT_MESSAGE ([`LogError::Undecodable`]).
//! - Never: writes, or copies the batch (the key rule reads the records in place, and
//!   inflates only a compressed batch of a compacted log).

use minikafka_core::compaction::rewrite::batch_records;
use minikafka_core::record::{
    check_single_batch, validate_batch_with, BatchHeader, BatchView, OffsetRule, ValidateOptions,
};

use super::{LogConfig, LogError, Result, MAX_DECOMPRESSED_BYTES};
use minikafka_codec::KafkaCodecs;

/// Validates `batch`, a producer's batch for a log configured by `config`, and returns its
/// header. See the module documentation for the checks.
pub fn validate_produced(batch: &[u8], config: &LogConfig) -> Result<BatchHeader> {
    let opts = ValidateOptions {
        max_batch_bytes: config.max_batch_bytes,
        walk_records: true,
        // A produced batch: dense offsets (I1).
        offsets: OffsetRule::Dense,
    };
    let header = validate_batch_with(batch, opts)?;
    // The one-batch rule, as the Produce handler applies it (only trailing bytes can be left
    // to find once the batch validated).
    check_single_batch(batch)?;
    if config.cleanup_policy.compact {
        require_keys(batch, header)?;
    }
    Ok(header)
}

/// Kafka refuses a record without a key on a compacted topic: the cleaner could keep no
/// latest value for it.
fn require_keys(batch: &[u8], header: BatchHeader) -> Result<()> {
    let view = BatchView {
        start: 0,
        bytes: &batch[..header.total_bytes()],
        header,
    };
    let decoded = batch_records(&view, &mut KafkaCodecs, MAX_DECOMPRESSED_BYTES)
        .map_err(|e| LogError::Undecodable(e.to_string()))?;
    if decoded.facts().any(|f| f.key.is_none()) {
        return Err(LogError::KeyRequired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::compaction::policy::CleanupPolicy;
    use minikafka_core::error_code::ErrorCode;
    use minikafka_core::record::{BatchBuilder, NewRecord};
    use minikafka_core::types::Offset;

    fn batch(key: Option<&[u8]>) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            key,
            value: Some(b"v"),
            timestamp_ms: 1,
            ..NewRecord::default()
        });
        b.build(Offset(0))
    }

    fn compacted() -> LogConfig {
        LogConfig {
            cleanup_policy: CleanupPolicy::COMPACT,
            ..LogConfig::default()
        }
    }

    #[test]
    fn a_compacted_log_refuses_a_record_without_a_key() {
        let err = validate_produced(&batch(None), &compacted()).expect_err("no key");
        assert_eq!(err.kafka_error_code(), ErrorCode::INVALID_RECORD);
        assert!(validate_produced(&batch(Some(b"k")), &compacted()).is_ok());
        assert!(validate_produced(&batch(None), &LogConfig::default()).is_ok());
    }

    #[test]
    fn trailing_bytes_and_bad_crcs_are_refused() {
        let mut two = batch(None);
        two.extend_from_slice(&batch(None));
        assert!(validate_produced(&two, &LogConfig::default()).is_err());
        let mut flipped = batch(None);
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let err = validate_produced(&flipped, &LogConfig::default()).expect_err("crc");
        assert_eq!(err.kafka_error_code(), ErrorCode::CORRUPT_MESSAGE);
    }
}
