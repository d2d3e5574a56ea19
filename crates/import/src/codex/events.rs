//! A rollout's `event_msg` payloads (and the oldest exec output's events): turn marks,
//! people, usage and diffs, and, in a log without response items, the calls themselves.

use serde_json::{json, Map, Value};

use crate::recorder::{Grade, Message, Role};

use super::calls::{self, Spec};
use super::index::{self, exec_of, item_type, patch_of, Index, People};
use super::sink::{Pending, Sink};
use super::{content_text, obj, str_of, tool_written, Seen};

/// A user message's record: a person's, or the harness's (Codex's own blocks).
fn user_said(text: &str, plain: bool) -> Message {
    if plain && !tool_written(text) {
        Message::human(text)
    } else {
        Message::harness(text)
    }
}

pub(super) fn event(
    p: &Map<String, Value>,
    ts: Option<&str>,
    tokens: Option<(i64, i64)>,
    ix: &Index,
    sink: &mut Sink,
    seen: &mut Seen,
) {
    let ty = str_of(p, &["type"]).unwrap_or("");
    let id = str_of(p, &["call_id"]).unwrap_or("");
    let with_tokens = |m: Message| match tokens {
        Some((i, o)) => m.tokens(Some(i), Some(o)),
        None => m,
    };
    match ty {
        "user_message" if ix.people == People::Events => {
            let text = str_of(p, &["message"]).unwrap_or_default();
            let plain = str_of(p, &["kind"]).is_none_or(|k| k == "plain");
            // A log without response items says what was said in its events.
            if !ix.responses {
                sink.say(user_said(text, plain).ts(ts));
            }
            if plain && !tool_written(text) {
                sink.person_message(ts, text);
            }
        }
        "agent_message" if !ix.responses => {
            let text = str_of(p, &["message"]).unwrap_or_default();
            if !ix.agent_items {
                sink.say(with_tokens(Message::assistant(text)).ts(ts));
            }
            sink.agent_message(ts, text);
        }
        "agent_reasoning" if !ix.responses && !ix.reasoning_items => {
            let text = str_of(p, &["text"]).unwrap_or_default();
            sink.say(with_tokens(Message::new(Role::Assistant).reasoning(text)).ts(ts));
        }
        "task_started" | "turn_started" => sink.turn_started(ts),
        "task_complete" | "turn_complete" => sink.turn_complete(ts, str_of(p, &["last_agent_message"])),
        "turn_aborted" => {
            let reason = str_of(p, &["reason"]).unwrap_or("interrupted");
            if reason != "review_ended" {
                sink.abort(ts, &format!("turn aborted: {reason}"));
            }
        }
        "token_count" => run_tokens(p, sink),
        "turn_diff" => sink.turn_diff(str_of(p, &["unified_diff"]).unwrap_or_default()),
        "error" => sink.error(ts, error_stop(p)),
        "session_configured" | "thread_settings_applied" => {
            let settings = obj(p, "thread_settings").unwrap_or(p);
            if let Some(m) = str_of(settings, &["model"]) {
                sink.model(m);
            }
        }
        "item_started" | "item_completed" => {
            if let Some(item) = obj(p, "item") {
                turn_item(item, ty == "item_started", ts, ix, sink, seen);
            }
        }
        "exec_command_begin" | "exec_command_end" => {
            let e = exec_of(p);
            let by_person = e.source.as_deref() == Some("user_shell");
            if by_person && !ix.shell_messages && seen.first(id) {
                let e = ix.exec.get(id).cloned().unwrap_or(e);
                let command = shell_script(&e);
                sink.person_command(ts, &command, e.output.as_deref().unwrap_or_default(), e.exit);
            } else if !by_person && !ix.responses && seen.first(id) {
                let e = ix.exec.get(id).cloned().unwrap_or(e);
                let command = e.command.clone().unwrap_or_default();
                let spec = calls::shell_or_patch(command.clone(), e.argv.as_ref());
                let call = Pending::new(ts.map(str::to_string), "shell", command, spec).id(id);
                sink.call(events_call(call.arguments(command_arguments(&e)), id, ix));
            }
        }
        "patch_apply_begin" | "patch_apply_end" if !ix.responses && seen.first(id) => {
            let changes = ix.patch.get(id).and_then(|p| p.raw_changes.clone());
            let call = Pending::new(ts.map(str::to_string), "edit", "", Spec::Patch(String::new())).id(id);
            sink.call(events_call(call.arguments(changes.map(|c| json!({ "changes": c }))), id, ix));
        }
        "mcp_tool_call_begin" | "mcp_tool_call_end" if !ix.responses && seen.first(id) => {
            let inv = obj(p, "invocation");
            let name = format!(
                "{}.{}",
                inv.and_then(|i| str_of(i, &["server"])).unwrap_or("mcp"),
                inv.and_then(|i| str_of(i, &["tool"])).unwrap_or("tool")
            );
            let arguments = inv.and_then(|i| i.get("arguments")).cloned();
            let args = arguments.as_ref().map(calls::compact).unwrap_or_default();
            let call = Pending::new(ts.map(str::to_string), name, args, Spec::Opaque).id(id).arguments(arguments);
            sink.call(events_call(call, id, ix));
        }
        "web_search_begin" | "web_search_end" if !ix.responses && seen.first(id) => {
            let query = str_of(p, &["query"]).unwrap_or_default();
            let call = Pending::new(ts.map(str::to_string), "web_search", query, Spec::Tool("search", Vec::new()));
            sink.call(call.id(id).arguments(p.get("query").map(|q| json!({ "query": q }))));
        }
        "plan_update" if !ix.responses => {
            let command = calls::compact(&Value::Object(p.clone()));
            let call = Pending::new(ts.map(str::to_string), "update_plan", command, Spec::Tool("plan", Vec::new()));
            sink.call(call.arguments(Some(Value::Object(p.clone()))));
        }
        "view_image_tool_call" if !ix.responses && seen.first(id) => {
            let path = str_of(p, &["path"]).map(|s| vec![s.to_string()]).unwrap_or_default();
            let call = Pending::new(ts.map(str::to_string), "view_image", "", Spec::Tool("read", path));
            sink.call(call.id(id).arguments(p.get("path").map(|q| json!({ "path": q }))));
        }
        "exec_approval_request" | "apply_patch_approval_request" if !ix.responses => {
            // Asked, and the call never ran: refused, the answer not shown.
            let ran =
                ix.exec.get(id).is_some_and(|e| e.exit.is_some() || e.output.is_some()) || ix.patch.contains_key(id);
            if !ran && seen.first(id) {
                let command = p.get("command").and_then(calls::command_text).unwrap_or_default();
                let mut call = Pending::new(ts.map(str::to_string), "shell", command.clone(), Spec::Shell(command));
                call.declined = true;
                let person = sink.person_reviews;
                sink.person_reviews = false;
                sink.call(call);
                sink.person_reviews = person;
                sink.rec.note("an approval request the log does not show answered was recorded as refused");
            }
        }
        _ => sink.rec.saw_time(ts),
    }
}

