//! The classic group's states and the table of what each event does in each state.
//!
//! [`transition`] is the whole table, written as one `match` over `(State, Event)` with no
//! wildcard, so the compiler rejects a missing pair and the test in this module enumerates
//! [`State::ALL`] × [`Event::ALL`]. The classic group changes state only through it.
//!
//! Outcomes: [`Outcome::Goto`] a state (possibly the same), [`Outcome::Reject`] with the
//! Kafka error code the request gets, or [`Outcome::Impossible`] for internal events that
//! cannot arise in that state (the group asserts it never fires them; the property tests run
//! with debug assertions).

use super::codes::ErrorCode;

/// A classic group's state, as Kafka names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// No members (possibly committed offsets).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Joins done; waiting for the leader's assignment.
    CompletingRebalance,
    /// Assignment handed out; members heartbeat.
    Stable,
    /// Being deleted (its tombstones are in flight); gone once they are durable.
    Dead,
}

impl State {
    /// Every state, for exhaustive tests.
    pub const ALL: [State; 5] = [
        State::Empty,
        State::PreparingRebalance,
        State::CompletingRebalance,
        State::Stable,
        State::Dead,
    ];

    /// The name ListGroups and DescribeGroups use.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
            State::Dead => "Dead",
        }
    }
}

/// What happens to a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A member joins or rejoins in a way that needs a rebalance (new member, changed
    /// protocols, or the leader rejoining a stable group).
    JoinNeedsRebalance,
    /// A known member rejoins with unchanged protocols (answered with the current
    /// generation where one is complete).
    JoinUnchanged,
    /// The join phase ended (everyone rejoined, or the rebalance timeout passed) with members.
    JoinPhaseCompleted,
    /// The join phase ended with no member left.
    JoinPhaseEmpty,
    /// A SyncGroup arrives from a member of the current generation.
    Sync,
    /// The leader's assignment is durable.
    AssignmentDurable,
    /// The leader's assignment could not be made durable.
    AssignmentFailed,
    /// Some members did not sync within the rebalance timeout.
    SyncTimeout,
    /// A Heartbeat from a member of the current generation.
    Heartbeat,
    /// A member leaves, or its session expires.
    MemberRemoved,
    /// An OffsetCommit by a member of the current generation (or a simple commit).
    OffsetCommit,
    /// DeleteGroups.
    Delete,
    /// An empty group's last offsets expired: it is removed like a deletion.
    Expire,
    /// The tombstones of a deletion or expiry could not be made durable.
    DeleteFailed,
}

impl Event {
    /// Every event, for exhaustive tests.
    pub const ALL: [Event; 14] = [
        Event::JoinNeedsRebalance,
        Event::JoinUnchanged,
        Event::JoinPhaseCompleted,
        Event::JoinPhaseEmpty,
        Event::Sync,
        Event::AssignmentDurable,
        Event::AssignmentFailed,
        Event::SyncTimeout,
        Event::Heartbeat,
        Event::MemberRemoved,
        Event::OffsetCommit,
        Event::Delete,
        Event::Expire,
        Event::DeleteFailed,
    ];
}

/// What an event does in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted; the group is now in this state.
    Goto(State),
    /// Refused with this error code; the state is unchanged.
    Reject(ErrorCode),
    /// Cannot happen in this state (the group never raises it there).
    Impossible,
}

