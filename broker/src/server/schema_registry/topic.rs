//! The internal topic `_schemas`: where the built-in schema registry keeps its records, in
//! the Confluent registry's own key and value JSON (`minikafka_schema::records`).
//!
//! Contract:
//! - Startup (shard 0, beside `__consumer_offsets`, before the topic registry loads), only
//!   when `schema.registry.listeners` is set: if the topic's metadata file is missing it is
//!   written with one partition and [`stored_overrides`]. A topic already there is kept as it
//!   is (the registry reads partition 0 only).
//! - Compacted, exempt from size and time retention (as Confluent's `_schemas`): the live
//!   key of every subject version, config and mode stays; a replay reads those plus the
//!   uncleaned tail.
//! - Internal (`offsets_topic::is_internal`): only the registry writes it, through its
//!   shard's append path (so the flush policy applies); users may read it but not produce to
//!   it, delete it or trim it.

use std::collections::BTreeMap;

use minikafka_core::backend::Backend;

use crate::config::BrokerConfig;
use crate::log::LogError;
use crate::server::internal_topic::{self, InternalTopic};

/// The topic's name, as Confluent's default `kafkastore.topic`.
pub const SCHEMAS_TOPIC: &str = "_schemas";

/// The partition the registry reads and writes (the topic has one).
pub const SCHEMAS_PARTITION: i32 = 0;

/// The topic-level configuration stored with `_schemas` when it is created.
pub fn stored_overrides() -> BTreeMap<String, String> {
    internal_topic::stored_overrides(None)
}

/// Writes `_schemas`'s metadata file if the registry is on and the file is missing (see the
/// module documentation and [`internal_topic::ensure_stored`]). Returns whether the topic is
/// there for the registry.
pub async fn ensure_stored<B: Backend>(
    backend: &B,
    config: &BrokerConfig,
) -> Result<bool, LogError> {
    if config.schema_registry_listener.is_none() {
        return Ok(false);
    }
    let topic = InternalTopic {
        name: SCHEMAS_TOPIC,
        partition_count: 1,
        partitions_setting: None,
        segment: None,
    };
    internal_topic::ensure_stored(backend, &config.log_dir, &topic).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_overrides_compact_and_disable_retention() {
        let config = crate::config::BrokerConfig::default();
        let log = crate::server::topics::log_config(&config, &stored_overrides()).expect("valid");
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.retention_bytes, None);
        assert!(log.cleanup_policy.compact && !log.cleanup_policy.delete);
    }
}
