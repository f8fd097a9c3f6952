//! The authorizer's checks of each API, before its handler runs and on its answer (I48), as
//! one table: a row per API, run by one engine (I151).
//!
//! Contract:
//! - A check either answers the whole request (a denial the handler never sees: one group,
//!   the cluster, one transactional id), or takes the denied elements out of the request
//!   (`split`) and gives back their answers with Kafka's code, to be put beside the
//!   handler's answer: the handler runs only on what the caller may do.
//! - The operations are Kafka's (`KafkaApis`/`AuthHelper`): Produce WRITE on each topic (and
//!   WRITE on the transactional id when one is given); Fetch READ; ListOffsets,
//!   OffsetForLeaderEpoch and Metadata DESCRIBE; CreateTopics CREATE on the cluster or the
//!   topic; DeleteTopics and DeleteRecords DELETE; CreatePartitions ALTER; the group
//!   membership APIs and OffsetCommit READ on the group (OffsetCommit also READ on each
//!   topic); OffsetFetch DESCRIBE on the group and on each topic; DeleteGroups and
//!   OffsetDelete DELETE on the group; DescribeGroups DESCRIBE; configs
//!   DESCRIBE_CONFIGS/ALTER_CONFIGS on the resource; DescribeCluster and DescribeLogDirs
//!   DESCRIBE on the cluster; FindCoordinator DESCRIBE on the group or transactional id;
//!   InitProducerId WRITE on the transactional id, or, without one, IDEMPOTENT_WRITE on the
//!   cluster or WRITE on some topic (KIP-679). The transactions: AddPartitionsToTxn v0–3
//!   WRITE on the transactional id and each topic (a denied topic fails the whole
//!   transaction), v4+ (brokers only) and WriteTxnMarkers CLUSTER_ACTION on the cluster;
//!   AddOffsetsToTxn and TxnOffsetCommit WRITE on the transactional id then READ on the
//!   group (TxnOffsetCommit also READ on each topic); EndTxn WRITE on the transactional id;
//!   DescribeTransactions and ListTransactions DESCRIBE on each id. SCRAM credentials:
//!   Describe DESCRIBE, Alter ALTER on the cluster.
//! - The table (I151): a row per API says what its request's items name ([`Target`]), the
//!   operation each needs, what is checked first ([`First`]: whole-request [`Gate`]s or a
//!   cluster grant) and how a denied item is answered; the four kinds of row ([`PerItem`],
//!   [`Whole`], [`Visible`], [`Bitfields`]) share one engine, and the denial code follows
//!   from the resource checked. The dispatcher (`handlers/mod.rs`) calls the API's row. The
//!   checks whose shape is their own are written out at the end of this file.
//! - With no authorizer every check allows, so nothing is split and nothing changes.
//! - KIP-430 bitfields a handler filled (any value but the "not requested" sentinel) are
//!   replaced by the caller's own operations.

use std::borrow::Cow;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::acl::{Operation, ResourceType};
use minikafka_core::authorized_operations::OMITTED;
use minikafka_core::error_code::ErrorCode;
use uuid::Uuid;

use crate::server::authz::{Caller, CLUSTER_NAME};
use crate::server::groups::offsets_topic::is_internal;
use crate::server::shard_context::{Authorizer, TopicCatalogue};

const TOPIC_DENIED: i16 = ErrorCode::TOPIC_AUTHORIZATION_FAILED.code();
const GROUP_DENIED: i16 = ErrorCode::GROUP_AUTHORIZATION_FAILED.code();
const CLUSTER_DENIED: i16 = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
const TXN_DENIED: i16 = ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code();

/// Kafka's config resource types (DescribeConfigs, AlterConfigs) that are not the cluster.
const CONFIG_TOPIC: i8 = 2;
const CONFIG_GROUP: i8 = 32;

/// What the checks ask of the broker: the authorizer, and the catalogue for a topic named
/// by id (I150). The shard and the shared registry both are one.
pub trait AuthzView: Authorizer + TopicCatalogue {}

impl<T: Authorizer + TopicCatalogue + ?Sized> AuthzView for T {}

// ---------------------------------------------------------------------------------------
// The shared code: what a check names, and the four kinds of row.
// ---------------------------------------------------------------------------------------

