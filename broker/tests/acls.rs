//! The authorizer over real TCP against the `minikafka` binary (I48, I49): the ACL APIs with
//! `authorizer.class.name` set, ACLs stored across a restart, and each kind of resource
//! refused with Kafka's code (topic: Produce, Fetch, Metadata; group: JoinGroup,
//! OffsetCommit; cluster: CreateTopics, CreateAcls; transactional id: InitProducerId), and
//! each transaction API refused per resource then allowed once granted.
//!
//! With no principal mechanism on PLAINTEXT every connection is `User:ANONYMOUS`, so the
//! tests grant and deny that principal. Real clients are in `tests/interop/test_acls.py`.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::error_code::ErrorCode;
use minikafka_core::record::{BatchBuilder, NewRecord};
use minikafka_core::types::Offset;

use common::librdkafka::TEST_LIMIT;
use common::typed::TypedClient;
use common::{bounded, Broker};

const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const ANONYMOUS: &str = "User:ANONYMOUS";
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const TRANSACTIONAL_ID: i8 = 5;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const CREATE: i8 = 5;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

struct Acl {
    resource_type: i8,
    name: &'static str,
    pattern: i8,
    host: &'static str,
    operation: i8,
    permission: i8,
}

fn acl(resource_type: i8, name: &'static str, operation: i8, permission: i8) -> Acl {
    Acl {
        resource_type,
        name,
        pattern: LITERAL,
        host: "*",
        operation,
        permission,
    }
}

/// A broker with the authorizer on where anything no ACL names is allowed, so ANONYMOUS can
/// manage ACLs (no ACL names the cluster) and each test denies what it needs.
fn open_broker() -> Broker {
    Broker::builder()
        .with("authorizer.class.name", STANDARD)
        .with("allow.everyone.if.no.acl.found", "true")
        .start()
}

fn create_acls(client: &mut TypedClient, acls: &[Acl]) -> Vec<i16> {
    let mut request = CreateAclsRequest::default();
    request.creations = acls
        .iter()
        .map(|a| {
            let mut c = create_acls_request::AclCreation::default();
            c.resource_type = a.resource_type;
            c.resource_name = s(a.name);
            c.resource_pattern_type = a.pattern;
            c.principal = s(ANONYMOUS);
            c.host = s(a.host);
            c.operation = a.operation;
            c.permission_type = a.permission;
            c
        })
        .collect();
    let response: CreateAclsResponse = client.call(ApiKey::CreateAcls, 3, &request);
    response.results.iter().map(|r| r.error_code).collect()
}

fn describe_all(client: &mut TypedClient) -> DescribeAclsResponse {
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = 1;
    request.pattern_type_filter = 1;
    request.operation = 1;
    request.permission_type = 1;
    // kafka-protocol's defaults are empty strings, which match only empty names.
    request.resource_name_filter = None;
    request.principal_filter = None;
    request.host_filter = None;
    client.call(ApiKey::DescribeAcls, 3, &request)
}

fn produce(client: &mut TypedClient, topic: &str) -> i16 {
    let mut builder = BatchBuilder::new();
    builder.push(&NewRecord {
        timestamp_ms: 1_700_000_000_000,
        value: Some(b"v"),
        ..NewRecord::default()
    });
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(builder.build(Offset(0)).into());
    let mut t = TopicProduceData::default();
    t.name = TopicName(s(topic));
    t.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request);
    assert_eq!(response.responses.len(), 1);
    response.responses[0].partition_responses[0].error_code
}

/// A Fetch of partition 0 from offset 0 that waits up to `max_wait_ms` for 1 MiB.
fn fetch(client: &mut TypedClient, topic: &str, max_wait_ms: i32) -> i16 {
    let mut partition = fetch_request::FetchPartition::default();
    partition.partition = 0;
    partition.partition_max_bytes = 1 << 20;
    let mut t = fetch_request::FetchTopic::default();
    t.topic = TopicName(s(topic));
    t.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = max_wait_ms;
    request.min_bytes = 1 << 20;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request);
    response.responses[0].partitions[0].error_code
}

fn create_topic(client: &mut TypedClient, topic: &str) -> i16 {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(s(topic));
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![t];
    request.timeout_ms = 10_000;
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request);
    response.topics[0].error_code
}

