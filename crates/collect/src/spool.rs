//! Session files: each agent session's records, appended as they arrive to
//! `SPOOL/<format>/<session>.otlp.jsonl` (one line per request, holding that session's
//! records only). Memory keeps per-file counters; the records are on disk, so a flood
//! costs disk and a stop loses nothing. A commit takes a snapshot of a file's whole
//! lines (appends happen under the same lock), so the import never sees half a line.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use epistore_import::otel::{record_sessions, Session};
use serde_json::{json, Map, Value};

use crate::{Error, Result};

/// A logs request cut into its sessions' parts.
#[derive(Debug, Default)]
pub struct Split {
    /// Per session: its records as a request of their own, and whether the session said
    /// it finished (Gemini CLI's `conversation_finished`).
    pub sessions: Vec<(Session, Value, bool)>,
    pub records: u64,
    /// Records of no known agent, or without a session id: counted, kept nowhere.
    pub unattributed: u64,
}

fn finished(record: &Value) -> bool {
    record.get("attributes").and_then(Value::as_array).into_iter().flatten().any(|kv| {
        kv.get("key").and_then(Value::as_str) == Some("event.name")
            && kv.pointer("/value/stringValue").and_then(Value::as_str) == Some("gemini_cli.conversation_finished")
    })
}

/// `value` without `key` (a resource without its scopes), with `key` an empty list: the
/// rest copied, the list not.
fn shell(value: &Value, key: &str) -> Value {
    let mut o: Map<String, Value> = value
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    o.insert(key.to_string(), json!([]));
    Value::Object(o)
}

fn list<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// Cuts an OTLP JSON logs request into one request per session.
pub fn split(request: &Value) -> Split {
    let owners = record_sessions(request);
    let mut out: BTreeMap<Session, (Value, bool)> = BTreeMap::new();
    let mut split = Split::default();
    let mut at = 0;
    for rl in list(request, "resourceLogs") {
        for sl in list(rl, "scopeLogs") {
            // Per session, this scope's records (under a copy of its resource and scope).
            let mut here: BTreeMap<Session, Vec<Value>> = BTreeMap::new();
            for record in list(sl, "logRecords") {
                split.records += 1;
                match owners.get(at).cloned().flatten() {
                    Some(s) => here.entry(s).or_default().push(record.clone()),
                    None => split.unattributed += 1,
                }
                at += 1;
            }
            for (session, records) in here {
                let (req, done) = out.entry(session).or_insert_with(|| (json!({"resourceLogs": []}), false));
                *done |= records.iter().any(finished);
                let mut scope = shell(sl, "logRecords");
                scope["logRecords"] = Value::Array(records);
                let mut resource = shell(rl, "scopeLogs");
                resource["scopeLogs"] = json!([scope]);
                req["resourceLogs"].as_array_mut().expect("made as a list").push(resource);
            }
        }
    }
    split.sessions = out.into_iter().map(|(s, (v, done))| (s, v, done)).collect();
    split
}

/// A session id as a file name: itself when it is plain, else its blake3.
fn file_name(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let stem = if plain { id.to_string() } else { blake3::hash(id.as_bytes()).to_hex()[..32].to_string() };
    format!("{stem}.otlp.jsonl")
}

struct Open {
    last: Instant,
    /// Bytes appended since the last commit's snapshot.
    uncommitted: u64,
    finished: bool,
}

/// The session files and what is uncommitted in them.
pub struct Spool {
    dir: PathBuf,
    files: HashMap<PathBuf, Open>,
    pending: u64,
    /// Held while the spool is open: one collector per spool.
    _lock: std::fs::File,
}

const SNAPSHOTS: &str = ".commit";
const LOCK: &str = ".lock";

/// Where a session file's committed length is kept (beside it), so a restart commits
/// only what is new.
fn committed_marker(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".committed");
    PathBuf::from(name)
}

