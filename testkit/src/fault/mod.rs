//! Fault injection: [`FaultyBackend`] wraps any [`Backend`] and fails its filesystem calls as
//! a shared [`FaultPlan`] says, so crash, torn-write, ENOSPC and failed-sync paths (I5, I8)
//! can be tested on a real file system.
//!
//! Contract:
//! - Inputs: an inner backend and a [`FaultPlan`] handle (`Arc<Mutex>`, cloneable, settable
//!   from any thread while shards run).
//! - Counted: every filesystem call (the [`FileOp`]s: `open`, directory calls and every call on
//!   a file) increments the plan's op counter exactly once, before anything else, whether it
//!   then succeeds, fails or is faulted. TCP, timers and tasks pass straight through, uncounted.
//! - Faults, checked in this order for each call:
//!   1. crash ([`FaultPlan::fail_after`]): every call at or past the crash point fails with
//!      EIO (raw OS error 5) and does nothing;
//!   2. writes only (`write_at`, `write_parts_at`): ENOSPC ([`FaultPlan::enospc_on_write`], raw OS error 28) without
//!      writing a byte, while set;
//!   3. writes only: a pending tear ([`FaultPlan::tear_next_write_at`]) writes the first
//!      bytes only, then fails with EIO; it fires once;
//!   4. `sync_data`, `sync_dir` and `sync_filesystem`: EIO while [`FaultPlan::eio_on_sync`]
//!      is set, without syncing; `sync_filesystem` alone while
//!      [`FaultPlan::eio_on_sync_filesystem`] is.
//! - Deterministic: the same plan (seed included) and the same sequence of calls inject the
//!   same faults. The only randomness is a SplitMix64 generator seeded by
//!   [`FaultPlan::with_seed`], drawn from only by the `*_randomly*` methods.
//! - Never: alters a call that is not faulted, retries, or fakes success.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use minikafka_core::backend::{
    parts_len, parts_prefix, Backend, BackendFile, BackendListener, OpenMode, ShardId,
};

/// Raw OS error number of EIO (the same on Linux and macOS).
pub const EIO_RAW: i32 = 5;
/// Raw OS error number of ENOSPC (the same on Linux and macOS).
pub const ENOSPC_RAW: i32 = 28;

/// A filesystem call, as counted by a [`FaultPlan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// `Backend::open`.
    Open,
    /// `Backend::remove_file`.
    RemoveFile,
    /// `Backend::rename`.
    Rename,
    /// `Backend::create_dir_all`.
    CreateDirAll,
    /// `Backend::remove_dir_all`.
    RemoveDirAll,
    /// `Backend::list_dir`.
    ListDir,
    /// `Backend::sync_dir`.
    SyncDir,
    /// `Backend::sync_filesystem`.
    SyncFilesystem,
    /// `BackendFile::read_at`.
    ReadAt,
    /// `BackendFile::write_at` and `BackendFile::write_parts_at` (a vectored write is
    /// faulted as the write of its concatenation).
    WriteAt,
    /// `BackendFile::sync_data`.
    SyncData,
    /// `BackendFile::truncate`.
    Truncate,
    /// `BackendFile::len`.
    Len,
    /// `BackendFile::close`.
    Close,
}

/// How a pending torn write picks its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tear {
    /// Exactly this many bytes (at most the buffer's length).
    AtByte(usize),
    /// A length drawn from the seeded generator, below the buffer's length.
    Random,
}

/// SplitMix64: a tiny, well-mixed, seedable generator; enough to pick fault points.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound` > 0); the modulo bias is irrelevant for fault points.
    fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }
}

#[derive(Debug)]
struct PlanState {
    seed: u64,
    rng: SplitMix64,
    op_count: u64,
    /// Calls seen so far by kind, in the order kinds were first seen.
    op_counts_by_kind: Vec<(FileOp, u64)>,
    crash_at_op: Option<u64>,
    tear: Option<Tear>,
    enospc_on_write: bool,
    eio_on_sync: bool,
    eio_on_sync_filesystem: bool,
    injected_count: u64,
    /// Bytes returned by successful `read_at` calls.
    bytes_read: u64,
}

/// What the plan decided for one call.
#[derive(Debug)]
enum Verdict {
    /// Run the call unchanged.
    Proceed,
    /// Fail with this error without running the call.
    Fail(io::Error),
    /// `write_at` only: write this many leading bytes, then fail with EIO.
    Tear(usize),
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(EIO_RAW)
}

/// The plan the next [`Backend::run_shards`] takes ([`FaultPlan::use_for_next_run`]).
static NEXT_RUN_PLAN: Mutex<Option<FaultPlan>> = Mutex::new(None);

