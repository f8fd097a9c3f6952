//! Checks that each fault fires as specified, through the trait alone, so they run on every
//! backend. Each takes a [`FaultyBackend`] (whose plan it heals first) and a scratch directory.

use super::*;
use crate::check::{assert_none_failed, ensure, run_checks, run_on_one_shard, step};

fn expect_raw<T>(what: &str, result: io::Result<T>, raw: i32) -> Result<(), String> {
    match result {
        Ok(_) => Err(format!("{what}: succeeded, expected raw OS error {raw}")),
        Err(e) if e.raw_os_error() == Some(raw) => Ok(()),
        Err(e) => Err(format!("{what}: got {e}, expected raw OS error {raw}")),
    }
}

/// Reads the whole file at `path` through the inner backend (bypassing the plan).
async fn contents<B: Backend>(backend: &B, path: &Path) -> Result<Vec<u8>, String> {
    let file = step("inner open", backend.open(path, OpenMode::ReadOnly).await)?;
    let len = step("inner len", file.len().await)?;
    let len = usize::try_from(len).map_err(|_| "file too large".to_string())?;
    let (result, buf) = file.read_at(Vec::new(), 0, len).await;
    step("inner read_at", result)?;
    step("inner close", file.close().await)?;
    Ok(buf)
}

async fn fresh_file<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
    name: &str,
) -> Result<(PathBuf, FaultyFile<B::File>), String> {
    step("create_dir_all", backend.create_dir_all(dir).await)?;
    let path = dir.join(name);
    let file = step("open", backend.open(&path, OpenMode::CreateNew).await)?;
    Ok((path, file))
}

/// `fail_after(n)`: the next `n` calls succeed, then every filesystem call of every kind
/// fails with EIO and changes nothing; timers still work; `heal`
/// ends the crash.
pub async fn check_fail_after<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let (path, file) = fresh_file(backend, dir, "crash").await?;
    plan.fail_after(2);
    let (r, _) = file.write_at(b"before".to_vec(), 0).await;
    step("write_at before the crash point", r)?;
    step("sync_data before the crash point", file.sync_data().await)?;
    ensure(!plan.is_crashed(), || "crashed too early".to_string())?;
    let (r, back) = file.write_at(b"after".to_vec(), 6).await;
    expect_raw("write_at after the crash point", r, EIO_RAW)?;
    ensure(back == b"after", || "buffer not handed back".to_string())?;
    ensure(plan.is_crashed(), || {
        "is_crashed() is false past the point".to_string()
    })?;
    let (r, _) = file.read_at(Vec::new(), 0, 6).await;
    expect_raw("read_at", r, EIO_RAW)?;
    expect_raw("sync_data", file.sync_data().await, EIO_RAW)?;
    expect_raw("truncate", file.truncate(0).await, EIO_RAW)?;
    expect_raw("len", file.len().await, EIO_RAW)?;
    expect_raw(
        "open",
        backend.open(&path, OpenMode::ReadOnly).await,
        EIO_RAW,
    )?;
    expect_raw("list_dir", backend.list_dir(dir).await, EIO_RAW)?;
    expect_raw("sync_dir", backend.sync_dir(dir).await, EIO_RAW)?;
    expect_raw(
        "create_dir_all",
        backend.create_dir_all(&dir.join("x")).await,
        EIO_RAW,
    )?;
    let moved = dir.join("moved");
    expect_raw("rename", backend.rename(&path, &moved).await, EIO_RAW)?;
    expect_raw("remove_file", backend.remove_file(&path).await, EIO_RAW)?;
    expect_raw("remove_dir_all", backend.remove_dir_all(dir).await, EIO_RAW)?;
    expect_raw("close", file.close().await, EIO_RAW)?;
    backend.sleep(Duration::from_millis(1)).await;
    ensure(plan.injected_count() >= 12, || {
        format!(
            "{} faults injected, expected at least 12",
            plan.injected_count()
        )
    })?;
    // Nothing faulted changed the disk: only the pre-crash write is there.
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"before", || format!("file holds {on_disk:?}"))?;
    plan.heal();
    step("list_dir after heal", backend.list_dir(dir).await).map(drop)
}

