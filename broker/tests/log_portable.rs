//! The partition log conformance suite and its fault suite (through
//! [`FaultyBackend`](minikafka_testkit::fault::FaultyBackend)), run on the portable (smol)
//! backend: one `#[test]` per check.

minikafka_testkit::log_suite_tests!(minikafka_backend_portable::PortableBackend);
