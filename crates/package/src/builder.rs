//! The one writer of the package format: every producer (importers, the synthetic
//! population) builds packages through [`PackageBuilder`], so the format is spelled in
//! one place and no invalid package can leave it ([`PackageBuilder::finish`] validates).
//!
//! Records are pushed in stream order and get their `seq` from the builder. JSON is
//! written deterministically: the same calls give the same bytes, so the same input
//! gives the same episode id.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::Problem;
use crate::model::{Episode, TraceKind, TRACE_FILES};
use crate::parse::{parse_package, MANIFEST_FILE, OUTCOME_FILE};
use crate::source::RawPackage;
use crate::Hash;

/// How `manifest.json` and `outcome.json` are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// Two-space indentation and a final newline.
    Pretty,
    /// One line and a final newline.
    Compact,
}

/// The byte layout of what the builder writes. Importers write sorted keys (the bytes
/// then depend only on the values); the synthetic population keeps its own insertion
/// order, which its episode ids (in goldens and baselines) were computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub sorted_keys: bool,
    pub documents: JsonStyle,
}

impl Layout {
    /// Sorted keys, pretty documents: what importers write.
    pub const SORTED: Layout = Layout { sorted_keys: true, documents: JsonStyle::Pretty };
    /// Keys in the order they were inserted.
    pub const AS_GIVEN: Layout = Layout { sorted_keys: false, documents: JsonStyle::Pretty };
}

/// A package that passed validation: its files (bytewise path order), its typed form
/// and its episode id. `episode` is what `parse_package(&raw)` gives (the store takes
/// it instead of parsing again), so change `raw.files` only through a new build;
/// `raw.name` is a label that no parse reads.
#[derive(Debug, Clone)]
pub struct BuiltPackage {
    pub raw: RawPackage,
    pub episode: Episode,
}

impl BuiltPackage {
    pub fn id(&self) -> &Hash {
        &self.raw.id
    }

    /// Writes the package as the directory `dir`, which must not exist: the files go
    /// into a sibling directory that is renamed into place, so `dir` is either the
    /// whole package or absent, never half-written.
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        let name = dir.file_name().ok_or_else(|| std::io::Error::other("the package directory needs a name"))?;
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)?;
        let staging = parent.join(format!(".{}.partial", name.to_string_lossy()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging)?;
        }
        let written = (|| {
            for f in &self.raw.files {
                let path = staging.join(&f.path);
                std::fs::create_dir_all(path.parent().expect("a file path has a parent"))?;
                std::fs::write(&path, &f.bytes)?;
            }
            std::fs::rename(&staging, dir)
        })();
        if written.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        written
    }
}

/// Builds one package. See the module documentation.
#[derive(Debug, Clone)]
pub struct PackageBuilder {
    name: String,
    layout: Layout,
    next_seq: u64,
    /// `None`: the trace is not recorded (no file); `Some(empty)`: recorded, none.
    traces: [Option<Vec<Map<String, Value>>>; TRACE_FILES.len()],
    /// A trace's file as [`derive`](Self::derive) wrote it, kept for `finish` until the
    /// trace changes (a run's traces are serialised once, not once per pass).
    written: [Option<Vec<u8>>; TRACE_FILES.len()],
    manifest: Option<Value>,
    outcome: Option<Value>,
    files: BTreeMap<String, Vec<u8>>,
}

fn slot(kind: TraceKind) -> usize {
    TRACE_FILES.iter().position(|(_, k)| *k == kind).expect("every kind has a file")
}

impl PackageBuilder {
    /// `name` is how problems name the package (a source file, an output directory).
    pub fn new(name: impl Into<String>, layout: Layout) -> PackageBuilder {
        PackageBuilder {
            name: name.into(),
            layout,
            next_seq: 0,
            traces: Default::default(),
            written: Default::default(),
            manifest: None,
            outcome: None,
            files: BTreeMap::new(),
        }
    }

