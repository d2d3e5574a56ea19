//! Pi (`pi`): the coding agent's JSON Lines session trees,
//! `~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl`, versions 1 to 3
//! (docs/importers.md §9.11).
//!
//! The first line is the header (`type: "session"`, `id`, `cwd`, `version`). Every other
//! line is an entry; from version 2 entries form a tree (`id`, `parentId`), and the
//! conversation is the path from the file's last entry back to its root, as pi's own
//! `buildSessionContext` reads it (entries on other branches were abandoned: counted in
//! a note). Version 1 has no tree: its entries are one path in file order, as pi's
//! migration makes them.
//!
//! On the path: a user message is the person's (the first the task); an assistant
//! message is the model's text, thinking, usage and model, then its `toolCall` blocks,
//! each with the `toolResult` of its id (a bash result's exit code is in its text:
//! `Command exited with code N` when it failed, else 0); `bashExecution` is the person's
//! `!cmd` with its exit code; compactions and branch summaries are the harness's words.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::recorder::Message;
use crate::tools::{self, Kind, SUBMIT_TOOLS};
use crate::{Call, Context, Format, Grade, Input, Part, Plan, Recorder, Refusal, Unit};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("pi");

/// The registry's Pi reader.
pub(crate) struct Pi;

/// Pi's header: `{"type": "session", "id": ..., "cwd": ...}` (after a fork's optional
/// `title` line).
fn header(o: &Map<String, Value>) -> bool {
    o.get("type").and_then(Value::as_str) == Some("session")
        && o.get("id").is_some_and(Value::is_string)
        && o.contains_key("cwd")
}

impl crate::Importer for Pi {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Pi coding agent sessions (~/.pi/agent/sessions, JSON Lines trees, versions 1 to 3)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["2026-01-01T10-00-00-000Z_session.jsonl"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        let first = s.first.as_ref()?;
        let titled = first.get("type").and_then(Value::as_str) == Some("title");
        let head = if titled { s.objects().nth(1) } else { Some(first.clone()) };
        head.is_some_and(|h| header(&h)).then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        crate::whole_files(FORMAT, inputs, plan)
    }
    fn read(&self, unit: &Unit, _: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(&unit.files[0])]
    }
}

/// The file's lines as JSON objects (a line that is none is refused with its number).
fn lines(input: &Input) -> Result<Vec<Map<String, Value>>, Refusal> {
    let text = input.text()?;
    let all: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in all.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match epistore_package::json_from_str::<Value>(line) {
            Ok(Value::Object(o)) => out.push(o),
            Ok(_) => return Err(Refusal::at_line(input.display(), i + 1, "expected a JSON object")),
            Err(e) => return Err(Refusal::at_line(input.display(), i + 1, format!("malformed JSON: {e}"))),
        }
    }
    Ok(out)
}

fn s<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// The conversation: the path from the last entry to its root (version 1: every entry
/// in order), and how many entries lie on other branches.
fn path(entries: Vec<Map<String, Value>>) -> (Vec<Map<String, Value>>, usize) {
    let tree = entries.iter().any(|e| e.contains_key("id"));
    if !tree {
        return (entries, 0);
    }
    let total = entries.len();
    let index: HashMap<String, usize> =
        entries.iter().enumerate().filter_map(|(i, e)| s(e, "id").map(|id| (id.to_string(), i))).collect();
    let mut on_path = Vec::new();
    let mut at = entries.len().checked_sub(1);
    let mut seen = std::collections::HashSet::new();
    while let Some(i) = at {
        if !seen.insert(i) {
            break; // a cycle: the walk stops
        }
        on_path.push(i);
        at = entries[i].get("parentId").and_then(Value::as_str).and_then(|p| index.get(p).copied());
    }
    on_path.reverse();
    let mut slots: Vec<Option<Map<String, Value>>> = entries.into_iter().map(Some).collect();
    let kept: Vec<Map<String, Value>> = on_path.iter().filter_map(|&i| slots[i].take()).collect();
    let off = total - kept.len();
    (kept, off)
}

fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str).or_else(|| b.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        other => tools::text(other),
    }
}

/// A message's time: the entry's ISO time, else the message's epoch milliseconds.
/// A tool result message and the time it was written.
type ToolResult<'a> = (&'a Map<String, Value>, Option<String>);

