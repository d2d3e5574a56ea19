//! Shell commands as docs/importers.md §4 reads them: a command split into segments, each
//! unwrapped and classified (check, mutation, read, inert, opaque), and the § 3 / § 4 rules
//! that turn what a log shows of a call (exit code, time-out, output) into check results.
//!
//! Everything here is a function of the command text, and of the working directory when the
//! log names it: an importer never runs anything, so the rules can only read what was written.
//!
//! The rules are spread over one file per job:
//!
//! - `quote`, `lex`, `split`: the command's text made tokens (quotes, substitutions,
//!   redirections, here-documents), then top-level segments of pipelines with their joiners;
//! - `unwrap`: the wrappers (`env`, `timeout`, `uv run`, `bash -c`, ...) taken off a command;
//! - `classify` and the tables it calls (`args`, `checks`, `git`, `edits`, `search`,
//!   `python`): what one unwrapped command is;
//! - `paths`: whether a path a mutation names lies inside the workspace;
//! - `segments`: a command flattened into [`Segment`]s (shells inside shells, the SWE-agent
//!   edit block, the declared commands);
//! - `result`: § 3 / § 4 check results, summary lines and exit codes written in text;
//! - `python_writes`: whether Python code writes a file.

mod args;
mod checks;
mod classify;
mod edits;
mod git;
mod lex;
mod paths;
mod python;
mod python_writes;
mod quote;
mod reported_writes;
mod result;
mod search;
mod segments;
mod split;
mod unwrap;

#[cfg(test)]
mod tests;

pub use python_writes::python_writes_file;
pub use reported_writes::{reported_write, ReportedWrite};
pub use result::{check_result, exit_code_from_text, mutation_ok, summary_result};

use paths::{norm_path, Ctx, Cwd};
use segments::{apply_declared, flatten, split_editor_block};

/// Commands the harness itself declared (aider --test-cmd / --lint-cmd). A segment equal
/// to one of these (after whitespace normalisation) is registered_test / lint.
#[derive(Debug, Clone, Default)]
pub struct Declared {
    pub test_cmd: Option<String>,
    pub lint_cmd: Option<String>,
}

/// `&&`, `||`, `;` or newline.
// Reading: a background `&` separates commands like `;` (§ 4 does not name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joiner {
    And,
    Or,
    Seq,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SegmentKind {
    /// method is one of: targeted_test, regression, reproduction, lint, deterministic_check,
    /// registered_test
    Check { method: &'static str, check_id: String },
    /// a derived mutation. kind: "edit" | "create" | "delete"; paths: the files it names (as
    /// written). `inside` is false when all its paths lie outside the workspace (then it is
    /// recorded mutates:false).
    Mutation { kind: &'static str, paths: Vec<String>, inside: bool },
    /// reading commands: kind "read" or "search"
    Read { kind: &'static str, paths: Vec<String> },
    /// does nothing to files and is not opaque (cd, export, git commit / add / stash, ...)
    Inert,
    /// anything whose effect on files the rules cannot tell
    Opaque,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// the segment's text as written (trimmed), after unwrapping shells
    pub text: String,
    /// the unwrapped head's words (first command of a pipe, wrappers removed), shell-unquoted
    pub head: Vec<String>,
    pub piped: bool,
    /// the joiner before this segment in the (flattened) command; None for the first
    pub before: Option<Joiner>,
    pub kind: SegmentKind,
    /// The segment runs in a directory known to lie outside the workspace (after `cd
    /// /srv/other`, or in a call whose working directory is elsewhere): a test there is
    /// no evidence about the workspace.
    pub elsewhere: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub segments: Vec<Segment>,
    /// true when the tool call counts as opaque (provenance.opaque_calls): some segment is Opaque.
    pub opaque: bool,
}

/// Splits and classifies a shell command. `workdir`: the run's working directory when the log names
/// it (absolute paths outside it are outside the workspace; paths under /tmp, /dev, /proc, ~ or
/// $HOME always are).
pub fn analyse(command: &str, workdir: Option<&str>, declared: &Declared) -> Analysis {
    analyse_in(command, workdir, None, declared)
}

/// [`analyse`] of a command run in directory `cwd` (a call's own working directory,
/// absolute or relative to the workspace `workdir`) rather than in the workspace.
pub fn analyse_in(command: &str, workdir: Option<&str>, cwd: Option<&str>, declared: &Declared) -> Analysis {
    let wd = workdir.map(norm_path).filter(|w| w.starts_with('/'));
    let start = match (cwd.filter(|c| !c.trim().is_empty()), &wd) {
        (Some(c), _) if c.starts_with('/') => Cwd::Known(norm_path(c)),
        (Some(c), Some(w)) => Cwd::Known(norm_path(&format!("{w}/{c}"))),
        (Some(_), None) => Cwd::Unknown,
        (None, _) => wd.clone().map_or(Cwd::Unknown, Cwd::Known),
    };
    let mut ctx = Ctx { cwd: start, workdir: wd };
    let mut segments = Vec::new();
    let (editor, rest) = split_editor_block(command);
    let before = editor.as_ref().map(|_| Joiner::Seq);
    segments.extend(editor);
    flatten(rest, 0, before, false, &mut ctx, &mut segments);
    apply_declared(command, &mut segments, declared);
    let opaque = segments.iter().any(|s| s.kind == SegmentKind::Opaque);
    Analysis { segments, opaque }
}

/// Whitespace runs made one space, trimmed (used for check_id and for Declared matching).
/// Whether `path` lies inside the workspace whose root is `workdir` (when known), by the
/// rules a shell mutation's paths follow: `~`, `/tmp`, `/dev` and `/proc` are outside,
/// and so is an absolute path outside a known working directory.
pub fn inside_workspace(path: &str, workdir: Option<&str>) -> bool {
    let ctx = paths::Ctx {
        workdir: workdir.map(paths::norm_path),
        cwd: workdir.map_or(paths::Cwd::Unknown, |w| paths::Cwd::Known(paths::norm_path(w))),
    };
    ctx.inside(path)
}

pub fn normalise_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
