//! Kafka record batch format v2 (magic 2): parse, validate, patch, iterate, build.
//!
//! Contract:
//! - Inputs: byte slices that may come straight from a socket or a disk.
//! - Outputs: a parsed [`BatchHeader`], a [`BatchError`] naming the failed check and the byte
//!   at which it failed, borrowed [`Record`] views, or an encoded batch from [`BatchBuilder`].
//! - Never: allocates a size read from the input (every length is checked against the bytes
//!   present first), decompresses (the broker stores compressed batches as sent), panics on
//!   any input, or performs I/O.
//!
//! Byte layout (all integers big-endian; see the table in `docs/DESIGN.md`):
//!
//! | bytes  | field                 |
//! |--------|-----------------------|
//! | 0..8   | baseOffset            |
//! | 8..12  | batchLength (bytes after this field) |
//! | 12..16 | partitionLeaderEpoch  |
//! | 16     | magic (= 2)           |
//! | 17..21 | crc (CRC-32C of bytes 21..end) |
//! | 21..23 | attributes            |
//! | 23..27 | lastOffsetDelta       |
//! | 27..35 | baseTimestamp         |
//! | 35..43 | maxTimestamp          |
//! | 43..51 | producerId            |
//! | 51..53 | producerEpoch         |
//! | 53..57 | baseSequence          |
//! | 57..61 | recordsCount          |
//! | 61..   | records               |
//!
//! The base offset and the partition leader epoch lie outside the CRC, which is why the broker
//! can assign offsets by patching them in place (invariant I1) without re-encoding anything.

use crate::types::Offset;

/// Bytes before `batchLength` counts: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the fixed batch header, up to and including `recordsCount`.
pub const HEADER_BYTES: usize = 61;
/// The only magic value this crate accepts.
pub const MAGIC_V2: i8 = 2;
/// Offset of the first CRC-covered byte (attributes).
pub const CRC_START: usize = 21;

const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;

/// The smallest possible encoded record: length, attributes, timestampDelta, offsetDelta,
/// keyLength, valueLength and headersCount, one byte each.
pub const MIN_RECORD_BYTES: usize = 7;

/// Which check a batch failed. The byte position is carried by [`BatchError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchCheck {
    /// Fewer bytes are present than the fixed header needs.
    #[error("truncated header: need {need} bytes, have {have}")]
    TruncatedHeader {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// `batchLength` is smaller than the rest of the fixed header.
    #[error("batchLength {0} is smaller than the fixed header")]
    BatchLengthTooSmall(i32),
    /// `batchLength` points past the bytes present.
    #[error("batchLength {batch_length} runs past the {have} bytes present")]
    TruncatedBatch {
        /// The declared length.
        batch_length: i32,
        /// Bytes present from the batch start.
        have: usize,
    },
    /// `batchLength` exceeds the caller's limit (e.g. `message.max.bytes`).
    #[error("batch of {total_bytes} bytes exceeds the limit of {limit_bytes}")]
    BatchTooLarge {
        /// Total bytes of the batch including the log overhead.
        total_bytes: usize,
        /// The limit.
        limit_bytes: usize,
    },
    /// The magic byte is not 2.
    #[error("unsupported magic {0}")]
    BadMagic(i8),
    /// The stored CRC does not match the computed one.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC found in the header.
        stored: u32,
        /// CRC computed over attributes..end.
        computed: u32,
    },
    /// The compression codec bits name no known codec.
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    /// The base offset is negative, or the batch's last offset would overflow an `i64`.
    #[error("base offset {0} is negative or too large for the batch")]
    BadBaseOffset(i64),
    /// `recordsCount` is zero or negative.
    #[error("recordsCount {0} is not positive")]
    BadRecordCount(i32),
    /// `lastOffsetDelta` is not `recordsCount - 1` (offsets inside a batch are dense, I1).
    #[error("lastOffsetDelta {last_offset_delta} does not match recordsCount {records_count}")]
    LastOffsetDeltaMismatch {
        /// The header's lastOffsetDelta.
        last_offset_delta: i32,
        /// The header's recordsCount.
        records_count: i32,
    },
    /// A varint ran past its maximum width or past the end of the data.
    #[error("malformed varint")]
    MalformedVarint,
    /// A record's length is negative or runs past the batch.
    #[error("record length {0} is invalid")]
    BadRecordLength(i64),
    /// A key, value or header length is invalid or runs past its record.
    #[error("field length {0} is invalid")]
    BadFieldLength(i64),
    /// The fields of a record do not add up to its declared length.
    #[error("record fields do not fill the declared record length")]
    RecordLengthMismatch,
    /// A record's offsetDelta is not its position in the batch.
    #[error("record {index} has offsetDelta {offset_delta}")]
    OffsetDeltaMismatch {
        /// Position of the record in the batch.
        index: i32,
        /// The offsetDelta it carries.
        offset_delta: i64,
    },
    /// The records section holds a different number of records than `recordsCount`.
    #[error("found {found} records, header says {declared}")]
    RecordCountMismatch {
        /// Records found.
        found: i64,
        /// recordsCount.
        declared: i32,
    },
    /// Bytes remain after the last record.
    #[error("{0} bytes after the last record")]
    TrailingBytes(usize),
}

