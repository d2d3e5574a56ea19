//! Columnar segments: every table of the store as Parquet files, derived from the
//! store and kept beside it, so a session reads only the columns and row groups a
//! query needs instead of decoding every episode.
//!
//! Layout: `<store>/columnar/<schema_dir()>/<first>-<last>/<table>.parquet`, one directory
//! per segment covering the ingest-log entries `first..=last`. Segments are immutable
//! and written whole: built in a temporary directory, then renamed into place. Rows are
//! sorted by (model, harness_level, task, episode_id), so the row-group statistics on the
//! cell keys let a filter on one model or cell skip the rest of the file.
//!
//! Each segment also stores the per-episode views ([`views::PER_EPISODE`]) computed
//! over its own episodes, `<view>.parquet` beside the tables, so the metric views only
//! roll up per-episode rows at query time. The directory name carries a fingerprint of
//! that SQL: segments written by other SQL are never read (they are rebuilt).
//!
//! The store stays the source of truth: a missing segment is rebuilt from it, a segment
//! newer than a session's snapshot is ignored by that session, and deleting the whole
//! `columnar/` directory loses nothing.
//!
//! Each segment ends with a manifest (`manifest.json`: every file's name, size,
//! modification time and blake3, and each Parquet file's footer blake3), written last,
//! before the directory is renamed into place. A session checks it before reading the
//! segment: sizes and Parquet footers always (a `count(*)` is answered from a footer
//! alone), and the hash of a file whose size or time changed; `verify` hashes every file. A segment that fails
//! (a file deleted, emptied, rewritten, or no manifest at all) is never read: it is
//! removed and built again from the store. The manifest lives with the segment, not in
//! the store, because segments are built by readers too, which cannot write the store;
//! what ties a segment to the store is checked by `verify` (its episode count against
//! the ingest log entries it covers).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::error::DataFusionError;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::SessionContext;
use epistore_package::{hex, Hash};
use epistore_store::{EpisodeRecord, IngestBatch, Snapshot, Store};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::tables::{Loaded, TableKind};
use crate::views;

/// Bumped with the SQL schema: segments of another schema are never read.
const SCHEMA_GENERATION: &str = "epistore-sql-4";

/// The directory of this build's segments: the schema generation and a fingerprint of
/// the per-episode SQL stored in them (a changed query file means other rows).
pub fn schema_dir() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let mut hasher = blake3::Hasher::new();
        for name in views::PER_EPISODE {
            hasher
                .update(name.as_bytes())
                .update(b"\0")
                .update(views::sql_of(name).expect("shipped").as_bytes())
                .update(b"\0");
        }
        format!("{SCHEMA_GENERATION}-{}", &hasher.finalize().to_hex()[..12])
    })
}
/// At most about this many episodes per segment: a segment is built in memory.
const SEGMENT_EPISODES: usize = 8_192;
/// ... and at most about this many package bytes pending while importing: episodes
/// that carry their run's content (50 KB trajectories) would otherwise hold gigabytes
/// of decoded episodes before a segment is written.
const SEGMENT_PENDING_BYTES: u64 = 128 << 20;
/// Episodes decoded and turned into Arrow at a time while building a segment.
const BUILD_CHUNK: usize = 2_048;
const ROW_GROUP_ROWS: usize = 65_536;

/// The file, in each segment directory, that lists the segment's files.
pub const MANIFEST_FILE: &str = "manifest.json";
const MANIFEST_FORMAT: &str = "epistore-segment/1";

/// A segment on disk: ingest-log entries `first..=last`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub first: u64,
    pub last: u64,
    pub dir: PathBuf,
}

impl Segment {
    /// The file of a base table or of a stored per-episode view.
    pub fn table_file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.parquet"))
    }
}

pub fn columnar_dir(store: &Store) -> PathBuf {
    store.dir().join("columnar").join(schema_dir())
}

fn segment_name(first: u64, last: u64) -> String {
    format!("{first:012}-{last:012}")
}

