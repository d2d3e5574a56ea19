//! The OpenHands fixtures (`tests/fixtures/real/openhands/`, see its PROVENANCE.md),
//! read as a person reads them; event ids below are the logs' own `id` fields. The
//! shapes no fixture has (older layouts, editor calls run as IPython) are in `shapes.rs`.

use std::io::Write;
use std::path::PathBuf;

use epistore_package::Episode;
use serde_json::{json, Value};

use crate::testing::{fixture, import_ok, import_paths};
use crate::{Options, Run};

pub(super) const JSONL: &str = "openhands/multi_swe_bench_output.jsonl";

pub(super) fn one(rel: &str) -> Run {
    let mut runs = import_ok(&[rel], &Options::default());
    assert_eq!(runs.len(), 1, "{rel}");
    runs.remove(0)
}

pub(super) fn tools(ep: &Episode) -> Vec<(String, Option<i64>)> {
    ep.tools.iter().flatten().map(|t| (t.tool.clone(), t.exit_code)).collect()
}

/// (kind, paths, mutates, ok) of every action.
pub(super) fn actions(ep: &Episode) -> Vec<(String, Vec<String>, bool, bool)> {
    ep.actions
        .iter()
        .flatten()
        .map(|a| (a.kind.clone().unwrap_or_default(), a.paths.clone(), a.mutates, a.ok))
        .collect()
}

pub(super) fn write_temp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    path
}

