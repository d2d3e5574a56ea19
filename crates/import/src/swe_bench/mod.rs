//! SWE-bench reports (docs/importers.md §9 `swe-bench`): not runs of their own but the
//! evaluator's verdict on runs given in the same call. Each report file is read whole
//! while planning (reports are small) into [`Plan::reports`], one [`ReportVerdict`] per
//! instance; `lib.rs` applies it to the run with the same `instance_id` that carries no
//! verdict of its own, and the command lists the reports no run matched.
//!
//! Three shapes are read:
//! - the harness's per-instance `report.json`: `{instance_id: {"resolved": bool,
//!   "patch_successfully_applied": ..., "tests_status": ...}, ...}`; the run's part is
//!   the instance's object;
//! - the harness's run summary (`{model}.{run_id}.json`, `make_run_report`):
//!   `resolved_ids` (resolved), `unresolved_ids` and `empty_patch_ids` (not resolved: an
//!   empty patch resolves nothing). `error_ids` and `incomplete_ids` were not graded and
//!   give no verdict. The run's part is an object built here,
//!   `{"instance_id": ID, "resolved": bool, "list": "resolved_ids"}`, since the summary
//!   holds no object per instance;
//! - OpenHands' evaluation log of one instance (`instance_ID.log` under
//!   `output.swebench_eval.logs/`), whose `[ID] report: {...}` line is the harness's
//!   report printed as a Python dict; the run's part is that dict as compact JSON.

use crate::common::pylit;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::{Format, Input, Plan, Refusal, ReportVerdict};

/// This source's name (section 9).
pub(crate) const FORMAT: Format = Format::new("swe-bench");

pub(crate) fn plan(mut inputs: Vec<Arc<Input>>, plan: &mut Plan) {
    // In path order, so which of two agreeing reports is kept does not depend on the walk.
    inputs.sort_by(|a, b| a.path.cmp(&b.path));
    for input in inputs {
        match reports_of(&input) {
            Ok(found) => {
                for report in found {
                    add(plan, report);
                }
            }
            Err(refusal) => plan.refuse(crate::swe_bench::FORMAT, refusal),
        }
    }
}

/// Two reports of one instance that disagree cannot both be the evaluator's word: the
/// first (in path order) stands and the other is refused for that instance.
fn add(plan: &mut Plan, report: ReportVerdict) {
    match plan.reports.get(&report.instance_id) {
        None => {
            plan.reports.insert(report.instance_id.clone(), report);
        }
        Some(kept) if kept.resolved == report.resolved => {}
        Some(kept) => {
            let reason = format!(
                "resolved is {} here but {} in {}; the first is kept",
                report.resolved,
                kept.resolved,
                kept.file.display()
            );
            let refusal = report.file.refuse(Some(format!("instance {}", report.instance_id)), reason);
            plan.refuse(crate::swe_bench::FORMAT, refusal);
        }
    }
}

fn reports_of(input: &Arc<Input>) -> Result<Vec<ReportVerdict>, Refusal> {
    let text = input.text()?;
    let body = text.trim_start_matches('\u{feff}').trim_start();
    if body.starts_with('{') {
        json_report(input, &text)
    } else {
        eval_log(input, &text).map(|r| vec![r])
    }
}

fn verdict(input: &Arc<Input>, instance_id: &str, resolved: bool, part: &Value) -> ReportVerdict {
    ReportVerdict {
        instance_id: instance_id.to_string(),
        resolved,
        file: Arc::clone(input),
        part_bytes: serde_json::to_vec(part).unwrap_or_default(),
    }
}

/// The 1-based line where `"key"` first appears, to point a refusal at it.
fn line_of(text: &str, key: &str) -> usize {
    let needle = format!("\"{key}\"");
    text.find(&needle).map_or(1, |at| 1 + text[..at].bytes().filter(|&b| b == b'\n').count())
}

fn json_report(input: &Arc<Input>, text: &str) -> Result<Vec<ReportVerdict>, Refusal> {
    let value: Value = epistore_package::json_from_str(text.trim_start_matches('\u{feff}')).map_err(|e| {
        Refusal::at_line(input.display(), e.line(), format!("not a SWE-bench report (malformed JSON: {e})"))
    })?;
    let Value::Object(map) = value else {
        return Err(input.refuse(None, "expected a SWE-bench report: a JSON object"));
    };
    if map.contains_key("resolved_ids") || map.contains_key("unresolved_ids") {
        run_summary(input, text, &map)
    } else {
        harness_report(input, text, &map)
    }
}

