//! `epistore mcp` end to end with a client from the official SDK (rmcp) over stdio:
//! the tools are listed, a query is answered as `epistore sql` answers it, a write is
//! refused, and results too long in rows or bytes come back cut with a note.

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::util::{dataset, text, TestStore, BIN};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

async fn connect(store: &TestStore, extra: &[&str]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(BIN);
    command.arg("--store").arg(store.path()).arg("mcp").args(extra).env_remove("EPISTORE_STORE");
    ().serve(TokioChildProcess::new(command).unwrap()).await.expect("the server initialises")
}

/// Calls `tool` with `arguments`: (is_error, the text answered).
async fn call(client: &RunningService<RoleClient, ()>, tool: &'static str, arguments: Value) -> (bool, String) {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    let value = serde_json::to_value(&result).unwrap();
    let text = value["content"][0]["text"].as_str().unwrap_or_default().to_string();
    (value["isError"] == json!(true), text)
}

#[test]
fn an_agent_lists_tools_queries_and_is_refused_writes_and_floods() {
    let store = TestStore::synthetic(40, 7);
    assert!(store.ingest(&[&dataset()]).status.success());
    let h3 = store.h3_episode();
    let out = store.run(&["annotate", &h3, "--label", "env failure", "--note", "docker pull timed out"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    runtime().block_on(async {
        let client = connect(&store, &["--ui-url", "http://127.0.0.1:8765"]).await;
        let info = client.peer_info().unwrap();
        assert_eq!(info.server_info.as_ref().unwrap().name, "epistore");
        assert!(info.instructions.as_deref().unwrap_or_default().starts_with("Read-only access"));
        let mut tools: Vec<String> =
            client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
        tools.sort();
        assert_eq!(tools, ["compare", "episode", "metric", "metric_names", "search", "sql", "tables"]);

        // `tables` says what each table holds, from the schema page, with its columns.
        let (error, tables) = call(&client, "tables", json!({})).await;
        assert!(!error, "{tables}");
        assert!(tables.contains("annotations (table): People's judgements"), "{tables}");
        assert!(tables.contains("episode_facts (view)") && tables.contains("posture Utf8"), "{tables}");
        let (error, one) = call(&client, "tables", json!({"name": "nope"})).await;
        assert!(error && one.contains("no table or view"), "{one}");

        // A query: the same rows as `epistore sql --format csv`.
        let query = "SELECT harness_level, count(*) AS n FROM episodes GROUP BY harness_level ORDER BY 1";
        let (error, answer) = call(&client, "sql", json!({"query": query})).await;
        assert!(!error, "{answer}");
        let cli = store.run(&["sql", "--format", "csv", query]);
        assert_eq!(answer.trim_end(), text(&cli.stdout).trim_end());

        // Writes are refused, and nothing changed.
        for statement in ["DROP TABLE episodes", "CREATE TABLE t AS SELECT 1", "COPY episodes TO '/tmp/x.csv'"] {
            let (error, answer) = call(&client, "sql", json!({"query": statement})).await;
            assert!(error, "{statement} was not refused: {answer}");
        }
        assert_eq!(store.episode_count(), 44);

        // Many rows: the first max_rows, and a note that there are more.
        let (error, answer) = call(&client, "sql", json!({"query": "SELECT episode_id, seq FROM actions"})).await;
        assert!(!error, "{answer}");
        let (table, note) = answer.split_once("\n[cut: ").unwrap_or_else(|| panic!("no note: {answer}"));
        assert_eq!(table.lines().count(), 101, "a header and 100 rows");
        assert!(note.contains("100 rows shown and the result has more"), "{note}");
        let (_, ten) = call(&client, "sql", json!({"query": "SELECT seq FROM actions", "max_rows": 10})).await;
        assert_eq!(ten.split("\n[cut").next().unwrap().lines().count(), 11, "{ten}");
        let (error, too_many) = call(&client, "sql", json!({"query": "SELECT 1", "max_rows": 5000})).await;
        assert!(error && too_many.contains("at most 1000"), "{too_many}");
        // Many bytes: cut at a row's end within the byte limit, with a note.
        let (error, answer) =
            call(&client, "sql", json!({"query": "SELECT repeat('x', 20000) AS big FROM episodes"})).await;
        assert!(!error);
        assert!(answer.len() < (48 << 10) + 400, "{} bytes", answer.len());
        assert!(answer.contains("[cut at 49152 bytes: 2 of 44 rows shown"), "{}", &answer[answer.len() - 200..]);

        // One episode: the fields never collapsed, the annotation, the links.
        let (error, summary) = call(&client, "episode", json!({"id": &h3[..10]})).await;
        assert!(!error, "{summary}");
        for needle in [
            "derived evidence posture: failure",
            "recorder's label: autonomous_verified_success",
            "annotation: \"env failure\" by someone: docker pull timed out",
            &format!("http://127.0.0.1:8765/episodes/{h3}"),
        ] {
            assert!(summary.contains(needle), "{needle:?} not in {summary}");
        }
        let (error, missing) = call(&client, "episode", json!({"id": "ffffffff"})).await;
        assert!(error && missing.contains("no episode"), "{missing}");

        // A metric with its interval, and a comparison of two entries.
        let (error, metric) = call(&client, "metric", json!({"metric": "avs_rate", "by": ["harness_level"]})).await;
        assert!(!error, "{metric}");
        assert!(metric.starts_with("harness_level,value,lo,hi,n,clusters\nH0,"), "{metric}");
        let (error, unknown) = call(&client, "metric", json!({"metric": "avs_rat"})).await;
        assert!(error && unknown.contains("avs_rate"), "{unknown}");
        let models = store.sql("SELECT DISTINCT model FROM episodes WHERE source_format IS NULL ORDER BY 1");
        let (a, b) = (models[0]["model"].as_str().unwrap(), models[1]["model"].as_str().unwrap());
        let (error, compared) =
            call(&client, "compare", json!({"metric": "avs_rate", "by": ["model"], "a": a, "b": b})).await;
        assert!(!error, "{compared}");
        assert!(compared.starts_with(&format!("{a} - {b} on avs_rate: mean difference")), "{compared}");

        // Search, and a filter that does not parse.
        let (error, hits) = call(&client, "search", json!({"query": "pytest", "limit": 3})).await;
        assert!(!error, "{hits}");
        let cli = store.run(&["search", "pytest", "--limit", "3", "--format", "csv"]);
        assert!(hits.lines().count() == 4, "a header and 3 hits: {hits}");
        assert_eq!(hits.trim_end(), text(&cli.stdout).trim_end());
        let (error, bad) = call(&client, "search", json!({"query": "x", "where": "model = "})).await;
        assert!(error && bad.contains("does not parse"), "{bad}");
        client.cancel().await.unwrap();
    });
}