fn when(entry: &Map<String, Value>, m: &Map<String, Value>) -> Option<String> {
    s(entry, "timestamp").map(str::to_string).or_else(|| {
        let ms = m.get("timestamp").and_then(Value::as_i64)?;
        chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
    })
}

fn read(input: &Input) -> Result<Recorder, Refusal> {
    let mut all = lines(input)?;
    if all.first().is_some_and(|o| s(o, "type") == Some("title")) {
        all.remove(0);
    }
    let Some(head) = all.first().filter(|o| header(o)) else {
        return Err(Refusal::at_line(
            input.display(),
            1,
            "expected a Pi session header (`type: session`, `id`, `cwd`)",
        ));
    };
    let head = head.clone();
    let id = s(&head, "id").unwrap_or_default().to_string();
    let mut rec = Recorder::new(FORMAT, id);
    rec.source(&input.file_name(), &input.blake3()?, Part::Whole, input.read()?)?;
    if let Some(cwd) = s(&head, "cwd") {
        rec.workdir(cwd);
    }
    rec.saw_time(s(&head, "timestamp"));
    // A version 1 header names the model.
    if let Some(m) = s(&head, "modelId") {
        rec.model(m);
    }
    let entries: Vec<Map<String, Value>> = all.into_iter().skip(1).collect();
    let (entries, off) = path(entries);
    if off > 0 {
        rec.note(format!("{off} entries are on branches the session left (/tree): not in the episode"));
    }
    Mapper { rec: &mut rec, task_seen: false, model_seen: false }.entries(&entries);
    Ok(rec)
}

struct Mapper<'a> {
    rec: &'a mut Recorder,
    task_seen: bool,
    model_seen: bool,
}

