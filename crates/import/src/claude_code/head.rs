//! The first lines of a file: which shape it is (a session transcript or headless
//! stream-json output) and which session it belongs to, read without loading the
//! file, so a projects folder is grouped into sessions before anything is parsed.

use std::io::{BufRead, BufReader};

use chrono::{DateTime, FixedOffset};
use serde_json::{Map, Value};

use crate::{Input, Refusal};

/// What the first lines of a file say: its shape and session.
#[derive(Debug, Clone)]
pub(super) struct Head {
    pub stream: bool,
    pub session: String,
    /// A subagent transcript (`isSidechain` true on its first conversation line).
    pub sidechain: bool,
    /// The first timestamp (stream-json files of one session are joined in its order).
    pub first_ts: Option<DateTime<FixedOffset>>,
}

/// Lines read to find the session id before giving up (a transcript may open with
/// many lines of other kinds).
const HEAD_LINES: usize = 5000;

pub(super) fn head(input: &Input) -> Result<Head, Refusal> {
    let file = input.open()?;
    let mut stream = None;
    let mut session: Option<String> = None;
    let mut sidechain = None;
    let mut first_ts = None;
    for (i, line) in BufReader::new(file).split(b'\n').enumerate().take(HEAD_LINES) {
        let bytes = line.map_err(|e| input.io(e))?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let obj = object(input, i + 1, text)?;
        let is_stream = *stream.get_or_insert_with(|| stream_line(&obj));
        if first_ts.is_none() {
            first_ts = obj.get("timestamp").and_then(Value::as_str).and_then(parse_ts);
        }
        let key = if is_stream { "session_id" } else { "sessionId" };
        if session.is_none() {
            session = obj.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        }
        if sidechain.is_none() && matches!(str_of(&obj, "type"), "user" | "assistant") {
            sidechain = obj.get("isSidechain").and_then(Value::as_bool);
        }
        let done = if is_stream { first_ts.is_some() } else { sidechain.is_some() };
        if session.is_some() && done {
            break;
        }
    }
    let Some(session) = session else {
        return Err(input.refuse(None, "no session id (`sessionId` or `session_id`) in the log's lines"));
    };
    Ok(Head { stream: stream.unwrap_or(false), session, sidechain: sidechain.unwrap_or(false), first_ts })
}

/// A headless stream-json line rather than a transcript line.
fn stream_line(obj: &Map<String, Value>) -> bool {
    (str_of(obj, "type") == "system" && str_of(obj, "subtype") == "init")
        || (obj.contains_key("session_id") && !obj.contains_key("sessionId"))
}

pub(super) fn object(input: &Input, line: usize, text: &str) -> Result<Map<String, Value>, Refusal> {
    match epistore_package::json_from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(Refusal::at_line(input.display(), line, "expected a JSON object, found another JSON value")),
        Err(e) => Err(Refusal::at_line(
            input.display(),
            line,
            format!("expected a JSON object (the line is truncated or malformed: {e})"),
        )),
    }
}

pub(super) fn parse_ts(ts: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(ts.trim()).ok()
}

pub(super) fn str_of<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a str {
    obj.get(key).and_then(Value::as_str).unwrap_or("")
}
