//! The run's content end to end (package revision 1.2, docs/format.md §9): imported
//! logs give messages, tool output and diffs in SQL, full-text search finds them, the
//! search index is derived data (rebuilt when deleted, a damaged one caught by
//! `verify` and never read), secrets in the content are gone with `--redact`, and a
//! store of revision 1.1 imports gets the content by `--reimport` without counting a
//! run twice.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::util::{repo_root, text, walk, TestStore};

fn agent_logs() -> PathBuf {
    repo_root().join("datasets/agent-logs")
}

fn import(store: &TestStore, args: &[&str]) -> Value {
    let mut all = vec!["import", "--quiet", "--summary-format", "json"];
    all.extend_from_slice(args);
    let out = store.run(&all);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// A count of an import summary, over its source formats.
fn total(summary: &Value, key: &str) -> u64 {
    summary["formats"].as_array().unwrap().iter().map(|f| f[key].as_u64().unwrap()).sum()
}

/// `search --format json` rows, asserting success.
fn search(store: &TestStore, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search", "--format", "json"];
    all.extend_from_slice(args);
    let out = store.run(&all);
    assert!(out.status.success(), "search {args:?}: {}", text(&out.stderr));
    if out.stdout.is_empty() {
        return Vec::new();
    }
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(rows) => rows,
        other => panic!("not an array: {other}"),
    }
}

fn imported() -> TestStore {
    let store = TestStore::new();
    let logs = agent_logs();
    import(&store, &[logs.to_str().unwrap()]);
    store
}

#[test]
fn imported_logs_give_their_messages_outputs_and_prompts_in_sql() {
    let store = imported();
    // Every bundled format with a conversation records one (revision 1.2).
    let rows = store.sql(
        "SELECT e.source_format, e.has_messages, count(m.seq) AS n, \
                count(e.task_prompt) AS prompts \
         FROM episodes e LEFT JOIN messages m USING (episode_id) \
         GROUP BY e.source_format, e.has_messages ORDER BY 1",
    );
    assert_eq!(rows.len(), 5, "{rows:?}");
    for row in &rows {
        assert_eq!(row["has_messages"], true, "{row}");
        assert!(row["n"].as_i64().unwrap() > 0, "{row}");
        assert!(row["prompts"].as_i64().unwrap() > 0, "{row}");
    }
    // Every agent tools record with an output file has its text, and every call and
    // result message names a tools record that exists.
    let outputs = store.sql(
        "SELECT count(*) AS n, count(output_text) AS texts, sum(CASE WHEN output_bytes >= 0 THEN 1 ELSE 0 END) AS sized \
         FROM tools WHERE output IS NOT NULL",
    );
    assert!(outputs[0]["n"].as_i64().unwrap() > 10, "{outputs:?}");
    assert_eq!(outputs[0]["texts"], outputs[0]["n"]);
    assert_eq!(outputs[0]["sized"], outputs[0]["n"]);
    let orphans = store.sql(
        "SELECT count(*) AS n FROM messages m WHERE m.tool_seq IS NOT NULL AND NOT EXISTS \
         (SELECT 1 FROM tools t WHERE t.episode_id = m.episode_id AND t.seq = m.tool_seq)",
    );
    assert_eq!(orphans[0]["n"], 0);
    // JSON in SQL: a Bash call's command from its arguments equals its tools record's.
    let commands = store.sql(
        "SELECT json_get_str(m.arguments, 'command') AS from_arguments, t.command \
         FROM messages m JOIN tools t ON t.episode_id = m.episode_id AND t.seq = m.tool_seq \
         WHERE m.role = 'assistant' AND m.tool = 'Bash' LIMIT 3",
    );
    assert!(!commands.is_empty());
    for c in &commands {
        assert_eq!(c["from_arguments"], c["command"], "{c}");
    }
}