/// What a request, or one item of it, names for a check.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A topic by name, or by id when the id is not nil. An id no topic has is not checked:
    /// the handler answers UNKNOWN_TOPIC_ID without saying whether it exists.
    Topic(&'a str, Uuid),
    /// A consumer group.
    Group(&'a str),
    /// A transactional id.
    TransactionalId(&'a str),
    /// The cluster.
    Cluster,
    /// A configuration resource: Kafka's config resource type and its name. Topics and
    /// groups are themselves; brokers, broker loggers, CLIENT_METRICS and unknown types are
    /// the cluster, as Kafka guards them.
    Config(i8, &'a str),
}

impl<'a> Target<'a> {
    /// A topic named by name only.
    fn topic(name: &'a str) -> Target<'a> {
        Target::Topic(name, Uuid::nil())
    }

    /// The ACL resource and name checked; `None` for a topic id no topic has.
    fn resource(self, broker: &impl AuthzView) -> Option<(ResourceType, Cow<'a, str>)> {
        Some(match self {
            Target::Topic(name, id) if id.is_nil() => (ResourceType::Topic, name.into()),
            Target::Topic(_, id) => (
                ResourceType::Topic,
                broker.topic_by_id(id)?.name.clone().into(),
            ),
            Target::Group(name) | Target::Config(CONFIG_GROUP, name) => {
                (ResourceType::Group, name.into())
            }
            Target::Config(CONFIG_TOPIC, name) => (ResourceType::Topic, name.into()),
            Target::TransactionalId(id) => (ResourceType::TransactionalId, id.into()),
            Target::Cluster | Target::Config(..) => (ResourceType::Cluster, CLUSTER_NAME.into()),
        })
    }

    /// The code that answers `caller` when it may not do `operation` on this; `None` when
    /// it may (always, with no authorizer) or when there is nothing to check.
    fn denial(self, broker: &impl AuthzView, caller: &Caller, operation: Operation) -> Option<i16> {
        if !broker.authorizer_enabled() {
            return None;
        }
        let (resource, name) = self.resource(broker)?;
        (!broker.allowed(caller, resource, &name, operation)).then_some(match resource {
            ResourceType::Topic => TOPIC_DENIED,
            ResourceType::Group => GROUP_DENIED,
            ResourceType::Cluster => CLUSTER_DENIED,
            ResourceType::TransactionalId => TXN_DENIED,
        })
    }

    fn allows(self, broker: &impl AuthzView, caller: &Caller, operation: Operation) -> bool {
        self.denial(broker, caller, operation).is_none()
    }
}

/// A check of the whole request: `operation` on what `target` names (`None`: no check).
pub struct Gate<Req> {
    /// The operation needed.
    pub operation: Operation,
    /// What the request names.
    pub target: for<'a> fn(&'a Req) -> Option<Target<'a>>,
}

/// The code of the first gate that refuses `caller`, if one does.
fn first_denial<Req>(
    gates: &[Gate<Req>],
    broker: &impl AuthzView,
    caller: &Caller,
    r: &Req,
) -> Option<i16> {
    gates
        .iter()
        .find_map(|g| (g.target)(r)?.denial(broker, caller, g.operation))
}

/// A row for an API whose denial answers the whole request (the handler never runs).
pub struct Whole<Req: 'static, Resp> {
    /// Checked in order; the first refusal's code is the answer's.
    pub gates: &'static [Gate<Req>],
    /// The answer with that code.
    pub answer: fn(&Req, i16) -> Resp,
}

impl<Req: 'static, Resp> Whole<Req, Resp> {
    /// The answer when `caller` may not make `request`; `None` when the handler may run.
    pub fn denied(&self, broker: &impl AuthzView, caller: &Caller, request: &Req) -> Option<Resp> {
        let code = first_denial(self.gates, broker, caller, request)?;
        Some((self.answer)(request, code))
    }
}

/// What a per-item row checks before the items: the request-level half of its row.
pub enum First<Req: 'static> {
    /// Nothing: each item is checked on its own.
    Nothing,
    /// Whole-request checks, in order: the first refusal answers every item with its code.
    Gates(&'static [Gate<Req>]),
    /// An operation on the cluster that allows every item (CreateTopics' CREATE).
    ClusterGrant(Operation),
}

/// A row for an API that is checked item by item (topics, groups, resources, ids).
pub struct PerItem<Req: 'static, Item, Answer> {
    /// What is checked before the items.
    pub first: First<Req>,
    /// The operation each item needs on what it names.
    pub operation: Operation,
    /// The request's items.
    pub items: fn(&mut Req) -> &mut Vec<Item>,
    /// What an item names.
    pub target: for<'a> fn(&'a Item) -> Target<'a>,
    /// A denied item's answer, with the code of its denial.
    pub answer: fn(Item, i16) -> Answer,
}

impl<Req: 'static, Item, Answer> PerItem<Req, Item, Answer> {
    /// Takes the items `caller` may not touch out of `request` (order kept on both sides)
    /// and gives back their answers.
    pub fn split(
        &self,
        broker: &impl AuthzView,
        caller: &Caller,
        request: &mut Req,
    ) -> Vec<Answer> {
        if !broker.authorizer_enabled() {
            // Every check allows: leave the request as it came (the produce and fetch path).
            return Vec::new();
        }
        let whole = match self.first {
            First::Gates(gates) => first_denial(gates, broker, caller, request),
            First::ClusterGrant(op) if Target::Cluster.allows(broker, caller, op) => {
                return Vec::new();
            }
            First::ClusterGrant(_) | First::Nothing => None,
        };
        let items = (self.items)(request);
        let mut denied = Vec::new();
        let asked = std::mem::take(items);
        items.reserve(asked.len());
        for item in asked {
            let code =
                whole.or_else(|| (self.target)(&item).denial(broker, caller, self.operation));
            match code {
                Some(code) => denied.push((self.answer)(item, code)),
                None => items.push(item),
            }
        }
        denied
    }
}

/// A row for an answer the handler gave in full that shows only what the caller may see.
pub struct Visible<Resp, Item> {
    /// An operation on the cluster that shows every item (ListGroups' DESCRIBE).
    pub cluster_grant: Option<Operation>,
    /// The operation needed to see an item.
    pub operation: Operation,
    /// The answer's items.
    pub items: fn(&mut Resp) -> &mut Vec<Item>,
    /// What an item names.
    pub target: for<'a> fn(&'a Item) -> Target<'a>,
}

