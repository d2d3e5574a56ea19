//! Importers: the logs coding-agent tools already write, read as an observer and
//! turned into episode packages. The contract is `docs/importers.md` (the contract
//! `importers-v1` in the project's own words); its sections are numbered as the
//! contract's, and "section N" / "§ N" in this crate's comments are its sections.
//!
//! No store and no Arrow here. An import runs in three phases, each its own function:
//!
//! 1. [`plan`]: walk the paths, detect each file's format by its content, and group
//!    files into [`Unit`]s (one run, or one part of a file that holds many: an Inspect
//!    sample member, a JSON Lines line), so a 1 GB log is read piece by piece and in
//!    parallel. Files another file supersedes are reported as covered here.
//! 2. [`read_unit`]: the format's module maps the unit's events to [`Recorder`] calls;
//!    the recorder applies the rules every source shares ([`shell`], checks, mutations,
//!    people, labels) and writes through the package crate's builder.
//! 3. The caller commits the [`Run`]s through the store's ingest, or writes them as
//!    package directories.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use epistore_package::BuiltPackage;

pub mod diff;
pub mod recorder;
pub mod secrets;
pub mod shell;

mod aider;
mod claude_code;
mod codex;
mod inspect;
mod mini_swe_agent;
mod openhands;
mod swe_agent;
mod swe_bench;

pub use recorder::{Call, EditKind, Grade, Part, Recorder, Verdict, IMPORTER};

/// The source formats (section 9 names, used by `--format` and `provenance.source_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    Inspect,
    ClaudeCode,
    Codex,
    SweAgent,
    MiniSweAgent,
    OpenHands,
    Aider,
    SweBench,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::Inspect,
        Format::ClaudeCode,
        Format::Codex,
        Format::SweAgent,
        Format::MiniSweAgent,
        Format::OpenHands,
        Format::Aider,
        Format::SweBench,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Inspect => "inspect",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::SweAgent => "swe-agent",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::OpenHands => "openhands",
            Format::Aider => "aider",
            Format::SweBench => "swe-bench",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// `harness.name`: the tool that wrote the log.
    pub fn harness(self) -> &'static str {
        match self {
            Format::Inspect => "inspect-ai",
            Format::SweBench => "swe-bench",
            other => other.name(),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the command line overrides (section 2's override column).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Read every given file as this format instead of detecting it.
    pub format: Option<Format>,
    pub model: Option<String>,
    pub harness_level: Option<String>,
    pub task: Option<String>,
    pub cluster: Option<String>,
    /// Inspect: the scorer whose value is the verdict (default: the sample's first).
    pub scorer: Option<String>,
    /// aider: a `git log -p` file that fills `paths` (kept under `artifacts/source/`).
    pub git_log: Option<PathBuf>,
    /// Replace the secrets found ([`secrets`]) in the source copies, the other files and
    /// the records before the package is finished (`--redact`); without it they are only
    /// counted, in [`Run::secrets`].
    pub redact: bool,
}

/// A log that cannot be imported, located as precisely as the log allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The file, as given or found.
    pub file: String,
    /// 1-based line, or a ZIP member / JSON key, when the problem is in one.
    pub place: Option<String>,
    pub reason: String,
}

impl Refusal {
    pub fn new(file: impl AsRef<str>, place: Option<String>, reason: impl Into<String>) -> Refusal {
        Refusal { file: file.as_ref().to_string(), place, reason: reason.into() }
    }
    pub fn at_line(file: impl AsRef<str>, line: usize, reason: impl Into<String>) -> Refusal {
        Refusal::new(file, Some(format!("line {line}")), reason)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Some(p) => write!(f, "{}: {}: {}", self.file, p, self.reason),
            None => write!(f, "{}: {}", self.file, self.reason),
        }
    }
}

impl std::error::Error for Refusal {}

/// One source file found by [`plan`], its format known.
#[derive(Debug)]
pub struct Input {
    pub path: PathBuf,
    pub format: Format,
    hash: OnceLock<Result<String, Refusal>>,
}

impl Input {
    pub fn new(path: PathBuf, format: Format) -> Input {
        Input { path, format, hash: OnceLock::new() }
    }

