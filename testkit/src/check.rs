//! The one set of helpers every suite uses: a check's result ([`Check`]), [`ensure`] and
//! [`Step`] to fail with a message naming the step, scratch directories, and the runners that
//! run checks on a shard of a backend and collect their failures.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use minikafka_core::backend::Backend;

/// The result of one check: `Err` carries a message naming the step that failed.
pub type Check = Result<(), String>;

/// Names the step of an error, for any error that displays: `result.step("open")?`.
pub trait Step<T> {
    /// `Err(e)` becomes `Err("{what}: {e}")`.
    fn step(self, what: &str) -> Result<T, String>;
}

impl<T, E: std::fmt::Display> Step<T> for Result<T, E> {
    fn step(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// A fresh, empty, unique directory under the system temp dir (`label`, process id and a
/// counter in its name). Created with `std::fs` because it is set up before any shard runs.
///
/// # Panics
/// If the directory cannot be created.
pub fn scratch_dir(label: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("minikafka-{label}-{}-{n}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("remove stale scratch dir");
    }
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Turns an I/O result into a check result whose error names the step.
pub fn step<T>(what: &str, result: io::Result<T>) -> Result<T, String> {
    result.map_err(|e| format!("{what}: unexpected error: {e}"))
}

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// Runs one check on a single shard of `B`, in `dir`, and returns its result.
///
/// A panic inside the check, or a failure of `run_shards` itself, is returned as `Err`.
pub fn run_check<B, F, Fut>(dir: &Path, check: F) -> Result<(), String>
where
    B: Backend,
    F: Fn(B, PathBuf) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + 'static,
{
    let outcome: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
    let slot = Arc::clone(&outcome);
    let dir = dir.to_path_buf();
    let ran = B::run_shards(1, move |backend| {
        let (slot, fut) = (Arc::clone(&slot), check(backend, dir.clone()));
        async move {
            let result = fut.await;
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
    });
    step("run_shards(1)", ran)?;
    let result = outcome.lock().unwrap_or_else(|e| e.into_inner()).take();
    result.unwrap_or_else(|| Err("the check never finished".to_string()))
}

/// Runs one check inside an async block, as `check(&backend, &sub)` with `sub` the
/// subdirectory of `root` named after it, and pushes its failure, as `"name: message"`, onto
/// the `Vec<String>` `failed`.
macro_rules! run_check_into {
    ($failed:ident, $backend:expr, $root:expr, $check:ident) => {{
        let sub = $root.join(stringify!($check));
        if let Err(e) = $check(&$backend, &sub).await {
            $failed.push(format!("{}: {e}", stringify!($check)));
        }
    }};
}
pub(crate) use run_check_into;

/// Runs the listed checks in order inside an async block (each as [`run_check_into`] does)
/// and evaluates to their failures. Pairs with [`run_on_one_shard`].
macro_rules! run_checks {
    ($backend:expr, $root:expr, [$($check:ident),* $(,)?]) => {{
        let mut failed: Vec<String> = Vec::new();
        $($crate::check::run_check_into!(failed, $backend, $root, $check);)*
        failed
    }};
}
pub(crate) use run_checks;

/// Runs `checks` once on a single shard of `B`, given the backend and `dir`, and returns the
/// failures it reports, plus one if `run_shards` fails or returns before `checks` finished.
pub fn run_on_one_shard<B, F, Fut>(dir: &Path, checks: F) -> Vec<String>
where
    B: Backend,
    F: Fn(B, PathBuf) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<String>> + 'static,
{
    let outcome: Arc<Mutex<Option<Vec<String>>>> = Arc::default();
    let (sink, root) = (Arc::clone(&outcome), dir.to_path_buf());
    let ran = B::run_shards(1, move |backend| {
        let (sink, fut) = (Arc::clone(&sink), checks(backend, root.clone()));
        async move {
            let failed = fut.await;
            *sink.lock().unwrap_or_else(|e| e.into_inner()) = Some(failed);
        }
    });
    let mut failures = match outcome.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(failed) => failed,
        None => vec!["the checks never finished".to_string()],
    };
    if let Err(e) = ran {
        failures.push(format!("run_shards(1): {e}"));
    }
    failures
}

/// Panics with `what` and the list of `failures`, if there are any.
///
/// # Panics
/// When `failures` is not empty.
pub fn assert_none_failed(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{what} failed ({}):\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}