/// A failed batch check and the byte (from the start of the input) where it was detected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid record batch at byte {at}: {check}")]
pub struct BatchError {
    /// What was wrong.
    pub check: BatchCheck,
    /// Byte position, relative to the start of the slice handed to the parser.
    pub at: usize,
}

impl BatchError {
    fn new(check: BatchCheck, at: usize) -> Self {
        BatchError { check, at }
    }
}

/// Compression codec named by the low three attribute bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed records.
    None,
    /// gzip.
    Gzip,
    /// Snappy (xerial framing, as Kafka clients write it).
    Snappy,
    /// LZ4 frame.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// Decodes the attribute bits.
    pub fn from_attributes(attributes: i16) -> Result<Self, u8> {
        match (attributes & 0x7) as u8 {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(other),
        }
    }

    /// The attribute bits for this codec.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// The fixed 61-byte header of a record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Bytes after the `batchLength` field.
    pub batch_length: i32,
    /// Leader epoch (patched by the broker, outside the CRC).
    pub partition_leader_epoch: i32,
    /// Format version, always 2 after parsing.
    pub magic: i8,
    /// CRC-32C of bytes 21..end.
    pub crc: u32,
    /// Attribute bits: compression, timestamp type, transactional, control.
    pub attributes: i16,
    /// Offset of the last record minus the base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp: i64,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Idempotent producer epoch, or -1.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

fn be_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}
fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}
fn be_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}
fn be_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(b)
}

/// Reads `baseOffset` and `batchLength` from the first [`LOG_OVERHEAD`] bytes, if present.
/// Used by framing code that must know a batch's extent before the rest has arrived.
pub fn peek_extent(buf: &[u8]) -> Option<(Offset, i32)> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    Some((
        Offset(be_i64(buf, BASE_OFFSET_AT)),
        be_i32(buf, BATCH_LENGTH_AT),
    ))
}

impl BatchHeader {
    /// Parses the fixed header at the start of `buf`. Checks that the header is present, the
    /// magic is 2, and `batchLength` covers at least the fixed header. Does not check that the
    /// whole batch is present, nor the CRC: see [`validate_batch`].
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < HEADER_BYTES {
            return Err(BatchError::new(
                BatchCheck::TruncatedHeader {
                    need: HEADER_BYTES,
                    have: buf.len(),
                },
                buf.len(),
            ));
        }
        let batch_length = be_i32(buf, BATCH_LENGTH_AT);
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::new(BatchCheck::BadMagic(magic), MAGIC_AT));
        }
        if batch_length < (HEADER_BYTES - LOG_OVERHEAD) as i32 {
            return Err(BatchError::new(
                BatchCheck::BatchLengthTooSmall(batch_length),
                BATCH_LENGTH_AT,
            ));
        }
        Ok(BatchHeader {
            base_offset: Offset(be_i64(buf, BASE_OFFSET_AT)),
            batch_length,
            partition_leader_epoch: be_i32(buf, LEADER_EPOCH_AT),
            magic,
            crc: be_u32(buf, CRC_AT),
            attributes: be_i16(buf, ATTRIBUTES_AT),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_AT),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_AT),
            producer_id: be_i64(buf, PRODUCER_ID_AT),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_AT),
            base_sequence: be_i32(buf, BASE_SEQUENCE_AT),
            records_count: be_i32(buf, RECORDS_COUNT_AT),
        })
    }

    /// Total bytes of the batch on the wire and on disk, log overhead included.
    pub fn total_bytes(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }

    /// Offset of the last record in the batch.
    pub fn last_offset(&self) -> Offset {
        self.base_offset.plus(i64::from(self.last_offset_delta))
    }

    /// The offset after the last record of the batch.
    pub fn next_offset(&self) -> Offset {
        self.last_offset().plus(1)
    }

    /// The compression codec, or the unknown codec bits.
    pub fn compression(&self) -> Result<Compression, u8> {
        Compression::from_attributes(self.attributes)
    }

    /// True for transaction control batches (commit/abort markers).
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    /// True when the batch is part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }

    /// True when timestamps are LogAppendTime rather than CreateTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & LOG_APPEND_TIME_BIT != 0
    }

    /// The delete horizon a cleaner wrote into the batch (KIP-534: attribute bit 0x40 set,
    /// the base timestamp is the horizon), if any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & DELETE_HORIZON_BIT != 0).then_some(self.base_timestamp)
    }
}

/// The attribute bit saying the base timestamp is a delete horizon (KIP-534), written by the
/// cleaner into a transaction marker whose transaction has no data left.
pub const DELETE_HORIZON_BIT: i16 = 0x40;

