//! Claude Code's JSON Lines read into events, one file at a time: session transcripts
//! (`~/.claude/projects/<dir>/<session>.jsonl` and their subagent files) and headless
//! `--output-format stream-json` output. What a line means is decided here; what it
//! becomes in the package is decided in `emit`.
//!
//! Both shapes carry the same Anthropic messages (`assistant` lines with `tool_use`
//! blocks, `user` lines with `tool_result` blocks); they differ in the envelope: the
//! transcript's `sessionId` / `toolUseResult` / `isSidechain`, stream-json's
//! `session_id` / `tool_use_result` / `parent_tool_use_id` and its `result` lines.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::head::{object, str_of};
use crate::{Input, Refusal};

/// A subagent, as a line names it: the `Task` / `Agent` call that started it
/// (`parentToolUseID`, `parent_tool_use_id`) or its own id (`agentId`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Agent {
    pub task: Option<String>,
    pub id: Option<String>,
}

/// Who wrote a message part (docs/format.md §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    /// A person typed it.
    Human,
    /// Claude Code wrote it in the user's place: reminders, caveats, hook output,
    /// command output, compaction summaries, `isMeta` lines, interrupt notices.
    Harness,
    /// A subagent's prompt (its "user" is the agent that called it).
    SubPrompt,
    /// The agent's visible text.
    Assistant,
    /// The agent's thinking.
    Thinking,
    /// A message the tool wrote in the agent's place (`<synthetic>`, `isApiErrorMessage`).
    Synthetic,
    /// A system prompt block sent to the model (`api-request-shape`).
    System,
    /// A `tool_use` block: where a reply that only calls tools says its usage.
    Calls,
}

/// One message part, where the log shows it.
#[derive(Debug, Clone)]
pub(super) struct Said {
    pub who: Who,
    pub text: String,
    /// `message.model` of an assistant line.
    pub model: Option<String>,
    /// `message.id` of an assistant line (its usage is counted once).
    pub message_id: Option<String>,
    /// The line's `uuid` and the part's place in it: a subagent's line copied into the
    /// session file (`agent_progress`) is said once.
    pub key: Option<String>,
    /// The subagent that said it.
    pub agent: Option<Agent>,
}

/// One thing that happened, in the order of its file.
#[derive(Debug, Clone)]
pub(super) struct Ev {
    pub ts: Option<String>,
    /// A subagent's (a sidechain line, a subagent file, `parent_tool_use_id` set).
    pub sub: bool,
    pub what: What,
}

#[derive(Debug, Clone)]
pub(super) enum What {
    /// A line that only shows a time.
    Tick,
    /// A `tool_use` block, where the call starts; `agent`: the subagent that made it.
    Call { id: String, name: String, input: Value, agent: Option<Agent> },
    /// The agent's words (a non-blank `text` block).
    Text(String),
    /// The assistant message ended the turn (`stop_reason: end_turn`).
    EndTurn,
    /// A message the tool wrote in the agent's place (`<synthetic>`, `isApiErrorMessage`).
    ApiError(String),
    /// A user line carrying these tool results (where a person's decision on them sits).
    Results(Vec<String>),
    /// Text a person typed; `mid_turn` when delivered while the agent worked.
    Person { text: String, mid_turn: bool },
    /// A slash command (`<command-name>`): a prompt, never an intervention.
    Command,
    /// `[Request interrupted by user...]`.
    Abort(String),
    /// `<bash-input>`: a command the person ran in the agent's shell (`!cmd`).
    /// `output`: the `<bash-stdout>` / `<bash-stderr>` line after it, when the log has one.
    PersonShell { command: String, output: Option<String> },
    /// A turn ended without an assistant marker (`turn_duration`, a stream-json
    /// `result`, a harness `<task-notification>` starting a new turn, the next file).
    Boundary,
    /// A message part (for the messages trace only: no claim, no intervention).
    Said(Said),
    /// A person went back to an earlier point of the conversation (`/rewind`, Esc Esc):
    /// the prompt after this event has the same parent as an earlier prompt, whose
    /// message part has the key `since` ([`Said::key`]); what the file holds between
    /// them is the abandoned branch.
    Rewind { since: String },
}

