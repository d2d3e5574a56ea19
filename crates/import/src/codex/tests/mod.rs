//! The fixture run (a rollout and the same run's `codex exec --json`), asserted by hand
//! from the logs; `handmade` holds the shapes the fixtures do not (the old rollout, an
//! extended new one, the older and oldest exec outputs); `content` the run's content
//! (messages, tool outputs, diffs) from both.

use std::path::{Path, PathBuf};

use epistore_package::Episode;
use serde_json::{json, Value};

use crate::testing::{fixture, import_ok, import_paths};
use crate::{Options, Run};

const ROLLOUT: &str = "codex/generated/rollout-2026-12-01T09-03-11-01a230d7-ffed-7313-9f3e-3e14281f1679.jsonl";
const EXEC: &str = "codex/generated/codex-exec--json.stdout.jsonl";
const THREAD: &str = "01a230d7-ffed-7313-9f3e-3e14281f1679";

fn with_model(m: &str) -> Options {
    Options { model: Some(m.into()), ..Options::default() }
}

fn write(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let text: String = lines.iter().map(|l| format!("{}\n", serde_json::to_string(l).unwrap())).collect();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn one(paths: &[PathBuf], options: &Options) -> Run {
    let (plan, runs) = import_paths(paths, options);
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(runs.len(), 1);
    runs.into_iter().next().unwrap().unwrap_or_else(|e| panic!("refused: {e}"))
}

/// (tool, exit code) of every tools record, in order.
fn tools(e: &Episode) -> Vec<(String, Option<i64>)> {
    e.tools.as_ref().unwrap().iter().map(|t| (t.tool.clone(), t.exit_code)).collect()
}

/// (method, result, bound revision) of every check.
fn checks(e: &Episode) -> Vec<(String, String, u64)> {
    let checks = e.checks.as_ref().unwrap();
    checks.iter().map(|c| (c.method.clone().unwrap(), c.result.clone().unwrap(), c.bound_revision)).collect()
}

/// (kind, paths, ok) of every mutating action.
fn mutations(e: &Episode) -> Vec<(String, Vec<String>, bool)> {
    let actions = e.actions.as_ref().unwrap();
    actions.iter().filter(|a| a.mutates).map(|a| (a.kind.clone().unwrap(), a.paths.clone(), a.ok)).collect()
}

fn interventions(e: &Episode) -> Vec<(String, String)> {
    let list = e.interventions.as_ref().unwrap();
    list.iter().map(|i| (i.kind.clone().unwrap(), i.reason.clone().unwrap_or_default())).collect()
}

fn claims(e: &Episode) -> usize {
    e.actions.as_ref().unwrap().iter().filter(|a| a.kind.as_deref() == Some("complete")).count()
}

fn has_file(run: &Run, path: &str) -> bool {
    run.package.raw.files.iter().any(|f| f.path == path)
}

#[test]
fn fixture_rollout_by_hand() {
    let runs = import_ok(&[ROLLOUT], &Options::default());
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    let m = &e.manifest;
    // line 1 session_meta: id, cwd /srv/greet (no git remote: the directory's name),
    // cli_version; lines 6-7 turn_context / thread_settings_applied: the model.
    assert_eq!(m.episode, THREAD);
    assert_eq!(m.task, THREAD);
    assert_eq!(m.cluster, "greet");
    assert_eq!(m.model, "gpt-5.1-codex");
    assert_eq!(m.harness_name.as_deref(), Some("codex"));
    assert_eq!(m.harness_version.as_deref(), Some("0.171.0"));
    assert_eq!(m.started_at.as_deref(), Some("2026-12-01T09:03:11.860Z"));
    assert_eq!(m.ended_at.as_deref(), Some("2026-12-01T09:03:12.477Z"));
    let prov = m.provenance().unwrap();
    assert_eq!(prov["source_format"], json!("codex"));
    assert_eq!(prov["source_version"], json!("0.171.0"));
    assert_eq!(prov["source_files"].as_array().unwrap().len(), 1);
    assert_eq!(prov["opaque_calls"], json!(0));

    // Four function_call exec_command lines (10, 17, 22, 27): one tools record each,
    // the exit codes from the CommandExecution items (14, 24, 29: observed) and, for the
    // patch (17), the "Exit code: 0" its output (20) writes.
    assert_eq!(
        tools(e),
        vec![
            ("exec_command".into(), Some(1)),
            ("exec_command".into(), Some(0)),
            ("exec_command".into(), Some(0)),
            ("exec_command".into(), Some(0)),
        ]
    );
    let t = e.tools.as_ref().unwrap();
    assert_eq!(t[0].command.as_deref(), Some("cat greet.py; python3 test_greet.py"));
    assert_eq!(t[0].duration_ms, Some(69.329269)); // line 14 duration {secs 0, nanos 69329269}
    assert_eq!(t[0].failure_type, "nonzero_exit");
    // The patch's exit code is read from its output's "Exit code: 0" (line 20); the
    // record is the observed edit's.
    assert_eq!(t[1].common.grade, "observed");

    // line 19 FileChange (update greet.py, completed) and line 27 `echo ... > NOTES.md`.
    assert_eq!(
        mutations(e),
        vec![("edit".into(), vec!["greet.py".into()], true), ("edit".into(), vec!["NOTES.md".into()], true)]
    );
    assert_eq!(e.derived.final_revision, 2);

    // `python3 test_greet.py` names a test file: targeted. Line 10 fails (the last
    // segment of a `;` chain, exit 1) at revision 0; line 22 passes at revision 1.
    assert_eq!(checks(e), vec![("targeted_test".into(), "fail".into(), 0), ("targeted_test".into(), "pass".into(), 1)]);
    let c = e.checks.as_ref().unwrap();
    assert_eq!(c[0].common.grade, "derived");
    assert_eq!(c[1].common.grade, "observed");
    assert!(c.iter().all(|c| c.actor.as_deref() == Some("agent")));
    // NOTES.md came after the passing check: no check on revision 2.
    assert_eq!(e.derived.posture, "stale");

    // line 9 is the prompt; no other person message, abort or denial.
    assert!(interventions(e).is_empty());
    // line 36 task_complete.
    assert_eq!(claims(e), 1);
    let done = e.actions.as_ref().unwrap().last().unwrap();
    assert_eq!(done.kind.as_deref(), Some("complete"));
    assert_eq!(
        done.summary.as_deref(),
        Some("greet now returns \"Hello, NAME!\"; python3 test_greet.py passes. I also added NOTES.md.")
    );
    let o = &e.outcome;
    assert_eq!(o.agent_reported_complete, Some(true));
    assert_eq!(o.stop_reason, "completed");
    assert_eq!(o.correct, None);
    assert_eq!(o.label, None);
    assert_eq!(o.score, None);
    // line 35: the last token_count total (not a sum of totals).
    assert_eq!((o.tokens_in, o.tokens_out), (Some(7000), Some(200)));
    assert!(has_file(&runs[0], &format!("artifacts/source/{}", ROLLOUT.rsplit('/').next().unwrap())));
    // No turn_diff in the log: patch.diff is derived from the edit's diff (see
    // `content::fixture_rollout_content_by_hand`).
    assert!(has_file(&runs[0], "patch.diff"));
}

#[test]
fn fixture_exec_json_alone_needs_a_model() {
    // The exec output names no model (item_0's message is free text), so it is refused
    // without --model, and imported with it.
    let (_, runs) = import_paths(&[fixture(EXEC)], &Options::default());
    let err = runs.into_iter().next().unwrap().unwrap_err();
    assert!(err.reason.contains("names no model"), "{err}");

    let runs = import_ok(&[EXEC], &with_model("gpt-5.1-codex"));
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, THREAD); // line 1 thread.started
    assert_eq!(e.manifest.model, "gpt-5.1-codex");
    assert_eq!(e.manifest.started_at, None); // the output carries no timestamps
                                             // items 2, 3, 4, 5: command, file change, command, command (no tool names: shell / edit).
    assert_eq!(
        tools(e),
        vec![("shell".into(), Some(1)), ("edit".into(), None), ("shell".into(), Some(0)), ("shell".into(), Some(0))]
    );
    let t = e.tools.as_ref().unwrap();
    assert_eq!(t[0].command.as_deref(), Some("/bin/bash -lc 'cat greet.py; python3 test_greet.py'"));
    assert_eq!(
        mutations(e),
        vec![("edit".into(), vec!["/srv/greet/greet.py".into()], true), ("edit".into(), vec!["NOTES.md".into()], true)]
    );
    assert_eq!(e.derived.final_revision, 2);
    assert_eq!(checks(e), vec![("targeted_test".into(), "fail".into(), 0), ("targeted_test".into(), "pass".into(), 1)]);
    assert_eq!(e.derived.posture, "stale");
    assert!(interventions(e).is_empty());
    assert_eq!(claims(e), 1); // turn.completed, after item_6's message
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed"); // item_0 is a non-fatal error item
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(7000), Some(200)));
    assert_eq!((e.outcome.correct, e.outcome.label.clone()), (None, None));
}

