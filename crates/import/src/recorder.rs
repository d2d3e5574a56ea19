//! The rules every source shares (importers-v1 sections 2 to 6), in one place: a format
//! module reads its log and tells the [`Recorder`] what happened, in stream order (a
//! tool call where it starts, a person's message, a completion claim, an evaluator's
//! verdict); the recorder turns that into records through the package builder.
//!
//! What the recorder decides, so no format module decides it again: the records of a
//! shell command (its segments' checks and mutations), the grade of every record, the
//! label (derived from `correct` and the posture, never read), the stop reason's
//! default, which model the manifest names, paths made relative to the working
//! directory, the provenance block and the copy of every source file under
//! `artifacts/source/`.

use std::collections::BTreeMap;

use epistore_package::{BuiltPackage, Layout, PackageBuilder, TraceKind, FORMAT_V1_1};
use serde_json::{json, Map, Value};

use crate::shell::{self, Declared, SegmentKind};
use crate::{Format, Options, Refusal};

/// The importer named in every package's provenance.
pub const IMPORTER: &str = concat!("epistore ", env!("CARGO_PKG_VERSION"));

/// Evidence grade of a record (package spec 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    /// Copied from a structured field of the log.
    Observed,
    /// Read from free text or a command pattern.
    Derived,
    /// A guess the rules allow.
    Inferred,
}

impl Grade {
    pub fn name(self) -> &'static str {
        match self {
            Grade::Observed => "observed",
            Grade::Derived => "derived",
            Grade::Inferred => "inferred",
        }
    }
}

/// One tool call as the log shows it. Only what the log shows is set; everything else
/// stays `None` (an exit code the log does not show is null, never 0).
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The tool's name (`shell` for a command, `edit` for an edit, when the source has no names).
    pub tool: String,
    /// The shell command, or the call's arguments as compact JSON.
    pub command: Option<String>,
    /// Wall-clock time the call started (RFC 3339; other spellings are dropped).
    pub ts: Option<String>,
    /// The exit code and how it was learned. `None`: not shown (a shell call then
    /// tries the output's `Exit code N` lines, graded derived).
    pub exit_code: Option<(i64, Grade)>,
    pub duration_ms: Option<f64>,
    pub timed_out: bool,
    /// `permission_denied`, `timeout`, `nonzero_exit`, `not_found`, `parse_error`,
    /// `other`, when the log says so; `None` lets the store derive it.
    pub failure_type: Option<&'static str>,
    /// What the tool printed (used for summary lines and text exit codes; not stored).
    pub output: String,
}

impl Call {
    pub fn new(tool: impl Into<String>) -> Call {
        Call { tool: tool.into(), ..Call::default() }
    }
    pub fn command(mut self, command: impl Into<String>) -> Call {
        self.command = Some(command.into());
        self
    }
    pub fn ts(mut self, ts: Option<impl Into<String>>) -> Call {
        self.ts = ts.map(Into::into);
        self
    }
    pub fn exit(mut self, code: Option<i64>, grade: Grade) -> Call {
        self.exit_code = code.map(|c| (c, grade));
        self
    }
    pub fn output(mut self, output: impl Into<String>) -> Call {
        self.output = output.into();
        self
    }
    pub fn failure(mut self, failure_type: &'static str) -> Call {
        self.failure_type = Some(failure_type);
        self
    }
    pub fn duration(mut self, ms: Option<f64>) -> Call {
        self.duration_ms = ms;
        self
    }
}

/// What a structured edit tool did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    Create,
    Edit,
    Delete,
}

impl EditKind {
    fn name(self) -> &'static str {
        match self {
            EditKind::Create => "create",
            EditKind::Edit => "edit",
            EditKind::Delete => "delete",
        }
    }
}

/// What a tool call did to the files, as one `actions` record says it.
struct Effect<'p> {
    kind: &'p str,
    paths: &'p [String],
    mutates: bool,
    ok: bool,
}

/// Which part of a source file a run came from (provenance `part`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The whole file.
    Whole,
    /// A ZIP member (Inspect `.eval`).
    Member(String),
    /// A 1-based line of a JSON Lines file.
    Line(usize),
    /// One object of a single JSON document (written as compact JSON).
    Object(String),
}

