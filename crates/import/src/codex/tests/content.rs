//! The run's content (docs/format.md §9): messages, tool output files, edit diffs, the
//! task prompt and the final message, asserted by hand from the logs (line numbers are
//! the logs' lines).

use epistore_package::Message;
use serde_json::{json, Value};

use super::*;

fn messages(e: &Episode) -> &[Message] {
    e.messages.as_deref().expect("the messages trace is recorded")
}

/// The bytes of a package file, as text.
fn file_text(run: &Run, path: &str) -> Option<String> {
    let f = run.package.raw.files.iter().find(|f| f.path == path)?;
    Some(String::from_utf8(f.bytes.clone()).unwrap())
}

/// The output file of the `i`th tools record: its path is `artifacts/tool-output/<seq>.txt`,
/// and `output_text` reads it.
fn output(run: &Run, i: usize) -> Option<String> {
    let t = &run.package.episode.tools.as_ref().unwrap()[i];
    let path = t.output.clone()?;
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", t.common.seq));
    let text = file_text(run, &path).expect("the output file is in the package");
    assert_eq!(t.output_text.as_deref(), Some(text.as_str()));
    Some(text)
}

/// The `diff` of every action that has one, in order.
fn diffs(e: &Episode) -> Vec<String> {
    e.actions.as_ref().unwrap().iter().filter_map(|a| a.diff.clone()).collect()
}

/// (role, author, text) of every record with text or thinking, thinking as `~text`.
fn said(e: &Episode) -> Vec<(String, Option<String>, String)> {
    messages(e)
        .iter()
        .filter_map(|m| {
            let text = m.text.clone().or_else(|| m.reasoning.as_ref().map(|r| format!("~{r}")))?;
            Some((m.role.clone(), m.author.clone(), text))
        })
        .collect()
}

