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

/// The files a patch names, and what it does to them.
pub(crate) fn patch_files(patch: &str) -> (EditKind, Vec<String>) {
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

/// The success of an `apply_patch` the log reports only in words.
pub(crate) fn patch_ok_from_text(text: &str, exit: Option<i64>) -> bool {
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

// ---- a patch as unified diffs ----------------------------------------------------------

/// One file of a Codex patch (`*** Update File:` / `*** Add File:` / `*** Delete File:`).
#[derive(Debug, Default)]
struct FilePatch {
    path: String,
    kind: Option<Change>,
    move_to: Option<String>,
    /// An added file's lines.
    added: Vec<String>,
    /// An update's chunks: the `@@` text and the ` `/`-`/`+` lines.
    chunks: Vec<(String, Vec<(char, String)>)>,
}

fn parse_patch(text: &str) -> Vec<FilePatch> {
    let mut files: Vec<FilePatch> = Vec::new();
    for line in text.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let header = [
            ("*** Add File: ", Change::Add),
            ("*** Delete File: ", Change::Delete),
            ("*** Update File: ", Change::Update),
        ]
        .into_iter()
        .find_map(|(prefix, kind)| line.strip_prefix(prefix).map(|p| (p.trim().to_string(), kind)));
        if let Some((path, kind)) = header {
            files.push(FilePatch { path, kind: Some(kind), ..FilePatch::default() });
            continue;
        }
        if line.starts_with("*** ") {
            if let (Some(to), Some(f)) = (line.strip_prefix("*** Move to: "), files.last_mut()) {
                f.move_to = Some(to.trim().to_string());
            }
            // `*** Begin Patch`, `*** End Patch`, `*** End of File`.
            continue;
        }
        let Some(f) = files.last_mut() else { continue };
        match f.kind {
            Some(Change::Add) => {
                if let Some(l) = line.strip_prefix('+') {
                    f.added.push(l.to_string());
                }
            }
            Some(Change::Update) => {
                if let Some(context) = line.strip_prefix("@@") {
                    f.chunks.push((context.trim().to_string(), Vec::new()));
                    continue;
                }
                // A first chunk may come without `@@`; a blank line is a blank context line.
                let (tag, body) = match line.chars().next() {
                    Some(c @ (' ' | '-' | '+')) => (c, &line[1..]),
                    None => (' ', ""),
                    Some(_) => continue,
                };
                if f.chunks.is_empty() {
                    f.chunks.push((String::new(), Vec::new()));
                }
                if let Some((_, lines)) = f.chunks.last_mut() {
                    lines.push((tag, body.to_string()));
                }
            }
            _ => {}
        }
    }
    files
}

/// A hunk range as `diff -u` writes it: `start,len`, `start` alone for one line, the
/// line before and `,0` for none.
fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{},0", start.saturating_sub(1)),
        1 => format!("{start}"),
        n => format!("{start},{n}"),
    }
}

/// An update's chunks as hunks numbered within the chunks (the patch gives no line
/// numbers of the file): the first chunk starts at line 1, each next one after the
/// lines of those before it.
fn chunks_diff(from: &str, to: &str, chunks: &[(String, Vec<(char, String)>)]) -> String {
    let mut out = format!("--- a/{from}\n+++ b/{to}\n");
    let (mut old_at, mut new_at) = (1, 1);
    for (context, lines) in chunks {
        let old = lines.iter().filter(|(t, _)| *t != '+').count();
        let new = lines.iter().filter(|(t, _)| *t != '-').count();
        if old == 0 && new == 0 {
            continue;
        }
        out.push_str(&format!("@@ -{} +{} @@", range(old_at, old), range(new_at, new)));
        if !context.is_empty() {
            out.push(' ');
            out.push_str(context);
        }
        out.push('\n');
        for (tag, body) in lines {
            out.push(*tag);
            out.push_str(body);
            out.push('\n');
        }
        old_at += old;
        new_at += new;
    }
    out
}

