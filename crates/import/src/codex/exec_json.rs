//! `codex exec --json` output: thread events (`thread.started`, `turn.*`, `item.*`;
//! older `session.created` and `item_type`), or the oldest raw protocol events, which
//! are read like a rollout's. One or more files of one thread, in file-name order (the
//! output carries no timestamps to order them by).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::recorder::{Grade, Message, Role};
use crate::{Part, Recorder, Refusal};

use super::calls::{self, Spec};
use super::index::{self, item_type, patch_of, Norm};
use super::rollout;
use super::sink::{Pending, Sink};
use super::{i64_of, id_in, obj, str_of, File, Seen, Shape};

pub(super) fn read(files: Vec<File>) -> Result<Recorder, Refusal> {
    let id = files.iter().flat_map(|f| f.lines.iter()).find_map(|l| id_in(&l.v)).ok_or_else(|| {
        let f = &files[0];
        f.input.refuse(
            Some(format!("line {}", f.lines[0].n)),
            "no thread id: expected a `thread.started` (or `session.created`, `session_configured`) event",
        )
    })?;
    let mut rec = Recorder::new(crate::codex::FORMAT, id);
    rec.record_messages();
    for f in &files {
        rec.source(&f.input.file_name(), &f.input.blake3()?, Part::Whole, f.bytes.clone())?;
    }
    if files.len() > 1 {
        rec.note(format!("{} codex exec --json outputs of one thread joined in file-name order", files.len()));
    }
    let marked = files.iter().flat_map(|f| f.lines.iter()).any(|l| {
        let ty = str_of(&l.v, &["type"]);
        let msg_ty = obj(&l.v, "msg").and_then(|m| str_of(m, &["type"]));
        // Marking starts marks ends: a file cut before its `turn.completed` has a turn
        // that never ended.
        matches!(ty, Some("turn.started" | "turn.completed"))
            || matches!(msg_ty, Some("task_started" | "task_complete" | "turn_started" | "turn_complete"))
    });
    let mut sink = Sink::new(rec, marked);
    for f in &files {
        match f.shape {
            Shape::LegacyExec => {
                let items: Vec<Norm> = f.lines.iter().map(index::normalise).collect();
                let ix = index::build(&items);
                rollout::describe(&mut sink, None, &items);
                rollout::walk(&items, &ix, &mut sink);
            }
            _ => thread_events(f, &mut sink),
        }
    }
    if files.iter().all(|f| f.shape == Shape::Exec) {
        sink.rec.note("codex exec --json names no model, working directory or timestamps");
    }
    Ok(sink.finish())
}

/// A completed item by id, so a call is recorded at `item.started` with its result.
fn completed_items(f: &File) -> HashMap<&str, &Map<String, Value>> {
    let mut done = HashMap::new();
    for l in &f.lines {
        if str_of(&l.v, &["type"]) == Some("item.completed") {
            if let Some(item) = obj(&l.v, "item") {
                done.insert(str_of(item, &["id"]).unwrap_or(""), item);
            }
        }
    }
    done
}

fn thread_events(f: &File, sink: &mut Sink) {
    let done = completed_items(f);
    let mut seen = Seen::default();
    for l in &f.lines {
        let v = &l.v;
        match str_of(v, &["type"]).unwrap_or("") {
            "thread.started" | "session.created" => {
                if let Some(m) = str_of(v, &["model"]) {
                    sink.model(m);
                }
            }
            "turn.started" => sink.turn_started(None),
            "turn.completed" => {
                // `usage` is the thread's running total, so the last one is the run's.
                if let Some(u) = obj(v, "usage") {
                    if let Some(i) = i64_of(u, &["input_tokens"]) {
                        sink.total_tokens(i, i64_of(u, &["output_tokens"]).unwrap_or(0));
                    }
                }
                sink.turn_complete(None, None);
            }
            "turn.failed" | "error" => sink.error(None, "infra_error"),
            "item.started" | "item.completed" => {
                let Some(item) = obj(v, "item") else { continue };
                let id = str_of(item, &["id"]).unwrap_or("");
                let item = done.get(id).copied().unwrap_or(item);
                thread_item(item, str_of(v, &["type"]) == Some("item.completed"), sink, &mut seen);
            }
            _ => {}
        }
    }
}

