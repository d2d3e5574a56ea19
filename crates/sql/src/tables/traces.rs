//! One table per trace, plus the requirement and fault-location tables the metrics
//! need. Every row carries the episode's id and cell keys, its `seq`, file line,
//! timestamp, evidence grade, derived observed revision and unknown fields (`extra`).

use datafusion::arrow::record_batch::RecordBatch;
use epistore_package::{Common, Episode};

use super::columns::Columns;
use crate::error::Result;

/// A decoded episode with its hex id.
pub(crate) struct Loaded {
    pub id: String,
    pub episode: Episode,
}

/// A record of some trace, with the episode it belongs to.
pub(crate) struct Row<'a, T> {
    pub ep: &'a Loaded,
    pub rec: &'a T,
}

fn rows<'a, T>(loaded: &'a [Loaded], trace: impl Fn(&'a Episode) -> Option<&'a Vec<T>>) -> Vec<Row<'a, T>> {
    loaded.iter().flat_map(|ep| trace(&ep.episode).into_iter().flatten().map(move |rec| Row { ep, rec })).collect()
}

fn cell_keys<'a, T>(c: &mut Columns<'a, Row<'a, T>>) {
    c.str("episode_id", |r| Some(&r.ep.id));
    c.str("model", |r| Some(&r.ep.episode.manifest.model));
    c.str("harness_level", |r| Some(&r.ep.episode.manifest.harness_level));
    c.str("task", |r| Some(&r.ep.episode.manifest.task));
    c.str("cluster", |r| Some(&r.ep.episode.manifest.cluster));
}

fn common<'a, T>(c: &mut Columns<'a, Row<'a, T>>, get: fn(&T) -> &Common) {
    cell_keys(c);
    c.int("seq", move |r| Some(get(r.rec).seq as i64));
    c.int("line", move |r| Some(i64::from(get(r.rec).line)));
    c.time("ts", move |r| get(r.rec).ts.as_deref());
    c.str("grade", move |r| Some(get(r.rec).grade.as_str()));
    c.int("revision", move |r| Some(get(r.rec).revision as i64));
}

fn extra<'a, T>(c: &mut Columns<'a, Row<'a, T>>, get: fn(&T) -> &Common) {
    c.str("extra", move |r| get(r.rec).extra.as_deref());
}

pub(crate) fn actions(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.actions.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::Action| &r.common);
    c.str("kind", |r| r.rec.kind.as_deref());
    c.str_list("paths", |r| Some(&r.rec.paths));
    c.str("summary", |r| r.rec.summary.as_deref());
    c.bool("mutates", |r| Some(r.rec.mutates));
    c.bool("ok", |r| Some(r.rec.ok));
    c.int("tool_seq", |r| r.rec.tool_seq.map(|s| s as i64));
    c.str("diff", |r| r.rec.diff.as_deref());
    extra(&mut c, |r| &r.common);
    c.finish()
}

pub(crate) fn tools(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.tools.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::Tool| &r.common);
    c.str("tool", |r| Some(&r.rec.tool));
    c.str("command", |r| r.rec.command.as_deref());
    c.int("exit_code", |r| r.rec.exit_code);
    c.float("duration_ms", |r| r.rec.duration_ms);
    c.bool("timed_out", |r| Some(r.rec.timed_out));
    c.str("recorded_failure_type", |r| r.rec.recorded_failure_type.as_deref());
    c.str("failure_type", |r| Some(&r.rec.failure_type));
    c.bool("failed", |r| Some(r.rec.failed()));
    c.int("recovered_by", |r| r.rec.recovered_by.map(|s| s as i64));
    c.str("output", |r| r.rec.output.as_deref());
    // docs/format.md §9.3: the output file's text, capped; its whole size.
    c.str("output_text", |r| r.rec.output_text.as_deref());
    c.int("output_bytes", |r| r.rec.output_bytes.map(|n| n as i64));
    extra(&mut c, |r| &r.common);
    c.finish()
}

/// The conversation (revision 1.2, docs/format.md §9.1): one row per message record.
pub(crate) fn messages(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.messages.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::Message| &r.common);
    c.str("role", |r| Some(&r.rec.role));
    c.str("author", |r| r.rec.author.as_deref());
    c.str("text", |r| r.rec.text.as_deref());
    c.str("reasoning", |r| r.rec.reasoning.as_deref());
    c.str("tool_call_id", |r| r.rec.tool_call_id.as_deref());
    c.str("tool", |r| r.rec.tool.as_deref());
    c.str("arguments", |r| r.rec.arguments.as_deref());
    c.int("tool_seq", |r| r.rec.tool_seq.map(|s| s as i64));
    c.bool("is_error", |r| r.rec.is_error);
    c.int("tokens_in", |r| r.rec.tokens_in);
    c.int("tokens_out", |r| r.rec.tokens_out);
    // `model` is the episode's (a cell key, on every row); this is the message's own.
    c.str("message_model", |r| r.rec.model.as_deref());
    extra(&mut c, |r| &r.common);
    c.finish()
}

