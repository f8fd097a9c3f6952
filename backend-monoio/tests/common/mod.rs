//! Helpers shared by the monoio backend's integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use minikafka_backend_monoio::MonoioBackend;
use minikafka_core::backend::Backend;

/// A fresh, empty directory under the system temp dir, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/minikafka-monoio-<pid>-<name>-<n>`.
    pub fn new(name: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "minikafka-monoio-{}-{name}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Runs `body` on a single monoio shard and waits for it; panics in `body` fail the test.
pub fn on_one_shard<F, Fut>(body: F)
where
    F: Fn(MonoioBackend) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + 'static,
{
    MonoioBackend::run_shards(1, body).expect("start one monoio shard");
}