#[test]
fn the_rollout_supersedes_the_exec_output_of_its_thread() {
    let paths = [fixture(EXEC), fixture(ROLLOUT)];
    let (plan, runs) = import_paths(&paths, &Options::default());
    assert!(plan.refused.is_empty());
    assert_eq!(plan.covered.len(), 1);
    assert!(plan.covered[0].1.ends_with("codex-exec--json.stdout.jsonl"));
    assert!(plan.covered[0].2.contains("superseded by the rollout"));
    assert_eq!(runs.len(), 1);
    let run = runs.into_iter().next().unwrap().unwrap();
    let files = run.package.episode.manifest.provenance().unwrap()["source_files"].clone();
    assert_eq!(files.as_array().unwrap().len(), 1);
    assert!(!has_file(&run, "artifacts/source/codex-exec--json.stdout.jsonl"));
}

#[test]
fn importing_twice_gives_the_same_episode() {
    let a = import_ok(&[ROLLOUT], &Options::default());
    let b = import_ok(&[ROLLOUT], &Options::default());
    assert_eq!(a[0].package.id(), b[0].package.id());
    let a = import_ok(&[EXEC], &with_model("m"));
    let b = import_ok(&[EXEC], &with_model("m"));
    assert_eq!(a[0].package.id(), b[0].package.id());
}

