//! Terminal-Bench 1.x run folders (`terminal-bench`): the harness's
//! `runs/<run>/<task>/<trial>/results.json` (`TrialResults`), with the run's
//! `run_metadata.json` two folders up and, for the Terminus agent, its
//! `agent-logs/episode-N/response.json` (docs/importers.md §9.17). Harbor, the harness
//! of Terminal-Bench 2, is read by `atif`.
//!
//! The trial's result is the evaluator's: `is_resolved` is the verdict, each
//! `parser_results` test a score beside it. What the agent did is in its own logs:
//! Terminus's replies (`state_analysis`, `explanation`, `commands[].keystrokes`,
//! `is_task_complete`) are read; any other agent's are not, and the action traces are
//! then not recorded (not "recorded, none").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::recorder::Message;
use crate::tools::{self, Kind};
use crate::{Call, Context, Format, Grade, Input, Part, Plan, Recorder, Refusal, Unit, Verdict};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("terminal-bench");

/// The registry's Terminal-Bench 1.x reader.
pub(crate) struct TerminalBench;

/// A trial's `results.json`: `TrialResults` (`trial_name`, `task_id`, `is_resolved`).
fn trial(o: &Map<String, Value>) -> bool {
    o.contains_key("trial_name") && o.contains_key("task_id") && o.contains_key("is_resolved")
}

impl crate::Importer for TerminalBench {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Terminal-Bench 1.x run folders (runs/RUN/TASK/TRIAL/results.json, run_metadata.json, Terminus agent logs)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["results.json"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        if s.name == "run_metadata.json" && s.near("run_id") && s.near("agent_name") && s.near("output_path") {
            return Some(crate::Confidence::Certain);
        }
        if s.name != "results.json" || !s.text.starts_with('{') {
            return None;
        }
        let whole = epistore_package::json_from_str::<Value>(&s.text).ok();
        let trial_keys = s.near("trial_name") && s.near("task_id") && s.near("is_resolved");
        match whole.as_ref().and_then(Value::as_object) {
            Some(o) if trial(o) => Some(crate::Confidence::Certain),
            // The run's summary (`BenchmarkResults`): its trials, and the run's counts.
            Some(o) if o.contains_key("results") && o.contains_key("accuracy") => Some(crate::Confidence::Certain),
            None if trial_keys => Some(crate::Confidence::Certain),
            _ => None,
        }
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        for input in inputs {
            if input.file_name() == "run_metadata.json" {
                plan.cover(FORMAT, &input, "the run's metadata: read with each of its trials");
                continue;
            }
            let bytes = match input.read() {
                Ok(b) => b,
                Err(r) => {
                    plan.refuse(FORMAT, r);
                    continue;
                }
            };
            match epistore_package::json_from_slice::<Value>(&bytes) {
                Ok(Value::Object(o)) if trial(&o) => plan.units.push(Unit::new(FORMAT, vec![input], Part::Whole)),
                Ok(Value::Object(o)) if o.contains_key("results") => {
                    plan.cover(FORMAT, &input, "the run's summary: its trials are read from their own folders")
                }
                Ok(_) => plan.refuse(FORMAT, input.refuse(None, "not a Terminal-Bench trial's results.json")),
                Err(e) => {
                    plan.refuse(FORMAT, Refusal::at_line(input.display(), e.line(), format!("malformed JSON: {e}")))
                }
            }
        }
    }
    fn read(&self, unit: &Unit, _: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(&unit.files[0])]
    }
}

fn s<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// The run's `run_metadata.json`, beside the trial's task folder (`RUN/TASK/TRIAL/`):
/// its bytes and its fields.
fn run_metadata(trial_dir: &Path) -> Option<(Vec<u8>, Map<String, Value>)> {
    let bytes = std::fs::read(trial_dir.parent()?.parent()?.join("run_metadata.json")).ok()?;
    match epistore_package::json_from_slice::<Value>(&bytes).ok()? {
        Value::Object(o) => Some((bytes, o)),
        _ => None,
    }
}

/// Terminus's replies, in episode order: `agent-logs/episode-N/response.json`, and the
/// screen the next episode's prompt shows (what the commands left on the terminal).
fn terminus_episodes(trial_dir: &Path) -> Vec<(usize, PathBuf)> {
    let mut out: Vec<(usize, PathBuf)> = std::fs::read_dir(trial_dir.join("agent-logs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().strip_prefix("episode-")?.parse::<usize>().ok()?;
            let response = e.path().join("response.json");
            response.is_file().then_some((n, response))
        })
        .collect();
    out.sort();
    out
}

