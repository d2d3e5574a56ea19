//! The fixtures under `tests/fixtures/real/claude-code/` (see its PROVENANCE.md), read
//! by hand: every expected value below names the log line it comes from.

use std::path::PathBuf;

use epistore_package::{Episode, Tool};

use crate::testing::{fixture, import_ok, import_paths};
use crate::{Options, Run};

const GENERATED: &str = "claude-code/generated/projects/-srv-counter/555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl";
const STREAM: &str = "claude-code/generated/stream-json.counter.jsonl";
const BIG: &str = "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl";
const BIG_SUB: &str = "claude-code/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-a2898e3.jsonl";
const BIG_COMPACT: &str = "claude-code/4d5611e5-241a-462a-8d15-5122611a9569/subagents/agent-acompact-e1f845.jsonl";

fn one(rels: &[&str]) -> Run {
    let mut runs = import_ok(rels, &Options::default());
    assert_eq!(runs.len(), 1, "one run from {rels:?}");
    runs.remove(0)
}

pub(super) fn tools(e: &Episode) -> &[Tool] {
    e.tools.as_deref().unwrap()
}

pub(super) fn exit_codes(e: &Episode) -> Vec<(String, Option<i64>)> {
    tools(e).iter().map(|t| (t.tool.clone(), t.exit_code)).collect()
}

