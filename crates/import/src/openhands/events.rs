//! The OpenHands event stream (`openhands/events/serialization`): actions (`action`,
//! `args`) and observations (`observation`, `content`, `extras`, `cause` = the id of the
//! action they answer), read in id order. An action and its observation are one tool
//! call, placed at the action; the observation gives its exit code and output.
//!
//! The conversation (docs/format.md §9.1): the system prompt (`system`), a person's and
//! the harness's messages (`message` from `user`), the agent's messages and the text of
//! the LLM response each call came from (its `tool_call_metadata`, else the action's
//! `thought`), said before the call; the recorder writes the call and its result.

use std::collections::HashSet;

use serde_json::Value;

use super::order::{args, extras, items, obj, str_of, Item, Obj};
use crate::common::pylit;
use crate::recorder::{Call, EditKind, Grade, Message};
use crate::{Input, Recorder, Refusal};

/// What the stream says beyond its records, for `run.rs`.
#[derive(Default)]
pub(super) struct Stream {
    /// The model each LLM response names, once per response.
    pub response_models: Vec<String>,
    /// The last `llm_metrics` (OpenHands accumulates them: the last is the run's total).
    pub last_metrics: Option<Value>,
    /// `budget_exhausted` / `infra_error` when the agent's last state says it stopped so.
    pub stop: Option<&'static str>,
    /// The agent's `finish` is the last thing that happened.
    pub ended_with_finish: bool,
}

/// The harness's own replies in an evaluation (`fake_user_response_fn`:
/// `codeact_user_response` and its per-benchmark variants), not a person's.
fn harness_reply(text: &str) -> bool {
    let t = text.trim();
    t.starts_with("Please continue working on the task")
        || t.starts_with("Continue with the task")
        || t == "/exit"
        || t.contains("YOU SHOULD NEVER ASK FOR HUMAN HELP")
}

/// A stop the agent controller reports (`_handle_traffic_control`, stuck detection,
/// runtime errors): a limit is `budget_exhausted`, anything else `infra_error`.
pub(super) fn classify_stop(text: &str) -> &'static str {
    let t = text.to_lowercase();
    let limit = ["maximum iteration", "maximum budget", "max_iterations", "iteration limit", "budget exceeded"]
        .iter()
        .any(|k| t.contains(k))
        || t.contains("contextwindowexceeded")
        || t.contains("context window")
        || t.starts_with("timeout after");
    if limit {
        "budget_exhausted"
    } else {
        "infra_error"
    }
}

pub(super) fn read(
    rec: &mut Recorder,
    events: &[Value],
    input: &Input,
    place: &Option<String>,
) -> Result<Stream, Refusal> {
    let items = items(events, input, place)?;
    rec.record_messages();
    let mut reader = Reader::new(events);
    reader.workdir(rec, &items);
    for item in &items {
        match item {
            Item::Action(a, obs) => reader.action(rec, a, *obs),
            Item::Observation(o) => {
                // An error no action caused (a malformed call, the controller's stop)
                // is put to the agent as a user message the harness wrote.
                if str_of(o, "observation") == Some("error") {
                    let text = str_of(o, "content").unwrap_or("");
                    let ts = str_of(o, "timestamp").and_then(stamp).map(|(ts, _)| ts);
                    rec.message(Message::harness(text).ts(ts));
                }
                reader.observation(rec, o)
            }
        }
    }
    if reader.zoneless {
        rec.note("OpenHands timestamps carry no time zone; they are read as UTC");
    }
    if reader.unanswered_errors > 0 {
        rec.note(format!(
            "{} agent steps ended in an error observation without an action (a malformed tool call); \
             they are not tool calls",
            reader.unanswered_errors
        ));
    }
    reader.stream.ended_with_finish = reader.finished;
    Ok(reader.stream)
}

/// A timestamp as RFC 3339; OpenHands writes `datetime.isoformat()` without a zone.
fn stamp(raw: &str) -> Option<(String, bool)> {
    if chrono::DateTime::parse_from_rfc3339(raw).is_ok() {
        return Some((raw.to_string(), false));
    }
    chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f").ok().map(|_| (format!("{raw}Z"), true))
}

fn millis_between(a: &str, b: &str) -> Option<f64> {
    let a = chrono::DateTime::parse_from_rfc3339(a).ok()?;
    let b = chrono::DateTime::parse_from_rfc3339(b).ok()?;
    let us = (b - a).num_microseconds()?;
    (us >= 0).then(|| us as f64 / 1000.0)
}

