//! The consumer: assign partitions, seek, poll with one long-poll Fetch.
//!
//! Contract:
//! - Inputs: a negotiated connection of its own, an assignment of topic-partitions, seeks.
//! - Outputs: [`ConsumerRecord`]s in offset order per partition, starting EXACTLY at each
//!   partition's position: the head of a batch that starts before it is skipped, and a partial
//!   batch at the end of a fetch response (Kafka cuts at `max_bytes`) is ignored and fetched
//!   again next time.
//! - Every batch's CRC is verified (`validate_batch`, the broker's own check, I3) and every
//!   record is walked; a bad batch fails the poll with [`Error::CorruptBatch`]. Compressed
//!   batches are decompressed (at most `max_decompressed_bytes` per Fetch response, I10) and their records
//!   checked the same way. Control batches (transaction markers) are never surfaced, in either
//!   isolation level, but they move the position past them.
//! - Isolation: `read_uncommitted` (the default) surfaces every data record; `read_committed`
//!   sends isolation_level=1 (the broker then answers only up to the last stable offset, with
//!   the aborted transactions in range) and drops the records of aborted transactions the way
//!   Kafka's consumers do: per producer, an aborted transaction's range starts at its
//!   `first_offset` and ends at that producer's ABORT marker.
//! - A poll is one Fetch for all assigned partitions, waiting up to `max_wait` at the broker
//!   for `min_bytes`. Pending seeks (earliest, latest, by time) are resolved with ListOffsets
//!   first.
//! - Room for groups: positions are readable ([`Consumer::position`]) and settable
//!   ([`Consumer::seek`]), and the connection is reachable, so a group layer can commit and
//!   restore offsets around this type.
//! - Never: spawns, sleeps or retries on its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_io::{AsyncRead, AsyncWrite};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use minikafka_core::record::{BatchIter, Compression, RecordIter, ValidateOptions};
use minikafka_core::types::Offset;

use crate::admin::{self, OffsetSpec};
use crate::compression;
use crate::connection::{Connection, ConnectionConfig};
use crate::error::{Error, Result};

/// A topic and a partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`/`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Where to move a partition's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekTo {
    /// This exact offset.
    Offset(Offset),
    /// The log start offset.
    Earliest,
    /// The log end offset: only records produced from now on.
    Latest,
    /// The first record with a timestamp at or after this (ms since the epoch); the log end
    /// when there is none.
    Timestamp(i64),
}

/// What to do when a position is out of the log's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetReset {
    /// Move to the log start.
    Earliest,
    /// Move to the log end.
    Latest,
    /// Fail the poll.
    None,
}

/// Which records of transactions a consumer sees (Kafka's `isolation.level`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IsolationLevel {
    /// Every data record, including those of open and aborted transactions.
    #[default]
    ReadUncommitted,
    /// Only records of committed transactions (and non-transactional ones), and nothing at or
    /// after the first still-open transaction.
    ReadCommitted,
}

impl IsolationLevel {
    /// The `isolation_level` field of Fetch and ListOffsets.
    pub fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }

    /// Parses `read_committed` or `read_uncommitted`.
    pub fn parse(text: &str) -> Result<IsolationLevel> {
        match text {
            "read_committed" => Ok(IsolationLevel::ReadCommitted),
            "read_uncommitted" => Ok(IsolationLevel::ReadUncommitted),
            other => Err(Error::InvalidArgument(format!(
                "isolation level must be read_committed or read_uncommitted, not {other:?}"
            ))),
        }
    }
}

/// An aborted transaction in a fetched range, as the Fetch response lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbortedTxn {
    /// The offset of the transaction's first record in this partition.
    pub first_offset: Offset,
    /// The producer that aborted it.
    pub producer_id: i64,
}

/// Consumer settings.
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// Connection settings.
    pub connection: ConnectionConfig,
    /// How long the broker may hold a Fetch waiting for `min_bytes`.
    pub max_wait: Duration,
    /// Bytes the broker waits for before answering early.
    pub min_bytes: i32,
    /// Most bytes in one Fetch response.
    pub max_bytes: i32,
    /// Most bytes per partition in one Fetch response.
    pub partition_max_bytes: i32,
    /// Where newly assigned partitions start, and where out-of-range positions go.
    pub auto_offset_reset: OffsetReset,
    /// Most bytes the compressed batches of one Fetch response may inflate to, together: a
    /// response of many small batches that each inflate to the limit cannot multiply it (I10).
    pub max_decompressed_bytes: usize,
    /// Which transactional records to surface.
    pub isolation_level: IsolationLevel,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            connection: ConnectionConfig::default(),
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            auto_offset_reset: OffsetReset::Latest,
            max_decompressed_bytes: 64 * 1024 * 1024,
            isolation_level: IsolationLevel::ReadUncommitted,
        }
    }
}

