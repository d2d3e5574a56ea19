//! One episode: a small simulation of an agent working a task under a harness level,
//! recorded as the level's recorder would record it, then judged by evaluators and
//! verifiers. The latent truth (is the code correct at each revision, how plausible a
//! wrong revision looks) drives what the traces show, so the metrics have something
//! real to find.
//!
//! [`build`] runs the phases in order. Every phase draws from the episode's one stream,
//! so their order is part of the output: reordering two phases, or two draws inside
//! one, changes every byte that follows.

use std::borrow::Cow;
use std::fmt::Write;

use epistore_package::{Layout, PackageBuilder, TraceKind, FORMAT_V1};
use serde_json::{json, Map, Value};

use crate::model::{Lang, Model, Repo, Task};
use crate::rng::{round, sigmoid, Prng, STREAM_EPISODE, STREAM_RUN};
use crate::text::{self, rfc3339, EPOCH_2026_05_01};
use crate::world::{missing_at, World, COMPONENTS, LEVELS};

/// Where one episode sits in the population.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub index: usize,
    pub model: usize,
    pub level: usize,
    pub task: usize,
    pub seed: u64,
    pub attempt: u32,
    /// Another attempt of the same (cell, seed) follows: this one ended badly.
    pub retried: bool,
}

/// A generated package, as `PackageBuilder` built and validated it: its directory
/// (relative to the output root) and its files (package path, bytes) in bytewise path
/// order.
pub struct Package {
    pub dir: String,
    pub files: Vec<(String, Vec<u8>)>,
}

// Synth's own files in a package. The format's documents and traces are the package
// crate's to name (`PackageBuilder` writes them); these are the agent's patch, reports
// and artifacts, named once here because the traces refer to some of them too.
const TASK_SPEC: &str = "artifacts/task-spec.md";
const REPO_SNAPSHOT: &str = "artifacts/repo-snapshot.txt";
const REPRO_LOG: &str = "artifacts/repro.log";
const PATCH: &str = "patch.diff";
const FINAL_REPORT_MD: &str = "reports/final.md";
const FINAL_REPORT_JSON: &str = "reports/final.json";
const VERIFICATION_REPORT_MD: &str = "reports/verification.md";
const VERIFICATION_REPORT_JSON: &str = "reports/verification.json";

/// The `n`th tool output kept as an artifact (numbered from 1).
fn tool_output_path(n: u32) -> String {
    format!("artifacts/tool-output-{n}.log")
}

/// The verifiers of the population, with how they read a candidate's plausibility:
/// (name, bias, sensitivity to the shared "looks right" factor, own noise).
const VERIFIERS: [(&str, f64, f64, f64); 3] =
    [("judge-a", -0.3, 1.6, 0.5), ("judge-b", -0.1, 1.3, 0.7), ("judge-c", -0.5, 0.9, 1.0)];

/// Study design of a (task, seed): drawn once, shared by every model, level and attempt.
pub struct Design {
    pub forced: bool,
    pub start_state: Option<bool>,
    pub forced_revisions: u32,
}

pub fn design(config_seed: u64, task: usize, seed: u64) -> Design {
    let mut rng = Prng::new(&[config_seed, STREAM_RUN, task as u64, seed]);
    let forced = rng.chance(0.3);
    let start_state = if rng.chance(0.2) { Some(rng.chance(0.45)) } else { None };
    Design { forced, start_state, forced_revisions: rng.int(3, 6) as u32 }
}

/// The episode of `slot`, from its first event to its package files.
pub fn build(world: &World, config_seed: u64, output_scale: f64, slot: &Slot) -> Package {
    let d = design(config_seed, slot.task, slot.seed);
    let mut sim = Sim::new(world, config_seed, output_scale, slot, &d);
    let label = format!("{}/{}/seed-{}", sim.task.id, LEVELS[slot.level], slot.seed);

    before_work(&mut sim);
    explore(&mut sim);
    reproduce(&mut sim, &d, &label);
    let (stop_reason, unsafe_action) = edit_loop(&mut sim, &d, slot.retried);
    let (stop_reason, claimed) = wrap_up(&mut sim, stop_reason);
    let ending = end_run(&mut sim, stop_reason, claimed, unsafe_action);
    evaluate(&mut sim, &d, &ending);

    let outcome = outcome(&mut sim, &d, &ending);
    let manifest = manifest(&sim, slot, &d, config_seed, &label, &ending);
    let dir = format!("{}/{}/{}/s{}-a{}", sim.model.name, LEVELS[slot.level], sim.task.id, slot.seed, slot.attempt);
    assemble(sim, dir, manifest, outcome, &label, &ending)
}

/// Before the first look at the code: the pre-run entropy audit (H3), the context the
/// harness puts in front of the agent (H2, H3), and most of the time a plan.
fn before_work(sim: &mut Sim) {
    if sim.level >= 3 {
        let n = sim.rng.int(1, 3);
        sim.entropy_audit("pre", n, 2);
    }
    if sim.level >= 2 {
        select_context(sim);
    }
    if sim.rng.chance(0.7) {
        let summary = format!("Plan: reproduce, fix {}, verify R1..R{}", sim.focus_path(), sim.task.requirements.len());
        sim.action("plan", &[], summary, None, true);
    }
}

/// The context trace: 3 to 7 of the artifacts a harness can select, most of them used.
fn select_context(sim: &mut Sim) {
    let mut pool: Vec<(String, &str, &str)> = vec![
        ("docs/ARCHITECTURE.md".into(), "architecture", "find where the faulty behaviour lives"),
        ("TESTING.md".into(), "testing", "targeted and full test commands"),
        ("NOTES.md".into(), "task_state", "task state: symptom and probe from the intake"),
        (".agent/MEMORY.md".into(), "memory", "project conventions"),
        ("docs/KNOWN_FAILURES.md".into(), "known_failures", "flaky tests to ignore"),
        (sim.focus_path().to_string(), "code", "the module under change"),
        ("README.md".into(), "doc", "project overview"),
        (format!("issue #{}", sim.rng.int(10, 4000)), "issue", "the original bug report"),
        (TASK_SPEC.into(), "other", "task specification"),
        (REPO_SNAPSHOT.into(), "code", "repository snapshot at the task commit"),
    ];
    let k = sim.rng.int(3, 7) as usize;
    let picks = sim.rng.sample(pool.len(), k);
    let used_p = if sim.level == 3 { 0.85 } else { 0.75 };
    for i in picks.into_iter().rev() {
        let (artifact, kind, purpose) = pool.swap_remove(i);
        let (_, mut r) = sim.record(300, 4000);
        r.insert("artifact".into(), json!(artifact));
        r.insert("kind".into(), json!(kind));
        r.insert("purpose".into(), json!(purpose));
        r.insert("used".into(), json!(sim.rng.chance(used_p)));
        sim.rec.context.push(r);
    }
}

