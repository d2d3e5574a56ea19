//! A session rollout, old or new shape (and the oldest exec output, whose protocol
//! events are a rollout's `event_msg` payloads): the second pass, in stream order.

use serde_json::{Map, Value};

use crate::recorder::Grade;
use crate::{Format, Input, Part, Recorder, Refusal};

use super::calls::{self, Spec};
use super::events::event;
use super::index::{self, item_type, Index, Item, Norm, People};
use super::sink::{Pending, Sink};
use super::{cluster_of, content_text, obj, str_of, tool_written, Line, Seen};

pub(super) fn read(input: &Input, bytes: Vec<u8>, lines: &[Line]) -> Result<Recorder, Refusal> {
    let items: Vec<Norm> = lines.iter().map(index::normalise).collect();
    let meta = items.iter().find_map(|n| match n.item {
        Item::Meta(m) => Some(m),
        _ => None,
    });
    let id = meta.and_then(|m| str_of(m, &["id"])).ok_or_else(|| {
        input.refuse(
            Some(format!("line {}", lines[0].n)),
            "no session id: expected a `session_meta` line or the old `{\"id\", \"timestamp\"}` first line",
        )
    })?;
    let mut rec = Recorder::new(Format::Codex, id);
    rec.source(&input.file_name(), &input.blake3()?, Part::Whole, bytes)?;
    let ix = index::build(&items);
    let mut sink = Sink::new(rec, ix.marked);
    describe(&mut sink, meta, &items);
    walk(&items, &ix, &mut sink);
    Ok(sink.finish())
}

/// Who and where: the working directory, version and repository, before any record
/// (paths in records are made relative to the working directory).
pub(super) fn describe(sink: &mut Sink, meta: Option<&Map<String, Value>>, items: &[Norm]) {
    let rec = &mut sink.rec;
    let first_context = items.iter().find_map(|n| match n.item {
        Item::TurnContext(c) => Some(c),
        _ => None,
    });
    let legacy = items.iter().find_map(|n| match n.item {
        Item::LegacyConfig(c) => Some(c),
        _ => None,
    });
    let configured = items.iter().find_map(|n| match n.item {
        Item::Event(e) if str_of(e, &["type"]) == Some("session_configured") => Some(e),
        _ => None,
    });
    let cwd = meta
        .and_then(|m| str_of(m, &["cwd"]))
        .or_else(|| first_context.and_then(|c| str_of(c, &["cwd"])))
        .or_else(|| configured.and_then(|c| str_of(c, &["cwd"])))
        .or_else(|| legacy.and_then(|c| str_of(c, &["workdir"])))
        .map(str::to_string)
        .or_else(|| environment_cwd(items));
    if let Some(c) = &cwd {
        rec.workdir(c.clone());
    }
    if let Some(m) = meta {
        rec.harness_version(str_of(m, &["cli_version"]));
        rec.saw_time(str_of(m, &["timestamp"]));
        if let Some(model) = str_of(m, &["model"]) {
            rec.model(model);
        }
    }
    let remote = meta.and_then(|m| obj(m, "git")).and_then(|g| str_of(g, &["repository_url", "origin_url"]));
    if let Some(c) = cluster_of(remote, cwd.as_deref()) {
        rec.cluster(c);
    }
    if let Some(model) = legacy.and_then(|c| str_of(c, &["model"])) {
        rec.model(model);
    }
}

/// Old rollouts name the working directory only in the `<environment_context>` block
/// Codex writes as the session's first user message.
fn environment_cwd(items: &[Norm]) -> Option<String> {
    items.iter().find_map(|n| match n.item {
        Item::Response(p) if item_type(p) == "message" => {
            let text = content_text(p.get("content"));
            let start = text.find("<cwd>")? + "<cwd>".len();
            let end = text[start..].find("</cwd>")? + start;
            Some(text[start..end].trim().to_string())
        }
        _ => None,
    })
}

pub(super) fn walk(items: &[Norm], ix: &Index, sink: &mut Sink) {
    let mut seen = Seen::default();
    for n in items {
        let ts = n.ts;
        match n.item {
            Item::Meta(_) | Item::LegacyConfig(_) | Item::Skip => {}
            Item::LegacyPrompt(p) => sink.person_message(ts, p),
            Item::TurnContext(c) => {
                sink.rec.saw_time(ts);
                if let Some(m) = str_of(c, &["model"]) {
                    sink.rec.model(m);
                }
                // An automatic reviewer's denials are a policy's, not a person's.
                if let Some(r) = str_of(c, &["approvals_reviewer"]) {
                    sink.person_reviews = r == "user";
                }
            }
            Item::Response(p) => response(p, ts, ix, sink, &mut seen),
            Item::Event(p) => event(p, ts, ix, sink, &mut seen),
        }
    }
}

