//! The import graph between a crate's module files, and its cycles (what
//! `core/tests/no_import_cycles.rs` checks for every workspace crate).
//!
//! How it reads a crate (textual, like the rest of `source_scan`):
//! - Modules: from each crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`), every
//!   `mod name;` declaration names a child file (`name.rs` or `name/mod.rs`), recursively.
//!   `#[cfg(test)]` declarations are stripped, so test-only modules are not in the graph. An
//!   inline `mod name { … }` is part of its file.
//! - Edges: every path in a `use` statement and every inline path that starts with `crate::`,
//!   `super::`, `self::` or a child module's name is resolved to the deepest module file it
//!   names; the rest of the path is an item of that module. An item that module imports
//!   (`use`, any visibility) is followed to the module that defines it, and a re-export
//!   (`pub use`, any `pub(…)`) is not an edge of its own: a facade `mod.rs` is not a
//!   dependency of the files behind it.
//! - A cycle is a strongly connected component of more than one file; it is reported with the
//!   edges (file:line and the path written there) that form it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module file of a crate.
#[derive(Debug)]
pub struct ModuleFile {
    /// The file.
    pub path: PathBuf,
    /// Its module path below the crate root (empty for the root).
    pub module: Vec<String>,
    /// Its source without comments, literals and test-only items, line breaks kept.
    pub text: String,
}

/// An import of `to` by `from` (indices into the crate's module files).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The importing file.
    pub from: usize,
    /// The imported file.
    pub to: usize,
    /// The 1-based line of `from` where the path starts.
    pub line: usize,
    /// The path as written (whitespace removed, `use` groups expanded).
    pub path: String,
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The crate roots under a crate's `src`: `lib.rs`, `main.rs`, `bin/*.rs`, `bin/*/main.rs`.
pub fn crate_roots(src_dir: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for name in ["lib.rs", "main.rs"] {
        let p = src_dir.join(name);
        if p.is_file() {
            roots.push(p);
        }
    }
    if let Ok(entries) = std::fs::read_dir(src_dir.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .map(|e| e.expect("dir entry").path())
            .filter_map(|p| {
                if p.extension().is_some_and(|e| e == "rs") {
                    Some(p)
                } else if p.join("main.rs").is_file() {
                    Some(p.join("main.rs"))
                } else {
                    None
                }
            })
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

/// The text the graph is read from: no comments, literals or test-only items; lines kept.
pub fn graph_text(src: &str) -> String {
    super::strip_test_items(&super::strip_comments_and_literals(src))
}

/// The `mod name;` declarations in `text`, in order.
fn declared_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("mod") {
        let at = from + found;
        from = at + 3;
        if text[..at].chars().last().is_some_and(is_ident) {
            continue;
        }
        let rest = &text[at + 3..];
        if !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let rest = rest.trim_start();
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            continue;
        }
        if rest[name.len()..].trim_start().starts_with(';') {
            out.push(name.trim_start_matches("r#").to_owned());
        }
    }
    out
}

/// Every module file of the crate rooted at `root`, the root first.
pub fn crate_modules(root: &Path) -> Vec<ModuleFile> {
    let mut files = Vec::new();
    let mut pending = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = pending.pop() {
        let src = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let text = graph_text(&src);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let is_root = module.is_empty();
        let dir = path.parent().expect("a file has a folder");
        // A `mod.rs` (or a crate root) holds its children beside it; `a.rs` holds them in `a/`.
        let child_dir = if is_root || name == "mod.rs" {
            dir.to_path_buf()
        } else {
            dir.join(path.file_stem().expect("a file has a stem"))
        };
        for child in declared_modules(&text) {
            let flat = child_dir.join(format!("{child}.rs"));
            let nested = child_dir.join(&child).join("mod.rs");
            let file = if flat.is_file() {
                flat
            } else if nested.is_file() {
                nested
            } else {
                panic!(
                    "{} declares `mod {child};` but neither {} nor {} exists",
                    path.display(),
                    flat.display(),
                    nested.display()
                );
            };
            let mut child_module = module.clone();
            child_module.push(child);
            pending.push((file, child_module));
        }
        files.push(ModuleFile { path, module, text });
    }
    files.sort_by(|a, b| (!a.module.is_empty(), &a.module).cmp(&(!b.module.is_empty(), &b.module)));
    files
}

/// A path found in a file: where it starts, the text (whitespace and `as` renames removed,
/// groups expanded), and whether it sits in a `pub use` (a re-export).
struct FoundPath {
    at: usize,
    path: String,
    reexport: bool,
}

