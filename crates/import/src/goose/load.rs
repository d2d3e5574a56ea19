//! Reading a session from each of Goose's shapes into one [`Session`].

use std::path::Path;

use serde_json::{Map, Value};

use super::Session;
use crate::sqlite::{columns, error as sql_error, open};
use crate::{Input, Refusal};

pub(super) fn database_sessions(path: &Path) -> Result<Vec<String>, String> {
    let db = open(path)?;
    for t in ["sessions", "messages"] {
        if columns(&db, t)?.is_empty() {
            return Err(format!("no `{t}` table: not a Goose session store"));
        }
    }
    let mut stmt = db.prepare("SELECT id FROM sessions ORDER BY created_at, id").map_err(sql_error)?;
    let ids = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(sql_error)?;
    ids.collect::<Result<Vec<_>, _>>().map_err(sql_error)
}

/// A value of an SQLite row as JSON.
fn json_of(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(_) => Value::Null,
    }
}

pub(super) fn from_database(path: &Path, id: &str) -> Result<Session, String> {
    let db = open(path)?;
    // Every column of the session's row, as the export names them; JSON columns parsed.
    let cols = columns(&db, "sessions")?;
    let info = db
        .query_row("SELECT * FROM sessions WHERE id = ?1", [id], |r| {
            let mut o = Map::new();
            for (i, c) in cols.iter().enumerate() {
                let mut v = json_of(r.get_ref(i)?);
                if c.ends_with("_json") || c == "extension_data" {
                    if let Some(parsed) = v.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok()) {
                        v = parsed;
                    }
                }
                o.insert(c.clone(), v);
            }
            Ok(o)
        })
        .map_err(|e| format!("session {id}: {}", sql_error(e)))?;
    let has_metadata = columns(&db, "messages")?.iter().any(|c| c == "metadata_json");
    let query = format!(
        "SELECT role, content_json, created_timestamp, {} FROM messages WHERE session_id = ?1 ORDER BY \
         created_timestamp, id",
        if has_metadata { "metadata_json" } else { "NULL" }
    );
    let mut stmt = db.prepare(&query).map_err(sql_error)?;
    let rows = stmt
        .query_map([id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, Option<String>>(3)?))
        })
        .map_err(sql_error)?;
    let mut messages = Vec::new();
    for row in rows {
        let (role, content, created, metadata) = row.map_err(sql_error)?;
        let content = epistore_package::json_from_str::<Value>(&content)
            .map_err(|e| format!("session {id}: a message's content_json is malformed JSON: {e}"))?;
        let mut m = serde_json::json!({"role": role, "created": created, "content": content});
        if let Some(meta) = metadata.and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
            m["metadata"] = meta;
        }
        messages.push(m);
    }
    Ok(Session { info, messages, cut_last_line: None })
}

/// Goose 1.0 to 1.9: the header line, then a message per line. Goose rewrote the whole
/// file after each message and a cut last line happened: such a line is left out, and
/// said in a note by the caller (it is counted here).
pub(super) fn from_lines(input: &Input) -> Result<Session, Refusal> {
    let text = input.text()?;
    let mut info = Map::new();
    let mut messages = Vec::new();
    let mut cut_last_line = None;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match epistore_package::json_from_str::<Value>(line) {
            Ok(Value::Object(o)) if i == 0 && super::header(&o) => info = o,
            Ok(m @ Value::Object(_)) => messages.push(m),
            Ok(_) => return Err(Refusal::at_line(input.display(), i + 1, "expected a JSON object")),
            // Only the last line may be cut short.
            Err(_) if i + 1 == lines.len() && i > 0 => {
                cut_last_line = Some(i + 1);
            }
            Err(e) => return Err(Refusal::at_line(input.display(), i + 1, format!("malformed JSON: {e}"))),
        }
    }
    let stem = input.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    info.insert("id".into(), Value::String(stem));
    Ok(Session { info, messages, cut_last_line })
}

/// `goose session export --format json`: the session's fields and its `conversation`.
pub(super) fn from_export(input: &Input) -> Result<Session, Refusal> {
    let bytes = input.read()?;
    let mut doc = match epistore_package::json_from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(input.refuse(None, "expected a JSON object")),
        Err(e) => return Err(Refusal::at_line(input.display(), e.line(), format!("malformed JSON: {e}"))),
    };
    let messages = match doc.remove("conversation") {
        Some(Value::Array(m)) => m,
        _ => return Err(input.refuse(Some("conversation".into()), "expected a list of messages")),
    };
    if !doc.contains_key("id") {
        let stem = input.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        doc.insert("id".into(), Value::String(stem));
    }
    Ok(Session { info: doc, messages, cut_last_line: None })
}
