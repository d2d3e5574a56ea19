//! Rows asked for in every order come back as written: across row groups, out of
//! order, from several threads, past the cursors' skip limit.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, ListBuilder, StringArray, StringBuilder, StructBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use epistore_import::Rows;
use serde_json::{json, Value};

use super::*;

/// A corpus of `n` rows (`traj_id`, `instance_id`, `messages` as a list of structs,
/// `resolved` on even rows only), in row groups of `group` rows.
fn corpus(dir: &Path, n: usize, group: usize) -> PathBuf {
    let path = dir.join("corpus.parquet");
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("t{i}"))));
    let instances: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("repo__{}", i % 7))));
    let resolved: ArrayRef = Arc::new(Int64Array::from_iter(
        (0..n).map(|i| (i.is_multiple_of(2)).then_some(i64::from(i.is_multiple_of(4)))),
    ));
    let fields =
        Fields::from(vec![Field::new("role", DataType::Utf8, false), Field::new("content", DataType::Utf8, true)]);
    let mut messages = ListBuilder::new(StructBuilder::new(
        fields.clone(),
        vec![Box::new(StringBuilder::new()), Box::new(StringBuilder::new())],
    ));
    for i in 0..n {
        for (role, text) in [("user", format!("fix issue {i}")), ("assistant", format!("done {i}"))] {
            let s = messages.values();
            s.field_builder::<StringBuilder>(0).expect("role").append_value(role);
            s.field_builder::<StringBuilder>(1).expect("content").append_value(text);
            s.append(true);
        }
        messages.append(true);
    }
    let messages: ArrayRef = Arc::new(messages.finish());
    let batch = RecordBatch::try_from_iter(vec![
        ("traj_id", ids),
        ("instance_id", instances),
        ("messages", messages),
        ("resolved", resolved),
    ])
    .expect("batch");
    let props =
        WriterProperties::builder().set_max_row_group_row_count(Some(group)).set_data_page_row_count_limit(3).build();
    let mut w =
        ArrowWriter::try_new(File::create(&path).expect("create"), batch.schema(), Some(props)).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    path
}

fn expected(i: usize) -> Value {
    let mut row = json!({
        "traj_id": format!("t{i}"),
        "instance_id": format!("repo__{}", i % 7),
        "messages": [
            {"role": "user", "content": format!("fix issue {i}")},
            {"role": "assistant", "content": format!("done {i}")}
        ],
    });
    if i.is_multiple_of(2) {
        row["resolved"] = json!(i64::from(i.is_multiple_of(4)));
    }
    row
}

fn row(rows: &ParquetRows, i: usize) -> Value {
    serde_json::from_slice(&rows.row(i).expect("row")).expect("JSON")
}

#[test]
fn rows_in_order_across_row_groups_read_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = ParquetRows::open(&corpus(dir.path(), 250, 40)).expect("open");
    assert_eq!(rows.len(), 250);
    assert_eq!(rows.columns(), ["traj_id", "instance_id", "messages", "resolved"]);
    assert_eq!(rows.starts.len(), 8, "250 rows in groups of 40: 7 groups");
    for i in 0..250 {
        assert_eq!(row(&rows, i), expected(i), "row {i}");
    }
    // In order, one cursor serves each group: never more than a few open.
    assert!(rows.pool.lock().expect("pool").len() <= 2);
}

#[test]
fn rows_out_of_order_and_past_the_skip_limit_read_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One row group for the whole file, larger than the skip limit.
    let n = MAX_SKIP * 2 + 100;
    let rows = ParquetRows::open(&corpus(dir.path(), n, n)).expect("open");
    assert_eq!(rows.starts, vec![0, n]);
    // Backwards, far jumps, the last row, the first row, repeats.
    for i in [n - 1, 0, MAX_SKIP + 50, 3, 2, MAX_SKIP + 50, n / 2, n - 2, 1, MAX_SKIP * 2 + 7] {
        assert_eq!(row(&rows, i), expected(i), "row {i}");
    }
    assert!(rows.pool.lock().expect("pool").len() <= MAX_CURSORS);
}

