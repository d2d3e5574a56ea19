//! The epistore store: an append-only, content-addressed home for episode packages,
//! on redb and blake3.
//!
//! * Every file of every package is a blob found by its blake3 hash, stored once
//!   (zstd-compressed when that helps), however many episodes share it.
//! * An episode is found by its id (docs/format.md §6.4: blake3 over the package listing), so the
//!   same package ingested twice is one episode.
//! * Values are appended under sequence numbers (blob numbers, episode numbers in ingest
//!   order); small hash -> number indexes find them (format `epistore-store/2`).
//!   [`Store::migrate`] converts a store of the previous format.
//! * Each write transaction appends one ingest-log entry naming the episodes it added;
//!   nothing is ever updated in place or deleted.
//! * A package goes in whole, in one transaction, or not at all.
//! * Episodes are indexed by cell (model, harness level, task).
//!
//! The byte-level layout is documented in `docs/store-format.md`.
//! This crate has no Arrow or DataFusion in it, so it stays small and quick to build.

mod codec;
mod error;
mod ingest;
mod migrate;
mod read;
mod tables;
mod verify;
#[cfg(test)]
mod verify_tests;

pub use error::{Error, Result};
pub use ingest::{
    IngestOptions, IngestProgress, IngestReport, Outcome as PackageOutcome, PackageRead, PackageResult, Stopped,
    DEFAULT_MEMORY_BUDGET,
};
pub use migrate::{MigrateProgress, MigrateReport, FORMAT1_FILE};
pub use read::{decode_record_bytes, decode_traces, Cell, IngestBatch, Snapshot};
pub use tables::{EpisodeRecord, FileEntry, PREVIOUS_FORMAT, STORE_FORMAT};
pub use verify::{RepairReport, VerifyReport};

use std::path::{Path, PathBuf};

use redb::{ConcurrencyMode, Database, ReadOnlyDatabase, ReadableDatabase};

/// The file holding the store inside its directory.
pub const DB_FILE: &str = "epistore.redb";

enum Handle {
    Writer(Database),
    Reader(ReadOnlyDatabase),
}

/// An open store. Open it for writing with [`Store::open_or_create`] (one writer
/// process at a time) or for reading with [`Store::open_read_only`] (any number of
/// processes, also while a writer ingests: each [`Snapshot`] is consistent).
pub struct Store {
    handle: Handle,
    dir: PathBuf,
}

pub(crate) fn builder() -> redb::Builder {
    let mut b = Database::builder();
    // One writer process, any number of readers following its commits.
    b.set_concurrency_mode(ConcurrencyMode::SingleWriter);
    b
}

impl Store {
    /// Opens the store in `dir` for writing, creating the directory and an empty store
    /// on first use.
    pub fn open_or_create(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        error::guarded(|| Store::open_writer(dir))
    }

    fn open_writer(dir: PathBuf) -> Result<Store> {
        let io = |path: &Path, e| Error::Io { path: path.to_path_buf(), source: e };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let file = dir.join(DB_FILE);
        if !file.exists() {
            // Build the empty store beside its final name and rename it into place, so a
            // crash during creation never leaves a half-made file under the real name.
            let fresh = dir.join(format!("{DB_FILE}.new"));
            let _ = std::fs::remove_file(&fresh);
            let db = builder().create(&fresh).map_err(|e| Error::open(&dir, e))?;
            tables::initialise(&db)?;
            db.close().map_err(|e| Error::open(&dir, e))?;
            std::fs::File::open(&fresh).and_then(|f| f.sync_all()).map_err(|e| io(&fresh, e))?;
            std::fs::rename(&fresh, &file).map_err(|e| io(&file, e))?;
            std::fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| io(&dir, e))?;
        }
        let db = builder().open(&file).map_err(|e| Error::open(&dir, e))?;
        tables::initialise(&db).map_err(|e| e.in_store(&dir))?;
        Ok(Store { handle: Handle::Writer(db), dir })
    }

    /// Opens an existing store for reading. A store left mid-write by a crash is
    /// recovered first (which needs that no writer has it open).
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref().to_path_buf();
        error::guarded(|| Store::open_reader(dir))
    }

    fn open_reader(dir: PathBuf) -> Result<Store> {
        let file = dir.join(DB_FILE);
        if !file.is_file() {
            return Err(Error::NoStore(dir));
        }
        let db = match builder().open_read_only(&file) {
            Ok(db) => db,
            Err(redb::DatabaseError::RepairAborted) => {
                // The last writer died mid-transaction: open it writable once, which
                // rolls back to the last commit, then read.
                drop(builder().open(&file).map_err(|e| Error::open(&dir, e))?);
                builder().open_read_only(&file).map_err(|e| Error::open(&dir, e))?
            }
            Err(e) => return Err(Error::open(&dir, e)),
        };
        tables::check_format(&db.begin_read().map_err(Error::redb)?).map_err(|e| e.in_store(&dir))?;
        Ok(Store { handle: Handle::Reader(db), dir })
    }

    /// Rewrites the file without the free space that page allocation leaves behind.
    /// Nothing stored changes; readers must not be open in this process.
    pub fn compact(&mut self) -> Result<bool> {
        match &mut self.handle {
            Handle::Writer(db) => db.compact().map_err(|e| Error::Storage(e.to_string())),
            Handle::Reader(_) => Err(Error::ReadOnly),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A consistent view of the store as of the last commit.
    pub fn snapshot(&self) -> Result<Snapshot> {
        error::guarded(|| self.begin_snapshot())
    }

    fn begin_snapshot(&self) -> Result<Snapshot> {
        let txn = match &self.handle {
            Handle::Writer(db) => db.begin_read(),
            Handle::Reader(db) => db.begin_read(),
        }
        .map_err(Error::redb)?;
        Ok(Snapshot::new(txn))
    }

    fn writer(&self) -> Result<&Database> {
        match &self.handle {
            Handle::Writer(db) => Ok(db),
            Handle::Reader(_) => Err(Error::ReadOnly),
        }
    }
}
