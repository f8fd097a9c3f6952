//! Idempotent producer state of one partition (KIP-98 without transactions): which batches of
//! which producer are new, duplicates, or out of order, and the snapshot encoding that lets
//! the state survive a restart.
//!
//! Contract:
//! - Inputs: the producer fields of a validated batch header ([`ProducerBatch`]), the offsets
//!   the log gave an appended batch, and the time as a value (`now_ms`).
//! - Outputs: a [`Decision`] per batch (or a [`ProducerError`] carrying its Kafka error code),
//!   and snapshot bytes ([`ProducerStateTable::encode_snapshot`]) / a table decoded from them.
//! - Use: the partition's single writer calls [`ProducerStateTable::check_append`] and, when
//!   the decision is [`Decision::Append`] and the batch was written, calls
//!   [`ProducerStateTable::on_appended`] before the next batch of the partition is checked
//!   (the check and the append are one step w.r.t. other appends, I1). Replaying the log at
//!   startup calls `on_appended` for every idempotent batch in log order, without checks.
//! - Coalesced writes: when several queued batches are written as one group, each is checked
//!   before any of the group is recorded. [`GroupAdmission`] decides which batches may share
//!   a group so that each is still checked against exactly the state it would see appended
//!   alone (a proptest compares grouped and one-by-one appends).
//! - Never: reads a clock, does I/O, or allocates from a snapshot a count it has not checked
//!   against the bytes present (I10). Memory is bounded: at most
//!   [`ProducerLimits::max_producers`] producers, [`RETAINED_BATCHES`] batches each.
//!
//! Rules, Kafka's (`ProducerAppendInfo` in Kafka 3.x), per producer id:
//! 1. Producer id below 0 (`-1`): not idempotent, append normally ([`Decision::NotIdempotent`]).
//! 2. Control batches from a client are refused: INVALID_RECORD (87) (markers reach the log
//!    only through its marker path, `crate::control_batch`). Transactional batches follow the
//!    same sequence rules; the transaction rules are `crate::partition::txn`'s. A negative
//!    epoch is INVALID_PRODUCER_EPOCH (47); a negative base sequence is
//!    OUT_OF_ORDER_SEQUENCE_NUMBER (45).
//! 3. Unknown (or expired, or evicted) producer: accepted at *any* sequence. Kafka ≥ 2.5
//!    (KIP-360) no longer answers UNKNOWN_PRODUCER_ID (59) here: "if there is no current
//!    producer epoch (possibly because all producer records have been deleted due to
//!    retention) accept writes with any sequence number". Current clients (librdkafka, the
//!    Java client, kafka-python) expect that; an error would make them reset their sequences
//!    and re-send, which brings back the duplicates idempotence exists to prevent.
//! 4. Epoch older than the known one: INVALID_PRODUCER_EPOCH (47) (Kafka ≥ 2.7 answers this
//!    instead of PRODUCER_FENCED, 90, so the client may bump and retry).
//! 5. Newer epoch: must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45). The new
//!    epoch replaces the old one and its batches.
//! 6. Same epoch and the same first and last sequence as one of the last [`RETAINED_BATCHES`]
//!    batches: [`Decision::Duplicate`] with the original batch's offsets (answer success with
//!    the original base offset, append nothing).
//! 7. Same epoch and base sequence = last sequence + 1 (`i32::MAX` wraps to 0):
//!    [`Decision::Append`]; anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (45).
//!
//! Bounds: a producer whose last append is `producer_id_expiration_ms` old (Kafka's
//! `producer.id.expiration.ms`, 1 day) counts as unknown and is dropped by
//! [`ProducerStateTable::remove_expired`]; beyond `max_producers`, the least recently appended
//! producer is evicted. Either way the producer becomes unknown (rule 3): it loses
//! deduplication of retries, never its ability to write.
//!
//! Snapshot format (all integers big-endian), state of every batch below `offset`:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `MKPS` |
//! | 4..6 | version (u16) = 1 |
//! | 6..14 | offset (i64): the state covers every batch below it |
//! | 14..18 | producer count (u32) |
//! | … | per producer, least recently appended first: id (i64), epoch (i16), last update ms (i64), batch count (u8, 1..=5), then per batch: first sequence (i32), last sequence (i32), base offset (i64), last offset (i64), max timestamp (i64) |
//! | last 4 | CRC-32C (u32) of every byte before it |

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::error_code::ErrorCode;
use crate::record::BatchHeader;
use crate::types::Offset;

/// The producer id of a batch that is not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;
/// Batches remembered per producer for duplicate detection (Kafka's
/// `max.in.flight.requests.per.connection` limit for idempotence).
pub const RETAINED_BATCHES: usize = 5;
/// Default cap on producers remembered per partition.
pub const DEFAULT_MAX_PRODUCERS: usize = 10_000;
/// Default `producer.id.expiration.ms`: 1 day.
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