/// The faults a [`FaultyBackend`] injects. A cheap handle: clones share one plan, so a test
/// keeps one and changes it while shards run.
#[derive(Clone, Debug)]
pub struct FaultPlan {
    state: Arc<Mutex<PlanState>>,
}

impl Default for FaultPlan {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultPlan {
    /// A plan that injects nothing, seeded with 0.
    pub fn new() -> Self {
        Self::with_seed(0)
    }

    /// A plan that injects nothing yet, whose random choices follow `seed`.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(PlanState {
                seed,
                rng: SplitMix64(seed),
                op_count: 0,
                op_counts_by_kind: Vec::new(),
                crash_at_op: None,
                tear: None,
                enospc_on_write: false,
                eio_on_sync: false,
                eio_on_sync_filesystem: false,
                injected_count: 0,
                bytes_read: 0,
            })),
        }
    }

    /// Makes the next [`Backend::run_shards`] of a [`FaultyBackend`] use this plan instead of
    /// a fresh one (once; later runs get fresh plans again). For code that starts the shards
    /// itself, such as the broker's `server::run::<FaultyBackend<_>>`, so a test can keep this
    /// handle and inject faults into a whole running broker.
    pub fn use_for_next_run(&self) {
        *NEXT_RUN_PLAN.lock().unwrap_or_else(|e| e.into_inner()) = Some(self.clone());
    }

    fn lock(&self) -> MutexGuard<'_, PlanState> {
        // A panicking test thread must not hide the plan from the others.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The seed this plan was made with (log it to replay a failure).
    pub fn seed(&self) -> u64 {
        self.lock().seed
    }

    /// Crash: the next `n_ops` filesystem calls run normally, and every one after them fails
    /// with EIO (raw OS error 5) without doing anything, until [`FaultPlan::heal`].
    pub fn fail_after(&self, n_ops: u64) {
        let mut state = self.lock();
        state.crash_at_op = Some(state.op_count.saturating_add(n_ops));
    }

    /// Crash at a seeded random point: picks `n` in `0..=max_ops`, calls
    /// [`FaultPlan::fail_after`]`(n)` and returns `n`.
    pub fn crash_randomly_within(&self, max_ops: u64) -> u64 {
        let mut state = self.lock();
        let n_ops = state.rng.below(max_ops.saturating_add(1).max(1));
        state.crash_at_op = Some(state.op_count.saturating_add(n_ops));
        n_ops
    }

    /// The next `write_at` writes only its first `byte` bytes (all of them if the buffer is
    /// shorter), then returns EIO. Fires once.
    pub fn tear_next_write_at(&self, byte: usize) {
        self.lock().tear = Some(Tear::AtByte(byte));
    }

    /// The next `write_at` writes a seeded random prefix strictly shorter than its buffer (none
    /// of an empty buffer), then returns EIO. Fires once.
    pub fn tear_next_write_randomly(&self) {
        self.lock().tear = Some(Tear::Random);
    }

    /// While `on`, every `write_at` fails with ENOSPC (raw OS error 28) without writing.
    pub fn enospc_on_write(&self, on: bool) {
        self.lock().enospc_on_write = on;
    }

    /// While `on`, `sync_data` and `sync_dir` fail with EIO (raw OS error 5) without syncing.
    pub fn eio_on_sync(&self, on: bool) {
        self.lock().eio_on_sync = on;
    }

    /// While `on`, `sync_filesystem` alone fails with EIO without syncing (a writeback error
    /// somewhere on the filesystem: per-file syncs still work).
    pub fn eio_on_sync_filesystem(&self, on: bool) {
        self.lock().eio_on_sync_filesystem = on;
    }

    /// Clears every fault (crash point, pending tear, ENOSPC, sync EIO). Counters and the
    /// generator's position are kept.
    pub fn heal(&self) {
        let mut state = self.lock();
        state.crash_at_op = None;
        state.tear = None;
        state.enospc_on_write = false;
        state.eio_on_sync = false;
        state.eio_on_sync_filesystem = false;
    }

    /// Filesystem calls seen so far (faulted or not).
    pub fn op_count(&self) -> u64 {
        self.lock().op_count
    }

    /// Calls of kind `op` seen so far (faulted or not).
    pub fn op_count_of(&self, op: FileOp) -> u64 {
        self.lock()
            .op_counts_by_kind
            .iter()
            .find(|(kind, _)| *kind == op)
            .map_or(0, |(_, n)| *n)
    }

    /// Faults injected so far.
    pub fn injected_count(&self) -> u64 {
        self.lock().injected_count
    }

    /// Bytes that successful `read_at` calls returned so far (what a reader cost the disk or
    /// the page cache).
    pub fn bytes_read(&self) -> u64 {
        self.lock().bytes_read
    }

    /// Whether the crash has happened: at least one call was refused at or past the crash
    /// point (so a workload shorter than the point never crashed).
    pub fn is_crashed(&self) -> bool {
        let state = self.lock();
        state.crash_at_op.is_some_and(|at| state.op_count > at)
    }

    /// Counts one call and decides its fate (see the module docs for the order).
    fn admit(&self, op: FileOp, write_bytes: usize) -> Verdict {
        let mut state = self.lock();
        let index = state.op_count;
        state.op_count += 1;
        match state
            .op_counts_by_kind
            .iter_mut()
            .find(|(kind, _)| *kind == op)
        {
            Some((_, n)) => *n += 1,
            None => state.op_counts_by_kind.push((op, 1)),
        }
        let verdict = if state.crash_at_op.is_some_and(|at| index >= at) {
            Verdict::Fail(eio())
        } else {
            match op {
                FileOp::WriteAt if state.enospc_on_write => {
                    Verdict::Fail(io::Error::from_raw_os_error(ENOSPC_RAW))
                }
                FileOp::WriteAt => match state.tear.take() {
                    Some(Tear::AtByte(byte)) => Verdict::Tear(byte.min(write_bytes)),
                    Some(Tear::Random) if write_bytes == 0 => Verdict::Tear(0),
                    Some(Tear::Random) => {
                        let byte = state.rng.below(write_bytes as u64);
                        // `byte` < `write_bytes`, which is a usize.
                        Verdict::Tear(usize::try_from(byte).unwrap_or(0))
                    }
                    None => Verdict::Proceed,
                },
                FileOp::SyncData | FileOp::SyncDir | FileOp::SyncFilesystem
                    if state.eio_on_sync =>
                {
                    Verdict::Fail(eio())
                }
                FileOp::SyncFilesystem if state.eio_on_sync_filesystem => Verdict::Fail(eio()),
                _ => Verdict::Proceed,
            }
        };
        if !matches!(verdict, Verdict::Proceed) {
            state.injected_count += 1;
        }
        verdict
    }

    /// [`FaultPlan::admit`] for calls that have no partial outcome: `Err` if faulted.
    fn gate(&self, op: FileOp) -> io::Result<()> {
        match self.admit(op, 0) {
            Verdict::Proceed => Ok(()),
            Verdict::Fail(e) => Err(e),
            // Only WriteAt tears, and it does not go through `gate`.
            Verdict::Tear(_) => Err(eio()),
        }
    }
}

