//! The machine driver (`log::driver::MachineDriver`, I170) writes a log the broker reads back
//! whole: a `PartitionMachine` over a fresh directory, driven on the backend with 60
//! concurrent appends (so groups coalesce and a sync runs beside the next write), rolls by
//! size, an idempotent producer's duplicate, DeleteRecords and a close; then
//! `PartitionLog::open` recovers the directory and finds the same high watermark, log start
//! and segments, and every batch at the offsets the driver answered, with its records.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::future::join_all;

use minikafka_broker::log::driver::{MachineDriver, SegmentFiles, SplitBatch};
use minikafka_broker::log::partition::machine_config;
use minikafka_broker::log::{FlushPolicy, LogConfig, PartitionLog};
use minikafka_core::backend::Backend;
use minikafka_core::partition::txn::TxnTracker;
use minikafka_core::partition::{Append, Done, PartitionMachine, SegmentState};
use minikafka_core::producer::{ProducerLimits, ProducerStateTable};
use minikafka_core::record::BatchHeader;
use minikafka_core::types::Offset;
use minikafka_testkit::check::{ensure, run_check, scratch_dir};
use minikafka_testkit::log::{producer_batch, test_batch, NOW_MS};

async fn check<B: Backend>(backend: B, dir: PathBuf) -> Result<(), String> {
    let config = LogConfig {
        segment_bytes: 4_096,
        index_interval_bytes: 512,
        flush: FlushPolicy::Fsync,
        ..LogConfig::default()
    };
    let first = SegmentFiles::create(&backend, &dir, Offset(0))
        .await
        .map_err(|e| format!("create: {e}"))?;
    let machine = PartitionMachine::new(
        machine_config(&config),
        vec![SegmentState::empty(
            Offset(0),
            config.index_interval_bytes,
            NOW_MS,
        )],
        Offset(0),
        ProducerStateTable::new(ProducerLimits::default()),
        TxnTracker::new(),
        NOW_MS,
    );
    let driver = MachineDriver::start(
        backend.clone(),
        dir.clone(),
        machine,
        vec![std::rc::Rc::new(first)],
        Vec::new(),
        NOW_MS,
    );

    // 60 appends at once, in this order: offsets follow it (I27), densely (I1).
    let batches: Vec<Bytes> = (0..60u64)
        .map(|tag| Bytes::from(test_batch(tag, 1 + (tag % 3) as usize, 150, NOW_MS)))
        .collect();
    let answers = join_all(batches.iter().map(|batch| {
        let header = BatchHeader::parse(batch).expect("a valid batch");
        driver.append(
            SplitBatch::new(batch.clone()).expect("valid"),
            move |t| Append::produced(t, header),
            NOW_MS,
        )
    }))
    .await;
    let mut next = Offset(0);
    let mut placed = Vec::new();
    for (tag, answer) in answers.into_iter().enumerate() {
        let Ok(Done::Appended(info)) = answer else {
            return Err(format!("append {tag}: {answer:?}"));
        };
        ensure(info.base_offset == next && !info.duplicate, || {
            format!("append {tag} got {info:?}, expected base {}", next.0)
        })?;
        next = info.last_offset.plus(1);
        placed.push(info.base_offset);
    }
    let segments = driver.with_machine(|m| m.segments().len());
    ensure(segments > 2, || {
        format!("60 batches of ~300-600 bytes roll 4 KiB segments; got {segments} segment(s)")
    })?;
    ensure(driver.with_machine(|m| m.synced_up_to()) == next, || {
        "under fsync every answered append is durable".to_string()
    })?;

    // An idempotent producer's batch, then its retry: the duplicate gets the same offsets.
    let idempotent = Bytes::from(producer_batch(7, 0, 0, 2, 1));
    let header = BatchHeader::parse(&idempotent).expect("valid");
    let first = driver
        .append(
            SplitBatch::new(idempotent.clone()).expect("valid"),
            |t| Append::produced(t, header),
            NOW_MS,
        )
        .await;
    let retry = driver
        .append(
            SplitBatch::new(idempotent).expect("valid"),
            |t| Append::produced(t, header),
            NOW_MS,
        )
        .await;
    let (Ok(Done::Appended(first)), Ok(Done::Appended(retry))) = (first, retry) else {
        return Err("the idempotent batch or its retry failed".to_string());
    };
    ensure(
        retry.duplicate && retry.base_offset == first.base_offset && first.base_offset == next,
        || format!("first {first:?}, retry {retry:?}"),
    )?;
    let high_watermark = first.last_offset.plus(1);

    // DeleteRecords below the 20th batch: the start moves, whole segments below it go.
    let start = placed[20];
    let moved = driver.delete_records(start, NOW_MS).await;
    let Ok(Done::StartMoved {
        log_start_offset,
        removed_base_offsets,
    }) = moved
    else {
        return Err(format!("delete records: {moved:?}"));
    };
    ensure(
        log_start_offset == start && !removed_base_offsets.is_empty(),
        || {
            format!("delete records moved the start to {log_start_offset:?}, removed {removed_base_offsets:?}")
        },
    )?;
    let bases: Vec<Offset> =
        driver.with_machine(|m| m.segments().iter().map(|s| s.base_offset).collect());
    let closed = driver.close(NOW_MS).await;
    // I183: every caller has its answer, so the request table holds no slot.
    ensure(driver.open_requests() == 0, || {
        format!(
            "every request answered and taken, yet {} slots held",
            driver.open_requests()
        )
    })?;
    ensure(closed == Ok(Done::Closed { clean: true }), || {
        format!("close: {closed:?}")
    })?;
    drop(driver);

    // The broker's recovery reads what the driver wrote.
    let log = PartitionLog::open(backend, Path::new(&dir), config, true, NOW_MS)
        .await
        .map_err(|e| format!("open: {e}"))?;
    ensure(log.high_watermark() == high_watermark, || {
        format!(
            "reopened at {:?}, expected {high_watermark:?}",
            log.high_watermark()
        )
    })?;
    ensure(log.log_start_offset() == start, || {
        format!("reopened with start {:?}", log.log_start_offset())
    })?;
    ensure(log.segment_base_offsets() == bases, || {
        format!(
            "reopened segments {:?}, driver's {bases:?}",
            log.segment_base_offsets()
        )
    })?;
    for (tag, base) in placed.iter().enumerate().skip(20) {
        let read = log
            .read(*base, 1)
            .await
            .map_err(|e| format!("read {base:?}: {e}"))?;
        let header = BatchHeader::parse(&read.bytes).map_err(|e| format!("{e}"))?;
        let original = &batches[tag];
        ensure(
            header.base_offset == *base
                && header.total_bytes() == original.len()
                && read.bytes[8..12] == original[8..12]
                && read.bytes[16..original.len()] == original[16..],
            || format!("batch {tag} at {base:?} does not read back as written"),
        )?;
    }
    log.close().await.map_err(|e| format!("close: {e}"))
}

#[test]
fn the_driven_machine_writes_a_log_recovery_reads_back_portable() {
    let dir = scratch_dir("log-driver-portable");
    run_check::<minikafka_backend_portable::PortableBackend, _, _>(&dir, check).expect("check");
}

#[cfg(all(target_os = "linux", feature = "monoio"))]
#[test]
fn the_driven_machine_writes_a_log_recovery_reads_back_monoio() {
    let dir = scratch_dir("log-driver-monoio");
    run_check::<minikafka_backend_monoio::MonoioBackend, _, _>(&dir, check).expect("check");
}
