//! Table definitions and the records stored in them. The byte layout of every table
//! is described in `docs/store-format.md`; change both together.

use epistore_package::{Derived, Hash, Manifest, Outcome};
use redb::{ReadTransaction, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::{Error, Result};

/// Format of the store itself (not of packages). Bumped on any incompatible change.
pub const STORE_FORMAT: &str = "epistore-store/2";
/// The format [`crate::Store::migrate`] converts from.
pub const PREVIOUS_FORMAT: &str = "epistore-store/1";

// Layout: every large value lives in an append-only `*_DATA` table under a sequence
// number, so a new value is always written at the right edge of its B-tree and never
// makes redb copy an old page. The only trees keyed by hashes (random order) are the
// small `*_INDEX` tables (32-byte key, 8-byte value), which stay in redb's page cache.
// Format 1 kept the values themselves under hash keys; every insert then rewrote a
// random multi-kilobyte leaf, and ingest slowed down as the store grew.

/// `"format"` -> store format; room for more settings.
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// blake3(file bytes) -> blob number.
pub(crate) const BLOB_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("blob_index");
/// blob number -> codec-tagged file bytes (see `codec::encode_blob`).
pub(crate) const BLOB_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("blob_data");
/// episode id -> episode number (numbers follow ingest order).
pub(crate) const EPISODE_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("episode_index");
/// episode number -> bincode [`EpisodeRecord`]: what the `episodes` table shows.
pub(crate) const EPISODE_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("episode_data");
/// episode number -> episode id (32 bytes) ++ zstd(bincode [`epistore_package::Episode`]):
/// every typed record with its derived state, so queries never re-parse JSON.
pub(crate) const TRACE_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("trace_data");
/// (model, harness level, task, episode id) -> episode number: the cell index. A
/// range scan over one (model, level, task) prefix reads one cell only.
pub(crate) const CELLS: TableDefinition<(&str, &str, &str, [u8; 32]), u64> = TableDefinition::new("cells");
/// superseded episode id -> the id of the episode whose `provenance.supersedes` names
/// it (revision 1.1, a later import of a log that grew). Added after format 2 was
/// fixed: a store written before it gets the (then empty) table on its next writable
/// open, and a reader that does not find it sees no supersession, which is what such a
/// store holds.
pub(crate) const SUPERSEDED: TableDefinition<[u8; 32], [u8; 32]> = TableDefinition::new("superseded");
/// ingest sequence -> bincode [`crate::IngestBatch`]: the append-only ingest log.
pub(crate) const INGEST_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("ingest_log");
/// (kind, number) -> the first 16 bytes of blake3 over a stored value: [`SUM_RECORD`]
/// for an `episode_data` value, [`SUM_TRACES`] for a `trace_data` value, [`SUM_LOG`] for
/// an `ingest_log` value. Every read that decodes one of them checks it, so a damaged
/// byte in a record is an error, never a wrong answer. Added after format 2 was fixed
/// (beside the tables, not inside their values): the first writable open of a store
/// written without it (or by an older build since) fills in what is missing.
pub(crate) const CHECKSUMS: TableDefinition<(u8, u64), [u8; 16]> = TableDefinition::new("checksums");
pub(crate) const SUM_RECORD: u8 = 0;
pub(crate) const SUM_TRACES: u8 = 1;
pub(crate) const SUM_LOG: u8 = 2;

/// The checksum kept for a stored value.
pub(crate) fn checksum(value: &[u8]) -> [u8; 16] {
    blake3::hash(value).as_bytes()[..16].try_into().expect("16 of 32 bytes")
}

/// One file of a stored package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub hash: Hash,
    pub size: u64,
}

/// The summary of one episode: what it is, where it came from, its files, and its
/// derived state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub id: Hash,
    /// The ingest-log entry that added it.
    pub ingest_seq: u64,
    /// Where it was read from (a directory or `archive!dir`).
    pub source: String,
    /// Files in bytewise path order, as the id was computed over them.
    pub files: Vec<FileEntry>,
    pub manifest: Manifest,
    pub outcome: Outcome,
    pub derived: Derived,
    /// Records per trace, in `epistore_package::TRACE_FILES` order; `None`: not recorded.
    pub trace_counts: [Option<u32>; 7],
}

impl EpisodeRecord {
    pub fn package_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }
    pub fn has_file(&self, path: &str) -> bool {
        self.files.iter().any(|f| f.path == path)
    }
}