    /// The `seq` the next pushed record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Leaves `n` sequence numbers unused (a recorder that knows it missed events).
    pub fn skip_seq(&mut self, n: u64) {
        self.next_seq += n;
    }

    /// Marks a trace as recorded, so its file is written even when no record is pushed
    /// ("recorded, none" rather than "not recorded").
    pub fn record_trace(&mut self, kind: TraceKind) {
        self.written[slot(kind)] = None;
        self.traces[slot(kind)].get_or_insert_with(Vec::new);
    }

    /// Marks a trace as not recorded again (no file), when it holds no record: a
    /// recorder that learns it cannot observe what the trace is about. `false` when it
    /// holds records (they stay).
    pub fn unrecord_trace(&mut self, kind: TraceKind) -> bool {
        self.written[slot(kind)] = None;
        let slot = &mut self.traces[slot(kind)];
        match slot {
            Some(records) if !records.is_empty() => false,
            _ => {
                *slot = None;
                true
            }
        }
    }

    /// Appends a record to a trace with the next `seq` (inserted as the first key), and
    /// returns that `seq`.
    pub fn push(&mut self, kind: TraceKind, fields: Map<String, Value>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut record = Map::with_capacity(fields.len() + 1);
        record.insert("seq".into(), Value::from(seq));
        record.extend(fields.into_iter().filter(|(k, _)| k != "seq"));
        self.written[slot(kind)] = None;
        self.traces[slot(kind)].get_or_insert_with(Vec::new).push(record);
        seq
    }

    /// Sets a field of an already pushed record (a failure's `recovered_by`, found later).
    /// Returns false when no record of that trace has the `seq`.
    pub fn set_field(&mut self, kind: TraceKind, seq: u64, field: &str, value: Value) -> bool {
        self.written[slot(kind)] = None;
        let records = self.traces[slot(kind)].iter_mut().flatten();
        match records.into_iter().find(|r| r.get("seq").and_then(Value::as_u64) == Some(seq)) {
            Some(record) => {
                record.insert(field.to_string(), value);
                true
            }
            None => false,
        }
    }

    /// Writes a trace's records in another order than they were pushed: line `k` of the
    /// file gets the record that was `order[k]`-th (records may appear in any order in a
    /// file, docs/format.md §5, as when a recorder flushes late). Every record keeps its `seq`, and
    /// later pushes still append. Returns false, changing nothing, unless `order` is a
    /// permutation of the trace's records.
    pub fn reorder(&mut self, kind: TraceKind, order: &[usize]) -> bool {
        self.written[slot(kind)] = None;
        let Some(records) = self.traces[slot(kind)].as_mut() else { return false };
        let mut seen = vec![false; records.len()];
        let permutation = order.len() == records.len()
            && order.iter().all(|&i| i < seen.len() && !std::mem::replace(&mut seen[i], true));
        if permutation {
            let mut taken: Vec<Option<Map<String, Value>>> = records.drain(..).map(Some).collect();
            records.extend(order.iter().map(|&i| taken[i].take().expect("a permutation takes each once")));
        }
        permutation
    }

    /// The records of a trace so far, in the order they will be written (`None` when it
    /// is not recorded).
    pub fn records(&self, kind: TraceKind) -> Option<&[Map<String, Value>]> {
        self.traces[slot(kind)].as_deref()
    }

    pub fn manifest(&mut self, manifest: Value) {
        self.manifest = Some(manifest);
    }

    pub fn outcome(&mut self, outcome: Value) {
        self.outcome = Some(outcome);
    }

