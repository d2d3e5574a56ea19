//! Hand-made logs of the shapes the fixture run does not hold, each asserted by hand
//! (line numbers in the comments are the lines of the log as written).

use serde_json::{json, Value};

use super::*;

/// An old rollout (codex-rs before `session_meta`): a bare first line, response items,
/// `record_type: state` lines, no events and no model.
pub(super) fn old_rollout() -> Vec<Value> {
    let shell = |id: &str, cmd: &str| {
        json!({"type": "function_call", "name": "shell", "call_id": id,
               "arguments": json!({"command": ["bash", "-lc", cmd]}).to_string()})
    };
    let out = |id: &str, text: &str, code: i64, secs: f64| {
        json!({"type": "function_call_output", "call_id": id,
               "output": json!({"output": text, "metadata": {"exit_code": code, "duration_seconds": secs}}).to_string()})
    };
    let user = |t: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]});
    let said =
        |t: &str| json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]});
    vec![
        /* 1 */
        json!({"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-05-07T17:24:21.123Z",
               "instructions": null,
               "git": {"commit_hash": "4b825dc", "branch": "main", "repository_url": "https://github.com/acme/calc.git"}}),
        /* 2 */ user("<user_instructions>\n\nBe brief.\n\n</user_instructions>"),
        /* 3 */
        user("<environment_context>\n  <cwd>/home/dev/calc</cwd>\n</environment_context>"),
        /* 4 */ user("Fix add() in calc.py so the tests pass."),
        /* 5 */ json!({"record_type": "state"}),
        /* 6 */
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
        /* 7 */ shell("call_1", "pytest -q"),
        /* 8 */ out("call_1", "F.\n1 failed, 1 passed in 0.02s\n", 1, 0.4),
        /* 9 */
        json!({"type": "function_call", "name": "apply_patch", "call_id": "call_2",
               "arguments": json!({"input": "*** Begin Patch\n*** Update File: calc.py\n@@\n-    return a - b\n+    return a + b\n*** End Patch"}).to_string()}),
        /* 10 */
        out("call_2", "Success. Updated the following files:\nM calc.py\n", 0, 0.0),
        /* 11 */
        json!({"type": "local_shell_call", "id": "lsh_3", "call_id": "call_3", "status": "completed",
               "action": {"type": "exec", "command": ["bash", "-lc", "pytest -q tests/test_calc.py"], "timeout_ms": null}}),
        /* 12 */ out("call_3", "..\n2 passed in 0.01s\n", 0, 0.3),
        /* 13 */ said("Fixed add(); the tests pass."),
        /* 14 */ json!({"record_type": "state"}),
        /* 15 */ user("Also leave a NOTES.md."),
        /* 16 */ shell("call_4", "touch NOTES.md"),
        /* 17 */ out("call_4", "", 0, 0.0),
        /* 18 */ shell("call_5", "rm -rf build"),
        /* 19 */
        json!({"type": "function_call_output", "call_id": "call_5", "output": "exec command rejected by user"}),
        /* 20 */ said("Added NOTES.md; left build/ alone."),
    ]
}

#[test]
fn old_shape_rollout_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "rollout-2025-05-07T17-24-21-5973b6c0.jsonl", &old_rollout());
    // No model anywhere in this shape: refused without --model.
    let (_, runs) = import_paths(std::slice::from_ref(&path), &Options::default());
    assert!(runs[0].as_ref().unwrap_err().reason.contains("names no model"));

    let run = one(&[path], &with_model("codex-mini-latest"));
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "5973b6c0-94b8-487b-a530-2aeb6098ae0e");
    assert_eq!(e.manifest.cluster, "https://github.com/acme/calc.git"); // line 1 git remote
    assert_eq!(e.manifest.harness_version, None);
    // lines 7, 9, 11, 16, 18; exit codes from the outputs' metadata (observed), the
    // denied call (19) none.
    assert_eq!(
        tools(e),
        vec![
            ("shell".into(), Some(1)),
            ("apply_patch".into(), Some(0)),
            ("local_shell".into(), Some(0)),
            ("shell".into(), Some(0)),
            ("shell".into(), None),
        ]
    );
    let t = e.tools.as_ref().unwrap();
    assert_eq!(t[0].command.as_deref(), Some("bash -lc 'pytest -q'"));
    assert_eq!(t[0].duration_ms, Some(400.0));
    assert_eq!(t[4].failure_type, "permission_denied");
    // line 9 patch (observed) and line 16 touch (derived); the paths relative to the
    // working directory the environment context names (line 3).
    assert_eq!(
        mutations(e),
        vec![("edit".into(), vec!["calc.py".into()], true), ("create".into(), vec!["NOTES.md".into()], true)]
    );
    assert_eq!(e.derived.final_revision, 2);
    assert_eq!(checks(e), vec![("regression".into(), "fail".into(), 0), ("targeted_test".into(), "pass".into(), 1)]);
    assert_eq!(e.derived.posture, "stale");
    // line 15 a person's message after the prompt (line 4); line 19 a person's denial.
    assert_eq!(
        interventions(e),
        vec![("other".into(), "Also leave a NOTES.md.".into()), ("other".into(), "bash -lc 'rm -rf build'".into())]
    );
    // No task_complete in this shape: each turn's last message (13, 20) is its claim.
    assert_eq!(claims(e), 2);
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    assert_eq!((e.outcome.correct, e.outcome.label.clone()), (None, None));
    assert_eq!(e.outcome.tokens_in, None);
}