pub(crate) fn initialise(db: &redb::Database) -> Result<()> {
    let txn = db.begin_write().map_err(Error::redb)?;
    {
        let mut meta = txn.open_table(META).map_err(Error::redb)?;
        let found = meta.get("format").map_err(Error::redb)?.map(|v| v.value().to_string());
        match found {
            None => {
                meta.insert("format", STORE_FORMAT).map_err(Error::redb)?;
            }
            Some(f) if f == STORE_FORMAT => {}
            Some(f) => return Err(Error::Format { found: f, expected: STORE_FORMAT.into() }),
        }
        create_tables(&txn)?;
        fill_checksums(&txn)?;
    }
    txn.commit().map_err(Error::redb)
}

/// Adds the checksums of values appended without one (a store written before the
/// table existed, or by an older build since). Values are appended in number order, so
/// the missing ones are those after the last number that has a checksum.
fn fill_checksums(txn: &redb::WriteTransaction) -> Result<()> {
    let mut sums = txn.open_table(CHECKSUMS).map_err(Error::redb)?;
    for (kind, def) in [(SUM_RECORD, EPISODE_DATA), (SUM_TRACES, TRACE_DATA), (SUM_LOG, INGEST_LOG)] {
        let last = match sums.range((kind, 0)..=(kind, u64::MAX)).map_err(Error::redb)?.next_back() {
            Some(entry) => Some(entry.map_err(Error::redb)?.0.value().1),
            None => None,
        };
        let from = last.map_or(0, |n| n + 1);
        let data = txn.open_table(def).map_err(Error::redb)?;
        for entry in data.range(from..).map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            sums.insert((kind, number.value()), checksum(value.value())).map_err(Error::redb)?;
        }
    }
    Ok(())
}

/// Creates every table, so readers never meet a missing one.
fn create_tables(txn: &redb::WriteTransaction) -> Result<()> {
    txn.open_table(BLOB_INDEX).map_err(Error::redb)?;
    txn.open_table(BLOB_DATA).map_err(Error::redb)?;
    txn.open_table(EPISODE_INDEX).map_err(Error::redb)?;
    txn.open_table(EPISODE_DATA).map_err(Error::redb)?;
    txn.open_table(TRACE_DATA).map_err(Error::redb)?;
    txn.open_table(CELLS).map_err(Error::redb)?;
    txn.open_table(INGEST_LOG).map_err(Error::redb)?;
    txn.open_table(SUPERSEDED).map_err(Error::redb)?;
    txn.open_table(CHECKSUMS).map_err(Error::redb)?;
    Ok(())
}

/// The tables a write transaction appends to, open, with the next free numbers. Ingest
/// and migration both write through it, so a store they write has one layout.
pub(crate) struct Appender<'t> {
    blob_index: redb::Table<'t, [u8; 32], u64>,
    blob_data: redb::Table<'t, u64, &'static [u8]>,
    episode_index: redb::Table<'t, [u8; 32], u64>,
    episode_data: redb::Table<'t, u64, &'static [u8]>,
    trace_data: redb::Table<'t, u64, &'static [u8]>,
    cells: redb::Table<'t, (&'static str, &'static str, &'static str, [u8; 32]), u64>,
    superseded: redb::Table<'t, [u8; 32], [u8; 32]>,
    log: redb::Table<'t, u64, &'static [u8]>,
    sums: redb::Table<'t, (u8, u64), [u8; 16]>,
    next_blob: u64,
    next_episode: u64,
}

/// The number after the last key of an append-only table (0 when it is empty).
fn next_key<V: redb::Value + 'static>(table: &impl ReadableTable<u64, V>) -> Result<u64> {
    Ok(table.last().map_err(Error::redb)?.map(|(k, _)| k.value() + 1).unwrap_or(0))
}

