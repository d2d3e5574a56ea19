//! People's judgements of episodes: append-only, content-addressed records beside the
//! episodes they judge (docs/store-format.md §3.11, docs/annotations.md). Nothing here
//! touches a package, a record or a derived field.

use epistore_package::{hex, parse_hex, Hash};
use redb::{ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

use crate::error::{guarded, Error, Result};
use crate::read::{table, Snapshot, Sums};
use crate::tables::{
    begin_write, checksum, next_key, ANNOTATION_DATA, ANNOTATION_INDEX, CHECKSUMS, EPISODE_INDEX, SUM_ANNOTATION,
};
use crate::Store;

/// The `annotation` field of every record this build writes.
pub const ANNOTATION_FORMAT: &str = "epistore-annotation/1";
/// Longest label and author, in characters.
pub const MAX_LABEL_CHARS: usize = 200;
/// Longest note, in bytes.
pub const MAX_NOTE_BYTES: usize = 64 << 10;

/// What an annotation record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnnotationKind {
    /// A person's judgement of the episode.
    Label,
    /// Withdraws one earlier label.
    Retraction,
}

impl AnnotationKind {
    pub fn name(self) -> &'static str {
        match self {
            AnnotationKind::Label => "label",
            AnnotationKind::Retraction => "retraction",
        }
    }
}

/// One annotation record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub kind: AnnotationKind,
    pub episode: Hash,
    pub label: String,
    pub note: Option<String>,
    pub author: Option<String>,
    /// RFC 3339 UTC with milliseconds.
    pub created: String,
    /// For a retraction: the label annotation it withdraws.
    pub retracts: Option<Hash>,
}

/// The stored JSON, keys in the documented order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    annotation: String,
    kind: AnnotationKind,
    episode: String,
    label: String,
    note: Option<String>,
    author: Option<String>,
    created: String,
    retracts: Option<String>,
}

impl Annotation {
    fn wire(&self) -> Wire {
        Wire {
            annotation: ANNOTATION_FORMAT.into(),
            kind: self.kind,
            episode: hex(&self.episode),
            label: self.label.clone(),
            note: self.note.clone(),
            author: self.author.clone(),
            created: self.created.clone(),
            retracts: self.retracts.as_ref().map(hex),
        }
    }

    /// The stored bytes: canonical JSON (§3.11). The id is blake3 over them.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.wire()).expect("an annotation serialises")
    }

    /// Reads stored bytes back, checking every field as a write would.
    pub fn from_bytes(bytes: &[u8]) -> std::result::Result<Annotation, String> {
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| format!("not an annotation record: {e}"))?;
        if wire.annotation != ANNOTATION_FORMAT {
            return Err(format!("field `annotation`: `{}` is not `{ANNOTATION_FORMAT}`", wire.annotation));
        }
        let id = |field: &str, text: &str| {
            parse_hex(text).filter(|_| text.len() == 64).ok_or_else(|| format!("field `{field}`: not a 64-digit id"))
        };
        let annotation = Annotation {
            kind: wire.kind,
            episode: id("episode", &wire.episode)?,
            label: wire.label,
            note: wire.note,
            author: wire.author,
            created: wire.created,
            retracts: wire.retracts.as_deref().map(|t| id("retracts", t)).transpose()?,
        };
        annotation.check()?;
        Ok(annotation)
    }

    /// The record as JSON with its id in front: what listings and exports print.
    pub fn to_json(&self, id: &Hash) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        out.insert("id".into(), hex(id).into());
        if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(self.wire()) {
            out.extend(fields);
        }
        serde_json::Value::Object(out)
    }

    /// blake3 over [`Annotation::to_bytes`].
    pub fn id(&self) -> Hash {
        *blake3::hash(&self.to_bytes()).as_bytes()
    }

    /// The rules every record keeps (§3.11), apart from those that need the store.
    fn check(&self) -> std::result::Result<(), String> {
        check_line("label", &self.label)?;
        if let Some(note) = &self.note {
            check_note(note)?;
        }
        if let Some(author) = &self.author {
            check_line("author", author)?;
        }
        if chrono::DateTime::parse_from_rfc3339(&self.created).is_err() {
            return Err(format!("field `created`: `{}` is not an RFC 3339 time", self.created));
        }
        match (self.kind, self.retracts) {
            (AnnotationKind::Label, Some(_)) => Err("field `retracts`: a label retracts nothing".into()),
            (AnnotationKind::Retraction, None) => Err("field `retracts`: a retraction must name a label".into()),
            _ => Ok(()),
        }
    }
}

