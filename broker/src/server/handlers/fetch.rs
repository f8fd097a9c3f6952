//! Fetch (key 1), v4–18 (v13+ names topics by id), with long-polling.
//!
//! Contract:
//! - Every requested partition is read on its owning shard (concurrently), from its fetch
//!   offset, with its `partition_max_bytes`; the response-wide `max_bytes` is then applied in
//!   request order at batch boundaries by core's [`FetchBudget`]: the first batch of the
//!   first non-empty partition is always whole (Kafka's rule, so a batch larger than the
//!   limits still makes progress). Every partition answer carries the high watermark, the
//!   last stable offset (I67) and the log start offset; OFFSET_OUT_OF_RANGE (1) outside
//!   `[log start, high watermark]`; UNKNOWN_TOPIC_OR_PARTITION (3) or, v13+,
//!   UNKNOWN_TOPIC_ID (100).
//! - Long-poll (I7): when `max_wait_ms > 0` and `min_bytes > 0`, a [`Waiter`] is registered
//!   on every requested partition's signal BEFORE the first read. While the bytes found are
//!   fewer than `min_bytes`, no partition has an error and the deadline has not passed, it
//!   waits for a notification (an append on any shard), the deadline, or shutdown; after a
//!   notification it re-arms, then re-reads.
//! - Each partition reads at most the smaller of its `partition_max_bytes` and the response's
//!   `max_bytes` (the first batch whole), each byte once; the batches are the log's bytes,
//!   sent without a copy (the handler's caller encodes the response in parts).
//! - Fetch sessions are not kept: the answer always has session id 0 (a full response),
//!   whatever session id, epoch or forgotten topics the client sent.
//! - `isolation_level=1` (read_committed, I69): each partition returns nothing at or past its
//!   LSO, and the aborted transactions overlapping what it returns (`aborted_transactions`;
//!   null under read_uncommitted, as Kafka answers). A long-poll counts only those bytes, so
//!   it waits until the LSO moves: a marker append notifies the partition's signal like any
//!   append, after the LSO moved, and the waiter was registered before the first read (I7).

use std::time::Duration;

use futures::future::{select, Either};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use minikafka_core::fetch::{fit_batches, FetchBudget};
use minikafka_core::wakeup::Waiter;

use crate::server::partition_ops::PartitionRead;
use crate::server::shard_context::{PartitionOps, ShardClock, TopicCatalogue};
use minikafka_core::error_code::ErrorCode;

/// One partition to read, resolved against the registry.
struct Target {
    topic: usize,
    partition: i32,
    /// The topic's name when it exists and the partition is in range.
    name: Option<String>,
    /// Error code when it does not.
    error_code: ErrorCode,
    fetch_offset: i64,
    max_bytes: usize,
}

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps + ShardClock),
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    let mut response = FetchResponse::default();
    let mut targets = Vec::new();
    let mut waiter = Waiter::new();
    let long_poll = request.max_wait_ms > 0 && request.min_bytes > 0;
    let read_committed = request.isolation_level == 1;
    let response_max_bytes = usize::try_from(request.max_bytes).unwrap_or(0);
    for fetch_topic in &request.topics {
        let info = if version >= 13 {
            state.topic_by_id(fetch_topic.topic_id)
        } else {
            state.topic(fetch_topic.topic.0.as_str())
        };
        let mut topic = FetchableTopicResponse::default();
        if version >= 13 {
            topic.topic_id = fetch_topic.topic_id;
        } else {
            topic.topic = fetch_topic.topic.clone();
        }
        let topic_index = response.responses.len();
        for partition in &fetch_topic.partitions {
            let p = partition.partition;
            let (name, error_code) = match &info {
                None if version >= 13 => (None, ErrorCode::UNKNOWN_TOPIC_ID),
                None => (None, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
                Some(info) if p < 0 || p >= info.partition_count() => {
                    (None, ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
                }
                Some(info) => {
                    if long_poll {
                        // Before the first read of the partition (I7).
                        waiter.register(&info.signals[p as usize]);
                    }
                    (Some(info.name.clone()), ErrorCode::NONE)
                }
            };
            targets.push(Target {
                topic: topic_index,
                partition: p,
                name,
                error_code,
                fetch_offset: partition.fetch_offset,
                // No partition can send more than the whole response may (bar the first
                // batch, which the log reads whole anyway), so none reads more.
                max_bytes: usize::try_from(partition.partition_max_bytes)
                    .unwrap_or(0)
                    .min(response_max_bytes),
            });
        }
        response.responses.push(topic);
    }

    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = state.now() + max_wait;
    let reads = loop {
        let reads = read_all(state, &targets, read_committed).await;
        let total: usize = reads.iter().map(|r| r.bytes.len()).sum();
        let any_error = reads.iter().any(|r| r.error_code != ErrorCode::NONE);
        if !long_poll || total >= min_bytes || any_error || state.stopping() {
            break reads;
        }
        // Wait for an append to any of the partitions, the deadline, or shutdown.
        if state.now() >= deadline {
            break reads;
        }
        let notified = {
            let wait = std::pin::pin!(waiter.wait());
            let sleep = std::pin::pin!(state.sleep_until(deadline));
            let stop = std::pin::pin!(state.stopped());
            matches!(select(wait, select(sleep, stop)).await, Either::Left(_))
        };
        if !notified {
            // A last read: an append may have landed just as the deadline passed.
            break read_all(state, &targets, read_committed).await;
        }
        // New snapshot before the re-read (I7).
        waiter.rearm();
    };
    drop(waiter);

    // One budget for the whole response, core's rule: the first batch is always whole.
    let mut budget = FetchBudget::new(response_max_bytes);
    for (target, read) in targets.iter().zip(reads) {
        let mut data = PartitionData::default();
        data.partition_index = target.partition;
        data.error_code = read.error_code.code();
        data.high_watermark = read.high_watermark;
        data.last_stable_offset = read.last_stable_offset;
        data.log_start_offset = read.log_start_offset;
        data.aborted_transactions = None;
        if read_committed {
            data.aborted_transactions = Some(
                read.aborted
                    .iter()
                    .map(|a| {
                        let mut t = AbortedTransaction::default();
                        t.producer_id = a.producer_id.into();
                        t.first_offset = a.first_offset;
                        t
                    })
                    .collect(),
            );
        }
        let keep = fit_batches(&read.bytes, &mut budget);
        let mut bytes = read.bytes;
        bytes.truncate(keep);
        data.records = Some(bytes);
        response.responses[target.topic].partitions.push(data);
    }
    response
}

async fn read_all(
    state: &impl PartitionOps,
    targets: &[Target],
    read_committed: bool,
) -> Vec<PartitionRead> {
    let reads = targets.iter().map(|t| async move {
        match &t.name {
            Some(name) => {
                let (p, offset, max) = (t.partition, t.fetch_offset, t.max_bytes);
                state
                    .read(name.clone(), p, offset, max, read_committed)
                    .await
            }
            None => PartitionRead::failed(t.error_code),
        }
    });
    futures::future::join_all(reads).await
}

/// The record batches of `response`, in the order its encoder writes them (topics, then
/// partitions): what the connection sends without copying.
pub fn records_in_order(response: &FetchResponse) -> Vec<bytes::Bytes> {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .collect()
}
