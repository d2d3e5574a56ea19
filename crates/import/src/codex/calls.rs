//! What one Codex tool call is: its name, the command it ran, whether it is an edit, and
//! what its output says. Shared by the rollout and the `codex exec --json` readers, so a
//! call is classified the same way whichever log it came from.

use serde_json::Value;

use crate::common::apply_patch::{change_kind, Change};

/// A call as the model asked for it, before its result is known.
#[derive(Debug, Clone)]
pub(super) enum Spec {
    /// A shell command (the string the shell ran).
    Shell(String),
    /// `apply_patch`, as its own tool or run through the shell: the patch text.
    Patch(String),
    /// A tool whose action the rules name (`read`, `search`, `plan`, `other`).
    Tool(&'static str, Vec<String>),
    /// Keys sent to a running process: `write_stdin` with no characters only reads.
    Stdin { empty: bool },
    /// A tool whose effect on the files cannot be told (MCP tools, code mode, ...).
    Opaque,
}

/// A `function_call` (`name`, `arguments` as a JSON string): the tools record's
/// `command` and what the call is.
pub(super) fn function_call(name: &str, arguments: &str) -> (String, Spec) {
    let args: Value =
        epistore_package::json_from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
    let compact = compact(&args);
    let spec = match name {
        "shell" | "container.exec" | "local_shell" | "shell_command" | "exec_command" => {
            let command = args.get("cmd").or_else(|| args.get("command")).and_then(command_text);
            match command {
                // A patch run through the shell keeps the shell command as its command.
                Some(c) => return (c.clone(), shell_or_patch(c, args.get("command").and_then(Value::as_array))),
                None => Spec::Opaque,
            }
        }
        "apply_patch" | "applypatch" => {
            let text = args.get("input").and_then(Value::as_str).or(args.as_str()).unwrap_or_default();
            Spec::Patch(text.to_string())
        }
        "write_stdin" => {
            let chars = args.get("chars").and_then(Value::as_str).unwrap_or_default();
            Spec::Stdin { empty: chars.is_empty() }
        }
        "update_plan" | "todo_write" | "todo_list" => Spec::Tool("plan", Vec::new()),
        "view_image" | "read_file" | "list_dir" => {
            let path = ["path", "file_path", "dir_path"].iter().find_map(|k| args.get(*k).and_then(Value::as_str));
            Spec::Tool("read", path.map(|p| vec![p.to_string()]).unwrap_or_default())
        }
        "grep_files" | "grep" | "search" | "web_search" | "find_files" | "tool_search" => {
            Spec::Tool("search", Vec::new())
        }
        "spawn_agent" | "send_input" | "wait" | "close_agent" | "resume_agent" => Spec::Tool("other", Vec::new()),
        _ => Spec::Opaque,
    };
    (compact, spec)
}

/// A `custom_tool_call` (freeform `input`): `apply_patch` is an edit; anything else
/// (code mode's `exec` JavaScript, ...) cannot be told.
pub(super) fn custom_call(name: &str, input: &str) -> Spec {
    match name {
        "apply_patch" | "applypatch" => Spec::Patch(input.to_string()),
        _ => Spec::Opaque,
    }
}

/// A command given as an argv array or a string, as one shell string.
pub(super) fn command_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(words) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            (!words.is_empty()).then(|| join_argv(&words))
        }
        _ => None,
    }
}

