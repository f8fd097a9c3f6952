//! The registry host: the one [`Registry`] machine of the broker, on the shard that owns
//! `_schemas` partition 0 (its only writer, I1, I56), and the writer task that appends its
//! records.
//!
//! Contract:
//! - Startup ([`RegistryHost::load`], before any shard accepts connections): the machine
//!   replays `_schemas` from its log start to its high watermark
//!   ([`super::replay::replay_log`]); a record it refuses (undecodable, hostile,
//!   contradicting the state) is skipped with a warning line and counted, never a crash
//!   (I50, I51, I58).
//! - Reads use [`RegistryHost::registry`] (a borrow, never held across an `.await`).
//! - [`RegistryHost::write`] hands a write to the machine and waits for its reply. The
//!   machine asks for at most one append at a time; the writer appends its records as one
//!   uncompressed batch through the shard's local append path (the flush policy applies, so
//!   an answer means durable under it, I54, I57), and reports the outcome; only then is the
//!   reply released. A failed append answers 50001 and changes nothing.
//! - The broker's set of known schema ids (`Shared::schema_ids`, read by the produce path's
//!   `confluent.*.schema.validation`, I124) is filled after the replay and refreshed after
//!   each append, before its replies are released: a client told its schema's id can
//!   produce with it at once (I125).
//! - Shutdown: the writer finishes the append it is writing (counted in flight, so the
//!   partition is not closed under it) and stops; writes still waiting get 50001.

use std::cell::{Cell, Ref, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::{select, Either};
use minikafka_core::backend::Backend;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;
use minikafka_schema::registry::Append;
use minikafka_schema::{Registry, RegistryError, RequestId, WriteReply, WriteRequest};

use super::replay::replay_log;
use super::topic::{SCHEMAS_PARTITION, SCHEMAS_TOPIC};
use crate::server::partition_ops::PartitionKey;
use crate::server::shard::ShardState;

type Reply = Result<WriteReply, RegistryError>;

/// The registry machine and its writer (see the module documentation).
pub struct RegistryHost<B: Backend> {
    state: Rc<ShardState<B>>,
    registry: RefCell<Registry>,
    waiters: RefCell<HashMap<RequestId, oneshot::Sender<Reply>>>,
    next_request: Cell<RequestId>,
    pending: RefCell<Option<Append>>,
    wake_writer: async_channel::Sender<()>,
}

impl<B: Backend> RegistryHost<B> {
    /// Replays `_schemas` into a new machine and starts its writer; this shard must own the
    /// partition, open by now.
    pub async fn load(state: &Rc<ShardState<B>>) -> Result<Rc<Self>, String> {
        let key = PartitionKey {
            topic: SCHEMAS_TOPIC.to_string(),
            partition: SCHEMAS_PARTITION,
        };
        let owned = state
            .owned(&key)
            .ok_or_else(|| format!("{SCHEMAS_TOPIC}-{SCHEMAS_PARTITION} is not open"))?;
        let mut registry = Registry::new();
        let stats = replay_log(&owned.log, &mut registry)
            .await
            .map_err(|e| format!("replaying {SCHEMAS_TOPIC}: {e}"))?;
        tracing::info!(
            records = stats.records,
            skipped = stats.skipped,
            bytes = stats.bytes,
            subjects = registry.subjects(true).len(),
            "schema registry loaded"
        );
        state
            .shared
            .schema_ids
            .replace(registry.state().schema_ids());
        state.shared.schema_registry_metrics.set_sizes(
            registry.state().schema_count(),
            registry.subjects(false).len(),
        );
        let (wake_writer, wake) = async_channel::bounded(1);
        let host = Rc::new(RegistryHost {
            state: Rc::clone(state),
            registry: RefCell::new(registry),
            waiters: RefCell::new(HashMap::new()),
            next_request: Cell::new(0),
            pending: RefCell::new(None),
            wake_writer,
        });
        state.backend.spawn_local(writer(Rc::clone(&host), wake));
        Ok(host)
    }

    /// The machine, for reads (never hold the borrow across an `.await`).
    pub fn registry(&self) -> Ref<'_, Registry> {
        self.registry.borrow()
    }

    /// Runs `write` and waits for its reply (after its records are durable, I54).
    pub async fn write(&self, write: WriteRequest) -> Reply {
        if self.state.stopping() {
            return Err(RegistryError::Store("the broker is shutting down".into()));
        }
        let request = self.next_request.get();
        self.next_request.set(request.wrapping_add(1));
        let (tx, rx) = oneshot::channel();
        self.waiters.borrow_mut().insert(request, tx);
        self.registry.borrow_mut().handle_write(request, write);
        self.drain();
        rx.await
            .unwrap_or_else(|_| Err(RegistryError::Store("the broker is shutting down".into())))
    }

    /// Refreshes the shared id set when the machine's changed (I125), and the metrics'
    /// gauges. A write adds at most
    /// one id (a new schema) or only removes ids (a permanent delete), so the set changed
    /// exactly when its size did.
    fn publish_schema_ids(&self) {
        let registry = self.registry.borrow();
        let ids = &self.state.shared.schema_ids;
        if ids.len() != registry.state().schema_count() {
            ids.replace(registry.state().schema_ids());
        }
        self.state.shared.schema_registry_metrics.set_sizes(
            registry.state().schema_count(),
            registry.subjects(false).len(),
        );
    }

    /// Moves the machine's outputs: an append to the writer, replies to their waiters.
    fn drain(&self) {
        let append = self.registry.borrow_mut().poll_append();
        if let Some(append) = append {
            *self.pending.borrow_mut() = Some(append);
            let _ = self.wake_writer.try_send(());
        }
        loop {
            let reply = self.registry.borrow_mut().poll_reply();
            let Some((request, reply)) = reply else { break };
            let waiter = self.waiters.borrow_mut().remove(&request);
            if let Some(waiter) = waiter {
                let _ = waiter.send(reply);
            }
        }
    }
}

