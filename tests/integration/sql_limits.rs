//! No statement of any size aborts a process or runs unbounded (issue 31, item 1): the
//! shapes that overflowed the stack or took minutes and gigabytes to plan are refused
//! on every way a statement comes in (`sql`, `sql --file`, `export --query`,
//! `metrics --where`, `leaderboard --where`, Flight SQL), and statements at the limits
//! still run.

use crate::util::*;

fn union(n: usize) -> String {
    (0..n).map(|i| format!("SELECT {i} AS a")).collect::<Vec<_>>().join(" UNION ALL ")
}

fn chain(n: usize, op: &str) -> String {
    vec!["1"; n].join(op)
}

/// A chain of `n` CTEs, each reading the one before it `reads` times.
fn ctes(n: usize, reads: usize) -> String {
    let body = |i: usize| (0..reads).map(|r| format!("c{} r{r}", i - 1)).collect::<Vec<_>>().join(", ");
    let defs: Vec<String> =
        (0..n)
            .map(|i| {
                if i == 0 {
                    "c0 AS (SELECT 1 AS x)".into()
                } else {
                    format!("c{i} AS (SELECT 1 AS x FROM {})", body(i))
                }
            })
            .collect();
    format!("WITH {} SELECT count(*) AS n FROM c{}", defs.join(", "), n - 1)
}

fn comma_join(n: usize) -> String {
    let tables: Vec<String> = (0..n).map(|i| format!("episodes e{i}")).collect();
    format!("SELECT count(*) AS n FROM {} WHERE false", tables.join(", "))
}

/// Each statement, with the words its refusal must name.
fn past_the_limits() -> Vec<(String, &'static str)> {
    vec![
        (union(10_000), "UNION/EXCEPT/INTERSECT"),
        (format!("SELECT {} AS s", chain(200_000, "+")), "operators"),
        (format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000)), "nested"),
        // The red team's shapes: each aborted the CLI or ran for minutes.
        (format!("SELECT {} AS s", chain(10_000, "|")), "operators"),
        (format!("SELECT {} AS s", chain(5_000, "<<")), "nested more than 512"),
        (format!("SELECT 1{} AS s", "::bigint".repeat(5_000)), "nested more than 512"),
        (format!("SELECT (1{}) AS s", " IS NOT NULL".repeat(3_000)), "nested more than 512"),
        (format!("SELECT {} AS s", chain(600, " AND ").replace('1', "true")), "nested more than 512"),
        (ctes(5_000, 1), "CTEs"),
        (ctes(20, 2), "expanded"),
        (comma_join(2_000), "joined in one FROM"),
    ]
}

fn refused(out: &std::process::Output, word: &str, what: &str) {
    assert_eq!(out.status.code(), Some(2), "{what}: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("statement refused") && stderr.contains(word), "{what}: {stderr}");
}

#[test]
fn statements_past_the_limits_are_refused_on_every_path() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let file = store.dir.path().join("deep.sql");
    let csv = store.dir.path().join("deep.csv");
    for (sql, word) in past_the_limits() {
        std::fs::write(&file, &sql).unwrap();
        refused(&store.run(&["sql", "--file", file.to_str().unwrap()]), word, "sql --file");
        // (argv holds at most 128 KiB per argument)
        if sql.len() < 100_000 {
            refused(&store.run(&["sql", &sql]), word, "sql");
            let out = store.run(&["export", "--query", &sql, "--format", "csv", "--out", csv.to_str().unwrap()]);
            refused(&out, word, "export --query");
            assert!(!csv.exists(), "a refused export wrote {}", csv.display());
        }
    }
    // A condition is an expression: the expression shapes through `--where`.
    for condition in [
        format!("({}) = 0", chain(10_000, "|")),
        format!("({}) = 0", chain(5_000, "<<")),
        format!("tokens_in{} > 0", "::bigint".repeat(5_000)),
        vec!["posture = 'gap'"; 4_200].join(" OR "),
    ] {
        refused(&store.run(&["metrics", "--where", &condition]), "statement refused", "metrics --where");
        let out = store.run(&["leaderboard", "--metric", "sound_completion", "--where", &condition]);
        refused(&out, "statement refused", "leaderboard --where");
    }
}

