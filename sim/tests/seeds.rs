//! The simulation in `cargo test`: a range of seeds must pass, a seed must replay exactly
//! (same event-trace hash), and both deliberately broken disks (an fsync, or a directory
//! sync, that makes nothing durable) must be caught within a few seeds.
//! `MK_SIM_SEEDS` sets how many seeds the two `seeds_pass_*` tests run together (default
//! 300; soak with `mk-sim --seeds N`).
//!
//! Fixed: a scratch topic gone or back after a crash against its last acknowledged create or
//! delete was the simulator's model, not the broker: a create or delete in flight at a crash
//! may or may not have been applied, and the model kept the previous acknowledged outcome as
//! certain. Seeds 398 and 422 (this file's options) showed it on this build and pass now
//! (`regression_topic_change_in_flight_at_a_crash`). The earlier reports of the same symptom
//! (seed 260 here; `mk-sim --incarnations 3` seeds 200264, 200287, 200518, 200755) no longer
//! reproduce on this build (merges of main changed the schedules), so their cause is
//! presumed, not shown, to be the same.
//!
//! Fixed, with `mk-sim --incarnations 3` (three producing clients; `soak_options` here):
//! - 200014 (`logs` 0: offset 46 held the record acknowledged at 38) was the simulated disk,
//!   not the broker: an at-rest bit flip in a batch's base offset (38 and 46 differ in one
//!   bit), outside the batch CRC, which neither Kafka nor minikafka can detect (seed 185 of
//!   this file's options was the same, shown by its flipped segment). 200027 (`logs` 1: offset
//!   81 acknowledged for a record while an earlier read had shown an older one there, before
//!   the log reached 81) has the same signature and is presumed, not shown, to be the same
//!   flip (the build it failed on is gone; its build's trace was not kept). Flips now
//!   land in CRC-covered bytes only (backend-sim `crc_covered_byte`, and its test that every
//!   flip fails the batch check). Only the retained topic showed it: its reader accepts a jump
//!   forward (deleted segments), the other topics' density check fails first.
//! - 200192 (`orders` 2 read back whole after a restart, then empty after the next crash) was
//!   the broker: a sync failed (partition offline, nothing acknowledged), the broker stopped
//!   without a machine crash, and the next start recovered the unsynced record from the page
//!   cache and served it as durable without syncing it; a machine crash then took it. A start
//!   after an unclean stop now syncs the recovered active segment first (I8;
//!   `recovered_tail_crash.rs` tests it directly).
//!
//! These seeds no longer reproduce their failures on this build either way (later merges and
//! the bit-flip change moved every later random draw), so `regression_soak_seeds` is a rerun,
//! and the direct tests above are the proof.

use minikafka_sim::{run_seed, SimOptions};

/// The per-seed workload of `cargo test`: three broker incarnations (so two or three crashes
/// or restarts) and two producing clients. Many small seeds cover more schedules than a few
/// long ones.
fn light() -> SimOptions {
    SimOptions {
        incarnations: 3,
        clients: 2,
        ..SimOptions::default()
    }
}

fn total_seeds() -> u64 {
    std::env::var("MK_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300)
}

fn assert_seeds_pass(seeds: std::ops::Range<u64>) {
    let failures: Vec<String> = seeds
        .filter_map(|seed| run_seed(seed, &light()).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The first half of the seeds (two tests, so both cores of CI run seeds).
#[test]
fn seeds_pass_first_half() {
    assert_seeds_pass(0..total_seeds() / 2);
}

/// The second half of the seeds.
#[test]
fn seeds_pass_second_half() {
    assert_seeds_pass(total_seeds() / 2..total_seeds());
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [5, 6, 7] {
        let a = run_seed(seed, &light()).expect("first run");
        let b = run_seed(seed, &light()).expect("second run");
        assert_eq!(
            (a.trace_hash, a.acks, a.commits, a.stats, a.virtual_time),
            (b.trace_hash, b.acks, b.commits, b.stats, b.virtual_time),
            "seed {seed} did not replay"
        );
        assert!(a.acks > 0, "seed {seed} acknowledged nothing");
    }
    // Different seeds take different paths (the hash is not a constant).
    let (a, b) = (
        run_seed(5, &light()).expect("seed 5"),
        run_seed(6, &light()).expect("seed 6"),
    );
    assert_ne!(a.trace_hash, b.trace_hash);
}

/// Runs seeds `0..5` with `broken`; at least one must fail, and the same seeds must pass on
/// the honest disk (so it is the broken sync that was caught).
fn assert_caught_within_five_seeds(broken: SimOptions, what: &str) {
    let caught: Vec<String> = (0..5)
        .filter_map(|seed| run_seed(seed, &broken).err())
        .collect();
    assert!(!caught.is_empty(), "{what} went unnoticed for five seeds");
    for seed in 0..5 {
        run_seed(seed, &light()).expect("honest disk");
    }
}

#[test]
fn fsync_that_persists_nothing_is_caught_within_five_seeds() {
    let broken = SimOptions {
        broken_sync_data: true,
        ..light()
    };
    assert_caught_within_five_seeds(broken, "an fsync that persists nothing");
}

#[test]
fn directory_sync_that_persists_nothing_is_caught_within_five_seeds() {
    let broken = SimOptions {
        broken_sync_dir: true,
        ..light()
    };
    assert_caught_within_five_seeds(broken, "a directory sync that persists nothing");
}

/// Seeds that lost acknowledged records before partition and topic directories were made
/// durable in their parent (`log::create_dir_durably`), under the earlier, larger workload.
#[test]
fn regression_directories_durable_in_their_parent() {
    let earlier = SimOptions {
        ops: 200,
        members: 0,
        ..light()
    };
    for seed in [0, 1, 8] {
        run_seed(seed, &earlier).expect("regression seed");
    }
}

/// Seeds where a DeleteTopics of the scratch topic was in flight when the broker crashed and
/// the broker had made it durable: the model used to keep the last acknowledged create as its
/// expectation and reported the (correctly) deleted topic as lost. An in-flight create or
/// delete now makes the expectation unknown (`Model::scratch_exists`).
#[test]
fn regression_topic_change_in_flight_at_a_crash() {
    for seed in [398, 422] {
        run_seed(seed, &light()).expect("regression seed");
    }
}

/// The soak's options: `mk-sim --incarnations 3` (three producing clients).
fn soak_options() -> SimOptions {
    SimOptions {
        incarnations: 3,
        ..SimOptions::default()
    }
}

/// Seeds the soak found failing (see the top of this file), rerun on the soak's options.
#[test]
fn regression_soak_seeds() {
    for seed in [200014, 200027, 200192] {
        run_seed(seed, &soak_options()).expect("regression seed");
    }
}
