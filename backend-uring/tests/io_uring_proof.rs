//! Proof that syncs go through io_uring; reads through io_uring or, for large reads of bytes
//! the page cache holds, as a non-blocking `preadv2(RWF_NOWAIT)` on the shard's own thread;
//! writes through io_uring or, on a filesystem that refuses non-blocking buffered writes, as
//! `pwritev` on the shard's own thread, whatever their size (never a thread pool, never a
//! read that waits for the disk on the shard); opens are `openat(2)` and directory
//! listings `getdents64` on the shard's thread.
//!
//! The backend counts each glommio operation it issues and each read and write it does on the
//! shard; glommio's reactor separately counts each buffered read and write completion it reaps
//! from its rings. If a build ever served file I/O any other way, the counters would not add
//! up and this test would fail.

mod common;

use common::{on_one_shard, TempDir};
use minikafka_backend_uring::WritePath;
use minikafka_core::backend::{Backend, BackendFile, OpenMode};
use std::sync::Arc;

const OPS: u64 = 25;
const BLOCK_BYTES: usize = 512;

#[test]
fn file_reads_writes_and_syncs_are_io_uring_operations() {
    let dir = Arc::new(TempDir::new("proof"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("proof.log");
        let root = root.clone();
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let before = backend.io_stats();
            // An open is an `openat(2)` on the shard's thread (the ring's adds a punted STATX).
            assert!(
                before.files_opened_on_shard >= 1 && before.ring_files_opened == 0,
                "open: {before:?}"
            );
            // A listing is `getdents64` on the shard's thread, not a hop to a blocking thread.
            let listing = backend.list_dir(&root).await.expect("list");
            assert_eq!(listing, vec![path.clone()]);
            let listed = backend.io_stats().dirs_listed_on_shard - before.dirs_listed_on_shard;
            assert_eq!(listed, 1, "list_dir on the shard");

            let mut buf = vec![0u8; BLOCK_BYTES];
            for i in 0..OPS {
                buf.fill(i as u8);
                let (res, back) = file.write_at(buf, i * BLOCK_BYTES as u64).await;
                res.expect("write");
                buf = back;
                file.sync_data().await.expect("sync");
            }
            for i in 0..OPS {
                let (res, back) = file.read_at(buf, i * BLOCK_BYTES as u64, BLOCK_BYTES).await;
                res.expect("read");
                assert_eq!(back, vec![i as u8; BLOCK_BYTES]);
                buf = back;
            }
            let after = backend.io_stats();

            // The backend's own counters: exactly one operation per call.
            let ring_writes = after.file_writes - before.file_writes;
            let shard_writes = after.file_writes_on_shard - before.file_writes_on_shard;
            assert_eq!(ring_writes + shard_writes, OPS);
            assert_eq!(after.file_syncs - before.file_syncs, OPS);
            // Reads smaller than CACHED_READ_MIN_BYTES always go through the ring.
            const { assert!(BLOCK_BYTES < minikafka_backend_uring::CACHED_READ_MIN_BYTES) };
            let ring_reads = after.file_reads - before.file_reads;
            let shard_reads = after.file_reads_on_shard - before.file_reads_on_shard;
            assert_eq!((ring_reads, shard_reads), (OPS, 0));
            // The first write asked the filesystem; every later one took the path it chose.
            match file.write_path() {
                WritePath::OnShard => assert_eq!(shard_writes, OPS),
                WritePath::Ring => assert_eq!(shard_writes, 1),
                WritePath::Undecided => assert_eq!(shard_writes, 0),
            }
            // glommio's ring counters moved by exactly the backend's ring writes and reads.
            assert_eq!(
                after.ring_buffered_writes - before.ring_buffered_writes,
                ring_writes
            );
            assert_eq!(
                after.ring_buffered_reads - before.ring_buffered_reads,
                ring_reads
            );
            let total_bytes = OPS * BLOCK_BYTES as u64;
            assert_eq!(
                after.ring_buffered_bytes_written - before.ring_buffered_bytes_written,
                ring_writes * BLOCK_BYTES as u64
            );
            assert_eq!(
                after.ring_buffered_bytes_read - before.ring_buffered_bytes_read
                    + after.file_bytes_read_on_shard
                    - before.file_bytes_read_on_shard,
                total_bytes
            );

            // Calls that do no file I/O move no counter.
            let idle = backend.io_stats();
            file.len().await.expect("len");
            assert_eq!(backend.io_stats(), idle);
            file.close().await.expect("close");
        }
    });
}

