//! One shard's state and the operations on the partitions it owns: the layer between the
//! request handlers and the partition logs.
//!
//! Contract:
//! - A shard is the only writer of the partitions [`super::routing::owner_shard`] gives it
//!   (I1). Their [`PartitionLog`]s are `Rc`s in [`ShardState`], never sent to other threads.
//! - One routing: [`ShardState::on_owner`] calls the operation's [`LocalPartitions`] method
//!   directly when this shard owns the partition, else ships it in a [`PartitionCall`] (a
//!   `Send` message naming the same method) through the owner's inbox; the owner's inbox
//!   loop runs each call as its own task, in arrival order. The typed operations
//!   ([`ShardState::append`], [`read`](ShardState::read), …) are one routing each; their
//!   bodies are this shard's `impl LocalPartitions`.
//! - Offsets follow arrival order on the owner: the log queues a batch on the first poll of
//!   its append, before any `.await` (`PartitionLog::append`), and calls reach that first
//!   poll in the order they arrived (in place on the owner, or as inbox tasks spawned in
//!   order). Pipelined produces of one connection therefore keep their order with no extra
//!   gate (`server_smoke`'s and `interop_rdkafka`'s pipelined-ordering tests check it).
//! - After an append becomes visible the owner calls the partition's
//!   [`PartitionSignal::notify_append`] (I7), waking long-polling fetches on any shard.
//! - Never: holds a `RefCell` borrow across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::LocalBoxFuture;
use futures::lock::MutexGuard;
use minikafka_core::auth::acl::{Operation, ResourceType};
use minikafka_core::backend::{Backend, ShardId};
use minikafka_core::clock::MonoTime;
use minikafka_core::control_batch::TxnMarker;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{GroupRequest, GroupResponse, TxnResult};
use minikafka_core::quota::QuotaConfigs;
use minikafka_core::txn::{TxnRequest, TxnResponse};
use minikafka_core::types::Offset;
use minikafka_core::wakeup::PartitionSignal;
use uuid::Uuid;

use super::acl_store::{self, AclSet};
use super::authz::Caller;
use super::dynamic_config::DynamicBrokerConfig;
use super::group_configs::GroupConfigs;
use super::groups::host::{GroupHosts, HostContext, OffsetsAppender};
use super::groups::offsets_log::encode_marker;
use super::groups::offsets_topic::OFFSETS_TOPIC;
pub use super::partition_ops::{
    AppendRefusal, Appended, ListedOffset, PartitionDescription, PartitionRead, ProducerDescription,
};
use super::partition_ops::{LocalPartitions, PartitionCall, PartitionKey, Reply};
use super::quota_store;
use super::quotas::Quotas;
use super::routing;
use super::scram_store::{self, ScramStore};
use super::shard_context::{
    ApiMetrics, Authorizer, BrokerIdentity, ConfigLookup, GroupOps, PartitionOps, ProducerIds,
    QuotaLedger, SecurityStores, ShardClock, TopicCatalogue, TxnOps,
};
use super::shared::{Shared, TopicInfo};
use super::txns::host::TxnHosts;
use super::txns::metrics::TxnMetrics;
use super::txns::state_topic::TRANSACTION_STATE_TOPIC;
use crate::config::BrokerConfig;
use crate::log::segment::partition_dir;
use crate::log::{AppendInfo, LogConfig, LogError, PartitionLog, UnsyncedLog};
use crate::metrics::counters::records_in_batches;
use crate::metrics::ShardMetrics;
use crate::protocol::SupportedVersions;

/// A partition this shard owns.
pub struct OwnedPartition<B: Backend> {
    /// Its log.
    pub log: Rc<PartitionLog<B>>,
    /// Its wakeup signal (the same `Arc` the registry holds).
    pub signal: Arc<PartitionSignal>,
}

/// Partitions of one topic and their logs, by partition.
pub type OwnedLogs<B> = Vec<(i32, Rc<PartitionLog<B>>)>;

impl<B: Backend> Clone for OwnedPartition<B> {
    fn clone(&self) -> Self {
        OwnedPartition {
            log: Rc::clone(&self.log),
            signal: Arc::clone(&self.signal),
        }
    }
}

