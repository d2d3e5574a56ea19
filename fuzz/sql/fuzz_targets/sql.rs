//! The SQL statement entry point on arbitrary text: `epistore_sql::statement::
//! plan_read_only_until` (what `sql`, `export --query`, `metrics --where`, Python and
//! `serve` all call) over a session holding every table and view of a small store,
//! then the plan executed, in a memory pool of its own, until a deadline.
//!
//! What counts as a finding: a panic, an abort (a stack overflow is one), a hang past
//! libFuzzer's `-timeout` or memory past its `-rss_limit_mb`. An error is the expected
//! answer to almost every input; so is a statement refused by the limits, or planning
//! or execution given up at its deadline (the limits promise that abandoned planning
//! ends, which the hang check covers: the abandoned thread keeps the process busy).
//!
//! Seeds: with `EPISTORE_FUZZ_SEED_DIR=<dir>` set, instead of fuzzing it writes the
//! statements of `queries/*.sql` and `tests/slt/*.slt` and the red team's shapes (cut to
//! fit `-max_len`) into `<dir>`, then exits (`.ci/fuzz-sql` does this).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::SessionContext;
use epistore_sql::Engine;
use epistore_store::{IngestOptions, Store};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;

/// Time one input may take to plan, and then to run.
const PLAN_DEADLINE: Duration = Duration::from_secs(3);
const RUN_DEADLINE: Duration = Duration::from_secs(3);
/// Memory one input's execution may hold (operators spill or fail beyond it).
const MEMORY: usize = 256 << 20;
/// Rows read from a result before it is dropped.
const ROWS: usize = 100_000;

struct World {
    runtime: tokio::runtime::Runtime,
    engine: Engine,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = epistore_sql::statement::runtime().expect("cannot start the async runtime");
        let store = seed_store();
        let engine = runtime.block_on(Engine::open(&store)).expect("cannot open the session");
        World { runtime, engine }
    })
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A store holding `datasets/login-validation` (every trace kind, every view non-empty
/// enough to plan and run), in a scratch directory of this process.
fn seed_store() -> Store {
    let dir = std::env::temp_dir().join(format!("epistore-fuzz-sql-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open_or_create(&dir.join("store")).expect("cannot create the scratch store");
    let sources = epistore_package::discover(&[repo().join("datasets/login-validation")])
        .expect("cannot find the seed packages");
    let report = store.ingest(&sources, &IngestOptions::default(), |_| {}).expect("cannot ingest the seed packages");
    assert!(report.added() > 0, "no package was added: {report:?}");
    store
}

fuzz_target!(
    init: {
        if let Some(out) = std::env::var_os("EPISTORE_FUZZ_SEED_DIR") {
            write_seeds(Path::new(&out));
            std::process::exit(0);
        }
        world();
    },
    |data: &[u8]| {
        let Ok(sql) = std::str::from_utf8(data) else { return };
        let world = world();
        // On a runtime thread (32 MiB stack), as every caller of the entry point runs
        // it: libFuzzer's own thread has the default 8 MiB.
        let ctx = session(&world.engine);
        let sql = sql.to_string();
        let task = world.runtime.spawn(async move { run(&ctx, &sql).await });
        world.runtime.block_on(task).expect("the statement's task panicked");
    }
);

/// A session of the engine's tables and views with a memory pool of its own.
fn session(engine: &Engine) -> SessionContext {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(MEMORY)))
        .build_arc()
        .expect("cannot build the runtime environment");
    let state = SessionStateBuilder::new_from_existing(engine.context().state()).with_runtime_env(runtime).build();
    SessionContext::new_with_state(state)
}

async fn run(ctx: &SessionContext, sql: &str) {
    let deadline = tokio::time::Instant::now() + PLAN_DEADLINE;
    let Ok(df) = epistore_sql::statement::plan_read_only_until(ctx, sql, deadline).await else { return };
    let _ = tokio::time::timeout(RUN_DEADLINE, async {
        let mut stream = df.execute_stream().await?;
        let mut rows = 0;
        while let Some(batch) = stream.next().await {
            rows += batch?.num_rows();
            if rows >= ROWS {
                break;
            }
        }
        Ok::<_, datafusion::error::DataFusionError>(())
    })
    .await;
}

/// Seeds: every statement the project ships or tests, and the shapes the red team
/// found (deep chains, CTE chains, wide joins), each at most `max` bytes.
fn write_seeds(out: &Path) {
    let max: usize = std::env::var("EPISTORE_FUZZ_SEED_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(65536);
    std::fs::create_dir_all(out).expect("cannot create the seed directory");
    let mut seeds: Vec<String> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in ["queries", "tests/slt"] {
        for entry in std::fs::read_dir(repo().join(dir)).expect("cannot list the seed statements") {
            files.push(entry.expect("cannot list the seed statements").path());
        }
    }
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        match file.extension().and_then(|e| e.to_str()) {
            Some("sql") => seeds.push(text),
            Some("slt") => seeds.extend(slt_statements(&text)),
            _ => {}
        }
    }
    seeds.extend(shapes());
    let mut written = 0;
    for (i, seed) in seeds.iter().enumerate() {
        if seed.len() <= max {
            std::fs::write(out.join(format!("seed-{i:04}")), seed).expect("cannot write a seed");
            written += 1;
        }
    }
    eprintln!("sql: {written} seeds written to {}", out.display());
}

/// The statements of a sqllogictest file: the lines after `query` / `statement` up to
/// `----` or a blank line.
fn slt_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("query") || line.starts_with("statement") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.trim().is_empty() && *l != "----").collect();
            if !body.is_empty() {
                out.push(body.join("\n"));
            }
        }
    }
    out
}

