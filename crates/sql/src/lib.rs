//! SQL over an epistore store: Arrow tables built from a store snapshot, registered in
//! a DataFusion session, and a read-only query entry point.
//!
//! Everything here reads; nothing writes to the store. Statements that would write
//! files or change the catalog (`COPY`, `CREATE`, `INSERT`, `SET`, ...) are refused.

pub mod annotations;
pub mod bounded;
mod checked_arithmetic;
mod checked_sum;
mod cluster_ci;
pub mod columnar;
pub mod episode_list;
mod error;
pub mod export;
pub mod intervals;
mod json;
mod output;
pub mod prices;
mod provider;
pub mod search;
pub mod sql_text;
pub mod statement;
mod supersession;
mod tables;
pub mod views;

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use epistore_store::Store;

pub use error::{Error, Result};
pub use output::{display_float, format_batches, format_expanded, printable, Format};
pub use provider::{Selection, StoreData, StoreTable};
pub use tables::TableKind;

/// Version of the SQL schema (tables and columns) this build registers.
pub const SCHEMA_VERSION: &str = "epistore-sql/1";

/// Keys `Engine::metrics_sql` can group by.
pub const METRIC_KEYS: &[&str] = &["model", "harness_level", "task", "cluster"];

/// Keys `cell_metrics` can also be rolled up by (without intervals): columns of
/// `episode_facts` that are not cell keys, such as the importer format.
pub const ROLLUP_KEYS: &[&str] = &["model", "harness_level", "task", "cluster", "source_format"];

/// The settings of every session over store tables, the ones that compute stored
/// per-episode views included (so both plan the same SQL the same way). Public so a
/// session over an export can start from the same settings.
pub fn session_config() -> SessionConfig {
    let mut config = SessionConfig::new().with_default_catalog_and_schema("epistore", "public");
    // Read strings back as the Utf8 the tables declare.
    config.options_mut().execution.parquet.schema_force_view_types = false;
    config
}

/// Integer arithmetic that fails instead of wrapping: `sum` ([`checked_sum`]) and
/// `+ - *` ([`checked_arithmetic`]). Installed on every session over store tables
/// before any view is planned (a view keeps the `sum` it was planned with).
pub(crate) fn checked(ctx: &SessionContext) {
    ctx.register_udaf(checked_sum::checked_sum());
    checked_arithmetic::install(ctx);
}

/// A SQL session over one consistent snapshot of a store.
pub struct Engine {
    ctx: SessionContext,
    /// The ingest sequence of the snapshot the tables were built from.
    pub snapshot_seq: u64,
    /// The snapshot's ingest sequence and annotation count: a cached session is
    /// current while the store's [`epistore_store::Snapshot::generation`] equals it.
    pub generation: epistore_store::Generation,
    data: Option<Arc<StoreData>>,
    search: search::SearchIndexes,
}

/// `epistore_info(key, value)`: which schema and which snapshot a session answers from.
fn info_batch(snapshot_seq: u64, episodes: u64) -> Result<RecordBatch> {
    use datafusion::arrow::array::StringArray;
    let keys = StringArray::from(vec!["schema_version", "store_format", "snapshot_seq", "episodes"]);
    let values = StringArray::from(vec![
        SCHEMA_VERSION.to_string(),
        epistore_store::STORE_FORMAT.to_string(),
        snapshot_seq.to_string(),
        episodes.to_string(),
    ]);
    Ok(RecordBatch::try_from_iter(vec![("key", Arc::new(keys) as _), ("value", Arc::new(values) as _)])?)
}

/// The headline metrics: the columns of `epistore metrics` unless `--all`.
pub const HEADLINE: &[&str] = &[
    "episodes",
    "avs_rate",
    "m_hir",
    "verification_autonomy",
    "attribution_completeness",
    "tool_recovery",
    "stale_check_rate",
    "coverage",
    "selective_risk",
    "sound_completion",
];

/// The models of the store's episodes (from its cell index, without a scan).
fn store_models(snapshot: &epistore_store::Snapshot) -> Result<Vec<String>> {
    let mut models: Vec<String> = snapshot.cells()?.into_iter().map(|c| c.model).collect();
    models.sort();
    models.dedup();
    Ok(models)
}

impl Engine {
    /// Snapshots the store and registers its tables over the columnar segments
    /// (building the ones the snapshot lacks first).
    pub async fn open(store: &Store) -> Result<Engine> {
        Self::open_with_progress(store, &|_, _| {}).await
    }