/// Snapshot magic bytes.
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"MKPS";
/// Snapshot format version.
pub const SNAPSHOT_VERSION: u16 = 1;
/// Bytes of a snapshot's fixed header (magic, version, offset, count).
pub const SNAPSHOT_HEADER_BYTES: usize = 18;
/// Bytes of one batch in a snapshot.
pub const SNAPSHOT_BATCH_BYTES: usize = 32;
/// Bytes of one producer in a snapshot before its batches.
pub const SNAPSHOT_PRODUCER_BYTES: usize = 19;

/// Limits on the state kept per partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerLimits {
    /// At most this many producers are remembered; the least recently appended is evicted.
    pub max_producers: usize,
    /// A producer with no append for this long is forgotten (`producer.id.expiration.ms`).
    pub producer_id_expiration_ms: i64,
}

impl Default for ProducerLimits {
    fn default() -> Self {
        ProducerLimits {
            max_producers: DEFAULT_MAX_PRODUCERS,
            producer_id_expiration_ms: DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        }
    }
}

/// The producer fields of one batch header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerBatch {
    /// Producer id (-1: not idempotent).
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence of the batch's first record.
    pub base_sequence: i32,
    /// Number of records (at least 1 in a validated batch).
    pub records_count: i32,
    /// Attribute bit 4.
    pub is_transactional: bool,
    /// Attribute bit 5.
    pub is_control: bool,
}

impl ProducerBatch {
    /// The producer fields of `header`.
    pub fn from_header(header: &BatchHeader) -> Self {
        ProducerBatch {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            records_count: header.records_count,
            is_transactional: header.is_transactional(),
            is_control: header.is_control(),
        }
    }

    /// True when the batch carries a producer id (Kafka: `producerId > -1`).
    pub fn is_idempotent(&self) -> bool {
        self.producer_id >= 0
    }

    /// Sequence of the batch's last record: `base + count - 1`, wrapping past `i32::MAX` to 0.
    pub fn last_sequence(&self) -> i32 {
        add_sequence(self.base_sequence, self.records_count.saturating_sub(1))
    }
}

/// `sequence + delta` in Kafka's sequence space: past `i32::MAX` it wraps to 0. Both are
/// expected non-negative (a negative `delta` counts as 0).
pub fn add_sequence(sequence: i32, delta: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(delta.max(0));
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// What is remembered of one appended batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of its first record.
    pub first_sequence: i32,
    /// Sequence of its last record.
    pub last_sequence: i32,
    /// Offset the log gave its first record.
    pub base_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Its max timestamp (header field).
    pub max_timestamp_ms: i64,
}

/// What is remembered of one producer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerEntry {
    /// The newest epoch seen.
    pub epoch: i16,
    /// Its last batches of that epoch, oldest first; 1 to [`RETAINED_BATCHES`] of them.
    pub batches: VecDeque<BatchMetadata>,
    /// When it last appended (`now_ms` of the append; of the replay for batches read back).
    pub last_update_ms: i64,
}

impl ProducerEntry {
    /// The last batch's last sequence.
    pub fn last_sequence(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_sequence)
    }

    /// The last batch's last offset.
    pub fn last_offset(&self) -> Option<Offset> {
        self.batches.back().map(|b| b.last_offset)
    }
}

/// What to do with a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No producer id: append it; nothing to record.
    NotIdempotent,
    /// In sequence (or a new producer or epoch): append it, then call `on_appended`.
    Append,
    /// Already appended: answer with these offsets and append nothing.
    Duplicate(BatchMetadata),
}

/// Why a batch of an idempotent producer is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The epoch is older than the producer's known epoch, or negative (47).
    #[error(
        "producer {producer_id}: epoch {epoch} is older than the current epoch {current_epoch:?}"
    )]
    InvalidProducerEpoch {
        /// The producer id.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The known epoch (`None` when the batch's epoch is negative).
        current_epoch: Option<i16>,
    },
    /// The base sequence does not follow the producer's last one (45).
    #[error("producer {producer_id}: base sequence {base_sequence} out of order (expected {expected:?})")]
    OutOfOrderSequence {
        /// The producer id.
        producer_id: i64,
        /// The batch's base sequence.
        base_sequence: i32,
        /// The sequence that would have been accepted (`None` for a negative one).
        expected: Option<i32>,
    },
    /// A non-transactional batch of a producer whose transaction is ongoing (48).
    #[error("producer {producer_id}: a non-transactional batch during its transaction")]
    InvalidTxnState {
        /// The producer id.
        producer_id: i64,
    },
    /// A marker from a coordinator older than the last one that wrote for the producer (52).
    #[error(
        "producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {current}"
    )]
    CoordinatorFenced {
        /// The producer id.
        producer_id: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The last marker's coordinator epoch.
        current: i32,
    },
    /// A control batch sent by a client (87).
    #[error("producer {producer_id}: control batches may not be produced")]
    ControlBatch {
        /// The producer id.
        producer_id: i64,
    },
}

