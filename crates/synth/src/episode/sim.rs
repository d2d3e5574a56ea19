//! The simulation of one episode: the hidden truth of the code under change, the level's
//! recorder, and the agent's moves (read, search, edit, test, ...), each of which
//! advances both. Every draw comes from the episode's one stream in program order, so
//! moving a draw, even between functions, changes the output.

use std::borrow::Cow;
use std::fmt::Write;

use serde_json::{json, Map, Value};

use super::{tool_output_path, Design, Slot};
use crate::model::{Model, Repo, Task};
use crate::rng::{round, Prng, STREAM_EPISODE, STREAM_RUN};
use crate::text::{self, rfc3339, EPOCH_2026_05_01};
use crate::world::{missing_at, World};

/// One trace record as the recorder writes it (synth's own key order).
pub type Rec = Map<String, Value>;

/// What a test run shows the agent.
#[derive(Clone, Copy, PartialEq)]
pub enum Observed {
    Pass,
    Fail,
    Timeout,
    Crash,
}

/// An agent check (H3) as the outcome and the verification report read it back.
pub struct AgentCheck {
    pub revision: usize,
    pub result: &'static str,
    pub requirements: Vec<String>,
    pub check_id: String,
    pub method: &'static str,
}

/// One episode in progress: where it runs (repository, task, model, level), what is
/// really true of the code, and what the recorder has written of it.
pub struct Sim<'w> {
    pub rng: Prng,
    pub repo: &'w Repo,
    pub task: &'w Task,
    pub model: &'w Model,
    pub level: usize,
    /// Scale of generated log sizes (Config::output_scale).
    pub output_scale: f64,
    pub truth: Truth,
    pub rec: Recorder<'w>,
}

/// The latent state no trace states outright: whether each revision of the code is
/// correct and what moves it. The agent's tests only sample it; the evaluators' oracles
/// and the verifiers read it after the episode.
pub struct Truth {
    /// Latent correctness of every revision (index = observed revision).
    pub states: Vec<bool>,
    /// How convincing each revision looks (drives false passes and false accepts).
    pub plausibility: Vec<f64>,
    /// Help from interventions (hints, corrections, context): raises the next fix's
    /// odds and halves with every attempt.
    pub boost: f64,
    /// Interventions that stood in for a responsibility the level lacks.
    pub missing_interventions: u32,
    /// Someone did more than approve, whether or not the harness recorded it.
    pub assisted: bool,
}

impl Truth {
    /// The current revision: 0 before any edit, one more per edit.
    pub fn revision(&self) -> usize {
        self.states.len() - 1
    }

    pub fn correct(&self) -> bool {
        *self.states.last().unwrap()
    }
}