fn notes(e: &Episode) -> Vec<String> {
    let p = e.manifest.provenance().unwrap();
    p["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

fn source_names(run: &Run) -> Vec<String> {
    let p = run.package.episode.manifest.provenance().unwrap();
    p["source_files"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
}

/// The scripted run (mock_script.json), as its transcript shows it.
#[test]
fn generated_transcript_by_hand() {
    let run = one(&[GENERATED]);
    let e = &run.package.episode;
    // Every line's sessionId; version and cwd of line 3; message.model of lines 19-54.
    assert_eq!(e.manifest.episode, "555cbe93-d68e-41b1-9012-c94ca9ff3588");
    assert_eq!(e.manifest.task, "555cbe93-d68e-41b1-9012-c94ca9ff3588");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("claude-code"));
    assert_eq!(e.manifest.harness_version.as_deref(), Some("2.1.332"));
    assert_eq!(e.manifest.cluster, "counter");
    // Line 1 (queue-operation) is the first timestamp, line 54 the last.
    assert_eq!(e.manifest.started_at.as_deref(), Some("2026-12-01T09:17:51.101Z"));
    assert_eq!(e.manifest.ended_at.as_deref(), Some("2026-12-01T09:17:51.758Z"));

    // Five tool_use blocks: lines 20, 29, 36, 43, 49.
    let t = tools(e);
    assert_eq!(
        exit_codes(e),
        vec![
            ("Bash".into(), Some(1)), // line 23: is_error, "Exit code 1"
            ("Read".into(), None),
            ("Edit".into(), None),
            ("Bash".into(), Some(0)), // line 44: is_error false, no returnCodeInterpretation
            ("Write".into(), None),
        ]
    );
    assert_eq!(t[0].command.as_deref(), Some("python3 test_counter.py"));
    assert_eq!(t[0].common.grade, "derived");
    assert_eq!(t[0].failure_type, "nonzero_exit");
    assert_eq!(t[3].command.as_deref(), Some("python3 test_counter.py && git diff --stat"));
    assert_eq!(t[3].failure_type, "none");
    // Durations from the tool_use line to the tool_result line (20 -> 23, 43 -> 44).
    assert_eq!(t[0].duration_ms, Some(159.0));
    assert_eq!(t[3].duration_ms, Some(148.0));

    // Mutations: the Edit (line 39, structuredPatch) and the Write creating CHANGELOG.md
    // (line 50, toolUseResult.type create).
    let actions = e.actions.as_deref().unwrap();
    let muts: Vec<(&str, &[String], bool)> =
        actions.iter().filter(|a| a.mutates).map(|a| (a.kind.as_deref().unwrap(), a.paths.as_slice(), a.ok)).collect();
    assert_eq!(
        muts,
        vec![("edit", &["counter.py".to_string()][..], true), ("create", &["CHANGELOG.md".to_string()][..], true)]
    );
    assert_eq!(e.derived.final_revision, 2);

    // Checks: the failing run at revision 0 (line 20) and the passing re-run at
    // revision 1 (line 43), stale after the CHANGELOG write.
    let checks: Vec<(&str, &str, &str, u64, &str)> = e
        .checks
        .as_deref()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c.check_id.as_str(),
                c.method.as_deref().unwrap(),
                c.result.as_deref().unwrap(),
                c.bound_revision,
                c.actor.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        checks,
        vec![
            ("targeted_test:python3 test_counter.py", "targeted_test", "fail", 0, "agent"),
            ("targeted_test:python3 test_counter.py", "targeted_test", "pass", 1, "agent"),
        ]
    );
    assert_eq!(e.derived.posture, "stale");

    // No person after the prompt of line 3.
    assert!(e.interventions.as_deref().unwrap().is_empty());
    // Line 54: the last words, stop_reason end_turn.
    let complete: Vec<_> = actions.iter().filter(|a| a.kind.as_deref() == Some("complete")).collect();
    assert_eq!(complete.len(), 1);
    assert!(complete[0].summary.as_deref().unwrap().starts_with("Fixed: count_up_to(n) now includes n"));
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    // No evaluator in a Claude Code log.
    assert_eq!(e.outcome.correct, None);
    assert_eq!(e.outcome.label, None);
    assert!(e.checks.as_deref().unwrap().iter().all(|c| c.method.as_deref() != Some("oracle")));
    // Six message ids, 1500..1750 input and 50 output tokens each (no cache); line 56
    // cost-state totalCostUSD.
    assert_eq!(e.outcome.tokens_in, Some(9750));
    assert_eq!(e.outcome.tokens_out, Some(300));
    assert_eq!(e.outcome.cost_usd, Some(0.033749999999999995));
    assert_eq!(source_names(&run), vec!["555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl"]);
    assert_eq!(e.manifest.provenance().unwrap()["opaque_calls"], 0);
}

/// The same run's headless output, imported alone: never superseded, and it shows the
/// same calls (its result line gives the totals).
#[test]
fn stream_json_alone_is_imported() {
    let (plan, runs) = import_paths(&[fixture(STREAM)], &Options::default());
    assert!(plan.covered.is_empty());
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    // Line 1: system/init session_id, claude_code_version, cwd.
    assert_eq!(e.manifest.episode, "555cbe93-d68e-41b1-9012-c94ca9ff3588");
    assert_eq!(e.manifest.harness_version.as_deref(), Some("2.1.332"));
    assert_eq!(e.manifest.cluster, "counter");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5");
    // Lines 3, 5, 8, 10, 12; exit codes from lines 4 (Exit code 1) and 11.
    assert_eq!(
        exit_codes(e),
        vec![
            ("Bash".into(), Some(1)),
            ("Read".into(), None),
            ("Edit".into(), None),
            ("Bash".into(), Some(0)),
            ("Write".into(), None)
        ]
    );
    assert_eq!(e.derived.final_revision, 2);
    assert_eq!(e.derived.posture, "stale");
    // Line 14's words end the turn the result line 15 closes.
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    assert!(e.interventions.as_deref().unwrap().is_empty());
    // Line 15: modelUsage and total_cost_usd.
    assert_eq!(e.outcome.tokens_in, Some(9750));
    assert_eq!(e.outcome.tokens_out, Some(300));
    assert_eq!(e.outcome.cost_usd, Some(0.033749999999999995));
    assert_eq!(e.manifest.started_at.as_deref(), Some("2026-12-01T09:17:51.220Z"));
    assert_eq!(e.outcome.correct, None);
    assert_eq!(e.outcome.label, None);
}

/// A transcript and the stream-json of the same session, given together: the stream
/// file is covered and contributes nothing.
#[test]
fn transcript_supersedes_stream_json_of_its_session() {
    let (plan, runs) = import_paths(&[fixture(STREAM), fixture(GENERATED)], &Options::default());
    assert_eq!(plan.covered.len(), 1);
    assert!(plan.covered[0].1.ends_with("stream-json.counter.jsonl"));
    assert!(plan.covered[0].2.contains("superseded by the session transcript 555cbe93"));
    assert_eq!(runs.len(), 1);
    let run = runs.into_iter().next().unwrap().unwrap();
    assert_eq!(source_names(&run), vec!["555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl"]);
    // The same package as the transcript alone.
    let alone = one(&[GENERATED]);
    assert_eq!(run.package.id(), alone.package.id());

    // The whole generated folder (projects tree and stream-json) walks to the same.
    let (plan, runs) = import_paths(&[fixture("claude-code/generated")], &Options::default());
    assert_eq!(plan.covered.len(), 1);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].as_ref().unwrap().package.id(), alone.package.id());
}