/// The arguments of a command the events show: its argv (or string) as the log gives it.
fn command_arguments(e: &index::Exec) -> Option<Value> {
    let command = e.argv.clone().map(Value::Array).or_else(|| e.command.clone().map(Value::String))?;
    Some(json!({ "command": command }))
}

/// A call read from the events alone (no response items): its end event's results.
/// What it printed is the end event's output (a command's, a patch's, an MCP tool's),
/// once the call ended.
fn events_call(mut p: Pending, id: &str, ix: &Index) -> Pending {
    if let Some(e) = ix.exec.get(id) {
        p.exit = e.exit.map(|c| (c, Grade::Observed));
        p.duration_ms = e.duration_ms;
        p.output = e.output.clone().unwrap_or_default();
        p.declined |= e.status.as_deref() == Some("declined");
        if e.exit.is_some() || e.output.is_some() {
            p.printed = Some(p.output.clone());
        }
    }
    if let Some(patch) = ix.patch.get(id) {
        p.changes = Some(patch.changes.clone());
        p.success = patch.success;
        p.declined |= patch.declined;
        p.output = patch.output.clone().unwrap_or_default();
        p.raw_changes = patch.raw_changes.clone();
        p.is_error = patch.success.map(|ok| !ok);
        if patch.success.is_some() || patch.output.is_some() {
            p.printed = Some(p.output.clone());
        }
    }
    if let Some((text, error)) = ix.mcp_output.get(id) {
        p.printed = Some(text.clone());
        p.is_error = Some(*error);
    }
    if ix.mcp_failed.contains(id) {
        p.failure = Some("other");
    }
    p.approved = ix.approvals.contains(id) && !p.declined;
    p
}

/// The script a person's command ran: `bash -lc X` is X as they typed it.
fn shell_script(e: &index::Exec) -> String {
    if let Some(argv) = &e.argv {
        let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
        if let [_, flag, script] = words.as_slice() {
            if flag.starts_with('-') {
                return script.to_string();
            }
        }
    }
    e.command.clone().unwrap_or_default()
}

