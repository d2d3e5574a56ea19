//! Revision 1.2 content (docs/format.md §9) of real mini-SWE-agent messages, asserted by
//! hand (message numbers are indexes of `messages`): the generated 2.x run, and the
//! upstream 1.x message list `github_issue.traj.json` wrapped here in the trajectory
//! object it lacks (its messages unchanged), and a 2.x tool-call run's ids and usage.

use serde_json::{json, Value};

use crate::testing::{fixture, import_ok, import_paths};
use crate::{Options, Run};

/// `(role, author, text)` of each message record that has text.
fn said(run: &Run) -> Vec<(String, Option<String>, String)> {
    let msgs = run.package.episode.messages.as_ref().expect("messages recorded");
    msgs.iter().filter_map(|m| Some((m.role.clone(), m.author.clone(), m.text.clone()?))).collect()
}

/// The messages with text match `expected` (role, author, text prefix), in order.
fn assert_said(got: &[(String, Option<String>, String)], expected: &[(&str, Option<&str>, &str)]) {
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (g, (role, author, prefix)) in got.iter().zip(expected) {
        assert_eq!((g.0.as_str(), g.1.as_deref()), (*role, *author), "{g:?}");
        assert!(g.2.starts_with(prefix), "{:?} does not start with {prefix:?}", g.2);
    }
}

/// The `tools` record `i`'s output file bytes (`None`: no output named).
fn output(run: &Run, i: usize) -> Option<Vec<u8>> {
    let t = &run.package.episode.tools.as_ref().unwrap()[i];
    let path = t.output.clone()?;
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", t.common.seq));
    Some(run.package.raw.file(&path).expect("the output file").to_vec())
}

fn messages_of(rel: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_slice(&std::fs::read(fixture(rel)).unwrap()).unwrap();
    match doc {
        Value::Array(m) => m,
        other => other["messages"].as_array().unwrap().clone(),
    }
}

#[test]
fn slugify_content_by_hand() {
    let runs = import_ok(&["mini-swe-agent/generated/slugify.success.traj.json"], &Options::default());
    let run = &runs[0];
    let e = &run.package.episode;
    // Message 1 is `info.config.agent.instance_template` ("Please solve this issue:
    // {{task}}\n\nYou can execute ...") with the task given to `mini -t`.
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("slugify must join words with hyphens. Fix text.py so that python3 test_text.py passes.")
    );
    // The observations are the calls' results; the `exit` message (13) is no message.
    assert_said(
        &said(run),
        &[
            ("system", None, "You are a helpful assistant that can interact"), // message 0
            ("user", None, "Please solve this issue: slugify must join"),      // message 1
            ("assistant", None, "THOUGHT: Look at the code.\n\n```mswea_bash_command\ncat text.py"), // message 2
            ("assistant", None, "THOUGHT: Run the test first."),               // 4
            ("assistant", None, "THOUGHT: slugify uses underscores"),          // 6
            ("assistant", None, "THOUGHT: Check with a pipe."),                // 8
            ("assistant", None, "THOUGHT: Also strip punctuation."),           // 10
            ("assistant", None, "THOUGHT: Done."),                             // 12
        ],
    );
    let msgs = e.messages.as_ref().unwrap();
    let results: Vec<Option<bool>> = msgs.iter().filter(|m| m.role == "tool").map(|m| m.is_error).collect();
    // returncode 1 of message 5 is an error; the submit (12) has a result with nothing known
    assert_eq!(results, [None, Some(true), None, None, None, None]);
    let msg = messages_of("mini-swe-agent/generated/slugify.success.traj.json");
    // Message 3: `extra.raw_output` of `cat text.py test_text.py`, byte for byte.
    let raw3 = msg[3]["extra"]["raw_output"].as_str().unwrap();
    assert!(raw3.starts_with("def slugify(s):\n    return s.lower().replace(\" \", \"_\")\n"));
    assert_eq!(output(run, 0).unwrap(), raw3.as_bytes());
    // Message 5: the traceback of `python3 test_text.py`.
    assert!(String::from_utf8(output(run, 1).unwrap()).unwrap().ends_with("AssertionError: hello_world\n"));
    // Message 7: `cat > text.py <<'PY'` printed nothing.
    assert_eq!(output(run, 2).unwrap(), b"");
    assert_eq!(output(run, 3).unwrap(), b"ok\n"); // message 9
                                                  // The submit (message 12) has no result of its own: its output is the submission.
    assert_eq!(output(run, 5), None);
    assert_eq!(e.tools.as_ref().unwrap()[3].output_text.as_deref(), Some("ok\n"));
    // Shell edits (heredoc, sed -i) carry no diff.
    assert!(e.actions.iter().flatten().all(|a| a.diff.is_none()));
    assert!(e.outcome.final_message.as_deref().unwrap().starts_with("THOUGHT: Done."));
}