/// short.jsonl: a person declines both calls of one message, then interrupts.
#[test]
fn short_session_by_hand() {
    let run = one(&["claude-code/short.jsonl"]);
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "55604662-cf2a-4331-851a-ec234028f8ca");
    assert_eq!(e.manifest.model, "claude-opus-4-6"); // lines 5-10
    assert_eq!(e.manifest.harness_version.as_deref(), Some("2.1.38"));
    assert_eq!(e.manifest.cluster, "spotter"); // cwd /home/marco/projects/spotter
                                               // Line 8 (Bash) and line 10 (Glob); lines 11 and 12 reject both: "The user doesn't
                                               // want to proceed with this tool use".
    let t = tools(e);
    assert_eq!(exit_codes(e), vec![("Bash".into(), None), ("Glob".into(), None)]);
    assert!(t.iter().all(|t| t.failure_type == "permission_denied"));
    assert_eq!(t[0].command.as_deref(), Some("mix phx.server 2>&1 | head -80"));
    let actions = e.actions.as_deref().unwrap();
    let kinds: Vec<(&str, bool, bool)> =
        actions.iter().map(|a| (a.kind.as_deref().unwrap(), a.mutates, a.ok)).collect();
    assert_eq!(kinds, vec![("run", false, false), ("search", false, false)]);
    assert!(e.checks.as_deref().unwrap().is_empty());
    assert_eq!(e.derived.final_revision, 0);
    assert_eq!(e.derived.posture, "gap");
    // Two rejections (lines 11, 12), then line 13 "[Request interrupted by user for tool use]".
    let iv: Vec<(&str, &str)> = e
        .interventions
        .as_deref()
        .unwrap()
        .iter()
        .map(|i| (i.kind.as_deref().unwrap(), i.reason.as_deref().unwrap()))
        .collect();
    assert_eq!(
        iv,
        vec![
            ("other", "rejected the Bash call"),
            ("other", "rejected the Glob call"),
            ("abort", "[Request interrupted by user for tool use]"),
        ]
    );
    assert!(e.interventions.as_deref().unwrap().iter().all(|i| i.actor.as_deref() == Some("human")));
    // The turn ended in the interrupt: no claim.
    assert!(actions.iter().all(|a| a.kind.as_deref() != Some("complete")));
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.outcome.stop_reason, "other");
    assert_eq!(e.outcome.correct, None);
    assert_eq!(e.outcome.label, None);
    // One message id (msg_01MKH...): 3 + 13835 + 11515 in, 13 out.
    assert_eq!(e.outcome.tokens_in, Some(25353));
    assert_eq!(e.outcome.tokens_out, Some(13));
    assert_eq!(e.outcome.cost_usd, None);
}

/// tool_heavy.jsonl: a backgrounded command, interrupts, a slash command, a second prompt.
#[test]
fn tool_heavy_session_by_hand() {
    let run = one(&["claude-code/tool_heavy.jsonl"]);
    let e = &run.package.episode;
    assert_eq!(
        exit_codes(e),
        vec![
            ("Bash".into(), None),    // line 5 run_in_background; line 11 backgroundTaskId
            ("Bash".into(), Some(0)), // line 13 tail; line 17 is_error false
            ("WebSearch".into(), None),
            ("Glob".into(), None),
            ("Read".into(), None),
            ("WebFetch".into(), None),
        ]
    );
    let actions = e.actions.as_deref().unwrap();
    let kinds: Vec<&str> = actions.iter().map(|a| a.kind.as_deref().unwrap()).collect();
    // `mix phx.server` is a program the rules cannot read (run, opaque); `tail` a read.
    assert_eq!(kinds, vec!["run", "read", "search", "search", "read", "read"]);
    assert_eq!(e.manifest.provenance().unwrap()["opaque_calls"], 1);
    assert_eq!(e.derived.final_revision, 0);
    // Line 18 and 39 interrupt; line 26 is a person's second prompt (the /mcp command
    // of line 21 is not a message).
    let iv: Vec<&str> = e.interventions.as_deref().unwrap().iter().map(|i| i.kind.as_deref().unwrap()).collect();
    assert_eq!(iv, vec!["abort", "other", "abort"]);
    let second = &e.interventions.as_deref().unwrap()[1];
    assert!(second.reason.as_deref().unwrap().starts_with("scrolling back in xterm.js still does not work"));
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.outcome.label, None);
}