/// A tool's result, matched to its call by `tool_use_id`.
#[derive(Debug, Clone, Default)]
pub(super) struct Res {
    pub text: String,
    pub is_error: bool,
    /// `toolUseResult` / `tool_use_result`: the tool's structured result.
    pub structured: Option<Value>,
    pub ts: Option<String>,
    /// Newer versions' `permissionDecision` (`tool_result_meta[].permission_decision`).
    pub decision: Option<Value>,
}

/// A stream-json `result` line: the end of one headless turn.
#[derive(Debug, Clone, Default)]
pub(super) struct Outcome {
    pub subtype: String,
    /// `result`: the agent's last words of the turn.
    pub result: Option<String>,
    pub is_error: bool,
    pub usd: Option<f64>,
    /// `usage` (input incl. cache, output).
    pub usage: Option<(i64, i64)>,
    /// `modelUsage` summed over models: the process's running total.
    pub model_usage: Option<(i64, i64)>,
    /// The models `modelUsage` names.
    pub models: Vec<String>,
}

/// A transcript `cost-state` line (newer versions).
#[derive(Debug, Clone)]
pub(super) struct CostState {
    pub start: Option<i64>,
    pub usd: f64,
    pub version: Option<String>,
}

/// Everything one file says.
#[derive(Debug, Default)]
pub(super) struct FileData {
    pub events: Vec<Ev>,
    pub results: HashMap<String, Res>,
    /// `(message.id, tokens in, tokens out)` in file order; a message repeats per block.
    pub usage: Vec<(String, i64, i64)>,
    /// `(message.id, cache read, cache written)`: the parts of tokens in the prompt
    /// cache served or stored, beside `usage`.
    pub cache_usage: Vec<(String, i64, i64)>,
    /// `message.model` of each assistant line, and whether a subagent's.
    pub models: Vec<(String, bool)>,
    pub versions: Vec<String>,
    pub cwd: Option<String>,
    pub session: Option<String>,
    /// stream-json `system/init` `model`: the requested model.
    pub init_model: Option<String>,
    /// stream-json `permission_denials[].tool_use_id`.
    pub denied: Vec<String>,
    pub outcomes: Vec<Outcome>,
    pub cost_states: Vec<CostState>,
    /// The line being read: its `uuid` and subagent, for the message parts it says.
    pub line: Line,
    /// The system prompt last said.
    pub system: Vec<String>,
    /// Each typed prompt's parent (`parentUuid`, `None` for the first prompt's null), with
    /// the prompt's time and the key of its message part: a later prompt on the same
    /// parent is a rewind.
    pub prompts: HashMap<Option<String>, (Option<String>, String)>,
}

/// What the line being read says about who speaks in it.
#[derive(Debug, Clone, Default)]
pub(super) struct Line {
    pub uuid: Option<String>,
    pub agent: Option<Agent>,
    /// Message parts said so far on this line.
    pub parts: usize,
}

pub(super) fn parse_file(input: &Input, stream: bool, sub_file: bool) -> Result<FileData, Refusal> {
    let text = input.text()?;
    let mut data = FileData::default();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let obj = object(input, i + 1, line)?;
        if stream {
            data.stream_line(&obj);
        } else {
            data.transcript_line(&obj, sub_file);
        }
    }
    Ok(data)
}

impl FileData {
    pub(super) fn push(&mut self, ts: Option<&str>, sub: bool, what: What) {
        self.events.push(Ev { ts: ts.map(str::to_string), sub, what });
    }

    /// A message part of the line being read.
    fn said(&mut self, ts: Option<&str>, sub: bool, who: Who, text: &str) {
        self.said_by(ts, sub, who, text, None, None);
    }