/// Removes segment directories left half-built by a process that no longer runs
/// (`.<name>.<pid>.tmp`). Only where /proc tells which processes run.
fn remove_abandoned(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_suffix(".tmp").and_then(|n| n.rsplit('.').next()) else {
            continue;
        };
        if name.starts_with('.') && pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn existing_segments(dir: &Path) -> Vec<Segment> {
    remove_abandoned(dir);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Segment> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (a, b) = name.split_once('-')?;
            Some(Segment { first: a.parse().ok()?, last: b.parse().ok()?, dir: e.path() })
        })
        .collect();
    out.sort_by_key(|s| (s.first, std::cmp::Reverse(s.last)));
    out
}

/// Progress while segments are built: (episodes done, episodes to build).
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The segments covering the snapshot's ingest log, building the missing ones from the
/// store. Returns them in log order.
pub fn segments_for(store: &Store, snapshot: &Snapshot, progress: Progress) -> Result<Vec<Segment>> {
    let dir = columnar_dir(store);
    let last_seq = snapshot.ingest_seq()?;
    if last_seq == 0 {
        return Ok(Vec::new());
    }
    let existing = existing_segments(&dir);

    // Walk the log's sequence numbers (1..=last_seq, no gaps), taking an existing segment
    // where one starts at the next number and ends within the snapshot, and collecting
    // runs of entries that no segment covers. Only those entries are read from the store:
    // reading the whole log (every episode id ever ingested) made each ingest and each
    // session open cost time in proportion to the store's size.
    let mut chosen = Vec::new();
    let mut missing: Vec<Vec<IngestBatch>> = Vec::new();
    let mut seq = 1;
    while seq <= last_seq {
        let usable = existing.iter().find(|s| s.first == seq && s.last >= seq && s.last <= last_seq);
        if let Some(seg) = usable.filter(|seg| discard_if_damaged(seg)) {
            chosen.push(Ok(seg.clone()));
            seq = seg.last + 1;
            continue;
        }
        let batch = snapshot.ingest_batch(seq)?.ok_or_else(|| {
            Error::Store(epistore_store::Error::Corrupt(format!("ingest log entry {seq} of {last_seq} is missing")))
        })?;
        // Start a new run, or extend the current one while it stays small enough.
        let extend = matches!(chosen.last(), Some(Err(_)))
            && missing.last().is_some_and(|run| {
                run.iter().map(|b| b.episodes.len()).sum::<usize>() + batch.episodes.len() <= SEGMENT_EPISODES
            });
        if extend {
            missing.last_mut().expect("run").push(batch);
        } else {
            missing.push(vec![batch]);
            chosen.push(Err(missing.len() - 1));
        }
        seq += 1;
    }

    let total: u64 = missing.iter().flatten().map(|b| b.episodes.len() as u64).sum();
    let mut done = 0u64;
    let mut out = Vec::with_capacity(chosen.len());
    for slot in chosen {
        match slot {
            Ok(seg) => out.push(seg),
            Err(run) => {
                let batches = &missing[run];
                let seg = build_segment(snapshot, &dir, batches, &|n| progress(done + n, total))?;
                done += batches.iter().map(|b| b.episodes.len() as u64).sum::<u64>();
                out.push(seg);
            }
        }
    }
    Ok(out)
}

/// Removes the segments of other builds (another schema generation, or other
/// per-episode view SQL) from `store_dir`: this build never reads them, and they are
/// derived data, so nothing is lost. Returns the directories removed.
pub fn remove_other_builds(store_dir: &Path) -> Result<Vec<PathBuf>> {
    let root = store_dir.join("columnar");
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(&root, e)),
    };
    let mut removed = vec![];
    for entry in entries {
        let path = entry.map_err(|e| io(&root, e))?.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != schema_dir()) {
            std::fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Store(epistore_store::Error::Io { path: path.to_path_buf(), source: e })
}

