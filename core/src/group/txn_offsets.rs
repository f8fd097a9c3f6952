//! Transactional offsets (KIP-98, KIP-447): TxnOffsetCommit, the end of a transaction, and
//! OffsetFetch's `require_stable`. Methods of [`Coordinator`].
//!
//! - TxnOffsetCommit's records go to the log as Kafka writes them: a transactional batch
//!   with the producer id and epoch ([`AppendKind::Transactional`]). Once durable they are
//!   pending under (group, producer id), invisible to OffsetFetch (I73).
//! - The transaction's end ([`CompleteTxnRequest`]) writes a COMMIT or ABORT control batch
//!   ([`AppendKind::Marker`]); once it is durable the producer's pending offsets in every
//!   group of this coordinator become committed offsets (commit) or vanish (abort), and only
//!   then is the end acknowledged (I74). Replaying the log applies the same two kinds of
//!   batch with the same code, so pending state survives a restart (I21, I74).
//! - From v3 a commit is fenced by the group as Kafka fences a transactional commit:
//!   UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION (I75). A commit with
//!   generation −1 and no member (every v0–v2 commit) is not fenced by the group.
//! - OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for a partition that
//!   has transactional offsets pending or in flight (I76).

use super::classic::ClassicGroup;
use super::codes::ErrorCode;
use super::coordinator::*;
use super::handles::{Millis, RequestToken};
use super::messages::*;
use super::records::*;
use super::state::State;
use super::Group;

impl Coordinator {
    /// Applies one durable record of a transactional batch of `producer_id` (I21: the one
    /// code path for live appends and replay). Offset commits become pending (I73); a
    /// transactional batch holds nothing else we write, and anything else is ignored.
    pub(super) fn apply_txn_record(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        record: &GroupRecord,
        now: Millis,
    ) -> Result<(), RecordError> {
        let RecordKey::OffsetCommit {
            group,
            topic,
            partition,
        } = RecordKey::decode(&record.key)?
        else {
            return Ok(());
        };
        let Some(value) = &record.value else {
            return Ok(());
        };
        let v = OffsetCommitValue::decode(value)?;
        let txn = self
            .txn_pending
            .entry(group.clone())
            .or_default()
            .entry(producer_id)
            .or_default();
        txn.producer_epoch = txn.producer_epoch.max(producer_epoch);
        self.apply_seq += 1;
        txn.seqs.insert((topic.clone(), partition), self.apply_seq);
        txn.offsets.insert(
            (topic, partition),
            CommittedOffset {
                offset: v.offset,
                leader_epoch: v.leader_epoch,
                metadata: v.metadata,
                commit_timestamp: v.commit_timestamp,
                expire_timestamp: v.expire_timestamp,
            },
        );
        // A group with offsets pending exists (an empty classic group), as in Kafka.
        if !self.groups.contains_key(&group) {
            let since = if v.commit_timestamp > 0 {
                v.commit_timestamp
            } else {
                now
            };
            self.groups.insert(
                group.clone(),
                Group::Classic(ClassicGroup::new(&group, since)),
            );
        }
        Ok(())
    }