    /// The path as shown to the user.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// The file's own name, as `provenance.source_files` and `artifacts/source/` name it.
    pub fn file_name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "source".into())
    }

    /// blake3 of the whole file (hex), computed once, streaming.
    pub fn blake3(&self) -> Result<String, Refusal> {
        self.hash
            .get_or_init(|| {
                let mut hasher = blake3::Hasher::new();
                hasher
                    .update_reader(std::fs::File::open(&self.path).map_err(|e| self.io(e))?)
                    .map_err(|e| self.io(e))?;
                Ok(hasher.finalize().to_hex().to_string())
            })
            .clone()
    }

    pub fn read(&self) -> Result<Vec<u8>, Refusal> {
        std::fs::read(&self.path).map_err(|e| self.io(e))
    }

    /// The file as UTF-8 text.
    pub fn text(&self) -> Result<String, Refusal> {
        String::from_utf8(self.read()?).map_err(|e| {
            let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count();
            Refusal::at_line(self.display(), line, "not valid UTF-8")
        })
    }

    pub fn io(&self, e: std::io::Error) -> Refusal {
        Refusal::new(self.display(), None, format!("cannot read: {e}"))
    }

    pub fn refuse(&self, place: Option<String>, reason: impl Into<String>) -> Refusal {
        Refusal::new(self.display(), place, reason)
    }
}

/// One run to read: its files (the main log first) and which part of them.
#[derive(Debug, Clone)]
pub struct Unit {
    pub format: Format,
    pub files: Vec<Arc<Input>>,
    pub part: Part,
}

/// A verdict from a SWE-bench report, for the run with the same `instance_id`.
#[derive(Debug, Clone)]
pub struct ReportVerdict {
    pub instance_id: String,
    pub resolved: bool,
    /// The report file and its blake3, and the run's part of it (compact JSON).
    pub file: Arc<Input>,
    pub part_bytes: Vec<u8>,
}

/// What [`plan`] found.
#[derive(Debug, Default)]
pub struct Plan {
    pub units: Vec<Unit>,
    /// Files another file of the call supersedes (section 2), with the reason.
    pub covered: Vec<(Format, String, String)>,
    pub refused: Vec<(Option<Format>, Refusal)>,
    /// SWE-bench verdicts by instance id.
    pub reports: HashMap<String, ReportVerdict>,
    /// Files found while walking folders whose format nothing recognised (skipped).
    pub skipped: Vec<PathBuf>,
}

impl Plan {
    pub fn refuse(&mut self, format: Format, refusal: Refusal) {
        self.refused.push((Some(format), refusal));
    }
    pub fn cover(&mut self, format: Format, file: &Input, reason: impl Into<String>) {
        self.covered.push((format, file.display(), reason.into()));
    }
    /// The SWE-bench reports whose instance is none of `run_instances` (the
    /// `instance_id`s of the call's runs), by instance id: the command reports them,
    /// never drops them silently (section 9).
    pub fn unmatched_reports<S: AsRef<str>>(&self, run_instances: &[S]) -> Vec<&ReportVerdict> {
        let runs: std::collections::HashSet<&str> = run_instances.iter().map(AsRef::as_ref).collect();
        let mut unmatched: Vec<&ReportVerdict> =
            self.reports.values().filter(|r| !runs.contains(r.instance_id.as_str())).collect();
        unmatched.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        unmatched
    }
}

/// An imported run: its package and where it came from.
#[derive(Debug, Clone)]
pub struct Run {
    pub format: Format,
    pub package: BuiltPackage,
    /// The run's own source files as `blake3` or `blake3#part` (a SWE-bench report
    /// given beside it not included), for "already imported" (section 7).
    pub source_keys: Vec<String>,
    /// The verdict came from a SWE-bench report given in the same call.
    pub verdict_from_report: bool,
    /// The SWE-bench instance the run is, when known.
    pub instance_id: Option<String>,
    /// The secrets found in the package's files (source copies, patch) and records, by
    /// pattern name in [`secrets`] table order (each occurrence counted, so a token in a
    /// command and in the source copy counts twice): what the command warns about.
    /// With [`Options::redact`] they were replaced.
    pub secrets: Vec<(&'static str, usize)>,
}

/// Why a path given to `import` is neither a file nor a folder to read, in the words
/// of what it is (a missing path, a symbolic link loop, a pipe, a device).
fn not_readable(path: &Path) -> String {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::symlink_metadata(path) {
            Ok(_) => "a symbolic link to nothing (its target does not exist)".to_string(),
            Err(_) => "no such file or directory".to_string(),
        },
        Err(e) => format!("cannot be read: {e}"),
        Ok(m) => format!("{}, not a file or folder: import reads log files and folders of them", kind(&m.file_type())),
    }
}