pub(super) fn fixture_lines() -> Vec<String> {
    std::fs::read_to_string(fixture(JSONL)).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn every_fixture_file_imports_or_is_refused_for_its_reason() {
    for rel in [
        "openhands/trajs_basic.json",
        "openhands/trajs_basic_gui_mode.json",
        "openhands/trajs_basic_interactions.json",
        "openhands/trajs_wrong_initial_state.json",
    ] {
        let run = one(rel);
        assert_eq!(run.package.episode.manifest.harness_name.as_deref(), Some("openhands"), "{rel}");
    }
    let runs = import_ok(&[JSONL], &Options::default());
    let ids: Vec<&str> = runs.iter().map(|r| r.package.episode.manifest.episode.as_str()).collect();
    assert_eq!(ids, ["ponylang__ponyc-4595", "ponylang__ponyc-4593", "ponylang__ponyc-4588"]);

    // 30 SWE-bench predictions ({instance_id, model_patch, model_name_or_path: "openhands"}):
    // no events at all, so no run to import; each object refused on its own line.
    let (plan, runs) = import_paths(&[fixture("openhands/swe_bench_example_model_output.json")], &Options::default());
    assert!(plan.refused.is_empty());
    assert_eq!(runs.len(), 30);
    let first = runs[0].as_ref().unwrap_err();
    assert_eq!(first.place.as_deref(), Some("line 2 (sphinx-doc__sphinx-8721)"));
    assert!(first.reason.contains("SWE-bench prediction (`model_patch`) without a trajectory"), "{}", first.reason);
    assert!(runs.iter().all(|r| r.is_err()));
}

/// multi_swe_bench_output.jsonl line 1 (ponylang__ponyc-4595, CodeActAgent v0.35.0).
#[test]
fn an_evaluation_output_line_as_a_person_reads_it() {
    let run = &import_ok(&[JSONL], &Options::default())[0];
    let ep = &run.package.episode;
    let m = &ep.manifest;
    assert_eq!(m.episode, "ponylang__ponyc-4595");
    assert_eq!(m.task, "ponylang__ponyc-4595");
    assert_eq!(m.cluster, "ponylang/ponyc"); // instance.repo
    assert_eq!(m.model, "openai/openrouter-llama-4-maverick"); // metadata.llm_config.model
    assert_eq!(run.instance_id.as_deref(), Some("ponylang__ponyc-4595"));
    assert_eq!(m.started_at.as_deref(), Some("2025-04-30T16:32:54.707474Z")); // event 0 (system)
    assert_eq!(m.ended_at.as_deref(), Some("2025-04-30T16:34:22.948624Z")); // event 49 (finish)
    let prov = m.provenance().unwrap();
    assert_eq!(prov["source_files"][0]["part"], json!(1));
    // Line 1's own bytes, unchanged.
    let copy = run.package.raw.file("artifacts/source/multi_swe_bench_output.jsonl").unwrap();
    assert_eq!(copy, fixture_lines()[0].as_bytes());

    let bash = |c| ("execute_bash".to_string(), Some(c));
    let editor = ("str_replace_editor".to_string(), None);
    // Events 5..49, the agent's 23 calls; exit codes from extras.metadata.exit_code.
    assert_eq!(
        tools(ep),
        vec![
            bash(0),                      // 5 ls -l /workspace/ponylang__ponyc__0.1
            bash(0),                      // 7 ls -l .../src
            bash(0),                      // 9 ls -l .../src/libponyc
            bash(0),                      // 11 ls -l .../ast
            editor.clone(),               // 13 view parser.c
            bash(0),                      // 15 grep -n "DECL(pattern);"
            editor.clone(),               // 17 view
            bash(0),                      // 19 grep -n "DEF(pattern);"
            editor.clone(),               // 21 view
            editor.clone(),               // 23 view [650, 700]
            editor.clone(),               // 25 view [650, 655]
            editor.clone(),               // 27 str_replace -> "ERROR: No replacement was performed"
            editor.clone(),               // 29 view [690, 697]
            editor.clone(),               // 31 str_replace -> "The file ... has been edited"
            bash(0),                      // 33 echo ... > /workspace/test.c
            bash(127),                    // 35 cd /workspace && echo ... > test.pony && ponyc ... (ponyc: not found)
            bash(2),                      // 37 cd ... && make
            bash(2),                      // 39 make clean && make
            bash(127),                    // 41 cd /workspace && ./ponylang__ponyc__0.1/ponyc ...
            bash(0),                      // 43 find ... -name ponyc
            bash(127),                    // 45 cd /workspace && .../build/bin/ponyc ...
            ("think".to_string(), None),  // 47
            ("finish".to_string(), None), // 49
        ]
    );
    let tools = ep.tools.as_ref().unwrap();
    assert_eq!(tools[11].failure_type, "other"); // event 28: the editor's "ERROR:"
    assert_eq!(tools[15].failure_type, "nonzero_exit");

    // The working directory is /workspace/ponylang__ponyc__0.1 (event 6's metadata).
    let acts = actions(ep);
    let mutations: Vec<_> = acts.iter().filter(|a| a.0 == "edit" || a.0 == "create").collect();
    let parser = vec!["src/libponyc/ast/parser.c".to_string()];
    assert_eq!(
        mutations,
        vec![
            &("edit".to_string(), parser.clone(), true, false), // 27: failed, no change
            &("edit".to_string(), parser, true, true),          // 31: the one change
            &("edit".to_string(), vec!["/workspace/test.c".to_string()], false, true), // 33: outside
            &("edit".to_string(), vec!["test.pony".to_string()], false, true), // 35: in /workspace, outside
        ]
    );
    assert_eq!(ep.derived.final_revision, 1);
    // `make`, `./test`, `ponyc` are programs whose effect cannot be told.
    assert_eq!(prov["opaque_calls"], json!(5));
    assert!(ep.checks.as_ref().unwrap().is_empty()); // no test, lint or build check ran
    assert_eq!(ep.derived.posture, "gap");
    assert!(ep.interventions.as_ref().unwrap().is_empty()); // event 1 is the prompt
    assert_eq!(acts.last().unwrap().0, "complete"); // 49 finish
    assert_eq!(ep.outcome.agent_reported_complete, Some(true));
    assert_eq!(ep.outcome.stop_reason, "completed");
    assert_eq!(ep.outcome.correct, None); // test_result has only git_patch
    assert_eq!(ep.outcome.label, None);
    assert_eq!((ep.outcome.tokens_in, ep.outcome.tokens_out), (Some(565158), Some(2558)));
    assert_eq!(ep.outcome.cost_usd, None); // accumulated_cost 0.0 with no cost entries
    assert!(run.package.raw.file("patch.diff").unwrap().starts_with(b"diff --git a/src/libponyc/ast/parser.c"));
}

/// The same line 1 after the SWE-bench evaluation added `test_result.report`.
#[test]
fn an_evaluation_output_with_its_report_is_adjudicated() {
    let mut line: Value = serde_json::from_str(&fixture_lines()[0]).unwrap();
    line["test_result"]["report"] =
        json!({"empty_generation": false, "resolved": true, "failed_apply_patch": false, "error_eval": false});
    let dir = tempfile::tempdir().unwrap();
    let path = write_temp(&dir, "output.swebench_eval.jsonl", format!("{line}\n").as_bytes());
    let (plan, runs) = import_paths(&[path], &Options::default());
    assert!(plan.refused.is_empty());
    let run = runs.into_iter().next().unwrap().unwrap();
    let ep = &run.package.episode;
    assert!(!run.verdict_from_report);
    assert_eq!(ep.outcome.correct, Some(true));
    assert_eq!(ep.outcome.score, Some(1.0));
    // Correct, but no agent check passed on the final revision (posture gap).
    assert_eq!(ep.outcome.label.as_deref(), Some("unverified_success"));
    let checks = ep.checks.as_ref().unwrap();
    assert_eq!(checks.len(), 1);
    let oracle = checks.last().unwrap();
    assert_eq!(
        (oracle.check_id.as_str(), oracle.actor.as_deref(), oracle.method.as_deref(), oracle.result.as_deref()),
        ("swe-bench", Some("evaluator"), Some("oracle"), Some("pass"))
    );
    let last_seq = ep.actions.iter().flatten().map(|a| a.common.seq).max().unwrap();
    assert!(oracle.common.seq > last_seq);
}

/// trajs_wrong_initial_state.json: "Please rename game_2048.py to 2048.py".
#[test]
fn a_trajectory_as_a_person_reads_it() {
    let run = one("openhands/trajs_wrong_initial_state.json");
    let ep = &run.package.episode;
    let m = &ep.manifest;
    assert_eq!((m.episode.as_str(), m.task.as_str()), ("trajs_wrong_initial_state", "trajs_wrong_initial_state"));
    assert_eq!(m.model, "claude-3-5-sonnet-20241022"); // tool_call_metadata.model_response.model
    assert_eq!(run.instance_id, None);
    assert_eq!(m.started_at.as_deref(), Some("2025-01-27T23:16:50.239610Z")); // event 0
    assert_eq!(m.ended_at.as_deref(), Some("2025-01-27T23:17:02.182015Z")); // event 9
    assert_eq!(
        tools(ep),
        vec![
            ("str_replace_editor".to_string(), None), // 3 view /workspace
            ("execute_bash".to_string(), Some(0)),    // 5 mv (6: exit_code 0)
            ("str_replace_editor".to_string(), None), // 7 view /workspace
            ("finish".to_string(), None),             // 9
        ]
    );
    // The working directory is /workspace (event 6's metadata.working_dir).
    let s = |v: &[&str]| v.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    assert_eq!(
        actions(ep),
        vec![
            ("read".to_string(), s(&["/workspace"]), false, true),
            ("edit".to_string(), s(&["game_2048.py", "2048.py"]), true, true), // mv, derived
            ("read".to_string(), s(&["/workspace"]), false, true),
            ("other".to_string(), vec![], false, true), // the finish call
            ("complete".to_string(), vec![], false, true),
        ]
    );
    assert_eq!(ep.actions.as_ref().unwrap()[1].common.grade, "derived");
    assert_eq!(ep.derived.final_revision, 1);
    assert!(ep.checks.as_ref().unwrap().is_empty());
    assert_eq!(ep.derived.posture, "gap");
    assert!(ep.interventions.as_ref().unwrap().is_empty());
    assert_eq!(ep.outcome.agent_reported_complete, Some(true));
    assert_eq!(ep.outcome.stop_reason, "completed");
    assert_eq!((ep.outcome.correct, ep.outcome.label.as_deref()), (None, None));
    let notes = m.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("no time zone"), "{notes}");
}

