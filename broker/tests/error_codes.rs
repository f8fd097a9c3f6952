//! Kafka error codes have one table, `minikafka_core::error_code::ErrorCode`: no other source
//! file spells one as a bare number or defines its own constant for one.
//!
//! This test reads every `.rs` file under `broker/src` (except the test kit: the conformance
//! suites and the fault-injecting backend) and under `core/src` (except the table itself),
//! removes comments, literals and `#[cfg(test)]` items (the scanner shared with core's
//! `no_io.rs`), and fails on any of:
//! - `error_code` followed by `:`, `=`, `==` or `!=` and a number (`response.error_code = 3`,
//!   `error_code: -1` in a struct literal, `if p.error_code != 0`);
//! - `ErrorCode(` and a number (a code made from a literal instead of a named constant);
//! - a function whose name mentions `code` or `error` returning a bare `i16` (where the old
//!   `kafka_error_code(&self) -> i16 { … => 56 }` tables lived);
//! - a `const` or `static` of type `i16` or `ErrorCode` named like an entry of the table (a
//!   second `INVALID_RECORD`).
//!
//! Values that reach the wire go through `ErrorCode::code()`; codes read from a response
//! become `ErrorCode(field)`. Both are variables, never literals, so neither trips the scan.

#[path = "../../core/tests/source_scan/mod.rs"]
mod source_scan;

use std::path::{Path, PathBuf};

use minikafka_core::error_code::ErrorCode;
use source_scan::{clean, rust_files};

/// Files under `broker/src` that belong to the test kit, not the product.
const TEST_KIT: &[&str] = &["conformance", "fault.rs"];

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `rest` starts with an optional `-` and a digit.
fn starts_with_number(rest: &str) -> bool {
    rest.strip_prefix('-')
        .unwrap_or(rest)
        .starts_with(|c: char| c.is_ascii_digit())
}

/// Every bare error-code number or duplicate definition in one file's (uncleaned) source.
fn bare_error_codes(src: &str) -> Vec<String> {
    let text = clean(src);
    let mut found = Vec::new();
    let snippet = |at: usize| -> String { text[at..].chars().take(60).collect() };

    // `error_code` assigned, initialized or compared to a number.
    let mut from = 0;
    while let Some(pos) = text[from..].find("error_code") {
        let at = from + pos;
        from = at + "error_code".len();
        if text[from..].starts_with(is_ident) {
            continue; // e.g. `error_codes`
        }
        let rest = &text[from..];
        let rest = ["==", "!=", "="]
            .iter()
            .find_map(|op| rest.strip_prefix(op))
            .or_else(|| rest.strip_prefix(':').filter(|r| !r.starts_with(':')));
        if rest.is_some_and(starts_with_number) {
            found.push(format!("bare number: `{}`", snippet(at)));
        }
    }

    // `ErrorCode(<number>)`.
    let mut from = 0;
    while let Some(pos) = text[from..].find("ErrorCode(") {
        let at = from + pos;
        from = at + "ErrorCode(".len();
        if starts_with_number(&text[from..]) {
            found.push(format!("code from a literal: `{}`", snippet(at)));
        }
    }

    // `fn …code…(…) -> i16` / `fn …error…(…) -> i16`.
    let mut from = 0;
    while let Some(pos) = text[from..].find("fn ") {
        let at = from + pos;
        from = at + 3;
        if at > 0 && text[..at].ends_with(is_ident) {
            continue;
        }
        let name: String = text[from..].chars().take_while(|c| is_ident(*c)).collect();
        let lower = name.to_lowercase();
        if !(lower.contains("code") || lower.contains("error")) {
            continue;
        }
        let end = text[from..]
            .find(['{', ';'])
            .map_or(text.len(), |e| from + e);
        let signature = &text[from..end];
        if let Some(ret) = signature.rfind("->").map(|r| &signature[r + 2..]) {
            let ret = ret
                .trim_start_matches("Option<")
                .trim_start_matches("Result<");
            if ret.starts_with("i16") {
                found.push(format!("error code as a bare i16: `fn {signature}`"));
            }
        }
    }

    // A second definition of a table entry (typed as a code: a schema named `NONE` is fine).
    for (_, name) in ErrorCode::ALL {
        for keyword in ["const", "static"] {
            for ty in ["i16", "ErrorCode"] {
                let def = format!("{keyword} {name}:{ty}");
                if let Some(at) = text.find(&def) {
                    if !text[..at].ends_with(is_ident) {
                        found.push(format!("second definition: `{}`", snippet(at)));
                    }
                }
            }
        }
    }
    found
}

