//! Records of a consumer-protocol (KIP-848) group's durable state, in Kafka's own schemas as
//! written to `__consumer_offsets`, so Kafka's tooling could read them.
//!
//! A record is a key and a value (a tombstone has no value). The key starts with an `int16`
//! naming the record type (Kafka's "key version"), followed by the key's fields in the
//! non-flexible encoding (`int16` length + UTF-8 for strings). The value starts with an `int16`
//! version (0 for every type here), followed by its fields in the flexible encoding (unsigned
//! varint length + 1 for compact strings and arrays, 0 meaning null; tagged fields at the end).
//!
//! | key type | key fields | value fields (version 0) |
//! |---|---|---|
//! | 3 `ConsumerGroupMetadata` | group id | epoch (int32) |
//! | 4 `ConsumerGroupPartitionMetadata` | group id | `epoch (int32), topics: [topic id (uuid), name, partition count (int32), partition racks: [partition (int32), racks: [string]]]` |
//! | 5 `ConsumerGroupMemberMetadata` | group id, member id | `instance id?, rack id?, client id, client host, subscribed topic names: [string], subscribed topic regex?, rebalance timeout ms (int32), server assignor?` |
//! | 6 `ConsumerGroupTargetAssignmentMetadata` | group id | assignment epoch (int32) |
//! | 7 `ConsumerGroupTargetAssignmentMember` | group id, member id | `topic partitions: [topic id (uuid), partitions: [int32]]` |
//! | 8 `ConsumerGroupCurrentMemberAssignment` | group id, member id | `member epoch (int32), previous member epoch (int32), state (int8), assigned partitions: [topic partitions], partitions pending revocation: [topic partitions]` |
//!
//! (`?` marks a nullable string.) Tagged fields are skipped on read and never written: the
//! ones Kafka defines here (classic member metadata, metadata hash, creation time, assignment
//! timestamp, per-partition assignment epochs) describe features this broker does not have.
//!
//! Parsing is bounded (I10): every length and count is checked against the bytes present
//! before anything is allocated for it; a malformed record is a [`RecordError`], never a panic.

use thiserror::Error;

use super::records::GroupRecord;

/// A topic id: Kafka's 16-byte UUID.
pub type TopicId = [u8; 16];

/// Key type of `ConsumerGroupMetadata`.
pub const GROUP_METADATA_KEY: i16 = 3;
/// Key type of `ConsumerGroupPartitionMetadata`.
pub const PARTITION_METADATA_KEY: i16 = 4;
/// Key type of `ConsumerGroupMemberMetadata`.
pub const MEMBER_METADATA_KEY: i16 = 5;
/// Key type of `ConsumerGroupTargetAssignmentMetadata`.
pub const TARGET_ASSIGNMENT_METADATA_KEY: i16 = 6;
/// Key type of `ConsumerGroupTargetAssignmentMember`.
pub const TARGET_ASSIGNMENT_MEMBER_KEY: i16 = 7;
/// Key type of `ConsumerGroupCurrentMemberAssignment`.
pub const CURRENT_MEMBER_ASSIGNMENT_KEY: i16 = 8;

/// Whether a record key type (the key's leading `int16`) is one of this module's.
pub fn is_consumer_group_key_type(key_type: i16) -> bool {
    (GROUP_METADATA_KEY..=CURRENT_MEMBER_ASSIGNMENT_KEY).contains(&key_type)
}

