//! Fault-injecting backend wrapper (being written).