fn read(input: &Input) -> Result<Recorder, Refusal> {
    let bytes = input.read()?;
    let result = match epistore_package::json_from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) if trial(&o) => o,
        Ok(_) => return Err(input.refuse(None, "not a Terminal-Bench trial's results.json")),
        Err(e) => return Err(Refusal::at_line(input.display(), e.line(), format!("malformed JSON: {e}"))),
    };
    let trial_dir = input.path.parent().unwrap_or(Path::new("."));
    let name = s(&result, "trial_name").unwrap_or("trial").to_string();
    let mut rec = Recorder::new(FORMAT, name);
    rec.source(&input.file_name(), &input.blake3()?, Part::Whole, bytes)?;
    if let Some(task) = s(&result, "task_id") {
        rec.task(task);
    }
    if let Some(prompt) = s(&result, "instruction") {
        rec.task_prompt(prompt);
    }
    if let Some((shared, meta)) = run_metadata(trial_dir) {
        let hash = blake3::hash(&shared).to_hex().to_string();
        rec.source("run_metadata.json", &hash, Part::Whole, shared)?;
        if let Some(m) = s(&meta, "model_name") {
            rec.model(m);
        }
        rec.harness_name(s(&meta, "agent_name"));
        if let Some(run) = s(&meta, "run_id") {
            rec.note(format!("trial of the Terminal-Bench run {run}"));
        }
    }
    for k in ["trial_started_at", "agent_started_at", "test_ended_at", "trial_ended_at"] {
        rec.saw_time(s(&result, k).and_then(crate::recorder::rfc3339).as_deref());
    }
    let n = |k: &str| result.get(k).and_then(Value::as_i64);
    if n("total_input_tokens").is_some() || n("total_output_tokens").is_some() {
        rec.tokens(n("total_input_tokens"), n("total_output_tokens"));
    }
    // The evaluator: `is_resolved` (null when the tests did not run) and each test.
    if let Some(resolved) = result.get("is_resolved").and_then(Value::as_bool) {
        let ts = s(&result, "test_ended_at").and_then(crate::recorder::rfc3339);
        rec.verdict(Verdict { name: "terminal-bench:is_resolved".into(), value: f64::from(u8::from(resolved)), ts });
    }
    if let Some(tests) = result.get("parser_results").filter(|p| p.is_object()) {
        rec.other_score("parser_results", tests.clone());
    }
    match s(&result, "failure_mode") {
        None | Some("unset" | "none") => {}
        Some(mode) => {
            rec.note(format!("the harness's failure mode: {mode}"));
            match mode {
                "agent_timeout" | "test_timeout" => rec.stop_reason("timeout"),
                "context_length_exceeded" | "output_length_exceeded" => rec.stop_reason("budget_exhausted"),
                "parse_error" | "fatal_llm_parse_error" => rec.stop_reason("invalid_action"),
                _ => rec.stop_reason("other"),
            }
        }
    }
    let episodes = terminus_episodes(trial_dir);
    if episodes.is_empty() {
        // The agent's own log is not one this importer reads: what it did is not known.
        rec.agent_not_observed();
        rec.note("the agent's actions are in its own logs (agent-logs/), in a form not read: not recorded");
    } else {
        terminus(&mut rec, &episodes)?;
    }
    Ok(rec)
}

/// Terminus's episodes: its analysis and explanation, each command batch's keystrokes,
/// and its claim (`is_task_complete`). The terminal screen after a batch is the next
/// episode's prompt (its `Current terminal state:`), the output of the batch's last
/// command; exit codes are not shown (unknown).
fn terminus(rec: &mut Recorder, episodes: &[(usize, PathBuf)]) -> Result<(), Refusal> {
    rec.record_messages();
    for (i, (n, path)) in episodes.iter().enumerate() {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| Refusal::new(&shown, None, format!("cannot read: {e}")))?;
        let hash = blake3::hash(&bytes).to_hex().to_string();
        let parsed = epistore_package::json_from_slice::<Value>(&bytes);
        rec.source(&format!("episode-{n}-response.json"), &hash, Part::Whole, bytes)?;
        let reply = match parsed {
            Ok(Value::Object(o)) => o,
            _ => {
                rec.note(format!("episode {n}: the reply is not the JSON Terminus asks for (its commands never ran)"));
                continue;
            }
        };
        let said = [s(&reply, "state_analysis"), s(&reply, "explanation")].into_iter().flatten().collect::<Vec<_>>();
        rec.message(Message::assistant(said.join("\n\n")));
        let screen = episodes.get(i + 1).and_then(|(_, next)| {
            let prompt = std::fs::read_to_string(next.with_file_name("prompt.txt")).ok()?;
            Some(prompt.rsplit_once("Current terminal state:").map_or(prompt.clone(), |(_, t)| t.trim().to_string()))
        });
        let commands: Vec<&Map<String, Value>> = reply
            .get("commands")
            .or_else(|| reply.get("bash_commands"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
            .collect();
        for (j, c) in commands.iter().enumerate() {
            let keys = s(c, "keystrokes").unwrap_or("");
            let kind = tools::keystrokes(keys);
            let command = match &kind {
                Kind::Shell(cmd) => cmd.clone(),
                _ => keys.to_string(),
            };
            let mut call = Call::new("keystrokes").command(command).arguments(Value::Object((*c).clone()));
            if let (true, Some(screen)) = (j + 1 == commands.len(), &screen) {
                call = call.output(screen.clone());
            }
            if matches!(kind, Kind::Shell(_)) {
                call = call.exit(None, Grade::Observed);
            }
            tools::record(rec, kind, call, tools::Done { ok: true, diff: None, claims: false });
        }
        if reply.get("is_task_complete").and_then(Value::as_bool) == Some(true) {
            rec.complete(None, s(&reply, "explanation"));
        }
    }
    Ok(())
}