    /// As [`Engine::open`], reporting (episodes done, episodes to do) while segments
    /// are built.
    pub async fn open_with_progress(store: &Store, progress: columnar::Progress<'_>) -> Result<Engine> {
        let snapshot = store.snapshot()?;
        let snapshot_seq = snapshot.ingest_seq()?;
        let episodes = snapshot.episode_count()?;
        let models = store_models(&snapshot)?;
        let segments = match columnar::segments_for(store, &snapshot, progress) {
            Ok(segments) => segments,
            // A store on read-only media, or a directory this user may not write:
            // answer from the store itself rather than fail.
            Err(Error::Store(epistore_store::Error::Io { .. })) => {
                drop(snapshot);
                return Self::open_direct(store).await;
            }
            Err(e) => return Err(e),
        };
        let ctx = Self::context_for_store();
        // The Parquet files of one table (or stored view) across every segment.
        let over_segments = |name: &str, schema: SchemaRef| -> Result<Arc<dyn TableProvider>> {
            if segments.is_empty() {
                return Ok(Arc::new(MemTable::try_new(schema, vec![vec![]])?));
            }
            let urls = segments
                .iter()
                .map(|s| ListingTableUrl::parse(s.table_file(name).to_string_lossy()))
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
            let config =
                ListingTableConfig::new_with_multi_paths(urls).with_listing_options(options).with_schema(schema);
            Ok(Arc::new(ListingTable::try_new(config)?))
        };
        let tables = TableKind::ALL
            .iter()
            .map(|k| Ok((k.name(), over_segments(k.name(), k.schema())?)))
            .collect::<Result<Vec<_>>>()?;
        let excluded = Self::register_tables(&ctx, &snapshot, tables).await?;
        let annotations = (annotations::read(&snapshot)?, snapshot.generation()?);
        let stored_views = |name: &str, schema: SchemaRef| over_segments(name, schema).map(Some);
        let indexes = search::SearchIndexes::over(&segments, &excluded);
        Self::finish(ctx, snapshot_seq, episodes, &models, annotations, None, &stored_views, &excluded, indexes).await
    }

    /// Registers tables that decode episodes straight from the store (no columnar
    /// segments are read or written): slower, but touches nothing beside the store.
    pub async fn open_direct(store: &Store) -> Result<Engine> {
        let snapshot = store.snapshot()?;
        let snapshot_seq = snapshot.ingest_seq()?;
        let episodes = snapshot.episode_count()?;
        let models = store_models(&snapshot)?;
        let excluded = supersession::superseded(&snapshot)?;
        let annotations = (annotations::read(&snapshot)?, snapshot.generation()?);
        let data = Arc::new(StoreData::new(snapshot));
        let ctx = Self::context_for_store();
        let tables: Vec<(&str, Arc<dyn TableProvider>)> =
            TableKind::ALL.iter().map(|&k| (k.name(), Arc::new(StoreTable::new(k, data.clone())) as _)).collect();
        Self::register_tables_excluding(&ctx, &excluded, tables).await?;
        let indexes = search::SearchIndexes::none();
        let no_views = |_: &str, _| Ok(None);
        Self::finish(ctx, snapshot_seq, episodes, &models, annotations, Some(data), &no_views, &excluded, indexes).await
    }

    /// Registers the base tables without the episodes a later import supersedes (as
    /// `snapshot` knows them), and returns those episodes' ids.
    async fn register_tables(
        ctx: &SessionContext,
        snapshot: &epistore_store::Snapshot,
        tables: Vec<(&str, Arc<dyn TableProvider>)>,
    ) -> Result<Vec<String>> {
        let excluded = supersession::superseded(snapshot)?;
        Self::register_tables_excluding(ctx, &excluded, tables).await?;
        Ok(excluded)
    }

    async fn register_tables_excluding(
        ctx: &SessionContext,
        excluded: &[String],
        tables: Vec<(&str, Arc<dyn TableProvider>)>,
    ) -> Result<()> {
        for (name, provider) in tables {
            supersession::register(ctx, name, provider, excluded).await?;
        }
        Ok(())
    }

    fn context_for_store() -> SessionContext {
        let ctx = SessionContext::new_with_config(session_config().with_information_schema(true));
        checked(&ctx);
        bounded::install(&ctx);
        // JSON functions for the JSON text columns: `messages.arguments`,
        // `manifest_extra`, `outcome_extra`, every `extra`.
        for udf in json::functions() {
            ctx.register_udf(udf);
        }
        ctx
    }

