//! Reading a consistent snapshot: episodes, the cell index, blobs, the ingest log,
//! and `verify`.

use std::collections::BTreeMap;

use epistore_package::{hex, parse_hex, Episode, Hash};
use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::guarded;
use crate::error::{Error, Result};
use crate::pack::{Decoder, Dictionaries};
use crate::tables::{
    checksum, shared_file, split_trace_value, EpisodeRecord, FileEntry, BLOB_DATA, BLOB_INDEX, CELLS, CHECKSUMS,
    DICTIONARIES, DICTIONARY_COPIES, EPISODE_DATA, EPISODE_INDEX, FILE_DATA, INGEST_LOG, SUM_DICTIONARY, SUM_FILES,
    SUM_LOG, SUM_RECORD, SUM_TRACES, SUPERSEDED, TRACE_DATA,
};

/// The one key of `table` that `text` (a full id or a hex prefix of at least 4 digits)
/// names; `not_found` words the error when none does. An ambiguous prefix names the
/// first [`AMBIGUOUS_SHOWN`] keys it matches.
pub(crate) fn resolve_prefix(
    table: &impl ReadableTable<[u8; 32], u64>,
    text: &str,
    not_found: fn(String) -> Error,
) -> Result<Hash> {
    let text = text.trim().to_ascii_lowercase();
    if let Some(id) = parse_hex(&text) {
        return match table.get(id).map_err(Error::redb)? {
            Some(_) => Ok(id),
            None => Err(not_found(text)),
        };
    }
    if text.len() < 4 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_found(text));
    }
    // Ids are keys in byte order, so a hex prefix is a key range.
    let mut lo = [0u8; 32];
    let mut hi = [0xffu8; 32];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).expect("ascii");
        if pair.len() == 2 {
            let b = u8::from_str_radix(s, 16).expect("hex digits");
            lo[i] = b;
            hi[i] = b;
        } else {
            let nibble = u8::from_str_radix(s, 16).expect("hex digit");
            lo[i] = nibble << 4;
            hi[i] = (nibble << 4) | 0x0f;
        }
    }
    let mut ids = Vec::new();
    for entry in table.range(lo..=hi).map_err(Error::redb)?.take(AMBIGUOUS_SHOWN + 1) {
        ids.push(entry.map_err(Error::redb)?.0.value());
    }
    match ids.as_slice() {
        [] => Err(not_found(text)),
        [id] => Ok(*id),
        _ => Err(Error::Ambiguous {
            prefix: text,
            more: ids.len() > AMBIGUOUS_SHOWN,
            candidates: ids.iter().take(AMBIGUOUS_SHOWN).map(hex).collect(),
        }),
    }
}

/// One entry of the append-only ingest log: a committed write transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestBatch {
    pub seq: u64,
    pub unix_ms: u64,
    /// What was ingested, as the user named it.
    pub label: String,
    /// Episodes this batch added, in id order.
    pub episodes: Vec<Hash>,
}

/// A cell and how many episodes it holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cell {
    pub model: String,
    pub harness_level: String,
    pub task: String,
    pub episodes: u64,
}

/// One entry of a range over the cell index, as redb hands it out.
type CellEntry<'g> = std::result::Result<
    (redb::AccessGuard<'g, (&'static str, &'static str, &'static str, [u8; 32])>, redb::AccessGuard<'g, u64>),
    redb::StorageError,
>;

/// Decodes trace bytes that name no dictionary (use [`Snapshot::decoder`] for bytes
/// read from a store).
pub fn decode_traces(bytes: &[u8]) -> Result<Episode> {
    Decoder::without_dictionaries().traces(bytes)
}

/// Decodes record bytes that name no dictionary (use [`Snapshot::decoder`] for bytes
/// read from a store).
pub fn decode_record_bytes(bytes: &[u8]) -> Result<EpisodeRecord> {
    Decoder::without_dictionaries().record(bytes)
}