/// The red team's shapes, small enough to run: each kind of chain, near and past the
/// limits.
fn shapes() -> Vec<String> {
    let chain = |op: &str, n: usize| format!("SELECT 1{}", format!(" {op} 1").repeat(n));
    let ctes = |n: usize| {
        let mut sql = String::from("WITH c0 AS (SELECT 1 AS x)");
        for i in 1..n {
            sql.push_str(&format!(", c{i} AS (SELECT x + 1 AS x FROM c{})", i - 1));
        }
        sql + &format!(" SELECT * FROM c{}", n - 1)
    };
    let doubling = |n: usize| {
        let mut sql = String::from("WITH c0 AS (SELECT 1 AS x)");
        for i in 1..n {
            sql.push_str(&format!(", c{i} AS (SELECT a.x FROM c{p} a, c{p} b)", p = i - 1));
        }
        sql + &format!(" SELECT count(*) FROM c{}", n - 1)
    };
    let join = |n: usize| {
        let tables: Vec<String> = (0..n).map(|i| format!("episodes e{i}")).collect();
        format!("SELECT count(*) FROM {}", tables.join(", "))
    };
    vec![
        chain("|", 600),
        chain("<<", 600),
        chain("+", 520),
        chain("AND", 600),
        format!("SELECT 1{} AS s", "::bigint".repeat(600)),
        format!("SELECT (1{}) AS s", " IS NOT NULL".repeat(600)),
        format!("SELECT {}1{}", "(".repeat(80), ")".repeat(80)),
        ctes(140),
        doubling(12),
        join(70),
        "SELECT tokens_in * 9223372036854775807 FROM episodes".into(),
        "SELECT sum(tokens_in) * 4611686018427387904 FROM episodes".into(),
        "SELECT repeat('x', 2000000000)".into(),
        "SELECT lpad('x', 2000000000, 'y')".into(),
        "SELECT * FROM search('\"rate limit\" AND role:assistant')".into(),
        "SELECT * FROM search('((((((((((x')".into(),
        "SELECT json_get_str(arguments, 'command') FROM messages".into(),
        "SELECT * FROM range(1000000000) a, range(1000000000) b".into(),
    ]
}
