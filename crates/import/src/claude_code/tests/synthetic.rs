//! Logs written here, for what the fixtures do not show: a headless run refused by the
//! permission policy and resumed, a person's `!` command, a message typed mid-turn,
//! settings and hook refusals, and the running-total arithmetic.

use super::{exit_codes, import_paths, tools, write_temp};
use crate::Options;

fn line(v: serde_json::Value) -> String {
    serde_json::to_string(&v).unwrap()
}

/// A headless run whose Bash is refused by the permission policy, its `--resume`
/// joined after it: a refusal that is no intervention; the totals counted per process.
#[test]
fn headless_denials_and_resumes() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let sid = "11111111-2222-3333-4444-555555555555";
    let asst = |id: &str, ts: &str, content: serde_json::Value| {
        line(json!({"type": "assistant", "session_id": sid, "timestamp": ts, "parent_tool_use_id": null,
            "message": {"id": id, "model": "claude-sonnet-4-5", "role": "assistant", "content": content, "usage": {"input_tokens": 1, "output_tokens": 1}}}))
    };
    let init = |v: &str| {
        line(
            json!({"type": "system", "subtype": "init", "session_id": sid, "cwd": "/srv/app", "model": "claude-sonnet-4-5", "claude_code_version": v}),
        )
    };
    let first = [
        init("2.1.100"),
        asst(
            "m1",
            "2026-01-01T10:00:00Z",
            json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}]),
        ),
        line(
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:01Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": true,
            "content": "Claude requested permissions to use Bash, but you haven't granted it yet."}]}}),
        ),
        asst("m2", "2026-01-01T10:00:02Z", json!([{"type": "text", "text": "I could not run the tests."}])),
        line(
            json!({"type": "result", "subtype": "success", "is_error": false, "session_id": sid, "total_cost_usd": 0.5,
            "usage": {"input_tokens": 100, "output_tokens": 10}, "permission_denials": [{"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {}}]}),
        ),
    ];
    let second = [
        init("2.1.100"),
        asst(
            "m3",
            "2026-01-01T11:00:00Z",
            json!([{"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": "/srv/app/a.py", "old_string": "a", "new_string": "b"}}]),
        ),
        line(
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T11:00:01Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "The file /srv/app/a.py has been updated."}]}}),
        ),
        asst(
            "m4",
            "2026-01-01T11:00:02Z",
            json!([{"type": "tool_use", "id": "t3", "name": "Bash", "input": {"command": "pytest tests/test_a.py"}}]),
        ),
        line(
            json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T11:00:03Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "is_error": false, "content": "1 passed"}]},
            "tool_use_result": {"stdout": "1 passed", "stderr": "", "interrupted": false}}),
        ),
        asst("m5", "2026-01-01T11:00:04Z", json!([{"type": "text", "text": "Done."}])),
        line(
            json!({"type": "result", "subtype": "success", "is_error": false, "session_id": sid, "total_cost_usd": 0.25,
            "usage": {"input_tokens": 50, "output_tokens": 5}}),
        ),
    ];
    // Named so that path order is the reverse of time order.
    let a = write_temp(&dir, "b-first.jsonl", &first.join("\n"));
    let b = write_temp(&dir, "a-resume.jsonl", &second.join("\n"));
    let (plan, runs) = import_paths(&[b, a], &Options::default());
    assert_eq!(plan.units.len(), 1);
    assert!(plan.units[0].files[0].path.ends_with("b-first.jsonl"));
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    assert_eq!(exit_codes(e), vec![("Bash".into(), None), ("Edit".into(), None), ("Bash".into(), Some(0))]);
    assert_eq!(tools(e)[0].failure_type, "permission_denied");
    // A policy's refusal is not a person's.
    assert!(e.interventions.as_deref().unwrap().is_empty());
    let checks: Vec<(&str, &str, u64)> = e
        .checks
        .as_deref()
        .unwrap()
        .iter()
        .map(|c| (c.method.as_deref().unwrap(), c.result.as_deref().unwrap(), c.bound_revision))
        .collect();
    assert_eq!(checks, vec![("targeted_test", "pass", 1)]);
    assert_eq!(e.derived.posture, "current");
    // One claim per turn (per result), the last turn's last.
    let claims = e.actions.as_deref().unwrap().iter().filter(|a| a.kind.as_deref() == Some("complete")).count();
    assert_eq!(claims, 2);
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    // Before 2.1.277 each process's total starts at 0: they add.
    assert_eq!(e.outcome.cost_usd, Some(0.75));
    assert_eq!(e.outcome.tokens_in, Some(150));
    assert_eq!(e.outcome.label, None);
}

