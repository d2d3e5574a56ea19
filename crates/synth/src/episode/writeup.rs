//! What a finished episode is written up as: its outcome (judged: label, verdicts,
//! admission, cost), its manifest, its reports, and the package files, built through the
//! package format's one writer.

use std::fmt::Write;

use epistore_package::{Layout, PackageBuilder, TraceKind, FORMAT_V1};
use serde_json::{json, Map, Value};

use super::sim::{AgentCheck, Rec, Sim};
use super::{
    Design, Package, Slot, FINAL_REPORT_JSON, FINAL_REPORT_MD, PATCH, REPO_SNAPSHOT, REPRO_LOG, TASK_SPEC,
    VERIFICATION_REPORT_JSON, VERIFICATION_REPORT_MD,
};
use crate::model::Task;
use crate::rng::round;
use crate::text::{self, rfc3339};
use crate::world::{COMPONENTS, LEVELS};

/// How the episode ended: what its outcome, manifest and files are written from.
#[derive(Clone, Copy)]
pub struct Ending {
    pub ended: i64,
    pub final_rev: usize,
    pub final_correct: bool,
    pub stop_reason: &'static str,
    pub claimed: bool,
    pub unsafe_action: bool,
}

/// The outcome document, with the label and requirement statuses the reports repeat.
pub struct Outcome {
    document: Value,
    label: &'static str,
    requirements: Vec<(String, &'static str)>,
}

/// Judges the episode: its label (now and then disagreeing with the evidence), verdicts,
/// admission, cost. Draws from the episode's stream, after the evaluation.
pub fn outcome(sim: &mut Sim, d: &Design, ending: &Ending) -> Outcome {
    let (task, model, level) = (sim.task, sim.model, sim.level);
    let Ending { ended, final_rev, final_correct, stop_reason, claimed, .. } = *ending;
    let req_status = requirement_statuses(sim, final_rev);
    let verified = level == 3 && req_status.iter().all(|(_, s)| *s == "verified");
    let label = outcome_label(sim, ending, &req_status, verified);
    let correct = delivered_verdict(sim, ending);
    let admission = admission(sim, ending, verified);
    let wall_ms = ended - sim.rec.started;
    let cost_in = sim.rec.tokens_in + sim.rec.context.len() as u64 * 3000;
    let usd = (cost_in as f64 * model.usd_in + sim.rec.tokens_out as f64 * model.usd_out) / 1e6;
    let mut outcome = Map::new();
    outcome.insert("label".into(), json!(label));
    outcome.insert("agent_reported_complete".into(), json!(claimed));
    outcome.insert("stop_reason".into(), json!(stop_reason));
    outcome.insert("correct".into(), json!(correct));
    outcome.insert("start_state".into(), json!(d.start_state.map(|c| if c { "correct" } else { "wrong" })));
    outcome.insert("admission".into(), json!(admission));
    if level > 0 || sim.rng.chance(0.9) {
        outcome.insert(
            "requirements".into(),
            Value::Array(req_status.iter().map(|(id, s)| json!({"id": id, "status": s})).collect()),
        );
    }
    outcome.insert(
        "budget".into(),
        json!({"actions_used": sim.rec.n_actions, "actions_max": task.actions_max, "exhausted": stop_reason == "budget_exhausted"}),
    );
    outcome.insert(
        "cost".into(),
        json!({"tokens_in": cost_in, "tokens_out": sim.rec.tokens_out, "usd": round(usd, 4), "wall_ms": wall_ms}),
    );
    if let Some(locations) = &task.fault_locations {
        outcome
            .insert("fault_locations".into(), Value::Array(locations.iter().map(|l| json!({"location": l})).collect()));
    }
    if task.graded {
        let score = match correct.unwrap_or(final_correct) {
            true if sim.rng.chance(0.5) => 1.0,
            true => round(sim.rng.uniform(0.75, 1.0), 2),
            false => round(sim.rng.uniform(0.0, 0.6), 2),
        };
        outcome.insert("score".into(), json!(score));
    }
    let timed_out_checks = sim.rec.agent_checks.iter().filter(|c| c.result == "timeout").count();
    if timed_out_checks > 0 {
        outcome.insert("notes".into(), json!(format!("{timed_out_checks} check(s) timed out; recorded, not retried")));
    }
    Outcome { document: Value::Object(outcome), label, requirements: req_status }
}

/// Each requirement's status on the final revision, from the agent checks that cover it:
/// a pass verifies it, else a failure fails it, else it stays unverified.
fn requirement_statuses(sim: &Sim, final_rev: usize) -> Vec<(String, &'static str)> {
    let on_final = |c: &&AgentCheck| c.revision == final_rev;
    sim.requirement_ids()
        .into_iter()
        .map(|id| {
            let covering: Vec<&AgentCheck> =
                sim.rec.agent_checks.iter().filter(on_final).filter(|c| c.requirements.contains(&id)).collect();
            let status = if covering.iter().any(|c| c.result == "pass") {
                "verified"
            } else if covering.iter().any(|c| c.result == "fail") {
                "failed"
            } else {
                "unverified"
            };
            (id, status)
        })
        .collect()
}

/// The outcome label the evidence supports (verified only at H3, assisted when anyone
/// helped), except now and then: labels are written by people and scripts.
fn outcome_label(sim: &mut Sim, ending: &Ending, req_status: &[(String, &str)], verified: bool) -> &'static str {
    let mut label = if ending.unsafe_action {
        "unsafe_invalid"
    } else if !ending.claimed {
        "failed"
    } else if verified {
        if sim.truth.assisted || sim.truth.missing_interventions > 0 {
            "assisted_verified_success"
        } else {
            "autonomous_verified_success"
        }
    } else if sim.level == 3 && req_status.iter().any(|(_, s)| *s == "failed") {
        "failed"
    } else {
        "unverified_success"
    };
    if sim.rng.chance(0.04) {
        label = *sim.rng.pick(&[
            "autonomous_verified_success",
            "assisted_verified_success",
            "unverified_success",
            "failed",
        ]);
    }
    label
}

