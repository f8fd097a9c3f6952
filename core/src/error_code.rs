//! Kafka protocol error codes: one table, one type.
//!
//! Contract:
//! - [`ErrorCode`] is the `i16` a Kafka response carries, named: every code the broker (or a
//!   core decision) answers with is a constant here, with Kafka's name (its `Errors` enum) and
//!   number. Nothing else in the workspace spells an error code as a bare number; a source scan
//!   (`broker/tests/error_codes.rs`) fails if `broker/src` does.
//! - [`ErrorCode::ALL`] lists every constant once; a unit test checks that no number or name
//!   appears twice.
//! - Converting to the wire is [`ErrorCode::code`]; from the wire, [`ErrorCode`]`(n)` (any
//!   number is representable, known or not).
//! - Never: allocates or fails.

use std::fmt;

/// A Kafka protocol error code (0 = no error).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ErrorCode(pub i16);

macro_rules! error_codes {
    ($( $(#[doc = $doc:literal])* $name:ident = $code:literal; )*) => {
        impl ErrorCode {
            $( $(#[doc = $doc])* pub const $name: ErrorCode = ErrorCode($code); )*

            /// Every named code, with its name, in table order.
            pub const ALL: &'static [(ErrorCode, &'static str)] =
                &[$( (ErrorCode::$name, stringify!($name)), )*];
        }
    };
}

error_codes! {
    /// The server hit an unexpected error (also: the request could not reach its shard).
    UNKNOWN_SERVER_ERROR = -1;
    /// No error.
    NONE = 0;
    /// The requested offset is outside the partition's range.
    OFFSET_OUT_OF_RANGE = 1;
    /// A record batch failed its CRC or is malformed.
    CORRUPT_MESSAGE = 2;
    /// The topic or partition does not exist on this broker.
    UNKNOWN_TOPIC_OR_PARTITION = 3;
    /// A batch is larger than the topic's `max.message.bytes`.
    MESSAGE_TOO_LARGE = 10;
    /// A committed offset's metadata string is too long.
    OFFSET_METADATA_TOO_LARGE = 12;
    /// The coordinator is still loading its state (retriable).
    COORDINATOR_LOAD_IN_PROGRESS = 14;
    /// The group coordinator is not available (retriable).
    COORDINATOR_NOT_AVAILABLE = 15;
    /// This broker is not the coordinator of the group.
    NOT_COORDINATOR = 16;
    /// The topic name is not legal.
    INVALID_TOPIC_EXCEPTION = 17;
    /// Not enough in-sync replicas (retriable); also a transactional produce whose
    /// partition the coordinator could not verify now (Kafka answers the same).
    NOT_ENOUGH_REPLICAS = 19;
    /// `acks` is not -1, 0 or 1.
    INVALID_REQUIRED_ACKS = 21;
    /// The member's generation is not the group's current one.
    ILLEGAL_GENERATION = 22;
    /// The member's protocol type or protocols do not match the group's.
    INCONSISTENT_GROUP_PROTOCOL = 23;
    /// The group id is empty or not legal.
    INVALID_GROUP_ID = 24;
    /// The member id is not a member of the group.
    UNKNOWN_MEMBER_ID = 25;
    /// The session timeout is outside the broker's allowed range.
    INVALID_SESSION_TIMEOUT = 26;
    /// The group is rebalancing; the member must rejoin.
    REBALANCE_IN_PROGRESS = 27;
    /// The committed offset's size is invalid.
    INVALID_COMMIT_OFFSET_SIZE = 28;
    /// The client may not act on this topic (here: changes to internal topics).
    TOPIC_AUTHORIZATION_FAILED = 29;
    /// The client may not access the group.
    GROUP_AUTHORIZATION_FAILED = 30;
    /// The client may not do this on the cluster.
    CLUSTER_AUTHORIZATION_FAILED = 31;
    /// A record's timestamp is outside the topic's accepted window.
    INVALID_TIMESTAMP = 32;
    /// The SASL mechanism asked for is not enabled on the listener.
    UNSUPPORTED_SASL_MECHANISM = 33;
    /// A SASL request out of order (SaslAuthenticate before SaslHandshake, or after authentication).
    ILLEGAL_SASL_STATE = 34;
    /// The API version is not supported.
    UNSUPPORTED_VERSION = 35;
    /// A topic of this name exists.
    TOPIC_ALREADY_EXISTS = 36;
    /// The partition count is not acceptable.
    INVALID_PARTITIONS = 37;
    /// The replication factor is not acceptable (a single node has one replica).
    INVALID_REPLICATION_FACTOR = 38;
    /// The replica assignment names brokers other than this one.
    INVALID_REPLICA_ASSIGNMENT = 39;
    /// A configuration value is not acceptable.
    INVALID_CONFIG = 40;
    /// The request is malformed in a way the schema cannot express.
    INVALID_REQUEST = 42;
    /// A batch's sequence number is not the next one expected for its producer.
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45;
    /// A batch's producer epoch is older than the partition has seen (fenced).
    INVALID_PRODUCER_EPOCH = 47;
    /// The request is not valid in the transaction's current state (e.g. EndTxn(commit) of
    /// an aborted transaction); also a transactional batch where none is expected.
    INVALID_TXN_STATE = 48;
    /// The producer id is not the one the transactional id is mapped to (or the id is unknown).
    INVALID_PRODUCER_ID_MAPPING = 49;
    /// The transaction timeout is not positive or exceeds `transaction.max.timeout.ms`.
    INVALID_TRANSACTION_TIMEOUT = 50;
    /// Another transition of this transactional id is in progress; retry (retriable).
    CONCURRENT_TRANSACTIONS = 51;
    /// A marker from a transaction coordinator older than the one that last wrote to the
    /// producer's transactions in this partition.
    TRANSACTION_COORDINATOR_FENCED = 52;
    /// The client may not use this transactional id.
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53;
    /// Security features are disabled: no authorizer is configured (the ACL APIs' answer).
    SECURITY_DISABLED = 54;
    /// Not attempted because another part of the request failed (AddPartitionsToTxn).
    OPERATION_NOT_ATTEMPTED = 55;
    /// The disk failed under the partition.
    KAFKA_STORAGE_ERROR = 56;
    /// SASL authentication failed (wrong password, unknown user, bad message).
    SASL_AUTHENTICATION_FAILED = 58;
    /// The group still has members or committed offsets and cannot be deleted.
    NON_EMPTY_GROUP = 68;
    /// The client's leader epoch is older than the partition's (OffsetForLeaderEpoch).
    FENCED_LEADER_EPOCH = 74;
    /// The client's leader epoch is newer than the partition's (OffsetForLeaderEpoch).
    UNKNOWN_LEADER_EPOCH = 75;
    /// The group does not exist.
    GROUP_ID_NOT_FOUND = 69;
    /// A join without a member id: the member must rejoin with the id it was given.
    MEMBER_ID_REQUIRED = 79;
    /// The group has reached `group.max.size`.
    GROUP_MAX_SIZE_REACHED = 81;
    /// Another member with the same `group.instance.id` took over (static membership).
    FENCED_INSTANCE_ID = 82;
    /// The topic still has committed offsets of a subscribed group.
    GROUP_SUBSCRIBED_TO_TOPIC = 86;
    /// A record or batch is not acceptable (e.g. not exactly one batch per partition, or a
    /// control batch from a client).
    INVALID_RECORD = 87;
    /// There are unstable offsets (pending transactional writes) for the partition.
    UNSTABLE_OFFSET_COMMIT = 88;
    /// A newer producer with the same transactional id fenced this one (its epoch is stale).
    PRODUCER_FENCED = 90;
    /// The resource (a SCRAM user's credential) does not exist.
    RESOURCE_NOT_FOUND = 91;
    /// A request names the same resource twice.
    DUPLICATE_RESOURCE = 92;
    /// A credential does not meet the broker's requirements (iterations, salt, name).
    UNACCEPTABLE_CREDENTIAL = 93;
    /// No topic has this id.
    UNKNOWN_TOPIC_ID = 100;
    /// The transactional id is not known to its coordinator (DescribeTransactions).
    TRANSACTIONAL_ID_NOT_FOUND = 105;
    /// The member epoch is fenced by the group coordinator (consumer protocol).
    FENCED_MEMBER_EPOCH = 110;
    /// The instance id is still used by another member (consumer protocol).
    UNRELEASED_INSTANCE_ID = 111;
    /// The assignor is not supported by the group coordinator.
    UNSUPPORTED_ASSIGNOR = 112;
    /// The member epoch is stale (consumer protocol).
    STALE_MEMBER_EPOCH = 113;
    /// The DescribeCluster endpoint type is not served.
    UNSUPPORTED_ENDPOINT_TYPE = 119;
    /// The transaction must be aborted by the producer (KIP-890: a partition not in the
    /// transaction was written).
    TRANSACTION_ABORTABLE = 120;
    /// A subscription's regular expression does not compile (consumer protocol).
    INVALID_REGULAR_EXPRESSION = 130;
}

impl ErrorCode {
    /// The number on the wire.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// Whether this is an error (not [`ErrorCode::NONE`]).
    pub const fn is_error(self) -> bool {
        self.0 != 0
    }

    /// Whether this is [`ErrorCode::NONE`].
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// Kafka's name for this code, if it is in the table.
    pub fn name(self) -> Option<&'static str> {
        Self::ALL
            .iter()
            .find(|(code, _)| *code == self)
            .map(|(_, name)| *name)
    }
}

impl From<ErrorCode> for i16 {
    fn from(code: ErrorCode) -> i16 {
        code.0
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}({})", self.0),
            None => write!(f, "ErrorCode({})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_code_and_name_appears_once() {
        let codes: BTreeSet<i16> = ErrorCode::ALL.iter().map(|(c, _)| c.0).collect();
        let names: BTreeSet<&str> = ErrorCode::ALL.iter().map(|(_, n)| *n).collect();
        assert_eq!(
            codes.len(),
            ErrorCode::ALL.len(),
            "a number is defined twice"
        );
        assert_eq!(names.len(), ErrorCode::ALL.len(), "a name is defined twice");
    }

    #[test]
    fn names_and_wire_values() {
        assert_eq!(ErrorCode::INVALID_RECORD.code(), 87);
        assert_eq!(ErrorCode::INVALID_RECORD.name(), Some("INVALID_RECORD"));
        assert_eq!(
            format!("{}", ErrorCode::NOT_COORDINATOR),
            "NOT_COORDINATOR(16)"
        );
        assert_eq!(format!("{:?}", ErrorCode(999)), "ErrorCode(999)");
        assert!(!ErrorCode::NONE.is_error() && ErrorCode::UNKNOWN_SERVER_ERROR.is_error());
        assert_eq!(i16::from(ErrorCode::STALE_MEMBER_EPOCH), 113);
    }
}
