//! Core is sans-IO: its non-test source never touches a file, a socket, a thread, a process,
//! the environment, the console or a clock. Time enters as a value (`now_ms`).
//!
//! This test reads every `.rs` file under `core/src`, removes comments, string and character
//! literals, and items under `#[cfg(test)]` (or `#[cfg(all(test, ...))]`), then fails if what
//! is left names any of:
//! - `std::fs`, `std::net`, `std::thread`, `std::process`, `std::env`, `std::os`,
//!   `std::io::{stdin, stdout, stderr}` — as a path or inside a `use std::{...}` group;
//! - `Instant::now`, `SystemTime::now`, `.elapsed(`, `thread::spawn`, `thread::sleep`,
//!   `File::open`, `File::create`, `OpenOptions`, `TcpStream`, `TcpListener`, `UdpSocket`, and
//!   the printing macros (`println!`, `eprintln!`, `print!`, `eprint!`, `dbg!`).
//!
//! One exception: `std::net::SocketAddr`, exactly. `core/src/backend.rs` names it as a *type*
//! in the backend trait's signatures (the address a listener binds); declaring a trait performs
//! no I/O. Nothing else from `std::net` is allowed.
//!
//! The scanner is textual, not a compiler: it can be fooled on purpose (`use std as s;`), but
//! not by accident, and its own tests below prove that it catches a forbidden use and that it
//! ignores one inside a test module.

mod source_scan;

use std::path::Path;

use source_scan::{scan_sources, Rules};

/// Path prefixes (after `use` groups are expanded) that core must not name.
const FORBIDDEN_STD_PATHS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::thread",
    "std::process",
    "std::env",
    "std::os",
    "std::io::stdin",
    "std::io::stdout",
    "std::io::stderr",
];

/// The allowed paths under a forbidden prefix: types that name an OS resource in the backend
/// trait's signatures without touching it (a peer's address; a stream's socket, borrowed for
/// the options the broker sets, `BackendListener::socket`).
const ALLOWED_STD_PATHS: &[&str] = &["std::net::SocketAddr", "std::os::fd::BorrowedFd"];

/// Tokens that read a clock, spawn or sleep a thread, open files or sockets, or print.
const FORBIDDEN_TOKENS: &[&str] = &[
    "Instant::now",
    "SystemTime::now",
    ".elapsed(",
    "thread::spawn",
    "thread::sleep",
    "File::open",
    "File::create",
    "OpenOptions",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "println!",
    "eprintln!",
    "print!",
    "eprint!",
    "dbg!",
];

/// Core's rules for [`source_scan::forbidden_uses`].
const RULES: Rules = Rules {
    forbidden_std_paths: FORBIDDEN_STD_PATHS,
    allowed_std_paths: ALLOWED_STD_PATHS,
    forbidden_tokens: FORBIDDEN_TOKENS,
};

/// The forbidden uses in one file's source, as human-readable findings.
fn forbidden_uses(src: &str) -> Vec<String> {
    source_scan::forbidden_uses(src, &RULES)
}

#[test]
fn core_source_does_no_io_and_reads_no_clock() {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let failures = scan_sources(&src_dir, "record.rs", &RULES);
    assert!(
        failures.is_empty(),
        "core must do no I/O, read no clock and start no thread (see core/src/lib.rs):\n{}",
        failures.join("\n")
    );
}

#[test]
fn scanner_catches_forbidden_uses() {
    let cases = [
        "use std::fs::File;",
        "fn f() { let _ = std::fs::read(\"x\"); }",
        "use std::{io, fs};",
        "use std::{io, net::{SocketAddr, TcpStream}};",
        "use std::net::{self};",
        "use std :: thread;",
        "fn f() { std::thread::spawn(|| ()); }",
        "use std::time::Instant; fn f() { let _ = Instant::now(); }",
        "fn f() { let _ = std::time::SystemTime::now(); }",
        "fn f(t: T) { let _ = t.elapsed(); }",
        "use std::env;",
        "fn f() { std::process::exit(1); }",
        "fn f() { println!(\"hi\"); }",
        "use std::net::*;",
        "use std::net::UdpSocket;",
        // A `cfg(test)` on a neighbouring item does not hide this one.
        "#[cfg(test)] use std::fs; use std::thread;",
    ];
    for case in cases {
        assert!(
            !forbidden_uses(case).is_empty(),
            "scanner missed a forbidden use in: {case}"
        );
    }
}

#[test]
fn scanner_allows_socket_addr_type_and_ignores_tests_comments_and_literals() {
    let clean = [
        "use std::net::SocketAddr; fn bind(addr: SocketAddr) {}",
        "use std::{io, net::SocketAddr, time::Duration};",
        "// std::fs::read in a comment\nfn f() {}",
        "/* outer /* nested std::thread */ still comment Instant::now() */ fn f() {}",
        "/// Never calls `Instant::now()`.\nfn f() {}",
        "const MSG: &str = \"std::fs is not used\";",
        "const RAW: &str = r#\"std::net::TcpStream \"quoted\"\"#;",
        "fn f<'a>(x: &'a str) -> char { '{' }",
        "#[cfg(test)]\nmod tests {\n    use std::fs;\n    fn g() { let _ = std::time::Instant::now(); if true { std::thread::sleep(d); } }\n}\nfn h() {}",
        "#[cfg(all(test, not(loom)))]\nmod tests { use std::thread; }",
        "#[cfg(test)]\nuse std::fs;",
    ];
    for case in clean {
        let hits = forbidden_uses(case);
        assert!(hits.is_empty(), "false positive {hits:?} in: {case}");
    }
    // Code after a test module is still scanned.
    let after = "#[cfg(test)]\nmod tests { fn a() {} }\nfn b() { std::thread::yield_now(); }";
    assert!(!forbidden_uses(after).is_empty());
}
