//! Compression bombs against the client's decompression path (`minikafka_client::compression`,
//! over `minikafka_codec`, which the broker's cleaner and key check use too, and
//! `consumer::decode_records`): a few kilobytes of gzip, zstd, lz4 or snappy that inflate to
//! tens of megabytes or gigabytes must be refused at the configured limit, with memory measured
//! by the allocation meter staying near that limit, not near the inflated size (I10).

use bytes::Bytes;
use minikafka_client::compression::{compress, decompress};
use minikafka_client::consumer::decode_records;
use minikafka_core::record::{BatchBuilder, Compression, NewRecord};
use minikafka_core::types::Offset;
use minikafka_fuzz_targets::alloc_meter;

#[global_allocator]
static ALLOCATOR: alloc_meter::MeteredAllocator = alloc_meter::MeteredAllocator;

const MIB: usize = 1024 * 1024;
/// The limit the client is given in these tests.
const LIMIT_BYTES: usize = MIB;
/// Most bytes a refused decompression may allocate: the output buffer growing to the limit
/// (doublings included) plus the codec's own window and block buffers.
const REFUSAL_ALLOC_BYTES: u64 = 16 * MIB as u64;

fn zeros(len: usize) -> Vec<u8> {
    vec![0; len]
}

/// Asserts `bomb` (compressed with `codec`, inflating to `inflated_bytes`) is refused at
/// [`LIMIT_BYTES`] with bounded allocation.
fn assert_refused(codec: Compression, bomb: &[u8], inflated_bytes: u64) {
    assert!(
        // Snappy's best ratio is about 21:1; the others reach 1000:1 and more.
        (bomb.len() as u64) * 20 < inflated_bytes,
        "{codec:?}: a bomb is small ({} bytes for {inflated_bytes})",
        bomb.len()
    );
    let (result, allocated) = alloc_meter::measure(|| decompress(codec, bomb, LIMIT_BYTES));
    assert!(result.is_err(), "{codec:?}: a bomb must be refused");
    assert!(
        allocated <= REFUSAL_ALLOC_BYTES,
        "{codec:?}: refusing allocated {allocated} bytes"
    );
}

#[test]
fn the_allocation_meter_is_installed() {
    assert!(alloc_meter::installed());
}

#[test]
fn zstd_frames_inflating_to_a_gibibyte_are_refused_at_the_limit() {
    // 1024 concatenated frames of 1 MiB of zeros: ~20 KB that a stream decoder reads as 1 GiB.
    let frame = compress(Compression::Zstd, &zeros(MIB)).expect("compress");
    let bomb = frame.repeat(1024);
    assert_refused(Compression::Zstd, &bomb, 1 << 30);
}

#[test]
fn gzip_lz4_and_xerial_snappy_bombs_are_refused_at_the_limit() {
    let inflated = 64 * MIB;
    let data = zeros(inflated);
    for codec in [Compression::Gzip, Compression::Lz4, Compression::Snappy] {
        let bomb = compress(codec, &data).expect("compress");
        assert_refused(codec, &bomb, inflated as u64);
    }
}

#[test]
fn a_raw_snappy_block_declaring_four_gibibytes_is_refused_before_allocating() {
    // The varint length prefix of a raw snappy block says 2^32 - 1 bytes.
    let bomb = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00, 0x00];
    let (result, allocated) =
        alloc_meter::measure(|| decompress(Compression::Snappy, &bomb, LIMIT_BYTES));
    assert!(result.is_err());
    assert!(allocated < 64 * 1024, "allocated {allocated} bytes");
}

/// A fetched partition of `batches` zstd batches, each one record of `value_bytes` zeros.
fn zstd_batches(batches: i64, value_bytes: usize) -> Bytes {
    let value = zeros(value_bytes);
    let mut out = Vec::new();
    for base in 0..batches {
        let mut builder = BatchBuilder::new();
        builder.push(&NewRecord {
            value: Some(&value),
            ..NewRecord::default()
        });
        let packed = compress(Compression::Zstd, builder.records_bytes()).expect("compress");
        out.extend(builder.build_with(Offset(base), Compression::Zstd, &packed));
    }
    Bytes::from(out)
}

#[test]
fn many_batches_share_one_inflation_budget() {
    // Eight 16 MiB batches (~2 KB each on the wire): each fits a 64 MiB limit, but together
    // they would hold 128 MiB. The limit is for the whole fetch, so this is refused...
    let records = zstd_batches(8, 16 * MIB);
    assert!(
        records.len() < 64 * 1024,
        "{} bytes on the wire",
        records.len()
    );
    let refused = decode_records("t", 0, &records, Offset(0), 64 * MIB);
    assert!(refused.is_err(), "128 MiB inflated past a 64 MiB limit");
    // ...and the same batches decode when the budget covers them all.
    let decoded = decode_records("t", 0, &records, Offset(0), 129 * MIB).expect("within budget");
    assert_eq!(decoded.records.len(), 8);
    let values: usize = decoded
        .records
        .iter()
        .map(|r| r.value.as_ref().map_or(0, Bytes::len))
        .sum();
    assert_eq!(values, 8 * 16 * MIB);
    // Each inflated section is its value plus a few bytes of record framing.
    assert!(decoded.decompressed_bytes >= values && decoded.decompressed_bytes <= values + 1024);
}
