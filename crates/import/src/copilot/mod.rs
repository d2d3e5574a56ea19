//! GitHub Copilot CLI (`copilot-cli`): `~/.copilot/session-state/<id>/events.jsonl`
//! (docs/importers.md §9.12).
//!
//! Every line is an event `{type, data, id, timestamp, parentId}`; `parentId` names the
//! event before it, which may be one the file does not keep (ephemeral events are not
//! written), so events are read in file order. A `user.message` is the person's (the
//! first the task); an `assistant.message` is the model's text and its `toolRequests`;
//! each request's result is the `tool.execution_complete` of its `toolCallId`
//! (`success`, `result.content`, `result.detailedContent`, `error`). Exit codes: a
//! `shell_exit` content entry when the CLI writes one, else the `<exited with exit code
//! N>` line that ends a shell call's text; edit diffs: `detailedContent` of an edit or
//! create call (a unified `diff --git`), never of `view`, whose text can look like one.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, Context, Format, Grade, Input, Part, Plan, Recorder, Refusal, Unit};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("copilot-cli");

/// The registry's Copilot CLI reader.
pub(crate) struct Copilot;

impl crate::Importer for Copilot {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "GitHub Copilot CLI sessions (~/.copilot/session-state/ID/events.jsonl)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["events.jsonl"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        let first = s.first.as_ref()?;
        let start = first.get("type").and_then(Value::as_str) == Some("session.start")
            && first.get("data").is_some_and(|d| d.get("sessionId").is_some() || d.get("producer").is_some());
        start.then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        crate::whole_files(FORMAT, inputs, plan)
    }
    fn read(&self, unit: &Unit, _: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(&unit.files[0])]
    }
}

fn s<'a>(o: &'a Value, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// An event's `data` (null when it has none).
fn data(e: &Map<String, Value>) -> &Value {
    static NONE: Value = Value::Null;
    e.get("data").unwrap_or(&NONE)
}

fn events(input: &Input) -> Result<Vec<Map<String, Value>>, Refusal> {
    let text = input.text()?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match epistore_package::json_from_str::<Value>(line) {
            // Events the CLI streams but does not keep, in a stdout capture: not the log.
            Ok(Value::Object(o)) if o.get("ephemeral").and_then(Value::as_bool) == Some(true) => {}
            Ok(Value::Object(o)) => out.push(o),
            Ok(_) => return Err(Refusal::at_line(input.display(), i + 1, "expected a JSON object")),
            Err(e) => return Err(Refusal::at_line(input.display(), i + 1, format!("malformed JSON: {e}"))),
        }
    }
    Ok(out)
}

fn read(input: &Input) -> Result<Recorder, Refusal> {
    let events = events(input)?;

    let Some(start) = events.first().filter(|e| e.get("type").and_then(Value::as_str) == Some("session.start")) else {
        return Err(Refusal::at_line(
            input.display(),
            1,
            "expected a Copilot CLI session: a `session.start` event first",
        ));
    };
    let start = data(start).clone();
    let id = s(&start, "sessionId").map(str::to_string).unwrap_or_else(|| {
        // The session folder's name is its id.
        input.path.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    });
    let mut rec = Recorder::new(FORMAT, id);
    rec.source(&input.file_name(), &input.blake3()?, Part::Whole, input.read()?)?;
    rec.harness_version(s(&start, "copilotVersion"));
    if let Some(cwd) = start.pointer("/context/cwd").and_then(Value::as_str) {
        rec.workdir(cwd);
    }
    if let Some(repo) = start.pointer("/context/repository").and_then(Value::as_str) {
        rec.cluster(repo);
    }
    rec.record_messages();
    // Results by the call they answer.
    let results: HashMap<&str, &Map<String, Value>> = events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("tool.execution_complete"))
        .filter_map(|e| s(data(e), "toolCallId").map(|id| (id, e)))
        .collect();
    let mut models: Vec<String> = s(&start, "selectedModel").map(str::to_string).into_iter().collect();
    let mut output_tokens: Option<i64> = None;
    let mut shutdowns = 0;
    for e in &events {
        let ts = e.get("timestamp").and_then(Value::as_str);
        rec.saw_time(ts);
        let d = data(e);
        match e.get("type").and_then(Value::as_str).unwrap_or("") {
            "user.message" => {
                let said = s(d, "content").unwrap_or("").to_string();
                let skill = s(d, "source").is_some_and(|x| x.starts_with("skill-"));
                if skill || said.trim_start().starts_with("<skill-context") {
                    rec.message(Message::harness(said).ts(ts));
                } else {
                    rec.person_said(ts, said);
                }
            }
            "system.message" => {
                rec.message(Message::system(s(d, "content").unwrap_or("")).ts(ts));
            }
            "session.model_change" => models.extend(s(d, "newModel").map(str::to_string)),
            "assistant.reasoning" => {
                rec.message(Message::assistant("").reasoning(s(d, "content").unwrap_or("")).ts(ts));
            }
            "assistant.message" => {
                let model = s(d, "model").map(str::to_string);
                models.extend(model.clone());
                let out = d.get("outputTokens").and_then(Value::as_i64);
                if let Some(o) = out {
                    *output_tokens.get_or_insert(0) += o;
                }
                rec.message(Message::assistant(s(d, "content").unwrap_or("")).tokens(None, out).model(model).ts(ts));
                for req in d.get("toolRequests").and_then(Value::as_array).into_iter().flatten() {
                    call(&mut rec, req, &results, ts);
                }
            }
            "abort" => {
                rec.person_abort(ts, s(d, "reason").unwrap_or("aborted"));
            }
            "session.error" => {
                rec.note(format!(
                    "session error ({}): {}",
                    s(d, "errorType").unwrap_or("?"),
                    s(d, "message").unwrap_or("")
                ));
            }
            "session.compaction_complete" => {
                rec.note("the context was compacted: the model saw a summary, not every earlier event");
                if let Some(summary) = s(d, "summaryContent") {
                    rec.message(Message::harness(summary).ts(ts));
                }
            }
            "session.task_complete" => {
                rec.complete(ts, s(d, "summary"));
            }
            "session.shutdown" => {
                models.extend(s(d, "currentModel").map(str::to_string));
                shutdown_usage(&mut rec, d);
                shutdowns += 1;
            }
            _ => {} // lifecycle, hooks, permissions: not the conversation
        }
    }
    // The model that answered: the last one named (a model change, the messages').
    if let Some(m) = models.last() {
        rec.model(m.clone());
    }
    if rec.workdir_known().is_none() {
        rec.note("the session names no working directory (copilot before 1.0 wrote no `context`)");
    }
    if shutdowns == 0 {
        // No process totals (a session still open, or a CLI before 0.0.422): the
        // messages' own output counts, and no input count.
        rec.tokens(None, output_tokens);
    }
    Ok(rec)
}

