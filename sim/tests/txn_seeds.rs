//! The transactional workload in `cargo test` (DESIGN.md § Deterministic simulation,
//! RELIABILITY.md § Deterministic simulation soak): transactional producers committing,
//! aborting, timing out and crashing the broker partway through a commit, against the checks
//! of `txn_model` — (a) an acknowledged commit is committed in every partition after any
//! crash, (b) an open transaction never becomes visible and is aborted on re-init or timeout,
//! (c) read_committed never sees an aborted record nor part of a transaction, LSO ≤ HW.
//! A range of seeds must pass, a seed must replay exactly, and both deliberately broken
//! brokers (`core::mutants`) must be caught within a bounded number of seeds.
//! `MK_SIM_TXN_SEEDS` sets how many seeds `txn_seeds_pass` runs (default 24; soak with
//! `mk-sim --txn-producers 2 --seeds N`).

use minikafka_sim::{run_seed, Mutant, SeedReport, SimOptions};

/// The per-seed workload: three incarnations, one plain producer, two transactional ones, no
/// group members (they are `seeds.rs`'s).
fn txn_options() -> SimOptions {
    SimOptions {
        incarnations: 3,
        clients: 1,
        members: 0,
        txn_producers: 2,
        ..SimOptions::default()
    }
}

fn total_seeds() -> u64 {
    std::env::var("MK_SIM_TXN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

#[test]
fn txn_seeds_pass() {
    let mut total = SeedReport::default();
    let mut failures = Vec::new();
    for seed in 0..total_seeds() {
        match run_seed(seed, &txn_options()) {
            Ok(r) => {
                total.txn_commits += r.txn_commits;
                total.txn_aborts += r.txn_aborts;
                total.txn_timeouts += r.txn_timeouts;
                total.txn_checks += r.txn_checks;
                total.stats.crashes += r.stats.crashes;
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The workload did what it claims: commits, aborts and timeouts happened, crashes too,
    // and the whole-partition checks ran.
    assert!(total.txn_commits > 0, "no commit acknowledged: {total:?}");
    assert!(total.txn_aborts > 0, "no abort acknowledged: {total:?}");
    assert!(
        total.txn_timeouts > 0,
        "no transaction timed out: {total:?}"
    );
    assert!(
        total.txn_checks > 0,
        "no read_committed check ran: {total:?}"
    );
    assert!(total.stats.crashes > 0, "no crash: {total:?}");
}

#[test]
fn a_txn_seed_replays_exactly() {
    let a = run_seed(3, &txn_options()).expect("first run");
    let b = run_seed(3, &txn_options()).expect("second run");
    assert_eq!(
        (a.trace_hash, a.acks, a.txn_commits, a.stats, a.virtual_time),
        (b.trace_hash, b.acks, b.txn_commits, b.stats, b.virtual_time),
        "seed 3 did not replay"
    );
}

/// Runs seeds `0..bound` with `mutant`; at least one must fail.
fn assert_caught_within(mutant: Mutant, bound: u64) {
    let broken = SimOptions {
        mutant: Some(mutant),
        ..txn_options()
    };
    let caught = (0..bound).find_map(|seed| run_seed(seed, &broken).err());
    assert!(
        caught.is_some(),
        "{mutant:?} went unnoticed for {bound} seeds"
    );
    eprintln!("{mutant:?} caught: {}", caught.unwrap_or_default());
}

#[test]
fn markers_before_prepare_durable_is_caught() {
    assert_caught_within(Mutant::MarkersBeforePrepareDurable, 40);
}

#[test]
fn lso_ignoring_an_ongoing_transaction_is_caught() {
    assert_caught_within(Mutant::LsoIgnoresOngoing, 10);
}