#[test]
fn fixture_rollout_content_by_hand() {
    let runs = import_ok(&[ROLLOUT], &Options::default());
    let run = &runs[0];
    let e = &run.package.episode;
    let m = messages(e);
    let tools = e.tools.as_ref().unwrap();

    // line 1 session_meta base_instructions: the system prompt, at the line's time.
    assert_eq!((m[0].role.as_str(), m[0].author.as_deref()), ("system", None));
    let prompt = m[0].text.as_deref().unwrap();
    assert!(prompt.starts_with("You are a coding agent running in the Codex CLI, a terminal-based coding assistant."));
    assert!(prompt.ends_with("ensure you call `update_plan` to mark all steps as `completed`.\n"));
    assert_eq!(prompt.len(), 20_903); // the whole text
    assert_eq!(m[0].common.ts.as_deref(), Some("2026-12-01T09:03:11.891Z"));
    // line 3, role developer, two input_text parts: one system record each.
    assert_eq!(m[1].role, "system");
    assert!(m[1].text.as_deref().unwrap().starts_with("<skills_instructions>\n## Skills\nA skill is a set"));
    assert_eq!(m[2].role, "system");
    assert!(m[2].text.as_deref().unwrap().starts_with("<permissions instructions>\nFilesystem sandboxing"));
    // line 4: Codex's <environment_context> (its provenance says "harness").
    assert_eq!((m[3].role.as_str(), m[3].author.as_deref()), ("user", Some("harness")));
    assert!(m[3].text.as_deref().unwrap().starts_with("<environment_context>\n  <cwd>/srv/greet</cwd>"));
    // line 8: the person's prompt (provenance "user"), which is the task prompt.
    let task = "greet() returns the wrong greeting. Fix greet.py so that python3 test_greet.py passes.";
    assert_eq!((m[4].role.as_str(), m[4].author.as_deref(), m[4].text.as_deref()), ("user", Some("human"), Some(task)));
    assert_eq!(e.manifest.task_prompt.as_deref(), Some(task));
    assert_eq!(m[4].common.ts.as_deref(), Some("2026-12-01T09:03:11.922Z"));

    // line 10 function_call: the call record (id, tool, the arguments string parsed),
    // its tools record, then the result (exit 1 from line 14: an error).
    assert_eq!(m[5].role, "assistant");
    assert_eq!(m[5].tool_call_id.as_deref(), Some("call_2e6faa6fcf69"));
    assert_eq!(m[5].tool.as_deref(), Some("exec_command"));
    assert_eq!(
        m[5].arguments.as_deref(),
        Some(r#"{"cmd":"cat greet.py; python3 test_greet.py","yield_time_ms":10000}"#)
    );
    assert_eq!(m[5].tool_seq, Some(tools[0].common.seq));
    assert_eq!(m[5].text, None);
    let result = &m[6];
    assert_eq!((result.role.as_str(), result.tool_call_id.as_deref()), ("tool", Some("call_2e6faa6fcf69")));
    assert_eq!(
        (result.tool_seq, result.is_error, result.text.as_deref()),
        (Some(tools[0].common.seq), Some(true), None)
    );
    // line 12 the agent's words; line 16 token_count last_token_usage 1200 in / 40 out
    // is the usage of the response that ended with them; line 6 turn_context model.
    assert_eq!(m[7].role, "assistant");
    assert_eq!(m[7].text.as_deref(), Some("Reading the code and running the test."));
    assert_eq!((m[7].tokens_in, m[7].tokens_out), (Some(1200), Some(40)));
    assert_eq!(m[7].model.as_deref(), Some("gpt-5.1-codex"));
    // lines 17, 22, 27: three more calls (call, result); line 33 the last words, with
    // line 35's usage (1600 / 40). The responses between were calls only: no tokens.
    assert_eq!(m.len(), 7 + 1 + 3 * 2 + 1);
    let last = m.last().unwrap();
    let done = "greet now returns \"Hello, NAME!\"; python3 test_greet.py passes. I also added NOTES.md.";
    assert_eq!((last.role.as_str(), last.text.as_deref()), ("assistant", Some(done)));
    assert_eq!((last.tokens_in, last.tokens_out), (Some(1600), Some(40)));
    // line 36 task_complete last_agent_message, the same words.
    assert_eq!(e.outcome.final_message.as_deref(), Some(done));
    assert!(m.iter().all(|m| m.reasoning.is_none())); // turn_context "summary": "none"

    // What each call printed. line 14's aggregated_output, which is also line 15's text
    // after Codex's header ("Chunk ID ... Process exited with code 1 ... Output:").
    let printed = "def greet(name):\n    return \"Hello \" + name\nTraceback (most recent call last):\n  File \
                   \"/srv/greet/test_greet.py\", line 2, in <module>\n    assert greet(\"Ada\") == \"Hello, Ada!\", \
                   greet(\"Ada\")\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: Hello Ada\n";
    assert_eq!(output(run, 0).as_deref(), Some(printed));
    // The patch (line 17): line 19's stdout, also line 20's text under its two headers.
    assert_eq!(output(run, 1).as_deref(), Some("Success. Updated the following files:\nM greet.py\n"));
    assert_eq!(output(run, 2).as_deref(), Some("greet ok\n")); // line 24 / 25
    assert_eq!(output(run, 3).as_deref(), Some(" M greet.py\n?? NOTES.md\n")); // line 29 / 30

    // The patch's diff: line 19 FileChange `unified_diff` (the file's line numbers) under
    // the headers of its path, relative to the working directory.
    let diff =
        "--- a/greet.py\n+++ b/greet.py\n@@ -1,2 +1,2 @@\n def greet(name):\n-    return \"Hello \" + name\n+    \
                return \"Hello, \" + name + \"!\"\n";
    assert_eq!(diffs(e), vec![diff.to_string()]);
    // No turn_diff in the log: patch.diff is that diff, said to be derived.
    assert_eq!(file_text(run, "patch.diff").as_deref(), Some(diff));
    assert!(notes(run).iter().any(|n| n.starts_with("patch.diff is derived")));
    assert!(!notes(run).iter().any(|n| n.contains("numbered within")));
}

#[test]
fn fixture_exec_json_content_by_hand() {
    let runs = import_ok(&[EXEC], &with_model("gpt-5.1-codex"));
    let run = &runs[0];
    let e = &run.package.episode;
    let m = messages(e);
    // line 4 agent_message, then the calls of lines 5-12 (call, result), line 13 the
    // last words. The output has no prompt, usage per message, model or time.
    assert_eq!(
        said(e),
        vec![
            ("assistant".into(), None, "Reading the code and running the test.".into()),
            (
                "assistant".into(),
                None,
                "greet now returns \"Hello, NAME!\"; python3 test_greet.py passes. I also added NOTES.md.".into()
            ),
        ]
    );
    assert_eq!(m.len(), 2 + 4 * 2);
    assert!(m.iter().all(|m| m.tokens_in.is_none() && m.model.is_none() && m.common.ts.is_none()));
    assert_eq!(e.manifest.task_prompt, None);
    assert_eq!(
        e.outcome.final_message.as_deref(),
        Some("greet now returns \"Hello, NAME!\"; python3 test_greet.py passes. I also added NOTES.md.")
    );
    // line 5/6 item_2: the call's id is the item's, its arguments the item's command.
    assert_eq!(m[1].tool_call_id.as_deref(), Some("item_2"));
    assert_eq!(m[1].arguments.as_deref(), Some(r#"{"command":"/bin/bash -lc 'cat greet.py; python3 test_greet.py'"}"#));
    assert_eq!((m[2].role.as_str(), m[2].is_error), ("tool", Some(true))); // exit_code 1, status failed
                                                                           // line 6 aggregated_output, line 10, line 12.
    let printed = "def greet(name):\n    return \"Hello \" + name\nTraceback (most recent call last):\n  File \
                   \"/srv/greet/test_greet.py\", line 2, in <module>\n    assert greet(\"Ada\") == \"Hello, Ada!\", \
                   greet(\"Ada\")\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError: Hello Ada\n";
    assert_eq!(output(run, 0).as_deref(), Some(printed));
    assert_eq!(output(run, 2).as_deref(), Some("greet ok\n"));
    assert_eq!(output(run, 3).as_deref(), Some(" M greet.py\n?? NOTES.md\n"));
    // line 8 file_change: only paths and kinds, no output and no diff.
    assert_eq!(output(run, 1), None);
    assert_eq!(m[3].arguments.as_deref(), Some(r#"{"changes":[{"kind":"update","path":"/srv/greet/greet.py"}]}"#));
    assert!(diffs(e).is_empty());
    assert!(!has_file(run, "patch.diff"));
}

/// A rollout in the fixture's shape (the lines' fields as Codex 0.171.0 writes them,
/// trimmed) with what the fixture run does not hold: reasoning summaries, a freeform
/// `apply_patch` of several files with no patch event (so no line numbers), and an
/// older shell tool's JSON output.
fn patch_rollout() -> Vec<Value> {
    let ts = |s: u32| format!("2026-12-02T10:00:{s:02}.000Z");
    let line = |s: u32, ty: &str, payload: Value| json!({"timestamp": ts(s), "type": ty, "payload": payload});
    let turn = json!({"turn_id": "t-1"});
    let user = |s: u32, text: &str, provenance: &str| {
        line(
            s,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}],
                   "internal_chat_message_metadata_passthrough": {"turn_id": "t-1", "content_item_metadata": [{"provenance": {"type": provenance}}]}}),
        )
    };
    let said = |s: u32, text: &str| {
        line(
            s,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}],
                   "internal_chat_message_metadata_passthrough": turn}),
        )
    };
    let usage = |s: u32, i: i64, o: i64, total_i: i64, total_o: i64| {
        line(
            s,
            "event_msg",
            json!({"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": total_i, "cached_input_tokens": 0, "output_tokens": total_o, "reasoning_output_tokens": 0, "total_tokens": total_i + total_o},
                "last_token_usage": {"input_tokens": i, "cached_input_tokens": 0, "output_tokens": o, "reasoning_output_tokens": 0, "total_tokens": i + o},
                "model_context_window": 258400}}),
        )
    };
    let patch =
        "*** Begin Patch\n*** Update File: src/calc.py\n@@ def add(a, b):\n-    return a - b\n+    return a + b\n@@ \
                 def sub(a, b):\n     \"\"\"Subtract.\"\"\"\n-    return a + b\n+    return a - b\n*** Add File: \
                 tests/test_calc.py\n+from src.calc import add\n+\n+def test_add():\n+    assert add(1, 2) == 3\n*** \
                 Delete File: old_calc.py\n*** Update File: README\n*** Move to: README.md\n@@\n # calc\n-tiny \
                 calculator\n+A tiny calculator.\n*** End Patch\n";
    vec![
        /* 1 */
        line(
            0,
            "session_meta",
            json!({"session_id": "01a23100-0000-7000-8000-000000000001", "id": "01a23100-0000-7000-8000-000000000001",
                   "timestamp": ts(0), "cwd": "/srv/calc", "originator": "codex_exec", "cli_version": "0.171.0", "source": "exec",
                   "model_provider": "openai", "base_instructions": {"text": "You are a coding agent running in the Codex CLI."}}),
        ),
        /* 2 */
        line(
            0,
            "event_msg",
            json!({"type": "task_started", "turn_id": "t-1", "model_context_window": 258400, "collaboration_mode_kind": "default"}),
        ),
        /* 3 */
        line(
            1,
            "response_item",
            json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>\nNo sandbox.\n</permissions instructions>"}]}),
        ),
        /* 4 */ user(1, "<environment_context>\n  <cwd>/srv/calc</cwd>\n</environment_context>", "harness"),
        /* 5 */
        line(
            1,
            "turn_context",
            json!({"turn_id": "t-1", "cwd": "/srv/calc", "approval_policy": "never", "approvals_reviewer": "user", "model": "gpt-5.1-codex", "summary": "auto"}),
        ),
        /* 6 */
        user(2, "Fix add() and sub() in src/calc.py, add a test, drop old_calc.py, rename README.", "user"),
        /* 7 */
        line(
            3,
            "response_item",
            json!({"type": "reasoning", "id": "rs_1", "summary": [
                {"type": "summary_text", "text": "**Reading the task**\n\nadd and sub are swapped."},
                {"type": "summary_text", "text": "**Planning the patch**\n\nOne patch for every file."}],
                "content": null, "encrypted_content": "gAAAAB"}),
        ),
        /* 8 */ said(3, "I'll fix calc.py and the files around it in one patch."),
        /* 9 */ usage(3, 900, 60, 900, 60),
        /* 10 */
        line(
            4,
            "response_item",
            json!({"type": "custom_tool_call", "status": "completed", "call_id": "call_patch", "name": "apply_patch", "input": patch}),
        ),
        /* 11 */
        line(
            5,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "call_patch",
                   "output": "Exit code: 0\nWall time: 0.1 seconds\nOutput:\nSuccess. Updated the following files:\nM src/calc.py\nA tests/test_calc.py\nD old_calc.py\nM README.md\n"}),
        ),
        /* 12 */ usage(5, 1000, 300, 1900, 360),
        /* 13 */
        line(
            6,
            "response_item",
            json!({"type": "function_call", "name": "shell", "call_id": "call_test",
                   "arguments": json!({"command": ["bash", "-lc", "pytest -q"], "workdir": "/srv/calc"}).to_string()}),
        ),
        /* 14 */
        line(
            8,
            "response_item",
            json!({"type": "function_call_output", "call_id": "call_test",
                   "output": json!({"output": "..\n2 passed in 0.01s\n", "metadata": {"exit_code": 0, "duration_seconds": 1.5}}).to_string()}),
        ),
        /* 15 */ usage(8, 1100, 20, 3000, 380),
        /* 16 */ said(9, "Fixed add() and sub(), added a test, removed old_calc.py, renamed README."),
        /* 17 */ usage(9, 1200, 30, 4200, 410),
        /* 18 */
        line(
            9,
            "event_msg",
            json!({"type": "task_complete", "turn_id": "t-1", "last_agent_message": "Fixed add() and sub(), added a test, removed old_calc.py, renamed README."}),
        ),
    ]
}