/// The committed length of a session file (0 when it never was).
fn committed_len(file: &Path) -> u64 {
    std::fs::read_to_string(committed_marker(file)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// Cuts a trailing partial line (a write a crash or a full disk left half done), so
/// the next append starts a line of its own. Returns the file's length after.
fn trim_torn_line(path: &Path) -> std::io::Result<u64> {
    let bytes = std::fs::read(path)?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        std::fs::OpenOptions::new().write(true).open(path)?.set_len(whole as u64)?;
    }
    Ok(whole as u64)
}

impl Spool {
    /// The spool in `dir`, created when missing. Files an earlier run left are due at
    /// once: their records may never have been committed.
    pub fn open(dir: &Path) -> Result<Spool> {
        let io = |path: &Path, e| Error::Io { path: path.to_path_buf(), source: e };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let lock_path = dir.join(LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| io(&lock_path, e))?;
        if lock.try_lock().is_err() {
            return Err(Error::SpoolInUse(dir.to_path_buf()));
        }
        let _ = std::fs::remove_dir_all(dir.join(SNAPSHOTS));
        let mut spool = Spool { dir: dir.to_path_buf(), files: HashMap::new(), pending: 0, _lock: lock };
        for agent in std::fs::read_dir(dir).map_err(|e| io(dir, e))?.flatten() {
            if !agent.path().is_dir() || agent.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            for f in std::fs::read_dir(agent.path()).map_err(|e| io(&agent.path(), e))?.flatten() {
                let path = f.path();
                if !path.to_string_lossy().ends_with(".otlp.jsonl") {
                    continue;
                }
                let len = trim_torn_line(&path).map_err(|e| io(&path, e))?;
                // Only what no commit took: a file committed whole waits for new records.
                let new = len.saturating_sub(committed_len(&path));
                if new > 0 {
                    spool.pending += new;
                    spool.files.insert(path, Open { last: Instant::now(), uncommitted: new, finished: true });
                }
            }
        }
        Ok(spool)
    }

    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// Sessions with records not yet committed.
    pub fn open_sessions(&self) -> usize {
        self.files.values().filter(|o| o.uncommitted > 0).count()
    }

    pub fn path_of(&self, session: &Session) -> PathBuf {
        self.dir.join(session.agent.format().name()).join(file_name(&session.id))
    }

    /// Appends each session's part as one line of its file; true when a session said it
    /// finished.
    pub fn append(&mut self, parts: Vec<(Session, Value, bool)>) -> std::io::Result<bool> {
        let mut any_finished = false;
        for (session, request, done) in parts {
            let path = self.path_of(&session);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let mut line = request.to_string().into_bytes();
            line.push(b'\n');
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
            let before = f.metadata()?.len();
            if let Err(e) = f.write_all(&line) {
                // Half a line is no line: the file goes back to where it was.
                let _ = f.set_len(before);
                return Err(e);
            }
            let open = self.files.entry(path).or_insert(Open { last: Instant::now(), uncommitted: 0, finished: false });
            open.last = Instant::now();
            open.uncommitted += line.len() as u64;
            open.finished |= done;
            any_finished |= done;
            self.pending += line.len() as u64;
        }
        Ok(any_finished)
    }

    /// The files to commit now: every one with uncommitted records when `all`; else the
    /// finished and the idle ones, and, while the uncommitted bytes exceed `max_pending`,
    /// the longest-quiet ones until half of it remains.
    pub fn due(&self, now: Instant, idle: Duration, max_pending: u64, all: bool) -> Vec<PathBuf> {
        let mut waiting: Vec<(&PathBuf, &Open)> = self.files.iter().filter(|(_, o)| o.uncommitted > 0).collect();
        waiting.sort_by_key(|(p, o)| (o.last, (*p).clone()));
        let mut due = Vec::new();
        let mut left = self.pending;
        for (path, open) in waiting {
            let quiet = now.saturating_duration_since(open.last) >= idle;
            if all || open.finished || quiet || left > max_pending / 2 && self.pending > max_pending {
                due.push(path.clone());
                left = left.saturating_sub(open.uncommitted);
            }
        }
        due
    }

    /// A copy of `file` as it is now, under `.commit/` with the same name, for the
    /// import; its uncommitted bytes are counted as taken. `None` when nothing is new.
    pub fn snapshot(&mut self, file: &Path) -> std::io::Result<Option<Taken>> {
        let Some(open) = self.files.get_mut(file) else { return Ok(None) };
        if open.uncommitted == 0 {
            return Ok(None);
        }
        let relative = file.strip_prefix(&self.dir).unwrap_or(file);
        let copy = self.dir.join(SNAPSHOTS).join(relative);
        if let Some(parent) = copy.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let length = std::fs::copy(file, &copy)?;
        let bytes = std::mem::take(&mut open.uncommitted);
        let finished = std::mem::take(&mut open.finished);
        self.pending -= bytes;
        Ok(Some(Taken { copy, bytes, length, finished }))
    }

    /// A commit that went through: the file's committed length, for a restart.
    pub fn committed(&mut self, file: &Path, taken: &Taken) -> std::io::Result<()> {
        std::fs::write(committed_marker(file), taken.length.to_string())
    }

    /// A commit that failed: its bytes are uncommitted again (and a finished session
    /// still finished).
    pub fn uncommit(&mut self, file: &Path, taken: &Taken) {
        if let Some(open) = self.files.get_mut(file) {
            open.uncommitted += taken.bytes;
            open.finished |= taken.finished;
            self.pending += taken.bytes;
        }
    }
}

/// What a commit took of a session file.
pub struct Taken {
    /// The snapshot to import.
    pub copy: PathBuf,
    /// The uncommitted bytes it covers.
    pub bytes: u64,
    /// The file's length it was taken at.
    pub length: u64,
    /// The session had said it finished.
    finished: bool,
}
