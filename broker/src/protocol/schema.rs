//! Static wire-layout tables for the Kafka requests the broker accepts.
//!
//! Contract:
//! - Inputs: none at run time; these are `static` tables written by hand from the Apache Kafka
//!   message definitions (the `*Request.json` files), one [`MessageSchema`] per covered API.
//! - Outputs: [`schema_for`] / [`COVERED`], which the bounded pre-check walker
//!   ([`super::precheck`]) follows to prove a body is well formed before `kafka-protocol` decodes
//!   it (I10).
//! - Never: allocates, performs I/O, or describes a version that `kafka-protocol` 0.18 cannot
//!   decode (a unit test pins every range to the crate's `Message::VERSIONS`).
//!
//! The DSL: a [`StructSchema`] is an ordered list of [`Field`]s, each with a [`Kind`] and the
//! inclusive version range it is on the wire in. A field with a `tag` lives in the struct's
//! tagged-field section (flexible versions only) instead of in the fixed sequence. From the
//! message's `flexible_from` version on, strings/bytes/arrays use compact encodings (unsigned
//! varint of length + 1, 0 meaning null) and every struct ends with a tagged-field section.

use std::mem::size_of;

use bytes::Bytes;
use kafka_protocol::messages::{
    add_offsets_to_txn_request, add_partitions_to_txn_request, alter_configs_request,
    api_versions_request, consumer_group_describe_request, consumer_group_heartbeat_request,
    create_acls_request, create_partitions_request, create_topics_request, delete_acls_request,
    delete_groups_request, delete_records_request, delete_topics_request, describe_acls_request,
    describe_cluster_request, describe_configs_request, describe_groups_request,
    describe_log_dirs_request, describe_producers_request, describe_topic_partitions_request,
    describe_transactions_request, end_txn_request, fetch_request, find_coordinator_request,
    heartbeat_request, incremental_alter_configs_request, init_producer_id_request,
    join_group_request, leave_group_request, list_groups_request, list_offsets_request,
    list_transactions_request, metadata_request, offset_commit_request, offset_delete_request,
    offset_fetch_request, offset_for_leader_epoch_request, produce_request, sync_group_request,
    txn_offset_commit_request, write_txn_markers_request, ApiKey,
};
use kafka_protocol::messages::{alter_client_quotas_request, describe_client_quotas_request};
use kafka_protocol::messages::{
    alter_user_scram_credentials_request, describe_user_scram_credentials_request,
    sasl_authenticate_request, sasl_handshake_request,
};
use kafka_protocol::protocol::StrBytes;

/// Highest version number; "present from version N on" is written `N..=ANY`.
pub const ANY: i16 = i16::MAX;

