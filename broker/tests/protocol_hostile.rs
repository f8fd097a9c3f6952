//! Bad-input suite for the protocol front door (`broker::protocol`), plus the round trip of
//! every covered request at every version.
//!
//! Round trip: each request is built with `kafka-protocol`'s types and populated with
//! non-trivial data (arrays of 2+ elements, nullable fields both set and null), encoded by
//! `kafka-protocol`, framed with a real request header, and must pass the pre-check and come
//! back from `decode_request` equal to what was encoded.
//!
//! Hostile frames: the Metadata v0 `7f ff ff ff` attack, the same huge count written into every
//! position of every valid encoding, every truncation, junk after every valid frame (ignored,
//! never decoded, as Kafka ignores trailing bytes; librdkafka's all-topics Metadata v13 request
//! relies on it), random mutations (proptest), bad frame sizes, HTTP and TLS bytes. Each must yield an error or a value, never a panic, and (I10) no
//! single allocation above 16 x frame size + 64 KiB, checked by a counting global allocator
//! on a thread with a small stack.
//!
//! Hostile bytes against the real `minikafka` binary over raw TCP on 127.0.0.1 (HTTP, TLS, bad
//! frame sizes, absurd counts, unknown api keys and versions, truncated frames): each costs
//! only its own connection, and the broker keeps serving others and librdkafka afterwards.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use minikafka_broker::protocol::frame::{ForeignProtocol, FrameDecoder, FrameError};
use minikafka_broker::protocol::schema::schema_for;
use minikafka_broker::protocol::{
    decode_request, precheck, RequestBody, RequestError, SupportedVersions,
};
use proptest::prelude::*;
use rdkafka::message::Message;

mod common;

use common::librdkafka::{
    consumer, create_topics, expect_all_ok, read_partition, Rec, TestProducer, TEST_LIMIT,
};
use common::raw::{assert_closed_after, connect, frame, read_frame, request};
use common::{bounded, Broker};

// ---------------------------------------------------------------------------------------------
// Largest single allocation, per thread.

struct Counting;

thread_local! {
    static LARGEST_ALLOC_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST_ALLOC_BYTES.try_with(|m| {
        if size > m.get() {
            m.set(size);
        }
    });
}

// SAFETY: forwards every call to `System` unchanged; only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Decodes `frame` and asserts (I10) that no single allocation made while doing so exceeded
/// 16 x the frame size + 64 KiB.
fn decode_capped(frame: Bytes, supported: &SupportedVersions) -> Result<RequestBody, RequestError> {
    let cap = 16 * frame.len() + 64 * 1024;
    LARGEST_ALLOC_BYTES.with(|m| m.set(0));
    let result = decode_request(frame, supported).map(|d| d.body);
    let largest = LARGEST_ALLOC_BYTES.with(|m| m.get());
    assert!(
        largest <= cap,
        "allocation of {largest} bytes exceeds cap {cap}"
    );
    result
}

/// Runs `f` on a thread with a 512 KiB stack (no deep recursion allowed either).
fn on_small_stack<F: FnOnce() + Send + 'static>(f: F) {
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("hostile input made the decoder panic");
}

// ---------------------------------------------------------------------------------------------
// Sample requests.

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn topic(x: &str) -> TopicName {
    TopicName(s(x))
}

fn group(x: &str) -> GroupId {
    GroupId(s(x))
}

/// A non-nil topic id (built through the decoder: the `uuid` crate is not a dependency).
fn uuid_topic(n: u8) -> metadata_request::MetadataRequestTopic {
    let mut raw = vec![n; 16];
    raw.extend_from_slice(&[1, 0]);
    metadata_request::MetadataRequestTopic::decode(&mut Bytes::from(raw), 10).expect("uuid")
}

macro_rules! uuid {
    ($n:expr) => {
        uuid_topic($n).topic_id
    };
}

fn opt(alt: bool, x: &str) -> Option<StrBytes> {
    if alt {
        None
    } else {
        Some(s(x))
    }
}

