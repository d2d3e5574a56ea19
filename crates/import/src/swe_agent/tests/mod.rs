//! Every SWE-agent fixture imports or is refused with its reason; three runs asserted by
//! hand from the logs (line numbers are of the fixture files as committed); in `edge`,
//! refusals and a 1.x run folder written there.

use epistore_package::Episode;

use crate::testing::{actions, fixture, import_ok, import_paths};
use crate::{Options, Run};

fn tools(e: &Episode) -> Vec<(String, String, Option<i64>)> {
    let first_line = |c: &Option<String>| c.as_deref().unwrap_or("").lines().next().unwrap_or("").to_string();
    e.tools.iter().flatten().map(|t| (t.tool.clone(), first_line(&t.command), t.exit_code)).collect()
}

fn checks(e: &Episode) -> Vec<(String, String, String, u64)> {
    e.checks
        .iter()
        .flatten()
        .map(|c| {
            (
                c.method.clone().unwrap_or_default(),
                c.result.clone().unwrap_or_default(),
                c.actor.clone().unwrap_or_default(),
                c.bound_revision,
            )
        })
        .collect()
}

fn source_names(run: &Run) -> Vec<(String, Option<serde_json::Value>)> {
    let prov = run.package.episode.manifest.provenance().expect("provenance");
    prov["source_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f.get("part").cloned()))
        .collect()
}

fn file<'a>(run: &'a Run, path: &str) -> Option<&'a [u8]> {
    run.package.raw.files.iter().find(|f| f.path == path).map(|f| f.bytes.as_slice())
}

fn s(v: &str) -> String {
    v.to_string()
}

#[test]
fn test_repo_i1_by_hand() {
    // Given alone: `test-repo-i1.args.yaml` beside it names the model (line 500,
    // `agent.model.model_name: gpt4`) and the repository (line 509, `data_path`).
    let runs = import_ok(&["swe-agent/test-repo-i1.traj"], &Options::default());
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "test-repo-i1");
    assert_eq!(e.manifest.task, "test-repo-i1");
    assert_eq!(e.manifest.model, "gpt4");
    assert_eq!(e.manifest.cluster, "klieret/swe-agent-test-repo");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("swe-agent"));
    assert_eq!(e.manifest.harness_version, None, "0.x writes no swe_agent_version");
    // The five steps (`"action"` at lines 5, 12, 19, 26, 33): no exit codes in 0.x.
    assert_eq!(
        tools(e),
        vec![
            (s("shell"), s("find_file \"missing_colon.py\""), None),
            (s("shell"), s("open tests/missing_colon.py"), None),
            (s("shell"), s("edit 4:4"), None),
            (s("shell"), s("python tests/missing_colon.py"), None),
            (s("shell"), s("submit"), None),
        ]
    );
    assert_eq!(
        actions(e),
        vec![
            (s("search"), false, true, 0), // find_file
            (s("read"), false, true, 0),   // open
            (s("edit"), true, true, 0),    // edit 4:4, "File updated" (line 19's observation)
            (s("run"), false, true, 1),    // python tests/missing_colon.py: a script, opaque
            (s("run"), false, true, 1),    // submit
            (s("complete"), false, true, 1),
        ]
    );
    assert_eq!(e.derived.final_revision, 1);
    assert!(checks(e).is_empty(), "missing_colon.py is not a test file name");
    assert_eq!(e.derived.posture, "gap");
    assert!(e.interventions.as_ref().unwrap().is_empty(), "observations are the harness's, not a person's");
    assert_eq!(e.outcome.agent_reported_complete, Some(true)); // submit; exit_status "submitted" (line 114)
    assert_eq!(e.outcome.stop_reason, "completed");
    assert_eq!(e.outcome.correct, None, "no evaluator in the log");
    assert_eq!(e.outcome.label, None);
    assert_eq!(e.outcome.score, None);
    // info.model_stats
    assert_eq!(e.outcome.tokens_in, Some(52861));
    assert_eq!(e.outcome.tokens_out, Some(326));
    assert_eq!(e.outcome.cost_usd, Some(0.53839));
    let prov = e.manifest.provenance().unwrap();
    assert_eq!(prov["opaque_calls"], 1);
    assert_eq!(source_names(&runs[0]), vec![(s("test-repo-i1.traj"), None), (s("test-repo-i1.args.yaml"), None)]);
    let patch = String::from_utf8(file(&runs[0], "patch.diff").unwrap().to_vec()).unwrap();
    assert!(patch.contains("+def division(a: float, b: float) -> float:"));
    assert!(file(&runs[0], "artifacts/source/test-repo-i1.args.yaml").is_some());
}

