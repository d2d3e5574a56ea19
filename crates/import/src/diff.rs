//! Unified diffs of single edits (docs/format.md §9.2), for the formats whose logs give
//! the text before and after an edit rather than a patch.

use similar::TextDiff;

/// Lines of context around each change, as `diff -u` and git use.
const CONTEXT: usize = 3;

/// The unified diff that turns `old` into `new` for the file `path`: `--- a/PATH`,
/// `+++ b/PATH` (`/dev/null` for the side that does not exist: `old` `None` is a
/// created file, `new` `None` a deleted one), then hunks numbered in the texts given.
/// Empty when nothing changed.
pub fn unified(path: &str, old: Option<&str>, new: Option<&str>) -> String {
    let before = old.unwrap_or("");
    let after = new.unwrap_or("");
    if old.is_some() && new.is_some() && before == after {
        return String::new();
    }
    let path = path.trim_start_matches('/');
    let from = if old.is_some() { format!("a/{path}") } else { "/dev/null".to_string() };
    let to = if new.is_some() { format!("b/{path}") } else { "/dev/null".to_string() };
    let diff = TextDiff::from_lines(before, after);
    let mut out = diff.unified_diff().context_radius(CONTEXT).header(&from, &to).to_string();
    // `similar` writes "\ No newline at end of file" as git does; a hunk body must end
    // with a newline so diffs can be concatenated.
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// The diff of a replacement known only by its text (`old_string` -> `new_string`):
/// hunks are numbered from the replaced text's first line, not the file's (the caller
/// notes it with [`crate::recorder::Recorder::fragment_diff`]).
pub fn fragment(path: &str, old: &str, new: &str) -> String {
    unified(path, Some(old), Some(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_a_creation_and_a_deletion() {
        let old = "a\nb\nc\n";
        let new = "a\nB\nc\n";
        assert_eq!(
            unified("src/x.py", Some(old), Some(new)),
            "--- a/src/x.py\n+++ b/src/x.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(unified("n.txt", None, Some("hi\n")), "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+hi\n");
        assert_eq!(unified("/abs/n.txt", Some("hi\n"), None), "--- a/abs/n.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-hi\n");
        assert_eq!(unified("same", Some("x\n"), Some("x\n")), "");
    }

    #[test]
    fn a_missing_final_newline_is_marked_and_the_diff_still_ends_with_one() {
        let d = fragment("f", "x", "y");
        assert_eq!(
            d,
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+y\n\\ No newline at end of file\n"
        );
    }
}
