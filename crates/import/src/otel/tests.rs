//! Telemetry read by hand from the constructed payloads of tests/fixtures/constructed/otlp (their
//! README says where every attribute comes from): each request is one line of an OTLP
//! JSON Lines file, as `epistore collect` keeps a session.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::testing::{fixtures, import_all, import_paths};
use crate::{detect, Options};

/// The fixture request as one compact line in `dir/name` (repeated `times`).
fn jsonl(dir: &Path, fixture: &str, name: &str, times: usize) -> PathBuf {
    let request: Value = serde_json::from_slice(
        &std::fs::read(fixtures(&format!("constructed/otlp/{}/{fixture}", fixture.split("-logs").next().unwrap())))
            .unwrap(),
    )
    .unwrap();
    let line = serde_json::to_string(&request).unwrap() + "\n";
    let path = dir.join(name);
    std::fs::write(&path, line.repeat(times)).unwrap();
    path
}

fn notes(e: &epistore_package::Episode) -> Vec<String> {
    let p = e.manifest.provenance().unwrap();
    p["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect()
}

#[test]
fn each_agent_is_detected_by_its_records() {
    let dir = tempfile::tempdir().unwrap();
    for (fixture, format) in [
        ("claude-code-logs.json", "claude-code-otel"),
        ("claude-code-logs.js-numbers.json", "claude-code-otel"),
        ("codex-logs.json", "codex-otel"),
        ("gemini-cli-logs.json", "gemini-cli-otel"),
    ] {
        let path = jsonl(dir.path(), fixture, &format!("{fixture}.otlp.jsonl"), 1);
        assert_eq!(detect(&path).map(|f| f.name()), Some(format), "{fixture}");
    }
}

#[test]
fn a_request_body_as_sent_reads_as_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let line = jsonl(dir.path(), "codex-logs.json", "s.otlp.jsonl", 1);
    let body = fixtures("constructed/otlp/codex/codex-logs.json");
    let summary = |p: &Path| {
        let e = import_all(p, &Options::default()).remove(0).package.episode;
        (e.manifest.episode, e.outcome.tokens_in, e.tools.map(|t| t.len()))
    };
    assert_eq!(summary(&line), summary(&body));
}

#[test]
fn claude_code_telemetry_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = jsonl(dir.path(), "claude-code-logs.json", "s.otlp.jsonl", 1);
    let runs = import_all(&path, &Options::default());
    assert_eq!(runs.len(), 1);
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "3f6c2a1e-8b4d-4e2a-9c61-5d0b7e9a4f12");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5-20250929");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("claude-code"));
    assert_eq!(e.manifest.harness_version.as_deref(), Some("2.1.239"));
    // Two api_requests: input 3 + 14210 + 3417 and 5 + 17627 + 1327; output 142 + 188.
    assert_eq!(e.outcome.tokens_in, Some(3 + 14210 + 3417 + 5 + 17627 + 1327));
    assert_eq!(e.outcome.tokens_out, Some(330));
    assert!((e.outcome.cost_usd.unwrap() - (0.01921575 + 0.01309935)).abs() < 1e-9);
    // Two tool results: Bash without its command (no OTEL_LOG_TOOL_DETAILS) is opaque,
    // Edit without its path an edit of unknown files; durations as sent.
    let tools: Vec<(&str, Option<f64>, Option<i64>)> =
        e.tools.iter().flatten().map(|t| (t.tool.as_str(), t.duration_ms, t.exit_code)).collect();
    assert_eq!(tools, vec![("Bash", Some(1264.0), None), ("Edit", Some(78.0), None)]);
    // The prompt and replies were withheld (<REDACTED>): said, not guessed.
    assert!(e.manifest.task_prompt.is_none());
    assert!(notes(e).iter().any(|n| n.contains("1 prompts were sent without their text")), "{:?}", notes(e));
    assert!(notes(e).iter().any(|n| n.contains("without their command")));
    // No completion claim is guessed; the end is not observed.
    assert_eq!(e.outcome.agent_reported_complete, None);
    assert_eq!(e.outcome.stop_reason, "other");
    assert_eq!(e.outcome.correct, None);
}

#[test]
fn numbers_and_strings_read_alike_and_a_retried_batch_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let strings = jsonl(dir.path(), "claude-code-logs.json", "a.otlp.jsonl", 1);
    let numbers = jsonl(dir.path(), "claude-code-logs.js-numbers.json", "b.otlp.jsonl", 1);
    let twice = jsonl(dir.path(), "claude-code-logs.json", "c.otlp.jsonl", 2);
    let summary = |p: &Path| {
        let e = import_all(p, &Options::default()).remove(0).package.episode;
        let tools: Vec<(String, Option<f64>)> =
            e.tools.iter().flatten().map(|t| (t.tool.clone(), t.duration_ms)).collect();
        (e.outcome.tokens_in, e.outcome.tokens_out, e.outcome.cost_usd, tools)
    };
    let a = summary(&strings);
    assert_eq!(a, summary(&numbers));
    assert_eq!(a, summary(&twice));
}

