//! One Inspect `ToolEvent` as recorder calls: the tool's name says what kind of call it
//! is (section 4), the sandbox `exec` of the call its exit code, `error` its failure;
//! its `result` (and error message) is the call's output, and a `text_editor` edit
//! carries its diff ([`super::edits`]).

use serde_json::{Map, Value};

use super::edits;
use super::stream::time;
use crate::{Call, EditKind, Grade, Recorder};

/// What a call is, by its tool's name and arguments.
enum Kind {
    Shell(String),
    Python(String),
    Edit(EditKind, Vec<String>),
    /// A tool the rules name: `read`, `search`, `plan`, `other`.
    Named(&'static str, Vec<String>),
    Submit(Option<String>),
    Opaque,
}

impl Kind {
    /// The action kind of a refused call (section 3: `run` for a shell call).
    fn refused_kind(&self) -> &'static str {
        match self {
            Kind::Shell(_) | Kind::Python(_) | Kind::Opaque => "run",
            Kind::Edit(EditKind::Create, _) => "create",
            Kind::Edit(EditKind::Delete, _) => "delete",
            Kind::Edit(EditKind::Edit, _) => "edit",
            Kind::Named(k, _) => k,
            Kind::Submit(_) => "other",
        }
    }
}

fn arg<'a>(args: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(*k).and_then(Value::as_str))
}

fn paths(args: &Map<String, Value>) -> Vec<String> {
    arg(args, &["path", "file_path", "file"]).map(|p| vec![p.to_string()]).unwrap_or_default()
}

fn classify(function: &str, args: &Map<String, Value>, agent: bool, submit_names: &[String]) -> Kind {
    let name = function.to_ascii_lowercase();
    if submit_names.iter().any(|s| s == function) {
        return Kind::Submit(arg(args, &["answer", "result", "message"]).map(str::to_string));
    }
    if agent || name.starts_with("transfer_to_") {
        return Kind::Named("other", Vec::new()); // a handoff to another agent: a subagent call
    }
    match name.as_str() {
        "bash_session" => {
            // `type_submit` (and the first versions' `command`) sends a command line;
            // the other actions only read or steer the session.
            return match (arg(args, &["action"]), arg(args, &["input", "command", "cmd"])) {
                (Some("type_submit") | None, Some(cmd)) => Kind::Shell(cmd.trim_end_matches('\n').to_string()),
                (Some("read"), _) => Kind::Named("read", Vec::new()),
                (Some("type"), _) => Kind::Opaque,
                _ => Kind::Named("other", Vec::new()),
            };
        }
        "text_editor" | "str_replace_editor" | "str_replace_based_edit_tool" => {
            return match arg(args, &["command"]) {
                Some("view") => Kind::Named("read", paths(args)),
                Some("create") => Kind::Edit(EditKind::Create, paths(args)),
                Some("str_replace" | "insert" | "undo_edit") => Kind::Edit(EditKind::Edit, paths(args)),
                _ => Kind::Opaque,
            };
        }
        "think" | "update_plan" | "plan" => return Kind::Named("plan", Vec::new()),
        "web_search" | "find_file" | "grep" | "glob" => return Kind::Named("search", Vec::new()),
        "view" | "read" | "read_file" | "view_file" | "open" | "open_file" | "cat" | "list_files" | "ls"
        | "web_fetch" | "fetch" => return Kind::Named("read", paths(args)),
        "memory" => return Kind::Named("other", Vec::new()),
        _ => {}
    }
    if name.starts_with("web_browser") {
        return Kind::Named("read", Vec::new());
    }
    if name.starts_with("search_") || name.ends_with("_search") {
        return Kind::Named("search", Vec::new());
    }
    if name.contains("todo") {
        return Kind::Named("plan", Vec::new());
    }
    if name == "bash" || name == "shell" || name.contains("bash") || name.contains("shell") {
        if let Some(cmd) = arg(args, &["cmd", "command"]) {
            return Kind::Shell(cmd.to_string());
        }
    }
    if name == "python" || name.contains("python") {
        if let Some(code) = arg(args, &["code", "source"]) {
            return Kind::Python(code.to_string());
        }
    }
    Kind::Opaque
}