/// A label or an author: one trimmed line, not empty, at most [`MAX_LABEL_CHARS`].
fn check_line(field: &str, text: &str) -> std::result::Result<(), String> {
    if text.trim() != text || text.is_empty() {
        return Err(format!("the {field} is empty or has spaces around it"));
    }
    if text.chars().count() > MAX_LABEL_CHARS {
        return Err(format!("the {field} is longer than {MAX_LABEL_CHARS} characters"));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("the {field} has a control character in it"));
    }
    Ok(())
}

fn check_note(note: &str) -> std::result::Result<(), String> {
    if note.len() > MAX_NOTE_BYTES {
        return Err(format!("the note is longer than {MAX_NOTE_BYTES} bytes"));
    }
    Ok(())
}

/// A judgement to write: what a person says about an episode.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    pub label: String,
    pub note: Option<String>,
    pub author: Option<String>,
}

/// A stored annotation with its id and number (write order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnnotation {
    pub id: Hash,
    pub number: u64,
    pub annotation: Annotation,
    /// On a label: the retraction that withdraws it, if one is stored.
    pub retracted_by: Option<Hash>,
}

impl Annotated {
    /// [`Annotation::to_json`] with `added`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = self.annotation.to_json(&self.id);
        value["added"] = self.added.into();
        value
    }
}

impl StoredAnnotation {
    /// [`Annotation::to_json`] with `retracted_by` (null while active, and on a
    /// retraction).
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = self.annotation.to_json(&self.id);
        value["retracted_by"] = self.retracted_by.as_ref().map(hex).into();
        value
    }

    /// A label no retraction withdraws.
    pub fn is_active(&self) -> bool {
        self.annotation.kind == AnnotationKind::Label && self.retracted_by.is_none()
    }
}

/// What [`Store::annotate`] or [`Store::retract`] did.
#[derive(Debug, Clone)]
pub struct Annotated {
    pub id: Hash,
    /// False when the same record was already stored (nothing was written).
    pub added: bool,
    pub annotation: Annotation,
}

/// Now, as the record spells it.
fn now() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let time = chrono::DateTime::from_timestamp_millis(millis).unwrap_or_default();
    time.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Trims optional text; empty becomes none.
fn optional(text: Option<String>) -> Option<String> {
    text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty())
}

impl Store {
    /// Appends a person's judgement of `episode` (an id or a unique prefix).
    pub fn annotate(&self, episode: &str, judgement: Judgement) -> Result<Annotated> {
        let episode = self.snapshot()?.resolve_stored(episode)?;
        let annotation = Annotation {
            kind: AnnotationKind::Label,
            episode,
            label: judgement.label.trim().to_string(),
            note: optional(judgement.note),
            author: optional(judgement.author),
            created: now(),
            retracts: None,
        };
        annotation.check().map_err(Error::Annotation)?;
        guarded(|| self.append_annotation(annotation))
    }

    /// Appends the retraction of the label annotation `target` (an id or a unique
    /// prefix), with why and by whom.
    pub fn retract(&self, target: &str, note: Option<String>, author: Option<String>) -> Result<Annotated> {
        let snapshot = self.snapshot()?;
        let target = snapshot.resolve_annotation(target)?;
        let retracted = snapshot.annotation(&target)?.ok_or_else(|| Error::NoAnnotation(hex(&target)))?;
        drop(snapshot);
        let annotation = Annotation {
            kind: AnnotationKind::Retraction,
            episode: retracted.annotation.episode,
            label: retracted.annotation.label,
            note: optional(note),
            author: optional(author),
            created: now(),
            retracts: Some(target),
        };
        annotation.check().map_err(Error::Annotation)?;
        guarded(|| self.append_annotation(annotation))
    }

