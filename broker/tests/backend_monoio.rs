//! The backend conformance suite and the fault-injection checks, run on the monoio (io_uring)
//! backend, directly and through the fault wrapper with no faults planned.
#![cfg(all(target_os = "linux", feature = "monoio"))]

use minikafka_backend_monoio::MonoioBackend;
use minikafka_testkit::backend::run_all;
use minikafka_testkit::check::scratch_dir;
use minikafka_testkit::fault::checks::run_fault_checks;
use minikafka_testkit::fault::FaultyBackend;

#[test]
fn monoio_backend_conforms() {
    let dir = scratch_dir("conformance-monoio");
    run_all::<MonoioBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

/// A fault wrapper with nothing planned must be indistinguishable from its inner backend.
#[test]
fn faulty_backend_without_faults_conforms_on_monoio() {
    let dir = scratch_dir("conformance-faulty-monoio");
    run_all::<FaultyBackend<MonoioBackend>>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

#[test]
fn faults_fire_as_planned_on_monoio() {
    let dir = scratch_dir("faults-monoio");
    run_fault_checks::<MonoioBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}