    /// Adds any other file (patch, report, artifact). The manifest, outcome and trace
    /// files are the builder's own, and a path must be relative, `/`-separated and
    /// inside the package (docs/format.md §1).
    pub fn file(&mut self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Result<(), Box<Problem>> {
        let path = path.into();
        let reserved = path == MANIFEST_FILE || path == OUTCOME_FILE || TRACE_FILES.iter().any(|(f, _)| *f == path);
        if reserved {
            return Err(self.problem(&path, "written by the builder from its records, not as a file"));
        }
        if !relative_inside(&path) {
            return Err(self.problem(&path, "a package path must be relative, `/`-separated and without `..`"));
        }
        self.files.insert(path, bytes.into());
        Ok(())
    }

    fn problem(&self, file: &str, message: &str) -> Box<Problem> {
        Box::new(Problem { file: Some(file.to_string()), ..Problem::package(self.name.clone(), message) })
    }

    /// The state the store will derive (revisions, freshness, posture) from what has
    /// been given so far, validating the manifest, outcome and traces but not
    /// serialising or hashing the other files: for a producer whose outcome depends on
    /// it (an importer's label follows the posture). `finish` still validates all.
    pub fn derive(&mut self) -> Result<crate::model::Derived, Box<Problem>> {
        let manifest =
            self.manifest.as_ref().ok_or_else(|| Box::new(Problem::package(&self.name, "no manifest was given")))?;
        let outcome =
            self.outcome.as_ref().ok_or_else(|| Box::new(Problem::package(&self.name, "no outcome was given")))?;
        let mut files = BTreeMap::new();
        files.insert(MANIFEST_FILE.to_string(), document(manifest, self.layout));
        files.insert(OUTCOME_FILE.to_string(), document(outcome, self.layout));
        for (((path, kind), records), written) in TRACE_FILES.iter().zip(&self.traces).zip(&mut self.written) {
            // The conversation is most of a run's bytes and no part of its derived
            // state (revisions and posture come from actions and checks).
            if *kind == TraceKind::Messages {
                continue;
            }
            if let Some(records) = records {
                let bytes = written.get_or_insert_with(|| jsonl(records, self.layout));
                files.insert((*path).to_string(), bytes.clone());
            }
        }
        Ok(parse_package(&RawPackage::new(self.name.clone(), files))?.derived)
    }

    /// Serialises every file and validates the result as the store would: a package
    /// that breaks the contract is an error here, never a directory or a stored episode.
    pub fn finish(self) -> Result<BuiltPackage, Box<Problem>> {
        let mut files = self.files;
        let layout = self.layout;
        let manifest = self.manifest.ok_or_else(|| Box::new(Problem::package(&self.name, "no manifest was given")))?;
        let outcome = self.outcome.ok_or_else(|| Box::new(Problem::package(&self.name, "no outcome was given")))?;
        files.insert(MANIFEST_FILE.into(), document(&manifest, layout));
        files.insert(OUTCOME_FILE.into(), document(&outcome, layout));
        for (((path, _), records), written) in TRACE_FILES.iter().zip(self.traces).zip(self.written) {
            if let Some(records) = records {
                files.insert((*path).into(), written.unwrap_or_else(|| jsonl(&records, layout)));
            }
        }
        let raw = RawPackage::new(self.name, files);
        let episode = parse_package(&raw)?;
        Ok(BuiltPackage { raw, episode })
    }
}

fn relative_inside(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && !path.contains('\0')
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
}

/// A value with every object's keys in bytewise order, recursively.
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A value that serialises with every object's keys in bytewise order, recursively,
/// without copying it (the text of a run is most of its bytes: [`sorted`] would copy all
/// of it once per file written).
struct SortedRef<'a>(&'a Value);

impl serde::Serialize for SortedRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        match self.0 {
            Value::Object(map) => SortedMap(map).serialize(serializer),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&SortedRef(item))?;
                }
                seq.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// A map serialised with its keys in bytewise order (see [`SortedRef`]).
struct SortedMap<'a>(&'a Map<String, Value>);

impl serde::Serialize for SortedMap<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut keys: Vec<&String> = self.0.keys().collect();
        keys.sort_unstable();
        let mut map = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            map.serialize_entry(key, &SortedRef(&self.0[key]))?;
        }
        map.end()
    }
}

