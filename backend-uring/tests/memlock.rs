//! The memlock soft limit is raised in code, not left to luck.
//!
//! Its own test binary (one process, one test): it lowers this process's `RLIMIT_MEMLOCK`
//! soft limit, which would race with executors starting in parallel tests.

use minikafka_backend_uring::{memlock_limits, UringBackend, MEMLOCK_MIN_BYTES};
use minikafka_core::backend::{Backend, ShardId};
use std::sync::{Arc, Mutex};

fn set_soft_limit(soft_bytes: u64) {
    let (_, hard_bytes) = memlock_limits().expect("getrlimit");
    let limit = libc::rlimit {
        rlim_cur: soft_bytes,
        rlim_max: if hard_bytes == u64::MAX {
            libc::RLIM_INFINITY
        } else {
            hard_bytes
        },
    };
    // SAFETY: `limit` is a valid `rlimit` with soft <= hard.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn shards_start_after_a_soft_limit_too_low_for_glommio() {
    let (_, hard_bytes) = memlock_limits().expect("getrlimit");
    assert!(
        hard_bytes >= MEMLOCK_MIN_BYTES,
        "this machine's hard memlock limit ({hard_bytes}) is below what glommio needs"
    );
    let low_bytes = MEMLOCK_MIN_BYTES / 2;
    set_soft_limit(low_bytes);

    // glommio alone refuses to build an executor under this soft limit...
    let refused = std::thread::spawn(|| glommio::LocalExecutorBuilder::default().make().is_err())
        .join()
        .expect("thread");
    assert!(refused, "glommio must refuse a {low_bytes}-byte soft limit");

    // ...and the backend raises the soft limit to the hard one, then starts two shards.
    let started = Arc::new(Mutex::new(Vec::new()));
    let started_in = Arc::clone(&started);
    UringBackend::run_shards(2, move |backend| {
        let started = Arc::clone(&started_in);
        async move {
            started.lock().expect("lock").push(backend.shard());
        }
    })
    .expect("two shards start after raising the soft limit");
    let mut started = started.lock().expect("lock").clone();
    started.sort();
    assert_eq!(started, vec![ShardId(0), ShardId(1)]);
    assert_eq!(memlock_limits().expect("getrlimit").0, hard_bytes);
}
