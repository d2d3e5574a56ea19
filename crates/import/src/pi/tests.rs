//! Pi sessions read by hand: the values asserted are in the logs where the comments say
//! (the fixtures' PROVENANCE.md list them by line).

use serde_json::json;

use crate::testing::{actions, fixtures, import_all, import_paths};
use crate::Options;

fn calls(e: &epistore_package::Episode) -> Vec<(String, Option<i64>)> {
    e.tools.iter().flatten().map(|t| (t.tool.clone(), t.exit_code)).collect()
}

#[test]
fn a_real_version_1_session_by_hand() {
    let run =
        import_all(&fixtures("real/pi/pi-mono-v1-large-session-head/session.jsonl"), &Options::default()).remove(0);
    let e = &run.package.episode;
    // Line 1: the v1 header (no version, no tree), its model and cwd.
    assert_eq!(e.manifest.episode, "d703a1a9-1b7b-4fb1-b512-c9738b1fe617");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5");
    // Line 2 is `/mode`, a command: the task is line 5's prompt.
    assert!(
        e.manifest.task_prompt.as_deref().unwrap().starts_with("read packages/coding-agent/docs/theme.md in full"),
        "{:?}",
        e.manifest.task_prompt
    );
    // 34 toolCall blocks: read 9, edit 20, bash 5; the 16 edits of line 33 (a reply that
    // errored) never ran and have no result.
    let c = calls(e);
    assert_eq!(c.len(), 34);
    assert_eq!(c.iter().filter(|(t, _)| t == "edit").count(), 20);
    // Line 6's first bash (`find ...`) succeeded: exit 0; line 39's grep exited 1 (line 40).
    let bash: Vec<Option<i64>> = c.iter().filter(|(t, _)| t == "bash").map(|(_, x)| *x).collect();
    assert_eq!(bash.first(), Some(&Some(0)));
    assert_eq!(bash.last(), Some(&Some(1)));
    // Four edits with results changed files (lines 16, 22, 23, 24); their diffs come
    // from the arguments (pi's own diff is not a unified diff).
    let changed: Vec<_> = actions(e).into_iter().filter(|a| a.0 == "edit" && a.1 && a.2).collect();
    assert_eq!(changed.len(), 4, "{:?}", actions(e));
    assert!(e.actions.iter().flatten().filter_map(|a| a.diff.as_ref()).all(|d| d.contains("+++ b/")));
    // Line 3's reply was aborted by the person.
    assert!(e.interventions.iter().flatten().any(|i| i.kind.as_deref() == Some("abort")));
    // cacheRead and cacheWrite are read tokens too: 71 + 245798 + 119555; output 6416.
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(71 + 245_798 + 119_555), Some(6416)));
    assert!((e.outcome.cost_usd.unwrap() - 0.618524).abs() < 1e-4);
}

#[test]
fn version_3_sessions_by_hand() {
    let run =
        import_all(&fixtures("constructed/pi/trajectory-v3-tool-calls/session.jsonl"), &Options::default()).remove(0);
    let e = &run.package.episode;
    assert_eq!(e.manifest.model, "claude-sonnet-5"); // line 2's model_change
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("Create notes.txt with a short todo list, then show it with bash.")
    );
    // Line 5 writes notes.txt (a created file, its content the diff); line 7 runs `cat`.
    assert_eq!(calls(e), [("write".to_string(), None), ("bash".to_string(), Some(0))]);
    let diff = e.actions.iter().flatten().find_map(|a| a.diff.clone()).unwrap();
    assert!(diff.contains("+- collect pi traces"), "{diff}");
    assert!(e.outcome.final_message.as_deref().unwrap().starts_with("Done. I created"));

    // A real pi run against a stub model: two compactions (lines 6, 9), no tools.
    let run =
        import_all(&fixtures("real/pi/agent-sessions-v3-compaction/session.jsonl"), &Options::default()).remove(0);
    let e = &run.package.episode;
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("Read hello.py and summarize what it prints without editing files.")
    );
    assert_eq!(e.tools.as_ref().map_or(0, Vec::len), 0);
    assert_eq!(e.interventions.iter().flatten().count(), 1, "line 7's prompt is the person's second");
}