/// The outcome's `correct`: the delivered state's verdict, usually the oracle's truth;
/// sometimes missing (more often after an infrastructure error), rarely wrong.
fn delivered_verdict(sim: &mut Sim, ending: &Ending) -> Option<bool> {
    if (ending.stop_reason == "infra_error" && sim.rng.chance(0.5)) || sim.rng.chance(0.05) {
        None
    } else if sim.rng.chance(0.03) {
        Some(!ending.final_correct) // the delivered-state verdict disagrees with the oracle
    } else {
        Some(ending.final_correct)
    }
}

/// The admission decision, made outside the agent: unrecorded more often the lower the
/// level, sometimes pending, else accepted with a chance that follows what the decider
/// sees (verification at H3; below it, whether the change is right or looks it).
fn admission(sim: &mut Sim, ending: &Ending, verified: bool) -> Option<&'static str> {
    let level = sim.level;
    if sim.rng.chance([0.45, 0.35, 0.25, 0.05][level]) {
        None
    } else if sim.rng.chance(0.04) {
        Some("pending")
    } else {
        let plaus = *sim.truth.plausibility.last().unwrap();
        let p = if ending.unsafe_action {
            0.1
        } else if !ending.claimed {
            0.03
        } else if level == 3 {
            if verified {
                0.9
            } else {
                0.25
            }
        } else if ending.final_correct {
            0.8
        } else {
            0.15 + 0.5 * plaus
        };
        Some(if sim.rng.chance(p) { "accepted" } else { "rejected" })
    }
}

