//! One `.traj` into a [`Recorder`]: its steps in order, then the run's outcome.
//!
//! 0.x: `{environment, trajectory: [{action, observation, response, state (a JSON string),
//! thought}], history, info: {exit_status, submission, model_stats}}`. 1.x adds
//! `execution_time`, `query` and `extra_info` to each step (`state` is an object), tool
//! calls to the history's assistant messages, `replay_config` (an object or a JSON
//! string), `info.swe_agent_version`, and, for a retry agent, `attempts` (the chosen
//! attempt's data is repeated at the top level).

use serde_json::{Map, Value};

use super::{config, content_text, looks_like_diff, parse_json, preds};
use crate::{Call, Context, Format, Part, Recorder, Refusal, Unit};

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
    let mut rec = Recorder::new(Format::SweAgent, episode.clone());
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
        rec.note("no trajectory steps: the tool calls were read from `history` (assistant messages with an `action`)");
    }
    let workdir = working_dir(obj).or_else(|| configs.iter().find_map(config::repo_dir));
    if let Some(w) = workdir {
        rec.workdir(w);
    }
    super::cluster(&mut rec, configs.iter().find_map(config::repository), &instance_id);
    rec.note("SWE-agent logs no exit codes: a command's exit code is known only where its output states one");
    if let Some(n) = obj.get("attempts").and_then(Value::as_array).map(Vec::len).filter(|n| *n > 1) {
        rec.note(format!("a retry agent's run: only the chosen attempt of {n} was read"));
    }

    let mut names = ToolNames::new(history.unwrap_or(&[]));
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
        let tool = names.take(action).unwrap_or_else(|| "shell".to_string());
        let mut call =
            Call::new(tool.clone()).command(action).output(step.observation.clone()).duration(step.duration_ms);
        call.timed_out = timed_out(&step.observation);
        if let Some(failure) = step.not_run {
            rec.refused(call.failure(failure), "run");
            continue;
        }
        if action == "exit" || action == "exit_forfeit" {
            rec.tool(call, "other", &[]);
            continue;
        }
        rec.shell(call, action);
        if tool == "submit" || action.split_whitespace().next() == Some("submit") {
            rec.complete(None, None);
            claimed = true;
        }
    }
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
        _ => {
            if let Some(p) = prediction_patch.filter(|p| looks_like_diff(p)) {
                rec.patch(&p);
            }
        }
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
        out.push(Step { action, observation, duration_ms: exec.filter(|t| *t > 0.0).map(|t| t * 1000.0), not_run });
    }
    out
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
            .map(|n| content_text(n.get("content")))
            .unwrap_or_default();
        out.push(Step { action: action.to_string(), observation, duration_ms: None, not_run: None });
    }
    out
}

fn is_demo(m: &Value) -> bool {
    m.get("is_demo").and_then(Value::as_bool).unwrap_or(false)
}

/// The repository's working directory: the first step's `state.working_dir`.
fn working_dir(obj: &Map<String, Value>) -> Option<String> {
    let steps = obj.get("trajectory")?.as_array()?;
    steps.iter().find_map(|s| {
        let state = match s.get("state")? {
            Value::String(text) => serde_json::from_str::<Value>(text).ok()?,
            other => other.clone(),
        };
        let dir = state.get("working_dir")?.as_str()?.trim();
        (dir.starts_with('/') && dir != "n/a").then(|| dir.to_string())
    })
}

/// The command was killed for taking too long (0.x and 1.x wording).
fn timed_out(observation: &str) -> bool {
    observation.contains("EXECUTION TIMED OUT") || observation.contains("was cancelled because it took more than")
}

/// 1.x function calling: the tool each of the history's assistant messages called, matched
/// to the steps by their action in order (steps the harness requeried are not in the
/// history, so matching by position would drift).
struct ToolNames {
    calls: Vec<(String, String)>,
    next: usize,
}

impl ToolNames {
    fn new(history: &[Value]) -> ToolNames {
        let calls = history
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant") && !is_demo(m))
            .filter_map(|m| {
                let action = m.get("action").and_then(Value::as_str)?.trim().to_string();
                let name = m.get("tool_calls")?.as_array()?.first()?.get("function")?.get("name")?.as_str()?;
                (!name.is_empty()).then(|| (action, name.to_string()))
            })
            .collect();
        ToolNames { calls, next: 0 }
    }

    fn take(&mut self, action: &str) -> Option<String> {
        let found = self.calls[self.next..].iter().position(|(a, _)| a == action)?;
        let name = self.calls[self.next + found].1.clone();
        self.next += found + 1;
        Some(name)
    }
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
