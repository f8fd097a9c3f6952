//! Compressing and decompressing a batch's records section, as Kafka clients do.
//!
//! Contract:
//! - Inputs: the uncompressed records section (from `BatchBuilder::records_bytes`), or a
//!   compressed one from a fetched batch, and a codec.
//! - Outputs: the bytes to hand to `BatchBuilder::build_with`, or the uncompressed records.
//! - Framing matches the Java client: gzip streams, Snappy in xerial framing (raw Snappy is
//!   accepted when decoding, as Java does), LZ4 frames with independent blocks, zstd frames.
//! - Never: produces more than `max_bytes` when decompressing (a small batch cannot inflate
//!   into an unbounded allocation, I10).

use std::io::{Read, Write};

use minikafka_core::record::Compression;

use crate::error::{Error, Result};

/// Xerial Snappy stream header, as written by snappy-java (and so by the Java client).
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block (snappy-java's default).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

fn err(codec: &str, e: impl std::fmt::Display) -> Error {
    Error::Compression(format!("{codec}: {e}"))
}

/// Compresses `records` with `codec`. `Compression::None` returns a copy.
pub fn compress(codec: Compression, records: &[u8]) -> Result<Vec<u8>> {
    match codec {
        Compression::None => Ok(records.to_vec()),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(
                Vec::with_capacity(records.len() / 2 + 32),
                flate2::Compression::default(),
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
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let mut enc = lz4::EncoderBuilder::new()
                .block_mode(lz4::BlockMode::Independent)
                .block_size(lz4::BlockSize::Max64KB)
                .level(4)
                .build(Vec::with_capacity(records.len() / 2 + 32))
                .map_err(|e| err("lz4", e))?;
            enc.write_all(records).map_err(|e| err("lz4", e))?;
            let (out, result) = enc.finish();
            result.map_err(|e| err("lz4", e))?;
            Ok(out)
        }
        Compression::Zstd => zstd::stream::encode_all(records, 3).map_err(|e| err("zstd", e)),
    }
}

/// Reads all of `reader` into a vector, failing if it yields more than `max_bytes`.
fn read_bounded(mut reader: impl Read, codec: &str, max_bytes: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let limit = max_bytes as u64 + 1;
    (&mut reader)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| err(codec, e))?;
    if out.len() > max_bytes {
        return Err(err(
            codec,
            format!("decompressed records exceed the limit of {max_bytes} bytes"),
        ));
    }
    Ok(out)
}

/// Decompresses a records section written with `codec`, producing at most `max_bytes`.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    match codec {
        Compression::None => {
            if data.len() > max_bytes {
                return Err(err("none", "records exceed the limit"));
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

fn snappy_block(block: &[u8], out: &mut Vec<u8>, max_bytes: usize) -> Result<()> {
    let len = snap::raw::decompress_len(block).map_err(|e| err("snappy", e))?;
    if len > max_bytes.saturating_sub(out.len()) {
        return Err(err(
            "snappy",
            format!("decompressed records exceed the limit of {max_bytes} bytes"),
        ));
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
        if rest.len() < 4 {
            return Err(err("snappy", "truncated xerial block length"));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        rest = &rest[4..];
        if len > rest.len() {
            return Err(err("snappy", "xerial block runs past the data"));
        }
        snappy_block(&rest[..len], &mut out, max_bytes)?;
        rest = &rest[len..];
    }
    Ok(out)
}

/// Parses a codec name as Kafka's `compression.type` spells it.
pub fn parse_codec(name: &str) -> Result<Compression> {
    match name.to_ascii_lowercase().as_str() {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(Error::InvalidArgument(format!(
            "unknown compression {other:?} (none, gzip, snappy, lz4, zstd)"
        ))),
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
                matches!(result, Err(Error::Compression(_))),
                "{codec:?} must refuse to inflate past the limit"
            );
        }
    }

    #[test]
    fn kafka_protocol_snappy_and_raw_snappy_decode() {
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
    fn codec_names_parse() {
        assert_eq!(parse_codec("ZSTD").expect("zstd"), Compression::Zstd);
        assert!(parse_codec("brotli").is_err());
    }
}
