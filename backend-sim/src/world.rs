//! The simulated world of one thread: the seeded generator, the virtual clock and its timers,
//! the disk, the fault plan and the counters (the network's listeners sit beside it, in
//! `net`'s own thread-local, reset together with it). Every part of the backend reaches it
//! through [`with_world`]; it lives in a thread-local, so a world is one thread's, and survives
//! between `run_shards` calls (a restarted broker finds the disk its crash left).

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::task::Waker;
use std::time::Duration;

use minikafka_core::clock::MonoTime;

use crate::disk::Disk;
use crate::rng::SimRng;
use crate::stats::SimStats;

/// Wall-clock time at virtual time zero: 2023-11-14, so record timestamps look real.
pub const WALL_CLOCK_ORIGIN_MS: i64 = 1_700_000_000_000;

/// How often each fault fires, in chances per million eligible operations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultRates {
    /// `read_at` fails with EIO.
    pub read_eio: u32,
    /// `write_at` fails with EIO after writing a random prefix.
    pub write_eio: u32,
    /// `write_at` fails with ENOSPC after writing a random prefix.
    pub write_enospc: u32,
    /// `sync_data` / `sync_dir` fails with EIO and makes nothing durable.
    pub sync_eio: u32,
    /// A file operation stalls for 10–300 ms of virtual time.
    pub latency_spike: u32,
    /// A stream write resets the connection (both directions fail from then on).
    pub connection_reset: u32,
    /// At a crash, one bit of a sealed segment (`*.log`, not the newest in its directory)
    /// flips on the durable disk.
    pub bit_flip_at_crash: u32,
}

impl FaultRates {
    /// No faults at all.
    pub const NONE: FaultRates = FaultRates {
        read_eio: 0,
        write_eio: 0,
        write_enospc: 0,
        sync_eio: 0,
        latency_spike: 0,
        connection_reset: 0,
        bit_flip_at_crash: 0,
    };
}

/// How a world behaves; fixed for its lifetime.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seeds every random choice: schedule, delays, faults, what a crash keeps.
    pub seed: u64,
    /// Faults to inject.
    pub faults: FaultRates,
    /// Longest one-way delay of a stream write (drawn uniformly from zero to this).
    pub net_delay_max: Duration,
    /// A deliberately broken disk: `sync_data` reports success but makes nothing durable
    /// (the simulator must catch the loss this causes). Never set outside such tests.
    pub broken_sync_data: bool,
    /// A deliberately broken disk: `sync_dir` reports success but makes no directory change
    /// durable (creates, renames and removals may all be lost at a crash). Never set outside
    /// such tests.
    pub broken_sync_dir: bool,
    /// Most task polls one `run_shards` may make before it gives up as livelocked.
    pub max_polls: u64,
}

impl SimConfig {
    /// A world with `seed`, no faults and small network delays.
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            faults: FaultRates::NONE,
            net_delay_max: Duration::from_micros(500),
            broken_sync_data: false,
            broken_sync_dir: false,
            max_polls: 50_000_000,
        }
    }
}

/// A pending timer: wakes `waker` once the clock reaches `at` (`seq` orders equal deadlines).
struct Timer {
    at: MonoTime,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// One thread's simulated world.
pub(crate) struct World {
    pub(crate) config: SimConfig,
    pub(crate) rng: SimRng,
    pub(crate) now: MonoTime,
    timers: BinaryHeap<Reverse<Timer>>,
    timer_seq: u64,
    pub(crate) disk: Disk,
    pub(crate) stats: SimStats,
    /// Set by [`crate::crash_now`]; the executor stops at the end of the current poll.
    pub(crate) crash_requested: bool,
    /// Set by [`crate::crash_after_syncs`]: successful `sync_data` calls left before a crash
    /// is requested. Disarmed when a run ends.
    pub(crate) crash_after_syncs: Option<u32>,
    /// Bumped by every crash: handles from before it are dead.
    pub(crate) epoch: u64,
    /// Paths of the segments a bit flip hit, oldest first.
    pub(crate) flipped: Vec<std::path::PathBuf>,
    /// A running hash of every event (which task ran, at what virtual time): two runs of a
    /// seed replayed the same events exactly when their hashes agree.
    pub(crate) trace: u64,
}

impl World {
    pub(crate) fn new(config: SimConfig) -> Self {
        World {
            rng: SimRng::new(config.seed),
            config,
            now: MonoTime::ZERO,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            disk: Disk::default(),
            stats: SimStats::default(),
            crash_requested: false,
            crash_after_syncs: None,
            epoch: 0,
            flipped: Vec::new(),
            trace: 0xCBF2_9CE4_8422_2325, // the FNV-1a offset basis
        }
    }

