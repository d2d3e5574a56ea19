//! The secret scan against a corpus of realistic secrets in every place a log carries
//! them (issue 31, item 2): a person's and the agent's messages, commands, tool output,
//! a file read with numbered lines, files written and edited, a file name, and a git
//! remote that becomes the episode's cluster. Without `--redact` the import summary
//! counts every one; with it, none can be found in anything the store writes: the
//! package, every table exported, full-text search, the published site with sources.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util::{text, walk, TestStore};

// Split with `concat!` so that this file carries no token a push-protection scanner
// would stop.
const PG_PASSWORD: &str = concat!("Tr0ub4dor", "X3zq");
const REMOTE_TOKEN: &str = concat!("gl9Xk2mQ7v", "R4tW8zL3pN");
const CODEX_REMOTE_TOKEN: &str = concat!("c0dexRem0te", "Tok3nQ8");
const AWS_SECRET: &str = concat!("2hpChYgCfrL1spNxnyVm", "ihA+2O76UMFxFkM+R5Kj");
const GLPAT: &str = concat!("glpat", "-x9Kq2vBz7RtWm4Np8Ls3");
const GHP: &str = concat!("ghp", "_hGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rES");
const OPENAI: &str = concat!("sk-", "fZ8UzDzV8fUkkibjL5DZT3BlbkFJPjN0MEQ7wjJJibaZUPgH");
const SLACK: &str = concat!("xox", "b-894811311440-2426462889751-rdZSlB5er8bOfZqfM2oeq3hD");
/// Lines of a made-up key body: none may survive anywhere.
const KEY_LINES: [&str; 3] = [
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
];

fn all_secrets() -> Vec<&'static str> {
    let mut all = vec![PG_PASSWORD, REMOTE_TOKEN, CODEX_REMOTE_TOKEN, AWS_SECRET, GLPAT, GHP, OPENAI, SLACK];
    all.extend(KEY_LINES);
    all
}

/// A Claude Code session carrying each secret in a different place.
fn claude_session(dir: &Path) -> PathBuf {
    let sid = "5ec2e75e-0000-4000-8000-000000000031";
    let at = |s: u32| format!("2026-03-01T10:00:{s:02}Z");
    let user = |s: u32, content: Value| {
        json!({"type": "user", "sessionId": sid, "uuid": format!("u{s}"), "timestamp": at(s), "cwd": "/srv/app",
               "message": {"role": "user", "content": content}})
    };
    let assistant = |s: u32, content: Value| {
        json!({"type": "assistant", "sessionId": sid, "uuid": format!("a{s}"), "timestamp": at(s), "cwd": "/srv/app",
               "message": {"id": format!("m{s}"), "model": "claude-sonnet-4-5", "role": "assistant", "content": content}})
    };
    let call = |s: u32, id: &str, tool: &str, input: Value| {
        assistant(s, json!([{"type": "tool_use", "id": id, "name": tool, "input": input}]))
    };
    let result = |s: u32, id: &str, output: String| {
        user(s, json!([{"type": "tool_result", "tool_use_id": id, "is_error": false, "content": output}]))
    };
    let pem: Vec<String> = std::iter::once(concat!("-----BEGIN RSA ", "PRIVATE KEY-----"))
        .chain(KEY_LINES)
        .chain(std::iter::once(concat!("-----END RSA ", "PRIVATE KEY-----")))
        .enumerate()
        .map(|(i, l)| format!("{:>6}\u{2192}{l}", i + 1))
        .collect();
    let lines = [
        user(1, json!(format!("The database is postgres://app:{PG_PASSWORD}@db.internal:5432/app; fix the deploy."))),
        assistant(
            2,
            json!([{"type": "text", "text": format!("I will use the CI token {GLPAT} to read the pipeline.")}]),
        ),
        call(3, "t1", "Bash", json!({"command": format!("aws configure set aws_secret_access_key {AWS_SECRET}")})),
        result(4, "t1", String::new()),
        call(5, "t2", "Bash", json!({"command": "git remote -v"})),
        result(6, "t2", format!("origin\thttps://oauth2:{REMOTE_TOKEN}@gitlab.com/acme/app.git (fetch)")),
        call(7, "t3", "Read", json!({"file_path": "/home/dev/.ssh/id_rsa"})),
        result(8, "t3", pem.join("\n")),
        call(9, "t4", "Write", json!({"file_path": "/srv/app/.env", "content": format!("GITHUB_TOKEN={GHP}\n")})),
        result(10, "t4", "File created successfully at: /srv/app/.env".into()),
        call(
            11,
            "t5",
            "Edit",
            json!({"file_path": "/srv/app/config.py", "old_string": "api_key = None", "new_string": format!("api_key = \"{OPENAI}\"")}),
        ),
        result(12, "t5", "The file /srv/app/config.py has been updated.".into()),
        call(13, "t6", "Read", json!({"file_path": format!("/tmp/{SLACK}/notes.txt")})),
        result(14, "t6", "     1\u{2192}nothing here".into()),
        assistant(15, json!([{"type": "text", "text": "Deployed."}])),
    ];
    let dir = dir.join("projects/-srv-app");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{sid}.jsonl"));
    std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    path
}