/// A rollout of the `RolloutLine` shape with extended events: exec and patch end
/// events, a denial, a person's shell command, a second turn aborted.
pub(super) fn new_rollout() -> Vec<Value> {
    let ts = |s: u32| format!("2025-10-02T08:00:{s:02}.000Z");
    let line = |s: u32, ty: &str, payload: Value| json!({"timestamp": ts(s), "type": ty, "payload": payload});
    let call = |s: u32, id: &str, cmd: &str| {
        line(
            s,
            "response_item",
            json!({"type": "function_call", "name": "shell_command", "call_id": id,
                                         "arguments": json!({"command": cmd, "workdir": "/work/app"}).to_string()}),
        )
    };
    let out = |s: u32, id: &str, text: &str| {
        line(s, "response_item", json!({"type": "function_call_output", "call_id": id, "output": text}))
    };
    let end = |s: u32, id: &str, code: i64| {
        line(
            s,
            "event_msg",
            json!({"type": "exec_command_end", "call_id": id, "exit_code": code, "stdout": "", "stderr": "",
                                     "aggregated_output": "Tests: 1 failed, 3 passed, 4 total", "formatted_output": "",
                                     "duration": {"secs": 2, "nanos": 500000000}}),
        )
    };
    let total = |i: i64, o: i64| json!({"type": "token_count", "info": {"total_token_usage": {"input_tokens": i, "cached_input_tokens": 0, "output_tokens": o, "reasoning_output_tokens": 0, "total_tokens": i + o}, "last_token_usage": {"input_tokens": 1, "output_tokens": 1}}});
    let context = |s: u32| {
        line(
            s,
            "turn_context",
            json!({"cwd": "/work/app", "approval_policy": "on-request", "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5-codex", "summary": "auto"}),
        )
    };
    vec![
        /* 1 */
        line(
            0,
            "session_meta",
            json!({"id": "0199a213-81c0-7800-8aa1-bbab2a035a53", "timestamp": ts(0), "cwd": "/work/app",
             "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": null, "source": "cli", "model_provider": "openai",
             "git": {"commit_hash": "9f1c2e", "branch": "main", "repository_url": "git@github.com:acme/app.git"}}),
        ),
        /* 2 */
        line(
            1,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/app</cwd>\n</environment_context>"}]}),
        ),
        /* 3 */ context(1),
        /* 4 */
        line(2, "event_msg", json!({"type": "user_message", "message": "Make the tests pass", "images": []})),
        /* 5 */
        line(
            2,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Make the tests pass"}]}),
        ),
        /* 6 */
        line(2, "event_msg", json!({"type": "token_count", "info": null, "rate_limits": null})),
        /* 7 */ call(3, "call_a", "npm test"),
        /* 8 */ end(5, "call_a", 1),
        /* 9 */
        out(5, "call_a", "Exit code: 1\nWall time: 2.5 seconds\nOutput:\nTests: 1 failed, 3 passed, 4 total\n"),
        /* 10 */ line(5, "event_msg", total(1000, 50)),
        /* 11 */
        line(
            6,
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_b", "status": "completed", "input": "*** Begin Patch\n*** Add File: src/util.js\n+module.exports = 1;\n*** End Patch"}),
        ),
        /* 12 */
        line(
            6,
            "event_msg",
            json!({"type": "patch_apply_end", "call_id": "call_b", "stdout": "", "stderr": "verification failed", "success": false}),
        ),
        /* 13 */
        line(
            6,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "call_b", "output": "apply_patch verification failed: invalid hunk"}),
        ),
        /* 14 */
        line(
            7,
            "response_item",
            json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_c", "status": "completed", "input": "*** Begin Patch\n*** Add File: src/util.js\n+module.exports = 1;\n*** End Patch\n"}),
        ),
        /* 15 */
        line(
            7,
            "event_msg",
            json!({"type": "patch_apply_end", "call_id": "call_c", "stdout": "Success. Updated the following files:\nA src/util.js\n", "stderr": "", "success": true, "changes": {"/work/app/src/util.js": {"type": "add", "content": "module.exports = 1;\n"}}}),
        ),
        /* 16 */
        line(
            7,
            "response_item",
            json!({"type": "custom_tool_call_output", "call_id": "call_c", "output": "Success. Updated the following files:\nA src/util.js\n"}),
        ),
        /* 17 */ call(8, "call_d", "rm -rf node_modules"),
        /* 18 */ out(8, "call_d", "exec command rejected by user"),
        /* 19 */ call(9, "call_e", "npm test"),
        /* 20 */ end(11, "call_e", 0),
        /* 21 */
        out(11, "call_e", "Exit code: 0\nWall time: 2.5 seconds\nOutput:\nTests: 4 passed, 4 total\n"),
        /* 22 */
        line(
            12,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All tests pass now."}]}),
        ),
        /* 23 */
        line(12, "event_msg", json!({"type": "agent_message", "message": "All tests pass now."})),
        /* 24 */
        line(
            12,
            "event_msg",
            json!({"type": "turn_diff", "unified_diff": "diff --git a/src/util.js b/src/util.js\nnew file mode 100644\n--- /dev/null\n+++ b/src/util.js\n@@ -0,0 +1 @@\n+module.exports = 1;\n"}),
        ),
        /* 25 */
        line(12, "event_msg", json!({"type": "task_complete", "last_agent_message": "All tests pass now."})),
        /* 26 */
        line(
            20,
            "response_item",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<user_shell_command>\n<command>\ngit status --short\n</command>\n<result>\nExit code: 0\nDuration: 0.0100 seconds\nOutput:\n?? src/util.js\n</result>\n</user_shell_command>"}]}),
        ),
        /* 27 */
        line(
            20,
            "event_msg",
            json!({"type": "exec_command_end", "call_id": "usr_1", "source": "user_shell", "exit_code": 0, "stdout": "", "stderr": "", "aggregated_output": "?? src/util.js\n", "formatted_output": "", "duration": {"secs": 0, "nanos": 10000000}}),
        ),
        /* 28 */
        line(30, "event_msg", json!({"type": "task_started", "model_context_window": 272000})),
        /* 29 */ context(30),
        /* 30 */
        line(
            30,
            "event_msg",
            json!({"type": "user_message", "message": "Now lint it\nand refactor util", "images": []}),
        ),
        /* 31 */
        line(
            31,
            "response_item",
            json!({"type": "local_shell_call", "call_id": "call_f", "status": "in_progress", "action": {"type": "exec", "command": ["bash", "-lc", "npx eslint src"]}}),
        ),
        /* 32 */
        line(32, "event_msg", json!({"type": "some_future_event", "whatever": 1})),
        /* 33 */
        line(33, "event_msg", json!({"type": "turn_aborted", "reason": "interrupted"})),
        /* 34 */ line(33, "event_msg", total(3000, 120)),
        /* 35 */ line(34, "compacted", json!({"message": "summary"})),
    ]
}

