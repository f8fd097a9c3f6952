//! The backend's clocks: `now` never goes backwards and is shared by every shard,
//! `sleep_until` returns only once `now` reached its deadline (at once for a past one), and
//! `wall_clock_ms` is milliseconds since the Unix epoch. (The same checks run against the
//! other backend in its own `tests/clock.rs`.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use minikafka_backend_portable::PortableBackend;
use minikafka_core::backend::Backend;
use minikafka_core::clock::MonoTime;

/// 2020-09-13, well in the past: a clock reporting seconds or a zero epoch fails this.
const WALL_CLOCK_FLOOR_MS: i64 = 1_600_000_000_000;

#[test]
fn clocks_are_monotonic_and_sleep_until_reaches_its_deadline() {
    // Shard 0 publishes a time it read; shard 1, having seen it, must read a later one.
    let published: Arc<Mutex<Option<MonoTime>>> = Arc::default();
    let checked: Arc<Mutex<bool>> = Arc::default();
    let (publish, check) = (Arc::clone(&published), Arc::clone(&checked));
    PortableBackend::run_shards(2, move |backend| {
        let (publish, check) = (Arc::clone(&publish), Arc::clone(&check));
        async move {
            let start = backend.now();
            let deadline = start + Duration::from_millis(20);
            backend.sleep_until(deadline).await;
            let after = backend.now();
            assert!(after >= deadline, "{after:?} before {deadline:?}");
            // A deadline already passed returns at once.
            backend.sleep_until(start).await;
            assert!(backend.now() >= after, "monotonic");
            let wall = backend.wall_clock_ms();
            assert!(wall > WALL_CLOCK_FLOOR_MS, "wall clock {wall} ms");
            if backend.shard().0 == 0 {
                *publish.lock().expect("lock") = Some(backend.now());
                return;
            }
            for _ in 0..10_000 {
                let theirs = *publish.lock().expect("lock");
                if let Some(theirs) = theirs {
                    let mine = backend.now();
                    assert!(mine >= theirs, "shard clocks differ: {mine:?} < {theirs:?}");
                    *check.lock().expect("lock") = true;
                    return;
                }
                backend.sleep(Duration::from_millis(1)).await;
            }
        }
    })
    .expect("run two shards");
    assert!(
        *checked.lock().expect("lock"),
        "shard 1 never saw shard 0's time"
    );
}
