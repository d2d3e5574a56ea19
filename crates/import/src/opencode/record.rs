//! A [`Session`] into its episode.
//!
//! One assistant message is one step of the model (one request): its parts are the
//! step's start (with the workspace snapshot, a git tree id), its reasoning and text,
//! its tool calls (each call and its result in one part), and the step's end (tokens,
//! cost, the snapshot after). A user message's text parts are the person's words
//! (`synthetic` ones the harness's: file contents, reminders).

use serde_json::{Map, Value};

use super::Session;
use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, EditKind, Grade, Recorder};

fn s<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// Epoch milliseconds as RFC 3339.
fn ms(v: Option<&Value>) -> Option<String> {
    let ms = v.and_then(Value::as_i64)?;
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

fn time<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a Value> {
    o.get("time").and_then(|t| t.get(k))
}

fn parts_of<'a>(parts: &'a [Map<String, Value>], t: &'a str) -> impl Iterator<Item = &'a Map<String, Value>> + 'a {
    parts.iter().filter(move |p| s(p, "type") == Some(t))
}

pub(super) fn session(rec: &mut Recorder, session: &Session) {
    rec.record_messages();
    let info = &session.info;
    if let Some(dir) = s(info, "directory") {
        rec.workdir(dir);
    }
    rec.harness_version(s(info, "version"));
    rec.saw_time(ms(time(info, "created")).as_deref());
    if let Some(parent) = s(info, "parentID") {
        rec.note(format!("a subagent session (a `task` call of session {parent})"));
    }
    if info.get("revert").is_some_and(|r| !r.is_null()) {
        rec.note("the person reverted the session to an earlier message: what follows it was undone");
    }
    for (m, parts) in &session.messages {
        let ts = ms(time(m, "created"));
        rec.saw_time(ts.as_deref());
        match s(m, "role") {
            Some("user") => user(rec, parts, ts.as_deref()),
            Some("assistant") => assistant(rec, m, parts, ts.as_deref()),
            _ => {}
        }
        rec.saw_time(ms(time(m, "completed")).as_deref());
    }
}

fn user(rec: &mut Recorder, parts: &[Map<String, Value>], ts: Option<&str>) {
    let flag = |p: &Map<String, Value>, k: &str| p.get(k).and_then(Value::as_bool) == Some(true);
    let said: Vec<&str> = parts_of(parts, "text")
        .filter(|p| !flag(p, "synthetic") && !flag(p, "ignored"))
        .filter_map(|p| s(p, "text"))
        .collect();
    for p in parts_of(parts, "text").filter(|p| flag(p, "synthetic")) {
        rec.message(Message::harness(s(p, "text").unwrap_or("")).ts(ts));
    }
    if parts_of(parts, "compaction").next().is_some() {
        rec.note("the session was compacted: the model saw a summary, not every earlier message");
        rec.message(Message::harness("(compaction: summarise the conversation so far)").ts(ts));
    }
    if said.is_empty() {
        return;
    }
    rec.person_said(ts, said.join("\n"));
}

fn assistant(rec: &mut Recorder, m: &Map<String, Value>, parts: &[Map<String, Value>], ts: Option<&str>) {
    let model = s(m, "modelID");
    if let Some(name) = model {
        rec.model(name);
    }
    // Tokens and cost of the step: its step-finish parts (the message's own `tokens` are
    // overwritten step by step; its `cost` adds up).
    let (mut read, mut out, mut usd, mut steps) = (0i64, 0i64, 0f64, 0);
    let (mut cache_read, mut cache_write) = (0i64, 0i64);
    for f in parts_of(parts, "step-finish") {
        let t = |path: &str| f.get("tokens").and_then(|x| x.pointer(path)).and_then(Value::as_i64).unwrap_or(0);
        read += t("/input") + t("/cache/read") + t("/cache/write");
        cache_read += t("/cache/read");
        cache_write += t("/cache/write");
        out += t("/output") + t("/reasoning");
        usd += f.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
        steps += 1;
    }
    if steps == 0 {
        usd = m.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
    }
    let (read, out) = if steps > 0 { (Some(read), Some(out)) } else { (None, None) };
    rec.tokens(read, out);
    if steps > 0 {
        rec.cache_tokens(Some(cache_read), Some(cache_write));
    }
    if usd > 0.0 {
        rec.usd(usd);
    }
    let text: Vec<&str> = parts_of(parts, "text").filter_map(|p| s(p, "text")).collect();
    let reasoning: Vec<&str> =
        parts_of(parts, "reasoning").filter_map(|p| s(p, "text")).filter(|t| !t.is_empty()).collect();
    let mut said =
        Message::assistant(text.join("\n")).reasoning(reasoning.join("\n\n")).tokens(read, out).model(model).ts(ts);
    if m.get("summary").and_then(Value::as_bool) == Some(true) {
        said = said.author("compaction");
    }
    rec.message(said);
    // The workspace as each step's snapshots have it (a git tree id of the worktree): a
    // step's calls start from its start snapshot; its finish snapshot is the state after
    // it, the run's end state when nothing follows.
    for p in parts {
        match s(p, "type") {
            Some("step-start") => {
                rec.workspace_state(s(p, "snapshot"));
                rec.end_state(s(p, "snapshot"));
            }
            Some("tool") => {
                call(rec, p);
            }
            Some("step-finish") => {
                rec.workspace_state(s(p, "snapshot"));
                rec.end_state(s(p, "snapshot"));
            }
            _ => {}
        }
    }
    rec.workspace_state(None);
    if let Some(err) = m.get("error").and_then(Value::as_object) {
        let message = err.get("data").and_then(|d| d.get("message")).and_then(Value::as_str).unwrap_or("");
        match s(err, "name") {
            Some("MessageAbortedError") => {
                rec.person_abort(ts, "the person stopped the reply");
            }
            name => rec.note(format!(
                "a reply ended in an error ({}): {}",
                name.unwrap_or("unknown"),
                message.lines().next().unwrap_or("")
            )),
        }
    }
}

