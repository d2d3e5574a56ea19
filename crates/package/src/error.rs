use std::fmt;
use std::path::PathBuf;

/// Why a package was rejected, located as precisely as the input allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The package: a directory path, or `archive.tar.gz!dir` for a member of an archive.
    pub package: String,
    /// The file inside the package (`traces/tools.jsonl`), when the problem is in one.
    pub file: Option<String>,
    /// 1-based line of a `.jsonl` file.
    pub line: Option<usize>,
    /// Dotted field path (`model.name`, `requirements[0].id`).
    pub field: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn package(package: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem { package: package.into(), file: None, line: None, field: None, message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.package)?;
        if let Some(file) = &self.file {
            write!(f, ": {file}")?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The package breaks the contract; nothing of it may be stored.
    #[error("{0}")]
    Invalid(Box<Problem>),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// An archive that cannot be read at all (not one bad package in it).
    #[error("{path}: {message}")]
    Archive { path: PathBuf, message: String },
}

impl From<Problem> for Error {
    fn from(problem: Problem) -> Error {
        Error::Invalid(Box::new(problem))
    }
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
