//! The topic store's half of I26 on the crash-faithful simulated disk: once `TopicStore::save`
//! or `TopicStore::remove` returned, a crash (which keeps or loses every unsynced write and
//! directory entry at random) never undoes it. The same steps on the disk whose directory sync
//! persists nothing must lose something within the seeds tried, so the check can fail.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use minikafka_backend_sim::{SimBackend, SimConfig};
use minikafka_broker::log::{TopicMeta, TopicStore};
use minikafka_core::backend::Backend;

const DATA: &str = "/sim/data";

fn meta(name: &str, partitions: i32) -> TopicMeta {
    TopicMeta {
        name: name.to_string(),
        partition_count: partitions,
        config: BTreeMap::new(),
    }
}

/// Runs `steps` on a one-shard run, then crashes; returns what they returned.
fn run_then_crash<F, Fut>(steps: F) -> Result<(), String>
where
    F: Fn(SimBackend) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + 'static,
{
    let outcome = Arc::new(Mutex::new(Err("did not run".to_string())));
    let slot = Arc::clone(&outcome);
    SimBackend::run_shards(1, move |backend| {
        let step = steps(backend);
        let slot = Arc::clone(&slot);
        async move {
            let result = step.await;
            if let Ok(mut s) = slot.lock() {
                *s = result;
            }
            minikafka_backend_sim::crash_now();
            // The crash takes effect at the end of this poll; park until it does.
            std::future::pending::<()>().await;
        }
    })
    .map_err(|e| e.to_string())?;
    let result = outcome.lock().map_err(|e| e.to_string())?.clone();
    result
}

/// Opens the store, loads every topic, then runs `change`; the topics loaded.
async fn load_then(
    backend: SimBackend,
    change: fn(&TopicStore<SimBackend>) -> ChangeFuture<'_>,
) -> Result<Vec<TopicMeta>, String> {
    let store = TopicStore::open(backend, Path::new(DATA))
        .await
        .map_err(|e| e.to_string())?;
    let loaded = store.load_all().await.map_err(|e| e.to_string())?;
    change(&store).await.map_err(|e| e.to_string())?;
    Ok(loaded)
}

type ChangeFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(), minikafka_broker::log::LogError>> + 'a>,
>;

/// One incarnation: load, `change`, crash; the topics it loaded.
fn incarnation(
    change: fn(&TopicStore<SimBackend>) -> ChangeFuture<'_>,
) -> Result<Vec<TopicMeta>, String> {
    let loaded = Arc::new(Mutex::new(Vec::new()));
    let slot = Arc::clone(&loaded);
    run_then_crash(move |backend| {
        let slot = Arc::clone(&slot);
        async move {
            let all = load_then(backend, change).await?;
            *slot.lock().map_err(|e| e.to_string())? = all;
            Ok(())
        }
    })?;
    let all = loaded.lock().map_err(|e| e.to_string())?.clone();
    Ok(all)
}

/// Saves three topics (one twice, growing it) and crashes; then removes one and crashes; then
/// loads. The topics each later incarnation loaded.
fn topics_after_crashes(config: SimConfig) -> Result<[Vec<TopicMeta>; 2], String> {
    minikafka_backend_sim::install(config);
    minikafka_backend_sim::host_put(&Path::new(DATA).join("cluster.id"), b"sim\n")
        .map_err(|e| e.to_string())?;
    incarnation(|store| {
        Box::pin(async move {
            for m in [meta("kept", 1), meta("deleted", 2), meta("grown", 1)] {
                store.save(&m).await?;
            }
            store.save(&meta("grown", 4)).await
        })
    })?;
    let after_saves = incarnation(|store| Box::pin(store.remove("deleted")))?;
    let after_remove = incarnation(|_| Box::pin(async { Ok(()) }))?;
    Ok([after_saves, after_remove])
}

fn expected() -> [Vec<TopicMeta>; 2] {
    [
        vec![meta("deleted", 2), meta("grown", 4), meta("kept", 1)],
        vec![meta("grown", 4), meta("kept", 1)],
    ]
}

#[test]
fn saved_and_removed_topics_survive_any_crash() {
    for seed in 0..64 {
        let loaded = topics_after_crashes(SimConfig::new(seed)).expect("runs");
        assert_eq!(loaded, expected(), "seed {seed}");
    }
}

#[test]
fn a_directory_sync_that_persists_nothing_loses_topic_changes() {
    let lost = (0..64).any(|seed| {
        let mut config = SimConfig::new(seed);
        config.broken_sync_dir = true;
        topics_after_crashes(config).map_or(true, |loaded| loaded != expected())
    });
    assert!(lost, "64 crashes on a broken directory sync lost nothing");
}
