//! Moving a store from format 1, 2 or 3 to the current format: a copy into a new file,
//! never an edit of the old one.
//!
//! The copy is built beside the store under a temporary name. Only when it is complete
//! and durable is the old file given a second name (a hard link, so no byte is copied)
//! and the new file renamed over `epistore.redb`. A crash at any point leaves
//! `epistore.redb` holding either the old store or the complete new one. The old file
//! stays beside it (`epistore.redb.format1` or `.format2`) until the user deletes it.
//!
//! What was ingested is copied byte for byte: every file of every episode (a shared
//! file as its stored blob, an episode's own files into its file record), and the
//! ingest log. Records and traces are derived again from the files by this build's
//! parser (only the head of an old record, its id, files and ingest entry, is read),
//! and packed again with a dictionary trained on the first episodes copied. Episodes get their numbers in
//! ingest-log order, as an ingest of the same batches into a new store would give them.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use epistore_package::{hex, parse_package, Hash, RawPackage};
use redb::{Durability, ReadOnlyTable, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use crate::codec;
use crate::error::{Error, Result};
use crate::ingest::record_of;
use crate::ingest::DEFAULT_DICTIONARY_SAMPLES;
use crate::pack::Packer;
use crate::pack::{Decoder, Dictionaries};
use crate::read::split_files;
use crate::read::IngestBatch;
use crate::tables::{
    self, shared_file, Appender, EpisodeValues, FileEntry, BLOB_DATA, BLOB_INDEX, DICTIONARIES, EPISODE_DATA,
    EPISODE_INDEX, FILE_DATA, INGEST_LOG, META, PREVIOUS_FORMATS, STORE_FORMAT, TRACE_DATA,
};
use crate::{builder, Store, DB_FILE};

/// The format-1 tables that format 2 replaced. `meta`, `cells` and `ingest_log` kept
/// their names and types.
mod format1 {
    use redb::TableDefinition;
    /// blake3(file bytes) -> codec-tagged file bytes.
    pub const BLOBS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blobs");
    /// episode id -> bincode `EpisodeRecord`.
    pub const EPISODES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("episodes");
    /// episode id -> zstd(bincode `Episode`).
    pub const TRACES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("traces");
}

/// The name the old file is kept under: `epistore.redb.format1`, `.format2`.
pub fn kept_file_name(format: &str) -> String {
    format!("{DB_FILE}.format{}", format.rsplit('/').next().unwrap_or(format))
}
/// The copy being built.
const MIGRATING_FILE: &str = "epistore.redb.migrating";
/// Values copied per write transaction of the new file. Only the last commit needs to
/// be durable: until the rename, the new file is nobody's store.
const COMMIT_BYTES: u64 = 256 << 20;

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// The format found (`STORE_FORMAT` when there was nothing to do).
    pub from: String,
    pub episodes: u64,
    pub blobs: u64,
    pub batches: u64,
    /// The old file, kept: `None` when the store was already current.
    pub kept: Option<PathBuf>,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

#[derive(Debug, Clone, Copy)]
pub struct MigrateProgress {
    pub episodes_done: u64,
    pub episodes_total: u64,
}

impl Store {
    /// Copies the store in `dir` from format 1 or 2 into the current format (see the module
    /// comment for why a crash loses nothing). A current store is left alone. Needs
    /// that no other process writes to the store meanwhile (it holds the writer lock).
    pub fn migrate(dir: impl AsRef<Path>, mut progress: impl FnMut(MigrateProgress)) -> Result<MigrateReport> {
        let dir = dir.as_ref();
        let file = dir.join(DB_FILE);
        if !file.is_file() {
            return Err(Error::NoStore(dir.to_path_buf()));
        }
        let io = |path: &Path, e| Error::Io { path: path.to_path_buf(), source: e };
        let size = |path: &Path| std::fs::metadata(path).map(|m| m.len()).map_err(|e| io(path, e));
        let bytes_before = size(&file)?;
        // Opening for writing takes the writer lock (and rolls back a crashed write).
        let old = builder().open(&file).map_err(|e| Error::open(dir, e))?;
        let read = old.begin_read().map_err(Error::redb)?;
        let found = {
            let meta = read.open_table(META).map_err(Error::redb)?;
            meta.get("format").map_err(Error::redb)?.map(|v| v.value().to_string()).unwrap_or_default()
        };
        if found == STORE_FORMAT {
            let snapshot = crate::Snapshot::new(read);
            // Sequence numbers run 1..=last without gaps: the last one is the count,
            // without decoding the whole log.
            let (episodes, batches, blobs) =
                (snapshot.episode_count()?, snapshot.ingest_seq()?, snapshot.blob_count()?);
            return Ok(MigrateReport {
                from: found,
                episodes,
                blobs,
                batches,
                kept: None,
                bytes_before,
                bytes_after: bytes_before,
            });
        }
        if !PREVIOUS_FORMATS.contains(&found.as_str()) {
            return Err(Error::Format {
                found,
                expected: format!("{STORE_FORMAT} (and migrates {})", PREVIOUS_FORMATS.join(", ")),
            });
        }
        let kept = dir.join(kept_file_name(&found));
        if same_file(&kept, &file) {
            // An earlier migration died between giving the old file its second name and
            // the rename: the "kept" file is this very store, so dropping the name loses
            // nothing, and the migration starts over.
            std::fs::remove_file(&kept).map_err(|e| io(&kept, e))?;
        }
        if kept.exists() {
            return Err(Error::Storage(format!(
                "{} already exists (an old file from an earlier migration?): move it away first",
                kept.display()
            )));
        }

        let fresh = dir.join(MIGRATING_FILE);
        match std::fs::remove_file(&fresh) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&fresh, e)),
            _ => {}
        }
        // The copy is private until the rename: one process, so non-durable commits are
        // allowed (redb refuses them on a file shared with readers).
        let built = redb::Database::builder().create(&fresh).map_err(|e| Error::open(dir, e)).and_then(|new| {
            tables::initialise(&new)?;
            let old = OldStore::open(&read, &found)?;
            let counts = copy(&old, &read, &new, &mut progress)?;
            // A close that fails would leave the copy needing repair: not good enough to
            // rename into place.
            new.close().map_err(|e| Error::open(dir, e))?;
            std::fs::File::open(&fresh).and_then(|f| f.sync_all()).map_err(|e| io(&fresh, e))?;
            Ok(counts)
        });
        let counts = match built {
            Ok(counts) => counts,
            Err(e) => {
                let _ = std::fs::remove_file(&fresh);
                return Err(e);
            }
        };

        // The old file gets its second name before the new one takes the first, so
        // `epistore.redb` always names a whole store. The writer lock on the old file
        // is held throughout, so no ingest can slip in between.
        let sync_dir = || std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, e));
        let swapped = std::fs::hard_link(&file, &kept).map_err(|e| io(&kept, e)).and_then(|()| {
            // The second name is durable before the first changes hands, so even a
            // file system that reorders directory updates keeps the old store.
            sync_dir()?;
            std::fs::rename(&fresh, &file).map_err(|e| io(&file, e))
        });
        if let Err(e) = swapped {
            // `epistore.redb` is still the old store: undo the rest.
            if same_file(&kept, &file) {
                let _ = std::fs::remove_file(&kept);
            }
            let _ = std::fs::remove_file(&fresh);
            return Err(e);
        }
        sync_dir()?;
        drop(read);
        drop(old);
        Ok(MigrateReport {
            from: found,
            episodes: counts.episodes,
            blobs: counts.blobs,
            batches: counts.batches,
            kept: Some(kept),
            bytes_before,
            bytes_after: size(&file)?,
        })
    }
}