    /// Writes one record after the checks that need the store, in the write
    /// transaction itself, so two writers cannot both withdraw one label.
    pub(crate) fn append_annotation(&self, annotation: Annotation) -> Result<Annotated> {
        let db = self.writer()?;
        let bytes = annotation.to_bytes();
        let id = *blake3::hash(&bytes).as_bytes();
        let txn = begin_write(db)?;
        {
            let mut index = txn.open_table(ANNOTATION_INDEX).map_err(Error::redb)?;
            if index.get(id).map_err(Error::redb)?.is_some() {
                return Ok(Annotated { id, added: false, annotation });
            }
            if txn
                .open_table(EPISODE_INDEX)
                .map_err(Error::redb)?
                .get(annotation.episode)
                .map_err(Error::redb)?
                .is_none()
            {
                return Err(Error::NoEpisode(hex(&annotation.episode)));
            }
            let mut data = txn.open_table(ANNOTATION_DATA).map_err(Error::redb)?;
            if let Some(target) = annotation.retracts {
                check_retraction(&index, &data, &target, &annotation.episode)?;
            }
            let number = next_key(&data)?;
            data.insert(number, bytes.as_slice()).map_err(Error::redb)?;
            index.insert(id, number).map_err(Error::redb)?;
            let mut sums = txn.open_table(CHECKSUMS).map_err(Error::redb)?;
            sums.insert((SUM_ANNOTATION, number), checksum(&bytes)).map_err(Error::redb)?;
        }
        txn.commit().map_err(Error::redb)?;
        Ok(Annotated { id, added: true, annotation })
    }
}

/// A retraction's target must be a stored label of the same episode that nothing
/// withdraws yet.
fn check_retraction(
    index: &impl ReadableTable<[u8; 32], u64>,
    data: &impl ReadableTable<u64, &'static [u8]>,
    target: &Hash,
    episode: &Hash,
) -> Result<()> {
    let refuse = |why: String| Err(Error::Annotation(format!("cannot retract annotation {}: {why}", hex(target))));
    let Some(number) = index.get(*target).map_err(Error::redb)?.map(|v| v.value()) else {
        return Err(Error::NoAnnotation(hex(target)));
    };
    let Some(value) = data.get(number).map_err(Error::redb)? else {
        return refuse("its record is missing".into());
    };
    let retracted = Annotation::from_bytes(value.value()).map_err(Error::Corrupt)?;
    if let Some(why) = retraction_refusal(&retracted, episode) {
        return refuse(why.into());
    }
    // A scan, not an index: retractions are rare and people write them (70 ms over
    // 10,000 annotations in a debug build).
    for entry in data.iter().map_err(Error::redb)? {
        let (_, value) = entry.map_err(Error::redb)?;
        let other = Annotation::from_bytes(value.value()).map_err(Error::Corrupt)?;
        if other.retracts == Some(*target) {
            return refuse(format!("it is already retracted by {}", hex(&blake3::hash(value.value()).into())));
        }
    }
    Ok(())
}

/// Why `target` cannot be withdrawn by a retraction of `episode`, if it cannot (the
/// rules a write checks and `verify` checks again; "withdrawn once" needs the others).
fn retraction_refusal(target: &Annotation, episode: &Hash) -> Option<&'static str> {
    if target.kind != AnnotationKind::Label {
        Some("it is a retraction (annotate the label again to restore it)")
    } else if target.episode != *episode {
        Some("it judges another episode")
    } else {
        None
    }
}

/// A stored value checked against its checksum and read as an annotation.
fn decode(sums: &Sums, number: u64, value: &[u8]) -> Result<Annotation> {
    sums.check(SUM_ANNOTATION, number, value, || format!("annotation {number}"))?;
    Annotation::from_bytes(value).map_err(|e| Error::Corrupt(format!("annotation {number}: {e}")))
}

/// What a session built from a snapshot depends on: the ingest log and the
/// annotations (which are not in the log). A cached session is current while the
/// store's generation equals the one it was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Generation {
    pub ingest_seq: u64,
    pub annotations: u64,
}

