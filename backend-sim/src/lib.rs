//! # minikafka-backend-sim
//!
//! The simulated backend: [`SimBackend`] implements [`Backend`] on a deterministic, seeded
//! world of one thread, so the real broker can run under random schedules, crashes and faults,
//! and every run replays exactly from its seed.
//!
//! What this crate owns:
//! - **Scheduling** (`executor`): [`Backend::run_shards`] runs every shard's main, every task
//!   they spawn, and the tasks queued with [`spawn_beside_shards`] (simulated clients) on the
//!   calling thread. Among the ready tasks the seed picks which runs next.
//! - **Time** (`world`): a virtual clock from [`MonoTime::ZERO`] that moves only when nothing
//!   is runnable, straight to the next timer. Wall-clock time is
//!   [`WALL_CLOCK_ORIGIN_MS`] plus the virtual time.
//! - **Disk** (`disk`): in-memory files and directories that track what is durable;
//!   [`crash_now`] ends the run and applies a crash (see DESIGN.md, "The simulated disk").
//! - **Network** (`net`): in-memory TCP with seeded delays and resets.
//! - **Faults** ([`FaultRates`]): EIO on read, write and sync; ENOSPC; latency spikes;
//!   connection resets; a bit flipped in a sealed segment at a crash.
//! - **Randomness** ([`rng::SimRng`]): SplitMix64 seeded from [`SimConfig::seed`]; nothing
//!   else is random, so a seed is a complete recipe for a run.
//!
//! What it does not do: run anything on another thread (every shard shares this thread,
//! so cross-shard races are interleavings, not parallelism), or read a real clock.

mod disk;
mod executor;
mod net;
pub mod rng;
mod stats;
mod world;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use minikafka_core::backend::{Backend, BackendFile, OpenMode, ShardId};
use minikafka_core::clock::MonoTime;

pub use executor::RunOutcome;
pub use net::{SimListener, SimStream};
pub use stats::SimStats;
pub use world::{FaultRates, SimConfig, WALL_CLOCK_ORIGIN_MS};

use executor::{Executor, YieldNow};
use world::with_world;

/// The shard id of tasks queued with [`spawn_beside_shards`]: not a broker shard.
pub const CLIENT_SHARD: ShardId = ShardId(usize::MAX);

type BesideTask = Box<dyn FnOnce(SimBackend) -> Pin<Box<dyn Future<Output = ()>>>>;

thread_local! {
    static BESIDE: std::cell::RefCell<Vec<BesideTask>> = const { std::cell::RefCell::new(Vec::new()) };
    static LAST_OUTCOME: std::cell::Cell<Option<RunOutcome>> = const { std::cell::Cell::new(None) };
}

/// Starts a fresh world on this thread (empty disk, clock at zero) with `config`.
pub fn install(config: SimConfig) {
    BESIDE.with(|b| b.borrow_mut().clear());
    world::install(config);
    net::reset();
}

/// Ends the current `run_shards` at the end of the running task's poll and applies a crash:
/// every task is dropped, then the disk keeps only what the crash model lets it keep.
pub fn crash_now() {
    with_world(|w| w.crash_requested = true);
}

/// Requests a crash ([`crash_now`]) right after the `count`-th successful `sync_data` from
/// now, whichever file it syncs: a workload's way to crash at a chosen step of a protocol
/// that makes several writes durable in turn (a transaction's PrepareCommit record, then
/// its markers, then its Complete record). The count is forgotten when the run ends.
pub fn crash_after_syncs(count: u32) {
    with_world(|w| w.crash_after_syncs = Some(count.max(1)));
}

/// Queues `task` to run beside the shards of the next `run_shards` on this thread, on a
/// backend with shard id [`CLIENT_SHARD`]. It is dropped when the run ends.
pub fn spawn_beside_shards<F, Fut>(task: F)
where
    F: FnOnce(SimBackend) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    BESIDE.with(|b| {
        b.borrow_mut()
            .push(Box::new(move |backend| Box::pin(task(backend))))
    });
}

/// What ended the last `run_shards` on this thread.
pub fn last_outcome() -> Option<RunOutcome> {
    LAST_OUTCOME.with(|o| o.get())
}

/// The world's counters.
pub fn stats() -> SimStats {
    with_world(|w| w.stats)
}

