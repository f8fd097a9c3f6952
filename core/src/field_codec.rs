//! The field encoding of Kafka's coordinator records (the keys and values of
//! `__consumer_offsets` and `__transaction_state`): Kafka's generated-message encoding,
//! classic (int16/int32 lengths) or flexible (unsigned-varint lengths plus one, tagged
//! fields), shared by `group::records` and `txn::records`.
//!
//! Contract:
//! - [`FieldWriter`] starts with the schema version and appends fields; it never fails.
//!   Strings longer than `i16::MAX` bytes are cut at the last character boundary below it
//!   (the coordinators refuse such names before they reach a record, so nothing is cut in
//!   practice; the cut only keeps a broken caller from writing an undecodable record).
//! - [`FieldReader`] reads untrusted bytes: every read checks the bytes present first, and a
//!   count is checked against the bytes left before anything is sized by it (I10). A damaged
//!   or hostile field is a [`FieldError`], never a panic; each record module turns it into
//!   its own error (`From<FieldError>`).

use thiserror::Error;

/// Why a field could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FieldError {
    /// A field runs past the end of the record.
    #[error("record truncated: needed {needed} more bytes at byte {at}")]
    Truncated {
        /// Where the field starts.
        at: usize,
        /// How many bytes it needs beyond the end.
        needed: usize,
    },
    /// A length or count below −1 (or −1 where null is not allowed), a count larger than
    /// the bytes left allow, or a varint too long.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A string is not UTF-8.
    #[error("string is not UTF-8")]
    InvalidUtf8,
}

/// Writes a record's fields (see the module documentation).
#[derive(Debug)]
pub struct FieldWriter {
    /// The bytes written so far.
    pub buf: Vec<u8>,
    /// Flexible encoding: varint lengths and tagged-field sections.
    pub flexible: bool,
}

impl FieldWriter {
    /// A writer whose first field is the schema `version`.
    pub fn new(version: i16, flexible: bool) -> FieldWriter {
        let mut w = FieldWriter {
            buf: Vec::with_capacity(64),
            flexible,
        };
        w.i16(version);
        w
    }

