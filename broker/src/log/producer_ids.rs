//! Durable producer-id allocation: idempotent producer ids unique across restarts.
//!
//! Contract:
//! - Ids come in blocks of [`PRODUCER_ID_BLOCK_SIZE`], reserved by persisting the block's end
//!   in `<log.dirs>/producer_id_block` (written to a `.tmp`, synced, renamed, directory
//!   synced) *before* any id of the block is handed out, so an id never repeats, whatever the
//!   crash; ids left unused in a block are skipped after a restart.
//! - An epoch bump (KIP-360) of an id below the persisted high-water mark keeps the id with
//!   epoch + 1; at the end of the epoch range, or for an id never issued, a fresh id.
//! - A damaged high-water file is an error, never a reset to 0 (which could repeat ids).
//! - Shared by every shard (`Send + Sync`, I11): one allocation at a time, its lock held
//!   across the file write.

use std::io;
use std::path::{Path, PathBuf};

use minikafka_core::backend::{Backend, BackendFile, OpenMode};

/// Producer ids reserved per write of the high-water mark.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// File in the data directory holding the first producer id not yet reserved.
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer_id_block";
/// The last epoch that may still be bumped (Kafka reserves `i16::MAX`).
const LAST_BUMPABLE_EPOCH: i16 = i16::MAX - 2;

/// The ids reserved and not yet handed out.
#[derive(Debug, Default)]
struct Block {
    loaded: bool,
    next: i64,
    limit: i64,
}

/// Hands out producer ids unique across restarts (see the module documentation). Shared by
/// every shard (`Send + Sync`); one allocation at a time, held across the file write.
#[derive(Debug, Default)]
pub struct ProducerIdAllocator {
    block: futures::lock::Mutex<Block>,
}

impl ProducerIdAllocator {
    /// An allocator that reads the high-water mark on first use.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh id with epoch 0, or — when `current` is an id this broker may have issued with
    /// a bumpable epoch — the same id with epoch + 1. The file lives in `data_dir`.
    pub async fn allocate<B: Backend>(
        &self,
        backend: &B,
        data_dir: &Path,
        current: Option<(i64, i16)>,
    ) -> io::Result<(i64, i16)> {
        let mut block = self.block.lock().await;
        if !block.loaded {
            let high_water = read_high_water(backend, data_dir).await?;
            *block = Block {
                loaded: true,
                next: high_water,
                limit: high_water,
            };
        }
        if let Some((id, epoch)) = current {
            if (0..block.limit).contains(&id) && (0..=LAST_BUMPABLE_EPOCH).contains(&epoch) {
                return Ok((id, epoch + 1));
            }
        }
        if block.next >= block.limit {
            let limit = block
                .limit
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or_else(|| io::Error::other("producer ids exhausted"))?;
            write_high_water(backend, data_dir, limit).await?;
            block.limit = limit;
        }
        let id = block.next;
        block.next += 1;
        Ok((id, 0))
    }
}

/// The persisted high-water mark: 0 when the file does not exist.
async fn read_high_water<B: Backend>(backend: &B, data_dir: &Path) -> io::Result<i64> {
    let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
    let file = match backend.open(&path, OpenMode::ReadOnly).await {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let len = file.len().await?;
    let bad = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    if len > 64 {
        let _ = file.close().await;
        return Err(bad("too large"));
    }
    let (result, bytes) = file.read_at(Vec::with_capacity(64), 0, len as usize).await;
    let _ = file.close().await;
    result?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text"))?;
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| bad("not a producer id"))
}

/// Persists `high_water` atomically (`.tmp`, sync, rename, directory sync).
async fn write_high_water<B: Backend>(
    backend: &B,
    data_dir: &Path,
    high_water: i64,
) -> io::Result<()> {
    let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let file = backend.open(&tmp, OpenMode::ReadWriteCreate).await?;
    file.truncate(0).await?;
    let (result, _) = file
        .write_at(format!("{high_water}\n").into_bytes(), 0)
        .await;
    result?;
    file.sync_data().await?;
    file.close().await?;
    backend.rename(&tmp, &path).await?;
    backend.sync_dir(data_dir).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_backend_portable::PortableBackend;

    fn run<F: std::future::Future<Output = ()> + 'static>(
        f: impl Fn(PortableBackend) -> F + Send + Sync + 'static,
    ) {
        use minikafka_core::backend::Backend as _;
        PortableBackend::run_shards(1, f).expect("run");
    }

    #[test]
    fn ids_never_repeat_across_restarts_and_bumps_keep_the_id() {
        let dir = tempfile_dir("pid-alloc");
        let d = dir.clone();
        run(move |backend| {
            let d = d.clone();
            async move {
                let first = ProducerIdAllocator::new();
                let a = first.allocate(&backend, &d, None).await.expect("a");
                let b = first.allocate(&backend, &d, None).await.expect("b");
                assert_eq!((a, b), ((0, 0), (1, 0)));
                assert_eq!(
                    first
                        .allocate(&backend, &d, Some((1, 4)))
                        .await
                        .expect("bump"),
                    (1, 5)
                );
                // Not ours, or at the end of the epochs: a fresh id.
                assert_eq!(
                    first
                        .allocate(&backend, &d, Some((5_000, 0)))
                        .await
                        .expect("unknown"),
                    (2, 0)
                );
                assert_eq!(
                    first
                        .allocate(&backend, &d, Some((1, i16::MAX - 1)))
                        .await
                        .expect("exhausted"),
                    (3, 0)
                );
                // A restart (a new allocator) starts after the reserved block.
                let second = ProducerIdAllocator::new();
                let c = second.allocate(&backend, &d, None).await.expect("c");
                assert_eq!(c, (PRODUCER_ID_BLOCK_SIZE, 0));
                // A damaged file is an error, never a reset to 0.
                std::fs::write(d.join(PRODUCER_ID_BLOCK_FILE), b"garbage").expect("write");
                let third = ProducerIdAllocator::new();
                assert!(third.allocate(&backend, &d, None).await.is_err());
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("minikafka-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }
}