fn metadata(client: &mut TypedClient, topics: Option<&[&str]>) -> MetadataResponse {
    let mut request = MetadataRequest::default();
    request.topics = topics.map(|names| {
        names
            .iter()
            .map(|n| {
                let mut t = metadata_request::MetadataRequestTopic::default();
                t.name = Some(TopicName(s(n)));
                t
            })
            .collect()
    });
    request.include_topic_authorized_operations = true;
    client.call(ApiKey::Metadata, 12, &request)
}

const TOPIC_DENIED: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
const GROUP_DENIED: i16 = ErrorCode::GROUP_AUTHORIZATION_FAILED.code();
const CLUSTER_DENIED: i16 = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
const TXN_DENIED: i16 = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();

#[test]
fn acls_are_created_described_deleted_and_survive_a_restart() {
    bounded(TEST_LIMIT, || {
        let mut broker = open_broker();
        let mut client = TypedClient::connect(broker.addr());
        let codes = create_acls(
            &mut client,
            &[
                acl(TOPIC, "orders", WRITE, DENY),
                Acl {
                    pattern: PREFIXED,
                    ..acl(TOPIC, "pay", READ, ALLOW)
                },
                acl(GROUP, "g", ALL, ALLOW),
                // MATCH (2) is a filter, never an ACL's pattern: refused alone.
                Acl {
                    pattern: 2,
                    ..acl(TOPIC, "x", READ, ALLOW)
                },
            ],
        );
        assert_eq!(codes, vec![0, 0, 0, ErrorCode::INVALID_REQUEST.code()]);
        let described = describe_all(&mut client);
        assert_eq!(described.error_code, 0);
        let names: Vec<(i8, String, i8, usize)> = described
            .resources
            .iter()
            .map(|r| {
                (
                    r.resource_type,
                    r.resource_name.to_string(),
                    r.pattern_type,
                    r.acls.len(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (TOPIC, "orders".into(), LITERAL, 1),
                (TOPIC, "pay".into(), PREFIXED, 1),
                (GROUP, "g".into(), LITERAL, 1),
            ]
        );
        drop(client);

        // A crash right after the answers: what was answered is stored (I49).
        broker.kill9();
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(describe_all(&mut client).resources.len(), 3, "stored");
        assert_eq!(produce(&mut client, "orders"), TOPIC_DENIED, "in force");

        // MATCH on "payments" selects the PREFIXED "pay" ACL only.
        let mut filter = delete_acls_request::DeleteAclsFilter::default();
        filter.resource_type_filter = TOPIC;
        filter.resource_name_filter = Some(s("payments"));
        filter.pattern_type_filter = 2;
        filter.operation = 1;
        filter.permission_type = 1;
        filter.principal_filter = None;
        filter.host_filter = None;
        let mut request = DeleteAclsRequest::default();
        request.filters = vec![filter];
        let deleted: DeleteAclsResponse = client.call(ApiKey::DeleteAcls, 3, &request);
        assert_eq!(deleted.filter_results[0].error_code, 0);
        let matched: Vec<String> = deleted.filter_results[0]
            .matching_acls
            .iter()
            .map(|m| m.resource_name.to_string())
            .collect();
        assert_eq!(matched, vec!["pay".to_string()]);
        broker.stop();
        broker.restart();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(
            describe_all(&mut client).resources.len(),
            2,
            "deletion stored"
        );
    });
}

#[test]
fn each_kind_of_resource_is_refused_with_kafkas_code() {
    bounded(TEST_LIMIT, || {
        let broker = open_broker();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(create_topic(&mut client, "open"), 0);
        assert_eq!(create_topic(&mut client, "secret"), 0);
        let codes = create_acls(
            &mut client,
            &[
                // DENY over ALLOW: everything on "secret" but READ and WRITE.
                acl(TOPIC, "secret", ALL, ALLOW),
                acl(TOPIC, "secret", WRITE, DENY),
                acl(TOPIC, "secret", READ, DENY),
                acl(TOPIC, "hidden", DESCRIBE, DENY),
                acl(GROUP, "closed", READ, DENY),
                acl(TRANSACTIONAL_ID, "tx", WRITE, DENY),
                acl(CLUSTER, "kafka-cluster", CREATE, DENY),
            ],
        );
        assert!(codes.iter().all(|&c| c == 0), "{codes:?}");

        // Topic.
        assert_eq!(produce(&mut client, "open"), 0);
        assert_eq!(produce(&mut client, "secret"), TOPIC_DENIED);
        // No long poll here: a 1 MiB min_bytes would hold the answer for all of max_wait.
        assert_eq!(fetch(&mut client, "open", 0), 0);
        // Answered at once, not after the 60 s long poll: a denial ends the wait. (The bound
        // is far from both, so a loaded machine cannot tell them apart wrongly.)
        client.set_read_timeout(std::time::Duration::from_secs(90));
        let started = std::time::Instant::now();
        assert_eq!(fetch(&mut client, "secret", 60_000), TOPIC_DENIED);
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        client.set_read_timeout(std::time::Duration::from_secs(5));

        // Metadata: a topic the caller may not describe is left out of "all topics" and
        // refused by name. CreateTopics needs CREATE on the cluster (denied) or on the topic
        // (ACLs name "hidden" and none allows it).
        let all = metadata(&mut client, None);
        let listed: Vec<String> = all
            .topics
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
            .collect();
        assert!(listed.contains(&"open".to_string()) && !listed.contains(&"hidden".to_string()));
        let named = metadata(&mut client, Some(&["hidden"]));
        assert_eq!(named.topics[0].error_code, TOPIC_DENIED);
        assert_eq!(
            create_topic(&mut client, "hidden"),
            TOPIC_DENIED,
            "no CREATE: cluster denied, topic has ACLs"
        );
        // The caller's own operations: DESCRIBE of "open" yes; everything on "secret" but
        // READ and WRITE.
        let open = metadata(&mut client, Some(&["open", "secret"]));
        let ops = |i: usize| open.topics[i].topic_authorized_operations;
        assert_ne!(ops(0) & (1 << WRITE), 0);
        assert_eq!(ops(1) & (1 << WRITE), 0);
        assert_eq!(ops(1) & (1 << READ), 0);
        assert_ne!(ops(1) & (1 << DESCRIBE), 0);

        // Group.
        let mut join = JoinGroupRequest::default();
        join.group_id = GroupId(s("closed"));
        join.session_timeout_ms = 10_000;
        join.rebalance_timeout_ms = 10_000;
        join.protocol_type = s("consumer");
        let joined: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &join);
        assert_eq!(joined.error_code, GROUP_DENIED);
        let mut commit = OffsetCommitRequest::default();
        commit.group_id = GroupId(s("closed"));
        commit.generation_id_or_member_epoch = -1;
        let mut ct = offset_commit_request::OffsetCommitRequestTopic::default();
        ct.name = TopicName(s("open"));
        ct.partitions = vec![offset_commit_request::OffsetCommitRequestPartition::default()];
        commit.topics = vec![ct];
        let committed: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &commit);
        assert_eq!(committed.topics[0].partitions[0].error_code, GROUP_DENIED);

        // Transactional id.
        let mut init = InitProducerIdRequest::default();
        init.transactional_id = Some(TransactionalId(s("tx")));
        init.transaction_timeout_ms = 60_000;
        init.producer_id = (-1).into();
        init.producer_epoch = -1;
        let inited: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &init);
        assert_eq!(inited.error_code, TXN_DENIED);

        // Cluster: CreateAcls needs ALTER on the cluster; once an ACL names the cluster
        // without granting it, ANONYMOUS may no longer manage ACLs.
        assert_eq!(
            create_acls(&mut client, &[acl(TOPIC, "t", READ, ALLOW)]),
            vec![CLUSTER_DENIED]
        );
        assert_eq!(describe_all(&mut client).error_code, CLUSTER_DENIED);
    });
}

