//! What a request handler may ask of its shard: small traits, one concern each, that
//! [`ShardState`](super::shard::ShardState) implements (I150).
//!
//! Contract:
//! - A handler takes the traits it uses (`&impl TopicCatalogue`,
//!   `&(impl TopicCatalogue + PartitionOps)`), not the whole shard: its signature says what
//!   it can touch, and a test can hand it a fake.
//! - [`TopicCatalogue`]: the cluster's topics (the registry every shard shares).
//!   [`BrokerIdentity`]: who this broker is (node id, cluster id, addresses, the versions it
//!   serves, its data directory). [`PartitionOps`]: one partition's operations, run on the
//!   shard that owns it (a direct call there, a message otherwise; I1). [`GroupOps`]: a
//!   request to the group coordinator of one `__consumer_offsets` partition, on its owner.
//!   [`ConfigLookup`]: the configuration in force (static, dynamic, per group).
//!   [`ShardClock`]: the shard's time and its shutdown, for a handler that waits.
//!   [`TopicAdmin`]: creating, deleting and growing topics (`server::topics` implements it).
//!   [`TxnVerification`]: the produce path's question to the transaction coordinators
//!   (`handlers::add_partitions_to_txn` implements it for whatever has the catalogue and
//!   [`TxnOps`]). [`TxnOps`]: a request to the transaction coordinator of one
//!   `__transaction_state` partition, on its owner. [`ProducerIds`]: the durable producer-id
//!   allocator (InitProducerId without a transactional id). [`SecurityStores`]: the ACLs,
//!   SCRAM credentials and client quotas, read as in force or replaced (durable first, then
//!   in force on every shard) under the admin lock. [`Authorizer`]: whether an authorizer
//!   is on and what a caller may do, for the handlers that check inside their answer (the
//!   ACL APIs, Metadata's auto-creation and KIP-430 bitfields); every API's own check runs
//!   before its handler, from the table in `handlers::authorize`.
//!   [`QuotaLedger`]: the client quotas' rate ledger, charged by Produce and Fetch.
//!   [`ApiMetrics`]: the request counters each answer's error codes are counted in.
//! - [`ShardContext`] is all of them at once: what the dispatcher (`handlers::handle`)
//!   takes, to hand each handler the part it uses.
//! - `ShardState` implements the catalogue and the identity, and through its `Rc` (the
//!   operations route through it) the partition and group operations; [`Shared`]
//!   implements the catalogue and the identity, which are its own; an `Rc` of either
//!   passes them on.
//! - This module names neither the shard nor a handler, so both import it and neither
//!   imports the other through it (no import cycle, I60).
//! - The futures are not `Send`: a shard runs its tasks on one thread.

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use futures::lock::MutexGuard;
use minikafka_core::auth::acl::{Operation, ResourceType};
use minikafka_core::clock::MonoTime;
use minikafka_core::control_batch::TxnMarker;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::group::{GroupRequest, GroupResponse};
use minikafka_core::quota::QuotaConfigs;
use minikafka_core::txn::{AddPartitionsTxn, TopicPartition, TxnRequest, TxnResponse};
use uuid::Uuid;

use super::acl_store::AclSet;
use super::authz::{Caller, CLUSTER_NAME};
use super::dynamic_config::DynamicBrokerConfig;
use super::group_configs::GroupConfigs;
use super::partition_ops::{
    AppendRefusal, Appended, ListedOffset, PartitionDescription, PartitionRead,
};
use super::quotas::Quotas;
use super::scram_store::ScramStore;
use super::shared::{Shared, TopicInfo};
use crate::config::BrokerConfig;
use crate::protocol::SupportedVersions;

/// The cluster's topics, by name or id.
pub trait TopicCatalogue {
    /// The topic named `name`, if it exists.
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>>;
    /// The topic whose id is `id`, if one is.
    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>>;
    /// Every topic.
    fn all_topics(&self) -> Vec<Arc<TopicInfo>>;
}

/// Who this broker is, as its answers name it.
pub trait BrokerIdentity {
    /// The broker's node id.
    fn node_id(&self) -> i32;
    /// The cluster id answered in Metadata and DescribeCluster.
    fn cluster_id(&self) -> &str;
    /// The host and port clients reach `listener` at.
    fn advertised_address(&self, listener: &str) -> (String, u16);
    /// The API versions the broker serves.
    fn supported_versions(&self) -> &SupportedVersions;
    /// The configured data directory.
    fn log_dir(&self) -> &Path;
}