/// The hash of every event so far (which task ran when): equal for two runs of one seed
/// exactly when they replayed the same events.
pub fn trace_hash() -> u64 {
    with_world(|w| w.trace)
}

/// Lets the other ready tasks run (each that the seeded scheduler picks before this one)
/// before the caller continues: a workload's way to act "a few steps later", e.g. crash the
/// broker partway through a commit.
pub async fn yield_now() {
    YieldNow(false).await;
}

/// The virtual time now.
pub fn now() -> MonoTime {
    with_world(|w| w.now)
}

/// The paths of the sealed segments a bit flip hit so far.
pub fn flipped_segments() -> Vec<PathBuf> {
    with_world(|w| w.flipped.clone())
}

/// A random number from the world's generator (for the simulator's own choices, so one seed
/// drives everything).
pub fn random_below(n: u64) -> u64 {
    with_world(|w| w.rng.below(n))
}

/// Setup outside any run: the current bytes of the file at `path`, if it exists.
pub fn host_read(path: &Path) -> Option<Vec<u8>> {
    with_world(|w| w.disk.read_whole(path))
}

/// Setup outside any run: writes `bytes` as the file at `path`, durably, creating its
/// directories.
pub fn host_put(path: &Path, bytes: &[u8]) -> io::Result<()> {
    with_world(|w| w.disk.put_durable(path, bytes))
}

/// Setup outside any run: removes the file at `path` durably; whether it existed.
pub fn host_remove(path: &Path) -> io::Result<bool> {
    with_world(|w| w.disk.remove_durable(path))
}

/// One shard's view of the simulated world.
#[derive(Clone, Debug)]
pub struct SimBackend {
    shard: ShardId,
}

impl SimBackend {
    /// A backend for `shard` (file, network and timer calls work inside any `run_shards`).
    pub fn new(shard: ShardId) -> Self {
        SimBackend { shard }
    }
}

/// Waits the delay the world draws before a file operation (often none: then it yields once
/// half the time, so other ready tasks may interleave).
async fn file_op_delay() {
    let delay = with_world(|w| w.file_op_delay());
    if delay.is_zero() {
        if random_below(2) == 0 {
            YieldNow(false).await;
        }
    } else {
        sleep_for(delay).await;
    }
}

/// The OS error `code` (the broker tells ENOSPC from EIO by it).
fn io_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

/// `EIO` and `ENOSPC` on Linux and macOS.
const EIO: i32 = 5;
const ENOSPC: i32 = 28;
/// `EBADF`: a write through a read-only handle.
const EBADF: i32 = 9;

/// Completes once the virtual clock reaches `at`.
struct Sleep {
    at: MonoTime,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        with_world(|w| {
            if w.now >= self.at {
                std::task::Poll::Ready(())
            } else {
                w.add_timer(self.at, cx.waker().clone());
                std::task::Poll::Pending
            }
        })
    }
}

async fn sleep_for(duration: Duration) {
    let at = with_world(|w| w.now + duration);
    Sleep { at }.await;
}

/// An open simulated file.
#[derive(Debug)]
pub struct SimFile {
    ino: u64,
    writable: bool,
    epoch: u64,
}

impl SimFile {
    fn check_epoch(&self) -> io::Result<()> {
        if with_world(|w| w.epoch) == self.epoch {
            Ok(())
        } else {
            Err(io::Error::other("file handle from before a crash"))
        }
    }

    /// A write of `buf` at `pos`: what `write_at` and `write_parts_at` both do.
    async fn write_bytes(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        file_op_delay().await;
        self.check_epoch()?;
        if !self.writable {
            return Err(io_error(EBADF));
        }
        with_world(|w| {
            let f = w.config.faults;
            let failure = if w.fault(f.write_eio) {
                w.stats.write_eio += 1;
                Some(EIO)
            } else if w.fault(f.write_enospc) {
                w.stats.write_enospc += 1;
                Some(ENOSPC)
            } else {
                None
            };
            match failure {
                Some(code) => {
                    // A failing write may still have put a prefix in the file.
                    let prefix = w.rng.below(buf.len() as u64 + 1) as usize;
                    w.disk.write(self.ino, pos, &buf[..prefix])?;
                    Err(io_error(code))
                }
                None => w.disk.write(self.ino, pos, buf),
            }
        })
    }
}

