//! minikafka benches: criterion micro-benches (`benches/`) and, later, the `mk-bench` harness.
