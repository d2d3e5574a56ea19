//! One session's telemetry events as recorder calls, per agent (docs/importers.md
//! §9.18, "What becomes what"). What an agent's settings withheld (prompt text, tool
//! commands) is said in a note, never guessed: a shell call without its command is an
//! opaque `run`, an exit code not in a tool's text stays unknown, and the completion
//! claim is unknown (telemetry sends no end of turn).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{Agent, Event};
use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, EditKind, Grade, Recorder};

/// Text an agent sends in place of what its settings withhold.
fn withheld(text: &str) -> bool {
    matches!(text.trim(), "<REDACTED>" | "[REDACTED]" | "")
}

/// A JSON object given as JSON text (tool arguments); an empty object otherwise.
fn object(text: Option<&str>) -> Map<String, Value> {
    text.and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .unwrap_or_default()
}

/// RFC 3339 of a time `ms` milliseconds before the event's (a call's start, from its end
/// and duration).
fn before(e: &Event, ms: Option<f64>) -> Option<String> {
    let ms = ms.filter(|m| m.is_finite() && *m >= 0.0)?;
    let start = e.nanos.checked_sub((ms * 1_000_000.0) as u64)?;
    Event { nanos: start, ..e.clone() }.ts()
}

/// The `N` of the last `marker N` in a tool's text (`Exit code: 1`).
fn exit_in(text: &str, marker: &str) -> Option<i64> {
    let at = text.rfind(marker)?;
    text[at + marker.len()..].split_whitespace().next()?.parse().ok()
}

pub(super) fn session(rec: &mut Recorder, agent: Agent, events: &[Event]) {
    rec.record_messages();
    let mut m = Mapper { rec, withheld_prompts: 0, withheld_commands: 0 };
    match agent {
        Agent::ClaudeCode => m.claude_code(events),
        Agent::Codex => m.codex(events),
        Agent::GeminiCli => m.gemini_cli(events),
    }
    m.finish(agent, events);
}

struct Mapper<'a> {
    rec: &'a mut Recorder,
    withheld_prompts: usize,
    withheld_commands: usize,
}