/// One partition's operations, each run on the shard that owns the partition.
#[allow(async_fn_in_trait)] // A shard's futures stay on its thread: no `Send` bound wanted.
pub trait PartitionOps {
    /// Appends `batch` and wakes the partition's waiters.
    async fn append(
        &self,
        topic: String,
        partition: i32,
        batch: Bytes,
    ) -> Result<Appended, AppendRefusal>;
    /// Appends a transaction marker: its offset once durable, or the error code.
    async fn write_txn_marker(
        &self,
        topic: String,
        partition: i32,
        marker: TxnMarker,
    ) -> Result<i64, ErrorCode>;
    /// Reads up to `max_bytes` from `fetch_offset`.
    async fn read(
        &self,
        topic: String,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
    ) -> PartitionRead;
    /// Answers a ListOffsets query: `(error code, offset, timestamp)`.
    async fn list_offset(
        &self,
        topic: String,
        partition: i32,
        timestamp: i64,
        read_committed: bool,
    ) -> ListedOffset;
    /// DeleteRecords: `(error code, low watermark)`.
    async fn delete_records(&self, topic: String, partition: i32, before: i64) -> (ErrorCode, i64);
    /// Size, offsets and live producers.
    async fn describe_partition(&self, topic: String, partition: i32) -> PartitionDescription;
}

/// The configuration in force, as DescribeConfigs and the config checks read it.
pub trait ConfigLookup {
    /// The static settings, as read at startup.
    fn settings(&self) -> &BrokerConfig;
    /// The static settings with the dynamic overrides applied.
    fn effective_config(&self) -> BrokerConfig;
    /// The dynamic overrides alone.
    fn dynamic_config(&self) -> Arc<DynamicBrokerConfig>;
    /// The per-group settings.
    fn group_configs(&self) -> Arc<GroupConfigs>;
}

/// The shard's time (its backend's, never a clock read; the broker reads none) and its
/// shutdown, for a handler that waits (Fetch's long poll).
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait ShardClock {
    /// The backend's monotonic time.
    fn now(&self) -> MonoTime;
    /// Completes at `deadline`.
    async fn sleep_until(&self, deadline: MonoTime);
    /// Whether shutdown began.
    fn stopping(&self) -> bool;
    /// Completes once shutdown began.
    async fn stopped(&self);
}

/// Changes to the cluster's topics, each under the admin lock and on every owning shard;
/// the error is Kafka's code and a message for the answer.
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait TopicAdmin {
    /// Creates `name` with `partitions` and the topic-level `overrides` (or only checks).
    async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, (ErrorCode, String)>;
    /// Deletes `name`: its id once gone.
    async fn delete_topic(&self, name: &str) -> Result<Uuid, (ErrorCode, String)>;
    /// Grows `name` to `count` partitions (or only checks).
    async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), (ErrorCode, String)>;
}

/// The produce path's verification that a transactional batch's partition is in its
/// transaction (KIP-890 part 1), asked of the transaction coordinators.
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait TxnVerification {
    /// Runs `transactions` (each with `verify_only` set) on their coordinators: per
    /// transaction, in order, its id and its partitions' codes.
    async fn add_partitions(
        &self,
        transactions: Vec<AddPartitionsTxn>,
    ) -> Vec<(String, Vec<(TopicPartition, ErrorCode)>)>;
}

/// A request to a group coordinator, run on the shard that owns its offsets partition.
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait GroupOps {
    /// Runs `request` on the coordinator of `__consumer_offsets` partition `partition`:
    /// NOT_COORDINATOR when its owner no longer takes calls or is shutting down,
    /// COORDINATOR_NOT_AVAILABLE when it hosts no such coordinator.
    async fn group_request(
        &self,
        partition: i32,
        request: GroupRequest,
    ) -> Result<GroupResponse, ErrorCode>;
}

/// A request to a transaction coordinator, run on the shard that owns its
/// `__transaction_state` partition.
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait TxnOps {
    /// Runs `request` on the coordinator of `__transaction_state` partition `partition`:
    /// NOT_COORDINATOR when its owner no longer takes calls or is shutting down,
    /// COORDINATOR_NOT_AVAILABLE when it hosts no such coordinator.
    async fn txn_request(
        &self,
        partition: i32,
        request: TxnRequest,
    ) -> Result<TxnResponse, ErrorCode>;
}

/// Producer ids for idempotent producers, from the broker's durable allocator
/// (`log::producer_ids`).
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait ProducerIds {
    /// A fresh id with epoch 0, or `current` with its epoch bumped (KIP-360); an error when
    /// the allocator's high-water mark cannot be read or written.
    async fn allocate_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> std::io::Result<(i64, i16)>;
}