    fn said_by(
        &mut self,
        ts: Option<&str>,
        sub: bool,
        who: Who,
        text: &str,
        model: Option<&str>,
        message_id: Option<&str>,
    ) {
        if who != Who::Calls && text.trim().is_empty() {
            return;
        }
        let part = self.line.parts;
        self.line.parts += 1;
        let said = Said {
            who,
            text: text.to_string(),
            model: model.filter(|m| !m.is_empty()).map(str::to_string),
            message_id: message_id.map(str::to_string),
            key: self.line.uuid.as_ref().map(|u| format!("{u}#{part}")),
            agent: if sub { Some(self.line.agent.clone().unwrap_or_default()) } else { None },
        };
        self.push(ts, sub, What::Said(said));
    }

    /// Starts a line: its `uuid` and, for a subagent's, which one.
    pub(super) fn start_line(&mut self, uuid: Option<&Value>, task: Option<&Value>, agent_id: Option<&Value>) {
        let s = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let agent = Agent { task: s(task), id: s(agent_id) };
        self.line =
            Line { uuid: s(uuid), agent: (agent.task.is_some() || agent.id.is_some()).then_some(agent), parts: 0 };
    }

    pub(super) fn tick(&mut self, ts: Option<&str>) {
        if ts.is_some() {
            self.push(ts, false, What::Tick);
        }
    }