    #[allow(clippy::too_many_arguments)] // one session's parts, gathered by its two openers
    async fn finish(
        ctx: SessionContext,
        snapshot_seq: u64,
        episodes: u64,
        models: &[String],
        ((annotations, labels), generation): ((RecordBatch, annotations::ActiveLabels), epistore_store::Generation),
        data: Option<Arc<StoreData>>,
        stored_views: views::Materialized<'_>,
        excluded: &[String],
        search: search::SearchIndexes,
    ) -> Result<Engine> {
        ctx.register_batch("epistore_info", info_batch(snapshot_seq, episodes)?)?;
        ctx.register_batch("model_prices", prices::PriceTable::in_force()?.batch(models)?)?;
        ctx.register_batch(annotations::TABLE, annotations)?;
        ctx.register_udf(annotations::annotated(Arc::new(labels)));
        supersession::register_all_episodes(&ctx, excluded).await?;
        views::register(&ctx, stored_views, excluded).await?;
        ctx.register_udtf("search", Arc::new(search::SearchFunction(search.clone())));
        Ok(Engine { ctx, snapshot_seq, generation, data, search })
    }

    /// The best `limit` hits of a full-text `query` (tantivy's syntax: phrases,
    /// AND/OR/NOT, `role:`, `tool:`, `kind:`, `path:`), only in the episodes matching
    /// `filter` (a condition on `episode_facts` columns, as `--where` takes) when given.
    /// The same rows as `SELECT * FROM search(query, limit)`, filtered.
    pub async fn search(&self, query: &str, limit: usize, filter: Option<&str>) -> Result<RecordBatch> {
        let episodes = match filter {
            None => None,
            Some(f) => {
                let sql = format!(
                    "SELECT episode_id FROM episode_facts{}",
                    sql_text::episode_filter("episode_facts", Some(f))
                );
                let mut ids = std::collections::HashSet::new();
                for batch in self.query(&sql).await? {
                    let column = batch.column(0).as_any().downcast_ref::<datafusion::arrow::array::StringArray>();
                    let Some(column) = column else {
                        return Err(Error::Usage("episode_facts.episode_id is not text".into()));
                    };
                    ids.extend(column.iter().flatten().map(str::to_string));
                }
                Some(ids)
            }
        };
        let hits = self.search.search(query, limit, episodes)?;
        search::batch(&hits)
    }

    /// Episodes decoded so far by this session's scans.
    /// (Only sessions from [`Engine::open_direct`] decode; others read segments.)
    pub fn decoded_episodes(&self) -> u64 {
        self.data.as_ref().map_or(0, |d| d.decoded())
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// Runs one read-only statement and collects its result: at least one batch, so an
    /// empty result still carries its columns (a table prints its header, a CSV its
    /// header line).
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let df = statement::plan_read_only(&self.ctx, sql).await?;
        let schema = Arc::new(df.schema().as_arrow().clone());
        let batches = df.collect().await?;
        Ok(if batches.is_empty() { vec![RecordBatch::new_empty(schema)] } else { batches })
    }

    /// Splits a script into statements (a `;` inside a string or comment does not
    /// split), for running them one at a time.
    pub fn split_statements(script: &str) -> Result<Vec<String>> {
        statement::split(script)
    }

    /// The headline metrics pooled over `keys` (any of model, harness_level, task,
    /// cluster; none pools everything), over the episodes matching `filter` (a SQL
    /// condition on `episode_facts` columns). This is the text of `cell_metrics`
    /// regrouped, so every roll-up pools counts exactly as the view does.
    /// [`Engine::metrics_sql`] cut to the keys and the [`HEADLINE`] metrics, sorted by
    /// the keys: what `epistore metrics` prints without `--all`.
    pub fn headline_sql(keys: &[&str], filter: Option<&str>) -> Result<String> {
        let sql = Self::metrics_sql(keys, filter)?;
        let columns: Vec<&str> = keys.iter().copied().chain(HEADLINE.iter().copied()).collect();
        let mut sql = format!("SELECT {} FROM (\n{sql}\n)", sql_text::quote_list(&columns));
        if !keys.is_empty() {
            // Order is not kept through a subquery: sort the outer result.
            sql.push_str(&format!("\nORDER BY {}", sql_text::quote_list(keys)));
        }
        Ok(sql)
    }