/// A transcript with a person's `!` command, a queued message, a policy refusal and a
/// hook block.
#[test]
fn person_commands_and_policy_refusals_in_a_transcript() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let sid = "99999999-2222-3333-4444-555555555555";
    let base = |ty: &str, ts: &str| json!({"type": ty, "sessionId": sid, "timestamp": ts, "cwd": "/w/proj", "version": "2.0.50", "isSidechain": false});
    let with = |mut v: serde_json::Value, k: &str, x: serde_json::Value| {
        v[k] = x;
        line(v)
    };
    let user_text = |ts: &str, t: &str| with(base("user", ts), "message", json!({"role": "user", "content": t}));
    let asst = |ts: &str, id: &str, content: serde_json::Value| {
        with(
            base("assistant", ts),
            "message",
            json!({"id": id, "model": "claude-opus-4-1", "role": "assistant", "content": content}),
        )
    };
    let result = |ts: &str, id: &str, text: &str, err: bool| {
        with(
            base("user", ts),
            "message",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": err}]}),
        )
    };
    let lines = [
        user_text("2026-01-01T10:00:00Z", "fix the bug"),
        asst(
            "2026-01-01T10:00:01Z",
            "m1",
            json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "rm -rf build"}}]),
        ),
        result("2026-01-01T10:00:02Z", "t1", "Permission to use Bash with command rm -rf build has been denied.", true),
        asst(
            "2026-01-01T10:00:03Z",
            "m2",
            json!([{"type": "tool_use", "id": "t2", "name": "Write", "input": {"file_path": "/w/proj/x.py", "content": ""}}]),
        ),
        result("2026-01-01T10:00:04Z", "t2", "PreToolUse:Write hook error: [check.sh]: blocked", true),
        with(
            base("attachment", "2026-01-01T10:00:05Z"),
            "attachment",
            json!({"type": "queued_command", "commandMode": "prompt", "origin": {"kind": "human"}, "prompt": "also update the docs"}),
        ),
        asst("2026-01-01T10:00:06Z", "m3", json!([{"type": "text", "text": "I was not allowed to."}])),
        user_text("2026-01-01T10:01:00Z", "<bash-input>make test</bash-input>"),
        user_text("2026-01-01T10:01:01Z", "<bash-stdout>ok</bash-stdout><bash-stderr></bash-stderr>"),
        user_text("2026-01-01T10:02:00Z", "<local-command-stdout>done</local-command-stdout>"),
    ];
    let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    // The person's `make test` is a tools record too.
    assert_eq!(exit_codes(e), vec![("Bash".into(), None), ("Write".into(), None), ("Bash".into(), None)]);
    assert_eq!(tools(e)[0].failure_type, "permission_denied");
    assert_eq!(tools(e)[1].failure_type, "permission_denied");
    assert_eq!(e.derived.final_revision, 0);
    let iv: Vec<(&str, &str)> = e
        .interventions
        .as_deref()
        .unwrap()
        .iter()
        .map(|i| (i.kind.as_deref().unwrap(), i.reason.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(iv, vec![("other", "also update the docs"), ("other", "make test")]);
    // The mid-turn message does not end the turn: its last words are the claim, and the
    // person's command after it leaves the run not reported complete.
    let claims = e.actions.as_deref().unwrap().iter().filter(|a| a.kind.as_deref() == Some("complete")).count();
    assert_eq!(claims, 1);
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.manifest.cluster, "proj");
    // No usage on these messages: no cost.
    assert_eq!(e.outcome.tokens_in, None);
}

