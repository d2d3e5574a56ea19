//! Goose (`goose`): sessions from its SQLite store `sessions.db` (1.10 and later), from
//! the older JSON Lines files `sessions/<id>.jsonl`, and as `goose session export
//! --format json` writes them (docs/importers.md §9.16).
//!
//! All three hold the same messages (`{role, created, content: [...], metadata}`, the
//! content blocks tagged by `type`: `text`, `thinking`, `toolRequest`, `toolResponse`,
//! ...), read into one [`Session`] and [`record`]ed.

mod load;
mod record;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("goose");

/// The registry's Goose reader.
pub(crate) struct Goose;

/// A session: its fields (the store's columns, the JSON Lines header or the export's
/// keys, snake_case) and its messages in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    pub info: Map<String, Value>,
    pub messages: Vec<Value>,
    /// A JSON Lines file's last line (its number), cut short as Goose rewrote the file,
    /// and left out.
    pub cut_last_line: Option<usize>,
}

impl Session {
    fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }
    /// The session as `goose session export` writes it, compact, written from the
    /// session as it is (nothing copied).
    fn to_json(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            #[serde(flatten)]
            info: &'a Map<String, Value>,
            conversation: &'a [Value],
        }
        serde_json::to_vec(&Doc { info: &self.info, conversation: &self.messages }).expect("JSON objects serialise")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Database,
    Lines,
    Export,
}

/// The JSON Lines header Goose 1.0 to 1.9 write (snake_case `SessionMetadata`).
fn header(o: &Map<String, Value>) -> bool {
    o.contains_key("message_count") && o.contains_key("description")
        || o.contains_key("working_dir") && o.keys().any(|k| k.starts_with("accumulated_"))
}

fn kind(name: &str, head: &[u8], text: &str, first: Option<&Map<String, Value>>) -> Option<Kind> {
    if head.starts_with(b"SQLite format 3\0") && name == "sessions.db" {
        return Some(Kind::Database);
    }
    if first.is_some_and(header) && name.ends_with(".jsonl") {
        return Some(Kind::Lines);
    }
    let near = |k: &str| crate::registry::quoted_in(head, k);
    if text.starts_with('{') && near("conversation") && near("working_dir") && (near("toolRequest") || near("created"))
    {
        return Some(Kind::Export);
    }
    None
}

/// The kind of a file detection gave this source, by its name alone (its content was
/// looked at once, by detection; reading a file of `--format goose` says what is wrong
/// with it).
fn placed(path: &Path) -> Kind {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if name.ends_with(".db") {
        Kind::Database
    } else if name.ends_with(".jsonl") {
        Kind::Lines
    } else {
        Kind::Export
    }
}

/// Where a unit's session is read from.
#[derive(Debug, Clone)]
enum Source {
    Database { id: String },
    File(Kind),
}

impl crate::Importer for Goose {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "Goose sessions: the SQLite store sessions.db, the older sessions/ID.jsonl files, `goose session export` \
         JSON"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["20250301_120000.jsonl", "goose-export.json"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        kind(&s.name, s.head, &s.text, s.first.as_ref()).map(|_| crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        let mut files = Vec::new();
        let mut in_databases: HashSet<String> = HashSet::new();
        for input in inputs {
            match placed(&input.path) {
                Kind::Database => {
                    let ids = load::database_sessions(&input.path);
                    crate::sqlite::plan_sessions(FORMAT, &input, ids, plan, &mut in_databases, |id| Source::Database {
                        id,
                    })
                }
                k => files.push((input, k)),
            }
        }
        // Goose 1.10 copied its JSON Lines sessions into the store and left the files: a
        // session in both is read from the store.
        for (input, k) in files {
            let stem = input.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            if k == Kind::Lines && in_databases.contains(&stem) {
                plan.cover(FORMAT, &input, "a session also in sessions.db, read from there");
                continue;
            }
            plan.units.push(Unit::new(FORMAT, vec![input], Part::Whole).with(Source::File(k)));
        }
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(unit, ctx)]
    }
}

fn read(unit: &Unit, ctx: &Context) -> Result<Recorder, Refusal> {
    let input = &unit.files[0];
    let source = match unit.planned::<Source>() {
        Some(s) => s.clone(),
        None => match &unit.part {
            Part::Object(p) => Source::Database { id: p.trim_start_matches("session ").to_string() },
            _ => Source::File(placed(&input.path)),
        },
    };
    let session = match &source {
        Source::Database { id } => load::from_database(&input.path, id).map_err(|why| input.refuse(None, why))?,
        Source::File(Kind::Lines) => load::from_lines(input)?,
        Source::File(_) => load::from_export(input)?,
    };
    let mut rec = Recorder::new(FORMAT, session.id().to_string());
    match &source {
        Source::Database { .. } => {
            // As for OpenCode's store: the session's document, hashed as itself.
            let bytes = session.to_json();
            let hash = blake3::hash(&bytes).to_hex().to_string();
            rec.source(&input.file_name(), &hash, Part::Object(format!("session {}", session.id())), bytes)?;
        }
        Source::File(_) => rec.source(&input.file_name(), &input.blake3()?, Part::Whole, input.read()?)?,
    }
    // Goose rewrites a session's file (and its rows) as it goes on: read again, it
    // replaces its earlier import.
    if let Some(old) = ctx.prior.and_then(|p| p.latest(FORMAT, session.id())) {
        rec.supersedes(old);
    }
    record::session(&mut rec, &session);
    Ok(rec)
}