impl ProducerError {
    /// The Kafka error code to answer with.
    pub fn kafka_error_code(&self) -> ErrorCode {
        match self {
            ProducerError::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH,
            ProducerError::OutOfOrderSequence { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerError::InvalidTxnState { .. } => ErrorCode::INVALID_TXN_STATE,
            ProducerError::CoordinatorFenced { .. } => ErrorCode::TRANSACTION_COORDINATOR_FENCED,
            ProducerError::ControlBatch { .. } => ErrorCode::INVALID_RECORD,
        }
    }
}

/// What [`GroupAdmission::admit`] says about one queued batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The batch must start the next group: checked now, it could see a state that an
    /// earlier member of this group is about to change. Leave it queued.
    WaitForNextGroup,
    /// Refused by the producer rules: answer with the error, write nothing.
    Refuse(ProducerError),
    /// A duplicate: answer with the original batch's offsets, write nothing.
    Duplicate(BatchMetadata),
    /// May join the group with this decision ([`Decision::Append`] or
    /// [`Decision::NotIdempotent`]); call [`GroupAdmission::join`] once it does, and
    /// [`ProducerStateTable::on_appended`] after the group is written.
    Admit(Decision),
}

/// The producer rules for one coalesced write group: which queued batches may be written
/// together while the table is updated only after the group's write.
///
/// A batch's check reads its own producer's entry only, and recording a batch changes only
/// its own producer's entry, except that inserting a new producer beyond
/// [`ProducerLimits::max_producers`] evicts another. So a group may hold at most one batch
/// per idempotent producer, and no idempotent batch after a member that may evict: then
/// checking every member against the state at the group's start equals checking each after
/// the ones before it were recorded. Non-idempotent batches join any group.
#[derive(Clone, Debug, Default)]
pub struct GroupAdmission {
    /// Producer ids of the idempotent members.
    producer_ids: Vec<i64>,
    /// Members whose producer the table does not hold yet.
    new_producers: usize,
    /// Recording the members may evict a producer.
    may_evict: bool,
}

impl GroupAdmission {
    /// An empty group.
    pub fn new() -> Self {
        GroupAdmission::default()
    }

    /// Decides `batch` (queued at `now_ms`) for this group against `table`, the state before
    /// the group. Changes nothing.
    pub fn admit(
        &self,
        table: &ProducerStateTable,
        batch: &ProducerBatch,
        now_ms: i64,
    ) -> Admission {
        if self.must_wait(batch) {
            return Admission::WaitForNextGroup;
        }
        match table.check_append(batch, now_ms) {
            Ok(Decision::Duplicate(original)) => Admission::Duplicate(original),
            Ok(decision) => Admission::Admit(decision),
            Err(e) => Admission::Refuse(e),
        }
    }

    /// Whether `batch` must start the next group (another member of its producer is in this
    /// one, or a member may evict): [`admit`](Self::admit)'s first rule, also applied to the
    /// markers of a producer's transactions, which the producer rules do not check.
    pub fn must_wait(&self, batch: &ProducerBatch) -> bool {
        batch.is_idempotent() && (self.may_evict || self.producer_ids.contains(&batch.producer_id))
    }

    /// Records that `batch`, admitted, joined the group (a batch admitted but then not
    /// written, e.g. because the group ended before it, must not be joined).
    pub fn join(&mut self, table: &ProducerStateTable, batch: &ProducerBatch) {
        if !batch.is_idempotent() {
            return;
        }
        self.producer_ids.push(batch.producer_id);
        if table.get(batch.producer_id).is_none() {
            self.new_producers += 1;
            self.may_evict |= table.len() + self.new_producers > table.limits().max_producers;
        }
    }
}

/// Why snapshot bytes were refused (the caller ignores the snapshot and rebuilds by a scan).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Fewer bytes than a header and a checksum.
    #[error("snapshot of {len_bytes} bytes is too short")]
    TooShort {
        /// Its length.
        len_bytes: usize,
    },
    /// The checksum does not match: torn or damaged.
    #[error("snapshot checksum mismatch")]
    Checksum,
    /// Not a snapshot of ours.
    #[error("bad snapshot magic")]
    Magic,
    /// A version we do not read.
    #[error("unsupported snapshot version {0}")]
    Version(u16),
    /// A field is out of range or the body does not match its counts.
    #[error("malformed snapshot: {0}")]
    Malformed(&'static str),
}

#[derive(Clone)]
struct Slot {
    entry: ProducerEntry,
    /// Key in `ProducerStateTable::recency`.
    recency: u64,
}

/// The idempotent producer state of one partition. See the module documentation.
#[derive(Clone)]
pub struct ProducerStateTable {
    limits: ProducerLimits,
    slots: HashMap<i64, Slot>,
    /// Recency stamp → producer id, least recently appended first.
    recency: BTreeMap<u64, i64>,
    next_recency: u64,
}