#[test]
fn pydicom_with_its_run_folder_by_hand() {
    // The run folder's three files: the trajectory, its predictions line and args.yaml.
    let runs = import_ok(
        &["swe-agent/pydicom__pydicom-1458.traj", "swe-agent/pydicom.all_preds.jsonl", "swe-agent/pydicom.args.yaml"],
        &Options::default(),
    );
    assert_eq!(runs.len(), 1, "the predictions are not a run of their own");
    let run = &runs[0];
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "pydicom__pydicom-1458");
    assert_eq!(e.manifest.task, "pydicom__pydicom-1458");
    assert_eq!(run.instance_id.as_deref(), Some("pydicom__pydicom-1458"));
    assert_eq!(e.manifest.model, "gpt4");
    assert_eq!(e.manifest.cluster, "pydicom/pydicom", "from the SWE-bench instance id");
    let t = tools(e);
    assert_eq!(t.len(), 12, "twelve steps (lines 5..82)");
    assert!(t.iter().all(|(tool, _, code)| tool == "shell" && code.is_none()));
    assert_eq!(t[2].1, "python reproduce_bug.py");
    assert_eq!(t[10].1, "rm reproduce_bug.py");
    assert_eq!(
        actions(e),
        vec![
            (s("create"), true, true, 0),  // step 0: create reproduce_bug.py
            (s("edit"), true, true, 1),    // step 1: edit 1:1
            (s("search"), false, true, 2), // step 3: find_file (step 2 is a check, below)
            (s("read"), false, true, 2),   // step 4: open
            (s("edit"), true, false, 2),   // steps 5-7: "Your proposed edit has introduced new syntax error(s)"
            (s("edit"), true, false, 2),
            (s("edit"), true, false, 2),
            (s("edit"), true, true, 2),   // step 8: applied
            (s("delete"), true, true, 3), // step 10: rm reproduce_bug.py (exit unknown: possibly changed)
            (s("run"), false, true, 4),   // step 11: submit
            (s("complete"), false, true, 4),
        ]
    );
    // Steps 2 and 9: `python reproduce_bug.py`, no exit code and no summary line.
    assert_eq!(
        checks(e),
        vec![(s("reproduction"), s("unknown"), s("agent"), 2), (s("reproduction"), s("unknown"), s("agent"), 3)]
    );
    assert!(e.checks.iter().flatten().all(|c| c.check_id == "reproduction:python reproduce_bug.py"));
    assert_eq!(e.derived.final_revision, 4);
    assert_eq!(e.derived.posture, "stale", "checks ran on earlier revisions only");
    assert!(e.interventions.as_ref().unwrap().is_empty());
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    assert_eq!((e.outcome.correct, e.outcome.label.clone()), (None, None));
    assert_eq!(
        (e.outcome.tokens_in, e.outcome.tokens_out, e.outcome.cost_usd),
        (Some(122612), Some(1369), Some(1.26719))
    );
    // The prediction's line is the run's part of all_preds.jsonl (line 1), copied unchanged.
    assert_eq!(
        source_names(run),
        vec![
            (s("pydicom__pydicom-1458.traj"), None),
            (s("pydicom.args.yaml"), None),
            (s("pydicom.all_preds.jsonl"), Some(serde_json::json!(1))),
        ]
    );
    let line = std::fs::read_to_string(fixture("swe-agent/pydicom.all_preds.jsonl")).unwrap();
    let copied = file(run, "artifacts/source/pydicom.all_preds.jsonl").unwrap();
    assert_eq!(copied, line.trim_end_matches('\n').as_bytes());
}

