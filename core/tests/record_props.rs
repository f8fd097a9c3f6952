//! Property tests of `minikafka_core::record` against an independent reference: the
//! `kafka-protocol` crate's record batch encoder and decoder (and the compression libraries it
//! uses), plus `crc32c` for checksums.
//!
//! Directions checked:
//! - theirs -> ours: batches encoded by `kafka_protocol::records::RecordBatchEncoder` with every
//!   codec pass [`validate_batch`] (I3), their header fields read back through [`BatchHeader`],
//!   and [`RecordIter`] over the (decompressed) records yields exactly the reference records.
//! - ours -> theirs: [`BatchBuilder`] output (uncompressed, and compressed with kafka-protocol's
//!   compressors) decodes with `RecordBatchDecoder` to the same records.
//! - mutations: patching the base offset (I1) keeps a batch valid and touches bytes 0..8 only;
//!   every single-bit flip in bytes 16.. and every truncation is rejected; arbitrary bytes never
//!   panic, report an error position inside the input, and allocate nothing larger than the
//!   input (I10).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{self as kp_codec, Compressor, Decompressor};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use minikafka_core::record::{
    patch_base_offset, validate_batch, BatchBuilder, BatchCheck, BatchHeader, BatchIter,
    Compression, NewRecord, RecordIter, CRC_START, HEADER_BYTES,
};
use minikafka_core::types::Offset;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

// ---------------------------------------------------------------------------------------------
// Allocation tracking (I10): the largest single allocation made by this thread while a closure
// runs. Thread-local, so tests running in parallel do not see each other's allocations.

struct TrackingAlloc;

thread_local! {
    static LARGEST_ALLOC_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn note_alloc(size_bytes: usize) {
    // try_with: the slot may already be gone while the thread is being torn down.
    let _ = LARGEST_ALLOC_BYTES.try_with(|largest| {
        if largest.get() < size_bytes {
            largest.set(size_bytes);
        }
    });
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for TrackingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc(new_size);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: TrackingAlloc = TrackingAlloc;

/// Runs `f` and returns its result with the largest allocation (bytes) it made on this thread.
fn largest_alloc_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST_ALLOC_BYTES.with(|largest| largest.set(0));
    let out = f();
    (out, LARGEST_ALLOC_BYTES.with(Cell::get))
}

// ---------------------------------------------------------------------------------------------
// The model: records and batch metadata as plain owned values.

#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Unique keys (kafka-protocol keeps headers in a map), in order.
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp_ms: i64,
}

#[derive(Clone, Debug)]
struct BatchMeta {
    base_offset: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    leader_epoch: i32,
    transactional: bool,
}

const CODECS: [(KpCompression, Compression); 5] = [
    (KpCompression::None, Compression::None),
    (KpCompression::Gzip, Compression::Gzip),
    (KpCompression::Snappy, Compression::Snappy),
    (KpCompression::Lz4, Compression::Lz4),
    (KpCompression::Zstd, Compression::Zstd),
];

fn nullable_bytes(max_len: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Vec::new())),
        4 => vec(any::<u8>(), 0..max_len).prop_map(Some),
    ]
}

fn model_record() -> impl Strategy<Value = ModelRecord> {
    (
        nullable_bytes(32),
        // Mostly small values, sometimes large enough to span several snappy/lz4 blocks.
        prop_oneof![8 => nullable_bytes(64), 1 => nullable_bytes(4096)],
        vec(("[a-z]{0,6}", nullable_bytes(16)), 0..3),
        -1i64..(1 << 45),
    )
        .prop_map(|(key, value, raw_headers, timestamp_ms)| {
            // Header 0 keeps its (possibly empty) letters-only key; header i > 0 gets a digit
            // prefix, so keys are unique.
            let headers = raw_headers
                .into_iter()
                .enumerate()
                .map(|(i, (k, v))| {
                    if i == 0 {
                        (k, v)
                    } else {
                        (format!("{i}{k}"), v)
                    }
                })
                .collect();
            ModelRecord {
                key,
                value,
                headers,
                timestamp_ms,
            }
        })
}

