//! Proof that file reads, writes and syncs go through io_uring, not blocking syscalls.
//!
//! The backend counts each glommio operation it issues; glommio's reactor separately counts
//! each buffered read and write completion it reaps from its rings. If a build ever served file
//! I/O with plain `pread`/`pwrite` (or a thread pool), glommio's ring counters would not move
//! and this test would fail.

mod common;

use common::{on_one_shard, TempDir};
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
        async move {
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let before = backend.io_stats();
            assert!(before.ring_files_opened >= 1, "open went through the ring");

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
            assert_eq!(after.file_writes - before.file_writes, OPS);
            assert_eq!(after.file_syncs - before.file_syncs, OPS);
            assert_eq!(after.file_reads - before.file_reads, OPS);
            // glommio's ring counters moved by exactly the same amounts.
            assert_eq!(
                after.ring_buffered_writes - before.ring_buffered_writes,
                OPS
            );
            assert_eq!(after.ring_buffered_reads - before.ring_buffered_reads, OPS);
            let total_bytes = OPS * BLOCK_BYTES as u64;
            assert_eq!(
                after.ring_buffered_bytes_written - before.ring_buffered_bytes_written,
                total_bytes
            );
            assert_eq!(
                after.ring_buffered_bytes_read - before.ring_buffered_bytes_read,
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
