//! Kafka error codes used by the group coordinator.
//!
//! Temporary: a crate-wide `core::error_code::ErrorCode` (an `i16` newtype with every Kafka
//! code) is being added separately. When it lands, this file becomes
//! `pub use crate::error_code::ErrorCode;` and nothing else changes: the names and numbers
//! below are Kafka's (`org.apache.kafka.common.protocol.Errors`).

/// A Kafka error code as it goes on the wire (`0` = no error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// No error.
    pub const NONE: ErrorCode = ErrorCode(0);
    /// The server hit an unexpected condition (a failed append of unknown cause).
    pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode(-1);
    /// The coordinator cannot serve the request now (its log is offline, the group is being
    /// deleted or loaded); the client retries, possibly after rediscovering the coordinator.
    pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = ErrorCode(15);
    /// The offset metadata string exceeds `offset.metadata.max.bytes`.
    pub const OFFSET_METADATA_TOO_LARGE: ErrorCode = ErrorCode(12);
    /// The join's protocol type or protocols are incompatible with the group's.
    pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = ErrorCode(23);
    /// The group id is empty or otherwise unusable.
    pub const INVALID_GROUP_ID: ErrorCode = ErrorCode(24);
    /// The member id is not a member of the group (or of its current generation).
    pub const UNKNOWN_MEMBER_ID: ErrorCode = ErrorCode(25);
    /// The session timeout is outside `group.min.session.timeout.ms..=group.max.session.timeout.ms`.
    pub const INVALID_SESSION_TIMEOUT: ErrorCode = ErrorCode(26);
    /// The group is rebalancing: the member must rejoin.
    pub const REBALANCE_IN_PROGRESS: ErrorCode = ErrorCode(27);
    /// The committed offsets do not fit one record (the append was refused as too large).
    pub const INVALID_COMMIT_OFFSET_SIZE: ErrorCode = ErrorCode(28);
    /// The generation id is not the group's current generation.
    pub const ILLEGAL_GENERATION: ErrorCode = ErrorCode(22);
    /// The API version is not supported (used by the consumer-protocol placeholder).
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(35);
    /// The request is malformed.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(42);
    /// DeleteGroups on a group that still has members.
    pub const NON_EMPTY_GROUP: ErrorCode = ErrorCode(68);
    /// The group does not exist.
    pub const GROUP_ID_NOT_FOUND: ErrorCode = ErrorCode(69);
    /// A v4+ JoinGroup came without a member id: it must rejoin with the id it was given.
    pub const MEMBER_ID_REQUIRED: ErrorCode = ErrorCode(79);
    /// The group already has `group.max.size` members.
    pub const GROUP_MAX_SIZE_REACHED: ErrorCode = ErrorCode(81);
    /// A static member (`group.instance.id`) was replaced by a newer member id.
    pub const FENCED_INSTANCE_ID: ErrorCode = ErrorCode(82);
    /// OffsetDelete of a partition of a topic the group is subscribed to.
    pub const GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode = ErrorCode(86);
    /// The partition is not known (OffsetDelete of an offset never committed is not an error
    /// in Kafka; kept for completeness of fetch answers).
    pub const UNKNOWN_TOPIC_OR_PARTITION: ErrorCode = ErrorCode(3);
}

impl ErrorCode {
    /// True for [`ErrorCode::NONE`].
    pub fn is_ok(self) -> bool {
        self == ErrorCode::NONE
    }
}