#[test]
fn a_patch_without_line_numbers_reasoning_and_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "rollout-2026-12-02T10-00-00-01a23100.jsonl", &patch_rollout());
    let run = one(&[path], &Options::default());
    let e = &run.package.episode;
    let m = messages(e);
    assert_eq!(
        said(e),
        vec![
            ("system".into(), None, "You are a coding agent running in the Codex CLI.".into()), // line 1
            ("system".into(), None, "<permissions instructions>\nNo sandbox.\n</permissions instructions>".into()), // 3
            (
                "user".into(),
                Some("harness".into()),
                "<environment_context>\n  <cwd>/srv/calc</cwd>\n</environment_context>".into()
            ), // 4
            (
                "user".into(),
                Some("human".into()),
                "Fix add() and sub() in src/calc.py, add a test, drop old_calc.py, rename README.".into()
            ), // 6
            // line 7: two summary parts, one record each (the encrypted content unread).
            ("assistant".into(), None, "~**Reading the task**\n\nadd and sub are swapped.".into()),
            ("assistant".into(), None, "~**Planning the patch**\n\nOne patch for every file.".into()),
            ("assistant".into(), None, "I'll fix calc.py and the files around it in one patch.".into()), // 8
            (
                "assistant".into(),
                None,
                "Fixed add() and sub(), added a test, removed old_calc.py, renamed README.".into()
            ), // 16
        ]
    );
    // line 9's usage is the response of lines 7-8: on its last part, the words (line 8);
    // line 12 and 15 follow responses of calls only; line 17 is line 16's.
    let words: Vec<&Message> = m.iter().filter(|m| m.role == "assistant" && m.tool.is_none()).collect();
    assert_eq!(
        words.iter().map(|m| (m.tokens_in, m.tokens_out)).collect::<Vec<_>>(),
        vec![(None, None), (None, None), (Some(900), Some(60)), (Some(1200), Some(30))]
    );
    assert!(words.iter().all(|m| m.model.as_deref() == Some("gpt-5.1-codex"))); // line 5
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("Fix add() and sub() in src/calc.py, add a test, drop old_calc.py, rename README.")
    );
    assert_eq!(
        e.outcome.final_message.as_deref(),
        Some("Fixed add() and sub(), added a test, removed old_calc.py, renamed README.")
    );

    // line 10: the call record carries the freeform input as the log gives it (a string).
    let call = m.iter().find(|m| m.tool_call_id.as_deref() == Some("call_patch")).unwrap();
    assert_eq!(call.tool.as_deref(), Some("apply_patch"));
    assert!(call.arguments.as_deref().unwrap().starts_with(r#""*** Begin Patch\n*** Update File: src/calc.py"#));
    // line 11: what apply_patch printed, under Codex's "Exit code / Wall time / Output:".
    assert_eq!(
        output(&run, 0).as_deref(),
        Some(
            "Success. Updated the following files:\nM src/calc.py\nA tests/test_calc.py\nD old_calc.py\nM README.md\n"
        )
    );
    // line 14: the shell tool's JSON output: its `output`, not the JSON.
    assert_eq!(output(&run, 1).as_deref(), Some("..\n2 passed in 0.01s\n"));
    assert_eq!(e.tools.as_ref().unwrap()[1].exit_code, Some(0)); // metadata.exit_code

    // line 10's patch as one unified diff: the update's two chunks numbered within the
    // chunks (the patch has no line numbers), the `@@ def ...` context after each hunk
    // header; the added file whole; the deleted file (no contents in the log) left out;
    // the move as a/README -> b/README.md.
    let diff = concat!(
        "--- a/src/calc.py\n+++ b/src/calc.py\n",
        "@@ -1 +1 @@ def add(a, b):\n-    return a - b\n+    return a + b\n",
        "@@ -2,2 +2,2 @@ def sub(a, b):\n     \"\"\"Subtract.\"\"\"\n-    return a + b\n+    return a - b\n",
        "--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,4 @@\n",
        "+from src.calc import add\n+\n+def test_add():\n+    assert add(1, 2) == 3\n",
        "--- a/README\n+++ b/README.md\n@@ -1,2 +1,2 @@\n # calc\n-tiny calculator\n+A tiny calculator.\n",
    );
    assert_eq!(diffs(e), vec![diff.to_string()]);
    assert_eq!(
        mutations(e),
        vec![(
            "edit".into(),
            vec![
                "src/calc.py".into(),
                "tests/test_calc.py".into(),
                "old_calc.py".into(),
                "README".into(),
                "README.md".into()
            ],
            true
        )]
    );
    assert!(notes(&run).iter().any(|n| n.contains("numbered within the replaced text")));
    assert_eq!(file_text(&run, "patch.diff").as_deref(), Some(diff));
}

#[test]
fn the_older_handmade_shapes_give_their_content() {
    let dir = tempfile::tempdir().unwrap();
    // The old rollout: people's and Codex's user messages, the encrypted-only reasoning
    // (line 6) giving nothing, JSON outputs, a declined call with no output file.
    let path = write(dir.path(), "rollout-old.jsonl", &handmade::old_rollout());
    let run = one(&[path], &with_model("codex-mini-latest"));
    let e = &run.package.episode;
    assert_eq!(
        said(e),
        vec![
            ("user".into(), Some("harness".into()), "<user_instructions>\n\nBe brief.\n\n</user_instructions>".into()), // 2
            (
                "user".into(),
                Some("harness".into()),
                "<environment_context>\n  <cwd>/home/dev/calc</cwd>\n</environment_context>".into()
            ), // 3
            ("user".into(), Some("human".into()), "Fix add() in calc.py so the tests pass.".into()), // 4
            ("assistant".into(), None, "Fixed add(); the tests pass.".into()),                       // 13
            ("user".into(), Some("human".into()), "Also leave a NOTES.md.".into()),                  // 15
            ("assistant".into(), None, "Added NOTES.md; left build/ alone.".into()),                 // 20
        ]
    );
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("Fix add() in calc.py so the tests pass."));
    assert_eq!(e.outcome.final_message.as_deref(), Some("Added NOTES.md; left build/ alone."));
    assert_eq!(output(&run, 0).as_deref(), Some("F.\n1 failed, 1 passed in 0.02s\n")); // line 8 `output`
    assert_eq!(output(&run, 1).as_deref(), Some("Success. Updated the following files:\nM calc.py\n")); // 10
    assert_eq!(output(&run, 3).as_deref(), Some("")); // line 17: printed nothing
    assert_eq!(output(&run, 4), None); // line 19: rejected, never ran
                                       // line 9: one chunk, no line numbers.
    assert_eq!(diffs(e), vec!["--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-    return a - b\n+    return a + b\n"]);
    let args = messages(e).iter().find_map(|m| m.arguments.clone()).unwrap();
    assert_eq!(args, r#"{"command":["bash","-lc","pytest -q"]}"#); // line 7's arguments string

    // The extended new rollout: line 11's patch (which failed: its action is not ok)
    // from its text, line 14's from line 15's patch_apply_end contents; both add the
    // whole file.
    let path = write(dir.path(), "rollout-new.jsonl", &handmade::new_rollout());
    let run = one(&[path], &Options::default());
    let e = &run.package.episode;
    let added = "--- /dev/null\n+++ b/src/util.js\n@@ -0,0 +1 @@\n+module.exports = 1;\n";
    assert_eq!(diffs(e), vec![added, added]);
    assert_eq!(output(&run, 1).as_deref(), Some("apply_patch verification failed: invalid hunk")); // line 13
    let failed = messages(e).iter().find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some("call_b")).unwrap();
    assert_eq!(failed.is_error, Some(true)); // line 12 success false
                                             // line 9 after its header; the person's command (26) keeps its own output file.
    assert_eq!(output(&run, 0).as_deref(), Some("Tests: 1 failed, 3 passed, 4 total"));
    // line 24 turn_diff is the patch: not derived, and nothing numbered within a fragment.
    assert!(file_text(&run, "patch.diff").unwrap().starts_with("diff --git a/src/util.js"));
    assert!(!notes(&run).iter().any(|n| n.contains("derived") || n.contains("numbered within")));
    // lines 4/5 are one message (the response item is read, not the event); line 30
    // (an event only, in a log with response items) is not a message.
    let people: Vec<_> = said(e).into_iter().filter(|(_, a, _)| a.as_deref() == Some("human")).collect();
    assert_eq!(people, vec![("user".into(), Some("human".into()), "Make the tests pass".into())]);
}

