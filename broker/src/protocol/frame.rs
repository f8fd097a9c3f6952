//! Kafka framing: a 4-byte big-endian size, then that many bytes of request.
//!
//! Contract:
//! - Inputs: whatever bytes the connection has read so far, in a `BytesMut` the caller owns.
//! - Outputs: `Ok(Some(frame))` with the frame's bytes (size prefix removed) split off the
//!   front of the buffer, `Ok(None)` when more bytes are needed, or a [`FrameError`] after which
//!   the connection must be closed (the stream can no longer be re-synchronised).
//! - Checks the size before anything is reserved: sizes of 0 or below and sizes above
//!   `max_frame_bytes` (Kafka's `socket.request.max.bytes`) are errors (I10).
//! - Never: reserves more than [`RESERVE_CHUNK_BYTES`] at a time for a frame still arriving
//!   (a 4-byte prefix alone never costs its full size in memory), copies a complete frame,
//!   panics, or performs I/O.

use bytes::{Buf, Bytes, BytesMut};

/// Kafka's default `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 104_857_600;

/// Most bytes [`FrameDecoder::decode`] reserves in one call for a frame still arriving.
pub const RESERVE_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes in the size prefix.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// A protocol a misdirected client may be speaking, guessed from the first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignProtocol {
    /// Plain-text HTTP (`GET `, `POST`, `PUT `, `HEAD`, ...).
    Http,
    /// A TLS handshake record (`16 03 ..`).
    Tls,
}

impl ForeignProtocol {
    /// Guesses from the first 4 bytes of a stream.
    pub fn sniff(prefix: [u8; 4]) -> Option<ForeignProtocol> {
        const HTTP: [&[u8; 4]; 8] = [
            b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN",
        ];
        if prefix[0] == 0x16 && prefix[1] == 0x03 {
            Some(ForeignProtocol::Tls)
        } else if HTTP.iter().any(|m| **m == prefix) {
            Some(ForeignProtocol::Http)
        } else {
            None
        }
    }
}

/// The size prefix is unacceptable; the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The size is 0 or negative.
    #[error("invalid frame size {size_bytes} (must be positive)")]
    NonPositiveSize {
        /// The size read from the prefix.
        size_bytes: i32,
    },
    /// The size exceeds `max_frame_bytes`.
    #[error("frame size {size_bytes} exceeds the maximum {max_bytes}{}", hint(*.looks_like))]
    TooLarge {
        /// The size read from the prefix.
        size_bytes: i32,
        /// The configured maximum.
        max_bytes: usize,
        /// The stream looks like this other protocol (a misconfigured client).
        looks_like: Option<ForeignProtocol>,
    },
}

fn hint(looks_like: Option<ForeignProtocol>) -> &'static str {
    match looks_like {
        Some(ForeignProtocol::Http) => " (looks like an HTTP request)",
        Some(ForeignProtocol::Tls) => " (looks like a TLS handshake; is the client using SSL?)",
        None => "",
    }
}

/// Splits a byte stream into Kafka frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    /// Largest accepted frame (size prefix value), Kafka's `socket.request.max.bytes`.
    pub max_frame_bytes: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
        }
    }
}

impl FrameDecoder {
    /// A decoder accepting frames of up to `max_frame_bytes` bytes.
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder { max_frame_bytes }
    }

    /// Checks the size prefix at the front of `buf`, if 4 bytes are there.
    pub fn peek_size(&self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(prefix) = buf.first_chunk::<SIZE_PREFIX_BYTES>() else {
            return Ok(None);
        };
        let size_bytes = i32::from_be_bytes(*prefix);
        if size_bytes <= 0 {
            return Err(FrameError::NonPositiveSize { size_bytes });
        }
        // size_bytes > 0, so the cast is exact.
        let size = size_bytes as usize;
        if size > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                size_bytes,
                max_bytes: self.max_frame_bytes,
                looks_like: ForeignProtocol::sniff(*prefix),
            });
        }
        Ok(Some(size))
    }

    /// Splits the next complete frame off `buf` (without its size prefix).
    ///
    /// Returns `Ok(None)` when the frame is not complete yet, having reserved at most
    /// [`RESERVE_CHUNK_BYTES`] more room in `buf` for the bytes still to come.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(size) = self.peek_size(buf)? else {
            return Ok(None);
        };
        // size <= max_frame_bytes, which a caller keeps far below usize::MAX.
        let total = SIZE_PREFIX_BYTES.saturating_add(size);
        if buf.len() < total {
            let missing = total - buf.len();
            buf.reserve(missing.min(RESERVE_CHUNK_BYTES));
            return Ok(None);
        }
        let mut frame = buf.split_to(total);
        frame.advance(SIZE_PREFIX_BYTES);
        Ok(Some(frame.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn splits_consecutive_frames_and_waits_for_partial_ones() {
        let dec = FrameDecoder::new(16);
        let mut stream = framed(b"abc");
        stream.extend(framed(b"defgh"));
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        // Feed one byte at a time.
        for b in stream {
            buf.extend_from_slice(&[b]);
            while let Some(f) = dec.decode(&mut buf).expect("valid") {
                frames.push(f);
            }
        }
        assert_eq!(
            frames,
            vec![Bytes::from_static(b"abc"), Bytes::from_static(b"defgh")]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_zero_negative_and_oversized_sizes_i10() {
        let dec = FrameDecoder::new(100);
        for (prefix, want) in [
            (0i32, FrameError::NonPositiveSize { size_bytes: 0 }),
            (-1, FrameError::NonPositiveSize { size_bytes: -1 }),
            (
                i32::MIN,
                FrameError::NonPositiveSize {
                    size_bytes: i32::MIN,
                },
            ),
            (
                101,
                FrameError::TooLarge {
                    size_bytes: 101,
                    max_bytes: 100,
                    looks_like: None,
                },
            ),
        ] {
            let mut buf = BytesMut::from(&prefix.to_be_bytes()[..]);
            assert_eq!(dec.decode(&mut buf), Err(want));
        }
        let mut ok = BytesMut::from(&100i32.to_be_bytes()[..]);
        assert_eq!(dec.decode(&mut ok), Ok(None));
    }

    #[test]
    fn hostile_size_reserves_at_most_a_chunk_i10() {
        let dec = FrameDecoder::default();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(DEFAULT_MAX_FRAME_BYTES as i32).to_be_bytes());
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert!(
            buf.capacity() <= SIZE_PREFIX_BYTES + RESERVE_CHUNK_BYTES + 64,
            "{}",
            buf.capacity()
        );
    }

    #[test]
    fn http_and_tls_are_recognised() {
        let dec = FrameDecoder::default();
        let mut http = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]);
        assert!(matches!(
            dec.decode(&mut http),
            Err(FrameError::TooLarge {
                looks_like: Some(ForeignProtocol::Http),
                ..
            })
        ));
        let mut tls = BytesMut::from(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00][..]);
        let err = dec.decode(&mut tls).expect_err("tls");
        assert!(matches!(
            err,
            FrameError::TooLarge {
                looks_like: Some(ForeignProtocol::Tls),
                ..
            }
        ));
        assert!(err.to_string().contains("TLS"));
    }
}
