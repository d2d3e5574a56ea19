//! Ingest: read, validate, hash and compress packages in parallel (rayon); one writer
//! commits them in batches.
//!
//! Packages are prepared a chunk at a time on the rayon pool while the writer commits
//! the previous chunk, so memory stays bounded by two chunks whatever the input size.
//! A chunk is one write transaction: every package in it is committed whole, or (on a
//! crash) not at all. A rejected package is never handed to the writer.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{SystemTime, UNIX_EPOCH};

use epistore_package::{
    hex, parse_package, read_source_within, BuiltPackage, Episode, Hash, Limits, MemoryBudget, RawPackage, Reservation,
    Source, TRACE_FILES,
};
use rayon::prelude::*;
use redb::ReadableDatabase;

use crate::codec;
use crate::error::{Error, Result};
use crate::pack::Packer;
use crate::read::IngestBatch;
use crate::tables::{
    begin_write, latest_dictionary, shared_file, Appender, EpisodeRecord, EpisodeValues, FileEntry, DICTIONARIES,
    EPISODE_INDEX,
};
use crate::Store;

#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub limits: Limits,
    /// Sources prepared per chunk (and packages per transaction, roughly).
    pub chunk_sources: usize,
    /// Recorded in the ingest log: what was ingested (paths given on the command line).
    pub label: String,
    /// Bytes of package files the reader threads may hold at once, all together
    /// (`epistore_package::MemoryBudget`): memory follows this, not the thread count.
    /// One source at a time may read past it, up to its own limits.
    pub memory_budget: u64,
    /// Values (traces, own files, records) sampled before the store's compression
    /// dictionary is trained, when it has none yet (0: never train one).
    pub dictionary_samples: usize,
}

/// The default [`IngestOptions::dictionary_samples`]: about a hundred episodes.
pub const DEFAULT_DICTIONARY_SAMPLES: usize = 300;

/// The default [`IngestOptions::memory_budget`].
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            limits: Limits::default(),
            chunk_sources: 512,
            label: String::new(),
            memory_budget: DEFAULT_MEMORY_BUDGET,
            dictionary_samples: DEFAULT_DICTIONARY_SAMPLES,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Added,
    AlreadyPresent,
    Rejected(String),
}

#[derive(Debug, Clone)]
pub struct PackageResult {
    /// The package as named to the user (directory, or `archive!dir`).
    pub name: String,
    /// Hex episode id, when the package could be read.
    pub episode_id: Option<String>,
    pub outcome: Outcome,
}

/// What one ingest did.
#[derive(Debug, Clone, Default)]
pub struct IngestReport {
    pub packages: Vec<PackageResult>,
    /// Bytes of package files read.
    pub bytes_read: u64,
    /// New blobs written (files not seen before in the store).
    pub blobs_added: u64,
    /// Ingest-log sequence numbers of the batches written.
    pub batches: Vec<u64>,
}

impl IngestReport {
    pub fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.packages.iter().filter(|p| f(&p.outcome)).count()
    }
    pub fn added(&self) -> usize {
        self.count(|o| *o == Outcome::Added)
    }
    pub fn already_present(&self) -> usize {
        self.count(|o| *o == Outcome::AlreadyPresent)
    }
    pub fn rejected(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Rejected(_)))
    }
}

/// An ingest that a storage failure stopped part way: what it had committed (all of
/// it stays in the store) and how far through its input it was.
#[derive(Debug)]
pub struct Stopped {
    pub committed: IngestReport,
    pub sources_done: usize,
    pub sources_total: usize,
    pub cause: Error,
}

/// Progress after each committed chunk.
#[derive(Debug, Clone, Copy)]
pub struct IngestProgress {
    pub sources_done: usize,
    pub sources_total: usize,
    pub packages_done: usize,
    pub bytes_read: u64,
}

/// A package ready to commit: everything CPU-heavy already done.
struct Prepared {
    name: String,
    id: Hash,
    /// The typed episode, handed to the commit observer after the commit.
    episode: Episode,
    /// (hash, encoded blob) of every shared file (`tables::shared_file`).
    blobs: Vec<(Hash, Vec<u8>)>,
    record: EpisodeRecord,
    /// Packed typed traces and own files (the record is packed by the writer, which
    /// sets its batch).
    traces: Vec<u8>,
    files: Vec<u8>,
    bytes: u64,
}

