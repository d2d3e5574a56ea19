//! Moving a store from format 1 to the current format: a copy into a new file, never an
//! edit of the old one.
//!
//! The copy is built beside the store under a temporary name. Only when it is complete
//! and durable is the old file given a second name (a hard link, so no byte is copied)
//! and the new file renamed over `epistore.redb`. A crash at any point leaves
//! `epistore.redb` holding either the old store or the complete new one. The old file
//! stays beside it until the user deletes it.
//!
//! Every stored byte is copied as it is: blobs, episode records, trace records and
//! ingest-log entries have the same encoding in both formats; only the tables they
//! live in changed. Episodes get their numbers in ingest-log order, as an ingest of the
//! same batches into a new store would give them.

use std::path::{Path, PathBuf};

use epistore_package::{hex, Hash};
use redb::{Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use crate::codec;
use crate::error::{Error, Result};
use crate::read::IngestBatch;
use crate::tables::{self, decode_record, Appender, INGEST_LOG, META, PREVIOUS_FORMAT, STORE_FORMAT};
use crate::{builder, Store, DB_FILE};

/// The format-1 tables that the current format replaced. `meta`, `cells` and
/// `ingest_log` kept their names and types.
mod format1 {
    use redb::TableDefinition;
    /// blake3(file bytes) -> codec-tagged file bytes.
    pub const BLOBS: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("blobs");
    /// episode id -> bincode `EpisodeRecord`.
    pub const EPISODES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("episodes");
    /// episode id -> zstd(bincode `Episode`).
    pub const TRACES: TableDefinition<[u8; 32], &[u8]> = TableDefinition::new("traces");
}

/// Where the old file is kept after a migration, beside the store.
pub const FORMAT1_FILE: &str = "epistore.redb.format1";
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
    /// Copies the store in `dir` from format 1 into the current format (see the module
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
        if found != PREVIOUS_FORMAT {
            return Err(Error::Format { found, expected: format!("{STORE_FORMAT} (and migrates {PREVIOUS_FORMAT})") });
        }
        let kept = dir.join(FORMAT1_FILE);
        if same_file(&kept, &file) {
            // An earlier migration died between giving the old file its second name and
            // the rename: the "kept" file is this very store, so dropping the name loses
            // nothing, and the migration starts over.
            std::fs::remove_file(&kept).map_err(|e| io(&kept, e))?;
        }
        if kept.exists() {
            return Err(Error::Storage(format!(
                "{} already exists (a format-1 file from an earlier migration?): move it away first",
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
            let counts = copy(&read, &new, &mut progress)?;
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

/// Copies everything from the format-1 snapshot `old` into the empty current-format
/// database `new`, batch by batch of the ingest log, and checks that nothing was left.
fn copy(
    old: &redb::ReadTransaction,
    new: &redb::Database,
    progress: &mut dyn FnMut(MigrateProgress),
) -> Result<Counts> {
    let old_blobs = old.open_table(format1::BLOBS).map_err(Error::redb)?;
    let old_episodes = old.open_table(format1::EPISODES).map_err(Error::redb)?;
    let old_traces = old.open_table(format1::TRACES).map_err(Error::redb)?;
    let old_log = old.open_table(INGEST_LOG).map_err(Error::redb)?;
    let old_meta = old.open_table(META).map_err(Error::redb)?;
    let total = old_episodes.len().map_err(Error::redb)?;
    let mut counts = Counts { episodes: 0, blobs: 0, batches: 0 };

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
    let missing = |what: &str, id: &Hash| Error::Corrupt(format!("the format-1 store lacks the {what} of {}", hex(id)));
    for entry in old_log.iter().map_err(Error::redb)? {
        let (seq, logged) = entry.map_err(Error::redb)?;
        let batch: IngestBatch = codec::decode(logged.value())?;
        {
            let mut tables = Appender::open(&txn)?;
            let mut records = Vec::with_capacity(batch.episodes.len());
            for id in &batch.episodes {
                // An id that an earlier entry already added (two ingests of the same
                // package racing in one process could log it twice) is stored once.
                if tables.has_episode(id)? || records.iter().any(|(r, _, _)| r == id) {
                    continue;
                }
                let bytes = old_episodes.get(*id).map_err(Error::redb)?.ok_or_else(|| missing("record", id))?;
                records.push((*id, bytes.value().to_vec(), decode_record(bytes.value())?));
            }
            // New blobs in hash order, as an ingest of this batch writes them.
            let mut new_blobs: Vec<Hash> =
                records.iter().flat_map(|(_, _, r)| r.files.iter().map(|f| f.hash)).collect();
            new_blobs.sort_unstable();
            new_blobs.dedup();
            for hash in new_blobs {
                if tables.has_blob(&hash)? {
                    continue;
                }
                let bytes = old_blobs.get(hash).map_err(Error::redb)?.ok_or_else(|| missing("blob", &hash))?;
                tables.add_blob(&hash, bytes.value())?;
                pending_bytes += bytes.value().len() as u64;
                counts.blobs += 1;
            }
            for (id, record_bytes, record) in &records {
                let traces = old_traces.get(*id).map_err(Error::redb)?.ok_or_else(|| missing("trace record", id))?;
                tables.add_episode(id, &record.manifest, record_bytes, traces.value())?;
                pending_bytes += (record_bytes.len() + traces.value().len()) as u64;
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

    // Format 1 wrote a blob only with the episode that named it, so every blob has been
    // copied by now. Should an old store hold one anyway, it is copied too: a migration
    // never drops a stored byte.
    if counts.blobs != old_blobs.len().map_err(Error::redb)? {
        let mut tables = Appender::open(&txn)?;
        for entry in old_blobs.iter().map_err(Error::redb)? {
            let (hash, bytes) = entry.map_err(Error::redb)?;
            if !tables.has_blob(&hash.value())? {
                tables.add_blob(&hash.value(), bytes.value())?;
                counts.blobs += 1;
            }
        }
    }
    if counts.episodes != total || old_traces.len().map_err(Error::redb)? != total {
        // An episode outside the ingest log (or a trace record without its episode)
        // cannot be placed in the new format; the old store needs `verify` first.
        return Err(Error::Corrupt(format!(
            "the format-1 store holds {total} episodes (and {} trace records) but its ingest log names {}: run `epistore verify` with the build that wrote it",
            old_traces.len().map_err(Error::redb)?,
            counts.episodes
        )));
    }
    txn.set_durability(Durability::Immediate).map_err(Error::redb)?;
    txn.commit().map_err(Error::redb)?;
    Ok(counts)
}
