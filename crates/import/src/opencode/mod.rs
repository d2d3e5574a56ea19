//! OpenCode (`opencode`): sessions from the SQLite store `opencode.db` (1.2 and later),
//! from the older `storage/` JSON files, and as `opencode export` writes them
//! (docs/importers.md §9.14).
//!
//! The three hold the same objects: a session (`Session.Info`), its messages
//! (`MessageV2.Info`, user or assistant), and each message's parts (text, reasoning,
//! tool, step-start / step-finish with the workspace snapshot, patch, file, ...). Each
//! is [`load`]ed into one [`Session`] (the export's shape), which is then the run's
//! source copy, and [`record`]ed. The store's credentials (`auth.json`) are never
//! opened: the folder walk skips them by name.

mod load;
mod record;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::{Context, Format, Input, Part, Plan, Recorder, Refusal, Unit};

#[cfg(test)]
mod tests;

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("opencode");

/// The registry's OpenCode reader.
pub(crate) struct OpenCode;

/// An OpenCode object (a session's, message's or part's fields).
pub(crate) type Object = Map<String, Value>;

/// A session as `opencode export` writes it: its info, and its messages in order, each
/// with its parts in order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    pub info: Object,
    pub messages: Vec<(Object, Vec<Object>)>,
}

impl Session {
    pub fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }
    /// The export document (`{info, messages: [{info, parts}]}`), compact, written from
    /// the session as it is (nothing copied).
    pub fn to_json(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Doc<'a> {
            info: &'a Object,
            messages: Vec<Message<'a>>,
        }
        #[derive(serde::Serialize)]
        struct Message<'a> {
            info: &'a Object,
            parts: &'a [Object],
        }
        let messages = self.messages.iter().map(|(info, parts)| Message { info, parts }).collect();
        serde_json::to_vec(&Doc { info: &self.info, messages }).expect("JSON objects serialise")
    }
}

/// Which of OpenCode's files a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Database,
    Export,
    /// `storage/session/<project>/<id>.json` (or the oldest `storage/session/info/<id>.json`).
    StoredSession,
    /// A message or part file of `storage/`: read with its session.
    StoredPiece,
}

fn is_database(name: &str, head: &[u8]) -> bool {
    head.starts_with(b"SQLite format 3\0")
        && (name == "opencode.db" || name.starts_with("opencode-") && name.ends_with(".db"))
}

fn kind(path: &Path, name: &str, head: &[u8], text: &str) -> Option<Kind> {
    if is_database(name, head) {
        return Some(Kind::Database);
    }
    let near = |k: &str| crate::registry::quoted_in(head, k);
    let in_folder = |f: &str| path.parent().is_some_and(|p| p.components().any(|c| c.as_os_str() == f));
    let json = name.ends_with(".json");
    if json && in_folder("storage") {
        if name.starts_with("ses_") && in_folder("session") && near("id") && (near("projectID") || near("directory")) {
            return Some(Kind::StoredSession);
        }
        if (name.starts_with("msg_") || name.starts_with("prt_")) && near("sessionID") {
            return Some(Kind::StoredPiece);
        }
        // The rest of storage/: projects, a session's diffs, its todos, its share link.
        if ["project", "session_diff", "todo", "session_share"].iter().any(|f| in_folder(f)) {
            return Some(Kind::StoredPiece);
        }
    }
    // `opencode export`: `{"info": {...}, "messages": [{"info": ..., "parts": [...]}]}`,
    // after the "Exporting session:" line when stderr went to the same file.
    let body = text.find('{').map_or("", |at| &text[at..]);
    let head_line = text.lines().next().unwrap_or("");
    let prefixed = head_line.starts_with("Exporting session") || head_line.trim_start().starts_with('{');
    if prefixed && body.starts_with('{') && near("info") && near("messages") && near("parts") && near("sessionID") {
        return Some(Kind::Export);
    }
    None
}

/// Where a unit's session is read from.
#[derive(Debug, Clone)]
enum Source {
    Database { id: String },
    Export,
    Stored,
}

