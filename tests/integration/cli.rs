//! The analyst-facing commands: `metrics`, `sql --file`, SQL from standard input.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::util::*;

fn json_rows(out: &std::process::Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

#[test]
fn metrics_pool_over_the_chosen_keys() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());

    let by_level = json_rows(&store.run(&["metrics", "--format", "json"]));
    assert_eq!(by_level.len(), 4);
    let levels: Vec<&str> = by_level.iter().map(|r| r["harness_level"].as_str().unwrap()).collect();
    assert_eq!(levels, ["H0", "H1", "H2", "H3"], "rows come sorted by the keys");
    // H0..H2 have no interventions trace: m_hir is NULL there, 0 at H3 (empty trace).
    assert_eq!(by_level[0]["m_hir"], Value::Null);
    assert_eq!(by_level[3]["m_hir"], 0.0);

    // Pooled over the whole store: sums of numerators over sums of denominators.
    let pooled = json_rows(&store.run(&["metrics", "--by", "", "--all", "--format", "json"]));
    assert_eq!(pooled.len(), 1);
    assert_eq!(pooled[0]["episodes"], 4);
    assert_eq!(pooled[0]["avs_rate"], 0.25);
    // Requirements: 2 per episode, the 2 of H3 verified: 2/8.
    assert_eq!(pooled[0]["verification_autonomy"], 0.25);
    // Failed observations exist only at H3 (2 of 3 attributed): pooled stays 2/3, where a
    // mean over the four levels' ratios would skip NULLs or count them as 0.
    assert_eq!(pooled[0]["stale_check_rate"], 0.2);
    assert_eq!(pooled[0]["attribution_completeness"], 2.0 / 3.0);
    assert!(pooled[0].get("mean_score").is_some(), "--all prints every column");

    let filtered = json_rows(&store.run(&[
        "metrics",
        "--by",
        "model",
        "--where",
        "harness_level IN ('H2', 'H3')",
        "--format",
        "json",
    ]));
    assert_eq!(filtered[0]["episodes"], 2);
    assert_eq!(filtered[0]["context_use"], Value::Null, "headline columns only");

    let bad = store.run(&["metrics", "--by", "colour"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("cannot group metrics by `colour`"));

    let sql = store.run(&["metrics", "--show-sql", "--by", "task"]);
    let sql = text(&sql.stdout);
    assert!(sql.contains("FROM episode_facts") && sql.contains("GROUP BY \"task\""), "{sql}");

    // With --ci: the per-cluster sums the bootstrap resamples, runnable as printed.
    let ci = store.run(&["metrics", "--ci", "--show-sql", "--by", "model", "--where", "harness_level = 'H3'"]);
    assert!(ci.status.success(), "{}", text(&ci.stderr));
    let ci = text(&ci.stdout);
    assert!(ci.starts_with("-- cell_metrics: sums per entry and task cluster for "), "{ci}");
    assert!(ci.contains("__resample_cluster") && ci.contains("WHERE harness_level = 'H3'"), "{ci}");
    let first = ci.split(";\n").next().unwrap();
    let sums = store.run(&["sql", "--format", "json", "--", first]);
    assert!(sums.status.success(), "{}", text(&sums.stderr));
    let sums: Vec<Value> = serde_json::from_slice(&sums.stdout).unwrap();
    assert_eq!(sums.len(), 1, "one model, one task cluster among the H3 episodes: {sums:?}");
    assert_eq!(sums[0]["episodes"], 1.0);
}

