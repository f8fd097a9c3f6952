//! The simulation with TLS (`SimOptions::tls`, `mk-sim --tls`): the broker's listener speaks
//! SSL (rustls, a certificate made for the run) and every simulated client, transactional
//! ones included, handshakes before its first request, through crashes, restarts and network
//! faults. The seeds must pass the same model checks as in plaintext, and replay exactly.
//! `MK_SIM_TLS_SEEDS` sets how many seeds run (default 12; soak with `mk-sim --tls --seeds N`).

use minikafka_sim::{run_seed, SimOptions};

fn tls_options() -> SimOptions {
    SimOptions {
        incarnations: 3,
        clients: 2,
        txn_producers: 1,
        tls: true,
        ..SimOptions::default()
    }
}

fn total_seeds() -> u64 {
    std::env::var("MK_SIM_TLS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

#[test]
fn tls_seeds_pass() {
    let mut handshakes = 0;
    let mut failures = Vec::new();
    for seed in 0..total_seeds() {
        match run_seed(seed, &tls_options()) {
            Ok(report) => {
                // Every client of the run went through the handshake: none reached the
                // broker in plaintext (an SSL listener would have closed it).
                assert!(report.acks > 0, "seed {seed} acknowledged nothing");
                handshakes += report.tls_handshakes;
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
    assert!(
        handshakes > 0,
        "no TLS handshake in {} seeds",
        total_seeds()
    );
}

#[test]
fn a_tls_seed_replays_exactly() {
    let a = run_seed(4, &tls_options()).expect("first run");
    let b = run_seed(4, &tls_options()).expect("second run");
    assert!(a.tls_handshakes > 0);
    assert_eq!(
        (
            a.trace_hash,
            a.acks,
            a.commits,
            a.txn_commits,
            a.tls_handshakes,
            a.virtual_time
        ),
        (
            b.trace_hash,
            b.acks,
            b.commits,
            b.txn_commits,
            b.tls_handshakes,
            b.virtual_time
        ),
        "seed 4 with TLS did not replay"
    );
}