/// The broker's security stores, each replaced whole: written durably through the shard's
/// backend (an atomic file in the data directory) and only then put in force on every shard.
/// A read-modify-write holds [`SecurityStores::lock_admin`] from the read to the replace; a
/// failed write leaves the store in force unchanged (I152).
#[allow(async_fn_in_trait)] // As `PartitionOps`: a shard's futures stay on its thread.
pub trait SecurityStores {
    /// Waits for the admin lock (topic, configuration and security changes, one at a time).
    async fn lock_admin(&self) -> MutexGuard<'_, ()>;
    /// The ACLs in force.
    fn acls(&self) -> Arc<AclSet>;
    /// Stores `next` as the ACLs, then puts it in force.
    async fn replace_acls(&self, next: AclSet) -> std::io::Result<()>;
    /// The SCRAM credentials in force.
    fn scram_credentials(&self) -> Arc<ScramStore>;
    /// Stores `next` as the SCRAM credentials, then puts it in force.
    async fn replace_scram_credentials(&self, next: ScramStore) -> std::io::Result<()>;
    /// The client quotas in force.
    fn quota_configs(&self) -> Arc<QuotaConfigs>;
    /// Stores `next` as the client quotas, then puts it in force.
    async fn replace_quota_configs(&self, next: QuotaConfigs) -> std::io::Result<()>;
}

/// The authorizer as a handler asks it inside its answer (`server::authz`'s checks).
pub trait Authorizer {
    /// Whether an authorizer is configured (else the ACL APIs answer SECURITY_DISABLED).
    fn authorizer_enabled(&self) -> bool;
    /// Whether `caller` may do `operation` on the resource (always, with no authorizer).
    fn allowed(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        operation: Operation,
    ) -> bool;
    /// The KIP-430 bitfield for `caller` on the resource (`authz::authorized_operations`).
    fn authorized_operations(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        requested: bool,
    ) -> i32;
    /// Whether `caller` may do `operation` on some topic (KIP-679's idempotent-write grant,
    /// `authz::any_topic_allowed`).
    fn any_topic_allowed(&self, caller: &Caller, operation: Operation) -> bool;
    /// Whether `caller` may do `operation` on the cluster.
    fn cluster_allowed(&self, caller: &Caller, operation: Operation) -> bool {
        self.allowed(caller, ResourceType::Cluster, CLUSTER_NAME, operation)
    }
    /// Whether `caller` may do `operation` on the topic `topic`.
    fn topic_allowed(&self, caller: &Caller, topic: &str, operation: Operation) -> bool {
        self.allowed(caller, ResourceType::Topic, topic, operation)
    }
}

/// The client quotas' rate ledger (one per broker, shared by the shards) that Produce's and
/// Fetch's bytes are charged to.
pub trait QuotaLedger {
    /// The ledger.
    fn quotas(&self) -> &Quotas;
}

/// The shard's request counters, as the dispatcher counts each answer's error codes
/// (`minikafka_request_errors_total`).
pub trait ApiMetrics {
    /// Counts the non-zero `codes` of one answer to API `api_key`.
    fn count_errors(&self, api_key: i16, codes: impl IntoIterator<Item = i16>);
}

/// Everything a request may ask of its shard: the dispatcher's context (`handlers::handle`),
/// which hands each handler the part it uses. Any type with all the narrow traits is one
/// (the shard's `Rc`, or a test's fake).
pub trait ShardContext:
    TopicCatalogue
    + BrokerIdentity
    + PartitionOps
    + GroupOps
    + TxnOps
    + TxnVerification
    + ConfigLookup
    + ShardClock
    + TopicAdmin
    + ProducerIds
    + SecurityStores
    + Authorizer
    + QuotaLedger
    + ApiMetrics
{
}

impl<T> ShardContext for T where
    T: TopicCatalogue
        + BrokerIdentity
        + PartitionOps
        + GroupOps
        + TxnOps
        + TxnVerification
        + ConfigLookup
        + ShardClock
        + TopicAdmin
        + ProducerIds
        + SecurityStores
        + Authorizer
        + QuotaLedger
        + ApiMetrics
{
}

impl<T: ApiMetrics + ?Sized> ApiMetrics for Rc<T> {
    fn count_errors(&self, api_key: i16, codes: impl IntoIterator<Item = i16>) {
        (**self).count_errors(api_key, codes)
    }
}

impl<T: TopicCatalogue + ?Sized> TopicCatalogue for Rc<T> {
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        (**self).topic(name)
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        (**self).topic_by_id(id)
    }

    fn all_topics(&self) -> Vec<Arc<TopicInfo>> {
        (**self).all_topics()
    }
}

impl<T: BrokerIdentity + ?Sized> BrokerIdentity for Rc<T> {
    fn node_id(&self) -> i32 {
        (**self).node_id()
    }

    fn cluster_id(&self) -> &str {
        (**self).cluster_id()
    }

    fn advertised_address(&self, listener: &str) -> (String, u16) {
        (**self).advertised_address(listener)
    }

    fn supported_versions(&self) -> &SupportedVersions {
        (**self).supported_versions()
    }

    fn log_dir(&self) -> &Path {
        (**self).log_dir()
    }
}

