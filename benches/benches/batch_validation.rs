//! `record::validate_batch` throughput (I3: every batch passes it before reaching a log).
//!
//! Uncompressed batches of 1 and 1000 records of 100 B, 1 KiB and 10 KiB values, built once
//! with `BatchBuilder` outside the timed loop: validation is the header checks, the CRC-32C
//! over bytes 21..end, and a walk of every record. For contrast, and as the baseline measured
//! in the same run, the same bytes labelled as compressed (attribute bits = zstd): then only
//! the header and CRC are checked, so `validate_batch / validate_batch_header_crc_only` at a
//! given size is the cost of the record walk on top of the CRC.
//!
//! Ids read `<group>/<value size>x<record count>`; throughput is the batch's size in bytes.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use minikafka_core::record::{validate_batch, BatchBuilder, Compression, NewRecord};
use minikafka_core::types::Offset;

const VALUE_SIZES: [(usize, &str); 3] = [(100, "100B"), (1 << 10, "1KiB"), (10 << 10, "10KiB")];
const RECORD_COUNTS: [usize; 2] = [1, 1000];

/// A builder holding `count` records with a `value_bytes`-byte value, a small key and header.
fn builder(value_bytes: usize, count: usize) -> BatchBuilder {
    let value: Vec<u8> = (0..value_bytes).map(|i| (i * 31 % 251) as u8).collect();
    let mut builder = BatchBuilder::new();
    for i in 0..count {
        let key = (i as u64).to_be_bytes();
        builder.push(&NewRecord {
            key: Some(&key),
            value: Some(&value),
            headers: vec![(b"trace", Some(b"0123456789abcdef"))],
            timestamp_ms: 1_700_000_000_000 + i as i64,
        });
    }
    builder
}

fn bench_validate(c: &mut Criterion) {
    let cases: Vec<(String, BatchBuilder)> = VALUE_SIZES
        .iter()
        .flat_map(|&(value_bytes, name)| {
            RECORD_COUNTS
                .iter()
                .map(move |&count| (format!("{name}x{count}"), builder(value_bytes, count)))
        })
        .collect();

    let mut group = c.benchmark_group("validate_batch");
    for (id, builder) in &cases {
        let batch = builder.build(Offset(0));
        let header = validate_batch(&batch).expect("built batch is valid");
        assert_eq!(header.records_count as usize, builder.len());
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(id), &batch, |b, batch| {
            b.iter(|| validate_batch(black_box(batch)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("validate_batch_header_crc_only");
    for (id, builder) in &cases {
        // Same bytes, labelled zstd: validation checks the header and CRC, never the records.
        let batch = builder.build_with(Offset(0), Compression::Zstd, builder.records_bytes());
        let header = validate_batch(&batch).expect("built batch is valid");
        assert_eq!(header.compression(), Ok(Compression::Zstd));
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(id), &batch, |b, batch| {
            b.iter(|| validate_batch(black_box(batch)))
        });
    }
    group.finish();
}

// `criterion_group!`/`criterion_main!` by hand: the macros generate undocumented items and
// the workspace denies missing docs under clippy.
/// Runs the benches with the command line's options, then prints criterion's summary.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_validate(&mut criterion);
    criterion.final_summary();
}