/// A read transaction: everything seen through it is as of one commit.
pub struct Snapshot {
    pub(crate) txn: ReadTransaction,
    /// The store's dictionaries, read on first use.
    decoder: std::sync::OnceLock<Decoder>,
}

/// The open checksum table (see [`Snapshot::check_sum`]).
pub(crate) struct Sums(Option<redb::ReadOnlyTable<(u8, u64), [u8; 16]>>);

/// Ids an ambiguous prefix lists.
pub const AMBIGUOUS_SHOWN: usize = 20;

impl Sums {
    pub(crate) fn check(&self, kind: u8, number: u64, value: &[u8], what: impl FnOnce() -> String) -> Result<()> {
        let Some(table) = &self.0 else { return Ok(()) };
        match table.get((kind, number)).map_err(Error::redb)? {
            Some(sum) if sum.value() != checksum(value) => Err(Error::Corrupt(format!(
                "{}: the stored bytes do not match their checksum (the file is damaged; `epistore verify` lists what, \
                 `epistore verify --repair` rebuilds what is derived)",
                what()
            ))),
            _ => Ok(()),
        }
    }
}

macro_rules! table {
    ($txn:expr, $def:expr) => {
        $txn.open_table($def).map_err(Error::redb)?
    };
}
pub(crate) use table;

impl Snapshot {
    pub(crate) fn new(txn: ReadTransaction) -> Snapshot {
        Snapshot { txn, decoder: std::sync::OnceLock::new() }
    }

    /// Decodes the values read under this snapshot (records, traces), with the store's
    /// compression dictionaries; clone it into threads that decode in parallel.
    pub fn decoder(&self) -> Result<Decoder> {
        if let Some(decoder) = self.decoder.get() {
            return Ok(decoder.clone());
        }
        let mut dictionaries = Dictionaries::default();
        let sums = self.sums()?;
        for entry in table!(self.txn, DICTIONARIES).iter().map_err(Error::redb)? {
            let (number, raw) = entry.map_err(Error::redb)?;
            let number = number.value();
            let what = || format!("compression dictionary {number}");
            match sums.check(SUM_DICTIONARY, u64::from(number), raw.value(), what) {
                Ok(()) => dictionaries.insert(number, raw.value()),
                // Damaged: its second copy, if that one is intact.
                Err(damaged) => match self.dictionary_copy(&sums, number)? {
                    Some(copy) => dictionaries.insert(number, &copy),
                    None => return Err(damaged),
                },
            }
        }
        Ok(self.decoder.get_or_init(|| Decoder(std::sync::Arc::new(dictionaries))).clone())
    }

    /// Dictionary `number` from whichever copy passes its checksum, the first copy
    /// first; `None` when neither does.
    pub(crate) fn intact_dictionary(&self, sums: &Sums, number: u32) -> Result<Option<Vec<u8>>> {
        let primary = table!(self.txn, DICTIONARIES).get(number).map_err(Error::redb)?.map(|v| v.value().to_vec());
        match primary {
            Some(p) if sums.check(SUM_DICTIONARY, u64::from(number), &p, String::new).is_ok() => Ok(Some(p)),
            _ => self.dictionary_copy(sums, number),
        }
    }

    /// A table added to the format after stores of it existed (`superseded`,
    /// `checksums`, `dictionary_copies`, the annotation tables): `None` in a store
    /// written before it, which holds none of what it would.
    pub(crate) fn optional_table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        definition: redb::TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>> {
        match self.txn.open_table(definition) {
            Ok(t) => Ok(Some(t)),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(Error::redb(e)),
        }
    }

    /// The second copy of dictionary `number`, when there is one and it passes the
    /// dictionary's checksum.
    pub(crate) fn dictionary_copy(&self, sums: &Sums, number: u32) -> Result<Option<Vec<u8>>> {
        let Some(copies) = self.optional_table(DICTIONARY_COPIES)? else { return Ok(None) };
        let Some(copy) = copies.get(number).map_err(Error::redb)? else { return Ok(None) };
        let intact = sums.check(SUM_DICTIONARY, u64::from(number), copy.value(), String::new).is_ok();
        Ok(intact.then(|| copy.value().to_vec()))
    }