/// Whether two paths name the same file (the same inode), as a hard link makes them.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

struct Counts {
    episodes: u64,
    blobs: u64,
    batches: u64,
}

/// The head every format's episode record starts with, in the same bincode layout:
/// what the record is and which files it has. The rest of an old record (the typed
/// manifest, outcome and derived state) was bincode of the package crate's structs of
/// its day; a migration does not read it but derives record and traces again from the
/// stored files (docs/store-format.md, "Migration"), so a change of the package model
/// never needs the old structs kept.
#[derive(serde::Deserialize)]
struct RecordHead {
    id: Hash,
    ingest_seq: u64,
    source: String,
    files: Vec<FileEntry>,
}

/// The values of a store of an earlier format, as the copy needs them. (One per
/// migration: the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
enum OldStore {
    Format1 {
        blobs: ReadOnlyTable<[u8; 32], &'static [u8]>,
        episodes: ReadOnlyTable<[u8; 32], &'static [u8]>,
        traces: ReadOnlyTable<[u8; 32], &'static [u8]>,
    },
    /// Format 2 has format 3's tables but for `file_data` and `dictionaries`; its
    /// records are plain bincode, its traces zstd without a dictionary. Format 3 keeps
    /// an episode's own files in `file_data` and packs values with dictionaries.
    Indexed {
        blob_index: ReadOnlyTable<[u8; 32], u64>,
        blob_data: ReadOnlyTable<u64, &'static [u8]>,
        episode_index: ReadOnlyTable<[u8; 32], u64>,
        episode_data: ReadOnlyTable<u64, &'static [u8]>,
        trace_data: ReadOnlyTable<u64, &'static [u8]>,
        /// Format 3: the own-files table and the dictionaries values name.
        file_data: Option<(ReadOnlyTable<u64, &'static [u8]>, Decoder)>,
    },
}

impl OldStore {
    fn open(txn: &redb::ReadTransaction, format: &str) -> Result<OldStore> {
        Ok(if format == PREVIOUS_FORMATS[0] {
            OldStore::Format1 {
                blobs: txn.open_table(format1::BLOBS).map_err(Error::redb)?,
                episodes: txn.open_table(format1::EPISODES).map_err(Error::redb)?,
                traces: txn.open_table(format1::TRACES).map_err(Error::redb)?,
            }
        } else {
            let file_data = if format == PREVIOUS_FORMATS[2] {
                let mut dictionaries = Dictionaries::default();
                for entry in txn.open_table(DICTIONARIES).map_err(Error::redb)?.iter().map_err(Error::redb)? {
                    let (number, raw) = entry.map_err(Error::redb)?;
                    dictionaries.insert(number.value(), raw.value());
                }
                let decoder = Decoder(std::sync::Arc::new(dictionaries));
                Some((txn.open_table(FILE_DATA).map_err(Error::redb)?, decoder))
            } else {
                None
            };
            OldStore::Indexed {
                blob_index: txn.open_table(BLOB_INDEX).map_err(Error::redb)?,
                blob_data: txn.open_table(BLOB_DATA).map_err(Error::redb)?,
                episode_index: txn.open_table(EPISODE_INDEX).map_err(Error::redb)?,
                episode_data: txn.open_table(EPISODE_DATA).map_err(Error::redb)?,
                trace_data: txn.open_table(TRACE_DATA).map_err(Error::redb)?,
                file_data,
            }
        })
    }

