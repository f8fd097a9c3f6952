//! Configuration changes, applied to the live partitions and stored: AlterConfigs (the
//! whole set replaced) and IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT), for
//! topics and for the dynamic broker settings.
//!
//! Contract:
//! - [`altered`] is pure: a resource's stored settings and an [`Alteration`] give the new
//!   settings, or Kafka's error (a key twice: INVALID_REQUEST; a null value to set:
//!   INVALID_REQUEST; APPEND/SUBTRACT on a setting that is not a list: INVALID_CONFIG; an
//!   unknown operation: INVALID_REQUEST).
//! - Topic: every name set must be a Kafka topic configuration with a value this broker keeps
//!   its word on (`check_topic_config`: INVALID_CONFIG naming the key), reserved `minikafka.`
//!   names are refused, and the result must make a valid log configuration. Then, under the
//!   admin lock: the metadata file is saved (atomic, durable), the registry entry replaced,
//!   and every partition's live log reconfigured on its owner. `validate_only` stops before
//!   the save. The internal offsets topic is refused.
//! - Broker: only the dynamic rows of the settings table
//!   ([`dynamic_broker_keys`](crate::config::table::dynamic_broker_keys)), in the scope the resource name picks (`node.id`: this broker; empty: cluster default); a
//!   read-only setting is INVALID_REQUEST, a name that is no broker setting INVALID_CONFIG.
//!   The new state must apply, and every topic's log configuration under it must be valid;
//!   then it is stored (atomic, durable), published, every topic's registry entry republished
//!   with its configuration parsed under it, and every live partition reconfigured.
//! - Broker keystores (`ssl.keystore.location`, per listener too) are altered on their own:
//!   loaded and checked, stored with the dynamic broker settings (I180), then used by new
//!   handshakes (`keystore_reload`, I144,
//!   I145).
//! - A crash after the store and before the reconfiguration loses nothing: startup opens every
//!   partition with the stored settings.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use minikafka_core::backend::Backend;
use minikafka_core::error_code::ErrorCode;

use super::dynamic_config::{self, check_dynamic_key, DynamicKeyError, Scope};
use super::group_configs;
use super::keystore_reload;
use super::shard::ShardState;
use super::shared::{TopicInfo, RESERVED_CONFIG_PREFIX};
use super::topics::{
    log_config, refuse_internal, save_topic_meta, storage, unknown_topic, validate_topic_config,
    AdminError,
};
use crate::config::topic::{
    check_topic_config, topic_config_status, topic_list_default, TopicConfig,
};
use crate::log::LogConfig;

/// One operation of IncrementalAlterConfigs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// SET (0): the value replaces the current one.
    Set,
    /// DELETE (1): back to the default.
    Delete,
    /// APPEND (2): add the value's items to a list setting.
    Append,
    /// SUBTRACT (3): remove the value's items from a list setting.
    Subtract,
}

impl OpKind {
    /// The operation Kafka's code names; `None` for an unknown code.
    pub fn from_code(code: i8) -> Option<OpKind> {
        match code {
            0 => Some(OpKind::Set),
            1 => Some(OpKind::Delete),
            2 => Some(OpKind::Append),
            3 => Some(OpKind::Subtract),
            _ => None,
        }
    }
}

/// One requested change of one setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigOp {
    /// The setting's name.
    pub key: String,
    /// What to do; `None` for an operation code Kafka does not define.
    pub op: Option<OpKind>,
    /// The value (null for DELETE, and allowed to be null only there).
    pub value: Option<String>,
}

/// What a request asks of one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alteration {
    /// AlterConfigs: these settings replace all the stored ones (a null value is left out).
    Replace(Vec<(String, Option<String>)>),
    /// IncrementalAlterConfigs: these operations, on the stored settings.
    Incremental(Vec<ConfigOp>),
}

impl Alteration {
    /// The names this alteration sets to a value (to be checked), in request order.
    fn keys_set(&self, after: &BTreeMap<String, String>) -> Vec<String> {
        match self {
            Alteration::Replace(pairs) => pairs.iter().map(|(k, _)| k.clone()).collect(),
            Alteration::Incremental(ops) => ops
                .iter()
                .filter(|op| op.op != Some(OpKind::Delete) && after.contains_key(&op.key))
                .map(|op| op.key.clone())
                .collect(),
        }
    }

