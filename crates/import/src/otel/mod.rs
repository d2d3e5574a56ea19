//! Telemetry over OTLP (`claude-code-otel`, `codex-otel`, `gemini-cli-otel`): the log
//! events Claude Code, Codex and Gemini CLI export themselves, as OTLP JSON Lines (one
//! `ExportLogsServiceRequest` per line: what `epistore collect` keeps of a session, and
//! what an OpenTelemetry Collector's file exporter writes). docs/importers.md §9.18.
//!
//! Reading is two phases. [`events`] turns the requests into [`Event`]s: the agent,
//! the session, the event's bare name, its time and its attributes as plain JSON (an
//! `intValue` given as a string or a number alike), a record seen twice (a retried
//! batch) once. [`map`] turns one session's events into recorder calls, per agent.
//! [`merge`] adds a session's telemetry facts to the recorder of its session file: a
//! session seen both ways is one episode.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

mod map;
pub(crate) mod merge;
#[cfg(test)]
mod tests;

/// The agents whose telemetry is read, one format each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Agent {
    ClaudeCode,
    Codex,
    GeminiCli,
}

impl Agent {
    pub const ALL: [Agent; 3] = [Agent::ClaudeCode, Agent::Codex, Agent::GeminiCli];

    /// The telemetry's source format (section 9.18).
    pub fn format(self) -> Format {
        match self {
            Agent::ClaudeCode => Format::new("claude-code-otel"),
            Agent::Codex => Format::new("codex-otel"),
            Agent::GeminiCli => Format::new("gemini-cli-otel"),
        }
    }

    /// The format of the agent's own session files (its transcript): the other way the
    /// same session reaches the store.
    pub fn transcript(self) -> Format {
        match self {
            Agent::ClaudeCode => crate::claude_code::FORMAT,
            Agent::Codex => crate::codex::FORMAT,
            Agent::GeminiCli => crate::gemini_cli::FORMAT,
        }
    }

    /// The agent whose telemetry format, or whose session file format, `format` is.
    pub fn of(format: Format) -> Option<(Agent, bool)> {
        Agent::ALL.into_iter().find_map(|a| {
            if a.format() == format {
                Some((a, true))
            } else if a.transcript() == format {
                Some((a, false))
            } else {
                None
            }
        })
    }

    /// The prefix of its event names (`claude_code.user_prompt`).
    fn prefix(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude_code.",
            Agent::Codex => "codex.",
            Agent::GeminiCli => "gemini_cli.",
        }
    }

    /// The record attribute holding the session id.
    fn session_key(self) -> &'static str {
        match self {
            Agent::Codex => "conversation.id",
            Agent::ClaudeCode | Agent::GeminiCli => "session.id",
        }
    }
}

/// How a merged episode's note begins (`provenance.notes`): the mark that it holds a
/// session's telemetry beside its file.
pub const MERGED_NOTE: &str = "merged with the session's telemetry";

/// Whether a source copy is telemetry (OTLP JSON: a logs request, one per line or
/// alone, whose first key is `resourceLogs`), not an agent's own log.
pub fn is_telemetry(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    text.trim_start().strip_prefix('{').is_some_and(|rest| rest.trim_start().starts_with("\"resourceLogs\""))
}

/// One log event of an agent, decoded.
#[derive(Debug, Clone)]
pub struct Event {
    pub agent: Agent,
    pub session: String,
    /// The bare event name (`tool_result`), without the agent's prefix.
    pub name: String,
    /// Nanoseconds since the epoch: the record's time, else its `event.timestamp`, else
    /// when the exporter observed it (0 when none is given).
    pub nanos: u64,
    /// Attributes as plain JSON values (an empty `AnyValue` is null).
    pub attrs: Map<String, Value>,
    /// The body when it is a string.
    pub body: Option<String>,
    /// `service.version` of the resource: the agent's version.
    pub version: Option<String>,
}

impl Event {
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attrs.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
    }
    /// A whole number given as a number or as its decimal text (agents send both).
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.attrs.get(key)? {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    pub fn float(&self, key: &str) -> Option<f64> {
        match self.attrs.get(key)? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }
    /// A flag given as a boolean or as `"true"` / `"false"`.
    pub fn flag(&self, key: &str) -> Option<bool> {
        match self.attrs.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => s.parse().ok(),
            _ => None,
        }
    }
    /// RFC 3339 time with milliseconds, when the event has a time.
    pub fn ts(&self) -> Option<String> {
        if self.nanos == 0 {
            return None;
        }
        let t =
            chrono::DateTime::from_timestamp((self.nanos / 1_000_000_000) as i64, (self.nanos % 1_000_000_000) as u32)?;
        Some(t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
    }
}

