//! The data of an episode page: identity and provenance, the four things never
//! collapsed into one "success" (the agent's claim, the derived posture, the admission,
//! the evaluator's verdict) beside the label, every trace record with its derived
//! revision (checks with their bound revision and freshness), the revision bands, the
//! patch, reports and files, and the episode's other attempts and task-mates.

use std::collections::HashMap;

use epistore_package::{hex, Episode, Hash};
use epistore_store::{EpisodeRecord, FileEntry, Snapshot};
use serde_json::{json, Map, Value};

use crate::{generated_by, Error, Links, Result, SCHEMA};

/// Which file contents a page carries inline.
#[derive(Clone, Copy, Debug)]
pub struct FilePolicy {
    /// Bytes of one file shown inline; longer text is cut there (and marked).
    pub inline_limit: usize,
    /// Inline the text of artifacts too (a static page has no server to fetch them
    /// from); the patch and reports are always inline.
    pub inline_artifacts: bool,
    /// Carry the source logs of an imported episode (`artifacts/source/`): off for
    /// static publishing, since transcripts can hold what was never meant to be
    /// published.
    pub include_sources: bool,
    /// Show where the package was ingested from as given (`ui`, on the machine that
    /// holds it); a published page names its last component only, so that no path of
    /// the publishing machine leaves it.
    pub full_source_path: bool,
}

impl FilePolicy {
    /// `epistore ui`: files are fetched on demand.
    pub const SERVER: FilePolicy =
        FilePolicy { inline_limit: 1 << 20, inline_artifacts: false, include_sources: true, full_source_path: true };
    /// A static page: artifacts inline up to 256 KiB each, source logs left out.
    pub const STATIC: FilePolicy =
        FilePolicy { inline_limit: 256 << 10, inline_artifacts: true, include_sources: false, full_source_path: false };
}

/// Episodes listed as "other attempts" or "same task" on a page, at most.
const RELATED_LIMIT: usize = 200;

const SOURCE_DIR: &str = "artifacts/source/";

/// The data of the page of episode `id`.
/// People's label annotations of the episode in write order, each with the retraction
/// that withdrew it (`retraction`: note, author, created), if any.
fn annotations(snapshot: &Snapshot, id: &Hash) -> Result<Vec<Value>> {
    Ok(snapshot
        .labels_of(id)?
        .into_iter()
        .map(|(label, retraction)| {
            let mut value = label.to_json();
            value["retraction"] = match retraction {
                Some(r) => json!({"id": hex(&r.id), "note": r.annotation.note, "author": r.annotation.author,
                                  "created": r.annotation.created}),
                None => Value::Null,
            };
            value
        })
        .collect())
}

pub fn episode_doc(snapshot: &Snapshot, id: &Hash, links: &Links, policy: FilePolicy) -> Result<Value> {
    let record = snapshot.episode(id)?.ok_or_else(|| Error::NoEpisode(hex(id)))?;
    let traces = snapshot.episode_traces(id)?.ok_or_else(|| Error::NoEpisode(hex(id)))?;
    let id_hex = hex(id);
    let m = &record.manifest;
    let superseded_by = snapshot.superseded()?.into_iter().find(|(old, _)| old == id).map(|(_, new)| hex(&new));
    let related = |other: &str| json!({"id": other, "href": links.episode(other)});
    let (attempts, same_task, truncated_lists) = related_episodes(snapshot, &record, links)?;
    // Tool outputs whose whole text a tools record already carries: the page shows them
    // in their step, and does not inline the file a second time.
    // A file several calls printed points to the first of them.
    let mut outputs_in_steps: HashMap<&str, u64> = HashMap::new();
    for t in traces.tools.iter().flatten() {
        if let (Some(path), true) =
            (t.output.as_deref(), t.output_bytes.is_some_and(|n| n as usize <= epistore_package::OUTPUT_TEXT_CAP))
        {
            outputs_in_steps.entry(path).or_insert(t.common.seq);
        }
    }
    let files = files(snapshot, &record, links, policy, &outputs_in_steps)?;
    Ok(json!({
        "kind": "episode",
        "schema": SCHEMA,
        "generated_by": generated_by(),
        "title": format!("{} / {} / {} attempt {}", m.model, m.harness_level, m.task, m.attempt),
        "nav": links.nav(&[
            (&format!("{} / {} / {}", m.model, m.harness_level, m.task), links.cell(&m.model, &m.harness_level, &m.task)),
            (&id_hex[..12], None),
        ]),
        "id": id_hex,
        "cell": {"model": m.model, "harness_level": m.harness_level, "task": m.task, "cluster": m.cluster},
        "manifest": manifest(&record),
        "source": if policy.full_source_path { record.source.clone() } else { last_component(&record.source) },
        "ingest_seq": record.ingest_seq,
        "provenance": m.provenance(),
        "source_format": m.source_format(),
        "supersedes": m.supersedes().map(|s| related(&s)),
        "superseded_by": superseded_by.map(|s| related(&s)),
        "verdicts": {
            "claim": record.outcome.agent_reported_complete,
            "posture": record.derived.posture,
            "recorded_posture": record.outcome.recorded_posture,
            "admission": record.outcome.admission,
            "correct": record.outcome.correct,
            "label": record.outcome.label,
            // The page's warning asks this, never the label's spelling.
            "label_claims_verified": record.outcome.label.as_deref().is_some_and(epistore_package::label_claims_verified),
        },
        // The run as its first screen reads it: the task as given, the agent's last word.
        "task_prompt": m.task_prompt,
        "final_message": record.outcome.final_message,
        "annotations": annotations(snapshot, id)?,
        "outcome": outcome(&record),
        "final_revision": record.derived.final_revision,
        "revisions": revisions(&traces, record.derived.final_revision),
        "traces": trace_records(&traces, &id_hex, links),
        "patch": files.patch,
        "reports": files.reports,
        "artifacts": files.artifacts,
        "attempts": attempts,
        "same_task": same_task,
        "truncated_lists": truncated_lists,
    }))
}