impl ProducerStateTable {
    /// An empty table.
    pub fn new(limits: ProducerLimits) -> Self {
        assert!(limits.max_producers > 0, "max_producers must be positive");
        ProducerStateTable {
            limits,
            slots: HashMap::new(),
            recency: BTreeMap::new(),
            next_recency: 0,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> ProducerLimits {
        self.limits
    }

    /// Number of producers remembered.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no producer is remembered.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The entry of `producer_id`, expired or not.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.slots.get(&producer_id).map(|s| &s.entry)
    }

    /// Every producer, least recently appended first.
    pub fn producers_by_recency(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> + '_ {
        self.recency
            .values()
            .filter_map(|pid| self.slots.get(pid).map(|s| (*pid, &s.entry)))
    }

    /// Every producer whose state has not expired at `now_ms`, least recently appended first
    /// (what DescribeProducers lists).
    pub fn live_producers(&self, now_ms: i64) -> impl Iterator<Item = (i64, &ProducerEntry)> + '_ {
        self.producers_by_recency()
            .filter(move |(_, entry)| !self.is_expired(entry, now_ms))
    }

    fn is_expired(&self, entry: &ProducerEntry, now_ms: i64) -> bool {
        now_ms.saturating_sub(entry.last_update_ms) >= self.limits.producer_id_expiration_ms
    }

    /// The entry of `producer_id` unless it expired.
    fn live(&self, producer_id: i64, now_ms: i64) -> Option<&ProducerEntry> {
        self.get(producer_id)
            .filter(|entry| !self.is_expired(entry, now_ms))
    }