struct SourceFile {
    name: String,
    blake3: String,
    part: Part,
    /// A part every run of the file shares (an Inspect log's header): listed in the
    /// provenance, but not one of the run's own keys (see [`Recorder::source_part`]).
    shared: bool,
}

/// Scores the evaluator gave: the first (or `--scorer`) is the verdict.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub name: String,
    /// 1 / 0 / 0.5 ... ; `correct` is true exactly when the value is 1.
    pub value: f64,
    pub ts: Option<String>,
}

/// A run being recorded. See the module documentation.
pub struct Recorder {
    builder: PackageBuilder,
    format: Format,
    episode: String,
    /// Every model a structured field named, in order (the most frequent wins).
    models: Vec<String>,
    harness_version: Option<String>,
    task: Option<String>,
    cluster: Option<String>,
    attempt: Option<i64>,
    workdir: Option<String>,
    declared: Declared,
    first_ts: Option<String>,
    last_ts: Option<String>,
    /// The SWE-bench instance this run is, for matching a report given in the same call.
    pub instance_id: Option<String>,
    sources: Vec<SourceFile>,
    opaque_calls: u64,
    notes: Vec<String>,
    human_interventions: u64,
    /// Seq of the last completion claim, and whether anything the agent or a person
    /// did came after it.
    last_complete: Option<u64>,
    after_complete: bool,
    stop_reason: Option<&'static str>,
    verdict: Option<Verdict>,
    other_scores: BTreeMap<String, Value>,
    tokens_in: Option<i64>,
    tokens_out: Option<i64>,
    usd: Option<f64>,
    supersedes: Option<String>,
}

impl Recorder {
    /// A run of `format` whose own id is `episode` (section 2's table).
    pub fn new(format: Format, episode: impl Into<String>) -> Recorder {
        let episode = episode.into();
        let mut builder = PackageBuilder::new(format!("{}:{}", format.name(), episode), Layout::SORTED);
        // The importer observes the whole log: these traces are recorded, possibly
        // empty ("recorded, none"); every section 9 format records human input.
        for kind in [TraceKind::Actions, TraceKind::Tools, TraceKind::Verification, TraceKind::Interventions] {
            builder.record_trace(kind);
        }
        Recorder {
            builder,
            format,
            episode,
            models: Vec::new(),
            harness_version: None,
            task: None,
            cluster: None,
            attempt: None,
            workdir: None,
            declared: Declared::default(),
            first_ts: None,
            last_ts: None,
            instance_id: None,
            sources: Vec::new(),
            opaque_calls: 0,
            notes: Vec::new(),
            human_interventions: 0,
            last_complete: None,
            after_complete: false,
            stop_reason: None,
            verdict: None,
            other_scores: BTreeMap::new(),
            tokens_in: None,
            tokens_out: None,
            usd: None,
            supersedes: None,
        }
    }

    pub fn episode(&self) -> &str {
        &self.episode
    }
    pub fn format(&self) -> Format {
        self.format
    }

    // ---- what the run is ----------------------------------------------------------