/// subagent.jsonl: the subagent's calls exist only as progress copies in the session
/// file (no subagents/ folder given): they are the session's calls.
#[test]
fn subagent_progress_copies_are_the_sessions_calls() {
    let run = one(&["claude-code/subagent.jsonl"]);
    let e = &run.package.episode;
    // 16 calls of the session's own lines and 9 of the Plan subagent (lines 38-54).
    assert_eq!(tools(e).len(), 25);
    let task = tools(e).iter().position(|t| t.tool == "Task").unwrap();
    // The subagent's first call (line 38, a Read) comes right after the Task call (line 36).
    assert_eq!(tools(e)[task + 1].tool, "Read");
    assert!(notes(e).iter().any(|n| n.starts_with("9 of the 25 tool calls are subagents'")));
    // The Write of plan.md (line 58, created): the one mutation.
    assert_eq!(e.derived.final_revision, 1);
    let created: Vec<_> = e.actions.as_deref().unwrap().iter().filter(|a| a.mutates).collect();
    assert_eq!(created[0].kind.as_deref(), Some("create"));
    assert_eq!(created[0].paths, vec!["plan.md".to_string()]);
    // Line 69 interrupt, line 71 "create the beads"; the slash command of line 4 is
    // the first prompt.
    let iv: Vec<&str> = e.interventions.as_deref().unwrap().iter().map(|i| i.kind.as_deref().unwrap()).collect();
    assert_eq!(iv, vec!["abort", "other"]);
    // Line 92, the last words after the last call: the turn's claim.
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
}

/// The session with a subagents/ folder: one unit, every file copied, the subagent's
/// calls (also copied into the session file as progress lines) recorded once.
#[test]
fn subagent_files_group_into_their_session() {
    let paths = vec![fixture(BIG_COMPACT), fixture(BIG), fixture(BIG_SUB)];
    let (plan, runs) = import_paths(&paths, &Options::default());
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(plan.units.len(), 1);
    assert_eq!(plan.units[0].files.len(), 3);
    assert!(plan.units[0].files[0].path.ends_with("4d5611e5-241a-462a-8d15-5122611a9569.jsonl"));
    let run = runs.into_iter().next().unwrap().unwrap();
    assert_eq!(
        source_names(&run),
        vec![
            "4d5611e5-241a-462a-8d15-5122611a9569.jsonl",
            "subagents/agent-a2898e3.jsonl",
            "subagents/agent-acompact-e1f845.jsonl"
        ]
    );
    let files: Vec<&str> = run.package.raw.files.iter().map(|f| f.path.as_str()).collect();
    assert!(files.contains(&"artifacts/source/subagents/agent-a2898e3.jsonl"));
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "4d5611e5-241a-462a-8d15-5122611a9569");
    // 150 calls of the session's own lines, 33 of agent a2898e3 (16 Read, 10 Glob,
    // 2 Grep, 5 Bash), each once.
    assert_eq!(tools(e).len(), 183);
    assert!(notes(e).iter().any(|n| n.starts_with("33 of the 183 tool calls are subagents'")));
    // The session's model; the Explore subagent ran on Sonnet.
    assert_eq!(e.manifest.model, "claude-opus-4-6");
    assert!(notes(e).iter().any(|n| n == "subagents ran on: claude-sonnet-4-5-20250929"));
    assert_eq!(e.manifest.harness_version.as_deref(), Some("2.1.39"));
    assert_eq!(e.manifest.cluster, "spotter-dov");
    // Without the subagent files the progress copies give the same calls.
    let alone = one(&[BIG]);
    assert_eq!(tools(&alone.package.episode).len(), 183);
    // Line 280 "continue" is the one message after the first prompt (line 7); the
    // compaction summary of line 755 and the task notification of line 1502 are not.
    let iv: Vec<(&str, &str)> = e
        .interventions
        .as_deref()
        .unwrap()
        .iter()
        .map(|i| (i.kind.as_deref().unwrap(), i.reason.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(iv, vec![("other", "continue")]);
    // Line 1459: grep's "No matches found" (returnCodeInterpretation): exit not shown;
    // line 447: the tests run in the background (backgroundTaskId): not shown either.
    let by_command =
        |prefix: &str| tools(e).iter().find(|t| t.command.as_deref().unwrap_or("").starts_with(prefix)).unwrap();
    assert_eq!(by_command("mix compile && mix dialyzer --format short").exit_code, None);
    assert_eq!(by_command("mix test test/spotter_web/live/session_live_test.exs 2>&1").exit_code, None);
    // Line 1477: "Exit code 128" in the error text (derived).
    let push = by_command("git push 2>&1");
    assert_eq!((push.exit_code, push.common.grade.as_str()), (Some(128), "derived"));
    // Two claims: the end of the "continue" turn (line 1500) and of the turn the task
    // notification of line 1502 started; the first turn ended on an Edit (line 262).
    let claims = e.actions.as_deref().unwrap().iter().filter(|a| a.kind.as_deref() == Some("complete")).count();
    assert_eq!(claims, 2);
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.derived.final_revision, 39);
    assert_eq!(e.derived.posture, "stale");
    assert_eq!(e.outcome.correct, None);
    assert_eq!(e.outcome.label, None);
}