/// Bytes a connection reads from its socket per call, into the shard's one
/// [`ShardState::read_chunk`].
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// One shard's state, shared by its tasks through `Rc`.
pub struct ShardState<B: Backend> {
    /// This shard's backend.
    pub backend: B,
    /// State shared with the other shards.
    pub shared: Arc<Shared>,
    /// This shard's index.
    pub shard: ShardId,
    partitions: RefCell<HashMap<PartitionKey, OwnedPartition<B>>>,
    in_flight: Cell<usize>,
    /// Completes (with an error) once shutdown began: every long wait selects on it.
    pub stop: async_channel::Receiver<()>,
    stop_tx: async_channel::Sender<()>,
    /// The group coordinators this shard hosts.
    pub groups: GroupHosts<B>,
    /// The transaction coordinators this shard hosts.
    pub txns: TxnHosts<B>,
    /// This shard's transaction counters.
    pub txn_metrics: Rc<TxnMetrics>,
    /// This shard's counters for the metrics endpoint.
    pub metrics: ShardMetrics,
    /// The one buffer every connection of this shard reads its socket into, borrowed only
    /// within a poll, so that an idle connection holds none (I189).
    pub read_chunk: RefCell<Box<[u8]>>,
}

/// The catalogue the handlers see: the shared registry's (I150).
impl<B: Backend> TopicCatalogue for ShardState<B> {
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.shared.topic(name)
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.shared.topic_by_id(id)
    }

    fn all_topics(&self) -> Vec<Arc<TopicInfo>> {
        self.shared.all_topics()
    }
}

/// The identity the handlers see: the shared configuration's (I150).
impl<B: Backend> BrokerIdentity for ShardState<B> {
    fn node_id(&self) -> i32 {
        BrokerIdentity::node_id(&*self.shared)
    }

    fn cluster_id(&self) -> &str {
        &self.shared.cluster_id
    }

    fn advertised_address(&self, listener: &str) -> (String, u16) {
        self.shared.advertised_address(listener)
    }

    fn supported_versions(&self) -> &SupportedVersions {
        &self.shared.supported
    }

    fn log_dir(&self) -> &Path {
        &self.shared.config.log_dir
    }
}

/// The partition operations the handlers see: this shard's routed calls (I150).
impl<B: Backend> PartitionOps for Rc<ShardState<B>> {
    async fn append(
        &self,
        topic: String,
        partition: i32,
        batch: Bytes,
    ) -> Result<Appended, AppendRefusal> {
        ShardState::append(self, topic, partition, batch).await
    }

    async fn write_txn_marker(
        &self,
        topic: String,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<i64, ErrorCode> {
        ShardState::write_txn_marker(self, topic, partition, marker).await
    }

    async fn read(
        &self,
        topic: String,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> PartitionRead {
        ShardState::read(
            self,
            topic,
            partition,
            fetch_offset,
            max_bytes,
            read_committed,
        )
        .await
    }

    async fn list_offset(
        &self,
        topic: String,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    ) -> ListedOffset {
        ShardState::list_offset(self, topic, partition, timestamp, read_committed).await
    }

    async fn delete_records(&self, topic: String, partition: i32, before: i64) -> (ErrorCode, i64) {
        ShardState::delete_records(self, topic, partition, before).await
    }

    async fn describe_partition(&self, topic: String, partition: i32) -> PartitionDescription {
        ShardState::describe_partition(self, topic, partition).await
    }
}

/// The configuration the handlers see: the shared one (I150).
impl<B: Backend> ConfigLookup for ShardState<B> {
    fn settings(&self) -> &BrokerConfig {
        &self.shared.config
    }

    fn effective_config(&self) -> BrokerConfig {
        self.shared.effective_config()
    }

    fn dynamic_config(&self) -> Arc<DynamicBrokerConfig> {
        self.shared.dynamic_config()
    }

    fn group_configs(&self) -> Arc<GroupConfigs> {
        self.shared.group_configs()
    }
}

/// The time and shutdown the handlers see: the backend's and this shard's (I150).
impl<B: Backend> ShardClock for ShardState<B> {
    fn now(&self) -> MonoTime {
        self.backend.now()
    }

    async fn sleep_until(&self, deadline: MonoTime) {
        self.backend.sleep_until(deadline).await
    }

    fn stopping(&self) -> bool {
        ShardState::stopping(self)
    }

    async fn stopped(&self) {
        // Shutdown closes the channel: `recv` then fails, which is the signal.
        let _ = self.stop.recv().await;
    }
}

/// The group operations the handlers see: this shard's routed calls (I150).
impl<B: Backend> GroupOps for Rc<ShardState<B>> {
    async fn group_request(
        &self,
        partition: i32,
        request: GroupRequest,
    ) -> Result<GroupResponse, ErrorCode> {
        ShardState::group_request(self, partition, request).await
    }
}

/// The transaction-coordinator operations the handlers see: this shard's routed calls (I150).
impl<B: Backend> TxnOps for Rc<ShardState<B>> {
    async fn txn_request(
        &self,
        partition: i32,
        request: TxnRequest,
    ) -> Result<TxnResponse, ErrorCode> {
        ShardState::txn_request(self, partition, request).await
    }
}

/// The producer-id allocator the handlers see: the shared one, on this shard's backend.
impl<B: Backend> ProducerIds for ShardState<B> {
    async fn allocate_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> std::io::Result<(i64, i16)> {
        let data_dir = self.data_dir();
        self.shared
            .producer_ids
            .allocate(&self.backend, &data_dir, current)
            .await
    }
}

/// The security stores the handlers see: the shared ones, written through this shard's
/// backend into the data directory, and put in force only once written (I152).
impl<B: Backend> SecurityStores for ShardState<B> {
    async fn lock_admin(&self) -> MutexGuard<'_, ()> {
        self.shared.admin_lock.lock().await
    }

    fn acls(&self) -> Arc<AclSet> {
        self.shared.acls()
    }

    async fn replace_acls(&self, next: AclSet) -> std::io::Result<()> {
        acl_store::save(&self.backend, &self.data_dir(), &next).await?;
        self.shared.set_acls(next);
        Ok(())
    }

    fn scram_credentials(&self) -> Arc<ScramStore> {
        self.shared.scram_store()
    }

    async fn replace_scram_credentials(&self, next: ScramStore) -> std::io::Result<()> {
        scram_store::save(&self.backend, &self.data_dir(), &next).await?;
        self.shared.set_scram_store(next);
        Ok(())
    }

    fn quota_configs(&self) -> Arc<QuotaConfigs> {
        self.shared.quotas.configs()
    }

    async fn replace_quota_configs(&self, next: QuotaConfigs) -> std::io::Result<()> {
        quota_store::save(&self.backend, &self.data_dir(), &next).await?;
        self.shared.quotas.set_configs(next);
        Ok(())
    }
}

/// The quota ledger the handlers see: the shared one.
impl<B: Backend> QuotaLedger for ShardState<B> {
    fn quotas(&self) -> &Quotas {
        &self.shared.quotas
    }
}

/// The request counters the dispatcher sees: this shard's.
impl<B: Backend> ApiMetrics for ShardState<B> {
    fn count_errors(&self, api_key: i16, codes: impl IntoIterator<Item = i16>) {
        self.metrics.errors(api_key, codes)
    }
}

/// The authorizer the handlers see: the shared one's.
impl<B: Backend> Authorizer for ShardState<B> {
    fn authorizer_enabled(&self) -> bool {
        Authorizer::authorizer_enabled(&*self.shared)
    }

