//! Reading a session from each of OpenCode's three shapes into one [`Session`].

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::{storage_root, Session};
use crate::sqlite::{error as sql_error, open};
use crate::{Input, Refusal};

/// The ids of the store's sessions, oldest first.
pub(super) fn database_sessions(path: &Path) -> Result<Vec<String>, String> {
    let db = open(path)?;
    for t in ["session", "message", "part"] {
        if crate::sqlite::columns(&db, t)?.is_empty() {
            return Err(format!(
                "no `{t}` table: not an OpenCode 1.x store (OpenCode 2's tables are a format this build does not \
                 read)"
            ));
        }
    }
    let mut stmt = db.prepare("SELECT id FROM session ORDER BY time_created, id").map_err(sql_error)?;
    let ids = stmt.query_map([], |r| r.get::<_, String>(0)).map_err(sql_error)?;
    ids.collect::<Result<Vec<_>, _>>().map_err(sql_error)
}

/// A JSON `data` column as an object, with the ids the row holds beside it put back.
fn object(data: &str, what: &str, ids: &[(&str, &str)]) -> Result<Map<String, Value>, String> {
    let mut o = match epistore_package::json_from_str::<Value>(data) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(format!("{what}: `data` is not a JSON object")),
        Err(e) => return Err(format!("{what}: malformed JSON in `data`: {e}")),
    };
    for (k, v) in ids {
        o.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    Ok(o)
}

/// One session of the store, as its export document.
pub(super) fn from_database(path: &Path, id: &str) -> Result<Session, String> {
    let db = open(path)?;
    let info = db
        .query_row(
            "SELECT id, project_id, parent_id, directory, title, version, time_created, time_updated \
             FROM session WHERE id = ?1",
            [id],
            |r| {
                let mut o = Map::new();
                o.insert("id".into(), Value::String(r.get(0)?));
                o.insert("projectID".into(), Value::String(r.get(1)?));
                if let Some(p) = r.get::<_, Option<String>>(2)? {
                    o.insert("parentID".into(), Value::String(p));
                }
                o.insert("directory".into(), Value::String(r.get(3)?));
                o.insert("title".into(), Value::String(r.get(4)?));
                o.insert("version".into(), Value::String(r.get(5)?));
                let (c, u): (i64, i64) = (r.get(6)?, r.get(7)?);
                o.insert("time".into(), serde_json::json!({"created": c, "updated": u}));
                Ok(o)
            },
        )
        .map_err(|e| format!("session {id}: {}", sql_error(e)))?;
    let mut messages = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    {
        let mut stmt = db
            .prepare("SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id")
            .map_err(sql_error)?;
        let rows = stmt.query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).map_err(sql_error)?;
        for row in rows {
            let (mid, data) = row.map_err(sql_error)?;
            let info = object(&data, &format!("message {mid}"), &[("id", &mid), ("sessionID", id)])?;
            index.insert(mid, messages.len());
            messages.push((info, Vec::new()));
        }
    }
    let mut stmt = db
        .prepare("SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id")
        .map_err(sql_error)?;
    let rows = stmt
        .query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
        .map_err(sql_error)?;
    for row in rows {
        let (pid, mid, data) = row.map_err(sql_error)?;
        let part = object(&data, &format!("part {pid}"), &[("id", &pid), ("sessionID", id), ("messageID", &mid)])?;
        if let Some(&at) = index.get(&mid) {
            messages[at].1.push(part);
        }
    }
    Ok(Session { info, messages })
}

/// A JSON object file of `storage/`.
fn json_file(path: &Path) -> Result<Map<String, Value>, Refusal> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Refusal::new(&shown, None, format!("cannot read: {e}")))?;
    match epistore_package::json_from_slice::<Value>(&bytes) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(Refusal::new(&shown, None, "expected a JSON object")),
        Err(e) => Err(Refusal::at_line(&shown, e.line(), format!("malformed JSON: {e}"))),
    }
}

/// The `.json` files of a folder, by name (OpenCode's ids sort in creation order); none
/// when the folder is not there.
fn json_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn created(info: &Map<String, Value>) -> i64 {
    info.get("time").and_then(|t| t.get("created")).and_then(Value::as_i64).unwrap_or(0)
}

/// A session of `storage/`: its file, its messages' files and their parts' files (the
/// current layout, `message/<session>/` and `part/<message>/`, or the oldest,
/// `session/message/<session>/` and `session/part/<session>/<message>/`).
pub(super) fn from_storage(input: &Input) -> Result<Session, Refusal> {
    let info = json_file(&input.path)?;
    let id = info.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
    if id.is_empty() {
        return Err(input.refuse(None, "an OpenCode session file without its `id`"));
    }
    let root = storage_root(&input.path).ok_or_else(|| input.refuse(None, "not under a `storage` folder"))?;
    let (new, old) = (root.join("message").join(&id), root.join("session").join("message").join(&id));
    let oldest = !new.is_dir() && old.is_dir();
    let mut messages = Vec::new();
    for file in json_files(if oldest { &old } else { &new }) {
        let info = json_file(&file)?;
        let mid = info.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let dir =
            if oldest { root.join("session").join("part").join(&id).join(&mid) } else { root.join("part").join(&mid) };
        let parts = json_files(&dir).iter().map(|p| json_file(p)).collect::<Result<Vec<_>, _>>()?;
        messages.push((info, parts));
    }
    messages.sort_by(|(a, _), (b, _)| {
        (created(a), a.get("id").and_then(Value::as_str)).cmp(&(created(b), b.get("id").and_then(Value::as_str)))
    });
    Ok(Session { info, messages })
}

/// `opencode export` output (after its "Exporting session:" line, if kept).
pub(super) fn from_export(input: &Input) -> Result<Session, Refusal> {
    let text = input.text()?;
    let at = text.find('{').ok_or_else(|| input.refuse(None, "no JSON object: expected `opencode export` output"))?;
    let skipped_lines = text[..at].matches('\n').count();
    let doc = match epistore_package::json_from_str::<Value>(&text[at..]) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(input.refuse(None, "expected a JSON object")),
        Err(e) => {
            return Err(Refusal::at_line(input.display(), e.line() + skipped_lines, format!("malformed JSON: {e}")))
        }
    };
    let info = doc.get("info").and_then(Value::as_object).cloned().ok_or_else(|| {
        input.refuse(Some("info".into()), "no `info`: expected `opencode export` output ({info, messages})")
    })?;
    let mut messages = Vec::new();
    for (i, m) in doc.get("messages").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let place = || Some(format!("messages[{i}]"));
        let info =
            m.get("info").and_then(Value::as_object).cloned().ok_or_else(|| input.refuse(place(), "no `info`"))?;
        let parts = m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_object().cloned())
            .collect();
        messages.push((info, parts));
    }
    Ok(Session { info, messages })
}