    /// A model a structured field of the log names (never one read from free text).
    pub fn model(&mut self, name: impl Into<String>) {
        let name = name.into();
        if !name.trim().is_empty() {
            self.models.push(name);
        }
    }
    pub fn harness_version(&mut self, version: Option<impl Into<String>>) {
        if let Some(v) = version {
            self.harness_version = Some(v.into());
        }
    }
    pub fn task(&mut self, id: impl Into<String>) {
        self.task = Some(id.into());
    }
    pub fn cluster(&mut self, cluster: impl Into<String>) {
        let c = cluster.into();
        if !c.is_empty() {
            self.cluster = Some(c);
        }
    }
    pub fn attempt(&mut self, attempt: i64) {
        self.attempt = Some(attempt);
    }
    /// The run's working directory, when the log names it: paths inside it are made
    /// relative, and shell mutations outside it do not change the workspace.
    pub fn workdir(&mut self, dir: impl Into<String>) {
        let dir = dir.into();
        let dir = dir.trim_end_matches('/');
        if !dir.is_empty() {
            self.workdir = Some(dir.to_string());
        }
    }
    pub fn workdir_known(&self) -> Option<&str> {
        self.workdir.as_deref()
    }
    /// Commands the harness declared as its test and lint commands.
    pub fn declared(&mut self, declared: Declared) {
        self.declared = declared;
    }
    /// Any timestamp the log shows, in stream order: the first and last are the run's
    /// `started_at` and `ended_at`. Spellings that are not RFC 3339 are ignored.
    pub fn saw_time(&mut self, ts: Option<&str>) {
        if let Some(ts) = ts.and_then(rfc3339) {
            if self.first_ts.is_none() {
                self.first_ts = Some(ts.clone());
            }
            self.last_ts = Some(ts);
        }
    }
    /// Something lost or assumed, for `provenance.notes`.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
    /// Records that a source file (or the run's part of one) was read; its bytes are
    /// copied to `artifacts/source/NAME`. `whole_blake3` is the hash of the whole file.
    pub fn source(&mut self, name: &str, whole_blake3: &str, part: Part, bytes: Vec<u8>) -> Result<(), Refusal> {
        let path = format!("artifacts/source/{}", safe_name(name));
        self.builder.file(path, bytes).map_err(|p| Refusal::new(name, None, p.message))?;
        self.sources.push(SourceFile { name: name.to_string(), blake3: whole_blake3.to_string(), part, shared: false });
        Ok(())
    }
    /// Like [`source`](Self::source), for a file that gives one run several parts (an
    /// Inspect `.eval`: its `header.json` and the run's sample member): the part is
    /// copied to `artifacts/source/ARTIFACT`, while the provenance names the file. A
    /// `shared` part belongs to every run of the file, so it is not among the run's
    /// [`source_keys`](Self::source_keys): one run already imported must not make its
    /// siblings look imported.
    pub fn source_part(
        &mut self,
        name: &str,
        whole_blake3: &str,
        part: Part,
        artifact: &str,
        bytes: Vec<u8>,
        shared: bool,
    ) -> Result<(), Refusal> {
        let path = format!("artifacts/source/{}", safe_name(artifact));
        self.builder.file(path, bytes).map_err(|p| Refusal::new(name, None, p.message))?;
        self.sources.push(SourceFile { name: name.to_string(), blake3: whole_blake3.to_string(), part, shared });
        Ok(())
    }
    /// The source files read so far, as `blake3` or `blake3#part`.
    pub fn source_keys(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter(|s| !s.shared)
            .map(|s| match &s.part {
                Part::Whole => s.blake3.clone(),
                Part::Member(m) | Part::Object(m) => format!("{}#{m}", s.blake3),
                Part::Line(n) => format!("{}#{n}", s.blake3),
            })
            .collect()
    }
    pub fn supersedes(&mut self, episode_id: impl Into<String>) {
        self.supersedes = Some(episode_id.into());
    }
    pub fn patch(&mut self, diff: &str) {
        if !diff.trim().is_empty() {
            let _ = self.builder.file("patch.diff", diff.as_bytes().to_vec());
        }
    }
    /// Another file of the package (a report, an artifact), relative to its root.
    pub fn artifact(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), Refusal> {
        self.builder.file(path.to_string(), bytes).map_err(|p| Refusal::new(path, None, p.message))
    }
    pub fn tokens(&mut self, tokens_in: Option<i64>, tokens_out: Option<i64>) {
        if let Some(t) = tokens_in {
            *self.tokens_in.get_or_insert(0) += t;
        }
        if let Some(t) = tokens_out {
            *self.tokens_out.get_or_insert(0) += t;
        }
    }
    pub fn usd(&mut self, usd: f64) {
        if usd.is_finite() && usd >= 0.0 {
            *self.usd.get_or_insert(0.0) += usd;
        }
    }
    /// `budget_exhausted`, `infra_error`, ... when the log says why the run stopped.
    pub fn stop_reason(&mut self, reason: &'static str) {
        self.stop_reason = Some(reason);
    }