fn sample(key: ApiKey, v: i16, alt: bool) -> RequestBody {
    match key {
        ApiKey::ApiVersions => {
            let mut r = ApiVersionsRequest::default();
            if v >= 3 {
                r.client_software_name = s("minikafka-test");
                r.client_software_version = s(if alt { "" } else { "0.1.0" });
            }
            RequestBody::ApiVersions(r)
        }
        ApiKey::Metadata => {
            let mut r = MetadataRequest::default();
            r.topics = if alt && v >= 1 {
                None
            } else {
                Some(
                    (0..3u8)
                        .map(|i| {
                            let mut t = metadata_request::MetadataRequestTopic::default();
                            t.name = if v >= 10 && i == 2 {
                                None
                            } else {
                                Some(topic(&format!("t{i}")))
                            };
                            if v >= 10 {
                                t.topic_id = uuid!(i + 1);
                            }
                            t
                        })
                        .collect(),
                )
            };
            if v >= 4 {
                r.allow_auto_topic_creation = alt;
            }
            if (8..=10).contains(&v) {
                r.include_cluster_authorized_operations = true;
            }
            if v >= 8 {
                r.include_topic_authorized_operations = !alt;
            }
            RequestBody::Metadata(r)
        }
        ApiKey::Produce => {
            let mut r = ProduceRequest::default();
            r.transactional_id = opt(alt, "tx-1").map(TransactionalId);
            r.acks = -1;
            r.timeout_ms = 1500;
            r.topic_data = (0..2u8)
                .map(|i| {
                    let mut t = produce_request::TopicProduceData::default();
                    if v <= 12 {
                        t.name = topic(&format!("topic-{i}"));
                    } else {
                        t.topic_id = uuid!(i + 7);
                    }
                    t.partition_data = (0..2)
                        .map(|p| {
                            let mut d = produce_request::PartitionProduceData::default();
                            d.index = p;
                            d.records = if alt && p == 1 {
                                None
                            } else {
                                Some(Bytes::from(vec![i; 20 + p as usize]))
                            };
                            d
                        })
                        .collect();
                    t
                })
                .collect();
            RequestBody::Produce(r)
        }
        ApiKey::Fetch => {
            let mut r = FetchRequest::default();
            if v >= 12 && !alt {
                r.cluster_id = Some(s("cluster-a"));
            }
            if v <= 14 {
                r.replica_id = BrokerId(-1);
            } else {
                let mut rs = fetch_request::ReplicaState::default();
                rs.replica_id = BrokerId(if alt { -1 } else { 3 });
                rs.replica_epoch = if alt { -1 } else { 9 };
                r.replica_state = rs;
            }
            r.max_wait_ms = 500;
            r.min_bytes = 1;
            r.max_bytes = 52_428_800;
            r.isolation_level = 1;
            if v >= 7 {
                r.session_id = 4;
                r.session_epoch = 2;
            }
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = fetch_request::FetchTopic::default();
                    if v <= 12 {
                        t.topic = topic(&format!("f{i}"));
                    } else {
                        t.topic_id = uuid!(i + 20);
                    }
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut fp = fetch_request::FetchPartition::default();
                            fp.partition = p;
                            if v >= 9 {
                                fp.current_leader_epoch = 3;
                            }
                            fp.fetch_offset = 100 + i64::from(p);
                            if v >= 12 {
                                fp.last_fetched_epoch = 2;
                            }
                            if v >= 5 {
                                fp.log_start_offset = 10;
                            }
                            fp.partition_max_bytes = 1 << 20;
                            if v >= 17 && !alt {
                                fp.replica_directory_id = uuid!(40);
                            }
                            if v >= 18 && !alt {
                                fp.high_watermark = 77;
                            }
                            fp
                        })
                        .collect();
                    t
                })
                .collect();
            if v >= 7 {
                r.forgotten_topics_data = (0..2u8)
                    .map(|i| {
                        let mut t = fetch_request::ForgottenTopic::default();
                        if v <= 12 {
                            t.topic = topic(&format!("gone{i}"));
                        } else {
                            t.topic_id = uuid!(i + 30);
                        }
                        t.partitions = vec![1, 2, 3];
                        t
                    })
                    .collect();
            }
            if v >= 11 {
                r.rack_id = s("rack-1");
            }
            RequestBody::Fetch(r)
        }
        ApiKey::ListOffsets => {
            let mut r = ListOffsetsRequest::default();
            r.replica_id = BrokerId(-1);
            if v >= 2 {
                r.isolation_level = 1;
            }
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = list_offsets_request::ListOffsetsTopic::default();
                    t.name = topic(&format!("lo{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut lp = list_offsets_request::ListOffsetsPartition::default();
                            lp.partition_index = p;
                            if v >= 4 {
                                lp.current_leader_epoch = 5;
                            }
                            lp.timestamp = -1 - i64::from(p);
                            lp
                        })
                        .collect();
                    t
                })
                .collect();
            if v >= 10 {
                r.timeout_ms = 3000;
            }
            RequestBody::ListOffsets(r)
        }
        ApiKey::CreateTopics => {
            let mut r = CreateTopicsRequest::default();
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = create_topics_request::CreatableTopic::default();
                    t.name = topic(&format!("new{i}"));
                    t.num_partitions = if i == 0 { 3 } else { -1 };
                    t.replication_factor = if i == 0 { 1 } else { -1 };
                    if i == 1 {
                        t.assignments = (0..2)
                            .map(|p| {
                                let mut a =
                                    create_topics_request::CreatableReplicaAssignment::default();
                                a.partition_index = p;
                                a.broker_ids = vec![BrokerId(1), BrokerId(2)];
                                a
                            })
                            .collect();
                    }
                    t.configs = ["cleanup.policy", "retention.ms"]
                        .iter()
                        .map(|k| {
                            let mut c = create_topics_request::CreatableTopicConfig::default();
                            c.name = s(k);
                            c.value = opt(alt, "delete");
                            c
                        })
                        .collect();
                    t
                })
                .collect();
            r.timeout_ms = 30_000;
            r.validate_only = alt;
            RequestBody::CreateTopics(r)
        }
        ApiKey::DeleteTopics => {
            let mut r = DeleteTopicsRequest::default();
            if v >= 6 {
                r.topics = (0..2u8)
                    .map(|i| {
                        let mut t = delete_topics_request::DeleteTopicState::default();
                        t.name = if alt && i == 1 {
                            None
                        } else {
                            Some(topic(&format!("d{i}")))
                        };
                        t.topic_id = uuid!(i + 50);
                        t
                    })
                    .collect();
            } else {
                r.topic_names = vec![topic("d0"), topic("d1")];
            }
            r.timeout_ms = 1000;
            RequestBody::DeleteTopics(r)
        }
        ApiKey::CreatePartitions => {
            let mut r = CreatePartitionsRequest::default();
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = create_partitions_request::CreatePartitionsTopic::default();
                    t.name = topic(&format!("cp{i}"));
                    t.count = 4;
                    t.assignments = if alt {
                        None
                    } else {
                        Some(
                            (0..2)
                                .map(|_| {
                                    let mut a = create_partitions_request::CreatePartitionsAssignment::default();
                                    a.broker_ids = vec![BrokerId(1), BrokerId(2)];
                                    a
                                })
                                .collect(),
                        )
                    };
                    t
                })
                .collect();
            r.timeout_ms = 1000;
            r.validate_only = !alt;
            RequestBody::CreatePartitions(r)
        }
        ApiKey::DescribeConfigs => {
            let mut r = DescribeConfigsRequest::default();
            r.resources = (0..2u8)
                .map(|i| {
                    let mut res = describe_configs_request::DescribeConfigsResource::default();
                    res.resource_type = 2;
                    res.resource_name = s(&format!("dc{i}"));
                    res.configuration_keys = if alt {
                        None
                    } else {
                        Some(vec![s("retention.ms"), s("segment.bytes")])
                    };
                    res
                })
                .collect();
            r.include_synonyms = true;
            if v >= 3 {
                r.include_documentation = !alt;
            }
            RequestBody::DescribeConfigs(r)
        }
        ApiKey::AlterConfigs => {
            let mut r = AlterConfigsRequest::default();
            r.resources = (0..2u8)
                .map(|i| {
                    let mut res = alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = if i == 0 { 2 } else { 4 };
                    res.resource_name = s(if i == 0 { "ac0" } else { "" });
                    res.configs = ["retention.ms", "segment.bytes"]
                        .iter()
                        .map(|k| {
                            let mut c = alter_configs_request::AlterableConfig::default();
                            c.name = s(k);
                            c.value = opt(alt && i == 1, "1000");
                            c
                        })
                        .collect();
                    res
                })
                .collect();
            r.validate_only = alt;
            RequestBody::AlterConfigs(r)
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = (0..2u8)
                .map(|i| {
                    let mut res =
                        incremental_alter_configs_request::AlterConfigsResource::default();
                    res.resource_type = if i == 0 { 2 } else { 4 };
                    res.resource_name = s(if i == 0 { "iac0" } else { "1" });
                    res.configs = (0..3i8)
                        .map(|op| {
                            let mut c =
                                incremental_alter_configs_request::AlterableConfig::default();
                            c.name =
                                s(["retention.ms", "cleanup.policy", "segment.ms"][op as usize]);
                            c.config_operation = op;
                            c.value = opt(alt && op == 1, "delete");
                            c
                        })
                        .collect();
                    res
                })
                .collect();
            r.validate_only = !alt;
            RequestBody::IncrementalAlterConfigs(r)
        }
        ApiKey::DeleteRecords => {
            let mut r = DeleteRecordsRequest::default();
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = delete_records_request::DeleteRecordsTopic::default();
                    t.name = topic(&format!("dr{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut dp = delete_records_request::DeleteRecordsPartition::default();
                            dp.partition_index = p;
                            dp.offset = if alt { -1 } else { 1000 + i64::from(p) };
                            dp
                        })
                        .collect();
                    t
                })
                .collect();
            r.timeout_ms = 30_000;
            RequestBody::DeleteRecords(r)
        }
        ApiKey::DescribeCluster => {
            let mut r = DescribeClusterRequest::default();
            r.include_cluster_authorized_operations = !alt;
            if v >= 1 {
                r.endpoint_type = 2;
            }
            if v >= 2 {
                r.include_fenced_brokers = true;
            }
            RequestBody::DescribeCluster(r)
        }
        ApiKey::InitProducerId => {
            let mut r = InitProducerIdRequest::default();
            r.transactional_id = opt(alt, "tx-9").map(TransactionalId);
            r.transaction_timeout_ms = 60_000;
            if v >= 3 {
                r.producer_id = ProducerId(if alt { -1 } else { 5 });
                r.producer_epoch = if alt { -1 } else { 1 };
            }
            RequestBody::InitProducerId(r)
        }
        ApiKey::FindCoordinator => {
            let mut r = FindCoordinatorRequest::default();
            if v <= 3 {
                r.key = s("group-a");
            }
            if v >= 1 {
                r.key_type = 1;
            }
            if v >= 4 {
                r.coordinator_keys = vec![s("group-a"), s("group-b")];
            }
            RequestBody::FindCoordinator(r)
        }
        ApiKey::JoinGroup => {
            let mut r = JoinGroupRequest::default();
            r.group_id = group("g");
            r.session_timeout_ms = 45_000;
            if v >= 1 {
                r.rebalance_timeout_ms = 300_000;
            }
            r.member_id = s(if alt { "" } else { "member-1" });
            if v >= 5 {
                r.group_instance_id = opt(alt, "inst-1");
            }
            r.protocol_type = s("consumer");
            r.protocols = ["range", "cooperative-sticky"]
                .iter()
                .map(|n| {
                    let mut p = join_group_request::JoinGroupRequestProtocol::default();
                    p.name = s(n);
                    p.metadata = Bytes::from_static(b"\x00\x03meta");
                    p
                })
                .collect();
            if v >= 8 {
                r.reason = opt(alt, "rejoin");
            }
            RequestBody::JoinGroup(r)
        }
        ApiKey::SyncGroup => {
            let mut r = SyncGroupRequest::default();
            r.group_id = group("g");
            r.generation_id = 7;
            r.member_id = s("member-1");
            if v >= 3 {
                r.group_instance_id = opt(alt, "inst-1");
            }
            if v >= 5 {
                r.protocol_type = opt(alt, "consumer");
                r.protocol_name = opt(alt, "range");
            }
            r.assignments = ["member-1", "member-2"]
                .iter()
                .map(|m| {
                    let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                    a.member_id = s(m);
                    a.assignment = Bytes::from_static(b"assignment");
                    a
                })
                .collect();
            RequestBody::SyncGroup(r)
        }
        ApiKey::Heartbeat => {
            let mut r = HeartbeatRequest::default();
            r.group_id = group("g");
            r.generation_id = 7;
            r.member_id = s("member-1");
            if v >= 3 {
                r.group_instance_id = opt(alt, "inst-1");
            }
            RequestBody::Heartbeat(r)
        }
        ApiKey::LeaveGroup => {
            let mut r = LeaveGroupRequest::default();
            r.group_id = group("g");
            if v <= 2 {
                r.member_id = s("member-1");
            } else {
                r.members = ["member-1", "member-2"]
                    .iter()
                    .map(|m| {
                        let mut mi = leave_group_request::MemberIdentity::default();
                        mi.member_id = s(m);
                        mi.group_instance_id = opt(alt, "inst");
                        if v >= 5 {
                            mi.reason = opt(alt, "shutdown");
                        }
                        mi
                    })
                    .collect();
            }
            RequestBody::LeaveGroup(r)
        }
        ApiKey::OffsetCommit => {
            let mut r = OffsetCommitRequest::default();
            r.group_id = group("g");
            r.generation_id_or_member_epoch = 7;
            r.member_id = s("member-1");
            if v >= 7 {
                r.group_instance_id = opt(alt, "inst-1");
            }
            if v <= 4 {
                r.retention_time_ms = if alt { -1 } else { 86_400_000 };
            }
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = offset_commit_request::OffsetCommitRequestTopic::default();
                    t.name = topic(&format!("oc{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut op =
                                offset_commit_request::OffsetCommitRequestPartition::default();
                            op.partition_index = p;
                            op.committed_offset = 1000 + i64::from(p);
                            if v >= 6 {
                                op.committed_leader_epoch = 4;
                            }
                            op.committed_metadata = opt(alt, "meta");
                            op
                        })
                        .collect();
                    t
                })
                .collect();
            RequestBody::OffsetCommit(r)
        }
        ApiKey::OffsetFetch => {
            let mut r = OffsetFetchRequest::default();
            let topics = |prefix: &str| -> Vec<(TopicName, Vec<i32>)> {
                (0..2)
                    .map(|i| (topic(&format!("{prefix}{i}")), vec![0, 1, 2]))
                    .collect()
            };
            if v <= 7 {
                r.group_id = group("g");
                r.topics = if alt && v >= 2 {
                    None
                } else {
                    Some(
                        topics("of")
                            .into_iter()
                            .map(|(name, parts)| {
                                let mut t =
                                    offset_fetch_request::OffsetFetchRequestTopic::default();
                                t.name = name;
                                t.partition_indexes = parts;
                                t
                            })
                            .collect(),
                    )
                };
            } else {
                r.groups = (0..2u8)
                    .map(|g| {
                        let mut og = offset_fetch_request::OffsetFetchRequestGroup::default();
                        og.group_id = group(&format!("g{g}"));
                        if v >= 9 {
                            og.member_id = opt(alt, "member-1");
                            og.member_epoch = if alt { -1 } else { 3 };
                        }
                        og.topics = if alt && g == 1 {
                            None
                        } else {
                            Some(
                                topics("ofg")
                                    .into_iter()
                                    .map(|(name, parts)| {
                                        let mut t =
                                            offset_fetch_request::OffsetFetchRequestTopics::default(
                                            );
                                        t.name = name;
                                        t.partition_indexes = parts;
                                        t
                                    })
                                    .collect(),
                            )
                        };
                        og
                    })
                    .collect();
            }
            if v >= 7 {
                r.require_stable = !alt;
            }
            RequestBody::OffsetFetch(r)
        }
        ApiKey::ListGroups => {
            let mut r = ListGroupsRequest::default();
            if v >= 4 {
                r.states_filter = vec![s("Stable"), s("Empty")];
            }
            if v >= 5 {
                r.types_filter = vec![s("classic"), s("consumer")];
            }
            RequestBody::ListGroups(r)
        }
        ApiKey::DescribeGroups => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![group("g1"), group("g2")];
            if v >= 3 {
                r.include_authorized_operations = !alt;
            }
            RequestBody::DescribeGroups(r)
        }
        ApiKey::DeleteGroups => {
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![group("g1"), group(if alt { "" } else { "g2" })];
            RequestBody::DeleteGroups(r)
        }
        ApiKey::OffsetDelete => {
            let mut r = OffsetDeleteRequest::default();
            r.group_id = group("g");
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = offset_delete_request::OffsetDeleteRequestTopic::default();
                    t.name = topic(&format!("od{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut dp =
                                offset_delete_request::OffsetDeleteRequestPartition::default();
                            dp.partition_index = p;
                            dp
                        })
                        .collect();
                    t
                })
                .collect();
            RequestBody::OffsetDelete(r)
        }
        ApiKey::ConsumerGroupHeartbeat => {
            let mut r = ConsumerGroupHeartbeatRequest::default();
            r.group_id = group("g");
            r.member_id = s(if alt { "" } else { "member-1" });
            r.member_epoch = if alt { 0 } else { 5 };
            r.instance_id = opt(alt, "inst-1");
            r.rack_id = opt(alt, "rack-a");
            r.rebalance_timeout_ms = 30_000;
            r.subscribed_topic_names = if alt {
                None
            } else {
                Some(vec![topic("t1"), topic("t2")])
            };
            if v >= 1 {
                r.subscribed_topic_regex = opt(!alt, "^orders-.*");
            }
            r.server_assignor = opt(alt, "uniform");
            r.topic_partitions = if alt {
                None
            } else {
                Some(
                    (0..2u8)
                        .map(|i| {
                            let mut tp =
                                consumer_group_heartbeat_request::TopicPartitions::default();
                            tp.topic_id = uuid!(i + 3);
                            tp.partitions = vec![0, 1, 2];
                            tp
                        })
                        .collect(),
                )
            };
            RequestBody::ConsumerGroupHeartbeat(r)
        }
        ApiKey::ConsumerGroupDescribe => {
            let mut r = ConsumerGroupDescribeRequest::default();
            r.group_ids = vec![group("g1"), group("g2")];
            r.include_authorized_operations = !alt;
            RequestBody::ConsumerGroupDescribe(r)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut r = OffsetForLeaderEpochRequest::default();
            if v >= 3 {
                r.replica_id = (if alt { -2 } else { -1 }).into();
            }
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
                    t.topic = topic(&format!("ofle{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut op =
                                offset_for_leader_epoch_request::OffsetForLeaderPartition::default(
                                );
                            op.partition = p;
                            op.current_leader_epoch = if alt { -1 } else { 0 };
                            op.leader_epoch = p;
                            op
                        })
                        .collect();
                    t
                })
                .collect();
            RequestBody::OffsetForLeaderEpoch(r)
        }
        ApiKey::DescribeLogDirs => {
            let mut r = DescribeLogDirsRequest::default();
            r.topics = if alt {
                None
            } else {
                Some(
                    (0..2u8)
                        .map(|i| {
                            let mut t =
                                describe_log_dirs_request::DescribableLogDirTopic::default();
                            t.topic = topic(&format!("dld{i}"));
                            t.partitions = vec![0, 1, 2];
                            t
                        })
                        .collect(),
                )
            };
            RequestBody::DescribeLogDirs(r)
        }
        ApiKey::DescribeAcls => {
            let mut r = DescribeAclsRequest::default();
            r.resource_type_filter = 2;
            r.resource_name_filter = opt(alt, "acl-topic");
            r.pattern_type_filter = 3;
            r.principal_filter = opt(alt, "User:alice");
            r.host_filter = opt(!alt, "*");
            r.operation = 3;
            r.permission_type = 3;
            RequestBody::DescribeAcls(r)
        }
        ApiKey::CreateAcls => {
            let mut r = CreateAclsRequest::default();
            r.creations = (0..if alt { 1u8 } else { 3 })
                .map(|i| {
                    let mut c = create_acls_request::AclCreation::default();
                    c.resource_type = 2 + i as i8;
                    c.resource_name = s(&format!("acl{i}"));
                    c.resource_pattern_type = 3 + (i % 2) as i8;
                    c.principal = s("User:alice");
                    c.host = s(if alt { "10.0.0.1" } else { "*" });
                    c.operation = 3 + i as i8;
                    c.permission_type = 3;
                    c
                })
                .collect();
            RequestBody::CreateAcls(r)
        }
        ApiKey::DeleteAcls => {
            let mut r = DeleteAclsRequest::default();
            r.filters = (0..2u8)
                .map(|i| {
                    let mut f = delete_acls_request::DeleteAclsFilter::default();
                    f.resource_type_filter = 1 + i as i8;
                    f.resource_name_filter = opt(alt, &format!("acl{i}"));
                    f.pattern_type_filter = 1;
                    f.principal_filter = opt(!alt, "User:bob");
                    f.host_filter = opt(alt, "*");
                    f.operation = 1;
                    f.permission_type = 2;
                    f
                })
                .collect();
            RequestBody::DeleteAcls(r)
        }
        ApiKey::DescribeProducers => {
            let mut r = DescribeProducersRequest::default();
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = describe_producers_request::TopicRequest::default();
                    t.name = topic(&format!("dp{i}"));
                    t.partition_indexes = if alt { vec![] } else { vec![0, 1] };
                    t
                })
                .collect();
            RequestBody::DescribeProducers(r)
        }
        ApiKey::DescribeTopicPartitions => {
            let mut r = DescribeTopicPartitionsRequest::default();
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = describe_topic_partitions_request::TopicRequest::default();
                    t.name = topic(&format!("dtp{i}"));
                    t
                })
                .collect();
            r.response_partition_limit = if alt { 1 } else { 2000 };
            r.cursor = if alt {
                None
            } else {
                let mut c = describe_topic_partitions_request::Cursor::default();
                c.topic_name = topic("dtp1");
                c.partition_index = 3;
                Some(c)
            };
            RequestBody::DescribeTopicPartitions(r)
        }
        ApiKey::TxnOffsetCommit => {
            let mut r = TxnOffsetCommitRequest::default();
            r.transactional_id = TransactionalId(s("tx-1"));
            r.group_id = group("g");
            r.producer_id = ProducerId(4000);
            r.producer_epoch = 3;
            if v >= 3 {
                r.generation_id = 7;
                r.member_id = s("member-1");
                r.group_instance_id = opt(alt, "inst-1");
            }
            r.topics = (0..2u8)
                .map(|i| {
                    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
                    t.name = topic(&format!("toc{i}"));
                    t.partitions = (0..2)
                        .map(|p| {
                            let mut op =
                                txn_offset_commit_request::TxnOffsetCommitRequestPartition::default(
                                );
                            op.partition_index = p;
                            op.committed_offset = 1000 + i64::from(p);
                            if v >= 2 {
                                op.committed_leader_epoch = 4;
                            }
                            op.committed_metadata = opt(alt, "meta");
                            op
                        })
                        .collect();
                    t
                })
                .collect();
            RequestBody::TxnOffsetCommit(r)
        }
        ApiKey::AddPartitionsToTxn => {
            let mut r = AddPartitionsToTxnRequest::default();
            let topics = |n: u8| -> Vec<add_partitions_to_txn_request::AddPartitionsToTxnTopic> {
                (0..n)
                    .map(|i| {
                        let mut t =
                            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
                        t.name = topic(&format!("apt{i}"));
                        t.partitions = vec![0, 1];
                        t
                    })
                    .collect()
            };
            if v >= 4 {
                r.transactions = (0..2u8)
                    .map(|i| {
                        let mut t =
                            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
                        t.transactional_id = TransactionalId(s(&format!("tx-{i}")));
                        t.producer_id = ProducerId(4000 + i64::from(i));
                        t.producer_epoch = 2;
                        t.verify_only = alt;
                        t.topics = topics(2);
                        t
                    })
                    .collect();
            } else {
                r.v3_and_below_transactional_id = TransactionalId(s("tx-1"));
                r.v3_and_below_producer_id = ProducerId(4000);
                r.v3_and_below_producer_epoch = 2;
                r.v3_and_below_topics = topics(if alt { 1 } else { 2 });
            }
            RequestBody::AddPartitionsToTxn(r)
        }
        ApiKey::AddOffsetsToTxn => {
            let mut r = AddOffsetsToTxnRequest::default();
            r.transactional_id = TransactionalId(s("tx-1"));
            r.producer_id = ProducerId(4000);
            r.producer_epoch = if alt { 0 } else { 3 };
            r.group_id = group("g");
            RequestBody::AddOffsetsToTxn(r)
        }
        ApiKey::EndTxn => {
            let mut r = EndTxnRequest::default();
            r.transactional_id = TransactionalId(s("tx-1"));
            r.producer_id = ProducerId(4000);
            r.producer_epoch = 3;
            r.committed = !alt;
            RequestBody::EndTxn(r)
        }
        ApiKey::DescribeTransactions => {
            let mut r = DescribeTransactionsRequest::default();
            r.transactional_ids = if alt {
                vec![]
            } else {
                vec![TransactionalId(s("tx-1")), TransactionalId(s("tx-2"))]
            };
            RequestBody::DescribeTransactions(r)
        }
        ApiKey::ListTransactions => {
            let mut r = ListTransactionsRequest::default();
            r.state_filters = if alt { vec![] } else { vec![s("Ongoing")] };
            r.producer_id_filters = vec![ProducerId(4000)];
            if v >= 1 {
                r.duration_filter = if alt { -1 } else { 60_000 };
            }
            if v >= 2 {
                r.transactional_id_pattern = opt(alt, "tx-.*");
            }
            RequestBody::ListTransactions(r)
        }
        ApiKey::WriteTxnMarkers => {
            let mut r = WriteTxnMarkersRequest::default();
            r.markers = (0..2u8)
                .map(|i| {
                    let mut t = write_txn_markers_request::WritableTxnMarkerTopic::default();
                    t.name = topic(&format!("wtm{i}"));
                    t.partition_indexes = if alt { vec![] } else { vec![0, 1] };
                    let mut m = write_txn_markers_request::WritableTxnMarker::default();
                    m.producer_id = (i64::from(i) + 1000).into();
                    m.producer_epoch = 3;
                    m.transaction_result = alt;
                    m.coordinator_epoch = 7;
                    m.topics = vec![t];
                    m
                })
                .collect();
            RequestBody::WriteTxnMarkers(r)
        }
        ApiKey::SaslHandshake => {
            let mut r = SaslHandshakeRequest::default();
            r.mechanism = s(if alt { "PLAIN" } else { "SCRAM-SHA-512" });
            RequestBody::SaslHandshake(r)
        }
        ApiKey::SaslAuthenticate => {
            let mut r = SaslAuthenticateRequest::default();
            r.auth_bytes = Bytes::from_static(if alt { b"" } else { b"\0alice\0secret" });
            RequestBody::SaslAuthenticate(r)
        }
        ApiKey::DescribeUserScramCredentials => {
            let mut r = DescribeUserScramCredentialsRequest::default();
            r.users = if alt {
                None
            } else {
                Some(
                    (0..2u8)
                        .map(|i| {
                            let mut u =
                                describe_user_scram_credentials_request::UserName::default();
                            u.name = s(&format!("user{i}"));
                            u
                        })
                        .collect(),
                )
            };
            RequestBody::DescribeUserScramCredentials(r)
        }
        ApiKey::AlterUserScramCredentials => {
            let mut r = AlterUserScramCredentialsRequest::default();
            let mut d = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            d.name = s("gone");
            d.mechanism = 1;
            let mut u = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            u.name = s("alice");
            u.mechanism = 2;
            u.iterations = 4096;
            u.salt = Bytes::from_static(b"salt");
            u.salted_password = Bytes::from_static(&[7u8; 64]);
            r.deletions = if alt { vec![] } else { vec![d] };
            r.upsertions = vec![u];
            RequestBody::AlterUserScramCredentials(r)
        }
        ApiKey::DescribeClientQuotas => {
            let mut r = DescribeClientQuotasRequest::default();
            let mut c = describe_client_quotas_request::ComponentData::default();
            c.entity_type = s("user");
            c.match_type = if alt { 1 } else { 0 };
            c._match = if alt { None } else { Some(s("alice")) };
            r.components = vec![c];
            r.strict = alt;
            RequestBody::DescribeClientQuotas(r)
        }
        ApiKey::AlterClientQuotas => {
            let mut r = AlterClientQuotasRequest::default();
            let mut e = alter_client_quotas_request::EntityData::default();
            e.entity_type = s("client-id");
            e.entity_name = if alt { None } else { Some(s("app")) };
            let mut op = alter_client_quotas_request::OpData::default();
            op.key = s("producer_byte_rate");
            op.value = 1024.0;
            op.remove = alt;
            let mut entry = alter_client_quotas_request::EntryData::default();
            entry.entity = vec![e];
            entry.ops = vec![op];
            r.entries = vec![entry];
            r.validate_only = !alt;
            RequestBody::AlterClientQuotas(r)
        }
        other => panic!("no sample for {other:?}"),
    }
}

