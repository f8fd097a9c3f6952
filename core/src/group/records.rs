//! The records of `__consumer_offsets`, in Kafka's own key and value schemas, so Kafka's
//! tooling (`kafka-console-consumer --formatter ...OffsetsMessageFormatter`,
//! `kafka-dump-log --offsets-decoder`) could read our log.
//!
//! Every record is a key and an optional value (`None` = tombstone). Both start with a
//! big-endian `int16` schema version. Strings are `int16` length + UTF-8 (nullable: length −1),
//! bytes are `int32` length + bytes, arrays `int32` count; from a value's first *flexible*
//! version (4 for both values below) strings, bytes and arrays use unsigned-varint lengths
//! plus one, and every struct ends with tagged fields (skipped on read, none written).
//!
//! | key version | key fields | value | value versions read (written) |
//! |---|---|---|---|
//! | 0, 1 | OffsetCommitKey: group, topic, partition (int32) | OffsetCommitValue | 0–4 (1 with an explicit expire timestamp, else 3) |
//! | 2 | GroupMetadataKey: group | GroupMetadataValue | 0–4 (3) |
//! | 3–8 | KIP-848 consumer-group records, all keyed by group first | decoded by the consumer-protocol group | — |
//!
//! OffsetCommitValue: offset int64; leaderEpoch int32 (v3+); metadata string; commitTimestamp
//! int64; expireTimestamp int64 (v1 only).
//!
//! GroupMetadataValue: protocolType string; generation int32; protocol nullable string;
//! leader nullable string; currentStateTimestamp int64 (v2+); members array of
//! { memberId string; groupInstanceId nullable string (v3+); clientId string; clientHost
//! string; rebalanceTimeout int32 (v1+); sessionTimeout int32; subscription bytes; assignment
//! bytes }.
//!
//! Parsing is bounded (I10): every length and count is checked against the bytes present
//! before anything is allocated, and a hostile or damaged record is a [`RecordError`], never a
//! panic. Key versions 3–8 belong to the KIP-848 consumer protocol: this module parses only
//! their leading group id (to route them) and keeps the bytes whole for the consumer-protocol
//! group's own codecs, which go in a separate section below or in `consumer.rs`.

use thiserror::Error;

use crate::field_codec::{FieldError, FieldReader as Reader, FieldWriter as Writer};

/// One record for (or from) the coordinator's `__consumer_offsets` partition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupRecord {
    /// Key bytes (schema version first).
    pub key: Vec<u8>,
    /// Value bytes (schema version first), `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// A field runs past the end of the record.
    #[error("record truncated: needed {needed} more bytes at byte {at}")]
    Truncated {
        /// Where the field starts.
        at: usize,
        /// How many bytes it needs beyond the end.
        needed: usize,
    },
    /// A length or count below −1 (or −1 where null is not allowed), or a varint too long.
    #[error("invalid length {0}")]
    InvalidLength(i64),
    /// A string is not UTF-8.
    #[error("string is not UTF-8")]
    InvalidUtf8,
    /// A key schema version we do not know.
    #[error("unknown key version {0}")]
    UnknownKeyVersion(i16),
    /// A value schema version we do not know for this key.
    #[error("unknown value version {0}")]
    UnknownValueVersion(i16),
    /// Bytes after the last field of a key.
    #[error("{0} trailing bytes after the key")]
    TrailingKeyBytes(usize),
}

/// Key version written for offset commits.
pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
/// Key version of group metadata.
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
/// First and last key versions of the KIP-848 consumer-group records
/// (ConsumerGroupMetadata 3, PartitionMetadata 4, MemberMetadata 5,
/// TargetAssignmentMetadata 6, TargetAssignmentMember 7, CurrentMemberAssignment 8).
pub const CONSUMER_KEY_VERSIONS: std::ops::RangeInclusive<i16> = 3..=8;
/// Value version written for group metadata.
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// A decoded key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordKey {
    /// A committed offset of one partition.
    OffsetCommit {
        /// Group id.
        group: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// A classic group's metadata.
    GroupMetadata {
        /// Group id.
        group: String,
    },
    /// A KIP-848 consumer-group record (key versions 3–8), routed by group id; the
    /// consumer-protocol group decodes the rest itself.
    Consumer {
        /// Key version (3–8).
        version: i16,
        /// Group id (the first field of every such key).
        group: String,
    },
}

/// A committed offset as stored (OffsetCommitValue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// Committed offset.
    pub offset: i64,
    /// Leader epoch, −1 unknown (stored from value version 3).
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: String,
    /// When the commit was made (coordinator time).
    pub commit_timestamp: i64,
    /// Explicit expiry (value version 1, from an OffsetCommit v2–v4 retention time).
    pub expire_timestamp: Option<i64>,
}

/// One member in stored group metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadata {
    /// Member id.
    pub member_id: String,
    /// Static membership id (v3+).
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout (v1+; v0 reads as the session timeout).
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// The member's metadata for the selected protocol.
    pub subscription: Vec<u8>,
    /// The member's assignment.
    pub assignment: Vec<u8>,
}

/// A classic group's stored state (GroupMetadataValue): what the group was after its last
/// completed rebalance (or when it became empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// Protocol type (`consumer`; empty for an offsets-only group).
    pub protocol_type: String,
    /// Generation.
    pub generation: i32,
    /// Selected protocol, `None` when empty.
    pub protocol: Option<String>,
    /// Leader, `None` when empty.
    pub leader: Option<String>,
    /// When the group entered its current state (v2+, −1 unknown).
    pub current_state_timestamp: i64,
    /// Members with their subscriptions and assignments.
    pub members: Vec<MemberMetadata>,
}