/// Why a record's bytes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The bytes end before a field that must be there.
    #[error("record truncated at byte {at}")]
    Truncated {
        /// Where the missing field starts.
        at: usize,
    },
    /// The key type is not a consumer-group record type.
    #[error("unknown consumer group record key type {0}")]
    UnknownKeyType(i16),
    /// The value version is not one this broker reads.
    #[error("unsupported value version {0}")]
    UnsupportedValueVersion(i16),
    /// A non-nullable string or array was null, or a length was negative.
    #[error("invalid length at byte {at}")]
    InvalidLength {
        /// Where the length starts.
        at: usize,
    },
    /// A string is not UTF-8.
    #[error("string at byte {at} is not UTF-8")]
    InvalidUtf8 {
        /// Where the string starts.
        at: usize,
    },
    /// A varint runs past 5 bytes.
    #[error("varint at byte {at} is too long")]
    VarintTooLong {
        /// Where the varint starts.
        at: usize,
    },
    /// Bytes remain after the last field.
    #[error("{0} trailing bytes after the record")]
    TrailingBytes(usize),
    /// The member state byte is not one Kafka defines.
    #[error("unknown member state {0}")]
    UnknownMemberState(i8),
}

impl From<RecordError> for super::records::RecordError {
    fn from(e: RecordError) -> Self {
        use super::records::RecordError as Stored;
        match e {
            RecordError::Truncated { at } => Stored::Truncated { at, needed: 1 },
            RecordError::UnknownKeyType(v) => Stored::UnknownKeyVersion(v),
            RecordError::UnsupportedValueVersion(v) => Stored::UnknownValueVersion(v),
            RecordError::InvalidUtf8 { .. } => Stored::InvalidUtf8,
            RecordError::InvalidLength { .. }
            | RecordError::VarintTooLong { .. }
            | RecordError::UnknownMemberState(_) => Stored::InvalidLength(-1),
            RecordError::TrailingBytes(n) => Stored::TrailingKeyBytes(n),
        }
    }
}

/// A member's reconciliation state, Kafka's `MemberState` with its byte values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberState {
    /// The member owns exactly its target assignment at the target epoch.
    Stable,
    /// The member must first give up partitions (revoke them and say so in a heartbeat).
    UnrevokedPartitions,
    /// The member is at the target epoch but waits for partitions other members still own.
    UnreleasedPartitions,
    /// Kafka's placeholder state; never produced here, accepted on read.
    Unknown,
}

impl MemberState {
    /// The byte Kafka writes for this state.
    pub fn to_byte(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    /// The state a byte names.
    pub fn from_byte(b: i8) -> Result<Self, RecordError> {
        match b {
            0 => Ok(MemberState::Stable),
            1 => Ok(MemberState::UnrevokedPartitions),
            2 => Ok(MemberState::UnreleasedPartitions),
            127 => Ok(MemberState::Unknown),
            other => Err(RecordError::UnknownMemberState(other)),
        }
    }

    /// Kafka's lower-case name of the state (as ConsumerGroupDescribe tools print it).
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Stable => "stable",
            MemberState::UnrevokedPartitions => "unrevoked_partitions",
            MemberState::UnreleasedPartitions => "unreleased_partitions",
            MemberState::Unknown => "unknown",
        }
    }
}

/// The partitions of one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPartitions {
    /// The topic.
    pub topic_id: TopicId,
    /// Its partition indexes.
    pub partitions: Vec<i32>,
}

/// Value of `ConsumerGroupMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// The group epoch.
    pub epoch: i32,
}

/// Racks of one partition (in `ConsumerGroupPartitionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRacks {
    /// The partition index.
    pub partition: i32,
    /// The racks holding its replicas.
    pub racks: Vec<String>,
}

/// One subscribed topic as the group saw it (in `ConsumerGroupPartitionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadataEntry {
    /// The topic id.
    pub topic_id: TopicId,
    /// The topic name.
    pub topic_name: String,
    /// Its partition count.
    pub partition_count: i32,
    /// Racks per partition (empty: this broker has no racks).
    pub partition_racks: Vec<PartitionRacks>,
}

/// Value of `ConsumerGroupPartitionMetadata`: the metadata of every subscribed topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadataValue {
    /// The group epoch at which it was computed.
    pub epoch: i32,
    /// The subscribed topics that exist.
    pub topics: Vec<TopicMetadataEntry>,
}