    fn allowed(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        operation: Operation,
    ) -> bool {
        Authorizer::allowed(&*self.shared, caller, resource_type, name, operation)
    }

    fn authorized_operations(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        requested: bool,
    ) -> i32 {
        Authorizer::authorized_operations(&*self.shared, caller, resource_type, name, requested)
    }

    fn any_topic_allowed(&self, caller: &Caller, operation: Operation) -> bool {
        Authorizer::any_topic_allowed(&*self.shared, caller, operation)
    }
}

/// Counts one request in flight on a shard until dropped.
pub struct InFlight<B: Backend>(Rc<ShardState<B>>);

impl<B: Backend> Drop for InFlight<B> {
    fn drop(&mut self) {
        let n = self.0.in_flight.get();
        self.0.in_flight.set(n.saturating_sub(1));
    }
}

fn key(topic: impl Into<String>, partition: i32) -> PartitionKey {
    PartitionKey {
        topic: topic.into(),
        partition,
    }
}

impl<B: Backend> ShardState<B> {
    /// A shard's state with no partitions yet.
    pub fn new(backend: B, shared: Arc<Shared>) -> Self {
        let (stop_tx, stop) = async_channel::bounded(1);
        ShardState {
            shard: backend.shard(),
            backend,
            shared,
            partitions: RefCell::new(HashMap::new()),
            in_flight: Cell::new(0),
            stop,
            stop_tx,
            groups: GroupHosts::new(),
            txns: TxnHosts::new(),
            txn_metrics: Rc::new(TxnMetrics::new()),
            metrics: ShardMetrics::new(),
            read_chunk: RefCell::new(vec![0u8; READ_CHUNK_BYTES].into_boxed_slice()),
        }
    }

    /// Counts a request in flight until the returned guard drops.
    pub fn begin_request(self: &Rc<Self>) -> InFlight<B> {
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(Rc::clone(self))
    }

    /// Requests in flight on this shard.
    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Whether shutdown began on this shard.
    pub fn stopping(&self) -> bool {
        self.stop_tx.is_closed()
    }

    /// Begins shutdown on this shard: every wait selecting on [`ShardState::stop`] ends.
    pub fn begin_stop(&self) {
        self.stop_tx.close();
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.shared.config.log_dir.clone()
    }

