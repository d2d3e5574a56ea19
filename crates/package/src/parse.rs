//! Validation of a package against `episode-package/1` (spec 6) and its typed form.

use std::collections::HashMap;

use serde_json::Value;

use crate::derive::derive_state;
use crate::error::Problem;
use crate::fields::{extra_text, nest_unknown, nest_unknown_items, FieldResult, Obj, Place};
use crate::model::*;
use crate::source::RawPackage;
use crate::FORMAT_V1;

const MANIFEST: &str = "manifest.json";
const OUTCOME: &str = "outcome.json";
/// Report files that, when written as `.json`, must be JSON.
const JSON_REPORTS: &[&str] = &["reports/verification.json", "reports/final.json"];

/// Validates a package and returns its typed form with derived state filled in.
pub fn parse_package(raw: &RawPackage) -> Result<Episode, Box<Problem>> {
    let name = raw.name.as_str();
    let required_file = |file: &str| {
        raw.file(file).ok_or_else(|| Box::new(place(name, file, None).problem(None, "required file is missing")))
    };
    let manifest_bytes = required_file(MANIFEST)?;
    let outcome_bytes = required_file(OUTCOME)?;

    let manifest_value = parse_json(name, MANIFEST, manifest_bytes)?;
    let manifest = parse_manifest(&Obj::new(&manifest_value, place(name, MANIFEST, None), "")?)?;
    let outcome_value = parse_json(name, OUTCOME, outcome_bytes)?;
    let outcome = parse_outcome(&Obj::new(&outcome_value, place(name, OUTCOME, None), "")?)?;
    for report in JSON_REPORTS {
        if let Some(bytes) = raw.file(report) {
            parse_json(name, report, bytes)?;
        }
    }

    let mut episode = Episode {
        manifest,
        outcome,
        actions: None,
        tools: None,
        context: None,
        checks: None,
        attributions: None,
        interventions: None,
        entropy: None,
        derived: Derived { final_revision: 0, posture: String::new() },
    };
    for (file, kind) in TRACE_FILES {
        let Some(bytes) = raw.file(file) else { continue };
        let lines = jsonl_lines(name, file, bytes)?;
        match kind {
            TraceKind::Actions => episode.actions = Some(records(name, file, &lines, parse_action)?),
            TraceKind::Tools => episode.tools = Some(records(name, file, &lines, parse_tool)?),
            TraceKind::Context => episode.context = Some(records(name, file, &lines, parse_context)?),
            TraceKind::Verification => episode.checks = Some(records(name, file, &lines, parse_check)?),
            TraceKind::Attribution => episode.attributions = Some(records(name, file, &lines, parse_attribution)?),
            TraceKind::Interventions => {
                episode.interventions = Some(records(name, file, &lines, parse_intervention)?)
            }
            TraceKind::Entropy => episode.entropy = Some(records(name, file, &lines, parse_entropy)?),
        }
    }
    check_references(name, &episode)?;
    derive_state(&mut episode).map_err(|(file, line, message)| {
        Box::new(Problem {
            package: name.to_string(),
            file: Some(file.to_string()),
            line: Some(line as usize),
            field: Some("revision".into()),
            message,
        })
    })?;
    Ok(episode)
}

fn place<'a>(package: &'a str, file: &'a str, line: Option<usize>) -> Place<'a> {
    Place { package, file, line }
}

fn utf8<'a>(package: &str, file: &str, bytes: &'a [u8]) -> Result<&'a str, Box<Problem>> {
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        Box::new(place(package, file, Some(line)).problem(None, "not valid UTF-8"))
    })
}

fn parse_json(package: &str, file: &str, bytes: &[u8]) -> Result<Value, Box<Problem>> {
    let text = utf8(package, file, bytes)?;
    serde_json::from_str(text).map_err(|e| {
        Box::new(place(package, file, Some(e.line())).problem(None, format!("not valid JSON: {e}")))
    })
}

/// Non-blank lines of a JSON Lines file as (1-based line number, value).
fn jsonl_lines(package: &str, file: &str, bytes: &[u8]) -> Result<Vec<(usize, Value)>, Box<Problem>> {
    let text = utf8(package, file, bytes)?;
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|e| {
            Box::new(place(package, file, Some(i + 1)).problem(None, format!("not valid JSON: {e}")))
        })?;
        out.push((i + 1, value));
    }
    Ok(out)
}