    // ---- events, in stream order ------------------------------------------------------

    fn push(&mut self, kind: TraceKind, ts: Option<&str>, grade: Grade, mut fields: Map<String, Value>) -> u64 {
        if let Some(ts) = ts.and_then(rfc3339) {
            fields.insert("ts".into(), json!(ts));
            self.saw_time(Some(&ts));
        }
        if grade != Grade::Observed {
            fields.insert("grade".into(), json!(grade.name()));
        }
        self.builder.push(kind, fields)
    }

    fn tools_record(&mut self, call: &Call, grade: Grade) -> u64 {
        let mut f = Map::new();
        f.insert("tool".into(), json!(call.tool));
        if let Some(c) = &call.command {
            f.insert("command".into(), json!(c));
        }
        f.insert("exit_code".into(), json!(call.exit_code.map(|(c, _)| c)));
        if let Some(d) = call.duration_ms.filter(|d| d.is_finite() && *d >= 0.0) {
            f.insert("duration_ms".into(), json!(d));
        }
        if call.timed_out {
            f.insert("timed_out".into(), json!(true));
        }
        let failure = call.failure_type.or(call.timed_out.then_some("timeout"));
        if let Some(ft) = failure {
            f.insert("failure_type".into(), json!(ft));
        }
        self.after_complete = true;
        self.push(TraceKind::Tools, call.ts.as_deref(), grade, f)
    }

    /// The `actions` record of a tool call (`tool_seq` names its tools record).
    fn action(&mut self, ts: Option<&str>, grade: Grade, effect: Effect<'_>, tool_seq: u64) -> u64 {
        let mut f = Map::new();
        f.insert("kind".into(), json!(effect.kind));
        if !effect.paths.is_empty() {
            let paths: Vec<String> = effect.paths.iter().map(|p| self.relative(p)).collect();
            f.insert("paths".into(), json!(paths));
        }
        f.insert("mutates".into(), json!(effect.mutates));
        f.insert("ok".into(), json!(effect.ok));
        f.insert("tool_seq".into(), json!(tool_seq));
        self.push(TraceKind::Actions, ts, grade, f)
    }

    /// A path relative to the working directory when it lies inside it (section 2).
    pub fn relative(&self, path: &str) -> String {
        if let Some(dir) = &self.workdir {
            if let Some(rest) = path.strip_prefix(dir.as_str()).and_then(|r| r.strip_prefix('/')) {
                if !rest.is_empty() {
                    return rest.to_string();
                }
            }
        }
        path.to_string()
    }

    /// A shell command the agent ran (section 4): one tools record, then per segment
    /// its check or mutation in segment order; counted as opaque when a segment's
    /// effect cannot be told. Returns the tools record's seq.
    pub fn shell(&mut self, mut call: Call, command: &str) -> u64 {
        self.shell_as(&mut call, command, "agent")
    }