#[test]
fn sql_runs_files_and_standard_input_statement_by_statement() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("q.sql");
    std::fs::write(&file, "-- two statements; the second has a ';' in a string\nSELECT count(*) AS n FROM episodes;\nSELECT 'a;b' AS s;\n").unwrap();
    let out = store.run(&["sql", "--format", "csv", "--file", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "n\n4\ns\na;b\n");

    let mut child =
        store.command().args(["sql", "--format", "csv"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(b"SELECT posture FROM episodes WHERE harness_level = 'H3'").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(text(&out.stdout), "posture\nfailure\n");
}

#[test]
fn csv_writes_nested_columns_as_text() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let out =
        store.run(&["sql", "--format", "csv", "SELECT harness_components FROM episodes WHERE harness_level = 'H1'"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "harness_components\n\"[task_specification, tool_access]\"\n");
}

/// Every column of every table and view can be named bare, as an analyst types it, in a
/// select list after another column, in GROUP BY and in ORDER BY (`cluster` is a
/// keyword to the parser: `crates/sql/src/statement.rs`), and in `--where`.
#[test]
fn every_column_can_be_named_bare() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let columns = store.sql(
        "SELECT table_name, column_name FROM information_schema.columns \
         WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    );
    assert!(columns.len() > 200, "{}", columns.len());
    let mut script = String::new();
    for c in &columns {
        let (table, column) = (c["table_name"].as_str().unwrap(), c["column_name"].as_str().unwrap());
        if table.contains(|ch: char| !ch.is_ascii_lowercase() && ch != '_')
            || column.contains(|ch: char| !ch.is_ascii_lowercase() && !ch.is_ascii_digit() && ch != '_')
        {
            continue;
        }
        script.push_str(&format!(
            "SELECT 1 AS one, {column} FROM {table} LIMIT 1;\n\
             SELECT {column}, count(*) FROM {table} GROUP BY {column} ORDER BY {column} LIMIT 1;\n"
        ));
    }
    let file = store.dir.path().join("bare.sql");
    std::fs::write(&file, script).unwrap();
    let out = store.run(&["sql", "--format", "csv", "--file", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = store.run(&["metrics", "--by", "cluster", "--where", "cluster = 'login-app'", "--format", "json"]);
    assert_eq!(json_rows(&out)[0]["episodes"], 4);
}

/// A statement deep enough to overflow the planner's stack is refused with what to
/// change, never an abort: a 10,000-way UNION ALL, a sum of 200,000 terms, 100,000
/// nested parentheses (each took the process down with SIGABRT before the limits).
/// Statements at the limits still run.
/// Text from packages reaches a terminal escaped: an escape sequence in a task id or an
/// episode name is printed as `\x1b[...`, not sent to the terminal, in `sql` and `ls`
/// tables; CSV and JSON keep the bytes.
#[test]
fn control_characters_in_data_are_escaped_in_tables() {
    let store = TestStore::new();
    let mut files = minimal_package("evil\u{1b}]0;owned\u{7}");
    let manifest = serde_json::json!({
        "format": "episode-package/1", "episode": "evil\u{1b}]0;owned\u{7}",
        "model": {"name": "m1"}, "harness": {"level": "H1"}, "task": {"id": "t\u{1b}[2J"},
    });
    files.insert("manifest.json".into(), manifest.to_string().into_bytes());
    let dir = store.dir.path().join("pkg");
    write_package(&dir, &files);
    assert!(store.ingest(&[&dir]).status.success());
    for args in [vec!["sql", "SELECT episode, task FROM episodes"], vec!["ls"]] {
        let out = store.run(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07), "{args:?}: {}", text(&out.stdout));
        assert!(text(&out.stdout).contains("t\\x1b[2J"), "{args:?}: {}", text(&out.stdout));
    }
    let rows = json_rows(&store.run(&["sql", "--format", "json", "SELECT task FROM episodes"]));
    assert_eq!(rows[0]["task"], "t\u{1b}[2J");
}

#[test]
fn a_sum_past_the_64_bit_range_is_an_error_not_a_wrapped_number() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    // Each term fits in 64 bits; their total does not.
    let out = store.run(&["sql", "SELECT sum(9223372036854775807 - tokens_in) AS s FROM episodes"]);
    assert!(!out.status.success(), "a wrapped sum was printed: {}", text(&out.stdout));
    assert!(text(&out.stderr).contains("sum overflowed the 64-bit integer range"), "{}", text(&out.stderr));
    // The way out the message names gives the exact total.
    let rows = store.sql("SELECT sum(CAST(tokens_in AS DECIMAL(38, 0))) AS s FROM episodes");
    assert!(!rows[0]["s"].is_null(), "{rows:?}");
}

/// The red team's `tokens_in * 2` wrapped to a negative number: `+ - *` on integers
/// are checked too, through every way a statement comes in, and a column keeps the
/// name the user wrote.
#[test]
fn integer_arithmetic_past_the_64_bit_range_is_an_error_not_a_wrapped_number() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let big = "tokens_in * 4611686018427387904 * 4";
    for args in [
        vec!["sql".to_string(), format!("SELECT {big} AS t FROM episodes WHERE tokens_in > 0")],
        vec!["metrics".to_string(), "--where".to_string(), "agent_checks * 4611686018427387904 * 4 > 0".to_string()],
        vec![
            "export".to_string(),
            "--query".to_string(),
            "SELECT 0 - max(tokens_in) - 9223372036854775807 - 9 AS t FROM episodes".to_string(),
            "--out".to_string(),
            store.dir.path().join("wrapped.parquet").display().to_string(),
        ],
    ] {
        let out = store.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!out.status.success(), "{args:?}: a wrapped number was printed: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains("integer arithmetic overflowed"), "{args:?}: {}", text(&out.stderr));
    }
    assert!(!store.dir.path().join("wrapped.parquet").exists(), "a refused export left a file");
    let rows = store.sql("SELECT tokens_in * 2, tokens_in - 1 AS less FROM episodes WHERE tokens_in > 0 LIMIT 1");
    let row = rows[0].as_object().unwrap();
    assert!(row.contains_key("episodes.tokens_in * Int64(2)") && row.contains_key("less"), "{row:?}");
    assert_eq!(row["episodes.tokens_in * Int64(2)"].as_i64().unwrap(), 2 * (row["less"].as_i64().unwrap() + 1));
}

/// An empty result prints its header and says "(0 rows)" (it printed `++`); CSV gives
/// its header line, JSON `[]`.
#[test]
fn an_empty_result_prints_its_header_and_says_zero_rows() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let sql = "SELECT task, model FROM episodes WHERE model = 'no such model'";
    let out = store.run(&["sql", sql]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("| task | model |") && shown.trim_end().ends_with("(0 rows)"), "{shown}");
    assert_eq!(text(&store.run(&["sql", "--format", "csv", sql]).stdout).trim(), "task,model");
    assert_eq!(text(&store.run(&["sql", "--format", "json", sql]).stdout).trim(), "[]");
    let out = store.run(&["metrics", "--where", "model = 'no such model'"]);
    assert!(out.status.success() && text(&out.stdout).contains("| model ") && text(&out.stdout).contains("(0 rows)"));
}