    /// The shard owning `topic`/`partition`.
    pub fn owner(&self, topic: &str, partition: i32) -> ShardId {
        routing::owner_shard(topic, partition, self.shared.num_shards())
    }

    /// Runs one partition operation on the shard owning `key`: a direct call of `op` on this
    /// shard's [`LocalPartitions`] when it is the owner; else `op` travels in a
    /// [`PartitionCall`] to the owner's inbox and runs there. `unavailable` when the owner
    /// no longer takes calls (shutting down) and dropped it.
    ///
    /// Arrival order: on the owner, `op`'s future is polled first without an await before
    /// it, so a log append queues its batch in call order (see the module documentation).
    pub async fn on_owner<T, F>(self: &Rc<Self>, key: PartitionKey, op: F, unavailable: T) -> T
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a dyn LocalPartitions, PartitionKey) -> LocalBoxFuture<'a, T>
            + Send
            + 'static,
    {
        let target = self.owner(&key.topic, key.partition);
        if target == self.shard {
            return op(&**self, key).await;
        }
        let Some(inbox) = self.shared.inboxes.get(target.0) else {
            return unavailable;
        };
        let (reply, answer): (Reply<T>, _) = oneshot::channel();
        let call = PartitionCall::new(key.clone(), move |local| {
            Box::pin(async move {
                let _ = reply.send(op(local, key).await);
            })
        });
        if inbox.send(call).await.is_err() {
            return unavailable;
        }
        answer.await.unwrap_or(unavailable)
    }

    /// Appends `batch` to `topic`/`partition` on its owner and wakes its waiters.
    pub async fn append(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        batch: Bytes,
    ) -> Result<Appended, AppendRefusal> {
        let unavailable = Err(ErrorCode::UNKNOWN_SERVER_ERROR.into());
        self.on_owner(
            key(topic, partition),
            move |p, key| p.append(key, batch),
            unavailable,
        )
        .await
    }

    /// Appends the transaction marker `marker` to `topic`/`partition` on its owner (directly
    /// on this shard, else through the owner's inbox) and wakes its waiters: the marker's
    /// offset once durable under the flush policy (I8), or the error code
    /// ([`LocalPartitions::write_marker`]). UNKNOWN_SERVER_ERROR when the owner no longer
    /// takes calls.
    pub async fn write_txn_marker(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<i64, ErrorCode> {
        let unavailable = Err(ErrorCode::UNKNOWN_SERVER_ERROR);
        self.on_owner(
            key(topic, partition),
            move |p, key| p.write_marker(key, marker),
            unavailable,
        )
        .await
    }

    /// Reads from `topic`/`partition` on its owner.
    pub async fn read(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> PartitionRead {
        let unavailable = PartitionRead::failed(ErrorCode::UNKNOWN_SERVER_ERROR);
        self.on_owner(
            key(topic, partition),
            move |p, key| p.read(key, fetch_offset, max_bytes, read_committed),
            unavailable,
        )
        .await
    }

    /// Answers a ListOffsets query on the owner: `(error code, offset, timestamp)`.
    /// `timestamp` -2 (earliest) and -4 (earliest local) give the log start, -1 (latest)
    /// the high watermark, -3 (max timestamp) [`PartitionLog::max_timestamp_offset`], and
    /// any other value [`PartitionLog::offset_for_timestamp`] (the first record whose
    /// timestamp is at least it); no such record: offset -1, timestamp -1.
    pub async fn list_offset(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    ) -> ListedOffset {
        let unavailable = (ErrorCode::UNKNOWN_SERVER_ERROR, -1, -1);
        self.on_owner(
            key(topic, partition),
            move |p, key| p.list_offset(key, timestamp, read_committed),
            unavailable,
        )
        .await
    }

    /// Opens `topic`/`partition` on its owner (creating its directory).
    pub async fn open_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        config: LogConfig,
        signal: Arc<PartitionSignal>,
        clean_shutdown: bool,
    ) -> Result<(), String> {
        let unavailable = Err("shard unavailable".into());
        self.on_owner(
            key(topic, partition),
            move |p, key| p.open(key, config, signal, clean_shutdown),
            unavailable,
        )
        .await
    }

    /// Closes `topic`/`partition` on its owner and deletes its directory.
    pub async fn remove_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
    ) -> Result<(), String> {
        let unavailable = Err("shard unavailable".into());
        self.on_owner(key(topic, partition), |p, key| p.remove(key), unavailable)
            .await
    }

