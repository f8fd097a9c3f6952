//! Offset index floor lookup: binary search over a full index of a 1 GiB segment, against a
//! linear scan measured in the same run (report the ratio, not a bare time).
//!
//! The index is what `IndexPlacer` builds for a 1 GiB segment of 4096-byte batches at the
//! default 4096-byte interval: 262,144 entries (the first batch at position 0 has none).

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use minikafka_core::index::{IndexEntry, IndexPlacer, OffsetIndex, DEFAULT_INDEX_INTERVAL_BYTES};
use minikafka_core::types::{FilePos, RelativeOffset};

const SEGMENT_BYTES: u64 = 1 << 30;
const BATCH_BYTES: u32 = 4096;
const RECORDS_PER_BATCH: u32 = 4;
const TARGETS: usize = 1024;

/// The index a writer builds for a full segment of equal batches.
fn full_index() -> OffsetIndex {
    let mut placer = IndexPlacer::new(DEFAULT_INDEX_INTERVAL_BYTES);
    let mut index = OffsetIndex::new();
    let batches = SEGMENT_BYTES / u64::from(BATCH_BYTES);
    for i in 0..batches {
        let position = FilePos((i * u64::from(BATCH_BYTES)) as u32);
        let relative = RelativeOffset(i as u32 * RECORDS_PER_BATCH);
        if let Some(entry) = placer.on_batch(position, relative, BATCH_BYTES) {
            index.push(entry);
        }
    }
    index
}

/// A first-to-last scan: the obvious implementation binary search replaces.
fn linear_floor(entries: &[IndexEntry], target: RelativeOffset) -> FilePos {
    entries
        .iter()
        .take_while(|e| e.relative_offset <= target)
        .last()
        .map_or(FilePos(0), |e| e.position)
}

/// Deterministic pseudo-random targets below `max` (xorshift; no dependency needed).
fn targets(max: u32, count: usize) -> Vec<RelativeOffset> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            RelativeOffset((state % u64::from(max)) as u32)
        })
        .collect()
}

fn bench_lookup(c: &mut Criterion) {
    let full = full_index();
    let max_offset = (SEGMENT_BYTES / u64::from(BATCH_BYTES)) as u32 * RECORDS_PER_BATCH;
    let full_targets = targets(max_offset, TARGETS);

    // A small index (4 MiB of log: 1,023 entries) where the linear scan is still bearable.
    let mut small = OffsetIndex::new();
    for e in full.entries().iter().take(1023) {
        small.push(*e);
    }
    let small_max = small
        .last()
        .map_or(1, |e| e.relative_offset.0 + RECORDS_PER_BATCH);
    let small_targets = targets(small_max, TARGETS);

    let mut group = c.benchmark_group("index_lookup");
    group.throughput(Throughput::Elements(TARGETS as u64));
    group.bench_function(BenchmarkId::new("binary", full.len()), |b| {
        b.iter(|| {
            for t in &full_targets {
                black_box(full.lookup(black_box(*t)));
            }
        })
    });
    group.bench_function(BenchmarkId::new("binary", small.len()), |b| {
        b.iter(|| {
            for t in &small_targets {
                black_box(small.lookup(black_box(*t)));
            }
        })
    });
    group.bench_function(BenchmarkId::new("linear", small.len()), |b| {
        b.iter(|| {
            for t in &small_targets {
                black_box(linear_floor(small.entries(), black_box(*t)));
            }
        })
    });
    group.finish();
}

// `criterion_group!`/`criterion_main!` by hand: the macros generate undocumented items and
// the workspace denies missing docs under clippy.
/// Runs the benches with the command line's options, then prints criterion's summary.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_lookup(&mut criterion);
    criterion.final_summary();
}
