//! A Goose [`Session`] into its episode. Tool responses come back in the next user
//! message, joined to their requests by id; a response's text for the model is the
//! item addressed to the assistant (the developer tools return one for the model and
//! one for the person's screen).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::Session;
use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, Grade, Recorder};

static EXITED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"Command exited with code (-?\d+)").expect("regex"));

fn s<'a>(o: &'a Value, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// A message's `created` (seconds; Goose reads a value past 1e10 as milliseconds).
fn when(m: &Value) -> Option<String> {
    let t = m.get("created").and_then(Value::as_i64)?;
    let ms = if t > 10_000_000_000 { t } else { t.saturating_mul(1000) };
    chrono::DateTime::from_timestamp_millis(ms).map(|d| d.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

fn blocks(m: &Value) -> impl Iterator<Item = &Value> {
    m.get("content").and_then(Value::as_array).into_iter().flatten()
}

fn kind_of(b: &Value) -> &str {
    s(b, "type").unwrap_or("")
}

pub(super) fn session(rec: &mut Recorder, session: &Session) {
    rec.record_messages();
    let info = &session.info;
    let text = |k: &str| info.get(k).and_then(Value::as_str);
    if let Some(dir) = text("working_dir").filter(|d| !d.is_empty()) {
        rec.workdir(dir);
    }
    let model_config = info.get("model_config_json").or_else(|| info.get("model_config"));
    if let Some(m) = model_config.and_then(|c| s(c, "model_name")) {
        rec.model(m);
    }
    let n = |k: &str| info.get(k).and_then(Value::as_i64);
    if n("accumulated_input_tokens").is_some() || n("accumulated_output_tokens").is_some() {
        let read = n("accumulated_input_tokens").map(|i| i + n("accumulated_cache_read_tokens").unwrap_or(0));
        rec.tokens(read, n("accumulated_output_tokens"));
    }
    if let Some(usd) = info.get("accumulated_cost").and_then(Value::as_f64).filter(|c| *c > 0.0) {
        rec.usd(usd);
    }
    if let Some(parent) = text("parent_session_id") {
        rec.note(format!("a subagent session (of session {parent})"));
    }
    if let Some(line) = session.cut_last_line {
        rec.note(format!("the file's last line ({line}) was cut short when Goose rewrote it: left out"));
    }
    // The responses of the session's calls, by the request's id.
    let results: HashMap<&str, &Value> = session
        .messages
        .iter()
        .flat_map(blocks)
        .filter(|b| kind_of(b) == "toolResponse")
        .filter_map(|b| Some((s(b, "id")?, b.get("toolResult")?)))
        .collect();
    for m in &session.messages {
        let ts = when(m);
        let ts = ts.as_deref();
        rec.saw_time(ts);
        let visible = m.pointer("/metadata/userVisible").and_then(Value::as_bool) != Some(false);
        match s(m, "role") {
            Some("user") => {
                let said: Vec<&str> = blocks(m).filter(|b| kind_of(b) == "text").filter_map(|b| s(b, "text")).collect();
                if said.is_empty() {
                    continue;
                }
                let said = said.join("\n");
                if visible {
                    rec.person_said(ts, said);
                } else {
                    rec.message(Message::harness(said).ts(ts));
                }
            }
            Some("assistant") => assistant(rec, m, ts, &results),
            _ => {}
        }
    }
}

fn assistant(rec: &mut Recorder, m: &Value, ts: Option<&str>, results: &HashMap<&str, &Value>) {
    let model = m
        .pointer("/metadata/inference/resolvedModel")
        .or_else(|| m.pointer("/metadata/inference/requestedModel"))
        .and_then(Value::as_str);
    if let Some(name) = model {
        rec.model(name);
    }
    let text: Vec<&str> = blocks(m).filter(|b| kind_of(b) == "text").filter_map(|b| s(b, "text")).collect();
    let thinking: Vec<&str> = blocks(m)
        .filter(|b| matches!(kind_of(b), "thinking" | "reasoning"))
        .filter_map(|b| s(b, "thinking").or(s(b, "text")))
        .collect();
    let usage = m.pointer("/metadata/usage");
    let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_i64);
    rec.message(
        Message::assistant(text.join("\n"))
            .reasoning(thinking.join("\n\n"))
            .tokens(tokens("inputTokens"), tokens("outputTokens"))
            .model(model)
            .ts(ts),
    );
    for b in blocks(m) {
        match kind_of(b) {
            "toolRequest" | "frontendToolRequest" => call(rec, b, ts, results),
            "contextLengthExceeded" | "summarizationRequested" => rec.note(
                "the context ran out and Goose summarised it: the model saw a summary, not every earlier message",
            ),
            _ => {}
        }
    }
}

/// A tool's name in the shared vocabulary: the developer extension's tools lose their
/// `developer__` prefix; `tree` lists files.
fn normalise(name: &str) -> &str {
    let bare = name.strip_prefix("developer__").unwrap_or(name);
    match bare {
        "tree" | "analyze" => "list_directory",
        other => other,
    }
}

/// A response's text for the model: the items addressed to the assistant, else all.
fn response_text(value: &Value) -> (String, Option<bool>) {
    let (items, is_error) = match value {
        Value::Array(items) => (items.as_slice(), None),
        Value::Object(o) => (
            o.get("content").and_then(Value::as_array).map_or(&[][..], Vec::as_slice),
            o.get("isError").and_then(Value::as_bool),
        ),
        _ => (&[][..], None),
    };
    let for_model = |i: &&Value| {
        i.pointer("/annotations/audience")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|r| r.as_str() == Some("assistant")))
    };
    let chosen: Vec<&Value> = if items.iter().any(|i| for_model(&i)) {
        items.iter().filter(for_model).collect()
    } else {
        items.iter().collect()
    };
    (chosen.iter().filter_map(|i| s(i, "text")).collect::<Vec<_>>().join("\n"), is_error)
}

