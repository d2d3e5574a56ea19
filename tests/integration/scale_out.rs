//! Scale-out: the Parquet dataset of `epistore export --all` runs the shipped
//! `queries/*.sql` on Ballista (DataFusion's distributed engine; scheduler and executor
//! in this process) and gets the embedded engine's answers, but for two views where
//! Ballista 55 is wrong (pinned below; docs/scale-out.md).

use std::path::Path;
use std::sync::Arc;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::json::{writer::JsonArray, WriterBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SessionStateBuilder;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use epistore_sql::views::{location_overlaps, VERIFIER_PAIRS_AT, VIEWS};
use epistore_sql::Engine;
use serde_json::Value;

use crate::util::{text, TestStore};

/// Rows as JSON objects (column order does not matter), sorted, floats rounded so two
/// engines summing in different orders compare equal.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut buffer = Vec::new();
    {
        let mut writer = WriterBuilder::new().with_explicit_nulls(true).build::<_, JsonArray>(&mut buffer);
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
    }
    if buffer.is_empty() {
        return vec![];
    }
    let values: Vec<Value> = serde_json::from_slice(&buffer).unwrap();
    fn round(v: Value) -> Value {
        match v {
            Value::Number(n) if n.is_f64() => {
                let x = n.as_f64().unwrap();
                serde_json::json!(format!("{x:.9}"))
            }
            Value::Number(n) => serde_json::json!(format!("{:.9}", n.as_f64().unwrap())),
            // Keys sorted: the partition columns come last from a hive dataset.
            Value::Object(map) => {
                let sorted: std::collections::BTreeMap<String, Value> =
                    map.into_iter().map(|(k, v)| (k, round(v))).collect();
                Value::Object(sorted.into_iter().collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(round).collect()),
            other => other,
        }
    }
    let mut out: Vec<String> = values.into_iter().map(|v| round(v).to_string()).collect();
    out.sort();
    out
}

async fn ballista_context(export: &Path) -> SessionContext {
    // One partition per stage: with two, Ballista 55 computed `lag(...) OVER (PARTITION
    // BY episode_id ORDER BY revision)` in revision_pairs across episodes (a pair
    // "3 -> 0" inside one episode). Stages, shuffles and executors are still Ballista's.
    let config = SessionConfig::new_with_ballista().with_target_partitions(1).with_ballista_standalone_parallelism(2);
    let mut state = SessionStateBuilder::new().with_config(config).with_default_features().build();
    // Functions travel by name: the scheduler and executor must know ours before start.
    datafusion::execution::FunctionRegistry::register_udf(&mut state, Arc::new(location_overlaps())).unwrap();
    let ctx = SessionContext::standalone_with_state(state).await.unwrap();
    ctx.register_udf(location_overlaps());

    let manifest: Value = serde_json::from_slice(&std::fs::read(export.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["format"], "epistore-export/1");
    for table in manifest["tables"].as_array().unwrap() {
        if table["kind"] != "table" {
            continue;
        }
        let partitions: Vec<(String, DataType)> = table["partition_by"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| (k.as_str().unwrap().to_string(), DataType::Utf8))
            .collect();
        let path = export.join(table["path"].as_str().unwrap());
        let options = ParquetReadOptions::default().table_partition_cols(partitions);
        ctx.register_parquet(table["name"].as_str().unwrap(), format!("{}/", path.display()), options).await.unwrap();
    }
    for (name, sql) in VIEWS {
        ctx.sql(&format!("CREATE VIEW {name} AS {sql}")).await.unwrap().collect().await.unwrap();
    }
    ctx
}

#[test]
fn shipped_queries_on_ballista_match_the_embedded_engine() {
    let store = TestStore::synthetic(160, 3);
    let export = store.dir.path().join("export");
    let out = store.run(&["export", "--all", "--out", export.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let embedded = Engine::open(&epistore_store::Store::open_read_only(store.path()).unwrap()).await.unwrap();
        let distributed = ballista_context(&export).await;
        let mut queries: Vec<(String, String)> =
            VIEWS.iter().map(|(name, _)| (name.to_string(), format!("SELECT * FROM {name}"))).collect();
        queries.push(("verifier_pairs_at(0.5)".into(), VERIFIER_PAIRS_AT.replace(":coverage", "0.5")));
        let mut compared = 0;
        let mut differing = vec![];
        for (name, sql) in &queries {
            let expected = rows(&embedded.query(sql).await.unwrap());
            let got = rows(
                &distributed
                    .sql(sql)
                    .await
                    .unwrap()
                    .collect()
                    .await
                    .unwrap_or_else(|e| panic!("{name} on Ballista: {e}")),
            );
            if got != expected {
                let first = got.iter().zip(&expected).find(|(g, e)| g != e);
                eprintln!("DIFF {name}: {} vs {} rows; first difference: {first:?}", got.len(), expected.len());
                differing.push(name.clone());
            }
            assert!(
                !expected.is_empty() || name.starts_with("verifier_pairs_at"),
                "{name} is empty: the check would prove nothing"
            );
            compared += 1;
        }
        assert_eq!(compared, VIEWS.len() + 1);
        // Ballista 55 answers these two differently from DataFusion on the same Parquet
        // files, for the pair (judge-b, judge-c) only, although every view they read
        // (verifier_judgements, verifier_pair_judgements) matches row for row and the
        // same GROUP BY over verifier_pair_judgements matches too; the embedded answer is
        // the one the hand-worked tests/slt/verifiers.slt and coverage_cut.slt check.
        // Pinned so a Ballista that fixes it (or breaks another view) fails this test.
        let known = ["verifier_pairs", "verifier_pairs_at(0.5)"];
        assert_eq!(differing, known, "views whose answers differ on Ballista (expected exactly {known:?})");
    });
}