/// Re-encodes an uncompressed batch with `horizon_ms` as its delete horizon (KIP-534): the
/// attribute bit set, the base timestamp the horizon, and each record's `timestampDelta`
/// re-based on it so every record keeps its timestamp. Offsets, producer fields and the rest
/// of each record are kept byte for byte; length and CRC are recomputed.
///
/// `None` when the batch is compressed or its records do not parse (the caller keeps the
/// batch as it is). Panics if `batch` is shorter than [`HEADER_BYTES`].
pub fn stamp_delete_horizon(batch: &[u8], horizon_ms: i64) -> Option<Vec<u8>> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.compression() != Ok(Compression::None) {
        return None;
    }
    let records = batch.get(HEADER_BYTES..header.total_bytes())?;
    // Sized by the bytes present, never by the header's count (I10): a record grows by at
    // most the few bytes of a longer timestamp delta and length.
    let mut out = Vec::with_capacity(records.len().saturating_mul(2));
    let mut pos = 0usize;
    let mut count = 0i32;
    while pos < records.len() {
        let len = usize::try_from(read_varlong(records, &mut pos, 5)?).ok()?;
        let body = records.get(pos..pos.checked_add(len)?)?;
        pos += len;
        let mut at = 1usize; // the record's attributes byte
        let delta = read_varlong(body, &mut at, 10)?;
        let timestamp = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(delta)
        };
        let mut new_body = Vec::with_capacity(body.len() + 10);
        new_body.push(body[0]);
        write_varlong(&mut new_body, timestamp.wrapping_sub(horizon_ms));
        new_body.extend_from_slice(&body[at..]);
        write_varlong(&mut out, new_body.len() as i64);
        out.extend_from_slice(&new_body);
        count += 1;
    }
    if count != header.records_count {
        return None;
    }
    let mut head = batch[..HEADER_BYTES].to_vec();
    let attributes = header.attributes | DELETE_HORIZON_BIT;
    head[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    head[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8].copy_from_slice(&horizon_ms.to_be_bytes());
    Some(rebuild_batch(&head, &out, count))
}

/// Computes the CRC-32C that a batch's header must carry (over bytes 21..end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START.min(batch.len())..])
}

/// How the offsets inside a batch must be laid out (I1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OffsetRule {
    /// As a producer sends it: `lastOffsetDelta == recordsCount - 1` and record `i` has
    /// `offsetDelta == i`. The produce path uses this rule.
    #[default]
    Dense,
    /// As a compacted log may hold it (I1: compaction removes records, never renumbers
    /// them): `recordsCount >= 0`, `lastOffsetDelta >= recordsCount - 1` (the cleaner keeps
    /// the original last offset), record offset deltas strictly increasing and at most
    /// `lastOffsetDelta`. Every reader of stored bytes (recovery, the indexes, fetch clients,
    /// the offsets log replay) uses this rule.
    Compacted,
}

/// Options for [`validate_batch_with`].
#[derive(Clone, Copy, Debug)]
pub struct ValidateOptions {
    /// Largest accepted batch, log overhead included (`message.max.bytes`).
    pub max_batch_bytes: usize,
    /// Walk every record of uncompressed batches (varints, lengths, offset deltas).
    pub walk_records: bool,
    /// Dense offsets (a produced batch) or gaps allowed (a stored, possibly compacted, one).
    pub offsets: OffsetRule,
}

impl Default for ValidateOptions {
    fn default() -> Self {
        ValidateOptions {
            max_batch_bytes: i32::MAX as usize,
            walk_records: true,
            offsets: OffsetRule::Dense,
        }
    }
}

impl ValidateOptions {
    /// The options for reading stored bytes back: no size limit, records walked, offset gaps
    /// left by compaction allowed ([`OffsetRule::Compacted`]).
    pub fn stored() -> Self {
        ValidateOptions {
            offsets: OffsetRule::Compacted,
            ..ValidateOptions::default()
        }
    }
}