/// `tear_next_write_at(byte)`: the next `write_at` writes exactly its first `byte` bytes
/// and returns EIO (handing the whole buffer back); the write after it is whole again.
pub async fn check_torn_write<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let (path, file) = fresh_file(backend, dir, "torn").await?;
    let (r, _) = file.write_at(b"0123456789".to_vec(), 0).await;
    step("first write_at", r)?;
    plan.tear_next_write_at(3);
    let (r, back) = file.write_at(b"abcdef".to_vec(), 10).await;
    expect_raw("torn write_at", r, EIO_RAW)?;
    ensure(back == b"abcdef", || {
        format!("buffer handed back: {back:?}")
    })?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"0123456789abc", || {
        format!(
            "after a tear at byte 3 the file holds {:?}",
            String::from_utf8_lossy(&on_disk)
        )
    })?;
    let (r, _) = file.write_at(b"XY".to_vec(), 13).await;
    step("write_at after the tear (tears fire once)", r)?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"0123456789abcXY", || {
        format!("file holds {:?}", String::from_utf8_lossy(&on_disk))
    })?;
    // A tear at 0 writes nothing; a tear past the end writes everything, then fails.
    plan.tear_next_write_at(0);
    let (r, _) = file.write_at(b"zz".to_vec(), 0).await;
    expect_raw("tear at byte 0", r, EIO_RAW)?;
    plan.tear_next_write_at(100);
    let (r, _) = file.write_at(b"!!".to_vec(), 15).await;
    expect_raw("tear past the buffer", r, EIO_RAW)?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"0123456789abcXY!!", || {
        format!("file holds {:?}", String::from_utf8_lossy(&on_disk))
    })?;
    step("close", file.close().await)
}

/// `write_parts_at` writes its parts back to back, through the backend's vectored write
/// (empty parts and a part boundary inside the write included), and a pending tear cuts it
/// at the concatenation's byte: the file then holds exactly that prefix, and EIO comes back
/// with every part handed back.
pub async fn check_torn_parts_write<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let (path, file) = fresh_file(backend, dir, "parts").await?;
    let parts = |pieces: &[&'static [u8]]| -> Vec<Bytes> {
        pieces.iter().map(|p| Bytes::from_static(p)).collect()
    };
    let (r, _) = file
        .write_parts_at(parts(&[b"0123", b"", b"456789"]), 0)
        .await;
    step("write_parts_at", r)?;
    plan.tear_next_write_at(5);
    let torn = parts(&[b"abc", b"defg", b"hij"]);
    let (r, back) = file.write_parts_at(torn.clone(), 10).await;
    expect_raw("torn write_parts_at", r, EIO_RAW)?;
    ensure(back == torn, || format!("parts handed back: {back:?}"))?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"0123456789abcde", || {
        format!(
            "after a tear at byte 5 the file holds {:?}",
            String::from_utf8_lossy(&on_disk)
        )
    })?;
    let (r, _) = file.write_parts_at(parts(&[b"E", b"FG"]), 14).await;
    step("write_parts_at after the tear", r)?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"0123456789abcdEFG", || {
        format!("file holds {:?}", String::from_utf8_lossy(&on_disk))
    })?;
    step("close", file.close().await)
}

/// `enospc_on_write(true)`: every `write_at` fails with ENOSPC and writes nothing, other
/// calls work; clearing it lets writes through again.
pub async fn check_enospc_on_write<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let (path, file) = fresh_file(backend, dir, "full").await?;
    let (r, _) = file.write_at(b"abc".to_vec(), 0).await;
    step("write_at before ENOSPC", r)?;
    plan.enospc_on_write(true);
    for attempt in 0..3u64 {
        let (r, back) = file.write_at(b"more".to_vec(), 3 + attempt).await;
        expect_raw("write_at while ENOSPC", r, ENOSPC_RAW)?;
        ensure(back == b"more", || "buffer not handed back".to_string())?;
    }
    step("sync_data while ENOSPC", file.sync_data().await)?;
    step("len while ENOSPC", file.len().await)?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"abc", || {
        format!("ENOSPC writes changed the file: {on_disk:?}")
    })?;
    plan.enospc_on_write(false);
    let (r, _) = file.write_at(b"def".to_vec(), 3).await;
    step("write_at after clearing ENOSPC", r)?;
    let on_disk = contents(backend.inner(), &path).await?;
    ensure(on_disk == b"abcdef", || format!("file holds {on_disk:?}"))?;
    step("close", file.close().await)
}

