//! A response encoded in parts, so that large shared byte strings (a Fetch response's record
//! batches, read from the log) are sent as they are instead of copied into the frame.
//!
//! Contract:
//! - Input: a response, its version and correlation id, and `shared`: the [`Bytes`] the
//!   response holds (by reference count) that should not be copied, in encoding order.
//! - Output: the frame as a list of parts whose concatenation is exactly what
//!   [`encode_response_for`](super::encode_response_for) writes; parts alternate between
//!   bytes encoded here and clones of `shared` (no copy: a reference count each).
//! - How: `kafka-protocol` writes a bytes field with `put_slice(&field)`. [`SplicingBuf`]
//!   compares each `put_slice`'s pointer and length with the next `shared` entry: the same
//!   memory is the same bytes, so a match is sent by reference and anything else is copied.
//!   The output is therefore correct whatever matches; only the number of copies depends on it.
//! - Never: panics (a gap that reaches into a finished part, which the message encoders do
//!   not use, makes it fall back to one copied part), or reorders bytes.

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use super::{encode_error, encode_response_for, frame, ResponseEncodeError};

/// Shared slices shorter than this are copied: a separate part costs an I/O vector entry (and,
/// where the stream cannot write vectors, a system call), more than copying a few KiB.
pub const SPLICE_MIN_BYTES: usize = 4 * 1024;

/// Encodes like [`encode_response_for`] but leaves every entry of `shared` of at least
/// [`SPLICE_MIN_BYTES`] uncopied, as its own part.
pub fn encode_response_spliced<R: Encodable + HeaderVersion>(
    api_version: i16,
    correlation_id: i32,
    response: &R,
    shared: Vec<Bytes>,
) -> Result<Vec<Bytes>, ResponseEncodeError> {
    let header_version = R::header_version(api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_bytes = header.compute_size(header_version).map_err(encode_error)?;
    let body_bytes = response.compute_size(api_version).map_err(encode_error)?;
    let size_bytes = header_bytes.saturating_add(body_bytes);
    let Ok(size_prefix) = i32::try_from(size_bytes) else {
        return Err(ResponseEncodeError::TooLarge { size_bytes });
    };
    let shared: Vec<Bytes> = shared
        .into_iter()
        .filter(|b| b.len() >= SPLICE_MIN_BYTES)
        .collect();
    let spliced_bytes: usize = shared.iter().map(Bytes::len).sum();
    let copied_bytes = (frame::SIZE_PREFIX_BYTES + size_bytes).saturating_sub(spliced_bytes);
    let mut buf = SplicingBuf {
        current: BytesMut::with_capacity(copied_bytes),
        finished_bytes: 0,
        parts: Vec::with_capacity(2 * shared.len() + 1),
        shared,
        next_shared: 0,
        fell_back: false,
        scratch: Vec::new(),
    };
    buf.put_i32(size_prefix);
    header
        .encode(&mut buf, header_version)
        .map_err(encode_error)?;
    response
        .encode(&mut buf, api_version)
        .map_err(encode_error)?;
    if buf.fell_back {
        return encode_response_for(api_version, correlation_id, response).map(|b| vec![b]);
    }
    let parts = buf.finish();
    let written: usize = parts.iter().map(Bytes::len).sum();
    if written != frame::SIZE_PREFIX_BYTES + size_bytes {
        return Err(ResponseEncodeError::Encode {
            message: format!(
                "encoded {written} bytes for a frame of {}",
                frame::SIZE_PREFIX_BYTES + size_bytes
            ),
        });
    }
    Ok(parts)
}

/// A [`ByteBufMut`] that copies what it is given into the current part, except the slices it
/// recognises as the next shared [`Bytes`], which become parts of their own.
struct SplicingBuf {
    /// The part being written.
    current: BytesMut,
    /// Bytes in `parts`.
    finished_bytes: usize,
    parts: Vec<Bytes>,
    shared: Vec<Bytes>,
    next_shared: usize,
    /// A gap reached into a finished part: the output is discarded and encoded plainly.
    fell_back: bool,
    /// Where such a gap's writes go, so that the encoder can finish without a panic.
    scratch: Vec<u8>,
}

impl SplicingBuf {
    fn finish(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.parts.push(self.current.freeze());
        }
        self.parts
    }

    /// The next shared entry when `src` is that entry's memory.
    fn shared_match(&self, src: &[u8]) -> Option<Bytes> {
        let next = self.shared.get(self.next_shared)?;
        (next.len() == src.len() && std::ptr::eq(next.as_ptr(), src.as_ptr())).then(|| next.clone())
    }
}

