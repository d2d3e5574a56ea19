//! Codex CLI logs (docs/importers.md §2 to §7): session rollouts
//! (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) and `codex exec --json` output.
//!
//! Shapes read, as codex-rs wrote them over its versions:
//! - rollouts before `session_meta` existed: a first line `{"id", "timestamp",
//!   "instructions"?, "git"?}`, then bare response items and `{"record_type": "state"}`;
//! - rollouts of `RolloutLine {timestamp, type, payload}`: `session_meta`,
//!   `turn_context`, `response_item`, `event_msg`, `compacted` (and whatever later
//!   versions add, skipped when unknown);
//! - `codex exec --json`: `thread.started` / `turn.*` / `item.*` events (older:
//!   `session.created` and `item_type`), and the oldest form, a config summary, a
//!   `{"prompt"}` line and raw `{"id", "msg"}` protocol events.
//!
//! Which stream is authoritative: in a rollout the model's own tool calls
//! (`function_call`, `local_shell_call`, `custom_tool_call`, `web_search_call`), which
//! every rollout version persists, are the tool calls, each placed where it starts;
//! `exec_command_end`, `patch_apply_end` and `item_completed` command / file-change
//! items only add what they observed (exit code, duration, success, files), joined by
//! call id, so a call shown both ways is one tools record. A log with no response items
//! (exec output) is read from its events.
//!
//! The run's content (docs/format.md §9), each said once: in a rollout the response
//! items are the conversation (the events repeat them): `session_meta`
//! `base_instructions` and developer messages as `system`, user messages as a person's
//! or, for Codex's own blocks (`<environment_context>`, AGENTS.md, ... or a part whose
//! `provenance` says `harness`), the harness's, the model's words and its `reasoning`
//! (raw content where kept, else the summary), one record per content part; a
//! `token_count`'s `last_token_usage` goes on the last words or thinking of the
//! response it follows, the `turn_context` model on every agent message. A call's
//! output file is what the tool printed: the output the model saw without Codex's
//! `Exit code` / `Wall time` / `Output:` header (the exec event's whole output for a
//! command that ended), the `output` of a JSON payload. An `apply_patch`'s diff is its
//! patch event's or file-change item's per-file `unified_diff` where the log has one,
//! else its patch text converted, hunks numbered within the chunks. Exec output gives
//! the agent's words, thinking, commands' `aggregated_output`, MCP results.

mod calls;
mod events;
mod exec_json;
mod index;
mod rollout;
mod sink;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("codex");

/// One JSON Lines line: its 1-based number and its object.
pub(super) struct Line {
    pub n: usize,
    pub v: Map<String, Value>,
}

/// What a file is, from its first line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Rollout,
    /// `codex exec --json` thread events.
    Exec,
    /// The oldest `codex exec --json`: raw protocol events, read like a rollout's events.
    LegacyExec,
}

fn shape_of(first: &Map<String, Value>) -> Option<Shape> {
    let ty = first.get("type").and_then(Value::as_str).unwrap_or("");
    if first.contains_key("payload")
        || first.contains_key("record_type")
        || (first.contains_key("id") && first.contains_key("timestamp") && !first.contains_key("type"))
    {
        return Some(Shape::Rollout);
    }
    if ty.starts_with("thread.")
        || ty.starts_with("turn.")
        || ty.starts_with("item.")
        || ty == "session.created"
        || ty == "error"
    {
        return Some(Shape::Exec);
    }
    if first.get("msg").is_some_and(Value::is_object) || is_legacy_config(first) || is_legacy_prompt(first) {
        return Some(Shape::LegacyExec);
    }
    // A bare response item: an old rollout whose first line was lost is still items.
    if matches!(ty, "message" | "function_call" | "function_call_output" | "local_shell_call" | "reasoning") {
        return Some(Shape::Rollout);
    }
    None
}

/// The config summary the oldest `codex exec --json` printed first.
pub(super) fn is_legacy_config(v: &Map<String, Value>) -> bool {
    v.contains_key("model") && (v.contains_key("sandbox") || v.contains_key("approval") || v.contains_key("workdir"))
}

pub(super) fn is_legacy_prompt(v: &Map<String, Value>) -> bool {
    v.len() == 1 && v.get("prompt").is_some_and(Value::is_string)
}

/// The run's own id a line names, if any (plan phase: which thread a file belongs to).
pub(super) fn id_in(v: &Map<String, Value>) -> Option<String> {
    let s = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    match v.get("type").and_then(Value::as_str) {
        Some("session_meta") => v.get("payload").and_then(Value::as_object).and_then(|p| s(p, "id")),
        Some("thread.started") => s(v, "thread_id"),
        Some("session.created") => s(v, "session_id"),
        None if v.contains_key("timestamp") && !v.contains_key("msg") => s(v, "id"),
        _ => {
            let msg = v.get("msg").and_then(Value::as_object)?;
            (msg.get("type").and_then(Value::as_str) == Some("session_configured"))
                .then(|| s(msg, "session_id"))
                .flatten()
        }
    }
}