/// The upstream 1.x message list (mini-swe-agent's tests/test_data, see PROVENANCE.md),
/// given the `info` a trajectory file has around it: the outputs are read from the
/// `<returncode>`/`<output>` text of the observations.
#[test]
fn github_issue_1x_messages_by_hand() {
    let msgs = messages_of("mini-swe-agent/github_issue.traj.json");
    let traj = json!({"info": {"exit_status": "Submitted", "config": {"model": {"model_name": "claude-sonnet-4"}}},
                      "messages": msgs, "trajectory_format": "mini-swe-agent-1"});
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("github_issue.traj.json");
    std::fs::write(&p, serde_json::to_vec(&traj).unwrap()).unwrap();
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs[0].as_ref().unwrap();
    let e = &run.package.episode;
    // No configuration: the task prompt is message 1, whole.
    assert_eq!(e.manifest.task_prompt.as_deref(), msgs[1]["content"].as_str());
    let m = said(run);
    let mut expected = vec![
        ("system", None, "You are a helpful assistant that can interact"), // message 0
        ("user", None, "Please solve this issue: GitHub Issue: SyntaxError"), // message 1
        ("assistant", None, "I'll help you solve this issue. Let me first examine"), // message 2
    ];
    expected.extend([("assistant", None, ""); 9]); // messages 4, 6, ..., 20
                                                   // Message 21: the submission the harness recorded after the submit command (20).
    expected.push(("user", Some("harness"), "diff --git a/tests/missing_colon.py b/tests/missing_colon.py\n"));
    assert_said(&m, &expected);
    assert!(m[11].2.starts_with("Now let's verify that the updated file works")); // message 20
                                                                                  // Message 3: "<returncode>1</returncode>\n<output>\ncat: ...: No such file or directory\n</output>"
    assert_eq!(
        output(run, 0).unwrap(),
        b"cat: /Users/fuchur/Documents/24/git_sync/swe-agent-test-repo/tests/./missing_colon.py: No such file or directory\n"
    );
    assert_eq!(e.tools.as_ref().unwrap()[0].exit_code, Some(1));
    // Message 11: the `sed -i` printed nothing; message 15: "8.2".
    assert_eq!(output(run, 4).unwrap(), b"");
    assert_eq!(output(run, 6).unwrap(), b"8.2\n");
    // Message 9: the file, as `cat` printed it (the blank last line kept).
    assert_eq!(
        String::from_utf8(output(run, 3).unwrap()).unwrap(),
        "#!/usr/bin/env python3\n\n\ndef division(a: float, b: float) -> float\n    return a/b\n\n\nif __name__ == \"__main__\":\n    print(division(123, 15))\n\n"
    );
    assert_eq!(output(run, 9), None, "the submit command (message 20)");
    // 1.x logs no usage, model or ids per message.
    assert!(e
        .messages
        .iter()
        .flatten()
        .all(|m| m.tokens_in.is_none() && m.model.is_none() && m.tool_call_id.is_none()));
}

/// 2.x with tool calls: the call ids on the call and result records, the usage and model
/// of `extra.response` on the reply, `reasoning_content` as its thinking.
#[test]
fn a_2x_reply_keeps_its_ids_usage_and_thinking() {
    let call = json!({"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json!({"command": "ls"}).to_string()}});
    let traj = json!({
        "info": {"exit_status": "LimitsExceeded", "submission": "", "mini_version": "2.1.0",
                 "config": {"model": {"model_name": "openai/gpt-5"}, "environment": {"cwd": "/testbed"},
                            "agent": {"instance_template": "<pr_description>\n{{task}}\n</pr_description>\nGo."}}},
        "instance_id": "a__b-1",
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "<pr_description>\nFix the parser.\n</pr_description>\nGo."},
            {"role": "assistant", "content": "Listing.", "reasoning_content": "I should look first.", "tool_calls": [call],
             "extra": {"actions": [{"command": "ls", "tool_call_id": "c1"}], "timestamp": 1700000000.0,
                       "response": {"model": "gpt-5-2025-08-07", "usage": {"prompt_tokens": 100, "completion_tokens": 10}}}},
            {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>\n<output>\na\n</output>", "extra": {"raw_output": "a\n", "returncode": 0, "timestamp": 1700000001.0}},
            {"role": "user", "content": "Please always provide EXACTLY ONE action.", "extra": {"timestamp": 1700000002.0}},
            {"role": "exit", "content": "", "extra": {"exit_status": "LimitsExceeded", "submission": ""}}
        ],
        "trajectory_format": "mini-swe-agent-1.1"
    });
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a__b-1.traj.json");
    std::fs::write(&p, serde_json::to_vec(&traj).unwrap()).unwrap();
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs[0].as_ref().unwrap();
    let e = &run.package.episode;
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("Fix the parser."));
    let msgs = e.messages.as_ref().unwrap();
    let reply = msgs.iter().find(|m| m.text.as_deref() == Some("Listing.")).unwrap();
    assert_eq!(reply.reasoning.as_deref(), Some("I should look first."));
    assert_eq!((reply.tokens_in, reply.tokens_out), (Some(100), Some(10)));
    assert_eq!(reply.model.as_deref(), Some("gpt-5-2025-08-07"));
    assert_eq!(reply.common.ts.as_deref(), Some("2023-11-14T22:13:20.000000Z"));
    let ids: Vec<(&str, Option<&str>)> =
        msgs.iter().filter(|m| m.tool.is_some()).map(|m| (m.role.as_str(), m.tool_call_id.as_deref())).collect();
    assert_eq!(ids, [("assistant", Some("c1")), ("tool", Some("c1"))]);
    let args = msgs.iter().find(|m| m.role == "assistant" && m.tool.is_some()).unwrap().arguments.as_deref().unwrap();
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), json!({"command": "ls"}));
    assert_eq!(output(run, 0).unwrap(), b"a\n");
    // The harness's format error is its message; the `exit` record is none.
    let last = msgs.last().unwrap();
    assert_eq!((last.role.as_str(), last.author.as_deref()), ("user", Some("harness")));
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(100), Some(10)));
}
