//! The first pass over a rollout (or the oldest exec output): every line as one kind of
//! item, and what the event stream observed about each call id, so the second pass can
//! record a call where it starts with the results logged after it.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::calls;
use super::{content_text, i64_of, is_legacy_config, is_legacy_prompt, obj, reasoning_parts, str_of, Line};
use crate::common::apply_patch::Change;

/// One line as the rollout's layers name it.
pub(super) enum Item<'a> {
    /// `session_meta` payload, or the old first line.
    Meta(&'a Map<String, Value>),
    /// A response item (`payload` of `response_item`, or a bare item in old rollouts).
    Response(&'a Map<String, Value>),
    /// An `event_msg` payload, or the `msg` of the oldest exec output's events.
    Event(&'a Map<String, Value>),
    TurnContext(&'a Map<String, Value>),
    /// The oldest exec output's config summary and prompt lines.
    LegacyConfig(&'a Map<String, Value>),
    LegacyPrompt(&'a str),
    Skip,
}

pub(super) struct Norm<'a> {
    pub ts: Option<&'a str>,
    pub item: Item<'a>,
}

pub(super) fn normalise(line: &Line) -> Norm<'_> {
    let v = &line.v;
    let ts = str_of(v, &["timestamp"]);
    let item = match (v.get("type").and_then(Value::as_str), obj(v, "payload")) {
        (Some("session_meta"), Some(p)) => Item::Meta(p),
        (Some("response_item"), Some(p)) => Item::Response(p),
        (Some("event_msg"), Some(p)) => Item::Event(p),
        (Some("turn_context"), Some(p)) => Item::TurnContext(p),
        // `compacted`, `world_state`, usage records, and kinds newer versions add.
        (Some(_), Some(_)) => Item::Skip,
        (Some(_), None) => Item::Response(v),
        (None, _) => {
            if let Some(msg) = obj(v, "msg") {
                Item::Event(msg)
            } else if v.contains_key("record_type") {
                Item::Skip
            } else if is_legacy_prompt(v) {
                Item::LegacyPrompt(str_of(v, &["prompt"]).unwrap_or_default())
            } else if is_legacy_config(v) {
                Item::LegacyConfig(v)
            } else if v.contains_key("id") && v.contains_key("timestamp") {
                Item::Meta(v)
            } else {
                Item::Skip
            }
        }
    };
    Norm { ts, item }
}

/// What an exec event or command item observed about one command.
#[derive(Debug, Clone, Default)]
pub(super) struct Exec {
    pub exit: Option<i64>,
    pub duration_ms: Option<f64>,
    pub output: Option<String>,
    pub status: Option<String>,
    pub source: Option<String>,
    pub command: Option<String>,
    pub argv: Option<Vec<Value>>,
}

/// What a patch event or file-change item observed about one patch.
#[derive(Debug, Clone, Default)]
pub(super) struct Patch {
    pub changes: Vec<(String, Change)>,
    pub success: Option<bool>,
    pub declined: bool,
    pub output: Option<String>,
    /// The `changes` as the log gives them (diffs, contents), for the call's diff.
    pub raw_changes: Option<Value>,
}

/// Which stream holds the people's messages: one of them only, so a message the log
/// shows twice (as an event and as a response item) is counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum People {
    /// `item_completed` items of type `UserMessage` (newest).
    Items,
    /// `event_msg` `user_message`.
    Events,
    /// Response items with role user (old rollouts, which have no events).
    Responses,
}

pub(super) struct Index<'a> {
    pub outputs: HashMap<&'a str, (Option<&'a str>, &'a Value)>,
    pub exec: HashMap<&'a str, Exec>,
    pub patch: HashMap<&'a str, Patch>,
    pub mcp_failed: HashSet<&'a str>,
    pub approvals: HashSet<&'a str>,
    pub people: People,
    /// The log has response items: they are the tool calls (else the events are).
    pub responses: bool,
    /// People's shell commands appear as `<user_shell_command>` messages.
    pub shell_messages: bool,
    /// The log marks turn ends.
    pub marked: bool,
    /// What an MCP tool returned (its text, and whether it was an error), by call id.
    pub mcp_output: HashMap<&'a str, (String, bool)>,
    /// Per-response usage (`token_count` `last_token_usage`), by the position of the
    /// assistant message (or thinking) that response ended with.
    pub tokens: HashMap<usize, (i64, i64)>,
    /// In a log without response items, the agent's words and thinking come from
    /// `item_completed` items when it has any, else from the events.
    pub agent_items: bool,
    pub reasoning_items: bool,
}

pub(super) fn item_type(item: &Map<String, Value>) -> &str {
    str_of(item, &["type", "item_type"]).unwrap_or("")
}

/// An exec event or a `CommandExecution` item (snake or camel case fields).
pub(super) fn exec_of(p: &Map<String, Value>) -> Exec {
    let cmd = p.get("command");
    Exec {
        exit: i64_of(p, &["exit_code", "exitCode"]),
        duration_ms: calls::duration_ms(p.get("duration"))
            .or_else(|| p.get("duration_ms").or(p.get("durationMs")).and_then(Value::as_f64)),
        output: str_of(p, &["aggregated_output", "aggregatedOutput", "formatted_output", "stdout"])
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        status: str_of(p, &["status"]).map(|s| s.to_ascii_lowercase()),
        source: str_of(p, &["source"]).map(|s| s.to_ascii_lowercase()),
        command: cmd.and_then(calls::command_text),
        argv: cmd.and_then(Value::as_array).cloned(),
    }
}

/// A patch event or a `FileChange` item.
pub(super) fn patch_of(p: &Map<String, Value>) -> Patch {
    let status = str_of(p, &["status"]).map(|s| s.to_ascii_lowercase());
    let success = p.get("success").and_then(Value::as_bool).or(match status.as_deref() {
        Some("completed") => Some(true),
        Some("failed") => Some(false),
        _ => None,
    });
    let stdout = str_of(p, &["stdout"]).unwrap_or_default();
    let stderr = str_of(p, &["stderr"]).unwrap_or_default();
    let output = format!("{stdout}{stderr}");
    Patch {
        changes: p.get("changes").map(calls::structured_changes).unwrap_or_default(),
        success,
        declined: status.as_deref() == Some("declined"),
        output: (!output.is_empty()).then_some(output),
        raw_changes: p.get("changes").filter(|c| !c.is_null()).cloned(),
    }
}

fn merge_exec(into: &mut Exec, e: Exec) {
    into.exit = e.exit.or(into.exit);
    into.duration_ms = e.duration_ms.or(into.duration_ms);
    into.output = e.output.or(into.output.take());
    into.status = e.status.or(into.status.take());
    into.source = into.source.take().or(e.source);
    into.command = into.command.take().or(e.command);
    into.argv = into.argv.take().or(e.argv);
}

fn merge_patch(into: &mut Patch, p: Patch) {
    if !p.changes.is_empty() {
        into.changes = p.changes;
    }
    into.success = p.success.or(into.success);
    into.declined |= p.declined;
    into.output = p.output.or(into.output.take());
    into.raw_changes = p.raw_changes.or(into.raw_changes.take());
}

pub(super) fn build<'a>(items: &[Norm<'a>]) -> Index<'a> {
    let mut ix = Index {
        outputs: HashMap::new(),
        exec: HashMap::new(),
        patch: HashMap::new(),
        mcp_failed: HashSet::new(),
        approvals: HashSet::new(),
        people: People::Responses,
        responses: false,
        shell_messages: false,
        marked: false,
        mcp_output: HashMap::new(),
        tokens: HashMap::new(),
        agent_items: false,
        reasoning_items: false,
    };
    let (mut people_items, mut people_events) = (false, false);
    let responses = items.iter().any(|n| matches!(n.item, Item::Response(_)));
    // The last assistant message or thinking since the last per-response usage.
    let mut spoke: Option<usize> = None;
    for (i, n) in items.iter().enumerate() {
        match &n.item {
            Item::Response(p) => {
                ix.responses = true;
                let ty = item_type(p);
                match (ty, str_of(p, &["role"])) {
                    ("message", Some("assistant")) => spoke = Some(i),
                    ("reasoning", _) if !reasoning_parts(p).is_empty() => spoke = Some(i),
                    ("message", Some("user")) => spoke = None,
                    _ => {}
                }
                if matches!(ty, "function_call_output" | "custom_tool_call_output") {
                    if let (Some(id), Some(out)) = (str_of(p, &["call_id"]), p.get("output")) {
                        ix.outputs.insert(id, (n.ts, out));
                    }
                }
                if ty == "message" && str_of(p, &["role"]) == Some("user") {
                    let text = content_text(p.get("content"));
                    ix.shell_messages |= text.trim_start().starts_with("<user_shell_command>");
                }
            }
            Item::Event(p) => {
                let id = str_of(p, &["call_id"]).unwrap_or("");
                match str_of(p, &["type"]).unwrap_or("") {
                    "exec_command_begin" | "exec_command_end" => {
                        merge_exec(ix.exec.entry(id).or_default(), exec_of(p));
                    }
                    "patch_apply_begin" | "patch_apply_end" => {
                        merge_patch(ix.patch.entry(id).or_default(), patch_of(p))
                    }
                    "agent_message" | "agent_reasoning" if !responses => spoke = Some(i),
                    "user_message" if !responses => {
                        people_events = true;
                        spoke = None;
                    }
                    "token_count" => {
                        let last = obj(p, "info").and_then(|i| obj(i, "last_token_usage"));
                        let pair =
                            last.and_then(|u| Some((i64_of(u, &["input_tokens"])?, i64_of(u, &["output_tokens"])?)));
                        if let (Some(at), Some(pair)) = (spoke.take(), pair) {
                            ix.tokens.insert(at, pair);
                        }
                    }
                    "mcp_tool_call_end" => {
                        if let Some(out) = p.get("result").and_then(calls::mcp_result_text) {
                            ix.mcp_output.insert(id, out);
                        }
                        let failed = p.get("result").is_some_and(|r| {
                            r.get("Err").is_some()
                                || r.get("Ok").and_then(|ok| ok.get("isError")).and_then(Value::as_bool) == Some(true)
                        });
                        if failed {
                            ix.mcp_failed.insert(id);
                        }
                    }
                    "exec_approval_request" | "apply_patch_approval_request" => {
                        ix.approvals.insert(id);
                    }
                    "user_message" => people_events = true,
                    // A log that marks turns at all marks their ends: one cut before
                    // its `task_complete` has a turn that never ended.
                    "task_started" | "turn_started" | "task_complete" | "turn_complete" => ix.marked = true,
                    "item_started" | "item_completed" => {
                        let Some(item) = obj(p, "item") else { continue };
                        let iid = str_of(item, &["id"]).unwrap_or("");
                        match item_type(item) {
                            "UserMessage" | "userMessage" => people_items = true,
                            "AgentMessage" | "agentMessage" => ix.agent_items = true,
                            "Reasoning" | "reasoning" => ix.reasoning_items = true,
                            "CommandExecution" | "commandExecution" => {
                                merge_exec(ix.exec.entry(iid).or_default(), exec_of(item))
                            }
                            "FileChange" | "fileChange" => {
                                merge_patch(ix.patch.entry(iid).or_default(), patch_of(item))
                            }
                            "McpToolCall" | "mcpToolCall"
                                if str_of(item, &["status"]).is_some_and(|s| s.eq_ignore_ascii_case("failed")) =>
                            {
                                ix.mcp_failed.insert(iid);
                            }
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    ix.people = if people_items {
        People::Items
    } else if people_events {
        People::Events
    } else {
        People::Responses
    };
    ix
}