/// One item, recorded once (at its start when the output shows one): the agent's words
/// and thinking when completed, a call with what its completed item shows (the output
/// of a command that ran, an MCP tool's result).
fn thread_item(item: &Map<String, Value>, completed: bool, sink: &mut Sink, seen: &mut Seen) {
    let id = str_of(item, &["id"]).unwrap_or("");
    let status = str_of(item, &["status"]).map(|s| s.to_ascii_lowercase());
    let ended = !matches!(status.as_deref(), Some("in_progress") | Some("declined"));
    let field = |key: &str| item.get(key).filter(|v| !v.is_null()).map(|v| json!({ key: v }));
    let pending = match item_type(item) {
        "agent_message" | "assistant_message" if completed => {
            let text = str_of(item, &["text"]).unwrap_or_default();
            sink.say(Message::assistant(text));
            sink.agent_message(None, text);
            return;
        }
        "reasoning" if completed => {
            sink.say(Message::new(Role::Assistant).reasoning(str_of(item, &["text"]).unwrap_or_default()));
            return;
        }
        "command_execution" => {
            let command = item.get("command").and_then(calls::command_text).unwrap_or_default();
            let argv = item.get("command").and_then(Value::as_array);
            let mut p = Pending::new(None, "shell", command.clone(), calls::shell_or_patch(command, argv));
            p.exit = i64_of(item, &["exit_code", "exitCode"]).map(|c| (c, Grade::Observed));
            let output = str_of(item, &["aggregated_output", "aggregatedOutput"]);
            p.output = output.unwrap_or_default().to_string();
            p.printed = output.filter(|_| ended).map(str::to_string);
            p.declined = status.as_deref() == Some("declined");
            p.arguments(field("command"))
        }
        "file_change" => {
            let patch = patch_of(item);
            let mut p = Pending::new(None, "edit", "", Spec::Patch(String::new()));
            p.changes = Some(patch.changes);
            p.success = patch.success;
            p.declined = patch.declined;
            p.is_error = patch.success.map(|ok| !ok);
            p.raw_changes = patch.raw_changes;
            p.arguments(field("changes"))
        }
        "mcp_tool_call" => {
            let name =
                format!("{}.{}", str_of(item, &["server"]).unwrap_or("mcp"), str_of(item, &["tool"]).unwrap_or("tool"));
            let args = item.get("arguments").map(calls::compact).unwrap_or_default();
            let mut p = Pending::new(None, name, args, Spec::Opaque);
            let error = item.get("error").filter(|e| !e.is_null());
            if status.as_deref() == Some("failed") || error.is_some() {
                p.failure = Some("other");
                p.is_error = Some(true);
            }
            if let Some((text, is_error)) = item.get("result").filter(|r| !r.is_null()).and_then(calls::mcp_result_text)
            {
                p.printed = Some(text);
                p.is_error = p.is_error.or(Some(is_error));
            } else if let Some(message) = error.and_then(|e| e.get("message")).and_then(Value::as_str) {
                p.printed = Some(message.to_string());
            }
            p.arguments(item.get("arguments").cloned())
        }
        "web_search" => {
            let query = str_of(item, &["query"]).unwrap_or_default();
            Pending::new(None, "web_search", query, Spec::Tool("search", Vec::new())).arguments(field("query"))
        }
        "todo_list" => {
            let items = item.get("items").map(calls::compact).unwrap_or_default();
            Pending::new(None, "todo_list", items, Spec::Tool("plan", Vec::new())).arguments(field("items"))
        }
        "collab_tool_call" => {
            let tool = str_of(item, &["tool"]).unwrap_or("collab_tool");
            let prompt = str_of(item, &["prompt"]).unwrap_or_default();
            Pending::new(None, tool, prompt, Spec::Tool("other", Vec::new())).arguments(field("prompt"))
        }
        // Non-fatal `error` items, plans, and kinds newer versions add.
        _ => return,
    };
    if seen.first(id) {
        sink.call(pending.id(id));
    }
}