#[test]
fn running_totals_count_each_process_once() {
    use super::super::{restores_totals, session_total};
    assert!(!restores_totals(Some("2.1.276")));
    assert!(restores_totals(Some("2.1.277")));
    assert!(restores_totals(Some("2.2.0")));
    assert!(!restores_totals(None));
    // Per process from 0: they add.
    assert_eq!(session_total(&[(0.5, false), (0.25, false)]), 0.75);
    // A resumed process restating the earlier total: its growth counts.
    assert_eq!(session_total(&[(0.5, true), (0.75, true)]), 0.75);
    // A total below the earlier one is a fresh count even in a restoring version.
    assert_eq!(session_total(&[(0.5, true), (0.25, true)]), 0.75);
}

/// Results that are not exits: a timeout, a call the tool refused to start, a person's
/// rejection with words, and a session that ends on an API error the tool wrote.
#[test]
fn timeouts_unstarted_calls_and_api_errors() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let sid = "77777777-2222-3333-4444-555555555555";
    let base = |ty: &str, ts: &str| json!({"type": ty, "sessionId": sid, "timestamp": ts, "cwd": "/w/p", "version": "1.0.80", "isSidechain": false});
    let with = |mut v: serde_json::Value, k: &str, x: serde_json::Value| {
        v[k] = x;
        line(v)
    };
    let asst = |ts: &str, id: &str, model: &str, content: serde_json::Value| {
        with(
            base("assistant", ts),
            "message",
            json!({"id": id, "model": model, "role": "assistant", "content": content}),
        )
    };
    let call = |ts: &str, id: &str, command: &str| {
        asst(
            ts,
            id,
            "claude-sonnet-4",
            json!([{"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}]),
        )
    };
    let result = |ts: &str, id: &str, text: &str| {
        with(
            base("user", ts),
            "message",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text, "is_error": true}]}),
        )
    };
    let lines = [
        with(base("user", "2026-01-01T10:00:00Z"), "message", json!({"role": "user", "content": "run the tests"})),
        call("2026-01-01T10:00:01Z", "t1", "pytest"),
        result("2026-01-01T10:02:01Z", "t1", "Command timed out after 2m 0.0s"),
        call("2026-01-01T10:02:02Z", "t2", "pytest -x"),
        result("2026-01-01T10:02:03Z", "t2", "<tool_use_error>InputValidationError: bad input</tool_use_error>"),
        call("2026-01-01T10:02:04Z", "t3", "rm -rf /w/p/build"),
        result(
            "2026-01-01T10:02:05Z",
            "t3",
            "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\nkeep the build folder",
        ),
        with(
            base("assistant", "2026-01-01T10:02:06Z"),
            "message",
            json!({"id": "e1", "model": "<synthetic>", "role": "assistant", "content": [{"type": "text", "text": "API Error: 500 Internal server error"}]}),
        ),
    ];
    let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
    let (_, runs) = import_paths(std::slice::from_ref(&p), &Options::default());
    let run = runs.into_iter().next().unwrap().unwrap();
    let e = &run.package.episode;
    assert_eq!(e.manifest.model, "claude-sonnet-4"); // `<synthetic>` is not a model
    assert_eq!(exit_codes(e), vec![("Bash".into(), None), ("Bash".into(), None), ("Bash".into(), None)]);
    let t = tools(e);
    assert!(t[0].timed_out);
    assert_eq!(t[0].failure_type, "timeout");
    assert_eq!(t[0].duration_ms, Some(120000.0));
    assert_eq!(t[1].failure_type, "parse_error");
    assert_eq!(t[2].failure_type, "permission_denied");
    // The timed-out pytest is a check; the call that never started is not.
    let checks: Vec<(&str, &str)> =
        e.checks.as_deref().unwrap().iter().map(|c| (c.check_id.as_str(), c.result.as_deref().unwrap())).collect();
    assert_eq!(checks, vec![("regression:pytest", "timeout")]);
    let iv: Vec<(&str, &str)> = e
        .interventions
        .as_deref()
        .unwrap()
        .iter()
        .map(|i| (i.kind.as_deref().unwrap(), i.reason.as_deref().unwrap()))
        .collect();
    assert_eq!(iv, vec![("other", "keep the build folder")]);
    assert_eq!(e.outcome.stop_reason, "infra_error");
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!(e.derived.final_revision, 0);
}