#[test]
fn new_shape_rollout_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "rollout-2025-10-02T08-00-00-0199a213.jsonl", &new_rollout());
    let run = one(&[path], &Options::default());
    let e = &run.package.episode;
    let m = &e.manifest;
    assert_eq!(m.episode, "0199a213-81c0-7800-8aa1-bbab2a035a53");
    assert_eq!(m.model, "gpt-5-codex"); // lines 3 and 29 turn_context
    assert_eq!(m.harness_version.as_deref(), Some("0.46.0"));
    assert_eq!(m.cluster, "git@github.com:acme/app.git");
    // lines 7, 11, 14, 17, 19, 26 (a person's), 31; exec_command_end 8 / 20 give the
    // agent's exit codes (observed), the person's shell record (26) its "Exit code: 0".
    assert_eq!(
        tools(e),
        vec![
            ("shell_command".into(), Some(1)),
            ("apply_patch".into(), None),
            ("apply_patch".into(), None),
            ("shell_command".into(), None),
            ("shell_command".into(), Some(0)),
            ("user_shell".into(), Some(0)),
            ("local_shell".into(), None),
        ]
    );
    let t = e.tools.as_ref().unwrap();
    assert_eq!(t[0].duration_ms, Some(2500.0));
    assert_eq!(t[0].common.grade, "observed");
    assert_eq!(t[1].failure_type, "other"); // line 12 success false
    assert_eq!(t[3].failure_type, "permission_denied"); // line 18
    assert_eq!(t[6].command.as_deref(), Some("bash -lc 'npx eslint src'"));
    // line 11 a failed patch (ok false), line 14/15 the file created.
    assert_eq!(
        mutations(e),
        vec![("create".into(), vec!["src/util.js".into()], false), ("create".into(), vec!["src/util.js".into()], true)]
    );
    assert_eq!(e.derived.final_revision, 1);
    // npm test fails at 0 (line 8), passes at 1 (line 20); eslint (line 31) shows no
    // result before the abort: unknown.
    assert_eq!(
        checks(e),
        vec![
            ("regression".into(), "fail".into(), 0),
            ("regression".into(), "pass".into(), 1),
            ("lint".into(), "unknown".into(), 1)
        ]
    );
    assert_eq!(e.derived.posture, "current");
    // 18 a person's denial, 26 a person's command (27, the same command as an event,
    // not counted again), 30 a message after the prompt (4), 33 the interrupt.
    assert_eq!(
        interventions(e),
        vec![
            ("other".into(), "rm -rf node_modules".into()),
            ("other".into(), "git status --short".into()),
            ("other".into(), "Now lint it".into()),
            ("abort".into(), "turn aborted: interrupted".into()),
        ]
    );
    // line 25 task_complete; the second turn was aborted: no claim for it.
    assert_eq!(claims(e), 1);
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.outcome.stop_reason, "other");
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(3000), Some(120))); // line 34
    assert_eq!((e.outcome.correct, e.outcome.label.clone()), (None, None));
    assert!(has_file(&run, "patch.diff")); // line 24
    assert_eq!(m.provenance().unwrap()["opaque_calls"], json!(0));
}

