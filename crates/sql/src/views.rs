//! The shipped metric SQL (`queries/*.sql`), registered as views in every session, and
//! the functions the SQL needs that SQL cannot express.
//!
//! The files are compiled in, so the binary needs no data directory; the files stay
//! the source an analyst reads and copies.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::{Session, TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::Statistics;
use datafusion::common::{plan_err, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::datasource::ViewTable;
use datafusion::error::Result as DfResult;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::TableProviderFilterPushDown;
use datafusion::logical_expr::{create_udf, ColumnarValue, Expr, Volatility};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use epistore_package::Location;

use crate::error::Result;

/// (view name, SQL), in dependency order: helpers first.
pub const VIEWS: &[(&str, &str)] = &[
    ("episode_facts", include_str!("../../../queries/episode_facts.sql")),
    ("oracle_verdicts", include_str!("../../../queries/oracle_verdicts.sql")),
    ("verifier_judgements", include_str!("../../../queries/verifier_judgements.sql")),
    ("latest_attempts", include_str!("../../../queries/latest_attempts.sql")),
    ("cell_metrics", include_str!("../../../queries/cell_metrics.sql")),
    ("label_shares", include_str!("../../../queries/label_shares.sql")),
    ("posture_shares", include_str!("../../../queries/posture_shares.sql")),
    ("revision_changes", include_str!("../../../queries/revision_changes.sql")),
    ("revision_correctness", include_str!("../../../queries/revision_correctness.sql")),
    ("revision_pairs", include_str!("../../../queries/revision_pairs.sql")),
    ("revision_transitions", include_str!("../../../queries/revision_transitions.sql")),
    ("verifier_stats", include_str!("../../../queries/verifier_stats.sql")),
    ("verifier_pair_judgements", include_str!("../../../queries/verifier_pair_judgements.sql")),
    ("verifier_pairs", include_str!("../../../queries/verifier_pairs.sql")),
    ("localisation_facts", include_str!("../../../queries/localisation_facts.sql")),
    ("localisation", include_str!("../../../queries/localisation.sql")),
    ("label_audit", include_str!("../../../queries/label_audit.sql")),
    ("episode_costs", include_str!("../../../queries/episode_costs.sql")),
    ("task_consistency", include_str!("../../../queries/task_consistency.sql")),
    ("run_consistency", include_str!("../../../queries/run_consistency.sql")),
];

/// The views whose rows each come from one episode's rows alone (every join and window
/// in them is within one `episode_id`). Their answer over a set of episodes is the
/// union of their answers over any split of it, so each columnar segment stores them
/// computed over its own episodes ([`crate::columnar`]) and a session reads them as
/// tables: the metric views then only roll up per-episode rows. In dependency order.
pub const PER_EPISODE: &[&str] = &[
    "episode_facts",
    "oracle_verdicts",
    "revision_changes",
    "verifier_judgements",
    "revision_pairs",
    "verifier_pair_judgements",
    "localisation_facts",
];

/// Every episode's held verdict at every revision (not a view: see the file's comment).
pub const REVISION_HELD: &str = include_str!("../../../queries/revision_held.sql");

/// The SQL of a shipped view.
pub fn sql_of(name: &str) -> Option<&'static str> {
    VIEWS.iter().find(|(n, _)| *n == name).map(|(_, sql)| *sql)
}

