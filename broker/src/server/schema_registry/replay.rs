//! Reading `_schemas` back at startup into the registry machine (I50, I58).
//!
//! Contract:
//! - [`replay_log`] feeds every keyed record of the partition, in offset order, to
//!   `Registry::replay`, through [`replay_partition`] (which bounds each read and always
//!   advances).
//! - Skipped, each with a warning line and counted, never stopping the start: a record the
//!   machine refuses (not Confluent's JSON, over the bounds, contradicting the state: I51,
//!   I52), a record without a key, a compressed batch (the registry never writes one).
//!   Control batches are passed over silently. A batch the log cannot read ends the replay
//!   with a warning (the log validated every batch on the way in and at recovery).

use minikafka_core::backend::Backend;
use minikafka_schema::Registry;

use super::topic::{SCHEMAS_PARTITION, SCHEMAS_TOPIC};
use crate::log::replay::{replay_partition, ReplayRecord, ReplayStats};
use crate::log::{LogError, PartitionLog};

/// Replays `log` into `registry` (see the module documentation).
pub async fn replay_log<B: Backend>(
    log: &PartitionLog<B>,
    registry: &mut Registry,
) -> Result<ReplayStats, LogError> {
    replay_partition(
        log,
        SCHEMAS_TOPIC,
        SCHEMAS_PARTITION,
        &mut |r: ReplayRecord<'_>| registry.replay(r.key, r.value).map_err(|e| e.to_string()),
    )
    .await
}