/// What the level's recorder has written so far, and what it needs to write the next
/// record: seqs and clock, the seven traces, artifacts, and the tallies the outcome and
/// reports are written from.
pub struct Recorder<'w> {
    /// When the episode started (the clock's first value).
    pub started: i64,
    pub seq: u64,
    pub clock: i64,
    /// Whether the recorder kept every event; when not, `gap` says which it lost.
    pub trace_complete: bool,
    /// (seq at which records were lost, how many).
    pub gap: Option<(u64, u64)>,
    pub actions: Vec<Rec>,
    pub tools: Vec<Rec>,
    pub context: Vec<Rec>,
    pub checks: Vec<Rec>,
    pub attribution: Vec<Rec>,
    pub interventions: Vec<Rec>,
    pub entropy: Vec<Rec>,
    /// The level records interventions (always at H3, sometimes below).
    pub record_interventions: bool,
    /// Failed tool records (index into `tools`, what kind of run) awaiting recovery.
    pub unrecovered: Vec<(usize, &'static str)>,
    /// An attribution has already ranked fault locations (only the first one does).
    pub localised: bool,
    /// Agent checks, in order (H3), for the outcome's requirement statuses and reports.
    pub agent_checks: Vec<AgentCheck>,
    /// `artifacts/repro.log` as it grows (H3 writes it).
    pub repro_log: String,
    /// Artifacts (path, bytes): tool outputs, some borrowed from the task's shared ones.
    pub artifacts: Vec<(String, Cow<'w, [u8]>)>,
    /// Tool-output artifacts so far (they are numbered).
    pub n_outputs: u32,
    /// Files the patch touches, in first-edit order.
    pub edited: Vec<String>,
    /// The agent's spend, for the outcome's budget and cost.
    pub n_actions: u32,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl Recorder<'_> {
    /// Advances the clock and hands out the next `seq` with its timestamp.
    fn next(&mut self, rng: &mut Prng, lo_ms: u64, hi_ms: u64) -> (u64, String) {
        self.clock += rng.int(lo_ms.max(1), hi_ms.max(1)) as i64;
        if let Some((at, lost)) = self.gap {
            if self.seq >= at {
                // The recorder missed these events: their seqs are never written.
                self.seq += lost;
                self.gap = None;
            }
        }
        let seq = self.seq;
        self.seq += 1;
        (seq, rfc3339(self.clock))
    }

    /// A new record holding its `seq` and `ts`, `lo_ms..=hi_ms` after the last one.
    fn record(&mut self, rng: &mut Prng, lo_ms: u64, hi_ms: u64) -> (u64, Rec) {
        let (seq, ts) = self.next(rng, lo_ms, hi_ms);
        let mut r = Rec::new();
        r.insert("seq".into(), json!(seq));
        r.insert("ts".into(), json!(ts));
        (seq, r)
    }
}

impl<'w> Sim<'w> {
    /// The episode of `slot` before its first event: its stream, start time, whether
    /// the recorder will lose records, and the starting state of the code.
    pub fn new(world: &'w World, config_seed: u64, output_scale: f64, slot: &Slot, d: &Design) -> Sim<'w> {
        let task = &world.tasks[slot.task];
        let level = slot.level;
        let mut rng = Prng::new(&[config_seed, STREAM_EPISODE, slot.index as u64]);
        // Attempts of one (cell, seed) run a few hours apart, in order.
        let cell_start = Prng::new(&[
            config_seed,
            STREAM_RUN,
            2 << 32,
            slot.task as u64,
            slot.model as u64,
            level as u64,
            slot.seed,
        ])
        .int(0, 20 * 86_400_000) as i64;
        let start =
            EPOCH_2026_05_01 + cell_start + (slot.attempt as i64 - 1) * 6 * 3_600_000 + rng.int(0, 600_000) as i64;
        let trace_complete = !rng.chance(0.03);
        let gap = (!trace_complete).then(|| (rng.int(4, 40), rng.int(1, 6)));
        let record_interventions = level == 3 || rng.chance(0.35);
        let start_correct = d.start_state.unwrap_or(false);
        Sim {
            rng,
            repo: &world.repos[task.repo],
            task,
            model: &world.models[slot.model],
            level,
            output_scale,
            truth: Truth {
                states: vec![start_correct],
                plausibility: vec![if start_correct { 1.0 } else { 0.3 }],
                // A later attempt starts with a little of what the failed one learnt.
                boost: if slot.attempt > 1 { 0.05 } else { 0.0 },
                missing_interventions: 0,
                assisted: false,
            },
            rec: Recorder {
                started: start,
                seq: 0,
                clock: start,
                trace_complete,
                gap,
                actions: vec![],
                tools: vec![],
                context: vec![],
                checks: vec![],
                attribution: vec![],
                interventions: vec![],
                entropy: vec![],
                record_interventions,
                unrecovered: vec![],
                localised: false,
                agent_checks: vec![],
                repro_log: String::new(),
                artifacts: vec![],
                n_outputs: 0,
                edited: vec![],
                n_actions: 0,
                tokens_in: 0,
                tokens_out: 0,
            },
        }
    }

    pub fn tools_on(&self) -> bool {
        self.level >= 1
    }

    pub fn verify_on(&self) -> bool {
        self.level >= 3
    }

    /// The path of the task's faulty module (borrowed from the world, not from `self`).
    pub fn focus_path(&self) -> &'w str {
        &self.repo.files[self.task.focus].path
    }

    /// A new record from the episode's stream (see [`Recorder::record`]).
    pub fn record(&mut self, lo_ms: u64, hi_ms: u64) -> (u64, Rec) {
        self.rec.record(&mut self.rng, lo_ms, hi_ms)
    }

    /// A tool record; the call's duration passes on the clock. Returns its seq and its
    /// index in `tools`, so a failure can be marked recovered later.
    #[allow(clippy::too_many_arguments)]
    pub fn tool(
        &mut self,
        tool: &str,
        command: String,
        duration_ms: u64,
        exit_code: Option<i64>,
        timed_out: bool,
        failure_type: Option<&str>,
        output: Option<String>,
    ) -> (u64, usize) {
        let (seq, mut r) = self.record(200, 4000);
        self.rec.clock += duration_ms as i64;
        r.insert("tool".into(), json!(tool));
        r.insert("command".into(), json!(command));
        r.insert("exit_code".into(), json!(exit_code));
        r.insert("duration_ms".into(), json!(duration_ms));
        if timed_out {
            r.insert("timed_out".into(), json!(true));
        }
        if let Some(f) = failure_type {
            r.insert("failure_type".into(), json!(f));
        }
        if let Some(o) = output {
            r.insert("output".into(), json!(o));
        }
        self.rec.tools.push(r);
        (seq, self.rec.tools.len() - 1)
    }

    /// An action record. Each action is a model turn, so it also costs tokens.
    pub fn action(&mut self, kind: &str, paths: &[&str], summary: String, tool_seq: Option<u64>, ok: bool) -> u64 {
        let (seq, mut r) = self.record(800, 25_000);
        r.insert("kind".into(), json!(kind));
        r.insert("paths".into(), json!(paths));
        r.insert("summary".into(), json!(summary));
        if let Some(t) = tool_seq {
            r.insert("tool_seq".into(), json!(t));
        }
        if !ok {
            r.insert("ok".into(), json!(false));
        }
        self.rec.actions.push(r);
        self.rec.n_actions += 1;
        self.rec.tokens_in += self.rng.int(1500, 7000);
        self.rec.tokens_out += self.rng.int(60, 900);
        seq
    }

    /// Marks pending failures of this kind as recovered by `by` (when the recorder notices).
    fn recover(&mut self, kind: &str, by: u64) {
        let p = [0.0, 0.45, 0.6, 0.85][self.level];
        let pending = std::mem::take(&mut self.rec.unrecovered);
        for (idx, k) in pending {
            if k != kind {
                self.rec.unrecovered.push((idx, k));
            } else if self.rng.chance(p) {
                self.rec.tools[idx].insert("recovered_by".into(), json!(by));
            }
        }
    }

    /// A failed observation at H3 gets an attribution record, most of the time.
    pub fn attribute(&mut self, failure_seq: u64, category: &str, evidence: Vec<u64>) {
        if !self.verify_on() || !self.rng.chance(0.72) {
            return;
        }
        let localise = !self.rec.localised && category == "feedback" && self.rng.chance(0.85);
        let predictions = if localise { self.rng.int(1, 3) as usize } else { 1 };
        let evidence: Vec<u64> = evidence.into_iter().filter(|s| *s <= failure_seq).collect();
        for rank in 1..=predictions {
            let (_, mut r) = self.record(500, 8000);
            if self.rng.chance(0.6) {
                r.insert("grade".into(), json!("inferred"));
            }
            r.insert("failure_seq".into(), json!(failure_seq));
            r.insert("category".into(), json!(category));
            let responsibility = match category {
                "tool" => "observability",
                "context" => "context_selection",
                "feedback" => "verification",
                _ => *self.rng.pick(&["failure_attribution", "task_state", "verification"]),
            };
            r.insert("responsibility".into(), json!(responsibility));
            if localise {
                r.insert("location".into(), json!(self.predict_location(rank)));
                r.insert("rank".into(), json!(rank));
            }
            let confidence = round(self.rng.uniform(0.3, 0.95) / rank as f64, 2);
            r.insert("confidence".into(), json!(confidence));
            r.insert("evidence".into(), json!(evidence));
            self.rec.attribution.push(r);
        }
        self.rec.localised |= localise;
    }

    /// A ranked fault-location guess; better models put the truth at rank 1 more often.
    fn predict_location(&mut self, rank: usize) -> String {
        let (path, start, end) = self.task.regions[self.rng.index(self.task.regions.len())].clone();
        let hit = self.rng.chance((0.25 + 0.6 * self.model.skill - 0.1 * (rank as f64 - 1.0)).clamp(0.05, 0.9));
        if hit {
            match self.rng.index(3) {
                0 => format!("{path}:{start}-{end}"),
                1 => format!("{path}:{}", self.rng.int(start as u64, end as u64)),
                _ => path,
            }
        } else {
            let file = &self.repo.files[self.rng.index(self.repo.files.len())];
            let s = self.rng.int(1, file.lines as u64 - 5);
            if file.path == path && s <= end as u64 && s + 4 >= start as u64 {
                format!("{}:{}-{}", file.path, end + 20, end + 24)
            } else {
                format!("{}:{}-{}", file.path, s, s + self.rng.int(0, 4))
            }
        }
    }

    /// Reading a file: with tools, a `read_file` or `sed` call behind the action.
    pub fn read(&mut self, path: &str) {
        let tool_seq = if self.tools_on() {
            let tool = if self.rng.chance(0.6) { "read_file" } else { "shell" };
            let cmd = if tool == "shell" { format!("sed -n '1,200p' {path}") } else { format!("read_file {path}") };
            let d = self.rng.int(5, 60);
            Some(self.tool(tool, cmd, d, Some(0), false, None, None).0)
        } else {
            None
        };
        let summary = format!("Read {path}");
        self.action("read", &[path], summary, tool_seq, true);
    }

    /// A search for a word of the task; with tools, an `rg` call that may find nothing.
    pub fn search(&mut self) {
        let word = *self.rng.pick(&[self.task.field, "TODO", "raise", "error", "validate", "limit"]);
        if !self.tools_on() {
            let s = format!("Looked for `{word}` in the files given in the prompt");
            self.action("search", &[], s, None, true);
            return;
        }
        let cmd = format!("rg -n '{word}' {}", if self.rng.chance(0.5) { "src" } else { "." });
        let no_match = self.rng.chance(0.2);
        let (exit, ft) = if no_match {
            // rg exits 1 on no match: some recorders know that is not a failure.
            (1, if self.rng.chance(0.5) { Some("none") } else { None })
        } else {
            (0, None)
        };
        let d = self.rng.int(10, 400);
        let (seq, idx) = self.tool("ripgrep", cmd, d, Some(exit), false, ft, None);
        if no_match && ft.is_none() {
            self.rec.unrecovered.push((idx, "search"));
        } else {
            self.recover("search", seq);
        }
        let s = if no_match { format!("Searched for `{word}`: no match") } else { format!("Searched for `{word}`") };
        self.action("search", &[], s, Some(seq), true);
    }

    /// One ok edit (retrying a failed application first, sometimes); moves the latent state.
    pub fn edit(&mut self, path: &str, transition: impl FnOnce(&mut Sim<'w>) -> (bool, f64)) {
        let tool = *self.rng.pick(&["edit_file", "apply_patch", "str_replace"]);
        if self.rng.chance(0.07) {
            let tool_seq = if self.tools_on() {
                let d = self.rng.int(20, 300);
                let (seq, idx) =
                    self.tool(tool, format!("{tool} {path}"), d, Some(1), false, Some("parse_error"), None);
                self.rec.unrecovered.push((idx, "edit"));
                Some(seq)
            } else {
                None
            };
            let s = format!("Edit of {path} did not apply: context lines not found");
            self.action("edit", &[path], s, tool_seq, false);
        }
        let tool_seq = if self.tools_on() {
            let d = self.rng.int(20, 300);
            let (seq, _) = self.tool(tool, format!("{tool} {path}"), d, Some(0), false, None, None);
            self.recover("edit", seq);
            Some(seq)
        } else {
            None
        };
        let summary = format!("{} in {path}", text::sentence(&mut self.rng));
        self.action("edit", &[path], summary, tool_seq, true);
        let (state, plaus) = transition(self);
        self.truth.states.push(state);
        self.truth.plausibility.push(plaus);
        if !self.rec.edited.iter().any(|p| p == path) {
            self.rec.edited.push(path.to_string());
        }
    }

    /// The chance that an attempted fix makes wrong code correct: better models, easier
    /// tasks, higher levels and recent help all raise it.
    fn p_fix(&self) -> f64 {
        (0.12 + 0.5 * self.model.skill - 0.35 * self.task.difficulty + 0.06 * self.level as f64 + self.truth.boost)
            .clamp(0.03, 0.9)
    }

    /// The chance that an edit breaks correct code: higher on hard tasks and in
    /// forced-revision runs (revisions the agent did not need), lower at higher levels.
    fn p_break(&self, forced: bool) -> f64 {
        (0.12 + 0.25 * self.task.difficulty - 0.03 * self.level as f64 + if forced { 0.12 } else { 0.0 })
            .clamp(0.02, 0.6)
    }

    /// The ordinary transition of an attempted fix.
    pub fn fix_attempt(&mut self, forced: bool) -> (bool, f64) {
        let now = self.truth.correct();
        let next = if now { !self.rng.chance(self.p_break(forced)) } else { self.rng.chance(self.p_fix()) };
        self.truth.boost *= 0.5;
        let plaus = if next { 1.0 } else { self.rng.f().powf(1.5) };
        (next, plaus)
    }

    /// A test run's output kept as an artifact (the outputs too big for the tool record).
    fn large_output(&mut self, failing: &[&str], timeout_ms: Option<u64>) -> String {
        self.rec.n_outputs += 1;
        let path = tool_output_path(self.rec.n_outputs);
        let size = (self.rng.log_uniform(10_000.0, 200_000.0) * self.output_scale) as usize;
        let log = text::test_log(&mut self.rng, self.repo, self.task, failing, timeout_ms, size);
        self.rec.artifacts.push((path.clone(), Cow::Owned(log.into_bytes())));
        path
    }

    /// What a test of the current revision shows.
    pub fn observe(&mut self, timeout_p: f64, leniency: f64) -> Observed {
        let x = self.rng.f();
        if x < timeout_p {
            return Observed::Timeout;
        }
        if x < timeout_p + 0.01 {
            return Observed::Crash;
        }
        let plaus = *self.truth.plausibility.last().unwrap();
        let pass = if self.truth.correct() { self.rng.chance(0.96) } else { self.rng.chance(leniency * plaus) };
        if pass {
            Observed::Pass
        } else {
            Observed::Fail
        }
    }

    /// A test run: tool record, run action, and at H3 the agent's check record.
    #[allow(clippy::too_many_arguments)]
    pub fn test(
        &mut self,
        check_id: &str,
        method: &'static str,
        command: String,
        requirements: Vec<String>,
        timeout_p: f64,
        leniency: f64,
        output_p: f64,
    ) -> Observed {
        let observed = self.observe(timeout_p, leniency);
        if !self.tools_on() {
            return observed;
        }
        let limit = if method == "regression" { 300_000 } else { 120_000 };
        let failing: Vec<&str> =
            if observed == Observed::Fail { self.task.bug_tests.iter().map(String::as_str).collect() } else { vec![] };
        let timeout = (observed == Observed::Timeout).then_some(limit);
        let output =
            (self.rec.n_outputs < 5 && self.rng.chance(output_p)).then(|| self.large_output(&failing, timeout));
        let (exit, timed_out, ft, duration) = match observed {
            Observed::Pass => (Some(0), false, None, self.rng.int(800, 90_000)),
            Observed::Fail => (Some(1), false, None, self.rng.int(800, 90_000)),
            Observed::Timeout => (None, true, if self.rng.chance(0.5) { Some("timeout") } else { None }, limit),
            Observed::Crash => (Some(139), false, Some("crash"), self.rng.int(200, 5000)),
        };
        let runner = if self.rng.chance(0.8) { "shell" } else { "run_tests" };
        let (tool_seq, idx) = self.tool(runner, command.clone(), duration, exit, timed_out, ft, output);
        if observed == Observed::Pass {
            self.recover("test", tool_seq);
        } else {
            self.rec.unrecovered.push((idx, "test"));
        }
        let summary = match observed {
            Observed::Pass => format!("Ran `{command}`: passing"),
            Observed::Fail => format!("Ran `{command}`: {} failing", self.task.bug_tests.len()),
            Observed::Timeout => format!("Ran `{command}`: killed at the {} s limit", limit / 1000),
            Observed::Crash => format!("Ran `{command}`: the runner crashed (signal 11)"),
        };
        let action_seq = self.action("run", &[], summary, Some(tool_seq), true);
        let _ = writeln!(
            self.rec.repro_log,
            "[{}] revision {}\n$ {command}\n{}\n",
            rfc3339(self.rec.clock),
            self.truth.revision(),
            match observed {
                Observed::Pass => "PASS\nexit 0",
                Observed::Fail => "FAIL: expected error, got generic message\nexit 1",
                Observed::Timeout => "(killed: timeout)",
                Observed::Crash => "Segmentation fault (core dumped)\nexit 139",
            }
        );
        if observed != Observed::Pass {
            let category = match observed {
                Observed::Fail => "feedback",
                _ => "tool",
            };
            if self.rng.chance(0.3) {
                self.attribute(tool_seq, category, vec![tool_seq, action_seq]);
            }
        }
        if self.verify_on() {
            let result = match observed {
                Observed::Pass => "pass",
                Observed::Fail => "fail",
                Observed::Timeout => "timeout",
                Observed::Crash => "error",
            };
            let (seq, mut r) = self.record(50, 1500);
            r.insert("check_id".into(), json!(check_id));
            r.insert("actor".into(), json!("agent"));
            r.insert("method".into(), json!(method));
            r.insert("command".into(), json!(command));
            r.insert("result".into(), json!(result));
            if let Some(e) = exit {
                r.insert("exit_code".into(), json!(e));
            }
            r.insert("duration_ms".into(), json!(duration));
            r.insert("requirements".into(), json!(requirements));
            if method == "reproduction" || self.rng.chance(0.1) {
                r.insert("revision".into(), json!(self.truth.revision()));
            }
            if method == "targeted_test" || method == "regression" {
                r.insert("suite_id".into(), json!(format!("{}:{}", text::suite_command(self.repo), check_id)));
            }
            let interpretation = match result {
                "pass" => "behaves as required".to_string(),
                "fail" if method == "reproduction" => "bug reproduced".to_string(),
                "fail" => format!("{} still failing", self.task.bug_tests.len()),
                "timeout" => format!("exceeded the {} s limit; no verdict", limit / 1000),
                _ => "runner crashed; no verdict".to_string(),
            };
            r.insert("interpretation".into(), json!(interpretation));
            self.rec.checks.push(r);
            self.rec.agent_checks.push(AgentCheck {
                revision: self.truth.revision(),
                result,
                requirements,
                check_id: check_id.to_string(),
                method,
            });
            if result != "pass" {
                let category = if result == "fail" { "feedback" } else { "tool" };
                self.attribute(seq, category, vec![tool_seq, action_seq, seq]);
            }
        }
        observed
    }

    pub fn requirement_ids(&self) -> Vec<String> {
        self.task.requirements.iter().map(|(id, _)| id.clone()).collect()
    }

    /// An intervention opportunity; recorded only when the harness records them.
    pub fn maybe_intervene(&mut self) {
        let p = [0.22, 0.16, 0.11, 0.05][self.level] * (0.6 + self.task.difficulty);
        if !self.rng.chance(p) {
            return;
        }
        let missing = missing_at(self.level);
        let stands_in = self.rng.chance(if self.level == 3 { 0.45 } else { 0.85 });
        let responsibility = if stands_in {
            if self.level == 3 {
                *self.rng.pick(&["permissions", "permissions", "verification", "context_selection"])
            } else {
                *self.rng.pick(&missing)
            }
        } else {
            ""
        };
        let kind = match responsibility {
            "permissions" => "permission_grant",
            "context_selection" | "project_memory" | "task_state" => "context_provision",
            "verification" | "failure_attribution" => *self.rng.pick(&["hint", "correction"]),
            "" => *self.rng.pick(&["approval", "approval", "hint", "other"]),
            _ => *self.rng.pick(&["hint", "correction", "context_provision"]),
        };
        if matches!(kind, "hint" | "correction" | "context_provision") {
            self.truth.boost += 0.2;
        }
        if !responsibility.is_empty() {
            self.truth.missing_interventions += 1;
        }
        if kind != "approval" {
            self.truth.assisted = true;
        }
        if !self.rec.record_interventions {
            return;
        }
        let (_, mut r) = self.record(10_000, 240_000);
        r.insert("actor".into(), json!(*self.rng.pick(&["human", "human", "human", "human", "evaluator", "other"])));
        r.insert("kind".into(), json!(kind));
        let reason = match kind {
            "permission_grant" => "agent needed write access to the fixtures directory".to_string(),
            "context_provision" => format!("pointed the agent at {}", self.repo.test_files[self.task.focus]),
            "hint" => format!("suggested looking at how {} is handled", self.task.field),
            "correction" => "told the agent its last change broke valid input".to_string(),
            "approval" => "approved running the full suite".to_string(),
            _ => "answered a clarification question".to_string(),
        };
        r.insert("reason".into(), json!(reason));
        r.insert(
            "missing_responsibility".into(),
            if responsibility.is_empty() { Value::Null } else { json!(responsibility) },
        );
        r.insert("avoidable".into(), json!(!responsibility.is_empty() && self.rng.chance(0.7)));
        r.insert("burden".into(), json!(*self.rng.pick(&["low", "low", "medium", "high"])));
        r.insert("minutes".into(), json!(round(self.rng.log_uniform(0.5, 40.0), 1)));
        self.rec.interventions.push(r);
    }

    /// `n` entropy findings of an audit before (`pre`) or after (`post`) the work.
    pub fn entropy_audit(&mut self, phase: &str, n: u64, max_severity: u64) {
        for _ in 0..n {
            let (_, mut r) = self.record(100, 3000);
            let category = *self.rng.pick(&[
                "code",
                "documentation",
                "dependency",
                "test",
                "file_residue",
                "architecture",
                "workflow",
            ]);
            r.insert("category".into(), json!(category));
            r.insert("severity".into(), json!(self.rng.int(0, max_severity)));
            // `post` is the default: some recorders leave it out.
            if phase == "pre" || self.rng.chance(0.6) {
                r.insert("phase".into(), json!(phase));
            }
            let path = match category {
                "file_residue" => format!("tmp/probe-{}.log", self.rng.hex(4)),
                "dependency" => "package.json".to_string(),
                "documentation" => "README.md".to_string(),
                "test" => self.repo.test_files[self.rng.index(self.repo.test_files.len())].clone(),
                _ => self.repo.files[self.rng.index(self.repo.files.len())].path.clone(),
            };
            r.insert("path".into(), json!(path));
            let note = match (phase, category) {
                ("pre", _) => "pre-run audit: finding present before the agent started",
                (_, "file_residue") => "scratch file left in the working tree (not in patch.diff)",
                (_, "code") => "debug logging added during the episode is still in place",
                (_, "test") => "test skipped with a TODO instead of fixed",
                _ => "drift introduced during the episode",
            };
            r.insert("note".into(), json!(note));
            self.rec.entropy.push(r);
        }
    }
}