impl<Resp, Item> Visible<Resp, Item> {
    /// Leaves in `response` only the items `caller` may see.
    pub fn retain(&self, broker: &impl AuthzView, caller: &Caller, response: &mut Resp) {
        if let Some(op) = self.cluster_grant {
            if Target::Cluster.allows(broker, caller, op) {
                return;
            }
        }
        (self.items)(response).retain(|i| (self.target)(i).allows(broker, caller, self.operation));
    }
}

/// A row for an answer's KIP-430 bitfields, made the caller's own operations.
pub struct Bitfields<Resp, Item> {
    /// The answer's items.
    pub items: fn(&mut Resp) -> &mut Vec<Item>,
    /// An item's bitfield and what it is of; `None` leaves the item as answered.
    pub field: for<'a> fn(&'a mut Item) -> Option<(&'a mut i32, Target<'a>)>,
}

impl<Resp, Item> Bitfields<Resp, Item> {
    /// Puts the caller's bitfield in place of each one the handler filled (any value but
    /// the "not requested" sentinel).
    pub fn fill(&self, broker: &impl AuthzView, caller: &Caller, response: &mut Resp) {
        for item in (self.items)(response) {
            if let Some((field, target)) = (self.field)(item) {
                own_operations(broker, caller, field, target);
            }
        }
    }
}

/// The caller's bitfield in place of one a handler filled.
fn own_operations(broker: &impl AuthzView, caller: &Caller, field: &mut i32, target: Target<'_>) {
    if *field != OMITTED {
        if let Some((resource, name)) = target.resource(broker) {
            *field = broker.authorized_operations(caller, resource, &name, true);
        }
    }
}

/// The message Kafka gives beside a denial code, where the answer has one.
fn denied_message(code: i16) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(match code {
        TOPIC_DENIED => "Topic authorization failed.",
        GROUP_DENIED => "Group authorization failed.",
        _ => "Cluster authorization failed.",
    }))
}

/// One answer per element of `items` (the partitions of a denied topic).
fn each<T, U>(items: &[T], answer: impl FnMut(&T) -> U) -> Vec<U> {
    items.iter().map(answer).collect()
}

// ---------------------------------------------------------------------------------------
// The table: one row per API.
// ---------------------------------------------------------------------------------------

/// READ on the request's group (the group-membership APIs, OffsetCommit, AddOffsetsToTxn).
macro_rules! group_read {
    () => {
        Gate {
            operation: Operation::Read,
            target: |r| Some(Target::Group(&r.group_id)),
        }
    };
}

/// WRITE on the request's transactional id.
macro_rules! txn_write {
    () => {
        Gate {
            operation: Operation::Write,
            target: |r| Some(Target::TransactionalId(&r.transactional_id)),
        }
    };
}

/// `operation` on the cluster, for a request that names nothing else.
macro_rules! on_cluster {
    ($operation:expr) => {
        Gate {
            operation: $operation,
            target: |_| Some(Target::Cluster),
        }
    };
}

/// Produce: WRITE on the transactional id when one is given, then WRITE on each topic.
pub const PRODUCE: PerItem<
    ProduceRequest,
    produce_request::TopicProduceData,
    produce_response::TopicProduceResponse,
> = PerItem {
    first: First::Gates(&[Gate {
        operation: Operation::Write,
        target: |r| {
            r.transactional_id
                .as_ref()
                .map(|id| Target::TransactionalId(id))
        },
    }]),
    operation: Operation::Write,
    items: |r| &mut r.topic_data,
    target: |t| Target::Topic(&t.name, t.topic_id),
    answer: |t, code| {
        produce_response::TopicProduceResponse::default()
            .with_name(t.name)
            .with_topic_id(t.topic_id)
            .with_partition_responses(each(&t.partition_data, |p| {
                produce_response::PartitionProduceResponse::default()
                    .with_index(p.index)
                    .with_error_code(code)
                    .with_base_offset(-1)
            }))
    },
};

/// Fetch: READ on each topic. The dispatcher answers a request with a denial at once (no
/// long poll), as one with an error is.
pub const FETCH: PerItem<
    FetchRequest,
    fetch_request::FetchTopic,
    fetch_response::FetchableTopicResponse,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Read,
    items: |r| &mut r.topics,
    target: |t| Target::Topic(&t.topic, t.topic_id),
    answer: |t, code| {
        fetch_response::FetchableTopicResponse::default()
            .with_topic(t.topic)
            .with_topic_id(t.topic_id)
            .with_partitions(each(&t.partitions, |p| {
                fetch_response::PartitionData::default()
                    .with_partition_index(p.partition)
                    .with_error_code(code)
                    .with_high_watermark(-1)
                    .with_last_stable_offset(-1)
                    .with_log_start_offset(-1)
            }))
    },
};