/// A backend whose filesystem calls fail as its [`FaultPlan`] says. Clones share the plan.
#[derive(Clone, Debug)]
pub struct FaultyBackend<B> {
    inner: B,
    plan: FaultPlan,
}

impl<B: Backend> FaultyBackend<B> {
    /// Wraps `inner`; faults follow `plan`.
    pub fn new(inner: B, plan: FaultPlan) -> Self {
        Self { inner, plan }
    }

    /// The plan driving this backend (shared with every clone and file).
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// The wrapped backend (calls through it bypass the plan).
    pub fn inner(&self) -> &B {
        &self.inner
    }

    /// Like [`Backend::run_shards`], with every shard's backend following `plan`.
    pub fn run_shards_with_plan<F, Fut>(count: usize, plan: FaultPlan, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        B::run_shards(count, move |inner| {
            main(FaultyBackend {
                inner,
                plan: plan.clone(),
            })
        })
    }
}

/// A file of a [`FaultyBackend`].
#[derive(Debug)]
pub struct FaultyFile<F> {
    inner: F,
    plan: FaultPlan,
}

impl<F: BackendFile> BackendFile for FaultyFile<F> {
    async fn read_at(&self, buf: Vec<u8>, pos: u64, len: usize) -> (io::Result<()>, Vec<u8>) {
        match self.plan.gate(FileOp::ReadAt) {
            Ok(()) => {
                let (result, buf) = self.inner.read_at(buf, pos, len).await;
                if result.is_ok() {
                    self.plan.lock().bytes_read += buf.len() as u64;
                }
                (result, buf)
            }
            Err(e) => (Err(e), buf),
        }
    }

    async fn write_at(&self, buf: Vec<u8>, pos: u64) -> (io::Result<()>, Vec<u8>) {
        match self.plan.admit(FileOp::WriteAt, buf.len()) {
            Verdict::Proceed => self.inner.write_at(buf, pos).await,
            Verdict::Fail(e) => (Err(e), buf),
            Verdict::Tear(byte) => {
                if byte > 0 {
                    let (written, _) = self.inner.write_at(buf[..byte].to_vec(), pos).await;
                    if let Err(e) = written {
                        return (Err(e), buf);
                    }
                }
                (Err(eio()), buf)
            }
        }
    }