/// Encodes an OffsetCommitKey (key version 1).
pub fn offset_commit_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut w = Writer::new(OFFSET_COMMIT_KEY_VERSION, false);
    w.string(group);
    w.string(topic);
    w.i32(partition);
    w.buf
}

/// Encodes a GroupMetadataKey (key version 2).
pub fn group_metadata_key(group: &str) -> Vec<u8> {
    let mut w = Writer::new(GROUP_METADATA_KEY_VERSION, false);
    w.string(group);
    w.buf
}

impl OffsetCommitValue {
    /// Encodes as Kafka does: value version 1 when there is an explicit expire timestamp,
    /// else version 3.
    pub fn encode(&self) -> Vec<u8> {
        match self.expire_timestamp {
            Some(expire) => {
                let mut w = Writer::new(1, false);
                w.i64(self.offset);
                w.string(&self.metadata);
                w.i64(self.commit_timestamp);
                w.i64(expire);
                w.buf
            }
            None => {
                let mut w = Writer::new(3, false);
                w.i64(self.offset);
                w.i32(self.leader_epoch);
                w.string(&self.metadata);
                w.i64(self.commit_timestamp);
                w.buf
            }
        }
    }

    /// Decodes value versions 0–4.
    pub fn decode(bytes: &[u8]) -> Result<OffsetCommitValue, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnknownValueVersion(version));
        }
        r.flexible = version >= 4;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string()?;
        let commit_timestamp = r.i64()?;
        let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
        r.skip_tags()?;
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
            expire_timestamp,
        })
    }
}

impl GroupMetadataValue {
    /// Encodes as value version 3 (Kafka 2.3+; readable by every Kafka since then).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(GROUP_METADATA_VALUE_VERSION)
    }

    /// Encodes at value version `version` (0–4; anything else is treated as 4). Older
    /// versions drop the fields they lack.
    pub fn encode_version(&self, version: i16) -> Vec<u8> {
        let version = version.clamp(0, 4);
        let mut w = Writer::new(version, version >= 4);
        w.string(&self.protocol_type);
        w.i32(self.generation);
        w.nullable_string(self.protocol.as_deref());
        w.nullable_string(self.leader.as_deref());
        if version >= 2 {
            w.i64(self.current_state_timestamp);
        }
        w.array_len(Some(self.members.len()));
        for m in &self.members {
            w.string(&m.member_id);
            if version >= 3 {
                w.nullable_string(m.group_instance_id.as_deref());
            }
            w.string(&m.client_id);
            w.string(&m.client_host);
            if version >= 1 {
                w.i32(m.rebalance_timeout_ms);
            }
            w.i32(m.session_timeout_ms);
            w.bytes(&m.subscription);
            w.bytes(&m.assignment);
            w.tags(&[]);
        }
        w.tags(&[]);
        w.buf
    }

    /// Decodes value versions 0–4.
    pub fn decode(bytes: &[u8]) -> Result<GroupMetadataValue, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if !(0..=4).contains(&version) {
            return Err(RecordError::UnknownValueVersion(version));
        }
        r.flexible = version >= 4;
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        // Smallest member: four empty strings, two int32s (one before v1), two empty bytes.
        let min_member = if r.flexible {
            4 + 8 + 2 + 1
        } else {
            4 * 2 + 8 + 8
        };
        let count = r.array_len(min_member)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = r.string()?;
            let group_instance_id = if version >= 3 {
                r.nullable_string()?
            } else {
                None
            };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
            let session_timeout_ms = r.i32()?;
            let subscription = r.bytes()?;
            let assignment = r.bytes()?;
            r.skip_tags()?;
            members.push(MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms: rebalance_timeout.unwrap_or(session_timeout_ms),
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        r.skip_tags()?;
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

impl RecordKey {
    /// Encodes the key (offset commits at key version 1). A consumer-protocol key cannot be
    /// re-encoded from its group alone; its codec lives with the consumer-protocol group, so
    /// this returns only its version and group id prefix.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            RecordKey::OffsetCommit {
                group,
                topic,
                partition,
            } => offset_commit_key(group, topic, *partition),
            RecordKey::GroupMetadata { group } => group_metadata_key(group),
            RecordKey::Consumer { version, group } => {
                let mut w = Writer::new(*version, false);
                w.string(group);
                w.buf
            }
        }
    }

    /// Decodes a key. Keys are never flexible. A consumer-protocol key (versions 3–8) is
    /// decoded only up to its group id; its remaining fields are the consumer group's.
    pub fn decode(bytes: &[u8]) -> Result<RecordKey, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        let key = match version {
            0 | 1 => RecordKey::OffsetCommit {
                group: r.string()?,
                topic: r.string()?,
                partition: r.i32()?,
            },
            2 => RecordKey::GroupMetadata { group: r.string()? },
            v if CONSUMER_KEY_VERSIONS.contains(&v) => {
                return Ok(RecordKey::Consumer {
                    version: v,
                    group: r.string()?,
                });
            }
            v => return Err(RecordError::UnknownKeyVersion(v)),
        };
        if r.remaining() != 0 {
            return Err(RecordError::TrailingKeyBytes(r.remaining()));
        }
        Ok(key)
    }

    /// The group the record belongs to.
    pub fn group(&self) -> &str {
        match self {
            RecordKey::OffsetCommit { group, .. }
            | RecordKey::GroupMetadata { group }
            | RecordKey::Consumer { group, .. } => group,
        }
    }
}

impl From<FieldError> for RecordError {
    fn from(e: FieldError) -> RecordError {
        match e {
            FieldError::Truncated { at, needed } => RecordError::Truncated { at, needed },
            FieldError::InvalidLength(n) => RecordError::InvalidLength(n),
            FieldError::InvalidUtf8 => RecordError::InvalidUtf8,
        }
    }
}