/// trajs_basic_interactions.json: a person answers twice after the prompt (events 6, 12).
#[test]
fn a_persons_messages_after_the_prompt_are_interventions() {
    let run = one("openhands/trajs_basic_interactions.json");
    let ep = &run.package.episode;
    let reasons: Vec<_> =
        ep.interventions.iter().flatten().map(|i| (i.actor.clone(), i.kind.clone(), i.reason.clone())).collect();
    let human = |r: &str| (Some("human".to_string()), Some("other".to_string()), Some(r.to_string()));
    assert_eq!(reasons, vec![human("No, I mean by Goldbach's conjecture!"), human("Finish please")]);
    assert_eq!(tools(ep), vec![("finish".to_string(), None)]); // 15; messages are no tool calls
    assert_eq!(ep.manifest.model, "gpt-4o-2024-08-06");
    assert_eq!(ep.outcome.agent_reported_complete, Some(true));
}

/// trajs_basic_gui_mode.json: a server left running and a last message instead of `finish`.
#[test]
fn a_gui_session_that_ends_waiting_for_the_user() {
    let run = one("openhands/trajs_basic_gui_mode.json");
    let ep = &run.package.episode;
    let t = ep.tools.as_ref().unwrap();
    assert_eq!(t.len(), 4); // 7 mkdir, 9 and 11 create, 13 http.server
    assert_eq!(t[0].exit_code, Some(0));
    // 14: exit_code -1 ("no new output after 30 seconds"): the server is still running,
    // its exit code not known; no timeout (the command was not stopped).
    assert_eq!((t[3].exit_code, t[3].timed_out, t[3].failure_type.as_str()), (None, false, "none"));
    assert_eq!(ep.derived.final_revision, 3); // mkdir (derived) and two observed creates
    let kinds: Vec<_> = actions(ep).into_iter().map(|a| a.0).collect();
    assert_eq!(kinds, ["create", "create", "create", "run"]);
    assert_eq!(ep.outcome.agent_reported_complete, Some(false)); // 15 is a message, 17 awaiting_user_input
    assert_eq!(ep.outcome.stop_reason, "other");
}