/// The state table.
pub fn transition(state: State, event: Event) -> Outcome {
    use Event as E;
    use Outcome::{Goto, Impossible, Reject};
    use State as S;
    match (state, event) {
        // A join starts (or continues) a rebalance; the dead group answers "retry".
        (S::Empty, E::JoinNeedsRebalance)
        | (S::PreparingRebalance, E::JoinNeedsRebalance)
        | (S::CompletingRebalance, E::JoinNeedsRebalance)
        | (S::Stable, E::JoinNeedsRebalance) => Goto(S::PreparingRebalance),
        (S::Dead, E::JoinNeedsRebalance) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // An unchanged rejoin: waits in PreparingRebalance, is answered with the current
        // generation in CompletingRebalance/Stable. Empty has no members to rejoin.
        (S::Empty, E::JoinUnchanged) => Reject(ErrorCode::UNKNOWN_MEMBER_ID),
        (S::PreparingRebalance, E::JoinUnchanged) => Goto(S::PreparingRebalance),
        (S::CompletingRebalance, E::JoinUnchanged) => Goto(S::CompletingRebalance),
        (S::Stable, E::JoinUnchanged) => Goto(S::Stable),
        (S::Dead, E::JoinUnchanged) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // The join phase ends only while preparing.
        (S::PreparingRebalance, E::JoinPhaseCompleted) => Goto(S::CompletingRebalance),
        (S::PreparingRebalance, E::JoinPhaseEmpty) => Goto(S::Empty),
        (S::Empty | S::CompletingRebalance | S::Stable | S::Dead, E::JoinPhaseCompleted)
        | (S::Empty | S::CompletingRebalance | S::Stable | S::Dead, E::JoinPhaseEmpty) => {
            Impossible
        }

        // SyncGroup: a barrier in CompletingRebalance, the current assignment when Stable.
        (S::Empty, E::Sync) => Reject(ErrorCode::UNKNOWN_MEMBER_ID),
        (S::PreparingRebalance, E::Sync) => Reject(ErrorCode::REBALANCE_IN_PROGRESS),
        (S::CompletingRebalance, E::Sync) => Goto(S::CompletingRebalance),
        (S::Stable, E::Sync) => Goto(S::Stable),
        (S::Dead, E::Sync) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // The stored assignment completes the rebalance; if the group moved on meanwhile
        // (a member left, a new join) the result is stale and ignored.
        (S::CompletingRebalance, E::AssignmentDurable) => Goto(S::Stable),
        (S::PreparingRebalance, E::AssignmentDurable) => Goto(S::PreparingRebalance),
        (S::Empty, E::AssignmentDurable) => Goto(S::Empty),
        (S::Dead, E::AssignmentDurable) => Goto(S::Dead),
        (S::Stable, E::AssignmentDurable) => Impossible,
        // A failed store: everyone rejoins (Kafka does the same).
        (S::CompletingRebalance, E::AssignmentFailed) => Goto(S::PreparingRebalance),
        (S::PreparingRebalance, E::AssignmentFailed) => Goto(S::PreparingRebalance),
        (S::Empty, E::AssignmentFailed) => Goto(S::Empty),
        (S::Dead, E::AssignmentFailed) => Goto(S::Dead),
        (S::Stable, E::AssignmentFailed) => Impossible,

        (S::CompletingRebalance, E::SyncTimeout) => Goto(S::PreparingRebalance),
        (S::Empty | S::PreparingRebalance | S::Stable | S::Dead, E::SyncTimeout) => Impossible,

        // Heartbeat: tells members to rejoin while preparing.
        (S::Empty, E::Heartbeat) => Reject(ErrorCode::UNKNOWN_MEMBER_ID),
        (S::PreparingRebalance, E::Heartbeat) => Reject(ErrorCode::REBALANCE_IN_PROGRESS),
        (S::CompletingRebalance, E::Heartbeat) => Goto(S::CompletingRebalance),
        (S::Stable, E::Heartbeat) => Goto(S::Stable),
        (S::Dead, E::Heartbeat) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // Losing a member always rebalances the rest (the join phase then ends at once if
        // nobody else is awaited, possibly in Empty).
        (S::PreparingRebalance | S::CompletingRebalance | S::Stable, E::MemberRemoved) => {
            Goto(S::PreparingRebalance)
        }
        (S::Empty, E::MemberRemoved) => Reject(ErrorCode::UNKNOWN_MEMBER_ID),
        (S::Dead, E::MemberRemoved) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // Commits: allowed while preparing (eager clients commit as they revoke), refused
        // while the new assignment is not out yet.
        (S::Empty, E::OffsetCommit) => Goto(S::Empty),
        (S::PreparingRebalance, E::OffsetCommit) => Goto(S::PreparingRebalance),
        (S::CompletingRebalance, E::OffsetCommit) => Reject(ErrorCode::REBALANCE_IN_PROGRESS),
        (S::Stable, E::OffsetCommit) => Goto(S::Stable),
        (S::Dead, E::OffsetCommit) => Reject(ErrorCode::COORDINATOR_NOT_AVAILABLE),

        // Deletion only of empty groups.
        (S::Empty, E::Delete) => Goto(S::Dead),
        (S::PreparingRebalance | S::CompletingRebalance | S::Stable, E::Delete) => {
            Reject(ErrorCode::NON_EMPTY_GROUP)
        }
        (S::Dead, E::Delete) => Reject(ErrorCode::GROUP_ID_NOT_FOUND),
        // Expiry never touches a group with members.
        (S::Empty, E::Expire) => Goto(S::Dead),
        (S::PreparingRebalance | S::CompletingRebalance | S::Stable | S::Dead, E::Expire) => {
            Impossible
        }
        (S::Dead, E::DeleteFailed) => Goto(S::Empty),
        (
            S::Empty | S::PreparingRebalance | S::CompletingRebalance | S::Stable,
            E::DeleteFailed,
        ) => Impossible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state × event pair has a defined outcome, and the ones a request can cause in a
    /// live group either succeed or carry a real error code.
    #[test]
    fn every_state_and_event_has_an_outcome() {
        let mut defined = 0;
        for s in State::ALL {
            for e in Event::ALL {
                match transition(s, e) {
                    Outcome::Goto(_) => defined += 1,
                    Outcome::Reject(code) => {
                        assert!(code.is_error(), "{s:?} × {e:?} rejects with NONE");
                        defined += 1;
                    }
                    Outcome::Impossible => {
                        // Only internal events may be impossible, never a request.
                        assert!(
                            !matches!(
                                e,
                                Event::JoinNeedsRebalance
                                    | Event::JoinUnchanged
                                    | Event::Sync
                                    | Event::Heartbeat
                                    | Event::MemberRemoved
                                    | Event::OffsetCommit
                                    | Event::Delete
                            ),
                            "a request cannot be impossible: {s:?} × {e:?}"
                        );
                    }
                }
            }
        }
        assert!(defined >= 40, "only {defined} defined pairs");
    }

    /// The whole table, written out independently: a change to either side fails here.
    /// Columns follow [`Event::ALL`]; `P C S E D` = go to PreparingRebalance,
    /// CompletingRebalance, Stable, Empty, Dead; a number = rejected with that error code;
    /// `!` = impossible.
    #[test]
    fn the_table_is_exactly_this() {
        const EXPECTED: [(State, [&str; 14]); 5] = [
            (
                State::Empty,
                [
                    "P", "25", "!", "!", "25", "E", "E", "!", "25", "25", "E", "D", "D", "!",
                ],
            ),
            (
                State::PreparingRebalance,
                [
                    "P", "P", "C", "E", "27", "P", "P", "!", "27", "P", "P", "68", "!", "!",
                ],
            ),
            (
                State::CompletingRebalance,
                [
                    "P", "C", "!", "!", "C", "S", "P", "P", "C", "P", "27", "68", "!", "!",
                ],
            ),
            (
                State::Stable,
                [
                    "P", "S", "!", "!", "S", "!", "!", "!", "S", "P", "S", "68", "!", "!",
                ],
            ),
            (
                State::Dead,
                [
                    "15", "15", "!", "!", "15", "D", "D", "!", "15", "15", "15", "69", "!", "E",
                ],
            ),
        ];
        let letter = |s: State| match s {
            State::Empty => "E",
            State::PreparingRebalance => "P",
            State::CompletingRebalance => "C",
            State::Stable => "S",
            State::Dead => "D",
        };
        for (state, row) in EXPECTED {
            for (event, want) in Event::ALL.iter().zip(row) {
                let got = match transition(state, *event) {
                    Outcome::Goto(s) => letter(s).to_owned(),
                    Outcome::Reject(code) => code.0.to_string(),
                    Outcome::Impossible => "!".to_owned(),
                };
                assert_eq!(got, want, "{state:?} × {event:?}");
            }
        }
    }

    #[test]
    fn dead_rejects_every_request() {
        for e in [
            Event::JoinNeedsRebalance,
            Event::JoinUnchanged,
            Event::Sync,
            Event::Heartbeat,
            Event::MemberRemoved,
            Event::OffsetCommit,
            Event::Delete,
        ] {
            assert!(
                matches!(transition(State::Dead, e), Outcome::Reject(_)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn only_empty_groups_are_deleted_or_expired() {
        for s in State::ALL {
            let deletes = matches!(transition(s, Event::Delete), Outcome::Goto(State::Dead));
            let expires = matches!(transition(s, Event::Expire), Outcome::Goto(State::Dead));
            assert_eq!(deletes, s == State::Empty, "{s:?}");
            assert_eq!(expires, s == State::Empty, "{s:?}");
        }
    }
}