    /// Replaces the configuration of `topic`/`partition`'s live log on its owner.
    pub async fn reconfigure_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        config: LogConfig,
    ) -> Result<(), String> {
        let unavailable = Err("shard unavailable".into());
        self.on_owner(
            key(topic, partition),
            move |p, key| Box::pin(std::future::ready(p.reconfigure(key, config))),
            unavailable,
        )
        .await
    }

    /// DeleteRecords on `topic`/`partition`'s owner: `(error code, low watermark)`.
    pub async fn delete_records(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        before: i64,
    ) -> (ErrorCode, i64) {
        let unavailable = (ErrorCode::UNKNOWN_SERVER_ERROR, -1);
        self.on_owner(
            key(topic, partition),
            move |p, key| p.delete_records(key, before),
            unavailable,
        )
        .await
    }

    /// Describes `topic`/`partition` on its owner (size, offsets, live producers).
    pub async fn describe_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
    ) -> PartitionDescription {
        let unavailable = PartitionDescription::failed(ErrorCode::UNKNOWN_SERVER_ERROR);
        self.on_owner(
            key(topic, partition),
            |p, key| Box::pin(std::future::ready(p.describe(key))),
            unavailable,
        )
        .await
    }

    /// Runs `request` on the coordinator of `__consumer_offsets` partition `partition`, on
    /// its owner. NOT_COORDINATOR when the owner no longer takes calls or is shutting down,
    /// COORDINATOR_NOT_AVAILABLE when it hosts no such coordinator.
    pub async fn group_request(
        self: &Rc<Self>,
        partition: i32,
        request: GroupRequest,
    ) -> Result<GroupResponse, ErrorCode> {
        let unavailable = Err(ErrorCode::NOT_COORDINATOR);
        self.on_owner(
            key(OFFSETS_TOPIC, partition),
            move |p, key| p.group(key, request),
            unavailable,
        )
        .await
    }

    /// Runs `request` on the transaction coordinator of `__transaction_state` partition
    /// `partition`, on its owner. NOT_COORDINATOR when the owner no longer takes calls or is
    /// shutting down, COORDINATOR_NOT_AVAILABLE when it hosts no such coordinator.
    pub async fn txn_request(
        self: &Rc<Self>,
        partition: i32,
        request: TxnRequest,
    ) -> Result<TxnResponse, ErrorCode> {
        let unavailable = Err(ErrorCode::NOT_COORDINATOR);
        self.on_owner(
            key(TRANSACTION_STATE_TOPIC, partition),
            move |p, key| p.txn(key, request),
            unavailable,
        )
        .await
    }

    /// Replays and starts the group coordinators of the `__consumer_offsets` partitions this
    /// shard owns (all open by now), handing them what they need and no more
    /// ([`HostContext`]). Returns how many it started.
    pub async fn load_group_hosts(self: &Rc<Self>) -> Result<usize, String> {
        let logs = self.owned_logs_of(OFFSETS_TOPIC)?;
        let context = Rc::new(HostContext {
            backend: self.backend.clone(),
            shared: Arc::clone(&self.shared),
            stop: self.stop.clone(),
            appender: Rc::new(ShardOffsetsAppender(Rc::downgrade(self))),
        });
        self.groups.load(context, logs).await
    }

    /// The logs of `topic`'s partitions this shard owns, by partition: an internal topic a
    /// coordinator replays at startup, so every one of them must be open by now.
    pub(crate) fn owned_logs_of(&self, topic: &str) -> Result<OwnedLogs<B>, String> {
        let Some(info) = self.shared.topic(topic) else {
            return Err(format!("{topic} is missing"));
        };
        let mut logs = Vec::new();
        for partition in 0..info.partition_count() {
            if self.owner(topic, partition) != self.shard {
                continue;
            }
            let Some(owned) = self.owned(&key(topic, partition)) else {
                return Err(format!("{topic}-{partition} is not open"));
            };
            logs.push((partition, owned.log));
        }
        Ok(logs)
    }

    /// The partition, if this shard owns it (and it is open).
    pub(crate) fn owned(&self, key: &PartitionKey) -> Option<OwnedPartition<B>> {
        self.partitions.borrow().get(key).cloned()
    }

    /// Opens and recovers `key`'s log on this shard (it must own it) without registering it;
    /// its recovered tail may still need a sync (I8), which the caller owes before
    /// [`ShardState::install_owned`].
    pub(crate) async fn open_owned_unsynced(
        &self,
        key: &PartitionKey,
        config: LogConfig,
        clean_shutdown: bool,
    ) -> Result<UnsyncedLog<PartitionLog<B>>, String> {
        let dir = partition_dir(&self.shared.config.log_dir, &key.topic, key.partition);
        PartitionLog::open_unsynced(
            self.backend.clone(),
            &dir,
            config,
            clean_shutdown,
            self.backend.wall_clock_ms(),
        )
        .await
        .map_err(|e| format!("opening {}: {e}", dir.display()))
    }

    /// Registers an open log as `key`'s: from here on this shard serves it. A log already
    /// registered under `key` is closed.
    pub(crate) async fn install_owned(
        &self,
        key: PartitionKey,
        log: PartitionLog<B>,
        signal: Arc<PartitionSignal>,
    ) {
        tracing::debug!(
            shard = self.shard.0,
            topic = key.topic,
            partition = key.partition,
            "partition open"
        );
        log.use_schema_ids(self.shared.schema_ids.clone());
        let owned = OwnedPartition {
            log: Rc::new(log),
            signal,
        };
        let old = self.partitions.borrow_mut().insert(key, owned);
        if let Some(old) = old {
            let _ = old.log.close().await;
        }
    }

    /// Every owned partition's log (for the retention and flush timers), in partition order:
    /// the map's order is random per process, and the simulator replays a seed only if the
    /// timers touch the logs in the same order every run.
    pub fn owned_logs(&self) -> Vec<(String, i32, Rc<PartitionLog<B>>)> {
        let mut logs: Vec<_> = self
            .partitions
            .borrow()
            .iter()
            .map(|(k, o)| (k.topic.clone(), k.partition, Rc::clone(&o.log)))
            .collect();
        logs.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        logs
    }

    /// Flushes and closes every owned partition; `false` if any failed.
    pub async fn close_all(&self) -> bool {
        let mut ok = true;
        let mut logs: Vec<_> = self.partitions.borrow_mut().drain().collect();
        logs.sort_by(|a, b| (&a.0.topic, a.0.partition).cmp(&(&b.0.topic, b.0.partition)));
        for (key, owned) in logs {
            let (topic, p) = (key.topic.as_str(), key.partition);
            if let Err(e) = owned.log.flush().await {
                tracing::error!(topic, partition = p, "flush at shutdown failed: {e}");
                ok = false;
            }
            if let Err(e) = owned.log.close().await {
                tracing::error!(topic, partition = p, "close at shutdown failed: {e}");
                ok = false;
            }
        }
        ok
    }
}

