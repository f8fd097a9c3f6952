//! The bounded pre-check walker: proves a request body is well formed before it is decoded.
//!
//! Contract:
//! - Inputs: a [`MessageSchema`], the request's API version, and the body bytes (everything
//!   after the request header) exactly as they came off the socket.
//! - Outputs: a [`PrecheckReport`] (the length of the well-formed body, the bytes ignored after
//!   it, and an upper bound on the bytes `kafka-protocol`'s decoder will allocate for the
//!   body's arrays and tagged fields), or a [`PrecheckError`] naming the failed check and the
//!   byte offset (within the body) at which it failed.
//! - Checks: every array count times the smallest encoding of one element fits in the bytes
//!   left; every string/bytes length fits; varints are at most 5 bytes and fit in 32 bits;
//!   every tagged field's size fits and a known tagged field's value uses exactly that size;
//!   nulls appear only in nullable fields; nothing runs past the end (I10).
//! - Trailing bytes: bytes after a complete body are accepted and reported in
//!   [`PrecheckReport::trailing_bytes`], never walked. Apache Kafka ignores them too, and
//!   librdkafka 2.x sends 3 in every all-topics Metadata v9+ request. The caller decodes exactly
//!   `body[..body_bytes]`, so trailing bytes never reach a decoder or its budget.
//! - Never: allocates (it only reads), recurses deeper than the static schema, loops more often
//!   than there are bytes, panics on any input, or performs I/O.

use super::schema::{Field, Kind, MessageSchema, StructSchema};

/// Decoded bytes charged per tagged field entry (a `BTreeMap<i32, Bytes>` slot with node
/// slack), so that a body of many tiny tagged fields is budgeted too.
pub const TAGGED_FIELD_DECODED_BYTES: u64 = 96;

/// What a successful pre-check learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrecheckReport {
    /// Length of the well-formed body: the prefix of the walked bytes to decode.
    pub body_bytes: usize,
    /// Bytes after the body, ignored (never walked, never to be decoded).
    pub trailing_bytes: usize,
    /// Upper bound on the heap bytes the decoder allocates for this body's `Vec`s and tagged
    /// field maps (not counting `Bytes` views, which share the frame).
    pub decoded_bytes: u64,
}

/// A body failed the pre-check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} (at body byte {offset})")]
pub struct PrecheckError {
    /// Offset within the walked bytes at which the failed item starts.
    pub offset: usize,
    /// What was wrong.
    pub kind: PrecheckErrorKind,
}

/// The check that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrecheckErrorKind {
    /// A value needs more bytes than remain.
    #[error("{field}: needs {needed_bytes} bytes, {remaining_bytes} remain")]
    Truncated {
        /// Field being read.
        field: &'static str,
        /// Bytes the value needs.
        needed_bytes: u64,
        /// Bytes left in the enclosing region.
        remaining_bytes: usize,
    },
    /// An array (or tagged-field section) count cannot fit in the bytes left.
    #[error("{field}: {count} elements of at least {min_element_bytes} bytes exceed {remaining_bytes} remaining bytes")]
    CountTooLarge {
        /// Field being read.
        field: &'static str,
        /// Count read from the wire.
        count: u64,
        /// Smallest encoding of one element.
        min_element_bytes: u64,
        /// Bytes left in the enclosing region.
        remaining_bytes: usize,
    },
    /// A length or count below -1.
    #[error("{field}: negative length {length}")]
    NegativeLength {
        /// Field being read.
        field: &'static str,
        /// Length read from the wire.
        length: i64,
    },
    /// Null in a field that is never nullable.
    #[error("{field}: null in a non-nullable field")]
    UnexpectedNull {
        /// Field being read.
        field: &'static str,
    },
    /// An unsigned varint longer than 5 bytes or above `u32::MAX`.
    #[error("{field}: malformed unsigned varint")]
    MalformedVarint {
        /// Field being read.
        field: &'static str,
    },
    /// A known tagged field's value did not use exactly its declared size.
    #[error("tagged field {tag}: declared {size_bytes} bytes, value used {used_bytes}")]
    TaggedFieldSize {
        /// The tag.
        tag: u32,
        /// Size declared on the wire.
        size_bytes: usize,
        /// Bytes the value actually used.
        used_bytes: usize,
    },
    /// The schema does not cover this version.
    #[error("version {version} is not covered by the schema")]
    UnsupportedVersion {
        /// The version asked for.
        version: i16,
    },
}

