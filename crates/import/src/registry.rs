//! The importer registry: one [`Importer`] per source, one list ([`IMPORTERS`]) that
//! drives detection, `--format` names, help text, the docs check and the fuzz target's
//! cases. Adding a source is a folder with its importer and one line in the list.
//!
//! Detection asks every importer how sure it is that a file is its own
//! ([`Confidence`]) and takes the most confident; two at the same level is a tie,
//! reported to the user, never broken by the order of the list. A file no importer
//! claims gets a reason: a known source this build does not read ("looks like a Cline 4
//! session"), or what kind of file it is.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Context, Input, Options, Part, Plan, Recorder, Refusal, Unit};

/// A source format: its section 9 name (`--format`, `provenance.source_format`), one
/// per importer of [`IMPORTERS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Format(&'static str);

impl Format {
    /// The format of the given name. Only an importer names its own format; everyone
    /// else looks one up with [`Format::from_name`].
    pub const fn new(name: &'static str) -> Format {
        Format(name)
    }

    pub fn name(self) -> &'static str {
        self.0
    }

    /// The registered format of this name.
    pub fn from_name(name: &str) -> Option<Format> {
        IMPORTERS.iter().map(|i| i.format()).find(|f| f.0 == name)
    }

    /// Every registered format, in registry order.
    pub fn all() -> impl Iterator<Item = Format> {
        IMPORTERS.iter().map(|i| i.format())
    }

    /// The importer of this format.
    pub fn importer(self) -> &'static dyn Importer {
        *IMPORTERS.iter().find(|i| i.format() == self).unwrap_or_else(|| panic!("format {} has no importer", self.0))
    }

    /// `harness.name`: the tool that wrote the log.
    pub fn harness(self) -> &'static str {
        self.importer().harness()
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// How sure an importer is that a file is its own, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// Only the file's name or place says so (a `.traj` whose first bytes show no key).
    Name,
    /// Keys the source writes, that another source could also write.
    Shape,
    /// Keys or a layout only this source writes.
    Certain,
}

/// One source's reader: detection, planning and reading.
pub trait Importer: Sync {
    /// The source's name (section 9).
    fn format(&self) -> Format;
    /// `harness.name`: the tool that wrote the log (default: the format's name).
    fn harness(&self) -> &'static str {
        self.format().name()
    }
    /// What the source is, in a few words, for `--help` and the docs.
    fn about(&self) -> &'static str;
    /// File names this source writes, one per shape it reads: the fuzz target writes a
    /// case under each, and the docs name them.
    fn file_names(&self) -> &'static [&'static str];
    /// Whether `file` is this source's, from its first bytes and its name.
    fn detect(&self, file: &Sniff) -> Option<Confidence>;
    /// Groups this source's files of one call into units (phase 1). State found here
    /// that reading needs travels in the unit ([`Unit::planned`]).
    fn plan(&self, inputs: Vec<Arc<Input>>, options: &Options, plan: &mut Plan);
    /// Reads one unit into its runs' recorders (phase 2).
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>>;
    /// About how many bytes reading `unit` holds at its peak (see [`crate::unit_bytes`]):
    /// by default its whole files, four times.
    fn unit_bytes(&self, unit: &Unit) -> u64 {
        let source: u64 = match &unit.part {
            Part::Whole => unit.files.iter().filter_map(|f| std::fs::metadata(&f.path).ok()).map(|m| m.len()).sum(),
            Part::Member(_) | Part::Line(_) | Part::Object(_) => 0,
        };
        source.saturating_mul(4)
    }
}

