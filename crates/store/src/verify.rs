//! `verify`: every table checked against the others, every stored value against its
//! checksum, every blob re-hashed, and every episode's record and typed traces derived
//! again from its files and compared with what is stored. `repair` rewrites the derived
//! values of the episodes whose files are intact.
//!
//! What is derived (records, traces, cell index entries, checksums) can be rebuilt;
//! what was ingested (the files, found by their hashes) cannot, so a damaged blob or a
//! record whose file listing no longer hashes to the episode id is reported, never
//! "repaired" into something else.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use epistore_package::{episode_id, hex, parse_package, Episode, Hash, RawPackage};
use rayon::prelude::*;
use redb::{ReadableTable, ReadableTableMetadata};

use crate::codec;
use crate::error::{guarded, Error, Result};
use crate::ingest::record_of;
use crate::pack::{Decoder, Dictionaries};
use crate::read::split_files;
use crate::read::{table, IngestBatch, Snapshot, Sums};
use crate::tables::{
    begin_write, checksum, shared_file, split_trace_value, trace_value, EpisodeRecord, BLOB_DATA, BLOB_INDEX, CELLS,
    CHECKSUMS, DICTIONARIES, DICTIONARY_COPIES, EPISODE_DATA, EPISODE_INDEX, FILE_DATA, INGEST_LOG, SUM_DICTIONARY,
    SUM_FILES, SUM_LOG, SUM_RECORD, SUM_TRACES, TRACE_DATA,
};
use crate::Store;

/// What `verify` found. The store is intact when `problems` is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub blobs: u64,
    pub blob_bytes: u64,
    pub episodes: u64,
    pub cells: u64,
    pub batches: u64,
    /// Annotation records read (docs/store-format.md §3.11).
    pub annotations: u64,
    /// Episodes whose record and traces were derived again from their files.
    pub rederived: u64,
    pub problems: Vec<String>,
    /// Episodes with a problem that [`Store::repair`] can mend: their files are intact,
    /// only what was derived from them is damaged.
    pub repairable: Vec<Hash>,
    /// Compression dictionaries one of whose two copies is damaged while the other is
    /// intact: [`Store::repair`] writes the intact one over it.
    pub dictionaries_to_restore: Vec<u32>,
}

/// What [`Store::repair`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Episodes whose record, traces, checksums and cell entry were written again.
    pub repaired: Vec<Hash>,
    /// What is still wrong afterwards (damage to ingested files, which nothing can undo).
    pub remaining: Vec<String>,
    /// Compression dictionaries written again from their intact copy.
    pub dictionaries_restored: Vec<u32>,
}

/// Episodes derived again per parallel step: bounds the files held in memory.
const REDERIVE_CHUNK: usize = 64;

/// Why an episode could not be derived again.
enum Unread {
    /// Its files could not be read back intact.
    Files(String),
    /// Its files were read but no longer parse.
    Parse(String),
}

/// An episode's derived values as this build computes them from its files.
struct Rederived {
    record: EpisodeRecord,
    /// The `trace_data` value (id ++ compressed traces).
    traces: Vec<u8>,
    /// The uncompressed encoding of the traces, to compare with what is stored.
    traces_plain: Vec<u8>,
}

/// What the phases of [`Snapshot::verify_episodes`] find and hand on.
#[derive(Default)]
struct EpisodeScan {
    /// Episode number -> id, from the index; each record found takes its entry out.
    numbers: HashMap<u64, Hash>,
    /// Own-file records whose checksum holds.
    filed: BTreeSet<u64>,
    /// Own-file records no episode record has claimed yet.
    unclaimed_files: BTreeSet<u64>,
    /// Trace records no episode record has claimed yet.
    traced: BTreeSet<u64>,
    /// Trace records that fail their checksum.
    bad_trace_sums: HashSet<u64>,
    /// The entries the cell index must hold.
    cells_expected: HashSet<CellEntry>,
    /// Every episode id with a record.
    ids: HashSet<Hash>,
    /// Episodes whose files are intact, to derive again.
    to_rederive: Vec<(u64, EpisodeRecord)>,
}