/// The manifest: who ran what, when, under which harness, and whether the traces are
/// complete.
pub fn manifest(sim: &Sim, slot: &Slot, d: &Design, config_seed: u64, episode_label: &str, ending: &Ending) -> Value {
    let (task, model, repo, level) = (sim.task, sim.model, sim.repo, sim.level);
    let level_name = LEVELS[level];
    let mut tags = Map::new();
    tags.insert("study".into(), json!(if d.forced { "forced-revision" } else { "harness-ladder" }));
    if d.start_state.is_some() {
        tags.insert("start".into(), json!("common-state"));
    }
    tags.insert("population".into(), json!(format!("synth-{config_seed}")));
    json!({
        "format": FORMAT_V1,
        "episode": episode_label,
        "model": {"name": model.name, "version": model.version, "provider": model.provider},
        "harness": {"name": "ladder", "level": level_name, "version": "1.0", "components": COMPONENTS[level]},
        "task": {"id": task.id, "family": task.family, "cluster": task.cluster},
        "repository": {"url": repo.url, "commit": task.commit},
        "requirements": task.requirements.iter().map(|(id, text)| json!({"id": id, "text": text})).collect::<Vec<_>>(),
        "seed": slot.seed,
        "attempt": slot.attempt,
        "started_at": rfc3339(sim.rec.started),
        "ended_at": rfc3339(ending.ended),
        "trace_complete": sim.rec.trace_complete,
        "tags": tags,
    })
}

/// The file step: the episode's records, documents, patch, reports and artifacts, written
/// through the package format's one writer (synth's own key order, `Layout::AS_GIVEN`).
/// Draws from the episode's stream last: the swapped action lines, the patch, the report
/// variants.
pub fn assemble(
    mut sim: Sim,
    dir: String,
    manifest: Value,
    outcome: Outcome,
    episode_label: &str,
    ending: &Ending,
) -> Package {
    let (level, repo, task) = (sim.level, sim.repo, sim.task);
    let mut b = PackageBuilder::new(dir.as_str(), Layout::AS_GIVEN);
    b.manifest(manifest);
    b.outcome(outcome.document);
    add_traces(&mut b, &mut sim);
    if ending.final_rev > 0 {
        let patch = text::diff(&mut sim.rng, repo, &sim.rec.edited);
        add_file(&mut b, PATCH, patch.into_bytes());
    }
    add_file(&mut b, TASK_SPEC, task.spec_md.clone());
    if level >= 2 {
        add_file(&mut b, REPO_SNAPSHOT, task.snapshot.clone());
    }
    if level == 3 && !sim.rec.repro_log.is_empty() {
        add_file(&mut b, REPRO_LOG, std::mem::take(&mut sim.rec.repro_log).into_bytes());
    }
    add_reports(&mut b, &mut sim, episode_label, outcome.label, &outcome.requirements, ending);
    for (path, bytes) in std::mem::take(&mut sim.rec.artifacts) {
        add_file(&mut b, &path, bytes.into_owned());
    }

    let built = b.finish().unwrap_or_else(|p| panic!("synth built an invalid package: {p}"));
    Package { dir, files: built.raw.files.into_iter().map(|f| (f.path, f.bytes)).collect() }
}

/// The traces the level's recorder writes, with the simulation's seqs; now and then two
/// action lines swapped.
fn add_traces(b: &mut PackageBuilder, sim: &mut Sim) {
    let level = sim.level;
    // A trace the recorder does not record has no file at all; one it records may be an
    // empty file.
    let traces = [
        (TraceKind::Actions, true, std::mem::take(&mut sim.rec.actions)),
        (TraceKind::Tools, level >= 1, std::mem::take(&mut sim.rec.tools)),
        (TraceKind::Context, level >= 2, std::mem::take(&mut sim.rec.context)),
        (TraceKind::Verification, !sim.rec.checks.is_empty() || level == 3, std::mem::take(&mut sim.rec.checks)),
        (TraceKind::Attribution, level == 3, std::mem::take(&mut sim.rec.attribution)),
        (TraceKind::Entropy, level == 3, std::mem::take(&mut sim.rec.entropy)),
        (TraceKind::Interventions, sim.rec.record_interventions, std::mem::take(&mut sim.rec.interventions)),
    ];
    // The simulation handed out the seqs; pushed in seq order, the builder gives every
    // record the same one, and the seqs the recorder missed (`Recorder::gap`) stay unused.
    let mut records: Vec<(u64, TraceKind, Rec)> = Vec::new();
    for (kind, _, trace) in traces.into_iter().filter(|(_, recorded, _)| *recorded) {
        b.record_trace(kind);
        records.extend(trace.into_iter().map(|r| (r["seq"].as_u64().expect("Sim::record sets seq"), kind, r)));
    }
    records.sort_unstable_by_key(|(seq, ..)| *seq);
    for (seq, kind, record) in records {
        b.skip_seq(seq.checked_sub(b.next_seq()).expect("seqs are unique"));
        b.push(kind, record);
    }
    if sim.rng.chance(0.04) {
        // Records may appear in any order in a file (docs/format.md §5): a late flush.
        let n = b.records(TraceKind::Actions).map_or(0, <[Rec]>::len);
        if n >= 3 {
            let i = sim.rng.index(n - 1);
            let mut order: Vec<usize> = (0..n).collect();
            order.swap(i, i + 1);
            assert!(b.reorder(TraceKind::Actions, &order));
        }
    }
}