/// Value of `ConsumerGroupMemberMetadata`: what a member asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// The client id of its requests.
    pub client_id: String,
    /// The address it connects from.
    pub client_host: String,
    /// Topic names it subscribes to.
    pub subscribed_topic_names: Vec<String>,
    /// The regex it subscribes with (never empty: an empty regex is stored as none).
    pub subscribed_topic_regex: Option<String>,
    /// Its rebalance timeout: how long it may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    /// The server assignor it asked for.
    pub server_assignor: Option<String>,
}

/// Value of `ConsumerGroupTargetAssignmentMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetAssignmentMetadataValue {
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
}

/// Value of `ConsumerGroupTargetAssignmentMember`: one member's target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetAssignmentMemberValue {
    /// The partitions the member should eventually own.
    pub topic_partitions: Vec<TopicPartitions>,
}

/// Value of `ConsumerGroupCurrentMemberAssignment`: what a member owns now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentMemberAssignmentValue {
    /// The epoch the member must send in its next heartbeat.
    pub member_epoch: i32,
    /// The epoch before the last bump (a member that lost the bump's response may send it).
    pub previous_member_epoch: i32,
    /// Its reconciliation state.
    pub state: MemberState,
    /// Partitions it owns and keeps.
    pub assigned_partitions: Vec<TopicPartitions>,
    /// Partitions it still owns but must revoke.
    pub partitions_pending_revocation: Vec<TopicPartitions>,
}

/// What one record is about, with its value (`None`: a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKind {
    /// The group epoch.
    GroupMetadata(Option<GroupMetadataValue>),
    /// The subscribed topics' metadata.
    PartitionMetadata(Option<PartitionMetadataValue>),
    /// A member's subscription and client details.
    MemberMetadata {
        /// The member.
        member_id: String,
        /// Its metadata.
        value: Option<MemberMetadataValue>,
    },
    /// The target assignment's epoch.
    TargetAssignmentMetadata(Option<TargetAssignmentMetadataValue>),
    /// A member's target assignment.
    TargetAssignmentMember {
        /// The member.
        member_id: String,
        /// Its target.
        value: Option<TargetAssignmentMemberValue>,
    },
    /// A member's current assignment and epoch.
    CurrentMemberAssignment {
        /// The member.
        member_id: String,
        /// Its assignment.
        value: Option<CurrentMemberAssignmentValue>,
    },
}

/// One record of a consumer group's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupRecord {
    /// The group it belongs to.
    pub group_id: String,
    /// What it says.
    pub kind: RecordKind,
}

impl ConsumerGroupRecord {
    /// The key type (the key's leading `int16`).
    pub fn key_type(&self) -> i16 {
        match &self.kind {
            RecordKind::GroupMetadata(_) => GROUP_METADATA_KEY,
            RecordKind::PartitionMetadata(_) => PARTITION_METADATA_KEY,
            RecordKind::MemberMetadata { .. } => MEMBER_METADATA_KEY,
            RecordKind::TargetAssignmentMetadata(_) => TARGET_ASSIGNMENT_METADATA_KEY,
            RecordKind::TargetAssignmentMember { .. } => TARGET_ASSIGNMENT_MEMBER_KEY,
            RecordKind::CurrentMemberAssignment { .. } => CURRENT_MEMBER_ASSIGNMENT_KEY,
        }
    }

    /// Whether it is a tombstone (no value).
    pub fn is_tombstone(&self) -> bool {
        match &self.kind {
            RecordKind::GroupMetadata(v) => v.is_none(),
            RecordKind::PartitionMetadata(v) => v.is_none(),
            RecordKind::MemberMetadata { value, .. } => value.is_none(),
            RecordKind::TargetAssignmentMetadata(v) => v.is_none(),
            RecordKind::TargetAssignmentMember { value, .. } => value.is_none(),
            RecordKind::CurrentMemberAssignment { value, .. } => value.is_none(),
        }
    }

