//! The topic store's half of I25 on the crash-faithful simulated disk: once `TopicStore::save`
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

/// Runs `steps` on a one-shard run, then crashes; returns what it reported.
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

/// Saves `kept` and `deleted`, removes `deleted`, replaces `grown` with more partitions, then
/// crashes; after the crash, the topics loaded.
fn topics_after_crash(config: SimConfig) -> Result<Vec<TopicMeta>, String> {
    minikafka_backend_sim::install(config);
    minikafka_backend_sim::host_put(&Path::new(DATA).join("cluster.id"), b"sim\n")
        .map_err(|e| e.to_string())?;
    run_then_crash(|backend| async move {
        let store = TopicStore::open(backend, Path::new(DATA))
            .await
            .map_err(|e| e.to_string())?;
        for m in [meta("kept", 1), meta("deleted", 2), meta("grown", 1)] {
            store.save(&m).await.map_err(|e| e.to_string())?;
        }
        store.remove("deleted").await.map_err(|e| e.to_string())?;
        store
            .save(&meta("grown", 4))
            .await
            .map_err(|e| e.to_string())
    })?;
    let loaded = Arc::new(Mutex::new(Vec::new()));
    let slot = Arc::clone(&loaded);
    run_then_crash(move |backend| {
        let slot = Arc::clone(&slot);
        async move {
            let store = TopicStore::open(backend, Path::new(DATA))
                .await
                .map_err(|e| e.to_string())?;
            let all = store.load_all().await.map_err(|e| e.to_string())?;
            *slot.lock().map_err(|e| e.to_string())? = all;
            Ok(())
        }
    })?;
    let all = loaded.lock().map_err(|e| e.to_string())?.clone();
    Ok(all)
}

#[test]
fn saved_and_removed_topics_survive_any_crash() {
    let expected = vec![meta("grown", 4), meta("kept", 1)];
    for seed in 0..64 {
        let loaded = topics_after_crash(SimConfig::new(seed)).expect("runs");
        assert_eq!(loaded, expected, "seed {seed}");
    }
}

#[test]
fn a_directory_sync_that_persists_nothing_loses_topic_changes() {
    let expected = vec![meta("grown", 4), meta("kept", 1)];
    let lost = (0..64).any(|seed| {
        let mut config = SimConfig::new(seed);
        config.broken_sync_dir = true;
        topics_after_crash(config).map_or(true, |loaded| loaded != expected)
    });
    assert!(lost, "64 crashes on a broken directory sync lost nothing");
}