/// A log whose only assistant lines are the tool's own (`<synthetic>`) names no model.
#[test]
fn a_log_naming_no_model_is_refused_without_one() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let sid = "88888888-2222-3333-4444-555555555555";
    let lines = [
        line(
            json!({"type": "user", "sessionId": sid, "timestamp": "2026-01-01T10:00:00Z", "message": {"role": "user", "content": "hi"}}),
        ),
        line(
            json!({"type": "assistant", "sessionId": sid, "timestamp": "2026-01-01T10:00:01Z", "isApiErrorMessage": true,
            "message": {"id": "e", "model": "<synthetic>", "role": "assistant", "content": [{"type": "text", "text": "Claude AI usage limit reached"}]}}),
        ),
    ];
    let p = write_temp(&dir, &format!("{sid}.jsonl"), &lines.join("\n"));
    let (_, runs) = import_paths(std::slice::from_ref(&p), &Options::default());
    let r = runs.into_iter().next().unwrap().unwrap_err();
    assert!(r.reason.contains("names no model"), "{r}");
    let options = Options { model: Some("claude-x".into()), ..Options::default() };
    let (_, runs) = import_paths(std::slice::from_ref(&p), &options);
    let e = runs.into_iter().next().unwrap().unwrap().package.episode;
    assert_eq!(e.manifest.model, "claude-x");
    assert_eq!(e.outcome.stop_reason, "budget_exhausted");
}

/// A test left running in the background (`run_in_background`), its output read with
/// `BashOutput` once it completed. docs/importers.md §10: "a check is bound to the
/// revision it started on"; its result is what the completed output shows (derived),
/// so an edit landing while it ran leaves it stale, and without one it is current.
#[test]
fn a_background_test_takes_its_result_from_its_output_and_keeps_its_revision() {
    use serde_json::json;
    let sid = "66666666-2222-3333-4444-555555555555";
    let session = |edit_between: bool| {
        let mut n = 0;
        let mut parent: Option<String> = None;
        let mut out = Vec::new();
        let mut add = |kind: &str, message: serde_json::Value, extra: serde_json::Value| {
            n += 1;
            let uid = format!("00000000-0000-4000-8000-{n:012}");
            let mut rec = json!({"parentUuid": parent, "isSidechain": false, "type": kind, "message": message,
                "uuid": uid, "timestamp": format!("2026-01-01T10:00:{n:02}.000Z"), "sessionId": sid,
                "cwd": "/srv/app", "version": "2.1.39", "userType": "external"});
            if let (Some(r), Some(e)) = (rec.as_object_mut(), extra.as_object()) {
                r.extend(e.clone());
            }
            out.push(line(rec));
            parent = Some(uid);
        };
        let call = |id: &str, name: &str, input: serde_json::Value| {
            json!({"id": format!("m-{id}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]})
        };
        let result = |id: &str, text: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]});
        add("user", json!({"role": "user", "content": "Run the tests."}), json!({}));
        add("assistant", call("t1", "Bash", json!({"command": "pytest -q", "run_in_background": true})), json!({}));
        add(
            "user",
            result("t1", "Command running in background with ID: bash_1"),
            json!({"toolUseResult": {"stdout": "", "stderr": "", "interrupted": false, "backgroundTaskId": "bash_1"}}),
        );
        if edit_between {
            let edit = json!({"file_path": "/srv/app/a.py", "old_string": "a", "new_string": "b"});
            add("assistant", call("t2", "Edit", edit), json!({}));
            add("user", result("t2", "The file /srv/app/a.py has been updated successfully."), json!({}));
        }
        add("assistant", call("t3", "BashOutput", json!({"bash_id": "bash_1"})), json!({}));
        add(
            "user",
            result(
                "t3",
                "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\n3 passed in 0.04s\n</stdout>",
            ),
            json!({}),
        );
        out.join("\n") + "\n"
    };
    for (edit_between, posture) in [(false, "current"), (true, "stale")] {
        let dir = tempfile::tempdir().unwrap();
        let p = write_temp(&dir, &format!("{sid}.jsonl"), &session(edit_between));
        let (_, runs) = import_paths(&[p], &Options::default());
        let e = runs.into_iter().next().unwrap().unwrap().package.episode;
        let checks: Vec<_> = e.checks.iter().flatten().collect();
        assert_eq!(checks.len(), 1, "the launch is the check; reading its output is not another");
        assert_eq!(checks[0].result.as_deref(), Some("pass"));
        assert_eq!(checks[0].common.grade, "derived");
        assert_eq!(checks[0].bound_revision, 0, "bound to the revision it started on");
        assert_eq!(checks[0].fresh, !edit_between);
        assert_eq!(e.derived.posture, posture, "edit between: {edit_between}");
    }
}