/// What every commit of one ingest shares: the log label and the packer.
#[derive(Clone, Copy)]
struct Writing<'a> {
    label: &'a str,
    packer: &'a Packer,
}

/// One package read from a unit: its files, or why it could not be read.
pub type PackageRead = std::result::Result<RawPackage, epistore_package::Error>;

/// A package handed to the store: files it parses, or files a
/// [`PackageBuilder`](epistore_package::PackageBuilder) already parsed on its way out
/// (an importer's), which the store does not parse a second time.
pub enum Arrival {
    Raw(RawPackage),
    Built(Box<BuiltPackage>),
}

impl From<RawPackage> for Arrival {
    fn from(raw: RawPackage) -> Self {
        Arrival::Raw(raw)
    }
}

impl From<BuiltPackage> for Arrival {
    fn from(built: BuiltPackage) -> Self {
        Arrival::Built(Box::new(built))
    }
}

enum Item {
    Ready(Box<Prepared>),
    Rejected { name: String, id: Option<Hash>, reason: String },
}

fn prepare(arrival: Arrival, packer: &Packer) -> Item {
    let (raw, episode) = match arrival {
        Arrival::Built(built) => {
            let BuiltPackage { raw, episode } = *built;
            (raw, episode)
        }
        Arrival::Raw(raw) => match parse_package(&raw) {
            Ok(e) => (raw, e),
            Err(problem) => return Item::Rejected { name: raw.name, id: Some(raw.id), reason: problem.to_string() },
        },
    };
    let record = record_of(&raw, &episode);
    let traces = packer.pack(&codec::encode(&episode));
    let (shared, own): (Vec<_>, Vec<_>) = raw.files.iter().partition(|f| shared_file(&f.path, f.bytes.len() as u64));
    let files = packer.pack(&own.iter().map(|f| f.bytes.as_slice()).collect::<Vec<_>>().concat());
    let bytes = raw.total_bytes();
    let blobs = shared.iter().map(|f| (f.hash, codec::encode_blob(&f.bytes))).collect();
    Item::Ready(Box::new(Prepared { name: raw.name, id: raw.id, episode, blobs, record, traces, files, bytes }))
}

/// The stored summary of a parsed package (`ingest_seq` is set by the writer). `verify`
/// derives it again from the stored files through the same function.
pub(crate) fn record_of(raw: &RawPackage, episode: &Episode) -> EpisodeRecord {
    EpisodeRecord {
        id: raw.id,
        ingest_seq: 0,
        source: raw.name.clone(),
        files: raw
            .files
            .iter()
            .map(|f| FileEntry { path: f.path.clone(), hash: f.hash, size: f.bytes.len() as u64 })
            .collect(),
        manifest: episode.manifest.clone(),
        outcome: episode.outcome.clone(),
        derived: episode.derived.clone(),
        trace_counts: TRACE_FILES.map(|(_, kind)| episode.trace_len(kind).map(|n| n as u32)),
    }
}

/// Reads and prepares a chunk of units. Each unit's files are charged to the budget
/// while read and given back once its packages are prepared (compressed), before the
/// commit, so what waits for the writer is the compressed form only.
fn prepare_chunk<U: Sync, P: Into<Arrival>>(
    units: &[U],
    read: &(impl Fn(&U, &mut Reservation) -> Vec<std::result::Result<P, epistore_package::Error>> + Sync),
    budget: &MemoryBudget,
    packer: &Packer,
) -> Vec<Item> {
    units
        .par_iter()
        .flat_map_iter(|unit| {
            let mut reservation = budget.reserve();
            let items: Vec<Item> = read(unit, &mut reservation)
                .into_iter()
                .map(|read| match read {
                    Ok(package) => prepare(package.into(), packer),
                    Err(e) => Item::Rejected { name: name_of(&e), id: None, reason: e.to_string() },
                })
                .collect();
            drop(reservation);
            items
        })
        .collect()
}

/// The threads that read and prepare packages: more than the cores, because on a cold
/// page cache a package spends most of its time waiting for the disk, and only many
/// reads in flight keep a (virtual) disk busy. The CPU work still shares the cores.
fn prepare_pool() -> Result<rayon::ThreadPool> {
    let threads = std::env::var("EPISTORE_INGEST_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| (4 * rayon::current_num_threads()).max(8));
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("epistore-prepare-{i}"))
        .build()
        .map_err(|e| Error::Storage(format!("cannot start the ingest threads: {e}")))
}