/// Writes one segment for the given consecutive log entries, decoding their episodes
/// from the snapshot.
fn build_segment(
    snapshot: &Snapshot,
    dir: &Path,
    batches: &[IngestBatch],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Segment> {
    let first = batches.first().expect("a run is never empty").seq;
    let last = batches.last().expect("a run is never empty").seq;
    // Bytes are read under the snapshot in order; decoding runs in parallel.
    let raw: Vec<(Hash, Vec<u8>, Vec<u8>)> = batches
        .iter()
        .flat_map(|b| b.episodes.iter())
        .map(|id| {
            let record = snapshot.record_bytes(id)?.ok_or_else(|| missing(id))?;
            let traces = snapshot.traces_bytes(id)?.ok_or_else(|| missing(id))?;
            Ok((*id, record, traces))
        })
        .collect::<Result<_>>()?;
    let decoder = snapshot.decoder()?;
    let items: Vec<(EpisodeRecord, Loaded)> = raw
        .par_iter()
        .map(|(id, record, traces)| {
            Ok((decoder.record(record)?, Loaded { id: hex(id), episode: decoder.traces(traces)? }))
        })
        .collect::<Result<_>>()?;
    write_segment(dir, first, last, items, progress)
}

/// Writes a segment for log entries `first..=last` from their episodes, in memory.
/// Rows are sorted by cell so row-group statistics prune by cell.
fn write_segment(
    dir: &Path,
    first: u64,
    last: u64,
    items: Vec<(EpisodeRecord, Loaded)>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Segment> {
    let name = segment_name(first, last);
    let target = dir.join(&name);
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    let episodes = items.len() as u64;
    // Nothing half-written stays behind: a failed build (a full disk) removes its files,
    // and reports the failure as one of writing, so a reader falls back to the store.
    let written = write_segment_files(&tmp, items, progress)
        .and_then(|()| write_manifest(&tmp, first, last, episodes))
        .map_err(|e| match e {
            Error::Store(_) => e,
            other => io(&tmp, std::io::Error::other(other.to_string())),
        });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // Another reader may have built the same segment meanwhile: theirs is as good.
    match std::fs::rename(&tmp, &target) {
        Ok(()) => {}
        Err(_) if target.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(io(&target, e));
        }
    }
    Ok(Segment { first, last, dir: target })
}

/// The Parquet files of one segment, into `tmp`.
fn write_segment_files(
    tmp: &Path,
    mut items: Vec<(EpisodeRecord, Loaded)>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<()> {
    items.sort_unstable_by(|(a, _), (b, _)| {
        (&a.manifest.model, &a.manifest.harness_level, &a.manifest.task, &a.id).cmp(&(
            &b.manifest.model,
            &b.manifest.harness_level,
            &b.manifest.task,
            &b.id,
        ))
    });
    let (records, loaded): (Vec<EpisodeRecord>, Vec<Loaded>) = items.into_iter().unzip();

    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("valid level")))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let mut writers = Vec::new();
    for kind in TableKind::ALL {
        let path = tmp.join(format!("{}.parquet", kind.name()));
        let file = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
        writers.push(ArrowWriter::try_new(file, kind.schema(), Some(properties.clone()))?);
    }
    // Per-episode views: written as each chunk's rows come (a chunk holds whole
    // episodes, so its rows are final); a writer opens with the first chunk's schema.
    let mut derived_writers: Vec<Option<ArrowWriter<std::fs::File>>> =
        views::PER_EPISODE.iter().map(|_| None).collect();
    // The segment's search index (messages, tool output, commands, diffs), beside its
    // tables and listed in the same manifest; first, so that the tables below can let
    // each chunk's episodes go as soon as their rows are built.
    crate::search::write_segment_index(tmp, &loaded)?;
    let mut written = 0u64;
    let mut loaded = loaded.into_iter();
    for records in records.chunks(BUILD_CHUNK) {
        let chunk: Vec<Loaded> = loaded.by_ref().take(records.len()).collect();
        let built: Vec<RecordBatch> = TableKind::ALL
            .par_iter()
            .map(|kind| if kind.needs_traces() { kind.build_traces(&chunk) } else { kind.build_records(records) })
            .collect::<Result<_>>()?;
        // The decoded episodes are not needed past their rows: dropped before the views
        // are derived, so an episode of millions of records is not held twice over (its
        // typed records beside its columns and views).
        drop(chunk);
        for (writer, batch) in writers.iter_mut().zip(&built) {
            if batch.num_rows() > 0 {
                writer.write(batch)?;
            }
        }
        let derived = derive_per_episode(&built)?;
        for ((slot, name), (schema, batches)) in derived_writers.iter_mut().zip(views::PER_EPISODE).zip(derived) {
            let writer = match slot {
                Some(writer) => writer,
                None => {
                    let path = tmp.join(format!("{name}.parquet"));
                    let file = std::fs::File::create(&path).map_err(|e| io(&path, e))?;
                    slot.insert(ArrowWriter::try_new(file, schema, Some(properties.clone()))?)
                }
            };
            for batch in batches.iter().filter(|b| b.num_rows() > 0) {
                writer.write(batch)?;
            }
        }
        written += records.len() as u64;
        progress(written);
    }
    for writer in writers.into_iter().chain(derived_writers.into_iter().flatten()) {
        writer.close()?;
    }
    Ok(())
}

