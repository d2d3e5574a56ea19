use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no store at {0} (run `epistore ingest` to create one)")]
    NoStore(PathBuf),
    #[error("cannot open the store at {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error(
        "cannot open the store at {0}: another process is writing to it (one writer at a time; readers may run alongside)"
    )]
    Busy(PathBuf),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("storage: {0}")]
    Storage(String),
    #[error("the store was opened read-only")]
    ReadOnly,
    #[error("the store has format `{found}`; this build reads `{expected}`")]
    Format { found: String, expected: String },
    #[error(
        "the store has format `{found}`; this build uses `{expected}`. \
         Run `epistore --store {path} migrate`: it copies the store into the new format and keeps the old file beside it"
    )]
    NeedsMigration { path: PathBuf, found: String, expected: String },
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// redb met bytes it cannot make sense of (it panics on some damage; [`guarded`]
    /// turns that into this error).
    #[error("the store file is damaged ({0}); `epistore verify` says what it can see of it")]
    Damaged(String),
    #[error("no episode matches `{0}`")]
    NoEpisode(String),
    #[error("no annotation matches `{0}`")]
    NoAnnotation(String),
    /// An annotation that breaks a rule of docs/store-format.md §3.11.
    #[error("{0}")]
    Annotation(String),
    #[error("`{prefix}` matches several episodes ({}{}); give more of the id", .candidates.join(", "), if *.more { ", ..." } else { "" })]
    Ambiguous {
        prefix: String,
        /// The first matching ids (in id order), to choose from.
        candidates: Vec<String>,
        /// More ids match than are listed.
        more: bool,
    },
    #[error(transparent)]
    Package(#[from] epistore_package::Error),
    #[error(
        "ingest stopped after {} of {} sources: {}. Committed before it: {} packages added in {} batches; the store \
         holds them and is intact. The rest did not go in: run the same ingest again (packages already stored are skipped)",
        .0.sources_done, .0.sources_total, .0.cause, .0.committed.added(), .0.committed.batches.len()
    )]
    IngestStopped(Box<crate::ingest::Stopped>),
}

impl Error {
    pub(crate) fn redb(e: impl Into<redb::Error>) -> Error {
        Error::Storage(e.into().to_string())
    }

    /// Names the store in a format error, and says how to move on when the store is
    /// one that [`crate::Store::migrate`] converts.
    pub(crate) fn in_store(self, dir: &Path) -> Error {
        match self {
            Error::Format { found, expected } if crate::PREVIOUS_FORMATS.contains(&found.as_str()) => {
                Error::NeedsMigration { path: dir.to_path_buf(), found, expected }
            }
            other => other,
        }
    }

    /// Names the episode a corruption was found in.
    pub(crate) fn for_episode(self, id: &epistore_package::Hash) -> Error {
        match self {
            Error::Corrupt(what) => Error::Corrupt(format!("episode {}: {what}", epistore_package::hex(id))),
            other => other,
        }
    }

    pub(crate) fn open(path: &Path, e: redb::DatabaseError) -> Error {
        match e {
            redb::DatabaseError::DatabaseAlreadyOpen => Error::Busy(path.to_path_buf()),
            other => Error::Open { path: path.to_path_buf(), message: other.to_string() },
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

thread_local! {
    /// The last panic raised inside redb on this thread, for [`guarded`].
    static STORAGE_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Whether a panic was raised in redb's own source (a damaged file: redb trusts its
/// pages and some damage trips an assertion or an `unwrap` inside it).
fn raised_in_redb(location: &std::panic::Location<'_>) -> bool {
    let file = location.file().replace('\\', "/");
    file.contains("/redb-") || file.starts_with("redb-")
}

/// Installs, once per process, a panic hook that keeps panics raised inside redb quiet
/// and records them for [`guarded`]; every other panic goes to the hook that was there.
fn install_storage_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| match info.location() {
            Some(location) if raised_in_redb(location) => {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_string());
                let short = location.file().rsplit("/src/").next().unwrap_or(location.file());
                let text = format!("redb stopped at {short}:{}: {message}", location.line());
                STORAGE_PANIC.with_borrow_mut(|slot| *slot = Some(text));
            }
            _ => previous(info),
        }));
    });
}

/// Runs `f`, turning a panic raised inside redb into [`Error::Damaged`]. Any other panic
/// is a bug of ours and goes on unwinding. Every public entry point that reads or
/// writes the file runs through this, so a damaged store gives an error that says so,
/// never a backtrace.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    install_storage_panic_hook();
    STORAGE_PANIC.with_borrow_mut(|slot| *slot = None);
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => match STORAGE_PANIC.with_borrow_mut(|slot| slot.take()) {
            Some(message) => Err(Error::Damaged(message)),
            None => std::panic::resume_unwind(payload),
        },
    }
}
