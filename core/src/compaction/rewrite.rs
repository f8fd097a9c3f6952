//! Rewriting one batch without the records a cleaning drops, as Kafka does.
//!
//! Contract:
//! - Inputs: a validated stored batch ([`BatchView`]), a [`RecordsCodec`] for compressed
//!   batches, a bound on the decompressed size, and the verdict per record (normally
//!   [`super::retain::keep_record`]).
//! - Outputs: [`Filtered::Unchanged`] (nothing dropped: the original bytes are kept, never
//!   recompressed), [`Filtered::Removed`] (nothing kept: the batch goes, leaving an offset gap),
//!   or [`Filtered::Rewritten`]: the survivors' record bytes verbatim (each keeps its
//!   `offsetDelta` and `timestampDelta`) in a batch with the same header fields — base offset,
//!   `lastOffsetDelta`, timestamps, attributes (so the same codec, recompressed), producer id,
//!   epoch and base sequence — and new length, count and CRC (I1, I23).
//! - Control batches (transaction markers) are kept whole here; whether a marker stays, is
//!   stamped with a delete horizon or goes is [`super::markers`]' decision, the cleaner's to apply.
//! - A whole batch dropped loses nothing the log needs: an idempotent producer whose batches
//!   all went is forgotten, which is safe (an unknown producer is accepted at any sequence;
//!   only the deduplication of a retry of a batch that old is lost).
//! - Never: decompresses past `max_decompressed_bytes` (I10), reorders records, or accepts a
//!   decompressed section that breaks the batch's own count or offset rule.

use super::retain::{DropReason, RecordFacts, Verdict};
use crate::record::{
    rebuild_batch, BatchCheck, BatchError, BatchView, Compression, RecordIter, HEADER_BYTES,
};
use crate::types::Offset;

/// A codec failure, in the codec's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(pub String);

/// Compresses and decompresses records sections. Core does no compression itself; the broker
/// passes the codecs Kafka clients use.
pub trait RecordsCodec {
    /// Decompresses `data`, failing rather than producing more than `max_bytes`.
    fn decompress(
        &mut self,
        codec: Compression,
        data: &[u8],
        max_bytes: usize,
    ) -> Result<Vec<u8>, CodecError>;
    /// Compresses an uncompressed records section.
    fn compress(&mut self, codec: Compression, records: &[u8]) -> Result<Vec<u8>, CodecError>;
}

/// A codec that knows only uncompressed records (tests, and a broker built without codecs).
#[derive(Clone, Copy, Debug, Default)]
pub struct UncompressedOnly;

impl RecordsCodec for UncompressedOnly {
    fn decompress(&mut self, c: Compression, _: &[u8], _: usize) -> Result<Vec<u8>, CodecError> {
        Err(CodecError(format!("no codec for {c:?}")))
    }
    fn compress(&mut self, c: Compression, _: &[u8]) -> Result<Vec<u8>, CodecError> {
        Err(CodecError(format!("no codec for {c:?}")))
    }
}

/// Why a batch could not be filtered. The cleaner then leaves the partition as it is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The (decompressed) records do not parse, or break the count or offset rule.
    #[error("batch at offset {offset}: {source}")]
    Records {
        /// The batch's base offset.
        offset: Offset,
        /// What failed.
        source: BatchError,
    },
    /// The codec failed (or the records would inflate past the bound).
    #[error("batch at offset {offset}: {source}")]
    Codec {
        /// The batch's base offset.
        offset: Offset,
        /// What failed.
        source: CodecError,
    },
}

/// What became of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Every record kept: write the original bytes.
    Unchanged,
    /// No record kept: the batch goes.
    Removed,
    /// Some records kept: write these bytes instead.
    Rewritten(Vec<u8>),
}