/// Walks `body` as a request of `schema` at `version`; bytes after a complete body are
/// reported in [`PrecheckReport::trailing_bytes`], not refused.
pub fn precheck(
    schema: &MessageSchema,
    version: i16,
    body: &[u8],
) -> Result<PrecheckReport, PrecheckError> {
    if !schema.covers(version) {
        return Err(PrecheckError {
            offset: 0,
            kind: PrecheckErrorKind::UnsupportedVersion { version },
        });
    }
    let mut walker = Walker::new(body, version, schema.is_flexible(version));
    walker.walk_struct(schema.body)?;
    walker.finish()
}

/// Walks an opaque tagged-field section starting at `offset` of `bytes` (the request header's,
/// for example) and returns the offset just past it.
pub fn skip_tagged_fields(bytes: &[u8], offset: usize) -> Result<usize, PrecheckError> {
    static NONE: StructSchema = StructSchema {
        name: "tagged fields",
        fields: &[],
        decoded_bytes: 0,
    };
    let mut walker = Walker::new(bytes, 0, true);
    walker.pos = offset.min(bytes.len());
    walker.walk_tagged_fields(&NONE)?;
    Ok(walker.pos)
}

/// A cursor over `buf[pos..end]`; `end` shrinks while a tagged value is walked.
struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    version: i16,
    flexible: bool,
    decoded_bytes: u64,
}

impl<'a> Walker<'a> {
    fn new(buf: &'a [u8], version: i16, flexible: bool) -> Self {
        Walker {
            buf,
            pos: 0,
            end: buf.len(),
            version,
            flexible,
            decoded_bytes: 0,
        }
    }

    fn finish(self) -> Result<PrecheckReport, PrecheckError> {
        Ok(PrecheckReport {
            body_bytes: self.pos,
            trailing_bytes: self.end - self.pos,
            decoded_bytes: self.decoded_bytes,
        })
    }

    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn error(&self, offset: usize, kind: PrecheckErrorKind) -> PrecheckError {
        PrecheckError { offset, kind }
    }