    pub(super) fn version(&mut self, v: Option<&str>) {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            if self.versions.last().map(String::as_str) != Some(v) {
                self.versions.push(v.to_string());
            }
        }
    }

    fn transcript_line(&mut self, o: &Map<String, Value>, sub_file: bool) {
        let ts = o.get("timestamp").and_then(Value::as_str);
        let sub = sub_file || o.get("isSidechain").and_then(Value::as_bool) == Some(true);
        self.start_line(o.get("uuid"), o.get("parentToolUseID"), o.get("agentId"));
        if self.session.is_none() {
            self.session = o.get("sessionId").and_then(Value::as_str).map(str::to_string);
        }
        self.version(o.get("version").and_then(Value::as_str));
        let ty = str_of(o, "type");
        if !sub && self.cwd.is_none() && matches!(ty, "user" | "assistant") {
            // The first line's: later lines follow the agent's `cd`s in some versions.
            self.cwd = o.get("cwd").and_then(Value::as_str).map(str::to_string);
        }
        match ty {
            "assistant" => {
                let api_error = o.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true);
                self.assistant(o.get("message"), ts, sub, api_error);
            }
            "user" => {
                let flag = |k: &str| o.get(k).and_then(Value::as_bool) == Some(true);
                if flag("isMeta") || flag("isCompactSummary") || flag("isVisibleInTranscriptOnly") {
                    // Claude Code's own words in the user's place (a skill's prompt, hook
                    // context, the compaction summary).
                    let text = o.get("message").map(|m| content_text(m.get("content"))).unwrap_or_default();
                    self.said(ts, sub, Who::Harness, &text);
                    self.tick(ts);
                } else {
                    let decision = o.get("permissionDecision").cloned();
                    let before = self.events.len();
                    self.user(o.get("message"), ts, sub, o.get("toolUseResult"), |_| decision.clone());
                    if !sub {
                        self.rewind_at(o, ts, before);
                    }
                }
            }
            "progress" => {
                // Older versions copy a running subagent's messages into the session file.
                let data = o.get("data").and_then(Value::as_object);
                match data.filter(|d| str_of(d, "type") == "agent_progress").and_then(|d| d.get("message")) {
                    Some(Value::Object(inner)) => {
                        let its = inner.get("timestamp").and_then(Value::as_str).or(ts);
                        self.start_line(
                            inner.get("uuid"),
                            o.get("parentToolUseID"),
                            data.and_then(|d| d.get("agentId")),
                        );
                        match str_of(inner, "type") {
                            "assistant" => self.assistant(inner.get("message"), its, true, false),
                            "user" => self.user(inner.get("message"), its, true, inner.get("toolUseResult"), |_| None),
                            _ => self.tick(ts),
                        }
                    }
                    _ => self.tick(ts),
                }
            }
            "system" if !sub && str_of(o, "subtype") == "turn_duration" => self.push(ts, false, What::Boundary),
            "system" if str_of(o, "subtype") == "local_command" => {
                // A slash command the person ran outside the conversation, and its output.
                let text = str_of(o, "content");
                let who = if text.trim_start().starts_with("<command-") { Who::Human } else { Who::Harness };
                self.said(ts, sub, who, text);
                self.tick(ts);
            }
            "api-request-shape" => {
                // What the model was sent as its system prompt, block by block; said
                // again only when it changed.
                let blocks = o.get("shape").and_then(|s| s.get("system"));
                let blocks: Vec<String> = match blocks {
                    Some(Value::String(s)) => vec![s.clone()],
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|b| b.as_str().or_else(|| b.get("text").and_then(Value::as_str)).unwrap_or(""))
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                };
                if !blocks.is_empty() && blocks != self.system {
                    for b in &blocks {
                        self.said(ts, sub, Who::System, b);
                    }
                    self.system = blocks;
                }
                self.tick(ts);
            }
            "attachment" => {
                let att = o.get("attachment").and_then(Value::as_object);
                // A prompt the person typed while the agent worked, folded into the
                // running turn (no user line is written for it).
                let typed = att.filter(|a| {
                    !sub && str_of(a, "type") == "queued_command"
                        && str_of(a, "commandMode") == "prompt"
                        // `peer` (another session's message), `auto-continuation`: not a person.
                        && a.get("origin").and_then(|x| x.get("kind")).and_then(Value::as_str).unwrap_or("human") == "human"
                        && a.get("isMeta").and_then(Value::as_bool) != Some(true)
                        && o.get("isMeta").and_then(Value::as_bool) != Some(true)
                });
                match typed.map(|a| content_text(a.get("prompt"))) {
                    Some(p) => self.user_text(&p, ts, false, true),
                    None => {
                        // Context Claude Code adds to the conversation (environment, reminders,
                        // hook output), as the model was sent it.
                        let rendered = o.get("rendered").and_then(Value::as_array);
                        let text: Vec<String> =
                            rendered.into_iter().flatten().map(|r| content_text(r.get("content"))).collect();
                        self.said(ts, sub, Who::Harness, &text.join("\n"));
                        self.tick(ts);
                    }
                }
            }
            "cost-state" => {
                if let Some(usd) = o.get("totalCostUSD").and_then(Value::as_f64) {
                    let version = self.versions.last().cloned();
                    self.cost_states.push(CostState {
                        start: o.get("startTime").and_then(Value::as_i64),
                        usd,
                        version,
                    });
                }
            }
            _ => self.tick(ts),
        }
    }

    /// When the user line just read (its events from `first`) is a typed prompt whose
    /// parent an earlier prompt of another time already had, the person rewound the
    /// conversation to that earlier prompt: a [`What::Rewind`] goes before this one.
    /// Claude Code writes no record of a rewind; the fork is its only trace (both
    /// branches stay in the file). A line without `parentUuid` says nothing of forks.
    fn rewind_at(&mut self, o: &Map<String, Value>, ts: Option<&str>, first: usize) {
        let parent = match o.get("parentUuid") {
            Some(Value::String(p)) => Some(p.clone()),
            Some(Value::Null) => None,
            _ => return,
        };
        let new = &self.events[first..];
        let Some(at) = new.iter().position(|e| matches!(e.what, What::Person { mid_turn: false, .. })) else { return };
        let key = new.iter().find_map(|e| match &e.what {
            What::Said(Said { who: Who::Human, key: Some(key), .. }) => Some(key.clone()),
            _ => None,
        });
        let Some(key) = key else { return };
        let ts = ts.map(str::to_string);
        match self.prompts.get(&parent) {
            Some((earlier_ts, since)) if *earlier_ts != ts => {
                let since = since.clone();
                self.events.insert(first + at, Ev { ts: ts.clone(), sub: false, what: What::Rewind { since } });
                self.prompts.insert(parent, (ts, key));
            }
            Some(_) => {}
            None => {
                self.prompts.insert(parent, (ts, key));
            }
        }
    }

    pub(super) fn assistant(&mut self, message: Option<&Value>, ts: Option<&str>, sub: bool, api_error: bool) {
        let Some(m) = message.and_then(Value::as_object) else {
            return self.tick(ts);
        };
        let model = str_of(m, "model");
        let synthetic = api_error || model == "<synthetic>";
        if !synthetic && !model.is_empty() {
            self.models.push((model.to_string(), sub));
        }
        if let (Some(id), Some(u)) = (m.get("id").and_then(Value::as_str), m.get("usage").and_then(Value::as_object)) {
            if !synthetic {
                let (tin, tout) = usage_pair(u);
                self.usage.push((id.to_string(), tin, tout));
                let n = |k: &str| u.get(k).and_then(Value::as_i64).unwrap_or(0);
                self.cache_usage.push((id.to_string(), n("cache_read_input_tokens"), n("cache_creation_input_tokens")));
            }
        }
        let before = self.events.len();
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
        let id = m.get("id").and_then(Value::as_str);
        for b in &blocks {
            let Some(b) = b.as_object() else { continue };
            match str_of(b, "type") {
                "text" => {
                    let text = str_of(b, "text");
                    if synthetic {
                        self.said(ts, sub, Who::Synthetic, text);
                        if !sub {
                            self.push(ts, false, What::ApiError(text.to_string()));
                        }
                    } else if !text.trim().is_empty() {
                        self.said_by(ts, sub, Who::Assistant, text, Some(model), id);
                        self.push(ts, sub, What::Text(text.to_string()));
                    }
                }
                "thinking" if !synthetic => {
                    self.said_by(ts, sub, Who::Thinking, str_of(b, "thinking"), Some(model), id);
                }
                "tool_use" => {
                    if !synthetic {
                        self.said_by(ts, sub, Who::Calls, "", Some(model), id);
                    }
                    let id = str_of(b, "id").to_string();
                    let name = str_of(b, "name").to_string();
                    let input = b.get("input").cloned().unwrap_or(Value::Null);
                    let agent = if sub { Some(self.line.agent.clone().unwrap_or_default()) } else { None };
                    self.push(ts, sub, What::Call { id, name, input, agent });
                }
                _ => {}
            }
        }
        if !sub && str_of(m, "stop_reason") == "end_turn" {
            self.push(ts, false, What::EndTurn);
        }
        if self.events.len() == before {
            self.tick(ts);
        }
    }

    pub(super) fn user(
        &mut self,
        message: Option<&Value>,
        ts: Option<&str>,
        sub: bool,
        structured: Option<&Value>,
        decision: impl Fn(&str) -> Option<Value>,
    ) {
        let Some(m) = message.and_then(Value::as_object) else {
            return self.tick(ts);
        };
        let blocks = match m.get("content") {
            Some(Value::String(s)) => return self.user_text(s, ts, sub, false),
            Some(Value::Array(a)) => a,
            _ => return self.tick(ts),
        };
        // `toolUseResult` belongs to the line; it is a result's only when the line has one.
        let single =
            blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")).count() == 1;
        let mut ids = Vec::new();
        let mut texts = Vec::new();
        for b in blocks.iter().filter_map(Value::as_object) {
            match str_of(b, "type") {
                "tool_result" => {
                    let id = str_of(b, "tool_use_id").to_string();
                    let res = Res {
                        text: content_text(b.get("content")),
                        is_error: b.get("is_error").and_then(Value::as_bool) == Some(true),
                        structured: if single { structured.cloned() } else { None },
                        ts: ts.map(str::to_string),
                        decision: decision(&id),
                    };
                    // A subagent's result may be in its file and in a progress copy: the first kept.
                    self.results.entry(id.clone()).or_insert(res);
                    ids.push(id);
                }
                "text" => texts.push(str_of(b, "text").to_string()),
                _ => {}
            }
        }
        if !ids.is_empty() {
            self.push(ts, sub, What::Results(ids));
        }
        for t in texts {
            self.user_text(&t, ts, sub, false);
        }
        if blocks.is_empty() {
            self.tick(ts);
        }
    }

    /// A user line's text, sorted into what a person did and what the tool wrote.
    fn user_text(&mut self, text: &str, ts: Option<&str>, sub: bool, mid_turn: bool) {
        let t = text.trim_start();
        if sub || t.is_empty() {
            // A subagent's "user" is the agent that called it.
            let harness = HARNESS.iter().any(|p| t.starts_with(p)) || t.starts_with("[Request interrupted by user");
            self.said(ts, sub, if harness { Who::Harness } else { Who::SubPrompt }, text);
            return self.tick(ts);
        }
        if t.starts_with("[Request interrupted by user") {
            self.said(ts, false, Who::Harness, text);
            return self.push(ts, false, What::Abort(t.to_string()));
        }
        if t.starts_with("<bash-input>") {
            self.said(ts, false, Who::Human, text);
            let command = between(t, "<bash-input>", "</bash-input>").to_string();
            return self.push(ts, false, What::PersonShell { command, output: None });
        }
        if t.starts_with("<bash-stdout>") || t.starts_with("<bash-stderr>") {
            if let Some(Ev { what: What::PersonShell { output, .. }, .. }) = self.events.last_mut() {
                let out = between(t, "<bash-stdout>", "</bash-stdout>");
                let err = between(t, "<bash-stderr>", "</bash-stderr>");
                *output = Some([out, err].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join("\n"));
            }
            self.said(ts, false, Who::Harness, text);
            return self.tick(ts);
        }
        if t.starts_with("<task-notification>") {
            // The harness starts a turn of its own (a background task finished).
            self.said(ts, false, Who::Harness, text);
            return self.push(ts, false, What::Boundary);
        }
        if t.starts_with("<command-") {
            // A slash command the person typed (with its arguments).
            self.said(ts, false, Who::Human, text);
            return self.push(ts, false, What::Command);
        }
        if HARNESS.iter().any(|p| t.starts_with(p)) {
            self.said(ts, false, Who::Harness, text);
            return self.tick(ts);
        }
        self.said(ts, false, Who::Human, text);
        self.push(ts, false, What::Person { text: text.to_string(), mid_turn });
    }
}