    fn shell_as(&mut self, call: &mut Call, command: &str, actor: &str) -> u64 {
        if call.command.is_none() {
            call.command = Some(command.to_string());
        }
        if call.exit_code.is_none() {
            if let Some(code) = shell::exit_code_from_text(&call.output) {
                call.exit_code = Some((code, Grade::Derived));
            }
        }
        let exit_grade = call.exit_code.map(|(_, g)| g).unwrap_or(Grade::Derived);
        let tool_seq = self.tools_record(call, exit_grade);
        let analysis = shell::analyse(command, self.workdir.as_deref(), &self.declared);
        let exit = call.exit_code.map(|(c, _)| c);
        let rejected_edit = call.output.contains("Your proposed edit has introduced new syntax error");
        let mut any_action = false;
        for (i, seg) in analysis.segments.iter().enumerate() {
            match &seg.kind {
                SegmentKind::Check { method, check_id } => {
                    let (result, grade) =
                        shell::check_result(&analysis, i, exit, exit_grade.name(), call.timed_out, &call.output);
                    let grade = if grade == "observed" { Grade::Observed } else { Grade::Derived };
                    let mut f = Map::new();
                    f.insert("check_id".into(), json!(check_id));
                    f.insert("actor".into(), json!(actor));
                    f.insert("method".into(), json!(method));
                    f.insert("command".into(), json!(command));
                    f.insert("result".into(), json!(result));
                    if let (Some(code), true) = (exit, analysis.segments.len() == 1 && !seg.piped) {
                        f.insert("exit_code".into(), json!(code));
                    }
                    self.push(TraceKind::Verification, call.ts.as_deref(), grade, f);
                }
                SegmentKind::Mutation { kind, paths, inside } => {
                    let ok = shell::mutation_ok(&analysis, i, exit) && !rejected_edit;
                    self.action(
                        call.ts.as_deref(),
                        Grade::Derived,
                        Effect { kind, paths, mutates: *inside, ok },
                        tool_seq,
                    );
                    any_action = true;
                }
                SegmentKind::Read { kind, paths } => {
                    self.action(
                        call.ts.as_deref(),
                        Grade::Derived,
                        Effect { kind, paths, mutates: false, ok: true },
                        tool_seq,
                    );
                    any_action = true;
                }
                SegmentKind::Inert => {}
                SegmentKind::Opaque => {
                    self.action(
                        call.ts.as_deref(),
                        Grade::Derived,
                        Effect { kind: "run", paths: &[], mutates: false, ok: true },
                        tool_seq,
                    );
                    any_action = true;
                }
            }
        }
        if !any_action && analysis.segments.iter().all(|s| !matches!(s.kind, SegmentKind::Check { .. })) {
            // A command of inert segments only (`cd x`) still ran.
            self.action(
                call.ts.as_deref(),
                Grade::Derived,
                Effect { kind: "run", paths: &[], mutates: false, ok: true },
                tool_seq,
            );
        }
        if analysis.opaque {
            self.opaque_calls += 1;
        }
        tool_seq
    }

    /// A structured edit tool (section 4, observed): one mutation, whatever the number
    /// of files; `ok` false when the tool reported failure.
    pub fn edit(&mut self, call: Call, kind: EditKind, paths: &[String], ok: bool) -> u64 {
        let tool_seq = self.tools_record(&call, Grade::Observed);
        self.action(
            call.ts.as_deref(),
            Grade::Observed,
            Effect { kind: kind.name(), paths, mutates: true, ok },
            tool_seq,
        );
        tool_seq
    }

    /// An edit the log shows only in words or patterns (aider's `/undo`, SWE-agent
    /// editor commands): a derived mutation.
    pub fn derived_edit(&mut self, call: Call, kind: EditKind, paths: &[String], ok: bool) -> u64 {
        let tool_seq = self.tools_record(&call, Grade::Derived);
        self.action(
            call.ts.as_deref(),
            Grade::Derived,
            Effect { kind: kind.name(), paths, mutates: true, ok },
            tool_seq,
        );
        tool_seq
    }

    /// A tool that reads, searches, plans or does something else the rules name
    /// (`read`, `search`, `plan`, `message`, `other`): a tools record and one action.
    pub fn tool(&mut self, call: Call, action_kind: &str, paths: &[String]) -> u64 {
        let tool_seq = self.tools_record(&call, Grade::Observed);
        self.action(
            call.ts.as_deref(),
            Grade::Observed,
            Effect { kind: action_kind, paths, mutates: false, ok: true },
            tool_seq,
        );
        tool_seq
    }

    /// A tool whose effect on the files the rules cannot tell: `kind: run`, counted in
    /// `provenance.opaque_calls`.
    pub fn opaque(&mut self, call: Call) -> u64 {
        let tool_seq = self.tools_record(&call, Grade::Observed);
        self.action(
            call.ts.as_deref(),
            Grade::Observed,
            Effect { kind: "run", paths: &[], mutates: false, ok: true },
            tool_seq,
        );
        self.opaque_calls += 1;
        tool_seq
    }