/// The end of an inline path starting at `at`: identifier characters and `::`.
fn path_end(text: &str, at: usize) -> usize {
    text[at..]
        .char_indices()
        .find(|(_, c)| !(is_ident(*c) || *c == ':' || *c == '$'))
        .map_or(text.len(), |(k, _)| at + k)
}

/// `text` with whitespace removed; a rename `X as Z` reads `X@Z`.
fn compact_path(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = String::new();
    for (k, word) in words.iter().enumerate() {
        if *word == "as" && k > 0 && k + 1 < words.len() {
            out.push('@');
        } else {
            out.push_str(word);
        }
    }
    out
}

/// The paths a `use` body names, each with the name it binds (the last segment, or its
/// rename).
fn bound_names(use_body: &str) -> Vec<(String, String)> {
    super::expand_path(&compact_path(use_body.trim_start_matches("::")))
        .into_iter()
        .map(|path| match path.split_once('@') {
            Some((path, alias)) => (path.to_owned(), alias.to_owned()),
            None => {
                let last = path.rsplit("::").next().unwrap_or("").to_owned();
                (path, last)
            }
        })
        .collect()
}

/// A `use` statement: its span, whether it re-exports (`pub use`, any visibility), and the
/// paths it names with the names they bind.
struct UseStatement {
    start: usize,
    end: usize,
    body_start: usize,
    reexport: bool,
    bindings: Vec<(String, String)>,
}

/// Every `use` statement in `text`.
fn use_statements(text: &str) -> Vec<UseStatement> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("use") {
        let at = from + found;
        from = at + 3;
        if text[..at].ends_with(|c: char| is_ident(c) || c == ':')
            || !text[at + 3..].starts_with(char::is_whitespace)
        {
            continue;
        }
        let Some(semi) = text[at..].find(';') else {
            continue;
        };
        let after_keyword = &text[at + 3..at + semi];
        let body_start = at + 3 + (after_keyword.len() - after_keyword.trim_start().len());
        let head = text[..at].trim_end();
        let reexport = head.ends_with("pub")
            || (head.ends_with(')') && {
                let open = head.rfind('(').unwrap_or(0);
                head[..open].trim_end().ends_with("pub")
            });
        out.push(UseStatement {
            start: at,
            end: at + semi,
            body_start,
            reexport,
            bindings: bound_names(after_keyword.trim()),
        });
    }
    out
}