/// Held verdicts per (episode, revision t), grouped by `keys` instead of the cell, over
/// the episodes matching `filter` (a condition on `episode_facts` columns): the CTEs of
/// queries/revision_held.sql, whose numbers the `revision_correctness` view gives (a
/// test holds them equal), so intervals and the leaderboard's curves resample them. A state is held up to the *group's* last evaluated
/// revision (docs/metrics.md §D), so the rows depend on the grouping. Columns: the cell
/// keys, `cluster`, `episode_id`, `revision`, `kept` (1), `correct_now`, `correct_ever`,
/// `correct_lost`, and `reaches` (1 when the episode itself was evaluated at t or later).
pub fn revision_rows(keys: &[&str], filter: Option<&str>) -> String {
    let sql = REVISION_HELD;
    let mut out = String::new();
    for line in sql.lines() {
        let code = line.trim_end();
        if let Some(code) = code.strip_suffix("-- @keys") {
            let code = code.trim_end();
            let partition = if keys.is_empty() {
                String::new()
            } else {
                format!("PARTITION BY {}", crate::sql_text::quote_list(keys))
            };
            let start = code.find("OVER (").expect("@keys marks the window") + "OVER (".len();
            let end = code[start..].find(')').expect("@keys marks the window") + start;
            out.push_str(&format!("{}{partition}{}\n", &code[..start], &code[end..]));
        } else if let Some(code) = code.strip_suffix("-- @filter") {
            let table = code.trim().strip_prefix("FROM ").expect("@filter marks a FROM line");
            out.push_str(&format!("{}{}\n", code.trim_end(), crate::sql_text::episode_filter(table, filter)));
        } else if let Some(code) = code.strip_suffix("-- @rows") {
            out.push_str(code.trim_end());
            break;
        } else if !code.trim_start().starts_with("--") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(
        ",
own AS (SELECT episode_id, max(revision) AS own_last FROM oracle_verdicts GROUP BY episode_id)
SELECT h.model, h.harness_level, h.task, h.\"cluster\", h.episode_id, h.t AS revision,
       1 AS kept, h.y_t AS correct_now, h.ever AS correct_ever, h.ever - h.y_t AS correct_lost,
       CASE WHEN o.own_last >= h.t THEN 1 ELSE 0 END AS reaches
FROM held h
JOIN own o ON o.episode_id = h.episode_id",
    );
    out
}

/// The body of the `verifier_pairs_at(c)` table function; `:coverage` is replaced.
pub const VERIFIER_PAIRS_AT: &str = include_str!("../../../queries/verifier_pairs_at.sql");

/// The body of the `pass_k(k)` table function; `:k` is replaced.
pub const PASS_K: &str = include_str!("../../../queries/pass_k.sql");

/// The most runs `pass_k(k)` draws.
pub const PASS_K_MAX: i64 = 1_000;

/// The text of `cell_metrics` grouped by other keys (`[]` pools everything). Lines
/// marked `-- @keys` carry the grouping keys.
pub fn cell_metrics_by(keys: &[&str], filter: Option<&str>) -> String {
    let sql = VIEWS.iter().find(|(name, _)| *name == "cell_metrics").expect("shipped").1;
    let keys = crate::sql_text::quote_list(keys);
    sql.lines()
        .filter_map(|line| {
            if line.trim_end() == "FROM episode_facts" {
                return Some(format!("{line}{}", crate::sql_text::episode_filter("episode_facts", filter)));
            }
            if !line.trim_end().ends_with("-- @keys") {
                return Some(line.to_string());
            }
            let indent = &line[..line.len() - line.trim_start().len()];
            if keys.is_empty() {
                None
            } else if let Some(clause) = ["GROUP BY", "ORDER BY"].iter().find(|c| line.trim_start().starts_with(*c)) {
                Some(format!("{indent}{clause} {keys}"))
            } else {
                Some(format!("{indent}{keys},"))
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where a session finds a [`PER_EPISODE`] view already computed: given its name and
/// the schema its SQL plans to, a table holding its rows, or None to plan it as a view.
pub(crate) type Materialized<'a> = &'a (dyn Fn(&str, SchemaRef) -> Result<Option<Arc<dyn TableProvider>>> + Sync);

/// Registers every shipped view; stored per-episode rows of the `excluded` (superseded)
/// episodes are left out, as the base tables leave them out.
pub(crate) async fn register(ctx: &SessionContext, materialized: Materialized<'_>, excluded: &[String]) -> Result<()> {
    ctx.register_udf(location_overlaps());
    ctx.register_udaf(crate::cluster_ci::udaf());
    ctx.register_udtf("verifier_pairs_at", Arc::new(SqlBodyFunction::VERIFIER_PAIRS_AT));
    ctx.register_udtf("pass_k", Arc::new(SqlBodyFunction::PASS_K));
    for (name, sql) in VIEWS {
        let context = |e: datafusion::error::DataFusionError| {
            e.context(format!("registering the view `{name}` (queries/{name}.sql)"))
        };
        if PER_EPISODE.contains(name) {
            // Planned all the same: the stored rows must have the schema the SQL gives.
            let schema = Arc::new(ctx.sql(sql).await.map_err(context)?.schema().as_arrow().clone());
            if let Some(table) = materialized(name, schema)? {
                crate::supersession::register(ctx, name, Arc::new(StoredView(table)), excluded).await?;
                continue;
            }
        }
        ctx.sql(&format!("CREATE VIEW {name} AS {sql}")).await.map_err(context)?;
    }
    Ok(())
}

/// A per-episode view read from stored rows: still a view to the catalog (its rows are
/// its SQL's, computed ahead), scanned like the table underneath, with the same
/// projection, filter and limit pushdown.
#[derive(Debug)]
struct StoredView(Arc<dyn TableProvider>);

#[async_trait::async_trait]
impl TableProvider for StoredView {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.0.supports_filters_pushdown(filters)
    }

    fn statistics(&self) -> Option<Statistics> {
        self.0.statistics()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.0.scan(state, projection, filters, limit).await
    }
}

/// `location_overlaps(prediction, truth)`: same path and overlapping inclusive line
/// ranges; a location without lines is the whole file. NULL when either is NULL.
/// Public so another engine running the shipped SQL (Ballista) can register it.
pub fn location_overlaps() -> datafusion::logical_expr::ScalarUDF {
    create_udf(
        "location_overlaps",
        vec![DataType::Utf8, DataType::Utf8],
        DataType::Boolean,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let as_strings = |a: &ArrayRef| -> DfResult<StringArray> {
                Ok(cast(a, &DataType::Utf8)?.as_any().downcast_ref::<StringArray>().expect("cast to Utf8").clone())
            };
            let (a, b) = (as_strings(&arrays[0])?, as_strings(&arrays[1])?);
            let out: BooleanArray =
                a.iter().zip(b.iter()).map(|(x, y)| Some(Location::parse(x?).overlaps(&Location::parse(y?)))).collect();
            Ok(ColumnarValue::Array(Arc::new(out)))
        }),
    )
}

/// A table function whose body is shipped SQL with one parameter filled in
/// (`verifier_pairs_at(c)`, `pass_k(k)`), planned in the calling session and returned
/// as a view.
#[derive(Debug)]
struct SqlBodyFunction {
    name: &'static str,
    body: &'static str,
    placeholder: &'static str,
    /// The parameter as SQL text, or None when the argument is not one this function takes.
    parameter: fn(&Expr) -> Option<String>,
    usage: &'static str,
}

impl SqlBodyFunction {
    const VERIFIER_PAIRS_AT: SqlBodyFunction = SqlBodyFunction {
        name: "verifier_pairs_at",
        body: VERIFIER_PAIRS_AT,
        placeholder: ":coverage",
        // `{c:?}` prints the shortest decimal that round-trips, so 0.55 stays 0.55.
        parameter: |e| literal_f64(e).filter(|c| *c > 0.0 && *c <= 1.0).map(|c| format!("{c:?}")),
        usage: "verifier_pairs_at(c) takes one number c with 0 < c <= 1",
    };
    const PASS_K: SqlBodyFunction = SqlBodyFunction {
        name: "pass_k",
        body: PASS_K,
        placeholder: ":k",
        parameter: |e| {
            literal_f64(e)
                .filter(|k| k.fract() == 0.0 && *k >= 1.0 && *k <= PASS_K_MAX as f64)
                .map(|k| format!("{}", k as i64))
        },
        usage: "pass_k(k) takes one whole number k with 1 <= k <= 1000",
    };
}

fn literal_f64(expr: &Expr) -> Option<f64> {
    match expr {
        Expr::Literal(v, _) => match v {
            ScalarValue::Float64(Some(x)) => Some(*x),
            ScalarValue::Float32(Some(x)) => Some(f64::from(*x)),
            ScalarValue::Int64(Some(x)) => Some(*x as f64),
            ScalarValue::Decimal128(Some(x), _, scale) => Some(*x as f64 / 10f64.powi(i32::from(*scale))),
            _ => None,
        },
        Expr::Cast(c) => literal_f64(&c.expr),
        Expr::TryCast(c) => literal_f64(&c.expr),
        _ => None,
    }
}

impl TableFunctionImpl for SqlBodyFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let parameter = match args.exprs() {
            [e] => (self.parameter)(e),
            _ => None,
        };
        let Some(parameter) = parameter else {
            return plan_err!("{}", self.usage);
        };
        let Some(state) = args.session().as_any().downcast_ref::<SessionState>() else {
            return plan_err!("{} needs a DataFusion SessionState", self.name);
        };
        let sql = self.body.replace(self.placeholder, &parameter);
        // Planning only resolves this session's in-memory tables: nothing here waits
        // on I/O, so driving the future to completion in place is safe.
        let plan = futures::executor::block_on(state.create_logical_plan(&sql))?;
        Ok(Arc::new(ViewTable::new(plan, Some(sql))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_metrics_regroups_on_the_marked_lines_only() {
        let by_model = cell_metrics_by(&["model", "cluster"], None);
        assert!(by_model.contains("    \"model\", \"cluster\",\n    sum(episodes)"));
        assert!(by_model.contains("\nFROM episode_facts\nGROUP BY \"model\", \"cluster\"\n"));
        assert!(by_model.trim_end().ends_with("ORDER BY \"model\", \"cluster\""));
        let pooled = cell_metrics_by(&[], Some("task = 't'"));
        assert!(!pooled.contains("GROUP BY") && !pooled.contains("ORDER BY"));
        assert!(pooled.contains("SELECT\n    sum(episodes)"));
        assert!(pooled.trim_end().ends_with("FROM episode_facts WHERE task = 't'"));
    }

    #[test]
    fn revision_rows_regroup_and_filter_the_shipped_text() {
        let rows = revision_rows(&["model", "cluster"], Some("task = 't'"));
        assert!(rows.contains("OVER (PARTITION BY \"model\", \"cluster\") AS cell_last\n"), "{rows}");
        assert!(rows.contains(
            "FROM oracle_verdicts WHERE episode_id IN (SELECT episode_id FROM episode_facts WHERE task = 't')"
        ));
        assert!(
            rows.contains("GROUP BY v.model, v.harness_level, v.task, v.\"cluster\", r.t, v.episode_id\n),\nown AS")
        );
        assert!(!rows.contains("-- @") && !rows.contains("current_correctness"), "{rows}");
        let pooled = revision_rows(&[], None);
        assert!(pooled.contains("OVER () AS cell_last\n") && pooled.contains("    FROM oracle_verdicts\n"), "{pooled}");
    }
}
