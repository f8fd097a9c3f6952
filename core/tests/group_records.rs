//! The `__consumer_offsets` record codecs (`core::group::records`): Kafka's byte layouts,
//! round trips, and bounded decoding of hostile bytes (I10).

use minikafka_core::group::records::*;
use minikafka_core::group::{Coordinator, GroupConfig};
use proptest::prelude::*;

fn sample_group() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp: 1_000,
        members: vec![MemberMetadata {
            member_id: "m1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout_ms: 300,
            session_timeout_ms: 100,
            subscription: vec![1, 2],
            assignment: vec![3],
        }],
    }
}

#[test]
fn keys_are_byte_exact() {
    assert_eq!(
        offset_commit_key("g", "t", 7),
        [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]
    );
    assert_eq!(group_metadata_key("grp"), [0, 2, 0, 3, b'g', b'r', b'p']);
    assert_eq!(
        RecordKey::decode(&[0, 0, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7])
            .expect("expected in this test"),
        RecordKey::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 7
        },
        "key version 0 has the same layout"
    );
    assert_eq!(
        RecordKey::decode(&[0, 5, 0, 1, b'g', 0, 2, b'm', b'1']).expect("expected in this test"),
        RecordKey::Consumer {
            version: 5,
            group: "g".into()
        },
        "consumer-protocol keys are routed by their leading group id"
    );
}

#[test]
fn offset_commit_values_are_byte_exact() {
    let v3 = OffsetCommitValue {
        offset: 5,
        leader_epoch: 2,
        metadata: "m".into(),
        commit_timestamp: 1_000,
        expire_timestamp: None,
    };
    let mut want = vec![0, 3];
    want.extend_from_slice(&5i64.to_be_bytes());
    want.extend_from_slice(&2i32.to_be_bytes());
    want.extend_from_slice(&[0, 1, b'm']);
    want.extend_from_slice(&1_000i64.to_be_bytes());
    assert_eq!(v3.encode(), want);
    assert_eq!(
        OffsetCommitValue::decode(&want).expect("expected in this test"),
        v3
    );

    let v1 = OffsetCommitValue {
        offset: 5,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 1_000,
        expire_timestamp: Some(2_000),
    };
    let mut want = vec![0, 1];
    want.extend_from_slice(&5i64.to_be_bytes());
    want.extend_from_slice(&[0, 0]);
    want.extend_from_slice(&1_000i64.to_be_bytes());
    want.extend_from_slice(&2_000i64.to_be_bytes());
    assert_eq!(v1.encode(), want);
    assert_eq!(
        OffsetCommitValue::decode(&want).expect("expected in this test"),
        v1
    );

    // Version 4 (flexible): compact string and an (unknown) tagged field, skipped.
    let mut v4 = vec![0, 4];
    v4.extend_from_slice(&9i64.to_be_bytes());
    v4.extend_from_slice(&(-1i32).to_be_bytes());
    v4.extend_from_slice(&[3, b'a', b'b']);
    v4.extend_from_slice(&7i64.to_be_bytes());
    v4.extend_from_slice(&[1, 0, 2, 0xaa, 0xbb]);
    let d = OffsetCommitValue::decode(&v4).expect("expected in this test");
    assert_eq!(
        (d.offset, d.metadata.as_str(), d.commit_timestamp),
        (9, "ab", 7)
    );
    assert_eq!(
        OffsetCommitValue::decode(&[0, 9]),
        Err(RecordError::UnknownValueVersion(9))
    );
}

#[test]
fn group_metadata_value_v3_is_byte_exact() {
    let mut want = vec![0, 3];
    want.extend_from_slice(&[0, 8]);
    want.extend_from_slice(b"consumer");
    want.extend_from_slice(&3i32.to_be_bytes());
    want.extend_from_slice(&[0, 5]);
    want.extend_from_slice(b"range");
    want.extend_from_slice(&[0, 2, b'm', b'1']);
    want.extend_from_slice(&1_000i64.to_be_bytes());
    want.extend_from_slice(&1i32.to_be_bytes());
    want.extend_from_slice(&[0, 2, b'm', b'1']);
    want.extend_from_slice(&[0, 1, b'i']);
    want.extend_from_slice(&[0, 1, b'c']);
    want.extend_from_slice(&[0, 2, b'/', b'h']);
    want.extend_from_slice(&300i32.to_be_bytes());
    want.extend_from_slice(&100i32.to_be_bytes());
    want.extend_from_slice(&[0, 0, 0, 2, 1, 2]);
    want.extend_from_slice(&[0, 0, 0, 1, 3]);
    assert_eq!(sample_group().encode(), want);
    assert_eq!(
        GroupMetadataValue::decode(&want).expect("expected in this test"),
        sample_group()
    );
}

