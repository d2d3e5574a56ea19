//! The rules every source shares (docs/importers.md §2 to §6), in one place: a format
//! module reads its log and tells the [`Recorder`] what happened, in stream order (a
//! tool call where it starts, a person's message, a completion claim, an evaluator's
//! verdict); the recorder turns that into records through the package builder.
//!
//! What the recorder decides, so no format module decides it again: the records of a
//! shell command (its segments' checks and mutations), the grade of every record, the
//! label (derived from `correct` and the posture, never read), the stop reason's
//! default, which model the manifest names, paths made relative to the working
//! directory, the provenance block and the copy of every source file under
//! `artifacts/source/`; and the secrets in what the package holds ([`crate::secrets`]),
//! counted for the caller and, with `--redact`, replaced.
//!
//! The run's content (docs/format.md §9) is decided here too: each agent tool call's
//! output becomes `artifacts/tool-output/<seq>.txt`, its call and result become
//! `messages` records around its `tools` record, an edit's diff goes on its action
//! (and into a derived `patch.diff` when the log has no patch of its own), and the task
//! prompt and final message default to the first person's and the agent's last words.

use std::collections::{BTreeMap, HashMap};

use epistore_package::{
    BuiltPackage, Layout, PackageBuilder, Posture, Problem, TraceKind, FINAL_STATE_DIGEST, FORMAT_V1_2, STATE_DIGEST,
    TRACE_FILES,
};
use serde_json::{json, Map, Value};

use crate::secrets::{self, Finding};
use crate::shell::{self, Declared, SegmentKind};
use crate::{Format, Options, Refusal};

/// The importer named in every package's provenance.
pub const IMPORTER: &str = concat!("epistore ", env!("CARGO_PKG_VERSION"));

/// Evidence grade of a record (docs/format.md §5.1).
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
    /// By when the call had ended, where the log shows no duration but a later time it
    /// had surely ended by (a result written after it): bounds overlaps only, and is not
    /// recorded as the call's duration.
    pub ended_by: Option<String>,
    pub timed_out: bool,
    /// `permission_denied`, `timeout`, `nonzero_exit`, `not_found`, `parse_error`,
    /// `other`, when the log says so; `None` lets the store derive it.
    pub failure_type: Option<&'static str>,
    /// What the tool printed: stored as the call's output file when [`Call::output`]
    /// set it (also read for text exit codes and edit rejections).
    pub output: String,
    /// The log shows what the call printed (possibly nothing): write the output file.
    pub output_seen: bool,
    /// The call's id as the log spells it (on its `messages` records).
    pub call_id: Option<String>,
    /// The call's arguments as the log gives them (on its `messages` call record).
    pub arguments: Option<Value>,
    /// The tool reported an error (on its `messages` result record); `None`: the
    /// failure type decides.
    pub is_error: Option<bool>,
    /// The unified diff of an edit (docs/format.md §9.2), put on its action.
    pub diff: Option<String>,
    /// A subagent's name when a subagent made the call (on its `messages` records).
    pub author: Option<String>,
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
    /// What the call printed, as the log shows it: kept as the call's output file.
    pub fn output(mut self, output: impl Into<String>) -> Call {
        self.output = output.into();
        self.output_seen = true;
        self
    }
    /// The log's id of the call.
    pub fn id(mut self, id: Option<impl Into<String>>) -> Call {
        self.call_id = id.map(Into::into);
        self
    }
    /// The arguments the call was given.
    pub fn arguments(mut self, arguments: Value) -> Call {
        self.arguments = (!arguments.is_null()).then_some(arguments);
        self
    }
    /// Whether the tool said it failed.
    pub fn is_error(mut self, is_error: Option<bool>) -> Call {
        self.is_error = is_error;
        self
    }
    /// The subagent that made the call.
    pub fn author(mut self, author: Option<String>) -> Call {
        self.author = author;
        self
    }
    /// The edit's unified diff (empty text is no diff).
    pub fn diff(mut self, diff: Option<String>) -> Call {
        self.diff = diff.filter(|d| !d.trim().is_empty());
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
    /// A time the call had ended by (see [`Call::ended_by`]).
    pub fn ended_by(mut self, ts: Option<impl Into<String>>) -> Call {
        self.ended_by = ts.map(Into::into);
        self
    }
}

/// Who speaks in a `messages` record (docs/format.md §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// Who wrote a `user` message: a person, or the harness (reminders, hook output,
/// command caveats, a tool wrapper's text).
pub const HUMAN: &str = "human";
pub const HARNESS: &str = "harness";

/// One message, or one part of a message, as the log shows it (docs/format.md §9.1).
/// A tool call's own call and result records are written by the recorder from the
/// [`Call`]; a format module says the rest: prompts, replies, thinking.
#[derive(Debug, Clone)]
pub struct Message {
    pub role: Role,
    pub author: Option<String>,
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tokens_in: Option<i64>,
    pub tokens_out: Option<i64>,
    pub model: Option<String>,
    pub ts: Option<String>,
}

impl Message {
    pub fn new(role: Role) -> Message {
        Message {
            role,
            author: None,
            text: None,
            reasoning: None,
            tokens_in: None,
            tokens_out: None,
            model: None,
            ts: None,
        }
    }
    pub fn system(text: impl Into<String>) -> Message {
        Message::new(Role::System).text(text)
    }
    /// A person's message.
    pub fn human(text: impl Into<String>) -> Message {
        Message::new(Role::User).author(HUMAN).text(text)
    }
    /// A `user` message the harness wrote.
    pub fn harness(text: impl Into<String>) -> Message {
        Message::new(Role::User).author(HARNESS).text(text)
    }
    /// A `user` message whose writer the log does not tell.
    pub fn user(text: impl Into<String>) -> Message {
        Message::new(Role::User).text(text)
    }
    pub fn assistant(text: impl Into<String>) -> Message {
        Message::new(Role::Assistant).text(text)
    }
    pub fn author(mut self, author: impl Into<String>) -> Message {
        self.author = Some(author.into());
        self
    }
    /// The visible text; blank text is none.
    pub fn text(mut self, text: impl Into<String>) -> Message {
        self.text = Some(text.into()).filter(|t: &String| !t.trim().is_empty());
        self
    }
    /// Thinking text; blank is none.
    pub fn reasoning(mut self, reasoning: impl Into<String>) -> Message {
        self.reasoning = Some(reasoning.into()).filter(|t: &String| !t.trim().is_empty());
        self
    }
    pub fn tokens(mut self, tokens_in: Option<i64>, tokens_out: Option<i64>) -> Message {
        self.tokens_in = tokens_in.filter(|t| *t >= 0);
        self.tokens_out = tokens_out.filter(|t| *t >= 0);
        self
    }
    pub fn model(mut self, model: Option<impl Into<String>>) -> Message {
        self.model = model.map(Into::into);
        self
    }
    pub fn ts(mut self, ts: Option<impl Into<String>>) -> Message {
        self.ts = ts.map(Into::into);
        self
    }
    /// Nothing said and no usage: not worth a record. (A reply that only calls tools
    /// still carries its usage.)
    fn is_empty(&self) -> bool {
        self.text.is_none() && self.reasoning.is_none() && self.tokens_in.is_none() && self.tokens_out.is_none()
    }
}