#[test]
fn host_matching_and_super_users() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::builder()
            .with(
                "authorizer.class.name",
                "kafka.security.authorizer.AclAuthorizer",
            )
            .with("super.users", "User:admin;User:ANONYMOUS")
            .start();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(create_topic(&mut client, "t"), 0);
        // A super user is allowed whatever the ACLs say.
        let codes = create_acls(&mut client, &[acl(TOPIC, "t", WRITE, DENY)]);
        assert_eq!(codes, vec![0]);
        assert_eq!(produce(&mut client, "t"), 0);
        drop(broker);

        let broker = open_broker();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(create_topic(&mut client, "t"), 0);
        let elsewhere = Acl {
            host: "10.1.2.3",
            ..acl(TOPIC, "t", WRITE, DENY)
        };
        let here = Acl {
            host: "127.0.0.1",
            ..acl(TOPIC, "t", WRITE, DENY)
        };
        // A DENY for another host leaves an ACL on "t" and no ALLOW: denied (no ALLOW
        // applies), but for the lack of an ALLOW, so grant WRITE to every host first.
        assert_eq!(
            create_acls(&mut client, &[acl(TOPIC, "t", WRITE, ALLOW), elsewhere]),
            vec![0, 0]
        );
        assert_eq!(
            produce(&mut client, "t"),
            0,
            "a DENY for another host does not apply"
        );
        assert_eq!(create_acls(&mut client, &[here]), vec![0]);
        assert_eq!(produce(&mut client, "t"), TOPIC_DENIED, "DENY over ALLOW");
    });
}

