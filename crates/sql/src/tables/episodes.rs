//! The `episodes` table: one row per episode, from the store's episode records (no
//! trace decoding needed). Columns are documented in `docs/sql-schema.md`.

use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;
use epistore_package::{hex, TRACE_FILES};
use epistore_store::EpisodeRecord;

use super::columns::Columns;
use crate::error::Result;

pub(crate) fn batch(rows: &[EpisodeRecord]) -> Result<RecordBatch> {
    let ids: Vec<String> = rows.iter().map(|r| hex(&r.id)).collect();
    let mut c = Columns::new(rows);
    c.col("episode_id", false, Arc::new(StringArray::from_iter_values(ids.iter())));
    c.str("episode", |r| Some(&r.manifest.episode));
    c.str("model", |r| Some(&r.manifest.model));
    c.str("harness_level", |r| Some(&r.manifest.harness_level));
    c.str("task", |r| Some(&r.manifest.task));
    c.str("cluster", |r| Some(&r.manifest.cluster));
    c.int("seed", |r| r.manifest.seed);
    c.int("attempt", |r| Some(r.manifest.attempt));
    c.str("label", |r| r.outcome.label.as_deref());
    c.int("final_revision", |r| Some(r.derived.final_revision as i64));
    c.str("posture", |r| Some(&r.derived.posture));
    c.bool("correct", |r| r.outcome.correct);
    c.str("admission", |r| r.outcome.admission.as_deref());
    c.bool("agent_reported_complete", |r| r.outcome.agent_reported_complete);
    c.str("recorded_posture", |r| r.outcome.recorded_posture.as_deref());
    c.str("stop_reason", |r| Some(&r.outcome.stop_reason));
    c.str("start_state", |r| r.outcome.start_state.as_deref());
    c.float("score", |r| r.outcome.score);
    c.bool("trace_complete", |r| Some(r.manifest.trace_complete));
    // Distinct ids: a requirement listed twice is one requirement (as the metrics count it).
    c.int("n_requirements", |r| {
        Some(r.manifest.requirements.iter().map(|q| q.id.as_str()).collect::<std::collections::HashSet<_>>().len()
            as i64)
    });
    for (i, (_, kind)) in TRACE_FILES.iter().enumerate() {
        c.int(&format!("n_{}", kind.name()), move |r| r.trace_counts[i].map(i64::from));
    }
    for (i, (_, kind)) in TRACE_FILES.iter().enumerate() {
        c.bool(&format!("has_{}", kind.name()), move |r| Some(r.trace_counts[i].is_some()));
    }
    c.bool("has_patch", |r| Some(r.has_file("patch.diff")));
    c.bool("has_verification_report", |r| {
        Some(r.has_file("reports/verification.md") || r.has_file("reports/verification.json"))
    });
    c.bool("has_final_report", |r| Some(r.has_file("reports/final.md") || r.has_file("reports/final.json")));
    c.int("n_artifacts", |r| Some(r.files.iter().filter(|f| f.path.starts_with("artifacts/")).count() as i64));
    c.str("model_version", |r| r.manifest.model_version.as_deref());
    c.str("model_provider", |r| r.manifest.model_provider.as_deref());
    c.str("harness_name", |r| r.manifest.harness_name.as_deref());
    c.str("harness_version", |r| r.manifest.harness_version.as_deref());
    c.str_list("harness_components", |r| r.manifest.harness_components.as_deref());
    c.str("task_family", |r| r.manifest.task_family.as_deref());
    c.str("repository_url", |r| r.manifest.repository_url.as_deref());
    c.str("repository_commit", |r| r.manifest.repository_commit.as_deref());
    c.time("started_at", |r| r.manifest.started_at.as_deref());
    c.time("ended_at", |r| r.manifest.ended_at.as_deref());
    c.int("actions_used", |r| r.outcome.actions_used);
    c.int("actions_max", |r| r.outcome.actions_max);
    c.bool("budget_exhausted", |r| r.outcome.budget_exhausted);
    c.int("tokens_in", |r| r.outcome.tokens_in);
    c.int("tokens_out", |r| r.outcome.tokens_out);
    // Revision 1.2: the prompt-cache parts of tokens_in (in the outcome's extra).
    let cache: Vec<(Option<i64>, Option<i64>)> = rows.iter().map(|r| r.outcome.cache_tokens()).collect();
    c.col("tokens_cache_read", true, Arc::new(cache.iter().map(|t| t.0).collect::<Int64Array>()));
    c.col("tokens_cache_write", true, Arc::new(cache.iter().map(|t| t.1).collect::<Int64Array>()));
    c.float("cost_usd", |r| r.outcome.cost_usd);
    c.float("wall_ms", |r| r.outcome.wall_ms);
    c.str("notes", |r| r.outcome.notes.as_deref());
    c.str("tags", |r| r.manifest.tags.as_deref());
    c.str("manifest_extra", |r| r.manifest.extra.as_deref());
    c.str("outcome_extra", |r| r.outcome.extra.as_deref());
    c.int("n_files", |r| Some(r.files.len() as i64));
    c.int("package_bytes", |r| Some(r.package_bytes() as i64));
    c.int("ingest_seq", |r| Some(r.ingest_seq as i64));
    c.str("source", |r| Some(&r.source));
    // Revision 1.1 provenance (docs/format.md §8): which importer format the
    // episode came from (NULL for a package written as a package), and the earlier
    // import it grew from.
    let provenance: Vec<(Option<String>, Option<String>)> = rows
        .iter()
        .map(|r| {
            // One parse of the manifest's unknown fields per row, for both columns.
            let p = r.manifest.provenance();
            let text = |key: &str| p.as_ref()?.get(key)?.as_str().map(str::to_string);
            (text("source_format"), text("supersedes"))
        })
        .collect();
    c.col("source_format", true, Arc::new(provenance.iter().map(|p| p.0.as_deref()).collect::<StringArray>()));
    c.col("supersedes", true, Arc::new(provenance.iter().map(|p| p.1.as_deref()).collect::<StringArray>()));
    // Revision 1.2 (docs/format.md §9): the task as given and the agent's last words.
    c.str("task_prompt", |r| r.manifest.task_prompt.as_deref());
    c.str("final_message", |r| r.outcome.final_message.as_deref());
    c.finish()
}
