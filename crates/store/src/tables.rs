//! Table definitions and the records stored in them. The byte layout of every table
//! is described in `docs/store-format.md`; change both together.

use epistore_package::{Derived, Hash, Manifest, Outcome};
use redb::{ReadTransaction, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Format of the store itself (not of packages). Bumped on any incompatible change.
pub const STORE_FORMAT: &str = "epistore-store/4";
/// The formats [`crate::Store::migrate`] converts from, oldest first.
pub const PREVIOUS_FORMATS: [&str; 3] = ["epistore-store/1", "epistore-store/2", "epistore-store/3"];

// Layout: every large value lives in an append-only `*_DATA` table under a sequence
// number, so a new value is always written at the right edge of its B-tree and never
// makes redb copy an old page. The only trees keyed by hashes (random order) are the
// small `*_INDEX` tables (32-byte key, 8-byte value), which stay in redb's page cache.
// Format 1 kept the values themselves under hash keys; every insert then rewrote a
// random multi-kilobyte leaf, and ingest slowed down as the store grew.
//
// Format 3 keeps the files only one episode has (manifest, outcome, traces, reports,
// small artifacts) in that episode's own `file_data` value, compressed together with
// the store's dictionary: most files of a population are of this kind, and as blobs
// each cost an index entry at a random key, a zstd frame of its own and B-tree space.
// Only files that can be shared ([`shared_file`]) go through the blob index.

/// `"format"` -> store format; room for more settings.
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// blake3(file bytes) -> blob number, for the files [`shared_file`] names.
pub(crate) const BLOB_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("blob_index");
/// blob number -> codec-tagged file bytes (see `codec::encode_blob`).
pub(crate) const BLOB_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("blob_data");
/// episode id -> episode number (numbers follow ingest order).
pub(crate) const EPISODE_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("episode_index");
/// episode number -> packed bincode [`EpisodeRecord`]: what the `episodes` table shows.
/// "Packed": a codec tag, then the bytes raw or zstd-compressed, with or without a
/// dictionary (`codec::encode_with_dictionary`).
pub(crate) const EPISODE_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("episode_data");
/// episode number -> episode id (32 bytes) ++ packed bincode [`epistore_package::Episode`]:
/// every typed record with its derived state, so queries never re-parse JSON.
pub(crate) const TRACE_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("trace_data");
/// episode number -> packed concatenation of the episode's own files (those that are
/// not [`shared_file`]s), in listing order; the record's sizes split it.
pub(crate) const FILE_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("file_data");
/// dictionary number -> a zstd dictionary (see `pack`), never changed once written.
pub(crate) const DICTIONARIES: TableDefinition<u32, &[u8]> = TableDefinition::new("dictionaries");
/// A second copy of every dictionary, checked against the same checksum: every value
/// packed with a dictionary needs it, so one damaged page of it would make every such
/// episode unreadable. A store written before this table gets it on its first write
/// (copies of the dictionaries that pass their checksums).
pub(crate) const DICTIONARY_COPIES: TableDefinition<u32, &[u8]> = TableDefinition::new("dictionary_copies");
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
pub(crate) const SUM_FILES: u8 = 3;
pub(crate) const SUM_DICTIONARY: u8 = 4;
pub(crate) const SUM_ANNOTATION: u8 = 5;
/// annotation id (blake3 of the record's bytes) -> annotation number.
pub(crate) const ANNOTATION_INDEX: TableDefinition<[u8; 32], u64> = TableDefinition::new("annotation_index");
/// annotation number -> the annotation record as canonical JSON (`crate::Annotation`).
/// Added to format 4 without a bump, like `superseded`: absent reads as none.
pub(crate) const ANNOTATION_DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("annotation_data");

/// Files at least this large go through the blob index wherever they are: a large
/// file is worth its index entry, and it keeps an episode's own value small.
pub const SHARED_MIN_ANYWHERE: u64 = 256 << 10;
/// Artifacts at least this large go through the blob index: repository snapshots, tool
/// logs and task descriptions are what packages share.
pub const SHARED_MIN_ARTIFACT: u64 = 1 << 10;

/// Whether a file is stored once for every episode that has it (through the blob index)
/// rather than inside its episode's own value. Part of the format: a reader finds a
/// file's bytes by this rule.
pub fn shared_file(path: &str, size: u64) -> bool {
    size >= SHARED_MIN_ANYWHERE || (path.starts_with("artifacts/") && size >= SHARED_MIN_ARTIFACT)
}

/// A write transaction that saves redb's allocator state with its commit ("quick
/// repair"), so that opening the file after a crash reads that state back instead of
/// walking every page of the file (seconds to minutes on a large store).
pub(crate) fn begin_write(db: &redb::Database) -> Result<redb::WriteTransaction> {
    let mut txn = db.begin_write().map_err(Error::redb)?;
    txn.set_quick_repair(true);
    Ok(txn)
}

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
    pub trace_counts: [Option<u32>; epistore_package::TRACE_FILES.len()],
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
    let txn = begin_write(db)?;
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
        fill_dictionary_copies(&txn)?;
    }
    txn.commit().map_err(Error::redb)
}