/// One entry of the cell index: (model, level, task, id) -> number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CellEntry {
    model: String,
    level: String,
    task: String,
    id: Hash,
    number: u64,
}

impl CellEntry {
    fn of(record: &EpisodeRecord, number: u64) -> CellEntry {
        let m = &record.manifest;
        CellEntry {
            model: m.model.clone(),
            level: m.harness_level.clone(),
            task: m.task.clone(),
            id: record.id,
            number,
        }
    }
}

impl Snapshot {
    /// An index's entries keyed by number; numbers that two entries share are problems.
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

    /// Checks everything (see the module comment). Never stops at the first problem:
    /// it reports them all, naming the episode where one is concerned.
    pub fn verify(&self) -> Result<VerifyReport> {
        guarded(|| {
            let mut report = VerifyReport::default();
            let decoder = self.verify_dictionaries(&mut report)?;
            let blob_ids = self.verify_blobs(&mut report)?;
            let logged = self.verify_log(&mut report)?;
            self.verify_episodes(&mut report, &decoder, &blob_ids, &logged)?;
            report.annotations = crate::annotate::verify_annotations(self, &mut report.problems)?;
            report.repairable.sort_unstable();
            report.repairable.dedup();
            // `repair` derives again from the stored record's file listing: an episode
            // whose record no longer decodes (its dictionary lost) is not repairable.
            let mut repairable = Vec::with_capacity(report.repairable.len());
            for id in std::mem::take(&mut report.repairable) {
                if self.stored_record(&id, &decoder)?.is_some() {
                    repairable.push(id);
                }
            }
            report.repairable = repairable;
            Ok(report)
        })
    }

    /// Episode `id`'s number and stored record, if the record decodes with `decoder`.
    fn stored_record(&self, id: &Hash, decoder: &Decoder) -> Result<Option<(u64, EpisodeRecord)>> {
        let Some(number) = self.number(id)? else { return Ok(None) };
        let value = table!(self.txn, EPISODE_DATA).get(number).map_err(Error::redb)?;
        Ok(value.and_then(|v| decoder.record(v.value()).ok()).map(|record| (number, record)))
    }

    /// Dictionaries: each against its checksum. Returns a decoder with the intact ones,
    /// so a value naming a damaged one is reported with its episode.
    fn verify_dictionaries(&self, report: &mut VerifyReport) -> Result<Decoder> {
        let sums = self.sums()?;
        let mut dictionaries = Dictionaries::default();
        let copies = self.txn.open_table(DICTIONARY_COPIES).ok();
        for entry in table!(self.txn, DICTIONARIES).iter().map_err(Error::redb)? {
            let (number, raw) = entry.map_err(Error::redb)?;
            let number = number.value();
            let what = || format!("compression dictionary {number}");
            let copy = self.dictionary_copy(&sums, number)?;
            match (sum_problem(&sums, SUM_DICTIONARY, u64::from(number), raw.value(), what), copy) {
                (None, copy) => {
                    dictionaries.insert(number, raw.value());
                    // The copy too: a damaged (or, in a store that has copies, missing)
                    // one is restored from the intact original.
                    let has_copy = copies.as_ref().is_some_and(|t| t.get(number).ok().flatten().is_some());
                    if copy.is_none() && has_copy {
                        report.problems.push(format!(
                            "compression dictionary {number}: its second copy is damaged (`epistore verify --repair` \
                             writes it again from the intact one)"
                        ));
                        report.dictionaries_to_restore.push(number);
                    }
                }
                (Some(p), Some(copy)) => {
                    report.problems.push(format!(
                        "{p}; its second copy is intact and reads in its place (`epistore verify --repair` writes it \
                         back)"
                    ));
                    report.dictionaries_to_restore.push(number);
                    dictionaries.insert(number, &copy);
                }
                (Some(p), None) => report.problems.push(format!(
                    "{p}; there is no intact copy, so the episodes packed with it cannot be read, and \
                     `--repair` cannot restore it"
                )),
            }
        }
        Ok(Decoder(std::sync::Arc::new(dictionaries)))
    }

