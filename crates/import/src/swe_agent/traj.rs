//! One `.traj` into a [`Recorder`]: its steps in order, then the run's outcome.
//!
//! 0.x: `{environment, trajectory: [{action, observation, response, state (a JSON string),
//! thought}], history, info: {exit_status, submission, model_stats}}`. 1.x adds
//! `execution_time`, `query` and `extra_info` to each step (`state` is an object), tool
//! calls to the history's assistant messages, `replay_config` (an object or a JSON
//! string), `info.swe_agent_version`, and, for a retry agent, `attempts` (the chosen
//! attempt's data is repeated at the top level).

use serde_json::{Map, Value};

use super::config;
use super::edits::{EditDiff, Windows};
use crate::common::{content_text, find_string, looks_like_diff, parse_json, preds, template_fill};
use crate::recorder::{Message, Role};
use crate::shell::{self, Declared, SegmentKind};
use crate::{Call, Context, EditKind, Part, Recorder, Refusal, Unit};

const EXPECTED: &str = "a SWE-agent trajectory (an object with `trajectory`, `history` and `info`)";

/// Actions the harness writes into the trajectory itself when it stops a run (0.x:
/// "autosubmission" after a limit or an error); they are not the agent's tool calls.
const HARNESS_ACTIONS: [&str; 6] = ["exit_context", "exit_cost", "exit_error", "exit_format", "exit_api", "skip"];

/// One step as the stream needs it.
struct Step {
    action: String,
    observation: String,
    duration_ms: Option<f64>,
    /// The harness did not run it (1.x requery steps), with the failure type.
    not_run: Option<&'static str>,
    /// What the model said with it (`thought`).
    thought: String,
    /// The file open before the step (the previous step's `state.open_file`).
    open_before: Option<String>,
}

