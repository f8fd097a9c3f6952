//! Kafka's ConsumerProtocol byte formats: the subscription a member puts in JoinGroup's protocol
//! metadata and the assignment the leader hands each member through SyncGroup.
//!
//! Contract:
//! - Layout (big-endian, not flexible; each blob starts with its own i16 version):
//!   subscription v0 `topics: [string] user_data: nullable bytes`; v1 adds
//!   `owned_partitions: [topic: string, partitions: [i32]]`; v2 adds `generation_id: i32`;
//!   v3 adds `rack_id: nullable string`. Assignment v0..v3:
//!   `assigned_partitions: [topic: string, partitions: [i32]] user_data: nullable bytes`.
//! - Versions above 3 decode as 3: Kafka only appends fields, and readers ignore the rest.
//! - Decoding never allocates by an untrusted count: every array count is checked against the
//!   bytes left (each element needs at least its fixed part) before anything is reserved (I10).
//!   Bad bytes give [`MetadataError`], never a panic.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::consumer::TopicPartition;

/// The newest subscription/assignment version this client writes.
pub const CURRENT_VERSION: i16 = 3;

/// What a member subscribes to and, for cooperative rebalancing, what it owns now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscription {
    /// Topics the member wants.
    pub topics: Vec<String>,
    /// Opaque assignor data.
    pub user_data: Option<Bytes>,
    /// Partitions the member owns as it joins (v1+; cooperative assignors rely on it).
    pub owned_partitions: Vec<TopicPartition>,
    /// The generation the owned partitions belong to (v2+; -1 when unknown).
    pub generation_id: i32,
    /// The member's rack (v3+).
    pub rack_id: Option<String>,
}

/// The partitions the leader gives one member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Assigned partitions.
    pub partitions: Vec<TopicPartition>,
    /// Opaque assignor data.
    pub user_data: Option<Bytes>,
}

/// Why member metadata or an assignment could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The bytes ended inside a field.
    #[error("truncated at byte {at}")]
    Truncated {
        /// Offset where more bytes were needed.
        at: usize,
    },
    /// A length or count is negative or larger than the bytes left could hold.
    #[error("bad length {length} at byte {at}")]
    BadLength {
        /// The announced length or count.
        length: i64,
        /// Where it was read.
        at: usize,
    },
    /// A string is not UTF-8.
    #[error("string at byte {at} is not UTF-8")]
    NotUtf8 {
        /// Where the string starts.
        at: usize,
    },
    /// The version is negative.
    #[error("unsupported version {0}")]
    Version(i16),
}

/// A bounds-checked reader over one blob.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MetadataError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or(MetadataError::Truncated { at: self.pos })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, MetadataError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, MetadataError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// A count of elements each at least `min_element_bytes` long, checked against what is left.
    fn count(&mut self, min_element_bytes: usize) -> Result<usize, MetadataError> {
        let at = self.pos;
        let count = self.i32()?;
        let bad = MetadataError::BadLength {
            length: i64::from(count),
            at,
        };
        let count = usize::try_from(count).map_err(|_| bad.clone())?;
        if count.saturating_mul(min_element_bytes) > self.left() {
            return Err(bad);
        }
        Ok(count)
    }

    fn nullable_string(&mut self) -> Result<Option<String>, MetadataError> {
        let at = self.pos;
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        std::str::from_utf8(bytes)
            .map(|s| Some(s.to_string()))
            .map_err(|_| MetadataError::NotUtf8 { at })
    }

    fn string(&mut self) -> Result<String, MetadataError> {
        let at = self.pos;
        self.nullable_string()?
            .ok_or(MetadataError::BadLength { length: -1, at })
    }

    fn nullable_bytes(&mut self) -> Result<Option<Bytes>, MetadataError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(None);
        }
        Ok(Some(Bytes::copy_from_slice(self.take(len as usize)?)))
    }

    /// `[topic: string, partitions: [i32]]`, flattened.
    fn topic_partitions(&mut self) -> Result<Vec<TopicPartition>, MetadataError> {
        // Each topic entry is at least a 2-byte string length and a 4-byte count.
        let topics = self.count(6)?;
        let mut out = Vec::new();
        for _ in 0..topics {
            let topic = self.string()?;
            let partitions = self.count(4)?;
            out.reserve(partitions);
            for _ in 0..partitions {
                out.push(TopicPartition::new(topic.clone(), self.i32()?));
            }
        }
        Ok(out)
    }
}

