//! The epistore store: an append-only, content-addressed home for episode packages,
//! on redb and blake3.
//!
//! * The files only one episode has (manifest, outcome, traces, reports, small
//!   artifacts) live in that episode's own value, compressed together with a zstd
//!   dictionary trained on the store's own values; the files packages share (larger
//!   artifacts, large files) are blobs found by their blake3 hash, stored once however
//!   many episodes have them.
//! * An episode is found by its id (docs/format.md §6.4: blake3 over the package listing), so the
//!   same package ingested twice is one episode.
//! * Values are appended under sequence numbers (blob numbers, episode numbers in ingest
//!   order); small hash -> number indexes find them (format `epistore-store/4`).
//!   [`Store::migrate`] converts a store of an earlier format.
//! * Every commit saves redb's allocator state (quick repair), so a store killed
//!   mid-write reopens without a walk over the file.
//! * Each write transaction appends one ingest-log entry naming the episodes it added;
//!   nothing is ever updated in place or deleted.
//! * A package goes in whole, in one transaction, or not at all.
//! * Episodes are indexed by cell (model, harness level, task).
//!
//! The byte-level layout is documented in `docs/store-format.md`.
//! This crate has no Arrow or DataFusion in it, so it stays small and quick to build.

mod annotate;
#[cfg(test)]
mod annotate_tests;
mod codec;
mod error;
mod ingest;
mod migrate;
mod pack;
mod read;
mod tables;
mod verify;
#[cfg(test)]
mod verify_tests;

pub use annotate::{
    Annotated, Annotation, AnnotationKind, Generation, Judgement, StoredAnnotation, ANNOTATION_FORMAT, MAX_LABEL_CHARS,
    MAX_NOTE_BYTES,
};
pub use error::{Error, Result};
pub use ingest::{
    Arrival, IngestOptions, IngestProgress, IngestReport, Outcome as PackageOutcome, PackageRead, PackageResult,
    Stopped, DEFAULT_DICTIONARY_SAMPLES, DEFAULT_MEMORY_BUDGET,
};
pub use migrate::{kept_file_name, MigrateProgress, MigrateReport};
pub use pack::Decoder;
pub use read::{decode_record_bytes, decode_traces, Cell, IngestBatch, PackageFiles, Snapshot};
pub use tables::{
    shared_file, EpisodeRecord, FileEntry, PREVIOUS_FORMATS, SHARED_MIN_ANYWHERE, SHARED_MIN_ARTIFACT, STORE_FORMAT,
};
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

/// redb's page cache per open store.
pub const CACHE_BYTES: usize = 256 << 20;

pub(crate) fn builder() -> redb::Builder {
    let mut b = Database::builder();
    // One writer process, any number of readers following its commits.
    b.set_concurrency_mode(ConcurrencyMode::SingleWriter);
    // redb's own page cache (its default is 1 GiB): a long import fills it with pages it
    // has written and will not read again, on top of the ingest's memory budget. Queries
    // read columnar segments, and the operating system caches the file anyway.
    b.set_cache_size(CACHE_BYTES);
    // redb calls this only when it must walk the whole file to rebuild its allocator
    // state: a crash after a commit made without quick repair (see `tables::begin_write`).
    b.set_repair_callback(|_| {
        FULL_REPAIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    b
}

static FULL_REPAIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times this process had redb walk a whole store file to recover it (each
/// repair counts once per progress step redb reports). Every commit saves the
/// allocator state, so this stays 0 for stores this build wrote; tests check that.
pub fn full_repairs() -> u64 {
    FULL_REPAIRS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Opens a store file for reading. redb refuses a read-only open of a file whose last
/// writer died mid-write (`RepairAborted`), by design; opening it writable once rolls
/// it back to the last commit, which the saved allocator state makes quick. Another
/// reader may be doing the same at that moment (the writable open then finds the file
/// taken): it is retried for a while, as the other's recovery takes milliseconds.
fn open_read_only_recovering(file: &Path) -> std::result::Result<ReadOnlyDatabase, redb::DatabaseError> {
    let mut waited = std::time::Duration::ZERO;
    let mut recovered = 0;
    loop {
        match builder().open_read_only(file) {
            // A recovery that did not leave the file clean is not tried forever.
            Err(redb::DatabaseError::RepairAborted) if recovered < 3 => match builder().open(file) {
                Ok(db) => {
                    drop(db);
                    recovered += 1;
                }
                Err(redb::DatabaseError::DatabaseAlreadyOpen) if waited < std::time::Duration::from_secs(5) => {
                    let pause = std::time::Duration::from_millis(20);
                    std::thread::sleep(pause);
                    waited += pause;
                }
                Err(e) => return Err(e),
            },
            other => return other,
        }
    }
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
        let db = open_read_only_recovering(&file).map_err(|e| Error::open(&dir, e))?;
        tables::check_format(&db.begin_read().map_err(Error::redb)?).map_err(|e| e.in_store(&dir))?;
        Ok(Store { handle: Handle::Reader(db), dir })
    }

    /// Rewrites the file without the free space that page allocation leaves behind.
    /// Nothing stored changes; readers must not be open in this process.
    pub fn compact(&mut self) -> Result<bool> {
        match &mut self.handle {
            Handle::Writer(db) => {
                let compacted = db.compact().map_err(|e| Error::Storage(e.to_string()))?;
                // Compaction's own commits do not save the allocator state: an empty
                // commit that does keeps a crash after it cheap to recover from.
                tables::begin_write(db)?.commit().map_err(Error::redb)?;
                Ok(compacted)
            }
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