pub(super) fn read(unit: &Unit, _ctx: &Context) -> Result<Recorder, Refusal> {
    let input = &unit.files[0];
    let bytes = input.read()?;
    let doc = parse_json(input, &bytes, EXPECTED)?;
    let Value::Object(obj) = &doc else {
        return Err(input.refuse(None, format!("expected {EXPECTED}, found a JSON {}", kind(&doc))));
    };
    let steps =
        list(obj, "trajectory").map_err(|k| input.refuse(None, format!("`trajectory` is {k}, not a list of steps")))?;
    let history =
        list(obj, "history").map_err(|k| input.refuse(None, format!("`history` is {k}, not a list of messages")))?;
    if steps.is_none() && history.is_none() {
        return Err(input.refuse(None, format!("no `trajectory` and no `history`: expected {EXPECTED}")));
    }
    let empty = Map::new();
    let info = obj.get("info").and_then(Value::as_object).unwrap_or(&empty);

    let name = input.file_name();
    let episode = preds::traj_stem(&name).unwrap_or_else(|| name.trim_end_matches(".json").to_string());
    let mut rec = Recorder::new(crate::swe_agent::FORMAT, episode.clone());
    let hash = input.blake3()?;
    rec.source(&name, &hash, Part::Whole, bytes)?;

    // The configurations: the trajectory's own, then the file beside it.
    let mut configs: Vec<Value> = Vec::new();
    if let Some(rc) = obj.get("replay_config").cloned().map(config::unwrap_json_string).filter(Value::is_object) {
        configs.push(rc);
    }
    let mut prediction_patch = None;
    for f in &unit.files[1..] {
        let fname = f.file_name();
        if config::is_config_name(&fname) {
            match f.text().and_then(|t| config::read(f, &t).map(|v| (v, t))) {
                Ok((v, text)) => {
                    rec.source(&fname, &f.blake3()?, Part::Whole, text.into_bytes())?;
                    configs.push(v);
                }
                Err(e) => rec.note(format!("the run configuration {fname} was not read: {}", e.reason)),
            }
        } else {
            match preds::read_part(f, &episode) {
                Ok((part, part_bytes, patch)) => {
                    rec.source(&fname, &f.blake3()?, part, part_bytes)?;
                    prediction_patch = patch;
                }
                Err(e) => rec.note(format!("the prediction in {fname} was not read: {}", e.reason)),
            }
        }
    }
    for c in &configs {
        for m in config::models(c) {
            rec.model(m);
        }
    }
    let instance_id = configs.iter().find_map(config::instance_id).unwrap_or_else(|| episode.clone());
    rec.task(instance_id.clone());
    rec.instance_id = Some(instance_id.clone());
    rec.harness_version(info.get("swe_agent_version").and_then(Value::as_str));

    let from_history = steps.is_none_or(|s| s.is_empty());
    let steps = match steps {
        Some(s) if !s.is_empty() => trajectory_steps(s),
        _ => history_steps(history.unwrap_or(&[])),
    };
    if from_history {
        rec.note(
            "no trajectory steps: the tool calls were read from `history` (assistant messages with an `action`), \
             their outputs from the observations that follow, without the harness's prompt lines",
        );
    }
    let workdir = working_dir(obj).or_else(|| configs.iter().find_map(config::repo_dir));
    if let Some(w) = workdir {
        rec.workdir(w);
    }
    crate::common::cluster(&mut rec, configs.iter().find_map(config::repository), &instance_id);
    rec.note("SWE-agent logs no exit codes: a command's exit code is known only where its output states one");
    if let Some(n) = obj.get("attempts").and_then(Value::as_array).map(Vec::len).filter(|n| *n > 1) {
        rec.note(format!("a retry agent's run: only the chosen attempt of {n} was read"));
    }

    let history = history.unwrap_or(&[]);
    let mut said = Said::new(history);
    if let Some(statement) = problem_statement(&configs, history, said.instance) {
        rec.task_prompt(&statement);
    }
    rec.record_messages();
    let mut windows = Windows::new(rec.workdir_known());
    let exit_status = info.get("exit_status").and_then(Value::as_str).unwrap_or("").trim().to_string();
    let mut claimed = false;
    for step in &steps {
        let action = step.action.trim();
        if action.is_empty() {
            continue;
        }
        if HARNESS_ACTIONS.contains(&action) {
            rec.note(format!("the harness's own `{action}` step (it ended the run) is not a tool call"));
            continue;
        }
        // The model's words before the call: the history up to its message, then it.
        let at = said.find(action);
        match at {
            Some(h) => {
                said.flush(&mut rec, h);
                said.assistant(&mut rec, h);
            }
            None => {
                rec.message(Message::assistant(step.thought.trim_end()));
            }
        }
        let (tool, id, arguments) = at.map(|h| call_parts(&history[h])).unwrap_or_default();
        let tool = tool.unwrap_or_else(|| "shell".to_string());
        let mut call = Call::new(tool.clone())
            .command(action)
            .output(step.observation.clone())
            .duration(step.duration_ms)
            .id(id)
            .arguments(arguments.unwrap_or(Value::Null));
        call.timed_out = timed_out(&step.observation);
        let edit = windows.step(action, call.arguments.as_ref(), &step.observation, step.open_before.as_deref());
        if let Some(failure) = step.not_run {
            rec.refused(call.failure(failure), "run");
            continue;
        }
        if action == "exit" || action == "exit_forfeit" {
            rec.tool(call, "other", &[]);
            continue;
        }
        let call = match edit {
            Some(edit) => match record_edit(&mut rec, call, action, edit) {
                None => continue,
                Some(call) => call,
            },
            None => call,
        };
        rec.shell(call, action);
        if tool == "submit" || action.split_whitespace().next() == Some("submit") {
            rec.complete(None, None);
            claimed = true;
        }
    }
    said.flush(&mut rec, history.len());
    if !claimed && exit_status == "submitted" {
        rec.complete(None, None);
    }
    match stop_reason(&exit_status) {
        Some(reason) => rec.stop_reason(reason),
        None if exit_status.is_empty() => rec.note("the trajectory has no exit status: the run did not finish"),
        None => {}
    }

    match info.get("submission") {
        Some(Value::String(s)) if looks_like_diff(s) => rec.patch(s),
        Some(Value::String(s)) if !s.trim().is_empty() => rec.note("the submission is not a diff: no patch.diff"),
        _ => match prediction_patch.filter(|p| looks_like_diff(p)) {
            Some(p) => rec.patch(&p),
            None => {
                if let Some(p) = submitted_patch(&steps) {
                    rec.patch(&p);
                    rec.note("no `info.submission`: the patch is the one the `submit` step printed");
                }
            }
        },
    }
    if let Some(stats) = info.get("model_stats").and_then(Value::as_object) {
        rec.tokens(int(stats.get("tokens_sent")), int(stats.get("tokens_received")));
        if let Some(usd) = stats.get("instance_cost").and_then(Value::as_f64) {
            rec.usd(usd);
        }
    }
    Ok(rec)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "list",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// `Ok(None)` when the key is absent or null, `Err(kind)` when it is not a list.
fn list<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a [Value]>, &'static str> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(other) => Err(kind(other)),
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

fn trajectory_steps(steps: &[Value]) -> Vec<Step> {
    let mut out = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let action = s.get("action").and_then(Value::as_str).unwrap_or("").to_string();
        let observation = content_text(s.get("observation"));
        let exec = s.get("execution_time").and_then(Value::as_f64);
        // 1.x keeps the steps it requeried after (a blocked command, a bash syntax error)
        // in the trajectory: never executed, so no time and no output.
        let not_run =
            (exec == Some(0.0) && observation.trim().is_empty() && i + 1 < steps.len() && !action.trim().is_empty())
                .then(|| requery_reason(&steps[i + 1]));
        let thought = s.get("thought").and_then(Value::as_str).unwrap_or("").to_string();
        let open_before = i.checked_sub(1).and_then(|p| open_file(&steps[p]));
        out.push(Step {
            action,
            observation,
            duration_ms: exec.filter(|t| *t > 0.0).map(|t| t * 1000.0),
            not_run,
            thought,
            open_before,
        });
    }
    out
}