#[cfg(unix)]
fn kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
fn kind(_: &std::fs::FileType) -> &'static str {
    "not a regular file"
}

/// Phase 1: walk the paths, detect formats, group files into units.
pub fn plan(paths: &[PathBuf], options: &Options) -> Plan {
    let mut plan = Plan::default();
    let mut found: Vec<(PathBuf, Option<Format>, bool)> = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files, &mut plan);
            for f in files {
                let format = options.format.or_else(|| detect(&f));
                found.push((f, format, false));
            }
        } else if path.is_file() {
            let format = options.format.or_else(|| detect(path));
            found.push((path.clone(), format, true));
        } else {
            plan.refused.push((None, Refusal::new(path.display().to_string(), None, not_readable(path))));
        }
    }
    let mut by_format: HashMap<Format, Vec<Arc<Input>>> = HashMap::new();
    for (path, format, explicit) in found {
        match format {
            Some(f) => by_format.entry(f).or_default().push(Arc::new(Input::new(path, f))),
            None if explicit => plan.refused.push((
                None,
                Refusal::new(path.display().to_string(), None, "not a log of any format this importer reads"),
            )),
            None => plan.skipped.push(path),
        }
    }
    // Reports first: they are matched to the runs of every other format.
    if let Some(reports) = by_format.remove(&Format::SweBench) {
        swe_bench::plan(reports, &mut plan);
    }
    let mut formats: Vec<Format> = by_format.keys().copied().collect();
    formats.sort();
    for format in formats {
        let inputs = by_format.remove(&format).unwrap_or_default();
        match format {
            Format::Inspect => inspect::plan(inputs, &mut plan),
            Format::ClaudeCode => claude_code::plan(inputs, &mut plan),
            Format::Codex => codex::plan(inputs, &mut plan),
            Format::SweAgent => swe_agent::plan(inputs, &mut plan),
            Format::MiniSweAgent => mini_swe_agent::plan(inputs, &mut plan),
            Format::OpenHands => openhands::plan(inputs, &mut plan),
            Format::Aider => aider::plan(inputs, &mut plan),
            Format::SweBench => unreachable!("planned above"),
        }
    }
    plan
}

/// One unit per file, the whole file: the plan of formats with one run per file.
pub(crate) fn whole_files(format: Format, inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    for input in inputs {
        plan.units.push(Unit { format, files: vec![input], part: Part::Whole });
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, plan: &mut Plan) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            plan.refused
                .push((None, Refusal::new(dir.display().to_string(), None, format!("cannot read folder: {e}"))));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    // A stable order, so the same folder gives the same plan (and report) every time.
    paths.sort();
    for path in paths {
        let hidden =
            path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.') && n != ".aider.chat.history.md");
        if hidden {
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => walk(&path, out, plan),
            Ok(m) if m.is_file() => out.push(path),
            _ => {} // links are not followed: a folder walk never leaves the folder
        }
    }
}

/// How many bytes of a file detection looks at.
const SNIFF_BYTES: usize = 64 * 1024;

/// The format of a file, from its content (the name only breaks ties).
pub fn detect(path: &Path) -> Option<Format> {
    use std::io::Read;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    std::fs::File::open(path).ok()?.take(SNIFF_BYTES as u64).read_to_end(&mut head).ok()?;
    detect_bytes(path, &head)
}

/// [`detect`] on the first bytes of a file.
pub fn detect_bytes(path: &Path, head: &[u8]) -> Option<Format> {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(Format::Inspect);
    }
    let text = String::from_utf8_lossy(head);
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    // Anywhere in the sniffed bytes: a history file given as a copy may open with the
    // tail of a session whose start was cut off (or an editor mode line).
    if text.lines().any(|l| l.trim_start_matches('\u{feff}').starts_with("# aider chat started at")) {
        return Some(Format::Aider);
    }
    // JSON Lines: the first line that is a whole JSON object tells.
    let first_line = trimmed.lines().next().unwrap_or("");
    if let Ok(serde_json::Value::Object(first)) = epistore_package::json_from_str::<serde_json::Value>(first_line) {
        let many_lines = trimmed.lines().nth(1).is_some_and(|l| l.trim_start().starts_with('{'));
        if many_lines || !trimmed.trim_end().ends_with('}') || name.ends_with(".jsonl") {
            if let Some(f) = detect_jsonl(&first, trimmed) {
                return Some(f);
            }
        }
    }
    detect_json_document(&name, trimmed)
}

