//! The simulation in `cargo test`: a range of seeds must pass, a seed must replay exactly,
//! and the deliberately broken disk (fsync that makes nothing durable) must be caught.
//! `MK_SIM_SEEDS` sets how many seeds `seeds_pass` runs (default 40; soak with `mk-sim`).

use minikafka_sim::{run_seed, SimOptions};

fn light() -> SimOptions {
    SimOptions {
        incarnations: 3,
        clients: 2,
        ..SimOptions::default()
    }
}

#[test]
fn seeds_pass() {
    let seeds: u64 = std::env::var("MK_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let failures: Vec<String> = (0..seeds)
        .filter_map(|seed| run_seed(seed, &light()).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [5, 6] {
        let a = run_seed(seed, &light()).expect("first run");
        let b = run_seed(seed, &light()).expect("second run");
        assert_eq!(
            (a.trace_hash, a.acks, a.stats, a.virtual_time),
            (b.trace_hash, b.acks, b.stats, b.virtual_time),
            "seed {seed} did not replay"
        );
        assert!(
            a.acks > 0 && a.stats.crashes + 1 > 0,
            "seed {seed} did nothing"
        );
    }
}

#[test]
fn fsync_that_persists_nothing_is_caught_within_five_seeds() {
    let options = SimOptions {
        broken_sync_data: true,
        ..light()
    };
    let caught: Vec<String> = (0..5)
        .filter_map(|seed| run_seed(seed, &options).err())
        .collect();
    assert!(
        !caught.is_empty(),
        "the broken disk went unnoticed for five seeds"
    );
    // The same seeds pass on the honest disk, so it is the broken sync that was caught.
    for seed in 0..5 {
        run_seed(seed, &light()).expect("honest disk");
    }
}

/// Seeds that lost acknowledged records before partition and topic directories were made
/// durable in their parent (`log::create_dir_durably`): seed 0 lost a partition directory
/// with its synced segment; seeds 1 and 8 lost a topic's metadata and re-used offset 0.
#[test]
fn regression_directories_durable_in_their_parent() {
    for seed in [0, 1, 8] {
        run_seed(seed, &light()).expect("regression seed");
    }
}