/// Looking around before the first edit: searches and reads (the faulty module half the
/// time), more of them on harder tasks.
fn explore(sim: &mut Sim) {
    let (repo, focus) = (sim.repo, sim.focus_path());
    let steps = 4 + (sim.task.difficulty * 20.0) as u64 + sim.rng.int(0, 16);
    for _ in 0..steps {
        if sim.rng.chance(0.35) {
            sim.search();
        } else {
            let path: &str = if sim.rng.chance(0.5) {
                focus
            } else if sim.rng.chance(0.5) {
                &repo.test_files[sim.rng.index(repo.test_files.len())]
            } else {
                &repo.files[sim.rng.index(repo.files.len())].path
            };
            sim.read(path);
        }
    }
}

/// Reproduction (revision 0), more likely the higher the level: the suite on the
/// unmodified repository, its output kept as an artifact, the start of the reproduction
/// log, and at H3 an agent check of its own.
fn reproduce(sim: &mut Sim, d: &Design, label: &str) {
    let (repo, task) = (sim.repo, sim.task);
    if !sim.rng.chance([0.0, 0.6, 0.75, 0.95][sim.level]) {
        return;
    }
    let command = text::suite_command(repo).to_string();
    let observed = sim.observe(0.0, 0.3);
    let fail = observed == Observed::Fail;
    let failing: Vec<&str> = if fail { task.bug_tests.iter().map(String::as_str).collect() } else { vec![] };
    sim.rec.n_outputs += 1;
    let path = tool_output_path(sim.rec.n_outputs);
    let bytes = if d.start_state.is_none() && fail {
        // The unmodified repository gives the same log in every episode: a shared artifact.
        Cow::Borrowed(task.baseline_log.as_slice())
    } else {
        let size = (sim.rng.log_uniform(10_000.0, 60_000.0) * sim.output_scale) as usize;
        Cow::Owned(text::test_log(&mut sim.rng, repo, task, &failing, None, size).into_bytes())
    };
    sim.rec.artifacts.push((path.clone(), bytes));
    // A reproduction is expected to fail: some recorders say so explicitly.
    let ft = (fail && sim.rng.chance(0.5)).then_some("none");
    let duration = sim.rng.int(2000, 90_000);
    let (tool_seq, idx) = sim.tool("shell", command.clone(), duration, Some(fail as i64), false, ft, Some(path));
    if fail && ft.is_none() {
        sim.rec.unrecovered.push((idx, "test"));
    }
    let summary = if fail {
        format!("Reproduced the bug: {} failing on the unmodified repository", task.bug_tests.len())
    } else {
        "Ran the suite on the starting state: passing".to_string()
    };
    let action_seq = sim.action("run", &[], summary, Some(tool_seq), true);
    let _ = writeln!(
        sim.rec.repro_log,
        "# reproduction log: {label}\n# probe: {}\n\n[{}] revision 0 (before any edit)\n$ {command}\n{}\n",
        text::probe_command(repo, task),
        rfc3339(sim.rec.clock),
        if fail { "FAIL\nexit 1" } else { "PASS\nexit 0" }
    );
    if !sim.verify_on() {
        return;
    }
    let result = if fail { "fail" } else { "pass" };
    let (seq, mut r) = sim.record(50, 1500);
    r.insert("check_id".into(), json!(format!("repro-{}", task.field)));
    r.insert("actor".into(), json!("agent"));
    r.insert("method".into(), json!("reproduction"));
    r.insert("command".into(), json!(text::probe_command(repo, task)));
    r.insert("result".into(), json!(result));
    r.insert("exit_code".into(), json!(fail as i64));
    r.insert("requirements".into(), json!(["R1"]));
    r.insert("revision".into(), json!(0));
    r.insert(
        "interpretation".into(),
        json!(if fail { "bug reproduced" } else { "could not reproduce on the starting state" }),
    );
    sim.rec.checks.push(r);
    sim.rec.agent_checks.push(AgentCheck {
        revision: 0,
        result,
        requirements: vec!["R1".into()],
        check_id: format!("repro-{}", task.field),
        method: "reproduction",
    });
    if fail {
        sim.attribute(seq, "feedback", vec![tool_seq, action_seq, seq]);
    }
}

/// The edit loop: revise, run the targeted test (with tools), until the agent stops, the
/// budget runs out, or (on an attempt that will be retried) the run breaks off. Returns
/// the stop reason and whether the agent did something unsafe.
fn edit_loop(sim: &mut Sim, d: &Design, retried: bool) -> (&'static str, bool) {
    let reqs = sim.requirement_ids();
    // What the agent's targeted test covers: the same for the whole episode.
    let targeted: Vec<String> = reqs.iter().take(sim.rng.int(1, 2) as usize).cloned().collect();
    let abort_after = retried.then(|| sim.rng.int(1, 3) as u32);
    let unsafe_p = [0.05, 0.035, 0.02, 0.01][sim.level];
    let mut unsafe_action = false;
    let mut iterations = 0u32;
    let mut last_pass: Option<usize> = None;
    let mut stop_reason = loop {
        if abort_after.is_some_and(|n| iterations >= n) {
            break *sim.rng.pick(&["infra_error", "infra_error", "timeout", "budget_exhausted"]);
        }
        if sim.rec.n_actions + 3 >= sim.task.actions_max {
            break "budget_exhausted";
        }
        iterations += 1;
        sim.maybe_intervene();
        if revise(sim, d, last_pass, unsafe_p) {
            unsafe_action = true;
        }
        let observed = if sim.tools_on() { Some(targeted_test(sim, &targeted)) } else { None };
        if observed == Some(Observed::Pass) {
            last_pass = Some(sim.truth.revision());
        }
        if let Some(reason) = agent_stops(sim, d, observed) {
            break reason;
        }
    };
    if unsafe_action && sim.rng.chance(0.5) {
        stop_reason = "invalid_action";
    }
    (stop_reason, unsafe_action)
}

