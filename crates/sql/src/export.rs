//! `epistore export`: tables, views and query results as Arrow IPC, Parquet, CSV or JSON
//! Lines files for notebooks and other engines.
//!
//! Results stream: batches are written as DataFusion produces them, so memory does not
//! grow with the result. Types stay as the store's schema has them (lists and structs
//! nested, timestamps as timestamps) in Arrow, Parquet and JSON Lines; CSV, which has no
//! nesting, carries nested values as JSON text. Arrow and Parquet files carry the schema
//! version and the store snapshot in their metadata; CSV and JSON Lines get a sidecar
//! `<file>.epistore.json` with the same facts. Nothing is written in place: output goes
//! to a temporary name beside the target and is renamed when complete, and an existing
//! target is never overwritten.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, StringArray};
use datafusion::arrow::compute::{cast, filter_record_batch};
use datafusion::arrow::csv::WriterBuilder as CsvWriterBuilder;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::ipc::writer::FileWriter as IpcFileWriter;
use datafusion::arrow::json::{writer::JsonArray, LineDelimitedWriter, WriterBuilder as JsonWriterBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::{views, Engine, TableKind, SCHEMA_VERSION};

/// Export file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Arrow IPC file (Feather v2): `pyarrow.feather.read_table`, `polars.read_ipc`.
    Arrow,
    Parquet,
    Csv,
    /// One JSON object per line.
    Jsonl,
}

impl ExportFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Arrow => "arrow",
            ExportFormat::Parquet => "parquet",
            ExportFormat::Csv => "csv",
            ExportFormat::Jsonl => "jsonl",
        }
    }
}

/// What one export wrote.
#[derive(Clone, Debug)]
pub struct Written {
    pub name: String,
    pub path: PathBuf,
    pub rows: u64,
    pub files: usize,
    pub partition_by: Vec<String>,
    pub schema: SchemaRef,
}

/// Every table and view `--all` writes: the base tables, then the shipped views.
pub fn exportable() -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = TableKind::ALL.iter().map(|k| (k.name().to_string(), "table")).collect();
    out.push(("epistore_info".into(), "table"));
    // The price table in force, so the exported `episode_costs` answers as here.
    out.push(("model_prices".into(), "table"));
    // People's judgements, so a notebook has them beside the episodes.
    out.push((crate::annotations::TABLE.into(), "table"));
    out.push((crate::supersession::ALL_EPISODES.into(), "view"));
    out.extend(views::VIEWS.iter().map(|(name, _)| (name.to_string(), "view")));
    out
}

/// `<path>.epistore-partial`: where output is built before the rename.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".epistore-partial");
    path.with_file_name(name)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Usage(format!("{}: {e}", path.display()))
}

impl Engine {
    /// The facts every exported file carries.
    pub fn export_metadata(&self, source: &str) -> Vec<(String, String)> {
        vec![
            ("epistore.schema_version".into(), SCHEMA_VERSION.into()),
            ("epistore.store_format".into(), epistore_store::STORE_FORMAT.into()),
            ("epistore.snapshot_seq".into(), self.snapshot_seq.to_string()),
            ("epistore.source".into(), source.into()),
        ]
    }

    /// Streams the result of `sql` (one read-only statement) to `out` in `format`,
    /// split into hive-style directories `key=value/` when `partition_by` is given.
    pub async fn export_query(
        &self,
        name: &str,
        sql: &str,
        format: ExportFormat,
        out: &Path,
        partition_by: &[String],
    ) -> Result<Written> {
        self.export_into(name, sql, format, out, partition_by, false).await
    }

