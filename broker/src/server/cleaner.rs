//! One log cleaner task per shard: every `log.cleaner.backoff.ms` it visits the shard's
//! compacted partitions (`cleanup.policy` with `compact`, and always `__consumer_offsets`),
//! rolls a quiet active segment once `segment.ms` has passed (so it becomes cleanable), applies
//! retention for `compact,delete` topics (in this task, so retention never removes a segment
//! under a cleaning in flight), and cleans each partition core says is due
//! ([`clean_partition`]).
//!
//! Contract: time comes from the backend (`wall_clock_ms`, as every shard timer); no direct
//! I/O; each partition's checkpoint is loaded from its directory at its first visit and saved
//! after each cleaning ([`checkpoint`]), so a restart resumes where the last run ended; a
//! failed cleaning is logged and retried at the next visit, the partition serving as before
//! (the swap protocol leaves old or new segments, I24).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use minikafka_core::backend::Backend;

use super::groups::offsets_topic::is_internal;
use super::shard::{sleep_or_stop, ShardState};
use crate::log::cleaner::{checkpoint, clean_partition, load_checkpoint, CleanerCheckpoint};
use crate::log::PartitionLog;

/// Whether the shard's cleaner (rather than the retention timer) looks after this log.
pub fn is_compacted<B: Backend>(topic: &str, log: &PartitionLog<B>) -> bool {
    is_internal(topic) || log.config().cleanup_policy.compact
}

/// Starts the shard's cleaner unless `log.cleaner.enable=false`.
pub fn spawn<B: Backend>(state: &Rc<ShardState<B>>) {
    let settings = state.shared.config.cleaner.clone();
    if !settings.enable {
        return;
    }
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        // Keyed by partition and the log's identity: a topic deleted and created again
        // starts from a fresh checkpoint.
        let mut checkpoints: HashMap<(String, i32), (usize, CleanerCheckpoint)> = HashMap::new();
        let every = Duration::from_millis(settings.backoff_ms);
        while sleep_or_stop(&st, every).await {
            for (topic, partition, log) in st.owned_logs() {
                if !is_compacted(&topic, &log) {
                    continue;
                }
                visit(&st, &topic, partition, &log, &settings, &mut checkpoints).await;
            }
        }
    });
}

async fn visit<B: Backend>(
    st: &Rc<ShardState<B>>,
    topic: &str,
    partition: i32,
    log: &Rc<PartitionLog<B>>,
    settings: &crate::log::cleaner::CleanerSettings,
    checkpoints: &mut HashMap<(String, i32), (usize, CleanerCheckpoint)>,
) {
    let now_ms = st.backend.wall_clock_ms();
    if let Some(segment_ms) = log.config().segment_ms {
        let active = log.active_segment();
        if !active.is_empty() && now_ms.saturating_sub(active.created_ms()) >= segment_ms {
            if let Err(e) = log.roll_now(now_ms).await {
                tracing::warn!(topic, partition, "segment.ms roll failed: {e}");
            }
        }
    }
    if log.config().cleanup_policy.delete && !is_internal(topic) {
        if let Err(e) = log.apply_retention(now_ms).await {
            tracing::warn!(topic, partition, "retention failed: {e}");
        }
    }
    let identity = Rc::as_ptr(log) as usize;
    let key = (topic.to_string(), partition);
    if checkpoints
        .get(&key)
        .is_none_or(|(known, _)| *known != identity)
    {
        // First visit of this log (since startup, or since its topic was created again): the
        // last run's checkpoint, if it left one in the partition directory.
        let loaded = load_checkpoint(&st.backend, log).await;
        checkpoints.insert(key.clone(), (identity, loaded));
    }
    let Some(entry) = checkpoints.get_mut(&key) else {
        return;
    };
    let started = st.backend.now();
    let result = clean_partition(&st.backend, log, &mut entry.1, settings, now_ms).await;
    if matches!(result, Ok(Some(_))) {
        // After the swaps are durable (I24); a failure only makes the next run re-clean.
        if let Err(e) = checkpoint::save(&st.backend, log.dir(), &entry.1).await {
            tracing::warn!(topic, partition, "cleaner checkpoint not saved: {e}");
        }
    }
    match result {
        Ok(Some(outcome)) => tracing::info!(
            topic,
            partition,
            elapsed_us = st.backend.now().saturating_duration_since(started).as_micros() as u64,
            io_bytes = outcome.io_bytes,
            due = ?outcome.plan.due,
            pass_end = outcome.pass_end.0,
            groups = outcome.groups_swapped,
            bytes_before = outcome.bytes_before,
            bytes_after = outcome.bytes_after,
            kept = outcome.counts.kept,
            dropped = outcome.counts.dropped(),
            "log cleaned"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(topic, partition, "cleaning failed, retried later: {e}"),
    }
}