/// A session of an agent: the unit telemetry is grouped into.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Session {
    pub agent: Agent,
    pub id: String,
}

/// An OTLP `AnyValue` in its JSON form as plain JSON.
fn any_value(v: &Value) -> Value {
    let Some(o) = v.as_object() else { return Value::Null };
    if let Some(s) = o.get("stringValue") {
        return s.clone();
    }
    if let Some(i) = o.get("intValue") {
        return match i {
            Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or_else(|_| Value::String(s.clone())),
            other => other.clone(),
        };
    }
    if let Some(d) = o.get("doubleValue") {
        return d.clone();
    }
    if let Some(b) = o.get("boolValue") {
        return b.clone();
    }
    if let Some(b) = o.get("bytesValue") {
        return b.clone();
    }
    if let Some(a) = o.get("arrayValue") {
        let values = a.get("values").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        return Value::Array(values.iter().map(any_value).collect());
    }
    if let Some(kv) = o.get("kvlistValue") {
        return Value::Object(attributes(kv.get("values")));
    }
    Value::Null
}

/// OTLP `KeyValue`s as a JSON object.
fn attributes(list: Option<&Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for kv in list.and_then(Value::as_array).into_iter().flatten() {
        if let Some(key) = kv.get("key").and_then(Value::as_str) {
            out.insert(key.to_string(), kv.get("value").map(any_value).unwrap_or(Value::Null));
        }
    }
    out
}