fn detect_jsonl(first: &serde_json::Map<String, serde_json::Value>, text: &str) -> Option<Format> {
    let has = |k: &str| first.contains_key(k);
    let ty = first.get("type").and_then(|t| t.as_str()).unwrap_or("");
    if matches!(ty, "session_meta" | "response_item" | "event_msg" | "turn_context")
        || ty.starts_with("thread.")
        || ty.starts_with("turn.")
        || ty.starts_with("item.")
        || (has("id") && has("instructions") && has("timestamp"))
        || (has("record_type") && !has("sessionId"))
        || codex_more(first, text)
    {
        return Some(Format::Codex);
    }
    if has("sessionId")
        || has("session_id") && matches!(ty, "system" | "user" | "assistant" | "result")
        || matches!(ty, "file-history-snapshot" | "summary" | "queue-operation")
    {
        return Some(Format::ClaudeCode);
    }
    if has("instance_id") && (has("history") || has("test_result") || has("instruction")) {
        return Some(Format::OpenHands);
    }
    if has("instance_id") && has("model_patch") {
        // SWE-agent predictions: the run folder's `all_preds.jsonl`, read beside the
        // trajectories it belongs to, not a run of its own.
        return Some(Format::SweAgent);
    }
    // A Claude Code transcript may open with lines of other types; look further.
    if text.lines().take(200).any(|l| l.contains("\"sessionId\"")) {
        return Some(Format::ClaudeCode);
    }
    None
}

/// Codex shapes the test above misses: an old rollout whose first line left out
/// `instructions` (`{"id", "timestamp", "git"?}`, then bare response items), the
/// `session.created` of early `codex exec --json`, and the oldest `codex exec --json`
/// (a config summary, then `{"id", "msg": {"type": ...}}` protocol events).
fn codex_more(first: &serde_json::Map<String, serde_json::Value>, text: &str) -> bool {
    let has = |k: &str| first.contains_key(k);
    let ty = first.get("type").and_then(|t| t.as_str()).unwrap_or("");
    let second_is_item = || {
        let second = text.lines().nth(1).unwrap_or("");
        match epistore_package::json_from_str::<serde_json::Value>(second) {
            Ok(serde_json::Value::Object(v)) => {
                v.contains_key("record_type")
                    || matches!(
                        v.get("type").and_then(|t| t.as_str()),
                        Some("message" | "reasoning" | "function_call" | "function_call_output" | "local_shell_call")
                    )
            }
            _ => false,
        }
    };
    ty == "session.created"
        || (has("id") && has("timestamp") && !has("type") && first.len() <= 4 && (has("git") || second_is_item()))
        || (has("id") && first.get("msg").and_then(|m| m.get("type")).is_some_and(|t| t.is_string()))
        || (has("model") && has("approval") && has("sandbox") && !has("type"))
}