/// A file as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ListedFile {
    name: String,
    bytes: u64,
    mtime_ns: u128,
    blake3: String,
    /// A Parquet file's footer (its schema, row counts and statistics): hashed by
    /// every session, since a `count(*)` or a pruned scan is answered from the footer
    /// alone, so bit rot there that keeps the size and time would otherwise give a
    /// wrong answer until `verify` runs.
    footer_blake3: Option<String>,
}

/// The blake3 of a Parquet file's footer (the metadata and its length and magic at
/// the end), read without the rest of the file; `None` when the file has no Parquet
/// footer where one belongs.
fn footer_hash(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    if size < 12 {
        return Ok(None);
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8))?;
    file.read_exact(&mut tail)?;
    let len = u64::from(u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")));
    if &tail[4..] != b"PAR1" || len + 8 > size {
        return Ok(None);
    }
    let mut footer = vec![0u8; (len + 8) as usize];
    file.seek(SeekFrom::End(-((len + 8) as i64)))?;
    file.read_exact(&mut footer)?;
    Ok(Some(blake3::hash(&footer).to_hex().to_string()))
}

fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos())
}

fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// Lists every file of the segment in `dir` into its manifest, synced, so the rename
/// that follows publishes a segment whose manifest describes it.
fn write_manifest(dir: &Path, first: u64, last: u64, episodes: u64) -> Result<()> {
    let mut files = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet"))
        .collect();
    let index = dir.join(crate::search::INDEX_DIR);
    if index.is_dir() {
        let listed = epistore_search::index_files(&index).map_err(crate::search::search_error)?;
        names.extend(listed.into_iter().map(|f| format!("{}/{f}", crate::search::INDEX_DIR)));
    }
    names.sort();
    for name in names {
        let path = dir.join(&name);
        std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| io(&path, e))?;
        let meta = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
        let blake3 = hash_file(&path).map_err(|e| io(&path, e))?;
        let mut listed = serde_json::json!({"name": name, "bytes": meta.len(), "mtime_ns": mtime_ns(&meta).to_string(), "blake3": blake3});
        if name.ends_with(".parquet") {
            let footer = footer_hash(&path).map_err(|e| io(&path, e))?;
            listed["footer_blake3"] = serde_json::json!(footer);
        }
        files.push(listed);
    }
    let manifest = serde_json::json!({
        "format": MANIFEST_FORMAT, "first": first, "last": last, "episodes": episodes, "files": files,
    });
    let path = dir.join(MANIFEST_FILE);
    let text = serde_json::to_vec_pretty(&manifest).expect("a JSON value serialises");
    std::fs::write(&path, text).map_err(|e| io(&path, e))?;
    std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(|e| io(&path, e))
}