/// A change the log shows with its own diff or contents (a patch event's or file-change
/// item's `changes` entry): its unified diff, with the file's line numbers.
fn structured_diff(path: &str, change: &Value, rel: &dyn Fn(&str) -> String) -> Option<String> {
    // `{"type": "update", ...}`, or the older `{"update": {...}}`.
    let (kind, body) = match change.get("type").and_then(Value::as_str) {
        Some(t) => (change_kind(t), change),
        None => {
            let (k, v) = change.as_object()?.iter().next()?;
            (change_kind(k), v)
        }
    };
    let from = rel(path);
    match kind {
        Change::Add => Some(crate::diff::unified(&from, None, Some(body.get("content")?.as_str()?))),
        Change::Delete => Some(crate::diff::unified(&from, Some(body.get("content")?.as_str()?), None)),
        Change::Update => {
            let hunks = body.get("unified_diff").or(body.get("diff")).and_then(Value::as_str)?;
            if hunks.starts_with("--- ") {
                return Some(with_newline(hunks.to_string()));
            }
            let to = body.get("move_path").and_then(Value::as_str).map(rel).unwrap_or_else(|| from.clone());
            if hunks.trim().is_empty() && to == from {
                return None;
            }
            let (from, to) = (from.trim_start_matches('/'), to.trim_start_matches('/'));
            Some(with_newline(format!("--- a/{from}\n+++ b/{to}\n{hunks}")))
        }
    }
}

fn with_newline(mut s: String) -> String {
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// The unified diff of one `apply_patch` call, every file it touches one after the
/// other, in the patch's order: a file's own diff from the patch event or file-change
/// item (`changes`: Codex's `unified_diff` with the file's line numbers, an added or
/// deleted file's contents) where the log gives one, else the patch text converted
/// (an update's chunks numbered within the chunks: the second value is then true). A
/// file deleted by a patch whose log shows no contents has no diff.
pub(crate) fn patch_diff(text: &str, changes: Option<&Value>, rel: &dyn Fn(&str) -> String) -> (Option<String>, bool) {
    let mut structured: Vec<(String, String)> = Vec::new();
    match changes {
        Some(Value::Object(map)) => {
            for (path, change) in map {
                if let Some(d) = structured_diff(path, change, rel) {
                    structured.push((rel(path), d));
                }
            }
        }
        Some(Value::Array(items)) => {
            for item in items {
                let Some(path) = item.get("path").and_then(Value::as_str) else { continue };
                let mut change = item.clone();
                if let (Some(o), Some(kind)) = (change.as_object_mut(), item.get("kind")) {
                    let (t, mv) = match kind {
                        Value::Object(k) => (k.get("type").cloned(), k.get("move_path").cloned()),
                        other => (Some(other.clone()), None),
                    };
                    o.insert("type".into(), t.unwrap_or(Value::Null));
                    if let Some(mv) = mv {
                        o.insert("move_path".into(), mv);
                    }
                }
                if let Some(d) = structured_diff(path, &change, rel) {
                    structured.push((rel(path), d));
                }
            }
        }
        _ => {}
    }
    let mut out = String::new();
    let mut fragment = false;
    let mut used = vec![false; structured.len()];
    for f in parse_patch(text) {
        let path = rel(&f.path);
        // The patch names a file relative to where it ran, the events by its full path.
        let same = |p: &str| p == path || p.ends_with(&format!("/{}", path.trim_start_matches('/')));
        if let Some(i) = structured.iter().enumerate().position(|(i, (p, _))| !used[i] && same(p)) {
            used[i] = true;
            out.push_str(&structured[i].1);
            continue;
        }
        let p = path.trim_start_matches('/');
        match f.kind {
            Some(Change::Add) => {
                let content: String = f.added.iter().map(|l| format!("{l}\n")).collect();
                out.push_str(&crate::diff::unified(p, None, Some(&content)));
            }
            Some(Change::Update) => {
                let to = f.move_to.as_deref().map(rel).unwrap_or_else(|| path.clone());
                let changed = f.chunks.iter().any(|(_, l)| !l.is_empty());
                fragment |= changed;
                if changed || to != path {
                    out.push_str(&chunks_diff(p, to.trim_start_matches('/'), &f.chunks));
                }
            }
            _ => {}
        }
    }
    for (i, (_, d)) in structured.iter().enumerate() {
        if !used[i] {
            out.push_str(d);
        }
    }
    ((!out.trim().is_empty()).then_some(out), fragment)
}