#[test]
fn older_exec_json_shapes() {
    let dir = tempfile::tempdir().unwrap();
    // `session.created` and `item_type` (before `thread.started` and `type`).
    let older = write(
        dir.path(),
        "exec-older.jsonl",
        &[
            json!({"type": "session.created", "session_id": "s-older"}),
            json!({"type": "item.completed", "item": {"id": "itm_0", "item_type": "reasoning", "text": "look"}}),
            json!({"type": "item.completed", "item": {"id": "itm_1", "item_type": "command_execution", "command": "bash -lc 'cargo test'", "aggregated_output": "test result: ok. 3 passed", "exit_code": 0, "status": "completed"}}),
            json!({"type": "item.completed", "item": {"id": "itm_2", "item_type": "file_change", "changes": [{"path": "src/lib.rs", "kind": "update"}], "status": "completed"}}),
            json!({"type": "item.completed", "item": {"id": "itm_3", "item_type": "assistant_message", "text": "Done."}}),
        ],
    );
    let run = one(&[older], &with_model("gpt-5"));
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "s-older");
    assert_eq!(tools(e), vec![("shell".into(), Some(0)), ("edit".into(), None)]);
    assert_eq!(checks(e), vec![("regression".into(), "pass".into(), 0)]);
    assert_eq!(mutations(e), vec![("edit".into(), vec!["src/lib.rs".into()], true)]);
    assert_eq!(e.derived.posture, "stale");
    assert_eq!(claims(e), 1); // no turn marks in this shape: the last reply
    assert_eq!(e.outcome.agent_reported_complete, Some(true));

    // The oldest: a config summary, the prompt, raw protocol events.
    let oldest = write(
        dir.path(),
        "exec-oldest.jsonl",
        &[
            json!({"workdir": "/w/proj", "model": "o4-mini", "provider": "openai", "approval": "never", "sandbox": "workspace-write"}),
            json!({"prompt": "make test_x pass"}),
            json!({"id": "", "msg": {"type": "session_configured", "session_id": "5c1f0e2a", "model": "o4-mini", "history_log_id": 0, "history_entry_count": 0}}),
            json!({"id": "0", "msg": {"type": "task_started"}}),
            json!({"id": "0", "msg": {"type": "exec_command_begin", "call_id": "c1", "command": ["bash", "-lc", "python3 test_x.py"], "cwd": "/w/proj"}}),
            json!({"id": "0", "msg": {"type": "exec_command_end", "call_id": "c1", "stdout": "ok\n", "stderr": "", "exit_code": 0, "duration": {"secs": 0, "nanos": 1000000}}}),
            json!({"id": "0", "msg": {"type": "patch_apply_begin", "call_id": "c2", "auto_approved": true, "changes": {"/w/proj/x.py": {"add": {"content": "x = 1\n"}}}}}),
            json!({"id": "0", "msg": {"type": "patch_apply_end", "call_id": "c2", "stdout": "Success.", "stderr": "", "success": true}}),
            json!({"id": "0", "msg": {"type": "agent_message", "message": "done"}}),
            json!({"id": "0", "msg": {"type": "token_count", "input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 10, "reasoning_output_tokens": 0, "total_tokens": 110}}),
            json!({"id": "0", "msg": {"type": "token_count", "input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 5, "reasoning_output_tokens": 0, "total_tokens": 55}}),
            json!({"id": "0", "msg": {"type": "turn_diff", "unified_diff": "diff --git a/x.py b/x.py\nnew file mode 100644\n"}}),
            json!({"id": "0", "msg": {"type": "task_complete", "last_agent_message": "done"}}),
        ],
    );
    let run = one(&[oldest], &Options::default());
    let e = &run.package.episode;
    assert_eq!(e.manifest.episode, "5c1f0e2a");
    assert_eq!(e.manifest.model, "o4-mini");
    assert_eq!(e.manifest.cluster, "proj");
    assert_eq!(tools(e), vec![("shell".into(), Some(0)), ("edit".into(), None)]);
    assert_eq!(checks(e), vec![("targeted_test".into(), "pass".into(), 0)]);
    assert_eq!(mutations(e), vec![("create".into(), vec!["x.py".into()], true)]);
    assert!(interventions(e).is_empty()); // the prompt line is the first message
    assert_eq!(claims(e), 1);
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(150), Some(15))); // per-response counts, summed
    assert!(has_file(&run, "patch.diff"));
}

#[test]
fn several_exec_outputs_of_one_thread_are_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.jsonl",
        &[
            json!({"type": "thread.started", "thread_id": "t-1"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "first"}}),
            json!({"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 1}}),
        ],
    );
    let b = write(
        dir.path(),
        "b.jsonl",
        &[
            json!({"type": "thread.started", "thread_id": "t-1"}),
            json!({"type": "turn.started"}),
            json!({"type": "item.started", "item": {"id": "item_0", "type": "command_execution", "command": "ls", "aggregated_output": "", "exit_code": null, "status": "in_progress"}}),
            json!({"type": "item.completed", "item": {"id": "item_0", "type": "command_execution", "command": "ls", "aggregated_output": "a\n", "exit_code": 0, "status": "completed"}}),
            json!({"type": "turn.failed", "error": {"message": "stream disconnected"}}),
        ],
    );
    let run = one(&[b, a], &with_model("m"));
    let e = &run.package.episode;
    assert_eq!(e.manifest.provenance().unwrap()["source_files"].as_array().unwrap().len(), 2);
    assert_eq!(tools(e), vec![("shell".into(), Some(0))]);
    assert_eq!(claims(e), 1);
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.outcome.stop_reason, "infra_error");
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(10), Some(1)));
}

