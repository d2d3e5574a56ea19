//! The seam for columnar trajectory files (Parquet). Reading Parquet needs Arrow, which
//! this crate keeps out (its dependents, the store and the viewer, must not pull it
//! in): a crate of its own implements [`RowFiles`], and the command line or the Python
//! package hands it in through [`crate::Options::row_files`]. The trajectory importer
//! then reads such a file as it reads JSON Lines: one unit per row, each row given to
//! it as a JSON object.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A reader of one columnar file format.
pub trait RowFiles: Send + Sync {
    /// The format's name, for messages ("Parquet").
    fn name(&self) -> &'static str;
    /// Opens a file: its columns and rows, or why it cannot be read.
    fn open(&self, path: &Path) -> Result<Arc<dyn Rows>, String>;
}

/// An open columnar file. Rows are asked for by index from many threads, mostly in
/// order; the reader keeps what makes that cheap (positioned cursors) and frees it when
/// the last unit holding it is read.
pub trait Rows: Send + Sync {
    /// The top-level column names.
    fn columns(&self) -> Vec<String>;
    /// How many rows the file holds.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Row `index` (0-based) as a compact JSON object, the bytes kept as its source
    /// copy; or why it cannot be read.
    fn row(&self, index: usize) -> Result<Vec<u8>, String>;
}

/// [`crate::Options::row_files`]: a reader handed in by the caller.
#[derive(Clone)]
pub struct RowReader(pub Arc<dyn RowFiles>);

impl fmt::Debug for RowReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RowReader({})", self.0.name())
    }
}

/// Whether a file is columnar by its first bytes and name (the Parquet magic).
pub(crate) fn is_parquet(head: &[u8], name: &str) -> bool {
    head.starts_with(b"PAR1") && name.ends_with(".parquet")
}
