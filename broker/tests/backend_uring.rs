//! The backend conformance suite and the fault-injection checks, run on the io_uring (glommio)
//! backend, directly and through the fault wrapper with no faults planned.
#![cfg(all(target_os = "linux", feature = "uring"))]

use minikafka_backend_uring::UringBackend;
use minikafka_testkit::backend::run_all;
use minikafka_testkit::check::scratch_dir;
use minikafka_testkit::fault::checks::run_fault_checks;
use minikafka_testkit::fault::FaultyBackend;

#[test]
fn uring_backend_conforms() {
    let dir = scratch_dir("conformance-uring");
    run_all::<UringBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

/// A fault wrapper with nothing planned must be indistinguishable from its inner backend.
#[test]
fn faulty_backend_without_faults_conforms_on_uring() {
    let dir = scratch_dir("conformance-faulty-uring");
    run_all::<FaultyBackend<UringBackend>>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

#[test]
fn faults_fire_as_planned_on_uring() {
    let dir = scratch_dir("faults-uring");
    run_fault_checks::<UringBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}
