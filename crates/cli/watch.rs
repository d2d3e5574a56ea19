//! `epistore watch`: imports agent sessions as they are written (docs/importers.md §7,
//! "Live sessions").
//!
//! One import of every path first, then one import per burst of file-system
//! notifications (a pass starts once no event came for `--debounce-ms`). A pass is an
//! ordinary import of the folders the changed files are in: a log that grew is a new
//! episode superseding its earlier import, a file already imported is already present,
//! a JSON Lines file whose last line is still being written is left for the next pass.
//! Each pass commits through the store's normal ingest and opens the store only for
//! its duration, so killing `watch` at any moment loses nothing (the next pass, or the
//! next `watch`, imports what the killed one did not commit) and duplicates nothing
//! (what was committed is already present). Idle, it waits on the notifications
//! (inotify, FSEvents, ...): no polling.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use epistore_store::Store;

use crate::import::{self, ImportArgs};

#[derive(clap::Args)]
pub struct WatchArgs {
    /// Folders (or files) to watch; default: the session stores of the agents found in
    /// the home directory (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp,
    /// OpenCode's and Goose's stores, Cline's tasks, ...).
    pub paths: Vec<PathBuf>,
    /// Quiet time after a change before its pass starts.
    #[arg(long, default_value_t = 500)]
    pub debounce_ms: u64,
    /// The model, for logs that name none.
    #[arg(long)]
    pub model: Option<String>,
    /// Replace what looks like a secret before packaging (as `import --redact`).
    #[arg(long)]
    pub redact: bool,
    /// No line per pass.
    #[arg(long, short)]
    pub quiet: bool,
    /// Stop after this many milliseconds without a change (for scripts and tests; by
    /// default watch runs until interrupted).
    #[arg(long, hide = true)]
    pub exit_when_idle_ms: Option<u64>,
}

/// The session stores agents write, under the home directory, and whether to watch
/// below them: OpenCode's data folder also holds its snapshot repositories, so only its
/// own files (the store and its write-ahead log) are watched there.
const STORES: [(&str, bool); 14] = [
    (".claude/projects", true),
    (".codex/sessions", true),
    (".gemini/tmp", true),
    (".openhands/sessions", true),
    (".pi/agent/sessions", true),
    (".copilot/session-state", true),
    (".aider.chat.history.md", false),
    (".local/share/opencode", false),
    (".local/share/opencode/storage", true),
    (".local/share/goose/sessions", true),
    (".cline/data/tasks", true),
    (".config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks", true),
    (".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks", true),
    (".config/Code/User/globalStorage/kilocode.kilo-code/tasks", true),
];

fn default_paths() -> Vec<(PathBuf, bool)> {
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from) else { return Vec::new() };
    STORES.iter().map(|(s, r)| (home.join(s), *r)).filter(|(p, _)| p.exists()).collect()
}