fn name_of(e: &epistore_package::Error) -> String {
    match e {
        epistore_package::Error::Invalid(p) => p.package.clone(),
        epistore_package::Error::Io { path, .. } | epistore_package::Error::Archive { path, .. } => {
            path.display().to_string()
        }
    }
}

impl Store {
    /// Ingests every package of `sources`. Valid packages go in even when others are
    /// rejected; the report says which is which. Errors are storage failures only.
    pub fn ingest(
        &self,
        sources: &[Source],
        options: &IngestOptions,
        progress: impl FnMut(IngestProgress),
    ) -> Result<IngestReport> {
        self.ingest_observed(sources, options, progress, |_, _| Ok(()))
    }

    /// As [`Store::ingest`], handing every committed batch (its ingest-log sequence and
    /// the episodes it added, typed) to `on_commit` right after its commit, so derived
    /// data can be built without decoding them again. An error from `on_commit` stops
    /// the ingest; what was committed stays committed.
    pub fn ingest_observed(
        &self,
        sources: &[Source],
        options: &IngestOptions,
        progress: impl FnMut(IngestProgress),
        on_commit: impl FnMut(u64, Vec<(EpisodeRecord, Episode)>) -> Result<()>,
    ) -> Result<IngestReport> {
        let limits = options.limits;
        self.ingest_from(
            sources,
            |source, reservation| read_source_within(source, &limits, reservation),
            options,
            progress,
            on_commit,
        )
    }

    /// As [`Store::ingest_observed`], with packages from anywhere: `read` turns one unit
    /// (a source, an index into a generator, ...) into its packages, charging the bytes
    /// it reads to the reservation it is given (`options.memory_budget` bounds them
    /// all). Units are read on the ingest threads, `options.chunk_sources` of them per
    /// chunk; progress counts units as sources.
    pub fn ingest_from<U: Sync, P: Into<Arrival>>(
        &self,
        units: &[U],
        read: impl Fn(&U, &mut Reservation) -> Vec<std::result::Result<P, epistore_package::Error>> + Sync + Send,
        options: &IngestOptions,
        mut progress: impl FnMut(IngestProgress),
        mut on_commit: impl FnMut(u64, Vec<(EpisodeRecord, Episode)>) -> Result<()>,
    ) -> Result<IngestReport> {
        let db = self.writer()?;
        let mut report = IngestReport::default();
        let chunk = options.chunk_sources.max(1);
        let mut done = IngestProgress { sources_done: 0, sources_total: units.len(), packages_done: 0, bytes_read: 0 };
        let packer = {
            let read = db.begin_read().map_err(Error::redb)?;
            let (latest, next) = latest_dictionary(&read.open_table(DICTIONARIES).map_err(Error::redb)?)?;
            Packer::new(latest, next, options.dictionary_samples)
        };

        let finished = std::thread::scope(|scope| -> Result<()> {
            // Preparation runs one chunk ahead of the writer.
            let (tx, rx) = mpsc::sync_channel::<(usize, Vec<Item>)>(1);
            let pool = prepare_pool()?;
            let read = &read;
            let budget = MemoryBudget::new(options.memory_budget);
            let packer = &packer;
            scope.spawn(move || {
                for part in units.chunks(chunk) {
                    if tx.send((part.len(), pool.install(|| prepare_chunk(part, read, &budget, packer)))).is_err() {
                        break; // the writer failed and stopped listening
                    }
                }
            });
            let mut seen_this_run: HashSet<Hash> = HashSet::new();
            for (n_sources, items) in rx {
                crate::error::guarded(|| {
                    let writing = Writing { label: &options.label, packer };
                    self.commit_chunk(db, items, &writing, &mut seen_this_run, &mut report, &mut on_commit)
                })?;
                done.sources_done += n_sources;
                done.packages_done = report.packages.len();
                done.bytes_read = report.bytes_read;
                progress(done);
            }
            Ok(())
        });
        match finished {
            Ok(()) => Ok(report),
            // What was committed stays committed: say what, so nobody has to guess
            // which half of a long ingest went in (a full disk stops it at any chunk).
            Err(cause) => Err(Error::IngestStopped(Box::new(Stopped {
                committed: report,
                sources_done: done.sources_done,
                sources_total: done.sources_total,
                cause,
            }))),
        }
    }

