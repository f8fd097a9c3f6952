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

use std::path::{Path, PathBuf};

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

/// The single allowed path under a forbidden prefix: a type, used in a trait signature.
const ALLOWED_STD_PATHS: &[&str] = &["std::net::SocketAddr"];

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

/// Replaces comments and string/char literals with a space (literals become `""`), keeping
/// everything else. Handles nested block comments, escapes, raw strings (`r#"…"#`), byte
/// strings, and tells lifetimes (`'a`) from char literals (`'a'`, `'\n'`).
fn strip_comments_and_literals(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            out.push(' ');
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && (i == 0 || !is_ident(s[i - 1]))
            && {
                // A raw string: r"…", r#"…"#, br"…" and so on.
                let mut j = i + if c == 'b' { 2 } else { 1 };
                while s.get(j) == Some(&'#') {
                    j += 1;
                }
                s.get(j) == Some(&'"')
            }
        {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while s[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1; // opening quote
            while j < s.len() {
                if s[j] == '"' && (1..=hashes).all(|h| s.get(j + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            if next == Some('\\') {
                // Escaped char literal: skip to the closing quote.
                i += 2;
                while i < s.len() && s[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if s.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                // A lifetime or label.
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Collapses whitespace: a single space is kept only between two identifier characters, so
/// `std :: fs` reads `std::fs` and `use std` keeps its space.
fn normalize_whitespace(src: &str) -> String {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(src.len());
    let mut pending_space = false;
    for c in src.chars() {
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && out.chars().last().is_some_and(is_ident) && is_ident(c) {
            out.push(' ');
        }
        pending_space = false;
        out.push(c);
    }
    out
}

/// True for the attributes that make an item test-only: `#[cfg(test)]` and
/// `#[cfg(all(test, …))]` (text already normalized).
fn test_only_attribute_at(src: &str, at: usize) -> Option<usize> {
    let rest = &src[at..];
    for prefix in ["#[cfg(test)]", "#[cfg(all(test,"] {
        if rest.starts_with(prefix) {
            // Skip to the end of the attribute: the `]` that balances its `[`.
            let mut depth = 0i32;
            for (k, ch) in rest.char_indices() {
                match ch {
                    '[' => depth += 1,
                    ']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + k + 1);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    None
}

/// Removes every item under a test-only attribute: after the attribute, everything up to and
/// including the first `;` if it comes before any `{`, otherwise the balanced `{…}` block.
fn strip_test_items(src: &str) -> String {
    let bytes = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        if let Some(after_attr) = test_only_attribute_at(src, i) {
            let mut j = after_attr;
            let mut depth = 0i32;
            while j < bytes.len() {
                match bytes[j] {
                    b';' if depth == 0 => {
                        j += 1;
                        break;
                    }
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            j += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
            out.push(' ');
            continue;
        }
        let ch = src[i..].chars().next().expect("in bounds");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Expands a path that may contain `{…}` groups into the full paths it names:
/// `std::{fs,net::{SocketAddr,TcpStream}}` gives `std::fs`, `std::net::SocketAddr`,
/// `std::net::TcpStream`.
fn expand_path(path: &str) -> Vec<String> {
    let Some(open) = path.find('{') else {
        return vec![path.to_owned()];
    };
    let prefix = &path[..open];
    // The group runs to the `}` balancing `open`.
    let mut depth = 0i32;
    let mut close = path.len();
    for (k, ch) in path[open..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = open + k;
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &path[open + 1..close.max(open + 1)];
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|item| !item.is_empty())
        .flat_map(|item| {
            // `self` inside a group names the prefix itself.
            let joined = if item == "self" {
                prefix.trim_end_matches("::").to_owned()
            } else {
                format!("{prefix}{item}")
            };
            expand_path(&joined)
        })
        .collect()
}

/// Every `std::…` path in normalized source, with `use` groups expanded.
fn std_paths(src: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut paths = Vec::new();
    let mut from = 0;
    while let Some(found) = src[from..].find("std::") {
        let at = from + found;
        from = at + 5;
        if src[..at].chars().last().is_some_and(is_ident) {
            continue; // e.g. `mystd::`
        }
        // The path runs over identifier characters, `::`, `*` and balanced `{…}` groups.
        let mut depth = 0i32;
        let mut end = at;
        for (k, ch) in src[at..].char_indices() {
            let ok = match ch {
                '{' => {
                    depth += 1;
                    true
                }
                '}' if depth > 0 => {
                    depth -= 1;
                    true
                }
                ',' | ' ' if depth > 0 => true,
                c => is_ident(c) || c == ':' || c == '*',
            };
            if !ok {
                break;
            }
            end = at + k + ch.len_utf8();
        }
        let path: String = src[at..end].chars().filter(|c| *c != ' ').collect();
        paths.extend(expand_path(&path));
    }
    paths
}

/// The forbidden uses in one file's source, as human-readable findings.
fn forbidden_uses(src: &str) -> Vec<String> {
    let cleaned = normalize_whitespace(&strip_test_items(&normalize_whitespace(
        &strip_comments_and_literals(src),
    )));
    let mut found = Vec::new();
    for path in std_paths(&cleaned) {
        let path = path.trim_end_matches("::").to_owned();
        if ALLOWED_STD_PATHS.contains(&path.as_str()) {
            continue;
        }
        for bad in FORBIDDEN_STD_PATHS {
            let hit = path == *bad
                || path
                    .strip_prefix(bad)
                    .is_some_and(|rest| rest.starts_with("::"));
            if hit {
                found.push(format!("`{path}` (under `{bad}`)"));
            }
        }
    }
    for token in FORBIDDEN_TOKENS {
        if cleaned.contains(token) {
            found.push(format!("`{token}`"));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("read core/src");
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn core_source_does_no_io_and_reads_no_clock() {
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src_dir, &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("record.rs")),
        "scanner found no core sources in {}",
        src_dir.display()
    );
    let mut failures = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).expect("read source file");
        for hit in forbidden_uses(&src) {
            failures.push(format!("{}: {hit}", file.display()));
        }
    }
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