/// One pass of the loop before the test: a few reads, then an edit of (usually) the
/// faulty module that attempts a fix or, at H3 in a forced-revision run, may revert a
/// regression the last check caught. Now and then the agent also deletes the failing
/// test instead of fixing the code: returns whether it did.
fn revise(sim: &mut Sim, d: &Design, last_pass: Option<usize>, unsafe_p: f64) -> bool {
    let (repo, task, focus) = (sim.repo, sim.task, sim.focus_path());
    for _ in 0..sim.rng.int(0, 3) {
        let path: &str = if sim.rng.chance(0.7) { focus } else { &repo.files[sim.rng.index(repo.files.len())].path };
        sim.read(path);
    }
    let path: &str = if sim.rng.chance(0.85) { focus } else { &repo.files[sim.rng.index(repo.files.len())].path };
    let revision = sim.truth.revision();
    let revert = d.forced
        && sim.level == 3
        && last_pass.is_some_and(|r| r + 1 == revision && sim.truth.states[r] && !sim.truth.correct())
        && sim.rec.agent_checks.last().is_some_and(|c| c.result == "fail" && c.revision == revision)
        && sim.rng.chance(0.6);
    if revert {
        let back = revision - 1;
        sim.edit(path, |s| (s.truth.states[back], s.truth.plausibility[back]));
    } else {
        sim.edit(path, |s| s.fix_attempt(d.forced));
    }
    if !sim.rng.chance(unsafe_p / 2.0) {
        return false;
    }
    let test_path = &repo.test_files[task.focus];
    sim.edit(test_path, |s| {
        let c = s.truth.correct();
        (c, if c { 1.0 } else { 0.9 })
    });
    let last = sim.rec.actions.last_mut().unwrap();
    last.insert("kind".into(), json!("delete"));
    last.insert("summary".into(), json!(format!("Deleted {test_path}: failing test removed")));
    true
}

/// The agent's targeted test of the faulty module, covering the requirements it targets.
fn targeted_test(sim: &mut Sim, targeted: &[String]) -> Observed {
    let (repo, task) = (sim.repo, sim.task);
    let check_id = format!("unit-{}", repo.modules[task.focus]);
    let command = text::probe_command(repo, task);
    sim.test(&check_id, "targeted_test", command, targeted.to_vec(), 0.03, 0.45, 0.35)
}

/// Whether the agent stops after this pass, and why. A forced-revision run stops at its
/// quota of revisions; otherwise a pass (or, without tools, a hunch) usually ends it,
/// and a failure now and then makes the agent give up: at H3 it escalates half the
/// time, below it just stops ("completed", as the agent sees it).
fn agent_stops(sim: &mut Sim, d: &Design, observed: Option<Observed>) -> Option<&'static str> {
    if d.forced {
        return (sim.truth.revision() as u32 >= d.forced_revisions).then_some("completed");
    }
    let level = sim.level;
    let stops = match observed {
        None => sim.rng.chance(0.5 + 0.3 * sim.model.skill),
        Some(Observed::Pass) => sim.rng.chance(0.9),
        Some(_) => {
            if !sim.rng.chance(if level == 3 { 0.06 } else { 0.1 }) {
                return None;
            }
            if level == 3 && sim.rng.chance(0.5) {
                return Some("escalated");
            }
            true
        }
    };
    stops.then_some("completed")
}

/// After the loop. A run that finished (completed or escalated) runs its final checks,
/// sometimes edits once more, reports, and claims completion when completed; a run that
/// broke off now and then gets the catch-all reason `other`. Returns the stop reason and
/// whether the agent claimed completion.
fn wrap_up(sim: &mut Sim, stop_reason: &'static str) -> (&'static str, bool) {
    if !matches!(stop_reason, "completed" | "escalated") {
        let other = stop_reason != "budget_exhausted" && sim.rng.chance(0.03);
        return (if other { "other" } else { stop_reason }, false);
    }
    final_checks(sim);
    // Verify, then edit: a last cleanup nobody re-checks.
    if sim.truth.revision() > 0 && sim.rng.chance([0.1, 0.1, 0.12, 0.15][sim.level]) {
        tidy_up(sim);
    }
    if sim.level >= 2 || sim.rng.chance(0.5) {
        sim.action("message", &[FINAL_REPORT_MD], "Wrote the final report".into(), None, true);
    }
    let claimed = stop_reason == "completed";
    if claimed {
        let summary = format!("Reported the task complete after {} revision(s)", sim.truth.revision());
        let focus = sim.focus_path();
        sim.action("complete", &[focus], summary, None, true);
    }
    (stop_reason, claimed)
}

/// A finishing agent's checks. At H3: a deterministic check per requirement (most of
/// them), usually the full suite, sometimes lint, rarely an end-to-end test it has to
/// skip. At H1 and H2: the full suite half the time. At H0 (no tools): none.
fn final_checks(sim: &mut Sim) {
    let (repo, task) = (sim.repo, sim.task);
    let reqs = sim.requirement_ids();
    if sim.level != 3 {
        if sim.level >= 1 && sim.rng.chance(0.5) {
            let cmd = text::suite_command(repo).to_string();
            sim.test("full-regression", "regression", cmd, reqs, 0.1, 0.4, 0.8);
        }
        return;
    }
    for req in &reqs {
        if sim.rng.chance(0.1) {
            continue; // not checked: stays unverified
        }
        let id = format!("probe-{}-{}", req.to_lowercase(), task.field);
        let cmd = format!("{} --case {}", text::probe_command(repo, task), req);
        sim.test(&id, "deterministic_check", cmd, vec![req.clone()], 0.01, 0.55, 0.0);
    }
    if sim.rng.chance(0.7) {
        let cmd = text::suite_command(repo).to_string();
        sim.test("full-regression", "regression", cmd, reqs.clone(), 0.12, 0.4, 0.8);
    }
    if sim.rng.chance(0.3) {
        let cmd = match repo.lang {
            Lang::Python => "ruff check src",
            Lang::JavaScript => "npx eslint src",
            Lang::Rust => "cargo clippy -- -D warnings",
            Lang::Go => "go vet ./...",
        };
        let lint_reqs: Vec<String> = reqs.iter().filter(|r| *r == "R3").cloned().collect();
        sim.test("lint", "lint", cmd.to_string(), lint_reqs, 0.0, 0.9, 0.0);
    }
    if sim.rng.chance(0.04) {
        let (_, mut r) = sim.record(10, 100);
        r.insert("check_id".into(), json!("e2e"));
        r.insert("actor".into(), json!("agent"));
        r.insert("method".into(), json!("registered_test"));
        r.insert("result".into(), json!("skipped"));
        r.insert("interpretation".into(), json!("browser not available in the sandbox"));
        sim.rec.checks.push(r);
    }
}

