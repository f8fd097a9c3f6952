//! The internal topic `__consumer_offsets`: where group coordinators keep committed offsets
//! and group metadata as records.
//!
//! Contract:
//! - Startup (shard 0, before the registry loads): if the topic's metadata file is missing,
//!   it is written with `offsets.topic.num.partitions` partitions and [`stored_overrides`];
//!   the registry then loads it like any topic and every shard opens its partitions (empty
//!   partitions cost one directory and one segment each, created in parallel across shards).
//!   An existing topic keeps its partition count, whatever the setting says now: a group's
//!   partition is chosen by that count, so changing it would strand committed offsets.
//! - It is exempt from size and time retention: its stored overrides say `retention.ms=-1`
//!   and `retention.bytes=-1`, and the retention timer skips it regardless ([`is_internal`]).
//! - It is compacted and stored with `segment.ms` = `offsets.topic.segment.ms`, so its active
//!   segment rolls and gets cleaned, and startup replays the live keys plus at most that long
//!   of commits (docs/DESIGN.md, "`__consumer_offsets` at startup").
//! - Only the coordinator hosts write to it (through the shard's append path, so the flush
//!   policy and group commit apply). Users may read it (Kafka allows that too) but not
//!   produce to it (INVALID_TOPIC_EXCEPTION, as Kafka answers), delete it or add partitions
//!   to it (TOPIC_AUTHORIZATION_FAILED: no principal holds that right here). Metadata marks
//!   it `is_internal`.

use std::collections::BTreeMap;

use minikafka_core::backend::Backend;

use crate::config::BrokerConfig;
use crate::log::LogError;
use crate::server::internal_topic::{self, InternalTopic};
use crate::server::schema_registry::topic::SCHEMAS_TOPIC;
use crate::server::txns::state_topic::TRANSACTION_STATE_TOPIC;

/// The internal topic's name, as in Kafka.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Whether `topic` is an internal topic: `__consumer_offsets`, `__transaction_state`
/// (`txns::state_topic`, protected the same way), or the schema registry's `_schemas`
/// (written only by the registry, never produced to by users).
pub fn is_internal(topic: &str) -> bool {
    topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC || topic == SCHEMAS_TOPIC
}

/// The topic-level configuration stored with `__consumer_offsets` when it is created.
///
/// `segment_ms` bounds what a restart replays beyond the live keys: only sealed segments are
/// cleaned, and at Kafka's 100 MiB segments and 7-day roll a busy group's history would stay
/// in the active segment (replayed whole) for days.
pub fn stored_overrides(segment_bytes: u64, segment_ms: i64) -> BTreeMap<String, String> {
    internal_topic::stored_overrides(Some((segment_bytes, segment_ms)))
}

/// Writes `__consumer_offsets`'s metadata file if it is missing (see the module
/// documentation and [`internal_topic::ensure_stored`]). Returns the partition count the
/// topic has.
pub async fn ensure_stored<B: Backend>(
    backend: &B,
    config: &BrokerConfig,
) -> Result<i32, LogError> {
    let topic = InternalTopic {
        name: OFFSETS_TOPIC,
        partition_count: config.offsets_topic_num_partitions,
        partitions_setting: Some("offsets.topic.num.partitions"),
        segment: Some((
            config.offsets_topic_segment_bytes,
            config.offsets_topic_segment_ms,
        )),
    };
    internal_topic::ensure_stored(backend, &config.log_dir, &topic).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_offsets_topic_is_internal() {
        assert!(is_internal("__consumer_offsets"));
        assert!(is_internal("__transaction_state"));
        assert!(is_internal("_schemas"));
        assert!(!is_internal("__consumer_offsets2"));
        assert!(!is_internal("orders"));
    }

    #[test]
    fn stored_overrides_disable_retention() {
        let config = crate::config::BrokerConfig::default();
        let overrides = stored_overrides(
            config.offsets_topic_segment_bytes,
            config.offsets_topic_segment_ms,
        );
        let log = crate::server::topics::log_config(&config, &overrides).expect("valid");
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.retention_bytes, None);
        assert_eq!(log.segment_bytes, 104_857_600);
        // Rolled within ten minutes, not Kafka's seven days, so the cleaner reaches it.
        assert_eq!(log.segment_ms, Some(600_000));
        assert!(log.cleanup_policy.compact && !log.cleanup_policy.delete);
    }
}