/// A newest-shape `item_started` / `item_completed`: people's messages, and, in a log
/// without response items, the calls themselves.
fn turn_item(item: &Map<String, Value>, started: bool, ts: Option<&str>, ix: &Index, sink: &mut Sink, seen: &mut Seen) {
    let id = str_of(item, &["id"]).unwrap_or("");
    match item_type(item) {
        "UserMessage" | "userMessage" if !started && ix.people == People::Items => {
            let text = content_text(item.get("content"));
            if !ix.responses {
                sink.say(user_said(&text, true).ts(ts));
            }
            if !tool_written(&text) {
                sink.person_message(ts, &text);
            }
        }
        "AgentMessage" | "agentMessage" if !started && !ix.responses => {
            let text = content_text(item.get("content"));
            sink.say(Message::assistant(&text).ts(ts));
            sink.agent_message(ts, &text);
        }
        "Reasoning" | "reasoning" if !started && !ix.responses => {
            // `raw_content` where the log keeps it, else `summary_text`.
            let texts = |key: &str| -> Vec<String> {
                let parts = item.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                parts
                    .iter()
                    .filter_map(|p| p.as_str().or(p.get("text").and_then(Value::as_str)))
                    .map(str::to_string)
                    .collect()
            };
            let raw = texts("raw_content");
            for text in if raw.is_empty() { texts("summary_text") } else { raw } {
                sink.say(Message::new(Role::Assistant).reasoning(text).ts(ts));
            }
        }
        "CommandExecution" | "commandExecution" => {
            let e = ix.exec.get(id).cloned().unwrap_or_else(|| exec_of(item));
            if e.source.as_deref() == Some("user_shell") {
                if !ix.shell_messages && seen.first(id) {
                    sink.person_command(ts, &shell_script(&e), e.output.as_deref().unwrap_or_default(), e.exit);
                }
            } else if !ix.responses && seen.first(id) {
                let command = e.command.clone().unwrap_or_default();
                let spec = calls::shell_or_patch(command.clone(), e.argv.as_ref());
                let call = Pending::new(ts.map(str::to_string), "shell", command, spec).id(id);
                sink.call(events_call(call.arguments(command_arguments(&e)), id, ix));
            }
        }
        "FileChange" | "fileChange" if !ix.responses && seen.first(id) => {
            let p = ix.patch.get(id).cloned().unwrap_or_else(|| patch_of(item));
            let mut call = Pending::new(ts.map(str::to_string), "edit", "", Spec::Patch(String::new())).id(id);
            call.arguments = p.raw_changes.clone().map(|c| json!({ "changes": c }));
            call.changes = Some(p.changes);
            call.success = p.success;
            call.declined = p.declined;
            call.is_error = p.success.map(|ok| !ok);
            call.raw_changes = p.raw_changes;
            if call.success.is_some() || p.output.is_some() {
                call.printed = Some(p.output.unwrap_or_default());
            }
            sink.call(call);
        }
        _ => sink.rec.saw_time(ts),
    }
}

/// `token_count`: the cumulative `info.total_token_usage` (the last is the run's), or
/// the oldest bare per-response usage (summed).
fn run_tokens(p: &Map<String, Value>, sink: &mut Sink) {
    let pair = |u: &Map<String, Value>| {
        Some((u.get("input_tokens")?.as_i64()?, u.get("output_tokens").and_then(Value::as_i64).unwrap_or(0)))
    };
    if let Some(total) = obj(p, "info").and_then(|i| obj(i, "total_token_usage")) {
        if let Some((i, o)) = pair(total) {
            sink.total_tokens(i, o);
            // `cached_input_tokens` is the part of `input_tokens` read from the cache.
            sink.total_cached(total.get("cached_input_tokens").and_then(Value::as_i64));
        }
    } else if !p.contains_key("info") {
        if let Some((i, o)) = pair(p) {
            sink.add_tokens(i, o);
        }
    }
}

/// Codex's error kinds for a limit reached; any other error ends the run as an error.
fn error_stop(p: &Map<String, Value>) -> &'static str {
    let kind = match p.get("codex_error_info") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => o.keys().next().cloned().unwrap_or_default(),
        _ => String::new(),
    };
    if matches!(kind.as_str(), "context_window_exceeded" | "usage_limit_exceeded") {
        "budget_exhausted"
    } else {
        "infra_error"
    }
}
