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
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use epistore_package::BuiltPackage;

mod common;
pub mod diff;
pub mod recorder;
mod registry;
pub mod secrets;
pub mod shell;
mod sqlite;
mod tools;

mod aider;
mod atif;
mod claude_code;
mod cline;
mod codex;
mod copilot;
mod gemini_cli;
mod goose;
mod inspect;
mod mini_swe_agent;
mod opencode;
mod openhands;
pub mod otel;
mod pi;
mod swe_agent;
mod swe_bench;
mod terminal_bench;
mod trajectories;

pub use recorder::{source_artifact, Call, EditKind, Grade, Part, Recorder, Verdict, IMPORTER};
pub use registry::{
    classify, classify_bytes, detect, detect_bytes, Confidence, Detection, Format, Importer, Sniff, IMPORTERS,
    SNIFF_BYTES,
};
pub use trajectories::{Mapping, RowFiles, RowReader, Rows};

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
    /// Trajectory datasets: a JSON file naming which columns hold what
    /// ([`trajectories::Mapping`]); without it, the public corpora's usual names.
    pub mapping: Option<PathBuf>,
    /// The logs are still being written (`epistore watch`): a JSON Lines file whose
    /// last line has not ended is skipped, to be read once it has.
    pub growing: bool,
    /// Trajectory datasets as Parquet: the reader (a crate that may use Arrow); without
    /// one, a Parquet file is refused with a reason.
    pub row_files: Option<RowReader>,
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
    /// The file's length when it was first read: every later read (parse, hash, source
    /// copy) takes exactly that many bytes, so a log an agent is still appending to is
    /// imported as one consistent snapshot, its copy hashing to the recorded blake3.
    snapshot: OnceLock<u64>,
    /// The file's bytes, when it is not read from disk (a stored copy read again).
    memory: Option<Arc<[u8]>>,
}

impl Input {
    pub fn new(path: PathBuf, format: Format) -> Input {
        Input { path, format, hash: OnceLock::new(), snapshot: OnceLock::new(), memory: None }
    }

    /// A file given by its bytes (a source copy the store keeps), named `path`.
    pub fn in_memory(path: PathBuf, format: Format, bytes: Vec<u8>) -> Input {
        Input { memory: Some(bytes.into()), ..Input::new(path, format) }
    }

    /// The path as shown to the user.
    pub fn display(&self) -> String {
        self.path.display().to_string()
    }

    /// The file's own name, as `provenance.source_files` and `artifacts/source/` name it.
    pub fn file_name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "source".into())
    }

    /// blake3 of the whole file (hex) as of its snapshot, computed once, streaming.
    pub fn blake3(&self) -> Result<String, Refusal> {
        self.hash
            .get_or_init(|| {
                let mut hasher = blake3::Hasher::new();
                let mut counted = Counted { inner: self.open()?, bytes: 0 };
                hasher.update_reader(&mut counted).map_err(|e| self.io(e))?;
                self.snapshot.get_or_init(|| counted.bytes);
                Ok(hasher.finalize().to_hex().to_string())
            })
            .clone()
    }

    /// The file's bytes as of its snapshot (the first read fixes it).
    pub fn read(&self) -> Result<Vec<u8>, Refusal> {
        let mut bytes = Vec::new();
        self.open()?.read_to_end(&mut bytes).map_err(|e| self.io(e))?;
        self.snapshot.get_or_init(|| bytes.len() as u64);
        Ok(bytes)
    }

    /// The file to read from the start, cut at its snapshot once there is one (the
    /// head a plan sniffs; a file given by its bytes reads them).
    pub fn open(&self) -> Result<Box<dyn Read + '_>, Refusal> {
        if let Some(bytes) = &self.memory {
            return Ok(Box::new(&bytes[..]));
        }
        let file = std::fs::File::open(&self.path).map_err(|e| self.io(e))?;
        Ok(Box::new(file.take(self.snapshot.get().copied().unwrap_or(u64::MAX))))
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

/// A reader that counts what it gives.
struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

/// One run to read: its files (the main log first) and which part of them.
#[derive(Debug, Clone)]
pub struct Unit {
    pub format: Format,
    pub files: Vec<Arc<Input>>,
    pub part: Part,
    /// What the source's plan found that reading needs (an archive's directory, a
    /// run's byte span in its file): it travels in the unit, so nothing of a call
    /// outlives it (no process-wide cache).
    pub planned: Option<Planned>,
}

impl Unit {
    pub fn new(format: Format, files: Vec<Arc<Input>>, part: Part) -> Unit {
        Unit { format, files, part, planned: None }
    }

    /// The unit with what its plan found.
    pub fn with<T: std::any::Any + Send + Sync>(mut self, planned: T) -> Unit {
        self.planned = Some(Planned(Arc::new(planned)));
        self
    }

