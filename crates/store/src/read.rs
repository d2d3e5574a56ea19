//! Reading a consistent snapshot: episodes, the cell index, blobs, the ingest log,
//! and `verify`.

use std::collections::{BTreeMap, HashMap, HashSet};

use epistore_package::{episode_id, hex, parse_hex, Episode, Hash};
use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::{Error, Result};
use crate::tables::{
    decode_record, split_trace_value, EpisodeRecord, BLOB_DATA, BLOB_INDEX, CELLS, EPISODE_DATA, EPISODE_INDEX,
    INGEST_LOG, SUPERSEDED, TRACE_DATA,
};

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

/// What `verify` found. The store is intact when `problems` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub blobs: u64,
    pub blob_bytes: u64,
    pub episodes: u64,
    pub cells: u64,
    pub batches: u64,
    pub problems: Vec<String>,
}

/// Decodes bytes from [`Snapshot::traces_bytes`].
/// One entry of a range over the cell index, as redb hands it out.
type CellEntry<'g> = std::result::Result<
    (redb::AccessGuard<'g, (&'static str, &'static str, &'static str, [u8; 32])>, redb::AccessGuard<'g, u64>),
    redb::StorageError,
>;

pub fn decode_traces(bytes: &[u8]) -> Result<Episode> {
    codec::decode_compressed(bytes)
}

/// Decodes bytes from [`Snapshot::record_bytes`].
pub fn decode_record_bytes(bytes: &[u8]) -> Result<EpisodeRecord> {
    decode_record(bytes)
}

/// A read transaction: everything seen through it is as of one commit.
pub struct Snapshot {
    txn: ReadTransaction,
}

macro_rules! table {
    ($txn:expr, $def:expr) => {
        $txn.open_table($def).map_err(Error::redb)?
    };
}

impl Snapshot {
    pub(crate) fn new(txn: ReadTransaction) -> Snapshot {
        Snapshot { txn }
    }

    /// (superseded, superseding) episode ids: episodes a later import of a grown log
    /// supersedes (revision 1.1 `provenance.supersedes`), in id order. A store written
    /// before the table existed holds none.
    pub fn superseded(&self) -> Result<Vec<(Hash, Hash)>> {
        let table = match self.txn.open_table(SUPERSEDED) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(Error::redb(e)),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(Error::redb)? {
            let (old, new) = entry.map_err(Error::redb)?;
            out.push((old.value(), new.value()));
        }
        Ok(out)
    }

    pub fn episode_count(&self) -> Result<u64> {
        table!(self.txn, EPISODE_INDEX).len().map_err(Error::redb)
    }

    /// Distinct files stored.
    pub fn blob_count(&self) -> Result<u64> {
        table!(self.txn, BLOB_INDEX).len().map_err(Error::redb)
    }

    /// The latest ingest-log sequence number (0 for an empty store): names this snapshot.
    pub fn ingest_seq(&self) -> Result<u64> {
        Ok(table!(self.txn, INGEST_LOG).last().map_err(Error::redb)?.map(|(k, _)| k.value()).unwrap_or(0))
    }

    /// Visits every episode record in ingest order, until `f` returns false.
    pub fn for_each_episode(&self, mut f: impl FnMut(EpisodeRecord) -> Result<bool>) -> Result<()> {
        for entry in table!(self.txn, EPISODE_DATA).iter().map_err(Error::redb)? {
            let (_, value) = entry.map_err(Error::redb)?;
            if !f(decode_record(value.value())?)? {
                break;
            }
        }
        Ok(())
    }

    /// Visits every episode's typed traces in ingest order, until `f` returns false.
    pub fn for_each_traces(&self, mut f: impl FnMut(Hash, Episode) -> Result<bool>) -> Result<()> {
        for entry in table!(self.txn, TRACE_DATA).iter().map_err(Error::redb)? {
            let (_, value) = entry.map_err(Error::redb)?;
            let (id, compressed) = split_trace_value(value.value())?;
            if !f(id, codec::decode_compressed(compressed)?)? {
                break;
            }
        }
        Ok(())
    }