/// The data of the page comparing episodes `a` and `b` (the same task across models,
/// levels or attempts): each one's page data, aligned and drawn side by side by the
/// page's script.
pub fn compare_doc(snapshot: &Snapshot, a: &Hash, b: &Hash, links: &Links, policy: FilePolicy) -> Result<Value> {
    let side = |id: &Hash| -> Result<Value> {
        let mut doc = episode_doc(snapshot, id, links, policy)?;
        doc["href"] = json!(links.episode(&hex(id)));
        Ok(doc)
    };
    let (da, db) = (side(a)?, side(b)?);
    let short = |d: &Value| d["id"].as_str().map(|id| id[..12.min(id.len())].to_string()).unwrap_or_default();
    let title = format!("{} vs {}", short(&da), short(&db));
    Ok(json!({
        "kind": "compare",
        "schema": SCHEMA,
        "generated_by": generated_by(),
        "title": format!("Compare {title}"),
        "nav": links.nav(&[
            (&short(&da), links.episode(da["id"].as_str().unwrap_or_default())),
            (&format!("compare with {}", short(&db)), None),
        ]),
        "a": da,
        "b": db,
    }))
}

/// The last component of a path as given (either separator), for a published page.
fn last_component(path: &str) -> String {
    path.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next().unwrap_or(path).to_string()
}

/// A JSON object from a record's unknown fields, kept as JSON text.
fn extra(text: &Option<String>) -> Value {
    text.as_deref().and_then(|t| epistore_package::parse_json_text(t).ok()).unwrap_or(Value::Null)
}

fn manifest(r: &EpisodeRecord) -> Value {
    let m = &r.manifest;
    json!({
        "episode": m.episode,
        "attempt": m.attempt,
        "seed": m.seed,
        "model_version": m.model_version,
        "model_provider": m.model_provider,
        "harness_name": m.harness_name,
        "harness_version": m.harness_version,
        "harness_components": m.harness_components,
        "task_family": m.task_family,
        "repository_url": m.repository_url,
        "repository_commit": m.repository_commit,
        "started_at": m.started_at,
        "ended_at": m.ended_at,
        "trace_complete": m.trace_complete,
        "requirements": m.requirements.iter().map(|q| json!({"id": q.id, "text": q.text})).collect::<Vec<_>>(),
        "tags": extra(&m.tags),
        "extra": extra(&m.extra),
    })
}

fn outcome(r: &EpisodeRecord) -> Value {
    let o = &r.outcome;
    json!({
        "stop_reason": o.stop_reason,
        "score": o.score,
        "notes": o.notes,
        "tokens_in": o.tokens_in,
        "tokens_out": o.tokens_out,
        "cost_usd": o.cost_usd,
        "wall_ms": o.wall_ms,
        "actions_used": o.actions_used,
        "actions_max": o.actions_max,
        "budget_exhausted": o.budget_exhausted,
        "start_state": o.start_state,
        "requirements": o.requirements.iter().map(|q| json!({"id": q.id, "status": q.status})).collect::<Vec<_>>(),
        "fault_locations": o.fault_locations,
        "extra": extra(&o.extra),
    })
}