/// Every path in `text` worth resolving, with the start of each.
fn found_paths(text: &str, child_modules: &BTreeSet<String>) -> Vec<FoundPath> {
    let mut out = Vec::new();
    let statements = use_statements(text);
    for statement in &statements {
        for (path, _) in &statement.bindings {
            out.push(FoundPath {
                at: statement.body_start,
                path: path.clone(),
                reexport: statement.reexport,
            });
        }
    }
    let use_spans: Vec<(usize, usize)> = statements.iter().map(|u| (u.start, u.end)).collect();
    // Inline paths outside `use` statements.
    let in_use = |at: usize| use_spans.iter().any(|(s, e)| *s <= at && at < *e);
    let mut k = 0;
    let bytes = text.as_bytes();
    while k < text.len() {
        let c = bytes[k] as char;
        let starts_word = (c.is_ascii_alphabetic() || c == '_' || c == '$')
            && !text[..k]
                .chars()
                .last()
                .is_some_and(|p| is_ident(p) || p == ':' || p == '$');
        if !starts_word || in_use(k) {
            k += text[k..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        let word: String = text[k..]
            .chars()
            .enumerate()
            .take_while(|(n, ch)| is_ident(*ch) || (*n == 0 && *ch == '$'))
            .map(|(_, ch)| ch)
            .collect();
        let after = k + word.len();
        let first = word.trim_start_matches('$');
        let relevant = matches!(first, "crate" | "super" | "self") || child_modules.contains(first);
        if relevant && text[after..].starts_with("::") {
            let end = path_end(text, k);
            out.push(FoundPath {
                at: k,
                path: text[k..end].trim_start_matches('$').to_owned(),
                reexport: false,
            });
            k = end.max(k + 1);
        } else {
            k = after.max(k + 1);
        }
    }
    out
}

/// The graph of one crate: its files and the edges between them.
pub struct ModuleGraph {
    /// The crate's module files.
    pub files: Vec<ModuleFile>,
    /// The imports between different files.
    pub edges: Vec<Edge>,
}

impl ModuleGraph {
    /// Reads the crate rooted at `root` and resolves every import.
    pub fn read(root: &Path) -> ModuleGraph {
        let files = crate_modules(root);
        let index: BTreeMap<Vec<String>, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.module.clone(), i))
            .collect();
        let children_of = |module: &[String]| -> BTreeSet<String> {
            files
                .iter()
                .filter(|f| f.module.len() == module.len() + 1 && f.module.starts_with(module))
                .map(|f| f.module[module.len()].clone())
                .collect()
        };
        let children: Vec<BTreeSet<String>> =
            files.iter().map(|f| children_of(&f.module)).collect();
        let paths: Vec<Vec<FoundPath>> = files
            .iter()
            .zip(&children)
            .map(|(f, c)| found_paths(&f.text, c))
            .collect();
        // Each file's imports (any visibility: a child may name its parent's private
        // imports): the name bound → the path it names.
        let reexports: Vec<BTreeMap<String, String>> = files
            .iter()
            .map(|f| {
                use_statements(&f.text)
                    .into_iter()
                    .flat_map(|u| u.bindings)
                    .map(|(path, name)| (name, path))
                    .collect()
            })
            .collect();
        let mut edges = BTreeSet::new();
        for (from, found) in paths.iter().enumerate() {
            for p in found {
                if p.reexport {
                    continue;
                }
                let Some(to) = resolve(&files, &index, &children, &reexports, from, &p.path, 0)
                else {
                    continue;
                };
                if to != from {
                    let line = files[from].text[..p.at].matches('\n').count() + 1;
                    edges.insert(Edge {
                        from,
                        to,
                        line,
                        path: p.path.clone(),
                    });
                }
            }
        }
        ModuleGraph {
            files,
            edges: edges.into_iter().collect(),
        }
    }

    /// Every cycle: the strongly connected components of more than one file, each sorted,
    /// in file order.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        strongly_connected(self.files.len(), &self.edges)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect()
    }

    /// Each cycle as a report: its files, then the edges that form it (`file:line -> file
    /// (path)`), file paths relative to `base`.
    pub fn cycle_reports(&self, base: &Path) -> Vec<String> {
        let show = |i: usize| {
            let p = &self.files[i].path;
            p.strip_prefix(base).unwrap_or(p).display().to_string()
        };
        self.cycles()
            .into_iter()
            .map(|component| {
                let names: Vec<String> = component.iter().map(|i| show(*i)).collect();
                let mut report = format!("cycle of {} files: {}", names.len(), names.join(", "));
                for e in &self.edges {
                    if component.contains(&e.from) && component.contains(&e.to) {
                        report.push_str(&format!(
                            "\n    {}:{} -> {} ({})",
                            show(e.from),
                            e.line,
                            show(e.to),
                            e.path
                        ));
                    }
                }
                report
            })
            .collect()
    }
}

/// The file `path`, written in file `from`, names (following re-exports), if any.
fn resolve(
    files: &[ModuleFile],
    index: &BTreeMap<Vec<String>, usize>,
    children: &[BTreeSet<String>],
    reexports: &[BTreeMap<String, String>],
    from: usize,
    path: &str,
    depth: usize,
) -> Option<usize> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let first = *segments.first()?;
    let mut module: Vec<String> = match first {
        "crate" => Vec::new(),
        "self" => files[from].module.clone(),
        "super" => {
            let mut m = files[from].module.clone();
            m.pop()?;
            m
        }
        child if children[from].contains(child) => {
            let mut m = files[from].module.clone();
            m.push(child.to_owned());
            m
        }
        _ => return None, // another crate, or a name this scan does not track
    };
    let mut rest = segments[1..].iter();
    let mut item = None;
    for seg in rest.by_ref() {
        match *seg {
            "super" if item.is_none() => {
                module.pop()?;
            }
            "self" => {}
            seg => {
                let mut deeper = module.clone();
                deeper.push(seg.to_owned());
                if index.contains_key(&deeper) {
                    module = deeper;
                } else {
                    item = Some(seg);
                    break;
                }
            }
        }
    }
    let to = *index.get(&module)?;
    // An item the module re-exports lives where its re-export points.
    if let Some(name) = item {
        if depth < 16 {
            if let Some(target) = reexports[to].get(name) {
                if let Some(real) =
                    resolve(files, index, children, reexports, to, target, depth + 1)
                {
                    return Some(real);
                }
            }
        }
    }
    Some(to)
}

/// Tarjan's algorithm: the strongly connected components of the graph of `n` nodes, each
/// sorted, the list sorted by first node.
pub fn strongly_connected(n: usize, edges: &[Edge]) -> Vec<Vec<usize>> {
    let mut adjacent = vec![Vec::new(); n];
    for e in edges {
        adjacent[e.from].push(e.to);
    }
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adjacent: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &adjacent[v] {
            match s.index[w] {
                None => {
                    visit(w, adjacent, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort_unstable();
            s.out.push(component);
        }
    }
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &adjacent, &mut s);
        }
    }
    s.out.sort();
    s.out
}
