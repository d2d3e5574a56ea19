//! Leaderboards with honest statistics (docs/metrics.md §G): every entry's pooled value with
//! its task-cluster bootstrap interval, a paired comparison with the entry ranked
//! above, Holm-adjusted over the board, tie groups, and the episode ids behind each
//! score; rendered as Markdown, one self-contained HTML page, JSON or CSV.

use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, Float64Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use epistore_sql::intervals::{find_metric, key_text, Direction, Family, Formula, Metric};
use epistore_sql::sql_text::{episode_filter, quote_ident, quote_list};
use epistore_sql::Engine;
use epistore_stats::{
    cluster_bootstrap, holm, leader_groups, mcnemar_exact, paired_comparison, split_half_stability, Bootstrap,
};
use serde::Serialize;

pub const SCHEMA: &str = "epistore-leaderboard/1";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Sql(#[from] epistore_sql::Error),
    #[error("{0}")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    View(#[from] epistore_view::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The episode list page of entry `n` (None: no such entry): the rows of the episodes
/// its score came from, titled with its value. `board_href` links back to the board
/// where the board is a page of its own (`epistore ui`); in a static folder the board
/// is the home page.
pub fn entry_list(
    board: &Leaderboard,
    n: usize,
    snapshot: &epistore_store::Snapshot,
    links: &epistore_view::Links,
    board_href: Option<String>,
) -> Result<Option<serde_json::Value>> {
    let Some(entry) = board.entries.get(n) else { return Ok(None) };
    let ids = entry
        .episode_ids
        .iter()
        .map(|id| {
            epistore_package::parse_hex(id).ok_or_else(|| Error::Usage(format!("bad episode id {id} on the board")))
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = epistore_view::list_rows(snapshot, &ids, links)?;
    let title = format!("{}: {} ({} = {})", board.metric, entry.label, board.metric, render::number(entry.value));
    let mut steps: Vec<(&str, Option<String>)> = Vec::new();
    if let Some(href) = board_href {
        steps.push((&board.title, Some(href)));
    }
    steps.push((&entry.label, None));
    let published = rows.iter().filter(|r| r["href"].is_string()).count();
    let subtitle = if published < rows.len() && links.is_static() {
        // Every id without a link says why.
        format!(
            "The {} episodes behind this entry's score. Pages were published for {published} of them \
             (--max-episodes; failures and label disagreements first, listed first); the others are listed \
             without a link.",
            rows.len()
        )
    } else {
        format!("The {} episodes behind this entry's score.", rows.len())
    };
    Ok(Some(epistore_view::list_doc(&title, Some(&subtitle), links.nav(&steps), rows, false)))
}

/// What to rank.
#[derive(Clone, Debug)]
pub struct Spec {
    pub metric: String,
    /// Grouping keys (any of model, harness_level, task, cluster).
    pub by: Vec<String>,
    /// A SQL condition on `episode_facts` columns.
    pub filter: Option<String>,
    pub bootstrap: Bootstrap,
    /// Tie-group threshold on Holm-adjusted p-values (docs/metrics.md §G: 0.05).
    pub alpha: f64,
    /// Overrides which way the metric is better.
    pub direction: Option<Direction>,
    /// How errored attempts count in a pass rate (`None`: the default, [`Errors::Fail`]).
    pub errors: Option<Errors>,
    pub generated_by: String,
}

/// How errored, timed-out and unjudged attempts count in a pass rate (docs/metrics.md
/// §C): as failures (`pass_rate_all`, the default) or left out (`pass_rate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Errors {
    Fail,
    Exclude,
}

/// What a pass-rate board did with errors, as it prints it.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorsInfo {
    pub rule: Errors,
    /// `given` (`--errors`) or `default`.
    pub chosen: &'static str,
    pub text: &'static str,
}

const PASS_RATE: &str = "pass_rate";
const PASS_RATE_ALL: &str = "pass_rate_all";
/// Names a maintainer looks for first, read as `pass_rate`.
const PASS_RATE_ALIASES: &[&str] = &["resolve_rate", "resolved_rate", "success_rate"];
/// Random halves of the task clusters the rank stability is measured on.
pub const STABILITY_HALVES: usize = 200;
/// The most attempts per task the k curve goes to.
pub const MAX_K: u64 = 10;
/// A point of the k curve needs this many tasks with k judged attempts: a mean over one
/// or two tasks is 0 or 1 and says nothing about reliability.
pub const PASS_K_MIN_TASKS: i64 = 5;

/// The metric a board or `compare` ranks by, after `resolve_rate` and `--errors`, and
/// what it did with errors (pass rates only).
fn ranked_metric(spec: &Spec) -> Result<(&'static Family, &'static Metric, Option<ErrorsInfo>)> {
    let name = if PASS_RATE_ALIASES.contains(&spec.metric.as_str()) { PASS_RATE } else { spec.metric.as_str() };
    if name != PASS_RATE && name != PASS_RATE_ALL {
        if spec.errors.is_some() {
            return Err(Error::Usage(format!(
                "--errors applies to a pass rate (pass_rate, resolve_rate); `{name}` counts the episodes its \
                 definition names (docs/metrics.md)"
            )));
        }
        let (family, metric) = find_metric(name)?;
        return Ok((family, metric, None));
    }
    let (rule, chosen) = match (spec.errors, name) {
        (Some(Errors::Exclude), PASS_RATE_ALL) => {
            return Err(Error::Usage(
                "pass_rate_all counts errored attempts as failures; --errors exclude ranks by pass_rate".into(),
            ))
        }
        (Some(rule), _) => (rule, "given"),
        (None, _) => (Errors::Fail, "default"),
    };
    let (text, metric) = match rule {
        Errors::Fail => (
            "an attempt that errored, timed out or ran out of budget before it was judged counts as not resolved \
             (pass_rate_all); an attempt nobody judged for no stated reason is left out",
            PASS_RATE_ALL,
        ),
        Errors::Exclude => (
            "only judged attempts count (pass_rate): an attempt that errored, timed out or was never judged is left \
             out, neither resolved nor not",
            PASS_RATE,
        ),
    };
    let (family, metric) = find_metric(metric)?;
    Ok((family, metric, Some(ErrorsInfo { rule, chosen, text })))
}

/// The outcome of one cluster when it is binary: one episode in the denominator and
/// the value 0 or 1 (a pass rate over single attempts); McNemar's test applies where
/// every shared cluster has one.
fn binary_outcome(metric: &Metric, sums: &[f64]) -> Option<bool> {
    match &metric.formula {
        Formula::Ratio { den, .. } if sums[*den] == 1.0 => match metric.formula.evaluate(sums) {
            Some(v) if v == 0.0 || v == 1.0 => Some(v == 1.0),
            _ => None,
        },
        _ => None,
    }
}

/// McNemar's exact test on two entries' binary outcomes, when every cluster both have
/// a value on is binary for both (else the sign-flip test alone stands).
fn mcnemar_on(
    first: &BTreeMap<String, f64>,
    first_binary: &BTreeMap<String, bool>,
    second: &BTreeMap<String, f64>,
    second_binary: &BTreeMap<String, bool>,
) -> Option<McNemarInfo> {
    let shared: Vec<&String> = first.keys().filter(|c| second.contains_key(*c)).collect();
    let outcomes: Option<Vec<(bool, bool)>> =
        shared.iter().map(|c| Some((*first_binary.get(*c)?, *second_binary.get(*c)?))).collect();
    let outcomes = outcomes.filter(|o| !o.is_empty())?;
    let t = mcnemar_exact(&outcomes);
    Some(McNemarInfo { first_only: t.first_only, second_only: t.second_only, pairs: t.pairs, p: t.p_value })
}

#[derive(Clone, Debug, Serialize)]
pub struct Leaderboard {
    pub schema: &'static str,
    pub title: String,
    pub metric: String,
    pub metric_description: String,
    pub direction: &'static str,
    /// How errored attempts count (pass-rate boards only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<ErrorsInfo>,
    pub by: Vec<String>,
    #[serde(rename = "where")]
    pub filter: Option<String>,
    pub store_snapshot: u64,
    pub generated_by: String,
    pub bootstrap: BootstrapInfo,
    pub comparison: ComparisonInfo,
    pub entries: Vec<Entry>,
    pub evidence_matrix: Option<EvidenceMatrix>,
    pub revision_curves: Vec<Curve>,
    /// pass@k and pass^k for k = 1.. the most judged attempts of a task (at most
    /// [`MAX_K`]), per model and harness level; empty when no task has two.
    pub pass_k: Vec<PassKSeries>,
    /// How the rank stability of each entry was measured.
    pub stability: StabilityInfo,
    /// Where the entries' costs come from.
    pub cost: CostInfo,
    /// Where a published board links to (`epistore ui`, `--with-episodes`); absent on
    /// a board on its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<BoardLinks>,
}

/// The links of a published board: back to the index, each entry's episode list, and
/// each episode's page.
#[derive(Clone, Debug, Serialize)]
pub struct BoardLinks {
    pub home: Option<String>,
    /// The episode list of each entry, in entry order.
    pub entries: Vec<Option<String>>,
    /// An episode page, with `{id}` standing for the episode id.
    pub episode: String,
    /// Per entry, how many of its leading `episode_ids` have a page (a static folder
    /// is bounded by `--max-episodes`); `None`: all of them.
    pub linked: Option<Vec<usize>>,
    /// Why the ids past `linked` have no page, said on the board beside them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unlinked: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BootstrapInfo {
    pub replicates: usize,
    pub seed: u64,
    pub level: f64,
    pub unit: &'static str,
}

/// A per-episode mean with its task-cluster interval and the episodes it is over.
#[derive(Clone, Debug, Serialize)]
pub struct AxisValue {
    pub value: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub n: f64,
}

/// Where the board's costs come from: how many episodes' cost the logs state, how many
/// are derived from tokens with which price table, how many are unknown.
#[derive(Clone, Debug, Serialize)]
pub struct CostInfo {
    pub observed: i64,
    pub derived: i64,
    pub unknown: i64,
    pub price_version: String,
    pub price_date: String,
}

/// Split-half rank stability (each entry's `rank_stability`): the share of
/// `halves` random halves of the task clusters, drawn with `seed`, on which the entry
/// has the rank it has on the board.
#[derive(Clone, Debug, Serialize)]
pub struct StabilityInfo {
    pub halves: usize,
    pub seed: u64,
}

/// pass@k and pass^k of one model and harness level (docs/metrics.md §K).
#[derive(Clone, Debug, Serialize)]
pub struct PassKSeries {
    pub label: String,
    pub points: Vec<PassKPoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PassKPoint {
    pub k: u64,
    /// Tasks with at least k judged attempts (what the value is a mean over).
    pub tasks: i64,
    pub pass_at_k: Option<f64>,
    pub pass_at_k_lo: Option<f64>,
    pub pass_at_k_hi: Option<f64>,
    pub pass_hat_k: Option<f64>,
    pub pass_hat_k_lo: Option<f64>,
    pub pass_hat_k_hi: Option<f64>,
}

/// McNemar's exact test of a pair of entries (first: the upper or `a`).
#[derive(Clone, Debug, Serialize)]
pub struct McNemarInfo {
    pub first_only: u64,
    pub second_only: u64,
    pub pairs: u64,
    pub p: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ComparisonInfo {
    pub test: &'static str,
    pub adjustment: &'static str,
    /// Number of comparisons in the Holm family: the pairs of ranked entries that share
    /// a task cluster (the family `compare` uses).
    pub family: usize,
    pub alpha: f64,
    /// How tie groups follow from the pairwise tests, in words.
    pub groups: &'static str,
}

impl BoardLinks {
    /// Links for a board whose episodes are hosted elsewhere (`--episode-url`): every id
    /// links to `template` with `{id}` in place; `entries` are the entry lists' pages.
    pub fn hosted_elsewhere(template: &str, entries: Vec<Option<String>>) -> BoardLinks {
        BoardLinks { home: None, entries, episode: template.to_string(), linked: None, unlinked: None }
    }
}

/// The rule that makes tie groups from the pairwise tests, as the board states it.
pub const GROUP_RULE: &str = "the top entry leads group 1; each next entry joins the current group unless its \
     adjusted p against the group's leader (its first entry) is below alpha, in which case it leads the next group: \
     every entry is not separable from its group's leader, and each leader is separable from the leader above";

#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub rank: Option<usize>,
    pub key: BTreeMap<String, String>,
    pub label: String,
    pub value: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// The metric's pooled denominator.
    pub n: f64,
    pub episodes: usize,
    pub clusters: usize,
    pub replicates_used: usize,
    pub replicates_dropped: usize,
    pub tie_group: Option<usize>,
    pub vs_above: Option<VsAbove>,
    /// The share of random halves of the task clusters on which the entry keeps its
    /// rank (`None`: unranked, or fewer than two clusters).
    pub rank_stability: Option<f64>,
    /// Mean cost per episode (USD) over its episodes whose cost is known, with its
    /// interval (docs/metrics.md §L); `None` when no cost is known.
    pub cost_per_episode: Option<AxisValue>,
    /// Mean duration per episode (ms) over its episodes whose duration is known.
    pub duration_ms_per_episode: Option<AxisValue>,
    /// On the cost-accuracy frontier: no other entry is at most as costly and at least
    /// as good on the metric, and strictly one of the two.
    pub pareto: bool,
    pub episode_ids: Vec<String>,
}

/// The paired comparison of an entry with the one ranked above it, on the clusters
/// both have: differences are (above - this entry).
#[derive(Clone, Debug, Serialize)]
pub struct VsAbove {
    pub label: String,
    pub mean_difference: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub p: f64,
    pub p_holm: f64,
    pub clusters: usize,
    pub exact: bool,
    /// McNemar's exact test beside the sign-flip test, where every shared cluster has
    /// one binary outcome per entry (unadjusted).
    pub mcnemar: Option<McNemarInfo>,
}

/// Harness-ladder evidence: per harness level, the share of episodes with each
/// trace or artifact recorded.
#[derive(Clone, Debug, Serialize)]
pub struct EvidenceMatrix {
    pub levels: Vec<String>,
    pub artifacts: Vec<String>,
    pub episodes: Vec<i64>,
    pub share: Vec<Vec<Option<f64>>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Curve {
    pub label: String,
    pub points: Vec<CurvePoint>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CurvePoint {
    pub revision: i64,
    pub n: i64,
    pub current_correctness: Option<f64>,
    pub ever_correct: Option<f64>,
}

const EVIDENCE: &[(&str, &str)] = &[
    ("actions", "has_actions"),
    ("tools", "has_tools"),
    ("context", "has_context"),
    ("verification", "has_verification"),
    ("attribution", "has_attribution"),
    ("interventions", "has_interventions"),
    ("entropy", "has_entropy"),
    ("patch", "has_patch"),
    ("verification report", "has_verification_report"),
    ("final report", "has_final_report"),
];

fn strings(batch: &RecordBatch, i: usize) -> Result<StringArray> {
    Ok(cast(batch.column(i), &DataType::Utf8)?.as_any().downcast_ref::<StringArray>().expect("Utf8").clone())
}

fn floats(batch: &RecordBatch, i: usize) -> Result<Float64Array> {
    Ok(cast(batch.column(i), &DataType::Float64)?.as_any().downcast_ref::<Float64Array>().expect("Float64").clone())
}

fn ints(batch: &RecordBatch, i: usize) -> Result<Int64Array> {
    Ok(cast(batch.column(i), &DataType::Int64)?.as_any().downcast_ref::<Int64Array>().expect("Int64").clone())
}

fn opt(a: &Float64Array, row: usize) -> Option<f64> {
    (!a.is_null(row)).then(|| a.value(row))
}

/// Episode ids behind each entry: the distinct episodes among the family's rows.
async fn entry_episodes(
    engine: &Engine,
    family: &Family,
    keys: &[&str],
    filter: Option<&str>,
) -> Result<BTreeMap<Vec<String>, Vec<String>>> {
    let all: Vec<&str> = keys.iter().chain(family.own_keys).copied().collect();
    let cols: Vec<String> = all.iter().map(|k| format!("CAST({} AS VARCHAR)", quote_ident(k))).collect();
    let mut select = cols.clone();
    select.push("array_to_string(array_agg(DISTINCT episode_id), ' ')".into());
    let group = if cols.is_empty() { String::new() } else { format!(" GROUP BY {}", quote_list(&all)) };
    let sql = format!("SELECT {} FROM ({}) AS rows{group}", select.join(", "), family.source_sql(keys, filter),);
    let mut out = BTreeMap::new();
    for batch in engine.query(&sql).await? {
        let columns = (0..=all.len()).map(|i| strings(&batch, i)).collect::<Result<Vec<_>>>()?;
        for row in 0..batch.num_rows() {
            let key: Vec<String> = columns[..all.len()].iter().map(|c| key_text(c, row)).collect();
            let ids = &columns[all.len()];
            let mut ids: Vec<String> =
                if ids.is_null(row) { vec![] } else { ids.value(row).split(' ').map(str::to_string).collect() };
            ids.retain(|s| !s.is_empty());
            ids.sort();
            out.insert(key, ids);
        }
    }
    Ok(out)
}

async fn evidence_matrix(engine: &Engine, filter: Option<&str>) -> Result<Option<EvidenceMatrix>> {
    let shares: Vec<String> =
        EVIDENCE.iter().map(|(_, c)| format!("avg(CASE WHEN {c} THEN 1.0 ELSE 0.0 END)")).collect();
    let sql = format!(
        "SELECT harness_level, count(*), {} FROM episodes{} GROUP BY harness_level ORDER BY harness_level",
        shares.join(", "),
        episode_filter("episodes", filter)
    );
    let mut matrix = EvidenceMatrix {
        levels: vec![],
        artifacts: EVIDENCE.iter().map(|(a, _)| a.to_string()).collect(),
        episodes: vec![],
        share: vec![],
    };
    for batch in engine.query(&sql).await? {
        let level = strings(&batch, 0)?;
        let count = ints(&batch, 1)?;
        let values = (0..EVIDENCE.len()).map(|i| floats(&batch, 2 + i)).collect::<Result<Vec<_>>>()?;
        for row in 0..batch.num_rows() {
            matrix.levels.push(level.value(row).to_string());
            matrix.episodes.push(count.value(row));
            matrix.share.push(values.iter().map(|v| opt(v, row)).collect());
        }
    }
    // A ladder needs rungs: with one harness level (imported logs, one harness) the
    // matrix compares nothing and is left out of the board.
    Ok((matrix.levels.len() >= 2).then_some(matrix))
}

/// Correctness over revisions (docs/metrics.md §D) per entry of the cell keys: the held
/// states of queries/revision_correctness.sql with the cell replaced by the entry.
async fn revision_curves(engine: &Engine, keys: &[&str], filter: Option<&str>) -> Result<Vec<Curve>> {
    let label = if keys.is_empty() {
        "'all'".to_string()
    } else {
        format!(
            "concat_ws(' / ', {})",
            keys.iter().map(|k| format!("CAST({} AS VARCHAR)", quote_ident(k))).collect::<Vec<_>>().join(", ")
        )
    };
    // The held states of queries/revision_correctness.sql, grouped by the entry's keys
    // (views::revision_rows): the view, its intervals and these curves share one text.
    let sql = format!(
        "SELECT {label} AS entry, revision, count(*), avg(CAST(correct_now AS DOUBLE)), avg(CAST(correct_ever AS DOUBLE))
         FROM ({}) AS rows
         GROUP BY {label}, revision ORDER BY entry, revision",
        epistore_sql::views::revision_rows(keys, filter)
    );
    let mut curves: BTreeMap<String, Vec<CurvePoint>> = BTreeMap::new();
    for batch in engine.query(&sql).await? {
        let (entry, t, n) = (strings(&batch, 0)?, ints(&batch, 1)?, ints(&batch, 2)?);
        let (current, ever) = (floats(&batch, 3)?, floats(&batch, 4)?);
        for row in 0..batch.num_rows() {
            curves.entry(entry.value(row).to_string()).or_default().push(CurvePoint {
                revision: t.value(row),
                n: n.value(row),
                current_correctness: opt(&current, row),
                ever_correct: opt(&ever, row),
            });
        }
    }
    // Batches from several partitions arrive in any order.
    let curves: Vec<Curve> = curves
        .into_iter()
        .map(|(label, mut points)| {
            points.sort_by_key(|p| p.revision);
            Curve { label, points }
        })
        .collect();
    Ok(curves)
}

/// Each ranked entry's split-half rank stability (entries in rank order, each with its
/// components per cluster): the metric pooled over the clusters of a random half.
fn rank_stability(
    entries: &[&BTreeMap<String, Vec<f64>>],
    metric: &Metric,
    direction: Direction,
    seed: u64,
) -> Vec<Option<f64>> {
    let mut names: Vec<&String> = entries.iter().flat_map(|e| e.keys()).collect();
    names.sort();
    names.dedup();
    let width = entries.iter().flat_map(|e| e.values()).map(Vec::len).next().unwrap_or(0);
    let value_on = |e: usize, half: &[bool]| {
        let mut total = vec![0.0; width];
        for (name, _) in names.iter().zip(half).filter(|(_, &chosen)| chosen) {
            if let Some(s) = entries[e].get(*name) {
                total.iter_mut().zip(s).for_each(|(t, v)| *t += v);
            }
        }
        metric.formula.evaluate(&total)
    };
    split_half_stability(names.len(), entries.len(), value_on, direction == Direction::Higher, STABILITY_HALVES, seed)
        .into_iter()
        .map(|v| (!v.is_nan()).then_some(v))
        .collect()
}

/// pass@k and pass^k (the `pass_k(k)` table function, over the board's episodes) for
/// k = 1 to the most judged attempts any task has (at most [`MAX_K`]), each point over
/// at least [`PASS_K_MIN_TASKS`] tasks; a series needs two points (k = 1 and 2 at
/// least), so a population of single attempts has none.
async fn pass_k_curves(engine: &Engine, filter: Option<&str>) -> Result<Vec<PassKSeries>> {
    let episodes = format!("(SELECT * FROM episodes{}) AS episodes", episode_filter("episodes", filter));
    let most = format!(
        "SELECT max(n) FROM (SELECT count(*) AS n FROM {episodes} WHERE correct IS NOT NULL \
         GROUP BY model, harness_level, task) AS t"
    );
    let mut top = 0i64;
    for batch in engine.query(&most).await? {
        let n = ints(&batch, 0)?;
        if batch.num_rows() > 0 && !n.is_null(0) {
            top = n.value(0);
        }
    }
    if top < 2 {
        return Ok(vec![]);
    }
    let mut series: BTreeMap<String, Vec<PassKPoint>> = BTreeMap::new();
    for k in 1..=(top as u64).min(MAX_K) {
        // The function's body over the board's episodes: its one read of `episodes`.
        let body = epistore_sql::views::PASS_K.replace(":k", &k.to_string());
        if body.matches("FROM episodes\n").count() != 1 {
            return Err(Error::Usage("queries/pass_k.sql must read `FROM episodes` once".into()));
        }
        let sql = body.replacen("FROM episodes\n", &format!("FROM {episodes}\n"), 1);
        for batch in engine.query(&sql).await? {
            let (model, level, tasks) = (strings(&batch, 0)?, strings(&batch, 1)?, ints(&batch, 3)?);
            let f = |i| floats(&batch, i);
            let (at, at_lo, at_hi, hat, hat_lo, hat_hi) = (f(5)?, f(6)?, f(7)?, f(8)?, f(9)?, f(10)?);
            for row in 0..batch.num_rows() {
                let label = format!("{} / {}", key_text(&model, row), key_text(&level, row));
                series.entry(label).or_default().push(PassKPoint {
                    k,
                    tasks: tasks.value(row),
                    pass_at_k: opt(&at, row),
                    pass_at_k_lo: opt(&at_lo, row),
                    pass_at_k_hi: opt(&at_hi, row),
                    pass_hat_k: opt(&hat, row),
                    pass_hat_k_lo: opt(&hat_lo, row),
                    pass_hat_k_hi: opt(&hat_hi, row),
                });
            }
        }
    }
    Ok(series
        .into_iter()
        .map(|(label, mut points)| {
            points.retain(|p| p.tasks >= PASS_K_MIN_TASKS);
            points.sort_by_key(|p| p.k);
            PassKSeries { label, points }
        })
        .filter(|s| s.points.len() >= 2)
        .collect())
}

/// Each entry's cost and duration per episode with their intervals (the
/// `cost_per_episode` and `duration_ms_per_episode` metrics over the same keys and
/// episodes), and where the costs come from.
async fn entry_costs(
    engine: &Engine,
    keys: &[&str],
    filter: Option<&str>,
    bootstrap: &Bootstrap,
    entries: &mut [Entry],
) -> Result<CostInfo> {
    let (family, cost) = find_metric("cost_per_episode")?;
    let (_, duration) = find_metric("duration_ms_per_episode")?;
    let axis = |sums: &epistore_sql::intervals::ClusterSums, metric: &Metric| -> Result<Option<AxisValue>> {
        let n = sums.total(metric.formula.denominator());
        if n == 0.0 {
            return Ok(None);
        }
        let i = cluster_bootstrap(&sums.sums(), |t| metric.formula.evaluate(t), bootstrap)
            .map_err(|e| Error::Usage(e.to_string()))?;
        Ok(Some(AxisValue { value: i.estimate, lo: i.lo, hi: i.hi, n }))
    };
    let by_key: BTreeMap<Vec<String>, (Option<AxisValue>, Option<AxisValue>)> = {
        let mut out = BTreeMap::new();
        for sums in engine.cluster_sums(family, keys, filter).await? {
            out.insert(sums.key.clone(), (axis(&sums, cost)?, axis(&sums, duration)?));
        }
        out
    };
    for e in entries.iter_mut() {
        // An entry's key is the board's keys, then its family's own keys (a verifier):
        // costs are per episode, so by the board's keys.
        let key: Vec<String> = keys.iter().map(|k| e.key.get(*k).cloned().unwrap_or_default()).collect();
        if let Some((c, d)) = by_key.get(&key) {
            e.cost_per_episode = c.clone();
            e.duration_ms_per_episode = d.clone();
        }
    }
    let sql =
        format!("SELECT cost_grade, count(*) FROM ({}) AS c GROUP BY cost_grade", family.source_sql(keys, filter));
    let mut info =
        CostInfo { observed: 0, derived: 0, unknown: 0, price_version: String::new(), price_date: String::new() };
    for batch in engine.query(&sql).await? {
        let (grade, count) = (strings(&batch, 0)?, ints(&batch, 1)?);
        for row in 0..batch.num_rows() {
            let n = count.value(row);
            match (!grade.is_null(row)).then(|| grade.value(row)) {
                Some("observed") => info.observed += n,
                Some("derived") => info.derived += n,
                _ => info.unknown += n,
            }
        }
    }
    // The table the session priced with (read once, when it opened), not the file again.
    for batch in engine.query("SELECT DISTINCT version, date FROM model_prices").await? {
        if batch.num_rows() > 0 {
            (info.price_version, info.price_date) =
                (strings(&batch, 0)?.value(0).to_string(), strings(&batch, 1)?.value(0).to_string());
        }
    }
    Ok(info)
}

/// Marks the ranked entries on the cost-accuracy frontier: those with a value and a
/// cost that no other such entry beats on one and matches or beats on the other.
fn mark_frontier(entries: &mut [Entry], direction: Direction) {
    let points: Vec<(usize, f64, f64)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((i, e.value?, e.cost_per_episode.as_ref()?.value?)))
        .collect();
    let better = |a: f64, b: f64| if direction == Direction::Higher { a > b } else { a < b };
    for &(i, value, cost) in &points {
        let dominated = points.iter().any(|&(j, v, c)| {
            j != i && c <= cost && (v == value || better(v, value)) && (c < cost || better(v, value))
        });
        entries[i].pareto = !dominated;
    }
}

/// Builds the leaderboard of `spec` over an engine's snapshot.
pub async fn build(engine: &Engine, spec: &Spec) -> Result<Leaderboard> {
    spec.bootstrap.validate().map_err(|e| Error::Usage(e.to_string()))?;
    let (family, metric, errors): (&Family, &Metric, _) = ranked_metric(spec)?;
    let keys: Vec<&str> = spec.by.iter().map(String::as_str).collect();
    let filter = spec.filter.as_deref();
    let direction = spec.direction.unwrap_or(metric.direction);

    let sums = engine.cluster_sums(family, &keys, filter).await?;
    let episodes = entry_episodes(engine, family, &keys, filter).await?;
    let key_names: Vec<String> = keys.iter().chain(family.own_keys).map(|k| k.to_string()).collect();

    struct Row {
        entry: Entry,
        per_cluster: BTreeMap<String, f64>,
        binary: BTreeMap<String, bool>,
        sums: BTreeMap<String, Vec<f64>>,
    }
    let mut rows = vec![];
    for entry in &sums {
        let interval = cluster_bootstrap(&entry.sums(), |t| metric.formula.evaluate(t), &spec.bootstrap)
            .map_err(|e| Error::Usage(e.to_string()))?;
        let per_cluster =
            entry.clusters.iter().filter_map(|(c, s)| metric.formula.evaluate(s).map(|v| (c.clone(), v))).collect();
        let binary =
            entry.clusters.iter().filter_map(|(c, s)| binary_outcome(metric, s).map(|b| (c.clone(), b))).collect();
        let ids = episodes.get(&entry.key).cloned().unwrap_or_default();
        rows.push(Row {
            entry: Entry {
                rank: None,
                key: key_names.iter().cloned().zip(entry.key.iter().cloned()).collect(),
                label: if entry.key.is_empty() { "all".into() } else { entry.key.join(" / ") },
                value: interval.estimate,
                lo: interval.lo,
                hi: interval.hi,
                n: entry.total(metric.formula.denominator()),
                episodes: ids.len(),
                clusters: entry.clusters.len(),
                replicates_used: interval.used,
                replicates_dropped: interval.dropped,
                tie_group: None,
                vs_above: None,
                rank_stability: None,
                cost_per_episode: None,
                duration_ms_per_episode: None,
                pareto: false,
                episode_ids: ids,
            },
            per_cluster,
            binary,
            sums: entry.clusters.iter().cloned().collect(),
        });
    }

    // Best first; entries without a value last, by label.
    rows.sort_by(|a, b| match (a.entry.value, b.entry.value) {
        (Some(x), Some(y)) => {
            let order = if direction == Direction::Higher { y.total_cmp(&x) } else { x.total_cmp(&y) };
            order.then_with(|| a.entry.label.cmp(&b.entry.label))
        }
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.entry.label.cmp(&b.entry.label),
    });
    let ranked = rows.iter().filter(|r| r.entry.value.is_some()).count();

    // Paired comparisons of every pair of ranked entries on the clusters both have, Holm
    // over the family of all pairs that share one: the family `compare` uses, so the
    // board and `compare` give every pair the same p-value.
    let mut pairs: BTreeMap<(usize, usize), epistore_stats::PairedComparison> = BTreeMap::new();
    for i in 0..ranked {
        for j in i + 1..ranked {
            let (upper, lower) = (&rows[i].per_cluster, &rows[j].per_cluster);
            let differences: Vec<f64> = upper.iter().filter_map(|(c, a)| lower.get(c).map(|b| a - b)).collect();
            if let Some(c) =
                paired_comparison(&differences, &spec.bootstrap).map_err(|e| Error::Usage(e.to_string()))?
            {
                pairs.insert((i, j), c);
            }
        }
    }
    let adjusted = holm(&pairs.values().map(|c| c.p_value).collect::<Vec<_>>());
    let p_holm: BTreeMap<(usize, usize), f64> = pairs.keys().copied().zip(adjusted).collect();
    // A pair with no shared cluster was not tested and cannot separate its entries.
    let groups = leader_groups(ranked, |a, b| p_holm.get(&(a, b)).is_some_and(|p| *p < spec.alpha));
    let stability = rank_stability(
        &rows[..ranked].iter().map(|r| &r.sums).collect::<Vec<_>>(),
        metric,
        direction,
        spec.bootstrap.seed,
    );
    for i in 0..ranked {
        let above_label = if i > 0 { rows[i - 1].entry.label.clone() } else { String::new() };
        let above = i.checked_sub(1).map(|a| (a, i));
        let mcnemar = above.and_then(|(a, b)| {
            mcnemar_on(&rows[a].per_cluster, &rows[a].binary, &rows[b].per_cluster, &rows[b].binary)
        });
        let entry = &mut rows[i].entry;
        entry.rank_stability = stability[i];
        entry.rank = Some(i + 1);
        entry.tie_group = Some(groups[i]);
        entry.vs_above = above.and_then(|k| pairs.get(&k).map(|c| (c, p_holm[&k]))).map(|(c, p)| VsAbove {
            label: above_label,
            mean_difference: c.mean_difference,
            lo: c.lo,
            hi: c.hi,
            p: c.p_value,
            p_holm: p,
            clusters: c.clusters,
            exact: c.exact,
            mcnemar,
        });
    }

    let mut entries: Vec<Entry> = rows.into_iter().map(|r| r.entry).collect();
    let cost = entry_costs(engine, &keys, filter, &spec.bootstrap, &mut entries).await?;
    mark_frontier(&mut entries, direction);

    let curve_keys: Vec<&str> = keys.clone();
    let by_label = if key_names.is_empty() { "everything".to_string() } else { key_names.join(", ") };
    Ok(Leaderboard {
        schema: SCHEMA,
        title: format!("{} by {by_label}", metric.name),
        metric: metric.name.clone(),
        metric_description: metric.description.clone(),
        direction: if direction == Direction::Higher { "higher" } else { "lower" },
        errors,
        by: key_names,
        filter: spec.filter.clone(),
        store_snapshot: engine.snapshot_seq,
        generated_by: spec.generated_by.clone(),
        bootstrap: BootstrapInfo {
            replicates: spec.bootstrap.replicates,
            seed: spec.bootstrap.seed,
            level: spec.bootstrap.level,
            unit: "task cluster",
        },
        comparison: ComparisonInfo {
            test: "two-sided sign-flip permutation on per-cluster differences, every pair of ranked entries",
            adjustment: "holm",
            family: pairs.len(),
            alpha: spec.alpha,
            groups: GROUP_RULE,
        },
        entries,
        evidence_matrix: evidence_matrix(engine, filter).await?,
        revision_curves: revision_curves(engine, &curve_keys, filter).await?,
        pass_k: pass_k_curves(engine, filter).await?,
        stability: StabilityInfo { halves: STABILITY_HALVES, seed: spec.bootstrap.seed },
        cost,
        links: None,
    })
}

mod render;
pub use render::{to_csv, to_html, to_json, to_markdown};

/// One paired comparison of `compare`: entry `a` minus entry `b`.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub clusters: usize,
    pub mean_difference: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub p: f64,
    pub p_holm: f64,
    pub exact: bool,
    pub mcnemar: Option<McNemarInfo>,
}

/// Every pair of entries compared on the clusters both have (docs/metrics.md §G), with
/// Holm-adjusted p-values over the family of all pairs that share a cluster.
pub async fn compare_all(engine: &Engine, spec: &Spec) -> Result<Vec<Comparison>> {
    spec.bootstrap.validate().map_err(|e| Error::Usage(e.to_string()))?;
    let (family, metric, _) = ranked_metric(spec)?;
    let keys: Vec<&str> = spec.by.iter().map(String::as_str).collect();
    let sums = engine.cluster_sums(family, &keys, spec.filter.as_deref()).await?;
    type Values = BTreeMap<String, f64>;
    type Binary = BTreeMap<String, bool>;
    let per_cluster: Vec<(String, Values, Binary)> = sums
        .iter()
        .map(|e| {
            let values =
                e.clusters.iter().filter_map(|(c, s)| metric.formula.evaluate(s).map(|v| (c.clone(), v))).collect();
            let binary =
                e.clusters.iter().filter_map(|(c, s)| binary_outcome(metric, s).map(|b| (c.clone(), b))).collect();
            (e.key.join(" / "), values, binary)
        })
        .collect();
    let mut out = vec![];
    for (i, (a, va, ba)) in per_cluster.iter().enumerate() {
        for (b, vb, bb) in &per_cluster[i + 1..] {
            let differences: Vec<f64> = va.iter().filter_map(|(c, x)| vb.get(c).map(|y| x - y)).collect();
            if let Some(c) =
                paired_comparison(&differences, &spec.bootstrap).map_err(|e| Error::Usage(e.to_string()))?
            {
                out.push(Comparison {
                    a: a.clone(),
                    b: b.clone(),
                    clusters: c.clusters,
                    mean_difference: c.mean_difference,
                    lo: c.lo,
                    hi: c.hi,
                    p: c.p_value,
                    p_holm: f64::NAN,
                    exact: c.exact,
                    mcnemar: mcnemar_on(va, ba, vb, bb),
                });
            }
        }
    }
    let adjusted = holm(&out.iter().map(|c| c.p).collect::<Vec<_>>());
    for (c, p) in out.iter_mut().zip(adjusted) {
        c.p_holm = p;
    }
    Ok(out)
}