impl Mapper<'_> {
    fn prompt(&mut self, e: &Event) {
        match e.str("prompt").filter(|p| !withheld(p)) {
            Some(p) => self.rec.person_said(e.ts().as_deref(), p.to_string()),
            None => self.withheld_prompts += 1,
        }
    }

    /// A tool call that ran: classified by its name and arguments, recorded with its
    /// duration, success (`None`: not sent, unknown) and (when sent) its output.
    fn ran(
        &mut self,
        name: &str,
        args: Map<String, Value>,
        call: Call,
        success: Option<bool>,
        diff: Option<(String, bool)>,
    ) {
        let kind = tools::classify(name, &args, &SUBMIT_TOOLS);
        // An unknown outcome is no failure, and an edit with one possibly changed files.
        let ok = success != Some(false);
        let mut call = call.arguments(Value::Object(args.clone())).is_error(success.map(|s| !s));
        match &kind {
            Kind::Shell(c) | Kind::Python(c) => call = call.command(c.clone()),
            _ if !args.is_empty() => call = call.command(Value::Object(args).to_string()),
            _ => {}
        }
        if matches!(kind, Kind::Opaque) && name.eq_ignore_ascii_case("bash") {
            self.withheld_commands += 1;
        }
        if !ok && call.failure_type.is_none() && !matches!(kind, Kind::Edit(..)) {
            call = call.failure("other");
        }
        tools::record(self.rec, kind, call, tools::Done { ok, diff, claims: success == Some(true) });
    }

    /// A call refused before it ran (a person's or a policy's rejection).
    fn refused(&mut self, e: &Event, name: &str, args: &Map<String, Value>, id: Option<&str>, by_person: bool) {
        let kind = tools::classify(name, args, &SUBMIT_TOOLS);
        let ts = e.ts();
        if by_person {
            self.rec.person_decision(ts.as_deref(), false, &format!("rejected a {name} call"));
        }
        self.rec.refused(Call::new(name).ts(ts).id(id).arguments(Value::Object(args.clone())), kind.refused_kind());
    }

    fn claude_code(&mut self, events: &[Event]) {
        // Decisions by tool_use_id: a rejected call has no tool_result.
        let results: std::collections::HashSet<&str> =
            events.iter().filter(|e| e.name == "tool_result").filter_map(|e| e.str("tool_use_id")).collect();
        for e in events {
            let ts = e.ts();
            self.rec.saw_time(ts.as_deref());
            match e.name.as_str() {
                "user_prompt" => self.prompt(e),
                "api_request" => {
                    if let Some(model) = e.str("model") {
                        self.rec.model(model);
                    }
                    let (read, write) = (e.int("cache_read_tokens"), e.int("cache_creation_tokens"));
                    let input = e.int("input_tokens").map(|i| i + read.unwrap_or(0) + write.unwrap_or(0));
                    self.rec.tokens(input, e.int("output_tokens"));
                    if input.is_some() {
                        self.rec.cache_tokens(read, write);
                    }
                    if let Some(usd) = e.float("cost_usd") {
                        self.rec.usd(usd);
                    }
                }
                "assistant_response" => {
                    if let Some(text) = e.str("response").filter(|t| !withheld(t)) {
                        self.rec.message(Message::assistant(text).model(e.str("model")).ts(ts.as_deref()));
                    }
                }
                "api_error" => {
                    let why = e.str("error").unwrap_or("an API error");
                    self.rec.note(format!("an API request failed: {}", why.lines().next().unwrap_or("")));
                }
                "tool_decision" if e.str("decision") == Some("reject") => {
                    let id = e.str("tool_use_id");
                    if id.is_none_or(|id| !results.contains(id)) {
                        let name = e.str("tool_name").unwrap_or("unknown");
                        let by_person = e.str("source").is_some_and(|s| s.starts_with("user"));
                        self.refused(e, name, &claude_args(e), id, by_person);
                    }
                }
                "tool_result" => {
                    let name = e.str("tool_name").unwrap_or("unknown");
                    let duration = e.float("duration_ms");
                    let ok = e.flag("success");
                    let call = Call::new(name)
                        .ts(before(e, duration).or(ts.clone()))
                        .id(e.str("tool_use_id"))
                        .duration(duration);
                    self.ran(name, claude_args(e), call, ok, None);
                }
                _ => {}
            }
        }
        // `event.sequence` counts a session's events from 0: a gap is an event lost.
        let mut seqs: Vec<i64> = events.iter().filter_map(|e| e.int("event.sequence")).collect();
        seqs.sort_unstable();
        seqs.dedup();
        if let (Some(first), Some(last)) = (seqs.first(), seqs.last()) {
            // Wide arithmetic: the numbers are the sender's.
            let missing = (i128::from(*last) - i128::from(*first) + 1) - seqs.len() as i128;
            if missing > 0 {
                self.rec.note(format!(
                    "{missing} events of the session did not arrive (gaps in event.sequence): the record is incomplete"
                ));
            }
        }
    }

    fn codex(&mut self, events: &[Event]) {
        let results: std::collections::HashSet<&str> =
            events.iter().filter(|e| e.name == "tool_result").filter_map(|e| e.str("call_id")).collect();
        for e in events {
            let ts = e.ts();
            self.rec.saw_time(ts.as_deref());
            if let Some(v) = e.str("app.version") {
                self.rec.harness_version(Some(v));
            }
            match e.name.as_str() {
                "user_prompt" => self.prompt(e),
                "sse_event" if e.str("event.kind") == Some("response.completed") => {
                    if let Some(model) = e.str("model") {
                        self.rec.model(model);
                    }
                    let input = e.int("input_token_count");
                    self.rec.tokens(input, e.int("output_token_count"));
                    if input.is_some() {
                        self.rec.cache_tokens(e.int("cached_token_count"), None);
                    }
                }
                "agent_response" => {
                    if let Some(text) = e.str("response").or(e.str("text")).filter(|t| !withheld(t)) {
                        self.rec.message(Message::assistant(text).model(e.str("model")).ts(ts.as_deref()));
                    }
                }
                "api_request" => {
                    if let Some(code) = e.int("http.response.status_code").filter(|c| *c >= 400) {
                        self.rec.note(format!("a model request failed with HTTP {code}"));
                    }
                }
                "tool_decision" if matches!(e.str("decision"), Some("denied" | "abort")) => {
                    let id = e.str("call_id");
                    if id.is_none_or(|id| !results.contains(id)) {
                        let name = e.str("tool_name").unwrap_or("unknown");
                        let by_person = e.str("source").is_some_and(|s| s.eq_ignore_ascii_case("user"));
                        self.refused(e, name, &Map::new(), id, by_person);
                    }
                }
                "tool_decision" if e.str("source").is_some_and(|s| s.eq_ignore_ascii_case("user")) => {
                    let name = e.str("tool_name").unwrap_or("a tool");
                    self.rec.person_decision(ts.as_deref(), true, &format!("approved a {name} call"));
                }
                "tool_result" => self.codex_result(e),
                _ => {}
            }
        }
    }

    fn codex_result(&mut self, e: &Event) {
        let name = e.str("tool_name").unwrap_or("unknown");
        let duration = e.float("duration_ms");
        let ok = e.flag("success");
        let output = e.str("output").unwrap_or("").to_string();
        let arguments = e.str("arguments").unwrap_or("");
        let mut call = Call::new(name)
            .ts(before(e, duration).or(e.ts()))
            .id(e.str("call_id"))
            .duration(duration)
            .output(output.clone());
        if name == "apply_patch" {
            // The patch text itself (or `{"input": patch}`) is the argument.
            let patch = object(Some(arguments)).get("input").and_then(Value::as_str).map(str::to_string);
            let patch = patch.unwrap_or_else(|| arguments.to_string());
            let (kind, paths) = crate::common::apply_patch::patch_files(&patch);
            let applied = ok != Some(false) && crate::common::apply_patch::patch_ok_from_text(&output, None);
            let (diff, fragment) = crate::common::apply_patch::patch_diff(&patch, None, &|p: &str| p.to_string());
            call = call.command(patch.clone()).is_error(Some(!applied));
            if applied {
                if let Some(d) = diff {
                    if fragment {
                        self.rec.fragment_diff();
                    }
                    call = call.diff(Some(d));
                }
            } else {
                call = call.failure("other");
            }
            let kind = if kind == EditKind::Edit { EditKind::Edit } else { kind };
            self.rec.edit(call, kind, &paths, applied);
            return;
        }
        if let Some(code) = exit_in(&output, "Exit code:") {
            call = call.exit(Some(code), Grade::Derived);
        }
        self.ran(name, object(Some(arguments)), call, ok, None);
    }

    fn gemini_cli(&mut self, events: &[Event]) {
        // Tool outputs: the `functionResponse` parts of later requests, by call id
        // (`<function>-<start ms>-<random>`).
        let mut outputs: HashMap<String, String> = HashMap::new();
        for e in events.iter().filter(|e| e.name == "api_request") {
            let contents: Value = e.str("request_text").and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
            for part in contents.as_array().into_iter().flatten().filter_map(|c| c.get("parts")?.as_array()).flatten() {
                if let Some(fr) = part.get("functionResponse") {
                    let id = fr.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    let response = fr.get("response");
                    let text = response
                        .and_then(|r| r.get("output").or_else(|| r.get("error")))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| response.map(Value::to_string).unwrap_or_default());
                    outputs.insert(id, text);
                }
            }
        }
        for e in events {
            let ts = e.ts();
            self.rec.saw_time(ts.as_deref());
            match e.name.as_str() {
                "user_prompt" => self.prompt(e),
                "api_response" if e.str("role").is_none_or(|r| r == "main") => {
                    let model = e.str("model");
                    if let Some(m) = model {
                        self.rec.model(m);
                    }
                    let input = e.int("input_token_count");
                    let output = e.int("output_token_count").map(|o| o + e.int("thoughts_token_count").unwrap_or(0));
                    self.rec.tokens(input, output);
                    if input.is_some() {
                        self.rec.cache_tokens(e.int("cached_content_token_count"), None);
                    }
                    let (text, thought) = gemini_response(e.str("response_text"));
                    if !text.is_empty() || !thought.is_empty() {
                        self.rec.message(
                            Message::assistant(text)
                                .reasoning(thought)
                                .model(model)
                                .tokens(input, output)
                                .ts(ts.as_deref()),
                        );
                    }
                }
                "api_error" => {
                    let why = e.str("error.message").or(e.str("error")).unwrap_or("an API error");
                    self.rec.note(format!("a model request failed: {}", why.lines().next().unwrap_or("")));
                }
                "tool_call" => self.gemini_call(e, &outputs),
                "conversation_finished" => {
                    self.rec.note("Gemini CLI reported the conversation finished (conversation_finished)");
                }
                _ => {}
            }
        }
    }

    fn gemini_call(&mut self, e: &Event, outputs: &HashMap<String, String>) {
        let name = e.str("function_name").unwrap_or("unknown");
        let args = object(e.str("function_args"));
        let decision = e.str("decision");
        if decision == Some("reject") {
            self.refused(e, name, &args, None, true);
            return;
        }
        if decision == Some("modify") {
            self.rec.person_decision(e.ts().as_deref(), true, &format!("modified a {name} call before it ran"));
        }
        let duration = e.float("duration_ms");
        let ok = e.flag("success");
        let start = e.int("start_time").map(|ms| format!("{name}-{ms}-"));
        let output = start.and_then(|p| outputs.iter().find(|(id, _)| id.starts_with(&p)).map(|(_, o)| o.clone()));
        let mut call = Call::new(name).ts(before(e, duration).or(e.ts())).duration(duration);
        let mut diff = None;
        if let Some(out) = &output {
            call = call.output(out.clone());
            if let Some(code) = exit_in(out, "Exit Code:") {
                call = call.exit(Some(code), Grade::Derived);
            }
        }
        if ok != Some(false) {
            diff = tools::edit_diff(name, &args, output.as_deref().unwrap_or(""));
        }
        self.ran(name, args, call, ok, diff);
    }

    fn finish(&mut self, agent: Agent, events: &[Event]) {
        if let Some(v) = events.iter().find_map(|e| e.version.as_deref()).filter(|_| agent == Agent::ClaudeCode) {
            self.rec.harness_version(Some(v));
        }
        if self.withheld_prompts > 0 {
            self.rec.note(format!(
                "{} prompts were sent without their text (the agent's settings withhold it{})",
                self.withheld_prompts,
                if agent == Agent::ClaudeCode { ": OTEL_LOG_USER_PROMPTS=1 sends it" } else { "" }
            ));
        }
        if self.withheld_commands > 0 {
            self.rec.note(format!(
                "{} shell calls were sent without their command (Claude Code sends it with OTEL_LOG_TOOL_DETAILS=1): \
                 recorded as opaque runs",
                self.withheld_commands
            ));
        }
        if events.last().is_some_and(|e| e.name == "api_error") {
            self.rec.stop_reason("infra_error");
        }
        self.rec.claim_not_observed(
            "telemetry sends no end of turn: whether the agent claimed completion is unknown; the working directory, \
             file contents and check results beyond a tool's text are not in it",
        );
    }
}

/// A Claude Code call's arguments: its `tool_input` when sent, else what its
/// `tool_parameters` say (a Bash command).
fn claude_args(e: &Event) -> Map<String, Value> {
    let mut args = object(e.str("tool_input"));
    let params = object(e.str("tool_parameters"));
    if !args.contains_key("command") {
        if let Some(cmd) = params.get("full_command").or_else(|| params.get("bash_command")).and_then(Value::as_str) {
            args.insert("command".into(), Value::String(cmd.to_string()));
        }
    }
    args
}

/// The model's text and thoughts in a Gemini `response_text` (a JSON list of streamed
/// chunks, each with `candidates[].content.parts[]`).
fn gemini_response(text: Option<&str>) -> (String, String) {
    let chunks: Value = text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
    let (mut said, mut thought) = (String::new(), String::new());
    let parts = chunks
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("candidates")?.as_array())
        .flatten()
        .filter_map(|c| c.pointer("/content/parts")?.as_array())
        .flatten();
    for p in parts {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            let into = if p.get("thought").and_then(Value::as_bool) == Some(true) { &mut thought } else { &mut said };
            into.push_str(t);
        }
    }
    (said, thought)
}