/// A segment's manifest: (episodes, files), or why it cannot be read.
fn read_manifest(seg: &Segment) -> std::result::Result<(u64, Vec<ListedFile>), String> {
    let path = seg.dir.join(MANIFEST_FILE);
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let field = |name: &str| value.get(name).ok_or_else(|| format!("{}: no `{name}`", path.display()));
    if field("format")?.as_str() != Some(MANIFEST_FORMAT) {
        return Err(format!("{}: not an `{MANIFEST_FORMAT}` manifest", path.display()));
    }
    if field("first")?.as_u64() != Some(seg.first) || field("last")?.as_u64() != Some(seg.last) {
        return Err(format!("{}: describes another segment", path.display()));
    }
    let episodes =
        field("episodes")?.as_u64().ok_or_else(|| format!("{}: `episodes` is not a count", path.display()))?;
    let mut files = Vec::new();
    for (i, file) in field("files")?.as_array().into_iter().flatten().enumerate() {
        let listed = (|| {
            Some(ListedFile {
                name: file.get("name")?.as_str()?.to_string(),
                bytes: file.get("bytes")?.as_u64()?,
                mtime_ns: file.get("mtime_ns")?.as_str()?.parse().ok()?,
                blake3: file.get("blake3")?.as_str()?.to_string(),
                footer_blake3: file.get("footer_blake3").and_then(|v| v.as_str()).map(str::to_string),
            })
        })()
        .ok_or_else(|| format!("{}: files[{i}] is malformed", path.display()))?;
        // A table file, or a file of the search index one level down (`search/NAME`;
        // tantivy's own bookkeeping files start with a dot).
        let inside = match listed.name.strip_prefix(&format!("{}/", crate::search::INDEX_DIR)) {
            Some(rest) => !rest.is_empty() && rest != "." && rest != ".." && !rest.contains(['/', '\\']),
            None => !listed.name.contains(['/', '\\']) && !listed.name.starts_with('.'),
        };
        if !inside {
            return Err(format!("{}: files[{i}] names `{}`, outside the segment", path.display(), listed.name));
        }
        files.push(listed);
    }
    Ok((episodes, files))
}

/// How closely a segment is checked against its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Sizes always; the hash of a file whose size or modification time changed.
    Quick,
    /// Every file hashed (`verify`).
    Full,
}

/// What is wrong with a segment, if anything: a file missing, of another size, or
/// with other bytes than its manifest lists; a table file the manifest omits.
pub fn segment_problem(seg: &Segment, check: Check) -> Option<String> {
    let (_, files) = match read_manifest(seg) {
        Ok(m) => m,
        Err(e) => return Some(e),
    };
    let expected = TableKind::ALL.iter().map(|k| k.name()).chain(views::PER_EPISODE.iter().copied());
    for name in expected {
        if !files.iter().any(|f| f.name == format!("{name}.parquet")) {
            return Some(format!("{}: the manifest lists no `{name}.parquet`", seg.dir.display()));
        }
    }
    let index_meta = format!("{}/meta.json", crate::search::INDEX_DIR);
    if !files.iter().any(|f| f.name == index_meta) {
        return Some(format!("{}: the manifest lists no search index (`{index_meta}`)", seg.dir.display()));
    }
    for file in &files {
        let path = seg.dir.join(&file.name);
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) => return Some(format!("{}: {e}", path.display())),
        };
        if meta.len() != file.bytes {
            return Some(format!("{}: {} bytes where the manifest lists {}", path.display(), meta.len(), file.bytes));
        }
        if check == Check::Full || mtime_ns(&meta) != file.mtime_ns {
            match hash_file(&path) {
                Ok(hash) if hash == file.blake3 => {}
                Ok(_) => return Some(format!("{}: its bytes are not those the manifest lists", path.display())),
                Err(e) => return Some(format!("{}: {e}", path.display())),
            }
        } else if let Some(listed) = &file.footer_blake3 {
            match footer_hash(&path) {
                Ok(Some(hash)) if hash == *listed => {}
                Ok(_) => return Some(format!("{}: its footer is not the one the manifest lists", path.display())),
                Err(e) => return Some(format!("{}: {e}", path.display())),
            }
        }
    }
    None
}

/// Whether a segment may be read: it passes [`Check::Quick`]. One that does not is
/// moved out of the way (and deleted) so it is built again; it is derived data.
fn discard_if_damaged(seg: &Segment) -> bool {
    if segment_problem(seg, Check::Quick).is_none() {
        return true;
    }
    discard(seg);
    false
}

