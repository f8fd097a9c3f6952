//! Compressing and decompressing a record batch's records section with the codecs Kafka
//! clients use. The broker (the log cleaner, the key check on compacted topics) and the client
//! (producer, consumer) both use this crate, so neither depends on the other for it.
//!
//! Contract:
//! - Inputs: an uncompressed records section (what `BatchBuilder::records_bytes` holds), or a
//!   compressed one from a stored or fetched batch, and a codec.
//! - Outputs: the compressed bytes to hand to `BatchBuilder::build_with`, or the uncompressed
//!   records.
//! - Framing matches the Java client: gzip streams, Snappy in xerial framing (raw Snappy is
//!   accepted when decoding, as Java does), LZ4 frames with independent blocks, zstd frames.
//!   A batch recompressed here is read by every client that read the original.
//! - Never: produces or allocates for more than `max_bytes` of output when decompressing, so a
//!   few kilobytes of input cannot inflate into an unbounded allocation (I10). The bound is
//!   checked as the output grows (gzip, lz4, zstd stream decoders) or before allocating (a
//!   Snappy block's declared length).
//! - No I/O beyond memory, no clock.

use std::io::{Read, Write};

use minikafka_core::compaction::rewrite::{CodecError, RecordsCodec};
use minikafka_core::record::Compression;

/// Xerial Snappy stream header, as written by snappy-java (and so by the Java client).
pub const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block (snappy-java's default).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Why compressing or decompressing failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The decompressed records would exceed the caller's limit (a compression bomb, or a
    /// batch larger than the caller accepts).
    #[error("{codec}: decompressed records exceed the limit of {max_bytes} bytes")]
    TooLarge {
        /// The codec's name (`none`, `gzip`, `snappy`, `lz4`, `zstd`).
        codec: &'static str,
        /// The limit the caller gave.
        max_bytes: usize,
    },
    /// The codec refused the data (corrupt or truncated input) or failed to encode.
    #[error("{codec}: {message}")]
    Codec {
        /// The codec's name.
        codec: &'static str,
        /// What the codec said.
        message: String,
    },
}

/// Result of this crate's functions.
pub type Result<T> = std::result::Result<T, Error>;

fn err(codec: &'static str, e: impl std::fmt::Display) -> Error {
    Error::Codec {
        codec,
        message: e.to_string(),
    }
}

/// Compresses `records` with `codec` at the codec's default level. `Compression::None`
/// returns a copy.
pub fn compress(codec: Compression, records: &[u8]) -> Result<Vec<u8>> {
    compress_at(codec, records, None)
}

/// [`compress`] at a KIP-390 level (`compression.gzip.level` 1..=9, `compression.lz4.level`
/// 1..=17, `compression.zstd.level` as zstd takes it); `None`, or gzip's `-1`, is the
/// codec's default. Snappy has no level.
pub fn compress_at(codec: Compression, records: &[u8], level: Option<i32>) -> Result<Vec<u8>> {
    match codec {
        Compression::None => Ok(records.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(records.len() / 2 + 32),
                match level {
                    Some(l @ 0..=9) => flate2::Compression::new(l as u32),
                    _ => flate2::Compression::default(),
                },
            );
            enc.write_all(records).map_err(|e| err("gzip", e))?;
            enc.finish().map_err(|e| err("gzip", e))
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(records.len() / 2 + 32);
            out.extend_from_slice(XERIAL_MAGIC);
            let mut encoder = snap::raw::Encoder::new();
            for block in records.chunks(XERIAL_BLOCK_BYTES) {
                let compressed = encoder.compress_vec(block).map_err(|e| err("snappy", e))?;
                let len = u32::try_from(compressed.len()).map_err(|e| err("snappy", e))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut enc = lz4::EncoderBuilder::new()
                .block_mode(lz4::BlockMode::Independent)
                .block_size(lz4::BlockSize::Max64KB)
                .level(level.map_or(4, |l| l.clamp(0, 16) as u32))
                .build(Vec::with_capacity(records.len() / 2 + 32))
                .map_err(|e| err("lz4", e))?;
            enc.write_all(records).map_err(|e| err("lz4", e))?;
            let (out, result) = enc.finish();
            result.map_err(|e| err("lz4", e))?;
            Ok(out)
        }
        Compression::Zstd => {
            zstd::stream::encode_all(records, level.unwrap_or(3)).map_err(|e| err("zstd", e))
        }
    }
}

/// Decompresses a records section written with `codec`, producing at most `max_bytes`.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    match codec {
        Compression::None => {
            if data.len() > max_bytes {
                return Err(Error::TooLarge {
                    codec: "none",
                    max_bytes,
                });
            }
            Ok(data.to_vec())
        }
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(data), "gzip", max_bytes),
        Compression::Snappy => decompress_snappy(data, max_bytes),
        Compression::Lz4 => {
            let dec = lz4::Decoder::new(data).map_err(|e| err("lz4", e))?;
            read_bounded(dec, "lz4", max_bytes)
        }
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::new(data).map_err(|e| err("zstd", e))?;
            read_bounded(dec, "zstd", max_bytes)
        }
    }
}