pub(super) struct Reader {
    stream: Stream,
    seen_responses: HashSet<String>,
    user_messages: usize,
    zoneless: bool,
    unanswered_errors: usize,
    /// The person confirms or rejects in the stream itself (`change_agent_state`), so a
    /// rejected action is not counted as their decision a second time.
    decisions_in_stream: bool,
    last_error: Option<String>,
    /// Nothing happened since the agent's `finish`.
    pub(super) finished: bool,
    /// LLM responses whose text (and usage) was said already: one response may make
    /// several calls.
    spoken: HashSet<String>,
}

impl Reader {
    fn new(events: &[Value]) -> Reader {
        let decisions_in_stream = events.iter().filter_map(obj).any(|e| {
            str_of(e, "source") == Some("user")
                && str_of(e, "action") == Some("change_agent_state")
                && matches!(str_of(args(e), "agent_state"), Some("user_confirmed" | "user_rejected"))
        });
        Reader {
            stream: Stream::default(),
            seen_responses: HashSet::new(),
            user_messages: 0,
            zoneless: false,
            unanswered_errors: 0,
            decisions_in_stream,
            last_error: None,
            finished: false,
            spoken: HashSet::new(),
        }
    }

    /// The run's working directory: the repository the workspace context names
    /// (`recall` observation `repo_directory`), else the directory the shell reports
    /// (`extras.metadata.working_dir`) after the run's first command, when that command
    /// does not change it (the shell persists, so any later report may be where an
    /// earlier `cd` left it), else the repository the instruction uploads. Paths in it
    /// are the same file however a call names them (an editor's absolute path, `sed -i`
    /// on a relative one).
    fn workdir(&self, rec: &mut Recorder, items: &[Item]) {
        let absolute = |d: Option<&str>| d.filter(|d| d.starts_with('/')).map(str::to_string);
        let recalled = items.iter().find_map(|item| match item {
            Item::Action(_, Some(o)) | Item::Observation(o) if str_of(o, "observation") == Some("recall") => {
                absolute(str_of(extras(o), "repo_directory"))
            }
            _ => None,
        });
        let first_command = items.iter().find_map(|item| match item {
            Item::Action(a, o) if str_of(a, "action") == Some("run") && str_of(a, "source") != Some("user") => {
                Some((a, o))
            }
            _ => None,
        });
        let reported = first_command.and_then(|(a, o)| {
            let command = str_of(args(a), "command").unwrap_or("");
            let cd = command
                .split([';', '&', '|', '\n'])
                .any(|s| matches!(s.split_whitespace().next(), Some("cd" | "pushd")));
            let meta = o.and_then(|o| extras(o).get("metadata")).and_then(obj);
            if cd {
                None
            } else {
                absolute(meta.and_then(|m| str_of(m, "working_dir")))
            }
        });
        // When the shell reports none (`working_dir` null): the repository the
        // instruction names (`<uploaded_files>\n/workspace/REPO\n</uploaded_files>`).
        let named = || {
            items.iter().find_map(|item| match item {
                Item::Action(a, _) if str_of(a, "action") == Some("message") && str_of(a, "source") == Some("user") => {
                    uploaded(str_of(args(a), "content").unwrap_or(""))
                }
                _ => None,
            })
        };
        if let Some(dir) = recalled.or(reported).or_else(named) {
            rec.workdir(dir);
        }
    }

    /// Every event's time (the run's first and last) and the model its LLM response names.
    fn saw(&mut self, rec: &mut Recorder, e: &Obj) -> Option<String> {
        let ts = str_of(e, "timestamp").and_then(stamp).map(|(ts, zoneless)| {
            self.zoneless |= zoneless;
            ts
        });
        rec.saw_time(ts.as_deref());
        if let Some(resp) =
            e.get("tool_call_metadata").and_then(obj).and_then(|t| t.get("model_response")).and_then(obj)
        {
            let id = str_of(resp, "id").unwrap_or("").to_string();
            if let Some(model) = str_of(resp, "model").filter(|m| !m.is_empty()) {
                if id.is_empty() || self.seen_responses.insert(id) {
                    self.stream.response_models.push(model.to_string());
                }
            }
        }
        if let Some(m) = e.get("llm_metrics").filter(|m| m.is_object()) {
            self.stream.last_metrics = Some(m.clone());
        }
        ts
    }