/// A step's `state` (a JSON string in 0.x, an object in 1.x).
fn state(step: &Value) -> Option<Value> {
    match step.get("state")? {
        Value::String(text) => epistore_package::json_from_str::<Value>(text).ok(),
        other => Some(other.clone()),
    }
}

/// The file open after a step (`state.open_file`; `n/a` is none).
fn open_file(step: &Value) -> Option<String> {
    let file = state(step)?.get("open_file")?.as_str()?.trim().to_string();
    (!file.is_empty() && file != "n/a").then_some(file)
}

/// Why the harness asked again: the error message it added last to the next query.
fn requery_reason(next: &Value) -> &'static str {
    let text = next
        .get("query")
        .and_then(Value::as_array)
        .and_then(|q| q.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")))
        .map(|m| content_text(m.get("content")))
        .unwrap_or_default();
    if text.contains("syntax error") {
        "parse_error"
    } else if text.contains("not supported by this environment") || text.contains("blocked") {
        "permission_denied"
    } else {
        "other"
    }
}

/// Without steps (a demonstration), the history's assistant messages that carry an
/// `action`, each with the observation that follows it.
fn history_steps(history: &[Value]) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, m) in history.iter().enumerate() {
        if m.get("role").and_then(Value::as_str) != Some("assistant") || is_demo(m) {
            continue;
        }
        let Some(action) = m.get("action").and_then(Value::as_str) else {
            continue;
        };
        let observation = history[i + 1..]
            .iter()
            .take_while(|n| n.get("role").and_then(Value::as_str) != Some("assistant"))
            .find(|n| matches!(n.get("role").and_then(Value::as_str), Some("user" | "tool")))
            .map(|n| tool_printed(&content_text(n.get("content"))))
            .unwrap_or_default();
        let thought = m.get("thought").and_then(Value::as_str).unwrap_or("").to_string();
        out.push(Step {
            action: action.to_string(),
            observation,
            duration_ms: None,
            not_run: None,
            thought,
            open_before: None,
        });
    }
    out
}

/// What the tool printed, from a history observation: without the prompt lines the
/// harness adds after it (`(Open file: ..)`, `(Current directory: ..)`, `bash-$`), and
/// nothing where the harness said the command printed nothing.
fn tool_printed(observation: &str) -> String {
    let text = observation.trim_end();
    let text = match text.strip_suffix("bash-$") {
        Some(rest) => {
            let rest = rest.trim_end_matches(['\n', '\r']);
            let cut = rest.rfind("(Open file: ").filter(|&i| rest[i..].contains("\n(Current directory: "));
            match cut {
                Some(i) => rest[..i].strip_suffix('\n').unwrap_or(&rest[..i]),
                None => observation,
            }
        }
        None => observation,
    };
    if text.trim() == "Your command ran successfully and did not produce any output." {
        String::new()
    } else {
        text.to_string()
    }
}