impl Mapper<'_> {
    fn entries(&mut self, entries: &[Map<String, Value>]) {
        self.rec.record_messages();
        // Tool results by the id of their call, with the time each was written.
        let results: HashMap<&str, ToolResult> = entries
            .iter()
            .filter_map(|e| e.get("message").and_then(Value::as_object).map(|m| (e, m)))
            .filter(|(_, m)| s(m, "role") == Some("toolResult"))
            .filter_map(|(e, m)| s(m, "toolCallId").map(|id| (id, (m, when(e, m)))))
            .collect();
        for e in entries {
            let ts = s(e, "timestamp");
            self.rec.saw_time(ts);
            match s(e, "type").unwrap_or("") {
                "message" => {
                    if let Some(m) = e.get("message").and_then(Value::as_object) {
                        self.message(e, m, &results);
                    }
                }
                "model_change" => {
                    if let (false, Some(m)) = (self.model_seen, s(e, "modelId").or(s(e, "model"))) {
                        self.rec.model(m);
                        self.model_seen = true;
                    }
                }
                "compaction" | "branch_summary" => {
                    let kind = s(e, "type").unwrap_or("");
                    self.rec
                        .note(format!("the session has a {kind}: the model saw a summary, not every earlier entry"));
                    self.rec.message(Message::harness(s(e, "summary").unwrap_or("")).ts(ts));
                }
                "custom_message" => {
                    self.rec.message(Message::harness(text_of(e.get("content"))).ts(ts));
                }
                _ => {} // settings, labels, extensions' state: not the conversation
            }
        }
    }

    fn message(&mut self, e: &Map<String, Value>, m: &Map<String, Value>, results: &HashMap<&str, ToolResult>) {
        let ts = when(e, m);
        let ts = ts.as_deref();
        match s(m, "role").unwrap_or("") {
            "user" => {
                let said = text_of(m.get("content"));
                // A slash command (`/mode`, `/model`) sets pi up: not a prompt.
                if said.trim_start().starts_with('/') {
                    self.rec.message(Message::human(said).ts(ts));
                    return;
                }
                if !self.task_seen {
                    self.task_seen = true;
                    self.rec.task_prompt(&said);
                } else {
                    self.rec.person_message(ts, &said);
                }
                self.rec.message(Message::human(said).ts(ts));
            }
            "assistant" => self.assistant(m, ts, results),
            "bashExecution" => {
                // `!cmd` typed by the person: their command, with its exit code.
                let command = s(m, "command").unwrap_or("");
                let mut call = Call::new("bash").command(command).ts(ts);
                call = call.exit(m.get("exitCode").and_then(Value::as_i64), Grade::Observed);
                if let Some(out) = s(m, "output") {
                    call = call.output(out);
                }
                self.rec.person_command(call, command);
            }
            "custom" | "hookMessage" => {
                self.rec.message(Message::harness(text_of(m.get("content"))).ts(ts));
            }
            _ => {} // toolResult: read with its call
        }
    }

    fn assistant(&mut self, m: &Map<String, Value>, ts: Option<&str>, results: &HashMap<&str, ToolResult>) {
        let blocks: Vec<&Value> = m.get("content").and_then(Value::as_array).into_iter().flatten().collect();
        let of = |t: &str, key: &str| -> Vec<String> {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(t))
                .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_string))
                .collect()
        };
        let usage = m.get("usage");
        let n = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_i64);
        // `input` leaves out the cache: every token the model read is the three.
        let read = n("input").map(|i| i + n("cacheRead").unwrap_or(0) + n("cacheWrite").unwrap_or(0));
        self.rec.tokens(read, n("output"));
        if read.is_some() {
            self.rec.cache_tokens(n("cacheRead"), n("cacheWrite"));
        }
        if let Some(usd) = usage.and_then(|u| u.pointer("/cost/total")).and_then(Value::as_f64) {
            self.rec.usd(usd);
        }
        let model = s(m, "model");
        if let (false, Some(name)) = (self.model_seen, model) {
            self.rec.model(name);
            self.model_seen = true;
        }
        self.rec.message(
            Message::assistant(of("text", "text").join("\n"))
                .reasoning(of("thinking", "thinking").join("\n\n"))
                .tokens(read, n("output"))
                .model(model)
                .ts(ts),
        );
        for b in blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall")) {
            self.call(b, ts, results);
        }
        match s(m, "stopReason") {
            Some("aborted") => {
                self.rec.person_abort(ts, "the person stopped the reply (Escape)");
            }
            Some("error") => {
                let why = s(m, "errorMessage").unwrap_or("an error ended the reply");
                self.rec.note(format!("a reply ended in an error: {}", why.lines().next().unwrap_or("")));
            }
            _ => {}
        }
    }

    fn call(&mut self, b: &Value, ts: Option<&str>, results: &HashMap<&str, ToolResult>) {
        let name = b.get("name").and_then(Value::as_str).unwrap_or("unknown");
        let empty = Map::new();
        let args = b.get("arguments").and_then(Value::as_object).unwrap_or(&empty);
        let id = b.get("id").and_then(Value::as_str);
        let result = id.and_then(|id| results.get(id));
        let kind = tools::classify(name, args, &SUBMIT_TOOLS);
        let command = match &kind {
            Kind::Shell(c) | Kind::Python(c) => c.clone(),
            _ => Value::Object(args.clone()).to_string(),
        };
        let mut call = Call::new(name).command(command).ts(ts).id(id).arguments(Value::Object(args.clone()));
        let Some((result, written)) = result else {
            // A call of a reply that errored or was stopped: it never ran.
            self.rec.note("a tool call without a result (its reply errored or was stopped): its outcome is unknown");
            self.rec.opaque(call);
            return;
        };
        // Pi runs the calls of one reply at once (its default `toolExecution`), all
        // starting when the reply ends and each ending by the time its result is
        // written: that span lets a check overlapping another call's edit be bound to the
        // revision before it (docs/importers.md §10).
        call = call.ended_by(written.clone());
        let output = text_of(result.get("content"));
        let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
        call = call.output(output.clone()).is_error(Some(failed));
        if let Kind::Shell(_) = kind {
            let code = match exited(&output) {
                Some(c) => Some(c),
                None if !failed => Some(0),
                None => None,
            };
            if failed && code.is_none() {
                call = call.failure("other");
            }
            call = call.exit(code, Grade::Derived);
        }
        let diff = match (&kind, failed) {
            (Kind::Edit(..), false) => match result.get("details").and_then(|d| d.get("patch")).and_then(Value::as_str)
            {
                Some(p) => Some((p.to_string(), false)),
                None => tools::edit_diff(name, args, &output),
            },
            _ => None,
        };
        tools::record(self.rec, kind, call, tools::Done { ok: !failed, diff, claims: !failed });
    }
}

/// The exit code a failed bash call's text ends with (`Command exited with code N`).
fn exited(output: &str) -> Option<i64> {
    let at = output.rfind("Command exited with code ")?;
    output[at + "Command exited with code ".len()..].split_whitespace().next()?.trim_end_matches('.').parse().ok()
}
