//! Topic administration: loading the registry at startup, creating and deleting topics,
//! adding partitions. Used by CreateTopics, DeleteTopics, CreatePartitions and Metadata's
//! auto-creation.
//!
//! Contract:
//! - Every change holds [`Shared::admin_lock`](super::shared::Shared) for its whole duration,
//!   so changes are serialized across shards.
//! - Create: metadata file saved first (with a fresh topic id under
//!   [`TOPIC_ID_KEY`]), then every partition opened on its owner, then the topic published.
//!   A failure part-way removes what was made. A crash part-way leaves a metadata file whose
//!   missing partitions the next start creates.
//! - Delete: unpublished first, then every partition closed and its directory removed, then
//!   the metadata file removed. A crash part-way leaves a topic with empty partitions.
//! - A change is answered only once durable (I26, docs/DESIGN.md).
//! - Errors are `(Kafka error code, message)`.
//! - Never: publishes a topic before its partitions are open.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use minikafka_core::backend::Backend;
use minikafka_core::wakeup::PartitionSignal;
use uuid::Uuid;

use super::groups::offsets_topic::is_internal;
use super::shard::ShardState;
use super::shard_context::TopicAdmin;
use super::shared::{TopicInfo, RESERVED_CONFIG_PREFIX, TOPIC_ID_KEY};
use crate::config::topic::TopicConfig;
use crate::config::BrokerConfig;
use crate::log::topics::validate_topic_name;
use crate::log::{LogConfig, LogError, TopicMeta, TopicStore};
use minikafka_core::error_code::ErrorCode;

/// A refused topic change: Kafka error code and message.
pub type AdminError = (ErrorCode, String);

/// The topic changes the handlers see: this module's, on this shard (I150).
impl<B: Backend> TopicAdmin for Rc<ShardState<B>> {
    async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, AdminError> {
        create_topic(self, name, partitions, overrides, validate_only).await
    }

    async fn delete_topic(&self, name: &str) -> Result<Uuid, AdminError> {
        delete_topic(self, name).await
    }

    async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        add_partitions(self, name, count, validate_only).await
    }
}

/// The refusal for a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION, 3).
pub fn unknown_topic(name: &str) -> AdminError {
    (
        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
        format!("topic {name} does not exist"),
    )
}