    /// The record as the coordinator appends it (key and value bytes).
    pub fn to_group_record(&self) -> GroupRecord {
        GroupRecord {
            key: self.encode_key(),
            value: self.encode_value(),
        }
    }

    /// The key bytes.
    pub fn encode_key(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.key_type().to_be_bytes());
        put_legacy_string(&mut out, &self.group_id);
        match &self.kind {
            RecordKind::MemberMetadata { member_id, .. }
            | RecordKind::TargetAssignmentMember { member_id, .. }
            | RecordKind::CurrentMemberAssignment { member_id, .. } => {
                put_legacy_string(&mut out, member_id)
            }
            _ => {}
        }
        out
    }

    /// The value bytes, or `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        out.extend_from_slice(&0i16.to_be_bytes());
        match &self.kind {
            RecordKind::GroupMetadata(v) => {
                out.extend_from_slice(&v.as_ref()?.epoch.to_be_bytes());
            }
            RecordKind::PartitionMetadata(v) => {
                let v = v.as_ref()?;
                out.extend_from_slice(&v.epoch.to_be_bytes());
                put_array_len(&mut out, v.topics.len());
                for t in &v.topics {
                    out.extend_from_slice(&t.topic_id);
                    put_compact_string(&mut out, &t.topic_name);
                    out.extend_from_slice(&t.partition_count.to_be_bytes());
                    put_array_len(&mut out, t.partition_racks.len());
                    for p in &t.partition_racks {
                        out.extend_from_slice(&p.partition.to_be_bytes());
                        put_array_len(&mut out, p.racks.len());
                        for r in &p.racks {
                            put_compact_string(&mut out, r);
                        }
                        out.push(0);
                    }
                    out.push(0);
                }
            }
            RecordKind::MemberMetadata { value, .. } => {
                let v = value.as_ref()?;
                put_nullable_compact_string(&mut out, v.instance_id.as_deref());
                put_nullable_compact_string(&mut out, v.rack_id.as_deref());
                put_compact_string(&mut out, &v.client_id);
                put_compact_string(&mut out, &v.client_host);
                put_array_len(&mut out, v.subscribed_topic_names.len());
                for n in &v.subscribed_topic_names {
                    put_compact_string(&mut out, n);
                }
                put_nullable_compact_string(&mut out, v.subscribed_topic_regex.as_deref());
                out.extend_from_slice(&v.rebalance_timeout_ms.to_be_bytes());
                put_nullable_compact_string(&mut out, v.server_assignor.as_deref());
            }
            RecordKind::TargetAssignmentMetadata(v) => {
                out.extend_from_slice(&v.as_ref()?.assignment_epoch.to_be_bytes());
            }
            RecordKind::TargetAssignmentMember { value, .. } => {
                put_topic_partitions(&mut out, &value.as_ref()?.topic_partitions);
            }
            RecordKind::CurrentMemberAssignment { value, .. } => {
                let v = value.as_ref()?;
                out.extend_from_slice(&v.member_epoch.to_be_bytes());
                out.extend_from_slice(&v.previous_member_epoch.to_be_bytes());
                out.push(v.state.to_byte() as u8);
                put_topic_partitions(&mut out, &v.assigned_partitions);
                put_topic_partitions(&mut out, &v.partitions_pending_revocation);
            }
        }
        out.push(0); // no tagged fields
        Some(out)
    }

    /// Decodes a record from its key and value bytes (`None`: a tombstone).
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, RecordError> {
        let mut k = Reader::new(key);
        let key_type = k.i16()?;
        if !is_consumer_group_key_type(key_type) {
            return Err(RecordError::UnknownKeyType(key_type));
        }
        let group_id = k.legacy_string()?;
        let member_id = match key_type {
            MEMBER_METADATA_KEY | TARGET_ASSIGNMENT_MEMBER_KEY | CURRENT_MEMBER_ASSIGNMENT_KEY => {
                Some(k.legacy_string()?)
            }
            _ => None,
        };
        k.finish()?;
        let mut value = match value {
            None => None,
            Some(bytes) => {
                let mut r = Reader::new(bytes);
                let version = r.i16()?;
                if version != 0 {
                    return Err(RecordError::UnsupportedValueVersion(version));
                }
                Some(r)
            }
        };
        let member_id = member_id.unwrap_or_default();
        let kind = match key_type {
            GROUP_METADATA_KEY => RecordKind::GroupMetadata(match value.as_mut() {
                None => None,
                Some(r) => Some(GroupMetadataValue { epoch: r.i32()? }),
            }),
            PARTITION_METADATA_KEY => RecordKind::PartitionMetadata(match value.as_mut() {
                None => None,
                Some(r) => Some(read_partition_metadata(r)?),
            }),
            MEMBER_METADATA_KEY => RecordKind::MemberMetadata {
                member_id,
                value: match value.as_mut() {
                    None => None,
                    Some(r) => Some(read_member_metadata(r)?),
                },
            },
            TARGET_ASSIGNMENT_METADATA_KEY => {
                RecordKind::TargetAssignmentMetadata(match value.as_mut() {
                    None => None,
                    Some(r) => Some(TargetAssignmentMetadataValue {
                        assignment_epoch: r.i32()?,
                    }),
                })
            }
            TARGET_ASSIGNMENT_MEMBER_KEY => RecordKind::TargetAssignmentMember {
                member_id,
                value: match value.as_mut() {
                    None => None,
                    Some(r) => Some(TargetAssignmentMemberValue {
                        topic_partitions: read_topic_partitions(r)?,
                    }),
                },
            },
            _ => RecordKind::CurrentMemberAssignment {
                member_id,
                value: match value.as_mut() {
                    None => None,
                    Some(r) => Some(CurrentMemberAssignmentValue {
                        member_epoch: r.i32()?,
                        previous_member_epoch: r.i32()?,
                        state: MemberState::from_byte(r.i8()?)?,
                        assigned_partitions: read_topic_partitions(r)?,
                        partitions_pending_revocation: read_topic_partitions(r)?,
                    }),
                },
            },
        };
        if let Some(mut r) = value {
            r.skip_tagged_fields()?;
            r.finish()?;
        }
        Ok(ConsumerGroupRecord { group_id, kind })
    }
}