/// Every source this build reads. SWE-bench comes first: its reports are planned
/// before the runs of every other source, which take their verdicts from them.
pub static IMPORTERS: &[&dyn Importer] = &[
    &crate::swe_bench::SweBench,
    &crate::inspect::Inspect,
    &crate::claude_code::ClaudeCode,
    &crate::codex::Codex,
    &crate::swe_agent::SweAgent,
    &crate::mini_swe_agent::MiniSweAgent,
    &crate::openhands::OpenHands,
    &crate::aider::Aider,
    &crate::atif::Atif,
    &crate::gemini_cli::GeminiCli,
    &crate::pi::Pi,
    &crate::copilot::Copilot,
    &crate::opencode::OpenCode,
    &crate::cline::Cline,
    &crate::goose::Goose,
    &crate::terminal_bench::TerminalBench,
    &crate::trajectories::Trajectories,
    &crate::otel::CLAUDE_CODE,
    &crate::otel::CODEX,
    &crate::otel::GEMINI_CLI,
];

/// How many bytes of a file detection looks at.
pub const SNIFF_BYTES: usize = 64 * 1024;

/// `"key"` appears in these bytes. Over the raw bytes with memchr's searcher: detection
/// asks this of every file for every importer, and an ASCII key matches the bytes
/// exactly where it matches their lossy text.
pub(crate) fn quoted_in(head: &[u8], key: &str) -> bool {
    memchr::memmem::find(head, format!("\"{key}\"").as_bytes()).is_some()
}

/// What detection sees of a file: its name and first bytes, read once and shared by
/// every importer's [`Importer::detect`].
pub struct Sniff<'a> {
    pub path: &'a Path,
    /// The file's own name, lower case.
    pub name: String,
    pub head: &'a [u8],
    /// The first bytes as text (lossy), a byte order mark and leading blanks trimmed.
    pub text: Cow<'a, str>,
    /// The first line, when the file reads as JSON Lines (its first line a whole JSON
    /// object, and more lines of objects, or no closing brace at the end of the sniffed
    /// bytes, or a `.jsonl` name).
    pub first: Option<Map<String, Value>>,
}

impl<'a> Sniff<'a> {
    pub fn new(path: &'a Path, head: &'a [u8]) -> Sniff<'a> {
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        let text = match String::from_utf8_lossy(head) {
            Cow::Borrowed(t) => Cow::Borrowed(t.trim_start_matches('\u{feff}').trim_start()),
            Cow::Owned(t) => Cow::Owned(t.trim_start_matches('\u{feff}').trim_start().to_string()),
        };
        let first_line = text.lines().next().unwrap_or("");
        let first = match epistore_package::json_from_str::<Value>(first_line) {
            Ok(Value::Object(first)) => {
                let many_lines = text.lines().nth(1).is_some_and(|l| l.trim_start().starts_with('{'));
                (many_lines || !text.trim_end().ends_with('}') || name.ends_with(".jsonl")).then_some(first)
            }
            _ => None,
        };
        Sniff { path, name, head, text, first }
    }

    /// The key appears, quoted, in the sniffed text.
    pub fn near(&self, key: &str) -> bool {
        quoted_in(self.head, key)
    }

    /// The first line (of a JSON Lines file) has this key.
    pub fn first_has(&self, key: &str) -> bool {
        self.first.as_ref().is_some_and(|f| f.contains_key(key))
    }

    /// The first line's `type`, when it is a string.
    pub fn first_type(&self) -> &str {
        self.first.as_ref().and_then(|f| f.get("type")).and_then(Value::as_str).unwrap_or("")
    }

    /// The lines of the sniffed text that parse as JSON objects (the last, cut short
    /// by the sniff, usually does not).
    pub fn objects(&self) -> impl Iterator<Item = Map<String, Value>> + '_ {
        self.text.lines().filter_map(|l| match epistore_package::json_from_str::<Value>(l) {
            Ok(Value::Object(o)) => Some(o),
            _ => None,
        })
    }

    /// A name of one of the folders the file is in (`a/b/c.json`: `a` or `b`).
    pub fn in_folder(&self, folder: &str) -> bool {
        self.path.parent().is_some_and(|p| p.components().any(|c| c.as_os_str() == folder))
    }
}

