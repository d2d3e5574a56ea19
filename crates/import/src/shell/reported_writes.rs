//! Whether an opaque command's output plainly reports that it wrote files: a script or
//! generator that prints `Wrote src/schema.json`, `updated 3 files`, `saved to
//! out/report.csv`, `2 files reformatted`. The command's effect cannot be told from its
//! text, but its own report of a write can: such a command is an `inferred` possible
//! mutation (docs/importers.md §10), so no check before it is derived `current`.
//!
//! The report must name what was written: a path (with a `/` or a file extension) or a
//! positive count of files. A bare verb ("Created test database", "Saved lockfile",
//! "Updated index") is not a report of a workspace write.

use regex::Regex;
use std::sync::OnceLock;

/// What an output reports writing: the paths it names (as written) and whether it
/// reports a count of files without naming them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportedWrite {
    pub paths: Vec<String>,
    pub counted: bool,
}

struct Res {
    /// `Wrote src/a.py`, `updated file src/a.py`, `Created: docs/x.md`
    verb_path: Regex,
    /// `saved to src/a.json`, `written to out/x`, `writing into build/x`
    verb_to_path: Regex,
    /// `3 files updated`, `1 file reformatted`, `2 files were written`
    count_verb: Regex,
    /// `updated 3 files`, `Wrote 12 files`, `reformatted 1 file`
    verb_count: Regex,
}

const VERBS: &str = "wrote|written|rewrote|rewritten|updated|created|modified|saved|generated|regenerated|\
                     reformatted|patched|overwrote|overwritten|fixed";

fn res() -> &'static Res {
    static RES: OnceLock<Res> = OnceLock::new();
    RES.get_or_init(|| {
        let re = |s: String| Regex::new(&s).expect("regex");
        Res {
            verb_path: re(format!(r"(?i)^[\s\-*•✓✔>\[\]:a-z]*?\b(?:{VERBS})\b(?:\s+file)?:?\s+(\S+)")),
            verb_to_path: re(format!(r"(?i)\b(?:{VERBS}|writing|saving)\b(?:\s+\S+)?\s+(?:to|into|at)\s+(\S+)")),
            count_verb: re(format!(
                r"(?i)\b(\d+)\s+files?\s+(?:were\s+|was\s+|have\s+been\s+|has\s+been\s+)?(?:{VERBS})\b"
            )),
            verb_count: re(format!(r"(?i)\b(?:{VERBS})\s+(\d+)\s+files?\b")),
        }
    })
}

/// A word that reads as a file path: it has a `/` or ends in a short extension, and is
/// no URL.
fn path_like(word: &str) -> Option<&str> {
    let w = word.trim_matches(|c: char| matches!(c, '\'' | '"' | '`' | '(' | ')' | ',' | ';' | ':' | '.' | '!'));
    if w.is_empty() || w.contains("://") || w.starts_with('-') {
        return None;
    }
    let name = w.rsplit('/').next().unwrap_or(w);
    let has_ext = name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && (1..=8).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric())
    });
    let has_digits_only_ext = name.rsplit_once('.').is_some_and(|(_, ext)| ext.chars().all(|c| c.is_ascii_digit()));
    ((w.contains('/') && w.len() > 1) || (has_ext && !has_digits_only_ext)).then_some(w)
}

/// What `output` reports writing, or None when it reports no write.
pub fn reported_write(output: &str) -> Option<ReportedWrite> {
    let r = res();
    let mut found = ReportedWrite::default();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        for re in [&r.verb_path, &r.verb_to_path] {
            if let Some(p) = re.captures(line).and_then(|c| c.get(1)).and_then(|m| path_like(m.as_str())) {
                if !found.paths.iter().any(|q| q == p) {
                    found.paths.push(p.to_string());
                }
            }
        }
        for re in [&r.count_verb, &r.verb_count] {
            if re.captures(line).and_then(|c| c[1].parse::<u64>().ok()).is_some_and(|n| n > 0) {
                found.counted = true;
            }
        }
    }
    (found.counted || !found.paths.is_empty()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(output: &str) -> Vec<String> {
        reported_write(output).map(|r| r.paths).unwrap_or_default()
    }

    #[test]
    fn reports_that_name_a_path_or_count_files_are_writes() {
        assert_eq!(paths("Wrote src/schema.json"), ["src/schema.json"]);
        assert_eq!(paths("Output: Generated src/api/schema.json (3 ms)"), ["src/api/schema.json"]);
        assert_eq!(paths("✓ Generated src/api/client.ts (12 ms)"), ["src/api/client.ts"]);
        assert_eq!(paths("Results saved to out/report.csv."), ["out/report.csv"]);
        assert_eq!(paths("Updated file: 'tests/snapshots/a.snap'"), ["tests/snapshots/a.snap"]);
        assert_eq!(paths("reformatted src/app.py\nAll done! 1 file reformatted."), ["src/app.py"]);
        assert!(reported_write("updated 3 files").unwrap().counted);
        assert!(reported_write("Found 4 errors (4 fixed, 0 remaining).\n2 files were modified").unwrap().counted);
    }

    #[test]
    fn bare_verbs_counts_of_zero_and_other_words_are_not() {
        for output in [
            "Creating test database for alias 'default'...\nCreated test database",
            "Saved lockfile",
            "Updated index",
            "0 files reformatted, 3 files left unchanged",
            "Successfully installed requests-2.31.0",
            "added 120 packages in 3s",
            "Created wheel for foo: filename=foo-1.0-py3-none-any.whl",
            "fixed version 1.2",
            "See https://example.org/updated/page.html",
            "Traceback (most recent call last):\n  File \"reproduce.py\", line 3",
            "",
        ] {
            assert_eq!(reported_write(output), None, "{output}");
        }
    }
}
