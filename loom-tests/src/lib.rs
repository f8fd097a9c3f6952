//! # minikafka-loom-tests
//!
//! Loom models of the minikafka primitives shared between threads. The models live in
//! `tests/`; this library holds only what they share (the model builder). They cover:
//! - `tests/wakeup.rs`: the long-poll wakeup of `minikafka_core::wakeup` (invariant I7, no lost
//!   wakeup), with one and two fetchers, one fetcher on two partitions, and a fetch dropped
//!   mid-wait.
//! - `tests/shard_sync.rs`: the cross-shard coordination of `minikafka_core::shard_sync`
//!   (invariant I11): the phase barrier and the shutdown request publish what a shard wrote
//!   before them, a failure releases waiters, and the connection `Permits` never exceed their
//!   limit.
//!
//! Each file includes a deliberately broken variant that loom must catch, so a green run means
//! the models can fail. What else shards share, and why it needs no model, is listed
//! under I11 in `docs/DESIGN.md`.
//!
//! The models exist only under `--cfg loom`, which also switches `minikafka_core::sync` to
//! loom's primitives. Without it the crate builds empty and its tests do nothing:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test -p minikafka-loom-tests --release --target-dir target-loom
//! ```
//!
//! A separate target dir keeps the loom build from invalidating the normal one.
//!
//! What this crate never does: test anything but interleavings (logic has unit and property
//! tests beside the code), or model unbounded loops (every model ends in a few steps, so loom's
//! state space stays small).
#![warn(missing_docs)]

/// The preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_MAX_PREEMPTIONS: usize = 3;

/// A loom model builder with a preemption bound from `LOOM_MAX_PREEMPTIONS`, or
/// [`DEFAULT_MAX_PREEMPTIONS`] so an unconfigured run stays fast.
#[cfg(loom)]
pub fn model_builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_MAX_PREEMPTIONS);
    }
    builder
}
