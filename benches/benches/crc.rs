//! CRC-32C throughput: the `crc32c` crate (what `record::validate_batch` calls over bytes
//! 21..end of every batch, I3) against a baseline measured in the same run: the raw hardware
//! CRC instruction (`_mm_crc32_u64`) in ONE dependent chain, which is bound by the
//! instruction's latency (3 cycles per 8 bytes on current x86). The crate interleaves several
//! independent streams and combines them, so `crc32c / hw_crc_single_stream` tells how much of
//! the instruction's throughput the crate recovers.
//!
//! Groups read `crc32c/<size>` and `hw_crc_single_stream/<size>` with the same sizes (4 KiB,
//! 64 KiB, 1 MiB), so the ratio is computed per size. After the criterion groups a short
//! same-run comparison prints the ratios directly. Off x86_64, or without SSE4.2, the
//! baseline is skipped.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};

const SIZES: [(usize, &str); 3] = [(4 << 10, "4KiB"), (64 << 10, "64KiB"), (1 << 20, "1MiB")];

/// Deterministic pseudo-random bytes (xorshift64), so runs are comparable.
fn buffer(len_bytes: usize) -> Vec<u8> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len_bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn bench_crc32c(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32c");
    for (len_bytes, name) in SIZES {
        let buf = buffer(len_bytes);
        group.throughput(Throughput::Bytes(len_bytes as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| crc32c::crc32c(black_box(buf)))
        });
    }
    group.finish();
}

/// CRC-32C of `buf` with one `crc32` instruction per 8 bytes, each depending on the last.
///
/// # Safety
/// The CPU must support SSE4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn hw_crc_single_stream(buf: &[u8]) -> u32 {
    use core::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc: u64 = 0xFFFF_FFFF;
    let chunks = buf.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunks_exact(8)"));
        // The intrinsics are safe inside a target_feature function on newer compilers.
        #[allow(unused_unsafe)]
        // SAFETY: SSE4.2 is enabled for this function; the caller checked the CPU.
        unsafe {
            crc = _mm_crc32_u64(crc, word);
        }
    }
    let mut crc = crc as u32;
    for &byte in tail {
        #[allow(unused_unsafe)]
        // SAFETY: as above.
        unsafe {
            crc = _mm_crc32_u8(crc, byte);
        }
    }
    !crc
}

/// The baseline, or `None` where this CPU lacks the instruction.
#[cfg(target_arch = "x86_64")]
fn hw_baseline() -> Option<fn(&[u8]) -> u32> {
    if is_x86_feature_detected!("sse4.2") {
        // SAFETY: SSE4.2 was detected just above.
        Some(|buf| unsafe { hw_crc_single_stream(buf) })
    } else {
        None
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn hw_baseline() -> Option<fn(&[u8]) -> u32> {
    None
}

fn bench_hw_single_stream(c: &mut Criterion) {
    let Some(hw) = hw_baseline() else {
        eprintln!("hw_crc_single_stream: skipped (needs x86_64 with SSE4.2)");
        return;
    };
    let mut group = c.benchmark_group("hw_crc_single_stream");
    for (len_bytes, name) in SIZES {
        let buf = buffer(len_bytes);
        // The baseline must compute the same function, or the ratio means nothing.
        assert_eq!(
            hw(&buf),
            crc32c::crc32c(&buf),
            "baseline disagrees with crc32c"
        );
        group.throughput(Throughput::Bytes(len_bytes as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &buf, |b, buf| {
            b.iter(|| hw(black_box(buf)))
        });
    }
    group.finish();
}

/// Prints `crc32c / hw_crc_single_stream` throughput ratios from a short same-run timing
/// (interleaved rounds, best of each), so the report needs no arithmetic.
fn print_ratios() {
    let Some(hw) = hw_baseline() else {
        return;
    };
    let crate_crc: fn(&[u8]) -> u32 = crc32c::crc32c;
    for (len_bytes, name) in SIZES {
        let buf = buffer(len_bytes);
        let reps = (64 << 20) / len_bytes; // 64 MiB per timing round
        let time = |f: fn(&[u8]) -> u32| {
            let start = std::time::Instant::now();
            for _ in 0..reps {
                black_box(f(black_box(&buf)));
            }
            start.elapsed().as_secs_f64()
        };
        let (mut best_crate_s, mut best_hw_s) = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            best_crate_s = best_crate_s.min(time(crate_crc));
            best_hw_s = best_hw_s.min(time(hw));
        }
        let bytes = (reps * len_bytes) as f64;
        println!(
            "ratio {name}: crc32c {:.2} GB/s, hw_crc_single_stream {:.2} GB/s, crc32c/hw = {:.2}x",
            bytes / best_crate_s / 1e9,
            bytes / best_hw_s / 1e9,
            best_hw_s / best_crate_s
        );
    }
}

// `criterion_group!`/`criterion_main!` by hand: the macros generate undocumented items and
// the workspace denies missing docs under clippy.
/// Runs the benches with the command line's options, then prints the same-run ratios.
fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_crc32c(&mut criterion);
    bench_hw_single_stream(&mut criterion);
    criterion.final_summary();
    // `cargo test --benches` runs each bench once without `--bench`: skip the timing there.
    if std::env::args().any(|arg| arg == "--bench") {
        print_ratios();
    }
}
