//! Cline, Roo and Kilo task folders read by hand: the real Roo task
//! (tests/fixtures/real/cline/PROVENANCE.md) and the constructed Cline and Kilo tasks
//! (tests/fixtures/constructed/cline/README.md).

use crate::testing::{fixtures, import_all, import_paths};
use crate::Options;

fn with_model(m: &str) -> Options {
    Options { model: Some(m.into()), ..Options::default() }
}

fn calls(e: &epistore_package::Episode) -> Vec<(String, Option<i64>, String)> {
    e.tools.iter().flatten().map(|t| (t.tool.clone(), t.exit_code, t.failure_type.clone())).collect()
}

#[test]
fn a_cline_task_with_native_tools() {
    let runs = import_all(&fixtures("constructed/cline/saoudrizwan.claude-dev"), &Options::default());
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.harness_name.as_deref(), Some("cline"));
    // The task folder's name; the model of task_metadata.json and of the messages.
    assert_eq!(e.manifest.episode, "1769053680585");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5-20250929");
    // The <task> text, without the environment details.
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("The sum test fails. Fix src/sum.js."));
    // npm test: exit 1 ("Command failed with exit code 1."), the edit, the denied
    // command (refused), npm test: exit 0, attempt_completion.
    let c = calls(e);
    assert_eq!(c.len(), 5, "{c:?}");
    assert_eq!((c[0].0.as_str(), c[0].1), ("execute_command", Some(1)));
    assert_eq!(c[1].0, "replace_in_file");
    assert_eq!((c[2].1, c[2].2.as_str()), (None, "permission_denied"));
    assert_eq!((c[3].0.as_str(), c[3].1), ("execute_command", Some(0)));
    assert_eq!(c[4].0, "attempt_completion");
    // The edit: a mutation of src/sum.js with the SEARCH / REPLACE as its diff; the
    // failing test before it, the passing test after it (fresh).
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("edit");
    assert_eq!(edit.paths, ["src/sum.js"]);
    let diff = edit.diff.as_deref().unwrap();
    assert!(diff.contains("-  return a - b;") && diff.contains("+  return a + b;"), "{diff}");
    let checks: Vec<(String, bool)> =
        e.checks.iter().flatten().map(|c| (c.result.clone().unwrap_or_default(), c.fresh)).collect();
    assert_eq!(checks, [("fail".into(), false), ("pass".into(), true)]);
    // attempt_completion is the claim; the denial and the feedback are the person's.
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.interventions.iter().flatten().count(), 2);
    // ui_messages.json: tokens (in + cache) and cost summed over the requests.
    assert_eq!(e.outcome.tokens_in, Some(1200 + 3000 + 300 + 200 + 3000));
    assert_eq!(e.outcome.tokens_out, Some(140));
    // The three files of the task folder are its sources.
    assert_eq!(e.manifest.provenance().unwrap()["source_files"].as_array().unwrap().len(), 3);
}

#[test]
fn a_kilo_task_in_the_xml_era() {
    // The XML era's Kilo keeps no model: --model names it.
    let runs = import_all(&fixtures("constructed/cline/kilocode.kilo-code"), &with_model("gpt-4.1"));
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.harness_name.as_deref(), Some("kilo-code"));
    let c = calls(e);
    // write_to_file (an edit), git add (no exit code printed: unknown), completion.
    assert_eq!(
        c.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["write_to_file", "execute_command", "attempt_completion"]
    );
    assert_eq!(c[1].1, None);
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("the write");
    assert_eq!(edit.paths, ["NOTES.md"]);
    assert!(edit.diff.as_deref().unwrap().contains("+# Notes"));
    // attempt_completion, never answered (the last message is the agent's): the call
    // is the claim all the same.
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    // <thinking> is reasoning, not text.
    let said: Vec<String> =
        e.messages.iter().flatten().filter(|m| m.role == "assistant").filter_map(|m| m.reasoning.clone()).collect();
    assert!(said.iter().any(|r| r == "A new file."), "{said:?}");
}

#[test]
fn the_real_roo_task_claims_completion_in_xml() {
    // Roo of February 2025 names its mode, not its model.
    let (plan, refused) = import_paths(&[fixtures("real/cline")], &Options::default());
    assert!(plan.refused.is_empty());
    assert!(refused[0].as_ref().map(|_| ()).expect_err("no model").reason.contains("--model"));
    let runs = import_all(&fixtures("real/cline"), &with_model("claude-3-5-sonnet"));
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "6a716972-c33f-444f-a8f2-613f03410ace");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("roo-code"));
    // <task>\ntest\n</task>; the one call, attempt_completion (the history ends with
    // it; ui_messages.json shows its completion_result): the claim.
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("test"));
    assert_eq!(calls(e).iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["attempt_completion"]);
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
}

#[test]
fn a_ui_file_alone_is_refused_for_its_missing_history_and_a_cut_history_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("tasks/1");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join("ui_messages.json"), r#"[{"ts":1,"type":"say","say":"task","text":"x"}]"#).unwrap();
    let (plan, _) = import_paths(&[task.join("ui_messages.json")], &Options::default());
    assert!(
        plan.refused[0].1.reason.contains("without its task's api_conversation_history.json"),
        "{:?}",
        plan.refused
    );
    std::fs::write(task.join("api_conversation_history.json"), "[\n{\"role\": \"user\",\n\"content\": [").unwrap();
    let (_, runs) = import_paths(std::slice::from_ref(&task), &Options::default());
    let err = runs[0].as_ref().map(|_| ()).expect_err("refused").to_string();
    assert!(err.contains("api_conversation_history.json: line 3: malformed JSON"), "{err}");
}
