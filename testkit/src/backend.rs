//! Backend conformance: the behaviour every [`Backend`] must show, checked through the trait
//! alone so the monoio (io_uring) and portable backends (and wrappers such as
//! [`FaultyBackend`](crate::fault::FaultyBackend)) run the same code.
//!
//! Contract:
//! - Inputs: a backend instance (on a shard it runs) and a scratch directory this module may
//!   fill; each check works in its own subdirectory, named after it.
//! - Outputs: each `check_*` returns `Err` with a message naming the step that failed;
//!   [`run_all`] runs every check and panics listing all failures.
//! - Never: uses `std::fs` or `std::net` (only the trait), depends on timing beyond "a sleep
//!   waits at least as long as asked" (compared with `std::time::Instant`, a test-only clock
//!   read), or waits forever: every network wait is bounded by [`CHECK_TIMEOUT`].

use std::cell::Cell;
use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::future::Either;
use futures::{AsyncReadExt, AsyncWriteExt};
use minikafka_core::backend::{Backend, BackendFile, BackendListener, OpenMode, ShardId};

use crate::check::{assert_none_failed, ensure, run_checks, run_on_one_shard, step};

/// The longest any single network or task wait in a check may take before it counts as hung.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Expects `result` to be an error of `kind`.
fn expect_err_kind<T>(
    what: &str,
    result: io::Result<T>,
    kind: io::ErrorKind,
) -> Result<(), String> {
    match result {
        Ok(_) => Err(format!("{what}: succeeded, expected {kind:?}")),
        Err(e) if e.kind() == kind => Ok(()),
        Err(e) => Err(format!(
            "{what}: got {e} ({:?}), expected {kind:?}",
            e.kind()
        )),
    }
}

/// Awaits `fut`, failing if it takes longer than [`CHECK_TIMEOUT`] on the backend's clock.
async fn within<B: Backend, T>(
    backend: &B,
    what: &str,
    fut: impl Future<Output = T>,
) -> Result<T, String> {
    let fut = std::pin::pin!(fut);
    let timer = std::pin::pin!(backend.sleep(CHECK_TIMEOUT));
    match futures::future::select(fut, timer).await {
        Either::Left((value, _)) => Ok(value),
        Either::Right(((), _)) => Err(format!("{what}: timed out after {CHECK_TIMEOUT:?}")),
    }
}

/// Makes the check's own subdirectory.
async fn check_dir<B: Backend>(backend: &B, dir: &Path) -> Result<(), String> {
    step(
        "create_dir_all(check dir)",
        backend.create_dir_all(dir).await,
    )
}

async fn write<F: BackendFile>(file: &F, bytes: &[u8], pos: u64) -> Result<(), String> {
    let (result, back) = file.write_at(bytes.to_vec(), pos).await;
    step(&format!("write_at({pos}, {} bytes)", bytes.len()), result)?;
    ensure(back == bytes, || {
        format!("write_at({pos}): the buffer handed back differs from the one given")
    })
}

async fn read<F: BackendFile>(file: &F, pos: u64, len: usize) -> Result<Vec<u8>, String> {
    // A stale, non-empty buffer: read_at must clear it first.
    let stale = vec![0xEE; 7];
    let (result, buf) = file.read_at(stale, pos, len).await;
    step(&format!("read_at({pos}, {len})"), result)?;
    Ok(buf)
}

/// Reads `len` bytes at `pos` and compares with what `model` (the file's expected contents)
/// holds there: the bytes present, short only at the end of the file.
async fn expect_read<F: BackendFile>(
    file: &F,
    model: &[u8],
    pos: u64,
    len: usize,
) -> Result<(), String> {
    let got = read(file, pos, len).await?;
    let start = usize::try_from(pos).map_or(model.len(), |p| p.min(model.len()));
    let end = start.saturating_add(len).min(model.len());
    let want = &model[start..end];
    ensure(got == want, || {
        format!(
            "read_at({pos}, {len}) on a {}-byte file: got {} bytes, expected {} (first difference at {:?})",
            model.len(),
            got.len(),
            want.len(),
            got.iter().zip(want).position(|(a, b)| a != b)
        )
    })
}

