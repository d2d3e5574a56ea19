//! One episode: a small simulation of an agent working a task under a harness level,
//! recorded as the level's recorder would record it, then judged by evaluators and
//! verifiers. The latent truth (is the code correct at each revision, how plausible a
//! wrong revision looks) drives what the traces show, so the metrics have something
//! real to find.
//!
//! [`build`] runs the phases in order; [`sim`] holds the simulation (truth, recorder,
//! the agent's moves) and [`writeup`] turns a finished episode into its package. Every
//! phase draws from the episode's one stream, so their order is part of the output:
//! reordering two phases, or two draws inside one, changes every byte that follows.

mod sim;
mod writeup;

use std::borrow::Cow;
use std::fmt::Write;

use serde_json::json;

use crate::model::Lang;
use crate::rng::{round, sigmoid, Prng, STREAM_RUN};
use crate::text::{self, rfc3339};
use crate::world::{World, LEVELS};
use sim::{AgentCheck, Observed, Sim};
use writeup::Ending;

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

    let outcome = writeup::outcome(&mut sim, &d, &ending);
    let manifest = writeup::manifest(&sim, slot, &d, config_seed, &label, &ending);
    let dir = format!("{}/{}/{}/s{}-a{}", sim.model.name, LEVELS[slot.level], sim.task.id, slot.seed, slot.attempt);
    writeup::assemble(sim, dir, manifest, outcome, &label, &ending)
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