/// The log configuration of a topic: the broker's settings with the topic's overrides
/// (from the settings table, `crate::config::topic`).
pub fn log_config(
    config: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, LogError> {
    crate::config::topic::log_config(config, overrides)
}

/// Checks a topic's requested configuration: no reserved keys, and values the log accepts.
pub fn validate_topic_config(
    config: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, AdminError> {
    for key in overrides.keys() {
        if key.starts_with(RESERVED_CONFIG_PREFIX) {
            return Err((
                ErrorCode::INVALID_CONFIG,
                format!("configuration key {key} is reserved"),
            ));
        }
    }
    log_config(config, overrides).map_err(|e| (ErrorCode::INVALID_CONFIG, e.to_string()))
}

fn name_error(name: &str) -> Option<AdminError> {
    validate_topic_name(name)
        .err()
        .map(|e| (ErrorCode::INVALID_TOPIC_EXCEPTION, e.to_string()))
}

pub(super) fn storage(e: impl std::fmt::Display) -> AdminError {
    (ErrorCode::KAFKA_STORAGE_ERROR, e.to_string())
}

fn new_signals(count: i32) -> Vec<Arc<PartitionSignal>> {
    (0..count)
        .map(|_| Arc::new(PartitionSignal::new()))
        .collect()
}

/// Loads the stored dynamic broker settings, the group configurations and every topic's metadata into the registry
/// (shard 0, at startup). A topic without a stored id gets one, saved before it is published.
pub async fn load_registry<B: Backend>(state: &Rc<ShardState<B>>) -> Result<(), LogError> {
    let dynamic =
        super::dynamic_config::load(&state.backend, &state.data_dir(), &state.shared.config)
            .await
            .map_err(|reason| LogError::BadMetadata {
                path: state
                    .data_dir()
                    .join(super::dynamic_config::DYNAMIC_CONFIG_FILE),
                line: 0,
                reason,
            })?;
    // Keystores altered at run time and stored (I180) serve again; one that no longer loads
    // is logged and the static keystores serve, as Kafka logs and skips a stored dynamic
    // config it cannot apply at startup.
    if !dynamic.keystores.is_empty() {
        match super::keystore_reload::reload(&state.shared.config, dynamic.keystores.clone()) {
            Ok(keystores) => {
                tracing::info!(keystores = ?keystores.locations, "keystores altered at run time restored");
                state.shared.set_reloaded_keystores(keystores);
            }
            Err((_, why)) => tracing::error!(
                "the keystores altered at run time do not load ({why}); serving the static ones"
            ),
        }
    }
    state.shared.set_dynamic_config(dynamic);
    let groups = super::group_configs::load(&state.backend, &state.data_dir())
        .await
        .map_err(|reason| LogError::BadMetadata {
            path: state
                .data_dir()
                .join(super::group_configs::GROUP_CONFIG_FILE),
            line: 0,
            reason,
        })?;
    state.shared.set_group_configs(groups);
    let acls = super::acl_store::load(&state.backend, &state.data_dir())
        .await
        .map_err(|reason| LogError::BadMetadata {
            path: state.data_dir().join(super::acl_store::ACL_FILE),
            line: 0,
            reason,
        })?;
    state.shared.set_acls(acls);
    let scram = super::scram_store::load(&state.backend, &state.data_dir())
        .await
        .map_err(|reason| LogError::BadMetadata {
            path: state
                .data_dir()
                .join(super::scram_store::SCRAM_CREDENTIALS_FILE),
            line: 0,
            reason,
        })?;
    state.shared.set_scram_store(scram);
    let quotas = super::quota_store::load(&state.backend, &state.data_dir())
        .await
        .map_err(|reason| LogError::BadMetadata {
            path: state.data_dir().join(super::quota_store::QUOTA_FILE),
            line: 0,
            reason,
        })?;
    state.shared.quotas.set_configs(quotas);
    let store = TopicStore::open(state.backend.clone(), &state.data_dir()).await?;
    for mut meta in store.load_all().await? {
        let id = match meta
            .config
            .get(TOPIC_ID_KEY)
            .and_then(|s| Uuid::parse_str(s).ok())
        {
            Some(id) => id,
            None => {
                let id = Uuid::new_v4();
                meta.config.insert(TOPIC_ID_KEY.to_string(), id.to_string());
                store.save(&meta).await?;
                id
            }
        };
        let config = TopicConfig::parse(
            &state.shared.effective_config(),
            topic_overrides(&meta.config),
        )
        .map_err(|e| LogError::BadMetadata {
            path: state
                .data_dir()
                .join("topics")
                .join(format!("{}.meta", meta.name)),
            line: 0,
            reason: e.to_string(),
        })?;
        tracing::info!(topic = meta.name, partitions = meta.partition_count, %id, "topic loaded");
        state.shared.publish_topic(Arc::new(TopicInfo {
            name: meta.name,
            id,
            config,
            signals: new_signals(meta.partition_count),
        }));
    }
    Ok(())
}

/// Creates a topic with `partitions` partitions and `overrides`; with `validate_only` checks
/// everything and changes nothing (the returned info then has a nil id).
pub async fn create_topic<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
    partitions: i32,
    overrides: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<Arc<TopicInfo>, AdminError> {
    if let Some(err) = name_error(name) {
        return Err(err);
    }
    if partitions <= 0 {
        return Err((
            ErrorCode::INVALID_PARTITIONS,
            format!("{partitions} partitions: must be positive"),
        ));
    }
    let shared = Arc::clone(&state.shared);
    let log_config = validate_topic_config(&shared.effective_config(), &overrides)?;
    let _admin = shared.admin_lock.lock().await;
    if shared.topic(name).is_some() {
        return Err((
            ErrorCode::TOPIC_ALREADY_EXISTS,
            format!("topic {name} already exists"),
        ));
    }
    if validate_only {
        return Ok(Arc::new(TopicInfo {
            name: name.to_string(),
            id: Uuid::nil(),
            config: TopicConfig::new(overrides, log_config),
            signals: new_signals(partitions),
        }));
    }
    let id = Uuid::new_v4();
    let store = save_topic_meta(state, name, id, partitions, &overrides).await?;
    let info = Arc::new(TopicInfo {
        name: name.to_string(),
        id,
        config: TopicConfig::new(overrides, log_config.clone()),
        signals: new_signals(partitions),
    });
    if let Err(e) = open_partitions(state, &info, 0, &log_config).await {
        for p in 0..partitions {
            let _ = state.remove_partition(name.to_string(), p).await;
        }
        let _ = store.remove(name).await;
        return Err(storage(e));
    }
    shared.publish_topic(Arc::clone(&info));
    tracing::info!(topic = name, partitions, %id, "topic created");
    Ok(info)
}

async fn open_partitions<B: Backend>(
    state: &Rc<ShardState<B>>,
    info: &TopicInfo,
    from: i32,
    log_config: &LogConfig,
) -> Result<(), String> {
    let opens = (from..info.partition_count()).map(|p| {
        state.open_partition(
            info.name.clone(),
            p,
            log_config.clone(),
            Arc::clone(&info.signals[p as usize]),
            false,
        )
    });
    for result in futures::future::join_all(opens).await {
        result?;
    }
    Ok(())
}

/// Refuses a change to an internal topic: no principal holds that right here.
pub(super) fn refuse_internal(name: &str, what: &str) -> Result<(), AdminError> {
    if is_internal(name) {
        return Err((
            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
            format!("the internal topic {name} cannot be {what}"),
        ));
    }
    Ok(())
}

/// Deletes a topic and its data; returns its id.
pub async fn delete_topic<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
) -> Result<Uuid, AdminError> {
    refuse_internal(name, "deleted")?;
    let shared = Arc::clone(&state.shared);
    let _admin = shared.admin_lock.lock().await;
    let info = shared
        .unpublish_topic(name)
        .ok_or_else(|| unknown_topic(name))?;
    let removals =
        (0..info.partition_count()).map(|p| state.remove_partition(info.name.clone(), p));
    let mut failure = None;
    for result in futures::future::join_all(removals).await {
        if let Err(e) = result {
            failure.get_or_insert(e);
        }
    }
    let store = TopicStore::open(state.backend.clone(), &state.data_dir())
        .await
        .map_err(storage)?;
    store.remove(name).await.map_err(storage)?;
    if let Some(e) = failure {
        tracing::error!(topic = name, "deleting partition data: {e}");
        return Err(storage(e));
    }
    tracing::info!(topic = name, "topic deleted");
    Ok(info.id)
}

/// Stores topic `name`'s metadata durably, its id among its settings, before the change is
/// published (I26); gives the store, for undoing a creation.
pub async fn save_topic_meta<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
    id: Uuid,
    partition_count: i32,
    config: &BTreeMap<String, String>,
) -> Result<TopicStore<B>, AdminError> {
    let mut stored = config.clone();
    stored.insert(TOPIC_ID_KEY.to_string(), id.to_string());
    let store = TopicStore::open(state.backend.clone(), &state.data_dir())
        .await
        .map_err(storage)?;
    store
        .save(&TopicMeta {
            name: name.to_string(),
            partition_count,
            config: stored,
        })
        .await
        .map_err(storage)?;
    Ok(store)
}

