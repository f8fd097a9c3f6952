//! The transactional producer's bookkeeping (KIP-98, with KIP-360's epoch bump after an abort
//! that followed a failed batch): which state the producer is in, its producer id and epoch,
//! the partitions and groups of the open transaction, each partition's next sequence number, and
//! which broker errors are fatal.
//!
//! Contract:
//! - Pure: no I/O, no clock. The [`ProducerDriver`](super::ProducerDriver) sends the requests
//!   and feeds their outcomes in; this module decides what they mean.
//! - States: `Uninitialized` → (InitProducerId) `Ready` → (begin) `InTransaction` → (EndTxn)
//!   `Ready`. A failed batch or transactional request moves `InTransaction` to `Abortable`
//!   (only `abort_transaction` leaves it) or, for a fatal error, to `Fatal` (nothing leaves it:
//!   the producer must be dropped).
//! - Fatal errors: PRODUCER_FENCED and INVALID_PRODUCER_EPOCH (another producer with the same
//!   `transactional.id` took over), INVALID_TXN_STATE (kfake's answer to a fenced producer's
//!   Produce, and the coordinator's to a request its state machine refuses), and
//!   TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Every other broker error is abortable.
//! - Sequences: every batch of a transactional (hence idempotent) producer carries its producer
//!   id, epoch and the partition's next sequence; a new epoch starts every partition at 0.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

use super::sequences::Sequences;
use crate::error::Error;
pub use crate::group::admin::ConsumerGroupMetadata;

/// Where a transactional producer stands.
#[derive(Clone, Debug)]
pub enum TxnState {
    /// `init_transactions` has not succeeded yet.
    Uninitialized,
    /// Initialised, no transaction open.
    Ready,
    /// Between `begin_transaction` and its commit or abort.
    InTransaction,
    /// A batch or request of the open transaction failed; only an abort leaves this state.
    Abortable(Error),
    /// Fenced or refused for good; the producer is unusable.
    Fatal(Error),
}