#[test]
fn group_metadata_value_every_version_reads_back() {
    let g = sample_group();
    for version in 0..=4 {
        let bytes = g.encode_version(version);
        let back = GroupMetadataValue::decode(&bytes).expect("expected in this test");
        let mut expect = g.clone();
        if version < 3 {
            expect.members[0].group_instance_id = None;
        }
        if version < 2 {
            expect.current_state_timestamp = -1;
        }
        if version < 1 {
            expect.members[0].rebalance_timeout_ms = expect.members[0].session_timeout_ms;
        }
        assert_eq!(back, expect, "version {version}");
    }
    // Null protocol and leader (an empty group).
    let empty = GroupMetadataValue {
        protocol: None,
        leader: None,
        members: vec![],
        ..sample_group()
    };
    let bytes = empty.encode();
    assert_eq!(
        &bytes[bytes.len() - 16..bytes.len() - 12],
        &[0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(
        GroupMetadataValue::decode(&bytes).expect("expected in this test"),
        empty
    );
}

#[test]
fn hostile_counts_and_lengths_are_errors_without_allocation() {
    // A member count of i32::MAX in a few bytes.
    let mut v = vec![0, 3, 0, 0];
    v.extend_from_slice(&1i32.to_be_bytes());
    v.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
    v.extend_from_slice(&0i64.to_be_bytes());
    v.extend_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        GroupMetadataValue::decode(&v),
        Err(RecordError::Truncated { .. })
    ));
    // A bytes field claiming 2 GiB.
    let mut g = sample_group().encode();
    let at = g.len() - 11; // the subscription length
    g[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(GroupMetadataValue::decode(&g).is_err());
    // Negative lengths, unknown versions, trailing key bytes, bad UTF-8, a runaway varint.
    assert_eq!(
        RecordKey::decode(&[0, 2, 0xff, 0xfe]),
        Err(RecordError::InvalidLength(-2))
    );
    assert_eq!(
        RecordKey::decode(&[0, 2, 0xff, 0xff]),
        Err(RecordError::InvalidLength(-1))
    );
    assert_eq!(
        RecordKey::decode(&[0, 9]),
        Err(RecordError::UnknownKeyVersion(9))
    );
    assert_eq!(
        RecordKey::decode(&[0, 2, 0, 1, b'g', 0]),
        Err(RecordError::TrailingKeyBytes(1))
    );
    assert_eq!(
        RecordKey::decode(&[0, 2, 0, 1, 0xff]),
        Err(RecordError::InvalidUtf8)
    );
    assert!(RecordKey::decode(&[0]).is_err());
    let mut v4 = vec![0, 4];
    v4.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert!(GroupMetadataValue::decode(&v4).is_err());
}

#[test]
fn a_hostile_record_in_the_log_is_an_error_and_changes_nothing() {
    let mut c = Coordinator::new(GroupConfig::default(), 1);
    let key = offset_commit_key("g", "t", 0);
    assert!(c.replay(&key, Some(&[0, 3, 1])).is_err());
    assert!(c.replay(&[0, 77, 0], None).is_err());
    assert!(c
        .replay(&group_metadata_key("g"), Some(&[0, 3, 0, 0]))
        .is_err());
    assert!(c.durable_state().is_empty());
    assert!(c.group_ids().is_empty());
}

fn arb_string() -> impl Strategy<Value = String> {
    "[a-z0-9é\\-]{0,12}"
}

fn arb_member() -> impl Strategy<Value = MemberMetadata> {
    (
        arb_string(),
        proptest::option::of(arb_string()),
        arb_string(),
        arb_string(),
        any::<i32>(),
        any::<i32>(),
        proptest::collection::vec(any::<u8>(), 0..20),
        proptest::collection::vec(any::<u8>(), 0..20),
    )
        .prop_map(|(m, i, c, h, r, s, sub, a)| MemberMetadata {
            member_id: m,
            group_instance_id: i,
            client_id: c,
            client_host: h,
            rebalance_timeout_ms: r,
            session_timeout_ms: s,
            subscription: sub,
            assignment: a,
        })
}

fn arb_group() -> impl Strategy<Value = GroupMetadataValue> {
    (
        arb_string(),
        any::<i32>(),
        proptest::option::of(arb_string()),
        proptest::option::of(arb_string()),
        any::<i64>(),
        proptest::collection::vec(arb_member(), 0..4),
    )
        .prop_map(|(t, g, p, l, ts, members)| GroupMetadataValue {
            protocol_type: t,
            generation: g,
            protocol: p,
            leader: l,
            current_state_timestamp: ts,
            members,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn offset_commit_values_round_trip(
        offset in any::<i64>(), epoch in any::<i32>(), metadata in arb_string(),
        ts in any::<i64>(), expire in proptest::option::of(any::<i64>()),
    ) {
        let v = OffsetCommitValue { offset, leader_epoch: epoch, metadata, commit_timestamp: ts, expire_timestamp: expire };
        let back = OffsetCommitValue::decode(&v.encode()).expect("expected in this test");
        // Version 1 (explicit expiry) has no leader epoch, as in Kafka.
        let expect = OffsetCommitValue { leader_epoch: if expire.is_some() { -1 } else { epoch }, ..v };
        prop_assert_eq!(back, expect);
    }

    #[test]
    fn group_metadata_values_round_trip_and_every_prefix_fails(g in arb_group(), flexible in any::<bool>()) {
        let bytes = if flexible { g.encode_version(4) } else { g.encode() };
        prop_assert_eq!(GroupMetadataValue::decode(&bytes).expect("expected in this test"), g);
        for cut in 0..bytes.len() {
            prop_assert!(GroupMetadataValue::decode(&bytes[..cut]).is_err(), "prefix {} of {}", cut, bytes.len());
        }
    }

    #[test]
    fn keys_round_trip(group in arb_string(), topic in arb_string(), partition in any::<i32>()) {
        let k = RecordKey::OffsetCommit { group: group.clone(), topic, partition };
        prop_assert_eq!(RecordKey::decode(&k.encode()).expect("expected in this test"), k);
        let k = RecordKey::GroupMetadata { group };
        prop_assert_eq!(RecordKey::decode(&k.encode()).expect("expected in this test"), k);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = RecordKey::decode(&bytes);
        let _ = OffsetCommitValue::decode(&bytes);
        let _ = GroupMetadataValue::decode(&bytes);
        let mut c = Coordinator::new(GroupConfig::default(), 1);
        let _ = c.replay(&bytes, Some(&bytes));
        let _ = c.replay(&bytes, None);
    }
}
