//! File and directory round trips through the monoio backend.

mod common;

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;

use common::{on_one_shard, TempDir};
use minikafka_core::backend::{Backend, BackendFile, OpenMode};

#[test]
fn write_read_len_truncate_round_trip() {
    let dir = Arc::new(TempDir::new("round-trip"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("00000000000000000000.log");
        async move {
            let file = backend
                .open(&path, OpenMode::ReadWriteCreate)
                .await
                .expect("open");
            assert_eq!(file.len().await.expect("len"), 0);

            let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
            let (res, handed_back) = file.write_at(payload.clone(), 0).await;
            res.expect("write");
            assert_eq!(
                handed_back, payload,
                "write_at hands the buffer back intact"
            );
            let (res, _) = file.write_at(b"tail".to_vec(), 10_000).await;
            res.expect("write tail");
            file.sync_data().await.expect("sync");
            assert_eq!(file.len().await.expect("len"), 10_004);

            // Reuses the caller's capacity and clears old contents first.
            let scratch = Vec::with_capacity(64);
            let (res, got) = file.read_at(scratch, 100, 50).await;
            res.expect("read");
            assert_eq!(got, payload[100..150]);
            let (res, got) = file.read_at(got, 9_998, 6).await;
            res.expect("read across the two writes");
            assert_eq!(
                got,
                [payload[9_998], payload[9_999], b't', b'a', b'i', b'l']
            );

            // Short only at end of file; empty past it.
            let (res, got) = file.read_at(got, 10_000, 100).await;
            res.expect("read at eof");
            assert_eq!(got, b"tail");
            let (res, got) = file.read_at(got, 20_000, 100).await;
            res.expect("read past eof");
            assert!(got.is_empty());

            // Truncate drops a torn tail.
            file.truncate(10_000).await.expect("truncate");
            assert_eq!(file.len().await.expect("len"), 10_000);
            let (res, got) = file.read_at(got, 0, 20_000).await;
            res.expect("read all");
            assert_eq!(got, payload);
            file.close().await.expect("close");

            // Reopen read-only and see the same bytes.
            let file = backend
                .open(&path, OpenMode::ReadOnly)
                .await
                .expect("reopen");
            let (res, got) = file.read_at(Vec::new(), 0, 10_000).await;
            res.expect("read after reopen");
            assert_eq!(got, payload);
            file.close().await.expect("close");
        }
    });
}

#[test]
fn reads_longer_than_one_chunk_are_complete() {
    let dir = Arc::new(TempDir::new("big-read"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let path = root.join("big");
        async move {
            let total = minikafka_backend_monoio::READ_CHUNK_BYTES * 2 + 123;
            let payload: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let (res, _) = file.write_at(payload.clone(), 0).await;
            res.expect("write");
            let (res, got) = file.read_at(Vec::new(), 0, total + 10).await;
            res.expect("read");
            assert_eq!(got.len(), total);
            assert!(got == payload);
            file.close().await.expect("close");
        }
    });
}

#[test]
fn open_modes_report_os_errors_unchanged() {
    let dir = Arc::new(TempDir::new("modes"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let root = root.clone();
        async move {
            let missing = root.join("missing");
            let err = backend
                .open(&missing, OpenMode::ReadOnly)
                .await
                .expect_err("missing file");
            assert_eq!(err.kind(), ErrorKind::NotFound);
            assert_eq!(err.raw_os_error(), Some(libc_enoent()), "errno survives");
            let err = backend
                .open(&missing, OpenMode::ReadWrite)
                .await
                .expect_err("ReadWrite does not create");
            assert_eq!(err.kind(), ErrorKind::NotFound);

            let path = root.join("once");
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("create new");
            file.close().await.expect("close");
            let err = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect_err("CreateNew on an existing file");
            assert_eq!(err.kind(), ErrorKind::AlreadyExists);

            let file = backend
                .open(&path, OpenMode::ReadOnly)
                .await
                .expect("open ro");
            let (res, _) = file.write_at(b"x".to_vec(), 0).await;
            let err = res.expect_err("write to a read-only handle");
            assert_eq!(err.raw_os_error(), Some(9), "EBADF");
            file.close().await.expect("close");

            // ReadWriteCreate does not truncate an existing file.
            let file = backend
                .open(&path, OpenMode::ReadWrite)
                .await
                .expect("open rw");
            let (res, _) = file.write_at(b"keep".to_vec(), 0).await;
            res.expect("write");
            file.close().await.expect("close");
            let file = backend
                .open(&path, OpenMode::ReadWriteCreate)
                .await
                .expect("open rwc");
            assert_eq!(file.len().await.expect("len"), 4);
            file.close().await.expect("close");
        }
    });
}

