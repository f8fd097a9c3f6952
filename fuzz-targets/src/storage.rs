//! Targets for what the broker reads back from disk or off a produce request: record batches
//! (`core::record`), the recovery scanner fed windows (`core::recovery`), and the offset and
//! time indexes (`core::index`, `core::time_index`).

use minikafka_core::index::{self, IndexEntry, OffsetIndex};
use minikafka_core::record::{
    compute_crc, patch_base_offset, stamp_delete_horizon, validate_batch, validate_batch_with,
    BatchIter, Compression, OffsetRule, RecordIter, ValidateOptions, HEADER_BYTES, LOG_OVERHEAD,
};
use minikafka_core::recovery::{scan_slice, ScanConfig, StopReason};
use minikafka_core::time_index::{self, search_batch, search_slice, TimeIndex};
use minikafka_core::types::{FilePos, Offset, RelativeOffset};

use crate::input::Input;

/// Rewrites the CRC of every batch laid end to end in `buf`, as far as their lengths chain, so
/// that mutations inside a batch reach the checks behind the CRC.
pub fn fix_crcs(buf: &mut [u8]) {
    let mut pos = 0usize;
    while buf.len() - pos >= HEADER_BYTES {
        let len_at = pos + 8;
        let batch_length = i32::from_be_bytes([
            buf[len_at],
            buf[len_at + 1],
            buf[len_at + 2],
            buf[len_at + 3],
        ]);
        let Ok(batch_length) = usize::try_from(batch_length) else {
            return;
        };
        let total = LOG_OVERHEAD + batch_length;
        if total < HEADER_BYTES || total > buf.len() - pos {
            return;
        }
        let crc = compute_crc(&buf[pos..pos + total]);
        buf[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos += total;
    }
}

/// Asserts that `batch`, exactly one batch that [`validate_batch`] accepts (a produced batch:
/// dense offsets), iterates; see [`assert_batch_iterates_with`].
pub fn assert_batch_iterates(batch: &[u8]) {
    assert_batch_iterates_with(batch, OffsetRule::Dense);
}

/// Asserts that `batch`, exactly one batch that [`validate_batch_with`] accepts under `rule`,
/// iterates: every record parses, exactly `recordsCount` of them, with `offsetDelta` = its
/// index ([`OffsetRule::Dense`]) or increasing up to `lastOffsetDelta` (a stored batch a
/// cleaning may have thinned, [`OffsetRule::Compacted`], I1); every header iterates, the base
/// offset can be patched without breaking the batch (I1), and a timestamp search over it
/// answers without panicking.
pub fn assert_batch_iterates_with(batch: &[u8], rule: OffsetRule) {
    let opts = ValidateOptions {
        offsets: rule,
        ..ValidateOptions::default()
    };
    let header = validate_batch_with(batch, opts).expect("the caller passes a valid batch");
    assert_eq!(header.total_bytes(), batch.len());
    let compression = header.compression().expect("validated codec");
    if compression == Compression::None {
        let mut count = 0i64;
        let mut previous_delta = -1i64;
        for record in RecordIter::new(&batch[HEADER_BYTES..]) {
            let record = record.expect("validate ok => iterate ok");
            match rule {
                OffsetRule::Dense => assert_eq!(record.offset_delta, count),
                OffsetRule::Compacted => {
                    assert!(record.offset_delta > previous_delta);
                    assert!(record.offset_delta <= i64::from(header.last_offset_delta));
                }
            }
            previous_delta = record.offset_delta;
            assert_eq!(record.headers().count(), record.headers_count());
            count += 1;
        }
        assert_eq!(count, i64::from(header.records_count));
    }
    let mut patched = batch.to_vec();
    patch_base_offset(&mut patched, Offset(0));
    let repatched =
        validate_batch_with(&patched, opts).expect("base offset lies outside the CRC (I1)");
    assert_eq!(repatched.records_count, header.records_count);
    let view = BatchIter::new(batch)
        .with_options(opts)
        .next()
        .expect("one batch")
        .expect("valid");
    for target_ms in [
        i64::MIN,
        header.base_timestamp,
        header.max_timestamp,
        i64::MAX,
    ] {
        if let Some(hit) = search_batch(&view, target_ms, header.base_offset) {
            assert!(hit.offset >= header.base_offset && hit.offset <= header.last_offset());
        }
    }
}

/// The cleaner's delete-horizon stamp (KIP-534, I154) of a valid batch: when it applies (an
/// uncompressed batch), the result is valid, carries the horizon, and keeps every record's
/// offset, timestamp, key and value.
fn assert_stamp_keeps_records(batch: &[u8], horizon_ms: i64) {
    let Some(stamped) = stamp_delete_horizon(batch, horizon_ms) else {
        return;
    };
    let old = validate_batch(batch).expect("the caller validated it");
    let new = validate_batch(&stamped).expect("a stamped valid batch is valid");
    assert_eq!(new.delete_horizon_ms(), Some(horizon_ms));
    assert_eq!(
        (new.base_offset, new.last_offset_delta, new.records_count),
        (old.base_offset, old.last_offset_delta, old.records_count)
    );
    let facts = |bytes: &[u8], header: &minikafka_core::record::BatchHeader| {
        RecordIter::new(&bytes[HEADER_BYTES..])
            .map(|r| {
                let r = r.expect("records of a valid batch");
                let ts = if header.is_log_append_time() {
                    header.max_timestamp
                } else {
                    header.base_timestamp.wrapping_add(r.timestamp_delta)
                };
                (
                    r.offset_delta,
                    ts,
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(facts(&stamped, &new), facts(batch, &old));
}

/// One or more batches: `[flags: u8][bytes]`; flag bit 0 rewrites the CRCs first
/// ([`fix_crcs`]). Asserts validate ok ⇒ iterate ok for the first batch (and its
/// delete-horizon stamp keeps its records, at a horizon taken from the flags), and that
/// [`BatchIter`] yields contiguous valid batches and stops at the first error, strict or
/// lenient alike.
pub fn record_batch(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let mut buf = input.rest().to_vec();
    if flags & 1 != 0 {
        fix_crcs(&mut buf);
    }
    if let Ok(header) = validate_batch(&buf) {
        assert_batch_iterates(&buf[..header.total_bytes()]);
        assert_stamp_keeps_records(&buf[..header.total_bytes()], i64::from(flags) << 40);
    }
    let mut strict_ok = Vec::new();
    let mut next_start = 0usize;
    for item in BatchIter::new(&buf) {
        match item {
            Ok(view) => {
                assert_eq!(view.start, next_start);
                next_start += view.bytes.len();
                strict_ok.push(view.start);
            }
            Err(err) => assert!(err.at >= next_start && err.at <= buf.len(), "{err:?}"),
        }
    }
    let lenient: Vec<usize> = BatchIter::new(&buf)
        .lenient_tail()
        .map_while(Result::ok)
        .map(|view| view.start)
        .collect();
    assert_eq!(lenient, strict_ok);
}

/// A segment file: `[window: u16][index interval: u8][max batch: u8][flags: u8][extra: u8]
/// [segment bytes]`. Flag bit 0 rewrites CRCs; the caller believes the file `extra` bytes
/// longer than it is (a short read). The base offset and leader epoch are taken from the first
/// batch, as a real segment's name and the broker's epoch would give them.
///
/// Asserts: the outcome does not depend on the window size; the scan stays within its feed
/// bound (inside [`scan_slice`]); the valid prefix is exactly `batches_count` whole valid
/// batches with dense offsets from the base offset at the expected epoch; a clean end is the
/// file's end; the rebuilt offset and time indexes validate; and a timestamp search over the
/// valid prefix answers alike for any window size.
pub fn segment_recovery(data: &[u8]) {
    let mut input = Input::new(data);
    let window_bytes = usize::from(input.u16());
    let index_interval_bytes = u32::from(input.u8()) * 64;
    let max_batch_bytes = match input.u8() {
        0 => i32::MAX as usize,
        n => usize::from(n) * 256,
    };
    let flags = input.u8();
    let extra_bytes = u64::from(input.u8());
    let mut segment = input.rest().to_vec();
    if flags & 1 != 0 {
        fix_crcs(&mut segment);
    }
    let base_offset = segment
        .first_chunk::<8>()
        .map_or(0, |b| i64::from_be_bytes(*b));
    let expected_leader_epoch = segment
        .get(12..16)
        .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let file_len_bytes = segment.len() as u64 + extra_bytes;
    let config = ScanConfig {
        base_offset: Offset(base_offset),
        file_len_bytes,
        index_interval_bytes,
        max_batch_bytes,
        expected_leader_epoch,
        window_bytes,
        offsets: OffsetRule::Dense,
    };
    let outcome = scan_slice(config, &segment);
    let whole = scan_slice(
        ScanConfig {
            // One read of the whole file as the caller believes it: a short read then says
            // where it really ends, as the last small window does.
            window_bytes: usize::try_from(file_len_bytes)
                .map_or(usize::MAX, |n| n.max(HEADER_BYTES)),
            ..config
        },
        &segment,
    );
    assert_eq!(outcome, whole, "the outcome depends on the window size");

    let valid_len = usize::try_from(outcome.valid_len_bytes).expect("within the slice");
    assert!(valid_len <= segment.len());
    assert!(outcome.stop_at >= outcome.valid_len_bytes);
    if outcome.stop == StopReason::CleanEnd {
        assert_eq!(valid_len, segment.len());
    }
    let valid = &segment[..valid_len];
    let opts = ValidateOptions {
        max_batch_bytes,
        walk_records: true,
        offsets: OffsetRule::Compacted,
    };
    let mut next = Offset(base_offset);
    let mut count = 0u64;
    let mut max_timestamp_ms = -1i64;
    for view in BatchIter::new(valid).with_options(opts) {
        let view = view.expect("the valid prefix is whole valid batches (I3)");
        assert_eq!(view.header.base_offset, next, "offsets dense (I1)");
        assert_eq!(view.header.partition_leader_epoch, expected_leader_epoch);
        assert_batch_iterates_with(view.bytes, OffsetRule::Compacted);
        next = view.header.next_offset();
        max_timestamp_ms = max_timestamp_ms.max(view.header.max_timestamp);
        count += 1;
    }
    assert_eq!(count, outcome.batches_count);
    assert_eq!(next, outcome.next_offset);
    assert_eq!(max_timestamp_ms, outcome.max_timestamp_ms);

    let index_bytes = index::encode_all(&outcome.index_entries);
    let entries = index::validate(&index_bytes, outcome.valid_len_bytes)
        .expect("the rebuilt offset index is valid (I4)");
    let next_relative = u64::try_from(outcome.next_offset.0 - base_offset).expect("no overflow");
    let time_bytes = time_index::encode_all(&outcome.time_index_entries);
    let time_entries = time_index::validate(&time_bytes, next_relative)
        .expect("the rebuilt time index is valid (I4)");
    time_index::check_against_offset_index(&time_entries, &entries)
        .expect("time entries sit at offset index placements");

    if valid_len > 0 {
        let end = FilePos(u32::try_from(valid_len).expect("scanner positions fit 32 bits (I6)"));
        for target_ms in [i64::MIN, max_timestamp_ms / 2, max_timestamp_ms, i64::MAX] {
            let small = search_slice(valid, target_ms, Offset(base_offset), FilePos(0), end, 61);
            let large = search_slice(
                valid,
                target_ms,
                Offset(base_offset),
                FilePos(0),
                end,
                valid_len,
            );
            assert_eq!(small, large, "timestamp search depends on the window size");
            small.expect("the valid prefix searches without error");
        }
    }
}

/// An offset index file: `[log size: u32][index bytes]`. Asserts that [`index::validate`] and
/// [`index::check`] agree, and that a valid index loads, round-trips, looks up the floor entry,
/// truncates consistently and rebuilds by [`OffsetIndex::push`].
pub fn offset_index(data: &[u8]) {
    let mut input = Input::new(data);
    let log_size_bytes = u64::from(input.u32());
    let bytes = input.rest();
    let validated = index::validate(bytes, log_size_bytes);
    let checks = index::check(bytes, log_size_bytes);
    assert_eq!(validated.is_ok(), checks.all_passed(), "{checks:?}");
    let Ok(entries) = validated else {
        return;
    };
    assert_eq!(entries.len(), bytes.len() / index::ENTRY_BYTES);
    let loaded = OffsetIndex::from_bytes(bytes, log_size_bytes).expect("same checks");
    assert_eq!(loaded.entries(), &entries[..]);
    assert_eq!(loaded.encode(), bytes);
    let mut rebuilt = OffsetIndex::new();
    for (i, entry) in entries.iter().enumerate() {
        rebuilt.push(*entry);
        assert_eq!(loaded.lookup_entry(entry.relative_offset), Some(*entry));
        if let Some(below) = entry.relative_offset.0.checked_sub(1) {
            let floor = loaded.lookup_entry(RelativeOffset(below));
            assert_eq!(floor, i.checked_sub(1).map(|p| entries[p]));
        }
        let mut truncated = loaded.clone();
        truncated.truncate_to_position(entry.position);
        assert_eq!(truncated.entries(), &entries[..i]);
    }
    assert_eq!(rebuilt, loaded);
    let _: Option<IndexEntry> = loaded.lookup_entry(RelativeOffset(u32::MAX));
}

/// A time index file: `[next relative offset: u32][index bytes]`. Asserts that a valid time
/// index loads, round-trips, rebuilds by [`TimeIndex::push`] and looks up the floor entry by
/// timestamp.
pub fn time_index(data: &[u8]) {
    let mut input = Input::new(data);
    let next_relative_offset = u64::from(input.u32());
    let bytes = input.rest();
    let Ok(entries) = time_index::validate(bytes, next_relative_offset) else {
        return;
    };
    assert_eq!(entries.len(), bytes.len() / time_index::TIME_ENTRY_BYTES);
    let loaded = TimeIndex::from_bytes(bytes, next_relative_offset).expect("same checks");
    assert_eq!(loaded.entries(), &entries[..]);
    assert_eq!(loaded.encode(), bytes);
    let mut rebuilt = TimeIndex::new();
    for (i, entry) in entries.iter().enumerate() {
        rebuilt.push(*entry);
        assert_eq!(loaded.lookup(entry.timestamp_ms), Some(*entry));
        let before = loaded.lookup(entry.timestamp_ms - 1);
        assert_eq!(before, i.checked_sub(1).map(|p| entries[p]));
    }
    assert_eq!(rebuilt, loaded);
}