fn detect_json_document(name: &str, text: &str) -> Option<Format> {
    // Only the first bytes are here, so look for the keys as text near the top.
    let near = |key: &str| text.contains(&format!("\"{key}\""));
    if text.starts_with('{') {
        if near("eval") && (near("samples") || near("version")) && (near("task") || near("run_id")) {
            return Some(Format::Inspect);
        }
        if near("trajectory_format") && text.contains("mini-swe-agent") {
            return Some(Format::MiniSweAgent);
        }
        // OpenHands: one evaluation output pretty-printed, or a trajectory export
        // `{"trajectory": [events]}` (whose `"source": "environment"` events would
        // otherwise read as SWE-agent's `environment`).
        let openhands_source = text.contains("\"source\": \"agent\"") || text.contains("\"source\":\"agent\"");
        if openhands_source && near("observation") && (near("history") || near("trajectory")) {
            return Some(Format::OpenHands);
        }
        if near("trajectory") && (near("history") || near("info") || near("environment")) {
            return Some(Format::SweAgent);
        }
        if near("resolved_ids") || near("resolved") && near("patch_successfully_applied") || near("tests_status") {
            return Some(Format::SweBench);
        }
        if near("messages") && near("info") && (name.ends_with(".traj.json") || near("mini_version")) {
            return Some(Format::MiniSweAgent);
        }
        if name.ends_with(".pred") && near("model_patch") {
            // SWE-agent 1.x's prediction beside a trajectory, read with it.
            return Some(Format::SweAgent);
        }
        if near("model_patch") && near("instance_id") {
            // mini-SWE-agent's `preds.json`: predictions, not trajectories.
            return Some(Format::MiniSweAgent);
        }
        // A trajectory whose first bytes are all one long step (1.x steps carry the whole
        // query) shows none of the keys above: its name tells.
        if name.ends_with(".traj") {
            return Some(Format::SweAgent);
        }
        if name.ends_with(".traj.json") && (near("messages") || near("info")) {
            return Some(Format::MiniSweAgent);
        }
        return None;
    }
    if text.starts_with('[') {
        if near("observation") && near("source") && (near("action") || near("message")) {
            return Some(Format::OpenHands);
        }
        // An OpenHands trajectory of actions only (a chat that ran no tool).
        if near("action") && near("source") && near("args") && near("timestamp") {
            return Some(Format::OpenHands);
        }
        if near("instance_id") && near("model_patch") {
            return Some(Format::OpenHands);
        }
        if near("role") && near("content") && name.ends_with(".traj.json") {
            // A bare message list: refused by the module with its reason.
            return Some(Format::MiniSweAgent);
        }
    }
    if name.ends_with(".traj") {
        return Some(Format::SweAgent);
    }
    // SWE-agent's run configuration (0.x `args.yaml`, 1.x `<id>.config.yaml`), read with
    // the trajectories beside it.
    let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
    if yaml
        && (name == "args.yaml" || name.ends_with(".args.yaml") || name.ends_with("config.yaml"))
        && text.contains("agent")
        && (text.contains("model_name") || text.contains("per_instance_cost_limit"))
    {
        return Some(Format::SweAgent);
    }
    // OpenHands' SWE-bench evaluation log of one instance: its `[ID] report: {...}` line
    // is the harness's report (read by the swe-bench module, or refused there).
    if name.ends_with(".log") && (text.contains("] report: {") || text.contains("Starting evaluation for instance ")) {
        return Some(Format::SweBench);
    }
    None
}

/// What the store already holds, as far as an import needs to know (section 7).
pub trait Prior: Sync {
    /// The episode id of an earlier import of a log that has since grown: same source
    /// format and episode label, and its source file is a prefix of `file`.
    fn grown_from(&self, format: Format, episode: &str, file: &Path) -> Option<String>;
    /// The episode id of an earlier import of exactly these source parts (by
    /// [`Recorder::source_keys`]) that this run replaces: when the caller imports again
    /// on purpose (`--reimport`, after an upgrade that writes more), the new package
    /// supersedes the old one, so the run is counted once. `None` otherwise.
    fn replaced(&self, source_keys: &[String]) -> Option<String>;
}

/// What [`read_unit`] needs beside the unit.
pub struct Context<'a> {
    pub options: &'a Options,
    pub reports: &'a HashMap<String, ReportVerdict>,
    /// The store's earlier imports (none when writing packages with `--out`).
    pub prior: Option<&'a dyn Prior>,
}

/// About how many bytes reading `unit` holds at its peak (its source bytes, parsed,
/// packaged and compressed: four times them, as measured by `benches/import_memory.py`
/// on a 150 MiB log line, 632 MiB), for the caller to charge to its memory
/// budget before [`read_unit`]: a unit as large as the budget is read alone, so a few
/// large logs read on many threads at once cannot exhaust memory. A whole file counts
/// its size; an archive member its uncompressed size as declared (the reader refuses
/// one that decompresses past its limits). A line or object of a file counts nothing
/// here: the file is shared by its many units and read once per unit within the
/// per-file limits.
pub fn unit_bytes(unit: &Unit) -> u64 {
    let source = match &unit.part {
        Part::Whole => unit.files.iter().filter_map(|f| std::fs::metadata(&f.path).ok()).map(|m| m.len()).sum(),
        Part::Member(name) if unit.format == Format::Inspect => {
            unit.files.first().and_then(|f| inspect::member_size(f, name)).unwrap_or(0)
        }
        Part::Member(_) | Part::Line(_) | Part::Object(_) => 0,
    };
    source.saturating_mul(4)
}