/// ListOffsets: DESCRIBE on each topic.
pub const LIST_OFFSETS: PerItem<
    ListOffsetsRequest,
    list_offsets_request::ListOffsetsTopic,
    list_offsets_response::ListOffsetsTopicResponse,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        list_offsets_response::ListOffsetsTopicResponse::default()
            .with_name(t.name)
            .with_partitions(each(&t.partitions, |p| {
                list_offsets_response::ListOffsetsPartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_timestamp(-1)
                    .with_offset(-1)
            }))
    },
};

/// OffsetForLeaderEpoch: DESCRIBE on each topic.
pub const OFFSET_FOR_LEADER_EPOCH: PerItem<
    OffsetForLeaderEpochRequest,
    offset_for_leader_epoch_request::OffsetForLeaderTopic,
    offset_for_leader_epoch_response::OffsetForLeaderTopicResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.topic),
    answer: |t, code| {
        offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
            .with_topic(t.topic)
            .with_partitions(each(&t.partitions, |p| {
                offset_for_leader_epoch_response::EpochEndOffset::default()
                    .with_partition(p.partition)
                    .with_error_code(code)
                    .with_leader_epoch(-1)
                    .with_end_offset(-1)
            }))
    },
};

/// CreateTopics: CREATE on the cluster, or else on each topic.
pub const CREATE_TOPICS: PerItem<
    CreateTopicsRequest,
    create_topics_request::CreatableTopic,
    create_topics_response::CreatableTopicResult,
> = PerItem {
    first: First::ClusterGrant(Operation::Create),
    operation: Operation::Create,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        create_topics_response::CreatableTopicResult::default()
            .with_name(t.name)
            .with_error_code(code)
            .with_topic_config_error_code(code)
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    },
};

/// DeleteTopics by name (v0–5): DELETE on each topic.
pub const DELETE_TOPICS_BY_NAME: PerItem<
    DeleteTopicsRequest,
    TopicName,
    delete_topics_response::DeletableTopicResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Delete,
    items: |r| &mut r.topic_names,
    target: |name| Target::topic(name),
    answer: |name, code| {
        delete_topics_response::DeletableTopicResult::default()
            .with_name(Some(name))
            .with_error_code(code)
    },
};

/// DeleteTopics by name or id (v6+): DELETE on each topic.
pub const DELETE_TOPICS: PerItem<
    DeleteTopicsRequest,
    delete_topics_request::DeleteTopicState,
    delete_topics_response::DeletableTopicResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Delete,
    items: |r| &mut r.topics,
    target: |t| Target::Topic(t.name.as_ref().map_or("", |n| n.as_str()), t.topic_id),
    answer: |t, code| {
        delete_topics_response::DeletableTopicResult::default()
            .with_name(t.name)
            .with_topic_id(t.topic_id)
            .with_error_code(code)
    },
};

/// DeleteRecords: DELETE on each topic.
pub const DELETE_RECORDS: PerItem<
    DeleteRecordsRequest,
    delete_records_request::DeleteRecordsTopic,
    delete_records_response::DeleteRecordsTopicResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Delete,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        delete_records_response::DeleteRecordsTopicResult::default()
            .with_name(t.name)
            .with_partitions(each(&t.partitions, |p| {
                delete_records_response::DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_low_watermark(-1)
            }))
    },
};

/// CreatePartitions: ALTER on each topic.
pub const CREATE_PARTITIONS: PerItem<
    CreatePartitionsRequest,
    create_partitions_request::CreatePartitionsTopic,
    create_partitions_response::CreatePartitionsTopicResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Alter,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        create_partitions_response::CreatePartitionsTopicResult::default()
            .with_name(t.name)
            .with_error_code(code)
    },
};

/// DescribeProducers: READ on each topic.
pub const DESCRIBE_PRODUCERS: PerItem<
    DescribeProducersRequest,
    describe_producers_request::TopicRequest,
    describe_producers_response::TopicResponse,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Read,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        describe_producers_response::TopicResponse::default()
            .with_name(t.name)
            .with_partitions(each(&t.partition_indexes, |&p| {
                describe_producers_response::PartitionResponse::default()
                    .with_partition_index(p)
                    .with_error_code(code)
            }))
    },
};

/// DescribeTopicPartitions: DESCRIBE on each topic.
pub const DESCRIBE_TOPIC_PARTITIONS: PerItem<
    DescribeTopicPartitionsRequest,
    describe_topic_partitions_request::TopicRequest,
    describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
            .with_name(Some(t.name))
            .with_error_code(code)
            .with_topic_authorized_operations(OMITTED)
    },
};

/// DescribeTopicPartitions' answer: each described topic's bitfield the caller's.
pub const DESCRIBE_TOPIC_PARTITIONS_OPERATIONS: Bitfields<
    DescribeTopicPartitionsResponse,
    describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic,
> = Bitfields {
    items: |r| &mut r.topics,
    field: |t| {
        let name = t.name.as_ref().map_or("", |n| n.as_str());
        (t.error_code == ErrorCode::NONE.code())
            .then_some((&mut t.topic_authorized_operations, Target::topic(name)))
    },
};

/// JoinGroup: READ on the group.
pub const JOIN_GROUP: Whole<JoinGroupRequest, JoinGroupResponse> = Whole {
    gates: &[group_read!()],
    answer: |_, code| {
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
    },
};