impl<T: ConfigLookup + ?Sized> ConfigLookup for Rc<T> {
    fn settings(&self) -> &BrokerConfig {
        (**self).settings()
    }

    fn effective_config(&self) -> BrokerConfig {
        (**self).effective_config()
    }

    fn dynamic_config(&self) -> Arc<DynamicBrokerConfig> {
        (**self).dynamic_config()
    }

    fn group_configs(&self) -> Arc<GroupConfigs> {
        (**self).group_configs()
    }
}

impl<T: ProducerIds + ?Sized> ProducerIds for Rc<T> {
    async fn allocate_producer_id(
        &self,
        current: Option<(i64, i16)>,
    ) -> std::io::Result<(i64, i16)> {
        (**self).allocate_producer_id(current).await
    }
}

impl<T: SecurityStores + ?Sized> SecurityStores for Rc<T> {
    async fn lock_admin(&self) -> MutexGuard<'_, ()> {
        (**self).lock_admin().await
    }

    fn acls(&self) -> Arc<AclSet> {
        (**self).acls()
    }

    async fn replace_acls(&self, next: AclSet) -> std::io::Result<()> {
        (**self).replace_acls(next).await
    }

    fn scram_credentials(&self) -> Arc<ScramStore> {
        (**self).scram_credentials()
    }

    async fn replace_scram_credentials(&self, next: ScramStore) -> std::io::Result<()> {
        (**self).replace_scram_credentials(next).await
    }

    fn quota_configs(&self) -> Arc<QuotaConfigs> {
        (**self).quota_configs()
    }

    async fn replace_quota_configs(&self, next: QuotaConfigs) -> std::io::Result<()> {
        (**self).replace_quota_configs(next).await
    }
}

impl<T: Authorizer + ?Sized> Authorizer for Rc<T> {
    fn authorizer_enabled(&self) -> bool {
        (**self).authorizer_enabled()
    }

    fn allowed(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        operation: Operation,
    ) -> bool {
        (**self).allowed(caller, resource_type, name, operation)
    }

    fn authorized_operations(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        requested: bool,
    ) -> i32 {
        (**self).authorized_operations(caller, resource_type, name, requested)
    }

    fn any_topic_allowed(&self, caller: &Caller, operation: Operation) -> bool {
        (**self).any_topic_allowed(caller, operation)
    }
}

impl Authorizer for Shared {
    fn authorizer_enabled(&self) -> bool {
        self.config.authorizer.enabled()
    }

    fn allowed(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        operation: Operation,
    ) -> bool {
        super::authz::allowed(self, caller, resource_type, name, operation)
    }

    fn authorized_operations(
        &self,
        caller: &Caller,
        resource_type: ResourceType,
        name: &str,
        requested: bool,
    ) -> i32 {
        super::authz::authorized_operations(self, caller, resource_type, name, requested)
    }

    fn any_topic_allowed(&self, caller: &Caller, operation: Operation) -> bool {
        super::authz::any_topic_allowed(self, caller, operation)
    }
}

impl<T: QuotaLedger + ?Sized> QuotaLedger for Rc<T> {
    fn quotas(&self) -> &Quotas {
        (**self).quotas()
    }
}

impl QuotaLedger for Shared {
    fn quotas(&self) -> &Quotas {
        &self.quotas
    }
}

impl<T: ShardClock + ?Sized> ShardClock for Rc<T> {
    fn now(&self) -> MonoTime {
        (**self).now()
    }

    async fn sleep_until(&self, deadline: MonoTime) {
        (**self).sleep_until(deadline).await
    }

    fn stopping(&self) -> bool {
        (**self).stopping()
    }

    async fn stopped(&self) {
        (**self).stopped().await
    }
}

impl ConfigLookup for Shared {
    fn settings(&self) -> &BrokerConfig {
        &self.config
    }

    fn effective_config(&self) -> BrokerConfig {
        Shared::effective_config(self)
    }

    fn dynamic_config(&self) -> Arc<DynamicBrokerConfig> {
        Shared::dynamic_config(self)
    }

    fn group_configs(&self) -> Arc<GroupConfigs> {
        Shared::group_configs(self)
    }
}

impl TopicCatalogue for Shared {
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        Shared::topic(self, name)
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        Shared::topic_by_id(self, id)
    }

    fn all_topics(&self) -> Vec<Arc<TopicInfo>> {
        Shared::all_topics(self)
    }
}

impl BrokerIdentity for Shared {
    fn node_id(&self) -> i32 {
        self.config.node_id
    }

    fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    fn advertised_address(&self, listener: &str) -> (String, u16) {
        Shared::advertised_address(self, listener)
    }

    fn supported_versions(&self) -> &SupportedVersions {
        &self.supported
    }

    fn log_dir(&self) -> &Path {
        &self.config.log_dir
    }
}
