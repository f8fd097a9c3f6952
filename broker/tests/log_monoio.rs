//! The partition-log conformance and fault suites on the monoio (io_uring) backend: the same
//! generic checks as `log_portable.rs`, one `#[test]` per check.
#![cfg(all(target_os = "linux", feature = "monoio"))]

minikafka_testkit::log_suite_tests!(minikafka_backend_monoio::MonoioBackend);