/// Reads all of `reader` into a vector, failing once it yields more than `max_bytes`: reads
/// stop at `max_bytes + 1`, so the output never grows past the limit by more than a byte.
fn read_bounded(mut reader: impl Read, codec: &'static str, max_bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let limit = (max_bytes as u64).saturating_add(1);
    (&mut reader)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| err(codec, e))?;
    if out.len() > max_bytes {
        return Err(Error::TooLarge { codec, max_bytes });
    }
    Ok(out)
}

/// Appends one raw Snappy block to `out`, refusing before allocating when its declared length
/// would take `out` past `max_bytes`.
fn snappy_block(block: &[u8], out: &mut Vec<u8>, max_bytes: usize) -> Result<()> {
    let len = snap::raw::decompress_len(block).map_err(|e| err("snappy", e))?;
    if len > max_bytes.saturating_sub(out.len()) {
        return Err(Error::TooLarge {
            codec: "snappy",
            max_bytes,
        });
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| err("snappy", e))?;
    Ok(())
}

fn decompress_snappy(data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let Some(mut rest) = data.strip_prefix(&XERIAL_MAGIC[..]) else {
        snappy_block(data, &mut out, max_bytes)?;
        return Ok(out);
    };
    while !rest.is_empty() {
        let Some((len_bytes, after)) = rest.split_first_chunk::<4>() else {
            return Err(err("snappy", "truncated xerial block length"));
        };
        let len = u32::from_be_bytes(*len_bytes) as usize;
        if len > after.len() {
            return Err(err("snappy", "xerial block runs past the data"));
        }
        let (block, next) = after.split_at(len);
        snappy_block(block, &mut out, max_bytes)?;
        rest = next;
    }
    Ok(out)
}

/// Kafka's codecs as core's [`RecordsCodec`], for the log cleaner's rewrite and the broker's
/// key check of compressed batches; decompression bounded as above (I10).
#[derive(Clone, Copy, Debug, Default)]
pub struct KafkaCodecs;

impl RecordsCodec for KafkaCodecs {
    fn decompress(
        &mut self,
        codec: Compression,
        data: &[u8],
        max_bytes: usize,
    ) -> std::result::Result<Vec<u8>, CodecError> {
        decompress(codec, data, max_bytes).map_err(|e| CodecError(e.to_string()))
    }

    fn compress(
        &mut self,
        codec: Compression,
        records: &[u8],
    ) -> std::result::Result<Vec<u8>, CodecError> {
        compress(codec, records).map_err(|e| CodecError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample() -> Vec<u8> {
        (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let data = sample();
        for codec in ALL {
            let packed = compress(codec, &data).expect("compress");
            if codec != Compression::None {
                assert!(packed.len() < data.len(), "{codec:?} compresses");
            }
            let back = decompress(codec, &packed, data.len()).expect("decompress");
            assert_eq!(back, data, "{codec:?}");
        }
    }

    #[test]
    fn decompression_is_bounded() {
        let data = sample();
        for codec in ALL {
            let packed = compress(codec, &data).expect("compress");
            let result = decompress(codec, &packed, data.len() - 1);
            assert!(
                matches!(result, Err(Error::TooLarge { max_bytes, .. }) if max_bytes == data.len() - 1),
                "{codec:?} must refuse to inflate past the limit: {result:?}"
            );
        }
    }

    #[test]
    fn xerial_and_raw_snappy_decode() {
        // Raw (unframed) snappy is accepted, as the Java client accepts it.
        let data = b"hello hello hello hello".to_vec();
        let raw = snap::raw::Encoder::new()
            .compress_vec(&data)
            .expect("compress");
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1024).expect("raw"),
            data
        );
        let framed = compress(Compression::Snappy, &data).expect("framed");
        assert!(framed.starts_with(XERIAL_MAGIC));
        assert_eq!(
            decompress(Compression::Snappy, &framed, 1024).expect("framed"),
            data
        );
    }

    #[test]
    fn truncated_xerial_framing_fails_cleanly() {
        let framed = compress(Compression::Snappy, &sample()).expect("framed");
        for cut in [XERIAL_MAGIC.len() + 2, framed.len() - 1] {
            let result = decompress(Compression::Snappy, &framed[..cut], 1 << 20);
            assert!(
                matches!(
                    result,
                    Err(Error::Codec {
                        codec: "snappy",
                        ..
                    })
                ),
                "cut at {cut}: {result:?}"
            );
        }
    }

    #[test]
    fn garbage_fails_cleanly() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(
                decompress(codec, b"\x00\x01garbage-bytes", 1 << 20).is_err(),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn the_records_codec_is_the_same_codecs() {
        let data = sample();
        let mut codecs = KafkaCodecs;
        for codec in ALL {
            let packed = RecordsCodec::compress(&mut codecs, codec, &data).expect("compress");
            assert_eq!(
                decompress(codec, &packed, data.len()).expect("decompress"),
                data
            );
            let refused = RecordsCodec::decompress(&mut codecs, codec, &packed, data.len() - 1);
            assert!(refused.is_err(), "{codec:?}");
        }
    }
}