/// One header of a consumed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header key (UTF-8 by convention; invalid bytes replaced).
    pub key: String,
    /// Header value, `None` for null.
    pub value: Option<Bytes>,
}

/// One consumed record. Decoding one allocates nothing per record unless it has headers:
/// the topic is shared by every record of the partition's fetch, key and value are slices of
/// the fetch response (or of the batch's inflated records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// Topic (shared, one allocation per decoded partition, not per record).
    pub topic: Arc<str>,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: Offset,
    /// Timestamp in ms since the epoch (create time, or log-append time if the batch says so).
    pub timestamp_ms: i64,
    /// Key, `None` for null.
    pub key: Option<Bytes>,
    /// Value, `None` for null.
    pub value: Option<Bytes>,
    /// Headers in record order (empty, unallocated, when the record has none).
    pub headers: Vec<RecordHeader>,
}

/// Records decoded from one partition's fetched bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecodedRecords {
    /// Records at or after the requested offset, in offset order.
    pub records: Vec<ConsumerRecord>,
    /// The offset after the last whole batch seen (`None` when no whole batch was present).
    pub next_offset: Option<Offset>,
    /// Bytes the compressed batches inflated to, together.
    pub decompressed_bytes: usize,
}

fn slice_of(owner: &Bytes, part: &[u8]) -> Bytes {
    if part.is_empty() {
        Bytes::new()
    } else {
        owner.slice_ref(part)
    }
}

/// Decodes the record batches `records` fetched for `topic`/`partition`, keeping records at or
/// after `from`. Verifies each batch's CRC and structure; tolerates a partial last batch.
/// `max_decompressed_bytes` bounds what all its compressed batches inflate to together (I10).
pub fn decode_records(
    topic: &str,
    partition: i32,
    records: &Bytes,
    from: Offset,
    max_decompressed_bytes: usize,
) -> Result<DecodedRecords> {
    decode_records_with(
        topic,
        partition,
        records,
        from,
        max_decompressed_bytes,
        None,
    )
}

/// The type of a control record (its key: version, then type): 0 is ABORT, 1 COMMIT.
fn control_type(key: Option<&[u8]>) -> Option<i16> {
    let key = key?;
    (key.len() >= 4).then(|| i16::from_be_bytes([key[2], key[3]]))
}

