//! Kafka protocol error codes the broker answers with (names as Kafka's `Errors` enum has
//! them). Pure constants.

/// No error.
pub const NONE: i16 = 0;
/// The requested offset is outside the partition's range.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record batch failed its CRC or is malformed.
pub const CORRUPT_MESSAGE: i16 = 2;
/// The topic or partition does not exist on this broker.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// A batch is larger than the topic's `max.message.bytes`.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// The topic name is not legal.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// `acks` is not -1, 0 or 1.
pub const INVALID_REQUIRED_ACKS: i16 = 21;
/// The API version is not supported.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// A topic of this name exists.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// The partition count is not acceptable.
pub const INVALID_PARTITIONS: i16 = 37;
/// The replication factor is not acceptable (a single node has one replica).
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// The replica assignment names brokers other than this one.
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// A configuration value is not acceptable.
pub const INVALID_CONFIG: i16 = 40;
/// The request is malformed in a way the schema cannot express.
pub const INVALID_REQUEST: i16 = 42;
/// The disk failed under the partition.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// A produce request held something other than exactly one record batch per partition.
pub const INVALID_RECORD: i16 = 87;
/// No topic has this id.
pub const UNKNOWN_TOPIC_ID: i16 = 100;
/// This broker is not (or no longer) the group's coordinator (shutting down).
pub const NOT_COORDINATOR: i16 = 16;
/// The coordinator is not available (FindCoordinator for a coordinator we do not run).
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// The client may not act on this topic (here: changes to internal topics).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// The DescribeCluster endpoint type is not served.
pub const UNSUPPORTED_ENDPOINT_TYPE: i16 = 119;
