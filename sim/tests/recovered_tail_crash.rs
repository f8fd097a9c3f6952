//! What a restart recovers is durable before it is served (I8), on the crash-faithful
//! simulated disk. A record whose sync failed (the partition went offline, nothing was
//! acknowledged) is still in the page cache when the broker stops without a machine crash; the
//! next start recovers it and serves it (and would answer a retried idempotent batch from it).
//! A machine crash after that must not take it away: the restart synced what it recovered.
//! Found by the simulator: `mk-sim --incarnations 3 --seed 200192` on an earlier build (a
//! partition read back whole after a restart, then empty after the next crash).
//!
//! The control: the same record with no restart between the failed sync and the crash is lost
//! by some seeds' crashes, so the check can fail and it is the restart's sync that keeps it.
//! A broker's start opens every partition first and then syncs them all with one sync of the
//! filesystem (`log::sync_recovered`): the same check covers that path, and its own control
//! (an open that is never synced) loses the record.

use std::path::Path;
use std::sync::{Arc, Mutex};

use minikafka_backend_sim::{FaultRates, SimBackend, SimConfig};
use minikafka_broker::log::{sync_recovered, FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

const DATA: &str = "/sim/data";
const PARTITION: &str = "/sim/data/t-0";

fn config() -> LogConfig {
    LogConfig {
        flush: FlushPolicy::Fsync,
        ..LogConfig::default()
    }
}

/// Runs `step` on a one-shard run, crashing the machine at its end when `crash`; what
/// `step` returned.
fn incarnation<F, Fut>(crash: bool, step: F) -> Result<i64, String>
where
    F: Fn(SimBackend) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<i64, String>> + 'static,
{
    let outcome = Arc::new(Mutex::new(Err("did not run".to_string())));
    let slot = Arc::clone(&outcome);
    SimBackend::run_shards(1, move |backend| {
        let step = step(backend);
        let slot = Arc::clone(&slot);
        async move {
            let result = step.await;
            if let Ok(mut s) = slot.lock() {
                *s = result;
            }
            if crash {
                minikafka_backend_sim::crash_now();
                // The crash takes effect at the end of this poll; park until it does.
                std::future::pending::<()>().await;
            }
        }
    })
    .map_err(|e| e.to_string())?;
    let result = outcome.lock().map_err(|e| e.to_string())?.clone();
    result
}

/// Opens the partition (after an unclean stop) and returns its high watermark.
async fn open_high_watermark(backend: SimBackend) -> Result<i64, String> {
    let log = PartitionLog::open(backend, Path::new(PARTITION), config(), false, 0)
        .await
        .map_err(|e| e.to_string())?;
    Ok(log.high_watermark().0)
}

/// How the restart between the failed sync and the crash opens the partition.
#[derive(Clone, Copy, Debug)]
enum Restart {
    /// `PartitionLog::open`: the partition syncs its own recovered segment.
    Open,
    /// `open_unsynced`, then `sync_recovered` (what a broker's start does): one sync of the
    /// whole simulated filesystem.
    SyncedTogether,
    /// `open_unsynced` and nothing else (the control: the open alone makes nothing durable).
    UnsyncedOnly,
}

/// Opens the partition the way `restart` says; its high watermark.
async fn restart_high_watermark(backend: SimBackend, restart: Restart) -> Result<i64, String> {
    let opened =
        PartitionLog::open_unsynced(backend.clone(), Path::new(PARTITION), config(), false, 0)
            .await
            .map_err(|e| e.to_string())?;
    if !opened.needs_sync() {
        return Err("an unclean start under fsync said it owes no sync".into());
    }
    match restart {
        Restart::Open => {
            let log = opened.sync().await.map_err(|e| e.to_string())?;
            Ok(log.high_watermark().0)
        }
        Restart::SyncedTogether => {
            let logs = sync_recovered(&backend, Path::new(DATA), vec![opened])
                .await
                .map_err(|e| e.to_string())?;
            Ok(logs[0].high_watermark().0)
        }
        // Nothing reads the log before the crash: the record is recovered (1), not synced.
        Restart::UnsyncedOnly => Ok(1),
    }
}

/// Opens the partition, appends one record while every sync fails (the append is refused,
/// the partition goes offline), and stops without closing; the high watermark it reached.
async fn append_with_failing_sync(backend: SimBackend) -> Result<i64, String> {
    let log = PartitionLog::open(backend, Path::new(PARTITION), config(), false, 0)
        .await
        .map_err(|e| e.to_string())?;
    let mut builder = BatchBuilder::new();
    builder.push(&NewRecord {
        key: None,
        value: Some(b"never acknowledged"),
        headers: vec![],
        timestamp_ms: 0,
    });
    minikafka_backend_sim::set_faults(FaultRates {
        sync_eio: 1_000_000,
        ..FaultRates::NONE
    });
    let appended = log.append(builder.build(Offset(0)), 0).await;
    minikafka_backend_sim::set_faults(FaultRates::NONE);
    if appended.is_ok() {
        return Err("an append whose sync failed was acknowledged".into());
    }
    Ok(log.high_watermark().0)
}

/// The high watermark after: the failed append, a restart without a machine crash when
/// `restart_between` (which must show the record), a machine crash, and a last restart.
fn after_crash(seed: u64, restart_between: bool) -> Result<i64, String> {
    after_crash_with(seed, restart_between.then_some(Restart::Open))
}

/// [`after_crash`] with the restart between opening the partition as `restart` says.
fn after_crash_with(seed: u64, restart: Option<Restart>) -> Result<i64, String> {
    let restart_between = restart.is_some();
    minikafka_backend_sim::install(SimConfig::new(seed));
    // The data directory exists durably, as `mk-sim` and the broker's startup leave it.
    minikafka_backend_sim::host_put(&Path::new(DATA).join("cluster.id"), b"sim\n")
        .map_err(|e| e.to_string())?;
    let written = incarnation(!restart_between, append_with_failing_sync)?;
    if written != 1 {
        return Err(format!("seed {seed}: the write reached {written}, not 1"));
    }
    if let Some(restart) = restart {
        let served = incarnation(true, move |backend| {
            restart_high_watermark(backend, restart)
        })?;
        if served != 1 {
            return Err(format!(
                "seed {seed}: the restart recovered {served} records, not the one in the page cache"
            ));
        }
    }
    incarnation(false, open_high_watermark)
}

#[test]
fn what_a_restart_recovered_survives_a_later_crash() {
    for seed in 0..64 {
        let end = after_crash(seed, true).expect("runs");
        assert_eq!(end, 1, "seed {seed}: a recovered, served record was lost");
    }
}

#[test]
fn without_the_restart_a_crash_loses_the_unsynced_record() {
    let lost = (0..64)
        .map(|seed| after_crash(seed, false).expect("runs"))
        .filter(|end| *end == 0)
        .count();
    assert!(lost > 0, "64 crashes kept a record whose sync failed");
}

#[test]
fn one_filesystem_sync_for_all_recovered_partitions_keeps_the_record() {
    for seed in 0..64 {
        let end = after_crash_with(seed, Some(Restart::SyncedTogether)).expect("runs");
        assert_eq!(
            end, 1,
            "seed {seed}: a recovered record synced by syncfs was lost"
        );
    }
}

#[test]
fn an_unsynced_open_alone_does_not_keep_the_record() {
    let lost = (0..64)
        .map(|seed| after_crash_with(seed, Some(Restart::UnsyncedOnly)).expect("runs"))
        .filter(|end| *end == 0)
        .count();
    assert!(
        lost > 0,
        "64 crashes kept a recovered record nobody synced: the sync tests prove nothing"
    );
}