async fn expect_len<F: BackendFile>(file: &F, want: u64, what: &str) -> Result<(), String> {
    let len = step(&format!("len ({what})"), file.len().await)?;
    ensure(len == want, || {
        format!("len ({what}): got {len}, expected {want}")
    })
}

/// Writes `bytes` at `pos` in both the file and the model (growing it with zeros, like a hole).
async fn write_both<F: BackendFile>(
    file: &F,
    model: &mut Vec<u8>,
    bytes: &[u8],
    pos: usize,
) -> Result<(), String> {
    write(file, bytes, pos as u64).await?;
    if model.len() < pos + bytes.len() {
        model.resize(pos + bytes.len(), 0);
    }
    model[pos..pos + bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// `write_at`/`read_at` round trip at several offsets, including a hole, an overwrite, a write
/// larger than one syscall may take, and reads that run past the end (short) or start past it
/// (empty).
pub async fn check_read_write_round_trip<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let file = step(
        "open(CreateNew)",
        backend.open(&dir.join("data"), OpenMode::CreateNew).await,
    )?;
    expect_len(&file, 0, "new file").await?;
    let mut model = Vec::new();
    write_both(&file, &mut model, b"hello, world", 0).await?;
    write_both(&file, &mut model, b"tail", 4096).await?;
    write_both(&file, &mut model, b"W", 7).await?;
    let big: Vec<u8> = (0..(1usize << 20) + 3).map(|i| (i % 251) as u8).collect();
    write_both(&file, &mut model, &big, 8192).await?;
    expect_len(&file, model.len() as u64, "after writes").await?;
    let end = model.len() as u64;
    for (pos, len) in [
        (0, 12),
        (7, 1),
        (3, 4096),
        (4090, 100),
        (8000, 500),
        (0, model.len()),
        (end - 10, 100),
        (end, 10),
        (end + 10_000, 5),
        (5, 0),
    ] {
        expect_read(&file, &model, pos, len).await?;
    }
    step("close", file.close().await)
}

/// `len` and `truncate` (shrinking, then growing with zeros), then `sync_data` and `close`.
pub async fn check_len_and_truncate<B: Backend>(backend: &B, dir: &Path) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let file = step(
        "open(ReadWriteCreate)",
        backend
            .open(&dir.join("t"), OpenMode::ReadWriteCreate)
            .await,
    )?;
    let mut model: Vec<u8> = (0..100u8).collect();
    write(&file, &model, 0).await?;
    expect_len(&file, 100, "after write").await?;
    step("truncate(40)", file.truncate(40).await)?;
    model.truncate(40);
    expect_len(&file, 40, "after truncate(40)").await?;
    expect_read(&file, &model, 30, 20).await?;
    step("truncate(64)", file.truncate(64).await)?;
    model.resize(64, 0);
    expect_len(&file, 64, "after truncate(64)").await?;
    expect_read(&file, &model, 0, 100).await?;
    step("sync_data", file.sync_data().await)?;
    step("close", file.close().await)
}