#[test]
fn marshmallow_function_calling_by_hand() {
    let runs = import_ok(&["swe-agent/marshmallow-1867.function_calling_replace.traj"], &Options::default());
    let e = &runs[0].package.episode;
    // replay_config.agent.model.name and problem_statement.id
    assert_eq!(e.manifest.model, "gpt-4o");
    assert_eq!(e.manifest.task, "marshmallow-code__marshmallow-1867");
    assert_eq!(e.manifest.episode, "marshmallow-1867.function_calling_replace");
    assert_eq!(e.manifest.cluster, "marshmallow-code/marshmallow");
    // Tool names from the history's tool_calls; durations from execution_time (seconds).
    let names: Vec<String> = tools(e).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(
        names,
        ["create", "insert", "bash", "bash", "find_file", "open", "edit", "edit", "bash", "bash", "submit"]
    );
    assert!(tools(e).iter().all(|(_, _, code)| code.is_none()));
    let first = &e.tools.as_ref().unwrap()[0];
    assert!((first.duration_ms.unwrap() - 238.733730999229).abs() < 1e-6);
    assert_eq!(
        actions(e),
        vec![
            (s("create"), true, true, 0),  // create reproduce.py
            (s("edit"), true, true, 1),    // insert
            (s("read"), false, true, 2),   // ls -F (python reproduce.py is the check below)
            (s("search"), false, true, 2), // find_file
            (s("read"), false, true, 2),   // open
            (s("edit"), true, false, 2),   // edit rejected: "introduced new syntax error(s)"
            (s("edit"), true, true, 2),    // "Text replaced."
            (s("delete"), true, true, 3),  // rm reproduce.py
            (s("run"), false, true, 4),    // submit
            (s("complete"), false, true, 4),
        ]
    );
    assert_eq!(
        checks(e),
        vec![(s("reproduction"), s("unknown"), s("agent"), 2), (s("reproduction"), s("unknown"), s("agent"), 3)]
    );
    assert_eq!(e.derived.final_revision, 4);
    assert_eq!(e.derived.posture, "stale");
    assert!(e.interventions.as_ref().unwrap().is_empty());
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    assert_eq!((e.outcome.correct, e.outcome.label.clone()), (None, None));
    // A replay: model_stats says 0 tokens and $0.
    assert_eq!((e.outcome.tokens_in, e.outcome.cost_usd), (Some(0), Some(0.0)));
    assert!(file(&runs[0], "patch.diff").is_some());
}

#[test]
fn history_only_demonstration_needs_a_model() {
    // function_calling_simple.traj: a demonstration, `history` only, no config: no model.
    let (plan, runs) = import_paths(&[fixture("swe-agent/function_calling_simple.traj")], &Options::default());
    assert!(plan.refused.is_empty());
    let err = runs[0].as_ref().unwrap_err();
    assert!(err.reason.contains("names no model"), "{err}");
    let options = Options { model: Some("gpt-4o".into()), ..Options::default() };
    let runs = import_ok(&["swe-agent/function_calling_simple.traj"], &options);
    let e = &runs[0].package.episode;
    let names: Vec<String> = tools(e).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(names, ["find_file", "open", "edit", "bash", "submit"]);
    assert_eq!(e.derived.final_revision, 1);
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    let notes = e.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("read from `history`"), "{notes}");
}

#[test]
fn every_fixture_file_imports_or_is_refused() {
    // The whole folder, as a run folder walk: three runs (one refused for its model),
    // the predictions and both configurations read with their runs.
    let (plan, runs) = import_paths(&[fixture("swe-agent")], &Options::default());
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert!(plan.covered.is_empty(), "{:?}", plan.covered);
    let ok: Vec<&Run> = runs.iter().filter_map(|r| r.as_ref().ok()).collect();
    let mut episodes: Vec<&str> = ok.iter().map(|r| r.package.episode.manifest.episode.as_str()).collect();
    episodes.sort();
    assert_eq!(episodes, ["marshmallow-1867.function_calling_replace", "pydicom__pydicom-1458", "test-repo-i1"]);
    let refused: Vec<String> = runs.iter().filter_map(|r| r.as_ref().err()).map(|e| e.to_string()).collect();
    assert_eq!(refused.len(), 1);
    assert!(refused[0].contains("function_calling_simple.traj") && refused[0].contains("names no model"));

    // Alone, the auxiliary files are not runs.
    let (plan, runs) = import_paths(&[fixture("swe-agent/pydicom.all_preds.jsonl")], &Options::default());
    assert!(runs.is_empty());
    assert!(plan.refused[0].1.reason.contains("predictions (instance_id, model_patch), not a trajectory"));
    for config in ["swe-agent/pydicom.args.yaml", "swe-agent/test-repo-i1.args.yaml"] {
        let (plan, runs) = import_paths(&[fixture(config)], &Options::default());
        assert!(runs.is_empty());
        assert!(plan.refused[0].1.reason.contains("run configuration, not a trajectory"), "{:?}", plan.refused);
    }
}

#[test]
fn importing_twice_gives_the_same_episode() {
    let paths = ["swe-agent/pydicom__pydicom-1458.traj", "swe-agent/pydicom.all_preds.jsonl"];
    let a = import_ok(&paths, &Options::default());
    let b = import_ok(&paths, &Options::default());
    assert_eq!(a[0].package.id(), b[0].package.id());
    let c = import_ok(&["swe-agent/marshmallow-1867.function_calling_replace.traj"], &Options::default());
    let d = import_ok(&["swe-agent/marshmallow-1867.function_calling_replace.traj"], &Options::default());
    assert_eq!(c[0].package.id(), d[0].package.id());
}

mod content;
mod edge;