impl BackendFile for SimFile {
    async fn read_at(&self, mut buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        buf.clear();
        file_op_delay().await;
        if let Err(e) = self.check_epoch() {
            return (Err(e), buf);
        }
        let result = with_world(|w| {
            if w.fault(w.config.faults.read_eio) {
                w.stats.read_eio += 1;
                return Err(io_error(EIO));
            }
            w.disk.read(self.ino, pos, len, &mut buf)
        });
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        let result = self.write_bytes(&buf, pos).await;
        (result, buf)
    }

    /// The simulated disk keeps bytes, not buffers: the parts are written as their
    /// concatenation, with the same faults (a failing write may leave any prefix of it).
    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>) {
        let result = self.write_bytes(&parts.concat(), pos).await;
        (result, parts)
    }

    async fn sync_data(&self) -> io::Result<()> {
        file_op_delay().await;
        self.check_epoch()?;
        with_world(|w| {
            if w.fault(w.config.faults.sync_eio) {
                w.stats.sync_eio += 1;
                return Err(io_error(EIO));
            }
            if w.config.broken_sync_data {
                return Ok(());
            }
            w.disk.sync_data(self.ino)?;
            if let Some(left) = w.crash_after_syncs {
                if left <= 1 {
                    w.crash_after_syncs = None;
                    w.crash_requested = true;
                } else {
                    w.crash_after_syncs = Some(left - 1);
                }
            }
            Ok(())
        })
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        file_op_delay().await;
        self.check_epoch()?;
        if !self.writable {
            return Err(io_error(EBADF));
        }
        with_world(|w| w.disk.truncate(self.ino, len))
    }

    /// The length grows to at least `offset + len` with zeros, durable at the next sync (a
    /// crash keeps or loses it, as a truncate: I190). Counted ([`SimStats::preallocations`]).
    /// No delay is drawn, so the seeds' schedules do not depend on it.
    async fn preallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check_epoch()?;
        if !self.writable {
            return Err(io_error(EBADF));
        }
        let end = offset
            .checked_add(len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "preallocation past u64"))?;
        with_world(|w| {
            w.stats.preallocations += 1;
            w.disk.extend(self.ino, end)
        })
    }

    async fn len(&self) -> io::Result<u64> {
        self.check_epoch()?;
        with_world(|w| w.disk.len(self.ino))
    }

    async fn close(self) -> io::Result<()> {
        Ok(())
    }
}

impl Backend for SimBackend {
    type File = SimFile;
    type Listener = SimListener;

