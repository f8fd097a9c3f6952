//! The internal topics the broker's own machines keep their records in
//! (`__consumer_offsets`, `__transaction_state`, `_schemas`): creating one on first start and
//! keeping it as it was created.
//!
//! Contract:
//! - [`ensure_stored`] (shard 0, before the topic registry loads): if the topic's metadata
//!   file is missing, it is written with the spec's partition count and [`stored_overrides`]
//!   (and a fresh topic id); the registry then loads it like any topic. An existing topic
//!   keeps its partition count, whatever the setting says now: a key's coordinator is chosen
//!   by that count, so changing it would strand the records (a warning names the setting).
//! - Every internal topic is compacted and exempt from size and time retention (a restart
//!   replays the live keys); a coordinator's topic also stores `segment.bytes` and
//!   `segment.ms`, so its active segment rolls and gets cleaned and a restart replays at
//!   most that long of history beyond the live keys.

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_core::backend::Backend;

use crate::log::{LogError, TopicMeta, TopicStore};
use crate::server::shared::TOPIC_ID_KEY;

/// How an internal topic is created.
#[derive(Clone, Copy, Debug)]
pub struct InternalTopic<'a> {
    /// The topic's name.
    pub name: &'a str,
    /// Partitions it is created with.
    pub partition_count: i32,
    /// The setting that chose `partition_count`, named in the warning when a stored topic
    /// has another count; `None` for a topic whose count is fixed.
    pub partitions_setting: Option<&'a str>,
    /// `(segment.bytes, segment.ms)` stored with it; `None` leaves the broker's defaults.
    pub segment: Option<(u64, i64)>,
}

/// The topic-level configuration stored with an internal topic when it is created.
pub fn stored_overrides(segment: Option<(u64, i64)>) -> BTreeMap<String, String> {
    let mut overrides: BTreeMap<String, String> = [
        // Compacted, as in Kafka: startup replays the live keys, not their history.
        ("cleanup.policy", "compact"),
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if let Some((segment_bytes, segment_ms)) = segment {
        overrides.insert("segment.bytes".to_string(), segment_bytes.to_string());
        overrides.insert("segment.ms".to_string(), segment_ms.to_string());
    }
    overrides
}

/// Writes `topic`'s metadata file under `log_dir` if it is missing (see the module
/// documentation). Returns the partition count the topic has.
pub async fn ensure_stored<B: Backend>(
    backend: &B,
    log_dir: &Path,
    topic: &InternalTopic<'_>,
) -> Result<i32, LogError> {
    let store = TopicStore::open(backend.clone(), log_dir).await?;
    if let Some(meta) = store.load(topic.name).await? {
        if let Some(setting) = topic.partitions_setting {
            if meta.partition_count != topic.partition_count {
                tracing::warn!(
                    partitions = meta.partition_count,
                    setting = topic.partition_count,
                    "{} keeps its partition count; {setting} applies only when it is created",
                    topic.name
                );
            }
        }
        return Ok(meta.partition_count);
    }
    let mut stored = stored_overrides(topic.segment);
    stored.insert(TOPIC_ID_KEY.to_string(), uuid::Uuid::new_v4().to_string());
    let meta = TopicMeta {
        name: topic.name.to_string(),
        partition_count: topic.partition_count,
        config: stored,
    };
    store.save(&meta).await?;
    tracing::info!(
        partitions = meta.partition_count,
        "created the internal topic {}",
        topic.name
    );
    Ok(meta.partition_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_overrides_compact_disable_retention_and_keep_the_segment_settings() {
        let config = crate::config::BrokerConfig::default();
        let log =
            crate::server::topics::log_config(&config, &stored_overrides(None)).expect("valid");
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.retention_bytes, None);
        assert!(log.cleanup_policy.compact && !log.cleanup_policy.delete);
        let log = crate::server::topics::log_config(
            &config,
            &stored_overrides(Some((1_048_576, 600_000))),
        )
        .expect("valid");
        assert_eq!(log.segment_bytes, 1_048_576);
        assert_eq!(log.segment_ms, Some(600_000));
        assert!(log.cleanup_policy.compact && !log.cleanup_policy.delete);
    }
}