/// `preallocate` extends the file with zeros and never changes a byte written (I190): after
/// it the length is at least `offset + len` (on Linux; elsewhere it may be a no-op, and the
/// length is then unchanged), written bytes read back, the preallocated range reads as zeros,
/// a zero-length call and a call inside the length change nothing, and `truncate` cuts the
/// zero tail back to the data.
pub async fn check_preallocate_extends_with_zeros<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let file = step(
        "open(ReadWriteCreate)",
        backend
            .open(&dir.join("p"), OpenMode::ReadWriteCreate)
            .await,
    )?;
    let mut model: Vec<u8> = (0..100u8).collect();
    write(&file, &model, 0).await?;
    const MIB: u64 = 1 << 20;
    step(
        "preallocate(100, 1 MiB - 100)",
        file.preallocate(100, MIB - 100).await,
    )?;
    let len = step("len", file.len().await)?;
    let extended = len == MIB;
    if cfg!(target_os = "linux") && !extended {
        return Err(format!(
            "after preallocating to 1 MiB on Linux the length is {len}, not {MIB}"
        ));
    }
    if !extended && len != 100 {
        return Err(format!("a no-op preallocation changed the length to {len}"));
    }
    let mut zeros_model = model.clone();
    zeros_model.resize(len as usize, 0);
    expect_read(&file, &zeros_model, 0, 2 * MIB as usize).await?;
    step("preallocate(100, 0)", file.preallocate(100, 0).await)?;
    step(
        "preallocate(0, 4 KiB) inside the length",
        file.preallocate(0, 4096).await,
    )?;
    expect_len(&file, len, "after preallocations inside the length").await?;
    expect_read(&file, &zeros_model, 0, 2 * MIB as usize).await?;
    let more: Vec<u8> = (100..=255u8).collect();
    write(&file, &more, 100).await?;
    model.extend_from_slice(&more);
    zeros_model[100..256].copy_from_slice(&more);
    expect_len(&file, len, "after a write into the preallocated range").await?;
    expect_read(&file, &zeros_model, 0, 2 * MIB as usize).await?;
    step("sync_data", file.sync_data().await)?;
    step("truncate to the data", file.truncate(256).await)?;
    expect_len(&file, 256, "after truncate(256)").await?;
    expect_read(&file, &model, 0, 4096).await?;
    step("close", file.close().await)
}

/// `sync_data` succeeds (also with nothing new to sync), and data survives close and reopen;
/// reopening with `ReadWriteCreate` does not truncate.
pub async fn check_sync_data_and_reopen<B: Backend>(backend: &B, dir: &Path) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let path = dir.join("s");
    let file = step(
        "open(CreateNew)",
        backend.open(&path, OpenMode::CreateNew).await,
    )?;
    write(&file, b"durable", 0).await?;
    step("sync_data", file.sync_data().await)?;
    step("sync_data (nothing new)", file.sync_data().await)?;
    step("close", file.close().await)?;

    let file = step(
        "reopen(ReadWriteCreate)",
        backend.open(&path, OpenMode::ReadWriteCreate).await,
    )?;
    expect_len(&file, 7, "reopened with ReadWriteCreate").await?;
    write(&file, b" bytes", 7).await?;
    step("sync_data after reopen", file.sync_data().await)?;
    step("close", file.close().await)?;

    let file = step(
        "reopen(ReadOnly)",
        backend.open(&path, OpenMode::ReadOnly).await,
    )?;
    expect_read(&file, b"durable bytes", 0, 64).await?;
    step("close", file.close().await)
}

async fn write_file<B: Backend>(backend: &B, path: &Path, bytes: &[u8]) -> Result<(), String> {
    let file = step(
        &format!("open({})", path.display()),
        backend.open(path, OpenMode::CreateNew).await,
    )?;
    write(&file, bytes, 0).await?;
    step("close", file.close().await)
}

async fn sorted_listing<B: Backend>(backend: &B, path: &Path) -> Result<Vec<PathBuf>, String> {
    let mut entries = step(
        &format!("list_dir({})", path.display()),
        backend.list_dir(path).await,
    )?;
    entries.sort();
    Ok(entries)
}

async fn expect_listing<B: Backend>(
    backend: &B,
    path: &Path,
    names: &[&str],
) -> Result<(), String> {
    let got = sorted_listing(backend, path).await?;
    let mut want: Vec<PathBuf> = names.iter().map(|n| path.join(n)).collect();
    want.sort();
    ensure(got == want, || {
        format!(
            "list_dir({}): got {got:?}, expected {want:?}",
            path.display()
        )
    })
}

async fn expect_contents<B: Backend>(backend: &B, path: &Path, want: &[u8]) -> Result<(), String> {
    let file = step(
        &format!("open({}, ReadOnly)", path.display()),
        backend.open(path, OpenMode::ReadOnly).await,
    )?;
    expect_read(&file, want, 0, want.len() + 16).await?;
    step("close", file.close().await)
}