/// Shell words joined so a shell would split them back the same way (`bash -lc 'a; b'`):
/// the section 4 rules then unwrap the shell and split its script.
pub(super) fn join_argv(words: &[&str]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Codex intercepts `apply_patch` run through the shell (`apply_patch <<'EOF' ...`,
/// `["apply_patch", PATCH]`, `cd x && apply_patch ...`) and applies it as a patch.
pub(super) fn shell_or_patch(command: String, argv: Option<&Vec<Value>>) -> Spec {
    let words: Vec<&str> = argv.map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let script = match words.as_slice() {
        [prog, patch] if is_apply_patch(prog) => return Spec::Patch(patch.to_string()),
        [shell, flag, script] if is_shell(shell) && flag.starts_with('-') => script.to_string(),
        _ => command.clone(),
    };
    match patch_in_script(&script) {
        Some(patch) => Spec::Patch(patch),
        None => Spec::Shell(command),
    }
}

fn is_apply_patch(word: &str) -> bool {
    matches!(word, "apply_patch" | "applypatch")
}

fn is_shell(word: &str) -> bool {
    let base = word.rsplit('/').next().unwrap_or(word);
    matches!(base, "bash" | "sh" | "zsh" | "dash")
}

/// The patch of a script that is an `apply_patch` invocation (optionally after `cd DIR &&`).
fn patch_in_script(script: &str) -> Option<String> {
    let mut rest = script.trim_start();
    if let Some(after_cd) = rest.strip_prefix("cd ") {
        rest = after_cd.split_once("&&")?.1.trim_start();
    }
    let word = rest.split(|c: char| c.is_whitespace() || c == '<').next().unwrap_or("");
    if !is_apply_patch(word) {
        return None;
    }
    let start = rest.find("*** Begin Patch").unwrap_or(rest.len());
    let end = rest.find("*** End Patch").map(|i| i + "*** End Patch".len()).unwrap_or(rest.len());
    Some(rest[start..end.max(start)].to_string())
}

/// The `changes` of a patch event or file-change item, in the order the log lists them:
/// a map `{path: {"type": "add", ...}}` (or the older `{path: {"add": {...}}}`), or a list
/// `[{"path": P, "kind": "add"}]` (`kind` a string or `{"type": ...}`).
pub(super) fn structured_changes(v: &Value) -> Vec<(String, Change)> {
    let mut out = Vec::new();
    match v {
        Value::Object(map) => {
            for (path, change) in map {
                let kind = match change {
                    Value::Object(c) => match c.get("type").and_then(Value::as_str) {
                        Some(t) => change_kind(t),
                        None => c.keys().next().map(|k| change_kind(k)).unwrap_or(Change::Update),
                    },
                    Value::String(s) => change_kind(s),
                    _ => Change::Update,
                };
                out.push((path.clone(), kind));
                if let Some(to) = change.get("move_path").and_then(Value::as_str) {
                    out.push((to.to_string(), Change::Update));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let Some(path) = item.get("path").and_then(Value::as_str) else {
                    continue;
                };
                let kind = match item.get("kind") {
                    Some(Value::String(s)) => change_kind(s),
                    Some(Value::Object(k)) => {
                        k.get("type").and_then(Value::as_str).map(change_kind).unwrap_or(Change::Update)
                    }
                    _ => Change::Update,
                };
                out.push((path.to_string(), kind));
            }
        }
        _ => {}
    }
    out
}

/// The changes as compact JSON (`[{"kind": "update", "path": P}]`), the command of an
/// edit the log shows only as its file changes.
pub(super) fn changes_command(changes: &[(String, Change)]) -> String {
    let list: Vec<Value> = changes
        .iter()
        .map(|(path, kind)| {
            let kind = match kind {
                Change::Add => "add",
                Change::Delete => "delete",
                Change::Update => "update",
            };
            serde_json::json!({"kind": kind, "path": path})
        })
        .collect();
    compact(&Value::Array(list))
}

/// What a `function_call_output` / `custom_tool_call_output` says.
#[derive(Debug, Clone, Default)]
pub(super) struct Output {
    pub text: String,
    /// From the structured `{"output", "metadata": {"exit_code"}}` payload older shell
    /// tools return (observed); text such as `Exit code: N` is left to the shell rules.
    pub exit_code: Option<i64>,
    pub duration_ms: Option<f64>,
    pub success: Option<bool>,
}

pub(super) fn output(v: &Value) -> Output {
    match v {
        Value::String(s) => {
            if let Ok(Value::Object(o)) = epistore_package::json_from_str::<Value>(s) {
                if let Some(text) = o.get("output").and_then(Value::as_str) {
                    let meta = o.get("metadata");
                    return Output {
                        text: text.to_string(),
                        exit_code: meta.and_then(|m| m.get("exit_code")).and_then(Value::as_i64),
                        duration_ms: meta
                            .and_then(|m| m.get("duration_seconds"))
                            .and_then(Value::as_f64)
                            .map(|s| s * 1000.0),
                        success: None,
                    };
                }
            }
            Output { text: s.clone(), ..Output::default() }
        }
        Value::Object(o) => {
            let mut out = o.get("content").map(output).unwrap_or_default();
            if let Some(items) = o.get("content_items") {
                out.text = output(items).text;
            }
            out.success = o.get("success").and_then(Value::as_bool);
            out
        }
        Value::Array(items) => {
            let texts: Vec<&str> = items.iter().filter_map(|i| i.get("text").and_then(Value::as_str)).collect();
            Output { text: texts.join("\n"), ..Output::default() }
        }
        _ => Output::default(),
    }
}

/// The exit code Codex wrote in a call's output (derived): its own header (`Process
/// exited with code N`, `Exit code: N`) before the `Output:` line, so a number the
/// command itself printed is not taken for it; else anywhere in the text.
pub(super) fn exit_from_text(text: &str) -> Option<i64> {
    let header_end = if text.starts_with("Output:\n") { Some(0) } else { text.find("\nOutput:\n") };
    if let Some(end) = header_end {
        if let Some(code) = crate::shell::exit_code_from_text(&text[..end]) {
            return Some(code);
        }
    }
    crate::shell::exit_code_from_text(text)
}

/// Codex's words for a call a person (or a reviewer) declined before it ran.
pub(super) fn rejected(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("exec command rejected by user")
        || t.starts_with("patch rejected by user")
        || t.starts_with("rejected by user")
}

/// `command timed out after N milliseconds`, as Codex reports a command it killed.
pub(super) fn timed_out(text: &str) -> bool {
    text.trim_start().starts_with("command timed out after")
}

/// A duration as Codex serialises one: `{"secs", "nanos"}`, or milliseconds.
pub(super) fn duration_ms(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Object(o) => {
            let secs = o.get("secs").and_then(Value::as_f64)?;
            let nanos = o.get("nanos").and_then(Value::as_f64).unwrap_or(0.0);
            Some(secs * 1000.0 + nanos / 1e6)
        }
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Compact JSON, as the tools record's `command` for a call that is not a shell command.
pub(super) fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

// ---- what a call printed -------------------------------------------------------------

/// The lines Codex writes above a command's output for the model (`Exit code: N`,
/// `Wall time: ...`, `Chunk ID: ...`, `Process exited with code N`, `Original token
/// count: N`, `Total output lines: N`), ended by an `Output:` line.
const HEADER_KEYS: [&str; 8] = [
    "Exit code:",
    "Wall time:",
    "Chunk ID:",
    "Process exited with code",
    "Process running with session ID",
    "Original token count:",
    "Total output lines:",
    "Duration:",
];

/// What the command printed, out of the text Codex gave the model: the text after
/// Codex's own header (and after a nested one: `apply_patch` run through
/// `exec_command` shows both), and whether the header says the process was still
/// running (then the text is this call's chunk only). Text without such a header is
/// returned whole.
pub(super) fn printed_text(text: &str) -> (&str, bool) {
    let mut rest = text;
    let mut running = false;
    while let Some(end) = rest.find("Output:\n").filter(|&i| i == 0 || rest[..i].ends_with('\n')) {
        let header = &rest[..end];
        let known = !header.is_empty() && header.lines().all(|l| HEADER_KEYS.iter().any(|k| l.starts_with(k)));
        if !known {
            break;
        }
        running |= header.lines().any(|l| l.starts_with("Process running with session ID"));
        rest = &rest[end + "Output:\n".len()..];
    }
    (rest, running)
}

/// The text of an MCP tool result (`{"content": [{"type": "text", "text"}]}`, as the
/// `Ok` of an end event or an item's `result`), or of its error.
pub(super) fn mcp_result_text(result: &Value) -> Option<(String, bool)> {
    let texts = |content: &Value| -> Option<String> {
        let parts = content.as_array()?;
        Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"))
    };
    if let Some(ok) = result.get("Ok") {
        let error = ok.get("isError").or(ok.get("is_error")).and_then(Value::as_bool).unwrap_or(false);
        return Some((texts(ok.get("content")?)?, error));
    }
    if let Some(err) = result.get("Err") {
        return Some((err.as_str().map(str::to_string).unwrap_or_else(|| compact(err)), true));
    }
    Some((texts(result.get("content")?)?, false))
}
