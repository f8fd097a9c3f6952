//! `log.preallocate` on real files (I190): the active segment's `.log` is extended with
//! allocated zeros ahead of its writes, so its length runs ahead of its data while it is
//! written; a sealed segment and a closed one are cut back to their data; after a crash with
//! the zero tail in place the log recovers to exactly what was written and cuts the zeros
//! (I29); a zero tail left on a sealed segment is cut at the next open. Lengths and blocks are
//! read with `stat`, on the filesystem of the scratch directory (the temp dir).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use minikafka_broker::log::preallocation::{AHEAD_MIN_BYTES, START_AT_BYTES};
use minikafka_broker::log::segment::log_file_name;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;
use minikafka_testkit::check::{ensure, run_check, scratch_dir};
use minikafka_testkit::log::{test_batch, NOW_MS};

/// Most bytes a file may hold allocated beyond its data with nothing preallocated: its last
/// block's rounding plus one block of extent metadata.
const SLACK_BYTES: u64 = 2 * 4096;

fn config(preallocate: bool) -> LogConfig {
    LogConfig {
        segment_bytes: 64 << 20,
        flush: FlushPolicy::Fsync,
        retention_ms: None,
        preallocate,
        ..LogConfig::default()
    }
}

/// (length, bytes allocated) of a file, from `stat`.
fn allocation(path: &Path) -> Result<(u64, u64), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("stat {}: {e}", path.display()))?;
    Ok((meta.len(), meta.blocks() * 512))
}

/// The file's length is its data (the log's size for it) and nothing is allocated past it.
fn expect_cut_to(path: &Path, data_bytes: u64, what: &str) -> Result<(), String> {
    let (len, allocated) = allocation(path)?;
    ensure(len == data_bytes, || {
        format!("{what}: length {len}, expected the data's {data_bytes}")
    })?;
    ensure(
        allocated <= len.next_multiple_of(4096) + SLACK_BYTES,
        || format!("{what}: {allocated} bytes allocated for {len} bytes of data"),
    )
}

/// The size the log holds for the segment based at `base`.
fn data_bytes<B: Backend>(log: &PartitionLog<B>, base: Offset) -> Result<u64, String> {
    log.segments()
        .iter()
        .find(|s| s.base_offset() == base)
        .map(|s| s.size_bytes())
        .ok_or_else(|| format!("no segment at {base}"))
}

/// Appends `count` batches of two 4,000-byte records (about 8 KB each: 8 of them pass
/// [`START_AT_BYTES`], where extending starts).
async fn append_some<B: Backend>(
    log: &PartitionLog<B>,
    from: u64,
    count: u64,
) -> Result<(), String> {
    append_sized(log, from, count, 4000).await
}

async fn append_sized<B: Backend>(
    log: &PartitionLog<B>,
    from: u64,
    count: u64,
    record_bytes: usize,
) -> Result<(), String> {
    for tag in from..from + count {
        log.append(test_batch(tag, 2, record_bytes, NOW_MS), NOW_MS)
            .await
            .map_err(|e| format!("append {tag}: {e}"))?;
    }
    Ok(())
}

/// Extended while written (length 1 MiB, allocated, the data a prefix, zeros after it); cut
/// to the data at the roll and at close; a clean reopen reads the same bytes.
async fn cut_at_roll_and_close<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 20).await?;
    let first = dir.join(log_file_name(Offset(0)));
    let data = data_bytes(&log, Offset(0))?;
    let (len, allocated) = allocation(&first)?;
    // The first write extended the file to its own end plus the first step.
    ensure(
        (AHEAD_MIN_BYTES..AHEAD_MIN_BYTES + data).contains(&len),
        || format!("the length runs ahead of the data (I190): {len} for {data} bytes"),
    )?;
    ensure(allocated >= AHEAD_MIN_BYTES, || {
        format!("allocated ahead: {allocated}")
    })?;
    let bytes = std::fs::read(&first).map_err(|e| e.to_string())?;
    ensure(bytes[data as usize..].iter().all(|b| *b == 0), || {
        "past the data the file reads zeros".to_string()
    })?;

    let second_base = log.high_watermark();
    log.roll_now(NOW_MS)
        .await
        .map_err(|e| format!("roll: {e}"))?;
    expect_cut_to(&first, data, "the sealed segment")?;
    append_some(&log, 100, 10).await?;
    let second = dir.join(log_file_name(second_base));
    let second_data = data_bytes(&log, second_base)?;
    ensure(allocation(&second)?.0 >= AHEAD_MIN_BYTES, || {
        "the new active segment is extended".to_string()
    })?;
    let written =
        std::fs::read(&second).map_err(|e| e.to_string())?[..second_data as usize].to_vec();
    let end = log.high_watermark();
    log.close().await.map_err(|e| format!("close: {e}"))?;
    expect_cut_to(&second, second_data, "the active segment after close")?;
    expect_cut_to(&first, data, "the sealed segment after close")?;

    let log = PartitionLog::open(backend.clone(), &dir, config(true), true, NOW_MS)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    ensure(log.high_watermark() == end, || {
        format!("reopened at {}, expected {end}", log.high_watermark())
    })?;
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let read_back = std::fs::read(&second).map_err(|e| e.to_string())?;
    ensure(read_back == written, || {
        "the active segment's bytes changed".to_string()
    })
}