/// SyncGroup: READ on the group.
pub const SYNC_GROUP: Whole<SyncGroupRequest, SyncGroupResponse> = Whole {
    gates: &[group_read!()],
    answer: |_, code| SyncGroupResponse::default().with_error_code(code),
};

/// Heartbeat: READ on the group.
pub const HEARTBEAT: Whole<HeartbeatRequest, HeartbeatResponse> = Whole {
    gates: &[group_read!()],
    answer: |_, code| HeartbeatResponse::default().with_error_code(code),
};

/// LeaveGroup: READ on the group.
pub const LEAVE_GROUP: Whole<LeaveGroupRequest, LeaveGroupResponse> = Whole {
    gates: &[group_read!()],
    answer: |_, code| LeaveGroupResponse::default().with_error_code(code),
};

/// ConsumerGroupHeartbeat: READ on the group.
pub const CONSUMER_GROUP_HEARTBEAT: Whole<
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
> = Whole {
    gates: &[group_read!()],
    answer: |_, code| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(code)
            .with_member_epoch(-1)
    },
};

fn offset_commit_topic(
    t: offset_commit_request::OffsetCommitRequestTopic,
    code: i16,
) -> offset_commit_response::OffsetCommitResponseTopic {
    offset_commit_response::OffsetCommitResponseTopic::default()
        .with_name(t.name)
        .with_topic_id(t.topic_id)
        .with_partitions(each(&t.partitions, |p| {
            offset_commit_response::OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code)
        }))
}

/// OffsetCommit: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED and the
/// request emptied), then READ on each topic.
pub const OFFSET_COMMIT: PerItem<
    OffsetCommitRequest,
    offset_commit_request::OffsetCommitRequestTopic,
    offset_commit_response::OffsetCommitResponseTopic,
> = PerItem {
    first: First::Gates(&[group_read!()]),
    operation: Operation::Read,
    items: |r| &mut r.topics,
    target: |t| Target::Topic(&t.name, t.topic_id),
    answer: offset_commit_topic,
};

/// TxnOffsetCommit: WRITE on the transactional id, then READ on the group (either denial
/// answers every partition and empties the request), then READ on each topic.
pub const TXN_OFFSET_COMMIT: PerItem<
    TxnOffsetCommitRequest,
    txn_offset_commit_request::TxnOffsetCommitRequestTopic,
    txn_offset_commit_response::TxnOffsetCommitResponseTopic,
> = PerItem {
    first: First::Gates(&[txn_write!(), group_read!()]),
    operation: Operation::Read,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
            .with_name(t.name)
            .with_partitions(each(&t.partitions, |p| {
                txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            }))
    },
};

/// OffsetDelete: DELETE on the group (else the whole answer GROUP_AUTHORIZATION_FAILED),
/// then [`OFFSET_DELETE_TOPICS`].
pub const OFFSET_DELETE: Whole<OffsetDeleteRequest, OffsetDeleteResponse> = Whole {
    gates: &[Gate {
        operation: Operation::Delete,
        target: |r| Some(Target::Group(&r.group_id)),
    }],
    answer: |_, code| OffsetDeleteResponse::default().with_error_code(code),
};

/// OffsetDelete, once the group is allowed: READ on each topic.
pub const OFFSET_DELETE_TOPICS: PerItem<
    OffsetDeleteRequest,
    offset_delete_request::OffsetDeleteRequestTopic,
    offset_delete_response::OffsetDeleteResponseTopic,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Read,
    items: |r| &mut r.topics,
    target: |t| Target::topic(&t.name),
    answer: |t, code| {
        offset_delete_response::OffsetDeleteResponseTopic::default()
            .with_name(t.name)
            .with_partitions(each(&t.partitions, |p| {
                offset_delete_response::OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
            }))
    },
};

/// DeleteGroups: DELETE on each group.
pub const DELETE_GROUPS: PerItem<
    DeleteGroupsRequest,
    GroupId,
    delete_groups_response::DeletableGroupResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Delete,
    items: |r| &mut r.groups_names,
    target: |g| Target::Group(g),
    answer: |g, code| {
        delete_groups_response::DeletableGroupResult::default()
            .with_group_id(g)
            .with_error_code(code)
    },
};

/// DescribeGroups: DESCRIBE on each group.
pub const DESCRIBE_GROUPS: PerItem<
    DescribeGroupsRequest,
    GroupId,
    describe_groups_response::DescribedGroup,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.groups,
    target: |g| Target::Group(g),
    answer: |g, code| {
        describe_groups_response::DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(code)
            .with_authorized_operations(OMITTED)
    },
};

/// DescribeGroups' answer: each group's bitfield the caller's.
pub const DESCRIBE_GROUPS_OPERATIONS: Bitfields<
    DescribeGroupsResponse,
    describe_groups_response::DescribedGroup,
> = Bitfields {
    items: |r| &mut r.groups,
    field: |g| Some((&mut g.authorized_operations, Target::Group(&g.group_id))),
};

/// ConsumerGroupDescribe: DESCRIBE on each group.
pub const CONSUMER_GROUP_DESCRIBE: PerItem<
    ConsumerGroupDescribeRequest,
    GroupId,
    consumer_group_describe_response::DescribedGroup,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.group_ids,
    target: |g| Target::Group(g),
    answer: |g, code| {
        consumer_group_describe_response::DescribedGroup::default()
            .with_group_id(g)
            .with_error_code(code)
            .with_authorized_operations(OMITTED)
    },
};