/// The wire type of one field.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// 1-byte signed integer.
    Int8,
    /// 2-byte big-endian signed integer.
    Int16,
    /// 4-byte big-endian signed integer.
    Int32,
    /// 8-byte big-endian signed integer.
    Int64,
    /// 16-byte UUID.
    Uuid,
    /// 1-byte boolean.
    Bool,
    /// 8-byte IEEE 754 double.
    Float64,
    /// String that must not be null (i16 length, or compact).
    Str,
    /// String that may be null (length -1, or compact 0).
    NullableStr,
    /// Byte string that must not be null (i32 length, or compact).
    Bytes,
    /// Byte string that may be null.
    NullableBytes,
    /// A record set: nullable bytes, kept opaque here (validated later by `core::record`).
    Records,
    /// Array (i32 count, or compact) of the element kind; must not be null.
    Array(&'static Kind),
    /// Array that may be null (count -1, or compact 0).
    NullableArray(&'static Kind),
    /// A nested struct written inline (used for tagged struct fields).
    Struct(&'static StructSchema),
    /// A struct that may be null: an `int8` marker (1 = present, then the struct inline;
    /// anything else = null), as `kafka-protocol`'s `OptionStruct` reads it.
    NullableStruct(&'static StructSchema),
}

impl Kind {
    /// Fewest bytes one value of this kind occupies on the wire.
    pub fn min_wire_bytes(&self, version: i16, flexible: bool) -> u64 {
        match self {
            Kind::Int8 | Kind::Bool => 1,
            Kind::Int16 => 2,
            Kind::Int32 => 4,
            Kind::Int64 | Kind::Float64 => 8,
            Kind::Uuid => 16,
            Kind::Str | Kind::NullableStr if flexible => 1,
            Kind::Str | Kind::NullableStr => 2,
            Kind::Bytes
            | Kind::NullableBytes
            | Kind::Records
            | Kind::Array(_)
            | Kind::NullableArray(_) => {
                if flexible {
                    1
                } else {
                    4
                }
            }
            Kind::Struct(s) => s.min_wire_bytes(version, flexible),
            Kind::NullableStruct(_) => 1,
        }
    }

    /// Bytes one decoded element of this kind occupies inside a `Vec` built by `kafka-protocol`
    /// (an upper bound; used to budget the decoder's allocations, I10).
    pub const fn decoded_bytes(&self) -> usize {
        match self {
            Kind::Int8 | Kind::Bool => 1,
            Kind::Int16 => 2,
            Kind::Int32 => 4,
            Kind::Int64 | Kind::Float64 => 8,
            Kind::Uuid => 16,
            Kind::Str | Kind::NullableStr => size_of::<Option<StrBytes>>(),
            Kind::Bytes | Kind::NullableBytes | Kind::Records => size_of::<Option<Bytes>>(),
            Kind::Array(_) | Kind::NullableArray(_) => size_of::<Option<Vec<u8>>>(),
            Kind::Struct(s) => s.decoded_bytes,
            // `Option<T>` of the struct; a niche may make it smaller, never larger than this.
            Kind::NullableStruct(s) => s.decoded_bytes + size_of::<usize>(),
        }
    }
}

/// One field of a struct.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Field name (as in the Kafka message definition, snake_case), for error messages.
    pub name: &'static str,
    /// Wire type.
    pub kind: Kind,
    /// First version the field is on the wire in.
    pub min_version: i16,
    /// Last version the field is on the wire in (inclusive; [`ANY`] for open-ended).
    pub max_version: i16,
    /// `Some(tag)` if the field lives in the tagged-field section.
    pub tag: Option<u32>,
}

impl Field {
    /// Whether the field exists at `version`.
    pub const fn present_in(&self, version: i16) -> bool {
        self.min_version <= version && version <= self.max_version
    }
}

/// A regular (untagged) field present in `min..=max`.
pub const fn field(name: &'static str, kind: Kind, min: i16, max: i16) -> Field {
    Field {
        name,
        kind,
        min_version: min,
        max_version: max,
        tag: None,
    }
}

/// A tagged field with tag `tag`, known in `min..=max`.
pub const fn tagged(tag: u32, name: &'static str, kind: Kind, min: i16, max: i16) -> Field {
    Field {
        name,
        kind,
        min_version: min,
        max_version: max,
        tag: Some(tag),
    }
}

/// An ordered list of fields: a request body or a nested struct.
#[derive(Debug)]
pub struct StructSchema {
    /// Struct name (the `kafka-protocol` type name), for error messages.
    pub name: &'static str,
    /// Fields in wire order (tagged fields may appear anywhere; they are not in the sequence).
    pub fields: &'static [Field],
    /// `size_of` the decoded `kafka-protocol` struct (an element of a decoded `Vec`).
    pub decoded_bytes: usize,
}

impl StructSchema {
    /// Fewest bytes this struct occupies at `version`.
    pub fn min_wire_bytes(&self, version: i16, flexible: bool) -> u64 {
        let fixed: u64 = self
            .fields
            .iter()
            .filter(|f| f.tag.is_none() && f.present_in(version))
            .map(|f| f.kind.min_wire_bytes(version, flexible))
            .sum();
        fixed + u64::from(flexible)
    }

    /// The tagged field with `tag` known at `version`, if any.
    pub fn tagged_field(&self, tag: u32, version: i16) -> Option<&Field> {
        self.fields
            .iter()
            .find(|f| f.tag == Some(tag) && f.present_in(version))
    }
}

/// The layout of one request API across its versions.
#[derive(Debug)]
pub struct MessageSchema {
    /// The API this schema describes.
    pub api_key: ApiKey,
    /// Lowest version covered.
    pub min_version: i16,
    /// Highest version covered.
    pub max_version: i16,
    /// First flexible version (compact encodings, tagged fields); [`ANY`] if never.
    pub flexible_from: i16,
    /// The request body.
    pub body: &'static StructSchema,
}

impl MessageSchema {
    /// Whether `version` is within the covered range.
    pub const fn covers(&self, version: i16) -> bool {
        self.min_version <= version && version <= self.max_version
    }

    /// Whether `version` uses the flexible encoding.
    pub const fn is_flexible(&self, version: i16) -> bool {
        version >= self.flexible_from
    }
}

use Kind::{
    Array, Bool, Bytes as Byt, Int16, Int32, Int64, Int8, NullableArray, NullableStr,
    NullableStruct, Records, Str, Struct, Uuid,
};

macro_rules! strukt {
    ($name:ident, $ty:ty, [$($f:expr),* $(,)?]) => {
        static $name: StructSchema = StructSchema {
            name: stringify!($ty),
            fields: &[$($f),*],
            decoded_bytes: size_of::<$ty>(),
        };
    };
}

macro_rules! message {
    ($name:ident, $key:ident, $min:expr, $max:expr, flexible_from $flex:expr, $body:ident) => {
        /// Schema of the request named by the API key.
        pub static $name: MessageSchema = MessageSchema {
            api_key: ApiKey::$key,
            min_version: $min,
            max_version: $max,
            flexible_from: $flex,
            body: &$body,
        };
    };
}

// ApiVersions (key 18).
strukt!(
    API_VERSIONS_BODY,
    api_versions_request::ApiVersionsRequest,
    [
        field("client_software_name", Str, 3, ANY),
        field("client_software_version", Str, 3, ANY),
    ]
);
message!(API_VERSIONS, ApiVersions, 0, 4, flexible_from 3, API_VERSIONS_BODY);

// Metadata (key 3).
strukt!(
    METADATA_TOPIC,
    metadata_request::MetadataRequestTopic,
    [
        field("topic_id", Uuid, 10, ANY),
        field("name", NullableStr, 0, ANY),
    ]
);
strukt!(
    METADATA_BODY,
    metadata_request::MetadataRequest,
    [
        field("topics", NullableArray(&Struct(&METADATA_TOPIC)), 0, ANY),
        field("allow_auto_topic_creation", Bool, 4, ANY),
        field("include_cluster_authorized_operations", Bool, 8, 10),
        field("include_topic_authorized_operations", Bool, 8, ANY),
    ]
);
message!(METADATA, Metadata, 0, 13, flexible_from 9, METADATA_BODY);

// Produce (key 0).
strukt!(
    PRODUCE_PARTITION,
    produce_request::PartitionProduceData,
    [
        field("index", Int32, 0, ANY),
        field("records", Records, 0, ANY),
    ]
);
strukt!(
    PRODUCE_TOPIC,
    produce_request::TopicProduceData,
    [
        field("name", Str, 0, 12),
        field("topic_id", Uuid, 13, ANY),
        field("partition_data", Array(&Struct(&PRODUCE_PARTITION)), 0, ANY),
    ]
);
strukt!(
    PRODUCE_BODY,
    produce_request::ProduceRequest,
    [
        field("transactional_id", NullableStr, 3, ANY),
        field("acks", Int16, 0, ANY),
        field("timeout_ms", Int32, 0, ANY),
        field("topic_data", Array(&Struct(&PRODUCE_TOPIC)), 0, ANY),
    ]
);
message!(PRODUCE, Produce, 3, 13, flexible_from 9, PRODUCE_BODY);

// Fetch (key 1).
strukt!(
    FETCH_REPLICA_STATE,
    fetch_request::ReplicaState,
    [
        field("replica_id", Int32, 15, ANY),
        field("replica_epoch", Int64, 15, ANY),
    ]
);
strukt!(
    FETCH_PARTITION,
    fetch_request::FetchPartition,
    [
        field("partition", Int32, 0, ANY),
        field("current_leader_epoch", Int32, 9, ANY),
        field("fetch_offset", Int64, 0, ANY),
        field("last_fetched_epoch", Int32, 12, ANY),
        field("log_start_offset", Int64, 5, ANY),
        field("partition_max_bytes", Int32, 0, ANY),
        tagged(0, "replica_directory_id", Uuid, 17, ANY),
        tagged(1, "high_watermark", Int64, 18, ANY),
    ]
);
strukt!(
    FETCH_TOPIC,
    fetch_request::FetchTopic,
    [
        field("topic", Str, 0, 12),
        field("topic_id", Uuid, 13, ANY),
        field("partitions", Array(&Struct(&FETCH_PARTITION)), 0, ANY),
    ]
);
strukt!(
    FETCH_FORGOTTEN,
    fetch_request::ForgottenTopic,
    [
        field("topic", Str, 7, 12),
        field("topic_id", Uuid, 13, ANY),
        field("partitions", Array(&Int32), 7, ANY),
    ]
);
strukt!(
    FETCH_BODY,
    fetch_request::FetchRequest,
    [
        tagged(0, "cluster_id", NullableStr, 12, ANY),
        field("replica_id", Int32, 0, 14),
        tagged(1, "replica_state", Struct(&FETCH_REPLICA_STATE), 15, ANY),
        field("max_wait_ms", Int32, 0, ANY),
        field("min_bytes", Int32, 0, ANY),
        field("max_bytes", Int32, 3, ANY),
        field("isolation_level", Int8, 4, ANY),
        field("session_id", Int32, 7, ANY),
        field("session_epoch", Int32, 7, ANY),
        field("topics", Array(&Struct(&FETCH_TOPIC)), 0, ANY),
        field(
            "forgotten_topics_data",
            Array(&Struct(&FETCH_FORGOTTEN)),
            7,
            ANY
        ),
        field("rack_id", Str, 11, ANY),
    ]
);
message!(FETCH, Fetch, 4, 18, flexible_from 12, FETCH_BODY);

// ListOffsets (key 2).
strukt!(
    LIST_OFFSETS_PARTITION,
    list_offsets_request::ListOffsetsPartition,
    [
        field("partition_index", Int32, 0, ANY),
        field("current_leader_epoch", Int32, 4, ANY),
        field("timestamp", Int64, 0, ANY),
    ]
);
strukt!(
    LIST_OFFSETS_TOPIC,
    list_offsets_request::ListOffsetsTopic,
    [
        field("name", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&LIST_OFFSETS_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    LIST_OFFSETS_BODY,
    list_offsets_request::ListOffsetsRequest,
    [
        field("replica_id", Int32, 0, ANY),
        field("isolation_level", Int8, 2, ANY),
        field("topics", Array(&Struct(&LIST_OFFSETS_TOPIC)), 0, ANY),
        field("timeout_ms", Int32, 10, ANY),
    ]
);
message!(LIST_OFFSETS, ListOffsets, 1, 10, flexible_from 6, LIST_OFFSETS_BODY);

// CreateTopics (key 19).
strukt!(
    CREATE_TOPICS_ASSIGNMENT,
    create_topics_request::CreatableReplicaAssignment,
    [
        field("partition_index", Int32, 0, ANY),
        field("broker_ids", Array(&Int32), 0, ANY),
    ]
);
strukt!(
    CREATE_TOPICS_CONFIG,
    create_topics_request::CreatableTopicConfig,
    [
        field("name", Str, 0, ANY),
        field("value", NullableStr, 0, ANY),
    ]
);
strukt!(
    CREATE_TOPICS_TOPIC,
    create_topics_request::CreatableTopic,
    [
        field("name", Str, 0, ANY),
        field("num_partitions", Int32, 0, ANY),
        field("replication_factor", Int16, 0, ANY),
        field(
            "assignments",
            Array(&Struct(&CREATE_TOPICS_ASSIGNMENT)),
            0,
            ANY
        ),
        field("configs", Array(&Struct(&CREATE_TOPICS_CONFIG)), 0, ANY),
    ]
);
strukt!(
    CREATE_TOPICS_BODY,
    create_topics_request::CreateTopicsRequest,
    [
        field("topics", Array(&Struct(&CREATE_TOPICS_TOPIC)), 0, ANY),
        field("timeout_ms", Int32, 0, ANY),
        field("validate_only", Bool, 1, ANY),
    ]
);
message!(CREATE_TOPICS, CreateTopics, 2, 7, flexible_from 5, CREATE_TOPICS_BODY);

// DeleteTopics (key 20).
strukt!(
    DELETE_TOPICS_STATE,
    delete_topics_request::DeleteTopicState,
    [
        field("name", NullableStr, 6, ANY),
        field("topic_id", Uuid, 6, ANY),
    ]
);
strukt!(
    DELETE_TOPICS_BODY,
    delete_topics_request::DeleteTopicsRequest,
    [
        field("topics", Array(&Struct(&DELETE_TOPICS_STATE)), 6, ANY),
        field("topic_names", Array(&Str), 0, 5),
        field("timeout_ms", Int32, 0, ANY),
    ]
);
message!(DELETE_TOPICS, DeleteTopics, 1, 6, flexible_from 4, DELETE_TOPICS_BODY);

// CreatePartitions (key 37).
strukt!(
    CREATE_PARTITIONS_ASSIGNMENT,
    create_partitions_request::CreatePartitionsAssignment,
    [field("broker_ids", Array(&Int32), 0, ANY),]
);
strukt!(
    CREATE_PARTITIONS_TOPIC,
    create_partitions_request::CreatePartitionsTopic,
    [
        field("name", Str, 0, ANY),
        field("count", Int32, 0, ANY),
        field(
            "assignments",
            NullableArray(&Struct(&CREATE_PARTITIONS_ASSIGNMENT)),
            0,
            ANY
        ),
    ]
);
strukt!(
    CREATE_PARTITIONS_BODY,
    create_partitions_request::CreatePartitionsRequest,
    [
        field("topics", Array(&Struct(&CREATE_PARTITIONS_TOPIC)), 0, ANY),
        field("timeout_ms", Int32, 0, ANY),
        field("validate_only", Bool, 0, ANY),
    ]
);
message!(CREATE_PARTITIONS, CreatePartitions, 0, 3, flexible_from 2, CREATE_PARTITIONS_BODY);

// DescribeConfigs (key 32).
strukt!(
    DESCRIBE_CONFIGS_RESOURCE,
    describe_configs_request::DescribeConfigsResource,
    [
        field("resource_type", Int8, 0, ANY),
        field("resource_name", Str, 0, ANY),
        field("configuration_keys", NullableArray(&Str), 0, ANY),
    ]
);
strukt!(
    DESCRIBE_CONFIGS_BODY,
    describe_configs_request::DescribeConfigsRequest,
    [
        field(
            "resources",
            Array(&Struct(&DESCRIBE_CONFIGS_RESOURCE)),
            0,
            ANY
        ),
        field("include_synonyms", Bool, 1, ANY),
        field("include_documentation", Bool, 3, ANY),
    ]
);
message!(DESCRIBE_CONFIGS, DescribeConfigs, 1, 4, flexible_from 4, DESCRIBE_CONFIGS_BODY);

// AlterConfigs (key 33).
strukt!(
    ALTER_CONFIGS_CONFIG,
    alter_configs_request::AlterableConfig,
    [
        field("name", Str, 0, ANY),
        field("value", NullableStr, 0, ANY),
    ]
);
strukt!(
    ALTER_CONFIGS_RESOURCE,
    alter_configs_request::AlterConfigsResource,
    [
        field("resource_type", Int8, 0, ANY),
        field("resource_name", Str, 0, ANY),
        field("configs", Array(&Struct(&ALTER_CONFIGS_CONFIG)), 0, ANY),
    ]
);
strukt!(
    ALTER_CONFIGS_BODY,
    alter_configs_request::AlterConfigsRequest,
    [
        field("resources", Array(&Struct(&ALTER_CONFIGS_RESOURCE)), 0, ANY),
        field("validate_only", Bool, 0, ANY),
    ]
);
message!(ALTER_CONFIGS, AlterConfigs, 0, 2, flexible_from 2, ALTER_CONFIGS_BODY);

// IncrementalAlterConfigs (key 44).
strukt!(
    INCREMENTAL_ALTER_CONFIGS_CONFIG,
    incremental_alter_configs_request::AlterableConfig,
    [
        field("name", Str, 0, ANY),
        field("config_operation", Int8, 0, ANY),
        field("value", NullableStr, 0, ANY),
    ]
);
strukt!(
    INCREMENTAL_ALTER_CONFIGS_RESOURCE,
    incremental_alter_configs_request::AlterConfigsResource,
    [
        field("resource_type", Int8, 0, ANY),
        field("resource_name", Str, 0, ANY),
        field(
            "configs",
            Array(&Struct(&INCREMENTAL_ALTER_CONFIGS_CONFIG)),
            0,
            ANY
        ),
    ]
);
strukt!(
    INCREMENTAL_ALTER_CONFIGS_BODY,
    incremental_alter_configs_request::IncrementalAlterConfigsRequest,
    [
        field(
            "resources",
            Array(&Struct(&INCREMENTAL_ALTER_CONFIGS_RESOURCE)),
            0,
            ANY
        ),
        field("validate_only", Bool, 0, ANY),
    ]
);
message!(INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigs, 0, 1, flexible_from 1, INCREMENTAL_ALTER_CONFIGS_BODY);

// DeleteRecords (key 21).
strukt!(
    DELETE_RECORDS_PARTITION,
    delete_records_request::DeleteRecordsPartition,
    [
        field("partition_index", Int32, 0, ANY),
        field("offset", Int64, 0, ANY),
    ]
);
strukt!(
    DELETE_RECORDS_TOPIC,
    delete_records_request::DeleteRecordsTopic,
    [
        field("name", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&DELETE_RECORDS_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    DELETE_RECORDS_BODY,
    delete_records_request::DeleteRecordsRequest,
    [
        field("topics", Array(&Struct(&DELETE_RECORDS_TOPIC)), 0, ANY),
        field("timeout_ms", Int32, 0, ANY),
    ]
);
message!(DELETE_RECORDS, DeleteRecords, 0, 2, flexible_from 2, DELETE_RECORDS_BODY);

// DescribeCluster (key 60): flexible in every version.
strukt!(
    DESCRIBE_CLUSTER_BODY,
    describe_cluster_request::DescribeClusterRequest,
    [
        field("include_cluster_authorized_operations", Bool, 0, ANY),
        field("endpoint_type", Int8, 1, ANY),
        field("include_fenced_brokers", Bool, 2, ANY),
    ]
);
message!(DESCRIBE_CLUSTER, DescribeCluster, 0, 2, flexible_from 0, DESCRIBE_CLUSTER_BODY);

// InitProducerId (key 22).
strukt!(
    INIT_PRODUCER_ID_BODY,
    init_producer_id_request::InitProducerIdRequest,
    [
        field("transactional_id", NullableStr, 0, ANY),
        field("transaction_timeout_ms", Int32, 0, ANY),
        field("producer_id", Int64, 3, ANY),
        field("producer_epoch", Int16, 3, ANY),
    ]
);
message!(INIT_PRODUCER_ID, InitProducerId, 0, 5, flexible_from 2, INIT_PRODUCER_ID_BODY);

// FindCoordinator (key 10).
strukt!(
    FIND_COORDINATOR_BODY,
    find_coordinator_request::FindCoordinatorRequest,
    [
        field("key", Str, 0, 3),
        field("key_type", Int8, 1, ANY),
        field("coordinator_keys", Array(&Str), 4, ANY),
    ]
);
message!(FIND_COORDINATOR, FindCoordinator, 0, 6, flexible_from 3, FIND_COORDINATOR_BODY);

// JoinGroup (key 11).
strukt!(
    JOIN_GROUP_PROTOCOL,
    join_group_request::JoinGroupRequestProtocol,
    [field("name", Str, 0, ANY), field("metadata", Byt, 0, ANY),]
);
strukt!(
    JOIN_GROUP_BODY,
    join_group_request::JoinGroupRequest,
    [
        field("group_id", Str, 0, ANY),
        field("session_timeout_ms", Int32, 0, ANY),
        field("rebalance_timeout_ms", Int32, 1, ANY),
        field("member_id", Str, 0, ANY),
        field("group_instance_id", NullableStr, 5, ANY),
        field("protocol_type", Str, 0, ANY),
        field("protocols", Array(&Struct(&JOIN_GROUP_PROTOCOL)), 0, ANY),
        field("reason", NullableStr, 8, ANY),
    ]
);
message!(JOIN_GROUP, JoinGroup, 0, 9, flexible_from 6, JOIN_GROUP_BODY);

// SyncGroup (key 14).
strukt!(
    SYNC_GROUP_ASSIGNMENT,
    sync_group_request::SyncGroupRequestAssignment,
    [
        field("member_id", Str, 0, ANY),
        field("assignment", Byt, 0, ANY),
    ]
);
strukt!(
    SYNC_GROUP_BODY,
    sync_group_request::SyncGroupRequest,
    [
        field("group_id", Str, 0, ANY),
        field("generation_id", Int32, 0, ANY),
        field("member_id", Str, 0, ANY),
        field("group_instance_id", NullableStr, 3, ANY),
        field("protocol_type", NullableStr, 5, ANY),
        field("protocol_name", NullableStr, 5, ANY),
        field(
            "assignments",
            Array(&Struct(&SYNC_GROUP_ASSIGNMENT)),
            0,
            ANY
        ),
    ]
);
message!(SYNC_GROUP, SyncGroup, 0, 5, flexible_from 4, SYNC_GROUP_BODY);

// Heartbeat (key 12).
strukt!(
    HEARTBEAT_BODY,
    heartbeat_request::HeartbeatRequest,
    [
        field("group_id", Str, 0, ANY),
        field("generation_id", Int32, 0, ANY),
        field("member_id", Str, 0, ANY),
        field("group_instance_id", NullableStr, 3, ANY),
    ]
);
message!(HEARTBEAT, Heartbeat, 0, 4, flexible_from 4, HEARTBEAT_BODY);

// LeaveGroup (key 13).
strukt!(
    LEAVE_GROUP_MEMBER,
    leave_group_request::MemberIdentity,
    [
        field("member_id", Str, 3, ANY),
        field("group_instance_id", NullableStr, 3, ANY),
        field("reason", NullableStr, 5, ANY),
    ]
);
strukt!(
    LEAVE_GROUP_BODY,
    leave_group_request::LeaveGroupRequest,
    [
        field("group_id", Str, 0, ANY),
        field("member_id", Str, 0, 2),
        field("members", Array(&Struct(&LEAVE_GROUP_MEMBER)), 3, ANY),
    ]
);
message!(LEAVE_GROUP, LeaveGroup, 0, 5, flexible_from 4, LEAVE_GROUP_BODY);

// OffsetCommit (key 8).
strukt!(
    OFFSET_COMMIT_PARTITION,
    offset_commit_request::OffsetCommitRequestPartition,
    [
        field("partition_index", Int32, 0, ANY),
        field("committed_offset", Int64, 0, ANY),
        field("committed_leader_epoch", Int32, 6, ANY),
        field("committed_metadata", NullableStr, 0, ANY),
    ]
);
strukt!(
    OFFSET_COMMIT_TOPIC,
    offset_commit_request::OffsetCommitRequestTopic,
    [
        field("name", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&OFFSET_COMMIT_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    OFFSET_COMMIT_BODY,
    offset_commit_request::OffsetCommitRequest,
    [
        field("group_id", Str, 0, ANY),
        field("generation_id_or_member_epoch", Int32, 1, ANY),
        field("member_id", Str, 1, ANY),
        field("group_instance_id", NullableStr, 7, ANY),
        field("retention_time_ms", Int64, 2, 4),
        field("topics", Array(&Struct(&OFFSET_COMMIT_TOPIC)), 0, ANY),
    ]
);
message!(OFFSET_COMMIT, OffsetCommit, 2, 9, flexible_from 8, OFFSET_COMMIT_BODY);

// OffsetFetch (key 9).
strukt!(
    OFFSET_FETCH_TOPIC,
    offset_fetch_request::OffsetFetchRequestTopic,
    [
        field("name", Str, 0, 7),
        field("partition_indexes", Array(&Int32), 0, 7),
    ]
);
strukt!(
    OFFSET_FETCH_GROUP_TOPIC,
    offset_fetch_request::OffsetFetchRequestTopics,
    [
        field("name", Str, 8, ANY),
        field("partition_indexes", Array(&Int32), 8, ANY),
    ]
);
strukt!(
    OFFSET_FETCH_GROUP,
    offset_fetch_request::OffsetFetchRequestGroup,
    [
        field("group_id", Str, 8, ANY),
        field("member_id", NullableStr, 9, ANY),
        field("member_epoch", Int32, 9, ANY),
        field(
            "topics",
            NullableArray(&Struct(&OFFSET_FETCH_GROUP_TOPIC)),
            8,
            ANY
        ),
    ]
);
strukt!(
    OFFSET_FETCH_BODY,
    offset_fetch_request::OffsetFetchRequest,
    [
        field("group_id", Str, 0, 7),
        field("topics", NullableArray(&Struct(&OFFSET_FETCH_TOPIC)), 0, 7),
        field("groups", Array(&Struct(&OFFSET_FETCH_GROUP)), 8, ANY),
        field("require_stable", Bool, 7, ANY),
    ]
);
message!(OFFSET_FETCH, OffsetFetch, 1, 9, flexible_from 6, OFFSET_FETCH_BODY);

// ListGroups (key 16).
strukt!(
    LIST_GROUPS_BODY,
    list_groups_request::ListGroupsRequest,
    [
        field("states_filter", Array(&Str), 4, ANY),
        field("types_filter", Array(&Str), 5, ANY),
    ]
);
message!(LIST_GROUPS, ListGroups, 0, 5, flexible_from 3, LIST_GROUPS_BODY);

// DescribeGroups (key 15).
strukt!(
    DESCRIBE_GROUPS_BODY,
    describe_groups_request::DescribeGroupsRequest,
    [
        field("groups", Array(&Str), 0, ANY),
        field("include_authorized_operations", Bool, 3, ANY),
    ]
);
message!(DESCRIBE_GROUPS, DescribeGroups, 0, 6, flexible_from 5, DESCRIBE_GROUPS_BODY);

// DeleteGroups (key 42).
strukt!(
    DELETE_GROUPS_BODY,
    delete_groups_request::DeleteGroupsRequest,
    [field("groups_names", Array(&Str), 0, ANY),]
);
message!(DELETE_GROUPS, DeleteGroups, 0, 2, flexible_from 2, DELETE_GROUPS_BODY);

// OffsetDelete (key 47): never flexible.
strukt!(
    OFFSET_DELETE_PARTITION,
    offset_delete_request::OffsetDeleteRequestPartition,
    [field("partition_index", Int32, 0, ANY),]
);
strukt!(
    OFFSET_DELETE_TOPIC,
    offset_delete_request::OffsetDeleteRequestTopic,
    [
        field("name", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&OFFSET_DELETE_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    OFFSET_DELETE_BODY,
    offset_delete_request::OffsetDeleteRequest,
    [
        field("group_id", Str, 0, ANY),
        field("topics", Array(&Struct(&OFFSET_DELETE_TOPIC)), 0, ANY),
    ]
);
message!(OFFSET_DELETE, OffsetDelete, 0, 0, flexible_from ANY, OFFSET_DELETE_BODY);

// ConsumerGroupHeartbeat (key 68): flexible in every version.
strukt!(
    CONSUMER_GROUP_HEARTBEAT_TOPIC,
    consumer_group_heartbeat_request::TopicPartitions,
    [
        field("topic_id", Uuid, 0, ANY),
        field("partitions", Array(&Int32), 0, ANY),
    ]
);
strukt!(
    CONSUMER_GROUP_HEARTBEAT_BODY,
    consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest,
    [
        field("group_id", Str, 0, ANY),
        field("member_id", Str, 0, ANY),
        field("member_epoch", Int32, 0, ANY),
        field("instance_id", NullableStr, 0, ANY),
        field("rack_id", NullableStr, 0, ANY),
        field("rebalance_timeout_ms", Int32, 0, ANY),
        field("subscribed_topic_names", NullableArray(&Str), 0, ANY),
        field("subscribed_topic_regex", NullableStr, 1, ANY),
        field("server_assignor", NullableStr, 0, ANY),
        field(
            "topic_partitions",
            NullableArray(&Struct(&CONSUMER_GROUP_HEARTBEAT_TOPIC)),
            0,
            ANY
        ),
    ]
);
message!(
    CONSUMER_GROUP_HEARTBEAT,
    ConsumerGroupHeartbeat,
    0,
    1,
    flexible_from 0,
    CONSUMER_GROUP_HEARTBEAT_BODY
);

// ConsumerGroupDescribe (key 69): flexible in every version.
strukt!(
    CONSUMER_GROUP_DESCRIBE_BODY,
    consumer_group_describe_request::ConsumerGroupDescribeRequest,
    [
        field("group_ids", Array(&Str), 0, ANY),
        field("include_authorized_operations", Bool, 0, ANY),
    ]
);
message!(
    CONSUMER_GROUP_DESCRIBE,
    ConsumerGroupDescribe,
    0,
    1,
    flexible_from 0,
    CONSUMER_GROUP_DESCRIBE_BODY
);

// OffsetForLeaderEpoch (key 23).
strukt!(
    OFFSET_FOR_LEADER_EPOCH_PARTITION,
    offset_for_leader_epoch_request::OffsetForLeaderPartition,
    [
        field("partition", Int32, 0, ANY),
        field("current_leader_epoch", Int32, 2, ANY),
        field("leader_epoch", Int32, 0, ANY),
    ]
);
strukt!(
    OFFSET_FOR_LEADER_EPOCH_TOPIC,
    offset_for_leader_epoch_request::OffsetForLeaderTopic,
    [
        field("topic", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&OFFSET_FOR_LEADER_EPOCH_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    OFFSET_FOR_LEADER_EPOCH_BODY,
    offset_for_leader_epoch_request::OffsetForLeaderEpochRequest,
    [
        field("replica_id", Int32, 3, ANY),
        field(
            "topics",
            Array(&Struct(&OFFSET_FOR_LEADER_EPOCH_TOPIC)),
            0,
            ANY
        ),
    ]
);
message!(
    OFFSET_FOR_LEADER_EPOCH,
    OffsetForLeaderEpoch,
    2,
    4,
    flexible_from 4,
    OFFSET_FOR_LEADER_EPOCH_BODY
);

// DescribeLogDirs (key 35).
strukt!(
    DESCRIBE_LOG_DIRS_TOPIC,
    describe_log_dirs_request::DescribableLogDirTopic,
    [
        field("topic", Str, 0, ANY),
        field("partitions", Array(&Int32), 0, ANY),
    ]
);
strukt!(
    DESCRIBE_LOG_DIRS_BODY,
    describe_log_dirs_request::DescribeLogDirsRequest,
    [field(
        "topics",
        NullableArray(&Struct(&DESCRIBE_LOG_DIRS_TOPIC)),
        0,
        ANY
    ),]
);
message!(DESCRIBE_LOG_DIRS, DescribeLogDirs, 1, 4, flexible_from 2, DESCRIBE_LOG_DIRS_BODY);

// WriteTxnMarkers (key 27): v1 only in Kafka 4.x (v0 removed by KIP-896), flexible.
strukt!(
    WRITE_TXN_MARKERS_TOPIC,
    write_txn_markers_request::WritableTxnMarkerTopic,
    [
        field("name", Str, 1, ANY),
        field("partition_indexes", Array(&Int32), 1, ANY),
    ]
);
strukt!(
    WRITE_TXN_MARKERS_MARKER,
    write_txn_markers_request::WritableTxnMarker,
    [
        field("producer_id", Int64, 1, ANY),
        field("producer_epoch", Int16, 1, ANY),
        field("transaction_result", Bool, 1, ANY),
        field("topics", Array(&Struct(&WRITE_TXN_MARKERS_TOPIC)), 1, ANY),
        field("coordinator_epoch", Int32, 1, ANY),
    ]
);
strukt!(
    WRITE_TXN_MARKERS_BODY,
    write_txn_markers_request::WriteTxnMarkersRequest,
    [field(
        "markers",
        Array(&Struct(&WRITE_TXN_MARKERS_MARKER)),
        1,
        ANY
    ),]
);
message!(WRITE_TXN_MARKERS, WriteTxnMarkers, 1, 1, flexible_from 1, WRITE_TXN_MARKERS_BODY);

// DescribeProducers (key 61): flexible in every version.
strukt!(
    DESCRIBE_PRODUCERS_TOPIC,
    describe_producers_request::TopicRequest,
    [
        field("name", Str, 0, ANY),
        field("partition_indexes", Array(&Int32), 0, ANY),
    ]
);
strukt!(
    DESCRIBE_PRODUCERS_BODY,
    describe_producers_request::DescribeProducersRequest,
    [field(
        "topics",
        Array(&Struct(&DESCRIBE_PRODUCERS_TOPIC)),
        0,
        ANY
    ),]
);
message!(DESCRIBE_PRODUCERS, DescribeProducers, 0, 0, flexible_from 0, DESCRIBE_PRODUCERS_BODY);

// DescribeTopicPartitions (key 75): flexible in every version.
strukt!(
    DESCRIBE_TOPIC_PARTITIONS_TOPIC,
    describe_topic_partitions_request::TopicRequest,
    [field("name", Str, 0, ANY),]
);
strukt!(
    DESCRIBE_TOPIC_PARTITIONS_CURSOR,
    describe_topic_partitions_request::Cursor,
    [
        field("topic_name", Str, 0, ANY),
        field("partition_index", Int32, 0, ANY),
    ]
);
strukt!(
    DESCRIBE_TOPIC_PARTITIONS_BODY,
    describe_topic_partitions_request::DescribeTopicPartitionsRequest,
    [
        field(
            "topics",
            Array(&Struct(&DESCRIBE_TOPIC_PARTITIONS_TOPIC)),
            0,
            ANY
        ),
        field("response_partition_limit", Int32, 0, ANY),
        field(
            "cursor",
            NullableStruct(&DESCRIBE_TOPIC_PARTITIONS_CURSOR),
            0,
            ANY
        ),
    ]
);
message!(
    DESCRIBE_TOPIC_PARTITIONS,
    DescribeTopicPartitions,
    0,
    0,
    flexible_from 0,
    DESCRIBE_TOPIC_PARTITIONS_BODY
);

// The ACL APIs: CreateAcls (key 30), DescribeAcls (key 29), DeleteAcls (key 31); v1-3, flexible
// from 2. A DescribeAcls filter and a DeleteAcls filter have the same layout (nullable name,
// principal and host); a creation's strings are never null.
strukt!(
    CREATE_ACLS_CREATION,
    create_acls_request::AclCreation,
    [
        field("resource_type", Int8, 0, ANY),
        field("resource_name", Str, 0, ANY),
        field("resource_pattern_type", Int8, 1, ANY),
        field("principal", Str, 0, ANY),
        field("host", Str, 0, ANY),
        field("operation", Int8, 0, ANY),
        field("permission_type", Int8, 0, ANY),
    ]
);
strukt!(
    CREATE_ACLS_BODY,
    create_acls_request::CreateAclsRequest,
    [field(
        "creations",
        Array(&Struct(&CREATE_ACLS_CREATION)),
        0,
        ANY
    ),]
);
message!(CREATE_ACLS, CreateAcls, 1, 3, flexible_from 2, CREATE_ACLS_BODY);

strukt!(
    DESCRIBE_ACLS_BODY,
    describe_acls_request::DescribeAclsRequest,
    [
        field("resource_type_filter", Int8, 0, ANY),
        field("resource_name_filter", NullableStr, 0, ANY),
        field("pattern_type_filter", Int8, 1, ANY),
        field("principal_filter", NullableStr, 0, ANY),
        field("host_filter", NullableStr, 0, ANY),
        field("operation", Int8, 0, ANY),
        field("permission_type", Int8, 0, ANY),
    ]
);
message!(DESCRIBE_ACLS, DescribeAcls, 1, 3, flexible_from 2, DESCRIBE_ACLS_BODY);

strukt!(
    DELETE_ACLS_FILTER,
    delete_acls_request::DeleteAclsFilter,
    [
        field("resource_type_filter", Int8, 0, ANY),
        field("resource_name_filter", NullableStr, 0, ANY),
        field("pattern_type_filter", Int8, 1, ANY),
        field("principal_filter", NullableStr, 0, ANY),
        field("host_filter", NullableStr, 0, ANY),
        field("operation", Int8, 0, ANY),
        field("permission_type", Int8, 0, ANY),
    ]
);
strukt!(
    DELETE_ACLS_BODY,
    delete_acls_request::DeleteAclsRequest,
    [field(
        "filters",
        Array(&Struct(&DELETE_ACLS_FILTER)),
        0,
        ANY
    ),]
);
message!(DELETE_ACLS, DeleteAcls, 1, 3, flexible_from 2, DELETE_ACLS_BODY);

// AddPartitionsToTxn (key 24): one transaction (v0-3) or a batch of them (v4+).
strukt!(
    ADD_PARTITIONS_TO_TXN_TOPIC,
    add_partitions_to_txn_request::AddPartitionsToTxnTopic,
    [
        field("name", Str, 0, ANY),
        field("partitions", Array(&Int32), 0, ANY),
    ]
);
strukt!(
    ADD_PARTITIONS_TO_TXN_TRANSACTION,
    add_partitions_to_txn_request::AddPartitionsToTxnTransaction,
    [
        field("transactional_id", Str, 4, ANY),
        field("producer_id", Int64, 4, ANY),
        field("producer_epoch", Int16, 4, ANY),
        field("verify_only", Bool, 4, ANY),
        field(
            "topics",
            Array(&Struct(&ADD_PARTITIONS_TO_TXN_TOPIC)),
            4,
            ANY
        ),
    ]
);
strukt!(
    ADD_PARTITIONS_TO_TXN_BODY,
    add_partitions_to_txn_request::AddPartitionsToTxnRequest,
    [
        field(
            "transactions",
            Array(&Struct(&ADD_PARTITIONS_TO_TXN_TRANSACTION)),
            4,
            ANY
        ),
        field("v3_and_below_transactional_id", Str, 0, 3),
        field("v3_and_below_producer_id", Int64, 0, 3),
        field("v3_and_below_producer_epoch", Int16, 0, 3),
        field(
            "v3_and_below_topics",
            Array(&Struct(&ADD_PARTITIONS_TO_TXN_TOPIC)),
            0,
            3
        ),
    ]
);
message!(ADD_PARTITIONS_TO_TXN, AddPartitionsToTxn, 0, 5, flexible_from 3, ADD_PARTITIONS_TO_TXN_BODY);

// AddOffsetsToTxn (key 25).
strukt!(
    ADD_OFFSETS_TO_TXN_BODY,
    add_offsets_to_txn_request::AddOffsetsToTxnRequest,
    [
        field("transactional_id", Str, 0, ANY),
        field("producer_id", Int64, 0, ANY),
        field("producer_epoch", Int16, 0, ANY),
        field("group_id", Str, 0, ANY),
    ]
);
message!(ADD_OFFSETS_TO_TXN, AddOffsetsToTxn, 0, 4, flexible_from 3, ADD_OFFSETS_TO_TXN_BODY);

// EndTxn (key 26).
strukt!(
    END_TXN_BODY,
    end_txn_request::EndTxnRequest,
    [
        field("transactional_id", Str, 0, ANY),
        field("producer_id", Int64, 0, ANY),
        field("producer_epoch", Int16, 0, ANY),
        field("committed", Bool, 0, ANY),
    ]
);
message!(END_TXN, EndTxn, 0, 5, flexible_from 3, END_TXN_BODY);

// DescribeTransactions (key 65): flexible in every version.
strukt!(
    DESCRIBE_TRANSACTIONS_BODY,
    describe_transactions_request::DescribeTransactionsRequest,
    [field("transactional_ids", Array(&Str), 0, ANY),]
);
message!(DESCRIBE_TRANSACTIONS, DescribeTransactions, 0, 0, flexible_from 0, DESCRIBE_TRANSACTIONS_BODY);

// ListTransactions (key 66): flexible in every version.
strukt!(
    LIST_TRANSACTIONS_BODY,
    list_transactions_request::ListTransactionsRequest,
    [
        field("state_filters", Array(&Str), 0, ANY),
        field("producer_id_filters", Array(&Int64), 0, ANY),
        field("duration_filter", Int64, 1, ANY),
        field("transactional_id_pattern", NullableStr, 2, ANY),
    ]
);
message!(LIST_TRANSACTIONS, ListTransactions, 0, 2, flexible_from 0, LIST_TRANSACTIONS_BODY);
// TxnOffsetCommit (key 28).
strukt!(
    TXN_OFFSET_COMMIT_PARTITION,
    txn_offset_commit_request::TxnOffsetCommitRequestPartition,
    [
        field("partition_index", Int32, 0, ANY),
        field("committed_offset", Int64, 0, ANY),
        field("committed_leader_epoch", Int32, 2, ANY),
        field("committed_metadata", NullableStr, 0, ANY),
    ]
);
strukt!(
    TXN_OFFSET_COMMIT_TOPIC,
    txn_offset_commit_request::TxnOffsetCommitRequestTopic,
    [
        field("name", Str, 0, ANY),
        field(
            "partitions",
            Array(&Struct(&TXN_OFFSET_COMMIT_PARTITION)),
            0,
            ANY
        ),
    ]
);
strukt!(
    TXN_OFFSET_COMMIT_BODY,
    txn_offset_commit_request::TxnOffsetCommitRequest,
    [
        field("transactional_id", Str, 0, ANY),
        field("group_id", Str, 0, ANY),
        field("producer_id", Int64, 0, ANY),
        field("producer_epoch", Int16, 0, ANY),
        field("generation_id", Int32, 3, ANY),
        field("member_id", Str, 3, ANY),
        field("group_instance_id", NullableStr, 3, ANY),
        field("topics", Array(&Struct(&TXN_OFFSET_COMMIT_TOPIC)), 0, ANY),
    ]
);
message!(TXN_OFFSET_COMMIT, TxnOffsetCommit, 0, 5, flexible_from 3, TXN_OFFSET_COMMIT_BODY);

// SASL: SaslHandshake (key 17) v0-1, never flexible; SaslAuthenticate (key 36) v0-2, flexible
// from 2. The SASL bytes are bounded again by the mechanisms (I40).
strukt!(
    SASL_HANDSHAKE_BODY,
    sasl_handshake_request::SaslHandshakeRequest,
    [field("mechanism", Str, 0, ANY),]
);
message!(SASL_HANDSHAKE, SaslHandshake, 0, 1, flexible_from ANY, SASL_HANDSHAKE_BODY);
strukt!(
    SASL_AUTHENTICATE_BODY,
    sasl_authenticate_request::SaslAuthenticateRequest,
    [field("auth_bytes", Kind::Bytes, 0, ANY),]
);
message!(SASL_AUTHENTICATE, SaslAuthenticate, 0, 2, flexible_from 2, SASL_AUTHENTICATE_BODY);

// SCRAM credentials: DescribeUserScramCredentials (key 50) and AlterUserScramCredentials
// (key 51), v0, flexible.
strukt!(
    DESCRIBE_SCRAM_USER,
    describe_user_scram_credentials_request::UserName,
    [field("name", Str, 0, ANY),]
);
strukt!(
    DESCRIBE_SCRAM_BODY,
    describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest,
    [field(
        "users",
        NullableArray(&Struct(&DESCRIBE_SCRAM_USER)),
        0,
        ANY
    ),]
);
message!(
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    DescribeUserScramCredentials,
    0,
    0,
    flexible_from 0,
    DESCRIBE_SCRAM_BODY
);
strukt!(
    ALTER_SCRAM_DELETION,
    alter_user_scram_credentials_request::ScramCredentialDeletion,
    [field("name", Str, 0, ANY), field("mechanism", Int8, 0, ANY),]
);
strukt!(
    ALTER_SCRAM_UPSERTION,
    alter_user_scram_credentials_request::ScramCredentialUpsertion,
    [
        field("name", Str, 0, ANY),
        field("mechanism", Int8, 0, ANY),
        field("iterations", Int32, 0, ANY),
        field("salt", Kind::Bytes, 0, ANY),
        field("salted_password", Kind::Bytes, 0, ANY),
    ]
);
strukt!(
    ALTER_SCRAM_BODY,
    alter_user_scram_credentials_request::AlterUserScramCredentialsRequest,
    [
        field("deletions", Array(&Struct(&ALTER_SCRAM_DELETION)), 0, ANY),
        field("upsertions", Array(&Struct(&ALTER_SCRAM_UPSERTION)), 0, ANY),
    ]
);
message!(
    ALTER_USER_SCRAM_CREDENTIALS,
    AlterUserScramCredentials,
    0,
    0,
    flexible_from 0,
    ALTER_SCRAM_BODY
);

// Client quotas: DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1,
// flexible from 1.
strukt!(
    DESCRIBE_QUOTAS_COMPONENT,
    describe_client_quotas_request::ComponentData,
    [
        field("entity_type", Str, 0, ANY),
        field("match_type", Int8, 0, ANY),
        field("match", NullableStr, 0, ANY),
    ]
);
strukt!(
    DESCRIBE_QUOTAS_BODY,
    describe_client_quotas_request::DescribeClientQuotasRequest,
    [
        field(
            "components",
            Array(&Struct(&DESCRIBE_QUOTAS_COMPONENT)),
            0,
            ANY
        ),
        field("strict", Bool, 0, ANY),
    ]
);
message!(
    DESCRIBE_CLIENT_QUOTAS,
    DescribeClientQuotas,
    0,
    1,
    flexible_from 1,
    DESCRIBE_QUOTAS_BODY
);
strukt!(
    ALTER_QUOTAS_ENTITY,
    alter_client_quotas_request::EntityData,
    [
        field("entity_type", Str, 0, ANY),
        field("entity_name", NullableStr, 0, ANY),
    ]
);
strukt!(
    ALTER_QUOTAS_OP,
    alter_client_quotas_request::OpData,
    [
        field("key", Str, 0, ANY),
        field("value", Kind::Float64, 0, ANY),
        field("remove", Bool, 0, ANY),
    ]
);
strukt!(
    ALTER_QUOTAS_ENTRY,
    alter_client_quotas_request::EntryData,
    [
        field("entity", Array(&Struct(&ALTER_QUOTAS_ENTITY)), 0, ANY),
        field("ops", Array(&Struct(&ALTER_QUOTAS_OP)), 0, ANY),
    ]
);
strukt!(
    ALTER_QUOTAS_BODY,
    alter_client_quotas_request::AlterClientQuotasRequest,
    [
        field("entries", Array(&Struct(&ALTER_QUOTAS_ENTRY)), 0, ANY),
        field("validate_only", Bool, 0, ANY),
    ]
);
message!(
    ALTER_CLIENT_QUOTAS,
    AlterClientQuotas,
    0,
    1,
    flexible_from 1,
    ALTER_QUOTAS_BODY
);

/// Every request API the broker can pre-check, in API-key order.
pub static COVERED: &[&MessageSchema] = &[
    &PRODUCE,
    &FETCH,
    &LIST_OFFSETS,
    &METADATA,
    &OFFSET_COMMIT,
    &OFFSET_FETCH,
    &FIND_COORDINATOR,
    &JOIN_GROUP,
    &HEARTBEAT,
    &LEAVE_GROUP,
    &SYNC_GROUP,
    &DESCRIBE_GROUPS,
    &LIST_GROUPS,
    &SASL_HANDSHAKE,
    &API_VERSIONS,
    &CREATE_TOPICS,
    &DELETE_TOPICS,
    &DELETE_RECORDS,
    &INIT_PRODUCER_ID,
    &WRITE_TXN_MARKERS,
    &OFFSET_FOR_LEADER_EPOCH,
    &ADD_PARTITIONS_TO_TXN,
    &ADD_OFFSETS_TO_TXN,
    &END_TXN,
    &DESCRIBE_CONFIGS,
    &ALTER_CONFIGS,
    &DESCRIBE_ACLS,
    &CREATE_ACLS,
    &DELETE_ACLS,
    &DESCRIBE_LOG_DIRS,
    &SASL_AUTHENTICATE,
    &DELETE_GROUPS,
    &CREATE_PARTITIONS,
    &INCREMENTAL_ALTER_CONFIGS,
    &OFFSET_DELETE,
    &DESCRIBE_CLIENT_QUOTAS,
    &ALTER_CLIENT_QUOTAS,
    &DESCRIBE_CLUSTER,
    &DESCRIBE_USER_SCRAM_CREDENTIALS,
    &ALTER_USER_SCRAM_CREDENTIALS,
    &DESCRIBE_PRODUCERS,
    &CONSUMER_GROUP_HEARTBEAT,
    &CONSUMER_GROUP_DESCRIBE,
    &DESCRIBE_TOPIC_PARTITIONS,
    &DESCRIBE_TRANSACTIONS,
    &LIST_TRANSACTIONS,
    &TXN_OFFSET_COMMIT,
];

/// The schema for `api_key`, if the broker covers it.
pub fn schema_for(api_key: ApiKey) -> Option<&'static MessageSchema> {
    COVERED.iter().copied().find(|s| s.api_key == api_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Message, Request};

    /// Pins each schema's API key and version range to the `kafka-protocol` request type's, and
    /// its flexible version to the request header version the crate prescribes.
    macro_rules! pin {
        ($($ty:ty),* $(,)?) => {{
            let mut seen = 0;
            $(
                let s = schema_for(ApiKey::try_from(<$ty as Request>::KEY).expect("key"))
                    .expect(stringify!($ty));
                assert_eq!(s.api_key as i16, <$ty as Request>::KEY, stringify!($ty));
                assert_eq!(
                    (s.min_version, s.max_version),
                    (<$ty as Message>::VERSIONS.min, <$ty as Message>::VERSIONS.max),
                    stringify!($ty)
                );
                for v in s.min_version..=s.max_version {
                    let want = if s.is_flexible(v) { 2 } else { 1 };
                    assert_eq!(s.api_key.request_header_version(v), want, "{} v{v}", stringify!($ty));
                }
                seen += 1;
            )*
            seen
        }};
    }

    #[test]
    fn schemas_match_kafka_protocol_versions_and_flexibility() {
        let seen = pin!(
            ProduceRequest,
            FetchRequest,
            ListOffsetsRequest,
            MetadataRequest,
            OffsetCommitRequest,
            OffsetFetchRequest,
            FindCoordinatorRequest,
            JoinGroupRequest,
            HeartbeatRequest,
            LeaveGroupRequest,
            SyncGroupRequest,
            DescribeGroupsRequest,
            ListGroupsRequest,
            ApiVersionsRequest,
            CreateTopicsRequest,
            DeleteTopicsRequest,
            DeleteRecordsRequest,
            InitProducerIdRequest,
            WriteTxnMarkersRequest,
            DescribeConfigsRequest,
            AlterConfigsRequest,
            DeleteGroupsRequest,
            CreatePartitionsRequest,
            IncrementalAlterConfigsRequest,
            OffsetDeleteRequest,
            DescribeClusterRequest,
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupDescribeRequest,
            OffsetForLeaderEpochRequest,
            DescribeLogDirsRequest,
            DescribeAclsRequest,
            CreateAclsRequest,
            DeleteAclsRequest,
            DescribeProducersRequest,
            DescribeTopicPartitionsRequest,
            AddPartitionsToTxnRequest,
            AddOffsetsToTxnRequest,
            EndTxnRequest,
            DescribeTransactionsRequest,
            ListTransactionsRequest,
            TxnOffsetCommitRequest,
            SaslHandshakeRequest,
            SaslAuthenticateRequest,
            DescribeUserScramCredentialsRequest,
            AlterUserScramCredentialsRequest,
            DescribeClientQuotasRequest,
            AlterClientQuotasRequest,
        );
        assert_eq!(seen, COVERED.len());
    }

    #[test]
    fn tagged_fields_have_unique_tags_per_struct_and_nothing_is_unbounded() {
        fn check(s: &StructSchema, depth: usize) {
            assert!(depth < 8, "schema nesting too deep at {}", s.name);
            let mut tags: Vec<u32> = s.fields.iter().filter_map(|f| f.tag).collect();
            let n = tags.len();
            tags.sort_unstable();
            tags.dedup();
            assert_eq!(tags.len(), n, "{}", s.name);
            for f in s.fields {
                assert!(f.min_version <= f.max_version, "{}.{}", s.name, f.name);
                let mut k = &f.kind;
                while let Kind::Array(e) | Kind::NullableArray(e) = k {
                    k = e;
                }
                if let Kind::Struct(inner) | Kind::NullableStruct(inner) = k {
                    check(inner, depth + 1);
                }
            }
        }
        for s in COVERED {
            check(s.body, 0);
        }
    }
}