/// Phase 2: read one unit into its runs (a unit may hold several, e.g. a JSON file of
/// OpenHands outputs), each finished into a validated package.
pub fn read_unit(unit: &Unit, ctx: &Context) -> Vec<Result<Run, Refusal>> {
    let recorders = match unit.format {
        Format::Inspect => inspect::read(unit, ctx),
        Format::ClaudeCode => claude_code::read(unit, ctx),
        Format::Codex => codex::read(unit, ctx),
        Format::SweAgent => swe_agent::read(unit, ctx),
        Format::MiniSweAgent => mini_swe_agent::read(unit, ctx),
        Format::OpenHands => openhands::read(unit, ctx),
        Format::Aider => aider::read(unit, ctx),
        Format::SweBench => Vec::new(),
    };
    recorders.into_iter().map(|r| r.and_then(|r| finish(r, unit, ctx))).collect()
}

fn finish(mut recorder: Recorder, unit: &Unit, ctx: &Context) -> Result<Run, Refusal> {
    let source_keys = recorder.source_keys();
    if let Some(prior) = ctx.prior {
        let grown = match &unit.part {
            Part::Whole => prior.grown_from(unit.format, recorder.episode(), &unit.files[0].path),
            _ => None,
        };
        if let Some(old) = grown.or_else(|| prior.replaced(&source_keys)) {
            recorder.supersedes(old);
        }
    }
    let mut verdict_from_report = false;
    if let Some(report) = recorder.instance_id.as_ref().and_then(|id| ctx.reports.get(id)) {
        if !recorder.has_verdict() {
            recorder.verdict(Verdict {
                name: "swe-bench".into(),
                value: if report.resolved { 1.0 } else { 0.0 },
                ts: None,
            });
            let hash = report.file.blake3()?;
            recorder.source(
                &report.file.file_name(),
                &hash,
                Part::Object(report.instance_id.clone()),
                report.part_bytes.clone(),
            )?;
            verdict_from_report = true;
        }
    }
    let format = recorder.format();
    let instance_id = recorder.instance_id.clone();
    // The recorder knows the run's files by name only; a refusal of the run names the
    // path of its log, as given.
    let (package, secrets) = recorder.finish(ctx.options).map_err(|mut refusal| {
        if let Some(first) = unit.files.first() {
            refusal.file = first.display();
        }
        refusal
    })?;
    Ok(Run { format, package, source_keys, verdict_from_report, instance_id, secrets })
}

/// Helpers for the format modules' tests: import fixtures exactly as the command does.
#[cfg(test)]
pub(crate) mod testing {
    use std::path::PathBuf;

    use super::*;

    /// (kind, mutates, ok, revision before it) of every action, in seq order.
    pub(crate) fn actions(e: &epistore_package::Episode) -> Vec<(String, bool, bool, u64)> {
        e.actions
            .iter()
            .flatten()
            .map(|a| (a.kind.clone().unwrap_or_default(), a.mutates, a.ok, a.common.revision))
            .collect()
    }

    /// A path under the repository's `tests/fixtures/real/` (real logs, with provenance).
    pub(crate) fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real").join(rel)
    }

    /// Plans and reads `paths` as `epistore import` does; panics on nothing.
    pub(crate) fn import_paths(paths: &[PathBuf], options: &Options) -> (Plan, Vec<Result<Run, Refusal>>) {
        let plan = plan(paths, options);
        let ctx = Context { options, reports: &plan.reports, prior: None };
        let runs = plan.units.iter().flat_map(|u| read_unit(u, &ctx)).collect();
        (plan, runs)
    }

    /// The runs of fixture files (relative paths), every one expected to import.
    pub(crate) fn import_ok(rels: &[&str], options: &Options) -> Vec<Run> {
        let paths: Vec<PathBuf> = rels.iter().map(|r| fixture(r)).collect();
        let (plan, runs) = import_paths(&paths, options);
        assert!(plan.refused.is_empty(), "refused while planning: {:?}", plan.refused);
        runs.into_iter().map(|r| r.unwrap_or_else(|e| panic!("refused: {e}"))).collect()
    }
}