    /// Python code run by a tool (Inspect `python()`): a derived mutation when it opens
    /// a file for writing, else opaque.
    pub fn python(&mut self, call: Call, code: &str) -> u64 {
        if shell::python_writes_file(code) {
            let ok = !matches!(call.exit_code, Some((c, _)) if c != 0);
            let tool_seq = self.tools_record(&call, Grade::Observed);
            self.action(
                call.ts.as_deref(),
                Grade::Derived,
                Effect { kind: "edit", paths: &[], mutates: true, ok },
                tool_seq,
            );
            tool_seq
        } else {
            self.opaque(call)
        }
    }

    /// A call refused before it ran (a denial, a hook block, a declined command): its
    /// tools record (`permission_denied` unless the log says otherwise) and one action
    /// with `ok: false`; no mutation, no check, not opaque.
    pub fn refused(&mut self, mut call: Call, action_kind: &str) -> u64 {
        call.failure_type.get_or_insert("permission_denied");
        let tool_seq = self.tools_record(&call, Grade::Observed);
        self.action(
            call.ts.as_deref(),
            Grade::Observed,
            Effect { kind: action_kind, paths: &[], mutates: false, ok: false },
            tool_seq,
        );
        tool_seq
    }

    fn intervention(&mut self, ts: Option<&str>, kind: &str, reason: &str, grade: Grade) -> u64 {
        let mut f = Map::new();
        f.insert("actor".into(), json!("human"));
        f.insert("kind".into(), json!(kind));
        let reason = first_line(reason);
        if !reason.is_empty() {
            f.insert("reason".into(), json!(reason));
        }
        f.insert("missing_responsibility".into(), Value::Null);
        self.human_interventions += 1;
        self.after_complete = true;
        self.push(TraceKind::Interventions, ts, grade, f)
    }

    /// A message a person wrote after the run's first prompt (section 5).
    pub fn person_message(&mut self, ts: Option<&str>, text: &str) -> u64 {
        self.intervention(ts, "other", text, Grade::Observed)
    }
    /// A person approved (`approval`) or rejected (`other`) a tool call.
    pub fn person_decision(&mut self, ts: Option<&str>, approved: bool, reason: &str) -> u64 {
        self.intervention(ts, if approved { "approval" } else { "other" }, reason, Grade::Observed)
    }
    /// A person interrupted the run.
    pub fn person_abort(&mut self, ts: Option<&str>, reason: &str) -> u64 {
        self.intervention(ts, "abort", reason, Grade::Observed)
    }
    /// A command a person ran in the agent's shell (Codex `user_shell`, aider `/run`,
    /// `/test`): an intervention, its tools record, and a check (actor human) when the
    /// command is one.
    pub fn person_command(&mut self, mut call: Call, command: &str) -> u64 {
        self.intervention(call.ts.as_deref(), "other", command, Grade::Observed);
        self.shell_as(&mut call, command, "human")
    }
    /// A person rolled back the agent's work (aider `/undo`): a rollback intervention
    /// and a derived mutation.
    pub fn person_rollback(&mut self, call: Call, paths: &[String]) -> u64 {
        self.intervention(call.ts.as_deref(), "rollback", "/undo", Grade::Derived);
        self.derived_edit(call, EditKind::Edit, paths, true)
    }
    /// A rollback the log shows failing (aider's `/undo` printing why it cannot undo):
    /// the rollback intervention and a derived edit with `ok: false`, which changes nothing.
    pub fn person_rollback_failed(&mut self, call: Call) -> u64 {
        self.intervention(call.ts.as_deref(), "rollback", "/undo", Grade::Derived);
        self.derived_edit(call, EditKind::Edit, &[], false)
    }

    /// A check the harness ran on its own (aider's automatic test and lint runs), seen
    /// only through its words: a tools record and one check, both derived.
    pub fn harness_check(&mut self, call: Call, method: &str, result: &str) -> u64 {
        let tool_seq = self.tools_record(&call, Grade::Derived);
        let mut f = Map::new();
        let command = call.command.clone().unwrap_or_default();
        f.insert("check_id".into(), json!(format!("{method}:{}", shell::normalise_ws(&command))));
        f.insert("actor".into(), json!("agent"));
        f.insert("method".into(), json!(method));
        f.insert("command".into(), json!(command));
        f.insert("result".into(), json!(result));
        self.push(TraceKind::Verification, call.ts.as_deref(), Grade::Derived, f);
        tool_seq
    }