pub fn watch(store_dir: &Path, args: WatchArgs) -> Result<ExitCode> {
    use notify::Watcher as _;
    let watched =
        if args.paths.is_empty() { default_paths() } else { args.paths.iter().map(|p| (p.clone(), true)).collect() };
    let paths: Vec<PathBuf> = watched.iter().map(|(p, _)| p.clone()).collect();
    anyhow::ensure!(
        !paths.is_empty(),
        "no agent session store found under the home directory ({}): give the folders to watch",
        STORES.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(", ")
    );
    for p in &paths {
        anyhow::ensure!(p.exists(), "{}: no such file or directory", p.display());
    }
    let (tx, rx) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(e) = event {
            // Reading a file (this importer reading an SQLite store, whose library sets
            // the modes of its log and index on every open) is no change of it.
            let content = !matches!(
                e.kind,
                notify::EventKind::Access(_) | notify::EventKind::Modify(notify::event::ModifyKind::Metadata(_))
            );
            if content {
                let _ = tx.send(e.paths);
            }
        }
    })
    .context("starting the file-system watcher")?;
    for (p, below) in &watched {
        let mode = if *below { notify::RecursiveMode::Recursive } else { notify::RecursiveMode::NonRecursive };
        watcher.watch(p, mode).with_context(|| format!("watching {}", p.display()))?;
    }
    if !args.quiet {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        eprintln!("watching {}", shown.join(", "));
    }
    // The first pass: every watched file and folder, a folder watched alone (OpenCode's
    // data folder) by its stores only.
    pass(store_dir, &args, watched.iter().flat_map(|(p, below)| first_scope(p, *below)).collect())?;
    let debounce = Duration::from_millis(args.debounce_ms);
    let mut changed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut last_event = Instant::now();
    loop {
        let wait = if changed.is_empty() {
            args.exit_when_idle_ms.map_or(Duration::from_secs(3600), Duration::from_millis)
        } else {
            debounce
        };
        match rx.recv_timeout(wait) {
            Ok(event_paths) => {
                changed.extend(event_paths);
                last_event = Instant::now();
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !changed.is_empty() => {
                let scopes = scopes(std::mem::take(&mut changed), &watched);
                if !scopes.is_empty() {
                    pass(store_dir, &args, scopes)?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if args.exit_when_idle_ms.is_some_and(|ms| last_event.elapsed() >= Duration::from_millis(ms)) {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => anyhow::bail!("the file-system watcher stopped"),
        }
    }
}

/// The folders to import again for a set of changed files: each file's session folder
/// (a Claude Code subagent's `<session>/subagents/` belongs to the folder holding
/// `<session>.jsonl`; a Gemini CLI subagent's `chats/<session>/` to `chats/`), never
/// wider than the watched path it is under.
fn scopes(changed: BTreeSet<PathBuf>, watched: &[(PathBuf, bool)]) -> Vec<PathBuf> {
    let mut out: BTreeSet<PathBuf> = BTreeSet::new();
    for file in changed {
        // The deepest watched path the file is under (OpenCode's `storage/` inside its
        // data folder).
        let Some((root, below)) =
            watched.iter().filter(|(r, _)| file.starts_with(r)).max_by_key(|(r, _)| r.components().count())
        else {
            continue;
        };
        if root.is_file() {
            out.insert(root.clone());
            continue;
        }
        // An SQLite store (OpenCode's, Goose's) changes through its write-ahead log: the
        // store itself is what to read. Its shared-memory index changes whenever anyone
        // reads it, this importer too: not a change of the store.
        if file.to_string_lossy().ends_with(".db-shm") {
            continue;
        }
        if let Some(db) = sqlite_store(&file) {
            out.insert(db);
            continue;
        }
        // A folder watched for its stores only: nothing else in it is read.
        if !below {
            continue;
        }
        let mut dir = file.parent().map(Path::to_path_buf).unwrap_or_else(|| root.clone());
        if dir.file_name().is_some_and(|n| n == "subagents") {
            dir = dir.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or(dir);
        } else if dir.parent().and_then(Path::file_name).is_some_and(|n| n == "chats")
            || dir.file_name().is_some_and(|n| n == "events")
        {
            // A Gemini CLI subagent's `chats/<session>/`, an OpenHands session's
            // `events/`: the folder above holds the session.
            dir = dir.parent().map(Path::to_path_buf).unwrap_or(dir);
        }
        if !dir.starts_with(root) {
            dir = root.clone();
        }
        if dir.exists() {
            out.insert(dir);
        }
    }
    // A folder inside another one of the set is imported with it.
    let all: Vec<PathBuf> = out.iter().cloned().collect();
    out.into_iter().filter(|d| !all.iter().any(|o| o != d && d.starts_with(o))).collect()
}

/// The SQLite store a changed file belongs to: `X.db`, `X.db-wal`.
fn sqlite_store(file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_str()?;
    let db = name.strip_suffix("-wal").unwrap_or(name);
    let path = file.with_file_name(db);
    (db.ends_with(".db") && path.is_file()).then_some(path)
}

/// What the first pass reads of a watched path: the path, or for a folder watched
/// without what is below it, its SQLite stores only.
fn first_scope(path: &Path, below: bool) -> Vec<PathBuf> {
    if below || path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut stores: Vec<PathBuf> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "db") && p.is_file())
        .collect();
    stores.sort();
    stores
}

/// One import of `paths` into the store, opened for the pass only.
fn pass(store_dir: &Path, args: &WatchArgs, paths: Vec<PathBuf>) -> Result<()> {
    let store =
        Store::open_or_create(store_dir).with_context(|| format!("opening the store at {}", store_dir.display()))?;
    let import_args = ImportArgs::for_watch(paths, args.model.clone(), args.redact);
    let summary = import::import_summary(Some(&store), &import_args)?;
    drop(store);
    if !args.quiet {
        let total = |key: &str| -> u64 {
            summary["formats"].as_array().into_iter().flatten().filter_map(|f| f[key].as_u64()).sum()
        };
        let refused = summary["refused"].as_array().map_or(0, Vec::len);
        let (imported, grew) = (total("imported"), total("superseding"));
        if imported + refused as u64 > 0 {
            eprintln!(
                "{}: imported {imported} ({grew} grew since their last import), refused {refused}",
                chrono::Utc::now().format("%H:%M:%S")
            );
            for r in summary["refused"].as_array().into_iter().flatten() {
                let shown = format!("{}: {}", r["file"].as_str().unwrap_or(""), r["reason"].as_str().unwrap_or(""));
                eprintln!("  refused: {}", epistore_sql::printable(&shown));
            }
        }
    }
    Ok(())
}