fn records<T>(
    package: &str,
    file: &str,
    lines: &[(usize, Value)],
    parse: fn(&Obj, Common) -> FieldResult<T>,
) -> Result<Vec<T>, Box<Problem>> {
    lines
        .iter()
        .map(|(line, value)| {
            let obj = Obj::new(value, place(package, file, Some(*line)), "")?;
            let common = Common {
                seq: obj.required("seq", obj.seq("seq"))?,
                line: *line as u32,
                ts: obj.timestamp("ts")?,
                grade: obj.enumerated("grade", GRADES)?.unwrap_or_else(|| "observed".into()),
                revision: 0,
                extra: None,
            };
            parse(&obj, common)
        })
        .collect()
}

const COMMON: &[&str] = &["seq", "ts", "grade"];

fn with_extra(obj: &Obj, mut common: Common, known: &[&str]) -> Common {
    let all: Vec<&str> = COMMON.iter().chain(known).copied().collect();
    common.extra = obj.extra(&all);
    common
}

fn parse_action(o: &Obj, common: Common) -> FieldResult<Action> {
    let kind = o.enumerated("kind", ACTION_KINDS)?;
    let mutates_by_default = matches!(kind.as_deref(), Some("edit" | "create" | "delete"));
    Ok(Action {
        common: with_extra(o, common, &["kind", "paths", "summary", "mutates", "ok", "tool_seq"]),
        paths: o.string_array("paths", None)?.unwrap_or_default(),
        summary: o.string("summary")?,
        mutates: o.boolean("mutates")?.unwrap_or(mutates_by_default),
        ok: o.boolean("ok")?.unwrap_or(true),
        tool_seq: o.seq("tool_seq")?,
        kind,
    })
}

fn parse_tool(o: &Obj, common: Common) -> FieldResult<Tool> {
    let exit_code = o.integer("exit_code", i64::MIN, i64::MAX)?;
    let timed_out = o.boolean("timed_out")?.unwrap_or(false);
    let recorded = o.enumerated("failure_type", FAILURE_TYPES)?;
    // The recorded type is the truth; otherwise derive it (spec 3).
    let failure_type = recorded.clone().unwrap_or_else(|| {
        if timed_out {
            "timeout".into()
        } else if exit_code.is_some_and(|c| c != 0) {
            "nonzero_exit".into()
        } else {
            "none".into()
        }
    });
    Ok(Tool {
        common: with_extra(
            o,
            common,
            &["tool", "command", "exit_code", "duration_ms", "timed_out", "failure_type", "recovered_by", "output"],
        ),
        tool: o.string_req("tool")?,
        command: o.string("command")?,
        exit_code,
        duration_ms: o.number("duration_ms", 0.0, f64::MAX)?,
        timed_out,
        recorded_failure_type: recorded,
        failure_type,
        recovered_by: o.seq("recovered_by")?,
        output: o.string("output")?,
    })
}

fn parse_context(o: &Obj, common: Common) -> FieldResult<ContextRecord> {
    Ok(ContextRecord {
        common: with_extra(o, common, &["artifact", "kind", "purpose", "used"]),
        artifact: o.string_req("artifact")?,
        kind: o.enumerated("kind", CONTEXT_KINDS)?,
        purpose: o.string("purpose")?,
        used: o.boolean("used")?.unwrap_or(true),
    })
}

fn parse_check(o: &Obj, common: Common) -> FieldResult<Check> {
    let actor = o.enumerated("actor", CHECK_ACTORS)?;
    let verifier = o.string("verifier")?;
    let verdict = o.enumerated("verdict", VERDICTS)?;
    if actor.as_deref() == Some("verifier") {
        if verifier.is_none() {
            return o.fail("verifier", "required when actor is verifier");
        }
        if verdict.is_none() {
            return o.fail("verdict", "required when actor is verifier");
        }
    }
    Ok(Check {
        common: with_extra(
            o,
            common,
            &[
                "check_id",
                "actor",
                "method",
                "command",
                "result",
                "exit_code",
                "duration_ms",
                "requirements",
                "revision",
                "suite_id",
                "verifier",
                "verdict",
                "score",
                "interpretation",
            ],
        ),
        check_id: o.string_req("check_id")?,
        actor,
        method: o.enumerated("method", CHECK_METHODS)?,
        command: o.string("command")?,
        result: o.enumerated("result", CHECK_RESULTS)?,
        exit_code: o.integer("exit_code", i64::MIN, i64::MAX)?,
        duration_ms: o.number("duration_ms", 0.0, f64::MAX)?,
        requirements: o.string_array("requirements", None)?.unwrap_or_default(),
        recorded_revision: o.seq("revision")?,
        bound_revision: 0,
        fresh: false,
        suite_id: o.string("suite_id")?,
        verifier,
        verdict,
        score: o.number("score", f64::MIN, f64::MAX)?,
        interpretation: o.string("interpretation")?,
    })
}