    /// Faulted as a `write_at` of the concatenation (counted as [`FileOp::WriteAt`]: a
    /// write is a write to the plan); a tear writes the first bytes through the inner
    /// backend's own vectored write, so its `pwritev` path is what the faults exercise.
    async fn write_parts_at(&self, parts: Vec<Bytes>, pos: u64) -> (io::Result<()>, Vec<Bytes>) {
        match self.plan.admit(FileOp::WriteAt, parts_len(&parts)) {
            Verdict::Proceed => self.inner.write_parts_at(parts, pos).await,
            Verdict::Fail(e) => (Err(e), parts),
            Verdict::Tear(byte) => {
                if byte > 0 {
                    let prefix = parts_prefix(&parts, byte);
                    let (written, _) = self.inner.write_parts_at(prefix, pos).await;
                    if let Err(e) = written {
                        return (Err(e), parts);
                    }
                }
                (Err(eio()), parts)
            }
        }
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.plan.gate(FileOp::SyncData)?;
        self.inner.sync_data().await
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.plan.gate(FileOp::Truncate)?;
        self.inner.truncate(len).await
    }

    /// Passed through, never faulted nor counted: a reservation changes no byte (I190) and
    /// the driver issues it off the write path at times the schedule picks, so counting it
    /// would move every `fail_after` point of the log's own operations.
    async fn preallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.preallocate(offset, len).await
    }

    async fn len(&self) -> io::Result<u64> {
        self.plan.gate(FileOp::Len)?;
        self.inner.len().await
    }

    /// Closes the inner file unless faulted; a faulted close drops it instead (as a crash would).
    async fn close(self) -> io::Result<()> {
        self.plan.gate(FileOp::Close)?;
        self.inner.close().await
    }
}

impl<B: Backend> Backend for FaultyBackend<B> {
    type File = FaultyFile<B::File>;
    type Listener = B::Listener;

    fn name(&self) -> &'static str {
        "faulty"
    }

    fn shard(&self) -> ShardId {
        self.inner.shard()
    }

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Self::File> {
        self.plan.gate(FileOp::Open)?;
        Ok(FaultyFile {
            inner: self.inner.open(path, mode).await?,
            plan: self.plan.clone(),
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::RemoveFile)?;
        self.inner.remove_file(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::Rename)?;
        self.inner.rename(from, to).await
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::CreateDirAll)?;
        self.inner.create_dir_all(path).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::RemoveDirAll)?;
        self.inner.remove_dir_all(path).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.plan.gate(FileOp::ListDir)?;
        self.inner.list_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::SyncDir)?;
        self.inner.sync_dir(path).await
    }

    async fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        self.plan.gate(FileOp::SyncFilesystem)?;
        self.inner.sync_filesystem(path).await
    }

    async fn listen(&self, addr: SocketAddr) -> io::Result<Self::Listener> {
        self.inner.listen(addr).await
    }

    async fn connect(
        &self,
        addr: SocketAddr,
    ) -> io::Result<<Self::Listener as BackendListener>::Stream> {
        self.inner.connect(addr).await
    }

    async fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration).await;
    }

    fn now(&self) -> minikafka_core::clock::MonoTime {
        self.inner.now()
    }

    fn wall_clock_ms(&self) -> i64 {
        self.inner.wall_clock_ms()
    }

    async fn sleep_until(&self, deadline: minikafka_core::clock::MonoTime) {
        self.inner.sleep_until(deadline).await;
    }

    async fn run_blocking<R, F>(&self, func: F) -> std::io::Result<R>
    where
        F: FnOnce() -> std::io::Result<R> + Send + 'static,
        R: Send + 'static,
    {
        self.inner.run_blocking(func).await
    }

    fn spawn_local<F: std::future::Future<Output = ()> + 'static>(&self, task: F) {
        self.inner.spawn_local(task);
    }

    /// Runs `B`'s shards with one [`FaultPlan`] shared by all of them: the one given to
    /// [`FaultPlan::use_for_next_run`] if any, else a fresh one (seed 0, no faults); reach it
    /// with [`FaultyBackend::plan`]. Use [`FaultyBackend::run_shards_with_plan`] to choose
    /// the plan directly.
    fn run_shards<F, Fut>(count: usize, main: F) -> io::Result<()>
    where
        F: Fn(Self) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let given = NEXT_RUN_PLAN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        Self::run_shards_with_plan(count, given.unwrap_or_default(), main)
    }
}