/// The first lines of a file: its shape and id, without reading a large log whole.
fn sniff(input: &Input) -> Result<(Option<Shape>, Option<String>), Refusal> {
    let file = input.open()?;
    let mut reader = BufReader::new(file);
    let (mut shape, mut id) = (None, None);
    let mut buf = String::new();
    for _ in 0..16 {
        buf.clear();
        if reader.read_line(&mut buf).map_err(|e| input.io(e))? == 0 {
            break;
        }
        let Ok(Value::Object(v)) = epistore_package::json_from_str::<Value>(buf.trim()) else {
            continue;
        };
        shape = shape.or_else(|| shape_of(&v));
        id = id.or_else(|| id_in(&v));
        if id.is_some() {
            break;
        }
    }
    Ok((shape, id))
}

pub(crate) fn plan(inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    let mut rollouts: BTreeMap<String, String> = BTreeMap::new();
    let mut execs: BTreeMap<Option<String>, Vec<Arc<Input>>> = BTreeMap::new();
    let mut units = Vec::new();
    for input in inputs {
        match sniff(&input) {
            Err(r) => plan.refuse(crate::codex::FORMAT, r),
            Ok((Some(Shape::Exec | Shape::LegacyExec), id)) => execs.entry(id).or_default().push(input),
            Ok((_, id)) => {
                if let Some(id) = id {
                    rollouts.entry(id).or_insert_with(|| input.file_name());
                }
                units.push(Unit::new(crate::codex::FORMAT, vec![input], Part::Whole));
            }
        }
    }
    for (id, mut files) in execs {
        files.sort_by_key(|f| f.display());
        match &id {
            Some(id) if rollouts.contains_key(id) => {
                for f in &files {
                    let reason = format!("superseded by the rollout {} of the same thread {id}", rollouts[id]);
                    plan.cover(crate::codex::FORMAT, f, reason);
                }
            }
            // Several outputs of one thread (a run and its `exec resume`s) make one run.
            Some(_) => units.push(Unit::new(crate::codex::FORMAT, files, Part::Whole)),
            None => units.extend(files.into_iter().map(|f| Unit::new(crate::codex::FORMAT, vec![f], Part::Whole))),
        }
    }
    plan.units.extend(units);
}

pub(crate) fn read(unit: &Unit, _ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
    vec![read_run(unit)]
}

pub(super) struct File {
    pub input: Arc<Input>,
    pub bytes: Vec<u8>,
    pub lines: Vec<Line>,
    pub shape: Shape,
}

fn read_run(unit: &Unit) -> Result<Recorder, Refusal> {
    let mut files = Vec::new();
    for input in &unit.files {
        let bytes = input.read()?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            let line = 1 + bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count();
            Refusal::at_line(input.display(), line, "not valid UTF-8")
        })?;
        let lines = parse_lines(input, text)?;
        let first = lines.first().ok_or_else(|| input.refuse(None, "empty: no Codex rollout or exec --json line"))?;
        let shape = shape_of(&first.v).ok_or_else(|| {
            Refusal::at_line(
                input.display(),
                first.n,
                "unknown structure: expected a Codex rollout line (`session_meta`, or the old \
                 `{\"id\", \"timestamp\"}` first line) or a `codex exec --json` event (`thread.started`, ...)",
            )
        })?;
        files.push(File { input: input.clone(), bytes, lines, shape });
    }
    if files[0].shape == Shape::Rollout {
        let f = files.remove(0);
        return rollout::read(&f.input, f.bytes, &f.lines);
    }
    exec_json::read(files)
}

/// Every non-blank line as a JSON object; anything else is refused at its line, a
/// truncated last line included.
fn parse_lines(input: &Input, text: &str) -> Result<Vec<Line>, Refusal> {
    let mut lines = Vec::new();
    let ends_with_newline = text.ends_with('\n');
    let raw: Vec<&str> = text.split('\n').collect();
    for (i, line) in raw.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        match epistore_package::json_from_str::<Value>(line) {
            Ok(Value::Object(v)) => lines.push(Line { n: i + 1, v }),
            Ok(_) => return Err(Refusal::at_line(input.display(), i + 1, "expected a JSON object per line")),
            Err(e) => {
                let last = i + 1 == raw.len() && !ends_with_newline;
                let what = if last { "truncated last line" } else { "not a JSON line" };
                return Err(Refusal::at_line(input.display(), i + 1, format!("{what}: expected a JSON object ({e})")));
            }
        }
    }
    Ok(lines)
}

// ---- small readers of loosely typed fields ------------------------------------------

pub(super) fn str_of<'a>(v: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str))
}

pub(super) fn i64_of(v: &Map<String, Value>, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_i64))
}