    pub fn episodes(&self) -> Result<Vec<EpisodeRecord>> {
        let mut out = Vec::new();
        self.for_each_episode(|r| {
            out.push(r);
            Ok(true)
        })?;
        Ok(out)
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
    }

    /// (model, harness level, episode id) of every episode on one task, from the cell
    /// index alone. A skip scan: one key range per (model, level) pair, then a jump past the
    /// pair, so the cost grows with the pairs and the task's episodes, not the store.
    pub fn task_ids(&self, task: &str) -> Result<Vec<(String, String, Hash)>> {
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
    }

    /// The episode number of an id (its key in the data tables), if stored.
    fn number(&self, id: &Hash) -> Result<Option<u64>> {
        Ok(table!(self.txn, EPISODE_INDEX).get(*id).map_err(Error::redb)?.map(|v| v.value()))
    }

    pub fn episode(&self, id: &Hash) -> Result<Option<EpisodeRecord>> {
        let Some(record) = self.record_bytes(id)?.map(|bytes| decode_record(&bytes)).transpose()? else {
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
    }

    /// The typed traces of an episode, with derived state.
    pub fn episode_traces(&self, id: &Hash) -> Result<Option<Episode>> {
        self.traces_bytes(id)?.map(|bytes| codec::decode_compressed(&bytes)).transpose()
    }

    /// The stored (compressed) trace record of an episode, undecoded: read the bytes
    /// under the snapshot, decode them anywhere (in parallel) with [`decode_traces`].
    pub fn traces_bytes(&self, id: &Hash) -> Result<Option<Vec<u8>>> {
        let Some(number) = self.number(id)? else {
            return Ok(None);
        };
        match table!(self.txn, TRACE_DATA).get(number).map_err(Error::redb)? {
            Some(v) => match split_trace_value(v.value())? {
                (owner, compressed) if owner == *id => Ok(Some(compressed.to_vec())),
                (owner, _) => Err(Error::Corrupt(format!(
                    "the index puts episode {} at trace record {number}, which belongs to {}",
                    hex(id),
                    hex(&owner)
                ))),
            },
            None => Err(Error::Corrupt(format!("episode {} has no trace record", hex(id)))),
        }
    }

    /// The stored episode record bytes, undecoded (see [`decode_record_bytes`]).
    pub fn record_bytes(&self, id: &Hash) -> Result<Option<Vec<u8>>> {
        let Some(number) = self.number(id)? else {
            return Ok(None);
        };
        match table!(self.txn, EPISODE_DATA).get(number).map_err(Error::redb)? {
            Some(v) => Ok(Some(v.value().to_vec())),
            None => Err(Error::Corrupt(format!("episode {} has no record", hex(id)))),
        }
    }

    /// Resolves a full id or a unique hex prefix (at least 4 characters) to an id.
    pub fn resolve(&self, text: &str) -> Result<Hash> {
        let text = text.trim().to_ascii_lowercase();
        if let Some(id) = parse_hex(&text) {
            return Ok(id);
        }
        if text.len() < 4 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::NoEpisode(text));
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
        let episodes = table!(self.txn, EPISODE_INDEX);
        let mut found = episodes.range(lo..=hi).map_err(Error::redb)?;
        let first = found.next().transpose().map_err(Error::redb)?.map(|(k, _)| k.value());
        match (first, found.next()) {
            (None, _) => Err(Error::NoEpisode(text)),
            (Some(id), None) => Ok(id),
            (Some(_), Some(_)) => Err(Error::Ambiguous(text)),
        }
    }