/// A crash (the log dropped, nothing closed) with the zero tail in place: the unclean reopen
/// reads the zeros as a torn tail (I29), recovers exactly the records written, cuts the file
/// to them, and appending goes on at the next offset.
async fn crash_with_a_zero_tail<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 30).await?;
    let path = dir.join(log_file_name(Offset(0)));
    let data = data_bytes(&log, Offset(0))?;
    let end = log.high_watermark();
    let before = std::fs::read(&path).map_err(|e| e.to_string())?;
    drop(log); // the crash: no close, the zero tail stays past the data
    ensure(before.len() as u64 >= AHEAD_MIN_BYTES, || {
        format!(
            "the crash left {} bytes, expected a zero tail past 1 MiB",
            before.len()
        )
    })?;
    ensure(before[data as usize..].iter().all(|b| *b == 0), || {
        "past the data the file reads zeros".to_string()
    })?;

    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    ensure(log.high_watermark() == end, || {
        format!("recovered to {}, expected {end}", log.high_watermark())
    })?;
    let after_crash = std::fs::read(&path).map_err(|e| e.to_string())?;
    ensure(after_crash[..] == before[..data as usize], || {
        format!(
            "recovery left {} bytes, expected the {data} bytes of data unchanged",
            after_crash.len()
        )
    })?;
    let info = log
        .append(test_batch(999, 1, 10, NOW_MS), NOW_MS)
        .await
        .map_err(|e| format!("append after recovery: {e}"))?;
    ensure(info.base_offset == end, || {
        format!(
            "append after recovery at {}, expected {end}",
            info.base_offset
        )
    })?;
    let data = data_bytes(&log, Offset(0))?;
    log.close().await.map_err(|e| format!("close: {e}"))?;
    expect_cut_to(&path, data, "after the close")
}

/// A sealed segment left with a zero tail (a crash between the extension and the roll's cut
/// reaching the disk, or a cut that failed): the next open, clean or not, finds its tail
/// does not parse, scans it and cuts the zeros; every record is read back.
async fn sealed_zero_tail_cut_at_open<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 20).await?;
    let data = data_bytes(&log, Offset(0))?;
    log.roll_now(NOW_MS)
        .await
        .map_err(|e| format!("roll: {e}"))?;
    append_some(&log, 100, 5).await?;
    let end = log.high_watermark();
    log.close().await.map_err(|e| format!("close: {e}"))?;
    let first = dir.join(log_file_name(Offset(0)));
    for clean in [true, false] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&first)
            .and_then(|f| f.set_len(data + AHEAD_MIN_BYTES))
            .map_err(|e| format!("extend the sealed segment: {e}"))?;
        let log = PartitionLog::open(backend.clone(), &dir, config(true), clean, NOW_MS)
            .await
            .map_err(|e| format!("reopen (clean {clean}): {e}"))?;
        ensure(log.high_watermark() == end, || {
            format!(
                "clean {clean}: reopened at {}, expected {end}",
                log.high_watermark()
            )
        })?;
        for offset in [0, end.0 - 1] {
            let read = log
                .read(Offset(offset), 1 << 20)
                .await
                .map_err(|e| format!("clean {clean}: read {offset}: {e}"))?;
            ensure(!read.bytes.is_empty(), || {
                format!("clean {clean}: nothing at {offset}")
            })?;
        }
        expect_cut_to(&first, data, &format!("clean {clean}: the sealed segment"))?;
        log.close().await.map_err(|e| format!("close: {e}"))?;
    }
    Ok(())
}

/// A quiet segment (less than [`START_AT_BYTES`] of data) is not extended, so a crash or a
/// close costs it no cut.
async fn quiet_segment_not_extended<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_sized(&log, 0, 20, 100).await?;
    let data = data_bytes(&log, Offset(0))?;
    ensure(data < START_AT_BYTES, || {
        format!("{data} bytes is not quiet")
    })?;
    expect_cut_to(&dir.join(log_file_name(Offset(0))), data, "a quiet segment")?;
    log.close().await.map_err(|e| format!("close: {e}"))
}

/// `preallocate=false`: nothing is reserved.
async fn off_reserves_nothing<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(false), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 20).await?;
    let data = data_bytes(&log, Offset(0))?;
    expect_cut_to(
        &dir.join(log_file_name(Offset(0))),
        data,
        "preallocate=false",
    )?;
    log.close().await.map_err(|e| format!("close: {e}"))
}

macro_rules! on_backend {
    ($module:ident, $backend:ty) => {
        mod $module {
            use super::*;

            fn run<F, Fut>(label: &str, check: F)
            where
                F: Fn($backend, PathBuf) -> Fut + Send + Sync + 'static,
                Fut: std::future::Future<Output = Result<(), String>> + 'static,
            {
                let dir = scratch_dir(label);
                if let Err(e) = run_check::<$backend, _, _>(&dir, check) {
                    panic!("{label}: {e}");
                }
                let _ = std::fs::remove_dir_all(&dir);
            }

            #[test]
            fn the_zero_tail_is_cut_at_roll_and_close() {
                run("prealloc-roll-close", cut_at_roll_and_close);
            }

            #[test]
            fn a_zero_tail_never_surfaces_after_a_crash() {
                run("prealloc-crash", crash_with_a_zero_tail);
            }

            #[test]
            fn a_sealed_zero_tail_is_cut_at_the_next_open() {
                run("prealloc-sealed-tail", sealed_zero_tail_cut_at_open);
            }

            #[test]
            fn a_quiet_segment_is_not_extended() {
                run("prealloc-quiet", quiet_segment_not_extended);
            }

            #[test]
            fn preallocate_off_reserves_nothing() {
                run("prealloc-off", off_reserves_nothing);
            }
        }
    };
}

on_backend!(portable, minikafka_backend_portable::PortableBackend);
#[cfg(all(target_os = "linux", feature = "monoio"))]
on_backend!(monoio, minikafka_backend_monoio::MonoioBackend);
