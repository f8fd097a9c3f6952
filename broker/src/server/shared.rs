//! State shared by every shard: the configuration, the topic registry, one wakeup signal per
//! partition, the shard inboxes, the connection count, the shutdown flags and the producer id
//! allocator.
//!
//! Contract:
//! - [`Shared`] is `Send + Sync` and lives in an `Arc` seen by all shard threads. It holds no
//!   partition log (those are shard-local, `!Send`): only what any shard may read.
//! - The topic registry maps a name to an immutable [`TopicInfo`] snapshot (`Arc`); changes
//!   (create, delete, add partitions) replace the snapshot under a short `RwLock` write and are
//!   serialized by the async [`Shared::admin_lock`], held across the disk work.
//! - A registry entry is published only after its partition logs are open on their owners,
//!   and removed before they are closed, so a request that finds a topic finds its logs
//!   (except while a delete races it: it then gets an error code, never a panic).
//! - The dynamic broker settings are one immutable snapshot (`Arc`) replaced whole, like a
//!   registry entry; [`Shared::effective_config`] lays them over the static configuration.
//! - Never: holds a `std` lock across an `.await`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use minikafka_core::backend::Backend;
use minikafka_core::shard_sync::{Permits, PhaseBarrier, PhaseState, ShutdownSignal};
use minikafka_core::sync::Mutex;
use minikafka_core::wakeup::PartitionSignal;
use uuid::Uuid;

use super::acl_store::AclSet;
use super::dynamic_config::DynamicBrokerConfig;
use super::group_configs::GroupConfigs;
use super::keystore_reload::ReloadedKeystores;
use super::partition_ops::PartitionCall;
use super::quotas::Quotas;
use super::scram_store::ScramStore;
use crate::config::BrokerConfig;
use crate::log::{KnownSchemaIds, ProducerIdAllocator};
use crate::metrics::inboxes::MetricsInboxes;
use crate::metrics::registry_counters::RegistryMetrics;
use crate::protocol::SupportedVersions;

/// Key under which a topic's id is stored in its [`crate::log::TopicMeta`] configuration map.
/// Reserved: CreateTopics refuses user configuration keys starting with `minikafka.`.
pub const TOPIC_ID_KEY: &str = "minikafka.topic.id";

/// Prefix of configuration keys reserved for the broker's own bookkeeping.
pub const RESERVED_CONFIG_PREFIX: &str = "minikafka.";

/// What every shard knows about one topic. Immutable: changes publish a new snapshot.
#[derive(Debug)]
pub struct TopicInfo {
    /// The topic's name.
    pub name: String,
    /// The topic id (persisted in the topic's metadata file).
    pub id: Uuid,
    /// Topic-level configuration: the overrides (without the reserved keys), parsed.
    pub config: crate::config::topic::TopicConfig,
    /// One wakeup signal per partition, index = partition.
    pub signals: Vec<Arc<PartitionSignal>>,
}

impl TopicInfo {
    /// Number of partitions.
    pub fn partition_count(&self) -> i32 {
        self.signals.len() as i32
    }
}

/// State shared by all shards. See the module documentation.
pub struct Shared {
    /// The broker configuration.
    pub config: BrokerConfig,
    /// The API versions we accept (requests are decoded against it) and ApiVersions lists.
    pub supported: SupportedVersions,
    /// The cluster id answered in Metadata and DescribeCluster.
    pub cluster_id: String,
    /// Whether the previous run shut down cleanly (passed to every `PartitionLog::open`).
    pub clean_shutdown: bool,
    /// The transaction coordinators' epoch for this start, taken by shard 0 before the
    /// `TopicsLoaded` barrier (`txns::coordinator_epoch`, I175).
    pub txn_coordinator_epoch: OnceLock<i32>,
    /// Topics by name.
    topics: RwLock<BTreeMap<String, Arc<TopicInfo>>>,
    /// The dynamic broker settings (AlterConfigs on the broker), an immutable snapshot
    /// replaced whole under a short write; changes are serialized by the admin lock.
    dynamic: RwLock<Arc<DynamicBrokerConfig>>,
    /// The keystores altered at run time, replaced whole like `dynamic` (I144, I145).
    keystores: RwLock<Arc<ReloadedKeystores>>,
    /// The SCRAM credentials, replaced whole like `dynamic` (writes hold `admin_lock`).
    scram: RwLock<Arc<ScramStore>>,
    /// The group configurations (resource type GROUP), replaced whole like `dynamic`.
    group_configs: RwLock<Arc<GroupConfigs>>,
    /// The ACLs in force, replaced whole like `dynamic` once stored (I49).
    acls: RwLock<Arc<AclSet>>,
    /// The client quotas in force and the measured rates (I95, I96).
    pub quotas: Quotas,
    /// Serializes topic creation, deletion, partition additions and configuration changes
    /// (held across disk work).
    pub admin_lock: futures::lock::Mutex<()>,
    /// Inbox senders, index = shard.
    pub inboxes: Vec<async_channel::Sender<PartitionCall>>,
    /// Inbox receivers, index = shard (each shard clones its own).
    pub inbox_receivers: Vec<async_channel::Receiver<PartitionCall>>,
    /// Open client connections, all shards together.
    pub connections: Permits,
    /// Set by the SIGINT/SIGTERM handler (signal-hook writes a `std` atomic; no shard does).
    signal_flag: Arc<AtomicBool>,
    /// Shutdown requested, by a signal (relayed by the first shard to notice) or by a shard's
    /// fatal error; observed by every shard (I11).
    shutdown: ShutdownSignal,
    /// The first fatal error a shard met (startup failures); the process exits non-zero.
    fatal: Mutex<Option<String>>,
    /// Set when a partition failed to close cleanly: no clean-shutdown marker is written.
    pub unclean: AtomicBool,
    /// The startup/shutdown phase barriers (I11).
    barriers: [PhaseBarrier; BARRIER_COUNT],
    /// The address each listener (by index in `config.listeners`) actually bound (known once
    /// shard 0 listens; port 0 picks a free port).
    pub bound_addrs: Vec<OnceLock<SocketAddr>>,
    /// Issues idempotent producer ids, unique across restarts (InitProducerId).
    pub producer_ids: ProducerIdAllocator,
    /// Where each shard takes metrics scrape requests, and the metrics endpoint's address.
    pub metrics: MetricsInboxes,
    /// The address the schema registry's HTTP listener bound (once bound; printed after the
    /// Kafka listener's line so a broker given port 0 can be found).
    pub schema_registry_addr: OnceLock<SocketAddr>,
    /// The schema ids the registry knows, written by its host and read by every partition's
    /// produce validation (`confluent.*.schema.validation`, I124).
    pub schema_ids: KnownSchemaIds,
    /// The schema registry's request counts and sizes, for the metrics endpoint.
    pub schema_registry_metrics: RegistryMetrics,
}