/// One band per revision 0..=final: band r begins right after the mutation that made
/// it (the r-th ok mutating action in seq order).
fn revisions(e: &Episode, final_revision: u64) -> Vec<Value> {
    let mut mutations: Vec<u64> =
        e.actions.iter().flatten().filter(|a| a.advances_revision()).map(|a| a.common.seq).collect();
    mutations.sort_unstable();
    (0..=final_revision)
        .map(|r| {
            let mutation = if r == 0 { None } else { mutations.get(r as usize - 1).copied() };
            json!({"revision": r, "mutation_seq": mutation})
        })
        .collect()
}

/// The fields every record has, then its own.
fn record(common: &epistore_package::Common, own: Value) -> Value {
    let mut out = Map::new();
    out.insert("seq".into(), json!(common.seq));
    out.insert("line".into(), json!(common.line));
    out.insert("ts".into(), json!(common.ts));
    out.insert("grade".into(), json!(common.grade));
    out.insert("revision".into(), json!(common.revision));
    if let Value::Object(own) = own {
        out.extend(own);
    }
    out.insert("extra".into(), extra(&common.extra));
    Value::Object(out)
}

/// Every trace as a list of records; `null` for a trace that was not recorded.
fn trace_records(e: &Episode, id: &str, links: &Links) -> Value {
    fn each<T>(trace: &Option<Vec<T>>, f: impl Fn(&T) -> Value) -> Value {
        trace.as_ref().map_or(Value::Null, |records| Value::Array(records.iter().map(f).collect()))
    }
    json!({
        "actions": each(&e.actions, |a| record(&a.common, json!({
            "kind": a.kind, "paths": a.paths, "summary": a.summary, "mutates": a.mutates, "ok": a.ok,
            "tool_seq": a.tool_seq, "advances_revision": a.advances_revision(), "diff": a.diff,
        }))),
        "tools": each(&e.tools, |t| record(&t.common, json!({
            "tool": t.tool, "command": t.command, "exit_code": t.exit_code, "duration_ms": t.duration_ms,
            "timed_out": t.timed_out, "failure_type": t.failure_type, "recorded_failure_type": t.recorded_failure_type,
            "recovered_by": t.recovered_by, "output": t.output,
            "output_href": t.output.as_deref().and_then(|p| links.file(id, p)),
            "output_text": t.output_text, "output_bytes": t.output_bytes,
        }))),
        "context": each(&e.context, |c| record(&c.common, json!({
            "artifact": c.artifact, "kind": c.kind, "purpose": c.purpose, "used": c.used,
        }))),
        "checks": each(&e.checks, |c| record(&c.common, json!({
            "check_id": c.check_id, "actor": c.actor, "method": c.method, "command": c.command,
            "result": c.result, "exit_code": c.exit_code, "duration_ms": c.duration_ms,
            "requirements": c.requirements, "recorded_revision": c.recorded_revision,
            "bound_revision": c.bound_revision, "fresh": c.fresh,
            "state": if c.fresh { "current" } else { "stale" },
            "suite_id": c.suite_id, "verifier": c.verifier, "verdict": c.verdict, "score": c.score,
            "interpretation": c.interpretation,
        }))),
        "attributions": each(&e.attributions, |a| record(&a.common, json!({
            "failure_seq": a.failure_seq, "category": a.category, "responsibility": a.responsibility,
            "location": a.location, "rank": a.rank, "confidence": a.confidence, "evidence": a.evidence,
        }))),
        "interventions": each(&e.interventions, |i| record(&i.common, json!({
            "actor": i.actor, "kind": i.kind, "reason": i.reason, "missing_responsibility": i.missing_responsibility,
            "avoidable": i.avoidable, "burden": i.burden, "minutes": i.minutes,
        }))),
        "entropy": each(&e.entropy, |f| record(&f.common, json!({
            "category": f.category, "severity": f.severity, "phase": f.phase, "path": f.path, "note": f.note,
        }))),
        // The conversation (package revision 1.2): drawn in the step list, not as a lane.
        "messages": each(&e.messages, |m| record(&m.common, json!({
            "role": m.role, "author": m.author, "text": m.text, "reasoning": m.reasoning,
            "tool_call_id": m.tool_call_id, "tool": m.tool, "arguments": m.arguments, "tool_seq": m.tool_seq,
            "is_error": m.is_error, "tokens_in": m.tokens_in, "tokens_out": m.tokens_out, "model": m.model,
        }))),
    })
}

struct Files {
    patch: Value,
    reports: Vec<Value>,
    artifacts: Vec<Value>,
}

