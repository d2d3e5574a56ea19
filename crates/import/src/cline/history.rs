//! `api_conversation_history.json` into the episode: the messages in order; a tool call
//! (XML in the assistant's text, or a `tool_use` block) with its result (the next user
//! message's `[tool for '...'] Result:` text, or its `tool_result` block).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, Grade, Recorder};

/// The tools the XML era's assistant text may call (Cline's, Roo's and Kilo's).
const XML_TOOLS: [&str; 31] = [
    "execute_command",
    "read_file",
    "write_to_file",
    "replace_in_file",
    "apply_diff",
    "insert_content",
    "search_and_replace",
    "search_replace",
    "edit_file",
    "fast_edit_file",
    "delete_file",
    "apply_patch",
    "search_files",
    "list_files",
    "list_code_definition_names",
    "codebase_search",
    "browser_action",
    "use_mcp_tool",
    "access_mcp_resource",
    "ask_followup_question",
    "attempt_completion",
    "plan_mode_respond",
    "act_mode_respond",
    "new_task",
    "switch_mode",
    "fetch_instructions",
    "update_todo_list",
    "new_rule",
    "web_fetch",
    "web_search",
    "condense",
];

/// A Cline tool's name in the shared vocabulary ([`tools::classify`]).
fn normalise(name: &str) -> &str {
    match name {
        "insert_content" => "insert",
        "search_and_replace" | "search_replace" | "edit_file" | "fast_edit_file" => "edit",
        "list_code_definition_names" | "access_mcp_resource" | "fetch_instructions" => "read",
        "browser_action" => "browser",
        "ask_followup_question"
        | "plan_mode_respond"
        | "act_mode_respond"
        | "new_task"
        | "switch_mode"
        | "new_rule"
        | "condense"
        | "summarize_task"
        | "report_bug" => "task",
        other => other,
    }
}

static EXIT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)\bexit code:? (-?\d+)").expect("regex"));
static HEADER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[([a-z_]+)(?: [^\n]*?)?\] Result:").expect("regex"));
static WORKDIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Current (?:Working|Workspace) Directory \(([^)\n]+)\)").expect("regex"));
static PARAM: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<([a-z_]+)>").expect("regex"));

/// A call waiting for its result.
struct Pending {
    name: String,
    args: Map<String, Value>,
    id: Option<String>,
}

pub(super) fn record(rec: &mut Recorder, messages: &[Value]) {
    rec.record_messages();
    let mut xml: Option<Pending> = None;
    let mut native: Vec<Pending> = Vec::new();
    for m in messages {
        let blocks = blocks(m);
        match m.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                // A call left without a result (the next turn never answered it).
                if let Some(p) = xml.take() {
                    unanswered(rec, p);
                }
                assistant(rec, m, &blocks, &mut xml, &mut native);
            }
            Some("user") => user(rec, &blocks, &mut xml, &mut native),
            _ => {}
        }
    }
    for p in xml.into_iter().chain(native) {
        unanswered(rec, p);
    }
}

/// A message's content as blocks (a string is one text block).
fn blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        Some(Value::Array(b)) => b.clone(),
        _ => Vec::new(),
    }
}

fn text_of(b: &Value) -> &str {
    b.get("text").and_then(Value::as_str).unwrap_or("")
}

/// The text between `<tag>` and `</tag>`, and the text without it.
fn cut<'a>(text: &'a str, tag: &str) -> Option<(&'a str, String)> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let at = text.find(&open)?;
    let end = text[at..].find(&close).map_or(text.len(), |e| at + e);
    let inner = &text[at + open.len()..end];
    let rest = format!("{}{}", &text[..at], text.get(end + close.len()..).unwrap_or(""));
    Some((inner, rest))
}

/// The first XML tool call in an assistant's text: its name, its parameters, and the
/// text before it.
fn xml_call(text: &str) -> Option<(String, Map<String, Value>, String)> {
    let (at, name) = XML_TOOLS.iter().filter_map(|t| text.find(&format!("<{t}>")).map(|at| (at, *t))).min()?;
    let body_start = at + name.len() + 2;
    let end = text[body_start..].find(&format!("</{name}>")).map_or(text.len(), |e| body_start + e);
    let body = &text[body_start..end];
    let mut args = Map::new();
    let mut from = 0;
    while let Some(c) = PARAM.captures(&body[from..]) {
        let whole = c.get(0).expect("match");
        let key = c[1].to_string();
        let start = from + whole.end();
        let close = format!("</{key}>");
        let Some(stop) = body[start..].find(&close).map(|e| start + e) else { break };
        let value = body[start..stop].strip_prefix('\n').unwrap_or(&body[start..stop]);
        let value = value.strip_suffix('\n').unwrap_or(value);
        args.insert(key, Value::String(value.to_string()));
        from = stop + close.len();
    }
    Some((name.to_string(), args, text[..at].to_string()))
}