fn batch_meta() -> impl Strategy<Value = BatchMeta> {
    (
        0i64..(i64::MAX / 2),
        prop_oneof![Just(-1i64), 0i64..i64::MAX],
        any::<i16>(),
        prop_oneof![Just(-1i32), 0i32..(i32::MAX - 100)],
        any::<i32>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                base_offset,
                producer_id,
                producer_epoch,
                base_sequence,
                leader_epoch,
                transactional,
            )| {
                BatchMeta {
                    base_offset,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    leader_epoch,
                    transactional,
                }
            },
        )
}

fn model_batch() -> impl Strategy<Value = (BatchMeta, Vec<ModelRecord>)> {
    (batch_meta(), vec(model_record(), 1..50))
}

// ---------------------------------------------------------------------------------------------
// Reference encoding and decoding through kafka-protocol.

fn to_kp_records(meta: &BatchMeta, records: &[ModelRecord]) -> Vec<KpRecord> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| KpRecord {
            transactional: meta.transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: meta.leader_epoch,
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            timestamp_type: TimestampType::Creation,
            // Offsets and sequences advance together, so the encoder writes ONE batch.
            offset: meta.base_offset + i as i64,
            sequence: meta.base_sequence.wrapping_add(i as i32),
            timestamp: r.timestamp_ms,
            key: r.key.clone().map(Bytes::from),
            value: r.value.clone().map(Bytes::from),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from)))
                .collect::<IndexMap<_, _>>(),
        })
        .collect()
}

/// Encodes the model as one batch with kafka-protocol's encoder.
fn kp_encode(meta: &BatchMeta, records: &[ModelRecord], codec: KpCompression) -> Vec<u8> {
    let kp_records = to_kp_records(meta, records);
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        kp_records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: codec,
        },
    )
    .expect("reference encoder");
    buf.to_vec()
}

/// Decompresses a records section with the codec implementation kafka-protocol uses.
fn kp_decompress(codec: KpCompression, data: &[u8]) -> Vec<u8> {
    let mut buf = Bytes::copy_from_slice(data);
    let out = match codec {
        KpCompression::None => return data.to_vec(),
        KpCompression::Gzip => {
            <kp_codec::Gzip as Decompressor<Bytes>>::decompress(&mut buf, |b| Ok(b.clone()))
        }
        KpCompression::Snappy => {
            <kp_codec::Snappy as Decompressor<Bytes>>::decompress(&mut buf, |b| Ok(b.clone()))
        }
        KpCompression::Lz4 => {
            <kp_codec::Lz4 as Decompressor<Bytes>>::decompress(&mut buf, |b| Ok(b.clone()))
        }
        KpCompression::Zstd => {
            <kp_codec::Zstd as Decompressor<Bytes>>::decompress(&mut buf, |b| Ok(b.clone()))
        }
    };
    out.expect("reference decompressor").to_vec()
}

/// Compresses a records section with the codec implementation kafka-protocol uses.
fn kp_compress(codec: KpCompression, records: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    let fill = |b: &mut BytesMut| {
        b.extend_from_slice(records);
        Ok(())
    };
    let done = match codec {
        KpCompression::None => return records.to_vec(),
        KpCompression::Gzip => <kp_codec::Gzip as Compressor<BytesMut>>::compress(&mut out, fill),
        KpCompression::Snappy => {
            <kp_codec::Snappy as Compressor<BytesMut>>::compress(&mut out, fill)
        }
        KpCompression::Lz4 => <kp_codec::Lz4 as Compressor<BytesMut>>::compress(&mut out, fill),
        KpCompression::Zstd => <kp_codec::Zstd as Compressor<BytesMut>>::compress(&mut out, fill),
    };
    done.expect("reference compressor");
    out.to_vec()
}