/// How the text Claude Code writes in the user's place begins.
const HARNESS: [&str; 8] = [
    "<local-command-",
    "<agent-message",
    "<channel",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<user-memory-input>",
    "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
];

/// `input_tokens` counts only what was not read from or written to the prompt cache;
/// every token the model read is the sum of the three.
pub(super) fn usage_pair(u: &Map<String, Value>) -> (i64, i64) {
    let n = |k: &str| u.get(k).and_then(Value::as_i64).unwrap_or(0);
    (n("input_tokens") + n("cache_creation_input_tokens") + n("cache_read_input_tokens"), n("output_tokens"))
}

/// A tool result's (or message's) content as text: a string, or its blocks' text
/// joined by newlines, an image noted as `[image]`.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|b| match b.get("type").and_then(Value::as_str) {
                Some("image") => Some("[image]"),
                _ => b.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A slash command typed without arguments (`/model`, `/mcp`): not the task.
pub(super) fn bare_command(text: &str) -> bool {
    text.trim_start().starts_with("<command-") && between(text, "<command-args>", "</command-args>").is_empty()
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    let Some(start) = text.find(open).map(|i| i + open.len()) else {
        return "";
    };
    let rest = &text[start..];
    rest.find(close).map_or(rest, |end| &rest[..end]).trim()
}