    /// What its plan found, when it is a `T`.
    pub fn planned<T: std::any::Any>(&self) -> Option<&T> {
        self.planned.as_ref().and_then(|p| p.0.downcast_ref())
    }
}

/// A source's planning state for one unit ([`Unit::planned`]).
#[derive(Clone)]
pub struct Planned(Arc<dyn std::any::Any + Send + Sync>);

impl fmt::Debug for Planned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Planned(..)")
    }
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
    /// Files found while walking folders that no importer takes (skipped), each with
    /// the reason: a source this build does not read, a tie, or what the file is.
    pub skipped: Vec<(PathBuf, String)>,
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
    let mut found: Vec<(PathBuf, Detection, bool)> = Vec::new();
    let detection = |path: &Path| {
        // Agents keep their credentials beside their sessions (OpenCode's and Codex's
        // `auth.json`): such a file is never opened, not even to detect its format.
        if registry::is_credentials(path) {
            return Detection::Unknown(registry::CREDENTIALS.into());
        }
        match options.format {
            Some(f) => Detection::Found(f),
            None => classify(path),
        }
    };
    for path in paths {
        if path.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files, &mut plan);
            for f in files {
                let detected = detection(&f);
                found.push((f, detected, false));
            }
        } else if path.is_file() {
            found.push((path.clone(), detection(path), true));
        } else {
            plan.refused.push((None, Refusal::new(path.display().to_string(), None, not_readable(path))));
        }
    }
    let mut by_format: HashMap<Format, Vec<Arc<Input>>> = HashMap::new();
    for (path, detected, explicit) in found {
        if options.growing && detected.format().is_some() && mid_line(&path) {
            plan.skipped.push((path, "written mid-line: read once its last line ends".into()));
            continue;
        }
        match (detected.format(), detected.reason()) {
            (Some(f), _) => by_format.entry(f).or_default().push(Arc::new(Input::new(path, f))),
            // A file given by name is refused; one found in a folder is skipped, with
            // the reason, for the summary to group.
            (None, Some(why)) if explicit => {
                plan.refused.push((None, Refusal::new(path.display().to_string(), None, why)))
            }
            (None, why) => plan.skipped.push((path, why.unwrap_or_default())),
        }
    }
    // In registry order: SWE-bench reports first, matched to the runs of every other
    // format; mini-SWE-agent's predictions after SWE-agent's trajectories.
    for importer in IMPORTERS {
        if let Some(inputs) = by_format.remove(&importer.format()) {
            importer.plan(inputs, options, &mut plan);
        }
    }
    plan
}