/// The session's totals from `session.shutdown.modelMetrics` (one shutdown per process:
/// a resumed session has several, summed): `inputTokens` counts the cache too.
fn shutdown_usage(rec: &mut Recorder, d: &Value) {
    for m in d.get("modelMetrics").and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
        let usage = m.get("usage").unwrap_or(m);
        let n = |k: &str| usage.get(k).and_then(Value::as_i64);
        rec.tokens(n("inputTokens"), n("outputTokens"));
    }
}

/// One tool request with its result.
fn call(rec: &mut Recorder, req: &Value, results: &HashMap<&str, &Map<String, Value>>, ts: Option<&str>) {
    let name = s(req, "name").unwrap_or("unknown");
    // Arguments: an object, or (some versions) the object as a JSON string.
    let args: Map<String, Value> = match req.get("arguments") {
        Some(Value::Object(o)) => o.clone(),
        Some(Value::String(t)) => match epistore_package::json_from_str::<Value>(t) {
            Ok(Value::Object(o)) => o,
            _ => Map::new(),
        },
        _ => Map::new(),
    };
    let id = s(req, "toolCallId");
    let kind = tools::classify(name, &args, &SUBMIT_TOOLS);
    let command = match &kind {
        Kind::Shell(c) | Kind::Python(c) => c.clone(),
        _ => Value::Object(args.clone()).to_string(),
    };
    let mut call = Call::new(name).command(command).ts(ts).id(id).arguments(Value::Object(args.clone()));
    let finished = id.and_then(|id| results.get(id));
    let Some(done) = finished.and_then(|e| e.get("data")) else {
        rec.note("a tool request without a result (the session ended or was stopped first): its outcome is unknown");
        rec.opaque(call);
        return;
    };
    rec.saw_time(finished.and_then(|e| e.get("timestamp")).and_then(Value::as_str));
    let success = done.get("success").and_then(Value::as_bool) != Some(false);
    let result = done.get("result");
    let content = result.and_then(|r| s(r, "content")).unwrap_or("");
    let error = done.get("error").and_then(|e| s(e, "message").or_else(|| e.as_str()));
    call = call.output(if success { content.to_string() } else { error.unwrap_or(content).to_string() });
    call = call.is_error(Some(!success));
    if !success {
        let denied = done.get("error").and_then(|e| s(e, "code")) == Some("denied")
            || error.is_some_and(|m| m.contains("denied"));
        if denied {
            rec.person_decision(ts, false, error.unwrap_or("denied"));
            rec.refused(call, kind.refused_kind());
            return;
        }
        call = call.failure("other");
    }
    if let Kind::Shell(_) = kind {
        call = call.exit(shell_exit(result), Grade::Derived);
    }
    let diff = match (&kind, success) {
        (Kind::Edit(..), true) => match result.and_then(|r| s(r, "detailedContent")).filter(|d| d.contains("\n+++ ")) {
            Some(d) => Some((d.trim_start_matches('\n').to_string(), false)),
            None => tools::edit_diff(name, &args, content),
        },
        _ => None,
    };
    tools::record(rec, kind, call, tools::Done { ok: success, diff, claims: success });
}

/// A shell call's exit code: its `shell_exit` content entry, else the `<exited with
/// exit code N>` line its text ends with.
fn shell_exit(result: Option<&Value>) -> Option<i64> {
    let result = result?;
    let structured = result.get("contents").and_then(Value::as_array).into_iter().flatten().find_map(|c| {
        (s(c, "type") == Some("shell_exit")).then(|| c.get("exitCode").and_then(Value::as_i64)).flatten()
    });
    structured.or_else(|| {
        let text = s(result, "content").unwrap_or("");
        let at = text.rfind("<exited with exit code ")?;
        text[at + "<exited with exit code ".len()..].split('>').next()?.trim().parse().ok()
    })
}
