//! The per-batch rules of a write group: what
//! [`PartitionMachine`](super::PartitionMachine)'s placement and publish apply. Which
//! rules a batch passes depends on who wrote it ([`AppendKind`]); what its publication records
//! is the producer table's and the transaction state's part of it.
//!
//! The machine checks every member of a group against the state before the group (the
//! producer table and the transactions move only at publish) and record the members in
//! offset order once the group is written, so each batch sees exactly the state it would
//! see appended alone ([`GroupAdmission`]: one member per producer, markers included, I72).

use super::txn::TxnTracker;
use super::AppendKind;
use crate::producer::{
    Admission, BatchMetadata, Decision, GroupAdmission, ProducerBatch, ProducerError,
    ProducerStateTable,
};
use crate::txn_index::AbortedTxn;
use crate::types::Offset;

/// What the rules say about one queued batch for the group being gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It must start the next group: leave it queued.
    WaitForNextGroup,
    /// Refused: answer with the error, write nothing.
    Refuse(ProducerError),
    /// A duplicate of an idempotent producer's earlier batch: answer with its offsets.
    Duplicate(BatchMetadata),
    /// It may join the group; [`join`] it once it does and [`record`] it once published.
    Admit(Decision),
}

/// Decides the batch `batch` written by `kind` (queued at `now_ms`) for `group`, against the
/// state before the group. Changes nothing.
/// - [`AppendKind::Produced`]: the producer rules ([`GroupAdmission::admit`]), then the
///   transaction rules ([`TxnTracker::check_data`]: INVALID_TXN_STATE, zombie epochs, I72).
/// - [`AppendKind::Coordinator`]: no producer rule (I74).
/// - [`AppendKind::Marker`]: one per producer per group like its batches, then
///   [`TxnTracker::check_marker`] against the producer table's epoch (a marker carries no
///   sequence).
pub fn admit(
    group: &GroupAdmission,
    kind: &AppendKind,
    batch: &ProducerBatch,
    producers: &ProducerStateTable,
    txns: &TxnTracker,
    now_ms: i64,
) -> Verdict {
    match kind {
        AppendKind::Marker(marker) => {
            if group.must_wait(batch) {
                return Verdict::WaitForNextGroup;
            }
            let table_epoch = producers.get(marker.producer_id).map(|e| e.epoch);
            match txns.check_marker(table_epoch, marker) {
                Ok(()) => Verdict::Admit(Decision::NotIdempotent),
                Err(e) => Verdict::Refuse(e),
            }
        }
        AppendKind::Coordinator => Verdict::Admit(Decision::NotIdempotent),
        AppendKind::Produced => match group.admit(producers, batch, now_ms) {
            Admission::WaitForNextGroup => Verdict::WaitForNextGroup,
            Admission::Duplicate(original) => Verdict::Duplicate(original),
            Admission::Refuse(e) => Verdict::Refuse(e),
            // The transaction rules read only this producer's transaction, which no other
            // member of the group changes (one member per producer).
            Admission::Admit(decision) => match txns.check_data(batch) {
                Ok(()) => Verdict::Admit(decision),
                Err(e) => Verdict::Refuse(e),
            },
        },
    }
}

/// Records that `batch`, admitted, joined `group` (a coordinator's batches take no part in
/// the one-per-producer rule, as they pass no producer rule).
pub fn join(
    group: &mut GroupAdmission,
    kind: &AppendKind,
    batch: &ProducerBatch,
    producers: &ProducerStateTable,
) {
    if *kind != AppendKind::Coordinator {
        group.join(producers, batch);
    }
}

/// One published member of a group, as [`record`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Published<'a> {
    /// Who wrote it.
    pub kind: &'a AppendKind,
    /// Its producer fields.
    pub batch: &'a ProducerBatch,
    /// What [`admit`] decided.
    pub decision: Decision,
    /// Its offsets.
    pub base_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// Its max timestamp (as stamped).
    pub max_timestamp_ms: i64,
    /// When it was queued.
    pub now_ms: i64,
}

/// Records a published member, called for each member in offset order in the step that
/// publishes the group (I67): a transactional batch starts its producer's transaction, a
/// marker ends it, and an idempotent batch updates its producer. Returns the aborted range an
/// ABORT of an ongoing transaction recorded (I68), for the segment's `.txnindex`.
pub fn record(
    member: Published<'_>,
    producers: &mut ProducerStateTable,
    txns: &mut TxnTracker,
) -> Option<AbortedTxn> {
    let aborted = match member.kind {
        AppendKind::Marker(marker) => txns.on_marker(marker, member.base_offset),
        AppendKind::Produced | AppendKind::Coordinator => {
            txns.on_data(member.batch, member.base_offset);
            None
        }
    };
    if member.decision == Decision::Append {
        producers.on_appended(
            member.batch,
            member.base_offset,
            member.last_offset,
            member.max_timestamp_ms,
            member.now_ms,
        );
    }
    aborted
}
