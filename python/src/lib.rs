//! `epistore._native`: the store and its SQL engine inside a Python process.
//!
//! The pure-Python package `epistore` (python/epistore/__init__.py) wraps this module;
//! read its docstrings for the API. Here: a [`Database`] owns an open store, a tokio
//! runtime and the SQL session over the store's latest snapshot (rebuilt when an
//! ingest has advanced it); every result leaves as an [`stream::ArrowStream`], read
//! through the Arrow C stream interface without copies. The whole command line is here
//! too ([`run_cli`]), so `pip install` puts `epistore` on the PATH.
//!
//! Errors are `epistore.Error`, worded as the command line prints them after `error: `.

mod boards;
mod ffi;
mod ingest;
mod stream;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use epistore_sql::{statement, Engine};
use epistore_store::Store;
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use stream::{ArrowSchema, ArrowStream};

pyo3::create_exception!(
    epistore,
    Error,
    pyo3::exceptions::PyException,
    "An epistore error: bad SQL, a refused write, an unknown metric, no store, ... \
     The message is what the `epistore` command line prints after `error: `."
);

/// The command line's wording of an error and its causes.
pub(crate) use epistore_cli::describe;

pub(crate) fn py_err(e: anyhow::Error) -> PyErr {
    Error::new_err(describe(&e))
}

pub(crate) type Result<T, E = anyhow::Error> = std::result::Result<T, E>;

/// An open store: its SQL session, ingest and import. Made by `epistore.open`.
#[pyclass(module = "epistore._native", name = "Database", frozen)]
pub struct Database {
    path: PathBuf,
    writable: bool,
    store: Mutex<Option<Arc<Store>>>,
    runtime: Arc<Runtime>,
    /// The session over the latest snapshot seen; rebuilt when the store moved on.
    session: Mutex<Option<Arc<Engine>>>,
}

impl Database {
    fn store(&self) -> Result<Arc<Store>> {
        self.store.lock().expect("store lock").clone().ok_or_else(|| anyhow::anyhow!("the database is closed"))
    }

    fn writer(&self) -> Result<Arc<Store>> {
        if !self.writable {
            anyhow::bail!(
                "the store at {} was opened read-only; open it with epistore.open(path, write=True) to add to it",
                self.path.display()
            );
        }
        self.store()
    }

    /// The session for the latest committed snapshot (rebuilt after an ingest, by this
    /// process or another).
    fn engine(&self) -> Result<Arc<Engine>> {
        let store = self.store()?;
        let seq = store.snapshot()?.generation()?;
        let mut session = self.session.lock().expect("session lock");
        if let Some(engine) = session.as_ref().filter(|e| e.generation == seq) {
            return Ok(engine.clone());
        }
        let engine = Arc::new(self.runtime.block_on(Engine::open(&store))?);
        *session = Some(engine.clone());
        Ok(engine)
    }

    /// Plans `sql` read-only on the current session and starts it.
    fn stream(&self, sql: &str) -> Result<ArrowStream> {
        let engine = self.engine()?;
        // Planned on a runtime thread (32 MiB of stack), not on the caller's: Python's
        // threads may have far less.
        let (ctx, sql) = (engine.context().clone(), sql.to_string());
        let planning = self.runtime.spawn(async move {
            let df = statement::plan_read_only(&ctx, &sql).await?;
            Ok::<_, epistore_sql::Error>(df.execute_stream().await?)
        });
        let stream = self.runtime.block_on(planning)??;
        Ok(ArrowStream::query(stream, self.runtime.clone(), engine))
    }
}

fn paths_of(paths: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    if paths.is_empty() {
        anyhow::bail!("no paths given");
    }
    Ok(paths)
}

#[pymethods]
impl Database {
    /// The store directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether the store was opened for writing (`write=True`).
    #[getter]
    fn writable(&self) -> bool {
        self.writable
    }