    fn missing(what: &str, id: &Hash) -> Error {
        Error::Corrupt(format!("the old store lacks the {what} of {}", hex(id)))
    }

    /// An episode's number in the data tables (formats 2 and 3).
    fn number(index: &ReadOnlyTable<[u8; 32], u64>, id: &Hash) -> Result<u64> {
        index.get(*id).map_err(Error::redb)?.map(|n| n.value()).ok_or_else(|| OldStore::missing("record", id))
    }

    /// The head of an episode's record.
    fn head(&self, id: &Hash) -> Result<RecordHead> {
        let plain = match self {
            OldStore::Format1 { episodes, .. } => episodes
                .get(*id)
                .map_err(Error::redb)?
                .map(|v| v.value().to_vec())
                .ok_or_else(|| Self::missing("record", id))?,
            OldStore::Indexed { episode_index, episode_data, file_data, .. } => {
                let n = Self::number(episode_index, id)?;
                let stored = episode_data.get(n).map_err(Error::redb)?.ok_or_else(|| Self::missing("record", id))?;
                match file_data {
                    Some((_, decoder)) => decoder.plain(stored.value())?,
                    None => stored.value().to_vec(),
                }
            }
        };
        let head: RecordHead = codec::decode_head(&plain)?;
        if head.id != *id {
            return Err(Error::Corrupt(format!(
                "the old store keeps the record of {} under {}",
                hex(&head.id),
                hex(id)
            )));
        }
        Ok(head)
    }

