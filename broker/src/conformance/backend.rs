//! Backend conformance (being written).