    /// Checks a stored value against its checksum. A value without one (a store
    /// written before checksums, opened read-only, or a value an older build appended)
    /// is read unchecked: `verify` still re-derives it.
    pub(crate) fn check_sum(&self, kind: u8, number: u64, value: &[u8], what: impl FnOnce() -> String) -> Result<()> {
        self.sums()?.check(kind, number, value, what)
    }

    /// The checksum table, opened once for a scan (`None` in a store without it).
    pub(crate) fn sums(&self) -> Result<Sums> {
        Ok(Sums(self.optional_table(CHECKSUMS)?))
    }

    /// (superseded, superseding) episode ids: episodes a later import of a grown log
    /// supersedes (revision 1.1 `provenance.supersedes`), in id order. A store written
    /// before the table existed holds none.
    pub fn superseded(&self) -> Result<Vec<(Hash, Hash)>> {
        guarded(|| {
            let Some(table) = self.optional_table(SUPERSEDED)? else { return Ok(Vec::new()) };
            let mut out = Vec::new();
            for entry in table.iter().map_err(Error::redb)? {
                let (old, new) = entry.map_err(Error::redb)?;
                out.push((old.value(), new.value()));
            }
            Ok(out)
        })
    }

    pub fn episode_count(&self) -> Result<u64> {
        guarded(|| table!(self.txn, EPISODE_INDEX).len().map_err(Error::redb))
    }

    /// Distinct files stored.
    pub fn blob_count(&self) -> Result<u64> {
        guarded(|| table!(self.txn, BLOB_INDEX).len().map_err(Error::redb))
    }

    /// The latest ingest-log sequence number (0 for an empty store): names this snapshot.
    pub fn ingest_seq(&self) -> Result<u64> {
        guarded(|| Ok(table!(self.txn, INGEST_LOG).last().map_err(Error::redb)?.map(|(k, _)| k.value()).unwrap_or(0)))
    }

    /// Visits every episode record in ingest order, until `f` returns false.
    pub fn for_each_episode(&self, mut f: impl FnMut(EpisodeRecord) -> Result<bool>) -> Result<()> {
        guarded(|| {
            let sums = self.sums()?;
            let decoder = self.decoder()?;
            for entry in table!(self.txn, EPISODE_DATA).iter().map_err(Error::redb)? {
                let (number, value) = entry.map_err(Error::redb)?;
                let number = number.value();
                sums.check(SUM_RECORD, number, value.value(), || format!("episode record {number}"))?;
                if !f(decoder.record(value.value())?)? {
                    break;
                }
            }
            Ok(())
        })
    }

    /// Visits every episode's typed traces in ingest order, until `f` returns false.
    pub fn for_each_traces(&self, mut f: impl FnMut(Hash, Episode) -> Result<bool>) -> Result<()> {
        guarded(|| {
            let sums = self.sums()?;
            let decoder = self.decoder()?;
            for entry in table!(self.txn, TRACE_DATA).iter().map_err(Error::redb)? {
                let (number, value) = entry.map_err(Error::redb)?;
                let number = number.value();
                sums.check(SUM_TRACES, number, value.value(), || format!("trace record {number}"))?;
                let (id, compressed) = split_trace_value(value.value())?;
                if !f(id, decoder.traces(compressed)?)? {
                    break;
                }
            }
            Ok(())
        })
    }

    pub fn episodes(&self) -> Result<Vec<EpisodeRecord>> {
        guarded(|| {
            let mut out = Vec::new();
            self.for_each_episode(|r| {
                out.push(r);
                Ok(true)
            })?;
            Ok(out)
        })
    }