/// Builds the model with our encoder, compressing the records section with `codec`.
fn our_encode(meta: &BatchMeta, records: &[ModelRecord], codec: KpCompression) -> Vec<u8> {
    let mut builder = BatchBuilder::new();
    builder.producer_id = meta.producer_id;
    builder.producer_epoch = meta.producer_epoch;
    builder.base_sequence = meta.base_sequence;
    for r in records {
        builder.push(&NewRecord {
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                .collect(),
            timestamp_ms: r.timestamp_ms,
        });
    }
    let ours = match codec {
        KpCompression::None => Compression::None,
        KpCompression::Gzip => Compression::Gzip,
        KpCompression::Snappy => Compression::Snappy,
        KpCompression::Lz4 => Compression::Lz4,
        KpCompression::Zstd => Compression::Zstd,
    };
    let compressed = kp_compress(codec, builder.records_bytes());
    builder.build_with(Offset(meta.base_offset), ours, &compressed)
}

// ---------------------------------------------------------------------------------------------
// Checks shared by several properties.

/// Walks `records` (uncompressed) with our [`RecordIter`] and compares with the model.
fn check_records(
    records: &[u8],
    header: &BatchHeader,
    model: &[ModelRecord],
) -> Result<(), TestCaseError> {
    let mut iter = RecordIter::new(records);
    for (i, want) in model.iter().enumerate() {
        let got = iter
            .next()
            .ok_or_else(|| TestCaseError::fail(format!("record {i} missing")))?
            .map_err(|e| TestCaseError::fail(format!("record {i}: {e}")))?;
        prop_assert_eq!(got.offset_delta, i as i64);
        prop_assert_eq!(
            header.base_timestamp + got.timestamp_delta,
            want.timestamp_ms,
            "timestamp of record {}",
            i
        );
        prop_assert_eq!(got.key, want.key.as_deref());
        prop_assert_eq!(got.value, want.value.as_deref());
        prop_assert_eq!(got.headers_count(), want.headers.len());
        let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = got
            .headers()
            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
            .collect();
        let want_headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = want
            .headers
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
            .collect();
        prop_assert_eq!(headers, want_headers);
    }
    prop_assert!(iter.next().is_none(), "extra records after the model's");
    prop_assert_eq!(iter.remaining(), 0);
    Ok(())
}

/// Compares kafka-protocol's decoding of `batch` with the model.
fn check_kp_decodes(
    batch: &[u8],
    meta: &BatchMeta,
    model: &[ModelRecord],
    codec: KpCompression,
) -> Result<(), TestCaseError> {
    let mut buf = Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode(&mut buf)
        .map_err(|e| TestCaseError::fail(format!("reference decoder rejected ours: {e}")))?;
    prop_assert_eq!(set.compression, codec);
    prop_assert_eq!(set.records.len(), model.len());
    for (i, (got, want)) in set.records.iter().zip(model).enumerate() {
        prop_assert_eq!(got.offset, meta.base_offset + i as i64);
        prop_assert_eq!(got.sequence, meta.base_sequence.wrapping_add(i as i32));
        prop_assert_eq!(got.producer_id, meta.producer_id);
        prop_assert_eq!(got.producer_epoch, meta.producer_epoch);
        prop_assert_eq!(got.timestamp, want.timestamp_ms);
        prop_assert_eq!(got.key.as_deref(), want.key.as_deref());
        prop_assert_eq!(got.value.as_deref(), want.value.as_deref());
        let headers: Vec<(String, Option<Vec<u8>>)> = got
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.as_ref().map(|b| b.to_vec())))
            .collect();
        prop_assert_eq!(&headers, &want.headers);
    }
    Ok(())
}