/// ConsumerGroupDescribe's answer: each group's bitfield the caller's.
pub const CONSUMER_GROUP_DESCRIBE_OPERATIONS: Bitfields<
    ConsumerGroupDescribeResponse,
    consumer_group_describe_response::DescribedGroup,
> = Bitfields {
    items: |r| &mut r.groups,
    field: |g| Some((&mut g.authorized_operations, Target::Group(&g.group_id))),
};

/// ListGroups' answer: every group with DESCRIBE on the cluster, else those the caller may
/// DESCRIBE.
pub const LIST_GROUPS: Visible<ListGroupsResponse, list_groups_response::ListedGroup> = Visible {
    cluster_grant: Some(Operation::Describe),
    operation: Operation::Describe,
    items: |r| &mut r.groups,
    target: |g| Target::Group(&g.group_id),
};

/// DescribeConfigs: DESCRIBE_CONFIGS on each resource.
pub const DESCRIBE_CONFIGS: PerItem<
    DescribeConfigsRequest,
    describe_configs_request::DescribeConfigsResource,
    describe_configs_response::DescribeConfigsResult,
> = PerItem {
    first: First::Nothing,
    operation: Operation::DescribeConfigs,
    items: |r| &mut r.resources,
    target: |r| Target::Config(r.resource_type, &r.resource_name),
    answer: |r, code| {
        describe_configs_response::DescribeConfigsResult::default()
            .with_error_code(code)
            .with_error_message(denied_message(code))
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name)
    },
};

/// AlterConfigs: ALTER_CONFIGS on each resource.
pub const ALTER_CONFIGS: PerItem<
    AlterConfigsRequest,
    alter_configs_request::AlterConfigsResource,
    alter_configs_response::AlterConfigsResourceResponse,
> = PerItem {
    first: First::Nothing,
    operation: Operation::AlterConfigs,
    items: |r| &mut r.resources,
    target: |r| Target::Config(r.resource_type, &r.resource_name),
    answer: |r, code| {
        alter_configs_response::AlterConfigsResourceResponse::default()
            .with_error_code(code)
            .with_error_message(denied_message(code))
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name)
    },
};

/// IncrementalAlterConfigs: ALTER_CONFIGS on each resource.
pub const INCREMENTAL_ALTER_CONFIGS: PerItem<
    IncrementalAlterConfigsRequest,
    incremental_alter_configs_request::AlterConfigsResource,
    incremental_alter_configs_response::AlterConfigsResourceResponse,
> = PerItem {
    first: First::Nothing,
    operation: Operation::AlterConfigs,
    items: |r| &mut r.resources,
    target: |r| Target::Config(r.resource_type, &r.resource_name),
    answer: |r, code| {
        incremental_alter_configs_response::AlterConfigsResourceResponse::default()
            .with_error_code(code)
            .with_error_message(denied_message(code))
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name)
    },
};

/// DescribeLogDirs: DESCRIBE on the cluster (else no directories).
pub const DESCRIBE_LOG_DIRS: Whole<DescribeLogDirsRequest, DescribeLogDirsResponse> = Whole {
    gates: &[on_cluster!(Operation::Describe)],
    answer: |_, code| DescribeLogDirsResponse::default().with_error_code(code),
};

/// DescribeUserScramCredentials: DESCRIBE on the cluster (else the top-level code).
pub const DESCRIBE_SCRAM: Whole<
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
> = Whole {
    gates: &[on_cluster!(Operation::Describe)],
    answer: |_, code| {
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_error_message(denied_message(code))
    },
};

/// AlterUserScramCredentials: ALTER on the cluster (else every user, once, denied).
pub const ALTER_SCRAM: Whole<AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse> =
    Whole {
        gates: &[on_cluster!(Operation::Alter)],
        answer: |request, code| {
            let mut users: Vec<&StrBytes> = request
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(request.upsertions.iter().map(|u| &u.name))
                .collect();
            users.sort();
            users.dedup();
            AlterUserScramCredentialsResponse::default().with_results(
                users
                    .into_iter()
                    .map(|u| {
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                            .with_user(u.clone())
                            .with_error_code(code)
                            .with_error_message(denied_message(code))
                    })
                    .collect(),
            )
        },
    };

/// DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster (else the top-level code).
pub const DESCRIBE_CLIENT_QUOTAS: Whole<DescribeClientQuotasRequest, DescribeClientQuotasResponse> =
    Whole {
        gates: &[on_cluster!(Operation::DescribeConfigs)],
        answer: |_, code| {
            DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(denied_message(code))
        },
    };

/// AlterClientQuotas: ALTER_CONFIGS on the cluster (else every entry denied, nothing
/// changed).
pub const ALTER_CLIENT_QUOTAS: Whole<AlterClientQuotasRequest, AlterClientQuotasResponse> = Whole {
    gates: &[on_cluster!(Operation::AlterConfigs)],
    answer: |request, _| {
        let message = denied_message(CLUSTER_DENIED);
        AlterClientQuotasResponse::default().with_entries(
            request
                .entries
                .iter()
                .map(|entry| {
                    super::client_quotas::result(
                        entry,
                        ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                        message.as_deref(),
                    )
                })
                .collect(),
        )
    },
};