/// A large write takes the path the filesystem's answer to the file's first write chose:
/// `pwritev` on the shard where it refuses non-blocking buffered writes (the ring would punt
/// it to a kernel worker), the ring where it does them.
#[test]
fn large_writes_take_the_path_of_the_filesystems_answer() {
    let dir = Arc::new(TempDir::new("proof-large"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("large.log");
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let (res, _) = file.write_at(vec![1u8; 16], 0).await;
            res.expect("small write");
            let before = backend.io_stats();
            let large = vec![7u8; 4 * minikafka_core::backend::INLINE_WRITE_MAX_BYTES];
            let (res, back) = file.write_at(large, 16).await;
            res.expect("large write");
            let after = backend.io_stats();
            let ring_writes = after.file_writes - before.file_writes;
            let shard_writes = after.file_writes_on_shard - before.file_writes_on_shard;
            match file.write_path() {
                WritePath::OnShard => assert_eq!((ring_writes, shard_writes), (0, 1)),
                WritePath::Ring => assert!(ring_writes >= 1 && shard_writes == 0),
                WritePath::Undecided => assert!(ring_writes >= 1 && shard_writes == 0),
            }
            assert_eq!(
                after.ring_buffered_writes - before.ring_buffered_writes,
                ring_writes,
                "{before:?} {after:?}"
            );
            let (res, read) = file.read_at(Vec::new(), 16, back.len()).await;
            res.expect("read");
            assert_eq!(read, back);
            file.close().await.expect("close");
        }
    });
}

/// A large read of bytes the page cache holds is answered on the shard, into the caller's
/// buffer; a read of bytes it dropped goes through the ring (the shard never waits for the
/// disk).
#[test]
fn cached_reads_are_answered_on_the_shard_and_cold_ones_by_the_ring() {
    const FILE_BYTES: usize = 256 * 1024;
    let dir = Arc::new(TempDir::new("proof-cold"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("cold.log");
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let data: Vec<u8> = (0..FILE_BYTES).map(|i| (i % 251) as u8).collect();
            let (res, _) = file.write_at(data.clone(), 0).await;
            res.expect("write");
            file.sync_data().await.expect("sync");

            let before = backend.io_stats();
            let (res, hot) = file.read_at(Vec::new(), 0, FILE_BYTES).await;
            res.expect("cached read");
            assert_eq!(hot, data);
            let hot_stats = backend.io_stats();
            assert_eq!(hot_stats.file_reads, before.file_reads, "{hot_stats:?}");
            assert_eq!(
                hot_stats.file_bytes_read_on_shard - before.file_bytes_read_on_shard,
                FILE_BYTES as u64
            );

            // Clean (synced) pages: DONTNEED drops them from the page cache.
            let std_file = std::fs::File::open(&path).expect("open for fadvise");
            // SAFETY: a valid descriptor; fadvise only advises the kernel.
            let advised = unsafe {
                libc::posix_fadvise(
                    std::os::fd::AsRawFd::as_raw_fd(&std_file),
                    0,
                    0,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
            assert_eq!(advised, 0, "posix_fadvise");
            let (res, cold) = file.read_at(Vec::new(), 0, FILE_BYTES).await;
            res.expect("cold read");
            assert_eq!(cold, data);
            let cold_stats = backend.io_stats();
            assert!(
                cold_stats.file_reads > hot_stats.file_reads,
                "a read of dropped pages went through the ring: {hot_stats:?} {cold_stats:?}"
            );
            assert_eq!(
                cold_stats.ring_buffered_bytes_read - hot_stats.ring_buffered_bytes_read
                    + cold_stats.file_bytes_read_on_shard
                    - hot_stats.file_bytes_read_on_shard,
                FILE_BYTES as u64
            );
            file.close().await.expect("close");
        }
    });
}
