//! Transaction states and the decision table: what each request or event does in each state.
//!
//! [`TxnState`] has Kafka's eight states, its ids (the `TransactionStatus` byte of a
//! `__transaction_state` value) and its table of valid previous states
//! ([`TxnState::valid_previous`]). [`decide`] is the state-dependent half of every input: the
//! coordinator first checks what does not depend on the state (the transactional id is known,
//! the producer id and epoch match, no transition is in flight, I33), then asks [`decide`]
//! what the state allows. Every `(state, event)` pair has exactly one [`Outcome`]; a unit test
//! enumerates all of them against a written-out copy of the table, and checks that every
//! transition it allows is one the valid-previous table allows (I30).
//!
//! Dead and PrepareEpochFence are never the stored state of a transactional id here: Dead is
//! the target of an expiry whose tombstone is in flight, PrepareEpochFence the first half of
//! a fence (the record written is PrepareAbort with the bumped epoch, as in Kafka). Their rows
//! answer CONCURRENT_TRANSACTIONS (a transition is under way), so they are total.

use crate::error_code::ErrorCode;

/// A transaction's state, with Kafka's ids (`TransactionState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction is open (after InitProducerId).
    Empty,
    /// Partitions (or a group's offsets) were added: a transaction is open.
    Ongoing,
    /// EndTxn(commit) is durable; COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a fence or a timeout is durable; ABORT markers are being written.
    PrepareAbort,
    /// Every COMMIT marker is written.
    CompleteCommit,
    /// Every ABORT marker is written.
    CompleteAbort,
    /// The transactional id expired; its tombstone is being written.
    Dead,
    /// The producer's epoch is being bumped to fence it before its transaction is aborted.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte Kafka writes for this state.
    pub const fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state with this id, if any.
    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub const fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state of this name (ListTransactions' state filter), if any.
    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's valid previous states (I30): a transition into `self` is legal only from these.
    /// (PrepareAbort from Empty and the Complete states is KIP-890's TV2 abort.)
    pub fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether `self → next` is a legal transition (I30).
    pub fn can_transition_to(self, next: TxnState) -> bool {
        next.valid_previous().contains(&self)
    }

    /// Whether a transactional id in this state may expire (`transactional.id.expiration.ms`).
    pub const fn expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// PrepareCommit or PrepareAbort: markers are owed.
    pub const fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// How a transaction ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnResult {
    /// Commit: COMMIT markers.
    Commit,
    /// Abort: ABORT markers.
    Abort,
}

/// EndTxn's protocol generation: v0–v4 keep the epoch (TV1); v5+ bump it on every
/// transaction (KIP-890 part 2, TV2), so a retry is recognised by its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndTxnVersion {
    /// EndTxn v0–v4.
    V1,
    /// EndTxn v5+; `retry` when the request's epoch is the one before the stored epoch (or
    /// the last epoch of the previous producer id, after a rotation).
    V2 {
        /// The request repeats an EndTxn that already bumped the epoch.
        retry: bool,
    },
}

/// The state-dependent part of an input (its id and epoch checks have passed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// InitProducerId for an existing transactional id.
    InitProducerId,
    /// AddPartitionsToTxn or AddOffsetsToTxn; `new_partitions` when some partition is not
    /// yet in the transaction.
    AddPartitions {
        /// Some partition is not in the transaction yet.
        new_partitions: bool,
    },
    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890 part 1).
    VerifyPartitions,
    /// EndTxn.
    EndTxn {
        /// Commit or abort.
        result: TxnResult,
        /// The request's generation.
        version: EndTxnVersion,
    },
    /// The transaction ran past its timeout (the coordinator aborts it).
    TimedOut,
    /// `transactional.id.expiration.ms` passed since the last update.
    Expire,
    /// Every marker of the prepared transaction is written.
    MarkersWritten,
}

/// What an event does in a state: exactly one per pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Answer at once with this code (NONE for a retry that already succeeded); no record.
    Reply(ErrorCode),
    /// Write a record moving the transaction to this state; answer once it is durable.
    Transition(TxnState),
    /// Bump the epoch (PrepareEpochFence) and write PrepareAbort: fences the producer and
    /// aborts its open transaction.
    FenceAndAbort,
    /// Answer each partition: NONE if it is in the transaction, else TRANSACTION_ABORTABLE.
    Verify,
    /// Nothing to do (a timer or completion that no longer applies).
    Ignore,
}