    /// The ingest sequence of the latest committed snapshot.
    #[getter]
    fn snapshot_seq(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| Ok(self.store()?.snapshot()?.ingest_seq()?)).map_err(py_err)
    }

    /// Runs one read-only statement; the result as an unread stream.
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<ArrowStream> {
        py.detach(|| {
            // As `epistore sql`: the text is split into statements and each is planned as
            // the splitter wrote it back.
            let statements = Engine::split_statements(&query)?;
            match statements.as_slice() {
                [one] => self.stream(one),
                [] => anyhow::bail!("no SQL statement given"),
                many => anyhow::bail!("sql() runs one statement; this text holds {}", many.len()),
            }
        })
        .map_err(py_err)
    }

    /// `epistore search`: the best `limit` hits of a full-text query, only in the
    /// episodes matching `filter` when given.
    #[pyo3(signature = (query, filter=None, limit=20))]
    fn search(&self, py: Python<'_>, query: String, filter: Option<String>, limit: usize) -> PyResult<ArrowStream> {
        py.detach(|| {
            let engine = self.engine()?;
            let hits = self.runtime.block_on(engine.search(&query, limit, filter.as_deref()))?;
            Ok(ArrowStream::batches(hits.schema(), vec![hits]))
        })
        .map_err(py_err)
    }

    /// `epistore metrics`: the headline (or, `all`, every) metric pooled over `by`.
    /// With `ci`: one row per entry and metric with its bootstrap interval.
    #[pyo3(signature = (by, filter=None, all=false, ci=false, replicates=None, seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn metrics(
        &self,
        py: Python<'_>,
        by: Vec<String>,
        filter: Option<String>,
        all: bool,
        ci: bool,
        replicates: Option<usize>,
        seed: Option<u64>,
    ) -> PyResult<ArrowStream> {
        py.detach(|| {
            let keys: Vec<&str> = by.iter().map(String::as_str).collect();
            if ci {
                let settings = boards::bootstrap(replicates, seed);
                let engine = self.engine()?;
                return self.runtime.block_on(boards::metric_intervals(
                    &engine,
                    &keys,
                    filter.as_deref(),
                    all,
                    &settings,
                ));
            }
            let sql = metrics_sql(&keys, filter.as_deref(), all)?;
            self.stream(&sql)
        })
        .map_err(py_err)
    }

    /// `epistore leaderboard`: the board as text (`md`, `html`, `json`, `csv`) or, with
    /// `table`, its entries as a stream.
    #[pyo3(signature = (metric, by, filter=None, format="md", better=None, alpha=0.05, replicates=None, seed=None, errors=None))]
    #[allow(clippy::too_many_arguments)]
    fn leaderboard(
        &self,
        py: Python<'_>,
        metric: String,
        by: Vec<String>,
        filter: Option<String>,
        format: &str,
        better: Option<String>,
        alpha: f64,
        replicates: Option<usize>,
        seed: Option<u64>,
        errors: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let board = py
            .detach(|| {
                let spec =
                    boards::spec(metric, by, filter, better.as_deref(), alpha, replicates, seed, errors.as_deref())?;
                let format = boards::BoardFormat::parse(format)?;
                let engine = self.engine()?;
                let board = self.runtime.block_on(epistore_leaderboard::build(&engine, &spec))?;
                boards::render(&board, format)
            })
            .map_err(py_err)?;
        match board {
            boards::Rendered::Text(text) => Ok(text.into_pyobject(py)?.into_any().unbind()),
            boards::Rendered::Table(stream) => Ok(Py::new(py, stream)?.into_any()),
        }
    }

    /// The names of every table and view, sorted.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| {
            let engine = self.engine()?;
            let sql =
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name";
            let batches = self.runtime.block_on(engine.query(sql))?;
            let mut names = Vec::new();
            for batch in &batches {
                let column =
                    datafusion::arrow::compute::cast(batch.column(0), &datafusion::arrow::datatypes::DataType::Utf8)?;
                let column = column
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::StringArray>()
                    .context("table_name is text")?;
                names.extend(column.iter().flatten().map(str::to_string));
            }
            Ok(names)
        })
        .map_err(py_err)
    }

    /// The schema of a table or view.
    fn schema(&self, py: Python<'_>, name: String) -> PyResult<ArrowSchema> {
        py.detach(|| {
            let engine = self.engine()?;
            // The physical plan's schema: the one `sql()` streams (DataFusion may know
            // a column is never NULL in one plan and not in the other).
            let plan = self.runtime.block_on(async {
                let df = engine.context().table(name.as_str()).await?;
                df.create_physical_plan().await
            });
            let plan = plan.map_err(epistore_sql::Error::from)?;
            Ok(ArrowSchema { schema: plan.schema() })
        })
        .map_err(py_err)
    }

    /// `epistore ingest --format json`: adds packages; the summary as JSON text.
    #[pyo3(signature = (paths, chunk=512))]
    fn ingest(&self, py: Python<'_>, paths: Vec<PathBuf>, chunk: usize) -> PyResult<String> {
        py.detach(|| ingest::ingest(&*self.writer()?, &paths_of(paths)?, chunk)).map_err(py_err)
    }

    /// `epistore import --summary-format json`: imports agent logs; the summary as JSON.
    #[pyo3(signature = (paths, source_format=None, model=None, harness_level=None, task=None, cluster=None,
                        scorer=None, git_log=None, out=None, reimport=false, redact=false, mapping=None))]
    #[allow(clippy::too_many_arguments)]
    fn import_logs(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        source_format: Option<String>,
        model: Option<String>,
        harness_level: Option<String>,
        task: Option<String>,
        cluster: Option<String>,
        scorer: Option<String>,
        git_log: Option<PathBuf>,
        out: Option<PathBuf>,
        reimport: bool,
        redact: bool,
        mapping: Option<PathBuf>,
    ) -> PyResult<String> {
        py.detach(|| {
            let format =
                source_format.map(|f| epistore_cli::parse_source_format(&f).map_err(anyhow::Error::msg)).transpose()?;
            let args = epistore_cli::ImportArgs {
                paths: paths_of(paths)?,
                source_format: format,
                model,
                harness_level,
                task,
                cluster,
                scorer,
                git_log,
                mapping,
                out,
                reimport,
                redact,
                format: epistore_cli::OutputFormat::Json,
                quiet: true,
                memory_budget_mib: epistore_store::DEFAULT_MEMORY_BUDGET >> 20,
                growing: false,
            };
            // Writing package directories needs no store; importing needs the writer.
            let store = if args.out.is_some() { None } else { Some(self.writer()?) };
            ingest::import(store.as_deref(), &args)
        })
        .map_err(py_err)
    }

    /// `epistore annotate`: appends a person's judgement of an episode (an id or a
    /// unique prefix); the stored record as JSON text with its `id` and `added`.
    #[pyo3(signature = (episode, label, note=None, author=None))]
    fn annotate(
        &self,
        py: Python<'_>,
        episode: String,
        label: String,
        note: Option<String>,
        author: Option<String>,
    ) -> PyResult<String> {
        py.detach(|| {
            let written = self.writer()?.annotate(&episode, epistore_store::Judgement { label, note, author })?;
            Ok(written.to_json().to_string())
        })
        .map_err(py_err)
    }

    /// `epistore annotate --retract`: withdraws a label annotation; the retraction as
    /// JSON text.
    #[pyo3(signature = (annotation, note=None, author=None))]
    fn retract(
        &self,
        py: Python<'_>,
        annotation: String,
        note: Option<String>,
        author: Option<String>,
    ) -> PyResult<String> {
        py.detach(|| {
            let written = self.writer()?.retract(&annotation, note, author)?;
            Ok(written.to_json().to_string())
        })
        .map_err(py_err)
    }

    /// Closes the store (a writer lets other processes write again). Streams already
    /// handed out stay readable.
    fn close(&self) {
        self.session.lock().expect("session lock").take();
        self.store.lock().expect("store lock").take();
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.store.lock().expect("store lock").is_none()
    }
}

