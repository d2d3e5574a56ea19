//! Episode lists: a leaderboard entry's episodes, a cell's episodes. One row per
//! episode with what tells episodes apart at a glance: posture, label, verdict, final
//! revision, how many of its checks went stale, interventions.

use epistore_package::{hex, Hash};
use epistore_store::Snapshot;
use serde_json::{json, Value};

use crate::{generated_by, Links, Result, SCHEMA};

/// One row of an episode list.
pub type ListRow = Value;

/// The rows of the given episodes, in the given order (ids not stored are skipped).
pub fn list_rows(snapshot: &Snapshot, ids: &[Hash], links: &Links) -> Result<Vec<ListRow>> {
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(r) = snapshot.episode(id)? else { continue };
        let traces = snapshot.episode_traces(id)?;
        let checks = traces.as_ref().and_then(|t| t.checks.as_ref());
        let id = hex(id);
        let m = &r.manifest;
        rows.push(json!({
            "id": id,
            "href": links.episode(&id),
            "model": m.model,
            "harness_level": m.harness_level,
            "task": m.task,
            "cluster": m.cluster,
            "attempt": m.attempt,
            "posture": r.derived.posture,
            "label": r.outcome.label,
            "correct": r.outcome.correct,
            "claim": r.outcome.agent_reported_complete,
            "admission": r.outcome.admission,
            "final_revision": r.derived.final_revision,
            "checks": checks.map(Vec::len),
            // Checks bound to an earlier revision than the final one.
            "stale_checks": checks.map(|c| c.iter().filter(|c| !c.fresh).count()),
            "interventions": traces.as_ref().and_then(|t| t.interventions.as_ref()).map(Vec::len),
            "source_format": m.source_format(),
        }));
    }
    Ok(rows)
}

/// The data of a list page. `truncated` says rows were left out (a bound was reached).
pub fn list_doc(title: &str, subtitle: Option<&str>, nav: Value, rows: Vec<ListRow>, truncated: bool) -> Value {
    json!({
        "kind": "list",
        "schema": SCHEMA,
        "generated_by": generated_by(),
        "title": title,
        "subtitle": subtitle,
        "nav": nav,
        "counts": {"episodes": rows.len()},
        "rows": rows,
        "truncated": truncated,
    })
}