pub mod checks;

#[cfg(test)]
mod tests {
    use super::checks::*;
    use super::*;
    use crate::check::{run_check, scratch_dir};
    use minikafka_backend_portable::PortableBackend;

    type Faulty = FaultyBackend<PortableBackend>;

    /// Runs `check` on a faulty portable backend in a fresh scratch dir, removed on success.
    fn on_portable<F, Fut>(label: &str, check: F)
    where
        F: Fn(Faulty, PathBuf) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + 'static,
    {
        let dir = scratch_dir(label);
        let result = run_check::<Faulty, _, _>(&dir, check);
        assert_eq!(result, Ok(()), "{label}");
        std::fs::remove_dir_all(&dir).expect("remove scratch dir");
    }

    #[test]
    fn fail_after_fails_every_later_file_call_with_eio() {
        on_portable("fault-crash", |b, d| async move {
            check_fail_after(&b, &d).await
        });
    }

    #[test]
    fn torn_write_writes_the_prefix_then_eio() {
        on_portable("fault-tear", |b, d| async move {
            check_torn_write(&b, &d).await
        });
    }

    #[test]
    fn torn_parts_write_writes_the_concatenations_prefix_then_eio() {
        on_portable("fault-tear-parts", |b, d| async move {
            check_torn_parts_write(&b, &d).await
        });
    }

    #[test]
    fn enospc_writes_nothing_until_cleared() {
        on_portable("fault-enospc", |b, d| async move {
            check_enospc_on_write(&b, &d).await
        });
    }

    /// I8: a failed sync is reported, never turned into success.
    #[test]
    fn eio_on_sync_fails_syncs_until_cleared_i8() {
        on_portable("fault-sync", |b, d| async move {
            check_eio_on_sync(&b, &d).await
        });
    }

    #[test]
    fn op_counter_counts_every_file_call_once() {
        on_portable("fault-count", |b, d| async move {
            check_op_counter(&b, &d).await
        });
    }

    #[test]
    fn seeded_faults_replay() {
        on_portable("fault-seed", |b, d| async move {
            check_seeded_replay(&b, &d).await
        });
    }

    #[test]
    fn fail_after_counts_from_the_current_op() {
        let plan = FaultPlan::new();
        for _ in 0..5 {
            assert!(matches!(plan.admit(FileOp::Len, 0), Verdict::Proceed));
        }
        plan.fail_after(2);
        assert!(matches!(plan.admit(FileOp::Len, 0), Verdict::Proceed));
        assert!(matches!(plan.admit(FileOp::Open, 0), Verdict::Proceed));
        assert!(!plan.is_crashed(), "no call refused yet");
        for op in [FileOp::Len, FileOp::WriteAt, FileOp::SyncDir] {
            match plan.admit(op, 4) {
                Verdict::Fail(e) => assert_eq!(e.raw_os_error(), Some(EIO_RAW)),
                other => panic!("{op:?} after the crash point: {other:?}"),
            }
            assert!(plan.is_crashed());
        }
        assert_eq!(plan.op_count(), 10);
        assert_eq!(plan.injected_count(), 3);
    }

    #[test]
    fn enospc_takes_precedence_over_a_pending_tear() {
        let plan = FaultPlan::new();
        plan.tear_next_write_at(1);
        plan.enospc_on_write(true);
        match plan.admit(FileOp::WriteAt, 8) {
            Verdict::Fail(e) => assert_eq!(e.raw_os_error(), Some(ENOSPC_RAW)),
            other => panic!("expected ENOSPC, got {other:?}"),
        }
        plan.enospc_on_write(false);
        assert!(matches!(plan.admit(FileOp::WriteAt, 8), Verdict::Tear(1)));
        assert!(matches!(plan.admit(FileOp::WriteAt, 8), Verdict::Proceed));
    }

    #[test]
    fn seeds_drive_every_random_choice() {
        let draws = |seed: u64| {
            let plan = FaultPlan::with_seed(seed);
            let mut out = Vec::new();
            for len in [10usize, 1000, 1, 77] {
                plan.tear_next_write_randomly();
                match plan.admit(FileOp::WriteAt, len) {
                    Verdict::Tear(byte) => {
                        assert!(byte < len, "tear {byte} of {len}");
                        out.push(byte as u64);
                    }
                    other => panic!("expected a tear, got {other:?}"),
                }
                out.push(plan.crash_randomly_within(1_000));
                plan.heal();
            }
            out
        };
        assert_eq!(draws(3), draws(3));
        assert_ne!(draws(3), draws(4), "different seeds should (here) differ");
    }
}