    fn call(&mut self, rec: &mut Recorder, a: &Obj, obs: Option<&Obj>, default_tool: &str) -> Call {
        self.finished = false;
        let ts = self.saw(rec, a);
        let obs_ts = obs.and_then(|o| self.saw(rec, o));
        let tool = a
            .get("tool_call_metadata")
            .and_then(obj)
            .and_then(|t| str_of(t, "function_name"))
            .filter(|n| !n.is_empty())
            .unwrap_or(default_tool);
        let duration = ts.as_deref().zip(obs_ts.as_deref()).and_then(|(a, b)| millis_between(a, b));
        let id = a.get("tool_call_metadata").and_then(obj).and_then(|t| str_of(t, "tool_call_id"));
        let mut call =
            Call::new(tool).ts(ts).duration(duration).id(id.filter(|i| !i.is_empty())).arguments(call_arguments(a));
        if let Some(o) = obs {
            call = call.output(str_of(o, "content").unwrap_or(""));
        }
        call
    }

    fn observation(&mut self, rec: &mut Recorder, o: &Obj) {
        self.saw(rec, o);
        let ex = extras(o);
        match str_of(o, "observation") {
            Some("agent_state_changed") => match str_of(ex, "agent_state") {
                Some("error") => {
                    let why =
                        str_of(ex, "reason").filter(|r| !r.is_empty()).map(str::to_string).or(self.last_error.clone());
                    self.stream.stop = Some(why.as_deref().map_or("infra_error", classify_stop));
                }
                Some("paused")
                    if self.last_error.as_deref().is_some_and(|e| classify_stop(e) == "budget_exhausted") =>
                {
                    self.stream.stop = Some("budget_exhausted");
                }
                Some("running") => self.stream.stop = None,
                _ => {}
            },
            Some("error") => {
                let text = str_of(o, "content").unwrap_or("").to_string();
                let controller = text.starts_with("Agent reached maximum") || text.contains("stuck in a loop");
                if !controller && str_of(o, "source") != Some("environment") {
                    self.unanswered_errors += 1;
                }
                self.last_error = Some(text);
            }
            _ => {}
        }
    }

    fn action(&mut self, rec: &mut Recorder, a: &Obj, obs: Option<&Obj>) {
        let kind = str_of(a, "action").unwrap_or("");
        let source = str_of(a, "source").unwrap_or("agent");
        match source {
            "user" => return self.user_action(rec, a, obs, kind),
            "agent" => {}
            // The environment's own actions (state changes, setup) are no one's calls.
            _ => return self.skip(rec, a, obs),
        }
        if matches!(kind, "system" | "message") {
            let ts = self.saw(rec, a);
            let text = str_of(args(a), "content").unwrap_or("");
            let m = if kind == "system" {
                Message::system(text)
            } else {
                let (tokens_in, tokens_out, model) = self.usage(a);
                Message::assistant(text).tokens(tokens_in, tokens_out).model(model)
            };
            rec.message(m.ts(ts));
            if let Some(o) = obs {
                self.observation(rec, o);
            }
            return;
        }
        if matches!(
            kind,
            "recall" | "null" | "condensation" | "condensation_request" | "change_agent_state" | "summarize"
        ) {
            return self.skip(rec, a, obs);
        }
        self.say(rec, a, kind);
        let rejected = obs.is_some_and(|o| str_of(o, "observation") == Some("user_rejected"))
            || str_of(args(a), "confirmation_state") == Some("rejected");
        if rejected {
            let default = if kind == "run" { "shell" } else { kind };
            let call = self.call(rec, a, obs, default).command(command_text(a));
            let action_kind = if matches!(kind, "run" | "run_ipython") { "run" } else { action_kind_of(kind) };
            let ts = call.ts.clone();
            rec.refused(call, action_kind);
            if !self.decisions_in_stream {
                rec.person_decision(ts.as_deref(), false, "rejected the agent's action");
            }
            return;
        }
        super::run::tool_call(self, rec, a, obs, kind);
    }

    /// An action that is no tool call: only its time, and its observation's news.
    pub(super) fn skip(&mut self, rec: &mut Recorder, a: &Obj, obs: Option<&Obj>) {
        self.saw(rec, a);
        if let Some(o) = obs {
            self.observation(rec, o);
        }
    }