/// A frame (no size prefix) carrying `body` at `version`, with a real request header.
fn frame_of(body: &RequestBody, version: i16, correlation_id: i32, alt: bool) -> (Bytes, usize) {
    let key = body.api_key();
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = if alt { None } else { Some(s("mk-client")) };
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    let body_offset = buf.len();
    let encoded = body
        .encode(version)
        .unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
    buf.extend_from_slice(&encoded);
    (buf.freeze(), body_offset)
}

/// Every (api, version, alt) the broker covers, with its frame.
fn all_valid_frames() -> Vec<(ApiKey, i16, bool, RequestBody, Bytes, usize)> {
    let supported = SupportedVersions::all_covered();
    let mut out = Vec::new();
    for range in supported.ranges() {
        for v in range.min_version..=range.max_version {
            for alt in [false, true] {
                let body = sample(range.api_key, v, alt);
                let (frame, body_offset) = frame_of(&body, v, 1000 + i32::from(v), alt);
                out.push((range.api_key, v, alt, body, frame, body_offset));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Round trip.

#[test]
fn round_trip_every_covered_request_at_every_version() {
    let supported = SupportedVersions::all_covered();
    let frames = all_valid_frames();
    let mut per_key: BTreeMap<i16, usize> = BTreeMap::new();
    for (key, v, alt, body, frame, body_offset) in frames {
        let schema = schema_for(key).expect("covered");
        if let Err(e) = precheck(schema, v, &frame[body_offset..]) {
            panic!("{key:?} v{v} alt={alt}: pre-check refused a valid body: {e}");
        }
        let decoded = decode_request(frame, &supported)
            .unwrap_or_else(|e| panic!("{key:?} v{v} alt={alt}: {e}"));
        assert_eq!(decoded.api_key, key);
        assert_eq!(decoded.api_version, v);
        assert_eq!(decoded.header.correlation_id, 1000 + i32::from(v));
        assert_eq!(decoded.header.client_id.is_none(), alt);
        assert!(
            decoded.body == body,
            "{key:?} v{v} alt={alt}: decoded body differs"
        );
        *per_key.entry(key as i16).or_default() += 1;
    }
    // Every covered API, both variants of every version.
    for range in supported.ranges() {
        let want = 2 * (range.max_version - range.min_version + 1) as usize;
        assert_eq!(
            per_key.get(&(range.api_key as i16)),
            Some(&want),
            "{:?}",
            range.api_key
        );
    }
    assert_eq!(per_key.len(), 47);
}

// ---------------------------------------------------------------------------------------------
// Hostile frames.

#[test]
fn metadata_v0_huge_count_is_refused_without_allocating_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        let mut raw = vec![0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff]; // Metadata v0, null client id
        raw.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
        let err = decode_capped(Bytes::from(raw), &supported).expect_err("attack");
        assert!(
            matches!(
                err,
                RequestError::Precheck {
                    frame_offset: 10,
                    ..
                }
            ),
            "{err}"
        );
    });
}

#[test]
fn huge_counts_written_at_every_position_are_bounded_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        let patterns: [&[u8]; 4] = [
            &[0x7f, 0xff, 0xff, 0xff],       // i32::MAX count / length
            &[0x7f, 0xff],                   // i16::MAX string length
            &[0xff, 0xff, 0xff, 0xff, 0x0f], // u32::MAX as an unsigned varint
            &[0x80, 0x80, 0x80, 0x80, 0x08], // 2^31 as an unsigned varint
        ];
        let mut refused = 0usize;
        for (key, v, alt, _, frame, body_offset) in all_valid_frames() {
            for pos in body_offset..frame.len() {
                for pattern in patterns {
                    let mut raw = frame.to_vec();
                    let end = (pos + pattern.len()).min(raw.len());
                    raw[pos..end].copy_from_slice(&pattern[..end - pos]);
                    match decode_capped(Bytes::from(raw), &supported) {
                        Ok(_) => {}
                        Err(RequestError::Precheck { .. } | RequestError::Decode { .. }) => {
                            refused += 1
                        }
                        Err(other) => {
                            panic!("{key:?} v{v} alt={alt} pos {pos}: unexpected {other}")
                        }
                    }
                }
            }
        }
        assert!(refused > 1000, "only {refused} mutations refused");
    });
}