fn response(p: &Map<String, Value>, ts: Option<&str>, ix: &Index, sink: &mut Sink, seen: &mut Seen) {
    let id = str_of(p, &["call_id", "id"]).unwrap_or("");
    let pending = match item_type(p) {
        "message" => {
            let text = content_text(p.get("content"));
            match str_of(p, &["role"]) {
                Some("assistant") => sink.agent_message(ts, &text),
                Some("user") if text.trim_start().starts_with("<user_shell_command>") => {
                    user_shell_message(ts, &text, sink)
                }
                Some("user") if ix.people == People::Responses && !tool_written(&text) => {
                    sink.person_message(ts, &text)
                }
                _ => sink.rec.saw_time(ts),
            }
            return;
        }
        "function_call" => {
            let name = str_of(p, &["name"]).unwrap_or("function");
            let args = match p.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => calls::compact(other),
                None => String::new(),
            };
            let (command, spec) = calls::function_call(name, &args);
            Pending::new(ts.map(str::to_string), name, command, spec)
        }
        "local_shell_call" => {
            let action = obj(p, "action");
            let argv = action.and_then(|a| a.get("command"));
            let command = argv.and_then(calls::command_text).unwrap_or_default();
            let spec = calls::shell_or_patch(command.clone(), argv.and_then(Value::as_array));
            Pending::new(ts.map(str::to_string), "local_shell", command, spec)
        }
        "custom_tool_call" => {
            let name = str_of(p, &["name"]).unwrap_or("custom_tool");
            let input = str_of(p, &["input"]).unwrap_or_default();
            Pending::new(ts.map(str::to_string), name, input, calls::custom_call(name, input))
        }
        "web_search_call" => {
            let command = p.get("action").map(calls::compact).unwrap_or_default();
            Pending::new(ts.map(str::to_string), "web_search", command, Spec::Tool("search", Vec::new()))
        }
        "tool_search_call" => Pending::new(ts.map(str::to_string), "tool_search", "", Spec::Tool("search", Vec::new())),
        "image_generation_call" => {
            Pending::new(ts.map(str::to_string), "image_generation", "", Spec::Tool("other", Vec::new()))
        }
        _ => {
            sink.rec.saw_time(ts);
            return;
        }
    };
    if seen.first(id) {
        sink.call(enrich(pending, id, ix));
    }
}

/// A call's results, from the events and its output, joined by call id.
fn enrich(mut p: Pending, id: &str, ix: &Index) -> Pending {
    if id.is_empty() {
        return p;
    }
    if let Some(e) = ix.exec.get(id) {
        p.exit = e.exit.map(|c| (c, Grade::Observed));
        p.duration_ms = e.duration_ms;
        p.declined |= e.status.as_deref() == Some("declined");
        if let Some(o) = &e.output {
            p.output = o.clone();
        }
    }
    if let Some((out_ts, v)) = ix.outputs.get(id) {
        let o = calls::output(v);
        if p.exit.is_none() {
            p.exit = o.exit_code.map(|c| (c, Grade::Observed));
        }
        p.duration_ms = p.duration_ms.or(o.duration_ms).or_else(|| elapsed(p.ts.as_deref(), *out_ts));
        p.declined |= calls::rejected(&o.text);
        p.timed_out |= calls::timed_out(&o.text);
        if matches!(p.spec, Spec::Patch(_)) && o.success == Some(false) {
            p.success = Some(false);
        }
        if !o.text.is_empty() {
            p.output = o.text;
        }
    }
    if let Some(patch) = ix.patch.get(id) {
        if !matches!(p.spec, Spec::Patch(_)) {
            p.spec = Spec::Patch(String::new());
        }
        p.changes = Some(patch.changes.clone());
        p.success = patch.success.or(p.success);
        p.declined |= patch.declined;
        if p.output.is_empty() {
            p.output = patch.output.clone().unwrap_or_default();
        }
    }
    // The output the model saw carries Codex's own exit line ("Process exited with code
    // N", "Exit code: N") when no structured field gave a command's code.
    let command = matches!(p.spec, Spec::Shell(_) | Spec::Patch(_) | Spec::Stdin { .. });
    if p.exit.is_none() && command && ix.outputs.contains_key(id) {
        p.exit = calls::exit_from_text(&p.output).map(|c| (c, Grade::Derived));
    }
    if ix.mcp_failed.contains(id) {
        p.failure = Some("other");
    }
    let ran = ix.exec.contains_key(id) || ix.outputs.contains_key(id) || ix.patch.contains_key(id);
    p.approved = ix.approvals.contains(id) && ran && !p.declined;
    p
}

/// Milliseconds between two RFC 3339 times (the call's line and its output's line).
fn elapsed(start: Option<&str>, end: Option<&str>) -> Option<f64> {
    let s = chrono::DateTime::parse_from_rfc3339(start?).ok()?;
    let e = chrono::DateTime::parse_from_rfc3339(end?).ok()?;
    let ms = (e - s).num_milliseconds();
    (ms >= 0).then_some(ms as f64)
}

/// `<user_shell_command><command>CMD</command><result>Exit code: N ...</result>` (or
/// the older `<user_shell_command>CMD</user_shell_command><user_shell_command_output>`).
fn user_shell_message(ts: Option<&str>, text: &str, sink: &mut Sink) {
    let between = |open: &str, close: &str| -> Option<String> {
        let s = text.find(open)? + open.len();
        let e = text[s..].find(close)? + s;
        Some(text[s..e].trim().to_string())
    };
    let command =
        between("<command>", "</command>").or_else(|| between("<user_shell_command>", "</user_shell_command>"));
    let output = between("<result>", "</result>")
        .or_else(|| between("<user_shell_command_output>", "</user_shell_command_output>"));
    if let Some(command) = command.filter(|c| !c.is_empty()) {
        sink.person_command(ts, &command, &output.unwrap_or_default(), None);
    }
}