    /// Every name the alteration mentions.
    fn keys(&self) -> Vec<&str> {
        match self {
            Alteration::Replace(pairs) => pairs.iter().map(|(k, _)| k.as_str()).collect(),
            Alteration::Incremental(ops) => ops.iter().map(|op| op.key.as_str()).collect(),
        }
    }
}

fn invalid_request(message: String) -> AdminError {
    (ErrorCode::INVALID_REQUEST, message)
}

fn invalid_config(message: String) -> AdminError {
    (ErrorCode::INVALID_CONFIG, message)
}

/// The settings after `alteration` of `current`. `list_default` gives, for a setting whose
/// value is a comma-separated list, its default value (APPEND and SUBTRACT start from it
/// when nothing is stored, as Kafka's do); `None` for a setting that is not a list.
pub fn altered(
    current: &BTreeMap<String, String>,
    alteration: &Alteration,
    list_default: impl Fn(&str) -> Option<&'static str>,
) -> Result<BTreeMap<String, String>, AdminError> {
    let mut seen = BTreeSet::new();
    for key in alteration.keys() {
        if !seen.insert(key) {
            return Err(invalid_request(format!(
                "configuration {key} appears more than once for the resource"
            )));
        }
    }
    match alteration {
        Alteration::Replace(pairs) => Ok(pairs
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
            .collect()),
        Alteration::Incremental(ops) => {
            let mut out = current.clone();
            for op in ops {
                let key = op.key.as_str();
                let Some(kind) = op.op else {
                    return Err(invalid_request(format!(
                        "unknown configuration operation for {key}"
                    )));
                };
                if kind == OpKind::Delete {
                    out.remove(key);
                    continue;
                }
                let Some(value) = op.value.as_deref() else {
                    return Err(invalid_request(format!(
                        "null value not supported for {key}"
                    )));
                };
                match kind {
                    OpKind::Set => {
                        out.insert(key.to_string(), value.to_string());
                    }
                    OpKind::Append | OpKind::Subtract => {
                        let Some(default) = list_default(key) else {
                            let verb = if kind == OpKind::Append {
                                "append"
                            } else {
                                "subtract"
                            };
                            return Err(invalid_config(format!(
                                "config value {verb} is not allowed for config key {key}: it is not a list"
                            )));
                        };
                        let old = out.get(key).map_or(default, String::as_str);
                        let mut items: Vec<String> = split_list(old);
                        let given = split_list(value);
                        if kind == OpKind::Append {
                            for item in given {
                                if !items.contains(&item) {
                                    items.push(item);
                                }
                            }
                        } else {
                            items.retain(|item| !given.contains(item));
                        }
                        out.insert(key.to_string(), items.join(","));
                    }
                    OpKind::Delete => {}
                }
            }
            Ok(out)
        }
    }
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Checks the names and values a topic alteration sets, and the names it deletes.
fn check_topic_keys(
    alteration: &Alteration,
    after: &BTreeMap<String, String>,
) -> Result<(), AdminError> {
    for key in alteration.keys() {
        if key.starts_with(RESERVED_CONFIG_PREFIX) {
            return Err(invalid_config(format!(
                "configuration key {key} is reserved"
            )));
        }
        if topic_config_status(key).is_none() {
            return Err(invalid_config(format!(
                "invalid log configuration {key}: is not a topic configuration"
            )));
        }
    }
    for key in alteration.keys_set(after) {
        let value = after.get(&key).map_or("", String::as_str);
        check_topic_config(&key, value).map_err(|e| invalid_config(e.to_string()))?;
    }
    Ok(())
}

/// What AlterConfigs and IncrementalAlterConfigs ask of their shard (I150): a change of one
/// stored resource. It lives beside [`Alteration`], which `shard_context` cannot name
/// without reaching the shard (this module does).
#[allow(async_fn_in_trait)] // A shard's futures stay on its thread: no `Send` bound wanted.
pub trait ConfigAdmin {
    /// [`alter_topic`].
    async fn alter_topic(
        &self,
        name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError>;
    /// [`alter_broker`].
    async fn alter_broker(
        &self,
        resource_name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError>;
    /// [`alter_group`].
    async fn alter_group(
        &self,
        name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError>;
}

impl<B: Backend> ConfigAdmin for Rc<ShardState<B>> {
    async fn alter_topic(
        &self,
        name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        alter_topic(self, name, alteration, validate_only).await
    }

    async fn alter_broker(
        &self,
        resource_name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        alter_broker(self, resource_name, alteration, validate_only).await
    }

    async fn alter_group(
        &self,
        name: &str,
        alteration: &Alteration,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        alter_group(self, name, alteration, validate_only).await
    }
}

/// Alters topic `name`'s configuration (see the module documentation).
pub async fn alter_topic<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
    alteration: &Alteration,
    validate_only: bool,
) -> Result<(), AdminError> {
    refuse_internal(name, "reconfigured")?;
    let shared = Arc::clone(&state.shared);
    let _admin = shared.admin_lock.lock().await;
    let info = shared.topic(name).ok_or_else(|| unknown_topic(name))?;
    let after = altered(info.config.overrides(), alteration, topic_list_default)?;
    check_topic_keys(alteration, &after)?;
    let log = validate_topic_config(&shared.effective_config(), &after)?;
    if validate_only {
        return Ok(());
    }
    save_topic_meta(state, name, info.id, info.partition_count(), &after).await?;
    let altered_info = Arc::new(TopicInfo {
        name: info.name.clone(),
        id: info.id,
        config: TopicConfig::new(after, log.clone()),
        signals: info.signals.clone(),
    });
    shared.publish_topic(Arc::clone(&altered_info));
    reconfigure_all(state, &[(altered_info, log)]).await?;
    tracing::info!(topic = name, "topic configuration altered");
    Ok(())
}

/// The dynamic scope a broker resource name picks.
fn broker_scope(resource_name: &str, node_id: i32) -> Result<Scope, AdminError> {
    if resource_name.is_empty() {
        Ok(Scope::ClusterDefault)
    } else if resource_name == node_id.to_string() {
        Ok(Scope::Broker)
    } else {
        Err(invalid_request(format!(
            "this broker is node {node_id}, not {resource_name}"
        )))
    }
}

/// Alters the dynamic broker settings (see the module documentation).
pub async fn alter_broker<B: Backend>(
    state: &Rc<ShardState<B>>,
    resource_name: &str,
    alteration: &Alteration,
    validate_only: bool,
) -> Result<(), AdminError> {
    let shared = Arc::clone(&state.shared);
    let scope = broker_scope(resource_name, shared.config.node_id)?;
    let keys = alteration.keys();
    let keystore_keys = keys
        .iter()
        .filter(|k| keystore_reload::is_keystore_key(&shared.config, k))
        .count();
    if keystore_keys > 0 {
        if keystore_keys != keys.len() {
            return Err(invalid_request(
                "alter ssl.keystore.location in a request of its own".into(),
            ));
        }
        if scope != Scope::Broker {
            return Err(invalid_request(format!(
                "a keystore is altered per broker: name the resource {}",
                shared.config.node_id
            )));
        }
        let _admin = shared.admin_lock.lock().await;
        let current = shared.reloaded_keystores();
        let locations = altered(&current.locations, alteration, |_| None)?;
        let next = keystore_reload::reload(&shared.config, locations)?;
        if !validate_only {
            // Stored before it is used, as Kafka stores a dynamic broker config: a restart
            // serves the same keystores (I180).
            let mut dynamic = (*shared.dynamic_config()).clone();
            dynamic.keystores = next.locations.clone();
            dynamic_config::save(&state.backend, &state.data_dir(), &dynamic)
                .await
                .map_err(storage)?;
            shared.set_dynamic_config(dynamic);
            for (listener, tls) in shared.config.listeners.iter().zip(&next.tls) {
                if let Some(tls) = tls {
                    tracing::info!(listener = &*listener.name, keystore = %tls.keystore, "TLS keystore reloaded");
                }
            }
            shared.set_reloaded_keystores(next);
        }
        return Ok(());
    }
    for key in keys {
        check_dynamic_key(key).map_err(|e| match e {
            DynamicKeyError::ReadOnly(_) => invalid_request(e.to_string()),
            DynamicKeyError::Unknown(_) => invalid_config(e.to_string()),
        })?;
    }
    let _admin = shared.admin_lock.lock().await;
    let dynamic = shared.dynamic_config();
    let settings = altered(dynamic.scope(scope), alteration, |_| None)?;
    let next = dynamic.with_scope(scope, settings);
    let effective = dynamic_config::apply(&shared.config, &next).map_err(invalid_config)?;
    let mut logs = Vec::new();
    for topic in shared.all_topics() {
        let log = log_config(&effective, topic.config.overrides())
            .map_err(|e| invalid_config(format!("topic {}: {e}", topic.name)))?;
        logs.push((topic, log));
    }
    if validate_only {
        return Ok(());
    }
    dynamic_config::save(&state.backend, &state.data_dir(), &next)
        .await
        .map_err(storage)?;
    shared.set_dynamic_config(next);
    let logs: Vec<(Arc<TopicInfo>, LogConfig)> = logs
        .into_iter()
        .map(|(topic, log)| {
            let reparsed = Arc::new(TopicInfo {
                name: topic.name.clone(),
                id: topic.id,
                config: TopicConfig::new(topic.config.overrides().clone(), log.clone()),
                signals: topic.signals.clone(),
            });
            shared.publish_topic(Arc::clone(&reparsed));
            (reparsed, log)
        })
        .collect();
    reconfigure_all(state, &logs).await?;
    tracing::info!(?scope, "dynamic broker configuration altered");
    Ok(())
}

/// Alters group `name`'s configuration: the settings after the alteration must check
/// ([`group_configs::check`]: INVALID_CONFIG naming the key); then, under the admin lock,
/// they are stored (atomic, durable) and published. An empty name is INVALID_REQUEST.
pub async fn alter_group<B: Backend>(
    state: &Rc<ShardState<B>>,
    name: &str,
    alteration: &Alteration,
    validate_only: bool,
) -> Result<(), AdminError> {
    if name.is_empty() {
        return Err(invalid_request("group name must not be empty".into()));
    }
    if let Some(key) = alteration
        .keys()
        .into_iter()
        .find(|k| !group_configs::GROUP_KEYS.contains(k))
    {
        return Err(invalid_config(format!("unknown group config name: {key}")));
    }
    let shared = Arc::clone(&state.shared);
    let _admin = shared.admin_lock.lock().await;
    let configs = shared.group_configs();
    let empty = BTreeMap::new();
    let current = configs.by_group.get(name).unwrap_or(&empty);
    let after = altered(current, alteration, |_| None)?;
    group_configs::check(&after, &shared.effective_config()).map_err(invalid_config)?;
    if validate_only {
        return Ok(());
    }
    let next = configs.with_group(name, after);
    group_configs::save(&state.backend, &state.data_dir(), &next)
        .await
        .map_err(storage)?;
    shared.set_group_configs(next);
    tracing::info!(group = name, "group configuration altered");
    Ok(())
}

/// Reconfigures every partition of each topic on its owner; the first failure.
async fn reconfigure_all<B: Backend>(
    state: &Rc<ShardState<B>>,
    topics: &[(Arc<TopicInfo>, LogConfig)],
) -> Result<(), AdminError> {
    let calls = topics.iter().flat_map(|(info, log)| {
        (0..info.partition_count())
            .map(move |p| state.reconfigure_partition(info.name.clone(), p, log.clone()))
    });
    for result in futures::future::join_all(calls).await {
        result.map_err(|e| {
            (
                ErrorCode::UNKNOWN_SERVER_ERROR,
                format!(
                    "stored, but a live partition was not reconfigured (a restart applies it): {e}"
                ),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn op(key: &str, op: i8, value: Option<&str>) -> ConfigOp {
        ConfigOp {
            key: key.into(),
            op: OpKind::from_code(op),
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn replace_drops_what_it_does_not_name() {
        let current = map(&[("retention.ms", "1"), ("segment.bytes", "2048")]);
        let alteration = Alteration::Replace(vec![
            ("retention.ms".into(), Some("5".into())),
            ("max.message.bytes".into(), None),
        ]);
        let after = altered(&current, &alteration, topic_list_default).expect("valid");
        assert_eq!(after, map(&[("retention.ms", "5")]));
    }

    #[test]
    fn incremental_operations_follow_kafka() {
        let current = map(&[("retention.ms", "1"), ("segment.bytes", "2048")]);
        let alteration = Alteration::Incremental(vec![
            op("retention.ms", 0, Some("9")),
            op("segment.bytes", 1, None),
            op("cleanup.policy", 2, Some("compact")),
            op("leader.replication.throttled.replicas", 2, Some("0:1,0:2")),
        ]);
        let after = altered(&current, &alteration, topic_list_default).expect("valid");
        assert_eq!(
            after,
            map(&[
                ("cleanup.policy", "delete,compact"),
                ("leader.replication.throttled.replicas", "0:1,0:2"),
                ("retention.ms", "9"),
            ])
        );
        let subtract = Alteration::Incremental(vec![
            op("cleanup.policy", 3, Some("delete")),
            op("leader.replication.throttled.replicas", 3, Some("0:1")),
        ]);
        let after = altered(&after, &subtract, topic_list_default).expect("valid");
        assert_eq!(
            after.get("cleanup.policy").map(String::as_str),
            Some("compact")
        );
        assert_eq!(
            after
                .get("leader.replication.throttled.replicas")
                .map(String::as_str),
            Some("0:2")
        );
    }

    #[test]
    fn refusals_carry_kafkas_codes() {
        let current = BTreeMap::new();
        let cases = [
            (
                Alteration::Incremental(vec![op("retention.ms", 2, Some("1"))]),
                ErrorCode::INVALID_CONFIG,
            ),
            (
                Alteration::Incremental(vec![op("retention.ms", 0, None)]),
                ErrorCode::INVALID_REQUEST,
            ),
            (
                Alteration::Incremental(vec![op("retention.ms", 7, Some("1"))]),
                ErrorCode::INVALID_REQUEST,
            ),
            (
                Alteration::Incremental(vec![
                    op("retention.ms", 0, Some("1")),
                    op("retention.ms", 1, None),
                ]),
                ErrorCode::INVALID_REQUEST,
            ),
            (
                Alteration::Replace(vec![
                    ("retention.ms".into(), Some("1".into())),
                    ("retention.ms".into(), Some("2".into())),
                ]),
                ErrorCode::INVALID_REQUEST,
            ),
        ];
        for (alteration, code) in cases {
            let err = altered(&current, &alteration, topic_list_default).expect_err("refused");
            assert_eq!(err.0, code, "{alteration:?}: {}", err.1);
            assert!(err.1.contains("retention.ms"), "{}", err.1);
        }
    }

    #[test]
    fn topic_keys_are_checked_by_name_and_value() {
        let unknown = Alteration::Incremental(vec![op("retention.msec", 0, Some("1"))]);
        let after = altered(&BTreeMap::new(), &unknown, topic_list_default).expect("pure");
        let err = check_topic_keys(&unknown, &after).expect_err("unknown");
        assert_eq!(err.0, ErrorCode::INVALID_CONFIG);
        assert!(err.1.contains("retention.msec"), "{}", err.1);
        let reserved = Alteration::Incremental(vec![op("minikafka.topic.id", 1, None)]);
        assert_eq!(
            check_topic_keys(&reserved, &BTreeMap::new()).map_err(|e| e.0),
            Err(ErrorCode::INVALID_CONFIG)
        );
        let refused = Alteration::Incremental(vec![op("flush.messages", 0, Some("1"))]);
        let after = altered(&BTreeMap::new(), &refused, topic_list_default).expect("pure");
        assert!(check_topic_keys(&refused, &after).is_err());
        // Deleting a known name needs no value check.
        let delete = Alteration::Incremental(vec![op("compression.type", 1, None)]);
        assert!(check_topic_keys(&delete, &BTreeMap::new()).is_ok());
    }

    #[test]
    fn broker_scopes_by_resource_name() {
        assert_eq!(broker_scope("", 3), Ok(Scope::ClusterDefault));
        assert_eq!(broker_scope("3", 3), Ok(Scope::Broker));
        assert_eq!(
            broker_scope("4", 3).map_err(|e| e.0),
            Err(ErrorCode::INVALID_REQUEST)
        );
    }
}
