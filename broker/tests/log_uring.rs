//! The partition-log conformance and fault suites on the io_uring (glommio) backend: the same
//! generic checks as `log_portable.rs`, one `#[test]` per check.
#![cfg(all(target_os = "linux", feature = "uring"))]

minikafka_testkit::log_suite_tests!(minikafka_backend_uring::UringBackend);
