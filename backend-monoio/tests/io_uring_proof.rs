//! Proof that the monoio backend's file I/O takes the paths its documentation names: syncs
//! and small reads are io_uring operations; writes are ring writes or, on a filesystem that
//! refuses non-blocking buffered writes, `pwritev` on the shard's own thread (decided by the
//! file's first write); large reads of cached bytes are answered on the shard and reads of
//! dropped pages go through the ring (never a read that waits for the disk on the shard).
//!
//! The backend counts each operation where it issues it; if a build served file I/O any other
//! way (a thread pool, a blocking read), the counters would not add up and these would fail.
//! Run with `TMPDIR` on another filesystem (tmpfs: `TMPDIR=/dev/shm`) to prove the other
//! write path.

mod common;

use bytes::Bytes;
use common::{on_one_shard, TempDir};
use minikafka_backend_monoio::{WritePath, CACHED_READ_MIN_BYTES};
use minikafka_core::backend::{Backend, BackendFile, OpenMode, INLINE_WRITE_MAX_BYTES};

const OPS: u64 = 25;
const BLOCK_BYTES: usize = 512;

#[test]
fn file_reads_writes_and_syncs_take_the_documented_paths() {
    let dir = TempDir::new("proof");
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let root = root.clone();
        async move {
            let path = root.join("proof.log");
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let before = backend.io_stats();
            assert_eq!(before.files_opened_on_shard, 1, "open on the shard");
            let listing = backend.list_dir(&root).await.expect("list");
            assert_eq!(listing, vec![path.clone()]);
            assert_eq!(
                backend.io_stats().dirs_listed_on_shard,
                1,
                "list on the shard"
            );

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
            let ring_writes = after.file_writes - before.file_writes;
            let shard_writes = after.file_writes_on_shard - before.file_writes_on_shard;
            assert_eq!(ring_writes + shard_writes, OPS, "{after:?}");
            assert_eq!(after.file_syncs - before.file_syncs, OPS);
            // Reads smaller than CACHED_READ_MIN_BYTES always go through the ring.
            const { assert!(BLOCK_BYTES < CACHED_READ_MIN_BYTES) };
            assert_eq!(after.file_reads - before.file_reads, OPS);
            assert_eq!(after.file_reads_on_shard, before.file_reads_on_shard);
            assert_eq!(
                after.file_bytes_read - before.file_bytes_read,
                OPS * BLOCK_BYTES as u64
            );
            match file.write_path() {
                WritePath::OnShard => assert_eq!(shard_writes, OPS),
                WritePath::Ring => assert_eq!(shard_writes, 1, "only the probing write"),
                WritePath::Undecided => assert_eq!(shard_writes, 0),
            }
            eprintln!("write path on {}: {:?}", root.display(), file.write_path());

            // Calls that do no file I/O move no counter.
            let idle = backend.io_stats();
            file.len().await.expect("len");
            assert_eq!(backend.io_stats(), idle);
            file.close().await.expect("close");
        }
    });
}

/// A large write, in one buffer or in parts, takes the path the filesystem's answer to the
/// file's first write chose, and lands exactly.
#[test]
fn large_and_vectored_writes_take_the_path_of_the_filesystems_answer() {
    let dir = TempDir::new("proof-large");
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
            let large = vec![7u8; 4 * INLINE_WRITE_MAX_BYTES];
            let (res, large) = file.write_at(large, 16).await;
            res.expect("large write");
            let parts = vec![
                Bytes::from_static(b"head"),
                Bytes::new(),
                Bytes::from(vec![9u8; 3 * INLINE_WRITE_MAX_BYTES]),
            ];
            let at = 16 + large.len() as u64;
            let (res, parts) = file.write_parts_at(parts, at).await;
            res.expect("parts write");
            let single = vec![Bytes::new(), Bytes::from(vec![5u8; 1000])];
            let at2 = at + minikafka_core::backend::parts_len(&parts) as u64;
            let (res, single) = file.write_parts_at(single, at2).await;
            res.expect("one-part write");
            let after = backend.io_stats();
            let ring_writes = after.file_writes - before.file_writes;
            let shard_writes = after.file_writes_on_shard - before.file_writes_on_shard;
            match file.write_path() {
                WritePath::OnShard => assert_eq!((ring_writes, shard_writes), (0, 3)),
                WritePath::Ring | WritePath::Undecided => {
                    assert!(ring_writes >= 3 && shard_writes == 0, "{after:?}")
                }
            }
            let mut want = vec![1u8; 16];
            want.extend_from_slice(&large);
            want.extend_from_slice(&parts.concat());
            want.extend_from_slice(&single.concat());
            let (res, read) = file.read_at(Vec::new(), 0, want.len() + 10).await;
            res.expect("read");
            assert!(read == want, "file contents differ from what was written");
            assert_eq!(file.len().await.expect("len"), want.len() as u64);
            file.close().await.expect("close");
        }
    });
}