/// Raises a topic's partition count to `count`.
pub async fn add_partitions<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
    count: i32,
    validate_only: bool,
) -> Result<(), AdminError> {
    refuse_internal(name, "given more partitions")?;
    let shared = Arc::clone(&state.shared);
    let _admin = shared.admin_lock.lock().await;
    let info = shared.topic(name).ok_or_else(|| unknown_topic(name))?;
    let current = info.partition_count();
    if count <= current {
        return Err((
            ErrorCode::INVALID_PARTITIONS,
            format!("topic {name} has {current} partitions; {count} would not increase it"),
        ));
    }
    if validate_only {
        return Ok(());
    }
    let log_config = info.config.log().clone();
    save_topic_meta(state, name, info.id, count, info.config.overrides()).await?;
    let mut signals = info.signals.clone();
    signals.extend(new_signals(count - current));
    let grown = Arc::new(TopicInfo {
        name: info.name.clone(),
        id: info.id,
        config: info.config.clone(),
        signals,
    });
    open_partitions(state, &grown, current, &log_config)
        .await
        .map_err(storage)?;
    shared.publish_topic(grown);
    tracing::info!(topic = name, from = current, to = count, "partitions added");
    Ok(())
}

/// The overrides of a topic as a map without the reserved keys.
pub fn topic_overrides(config: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    config
        .iter()
        .filter(|(k, _)| !k.starts_with(RESERVED_CONFIG_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