#[test]
fn truncated_or_malformed_copies_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture(ROLLOUT)).unwrap();
    let cut = dir.path().join("rollout-cut.jsonl");
    std::fs::write(&cut, &text[..text.len() - 40]).unwrap();
    let (_, runs) = import_paths(std::slice::from_ref(&cut), &Options::default());
    let err = runs.into_iter().next().unwrap().unwrap_err();
    assert_eq!(err.file, cut.display().to_string());
    assert_eq!(err.place.as_deref(), Some("line 36"));
    assert!(err.reason.starts_with("truncated last line"), "{err}");

    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{\"timestamp\": \"2026-12-01T09:03:11.913Z\", \"type\": ";
    let bad = dir.path().join("rollout-bad.jsonl");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let (_, runs) = import_paths(std::slice::from_ref(&bad), &Options::default());
    let err = runs.into_iter().next().unwrap().unwrap_err();
    assert_eq!((err.file.as_str(), err.place.as_deref()), (bad.display().to_string().as_str(), Some("line 5")));
    assert!(err.reason.contains("expected a JSON object"), "{err}");

    let exec = std::fs::read_to_string(fixture(EXEC)).unwrap();
    let cut = dir.path().join("exec-cut.jsonl");
    std::fs::write(&cut, &exec[..exec.len() - 20]).unwrap();
    let (_, runs) = import_paths(std::slice::from_ref(&cut), &with_model("m"));
    let err = runs.into_iter().next().unwrap().unwrap_err();
    assert_eq!(err.place.as_deref(), Some("line 14")); // turn.completed, cut
    assert!(err.reason.starts_with("truncated last line"), "{err}");
}

mod content;
mod handmade;

#[test]
fn a_remote_names_its_cluster_without_credentials() {
    use super::cluster_of;
    let cluster = |r: &str| cluster_of(Some(r), Some("/work/app")).unwrap();
    assert_eq!(cluster("https://oauth2:tok3n@gitlab.com/acme/app.git"), "https://gitlab.com/acme/app.git");
    assert_eq!(cluster("https://user@github.com/acme/app"), "https://github.com/acme/app");
    assert_eq!(cluster("ssh://git:pw@host:2222/a.git?x=1"), "ssh://host:2222/a.git?x=1");
    // No credentials: as written, including an `@` after the host.
    assert_eq!(cluster("git@github.com:acme/app.git"), "git@github.com:acme/app.git");
    assert_eq!(cluster("https://github.com/acme/app@v2"), "https://github.com/acme/app@v2");
}

/// The run's `provenance.notes`.
fn notes(run: &Run) -> Vec<String> {
    let notes = run.package.episode.manifest.provenance().unwrap()["notes"].clone();
    serde_json::from_value(notes).unwrap()
}