fn parse_attribution(o: &Obj, common: Common) -> FieldResult<Attribution> {
    Ok(Attribution {
        common: with_extra(
            o,
            common,
            &["failure_seq", "category", "responsibility", "location", "rank", "confidence", "evidence"],
        ),
        failure_seq: o.required("failure_seq", o.seq("failure_seq"))?,
        category: o.enumerated("category", ATTRIBUTION_CATEGORIES)?,
        responsibility: o.enumerated("responsibility", RESPONSIBILITIES)?,
        location: o.string("location")?,
        rank: o.integer("rank", 1, i64::MAX)?,
        confidence: o.number("confidence", 0.0, 1.0)?,
        evidence: o.seq_array("evidence")?.unwrap_or_default(),
    })
}

fn parse_intervention(o: &Obj, common: Common) -> FieldResult<Intervention> {
    Ok(Intervention {
        common: with_extra(
            o,
            common,
            &["actor", "kind", "reason", "missing_responsibility", "avoidable", "burden", "minutes"],
        ),
        actor: o.enumerated("actor", INTERVENTION_ACTORS)?,
        kind: o.enumerated("kind", INTERVENTION_KINDS)?,
        reason: o.string("reason")?,
        missing_responsibility: o.enumerated("missing_responsibility", RESPONSIBILITIES)?,
        avoidable: o.boolean("avoidable")?,
        burden: o.enumerated("burden", BURDENS)?,
        minutes: o.number("minutes", 0.0, f64::MAX)?,
    })
}

fn parse_entropy(o: &Obj, common: Common) -> FieldResult<EntropyFinding> {
    Ok(EntropyFinding {
        common: with_extra(o, common, &["category", "severity", "phase", "path", "note"]),
        category: o.enumerated("category", ENTROPY_CATEGORIES)?,
        severity: o.integer("severity", 0, 3)?,
        phase: o.enumerated("phase", ENTROPY_PHASES)?.unwrap_or_else(|| "post".into()),
        path: o.string("path")?,
        note: o.string("note")?,
    })
}

fn parse_manifest(o: &Obj) -> FieldResult<Manifest> {
    let format = o.string_req("format")?;
    if format != FORMAT_V1 {
        return o.fail("format", format!("unsupported format `{format}` (this build reads `{FORMAT_V1}`)"));
    }
    let model = o.required("model", o.object("model"))?;
    let harness = o.required("harness", o.object("harness"))?;
    let task = o.required("task", o.object("task"))?;
    let repository = o.object("repository")?;
    let mut requirements = Vec::new();
    let mut requirements_unknown = Vec::new();
    for (i, item) in o.array("requirements")?.into_iter().flatten().enumerate() {
        let r = Obj::new(item, o.place, &format!("requirements[{i}]."))?;
        requirements.push(Requirement { id: r.string_req("id")?, text: r.string("text")? });
        requirements_unknown.push(r.unknown(&["id", "text"]));
    }
    let tags = match o.object("tags")? {
        Some(t) => Some(Value::Object(t.map.clone()).to_string()),
        None => None,
    };
    let task_id = task.string_req("id")?;
    // Unknown fields are kept (spec 6), nested ones under their parent's key.
    let mut extra = o.unknown(&[
        "format",
        "episode",
        "model",
        "harness",
        "task",
        "repository",
        "requirements",
        "seed",
        "attempt",
        "started_at",
        "ended_at",
        "trace_complete",
        "tags",
    ]);
    nest_unknown(&mut extra, "model", model.unknown(&["name", "version", "provider"]));
    nest_unknown(&mut extra, "harness", harness.unknown(&["name", "level", "version", "components"]));
    nest_unknown(&mut extra, "task", task.unknown(&["id", "family", "cluster"]));
    if let Some(r) = &repository {
        nest_unknown(&mut extra, "repository", r.unknown(&["url", "commit"]));
    }
    nest_unknown_items(&mut extra, "requirements", requirements_unknown);
    Ok(Manifest {
        format,
        episode: o.string_req("episode")?,
        model: model.string_req("name")?,
        model_version: model.string("version")?,
        model_provider: model.string("provider")?,
        harness_name: harness.string("name")?,
        harness_level: harness.string_req("level")?,
        harness_version: harness.string("version")?,
        harness_components: harness.string_array("components", Some(RESPONSIBILITIES))?,
        task_family: task.string("family")?,
        cluster: task.string("cluster")?.unwrap_or_else(|| task_id.clone()),
        task: task_id,
        repository_url: repository.as_ref().map(|r| r.string("url")).transpose()?.flatten(),
        repository_commit: repository.as_ref().map(|r| r.string("commit")).transpose()?.flatten(),
        requirements,
        seed: o.integer("seed", i64::MIN, i64::MAX)?,
        attempt: o.integer("attempt", 1, i64::MAX)?.unwrap_or(1),
        started_at: o.timestamp("started_at")?,
        ended_at: o.timestamp("ended_at")?,
        trace_complete: o.boolean("trace_complete")?.unwrap_or(true),
        tags,
        extra: extra_text(extra),
    })
}

