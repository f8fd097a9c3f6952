//! Deliberately broken variants of the transaction logic, for the simulator to prove that its
//! model check catches them (`minikafka-sim`, `sim/tests/txn_seeds.rs`).
//!
//! Compiled only with the `sim-mutants` feature, which only `minikafka-sim` turns on: a broker
//! built on its own (`cargo build -p minikafka-broker`, the release binary) has none of this.
//! Even where a workspace build unifies the feature in, every mutant is off until a caller on
//! the same thread switches it on: the switch is thread-local because the simulator runs one
//! seed, every shard included, on one thread, and `cargo test` runs seeds on several threads
//! at once.

use std::cell::Cell;

/// One deliberately broken variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// The coordinator emits a transaction's COMMIT markers as soon as it appends the
    /// PrepareCommit record, before that record is durable (breaks I31).
    MarkersBeforePrepareDurable,
    /// A partition's last stable offset is its high watermark, ignoring ongoing
    /// transactions (breaks I67/I69).
    LsoIgnoresOngoing,
}

thread_local! {
    static ACTIVE: Cell<Option<Mutant>> = const { Cell::new(None) };
}

/// Switches `mutant` on for this thread (`None`: the correct logic).
pub fn set(mutant: Option<Mutant>) {
    ACTIVE.with(|a| a.set(mutant));
}

/// Whether `mutant` is on for this thread.
pub fn active(mutant: Mutant) -> bool {
    ACTIVE.with(|a| a.get() == Some(mutant))
}