    /// The package of an episode, every file checked against its hash.
    fn package(&self, head: &RecordHead) -> Result<RawPackage> {
        let shared = |f: &FileEntry| -> Result<Vec<u8>> {
            let stored = self.blob(&f.hash)?.ok_or_else(|| Self::missing("blob", &f.hash))?;
            codec::decode_blob(&stored)
        };
        let bytes = match self {
            OldStore::Indexed { episode_index, file_data: Some((file_data, decoder)), .. } => {
                let own = if head.files.iter().all(|f| shared_file(&f.path, f.size)) {
                    Vec::new()
                } else {
                    let n = Self::number(episode_index, &head.id)?;
                    let stored =
                        file_data.get(n).map_err(Error::redb)?.ok_or_else(|| Self::missing("files", &head.id))?;
                    decoder.plain(stored.value())?
                };
                split_files(&head.files, &own, shared)?
            }
            // Formats 1 and 2 keep every file as a blob (the id check below covers
            // their bytes).
            _ => head.files.iter().map(shared).collect::<Result<Vec<_>>>()?,
        };
        let files: BTreeMap<String, Vec<u8>> = head.files.iter().map(|f| f.path.clone()).zip(bytes).collect();
        let raw = RawPackage::new(head.source.clone(), files);
        if raw.id != head.id {
            return Err(Error::Corrupt(format!("the files of episode {} do not hash to its id", hex(&head.id))));
        }
        Ok(raw)
    }

    /// A file's stored blob (codec-tagged), if the store holds it.
    fn blob(&self, hash: &Hash) -> Result<Option<Vec<u8>>> {
        Ok(match self {
            OldStore::Format1 { blobs, .. } => blobs.get(*hash).map_err(Error::redb)?.map(|v| v.value().to_vec()),
            OldStore::Indexed { blob_index, blob_data, .. } => match blob_index.get(*hash).map_err(Error::redb)? {
                Some(n) => blob_data.get(n.value()).map_err(Error::redb)?.map(|v| v.value().to_vec()),
                None => None,
            },
        })
    }