fn parse_outcome(o: &Obj) -> FieldResult<Outcome> {
    let label = o.required("label", o.enumerated("label", LABELS))?;
    let mut requirements = Vec::new();
    let mut requirements_unknown = Vec::new();
    for (i, item) in o.array("requirements")?.into_iter().flatten().enumerate() {
        let r = Obj::new(item, o.place, &format!("requirements[{i}]."))?;
        requirements.push(RequirementStatus {
            id: r.string_req("id")?,
            status: r.enumerated("status", REQUIREMENT_STATUSES)?,
        });
        requirements_unknown.push(r.unknown(&["id", "status"]));
    }
    let mut locations_unknown = Vec::new();
    let fault_locations = match o.array("fault_locations")? {
        None => None,
        Some(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let field = format!("fault_locations[{i}]");
                match item {
                    // The contract writes objects; a bare string is read the same way.
                    Value::String(s) => {
                        out.push(s.clone());
                        locations_unknown.push(Default::default());
                    }
                    value => {
                        let loc = Obj::new(value, o.place, &format!("{field}."))?;
                        out.push(loc.string_req("location")?);
                        locations_unknown.push(loc.unknown(&["location"]));
                    }
                }
            }
            Some(out)
        }
    };
    let budget = o.object("budget")?;
    let cost = o.object("cost")?;
    let count = |obj: &Option<Obj>, name: &str| obj.as_ref().map(|b| b.integer(name, 0, i64::MAX)).transpose();
    let amount = |obj: &Option<Obj>, name: &str| obj.as_ref().map(|b| b.number(name, 0.0, f64::MAX)).transpose();
    // Unknown fields are kept (spec 6), nested ones under their parent's key.
    let mut extra = o.unknown(&[
        "label",
        "agent_reported_complete",
        "stop_reason",
        "correct",
        "start_state",
        "admission",
        "requirements",
        "budget",
        "cost",
        "fault_locations",
        "score",
        "notes",
        "evidence_posture",
    ]);
    nest_unknown_items(&mut extra, "requirements", requirements_unknown);
    if let Some(b) = &budget {
        nest_unknown(&mut extra, "budget", b.unknown(&["actions_used", "actions_max", "exhausted"]));
    }
    if let Some(c) = &cost {
        nest_unknown(&mut extra, "cost", c.unknown(&["tokens_in", "tokens_out", "usd", "wall_ms"]));
    }
    nest_unknown_items(&mut extra, "fault_locations", locations_unknown);
    Ok(Outcome {
        label,
        agent_reported_complete: o.boolean("agent_reported_complete")?,
        stop_reason: o.enumerated("stop_reason", STOP_REASONS)?.unwrap_or_else(|| "completed".into()),
        correct: o.boolean("correct")?,
        start_state: o.enumerated("start_state", START_STATES)?,
        admission: o.enumerated("admission", ADMISSIONS)?,
        requirements,
        actions_used: count(&budget, "actions_used")?.flatten(),
        actions_max: count(&budget, "actions_max")?.flatten(),
        budget_exhausted: budget.as_ref().map(|b| b.boolean("exhausted")).transpose()?.flatten(),
        tokens_in: count(&cost, "tokens_in")?.flatten(),
        tokens_out: count(&cost, "tokens_out")?.flatten(),
        cost_usd: amount(&cost, "usd")?.flatten(),
        wall_ms: amount(&cost, "wall_ms")?.flatten(),
        fault_locations,
        score: o.number("score", 0.0, 1.0)?,
        notes: o.string("notes")?,
        recorded_posture: o.enumerated("evidence_posture", POSTURES)?,
        extra: extra_text(extra),
    })
}

