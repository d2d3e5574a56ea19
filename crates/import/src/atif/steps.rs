//! An ATIF trajectory's steps as recorder calls, in `step_id` order.
//!
//! - `system` steps are system messages (a `context_management` step is noted as the
//!   compaction it is); `user` steps user messages, the first the task (for Terminus
//!   agents the text of its `Task Description:` section). Who wrote a later user step
//!   ATIF does not say: not taken for a person's intervention.
//! - An `agent` step is the model's message (text, reasoning, tokens, model), then its
//!   tool calls ([`crate::tools`] says what each is), each with the observation results
//!   that name it (`source_call_id`). A result that names no call is the output of the
//!   step's only call, or, when the step made several, a tool message of its own: a
//!   Terminus screen shows what all of a step's keystrokes did, not each one's result.
//! - Terminus: `bash_command` keystrokes ending in Enter are a shell command; keys
//!   without Enter (`C-c`, text typed) steer the terminal (opaque). In `raw_content`
//!   logs the commands are inside the message (its JSON or XML reply), read from it
//!   unless the harness answered that the reply did not parse (then nothing ran).
//!   `mark_task_complete` is the completion claim; the harness asks the agent to
//!   confirm it, and the confirmation claims it again (two claims, the last one
//!   standing).
//! - Subagents (`subagent_trajectory_ref`, a file beside the trajectory or an embedded
//!   trajectory) are read where the parent refers to them, their calls the run's calls,
//!   their messages authored by the subagent.
//! - Steps copied from an earlier segment (`is_copied_context`) are skipped.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::recorder::{Message, Role};
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, Recorder};

pub(super) const KNOWN_VERSIONS: [&str; 9] = [
    "ATIF-v1.0",
    "ATIF-v1.1",
    "ATIF-v1.2",
    "ATIF-v1.3",
    "ATIF-v1.4",
    "ATIF-v1.5",
    "ATIF-v1.6",
    "ATIF-v1.7",
    "ATIF-v1.8",
];

/// What the harness answers a Terminus reply that did not parse: its commands never ran.
const PARSE_ERROR: &str = "Previous response had parsing errors";

/// One call of a step, before it is recorded.
struct StepCall {
    id: Option<String>,
    function: String,
    args: Map<String, Value>,
}

pub(super) struct Reader<'a> {
    /// The agent is a Terminus (keystrokes, a task inside its prompt template).
    terminus: bool,
    dir: PathBuf,
    root: &'a Map<String, Value>,
    /// The trajectory names its model (`agent.model_name`): a step's model is noted
    /// on its message only.
    has_model: bool,
    task_seen: bool,
    copied_skipped: usize,
    tokens: (Option<i64>, Option<i64>),
    cost: Option<f64>,
    /// The last segment's `final_metrics`: the run's totals.
    pub final_metrics: Option<Value>,
    /// Subagents' trajectory files read, for the package's source copies.
    pub subagent_files: Vec<PathBuf>,
}

fn text(v: Option<&Value>) -> String {
    tools::text(v)
}

