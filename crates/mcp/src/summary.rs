//! One episode as a compact text an agent can read in one go, and small text helpers.

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use epistore_package::hex;
use epistore_sql::Engine;
use epistore_store::Store;

use crate::{Error, Result};

/// Longest task prompt and last message shown, in characters.
const TEXT_CHARS: usize = 600;
/// Checks listed at most.
const CHECKS: usize = 20;

/// Every row of `batches` as display strings (NULL as "NULL").
pub(crate) fn string_rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let options = FormatOptions::default().with_null("NULL");
    let mut out = vec![];
    for batch in batches {
        let formatters: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("every Arrow type displays"))
            .collect();
        for row in 0..batch.num_rows() {
            out.push(formatters.iter().map(|f| f.value(row).to_string()).collect());
        }
    }
    out
}

/// A CSV field, quoted when it must be.
pub(crate) fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn shorten(text: &str) -> String {
    let count = text.chars().count();
    if count <= TEXT_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(TEXT_CHARS).collect();
    format!("{head}… [{} more characters: SELECT it from episodes]", count - TEXT_CHARS)
}

fn known<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "not recorded".to_string(), |v| v.to_string())
}

/// The summary of episode `id` (an id or a unique prefix).
pub(crate) async fn episode(store: &Store, engine: &Engine, id: &str, ui_url: Option<&str>) -> Result<String> {
    let snapshot = store.snapshot()?;
    let id = snapshot.resolve_stored(id)?;
    let r = snapshot.episode(&id)?.ok_or_else(|| Error::Usage(format!("no episode {}", hex(&id))))?;
    let id_hex = hex(&id);
    let m = &r.manifest;
    let o = &r.outcome;
    let mut out = format!(
        "episode {id_hex}\ncell: model {} / harness {} / task {} (cluster {}), attempt {}\n",
        m.model, m.harness_level, m.task, m.cluster, m.attempt
    );
    if let Some(format) = m.source_format() {
        out.push_str(&format!("imported from: {format}\n"));
    }
    out.push_str(&format!(
        "agent's completion claim: {}\nderived evidence posture: {}\nadmission: {}\nevaluator's verdict (correct): {}\n\
         recorder's label: {}\nstop reason: {}\nfinal revision: S{}\n",
        known(o.agent_reported_complete.map(|c| if c { "claimed complete" } else { "did not claim completion" })),
        r.derived.posture,
        known(o.admission.as_deref()),
        known(o.correct),
        known(o.label.as_deref().filter(|l| !l.is_empty())),
        o.stop_reason,
        r.derived.final_revision,
    ));
    let counts: Vec<String> = epistore_package::TRACE_FILES
        .iter()
        .zip(r.trace_counts)
        .map(|((file, _), n)| {
            let name = file.trim_start_matches("traces/").trim_end_matches(".jsonl");
            format!("{name} {}", n.map_or("not recorded".to_string(), |n| n.to_string()))
        })
        .collect();
    out.push_str(&format!("records: {}\n", counts.join(", ")));
    // The checks with their freshness, from SQL (what every metric reads).
    let sql = format!(
        "SELECT seq, actor, result, freshness, revision, substr(coalesce(command, check_id), 1, 120) AS what \
         FROM checks WHERE episode_id = '{id_hex}' ORDER BY seq LIMIT {}",
        CHECKS + 1
    );
    let checks = string_rows(&engine.query(&sql).await?);
    if !checks.is_empty() {
        out.push_str("checks (seq, actor, result, freshness, bound to revision, what):\n");
        for c in checks.iter().take(CHECKS) {
            out.push_str(&format!("  {} {} {} {} S{} {}\n", c[0], c[1], c[2], c[3], c[4], c[5]));
        }
        if checks.len() > CHECKS {
            out.push_str(&format!("  ... more: SELECT * FROM checks WHERE episode_id = '{id_hex}'\n"));
        }
    }
    out.push_str(&format!("task as given: {}\n", m.task_prompt.as_deref().map_or("not recorded".into(), shorten)));
    out.push_str(&format!("last message: {}\n", o.final_message.as_deref().map_or("not recorded".into(), shorten)));
    for (a, retraction) in snapshot.labels_of(&id)? {
        let state = if retraction.is_some() { " (withdrawn)" } else { "" };
        out.push_str(&format!(
            "annotation: \"{}\"{state} by {}{}\n",
            a.annotation.label,
            a.annotation.author.as_deref().unwrap_or("someone"),
            a.annotation.note.as_deref().map(|n| format!(": {}", shorten(n))).unwrap_or_default()
        ));
    }
    out.push_str(&format!("open it: epistore show {id_hex} (or --format html)"));
    if let Some(ui) = ui_url {
        out.push_str(&format!("; {}/episodes/{id_hex}", ui.trim_end_matches('/')));
    }
    out.push('\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_shortened_with_what_is_left() {
        assert_eq!(shorten("abc"), "abc");
        let long = "x".repeat(TEXT_CHARS + 5);
        assert!(shorten(&long).ends_with("[5 more characters: SELECT it from episodes]"));
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("x\"y,"), "\"x\"\"y,\"");
    }
}