fn put_string(buf: &mut BytesMut, s: &str) {
    // Topic names are at most 249 bytes; longer strings are cut rather than mis-framed.
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn put_nullable_bytes(buf: &mut BytesMut, b: Option<&Bytes>) {
    match b {
        Some(b) => {
            buf.put_i32(b.len() as i32);
            buf.put_slice(b);
        }
        None => buf.put_i32(-1),
    }
}

fn put_topic_partitions(buf: &mut BytesMut, partitions: &[TopicPartition]) {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    buf.put_i32(by_topic.len() as i32);
    for (topic, mut parts) in by_topic {
        parts.sort_unstable();
        put_string(buf, topic);
        buf.put_i32(parts.len() as i32);
        for p in parts {
            buf.put_i32(p);
        }
    }
}

/// Encodes `sub` at `version` (0..=3; higher is written as 3).
pub fn encode_subscription(sub: &Subscription, version: i16) -> Bytes {
    let version = version.clamp(0, CURRENT_VERSION);
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    buf.put_i32(sub.topics.len() as i32);
    for t in &sub.topics {
        put_string(&mut buf, t);
    }
    put_nullable_bytes(&mut buf, sub.user_data.as_ref());
    if version >= 1 {
        put_topic_partitions(&mut buf, &sub.owned_partitions);
    }
    if version >= 2 {
        buf.put_i32(sub.generation_id);
    }
    if version >= 3 {
        match &sub.rack_id {
            Some(rack) => put_string(&mut buf, rack),
            None => buf.put_i16(-1),
        }
    }
    buf.freeze()
}

/// Decodes a subscription of any version; fields a version lacks take their defaults.
pub fn decode_subscription(bytes: &[u8]) -> Result<Subscription, MetadataError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let version = r.i16()?;
    if version < 0 {
        return Err(MetadataError::Version(version));
    }
    let count = r.count(2)?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        topics.push(r.string()?);
    }
    let user_data = r.nullable_bytes()?;
    let mut sub = Subscription {
        topics,
        user_data,
        owned_partitions: Vec::new(),
        generation_id: -1,
        rack_id: None,
    };
    if version >= 1 {
        sub.owned_partitions = r.topic_partitions()?;
    }
    if version >= 2 {
        sub.generation_id = r.i32()?;
    }
    if version >= 3 {
        sub.rack_id = r.nullable_string()?;
    }
    Ok(sub)
}

/// Encodes `assignment` at `version` (0..=3; higher is written as 3).
pub fn encode_assignment(assignment: &Assignment, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(version.clamp(0, CURRENT_VERSION));
    put_topic_partitions(&mut buf, &assignment.partitions);
    put_nullable_bytes(&mut buf, assignment.user_data.as_ref());
    buf.freeze()
}

