//! The vocabulary of agents' tools: what a call is (a shell command, an edit, a read, a
//! submission...) by its tool's name and arguments, for the sources whose logs carry
//! tool calls by name and JSON arguments (Inspect, ATIF, Gemini CLI, trajectory
//! datasets). One place, so a tool name means the same thing whichever log it is in.

use serde_json::{Map, Value};

use crate::EditKind;

/// What a call is, by its tool's name and arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Shell(String),
    Python(String),
    Edit(EditKind, Vec<String>),
    /// A tool the rules name: `read`, `search`, `plan`, `other`.
    Named(&'static str, Vec<String>),
    /// The agent's submission (its completion claim), with its answer when it gives one.
    Submit(Option<String>),
    Opaque,
}

impl Kind {
    /// The action kind of a refused call (section 3: `run` for a shell call).
    pub(crate) fn refused_kind(&self) -> &'static str {
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

/// The first of `keys` that is a string argument.
pub(crate) fn arg<'a>(args: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(*k).and_then(Value::as_str))
}

/// The file a call names (`path`, `file_path`, `absolute_path`, `file`), or the files
/// (`paths`).
pub(crate) fn paths(args: &Map<String, Value>) -> Vec<String> {
    if let Some(p) = arg(args, &["path", "file_path", "filePath", "absolute_path", "file", "filename", "notebook_path"])
    {
        return vec![p.to_string()];
    }
    match args.get("paths") {
        Some(Value::Array(ps)) => ps.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// A shell command given as a string or as an argument vector (Codex's `["bash",
/// "-lc", "cmd"]`: the script).
fn command(args: &Map<String, Value>) -> Option<String> {
    match args.get("command").or_else(|| args.get("cmd")) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(argv)) => {
            let argv: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            match argv.as_slice() {
                [shell, flag, script] if shell.ends_with("sh") && flag.starts_with('-') && flag.contains('c') => {
                    Some(script.to_string())
                }
                _ if !argv.is_empty() => Some(argv.join(" ")),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The tools that submit: a call of one is the agent's completion claim.
pub(crate) const SUBMIT_TOOLS: [&str; 6] =
    ["submit", "finish", "mark_task_complete", "task_complete", "attempt_completion", "complete_task"];

/// What a call of `function` with `args` is. `submit_names`: the tools that submit in
/// this log (Inspect names its own; other sources [`SUBMIT_TOOLS`]).
pub(crate) fn classify(function: &str, args: &Map<String, Value>, submit_names: &[&str]) -> Kind {
    if submit_names.contains(&function) {
        return Kind::Submit(arg(args, &["answer", "result", "message", "summary"]).map(str::to_string));
    }
    let name = function.to_ascii_lowercase();
    match name.as_str() {
        "text_editor" | "str_replace_editor" | "str_replace_based_edit_tool" => {
            return match arg(args, &["command"]) {
                Some("view") => Kind::Named("read", paths(args)),
                Some("create" | "write") => Kind::Edit(EditKind::Create, paths(args)),
                Some("str_replace" | "insert" | "undo_edit") => Kind::Edit(EditKind::Edit, paths(args)),
                _ => Kind::Opaque,
            };
        }
        // Claude Code, Gemini CLI, OpenCode, Cline: edits by name.
        "edit" | "multiedit" | "replace" | "edit_file" | "str_replace" | "notebookedit" | "replace_in_file"
        | "apply_diff" | "patch" | "insert" | "undo_edit" => return Kind::Edit(EditKind::Edit, paths(args)),
        "write" | "write_file" | "create_file" | "write_to_file" | "create" => {
            return Kind::Edit(EditKind::Create, paths(args))
        }
        "delete_file" | "remove_file" => return Kind::Edit(EditKind::Delete, paths(args)),
        // A patch names its files inside its text: an edit of files the call does not list.
        "apply_patch" => return Kind::Edit(EditKind::Edit, Vec::new()),
        "think" | "update_plan" | "plan" | "write_todos" | "todowrite" | "todoread" | "report_intent" => {
            return Kind::Named("plan", Vec::new())
        }
        "web_search"
        | "google_web_search"
        | "websearch"
        | "find_file"
        | "grep"
        | "glob"
        | "search_file_content"
        | "search_files"
        | "codebase_search" => return Kind::Named("search", Vec::new()),
        "view" | "read" | "read_file" | "read_many_files" | "view_file" | "open" | "open_file" | "cat"
        | "list_files" | "list_directory" | "ls" | "web_fetch" | "webfetch" | "fetch" => {
            return Kind::Named("read", paths(args))
        }
        "memory" | "save_memory" | "task" | "agent" => return Kind::Named("other", Vec::new()),
        _ => {}
    }
    if name.starts_with("web_browser") || name == "browser" {
        return Kind::Named("read", Vec::new());
    }
    if name.starts_with("search_") || name.ends_with("_search") {
        return Kind::Named("search", Vec::new());
    }
    if name.contains("todo") {
        return Kind::Named("plan", Vec::new());
    }
    if name.contains("python") {
        if let Some(code) = arg(args, &["code", "source"]) {
            return Kind::Python(code.to_string());
        }
    }
    let shell_like = name.contains("bash") || name.contains("shell") || name.contains("command") || name == "exec";
    if shell_like {
        if let Some(cmd) = command(args) {
            return Kind::Shell(cmd);
        }
    }
    Kind::Opaque
}

/// Keys a terminal agent (Terminus) sends to its shell: a line ending in Enter is a
/// shell command; anything else (a key, half a line, `C-c`) has an effect the rules
/// cannot tell.
pub(crate) fn keystrokes(keys: &str) -> Kind {
    let entered = keys.ends_with('\n') || keys.ends_with('\r');
    let line = keys.trim_end_matches(['\n', '\r']);
    if entered && !line.trim().is_empty() {
        Kind::Shell(line.to_string())
    } else {
        Kind::Opaque
    }
}

/// A tool's result or a message's content as text: a string, or a list of content
/// parts (their `text`; an image as `[image]`).
pub(crate) fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.clone()),
                _ => match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (_, Some(t)) => Some(t.to_string()),
                    (Some("image" | "image_url" | "input_image"), None) => Some("[image]".into()),
                    _ => None,
                },
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// What became of a call, for [`record`]: whether it did what it was asked (an edit
/// that failed changed nothing), an edit's diff when it happened (`(diff, fragment)`),
/// and whether a submission is the run's completion claim (not a subagent's, not one
/// that failed).
pub(crate) struct Done {
    pub ok: bool,
    pub diff: Option<(String, bool)>,
    pub claims: bool,
}

/// Records a call of `kind` as every source that classifies by [`classify`] does: a
/// shell command or Python by the shell rules, an edit as a mutation (with its diff when
/// it happened), a named tool by its action kind, a submission as a tool and the
/// completion claim, anything else opaque. The call carries its output and exit code.
pub(crate) fn record(rec: &mut crate::Recorder, kind: Kind, mut call: crate::Call, done: Done) -> u64 {
    match kind {
        Kind::Shell(cmd) => rec.shell(call, &cmd),
        Kind::Python(code) => rec.python(call, &code),
        Kind::Edit(edit, paths) => {
            match (done.ok, done.diff) {
                (true, Some((diff, fragment))) => {
                    if fragment {
                        rec.fragment_diff();
                    }
                    call = call.diff(Some(diff));
                }
                (false, _) if call.failure_type.is_none() => call = call.failure("other"),
                _ => {}
            }
            rec.edit(call, edit, &paths, done.ok)
        }
        Kind::Named(k, paths) => rec.tool(call, k, &paths),
        Kind::Submit(answer) => {
            let ts = call.ts.clone();
            let seq = rec.tool(call, "other", &[]);
            if done.claims {
                rec.complete(ts.as_deref(), answer.as_deref());
            }
            seq
        }
        Kind::Opaque => rec.opaque(call),
    }
}

/// The unified diff of an edit that happened, from its arguments (and, for an editor
/// tool, the snippet its result prints): `(diff, fragment)`, `fragment` when it is
/// numbered within the replaced text, not the file.
pub(crate) fn edit_diff(function: &str, args: &Map<String, Value>, result: &str) -> Option<(String, bool)> {
    let name = function.to_ascii_lowercase();
    if matches!(name.as_str(), "text_editor" | "str_replace_editor" | "str_replace_based_edit_tool") {
        return crate::inspect::edits::text_editor(args, result).map(|d| (d.diff, d.fragment));
    }
    let path = paths(args).into_iter().next()?;
    let s = |keys: &[&str]| arg(args, keys);
    match (
        s(&["old_string", "old_str", "oldText", "oldString"]),
        s(&["new_string", "new_str", "newText", "newString"]),
        s(&["content", "file_text"]),
    ) {
        (Some(old), Some(new), _) => Some((crate::diff::fragment(&path, old, new), true)),
        (None, None, Some(content)) if matches!(name.as_str(), "write" | "write_file" | "create_file" | "create") => {
            Some((crate::diff::unified(&path, None, Some(content)), false))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(function: &str, args: Value) -> Kind {
        classify(function, args.as_object().unwrap(), &SUBMIT_TOOLS)
    }

    #[test]
    fn the_tools_of_each_agent_by_name() {
        assert_eq!(kind("Bash", json!({"command": "pytest -q"})), Kind::Shell("pytest -q".into()));
        assert_eq!(kind("run_shell_command", json!({"command": "ls"})), Kind::Shell("ls".into()));
        assert_eq!(kind("execute_bash", json!({"command": "ls"})), Kind::Shell("ls".into()));
        assert_eq!(kind("shell", json!({"command": ["bash", "-lc", "make test"]})), Kind::Shell("make test".into()));
        assert_eq!(kind("shell", json!({"command": ["ls", "-la"]})), Kind::Shell("ls -la".into()));
        assert_eq!(kind("Edit", json!({"file_path": "/w/a.py"})), Kind::Edit(EditKind::Edit, vec!["/w/a.py".into()]));
        assert_eq!(kind("replace", json!({"file_path": "a.py"})), Kind::Edit(EditKind::Edit, vec!["a.py".into()]));
        assert_eq!(kind("write_file", json!({"file_path": "b.py"})), Kind::Edit(EditKind::Create, vec!["b.py".into()]));
        assert_eq!(
            kind("str_replace_editor", json!({"command": "view", "path": "/a"})),
            Kind::Named("read", vec!["/a".into()])
        );
        assert_eq!(
            kind("read_many_files", json!({"paths": ["a", "b"]})),
            Kind::Named("read", vec!["a".into(), "b".into()])
        );
        assert_eq!(kind("google_web_search", json!({"query": "x"})), Kind::Named("search", vec![]));
        assert_eq!(kind("TodoWrite", json!({})), Kind::Named("plan", vec![]));
        assert_eq!(kind("finish", json!({"message": "done"})), Kind::Submit(Some("done".into())));
        assert_eq!(kind("mark_task_complete", json!({})), Kind::Submit(None));
        assert_eq!(kind("execute_ipython_cell", json!({"code": "print(1)"})), Kind::Python("print(1)".into()));
        // A shell-like name without a command, and a name nothing knows: opaque.
        assert_eq!(kind("bash", json!({"restart": true})), Kind::Opaque);
        assert_eq!(kind("frobnicate", json!({"x": 1})), Kind::Opaque);
        // A name submits only where the log's tools say so.
        assert_eq!(classify("finish", &Map::new(), &["submit"]), Kind::Opaque);
    }

    #[test]
    fn content_parts_as_text() {
        assert_eq!(text(Some(&json!([{"type": "text", "text": "a"}, {"type": "image"}, "b"]))), "a\n[image]\nb");
        assert_eq!(text(Some(&json!("x"))), "x");
        assert_eq!(text(None), "");
    }
}