    /// The agent's completion claim, at its place in the stream.
    pub fn complete(&mut self, ts: Option<&str>, summary: Option<&str>) -> u64 {
        let mut f = Map::new();
        f.insert("kind".into(), json!("complete"));
        if let Some(s) = summary.map(first_line).filter(|s| !s.is_empty()) {
            f.insert("summary".into(), json!(s));
        }
        let seq = self.push(TraceKind::Actions, ts, Grade::Observed, f);
        self.last_complete = Some(seq);
        self.after_complete = false;
        seq
    }

    /// The evaluator's verdict (section 6): the one scorer whose value sets `correct`
    /// and `score` and becomes the oracle record at the end of the stream.
    pub fn verdict(&mut self, verdict: Verdict) {
        self.verdict = Some(verdict);
    }
    pub fn has_verdict(&self) -> bool {
        self.verdict.is_some()
    }
    /// Another scorer's value, kept in `outcome.scores`.
    pub fn other_score(&mut self, name: &str, value: Value) {
        self.other_scores.insert(name.to_string(), value);
    }

    // ---- the package -------------------------------------------------------------------

    /// Writes the package: manifest (with provenance), outcome (label derived), and
    /// validates it. A log that names no model and no `--model` is refused here.
    pub fn finish(mut self, options: &Options) -> Result<BuiltPackage, Refusal> {
        let source_name = self.sources.first().map(|s| s.name.clone()).unwrap_or_else(|| self.episode.clone());
        let model = match &options.model {
            Some(m) => m.clone(),
            None => match most_frequent(&self.models) {
                Some(m) => m,
                None => {
                    return Err(Refusal::new(
                        &source_name,
                        None,
                        "the log names no model; give one with --model".to_string(),
                    ))
                }
            },
        };
        let others: Vec<&String> = {
            let mut seen: Vec<&String> = Vec::new();
            for m in &self.models {
                if *m != model && !seen.contains(&m) {
                    seen.push(m);
                }
            }
            seen
        };
        if !others.is_empty() && options.model.is_none() {
            let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
            self.note(format!("other models named in the log: {}", list.join(", ")));
        }
        if let Some(v) = &self.verdict {
            let mut f = Map::new();
            f.insert("check_id".into(), json!(v.name));
            f.insert("actor".into(), json!("evaluator"));
            f.insert("method".into(), json!("oracle"));
            f.insert("result".into(), json!(if v.value == 1.0 { "pass" } else { "fail" }));
            let ts = v.ts.clone();
            self.push(TraceKind::Verification, ts.as_deref(), Grade::Observed, f);
        }
        let manifest = self.manifest(model, options);
        self.builder.manifest(manifest);

        // The label needs the posture, which the store derives from the traces: derive
        // it once with a placeholder outcome, then write the real one.
        self.builder.outcome(json!({"label": null}));
        let first = self.builder.clone().finish().map_err(|p| Refusal::new(&source_name, None, p.to_string()))?;
        let outcome = self.outcome(&first.episode.derived.posture);
        self.builder.outcome(outcome);
        self.builder.finish().map_err(|p| Refusal::new(&source_name, None, p.to_string()))
    }