#[test]
fn without_an_authorizer_acls_are_neither_stored_nor_checked() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        let codes = create_acls(&mut client, &[acl(TOPIC, "t", WRITE, DENY)]);
        assert_eq!(codes, vec![ErrorCode::SECURITY_DISABLED.code()]);
        assert_eq!(create_topic(&mut client, "t"), 0);
        assert_eq!(produce(&mut client, "t"), 0);
        assert!(!broker.data_dir().join("acls.v1").exists());
    });
}

const CLUSTER_ACTION: i8 = 9;
const ALTER: i8 = 7;

fn add_partitions_v3(
    client: &mut TypedClient,
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<(String, i16)> {
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s(id));
    req.v3_and_below_producer_id = ProducerId(pid);
    req.v3_and_below_producer_epoch = epoch;
    req.v3_and_below_topics = partitions
        .iter()
        .map(|(topic, p)| {
            let mut t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            t.name = TopicName(s(topic));
            t.partitions = vec![*p];
            t
        })
        .collect();
    let r: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, 3, &req);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_error_code))
        })
        .collect()
}

fn init_txn(client: &mut TypedClient, id: &str) -> (i16, (i64, i16)) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let r: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &req);
    (r.error_code, (r.producer_id.0, r.producer_epoch))
}

fn add_offsets(client: &mut TypedClient, id: &str, pe: (i64, i16), group: &str) -> i16 {
    let mut req = AddOffsetsToTxnRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.group_id = GroupId(s(group));
    let r: AddOffsetsToTxnResponse = client.call(ApiKey::AddOffsetsToTxn, 3, &req);
    r.error_code
}

fn txn_commit_offset(
    client: &mut TypedClient,
    id: &str,
    pe: (i64, i16),
    group: &str,
    topic: &str,
) -> Vec<i16> {
    let mut p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 0;
    let mut t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![p];
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.group_id = GroupId(s(group));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.generation_id = -1;
    req.topics = vec![t];
    let r: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 3, &req);
    r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn end_txn(client: &mut TypedClient, id: &str, pe: (i64, i16)) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.committed = true;
    let r: EndTxnResponse = client.call(ApiKey::EndTxn, 3, &req);
    r.error_code
}

fn describe_txns(client: &mut TypedClient, ids: &[&str]) -> Vec<(String, i16)> {
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = ids.iter().map(|id| TransactionalId(s(id))).collect();
    let r: DescribeTransactionsResponse = client.call(ApiKey::DescribeTransactions, 0, &req);
    let mut out: Vec<(String, i16)> = r
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.error_code))
        .collect();
    out.sort();
    out
}

fn list_txns(client: &mut TypedClient) -> Vec<String> {
    let req = ListTransactionsRequest::default();
    let r: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 1, &req);
    assert_eq!(r.error_code, 0);
    let mut ids: Vec<String> = r
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.0.to_string())
        .collect();
    ids.sort();
    ids
}

