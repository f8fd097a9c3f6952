//! The transactional workload in `cargo test` (DESIGN.md § Deterministic simulation,
//! RELIABILITY.md § Deterministic simulation soak): transactional producers committing,
//! aborting, timing out and crashing the broker partway through a commit, against the checks
//! of `txn_model` — (a) an acknowledged commit is committed in every partition after any
//! crash, (b) an open transaction never becomes visible and is aborted on re-init or timeout,
//! (c) read_committed never sees an aborted record nor part of a transaction, LSO ≤ HW.
//! A range of seeds must pass, a seed must replay exactly, and both deliberately broken
//! brokers (`core::mutants`) must be caught within a bounded number of seeds.
//! `MK_SIM_TXN_SEEDS` sets how many seeds `txn_seeds_pass` runs (default 8; soak with
//! `mk-sim --incarnations 3 --txn-producers 2 --seeds N`, which runs these very options, so
//! a failing seed here replays there with `--seed N`).
//!
//! Fixed (found by this workload): a crash after a PrepareCommit record was durable and
//! before its markers were written left the commit half done. At the next start each shard
//! loads its transaction coordinators as soon as its own partitions are open, and re-writes
//! the markers of prepared transactions; a marker for a partition the other shard had not
//! opened yet got UNKNOWN_TOPIC_OR_PARTITION, which the marker writer took for a deleted
//! partition and counted as written. The coordinator then wrote CompleteCommit; that
//! partition never got its COMMIT marker, so its records stayed in an open transaction of
//! the producer until the producer's next marker closed them with that transaction's outcome
//! (an abort, in seed 18: committed in `txns` 0, aborted in `txns` 1). Such a marker is now
//! retried (`broker/src/server/txns/markers.rs`); `regression_marker_to_a_partition_not_yet_open`.

use minikafka_sim::{run_seed, Mutant, SeedReport, SimOptions};

/// The per-seed workload (`mk-sim --incarnations 3 --txn-producers 2`): three incarnations,
/// the usual plain producers and group members, two transactional producers and a
/// read_committed reader.
fn txn_options() -> SimOptions {
    SimOptions {
        incarnations: 3,
        txn_producers: 2,
        ..SimOptions::default()
    }
}

fn total_seeds() -> u64 {
    std::env::var("MK_SIM_TXN_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8)
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
    let caught = (0..bound).find_map(|seed| run_seed(seed, &broken).err().map(|e| (seed, e)));
    assert!(
        caught.is_some(),
        "{mutant:?} went unnoticed for {bound} seeds"
    );
    if let Some((seed, e)) = caught {
        eprintln!("{mutant:?} caught by seed {seed}: {e}");
    }
}

/// Caught first by seed 33 (a commit crashed into after its COMMIT marker reached one
/// partition and before the PrepareCommit record was durable: the restart aborted the
/// transaction, so it is committed in one partition and aborted in another). Until the
/// recovery scan's windows started at a page and the active segment's cut joined the
/// recovered-tail sync (I190), which moved every seed's schedule, seeds 7, 15, 20 and 28
/// caught it.
#[test]
fn markers_before_prepare_durable_is_caught() {
    assert_caught_within(Mutant::MarkersBeforePrepareDurable, 40);
}

/// Caught by seed 0 (a read_committed fetch returns records of a transaction whose producer
/// has not even sent EndTxn).
#[test]
fn lso_ignoring_an_ongoing_transaction_is_caught() {
    assert_caught_within(Mutant::LsoIgnoresOngoing, 4);
}

/// See the top of this file: seed 18 lost a COMMIT marker to a partition not yet open.
#[test]
fn regression_marker_to_a_partition_not_yet_open() {
    run_seed(18, &txn_options()).expect("regression seed");
}

/// Seed 800881: a `.txnindex` append of an ABORT marker failed (an injected EIO; the range
/// producer 1, 86–89 of `txns` 0), the close was clean and the clean open trusted the file, so
/// read_committed showed that aborted transaction after the restart. A failed append (or
/// checkpoint) now makes the close unclean, so the next open replays the log (I70).
#[test]
fn regression_aborted_range_lost_with_a_failed_txnindex_append() {
    run_seed(800881, &txn_options()).expect("seed 800881");
}