/// Records kept and dropped, by reason, over one or more batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterCounts {
    /// Records kept.
    pub kept: u64,
    /// Records dropped because a later one has the same key.
    pub superseded: u64,
    /// Keyless records dropped.
    pub keyless: u64,
    /// Expired tombstones dropped.
    pub tombstones: u64,
    /// Records of aborted transactions dropped (`crate::partition::txn`, I68).
    pub aborted: u64,
    /// Transaction markers stamped with a delete horizon ([`super::markers`], I154).
    pub markers_stamped: u64,
    /// Transaction markers removed past their delete horizon (I154).
    pub markers_removed: u64,
    /// The smallest timestamp of a tombstone kept, or the equivalent of a marker's delete
    /// horizon ([`FilterCounts::note_expiry`]): when it expires, the log is due again.
    pub oldest_kept_tombstone_ms: Option<i64>,
}

impl FilterCounts {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: FilterCounts) {
        self.kept += other.kept;
        self.superseded += other.superseded;
        self.keyless += other.keyless;
        self.tombstones += other.tombstones;
        self.aborted += other.aborted;
        self.markers_stamped += other.markers_stamped;
        self.markers_removed += other.markers_removed;
        self.oldest_kept_tombstone_ms = match (
            self.oldest_kept_tombstone_ms,
            other.oldest_kept_tombstone_ms,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// Records dropped for any reason (a removed marker is one control record).
    pub fn dropped(&self) -> u64 {
        self.superseded + self.keyless + self.tombstones + self.aborted + self.markers_removed
    }

    /// Whether the cleaning changed any byte: records dropped or markers stamped.
    pub fn changed(&self) -> bool {
        self.dropped() > 0 || self.markers_stamped > 0
    }

    /// Notes a kept record or marker that expires at `horizon_ms` given `delete.retention.ms`
    /// (kept as the tombstone timestamp it is equivalent to, so the log is due again then).
    pub fn note_expiry(&mut self, horizon_ms: i64, delete_retention_ms: i64) {
        let as_timestamp = horizon_ms.saturating_sub(delete_retention_ms.max(0));
        let oldest = self.oldest_kept_tombstone_ms.get_or_insert(as_timestamp);
        *oldest = (*oldest).min(as_timestamp);
    }
}

/// The records of a batch, decompressed when needed, each with its facts — for the key map
/// and for [`filter_batch`]. Records are checked against the batch's count and the compacted
/// offset rule (strictly increasing deltas up to `lastOffsetDelta`).
pub fn batch_records(
    batch: &BatchView<'_>,
    codec: &mut dyn RecordsCodec,
    max_decompressed_bytes: usize,
) -> Result<DecodedRecords, FilterError> {
    let header = &batch.header;
    let offset = header.base_offset;
    let compression = header.compression().map_err(|bits| FilterError::Records {
        offset,
        source: BatchError {
            check: BatchCheck::UnknownCompression(bits),
            at: 21,
        },
    })?;
    let section = if compression == Compression::None {
        batch.records_bytes().to_vec()
    } else {
        codec
            .decompress(compression, batch.records_bytes(), max_decompressed_bytes)
            .map_err(|source| FilterError::Codec { offset, source })?
    };
    let mut spans = Vec::new();
    let mut iter = RecordIter::new(&section);
    let mut previous_delta = -1i64;
    while let Some(record) = iter.next() {
        let record = record.map_err(|mut source| {
            source.at += HEADER_BYTES;
            FilterError::Records { offset, source }
        })?;
        let end = section.len() - iter.remaining();
        if record.offset_delta <= previous_delta
            || record.offset_delta > i64::from(header.last_offset_delta)
        {
            return Err(FilterError::Records {
                offset,
                source: BatchError {
                    check: BatchCheck::OffsetDeltaMismatch {
                        index: spans.len() as i32,
                        offset_delta: record.offset_delta,
                    },
                    at: HEADER_BYTES + record.start,
                },
            });
        }
        previous_delta = record.offset_delta;
        let timestamp_ms = if header.is_log_append_time() {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(record.timestamp_delta)
        };
        spans.push(RecordSpan {
            start: record.start,
            end,
            offset: offset.plus(record.offset_delta),
            key: record.key.map(|k| subslice_range(&section, k)),
            value: record.value.map(|v| subslice_range(&section, v)),
            is_tombstone: record.value.is_none(),
            timestamp_ms,
        });
    }
    if spans.len() as i64 != i64::from(header.records_count) {
        return Err(FilterError::Records {
            offset,
            source: BatchError {
                check: BatchCheck::RecordCountMismatch {
                    found: spans.len() as i64,
                    declared: header.records_count,
                },
                at: HEADER_BYTES,
            },
        });
    }
    Ok(DecodedRecords {
        compression,
        section,
        spans,
    })
}

/// Position of `inner` (a subslice) within `outer`.
fn subslice_range(outer: &[u8], inner: &[u8]) -> (usize, usize) {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    (start, start + inner.len())
}

/// One record of a [`DecodedRecords`]: where its bytes lie and its facts.
#[derive(Clone, Copy, Debug)]
struct RecordSpan {
    start: usize,
    end: usize,
    offset: Offset,
    key: Option<(usize, usize)>,
    value: Option<(usize, usize)>,
    is_tombstone: bool,
    timestamp_ms: i64,
}

/// A batch's records section, uncompressed, with each record's extent and facts.
#[derive(Clone, Debug)]
pub struct DecodedRecords {
    compression: Compression,
    section: Vec<u8>,
    spans: Vec<RecordSpan>,
}

impl DecodedRecords {
    /// The records' facts, in offset order.
    pub fn facts(&self) -> impl Iterator<Item = RecordFacts<'_>> + Clone {
        self.spans.iter().map(|span| RecordFacts {
            offset: span.offset,
            key: span.key.map(|(s, e)| &self.section[s..e]),
            is_tombstone: span.is_tombstone,
            value: span.value.map(|(s, e)| &self.section[s..e]),
            timestamp_ms: span.timestamp_ms,
        })
    }