/// `seq` is unique across all trace files, and every reference names an existing
/// record; `failure_seq` must name a tool or verification record.
fn check_references(package: &str, e: &Episode) -> Result<(), Box<Problem>> {
    let mut by_seq: HashMap<u64, (TraceKind, &'static str, u32)> = HashMap::new();
    let mut all: Vec<(TraceKind, &'static str, &Common)> = Vec::new();
    fn push<'a, T>(
        all: &mut Vec<(TraceKind, &'static str, &'a Common)>,
        kind: TraceKind,
        file: &'static str,
        items: &'a Option<Vec<T>>,
        common: fn(&T) -> &Common,
    ) {
        for item in items.iter().flatten() {
            all.push((kind, file, common(item)));
        }
    }
    push(&mut all, TraceKind::Actions, TRACE_FILES[0].0, &e.actions, |r| &r.common);
    push(&mut all, TraceKind::Tools, TRACE_FILES[1].0, &e.tools, |r| &r.common);
    push(&mut all, TraceKind::Context, TRACE_FILES[2].0, &e.context, |r| &r.common);
    push(&mut all, TraceKind::Verification, TRACE_FILES[3].0, &e.checks, |r| &r.common);
    push(&mut all, TraceKind::Attribution, TRACE_FILES[4].0, &e.attributions, |r| &r.common);
    push(&mut all, TraceKind::Interventions, TRACE_FILES[5].0, &e.interventions, |r| &r.common);
    push(&mut all, TraceKind::Entropy, TRACE_FILES[6].0, &e.entropy, |r| &r.common);
    for (kind, file, common) in &all {
        if let Some((_, first_file, first_line)) = by_seq.insert(common.seq, (*kind, file, common.line)) {
            return Err(Box::new(place(package, file, Some(common.line as usize)).problem(
                Some("seq".into()),
                format!("seq {} repeats (first used at {first_file}:{first_line})", common.seq),
            )));
        }
    }
    let missing = |file: &str, line: u32, field: &str, seq: u64| {
        Box::new(
            place(package, file, Some(line as usize))
                .problem(Some(field.into()), format!("refers to seq {seq}, which no record has")),
        )
    };
    for a in e.actions.iter().flatten() {
        if let Some(s) = a.tool_seq.filter(|s| !by_seq.contains_key(s)) {
            return Err(missing(TRACE_FILES[0].0, a.common.line, "tool_seq", s));
        }
    }
    for t in e.tools.iter().flatten() {
        if let Some(s) = t.recovered_by.filter(|s| !by_seq.contains_key(s)) {
            return Err(missing(TRACE_FILES[1].0, t.common.line, "recovered_by", s));
        }
    }
    for a in e.attributions.iter().flatten() {
        let file = TRACE_FILES[4].0;
        match by_seq.get(&a.failure_seq) {
            None => return Err(missing(file, a.common.line, "failure_seq", a.failure_seq)),
            Some((TraceKind::Tools | TraceKind::Verification, _, _)) => {}
            Some((kind, _, _)) => {
                return Err(Box::new(place(package, file, Some(a.common.line as usize)).problem(
                    Some("failure_seq".into()),
                    format!(
                        "seq {} is a {} record; failure_seq must name a tool or verification record",
                        a.failure_seq,
                        kind.name()
                    ),
                )))
            }
        }
        if let Some((i, s)) = a.evidence.iter().enumerate().find(|(_, s)| !by_seq.contains_key(s)) {
            return Err(missing(file, a.common.line, &format!("evidence[{i}]"), *s));
        }
    }
    Ok(())
}