#[test]
fn every_truncation_of_every_valid_frame_is_an_error() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        for (key, v, alt, _, frame, _) in all_valid_frames() {
            for len in 0..frame.len() {
                let res = decode_capped(frame.slice(..len), &supported);
                assert!(
                    res.is_err(),
                    "{key:?} v{v} alt={alt}: prefix of {len} bytes decoded"
                );
            }
        }
    });
}

#[test]
fn trailing_bytes_after_every_valid_frame_are_ignored_never_decoded_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        // Junk that would be a huge count, a negative length or a malformed varint if anything
        // walked or decoded it.
        let junk: &[u8] = &[
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        for (key, v, alt, body, frame, _) in all_valid_frames() {
            let mut raw = frame.to_vec();
            raw.extend_from_slice(junk);
            let raw = Bytes::from(raw);
            let decoded = decode_capped(raw.clone(), &supported)
                .unwrap_or_else(|e| panic!("{key:?} v{v} alt={alt}: {e}"));
            assert!(
                decoded == body,
                "{key:?} v{v} alt={alt}: decoded body differs"
            );
            let full = decode_request(raw, &supported).expect("decodes");
            assert_eq!(full.ignored_trailing_bytes, junk.len(), "{key:?} v{v}");
        }
    });
}

/// librdkafka 2.12's all-topics Metadata v13 request, byte for byte (header v2, default
/// client id): it writes a 4-byte zero placeholder for the topics count and, for all topics at
/// v9+, keeps it, so the body is `00` (null compact array) `00 00 00` and then its real
/// allow_auto_topic_creation, include_topic_authorized_operations and tagged section: 3 bytes
/// that Kafka (and we) ignore.
fn librdkafka_all_topics_metadata_v13(correlation_id: i32, allow_auto_create: bool) -> Bytes {
    let mut raw = vec![0, 3, 0, 13];
    raw.extend_from_slice(&correlation_id.to_be_bytes());
    raw.extend_from_slice(&[0, 7]);
    raw.extend_from_slice(b"rdkafka");
    raw.push(0); // header tagged fields
    raw.extend_from_slice(&[0, 0, 0, 0]); // placeholder: null topics + 3 zero bytes
    raw.extend_from_slice(&[u8::from(allow_auto_create), 0, 0]); // the bytes Kafka ignores
    Bytes::from(raw)
}