fn discard(seg: &Segment) {
    let Some(parent) = seg.dir.parent() else { return };
    let name = seg.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // Renamed first, so no other session picks it up while it is deleted; the name is
    // one `remove_abandoned` clears if this process dies before the delete.
    let aside = parent.join(format!(".{name}-damaged.{}.tmp", std::process::id()));
    if std::fs::rename(&seg.dir, &aside).is_ok() {
        let _ = std::fs::remove_dir_all(&aside);
    }
}

/// `verify` for the columnar segments: every segment of this build hashed against its
/// manifest and its episode count compared with the ingest log entries it covers.
/// Returns the problems; with `repair`, damaged segments are removed (and rebuilt by
/// the next session, or by [`refresh`]).
pub fn verify_segments(store: &Store, snapshot: &Snapshot, repair: bool) -> Result<(usize, Vec<String>)> {
    let dir = columnar_dir(store);
    let last_seq = snapshot.ingest_seq()?;
    let segments = existing_segments(&dir);
    let mut problems = Vec::new();
    for seg in &segments {
        if seg.last > last_seq {
            continue; // newer than this snapshot: a writer is adding it
        }
        let mut problem = segment_problem(seg, Check::Full);
        if problem.is_none() {
            problem = epistore_search::check_index(&seg.dir.join(crate::search::INDEX_DIR), None);
        }
        if problem.is_none() {
            let (episodes, _) = read_manifest(seg).map_err(|e| io(&seg.dir, std::io::Error::other(e)))?;
            let mut logged = 0u64;
            for seq in seg.first..=seg.last {
                logged += snapshot.ingest_batch(seq)?.map_or(0, |b| b.episodes.len() as u64);
            }
            if logged != episodes {
                problem = Some(format!(
                    "{}: holds {episodes} episodes; the ingest log entries it covers add {logged}",
                    seg.dir.display()
                ));
            }
        }
        if let Some(p) = problem {
            problems.push(format!("segment {}-{}: {p}", seg.first, seg.last));
            if repair {
                discard(seg);
            }
        }
    }
    Ok((segments.len(), problems))
}

/// The [`views::PER_EPISODE`] views over one chunk's base tables (given in
/// `TableKind::ALL` order): per view, the schema of its plan and its rows.
///
/// Runs the shipped SQL in a private session on a thread of its own with a
/// single-threaded runtime: callers may be inside an async runtime (a session building
/// missing segments) or not (an ingest), and a chunk is small enough for one core.
fn derive_per_episode(base: &[RecordBatch]) -> Result<Vec<(SchemaRef, Vec<RecordBatch>)>> {
    let run = || -> Result<Vec<(SchemaRef, Vec<RecordBatch>)>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| Error::DataFusion(DataFusionError::External(Box::new(e))))?;
        runtime.block_on(async {
            let ctx = SessionContext::new_with_config(crate::session_config().with_target_partitions(1));
            crate::checked(&ctx);
            ctx.register_udf(views::location_overlaps());
            for (kind, batch) in TableKind::ALL.iter().zip(base) {
                ctx.register_batch(kind.name(), batch.clone())?;
            }
            let mut out = Vec::with_capacity(views::PER_EPISODE.len());
            for name in views::PER_EPISODE {
                let sql = views::sql_of(name).expect("shipped");
                let plan = ctx
                    .sql(sql)
                    .await
                    .map_err(|e| e.context(format!("computing the view `{name}` for a segment")))?
                    .create_physical_plan()
                    .await?;
                let schema = plan.schema();
                let batches = datafusion::physical_plan::collect(plan, ctx.task_ctx()).await?;
                // Later views may read this one (verifier_judgements reads oracle_verdicts).
                ctx.register_table(*name, Arc::new(MemTable::try_new(schema.clone(), vec![batches.clone()])?))?;
                out.push((schema, batches));
            }
            Ok(out)
        })
    };
    std::thread::scope(|scope| scope.spawn(run).join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
}