    fn user_action(&mut self, rec: &mut Recorder, a: &Obj, obs: Option<&Obj>, kind: &str) {
        match kind {
            "message" => {
                let ts = self.saw(rec, a);
                self.user_messages += 1;
                let text = str_of(args(a), "content").unwrap_or("");
                let said = if harness_reply(text) { Message::harness(text) } else { Message::human(text) };
                rec.message(said.ts(ts.clone()));
                if self.user_messages > 1 && !harness_reply(text) {
                    self.finished = false;
                    rec.person_message(ts.as_deref(), text);
                }
            }
            "run" => {
                let command = str_of(args(a), "command").unwrap_or("").to_string();
                let call = self.shell_call(rec, a, obs);
                rec.person_command(call, &command);
            }
            "change_agent_state" => {
                let ts = self.saw(rec, a);
                match str_of(args(a), "agent_state") {
                    Some("user_confirmed") => {
                        rec.person_decision(ts.as_deref(), true, "confirmed the agent's action");
                    }
                    Some("user_rejected") => {
                        rec.person_decision(ts.as_deref(), false, "rejected the agent's action");
                    }
                    Some(state @ ("stopped" | "paused")) => {
                        rec.person_abort(ts.as_deref(), &format!("set the agent {state}"));
                    }
                    _ => {}
                }
            }
            _ => {
                self.saw(rec, a);
            }
        }
        if let Some(o) = obs.filter(|_| kind != "run") {
            self.observation(rec, o);
        }
    }

    /// A shell command's call: the exit code from `extras.metadata.exit_code` (older logs:
    /// `extras.exit_code`), `-1` being OpenHands' "not known"; a timeout from its notice.
    pub(super) fn shell_call(&mut self, rec: &mut Recorder, a: &Obj, obs: Option<&Obj>) -> Call {
        let mut call = self.call(rec, a, obs, "shell");
        let Some(o) = obs else { return call };
        let ex = extras(o);
        let meta = ex.get("metadata").and_then(obj);
        let code = meta.and_then(|m| m.get("exit_code")).or_else(|| ex.get("exit_code")).and_then(Value::as_i64);
        call = call.exit(code.filter(|&c| c != -1), Grade::Observed);
        let suffix = meta.and_then(|m| str_of(m, "suffix")).unwrap_or("");
        let content = str_of(o, "content").unwrap_or("");
        // "No new output after 30 seconds" is OpenHands' soft timeout: the command is still
        // running (the agent may wait on it or send keys), so its result is unknown, not a
        // timeout: it could still pass.
        let notice = |t: &str| t.contains("[The command timed out after") || t.contains("timed out. Sent SIGINT");
        if code.is_none_or(|c| c == -1) && (notice(suffix) || notice(content)) {
            call.timed_out = true;
        }
        if str_of(o, "observation") == Some("error") && !call.timed_out {
            call = call.failure("other");
        }
        let failed = call.timed_out || call.failure_type.is_some() || code.is_some_and(|c| c != 0 && c != -1);
        call.is_error(Some(failed))
    }

    /// A non-shell tool's call; `ok` false when its observation reports an error
    /// (an `error` observation, or the editor's `ERROR:` answer).
    pub(super) fn tool_call(
        &mut self,
        rec: &mut Recorder,
        a: &Obj,
        obs: Option<&Obj>,
        default_tool: &str,
    ) -> (Call, bool) {
        let call = self.call(rec, a, obs, default_tool).command(command_text(a));
        let failed = obs.is_some_and(|o| {
            str_of(o, "observation") == Some("error")
                || str_of(o, "content").unwrap_or("").trim_start().starts_with("ERROR:")
        });
        let call = call.is_error(obs.map(|_| failed));
        if failed {
            (call.failure("other"), false)
        } else {
            (call, true)
        }
    }

    /// The text of the LLM response an action came from, said before its call: the
    /// response's own message (once per response), else the action's `thought` (a
    /// `think` call's thought is its argument, not something said beside it).
    fn say(&mut self, rec: &mut Recorder, a: &Obj, kind: &str) {
        let resp = a.get("tool_call_metadata").and_then(obj).and_then(|t| t.get("model_response")).and_then(obj);
        let message = resp
            .and_then(|r| r.get("choices"))
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .and_then(|c| c.get("message"))
            .and_then(obj);
        let id = resp.and_then(|r| str_of(r, "id")).filter(|i| !i.is_empty());
        if id.is_some_and(|i| self.spoken.contains(i)) {
            return;
        }
        let (text, reasoning) = match (message, id) {
            (Some(m), Some(_)) => {
                (content_text(m.get("content")), str_of(m, "reasoning_content").unwrap_or("").to_string())
            }
            _ if kind == "think" => return,
            _ => (
                str_of(args(a), "thought").unwrap_or("").to_string(),
                str_of(args(a), "reasoning_content").unwrap_or("").to_string(),
            ),
        };
        let (tokens_in, tokens_out, model) = self.usage(a);
        let ts = str_of(a, "timestamp").and_then(stamp).map(|(ts, _)| ts);
        rec.message(Message::assistant(text).reasoning(reasoning).tokens(tokens_in, tokens_out).model(model).ts(ts));
    }