    /// Visits every stored blob, for the ones no episode names.
    fn for_each_blob(&self, mut f: impl FnMut(Hash, &[u8]) -> Result<()>) -> Result<()> {
        match self {
            OldStore::Format1 { blobs, .. } => {
                for entry in blobs.iter().map_err(Error::redb)? {
                    let (hash, bytes) = entry.map_err(Error::redb)?;
                    f(hash.value(), bytes.value())?;
                }
            }
            OldStore::Indexed { blob_index, .. } => {
                for entry in blob_index.iter().map_err(Error::redb)? {
                    let (hash, _) = entry.map_err(Error::redb)?;
                    let bytes = self.blob(&hash.value())?.ok_or_else(|| OldStore::missing("blob", &hash.value()))?;
                    f(hash.value(), &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// (episodes, trace records) stored.
    fn counts(&self) -> Result<(u64, u64)> {
        Ok(match self {
            OldStore::Format1 { episodes, traces, .. } => {
                (episodes.len().map_err(Error::redb)?, traces.len().map_err(Error::redb)?)
            }
            OldStore::Indexed { episode_data, trace_data, .. } => {
                (episode_data.len().map_err(Error::redb)?, trace_data.len().map_err(Error::redb)?)
            }
        })
    }
}

/// Copies everything from the old snapshot into the empty current-format database
/// `new`, batch by batch of the ingest log, and checks that nothing was left.
fn copy(
    old: &OldStore,
    read: &redb::ReadTransaction,
    new: &redb::Database,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<Counts> {
    let old_log = read.open_table(INGEST_LOG).map_err(Error::redb)?;
    let old_meta = read.open_table(META).map_err(Error::redb)?;
    let (total, traced) = old.counts()?;
    let mut counts = Counts { episodes: 0, blobs: 0, batches: 0 };
    let packer = Packer::new(None, 0, DEFAULT_DICTIONARY_SAMPLES);
    // Every file hash an episode names: a stored blob outside this set (which no
    // episode names) is copied as it is at the end.
    let mut named: HashSet<Hash> = HashSet::new();

    let mut txn = new.begin_write().map_err(Error::redb)?;
    txn.set_durability(Durability::None).map_err(Error::redb)?;
    let mut pending_bytes = 0u64;
    // Settings other than the format itself carry over.
    {
        let mut meta = txn.open_table(META).map_err(Error::redb)?;
        for entry in old_meta.iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            if key.value() != "format" {
                meta.insert(key.value(), value.value()).map_err(Error::redb)?;
            }
        }
    }
    for entry in old_log.iter().map_err(Error::redb)? {
        let (seq, logged) = entry.map_err(Error::redb)?;
        let batch: IngestBatch = codec::decode(logged.value())?;
        {
            let mut tables = Appender::open(&txn)?;
            let mut heads: Vec<RecordHead> = Vec::with_capacity(batch.episodes.len());
            for id in &batch.episodes {
                // An id that an earlier entry already added (two ingests of the same
                // package racing in one process could log it twice) is stored once.
                if tables.has_episode(id)? || heads.iter().any(|h| h.id == *id) {
                    continue;
                }
                heads.push(old.head(id)?);
            }
            // New shared blobs in hash order, as an ingest of this batch writes them.
            let mut new_blobs: Vec<Hash> = heads
                .iter()
                .flat_map(|h| h.files.iter().filter(|f| shared_file(&f.path, f.size)).map(|f| f.hash))
                .collect();
            new_blobs.sort_unstable();
            new_blobs.dedup();
            for hash in new_blobs {
                if tables.has_blob(&hash)? {
                    continue;
                }
                let bytes = old.blob(&hash)?.ok_or_else(|| OldStore::missing("blob", &hash))?;
                tables.add_blob(&hash, &bytes)?;
                pending_bytes += bytes.len() as u64;
                counts.blobs += 1;
            }
            for head in &heads {
                let raw = old.package(head)?;
                // The typed record and traces are derived again by this build's parser
                // (an older build accepted the package, and revisions only add).
                let episode = parse_package(&raw)
                    .map_err(|p| Error::Corrupt(format!("episode {} no longer validates: {p}", hex(&head.id))))?;
                // `record_of` takes the source from the package's name, the old source.
                let mut record = record_of(&raw, &episode);
                record.ingest_seq = head.ingest_seq;
                let mut own = Vec::new();
                for file in &raw.files {
                    named.insert(file.hash);
                    if !shared_file(&file.path, file.bytes.len() as u64) {
                        own.extend_from_slice(&file.bytes);
                    }
                }
                let values = EpisodeValues {
                    record: packer.pack(&codec::encode(&record)),
                    traces: packer.pack(&codec::encode(&episode)),
                    files: packer.pack(&own),
                };
                if let Some(dictionary) = packer.dictionary() {
                    tables.add_dictionary(&dictionary)?;
                }
                tables.add_episode(&head.id, &record.manifest, &values)?;
                pending_bytes += (values.record.len() + values.traces.len() + values.files.len()) as u64;
                counts.episodes += 1;
            }
            tables.log(seq.value(), logged.value())?;
            counts.batches += 1;
        }
        if pending_bytes >= COMMIT_BYTES {
            txn.commit().map_err(Error::redb)?;
            txn = new.begin_write().map_err(Error::redb)?;
            txn.set_durability(Durability::None).map_err(Error::redb)?;
            pending_bytes = 0;
        }
        progress(MigrateProgress { episodes_done: counts.episodes, episodes_total: total });
    }

    // An old store should hold no blob that no episode names; should it hold one
    // anyway, it is copied too: a migration never drops a stored byte.
    {
        let mut tables = Appender::open(&txn)?;
        old.for_each_blob(|hash, bytes| {
            if !named.contains(&hash) && !tables.has_blob(&hash)? {
                tables.add_blob(&hash, bytes)?;
                counts.blobs += 1;
            }
            Ok(())
        })?;
    }
    if counts.episodes != total || traced != total {
        // An episode outside the ingest log (or a trace record without its episode)
        // cannot be placed in the new format; the old store needs `verify` first.
        return Err(Error::Corrupt(format!(
            "the old store holds {total} episodes (and {traced} trace records) but its ingest log names {}: run `epistore verify` with the build that wrote it",
            counts.episodes
        )));
    }
    txn.set_durability(Durability::Immediate).map_err(Error::redb)?;
    txn.set_quick_repair(true);
    txn.commit().map_err(Error::redb)?;
    Ok(counts)
}