/// The typed operations on partitions this shard owns: what a direct call on the owner and
/// a [`PartitionCall`] from another shard both run.
impl<B: Backend> LocalPartitions for ShardState<B> {
    fn append(
        &self,
        key: PartitionKey,
        batch: Bytes,
    ) -> LocalBoxFuture<'_, Result<Appended, AppendRefusal>> {
        Box::pin(async move {
            let key = &key;
            let (topic, partition) = (key.topic.as_str(), key.partition);
            let owned = self
                .owned(key)
                .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)?;
            let bytes = batch.len() as u64;
            // The log queues the batch on this first poll, so arrival order decides offsets.
            match owned.log.append(batch, self.backend.wall_clock_ms()).await {
                Ok(AppendInfo {
                    base_offset,
                    last_offset,
                    duplicate,
                    log_append_time_ms,
                    ..
                }) => {
                    if !duplicate {
                        let records = (last_offset.0 - base_offset.0 + 1).max(0) as u64;
                        self.metrics.appended(topic, partition, records, bytes);
                    }
                    // The bytes are visible (the log published its high watermark): wake (I7).
                    owned.signal.notify_append();
                    Ok(Appended {
                        base_offset: base_offset.0,
                        log_start_offset: owned.log.log_start_offset().0,
                        log_append_time_ms: log_append_time_ms.unwrap_or(-1),
                    })
                }
                Err(e) => Err(AppendRefusal {
                    code: log_error_code(topic, partition, "append", &e),
                    record_failures: match e {
                        LogError::RecordRules(failures) => failures,
                        _ => Vec::new(),
                    },
                }),
            }
        })
    }

    fn write_marker(
        &self,
        key: PartitionKey,
        marker: TxnMarker,
    ) -> LocalBoxFuture<'_, Result<i64, ErrorCode>> {
        Box::pin(async move {
            let key = &key;
            let (topic, partition) = (key.topic.as_str(), key.partition);
            let owned = self
                .owned(key)
                .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)?;
            // Queued on this first poll, like an append (arrival order decides offsets).
            match owned
                .log
                .append_marker(marker, self.backend.wall_clock_ms())
                .await
            {
                Ok(info) => {
                    // The marker is visible and the LSO may have moved: wake (I7, I69).
                    owned.signal.notify_append();
                    Ok(info.base_offset.0)
                }
                Err(e) => Err(log_error_code(topic, partition, "write marker", &e)),
            }
        })
    }

    fn read(
        &self,
        key: PartitionKey,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> LocalBoxFuture<'_, PartitionRead> {
        Box::pin(async move {
            let key = &key;
            let Some(owned) = self.owned(key) else {
                return PartitionRead::failed(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
            };
            let mut out = PartitionRead {
                error_code: ErrorCode::NONE,
                high_watermark: owned.log.high_watermark().0,
                log_start_offset: owned.log.log_start_offset().0,
                last_stable_offset: owned.log.last_stable_offset().0,
                aborted: Vec::new(),
                bytes: bytes::Bytes::new(),
            };
            let read = owned
                .log
                .read_isolated(Offset(fetch_offset), max_bytes, read_committed);
            match read.await {
                Ok(read) => {
                    let records = records_in_batches(&read.bytes);
                    let bytes = read.bytes.len() as u64;
                    self.metrics.read(&key.topic, key.partition, records, bytes);
                    out.high_watermark = read.high_watermark.0;
                    out.log_start_offset = read.log_start_offset.0;
                    out.last_stable_offset = read.last_stable_offset.0;
                    out.aborted = read.aborted;
                    out.bytes = read.bytes;
                }
                Err(e) => out.error_code = log_error_code(&key.topic, key.partition, "read", &e),
            }
            out
        })
    }

    fn list_offset(
        &self,
        key: PartitionKey,
        timestamp: i64,
        read_committed: bool,
    ) -> LocalBoxFuture<'_, ListedOffset> {
        Box::pin(async move {
            let key = &key;
            let Some(owned) = self.owned(key) else {
                return (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1, -1);
            };
            let log = owned.log;
            // Timestamp lookups go through the partition log's time index.
            let found = match timestamp {
                -2 | -4 => return (ErrorCode::NONE, log.log_start_offset().0, -1),
                -1 if read_committed => return (ErrorCode::NONE, log.last_stable_offset().0, -1),
                -1 => return (ErrorCode::NONE, log.high_watermark().0, -1),
                -3 => log.max_timestamp_offset().await,
                ts if ts < 0 => return (ErrorCode::INVALID_REQUEST, -1, -1),
                ts => log.offset_for_timestamp(ts).await,
            };
            match found {
                Ok(Some((offset, found_ms))) => (ErrorCode::NONE, offset.0, found_ms),
                // No record has a timestamp at or after the target (Kafka: -1, -1, no error).
                Ok(None) => (ErrorCode::NONE, -1, -1),
                Err(e) => {
                    let code = log_error_code(&key.topic, key.partition, "list offsets", &e);
                    (code, -1, -1)
                }
            }
        })
    }

    fn open(
        &self,
        key: PartitionKey,
        config: LogConfig,
        signal: Arc<PartitionSignal>,
        clean_shutdown: bool,
    ) -> LocalBoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let unsynced = self
                .open_owned_unsynced(&key, config, clean_shutdown)
                .await?;
            let log = unsynced
                .sync()
                .await
                .map_err(|e| format!("syncing {}/{}: {e}", key.topic, key.partition))?;
            self.install_owned(key, log, signal).await;
            Ok(())
        })
    }

    fn remove(&self, key: PartitionKey) -> LocalBoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let key = &key;
            let (topic, partition) = (key.topic.as_str(), key.partition);
            let owned = self.partitions.borrow_mut().remove(key);
            if let Some(owned) = owned {
                let syncs = owned.log.sync_stats().snapshot();
                self.metrics.partition_removed(topic, partition, syncs);
                if let Err(e) = owned.log.close().await {
                    tracing::warn!(topic, partition, "closing a deleted partition: {e}");
                }
                owned.signal.notify_append();
            }
            let data_dir = self.data_dir();
            let dir = partition_dir(&data_dir, topic, partition);
            match self.backend.remove_dir_all(&dir).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("removing {}: {e}", dir.display()))
                }
                _ => {}
            }
            self.backend
                .sync_dir(&data_dir)
                .await
                .map_err(|e| format!("syncing {}: {e}", data_dir.display()))
        })
    }

    fn reconfigure(&self, key: PartitionKey, config: LogConfig) -> Result<(), String> {
        let key = &key;
        let owned = self
            .owned(key)
            .ok_or_else(|| format!("{}-{} is not open", key.topic, key.partition))?;
        owned.log.reconfigure(config).map_err(|e| e.to_string())
    }

    fn delete_records(
        &self,
        key: PartitionKey,
        before: i64,
    ) -> LocalBoxFuture<'_, (ErrorCode, i64)> {
        Box::pin(async move {
            let key = &key;
            let Some(owned) = self.owned(key) else {
                return (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1);
            };
            // Kafka's -1: everything below the high watermark, read with no await in between.
            let before = if before == -1 {
                owned.log.high_watermark()
            } else {
                Offset(before)
            };
            match owned.log.delete_records(before).await {
                Ok(low_watermark) => (ErrorCode::NONE, low_watermark.0),
                Err(e) => (
                    log_error_code(&key.topic, key.partition, "delete records", &e),
                    -1,
                ),
            }
        })
    }

    fn describe(&self, key: PartitionKey) -> PartitionDescription {
        let key = &key;
        let Some(owned) = self.owned(key) else {
            return PartitionDescription::failed(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION);
        };
        let log = owned.log;
        let producers = log
            .live_producers(self.backend.wall_clock_ms())
            .into_iter()
            .filter_map(|(producer_id, entry)| {
                let last = entry.batches.back()?;
                let txn = log.ongoing_transaction(producer_id);
                Some(ProducerDescription {
                    producer_id,
                    epoch: entry.epoch,
                    last_sequence: last.last_sequence,
                    last_timestamp_ms: last.max_timestamp_ms,
                    coordinator_epoch: log.coordinator_epoch(producer_id).unwrap_or(-1),
                    current_txn_start_offset: txn.map_or(-1, |o| o.0),
                })
            })
            .collect();
        PartitionDescription {
            error_code: ErrorCode::NONE,
            size_bytes: log.size_bytes(),
            log_start_offset: log.log_start_offset().0,
            log_end_offset: log.high_watermark().0,
            producers,
        }
    }

    fn group(
        &self,
        key: PartitionKey,
        request: GroupRequest,
    ) -> LocalBoxFuture<'_, Result<GroupResponse, ErrorCode>> {
        Box::pin(async move {
            let key = &key;
            let Some(host) = self.groups.get(key.partition) else {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            };
            host.submit(request).await.ok_or(ErrorCode::NOT_COORDINATOR)
        })
    }

    fn txn(
        &self,
        key: PartitionKey,
        request: TxnRequest,
    ) -> LocalBoxFuture<'_, Result<TxnResponse, ErrorCode>> {
        Box::pin(async move {
            let Some(host) = self.txns.get(key.partition) else {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            };
            host.submit(request).await.ok_or(ErrorCode::NOT_COORDINATOR)
        })
    }
}