/// Logs given to `ingest` and packages given to `import` name the command that reads
/// them, exit non-zero and create no store; so does a folder holding neither.
#[test]
fn the_wrong_command_for_what_was_given_says_which_and_creates_nothing() {
    let store = TestStore::new();
    let logs = repo_root().join("tests/fixtures/real/claude-code");
    let out = store.run(&["ingest", logs.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("holds agent logs (claude-code") && text(&out.stderr).contains("epistore import")
    );
    assert!(!store.path().exists(), "a store was created");
    let out = store.run(&["import", dataset().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("holds episode packages (4 found)") && text(&out.stderr).contains("epistore ingest")
    );
    assert!(!store.path().exists(), "a store was created");
    let empty = tempfile::tempdir().unwrap();
    let out = store.run(&["ingest", empty.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no episode package under"), "{}", text(&out.stderr));
    assert!(!store.path().exists(), "a store was created");
}

/// A `--where` that does not parse is reported in the user's own text (it was "Line:
/// 11, Column: 12" of generated SQL), with a caret, on every command that takes one,
/// and a statement smuggled into it does not parse as one condition.
#[test]
fn a_bad_where_is_reported_in_the_users_own_text() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    for args in [
        vec!["metrics", "--where", "model = = 'x'"],
        vec!["search", "password", "--where", "model = = 'x'"],
        vec!["leaderboard", "--metric", "avs_rate", "--where", "model = = 'x'"],
    ] {
        let out = store.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains("Column: 9") && err.contains("  model = = 'x'\n          ^"), "{args:?}: {err}");
        assert!(!err.contains("Line: 11"), "{err}");
    }
    let out = store.run(&["metrics", "--where", "model = 'x') UNION SELECT (1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Expected: the end of the condition"), "{}", text(&out.stderr));
}

/// `metrics` printed 17-digit floats: a table rounds to four significant digits, CSV
/// and JSON keep full precision. The shell's commands (`\d`, `\d NAME`) work one-shot,
/// an unknown one says how to list them, and `-x` prints a field per line.
#[test]
fn tables_round_floats_and_the_shell_commands_answer() {
    let store = TestStore::new();
    let pop = store.synth(60, 3);
    assert!(store.ingest(&[&pop]).status.success());
    let table = text(&store.run(&["metrics", "--by", ""]).stdout);
    let long_float = regex_like_long_float(&table);
    assert!(long_float.is_none(), "a float past four significant digits: {long_float:?}\n{table}");
    let csv = text(&store.run(&["metrics", "--by", "", "--format", "csv"]).stdout);
    assert!(regex_like_long_float(&csv).is_some(), "csv lost precision: {csv}");

    let out = store.run(&["sql", "\\d"]);
    assert!(out.status.success() && text(&out.stdout).contains("| episodes ") && text(&out.stdout).contains("view"));
    let out = store.run(&["sql", "\\d checks"]);
    assert!(
        text(&out.stdout).contains("| bound_revision ") || text(&out.stdout).contains("| result "),
        "{}",
        text(&out.stdout)
    );
    let out = store.run(&["sql", "\\d no_such_table"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no table or view named `no_such_table`"));
    let out = store.run(&["sql", ".tables"]);
    assert!(out.status.success() && text(&out.stdout).contains("| checks "));
    let out = store.run(&["sql", "\\zz"]);
    assert!(text(&out.stderr).contains("unknown command \\zz: \\? lists the commands"));
    let out = store.run(&["sql", "-x", "SELECT model, episodes FROM cell_metrics ORDER BY model LIMIT 1"]);
    let shown = text(&out.stdout);
    assert!(shown.starts_with("-[ RECORD 1 ]-\nmodel    | ") && shown.contains("\nepisodes | "), "{shown}");
    let wide = text(&store.run(&["metrics", "-x", "--by", ""]).stdout);
    assert!(wide.starts_with("-[ RECORD 1 ]-\n") && wide.contains("\navs_rate "), "{wide}");
}

/// A number with more than four significant digits after its decimal point, if any.
fn regex_like_long_float(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|w| w.split_once('.').is_some_and(|(_, frac)| frac.len() > 8))
        .map(str::to_string)
}

/// Every log an import finds is exactly one of imported, already present, covered or
/// refused (aider: found 63 = 44 imported + 20 refused did not add up: a refusal made
/// while planning was not counted as found), and refusals for one reason are grouped.
#[test]
fn import_summaries_add_up_and_group_refusals() {
    let store = TestStore::new();
    let real = repo_root().join("tests/fixtures/real");
    let paths: Vec<String> =
        ["aider", "openhands", "swe-agent"].iter().map(|d| real.join(d).display().to_string()).collect();
    let mut args = vec!["import", "--summary-format", "json"];
    args.extend(paths.iter().map(String::as_str));
    let out = store.run(&args);
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let formats = summary["formats"].as_array().unwrap_or_else(|| panic!("{summary}"));
    assert!(formats.len() >= 3, "{summary}");
    for f in formats {
        let n = |k: &str| f[k].as_u64().unwrap();
        assert_eq!(n("found"), n("imported") + n("already_present") + n("covered") + n("refused"), "{f}");
    }
    let mut args = vec!["import"];
    args.extend(paths.iter().map(String::as_str));
    let err = text(&TestStore::new().run(&args).stderr);
    assert!(err.contains("refused: 30 runs for one reason, the first: "), "{err}");
    assert!(err.lines().filter(|l| l.starts_with("refused:")).count() < 30, "{err}");
}

/// `metrics` on a store of imported logs shows what an analyst asks first (the `runs`
/// preset) and says it picked it; every value is the plain aggregate of the tables
/// (checked here against SQL written independently); a store of packages keeps the
/// ladder; a mean over nothing recorded is NULL.
#[test]
fn metrics_picks_the_runs_preset_for_imported_logs() {
    let store = TestStore::new();
    let real = repo_root().join("tests/fixtures/real");
    let out = store.run(&[
        "import",
        "--model",
        "m",
        real.join("claude-code").to_str().unwrap(),
        real.join("swe-agent").to_str().unwrap(),
    ]);
    assert!(store.path().exists(), "{}", text(&out.stderr));
    let out = store.run(&["metrics", "--by", "source_format", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("the runs preset"), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let expected = store.sql(
        "SELECT source_format, count(*) AS runs, avg(n_tools) AS tools, sum(coalesce(tokens_in, 0)) AS tin, \
                count(tokens_in) AS tin_known, count(wall_ms) AS timed \
         FROM episodes GROUP BY source_format ORDER BY source_format",
    );
    assert_eq!(rows.len(), expected.len());
    for (row, e) in rows.iter().zip(&expected) {
        assert_eq!(row["source_format"], e["source_format"]);
        assert_eq!(row["runs"], e["runs"]);
        let close = |a: &Value, b: f64| (a.as_f64().unwrap() - b).abs() < 1e-9;
        assert!(close(&row["tool_calls"], e["tools"].as_f64().unwrap()), "{row} {e}");
        if e["tin_known"].as_u64().unwrap() > 0 {
            let mean = e["tin"].as_f64().unwrap() / e["tin_known"].as_f64().unwrap();
            assert!(close(&row["tokens_in"], mean), "{row} {e}");
        }
        if e["timed"] == 0 {
            assert!(row["seconds"].is_null(), "no wall time recorded, yet {}", row["seconds"]);
        }
        let shares: f64 =
            ["current", "stale", "failure", "gap", "unknown"].iter().map(|p| row[p].as_f64().unwrap()).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{row}");
        assert!(row["correct_rate"].is_null() && row["correct_known"] == 0, "no verdict in these logs: {row}");
    }
    let edits = store.sql(
        "SELECT e.source_format, count(a.seq) AS edits, count(DISTINCT e.episode_id) AS runs FROM episodes e \
         LEFT JOIN actions a ON a.episode_id = e.episode_id AND a.mutates AND a.ok \
         WHERE e.has_actions GROUP BY e.source_format ORDER BY e.source_format",
    );
    for (row, e) in rows.iter().zip(&edits) {
        let mean = e["edits"].as_f64().unwrap() / e["runs"].as_f64().unwrap();
        assert!((row["edits"].as_f64().unwrap() - mean).abs() < 1e-9, "{row} {e}");
    }
    let out = store.run(&["metrics", "--preset", "ladder", "--by", ""]);
    assert!(out.status.success() && text(&out.stdout).contains("avs_rate"));
    let out = store.run(&["metrics", "--all"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--preset ladder"));

    let packages = TestStore::new();
    assert!(packages.ingest(&[&dataset()]).status.success());
    let out = packages.run(&["metrics", "--by", ""]);
    assert!(text(&out.stdout).contains("avs_rate") && !text(&out.stderr).contains("runs preset"));
}