    fn commit_chunk(
        &self,
        db: &redb::Database,
        items: Vec<Item>,
        writing: &Writing<'_>,
        seen_this_run: &mut HashSet<Hash>,
        report: &mut IngestReport,
        on_commit: &mut dyn FnMut(u64, Vec<(EpisodeRecord, Episode)>) -> Result<()>,
    ) -> Result<()> {
        let mut results = Vec::with_capacity(items.len());
        let mut to_write = Vec::new();
        let mut bytes = 0;
        {
            // Cheap existence checks first, on a read snapshot, so a chunk of
            // already-present packages opens no write transaction at all.
            let read = db.begin_read().map_err(Error::redb)?;
            let episodes = read.open_table(EPISODE_INDEX).map_err(Error::redb)?;
            for item in items {
                match item {
                    Item::Rejected { name, id, reason } => results.push(PackageResult {
                        name,
                        episode_id: id.as_ref().map(hex),
                        outcome: Outcome::Rejected(reason),
                    }),
                    Item::Ready(p) => {
                        bytes += p.bytes;
                        let present = !seen_this_run.insert(p.id) || episodes.get(p.id).map_err(Error::redb)?.is_some();
                        let outcome = if present { Outcome::AlreadyPresent } else { Outcome::Added };
                        results.push(PackageResult { name: p.name.clone(), episode_id: Some(hex(&p.id)), outcome });
                        if !present {
                            to_write.push(*p);
                        }
                    }
                }
            }
        }
        // The chunk's packages enter the report only once its transaction commits, so a
        // failed commit leaves a report of exactly what is in the store.
        let mut blobs_added = 0;
        if !to_write.is_empty() {
            let (seq, committed) = self.write_batch(db, to_write, writing, &mut blobs_added)?;
            report.batches.push(seq);
            report.blobs_added += blobs_added;
            report.packages.extend(results);
            report.bytes_read += bytes;
            on_commit(seq, committed)?;
        } else {
            report.packages.extend(results);
            report.bytes_read += bytes;
        }
        Ok(())
    }

    /// One transaction: blobs, records, traces, cell index and the log entry. Values are
    /// appended under the next free numbers; only the small hash indexes take random keys.
    fn write_batch(
        &self,
        db: &redb::Database,
        mut packages: Vec<Prepared>,
        writing: &Writing<'_>,
        blobs_added: &mut u64,
    ) -> Result<(u64, Vec<(EpisodeRecord, Episode)>)> {
        let txn = begin_write(db)?;
        let seq;
        {
            let mut tables = Appender::open(&txn)?;
            seq = tables.next_seq()?;
            let Writing { label, packer } = *writing;
            // Every value of the batch was packed with the packer's dictionary or none,
            // and it stays the same from the moment it exists, so storing it now
            // stores it before (in the same commit as) any value that names it.
            let dictionary = packer.dictionary();
            if let Some(dictionary) = &dictionary {
                tables.add_dictionary(dictionary)?;
            }
            // Sorted keys make the index inserts cheaper than random order.
            let mut all_blobs: Vec<(Hash, Vec<u8>)> =
                packages.iter_mut().flat_map(|p| std::mem::take(&mut p.blobs)).collect();
            all_blobs.sort_unstable_by_key(|a| a.0);
            all_blobs.dedup_by(|a, b| a.0 == b.0);
            for (hash, stored) in &all_blobs {
                if !tables.has_blob(hash)? {
                    tables.add_blob(hash, stored)?;
                    *blobs_added += 1;
                }
            }
            drop(all_blobs);
            packages.sort_unstable_by_key(|a| a.id);
            for p in &mut packages {
                p.record.ingest_seq = seq;
                let values = EpisodeValues {
                    record: packer.pack_with(&codec::encode(&p.record), dictionary.as_deref()),
                    traces: std::mem::take(&mut p.traces),
                    files: std::mem::take(&mut p.files),
                };
                tables.add_episode(&p.id, &p.record.manifest, &values)?;
            }
            let batch = IngestBatch {
                seq,
                unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
                label: label.to_string(),
                episodes: packages.iter().map(|p| p.id).collect(),
            };
            tables.log(seq, &codec::encode(&batch))?;
        }
        txn.commit().map_err(Error::redb)?;
        Ok((seq, packages.into_iter().map(|p| (p.record, p.episode)).collect()))
    }
}