/// Number of distinct barriers (see [`Barrier`]).
const BARRIER_COUNT: usize = 5;

/// The points at which every shard waits for all others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// Shard 0 loaded the topic registry.
    TopicsLoaded = 0,
    /// Every shard opened its partitions.
    PartitionsOpen = 1,
    /// Every shard listens.
    Listening = 2,
    /// Every shard answered its in-flight requests after shutdown began.
    Drained = 3,
    /// Every shard closed its partitions.
    Closed = 4,
}

impl Shared {
    /// Shared state for `config` with empty registry and fresh inboxes.
    pub fn new(
        config: BrokerConfig,
        supported: SupportedVersions,
        cluster_id: String,
        clean_shutdown: bool,
        shutdown: Arc<AtomicBool>,
    ) -> Self {
        let shard_count = config.num_shards;
        let max_connections = config.max_connections;
        let listener_count = config.listeners.len();
        let quota_window = config.quota_window;
        let (broker_rate, listener_rates) = config.connection_creation_limits();
        let quotas = Quotas::new(quota_window);
        quotas.set_connection_limits(broker_rate, &listener_rates);
        let (inboxes, inbox_receivers) = (0..config.num_shards)
            .map(|_| async_channel::unbounded())
            .unzip();
        Shared {
            config,
            supported,
            cluster_id,
            clean_shutdown,
            txn_coordinator_epoch: OnceLock::new(),
            topics: RwLock::new(BTreeMap::new()),
            dynamic: RwLock::new(Arc::new(DynamicBrokerConfig::default())),
            keystores: RwLock::new(Arc::new(ReloadedKeystores::default())),
            group_configs: RwLock::new(Arc::new(GroupConfigs::default())),
            acls: RwLock::new(Arc::new(AclSet::default())),
            scram: RwLock::new(Arc::new(ScramStore::default())),
            quotas,
            admin_lock: futures::lock::Mutex::new(()),
            inboxes,
            inbox_receivers,
            connections: Permits::new(max_connections),
            signal_flag: shutdown,
            shutdown: ShutdownSignal::new(),
            fatal: Mutex::new(None),
            unclean: AtomicBool::new(false),
            barriers: std::array::from_fn(|_| PhaseBarrier::new(shard_count)),
            bound_addrs: (0..listener_count).map(|_| OnceLock::new()).collect(),
            producer_ids: ProducerIdAllocator::new(),
            metrics: MetricsInboxes::new(shard_count),
            schema_registry_addr: OnceLock::new(),
            schema_ids: KnownSchemaIds::new(),
            schema_registry_metrics: RegistryMetrics::default(),
        }
    }

    /// The advertised host and port of the listener named `listener` (the bound port when the
    /// configured one was 0), as Metadata, FindCoordinator and DescribeCluster answer the
    /// clients that came through it; the first listener's for a name no listener has.
    pub fn advertised_address(&self, listener: &str) -> (String, u16) {
        let listeners = &self.config.listeners;
        let index = listeners
            .iter()
            .position(|l| &*l.name == listener)
            .unwrap_or(0);
        let Some(config) = listeners.get(index) else {
            return ("127.0.0.1".to_string(), 0);
        };
        let port = if config.advertised_port == 0 {
            self.bound_addrs
                .get(index)
                .and_then(OnceLock::get)
                .map_or(config.advertised_port, |a| a.port())
        } else {
            config.advertised_port
        };
        (config.advertised_host.clone(), port)
    }

