//! Running one measurement on a fresh single shard of any backend.
//!
//! Contract:
//! - Input: a backend type `B` and a workload `FnOnce(B) -> Future<Output = T>`.
//! - Output: the workload's `T`, after `B::run_shards(1, …)` has started a shard, run it to
//!   completion and joined it, so every measurement gets a fresh executor (and, for monoio,
//!   fresh rings). Both backends go through the same code: nothing here is per backend except
//!   the sync counter each one exposes under its own name ([`SyncCounter`]).
//! - Never: retries, or hides a shard that produced no result (that is an error).

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use minikafka_backend_portable::PortableBackend;
use minikafka_core::backend::Backend;

/// A backend that counts the `fdatasync`s it issued (to cross-check the log's own count).
pub trait SyncCounter: Backend {
    /// `sync_data` calls issued on this shard so far.
    fn syncs_issued(&self) -> u64;
}

impl SyncCounter for PortableBackend {
    fn syncs_issued(&self) -> u64 {
        self.stats().sync_count
    }
}

#[cfg(target_os = "linux")]
impl SyncCounter for minikafka_backend_monoio::MonoioBackend {
    fn syncs_issued(&self) -> u64 {
        self.io_stats().file_syncs
    }
}

/// Runs `workload` on a fresh single shard of `B` and returns its output.
pub fn on_fresh_shard<B, T, F, Fut>(workload: F) -> io::Result<T>
where
    B: Backend,
    T: Send + 'static,
    F: FnOnce(B) -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
{
    let result: Arc<Mutex<Option<T>>> = Arc::new(Mutex::new(None));
    let slot = Arc::clone(&result);
    // `run_shards` takes an `Fn` shared by its shards; with one shard it is called once.
    let once = Mutex::new(Some(workload));
    B::run_shards(1, move |backend| {
        let workload = once.lock().unwrap_or_else(PoisonError::into_inner).take();
        let slot = Arc::clone(&slot);
        async move {
            if let Some(workload) = workload {
                let value = workload(backend).await;
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
            }
        }
    })?;
    let value = result.lock().unwrap_or_else(PoisonError::into_inner).take();
    value.ok_or_else(|| io::Error::other("the benchmark shard finished without a result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_generic<B: SyncCounter>() -> (usize, u64) {
        on_fresh_shard::<B, _, _, _>(|backend: B| async move {
            (backend.shard().0, backend.syncs_issued())
        })
        .expect("shard ran")
    }

    #[test]
    fn portable_shard_returns_the_workload_output() {
        assert_eq!(run_generic::<PortableBackend>(), (0, 0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn monoio_shard_returns_the_workload_output() {
        assert_eq!(
            run_generic::<minikafka_backend_monoio::MonoioBackend>(),
            (0, 0)
        );
    }
}