/// `create_dir_all` (idempotent), `list_dir` (full paths), `rename` (also onto an existing
/// name), `remove_file`, `sync_dir` and `remove_dir_all`.
pub async fn check_directory_ops<B: Backend>(backend: &B, dir: &Path) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let a = dir.join("a");
    step(
        "create_dir_all(a/b/c)",
        backend.create_dir_all(&a.join("b").join("c")).await,
    )?;
    step(
        "create_dir_all(a/b/c) again",
        backend.create_dir_all(&a.join("b").join("c")).await,
    )?;
    write_file(backend, &a.join("one"), b"one").await?;
    write_file(backend, &a.join("two"), b"two").await?;
    expect_listing(backend, &a, &["b", "one", "two"]).await?;

    step(
        "rename(two, three)",
        backend.rename(&a.join("two"), &a.join("three")).await,
    )?;
    expect_listing(backend, &a, &["b", "one", "three"]).await?;
    expect_contents(backend, &a.join("three"), b"two").await?;
    expect_err_kind(
        "open(renamed-away name)",
        backend.open(&a.join("two"), OpenMode::ReadOnly).await,
        io::ErrorKind::NotFound,
    )?;

    step(
        "rename(one, three) onto an existing file",
        backend.rename(&a.join("one"), &a.join("three")).await,
    )?;
    expect_listing(backend, &a, &["b", "three"]).await?;
    expect_contents(backend, &a.join("three"), b"one").await?;

    step(
        "remove_file(three)",
        backend.remove_file(&a.join("three")).await,
    )?;
    expect_listing(backend, &a, &["b"]).await?;
    expect_err_kind(
        "remove_file(missing)",
        backend.remove_file(&a.join("three")).await,
        io::ErrorKind::NotFound,
    )?;
    step("sync_dir(a)", backend.sync_dir(&a).await)?;

    step("remove_dir_all(a)", backend.remove_dir_all(&a).await)?;
    expect_err_kind(
        "list_dir(removed dir)",
        backend.list_dir(&a).await,
        io::ErrorKind::NotFound,
    )?;
    expect_listing(backend, dir, &[]).await
}

/// A removed file stays readable through a handle opened before (POSIX unlink semantics).
pub async fn check_unlinked_file_stays_readable<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let path = dir.join("doomed");
    let file = step(
        "open(CreateNew)",
        backend.open(&path, OpenMode::CreateNew).await,
    )?;
    write(&file, b"still here", 0).await?;
    step("remove_file", backend.remove_file(&path).await)?;
    expect_err_kind(
        "open(unlinked path)",
        backend.open(&path, OpenMode::ReadOnly).await,
        io::ErrorKind::NotFound,
    )?;
    expect_len(&file, 10, "unlinked file").await?;
    expect_read(&file, b"still here", 0, 64).await?;
    step("close", file.close().await)
}

/// `CreateNew` fails on an existing file without touching it; `ReadWrite` and `ReadOnly` fail
/// on a missing file; `ReadWriteCreate` creates an empty one.
pub async fn check_open_modes<B: Backend>(backend: &B, dir: &Path) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let path = dir.join("exists");
    write_file(backend, &path, b"original").await?;
    expect_err_kind(
        "open(CreateNew) on an existing file",
        backend.open(&path, OpenMode::CreateNew).await,
        io::ErrorKind::AlreadyExists,
    )?;
    expect_contents(backend, &path, b"original").await?;
    let missing = dir.join("missing");
    expect_err_kind(
        "open(ReadWrite) on a missing file",
        backend.open(&missing, OpenMode::ReadWrite).await,
        io::ErrorKind::NotFound,
    )?;
    expect_err_kind(
        "open(ReadOnly) on a missing file",
        backend.open(&missing, OpenMode::ReadOnly).await,
        io::ErrorKind::NotFound,
    )?;
    let file = step(
        "open(ReadWriteCreate) on a missing file",
        backend.open(&missing, OpenMode::ReadWriteCreate).await,
    )?;
    expect_len(&file, 0, "created by ReadWriteCreate").await?;
    step("close", file.close().await)
}

