//! The cleaner's [`RecordsCodec`]: the client crate's codecs (gzip, Snappy in xerial framing,
//! LZ4 frames, zstd), the same ones the Java client writes, so a recompressed batch is read
//! by every client that read the original.

use minikafka_core::compaction::rewrite::{CodecError, RecordsCodec};
use minikafka_core::record::Compression;

/// Kafka's codecs, bounded on decompression (I10).
#[derive(Clone, Copy, Debug, Default)]
pub struct KafkaCodecs;

impl RecordsCodec for KafkaCodecs {
    fn decompress(
        &mut self,
        codec: Compression,
        data: &[u8],
        max_bytes: usize,
    ) -> Result<Vec<u8>, CodecError> {
        minikafka_client::compression::decompress(codec, data, max_bytes)
            .map_err(|e| CodecError(e.to_string()))
    }

    fn compress(&mut self, codec: Compression, records: &[u8]) -> Result<Vec<u8>, CodecError> {
        minikafka_client::compression::compress(codec, records)
            .map_err(|e| CodecError(e.to_string()))
    }
}