#[test]
fn codex_telemetry_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = jsonl(dir.path(), "codex-logs.json", "s.otlp.jsonl", 1);
    let e = import_all(&path, &Options::default()).remove(0).package.episode;
    assert_eq!(e.manifest.episode, "019d7a3e-5c21-7b40-9e8f-2a6c4d1b3e57");
    assert_eq!(e.manifest.model, "gpt-5.1-codex-max");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("codex"));
    assert_eq!(e.manifest.harness_version.as_deref(), Some("0.171.0"));
    assert_eq!(e.outcome.tokens_in, Some(8231 + 8912));
    assert_eq!(e.outcome.tokens_out, Some(214 + 96));
    // Codex sends no cost.
    assert_eq!(e.outcome.cost_usd, None);
    let tools: Vec<&epistore_package::Tool> = e.tools.iter().flatten().collect();
    assert_eq!(tools.len(), 2);
    // exec_command: `cargo test -p parser`, exit code 101 read from its preview (derived).
    assert_eq!(tools[0].command.as_deref(), Some("cargo test -p parser"));
    assert_eq!(tools[0].exit_code, Some(101));
    assert_eq!(tools[0].common.grade, "derived");
    assert!(tools[0].output_text.as_deref().unwrap_or("").contains("test result: FAILED"));
    // The check it is fails, on revision 0; the patch is an edit of src/parser.rs with
    // its diff, after which the failing check is stale.
    let checks: Vec<_> = e.checks.iter().flatten().collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("the patch");
    assert_eq!(edit.paths, vec!["src/parser.rs".to_string()]);
    assert!(edit.diff.as_deref().unwrap().contains("+    let end = start + digits.len();"));
    assert_eq!(e.outcome.agent_reported_complete, None);
}

#[test]
fn gemini_cli_telemetry_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = jsonl(dir.path(), "gemini-cli-logs.json", "s.otlp.jsonl", 1);
    let e = import_all(&path, &Options::default()).remove(0).package.episode;
    assert_eq!(e.manifest.episode, "c8a4e2f0-6b1d-4c3e-9a7f-5d2b8e0c4a16");
    assert_eq!(e.manifest.model, "gemini-2.5-pro");
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("Run the parser tests and fix the failing one."));
    assert_eq!(e.outcome.tokens_in, Some(9120 + 9398));
    // Output counts the thoughts: 61 + 184 and 23 + 96.
    assert_eq!(e.outcome.tokens_out, Some(61 + 184 + 23 + 96));
    let tools: Vec<&epistore_package::Tool> = e.tools.iter().flatten().collect();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].command.as_deref(), Some("cargo test -p parser"));
    assert_eq!(tools[0].duration_ms, Some(1903.0));
    // The output comes from the next request's functionResponse, its exit code from it.
    assert!(tools[0].output_text.as_deref().unwrap_or("").contains("test result: FAILED"));
    assert_eq!(tools[0].exit_code, Some(101));
    // The model's replies are its messages.
    let said: Vec<&str> =
        e.messages.iter().flatten().filter(|m| m.role == "assistant").filter_map(|m| m.text.as_deref()).collect();
    assert!(said.iter().any(|t| t.contains("One test fails")), "{said:?}");
}

#[test]
fn a_file_of_many_sessions_is_one_run_each() {
    let dir = tempfile::tempdir().unwrap();
    let a = std::fs::read_to_string(jsonl(dir.path(), "claude-code-logs.json", "a", 1)).unwrap();
    let b = a.replace("3f6c2a1e-8b4d-4e2a-9c61-5d0b7e9a4f12", "11111111-2222-3333-4444-555555555555");
    let path = dir.path().join("both.otlp.jsonl");
    std::fs::write(&path, a + &b).unwrap();
    let (plan, runs) = import_paths(&[path], &Options::default());
    assert!(plan.refused.is_empty());
    let mut labels: Vec<String> = runs.into_iter().map(|r| r.unwrap().package.episode.manifest.episode).collect();
    labels.sort();
    assert_eq!(labels, vec!["11111111-2222-3333-4444-555555555555", "3f6c2a1e-8b4d-4e2a-9c61-5d0b7e9a4f12"]);
}

#[test]
fn a_line_that_is_not_a_request_is_refused_with_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(jsonl(dir.path(), "codex-logs.json", "a", 1)).unwrap();
    let path = dir.path().join("bad.otlp.jsonl");
    std::fs::write(&path, good + "{\"resourceLogs\": [\n").unwrap();
    let (plan, _) = import_paths(&[path], &Options::default());
    let refusal = &plan.refused.first().expect("refused").1;
    assert_eq!(refusal.place.as_deref(), Some("line 2"), "{refusal}");
}
