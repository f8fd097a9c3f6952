//! Writing a generated section into a Markdown document: the text between a begin and an
//! end marker (HTML comments, invisible when rendered) is replaced, the rest kept as it is.
//!
//! Contract: pure text functions; [`replace_section`] returns `None` when the markers are
//! missing or out of order (the caller says where to add them), never writes elsewhere.

use std::path::{Component, Path, PathBuf};

/// The begin marker of the section named `name`.
pub fn begin_marker(name: &str) -> String {
    format!("<!-- {name}: begin (generated; edits between the markers are overwritten) -->")
}

/// The end marker of the section named `name`.
pub fn end_marker(name: &str) -> String {
    format!("<!-- {name}: end -->")
}

/// `doc` with the text between the markers of `name` replaced by `body`; `None` when the
/// markers are not both there, begin first.
pub fn replace_section(doc: &str, name: &str, body: &str) -> Option<String> {
    let (begin, end) = (begin_marker(name), end_marker(name));
    let start = doc.find(&begin)? + begin.len();
    let stop = start + doc[start..].find(&end)?;
    let mut out = String::with_capacity(doc.len() + body.len());
    out.push_str(&doc[..start]);
    out.push('\n');
    out.push_str(body.trim_end());
    out.push('\n');
    out.push_str(&doc[stop..]);
    Some(out)
}

/// `to` relative to the directory `from` (both absolute, or both relative to the same
/// directory), with `/` separators, as a Markdown link wants it.
pub fn relative_path(from: &Path, to: &Path) -> String {
    fn parts(p: &Path) -> Vec<Component<'_>> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect()
    }
    let (from, to) = (parts(from), parts(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for c in &to[common..] {
        rel.push(c.as_os_str());
    }
    rel.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_between_the_markers_is_replaced_and_the_rest_kept() {
        let doc = format!(
            "# T\n\nbefore\n{}\nold\ntext\n{}\nafter\n",
            begin_marker("x"),
            end_marker("x")
        );
        let new = replace_section(&doc, "x", "new body\n\n").expect("markers present");
        assert_eq!(
            new,
            format!(
                "# T\n\nbefore\n{}\nnew body\n{}\nafter\n",
                begin_marker("x"),
                end_marker("x")
            )
        );
        // Writing twice gives the same document.
        assert_eq!(
            replace_section(&new, "x", "new body").as_deref(),
            Some(&*new)
        );
    }

    #[test]
    fn missing_or_misordered_markers_are_refused() {
        assert_eq!(replace_section("no markers", "x", "b"), None);
        let reversed = format!("{}\n{}", end_marker("x"), begin_marker("x"));
        assert_eq!(replace_section(&reversed, "x", "b"), None);
        assert_eq!(
            replace_section(
                &format!("{}{}", begin_marker("y"), end_marker("y")),
                "x",
                "b"
            ),
            None
        );
    }

    #[test]
    fn paths_are_made_relative_to_the_document() {
        assert_eq!(
            relative_path(
                Path::new("/r/docs"),
                Path::new("/r/results/sbs/plots/a.svg")
            ),
            "../results/sbs/plots/a.svg"
        );
        assert_eq!(
            relative_path(Path::new("docs"), Path::new("docs/p.svg")),
            "p.svg"
        );
        assert_eq!(
            relative_path(Path::new("./docs"), Path::new("results/x.svg")),
            "../results/x.svg"
        );
    }
}