#[test]
fn search_answers_phrases_booleans_fields_and_where_and_matches_sql() {
    let store = imported();
    // A word of every bundled run: hits best first, the word marked in each snippet.
    let hits = search(&store, &["test", "--limit", "50"]);
    assert!(hits.len() > 20, "{hits:?}");
    for h in &hits {
        assert!(h["snippet"].as_str().unwrap().to_lowercase().contains("«test"), "{h}");
        assert!(h["score"].as_f64().unwrap() > 0.0);
    }
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first: {scores:?}");
    let formats = store.sql(
        "SELECT count(DISTINCT e.source_format) AS n FROM search('test', 1000) s JOIN episodes e USING (episode_id)",
    );
    assert_eq!(formats[0]["n"], 5, "every bundled format says it");

    // The SQL table function gives the same rows.
    assert_eq!(store.sql("SELECT * FROM search('test', 50)"), hits);

    // The question of the issue: why did the Inspect sample fail? Its tool said so.
    let why = search(&store, &["\"No module named pytest\""]);
    assert_eq!(why.len(), 1, "{why:?}");
    assert_eq!((why[0]["kind"].as_str(), why[0]["tool"].as_str()), (Some("output"), Some("bash")));
    let row = store.sql(&format!(
        "SELECT e.source_format, t.command FROM episodes e JOIN tools t USING (episode_id) \
         WHERE e.episode_id = '{}' AND t.seq = {}",
        why[0]["episode_id"].as_str().unwrap(),
        why[0]["seq"]
    ));
    assert_eq!(row[0]["source_format"], "inspect");
    assert!(row[0]["command"].as_str().unwrap().contains("pytest"), "{row:?}");

    // Field filters keep their kind; a phrase's hits are hits of its words.
    let outputs = search(&store, &["test AND kind:output", "--limit", "1000"]);
    assert!(!outputs.is_empty() && outputs.iter().all(|h| h["kind"] == "output"), "{outputs:?}");
    let diffs = search(&store, &["kind:diff", "--limit", "1000"]);
    let with_diff = store.sql("SELECT count(*) AS n FROM actions WHERE diff IS NOT NULL AND diff <> ''");
    assert_eq!(diffs.len() as u64, with_diff[0]["n"].as_u64().unwrap());
    let key =
        |h: &Value| (h["episode_id"].as_str().unwrap().to_string(), h["seq"].as_i64().unwrap(), h["kind"].clone());
    let words = search(&store, &["No module named", "--limit", "1000"]);
    let phrase = search(&store, &["\"No module named\"", "--limit", "1000"]);
    assert!(!phrase.is_empty() && phrase.len() <= words.len());
    for h in &phrase {
        assert!(words.iter().any(|w| key(w) == key(h)), "a phrase hit is a hit of its words: {h}");
    }
    let either = search(&store, &["pytest OR test", "--limit", "1000"]);
    let only = search(&store, &["test NOT pytest", "--limit", "1000"]);
    let all = search(&store, &["test", "--limit", "1000"]);
    assert!(either.len() >= all.len() && only.len() < all.len(), "{} {} {}", either.len(), all.len(), only.len());
    assert!(only.iter().all(|h| !h["snippet"].as_str().unwrap().to_lowercase().contains("pytest")));

    // --where keeps the episodes it names.
    let codex = search(&store, &["test", "--limit", "1000", "--where", "source_format = 'codex'"]);
    let ids = store.sql("SELECT episode_id FROM episodes WHERE source_format = 'codex'");
    assert!(!codex.is_empty() && codex.len() < all.len());
    for h in &codex {
        assert!(ids.iter().any(|r| r["episode_id"] == h["episode_id"]), "{h}");
    }
    // Hits join back to their records.
    let joined = store.sql(
        "SELECT count(*) AS n FROM search('test', 1000) s JOIN tools t ON t.episode_id = s.episode_id AND t.seq = s.seq \
         WHERE s.kind = 'output'",
    );
    assert_eq!(joined[0]["n"].as_u64().unwrap() as usize, all.iter().filter(|h| h["kind"] == "output").count());

    // No hit: empty, exit 0.
    assert!(search(&store, &["zqxjkvbnmwpt"]).is_empty());
}