/// Validates the batch at the start of `buf` (which may hold more bytes after it).
///
/// Checks, in order, each failure naming the byte where it was found: header present, magic,
/// `batchLength` within the bytes present and the limit, CRC-32C, known compression codec,
/// `recordsCount` > 0, `lastOffsetDelta == recordsCount - 1`; then for uncompressed batches
/// every record's varints and lengths, `offsetDelta == position`, the record count and no
/// trailing bytes. Compressed batches get header and CRC checks only (the broker never
/// decompresses). Invariant I3: nothing reaches a log without passing this function.
pub fn validate_batch_with(buf: &[u8], opts: ValidateOptions) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let total = header.total_bytes();
    if total > buf.len() {
        return Err(BatchError::new(
            BatchCheck::TruncatedBatch {
                batch_length: header.batch_length,
                have: buf.len(),
            },
            BATCH_LENGTH_AT,
        ));
    }
    if total > opts.max_batch_bytes {
        return Err(BatchError::new(
            BatchCheck::BatchTooLarge {
                total_bytes: total,
                limit_bytes: opts.max_batch_bytes,
            },
            BATCH_LENGTH_AT,
        ));
    }
    let batch = &buf[..total];
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::new(
            BatchCheck::CrcMismatch {
                stored: header.crc,
                computed,
            },
            CRC_AT,
        ));
    }
    let compression = header
        .compression()
        .map_err(|bits| BatchError::new(BatchCheck::UnknownCompression(bits), ATTRIBUTES_AT))?;
    let min_records = match opts.offsets {
        OffsetRule::Dense => 1,
        OffsetRule::Compacted => 0,
    };
    if header.records_count < min_records {
        return Err(BatchError::new(
            BatchCheck::BadRecordCount(header.records_count),
            RECORDS_COUNT_AT,
        ));
    }
    let last_delta = i64::from(header.last_offset_delta);
    let min_last_delta = i64::from(header.records_count) - 1;
    let delta_ok = match opts.offsets {
        OffsetRule::Dense => last_delta == min_last_delta,
        OffsetRule::Compacted => last_delta >= min_last_delta.max(0),
    };
    if !delta_ok {
        return Err(BatchError::new(
            BatchCheck::LastOffsetDeltaMismatch {
                last_offset_delta: header.last_offset_delta,
                records_count: header.records_count,
            },
            LAST_OFFSET_DELTA_AT,
        ));
    }
    // The base offset is outside the CRC: bound it so offset arithmetic cannot overflow.
    let base = header.base_offset.0;
    if base < 0 || base > i64::MAX - i64::from(header.last_offset_delta) - 1 {
        return Err(BatchError::new(
            BatchCheck::BadBaseOffset(base),
            BASE_OFFSET_AT,
        ));
    }
    if compression == Compression::None && opts.walk_records {
        walk_records(batch, &header, opts.offsets)?;
    }
    Ok(header)
}

/// [`validate_batch_with`] with default options (no size limit, records walked).
pub fn validate_batch(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    validate_batch_with(buf, ValidateOptions::default())
}

/// The one-batch rule: checks that `records` (what a producer sent for one partition) is
/// exactly one record batch, by its length field alone, and returns the batch's total bytes.
///
/// Kafka appends one batch per partition per Produce request; the broker's Produce handler
/// applies this before routing (more than one batch is INVALID_RECORD, anything else
/// CORRUPT_MESSAGE) and the partition log again after [`validate_batch_with`], so no append
/// path writes trailing bytes. Errors, in order: fewer than [`LOG_OVERHEAD`] bytes
/// ([`BatchCheck::TruncatedHeader`]), a negative `batchLength`
/// ([`BatchCheck::BatchLengthTooSmall`]), a batch running past the bytes
/// ([`BatchCheck::TruncatedBatch`]), bytes after the batch ([`BatchCheck::TrailingBytes`], the
/// only one that means "more than one batch"). The batch itself is not validated here.
pub fn check_single_batch(records: &[u8]) -> Result<usize, BatchError> {
    let Some((_, batch_length)) = peek_extent(records) else {
        return Err(BatchError::new(
            BatchCheck::TruncatedHeader {
                need: LOG_OVERHEAD,
                have: records.len(),
            },
            0,
        ));
    };
    let Some(total) = usize::try_from(batch_length)
        .ok()
        .and_then(|n| n.checked_add(LOG_OVERHEAD))
    else {
        return Err(BatchError::new(
            BatchCheck::BatchLengthTooSmall(batch_length),
            BATCH_LENGTH_AT,
        ));
    };
    match total.cmp(&records.len()) {
        std::cmp::Ordering::Equal => Ok(total),
        std::cmp::Ordering::Less => Err(BatchError::new(
            BatchCheck::TrailingBytes(records.len() - total),
            total,
        )),
        std::cmp::Ordering::Greater => Err(BatchError::new(
            BatchCheck::TruncatedBatch {
                batch_length,
                have: records.len(),
            },
            BATCH_LENGTH_AT,
        )),
    }
}

/// Walks every record of an uncompressed batch, checking structure and offset deltas.
/// Reads exactly `recordsCount` records, then requires the records section to be used up.
fn walk_records(batch: &[u8], header: &BatchHeader, rule: OffsetRule) -> Result<(), BatchError> {
    let declared = header.records_count;
    let mut iter = RecordIter::new(&batch[HEADER_BYTES..]);
    iter.base_at = HEADER_BYTES;
    let mut previous_delta: i64 = -1;
    for index in 0..declared {
        let record = match iter.next() {
            Some(record) => record?,
            None => {
                return Err(BatchError::new(
                    BatchCheck::RecordCountMismatch {
                        found: i64::from(index),
                        declared,
                    },
                    batch.len(),
                ))
            }
        };
        let delta_ok = match rule {
            OffsetRule::Dense => record.offset_delta == i64::from(index),
            OffsetRule::Compacted => {
                record.offset_delta > previous_delta
                    && record.offset_delta <= i64::from(header.last_offset_delta)
            }
        };
        previous_delta = record.offset_delta;
        if !delta_ok {
            return Err(BatchError::new(
                BatchCheck::OffsetDeltaMismatch {
                    index,
                    offset_delta: record.offset_delta,
                },
                iter.base_at + record.start,
            ));
        }
    }
    let rest = iter.remaining();
    if rest != 0 {
        return Err(BatchError::new(
            BatchCheck::TrailingBytes(rest),
            batch.len() - rest,
        ));
    }
    Ok(())
}