/// The records of `append` as one uncompressed batch (the log assigns the offsets).
fn encode(append: &Append, now_ms: i64) -> Bytes {
    let mut builder = BatchBuilder::new();
    for record in &append.records {
        let (key, value) = record.encode();
        builder.push(&NewRecord {
            key: Some(&key),
            value: value.as_deref(),
            headers: Vec::new(),
            timestamp_ms: now_ms,
        });
    }
    builder.build(Offset(0)).into()
}

/// Appends the machine's records, one append at a time (see the module documentation).
async fn writer<B: Backend>(host: Rc<RegistryHost<B>>, wake: async_channel::Receiver<()>) {
    let state = Rc::clone(&host.state);
    loop {
        let next = host.pending.borrow_mut().take();
        let Some(append) = next else {
            let woken = {
                let wake = std::pin::pin!(wake.recv());
                let stop = std::pin::pin!(state.stop.recv());
                matches!(select(wake, stop).await, Either::Left((Ok(()), _)))
            };
            if !woken {
                break;
            }
            continue;
        };
        let outcome = {
            let _in_flight = state.begin_request();
            let batch = encode(&append, state.backend.wall_clock_ms());
            state
                .append(SCHEMAS_TOPIC.to_string(), SCHEMAS_PARTITION, batch)
                .await
                .map(drop)
                .map_err(|refusal| {
                    tracing::warn!(code = %refusal.code, "{SCHEMAS_TOPIC} append failed; the write is refused");
                    format!("append to {SCHEMAS_TOPIC} failed: {}", refusal.code)
                })
        };
        host.registry
            .borrow_mut()
            .handle_append_done(append.request, outcome);
        host.publish_schema_ids();
        host.drain();
    }
    // Writes still waiting are answered 50001 when their senders drop.
    host.waiters.borrow_mut().clear();
    tracing::debug!("schema registry writer stopped");
}