#[test]
fn librdkafka_all_topics_metadata_v13_frame_decodes_ignoring_3_bytes() {
    let supported = SupportedVersions::all_covered();
    // A producer asks with allow_auto_create_topics = true, a consumer with false.
    for allow_auto_create in [true, false] {
        let frame = librdkafka_all_topics_metadata_v13(17, allow_auto_create);
        let decoded = decode_request(frame, &supported).expect("librdkafka's request decodes");
        assert_eq!(decoded.api_key, ApiKey::Metadata);
        assert_eq!(decoded.api_version, 13);
        assert_eq!(decoded.header.correlation_id, 17);
        assert_eq!(decoded.header.client_id.as_deref(), Some("rdkafka"));
        assert_eq!(decoded.ignored_trailing_bytes, 3);
        let mut want = MetadataRequest::default();
        want.topics = None;
        // The placeholder's zero bytes are what Kafka reads for these, too.
        want.allow_auto_topic_creation = false;
        want.include_topic_authorized_operations = false;
        assert_eq!(decoded.body, RequestBody::Metadata(want));
    }
}

#[test]
fn frame_decoder_refuses_bad_sizes_and_waits_on_truncation_i10() {
    let dec = FrameDecoder::new(1 << 20);
    for size in [0i32, -1, -100, i32::MIN, (1 << 20) + 1, i32::MAX] {
        let mut buf = BytesMut::from(&size.to_be_bytes()[..]);
        assert!(dec.decode(&mut buf).is_err(), "size {size}");
        assert!(
            buf.capacity() < 1 << 16,
            "reserved {} for size {size}",
            buf.capacity()
        );
    }
    // A valid frame delivered at every split point: nothing until complete, then exactly it.
    let (frame, _) = frame_of(&sample(ApiKey::Metadata, 12, false), 12, 1, false);
    let mut wire = (frame.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(&frame);
    for cut in 0..wire.len() {
        let mut buf = BytesMut::from(&wire[..cut]);
        assert_eq!(dec.decode(&mut buf), Ok(None), "cut {cut}");
        buf.extend_from_slice(&wire[cut..]);
        assert_eq!(dec.decode(&mut buf), Ok(Some(frame.clone())), "cut {cut}");
        assert!(buf.is_empty());
    }
}

#[test]
fn http_and_tls_bytes_are_clean_errors() {
    let supported = SupportedVersions::all_covered();
    let http = b"GET / HTTP/1.1\r\nHost: localhost:9092\r\nUser-Agent: curl/8.0\r\n\r\n";
    let tls: &[u8] = &[
        0x16, 0x03, 0x01, 0x00, 0xf4, 0x01, 0x00, 0x00, 0xf0, 0x03, 0x03, 0x5a, 0x5a, 0x5a, 0x5a,
    ];
    let dec = FrameDecoder::default();
    let mut buf = BytesMut::from(&http[..]);
    assert!(matches!(
        dec.decode(&mut buf),
        Err(FrameError::TooLarge {
            looks_like: Some(ForeignProtocol::Http),
            ..
        })
    ));
    let mut buf = BytesMut::from(tls);
    assert!(matches!(
        dec.decode(&mut buf),
        Err(FrameError::TooLarge {
            looks_like: Some(ForeignProtocol::Tls),
            ..
        })
    ));
    // Even if a huge cap let them through as frames, the header parser refuses them.
    for bytes in [&http[..], tls, &http[4..], &tls[4..]] {
        let res = decode_capped(Bytes::copy_from_slice(bytes), &supported);
        assert!(res.is_err(), "{bytes:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random byte mutations of random valid frames: a value or an error, never a panic or a
    /// big allocation (I10).
    #[test]
    fn random_mutations_never_panic_or_over_allocate_i10(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let frames = all_valid_frames();
        let (_, _, _, _, frame, _) = &frames[pick.index(frames.len())];
        let mut raw = frame.to_vec();
        for (at, value) in &edits {
            let i = at.index(raw.len());
            raw[i] = *value;
        }
        if truncate {
            raw.truncate(cut.index(raw.len() + 1));
        }
        let supported = SupportedVersions::all_covered();
        let _ = decode_capped(Bytes::from(raw), &supported);
    }
}

// ---------------------------------------------------------------------------------------------
// Group requests: the shapes a hostile client would send a coordinator.

/// A frame with a valid header for `key` v`version` and `body` as its raw body.
fn raw_frame(key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = 9;
    header.client_id = Some(s("hostile"));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .expect("header encodes");
    buf.extend_from_slice(body);
    buf.freeze()
}

#[test]
fn join_group_with_huge_protocol_metadata_is_a_view_not_a_copy_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        for v in [0i16, 5, 9] {
            let mut r = JoinGroupRequest::default();
            r.group_id = group("g");
            r.session_timeout_ms = 10_000;
            r.member_id = s("");
            r.protocol_type = s("consumer");
            let mut p = join_group_request::JoinGroupRequestProtocol::default();
            p.name = s("range");
            p.metadata = Bytes::from(vec![7u8; 4 << 20]);
            r.protocols = vec![p];
            let (frame, _) = frame_of(&RequestBody::JoinGroup(r.clone()), v, 9, false);
            // The cap is about the frame's size; the 4 MiB metadata must not be copied again
            // (decode_capped would still pass a single copy, so measure against 1 MiB).
            LARGEST_ALLOC_BYTES.with(|m| m.set(0));
            let decoded = decode_request(frame, &supported).expect("valid");
            let largest = LARGEST_ALLOC_BYTES.with(|m| m.get());
            assert!(largest < 1 << 20, "v{v}: allocated {largest} bytes");
            assert_eq!(decoded.body, RequestBody::JoinGroup(r));
        }
    });
}