/// A tool part: the call, and its result when it has one.
fn call(rec: &mut Recorder, p: &Map<String, Value>) {
    let name = s(p, "tool").unwrap_or("unknown");
    let empty = Map::new();
    let state = p.get("state").and_then(Value::as_object).unwrap_or(&empty);
    let args = state.get("input").and_then(Value::as_object).unwrap_or(&empty);
    let meta = state.get("metadata").and_then(Value::as_object).unwrap_or(&empty);
    let mut kind = tools::classify(name, args, &SUBMIT_TOOLS);
    // A patch names its files in its text; OpenCode lists them in the metadata.
    if let Kind::Edit(EditKind::Edit, paths) = &mut kind {
        if paths.is_empty() {
            paths.extend(
                meta.get("files")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.get("filePath").and_then(Value::as_str).map(str::to_string)),
            );
        }
    }
    let command = match &kind {
        Kind::Shell(c) | Kind::Python(c) => c.clone(),
        _ => Value::Object(args.clone()).to_string(),
    };
    let ts = ms(time(state, "start"));
    let duration = match (time(state, "start").and_then(Value::as_f64), time(state, "end").and_then(Value::as_f64)) {
        (Some(a), Some(b)) if b >= a => Some(b - a),
        _ => None,
    };
    let mut call = Call::new(name)
        .command(command)
        .ts(ts.clone())
        .id(s(p, "callID"))
        .arguments(Value::Object(args.clone()))
        .duration(duration);
    let (output, failed) = match s(state, "status") {
        Some("completed") => (s(state, "output").unwrap_or("").to_string(), false),
        Some("error") => (s(state, "error").unwrap_or("").to_string(), true),
        _ => {
            // Pending or running when the log was read (or when OpenCode stopped).
            rec.note(
                "a tool call without a result (pending or running when the session was read): its outcome is unknown",
            );
            rec.opaque(call);
            return;
        }
    };
    call = call.output(output.clone()).is_error(Some(failed));
    if failed && output.contains("rejected permission") {
        rec.person_decision(ts.as_deref(), false, &output);
        rec.refused(call, kind.refused_kind());
        return;
    }
    if let Kind::Shell(_) = kind {
        // bash's metadata has the exit code (null when it was killed or timed out).
        let code = meta.get("exit").and_then(Value::as_i64);
        if failed && code.is_none() {
            call = call.failure("other");
        }
        call = call.exit(code, Grade::Observed);
    }
    let diff = match (&kind, failed) {
        (Kind::Edit(..), false) => edit_diff(name, args, meta, &output),
        _ => None,
    };
    tools::record(rec, kind, call, tools::Done { ok: !failed, diff, claims: !failed });
}

/// An edit's diff: the one OpenCode computed (`metadata.diff`, or `filediff`'s before
/// and after), else from the arguments.
fn edit_diff(name: &str, args: &Map<String, Value>, meta: &Map<String, Value>, output: &str) -> Option<(String, bool)> {
    if let Some(d) = s(meta, "diff").filter(|d| d.contains("@@")) {
        return Some((d.to_string(), false));
    }
    if let Some(f) = meta.get("filediff").and_then(Value::as_object) {
        if let Some(patch) = s(f, "patch") {
            return Some((patch.to_string(), false));
        }
        if let (Some(file), Some(before), Some(after)) = (s(f, "file"), s(f, "before"), s(f, "after")) {
            return Some((crate::diff::unified(file, Some(before), Some(after)), false));
        }
    }
    tools::edit_diff(name, args, output)
}