/// Copies every dictionary that has no second copy and passes its checksum (a store
/// written before the copies existed).
fn fill_dictionary_copies(txn: &redb::WriteTransaction) -> Result<()> {
    let primary = txn.open_table(DICTIONARIES).map_err(Error::redb)?;
    let mut copies = txn.open_table(DICTIONARY_COPIES).map_err(Error::redb)?;
    let sums = txn.open_table(CHECKSUMS).map_err(Error::redb)?;
    for entry in primary.iter().map_err(Error::redb)? {
        let (number, raw) = entry.map_err(Error::redb)?;
        let number = number.value();
        if copies.get(number).map_err(Error::redb)?.is_some() {
            continue;
        }
        let sum = sums.get((SUM_DICTIONARY, u64::from(number))).map_err(Error::redb)?.map(|s| s.value());
        if sum == Some(checksum(raw.value())) {
            copies.insert(number, raw.value()).map_err(Error::redb)?;
        }
    }
    Ok(())
}

/// Adds the checksums of values appended without one (a store written before the
/// table existed, or by an older build since). Values are appended in number order, so
/// the missing ones are those after the last number that has a checksum.
fn fill_checksums(txn: &redb::WriteTransaction) -> Result<()> {
    let mut sums = txn.open_table(CHECKSUMS).map_err(Error::redb)?;
    for (kind, def) in
        [(SUM_RECORD, EPISODE_DATA), (SUM_TRACES, TRACE_DATA), (SUM_LOG, INGEST_LOG), (SUM_FILES, FILE_DATA)]
    {
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
    txn.open_table(FILE_DATA).map_err(Error::redb)?;
    txn.open_table(DICTIONARIES).map_err(Error::redb)?;
    txn.open_table(DICTIONARY_COPIES).map_err(Error::redb)?;
    txn.open_table(CELLS).map_err(Error::redb)?;
    txn.open_table(INGEST_LOG).map_err(Error::redb)?;
    txn.open_table(SUPERSEDED).map_err(Error::redb)?;
    txn.open_table(CHECKSUMS).map_err(Error::redb)?;
    txn.open_table(ANNOTATION_INDEX).map_err(Error::redb)?;
    txn.open_table(ANNOTATION_DATA).map_err(Error::redb)?;
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
    file_data: redb::Table<'t, u64, &'static [u8]>,
    dictionaries: redb::Table<'t, u32, &'static [u8]>,
    dictionary_copies: redb::Table<'t, u32, &'static [u8]>,
    cells: redb::Table<'t, (&'static str, &'static str, &'static str, [u8; 32]), u64>,
    superseded: redb::Table<'t, [u8; 32], [u8; 32]>,
    log: redb::Table<'t, u64, &'static [u8]>,
    sums: redb::Table<'t, (u8, u64), [u8; 16]>,
    next_blob: u64,
    next_episode: u64,
}