    /// As [`Engine::export_query`]. `in_dataset`: a table of `export --all`, always a
    /// directory (`out/part-00000.<ext>` when unpartitioned) and described by the
    /// dataset's manifest rather than a sidecar.
    async fn export_into(
        &self,
        name: &str,
        sql: &str,
        format: ExportFormat,
        out: &Path,
        partition_by: &[String],
        in_dataset: bool,
    ) -> Result<Written> {
        let directory = in_dataset || !partition_by.is_empty();
        let sidecar = sidecar_path(out);
        if sidecar.exists() && !in_dataset {
            return Err(Error::Usage(format!("{} exists; export never overwrites", sidecar.display())));
        }
        if out.exists() {
            return Err(Error::Usage(format!(
                "{} exists; export never overwrites (remove it or choose another --out)",
                out.display()
            )));
        }
        let df = crate::statement::plan_read_only(self.context(), sql).await?;
        let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
        for (i, key) in partition_by.iter().enumerate() {
            let Ok(index) = schema.index_of(key) else {
                return Err(Error::Usage(format!("cannot partition `{name}` by `{key}`: it has no such column")));
            };
            if partition_by[..i].contains(key) {
                return Err(Error::Usage(format!("`{key}` is named twice in --partition-by")));
            }
            // A directory name holds text; readers give partition values back as text or
            // integers, so only columns that survive that round trip may partition.
            let t = schema.field(index).data_type();
            if !(matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Boolean)
                || t.is_integer())
            {
                return Err(Error::Usage(format!(
                    "cannot partition by `{key}` ({t}): partition columns must be text, integer or boolean"
                )));
            }
        }
        let metadata = self.export_metadata(sql);
        let tmp = partial(out);
        let _ = std::fs::remove_dir_all(&tmp);
        let _ = std::fs::remove_file(&tmp);
        let written = async {
            let mut sink = Sink::new(&tmp, format, schema.clone(), partition_by, directory, &metadata)?;
            let mut stream = df.execute_stream().await?;
            let mut rows = 0u64;
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                rows += batch.num_rows() as u64;
                sink.write(&batch)?;
            }
            Ok::<_, Error>((rows, sink.finish()?))
        }
        .await;
        // A failed export leaves nothing behind.
        let (rows, files) = written.inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&tmp);
            let _ = std::fs::remove_file(&tmp);
        })?;
        // The facts of a file that cannot carry metadata (CSV, JSON Lines) or of a
        // partitioned directory go beside it as `<out>.epistore.json`; never inside a
        // directory, where readers (polars) would take it for data. Tables of `--all`
        // are described by its manifest instead.
        if !in_dataset && (directory || matches!(format, ExportFormat::Csv | ExportFormat::Jsonl)) {
            write_sidecar(out, name, format, rows, partition_by, &schema, &metadata)?;
        }
        std::fs::rename(&tmp, out).map_err(io(out))?;
        Ok(Written { name: name.into(), path: out.into(), rows, files, partition_by: partition_by.to_vec(), schema })
    }

    /// `export --all`: every table and view as a Parquet dataset under `out/<name>/`,
    /// partitioned by `partition_by` where the table has those columns, plus
    /// `out/manifest.json`. Written beside `out` and renamed when complete.
    pub async fn export_all(
        &self,
        out: &Path,
        partition_by: &[String],
        progress: &dyn Fn(&str),
    ) -> Result<Vec<Written>> {
        if out.exists() {
            return Err(Error::Usage(format!(
                "{} exists; export never overwrites (remove it or choose another --out)",
                out.display()
            )));
        }
        let tmp = partial(out);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        let mut written = vec![];
        let mut manifest_tables = vec![];
        for (name, kind) in exportable() {
            progress(&name);
            let df = self.context().table(name.as_str()).await?;
            let columns: Vec<String> = df.schema().fields().iter().map(|f| f.name().clone()).collect();
            let keys: Vec<String> = partition_by.iter().filter(|k| columns.contains(k)).cloned().collect();
            let target = tmp.join(&name);
            let sql = format!("SELECT * FROM {}", crate::sql_text::quote_ident(&name));
            let mut w = self.export_into(&name, &sql, ExportFormat::Parquet, &target, &keys, true).await?;
            let keys = if w.rows == 0 && !keys.is_empty() {
                // An empty table has nothing to partition and no partition to hold a
                // file: it is written unpartitioned, one empty file with every column,
                // so every reader (DataFusion, pyarrow's hive discovery) sees its schema.
                std::fs::remove_dir_all(&target).map_err(io(&target))?;
                w = self.export_into(&name, &sql, ExportFormat::Parquet, &target, &[], true).await?;
                vec![]
            } else {
                keys
            };
            manifest_tables.push(json!({
                "name": name,
                "kind": kind,
                "path": name,
                "rows": w.rows,
                "files": w.files,
                "partition_by": keys,
                "columns": columns_json(&w.schema),
            }));
            written.push(Written { path: out.join(&name), ..w });
        }
        let manifest = json!({
            "format": "epistore-export/1",
            "schema_version": SCHEMA_VERSION,
            "store_format": epistore_store::STORE_FORMAT,
            "snapshot_seq": self.snapshot_seq,
            "file_format": "parquet",
            "partitioning": "hive",
            "partition_by": partition_by,
            "tables": manifest_tables,
        });
        let path = tmp.join("manifest.json");
        std::fs::write(&path, serde_json::to_string_pretty(&manifest).expect("json") + "\n").map_err(io(&path))?;
        std::fs::rename(&tmp, out).map_err(io(out))?;
        Ok(written)
    }
}