/// Writes `base` into the batch's baseOffset field. The field lies outside the CRC, so the
/// batch stays valid (I1: the single writer assigns dense offsets by patching in place).
///
/// Panics if `batch` is shorter than the log overhead: callers patch only validated batches.
pub fn patch_base_offset(batch: &mut [u8], base: Offset) {
    batch[BASE_OFFSET_AT..BASE_OFFSET_AT + 8].copy_from_slice(&base.0.to_be_bytes());
}

/// Writes the partition leader epoch (outside the CRC). Panics on a short batch, as above.
pub fn patch_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[LEADER_EPOCH_AT..LEADER_EPOCH_AT + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Re-encodes `batch` around a new records section: every header field is kept (base offset,
/// leader epoch, attributes, `lastOffsetDelta`, timestamps, producer id, epoch and base
/// sequence) but `batchLength`, `recordsCount` and the CRC, which are recomputed. This is how
/// the cleaner writes a batch it removed records from (I1: offsets are kept, not renumbered).
///
/// Panics if `batch` is shorter than the fixed header: callers pass validated batches.
pub fn rebuild_batch(batch: &[u8], records: &[u8], records_count: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + records.len());
    out.extend_from_slice(&batch[..HEADER_BYTES]);
    out.extend_from_slice(records);
    let batch_length = (out.len() - LOG_OVERHEAD) as i32;
    out[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&batch_length.to_be_bytes());
    out[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&records_count.to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The attribute bit saying the batch's timestamps are LogAppendTime (else CreateTime).
pub const LOG_APPEND_TIME_BIT: i16 = 0x08;

/// Stamps a batch with its log-append time, as a broker does for a topic with
/// `message.timestamp.type=LogAppendTime`: sets the timestamp-type attribute bit, writes
/// `append_time_ms` as the max timestamp and recomputes the CRC. Everything else — base
/// offset, leader epoch, producer id, epoch and sequence, the base timestamp and the records
/// (compressed or not) — is left as it was, so an idempotent batch keeps its producer fields
/// and a consumer reads every record's timestamp as `append_time_ms` (Kafka's rule for
/// LogAppendTime batches). Stamping twice with the same time changes nothing.
///
/// Panics if `batch` is shorter than [`HEADER_BYTES`]: callers stamp only validated batches.
pub fn stamp_log_append_time(batch: &mut [u8], append_time_ms: i64) {
    let (head, records) = batch.split_at_mut(HEADER_BYTES);
    stamp_log_append_time_split(head, records, append_time_ms);
}

/// [`stamp_log_append_time`] for a batch held in two pieces: `head`, its first
/// [`HEADER_BYTES`] (changed), and `records`, the rest (read for the CRC, unchanged). This is
/// how the log stamps a produced batch whose records are still the request frame's bytes.
///
/// Panics if `head` is shorter than [`HEADER_BYTES`]: callers stamp only validated batches.
pub fn stamp_log_append_time_split(head: &mut [u8], records: &[u8], append_time_ms: i64) {
    let attributes = i16::from_be_bytes([head[ATTRIBUTES_AT], head[ATTRIBUTES_AT + 1]]);
    head[ATTRIBUTES_AT..ATTRIBUTES_AT + 2]
        .copy_from_slice(&(attributes | LOG_APPEND_TIME_BIT).to_be_bytes());
    head[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&append_time_ms.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[CRC_START..HEADER_BYTES]), records);
    head[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates the batches laid end to end in `buf`, validating each. Stops at the first error
/// (yielded once) or at the end. Bytes after the last whole batch are reported as
/// `TruncatedHeader`/`TruncatedBatch`; callers that accept a partial tail (fetch responses may
/// cut a batch) use [`BatchIter::lenient_tail`].
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    opts: ValidateOptions,
    lenient_tail: bool,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    /// Iterates `buf` with default validation options.
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            pos: 0,
            opts: ValidateOptions::default(),
            lenient_tail: false,
            failed: false,
        }
    }

    /// Uses these validation options.
    pub fn with_options(mut self, opts: ValidateOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Ends quietly at a partial final batch instead of yielding an error (Kafka fetch
    /// responses may end with a partial batch when a limit cuts it).
    pub fn lenient_tail(mut self) -> Self {
        self.lenient_tail = true;
        self
    }
}

/// One batch found by [`BatchIter`]: its position in the buffer, its bytes and its header.
#[derive(Clone, Copy, Debug)]
pub struct BatchView<'a> {
    /// Byte position of the batch in the iterated buffer.
    pub start: usize,
    /// The batch's bytes, log overhead included.
    pub bytes: &'a [u8],
    /// The parsed header.
    pub header: BatchHeader,
}

impl<'a> BatchView<'a> {
    /// Iterates the records of an uncompressed batch. For compressed batches the caller
    /// decompresses [`BatchView::records_bytes`] and uses [`RecordIter::new`].
    pub fn records(&self) -> RecordIter<'a> {
        RecordIter::new(self.records_bytes())
    }

    /// The bytes after the fixed header: records, possibly compressed.
    pub fn records_bytes(&self) -> &'a [u8] {
        &self.bytes[HEADER_BYTES..]
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchView<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        match validate_batch_with(rest, self.opts) {
            Ok(header) => {
                let start = self.pos;
                let total = header.total_bytes();
                self.pos += total;
                Some(Ok(BatchView {
                    start,
                    bytes: &self.buf[start..start + total],
                    header,
                }))
            }
            Err(err) => {
                self.failed = true;
                let partial = matches!(
                    err.check,
                    BatchCheck::TruncatedHeader { .. } | BatchCheck::TruncatedBatch { .. }
                );
                if partial && self.lenient_tail {
                    return None;
                }
                Some(Err(BatchError::new(err.check, self.pos + err.at)))
            }
        }
    }
}