/// The transaction APIs check Kafka's ACLs (I48): each step of a transactional producer's
/// flow refused per resource with Kafka's code, the broker-only APIs refused without
/// CLUSTER_ACTION, and the same flow through to a commit once the ACLs grant it.
#[test]
fn the_transaction_apis_check_each_resource() {
    bounded(TEST_LIMIT, || {
        let broker = open_broker();
        let mut client = TypedClient::connect(broker.addr());
        assert_eq!(create_topic(&mut client, "tt"), 0);
        assert_eq!(create_topic(&mut client, "tt2"), 0);
        assert_eq!(create_topic(&mut client, "tt3"), 0);
        // "hid" has a transaction before an ACL hides it.
        let (code, _) = init_txn(&mut client, "hid");
        assert_eq!(code, 0);
        let (code, pe) = init_txn(&mut client, "tx");
        assert_eq!(code, 0);
        let denials = [
            acl(TRANSACTIONAL_ID, "txd", WRITE, DENY),
            acl(TRANSACTIONAL_ID, "txd", DESCRIBE, DENY),
            acl(TRANSACTIONAL_ID, "hid", DESCRIBE, DENY),
            acl(TOPIC, "tt2", WRITE, DENY),
            acl(TOPIC, "tt2", READ, DENY),
            acl(GROUP, "gd", READ, DENY),
            acl(CLUSTER, "kafka-cluster", CLUSTER_ACTION, DENY),
            acl(CLUSTER, "kafka-cluster", DESCRIBE, DENY),
        ];
        let mut acls = vec![acl(CLUSTER, "kafka-cluster", ALTER, ALLOW)];
        acls.extend(denials);
        let codes = create_acls(&mut client, &acls);
        assert!(codes.iter().all(|&c| c == 0), "{codes:?}");

        // AddPartitionsToTxn: the transactional id, then each topic; a denied topic fails
        // the transaction (the others OPERATION_NOT_ATTEMPTED).
        assert_eq!(
            add_partitions_v3(&mut client, "txd", pe, &[("tt", 0)]),
            vec![("tt".to_string(), TXN_DENIED)]
        );
        assert_eq!(
            add_partitions_v3(&mut client, "tx", pe, &[("tt", 0), ("tt2", 0)]),
            vec![
                ("tt".to_string(), ErrorCode::OPERATION_NOT_ATTEMPTED.code()),
                ("tt2".to_string(), TOPIC_DENIED)
            ]
        );
        // An internal topic is never the caller's to add, whatever the ACLs say.
        assert_eq!(
            add_partitions_v3(&mut client, "tx", pe, &[("__consumer_offsets", 0)]),
            vec![("__consumer_offsets".to_string(), TOPIC_DENIED)]
        );
        // v4+ batches come from brokers: CLUSTER_ACTION.
        let mut batch = AddPartitionsToTxnRequest::default();
        let mut one = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default();
        one.transactional_id = TransactionalId(s("tx"));
        one.producer_id = ProducerId(pe.0);
        one.producer_epoch = pe.1;
        one.verify_only = true;
        batch.transactions.push(one);
        let r: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, 4, &batch);
        assert_eq!(r.error_code, CLUSTER_DENIED);
        // WriteTxnMarkers: CLUSTER_ACTION too.
        let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
        topic.name = TopicName(s("tt"));
        topic.partition_indexes = vec![0];
        let mut marker = write_txn_markers_request::WritableTxnMarker::default();
        marker.producer_id = ProducerId(pe.0);
        marker.producer_epoch = pe.1;
        marker.topics = vec![topic];
        let mut markers = WriteTxnMarkersRequest::default();
        markers.markers = vec![marker];
        let r: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, 1, &markers);
        assert_eq!(
            r.markers[0].topics[0].partitions[0].error_code,
            CLUSTER_DENIED
        );

        // AddOffsetsToTxn: the transactional id, then READ on the group.
        assert_eq!(add_offsets(&mut client, "txd", pe, "g"), TXN_DENIED);
        assert_eq!(add_offsets(&mut client, "tx", pe, "gd"), GROUP_DENIED);
        // TxnOffsetCommit: the transactional id, the group, then READ on each topic.
        assert_eq!(
            txn_commit_offset(&mut client, "txd", pe, "g", "tt"),
            vec![TXN_DENIED]
        );
        assert_eq!(
            txn_commit_offset(&mut client, "tx", pe, "gd", "tt"),
            vec![GROUP_DENIED]
        );
        assert_eq!(
            txn_commit_offset(&mut client, "tx", pe, "g", "tt2"),
            vec![TOPIC_DENIED]
        );
        // EndTxn: the transactional id.
        assert_eq!(end_txn(&mut client, "txd", pe), TXN_DENIED);
        // DescribeTransactions per id; ListTransactions shows only what may be described.
        assert_eq!(
            describe_txns(&mut client, &["tx", "txd"]),
            vec![("tx".to_string(), 0), ("txd".to_string(), TXN_DENIED)]
        );
        assert_eq!(list_txns(&mut client), vec!["tx".to_string()]);
        // FindCoordinator for a transactional id: DESCRIBE.
        let mut find = FindCoordinatorRequest::default();
        find.key_type = 1;
        find.coordinator_keys = vec![s("txd")];
        let r: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 4, &find);
        assert_eq!(r.coordinators[0].error_code, TXN_DENIED);
        // The SCRAM credentials: DESCRIBE on the cluster.
        let r: DescribeUserScramCredentialsResponse = client.call(
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default(),
        );
        assert_eq!(r.error_code, CLUSTER_DENIED);

        // Granted: the denials replaced by ALLOWs, the flow runs through to a commit.
        let mut filter = delete_acls_request::DeleteAclsFilter::default();
        filter.resource_type_filter = 1;
        filter.resource_name_filter = None;
        filter.pattern_type_filter = 1;
        filter.operation = 1;
        filter.permission_type = DENY;
        filter.principal_filter = None;
        filter.host_filter = None;
        let mut request = DeleteAclsRequest::default();
        request.filters = vec![filter];
        let deleted: DeleteAclsResponse = client.call(ApiKey::DeleteAcls, 3, &request);
        assert_eq!(
            deleted.filter_results[0].matching_acls.len(),
            acls.len() - 1
        );
        let grants = [
            acl(TRANSACTIONAL_ID, "txd", WRITE, ALLOW),
            acl(TRANSACTIONAL_ID, "txd", DESCRIBE, ALLOW),
            acl(TOPIC, "tt2", WRITE, ALLOW),
            acl(TOPIC, "tt2", READ, ALLOW),
            acl(GROUP, "gd", READ, ALLOW),
            // "tt3" may be written but not described.
            acl(TOPIC, "tt3", WRITE, ALLOW),
            acl(TOPIC, "tt3", DESCRIBE, DENY),
        ];
        let codes = create_acls(&mut client, &grants);
        assert!(codes.iter().all(|&c| c == 0), "{codes:?}");
        let (code, pe) = init_txn(&mut client, "txd");
        assert_eq!(code, 0);
        assert_eq!(
            add_partitions_v3(&mut client, "txd", pe, &[("tt2", 0), ("tt3", 0)]),
            vec![("tt2".to_string(), 0), ("tt3".to_string(), 0)]
        );
        // A described transaction lists only the topics the caller may describe.
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = vec![TransactionalId(s("txd"))];
        let r: DescribeTransactionsResponse = client.call(ApiKey::DescribeTransactions, 0, &req);
        let topics: Vec<String> = r.transaction_states[0]
            .topics
            .iter()
            .map(|t| t.topic.0.to_string())
            .collect();
        assert_eq!(topics, vec!["tt2".to_string()]);
        assert_eq!(add_offsets(&mut client, "txd", pe, "gd"), 0);
        assert_eq!(
            txn_commit_offset(&mut client, "txd", pe, "gd", "tt2"),
            vec![0]
        );
        assert_eq!(end_txn(&mut client, "txd", pe), 0);
        assert_eq!(
            describe_txns(&mut client, &["txd"]),
            vec![("txd".to_string(), 0)]
        );

        // AlterUserScramCredentials: ALTER on the cluster (the last ACL change it allows).
        let codes = create_acls(&mut client, &[acl(CLUSTER, "kafka-cluster", ALTER, DENY)]);
        assert_eq!(codes, vec![0]);
        let mut upsert = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
        upsert.name = s("alice");
        upsert.mechanism = 1;
        upsert.iterations = 4096;
        upsert.salt = vec![1u8; 16].into();
        upsert.salted_password = vec![2u8; 32].into();
        let mut alter = AlterUserScramCredentialsRequest::default();
        alter.upsertions = vec![upsert];
        let r: AlterUserScramCredentialsResponse =
            client.call(ApiKey::AlterUserScramCredentials, 0, &alter);
        let codes: Vec<(String, i16)> = r
            .results
            .iter()
            .map(|u| (u.user.to_string(), u.error_code))
            .collect();
        assert_eq!(codes, vec![("alice".to_string(), CLUSTER_DENIED)]);
    });
}