/// A large read of bytes the page cache holds is answered on the shard, into the caller's
/// buffer; a read of bytes it dropped goes through the ring.
#[test]
fn cached_reads_are_answered_on_the_shard_and_cold_ones_by_the_ring() {
    const FILE_BYTES: usize = 256 * 1024;
    let dir = TempDir::new("proof-cold");
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
            assert!(hot == data, "cached read differs");
            let hot_stats = backend.io_stats();
            if !file.reads_on_shard() {
                // The filesystem refuses non-blocking reads (tmpfs): every read is the ring's.
                assert_eq!(
                    hot_stats.file_bytes_read - before.file_bytes_read,
                    FILE_BYTES as u64
                );
                return file.close().await.expect("close");
            }
            assert_eq!(hot_stats.file_reads, before.file_reads, "{hot_stats:?}");
            assert_eq!(
                hot_stats.file_bytes_read_on_shard - before.file_bytes_read_on_shard,
                FILE_BYTES as u64
            );

            // Clean (synced) pages: DONTNEED drops them from the page cache (on a disk; tmpfs
            // keeps them, and then the read is answered on the shard again).
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
            assert!(cold == data, "cold read differs");
            let cold_stats = backend.io_stats();
            assert_eq!(
                cold_stats.file_bytes_read - hot_stats.file_bytes_read
                    + cold_stats.file_bytes_read_on_shard
                    - hot_stats.file_bytes_read_on_shard,
                FILE_BYTES as u64,
                "every byte read once, by the ring or on the shard"
            );
            file.close().await.expect("close");
        }
    });
}

/// The ring write path (which the filesystems here never choose, so it is forced): a whole
/// buffer, several parts (concatenated once) and one part (the part itself) land exactly, each
/// as io_uring writes, none on the shard.
#[test]
fn forced_ring_writes_land_exactly_as_ring_operations() {
    let dir = TempDir::new("proof-ring");
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("ring.log");
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            file.force_write_path(WritePath::Ring);
            let before = backend.io_stats();
            let first: Vec<u8> = (0..3 * INLINE_WRITE_MAX_BYTES).map(|i| i as u8).collect();
            let (res, first) = file.write_at(first, 0).await;
            res.expect("ring write");
            let parts = vec![
                Bytes::from_static(b"head"),
                Bytes::new(),
                Bytes::from(vec![9u8; 5000]),
                Bytes::from_static(b"tail"),
            ];
            let at = first.len() as u64;
            let (res, parts) = file.write_parts_at(parts, at).await;
            res.expect("ring parts write");
            let one = vec![Bytes::new(), Bytes::from(vec![5u8; 700]), Bytes::new()];
            let at2 = at + minikafka_core::backend::parts_len(&parts) as u64;
            let (res, one) = file.write_parts_at(one, at2).await;
            res.expect("ring one-part write");
            // Overwrite in the middle: positional, not appending.
            let (res, _) = file.write_at(b"XY".to_vec(), 10).await;
            res.expect("ring overwrite");
            let (res, empty) = file.write_parts_at(Vec::new(), 0).await;
            res.expect("empty parts write");
            assert!(empty.is_empty());
            let after = backend.io_stats();
            assert!(after.file_writes - before.file_writes >= 4, "{after:?}");
            assert_eq!(after.file_writes_on_shard, before.file_writes_on_shard);

            let mut want = first.clone();
            want[10..12].copy_from_slice(b"XY");
            want.extend_from_slice(&parts.concat());
            want.extend_from_slice(&one.concat());
            let (res, read) = file.read_at(Vec::new(), 0, want.len()).await;
            res.expect("read");
            assert!(read == want, "file contents differ from what was written");
            file.sync_data().await.expect("sync");
            file.close().await.expect("close");
        }
    });
}
