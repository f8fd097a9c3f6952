//! Starting shards: one monoio runtime (io_uring driver, timer, one-thread blocking pool) per
//! shard thread, pinned to a CPU when there are enough.
//!
//! Contract:
//! - Inputs: a shard count and the broker's per-shard `main`.
//! - Outputs: `Ok(())` once every shard's `main` future has finished; the first start error
//!   otherwise; a panic in any shard is re-raised on the caller after all shards are joined.
//! - Start is all-or-nothing: every runtime is built first, and `main` runs on none of them
//!   unless all were built (so a failed start never leaves servers running behind an error).
//! - Never: pins two shards to one CPU (with more shards than allowed CPUs every shard runs
//!   unpinned), or falls back to epoll when a ring cannot be built (that start fails).
//!
//! There is no memlock sizing, because monoio registers no buffers and rings are not charged to
//! `RLIMIT_MEMLOCK` on the kernels this runs on (5.12 and later).

use std::io;
use std::panic;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use minikafka_core::backend::ShardId;

use crate::disk_cpus;

/// Submission queue entries of each shard's ring (monoio's default; at least 256).
pub const RING_ENTRIES: u32 = 1024;

/// The CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable, and the size passed is its size.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let cpu_count_max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is initialized and every index is below the set's capacity.
    Ok((0..cpu_count_max)
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Where each of `shard_count` shards runs: `Some(cpu)` pinned to that CPU when the shards fit
/// on distinct allowed CPUs (shard `i` on the `i`-th allowed CPU), else `None` (unpinned) for
/// every shard.
pub fn shard_placements(shard_count: usize, allowed_cpus: &[usize]) -> Vec<Option<usize>> {
    if shard_count <= allowed_cpus.len() {
        allowed_cpus
            .iter()
            .take(shard_count)
            .map(|&cpu| Some(cpu))
            .collect()
    } else {
        vec![None; shard_count]
    }
}

/// Pins the calling thread to `cpu`.
fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` came from `allowed_cpus`, below the set's capacity.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid set and the size passed is its size; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The runtime a shard runs on.
type ShardRuntime = monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>;

/// Builds this thread's runtime: pinned first (so the ring's memory is allocated on the
/// shard's CPU), one blocking thread for the calls that have no ring operation.
fn build_runtime(cpu: Option<usize>) -> io::Result<ShardRuntime> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu)?;
    }
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .with_entries(RING_ENTRIES)
        .enable_timer()
        .attach_thread_pool(Box::new(monoio::blocking::DefaultThreadPool::new(1)))
        .build()
}

/// Start-up rendezvous: shards run `main` only once every runtime is built.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

struct GateState {
    ready_count: usize,
    failure: Option<io::Error>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            state: Mutex::new(GateState {
                ready_count: 0,
                failure: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// Reports this shard's start outcome; returns whether every shard started.
    fn arrive(&self, outcome: io::Result<()>, shard_count: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match outcome {
            Ok(()) => state.ready_count += 1,
            Err(err) => {
                state.failure.get_or_insert(err);
            }
        }
        self.changed.notify_all();
        while state.ready_count < shard_count && state.failure.is_none() {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.failure.is_none()
    }

    fn take_failure(&self) -> Option<io::Error> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failure
            .take()
    }
}

/// Marks a shard as failed if its thread unwinds before it reached the gate.
struct Arrival<'a> {
    gate: &'a Gate,
    shard_count: usize,
    arrived: bool,
}

impl Arrival<'_> {
    fn arrive(mut self, outcome: io::Result<()>) -> bool {
        self.arrived = true;
        self.gate.arrive(outcome, self.shard_count)
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            let err = io::Error::other("a shard panicked while starting its runtime");
            self.gate.arrive(Err(err), self.shard_count);
        }
    }
}

/// Implements [`minikafka_core::backend::Backend::run_shards`] for
/// [`MonoioBackend`](crate::MonoioBackend): runs `main(shard)` on each shard's runtime.
/// With `data_dir`, the allowed CPUs are taken in the order of [`disk_cpus`]: the CPUs that
/// took most of that disk's interrupts first, so shard 0 runs where its syncs complete.
pub(crate) fn run_shards<F, Fut>(
    shard_count: usize,
    data_dir: Option<&Path>,
    main: F,
) -> io::Result<()>
where
    F: Fn(ShardId) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    if shard_count == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "run_shards needs at least one shard",
        ));
    }
    let mut cpus = allowed_cpus()?;
    if let Some(counts) = data_dir.and_then(disk_cpus::disk_interrupts_per_cpu) {
        cpus = disk_cpus::order_by_interrupts(&cpus, &counts);
        tracing::info!(
            ?counts,
            order = ?cpus,
            "shards pinned first to the CPUs that take the data disk's interrupts"
        );
    }
    let placements = shard_placements(shard_count, &cpus);
    let main = Arc::new(main);
    let gate = Arc::new(Gate::new());

    let mut handles = Vec::with_capacity(shard_count);
    let mut spawn_error = None;
    for (index, cpu) in placements.into_iter().enumerate() {
        let main = Arc::clone(&main);
        let gate_for_shard = Arc::clone(&gate);
        let spawned = thread::Builder::new()
            .name(format!("monoio-shard-{index}"))
            .spawn(move || {
                let arrival = Arrival {
                    gate: &gate_for_shard,
                    shard_count,
                    arrived: false,
                };
                let (runtime, outcome) = match build_runtime(cpu) {
                    Ok(runtime) => (Some(runtime), Ok(())),
                    Err(err) => (None, Err(err)),
                };
                let all_started = arrival.arrive(outcome);
                if let (true, Some(mut runtime)) = (all_started, runtime) {
                    runtime.block_on(main(ShardId(index)));
                }
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(err) => {
                // Release the shards already waiting at the gate.
                gate.arrive(Err(err), usize::MAX);
                spawn_error = gate.take_failure();
                break;
            }
        }
    }

    let mut panic_payload = None;
    for handle in handles {
        if let Err(payload) = handle.join() {
            panic_payload.get_or_insert(payload);
        }
    }
    if let Some(payload) = panic_payload {
        panic::resume_unwind(payload);
    }
    match spawn_error.or_else(|| gate.take_failure()) {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_pinned_only_when_each_gets_its_own_cpu() {
        assert_eq!(shard_placements(2, &[0, 3, 5]), vec![Some(0), Some(3)]);
        assert_eq!(shard_placements(3, &[0, 1]), vec![None, None, None]);
    }
}
