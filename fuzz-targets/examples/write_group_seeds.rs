//! Writes the seed corpora of the group targets (`fuzz/corpus/group_records/` and
//! `fuzz/corpus/consumer_protocol/`): `__consumer_offsets` records as the coordinator encodes
//! them, and consumer-protocol blobs as `kafka-protocol` (Apache Kafka's schemas) encodes them
//! at every version. The broker does not serve group requests to real clients yet, so these
//! stand in for captures. Run: `cargo run -p minikafka-fuzz-targets --example write_group_seeds`.

use std::path::Path;

use bytes::BytesMut;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedPartitions;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use minikafka_core::group::consumer_records::{
    ConsumerGroupRecord, CurrentMemberAssignmentValue, GroupMetadataValue as EpochValue,
    MemberMetadataValue, MemberState, PartitionMetadataValue, PartitionRacks, RecordKind,
    TopicMetadataEntry, TopicPartitions,
};
use minikafka_core::group::records::{
    group_metadata_key, offset_commit_key, GroupMetadataValue, MemberMetadata, OffsetCommitValue,
};

/// `[flags][key length: u16][key][value]`, the `group_records` input layout.
fn record_input(key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![u8::from(value.is_none())];
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value.unwrap_or_default());
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus folder");
    std::fs::write(dir.join(name), bytes).expect("seed file");
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let records = corpus.join("group_records");
    let commit = OffsetCommitValue {
        offset: 42,
        leader_epoch: 3,
        metadata: "m".into(),
        commit_timestamp: 1_700_000_000_000,
        expire_timestamp: None,
    };
    let key = offset_commit_key("orders-app", "orders", 2);
    write(
        &records,
        "offset-commit",
        &record_input(&key, Some(&commit.encode())),
    );
    write(
        &records,
        "offset-commit-tombstone",
        &record_input(&key, None),
    );
    let expiring = OffsetCommitValue {
        expire_timestamp: Some(1_700_000_600_000),
        ..commit
    };
    write(
        &records,
        "offset-commit-expiring",
        &record_input(&key, Some(&expiring.encode())),
    );
    let member = |id: &str| MemberMetadata {
        member_id: id.into(),
        group_instance_id: Some("static-1".into()),
        client_id: "rdkafka".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 300_000,
        session_timeout_ms: 45_000,
        subscription: vec![0, 3, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's'],
        assignment: vec![0, 3, 0, 0, 0, 0],
    };
    let group = GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 7,
        protocol: Some("range".into()),
        leader: Some("m-1".into()),
        current_state_timestamp: 1_700_000_000_000,
        members: vec![member("m-1"), member("m-2")],
    };
    let gkey = group_metadata_key("orders-app");
    for version in 0..=4 {
        let value = group.encode_version(version);
        write(
            &records,
            &format!("group-metadata-v{version}"),
            &record_input(&gkey, Some(&value)),
        );
    }
    let topic_id = *b"0123456789abcdef";
    let kinds = vec![
        (
            "consumer-epoch",
            RecordKind::GroupMetadata(Some(EpochValue { epoch: 5 })),
        ),
        (
            "consumer-partition-metadata",
            RecordKind::PartitionMetadata(Some(PartitionMetadataValue {
                epoch: 5,
                topics: vec![TopicMetadataEntry {
                    topic_id,
                    topic_name: "orders".into(),
                    partition_count: 3,
                    partition_racks: vec![PartitionRacks {
                        partition: 0,
                        racks: vec!["r1".into()],
                    }],
                }],
            })),
        ),
        (
            "consumer-member-metadata",
            RecordKind::MemberMetadata {
                member_id: "m-1".into(),
                value: Some(MemberMetadataValue {
                    instance_id: None,
                    rack_id: Some("r1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    subscribed_topic_names: vec!["orders".into()],
                    subscribed_topic_regex: None,
                    rebalance_timeout_ms: 300_000,
                    server_assignor: Some("uniform".into()),
                }),
            },
        ),
        (
            "consumer-current-assignment",
            RecordKind::CurrentMemberAssignment {
                member_id: "m-1".into(),
                value: Some(CurrentMemberAssignmentValue {
                    member_epoch: 5,
                    previous_member_epoch: 4,
                    state: MemberState::Stable,
                    assigned_partitions: vec![TopicPartitions {
                        topic_id,
                        partitions: vec![0, 2],
                    }],
                    partitions_pending_revocation: vec![],
                }),
            },
        ),
        (
            "consumer-member-tombstone",
            RecordKind::MemberMetadata {
                member_id: "m-2".into(),
                value: None,
            },
        ),
    ];
    for (name, kind) in kinds {
        let record = ConsumerGroupRecord {
            group_id: "orders-app".into(),
            kind,
        };
        let value = record.encode_value();
        write(
            &records,
            name,
            &record_input(&record.encode_key(), value.as_deref()),
        );
    }

    let blobs = corpus.join("consumer_protocol");
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = vec![
        StrBytes::from_static_str("orders"),
        StrBytes::from_static_str("audit"),
    ];
    sub.user_data = Some(bytes::Bytes::from_static(b"ud"));
    let mut owned = OwnedPartitions::default();
    owned.topic = TopicName(StrBytes::from_static_str("orders"));
    owned.partitions = vec![0, 1];
    sub.owned_partitions = vec![owned];
    sub.generation_id = 7;
    sub.rack_id = Some(StrBytes::from_static_str("r1"));
    let mut assignment = ConsumerProtocolAssignment::default();
    let mut assigned = AssignedPartitions::default();
    assigned.topic = TopicName(StrBytes::from_static_str("orders"));
    assigned.partitions = vec![0, 2];
    assignment.assigned_partitions = vec![assigned];
    for version in 0..=3i16 {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&version.to_be_bytes());
        sub.encode(&mut buf, version).expect("subscription");
        write(&blobs, &format!("subscription-v{version}"), &buf);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&version.to_be_bytes());
        assignment.encode(&mut buf, version).expect("assignment");
        write(&blobs, &format!("assignment-v{version}"), &buf);
    }
}