#[test]
fn a_subagent_file_alone_is_refused() {
    let (plan, runs) = import_paths(&[fixture(BIG_SUB)], &Options::default());
    assert!(runs.is_empty());
    assert_eq!(plan.refused.len(), 1);
    let r = &plan.refused[0].1;
    assert!(r.file.ends_with("agent-a2898e3.jsonl"));
    assert!(r.reason.contains("a subagent transcript of session 4d5611e5-241a-462a-8d15-5122611a9569"), "{r}");
}

/// Every fixture file of the format imports (the subagent files with their session).
#[test]
fn every_fixture_imports() {
    let all = [
        "claude-code/short.jsonl",
        "claude-code/tool_heavy.jsonl",
        "claude-code/subagent.jsonl",
        BIG,
        BIG_SUB,
        BIG_COMPACT,
        GENERATED,
        STREAM,
    ];
    let runs = import_ok(&all, &Options::default());
    // Five sessions (the stream-json covered by its transcript).
    assert_eq!(runs.len(), 5);
    // The fixture folder walked as a whole gives the same.
    let (plan, walked) = import_paths(&[fixture("claude-code")], &Options::default());
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(walked.len(), 5);
    let mut a: Vec<String> = runs.iter().map(|r| epistore_package::hex(r.package.id())).collect();
    let mut b: Vec<String> = walked.iter().map(|r| epistore_package::hex(r.as_ref().unwrap().package.id())).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

#[test]
fn importing_twice_gives_the_same_episode() {
    let a = one(&[GENERATED]);
    let b = one(&[GENERATED]);
    assert_eq!(a.package.id(), b.package.id());
    let a = import_ok(&[BIG, BIG_SUB, BIG_COMPACT], &Options::default());
    let b = import_ok(&[BIG_SUB, BIG_COMPACT, BIG], &Options::default());
    assert_eq!(a[0].package.id(), b[0].package.id());
}

pub(super) fn write_temp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_truncated_or_malformed_copy_is_refused_at_its_line() {
    let text = std::fs::read_to_string(fixture("claude-code/short.jsonl")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The last line cut in half.
    let cut = &text[..text.trim_end().len() - 40];
    let p = write_temp(&dir, "55604662-cf2a-4331-851a-ec234028f8ca.jsonl", cut);
    let (_, runs) = import_paths(std::slice::from_ref(&p), &Options::default());
    let r = runs.into_iter().next().unwrap().unwrap_err();
    assert_eq!(r.file, p.display().to_string());
    assert_eq!(r.place.as_deref(), Some("line 15"));
    assert!(r.reason.contains("expected a JSON object"), "{r}");
    // A line in the middle that is not JSON.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[7] = "{\"type\": \"assistant\", \"message\": ";
    let p = write_temp(&dir, "broken.jsonl", &lines.join("\n"));
    let (_, runs) = import_paths(std::slice::from_ref(&p), &Options::default());
    let r = runs.into_iter().next().unwrap().unwrap_err();
    assert_eq!((r.file.as_str(), r.place.as_deref()), (p.display().to_string().as_str(), Some("line 8")));
}

mod content;
mod synthetic;

/// The real session's `mix test test/spotter_web/live/session_live_test.exs` ran past its
/// 60 s timeout and Claude Code moved it to the background (`Command running in
/// background with ID: b7636e2`, line 456); line 457 fetches it with `TaskOutput`, whose
/// result shows `<status>completed</status>` and `<exit_code>0</exit_code>`.
/// docs/importers.md §10: the check takes that result, derived, and keeps the revision
/// it started on.
#[test]
fn a_test_moved_to_the_background_takes_the_result_its_output_shows() {
    let run = one(&[BIG, BIG_SUB, BIG_COMPACT]);
    let checks: Vec<_> = run
        .package
        .episode
        .checks
        .iter()
        .flatten()
        .filter(|c| c.command.as_deref() == Some("mix test test/spotter_web/live/session_live_test.exs 2>&1"))
        .collect();
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].result.as_deref(), Some("pass"));
    assert_eq!(checks[0].common.grade, "derived");
    assert_eq!(checks[0].exit_code, Some(0));
    assert!(notes(&run.package.episode).iter().any(|n| n.starts_with("a check ran in the background")));
}