/// True for broker error codes after which a transactional producer can do nothing but close.
pub fn is_fatal_code(code: i16) -> bool {
    [
        ResponseError::ProducerFenced,
        ResponseError::InvalidProducerEpoch,
        ResponseError::InvalidTxnState,
        ResponseError::TransactionalIdAuthorizationFailed,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// True for coordinator error codes a transactional request retries after a backoff (the
/// coordinator is loading, moved, or still completing the previous transaction).
pub fn is_retriable_coordinator_code(code: i16) -> bool {
    [
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// The error a caller sees for `err` in a transaction: fatal or abortable.
pub fn classify(err: Error) -> Error {
    match err {
        Error::Transaction { .. } | Error::IllegalState(_) => err,
        other => {
            let fatal = other.kafka_code().is_some_and(is_fatal_code);
            Error::Transaction {
                fatal,
                cause: Box::new(other),
            }
        }
    }
}

/// The transactional state of one producer.
#[derive(Debug)]
pub struct TxnManager {
    transactional_id: String,
    state: TxnState,
    producer_id: i64,
    producer_epoch: i16,
    /// Partitions the coordinator has added to the open transaction.
    partitions: BTreeSet<(String, i32)>,
    /// True once AddOffsetsToTxn succeeded in the open transaction.
    offsets_added: bool,
    /// A batch failed in the open transaction, so the broker's sequences may be ahead of ours:
    /// bump the epoch after the abort (KIP-360).
    needs_epoch_bump: bool,
    next_sequence: Sequences,
}

impl TxnManager {
    /// A manager for `transactional_id`, not initialised.
    pub fn new(transactional_id: String) -> Self {
        TxnManager {
            transactional_id,
            state: TxnState::Uninitialized,
            producer_id: -1,
            producer_epoch: -1,
            partitions: BTreeSet::new(),
            offsets_added: false,
            needs_epoch_bump: false,
            next_sequence: Sequences::default(),
        }
    }

    /// The `transactional.id`.
    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    /// The current state.
    pub fn state(&self) -> &TxnState {
        &self.state
    }

    /// Producer id and epoch (-1, -1 before initialisation).
    pub fn producer(&self) -> (i64, i16) {
        (self.producer_id, self.producer_epoch)
    }

    /// True when the abort that ends this transaction must be followed by an epoch bump.
    pub fn needs_epoch_bump(&self) -> bool {
        self.needs_epoch_bump
    }

    /// InitProducerId answered: a (possibly bumped) id and epoch; sequences restart at 0.
    pub fn on_initialized(&mut self, producer_id: i64, producer_epoch: i16) {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.next_sequence.clear();
        self.needs_epoch_bump = false;
        if !matches!(self.state, TxnState::Fatal(_)) {
            self.state = TxnState::Ready;
        }
    }

    /// The error to answer a caller with when the producer is fenced or failed.
    fn blocked(&self) -> Option<Error> {
        match &self.state {
            TxnState::Fatal(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// May `init_transactions` run now?
    pub fn check_init(&self) -> Result<(), Error> {
        match &self.state {
            TxnState::Uninitialized => Ok(()),
            TxnState::Fatal(e) => Err(e.clone()),
            _ => Err(Error::IllegalState(
                "init_transactions was already called".into(),
            )),
        }
    }

    /// `begin_transaction`.
    pub fn begin(&mut self) -> Result<(), Error> {
        if let Some(e) = self.blocked() {
            return Err(e);
        }
        match &self.state {
            TxnState::Ready => {
                self.state = TxnState::InTransaction;
                self.partitions.clear();
                self.offsets_added = false;
                Ok(())
            }
            TxnState::Uninitialized => Err(Error::IllegalState(
                "call init_transactions before begin_transaction".into(),
            )),
            TxnState::InTransaction => {
                Err(Error::IllegalState("a transaction is already open".into()))
            }
            TxnState::Abortable(e) => Err(e.clone()),
            TxnState::Fatal(e) => Err(e.clone()),
        }
    }

    /// May a record be sent, or offsets added, now? Only inside an open, healthy transaction.
    pub fn check_in_transaction(&self) -> Result<(), Error> {
        match &self.state {
            TxnState::InTransaction => Ok(()),
            TxnState::Abortable(e) | TxnState::Fatal(e) => Err(e.clone()),
            _ => Err(Error::IllegalState(
                "a transactional producer sends only inside a transaction (begin_transaction)"
                    .into(),
            )),
        }
    }

    /// May the open transaction be committed? An abortable error must be aborted instead.
    pub fn check_commit(&self) -> Result<(), Error> {
        self.check_in_transaction()
    }

    /// May the open transaction be aborted? Yes unless fatal or none is open.
    pub fn check_abort(&self) -> Result<(), Error> {
        match &self.state {
            TxnState::InTransaction | TxnState::Abortable(_) => Ok(()),
            TxnState::Fatal(e) => Err(e.clone()),
            _ => Err(Error::IllegalState("no transaction is open".into())),
        }
    }

    /// True when `topic`/`partition` is already part of the open transaction.
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.partitions.contains(&(topic.to_string(), partition))
    }

    /// AddPartitionsToTxn accepted these partitions.
    pub fn on_partitions_added(&mut self, added: impl IntoIterator<Item = (String, i32)>) {
        self.partitions.extend(added);
    }

    /// AddOffsetsToTxn accepted the group.
    pub fn on_offsets_added(&mut self) {
        self.offsets_added = true;
    }

    /// True when the coordinator knows of this transaction (so EndTxn must be sent).
    pub fn has_started(&self) -> bool {
        !self.partitions.is_empty() || self.offsets_added
    }

    /// EndTxn succeeded (or there was nothing to end): no transaction is open.
    pub fn on_completed(&mut self) {
        self.partitions.clear();
        self.offsets_added = false;
        if !matches!(self.state, TxnState::Fatal(_)) {
            self.state = TxnState::Ready;
        }
    }

    /// A batch or request of the open transaction failed with `err`; returns the error as the
    /// caller should see it (fatal or abortable).
    pub fn on_error(&mut self, err: Error) -> Error {
        let err = classify(err);
        let fatal = matches!(err, Error::Transaction { fatal: true, .. });
        if fatal {
            self.state = TxnState::Fatal(err.clone());
        } else if matches!(self.state, TxnState::InTransaction) {
            self.state = TxnState::Abortable(err.clone());
        }
        err
    }

    /// A produced batch failed: its sequences may be lost, so the epoch is bumped after abort.
    pub fn on_batch_failed(&mut self, err: Error) -> Error {
        self.needs_epoch_bump = true;
        self.on_error(err)
    }

    /// Takes the next `count` sequence numbers of `topic`/`partition`, returning the first.
    pub fn take_sequence(&mut self, topic: &str, partition: i32, count: i32) -> i32 {
        self.next_sequence.take(topic, partition, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kafka(code: i16) -> Error {
        Error::check(code, || "test".into()).expect_err("an error code")
    }

    #[test]
    fn a_transaction_goes_ready_open_ready() {
        let mut m = TxnManager::new("t".into());
        assert!(m.begin().is_err(), "begin before init");
        assert!(m.check_in_transaction().is_err());
        m.check_init().expect("init allowed");
        m.on_initialized(7, 0);
        assert_eq!(m.producer(), (7, 0));
        m.begin().expect("begin");
        assert!(m.begin().is_err(), "nested begin");
        m.check_in_transaction().expect("open");
        assert!(!m.has_started());
        m.on_partitions_added([("a".to_string(), 0)]);
        assert!(m.has_partition("a", 0) && !m.has_partition("a", 1));
        assert!(m.has_started());
        m.check_commit().expect("commit allowed");
        m.on_completed();
        assert!(matches!(m.state(), TxnState::Ready));
        assert!(!m.has_partition("a", 0));
        assert!(m.check_abort().is_err(), "nothing to abort");
    }

    #[test]
    fn fenced_is_fatal_and_everything_else_abortable() {
        for code in [47, 48, 53, 90] {
            let mut m = TxnManager::new("t".into());
            m.on_initialized(1, 0);
            m.begin().expect("begin");
            let err = m.on_error(kafka(code));
            assert!(
                matches!(err, Error::Transaction { fatal: true, .. }),
                "{code}"
            );
            assert!(m.check_abort().is_err() && m.begin().is_err() && m.check_commit().is_err());
        }
        let mut m = TxnManager::new("t".into());
        m.on_initialized(1, 0);
        m.begin().expect("begin");
        let err = m.on_batch_failed(kafka(ResponseError::NotEnoughReplicas.code()));
        assert!(matches!(err, Error::Transaction { fatal: false, .. }));
        assert!(
            m.check_commit().is_err(),
            "an abortable error forbids commit"
        );
        m.check_abort().expect("abort allowed");
        assert!(m.needs_epoch_bump());
        m.on_completed();
        m.on_initialized(1, 1);
        assert!(!m.needs_epoch_bump());
        m.begin().expect("begin after abort");
    }

    #[test]
    fn sequences_count_per_partition_and_restart_with_a_new_epoch() {
        let mut m = TxnManager::new("t".into());
        m.on_initialized(1, 0);
        assert_eq!(m.take_sequence("a", 0, 3), 0);
        assert_eq!(m.take_sequence("a", 0, 2), 3);
        assert_eq!(m.take_sequence("a", 1, 1), 0);
        m.on_initialized(1, 1);
        assert_eq!(m.take_sequence("a", 0, 1), 0);
    }

    #[test]
    fn retriable_coordinator_codes() {
        for code in [14, 15, 16, 51] {
            assert!(is_retriable_coordinator_code(code), "{code}");
        }
        assert!(!is_retriable_coordinator_code(90));
        assert!(!is_fatal_code(51));
    }
}