impl<'a> Reader<'a> {
    pub(super) fn new(agent: &Value, dir: &Path, root: &'a Map<String, Value>) -> Reader<'a> {
        let name = agent.get("name").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
        Reader {
            terminus: name.starts_with("terminus"),
            dir: dir.to_path_buf(),
            root,
            has_model: agent.get("model_name").and_then(Value::as_str).is_some_and(|m| !m.trim().is_empty()),
            task_seen: false,
            copied_skipped: 0,
            tokens: (None, None),
            cost: None,
            final_metrics: root.get("final_metrics").cloned(),
            subagent_files: Vec::new(),
        }
    }

    /// Records `steps` (of the root, a continuation, or a subagent named `author`).
    pub(super) fn stream(
        &mut self,
        rec: &mut Recorder,
        steps: &[Value],
        author: Option<&str>,
        depth: usize,
    ) -> Result<(), String> {
        rec.record_messages();
        for (i, step) in steps.iter().enumerate() {
            let Some(step) = step.as_object() else {
                return Err(format!("steps[{i}]: expected a step object"));
            };
            if step.get("is_copied_context").and_then(Value::as_bool) == Some(true) {
                self.copied_skipped += 1;
                continue;
            }
            let ts = step.get("timestamp").and_then(Value::as_str);
            rec.saw_time(ts);
            match step.get("source").and_then(Value::as_str) {
                Some("system") => self.system(rec, step, ts, author, depth)?,
                Some("user") => self.user(rec, step, ts, author),
                Some("agent") => self.agent(rec, step, ts, author, depth)?,
                other => {
                    let id = step.get("step_id").map(Value::to_string).unwrap_or_else(|| i.to_string());
                    return Err(format!("step {id}: `source` {other:?} is none of system, user, agent"));
                }
            }
        }
        Ok(())
    }

    fn system(
        &mut self,
        rec: &mut Recorder,
        step: &Map<String, Value>,
        ts: Option<&str>,
        author: Option<&str>,
        depth: usize,
    ) -> Result<(), String> {
        say(rec, Message::system(text(step.get("message"))).ts(ts), author);
        if let Some(kind) =
            step.get("extra").and_then(|e| e.pointer("/context_management/type")).and_then(Value::as_str)
        {
            rec.note(format!("the context was managed ({kind}): the model did not see every earlier step again"));
        }
        // An observation on a system step (1.2+): a summarization's subagents.
        for result in results(step) {
            self.subagents(rec, result, depth)?;
        }
        Ok(())
    }

    fn user(&mut self, rec: &mut Recorder, step: &Map<String, Value>, ts: Option<&str>, author: Option<&str>) {
        let said = text(step.get("message"));
        if author.is_none() && !self.task_seen {
            self.task_seen = true;
            let task = if self.terminus { terminus_task(&said) } else { None };
            rec.task_prompt(task.unwrap_or(&said));
        }
        say(rec, Message::user(said).ts(ts), author);
    }

    fn agent(
        &mut self,
        rec: &mut Recorder,
        step: &Map<String, Value>,
        ts: Option<&str>,
        author: Option<&str>,
        depth: usize,
    ) -> Result<(), String> {
        let said = text(step.get("message"));
        let metrics = step.get("metrics");
        let n = |k: &str| metrics.and_then(|m| m.get(k)).and_then(Value::as_i64);
        let (tokens_in, tokens_out) = (n("prompt_tokens"), n("completion_tokens"));
        add(&mut self.tokens.0, tokens_in);
        add(&mut self.tokens.1, tokens_out);
        if let Some(usd) = metrics.and_then(|m| m.get("cost_usd")).and_then(Value::as_f64) {
            *self.cost.get_or_insert(0.0) += usd;
        }
        let model = step.get("model_name").and_then(Value::as_str).filter(|m| !m.trim().is_empty());
        if let (false, Some(m)) = (self.has_model, model) {
            rec.model(m);
            self.has_model = true;
        }
        say(
            rec,
            Message::assistant(said.clone())
                .reasoning(step.get("reasoning_content").and_then(Value::as_str).unwrap_or(""))
                .tokens(tokens_in, tokens_out)
                .model(model)
                .ts(ts),
            author,
        );

        let results: Vec<&Map<String, Value>> = results(step).collect();
        let not_run = results.iter().any(|r| text(r.get("content")).starts_with(PARSE_ERROR));
        let mut calls: Vec<StepCall> = step
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some(StepCall {
                    id: c.get("tool_call_id").and_then(Value::as_str).map(str::to_string),
                    function: c.get("function_name").and_then(Value::as_str)?.to_string(),
                    args: c.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default(),
                })
            })
            .collect();
        if calls.is_empty() && self.terminus && !not_run {
            calls = raw_commands(&said);
        }
        // Each call's output: the results that name it; the results that name none go
        // to the step's only call, else stay a message of their own.
        let unlinked: Vec<String> = results
            .iter()
            .filter(|r| r.get("source_call_id").and_then(Value::as_str).is_none())
            .map(|r| text(r.get("content")))
            .filter(|t| !t.is_empty())
            .collect();
        let acting: Vec<usize> = (0..calls.len()).filter(|&k| !is_submit(&calls[k].function)).collect();
        let sole = (acting.len() == 1 && !unlinked.is_empty()).then(|| acting[0]);
        for (k, c) in calls.iter().enumerate() {
            let linked: Vec<String> = results
                .iter()
                .filter(|r| c.id.is_some() && r.get("source_call_id").and_then(Value::as_str) == c.id.as_deref())
                .map(|r| text(r.get("content")))
                .collect();
            let output = if !linked.is_empty() {
                Some(linked.join("\n"))
            } else if sole == Some(k) {
                Some(unlinked.join("\n"))
            } else {
                None
            };
            self.call(rec, c, output, ts, author);
        }
        if sole.is_none() {
            for t in &unlinked {
                say(rec, Message::new(Role::Tool).text(t.clone()).ts(ts), author);
            }
        }
        for result in results {
            self.subagents(rec, result, depth)?;
        }
        Ok(())
    }

    /// Records one call.
    fn call(
        &mut self,
        rec: &mut Recorder,
        c: &StepCall,
        output: Option<String>,
        ts: Option<&str>,
        author: Option<&str>,
    ) {
        let kind = match (c.function.as_str(), c.args.get("keystrokes").and_then(Value::as_str)) {
            ("bash_command", Some(keys)) => tools::keystrokes(keys),
            _ => tools::classify(&c.function, &c.args, &SUBMIT_TOOLS),
        };
        let command = match &kind {
            Kind::Shell(cmd) | Kind::Python(cmd) => cmd.clone(),
            _ => Value::Object(c.args.clone()).to_string(),
        };
        let mut call = Call::new(c.function.clone())
            .command(command)
            .ts(ts)
            .id(c.id.clone())
            .arguments(Value::Object(c.args.clone()))
            .author(author.map(str::to_string));
        let failed = output.as_deref().is_some_and(reports_failure);
        if let Some(o) = &output {
            call = call.output(o.clone());
        }
        let diff = match (&kind, failed) {
            (Kind::Edit(..), false) => tools::edit_diff(&c.function, &c.args, output.as_deref().unwrap_or("")),
            _ => None,
        };
        // A subagent's submission ends the subagent, not the run.
        tools::record(rec, kind, call, tools::Done { ok: !failed, diff, claims: author.is_none() });
    }

    /// The subagents a result refers to, read at this place in the run.
    fn subagents(&mut self, rec: &mut Recorder, result: &Map<String, Value>, depth: usize) -> Result<(), String> {
        for r in result.get("subagent_trajectory_ref").and_then(Value::as_array).into_iter().flatten() {
            if depth + 1 > super::MAX_DEPTH {
                return Err(format!("subagents nest deeper than {} levels", super::MAX_DEPTH));
            }
            let id = r.get("trajectory_id").and_then(Value::as_str);
            let path = r.get("trajectory_path").and_then(Value::as_str);
            let embedded = id.and_then(|id| {
                self.root
                    .get("subagent_trajectories")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|t| t.get("trajectory_id").and_then(Value::as_str) == Some(id))
                    .cloned()
            });
            let sub = match (embedded, path) {
                (Some(t), _) => t,
                (None, Some(p)) if !p.contains("://") => {
                    let file = self.dir.join(p);
                    match std::fs::read(&file).ok().and_then(|b| epistore_package::json_from_slice::<Value>(&b).ok()) {
                        Some(t) => {
                            self.subagent_files.push(file);
                            t
                        }
                        None => {
                            rec.note(format!("the subagent trajectory {p} is not beside the trajectory: not read"));
                            continue;
                        }
                    }
                }
                _ => {
                    rec.note("a subagent reference names no trajectory this log holds: not read");
                    continue;
                }
            };
            let name = sub.pointer("/agent/name").and_then(Value::as_str).or(id).unwrap_or("subagent").to_string();
            let steps = sub.get("steps").and_then(Value::as_array).cloned().unwrap_or_default();
            self.stream(rec, &steps, Some(&name), depth + 1)?;
        }
        Ok(())
    }

    /// The run's totals: the last segment's `final_metrics`, else the steps' metrics.
    pub(super) fn finish(&self, rec: &mut Recorder, fallback: ((Option<i64>, Option<i64>), Option<f64>)) {
        let f = self.final_metrics.as_ref();
        let total = |k: &str| f.and_then(|f| f.get(k)).and_then(Value::as_i64);
        let (mut tokens, mut cost) = match f {
            Some(_) => (
                (total("total_prompt_tokens"), total("total_completion_tokens")),
                f.and_then(|f| f.get("total_cost_usd")).and_then(Value::as_f64),
            ),
            None => (self.tokens, self.cost),
        };
        if tokens == (None, None) {
            tokens = fallback.0;
        }
        if cost.is_none() {
            cost = fallback.1;
        }
        rec.tokens(tokens.0, tokens.1);
        if let Some(usd) = cost {
            rec.usd(usd);
        }
        if self.copied_skipped > 0 {
            rec.note(format!(
                "{} steps copied from an earlier segment (is_copied_context) were skipped",
                self.copied_skipped
            ));
        }
    }
}

