//! Opening indexes, listing their files, and checking them for `verify`.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use tantivy::directory::{INDEX_WRITER_LOCK, META_LOCK};
use tantivy::{Index, IndexReader, ReloadPolicy};

use crate::readonly::ReadOnlyDirectory;
use crate::schema::schema;
use crate::{Error, Result};

/// Opens the index in `dir` read-only, and checks it has this crate's schema.
pub(crate) fn open_index(dir: &Path) -> Result<Index> {
    if !dir.is_dir() {
        return Err(Error::index(dir, "no such directory"));
    }
    let index = Index::open(ReadOnlyDirectory::open(dir)?).map_err(|e| Error::index(dir, e))?;
    if index.schema() != schema().0 {
        return Err(Error::index(dir, "not an index of epistore-search (its schema differs)"));
    }
    Ok(index)
}

/// A reader of an opened index that never reloads.
pub(crate) fn open_reader(dir: &Path, index: &Index) -> Result<IndexReader> {
    index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(|e| Error::index(dir, e))
}

/// Runs `work`, turning a panic of tantivy on a damaged index into an error naming it.
pub(crate) fn guarded<T>(dir: &Path, work: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(Error::index(dir, format!("reading the index failed (damaged?): {message}")))
    })
}

/// The files of a written index that a manifest should list: every regular file in
/// `dir` but tantivy's lock files, by name, sorted.
pub fn index_files(dir: &Path) -> Result<Vec<String>> {
    let locks = [&INDEX_WRITER_LOCK.filepath, &META_LOCK.filepath];
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::index(dir, format!("cannot read the directory: {e}")))? {
        let entry = entry.map_err(|e| Error::index(dir, format!("cannot read the directory: {e}")))?;
        let kind = entry.file_type().map_err(|e| Error::index(dir, format!("cannot read the directory: {e}")))?;
        if !kind.is_file() || locks.iter().any(|lock| Path::new(&entry.file_name()) == lock.as_path()) {
            continue;
        }
        let name = entry
            .file_name()
            .into_string()
            .map_err(|name| Error::index(dir, format!("the file name {} is not UTF-8", Path::new(&name).display())))?;
        files.push(name);
    }
    files.sort();
    Ok(files)
}

/// For `verify`: the index in `dir` opens, the checksums of its files validate, every
/// segment opens, and it holds `expected_docs` documents (when given). Returns the
/// problem, naming the directory, or `None` when there is none.
pub fn check_index(dir: &Path, expected_docs: Option<u64>) -> Option<String> {
    guarded(dir, || check(dir, expected_docs)).err().map(|e| e.to_string())
}

fn check(dir: &Path, expected_docs: Option<u64>) -> Result<()> {
    let index = open_index(dir)?;
    let damaged = index.validate_checksum().map_err(|e| Error::index(dir, format!("checksums not validated: {e}")))?;
    if !damaged.is_empty() {
        let mut names: Vec<String> = damaged.iter().map(|path| path.display().to_string()).collect();
        names.sort();
        return Err(Error::index(dir, format!("checksum mismatch in {}", names.join(", "))));
    }
    let searcher = open_reader(dir, &index)?.searcher();
    let docs = searcher.num_docs();
    match expected_docs {
        Some(expected) if expected != docs => {
            Err(Error::index(dir, format!("holds {docs} documents where {expected} are expected")))
        }
        _ => Ok(()),
    }
}