/// A `ReadOnly` handle cannot write: `write_at` fails, hands the buffer back, and changes
/// nothing.
pub async fn check_read_only_cannot_write<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Result<(), String> {
    check_dir(backend, dir).await?;
    let path = dir.join("ro");
    write_file(backend, &path, b"abc").await?;
    let file = step(
        "open(ReadOnly)",
        backend.open(&path, OpenMode::ReadOnly).await,
    )?;
    let (result, back) = file.write_at(b"XYZW".to_vec(), 0).await;
    ensure(result.is_err(), || {
        "write_at on a ReadOnly handle succeeded".to_string()
    })?;
    ensure(back == b"XYZW", || {
        "write_at on a ReadOnly handle did not hand the buffer back".to_string()
    })?;
    expect_read(&file, b"abc", 0, 16).await?;
    step("close", file.close().await)
}

/// Accepts one connection and echoes it until end of stream; returns the bytes echoed.
async fn serve_echo<L: BackendListener>(listener: L) -> Result<usize, String> {
    let (mut stream, _peer) = step("accept", listener.accept().await)?;
    let mut buf = vec![0u8; 4096];
    let mut echoed = 0;
    loop {
        let n = step("server read", stream.read(&mut buf).await)?;
        if n == 0 {
            break;
        }
        step("server write_all", stream.write_all(&buf[..n]).await)?;
        step("server flush", stream.flush().await)?;
        echoed += n;
    }
    step("server close", stream.close().await)?;
    Ok(echoed)
}

/// TCP echo over `listen`/`connect` on 127.0.0.1:0, with the server as a `spawn_local` task.
pub async fn check_tcp_echo<B: Backend>(backend: &B, _dir: &Path) -> Result<(), String> {
    let any_port: SocketAddr = ([127, 0, 0, 1], 0).into();
    let listener = step("listen(127.0.0.1:0)", backend.listen(any_port).await)?;
    let addr = step("local_addr", listener.local_addr())?;
    ensure(addr.port() != 0 && addr.ip() == any_port.ip(), || {
        format!("local_addr after binding port 0: {addr}")
    })?;
    let (done_tx, done_rx) = oneshot::channel();
    backend.spawn_local(async move {
        // The receiver is only gone if the check already failed.
        let _ = done_tx.send(serve_echo(listener).await);
    });

    let mut client = within(backend, "connect", backend.connect(addr))
        .await
        .and_then(|r| step("connect", r))?;
    let mut sent = 0;
    for round in 0..8usize {
        let message: Vec<u8> = (0..1 + round * 700)
            .map(|i| (i * 7 + round) as u8)
            .collect();
        step(
            "client write_all",
            within(backend, "client write_all", client.write_all(&message)).await?,
        )?;
        step("client flush", client.flush().await)?;
        let mut echo = vec![0u8; message.len()];
        step(
            "client read_exact",
            within(backend, "client read_exact", client.read_exact(&mut echo)).await?,
        )?;
        ensure(echo == message, || {
            format!("round {round}: echo differs from message")
        })?;
        sent += message.len();
    }
    step("client close", client.close().await)?;
    let echoed = within(backend, "server finishing", done_rx)
        .await?
        .map_err(|_| "server task dropped without reporting".to_string())??;
    ensure(echoed == sent, || {
        format!("server echoed {echoed} bytes, client sent {sent}")
    })
}

/// `sleep` waits at least as long as asked (measured with `std::time::Instant`).
pub async fn check_sleep_waits<B: Backend>(backend: &B, _dir: &Path) -> Result<(), String> {
    for wait_ms in [0u64, 20, 60] {
        let requested = Duration::from_millis(wait_ms);
        let start = Instant::now();
        backend.sleep(requested).await;
        let elapsed = start.elapsed();
        ensure(elapsed >= requested, || {
            format!("sleep({requested:?}) returned after {elapsed:?}")
        })?;
    }
    Ok(())
}