/// A JSON Lines file whose last line has not ended (its writer is writing it): no
/// newline at its end, and its last line not a whole JSON value (some writers end the
/// last line without one).
fn mid_line(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let mut head = Vec::new();
    if file.by_ref().take(SNIFF_BYTES as u64).read_to_end(&mut head).is_err() || !head.contains(&b'\n') {
        return false; // one line at most: no JSON Lines file being written
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    if !matches!(epistore_package::json_from_slice::<serde_json::Value>(first), Ok(serde_json::Value::Object(_))) {
        return false;
    }
    // The last line: back from the end to the last newline.
    let Ok(len) = file.seek(SeekFrom::End(0)) else { return false };
    let mut tail = Vec::new();
    let mut from = len;
    loop {
        let step = from.min(64 * 1024);
        from -= step;
        let mut chunk = vec![0u8; step as usize];
        if file.seek(SeekFrom::Start(from)).and_then(|_| file.read_exact(&mut chunk)).is_err() {
            return false;
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if tail.last() == Some(&b'\n') {
            return false;
        }
        if let Some(at) = tail.iter().rposition(|&b| b == b'\n') {
            return epistore_package::json_from_slice::<serde_json::Value>(&tail[at + 1..]).is_err();
        }
        if from == 0 {
            return false;
        }
    }
}

/// One unit per file, the whole file: the plan of formats with one run per file.
pub(crate) fn whole_files(format: Format, inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    for input in inputs {
        plan.units.push(Unit::new(format, vec![input], Part::Whole));
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
    /// The latest stored import of `format`'s run `episode`: a run read again from a
    /// store that keeps it as records (an OpenCode session), whose source part changes
    /// as it grows, replaces it.
    fn latest(&self, format: Format, episode: &str) -> Option<String>;
    /// The stored episode of the same session from the agent's other source (section
    /// 9.18, "a session seen both ways"): for telemetry (`format` `claude-code-otel`),
    /// the latest episode read from the session's file; for a session file, the latest
    /// episode that holds the session's telemetry (a telemetry episode, or a merged one).
    fn companion(&self, _format: Format, _episode: &str) -> Option<Companion> {
        None
    }
}

/// A stored episode of the same session from another source, with its source copies.
#[derive(Debug, Clone)]
pub struct Companion {
    pub episode_id: String,
    /// Its `provenance.source_format`.
    pub format: Format,
    /// Its source files, in provenance order.
    pub sources: Vec<Source>,
}

/// A source file as a stored episode keeps it: its provenance entry and its copy.
#[derive(Debug, Clone)]
pub struct Source {
    pub name: String,
    /// Of the whole file.
    pub blake3: String,
    /// The run's part of the file, when it is one.
    pub part: Option<String>,
    /// The copy (`artifacts/source/`): the part, when there is one.
    pub bytes: Vec<u8>,
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
    unit.format.importer().unit_bytes(unit)
}

/// Phase 2: read one unit into its runs (a unit may hold several, e.g. a JSON file of
/// OpenHands outputs), each finished into a validated package.
pub fn read_unit(unit: &Unit, ctx: &Context) -> Vec<Result<Run, Refusal>> {
    let recorders = unit.format.importer().read(unit, ctx);
    recorders.into_iter().map(|r| r.and_then(|r| finish(r, unit, ctx))).collect()
}

fn finish(mut recorder: Recorder, unit: &Unit, ctx: &Context) -> Result<Run, Refusal> {
    // The run's own source parts: a merge below adds the companion's, already stored.
    let source_keys = recorder.source_keys();
    if let Some(prior) = ctx.prior {
        let grown = match &unit.part {
            Part::Whole => prior.grown_from(unit.format, recorder.episode(), &unit.files[0].path),
            _ => None,
        };
        let mut supersedes = grown.or_else(|| prior.replaced(&source_keys));
        if let Some((agent, telemetry)) = otel::Agent::of(unit.format) {
            let (merged, companion) = otel::merge::with_companion(recorder, agent, telemetry, unit, ctx, prior)?;
            recorder = merged;
            // Telemetry merged into a stored session file supersedes that episode; a
            // session file supersedes its own earlier import first.
            supersedes = match telemetry {
                true => companion.or(supersedes),
                false => supersedes.or(companion),
            };
        }
        if let Some(old) = supersedes {
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

    /// A path under the repository's `tests/fixtures/` (`real/...` or `constructed/...`).
    pub(crate) fn fixtures(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(rel)
    }

    /// The runs of `path` as `epistore import` reads them, every one expected to import.
    pub(crate) fn import_all(path: &std::path::Path, options: &Options) -> Vec<Run> {
        let (plan, runs) = import_paths(&[path.to_path_buf()], options);
        assert!(plan.refused.is_empty(), "refused while planning: {:?}", plan.refused);
        runs.into_iter().map(|r| r.unwrap_or_else(|e| panic!("refused: {e}"))).collect()
    }

    /// The runs of fixture files (relative paths), every one expected to import.
    pub(crate) fn import_ok(rels: &[&str], options: &Options) -> Vec<Run> {
        let paths: Vec<PathBuf> = rels.iter().map(|r| fixture(r)).collect();
        let (plan, runs) = import_paths(&paths, options);
        assert!(plan.refused.is_empty(), "refused while planning: {:?}", plan.refused);
        runs.into_iter().map(|r| r.unwrap_or_else(|e| panic!("refused: {e}"))).collect()
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use std::io::Write;

    /// The red team's case: a log the agent appends to while it is imported. Parse,
    /// hash and source copy read the file at different times; all three see the bytes
    /// of the first read, so the copy hashes to the recorded blake3.
    #[test]
    fn a_growing_log_is_read_as_one_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, b"{\"a\":1}\n").unwrap();
        let input = Input::new(path.clone(), crate::claude_code::FORMAT);
        let parsed = input.text().unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"a\":2}\n").unwrap();
        let hash = input.blake3().unwrap();
        let copy = input.read().unwrap();
        assert_eq!(copy, parsed.as_bytes());
        assert_eq!(hash, blake3::hash(&copy).to_hex().to_string());
        // A fresh plan sees the grown file.
        let again = Input::new(path, crate::claude_code::FORMAT);
        assert_eq!(again.read().unwrap().len(), 16);
    }

    /// Hashed first (planning compares hashes with stored imports): the hash fixes the
    /// snapshot the parse then reads.
    #[test]
    fn a_log_hashed_before_it_grew_is_parsed_as_it_was_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, b"line one\n").unwrap();
        let input = Input::new(path.clone(), crate::claude_code::FORMAT);
        let hash = input.blake3().unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"line two\n").unwrap();
        assert_eq!(input.text().unwrap(), "line one\n");
        assert_eq!(hash, blake3::hash(b"line one\n").to_hex().to_string());
    }
}