/// Decodes an assignment of any version. An empty blob is an empty assignment (Kafka's
/// coordinator sends one to members the leader gave nothing).
pub fn decode_assignment(bytes: &[u8]) -> Result<Assignment, MetadataError> {
    if bytes.is_empty() {
        return Ok(Assignment::default());
    }
    let mut r = Reader { buf: bytes, pos: 0 };
    let version = r.i16()?;
    if version < 0 {
        return Err(MetadataError::Version(version));
    }
    let partitions = r.topic_partitions()?;
    let user_data = r.nullable_bytes()?;
    Ok(Assignment {
        partitions,
        user_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
    use kafka_protocol::protocol::{Decodable, Encodable};

    fn tps(list: &[(&str, i32)]) -> Vec<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    fn sample() -> Subscription {
        Subscription {
            topics: vec!["a".into(), "b".into()],
            user_data: Some(Bytes::from_static(b"ud")),
            owned_partitions: tps(&[("a", 0), ("a", 2), ("b", 1)]),
            generation_id: 7,
            rack_id: Some("r1".into()),
        }
    }

    #[test]
    fn subscriptions_round_trip_at_every_version() {
        for version in 0..=3 {
            let sub = sample();
            let decoded = decode_subscription(&encode_subscription(&sub, version)).expect("decode");
            assert_eq!(decoded.topics, sub.topics, "v{version}");
            assert_eq!(decoded.user_data, sub.user_data);
            let owned = if version >= 1 {
                sub.owned_partitions
            } else {
                vec![]
            };
            assert_eq!(decoded.owned_partitions, owned, "v{version}");
            assert_eq!(decoded.generation_id, if version >= 2 { 7 } else { -1 });
            let rack = if version >= 3 { sub.rack_id } else { None };
            assert_eq!(decoded.rack_id, rack);
        }
    }

    /// Our bytes are Kafka's bytes: kafka-protocol's generated codec (from Kafka's own schema)
    /// reads what we write, and we read what it writes.
    #[test]
    fn bytes_match_kafkas_schema() {
        for version in 0..=3i16 {
            let ours = encode_subscription(&sample(), version);
            let mut body = ours.slice(2..);
            let theirs = ConsumerProtocolSubscription::decode(&mut body, version).expect("decode");
            assert_eq!(theirs.topics.len(), 2);
            assert_eq!(theirs.user_data.as_deref(), Some(&b"ud"[..]));
            if version >= 1 {
                assert_eq!(theirs.owned_partitions.len(), 2);
            }
            let mut buf = BytesMut::new();
            buf.put_i16(version);
            theirs.encode(&mut buf, version).expect("encode");
            assert_eq!(buf.freeze(), ours, "v{version}");

            let assignment = Assignment {
                partitions: tps(&[("a", 1), ("b", 0), ("b", 3)]),
                user_data: None,
            };
            let ours = encode_assignment(&assignment, version);
            let mut body = ours.slice(2..);
            let theirs = ConsumerProtocolAssignment::decode(&mut body, version).expect("decode");
            assert_eq!(theirs.assigned_partitions.len(), 2);
            assert_eq!(decode_assignment(&ours).expect("ours"), assignment);
        }
    }

    #[test]
    fn hostile_counts_are_refused_without_allocating() {
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        buf.put_i32(i32::MAX); // topics
        assert!(matches!(
            decode_subscription(&buf),
            Err(MetadataError::BadLength { .. })
        ));
        let mut buf = BytesMut::new();
        buf.put_i16(1);
        buf.put_i32(1);
        put_string(&mut buf, "t");
        buf.put_i32(1_000_000_000); // partitions
        assert!(matches!(
            decode_assignment(&buf),
            Err(MetadataError::BadLength { .. })
        ));
        assert!(matches!(
            decode_subscription(&[0, 0, 0]),
            Err(MetadataError::Truncated { .. })
        ));
        assert!(matches!(
            decode_subscription(&[0xff, 0xff]),
            Err(MetadataError::Version(-1))
        ));
        // Every prefix of a valid blob fails cleanly.
        let full = encode_subscription(&sample(), 3);
        for cut in 0..full.len() {
            assert!(decode_subscription(&full[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn newer_versions_read_as_the_newest_we_know() {
        let mut blob = BytesMut::from(&encode_subscription(&sample(), 3)[..]);
        blob[1] = 9; // version 9 with an appended field
        blob.put_i32(42);
        let decoded = decode_subscription(&blob).expect("decode");
        assert_eq!(decoded.generation_id, 7);
        assert_eq!(
            decode_assignment(&[]).expect("empty"),
            Assignment::default()
        );
    }
}