pub(super) fn obj<'a>(v: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// The text of a message's content: a string, or the `text` of its parts.
pub(super) fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
            texts.join("\n")
        }
        _ => String::new(),
    }
}

/// The readable thinking of a `reasoning` item, one string per part: its raw
/// `content` (`reasoning_text`) where the log keeps it, else its `summary` texts. An
/// item with only `encrypted_content` has none.
pub(super) fn reasoning_parts(item: &Map<String, Value>) -> Vec<String> {
    let texts = |key: &str| -> Vec<String> {
        let parts = item.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or(p.as_str()))
            .filter(|t| !t.trim().is_empty())
            .map(str::to_string)
            .collect()
    };
    let raw = texts("content");
    if raw.is_empty() {
        texts("summary")
    } else {
        raw
    }
}

/// Messages with role user that Codex writes itself (environment, instructions, shell
/// records, abort notices, skills, ...): a tag-wrapped block or the AGENTS.md preamble.
pub(super) fn tool_written(text: &str) -> bool {
    let t = text.trim();
    if t.starts_with("# AGENTS.md instructions")
        || t.starts_with("<user_instructions>")
        || t.starts_with("<environment_context>")
    {
        return true;
    }
    let Some(rest) = t.strip_prefix('<') else {
        return false;
    };
    let tag: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect();
    !tag.is_empty() && rest[tag.len()..].starts_with(['>', ' ']) && t.ends_with(&format!("</{tag}>"))
}

/// The repository a run worked on: the git remote, else the working directory's name.
pub(super) fn cluster_of(remote: Option<&str>, cwd: Option<&str>) -> Option<String> {
    if let Some(r) = remote.filter(|r| !r.trim().is_empty()) {
        return Some(without_credentials(r.trim()));
    }
    let cwd = cwd?.trim_end_matches('/');
    cwd.rsplit('/').next().filter(|c| !c.is_empty()).map(str::to_string)
}

/// A remote URL without its `user:password@` (`https://oauth2:TOKEN@gitlab.com/a/b`
/// is the repository `https://gitlab.com/a/b`): credentials name no repository, and a
/// cluster is shown and exported everywhere. `git@host:path` remotes have no password
/// and stay as they are.
fn without_credentials(remote: &str) -> String {
    let Some((scheme, rest)) = remote.split_once("://") else { return remote.to_string() };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => remote.to_string(),
    }
}

/// Call ids seen once, so a call shown by two event kinds is recorded once.
#[derive(Default)]
pub(super) struct Seen(BTreeSet<String>);

impl Seen {
    /// True the first time `id` is seen (an empty id is always new).
    pub fn first(&mut self, id: &str) -> bool {
        id.is_empty() || self.0.insert(id.to_string())
    }
}

/// The registry's Codex reader.
pub(crate) struct Codex;

/// A first line only Codex writes: a rollout's typed lines or its older header, or an
/// `exec --json` event.
fn codex_first(s: &crate::Sniff) -> bool {
    let has = |k: &str| s.first_has(k);
    let ty = s.first_type();
    matches!(ty, "session_meta" | "response_item" | "event_msg" | "turn_context")
        || ty.starts_with("thread.")
        || ty.starts_with("turn.")
        || ty.starts_with("item.")
        || (has("id") && has("instructions") && has("timestamp"))
        || (has("record_type") && !has("sessionId"))
        || codex_older(s)
}

/// Codex shapes the test above misses: an old rollout whose first line left out
/// `instructions` (`{"id", "timestamp", "git"?}`, then bare response items), the
/// `session.created` of early `codex exec --json`, and the oldest `codex exec --json`
/// (a config summary, then `{"id", "msg": {"type": ...}}` protocol events).
fn codex_older(s: &crate::Sniff) -> bool {
    let Some(first) = s.first.as_ref() else { return false };
    let has = |k: &str| first.contains_key(k);
    let second_is_item = || match s.text.lines().nth(1).map(epistore_package::json_from_str::<serde_json::Value>) {
        Some(Ok(serde_json::Value::Object(v))) => {
            v.contains_key("record_type")
                || matches!(
                    v.get("type").and_then(|t| t.as_str()),
                    Some("message" | "reasoning" | "function_call" | "function_call_output" | "local_shell_call")
                )
        }
        _ => false,
    };
    s.first_type() == "session.created"
        || (has("id") && has("timestamp") && !has("type") && first.len() <= 4 && (has("git") || second_is_item()))
        || (has("id") && first.get("msg").and_then(|m| m.get("type")).is_some_and(|t| t.is_string()))
        || (has("model") && has("approval") && has("sandbox") && !has("type"))
}

impl crate::Importer for Codex {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Codex CLI rollouts and `codex exec --json` output"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["rollout.jsonl"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        codex_first(s).then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        self::read(unit, ctx)
    }
}
