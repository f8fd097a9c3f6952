//! Shards need no locked memory: monoio registers no buffers, and rings are not charged to
//! `RLIMIT_MEMLOCK` on the kernels this backend runs on (5.12 and later), so shards start and
//! do file and timer I/O under a zero soft limit (the glommio backend this one replaced had to
//! raise the limit and size its registered memory to it).
//!
//! Its own test binary (one process, one test): it lowers this process's `RLIMIT_MEMLOCK`
//! soft limit, which would race with runtimes starting in parallel tests.

mod common;

use std::sync::{Arc, Mutex};

use common::TempDir;
use minikafka_backend_monoio::MonoioBackend;
use minikafka_core::backend::{Backend, BackendFile, OpenMode, ShardId};

fn memlock_limits() -> (libc::rlim_t, libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) };
    assert_eq!(rc, 0, "getrlimit: {}", std::io::Error::last_os_error());
    (limit.rlim_cur, limit.rlim_max)
}

#[test]
fn shards_start_and_do_io_under_a_zero_memlock_soft_limit() {
    let (_, hard) = memlock_limits();
    let limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a valid `rlimit` with soft <= hard.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) };
    assert_eq!(rc, 0, "setrlimit: {}", std::io::Error::last_os_error());
    assert_eq!(memlock_limits().0, 0);

    let dir = Arc::new(TempDir::new("memlock"));
    let root = dir.path().to_path_buf();
    let started = Arc::new(Mutex::new(Vec::new()));
    let started_in = Arc::clone(&started);
    MonoioBackend::run_shards(2, move |backend| {
        let started = Arc::clone(&started_in);
        let path = root.join(format!("shard-{}", backend.shard().0));
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let (res, _) = file.write_at(vec![7; 4096], 0).await;
            res.expect("write");
            file.sync_data().await.expect("sync");
            let (res, back) = file.read_at(Vec::new(), 0, 4096).await;
            res.expect("read");
            assert_eq!(back, vec![7; 4096]);
            file.close().await.expect("close");
            backend.sleep(std::time::Duration::from_millis(1)).await;
            started.lock().expect("lock").push(backend.shard());
        }
    })
    .expect("two shards start under a zero memlock soft limit");
    let mut started = started.lock().expect("lock").clone();
    started.sort();
    assert_eq!(started, vec![ShardId(0), ShardId(1)]);
    // The backend left the limit alone: nothing needed raising.
    assert_eq!(memlock_limits().0, 0);
}