/// Reads a zigzag varint (at most 5 bytes) or varlong (at most 10 bytes).
fn read_varlong(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
    }
    None
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i64, BatchCheck> {
    read_varlong(buf, pos, 5).ok_or(BatchCheck::MalformedVarint)
}

fn read_varlong_checked(buf: &[u8], pos: &mut usize) -> Result<i64, BatchCheck> {
    read_varlong(buf, pos, 10).ok_or(BatchCheck::MalformedVarint)
}

/// Appends a zigzag varint/varlong.
pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Reads a nullable byte field of `len` bytes (-1 = null) inside `record_end`.
fn read_bytes_field<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    record_end: usize,
) -> Result<Option<&'a [u8]>, BatchCheck> {
    let len = read_varint(buf, pos)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || (len as u64) > (record_end.saturating_sub(*pos)) as u64 {
        return Err(BatchCheck::BadFieldLength(len));
    }
    let start = *pos;
    *pos += len as usize;
    Ok(Some(&buf[start..*pos]))
}

/// One record inside a batch, borrowing its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Position of the record's length varint within the iterated records bytes.
    pub start: usize,
    /// Record attributes (unused by Kafka today).
    pub attributes: i8,
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset.
    pub offset_delta: i64,
    /// The key, or `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// The value, or `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    headers_count: i64,
    headers: &'a [u8],
}

impl<'a> Record<'a> {
    /// Iterates the record's headers.
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            buf: self.headers,
            pos: 0,
            left: self.headers_count,
        }
    }

    /// Number of headers.
    pub fn headers_count(&self) -> usize {
        self.headers_count as usize
    }
}

/// One record header: a string key (as bytes) and a nullable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// The header key (UTF-8 by convention; not checked).
    pub key: &'a [u8],
    /// The header value, or `None` for null.
    pub value: Option<&'a [u8]>,
}

/// Iterates headers already validated by [`RecordIter`].
pub struct HeaderIter<'a> {
    buf: &'a [u8],
    pos: usize,
    left: i64,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left <= 0 {
            return None;
        }
        self.left -= 1;
        let end = self.buf.len();
        // Structure was checked when the record was parsed; a failure here means none is left.
        let key = read_bytes_field(self.buf, &mut self.pos, end).ok()??;
        let value = read_bytes_field(self.buf, &mut self.pos, end).ok()?;
        Some(Header { key, value })
    }
}

