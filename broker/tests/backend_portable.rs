//! The backend conformance suite and the fault-injection checks, run on the portable (smol)
//! backend, directly and through the fault wrapper with no faults planned.

use minikafka_backend_portable::PortableBackend;
use minikafka_testkit::backend::run_all;
use minikafka_testkit::check::scratch_dir;
use minikafka_testkit::fault::checks::run_fault_checks;
use minikafka_testkit::fault::FaultyBackend;

#[test]
fn portable_backend_conforms() {
    let dir = scratch_dir("conformance-portable");
    run_all::<PortableBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

/// A fault wrapper with nothing planned must be indistinguishable from its inner backend.
#[test]
fn faulty_backend_without_faults_conforms() {
    let dir = scratch_dir("conformance-faulty-portable");
    run_all::<FaultyBackend<PortableBackend>>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}

#[test]
fn faults_fire_as_planned_on_portable() {
    let dir = scratch_dir("faults-portable");
    run_fault_checks::<PortableBackend>(&dir);
    std::fs::remove_dir_all(&dir).expect("remove scratch dir");
}