/// A rewind (`/rewind`, Esc Esc) leaves no record, only a fork: the next prompt has the
/// parent an earlier prompt had, and the abandoned branch stays in the file. When the
/// agent changed files in that branch, the rewind may have restored them from its
/// checkpoints, which the log does not say: a check from before it is never `current`.
#[test]
fn a_rewind_after_edits_is_a_possible_mutation_and_a_rollback() {
    use serde_json::json;
    let sid = "77777777-2222-3333-4444-555555555555";
    // (edit in the abandoned branch, rewind at all)
    let session = |edit: bool, rewind: bool| {
        let mut n = 0;
        let mut out = Vec::new();
        let mut add = |parent: Option<String>, kind: &str, message: serde_json::Value| -> String {
            n += 1;
            let uid = format!("00000000-0000-4000-8000-{n:012}");
            out.push(line(json!({"parentUuid": parent, "isSidechain": false, "type": kind, "message": message,
                "uuid": uid, "timestamp": format!("2026-01-01T10:00:{n:02}.000Z"), "sessionId": sid,
                "cwd": "/srv/app", "version": "2.1.39", "userType": "external"})));
            uid
        };
        let call = |id: &str, name: &str, input: serde_json::Value| {
            json!({"id": format!("m-{id}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": id, "name": name, "input": input}]})
        };
        let text = |id: &str, t: &str| {
            json!({"id": format!("m-{id}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "stop_reason": "end_turn", "content": [{"type": "text", "text": t}]})
        };
        let result = |id: &str, t: &str| json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": t}]});
        // The first turn.
        let p1 = add(None, "user", json!({"role": "user", "content": "What does the helper do?"}));
        let x1 = add(Some(p1), "assistant", text("x1", "It adds one."));
        // The second prompt, the branch a rewind abandons: an edit (or only a read), then
        // the tests, which pass.
        let p2 = add(Some(x1.clone()), "user", json!({"role": "user", "content": "Rename it and test."}));
        let r = if edit {
            let edit = json!({"file_path": "/srv/app/a.py", "old_string": "a", "new_string": "b"});
            let c = add(Some(p2), "assistant", call("t1", "Edit", edit));
            add(Some(c), "user", result("t1", "The file /srv/app/a.py has been updated successfully."))
        } else {
            let c = add(Some(p2), "assistant", call("t1", "Read", json!({"file_path": "/srv/app/a.py"})));
            add(Some(c), "user", result("t1", "     1\ta = 1"))
        };
        let c = add(Some(r), "assistant", call("t2", "Bash", json!({"command": "pytest -q"})));
        let r = add(Some(c), "user", result("t2", "3 passed in 0.04s"));
        add(Some(r), "assistant", text("x2", "Renamed; the tests pass."));
        if rewind {
            // The person goes back to before the second prompt and asks something else.
            let p3 = add(Some(x1), "user", json!({"role": "user", "content": "Just document it."}));
            add(Some(p3), "assistant", text("x3", "Which format?"));
        }
        out.join("\n") + "\n"
    };
    // (edit, rewind) -> (posture, rollbacks, inferred actions)
    for (edit, rewind, posture, rollbacks, inferred) in [
        (false, false, "current", 0, 0),
        (false, true, "current", 1, 0),
        (true, false, "current", 0, 0),
        (true, true, "stale", 1, 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let p = write_temp(&dir, &format!("{sid}.jsonl"), &session(edit, rewind));
        let (_, runs) = import_paths(&[p], &Options::default());
        let e = runs.into_iter().next().unwrap().unwrap().package.episode;
        let case = format!("edit {edit}, rewind {rewind}");
        assert_eq!(e.derived.posture, posture, "{case}");
        let kinds: Vec<&str> = e.interventions.iter().flatten().map(|i| i.kind.as_deref().unwrap_or("")).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "rollback").count(), rollbacks, "{case}: {kinds:?}");
        let possible: Vec<_> =
            e.actions.iter().flatten().filter(|a| a.common.grade == "inferred" && a.mutates).collect();
        assert_eq!(possible.len(), inferred, "{case}");
        if let Some(a) = possible.first() {
            assert_eq!(a.tool_seq, None, "{case}: no tool call made it");
            assert!(a.ok);
        }
        let checks: Vec<_> = e.checks.iter().flatten().collect();
        assert_eq!(checks.len(), 1, "{case}");
        assert_eq!(checks[0].fresh, !(edit && rewind), "{case}");
    }
    // A subagent's file merged in before the prompts (its edit lands before the branch)
    // leaves the branch as it is: nothing changed in it, so no possible restore.
    let dir = tempfile::tempdir().unwrap();
    write_temp(&dir, &format!("{sid}.jsonl"), &session(false, true));
    std::fs::create_dir_all(dir.path().join(sid).join("subagents")).unwrap();
    let sub = |k: u32, kind: &str, message: serde_json::Value| {
        line(json!({"parentUuid": null, "isSidechain": true, "agentId": "a1", "type": kind, "message": message,
            "uuid": format!("20000000-0000-4000-8000-{k:012}"), "timestamp": format!("2026-01-01T09:00:{k:02}.000Z"),
            "sessionId": sid, "cwd": "/srv/app", "version": "2.1.39", "userType": "external"}))
    };
    let edit = json!({"file_path": "/srv/app/b.py", "old_string": "c", "new_string": "d"});
    let subagent = [
        sub(1, "user", json!({"role": "user", "content": "Tidy b.py."})),
        sub(
            2,
            "assistant",
            json!({"id": "m-s1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "s1", "name": "Edit", "input": edit}]}),
        ),
        sub(
            3,
            "user",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s1",
            "content": "The file /srv/app/b.py has been updated successfully."}]}),
        ),
    ];
    let sub_file = format!("{sid}/subagents/agent-a1.jsonl");
    write_temp(&dir, &sub_file, &(subagent.join("\n") + "\n"));
    let (_, runs) = import_paths(&[dir.path().to_path_buf()], &Options::default());
    let e = runs.into_iter().next().unwrap().unwrap().package.episode;
    let edits = e.actions.iter().flatten().filter(|a| a.mutates && a.common.grade != "inferred").count();
    assert_eq!(edits, 1, "the subagent's edit is the session's");
    assert_eq!(e.interventions.iter().flatten().filter(|i| i.kind.as_deref() == Some("rollback")).count(), 1);
    assert!(e.actions.iter().flatten().all(|a| a.common.grade != "inferred"), "nothing changed in the branch");
    assert_eq!(e.derived.posture, "current");

    // Lines without `parentUuid` say nothing of forks: no rewind is read from them.
    let flat: String = session(true, true)
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("parentUuid");
            line(v) + "\n"
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = write_temp(&dir, &format!("{sid}.jsonl"), &flat);
    let (_, runs) = import_paths(&[p], &Options::default());
    let e = runs.into_iter().next().unwrap().unwrap().package.episode;
    assert!(e.interventions.iter().flatten().all(|i| i.kind.as_deref() != Some("rollback")));
    assert_eq!(e.derived.posture, "current");
}