// SAFETY: every method delegates to `current`, a `BytesMut`, whose own implementation upholds
// the trait's contract (`chunk_mut` and `advance_mut` describe the same buffer).
unsafe impl BufMut for SplicingBuf {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut()`, which is `current`'s.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.shared_match(src) {
            Some(shared) => {
                self.next_shared += 1;
                if !self.current.is_empty() {
                    self.finished_bytes += self.current.len();
                    self.parts.push(self.current.split().freeze());
                }
                self.finished_bytes += shared.len();
                self.parts.push(shared);
            }
            None => self.current.put_slice(src),
        }
    }
}

impl ByteBufMut for SplicingBuf {
    fn offset(&self) -> usize {
        self.finished_bytes + self.current.len()
    }

    fn seek(&mut self, offset: usize) {
        match offset.checked_sub(self.finished_bytes) {
            Some(local) => self.current.resize(local, 0),
            None => self.fell_back = true,
        }
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let len = r.end.saturating_sub(r.start);
        match r.start.checked_sub(self.finished_bytes) {
            Some(local) if local + len <= self.current.len() => {
                &mut self.current[local..local + len]
            }
            _ => {
                self.fell_back = true;
                self.scratch.clear();
                self.scratch.resize(len, 0);
                &mut self.scratch[..]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    /// A response of `sizes.len()` partitions whose records are `sizes[i]` bytes each (in two
    /// topics), with the records' `Bytes` in encoding order.
    fn response(sizes: &[usize]) -> (FetchResponse, Vec<Bytes>) {
        let mut r = FetchResponse::default();
        let mut shared = Vec::new();
        for (t, chunk) in sizes.chunks(2).enumerate() {
            let mut topic = FetchableTopicResponse::default();
            topic.topic = TopicName(StrBytes::from_string(format!("topic-{t}")));
            topic.topic_id = uuid::Uuid::from_u128(t as u128 + 1);
            for (p, &size) in chunk.iter().enumerate() {
                let mut data = PartitionData::default();
                data.partition_index = p as i32;
                data.high_watermark = 10 + p as i64;
                let records = Bytes::from((0..size).map(|i| (i * 7 + p) as u8).collect::<Vec<_>>());
                shared.push(records.clone());
                data.records = Some(records);
                topic.partitions.push(data);
            }
            r.responses.push(topic);
        }
        (r, shared)
    }

    /// Every Fetch version we serve: the parts concatenate to the plain encoding, and every
    /// records field of at least SPLICE_MIN_BYTES is a part of its own, sharing the log's
    /// memory (not copied).
    #[test]
    fn parts_concatenate_to_the_plain_encoding_and_share_large_records() {
        let sizes = [0, 100, SPLICE_MIN_BYTES, 70_000, SPLICE_MIN_BYTES - 1];
        for version in 4..=18 {
            let (r, shared) = response(&sizes);
            let plain = encode_response_for(version, 42, &r).expect("plain");
            let parts = encode_response_spliced(version, 42, &r, shared.clone()).expect("spliced");
            let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            assert_eq!(joined, plain[..], "v{version}");
            let large: Vec<&Bytes> = shared
                .iter()
                .filter(|b| b.len() >= SPLICE_MIN_BYTES)
                .collect();
            let spliced: Vec<&Bytes> = parts
                .iter()
                .filter(|p| {
                    large
                        .iter()
                        .any(|b| b.as_ptr() == p.as_ptr() && b.len() == p.len())
                })
                .collect();
            assert_eq!(spliced.len(), 2, "v{version}: {} parts", parts.len());
        }
    }

    /// Shared entries that are not the response's own memory (equal bytes elsewhere) are not
    /// matched: the output is copied and still exact.
    #[test]
    fn foreign_bytes_are_copied_not_matched() {
        let (r, shared) = response(&[SPLICE_MIN_BYTES * 2]);
        let foreign: Vec<Bytes> = shared.iter().map(|b| Bytes::from(b.to_vec())).collect();
        let plain = encode_response_for(12, 7, &r).expect("plain");
        let parts = encode_response_spliced(12, 7, &r, foreign).expect("spliced");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0], plain);
    }

    /// Gaps reaching into a finished part (not used by message encoders) fall back, no panic.
    #[test]
    fn a_gap_into_a_finished_part_falls_back() {
        let shared = Bytes::from(vec![1u8; SPLICE_MIN_BYTES]);
        let mut buf = SplicingBuf {
            current: BytesMut::new(),
            finished_bytes: 0,
            parts: Vec::new(),
            shared: vec![shared.clone()],
            next_shared: 0,
            fell_back: false,
            scratch: Vec::new(),
        };
        buf.put_u8(3);
        buf.put_slice(&shared);
        assert_eq!(buf.range(0..1).len(), 1);
        assert!(buf.fell_back);
    }
}