    /// Episode ids whose cell matches the given keys, read from the cell index alone
    /// (no episode is decoded). With a model the scan is a key range over that model;
    /// without one it walks the index keys.
    pub fn select_ids(
        &self,
        model: Option<&str>,
        harness_level: Option<&str>,
        task: Option<&str>,
    ) -> Result<Vec<Hash>> {
        guarded(|| {
            let cells = table!(self.txn, CELLS);
            let keep = |level: &str, t: &str| harness_level.is_none_or(|l| l == level) && task.is_none_or(|x| x == t);
            let mut out = Vec::new();
            let mut push = |entry: CellEntry<'_>| -> Result<()> {
                let (key, _) = entry.map_err(Error::redb)?;
                let (_, level, t, id) = key.value();
                if keep(level, t) {
                    out.push(id);
                }
                Ok(())
            };
            match model {
                Some(m) => {
                    let (lo_level, hi_level) = harness_level.map_or(("", None), |l| (l, Some(l)));
                    let lo = (m, lo_level, if hi_level.is_some() { task.unwrap_or("") } else { "" }, [0u8; 32]);
                    for entry in cells.range(lo..).map_err(Error::redb)? {
                        let stop = match &entry {
                            Ok((key, _)) => {
                                let (km, kl, _, _) = key.value();
                                km != m || hi_level.is_some_and(|l| l != kl)
                            }
                            Err(_) => false,
                        };
                        if stop {
                            break;
                        }
                        push(entry)?;
                    }
                }
                None => {
                    for entry in cells.iter().map_err(Error::redb)? {
                        push(entry)?;
                    }
                }
            }
            Ok(out)
        })
    }

    /// (model, harness level, episode id) of every episode on one task, from the cell
    /// index alone. A skip scan: one key range per (model, level) pair, then a jump past the
    /// pair, so the cost grows with the pairs and the task's episodes, not the store.
    pub fn task_ids(&self, task: &str) -> Result<Vec<(String, String, Hash)>> {
        guarded(|| {
            let cells = table!(self.txn, CELLS);
            let mut out = Vec::new();
            // The smallest key of the next (model, level) pair: `level + "\0"` is the
            // least string above `level`.
            let mut next: (String, String) = (String::new(), String::new());
            loop {
                let lo = (next.0.as_str(), next.1.as_str(), "", [0u8; 32]);
                let Some(first) = cells.range(lo..).map_err(Error::redb)?.next() else { break };
                let (key, _) = first.map_err(Error::redb)?;
                let (model, level, _, _) = key.value();
                let (model, level) = (model.to_string(), level.to_string());
                for entry in cells.range((model.as_str(), level.as_str(), task, [0u8; 32])..).map_err(Error::redb)? {
                    let (key, _) = entry.map_err(Error::redb)?;
                    let (m, l, t, id) = key.value();
                    if m != model || l != level || t != task {
                        break;
                    }
                    out.push((model.clone(), level.clone(), id));
                }
                next = (model, format!("{level}\0"));
            }
            Ok(out)
        })
    }

    /// The episode number of an id (its key in the data tables), if stored.
    pub(crate) fn number(&self, id: &Hash) -> Result<Option<u64>> {
        Ok(table!(self.txn, EPISODE_INDEX).get(*id).map_err(Error::redb)?.map(|v| v.value()))
    }

    pub fn episode(&self, id: &Hash) -> Result<Option<EpisodeRecord>> {
        guarded(|| {
            let decoder = self.decoder()?;
            let Some(record) = self.record_bytes(id)?.map(|bytes| decoder.record(&bytes)).transpose()? else {
                return Ok(None);
            };
            if record.id != *id {
                return Err(Error::Corrupt(format!(
                    "the index puts episode {} at the record of {}",
                    hex(id),
                    hex(&record.id)
                )));
            }
            Ok(Some(record))
        })
    }

    /// The typed traces of an episode, with derived state.
    pub fn episode_traces(&self, id: &Hash) -> Result<Option<Episode>> {
        guarded(|| {
            let decoder = self.decoder()?;
            self.traces_bytes(id)?.map(|bytes| decoder.traces(&bytes)).transpose()
        })
    }

    /// The stored (compressed) trace record of an episode, undecoded: read the bytes
    /// under the snapshot, decode them anywhere (in parallel) with [`Snapshot::decoder`].
    pub fn traces_bytes(&self, id: &Hash) -> Result<Option<Vec<u8>>> {
        guarded(|| {
            let Some(number) = self.number(id)? else {
                return Ok(None);
            };
            let stored = table!(self.txn, TRACE_DATA).get(number).map_err(Error::redb)?;
            let Some(stored) = stored else {
                return Err(Error::Corrupt(format!("episode {} has no trace record", hex(id))));
            };
            self.check_sum(SUM_TRACES, number, stored.value(), || format!("episode {}: traces", hex(id)))?;
            match split_trace_value(stored.value())? {
                (owner, compressed) if owner == *id => Ok(Some(compressed.to_vec())),
                (owner, _) => Err(Error::Corrupt(format!(
                    "the index puts episode {} at trace record {number}, which belongs to {}",
                    hex(id),
                    hex(&owner)
                ))),
            }
        })
    }

    /// The stored episode record bytes, undecoded (see [`Snapshot::decoder`]).
    pub fn record_bytes(&self, id: &Hash) -> Result<Option<Vec<u8>>> {
        guarded(|| {
            let Some(number) = self.number(id)? else {
                return Ok(None);
            };
            match table!(self.txn, EPISODE_DATA).get(number).map_err(Error::redb)? {
                Some(v) => {
                    self.check_sum(SUM_RECORD, number, v.value(), || format!("episode {}: record", hex(id)))?;
                    Ok(Some(v.value().to_vec()))
                }
                None => Err(Error::Corrupt(format!("episode {} has no record", hex(id)))),
            }
        })
    }

    /// Resolves a full id or a unique hex prefix (at least 4 characters) to an id; an
    /// ambiguous prefix names the first [`AMBIGUOUS_SHOWN`] ids it matches.
    pub fn resolve(&self, text: &str) -> Result<Hash> {
        guarded(|| {
            // A full id is taken as given: the caller says whether it is stored.
            if let Some(id) = parse_hex(text) {
                return Ok(id);
            }
            resolve_prefix(&table!(self.txn, EPISODE_INDEX), text, Error::NoEpisode)
        })
    }

    /// [`Snapshot::resolve`], and the episode must be stored.
    pub fn resolve_stored(&self, text: &str) -> Result<Hash> {
        guarded(|| resolve_prefix(&table!(self.txn, EPISODE_INDEX), text, Error::NoEpisode))
    }

    /// The original bytes of a file.
    pub fn blob(&self, hash: &Hash) -> Result<Vec<u8>> {
        guarded(|| {
            let missing = || Error::Corrupt(format!("missing blob {}", hex(hash)));
            let number = table!(self.txn, BLOB_INDEX).get(*hash).map_err(Error::redb)?.ok_or_else(missing)?.value();
            let bytes = match table!(self.txn, BLOB_DATA).get(number).map_err(Error::redb)? {
                Some(v) => codec::decode_blob(v.value())?,
                None => return Err(missing()),
            };
            // Re-hashing costs far less than the decompression before it, and a blob
            // is exported or shown as its bytes: damaged bytes must not go out as the file.
            if *blake3::hash(&bytes).as_bytes() != *hash {
                return Err(Error::Corrupt(format!(
                    "blob {} does not hash to its key (the file is damaged)",
                    hex(hash)
                )));
            }
            Ok(bytes)
        })
    }

    /// The plain concatenation of an episode's own files (those not shared), checked
    /// against its checksum.
    pub(crate) fn own_files(&self, number: u64) -> Result<Vec<u8>> {
        let stored = table!(self.txn, FILE_DATA).get(number).map_err(Error::redb)?;
        let Some(stored) = stored else {
            return Err(Error::Corrupt(format!("episode number {number} has no file record")));
        };
        self.check_sum(SUM_FILES, number, stored.value(), || format!("the files of episode number {number}"))?;
        self.decoder()?.plain(stored.value())
    }

    /// The bytes of every file of an episode, in listing order: its own files from its
    /// file record, shared ones from the blob index. Each is checked against its hash:
    /// damaged bytes never go out as the file.
    pub fn files(&self, record: &EpisodeRecord) -> Result<Vec<Vec<u8>>> {
        guarded(|| {
            let own = self.own_files_of(record)?;
            split_files(&record.files, &own, |f| self.blob(&f.hash)).map_err(|e| e.for_episode(&record.id))
        })
    }

    /// [`Snapshot::own_files`] of a record's episode (nothing read when it has none).
    fn own_files_of(&self, record: &EpisodeRecord) -> Result<Vec<u8>> {
        if record.files.iter().all(|f| shared_file(&f.path, f.size)) {
            return Ok(Vec::new());
        }
        let number = self.number(&record.id)?.ok_or_else(|| Error::NoEpisode(hex(&record.id)))?;
        self.own_files(number)
    }

    /// The bytes of one file of an episode (see [`Snapshot::files`]).
    pub fn file(&self, record: &EpisodeRecord, file: &FileEntry) -> Result<Vec<u8>> {
        self.package(record).file(file)
    }

    /// Reads files of one episode one at a time, decompressing its own files once
    /// however many of them are read, and a shared file only when it is asked for.
    pub fn package<'s>(&'s self, record: &'s EpisodeRecord) -> PackageFiles<'s> {
        PackageFiles { snapshot: self, record, own: std::cell::OnceCell::new() }
    }

    /// Writes an episode's package into `dir`, byte-identical to what was ingested.
    /// Refuses to overwrite existing files.
    pub fn export_package(&self, id: &Hash, dir: &std::path::Path) -> Result<EpisodeRecord> {
        guarded(|| {
            let record = self.episode(id)?.ok_or_else(|| Error::NoEpisode(hex(id)))?;
            let io = |path: &std::path::Path, e| Error::Io { path: path.to_path_buf(), source: e };
            for (file, bytes) in record.files.iter().zip(self.files(&record)?) {
                let target = dir.join(&file.path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
                }
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .map_err(|e| io(&target, e))?;
                std::io::Write::write_all(&mut out, &bytes).map_err(|e| io(&target, e))?;
            }
            Ok(record)
        })
    }

    /// Cells with their episode counts, in key order, read from the cell index.
    pub fn cells(&self) -> Result<Vec<Cell>> {
        guarded(|| {
            let mut counts: BTreeMap<(String, String, String), u64> = BTreeMap::new();
            for entry in table!(self.txn, CELLS).iter().map_err(Error::redb)? {
                let (key, _) = entry.map_err(Error::redb)?;
                let (m, l, t, _) = key.value();
                *counts.entry((m.to_string(), l.to_string(), t.to_string())).or_default() += 1;
            }
            Ok(counts
                .into_iter()
                .map(|((model, harness_level, task), episodes)| Cell { model, harness_level, task, episodes })
                .collect())
        })
    }

    /// The cell (model, harness level, task) of each of `ids` that is stored, from one
    /// scan of the cell index: no episode record is decoded.
    pub fn cells_of(
        &self,
        ids: &std::collections::HashSet<Hash>,
    ) -> Result<std::collections::HashMap<Hash, (String, String, String)>> {
        guarded(|| {
            let mut out = std::collections::HashMap::with_capacity(ids.len());
            if ids.is_empty() {
                return Ok(out);
            }
            for entry in table!(self.txn, CELLS).iter().map_err(Error::redb)? {
                let (key, _) = entry.map_err(Error::redb)?;
                let (m, l, t, id) = key.value();
                if ids.contains(&id) {
                    out.insert(id, (m.to_string(), l.to_string(), t.to_string()));
                }
            }
            Ok(out)
        })
    }

    /// One entry of the ingest log. Sequence numbers run from 1 to [`Snapshot::ingest_seq`]
    /// without gaps (each commit takes the next), so a reader that needs only some
    /// entries can look them up instead of decoding the whole log.
    pub fn ingest_batch(&self, seq: u64) -> Result<Option<IngestBatch>> {
        guarded(|| match table!(self.txn, INGEST_LOG).get(seq).map_err(Error::redb)? {
            Some(v) => {
                self.check_sum(SUM_LOG, seq, v.value(), || format!("ingest batch {seq}"))?;
                Ok(Some(codec::decode(v.value())?))
            }
            None => Ok(None),
        })
    }

    pub fn ingest_log(&self) -> Result<Vec<IngestBatch>> {
        guarded(|| {
            let mut out = Vec::new();
            let sums = self.sums()?;
            for entry in table!(self.txn, INGEST_LOG).iter().map_err(Error::redb)? {
                let (seq, value) = entry.map_err(Error::redb)?;
                let seq = seq.value();
                sums.check(SUM_LOG, seq, value.value(), || format!("ingest batch {seq}"))?;
                out.push(codec::decode(value.value())?);
            }
            Ok(out)
        })
    }
}