#[test]
fn the_iteration_limit_is_budget_exhausted() {
    let runs = import_ok(&[JSONL], &Options::default());
    // Line 3: error "RuntimeError: Agent reached maximum iteration in headless mode", no finish.
    let ep = &runs[2].package.episode;
    assert_eq!(ep.outcome.stop_reason, "budget_exhausted");
    assert_eq!(ep.outcome.agent_reported_complete, Some(false));
    // Line 2 ends with finish (task_completed "false" is still the agent's claim); its
    // event 29 is an error observation no action caused (a malformed call): not a call.
    let ep = &runs[1].package.episode;
    assert_eq!(ep.outcome.stop_reason, "completed");
    assert_eq!(ep.tools.as_ref().unwrap().len(), 33); // 12 commands, 9 views, 11 edits, finish
    assert!(ep.manifest.provenance().unwrap()["notes"].to_string().contains("malformed tool call"));
}

#[test]
fn importing_twice_gives_the_same_episodes() {
    let ids = || {
        let mut runs = import_ok(&[JSONL, "openhands/trajs_basic.json"], &Options::default());
        runs.sort_by(|a, b| a.package.episode.manifest.episode.cmp(&b.package.episode.manifest.episode));
        runs.iter().map(|r| *r.package.id()).collect::<Vec<_>>()
    };
    assert_eq!(ids(), ids());
}

#[test]
fn a_truncated_last_line_is_refused_with_its_line() {
    let lines = fixture_lines();
    let mut text = format!("{}\n{}\n", lines[0], lines[1]);
    text.push_str(&lines[2][..lines[2].len() / 2]);
    let dir = tempfile::tempdir().unwrap();
    let path = write_temp(&dir, "output.jsonl", text.as_bytes());
    let (_, runs) = import_paths(std::slice::from_ref(&path), &Options::default());
    assert_eq!(runs.len(), 3);
    assert!(runs[0].is_ok() && runs[1].is_ok());
    let refusal = runs[2].as_ref().unwrap_err();
    assert_eq!(refusal.file, path.display().to_string());
    assert_eq!(refusal.place.as_deref(), Some("line 3"));
    assert!(refusal.reason.starts_with("truncated JSON"), "{}", refusal.reason);
}

#[test]
fn a_truncated_trajectory_is_refused_with_its_line() {
    let text = std::fs::read_to_string(fixture("openhands/trajs_basic.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = write_temp(&dir, "trajs_basic.json", &text.as_bytes()[..text.len() - 40]);
    let (plan, runs) = import_paths(std::slice::from_ref(&path), &Options::default());
    let refusals: Vec<_> =
        plan.refused.iter().map(|(_, r)| r.clone()).chain(runs.into_iter().filter_map(Result::err)).collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].file, path.display().to_string());
    let line = 1 + text[..text.len() - 40].matches('\n').count();
    assert_eq!(refusals[0].place, Some(format!("line {line}")));
    assert!(refusals[0].reason.contains("truncated JSON"), "{}", refusals[0].reason);
}

mod content;
mod shapes;