/// `eio_on_sync(true)`: `sync_data` and `sync_dir` fail with EIO while writes and reads
/// work; clearing it lets syncs through.
pub async fn check_eio_on_sync<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let (_path, file) = fresh_file(backend, dir, "sync").await?;
    plan.eio_on_sync(true);
    let (r, _) = file.write_at(b"data".to_vec(), 0).await;
    step("write_at while sync fails", r)?;
    expect_raw("sync_data", file.sync_data().await, EIO_RAW)?;
    expect_raw("sync_data again", file.sync_data().await, EIO_RAW)?;
    expect_raw("sync_dir", backend.sync_dir(dir).await, EIO_RAW)?;
    let (r, buf) = file.read_at(Vec::new(), 0, 4).await;
    step("read_at while sync fails", r)?;
    ensure(buf == b"data", || format!("read {buf:?}"))?;
    plan.eio_on_sync(false);
    step("sync_data after clearing", file.sync_data().await)?;
    step("sync_dir after clearing", backend.sync_dir(dir).await)?;
    step("close", file.close().await)
}

/// The op counter rises by exactly one per filesystem call (faulted or not) and not at all
/// for timers.
pub async fn check_op_counter<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let plan = backend.plan();
    plan.heal();
    let start = plan.op_count();
    let (_path, file) = fresh_file(backend, dir, "count").await?; // create_dir_all + open
    let (r, _) = file.write_at(b"x".to_vec(), 0).await;
    step("write_at", r)?;
    plan.eio_on_sync(true);
    let _ = file.sync_data().await; // faulted, still counted
    plan.eio_on_sync(false);
    step("len", file.len().await)?;
    backend.sleep(Duration::from_millis(1)).await; // not a filesystem call
    step("close", file.close().await)?;
    let counted = plan.op_count() - start;
    ensure(counted == 6, || {
        format!("counted {counted} ops, expected 6")
    })
}

/// The same seed replays the same random crash point and torn-write length.
pub async fn check_seeded_replay<B: Backend>(
    backend: &FaultyBackend<B>,
    dir: &Path,
) -> Result<(), String> {
    let mut outcomes = Vec::new();
    for run in 0..2 {
        let mut per_seed = Vec::new();
        for seed in [1u64, 7, 42] {
            let faulty = FaultyBackend::new(backend.inner().clone(), FaultPlan::with_seed(seed));
            let sub = dir.join(format!("run{run}-seed{seed}"));
            let (path, file) = fresh_file(&faulty, &sub, "r").await?;
            faulty.plan().tear_next_write_randomly();
            let (r, _) = file.write_at(vec![b'#'; 1000], 0).await;
            expect_raw("random tear", r, EIO_RAW)?;
            let torn_bytes = contents(backend.inner(), &path).await?.len();
            ensure(torn_bytes < 1000, || {
                format!("random tear wrote {torn_bytes} of 1000")
            })?;
            let crash_ops = faulty.plan().crash_randomly_within(50);
            ensure(crash_ops <= 50, || format!("crash point {crash_ops} > 50"))?;
            per_seed.push((seed, torn_bytes, crash_ops));
        }
        outcomes.push(per_seed);
    }
    ensure(outcomes[0] == outcomes[1], || {
        format!("seeded runs differ: {:?} vs {:?}", outcomes[0], outcomes[1])
    })
}

/// Runs every fault check on one shard of `FaultyBackend<B>`, each in its own subdirectory
/// of `dir`.
///
/// # Panics
/// With the list of every failed check, if any failed.
pub fn run_fault_checks<B: Backend>(dir: &Path) {
    let failures = run_on_one_shard::<FaultyBackend<B>, _, _>(dir, |backend, root| async move {
        run_checks!(
            backend,
            root,
            [
                check_fail_after,
                check_torn_write,
                check_torn_parts_write,
                check_enospc_on_write,
                check_eio_on_sync,
                check_op_counter,
                check_seeded_replay,
            ]
        )
    });
    assert_none_failed("fault checks", &failures);
}