fn document(value: &Value, layout: Layout) -> Vec<u8> {
    let written = match (layout.sorted_keys, layout.documents) {
        (true, JsonStyle::Pretty) => serde_json::to_vec_pretty(&SortedRef(value)),
        (true, JsonStyle::Compact) => serde_json::to_vec(&SortedRef(value)),
        (false, JsonStyle::Pretty) => serde_json::to_vec_pretty(value),
        (false, JsonStyle::Compact) => serde_json::to_vec(value),
    };
    let mut out = written.expect("JSON values serialise");
    out.push(b'\n');
    out
}

fn jsonl(records: &[Map<String, Value>], layout: Layout) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        // A map writes exactly as the object value holding it.
        if layout.sorted_keys {
            serde_json::to_writer(&mut out, &SortedMap(record))
        } else {
            serde_json::to_writer(&mut out, record)
        }
        .expect("JSON values serialise");
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn minimal(layout: Layout) -> PackageBuilder {
        let mut b = PackageBuilder::new("test", layout);
        b.manifest(json!({"format": "episode-package/1.1", "episode": "e", "model": {"name": "m"},
                          "harness": {"level": "H0"}, "task": {"id": "t"}}));
        b.outcome(json!({"label": null}));
        b
    }

    #[test]
    fn records_get_seq_in_push_order_across_traces() {
        let mut b = minimal(Layout::SORTED);
        let t = b.push(TraceKind::Tools, obj(json!({"tool": "shell", "exit_code": 0})));
        let a = b.push(TraceKind::Actions, obj(json!({"kind": "run", "tool_seq": t})));
        let c = b.push(TraceKind::Verification, obj(json!({"check_id": "x", "actor": "agent", "result": "unknown"})));
        assert_eq!((t, a, c), (0, 1, 2));
        let built = b.finish().unwrap();
        assert_eq!(built.episode.checks.as_ref().unwrap()[0].common.seq, 2);
        assert_eq!(built.episode.outcome.label, None);
        assert_eq!(built.episode.derived.posture, "unknown");
    }

    #[test]
    fn sorted_layout_writes_keys_in_order_and_is_deterministic() {
        let build = || {
            let mut b = minimal(Layout::SORTED);
            b.push(TraceKind::Tools, obj(json!({"tool": "shell", "command": "ls"})));
            b.finish().unwrap()
        };
        let (one, two) = (build(), build());
        assert_eq!(one.raw.id, two.raw.id);
        let tools = std::str::from_utf8(one.raw.file("traces/tools.jsonl").unwrap()).unwrap();
        assert_eq!(tools, "{\"command\":\"ls\",\"seq\":0,\"tool\":\"shell\"}\n");
        let manifest = std::str::from_utf8(one.raw.file("manifest.json").unwrap()).unwrap();
        assert!(manifest.find("\"episode\"").unwrap() < manifest.find("\"format\"").unwrap());
    }

    #[test]
    fn as_given_layout_keeps_insertion_order() {
        let mut b = minimal(Layout::AS_GIVEN);
        b.push(TraceKind::Tools, obj(json!({"tool": "shell", "command": "ls"})));
        let built = b.finish().unwrap();
        let tools = std::str::from_utf8(built.raw.file("traces/tools.jsonl").unwrap()).unwrap();
        assert_eq!(tools, "{\"seq\":0,\"tool\":\"shell\",\"command\":\"ls\"}\n");
    }

    #[test]
    fn derive_gives_the_state_finish_gives() {
        let mut b = minimal(Layout::SORTED);
        b.push(TraceKind::Verification, obj(json!({"check_id": "t", "actor": "agent", "result": "pass"})));
        b.push(TraceKind::Actions, obj(json!({"kind": "edit"})));
        b.file("artifacts/big.log", vec![b'x'; 1 << 20]).unwrap();
        let mut m = b.manifest.clone().unwrap();
        m["format"] = json!("episode-package/1.2");
        b.manifest(m);
        b.push(TraceKind::Messages, obj(json!({"role": "assistant", "text": "done"})));
        let derived = b.derive().unwrap();
        assert_eq!((derived.final_revision, derived.posture.as_str()), (1, "stale"));
        assert_eq!(b.finish().unwrap().episode.derived, derived);
    }

    #[test]
    fn a_change_after_derive_is_in_what_finish_writes() {
        let mut b = minimal(Layout::SORTED);
        let seq = b.push(TraceKind::Verification, obj(json!({"check_id": "t", "actor": "agent", "result": "pass"})));
        assert_eq!(b.derive().unwrap().posture, "current");
        b.set_field(TraceKind::Verification, seq, "result", json!("fail"));
        let built = b.finish().unwrap();
        assert_eq!(built.episode.derived.posture, "failure");
        let checks = std::str::from_utf8(built.raw.file("traces/verification.jsonl").unwrap()).unwrap();
        assert!(checks.contains("\"result\":\"fail\""), "{checks}");
    }

    #[test]
    fn sorted_writing_is_sorted_copying() {
        let value = json!({"z": [{"b": 1, "a": {"y": null, "x": "q\"uote"}}], "a": 2.5, "m": {}, "é": true});
        let layout = Layout { sorted_keys: true, documents: JsonStyle::Compact };
        let written = document(&value, layout);
        assert_eq!(written, [serde_json::to_vec(&sorted(&value)).unwrap(), b"\n".to_vec()].concat());
        let pretty = document(&value, Layout::SORTED);
        assert_eq!(pretty, [serde_json::to_vec_pretty(&sorted(&value)).unwrap(), b"\n".to_vec()].concat());
        let record = obj(value.clone());
        assert_eq!(jsonl(&[record], Layout::SORTED), written);
    }

    #[test]
    fn a_trace_without_records_can_be_unrecorded_one_with_records_cannot() {
        let mut b = PackageBuilder::new("p", Layout::SORTED);
        b.record_trace(TraceKind::Tools);
        b.record_trace(TraceKind::Actions);
        b.push(TraceKind::Actions, Map::new());
        assert!(b.unrecord_trace(TraceKind::Tools));
        assert!(!b.unrecord_trace(TraceKind::Actions), "its record stays");
        assert!(!b.reorder(TraceKind::Tools, &[]), "not recorded again");
        assert!(b.reorder(TraceKind::Actions, &[0]));
    }

    #[test]
    fn recorded_empty_trace_differs_from_not_recorded() {
        let mut b = minimal(Layout::SORTED);
        b.record_trace(TraceKind::Interventions);
        let built = b.finish().unwrap();
        assert_eq!(built.episode.interventions, Some(vec![]));
        assert_eq!(built.episode.actions, None);
        assert_eq!(built.raw.file("traces/interventions.jsonl"), Some(&b""[..]));
    }

    #[test]
    fn an_invalid_package_never_leaves_the_builder() {
        let mut b = minimal(Layout::SORTED);
        b.push(TraceKind::Actions, obj(json!({"kind": "teleport"})));
        let problem = b.finish().unwrap_err();
        assert_eq!(problem.file.as_deref(), Some("traces/actions.jsonl"));
        assert_eq!(problem.field.as_deref(), Some("kind"));

        let mut b = minimal(Layout::SORTED);
        b.push(TraceKind::Tools, obj(json!({"tool": "shell", "recovered_by": 7})));
        assert_eq!(b.finish().unwrap_err().field.as_deref(), Some("recovered_by"));
    }

    #[test]
    fn files_outside_the_package_or_the_builders_own_are_refused() {
        let mut b = minimal(Layout::SORTED);
        assert!(b.file("../escape", "x").is_err());
        assert!(b.file("/abs", "x").is_err());
        assert!(b.file("a//b", "x").is_err());
        assert!(b.file("traces/tools.jsonl", "x").is_err());
        assert!(b.file("manifest.json", "x").is_err());
        assert!(b.file("artifacts/source/log.jsonl", "x").is_ok());
    }

    #[test]
    fn write_dir_writes_every_file_and_refuses_an_existing_directory() {
        let mut b = minimal(Layout::SORTED);
        b.file("artifacts/source/log.jsonl", "{}\n").unwrap();
        let built = b.finish().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pkg");
        built.write_dir(&dir).unwrap();
        let read = crate::read_source(&crate::Source::Dir(dir.clone()), &crate::Limits::default());
        assert_eq!(read.into_iter().next().unwrap().unwrap().id, built.raw.id);
        assert!(built.write_dir(&dir).is_err(), "an existing package is never overwritten");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "no staging directory left behind");
    }

    #[test]
    fn reorder_writes_lines_in_the_given_order_with_their_seqs() {
        let push3 = |layout| {
            let mut b = minimal(layout);
            for kind in ["read", "search", "edit"] {
                b.push(TraceKind::Actions, obj(json!({"kind": kind})));
            }
            b
        };
        let mut b = push3(Layout::AS_GIVEN);
        assert!(b.reorder(TraceKind::Actions, &[0, 2, 1]));
        let later = b.push(TraceKind::Actions, obj(json!({"kind": "run"})));
        assert!(b.set_field(TraceKind::Actions, 1, "ok", json!(false)), "set_field still finds a record by seq");
        let built = b.finish().unwrap();
        let actions = std::str::from_utf8(built.raw.file("traces/actions.jsonl").unwrap()).unwrap();
        assert_eq!(
            actions,
            "{\"seq\":0,\"kind\":\"read\"}\n{\"seq\":2,\"kind\":\"edit\"}\n\
             {\"seq\":1,\"kind\":\"search\",\"ok\":false}\n{\"seq\":3,\"kind\":\"run\"}\n"
        );
        assert_eq!(later, 3);
        let seqs: Vec<u64> = built.episode.actions.unwrap().iter().map(|a| a.common.seq).collect();
        assert_eq!(seqs, [0, 2, 1, 3], "the store reads records in file order, by their own seq");

        // The identity order writes exactly what no reorder writes.
        let plain = push3(Layout::SORTED).finish().unwrap();
        let mut same = push3(Layout::SORTED);
        assert!(same.reorder(TraceKind::Actions, &[0, 1, 2]));
        assert_eq!(same.finish().unwrap().raw.id, plain.raw.id);
    }

    #[test]
    fn reorder_refuses_anything_but_a_permutation() {
        let mut b = minimal(Layout::SORTED);
        b.push(TraceKind::Actions, obj(json!({"kind": "read"})));
        b.push(TraceKind::Actions, obj(json!({"kind": "edit"})));
        for order in [&[0][..], &[0, 1, 2], &[1, 1], &[0, 2]] {
            assert!(!b.reorder(TraceKind::Actions, order), "{order:?}");
        }
        assert!(!b.reorder(TraceKind::Tools, &[]), "a trace that is not recorded");
        let kinds: Vec<&Value> = b.records(TraceKind::Actions).unwrap().iter().map(|r| &r["kind"]).collect();
        assert_eq!(kinds, [&json!("read"), &json!("edit")], "a refused order changes nothing");
        b.record_trace(TraceKind::Tools);
        assert!(b.reorder(TraceKind::Tools, &[]), "the empty permutation of a recorded, empty trace");
    }

    #[test]
    fn set_field_reaches_a_pushed_record() {
        let mut b = minimal(Layout::SORTED);
        let failed = b.push(TraceKind::Tools, obj(json!({"tool": "shell", "exit_code": 1})));
        let later = b.push(TraceKind::Tools, obj(json!({"tool": "shell", "exit_code": 0})));
        assert!(b.set_field(TraceKind::Tools, failed, "recovered_by", json!(later)));
        assert!(!b.set_field(TraceKind::Actions, failed, "x", json!(1)));
        let built = b.finish().unwrap();
        assert_eq!(built.episode.tools.as_ref().unwrap()[0].recovered_by, Some(later));
    }
}