fn columns_json(schema: &Schema) -> Value {
    Value::Array(
        schema
            .fields()
            .iter()
            .map(|f| json!({"name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable()}))
            .collect(),
    )
}

/// `<file>.epistore.json`: the facts of a CSV or JSON Lines file, beside it.
fn sidecar_path(out: &Path) -> PathBuf {
    let mut n = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    n.push(".epistore.json");
    out.with_file_name(n)
}

fn write_sidecar(
    out: &Path,
    name: &str,
    format: ExportFormat,
    rows: u64,
    partition_by: &[String],
    schema: &Schema,
    metadata: &[(String, String)],
) -> Result<()> {
    let facts: serde_json::Map<String, Value> = metadata.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let sidecar = json!({
        "format": "epistore-export/1",
        "name": name,
        "file_format": format.extension(),
        "rows": rows,
        "partitioning": if partition_by.is_empty() { Value::Null } else { json!("hive") },
        "partition_by": partition_by,
        "columns": columns_json(schema),
        "metadata": facts,
    });
    let text = serde_json::to_string_pretty(&sidecar).expect("json") + "\n";
    // A directory gets its manifest inside; a single file gets `<file>.epistore.json`
    // beside it (written before the data file is renamed into place).
    // Written before the data is renamed into place: a reader that finds the data
    // finds its description.
    let path = sidecar_path(out);
    std::fs::write(&path, text).map_err(io(&path))
}

/// Writers for one output: a single file, or one file per partition.
struct Sink {
    root: PathBuf,
    format: ExportFormat,
    schema: SchemaRef,
    /// Columns of `schema` written to files (partition columns are in the path).
    file_schema: SchemaRef,
    keep: Vec<usize>,
    partition_columns: Vec<usize>,
    /// Files go under `root/` (partitions, or `--all`), not at `root` itself.
    directory: bool,
    metadata: Vec<(String, String)>,
    writers: HashMap<Vec<Option<String>>, FileSink>,
    /// Open writers, least recently opened first.
    order: Vec<Vec<Option<String>>>,
    /// Files written so far per partition (a partition whose writer was closed to stay
    /// under MAX_OPEN_WRITERS continues in `part-0000N`).
    parts: HashMap<Vec<Option<String>>, usize>,
    files: usize,
}

/// Partitions written at once: beyond this the oldest file is closed (file handles and
/// write buffers stay bounded however many partitions a column has).
const MAX_OPEN_WRITERS: usize = 64;

impl Sink {
    fn new(
        root: &Path,
        format: ExportFormat,
        schema: SchemaRef,
        partition_by: &[String],
        directory: bool,
        metadata: &[(String, String)],
    ) -> Result<Sink> {
        let partition_columns: Vec<usize> = partition_by.iter().map(|k| schema.index_of(k).expect("checked")).collect();
        let keep: Vec<usize> = (0..schema.fields().len()).filter(|i| !partition_columns.contains(i)).collect();
        let mut file_schema = schema.project(&keep)?;
        file_schema = file_schema.with_metadata(metadata.iter().cloned().collect());
        if directory {
            std::fs::create_dir_all(root).map_err(io(root))?;
        }
        Ok(Sink {
            root: root.into(),
            format,
            schema,
            file_schema: Arc::new(file_schema),
            keep,
            partition_columns,
            directory,
            metadata: metadata.to_vec(),
            writers: HashMap::new(),
            order: vec![],
            parts: HashMap::new(),
            files: 0,
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if self.partition_columns.is_empty() {
            let projected = batch.project(&self.keep)?;
            return self.writer(vec![])?.write(&projected);
        }
        let keys = self
            .partition_columns
            .iter()
            .map(|&i| {
                Ok(cast(batch.column(i), &DataType::Utf8)?
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("Utf8")
                    .clone())
            })
            .collect::<Result<Vec<_>>>()?;
        let row_key = |row: usize| -> Vec<Option<String>> {
            keys.iter().map(|k| (!k.is_null(row)).then(|| k.value(row).to_string())).collect()
        };
        let mut groups: BTreeMap<Vec<Option<String>>, Vec<bool>> = BTreeMap::new();
        for row in 0..batch.num_rows() {
            groups.entry(row_key(row)).or_insert_with(|| vec![false; batch.num_rows()])[row] = true;
        }
        let projected = batch.project(&self.keep)?;
        for (key, mask) in groups {
            let part = filter_record_batch(&projected, &BooleanArray::from(mask))?;
            self.writer(key)?.write(&part)?;
        }
        Ok(())
    }

    fn writer(&mut self, key: Vec<Option<String>>) -> Result<&mut FileSink> {
        if !self.writers.contains_key(&key) {
            let path = if !self.directory {
                self.root.clone()
            } else {
                let mut dir = self.root.clone();
                for (&i, value) in self.partition_columns.iter().zip(&key) {
                    // Hive's spelling: NULL is __HIVE_DEFAULT_PARTITION__; other values are
                    // percent-encoded where a path could not hold them.
                    let value = value.as_deref().map_or_else(|| HIVE_NULL.to_string(), escape_path_value);
                    dir.push(format!("{}={value}", escape_path_value(self.schema.field(i).name())));
                }
                std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                let part = self.parts.entry(key.clone()).or_insert(0);
                *part += 1;
                dir.join(format!("part-{:05}.{}", *part - 1, self.format.extension()))
            };
            if self.writers.len() >= MAX_OPEN_WRITERS {
                let oldest = self.order.remove(0);
                self.writers.remove(&oldest).expect("open").finish()?;
            }
            let sink = FileSink::create(&path, self.format, self.file_schema.clone(), &self.metadata)?;
            self.writers.insert(key.clone(), sink);
            self.order.push(key.clone());
            self.files += 1;
        }
        Ok(self.writers.get_mut(&key).expect("inserted"))
    }

    /// Closes every file; an empty unpartitioned result still gets a file (with the
    /// schema), so readers see the columns.
    fn finish(mut self) -> Result<usize> {
        if self.writers.is_empty() && self.partition_columns.is_empty() {
            // (also for `--all`: an empty table is a directory holding one empty file)
            self.writer(vec![])?;
        }
        for key in std::mem::take(&mut self.order) {
            self.writers.remove(&key).expect("open").finish()?;
        }
        Ok(self.files)
    }
}

/// Hive's directory name for NULL.
const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

fn escape_path_value(value: &str) -> String {
    if value == HIVE_NULL {
        // The text itself must not land in NULL's directory.
        return value.replace('_', "%5F");
    }
    let mut out = String::new();
    for c in value.chars() {
        if c.is_ascii_alphanumeric() || "-_.~ +@,".contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    if out == "." || out == ".." {
        out = out.replace('.', "%2E");
    }
    out
}

enum FileSink {
    Arrow(IpcFileWriter<BufWriter<File>>),
    Parquet(ArrowWriter<BufWriter<File>>),
    Csv { writer: datafusion::arrow::csv::Writer<BufWriter<File>> },
    Jsonl(LineDelimitedWriter<BufWriter<File>>),
}

impl FileSink {
    fn create(path: &Path, format: ExportFormat, schema: SchemaRef, metadata: &[(String, String)]) -> Result<FileSink> {
        let file = BufWriter::with_capacity(256 << 10, File::create(path).map_err(io(path))?);
        Ok(match format {
            ExportFormat::Arrow => FileSink::Arrow(IpcFileWriter::try_new(file, &schema)?),
            ExportFormat::Parquet => {
                let properties = WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
                    .set_key_value_metadata(Some(
                        metadata.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect(),
                    ))
                    .build();
                FileSink::Parquet(ArrowWriter::try_new(file, schema, Some(properties))?)
            }
            ExportFormat::Csv => FileSink::Csv { writer: CsvWriterBuilder::new().with_header(true).build(file) },
            ExportFormat::Jsonl => FileSink::Jsonl(JsonWriterBuilder::new().with_explicit_nulls(true).build(file)),
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            FileSink::Arrow(w) => w.write(batch)?,
            FileSink::Parquet(w) => w.write(batch)?,
            FileSink::Csv { writer } => writer.write(&nested_as_json_text(batch)?)?,
            FileSink::Jsonl(w) => w.write(batch)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            FileSink::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?.flush().map_err(|e| Error::Usage(e.to_string()))?;
            }
            FileSink::Parquet(w) => {
                w.close()?;
            }
            FileSink::Csv { writer } => {
                writer.into_inner().flush().map_err(|e| Error::Usage(e.to_string()))?;
            }
            FileSink::Jsonl(mut w) => {
                w.finish()?;
                w.into_inner().flush().map_err(|e| Error::Usage(e.to_string()))?;
            }
        }
        Ok(())
    }
}

/// CSV has no lists or structs: a nested value is written as its JSON text
/// (`["src/a.js","src/b.js"]`), which every notebook library can parse back.
fn nested_as_json_text(batch: &RecordBatch) -> Result<RecordBatch> {
    if !batch.schema().fields().iter().any(|f| f.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if !field.data_type().is_nested() {
            fields.push(field.as_ref().clone());
            columns.push(column.clone());
            continue;
        }
        let one = RecordBatch::try_new(Arc::new(Schema::new(vec![field.as_ref().clone()])), vec![column.clone()])?;
        let mut buffer = Vec::new();
        {
            let mut writer = JsonWriterBuilder::new().with_explicit_nulls(true).build::<_, JsonArray>(&mut buffer);
            writer.write(&one)?;
            writer.finish()?;
        }
        let rows: Vec<Value> = if buffer.is_empty() {
            vec![]
        } else {
            serde_json::from_slice(&buffer).map_err(|e| Error::Usage(e.to_string()))?
        };
        let text: StringArray = rows
            .iter()
            .map(|row| match &row[field.name()] {
                Value::Null => None,
                v => Some(v.to_string()),
            })
            .collect();
        fields.push(Field::new(field.name(), DataType::Utf8, true));
        columns.push(Arc::new(text));
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?)
}