    /// Applies a durable COMMIT or ABORT marker of `producer_id`: its pending offsets in
    /// every group become committed (in the order written) or vanish (I73).
    pub(super) fn apply_txn_marker(&mut self, producer_id: i64, result: TxnResult) {
        let mut groups: Vec<String> = self
            .txn_pending
            .iter()
            .filter(|(_, producers)| producers.contains_key(&producer_id))
            .map(|(g, _)| g.clone())
            .collect();
        groups.sort();
        for group in groups {
            let Some(producers) = self.txn_pending.get_mut(&group) else {
                continue;
            };
            let txn = producers.remove(&producer_id);
            if producers.is_empty() {
                self.txn_pending.remove(&group);
            }
            if let (Some(txn), TxnResult::Commit) = (txn, result) {
                let since = txn.offsets.values().map(|o| o.commit_timestamp).max();
                for ((topic, partition), offset) in txn.offsets {
                    // Kafka's rule: of a transactional and a regular commit of one partition,
                    // the later in the log wins.
                    let seq = txn.seqs.get(&(topic.clone(), partition)).copied();
                    let key = (group.clone(), topic.clone(), partition);
                    let newer = self.committed_seq.get(&key);
                    if newer.is_some_and(|&n| seq.is_none_or(|s| n > s)) {
                        continue;
                    }
                    if let Some(seq) = seq {
                        self.committed_seq.insert(key, seq);
                    }
                    self.offsets
                        .entry(group.clone())
                        .or_default()
                        .insert((topic, partition), offset);
                }
                // Committed offsets belong to a group (an empty classic one if need be).
                if !self.groups.contains_key(&group) {
                    let g = ClassicGroup::new(&group, since.unwrap_or(0));
                    self.groups.insert(group.clone(), Group::Classic(g));
                }
            }
            self.drop_if_unused(&group);
        }
    }

    /// Forgets every producer's pending offset of (`group`, `topic`, `partition`) (a durable
    /// offset deletion).
    pub(super) fn drop_pending_txn_offset(&mut self, group: &str, topic: &str, partition: i32) {
        let Some(producers) = self.txn_pending.get_mut(group) else {
            return;
        };
        let key = (topic.to_owned(), partition);
        for txn in producers.values_mut() {
            txn.offsets.remove(&key);
            txn.seqs.remove(&key);
        }
        producers.retain(|_, txn| !txn.offsets.is_empty());
        if producers.is_empty() {
            self.txn_pending.remove(group);
        }
    }

    /// Startup: applies the records of a transactional batch of `producer_id` read back from
    /// the offsets partition, in log order, like [`Coordinator::replay`] (I74).
    pub fn replay_transactional(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let record = GroupRecord {
            key: key.to_vec(),
            value: value.map(<[u8]>::to_vec),
        };
        self.apply_txn_record(producer_id, producer_epoch, &record, 0)
    }

    /// Startup: applies a COMMIT or ABORT control batch of `producer_id` read back from the
    /// offsets partition, in log order (I74). A marker with nothing pending changes nothing.
    pub fn replay_marker(&mut self, producer_id: i64, result: TxnResult) {
        self.apply_txn_marker(producer_id, result);
    }

    /// Whether `producer_id` has offsets pending here, durable or in an append in flight.
    fn has_txn_offsets(&self, producer_id: i64) -> bool {
        self.txn_pending
            .values()
            .any(|producers| producers.contains_key(&producer_id))
            || self.pending.values().any(|p| {
                matches!(p.kind, AppendKind::Transactional { producer_id: pid, .. }
                    if pid == producer_id)
            })
    }

    /// The partitions of `group` with transactional offsets pending or in flight (I76).
    pub(super) fn unstable_partitions(
        &self,
        group: &str,
    ) -> std::collections::BTreeSet<(String, i32)> {
        let mut out: std::collections::BTreeSet<(String, i32)> = self
            .txn_pending
            .get(group)
            .into_iter()
            .flat_map(|producers| producers.values())
            .flat_map(|txn| txn.offsets.keys().cloned())
            .collect();
        for p in self.pending.values() {
            if !matches!(p.kind, AppendKind::Transactional { .. }) {
                continue;
            }
            for r in &p.records {
                if let Ok(RecordKey::OffsetCommit {
                    group: g,
                    topic,
                    partition,
                }) = RecordKey::decode(&r.key)
                {
                    if g == group {
                        out.insert((topic, partition));
                    }
                }
            }
        }
        out
    }