/// Asserts the structural guarantees of a parse of arbitrary `input` (never panics: reaching
/// here at all is half the check): error positions lie inside the input, valid batches iterate
/// cleanly, and no allocation exceeds the input's size (I10).
fn check_arbitrary_input(input: &[u8]) -> Result<(), TestCaseError> {
    let len = input.len();
    let (outcome, largest_bytes) = largest_alloc_during(|| {
        let validated = validate_batch(input).map(|h| h.records_count);
        let batch_errs: Vec<usize> = BatchIter::new(input)
            .filter_map(|b| b.err().map(|e| e.at))
            .collect();
        let mut record_err = None;
        let mut record_count = 0usize;
        for r in RecordIter::new(input) {
            match r {
                Ok(rec) => {
                    record_count += 1;
                    // Header iteration over a parsed record must yield exactly its count.
                    if rec.headers().count() != rec.headers_count() {
                        record_err = Some(usize::MAX);
                    }
                }
                Err(e) => record_err = Some(e.at),
            }
        }
        (validated, batch_errs, record_err, record_count)
    });
    let (validated, batch_errs, record_err, _record_count) = outcome;
    if let Err(e) = &validated {
        prop_assert!(
            e.at <= len,
            "validate_batch error at {} past {} bytes",
            e.at,
            len
        );
    }
    for at in batch_errs {
        prop_assert!(at <= len, "BatchIter error at {} past {} bytes", at, len);
    }
    if let Some(at) = record_err {
        prop_assert!(
            at != usize::MAX,
            "a record's headers() disagrees with headers_count()"
        );
        prop_assert!(at <= len, "RecordIter error at {} past {} bytes", at, len);
    }
    prop_assert!(
        largest_bytes <= len.max(64),
        "parsing {} bytes allocated {} bytes at once",
        len,
        largest_bytes
    );
    Ok(())
}

/// Zigzag varint encoding, written here independently of the crate under test.
fn zigzag_varint(value: i64) -> Vec<u8> {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    let mut out = Vec::new();
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
    out
}

/// Reads a zigzag varint at `pos`: (value, bytes used). Test inputs are well formed.
fn read_zigzag(buf: &[u8], pos: usize) -> (i64, usize) {
    let mut raw = 0u64;
    let mut used = 0;
    loop {
        let byte = buf[pos + used];
        raw |= u64::from(byte & 0x7f) << (7 * used);
        used += 1;
        if byte & 0x80 == 0 {
            return (((raw >> 1) as i64) ^ -((raw & 1) as i64), used);
        }
    }
}

/// Rewrites batchLength and the CRC after an edit that changed the batch's size.
fn reseal(batch: &mut [u8]) {
    let batch_length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

// ---------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Reference-encoded batches, every codec: accepted (I3), header fields as encoded, and the
    /// (decompressed) records read back exactly.
    #[test]
    fn reference_batches_validate_and_iterate((meta, model) in model_batch()) {
        let n = model.len() as i32;
        let min_ts = model.iter().map(|r| r.timestamp_ms).min().expect("non-empty");
        let max_ts = model.iter().map(|r| r.timestamp_ms).max().expect("non-empty");
        for (kp_codec, ours) in CODECS {
            let batch = kp_encode(&meta, &model, kp_codec);
            let header = validate_batch(&batch)
                .map_err(|e| TestCaseError::fail(format!("{kp_codec:?}: {e}")))?;
            prop_assert_eq!(header.total_bytes(), batch.len());
            prop_assert_eq!(header.base_offset, Offset(meta.base_offset));
            prop_assert_eq!(header.partition_leader_epoch, meta.leader_epoch);
            prop_assert_eq!(header.records_count, n);
            prop_assert_eq!(header.last_offset_delta, n - 1);
            prop_assert_eq!(header.last_offset(), Offset(meta.base_offset + i64::from(n) - 1));
            prop_assert_eq!(header.compression(), Ok(ours));
            prop_assert_eq!(header.is_transactional(), meta.transactional);
            prop_assert!(!header.is_control());
            prop_assert_eq!(header.base_timestamp, min_ts);
            prop_assert_eq!(header.max_timestamp, max_ts);
            prop_assert_eq!(header.producer_id, meta.producer_id);
            prop_assert_eq!(header.producer_epoch, meta.producer_epoch);
            prop_assert_eq!(header.base_sequence, meta.base_sequence);
            prop_assert_eq!(header.crc, crc32c::crc32c(&batch[CRC_START..]));

            let views: Vec<_> = BatchIter::new(&batch)
                .collect::<Result<_, _>>()
                .map_err(|e| TestCaseError::fail(format!("{kp_codec:?}: {e}")))?;
            prop_assert_eq!(views.len(), 1);
            prop_assert_eq!(views[0].header, header);
            let records = kp_decompress(kp_codec, views[0].records_bytes());
            if ours == Compression::None {
                prop_assert_eq!(&records[..], &batch[HEADER_BYTES..]);
            }
            check_records(&records, &header, &model)?;
        }
    }

    /// Our encoder, every codec (compressed with kafka-protocol's compressors): our own
    /// validation accepts it and kafka-protocol's decoder reads the same records.
    #[test]
    fn our_batches_decode_with_reference((meta, model) in model_batch()) {
        for (kp_codec, ours) in CODECS {
            let batch = our_encode(&meta, &model, kp_codec);
            let header = validate_batch(&batch)
                .map_err(|e| TestCaseError::fail(format!("{kp_codec:?}: {e}")))?;
            prop_assert_eq!(header.compression(), Ok(ours));
            prop_assert_eq!(header.records_count, model.len() as i32);
            prop_assert_eq!(header.base_sequence, meta.base_sequence);
            prop_assert_eq!(
                header.max_timestamp,
                model.iter().map(|r| r.timestamp_ms).max().expect("non-empty")
            );
            check_kp_decodes(&batch, &meta, &model, kp_codec)?;
            let records = kp_decompress(kp_codec, &batch[HEADER_BYTES..]);
            check_records(&records, &header, &model)?;
        }
    }
}

