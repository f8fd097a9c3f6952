//! No import cycles between the module files of any workspace crate (I60).
//!
//! Imports run one way: if `a.rs` names something of `b.rs` (a `use`, or an inline
//! `crate::…`/`super::…`/`self::…`/child-module path), nothing `b.rs` names leads back to
//! `a.rs`. A cycle means two files are one concept split in two, or that one of them reaches
//! into a context it should be handed; either way the files cannot be read, tested or
//! replaced one at a time.
//!
//! This test reads the workspace's `Cargo.toml`, and for every member crate every crate root
//! under its `src` (`lib.rs`, `main.rs`, `bin/*`), builds the graph of its module files
//! (`source_scan::module_graph`: textual, comments, literals and `#[cfg(test)]` items
//! removed, re-exports followed to the file that defines the item) and fails with every
//! strongly connected component and the `file:line` edges that form it.

mod source_scan;

use std::path::{Path, PathBuf};

use source_scan::module_graph::{crate_roots, ModuleGraph};

/// The workspace root (core's parent folder).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("core lives in the workspace")
        .to_path_buf()
}

/// The member folders the workspace `Cargo.toml` lists.
fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("read Cargo.toml");
    let start = manifest.find("members").expect("a members list");
    let open = start + manifest[start..].find('[').expect("members [");
    let close = open + manifest[open..].find(']').expect("members ]");
    manifest[open + 1..close]
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The cycle reports of every crate root under `src_dir`, paths relative to `base`.
fn cycles_under(src_dir: &Path, base: &Path) -> Vec<String> {
    crate_roots(src_dir)
        .iter()
        .flat_map(|root| ModuleGraph::read(root).cycle_reports(base))
        .collect()
}

#[test]
fn no_workspace_crate_has_an_import_cycle() {
    let root = workspace_root();
    let members = workspace_members(&root);
    // A scan that read nothing proves nothing: these must be among what it read.
    for expected in ["core", "broker", "backend-sim", "sim"] {
        assert!(
            members.iter().any(|m| m == expected),
            "members {members:?} lack {expected}"
        );
    }
    let mut failures = Vec::new();
    let mut files_read = 0;
    for member in &members {
        let src = root.join(member).join("src");
        let roots = crate_roots(&src);
        assert!(!roots.is_empty(), "{member} has no crate root under src/");
        for crate_root in &roots {
            let graph = ModuleGraph::read(crate_root);
            files_read += graph.files.len();
            failures.extend(graph.cycle_reports(&root));
        }
    }
    assert!(
        files_read > 100,
        "read only {files_read} module files: the scan missed the workspace"
    );
    assert!(
        failures.is_empty(),
        "import cycles between module files (I60; break them by moving a type to the module \
         that owns its concept, or by handing the importer a narrow trait):\n{}",
        failures.join("\n")
    );
}

/// A small crate written to a temporary folder, for the checks of the scanner itself.
struct Planted {
    dir: PathBuf,
}

impl Planted {
    fn new(name: &str, files: &[(&str, &str)]) -> Planted {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("no_import_cycles")
            .join(name);
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let file = dir.join("src").join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, text).expect("write planted source");
        }
        Planted { dir }
    }

    fn cycles(&self) -> Vec<String> {
        cycles_under(&self.dir.join("src"), &self.dir)
    }
}

#[test]
fn finds_a_planted_cycle_with_its_edges() {
    let planted = Planted::new(
        "three_files",
        &[
            ("lib.rs", "pub mod server;\n"),
            (
                "server/mod.rs",
                "pub mod shard;\npub mod groups;\npub mod shared;\n",
            ),
            (
                "server/shard.rs",
                "use super::groups::host::Hosts;\npub struct Shard;\n",
            ),
            ("server/groups/mod.rs", "pub mod host;\n"),
            (
                "server/groups/host.rs",
                "pub struct Hosts;\n\nfn f() {\n    let _ = crate::server::shared::count();\n}\n",
            ),
            (
                "server/shared.rs",
                "use crate::server::{\n    shard::Shard,\n};\npub fn count() {}\n",
            ),
        ],
    );
    let found = planted.cycles();
    assert_eq!(found.len(), 1, "one cycle expected, found {found:?}");
    let report = &found[0];
    for edge in [
        "src/server/shard.rs:1 -> src/server/groups/host.rs",
        "src/server/groups/host.rs:4 -> src/server/shared.rs",
        "src/server/shared.rs:1 -> src/server/shard.rs",
    ] {
        assert!(report.contains(edge), "{edge} missing from:\n{report}");
    }
}

#[test]
fn finds_cycles_through_self_bare_children_and_reexports() {
    // `a` re-exports `B` from `b`; `c` imports `a::B`, so its edge goes to `b`; `b` names `c`
    // through `self`-relative and bare child paths of the root.
    let planted = Planted::new(
        "reexports",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nfn f() { c::g(); }\n"),
            ("a.rs", "pub use crate::b::B;\n"),
            ("b.rs", "pub struct B;\nfn h() { super::c::g(); }\n"),
            ("c.rs", "use crate::a::B as Renamed;\npub fn g() {}\n"),
        ],
    );
    let found = planted.cycles();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("src/b.rs:2 -> src/c.rs"), "{}", found[0]);
    assert!(found[0].contains("src/c.rs:1 -> src/b.rs"), "{}", found[0]);
    // The facade is not part of it: a re-export is not an edge.
    assert!(!found[0].contains("src/a.rs"), "{}", found[0]);
    // The root's bare `c::g()` is an edge, but nothing leads back to the root.
    assert!(!found[0].contains("src/lib.rs"), "{}", found[0]);
}

#[test]
fn ignores_comments_literals_tests_and_other_crates() {
    let planted = Planted::new(
        "no_cycle",
        &[
            ("lib.rs", "pub mod a;\npub mod b;\n"),
            (
                "a.rs",
                "use crate::b::B;\npub struct A;\n/// See [`crate::b`].\nfn f() -> B { B }\n",
            ),
            (
                "b.rs",
                "// crate::a::A\npub struct B;\nconst S: &str = \"crate::a::A\";\n\
                 use other_crate::a::A;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
            ),
        ],
    );
    let found = planted.cycles();
    assert!(found.is_empty(), "false cycle: {found:?}");
}

#[test]
fn bins_are_crates_of_their_own() {
    // `main.rs` and `bin/x.rs` are separate crates: `crate::` there is not the library.
    let planted = Planted::new(
        "bins",
        &[
            ("lib.rs", "pub mod a;\n"),
            ("a.rs", "pub fn f() {}\n"),
            ("main.rs", "mod cli;\nfn main() { cli::run(); }\n"),
            ("cli.rs", "pub fn run() { crate::helper(); }\n"),
            ("bin/x.rs", "fn main() {}\n"),
        ],
    );
    let roots = crate_roots(&planted.dir.join("src"));
    assert_eq!(roots.len(), 3, "{roots:?}");
    // main.rs → cli.rs, and cli.rs's `crate::helper` names main.rs: a cycle in the bin crate.
    let found = planted.cycles();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("src/cli.rs:1 -> src/main.rs"),
        "{}",
        found[0]
    );
}