/// A tool's result as text (a list of content parts: their text).
fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or(p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Execs the tool made to reach its own helper inside the sandbox: their status is the
/// helper's, not the command's.
fn plumbing(cmd: &str) -> bool {
    cmd.contains("inspect-tool-support") || cmd.contains("inspect_tool_support")
}

/// The exit code the call's last exec shows.
fn exit_code(execs: &[&Value]) -> Option<i64> {
    let exec = execs.iter().rev().find(|e| !plumbing(e.get("cmd").and_then(Value::as_str).unwrap_or("")))?;
    match exec.get("result")? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn duration_ms(start: Option<&str>, end: Option<&str>) -> Option<f64> {
    let ms = (time(end)? - time(start)?).num_microseconds()? as f64 / 1000.0;
    (ms >= 0.0).then_some(ms)
}

/// The tools whose edits [`edits::text_editor`] reads.
fn is_text_editor(function: &str) -> bool {
    matches!(function, "text_editor" | "str_replace_editor" | "str_replace_based_edit_tool")
}

/// One tool call, at its place in the stream. `decision`: the last approval decision
/// taken before it ran, if any approver saw it. Returns the answer of a successful
/// submission (empty when it gave none).
pub(super) fn call(
    e: &Value,
    execs: &[&Value],
    decision: Option<&str>,
    submit_names: &[String],
    rec: &mut Recorder,
) -> Option<String> {
    let function = e.get("function").and_then(Value::as_str).unwrap_or("unknown");
    let empty = Map::new();
    let args = e.get("arguments").and_then(Value::as_object).unwrap_or(&empty);
    let agent = e.get("agent").is_some_and(|a| !a.is_null());
    let kind = classify(function, args, agent, submit_names);
    let ts = e.get("timestamp").and_then(Value::as_str);
    let completed = e.get("completed").and_then(Value::as_str);
    let error = e.get("error").filter(|e| !e.is_null());
    let error_type = error.and_then(|e| e.get("type")).and_then(Value::as_str);
    let error_message = error.and_then(|e| e.get("message")).and_then(Value::as_str).unwrap_or("");

    // What the agent got back: the result, then the error's message. A call still
    // pending (a log written while it ran) has no result yet.
    let result = text(e.get("result"));
    let mut output = result.clone();
    if !error_message.is_empty() {
        if !output.is_empty() {
            output.push('\n');
        }
        output.push_str(error_message);
    }
    let shown = e.get("pending").and_then(Value::as_bool) != Some(true)
        && (e.get("result").is_some() || !error_message.is_empty());
    let command = match &kind {
        Kind::Shell(c) | Kind::Python(c) => c.clone(),
        _ => Value::Object(args.clone()).to_string(),
    };
    let mut call = Call::new(function)
        .command(command)
        .ts(ts)
        .duration(duration_ms(ts, completed))
        .id(e.get("id").and_then(Value::as_str))
        .arguments(e.get("arguments").cloned().unwrap_or(Value::Null))
        .is_error(Some(error.is_some()));
    if shown {
        call = call.output(output);
    }

    // Refused before it ran: by an approver (any: a policy's refusal is recorded by
    // the failure type alone), or the tool reported its approval error.
    if error_type == Some("approval") || matches!(decision, Some("reject" | "terminate")) {
        let kind_name = kind.refused_kind();
        rec.refused(call, kind_name);
        return None;
    }

    let code = exit_code(execs);
    call = call.exit(code, Grade::Observed);
    let shell_like = matches!(kind, Kind::Shell(_) | Kind::Python(_));
    match error_type {
        None => {}
        Some("timeout") => call.timed_out = true,
        Some("parsing") => call = call.failure("parse_error"),
        Some("file_not_found") => call = call.failure("not_found"),
        Some("permission") => call = call.failure("permission_denied"),
        // Older tools raised their command's failure as an error: the exit code says it.
        Some("unknown") if shell_like && code.is_some_and(|c| c != 0) => {}
        Some(_) => call = call.failure("other"),
    }
    if error.is_none() && e.get("failed").and_then(Value::as_bool) == Some(true) {
        call = call.failure("other");
    }
    let ok = error.is_none();
    match kind {
        Kind::Shell(cmd) => {
            rec.shell(call, &cmd);
        }
        Kind::Python(code) => {
            rec.python(call, &code);
        }
        Kind::Edit(edit, paths) => {
            // Only an edit that happened has a diff.
            let diff = if ok && is_text_editor(function) { edits::text_editor(args, &result) } else { None };
            if let Some(d) = diff {
                if d.fragment {
                    rec.fragment_diff();
                }
                call = call.diff(Some(d.diff));
            }
            rec.edit(call, edit, &paths, ok);
        }
        Kind::Named(k, paths) => {
            rec.tool(call, k, &paths);
        }
        Kind::Submit(answer) => {
            rec.tool(call, "other", &[]);
            if ok {
                rec.complete(completed.or(ts), answer.as_deref());
                return Some(answer.unwrap_or_default());
            }
        }
        Kind::Opaque => {
            rec.opaque(call);
        }
    }
    None
}