    /// The usage and model of the LLM response an action came from, the first time that
    /// response is seen: its `usage`, else the per-response entry `llm_metrics` keeps.
    fn usage(&mut self, a: &Obj) -> (Option<i64>, Option<i64>, Option<String>) {
        let resp = a.get("tool_call_metadata").and_then(obj).and_then(|t| t.get("model_response")).and_then(obj);
        let per_call = a
            .get("llm_metrics")
            .and_then(|m| m.get("token_usages"))
            .and_then(Value::as_array)
            .and_then(|u| u.last())
            .and_then(obj);
        let id = resp
            .and_then(|r| str_of(r, "id"))
            .or_else(|| per_call.and_then(|u| str_of(u, "response_id")))
            .filter(|i| !i.is_empty());
        if let Some(id) = id {
            if !self.spoken.insert(id.to_string()) {
                return (None, None, None);
            }
        }
        let usage = resp.and_then(|r| r.get("usage")).and_then(obj).or(per_call);
        let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_i64);
        let model = resp.and_then(|r| str_of(r, "model")).filter(|m| !m.is_empty()).map(str::to_string);
        (count("prompt_tokens"), count("completion_tokens"), model)
    }
}

/// A message's `content`: a string, or the text parts of a list.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// A call's arguments: the function arguments of its tool call in the LLM response
/// (`tool_call_metadata`), else the action's `args` without the model's `thought`.
fn call_arguments(a: &Obj) -> Value {
    let meta = a.get("tool_call_metadata").and_then(obj);
    let id = meta.and_then(|t| str_of(t, "tool_call_id"));
    let calls = meta
        .and_then(|t| t.get("model_response"))
        .and_then(|r| r.get("choices"))
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("message"))
        .and_then(|m| m.get("tool_calls"))
        .and_then(Value::as_array);
    let function = calls
        .into_iter()
        .flatten()
        .find(|c| id.is_some() && c.get("id").and_then(Value::as_str) == id)
        .and_then(|c| c.get("function"));
    match function.and_then(|f| f.get("arguments")) {
        Some(Value::String(s)) => epistore_package::json_from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(v) if !v.is_null() => v.clone(),
        _ => {
            let mut args = args(a).clone();
            args.shift_remove("thought");
            Value::Object(args)
        }
    }
}

/// The call's arguments as compact JSON, without the model's `thought` (its prose, not
/// an argument).
pub(super) fn command_text(a: &Obj) -> String {
    let mut args = args(a).clone();
    args.shift_remove("thought");
    serde_json::to_string(&Value::Object(args)).unwrap_or_default()
}

pub(super) fn action_kind_of(kind: &str) -> &'static str {
    match kind {
        "read" | "browse" | "browse_interactive" => "read",
        "think" | "task_tracking" => "plan",
        "search" => "search",
        "edit" | "write" => "edit",
        _ => "other",
    }
}

/// The arguments of a `print(file_editor(**{...}))` call: how early function-calling
/// versions ran `str_replace_editor` (as IPython code, or in `translated_ipython_code`).
pub(super) fn file_editor_args(code: &str) -> Option<Obj> {
    let inner = code.trim().strip_prefix("print(file_editor(**")?.strip_suffix("))")?;
    match pylit::parse(inner) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// An editor command's kind of mutation, `None` for `view` (a read).
pub(super) fn editor_kind(command: &str) -> Option<EditKind> {
    match command {
        "view" => None,
        "create" => Some(EditKind::Create),
        _ => Some(EditKind::Edit),
    }
}

/// The absolute folder of an instruction's `<uploaded_files>` block.
fn uploaded(instruction: &str) -> Option<String> {
    let (_, rest) = instruction.split_once("<uploaded_files>")?;
    let (block, _) = rest.split_once("</uploaded_files>")?;
    block.lines().map(str::trim).find(|l| l.starts_with('/')).map(|l| l.trim_end_matches('/').to_string())
}
