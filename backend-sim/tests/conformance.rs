//! The backend conformance suite and the partition-log suites (plain and through the fault
//! wrapper) on the simulated backend. Two backend checks do not apply and are not run:
//! `check_two_shards` asserts two OS threads (the simulation runs every shard on one, by
//! design) and `check_sleep_waits` measures sleeps with the real clock (the simulation's
//! clock is virtual; `virtual_sleep_waits_on_the_virtual_clock` checks the same promise).

use std::time::Duration;

use minikafka_backend_sim::SimBackend;
use minikafka_core::backend::Backend;
use minikafka_testkit::backend;
use minikafka_testkit::check::{run_check, scratch_dir};
use minikafka_testkit::fault::FaultyBackend;

macro_rules! backend_checks {
    ($($check:ident),* $(,)?) => {$(
        #[test]
        fn $check() {
            let dir = scratch_dir(concat!("sim-", stringify!($check)));
            for (name, result) in [
                ("sim", run_check::<SimBackend, _, _>(&dir, |b, d| async move {
                    backend::$check(&b, &d).await
                })),
                ("faulty sim", run_check::<FaultyBackend<SimBackend>, _, _>(&dir.join("faulty"), |b, d| async move {
                    backend::$check(&b, &d).await
                })),
            ] {
                if let Err(e) = result {
                    panic!("{} on {name}: {e}", stringify!($check));
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    )*};
}

backend_checks!(
    check_read_write_round_trip,
    check_len_and_truncate,
    check_preallocate_extends_with_zeros,
    check_sync_data_and_reopen,
    check_directory_ops,
    check_unlinked_file_stays_readable,
    check_open_modes,
    check_read_only_cannot_write,
    check_tcp_echo,
    check_clocks,
    check_spawn_local_runs,
);

#[test]
fn shards_share_the_virtual_clock() {
    backend::check_shard_clocks_agree::<SimBackend>().expect("shard clocks agree");
}

#[test]
fn virtual_sleep_waits_on_the_virtual_clock() {
    let result = run_check::<SimBackend, _, _>(&scratch_dir("sim-sleep"), |b, _| async move {
        for ms in [0u64, 20, 60, 3_600_000] {
            let start = b.now();
            b.sleep(Duration::from_millis(ms)).await;
            let waited = b.now().saturating_duration_since(start);
            if waited < Duration::from_millis(ms) {
                return Err(format!("sleep({ms} ms) returned after {waited:?}"));
            }
        }
        Ok(())
    });
    result.expect("sleep on virtual time");
}

minikafka_testkit::log_suite_tests!(minikafka_backend_sim::SimBackend);