fn libc_enoent() -> i32 {
    2
}

#[test]
fn relative_paths_work() {
    // Relative paths resolve against the process's working directory, as std's do.
    let dir = TempDir::new("relative");
    let cwd = std::env::current_dir().expect("cwd");
    let relative: PathBuf = pathdiff(dir.path(), &cwd);
    on_one_shard(move |backend| {
        let path = relative.join("rel.log");
        async move {
            let file = backend
                .open(&path, OpenMode::ReadWriteCreate)
                .await
                .expect("open relative path");
            let (res, _) = file.write_at(b"abc".to_vec(), 0).await;
            res.expect("write");
            file.sync_data().await.expect("sync");
            file.close().await.expect("close");
            backend
                .rename(&path, &path.with_extension("old"))
                .await
                .expect("rename relative");
            backend
                .remove_file(&path.with_extension("old"))
                .await
                .expect("remove relative");
        }
    });
    assert!(std::fs::read_dir(dir.path())
        .expect("read dir")
        .next()
        .is_none());
}

/// `target` relative to `base` via `..` components (both absolute).
fn pathdiff(target: &std::path::Path, base: &std::path::Path) -> PathBuf {
    let mut out = PathBuf::new();
    for _ in base.components().skip(1) {
        out.push("..");
    }
    for part in target.components().skip(1) {
        out.push(part);
    }
    out
}

#[test]
fn directory_operations() {
    let dir = Arc::new(TempDir::new("dirs"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let root = root.clone();
        async move {
            let topic = root.join("a/b/topic-0");
            backend
                .create_dir_all(&topic)
                .await
                .expect("create_dir_all");
            backend
                .create_dir_all(&topic)
                .await
                .expect("create_dir_all is idempotent");
            for name in ["1.log", "1.index", "2.log"] {
                let file = backend
                    .open(&topic.join(name), OpenMode::CreateNew)
                    .await
                    .expect("create");
                file.close().await.expect("close");
            }
            backend.sync_dir(&topic).await.expect("sync_dir");

            backend
                .rename(&topic.join("2.log"), &topic.join("3.log"))
                .await
                .expect("rename");
            backend
                .remove_file(&topic.join("1.index"))
                .await
                .expect("remove");
            let err = backend
                .remove_file(&topic.join("1.index"))
                .await
                .expect_err("remove twice");
            assert_eq!(err.kind(), ErrorKind::NotFound);

            let mut listed = backend.list_dir(&topic).await.expect("list");
            listed.sort();
            assert_eq!(listed, vec![topic.join("1.log"), topic.join("3.log")]);

            backend
                .remove_dir_all(&root.join("a"))
                .await
                .expect("remove_dir_all");
            let err = backend.list_dir(&topic).await.expect_err("gone");
            assert_eq!(err.kind(), ErrorKind::NotFound);
        }
    });
}

#[test]
fn unlinked_and_renamed_files_keep_working() {
    let dir = Arc::new(TempDir::new("unlink"));
    let root = dir.path().to_path_buf();
    on_one_shard(move |backend| {
        let root = root.clone();
        async move {
            let path = root.join("seg.log");
            let file = backend
                .open(&path, OpenMode::CreateNew)
                .await
                .expect("open");
            let (res, _) = file.write_at(b"hello".to_vec(), 0).await;
            res.expect("write");
            backend
                .rename(&path, &root.join("seg.deleted"))
                .await
                .expect("rename");
            assert_eq!(file.len().await.expect("len after rename"), 5);
            backend
                .remove_file(&root.join("seg.deleted"))
                .await
                .expect("remove");
            assert_eq!(file.len().await.expect("len after unlink"), 5);
            let (res, got) = file.read_at(Vec::new(), 0, 5).await;
            res.expect("read after unlink");
            assert_eq!(got, b"hello");
            file.close().await.expect("close");
        }
    });
}