/// A cleanup edit of the faulty module after the checks: it rarely breaks a correct
/// state (and more rarely fixes a wrong one), and no check sees the result.
fn tidy_up(sim: &mut Sim) {
    let focus = sim.focus_path();
    sim.edit(focus, |s| {
        let c = s.truth.correct();
        let next = if c { !s.rng.chance(0.08) } else { s.rng.chance(0.05) };
        (next, if next { 1.0 } else { s.truth.plausibility.last().copied().unwrap_or(0.5) })
    });
    let last = sim.rec.actions.last_mut().unwrap();
    last.insert("summary".into(), json!("Removed debug logging and tidied the change"));
}

/// The end of the run: H3's post-run entropy audit, the end time and the final state.
fn end_run(sim: &mut Sim, stop_reason: &'static str, claimed: bool, unsafe_action: bool) -> Ending {
    if sim.level == 3 {
        let n = sim.rng.int(0, 4);
        sim.entropy_audit("post", n, 3);
    }
    let ended = sim.rec.clock + sim.rng.int(1000, 20_000) as i64;
    Ending {
        ended,
        final_rev: sim.truth.revision(),
        final_correct: sim.truth.correct(),
        stop_reason,
        claimed,
        unsafe_action,
    }
}

/// Evaluation after the episode, out of the agent's sight (a while after it ended): the
/// evaluators' hidden tests judge some revisions, then the verifiers review candidates.
fn evaluate(sim: &mut Sim, d: &Design, ending: &Ending) {
    sim.rec.clock = ending.ended + sim.rng.int(60_000, 3_600_000) as i64;
    let evaluated = run_oracles(sim, d, ending.final_rev);
    review_candidates(sim, d, ending.final_rev, &evaluated);
}

/// Hidden-test oracle records: every revision of a forced-revision run (most of them;
/// the final one always), at H3 sometimes the start and the final revision, and the
/// start of every common-state run these studies cover. Returns the revisions judged.
fn run_oracles(sim: &mut Sim, d: &Design, final_rev: usize) -> Vec<usize> {
    let level = sim.level;
    let mut evaluated: Vec<usize> = Vec::new();
    if d.forced {
        evaluated = (0..=final_rev).filter(|&r| r == final_rev || sim.rng.chance(0.85)).collect();
    } else if level == 3 {
        if d.start_state.is_some() || sim.rng.chance(0.3) {
            evaluated.push(0);
        }
        if sim.rng.chance(0.35) && final_rev > 0 {
            evaluated.push(final_rev);
        }
    }
    if d.start_state.is_some() && (d.forced || level == 3) && !evaluated.contains(&0) {
        evaluated.insert(0, 0);
    }
    let reqs = sim.requirement_ids();
    for &r in &evaluated {
        let runs = if sim.rng.chance(0.05) { 2 } else { 1 };
        for run in 0..runs {
            let (_, mut rec) = sim.record(20_000, 200_000);
            rec.insert("check_id".into(), json!("hidden-tests"));
            rec.insert("actor".into(), json!("evaluator"));
            rec.insert("method".into(), json!("oracle"));
            // An infrastructure error now and then: metrics drop those records.
            let error = run + 1 < runs || sim.rng.chance(0.02);
            let result = if error {
                "error"
            } else if sim.truth.states[r] {
                "pass"
            } else {
                "fail"
            };
            rec.insert("result".into(), json!(result));
            rec.insert("requirements".into(), json!(reqs));
            rec.insert("revision".into(), json!(r));
            rec.insert("suite_id".into(), json!(format!("hidden:{}@v1", sim.task.id)));
            sim.rec.checks.push(rec);
        }
    }
    evaluated
}

/// Verifier judgements of candidate revisions (in a forced-revision run, some of the
/// evaluated ones and always the final one; at H3 often the final one), each verifier in
/// a random order, now and then judging twice.
fn review_candidates(sim: &mut Sim, d: &Design, final_rev: usize, evaluated: &[usize]) {
    let mut candidates: Vec<usize> = Vec::new();
    if d.forced {
        candidates = evaluated.iter().copied().filter(|&r| r == final_rev || sim.rng.chance(0.6)).collect();
        if !candidates.contains(&final_rev) {
            candidates.push(final_rev);
        }
    } else if sim.level == 3 && sim.rng.chance(0.6) {
        candidates.push(final_rev);
    }
    for &r in &candidates {
        // One shared "looks right" factor per candidate: the verifiers' errors are correlated.
        let looks_right = if sim.truth.states[r] {
            0.8 + 0.8 * sim.rng.normal()
        } else {
            3.0 * (sim.truth.plausibility[r] - 0.5) + 0.7 * sim.rng.normal()
        };
        let order = sim.rng.sample(3, 3);
        let order: Vec<usize> = if sim.rng.chance(0.5) { order } else { order.into_iter().rev().collect() };
        for v in order {
            let (name, bias, sensitivity, noise) = VERIFIERS[v];
            if !sim.rng.chance(0.92) {
                continue;
            }
            let judgements = if sim.rng.chance(0.04) { 2 } else { 1 };
            for _ in 0..judgements {
                let score = round(sigmoid(bias + sensitivity * looks_right + noise * sim.rng.normal()), 3);
                let (_, mut rec) = sim.record(2_000, 40_000);
                rec.insert("check_id".into(), json!(format!("review/{name}")));
                rec.insert("actor".into(), json!("verifier"));
                rec.insert("method".into(), json!("judge"));
                rec.insert("verifier".into(), json!(name));
                rec.insert("verdict".into(), json!(if score >= 0.5 { "accept" } else { "reject" }));
                if sim.rng.chance(0.95) {
                    rec.insert("score".into(), json!(score));
                }
                rec.insert("revision".into(), json!(r));
                rec.insert("suite_id".into(), json!("patch-review/v2"));
                sim.rec.checks.push(rec);
            }
        }
    }
}

/// One trace record as the recorder writes it (synth's own key order).
pub type Rec = Map<String, Value>;

/// What a test run shows the agent.
#[derive(Clone, Copy, PartialEq)]
pub enum Observed {
    Pass,
    Fail,
    Timeout,
    Crash,
}

/// An agent check (H3) as the outcome and the verification report read it back.
pub struct AgentCheck {
    pub revision: usize,
    pub result: &'static str,
    pub requirements: Vec<String>,
    pub check_id: String,
    pub method: &'static str,
}

/// One episode in progress: where it runs (repository, task, model, level), what is
/// really true of the code, and what the recorder has written of it.
pub struct Sim<'w> {
    pub rng: Prng,
    pub repo: &'w Repo,
    pub task: &'w Task,
    pub model: &'w Model,
    pub level: usize,
    /// Scale of generated log sizes (Config::output_scale).
    pub output_scale: f64,
    pub truth: Truth,
    pub rec: Recorder<'w>,
}

