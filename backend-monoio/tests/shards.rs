//! Starting shards, pinning, and start/stop behaviour.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::TempDir;
use minikafka_backend_monoio::{allowed_cpus, disk_cpus, shard_placements, MonoioBackend};
use minikafka_core::backend::{Backend, BackendFile, OpenMode, ShardId};

#[test]
fn placements_pin_only_when_shards_fit() {
    assert_eq!(shard_placements(2, &[0, 1]), vec![Some(0), Some(1)]);
    assert_eq!(shard_placements(1, &[3, 5]), vec![Some(3)]);
    assert_eq!(shard_placements(3, &[0, 1]), vec![None, None, None]);
    assert!(shard_placements(0, &[0]).is_empty());
    let cpus = allowed_cpus().expect("affinity");
    assert!(!cpus.is_empty());
    assert!(cpus.windows(2).all(|w| w[0] < w[1]), "ascending, distinct");
}

/// Two shards start, each with its own runtime, thread and ring, and each does file I/O.
#[test]
fn two_shards_start_and_each_does_file_io() {
    let dir = Arc::new(TempDir::new("two-shards"));
    let root = dir.path().to_path_buf();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in = Arc::clone(&seen);
    MonoioBackend::run_shards(2, move |backend| {
        let seen = Arc::clone(&seen_in);
        let path = root.join(format!("shard-{}", backend.shard().0));
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open on shard");
            let (res, _) = file.write_at(vec![backend.shard().0 as u8; 100], 0).await;
            res.expect("write on shard");
            file.sync_data().await.expect("sync on shard");
            file.close().await.expect("close");
            assert_eq!(backend.name(), "monoio");
            let thread = std::thread::current().name().map(str::to_owned);
            seen.lock().expect("lock").push((backend.shard(), thread));
        }
    })
    .expect("two shards start");

    let mut seen = seen.lock().expect("lock").clone();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            (ShardId(0), Some("monoio-shard-0".to_owned())),
            (ShardId(1), Some("monoio-shard-1".to_owned())),
        ]
    );
    for shard in 0..2u8 {
        let bytes = std::fs::read(dir.path().join(format!("shard-{shard}"))).expect("read");
        assert_eq!(bytes, vec![shard; 100]);
    }
}

#[test]
fn more_shards_than_cpus_run_unpinned() {
    let shard_count = allowed_cpus().expect("affinity").len() + 1;
    let ran = Arc::new(AtomicUsize::new(0));
    let ran_in = Arc::clone(&ran);
    MonoioBackend::run_shards(shard_count, move |backend| {
        let ran = Arc::clone(&ran_in);
        async move {
            backend.sleep(std::time::Duration::from_millis(1)).await;
            ran.fetch_add(1, Ordering::SeqCst);
        }
    })
    .expect("oversubscribed shards start");
    assert_eq!(ran.load(Ordering::SeqCst), shard_count);
}

#[test]
fn zero_shards_is_an_error() {
    let err = MonoioBackend::run_shards(0, |_backend| async {}).expect_err("zero shards");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn a_panicking_shard_panics_the_caller_after_all_shards_finish() {
    let finished = Arc::new(AtomicUsize::new(0));
    let finished_in = Arc::clone(&finished);
    let outcome = std::panic::catch_unwind(move || {
        let _ = MonoioBackend::run_shards(2, move |backend| {
            let finished = Arc::clone(&finished_in);
            async move {
                if backend.shard() == ShardId(0) {
                    panic!("shard 0 fails on purpose");
                }
                backend.sleep(std::time::Duration::from_millis(20)).await;
                finished.fetch_add(1, Ordering::SeqCst);
            }
        });
    });
    let payload = outcome.expect_err("the shard's panic reaches the caller");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("shard 0 fails on purpose")
    );
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "shard 1 was joined first"
    );
}

#[test]
fn spawned_tasks_and_timers_run_on_the_shard() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let order_in = Arc::clone(&order);
    MonoioBackend::run_shards(1, move |backend| {
        let order = Arc::clone(&order_in);
        async move {
            let (tx, rx) = futures::channel::oneshot::channel();
            let spawner = backend.clone();
            let order_task = Arc::clone(&order);
            backend.spawn_local(async move {
                spawner.sleep(std::time::Duration::from_millis(10)).await;
                order_task.lock().expect("lock").push("task");
                let _ = tx.send(());
            });
            order.lock().expect("lock").push("main");
            rx.await.expect("task ran");
            order.lock().expect("lock").push("main after task");
        }
    })
    .expect("run");
    assert_eq!(
        *order.lock().expect("lock"),
        vec!["main", "task", "main after task"]
    );
}

/// Started for a data directory, shard 0 is pinned to the allowed CPU that took most of that
/// disk's interrupts (read here the same way, from this machine's /sys and /proc/interrupts),
/// or to the first allowed CPU when they are not known. A disk whose interrupts spread evenly
/// over CPUs (per-CPU NVMe queues) may change which CPU leads while the shard starts, so the
/// counts are read before and after, and any CPU within 1 % of the leader's count then is right.
#[test]
fn shard_zero_runs_on_the_cpu_that_takes_the_data_disks_interrupts() {
    let dir = TempDir::new("disk-cpus");
    let allowed = allowed_cpus().expect("affinity");
    let leading_cpus = || match disk_cpus::disk_interrupts_per_cpu(dir.path()) {
        Some(counts) => {
            let count = |cpu: &usize| counts.get(cpu).copied().unwrap_or(0);
            let ordered = disk_cpus::order_by_interrupts(&allowed, &counts);
            let most = count(&ordered[0]);
            ordered
                .into_iter()
                .filter(|cpu| count(cpu) >= most - most / 100)
                .collect::<Vec<_>>()
        }
        None => vec![allowed[0]],
    };
    let before = leading_cpus();
    let pinned = Arc::new(Mutex::new(None));
    let pinned_in = Arc::clone(&pinned);
    MonoioBackend::run_shards_for_data(1, dir.path(), move |_backend| {
        let pinned = Arc::clone(&pinned_in);
        async move {
            // `allowed_cpus` is the calling thread's affinity: here, the shard's pin.
            *pinned.lock().expect("lock") = Some(allowed_cpus().expect("the shard's affinity"));
        }
    })
    .expect("one shard starts");
    let after = leading_cpus();
    let pinned = pinned.lock().expect("lock").take().expect("the shard ran");
    assert!(
        pinned.len() == 1 && (before.contains(&pinned[0]) || after.contains(&pinned[0])),
        "shard 0 on {pinned:?}, the disk's leading CPUs {before:?} before the start and {after:?} after"
    );
}