/// What [`ingest`] did: the store's report, the seconds spent building segments, and
/// why segments were not built, when they were not.
pub struct SegmentedIngest {
    pub report: epistore_store::IngestReport,
    pub columnar_seconds: f64,
    pub segment_error: Option<String>,
}

/// Ingests `units` into `store` (as [`Store::ingest_from`]) and builds the columnar
/// segments of what it adds from each commit's episodes as they come, so nothing is
/// decoded twice: the ingest for every caller that wants SQL over what it added (the
/// command line, the Python package). Segments are derived data: when building them
/// fails the ingest goes on, `segment_error` says why, and queries build what is missing.
pub fn ingest<U: Sync>(
    store: &Store,
    units: &[U],
    read: impl Fn(&U, &mut epistore_package::Reservation) -> Vec<epistore_store::PackageRead> + Sync + Send,
    options: &epistore_store::IngestOptions,
    progress: impl FnMut(epistore_store::IngestProgress),
) -> Result<SegmentedIngest> {
    let mut segments = Some(IngestSegments::new(store));
    let mut segment_error = None;
    let mut columnar_time = std::time::Duration::ZERO;
    let report = store.ingest_from(units, read, options, progress, |seq, episodes| {
        let started = std::time::Instant::now();
        if let Some(builder) = segments.as_mut() {
            if let Err(e) = builder.push(seq, episodes) {
                segment_error = Some(e.to_string());
                segments = None;
            }
        }
        columnar_time += started.elapsed();
        Ok(())
    })?;
    let finishing = std::time::Instant::now();
    if let Some(builder) = segments {
        if let Err(e) = builder.finish() {
            segment_error = Some(e.to_string());
        }
    }
    if report.added() > 0 && segment_error.is_none() {
        // Anything not covered yet (an older store, an earlier failure) is built now.
        if let Err(e) = refresh(store, &|_, _| {}) {
            segment_error = Some(e.to_string());
        }
    }
    let columnar_seconds = (columnar_time + finishing.elapsed()).as_secs_f64();
    Ok(SegmentedIngest { report, columnar_seconds, segment_error })
}

/// Builds segments during an ingest from the episodes each commit hands over, so they
/// are never decoded again: feed it every committed batch, then call `finish`.
pub struct IngestSegments {
    dir: PathBuf,
    first: Option<u64>,
    last: u64,
    pending: Vec<(EpisodeRecord, Loaded)>,
    pending_bytes: u64,
}

impl IngestSegments {
    pub fn new(store: &Store) -> IngestSegments {
        IngestSegments { dir: columnar_dir(store), first: None, last: 0, pending: Vec::new(), pending_bytes: 0 }
    }

    /// One committed batch: its log sequence and the episodes it added.
    pub fn push(&mut self, seq: u64, episodes: Vec<(EpisodeRecord, epistore_package::Episode)>) -> Result<()> {
        self.first.get_or_insert(seq);
        self.last = seq;
        self.pending_bytes += episodes.iter().map(|(r, _)| r.package_bytes()).sum::<u64>();
        self.pending.extend(episodes.into_iter().map(|(r, e)| {
            let id = hex(&r.id);
            (r, Loaded { id, episode: e })
        }));
        if self.pending.len() >= SEGMENT_EPISODES || self.pending_bytes >= SEGMENT_PENDING_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.pending_bytes = 0;
        if let Some(first) = self.first.take() {
            write_segment(&self.dir, first, self.last, std::mem::take(&mut self.pending), &|_| {})?;
        }
        Ok(())
    }

    /// Writes what is still pending.
    pub fn finish(mut self) -> Result<()> {
        self.flush()
    }
}

fn missing(id: &Hash) -> Error {
    Error::Store(epistore_store::Error::Corrupt(format!("episode {} named by the ingest log is missing", hex(id))))
}

/// Builds whatever segments the current store lacks (run after an ingest, so the
/// next session starts warm).
pub fn refresh(store: &Store, progress: Progress) -> Result<usize> {
    let snapshot = store.snapshot()?;
    Ok(segments_for(store, &snapshot, progress)?.len())
}
