//! OpenCode sessions read by hand (tests/fixtures/constructed/opencode/README.md says
//! what each holds): the storage/ layout, the SQLite store built from it, and an
//! `opencode export` file.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use crate::testing::{actions, fixtures, import_all, import_paths};
use crate::Options;

fn fixture(rel: &str) -> PathBuf {
    fixtures(&format!("constructed/opencode/{rel}"))
}

/// (tool, command, exit code) of every tools record.
fn calls(e: &epistore_package::Episode) -> Vec<(String, String, Option<i64>)> {
    e.tools.iter().flatten().map(|t| (t.tool.clone(), t.command.clone().unwrap_or_default(), t.exit_code)).collect()
}

/// The `storage/` session, asserted from its files.
fn assert_calc_session(e: &epistore_package::Episode) {
    // session/<project>/ses_....json: id, directory, version.
    assert_eq!(e.manifest.episode, "ses_3b791921cffez40vusMKrFSsIn");
    assert_eq!(e.manifest.model, "claude-sonnet-4-5");
    // The first user message's text part (the synthetic one is the harness's).
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("The test in test_calc.py fails. Fix calc.py so it passes."));
    // Steps 1-3: bash (metadata.exit 1), edit, bash (metadata.exit 0).
    let c = calls(e);
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!((c[0].0.as_str(), c[0].1.as_str(), c[0].2), ("bash", "python -m pytest -q", Some(1)));
    assert_eq!(c[1].0, "edit");
    assert_eq!((c[2].0.as_str(), c[2].2), ("bash", Some(0)));
    // The edit is a mutation of calc.py (relative to the session's directory), its diff
    // OpenCode's own (metadata.diff); the second test runs on the revision after it.
    let a = actions(e);
    let edit = a.iter().find(|(k, m, _, _)| k == "edit" && *m).expect("the edit");
    let checks: Vec<(String, u64, bool)> =
        e.checks.iter().flatten().map(|c| (c.result.clone().unwrap_or_default(), c.bound_revision, c.fresh)).collect();
    assert_eq!(checks, [("fail".into(), edit.3, false), ("pass".into(), edit.3 + 1, true)], "{a:?}");
    let edit_action = e.actions.iter().flatten().find(|x| x.mutates).expect("edit action");
    assert_eq!(edit_action.paths, ["calc.py"]);
    assert!(edit_action.diff.as_deref().unwrap().contains("+    return a + b"));
    // An action carries its step's start snapshot (step-start.snapshot).
    let state = |x: &epistore_package::Action| -> Option<String> {
        let extra: Value = serde_json::from_str(x.common.extra.as_deref()?).ok()?;
        extra.get("state_digest").and_then(Value::as_str).map(str::to_string)
    };
    // The edit's step started from the tree the failing test's step ended on.
    assert_eq!(state(edit_action).as_deref(), Some("cfa82eb1ca2a7551b428c4dced4d7d4f8f6223ea"));
    // Tool output as content; tokens and cost summed over the step-finish parts.
    assert!(e.tools.iter().flatten().any(|t| t.exit_code == Some(1)));
    assert_eq!(e.outcome.tokens_in, Some(4 * (1200 + 4000 + 100)));
    assert_eq!(e.outcome.tokens_out, Some(4 * (80 + 7)));
    // No submission, no claim: an interactive session ends with its text.
    assert_ne!(e.outcome.agent_reported_complete, Some(true));
    // The person's words, the harness's synthetic part, the agent's replies.
    let roles: Vec<(String, Option<String>)> =
        e.messages.iter().flatten().map(|m| (m.role.clone(), m.author.clone())).collect();
    assert!(roles.contains(&("user".into(), Some("harness".into()))), "{roles:?}");
}

#[test]
fn a_storage_session_imports_with_its_steps_edits_and_snapshots() {
    let runs = import_all(&fixture("share/opencode/storage"), &Options::default());
    assert_eq!(runs.len(), 1);
    assert_calc_session(&runs[0].package.episode);
}

#[test]
fn the_data_folder_skips_the_credentials_unopened_and_covers_the_pieces() {
    let (plan, runs) = import_paths(&[fixture("share/opencode")], &Options::default());
    assert_eq!(runs.len(), 1);
    let skipped: Vec<(String, String)> = plan
        .skipped
        .iter()
        .map(|(p, why)| (p.file_name().unwrap().to_string_lossy().into_owned(), why.clone()))
        .collect();
    assert!(skipped.contains(&("auth.json".into(), "a credentials file: never opened".into())), "{skipped:?}");
    // Messages, parts and the project file are the session's: covered, not skipped.
    assert!(plan.covered.len() >= 20, "{:?}", plan.covered.len());
    assert!(skipped.iter().all(|(n, _)| n == "auth.json"), "{skipped:?}");
}