/// 2020-09-13, well in the past: a wall clock reporting seconds or a zero epoch fails
/// [`check_clocks`].
const WALL_CLOCK_FLOOR_MS: i64 = 1_600_000_000_000;

/// The backend's own clocks: `sleep_until` returns only once `now` reached its deadline (at
/// once for a past one), `now` never goes backwards, and `wall_clock_ms` is milliseconds since
/// the Unix epoch. Measured on the backend's clock only, so it holds for a virtual clock too.
pub async fn check_clocks<B: Backend>(backend: &B, _dir: &Path) -> Result<(), String> {
    let start = backend.now();
    let deadline = start + Duration::from_millis(20);
    backend.sleep_until(deadline).await;
    let after = backend.now();
    ensure(after >= deadline, || {
        format!("sleep_until returned at {after:?}, before its deadline {deadline:?}")
    })?;
    backend.sleep_until(start).await;
    let later = backend.now();
    ensure(later >= after, || {
        format!("now went backwards: {later:?} after {after:?}")
    })?;
    let wall = backend.wall_clock_ms();
    ensure(wall > WALL_CLOCK_FLOOR_MS, || {
        format!("wall clock {wall} ms is not milliseconds since the Unix epoch")
    })
}

/// Every shard reads the same monotonic clock: a time shard 0 read and published is never
/// later than what shard 1 reads after seeing it (the broker compares deadlines across shards).
pub fn check_shard_clocks_agree<B: Backend>() -> Result<(), String> {
    let published: Arc<Mutex<Option<minikafka_core::clock::MonoTime>>> = Arc::default();
    let verdict: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
    let (publish, record) = (Arc::clone(&published), Arc::clone(&verdict));
    let result = B::run_shards(2, move |backend| {
        let (publish, record) = (Arc::clone(&publish), Arc::clone(&record));
        async move {
            if backend.shard() == ShardId(0) {
                *publish.lock().unwrap_or_else(|e| e.into_inner()) = Some(backend.now());
                return;
            }
            let waited_until = backend.now() + CHECK_TIMEOUT;
            let outcome = loop {
                let theirs = *publish.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(theirs) = theirs {
                    let mine = backend.now();
                    break if mine >= theirs {
                        Ok(())
                    } else {
                        Err(format!("shard clocks differ: shard 1 read {mine:?} after shard 0 published {theirs:?}"))
                    };
                }
                if backend.now() >= waited_until {
                    break Err("shard 1 never saw shard 0's time".to_string());
                }
                backend.sleep(Duration::from_millis(1)).await;
            };
            *record.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
        }
    });
    step("run_shards(2)", result)?;
    let outcome = verdict.lock().unwrap_or_else(|e| e.into_inner()).take();
    outcome.unwrap_or_else(|| Err("shard 1 did not run".to_string()))
}

/// `spawn_local` runs a `!Send` task on the same shard (thread), and a spawned task can spawn.
pub async fn check_spawn_local_runs<B: Backend>(backend: &B, _dir: &Path) -> Result<(), String> {
    let runs = Rc::new(Cell::new(0u32));
    let (tx, rx) = oneshot::channel::<ThreadId>();
    let (inner_runs, inner_backend) = (Rc::clone(&runs), backend.clone());
    backend.spawn_local(async move {
        inner_runs.set(inner_runs.get() + 1);
        let nested_runs = Rc::clone(&inner_runs);
        inner_backend.spawn_local(async move {
            nested_runs.set(nested_runs.get() + 10);
            let _ = tx.send(std::thread::current().id());
        });
    });
    let thread = within(backend, "spawned task", rx)
        .await?
        .map_err(|_| "spawned task dropped its sender without running".to_string())?;
    ensure(thread == std::thread::current().id(), || {
        "spawn_local ran the task on another thread".to_string()
    })?;
    ensure(runs.get() == 11, || {
        format!(
            "spawned tasks ran {} (expected outer 1 + nested 10)",
            runs.get()
        )
    })
}