impl Snapshot {
    /// See [`Generation`].
    pub fn generation(&self) -> Result<Generation> {
        let annotations = guarded(|| match self.optional_table(ANNOTATION_DATA)? {
            Some(t) => t.len().map_err(Error::redb),
            None => Ok(0),
        })?;
        Ok(Generation { ingest_seq: self.ingest_seq()?, annotations })
    }

    /// Every annotation in write order, each against its checksum. A store written
    /// before annotations existed has none.
    pub fn annotations(&self) -> Result<Vec<StoredAnnotation>> {
        guarded(|| {
            let Some(data) = self.optional_table(ANNOTATION_DATA)? else { return Ok(Vec::new()) };
            let sums = self.sums()?;
            let mut out = Vec::with_capacity(data.len().map_err(Error::redb)? as usize);
            for entry in data.iter().map_err(Error::redb)? {
                let (number, value) = entry.map_err(Error::redb)?;
                let (number, value) = (number.value(), value.value());
                let annotation = decode(&sums, number, value)?;
                out.push(StoredAnnotation {
                    id: *blake3::hash(value).as_bytes(),
                    number,
                    annotation,
                    retracted_by: None,
                });
            }
            let withdrawn: std::collections::HashMap<Hash, Hash> =
                out.iter().filter_map(|a| a.annotation.retracts.map(|target| (target, a.id))).collect();
            for a in &mut out {
                a.retracted_by = withdrawn.get(&a.id).copied();
            }
            Ok(out)
        })
    }

    /// The label annotations of `episode` in write order, each with the retraction that
    /// withdraws it, if one does: what a page or a summary of the episode lists.
    pub fn labels_of(&self, episode: &Hash) -> Result<Vec<(StoredAnnotation, Option<StoredAnnotation>)>> {
        let mine: Vec<StoredAnnotation> =
            self.annotations()?.into_iter().filter(|a| a.annotation.episode == *episode).collect();
        let (labels, retractions): (Vec<_>, Vec<_>) =
            mine.into_iter().partition(|a| a.annotation.kind == AnnotationKind::Label);
        Ok(labels
            .into_iter()
            .map(|label| {
                let retraction = retractions.iter().find(|r| Some(r.id) == label.retracted_by).cloned();
                (label, retraction)
            })
            .collect())
    }

    /// One annotation by id (without `retracted_by`: [`Snapshot::annotations`] has it).
    pub fn annotation(&self, id: &Hash) -> Result<Option<StoredAnnotation>> {
        guarded(|| {
            let Some(index) = self.optional_table(ANNOTATION_INDEX)? else { return Ok(None) };
            let Some(number) = index.get(*id).map_err(Error::redb)?.map(|v| v.value()) else { return Ok(None) };
            let data = table!(self.txn, ANNOTATION_DATA);
            let Some(value) = data.get(number).map_err(Error::redb)? else {
                return Err(Error::Corrupt(format!("annotation {}: its record {number} is missing", hex(id))));
            };
            let annotation = decode(&self.sums()?, number, value.value())?;
            Ok(Some(StoredAnnotation { id: *id, number, annotation, retracted_by: None }))
        })
    }

    /// An annotation id from a full id or a unique prefix of at least 4 hex digits.
    pub fn resolve_annotation(&self, text: &str) -> Result<Hash> {
        guarded(|| {
            let Some(index) = self.optional_table(ANNOTATION_INDEX)? else {
                return Err(Error::NoAnnotation(text.trim().into()));
            };
            crate::read::resolve_prefix(&index, text, Error::NoAnnotation)
        })
    }
}