    /// The original bytes of a file.
    pub fn blob(&self, hash: &Hash) -> Result<Vec<u8>> {
        let missing = || Error::Corrupt(format!("missing blob {}", hex(hash)));
        let number = table!(self.txn, BLOB_INDEX).get(*hash).map_err(Error::redb)?.ok_or_else(missing)?.value();
        match table!(self.txn, BLOB_DATA).get(number).map_err(Error::redb)? {
            Some(v) => codec::decode_blob(v.value()),
            None => Err(missing()),
        }
    }

    /// Writes an episode's package into `dir`, byte-identical to what was ingested.
    /// Refuses to overwrite existing files.
    pub fn export_package(&self, id: &Hash, dir: &std::path::Path) -> Result<EpisodeRecord> {
        let record = self.episode(id)?.ok_or_else(|| Error::NoEpisode(hex(id)))?;
        let io = |path: &std::path::Path, e| Error::Io { path: path.to_path_buf(), source: e };
        for file in &record.files {
            let bytes = self.blob(&file.hash)?;
            let target = dir.join(&file.path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            let mut out =
                std::fs::OpenOptions::new().write(true).create_new(true).open(&target).map_err(|e| io(&target, e))?;
            std::io::Write::write_all(&mut out, &bytes).map_err(|e| io(&target, e))?;
        }
        Ok(record)
    }

    /// Cells with their episode counts, in key order, read from the cell index.
    pub fn cells(&self) -> Result<Vec<Cell>> {
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
    }

    /// One entry of the ingest log. Sequence numbers run from 1 to [`Snapshot::ingest_seq`]
    /// without gaps (each commit takes the next), so a reader that needs only some
    /// entries can look them up instead of decoding the whole log.
    pub fn ingest_batch(&self, seq: u64) -> Result<Option<IngestBatch>> {
        match table!(self.txn, INGEST_LOG).get(seq).map_err(Error::redb)? {
            Some(v) => Ok(Some(codec::decode(v.value())?)),
            None => Ok(None),
        }
    }

    pub fn ingest_log(&self) -> Result<Vec<IngestBatch>> {
        let mut out = Vec::new();
        for entry in table!(self.txn, INGEST_LOG).iter().map_err(Error::redb)? {
            let (_, value) = entry.map_err(Error::redb)?;
            out.push(codec::decode(value.value())?);
        }
        Ok(out)
    }

    /// An index's entries keyed by number, for `verify`; numbers that two entries
    /// share are problems.
    fn by_number(
        &self,
        index: redb::TableDefinition<[u8; 32], u64>,
        what: &str,
        problems: &mut Vec<String>,
    ) -> Result<HashMap<u64, Hash>> {
        let mut out = HashMap::new();
        for entry in table!(self.txn, index).iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            if let Some(other) = out.insert(value.value(), key.value()) {
                problems.push(format!(
                    "{what} {} and {} share number {}",
                    hex(&other),
                    hex(&key.value()),
                    value.value()
                ));
            }
        }
        Ok(out)
    }

    /// Re-hashes every blob and checks every table against the others. Never stops at
    /// the first problem: it reports them all.
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        // Index entries by number, then one sequential pass over each data table.
        let mut blob_numbers = self.by_number(BLOB_INDEX, "blobs", &mut report.problems)?;
        let mut blob_ids = HashSet::new();
        for entry in table!(self.txn, BLOB_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            report.blobs += 1;
            let Some(key) = blob_numbers.remove(&number) else {
                report.problems.push(format!("blob number {number} is in no index entry"));
                continue;
            };
            match codec::decode_blob(value.value()) {
                Ok(bytes) => {
                    report.blob_bytes += bytes.len() as u64;
                    if *blake3::hash(&bytes).as_bytes() != key {
                        report.problems.push(format!("blob {} does not hash to its key", hex(&key)));
                    }
                }
                Err(e) => report.problems.push(format!("blob {}: {e}", hex(&key))),
            }
            blob_ids.insert(key);
        }
        for (number, key) in blob_numbers {
            report.problems.push(format!("blob {} points at number {number}, which holds nothing", hex(&key)));
        }