/// `run_blocking` runs its call on another thread and answers its result, and a call that
/// blocks does not hold back the shard's file operations: here the call waits until the
/// shard has created a directory and written a file (a backend that queued file work behind
/// it would have the call give up, bounded, and the check fail).
pub async fn check_run_blocking_delays_no_file_operation<B: Backend>(
    backend: &B,
    dir: &Path,
) -> Result<(), String> {
    let dir = dir.join("run_blocking");
    let (release, released) = std::sync::mpsc::channel::<()>();
    let shard_thread = std::thread::current().id();
    let call = backend.run_blocking(move || {
        let elsewhere = std::thread::current().id() != shard_thread;
        let was_released = released.recv_timeout(CHECK_TIMEOUT / 2).is_ok();
        Ok((elsewhere, was_released))
    });
    let file_work = async {
        step("create_dir_all", backend.create_dir_all(&dir).await)?;
        write_file(backend, &dir.join("written"), b"while a call blocks").await?;
        let _ = release.send(());
        Ok::<(), String>(())
    };
    let (called, worked) = futures::join!(
        within(backend, "run_blocking", call),
        within(backend, "file work beside run_blocking", file_work)
    );
    worked??;
    let (elsewhere, was_released) = step("run_blocking", called?)?;
    ensure(elsewhere, || {
        "run_blocking ran its call on the shard's thread".into()
    })?;
    ensure(was_released, || {
        "the shard's file operations waited for a blocking call".into()
    })
}

/// `run_shards(2, …)` runs `main` once on each of `ShardId(0)` and `ShardId(1)`, on two
/// different threads, neither of them the caller's, and returns after both finished.
pub fn check_two_shards<B: Backend>() -> Result<(), String> {
    let seen: Arc<Mutex<Vec<(ShardId, ThreadId)>>> = Arc::default();
    let record = Arc::clone(&seen);
    let result = B::run_shards(2, move |backend| {
        let record = Arc::clone(&record);
        async move {
            // Yield through the backend once so the shard's executor really runs.
            backend.sleep(Duration::from_millis(1)).await;
            record
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((backend.shard(), std::thread::current().id()));
        }
    });
    step("run_shards(2)", result)?;
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let shards: BTreeSet<ShardId> = seen.iter().map(|(s, _)| *s).collect();
    let threads: BTreeSet<String> = seen.iter().map(|(_, t)| format!("{t:?}")).collect();
    ensure(seen.len() == 2, || {
        format!("main ran {} times, expected 2: {seen:?}", seen.len())
    })?;
    ensure(shards == BTreeSet::from([ShardId(0), ShardId(1)]), || {
        format!("shards seen: {shards:?}, expected ShardId(0) and ShardId(1)")
    })?;
    ensure(threads.len() == 2, || {
        format!("both shards ran on one thread: {seen:?}")
    })?;
    ensure(
        seen.iter().all(|(_, t)| *t != std::thread::current().id()),
        || "a shard ran on the caller's thread".to_string(),
    )
}

/// Runs every check on one shard of `B` (each in its own subdirectory of `dir`), then
/// [`check_two_shards`] and [`check_shard_clocks_agree`].
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_all<B: Backend>(dir: &Path) {
    let mut failures = run_on_one_shard::<B, _, _>(dir, |backend, root| async move {
        run_checks!(
            backend,
            root,
            [
                check_read_write_round_trip,
                check_len_and_truncate,
                check_preallocate_extends_with_zeros,
                check_sync_data_and_reopen,
                check_directory_ops,
                check_unlinked_file_stays_readable,
                check_open_modes,
                check_read_only_cannot_write,
                check_tcp_echo,
                check_sleep_waits,
                check_clocks,
                check_spawn_local_runs,
                check_run_blocking_delays_no_file_operation,
            ]
        )
    });
    if let Err(e) = check_two_shards::<B>() {
        failures.push(format!("check_two_shards: {e}"));
    }
    if let Err(e) = check_shard_clocks_agree::<B>() {
        failures.push(format!("check_shard_clocks_agree: {e}"));
    }
    assert_none_failed("backend conformance", &failures);
}