/// A reference-encoded batch: uncompressed mostly, sometimes with a codec.
fn encoded_batch() -> impl Strategy<Value = Vec<u8>> {
    (
        model_batch(),
        prop_oneof![4 => Just(KpCompression::None), 1 => Just(KpCompression::Gzip),
                    1 => Just(KpCompression::Snappy), 1 => Just(KpCompression::Lz4),
                    1 => Just(KpCompression::Zstd)],
    )
        .prop_map(|((meta, model), codec)| kp_encode(&meta, &model, codec))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// I1: the base offset lies outside the CRC, so patching it keeps the batch valid, changes
    /// bytes 0..8 only, and moves the whole offset range.
    #[test]
    fn patch_base_offset_keeps_batch_valid(batch in encoded_batch(), base in 0i64..(i64::MAX / 2)) {
        let before = validate_batch(&batch).expect("reference batch is valid");
        let mut patched = batch.clone();
        patch_base_offset(&mut patched, Offset(base));
        let after = validate_batch(&patched)
            .map_err(|e| TestCaseError::fail(format!("patched batch rejected: {e}")))?;
        prop_assert_eq!(&patched[0..8], &base.to_be_bytes()[..]);
        prop_assert_eq!(&patched[8..], &batch[8..]);
        prop_assert_eq!(after.base_offset, Offset(base));
        prop_assert_eq!(after.last_offset_delta, before.last_offset_delta);
        prop_assert_eq!(after.crc, before.crc);
    }

    /// I3: any single bit flipped in bytes 16.. (magic, CRC field, or CRC-covered bytes) is
    /// rejected.
    #[test]
    fn single_bit_flip_after_byte_16_is_rejected(batch in encoded_batch(), at in any::<Index>(), bit in 0u8..8) {
        let pos = 16 + at.index(batch.len() - 16);
        let mut bad = batch.clone();
        bad[pos] ^= 1 << bit;
        let err = validate_batch(&bad);
        prop_assert!(err.is_err(), "flip of bit {} at byte {} accepted", bit, pos);
        let err = err.expect_err("checked above");
        prop_assert!(err.at < bad.len());
        let expected = match pos {
            16 => matches!(err.check, BatchCheck::BadMagic(_)),
            _ => matches!(err.check, BatchCheck::CrcMismatch { .. }),
        };
        prop_assert!(expected, "flip at byte {} gave {:?}", pos, err.check);
    }

    /// Bits outside the CRC (baseOffset 0..8, partitionLeaderEpoch 12..16) are not covered by
    /// it: flipping them leaves the batch valid (which is why the broker may patch them),
    /// unless the flip makes the base offset negative or too large for the batch.
    #[test]
    fn bit_flip_outside_crc_is_accepted(batch in encoded_batch(), at in any::<Index>(), bit in 0u8..8) {
        let outside: Vec<usize> = (0..8).chain(12..16).collect();
        let pos = outside[at.index(outside.len())];
        let mut flipped = batch.clone();
        flipped[pos] ^= 1 << bit;
        let base = i64::from_be_bytes(flipped[..8].try_into().expect("8 bytes"));
        let last_delta = i64::from(i32::from_be_bytes(flipped[23..27].try_into().expect("4 bytes")));
        if base >= 0 && base < i64::MAX - last_delta {
            prop_assert!(validate_batch(&flipped).is_ok());
        } else {
            let err = validate_batch(&flipped).expect_err("base offset out of range");
            prop_assert_eq!(err.check, BatchCheck::BadBaseOffset(base));
        }
    }

    /// Every proper prefix of a batch is rejected as truncated, at a position inside it.
    #[test]
    fn truncation_is_rejected(batch in encoded_batch(), cut in any::<Index>()) {
        let len = cut.index(batch.len());
        let err = validate_batch(&batch[..len]).expect_err("truncated batch accepted");
        prop_assert!(
            matches!(err.check, BatchCheck::TruncatedHeader { .. } | BatchCheck::TruncatedBatch { .. }),
            "unexpected {:?}", err.check
        );
        prop_assert!(err.at <= len);
        // Lenient iteration ends quietly at the partial batch.
        prop_assert_eq!(BatchIter::new(&batch[..len]).lenient_tail().count(), 0);
    }

    /// A record whose declared length exceeds its fields (slack bytes after its headers) is
    /// rejected, even with batchLength and CRC made consistent; the reference decoder would
    /// skip such slack, so this is checked against the format's rule directly.
    #[test]
    fn record_with_slack_bytes_is_rejected(
        (meta, model) in model_batch(),
        which in any::<Index>(),
        slack in vec(any::<u8>(), 1..8),
    ) {
        let batch = kp_encode(&meta, &model, KpCompression::None);
        // Walk the record boundaries by their length varints alone.
        let target = which.index(model.len());
        let mut pos = HEADER_BYTES;
        for _ in 0..target {
            let (len, used) = read_zigzag(&batch, pos);
            pos += used + len as usize;
        }
        let (len, used) = read_zigzag(&batch, pos);
        let end = pos + used + len as usize;
        let mut bad = batch[..pos].to_vec();
        bad.extend_from_slice(&zigzag_varint(len + slack.len() as i64));
        bad.extend_from_slice(&batch[pos + used..end]);
        bad.extend_from_slice(&slack);
        bad.extend_from_slice(&batch[end..]);
        reseal(&mut bad);
        let err = validate_batch(&bad).expect_err("record with slack bytes accepted");
        prop_assert_eq!(err.check, BatchCheck::RecordLengthMismatch);
        prop_assert!(err.at >= pos && err.at < bad.len());
    }

    /// Garbage after the last record but inside batchLength (CRC made consistent) is rejected.
    #[test]
    fn garbage_after_last_record_is_rejected(
        (meta, model) in model_batch(),
        garbage in vec(any::<u8>(), 1..16),
    ) {
        let mut bad = kp_encode(&meta, &model, KpCompression::None);
        bad.extend_from_slice(&garbage);
        reseal(&mut bad);
        let err = validate_batch(&bad).expect_err("garbage after the last record accepted");
        prop_assert!(err.at < bad.len());
    }

    /// Bytes after a batch belong to the next one: validation reads exactly its own extent.
    #[test]
    fn trailing_bytes_after_batch_are_ignored(batch in encoded_batch(), tail in vec(any::<u8>(), 0..64)) {
        let mut buf = batch.clone();
        buf.extend_from_slice(&tail);
        let header = validate_batch(&buf).expect("batch followed by bytes");
        prop_assert_eq!(header.total_bytes(), batch.len());
    }

    /// A valid batch whose bytes 21.. were overwritten at random and whose CRC was then
    /// recomputed (so the parser gets past the checksum): no panic, errors inside the input,
    /// and when both our validation and the reference decoder accept it, they agree.
    #[test]
    fn corrupted_batch_with_fixed_crc_is_handled(
        batch in encoded_batch(),
        edits in vec((any::<Index>(), any::<u8>()), 1..6),
    ) {
        let mut bad = batch.clone();
        let covered_bytes = bad.len() - CRC_START;
        for (at, byte) in &edits {
            bad[CRC_START + at.index(covered_bytes)] = *byte;
        }
        let crc = crc32c::crc32c(&bad[CRC_START..]);
        bad[17..21].copy_from_slice(&crc.to_be_bytes());
        check_arbitrary_input(&bad)?;
        let Ok(header) = validate_batch(&bad) else { return Ok(()) };
        if header.compression() != Ok(Compression::None) {
            return Ok(());
        }
        let ours: Vec<_> = RecordIter::new(&bad[HEADER_BYTES..])
            .collect::<Result<_, _>>()
            .map_err(|e| TestCaseError::fail(format!("validated batch fails to iterate: {e}")))?;
        prop_assert_eq!(ours.len() as i32, header.records_count);
        let mut buf = Bytes::copy_from_slice(&bad);
        // The reference may refuse what we accept (it requires UTF-8 header keys); compare
        // only when both accept.
        if let Ok(set) = RecordBatchDecoder::decode(&mut buf) {
            prop_assert_eq!(set.records.len(), ours.len());
            for (theirs, ours) in set.records.iter().zip(&ours) {
                prop_assert_eq!(theirs.offset, header.base_offset.0 + ours.offset_delta);
                prop_assert_eq!(theirs.timestamp, header.base_timestamp + ours.timestamp_delta);
                prop_assert_eq!(theirs.key.as_deref(), ours.key);
                prop_assert_eq!(theirs.value.as_deref(), ours.value);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic, errors point inside the input, and nothing allocates more
    /// than the input holds (I10).
    #[test]
    fn arbitrary_bytes_never_panic(input in vec(any::<u8>(), 0..600)) {
        check_arbitrary_input(&input)?;
    }

    /// Arbitrary bytes behind a plausible header (magic 2, batchLength matching, CRC fixed),
    /// so the record walk itself sees garbage.
    #[test]
    fn arbitrary_records_behind_valid_header_never_panic(
        records in vec(any::<u8>(), 0..400),
        count in prop_oneof![Just(1i32), 1i32..20, any::<i32>()],
    ) {
        let mut batch = vec![0u8; HEADER_BYTES];
        batch[8..12].copy_from_slice(&((HEADER_BYTES - 12 + records.len()) as i32).to_be_bytes());
        batch[16] = 2;
        batch[23..27].copy_from_slice(&count.wrapping_sub(1).to_be_bytes());
        batch[57..61].copy_from_slice(&count.to_be_bytes());
        batch.extend_from_slice(&records);
        let crc = crc32c::crc32c(&batch[CRC_START..]);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
        check_arbitrary_input(&batch)?;
    }
}

/// The base offset lies outside the CRC, so a corrupt or hostile one must be bounded by
/// validation: a batch whose last offset would overflow `i64`, or whose base offset is
/// negative, is rejected; the largest base offset that still fits is accepted and its
/// offset arithmetic holds.
#[test]
fn validated_header_offsets_do_not_overflow() {
    let mut builder = BatchBuilder::new();
    for _ in 0..2 {
        builder.push(&NewRecord::default());
    }
    let mut batch = builder.build(Offset(0));
    for bad in [i64::MAX, i64::MAX - 1, -1, i64::MIN] {
        patch_base_offset(&mut batch, Offset(bad));
        let err = validate_batch(&batch).expect_err("base offset out of range");
        assert_eq!(err.check, BatchCheck::BadBaseOffset(bad));
        assert_eq!(err.at, 0);
    }
    let largest = i64::MAX - 2;
    patch_base_offset(&mut batch, Offset(largest));
    let header = validate_batch(&batch).expect("largest base offset that fits");
    assert_eq!(header.last_offset(), Offset(i64::MAX - 1));
    assert_eq!(header.next_offset(), Offset(i64::MAX));
}

/// The allocation tracker itself notices an allocation, so the I10 checks above can fail.
#[test]
fn allocation_tracker_sees_allocations() {
    let (v, largest_bytes) = largest_alloc_during(|| vec![0u8; 10_000]);
    assert_eq!(v.len(), 10_000);
    assert!(largest_bytes >= 10_000);
    let ((), largest_bytes) = largest_alloc_during(|| ());
    assert_eq!(largest_bytes, 0);
}
