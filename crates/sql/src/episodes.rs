//! The `episodes` table: one row per episode, from the store's episode records.
//! Columns and their meaning are listed in `docs/sql-schema.md`.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, ListBuilder, StringArray, StringBuilder, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use epistore_package::{hex, TRACE_FILES};
use epistore_store::{EpisodeRecord, Snapshot};

use crate::error::Result;

fn timestamp_us(text: &Option<String>) -> Option<i64> {
    text.as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_micros())
}

/// Column set builder: each `col` call adds a field and its array, so the schema and
/// the data cannot drift apart.
struct Columns {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Columns {
    fn col(&mut self, name: &str, nullable: bool, array: ArrayRef) {
        self.fields.push(Field::new(name, array.data_type().clone(), nullable));
        self.arrays.push(array);
    }
    fn str<'a>(&mut self, name: &str, rows: &'a [EpisodeRecord], f: impl Fn(&'a EpisodeRecord) -> Option<&'a str>) {
        self.col(name, true, Arc::new(rows.iter().map(f).collect::<StringArray>()));
    }
    fn int(&mut self, name: &str, rows: &[EpisodeRecord], f: impl Fn(&EpisodeRecord) -> Option<i64>) {
        self.col(name, true, Arc::new(rows.iter().map(f).collect::<Int64Array>()));
    }
    fn float(&mut self, name: &str, rows: &[EpisodeRecord], f: impl Fn(&EpisodeRecord) -> Option<f64>) {
        self.col(name, true, Arc::new(rows.iter().map(f).collect::<Float64Array>()));
    }
    fn bool(&mut self, name: &str, rows: &[EpisodeRecord], f: impl Fn(&EpisodeRecord) -> Option<bool>) {
        self.col(name, true, Arc::new(rows.iter().map(f).collect::<BooleanArray>()));
    }
    fn time(&mut self, name: &str, rows: &[EpisodeRecord], f: impl Fn(&EpisodeRecord) -> Option<i64>) {
        let array = rows.iter().map(f).collect::<TimestampMicrosecondArray>().with_timezone("UTC");
        self.col(name, true, Arc::new(array));
    }
}

pub(crate) fn build(snapshot: &Snapshot) -> Result<RecordBatch> {
    let rows = snapshot.episodes()?;
    batch(&rows)
}

pub(crate) fn batch(rows: &[EpisodeRecord]) -> Result<RecordBatch> {
    let mut c = Columns { fields: Vec::new(), arrays: Vec::new() };
    let ids: Vec<String> = rows.iter().map(|r| hex(&r.id)).collect();
    c.col("episode_id", false, Arc::new(StringArray::from_iter_values(ids.iter())));
    c.str("episode", rows, |r| Some(&r.manifest.episode));
    c.str("model", rows, |r| Some(&r.manifest.model));
    c.str("harness_level", rows, |r| Some(&r.manifest.harness_level));
    c.str("task", rows, |r| Some(&r.manifest.task));
    c.str("cluster", rows, |r| Some(&r.manifest.cluster));
    c.int("seed", rows, |r| r.manifest.seed);
    c.int("attempt", rows, |r| Some(r.manifest.attempt));
    c.str("label", rows, |r| Some(&r.outcome.label));
    c.int("final_revision", rows, |r| Some(r.derived.final_revision as i64));
    c.str("posture", rows, |r| Some(&r.derived.posture));
    c.bool("correct", rows, |r| r.outcome.correct);
    c.str("admission", rows, |r| r.outcome.admission.as_deref());
    c.bool("agent_reported_complete", rows, |r| r.outcome.agent_reported_complete);
    c.str("recorded_posture", rows, |r| r.outcome.recorded_posture.as_deref());
    c.str("stop_reason", rows, |r| Some(&r.outcome.stop_reason));
    c.str("start_state", rows, |r| r.outcome.start_state.as_deref());
    c.float("score", rows, |r| r.outcome.score);
    c.bool("trace_complete", rows, |r| Some(r.manifest.trace_complete));
    c.int("n_requirements", rows, |r| Some(r.manifest.requirements.len() as i64));
    for (i, (_, kind)) in TRACE_FILES.iter().enumerate() {
        c.int(&format!("n_{}", kind.name()), rows, |r| r.trace_counts[i].map(i64::from));
    }
    for (i, (_, kind)) in TRACE_FILES.iter().enumerate() {
        c.bool(&format!("has_{}", kind.name()), rows, |r| Some(r.trace_counts[i].is_some()));
    }
    c.bool("has_patch", rows, |r| Some(r.has_file("patch.diff")));
    c.bool("has_verification_report", rows, |r| {
        Some(r.has_file("reports/verification.md") || r.has_file("reports/verification.json"))
    });
    c.bool("has_final_report", rows, |r| Some(r.has_file("reports/final.md") || r.has_file("reports/final.json")));
    c.int("n_artifacts", rows, |r| Some(r.files.iter().filter(|f| f.path.starts_with("artifacts/")).count() as i64));
    c.str("model_version", rows, |r| r.manifest.model_version.as_deref());
    c.str("model_provider", rows, |r| r.manifest.model_provider.as_deref());
    c.str("harness_name", rows, |r| r.manifest.harness_name.as_deref());
    c.str("harness_version", rows, |r| r.manifest.harness_version.as_deref());
    let mut components = ListBuilder::new(StringBuilder::new());
    for r in rows {
        match &r.manifest.harness_components {
            Some(list) => {
                for item in list {
                    components.values().append_value(item);
                }
                components.append(true);
            }
            None => components.append(false),
        }
    }
    c.col("harness_components", true, Arc::new(components.finish()));
    c.str("task_family", rows, |r| r.manifest.task_family.as_deref());
    c.str("repository_url", rows, |r| r.manifest.repository_url.as_deref());
    c.str("repository_commit", rows, |r| r.manifest.repository_commit.as_deref());
    c.time("started_at", rows, |r| timestamp_us(&r.manifest.started_at));
    c.time("ended_at", rows, |r| timestamp_us(&r.manifest.ended_at));
    c.int("actions_used", rows, |r| r.outcome.actions_used);
    c.int("actions_max", rows, |r| r.outcome.actions_max);
    c.int("tokens_in", rows, |r| r.outcome.tokens_in);
    c.int("tokens_out", rows, |r| r.outcome.tokens_out);
    c.float("cost_usd", rows, |r| r.outcome.cost_usd);
    c.float("wall_ms", rows, |r| r.outcome.wall_ms);
    c.str("notes", rows, |r| r.outcome.notes.as_deref());
    c.str("tags", rows, |r| r.manifest.tags.as_deref());
    c.str("manifest_extra", rows, |r| r.manifest.extra.as_deref());
    c.str("outcome_extra", rows, |r| r.outcome.extra.as_deref());
    c.int("n_files", rows, |r| Some(r.files.len() as i64));
    c.int("package_bytes", rows, |r| Some(r.package_bytes() as i64));
    c.int("ingest_seq", rows, |r| Some(r.ingest_seq as i64));
    c.str("source", rows, |r| Some(&r.source));
    let schema = Arc::new(Schema::new(c.fields));
    Ok(RecordBatch::try_new(schema, c.arrays)?)
}