#[test]
fn rows_from_many_threads_read_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = Arc::new(ParquetRows::open(&corpus(dir.path(), 600, 128)).expect("open"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let rows = rows.clone();
            std::thread::spawn(move || {
                // Each thread a stride of its own, as rayon's halves are.
                for i in (t * 150..(t + 1) * 150).chain((0..600).step_by(37)) {
                    assert_eq!(row(&rows, i), expected(i), "thread {t} row {i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a reading thread panicked");
    }
}

#[test]
fn a_row_past_the_end_and_a_file_that_is_not_parquet_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows = ParquetRows::open(&corpus(dir.path(), 5, 5)).expect("open");
    assert_eq!(rows.row(5).unwrap_err(), "row 6 is not in the file (5 rows)");
    let bad = dir.path().join("bad.parquet");
    std::fs::write(&bad, b"PAR1 this is not parquet at all").expect("write");
    let why = Parquet.open(&bad).err().expect("refused");
    assert!(why.starts_with("not a readable Parquet file:"), "{why}");
}

/// The real corpus rows of tests/fixtures/real/trajectories, written as Parquet the
/// way the corpora publish them (Arrow's schema inference over the JSON Lines: nested
/// messages as lists of structs), import to the same episodes as the JSON Lines.
#[test]
fn real_corpus_rows_as_parquet_import_as_their_json_lines_do() {
    use datafusion::arrow::json::reader::{infer_json_schema_from_seekable, ReaderBuilder};
    use epistore_import::{plan, read_unit, Context, Options, Part};
    use std::io::{BufReader, Seek};

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real/trajectories");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut compared = 0;
    for corpus in [
        "swe-smith-trajectories/sample.trajectories.jsonl",
        "mini-coder-trajs-400k/sample.trajectories.jsonl",
        "nebius-swe-agent-trajectories/sample.trajectories.jsonl",
    ] {
        let jsonl = root.join(corpus);
        let mut file = BufReader::new(File::open(&jsonl).expect("fixture"));
        let (schema, _) = infer_json_schema_from_seekable(&mut file, None).expect("schema");
        file.rewind().expect("rewind");
        let schema = Arc::new(schema);
        let parquet = dir.path().join(format!("{compared}.parquet"));
        let mut writer =
            ArrowWriter::try_new(File::create(&parquet).expect("create"), schema.clone(), None).expect("writer");
        for batch in ReaderBuilder::new(schema).build(file).expect("reader") {
            writer.write(&batch.expect("batch")).expect("write");
        }
        writer.close().expect("close");

        let options = Options { row_files: Some(Parquet::reader()), ..Options::default() };
        let read = |path: &Path| {
            let plan = plan(&[path.to_path_buf()], &options);
            assert!(plan.refused.is_empty(), "{corpus}: {:?}", plan.refused);
            let ctx = Context { options: &options, reports: &plan.reports, prior: None };
            let parts: Vec<Part> = plan.units.iter().map(|u| u.part.clone()).collect();
            let runs: Vec<_> =
                plan.units.iter().flat_map(|u| read_unit(u, &ctx)).map(|r| r.expect("imports")).collect();
            (parts, runs)
        };
        let (lines, from_jsonl) = read(&jsonl);
        let (rows, from_parquet) = read(&parquet);
        assert_eq!(from_jsonl.len(), from_parquet.len(), "{corpus}");
        assert!(rows.iter().enumerate().all(|(i, p)| *p == Part::Object(format!("row {}", i + 1))), "{rows:?}");
        assert_eq!(lines.len(), rows.len());
        for (a, b) in from_jsonl.iter().zip(&from_parquet) {
            let (a, b) = (&a.package.episode, &b.package.episode);
            assert_eq!(a.manifest.episode, b.manifest.episode, "{corpus}");
            assert_eq!(a.manifest.task, b.manifest.task);
            assert_eq!(a.manifest.model, b.manifest.model);
            assert_eq!(a.manifest.task_prompt, b.manifest.task_prompt);
            assert_eq!(a.outcome.correct, b.outcome.correct);
            let calls = |e: &epistore_package::Episode| -> Vec<(String, Option<String>, Option<i64>)> {
                e.tools.iter().flatten().map(|t| (t.tool.clone(), t.command.clone(), t.exit_code)).collect()
            };
            assert_eq!(calls(a), calls(b), "{corpus}: {}", a.manifest.episode);
            assert!(!calls(a).is_empty());
            let texts = |e: &epistore_package::Episode| -> Vec<Option<String>> {
                e.messages.iter().flatten().map(|m| m.text.clone()).collect()
            };
            assert_eq!(texts(a), texts(b));
        }
        compared += 1;
    }
    assert_eq!(compared, 3);
}
