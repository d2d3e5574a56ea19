//! What one Codex tool call is: its name, the command it ran, whether it is an edit, and
//! what its output says. Shared by the rollout and the `codex exec --json` readers, so a
//! call is classified the same way whichever log it came from.

use serde_json::Value;

use crate::EditKind;

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
    let args: Value = serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
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

/// The files a patch names, and what it does to them.
pub(super) fn patch_files(patch: &str) -> (EditKind, Vec<String>) {
    let mut changes = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end();
        for (prefix, kind) in [
            ("*** Add File: ", Change::Add),
            ("*** Delete File: ", Change::Delete),
            ("*** Update File: ", Change::Update),
            ("*** Move to: ", Change::Update),
        ] {
            if let Some(path) = line.strip_prefix(prefix) {
                changes.push((path.trim().to_string(), kind));
            }
        }
    }
    summarise(&changes)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    Add,
    Delete,
    Update,
}

fn change_kind(name: &str) -> Change {
    match name.to_ascii_lowercase().as_str() {
        "add" | "create" => Change::Add,
        "delete" | "remove" => Change::Delete,
        _ => Change::Update,
    }
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

/// One mutation whatever the number of files: `create` when every file is new,
/// `delete` when every file is removed, else `edit`.
pub(super) fn summarise(changes: &[(String, Change)]) -> (EditKind, Vec<String>) {
    let mut paths: Vec<String> = Vec::new();
    for (p, _) in changes {
        if !paths.contains(p) {
            paths.push(p.clone());
        }
    }
    let kind = if !changes.is_empty() && changes.iter().all(|(_, k)| *k == Change::Add) {
        EditKind::Create
    } else if !changes.is_empty() && changes.iter().all(|(_, k)| *k == Change::Delete) {
        EditKind::Delete
    } else {
        EditKind::Edit
    };
    (kind, paths)
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
            if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(s) {
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

/// The success of an `apply_patch` the log reports only in words.
pub(super) fn patch_ok_from_text(text: &str, exit: Option<i64>) -> bool {
    if text.contains("Success. Updated the following files") {
        return true;
    }
    match exit {
        Some(code) => code == 0,
        // No output at all: the outcome is unknown, which counts as possibly changed;
        // any other words are Codex reporting the patch did not apply.
        None => text.trim().is_empty(),
    }
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
