//! The fetch-read suite: what a read costs the file, counted through [`FaultyBackend`] (load
//! independent): each byte a fetch sends is read once, with one `read_at`, and the bytes
//! read beyond the answer stay within the skip allowance.

use super::model::{append_all, config, open, test_batch, NOW_MS};
use crate::check::ensure;
use crate::check::Check;
use crate::check::Step;
use crate::fault::{FaultPlan, FaultyBackend, FileOp};
use minikafka_broker::log::FlushPolicy;
use minikafka_core::backend::Backend;
use minikafka_core::types::Offset;
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes a read may take beyond its answer: the batches between the index floor and the
/// target's batch plus the unused tail of the window, at most `max_bytes - answer` plus two
/// index intervals (the log's allowance; 4 KiB intervals here).
const ALLOWANCE_BYTES: u64 = 2 * 4096;

/// 300 batches of ~1.1 KB; reads of 64 KiB from several offsets (batch starts and inside
/// batches) return the model's batches, each with **one** `read_at` of at most
/// `max_bytes` + [`ALLOWANCE_BYTES`] bytes (planning a fetch and reading what it sends used to
/// read every byte twice, in 16 KiB planning windows and then the range); a first batch larger
/// than `max_bytes` still comes back whole.
pub async fn check_fetch_reads_each_byte_once<B: Backend>(backend: &B, dir: &Path) -> Check {
    const MAX_BYTES: usize = 64 * 1024;
    let faulty = FaultyBackend::new(backend.clone(), FaultPlan::new());
    let plan = faulty.plan().clone();
    let cfg = config(1 << 30, 4096, FlushPolicy::None);
    let log = open(&faulty, dir, &cfg, false).await?;
    let mut batches: Vec<Vec<u8>> = (0..300)
        .map(|i| test_batch(i, 1 + (i as usize % 3), 1000 / (1 + i as usize % 3), NOW_MS))
        .collect();
    // One batch far larger than a fetch: its fetch falls back to a second read, still whole.
    batches.push(test_batch(300, 2, 100_000, NOW_MS));
    batches.extend((301..320).map(|i| test_batch(i, 1, 500, NOW_MS)));
    let mut model = BTreeMap::new();
    append_all(&log, &batches, &mut model).await?;
    let hw = log.high_watermark().0;
    let huge_base = *model
        .iter()
        .find(|(_, bytes)| bytes.len() > MAX_BYTES)
        .map(|(base, _)| base)
        .ok_or("no huge batch in the model")?;
    for target in [
        0,
        1,
        57,
        58,
        200,
        huge_base - 1,
        huge_base,
        huge_base + 1,
        hw - 3,
    ] {
        let (reads, bytes_read) = (plan.op_count_of(FileOp::ReadAt), plan.bytes_read());
        let got = log
            .read(Offset(target), MAX_BYTES)
            .await
            .step(&format!("read({target})"))?;
        let (reads, bytes_read) = (
            plan.op_count_of(FileOp::ReadAt) - reads,
            plan.bytes_read() - bytes_read,
        );
        // The expected answer: whole model batches from the one holding the target while
        // they fit MAX_BYTES (the first always).
        let (&first, _) = model
            .range(..=target)
            .next_back()
            .ok_or("no model batch at or before the target")?;
        let mut want = Vec::new();
        for bytes in model.range(first..).map(|(_, b)| b) {
            if !want.is_empty() && want.len() + bytes.len() > MAX_BYTES {
                break;
            }
            want.extend_from_slice(bytes);
        }
        ensure(got.bytes[..] == want[..], || {
            format!(
                "read({target}) returned {} bytes, the model {} from batch {first}",
                got.bytes.len(),
                want.len()
            )
        })?;
        if want.len() > MAX_BYTES {
            continue; // the fallback for a batch larger than the fetch: correct is enough
        }
        ensure(reads == 1, || {
            format!(
                "read({target}) of {} bytes took {reads} read_at calls",
                want.len()
            )
        })?;
        ensure(bytes_read <= (MAX_BYTES as u64) + ALLOWANCE_BYTES, || {
            format!(
                "read({target}) read {bytes_read} bytes for an answer of {} (max_bytes {MAX_BYTES})",
                want.len()
            )
        })?;
    }
    log.close().await.step("close")
}