    fn name(&self) -> &'static str {
        "sim"
    }

    fn shard(&self) -> ShardId {
        self.shard
    }

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<SimFile> {
        file_op_delay().await;
        with_world(|w| {
            let (create, exclusive) = match mode {
                OpenMode::ReadWriteCreate => (true, false),
                OpenMode::CreateNew => (true, true),
                OpenMode::ReadWrite | OpenMode::ReadOnly => (false, false),
            };
            let ino = w.disk.open(path, create, exclusive)?;
            Ok(SimFile {
                ino,
                writable: mode != OpenMode::ReadOnly,
                epoch: w.epoch,
            })
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| w.disk.remove_file(path))
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| w.disk.rename(from, to))
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| w.disk.create_dir_all(path))
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| w.disk.remove_dir_all(path))
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        file_op_delay().await;
        with_world(|w| w.disk.list_dir(path))
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| {
            if w.fault(w.config.faults.sync_eio) {
                w.stats.sync_eio += 1;
                return Err(io_error(EIO));
            }
            if w.config.broken_sync_dir {
                return Ok(());
            }
            w.disk.sync_dir(path)
        })
    }

    async fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        file_op_delay().await;
        with_world(|w| {
            if w.fault(w.config.faults.sync_eio) {
                w.stats.sync_eio += 1;
                return Err(io_error(EIO));
            }
            // The broken modes break this sync the way they break the per-file ones.
            let (data, dirs) = (!w.config.broken_sync_data, !w.config.broken_sync_dir);
            w.disk.sync_filesystem(path, data, dirs)
        })
    }

    async fn listen(&self, addr: SocketAddr) -> io::Result<SimListener> {
        let epoch = with_world(|w| w.epoch);
        net::with_net(|n| {
            let id = n.listen(addr);
            let mut bound = addr;
            bound.set_port(n.port_of(id).unwrap_or(addr.port()));
            Ok(SimListener {
                id,
                addr: bound,
                epoch,
            })
        })
    }

    async fn connect(&self, addr: SocketAddr) -> io::Result<SimStream> {
        let listeners = net::with_net(|n| n.listeners_on(addr));
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("nothing listens on {addr} (simulated)"),
            ));
        }
        let pick = listeners[with_world(|w| w.rng.below(listeners.len() as u64)) as usize];
        let stream = net::with_net(|n| n.connect(pick))
            .ok_or_else(|| io::Error::other("listener vanished"))?;
        // The handshake takes a network round trip.
        let delay = with_world(|w| w.config.net_delay_max);
        sleep_for(delay).await;
        Ok(stream)
    }

    async fn sleep(&self, duration: Duration) {
        sleep_for(duration).await;
    }

    fn now(&self) -> MonoTime {
        with_world(|w| w.now)
    }

    fn wall_clock_ms(&self) -> i64 {
        let ms = with_world(|w| w.now.0.as_millis());
        WALL_CLOCK_ORIGIN_MS.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))
    }

    /// From the world's generator: the seed decides it.
    fn random_u64(&self) -> u64 {
        with_world(|w| w.rng.next_u64())
    }

    async fn sleep_until(&self, deadline: MonoTime) {
        Sleep { at: deadline }.await;
    }

    /// In place: the simulated world is single-threaded and replays exactly.
    async fn run_blocking<R, F>(&self, func: F) -> io::Result<R>
    where
        F: FnOnce() -> io::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        func()
    }

    /// # Panics
    /// Outside `run_shards` on this thread.
    fn spawn_local<F: Future<Output = ()> + 'static>(&self, task: F) {
        executor::spawn_current(task);
    }

    /// Runs `count` shard mains (and the tasks queued with [`spawn_beside_shards`]) on this
    /// thread until every main finished, a crash was requested ([`crash_now`]: the crash is
    /// applied before returning `Ok`), or nothing can run. [`last_outcome`] says which.
    ///
    /// Errors: `InvalidInput` for zero shards; `Other` when the run stalled (no task ready,
    /// no timer pending) or livelocked. A panicking task propagates out of this call at once.
    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        if count == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "run_shards needs at least one shard",
            ));
        }
        with_world(|w| w.crash_requested = false);
        let executor = Executor::new();
        let guard = executor::enter(&executor);
        let remaining = std::rc::Rc::new(std::cell::Cell::new(count));
        for index in 0..count {
            let fut = main(SimBackend::new(ShardId(index)));
            let remaining = std::rc::Rc::clone(&remaining);
            executor.spawn(async move {
                fut.await;
                remaining.set(remaining.get() - 1);
            });
        }
        for task in BESIDE.with(|b| std::mem::take(&mut *b.borrow_mut())) {
            executor.spawn(task(SimBackend::new(CLIENT_SHARD)));
        }
        let outcome = executor.run(|| remaining.get() == 0);
        with_world(|w| w.crash_after_syncs = None);
        drop(guard); // drops every task (and so every file handle and stream)
        let stale_timers = with_world(|w| w.clear_timers());
        drop(stale_timers);
        LAST_OUTCOME.with(|o| o.set(Some(outcome)));
        match outcome {
            RunOutcome::Finished => Ok(()),
            RunOutcome::Crashed => {
                with_world(|w| {
                    w.crash_requested = false;
                    w.crash();
                });
                // Every connection and listener is gone with the crash.
                net::reset();
                Ok(())
            }
            RunOutcome::Stalled => Err(io::Error::other(
                "simulation stalled: no task ready and no timer pending (a lost wakeup or a deadlock)",
            )),
            RunOutcome::Livelocked => Err(io::Error::other(
                "simulation livelocked: the poll budget ran out",
            )),
        }
    }
}

/// Changes the fault rates of this thread's world from now on (the simulator turns faults
/// off for its final verification).
pub fn set_faults(faults: FaultRates) {
    with_world(|w| w.config.faults = faults);
}