#[test]
fn group_requests_with_huge_member_and_protocol_counts_are_refused_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        let huge = [0x7f, 0xff, 0xff, 0xff];
        // JoinGroup v5: group "g", session, rebalance, member "", instance null, type
        // "consumer", then a protocol count of i32::MAX.
        let mut join = vec![0, 1, b'g'];
        join.extend_from_slice(&10_000i32.to_be_bytes());
        join.extend_from_slice(&30_000i32.to_be_bytes());
        join.extend_from_slice(&[0, 0, 0xff, 0xff, 0, 8]);
        join.extend_from_slice(b"consumer");
        join.extend_from_slice(&huge);
        // SyncGroup v3: group "g", generation, member "m", instance null, then i32::MAX
        // assignments.
        let mut sync = vec![0, 1, b'g'];
        sync.extend_from_slice(&1i32.to_be_bytes());
        sync.extend_from_slice(&[0, 1, b'm', 0xff, 0xff]);
        sync.extend_from_slice(&huge);
        // LeaveGroup v3: group "g", then i32::MAX members.
        let mut leave = vec![0, 1, b'g'];
        leave.extend_from_slice(&huge);
        // DeleteGroups v1, OffsetDelete v0, DescribeGroups v0: i32::MAX groups / topics.
        let delete = huge.to_vec();
        let mut offset_delete = vec![0, 1, b'g'];
        offset_delete.extend_from_slice(&huge);
        let describe = huge.to_vec();
        // ConsumerGroupHeartbeat v0 (flexible): group "g", member "m", epoch, instance,
        // rack null, timeout, then a compact count of 2^31 subscribed topics.
        let mut heartbeat = vec![2, b'g', 2, b'm'];
        heartbeat.extend_from_slice(&0i32.to_be_bytes());
        heartbeat.extend_from_slice(&[0, 0]);
        heartbeat.extend_from_slice(&30_000i32.to_be_bytes());
        heartbeat.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        let cases: [(ApiKey, i16, &[u8]); 7] = [
            (ApiKey::JoinGroup, 5, &join),
            (ApiKey::SyncGroup, 3, &sync),
            (ApiKey::LeaveGroup, 3, &leave),
            (ApiKey::DeleteGroups, 1, &delete),
            (ApiKey::OffsetDelete, 0, &offset_delete),
            (ApiKey::DescribeGroups, 0, &describe),
            (ApiKey::ConsumerGroupHeartbeat, 0, &heartbeat),
        ];
        for (key, v, body) in cases {
            let err = decode_capped(raw_frame(key, v, body), &supported)
                .expect_err("a count larger than the frame");
            assert!(
                matches!(err, RequestError::Precheck { .. }),
                "{key:?} v{v}: {err}"
            );
        }
    });
}

