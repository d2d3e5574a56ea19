use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no store at {0} (run `epistore ingest` to create one)")]
    NoStore(PathBuf),
    #[error("cannot open the store at {path}: {message}")]
    Open { path: PathBuf, message: String },
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
    #[error("no episode matches `{0}`")]
    NoEpisode(String),
    #[error("`{0}` matches several episodes; give more of the id")]
    Ambiguous(String),
    #[error(transparent)]
    Package(#[from] epistore_package::Error),
}

impl Error {
    pub(crate) fn redb(e: impl Into<redb::Error>) -> Error {
        Error::Storage(e.into().to_string())
    }

    /// Names the store in a format error, and says how to move on when the store is
    /// one that [`crate::Store::migrate`] converts.
    pub(crate) fn in_store(self, dir: &Path) -> Error {
        match self {
            Error::Format { found, expected } if found == crate::PREVIOUS_FORMAT => {
                Error::NeedsMigration { path: dir.to_path_buf(), found, expected }
            }
            other => other,
        }
    }

    pub(crate) fn open(path: &Path, e: redb::DatabaseError) -> Error {
        let message = match e {
            redb::DatabaseError::DatabaseAlreadyOpen => {
                "another process is writing to it (one writer at a time; readers may run alongside)".to_string()
            }
            other => other.to_string(),
        };
        Error::Open { path: path.to_path_buf(), message }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