impl<'t> Appender<'t> {
    pub(crate) fn open(txn: &'t redb::WriteTransaction) -> Result<Appender<'t>> {
        let blob_data = txn.open_table(BLOB_DATA).map_err(Error::redb)?;
        let episode_data = txn.open_table(EPISODE_DATA).map_err(Error::redb)?;
        Ok(Appender {
            next_blob: next_key(&blob_data)?,
            next_episode: next_key(&episode_data)?,
            blob_index: txn.open_table(BLOB_INDEX).map_err(Error::redb)?,
            blob_data,
            episode_index: txn.open_table(EPISODE_INDEX).map_err(Error::redb)?,
            episode_data,
            trace_data: txn.open_table(TRACE_DATA).map_err(Error::redb)?,
            cells: txn.open_table(CELLS).map_err(Error::redb)?,
            superseded: txn.open_table(SUPERSEDED).map_err(Error::redb)?,
            log: txn.open_table(INGEST_LOG).map_err(Error::redb)?,
            sums: txn.open_table(CHECKSUMS).map_err(Error::redb)?,
        })
    }

    pub(crate) fn has_blob(&self, hash: &Hash) -> Result<bool> {
        Ok(self.blob_index.get(*hash).map_err(Error::redb)?.is_some())
    }

    pub(crate) fn has_episode(&self, id: &Hash) -> Result<bool> {
        Ok(self.episode_index.get(*id).map_err(Error::redb)?.is_some())
    }

    /// Appends a blob that [`Appender::has_blob`] said is absent (stored blobs are never
    /// rewritten: the same hash is the same bytes).
    pub(crate) fn add_blob(&mut self, hash: &Hash, stored: &[u8]) -> Result<()> {
        self.blob_index.insert(*hash, self.next_blob).map_err(Error::redb)?;
        self.blob_data.insert(self.next_blob, stored).map_err(Error::redb)?;
        self.next_blob += 1;
        Ok(())
    }

    /// Appends an absent episode: its record (bincode [`EpisodeRecord`]), its compressed
    /// traces, its index and cell entries.
    pub(crate) fn add_episode(&mut self, id: &Hash, manifest: &Manifest, record: &[u8], traces: &[u8]) -> Result<()> {
        let n = self.next_episode;
        self.episode_index.insert(*id, n).map_err(Error::redb)?;
        let traces = trace_value(id, traces);
        self.episode_data.insert(n, record).map_err(Error::redb)?;
        self.trace_data.insert(n, traces.as_slice()).map_err(Error::redb)?;
        self.sums.insert((SUM_RECORD, n), checksum(record)).map_err(Error::redb)?;
        self.sums.insert((SUM_TRACES, n), checksum(&traces)).map_err(Error::redb)?;
        let key = (manifest.model.as_str(), manifest.harness_level.as_str(), manifest.task.as_str(), *id);
        self.cells.insert(key, n).map_err(Error::redb)?;
        if let Some(old) = manifest.supersedes().as_deref().and_then(epistore_package::parse_hex) {
            self.superseded.insert(old, *id).map_err(Error::redb)?;
        }
        self.next_episode += 1;
        Ok(())
    }

    /// The sequence number the next ingest-log entry gets: 1, 2, 3, ...
    pub(crate) fn next_seq(&self) -> Result<u64> {
        Ok(next_key(&self.log)?.max(1))
    }

    pub(crate) fn log(&mut self, seq: u64, batch: &[u8]) -> Result<()> {
        self.log.insert(seq, batch).map_err(Error::redb)?;
        self.sums.insert((SUM_LOG, seq), checksum(batch)).map_err(Error::redb)?;
        Ok(())
    }
}

/// The value stored in [`TRACE_DATA`]: the id first, so a scan knows whose traces it
/// reads without a second lookup.
pub(crate) fn trace_value(id: &Hash, compressed: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(32 + compressed.len());
    value.extend_from_slice(id);
    value.extend_from_slice(compressed);
    value
}

/// Splits a [`TRACE_DATA`] value into the id and the compressed traces.
pub(crate) fn split_trace_value(value: &[u8]) -> Result<(Hash, &[u8])> {
    if value.len() < 32 {
        return Err(Error::Corrupt(format!("trace record of {} bytes is shorter than its id", value.len())));
    }
    let (id, rest) = value.split_at(32);
    Ok((id.try_into().expect("32 bytes"), rest))
}

pub(crate) fn check_format(txn: &ReadTransaction) -> Result<()> {
    let meta = txn.open_table(META).map_err(Error::redb)?;
    let found = meta.get("format").map_err(Error::redb)?.map(|v| v.value().to_string()).unwrap_or_default();
    if found != STORE_FORMAT {
        return Err(Error::Format { found, expected: STORE_FORMAT.into() });
    }
    Ok(())
}

pub(crate) fn decode_record(bytes: &[u8]) -> Result<EpisodeRecord> {
    codec::decode(bytes)
}