fn call(rec: &mut Recorder, b: &Value, ts: Option<&str>, results: &HashMap<&str, &Value>) {
    let id = s(b, "id");
    let tool_call = b.get("toolCall").cloned().unwrap_or(Value::Null);
    if s(&tool_call, "status") == Some("error") {
        // The model's call could not be parsed: nothing ran.
        let why = s(&tool_call, "error").unwrap_or("").to_string();
        rec.note("a tool call Goose could not parse: it did not run");
        rec.opaque(Call::new("invalid").command(why.clone()).ts(ts).id(id).output(why).is_error(Some(true)));
        return;
    }
    let value = tool_call.get("value").cloned().unwrap_or(Value::Null);
    let name = s(&value, "name").unwrap_or("unknown").to_string();
    let args: Map<String, Value> = value.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
    let generic = normalise(&name);
    let kind = tools::classify(generic, &args, &SUBMIT_TOOLS);
    let command = match &kind {
        Kind::Shell(c) | Kind::Python(c) => c.clone(),
        _ => Value::Object(args.clone()).to_string(),
    };
    let mut call = Call::new(&name).command(command).ts(ts).id(id).arguments(Value::Object(args.clone()));
    let Some(result) = id.and_then(|id| results.get(id)) else {
        rec.note("a tool call without a response (the session stopped before it ran): its outcome is unknown");
        rec.opaque(call);
        return;
    };
    let (output, is_error, refused) = match s(result, "status") {
        Some("error") => {
            let why = s(result, "error").unwrap_or("").to_string();
            let refused = why.contains("declined") || why.contains("denied") || why.contains("Interrupted by the user");
            (why, Some(true), refused)
        }
        _ => {
            let (text, is_error) = response_text(result.get("value").unwrap_or(&Value::Null));
            (text, is_error, false)
        }
    };
    let failed = is_error == Some(true);
    call = call.output(output.clone()).is_error(Some(failed));
    if refused {
        rec.person_decision(ts, false, &output);
        rec.refused(call, kind.refused_kind());
        return;
    }
    if let Kind::Shell(_) = kind {
        // The newer shell says `Command exited with code N` and marks the result an
        // error; the older one (`developer__shell`) drops the code: unknown.
        let code = match EXITED.captures(&output).and_then(|c| c[1].parse::<i64>().ok()) {
            Some(c) => Some(c),
            None if is_error == Some(false) && !name.contains("__") => Some(0),
            None => None,
        };
        if failed && code.is_none() {
            call = call.failure("other");
        }
        call = call.exit(code, Grade::Derived);
    }
    let diff = match (&kind, failed) {
        (Kind::Edit(..), false) => edit_diff(&args),
        _ => None,
    };
    tools::record(rec, kind, call, tools::Done { ok: !failed, diff, claims: !failed });
}

/// An edit's diff from its arguments: `text_editor` (`write`'s `file_text`,
/// `str_replace`'s `old_str` / `new_str`), and the newer `write` (`content`) and `edit`
/// (`before` / `after`).
fn edit_diff(args: &Map<String, Value>) -> Option<(String, bool)> {
    let path = tools::arg(args, &["path"])?;
    let a = |k: &str| tools::arg(args, &[k]);
    if let Some(content) = a("file_text").or(a("content")) {
        return Some((crate::diff::unified(path, None, Some(content)), false));
    }
    match (a("old_str").or(a("before")), a("new_str").or(a("after"))) {
        (Some(old), Some(new)) => Some((crate::diff::fragment(path, old, new), true)),
        _ => None,
    }
}