    /// The bytes written.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    /// An int8.
    pub fn i8(&mut self, v: i8) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// An int16.
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// An int32.
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// An int64.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    /// An unsigned varint.
    pub fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// A non-null string.
    pub fn string(&mut self, s: &str) {
        let mut end = s.len().min(i16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        if self.flexible {
            self.uvarint(end as u64 + 1);
        } else {
            self.i16(end as i16);
        }
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
    }

    /// A nullable string.
    pub fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None if self.flexible => self.uvarint(0),
            None => self.i16(-1),
        }
    }

    /// A non-null byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        if self.flexible {
            self.uvarint(b.len() as u64 + 1);
        } else {
            self.i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
        }
        self.buf.extend_from_slice(b);
    }

    /// An array's count; `None` is a null array.
    pub fn array_len(&mut self, n: Option<usize>) {
        match (n, self.flexible) {
            (None, true) => self.uvarint(0),
            (None, false) => self.i32(-1),
            (Some(n), true) => self.uvarint(n as u64 + 1),
            (Some(n), false) => self.i32(i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }

    /// A tagged-field section of `fields` (`(tag, data)`, in tag order); nothing when not
    /// flexible.
    pub fn tags(&mut self, fields: &[(u32, &[u8])]) {
        if !self.flexible {
            return;
        }
        self.uvarint(fields.len() as u64);
        for (tag, data) in fields {
            self.uvarint(u64::from(*tag));
            self.uvarint(data.len() as u64);
            self.buf.extend_from_slice(data);
        }
    }
}

/// A cursor over a record's untrusted bytes (see the module documentation).
#[derive(Debug)]
pub struct FieldReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Flexible encoding (from the record's first flexible version): varint lengths and
    /// tagged fields.
    pub flexible: bool,
}

impl<'a> FieldReader<'a> {
    /// A reader at the start of `bytes`, classic encoding.
    pub fn new(bytes: &'a [u8]) -> FieldReader<'a> {
        FieldReader {
            bytes,
            pos: 0,
            flexible: false,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FieldError> {
        if n > self.remaining() {
            return Err(FieldError::Truncated {
                at: self.pos,
                needed: n - self.remaining(),
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], FieldError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// An int8.
    pub fn i8(&mut self) -> Result<i8, FieldError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    /// An int16.
    pub fn i16(&mut self) -> Result<i16, FieldError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    /// An int32.
    pub fn i32(&mut self) -> Result<i32, FieldError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// An int64.
    pub fn i64(&mut self) -> Result<i64, FieldError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most five bytes, as Kafka reads them (a sixth byte is an
    /// error).
    pub fn uvarint(&mut self) -> Result<u64, FieldError> {
        let mut value = 0u64;
        for i in 0..5 {
            let b = self.take(1)?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(FieldError::InvalidLength(-1))
    }

    /// An unsigned varint that must fit a `u32`.
    pub fn uvarint_u32(&mut self) -> Result<u32, FieldError> {
        let value = self.uvarint()?;
        u32::try_from(value).map_err(|_| FieldError::InvalidLength(value as i64))
    }

    /// A length: `None` for null. Flexible: varint n+1; else int16 (`wide`: int32).
    fn length(&mut self, wide: bool) -> Result<Option<usize>, FieldError> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        match n {
            -1 => Ok(None),
            n if n < -1 => Err(FieldError::InvalidLength(n)),
            n => Ok(Some(n as usize)),
        }
    }

    /// A nullable string.
    pub fn nullable_string(&mut self) -> Result<Option<String>, FieldError> {
        match self.length(false)? {
            None => Ok(None),
            Some(n) => {
                let raw = self.take(n)?;
                std::str::from_utf8(raw)
                    .map(|s| Some(s.to_owned()))
                    .map_err(|_| FieldError::InvalidUtf8)
            }
        }
    }

    /// A non-null string (null is `InvalidLength(-1)`).
    pub fn string(&mut self) -> Result<String, FieldError> {
        self.nullable_string()?.ok_or(FieldError::InvalidLength(-1))
    }

    /// A byte string (null reads as empty).
    pub fn bytes(&mut self) -> Result<Vec<u8>, FieldError> {
        match self.length(true)? {
            None => Ok(Vec::new()),
            Some(n) => Ok(self.take(n)?.to_vec()),
        }
    }

    /// An array count (null reads as 0), checked against the bytes left given each
    /// element's smallest size, so a hostile count cannot size an allocation (I10); a count
    /// too large is `Truncated`.
    pub fn array_len(&mut self, min_element_bytes: usize) -> Result<usize, FieldError> {
        let n = self.length(true)?.unwrap_or(0);
        let needed = n.saturating_mul(min_element_bytes.max(1));
        if needed > self.remaining() {
            return Err(FieldError::Truncated {
                at: self.pos,
                needed: needed - self.remaining(),
            });
        }
        Ok(n)
    }

    /// A nullable array's count, checked like [`array_len`](Self::array_len); a count too
    /// large is `InvalidLength(count)`.
    pub fn nullable_array_len(&mut self, min_entry: usize) -> Result<Option<usize>, FieldError> {
        let count: i64 = if self.flexible {
            i64::from(self.uvarint_u32()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        if count == -1 {
            return Ok(None);
        }
        let fits = usize::try_from(count)
            .ok()
            .filter(|n| n.saturating_mul(min_entry) <= self.remaining());
        fits.map(Some).ok_or(FieldError::InvalidLength(count))
    }

    /// A tagged-field section: each field goes to `on_field(tag, size, data)`. Nothing is
    /// read when not flexible.
    pub fn tags<E: From<FieldError>>(
        &mut self,
        mut on_field: impl FnMut(u32, usize, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint_u32()? as usize;
        // Each field takes at least two bytes (its tag and its size).
        if count.saturating_mul(2) > self.remaining() {
            return Err(FieldError::InvalidLength(count as i64).into());
        }
        for _ in 0..count {
            let tag = self.uvarint_u32()?;
            let size = self.uvarint_u32()? as usize;
            let data = self.take(size)?;
            on_field(tag, size, data)?;
        }
        Ok(())
    }

    /// Skips a tagged-field section (nothing when not flexible).
    pub fn skip_tags(&mut self) -> Result<(), FieldError> {
        self.tags(|_, _, _| Ok::<(), FieldError>(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_classic_and_flexible() {
        for flexible in [false, true] {
            let mut w = FieldWriter::new(3, flexible);
            w.i8(-2);
            w.i32(7);
            w.i64(-9);
            w.string("héllo");
            w.nullable_string(None);
            w.bytes(b"\x00\x01");
            w.array_len(None);
            w.array_len(Some(2));
            w.tags(&[(1, &[9, 9])]);
            let bytes = w.finish();
            let mut r = FieldReader::new(&bytes);
            r.flexible = flexible;
            assert_eq!(r.i16(), Ok(3));
            assert_eq!(r.i8(), Ok(-2));
            assert_eq!(r.i32(), Ok(7));
            assert_eq!(r.i64(), Ok(-9));
            assert_eq!(r.string().as_deref(), Ok("héllo"));
            assert_eq!(r.nullable_string(), Ok(None));
            assert_eq!(r.bytes(), Ok(vec![0, 1]));
            assert_eq!(r.nullable_array_len(0), Ok(None));
            assert_eq!(r.nullable_array_len(0), Ok(Some(2)));
            let mut seen = Vec::new();
            r.tags(|tag, size, data| {
                seen.push((tag, size, data.to_vec()));
                Ok::<(), FieldError>(())
            })
            .expect("tags");
            assert_eq!(
                seen,
                if flexible {
                    vec![(1, 2, vec![9, 9])]
                } else {
                    vec![]
                }
            );
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn long_strings_are_cut_at_a_character_boundary() {
        let s = "é".repeat(20_000);
        let mut w = FieldWriter::new(0, false);
        w.string(&s);
        let bytes = w.finish();
        let mut r = FieldReader::new(&bytes);
        r.i16().expect("version");
        let back = r.string().expect("decodes");
        assert!(back.len() <= i16::MAX as usize && s.starts_with(&back));
    }

    #[test]
    fn hostile_fields_are_errors_before_allocating() {
        let mut r = FieldReader::new(&[0x7f, 0xff]);
        assert!(matches!(r.string(), Err(FieldError::Truncated { .. })));
        assert_eq!(
            FieldReader::new(&[0xff, 0xfe]).string(),
            Err(FieldError::InvalidLength(-2))
        );
        assert_eq!(
            FieldReader::new(&[0xff, 0xff]).string(),
            Err(FieldError::InvalidLength(-1))
        );
        assert_eq!(
            FieldReader::new(&[0, 1, 0xff]).string(),
            Err(FieldError::InvalidUtf8)
        );
        assert!(matches!(
            FieldReader::new(&i32::MAX.to_be_bytes()).array_len(1),
            Err(FieldError::Truncated { .. })
        ));
        assert_eq!(
            FieldReader::new(&i32::MAX.to_be_bytes()).nullable_array_len(1),
            Err(FieldError::InvalidLength(i64::from(i32::MAX)))
        );
        let mut six = FieldReader::new(&[0xff; 6]);
        six.flexible = true;
        assert_eq!(six.uvarint(), Err(FieldError::InvalidLength(-1)));
        let mut tags = FieldReader::new(&[100]);
        tags.flexible = true;
        assert_eq!(tags.skip_tags(), Err(FieldError::InvalidLength(100)));
    }
}