    fn manifest(&self, model: String, options: &Options) -> Value {
        let task = options.task.clone().or_else(|| self.task.clone()).unwrap_or_else(|| self.episode.clone());
        let mut task_obj = json!({"id": task});
        if let Some(c) = options.cluster.clone().or_else(|| self.cluster.clone()) {
            task_obj["cluster"] = json!(c);
        }
        let level = options.harness_level.clone().unwrap_or_else(|| self.format.harness().to_string());
        let mut harness = json!({"name": self.format.harness(), "level": level});
        if let Some(v) = &self.harness_version {
            harness["version"] = json!(v);
        }
        let source_files: Vec<Value> = self
            .sources
            .iter()
            .map(|s| {
                let mut f = json!({"name": s.name, "blake3": s.blake3});
                match &s.part {
                    Part::Whole => {}
                    Part::Member(m) => f["part"] = json!(m),
                    Part::Line(n) => f["part"] = json!(n),
                    Part::Object(k) => f["part"] = json!(k),
                }
                f
            })
            .collect();
        let mut provenance = json!({
            "importer": IMPORTER,
            "source_format": self.format.name(),
            "source_files": source_files,
            "opaque_calls": self.opaque_calls,
            "notes": self.notes,
        });
        if let Some(v) = &self.harness_version {
            provenance["source_version"] = json!(v);
        }
        if let Some(s) = &self.supersedes {
            provenance["supersedes"] = json!(s);
        }
        let mut m = json!({
            "format": FORMAT_V1_1,
            "episode": self.episode,
            "model": {"name": model},
            "harness": harness,
            "task": task_obj,
            "provenance": provenance,
        });
        if let Some(a) = self.attempt {
            m["attempt"] = json!(a);
        }
        if let Some(t) = &self.first_ts {
            m["started_at"] = json!(t);
        }
        if let Some(t) = &self.last_ts {
            m["ended_at"] = json!(t);
        }
        m
    }

    fn outcome(&self, posture: &str) -> Value {
        let correct = self.verdict.as_ref().map(|v| v.value == 1.0);
        // Section 6: derived in this order, never read from the agent's own words.
        let label = match correct {
            None => Value::Null,
            Some(false) => json!("failed"),
            Some(true) if posture == "current" && self.human_interventions == 0 => {
                json!("autonomous_verified_success")
            }
            Some(true) if posture == "current" => json!("assisted_verified_success"),
            Some(true) => json!("unverified_success"),
        };
        let reported_complete = self.last_complete.is_some() && !self.after_complete;
        let stop = self.stop_reason.unwrap_or(if reported_complete { "completed" } else { "other" });
        let mut o = json!({
            "label": label,
            "agent_reported_complete": reported_complete,
            "stop_reason": stop,
            "correct": correct,
        });
        if let Some(v) = &self.verdict {
            if (0.0..=1.0).contains(&v.value) {
                o["score"] = json!(v.value);
            }
        }
        if !self.other_scores.is_empty() {
            o["scores"] = json!(self.other_scores);
        }
        let mut cost = Map::new();
        if let Some(t) = self.tokens_in {
            cost.insert("tokens_in".into(), json!(t));
        }
        if let Some(t) = self.tokens_out {
            cost.insert("tokens_out".into(), json!(t));
        }
        if let Some(u) = self.usd {
            cost.insert("usd".into(), json!(u));
        }
        if !cost.is_empty() {
            o["cost"] = Value::Object(cost);
        }
        o
    }
}

/// The most frequent name; ties go to the one named first.
fn most_frequent(names: &[String]) -> Option<String> {
    let mut counts: Vec<(&String, usize)> = Vec::new();
    for n in names {
        match counts.iter_mut().find(|(m, _)| *m == n) {
            Some((_, c)) => *c += 1,
            None => counts.push((n, 1)),
        }
    }
    let best = counts.iter().map(|(_, c)| *c).max()?;
    counts.into_iter().find(|(_, c)| *c == best).map(|(n, _)| n.clone())
}

/// A reason or summary: the first non-blank line, at most 200 characters.
pub fn first_line(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    line.chars().take(200).collect()
}

/// The timestamp as RFC 3339 when it is one (a `Z`-less ISO time, as OpenHands writes,
/// is read as UTC and noted as such by the caller when it matters).
pub fn rfc3339(ts: &str) -> Option<String> {
    let ts = ts.trim();
    if chrono::DateTime::parse_from_rfc3339(ts).is_ok() {
        return Some(ts.to_string());
    }
    None
}

/// A file name safe inside `artifacts/source/`: path separators and dot-only parts kept
/// out, so a hostile name cannot leave the package.
fn safe_name(name: &str) -> String {
    let parts: Vec<String> = name
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != "." && *p != "..")
        .map(|p| p.replace('\0', "_"))
        .collect();
    if parts.is_empty() {
        "source".into()
    } else {
        parts.join("/")
    }
}
