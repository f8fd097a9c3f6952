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
//!   trailing bytes), and the topic's record rules (core's [`failing_records`], Kafka's
//!   `LogValidator`): on a compacted log every record has a key (INVALID_RECORD), and on a
//!   CreateTime log every timestamp lies in the window of `message.timestamp.before.max.ms` /
//!   `message.timestamp.after.max.ms` around `now_ms` (INVALID_TIMESTAMP), and on a log with
//!   `confluent.{key,value}.schema.validation` every non-null key/value is framed with a
//!   schema id in `schema_ids` (INVALID_RECORD, I124). A batch with a
//!   failing record is refused whole, and the failures travel back for the Produce response's
//!   `record_errors` ([`LogError::RecordRules`], I61, KIP-467). Compressed records are inflated
//!   for the rules within the cleaner's bound (I10); records that do not inflate are
//!   CORRUPT_MESSAGE ([`LogError::Undecodable`]).
//! - Never: writes, or copies the batch (the rules read the records in place, and inflate
//!   a compressed batch only when a rule can fail a record).

use std::cell::Cell;

use minikafka_core::compaction::rewrite::batch_records;
use minikafka_core::producer::ProducerError;
use minikafka_core::record::{
    check_single_batch, rebuild_batch, validate_batch_with, BatchCheck, BatchError, BatchHeader,
    BatchView, Compression, OffsetRule, ValidateOptions, HEADER_BYTES,
};
use minikafka_core::record_errors::{failing_records, RecordRules};

use super::{KnownSchemaIds, LogConfig, LogError, Result, TimestampType, MAX_DECOMPRESSED_BYTES};
use minikafka_codec::KafkaCodecs;

/// Validates `batch`, a producer's batch for a log configured by `config`, at the broker's
/// wall-clock time `now_ms`, and returns its header. See the module documentation for the
/// checks.
/// Every call counts itself in `validations` (the log's [`super::PartitionLog::batch_validations`]).
pub fn validate_produced(
    batch: &[u8],
    config: &LogConfig,
    now_ms: i64,
    validations: &Cell<u64>,
    schema_ids: &KnownSchemaIds,
) -> Result<BatchHeader> {
    validations.set(validations.get() + 1);
    let opts = ValidateOptions {
        max_batch_bytes: config.max_batch_bytes,
        walk_records: true,
        // A produced batch: dense offsets (I1).
        offsets: OffsetRule::Dense,
    };
    let header = validate_batch_with(batch, opts)?;
    if header.is_control() {
        // Markers are the coordinator's (the log's marker path), never a client's: Kafka's
        // LogValidator refuses them from a client with INVALID_RECORD.
        return Err(LogError::Producer(ProducerError::ControlBatch {
            producer_id: header.producer_id,
        }));
    }
    // The one-batch rule, as the Produce handler applies it (only trailing bytes can be left
    // to find once the batch validated).
    check_single_batch(batch)?;
    let rules = record_rules(config);
    if rules.checks_anything() {
        check_record_rules(batch, header, &rules, now_ms, schema_ids)?;
    }
    Ok(header)
}

