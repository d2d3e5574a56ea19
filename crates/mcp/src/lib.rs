//! `epistore mcp`: a read-only Model Context Protocol server over a store, on the
//! official Rust SDK (rmcp), so a coding agent can ask the store about its own runs
//! (docs/mcp.md).
//!
//! Every tool reads; none writes. SQL goes through the same read-only planning and
//! statement limits as `epistore sql`. Every answer is bounded in rows and bytes, and
//! says so when it was cut, so one careless `SELECT *` cannot flood an agent's context.

mod describe;
mod summary;

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use epistore_sql::{format_batches, statement, Engine, Format};
use epistore_store::Store;
use futures::StreamExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;

/// Why the server could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] epistore_store::Error),
    #[error(transparent)]
    Sql(#[from] epistore_sql::Error),
    #[error(transparent)]
    Leaderboard(#[from] epistore_leaderboard::Error),
    #[error("{0}")]
    Usage(String),
    #[error("MCP: {0}")]
    Protocol(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How much one answer may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Rows a tool returns unless the call asks for fewer (or more, up to `max_rows_cap`).
    pub rows: usize,
    /// The most rows a call may ask for.
    pub max_rows_cap: usize,
    /// Bytes of text in one answer.
    pub bytes: usize,
    /// Time one query may take, planning included (as `serve` bounds it).
    pub query_time: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { rows: 100, max_rows_cap: 1_000, bytes: 48 << 10, query_time: std::time::Duration::from_secs(60) }
    }
}

/// The server's settings.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub limits: Limits,
    /// Where `epistore ui` serves this store (`http://127.0.0.1:8765`): episode
    /// summaries link to their pages there.
    pub ui_url: Option<String>,
}

/// The server: a store, its current SQL session, the settings and the tools.
#[derive(Clone)]
pub struct EpistoreMcp {
    store: Arc<Store>,
    session: Arc<tokio::sync::Mutex<Option<Arc<Engine>>>>,
    options: Arc<Options>,
    tool_router: ToolRouter<Self>,
}