/// The patch and reports with their text, and every file of the package with its
/// size (and its text or a link, by `policy`).
fn files(
    snapshot: &Snapshot,
    r: &EpisodeRecord,
    links: &Links,
    policy: FilePolicy,
    outputs_in_steps: &HashMap<&str, u64>,
) -> Result<Files> {
    let id = hex(&r.id);
    let package = snapshot.package(r);
    let text_of = |f: &FileEntry| -> Result<(Value, bool)> {
        let bytes = package.file(f)?;
        Ok(inline_text(&bytes, policy.inline_limit))
    };
    let mut out = Files { patch: Value::Null, reports: vec![], artifacts: vec![] };
    for f in &r.files {
        let source = f.path.starts_with(SOURCE_DIR);
        let href = if source && !policy.include_sources { None } else { links.file(&id, &f.path) };
        let entry = |text: Value, truncated: bool| json!({"path": f.path, "size": f.size, "text": text, "truncated": truncated, "href": href, "source": source});
        if f.path == "patch.diff" {
            let (text, truncated) = text_of(f)?;
            out.patch = entry(text, truncated);
        } else if f.path.starts_with("reports/") {
            let (text, truncated) = text_of(f)?;
            out.reports.push(entry(text, truncated));
        }
        let step = outputs_in_steps.get(f.path.as_str()).copied();
        let inline = policy.inline_artifacts
            && step.is_none()
            && f.path.starts_with("artifacts/")
            && (!source || policy.include_sources);
        let (text, truncated) = if inline { text_of(f)? } else { (Value::Null, false) };
        let mut artifact = entry(text, truncated);
        artifact["step"] = json!(step);
        out.artifacts.push(artifact);
    }
    Ok(out)
}

/// The text of a file when it is UTF-8 without NUL bytes (cut at `limit` bytes, on a
/// character boundary), else null: binary files are listed, not shown.
fn inline_text(bytes: &[u8], limit: usize) -> (Value, bool) {
    let cut = bytes.len().min(limit);
    let head = match std::str::from_utf8(&bytes[..cut]) {
        Ok(s) => s,
        // A cut through a multi-byte character: back up to its start.
        Err(e) if cut < bytes.len() && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid prefix")
        }
        Err(_) => return (Value::Null, false),
    };
    if head.contains('\0') {
        return (Value::Null, false);
    }
    (Value::String(head.to_string()), cut < bytes.len())
}

/// The other attempts in the episode's cell and the episodes of other cells on the
/// same task, each with its label and posture; the flag says a list was cut.
fn related_episodes(snapshot: &Snapshot, r: &EpisodeRecord, links: &Links) -> Result<(Vec<Value>, Vec<Value>, bool)> {
    let m = &r.manifest;
    let mut truncated = false;
    let mut attempts = Vec::new();
    let mut same_task = Vec::new();
    for (model, level, other) in snapshot.task_ids(&m.task)? {
        if other == r.id {
            continue;
        }
        // The cell index says which list an episode goes to: a full list costs no decode.
        let same_cell = model == m.model && level == m.harness_level;
        let list = if same_cell { &mut attempts } else { &mut same_task };
        if list.len() >= RELATED_LIMIT {
            truncated = true;
            continue;
        }
        let Some(o) = snapshot.episode(&other)? else { continue };
        let id = hex(&other);
        list.push(json!({
            "compare_href": links.compare(&hex(&r.id), &id),
            "id": id,
            "href": links.episode(&id),
            "model": o.manifest.model,
            "harness_level": o.manifest.harness_level,
            "attempt": o.manifest.attempt,
            "label": o.outcome.label,
            "posture": o.derived.posture,
            "correct": o.outcome.correct,
        }));
    }
    let by_attempt = |v: &Value| {
        (
            v["model"].as_str().map(str::to_string),
            v["harness_level"].as_str().map(str::to_string),
            v["attempt"].as_i64(),
        )
    };
    attempts.sort_by_cached_key(by_attempt);
    same_task.sort_by_cached_key(by_attempt);
    Ok((attempts, same_task, truncated))
}

#[cfg(test)]
mod tests {
    use super::inline_text;
    use serde_json::Value;

    #[test]
    fn inline_text_cuts_on_a_character_boundary_and_skips_binary() {
        assert_eq!(inline_text(b"hello", 10), (Value::String("hello".into()), false));
        assert_eq!(inline_text("h\u{e9}llo".as_bytes(), 2), (Value::String("h".into()), true));
        assert_eq!(inline_text(b"a\0b", 10), (Value::Null, false));
        assert_eq!(inline_text(&[0xff, 0xfe], 10), (Value::Null, false));
    }
}