/// The number after the last key of an append-only table (0 when it is empty).
pub(crate) fn next_key<V: redb::Value + 'static>(table: &impl ReadableTable<u64, V>) -> Result<u64> {
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
            file_data: txn.open_table(FILE_DATA).map_err(Error::redb)?,
            dictionaries: txn.open_table(DICTIONARIES).map_err(Error::redb)?,
            dictionary_copies: txn.open_table(DICTIONARY_COPIES).map_err(Error::redb)?,
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

    /// Stores a dictionary that a value about to be appended names, unless it is stored.
    pub(crate) fn add_dictionary(&mut self, dictionary: &crate::pack::Dictionary) -> Result<()> {
        if self.dictionaries.get(dictionary.number).map_err(Error::redb)?.is_none() {
            self.dictionaries.insert(dictionary.number, dictionary.raw.as_slice()).map_err(Error::redb)?;
            self.dictionary_copies.insert(dictionary.number, dictionary.raw.as_slice()).map_err(Error::redb)?;
            self.sums
                .insert((SUM_DICTIONARY, u64::from(dictionary.number)), checksum(&dictionary.raw))
                .map_err(Error::redb)?;
        }
        Ok(())
    }

    /// Appends an absent episode: its packed record (bincode [`EpisodeRecord`]), packed
    /// traces and packed own files, its index and cell entries.
    pub(crate) fn add_episode(&mut self, id: &Hash, manifest: &Manifest, values: &EpisodeValues) -> Result<()> {
        let n = self.next_episode;
        self.episode_index.insert(*id, n).map_err(Error::redb)?;
        let traces = trace_value(id, &values.traces);
        let (record, files) = (values.record.as_slice(), values.files.as_slice());
        self.episode_data.insert(n, record).map_err(Error::redb)?;
        self.trace_data.insert(n, traces.as_slice()).map_err(Error::redb)?;
        self.file_data.insert(n, files).map_err(Error::redb)?;
        self.sums.insert((SUM_RECORD, n), checksum(record)).map_err(Error::redb)?;
        self.sums.insert((SUM_TRACES, n), checksum(&traces)).map_err(Error::redb)?;
        self.sums.insert((SUM_FILES, n), checksum(files)).map_err(Error::redb)?;
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

/// The three packed values of an episode, as [`Appender::add_episode`] stores them.
pub(crate) struct EpisodeValues {
    pub(crate) record: Vec<u8>,
    pub(crate) traces: Vec<u8>,
    pub(crate) files: Vec<u8>,
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

/// Decodes a format-1/2 record (plain bincode, as those formats stored it).
/// The latest dictionary a store holds, and the number after the last.
pub(crate) fn latest_dictionary(
    table: &impl ReadableTable<u32, &'static [u8]>,
) -> Result<(Option<crate::pack::Dictionary>, u32)> {
    match table.last().map_err(Error::redb)? {
        Some((number, raw)) => {
            let number = number.value();
            Ok((Some(crate::pack::Dictionary::new(number, raw.value().to_vec())), number + 1))
        }
        None => Ok((None, 0)),
    }
}

#[cfg(test)]
mod layout {
    //! The stored record and traces are bincode of the package crate's typed model, so
    //! a field added there changes this store format's bytes. This test makes that
    //! change loud: when it fails, bump `STORE_FORMAT`, add the old one to
    //! `PREVIOUS_FORMATS` (the migration derives records and traces again from the
    //! files, so no old struct needs keeping) and write the old format's fixture first
    //! (`tests/fixtures/store-v*`). Only then update the fingerprint below.

    use std::collections::BTreeMap;

    use epistore_package::{hex, parse_package, RawPackage};

    use crate::codec;
    use crate::ingest::record_of;

    /// blake3 of the encoded record and traces of the package below, in format 4.
    const FINGERPRINT: &str = "d217d4340b5e14ca2ee465e2e15d9a1316dcc6e2ad20c680185766e11db56807";

    #[test]
    fn the_stored_layout_changes_only_with_the_store_format() {
        let mut files = BTreeMap::new();
        let put = |files: &mut BTreeMap<String, Vec<u8>>, path: &str, text: &str| {
            files.insert(path.to_string(), text.as_bytes().to_vec());
        };
        put(
            &mut files,
            "manifest.json",
            r#"{"format": "episode-package/1.2", "episode": "e", "model": {"name": "m", "version": "1"},
                "harness": {"level": "H1", "components": ["verification"]},
                "task": {"id": "t", "cluster": "c", "prompt": "do it"}, "requirements": [{"id": "R1"}],
                "seed": 3, "tags": {"k": 1}, "odd": true}"#,
        );
        put(
            &mut files,
            "outcome.json",
            r#"{"label": null, "agent_reported_complete": true, "correct": false, "cost": {"tokens_in": 5},
                "fault_locations": ["a.py:1"], "final_message": "done", "evidence_posture": "stale"}"#,
        );
        put(
            &mut files,
            "traces/messages.jsonl",
            r#"{"seq": 0, "role": "user", "author": "human", "text": "do it"}
{"seq": 1, "role": "assistant", "tool_call_id": "c", "tool": "sh", "arguments": {"x": 1}, "tool_seq": 2, "tokens_in": 4}
{"seq": 5, "role": "tool", "tool_seq": 2, "is_error": false}"#,
        );
        put(
            &mut files,
            "traces/tools.jsonl",
            r#"{"seq": 2, "tool": "sh", "command": "pytest", "exit_code": 1, "output": "artifacts/o.txt"}"#,
        );
        put(&mut files, "artifacts/o.txt", "1 failed");
        put(
            &mut files,
            "traces/actions.jsonl",
            r#"{"seq": 3, "kind": "edit", "paths": ["a.py"], "tool_seq": 2, "diff": "--- a/a.py"}"#,
        );
        put(
            &mut files,
            "traces/verification.jsonl",
            r#"{"seq": 4, "check_id": "t", "actor": "agent", "result": "fail"}"#,
        );
        put(&mut files, "traces/entropy.jsonl", "");
        let raw = RawPackage::new("p".into(), files);
        let episode = parse_package(&raw).expect("valid");
        let record = record_of(&raw, &episode);
        let mut bytes = codec::encode(&record);
        bytes.extend(codec::encode(&episode));
        assert_eq!(
            hex(blake3::hash(&bytes).as_bytes()),
            FINGERPRINT,
            "the stored layout changed: see this module's comment before updating the fingerprint"
        );
    }
}