/// Serves `store` over stdin and stdout until the client closes the connection.
pub async fn serve_stdio(store: Store, options: Options) -> Result<()> {
    let server = EpistoreMcp::new(store, options);
    let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| Error::Protocol(e.to_string()))?;
    running.waiting().await.map_err(|e| Error::Protocol(e.to_string()))?;
    Ok(())
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TablesArgs {
    /// Only this table or view (all of them when absent).
    pub name: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SqlArgs {
    /// One read-only statement (SELECT, WITH, EXPLAIN) in DataFusion's SQL dialect.
    pub query: String,
    /// Rows to return (default 100, at most 1000).
    pub max_rows: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Full-text query: words (all must match), "a phrase", AND / OR / NOT, and the
    /// fields role:assistant, tool:Bash, kind:output (system, user, assistant, tool,
    /// output, command, diff), path:"src/app.py".
    pub query: String,
    /// Hits to return, best first (default 20, at most 1000).
    pub limit: Option<usize>,
    /// Only episodes matching this SQL condition on episode_facts columns
    /// (model, harness_level, task, posture, label, source_format, ...).
    #[serde(rename = "where")]
    pub filter: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EpisodeArgs {
    /// The episode id, or a unique prefix of it (at least 4 hex digits).
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MetricArgs {
    /// A metric name (the `metric_names` tool lists them), e.g. avs_rate, pass_rate,
    /// stale_check_rate.
    pub metric: String,
    /// Keys to group by: any of model, harness_level, task, cluster (none pools all).
    #[serde(default)]
    pub by: Vec<String>,
    /// Only episodes matching this SQL condition on episode_facts columns.
    #[serde(rename = "where")]
    pub filter: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareArgs {
    /// A metric name, as for `metric`.
    pub metric: String,
    /// Keys that make an entry: any of model, harness_level, task (e.g. ["model"]).
    pub by: Vec<String>,
    /// The first entry: its key values joined with " / " (e.g. "gpt-4o / H1").
    pub a: String,
    /// The second entry.
    pub b: String,
    /// Only episodes matching this SQL condition on episode_facts columns.
    #[serde(rename = "where")]
    pub filter: Option<String>,
}

/// An answer for the agent, or the error it should read.
type Answer = std::result::Result<String, String>;

fn refuse(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[tool_router]
impl EpistoreMcp {
    pub fn new(store: Store, options: Options) -> EpistoreMcp {
        EpistoreMcp {
            store: Arc::new(store),
            session: Arc::new(tokio::sync::Mutex::new(None)),
            options: Arc::new(options),
            tool_router: Self::tool_router(),
        }
    }

    /// The session over the latest snapshot (rebuilt after an ingest or an annotation).
    async fn engine(&self) -> Result<Arc<Engine>> {
        let generation = self.store.snapshot()?.generation()?;
        let mut session = self.session.lock().await;
        if let Some(engine) = session.as_ref().filter(|e| e.generation == generation) {
            return Ok(engine.clone());
        }
        let engine = Arc::new(Engine::open(&self.store).await?);
        *session = Some(engine.clone());
        Ok(engine)
    }

    /// Runs `sql` read-only and returns at most `rows` rows as CSV within the byte
    /// limit, with a note when there were more. Reads no more batches than it shows.
    async fn bounded_csv(&self, sql: &str, rows: usize) -> Result<String> {
        let engine = self.engine().await?;
        let limit = self.options.limits.query_time;
        let deadline = tokio::time::Instant::now() + limit;
        let df = statement::plan_read_only_until(engine.context(), sql, deadline).await?;
        let schema = std::sync::Arc::new(df.schema().as_arrow().clone());
        let mut stream = df.execute_stream().await.map_err(epistore_sql::Error::from)?;
        let mut batches: Vec<RecordBatch> = vec![];
        let mut held = 0;
        let mut more = false;
        let late =
            || Error::Usage(format!("the query ran past its {} s limit: aggregate or filter more", limit.as_secs()));
        while let Some(batch) = tokio::time::timeout_at(deadline, stream.next()).await.map_err(|_| late())? {
            let batch = batch.map_err(epistore_sql::Error::from)?;
            if held + batch.num_rows() > rows {
                batches.push(batch.slice(0, rows - held));
                held = rows;
                more = true;
                break;
            }
            held += batch.num_rows();
            batches.push(batch);
        }
        if batches.is_empty() {
            batches.push(RecordBatch::new_empty(schema));
        }
        let text = format_batches(&batches, Format::Csv)?;
        Ok(self.fit(text, held, more))
    }

    /// Cuts `text` (CSV with a header, `rows` rows) to the byte limit at a line end,
    /// and says what was left out.
    fn fit(&self, text: String, rows: usize, more_rows: bool) -> String {
        let limit = self.options.limits.bytes;
        if text.len() <= limit {
            return if more_rows {
                format!(
                    "{text}\n[cut: {rows} rows shown and the result has more. Filter, aggregate or add LIMIT; \
                     max_rows goes up to {}.]",
                    self.options.limits.max_rows_cap
                )
            } else {
                text
            };
        }
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let kept = text[..end].rfind('\n').map_or(end, |i| i + 1);
        let shown = text[..kept].lines().count().saturating_sub(1);
        format!(
            "{}\n[cut at {limit} bytes: {shown} of {rows}{} rows shown. Select fewer or narrower columns \
             (substr() long text), or aggregate.]",
            &text[..kept],
            if more_rows { "+" } else { "" }
        )
    }

    fn rows_asked(&self, asked: Option<usize>) -> std::result::Result<usize, String> {
        let cap = self.options.limits.max_rows_cap;
        match asked {
            None => Ok(self.options.limits.rows.min(cap)),
            Some(0) => Err("max_rows must be at least 1".into()),
            Some(n) if n > cap => Err(format!("max_rows is at most {cap}")),
            Some(n) => Ok(n),
        }
    }

    #[tool(description = "List the store's tables and views: what each holds and its columns (name and type). \
        Start here. Every table has episode_id and the cell keys model, harness_level, task; join on episode_id.")]
    async fn tables(&self, Parameters(args): Parameters<TablesArgs>) -> Answer {
        let engine = self.engine().await.map_err(refuse)?;
        let sql = "SELECT c.table_name, t.table_type, c.column_name, c.data_type \
                   FROM information_schema.columns c JOIN information_schema.tables t \
                   ON t.table_name = c.table_name AND t.table_schema = c.table_schema \
                   WHERE c.table_schema = 'public' ORDER BY c.table_name, c.ordinal_position";
        let batches = engine.query(sql).await.map_err(refuse)?;
        let rows = summary::string_rows(&batches);
        let about = describe::descriptions();
        let mut out = String::new();
        let mut current: Option<String> = None;
        for row in rows.iter().filter(|r| args.name.as_deref().is_none_or(|n| r[0] == n)) {
            if current.as_deref() != Some(&row[0]) {
                let kind = if row[1] == "VIEW" { "view" } else { "table" };
                out.push_str(&format!("\n{} ({kind})", row[0]));
                if let Some(text) = about.get(&row[0]) {
                    out.push_str(&format!(": {text}"));
                }
                out.push_str("\n  columns:");
                current = Some(row[0].clone());
            } else {
                out.push(',');
            }
            out.push_str(&format!(" {} {}", row[2], row[3]));
        }
        if out.is_empty() {
            return Err(format!("no table or view is called {:?}", args.name.unwrap_or_default()));
        }
        out.push_str(
            "\n\nFunctions: search(query [, limit]) as a table, annotated(episode_id, label), \
             json_get_str(json, key...) and kin, pass_k(k), verifier_pairs_at(c).",
        );
        Ok(self.fit(out.trim_start().to_string(), 0, false))
    }

    #[tool(description = "Run one read-only SQL statement (DataFusion dialect) over the store; the result as CSV. \
        Statements that write or change the catalog are refused. At most max_rows rows (default 100) and 48 KB \
        come back, with a note when the result was cut: aggregate in SQL rather than fetching rows.")]
    async fn sql(&self, Parameters(args): Parameters<SqlArgs>) -> Answer {
        let rows = self.rows_asked(args.max_rows)?;
        self.bounded_csv(&args.query, rows).await.map_err(refuse)
    }

    #[tool(description = "Find runs by what happened in them: full-text search over the messages, tool output, \
        commands and edit diffs of every episode. Hits best first, with episode_id and the record's seq \
        (join with the SQL tables on episode_id and seq).")]
    async fn search(&self, Parameters(args): Parameters<SearchArgs>) -> Answer {
        let limit = self.rows_asked(Some(args.limit.unwrap_or(20)))?;
        if let Some(f) = &args.filter {
            epistore_sql::sql_text::check_filter(f).map_err(refuse)?;
        }
        let engine = self.engine().await.map_err(refuse)?;
        let batch = engine.search(&args.query, limit, args.filter.as_deref()).await.map_err(refuse)?;
        let rows = batch.num_rows();
        let text = format_batches(&[batch], Format::Csv).map_err(refuse)?;
        Ok(self.fit(text, rows, false))
    }

    #[tool(description = "One episode as a compact text summary: its cell, the agent's completion claim, the \
        derived evidence posture, admission, the evaluator's verdict and the recorder's label (never one \
        'success'), revisions, checks with their freshness, the task as given, the last message, people's \
        annotations, and how to open it in full.")]
    async fn episode(&self, Parameters(args): Parameters<EpisodeArgs>) -> Answer {
        let engine = self.engine().await.map_err(refuse)?;
        let text =
            summary::episode(&self.store, &engine, &args.id, self.options.ui_url.as_deref()).await.map_err(refuse)?;
        Ok(self.fit(text, 0, false))
    }

    #[tool(description = "The metrics this store computes with intervals (names and what they measure), for the \
        metric and compare tools.")]
    async fn metric_names(&self) -> Answer {
        let mut out = String::from("metric (view): definition\n");
        for family in epistore_sql::intervals::families() {
            for m in &family.metrics {
                out.push_str(&format!("{} ({}): {}\n", m.name, family.view, m.description));
            }
        }
        Ok(self.fit(out, 0, false))
    }

    #[tool(description = "A population metric per entry with its 95% bootstrap interval over task clusters: \
        value, lo, hi, the pooled denominator n and the number of clusters. A ratio with no denominator is \
        NULL, not 0.")]
    async fn metric(&self, Parameters(args): Parameters<MetricArgs>) -> Answer {
        let engine = self.engine().await.map_err(refuse)?;
        let keys: Vec<&str> = args.by.iter().map(String::as_str).collect();
        if let Some(f) = &args.filter {
            epistore_sql::sql_text::check_filter(f).map_err(refuse)?;
        }
        epistore_sql::intervals::find_metric(&args.metric).map_err(refuse)?;
        let settings = epistore_stats::Bootstrap::default();
        let intervals = engine
            .metric_intervals(&[args.metric.as_str()], &keys, args.filter.as_deref(), &settings)
            .await
            .map_err(refuse)?;
        let mut out = format!("{}{}value,lo,hi,n,clusters\n", keys.join(","), if keys.is_empty() { "" } else { "," });
        let number = |v: Option<f64>| v.map_or("NULL".to_string(), |v| format!("{v:.4}"));
        for i in &intervals {
            for k in &i.key {
                out.push_str(&summary::csv_field(k));
                out.push(',');
            }
            out.push_str(&format!(
                "{},{},{},{},{}\n",
                number(i.interval.estimate),
                number(i.interval.lo),
                number(i.interval.hi),
                i.n,
                i.clusters
            ));
        }
        out.push_str(&format!(
            "\n95% percentile bootstrap over task clusters, {} replicates, seed {}.",
            settings.replicates, settings.seed
        ));
        Ok(self.fit(out, intervals.len(), false))
    }

    #[tool(description = "Compare two entries on a metric, paired on the task clusters both have: the mean \
        difference a - b with its interval, the sign-flip p-value and the Holm-adjusted p over every pair of \
        entries (and McNemar's exact test on single binary outcomes).")]
    async fn compare(&self, Parameters(args): Parameters<CompareArgs>) -> Answer {
        let engine = self.engine().await.map_err(refuse)?;
        let spec = epistore_leaderboard::Spec {
            metric: args.metric.clone(),
            by: args.by.clone(),
            filter: args.filter.clone(),
            bootstrap: Default::default(),
            alpha: 0.05,
            direction: None,
            errors: None,
            generated_by: format!("epistore mcp {}", env!("CARGO_PKG_VERSION")),
        };
        if let Some(f) = &spec.filter {
            epistore_sql::sql_text::check_filter(f).map_err(refuse)?;
        }
        let all = epistore_leaderboard::compare_all(&engine, &spec).await.map_err(refuse)?;
        let found = all.iter().find_map(|c| {
            if c.a == args.a && c.b == args.b {
                Some((c, 1.0))
            } else if c.a == args.b && c.b == args.a {
                Some((c, -1.0))
            } else {
                None
            }
        });
        let Some((c, sign)) = found else {
            let mut names: Vec<&str> = all.iter().flat_map(|c| [c.a.as_str(), c.b.as_str()]).collect();
            names.sort_unstable();
            names.dedup();
            return Err(format!(
                "no comparison of {:?} and {:?} on {} by {}: the entries are {} (an entry is its key values \
                 joined with \" / \"; two entries are compared only on task clusters both have)",
                args.a,
                args.b,
                args.metric,
                args.by.join(", "),
                names.join("; ")
            ));
        };
        let number = |v: Option<f64>| v.map_or("NULL".to_string(), |v| format!("{:.4}", v * sign));
        let (lo, hi) = if sign > 0.0 { (c.lo, c.hi) } else { (c.hi, c.lo) };
        let mut out = format!(
            "{} - {} on {}: mean difference {} (95% interval {} to {}) over {} shared task clusters\n\
             sign-flip p = {:.4}{}; Holm-adjusted over {} pairs: {:.4}\n",
            args.a,
            args.b,
            args.metric,
            number(Some(c.mean_difference)),
            number(lo),
            number(hi),
            c.clusters,
            c.p,
            if c.exact { " (exact)" } else { " (Monte Carlo)" },
            all.len(),
            c.p_holm
        );
        if let Some(m) = &c.mcnemar {
            out.push_str(&format!("McNemar exact: {}\n", serde_json::to_string(m).unwrap_or_default()));
        }
        Ok(out)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for EpistoreMcp {
    fn get_info(&self) -> ServerConfig {
        let mut info = Implementation::from_build_env();
        info.name = "epistore".into();
        info.version = env!("CARGO_PKG_VERSION").into();
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(info)
            .with_instructions(INSTRUCTIONS)
    }
}

/// What the server tells the agent about itself on connecting.
const INSTRUCTIONS: &str = "Read-only access to an epistore store: episodes (runs) of coding agents across \
models, harness levels (H0 bare task .. H3 with a verification protocol) and tasks, with what each agent did, \
ran, saw and changed, its checks and its outcome. Start with `tables` (what each table holds), then `sql` \
(aggregate in SQL: answers are cut at 100 rows by default), `search` to find runs by what happened in them, \
`episode` to read one run, `metric` and `compare` for population metrics with intervals. Keep apart what the \
store keeps apart: the agent's completion claim (agent_reported_complete), the derived evidence posture, the \
admission decision, the evaluator's verdict (correct) and the recorder's label are different fields; people's \
judgements are in `annotations`. NULL means not recorded or undefined (a ratio over nothing), never 0.";