        let mut numbers = self.by_number(EPISODE_INDEX, "episodes", &mut report.problems)?;
        let mut traced = HashSet::new();
        for entry in table!(self.txn, TRACE_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            match split_trace_value(value.value()) {
                Err(e) => report.problems.push(format!("trace record {number}: {e}")),
                Ok((id, compressed)) => {
                    if numbers.get(&number) != Some(&id) {
                        report.problems.push(format!(
                            "trace record {number} names episode {}, which the index does not put there",
                            hex(&id)
                        ));
                    }
                    if let Err(e) = codec::decode_compressed::<Episode>(compressed) {
                        report.problems.push(format!("episode {}: trace record: {e}", hex(&id)));
                    }
                    traced.insert(number);
                }
            }
        }
        let mut cells_expected = HashSet::new();
        let mut ids = HashSet::new();
        for entry in table!(self.txn, EPISODE_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            report.episodes += 1;
            let Some(key) = numbers.remove(&number) else {
                report.problems.push(format!("episode record {number} is in no index entry"));
                continue;
            };
            ids.insert(key);
            let name = hex(&key);
            if !traced.remove(&number) {
                report.problems.push(format!("episode {name}: no trace record"));
            }
            let record = match decode_record(value.value()) {
                Ok(r) => r,
                Err(e) => {
                    report.problems.push(format!("episode {name}: {e}"));
                    continue;
                }
            };
            if record.id != key {
                report.problems.push(format!("episode {name}: record names id {}", hex(&record.id)));
            }
            if episode_id(record.files.iter().map(|f| (f.path.as_str(), &f.hash))) != key {
                report.problems.push(format!("episode {name}: file listing does not hash to the id"));
            }
            for file in &record.files {
                if !blob_ids.contains(&file.hash) {
                    report.problems.push(format!("episode {name}: file {} has no blob", file.path));
                }
            }
            let m = &record.manifest;
            cells_expected.insert((m.model.clone(), m.harness_level.clone(), m.task.clone(), key, number));
        }
        for (number, key) in numbers {
            report.problems.push(format!("episode {} points at number {number}, which holds no record", hex(&key)));
        }
        for number in traced {
            report.problems.push(format!("trace record {number} belongs to no episode record"));
        }

        for entry in table!(self.txn, CELLS).iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            let (m, l, t, id) = key.value();
            report.cells += 1;
            if !cells_expected.remove(&(m.to_string(), l.to_string(), t.to_string(), id, value.value())) {
                report.problems.push(format!("cell index entry ({m}, {l}, {t}, {}) names no such episode", hex(&id)));
            }
        }
        for (m, l, t, id, _) in cells_expected {
            report.problems.push(format!("episode {} is missing from the cell index ({m}, {l}, {t})", hex(&id)));
        }

        let mut logged = HashSet::new();
        for entry in table!(self.txn, INGEST_LOG).iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            report.batches += 1;
            // Readers rely on the sequence numbers running 1, 2, 3, ... (`ingest_batch`).
            if key.value() != report.batches {
                report.problems.push(format!(
                    "ingest batch {} where {} was due: the log has a gap",
                    key.value(),
                    report.batches
                ));
            }
            let batch: IngestBatch = match codec::decode(value.value()) {
                Ok(b) => b,
                Err(e) => {
                    report.problems.push(format!("ingest batch {}: {e}", key.value()));
                    continue;
                }
            };
            if batch.seq != key.value() {
                report.problems.push(format!("ingest batch {} records sequence {}", key.value(), batch.seq));
            }
            for id in batch.episodes {
                if !ids.contains(&id) {
                    report.problems.push(format!("ingest batch {} names missing episode {}", batch.seq, hex(&id)));
                }
                logged.insert(id);
            }
        }
        for id in ids.difference(&logged) {
            report.problems.push(format!("episode {} is in no ingest batch", hex(id)));
        }
        Ok(report)
    }
}