/// A Codex rollout whose git remote carries a token: the remote names the cluster.
fn codex_rollout(dir: &Path) -> PathBuf {
    let at = |s: u32| format!("2026-03-01T11:00:{s:02}.000Z");
    let line = |s: u32, ty: &str, payload: Value| json!({"timestamp": at(s), "type": ty, "payload": payload});
    let remote = format!("https://oauth2:{CODEX_REMOTE_TOKEN}@gitlab.com/acme/app.git");
    let lines = [
        line(
            0,
            "session_meta",
            json!({"id": "0199a213-81c0-7800-8aa1-000000000031", "timestamp": at(0), "cwd": "/work/app",
            "originator": "codex_cli_rs", "cli_version": "0.46.0", "source": "cli", "model_provider": "openai",
            "git": {"commit_hash": "9f1c2e", "branch": "main", "repository_url": remote}}),
        ),
        line(1, "turn_context", json!({"cwd": "/work/app", "approval_policy": "on-request", "model": "gpt-5-codex"})),
        line(2, "event_msg", json!({"type": "user_message", "message": "Run the tests", "images": []})),
        line(
            3,
            "response_item",
            json!({"type": "function_call", "name": "shell_command", "call_id": "c1",
            "arguments": json!({"command": "npm test", "workdir": "/work/app"}).to_string()}),
        ),
        line(
            4,
            "response_item",
            json!({"type": "function_call_output", "call_id": "c1", "output": "Exit code: 0\nOutput:\nok\n"}),
        ),
        line(
            5,
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}),
        ),
    ];
    let dir = dir.join("sessions/2026/03/01");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rollout-2026-03-01T11-00-00-0199a213-81c0-7800-8aa1-000000000031.jsonl");
    std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    path
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn import(store: &TestStore, paths: &[&Path], redact: bool) -> Value {
    let mut args = vec!["import", "--quiet", "--summary-format", "json"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    if redact {
        args.push("--redact");
    }
    let out = store.run(&args);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// Everything the store hands out: each episode's package, every table as JSON Lines,
/// the published board with episode pages and source logs.
fn everything_written(store: &TestStore) -> Vec<(PathBuf, Vec<u8>)> {
    let out_dir = store.dir.path().join("out");
    let ids: Vec<String> = store
        .sql("SELECT episode_id FROM episodes")
        .iter()
        .map(|r| r["episode_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    for id in &ids {
        let pkg = out_dir.join("packages").join(&id[..12]);
        let out = store.run(&["export-package", id, pkg.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    store.export_tables_jsonl(&out_dir.join("tables"));
    let site = out_dir.join("site");
    let out = store.run(&[
        "leaderboard",
        "--metric",
        "sound_completion",
        "--format",
        "html",
        "--out",
        site.to_str().unwrap(),
        "--with-episodes",
        "--with-sources",
        "--replicates",
        "50",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    walk(&out_dir).into_iter().map(|f| (f.clone(), std::fs::read(&f).unwrap())).collect()
}

#[test]
fn every_secret_is_counted_and_with_redact_found_nowhere_the_store_writes() {
    for redact in [false, true] {
        let store = TestStore::new();
        let logs = store.dir.path().join("logs");
        let (claude, codex) = (claude_session(&logs), codex_rollout(&logs));
        let summary = import(&store, &[&claude, &codex], redact);

        // The summary names every kind of secret it found, with or without --redact.
        let said = summary.to_string();
        for pattern in [
            "url-password",
            "aws-secret-access-key",
            "gitlab-token",
            "private-key",
            "github-token",
            "openai-key",
            "slack-token",
        ] {
            assert!(said.contains(pattern), "redact={redact}: {pattern} not reported in {summary}");
        }

        // The cluster never carries the remote's credentials, --redact or not.
        let clusters = store.sql("SELECT \"cluster\" FROM episodes WHERE source_format = 'codex'");
        assert_eq!(clusters[0]["cluster"], "https://gitlab.com/acme/app.git", "{clusters:?}");

        let written = everything_written(&store);
        let all: Vec<u8> = written.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        if !redact {
            // Kept where the run showed them (the person's words, the output).
            for secret in [PG_PASSWORD, REMOTE_TOKEN, AWS_SECRET, GLPAT, KEY_LINES[1]] {
                assert!(contains(&all, secret), "{secret} should be kept without --redact");
            }
            assert!(!search_hits(&store, GLPAT).is_empty());
            continue;
        }
        for (path, bytes) in &written {
            for secret in all_secrets() {
                assert!(!contains(bytes, secret), "{secret} left in {}", path.display());
            }
        }
        for secret in all_secrets() {
            let hits = search_hits(&store, secret);
            assert!(hits.is_empty(), "search finds {secret}: {hits:?}");
        }
        // What was replaced says what it was.
        assert!(contains(&all, "[REDACTED:url-password]") && contains(&all, "[REDACTED:private-key]"));
    }
}

fn search_hits(store: &TestStore, secret: &str) -> Vec<Value> {
    let phrase = format!("\"{}\"", secret.replace('"', ""));
    let out = store.run(&["search", "--format", "json", &phrase]);
    assert!(out.status.success(), "search {phrase}: {}", text(&out.stderr));
    if out.stdout.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}