    /// Blobs: each in exactly one index entry, decodable, hashing to its key.
    fn verify_blobs(&self, report: &mut VerifyReport) -> Result<HashSet<Hash>> {
        let mut blob_numbers = self.by_number(BLOB_INDEX, "blobs", &mut report.problems)?;
        let mut intact = HashSet::new();
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
                    if *blake3::hash(&bytes).as_bytes() == key {
                        intact.insert(key);
                    } else {
                        report.problems.push(format!("blob {} does not hash to its key", hex(&key)));
                    }
                }
                Err(e) => report.problems.push(format!("blob {}: {e}", hex(&key))),
            }
        }
        for (number, key) in blob_numbers {
            report.problems.push(format!("blob {} points at number {number}, which holds nothing", hex(&key)));
        }
        Ok(intact)
    }

    /// The ingest log: numbered 1, 2, 3, ... without gaps, each entry intact. Returns
    /// the batch that added each episode.
    fn verify_log(&self, report: &mut VerifyReport) -> Result<HashMap<Hash, u64>> {
        let sums = self.sums()?;
        let mut logged = HashMap::new();
        for entry in table!(self.txn, INGEST_LOG).iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            let seq = key.value();
            report.batches += 1;
            // Readers rely on the sequence numbers running 1, 2, 3, ... (`ingest_batch`).
            if seq != report.batches {
                report.problems.push(format!("ingest batch {seq} where {} was due: the log has a gap", report.batches));
            }
            if let Some(p) = sum_problem(&sums, SUM_LOG, seq, value.value(), || format!("ingest batch {seq}")) {
                report.problems.push(p);
            }
            let batch: IngestBatch = match codec::decode(value.value()) {
                Ok(b) => b,
                Err(e) => {
                    report.problems.push(format!("ingest batch {seq}: {e}"));
                    continue;
                }
            };
            if batch.seq != seq {
                report.problems.push(format!("ingest batch {seq} records sequence {}", batch.seq));
            }
            for id in batch.episodes {
                if let Some(first) = logged.insert(id, seq) {
                    report.problems.push(format!("episode {} is in ingest batches {first} and {seq}", hex(&id)));
                }
            }
        }
        Ok(logged)
    }

    /// Every episode: its record against its checksum and id, its files against the
    /// blob index and its own file record, its trace record, its cell entry and its
    /// ingest batch; and every episode whose files are intact derived again, so that its
    /// record and traces are what the episode's files derive. One method per phase over
    /// a shared [`EpisodeScan`].
    fn verify_episodes(
        &self,
        report: &mut VerifyReport,
        decoder: &Decoder,
        blob_ids: &HashSet<Hash>,
        logged: &HashMap<Hash, u64>,
    ) -> Result<()> {
        let sums = self.sums()?;
        let mut scan = EpisodeScan {
            numbers: self.by_number(EPISODE_INDEX, "episodes", &mut report.problems)?,
            ..EpisodeScan::default()
        };
        self.scan_file_records(&sums, &mut scan, report)?;
        self.scan_trace_records(&sums, &mut scan, report)?;
        self.scan_episode_records(&sums, decoder, blob_ids, &mut scan, report)?;
        self.rederive_all(decoder, logged, &mut scan, report)?;
        self.scan_cells(&mut scan, report)?;
        for id in &scan.ids {
            if !logged.contains_key(id) {
                report.problems.push(format!("episode {} is in no ingest batch", hex(id)));
            }
        }
        for id in logged.keys().filter(|id| !scan.ids.contains(*id)) {
            report.problems.push(format!("an ingest batch names missing episode {}", hex(id)));
        }
        Ok(())
    }

    /// Own-file records whose checksum holds (their contents are checked, file by
    /// file, when the episode is derived again).
    fn scan_file_records(&self, sums: &Sums, scan: &mut EpisodeScan, report: &mut VerifyReport) -> Result<()> {
        for entry in table!(self.txn, FILE_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            match sum_problem(sums, SUM_FILES, number, value.value(), || format!("file record {number}")) {
                Some(p) => report.problems.push(p),
                None => {
                    scan.filed.insert(number);
                }
            }
        }
        scan.unclaimed_files = scan.filed.clone();
        Ok(())
    }

    /// Trace records: each against its checksum, and naming the episode the index puts
    /// at its number.
    fn scan_trace_records(&self, sums: &Sums, scan: &mut EpisodeScan, report: &mut VerifyReport) -> Result<()> {
        for entry in table!(self.txn, TRACE_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            scan.traced.insert(number);
            if let Some(p) = sum_problem(sums, SUM_TRACES, number, value.value(), || format!("trace record {number}")) {
                report.problems.push(p);
                scan.bad_trace_sums.insert(number);
            }
            match split_trace_value(value.value()) {
                Err(e) => report.problems.push(format!("trace record {number}: {e}")),
                Ok((id, _)) if scan.numbers.get(&number) != Some(&id) => report.problems.push(format!(
                    "trace record {number} names episode {}, which the index does not put there",
                    hex(&id)
                )),
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// Episode records: each in the index, with a trace record, decoding, naming its
    /// id, its listing hashing to it and its files stored; then what no record claims.
    fn scan_episode_records(
        &self,
        sums: &Sums,
        decoder: &Decoder,
        blob_ids: &HashSet<Hash>,
        scan: &mut EpisodeScan,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let indexed = table!(self.txn, EPISODE_INDEX).len().map_err(Error::redb)?;
        for entry in table!(self.txn, EPISODE_DATA).iter().map_err(Error::redb)? {
            let (number, value) = entry.map_err(Error::redb)?;
            let number = number.value();
            report.episodes += 1;
            let Some(key) = scan.numbers.remove(&number) else {
                report.problems.push(format!("episode record {number} is in no index entry"));
                continue;
            };
            scan.ids.insert(key);
            scan.unclaimed_files.remove(&number);
            let name = hex(&key);
            if !scan.traced.remove(&number) {
                report.problems.push(format!("episode {name}: no trace record"));
            }
            let record_sum = sum_problem(sums, SUM_RECORD, number, value.value(), || format!("episode {name}: record"));
            let record = match decoder.record(value.value()) {
                Ok(r) => r,
                Err(e) => {
                    report.problems.extend(record_sum);
                    report.problems.push(format!("episode {name}: {e}"));
                    continue;
                }
            };
            if record.id != key {
                report.problems.push(format!("episode {name}: record names id {}", hex(&record.id)));
                continue;
            }
            if episode_id(record.files.iter().map(|f| (f.path.as_str(), &f.hash))) != key {
                report.problems.push(format!("episode {name}: file listing does not hash to the id"));
                continue;
            }
            let mut files_intact = true;
            for file in &record.files {
                if shared_file(&file.path, file.size) && !blob_ids.contains(&file.hash) {
                    report.problems.push(format!("episode {name}: file {} has no intact blob", file.path));
                    files_intact = false;
                }
            }
            if !scan.filed.contains(&number) {
                report.problems.push(format!("episode {name}: no intact file record"));
                files_intact = false;
            }
            if let Some(p) = record_sum {
                report.problems.push(p);
                if files_intact {
                    report.repairable.push(key);
                }
            }
            scan.cells_expected.insert(CellEntry::of(&record, number));
            if files_intact {
                scan.to_rederive.push((number, record));
            }
        }
        if indexed != report.episodes {
            report
                .problems
                .push(format!("the episode index counts {indexed} episodes; {} records are stored", report.episodes));
        }
        for (number, key) in std::mem::take(&mut scan.numbers) {
            report.problems.push(format!("episode {} points at number {number}, which holds no record", hex(&key)));
        }
        for number in std::mem::take(&mut scan.traced) {
            report.problems.push(format!("trace record {number} belongs to no episode record"));
        }
        for number in std::mem::take(&mut scan.unclaimed_files) {
            report.problems.push(format!("file record {number} belongs to no episode record"));
        }
        Ok(())
    }

    /// Derives every episode with intact files again, and puts the cell entries this
    /// build derives in place of the stored ones (a damaged manifest field must show as
    /// a wrong cell entry too).
    fn rederive_all(
        &self,
        decoder: &Decoder,
        logged: &HashMap<Hash, u64>,
        scan: &mut EpisodeScan,
        report: &mut VerifyReport,
    ) -> Result<()> {
        let to_rederive = std::mem::take(&mut scan.to_rederive);
        for chunk in to_rederive.chunks(REDERIVE_CHUNK) {
            for (number, stored, fresh) in self.rederive_chunk(chunk, logged)? {
                let name = hex(&stored.id);
                let fresh = match fresh {
                    Ok(fresh) => fresh,
                    Err(Unread::Files(problem)) => {
                        report.problems.push(format!("episode {name}: its files: {problem}"));
                        continue;
                    }
                    Err(Unread::Parse(problem)) => {
                        report.rederived += 1;
                        report.problems.push(format!("episode {name}: its files no longer parse: {problem}"));
                        continue;
                    }
                };
                report.rederived += 1;
                let damaged = self.compare_stored(decoder, number, &stored, &fresh)?;
                let (old, new) = (CellEntry::of(&stored, number), CellEntry::of(&fresh.record, number));
                if old != new {
                    scan.cells_expected.remove(&old);
                    scan.cells_expected.insert(new);
                }
                damaged.iter().for_each(|p| report.problems.push(format!("episode {name}: {p}")));
                if !damaged.is_empty() || scan.bad_trace_sums.contains(&number) {
                    report.repairable.push(stored.id);
                }
            }
        }
        Ok(())
    }

    /// The cell index holds exactly the entries the episodes derive.
    fn scan_cells(&self, scan: &mut EpisodeScan, report: &mut VerifyReport) -> Result<()> {
        for entry in table!(self.txn, CELLS).iter().map_err(Error::redb)? {
            let (key, value) = entry.map_err(Error::redb)?;
            let (m, l, t, id) = key.value();
            report.cells += 1;
            let found = CellEntry { model: m.into(), level: l.into(), task: t.into(), id, number: value.value() };
            if !scan.cells_expected.remove(&found) {
                report.problems.push(format!("cell index entry ({m}, {l}, {t}, {}) names no such episode", hex(&id)));
                if scan.ids.contains(&id) {
                    report.repairable.push(id);
                }
            }
        }
        for c in std::mem::take(&mut scan.cells_expected) {
            report.problems.push(format!(
                "episode {} is missing from the cell index ({}, {}, {})",
                hex(&c.id),
                c.model,
                c.level,
                c.task
            ));
            report.repairable.push(c.id);
        }
        Ok(())
    }

    /// Derives a chunk of episodes again: their files are read under the snapshot in
    /// order, then parsed in parallel.
    #[allow(clippy::type_complexity)]
    fn rederive_chunk(
        &self,
        chunk: &[(u64, EpisodeRecord)],
        logged: &HashMap<Hash, u64>,
    ) -> Result<Vec<(u64, EpisodeRecord, std::result::Result<Rederived, Unread>)>> {
        let mut packages = Vec::with_capacity(chunk.len());
        for (number, stored) in chunk {
            // Damaged files (an own-file record that no longer decompresses, or a file
            // that no longer hashes to the listing) are that episode's problem.
            let read = self.own_files(*number).and_then(|own| split_files(&stored.files, &own, |f| self.blob(&f.hash)));
            let raw = read.map(|bytes| {
                let files: BTreeMap<String, Vec<u8>> = stored.files.iter().map(|f| f.path.clone()).zip(bytes).collect();
                RawPackage::new(stored.source.clone(), files)
            });
            packages.push((*number, stored.clone(), raw.map_err(|e| Unread::Files(e.to_string()))));
        }
        Ok(packages
            .into_par_iter()
            .map(|(number, stored, raw)| {
                let fresh = raw.and_then(|raw| rederive(&stored, &raw, logged).map_err(Unread::Parse));
                (number, stored, fresh)
            })
            .collect())
    }

    /// What differs between the stored values of an episode and those derived again.
    fn compare_stored(
        &self,
        decoder: &Decoder,
        number: u64,
        stored: &EpisodeRecord,
        fresh: &Rederived,
    ) -> Result<Vec<String>> {
        let mut differ = Vec::new();
        let r = &fresh.record;
        let fields = [
            ("ingest batch", stored.ingest_seq != r.ingest_seq),
            ("file listing", stored.files != r.files),
            ("manifest", stored.manifest != r.manifest),
            ("outcome", stored.outcome != r.outcome),
            ("derived state", stored.derived != r.derived),
            ("trace counts", stored.trace_counts != r.trace_counts),
        ];
        for (field, different) in fields {
            if different {
                differ.push(format!("the stored record's {field} differs from what its files derive"));
            }
        }
        let traces = table!(self.txn, TRACE_DATA).get(number).map_err(Error::redb)?;
        match traces.as_ref().map(|v| split_trace_value(v.value())) {
            Some(Ok((_, compressed))) => match decoder.plain(compressed) {
                Ok(plain) if plain == fresh.traces_plain => {}
                Ok(_) => differ.push("the stored traces differ from what its files derive".to_string()),
                Err(e) => differ.push(format!("the stored traces: {e}")),
            },
            Some(Err(e)) => differ.push(e.to_string()),
            None => {} // reported above as a missing trace record
        }
        Ok(differ)
    }
}

/// Derives an episode's record and traces from its files as ingest does, keeping what
/// the files cannot say: where it was read from, and (from the log) its batch.
fn rederive(
    stored: &EpisodeRecord,
    raw: &RawPackage,
    logged: &HashMap<Hash, u64>,
) -> std::result::Result<Rederived, String> {
    let episode: Episode = parse_package(raw).map_err(|p| p.to_string())?;
    let mut record = record_of(raw, &episode);
    record.ingest_seq = logged.get(&stored.id).copied().unwrap_or(stored.ingest_seq);
    let traces_plain = codec::encode(&episode);
    let traces = trace_value(&stored.id, &codec::encode_blob(&traces_plain));
    Ok(Rederived { record, traces, traces_plain })
}

/// A stored value's checksum problem, if it has one (see [`Snapshot::check_sum`]).
pub(crate) fn sum_problem(
    sums: &Sums,
    kind: u8,
    number: u64,
    value: &[u8],
    what: impl FnOnce() -> String,
) -> Option<String> {
    sums.check(kind, number, value, what).err().map(|e| e.to_string())
}

impl Store {
    /// Verifies, then writes again the derived values (record, traces, checksums, cell
    /// entry) of every episode whose files are intact but whose derived values are
    /// damaged, in one transaction. Ingested files are never rewritten.
    pub fn repair(&self) -> Result<RepairReport> {
        guarded(|| {
            let db = self.writer()?;
            let snapshot = self.snapshot()?;
            let found = snapshot.verify()?;
            let mut report = RepairReport::default();
            if !found.dictionaries_to_restore.is_empty() {
                // Both copies from the intact one, before anything is derived with them.
                let sums = snapshot.sums()?;
                let mut intact = Vec::new();
                for &number in &found.dictionaries_to_restore {
                    intact.extend(snapshot.intact_dictionary(&sums, number)?.map(|d| (number, d)));
                }
                drop(sums);
                drop(snapshot);
                let txn = crate::tables::begin_write(db)?;
                {
                    let mut primary = txn.open_table(DICTIONARIES).map_err(Error::redb)?;
                    let mut copies = txn.open_table(DICTIONARY_COPIES).map_err(Error::redb)?;
                    for (number, raw) in &intact {
                        primary.insert(*number, raw.as_slice()).map_err(Error::redb)?;
                        copies.insert(*number, raw.as_slice()).map_err(Error::redb)?;
                    }
                }
                txn.commit().map_err(Error::redb)?;
                report.dictionaries_restored = intact.iter().map(|(n, _)| *n).collect();
                return self.repair_episodes(db, report);
            }
            self.repair_episodes_found(db, snapshot, found, report)
        })
    }

    /// The episode half of [`Store::repair`], after a fresh verify.
    fn repair_episodes(&self, db: &redb::Database, report: RepairReport) -> Result<RepairReport> {
        let snapshot = self.snapshot()?;
        let found = snapshot.verify()?;
        self.repair_episodes_found(db, snapshot, found, report)
    }

    fn repair_episodes_found(
        &self,
        db: &redb::Database,
        snapshot: crate::Snapshot,
        found: VerifyReport,
        mut report: RepairReport,
    ) -> Result<RepairReport> {
        if found.repairable.is_empty() {
            report.remaining = found.problems;
            return Ok(report);
        }
        let logged = snapshot.verify_log(&mut VerifyReport::default())?;
        let mut fresh = Vec::new();
        // The intact dictionaries only: an episode packed with a lost one is skipped
        // (it stays among the problems), the others are repaired.
        let decoder = snapshot.verify_dictionaries(&mut VerifyReport::default())?;
        for id in &found.repairable {
            // A record that no longer decodes lost its file listing, which is
            // ingested, not derived: nothing to derive it again from.
            let Some((number, stored)) = snapshot.stored_record(id, &decoder)? else { continue };
            for (number, stored, derived) in snapshot.rederive_chunk(&[(number, stored)], &logged)? {
                if let Ok(derived) = derived {
                    fresh.push((number, stored, derived));
                }
            }
        }
        drop(snapshot);
        self.write_repairs(db, &fresh)?;
        report.repaired = fresh.iter().map(|(_, stored, _)| stored.id).collect();
        report.remaining = self.snapshot()?.verify()?.problems;
        Ok(report)
    }

    fn write_repairs(&self, db: &redb::Database, fresh: &[(u64, EpisodeRecord, Rederived)]) -> Result<()> {
        let txn = begin_write(db)?;
        {
            let mut records = txn.open_table(EPISODE_DATA).map_err(Error::redb)?;
            let mut traces = txn.open_table(TRACE_DATA).map_err(Error::redb)?;
            let mut sums = txn.open_table(CHECKSUMS).map_err(Error::redb)?;
            let mut cells = txn.open_table(CELLS).map_err(Error::redb)?;
            let repaired: HashSet<Hash> = fresh.iter().map(|(_, stored, _)| stored.id).collect();
            // Cell entries of a repaired episode go, then its derived one comes back.
            let stale: Vec<(String, String, String, Hash)> = cells
                .iter()
                .map_err(Error::redb)?
                .filter_map(|entry| entry.ok())
                .map(|(key, _)| {
                    let (m, l, t, id) = key.value();
                    (m.to_string(), l.to_string(), t.to_string(), id)
                })
                .filter(|(_, _, _, id)| repaired.contains(id))
                .collect();
            for (m, l, t, id) in &stale {
                cells.remove((m.as_str(), l.as_str(), t.as_str(), *id)).map_err(Error::redb)?;
            }
            for (number, _, derived) in fresh {
                let record = &derived.record;
                // Written packed without a dictionary: any packed value reads the same.
                let bytes = codec::encode_blob(&codec::encode(&record));
                records.insert(*number, bytes.as_slice()).map_err(Error::redb)?;
                traces.insert(*number, derived.traces.as_slice()).map_err(Error::redb)?;
                sums.insert((SUM_RECORD, *number), checksum(&bytes)).map_err(Error::redb)?;
                sums.insert((SUM_TRACES, *number), checksum(&derived.traces)).map_err(Error::redb)?;
                let m = &record.manifest;
                let key = (m.model.as_str(), m.harness_level.as_str(), m.task.as_str(), record.id);
                cells.insert(key, *number).map_err(Error::redb)?;
            }
        }
        txn.commit().map_err(Error::redb)
    }
}
