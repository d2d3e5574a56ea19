//! Pushdown: a query on one model or one cell decodes only that part of the store
//! (through the cell index), LIMIT stops decoding early, and EXPLAIN shows both.

use epistore_sql::Engine;
use epistore_store::Store;

use crate::util::*;

fn store_with(count: usize) -> (TestStore, tempfile::TempDir) {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    many_packages(work.path(), count);
    assert!(store.ingest(&[work.path()]).status.success());
    (store, work)
}

/// Runs `sql` in a fresh session; returns the text of the first column of all rows
/// and how many episodes the session decoded.
fn run(store: &Store, sql: &str) -> (Vec<String>, u64) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let engine = Engine::open_direct(store).await.unwrap();
        let batches = engine.query(sql).await.unwrap();
        let text = epistore_sql::format_batches(&batches, epistore_sql::Format::Csv).unwrap();
        let lines = text.lines().skip(1).map(str::to_string).collect();
        (lines, engine.decoded_episodes())
    })
}

#[test]
fn cell_filters_read_only_that_part_of_the_store() {
    let (store, _work) = store_with(120);
    let reader = Store::open_read_only(store.path()).unwrap();

    let (rows, decoded) = run(&reader, "SELECT count(*) FROM checks WHERE model = 'model-1'");
    assert_eq!(rows, vec!["40"]);
    assert_eq!(decoded, 40, "one model of three: only its episodes are decoded");

    // i % 3 = 1, i % 4 = 1, i % 5 = 1: i = 1 and 61 of 0..120.
    let (rows, decoded) = run(
        &reader,
        "SELECT count(*) FROM actions WHERE model = 'model-1' AND harness_level = 'H1' AND task = 'task-1'",
    );
    assert_eq!(rows, vec!["4"]);
    assert_eq!(decoded, 2);

    // A level and task without a model still narrows through the index keys.
    let (rows, decoded) = run(&reader, "SELECT count(*) FROM episodes WHERE harness_level = 'H2' AND task = 'task-0'");
    assert_eq!(rows, vec!["6"]);
    assert_eq!(decoded, 6);

    // No filter: everything.
    let (_, decoded) = run(&reader, "SELECT count(*) FROM checks");
    assert_eq!(decoded, 120);
}

#[test]
fn limit_stops_decoding_early() {
    let (store, _work) = store_with(50);
    let reader = Store::open_read_only(store.path()).unwrap();
    let (rows, decoded) = run(&reader, "SELECT seq FROM actions LIMIT 3");
    assert_eq!(rows.len(), 3);
    assert_eq!(decoded, 2, "two actions per episode: two episodes give three rows");
}

#[test]
fn explain_shows_projection_filter_and_limit_pushed_into_the_scan() {
    let (store, _work) = store_with(12);
    let reader = Store::open_read_only(store.path()).unwrap();
    let (plan, _) = run(&reader, "EXPLAIN SELECT seq FROM checks WHERE model = 'model-1' AND result = 'pass'");
    let plan = plan.join("\n");
    assert!(
        plan.contains(
            "TableScan: checks projection=[model, seq, result], partial_filters=[checks.model = Utf8(\"\"model-1\"\")"
        ),
        "{plan}"
    );
    let (plan, _) = run(&reader, "EXPLAIN SELECT seq FROM actions LIMIT 3");
    let plan = plan.join("\n");
    assert!(plan.contains("TableScan: actions projection=[seq], fetch=3"), "{plan}");
}

/// The default session reads the columnar segments: the cell filter becomes a Parquet
/// pruning predicate on the cell-sorted files, projection and LIMIT reach the scan.
#[test]
fn columnar_scans_prune_by_cell_and_push_projection_and_limit() {
    let (store, _work) = store_with(12);
    let reader = Store::open_read_only(store.path()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let plan = |sql: &str| {
        runtime.block_on(async {
            let engine = Engine::open(&reader).await.unwrap();
            let batches = engine.query(sql).await.unwrap();
            epistore_sql::format_batches(&batches, epistore_sql::Format::Csv).unwrap()
        })
    };
    let filtered = plan("EXPLAIN SELECT seq FROM checks WHERE model = 'model-1' AND harness_level = 'H1'");
    assert!(filtered.contains("projection=[model, harness_level, seq]"), "{filtered}");
    assert!(filtered.contains("predicate=model@"), "{filtered}");
    assert!(filtered.contains("pruning_predicate=model_null_count"), "{filtered}");
    assert!(filtered.contains("harness_level_min@"), "{filtered}");
    let limited = plan("EXPLAIN SELECT seq FROM actions LIMIT 3");
    assert!(limited.contains("projection=[seq], limit=3"), "{limited}");
    // And the answers agree with the decode-from-store session.
    let count = |engine_sql: &str| plan(engine_sql).lines().nth(1).unwrap().to_string();
    assert_eq!(count("SELECT count(*) FROM checks WHERE model = 'model-1'"), "4");
}