/// Writes a message, authored by the subagent when one said it.
fn say(rec: &mut Recorder, m: Message, author: Option<&str>) {
    rec.message(match author {
        Some(a) => m.author(a),
        None => m,
    });
}

fn add(total: &mut Option<i64>, n: Option<i64>) {
    if let Some(n) = n {
        *total.get_or_insert(0) += n;
    }
}

fn results(step: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    step.get("observation")
        .and_then(|o| o.get("results"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn is_submit(function: &str) -> bool {
    SUBMIT_TOOLS.contains(&function)
}

/// A tool result that says the call failed (an editor's error answer).
fn reports_failure(output: &str) -> bool {
    let t = output.trim_start();
    t.starts_with("ERROR:") || t.starts_with("Error:") || t.starts_with("Error executing tool")
}

/// Terminus's task: its prompt template's `Task Description:` section.
fn terminus_task(prompt: &str) -> Option<&str> {
    let rest = prompt.split_once("Task Description:\n")?.1;
    let task = rest.split("\n\nCurrent terminal state:").next()?.trim();
    (!task.is_empty()).then_some(task)
}

/// The commands of a Terminus reply logged whole (`raw_content`): its JSON
/// (`commands[].keystrokes`, `task_complete`) or XML (`<keystrokes>`,
/// `<task_complete>`).
fn raw_commands(message: &str) -> Vec<StepCall> {
    let mut out = Vec::new();
    let keys_call = |keys: String| {
        let mut args = Map::new();
        args.insert("keystrokes".into(), Value::String(keys));
        StepCall { id: None, function: "bash_command".into(), args }
    };
    let mut complete = false;
    let json = match (message.find('{'), message.rfind('}')) {
        (Some(a), Some(b)) if a < b => epistore_package::json_from_str::<Value>(&message[a..=b]).ok(),
        _ => None,
    };
    if let Some(reply) = json.filter(|j| j.get("commands").is_some() || j.get("task_complete").is_some()) {
        for c in reply.get("commands").and_then(Value::as_array).into_iter().flatten() {
            if let Some(k) = c.get("keystrokes").and_then(Value::as_str) {
                out.push(keys_call(k.to_string()));
            }
        }
        complete = match reply.get("task_complete") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => matches!(s.to_ascii_lowercase().as_str(), "true" | "1" | "yes"),
            _ => false,
        };
    } else if message.contains("<keystrokes") {
        for piece in message.split("<keystrokes").skip(1) {
            let Some((_, rest)) = piece.split_once('>') else { continue };
            let Some((keys, _)) = rest.split_once("</keystrokes>") else { continue };
            out.push(keys_call(unescape_xml(keys)));
        }
        complete = message
            .split_once("<task_complete>")
            .and_then(|(_, r)| r.split_once("</task_complete>"))
            .is_some_and(|(v, _)| v.trim().eq_ignore_ascii_case("true"));
    }
    if complete {
        out.push(StepCall { id: None, function: "mark_task_complete".into(), args: Map::new() });
    }
    out
}

fn unescape_xml(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}
