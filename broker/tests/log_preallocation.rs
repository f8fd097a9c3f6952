//! `log.preallocate` on real files (I190): the active segment's `.log` has blocks reserved past
//! its length while it is written, the length (and so what recovery reads) is only the data,
//! a sealed segment and a closed one hold no blocks past their length, and after a crash with
//! a reservation in place the log recovers to exactly what was written. Blocks are read with
//! `stat` (`st_blocks`), on the filesystem of the scratch directory (the temp dir).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use minikafka_broker::log::preallocation::AHEAD_MIN_BYTES;
use minikafka_broker::log::segment::log_file_name;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;
use minikafka_testkit::check::{ensure, run_check, scratch_dir};
use minikafka_testkit::log::{test_batch, NOW_MS};

/// Most bytes a file may hold allocated beyond its data with nothing reserved: its last
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

/// Waits (a bounded number of the backend's sleeps) until `path` has at least `bytes`
/// allocated: the driver reserves in a task of its own.
async fn wait_reserved<B: Backend>(
    backend: &B,
    path: &Path,
    bytes: u64,
) -> Result<(u64, u64), String> {
    for _ in 0..1000 {
        let (len, allocated) = allocation(path)?;
        if allocated >= bytes {
            return Ok((len, allocated));
        }
        backend.sleep(Duration::from_millis(10)).await;
    }
    let (len, allocated) = allocation(path)?;
    Err(format!(
        "{}: {allocated} bytes allocated for {len} bytes after 10 s, expected a reservation of {bytes}",
        path.display()
    ))
}

fn expect_no_reserve(path: &Path, what: &str) -> Result<(), String> {
    let (len, allocated) = allocation(path)?;
    ensure(
        allocated <= len.next_multiple_of(4096) + SLACK_BYTES,
        || format!("{what}: {allocated} bytes allocated for {len} bytes of data"),
    )
}

async fn append_some<B: Backend>(
    log: &PartitionLog<B>,
    from: u64,
    count: u64,
) -> Result<(), String> {
    for tag in from..from + count {
        log.append(test_batch(tag, 2, 100, NOW_MS), NOW_MS)
            .await
            .map_err(|e| format!("append {tag}: {e}"))?;
    }
    Ok(())
}

/// Reserved while written, length only the data; freed at the roll and at close; a clean
/// reopen reads the same bytes.
async fn freed_at_roll_and_close<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 20).await?;
    let first = dir.join(log_file_name(Offset(0)));
    let (len, allocated) = wait_reserved(&backend, &first, AHEAD_MIN_BYTES).await?;
    ensure(len < AHEAD_MIN_BYTES / 4, || {
        format!("the length is the data only (I190): {len}")
    })?;
    ensure(allocated >= AHEAD_MIN_BYTES, || {
        "reserved ahead".to_string()
    })?;

    let second_base = log.high_watermark();
    log.roll_now(NOW_MS)
        .await
        .map_err(|e| format!("roll: {e}"))?;
    expect_no_reserve(&first, "the sealed segment")?;
    append_some(&log, 100, 5).await?;
    let second = dir.join(log_file_name(second_base));
    wait_reserved(&backend, &second, AHEAD_MIN_BYTES).await?;
    let written = std::fs::read(&second).map_err(|e| e.to_string())?;
    let end = log.high_watermark();
    log.close().await.map_err(|e| format!("close: {e}"))?;
    expect_no_reserve(&second, "the active segment after close")?;
    expect_no_reserve(&first, "the sealed segment after close")?;

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

/// A crash (the log dropped, nothing closed) with a reservation past the data: the unclean
/// reopen recovers exactly the records written, the reserved tail surfaces as nothing, and
/// appending goes on at the next offset.
async fn crash_with_a_reserved_tail<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 30).await?;
    let path = dir.join(log_file_name(Offset(0)));
    let (len, _) = wait_reserved(&backend, &path, AHEAD_MIN_BYTES).await?;
    let end = log.high_watermark();
    let written = std::fs::read(&path).map_err(|e| e.to_string())?;
    ensure(written.len() as u64 == len, || {
        "read up to the length".to_string()
    })?;
    drop(log); // the crash: no close, the reservation stays past the data

    let (_, allocated) = allocation(&path)?;
    ensure(allocated >= AHEAD_MIN_BYTES, || {
        "the crash left the reserved tail in place".to_string()
    })?;
    let log = PartitionLog::open(backend.clone(), &dir, config(true), false, NOW_MS)
        .await
        .map_err(|e| format!("reopen: {e}"))?;
    ensure(log.high_watermark() == end, || {
        format!("recovered to {}, expected {end}", log.high_watermark())
    })?;
    let after_crash = std::fs::read(&path).map_err(|e| e.to_string())?;
    ensure(after_crash == written, || {
        format!(
            "recovery changed the log: {} bytes, expected {}",
            after_crash.len(),
            written.len()
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
    log.close().await.map_err(|e| format!("close: {e}"))?;
    expect_no_reserve(&path, "after the close")
}

/// `preallocate=false`: nothing is reserved.
async fn off_reserves_nothing<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let log = PartitionLog::open(backend.clone(), &dir, config(false), false, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    append_some(&log, 0, 20).await?;
    // Long enough for a reservation task to have run had one been started.
    backend.sleep(Duration::from_millis(50)).await;
    expect_no_reserve(&dir.join(log_file_name(Offset(0))), "preallocate=false")?;
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
            fn a_reservation_is_freed_at_roll_and_close() {
                run("prealloc-roll-close", freed_at_roll_and_close);
            }

            #[test]
            fn a_reserved_tail_never_surfaces_after_a_crash() {
                run("prealloc-crash", crash_with_a_reserved_tail);
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