#[test]
fn hostile_queries_are_refused_or_answered_never_a_crash() {
    let store = imported();
    let long = "a ".repeat(5_000);
    let deep = format!("{}passed{}", "(".repeat(40), ")".repeat(40));
    for query in [
        "\"",
        "\"unbalanced",
        "(((",
        ")",
        "AND",
        "OR OR",
        "-",
        ":",
        "*",
        "role:",
        "nosuchfield:x",
        "\u{1}\u{7f}",
        &long,
        &deep,
    ] {
        let out = store.run(&["search", query]);
        let code = out.status.code();
        assert!(code == Some(0) || code == Some(1) || code == Some(2), "{query:.40}: {code:?} {}", text(&out.stderr));
        if code != Some(0) {
            assert!(text(&out.stderr).contains("search"), "{query:.40}: {}", text(&out.stderr));
        }
    }
    let out = store.run(&["search", &long]);
    assert!(!out.status.success() && text(&out.stderr).contains("4096"), "{}", text(&out.stderr));
    // Through SQL too.
    let out = store.run(&["sql", "SELECT * FROM search('(((')"]);
    assert!(!out.status.success() && !text(&out.stderr).contains("panicked"), "{}", text(&out.stderr));
}

fn index_files(store: &TestStore) -> Vec<PathBuf> {
    let root = store.path().join("columnar").join(epistore_sql::columnar::schema_dir());
    let mut out = Vec::new();
    for seg in std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        let index = seg.join("search");
        if index.is_dir() {
            for f in std::fs::read_dir(&index).unwrap().map(|e| e.unwrap().path()) {
                if f.extension().is_some_and(|e| e == "idx" || e == "pos" || e == "term" || e == "store") {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_index_is_rebuilt_when_deleted_and_a_damaged_one_is_caught_and_never_read() {
    let store = imported();
    let before = search(&store, &["test", "--limit", "1000"]);
    assert!(!before.is_empty());

    // Deleted: built again from the store, the same answers.
    std::fs::remove_dir_all(store.path().join("columnar")).unwrap();
    assert_eq!(search(&store, &["test", "--limit", "1000"]), before);

    // Damaged in place: verify names it; the next session discards and rebuilds it.
    let files = index_files(&store);
    assert!(!files.is_empty());
    let victim = files.iter().max_by_key(|f| std::fs::metadata(f).unwrap().len()).unwrap();
    let mut bytes = std::fs::read(victim).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(victim, &bytes).unwrap();
    let (ok, report) = store.verify();
    assert!(!ok, "{report}");
    assert!(report.to_string().contains("search"), "{report}");
    assert_eq!(search(&store, &["test", "--limit", "1000"]), before);
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
}

const ANTHROPIC: &str = concat!(
    "sk-ant-api03-",
    "Zx8uQ4nVw2LhT9rKp3mYbE6cJdGf1aS7oNqRtUvWxYz0AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdEFGH",
    "-AA"
);
const AWS_ID: &str = concat!("AKIA", "UJZDEGXDNCF32EPF");

/// A Claude Code stream-json run whose tool printed an AWS key id and whose person
/// pasted an Anthropic key.
fn secret_log(dir: &Path) -> PathBuf {
    let sid = "99999999-8888-7777-6666-555555555555";
    let lines = [
        json!({"type": "system", "subtype": "init", "session_id": sid, "cwd": "/srv/app", "model": "claude-sonnet-4-5", "claude_code_version": "2.1.100"}),
        json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:00Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": "Deploy the app."}}),
        json!({"type": "assistant", "session_id": sid, "timestamp": "2026-01-01T10:00:01Z", "parent_tool_use_id": null,
            "message": {"id": "m1", "model": "claude-sonnet-4-5", "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "./deploy.sh"}}]}}),
        json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:02Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": false,
            "content": format!("deployed with key id {AWS_ID}")}]}}),
        json!({"type": "user", "session_id": sid, "timestamp": "2026-01-01T10:00:03Z", "parent_tool_use_id": null,
            "message": {"role": "user", "content": format!("use ANTHROPIC_API_KEY={ANTHROPIC} for the next step")}}),
        json!({"type": "assistant", "session_id": sid, "timestamp": "2026-01-01T10:00:04Z", "parent_tool_use_id": null,
            "message": {"id": "m2", "model": "claude-sonnet-4-5", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}}),
    ];
    let path = dir.join("session.jsonl");
    std::fs::write(&path, lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect::<String>()).unwrap();
    path
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn secrets_in_tool_output_and_messages_are_found_and_with_redact_gone_everywhere() {
    for redact in [false, true] {
        let store = TestStore::new();
        let log = secret_log(store.dir.path());
        let mut args = vec![log.to_str().unwrap()];
        if redact {
            args.push("--redact");
        }
        let summary = import(&store, &args);
        let found = summary.to_string();
        assert!(found.contains("aws-access-key-id") && found.contains("anthropic-key"), "{summary}");

        // The output and the message are in the store as content.
        let output = store.sql("SELECT output_text FROM tools WHERE tool = 'Bash'");
        let said = store.sql("SELECT text FROM messages WHERE role = 'user' AND text LIKE 'use ANTHROPIC%'");
        assert_eq!((output.len(), said.len()), (1, 1));
        let (output, said) = (output[0]["output_text"].as_str().unwrap(), said[0]["text"].as_str().unwrap());
        assert_eq!(output.contains(AWS_ID), !redact, "{output}");
        assert_eq!(said.contains(ANTHROPIC), !redact, "{said}");

        // Search finds a kept key and never a redacted one.
        let hits = search(&store, &[AWS_ID]);
        assert_eq!(hits.is_empty(), redact, "{hits:?}");

        // Every exported byte: the package and a Parquet export of every table.
        let id = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();
        let pkg = store.dir.path().join("pkg");
        let out = store.run(&["export-package", &id, pkg.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        // Every base table as JSON Lines (uncompressed text, so a key would show).
        let export = store.dir.path().join("export");
        store.export_tables_jsonl(&export);
        let exported: Vec<u8> = walk(&export).iter().flat_map(|f| std::fs::read(f).unwrap()).collect();
        assert_eq!(contains(&exported, AWS_ID), !redact, "the tool output is exported as text");
        for file in walk(&pkg).into_iter().chain(walk(&export)) {
            let bytes = std::fs::read(&file).unwrap();
            if redact {
                for secret in [AWS_ID, ANTHROPIC] {
                    assert!(!contains(&bytes, secret), "{secret} left in {}", file.display());
                }
            }
        }
    }
}

#[test]
fn reimporting_revision_1_1_imports_supersedes_them_and_counts_each_run_once() {
    // The format-3 fixture holds the bundled logs imported by the last 1.1 importer.
    let store = TestStore::new();
    std::fs::create_dir_all(store.path()).unwrap();
    std::fs::copy(repo_root().join("tests/fixtures/store-v3/epistore.redb"), store.path().join("epistore.redb"))
        .unwrap();
    assert!(store.run(&["migrate", "--quiet"]).status.success());
    let logs = agent_logs();
    let before = store.sql("SELECT count(*) AS n FROM episodes WHERE source_format IS NOT NULL")[0]["n"].clone();
    assert_eq!(before, 5);
    assert_eq!(store.sql("SELECT count(*) AS n FROM messages")[0]["n"], 0, "1.1 imports hold no messages");

    // The same logs again: already present, nothing added.
    let again = import(&store, &[logs.to_str().unwrap()]);
    assert_eq!((total(&again, "imported"), total(&again, "already_present")), (0, 5), "{again}");

    // --reimport: five new 1.2 episodes, each superseding its 1.1 import.
    let re = import(&store, &["--reimport", logs.to_str().unwrap()]);
    assert_eq!((total(&re, "imported"), total(&re, "superseding")), (5, 5), "{re}");
    assert_eq!(store.sql("SELECT count(*) AS n FROM episodes WHERE source_format IS NOT NULL")[0]["n"], 5);
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes WHERE source_format IS NOT NULL")[0]["n"], 10);
    let fresh = store.sql(
        "SELECT count(*) AS n FROM episodes WHERE source_format IS NOT NULL AND has_messages AND supersedes IS NOT NULL",
    );
    assert_eq!(fresh[0]["n"], 5);
    assert!(store.sql("SELECT count(*) AS n FROM messages")[0]["n"].as_i64().unwrap() > 0);
}
