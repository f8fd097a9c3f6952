//! Source scanning shared by the tests that check what a crate's source may name
//! (`core/tests/no_io.rs`, and the broker's `no_clock.rs` and `error_codes.rs`, which include
//! this file by path): strip comments, literals and test-only items, normalize whitespace,
//! expand `use` groups. Textual, not a compiler: it can be fooled on purpose, not by accident;
//! each including test proves on planted examples that it catches what it forbids.
#![allow(dead_code)] // each including test uses a different part

use std::path::{Path, PathBuf};

pub mod module_graph;

/// The text a scan looks at: `src` without comments, literals and `#[cfg(test)]` items, with
/// whitespace normalized (see [`normalize_whitespace`]).
pub fn clean(src: &str) -> String {
    normalize_whitespace(&strip_test_items(&normalize_whitespace(
        &strip_comments_and_literals(src),
    )))
}

/// Replaces comments and string/char literals with a space (literals become `""`), keeping
/// everything else, line breaks included (so a finding can name its line). Handles nested block comments, escapes, raw strings (`r#"…"#`), byte
/// strings, and tells lifetimes (`'a`) from char literals (`'a'`, `'\n'`).
pub fn strip_comments_and_literals(src: &str) -> String {
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
            let start = i;
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
            push_newlines(&mut out, &s[start..i.min(s.len())]);
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
            out.push_str("\"\"");
            push_newlines(&mut out, &s[i..j.min(s.len())]);
            i = j;
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            push_newlines(&mut out, &s[start..i.min(s.len())]);
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

/// Appends one `\n` per line break in `removed`, so text with comments, literals or test items
/// removed keeps its line numbers (the whitespace normalization that follows collapses them).
fn push_newlines(out: &mut String, removed: &[char]) {
    out.extend(removed.iter().filter(|c| **c == '\n'));
}

/// Same as [`push_newlines`], for removed text given as a `str`.
fn push_newlines_str(out: &mut String, removed: &str) {
    out.extend(removed.chars().filter(|c| *c == '\n'));
}

/// Collapses whitespace: a single space is kept only between two identifier characters, so
/// `std :: fs` reads `std::fs` and `use std` keeps its space.
pub fn normalize_whitespace(src: &str) -> String {
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
pub fn test_only_attribute_at(src: &str, at: usize) -> Option<usize> {
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

/// Removes every item under a test-only attribute (keeping its line breaks): after the attribute, everything up to and
/// including the first `;` if it comes before any `{`, otherwise the balanced `{…}` block.
pub fn strip_test_items(src: &str) -> String {
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
            out.push(' ');
            push_newlines_str(&mut out, &src[i..j.min(src.len())]);
            i = j;
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
pub fn expand_path(path: &str) -> Vec<String> {
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
pub fn std_paths(src: &str) -> Vec<String> {
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

/// Every `.rs` file under `dir`, recursively, appended to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("read a source directory");
    for entry in entries {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What a crate's source may not name: `std` path prefixes (matched after `use` groups are
/// expanded, also when renamed with `as`), the exact paths allowed under them, and tokens.
pub struct Rules<'a> {
    /// Path prefixes that must not appear, e.g. `std::fs`.
    pub forbidden_std_paths: &'a [&'a str],
    /// Exact paths allowed although a forbidden prefix covers them, e.g. `std::net::SocketAddr`.
    pub allowed_std_paths: &'a [&'a str],
    /// Text that must not appear in the cleaned source, e.g. `Instant::now`.
    pub forbidden_tokens: &'a [&'a str],
}

/// The forbidden uses in one file's source, as human-readable findings.
pub fn forbidden_uses(src: &str, rules: &Rules) -> Vec<String> {
    let cleaned = clean(src);
    let mut found = Vec::new();
    for path in std_paths(&cleaned) {
        let path = path.trim_end_matches("::");
        if rules.allowed_std_paths.contains(&path) {
            continue;
        }
        for bad in rules.forbidden_std_paths {
            // `std_paths` drops spaces, so `Instant as Clock` reads `InstantasClock`.
            let hit = path == *bad
                || path
                    .strip_prefix(bad)
                    .is_some_and(|rest| rest.starts_with("::") || rest.starts_with("as"));
            if hit {
                found.push(format!("`{path}` (under `{bad}`)"));
            }
        }
    }
    for token in rules.forbidden_tokens {
        if cleaned.contains(token) {
            found.push(format!("`{token}`"));
        }
    }
    found
}

/// Every finding of [`forbidden_uses`] in the `.rs` files under `src_dir`, each prefixed by
/// its file. Panics if no file ends with `marker` (a scan that read nothing proves nothing).
pub fn scan_sources(src_dir: &Path, marker: &str, rules: &Rules) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with(marker)),
        "scanner found no {marker} in {}",
        src_dir.display()
    );
    let mut failures = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).expect("read source file");
        for hit in forbidden_uses(&src, rules) {
            failures.push(format!("{}: {hit}", file.display()));
        }
    }
    failures
}