fn read_partition_metadata(r: &mut Reader<'_>) -> Result<PartitionMetadataValue, RecordError> {
    let epoch = r.i32()?;
    // A topic entry is at least 16 + 1 + 4 + 1 + 1 bytes.
    let n = r.array_len(23)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let mut topic_id = [0u8; 16];
        topic_id.copy_from_slice(r.take(16)?);
        let topic_name = r.compact_string()?;
        let partition_count = r.i32()?;
        let racks_n = r.array_len(6)?;
        let mut partition_racks = Vec::with_capacity(racks_n);
        for _ in 0..racks_n {
            let partition = r.i32()?;
            let rn = r.array_len(1)?;
            let mut racks = Vec::with_capacity(rn);
            for _ in 0..rn {
                racks.push(r.compact_string()?);
            }
            r.skip_tagged_fields()?;
            partition_racks.push(PartitionRacks { partition, racks });
        }
        r.skip_tagged_fields()?;
        topics.push(TopicMetadataEntry {
            topic_id,
            topic_name,
            partition_count,
            partition_racks,
        });
    }
    Ok(PartitionMetadataValue { epoch, topics })
}

fn read_member_metadata(r: &mut Reader<'_>) -> Result<MemberMetadataValue, RecordError> {
    let instance_id = r.nullable_compact_string()?;
    let rack_id = r.nullable_compact_string()?;
    let client_id = r.compact_string()?;
    let client_host = r.compact_string()?;
    let n = r.array_len(1)?;
    let mut subscribed_topic_names = Vec::with_capacity(n);
    for _ in 0..n {
        subscribed_topic_names.push(r.compact_string()?);
    }
    let subscribed_topic_regex = r.nullable_compact_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_compact_string()?;
    Ok(MemberMetadataValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names,
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
    })
}