/// AddOffsetsToTxn: WRITE on the transactional id, then READ on the group.
pub const ADD_OFFSETS_TO_TXN: Whole<AddOffsetsToTxnRequest, AddOffsetsToTxnResponse> = Whole {
    gates: &[txn_write!(), group_read!()],
    answer: |_, code| AddOffsetsToTxnResponse::default().with_error_code(code),
};

/// EndTxn: WRITE on the transactional id.
pub const END_TXN: Whole<EndTxnRequest, EndTxnResponse> = Whole {
    gates: &[txn_write!()],
    answer: |_, code| {
        EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1)
    },
};

/// WriteTxnMarkers: CLUSTER_ACTION on the cluster (only brokers write markers); denied,
/// every marker's partitions CLUSTER_AUTHORIZATION_FAILED.
pub const WRITE_TXN_MARKERS: Whole<WriteTxnMarkersRequest, WriteTxnMarkersResponse> = Whole {
    gates: &[on_cluster!(Operation::ClusterAction)],
    answer: |request, code| {
        use write_txn_markers_response::*;
        let topic = |t: &write_txn_markers_request::WritableTxnMarkerTopic| {
            WritableTxnMarkerTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(each(&t.partition_indexes, |&p| {
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                }))
        };
        WriteTxnMarkersResponse::default().with_markers(
            request
                .markers
                .iter()
                .map(|m| {
                    WritableTxnMarkerResult::default()
                        .with_producer_id(m.producer_id)
                        .with_topics(m.topics.iter().map(topic).collect())
                })
                .collect(),
        )
    },
};

/// DescribeTransactions: DESCRIBE on each transactional id.
pub const DESCRIBE_TRANSACTIONS: PerItem<
    DescribeTransactionsRequest,
    TransactionalId,
    describe_transactions_response::TransactionState,
> = PerItem {
    first: First::Nothing,
    operation: Operation::Describe,
    items: |r| &mut r.transactional_ids,
    target: |id| Target::TransactionalId(id),
    answer: |id, code| {
        describe_transactions_response::TransactionState::default()
            .with_transactional_id(id)
            .with_error_code(code)
            .with_transaction_state(StrBytes::default())
            .with_producer_id((-1).into())
            .with_producer_epoch(-1)
            .with_transaction_start_time_ms(-1)
    },
};

/// DescribeTransactions' answer: a described transaction lists only the topics the caller
/// may DESCRIBE, as Kafka.
pub const DESCRIBE_TRANSACTION_TOPICS: Visible<
    describe_transactions_response::TransactionState,
    describe_transactions_response::TopicData,
> = Visible {
    cluster_grant: None,
    operation: Operation::Describe,
    items: |s| &mut s.topics,
    target: |t| Target::topic(&t.topic),
};

/// ListTransactions' answer: only the ids the caller may DESCRIBE.
pub const LIST_TRANSACTIONS: Visible<
    ListTransactionsResponse,
    list_transactions_response::TransactionState,
> = Visible {
    cluster_grant: None,
    operation: Operation::Describe,
    items: |r| &mut r.transaction_states,
    target: |s| Target::TransactionalId(&s.transactional_id),
};

// ---------------------------------------------------------------------------------------
// The checks that are not rows: their shape is their own.
// ---------------------------------------------------------------------------------------

/// DescribeCluster: DESCRIBE on the cluster, and the caller's cluster bitfield.
pub fn describe_cluster_answer(
    broker: &impl AuthzView,
    caller: &Caller,
    response: &mut DescribeClusterResponse,
) {
    match Target::Cluster.denial(broker, caller, Operation::Describe) {
        Some(code) => {
            *response = DescribeClusterResponse::default()
                .with_error_code(code)
                .with_error_message(denied_message(code))
                .with_endpoint_type(response.endpoint_type)
                .with_cluster_authorized_operations(OMITTED);
        }
        None => own_operations(
            broker,
            caller,
            &mut response.cluster_authorized_operations,
            Target::Cluster,
        ),
    }
}

/// The name of a topic given by name or (when `id` is not nil) by id; empty for an
/// unknown id.
fn topic_name(broker: &impl AuthzView, name: &str, id: Uuid) -> String {
    Target::Topic(name, id)
        .resource(broker)
        .map(|(_, n)| n.into_owned())
        .unwrap_or_default()
}

