//! Test suites generic over the backend; every backend must pass them.
//! They live in the library (not `tests/`) so each backend's test file runs the same code.

pub mod backend;
pub mod log;