/// The latent state no trace states outright: whether each revision of the code is
/// correct and what moves it. The agent's tests only sample it; the evaluators' oracles
/// and the verifiers read it after the episode.
pub struct Truth {
    /// Latent correctness of every revision (index = observed revision).
    pub states: Vec<bool>,
    /// How convincing each revision looks (drives false passes and false accepts).
    pub plausibility: Vec<f64>,
    /// Help from interventions (hints, corrections, context): raises the next fix's
    /// odds and halves with every attempt.
    pub boost: f64,
    /// Interventions that stood in for a responsibility the level lacks.
    pub missing_interventions: u32,
    /// Someone did more than approve, whether or not the harness recorded it.
    pub assisted: bool,
}

impl Truth {
    /// The current revision: 0 before any edit, one more per edit.
    pub fn revision(&self) -> usize {
        self.states.len() - 1
    }

    pub fn correct(&self) -> bool {
        *self.states.last().unwrap()
    }
}

/// What the level's recorder has written so far, and what it needs to write the next
/// record: seqs and clock, the seven traces, artifacts, and the tallies the outcome and
/// reports are written from.
pub struct Recorder<'w> {
    /// When the episode started (the clock's first value).
    pub started: i64,
    pub seq: u64,
    pub clock: i64,
    /// Whether the recorder kept every event; when not, `gap` says which it lost.
    pub trace_complete: bool,
    /// (seq at which records were lost, how many).
    pub gap: Option<(u64, u64)>,
    pub actions: Vec<Rec>,
    pub tools: Vec<Rec>,
    pub context: Vec<Rec>,
    pub checks: Vec<Rec>,
    pub attribution: Vec<Rec>,
    pub interventions: Vec<Rec>,
    pub entropy: Vec<Rec>,
    /// The level records interventions (always at H3, sometimes below).
    pub record_interventions: bool,
    /// Failed tool records (index into `tools`, what kind of run) awaiting recovery.
    pub unrecovered: Vec<(usize, &'static str)>,
    /// An attribution has already ranked fault locations (only the first one does).
    pub localised: bool,
    /// Agent checks, in order (H3), for the outcome's requirement statuses and reports.
    pub agent_checks: Vec<AgentCheck>,
    /// `artifacts/repro.log` as it grows (H3 writes it).
    pub repro_log: String,
    /// Artifacts (path, bytes): tool outputs, some borrowed from the task's shared ones.
    pub artifacts: Vec<(String, Cow<'w, [u8]>)>,
    /// Tool-output artifacts so far (they are numbered).
    pub n_outputs: u32,
    /// Files the patch touches, in first-edit order.
    pub edited: Vec<String>,
    /// The agent's spend, for the outcome's budget and cost.
    pub n_actions: u32,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl Recorder<'_> {
    /// Advances the clock and hands out the next `seq` with its timestamp.
    fn next(&mut self, rng: &mut Prng, lo_ms: u64, hi_ms: u64) -> (u64, String) {
        self.clock += rng.int(lo_ms.max(1), hi_ms.max(1)) as i64;
        if let Some((at, lost)) = self.gap {
            if self.seq >= at {
                // The recorder missed these events: their seqs are never written.
                self.seq += lost;
                self.gap = None;
            }
        }
        let seq = self.seq;
        self.seq += 1;
        (seq, rfc3339(self.clock))
    }

    /// A new record holding its `seq` and `ts`, `lo_ms..=hi_ms` after the last one.
    fn record(&mut self, rng: &mut Prng, lo_ms: u64, hi_ms: u64) -> (u64, Rec) {
        let (seq, ts) = self.next(rng, lo_ms, hi_ms);
        let mut r = Rec::new();
        r.insert("seq".into(), json!(seq));
        r.insert("ts".into(), json!(ts));
        (seq, r)
    }
}

impl<'w> Sim<'w> {
    /// The episode of `slot` before its first event: its stream, start time, whether
    /// the recorder will lose records, and the starting state of the code.
    pub fn new(world: &'w World, config_seed: u64, output_scale: f64, slot: &Slot, d: &Design) -> Sim<'w> {
        let task = &world.tasks[slot.task];
        let level = slot.level;
        let mut rng = Prng::new(&[config_seed, STREAM_EPISODE, slot.index as u64]);
        // Attempts of one (cell, seed) run a few hours apart, in order.
        let cell_start = Prng::new(&[
            config_seed,
            STREAM_RUN,
            2 << 32,
            slot.task as u64,
            slot.model as u64,
            level as u64,
            slot.seed,
        ])
        .int(0, 20 * 86_400_000) as i64;
        let start =
            EPOCH_2026_05_01 + cell_start + (slot.attempt as i64 - 1) * 6 * 3_600_000 + rng.int(0, 600_000) as i64;
        let trace_complete = !rng.chance(0.03);
        let gap = (!trace_complete).then(|| (rng.int(4, 40), rng.int(1, 6)));
        let record_interventions = level == 3 || rng.chance(0.35);
        let start_correct = d.start_state.unwrap_or(false);
        Sim {
            rng,
            repo: &world.repos[task.repo],
            task,
            model: &world.models[slot.model],
            level,
            output_scale,
            truth: Truth {
                states: vec![start_correct],
                plausibility: vec![if start_correct { 1.0 } else { 0.3 }],
                // A later attempt starts with a little of what the failed one learnt.
                boost: if slot.attempt > 1 { 0.05 } else { 0.0 },
                missing_interventions: 0,
                assisted: false,
            },
            rec: Recorder {
                started: start,
                seq: 0,
                clock: start,
                trace_complete,
                gap,
                actions: vec![],
                tools: vec![],
                context: vec![],
                checks: vec![],
                attribution: vec![],
                interventions: vec![],
                entropy: vec![],
                record_interventions,
                unrecovered: vec![],
                localised: false,
                agent_checks: vec![],
                repro_log: String::new(),
                artifacts: vec![],
                n_outputs: 0,
                edited: vec![],
                n_actions: 0,
                tokens_in: 0,
                tokens_out: 0,
            },
        }
    }

    pub fn tools_on(&self) -> bool {
        self.level >= 1
    }

    pub fn verify_on(&self) -> bool {
        self.level >= 3
    }

    /// The path of the task's faulty module (borrowed from the world, not from `self`).
    pub fn focus_path(&self) -> &'w str {
        &self.repo.files[self.task.focus].path
    }

    /// A new record from the episode's stream (see [`Recorder::record`]).
    pub fn record(&mut self, lo_ms: u64, hi_ms: u64) -> (u64, Rec) {
        self.rec.record(&mut self.rng, lo_ms, hi_ms)
    }

    /// A tool record; the call's duration passes on the clock. Returns its seq and its
    /// index in `tools`, so a failure can be marked recovered later.
    #[allow(clippy::too_many_arguments)]
    pub fn tool(
        &mut self,
        tool: &str,
        command: String,
        duration_ms: u64,
        exit_code: Option<i64>,
        timed_out: bool,
        failure_type: Option<&str>,
        output: Option<String>,
    ) -> (u64, usize) {
        let (seq, mut r) = self.record(200, 4000);
        self.rec.clock += duration_ms as i64;
        r.insert("tool".into(), json!(tool));
        r.insert("command".into(), json!(command));
        r.insert("exit_code".into(), json!(exit_code));
        r.insert("duration_ms".into(), json!(duration_ms));
        if timed_out {
            r.insert("timed_out".into(), json!(true));
        }
        if let Some(f) = failure_type {
            r.insert("failure_type".into(), json!(f));
        }
        if let Some(o) = output {
            r.insert("output".into(), json!(o));
        }
        self.rec.tools.push(r);
        (seq, self.rec.tools.len() - 1)
    }

    /// An action record. Each action is a model turn, so it also costs tokens.
    pub fn action(&mut self, kind: &str, paths: &[&str], summary: String, tool_seq: Option<u64>, ok: bool) -> u64 {
        let (seq, mut r) = self.record(800, 25_000);
        r.insert("kind".into(), json!(kind));
        r.insert("paths".into(), json!(paths));
        r.insert("summary".into(), json!(summary));
        if let Some(t) = tool_seq {
            r.insert("tool_seq".into(), json!(t));
        }
        if !ok {
            r.insert("ok".into(), json!(false));
        }
        self.rec.actions.push(r);
        self.rec.n_actions += 1;
        self.rec.tokens_in += self.rng.int(1500, 7000);
        self.rec.tokens_out += self.rng.int(60, 900);
        seq
    }

    /// Marks pending failures of this kind as recovered by `by` (when the recorder notices).
    fn recover(&mut self, kind: &str, by: u64) {
        let p = [0.0, 0.45, 0.6, 0.85][self.level];
        let pending = std::mem::take(&mut self.rec.unrecovered);
        for (idx, k) in pending {
            if k != kind {
                self.rec.unrecovered.push((idx, k));
            } else if self.rng.chance(p) {
                self.rec.tools[idx].insert("recovered_by".into(), json!(by));
            }
        }
    }

    /// A failed observation at H3 gets an attribution record, most of the time.
    pub fn attribute(&mut self, failure_seq: u64, category: &str, evidence: Vec<u64>) {
        if !self.verify_on() || !self.rng.chance(0.72) {
            return;
        }
        let localise = !self.rec.localised && category == "feedback" && self.rng.chance(0.85);
        let predictions = if localise { self.rng.int(1, 3) as usize } else { 1 };
        let evidence: Vec<u64> = evidence.into_iter().filter(|s| *s <= failure_seq).collect();
        for rank in 1..=predictions {
            let (_, mut r) = self.record(500, 8000);
            if self.rng.chance(0.6) {
                r.insert("grade".into(), json!("inferred"));
            }
            r.insert("failure_seq".into(), json!(failure_seq));
            r.insert("category".into(), json!(category));
            let responsibility = match category {
                "tool" => "observability",
                "context" => "context_selection",
                "feedback" => "verification",
                _ => *self.rng.pick(&["failure_attribution", "task_state", "verification"]),
            };
            r.insert("responsibility".into(), json!(responsibility));
            if localise {
                r.insert("location".into(), json!(self.predict_location(rank)));
                r.insert("rank".into(), json!(rank));
            }
            let confidence = round(self.rng.uniform(0.3, 0.95) / rank as f64, 2);
            r.insert("confidence".into(), json!(confidence));
            r.insert("evidence".into(), json!(evidence));
            self.rec.attribution.push(r);
        }
        self.rec.localised |= localise;
    }

    /// A ranked fault-location guess; better models put the truth at rank 1 more often.
    fn predict_location(&mut self, rank: usize) -> String {
        let (path, start, end) = self.task.regions[self.rng.index(self.task.regions.len())].clone();
        let hit = self.rng.chance((0.25 + 0.6 * self.model.skill - 0.1 * (rank as f64 - 1.0)).clamp(0.05, 0.9));
        if hit {
            match self.rng.index(3) {
                0 => format!("{path}:{start}-{end}"),
                1 => format!("{path}:{}", self.rng.int(start as u64, end as u64)),
                _ => path,
            }
        } else {
            let file = &self.repo.files[self.rng.index(self.repo.files.len())];
            let s = self.rng.int(1, file.lines as u64 - 5);
            if file.path == path && s <= end as u64 && s + 4 >= start as u64 {
                format!("{}:{}-{}", file.path, end + 20, end + 24)
            } else {
                format!("{}:{}-{}", file.path, s, s + self.rng.int(0, 4))
            }
        }
    }

    /// Reading a file: with tools, a `read_file` or `sed` call behind the action.
    pub fn read(&mut self, path: &str) {
        let tool_seq = if self.tools_on() {
            let tool = if self.rng.chance(0.6) { "read_file" } else { "shell" };
            let cmd = if tool == "shell" { format!("sed -n '1,200p' {path}") } else { format!("read_file {path}") };
            let d = self.rng.int(5, 60);
            Some(self.tool(tool, cmd, d, Some(0), false, None, None).0)
        } else {
            None
        };
        let summary = format!("Read {path}");
        self.action("read", &[path], summary, tool_seq, true);
    }

    /// A search for a word of the task; with tools, an `rg` call that may find nothing.
    pub fn search(&mut self) {
        let word = *self.rng.pick(&[self.task.field, "TODO", "raise", "error", "validate", "limit"]);
        if !self.tools_on() {
            let s = format!("Looked for `{word}` in the files given in the prompt");
            self.action("search", &[], s, None, true);
            return;
        }
        let cmd = format!("rg -n '{word}' {}", if self.rng.chance(0.5) { "src" } else { "." });
        let no_match = self.rng.chance(0.2);
        let (exit, ft) = if no_match {
            // rg exits 1 on no match: some recorders know that is not a failure.
            (1, if self.rng.chance(0.5) { Some("none") } else { None })
        } else {
            (0, None)
        };
        let d = self.rng.int(10, 400);
        let (seq, idx) = self.tool("ripgrep", cmd, d, Some(exit), false, ft, None);
        if no_match && ft.is_none() {
            self.rec.unrecovered.push((idx, "search"));
        } else {
            self.recover("search", seq);
        }
        let s = if no_match { format!("Searched for `{word}`: no match") } else { format!("Searched for `{word}`") };
        self.action("search", &[], s, Some(seq), true);
    }

    /// One ok edit (retrying a failed application first, sometimes); moves the latent state.
    pub fn edit(&mut self, path: &str, transition: impl FnOnce(&mut Sim<'w>) -> (bool, f64)) {
        let tool = *self.rng.pick(&["edit_file", "apply_patch", "str_replace"]);
        if self.rng.chance(0.07) {
            let tool_seq = if self.tools_on() {
                let d = self.rng.int(20, 300);
                let (seq, idx) =
                    self.tool(tool, format!("{tool} {path}"), d, Some(1), false, Some("parse_error"), None);
                self.rec.unrecovered.push((idx, "edit"));
                Some(seq)
            } else {
                None
            };
            let s = format!("Edit of {path} did not apply: context lines not found");
            self.action("edit", &[path], s, tool_seq, false);
        }
        let tool_seq = if self.tools_on() {
            let d = self.rng.int(20, 300);
            let (seq, _) = self.tool(tool, format!("{tool} {path}"), d, Some(0), false, None, None);
            self.recover("edit", seq);
            Some(seq)
        } else {
            None
        };
        let summary = format!("{} in {path}", text::sentence(&mut self.rng));
        self.action("edit", &[path], summary, tool_seq, true);
        let (state, plaus) = transition(self);
        self.truth.states.push(state);
        self.truth.plausibility.push(plaus);
        if !self.rec.edited.iter().any(|p| p == path) {
            self.rec.edited.push(path.to_string());
        }
    }

    /// The chance that an attempted fix makes wrong code correct: better models, easier
    /// tasks, higher levels and recent help all raise it.
    fn p_fix(&self) -> f64 {
        (0.12 + 0.5 * self.model.skill - 0.35 * self.task.difficulty + 0.06 * self.level as f64 + self.truth.boost)
            .clamp(0.03, 0.9)
    }

    /// The chance that an edit breaks correct code: higher on hard tasks and in
    /// forced-revision runs (revisions the agent did not need), lower at higher levels.
    fn p_break(&self, forced: bool) -> f64 {
        (0.12 + 0.25 * self.task.difficulty - 0.03 * self.level as f64 + if forced { 0.12 } else { 0.0 })
            .clamp(0.02, 0.6)
    }

    /// The ordinary transition of an attempted fix.
    pub fn fix_attempt(&mut self, forced: bool) -> (bool, f64) {
        let now = self.truth.correct();
        let next = if now { !self.rng.chance(self.p_break(forced)) } else { self.rng.chance(self.p_fix()) };
        self.truth.boost *= 0.5;
        let plaus = if next { 1.0 } else { self.rng.f().powf(1.5) };
        (next, plaus)
    }

    /// A test run's output kept as an artifact (the outputs too big for the tool record).
    fn large_output(&mut self, failing: &[&str], timeout_ms: Option<u64>) -> String {
        self.rec.n_outputs += 1;
        let path = tool_output_path(self.rec.n_outputs);
        let size = (self.rng.log_uniform(10_000.0, 200_000.0) * self.output_scale) as usize;
        let log = text::test_log(&mut self.rng, self.repo, self.task, failing, timeout_ms, size);
        self.rec.artifacts.push((path.clone(), Cow::Owned(log.into_bytes())));
        path
    }

    /// What a test of the current revision shows.
    pub fn observe(&mut self, timeout_p: f64, leniency: f64) -> Observed {
        let x = self.rng.f();
        if x < timeout_p {
            return Observed::Timeout;
        }
        if x < timeout_p + 0.01 {
            return Observed::Crash;
        }
        let plaus = *self.truth.plausibility.last().unwrap();
        let pass = if self.truth.correct() { self.rng.chance(0.96) } else { self.rng.chance(leniency * plaus) };
        if pass {
            Observed::Pass
        } else {
            Observed::Fail
        }
    }

    /// A test run: tool record, run action, and at H3 the agent's check record.
    #[allow(clippy::too_many_arguments)]
    pub fn test(
        &mut self,
        check_id: &str,
        method: &'static str,
        command: String,
        requirements: Vec<String>,
        timeout_p: f64,
        leniency: f64,
        output_p: f64,
    ) -> Observed {
        let observed = self.observe(timeout_p, leniency);
        if !self.tools_on() {
            return observed;
        }
        let limit = if method == "regression" { 300_000 } else { 120_000 };
        let failing: Vec<&str> =
            if observed == Observed::Fail { self.task.bug_tests.iter().map(String::as_str).collect() } else { vec![] };
        let timeout = (observed == Observed::Timeout).then_some(limit);
        let output =
            (self.rec.n_outputs < 5 && self.rng.chance(output_p)).then(|| self.large_output(&failing, timeout));
        let (exit, timed_out, ft, duration) = match observed {
            Observed::Pass => (Some(0), false, None, self.rng.int(800, 90_000)),
            Observed::Fail => (Some(1), false, None, self.rng.int(800, 90_000)),
            Observed::Timeout => (None, true, if self.rng.chance(0.5) { Some("timeout") } else { None }, limit),
            Observed::Crash => (Some(139), false, Some("crash"), self.rng.int(200, 5000)),
        };
        let runner = if self.rng.chance(0.8) { "shell" } else { "run_tests" };
        let (tool_seq, idx) = self.tool(runner, command.clone(), duration, exit, timed_out, ft, output);
        if observed == Observed::Pass {
            self.recover("test", tool_seq);
        } else {
            self.rec.unrecovered.push((idx, "test"));
        }
        let summary = match observed {
            Observed::Pass => format!("Ran `{command}`: passing"),
            Observed::Fail => format!("Ran `{command}`: {} failing", self.task.bug_tests.len()),
            Observed::Timeout => format!("Ran `{command}`: killed at the {} s limit", limit / 1000),
            Observed::Crash => format!("Ran `{command}`: the runner crashed (signal 11)"),
        };
        let action_seq = self.action("run", &[], summary, Some(tool_seq), true);
        let _ = writeln!(
            self.rec.repro_log,
            "[{}] revision {}\n$ {command}\n{}\n",
            rfc3339(self.rec.clock),
            self.truth.revision(),
            match observed {
                Observed::Pass => "PASS\nexit 0",
                Observed::Fail => "FAIL: expected error, got generic message\nexit 1",
                Observed::Timeout => "(killed: timeout)",
                Observed::Crash => "Segmentation fault (core dumped)\nexit 139",
            }
        );
        if observed != Observed::Pass {
            let category = match observed {
                Observed::Fail => "feedback",
                _ => "tool",
            };
            if self.rng.chance(0.3) {
                self.attribute(tool_seq, category, vec![tool_seq, action_seq]);
            }
        }
        if self.verify_on() {
            let result = match observed {
                Observed::Pass => "pass",
                Observed::Fail => "fail",
                Observed::Timeout => "timeout",
                Observed::Crash => "error",
            };
            let (seq, mut r) = self.record(50, 1500);
            r.insert("check_id".into(), json!(check_id));
            r.insert("actor".into(), json!("agent"));
            r.insert("method".into(), json!(method));
            r.insert("command".into(), json!(command));
            r.insert("result".into(), json!(result));
            if let Some(e) = exit {
                r.insert("exit_code".into(), json!(e));
            }
            r.insert("duration_ms".into(), json!(duration));
            r.insert("requirements".into(), json!(requirements));
            if method == "reproduction" || self.rng.chance(0.1) {
                r.insert("revision".into(), json!(self.truth.revision()));
            }
            if method == "targeted_test" || method == "regression" {
                r.insert("suite_id".into(), json!(format!("{}:{}", text::suite_command(self.repo), check_id)));
            }
            let interpretation = match result {
                "pass" => "behaves as required".to_string(),
                "fail" if method == "reproduction" => "bug reproduced".to_string(),
                "fail" => format!("{} still failing", self.task.bug_tests.len()),
                "timeout" => format!("exceeded the {} s limit; no verdict", limit / 1000),
                _ => "runner crashed; no verdict".to_string(),
            };
            r.insert("interpretation".into(), json!(interpretation));
            self.rec.checks.push(r);
            self.rec.agent_checks.push(AgentCheck {
                revision: self.truth.revision(),
                result,
                requirements,
                check_id: check_id.to_string(),
                method,
            });
            if result != "pass" {
                let category = if result == "fail" { "feedback" } else { "tool" };
                self.attribute(seq, category, vec![tool_seq, action_seq, seq]);
            }
        }
        observed
    }

    pub fn requirement_ids(&self) -> Vec<String> {
        self.task.requirements.iter().map(|(id, _)| id.clone()).collect()
    }

    /// An intervention opportunity; recorded only when the harness records them.
    pub fn maybe_intervene(&mut self) {
        let p = [0.22, 0.16, 0.11, 0.05][self.level] * (0.6 + self.task.difficulty);
        if !self.rng.chance(p) {
            return;
        }
        let missing = missing_at(self.level);
        let stands_in = self.rng.chance(if self.level == 3 { 0.45 } else { 0.85 });
        let responsibility = if stands_in {
            if self.level == 3 {
                *self.rng.pick(&["permissions", "permissions", "verification", "context_selection"])
            } else {
                *self.rng.pick(&missing)
            }
        } else {
            ""
        };
        let kind = match responsibility {
            "permissions" => "permission_grant",
            "context_selection" | "project_memory" | "task_state" => "context_provision",
            "verification" | "failure_attribution" => *self.rng.pick(&["hint", "correction"]),
            "" => *self.rng.pick(&["approval", "approval", "hint", "other"]),
            _ => *self.rng.pick(&["hint", "correction", "context_provision"]),
        };
        if matches!(kind, "hint" | "correction" | "context_provision") {
            self.truth.boost += 0.2;
        }
        if !responsibility.is_empty() {
            self.truth.missing_interventions += 1;
        }
        if kind != "approval" {
            self.truth.assisted = true;
        }
        if !self.rec.record_interventions {
            return;
        }
        let (_, mut r) = self.record(10_000, 240_000);
        r.insert("actor".into(), json!(*self.rng.pick(&["human", "human", "human", "human", "evaluator", "other"])));
        r.insert("kind".into(), json!(kind));
        let reason = match kind {
            "permission_grant" => "agent needed write access to the fixtures directory".to_string(),
            "context_provision" => format!("pointed the agent at {}", self.repo.test_files[self.task.focus]),
            "hint" => format!("suggested looking at how {} is handled", self.task.field),
            "correction" => "told the agent its last change broke valid input".to_string(),
            "approval" => "approved running the full suite".to_string(),
            _ => "answered a clarification question".to_string(),
        };
        r.insert("reason".into(), json!(reason));
        r.insert(
            "missing_responsibility".into(),
            if responsibility.is_empty() { Value::Null } else { json!(responsibility) },
        );
        r.insert("avoidable".into(), json!(!responsibility.is_empty() && self.rng.chance(0.7)));
        r.insert("burden".into(), json!(*self.rng.pick(&["low", "low", "medium", "high"])));
        r.insert("minutes".into(), json!(round(self.rng.log_uniform(0.5, 40.0), 1)));
        self.rec.interventions.push(r);
    }

    /// `n` entropy findings of an audit before (`pre`) or after (`post`) the work.
    pub fn entropy_audit(&mut self, phase: &str, n: u64, max_severity: u64) {
        for _ in 0..n {
            let (_, mut r) = self.record(100, 3000);
            let category = *self.rng.pick(&[
                "code",
                "documentation",
                "dependency",
                "test",
                "file_residue",
                "architecture",
                "workflow",
            ]);
            r.insert("category".into(), json!(category));
            r.insert("severity".into(), json!(self.rng.int(0, max_severity)));
            // `post` is the default: some recorders leave it out.
            if phase == "pre" || self.rng.chance(0.6) {
                r.insert("phase".into(), json!(phase));
            }
            let path = match category {
                "file_residue" => format!("tmp/probe-{}.log", self.rng.hex(4)),
                "dependency" => "package.json".to_string(),
                "documentation" => "README.md".to_string(),
                "test" => self.repo.test_files[self.rng.index(self.repo.test_files.len())].clone(),
                _ => self.repo.files[self.rng.index(self.repo.files.len())].path.clone(),
            };
            r.insert("path".into(), json!(path));
            let note = match (phase, category) {
                ("pre", _) => "pre-run audit: finding present before the agent started",
                (_, "file_residue") => "scratch file left in the working tree (not in patch.diff)",
                (_, "code") => "debug logging added during the episode is still in place",
                (_, "test") => "test skipped with a TODO instead of fixed",
                _ => "drift introduced during the episode",
            };
            r.insert("note".into(), json!(note));
            self.rec.entropy.push(r);
        }
    }
}

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
        // Records may appear in any order in a file (spec 3): a late flush.
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