/// [`decode_records`] for a read_committed consumer when `aborted` is `Some`: the records of
/// the aborted transactions listed (from the same Fetch response) are dropped. Kafka's
/// algorithm: walking the batches in order, a transactional batch first turns every aborted
/// transaction with `first_offset` at or before its last offset into "this producer is
/// aborting"; its data batches are dropped until the producer's ABORT marker ends that.
pub fn decode_records_with(
    topic: &str,
    partition: i32,
    records: &Bytes,
    from: Offset,
    max_decompressed_bytes: usize,
    aborted: Option<&[AbortedTxn]>,
) -> Result<DecodedRecords> {
    let read_committed = aborted.is_some();
    let mut pending_aborts: BinaryHeap<Reverse<AbortedTxn>> = aborted
        .unwrap_or(&[])
        .iter()
        .copied()
        .map(Reverse)
        .collect();
    let mut aborting: BTreeSet<i64> = BTreeSet::new();
    let corrupt = |source| Error::CorruptBatch {
        topic: topic.to_string(),
        partition,
        source,
    };
    let mut out = DecodedRecords::default();
    let shared_topic: Arc<str> = Arc::from(topic);
    for view in BatchIter::new(records)
        .with_options(ValidateOptions::stored())
        .lenient_tail()
    {
        let view = view.map_err(corrupt)?;
        let header = view.header;
        out.next_offset = Some(header.next_offset());
        if read_committed && header.is_transactional() {
            while let Some(Reverse(next)) = pending_aborts.peek() {
                if next.first_offset > header.last_offset() {
                    break;
                }
                aborting.insert(next.producer_id);
                pending_aborts.pop();
            }
        }
        if header.is_control() {
            // Control batches are never compressed and hold one record: the marker.
            if read_committed && header.compression() == Ok(Compression::None) {
                let marker = RecordIter::new(view.records_bytes()).next();
                if let Some(Ok(marker)) = marker {
                    if control_type(marker.key) == Some(0) {
                        aborting.remove(&header.producer_id);
                    }
                }
            }
            continue;
        }
        if read_committed && header.is_transactional() && aborting.contains(&header.producer_id) {
            continue;
        }
        if header.last_offset() < from {
            continue;
        }
        let codec = header
            .compression()
            .map_err(|bits| Error::Compression(format!("unknown codec {bits}")))?;
        // Uncompressed records are sliced out of the response without copying.
        let section: Bytes = if codec == Compression::None {
            slice_of(records, view.records_bytes())
        } else {
            let left_bytes = max_decompressed_bytes.saturating_sub(out.decompressed_bytes);
            let inflated = compression::decompress(codec, view.records_bytes(), left_bytes)?;
            out.decompressed_bytes += inflated.len();
            Bytes::from(inflated)
        };
        let mut count = 0i64;
        // A compacted batch has gaps: offset deltas strictly increase, up to lastOffsetDelta.
        let mut previous_delta = -1i64;
        for (index, record) in RecordIter::new(&section).enumerate() {
            let record = record.map_err(|mut e| {
                e.at += minikafka_core::record::HEADER_BYTES;
                corrupt(e)
            })?;
            let delta_ok = record.offset_delta > previous_delta
                && record.offset_delta <= i64::from(header.last_offset_delta);
            previous_delta = record.offset_delta;
            if !delta_ok {
                return Err(Error::Protocol(format!(
                    "{topic}-{partition}: record {index} of the batch at {} has offset delta {}",
                    header.base_offset, record.offset_delta
                )));
            }
            count += 1;
            let offset = header.base_offset.plus(record.offset_delta);
            if offset < from {
                continue;
            }
            let timestamp_ms = if header.is_log_append_time() {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(record.timestamp_delta)
            };
            out.records.push(ConsumerRecord {
                topic: Arc::clone(&shared_topic),
                partition,
                offset,
                timestamp_ms,
                key: record.key.map(|k| slice_of(&section, k)),
                value: record.value.map(|v| slice_of(&section, v)),
                headers: record
                    .headers()
                    .map(|h| RecordHeader {
                        key: String::from_utf8_lossy(h.key).into_owned(),
                        value: h.value.map(|v| slice_of(&section, v)),
                    })
                    .collect(),
            });
        }
        if count != i64::from(header.records_count) {
            return Err(Error::Protocol(format!(
                "{topic}-{partition}: batch at {} holds {count} records, header says {}",
                header.base_offset, header.records_count
            )));
        }
    }
    Ok(out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    Known(Offset),
    Pending(SeekTo),
}

/// A consumer of explicitly assigned partitions.
#[derive(Debug)]
pub struct Consumer<S> {
    conn: Connection<S>,
    config: ConsumerConfig,
    positions: BTreeMap<TopicPartition, Position>,
    high_watermarks: BTreeMap<TopicPartition, Offset>,
}

fn reset_seek(reset: OffsetReset) -> Option<SeekTo> {
    match reset {
        OffsetReset::Earliest => Some(SeekTo::Earliest),
        OffsetReset::Latest => Some(SeekTo::Latest),
        OffsetReset::None => None,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Consumer<S> {
    /// Negotiates versions over `stream`.
    pub async fn connect(stream: S, config: ConsumerConfig) -> Result<Self> {
        let conn = Connection::connect(stream, config.connection.clone()).await?;
        Ok(Consumer::new(conn, config))
    }

    /// A consumer over a negotiated connection.
    pub fn new(conn: Connection<S>, config: ConsumerConfig) -> Self {
        Consumer {
            conn,
            config,
            positions: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
        }
    }

    /// The underlying connection (for admin calls, or a group layer).
    pub fn connection(&mut self) -> &mut Connection<S> {
        &mut self.conn
    }

    /// Replaces the assignment. Partitions already assigned keep their positions; new ones
    /// start per `auto_offset_reset` (earliest when that is `None`) unless sought.
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let start = reset_seek(self.config.auto_offset_reset).unwrap_or(SeekTo::Earliest);
        let mut next = BTreeMap::new();
        for tp in partitions {
            let position = self
                .positions
                .get(&tp)
                .copied()
                .unwrap_or(Position::Pending(start));
            next.insert(tp, position);
        }
        self.positions = next;
    }

    /// The assigned partitions, sorted.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.positions.keys().cloned().collect()
    }

    /// Moves the position of an assigned partition. Resolved at the next poll (or position).
    pub fn seek(&mut self, tp: &TopicPartition, to: SeekTo) -> Result<()> {
        let slot = self
            .positions
            .get_mut(tp)
            .ok_or_else(|| Error::InvalidArgument(format!("{tp} is not assigned")))?;
        *slot = match to {
            SeekTo::Offset(offset) => Position::Known(offset),
            other => Position::Pending(other),
        };
        Ok(())
    }

    /// The offset of the next record to be returned for `tp`, resolving a pending seek.
    pub async fn position(&mut self, tp: &TopicPartition) -> Result<Offset> {
        self.resolve_positions().await?;
        match self.positions.get(tp) {
            Some(Position::Known(offset)) => Ok(*offset),
            Some(Position::Pending(_)) => {
                Err(Error::Protocol(format!("position of {tp} is unresolved")))
            }
            None => Err(Error::InvalidArgument(format!("{tp} is not assigned"))),
        }
    }

    /// The log end offset of `tp` as of the last fetch that answered for it.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<Offset> {
        self.high_watermarks.get(tp).copied()
    }

    /// Resolves every pending seek with ListOffsets.
    async fn resolve_positions(&mut self) -> Result<()> {
        // read_committed: `Latest` is the last stable offset, like Kafka's consumers.
        let isolation = self.config.isolation_level.wire();
        let mut by_topic: BTreeMap<String, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
        for (tp, position) in &self.positions {
            if let Position::Pending(seek) = position {
                let spec = match seek {
                    SeekTo::Earliest => OffsetSpec::Earliest,
                    SeekTo::Latest => OffsetSpec::Latest,
                    SeekTo::Timestamp(ms) => OffsetSpec::Timestamp(*ms),
                    SeekTo::Offset(_) => continue,
                };
                by_topic
                    .entry(tp.topic.clone())
                    .or_default()
                    .push((tp.partition, spec));
            }
        }
        for (topic, queries) in by_topic {
            let answers =
                admin::list_offsets_at(&mut self.conn, &topic, &queries, isolation).await?;
            let mut missing = Vec::new();
            for answer in answers {
                let tp = TopicPartition::new(topic.clone(), answer.partition);
                match answer.offset {
                    Some(offset) => {
                        self.positions.insert(tp, Position::Known(offset));
                    }
                    // No record at or after the time: start at the end.
                    None => missing.push((answer.partition, OffsetSpec::Latest)),
                }
            }
            if !missing.is_empty() {
                for answer in
                    admin::list_offsets_at(&mut self.conn, &topic, &missing, isolation).await?
                {
                    let offset = answer.offset.unwrap_or(Offset(0));
                    self.positions.insert(
                        TopicPartition::new(topic.clone(), answer.partition),
                        Position::Known(offset),
                    );
                }
            }
        }
        Ok(())
    }

    /// One long-poll Fetch for every assigned partition. Returns the records it brought, in
    /// offset order per partition (possibly none, after `max_wait`).
    pub async fn poll(&mut self) -> Result<Vec<ConsumerRecord>> {
        self.resolve_positions().await?;
        let mut topics: Vec<FetchTopic> = Vec::new();
        for (tp, position) in &self.positions {
            let Position::Known(offset) = position else {
                continue;
            };
            let partition = FetchPartition::default()
                .with_partition(tp.partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset.0)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(self.config.partition_max_bytes);
            match topics.iter_mut().find(|t| t.topic.0.as_str() == tp.topic) {
                Some(t) => t.partitions.push(partition),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![partition]),
                ),
            }
        }
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let max_wait_ms = i32::try_from(self.config.max_wait.as_millis()).unwrap_or(i32::MAX);
        let request = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(self.config.min_bytes)
            .with_max_bytes(self.config.max_bytes)
            .with_isolation_level(self.config.isolation_level.wire())
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let response = self.conn.request(&request).await?;
        Error::check(response.error_code, || "fetch".to_string())?;
        let mut out = Vec::new();
        // One inflation budget for the whole response, shared by its partitions (I10).
        let mut inflate_left_bytes = self.config.max_decompressed_bytes;
        for topic in response.responses {
            let name = topic.topic.0.to_string();
            for p in topic.partitions {
                let tp = TopicPartition::new(name.clone(), p.partition_index);
                let Some(Position::Known(from)) = self.positions.get(&tp).copied() else {
                    continue;
                };
                if p.error_code == ResponseError::OffsetOutOfRange.code() {
                    match reset_seek(self.config.auto_offset_reset) {
                        Some(seek) => {
                            self.positions.insert(tp, Position::Pending(seek));
                            continue;
                        }
                        None => Error::check(p.error_code, || format!("fetch {tp} at {from}"))?,
                    }
                }
                Error::check(p.error_code, || format!("fetch {tp}"))?;
                if p.high_watermark >= 0 {
                    self.high_watermarks
                        .insert(tp.clone(), Offset(p.high_watermark));
                }
                let Some(records) = p.records else { continue };
                let aborted: Option<Vec<AbortedTxn>> = match self.config.isolation_level {
                    IsolationLevel::ReadUncommitted => None,
                    IsolationLevel::ReadCommitted => Some(
                        p.aborted_transactions
                            .iter()
                            .flatten()
                            .map(|a| AbortedTxn {
                                first_offset: Offset(a.first_offset),
                                producer_id: a.producer_id.0,
                            })
                            .collect(),
                    ),
                };
                let decoded = decode_records_with(
                    &tp.topic,
                    tp.partition,
                    &records,
                    from,
                    inflate_left_bytes,
                    aborted.as_deref(),
                )?;
                inflate_left_bytes -= decoded.decompressed_bytes;
                if let Some(next) = decoded.next_offset {
                    if next > from {
                        self.positions.insert(tp, Position::Known(next));
                    }
                }
                out.extend(decoded.records);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::record::{patch_base_offset, BatchBuilder, NewRecord};

    fn batch(base: i64, values: &[&str], codec: Compression) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(&NewRecord {
                key: Some(b"k"),
                value: Some(v.as_bytes()),
                headers: vec![(b"h", Some(b"x"))],
                timestamp_ms: 1_000 + i as i64,
            });
        }
        let mut bytes = if codec == Compression::None {
            b.build(Offset(0))
        } else {
            let packed = compression::compress(codec, b.records_bytes()).expect("compress");
            b.build_with(Offset(0), codec, &packed)
        };
        patch_base_offset(&mut bytes, Offset(base));
        bytes
    }

    fn offsets(decoded: &DecodedRecords) -> Vec<i64> {
        decoded.records.iter().map(|r| r.offset.0).collect()
    }

    #[test]
    fn records_start_exactly_at_the_requested_offset_inside_a_batch() {
        let mut data = batch(10, &["a", "b", "c", "d"], Compression::None);
        data.extend(batch(14, &["e", "f"], Compression::None));
        let data = Bytes::from(data);
        let decoded = decode_records("t", 0, &data, Offset(12), 1 << 20).expect("decode");
        assert_eq!(offsets(&decoded), vec![12, 13, 14, 15]);
        assert_eq!(decoded.records[0].value.as_deref(), Some(&b"c"[..]));
        assert_eq!(decoded.records[0].timestamp_ms, 1_002);
        assert_eq!(decoded.records[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(
            decoded.records[0].headers,
            vec![RecordHeader {
                key: "h".into(),
                value: Some(Bytes::from_static(b"x"))
            }]
        );
        assert_eq!(decoded.next_offset, Some(Offset(16)));
        // A whole batch below the position is skipped entirely.
        let decoded = decode_records("t", 0, &data, Offset(15), 1 << 20).expect("decode");
        assert_eq!(offsets(&decoded), vec![15]);
    }

    #[test]
    fn compressed_batches_are_sliced_the_same_way() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let data = Bytes::from(batch(100, &["a", "b", "c"], codec));
            let decoded = decode_records("t", 3, &data, Offset(101), 1 << 20).expect("decode");
            assert_eq!(offsets(&decoded), vec![101, 102], "{codec:?}");
            assert_eq!(decoded.records[1].value.as_deref(), Some(&b"c"[..]));
            assert_eq!(decoded.records[1].partition, 3);
        }
    }

    #[test]
    fn a_partial_last_batch_is_left_for_the_next_fetch() {
        let mut data = batch(0, &["a", "b"], Compression::None);
        let second = batch(2, &["c", "d"], Compression::None);
        data.extend_from_slice(&second[..second.len() - 5]);
        let data = Bytes::from(data);
        let decoded = decode_records("t", 0, &data, Offset(0), 1 << 20).expect("decode");
        assert_eq!(offsets(&decoded), vec![0, 1]);
        assert_eq!(decoded.next_offset, Some(Offset(2)));
        // Only a fragment: nothing, and the position stays.
        let fragment = Bytes::from(second[..30].to_vec());
        let decoded = decode_records("t", 0, &fragment, Offset(2), 1 << 20).expect("decode");
        assert!(decoded.records.is_empty());
        assert_eq!(decoded.next_offset, None);
    }

    #[test]
    fn a_corrupt_batch_fails_the_crc_check() {
        let mut data = batch(0, &["a", "b"], Compression::None);
        let last = data.len() - 1;
        data[last] ^= 0xff;
        let result = decode_records("t", 0, &Bytes::from(data), Offset(0), 1 << 20);
        assert!(
            matches!(result, Err(Error::CorruptBatch { partition: 0, .. })),
            "{result:?}"
        );
    }

    /// Marks `bytes` (one batch) transactional for `producer_id`, or a control batch too.
    fn as_txn(mut bytes: Vec<u8>, producer_id: i64, control: bool) -> Vec<u8> {
        let crc_start = minikafka_core::record::CRC_START;
        let bits: i16 = if control { 0x30 } else { 0x10 };
        let attributes = i16::from_be_bytes([bytes[crc_start], bytes[crc_start + 1]]) | bits;
        bytes[crc_start..crc_start + 2].copy_from_slice(&attributes.to_be_bytes());
        bytes[43..51].copy_from_slice(&producer_id.to_be_bytes());
        let crc = minikafka_core::record::compute_crc(&bytes);
        bytes[crc_start - 4..crc_start].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    /// A control batch at `base` holding one marker: ABORT (type 0) or COMMIT (type 1).
    fn marker(base: i64, producer_id: i64, commit: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        let key = [0u8, 0, 0, u8::from(commit)];
        b.push(&NewRecord {
            key: Some(&key),
            value: Some(&[0, 0, 0, 0, 0, 0]),
            headers: vec![],
            timestamp_ms: 1,
        });
        let mut bytes = b.build(Offset(0));
        patch_base_offset(&mut bytes, Offset(base));
        as_txn(bytes, producer_id, true)
    }

    #[test]
    fn read_committed_drops_aborted_transactions_and_no_level_surfaces_markers() {
        // Producer 7 aborts offsets 0-1 (marker at 2); producer 8 commits 3-4 (marker at 5);
        // producer 7 then commits 6 (marker at 7): its new transaction is not aborted.
        let mut data = as_txn(batch(0, &["a0", "a1"], Compression::None), 7, false);
        data.extend(marker(2, 7, false));
        data.extend(as_txn(batch(3, &["c3", "c4"], Compression::None), 8, false));
        data.extend(marker(5, 8, true));
        data.extend(as_txn(batch(6, &["c6"], Compression::None), 7, false));
        data.extend(marker(7, 7, true));
        data.extend(batch(8, &["plain8"], Compression::None));
        let data = Bytes::from(data);
        let aborted = [AbortedTxn {
            first_offset: Offset(0),
            producer_id: 7,
        }];
        let committed =
            decode_records_with("t", 0, &data, Offset(0), 1 << 20, Some(&aborted)).expect("rc");
        assert_eq!(offsets(&committed), vec![3, 4, 6, 8]);
        assert_eq!(committed.next_offset, Some(Offset(9)));
        let all = decode_records("t", 0, &data, Offset(0), 1 << 20).expect("ru");
        assert_eq!(
            offsets(&all),
            vec![0, 1, 3, 4, 6, 8],
            "markers never surface"
        );
        // Starting inside the aborted range still drops it.
        let committed =
            decode_records_with("t", 0, &data, Offset(1), 1 << 20, Some(&aborted)).expect("rc");
        assert_eq!(offsets(&committed), vec![3, 4, 6, 8]);
    }

    #[test]
    fn a_compression_bomb_is_refused() {
        let values: Vec<String> = (0..1000).map(|_| "z".repeat(1000)).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let data = Bytes::from(batch(0, &refs, Compression::Zstd));
        let result = decode_records("t", 0, &data, Offset(0), 64 * 1024);
        assert!(matches!(result, Err(Error::Compression(_))), "{result:?}");
    }
}