/// The ACL APIs' arrays (CreateAcls creations, DeleteAcls filters) and DescribeAcls' strings
/// claiming far more than the frame holds are refused by the pre-check, before
/// `kafka-protocol` sizes a `Vec` from them (I10).
#[test]
fn acl_requests_with_huge_counts_are_refused_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        // CreateAcls v1 / DeleteAcls v1: an i32::MAX element count.
        let huge = vec![0x7f, 0xff, 0xff, 0xff];
        // CreateAcls v3 / DeleteAcls v3 (flexible): a compact count of 2^31.
        let huge_compact = vec![0x80, 0x80, 0x80, 0x80, 0x08];
        // DescribeAcls v1: resource type, then a resource name of i16::MAX bytes.
        let describe = vec![2, 0x7f, 0xff, b'x'];
        // DescribeAcls v3: resource type, then a compact name of 2^31 bytes.
        let describe_compact = vec![2, 0x80, 0x80, 0x80, 0x80, 0x08];
        let cases: [(ApiKey, i16, &[u8]); 6] = [
            (ApiKey::CreateAcls, 1, &huge),
            (ApiKey::CreateAcls, 3, &huge_compact),
            (ApiKey::DeleteAcls, 1, &huge),
            (ApiKey::DeleteAcls, 3, &huge_compact),
            (ApiKey::DescribeAcls, 1, &describe),
            (ApiKey::DescribeAcls, 3, &describe_compact),
        ];
        for (key, v, body) in cases {
            let err = decode_capped(raw_frame(key, v, body), &supported)
                .expect_err("a count larger than the frame");
            assert!(
                matches!(err, RequestError::Precheck { .. }),
                "{key:?} v{v}: {err}"
            );
        }
    });
}