/// The decision table (I30). See the module docs.
pub fn decide(state: TxnState, event: Event) -> Outcome {
    use EndTxnVersion::{V1, V2};
    use Outcome::*;
    use TxnResult::{Abort, Commit};
    use TxnState::*;
    const BUSY: Outcome = Reply(ErrorCode::CONCURRENT_TRANSACTIONS);
    const BAD_STATE: Outcome = Reply(ErrorCode::INVALID_TXN_STATE);
    const OK: Outcome = Reply(ErrorCode::NONE);
    // A transition is under way in these states: requests retry.
    if matches!(state, Dead | PrepareEpochFence) {
        return match event {
            Event::TimedOut | Event::Expire | Event::MarkersWritten => Ignore,
            _ => BUSY,
        };
    }
    match event {
        Event::InitProducerId => match state {
            Empty | CompleteCommit | CompleteAbort => Transition(Empty),
            Ongoing => FenceAndAbort,
            _ => BUSY,
        },
        Event::AddPartitions { new_partitions } => match state {
            Ongoing if !new_partitions => OK,
            Empty | Ongoing | CompleteCommit | CompleteAbort => Transition(Ongoing),
            _ => BUSY,
        },
        Event::VerifyPartitions => match state {
            PrepareCommit | PrepareAbort => BUSY,
            _ => Verify,
        },
        Event::EndTxn { result, version } => match (state, result, version) {
            (Ongoing, Commit, _) => Transition(PrepareCommit),
            (Ongoing, Abort, _) => Transition(PrepareAbort),
            (PrepareCommit, Commit, _) | (PrepareAbort, Abort, _) => BUSY,
            (PrepareCommit, Abort, _) | (PrepareAbort, Commit, _) => BAD_STATE,
            (CompleteCommit, Commit, V1) | (CompleteAbort, Abort, V1) => OK,
            (CompleteCommit, Abort, V1) | (CompleteAbort, Commit, V1) => BAD_STATE,
            (Empty, _, V1) => BAD_STATE,
            (CompleteCommit, Commit, V2 { retry: true }) => OK,
            (CompleteCommit, Commit, V2 { retry: false }) => BAD_STATE,
            (CompleteCommit, Abort, V2 { retry: true }) => BAD_STATE,
            (CompleteCommit, Abort, V2 { retry: false }) => Transition(PrepareAbort),
            (CompleteAbort, Abort, V2 { retry: true }) => OK,
            (CompleteAbort, Abort, V2 { retry: false }) => Transition(PrepareAbort),
            (CompleteAbort, Commit, V2 { .. }) => BAD_STATE,
            (Empty, Abort, V2 { .. }) => Transition(PrepareAbort),
            (Empty, Commit, V2 { .. }) => BAD_STATE,
            (Dead | PrepareEpochFence, _, _) => BUSY,
        },
        Event::TimedOut => match state {
            Ongoing => FenceAndAbort,
            _ => Ignore,
        },
        Event::Expire => match state {
            Empty | CompleteCommit | CompleteAbort => Transition(Dead),
            _ => Ignore,
        },
        Event::MarkersWritten => match state {
            PrepareCommit => Transition(CompleteCommit),
            PrepareAbort => Transition(CompleteAbort),
            _ => Ignore,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<Event> {
        let mut out = vec![
            Event::InitProducerId,
            Event::AddPartitions {
                new_partitions: true,
            },
            Event::AddPartitions {
                new_partitions: false,
            },
            Event::VerifyPartitions,
            Event::TimedOut,
            Event::Expire,
            Event::MarkersWritten,
        ];
        for result in [TxnResult::Commit, TxnResult::Abort] {
            for version in [
                EndTxnVersion::V1,
                EndTxnVersion::V2 { retry: false },
                EndTxnVersion::V2 { retry: true },
            ] {
                out.push(Event::EndTxn { result, version });
            }
        }
        out
    }

    /// The table written out a second time, by hand, one line per (state, event) pair with a
    /// non-default outcome; everything else is CONCURRENT_TRANSACTIONS for requests and
    /// Ignore for the coordinator's own events.
    fn expected(state: TxnState, event: Event) -> Outcome {
        use EndTxnVersion::*;
        use Event::*;
        use Outcome::*;
        use TxnResult::*;
        use TxnState::*;
        let e = ErrorCode::INVALID_TXN_STATE;
        let stable = [Empty, CompleteCommit, CompleteAbort];
        let live = [Empty, Ongoing, CompleteCommit, CompleteAbort];
        let v2 = |retry| V2 { retry };
        match (state, event) {
            (s, InitProducerId) if stable.contains(&s) => Transition(Empty),
            (Ongoing, InitProducerId) => FenceAndAbort,
            (
                Ongoing,
                AddPartitions {
                    new_partitions: false,
                },
            ) => Reply(ErrorCode::NONE),
            (s, AddPartitions { .. }) if live.contains(&s) => Transition(Ongoing),
            (s, VerifyPartitions) if live.contains(&s) => Verify,
            (Ongoing, EndTxn { result: Commit, .. }) => Transition(PrepareCommit),
            (Ongoing, EndTxn { result: Abort, .. }) => Transition(PrepareAbort),
            (PrepareCommit, EndTxn { result: Abort, .. }) => Reply(e),
            (PrepareAbort, EndTxn { result: Commit, .. }) => Reply(e),
            (
                Empty,
                EndTxn {
                    result: Abort,
                    version: V2 { .. },
                },
            ) => Transition(PrepareAbort),
            (Empty, EndTxn { .. }) => Reply(e),
            (
                CompleteCommit,
                EndTxn {
                    result: Commit,
                    version: V1,
                },
            ) => Reply(ErrorCode::NONE),
            (
                CompleteCommit,
                EndTxn {
                    result: Commit,
                    version,
                },
            ) if version == v2(true) => Reply(ErrorCode::NONE),
            (
                CompleteCommit,
                EndTxn {
                    result: Abort,
                    version,
                },
            ) if version == v2(false) => Transition(PrepareAbort),
            (CompleteCommit, EndTxn { .. }) => Reply(e),
            (
                CompleteAbort,
                EndTxn {
                    result: Abort,
                    version: V1,
                },
            ) => Reply(ErrorCode::NONE),
            (
                CompleteAbort,
                EndTxn {
                    result: Abort,
                    version,
                },
            ) if version == v2(true) => Reply(ErrorCode::NONE),
            (CompleteAbort, EndTxn { result: Abort, .. }) => Transition(PrepareAbort),
            (CompleteAbort, EndTxn { .. }) => Reply(e),
            (Ongoing, TimedOut) => FenceAndAbort,
            (s, Expire) if stable.contains(&s) => Transition(Dead),
            (PrepareCommit, MarkersWritten) => Transition(CompleteCommit),
            (PrepareAbort, MarkersWritten) => Transition(CompleteAbort),
            (_, TimedOut | Expire | MarkersWritten) => Ignore,
            _ => Reply(ErrorCode::CONCURRENT_TRANSACTIONS),
        }
    }

    /// I30: every (state, event) pair has exactly the outcome of the written-out table, and
    /// every transition the table allows is in Kafka's valid-previous table.
    #[test]
    fn every_state_and_event_has_its_documented_outcome() {
        let mut pairs = 0;
        for state in TxnState::ALL {
            for event in events() {
                let outcome = decide(state, event);
                assert_eq!(outcome, expected(state, event), "{state:?} × {event:?}");
                match outcome {
                    Outcome::Transition(next) => assert!(
                        state.can_transition_to(next),
                        "{state:?} → {next:?} is not a valid transition"
                    ),
                    Outcome::FenceAndAbort => {
                        assert!(state.can_transition_to(TxnState::PrepareEpochFence));
                        assert!(
                            TxnState::PrepareEpochFence.can_transition_to(TxnState::PrepareAbort)
                        );
                    }
                    _ => {}
                }
                pairs += 1;
            }
        }
        assert_eq!(pairs, 8 * 13);
    }

    #[test]
    fn ids_and_names_round_trip() {
        for (i, state) in TxnState::ALL.into_iter().enumerate() {
            assert_eq!(state.id(), i as i8);
            assert_eq!(TxnState::from_id(state.id()), Some(state));
            assert_eq!(TxnState::from_name(state.name()), Some(state));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::from_id(-1), None);
        assert_eq!(TxnState::from_name("ongoing"), None);
    }

    #[test]
    fn the_valid_previous_table_is_kafkas() {
        use TxnState::*;
        assert!(Ongoing.can_transition_to(PrepareCommit));
        assert!(!Empty.can_transition_to(PrepareCommit));
        assert!(PrepareEpochFence.can_transition_to(PrepareAbort));
        assert!(!PrepareCommit.can_transition_to(CompleteAbort));
        assert!(!Ongoing.can_transition_to(Dead));
        let count: usize = TxnState::ALL.iter().map(|s| s.valid_previous().len()).sum();
        assert_eq!(count, 3 + 4 + 1 + 5 + 1 + 1 + 3 + 1);
    }
}