    /// Decides what to do with `batch` (rules 1–7 of the module documentation). Changes
    /// nothing: follow an [`Decision::Append`] with [`on_appended`](Self::on_appended).
    pub fn check_append(
        &self,
        batch: &ProducerBatch,
        now_ms: i64,
    ) -> Result<Decision, ProducerError> {
        let producer_id = batch.producer_id;
        if batch.is_control {
            return Err(ProducerError::ControlBatch { producer_id });
        }
        if !batch.is_idempotent() {
            return Ok(Decision::NotIdempotent);
        }
        if batch.producer_epoch < 0 {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: batch.producer_epoch,
                current_epoch: None,
            });
        }
        if batch.base_sequence < 0 {
            return Err(ProducerError::OutOfOrderSequence {
                producer_id,
                base_sequence: batch.base_sequence,
                expected: None,
            });
        }
        // Rule 3: unknown producers are accepted at any sequence.
        let Some(entry) = self.live(producer_id, now_ms) else {
            return Ok(Decision::Append);
        };
        let out_of_order = |expected| ProducerError::OutOfOrderSequence {
            producer_id,
            base_sequence: batch.base_sequence,
            expected: Some(expected),
        };
        if batch.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: batch.producer_epoch,
                current_epoch: Some(entry.epoch),
            });
        }
        if batch.producer_epoch > entry.epoch {
            return if batch.base_sequence == 0 {
                Ok(Decision::Append)
            } else {
                Err(out_of_order(0))
            };
        }
        let last_sequence = batch.last_sequence();
        if let Some(original) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == batch.base_sequence && b.last_sequence == last_sequence)
        {
            return Ok(Decision::Duplicate(*original));
        }
        // Entries always hold at least one batch.
        let expected = entry
            .last_sequence()
            .map_or(0, |last| add_sequence(last, 1));
        if batch.base_sequence == expected {
            Ok(Decision::Append)
        } else {
            Err(out_of_order(expected))
        }
    }

    /// Records that `batch` (idempotent) was appended at `base_offset..=last_offset`. Also
    /// used to replay the log at startup, in log order. A batch of an older epoch than the
    /// known one is ignored; a newer epoch (or an expired entry) starts afresh; beyond
    /// `max_producers` the least recently appended producer is evicted.
    pub fn on_appended(
        &mut self,
        batch: &ProducerBatch,
        base_offset: Offset,
        last_offset: Offset,
        max_timestamp_ms: i64,
        now_ms: i64,
    ) {
        if !batch.is_idempotent() {
            return;
        }
        let metadata = BatchMetadata {
            first_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence(),
            base_offset,
            last_offset,
            max_timestamp_ms,
        };
        let recency = self.next_recency;
        self.next_recency += 1;
        let expired = self
            .get(batch.producer_id)
            .is_some_and(|e| self.is_expired(e, now_ms));
        if let Some(slot) = self.slots.get_mut(&batch.producer_id) {
            if !expired && batch.producer_epoch < slot.entry.epoch {
                return;
            }
            if expired || batch.producer_epoch > slot.entry.epoch {
                slot.entry.epoch = batch.producer_epoch;
                slot.entry.batches.clear();
            }
            slot.entry.batches.push_back(metadata);
            while slot.entry.batches.len() > RETAINED_BATCHES {
                slot.entry.batches.pop_front();
            }
            slot.entry.last_update_ms = now_ms;
            self.recency.remove(&slot.recency);
            slot.recency = recency;
            self.recency.insert(recency, batch.producer_id);
            return;
        }
        let entry = ProducerEntry {
            epoch: batch.producer_epoch,
            batches: VecDeque::from([metadata]),
            last_update_ms: now_ms,
        };
        self.insert(batch.producer_id, entry, recency);
    }

    /// Inserts a new producer as the most recent, evicting beyond the cap.
    fn insert(&mut self, producer_id: i64, entry: ProducerEntry, recency: u64) {
        self.recency.insert(recency, producer_id);
        self.slots.insert(producer_id, Slot { entry, recency });
        while self.slots.len() > self.limits.max_producers {
            let Some((_, oldest)) = self.recency.pop_first() else {
                break;
            };
            self.slots.remove(&oldest);
        }
    }

    fn remove_where(&mut self, doomed: impl Fn(&ProducerEntry) -> bool) -> usize {
        let ids: Vec<i64> = self
            .slots
            .iter()
            .filter(|(_, s)| doomed(&s.entry))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in &ids {
            if let Some(slot) = self.slots.remove(pid) {
                self.recency.remove(&slot.recency);
            }
        }
        ids.len()
    }

    /// Forgets producers with no append for `producer_id_expiration_ms`; returns how many.
    pub fn remove_expired(&mut self, now_ms: i64) -> usize {
        let expiration_ms = self.limits.producer_id_expiration_ms;
        self.remove_where(|e| now_ms.saturating_sub(e.last_update_ms) >= expiration_ms)
    }

    /// Forgets producers whose last batch lies wholly below `offset` (its records were
    /// deleted, or a stale snapshot cannot vouch for what followed); returns how many.
    pub fn remove_below(&mut self, offset: Offset) -> usize {
        self.remove_where(|e| e.last_offset().is_none_or(|last| last < offset))
    }

    /// Forgets producers with a batch at or above `offset` (offsets the log no longer holds);
    /// returns how many.
    pub fn remove_at_or_above(&mut self, offset: Offset) -> usize {
        self.remove_where(|e| e.batches.iter().any(|b| b.last_offset >= offset))
    }

    /// Encodes the table as a snapshot of the state below `offset` (format in the module
    /// documentation).
    pub fn encode_snapshot(&self, offset: Offset) -> Vec<u8> {
        let batches: usize = self.slots.values().map(|s| s.entry.batches.len()).sum();
        let mut out = Vec::with_capacity(
            SNAPSHOT_HEADER_BYTES
                + self.slots.len() * SNAPSHOT_PRODUCER_BYTES
                + batches * SNAPSHOT_BATCH_BYTES
                + 4,
        );
        out.extend_from_slice(&SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&offset.0.to_be_bytes());
        out.extend_from_slice(&(self.slots.len() as u32).to_be_bytes());
        for (pid, entry) in self.producers_by_recency() {
            out.extend_from_slice(&pid.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.last_update_ms.to_be_bytes());
            out.push(entry.batches.len() as u8);
            for b in &entry.batches {
                out.extend_from_slice(&b.first_sequence.to_be_bytes());
                out.extend_from_slice(&b.last_sequence.to_be_bytes());
                out.extend_from_slice(&b.base_offset.0.to_be_bytes());
                out.extend_from_slice(&b.last_offset.0.to_be_bytes());
                out.extend_from_slice(&b.max_timestamp_ms.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a snapshot: the offset it covers and the table. The checksum is verified
    /// first; every count is checked against the bytes present before anything is allocated
    /// (I10). With a smaller `max_producers` than when it was written, the least recently
    /// appended producers are dropped.
    pub fn decode_snapshot(
        bytes: &[u8],
        limits: ProducerLimits,
    ) -> Result<(Offset, ProducerStateTable), SnapshotError> {
        if bytes.len() < SNAPSHOT_HEADER_BYTES + 4 {
            return Err(SnapshotError::TooShort {
                len_bytes: bytes.len(),
            });
        }
        let (body, crc) = bytes.split_at(bytes.len() - 4);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return Err(SnapshotError::Checksum);
        }
        let mut r = Reader { buf: body, pos: 0 };
        if r.take::<4>()? != SNAPSHOT_MAGIC {
            return Err(SnapshotError::Magic);
        }
        let version = u16::from_be_bytes(r.take()?);
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(version));
        }
        let offset = Offset(i64::from_be_bytes(r.take()?));
        if offset.0 < 0 {
            return Err(SnapshotError::Malformed("negative offset"));
        }
        let count = u32::from_be_bytes(r.take()?) as usize;
        let min_entry = SNAPSHOT_PRODUCER_BYTES + SNAPSHOT_BATCH_BYTES;
        if count > r.remaining() / min_entry {
            return Err(SnapshotError::Malformed(
                "producer count exceeds the bytes present",
            ));
        }
        let mut table = ProducerStateTable::new(limits);
        for _ in 0..count {
            let pid = i64::from_be_bytes(r.take()?);
            let epoch = i16::from_be_bytes(r.take()?);
            let last_update_ms = i64::from_be_bytes(r.take()?);
            let batch_count = usize::from(r.take::<1>()?[0]);
            if pid < 0 || epoch < 0 {
                return Err(SnapshotError::Malformed("negative producer id or epoch"));
            }
            if !(1..=RETAINED_BATCHES).contains(&batch_count) {
                return Err(SnapshotError::Malformed("batch count out of range"));
            }
            let mut batches = VecDeque::with_capacity(batch_count);
            for _ in 0..batch_count {
                let b = BatchMetadata {
                    first_sequence: i32::from_be_bytes(r.take()?),
                    last_sequence: i32::from_be_bytes(r.take()?),
                    base_offset: Offset(i64::from_be_bytes(r.take()?)),
                    last_offset: Offset(i64::from_be_bytes(r.take()?)),
                    max_timestamp_ms: i64::from_be_bytes(r.take()?),
                };
                let sane = b.first_sequence >= 0
                    && b.last_sequence >= 0
                    && b.base_offset.0 >= 0
                    && b.last_offset >= b.base_offset
                    && b.last_offset < offset
                    && batches
                        .back()
                        .is_none_or(|p: &BatchMetadata| p.last_offset < b.base_offset);
                if !sane {
                    return Err(SnapshotError::Malformed("batch fields out of range"));
                }
                batches.push_back(b);
            }
            if table.slots.contains_key(&pid) {
                return Err(SnapshotError::Malformed("producer listed twice"));
            }
            let entry = ProducerEntry {
                epoch,
                batches,
                last_update_ms,
            };
            let recency = table.next_recency;
            table.next_recency += 1;
            table.insert(pid, entry, recency);
        }
        if r.remaining() != 0 {
            return Err(SnapshotError::Malformed("trailing bytes"));
        }
        Ok((offset, table))
    }
}

