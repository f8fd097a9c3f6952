//! Targets for the consumer-group codecs: the `__consumer_offsets` records read back at
//! startup (`core::group::records`, `core::group::consumer_records`) and the consumer-protocol
//! subscription and assignment a group leader writes for every member
//! (`minikafka_client::group::member_metadata`). All are untrusted bytes (a damaged log, a
//! hostile member) and must be refused with an error, never a panic or an allocation by a
//! declared count (I10).

use minikafka_client::group::member_metadata::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use minikafka_core::group::consumer_records::ConsumerGroupRecord;
use minikafka_core::group::records::{GroupMetadataValue, OffsetCommitValue, RecordKey};

use crate::input::Input;

/// One `__consumer_offsets` record: `[flags: u8][key length: u16][key][value]`; flag bit 0
/// makes it a tombstone (no value). Asserts that whatever decodes re-encodes to something that
/// decodes to the same value, for the classic keys and values and the consumer-protocol
/// (KIP-848) records alike.
pub fn group_records(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let key_len = usize::from(input.u16());
    let rest = input.rest();
    let (key, value) = rest.split_at(key_len.min(rest.len()));
    let value = (flags & 1 == 0).then_some(value);

    if let Ok(decoded) = RecordKey::decode(key) {
        if !matches!(decoded, RecordKey::Consumer { .. }) {
            assert_eq!(RecordKey::decode(&decoded.encode()), Ok(decoded));
        }
    }
    if let Some(value) = value {
        if let Ok(commit) = OffsetCommitValue::decode(value) {
            assert_eq!(OffsetCommitValue::decode(&commit.encode()), Ok(commit));
        }
        if let Ok(group) = GroupMetadataValue::decode(value) {
            assert_eq!(GroupMetadataValue::decode(&group.encode()), Ok(group));
        }
    }
    if let Ok(record) = ConsumerGroupRecord::decode(key, value) {
        let key_again = record.encode_key();
        let value_again = record.encode_value();
        assert_eq!(
            ConsumerGroupRecord::decode(&key_again, value_again.as_deref()),
            Ok(record)
        );
    }
}

/// A consumer-protocol blob, read both as a subscription (JoinGroup metadata) and as an
/// assignment (SyncGroup): whatever decodes round-trips at the current version.
/// Partition lists (owned partitions, assignments) are sets: the encoder writes them grouped by
/// topic and sorted, so round trips compare them sorted.
pub fn consumer_protocol(data: &[u8]) {
    let key = |tp: &minikafka_client::TopicPartition| (tp.topic.clone(), tp.partition);
    if let Ok(mut subscription) = decode_subscription(data) {
        let again = encode_subscription(&subscription, 3);
        let mut decoded = decode_subscription(&again).expect("re-encoded subscription decodes");
        subscription.owned_partitions.sort_by_key(key);
        decoded.owned_partitions.sort_by_key(key);
        assert_eq!(decoded, subscription);
    }
    if let Ok(mut assignment) = decode_assignment(data) {
        let again = encode_assignment(&assignment, 3);
        let mut decoded = decode_assignment(&again).expect("re-encoded assignment decodes");
        assignment.partitions.sort_by_key(key);
        decoded.partitions.sort_by_key(key);
        assert_eq!(decoded, assignment);
    }
}
