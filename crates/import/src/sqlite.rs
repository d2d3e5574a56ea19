//! Agents' SQLite stores (OpenCode's `opencode.db`, Goose's `sessions.db`), opened the
//! one way this crate opens them: read-only, never written to or beside.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

use crate::{Format, Input, Part, Plan, Unit};

/// Opens a store read-only. A store in use has a write-ahead log: read with it when its
/// index file can be opened, else read as the file stands (`immutable`), without what
/// the log holds.
pub(crate) fn open(path: &Path) -> Result<Connection, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let tried = Connection::open_with_flags(path, flags).and_then(|c| {
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        c.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(c)
    });
    tried.or_else(|first| {
        Connection::open_with_flags(format!("file:{}?immutable=1", path.display()), flags)
            .map_err(|_| format!("cannot open the SQLite store: {first}"))
    })
}

/// A read's failure, as a refusal's reason.
pub(crate) fn error(e: rusqlite::Error) -> String {
    format!("cannot read the SQLite store: {e}")
}

/// The columns of a table (none when it is not there); they differ between versions.
pub(crate) fn columns(db: &Connection, table: &str) -> Result<Vec<String>, String> {
    let mut stmt = db.prepare(&format!("PRAGMA table_info({table})")).map_err(error)?;
    let names = stmt.query_map([], |r| r.get::<_, String>(1)).map_err(error)?;
    names.collect::<Result<Vec<_>, _>>().map_err(error)
}

/// One unit per session of a store (its part: `session ID`), each with what `planned`
/// makes of the id; the ids go into `seen` (a session also kept in a file elsewhere is
/// read from the store). A store without sessions, or one that cannot be read, is
/// refused.
pub(crate) fn plan_sessions<T: std::any::Any + Send + Sync>(
    format: Format,
    input: &Arc<Input>,
    ids: Result<Vec<String>, String>,
    plan: &mut Plan,
    seen: &mut HashSet<String>,
    planned: impl Fn(String) -> T,
) {
    match ids {
        Ok(ids) if ids.is_empty() => plan.refuse(format, input.refuse(None, "no sessions in this store")),
        Ok(ids) => {
            for id in ids {
                seen.insert(id.clone());
                let part = Part::Object(format!("session {id}"));
                plan.units.push(Unit::new(format, vec![input.clone()], part).with(planned(id)));
            }
        }
        Err(why) => plan.refuse(format, input.refuse(None, why)),
    }
}