/// What detection made of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detection {
    Found(Format),
    /// Two or more importers are as sure as each other: the user says which
    /// (`--format`).
    Tie(Vec<Format>),
    /// No importer claims the file: why, in words ("looks like a Cline 4 session, a
    /// format this build does not read").
    Unknown(String),
}

impl Detection {
    pub fn format(&self) -> Option<Format> {
        match self {
            Detection::Found(f) => Some(*f),
            _ => None,
        }
    }

    /// Why the file is not read, for a refusal or the skipped-files summary.
    pub fn reason(&self) -> Option<String> {
        match self {
            Detection::Found(_) => None,
            Detection::Tie(formats) => {
                let names: Vec<&str> = formats.iter().map(|f| f.name()).collect();
                Some(format!(
                    "as much a log of {} as of {}: say which with --format",
                    names[..names.len() - 1].join(", "),
                    names[names.len() - 1]
                ))
            }
            Detection::Unknown(why) => Some(why.clone()),
        }
    }
}

/// The format of a file, from its content (the name only breaks ties).
pub fn detect(path: &Path) -> Option<Format> {
    classify(path).format()
}

/// [`detect`] on the first bytes of a file.
pub fn detect_bytes(path: &Path, head: &[u8]) -> Option<Format> {
    classify_bytes(path, head).format()
}

/// Why a credentials file is not read.
pub(crate) const CREDENTIALS: &str = "a credentials file: never opened";

/// The credentials files agents keep beside their sessions (OpenCode's and Codex's
/// `auth.json`), by name: never opened, not even to detect a format.
pub(crate) fn is_credentials(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    matches!(name.as_str(), "auth.json" | "mcp-auth.json" | ".credentials.json" | "credentials.json")
}

/// What detection makes of a file, with the reason when no importer takes it.
pub fn classify(path: &Path) -> Detection {
    use std::io::Read;
    if is_credentials(path) {
        return Detection::Unknown(CREDENTIALS.into());
    }
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    let read = std::fs::File::open(path).and_then(|f| f.take(SNIFF_BYTES as u64).read_to_end(&mut head));
    if let Err(e) = read {
        return Detection::Unknown(format!("cannot be read: {e}"));
    }
    classify_bytes(path, &head)
}

/// [`classify`] on the first bytes of a file.
pub fn classify_bytes(path: &Path, head: &[u8]) -> Detection {
    let sniff = Sniff::new(path, head);
    let claims: Vec<(Confidence, Format)> =
        IMPORTERS.iter().filter_map(|i| i.detect(&sniff).map(|c| (c, i.format()))).collect();
    let Some(best) = claims.iter().map(|(c, _)| *c).max() else {
        return Detection::Unknown(unread_source(&sniff));
    };
    let mut top: Vec<Format> = claims.iter().filter(|(c, _)| *c == best).map(|(_, f)| *f).collect();
    top.dedup();
    match top.as_slice() {
        [one] => Detection::Found(*one),
        _ => Detection::Tie(top),
    }
}

/// Why no importer takes a file: the source it looks like when that is a known source
/// this build does not read, else what kind of file it is.
fn unread_source(s: &Sniff) -> String {
    let unread = |source: &str| format!("looks like {source}, a format this build does not read");
    let name = s.name.as_str();
    if name.ends_with(".messages.json") && s.near("sessionId") && s.near("messages") {
        return unread("a Cline 4 session");
    }
    if name == "state.vscdb" {
        return unread("an editor's state store (VS Code, Cursor)");
    }
    let kind = if s.head.starts_with(b"SQLite format 3") {
        " (an SQLite database)"
    } else if s.head.contains(&0) {
        " (a binary file)"
    } else if s.first.is_some() {
        " (JSON Lines)"
    } else if s.text.starts_with('{') || s.text.starts_with('[') {
        " (a JSON document)"
    } else if s.text.is_empty() {
        " (an empty file)"
    } else {
        ""
    };
    format!("not a log of any format this importer reads{kind}")
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
