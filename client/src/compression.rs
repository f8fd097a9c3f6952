//! Compressing and decompressing a batch's records section, as Kafka clients do: the codecs
//! of `minikafka-codec` (shared with the broker) with this crate's [`Error`], and the codec
//! names of `compression.type`.
//!
//! Contract:
//! - Inputs: the uncompressed records section (from `BatchBuilder::records_bytes`), or a
//!   compressed one from a fetched batch, and a codec.
//! - Outputs: the bytes to hand to `BatchBuilder::build_with`, or the uncompressed records;
//!   every failure is [`Error::Compression`].
//! - Never: produces more than `max_bytes` when decompressing (a small batch cannot inflate
//!   into an unbounded allocation, I10; `minikafka_codec` holds the bound).

use minikafka_core::record::Compression;

use crate::error::{Error, Result};

fn compression_error(e: minikafka_codec::Error) -> Error {
    Error::Compression(e.to_string())
}

/// Compresses `records` with `codec`. `Compression::None` returns a copy.
pub fn compress(codec: Compression, records: &[u8]) -> Result<Vec<u8>> {
    minikafka_codec::compress(codec, records).map_err(compression_error)
}

/// Decompresses a records section written with `codec`, producing at most `max_bytes`.
pub fn decompress(codec: Compression, data: &[u8], max_bytes: usize) -> Result<Vec<u8>> {
    minikafka_codec::decompress(codec, data, max_bytes).map_err(compression_error)
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

    #[test]
    fn every_codec_round_trips_through_the_client_api() {
        let data: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in ALL {
            let packed = compress(codec, &data).expect("compress");
            assert_eq!(
                decompress(codec, &packed, data.len()).expect("decompress"),
                data
            );
        }
    }

    #[test]
    fn failures_are_compression_errors() {
        let data = vec![7u8; 4096];
        for codec in ALL {
            let packed = compress(codec, &data).expect("compress");
            let result = decompress(codec, &packed, data.len() - 1);
            assert!(
                matches!(result, Err(Error::Compression(_))),
                "{codec:?} must refuse to inflate past the limit: {result:?}"
            );
        }
        let garbage = decompress(Compression::Zstd, b"\x00\x01garbage-bytes", 1 << 20);
        assert!(matches!(garbage, Err(Error::Compression(_))), "{garbage:?}");
    }

    #[test]
    fn codec_names_parse() {
        assert_eq!(parse_codec("ZSTD").expect("zstd"), Compression::Zstd);
        assert!(parse_codec("brotli").is_err());
    }
}