fn assistant(rec: &mut Recorder, m: &Value, blocks: &[Value], xml: &mut Option<Pending>, native: &mut Vec<Pending>) {
    let model = m.pointer("/modelInfo/modelId").and_then(Value::as_str);
    if let Some(name) = model {
        rec.model(name);
    }
    let (mut said, mut reasoning) = (Vec::new(), Vec::new());
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let mut text = text_of(b).to_string();
                while let Some((inner, rest)) = cut(&text, "thinking") {
                    reasoning.push(inner.trim().to_string());
                    text = rest;
                }
                match (xml.is_none(), xml_call(&text)) {
                    (true, Some((name, args, before))) => {
                        said.push(before.trim().to_string());
                        *xml = Some(Pending { name, args, id: None });
                    }
                    _ => said.push(text.trim().to_string()),
                }
            }
            Some("thinking") => reasoning.push(b.get("thinking").and_then(Value::as_str).unwrap_or("").to_string()),
            Some("reasoning") => reasoning.push(text_of(b).to_string()),
            Some("tool_use") => native.push(Pending {
                name: b.get("name").and_then(Value::as_str).unwrap_or("unknown").to_string(),
                args: b.get("input").and_then(Value::as_object).cloned().unwrap_or_default(),
                id: b.get("id").and_then(Value::as_str).map(str::to_string),
            }),
            _ => {}
        }
    }
    said.retain(|s| !s.is_empty());
    reasoning.retain(|s| !s.is_empty());
    rec.message(Message::assistant(said.join("\n")).reasoning(reasoning.join("\n\n")).model(model));
}

fn user(rec: &mut Recorder, blocks: &[Value], xml: &mut Option<Pending>, native: &mut Vec<Pending>) {
    let mut i = 0;
    while i < blocks.len() {
        let b = &blocks[i];
        i += 1;
        match b.get("type").and_then(Value::as_str) {
            Some("tool_result") => {
                let id = b.get("tool_use_id").and_then(Value::as_str);
                let result = tools::text(b.get("content"));
                let at = native.iter().position(|p| p.id.as_deref() == id).or((!native.is_empty()).then_some(0));
                match at {
                    Some(at) => {
                        let p = native.remove(at);
                        finish(rec, p, &result);
                    }
                    None => rec.note("a tool result without its call"),
                }
            }
            Some("text") => {
                let text = text_of(b);
                if let Some(h) = HEADER.find(text) {
                    // The XML era's result: the header, then the result in this block
                    // or the next.
                    let mut result = text[h.end()..].trim_start_matches('\n').to_string();
                    if result.is_empty()
                        && blocks.get(i).is_some_and(|n| n.get("type").and_then(Value::as_str) == Some("text"))
                    {
                        result = text_of(&blocks[i]).to_string();
                        i += 1;
                    }
                    match xml.take() {
                        Some(p) => finish(rec, p, &result),
                        None => {
                            if let Some(p) = (!native.is_empty()).then(|| native.remove(0)) {
                                finish(rec, p, &result)
                            }
                        }
                    }
                    continue;
                }
                words(rec, text);
            }
            _ => {}
        }
    }
}

/// A user message's words: the task, the person's later words, or the harness's.
fn words(rec: &mut Recorder, text: &str) {
    let mut text = text.to_string();
    while let Some((inner, rest)) = cut(&text, "environment_details") {
        if let Some(dir) = WORKDIR.captures(inner) {
            if rec.workdir_known().is_none() {
                rec.workdir(dir[1].trim());
            }
        }
        text = rest;
    }
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    if text.starts_with("[TASK RESUMPTION]")
        || text.starts_with("[ERROR]")
        || text.starts_with("<explicit_instructions")
    {
        rec.message(Message::harness(text));
        return;
    }
    let unwrapped = ["task", "feedback", "answer", "user_message"]
        .iter()
        .find_map(|t| cut(text, t).map(|(inner, _)| inner.trim().to_string()))
        .unwrap_or_else(|| text.to_string());
    rec.person_said(None, unwrapped);
}