/// The agent's reports: the final report (markdown, now and then JSON) and at H3 the
/// verification report (markdown, sometimes JSON).
fn add_reports(
    b: &mut PackageBuilder,
    sim: &mut Sim,
    episode_label: &str,
    label: &str,
    requirements: &[(String, &str)],
    ending: &Ending,
) {
    let Ending { final_rev, stop_reason, .. } = *ending;
    let final_report = final_report(episode_label, sim.task, label, final_rev, requirements, stop_reason);
    if sim.rng.chance(0.1) {
        let v = json!({"episode": episode_label, "label": label, "final_revision": final_rev,
                       "stop_reason": stop_reason, "summary": final_report});
        add_file(b, FINAL_REPORT_JSON, report_json(&v));
    } else {
        add_file(b, FINAL_REPORT_MD, final_report.into_bytes());
    }
    if sim.level != 3 {
        return;
    }
    if sim.rng.chance(0.15) {
        let checks: Vec<Value> = sim
            .rec
            .agent_checks
            .iter()
            .map(|c| {
                json!({"check_id": c.check_id, "method": c.method, "revision": c.revision,
                       "result": c.result, "requirements": c.requirements})
            })
            .collect();
        let v = json!({"episode": episode_label, "final_revision": final_rev, "checks": checks});
        add_file(b, VERIFICATION_REPORT_JSON, report_json(&v));
    } else {
        let md = verification_report(episode_label, final_rev, &sim.rec.agent_checks);
        add_file(b, VERIFICATION_REPORT_MD, md.into_bytes());
    }
}

/// Adds one of synth's own files (patch, report, artifact): their paths are fixed
/// package paths, so a refusal is a bug here.
fn add_file(b: &mut PackageBuilder, path: &str, bytes: Vec<u8>) {
    b.file(path, bytes).unwrap_or_else(|p| panic!("synth wrote a file the package cannot hold: {p}"));
}

/// A JSON report artifact (`reports/*.json`): pretty, with a final newline. The report
/// is the agent's, not the package format's: the format's documents are the builder's.
fn report_json(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).expect("JSON values serialise");
    out.push(b'\n');
    out
}

fn final_report(
    label: &str,
    task: &Task,
    outcome_label: &str,
    final_rev: usize,
    reqs: &[(String, &str)],
    stop_reason: &str,
) -> String {
    let mut s = format!("# Final report: {label}\n\n## Diagnosis\n{}.\n\n## Change\n", task.summary);
    let _ = writeln!(
        s,
        "{final_rev} revision(s) of the working tree; stop reason `{stop_reason}`; label `{outcome_label}`.\n"
    );
    let _ = writeln!(s, "## Requirements");
    for ((id, status), (_, text)) in reqs.iter().zip(&task.requirements) {
        let _ = writeln!(s, "- {id} {text}: {status}");
    }
    s
}

fn verification_report(label: &str, final_rev: usize, checks: &[AgentCheck]) -> String {
    let mut s = format!(
        "# Verification report: {label}\n\nFinal revision: {final_rev}.\n\n| check | method | revision | requirements | result |\n|---|---|---|---|---|\n"
    );
    for c in checks {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} |",
            c.check_id,
            c.method,
            c.revision,
            c.requirements.join(", "),
            c.result
        );
    }
    let stale = checks.iter().filter(|c| c.revision < final_rev).count();
    let _ = writeln!(s, "\n{stale} of {} checks ran on an earlier revision than the final one.", checks.len());
    s
}