fn run_summary(input: &Arc<Input>, text: &str, map: &Map<String, Value>) -> Result<Vec<ReportVerdict>, Refusal> {
    let mut out = Vec::new();
    for (list, resolved) in [("resolved_ids", true), ("unresolved_ids", false), ("empty_patch_ids", false)] {
        let Some(ids) = map.get(list) else { continue };
        let expected = || {
            Refusal::at_line(
                input.display(),
                line_of(text, list),
                format!("expected `{list}` to be a list of instance ids"),
            )
        };
        for id in ids.as_array().ok_or_else(expected)? {
            let id = id.as_str().ok_or_else(expected)?;
            out.push(verdict(input, id, resolved, &json!({"instance_id": id, "resolved": resolved, "list": list})));
        }
    }
    Ok(out)
}

fn harness_report(input: &Arc<Input>, text: &str, map: &Map<String, Value>) -> Result<Vec<ReportVerdict>, Refusal> {
    if map.is_empty() {
        return Err(input.refuse(None, "an empty SWE-bench report: no instance in it"));
    }
    let mut out = Vec::new();
    for (id, report) in map {
        let resolved = report.get("resolved").and_then(Value::as_bool).ok_or_else(|| {
            Refusal::at_line(
                input.display(),
                line_of(text, id),
                format!("expected the report of instance `{id}`: an object with `resolved` true or false"),
            )
        })?;
        out.push(verdict(input, id, resolved, report));
    }
    Ok(out)
}

const REPORT_MARK: &str = "] report: {";

fn eval_log(input: &Arc<Input>, text: &str) -> Result<ReportVerdict, Refusal> {
    // The last report line is the grading that counted (a retried evaluation logs again).
    let Some((n, line, at)) =
        text.lines().enumerate().filter_map(|(n, l)| l.find(REPORT_MARK).map(|at| (n + 1, l, at))).last()
    else {
        return Err(input.refuse(
            None,
            "no `[ID] report: {...}` line: this evaluation log shows no graded SWE-bench report \
             (an empty patch, or an evaluation that did not finish)",
        ));
    };
    let literal = &line[at + REPORT_MARK.len() - 1..];
    let value = pylit::parse(literal).map_err(|e| {
        Refusal::at_line(input.display(), n, format!("the `report: {{...}}` line is not a Python dict literal: {e}"))
    })?;
    // `get_eval_report` returns `{instance_id: report}`; OpenHands prints the inner report.
    let mut report = &value;
    let mut id = line[..at].rfind('[').map(|s| line[s + 1..at].trim().to_string()).unwrap_or_default();
    if let Some(map) = value.as_object().filter(|m| m.len() == 1 && !m.contains_key("resolved")) {
        if let Some((key, inner)) = map.iter().next().filter(|(_, v)| v.is_object()) {
            id = key.clone();
            report = inner;
        }
    }
    if id.is_empty() {
        let name = input.file_name();
        id = name.strip_prefix("instance_").and_then(|n| n.strip_suffix(".log")).unwrap_or("").to_string();
    }
    if id.is_empty() {
        return Err(Refusal::at_line(input.display(), n, "the report line names no instance (`[ID] report:`)"));
    }
    let resolved = report
        .get("resolved")
        .and_then(Value::as_bool)
        .ok_or_else(|| Refusal::at_line(input.display(), n, "expected the report to have `resolved` True or False"))?;
    Ok(verdict(input, &id, resolved, report))
}

#[cfg(test)]
mod tests;

/// The registry's SWE-bench reader.
pub(crate) struct SweBench;

impl crate::Importer for SweBench {
    fn format(&self) -> Format {
        FORMAT
    }
    fn about(&self) -> &'static str {
        "SWE-bench harness reports: per-instance report.json, run summaries, OpenHands evaluation logs \
         (the verdicts of the runs of the same call)"
    }
    fn file_names(&self) -> &'static [&'static str] {
        &["report.json", "run_instance.log"]
    }
    fn detect(&self, s: &crate::Sniff) -> Option<crate::Confidence> {
        // OpenHands' SWE-bench evaluation log of one instance: its `[ID] report: {...}`
        // line is the harness's report.
        let log = s.text.contains("] report: {") || s.text.contains("Starting evaluation for instance ");
        if s.name.ends_with(".log") && log {
            return Some(crate::Confidence::Certain);
        }
        let report = s.near("resolved") && s.near("patch_successfully_applied");
        let document = s.first.is_none() && s.text.starts_with('{');
        // Terminal-Bench's run summary also lists `resolved_ids`, beside its trials.
        let terminal_bench = s.near("trial_name") && s.near("accuracy");
        (document && !terminal_bench && (s.near("resolved_ids") || report || s.near("tests_status")))
            .then_some(crate::Confidence::Shape)
    }
    fn plan(&self, inputs: Vec<Arc<Input>>, _: &crate::Options, plan: &mut Plan) {
        self::plan(inputs, plan)
    }
    fn read(&self, _: &crate::Unit, _: &crate::Context) -> Vec<Result<crate::Recorder, Refusal>> {
        // Reports are read while planning; they make no unit.
        Vec::new()
    }
}
