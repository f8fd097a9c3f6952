//! OffsetForLeaderEpoch (key 23), v2–4: the end offset of a leader epoch, for the clients'
//! truncation checks (KIP-320: librdkafka, the Java client and kafka-python validate their
//! position with it after a leader change or a reset).
//!
//! Contract: a single node leads every partition at epoch [`LEADER_EPOCH`] (0, what Metadata
//! and every stored batch carry) and never truncates an acknowledged record, so:
//! - `current_leader_epoch` (the client's view; -1 = unchecked) above ours:
//!   UNKNOWN_LEADER_EPOCH (75); below ours (other than -1): FENCED_LEADER_EPOCH (74).
//! - `leader_epoch` = ours: our epoch and the log end offset (the high watermark), read on the
//!   partition's owner. Below ours: cannot happen with epoch 0 and is answered like -1.
//!   Above ours, or -1 (UNDEFINED): epoch -1 and offset -1, no error — as Kafka's leader
//!   epoch cache answers an epoch it never had.
//! - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (3). The replica id (v3+) is
//!   ignored: there are no followers.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use minikafka_core::error_code::ErrorCode;

use crate::log::LEADER_EPOCH;
use crate::server::shard_context::{PartitionOps, TopicCatalogue};

/// What to answer for one partition before the log is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EpochCheck {
    /// Refused with this code.
    Refuse(ErrorCode),
    /// Our epoch: answer with the log end offset.
    EndOffset,
    /// An epoch this log never had: epoch -1, offset -1.
    Undefined,
}

/// Judges `current_leader_epoch` and `leader_epoch` against the one epoch a single node has.
fn check(current_leader_epoch: i32, leader_epoch: i32) -> EpochCheck {
    if current_leader_epoch > LEADER_EPOCH {
        return EpochCheck::Refuse(ErrorCode::UNKNOWN_LEADER_EPOCH);
    }
    if current_leader_epoch != -1 && current_leader_epoch < LEADER_EPOCH {
        return EpochCheck::Refuse(ErrorCode::FENCED_LEADER_EPOCH);
    }
    if leader_epoch == LEADER_EPOCH {
        EpochCheck::EndOffset
    } else {
        EpochCheck::Undefined
    }
}

/// Handles the request.
pub async fn handle(
    state: &(impl TopicCatalogue + PartitionOps),
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut lookups = Vec::new();
    for (topic_index, wanted) in request.topics.into_iter().enumerate() {
        let info = state.topic(wanted.topic.0.as_str());
        let mut topic = OffsetForLeaderTopicResult::default();
        topic.topic = wanted.topic.clone();
        for (slot, partition) in wanted.partitions.into_iter().enumerate() {
            let mut entry = EpochEndOffset::default();
            entry.partition = partition.partition;
            entry.leader_epoch = -1;
            entry.end_offset = -1;
            match &info {
                Some(info) if (0..info.partition_count()).contains(&partition.partition) => {
                    match check(partition.current_leader_epoch, partition.leader_epoch) {
                        EpochCheck::Refuse(code) => entry.error_code = code.code(),
                        EpochCheck::Undefined => {}
                        EpochCheck::EndOffset => {
                            let name = info.name.clone();
                            let p = partition.partition;
                            lookups.push(async move {
                                (topic_index, slot, state.describe_partition(name, p).await)
                            });
                        }
                    }
                }
                _ => entry.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code(),
            }
            topic.partitions.push(entry);
        }
        topics.push(topic);
    }
    for (topic_index, slot, described) in futures::future::join_all(lookups).await {
        let entry = &mut topics[topic_index].partitions[slot];
        entry.error_code = described.error_code.code();
        if !described.error_code.is_error() {
            entry.leader_epoch = LEADER_EPOCH;
            entry.end_offset = described.log_end_offset;
        }
    }
    let mut response = OffsetForLeaderEpochResponse::default();
    response.topics = topics;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_epoch_zero_decides_every_answer() {
        assert_eq!(check(-1, 0), EpochCheck::EndOffset);
        assert_eq!(check(0, 0), EpochCheck::EndOffset);
        assert_eq!(check(0, 1), EpochCheck::Undefined);
        assert_eq!(check(-1, -1), EpochCheck::Undefined);
        assert_eq!(
            check(1, 0),
            EpochCheck::Refuse(ErrorCode::UNKNOWN_LEADER_EPOCH)
        );
        assert_eq!(
            check(-2, 0),
            EpochCheck::Refuse(ErrorCode::FENCED_LEADER_EPOCH)
        );
    }
}