#[test]
fn the_conversation_is_the_path_to_the_last_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("2026-01-01T10-00-00-000Z_s1.jsonl");
    let msg = |id: &str, parent: Option<&str>, m: serde_json::Value| json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T10:00:01.000Z", "message": m});
    let user =
        |t: &str| json!({"role": "user", "content": [{"type": "text", "text": t}], "timestamp": 1767261601000i64});
    let said = |t: &str| {
        json!({"role": "assistant", "content": [{"type": "text", "text": t}], "model": "m1", "stopReason": "stop",
               "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0}})
    };
    let lines = [
        json!({"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T10:00:00.000Z", "cwd": "/w"}),
        msg("e1", None, user("fix it")),
        msg("e2", Some("e1"), said("how?")),
        msg("e3", Some("e2"), user("approach A")),
        msg("e4", Some("e3"), said("A done")),
        json!({"type": "branch_summary", "id": "bs", "parentId": "e2", "timestamp": "2026-01-01T10:00:05.000Z", "fromId": "e4", "summary": "tried A"}),
        msg("e5", Some("bs"), user("approach B")),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    let run = import_all(&path, &Options::default()).remove(0);
    let e = &run.package.episode;
    let human: Vec<String> = e
        .messages
        .iter()
        .flatten()
        .filter(|m| m.author.as_deref() == Some("human"))
        .filter_map(|m| m.text.clone())
        .collect();
    // e3 and e4 were left for approach B: not in the episode, and said so.
    assert_eq!(human, ["fix it", "approach B"]);
    let notes = e.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("2 entries are on branches"), "{notes}");

    // A malformed line is refused with its line.
    std::fs::write(&path, format!("{}\n{{oops\n", lines[0])).unwrap();
    let (_, runs) = import_paths(&[path], &Options::default());
    let err = runs[0].as_ref().unwrap_err();
    assert_eq!(err.place.as_deref(), Some("line 2"), "{err}");
}

/// Observer integrity: Pi runs the tool calls of one reply at once (its default
/// `toolExecution: "parallel"`) and writes their results when they have finished. A test
/// issued in the same reply as an edit may have run on the code before it; epistore
/// called it `current`. docs/importers.md §10 (importers-v1 §4: an outcome that cannot
/// be known counts as possibly changed, so it can make a check stale, never current): a
/// check whose call started before another call's ok mutation had ended (here: the
/// edit's result was written after the reply that issued both) is bound to the revision
/// before that mutation. Calls of successive replies stay in order.
#[test]
fn a_test_issued_with_an_edit_in_one_reply_is_bound_before_it() {
    let session = |same_reply: bool| {
        let head = json!({"type": "session", "version": 3, "id": "11111111-2222-4333-8444-555555555555",
                          "timestamp": "2026-12-01T10:00:00.000Z", "cwd": "/srv/app"});
        let user = json!({"type": "message", "id": "a1", "parentId": null, "timestamp": "2026-12-01T10:00:01.000Z",
                          "message": {"role": "user", "content": [{"type": "text", "text": "Fix src/app.py"}]}});
        let edit = json!({"type": "toolCall", "id": "t1", "name": "edit",
                          "arguments": {"path": "src/app.py", "oldText": "x - 1", "newText": "x + 1"}});
        let test =
            json!({"type": "toolCall", "id": "t2", "name": "bash", "arguments": {"command": "python3 -m pytest -q"}});
        let reply = |id: &str, parent: &str, ts: &str, calls: Vec<serde_json::Value>| {
            json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts,
                   "message": {"role": "assistant", "content": calls, "model": "claude-bench", "stopReason": "toolUse"}})
        };
        let result = |id: &str, parent: &str, ts: &str, call: &str, text: &str| {
            json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts,
                   "message": {"role": "toolResult", "toolCallId": call, "content": [{"type": "text", "text": text}], "isError": false}})
        };
        let mut lines = vec![head, user];
        if same_reply {
            lines.push(reply("a2", "a1", "2026-12-01T10:00:03.000Z", vec![edit, test]));
            lines.push(result(
                "a3",
                "a2",
                "2026-12-01T10:00:07.000Z",
                "t1",
                "Successfully replaced text in src/app.py.",
            ));
            lines.push(result("a4", "a3", "2026-12-01T10:00:07.001Z", "t2", "3 passed in 0.04s"));
        } else {
            lines.push(reply("a2", "a1", "2026-12-01T10:00:03.000Z", vec![edit]));
            lines.push(result(
                "a3",
                "a2",
                "2026-12-01T10:00:04.000Z",
                "t1",
                "Successfully replaced text in src/app.py.",
            ));
            lines.push(reply("a4", "a3", "2026-12-01T10:00:05.000Z", vec![test]));
            lines.push(result("a5", "a4", "2026-12-01T10:00:07.000Z", "t2", "3 passed in 0.04s"));
        }
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("session.jsonl");
        std::fs::write(&p, text.join("\n")).unwrap();
        let (_, runs) = import_paths(&[p], &Options::default());
        runs.into_iter().next().unwrap().unwrap().package.episode
    };
    let e = session(true);
    let check = &e.checks.as_ref().unwrap()[0];
    assert_eq!((e.derived.final_revision, check.bound_revision, check.fresh), (1, 0, false));
    assert_eq!(e.derived.posture, "stale");
    let e = session(false);
    let check = &e.checks.as_ref().unwrap()[0];
    assert_eq!((check.bound_revision, check.fresh), (1, true));
    assert_eq!(e.derived.posture, "current");
}
