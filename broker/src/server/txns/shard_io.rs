//! What a shard gives its transaction coordinator hosts ([`TxnIo`]): its local append path
//! for `__transaction_state`, marker writes routed to the partitions' owners
//! ([`super::markers`]), and the broker's durable producer-id allocator; and the start of
//! the hosts ([`load`]).
//!
//! Contract: the I/O holds the shard weakly (the shard holds the hosts); a shard that is
//! gone answers NOT_COORDINATOR, and its markers are left for the next start (I64). Each
//! append and marker write counts as a request in flight, so shutdown does not close a
//! partition under it.

use std::rc::{Rc, Weak};

use bytes::Bytes;
use futures::future::LocalBoxFuture;
use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::txn::{MarkerWrite, TopicPartition};

use super::host::{txn_config, TxnContext, TxnIo};
use super::markers;
use super::state_topic::TRANSACTION_STATE_TOPIC;
use crate::server::groups::offsets_topic::OFFSETS_TOPIC;
use crate::server::partition_ops::{LocalPartitions, PartitionKey};
use crate::server::shard::ShardState;

/// The [`TxnIo`] of one shard (see the module documentation).
struct ShardTxnIo<B: Backend>(Weak<ShardState<B>>);

fn state_key(partition: i32) -> PartitionKey {
    PartitionKey {
        topic: TRANSACTION_STATE_TOPIC.to_string(),
        partition,
    }
}

impl<B: Backend> TxnIo for ShardTxnIo<B> {
    fn append(&self, partition: i32, batch: Bytes) -> LocalBoxFuture<'_, Result<(), ErrorCode>> {
        Box::pin(async move {
            let state = self.0.upgrade().ok_or(ErrorCode::NOT_COORDINATOR)?;
            let _in_flight = state.begin_request();
            LocalPartitions::append(&*state, state_key(partition), batch)
                .await
                .map(|_| ())
                .map_err(|refusal| refusal.code)
        })
    }

    fn write_markers(&self, write: MarkerWrite) -> LocalBoxFuture<'_, Vec<TopicPartition>> {
        Box::pin(async move {
            let Some(state) = self.0.upgrade() else {
                return write.partitions;
            };
            let _in_flight = state.begin_request();
            markers::write_all(&state, write).await
        })
    }

    fn fresh_producer_id(&self) -> LocalBoxFuture<'_, Result<i64, ErrorCode>> {
        Box::pin(async move {
            let state = self.0.upgrade().ok_or(ErrorCode::NOT_COORDINATOR)?;
            state
                .shared
                .producer_ids
                .allocate(&state.backend, &state.data_dir(), None)
                .await
                .map(|(id, _)| id)
                .map_err(|e| {
                    tracing::error!("allocating a producer id: {e}");
                    ErrorCode::KAFKA_STORAGE_ERROR
                })
        })
    }
}

/// Replays and starts the transaction coordinators of the `__transaction_state` partitions
/// `state` owns (all open by now). Returns how many it started.
pub async fn load<B: Backend>(state: &Rc<ShardState<B>>) -> Result<usize, String> {
    let logs = state.owned_logs_of(TRANSACTION_STATE_TOPIC)?;
    let context = Rc::new(TxnContext {
        backend: state.backend.clone(),
        stop: state.stop.clone(),
        io: Rc::new(ShardTxnIo(Rc::downgrade(state))),
        metrics: Rc::clone(&state.txn_metrics),
    });
    let mut config = txn_config(&state.shared.config);
    // AddOffsetsToTxn adds the group's partition by the count the offsets topic has, which
    // an existing topic keeps whatever the setting says now.
    if let Some(offsets) = state.shared.topic(OFFSETS_TOPIC) {
        config.offsets_topic_partitions = offsets.partition_count();
    }
    // Kafka's coordinator epoch is the state partition's leader epoch, which grows with each
    // election; a single node counts one per start instead, taken by shard 0 (I175).
    let epoch = *state
        .shared
        .txn_coordinator_epoch
        .get()
        .ok_or("no transaction coordinator epoch was taken")?;
    state.txns.load(context, config, epoch, logs).await
}