pub(crate) fn context(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.context.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::ContextRecord| &r.common);
    c.str("artifact", |r| Some(&r.rec.artifact));
    c.str("kind", |r| r.rec.kind.as_deref());
    c.str("purpose", |r| r.rec.purpose.as_deref());
    c.bool("used", |r| Some(r.rec.used));
    extra(&mut c, |r| &r.common);
    c.finish()
}

pub(crate) fn checks(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.checks.as_ref());
    let mut c = Columns::new(&rows);
    // `revision` here is the bound revision (docs/format.md §6.1); the observed revision at the
    // record's seq is `observed_revision`, the recorded field `recorded_revision`.
    cell_keys(&mut c);
    c.int("seq", |r| Some(r.rec.common.seq as i64));
    c.int("line", |r| Some(i64::from(r.rec.common.line)));
    c.time("ts", |r| r.rec.common.ts.as_deref());
    c.str("grade", |r| Some(r.rec.common.grade.as_str()));
    c.int("revision", |r| Some(r.rec.bound_revision as i64));
    c.int("observed_revision", |r| Some(r.rec.common.revision as i64));
    c.int("recorded_revision", |r| r.rec.recorded_revision.map(|v| v as i64));
    c.int("final_revision", |r| Some(r.ep.episode.derived.final_revision as i64));
    c.str("freshness", |r| Some(if r.rec.fresh { "current" } else { "stale" }));
    c.str("check_id", |r| Some(&r.rec.check_id));
    c.str("actor", |r| r.rec.actor.as_deref());
    c.str("method", |r| r.rec.method.as_deref());
    c.str("command", |r| r.rec.command.as_deref());
    c.str("result", |r| r.rec.result.as_deref());
    c.int("exit_code", |r| r.rec.exit_code);
    c.float("duration_ms", |r| r.rec.duration_ms);
    c.str_list("requirements", |r| Some(&r.rec.requirements));
    c.str("suite_id", |r| r.rec.suite_id.as_deref());
    c.str("verifier", |r| r.rec.verifier.as_deref());
    c.str("verdict", |r| r.rec.verdict.as_deref());
    c.float("score", |r| r.rec.score);
    c.str("interpretation", |r| r.rec.interpretation.as_deref());
    extra(&mut c, |r: &epistore_package::Check| &r.common);
    c.finish()
}

pub(crate) fn attributions(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.attributions.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::Attribution| &r.common);
    c.int("failure_seq", |r| Some(r.rec.failure_seq as i64));
    c.str("category", |r| r.rec.category.as_deref());
    c.str("responsibility", |r| r.rec.responsibility.as_deref());
    c.str("location", |r| r.rec.location.as_deref());
    c.int("rank", |r| r.rec.rank);
    c.float("confidence", |r| r.rec.confidence);
    c.int_list("evidence", |r| &r.rec.evidence);
    extra(&mut c, |r| &r.common);
    c.finish()
}

pub(crate) fn interventions(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.interventions.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::Intervention| &r.common);
    c.str("actor", |r| r.rec.actor.as_deref());
    c.str("kind", |r| r.rec.kind.as_deref());
    c.str("reason", |r| r.rec.reason.as_deref());
    c.str("missing_responsibility", |r| r.rec.missing_responsibility.as_deref());
    c.bool("avoidable", |r| r.rec.avoidable);
    c.str("burden", |r| r.rec.burden.as_deref());
    c.float("minutes", |r| r.rec.minutes);
    extra(&mut c, |r| &r.common);
    c.finish()
}

pub(crate) fn entropy(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.entropy.as_ref());
    let mut c = Columns::new(&rows);
    common(&mut c, |r: &epistore_package::EntropyFinding| &r.common);
    c.str("category", |r| r.rec.category.as_deref());
    c.int("severity", |r| r.rec.severity);
    c.str("phase", |r| Some(&r.rec.phase));
    c.str("path", |r| r.rec.path.as_deref());
    c.str("note", |r| r.rec.note.as_deref());
    extra(&mut c, |r| &r.common);
    c.finish()
}

/// Manifest requirements, with the outcome's status for each when it gives one.
pub(crate) fn requirements(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| Some(&e.manifest.requirements));
    let mut c = Columns::new(&rows);
    cell_keys(&mut c);
    c.str("requirement", |r| Some(&r.rec.id));
    c.str("text", |r| r.rec.text.as_deref());
    c.str("status", |r| {
        r.ep.episode.outcome.requirements.iter().find(|s| s.id == r.rec.id).and_then(|s| s.status.as_deref())
    });
    c.finish()
}

/// Ground-truth fault locations (outcome `fault_locations`), one row each.
pub(crate) fn fault_locations(loaded: &[Loaded]) -> Result<RecordBatch> {
    let rows = rows(loaded, |e| e.outcome.fault_locations.as_ref());
    let mut c = Columns::new(&rows);
    cell_keys(&mut c);
    c.str("location", |r| Some(r.rec.as_str()));
    c.finish()
}
