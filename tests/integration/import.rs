//! `epistore import` end to end: real logs (tests/fixtures/real) into a store and into
//! package directories, idempotence, refusals that name file and line and leave the
//! store as it was, and the imported episodes through SQL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{copy_tree, repo_root, text, TestStore};

fn real(rel: &str) -> PathBuf {
    repo_root().join("tests/fixtures/real").join(rel)
}

/// One small run of several formats.
fn small_logs() -> Vec<PathBuf> {
    vec![
        real("atif/inspect-scout-terminus2-linear-history-raw-content"),
        real("claude-code/generated/projects"),
        real("codex/generated/rollout-2026-12-01T09-03-11-01a230d7-ffed-7313-9f3e-3e14281f1679.jsonl"),
        real("mini-swe-agent/generated/slugify.success.traj.json"),
        real("swe-agent/test-repo-i1.traj"),
    ]
}

fn import(store: &TestStore, paths: &[PathBuf], extra: &[&str]) -> (i32, Value, String) {
    let mut cmd = store.command();
    cmd.args(["import", "--quiet", "--summary-format", "json"]).args(extra).args(paths);
    let out = cmd.output().unwrap();
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("import printed no JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr)));
    (out.status.code().unwrap(), value, text(&out.stderr))
}

/// `formats[]` of a summary as source_format -> (found but not covered, imported,
/// already_present, refused), checking on the way that every found item is exactly
/// one of imported, already present, covered or refused (files covered while planning,
/// such as an OpenCode session's part files, are found and covered).
fn tally(summary: &Value) -> BTreeMap<String, (u64, u64, u64, u64)> {
    summary["formats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let n = |k: &str| f[k].as_u64().unwrap();
            assert_eq!(
                n("found"),
                n("imported") + n("already_present") + n("covered") + n("refused"),
                "the summary does not add up: {f}"
            );
            (
                f["source_format"].as_str().unwrap().to_string(),
                (n("found") - n("covered"), n("imported"), n("already_present"), n("refused")),
            )
        })
        .collect()
}