    /// Kafka's fencing of a transactional commit by the group (I75; `validateOffsetCommit`
    /// with `isTransactional`): no generation and no member is accepted; otherwise the
    /// member must be current and the generation the group's.
    fn validate_txn_commit(&self, req: &TxnOffsetCommitRequest) -> ErrorCode {
        let anonymous =
            req.generation_id < 0 && req.member_id.is_empty() && req.group_instance_id.is_none();
        match self.groups.get(&req.group_id) {
            None if req.generation_id < 0 => ErrorCode::NONE,
            None => ErrorCode::ILLEGAL_GENERATION,
            Some(Group::Consumer(c)) => {
                if anonymous {
                    return ErrorCode::NONE;
                }
                match c.validate_offset_commit(&req.member_id, req.generation_id) {
                    // A transactional commit's stale epoch is ILLEGAL_GENERATION in Kafka.
                    ErrorCode::STALE_MEMBER_EPOCH | ErrorCode::FENCED_MEMBER_EPOCH => {
                        ErrorCode::ILLEGAL_GENERATION
                    }
                    code => code,
                }
            }
            Some(Group::Classic(g)) => {
                if g.state == State::Dead {
                    return ErrorCode::COORDINATOR_NOT_AVAILABLE;
                }
                if (req.generation_id < 0 && g.state == State::Empty) || anonymous {
                    return ErrorCode::NONE;
                }
                if let Err(code) =
                    g.validate_member(&req.member_id, req.group_instance_id.as_deref())
                {
                    return code;
                }
                if req.generation_id != g.generation {
                    return ErrorCode::ILLEGAL_GENERATION;
                }
                ErrorCode::NONE
            }
        }
    }

    pub(super) fn txn_offset_commit(
        &mut self,
        token: RequestToken,
        req: TxnOffsetCommitRequest,
        now: Millis,
    ) {
        let stale_epoch = self
            .txn_pending
            .get(&req.group_id)
            .and_then(|producers| producers.get(&req.producer_id))
            .is_some_and(|txn| txn.producer_epoch > req.producer_epoch);
        let group_code = if req.group_id.is_empty() || too_long(&req.group_id) {
            ErrorCode::INVALID_GROUP_ID
        } else if req.producer_id < 0 || req.producer_epoch < 0 {
            ErrorCode::INVALID_PRODUCER_ID_MAPPING
        } else if stale_epoch {
            ErrorCode::INVALID_PRODUCER_EPOCH
        } else if too_long(&req.member_id) || req.group_instance_id.as_deref().is_some_and(too_long)
        {
            ErrorCode::UNKNOWN_MEMBER_ID
        } else {
            self.validate_txn_commit(&req)
        };
        let (topics, records) =
            self.commit_records(&req.group_id, &req.topics, group_code, now, None);
        let response = GroupResponse::TxnOffsetCommit(OffsetCommitResponse { topics });
        if records.is_empty() {
            self.respond(token, response);
        } else {
            // Acknowledged once the transactional batch is durable (I20); pending until the
            // marker (I73).
            self.append_kind(
                AppendKind::Transactional {
                    producer_id: req.producer_id,
                    producer_epoch: req.producer_epoch,
                },
                records,
                vec![req.group_id.clone()],
                vec![Completion::Respond(token, response)],
            );
        }
    }

    pub(super) fn complete_txn(&mut self, token: RequestToken, req: CompleteTxnRequest) {
        let response = GroupResponse::CompleteTxn(CompleteTxnResponse {
            error_code: ErrorCode::NONE,
        });
        if !self.has_txn_offsets(req.producer_id) {
            // Nothing to complete here (a retry, or a transaction without offsets in this
            // coordinator's groups): no marker needed.
            self.respond(token, response);
            return;
        }
        // I74: acknowledged once the marker is durable; it is applied then, in log order,
        // after any transactional append of the producer still in flight.
        self.append_kind(
            AppendKind::Marker {
                producer_id: req.producer_id,
                producer_epoch: req.producer_epoch,
                coordinator_epoch: req.coordinator_epoch,
                result: req.result,
            },
            Vec::new(),
            Vec::new(),
            vec![Completion::Respond(token, response)],
        );
    }
}