fn scanned_files() -> Vec<(PathBuf, PathBuf)> {
    let broker_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let core_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src");
    let mut out = Vec::new();
    for (root, skip) in [(&broker_src, TEST_KIT), (&core_src, &["error_code.rs"][..])] {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        files.sort();
        for file in files {
            let relative = file.strip_prefix(root).expect("under root").to_path_buf();
            let first = relative
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned());
            if first.is_some_and(|f| skip.contains(&f.as_str())) {
                continue;
            }
            out.push((file, relative));
        }
    }
    out
}

#[test]
fn no_bare_error_code_outside_the_table() {
    let files = scanned_files();
    for expected in ["produce.rs", "error.rs", "producer.rs", "shard.rs"] {
        assert!(
            files.iter().any(|(f, _)| f.ends_with(expected)),
            "scanner did not find {expected}"
        );
    }
    let mut failures = Vec::new();
    for (file, relative) in &files {
        let src = std::fs::read_to_string(file).expect("read source file");
        for hit in bare_error_codes(&src) {
            failures.push(format!("{}: {hit}", relative.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "use the named constants of minikafka_core::error_code::ErrorCode:\n{}",
        failures.join("\n")
    );
}

#[test]
fn scanner_catches_planted_bare_codes() {
    let cases = [
        // The forms the table replaced.
        "fn f(r: &mut R) { r.error_code = 3; }",
        "fn f(r: &mut R) { r.error_code = -1; }",
        "fn f() -> P { P { error_code: 87, high_watermark: -1 } }",
        "fn f(p: &P) -> bool { p.error_code != 0 }",
        "fn f(p: &P) -> bool { p.error_code == 56 }",
        "pub fn kafka_error_code(&self) -> i16 { match self { E::Corrupt => 2, _ => 56 } }",
        "fn first_error(r: &R) -> Option<i16> { None }",
        "pub const INVALID_RECORD: i16 = 87;",
        "pub const UNKNOWN_SERVER_ERROR: ErrorCode = ErrorCode::UNKNOWN_SERVER_ERROR;",
        "fn f() -> ErrorCode { ErrorCode(16) }",
        "fn f() -> ErrorCode { ErrorCode(-1) }",
        // A cfg(test) item beside it does not hide it.
        "#[cfg(test)] mod t {} fn f(r: &mut R) { r.error_code = 42; }",
    ];
    for case in cases {
        assert!(
            !bare_error_codes(case).is_empty(),
            "scanner missed a bare error code in: {case}"
        );
    }
}

#[test]
fn scanner_allows_named_codes_wire_conversion_and_tests() {
    let clean_cases = [
        "fn f(r: &mut R, code: ErrorCode) { r.error_code = code.code(); }",
        "fn f() -> P { P { error_code: ErrorCode::NONE, high_watermark: -1 } }",
        "fn f(p: &P) -> ErrorCode { ErrorCode(p.error_code) }",
        "fn f(p: &P) -> bool { ErrorCode(p.error_code).is_error() }",
        "pub fn kafka_error_code(&self) -> ErrorCode { ErrorCode::KAFKA_STORAGE_ERROR }",
        "const LAST_BUMPABLE_EPOCH: i16 = i16::MAX - 2;",
        "struct T { error_code: ErrorCode, max_error_codes: usize }",
        "// r.error_code = 3 in a comment\nfn f() {}",
        "const MSG: &str = \"error_code = 3\";",
        "static NONE: StructSchema = StructSchema { fields: &[] };",
        "#[cfg(test)]\nmod tests { fn g(r: &R) { assert_eq!(r.error_code, 35); let _ = r.error_code == 3; } }",
    ];
    for case in clean_cases {
        let hits = bare_error_codes(case);
        assert!(hits.is_empty(), "false positive {hits:?} in: {case}");
    }
}