/// The [`OffsetsAppender`] a shard hands its coordinator hosts: its local append path. Holds
/// the shard weakly, since the shard holds the hosts.
struct ShardOffsetsAppender<B: Backend>(Weak<ShardState<B>>);

impl<B: Backend> OffsetsAppender for ShardOffsetsAppender<B> {
    fn append(&self, partition: i32, batch: Bytes) -> LocalBoxFuture<'_, Result<(), ErrorCode>> {
        Box::pin(async move {
            // A shard that is gone no longer serves anything; its coordinators stop with it.
            let state = self.0.upgrade().ok_or(ErrorCode::NOT_COORDINATOR)?;
            let _in_flight = state.begin_request();
            let key = key(OFFSETS_TOPIC, partition);
            let owned = state
                .owned(&key)
                .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)?;
            // The coordinator's own batches (transactional offsets, markers: I74) are not
            // held to the producer rules.
            let now = state.backend.wall_clock_ms();
            let bytes = batch.len() as u64;
            match owned.log.append_from_coordinator(batch, now).await {
                Ok(info) => {
                    let records = (info.last_offset.0 - info.base_offset.0 + 1).max(0) as u64;
                    state
                        .metrics
                        .appended(OFFSETS_TOPIC, partition, records, bytes);
                    owned.signal.notify_append();
                    Ok(())
                }
                Err(e) => Err(log_error_code(OFFSETS_TOPIC, partition, "append", &e)),
            }
        })
    }

    fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        result: TxnResult,
    ) -> LocalBoxFuture<'_, Result<(), ErrorCode>> {
        let now = self
            .0
            .upgrade()
            .map_or(0, |state| state.backend.wall_clock_ms());
        let batch = encode_marker(producer_id, producer_epoch, coordinator_epoch, result, now);
        self.append(partition, batch.into())
    }
}

/// Maps a log error to its Kafka code, logging storage failures.
fn log_error_code(topic: &str, partition: i32, what: &str, e: &LogError) -> ErrorCode {
    let code = e.kafka_error_code();
    if code == ErrorCode::KAFKA_STORAGE_ERROR {
        tracing::error!(topic, partition, "{what} failed: {e}");
    } else {
        tracing::debug!(topic, partition, "{what} refused: {e}");
    }
    code
}

/// Sleeps `duration`; `false` when shutdown began instead.
pub async fn sleep_or_stop<B: Backend>(state: &ShardState<B>, duration: Duration) -> bool {
    let sleep = std::pin::pin!(state.backend.sleep(duration));
    let stop = std::pin::pin!(state.stop.recv());
    matches!(
        futures::future::select(sleep, stop).await,
        futures::future::Either::Left(_)
    )
}