/// The SQL of `epistore metrics [--all] --by KEYS [--where COND]`.
fn metrics_sql(keys: &[&str], filter: Option<&str>, all: bool) -> Result<String> {
    Ok(if all { Engine::metrics_sql(keys, filter)? } else { Engine::headline_sql(keys, filter)? })
}

/// Opens the store at `path`: read-only (as `epistore sql` does), or for writing
/// (created on first use, as `epistore ingest` does).
#[pyfunction]
#[pyo3(signature = (path, write=false))]
fn open(py: Python<'_>, path: PathBuf, write: bool) -> PyResult<Database> {
    py.detach(|| {
        let store = if write {
            Store::open_or_create(&path).with_context(|| format!("opening the store at {}", path.display()))?
        } else {
            Store::open_read_only(&path).with_context(|| format!("opening the store at {}", path.display()))?
        };
        let runtime = Arc::new(epistore_sql::statement::runtime()?);
        Ok(Database {
            path,
            writable: write,
            store: Mutex::new(Some(Arc::new(store))),
            runtime,
            session: Mutex::new(None),
        })
    })
    .map_err(py_err)
}

/// The SQL `metrics()` runs (`epistore metrics --show-sql`).
#[pyfunction]
#[pyo3(signature = (by, filter=None, all=false))]
fn metrics_query(by: Vec<String>, filter: Option<String>, all: bool) -> PyResult<String> {
    let keys: Vec<&str> = by.iter().map(String::as_str).collect();
    metrics_sql(&keys, filter.as_deref(), all).map_err(py_err)
}

/// Runs the `epistore` command line on `argv` (the first item is the program name) and
/// returns its exit code. `--help`, `--version` and bad arguments end the process, as
/// the binary does: this is for the console script, not for use inside a program.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> i32 {
    let code = py.detach(|| epistore_cli::run(argv));
    // ExitCode has no accessor for its value; the command line returns 0, 1 or 2.
    (0..=255u8).find(|&c| ExitCode::from(c) == code).map_or(2, i32::from)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SCHEMA_VERSION", epistore_sql::SCHEMA_VERSION)?;
    m.add("METRIC_KEYS", epistore_sql::ROLLUP_KEYS.to_vec())?;
    m.add("HEADLINE", epistore_sql::HEADLINE.to_vec())?;
    // Whether this is an unoptimised (dev profile) build: benchmarks say so.
    m.add("DEBUG_BUILD", cfg!(debug_assertions))?;
    m.add_class::<Database>()?;
    m.add_class::<ArrowStream>()?;
    m.add_class::<ArrowSchema>()?;
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(metrics_query, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    Ok(())
}
