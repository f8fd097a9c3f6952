//! The internal topic `__transaction_state`: where transaction coordinators keep each
//! transactional id's metadata (Kafka's TransactionLogKey/TransactionLogValue records).
//!
//! Contract (the same as `__consumer_offsets`, `groups::offsets_topic`):
//! - Startup (shard 0, before the registry loads): if the topic's metadata file is missing,
//!   it is written with `transaction.state.log.num.partitions` partitions and
//!   [`stored_overrides`]. An existing topic keeps its partition count, whatever the setting
//!   says now: a transactional id's coordinator is chosen by that count (I62).
//! - Compacted, exempt from size and time retention (`groups::offsets_topic::is_internal`
//!   names it, so the retention timer skips it and the cleaner always compacts it), and
//!   stored with `segment.ms` = `transaction.state.log.segment.ms` so a restart replays the
//!   live keys plus at most that long of transitions.
//! - Only the transaction coordinator hosts write to it; users may read it, not produce to
//!   it, delete it or add partitions to it (as `__consumer_offsets`).

use std::collections::BTreeMap;

use minikafka_core::backend::Backend;

use crate::config::BrokerConfig;
use crate::log::LogError;
use crate::server::internal_topic::{self, InternalTopic};

/// The internal topic's name, as in Kafka.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The topic-level configuration stored with `__transaction_state` when it is created.
pub fn stored_overrides(segment_bytes: u64, segment_ms: i64) -> BTreeMap<String, String> {
    internal_topic::stored_overrides(Some((segment_bytes, segment_ms)))
}

/// Writes `__transaction_state`'s metadata file if it is missing (see the module
/// documentation and [`internal_topic::ensure_stored`]). Returns the partition count the
/// topic has.
pub async fn ensure_stored<B: Backend>(
    backend: &B,
    config: &BrokerConfig,
) -> Result<i32, LogError> {
    let settings = &config.transactions;
    let topic = InternalTopic {
        name: TRANSACTION_STATE_TOPIC,
        partition_count: settings.state_log_num_partitions,
        partitions_setting: Some("transaction.state.log.num.partitions"),
        segment: Some((
            settings.state_log_segment_bytes,
            settings.state_log_segment_ms,
        )),
    };
    internal_topic::ensure_stored(backend, &config.log_dir, &topic).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_overrides_compact_and_disable_retention() {
        let config = crate::config::BrokerConfig::default();
        let t = &config.transactions;
        let overrides = stored_overrides(t.state_log_segment_bytes, t.state_log_segment_ms);
        let log = crate::server::topics::log_config(&config, &overrides).expect("valid");
        assert_eq!(log.retention_ms, None);
        assert_eq!(log.retention_bytes, None);
        assert_eq!(log.segment_ms, Some(600_000));
        assert!(log.cleanup_policy.compact && !log.cleanup_policy.delete);
    }
}