    /// Consumes `n` bytes, or fails without moving.
    fn take(&mut self, n: u64, field: &'static str) -> Result<&'a [u8], PrecheckError> {
        let remaining = self.remaining();
        if n > remaining as u64 {
            return Err(self.error(
                self.pos,
                PrecheckErrorKind::Truncated {
                    field,
                    needed_bytes: n,
                    remaining_bytes: remaining,
                },
            ));
        }
        // n <= remaining <= usize::MAX, so the cast is exact.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn int16(&mut self, field: &'static str) -> Result<i16, PrecheckError> {
        let b = self.take(2, field)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn int32(&mut self, field: &'static str) -> Result<i32, PrecheckError> {
        let b = self.take(4, field)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An unsigned varint of at most 5 bytes whose value fits in 32 bits.
    fn uvarint(&mut self, field: &'static str) -> Result<u32, PrecheckError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..5u32 {
            let b = match self.take(1, field) {
                Ok(b) => b[0],
                Err(e) => {
                    self.pos = start;
                    return Err(e);
                }
            };
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(value)
                    .map_err(|_| self.error(start, PrecheckErrorKind::MalformedVarint { field }));
            }
        }
        Err(self.error(start, PrecheckErrorKind::MalformedVarint { field }))
    }

    /// Reads a length/count: `None` for null. `wide` selects i32 (arrays, bytes) over i16
    /// (strings) in non-flexible versions.
    fn length(
        &mut self,
        wide: bool,
        nullable: bool,
        field: &'static str,
    ) -> Result<Option<u64>, PrecheckError> {
        let start = self.pos;
        let raw: i64 = if self.flexible {
            i64::from(self.uvarint(field)?) - 1
        } else if wide {
            i64::from(self.int32(field)?)
        } else {
            i64::from(self.int16(field)?)
        };
        match raw {
            -1 if nullable => Ok(None),
            -1 => Err(self.error(start, PrecheckErrorKind::UnexpectedNull { field })),
            n if n < -1 => Err(self.error(
                start,
                PrecheckErrorKind::NegativeLength { field, length: n },
            )),
            // n >= 0 here.
            n => Ok(Some(n as u64)),
        }
    }

    fn walk_struct(&mut self, schema: &StructSchema) -> Result<(), PrecheckError> {
        for f in schema.fields {
            if f.tag.is_none() && f.present_in(self.version) {
                self.walk_field(f)?;
            }
        }
        if self.flexible {
            self.walk_tagged_fields(schema)?;
        }
        Ok(())
    }

    fn walk_field(&mut self, f: &Field) -> Result<(), PrecheckError> {
        self.walk_kind(&f.kind, f.name)
    }

    fn walk_kind(&mut self, kind: &Kind, field: &'static str) -> Result<(), PrecheckError> {
        match kind {
            Kind::Int8 | Kind::Bool => self.take(1, field).map(drop),
            Kind::Int16 => self.take(2, field).map(drop),
            Kind::Int32 => self.take(4, field).map(drop),
            Kind::Int64 | Kind::Float64 => self.take(8, field).map(drop),
            Kind::Uuid => self.take(16, field).map(drop),
            Kind::Str | Kind::NullableStr => {
                let nullable = matches!(kind, Kind::NullableStr);
                if let Some(n) = self.length(false, nullable, field)? {
                    // UTF-8 is checked by the decoder, which allocates nothing for it.
                    self.take(n, field)?;
                }
                Ok(())
            }
            Kind::Bytes | Kind::NullableBytes | Kind::Records => {
                let nullable = !matches!(kind, Kind::Bytes);
                if let Some(n) = self.length(true, nullable, field)? {
                    self.take(n, field)?;
                }
                Ok(())
            }
            Kind::Array(elem) => self.walk_array(elem, false, field),
            Kind::NullableArray(elem) => self.walk_array(elem, true, field),
            Kind::Struct(s) => self.walk_struct(s),
            Kind::NullableStruct(s) => {
                // The decoder reads a struct only after a marker of exactly 1.
                if self.take(1, field)?[0] == 1 {
                    self.walk_struct(s)?;
                }
                Ok(())
            }
        }
    }

    fn walk_array(
        &mut self,
        elem: &Kind,
        nullable: bool,
        field: &'static str,
    ) -> Result<(), PrecheckError> {
        let start = self.pos;
        let Some(count) = self.length(true, nullable, field)? else {
            return Ok(());
        };
        // An element never encodes in fewer than one byte as far as the budget is concerned.
        let min_element_bytes = elem.min_wire_bytes(self.version, self.flexible).max(1);
        let remaining = self.remaining();
        if count.saturating_mul(min_element_bytes) > remaining as u64 {
            return Err(self.error(
                start,
                PrecheckErrorKind::CountTooLarge {
                    field,
                    count,
                    min_element_bytes,
                    remaining_bytes: remaining,
                },
            ));
        }
        // count <= remaining bytes, so this product cannot overflow u64.
        self.decoded_bytes += count * elem.decoded_bytes() as u64;
        for _ in 0..count {
            self.walk_kind(elem, field)?;
        }
        Ok(())
    }

    fn walk_tagged_fields(&mut self, schema: &StructSchema) -> Result<(), PrecheckError> {
        const FIELD: &str = "tagged fields";
        let start = self.pos;
        let count = u64::from(self.uvarint(FIELD)?);
        let remaining = self.remaining();
        // Each entry is at least a 1-byte tag and a 1-byte size.
        if count.saturating_mul(2) > remaining as u64 {
            return Err(self.error(
                start,
                PrecheckErrorKind::CountTooLarge {
                    field: FIELD,
                    count,
                    min_element_bytes: 2,
                    remaining_bytes: remaining,
                },
            ));
        }
        self.decoded_bytes += count * TAGGED_FIELD_DECODED_BYTES;
        for _ in 0..count {
            let tag = self.uvarint(FIELD)?;
            let size_at = self.pos;
            let size = self.uvarint(FIELD)?;
            let value_start = self.pos;
            self.take(u64::from(size), FIELD)?;
            let value_end = self.pos;
            if let Some(known) = schema.tagged_field(tag, self.version) {
                // Walk the value inside exactly its declared region: the decoder reads a known
                // tag's value by its type and ignores the size.
                self.pos = value_start;
                let saved_end = self.end;
                self.end = value_end;
                let walked = self.walk_field(known);
                self.end = saved_end;
                walked?;
                if self.pos != value_end {
                    return Err(self.error(
                        size_at,
                        PrecheckErrorKind::TaggedFieldSize {
                            tag,
                            size_bytes: value_end - value_start,
                            used_bytes: self.pos - value_start,
                        },
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::schema::{schema_for, METADATA};
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn metadata_v0_huge_count_is_rejected_before_decode_i10() {
        let err = precheck(&METADATA, 0, &[0x7f, 0xff, 0xff, 0xff]).expect_err("huge count");
        assert_eq!(err.offset, 0);
        assert!(matches!(
            err.kind,
            PrecheckErrorKind::CountTooLarge {
                count: 0x7fff_ffff,
                ..
            }
        ));
    }

    #[test]
    fn metadata_v0_null_topics_is_allowed_by_walker() {
        // Nullability by version is the decoder's business; the walker only bounds sizes.
        let report = precheck(&METADATA, 0, &[0xff, 0xff, 0xff, 0xff]).expect("null");
        assert_eq!(report.decoded_bytes, 0);
    }

    #[test]
    fn negative_count_is_rejected() {
        let err = precheck(&METADATA, 0, &[0xff, 0xff, 0xff, 0xfe]).expect_err("negative");
        assert!(matches!(
            err.kind,
            PrecheckErrorKind::NegativeLength { length: -2, .. }
        ));
    }

    #[test]
    fn trailing_bytes_are_reported_and_never_walked() {
        // Metadata v0: an empty topics array, then junk that would fail any walk (a negative
        // count, a huge count): ignored, and excluded from the body.
        let body = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 0x7f, 0xff, 0xff, 0xff];
        let report = precheck(&METADATA, 0, &body).expect("trailing bytes are ignored");
        assert_eq!(
            report,
            PrecheckReport {
                body_bytes: 4,
                trailing_bytes: 8,
                decoded_bytes: 0
            }
        );
        let exact = precheck(&METADATA, 0, &body[..4]).expect("exact body");
        assert_eq!((exact.body_bytes, exact.trailing_bytes), (4, 0));
    }

    #[test]
    fn librdkafka_all_topics_metadata_v13_body_has_3_trailing_bytes() {
        // librdkafka 2.12 writes a 4-byte zero placeholder for the topics count and, for "all
        // topics" at v9+, keeps it: 0x00 (null compact array) + 3 zero bytes, which parse as
        // allow_auto_topic_creation, include_topic_authorized_operations and an empty tagged
        // section; its real bools and tagged section follow and are ignored (as Kafka does).
        let body = [0, 0, 0, 0, 1, 1, 0];
        let report = precheck(&METADATA, 13, &body).expect("librdkafka body");
        assert_eq!((report.body_bytes, report.trailing_bytes), (4, 3));
    }

    #[test]
    fn flexible_varints_are_bounded() {
        // Metadata v9: compact array count as a 6-byte varint.
        let err = precheck(&METADATA, 9, &[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).expect_err("long");
        assert!(matches!(
            err.kind,
            PrecheckErrorKind::MalformedVarint { .. }
        ));
        // 5 bytes but above u32::MAX.
        let err = precheck(&METADATA, 9, &[0xff, 0xff, 0xff, 0xff, 0x7f]).expect_err("big");
        assert!(matches!(
            err.kind,
            PrecheckErrorKind::MalformedVarint { .. }
        ));
        // Truncated varint.
        let err = precheck(&METADATA, 9, &[0x80]).expect_err("short");
        assert!(matches!(err.kind, PrecheckErrorKind::Truncated { .. }));
    }

    #[test]
    fn tagged_section_counts_and_sizes_are_bounded() {
        let schema = schema_for(ApiKey::DescribeCluster).expect("covered");
        // v0: bool, then tagged section claiming 1000 fields in 2 bytes.
        let err = precheck(schema, 0, &[0, 0xe8, 0x07]).expect_err("count");
        assert!(matches!(err.kind, PrecheckErrorKind::CountTooLarge { .. }));
        // One field, tag 5, size 100, but only 1 byte follows.
        let err = precheck(schema, 0, &[0, 1, 5, 100, 0]).expect_err("size");
        assert!(matches!(err.kind, PrecheckErrorKind::Truncated { .. }));
        // One unknown field of 1 byte: fine.
        precheck(schema, 0, &[0, 1, 5, 1, 0xaa]).expect("opaque tagged field");
    }

    #[test]
    fn known_tagged_field_must_fill_its_declared_size() {
        let schema = schema_for(ApiKey::Fetch).expect("covered");
        // Fetch v12 body with tag 0 (cluster_id, compact nullable string) = "ab" but size 4.
        let mut body = vec![0u8; 4 + 4 + 4 + 4 + 1 + 4 + 4]; // replica..session_epoch
        body.extend_from_slice(&[1, 1, 1]); // topics, forgotten: empty; rack_id: ""
        body.extend_from_slice(&[1, 0, 4, 3, b'a', b'b', 0]);
        let err = precheck(schema, 12, &body).expect_err("size mismatch");
        assert!(matches!(
            err.kind,
            PrecheckErrorKind::TaggedFieldSize {
                tag: 0,
                size_bytes: 4,
                used_bytes: 3
            }
        ));
        let n = body.len();
        body[n - 5] = 3;
        body.pop();
        precheck(schema, 12, &body).expect("exact size");
    }

    #[test]
    fn skip_tagged_fields_returns_end_offset() {
        assert_eq!(skip_tagged_fields(&[9, 9, 0], 2), Ok(3));
        assert_eq!(skip_tagged_fields(&[1, 7, 2, 0xaa, 0xbb, 0xcc], 0), Ok(5));
        assert!(skip_tagged_fields(&[1, 7, 9, 0xaa], 0).is_err());
    }
}