fn unanswered(rec: &mut Recorder, p: Pending) {
    let kind = tools::classify(normalise(&p.name), &p.args, &SUBMIT_TOOLS);
    let call =
        Call::new(&p.name).command(Value::Object(p.args.clone()).to_string()).id(p.id).arguments(Value::Object(p.args));
    // The agent's `attempt_completion` is its claim whether or not the person answered
    // it (the history keeps the answer only once there is one).
    if let Kind::Submit(_) = kind {
        tools::record(rec, kind, call, tools::Done { ok: true, diff: None, claims: true });
        return;
    }
    rec.note("a tool call without a result (the task stopped before it ran, or its answer is not kept)");
    rec.opaque(call);
}

/// A call with its result.
fn finish(rec: &mut Recorder, p: Pending, result: &str) {
    let generic = normalise(&p.name);
    let kind = tools::classify(generic, &p.args, &SUBMIT_TOOLS);
    let command = match &kind {
        Kind::Shell(c) | Kind::Python(c) => c.clone(),
        _ => Value::Object(p.args.clone()).to_string(),
    };
    let denied = result.contains("The user denied this operation") || result.contains("\"status\":\"denied\"");
    let failed = denied
        || result.contains("The tool execution failed")
        || result.trim_start().starts_with("{\"status\":\"error\"")
        || result.trim_start().starts_with("<error>");
    let mut call = Call::new(&p.name)
        .command(command)
        .id(p.id.clone())
        .arguments(Value::Object(p.args.clone()))
        .output(result)
        .is_error(Some(failed));
    if denied {
        rec.person_decision(None, false, "the person denied the call");
        rec.refused(call, kind.refused_kind());
        return;
    }
    if let Kind::Shell(_) = kind {
        // Cline 3.58+ and Roo print the exit code; older Cline prints none: unknown.
        let code = EXIT.captures(result).and_then(|c| c[1].parse::<i64>().ok());
        call = call.exit(code, Grade::Derived);
    }
    let diff = match (&kind, failed) {
        (Kind::Edit(..), false) => edit_diff(&p.name, &p.args),
        _ => None,
    };
    tools::record(rec, kind, call, tools::Done { ok: !failed, diff, claims: !failed });
}

/// An edit's diff from its arguments: a whole file written, or SEARCH / REPLACE blocks.
fn edit_diff(name: &str, args: &Map<String, Value>) -> Option<(String, bool)> {
    let path = tools::arg(args, &["path"])?;
    if name == "write_to_file" {
        return Some((crate::diff::unified(path, None, Some(tools::arg(args, &["content"])?)), false));
    }
    let blocks = search_replace(tools::arg(args, &["diff"])?);
    if blocks.is_empty() {
        return tools::edit_diff(normalise(name), args, "");
    }
    let diffs: Vec<String> = blocks.iter().map(|(old, new)| crate::diff::fragment(path, old, new)).collect();
    Some((diffs.join(""), true))
}

/// The (search, replace) pairs of a SEARCH / REPLACE diff (Cline's `------- SEARCH` /
/// `=======` / `+++++++ REPLACE`, the older `<<<<<<< SEARCH` / `>>>>>>> REPLACE`, and
/// Roo's `:start_line:` lines).
fn search_replace(diff: &str) -> Vec<(String, String)> {
    let marker = |l: &str, ch: &[char], word: &str| {
        let l = l.trim_end();
        let body = l.trim_end_matches('>');
        body.ends_with(word)
            && body.len() > word.len() + 3
            && body[..body.len() - word.len() - 1].chars().all(|c| ch.contains(&c))
    };
    let (mut out, mut old, mut new, mut state) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for line in diff.lines() {
        if marker(line, &['-', '<'], "SEARCH") {
            (old, new, state) = (Vec::new(), Vec::new(), 1);
        } else if state == 1
            && (line.starts_with(":start_line:") || line.starts_with(":end_line:") || line == "-------")
        {
            continue;
        } else if state == 1 && line.trim_end() == "=======" {
            state = 2;
        } else if state == 2 && marker(line, &['+', '>'], "REPLACE") {
            out.push((old.join("\n"), new.join("\n")));
            state = 0;
        } else if state == 1 {
            old.push(line);
        } else if state == 2 {
            new.push(line);
        }
    }
    out
}