#[test]
fn detection_reads_every_shape_as_codex() {
    let dir = tempfile::tempdir().unwrap();
    let mut old = old_rollout();
    old[0].as_object_mut().unwrap().remove("instructions");
    old[0].as_object_mut().unwrap().remove("git");
    for (name, lines) in [("old.jsonl", old), ("new.jsonl", new_rollout())] {
        let p = write(dir.path(), name, &lines);
        assert_eq!(crate::detect(&p), Some(crate::codex::FORMAT), "{name}");
    }
    for rel in [ROLLOUT, EXEC] {
        assert_eq!(crate::detect(&fixture(rel)), Some(crate::codex::FORMAT), "{rel}");
    }
}

#[test]
fn approvals_and_denials() {
    let dir = tempfile::tempdir().unwrap();
    // The oldest exec output shows the approval request (line 3) before the command ran.
    let asked = write(
        dir.path(),
        "asked.jsonl",
        &[
            json!({"id": "", "msg": {"type": "session_configured", "session_id": "s-asked", "model": "o3"}}),
            json!({"id": "0", "msg": {"type": "task_started"}}),
            json!({"id": "0", "msg": {"type": "exec_approval_request", "call_id": "c1", "command": ["bash", "-lc", "make build"], "cwd": "/w"}}),
            json!({"id": "0", "msg": {"type": "exec_command_begin", "call_id": "c1", "command": ["bash", "-lc", "make build"], "cwd": "/w"}}),
            json!({"id": "0", "msg": {"type": "exec_command_end", "call_id": "c1", "stdout": "", "stderr": "", "exit_code": 2, "duration": {"secs": 1, "nanos": 0}}}),
            json!({"id": "0", "msg": {"type": "error", "message": "context window exceeded", "codex_error_info": "context_window_exceeded"}}),
        ],
    );
    let run = one(&[asked], &Options::default());
    let e = &run.package.episode;
    assert_eq!(tools(e), vec![("shell".into(), Some(2))]);
    assert_eq!(interventions(e), vec![("approval".into(), "bash -lc 'make build'".into())]);
    assert_eq!(e.manifest.provenance().unwrap()["opaque_calls"], json!(1)); // make TARGET
    assert_eq!(e.outcome.stop_reason, "budget_exhausted"); // line 6
    assert_eq!(e.outcome.agent_reported_complete, Some(false));

    // A reviewer other than the user (turn_context approvals_reviewer): the denial is
    // a policy's, so the call is refused and no person intervened.
    let mut lines = new_rollout();
    lines[2]["payload"]["approvals_reviewer"] = json!("guardian");
    let path = write(dir.path(), "guardian.jsonl", &lines);
    let run = one(&[path], &Options::default());
    let e = &run.package.episode;
    assert_eq!(e.tools.as_ref().unwrap()[3].failure_type, "permission_denied");
    assert_eq!(interventions(e)[0], ("other".into(), "git status --short".into()));
    assert_eq!(interventions(e).len(), 3);
}