/// OffsetFetch: DESCRIBE on each group and on each topic, applied to the handler's answer
/// (v0–7 one group at the top level, v8+ each group). Denied groups answer
/// GROUP_AUTHORIZATION_FAILED with no topics; partitions of topics the caller may not
/// describe answer TOPIC_AUTHORIZATION_FAILED (asked for by name) or are left out (an
/// all-topics fetch).
pub fn offset_fetch_answer(
    broker: &impl AuthzView,
    caller: &Caller,
    request: &OffsetFetchRequest,
    response: &mut OffsetFetchResponse,
) {
    if !broker.authorizer_enabled() {
        return;
    }
    let group_ok = |g: &str| Target::Group(g).allows(broker, caller, Operation::Describe);
    let visible = |t: &str| Target::topic(t).allows(broker, caller, Operation::Describe);
    if !request.group_id.is_empty() || !response.topics.is_empty() || request.groups.is_empty() {
        if !group_ok(&request.group_id) {
            response.topics.clear();
            response.error_code = GROUP_DENIED;
        } else {
            if request.topics.is_none() {
                response.topics.retain(|t| visible(&t.name));
            }
            for t in response.topics.iter_mut().filter(|t| !visible(&t.name)) {
                for p in &mut t.partitions {
                    p.error_code = TOPIC_DENIED;
                    p.committed_offset = -1;
                }
            }
        }
    }
    for (asked, group) in request.groups.iter().zip(response.groups.iter_mut()) {
        if !group_ok(&group.group_id) {
            group.topics.clear();
            group.error_code = GROUP_DENIED;
            continue;
        }
        if asked.topics.is_none() {
            group.topics.retain(|t| visible(&t.name));
        }
        for t in &mut group.topics {
            if !visible(&topic_name(broker, &t.name, t.topic_id)) {
                for p in &mut t.partitions {
                    p.error_code = TOPIC_DENIED;
                    p.committed_offset = -1;
                }
            }
        }
    }
}

/// FindCoordinator: DESCRIBE on each group (key type 0) or transactional id (key type 1).
/// Denied keys answer GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED, at the top level
/// (v0–3) or per key (v4+), with no node.
pub fn find_coordinator_answer(
    broker: &impl AuthzView,
    caller: &Caller,
    request: &FindCoordinatorRequest,
    response: &mut FindCoordinatorResponse,
) {
    let check = |key: &str| {
        let target = match request.key_type {
            1 => Target::TransactionalId(key),
            _ => Target::Group(key),
        };
        target.denial(broker, caller, Operation::Describe)
    };
    if response.coordinators.is_empty() {
        if let Some(code) = check(&request.key) {
            response.error_code = code;
            response.error_message = None;
            response.node_id = (-1).into();
            response.host = StrBytes::default();
            response.port = -1;
        }
    }
    for c in &mut response.coordinators {
        if let Some(code) = check(&c.key) {
            c.error_code = code;
            c.error_message = None;
            c.node_id = (-1).into();
            c.host = StrBytes::default();
            c.port = -1;
        }
    }
}

/// InitProducerId: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the
/// cluster or WRITE on some topic (KIP-679). The denial when refused.
pub fn init_producer_id_denied(
    broker: &impl AuthzView,
    caller: &Caller,
    request: &InitProducerIdRequest,
) -> Option<InitProducerIdResponse> {
    let code = match &request.transactional_id {
        Some(id) => Target::TransactionalId(id).denial(broker, caller, Operation::Write),
        None => (!Target::Cluster.allows(broker, caller, Operation::IdempotentWrite)
            && !broker.any_topic_allowed(caller, Operation::Write))
        .then_some(CLUSTER_DENIED),
    }?;
    Some(
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    )
}

/// AddPartitionsToTxn v0–3 (one transaction, from a client): WRITE on the transactional id
/// (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
/// (never on an internal one);
/// any denied topic fails the whole transaction, as Kafka: the denied partitions
/// TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED, or
/// UNKNOWN_TOPIC_OR_PARTITION where `exists` says no (I48). v4+ comes only from brokers
/// and needs CLUSTER_ACTION on the cluster, answered at the top level.
pub fn add_partitions_to_txn_denied(
    broker: &impl AuthzView,
    caller: &Caller,
    request: &AddPartitionsToTxnRequest,
    version: i16,
    exists: impl Fn(&str, i32) -> bool,
) -> Option<AddPartitionsToTxnResponse> {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    if !broker.authorizer_enabled() {
        return None;
    }
    if version >= 4 {
        let code = Target::Cluster.denial(broker, caller, Operation::ClusterAction)?;
        return Some(AddPartitionsToTxnResponse::default().with_error_code(code));
    }
    let txn_ok = Target::TransactionalId(&request.v3_and_below_transactional_id).allows(
        broker,
        caller,
        Operation::Write,
    );
    let topics = &request.v3_and_below_topics;
    // Internal topics are never authorized here, as Kafka: only the broker writes them.
    let topic_ok = |name: &str| {
        txn_ok && !is_internal(name) && Target::topic(name).allows(broker, caller, Operation::Write)
    };
    if txn_ok && topics.iter().all(|t| topic_ok(&t.name)) {
        return None;
    }
    let results = topics.iter().map(|t| {
        let allowed = topic_ok(&t.name);
        let code = |p| {
            if !txn_ok {
                TXN_DENIED
            } else if !allowed {
                TOPIC_DENIED
            } else if exists(&t.name, p) {
                ErrorCode::OPERATION_NOT_ATTEMPTED.code()
            } else {
                ErrorCode::UNKNOWN_TOPIC_OR_PARTITION.code()
            }
        };
        AddPartitionsToTxnTopicResult::default()
            .with_name(t.name.clone())
            .with_results_by_partition(each(&t.partitions, |&p| {
                AddPartitionsToTxnPartitionResult::default()
                    .with_partition_index(p)
                    .with_partition_error_code(code(p))
            }))
    });
    Some(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results.collect()),
    )
}