/// Where a call's output file goes (docs/format.md §9.3).
pub fn output_path(seq: u64) -> String {
    format!("artifacts/tool-output/{seq}.txt")
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

/// Where a package keeps its copy of the source file `name` (`artifacts/source/...`):
/// a secret in a file name never becomes a package path.
pub fn source_artifact(name: &str) -> String {
    format!("artifacts/source/{}", safe_name(&secrets::redact_str(name).0))
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
    /// Its copy in the package (`artifacts/source/...`).
    artifact: String,
    /// The copy had its secrets replaced, so it no longer matches `blake3`.
    redacted: bool,
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
    /// The agent that wrote the log, when the format carries many (ATIF's `agent.name`).
    harness_name: Option<String>,
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
    /// Of `tokens_in`, how many were read from / written to a prompt cache (priced
    /// differently: docs/metrics.md §L).
    cache_read_tokens: Option<i64>,
    cache_write_tokens: Option<i64>,
    usd: Option<f64>,
    supersedes: Option<String>,
    /// The files written so far that hold secrets, by package path: the findings and the
    /// bytes, kept so [`finish`](Self::finish) can redact them.
    secret_files: BTreeMap<String, (Vec<Finding>, Vec<u8>)>,
    /// The messages trace is recorded (the format reads a log that has messages).
    messages: bool,
    /// The task prompt and final message a format gave ([`Recorder::task_prompt`],
    /// [`Recorder::final_message`]); without them, the first words of a person and the
    /// agent's last words are taken.
    task_prompt: Option<String>,
    final_message: Option<String>,
    first_person: Option<String>,
    last_agent: Option<String>,
    /// The log's own final patch was given ([`Recorder::patch`]).
    has_patch: bool,
    /// The diffs of the ok edits, in order, for a derived `patch.diff`.
    edit_diffs: Vec<String>,
    /// Some diff was numbered within its fragment, not the file.
    fragment_diffs: bool,
    /// The largest file a package may hold (`epistore_package::Limits`): a source copy
    /// or tool output past it is left out or cut, so the package still ingests.
    max_file_bytes: u64,
    /// The calls being recorded are a person's or the harness's, not the agent's: they
    /// get no assistant call and tool result messages.
    not_agent: bool,
    /// The workspace state the log last recorded (OpenCode's step snapshot tree), with
    /// the number of ok mutations by then: the `state_digest` of the records made while
    /// that number holds.
    state: Option<(String, u64)>,
    /// The workspace state the log last recorded (a harness's digest), with the number
    /// of actions recorded by then: the run's end state when none came after it.
    end_state: Option<(String, usize)>,
    actions_recorded: usize,
    /// The log shows what the agent did ([`Recorder::agent_not_observed`]).
    agent_observed: bool,
    /// The log ends inside the agent's turn (a cut log): whether it went on to claim
    /// completion is not in the log.
    claim_unknown: bool,
    /// Ok mutations so far: the revision the next record observes.
    ok_mutations: u64,
    /// Per ok mutation whose call's end the log gives: its call (tools seq), the
    /// revision before it, and when its call ended (µs since the epoch).
    mutation_ends: Vec<(u64, u64, i64)>,
    /// The call being recorded: its tools seq and when it ended, if known.
    current_call: Option<(u64, Option<i64>)>,
    /// Commands left running in the background, by the id the log gives them: the
    /// tools seq of the call that started each.
    background: HashMap<String, u64>,
    /// The checks each shell call recorded: (tools seq, verification seq).
    call_checks: Vec<(u64, u64)>,
}

/// Secrets found in a package, counted by pattern (in [`secrets`] table order).
pub type SecretCounts = Vec<(&'static str, usize)>;

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
            harness_name: None,
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
            cache_read_tokens: None,
            cache_write_tokens: None,
            usd: None,
            supersedes: None,
            secret_files: BTreeMap::new(),
            messages: false,
            task_prompt: None,
            final_message: None,
            first_person: None,
            last_agent: None,
            has_patch: false,
            edit_diffs: Vec::new(),
            fragment_diffs: false,
            not_agent: false,
            state: None,
            end_state: None,
            actions_recorded: 0,
            agent_observed: true,
            claim_unknown: false,
            ok_mutations: 0,
            mutation_ends: Vec::new(),
            current_call: None,
            background: HashMap::new(),
            call_checks: Vec::new(),
            max_file_bytes: epistore_package::Limits::default().max_file_bytes,
        }
    }

    /// A smaller file limit than the package format's, for tests of what happens past it.
    #[cfg(test)]
    pub(crate) fn limit_files_to(&mut self, bytes: u64) {
        self.max_file_bytes = bytes;
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
    /// `harness.name` (and the default level), for a format that many agents write: the
    /// agent's own name instead of the format's.
    pub fn harness_name(&mut self, name: Option<impl Into<String>>) {
        if let Some(n) = name.map(Into::into).filter(|n: &String| !n.trim().is_empty()) {
            self.harness_name = Some(n);
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
        self.source_part(name, whole_blake3, part, name, bytes, false)
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
        // A secret in a file name never becomes a package path (the name itself is in
        // the provenance, which the secret scan covers).
        let path = source_artifact(artifact);
        if bytes.len() as u64 > self.max_file_bytes {
            // Past the limit of a package file, a copy would make the package one that
            // `ingest` (and an `export-package` round trip) refuses: the provenance keeps
            // the file's name and blake3, the copy is left out.
            self.note(format!(
                "the source {name} ({} bytes) is over the {} bytes a package file may hold: not copied into \
                 artifacts/source/ (its blake3 is in provenance.source_files)",
                bytes.len(),
                self.max_file_bytes
            ));
        } else {
            self.file(path.clone(), bytes).map_err(|p| Refusal::new(name, None, p.message))?;
        }
        self.sources.push(SourceFile {
            name: name.to_string(),
            blake3: whole_blake3.to_string(),
            part,
            artifact: path,
            redacted: false,
            shared,
        });
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
    /// The shell call recorded as `tool_seq` was left running in the background under
    /// the log's id `id` (Claude Code's `backgroundTaskId`): its result comes later
    /// ([`Recorder::background_ended`]).
    pub fn background(&mut self, id: impl Into<String>, tool_seq: u64) {
        self.background.insert(id.into(), tool_seq);
    }

    /// A background command's exit code, read from its output later (Claude Code's
    /// `BashOutput` / `TaskOutput` showing it completed). Each check of the call whose
    /// result was unknown takes it (graded derived); the check stays bound to the
    /// revision the command started on. False when the id names no background command
    /// or none of its checks was waiting.
    pub fn background_ended(&mut self, id: &str, exit_code: i64) -> bool {
        let Some(&tool_seq) = self.background.get(id) else { return false };
        let waiting: Vec<u64> = self
            .call_checks
            .iter()
            .filter(|(t, _)| *t == tool_seq)
            .map(|(_, c)| *c)
            .filter(|c| {
                self.builder.records(TraceKind::Verification).into_iter().flatten().any(|r| {
                    r.get("seq").and_then(Value::as_u64) == Some(*c)
                        && r.get("result").and_then(Value::as_str) == Some("unknown")
                })
            })
            .collect();
        for check in &waiting {
            let result = if exit_code == 0 { "pass" } else { "fail" };
            self.builder.set_field(TraceKind::Verification, *check, "result", json!(result));
            self.builder.set_field(TraceKind::Verification, *check, "exit_code", json!(exit_code));
            self.builder.set_field(TraceKind::Verification, *check, "grade", json!(Grade::Derived.name()));
        }
        if !waiting.is_empty() {
            self.note(
                "a check ran in the background: its result was read from its output when the agent fetched it, and \
                 it stays bound to the revision it started on",
            );
        }
        !waiting.is_empty()
    }

    /// Facts another source gives about a call this log shows (a session's telemetry:
    /// its duration, the person's decision), put on the call's tools record as
    /// `telemetry` (kept in the record's extra), with its `duration_ms` when the log
    /// gives none. The call is found by its id (`matches`) on its `messages` record;
    /// false when no call has such an id.
    pub fn call_facts(&mut self, matches: impl Fn(&str) -> bool, facts: Map<String, Value>) -> bool {
        let Some(messages) = self.builder.records(TraceKind::Messages) else { return false };
        let Some(tool_seq) = messages
            .iter()
            .filter(|m| m.get("tool_call_id").and_then(Value::as_str).is_some_and(&matches))
            .find_map(|m| m.get("tool_seq").and_then(Value::as_u64))
        else {
            return false;
        };
        let has_duration = self
            .builder
            .records(TraceKind::Tools)
            .into_iter()
            .flatten()
            .any(|r| r.get("seq").and_then(Value::as_u64) == Some(tool_seq) && r.contains_key("duration_ms"));
        if let (false, Some(d)) =
            (has_duration, facts.get("duration_ms").filter(|d| d.as_f64().is_some_and(|d| d >= 0.0)))
        {
            self.builder.set_field(TraceKind::Tools, tool_seq, "duration_ms", d.clone());
        }
        self.builder.set_field(TraceKind::Tools, tool_seq, "telemetry", Value::Object(facts))
    }
    /// The log gave a cost in money ([`Recorder::usd`]).
    pub fn usd_known(&self) -> bool {
        self.usd.is_some()
    }
    pub fn supersedes(&mut self, episode_id: impl Into<String>) {
        self.supersedes = Some(episode_id.into());
    }
    pub fn patch(&mut self, diff: &str) {
        if !diff.trim().is_empty() {
            let _ = self.file("patch.diff".into(), diff.as_bytes().to_vec());
            self.has_patch = true;
        }
    }
    /// The task as given (`task.prompt`), when the format knows which message it is;
    /// otherwise the first person's message is taken. The first one given wins.
    pub fn task_prompt(&mut self, text: &str) {
        if self.task_prompt.is_none() && !text.trim().is_empty() {
            self.task_prompt = Some(text.to_string());
        }
    }
    /// The agent's final message, when the format knows it better than "the last
    /// assistant text" (a submission's text, a result event). The last one given wins.
    pub fn final_message(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.final_message = Some(text.to_string());
        }
    }
    /// Some edit diff of this run is numbered within the replaced text, not the file
    /// (docs/format.md §9.2): noted once in the provenance.
    pub fn fragment_diff(&mut self) {
        self.fragment_diffs = true;
    }
    /// The log has a conversation: the messages trace is recorded, possibly empty.
    pub fn record_messages(&mut self) {
        if !self.messages {
            self.messages = true;
            self.builder.record_trace(TraceKind::Messages);
        }
    }
    /// A message or message part, at its place in the stream. A message with neither
    /// text, thinking nor usage is not written. Returns its seq.
    pub fn message(&mut self, m: Message) -> Option<u64> {
        self.record_messages();
        if m.is_empty() {
            return None;
        }
        // A person's words (or a user message whose writer the log does not tell); not
        // the harness's, not a subagent's prompt.
        if m.role == Role::User && matches!(m.author.as_deref(), None | Some(HUMAN)) && self.first_person.is_none() {
            self.first_person.clone_from(&m.text);
        }
        if m.role == Role::Assistant && m.author.is_none() && m.text.is_some() {
            self.last_agent.clone_from(&m.text);
        }
        let mut f = Map::new();
        f.insert("role".into(), json!(m.role.name()));
        let strings = [("author", m.author), ("text", m.text), ("reasoning", m.reasoning), ("model", m.model)];
        for (key, value) in strings {
            if let Some(v) = value {
                f.insert(key.into(), json!(v));
            }
        }
        for (key, value) in [("tokens_in", m.tokens_in), ("tokens_out", m.tokens_out)] {
            if let Some(v) = value {
                f.insert(key.into(), json!(v));
            }
        }
        Some(self.push(TraceKind::Messages, m.ts.as_deref(), Grade::Observed, f))
    }
    /// Another file of the package (a report, an artifact), relative to its root.
    pub fn artifact(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), Refusal> {
        self.file(path.to_string(), bytes).map_err(|p| Refusal::new(path, None, p.message))
    }
    /// Every file the recorder adds goes through here: scanned for secrets as it is
    /// written, and kept aside when it holds any (a later file of the same path replaces
    /// both the file and what was kept).
    fn file(&mut self, path: String, bytes: Vec<u8>) -> Result<(), Box<Problem>> {
        let findings = secrets::scan(&bytes);
        let kept = (!findings.is_empty()).then(|| bytes.clone());
        self.builder.file(path.clone(), bytes)?;
        match kept {
            Some(bytes) => self.secret_files.insert(path, (findings, bytes)),
            None => self.secret_files.remove(&path),
        };
        Ok(())
    }
    pub fn tokens(&mut self, tokens_in: Option<i64>, tokens_out: Option<i64>) {
        if let Some(t) = tokens_in {
            *self.tokens_in.get_or_insert(0) += t;
        }
        if let Some(t) = tokens_out {
            *self.tokens_out.get_or_insert(0) += t;
        }
    }
    /// Of the input tokens counted with [`Recorder::tokens`], those read from and
    /// written to the model's prompt cache (`outcome.cost.cache_read_tokens`,
    /// `cache_write_tokens`): summed.
    pub fn cache_tokens(&mut self, read: Option<i64>, write: Option<i64>) {
        for (total, n) in [(&mut self.cache_read_tokens, read), (&mut self.cache_write_tokens, write)] {
            if let Some(n) = n.filter(|n| *n >= 0) {
                *total.get_or_insert(0) += n;
            }
        }
    }

    pub fn usd(&mut self, usd: f64) {
        if usd.is_finite() && usd >= 0.0 {
            *self.usd.get_or_insert(0.0) += usd;
        }
    }
    /// The log does not show what the agent did (a harness's result without the
    /// agent's own log): its actions, tools and interventions are not recorded, not
    /// "recorded, none". Records already pushed stay (and keep their traces recorded).
    pub fn agent_not_observed(&mut self) {
        for kind in [TraceKind::Actions, TraceKind::Tools, TraceKind::Interventions] {
            self.builder.unrecord_trace(kind);
        }
        self.agent_observed = false;
    }

    /// The log ends inside a turn the agent had not ended: its completion claim is
    /// unknown (left out of the outcome, never guessed from its last words), and the
    /// stop reason `other` unless the log gives one (importers-v1 §6 as read in
    /// docs/importers.md §10).
    pub fn log_cut_mid_turn(&mut self) {
        self.claim_unknown = true;
        self.note("the log ends inside a turn the agent had not ended: its completion claim is unknown");
    }

    /// The source cannot show whether the agent claimed completion (telemetry sends no
    /// end of turn): the claim is left out of the outcome, unknown, with `why` as a note.
    pub fn claim_not_observed(&mut self, why: &str) {
        self.claim_unknown = true;
        self.note(why);
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

    /// The agent's part of a call, before its tools record (docs/format.md §9.1):
    /// written when the messages trace is recorded; `tool_seq` names the record that
    /// follows.
    fn call_message(&mut self, call: &Call) {
        if let Some(mut f) = self.call_fields(call, Role::Assistant) {
            if let Some(a) = &call.arguments {
                f.insert("arguments".into(), a.clone());
            }
            f.insert("tool_seq".into(), json!(self.builder.next_seq() + 1));
            self.push(TraceKind::Messages, call.ts.as_deref(), Grade::Observed, f);
        }
    }

    /// The result of a call, after its records: the output is the tools record's file.
    fn result_message(&mut self, call: &Call, tool_seq: u64) {
        if let Some(mut f) = self.call_fields(call, Role::Tool) {
            f.insert("tool_seq".into(), json!(tool_seq));
            let failed = call.timed_out
                || call.failure_type.is_some_and(|t| t != "none")
                || call.exit_code.is_some_and(|(c, _)| c != 0);
            if let Some(e) = call.is_error.or(failed.then_some(true)) {
                f.insert("is_error".into(), json!(e));
            }
            self.push(TraceKind::Messages, None, Grade::Observed, f);
        }
    }

    /// What a call's call and result records share (role, author, id, tool), or `None`
    /// when they are not written (no messages trace, or not the agent's call).
    fn call_fields(&self, call: &Call, role: Role) -> Option<Map<String, Value>> {
        if !self.messages || self.not_agent {
            return None;
        }
        let mut f = Map::new();
        f.insert("role".into(), json!(role.name()));
        if let Some(a) = &call.author {
            f.insert("author".into(), json!(a));
        }
        if let Some(id) = &call.call_id {
            f.insert("tool_call_id".into(), json!(id));
        }
        f.insert("tool".into(), json!(call.tool));
        Some(f)
    }

    fn tools_record(&mut self, call: &Call, grade: Grade) -> u64 {
        self.call_message(call);
        let seq = self.builder.next_seq();
        self.current_call = Some((seq, call_end_us(call)));
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
        if call.output_seen {
            let path = output_path(seq);
            let mut output = call.output.as_bytes().to_vec();
            if output.len() as u64 > self.max_file_bytes {
                // Cut to what a package file may hold (on a character boundary), saying so.
                let marker =
                    format!("\n[epistore: output cut at the package file limit; it was {} bytes]", output.len());
                let mut keep = (self.max_file_bytes as usize).saturating_sub(marker.len());
                while keep > 0 && !call.output.is_char_boundary(keep) {
                    keep -= 1;
                }
                output.truncate(keep);
                output.extend_from_slice(marker.as_bytes());
                self.note(format!("the output of tools record {seq} was cut to the package file limit"));
            }
            // A path the recorder chose cannot collide with a reserved one.
            let _ = self.file(path.clone(), output);
            f.insert("output".into(), json!(path));
        }
        self.after_complete = true;
        let pushed = self.push(TraceKind::Tools, call.ts.as_deref(), grade, f);
        debug_assert_eq!(pushed, seq);
        pushed
    }

    /// The `actions` record of a tool call (`tool_seq` names its tools record).
    fn action(&mut self, ts: Option<&str>, grade: Grade, effect: Effect<'_>, tool_seq: u64) -> u64 {
        self.action_of(ts, grade, effect, Some(tool_seq))
    }

    /// An `actions` record, of a tool call (`tool_seq`) or of no call.
    fn action_of(&mut self, ts: Option<&str>, grade: Grade, effect: Effect<'_>, tool_seq: Option<u64>) -> u64 {
        let mut f = Map::new();
        f.insert("kind".into(), json!(effect.kind));
        if !effect.paths.is_empty() {
            let paths: Vec<String> = effect.paths.iter().map(|p| self.relative(p)).collect();
            f.insert("paths".into(), json!(paths));
        }
        f.insert("mutates".into(), json!(effect.mutates));
        f.insert("ok".into(), json!(effect.ok));
        if let Some(tool_seq) = tool_seq {
            f.insert("tool_seq".into(), json!(tool_seq));
        }
        if let Some(state) = self.state_digest() {
            f.insert(STATE_DIGEST.into(), json!(state));
        }
        self.actions_recorded += 1;
        if effect.mutates && effect.ok {
            if let Some((call, Some(end))) = self.current_call.filter(|(call, _)| Some(*call) == tool_seq) {
                self.mutation_ends.push((call, self.ok_mutations, end));
            }
            self.ok_mutations += 1;
        }
        self.push(TraceKind::Actions, ts, grade, f)
    }

    /// The revision a check that started at `ts` is bound to when it overlapped a
    /// mutation of another call: the one before the earliest mutation whose call ended
    /// after the check started (importers-v1 §4: an outcome that cannot be known counts
    /// as possibly changed, so it can make a check stale, never current). None, and the
    /// check keeps the revision at its seq, when there was none or the log gives no
    /// times.
    fn overlapped_revision(&self, ts: Option<&str>, check_call: u64) -> Option<u64> {
        let start = ts.and_then(micros)?;
        self.mutation_ends
            .iter()
            .filter(|(call, _, end)| *call != check_call && *end > start)
            .map(|(_, before, _)| *before)
            .min()
            .filter(|before| *before < self.ok_mutations)
    }

    /// The workspace state (a harness's own identity of it, such as a git tree id) at
    /// this point of the log; `None` when the log gives none. Actions and checks
    /// recorded from now on carry it as their `state_digest` (docs/format.md §9.5) until
    /// an ok mutation changes the state: never a digest the log did not give for the
    /// state a record started from.
    pub fn workspace_state(&mut self, state: Option<&str>) {
        self.state = state.map(|s| (s.to_string(), self.ok_mutations));
    }

    /// The workspace state the log records at this point, which is the run's end state
    /// (`outcome.final_state_digest`) when no action is recorded after it.
    pub fn end_state(&mut self, state: Option<&str>) {
        self.end_state = state.map(|s| (s.to_string(), self.actions_recorded));
    }

    /// The digest of the state a record made now started from, when the log gave one.
    fn state_digest(&self) -> Option<&str> {
        self.state.as_ref().filter(|(_, at)| *at == self.ok_mutations).map(|(d, _)| d.as_str())
    }

    /// `outcome.final_state_digest`: the last recorded state, when nothing was done after it.
    fn final_state(&self) -> Option<&str> {
        self.end_state.as_ref().filter(|(_, at)| *at == self.actions_recorded).map(|(d, _)| d.as_str())
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
        // The call's own working directory, when its arguments name one (Codex's
        // `workdir`): the command runs there, not necessarily in the workspace.
        let call_dir = call.arguments.as_ref().and_then(|a| {
            ["workdir", "cwd", "working_dir", "dir_path"].iter().find_map(|k| a.get(*k).and_then(Value::as_str))
        });
        let analysis = shell::analyse_in(command, self.workdir.as_deref(), call_dir, &self.declared);
        let exit = call.exit_code.map(|(c, _)| c);
        // An editor command that refused its edit printed so (SWE-agent's linting
        // editor; `str_replace_editor` when `old_str` was not found once) and changed
        // nothing; so did `git stash` with nothing to stash.
        let changed_nothing = call.output.contains("Your proposed edit has introduced new syntax error")
            || call.output.trim_start().starts_with("No replacement was performed")
            || call.output.trim_start().starts_with("No local changes to save");
        let mutations = analysis.segments.iter().filter(|s| matches!(s.kind, SegmentKind::Mutation { .. })).count();
        let mut any_action = false;
        // A call's output is one for all its segments: a write it reports is laid to its
        // last opaque segment, once.
        let last_opaque = analysis.segments.iter().rposition(|s| s.kind == SegmentKind::Opaque);
        for (i, seg) in analysis.segments.iter().enumerate() {
            match &seg.kind {
                // A test run in another tree (another repository, a worktree elsewhere) is
                // no evidence about this workspace: recorded as a run, not as a check
                // (docs/importers.md §10).
                SegmentKind::Check { .. } if seg.elsewhere => {
                    self.action(
                        call.ts.as_deref(),
                        Grade::Derived,
                        Effect { kind: "run", paths: &[], mutates: false, ok: true },
                        tool_seq,
                    );
                    self.note(
                        "a test ran in a directory outside the workspace: recorded as a run, not as a check of \
                         the workspace",
                    );
                    any_action = true;
                }
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
                    if let Some(state) = self.state_digest() {
                        f.insert(STATE_DIGEST.into(), json!(state));
                    }
                    if let Some(revision) = self.overlapped_revision(call.ts.as_deref(), tool_seq) {
                        f.insert("revision".into(), json!(revision));
                        self.note(
                            "a check started before a mutation of another call had finished (calls run in \
                             parallel): it is bound to the revision before that mutation",
                        );
                    }
                    let check = self.push(TraceKind::Verification, call.ts.as_deref(), grade, f);
                    self.call_checks.push((tool_seq, check));
                }
                SegmentKind::Mutation { kind, paths, inside } => {
                    let ok = shell::mutation_ok(&analysis, i, exit) && !changed_nothing;
                    let seq = self.action(
                        call.ts.as_deref(),
                        Grade::Derived,
                        Effect { kind, paths, mutates: *inside, ok },
                        tool_seq,
                    );
                    // An editor command's diff (SWE-agent's `str_replace_editor`, run as a
                    // command) belongs to its one edit; with several, to none of them.
                    if let Some(diff) = call.diff.as_ref().filter(|_| mutations == 1) {
                        self.builder.set_field(TraceKind::Actions, seq, "diff", json!(diff));
                        if ok {
                            self.edit_diffs.push(diff.clone());
                        }
                    }
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
                SegmentKind::Opaque if Some(i) == last_opaque => {
                    match self.reported_workspace_write(&call.output, seg.elsewhere) {
                        // The command's own output says it wrote files in the workspace: an
                        // inferred possible mutation (docs/importers.md §10).
                        Some(paths) => self.action(
                            call.ts.as_deref(),
                            Grade::Inferred,
                            Effect { kind: "edit", paths: &paths, mutates: true, ok: true },
                            tool_seq,
                        ),
                        None => self.action(
                            call.ts.as_deref(),
                            Grade::Derived,
                            Effect { kind: "run", paths: &[], mutates: false, ok: true },
                            tool_seq,
                        ),
                    };
                    any_action = true;
                }
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
        self.result_message(call, tool_seq);
        tool_seq
    }

    /// The workspace files an opaque command's output reports writing (`Wrote
    /// src/x.json`, `updated 3 files`), relative to the workspace; empty when it counts
    /// files without naming them; None when it reports no write in the workspace. A
    /// relative path or a bare count is in the workspace unless the command ran
    /// elsewhere.
    fn reported_workspace_write(&self, output: &str, elsewhere: bool) -> Option<Vec<String>> {
        let report = shell::reported_write(output)?;
        let workdir = self.workdir.as_deref();
        let paths: Vec<String> = report
            .paths
            .iter()
            .filter(|p| {
                if p.starts_with('/') || p.starts_with('~') {
                    shell::inside_workspace(p, workdir)
                } else {
                    !elsewhere
                }
            })
            .map(|p| self.relative(p))
            .collect();
        (!paths.is_empty() || (report.counted && !elsewhere)).then_some(paths)
    }

    /// A structured edit tool (section 4, observed): one mutation, whatever the number
    /// of files; `ok` false when the tool reported failure.
    pub fn edit(&mut self, call: Call, kind: EditKind, paths: &[String], ok: bool) -> u64 {
        self.mutating_call(call, Grade::Observed, kind, paths, ok)
    }

    /// An edit the log shows only in words or patterns (aider's `/undo`, SWE-agent
    /// editor commands): a derived mutation.
    pub fn derived_edit(&mut self, call: Call, kind: EditKind, paths: &[String], ok: bool) -> u64 {
        self.mutating_call(call, Grade::Derived, kind, paths, ok)
    }

    /// A tool call that is one mutation: its tools record and its mutating action, both
    /// of `grade`.
    fn mutating_call(&mut self, call: Call, grade: Grade, kind: EditKind, paths: &[String], ok: bool) -> u64 {
        let tool_seq = self.tools_record(&call, grade);
        let seq =
            self.action(call.ts.as_deref(), grade, Effect { kind: kind.name(), paths, mutates: true, ok }, tool_seq);
        if let Some(diff) = &call.diff {
            self.builder.set_field(TraceKind::Actions, seq, "diff", json!(diff));
            if ok {
                self.edit_diffs.push(diff.clone());
            }
        }
        self.result_message(&call, tool_seq);
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
        self.result_message(&call, tool_seq);
        tool_seq
    }

    /// A tool whose effect on the files the rules cannot tell: `kind: run`, counted in
    /// `provenance.opaque_calls`. One that plainly reports a workspace write (its name
    /// says it writes, its arguments name a path inside the workspace, it did not fail:
    /// an MCP `write_file`) is an `inferred` possible mutation instead, which advances the
    /// revision like any ok mutation: a check before it is never `current`
    /// (docs/importers.md §10).
    pub fn opaque(&mut self, call: Call) -> u64 {
        let written = inferred_write(&call, self.workdir.as_deref());
        let (grade, effect) = match &written {
            Some(paths) => (Grade::Inferred, Effect { kind: "edit", paths, mutates: true, ok: true }),
            None => (Grade::Observed, Effect { kind: "run", paths: &[], mutates: false, ok: true }),
        };
        let tool_seq = self.tools_record(&call, Grade::Observed);
        self.action(call.ts.as_deref(), grade, effect, tool_seq);
        self.opaque_calls += 1;
        self.result_message(&call, tool_seq);
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
            self.result_message(&call, tool_seq);
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
        self.result_message(&call, tool_seq);
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
    /// What a person wrote to the agent in a chat session: the first time, the task
    /// (no intervention); later, an intervention. Either way a `user` message.
    pub fn person_said(&mut self, ts: Option<&str>, text: String) {
        if self.task_prompt.is_none() {
            self.task_prompt(&text);
        } else {
            self.person_message(ts, &text);
        }
        self.message(Message::human(text).ts(ts));
    }
    /// A person approved (`approval`) or rejected (`other`) a tool call.
    pub fn person_decision(&mut self, ts: Option<&str>, approved: bool, reason: &str) -> u64 {
        self.intervention(ts, if approved { "approval" } else { "other" }, reason, Grade::Observed)
    }
    /// A person interrupted the run.
    pub fn person_abort(&mut self, ts: Option<&str>, reason: &str) -> u64 {
        self.intervention(ts, "abort", reason, Grade::Observed)
    }
    /// The mutations recorded so far that did not fail (possible ones included).
    pub fn ok_mutations(&self) -> u64 {
        self.ok_mutations
    }

    /// A person went back to an earlier point of the conversation (Claude Code's
    /// rewind): an intervention `rollback`, and, when `restored` (the agent changed files
    /// in the abandoned branch, which the rewind may have restored from its checkpoints,
    /// and the log does not say whether it did), an `inferred` possible mutation with no
    /// tool call, so no check before it is `current` (docs/importers.md §10).
    pub fn person_rewind(&mut self, ts: Option<&str>, restored: bool) -> u64 {
        let seq = self.intervention(ts, "rollback", "went back to an earlier prompt", Grade::Derived);
        if restored {
            self.action_of(ts, Grade::Inferred, Effect { kind: "edit", paths: &[], mutates: true, ok: true }, None);
        }
        seq
    }

    /// A command a person ran in the agent's shell (Codex `user_shell`, aider `/run`,
    /// `/test`): an intervention, its tools record, and a check (actor human) when the
    /// command is one.
    pub fn person_command(&mut self, mut call: Call, command: &str) -> u64 {
        self.intervention(call.ts.as_deref(), "other", command, Grade::Observed);
        self.not_agent(|r| r.shell_as(&mut call, command, "human"))
    }

    /// Records a person's or the harness's calls: no assistant call or tool result
    /// messages around them.
    fn not_agent<T>(&mut self, f: impl FnOnce(&mut Recorder) -> T) -> T {
        let was = std::mem::replace(&mut self.not_agent, true);
        let out = f(self);
        self.not_agent = was;
        out
    }
    /// A person rolled back the agent's work (aider `/undo`): a rollback intervention
    /// and a derived mutation.
    pub fn person_rollback(&mut self, call: Call, paths: &[String]) -> u64 {
        self.intervention(call.ts.as_deref(), "rollback", "/undo", Grade::Derived);
        self.not_agent(|r| r.derived_edit(call, EditKind::Edit, paths, true))
    }
    /// A rollback the log shows failing (aider's `/undo` printing why it cannot undo):
    /// the rollback intervention and a derived edit with `ok: false`, which changes nothing.
    pub fn person_rollback_failed(&mut self, call: Call) -> u64 {
        self.intervention(call.ts.as_deref(), "rollback", "/undo", Grade::Derived);
        self.not_agent(|r| r.derived_edit(call, EditKind::Edit, &[], false))
    }

    /// A check the harness ran on its own (aider's automatic test and lint runs), seen
    /// only through its words: a tools record and one check, both derived.
    pub fn harness_check(&mut self, call: Call, method: &str, result: &str) -> u64 {
        let tool_seq = self.not_agent(|r| r.tools_record(&call, Grade::Derived));
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
    /// validates it, with the secrets its files and records hold counted by pattern
    /// (replaced first, with `options.redact`). A log that names no model and no
    /// `--model` is refused here.
    pub fn finish(mut self, options: &Options) -> Result<(BuiltPackage, SecretCounts), Refusal> {
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
        self.derived_patch();
        if self.task_prompt.is_none() {
            self.task_prompt = self.first_person.take();
        }
        if self.final_message.is_none() {
            self.final_message = self.last_agent.take();
        }
        let mut secrets = self.secrets(options.redact);
        let manifest = self.manifest(model, options);
        let manifest = scrub_manifest(manifest, options.redact, &mut secrets);
        self.builder.manifest(manifest);

        // The label needs the posture, which the store derives from the traces: derive
        // it with a placeholder outcome (no artifact is serialised or hashed for that),
        // then write the real one.
        let mut placeholder = json!({"label": null});
        if let Some(state) = self.final_state() {
            placeholder[FINAL_STATE_DIGEST] = json!(state);
        }
        self.builder.outcome(placeholder);
        let derived = self.builder.derive().map_err(|p| Refusal::new(&source_name, None, p.to_string()))?;
        let outcome = self.outcome(&derived.posture);
        // The final message was counted (and replaced) with the records.
        let outcome = scrub(outcome, &["/final_message"], options.redact, &mut secrets, "the outcome");
        self.builder.outcome(outcome);
        let package = self.builder.finish().map_err(|p| Refusal::new(&source_name, None, p.to_string()))?;
        Ok((package, secrets))
    }

    /// `patch.diff` from the edits' diffs when the log has no patch of its own
    /// (docs/format.md §9.2), and the notes on how the diffs were made.
    fn derived_patch(&mut self) {
        if self.fragment_diffs {
            self.note(
                "some edit diffs are numbered within the replaced text (the log does not give the file's line numbers)",
            );
        }
        if self.has_patch || self.edit_diffs.is_empty() {
            return;
        }
        let mut patch = String::new();
        for d in &self.edit_diffs {
            patch.push_str(d);
            if !d.ends_with('\n') {
                patch.push('\n');
            }
        }
        let n = self.edit_diffs.len();
        if self.file("patch.diff".into(), patch.into_bytes()).is_ok() {
            self.note(format!(
                "patch.diff is derived: the diffs of the {n} edits the log shows, in order (not one net diff)"
            ));
        }
    }

    /// Counts the secrets in the files written, in every string of every record
    /// (commands, reasons, check ids, paths) and in the notes, by pattern; with `redact`,
    /// replaces them and says so in the notes (section 0: the package tells what the
    /// import changed), marking each source file whose copy no longer matches its `blake3`.
    fn secrets(&mut self, redact: bool) -> SecretCounts {
        let mut total = SecretCounts::new();
        let mut in_sources = SecretCounts::new();
        let mut source_paths: Vec<String> = Vec::new();
        let mut in_others = SecretCounts::new();
        let mut other_paths: Vec<String> = Vec::new();
        for (path, (findings, bytes)) in std::mem::take(&mut self.secret_files) {
            let counts = secrets::count(&findings);
            secrets::add_counts(&mut total, &counts);
            if !redact {
                continue;
            }
            // The builder took this path once already.
            let _ = self.builder.file(path.clone(), secrets::replace(&bytes, &findings));
            if path.starts_with("artifacts/source/") {
                for s in self.sources.iter_mut().filter(|s| s.artifact == path) {
                    s.redacted = true;
                }
                secrets::add_counts(&mut in_sources, &counts);
                source_paths.push(path);
            } else {
                secrets::add_counts(&mut in_others, &counts);
                other_paths.push(path);
            }
        }
        let mut in_records = SecretCounts::new();
        let mut changes: Vec<(TraceKind, u64, String, Value)> = Vec::new();
        for (_, kind) in TRACE_FILES {
            for record in self.builder.records(kind).unwrap_or_default() {
                let Some(seq) = record.get("seq").and_then(Value::as_u64) else { continue };
                for (key, value) in record {
                    if let Some(redacted) = redact_value(value, &mut in_records) {
                        changes.push((kind, seq, key.clone(), redacted));
                    }
                }
            }
        }
        // The notes so far (an error message a log carried may quote a key).
        let notes: Vec<Option<Value>> =
            self.notes.iter().map(|n| redact_value(&Value::String(n.clone()), &mut in_records)).collect();
        // The task prompt and final message, which go into the manifest and outcome.
        let mut words: Vec<(&mut Option<String>, Option<Value>)> = Vec::new();
        for text in [&mut self.task_prompt, &mut self.final_message] {
            let redacted = text.as_ref().and_then(|t| redact_value(&Value::String(t.clone()), &mut in_records));
            words.push((text, redacted));
        }
        secrets::add_counts(&mut total, &in_records);
        if redact {
            for (kind, seq, key, value) in changes {
                self.builder.set_field(kind, seq, &key, value);
            }
            for (note, redacted) in self.notes.iter_mut().zip(notes) {
                if let Some(Value::String(r)) = redacted {
                    *note = r;
                }
            }
            for (text, redacted) in words {
                if let Some(Value::String(r)) = redacted {
                    *text = Some(r);
                }
            }
            let sum = |counts: &SecretCounts| counts.iter().map(|(_, n)| n).sum::<usize>();
            let names = |counts: &SecretCounts| counts.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", ");
            if !source_paths.is_empty() {
                self.note(format!(
                    "redacted {} secrets (patterns: {}) in {}; the copies no longer match the blake3 of their \
                     source files",
                    sum(&in_sources),
                    names(&in_sources),
                    source_paths.join(", ")
                ));
            }
            if !other_paths.is_empty() {
                self.note(format!(
                    "redacted {} secrets (patterns: {}) in {}",
                    sum(&in_others),
                    names(&in_others),
                    other_paths.join(", ")
                ));
            }
            if !in_records.is_empty() {
                self.note(format!(
                    "redacted {} secrets (patterns: {}) in trace records (commands, messages, diffs, reasons, check \
                     ids), the task prompt, the final message and notes",
                    sum(&in_records),
                    names(&in_records)
                ));
            }
        }
        total
    }

    fn manifest(&self, model: String, options: &Options) -> Value {
        let task = options.task.clone().or_else(|| self.task.clone()).unwrap_or_else(|| self.episode.clone());
        let mut task_obj = json!({"id": task});
        if let Some(p) = &self.task_prompt {
            task_obj["prompt"] = json!(p);
        }
        if let Some(c) = options.cluster.clone().or_else(|| self.cluster.clone()) {
            task_obj["cluster"] = json!(c);
        }
        let name = self.harness_name.clone().unwrap_or_else(|| self.format.harness().to_string());
        let level = options.harness_level.clone().unwrap_or_else(|| name.clone());
        let mut harness = json!({"name": name, "level": level});
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
                if s.redacted {
                    f["redacted"] = json!(true);
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
            "format": FORMAT_V1_2,
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
        let current = posture == Posture::Current.as_str();
        let label = match correct {
            None => Value::Null,
            Some(false) => json!("failed"),
            Some(true) if current && self.human_interventions == 0 => json!("autonomous_verified_success"),
            Some(true) if current => json!("assisted_verified_success"),
            Some(true) => json!("unverified_success"),
        };
        let reported_complete = self.last_complete.is_some() && !self.after_complete && !self.claim_unknown;
        let stop = self.stop_reason.unwrap_or(if reported_complete { "completed" } else { "other" });
        let mut o = json!({
            "label": label,
            "agent_reported_complete": reported_complete,
            "stop_reason": stop,
            "correct": correct,
        });
        // A log that does not show the agent says nothing of its claim: left out (unknown).
        if (!self.agent_observed && self.last_complete.is_none()) || self.claim_unknown {
            if let Some(map) = o.as_object_mut() {
                map.shift_remove("agent_reported_complete");
            }
        }
        if let Some(v) = &self.verdict {
            if (0.0..=1.0).contains(&v.value) {
                o["score"] = json!(v.value);
            }
        }
        if !self.other_scores.is_empty() {
            o["scores"] = json!(self.other_scores);
        }
        if let Some(m) = &self.final_message {
            o["final_message"] = json!(m);
        }
        if let Some(state) = self.final_state() {
            o[FINAL_STATE_DIGEST] = json!(state);
        }
        let mut cost = Map::new();
        if let Some(t) = self.tokens_in {
            cost.insert("tokens_in".into(), json!(t));
        }
        if let Some(t) = self.tokens_out {
            cost.insert("tokens_out".into(), json!(t));
        }
        for (key, n) in [("cache_read_tokens", self.cache_read_tokens), ("cache_write_tokens", self.cache_write_tokens)]
        {
            // Parts of `tokens_in`: meaningless without it.
            if let (Some(n), Some(_)) = (n, self.tokens_in) {
                cost.insert(key.into(), json!(n));
            }
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

/// The manifest with the secrets in its own strings counted and, with `redact`,
/// replaced: what the importer derived from the log rather than copied from a record
/// (the task and cluster, which a git remote or a path can name; the episode and
/// source file names; versions). The prompt and notes were counted with the records.
fn scrub_manifest(manifest: Value, redact: bool, counts: &mut SecretCounts) -> Value {
    scrub(manifest, &["/task/prompt", "/provenance/notes"], redact, counts, "the manifest")
}

/// `doc` with the secrets in its strings (outside the `counted` JSON pointers, which
/// the records pass saw already) counted into `counts` and, with `redact`, replaced,
/// saying so in the manifest's notes when `doc` has them.
fn scrub(mut doc: Value, counted: &[&str], redact: bool, counts: &mut SecretCounts, what: &str) -> Value {
    // Set aside what was counted, scan the rest once, put it back.
    let aside: Vec<Option<Value>> = counted.iter().map(|p| doc.pointer_mut(p).map(Value::take)).collect();
    let mut found = SecretCounts::new();
    let redacted = redact_value(&doc, &mut found);
    if redact {
        if let Some(r) = redacted {
            doc = r;
        }
    }
    for (pointer, value) in counted.iter().zip(aside) {
        if let (Some(slot), Some(value)) = (doc.pointer_mut(pointer), value) {
            *slot = value;
        }
    }
    if found.is_empty() {
        return doc;
    }
    secrets::add_counts(counts, &found);
    if redact {
        let n: usize = found.iter().map(|(_, n)| n).sum();
        let names: Vec<&str> = found.iter().map(|(p, _)| *p).collect();
        if let Some(Value::Array(notes)) = doc.pointer_mut("/provenance/notes") {
            notes.push(json!(format!("redacted {n} secrets (patterns: {}) in {what}", names.join(", "))));
        }
    }
    doc
}

/// `value` with the secrets in its strings replaced (counted into `counts`), or `None`
/// when it holds none.
fn redact_value(value: &Value, counts: &mut SecretCounts) -> Option<Value> {
    match value {
        Value::String(s) => {
            let findings = secrets::scan(s.as_bytes());
            if findings.is_empty() {
                return None;
            }
            secrets::add_counts(counts, &secrets::count(&findings));
            let bytes = secrets::replace(s.as_bytes(), &findings);
            Some(Value::String(String::from_utf8(bytes).expect("redaction replaces ASCII with ASCII")))
        }
        Value::Array(items) => {
            let redacted: Vec<Option<Value>> = items.iter().map(|v| redact_value(v, counts)).collect();
            if redacted.iter().all(Option::is_none) {
                return None;
            }
            Some(Value::Array(redacted.into_iter().zip(items).map(|(r, v)| r.unwrap_or_else(|| v.clone())).collect()))
        }
        Value::Object(map) => {
            let redacted: Vec<Option<Value>> = map.values().map(|v| redact_value(v, counts)).collect();
            if redacted.iter().all(Option::is_none) {
                return None;
            }
            let pairs = map.iter().zip(redacted);
            Some(Value::Object(pairs.map(|((k, v), r)| (k.clone(), r.unwrap_or_else(|| v.clone()))).collect()))
        }
        _ => None,
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
/// An RFC 3339 time as µs since the epoch.
fn micros(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts.trim()).ok().map(|t| t.timestamp_micros())
}

/// When a call ended, from its start and duration, when the log gives both.
fn call_end_us(call: &Call) -> Option<i64> {
    let start = micros(call.ts.as_deref()?)?;
    match call.duration_ms.filter(|d| d.is_finite() && *d >= 0.0) {
        Some(duration) => Some(start + (duration * 1000.0) as i64),
        None => call.ended_by.as_deref().and_then(micros).filter(|end| *end >= start),
    }
}

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

/// The words of a tool's name that say it writes files.
const WRITE_VERBS: &[&str] = &[
    "write",
    "edit",
    "create",
    "delete",
    "remove",
    "move",
    "rename",
    "patch",
    "replace",
    "insert",
    "append",
    "save",
    "overwrite",
    "mkdir",
    "modify",
    "update",
    "put",
    "copy",
];

/// The argument names that hold a file path (a list under `paths` / `files`).
const PATH_ARGUMENTS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "target",
    "target_file",
    "destination",
    "dest",
    "new_path",
    "source",
    "old_path",
    "absolute_path",
    "relative_path",
];

/// The workspace paths an opaque tool plainly reports writing, or None: its name (the
/// last part of an MCP name such as `mcp__filesystem__write_file`) holds a write verb,
/// the log shows its result and it did not fail, and its arguments name a path inside
/// the workspace.
fn inferred_write(call: &Call, workdir: Option<&str>) -> Option<Vec<String>> {
    let failed = call.is_error == Some(true)
        || call.failure_type.is_some()
        || call.timed_out
        || matches!(call.exit_code, Some((c, _)) if c != 0);
    // It must report: a call the log shows no result of (it never ran, or its end is
    // missing) says nothing about a write.
    let reported = call.output_seen || call.is_error == Some(false);
    if failed || !reported {
        return None;
    }
    let short = call.tool.rsplit("__").next().unwrap_or(&call.tool);
    let words: Vec<String> = split_words(short);
    if !words.iter().any(|w| WRITE_VERBS.contains(&w.as_str())) {
        return None;
    }
    let arguments = call.arguments.as_ref()?.as_object()?;
    let mut paths = Vec::new();
    for (key, value) in arguments {
        let key = key.to_ascii_lowercase();
        if PATH_ARGUMENTS.contains(&key.as_str()) {
            paths.extend(value.as_str().map(str::to_string));
        } else if key == "paths" || key == "files" {
            paths.extend(value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_string)));
        }
    }
    paths.retain(|p| !p.trim().is_empty() && crate::shell::inside_workspace(p, workdir));
    (!paths.is_empty()).then_some(paths)
}

/// A tool name's words: split at `_`, `-`, `.`, `/`, `:` and lower-to-upper case
/// changes (`writeFile`), lowercased.
fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.' | '/' | ':' | ' ') {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::import_paths;
    use crate::{Options, Run};

    // Fake secrets, split so the source text carries no token (see `secrets::tests`).
    const GHP: &str = concat!("ghp", "_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
    const OPENAI: &str = concat!("sk-", "fZ8UzDzV8fUkkibjL5DZT3BlbkFJPjN0MEQ7wjJJibaZUPgH");
    const ANTHROPIC: &str = concat!(
        "sk-",
        "ant-api03-r3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY_uCu3ZR1zTOlUcR64cXQAA"
    );
    const AWS_ID: &str = concat!("AKIA", "UJZDEGXDNCF32EPF");

    /// A Claude Code run whose command exports a token and sends a key, whose tool
    /// printed an AWS key id, and whose person pasted an Anthropic key mid-run.
    fn log() -> String {
        let sid = "99999999-8888-7777-6666-555555555555";
        let command = format!(
            "export GITHUB_TOKEN={GHP} && curl -H \"Authorization: Bearer {OPENAI}\" https://api.invalid/deploy"
        );
        let lines = [
            json!({"type": "system", "subtype": "init", "session_id": sid, "cwd": "/srv/app", "model": "claude-sonnet-4-5", "claude_code_version": "2.1.100"}),
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:00Z", "parent_tool_use_id": null,
                "message": {"role": "user", "content": "Deploy the app."}}),
            json!({"type": "assistant", "session_id": sid, "timestamp": "2026-01-01T10:00:01Z", "parent_tool_use_id": null,
                "message": {"id": "m1", "model": "claude-sonnet-4-5", "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}]}}),
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:02Z", "parent_tool_use_id": null,
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": false,
                "content": format!("deployed with key id {AWS_ID}")}]}}),
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:03Z", "parent_tool_use_id": null,
                "message": {"role": "user", "content": format!("use ANTHROPIC_API_KEY={ANTHROPIC} for the next step")}}),
            json!({"type": "assistant", "session_id": sid, "timestamp": "2026-01-01T10:00:04Z", "parent_tool_use_id": null,
                "message": {"id": "m2", "model": "claude-sonnet-4-5", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}}),
            json!({"type": "result", "subtype": "success", "is_error": false, "session_id": sid, "total_cost_usd": 0.1,
                "usage": {"input_tokens": 10, "output_tokens": 1}}),
        ];
        lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect()
    }

    fn import(redact: bool) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        std::fs::write(&path, log()).unwrap();
        let (plan, runs) = import_paths(&[path], &Options { redact, ..Options::default() });
        assert!(plan.refused.is_empty(), "{:?}", plan.refused);
        assert_eq!(runs.len(), 1);
        runs.into_iter().next().unwrap().unwrap()
    }

    fn everything(run: &Run) -> String {
        let files = &run.package.raw.files;
        files.iter().map(|f| format!("{}\n{}\n", f.path, String::from_utf8_lossy(&f.bytes))).collect()
    }

    fn notes(run: &Run) -> Vec<String> {
        let p = run.package.episode.manifest.provenance().unwrap();
        p["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
    }

    const EXPECTED: [(&str, usize); 4] =
        [("aws-access-key-id", 2), ("github-token", 3), ("anthropic-key", 3), ("openai-key", 3)];

    #[test]
    fn secrets_are_counted_and_kept_without_redact() {
        let run = import(false);
        // The source copy holds each once; the command (tools record) and the call's
        // arguments (messages) hold the GitHub token and the OpenAI key; the tool output
        // file the AWS key id; the intervention's reason and the person's message the
        // Anthropic key.
        assert_eq!(run.secrets, EXPECTED.to_vec());
        let all = everything(&run);
        for secret in [GHP, OPENAI, ANTHROPIC, AWS_ID] {
            assert!(all.contains(secret), "{secret} kept");
        }
        let tools = run.package.raw.file("traces/tools.jsonl").unwrap();
        assert!(String::from_utf8_lossy(tools).contains(GHP));
        assert!(notes(&run).iter().all(|n| !n.contains("redacted")));
        let p = run.package.episode.manifest.provenance().unwrap();
        assert!(p["source_files"][0].get("redacted").is_none());
    }

    #[test]
    fn redact_leaves_no_secret_in_the_package() {
        let plain = import(false);
        let run = import(true);
        assert_eq!(run.secrets, EXPECTED.to_vec(), "the same secrets, now replaced");
        let all = everything(&run);
        for secret in [GHP, OPENAI, ANTHROPIC, AWS_ID, "ghp_", "sk-", "AKIA"] {
            assert!(!all.contains(secret), "{secret} left in the package:\n{all}");
        }
        for f in &run.package.raw.files {
            assert_eq!(crate::secrets::scan(&f.bytes), vec![], "{}", f.path);
        }
        // The copy is still JSON Lines, with the replacement inside its strings.
        let copy = run.package.raw.file("artifacts/source/session.jsonl").unwrap();
        for line in String::from_utf8(copy.to_vec()).unwrap().lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("each line still JSON");
        }
        assert!(String::from_utf8_lossy(copy).contains("export GITHUB_TOKEN=[REDACTED:github-token] && curl"));
        let tools = String::from_utf8(run.package.raw.file("traces/tools.jsonl").unwrap().to_vec()).unwrap();
        assert!(tools.contains(r#"Authorization: Bearer [REDACTED:openai-key]\""#), "{tools}");
        let interventions = run.package.raw.file("traces/interventions.jsonl").unwrap();
        assert!(String::from_utf8_lossy(interventions).contains("ANTHROPIC_API_KEY=[REDACTED:anthropic-key]"));

        // Said in the provenance; the source file marked.
        let notes = notes(&run);
        assert!(
            notes.contains(
                &"redacted 4 secrets (patterns: aws-access-key-id, github-token, anthropic-key, openai-key) in \
                  artifacts/source/session.jsonl; the copies no longer match the blake3 of their source files"
                    .to_string()
            ),
            "{notes:?}"
        );
        assert!(
            notes.contains(
                &"redacted 6 secrets (patterns: github-token, anthropic-key, openai-key) in trace records \
                  (commands, messages, diffs, reasons, check ids), the task prompt, the final message and notes"
                    .to_string()
            ),
            "{notes:?}"
        );
        let p = run.package.episode.manifest.provenance().unwrap();
        assert_eq!(p["source_files"][0]["redacted"], json!(true));
        assert_eq!(
            p["source_files"][0]["blake3"],
            plain.package.episode.manifest.provenance().unwrap()["source_files"][0]["blake3"]
        );

        // Valid (finish validated it; read again as the store would), the same records,
        // and the same bytes on a second import.
        epistore_package::parse_package(&run.package.raw).expect("the package validates");
        let e = &run.package.episode;
        assert_eq!(e.tools.as_ref().map(Vec::len), plain.package.episode.tools.as_ref().map(Vec::len));
        assert_eq!(e.interventions.as_ref().map(Vec::len), plain.package.episode.interventions.as_ref().map(Vec::len));
        assert_eq!(import(true).package.id(), run.package.id());
        assert_ne!(plain.package.id(), run.package.id());
    }

    /// Through the recorder itself: a patch, a note and a check's command and id.
    #[test]
    fn redact_reaches_the_patch_the_notes_and_checks() {
        use crate::recorder::{Call, Grade, Part, Recorder};
        let record = |redact: bool| {
            let mut rec = Recorder::new(crate::codex::FORMAT, "r1");
            rec.model("gpt-5");
            rec.source("log.txt", &"ab".repeat(32), Part::Whole, format!("token {GHP}\n").into_bytes()).unwrap();
            rec.patch(&format!("--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+OPENAI_API_KEY={OPENAI}\n"));
            rec.note(format!("the output's `error`: Incorrect API key provided: {OPENAI}"));
            rec.shell(Call::new("shell").exit(Some(0), Grade::Observed), &format!("GITHUB_TOKEN={GHP} pytest"));
            rec.finish(&Options { redact, ..Options::default() }).unwrap()
        };
        let (plain, counts) = record(false);
        assert_eq!(counts, vec![("github-token", 3), ("openai-key", 2)], "copy, command, check command; patch, note");
        let (package, redacted_counts) = record(true);
        assert_eq!(redacted_counts, counts);
        let all: String = package.raw.files.iter().map(|f| String::from_utf8_lossy(&f.bytes).into_owned()).collect();
        assert!(!all.contains(GHP) && !all.contains(OPENAI), "{all}");
        assert_eq!(
            package.raw.file("patch.diff").unwrap(),
            b"--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+OPENAI_API_KEY=[REDACTED:openai-key]\n"
        );
        let checks = package.episode.checks.as_ref().unwrap();
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].command.as_deref(), Some("GITHUB_TOKEN=[REDACTED:github-token] pytest"));
        let notes = package.episode.manifest.provenance().unwrap()["notes"].clone();
        assert_eq!(
            notes,
            json!([
                "the output's `error`: Incorrect API key provided: [REDACTED:openai-key]",
                "redacted 1 secrets (patterns: github-token) in artifacts/source/log.txt; the copies no longer match \
                 the blake3 of their source files",
                "redacted 1 secrets (patterns: openai-key) in patch.diff",
                "redacted 3 secrets (patterns: github-token, openai-key) in trace records (commands, messages, diffs, \
                 reasons, check ids), the task prompt, the final message \
                 and notes",
            ])
        );
        assert!(plain.raw.file("patch.diff").unwrap().windows(GHP.len()).all(|w| w != GHP.as_bytes()));
    }

    /// A source file or a tool output past the package file limit: the package still
    /// ingests (so `export-package` and `ingest` round-trip it), and says what it left
    /// out or cut.
    #[test]
    fn what_is_past_the_package_file_limit_is_left_out_or_cut_and_said() {
        use crate::recorder::{Call, Grade, Part, Recorder};
        let mut rec = Recorder::new(crate::codex::FORMAT, "big");
        rec.limit_files_to(1_000);
        rec.model("gpt-5");
        rec.source("rollout.jsonl", &"cd".repeat(32), Part::Whole, vec![b'x'; 5_000]).unwrap();
        rec.shell(Call::new("shell").exit(Some(0), Grade::Observed).output("é".repeat(2_000)), "cat big.txt");
        let (package, _) = rec.finish(&Options::default()).unwrap();
        assert!(package.raw.file("artifacts/source/rollout.jsonl").is_none());
        let provenance = package.episode.manifest.provenance().unwrap();
        assert_eq!(provenance["source_files"][0]["blake3"], json!("cd".repeat(32)));
        let notes = provenance["notes"].to_string();
        assert!(notes.contains("the source rollout.jsonl (5000 bytes) is over the 1000 bytes"), "{notes}");
        assert!(notes.contains("was cut to the package file limit"), "{notes}");
        let path = package.episode.tools.as_ref().unwrap()[0].output.clone().expect("the output file is named");
        let output = package.raw.file(&path).unwrap();
        assert!(output.len() <= 1_000, "{}", output.len());
        let text = std::str::from_utf8(output).expect("cut on a character boundary");
        assert!(text.starts_with("éé") && text.ends_with("it was 4000 bytes]"), "{text}");
        // Within the limits a store applies: the package ingests as built.
        let limits = epistore_package::Limits { max_file_bytes: 1_000, ..Default::default() };
        assert!(package.raw.files.iter().all(|f| f.bytes.len() as u64 <= limits.max_file_bytes));
    }

    #[test]
    fn the_fixtures_hold_no_secret() {
        // Every real fixture imported as the command does: nothing found in any package.
        let dir = crate::testing::fixture("");
        let (_, runs) = import_paths(&[dir], &Options::default());
        let runs: Vec<Run> = runs.into_iter().flatten().collect();
        assert!(runs.len() >= 50, "the fixtures import: {} runs", runs.len());
        let mut found = Vec::new();
        for run in runs {
            if !run.secrets.is_empty() {
                found.push((run.package.episode.manifest.episode.clone(), run.secrets));
            }
        }
        assert_eq!(found, vec![]);
    }
}
