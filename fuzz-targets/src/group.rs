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

/// One `mk mirror` progress record as the mirror reads it back from the target's
/// `mk-mirror.progress` topic (`minikafka_client::mirror::offset_map`): `[key length: u8][key]
/// [value]`. Whatever decodes re-encodes to the same progress, and applying it to an offset map
/// never panics; translations stay at or below the window's end for offsets past it.
pub fn mirror_progress(data: &[u8]) {
    use minikafka_client::mirror::offset_map::{parse_progress_key, PartitionMap, Progress};
    let mut input = Input::new(data);
    let key_len = usize::from(input.u8());
    let rest = input.rest();
    let (key, value) = rest.split_at(key_len.min(rest.len()));
    if let Some(tp) = parse_progress_key(key) {
        assert_eq!(
            parse_progress_key(minikafka_client::mirror::offset_map::progress_key(&tp).as_bytes()),
            Some(tp)
        );
    }
    if let Ok(progress) = Progress::decode(value) {
        let again = Progress::decode(progress.encode().as_bytes()).expect("re-encoded decodes");
        assert_eq!(again, progress);
        let mut map = PartitionMap::default();
        map.apply(&progress);
        assert_eq!(
            map.translate(progress.next_source),
            Some(progress.next_target)
        );
        for run in &progress.runs {
            assert_eq!(map.translate(run.source), Some(run.target));
        }
    }
}