#[test]
fn thousands_of_members_decode_within_the_budget_i10() {
    on_small_stack(|| {
        let supported = SupportedVersions::all_covered();
        let mut leave = LeaveGroupRequest::default();
        leave.group_id = group("g");
        leave.members = (0..5000)
            .map(|i| {
                let mut m = leave_group_request::MemberIdentity::default();
                m.member_id = s(&format!("member-{i}"));
                m
            })
            .collect();
        let mut sync = SyncGroupRequest::default();
        sync.group_id = group("g");
        sync.member_id = s("leader");
        sync.assignments = (0..5000)
            .map(|i| {
                let mut a = sync_group_request::SyncGroupRequestAssignment::default();
                a.member_id = s(&format!("member-{i}"));
                a
            })
            .collect();
        for (body, v) in [
            (RequestBody::LeaveGroup(leave), 5),
            (RequestBody::SyncGroup(sync), 5),
        ] {
            let (frame, _) = frame_of(&body, v, 9, false);
            let decoded = decode_capped(frame, &supported).expect("valid");
            assert_eq!(decoded, body);
        }
    });
}

#[test]
fn allocation_counter_sees_large_allocations() {
    LARGEST_ALLOC_BYTES.with(|m| m.set(0));
    let v = std::hint::black_box(vec![0u8; 1 << 20]);
    assert!(LARGEST_ALLOC_BYTES.with(|m| m.get()) >= 1 << 20);
    drop(v);
}

// ---------------------------------------------------------------------------------------------
// Hostile bytes against the running broker, over raw TCP.
// ---------------------------------------------------------------------------------------------

/// ApiVersions v0 on `stream`: the answer carries our correlation id, error 0, and lists
/// Produce (0), Fetch (1), ListOffsets (2), Metadata (3) and ApiVersions (18).
fn assert_api_versions_ok(stream: &mut TcpStream, correlation_id: i32) {
    stream
        .write_all(&request(18, 0, correlation_id, &[]))
        .expect("write ApiVersions");
    let body = read_frame(stream).expect("ApiVersions response");
    assert!(body.len() >= 10, "short ApiVersions response");
    assert_eq!(&body[0..4], &correlation_id.to_be_bytes(), "correlation id");
    assert_eq!(&body[4..6], &0_i16.to_be_bytes(), "error code");
    let count = i32::from_be_bytes([body[6], body[7], body[8], body[9]]);
    let count = usize::try_from(count).expect("api count");
    assert!(body.len() >= 10 + count * 6, "ApiVersions array truncated");
    let keys: Vec<i16> = (0..count)
        .map(|i| i16::from_be_bytes([body[10 + i * 6], body[11 + i * 6]]))
        .collect();
    for key in [0, 1, 2, 3, 18] {
        assert!(keys.contains(&key), "api key {key} missing from {keys:?}");
    }
}

/// Hostile bytes each cost only their own connection: HTTP, a TLS ClientHello, frame sizes 0,
/// negative and above socket.request.max.bytes, a Metadata v0 body with an absurd array count,
/// an unknown api key and a truncated frame are each answered by closing that connection
/// (within 5 s, without waiting for the advertised bytes); after each a fresh connection gets
/// ApiVersions, a connection opened before them all still works, the process is alive, did not
/// balloon in memory, and a new librdkafka client produces and consumes.
#[test]
fn hostile_bytes_cost_only_their_connection() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        let addr = broker.addr();
        let mut bystander = connect(addr);
        assert_api_versions_ok(&mut bystander, 1);

        let mut tls = vec![
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
        ];
        tls.extend((0..32_u8).map(|i| i.wrapping_mul(37).wrapping_add(11)));
        tls.extend_from_slice(&[0x00; 64]);
        let mut truncated = 100_i32.to_be_bytes().to_vec();
        truncated.extend_from_slice(&[0, 18, 0, 0, 0, 0, 0, 9, 0, 1]);
        let cases: Vec<(&str, Vec<u8>, bool)> = vec![
            (
                "HTTP request",
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                false,
            ),
            ("TLS ClientHello", tls, false),
            ("frame of size 0", 0_i32.to_be_bytes().to_vec(), false),
            (
                "negative frame size",
                (-1_i32).to_be_bytes().to_vec(),
                false,
            ),
            (
                "frame above socket.request.max.bytes",
                (104_857_600_i32 + 1).to_be_bytes().to_vec(),
                false,
            ),
            (
                "Metadata v0 with array count 0x7fffffff",
                request(3, 0, 7, &[0x7f, 0xff, 0xff, 0xff]),
                false,
            ),
            ("unknown api key", request(999, 0, 8, &[]), false),
            ("truncated frame then close", truncated, true),
        ];
        for (i, (what, bytes, half_close)) in cases.iter().enumerate() {
            assert_closed_after(addr, what, bytes, *half_close);
            assert!(broker.is_alive(), "broker died after: {what}");
            let mut fresh = connect(addr);
            assert_api_versions_ok(&mut fresh, 100 + i32::try_from(i).expect("index"));
        }
        assert_api_versions_ok(&mut bystander, 2);
        assert!(broker.is_alive(), "broker alive after all hostile inputs");
        if let Some(kib) = broker.resident_kib() {
            assert!(
                kib < 1024 * 1024,
                "broker resident memory {kib} KiB after hostile input"
            );
        }

        create_topics(&broker, &[("after-hostile", 1)]);
        let mut producer = TestProducer::new(&broker, &[]);
        let acks = producer.produce_all(&[Rec::new("after-hostile", Some(0), b"still here")]);
        assert_eq!(expect_all_ok(&acks), vec![(0, 0)]);
        let consumer = consumer(&broker, &[]);
        let msgs = read_partition(&consumer, "after-hostile", 0, rdkafka::Offset::Beginning, 1);
        assert_eq!(msgs[0].payload(), Some(&b"still here"[..]));
    });
}

/// ApiVersions at a version the broker does not know (KIP-511): the broker answers in the v0
/// format with UNSUPPORTED_VERSION (35) and its supported ranges, so clients can downgrade,
/// and keeps the connection usable.
#[test]
fn api_versions_unknown_version_answers_unsupported_version() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut stream = connect(broker.addr());
        // Header v2 (flexible): key, version, correlation id, client id, empty tagged fields;
        // the body of a v3+ ApiVersions: compact client software name/version, tagged fields.
        let mut req = Vec::new();
        req.extend_from_slice(&18_i16.to_be_bytes());
        req.extend_from_slice(&999_i16.to_be_bytes());
        req.extend_from_slice(&42_i32.to_be_bytes());
        req.extend_from_slice(&1_i16.to_be_bytes());
        req.push(b't');
        req.push(0); // header tagged fields
        req.extend_from_slice(&[2, b'x', 2, b'1', 0]);
        stream.write_all(&frame(&req)).expect("write");
        let body = read_frame(&mut stream).expect("ApiVersions response");
        assert!(body.len() >= 10, "short response");
        assert_eq!(&body[0..4], &42_i32.to_be_bytes(), "correlation id");
        assert_eq!(&body[4..6], &35_i16.to_be_bytes(), "UNSUPPORTED_VERSION");
        let count = i32::from_be_bytes([body[6], body[7], body[8], body[9]]);
        assert!(count > 0, "supported versions listed");
        assert_api_versions_ok(&mut stream, 43);
    });
}