/// A 64-bit time given as a decimal string or a number.
fn nanos(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

fn iso_nanos(ts: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// Which agent sent a record: its resource's `service.name`, its scope, or its event
/// name (section 9.18's first table).
fn agent_of(service: Option<&str>, scope: Option<&str>, body: Option<&str>, event_name: Option<&str>) -> Option<Agent> {
    match (service, scope) {
        (Some("claude-code"), _) | (_, Some("com.anthropic.claude_code.events")) => return Some(Agent::ClaudeCode),
        (_, Some("codex_otel.log_only" | "codex_otel.trace_safe")) => return Some(Agent::Codex),
        (Some("gemini-cli"), _) | (_, Some("gemini-cli")) => return Some(Agent::GeminiCli),
        _ => {}
    }
    if body.is_some_and(|b| b.starts_with("claude_code.")) {
        return Some(Agent::ClaudeCode);
    }
    match event_name {
        Some(n) if n.starts_with("codex.") => Some(Agent::Codex),
        Some(n) if n.starts_with("gemini_cli.") => Some(Agent::GeminiCli),
        _ => None,
    }
}

/// The session and agent of every log record of an OTLP JSON logs request, in order:
/// `None` for a record of no known agent or without a session id. The collector
/// groups by this; [`events`] reads by it.
pub fn record_sessions(request: &Value) -> Vec<Option<Session>> {
    let mut out = Vec::new();
    walk(request, |agent, _, attrs, resource, _| {
        out.push(agent.and_then(|agent| session_of(agent, &attrs, resource).map(|id| Session { agent, id })));
    });
    out
}

fn session_of(agent: Agent, attrs: &Map<String, Value>, resource: &Map<String, Value>) -> Option<String> {
    let key = agent.session_key();
    attrs.get(key).or_else(|| resource.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
}

/// Calls `f` with (agent, record, its attributes, resource attributes, agent version)
/// for every log record, in order; the request is read in place and each record's
/// attributes decoded once.
fn walk(
    request: &Value,
    mut f: impl FnMut(Option<Agent>, &Value, Map<String, Value>, &Map<String, Value>, Option<&str>),
) {
    fn list<'a>(v: &'a Value, k: &str) -> &'a [Value] {
        v.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
    }
    for rl in list(request, "resourceLogs") {
        let resource = attributes(rl.get("resource").and_then(|r| r.get("attributes")));
        let service = resource.get("service.name").and_then(Value::as_str);
        let version = resource.get("service.version").and_then(Value::as_str);
        for sl in list(rl, "scopeLogs") {
            let scope = sl.get("scope").and_then(|s| s.get("name")).and_then(Value::as_str);
            for record in list(sl, "logRecords") {
                let body = record.get("body").map(any_value);
                let attrs = attributes(record.get("attributes"));
                let agent = agent_of(
                    service,
                    scope,
                    body.as_ref().and_then(Value::as_str),
                    attrs.get("event.name").and_then(Value::as_str),
                );
                f(agent, record, attrs, &resource, version);
            }
        }
    }
}

/// The events of one OTLP JSON logs request (records of no known agent or session left
/// out).
pub fn request_events(request: &Value) -> Vec<Event> {
    let mut out = Vec::new();
    walk(request, |agent, record, attrs, resource, version| {
        let Some(agent) = agent else { return };
        let Some(session) = session_of(agent, &attrs, resource) else { return };
        let body = record.get("body").map(any_value).and_then(|b| b.as_str().map(str::to_string));
        let raw_name = match agent {
            Agent::ClaudeCode => body
                .as_deref()
                .filter(|b| b.starts_with("claude_code."))
                .or_else(|| attrs.get("event.name").and_then(Value::as_str))
                .unwrap_or(""),
            _ => attrs.get("event.name").and_then(Value::as_str).unwrap_or(""),
        };
        let name = raw_name.strip_prefix(agent.prefix()).unwrap_or(raw_name).to_string();
        let mut when = nanos(record.get("timeUnixNano"));
        if when == 0 {
            when = attrs.get("event.timestamp").and_then(Value::as_str).map(iso_nanos).unwrap_or(0);
        }
        if when == 0 {
            when = nanos(record.get("observedTimeUnixNano"));
        }
        out.push(Event { agent, session, name, nanos: when, attrs, body, version: version.map(str::to_string) });
    });
    out
}

/// The requests of OTLP JSON text: one per line (JSON Lines, what the collector keeps),
/// or one JSON document (a request body as sent). A line that is not a JSON object is
/// refused with its number.
pub fn requests(file: &str, text: &str) -> Result<Vec<Value>, Refusal> {
    if let Ok(whole @ Value::Object(_)) = epistore_package::json_from_str::<Value>(text) {
        return Ok(vec![whole]);
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match epistore_package::json_from_str(line) {
            Ok(v @ Value::Object(_)) => out.push(v),
            Ok(_) => return Err(Refusal::at_line(file, i + 1, "expected an OTLP logs request (a JSON object)")),
            Err(e) => return Err(Refusal::at_line(file, i + 1, format!("malformed JSON: {e}"))),
        }
    }
    Ok(out)
}

/// The events of OTLP JSON text ([`requests`]), each record once, in time order (ties:
/// as sent).
pub fn events(file: &str, text: &str) -> Result<Vec<Event>, Refusal> {
    Ok(events_of(&requests(file, text)?))
}

/// The events of decoded requests, each record once, in time order (ties: as sent).
pub(crate) fn events_of(requests: &[Value]) -> Vec<Event> {
    once_each(requests.iter().flat_map(request_events))
}

/// Events with each record once (a retried batch sends the same records again: the
/// same agent, session, name, time and attributes), in time order (ties: as given).
pub(crate) fn once_each(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
    let mut seen: HashSet<blake3::Hash> = HashSet::new();
    let mut out: Vec<Event> = events
        .into_iter()
        .filter(|e| {
            let key = format!(
                "{:?}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
                e.agent,
                e.session,
                e.name,
                e.nanos,
                Value::Object(e.attrs.clone())
            );
            seen.insert(blake3::hash(key.as_bytes()))
        })
        .collect();
    out.sort_by_key(|e| e.nanos);
    out
}

/// The registry's reader of one agent's telemetry.
pub(crate) struct Telemetry(pub Agent);

pub(crate) static CLAUDE_CODE: Telemetry = Telemetry(Agent::ClaudeCode);
pub(crate) static CODEX: Telemetry = Telemetry(Agent::Codex);
pub(crate) static GEMINI_CLI: Telemetry = Telemetry(Agent::GeminiCli);

/// What marks an agent's records in the first bytes of a file.
fn marker(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::ClaudeCode => &["\"claude_code.", "com.anthropic.claude_code"],
        Agent::Codex => &["codex_otel.", "\"codex."],
        Agent::GeminiCli => &["\"gemini_cli.", "\"gemini-cli\""],
    }
}