/// Iterates the records in an uncompressed (or decompressed) records section, checking each
/// record's structure as it goes. Yields an error once and then stops.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Added to error positions so they are relative to the caller's buffer.
    base_at: usize,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates the records in `records` (the bytes after a batch header, uncompressed).
    pub fn new(records: &'a [u8]) -> Self {
        RecordIter {
            buf: records,
            pos: 0,
            base_at: 0,
            failed: false,
        }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn parse_one(&mut self) -> Result<Record<'a>, BatchError> {
        let start = self.pos;
        let buf = self.buf;
        let err = |check, at: usize| BatchError::new(check, at);
        let mut pos = start;
        let len = read_varint(buf, &mut pos).map_err(|c| err(c, start))?;
        if len < (MIN_RECORD_BYTES as i64 - 1) || (len as u64) > (buf.len() - pos) as u64 {
            return Err(err(BatchCheck::BadRecordLength(len), start));
        }
        let end = pos + len as usize;
        let body = &buf[..end];
        let attributes = *body
            .get(pos)
            .ok_or_else(|| err(BatchCheck::RecordLengthMismatch, pos))?
            as i8;
        pos += 1;
        let at = pos;
        let timestamp_delta = read_varlong_checked(body, &mut pos).map_err(|c| err(c, at))?;
        let at = pos;
        let offset_delta = read_varint(body, &mut pos).map_err(|c| err(c, at))?;
        let at = pos;
        let key = read_bytes_field(body, &mut pos, end).map_err(|c| err(c, at))?;
        let at = pos;
        let value = read_bytes_field(body, &mut pos, end).map_err(|c| err(c, at))?;
        let at = pos;
        let headers_count = read_varint(body, &mut pos).map_err(|c| err(c, at))?;
        // Each header takes at least two bytes, so the count is bounded by the bytes left.
        if headers_count < 0 || headers_count as u64 > ((end - pos) / 2) as u64 {
            return Err(err(BatchCheck::BadFieldLength(headers_count), at));
        }
        let headers_start = pos;
        for _ in 0..headers_count {
            let at = pos;
            match read_bytes_field(body, &mut pos, end).map_err(|c| err(c, at))? {
                Some(_) => {}
                None => return Err(err(BatchCheck::BadFieldLength(-1), at)),
            }
            let at = pos;
            read_bytes_field(body, &mut pos, end).map_err(|c| err(c, at))?;
        }
        if pos != end {
            return Err(err(BatchCheck::RecordLengthMismatch, pos));
        }
        self.pos = end;
        Ok(Record {
            start,
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers_count,
            headers: &buf[headers_start..end],
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        match self.parse_one() {
            Ok(record) => Some(Ok(record)),
            Err(e) => {
                self.failed = true;
                Some(Err(BatchError::new(e.check, self.base_at + e.at)))
            }
        }
    }
}

/// A record to encode with [`BatchBuilder`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord<'a> {
    /// Key, or `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value, or `None` for null.
    pub value: Option<&'a [u8]>,
    /// Headers: key and nullable value.
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
    /// Timestamp in milliseconds since the epoch (a value: core reads no clock).
    pub timestamp_ms: i64,
}