    /// `metrics --preset runs`: what an analyst asks first of imported runs, pooled
    /// over `keys` (any of [`ROLLUP_KEYS`]) for the episodes matching `filter` (a
    /// condition on `episode_facts` columns). Descriptive, one row per group:
    ///
    /// - `runs`; `correct_known` and `correct_rate` (over runs whose `correct` is known;
    ///   NULL when none is); `claimed_rate` (the agent's completion claim, over runs
    ///   where it is known);
    /// - the share of each derived posture (`current` .. `unknown`), over all runs;
    /// - `stale_check_rate`: stale agent checks over agent checks (NULL without one);
    /// - per run, over the runs that recorded it: `tool_calls`, `edits` (ok mutating
    ///   actions), `tokens_in`, `tokens_out`, `cost_usd`, `seconds` (wall time); and
    ///   `cost_usd_total`.
    ///
    /// A mean over no recorded value is NULL, never 0 ("not recorded" is not "none").
    pub fn runs_sql(keys: &[&str], filter: Option<&str>) -> Result<String> {
        sql_text::check_keys(keys, ROLLUP_KEYS, "metrics", |_| None)?;
        // Keys from episode_facts (episodes has the same names).
        let qualified: Vec<String> = keys.iter().map(|k| format!("f.{}", sql_text::quote_ident(k))).collect();
        let select_keys: String =
            keys.iter().map(|k| format!("f.{q} AS {q}, ", q = sql_text::quote_ident(k))).collect();
        let group_by = if keys.is_empty() {
            String::new()
        } else {
            format!("\nGROUP BY {}\nORDER BY {}", qualified.join(", "), sql_text::quote_list(keys))
        };
        let shares: Vec<String> = epistore_package::Posture::NAMES
            .iter()
            .map(|p| format!("avg(CASE WHEN f.posture = '{p}' THEN 1.0 ELSE 0.0 END) AS {p}"))
            .collect();
        let filter = sql_text::episode_filter_on("f.episode_id", filter);
        Ok(format!(
            "SELECT {select_keys}count(*) AS runs,
       count(f.correct) AS correct_known,
       avg(CASE WHEN f.correct THEN 1.0 WHEN NOT f.correct THEN 0.0 END) AS correct_rate,
       avg(CASE WHEN f.agent_reported_complete THEN 1.0 WHEN NOT f.agent_reported_complete THEN 0.0 END) AS claimed_rate,
       {shares},
       CAST(sum(f.stale_agent_checks) AS DOUBLE) / nullif(sum(f.agent_checks), 0) AS stale_check_rate,
       avg(CASE WHEN e.has_tools THEN CAST(e.n_tools AS DOUBLE) END) AS tool_calls,
       avg(CASE WHEN e.has_actions THEN CAST(coalesce(x.edits, 0) AS DOUBLE) END) AS edits,
       avg(CAST(e.tokens_in AS DOUBLE)) AS tokens_in,
       avg(CAST(e.tokens_out AS DOUBLE)) AS tokens_out,
       avg(e.cost_usd) AS cost_usd,
       sum(e.cost_usd) AS cost_usd_total,
       avg(CAST(e.wall_ms AS DOUBLE) / 1000.0) AS seconds
FROM episode_facts f
JOIN episodes e ON e.episode_id = f.episode_id
LEFT JOIN (SELECT episode_id, count(*) AS edits FROM actions WHERE mutates AND ok GROUP BY episode_id) x
  ON x.episode_id = f.episode_id{filter}{group_by}",
            shares = shares.join(",\n       "),
        ))
    }

    /// Whether every episode was imported from an agent's log (`metrics` then
    /// defaults to the `runs` preset): false for an empty store.
    pub async fn all_imported(&self) -> Result<bool> {
        let batches =
            self.query("SELECT count(*) > 0 AND count(source_format) = count(*) AS all_imported FROM episodes").await?;
        use datafusion::arrow::array::AsArray;
        Ok(batches.first().is_some_and(|b| b.num_rows() == 1 && b.column(0).as_boolean().value(0)))
    }

    pub fn metrics_sql(keys: &[&str], filter: Option<&str>) -> Result<String> {
        sql_text::check_keys(keys, ROLLUP_KEYS, "metrics", |_| None)?;
        Ok(views::cell_metrics_by(keys, filter))
    }
}