#[test]
fn statements_at_the_limits_run() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let first_value = |sql: &str| {
        let out = store.run(&["sql", "--format", "csv", sql]);
        assert!(out.status.success(), "{}: {}", &sql[..sql.len().min(80)], text(&out.stderr));
        text(&out.stdout).lines().nth(1).map(str::to_string)
    };
    // 256 set operations.
    let out = store.run(&["sql", "--format", "csv", &union(257)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 258);
    // An expression 512 deep (511 `+` over 512 leaves), in 16 columns: 8,176 operators.
    let columns: Vec<String> = (0..16).map(|i| format!("{} AS s{i}", chain(512, "+"))).collect();
    let row = first_value(&format!("SELECT {}", columns.join(", "))).unwrap();
    assert_eq!(row.split(',').collect::<Vec<_>>(), vec!["512"; 16]);
    // 128 CTEs in a chain; a CTE read twice at each of 9 steps (2^9 = 512 reads of c0,
    // a one-row table, so one row).
    assert_eq!(first_value(&ctes(128, 1)).as_deref(), Some("1"));
    assert_eq!(first_value(&ctes(10, 2)).as_deref(), Some("1"));
    // 64 tables in one FROM.
    assert_eq!(first_value(&comma_join(64)).as_deref(), Some("0"));
    // A long IN list is a list, not a chain.
    let list = format!("SELECT 7 IN ({}) AS hit", (0..20_000).map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    assert_eq!(first_value(&list).as_deref(), Some("true"));
}

/// `serve`: a statement past the limits is refused as an invalid argument, the server
/// stays up for the next client, and one at the limits answers.
#[test]
fn serve_refuses_what_the_command_line_refuses_and_stays_up() {
    use arrow_flight_59::flight_service_client::FlightServiceClient;
    use arrow_flight_59::sql::{CommandStatementQuery, ProstMessageExt};
    use arrow_flight_59::FlightDescriptor;
    use prost::Message;

    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let (mut child, addr) = store.serve(&["--query-timeout-secs", "60"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel =
            tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        let mut client =
            FlightServiceClient::new(channel).max_decoding_message_size(64 << 20).max_encoding_message_size(64 << 20);
        let plan = |sql: String| {
            let command = CommandStatementQuery { query: sql, transaction_id: None };
            FlightDescriptor::new_cmd(command.as_any().encode_to_vec())
        };
        for (sql, word) in past_the_limits() {
            let status = client.get_flight_info(plan(sql)).await.expect_err("planned past the limits");
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
            assert!(status.message().contains("statement refused") && status.message().contains(word), "{status}");
        }
        let info = client.get_flight_info(plan(ctes(10, 2))).await.unwrap().into_inner();
        assert_eq!(info.endpoint.len(), 1);
    });
    assert!(child.try_wait().unwrap().is_none(), "the server exited");
    let _ = child.kill();
    let _ = child.wait();
}

/// Found by the SQL fuzz target (fuzz/sql): a 436-term `+` chain holding a `?1`
/// placeholder took over 30 s to plan once `+` on integers became checked (typing every
/// rewritten operand walked its arguments again). It plans as fast as before and is
/// answered: refused for the unbound placeholder. The same chain without it sums.
#[test]
fn the_fuzzers_plus_chain_plans_and_is_answered() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let path = crate::util::repo_root().join("tests/fixtures/fuzz-crashes/sql-plus-chain-timeout.sql");
    let out = store.run(&["sql", "--file", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Placeholder '?1' was not provided a value"), "{}", text(&out.stderr));
    let chain = format!("SELECT 1{} AS s", " + 1".repeat(500));
    let rows = store.sql(&chain);
    assert_eq!(rows[0]["s"], 501);
}