/// OpenCode 1.2's schema (the columns the importer reads), filled from the storage/
/// session's files.
fn database_from_storage(dir: &Path) -> PathBuf {
    let db_path = dir.join("opencode.db");
    let db = Connection::open(&db_path).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text, time_created integer NOT NULL, time_updated integer NOT NULL, sandboxes text NOT NULL);
         CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
         CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
         CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);",
    )
    .unwrap();
    let storage = fixture("share/opencode/storage");
    let read =
        |p: &Path| -> serde_json::Map<String, Value> { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let sessions = storage.join("session/4b0ea68d7af9a6031a7ffda7ad66e0cb83315750");
    for s in std::fs::read_dir(&sessions).unwrap() {
        let s = read(&s.unwrap().path());
        let sid = s["id"].as_str().unwrap().to_string();
        let t = &s["time"];
        db.execute(
            "INSERT INTO session VALUES (?1, ?2, NULL, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params![
                sid,
                s["projectID"].as_str(),
                s["slug"].as_str(),
                s["directory"].as_str(),
                s["title"].as_str(),
                s["version"].as_str(),
                t["created"].as_i64(),
                t["updated"].as_i64()
            ],
        )
        .unwrap();
        for m in std::fs::read_dir(storage.join("message").join(&sid)).unwrap() {
            let mut m = read(&m.unwrap().path());
            let mid = m.remove("id").unwrap().as_str().unwrap().to_string();
            m.remove("sessionID");
            let created = m["time"]["created"].as_i64();
            db.execute(
                "INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)",
                rusqlite::params![mid, sid, created, Value::Object(m).to_string()],
            )
            .unwrap();
            for p in std::fs::read_dir(storage.join("part").join(&mid)).unwrap() {
                let mut p = read(&p.unwrap().path());
                let pid = p.remove("id").unwrap().as_str().unwrap().to_string();
                p.remove("sessionID");
                p.remove("messageID");
                db.execute(
                    "INSERT INTO part VALUES (?1, ?2, ?3, 0, 0, ?4)",
                    rusqlite::params![pid, mid, sid, Value::Object(p).to_string()],
                )
                .unwrap();
            }
        }
    }
    db_path
}

#[test]
fn the_sqlite_store_reads_as_the_storage_files_do_and_is_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = database_from_storage(dir.path());
    let before = std::fs::read(&db).unwrap();
    let runs = import_all(&db, &Options::default());
    assert_eq!(runs.len(), 1);
    assert_calc_session(&runs[0].package.episode);
    // Its source part: the session as an export document, named by the session.
    let provenance = runs[0].package.episode.manifest.provenance().unwrap();
    assert_eq!(provenance["source_files"][0]["part"], "session ses_3b791921cffez40vusMKrFSsIn");
    assert_eq!(std::fs::read(&db).unwrap(), before, "the store file is unchanged");
    // The same session read twice is the same source part (the hash is the session's).
    let again = import_all(&db, &Options::default());
    assert_eq!(again[0].source_keys, runs[0].source_keys);
    // A session also under storage/ is read once, from the database.
    let (plan, both) = import_paths(&[db.clone(), fixture("share/opencode/storage")], &Options::default());
    assert_eq!(both.len(), 1);
    assert!(plan.covered.iter().any(|(_, _, why)| why.contains("also in opencode.db")));
}

#[test]
fn an_export_with_a_patch_a_refusal_and_a_stopped_reply() {
    let runs = import_all(&fixture("session-export.json"), &Options::default());
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "ses_3a0f11aa2ffeABCDEFGHIJKLMN");
    assert_eq!(e.manifest.model, "gpt-5.2");
    // apply_patch: an edit of the file metadata.files names, with its diff.
    let edit = e.actions.iter().flatten().find(|a| a.mutates).expect("the patch");
    assert_eq!((edit.paths.as_slice(), edit.ok), (&["CHANGELOG.md".to_string()][..], true));
    assert!(edit.diff.as_deref().unwrap().contains("+## 0.3.0"));
    // `rm TODO`: refused by the person (the permission error), not run, no mutation.
    let rm = e.tools.iter().flatten().find(|t| t.command.as_deref() == Some("rm TODO")).expect("rm");
    assert_eq!(rm.failure_type, "permission_denied");
    assert_eq!(e.actions.iter().flatten().filter(|a| a.mutates).count(), 1);
    // The refusal, the stop (MessageAbortedError) and the second prompt: the person's.
    let kinds: Vec<String> = e.interventions.iter().flatten().map(|i| i.kind.clone().unwrap_or_default()).collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert!(kinds.contains(&"abort".to_string()), "{kinds:?}");
    assert_eq!(e.outcome.final_message.as_deref(), Some("Done: CHANGELOG.md has the 0.3.0 entry; TODO is kept."));
}

#[test]
fn a_truncated_export_is_refused_with_its_line_and_a_store_without_tables_by_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("session-export.json")).unwrap();
    let cut = dir.path().join("session-export.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let opts = Options { format: crate::Format::from_name("opencode"), ..Options::default() };
    let (_, runs) = import_paths(&[cut], &opts);
    let err = runs[0].as_ref().map(|_| ()).expect_err("refused").to_string();
    assert!(err.contains("line ") && err.contains("malformed JSON"), "{err}");
    let db = dir.path().join("opencode.db");
    Connection::open(&db).unwrap().execute_batch("CREATE TABLE session (id text);").unwrap();
    let (plan, _) = import_paths(&[db], &Options::default());
    assert!(plan.refused[0].1.reason.contains("no `message` table"), "{:?}", plan.refused);
}

