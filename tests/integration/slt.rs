//! SQL behaviour in sqllogictest files (`tests/slt/*.slt`), DataFusion style.
//!
//! Each `NAME.slt` runs against a fresh store holding the packages described by
//! `NAME.packages.json` (when present): an object mapping a package directory name to
//! its files; a file given as a JSON object is written as JSON, an array as JSON Lines
//! (one element per line, an empty array as an empty file), a string verbatim.
//!
//! `NAME.imports` (when present) lists agent logs instead, one path per line relative to
//! the repository root (`#` starts a comment): they are imported as `epistore import`
//! does, so SQL is tested over imported episodes too.
//!
//! Run with `EPISTORE_SLT_COMPLETE=1` to rewrite the expected results in place
//! (`--complete` mode): `EPISTORE_SLT_COMPLETE=1 cargo test --test integration slt`.
//! Then review the diff: every expected number should be one worked out by hand.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use epistore_sql::Engine;
use epistore_store::{IngestOptions, Store};
use serde_json::Value;
use sqllogictest::{DBOutput, DefaultColumnType};

use crate::util::repo_root;

struct SltDb {
    engine: Engine,
}

#[derive(Debug)]
struct SltError(String);

impl std::fmt::Display for SltError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SltError {}

fn column_type(t: &DataType) -> DefaultColumnType {
    match t {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => DefaultColumnType::Integer,
        DataType::Float16 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(_, _) => {
            DefaultColumnType::FloatingPoint
        }
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 | DataType::Boolean => DefaultColumnType::Text,
        _ => DefaultColumnType::Any,
    }
}

#[async_trait]
impl sqllogictest::AsyncDB for SltDb {
    type Error = SltError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, SltError> {
        let batches = self.engine.query(sql).await.map_err(|e| SltError(e.to_string()))?;
        let Some(first) = batches.first() else {
            return Ok(DBOutput::Rows { types: vec![], rows: vec![] });
        };
        let types = first.schema().fields().iter().map(|f| column_type(f.data_type())).collect();
        let options = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for batch in &batches {
            let formatters: Vec<_> = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<Result<_, _>>()
                .map_err(|e| SltError(e.to_string()))?;
            for row in 0..batch.num_rows() {
                rows.push(formatters.iter().map(|f| f.value(row).to_string()).collect());
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "epistore"
    }
}

/// Writes the packages of a fixture file under `dir`.
pub fn write_fixture(fixture: &Path, dir: &Path) {
    let text = std::fs::read_to_string(fixture).unwrap();
    let packages: serde_json::Map<String, Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
    for (name, files) in packages {
        let Value::Object(files) = files else { panic!("{name}: files must be an object") };
        for (path, content) in files {
            let target = dir.join(&name).join(&path);
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            let bytes = match content {
                Value::String(s) => s.into_bytes(),
                Value::Array(lines) => lines.iter().map(|l| format!("{l}\n")).collect::<String>().into_bytes(),
                other => other.to_string().into_bytes(),
            };
            std::fs::write(target, bytes).unwrap();
        }
    }
}

/// A store holding the fixture's packages, every one of which must be valid.
pub fn store_from_fixture(fixture: Option<&Path>, dir: &Path) -> Store {
    let packages = dir.join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    if let Some(fixture) = fixture {
        write_fixture(fixture, &packages);
    }
    let store = Store::open_or_create(dir.join("store")).unwrap();
    let sources = epistore_package::discover(&[packages]).unwrap();
    let report = store.ingest(&sources, &IngestOptions::default(), |_| {}).unwrap();
    for p in &report.packages {
        assert!(
            !matches!(p.outcome, epistore_store::PackageOutcome::Rejected(_)),
            "fixture package rejected: {:?}",
            p.outcome
        );
    }
    store
}

/// Imports the logs listed in `list` into `store`; every one must import.
pub fn import_into(store: &Store, list: &Path) {
    let text = std::fs::read_to_string(list).unwrap();
    let paths: Vec<PathBuf> = text
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .map(|l| repo_root().join(l))
        .collect();
    let options = epistore_import::Options::default();
    let plan = epistore_import::plan(&paths, &options);
    assert!(plan.refused.is_empty(), "{}: refused {:?}", list.display(), plan.refused);
    let ctx = epistore_import::Context { options: &options, reports: &plan.reports, prior: None };
    let read =
        |unit: &epistore_import::Unit, _: &mut epistore_package::Reservation| -> Vec<epistore_store::PackageRead> {
            epistore_import::read_unit(unit, &ctx)
                .into_iter()
                .map(|run| Ok(run.unwrap_or_else(|e| panic!("{}: refused {e}", list.display())).package.raw))
                .collect()
        };
    let report = store.ingest_from(&plan.units, read, &IngestOptions::default(), |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(report.rejected(), 0, "{:?}", report.packages);
}

fn slt_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("tests/slt"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "slt"))
        .collect();
    files.sort();
    files
}

#[test]
fn sqllogictest_files() {
    let complete = std::env::var_os("EPISTORE_SLT_COMPLETE").is_some();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut failures = Vec::new();
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    for file in files {
        let work = tempfile::tempdir().unwrap();
        let fixture = file.with_extension("packages.json");
        let store = store_from_fixture(fixture.exists().then_some(fixture.as_path()), work.path());
        let imports = file.with_extension("imports");
        if imports.exists() {
            import_into(&store, &imports);
        }
        let engine = runtime.block_on(Engine::open(&store)).unwrap();
        let mut db = Some(SltDb { engine });
        let mut runner = sqllogictest::Runner::new(move || {
            let db = db.take().expect("one connection per file");
            async move { Ok::<_, SltError>(db) }
        });
        let result = if complete {
            runtime
                .block_on(runner.update_test_file(
                    &file,
                    " ",
                    sqllogictest::default_validator,
                    sqllogictest::default_normalizer,
                    sqllogictest::default_column_validator,
                ))
                .map_err(|e| e.to_string())
        } else {
            runtime.block_on(runner.run_file_async(&file)).map_err(|e| e.display(true).to_string())
        };
        if let Err(e) = result {
            failures.push(format!("{}:\n{e}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
