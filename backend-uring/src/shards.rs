//! Starting shards: one glommio `LocalExecutor` per shard, pinned to a CPU when there are
//! enough, with io_uring memory sized to fit `RLIMIT_MEMLOCK`.
//!
//! Contract:
//! - Inputs: a shard count and the broker's per-shard `main`.
//! - Outputs: `Ok(())` once every shard's `main` future has finished; the first start error
//!   otherwise; a panic in any shard is re-raised on the caller after all shards are joined.
//! - Start is all-or-nothing: every executor is built first, and `main` runs on none of them
//!   unless all were built (so a failed start never leaves servers running behind an error).
//! - Never: raises the *hard* memlock limit, or pins two shards to one CPU (with more shards
//!   than allowed CPUs every shard runs unpinned).
//!
//! Memlock: glommio registers `io_memory` bytes of buffers with each of its three rings per
//! executor (main, latency, poll); without `CAP_IPC_LOCK` the kernel charges every
//! registration against `RLIMIT_MEMLOCK`, and glommio refuses to start an executor at all below
//! a 512 KiB soft limit. glommio's default `io_memory` is 10 MiB, more than this machine's
//! 8 MiB hard limit allows even for one shard. So [`run_shards`] first raises the soft limit to
//! the hard limit, then gives each shard [`io_memory_bytes`]: half the limit split over all
//! registrations. (If registration still fails glommio only logs it and falls back to
//! unregistered buffers; the executor starts either way.)

use std::io;
use std::panic;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use glommio::{LocalExecutorBuilder, Placement};
use minikafka_core::backend::ShardId;

use crate::error::os_error;

/// glommio's default (and our ceiling) for registered io memory per executor.
pub const IO_MEMORY_MAX_BYTES: usize = 10 << 20;
/// glommio's floor for registered io memory per executor.
pub const IO_MEMORY_MIN_BYTES: usize = 64 << 10;
/// glommio refuses to build an executor when the memlock soft limit is below this.
pub const MEMLOCK_MIN_BYTES: u64 = 512 << 10;
/// Rings per glommio executor that register the io memory (main, latency, poll).
pub const RINGS_PER_SHARD: usize = 3;

const PAGE_BYTES: usize = 4096;

/// Registered io memory for each of `shard_count` executors so that all their registrations
/// together use at most half of `memlock_bytes`, clamped to glommio's
/// [`IO_MEMORY_MIN_BYTES`]..=[`IO_MEMORY_MAX_BYTES`] and rounded down to a page.
pub fn io_memory_bytes(shard_count: usize, memlock_bytes: u64) -> usize {
    let registrations = shard_count.max(1).saturating_mul(RINGS_PER_SHARD) as u64;
    let share_bytes = (memlock_bytes / 2) / registrations;
    let share_bytes = usize::try_from(share_bytes).unwrap_or(usize::MAX);
    let clamped = share_bytes.clamp(IO_MEMORY_MIN_BYTES, IO_MEMORY_MAX_BYTES);
    clamped - clamped % PAGE_BYTES
}

fn rlimit_bytes(value: libc::rlim_t) -> u64 {
    if value == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        value
    }
}

/// The current `RLIMIT_MEMLOCK` as `(soft_bytes, hard_bytes)`; unlimited reads as `u64::MAX`.
pub fn memlock_limits() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit` for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((rlimit_bytes(limit.rlim_cur), rlimit_bytes(limit.rlim_max)))
}

/// Raises the `RLIMIT_MEMLOCK` soft limit to the hard limit (allowed without privileges) and
/// returns the soft limit now in effect, in bytes.
pub fn raise_memlock_soft_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit` for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur != limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid `rlimit`; the soft limit does not exceed the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(rlimit_bytes(limit.rlim_cur))
}

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

/// Start-up rendezvous: shards run `main` only once every executor is built.
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
            let err = io::Error::other("a shard panicked while starting its executor");
            self.gate.arrive(Err(err), self.shard_count);
        }
    }
}

/// Implements [`minikafka_core::backend::Backend::run_shards`] for
/// [`UringBackend`](crate::UringBackend): runs `main(shard)` on each shard's executor (the
/// caller builds the shard's backend there, so this module needs only the shard's id).
pub(crate) fn run_shards<F, Fut>(shard_count: usize, main: F) -> io::Result<()>
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
    let memlock_bytes = raise_memlock_soft_limit()?;
    if memlock_bytes < MEMLOCK_MIN_BYTES {
        return Err(io::Error::other(format!(
            "RLIMIT_MEMLOCK hard limit is {memlock_bytes} bytes; glommio needs at least \
             {MEMLOCK_MIN_BYTES} (raise it with `ulimit -l` or limits.conf)"
        )));
    }
    let io_memory = io_memory_bytes(shard_count, memlock_bytes);
    let placements = shard_placements(shard_count, &allowed_cpus()?);
    let main = Arc::new(main);
    let gate = Arc::new(Gate::new());

    let mut handles = Vec::with_capacity(shard_count);
    let mut spawn_error = None;
    for (index, cpu) in placements.into_iter().enumerate() {
        let main = Arc::clone(&main);
        let gate_for_shard = Arc::clone(&gate);
        let spawned = thread::Builder::new()
            .name(format!("uring-shard-{index}"))
            .spawn(move || {
                let arrival = Arrival {
                    gate: &gate_for_shard,
                    shard_count,
                    arrived: false,
                };
                let placement = cpu.map_or(Placement::Unbound, Placement::Fixed);
                let built = LocalExecutorBuilder::new(placement)
                    .name(&format!("uring-shard-{index}"))
                    .io_memory(io_memory)
                    .make();
                let (executor, outcome) = match built {
                    Ok(executor) => (Some(executor), Ok(())),
                    Err(err) => (None, Err(os_error(err))),
                };
                let all_started = arrival.arrive(outcome);
                if let (true, Some(executor)) = (all_started, executor) {
                    executor.run(main(ShardId(index)));
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