/// State identity (docs/format.md §9.5, docs/importers.md §10): OpenCode records the
/// worktree's tree id at every step's start and finish. A check is fresh for the state
/// it ran on: a script that changed the tree silently after the passing test makes it
/// stale (no action shows the write, the snapshots do), and an edit undone back to the
/// tested tree leaves it fresh although two edits came after it.
#[test]
fn step_snapshots_decide_freshness_where_they_name_both_states() {
    use serde_json::json;
    let sid = "ses_4a0f11aa2ffeSnapshotsTest1";
    let step = |n: u64, start: &str, tools: Vec<Value>, finish: &str| {
        let mid = format!("msg_{n:03}");
        let mut parts = vec![json!({"type": "step-start", "snapshot": start})];
        parts.extend(tools);
        parts.push(json!({"type": "step-finish", "reason": "tool-calls", "snapshot": finish, "cost": 0.0,
                          "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}}));
        json!({"info": {"id": mid, "sessionID": sid, "role": "assistant", "time": {"created": 1771000000000u64 + n * 1000,
               "completed": 1771000000500u64 + n * 1000}, "modelID": "gpt-5.2", "providerID": "openai"}, "parts": parts})
    };
    let bash = |id: &str, command: &str, output: &str, exit: i64| {
        json!({"type": "tool", "callID": id, "tool": "bash", "state": {"status": "completed",
               "input": {"command": command, "description": "run"}, "output": output, "metadata": {"exit": exit}}})
    };
    let edit = |id: &str, old: &str, new: &str| {
        json!({"type": "tool", "callID": id, "tool": "edit", "state": {"status": "completed",
               "input": {"filePath": "/w/calc.py", "oldString": old, "newString": new}, "output": "", "metadata": {}}})
    };
    let session = |after_test: Vec<Value>| {
        let mut messages = vec![
            json!({"info": {"id": "msg_000", "sessionID": sid, "role": "user", "time": {"created": 1771000000000u64}},
                   "parts": [{"type": "text", "text": "Fix calc.py"}]}),
            step(1, "tree0", vec![edit("e1", "a - b", "a + b")], "tree1"),
            step(2, "tree1", vec![bash("t1", "python -m pytest -q", "1 passed in 0.01s", 0)], "tree1"),
        ];
        messages.extend(after_test);
        let text = json!({"info": {"id": sid, "directory": "/w", "version": "1.1.60", "title": "t",
                                   "time": {"created": 1771000000000u64}}, "messages": messages});
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("export.json");
        std::fs::write(&p, text.to_string()).unwrap();
        let (_, runs) = import_paths(&[p], &Options::default());
        runs.into_iter().next().unwrap().unwrap().package.episode
    };
    let digest = |extra: &Option<String>, key: &str| -> Option<String> {
        serde_json::from_str::<Value>(extra.as_deref()?).ok()?.get(key)?.as_str().map(str::to_string)
    };

    // A silent script: no mutation is recorded, the tree changed.
    let e = session(vec![step(3, "tree1", vec![bash("s1", "python3 scripts/gen.py", "", 0)], "tree2")]);
    let check = &e.checks.as_ref().unwrap()[0];
    assert_eq!(digest(&check.common.extra, "state_digest").as_deref(), Some("tree1"));
    assert_eq!(digest(&e.outcome.extra, "final_state_digest").as_deref(), Some("tree2"));
    assert_eq!((e.derived.final_revision, check.bound_revision, check.fresh), (1, 1, false));
    assert_eq!(e.derived.posture, "stale");

    // An edit and its undo: back on the tree the test ran on.
    let e = session(vec![
        step(3, "tree1", vec![edit("e2", "a + b", "a * b")], "tree3"),
        step(4, "tree3", vec![edit("e3", "a * b", "a + b")], "tree1"),
    ]);
    let check = &e.checks.as_ref().unwrap()[0];
    assert_eq!((e.derived.final_revision, check.bound_revision, check.fresh), (3, 1, true));
    assert_eq!(e.derived.posture, "current");
    // The second edit started from tree3; none of the records after a mutation in a
    // step carries the step's start tree.
    let states: Vec<Option<String>> =
        e.actions.iter().flatten().filter(|a| a.mutates).map(|a| digest(&a.common.extra, "state_digest")).collect();
    assert_eq!(states, [Some("tree0".into()), Some("tree1".into()), Some("tree3".into())]);

    // A log whose last step names no end tree: the revisions decide (stale).
    let mut last = step(3, "tree1", vec![edit("e2", "a + b", "a * b")], "x");
    last["parts"][2].as_object_mut().unwrap().remove("snapshot");
    let e = session(vec![last]);
    assert_eq!(digest(&e.outcome.extra, "final_state_digest"), None);
    assert_eq!(e.derived.posture, "stale");
}