    /// The `(offset, key)` pairs of keyed records, for [`super::offset_map::KeyOffsetMap`].
    pub fn keyed(&self) -> impl Iterator<Item = (Offset, &[u8])> + Clone {
        self.facts().filter_map(|f| f.key.map(|k| (f.offset, k)))
    }

    /// Bytes of the uncompressed section (what a cleaning holds in memory for this batch).
    pub fn section_bytes(&self) -> usize {
        self.section.len()
    }
}

/// Filters one batch by `verdict` (see the module contract).
pub fn filter_batch(
    batch: &BatchView<'_>,
    codec: &mut dyn RecordsCodec,
    max_decompressed_bytes: usize,
    mut verdict: impl FnMut(&RecordFacts<'_>) -> Verdict,
) -> Result<(Filtered, FilterCounts), FilterError> {
    let mut counts = FilterCounts::default();
    if batch.header.is_control() {
        counts.kept += batch.header.records_count.max(0) as u64;
        return Ok((Filtered::Unchanged, counts));
    }
    let decoded = batch_records(batch, codec, max_decompressed_bytes)?;
    let mut kept = Vec::with_capacity(decoded.section.len());
    let mut kept_count = 0i32;
    for (span, facts) in decoded.spans.iter().zip(decoded.facts()) {
        match verdict(&facts) {
            Verdict::Keep => {
                if facts.is_tombstone {
                    let oldest = counts
                        .oldest_kept_tombstone_ms
                        .get_or_insert(facts.timestamp_ms);
                    *oldest = (*oldest).min(facts.timestamp_ms);
                }
                counts.kept += 1;
                kept_count += 1;
                kept.extend_from_slice(&decoded.section[span.start..span.end]);
            }
            Verdict::Drop(DropReason::Superseded) => counts.superseded += 1,
            Verdict::Drop(DropReason::Keyless) => counts.keyless += 1,
            Verdict::Drop(DropReason::TombstoneExpired) => counts.tombstones += 1,
        }
    }
    if counts.dropped() == 0 {
        return Ok((Filtered::Unchanged, counts));
    }
    if kept_count == 0 {
        return Ok((Filtered::Removed, counts));
    }
    let section = if decoded.compression == Compression::None {
        kept
    } else {
        codec
            .compress(decoded.compression, &kept)
            .map_err(|source| FilterError::Codec {
                offset: batch.header.base_offset,
                source,
            })?
    };
    Ok((
        Filtered::Rewritten(rebuild_batch(batch.bytes, &section, kept_count)),
        counts,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{validate_batch_with, BatchBuilder, BatchIter, NewRecord, ValidateOptions};

    /// A record's key and value, each nullable.
    type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

    fn batch(records: &[KeyValue<'_>], base: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.producer_id = 7;
        b.producer_epoch = 2;
        b.base_sequence = 40;
        for (i, (key, value)) in records.iter().enumerate() {
            b.push(&NewRecord {
                key: *key,
                value: *value,
                headers: vec![(b"h", Some(b"x"))],
                timestamp_ms: 1_000 + i as i64,
            });
        }
        b.build(Offset(base))
    }

    #[test]
    fn survivors_keep_offsets_and_producer_metadata() {
        let bytes = batch(
            &[
                (Some(b"a"), Some(b"1")),
                (Some(b"b"), Some(b"2")),
                (Some(b"a"), Some(b"3")),
                (Some(b"c"), None),
            ],
            100,
        );
        let view = BatchIter::new(&bytes).next().expect("one").expect("valid");
        let (out, counts) = filter_batch(&view, &mut UncompressedOnly, 1 << 20, |f| {
            if f.offset == Offset(100) || f.offset == Offset(103) {
                Verdict::Drop(DropReason::Superseded)
            } else {
                Verdict::Keep
            }
        })
        .expect("filters");
        assert_eq!((counts.kept, counts.superseded), (2, 2));
        let Filtered::Rewritten(new) = out else {
            panic!("rewritten expected, got {out:?}");
        };
        // Dense validation refuses it; the stored rule accepts it.
        assert!(validate_batch_with(&new, ValidateOptions::default()).is_err());
        let header = validate_batch_with(&new, ValidateOptions::stored()).expect("valid");
        let old = view.header;
        assert_eq!(header.base_offset, old.base_offset);
        assert_eq!(header.last_offset_delta, old.last_offset_delta);
        assert_eq!(header.base_timestamp, old.base_timestamp);
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (7, 2, 40)
        );
        assert_eq!(header.records_count, 2);
        let view = BatchIter::new(&new)
            .with_options(ValidateOptions::stored())
            .next()
            .expect("one")
            .expect("valid");
        let got: Vec<_> = view
            .records()
            .map(|r| {
                let r = r.expect("record");
                (
                    r.offset_delta,
                    r.value.map(<[u8]>::to_vec),
                    r.headers_count(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(1, Some(b"2".to_vec()), 1), (2, Some(b"3".to_vec()), 1)]
        );
    }

    #[test]
    fn all_or_nothing_dropped() {
        let bytes = batch(&[(Some(b"a"), Some(b"1")), (None, Some(b"2"))], 0);
        let view = BatchIter::new(&bytes).next().expect("one").expect("valid");
        let (out, _) =
            filter_batch(&view, &mut UncompressedOnly, 1 << 20, |_| Verdict::Keep).expect("ok");
        assert_eq!(out, Filtered::Unchanged);
        let (out, counts) = filter_batch(&view, &mut UncompressedOnly, 1 << 20, |f| {
            if f.key.is_none() {
                Verdict::Drop(DropReason::Keyless)
            } else {
                Verdict::Drop(DropReason::TombstoneExpired)
            }
        })
        .expect("ok");
        assert_eq!(out, Filtered::Removed);
        assert_eq!((counts.keyless, counts.tombstones), (1, 1));
    }

    #[test]
    fn compressed_without_a_codec_is_an_error_not_a_panic() {
        let mut b = BatchBuilder::new();
        b.push(&NewRecord {
            key: Some(b"k"),
            value: Some(b"v"),
            ..NewRecord::default()
        });
        let bytes = b.build_with(Offset(0), Compression::Gzip, b"not really gzip");
        let view = BatchIter::new(&bytes).next().expect("one").expect("valid");
        let err = filter_batch(&view, &mut UncompressedOnly, 1 << 20, |_| Verdict::Keep);
        assert!(matches!(err, Err(FilterError::Codec { .. })));
    }
}
