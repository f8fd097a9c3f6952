//! The broker reads no clock and starts no thread itself: time comes from its backend
//! (`Backend::now`, `wall_clock_ms`, `sleep`, `sleep_until`) and threads are the backend's
//! shards (`Backend::run_shards`), so a simulated backend can run the whole broker on virtual
//! time and on its own schedule.
//!
//! This test reads every `.rs` file under `broker/src` (the test kit, which times the
//! backends it tests, lives in its own crate, `testkit/`), removes
//! comments, literals and `#[cfg(test)]` items (the scanner shared with core's `no_io.rs`),
//! then fails if what is left names any of:
//! - `Instant::now`, `SystemTime::now`, `.elapsed(` (a `std::time::Instant` read),
//!   `thread::spawn`, `thread::sleep`, `thread::Builder`, `thread::scope`;
//! - the paths `std::time::Instant`, `std::time::SystemTime`, `std::time::UNIX_EPOCH`,
//!   `std::thread::{spawn, sleep, Builder, scope}`, also inside `use` groups (so a renamed
//!   import cannot slip past the tokens above).
//!
//! `main.rs` is scanned too and needs no exception: its signal handling registers
//! signal-hook flags (no thread, no clock), and the broker polls the flag on the backend's
//! timer. `std::thread::available_parallelism` (the default `num.shards`) reads neither a
//! clock nor starts a thread, so it is allowed.

#[path = "../../core/tests/source_scan/mod.rs"]
mod source_scan;

use std::path::Path;

use source_scan::{scan_sources, Rules};

/// Tokens that read a clock or start or park a thread.
const FORBIDDEN_TOKENS: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    ".elapsed(",
    "thread::spawn",
    "thread::sleep",
    "thread::Builder",
    "thread::scope",
];

/// `std` paths (after `use` groups are expanded) the broker must not name.
const FORBIDDEN_STD_PATHS: &[&str] = &[
    "std::time::Instant",
    "std::time::SystemTime",
    "std::time::UNIX_EPOCH",
    "std::thread::spawn",
    "std::thread::sleep",
    "std::thread::Builder",
    "std::thread::scope",
];

/// The broker's rules for [`source_scan::forbidden_uses`]; nothing under a forbidden path is
/// allowed.
const RULES: Rules = Rules {
    forbidden_std_paths: FORBIDDEN_STD_PATHS,
    allowed_std_paths: &[],
    forbidden_tokens: FORBIDDEN_TOKENS,
};

/// The forbidden uses in one file's source.
fn clock_or_thread_uses(src: &str) -> Vec<String> {
    source_scan::forbidden_uses(src, &RULES)
}

#[test]
fn broker_source_reads_no_clock_and_spawns_no_thread() {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let failures = scan_sources(&src_dir, "server/shard.rs", &RULES);
    assert!(
        failures.is_empty(),
        "the broker asks its backend for time and threads (Backend::now, wall_clock_ms, \
         sleep_until, run_shards):\n{}",
        failures.join("\n")
    );
}

#[test]
fn scanner_catches_clock_reads_and_thread_spawns() {
    let cases = [
        "use std::time::Instant; fn f() { let _ = Instant::now(); }",
        "fn f() -> i64 { std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 }",
        "use std::time::{Duration, Instant as Clock};",
        "use std::{thread, time::SystemTime};",
        "fn f(started: T) -> bool { started.elapsed() > LIMIT }",
        "fn f() { std::thread::spawn(|| ()); }",
        "use std::thread; fn f() { thread::spawn(|| ()); }",
        "use std::thread::{self, spawn};",
        "fn f() { std::thread::Builder::new(); }",
        "fn f() { std::thread::sleep(D); }",
        // A `cfg(test)` on a neighbouring item does not hide this one.
        "#[cfg(test)] use std::fs; fn f() { let _ = Instant::now(); }",
    ];
    for case in cases {
        assert!(
            !clock_or_thread_uses(case).is_empty(),
            "scanner missed a clock read or thread spawn in: {case}"
        );
    }
}

#[test]
fn scanner_ignores_backend_time_tests_comments_and_literals() {
    let clean_cases = [
        "fn f<B: Backend>(b: &B) { let deadline = b.now() + WAIT; b.sleep_until(deadline); }",
        "fn shards() -> usize { std::thread::available_parallelism().map_or(1, |n| n.get()) }",
        "use std::time::Duration;",
        "// Instant::now() in a comment\nfn f() {}",
        "const MSG: &str = \"std::thread::spawn\";",
        "#[cfg(test)]\nmod tests { fn g() { let _ = std::time::Instant::now(); std::thread::spawn(|| ()); } }",
    ];
    for case in clean_cases {
        let hits = clock_or_thread_uses(case);
        assert!(hits.is_empty(), "false positive {hits:?} in: {case}");
    }
}