/// The batch as the log stores it under `config.compression` (I87): `None` when it is kept as
/// produced (`producer`, or its codec already the target: the copy-free path), else the batch
/// rewritten in the target codec at the topic's level — attributes' codec bits, records
/// section, length and CRC new; offsets, timestamps, producer id, epoch and sequence as they
/// were. Call after [`validate_produced`] accepted `batch` (its `header`): this validates
/// nothing again. Inflating is bounded by [`MAX_DECOMPRESSED_BYTES`] (I10), so a compression
/// bomb is CORRUPT_MESSAGE ([`LogError::Undecodable`]), never memory; a result larger than
/// `max.message.bytes` is refused as Kafka does (RECORD_TOO_LARGE).
pub fn recompressed(
    batch: &[u8],
    header: BatchHeader,
    config: &LogConfig,
) -> Result<Option<Vec<u8>>> {
    let Some(target) = config.compression.target else {
        return Ok(None);
    };
    let current = header
        .compression()
        .map_err(|bits| LogError::Undecodable(format!("unknown codec {bits}")))?;
    if current == target {
        return Ok(None);
    }
    let records = &batch[HEADER_BYTES..header.total_bytes()];
    let plain = if current == Compression::None {
        None
    } else {
        Some(
            minikafka_codec::decompress(current, records, MAX_DECOMPRESSED_BYTES)
                .map_err(|e| LogError::Undecodable(e.to_string()))?,
        )
    };
    let plain = plain.as_deref().unwrap_or(records);
    let section = if target == Compression::None {
        plain.to_vec()
    } else {
        minikafka_codec::compress_at(target, plain, config.compression.level(target))
            .map_err(|e| LogError::Undecodable(e.to_string()))?
    };
    let mut head = batch[..HEADER_BYTES].to_vec();
    let attributes = (header.attributes & !0x7) | target.attribute_bits();
    head[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    let out = rebuild_batch(&head, &section, header.records_count);
    if out.len() > config.max_batch_bytes {
        return Err(LogError::Corrupt(BatchError {
            check: BatchCheck::BatchTooLarge {
                total_bytes: out.len(),
                limit_bytes: config.max_batch_bytes,
            },
            at: 0,
        }));
    }
    Ok(Some(out))
}

/// Where a batch's attributes lie (Kafka's v2 batch layout).
const ATTRIBUTES_AT: usize = 21;

/// The record rules of a log configured by `config`: a key on a compacted log (the cleaner
/// could keep no latest value for a keyless record), and the timestamp window on a CreateTime
/// log (a LogAppendTime log stamps its own time).
fn record_rules(config: &LogConfig) -> RecordRules {
    RecordRules {
        key_required: config.cleanup_policy.compact,
        timestamps: (config.timestamp_type == TimestampType::CreateTime)
            .then_some(config.timestamp_bounds),
        schema_ids: config.schema_ids,
    }
}

/// Refuses the batch whole when any record breaks `rules` (I61), naming the failing records.
fn check_record_rules(
    batch: &[u8],
    header: BatchHeader,
    rules: &RecordRules,
    now_ms: i64,
    schema_ids: &KnownSchemaIds,
) -> Result<()> {
    let view = BatchView {
        start: 0,
        bytes: &batch[..header.total_bytes()],
        header,
    };
    let decoded = batch_records(&view, &mut KafkaCodecs, MAX_DECOMPRESSED_BYTES)
        .map_err(|e| LogError::Undecodable(e.to_string()))?;
    let failures = if rules.schema_ids.checks_anything() {
        schema_ids.with_lookup(|known| failing_records(decoded.facts(), rules, now_ms, known))
    } else {
        failing_records(decoded.facts(), rules, now_ms, &|_| false)
    };
    if failures.is_empty() {
        Ok(())
    } else {
        Err(LogError::RecordRules(failures))
    }
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

    const NOW_MS: i64 = 1_000_000;

    fn validate(batch: &[u8], config: &LogConfig, now_ms: i64) -> Result<BatchHeader> {
        validate_produced(batch, config, now_ms, &Cell::new(0), &KnownSchemaIds::new())
    }

    fn compacted() -> LogConfig {
        LogConfig {
            cleanup_policy: CleanupPolicy::COMPACT,
            ..LogConfig::default()
        }
    }

    fn compressed_to(target: Option<Compression>) -> LogConfig {
        LogConfig {
            compression: crate::log::CompressionConfig {
                target,
                ..Default::default()
            },
            ..LogConfig::default()
        }
    }

    fn gzip_batch() -> (Vec<u8>, Vec<u8>) {
        let mut b = BatchBuilder::new();
        b.producer_id = 9;
        b.producer_epoch = 3;
        b.base_sequence = 70;
        for i in 0..5 {
            b.push(&NewRecord {
                key: Some(b"k"),
                value: Some(&[b'a'; 200]),
                timestamp_ms: 10 + i,
                ..NewRecord::default()
            });
        }
        let plain = b.records_bytes().to_vec();
        let section = minikafka_codec::compress(Compression::Gzip, &plain).expect("gzip");
        (b.build_with(Offset(0), Compression::Gzip, &section), plain)
    }

    /// I87: the codec bits, records, length and CRC change; the producer fields, offsets and
    /// timestamps do not. I88: `producer`, or the same codec, rewrites nothing.
    #[test]
    fn a_batch_is_rewritten_in_the_target_codec_only() {
        let (batch, plain) = gzip_batch();
        let header = validate(&batch, &LogConfig::default(), NOW_MS).expect("valid");
        for target in [
            Compression::None,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let out = recompressed(&batch, header, &compressed_to(Some(target)))
                .expect("recompresses")
                .expect("rewritten");
            let new = validate(&out, &LogConfig::default(), NOW_MS).expect("valid after");
            assert_eq!(new.compression(), Ok(target));
            assert_eq!(
                (new.producer_id, new.producer_epoch, new.base_sequence),
                (9, 3, 70)
            );
            assert_eq!(new.records_count, header.records_count);
            assert_eq!(new.last_offset_delta, header.last_offset_delta);
            assert_eq!(new.max_timestamp, header.max_timestamp);
            let section = &out[HEADER_BYTES..];
            let records = minikafka_codec::decompress(target, section, 1 << 20).expect("inflate");
            assert_eq!(records, plain);
        }
        for kept in [None, Some(Compression::Gzip)] {
            assert_eq!(
                recompressed(&batch, header, &compressed_to(kept)).expect("ok"),
                None
            );
        }
    }

    /// I89: inflating stops at the bound (a bomb is CORRUPT_MESSAGE); a rewritten batch past
    /// `max.message.bytes` is refused.
    #[test]
    fn recompression_is_bounded() {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            value: Some(b"v"),
            ..NewRecord::default()
        });
        let zeros = vec![0u8; MAX_DECOMPRESSED_BYTES + 1];
        let section = minikafka_codec::compress(Compression::Zstd, &zeros).expect("zstd");
        let bomb = b.build_with(Offset(0), Compression::Zstd, &section);
        let header = validate(&bomb, &LogConfig::default(), NOW_MS).expect("framing is valid");
        let err =
            recompressed(&bomb, header, &compressed_to(Some(Compression::Lz4))).expect_err("bomb");
        assert_eq!(err.kafka_error_code(), ErrorCode::CORRUPT_MESSAGE);

        let (batch, _) = gzip_batch();
        let header = validate(&batch, &LogConfig::default(), NOW_MS).expect("valid");
        let tight = LogConfig {
            max_batch_bytes: batch.len(),
            ..compressed_to(Some(Compression::None))
        };
        let err = recompressed(&batch, header, &tight).expect_err("grew past the limit");
        assert_eq!(err.kafka_error_code(), ErrorCode::MESSAGE_TOO_LARGE);
    }

    #[test]
    fn a_compacted_log_refuses_a_record_without_a_key() {
        let err = validate(&batch(None), &compacted(), NOW_MS).expect_err("no key");
        assert_eq!(err.kafka_error_code(), ErrorCode::INVALID_RECORD);
        assert!(validate(&batch(Some(b"k")), &compacted(), NOW_MS).is_ok());
        assert!(validate(&batch(None), &LogConfig::default(), NOW_MS).is_ok());
    }

    #[test]
    fn trailing_bytes_and_bad_crcs_are_refused() {
        let mut two = batch(None);
        two.extend_from_slice(&batch(None));
        assert!(validate(&two, &LogConfig::default(), NOW_MS).is_err());
        let mut flipped = batch(None);
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let err = validate(&flipped, &LogConfig::default(), NOW_MS).expect_err("crc");
        assert_eq!(err.kafka_error_code(), ErrorCode::CORRUPT_MESSAGE);
    }

    #[test]
    fn a_timestamp_outside_the_window_refuses_the_batch_and_names_the_record() {
        use minikafka_core::record_errors::{RecordViolation, TimestampBounds};
        let bounded = LogConfig {
            timestamp_bounds: TimestampBounds {
                before_max_ms: 10,
                after_max_ms: 10,
            },
            ..LogConfig::default()
        };
        // `batch` stamps its record at 1 ms: far before NOW_MS - 10.
        let err = validate(&batch(Some(b"k")), &bounded, NOW_MS).expect_err("old");
        assert_eq!(err.kafka_error_code(), ErrorCode::INVALID_TIMESTAMP);
        let LogError::RecordRules(failures) = err else {
            panic!("the failing records travel back");
        };
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].batch_index, 0);
        assert!(matches!(
            failures[0].violation,
            RecordViolation::TimestampOutOfRange {
                timestamp_ms: 1,
                ..
            }
        ));
        // Inside the window it passes; a LogAppendTime log checks no timestamp.
        assert!(validate(&batch(Some(b"k")), &bounded, 5).is_ok());
        let stamped = LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..bounded
        };
        assert!(validate(&batch(Some(b"k")), &stamped, NOW_MS).is_ok());
    }

    /// I124: a validating log refuses a value without a known schema id, names the record,
    /// and accepts one framed with a known id; the same batch passes a log not validating.
    #[test]
    fn a_validating_log_refuses_unknown_schema_ids() {
        use minikafka_core::record_errors::SchemaIdRule;
        let validating = LogConfig {
            schema_ids: SchemaIdRule {
                key: false,
                value: true,
            },
            ..LogConfig::default()
        };
        let ids = KnownSchemaIds::new();
        ids.replace([3]);
        let framed = |id: i32| {
            let mut b = BatchBuilder::new();
            let mut value = vec![0u8];
            value.extend_from_slice(&id.to_be_bytes());
            value.extend_from_slice(b"payload");
            b.push(&NewRecord {
                value: Some(&value),
                timestamp_ms: 1,
                ..NewRecord::default()
            });
            b.build(Offset(0))
        };
        let check = |batch: &[u8], config: &LogConfig| {
            validate_produced(batch, config, NOW_MS, &Cell::new(0), &ids)
        };
        assert!(check(&framed(3), &validating).is_ok());
        let err = check(&framed(4), &validating).expect_err("unknown id");
        assert_eq!(err.kafka_error_code(), ErrorCode::INVALID_RECORD);
        let LogError::RecordRules(failures) = err else {
            panic!("the failing records travel back");
        };
        assert_eq!(failures[0].batch_index, 0);
        assert!(
            check(&batch(Some(b"k")), &validating).is_err(),
            "not framed"
        );
        assert!(check(&framed(4), &LogConfig::default()).is_ok());
    }
}
