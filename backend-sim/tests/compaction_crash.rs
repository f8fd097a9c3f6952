//! I24 on the crash-faithful simulated disk: a cleaning cut short after any of its filesystem
//! calls, then a crash that keeps or loses every unsynced write and directory entry at random
//! (per seed), leaves a log that reopens and reads back as the old log or the cleaned one,
//! never a mix, never a loss, and takes appends. The fault backend counts the cleaning's calls
//! and fails every call from the crash point on; the simulated disk then decides what of the
//! unsynced state survives. The same cleaning on a disk whose directory sync persists nothing
//! must lose something within the seeds tried, so the check can fail.

use std::path::Path;
use std::sync::{Arc, Mutex};

use minikafka_backend_sim::{SimBackend, SimConfig};
use minikafka_broker::log::PartitionLog;
use minikafka_core::backend::Backend;
use minikafka_testkit::fault::{FaultPlan, FaultyBackend};
use minikafka_testkit::log::{
    clean_once, compacted_config, expected_after_clean, keyed_batch, read_rows, write_workload,
    Row, NOW_MS,
};

const DIR: &str = "/sim/data/compacted-0";
/// Seeds per crash point: each draws its own choice of what the crash keeps.
const SEEDS: u64 = 4;

/// Runs `main` on one simulated shard; `crash` ends the run with a crash once it returned.
fn run<T, F, Fut>(crash: bool, main: F) -> Result<T, String>
where
    T: Send + 'static,
    F: Fn(SimBackend) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, String>> + 'static,
{
    let slot: Arc<Mutex<Option<Result<T, String>>>> = Arc::new(Mutex::new(None));
    let out = Arc::clone(&slot);
    SimBackend::run_shards(1, move |backend| {
        let step = main(backend);
        let out = Arc::clone(&out);
        async move {
            let result = step.await;
            if let Ok(mut s) = out.lock() {
                *s = Some(result);
            }
            if crash {
                minikafka_backend_sim::crash_now();
                // The crash takes effect at the end of this poll; park until it does.
                std::future::pending::<()>().await;
            }
        }
    })
    .map_err(|e| e.to_string())?;
    let result = slot
        .lock()
        .map_err(|e| e.to_string())?
        .take()
        .ok_or("the run ended before its main did")?;
    result
}

async fn open<B: Backend>(backend: &B, clean: bool) -> Result<PartitionLog<B>, String> {
    PartitionLog::open(
        backend.clone(),
        Path::new(DIR),
        compacted_config(),
        clean,
        NOW_MS,
    )
    .await
    .map_err(|e| format!("open: {e}"))
}

/// Writes the workload (two sealed segments of overwrites and a tombstone, one batch in the
/// active segment) and closes the log, then makes every directory entry durable from the host
/// side (so that on a broken disk only the cleaning's own steps are at risk). Every row
/// written.
fn write_durably() -> Result<Vec<Row>, String> {
    let rows = run(false, |backend| async move {
        let log = open(&backend, false).await?;
        let rows = write_workload(&log, 2).await?;
        log.close().await.map_err(|e| format!("close: {e}"))?;
        Ok(rows)
    })?;
    let settle = Path::new(DIR).join("settle");
    minikafka_backend_sim::host_put(&settle, b"").map_err(|e| e.to_string())?;
    minikafka_backend_sim::host_remove(&settle).map_err(|e| e.to_string())?;
    Ok(rows)
}

/// The log as a reader sees it (every row from the log start) and as its files lie (the
/// segments' base offsets): a mix of old and new segments can read back like the new log.
type State = (Vec<Row>, Vec<i64>);

fn bases<B: Backend>(log: &PartitionLog<B>) -> Vec<i64> {
    log.segments().iter().map(|s| s.base_offset().0).collect()
}

/// A whole cleaning of the workload: the filesystem calls it makes, the first uncleanable
/// offset, and the segment bases before and after.
fn count_cleaning_ops() -> Result<(u64, i64, Vec<i64>, Vec<i64>), String> {
    minikafka_backend_sim::install(SimConfig::new(0));
    write_durably()?;
    run(false, |backend| async move {
        let faulty = FaultyBackend::new(backend, FaultPlan::new());
        let log = open(&faulty, true).await?;
        let end = log.segments().last().ok_or("no segment")?.base_offset().0;
        let old_bases = bases(&log);
        let before = faulty.plan().op_count();
        clean_once(&faulty, &log, NOW_MS)
            .await?
            .ok_or("nothing cleaned")?;
        Ok((
            faulty.plan().op_count() - before,
            end,
            old_bases,
            bases(&log),
        ))
    })
}

/// One world: the workload, a cleaning failing from call `n` on, a crash, a reopen. What the
/// reopened log reads back and its segments, or why it could not be read.
fn crash_at(config: SimConfig, n: u64) -> Result<State, String> {
    minikafka_backend_sim::install(config);
    write_durably()?;
    run(true, move |backend| async move {
        let plan = FaultPlan::new();
        let faulty = FaultyBackend::new(backend, plan.clone());
        let log = open(&faulty, true).await?;
        plan.fail_after(n);
        let _ = clean_once(&faulty, &log, NOW_MS).await;
        Ok(())
    })?;
    run(false, |backend| async move {
        let log = open(&backend, false).await?;
        let rows = read_rows(&log).await?;
        let bases = bases(&log);
        let hw = log.high_watermark();
        let info = log
            .append(keyed_batch(&[("k0", Some("after"))], NOW_MS), NOW_MS)
            .await
            .map_err(|e| format!("append after recovery: {e}"))?;
        if info.base_offset != hw {
            return Err(format!("append at {} after the end {hw}", info.base_offset));
        }
        Ok((rows, bases))
    })
}

/// The log before and after the cleaning, and the calls the cleaning makes.
fn old_and_new() -> Result<(State, State, u64), String> {
    let (ops, end, old_bases, new_bases) = count_cleaning_ops()?;
    minikafka_backend_sim::install(SimConfig::new(0));
    let old = write_durably()?;
    let new = expected_after_clean(&old, end, false);
    if old == new || old_bases == new_bases {
        return Err("the workload has nothing to clean".into());
    }
    Ok(((old, old_bases), (new, new_bases), ops))
}

#[test]
fn a_cleaning_cut_short_anywhere_then_a_crash_leaves_the_old_log_or_the_new() {
    let (old, new, ops) = old_and_new().expect("workload");
    let (mut saw_old, mut saw_new) = (false, false);
    for n in 0..=ops {
        for seed in 0..SEEDS {
            let got = crash_at(SimConfig::new(seed), n)
                .unwrap_or_else(|e| panic!("crash at call {n} of {ops}, seed {seed}: {e}"));
            if got == old {
                saw_old = true;
            } else if got == new {
                saw_new = true;
            } else {
                panic!("crash at call {n} of {ops}, seed {seed}: neither the old log nor the new");
            }
        }
    }
    assert!(
        saw_old && saw_new,
        "over {ops} crash points: old {saw_old}, new {saw_new}"
    );
}

#[test]
fn a_directory_sync_that_persists_nothing_loses_a_cleaning() {
    let (old, new, ops) = old_and_new().expect("workload");
    let lost = (0..=ops).any(|n| {
        (0..SEEDS).any(|seed| {
            let mut config = SimConfig::new(seed);
            config.broken_sync_dir = true;
            crash_at(config, n).map_or(true, |got| got != old && got != new)
        })
    });
    assert!(
        lost,
        "{ops} crash points x {SEEDS} seeds on a broken directory sync lost nothing"
    );
}