impl crate::Importer for Telemetry {
    fn format(&self) -> Format {
        self.0.format()
    }
    fn harness(&self) -> &'static str {
        self.0.transcript().name()
    }
    fn about(&self) -> &'static str {
        match self.0 {
            Agent::ClaudeCode => {
                "Claude Code's OpenTelemetry log events (OTLP JSON Lines, as `epistore collect` keeps them)"
            }
            Agent::Codex => "Codex's OpenTelemetry log events (OTLP JSON Lines, as `epistore collect` keeps them)",
            Agent::GeminiCli => {
                "Gemini CLI's OpenTelemetry log events (OTLP JSON Lines, as `epistore collect` keeps them)"
            }
        }
    }
    fn file_names(&self) -> &'static [&'static str] {
        match self.0 {
            Agent::ClaudeCode => &["claude-code-otel-session.otlp.jsonl"],
            Agent::Codex => &["codex-otel-session.otlp.jsonl"],
            Agent::GeminiCli => &["gemini-cli-otel-session.otlp.jsonl"],
        }
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        // A JSON Lines file of requests, or one request document.
        let lines = s.first.as_ref().is_some_and(|f| f.contains_key("resourceLogs"));
        let document = s.text.trim_start().starts_with('{') && s.near("resourceLogs");
        if !lines && !document {
            return None;
        }
        // The agent whose marker comes first in the file.
        let at = |a: Agent| marker(a).iter().filter_map(|m| s.text.find(m)).min();
        let mine = at(self.0)?;
        let first_agent = Agent::ALL.into_iter().filter_map(|a| at(a).map(|p| (p, a))).min()?;
        (first_agent == (mine, self.0)).then_some(crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        for input in inputs {
            let text = match input.text() {
                Ok(t) => t,
                Err(r) => {
                    plan.refuse(self.format(), r);
                    continue;
                }
            };
            let sessions = match events(&input.display(), &text) {
                Ok(events) => events
                    .into_iter()
                    .filter(|e| e.agent == self.0)
                    .map(|e| e.session)
                    .collect::<std::collections::BTreeSet<_>>(),
                Err(r) => {
                    plan.refuse(self.format(), r);
                    continue;
                }
            };
            match sessions.len() {
                0 => plan.refuse(
                    self.format(),
                    input.refuse(None, format!("no {} event with a session id in the file", self.0.transcript())),
                ),
                // One session (what the collector keeps): the whole file, so a grown file
                // supersedes its earlier import.
                1 => plan.units.push(Unit::new(self.format(), vec![input], Part::Whole)),
                _ => {
                    for s in sessions {
                        plan.units.push(Unit::new(self.format(), vec![input.clone()], Part::Object(s)));
                    }
                }
            }
        }
    }
    fn read(&self, unit: &Unit, _: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(self.0, unit)]
    }
}

/// The session's events of a unit, with the bytes that are its source part.
pub(crate) fn unit_events(agent: Agent, unit: &Unit) -> Result<(String, Vec<Event>, Vec<u8>), Refusal> {
    let input = &unit.files[0];
    let text = input.text()?;
    let requests = requests(&input.display(), &text)?;
    let all: Vec<Event> = events_of(&requests).into_iter().filter(|e| e.agent == agent).collect();
    match &unit.part {
        Part::Object(session) => {
            // The part is the requests that carry the session's records, one per line.
            let mut bytes = Vec::new();
            for r in &requests {
                if record_sessions(r).iter().flatten().any(|s| s.agent == agent && s.id == *session) {
                    bytes.extend_from_slice(r.to_string().as_bytes());
                    bytes.push(b'\n');
                }
            }
            Ok((session.clone(), all.into_iter().filter(|e| e.session == *session).collect(), bytes))
        }
        _ => {
            let session = all.first().map(|e| e.session.clone()).unwrap_or_default();
            Ok((session, all, text.into_bytes()))
        }
    }
}

fn read(agent: Agent, unit: &Unit) -> Result<Recorder, Refusal> {
    let (session, events, bytes) = unit_events(agent, unit)?;
    let input = &unit.files[0];
    let mut rec = Recorder::new(agent.format(), session);
    rec.source(&input.file_name(), &input.blake3()?, unit.part.clone(), bytes)?;
    map::session(&mut rec, agent, &events);
    Ok(rec)
}