    /// Folds `event` into the trace hash (FNV-1a over its 8 bytes).
    pub(crate) fn trace_event(&mut self, event: u64) {
        let mut h = self.trace;
        for byte in event.to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        self.trace = h;
    }

    /// Wakes `waker` once the clock reaches `at`.
    pub(crate) fn add_timer(&mut self, at: MonoTime, waker: Waker) {
        self.timer_seq += 1;
        self.timers.push(Reverse(Timer {
            at,
            seq: self.timer_seq,
            waker,
        }));
    }

    /// Moves the clock to the earliest timer and returns every waker due then (the caller
    /// wakes them outside the world's borrow); `None` when no timer is pending.
    pub(crate) fn advance_to_next_timer(&mut self) -> Option<Vec<Waker>> {
        let Reverse(first) = self.timers.pop()?;
        if first.at > self.now {
            self.now = first.at;
        }
        let mut due = vec![first.waker];
        while let Some(Reverse(t)) = self.timers.peek() {
            if t.at > self.now {
                break;
            }
            if let Some(Reverse(t)) = self.timers.pop() {
                due.push(t.waker);
            }
        }
        Some(due)
    }

    /// Drops every timer (their tasks are gone).
    pub(crate) fn clear_timers(&mut self) -> Vec<Waker> {
        self.timers.drain().map(|Reverse(t)| t.waker).collect()
    }

    /// Draws whether a fault with `per_million` fires.
    pub(crate) fn fault(&mut self, per_million: u32) -> bool {
        self.rng.chance(per_million)
    }

    /// The delay to put before a file operation: usually none, sometimes a few microseconds
    /// (so operations of different tasks interleave), rarely a latency spike.
    pub(crate) fn file_op_delay(&mut self) -> Duration {
        if self.fault(self.config.faults.latency_spike) {
            self.stats.latency_spikes += 1;
            return Duration::from_millis(self.rng.between(10, 300));
        }
        match self.rng.below(4) {
            0 => Duration::from_micros(self.rng.between(1, 200)),
            _ => Duration::ZERO,
        }
    }

    /// Applies a crash: the disk keeps what was durable plus, per the seed, some of what was
    /// not; handles from before are dead (the caller resets the network with it).
    pub(crate) fn crash(&mut self) {
        self.stats.crashes += 1;
        self.epoch += 1;
        self.disk.crash(&mut self.rng, &mut self.stats);
        if self.fault(self.config.faults.bit_flip_at_crash) {
            if let Some(path) = self.disk.flip_bit_in_sealed_segment(&mut self.rng) {
                self.stats.bit_flips += 1;
                self.flipped.push(path);
            }
        }
    }
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

/// Replaces this thread's world with a fresh one.
pub(crate) fn install(config: SimConfig) {
    let old = WORLD.with(|w| w.borrow_mut().replace(World::new(config)));
    drop(old);
}

/// Runs `f` on this thread's world (a default one, seed 0, is made on first use).
///
/// # Panics
/// If called re-entrantly from inside another `with_world` (a bug in this crate).
pub(crate) fn with_world<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|w| {
        let mut slot = w.borrow_mut();
        let world = slot.get_or_insert_with(|| World::new(SimConfig::new(0)));
        f(world)
    })
}

/// As [`with_world`], but does nothing (returns `None`) when the world is busy or gone:
/// for destructors, which may run while the world is borrowed or the thread is ending.
pub(crate) fn try_with_world<R>(f: impl FnOnce(&mut World) -> R) -> Option<R> {
    WORLD
        .try_with(|w| match w.try_borrow_mut() {
            Ok(mut slot) => slot.as_mut().map(f),
            Err(_) => None,
        })
        .ok()
        .flatten()
}