    /// Number of shards.
    pub fn num_shards(&self) -> usize {
        self.config.num_shards
    }

    /// The topic named `name`, if it exists.
    pub fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.read_topics().get(name).cloned()
    }

    /// The topic with id `id`, if it exists.
    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.read_topics().values().find(|t| t.id == id).cloned()
    }

    /// Every topic, sorted by name.
    pub fn all_topics(&self) -> Vec<Arc<TopicInfo>> {
        self.read_topics().values().cloned().collect()
    }

    /// Publishes (inserts or replaces) a topic snapshot.
    pub fn publish_topic(&self, info: Arc<TopicInfo>) {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        topics.insert(info.name.clone(), info);
    }

    /// Removes a topic from the registry, returning its last snapshot.
    pub fn unpublish_topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        let mut topics = self.topics.write().unwrap_or_else(|e| e.into_inner());
        topics.remove(name)
    }

    /// The dynamic broker settings in force.
    pub fn dynamic_config(&self) -> Arc<DynamicBrokerConfig> {
        Arc::clone(&self.dynamic.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the dynamic broker settings (already validated by
    /// [`dynamic_config::apply`](super::dynamic_config::apply)).
    pub fn set_dynamic_config(&self, dynamic: DynamicBrokerConfig) {
        *self.dynamic.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(dynamic);
    }

    /// The keystores altered at run time.
    pub fn reloaded_keystores(&self) -> Arc<ReloadedKeystores> {
        Arc::clone(&self.keystores.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the keystores altered at run time (already loaded and checked: I144).
    pub fn set_reloaded_keystores(&self, keystores: ReloadedKeystores) {
        *self.keystores.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keystores);
    }

    /// The TLS configuration a new connection on `listener` is handshaken with (I145).
    pub fn listener_tls(&self, listener: usize) -> Option<crate::config::tls::TlsSettings> {
        self.reloaded_keystores()
            .listener_tls(&self.config, listener)
    }

    /// The SCRAM credentials in force.
    pub fn scram_store(&self) -> Arc<ScramStore> {
        Arc::clone(&self.scram.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the SCRAM credentials (already stored durably: I46).
    pub fn set_scram_store(&self, store: ScramStore) {
        *self.scram.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(store);
    }

    /// The group configurations in force.
    pub fn group_configs(&self) -> Arc<GroupConfigs> {
        Arc::clone(&self.group_configs.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the group configurations (already checked).
    pub fn set_group_configs(&self, configs: GroupConfigs) {
        *self
            .group_configs
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(configs);
    }

    /// The ACLs in force.
    pub fn acls(&self) -> Arc<AclSet> {
        Arc::clone(&self.acls.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the ACLs in force (already stored: I49).
    pub fn set_acls(&self, acls: AclSet) {
        *self.acls.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(acls);
    }

    /// The broker configuration in force: the static one with the dynamic settings laid
    /// over it. The dynamic state was validated when stored, so this falls back to the static
    /// configuration only if that invariant broke (and says so).
    pub fn effective_config(&self) -> BrokerConfig {
        match super::dynamic_config::apply(&self.config, &self.dynamic_config()) {
            Ok(config) => config,
            Err(e) => {
                tracing::error!("dynamic broker configuration does not apply: {e}");
                self.config.clone()
            }
        }
    }

    fn read_topics(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<TopicInfo>>> {
        // A panic while holding the lock cannot leave the map half-updated (single insert or
        // remove), so a poisoned lock is still consistent.
        self.topics.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether shutdown was requested (relaying a signal into the shared [`ShutdownSignal`]).
    pub fn shutting_down(&self) -> bool {
        if self.signal_flag.load(Ordering::SeqCst) {
            self.shutdown.request();
        }
        self.shutdown.is_requested()
    }

    /// Records a fatal error (the first one wins) and starts shutdown.
    pub fn fail(&self, message: String) {
        tracing::error!("{message}");
        self.fatal.lock().get_or_insert(message);
        for barrier in &self.barriers {
            barrier.fail();
        }
        self.shutdown.request();
    }

    /// The first fatal error, if any.
    pub fn fatal_error(&self) -> Option<String> {
        self.fatal.lock().clone()
    }

    /// Arrives at `barrier` and waits (polling every 2 ms) until every shard has arrived, or
    /// until a fatal error was recorded. Returns `false` in the second case.
    pub async fn barrier<B: Backend>(&self, backend: &B, barrier: Barrier) -> bool {
        let phase = &self.barriers[barrier as usize];
        let mut state = phase.arrive();
        loop {
            match state {
                PhaseState::Complete => return true,
                PhaseState::Failed => return false,
                PhaseState::Waiting => {}
            }
            backend.sleep(std::time::Duration::from_millis(2)).await;
            state = phase.state();
        }
    }
}
