//! # minikafka-testkit
//!
//! The test kit of minikafka, a dev-only crate (never a dependency of the product): the
//! suites every backend and the partition log must pass, and the fault-injecting backend they
//! run the log on. A backend's test file runs them with a line or two, e.g.
//! `minikafka_testkit::log_suite_tests!(my_backend::MyBackend);` and
//! `minikafka_testkit::backend::run_all::<MyBackend>(&dir)`.
//!
//! It reaches the broker's test-only hooks (such as `PartitionLog::hold_appends`) through the
//! `test-hooks` feature of `minikafka-broker`, which it enables; a normal build of the broker
//! does not have them.
//!
//! Modules:
//! - [`check`]: the one set of helpers the suites share: [`check::ensure`], [`check::Step`],
//!   scratch directories and the runners.
//! - [`backend`]: the backend conformance suite (files, directories, TCP, timers, tasks,
//!   shards), through the `Backend` trait alone.
//! - [`fault`]: [`fault::FaultyBackend`], which fails filesystem calls as a
//!   [`fault::FaultPlan`] says, and [`fault::checks`], the checks that each fault fires as
//!   planned.
//! - [`log`]: the partition log suites, one module per suite (basics, recovery, coalescing,
//!   producers, time index, faults), and [`log_suite_tests!`].
//! - [`cluster_proxy`]: [`cluster_proxy::ClusterProxy`], a pretend cluster of several brokers
//!   in front of one real broker, for clients that must follow leaders and coordinators.

pub mod backend;
pub mod check;
pub mod cluster_proxy;
pub mod fault;
pub mod log;