fn read_topic_partitions(r: &mut Reader<'_>) -> Result<Vec<TopicPartitions>, RecordError> {
    // An entry is at least 16 + 1 + 1 bytes.
    let n = r.array_len(18)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut topic_id = [0u8; 16];
        topic_id.copy_from_slice(r.take(16)?);
        let pn = r.array_len(4)?;
        let mut partitions = Vec::with_capacity(pn);
        for _ in 0..pn {
            partitions.push(r.i32()?);
        }
        r.skip_tagged_fields()?;
        out.push(TopicPartitions {
            topic_id,
            partitions,
        });
    }
    Ok(out)
}

fn put_legacy_string(out: &mut Vec<u8>, s: &str) {
    // Group and member ids come from requests whose strings are int16-length-prefixed, so
    // they always fit; clamp defensively rather than write a wrong length.
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    out.extend_from_slice(&(bytes.len() as i16).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_array_len(out: &mut Vec<u8>, n: usize) {
    put_uvarint(out, (n as u32).saturating_add(1));
}

fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, (s.len() as u32).saturating_add(1));
    out.extend_from_slice(s.as_bytes());
}

fn put_nullable_compact_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => put_compact_string(out, s),
    }
}

fn put_topic_partitions(out: &mut Vec<u8>, tps: &[TopicPartitions]) {
    put_array_len(out, tps.len());
    for tp in tps {
        out.extend_from_slice(&tp.topic_id);
        put_array_len(out, tp.partitions.len());
        for p in &tp.partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
        out.push(0);
    }
}

/// A bounded cursor over untrusted bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if n > self.remaining() {
            return Err(RecordError::Truncated { at: self.pos });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn i8(&mut self) -> Result<i8, RecordError> {
        Ok(self.take(1)?[0] as i8)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn uvarint(&mut self) -> Result<u32, RecordError> {
        let start = self.pos;
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self
                .take(1)
                .map_err(|_| RecordError::Truncated { at: start })?[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RecordError::VarintTooLong { at: start })
    }

    fn utf8(&mut self, n: usize, at: usize) -> Result<String, RecordError> {
        let b = self.take(n)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| RecordError::InvalidUtf8 { at })
    }

    fn legacy_string(&mut self) -> Result<String, RecordError> {
        let at = self.pos;
        let n = self.i16()?;
        if n < 0 {
            return Err(RecordError::InvalidLength { at });
        }
        self.utf8(n as usize, at)
    }

    fn nullable_compact_string(&mut self) -> Result<Option<String>, RecordError> {
        let at = self.pos;
        match self.uvarint()? {
            0 => Ok(None),
            n => self.utf8(n as usize - 1, at).map(Some),
        }
    }

    fn compact_string(&mut self) -> Result<String, RecordError> {
        let at = self.pos;
        self.nullable_compact_string()?
            .ok_or(RecordError::InvalidLength { at })
    }

    /// A non-null compact array's element count, checked against the bytes left given the
    /// smallest encoding of one element (I10).
    fn array_len(&mut self, min_element_bytes: usize) -> Result<usize, RecordError> {
        let at = self.pos;
        let n = match self.uvarint()? {
            0 => return Err(RecordError::InvalidLength { at }),
            n => n as usize - 1,
        };
        if n.saturating_mul(min_element_bytes) > self.remaining() {
            return Err(RecordError::Truncated { at });
        }
        Ok(n)
    }

    fn skip_tagged_fields(&mut self) -> Result<(), RecordError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            // Each tagged field takes at least 2 bytes; the loop ends at the bytes' end.
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), RecordError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(RecordError::TrailingBytes(n)),
        }
    }
}