fn is_demo(m: &Value) -> bool {
    m.get("is_demo").and_then(Value::as_bool).unwrap_or(false)
}

/// The repository's working directory: the first step's `state.working_dir`.
fn working_dir(obj: &Map<String, Value>) -> Option<String> {
    let steps = obj.get("trajectory")?.as_array()?;
    steps.iter().find_map(|s| {
        let state = state(s)?;
        let dir = state.get("working_dir")?.as_str()?.trim();
        (dir.starts_with('/') && dir != "n/a").then(|| dir.to_string())
    })
}

/// The command was killed for taking too long (0.x and 1.x wording).
fn timed_out(observation: &str) -> bool {
    observation.contains("EXECUTION TIMED OUT") || observation.contains("was cancelled because it took more than")
}

/// The history as `messages` records (docs/format.md §9.1), walked beside the steps: each
/// step's assistant message is found by its action, in order (steps the harness requeried
/// are not in the history, so matching by position would drift); the messages before it
/// are written as they come, and the observation after it is the step's output, which the
/// recorder writes as the call's result.
struct Said<'a> {
    history: &'a [Value],
    /// The next message not yet written.
    next: usize,
    /// The instance template's rendering: the first user message that is not a demonstration.
    instance: Option<usize>,
}

impl<'a> Said<'a> {
    fn new(history: &'a [Value]) -> Said<'a> {
        let instance = history.iter().position(|m| role(m) == "user" && !is_demo(m));
        Said { history, next: 0, instance }
    }

    /// The assistant message at or after `next` whose action is `action`.
    fn find(&self, action: &str) -> Option<usize> {
        (self.next..self.history.len()).find(|&i| {
            let m = &self.history[i];
            role(m) == "assistant"
                && !is_demo(m)
                && m.get("action").and_then(Value::as_str).is_some_and(|a| a.trim() == action)
        })
    }

    /// Writes the messages before `to`.
    fn flush(&mut self, rec: &mut Recorder, to: usize) {
        while self.next < to {
            let i = self.next;
            self.next += 1;
            let m = &self.history[i];
            let text = content_text(m.get("content"));
            let message = match role(m) {
                // A demonstration is part of the harness's prompt, whoever speaks in it.
                "system" => Message::system(text),
                _ if is_demo(m) => Message::harness(text),
                "user" if Some(i) == self.instance => Message::user(text),
                "user" => Message::harness(text),
                "tool" => Message::new(Role::Tool).text(text),
                "assistant" => {
                    let action = m.get("action").and_then(Value::as_str).unwrap_or("").trim();
                    if HARNESS_ACTIONS.contains(&action) {
                        Message::harness(said_text(m))
                    } else {
                        assistant_message(m)
                    }
                }
                _ => continue,
            };
            rec.message(message);
        }
    }

    /// The step's own assistant message (its thought; the call itself is the recorder's),
    /// then its observation skipped: the tool messages after it, or one user message.
    fn assistant(&mut self, rec: &mut Recorder, at: usize) {
        rec.message(assistant_message(&self.history[at]));
        let mut i = at + 1;
        let plain = |m: &Value| !is_demo(m);
        while i < self.history.len() && role(&self.history[i]) == "tool" && plain(&self.history[i]) {
            i += 1;
        }
        if i == at + 1 && i < self.history.len() && role(&self.history[i]) == "user" && plain(&self.history[i]) {
            i += 1;
        }
        self.next = i;
    }
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// What the model said in an assistant message: its `thought` (the discussion, without
/// the action), else its content.
fn said_text(m: &Value) -> String {
    match m.get("thought").and_then(Value::as_str) {
        Some(t) => t.trim_end().to_string(),
        None => content_text(m.get("content")).trim_end().to_string(),
    }
}

/// An assistant message: its words and its thinking blocks (1.x `thinking_blocks`).
fn assistant_message(m: &Value) -> Message {
    let thinking: Vec<&str> = m
        .get("thinking_blocks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("thinking").and_then(Value::as_str))
        .collect();
    Message::assistant(said_text(m)).reasoning(thinking.join("\n\n"))
}

/// 1.x function calling: the tool an assistant message called, the call's id and its
/// arguments (a JSON string in the log, read as JSON).
fn call_parts(m: &Value) -> (Option<String>, Option<String>, Option<Value>) {
    let Some(call) = m.get("tool_calls").and_then(Value::as_array).and_then(|c| c.first()) else {
        return (None, None, None);
    };
    let f = call.get("function");
    let name = f.and_then(|f| f.get("name")).and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string);
    let id = call.get("id").and_then(Value::as_str).map(str::to_string);
    let arguments = f.and_then(|f| f.get("arguments")).map(|a| match a {
        Value::String(s) => epistore_package::json_from_str(s).unwrap_or_else(|_| a.clone()),
        other => other.clone(),
    });
    (name, id, arguments)
}

/// The task as given: the configuration's problem statement (1.x `problem_statement.text`),
/// else what the instance template's rendering has where the template names the issue.
fn problem_statement(configs: &[Value], history: &[Value], instance: Option<usize>) -> Option<String> {
    let given = configs.iter().find_map(|c| c.pointer("/problem_statement/text").and_then(Value::as_str));
    if let Some(text) = given.filter(|t| !t.trim().is_empty()) {
        return Some(text.to_string());
    }
    let rendered = content_text(history.get(instance?)?.get("content"));
    configs.iter().find_map(|c| find_string(c, "instance_template")).and_then(|t| template_fill(t, &rendered))
}

/// An editor command whose diff the log shows: recorded as the edit the shell rules make
/// of it (one mutation, derived), with its diff. Given back when the rules make something
/// else of the command, to be recorded as a shell command. Not `Recorder::shell` with the
/// diff: a windowed `edit N:M` names no file, and the diff knows the open one.
fn record_edit(rec: &mut Recorder, mut call: Call, action: &str, edit: EditDiff) -> Option<Call> {
    let code = shell::exit_code_from_text(&call.output);
    if code.is_some_and(|c| c != 0) {
        return Some(call);
    }
    let analysis = shell::analyse(action, rec.workdir_known(), &Declared::default());
    let [segment] = analysis.segments.as_slice() else {
        return Some(call);
    };
    let SegmentKind::Mutation { kind, paths, inside: true } = &segment.kind else {
        return Some(call);
    };
    let kind = match *kind {
        "create" => EditKind::Create,
        "edit" => EditKind::Edit,
        _ => return Some(call),
    };
    let paths = if paths.is_empty() { vec![edit.path.clone()] } else { paths.clone() };
    if edit.fragment {
        rec.fragment_diff();
    }
    call.exit_code = code.map(|c| (c, crate::Grade::Derived));
    rec.derived_edit(call.diff(Some(edit.diff)), kind, &paths, true);
    None
}

/// The patch the last `submit` step printed (0.x between `<<SUBMISSION||` and
/// `||SUBMISSION>>`, 1.x the whole output), when it is a diff.
fn submitted_patch(steps: &[Step]) -> Option<String> {
    let step = steps.iter().rev().find(|s| s.action.split_whitespace().next() == Some("submit"))?;
    let obs = &step.observation;
    let patch = match obs.split_once("<<SUBMISSION||") {
        Some((_, rest)) => rest.split_once("||SUBMISSION>>").map_or(rest, |(p, _)| p),
        None => obs.as_str(),
    };
    let patch = patch.replace("\r\n", "\n");
    let patch = patch.trim_start_matches('\n');
    looks_like_diff(patch).then(|| patch.to_string())
}

/// `outcome.stop_reason` from `info.exit_status` (`submitted (exit_cost)`: the harness
/// submitted after the limit, so the limit is why the run stopped). `None`: a submission,
/// whose stop reason follows from the completion claim.
pub(super) fn stop_reason(status: &str) -> Option<&'static str> {
    if status.is_empty() || status == "submitted" {
        return None;
    }
    let inner = status.strip_prefix("submitted (").and_then(|r| r.strip_suffix(')')).unwrap_or(status);
    Some(match inner {
        "exit_cost" | "exit_context" | "exit_total_execution_time" | "exit_total_cost" | "exit_step_limit" => {
            "budget_exhausted"
        }
        "exit_command_timeout" => "timeout",
        "exit_format" => "invalid_action",
        "exit_error" | "exit_api" | "exit_environment_error" | "early_exit" => "infra_error",
        _ => "other",
    })
}