/// Builds an uncompressed v2 batch (or, given pre-compressed records, a compressed one).
/// Used by the client, tests and benches; the broker itself never encodes batches.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    records: Vec<u8>,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    /// Producer id written to the header (-1 when not idempotent).
    pub producer_id: i64,
    /// Producer epoch written to the header.
    pub producer_epoch: i16,
    /// Base sequence written to the header.
    pub base_sequence: i32,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            records: Vec::new(),
            count: 0,
            base_timestamp: None,
            max_timestamp: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of records added.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when no record was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the encoded batch would take, uncompressed.
    pub fn encoded_bytes(&self) -> usize {
        HEADER_BYTES + self.records.len()
    }

    /// Appends one record.
    pub fn push(&mut self, record: &NewRecord<'_>) {
        let base_ts = *self.base_timestamp.get_or_insert(record.timestamp_ms);
        self.max_timestamp = self.max_timestamp.max(record.timestamp_ms);
        let mut body = Vec::with_capacity(
            16 + record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len),
        );
        body.push(0); // attributes
        write_varlong(&mut body, record.timestamp_ms - base_ts);
        write_varlong(&mut body, i64::from(self.count));
        write_nullable(&mut body, record.key);
        write_nullable(&mut body, record.value);
        write_varlong(&mut body, record.headers.len() as i64);
        for (k, v) in &record.headers {
            write_nullable(&mut body, Some(k));
            write_nullable(&mut body, *v);
        }
        write_varlong(&mut self.records, body.len() as i64);
        self.records.extend_from_slice(&body);
        self.count += 1;
    }

    /// The uncompressed records section built so far (for a caller that compresses it).
    pub fn records_bytes(&self) -> &[u8] {
        &self.records
    }

    /// Encodes the batch with uncompressed records.
    pub fn build(&self, base_offset: Offset) -> Vec<u8> {
        self.build_with(base_offset, Compression::None, &self.records)
    }

    /// Encodes the batch around `records` (already compressed with `compression`).
    pub fn build_with(
        &self,
        base_offset: Offset,
        compression: Compression,
        records: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + records.len());
        let batch_length = (HEADER_BYTES - LOG_OVERHEAD + records.len()) as i32;
        out.extend_from_slice(&base_offset.0.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
        out.extend_from_slice(&compression.attribute_bits().to_be_bytes());
        out.extend_from_slice(&(self.count - 1).max(0).to_be_bytes());
        let base_ts = self.base_timestamp.unwrap_or(-1);
        out.extend_from_slice(&base_ts.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(records);
        let crc = compute_crc(&out);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

fn write_nullable(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => write_varlong(out, -1),
        Some(bytes) => {
            write_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_batch_passes_the_one_batch_rule() {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            value: Some(b"v"),
            timestamp_ms: 1,
            ..NewRecord::default()
        });
        let one = b.build(Offset(0));
        assert_eq!(check_single_batch(&one), Ok(one.len()));
        let mut two = one.clone();
        two.extend_from_slice(&one);
        let check = |bytes: &[u8]| check_single_batch(bytes).map_err(|e| e.check);
        assert_eq!(check(&two), Err(BatchCheck::TrailingBytes(one.len())));
        assert!(matches!(
            check(&one[..one.len() - 1]),
            Err(BatchCheck::TruncatedBatch { .. })
        ));
        assert!(matches!(
            check(&one[..5]),
            Err(BatchCheck::TruncatedHeader { need: 12, have: 5 })
        ));
        assert!(matches!(
            check(&[]),
            Err(BatchCheck::TruncatedHeader { .. })
        ));
        let mut negative = one.clone();
        negative[8..12].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(check(&negative), Err(BatchCheck::BatchLengthTooSmall(-1)));
    }

    fn sample(n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for i in 0..n {
            let value = format!("value-{i}");
            b.push(&NewRecord {
                key: Some(b"k"),
                value: Some(value.as_bytes()),
                headers: vec![(b"h", Some(b"v"))],
                timestamp_ms: 1_000 + i as i64,
            });
        }
        b.build(Offset(0))
    }

    #[test]
    fn built_batch_validates_and_iterates() {
        let batch = sample(3);
        let header = validate_batch(&batch).expect("valid");
        assert_eq!(header.records_count, 3);
        assert_eq!(header.last_offset_delta, 2);
        assert_eq!(header.max_timestamp, 1_002);
        let view = BatchIter::new(&batch).next().expect("one").expect("valid");
        let values: Vec<_> = view
            .records()
            .map(|r| r.expect("record").value.expect("value").to_vec())
            .collect();
        assert_eq!(
            values,
            vec![
                b"value-0".to_vec(),
                b"value-1".to_vec(),
                b"value-2".to_vec()
            ]
        );
        let first = view.records().next().expect("first").expect("ok");
        let headers: Vec<_> = first.headers().collect();
        assert_eq!(
            headers,
            vec![Header {
                key: b"h",
                value: Some(b"v")
            }]
        );
    }

    #[test]
    fn patching_base_offset_keeps_crc_valid() {
        let mut batch = sample(2);
        patch_base_offset(&mut batch, Offset(42));
        patch_leader_epoch(&mut batch, 7);
        let header = validate_batch(&batch).expect("still valid");
        assert_eq!(header.base_offset, Offset(42));
        assert_eq!(header.last_offset(), Offset(43));
        assert_eq!(header.partition_leader_epoch, 7);
    }

    #[test]
    fn crc_flip_is_reported_at_crc_field() {
        let mut batch = sample(2);
        let last = batch.len() - 1;
        batch[last] ^= 1;
        let err = validate_batch(&batch).expect_err("corrupt");
        assert!(matches!(err.check, BatchCheck::CrcMismatch { .. }));
        assert_eq!(err.at, CRC_AT);
    }

    #[test]
    fn truncated_batch_is_reported() {
        let batch = sample(2);
        let err = validate_batch(&batch[..batch.len() - 1]).expect_err("short");
        assert!(matches!(err.check, BatchCheck::TruncatedBatch { .. }));
        let err = validate_batch(&batch[..10]).expect_err("short");
        assert!(matches!(err.check, BatchCheck::TruncatedHeader { .. }));
    }

    #[test]
    fn size_limit_is_enforced() {
        let batch = sample(2);
        let opts = ValidateOptions {
            max_batch_bytes: batch.len() - 1,
            walk_records: true,
            offsets: OffsetRule::Dense,
        };
        let err = validate_batch_with(&batch, opts).expect_err("too large");
        assert!(matches!(err.check, BatchCheck::BatchTooLarge { .. }));
    }

    #[test]
    fn batch_iter_walks_consecutive_batches() {
        let mut buf = sample(2);
        let mut second = sample(3);
        patch_base_offset(&mut second, Offset(2));
        buf.extend_from_slice(&second);
        let views: Vec<_> = BatchIter::new(&buf)
            .collect::<Result<_, _>>()
            .expect("valid");
        assert_eq!(views.len(), 2);
        assert_eq!(views[1].start, sample(2).len());
        assert_eq!(views[1].header.next_offset(), Offset(5));
        // a cut tail is an error by default and quietly ignored when lenient
        let cut = &buf[..buf.len() - 5];
        assert!(BatchIter::new(cut).any(|r| r.is_err()));
        assert_eq!(BatchIter::new(cut).lenient_tail().count(), 1);
    }

    #[test]
    fn varint_round_trips_extremes() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos, 10), Some(v));
            assert_eq!(pos, out.len());
        }
    }

    #[test]
    fn hostile_header_count_is_rejected_without_allocating() {
        // A record claiming i32::MAX headers inside a 10-byte body.
        let mut body = vec![0u8];
        write_varlong(&mut body, 0);
        write_varlong(&mut body, 0);
        write_varlong(&mut body, -1);
        write_varlong(&mut body, -1);
        write_varlong(&mut body, i64::from(i32::MAX));
        let mut records = Vec::new();
        write_varlong(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
        let err = RecordIter::new(&records)
            .next()
            .expect("one")
            .expect_err("bad");
        assert!(matches!(
            err.check,
            BatchCheck::BadFieldLength(_) | BatchCheck::MalformedVarint
        ));
    }
}