/// Observer integrity: a rollout that marks its turns (`task_started`) but
/// ends without `task_complete`, after "Now running the tests.", was given
/// `agent_reported_complete = true` and `stop_reason = completed` from its last words.
/// docs/importers.md §10: "a claim only where the log shows the agent claiming it"; a
/// log cut inside a turn leaves the claim unknown. With the `task_complete` the same
/// log claims.
#[test]
fn a_rollout_cut_inside_a_turn_claims_nothing() {
    let ts = |s: u32| format!("2026-03-02T08:00:{s:02}.000Z");
    let line = |s: u32, ty: &str, payload: Value| json!({"timestamp": ts(s), "type": ty, "payload": payload});
    let mut lines = vec![
        line(
            0,
            "session_meta",
            json!({"id": "019c0000-0000-7000-8000-00000000cafe", "timestamp": ts(0), "cwd": "/work/app", "originator": "codex_cli_rs", "cli_version": "0.98.0", "source": "cli", "model_provider": "openai"}),
        ),
        line(
            1,
            "turn_context",
            json!({"cwd": "/work/app", "approval_policy": "never", "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5.2-codex"}),
        ),
        line(1, "event_msg", json!({"type": "task_started", "model_context_window": 272000})),
        line(2, "event_msg", json!({"type": "user_message", "message": "Fix the failing test", "images": []})),
        line(3, "event_msg", json!({"type": "agent_message", "message": "I'll fix add() first."})),
        line(
            4,
            "response_item",
            json!({"type": "function_call", "name": "apply_patch", "call_id": "c1", "arguments": json!({"input": "*** Begin Patch\n*** Update File: src/add.js\n@@\n-return a - b;\n+return a + b;\n*** End Patch"}).to_string()}),
        ),
        line(
            5,
            "event_msg",
            json!({"type": "patch_apply_end", "call_id": "c1", "stdout": "Success. Updated the following files:\nM src/add.js\n", "stderr": "", "success": true}),
        ),
        line(5, "response_item", json!({"type": "function_call_output", "call_id": "c1", "output": "Success."})),
        line(6, "event_msg", json!({"type": "agent_message", "message": "Now running the tests."})),
        line(
            6,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Now running the tests."}]}),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let cut = one(&[write(dir.path(), "rollout-2026-03-02T08-00-00-019c0000.jsonl", &lines)], &Options::default());
    let o = &cut.package.episode.outcome;
    assert_eq!(o.agent_reported_complete, None, "a claim was guessed from the last words");
    assert_eq!(o.stop_reason, "other");
    assert!(notes(&cut).iter().any(|n| n.contains("ends inside a turn")), "{:?}", notes(&cut));

    lines.push(line(7, "event_msg", json!({"type": "task_complete", "last_agent_message": "Now running the tests."})));
    let dir = tempfile::tempdir().unwrap();
    let whole = one(&[write(dir.path(), "rollout-2026-03-02T08-00-00-019c0000.jsonl", &lines)], &Options::default());
    assert_eq!(whole.package.episode.outcome.agent_reported_complete, Some(true));
    assert_eq!(whole.package.episode.outcome.stop_reason, "completed");
}

/// Observer integrity: Codex runs calls in parallel. A test that started
/// before a patch issued earlier had finished was bound after the patch and called
/// `current`. importers-v1 §4: "an outcome that cannot be known counts as possibly
/// changed: it can make a check stale, never current"; docs/importers.md §10 binds such a
/// check to the revision before the overlapping mutation, when the log gives times.
/// Calls that ran one after the other keep today's order.
#[test]
fn a_test_overlapping_a_parallel_patch_is_not_current() {
    let at = |ms: u32| format!("2026-03-02T08:00:{:02}.{:03}Z", ms / 1000, ms % 1000);
    let line = |ms: u32, ty: &str, payload: Value| json!({"timestamp": at(ms), "type": ty, "payload": payload});
    let rollout = |patch_done_ms: u32| {
        vec![
            line(
                0,
                "session_meta",
                json!({"id": "019c0000-0000-7000-8000-00000000beef", "timestamp": at(0), "cwd": "/work/app", "originator": "codex_cli_rs", "cli_version": "0.98.0", "source": "cli", "model_provider": "openai"}),
            ),
            line(
                1000,
                "turn_context",
                json!({"cwd": "/work/app", "approval_policy": "never", "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5.2-codex"}),
            ),
            line(1000, "event_msg", json!({"type": "task_started"})),
            line(2000, "event_msg", json!({"type": "user_message", "message": "Fix add()", "images": []})),
            // The patch at 10.0 s; the test at 11.0 s, in parallel.
            line(
                10_000,
                "response_item",
                json!({"type": "function_call", "name": "apply_patch", "call_id": "p1", "arguments": json!({"input": "*** Begin Patch\n*** Update File: src/add.js\n@@\n-return a - b;\n+return a + b;\n*** End Patch"}).to_string()}),
            ),
            line(
                11_000,
                "response_item",
                json!({"type": "function_call", "name": "shell_command", "call_id": "t1", "arguments": json!({"command": "npm test", "workdir": "/work/app"}).to_string()}),
            ),
            line(
                13_000,
                "event_msg",
                json!({"type": "exec_command_end", "call_id": "t1", "exit_code": 0, "stdout": "", "stderr": "", "aggregated_output": "Tests: 4 passed, 4 total", "formatted_output": "", "duration": {"secs": 2, "nanos": 0}}),
            ),
            line(
                13_000,
                "response_item",
                json!({"type": "function_call_output", "call_id": "t1", "output": "Exit code: 0\nOutput:\nTests: 4 passed, 4 total"}),
            ),
            line(
                patch_done_ms,
                "event_msg",
                json!({"type": "patch_apply_end", "call_id": "p1", "stdout": "Success. Updated the following files:\nM src/add.js\n", "stderr": "", "success": true}),
            ),
            line(
                patch_done_ms,
                "response_item",
                json!({"type": "function_call_output", "call_id": "p1", "output": "Success."}),
            ),
            line(15_000, "event_msg", json!({"type": "task_complete", "last_agent_message": "Done: tests pass."})),
        ]
    };
    let import = |lines: Vec<Value>| {
        let dir = tempfile::tempdir().unwrap();
        one(&[write(dir.path(), "rollout-2026-03-02T08-00-00-019c0000.jsonl", &lines)], &Options::default())
    };
    // The patch finished at 14.0 s, after the test started (11.0 s): the test may have
    // run on the old code.
    let overlapping = import(rollout(14_000));
    let e = &overlapping.package.episode;
    assert_eq!(e.derived.final_revision, 1);
    let check = &e.checks.as_ref().unwrap()[0];
    assert_eq!(check.bound_revision, 0, "{check:?}");
    assert_ne!(e.derived.posture, "current");
    assert!(notes(&overlapping).iter().any(|n| n.contains("in parallel")), "{:?}", notes(&overlapping));
    // Finished at 10.5 s, before the test started: the test ran on the patched code.
    let mut sequential = rollout(10_500);
    let patch_end = sequential.remove(8);
    let patch_output = sequential.remove(8);
    sequential.insert(5, patch_end);
    sequential.insert(6, patch_output);
    let e = import(sequential).package.episode;
    assert_eq!(e.checks.as_ref().unwrap()[0].bound_revision, 1);
    assert_eq!(e.derived.posture, "current");
}

/// Observer integrity (the benchmark's `elsewhere`): a test whose working directory is
/// another repository (`workdir: /work/other`) was bound to the workspace's revision as
/// if it tested it, and made the posture `current`. docs/importers.md §10: a test run in
/// a directory outside the workspace is no evidence about it; it is recorded as a run,
/// not as a check, and a note says so. The same test in the workspace (or in one of its
/// subdirectories) is a check.
#[test]
fn a_test_in_another_tree_is_not_a_check_of_the_workspace() {
    let line = |s: u32, ty: &str, payload: Value| json!({"timestamp": format!("2026-03-02T08:00:{s:02}.000Z"), "type": ty, "payload": payload});
    let rollout = |workdir: &str| {
        vec![
            line(
                0,
                "session_meta",
                json!({"id": "019c0000-0000-7000-8000-00000000d00d", "timestamp": "2026-03-02T08:00:00.000Z", "cwd": "/work/app", "originator": "codex_cli_rs", "cli_version": "0.98.0", "source": "cli"}),
            ),
            line(
                1,
                "turn_context",
                json!({"cwd": "/work/app", "approval_policy": "never", "sandbox_policy": {"type": "workspace-write"}, "model": "gpt-5.2-codex"}),
            ),
            line(1, "event_msg", json!({"type": "task_started"})),
            line(2, "event_msg", json!({"type": "user_message", "message": "Fix add()", "images": []})),
            line(
                3,
                "response_item",
                json!({"type": "function_call", "name": "apply_patch", "call_id": "p1", "arguments": json!({"input": "*** Begin Patch\n*** Update File: src/add.js\n@@\n-return a - b;\n+return a + b;\n*** End Patch"}).to_string()}),
            ),
            line(
                4,
                "event_msg",
                json!({"type": "patch_apply_end", "call_id": "p1", "stdout": "Success. Updated the following files:\nM src/add.js\n", "stderr": "", "success": true}),
            ),
            line(4, "response_item", json!({"type": "function_call_output", "call_id": "p1", "output": "Success."})),
            line(
                5,
                "response_item",
                json!({"type": "function_call", "name": "shell_command", "call_id": "t1", "arguments": json!({"command": "npm test", "workdir": workdir}).to_string()}),
            ),
            line(
                6,
                "event_msg",
                json!({"type": "exec_command_end", "call_id": "t1", "exit_code": 0, "stdout": "", "stderr": "", "aggregated_output": "Tests: 4 passed", "formatted_output": "", "duration": {"secs": 1, "nanos": 0}}),
            ),
            line(
                6,
                "response_item",
                json!({"type": "function_call_output", "call_id": "t1", "output": "Exit code: 0\nOutput:\nTests: 4 passed"}),
            ),
            line(7, "event_msg", json!({"type": "task_complete", "last_agent_message": "Done."})),
        ]
    };
    let import = |workdir: &str| {
        let dir = tempfile::tempdir().unwrap();
        one(&[write(dir.path(), "rollout-2026-03-02T08-00-00-019c0000.jsonl", &rollout(workdir))], &Options::default())
    };
    let elsewhere = import("/work/other");
    let e = &elsewhere.package.episode;
    assert_eq!(e.checks.as_deref().map(<[_]>::len), Some(0), "{:?}", e.checks);
    assert_eq!(e.derived.posture, "gap");
    assert!(notes(&elsewhere).iter().any(|n| n.contains("outside the workspace")), "{:?}", notes(&elsewhere));
    for inside in ["/work/app", "/work/app/packages/core", "packages/core"] {
        let e = import(inside).package.episode;
        assert_eq!(e.checks.as_deref().map(<[_]>::len), Some(1), "{inside}");
        assert_eq!(e.derived.posture, "current", "{inside}");
    }
}