/// The files of one episode, read on demand (see [`Snapshot::package`]).
pub struct PackageFiles<'s> {
    snapshot: &'s Snapshot,
    record: &'s EpisodeRecord,
    /// The episode's own files, in listing order, once read.
    own: std::cell::OnceCell<Vec<(FileEntry, Vec<u8>)>>,
}

impl PackageFiles<'_> {
    /// The bytes of `file`, checked against its hash.
    pub fn file(&self, file: &FileEntry) -> Result<Vec<u8>> {
        if shared_file(&file.path, file.size) {
            return self.snapshot.blob(&file.hash);
        }
        if self.own.get().is_none() {
            let plain = self.snapshot.own_files_of(self.record)?;
            let listing: Vec<FileEntry> =
                self.record.files.iter().filter(|f| !shared_file(&f.path, f.size)).cloned().collect();
            let bytes = split_files(&listing, &plain, |_| unreachable!("only own files are listed"))
                .map_err(|e| e.for_episode(&self.record.id))?;
            let _ = self.own.set(listing.into_iter().zip(bytes).collect());
        }
        let own = self.own.get().expect("set above");
        match own.iter().find(|(f, _)| f == file) {
            Some((_, bytes)) => Ok(bytes.clone()),
            None => Err(Error::Corrupt(format!("episode {} lists no file {}", hex(&self.record.id), file.path))),
        }
    }
}

/// Splits an episode's own-files value into its files and fetches the shared ones, in
/// listing order, checking every file against its hash.
pub(crate) fn split_files(
    listing: &[FileEntry],
    own: &[u8],
    mut shared: impl FnMut(&FileEntry) -> Result<Vec<u8>>,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(listing.len());
    let mut at = 0usize;
    for file in listing {
        if shared_file(&file.path, file.size) {
            out.push(shared(file)?);
            continue;
        }
        let end = usize::try_from(file.size).ok().and_then(|n| at.checked_add(n)).filter(|end| *end <= own.len());
        let Some(end) = end else {
            return Err(Error::Corrupt(format!("the file record ends before file {}", file.path)));
        };
        let bytes = &own[at..end];
        if *blake3::hash(bytes).as_bytes() != file.hash {
            return Err(Error::Corrupt(format!(
                "file {} does not hash to its listing (the file is damaged)",
                file.path
            )));
        }
        out.push(bytes.to_vec());
        at = end;
    }
    if at != own.len() {
        return Err(Error::Corrupt(format!("the file record holds {} bytes past its files", own.len() - at)));
    }
    Ok(out)
}