/// The annotations problems `verify` reports (§3.11), and how many it read.
pub(crate) fn verify_annotations(snapshot: &Snapshot, problems: &mut Vec<String>) -> Result<u64> {
    let Some(data) = snapshot.optional_table(ANNOTATION_DATA)? else { return Ok(0) };
    let index = table!(snapshot.txn, ANNOTATION_INDEX);
    let episodes = table!(snapshot.txn, EPISODE_INDEX);
    let sums = snapshot.sums()?;
    // Every record read so far, by id, for retraction targets.
    let mut seen: std::collections::HashMap<Hash, Annotation> = std::collections::HashMap::new();
    let mut withdrawn: std::collections::HashSet<Hash> = std::collections::HashSet::new();
    let mut count = 0;
    for entry in data.iter().map_err(Error::redb)? {
        let (number, value) = entry.map_err(Error::redb)?;
        let (number, value) = (number.value(), value.value());
        count += 1;
        let id: Hash = *blake3::hash(value).as_bytes();
        let name = format!("annotation {number} ({})", hex(&id));
        if let Some(problem) = crate::verify::sum_problem(&sums, SUM_ANNOTATION, number, value, || name.clone()) {
            problems.push(problem);
            continue;
        }
        match index.get(id).map_err(Error::redb)?.map(|v| v.value()) {
            Some(n) if n == number => {}
            Some(n) => problems.push(format!("{name}: the index names number {n} for its id")),
            None => problems.push(format!("{name}: its id is not in the annotation index")),
        }
        let annotation = match Annotation::from_bytes(value) {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        if episodes.get(annotation.episode).map_err(Error::redb)?.is_none() {
            problems.push(format!("{name}: it judges episode {}, which is not stored", hex(&annotation.episode)));
        }
        if let Some(target) = annotation.retracts {
            match seen.get(&target) {
                None => {
                    problems.push(format!("{name}: it retracts {}, which is not an earlier annotation", hex(&target)))
                }
                Some(t) => match retraction_refusal(t, &annotation.episode) {
                    Some(why) => problems.push(format!("{name}: it retracts {}, but {why}", hex(&target))),
                    None if !withdrawn.insert(target) => {
                        problems.push(format!("{name}: annotation {} is retracted twice", hex(&target)))
                    }
                    None => {}
                },
            }
        }
        seen.insert(id, annotation);
    }
    let indexed = index.len().map_err(Error::redb)?;
    if indexed != count {
        problems.push(format!("the annotation index has {indexed} entries for {count} annotations"));
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str) -> Annotation {
        Annotation {
            kind: AnnotationKind::Label,
            episode: [7; 32],
            label: text.into(),
            note: Some("why".into()),
            author: None,
            created: "2026-12-05T21:30:00.123Z".into(),
            retracts: None,
        }
    }

    #[test]
    fn the_record_is_canonical_json_in_the_documented_order() {
        let bytes = label("flaky test").to_bytes();
        let text = std::str::from_utf8(&bytes).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"annotation\":\"epistore-annotation/1\",\"kind\":\"label\",\"episode\":\"{}\",\
                 \"label\":\"flaky test\",\"note\":\"why\",\"author\":null,\
                 \"created\":\"2026-12-05T21:30:00.123Z\",\"retracts\":null}}",
                "07".repeat(32)
            )
        );
        assert_eq!(Annotation::from_bytes(&bytes).unwrap(), label("flaky test"));
        assert_eq!(label("a").id(), *blake3::hash(&label("a").to_bytes()).as_bytes());
        assert_ne!(label("a").id(), label("b").id());
    }

    #[test]
    fn bad_records_are_refused_naming_the_field() {
        for (annotation, needle) in [
            (label(""), "label is empty"),
            (label(" x"), "spaces around"),
            (label(&"x".repeat(201)), "longer than 200"),
            (label("a\nb"), "control character"),
            (Annotation { retracts: Some([1; 32]), ..label("x") }, "a label retracts nothing"),
            (Annotation { kind: AnnotationKind::Retraction, ..label("x") }, "must name a label"),
            (Annotation { created: "yesterday".into(), ..label("x") }, "field `created`"),
            (Annotation { note: Some("n".repeat(MAX_NOTE_BYTES + 1)), ..label("x") }, "note is longer"),
        ] {
            let e = annotation.check().unwrap_err();
            assert!(e.contains(needle), "{e} should say {needle}");
        }
        let e = Annotation::from_bytes(br#"{"annotation":"epistore-annotation/9"}"#).unwrap_err();
        assert!(e.contains("not an annotation record"), "{e}");
        let mut text = String::from_utf8(label("x").to_bytes()).unwrap();
        text = text.replace("\"retracts\":null", "\"retracts\":null,\"extra\":1");
        assert!(Annotation::from_bytes(text.as_bytes()).unwrap_err().contains("unknown field"));
    }
}