#[test]
fn importing_the_same_logs_twice_adds_nothing() {
    let store = TestStore::new();
    let (code, first, stderr) = import(&store, &small_logs(), &[]);
    assert_eq!(code, 0, "{first}\n{stderr}");
    let counts = tally(&first);
    for format in ["atif", "claude-code", "codex", "mini-swe-agent", "swe-agent"] {
        assert_eq!(counts[format], (1, 1, 0, 0), "{format}: {first}");
    }
    assert_eq!(store.episode_count(), 5);

    let (code, second, _) = import(&store, &small_logs(), &[]);
    assert_eq!(code, 0);
    for format in ["atif", "claude-code", "codex", "mini-swe-agent", "swe-agent"] {
        assert_eq!(tally(&second)[format], (1, 0, 1, 0), "{format}: {second}");
    }
    assert_eq!(store.episode_count(), 5);

    // Every imported episode is revision 1.1 with its source format and source copies.
    let rows = store.sql("SELECT source_format, n_artifacts FROM episodes ORDER BY source_format");
    let formats: Vec<&str> = rows.iter().map(|r| r["source_format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["atif", "claude-code", "codex", "mini-swe-agent", "swe-agent"]);
    assert!(rows.iter().all(|r| r["n_artifacts"].as_i64().unwrap() >= 1), "{rows:?}");
}

fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn out_writes_the_same_bytes_every_time_and_they_ingest_as_the_same_episodes() {
    let store = TestStore::new();
    let (one, two) = (store.dir.path().join("one"), store.dir.path().join("two"));
    for out in [&one, &two] {
        let (code, summary, stderr) = import(&store, &small_logs(), &["--out", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{summary}\n{stderr}");
    }
    let (a, b) = (tree(&one), tree(&two));
    assert!(!a.is_empty());
    assert!(a == b, "two --out runs differ");
    // No path of this machine and no import time inside a package.
    let root = repo_root().to_string_lossy().into_owned();
    for (path, bytes) in &a {
        if path.contains("artifacts/source/") {
            continue; // the logs as their tools wrote them
        }
        assert!(!String::from_utf8_lossy(bytes).contains(&root), "{path} names this checkout");
    }
    // Written again into the same folder: already there, nothing rewritten.
    let (code, again, _) = import(&store, &small_logs(), &["--out", one.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(tally(&again).values().all(|t| t.1 == 0), "{again}");

    // The packages ingest as the episodes a direct import makes.
    assert!(store.ingest(&[&one]).status.success());
    let direct = TestStore::new();
    assert_eq!(import(&direct, &small_logs(), &[]).0, 0);
    let ids = |s: &TestStore| s.sql("SELECT episode_id FROM episodes ORDER BY 1");
    assert_eq!(ids(&store), ids(&direct));
}

#[test]
fn a_truncated_log_is_refused_with_file_and_line_and_the_others_go_in() {
    let store = TestStore::new();
    let work = store.dir.path().join("logs");
    std::fs::create_dir_all(&work).unwrap();
    let source = real("codex/generated/rollout-2026-12-01T09-03-11-01a230d7-ffed-7313-9f3e-3e14281f1679.jsonl");
    let bytes = std::fs::read(&source).unwrap();
    let lines = bytes.iter().filter(|&&b| b == b'\n').count();
    // Cut the file in the middle of its last line.
    let cut = bytes.len() - bytes.rsplit(|&b| b == b'\n').nth(1).unwrap().len() / 2 - 1;
    let truncated = work.join("rollout-truncated.jsonl");
    std::fs::write(&truncated, &bytes[..cut]).unwrap();

    let paths = vec![truncated.clone(), real("swe-agent/test-repo-i1.traj")];
    let (code, summary, stderr) = import(&store, &paths, &[]);
    assert_eq!(code, 1, "{summary}\n{stderr}");
    let refused = summary["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 1, "{summary}");
    assert!(refused[0]["file"].as_str().unwrap().ends_with("rollout-truncated.jsonl"), "{summary}");
    assert_eq!(refused[0]["place"], format!("line {lines}"), "{summary}");
    assert_eq!(tally(&summary)["swe-agent"].1, 1);
    // Only the good log is stored.
    let formats = store.sql("SELECT source_format FROM episodes");
    assert_eq!(formats.len(), 1);
    assert_eq!(formats[0]["source_format"], "swe-agent");
}

#[test]
fn a_file_of_no_known_format_is_refused_by_name() {
    let store = TestStore::new();
    let file = store.dir.path().join("notes.txt");
    std::fs::write(&file, "just some words\n").unwrap();
    let (code, summary, _) = import(&store, &[file], &[]);
    assert_eq!(code, 1);
    assert!(summary["refused"][0]["reason"].as_str().unwrap().contains("not a log"), "{summary}");
    assert!(!store.path().join("epistore.redb").exists() || store.episode_count() == 0);
}

#[test]
fn imported_episodes_roll_up_by_source_format_and_show_their_provenance() {
    let store = TestStore::new();
    assert_eq!(import(&store, &small_logs(), &[]).0, 0);
    let out = store.run(&["metrics", "--by", "source_format", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let formats: Vec<&str> = rows.iter().map(|r| r["source_format"].as_str().unwrap()).collect();
    assert_eq!(formats, ["atif", "claude-code", "codex", "mini-swe-agent", "swe-agent"]);
    // No evaluator in these logs: label metrics have no adjudicated episode.
    assert!(rows.iter().all(|r| r["avs_rate"].is_null()), "{rows:?}");

    let id = store.sql("SELECT episode_id FROM episodes WHERE source_format = 'codex'")[0]["episode_id"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = store.run(&["show", &id]);
    let shown = text(&shown.stdout);
    for expected in ["source_format", "codex", "source_file", "rollout-2026-12-01T09-03-11", "opaque_calls"] {
        assert!(shown.contains(expected), "show lacks {expected}:\n{shown}");
    }
}

#[test]
fn a_log_that_grew_supersedes_its_earlier_import_and_is_counted_once() {
    let store = TestStore::new();
    let session = real("claude-code/generated/projects/-srv-counter/555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl");
    let bytes = std::fs::read(&session).unwrap();
    let logs = store.dir.path().join("projects/-srv-counter");
    std::fs::create_dir_all(&logs).unwrap();
    let live = logs.join(session.file_name().unwrap());
    // The session as it was half-way: its first half of whole lines.
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    std::fs::write(&live, lines[..lines.len() / 2].concat()).unwrap();
    let (code, first, stderr) = import(&store, std::slice::from_ref(&live), &[]);
    assert_eq!(code, 0, "{first}\n{stderr}");
    let old = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();

    // The session went on: the same file, longer.
    std::fs::write(&live, &bytes).unwrap();
    let (code, second, stderr) = import(&store, std::slice::from_ref(&live), &[]);
    assert_eq!(code, 0, "{second}\n{stderr}");
    assert_eq!(tally(&second)["claude-code"].1, 1, "{second}");
    assert_eq!(second["formats"][0]["superseding"], 1, "{second}");

    // Both are stored; only the grown one counts.
    let current = store.sql("SELECT episode_id, supersedes FROM episodes");
    assert_eq!(current.len(), 1, "{current:?}");
    assert_eq!(current[0]["supersedes"], old.as_str());
    let all = store.sql("SELECT episode_id, superseded_by FROM all_episodes ORDER BY superseded_by NULLS LAST");
    assert_eq!(all.len(), 2);
    assert_eq!(all[0]["episode_id"], old.as_str());
    assert_eq!(all[0]["superseded_by"], current[0]["episode_id"]);
    assert!(all[1]["superseded_by"].is_null());
    let cells = store.sql("SELECT sum(episodes) AS n FROM cell_metrics");
    assert_eq!(cells[0]["n"], 1, "metric views count each run once");
    let checks = store.sql("SELECT count(DISTINCT episode_id) AS n FROM checks");
    assert_eq!(checks[0]["n"], 1, "trace tables leave the superseded episode out");

    // Importing the grown file again adds nothing; a different file with the same
    // session id is a different run, imported beside it.
    assert_eq!(tally(&import(&store, std::slice::from_ref(&live), &[]).1)["claude-code"].2, 1);
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes")[0]["n"], 2);
}

#[test]
fn a_log_naming_no_model_is_refused_without_model_and_imported_with_it() {
    let store = TestStore::new();
    let exec = real("codex/generated/codex-exec--json.stdout.jsonl");
    let (code, summary, _) = import(&store, std::slice::from_ref(&exec), &[]);
    assert_eq!(code, 1, "{summary}");
    assert!(summary["refused"][0]["reason"].as_str().unwrap().contains("--model"), "{summary}");
    assert!(!store.path().join("epistore.redb").exists() || store.episode_count() == 0);
    let (code, summary, _) = import(&store, &[exec], &["--model", "gpt-5.1-codex"]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(store.sql("SELECT model FROM episodes")[0]["model"], "gpt-5.1-codex");
}

#[test]
fn every_real_fixture_imports_or_is_refused_for_a_stated_reason() {
    // The whole tests/fixtures/real tree in one call: detection must tell every format
    // apart. The per-format counts are the ones each format's own tests establish by
    // hand (crates/import/src/*/tests): aider 44 of 63 sessions (15 empty, 4 naming no
    // model, plus the cut-off head of the file); Claude Code 5 sessions (the
    // stream-json of the generated one covered by its transcript); Codex 1 (its exec
    // --json covered by the rollout); Inspect 11 samples; mini-SWE-agent 1 trajectory
    // (2 bare message lists and a predictions file refused); OpenHands 4 trajectories
    // and 3 eval lines (30 predictions without a history refused); SWE-agent 3 (one
    // names no model); one SWE-bench log without a report; ATIF 3 trajectories (the
    // OpenHands one names no model), their continuation and 3 subagent files covered;
    // Gemini CLI 1 session; Pi 2; Copilot CLI 2 sessions that name no model;
    // trajectory datasets 5 rows of 6 (the SWE-rebench excerpt names no model).
    let store = TestStore::new();
    let (code, summary, _) = import(&store, &[real("")], &[]);
    assert_eq!(code, 1, "{summary}");
    let expected = [
        ("aider", 44, 20),
        ("atif", 3, 1),
        ("gemini-cli", 1, 0),
        ("pi", 2, 0),
        ("copilot-cli", 0, 2),
        ("trajectories", 5, 1),
        ("claude-code", 5, 0),
        ("codex", 1, 0),
        ("inspect", 11, 0),
        ("mini-swe-agent", 1, 3),
        ("openhands", 7, 30),
        ("swe-agent", 3, 1),
        ("swe-bench", 0, 1),
    ];
    let counts = tally(&summary);
    for (format, imported, refused) in expected {
        assert_eq!((counts[format].1, counts[format].3), (imported, refused), "{format}: {summary}");
    }
    for r in summary["refused"].as_array().unwrap() {
        assert!(r["file"].as_str().unwrap().contains("tests/fixtures/real/"), "{r}");
        assert!(r["reason"].as_str().unwrap().len() > 20, "a refusal says why: {r}");
    }
    let covered: Vec<&str> =
        summary["covered"].as_array().unwrap().iter().map(|c| c["file"].as_str().unwrap()).collect();
    assert_eq!(covered.len(), 6, "{covered:?}");
    assert_eq!(covered.iter().filter(|c| c.contains("/atif/")).count(), 4, "{covered:?}");
    assert!(covered.iter().any(|c| c.ends_with("stream-json.counter.jsonl")));
    assert!(covered.iter().any(|c| c.ends_with("codex-exec--json.stdout.jsonl")));
    assert_eq!(store.episode_count(), 83);
    // Every imported package is valid by construction; verify agrees.
    let (intact, report) = store.verify();
    assert!(intact, "{report}");
}

#[test]
fn secrets_in_a_log_are_reported_and_redact_replaces_them() {
    let store = TestStore::new();
    let source = real("codex/generated/rollout-2026-12-01T09-03-11-01a230d7-ffed-7313-9f3e-3e14281f1679.jsonl");
    // A token pasted into the agent's command, as happens in real transcripts (split so
    // this file holds no literal token).
    let token = format!("ghp_{}", "Zq8rT2vX9mK4pL7nB3cW6yH1jD5fG0sA2eR8");
    let text = std::fs::read_to_string(&source).unwrap().replace("cat greet.py;", &format!("GH={token} cat greet.py;"));
    let log = store.dir.path().join("rollout-with-token.jsonl");
    std::fs::write(&log, text).unwrap();

    let out = store.dir.path().join("plain");
    let (code, summary, _) = import(&store, std::slice::from_ref(&log), &["--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["runs_with_secrets"], 1, "{summary}");
    assert!(summary["secrets"]["github-token"].as_u64().unwrap() >= 1, "{summary}");
    let holds = |dir: &Path| tree(dir).values().any(|b| String::from_utf8_lossy(b).contains(&token));
    assert!(holds(&out), "without --redact the package keeps the log as it was");

    let redacted = store.dir.path().join("redacted");
    let (code, summary, stderr) = import(&store, &[log], &["--redact", "--out", redacted.to_str().unwrap()]);
    assert_eq!(code, 0, "{summary}\n{stderr}");
    assert!(!holds(&redacted), "--redact leaves the token nowhere in the package");
    let manifest = tree(&redacted).into_iter().find(|(p, _)| p.ends_with("manifest.json")).unwrap().1;
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let notes = manifest["provenance"]["notes"].to_string();
    assert!(notes.contains("redacted"), "{notes}");
    assert_eq!(manifest["provenance"]["source_files"][0]["redacted"], true);
    // The redacted package is still a valid package.
    assert!(store.ingest(&[&redacted]).status.success());
}

/// A file name with a terminal escape sequence reaches the terminal escaped in what
/// `import` prints (here its refusal), not as the sequence.
#[test]
fn file_names_are_printed_escaped() {
    let store = TestStore::new();
    let dir = store.dir.path().join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    let name = dir.join("s\u{1b}]0;owned\u{7}.jsonl");
    std::fs::write(
        &name,
        "{\"type\":\"user\",\"sessionId\":\"abc\",\"uuid\":\"u1\",\"timestamp\":\"2026-01-01T00:00:00Z\",\
         \"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n{broken\n",
    )
    .unwrap();
    let out = store.run(&["import", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("refused: ") && stderr.contains("s\\x1b]0;owned\\x07.jsonl"), "{stderr}");
    assert!(!out.stderr.contains(&0x1b) && !out.stderr.contains(&0x07), "{stderr}");
}

/// A pipe, a device or a symbolic link loop given to `import` is refused for what it
/// is, not as a missing file, and nothing blocks on reading it.
#[test]
fn paths_that_are_no_files_are_refused_for_what_they_are() {
    let store = TestStore::new();
    let dir = store.dir.path().join("odd");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("pipe.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::os::unix::fs::symlink(dir.join("b"), dir.join("a")).unwrap();
    std::os::unix::fs::symlink(dir.join("a"), dir.join("b")).unwrap();
    for (path, said) in [
        (fifo.clone(), "a named pipe (FIFO)"),
        (dir.join("a"), "symbolic links"),
        (PathBuf::from("/dev/zero"), "a device"),
        (dir.join("missing.jsonl"), "no such file or directory"),
    ] {
        let out = store.run(&["import", "--quiet", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}: {}", path.display(), text(&out.stderr));
        assert!(text(&out.stderr).contains(said), "{}: {}", path.display(), text(&out.stderr));
    }
}

/// `import` reads JSON as `ingest` does: nested 200 deep (past serde_json's own 128) is
/// imported, deeper than the package limit (1,024) is refused naming the file, and
/// neither crashes.
#[test]
fn deeply_nested_json_is_read_as_ingest_reads_it() {
    let session = |depth: usize| {
        let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let lines = [
            format!(
                r#"{{"type":"user","sessionId":"d{depth}","uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"/w","message":{{"role":"user","content":"go"}}}}"#
            ),
            format!(
                r#"{{"type":"assistant","sessionId":"d{depth}","uuid":"a1","timestamp":"2026-01-01T00:00:01Z","cwd":"/w","message":{{"id":"m1","model":"claude-sonnet-4-5","role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"Custom","input":{{"deep":{nested}}}}}]}}}}"#
            ),
        ];
        lines.join("\n") + "\n"
    };
    let store = TestStore::new();
    let dir = store.dir.path().join("projects/-w");
    std::fs::create_dir_all(&dir).unwrap();
    let ok = dir.join("deep-200.jsonl");
    std::fs::write(&ok, session(200)).unwrap();
    let out = store.run(&["import", "--quiet", ok.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(store.sql("SELECT count(*) AS n FROM episodes")[0]["n"], 1);
    let too_deep = dir.join("deep-5000.jsonl");
    std::fs::write(&too_deep, session(5_000)).unwrap();
    let out = store.run(&["import", "--quiet", too_deep.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("deep-5000.jsonl") && text(&out.stderr).contains("nested deeper"),
        "{}",
        text(&out.stderr)
    );
}

/// Claude Code session lines: a prompt, then `turns` tool calls with their results
/// (the first result prints a token, so `--redact` has something to replace).
fn session_lines(sid: &str, turns: usize) -> String {
    let token = concat!("ghp", "_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
    let mut lines = vec![format!(
        r#"{{"type":"user","sessionId":"{sid}","uuid":"u0","timestamp":"2026-01-01T00:00:00Z","cwd":"/w","message":{{"role":"user","content":"go"}}}}"#
    )];
    for t in 0..turns {
        let output = if t == 0 { format!("GH_TOKEN={token}") } else { format!("step {t}") };
        lines.push(format!(
            r#"{{"type":"assistant","sessionId":"{sid}","uuid":"a{t}","timestamp":"2026-01-01T00:00:{:02}Z","cwd":"/w","message":{{"id":"m{t}","model":"claude-sonnet-4-5","role":"assistant","content":[{{"type":"tool_use","id":"t{t}","name":"Bash","input":{{"command":"echo {t}"}}}}]}}}}"#,
            2 * t + 1
        ));
        lines.push(format!(
            r#"{{"type":"user","sessionId":"{sid}","uuid":"r{t}","timestamp":"2026-01-01T00:00:{:02}Z","cwd":"/w","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{t}","content":"{output}"}}]}}}}"#,
            2 * t + 2
        ));
    }
    lines.join("\n") + "\n"
}

fn episodes_and_summary(store: &TestStore, args: &[&str]) -> (u64, Value) {
    let mut all = vec!["import", "--quiet", "--summary-format", "json"];
    all.extend_from_slice(args);
    let out = store.run(&all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = store.sql("SELECT count(*) AS n FROM episodes")[0]["n"].as_u64().unwrap();
    (n, summary)
}

/// Each run once: a log grown since a `--redact` import supersedes it (the stored copy
/// is compared redacted); an older copy of a stored run (a backup) is covered, in
/// either order; two files giving one run in one import are reported.
#[test]
fn a_run_is_counted_once_however_its_copies_arrive() {
    let sid = "0b5e0000-0000-4000-8000-000000000007";
    let write = |dir: &Path, turns: usize| {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{sid}.jsonl"));
        std::fs::write(&path, session_lines(sid, turns)).unwrap();
        path
    };
    // Grown since a --redact import.
    let store = TestStore::new();
    let log = write(&store.dir.path().join("live"), 2);
    let (n, _) = episodes_and_summary(&store, &["--redact", log.to_str().unwrap()]);
    assert_eq!(n, 1);
    write(&store.dir.path().join("live"), 4);
    let (n, summary) = episodes_and_summary(&store, &["--redact", log.to_str().unwrap()]);
    assert_eq!(n, 1, "{summary}");
    assert!(summary.to_string().contains("\"superseding\":1"), "{summary}");

    // A backup (the log as it was) imported after the grown log, then before it.
    for backup_first in [false, true] {
        let store = TestStore::new();
        let backup = write(&store.dir.path().join("backup"), 2);
        let live = write(&store.dir.path().join("live"), 4);
        let (first, second) = if backup_first { (&backup, &live) } else { (&live, &backup) };
        episodes_and_summary(&store, &[first.to_str().unwrap()]);
        let (n, summary) = episodes_and_summary(&store, &[second.to_str().unwrap()]);
        assert_eq!(n, 1, "backup first: {backup_first}: {summary}");
        if !backup_first {
            assert!(summary["covered"].to_string().contains("an older copy of a run already stored"), "{summary}");
        }
    }

    // Both in one import: two episodes, and the summary says why.
    let store = TestStore::new();
    let backup = write(&store.dir.path().join("backup"), 2);
    let live = write(&store.dir.path().join("live"), 4);
    let out = store.run(&["import", "--quiet", backup.to_str().unwrap(), live.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("run {sid} was read from both")), "{}", text(&out.stderr));
}

/// A Claude Code line whose text was cut inside an emoji (a lone `\ud83d` escape, which
/// serde_json refuses) is imported with U+FFFD in its place, not skipped unseen.
#[test]
fn a_lone_surrogate_in_a_log_is_read_as_the_replacement_character() {
    let store = TestStore::new();
    let dir = store.dir.path().join("projects/-w");
    std::fs::create_dir_all(&dir).unwrap();
    let line = |uuid: &str, ts: &str, role: &str, content: &str| {
        format!(
            r#"{{"type":"{role}","sessionId":"5u","uuid":"{uuid}","timestamp":"{ts}","cwd":"/w","message":{{"role":"{role}","model":"claude-sonnet-4-5","id":"m{uuid}","content":{content}}}}}"#
        )
    };
    let log = [
        line("u1", "2026-01-01T00:00:00Z", "user", r#""fix it \ud83d""#),
        line("a1", "2026-01-01T00:00:01Z", "assistant", r#"[{"type":"text","text":"done"}]"#),
    ]
    .join("\n");
    std::fs::write(dir.join("5u.jsonl"), log + "\n").unwrap();
    let out = store.run(&["import", "--quiet", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = store.sql("SELECT text FROM messages WHERE role = 'user'");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["text"], "fix it \u{fffd}");
}

/// The rows of a JSON Lines corpus written as Parquet (Arrow's schema inference).
fn as_parquet(jsonl: &Path, out: &Path) {
    use datafusion::arrow::json::reader::{infer_json_schema_from_seekable, ReaderBuilder};
    use datafusion::parquet::arrow::ArrowWriter;
    use std::io::{BufReader, Seek};
    let mut file = BufReader::new(std::fs::File::open(jsonl).unwrap());
    let schema = std::sync::Arc::new(infer_json_schema_from_seekable(&mut file, None).unwrap().0);
    file.rewind().unwrap();
    let mut writer = ArrowWriter::try_new(std::fs::File::create(out).unwrap(), schema.clone(), None).unwrap();
    for batch in ReaderBuilder::new(schema).build(file).unwrap() {
        writer.write(&batch.unwrap()).unwrap();
    }
    writer.close().unwrap();
}

#[test]
fn a_parquet_corpus_imports_a_row_per_episode_and_one_without_messages_is_refused_by_its_columns() {
    let store = TestStore::new();
    let dir = store.dir.path().join("corpus");
    std::fs::create_dir_all(&dir).unwrap();
    let source = real("trajectories/swe-smith-trajectories/sample.trajectories.jsonl");
    let rows = std::fs::read_to_string(&source).unwrap().lines().filter(|l| !l.trim().is_empty()).count();
    as_parquet(&source, &dir.join("train-00000-of-00001.parquet"));
    let (code, summary, stderr) = import(&store, std::slice::from_ref(&dir), &[]);
    assert_eq!(code, 0, "{summary}\n{stderr}");
    assert_eq!(tally(&summary)["trajectories"], (rows as u64, rows as u64, 0, 0), "{summary}");
    // The same episodes as the JSON Lines: importing those finds every one present.
    let (code, again, _) = import(&store, &[source], &[]);
    assert_eq!(code, 0);
    assert_eq!(tally(&again)["trajectories"].1, rows as u64, "different sources: stored as episodes of their own");
    let labels = store.sql("SELECT count(DISTINCT episode) AS n, count(*) AS all_ FROM episodes");
    assert_eq!(labels[0]["n"], rows as u64, "the Parquet rows and the JSON Lines rows carry the same run ids");
    // Importing the Parquet again adds nothing.
    let (_, third, _) = import(&store, std::slice::from_ref(&dir), &[]);
    assert_eq!(tally(&third)["trajectories"], (rows as u64, 0, rows as u64, 0), "{third}");

    // A Parquet file of something else: refused, naming its columns; nothing stored.
    let other = store.dir.path().join("scores.parquet");
    as_parquet_of(&other, "{\"task\": \"a\", \"score\": 1}\n");
    let before = store.episode_count();
    let (code, summary, _) = import(&store, &[other], &[]);
    assert_eq!(code, 1, "{summary}");
    let reason = summary["refused"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("no messages column") && reason.contains("`task`, `score`"), "{reason}");
    assert_eq!(store.episode_count(), before);
}

fn as_parquet_of(out: &Path, jsonl: &str) {
    let tmp = out.with_extension("jsonl");
    std::fs::write(&tmp, jsonl).unwrap();
    as_parquet(&tmp, out);
    std::fs::remove_file(tmp).unwrap();
}

#[test]
fn an_opencode_session_that_went_on_supersedes_its_earlier_import_and_auth_json_is_never_read() {
    let store = TestStore::new();
    let data = store.dir.path().join("opencode");
    std::fs::create_dir_all(&data).unwrap();
    copy_tree(&repo_root().join("tests/fixtures/constructed/opencode/share/opencode"), &data);
    let (code, first, stderr) = import(&store, std::slice::from_ref(&data), &[]);
    assert_eq!(code, 0, "{first}\n{stderr}");
    assert_eq!(tally(&first)["opencode"], (1, 1, 0, 0), "{first}");
    let skipped = first["skipped"].as_array().unwrap();
    assert!(skipped.iter().any(|s| s["reason"] == "a credentials file: never opened"), "{first}");
    let old = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();

    // The person asks once more: a user message and its part, written as OpenCode does.
    let (sid, mid) = ("ses_3b791921cffez40vusMKrFSsIn", "msg_c487d4500001UserAgainAaaaa");
    let storage = data.join("storage");
    std::fs::write(
        storage.join("message").join(sid).join(format!("{mid}.json")),
        format!(r#"{{"id":"{mid}","sessionID":"{sid}","role":"user","time":{{"created":1770742700000}},"agent":"build","model":{{"providerID":"anthropic","modelID":"claude-sonnet-4-5"}}}}"#),
    )
    .unwrap();
    let parts = storage.join("part").join(mid);
    std::fs::create_dir_all(&parts).unwrap();
    std::fs::write(
        parts.join("prt_c487d4500001000PartIdXyzAbcdef.json"),
        format!(r#"{{"id":"prt_c487d4500001000PartIdXyzAbcdef","sessionID":"{sid}","messageID":"{mid}","type":"text","text":"Also add a test for negative numbers."}}"#),
    )
    .unwrap();
    let (code, second, stderr) = import(&store, std::slice::from_ref(&data), &[]);
    assert_eq!(code, 0, "{second}\n{stderr}");
    assert_eq!(tally(&second)["opencode"].1, 1, "{second}");
    let current = store.sql("SELECT episode_id, supersedes FROM episodes");
    assert_eq!(current.len(), 1, "{current:?}");
    assert_eq!(current[0]["supersedes"], old.as_str());
    let people = store.sql("SELECT count(*) AS n FROM interventions");
    assert_eq!(people[0]["n"], 1, "the second prompt is the person's");
    // Unchanged: nothing new.
    let (_, third, _) = import(&store, std::slice::from_ref(&data), &[]);
    assert_eq!(tally(&third)["opencode"], (1, 0, 1, 0), "{third}");
}

/// This round's sources: their fixtures (OpenCode's files, Cline / Roo / Kilo tasks,
/// Goose's files, a Terminal-Bench run; `--model` for the logs that name none).
fn new_sources() -> Vec<PathBuf> {
    vec![
        repo_root().join("tests/fixtures/constructed/opencode"),
        repo_root().join("tests/fixtures/constructed/cline"),
        real("cline"),
        repo_root().join("tests/fixtures/constructed/goose"),
        repo_root().join("tests/fixtures/constructed/terminal-bench"),
    ]
}

#[test]
fn the_new_sources_import_once_and_write_the_same_packages_twice() {
    let store = TestStore::new();
    let (code, first, stderr) = import(&store, &new_sources(), &["--model", "m-test"]);
    assert_eq!(code, 0, "{first}\n{stderr}");
    let counts = tally(&first);
    // OpenCode: the storage/ session and the export; Cline: two constructed tasks and
    // the real Roo task; Goose: the legacy file and the export; Terminal-Bench: two trials.
    for (format, n) in [("opencode", 2), ("cline", 3), ("goose", 2), ("terminal-bench", 2)] {
        assert_eq!(counts[format], (n, n, 0, 0), "{format}: {first}");
    }
    let (code, again, _) = import(&store, &new_sources(), &["--model", "m-test"]);
    assert_eq!(code, 0);
    assert!(tally(&again).values().all(|t| t.1 == 0), "re-import adds nothing: {again}");
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes")[0]["n"], 9);

    let (one, two) = (store.dir.path().join("one"), store.dir.path().join("two"));
    for out in [&one, &two] {
        let (code, summary, stderr) =
            import(&store, &new_sources(), &["--model", "m-test", "--out", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{summary}\n{stderr}");
    }
    let (a, b) = (tree(&one), tree(&two));
    assert!(a.len() > 9);
    assert!(a == b, "two --out runs differ");
}