#[test]
fn the_oldest_exec_output_gives_its_content_from_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "exec-oldest.jsonl",
        &[
            /* 1 */
            json!({"workdir": "/w/proj", "model": "o4-mini", "provider": "openai", "approval": "never", "sandbox": "workspace-write"}),
            /* 2 */ json!({"prompt": "make test_x pass"}),
            /* 3 */
            json!({"id": "", "msg": {"type": "session_configured", "session_id": "5c1f0e2a", "model": "o4-mini"}}),
            /* 4 */ json!({"id": "0", "msg": {"type": "task_started"}}),
            /* 5 */ json!({"id": "0", "msg": {"type": "agent_reasoning", "text": "**Checking x.py**"}}),
            /* 6 */
            json!({"id": "0", "msg": {"type": "exec_command_begin", "call_id": "c1", "command": ["bash", "-lc", "python3 test_x.py"], "cwd": "/w/proj"}}),
            /* 7 */
            json!({"id": "0", "msg": {"type": "exec_command_end", "call_id": "c1", "stdout": "F\n", "stderr": "boom\n", "aggregated_output": "F\nboom\n", "exit_code": 1, "duration": {"secs": 0, "nanos": 1000000}}}),
            /* 8 */
            json!({"id": "0", "msg": {"type": "patch_apply_begin", "call_id": "c2", "auto_approved": true, "changes": {"/w/proj/x.py": {"update": {"unified_diff": "@@ -3 +3 @@\n-x = 0\n+x = 1\n", "move_path": null}}}}}),
            /* 9 */
            json!({"id": "0", "msg": {"type": "patch_apply_end", "call_id": "c2", "stdout": "Success. Updated the following files:\nM x.py\n", "stderr": "", "success": true}}),
            /* 10 */ json!({"id": "0", "msg": {"type": "agent_message", "message": "x is 1 now"}}),
            /* 11 */ json!({"id": "0", "msg": {"type": "task_complete", "last_agent_message": "x is 1 now"}}),
        ],
    );
    let run = one(&[path], &Options::default());
    let e = &run.package.episode;
    assert_eq!(
        said(e),
        vec![
            ("user".into(), Some("human".into()), "make test_x pass".into()), // line 2
            ("assistant".into(), None, "~**Checking x.py**".into()),          // line 5
            ("assistant".into(), None, "x is 1 now".into()),                  // line 10
        ]
    );
    assert!(messages(e).iter().filter(|m| m.tool.is_none()).skip(1).all(|m| m.model.as_deref() == Some("o4-mini")));
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("make test_x pass"));
    assert_eq!(e.outcome.final_message.as_deref(), Some("x is 1 now"));
    assert_eq!(output(&run, 0).as_deref(), Some("F\nboom\n")); // line 7 aggregated_output
    assert_eq!(output(&run, 1).as_deref(), Some("Success. Updated the following files:\nM x.py\n")); // line 9
    let call = messages(e).iter().find(|m| m.tool_call_id.as_deref() == Some("c1")).unwrap();
    assert_eq!(call.arguments.as_deref(), Some(r#"{"command":["bash","-lc","python3 test_x.py"]}"#));
    // line 8: the older `{"update": {"unified_diff"}}` change, the file's own numbers.
    assert_eq!(diffs(e), vec!["--- a/x.py\n+++ b/x.py\n@@ -3 +3 @@\n-x = 0\n+x = 1\n"]);
}

#[test]
fn codex_headers_and_patch_paths() {
    use super::super::calls::printed_text;
    use crate::common::apply_patch::patch_diff;
    // Codex's header above a command's output (older shell tools, unified exec).
    assert_eq!(printed_text("Exit code: 0\nWall time: 0 seconds\nOutput:\nhi\n"), ("hi\n", false));
    let chunk = "Chunk ID: 1a\nWall time: 1.0 seconds\nProcess running with session ID 7\nOriginal token count: 2\nOutput:\npart";
    assert_eq!(printed_text(chunk), ("part", true));
    // A text whose lines above `Output:` are not Codex's is the program's own: whole.
    assert_eq!(printed_text("report\nOutput:\nx\n"), ("report\nOutput:\nx\n", false));

    // A patch run in a subdirectory names `a.py`; its event names `/w/sub/a.py`: one
    // file, the event's diff (the file's line numbers), not a fragment.
    let rel = |p: &str| p.strip_prefix("/w/").unwrap_or(p).to_string();
    let changes =
        json!({"/w/sub/a.py": {"type": "update", "unified_diff": "@@ -7 +7 @@\n-x\n+y\n", "move_path": null}});
    let text = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch";
    let (diff, fragment) = patch_diff(text, Some(&changes), &rel);
    assert_eq!(diff.as_deref(), Some("--- a/sub/a.py\n+++ b/sub/a.py\n@@ -7 +7 @@\n-x\n+y\n"));
    assert!(!fragment);
    // Without the event: the chunk, numbered within itself.
    let (diff, fragment) = patch_diff(text, None, &rel);
    assert_eq!(diff.as_deref(), Some("--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"));
    assert!(fragment);
    // An insertion-only chunk: the old side is empty (`-0,0`).
    let (diff, _) = patch_diff("*** Update File: b.txt\n@@\n+new\n", None, &rel);
    assert_eq!(diff.as_deref(), Some("--- a/b.txt\n+++ b/b.txt\n@@ -0,0 +1 @@\n+new\n"));
}