/// Big-endian reads from a checked slice.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let bytes = self
            .buf
            .get(self.pos..self.pos + N)
            .ok_or(SnapshotError::Malformed("truncated"))?;
        self.pos += N;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, base_sequence: i32, records_count: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence,
            records_count,
            is_transactional: false,
            is_control: false,
        }
    }

    /// Checks and, when accepted, appends at `*next`; returns the decision.
    fn produce(
        table: &mut ProducerStateTable,
        next: &mut i64,
        b: ProducerBatch,
        now_ms: i64,
    ) -> Result<Decision, ProducerError> {
        let decision = table.check_append(&b, now_ms)?;
        if decision != Decision::NotIdempotent {
            if let Decision::Append = decision {
                let base = Offset(*next);
                let last = Offset(*next + i64::from(b.records_count) - 1);
                table.on_appended(&b, base, last, now_ms, now_ms);
                *next = last.0 + 1;
            }
        } else {
            *next += i64::from(b.records_count);
        }
        Ok(decision)
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(batch(1, 0, i32::MAX - 1, 3).last_sequence(), 0);
        assert_eq!(batch(1, 0, 5, 1).last_sequence(), 5);
        let mut t = ProducerStateTable::new(ProducerLimits::default());
        let mut next = 0;
        produce(&mut t, &mut next, batch(1, 0, i32::MAX - 1, 2), 0).expect("first");
        assert_eq!(
            produce(&mut t, &mut next, batch(1, 0, 0, 1), 0),
            Ok(Decision::Append)
        );
    }

    #[test]
    fn kafka_rules_in_order() {
        let mut t = ProducerStateTable::new(ProducerLimits::default());
        let mut next = 0;
        assert_eq!(
            produce(&mut t, &mut next, batch(-1, -1, -1, 3), 0),
            Ok(Decision::NotIdempotent)
        );
        // Unknown producer: any sequence.
        assert_eq!(
            produce(&mut t, &mut next, batch(7, 0, 42, 2), 0),
            Ok(Decision::Append)
        );
        assert_eq!(t.get(7).and_then(ProducerEntry::last_sequence), Some(43));
        assert_eq!(
            produce(&mut t, &mut next, batch(7, 0, 44, 1), 0),
            Ok(Decision::Append)
        );
        // Duplicate of the first batch: its original offsets.
        match t.check_append(&batch(7, 0, 42, 2), 0) {
            Ok(Decision::Duplicate(m)) => {
                assert_eq!((m.base_offset, m.last_offset), (Offset(3), Offset(4)))
            }
            other => panic!("expected a duplicate, got {other:?}"),
        }
        // Same first sequence but a different count is not a duplicate.
        assert_eq!(
            t.check_append(&batch(7, 0, 42, 1), 0)
                .map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        // Gap.
        assert_eq!(
            t.check_append(&batch(7, 0, 46, 1), 0),
            Err(ProducerError::OutOfOrderSequence {
                producer_id: 7,
                base_sequence: 46,
                expected: Some(45)
            })
        );
        // Newer epoch must start at 0.
        assert_eq!(
            t.check_append(&batch(7, 1, 45, 1), 0)
                .map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(
            produce(&mut t, &mut next, batch(7, 1, 0, 1), 0),
            Ok(Decision::Append)
        );
        // Older epoch is fenced.
        assert_eq!(
            t.check_append(&batch(7, 0, 45, 1), 0)
                .map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::INVALID_PRODUCER_EPOCH)
        );
        // Transactional batches follow the sequence rules; control batches are refused.
        let mut tx = batch(8, 0, 0, 1);
        tx.is_transactional = true;
        assert_eq!(t.check_append(&tx, 0), Ok(Decision::Append));
        tx.is_control = true;
        assert_eq!(
            t.check_append(&tx, 0).map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::INVALID_RECORD)
        );
        assert_eq!(
            t.check_append(&batch(8, 0, -1, 1), 0)
                .map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(
            t.check_append(&batch(8, -1, 0, 1), 0)
                .map_err(|e| e.kafka_error_code()),
            Err(ErrorCode::INVALID_PRODUCER_EPOCH)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_duplicates() {
        let mut t = ProducerStateTable::new(ProducerLimits::default());
        let mut next = 0;
        for seq in 0..7 {
            produce(&mut t, &mut next, batch(1, 0, seq, 1), 0).expect("append");
        }
        for seq in 2..7 {
            assert!(matches!(
                t.check_append(&batch(1, 0, seq, 1), 0),
                Ok(Decision::Duplicate(m)) if m.base_offset == Offset(i64::from(seq))
            ));
        }
        for seq in 0..2 {
            assert_eq!(
                t.check_append(&batch(1, 0, seq, 1), 0)
                    .map_err(|e| e.kafka_error_code()),
                Err(ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER)
            );
        }
    }

    #[test]
    fn expiry_and_eviction_forget_producers() {
        let limits = ProducerLimits {
            max_producers: 2,
            producer_id_expiration_ms: 1_000,
        };
        let mut t = ProducerStateTable::new(limits);
        let mut next = 0;
        produce(&mut t, &mut next, batch(1, 0, 0, 1), 0).expect("1");
        produce(&mut t, &mut next, batch(2, 0, 0, 1), 10).expect("2");
        produce(&mut t, &mut next, batch(1, 0, 1, 1), 20).expect("1 again");
        produce(&mut t, &mut next, batch(3, 0, 0, 1), 30).expect("3");
        assert_eq!(t.len(), 2);
        assert!(t.get(2).is_none(), "least recently appended evicted");
        assert!(t.get(1).is_some() && t.get(3).is_some());
        // Expired: treated as unknown (any sequence), then removed.
        assert_eq!(
            t.check_append(&batch(1, 0, 9, 1), 1_020),
            Ok(Decision::Append)
        );
        assert_eq!(t.remove_expired(1_025), 1);
        assert!(t.get(1).is_none() && t.get(3).is_some());
        assert_eq!(t.remove_below(Offset(100)), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn snapshot_round_trips_and_rejects_damage() {
        let mut t = ProducerStateTable::new(ProducerLimits::default());
        let mut next = 0;
        for pid in 0..3 {
            for seq in 0..(pid as i32 + 6) {
                produce(
                    &mut t,
                    &mut next,
                    batch(pid, 2, seq * 2, 2),
                    100 + seq as i64,
                )
                .expect("append");
            }
        }
        let bytes = t.encode_snapshot(Offset(next));
        let (offset, back) =
            ProducerStateTable::decode_snapshot(&bytes, ProducerLimits::default()).expect("ok");
        assert_eq!(offset, Offset(next));
        let a: Vec<_> = t.producers_by_recency().collect();
        let b: Vec<_> = back.producers_by_recency().collect();
        assert_eq!(a, b);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(ProducerStateTable::decode_snapshot(&bad, ProducerLimits::default()).is_err());
        }
        for len in 0..bytes.len() {
            assert!(
                ProducerStateTable::decode_snapshot(&bytes[..len], ProducerLimits::default())
                    .is_err()
            );
        }
    }

    #[test]
    fn a_huge_count_is_refused_before_allocating_i10() {
        let mut body = Vec::new();
        body.extend_from_slice(&SNAPSHOT_MAGIC);
        body.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        body.extend_from_slice(&10i64.to_be_bytes());
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&body);
        body.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(
            ProducerStateTable::decode_snapshot(&body, ProducerLimits::default()).err(),
            Some(SnapshotError::Malformed(
                "producer count exceeds the bytes present"
            ))
        );
    }

    proptest::proptest! {
        /// Coalesced groups formed by [`GroupAdmission`] decide and record exactly what
        /// one-by-one appends do: same decision per batch, same table afterwards (compared by
        /// its snapshot bytes, which hold every entry in recency order).
        #[test]
        fn grouped_appends_match_one_by_one(
            ops in proptest::collection::vec(
                (-1i64..5, 0i16..3, 0i32..6, 1i32..3, 0i64..400), 1..60),
            max_producers in 1usize..4,
            group_cap in 1usize..8,
        ) {
            let limits = ProducerLimits { max_producers, producer_id_expiration_ms: 1_000 };
            let mut now = 0i64;
            let batches: Vec<(ProducerBatch, i64)> = ops
                .iter()
                .map(|&(pid, epoch, seq, count, dt)| {
                    now += dt;
                    (batch(pid, epoch, seq, count), now)
                })
                .collect();

            // One by one.
            let mut alone = ProducerStateTable::new(limits);
            let mut next = 0i64;
            let mut expected = Vec::new();
            for (b, now_ms) in &batches {
                expected.push(produce(&mut alone, &mut next, *b, *now_ms));
            }

            // In groups: members are checked against the state at the group's start and
            // recorded after it, as the partition's writer does.
            let mut grouped = ProducerStateTable::new(limits);
            let mut next = 0i64;
            let mut got = Vec::new();
            let mut queue: std::collections::VecDeque<_> = batches.iter().copied().collect();
            while !queue.is_empty() {
                let mut group = GroupAdmission::new();
                let mut members: Vec<(ProducerBatch, Decision, i64)> = Vec::new();
                while let Some((b, now_ms)) = queue.pop_front() {
                    if members.len() == group_cap {
                        queue.push_front((b, now_ms));
                        break;
                    }
                    match group.admit(&grouped, &b, now_ms) {
                        Admission::WaitForNextGroup => {
                            proptest::prop_assert!(!members.is_empty(), "a group takes its first batch");
                            queue.push_front((b, now_ms));
                            break;
                        }
                        Admission::Refuse(e) => got.push(Err(e)),
                        Admission::Duplicate(original) => got.push(Ok(Decision::Duplicate(original))),
                        Admission::Admit(decision) => {
                            group.join(&grouped, &b);
                            members.push((b, decision, now_ms));
                            got.push(Ok(decision));
                        }
                    }
                }
                for (b, decision, now_ms) in members {
                    let base = Offset(next);
                    let last = Offset(next + i64::from(b.records_count) - 1);
                    next = last.0 + 1;
                    if decision == Decision::Append {
                        grouped.on_appended(&b, base, last, now_ms, now_ms);
                    }
                }
            }
            proptest::prop_assert_eq!(got, expected);
            proptest::prop_assert_eq!(grouped.encode_snapshot(Offset(next)), alone.encode_snapshot(Offset(next)));
        }
    }

    #[test]
    fn a_group_holds_one_batch_per_producer_and_none_after_a_possible_eviction() {
        let limits = ProducerLimits {
            max_producers: 2,
            producer_id_expiration_ms: 1_000,
        };
        let mut t = ProducerStateTable::new(limits);
        t.on_appended(&batch(1, 0, 0, 1), Offset(0), Offset(0), 0, 0);
        let mut group = GroupAdmission::new();
        assert_eq!(
            group.admit(&t, &batch(1, 0, 1, 1), 0),
            Admission::Admit(Decision::Append)
        );
        group.join(&t, &batch(1, 0, 1, 1));
        assert_eq!(
            group.admit(&t, &batch(1, 0, 2, 1), 0),
            Admission::WaitForNextGroup,
            "a second batch of producer 1"
        );
        assert_eq!(
            group.admit(&t, &batch(-1, 0, 0, 1), 0),
            Admission::Admit(Decision::NotIdempotent)
        );
        group.join(&t, &batch(2, 0, 0, 1)); // new producer 2: 2 of 2, no eviction yet
        assert_eq!(
            group.admit(&t, &batch(3, 0, 0, 1), 0),
            Admission::Admit(Decision::Append)
        );
        group.join(&t, &batch(3, 0, 0, 1)); // new producer 3: 3 of 2, may evict
        assert_eq!(
            group.admit(&t, &batch(4, 0, 0, 1), 0),
            Admission::WaitForNextGroup
        );
        assert_eq!(
            group.admit(&t, &batch(-1, 0, 0, 1), 0),
            Admission::Admit(Decision::NotIdempotent),
            "non-idempotent batches join any group"
        );
        assert!(matches!(
            GroupAdmission::new().admit(&t, &batch(1, 0, 0, 1), 0),
            Admission::Duplicate(_)
        ));
        assert!(matches!(
            GroupAdmission::new().admit(&t, &batch(1, 0, 5, 1), 0),
            Admission::Refuse(ProducerError::OutOfOrderSequence { .. })
        ));
    }
}