impl crate::Importer for OpenCode {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "OpenCode sessions: the SQLite store opencode.db, the older storage/ JSON files, and `opencode export` \
         output"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["opencode-export.json"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        kind(s.path, &s.name, s.head, &s.text).map(|_| crate::Confidence::Certain)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        let mut stored = Vec::new();
        let mut in_databases: HashSet<String> = HashSet::new();
        for input in inputs {
            match placed(&input.path) {
                Kind::Database => {
                    let ids = load::database_sessions(&input.path);
                    crate::sqlite::plan_sessions(FORMAT, &input, ids, plan, &mut in_databases, |id| Source::Database {
                        id,
                    })
                }
                Kind::Export => plan.units.push(Unit::new(FORMAT, vec![input], Part::Whole).with(Source::Export)),
                Kind::StoredSession => stored.push(input),
                Kind::StoredPiece => {
                    plan.cover(FORMAT, &input, "part of an OpenCode session (a message, part, project, diff or todo file): read with the session's file")
                }
            }
        }
        // `storage/` stays on disk after OpenCode 1.2 moved it into the database: a
        // session in both is read from the database.
        for input in stored {
            let id = input.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            if in_databases.contains(&id) {
                plan.cover(FORMAT, &input, "a session also in opencode.db, read from there");
                continue;
            }
            let part = Part::Object(format!("session {id}"));
            plan.units.push(Unit::new(FORMAT, vec![input], part).with(Source::Stored));
        }
    }
    fn read(&self, unit: &Unit, ctx: &Context) -> Vec<Result<Recorder, Refusal>> {
        vec![read(unit, ctx)]
    }
}

/// The kind of a file detection gave this source, by its name and place alone (the
/// content was looked at once, by detection; `--format opencode` takes the file as an
/// export unless its name or place says otherwise, and reading it says what is wrong).
fn placed(path: &Path) -> Kind {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let in_folder = |f: &str| path.parent().is_some_and(|p| p.components().any(|c| c.as_os_str() == f));
    if name.ends_with(".db") {
        Kind::Database
    } else if in_folder("storage") && name.ends_with(".json") {
        if name.starts_with("ses_") && in_folder("session") {
            Kind::StoredSession
        } else {
            Kind::StoredPiece
        }
    } else {
        Kind::Export
    }
}

fn read(unit: &Unit, ctx: &Context) -> Result<Recorder, Refusal> {
    let input = &unit.files[0];
    let source = match unit.planned::<Source>() {
        Some(s) => s.clone(),
        None => match (&unit.part, placed(&input.path)) {
            (Part::Object(p), Kind::Database) => Source::Database { id: p.trim_start_matches("session ").to_string() },
            (_, Kind::StoredSession) => Source::Stored,
            _ => Source::Export,
        },
    };
    let session = match &source {
        Source::Database { id } => load::from_database(&input.path, id).map_err(|why| input.refuse(None, why))?,
        Source::Stored => load::from_storage(input)?,
        Source::Export => load::from_export(input)?,
    };
    let mut rec = Recorder::new(FORMAT, session.id().to_string());
    match &source {
        Source::Export => rec.source(&input.file_name(), &input.blake3()?, Part::Whole, input.read()?)?,
        // A store's session is kept as its export document. The file's own hash would
        // change with every other session written to it, so the hash is the
        // document's: the same session read again is the same source.
        Source::Database { .. } | Source::Stored => {
            let bytes = session.to_json();
            let hash = blake3::hash(&bytes).to_hex().to_string();
            rec.source(&input.file_name(), &hash, Part::Object(format!("session {}", session.id())), bytes)?
        }
    }
    // A session read again after it grew (or exported again) replaces its earlier import.
    if let Some(prior) = ctx.prior {
        if let Some(old) = prior.latest(FORMAT, session.id()) {
            rec.supersedes(old);
        }
    }
    record::session(&mut rec, &session);
    Ok(rec)
}

/// The storage root (`.../storage`) of a file under it.
fn storage_root(path: &Path) -> Option<PathBuf> {
    path.ancestors().find(|a| a.file_name().is_some_and(|n| n == "storage")).map(Path::to_path_buf)
}
