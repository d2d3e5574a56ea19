//! Intervals and comparisons (docs/metrics.md §G) for the shipped metrics.
//!
//! Every metric the store ships is a function of counts summed over rows (episodes,
//! candidates, revision pairs). A [`Family`] names a row source (a shipped view) and the
//! count columns ("components") its metrics are built from; [`Engine::cluster_sums`]
//! sums the components per entry and task cluster, and `epistore-stats` does the rest on
//! those sums, so an interval resamples clusters exactly as docs/metrics.md §G says and the
//! point estimate is the same pooled ratio the view reports.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use datafusion::arrow::array::{Array, Float64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use epistore_package::{LABELS, POSTURES};
use epistore_stats::{bootstrap_with_plan, Bootstrap, Interval, ResamplePlan};

use crate::error::{Error, Result};
use crate::sql_text::{check_keys as check_keys_in, episode_filter, quote_ident};
use crate::{views, Engine, METRIC_KEYS};

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Higher,
    Lower,
}

/// How a metric is computed from its pooled components.
#[derive(Clone, Debug, PartialEq)]
pub enum Formula {
    /// sum of the `num` components / the `den` component; NULL when that is 0.
    Ratio { num: Vec<usize>, den: usize },
    /// D_ij = n11/n0 - f_i f_j, f_i = (n11+n10)/n0, f_j = (n11+n01)/n0; NULL when n0 = 0.
    ExcessJoint { n11: usize, n10: usize, n01: usize, n0: usize },
    /// The phi coefficient of the 2x2 table; NULL when n0 = 0 or its denominator is 0.
    /// (`n0`, the table's total, is what it is reported over.)
    Phi { n11: usize, n10: usize, n01: usize, n00: usize, n0: usize },
    /// `inner`, but NULL when the `gate` component is 0.
    Gated { inner: Box<Formula>, gate: usize },
}

impl Formula {
    pub fn evaluate(&self, t: &[f64]) -> Option<f64> {
        match *self {
            Formula::Ratio { ref num, den } => (t[den] != 0.0).then(|| num.iter().map(|&i| t[i]).sum::<f64>() / t[den]),
            Formula::ExcessJoint { n11, n10, n01, n0 } => {
                let n0 = t[n0];
                (n0 != 0.0).then(|| t[n11] / n0 - ((t[n11] + t[n10]) / n0) * ((t[n11] + t[n01]) / n0))
            }
            Formula::Phi { n11, n10, n01, n00, .. } => {
                let (a, b, c, d) = (t[n11], t[n10], t[n01], t[n00]);
                let denominator = ((a + b) * (c + d) * (a + c) * (b + d)).sqrt();
                (a + b + c + d != 0.0 && denominator != 0.0).then(|| (a * d - b * c) / denominator)
            }
            Formula::Gated { ref inner, gate } => (t[gate] != 0.0).then(|| inner.evaluate(t)).flatten(),
        }
    }

    /// The component that plays the denominator (reported as `n`).
    pub fn denominator(&self) -> usize {
        match *self {
            Formula::Ratio { den, .. } => den,
            Formula::ExcessJoint { n0, .. } => n0,
            Formula::Phi { n0, .. } => n0,
            Formula::Gated { ref inner, .. } => inner.denominator(),
        }
    }
}

/// One metric of a family.
#[derive(Clone, Debug)]
pub struct Metric {
    pub name: String,
    pub formula: Formula,
    pub direction: Direction,
    /// "numerator / denominator" in words, for reports.
    pub description: String,
}

/// Metrics computed from one row source.
#[derive(Clone, Debug)]
pub struct Family {
    /// The view whose numbers these are (`cell_metrics`, `verifier_stats`, ...).
    pub view: &'static str,
    /// Keys every entry of this family has beside the chosen cell keys (`verifier`).
    pub own_keys: &'static [&'static str],
    /// One row per counted unit with the cell keys, `cluster`, `episode_id`, the own
    /// keys and the components.
    pub source: RowSource,
    pub components: Vec<String>,
    pub metrics: Vec<Metric>,
}

/// Where a family's rows come from.
#[derive(Clone, Debug)]
pub enum RowSource {
    /// The same SQL whatever the grouping.
    Sql(String),
    /// SQL built per grouping and filter: correctness over revisions holds each state up
    /// to the *group's* last evaluated revision (docs/metrics.md §D), so its rows depend
    /// on the keys ([`views::revision_rows`]). A replicate in which no episode reaches t
    /// has no row at t in the view, so its metric there is undefined ([`Formula::Gated`]).
    PerGrouping(fn(&[&str], Option<&str>) -> String),
}

impl Family {
    /// The rows for entries grouped by `keys`, over the episodes matching `filter`: the
    /// one place a family's rows are filtered (a per-grouping source filters as it builds
    /// them, so the filter's subquery runs once).
    pub fn source_sql(&self, keys: &[&str], filter: Option<&str>) -> String {
        match &self.source {
            RowSource::Sql(sql) if filter.is_some() => {
                format!("SELECT * FROM ({sql}) AS unfiltered{}", episode_filter("unfiltered", filter))
            }
            RowSource::Sql(sql) => sql.clone(),
            RowSource::PerGrouping(build) => build(keys, filter),
        }
    }
}

struct FamilyBuilder {
    family: Family,
}

impl FamilyBuilder {
    fn new(view: &'static str, own_keys: &'static [&'static str], source: impl Into<String>) -> Self {
        Self::with_source(view, own_keys, RowSource::Sql(source.into()))
    }

    fn with_source(view: &'static str, own_keys: &'static [&'static str], source: RowSource) -> Self {
        FamilyBuilder { family: Family { view, own_keys, source, components: vec![], metrics: vec![] } }
    }

    fn component(&mut self, name: &str) -> usize {
        match self.family.components.iter().position(|c| c == name) {
            Some(i) => i,
            None => {
                self.family.components.push(name.to_string());
                self.family.components.len() - 1
            }
        }
    }

    /// A metric, with the direction that ranks it: declared here, with the metric, so
    /// a new metric cannot be added without saying which way is better.
    fn metric(&mut self, name: &str, direction: Direction, formula: Formula, description: String) {
        self.family.metrics.push(Metric { name: name.to_string(), formula, direction, description });
    }

    fn ratio(&mut self, name: &str, direction: Direction, num: &[&str], den: &str) {
        let formula = Formula::Ratio { num: num.iter().map(|n| self.component(n)).collect(), den: self.component(den) };
        self.metric(name, direction, formula, format!("{} / {den}", num.join(" + ")));
    }
}

/// Every metric family the store ships, in docs/metrics.md order.
pub fn families() -> &'static [Family] {
    static FAMILIES: OnceLock<Vec<Family>> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let mut out = vec![cell_family()];

        let mut labels = FamilyBuilder::new("label_shares", &[], label_source("label", LABELS));
        let mut postures = FamilyBuilder::new("posture_shares", &[], label_source("posture", POSTURES));
        // Label shares count adjudicated episodes only (docs/metrics.md §I: a null label is
        // an episode nobody judged); every episode has a posture.
        for (builder, column, values, den) in
            [(&mut labels, "label", LABELS, "adjudicated"), (&mut postures, "posture", POSTURES, "episodes")]
        {
            for value in values {
                let direction = share_direction(column, value);
                builder.ratio(&format!("{column}_share:{value}"), direction, &[&format!("{column}_{value}")], den);
            }
        }
        out.push(labels.family);
        out.push(postures.family);

        let mut transitions = FamilyBuilder::new(
            "revision_transitions",
            &[],
            "SELECT model, harness_level, task, \"cluster\", episode_id,
                    CASE WHEN y_before = 0 THEN 1 ELSE 0 END AS pairs_from_wrong,
                    CASE WHEN y_before = 0 AND y_after = 1 THEN 1 ELSE 0 END AS repaired,
                    CASE WHEN y_before = 1 THEN 1 ELSE 0 END AS pairs_from_correct,
                    CASE WHEN y_before = 1 AND y_after = 0 THEN 1 ELSE 0 END AS regressed
             FROM revision_pairs",
        );
        transitions.ratio("repair_rate", Direction::Higher, &["repaired"], "pairs_from_wrong");
        transitions.ratio("regression_rate", Direction::Lower, &["regressed"], "pairs_from_correct");
        out.push(transitions.family);

        // Correctness over revisions: one entry per (keys, revision t).
        let mut curves =
            FamilyBuilder::with_source("revision_correctness", &["revision"], RowSource::PerGrouping(views::revision_rows));
        let reaches = curves.component("reaches");
        for (name, direction, num) in [
            ("current_correctness", Direction::Higher, "correct_now"),
            ("ever_correct", Direction::Higher, "correct_ever"),
            ("lost_correctness", Direction::Lower, "correct_lost"),
        ] {
            let inner = Formula::Ratio { num: vec![curves.component(num)], den: curves.component("kept") };
            let formula = Formula::Gated { inner: Box::new(inner), gate: reaches };
            curves.metric(name, direction, formula, format!("{num} / kept"));
        }
        out.push(curves.family);

        let mut verifiers = FamilyBuilder::new(
            "verifier_stats",
            &["verifier"],
            "SELECT e.model, e.harness_level, e.task, e.\"cluster\", j.episode_id, j.verifier,
                    1 AS judged, j.accept AS accepted, j.accept * (1 - j.y) AS accepted_wrong,
                    1 - j.y AS wrong, CASE WHEN j.accept = j.y THEN 1 ELSE 0 END AS agreed
             FROM verifier_judgements j JOIN episodes e ON e.episode_id = j.episode_id",
        );
        verifiers.ratio("verifier_coverage", Direction::Higher, &["accepted"], "judged");
        verifiers.ratio("verifier_risk", Direction::Lower, &["accepted_wrong"], "accepted");
        verifiers.ratio("false_accept_rate", Direction::Lower, &["accepted_wrong"], "wrong");
        verifiers.ratio("verifier_accuracy", Direction::Higher, &["agreed"], "judged");
        out.push(verifiers.family);

        let mut pairs = FamilyBuilder::new(
            "verifier_pairs",
            &["verifier_i", "verifier_j"],
            "SELECT model, harness_level, task, \"cluster\", episode_id, verifier_i, verifier_j,
                    CASE WHEN y = 0 THEN 1 ELSE 0 END AS n0,
                    CASE WHEN y = 0 AND accept_i = 1 AND accept_j = 1 THEN 1 ELSE 0 END AS n11,
                    CASE WHEN y = 0 AND accept_i = 1 AND accept_j = 0 THEN 1 ELSE 0 END AS n10,
                    CASE WHEN y = 0 AND accept_i = 0 AND accept_j = 1 THEN 1 ELSE 0 END AS n01,
                    CASE WHEN y = 0 AND accept_i = 0 AND accept_j = 0 THEN 1 ELSE 0 END AS n00
             FROM verifier_pair_judgements",
        );
        // f_i and f_j are false-accept rates, as `false_accept_rate` is: lower is better.
        pairs.ratio("f_i", Direction::Lower, &["n11", "n10"], "n0");
        pairs.ratio("f_j", Direction::Lower, &["n11", "n01"], "n0");
        pairs.ratio("joint_false_accept", Direction::Lower, &["n11"], "n0");
        let [n11, n10, n01, n00, n0] = ["n11", "n10", "n01", "n00", "n0"].map(|c| pairs.component(c));
        pairs.metric("excess_joint", Direction::Lower, Formula::ExcessJoint { n11, n10, n01, n0 }, "n11/n0 - f_i * f_j".into());
        pairs.metric("phi", Direction::Lower, Formula::Phi { n11, n10, n01, n00, n0 }, "phi of the 2x2 table on wrong candidates".into());
        out.push(pairs.family);

        let mut localisation = FamilyBuilder::new(
            "localisation",
            &[],
            "SELECT model, harness_level, task, \"cluster\", episode_id, 1 AS n,
                    CASE WHEN rank_all <= 1 THEN 1 ELSE 0 END AS all1, CASE WHEN rank_any <= 1 THEN 1 ELSE 0 END AS any1,
                    CASE WHEN rank_all <= 3 THEN 1 ELSE 0 END AS all3, CASE WHEN rank_any <= 3 THEN 1 ELSE 0 END AS any3,
                    CASE WHEN rank_all <= 5 THEN 1 ELSE 0 END AS all5, CASE WHEN rank_any <= 5 THEN 1 ELSE 0 END AS any5
             FROM localisation_facts",
        );
        for n in [1, 3, 5] {
            localisation.ratio(&format!("top{n}_all"), Direction::Higher, &[&format!("all{n}")], "n");
            localisation.ratio(&format!("top{n}_any"), Direction::Higher, &[&format!("any{n}")], "n");
        }
        out.push(localisation.family);

        // Cost and duration per episode (docs/metrics.md §L): over the episodes whose cost
        // (duration) is known, never counting an unknown one as 0.
        let mut costs = FamilyBuilder::new("episode_costs", &[], "SELECT * FROM episode_costs");
        costs.ratio("cost_per_episode", Direction::Lower, &["cost_usd_sum"], "cost_known");
        costs.ratio("duration_ms_per_episode", Direction::Lower, &["duration_ms_sum"], "duration_known");
        out.push(costs.family);
        out
    })
}

/// Which way a label or posture share is better: fewer failed or unsafe episodes, more
/// of every other label; more episodes whose evidence is current, fewer in every other
/// posture.
fn share_direction(column: &str, value: &str) -> Direction {
    let worse = match column {
        "label" => value == "failed" || value == "unsafe_invalid",
        _ => value != epistore_package::Posture::Current.as_str(),
    };
    if worse {
        Direction::Lower
    } else {
        Direction::Higher
    }
}

/// `CASE WHEN column = 'value' ...` components for a share view.
fn label_source(column: &str, values: &[&str]) -> String {
    let cases: Vec<String> =
        values.iter().map(|v| format!("CASE WHEN {column} = '{v}' THEN 1 ELSE 0 END AS \"{column}_{v}\"")).collect();
    format!(
        "SELECT model, harness_level, task, \"cluster\", episode_id, 1 AS episodes, \
         CASE WHEN {column} IS NOT NULL THEN 1 ELSE 0 END AS adjudicated, {} FROM episodes",
        cases.join(", ")
    )
}

/// The cell_metrics family, read off queries/cell_metrics.sql so the text stays the
/// one definition: every line `[CAST(]sum(NUM)[ AS DOUBLE)] / nullif(sum(DEN), 0) AS
/// NAME, -- higher|lower is better`.
fn cell_family() -> Family {
    let sql = views::VIEWS.iter().find(|(name, _)| *name == "cell_metrics").expect("shipped").1;
    let mut builder = FamilyBuilder::new("cell_metrics", &[], "SELECT * FROM episode_facts");
    for line in sql.lines() {
        let Some((num, den, name, direction)) = parse_ratio_line(line) else {
            continue;
        };
        let direction =
            direction.unwrap_or_else(|| panic!("queries/cell_metrics.sql: `{name}` says not which way is better"));
        builder.ratio(name, direction, &[num], den);
    }
    builder.family
}

fn parse_ratio_line(line: &str) -> Option<(&str, &str, &str, Option<Direction>)> {
    let (code, comment) = line.split_once("--").unwrap_or((line, ""));
    let (left, right) = code.split_once("/ nullif(sum(")?;
    let num = left.split_once("sum(")?.1.split_once(')')?.0;
    let den = right.split_once(')')?.0;
    let name = right.rsplit_once(" AS ")?.1.trim().trim_end_matches(',');
    let direction = match comment.trim() {
        "higher is better" => Some(Direction::Higher),
        "lower is better" => Some(Direction::Lower),
        _ => None,
    };
    Some((num, den, name, direction))
}

/// Finds a metric by name; an unknown one is refused with the nearest names ("did you
/// mean"), and how to list them all, rather than all 48 of them.
pub fn find_metric(name: &str) -> Result<(&'static Family, &'static Metric)> {
    families().iter().find_map(|f| f.metrics.iter().find(|m| m.name == name).map(|m| (f, m))).ok_or_else(|| {
        let names: Vec<&str> = families().iter().flat_map(|f| f.metrics.iter().map(|m| m.name.as_str())).collect();
        Error::Usage(unknown_name("metric", name, &names))
    })
}

/// "unknown metric `avs_rat`; did you mean `avs_rate`?": the names within a small edit
/// distance of `name` (or containing it), closest first; all of them when none is near.
pub fn unknown_name(what: &str, name: &str, names: &[&str]) -> String {
    let wanted = name.to_ascii_lowercase();
    let mut near: Vec<(f64, &str)> = names
        .iter()
        .map(|n| (strsim::jaro_winkler(&wanted, &n.to_ascii_lowercase()), *n))
        .filter(|(score, n)| *score >= 0.85 || (wanted.len() >= 3 && n.contains(wanted.as_str())))
        .collect();
    near.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    match near.as_slice() {
        [] => format!("unknown {what} `{name}`; {what}s: {}", names.join(", ")),
        near => {
            let shown: Vec<String> = near.iter().take(5).map(|(_, n)| format!("`{n}`")).collect();
            format!("unknown {what} `{name}`; did you mean {}?", shown.join(" or "))
        }
    }
}

/// An entry's key value as text: `NULL` for a missing one (a NULL model or task is a
/// key of its own, as SQL's GROUP BY makes it).
pub fn key_text(column: &StringArray, row: usize) -> String {
    if column.is_null(row) {
        "NULL".to_string()
    } else {
        column.value(row).to_string()
    }
}

/// The families of `metrics` (names; every family when empty), each with its metrics
/// among them, in [`families`] order.
fn chosen_families(metrics: &[&str]) -> Vec<(&'static Family, Vec<&'static Metric>)> {
    families()
        .iter()
        .map(|f| (f, f.metrics.iter().filter(|m| metrics.is_empty() || metrics.contains(&m.name.as_str())).collect()))
        .filter(|(_, chosen): &(_, Vec<_>)| !chosen.is_empty())
        .collect()
}

impl Engine {
    /// The statements [`Engine::metric_intervals`] runs for the same arguments (one per
    /// family, each headed by a comment naming the family and its metrics): what
    /// `epistore metrics --ci --show-sql` prints.
    pub fn intervals_sql(metrics: &[&str], keys: &[&str], filter: Option<&str>) -> Result<String> {
        let mut out = vec![];
        for (family, chosen) in chosen_families(metrics) {
            let names: Vec<&str> = chosen.iter().map(|m| m.name.as_str()).collect();
            let sql = Self::cluster_sums_sql(family, keys, filter)?;
            out.push(format!("-- {}: sums per entry and task cluster for {}\n{sql};", family.view, names.join(", ")));
        }
        Ok(out.join("\n\n"))
    }
}

/// One entry's components summed per task cluster.
#[derive(Clone, Debug)]
pub struct ClusterSums {
    /// Values of the grouping keys, then of the family's own keys.
    pub key: Vec<String>,
    /// (cluster, component sums), by cluster name.
    pub clusters: Vec<(String, Vec<f64>)>,
}

impl ClusterSums {
    pub fn sums(&self) -> Vec<Vec<f64>> {
        self.clusters.iter().map(|(_, s)| s.clone()).collect()
    }

    pub fn total(&self, component: usize) -> f64 {
        self.clusters.iter().map(|(_, s)| s[component]).sum()
    }
}

/// An interval row of `epistore metrics --ci`.
#[derive(Clone, Debug)]
pub struct MetricInterval {
    pub key: Vec<String>,
    pub metric: String,
    pub interval: Interval,
    /// The metric's pooled denominator.
    pub n: f64,
    pub clusters: usize,
}

/// Refuses interval keys other than the cell keys and `cluster`.
pub(crate) fn check_keys(keys: &[&str]) -> Result<()> {
    let rollup_only = |key: &str| {
        crate::ROLLUP_KEYS.contains(&key).then_some("without --ci: intervals resample task clusters of cells")
    };
    check_keys_in(keys, METRIC_KEYS, "metric intervals", rollup_only)
}

impl Engine {
    /// The SQL that sums `family`'s components per (keys, own keys, cluster) over the
    /// episodes matching `filter` (a condition on `episode_facts` columns).
    pub fn cluster_sums_sql(family: &Family, keys: &[&str], filter: Option<&str>) -> Result<String> {
        check_keys(keys)?;
        let group: Vec<String> = keys
            .iter()
            .chain(family.own_keys)
            .map(|k| format!("CAST({q} AS VARCHAR) AS {q}", q = quote_ident(k)))
            .collect();
        let group_names: Vec<String> = keys.iter().chain(family.own_keys).map(|k| quote_ident(k)).collect();
        let sums: Vec<String> =
            family.components.iter().map(|c| format!("CAST(sum({q}) AS DOUBLE) AS {q}", q = quote_ident(c))).collect();
        let source = family.source_sql(keys, filter);
        // The resampling unit under a name of its own: `cluster` may be a key as well.
        let mut select = group.clone();
        select.push("CAST(\"cluster\" AS VARCHAR) AS \"__resample_cluster\"".into());
        select.extend(sums);
        let mut by = group_names.clone();
        if !keys.contains(&"cluster") {
            by.push("\"cluster\"".into());
        }
        let mut order = group_names.clone();
        order.push("\"__resample_cluster\"".into());
        Ok(format!(
            "SELECT {}\nFROM ({}) AS rows\nGROUP BY {}\nORDER BY {}",
            select.join(", "),
            source,
            by.join(", "),
            order.join(", ")
        ))
    }

    /// `family`'s components summed per entry (keys + own keys) and cluster.
    pub async fn cluster_sums(&self, family: &Family, keys: &[&str], filter: Option<&str>) -> Result<Vec<ClusterSums>> {
        let sql = Self::cluster_sums_sql(family, keys, filter)?;
        let batches = self.query(&sql).await?;
        let width = keys.len() + family.own_keys.len();
        let mut entries: BTreeMap<Vec<String>, Vec<(String, Vec<f64>)>> = BTreeMap::new();
        for batch in &batches {
            let strings = |i: usize| -> Result<StringArray> {
                let a = cast(batch.column(i), &DataType::Utf8)?;
                Ok(a.as_any().downcast_ref::<StringArray>().expect("Utf8").clone())
            };
            let key_columns = (0..=width).map(strings).collect::<Result<Vec<_>>>()?;
            let value_columns = (0..family.components.len())
                .map(|i| {
                    let a = cast(batch.column(width + 1 + i), &DataType::Float64)?;
                    Ok(a.as_any().downcast_ref::<Float64Array>().expect("Float64").clone())
                })
                .collect::<Result<Vec<_>>>()?;
            for row in 0..batch.num_rows() {
                let key: Vec<String> = key_columns[..width].iter().map(|c| key_text(c, row)).collect();
                let cluster = key_text(&key_columns[width], row);
                let values = value_columns.iter().map(|c| if c.is_null(row) { 0.0 } else { c.value(row) }).collect();
                entries.entry(key).or_default().push((cluster, values));
            }
        }
        // Draws depend on the clusters' order: by name, whatever order batches came in.
        Ok(entries
            .into_iter()
            .map(|(key, mut clusters)| {
                clusters.sort_by(|a, b| a.0.cmp(&b.0));
                ClusterSums { key, clusters }
            })
            .collect())
    }

    /// Bootstrap intervals of `metrics` (names; all of their families' metrics when
    /// empty) per entry of `keys`, over the episodes matching `filter`.
    pub async fn metric_intervals(
        &self,
        metrics: &[&str],
        keys: &[&str],
        filter: Option<&str>,
        settings: &Bootstrap,
    ) -> Result<Vec<MetricInterval>> {
        settings.validate().map_err(|e| Error::Usage(e.to_string()))?;
        let mut out = vec![];
        for (family, chosen) in chosen_families(metrics) {
            for entry in self.cluster_sums(family, keys, filter).await? {
                let sums = entry.sums();
                // One set of draws per entry, shared by all its metrics.
                let plan = ResamplePlan::new(sums.len(), settings);
                for metric in &chosen {
                    let interval = bootstrap_with_plan(&sums, &|t| metric.formula.evaluate(t), &plan, settings);
                    out.push(MetricInterval {
                        key: entry.key.clone(),
                        metric: metric.name.clone(),
                        interval,
                        n: entry.total(metric.formula.denominator()),
                        clusters: sums.len(),
                    });
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_metric_is_answered_with_the_nearest_names() {
        let err = |name: &str| find_metric(name).err().unwrap().to_string();
        assert!(err("avs_rat").contains("did you mean `avs_rate`"), "{}", err("avs_rat"));
        assert!(err("stale_checks").contains("`stale_check_rate`"), "{}", err("stale_checks"));
        assert!(err("posture").contains("`posture_share:current`"), "{}", err("posture"));
        // Nothing near: every name, so the user sees what there is.
        let far = err("qqqqqqqqq");
        assert!(far.contains("metrics: avs_rate, m_hir") && !far.contains("did you mean"), "{far}");
        assert!(find_metric("avs_rate").is_ok());
    }

    #[test]
    fn every_ratio_of_cell_metrics_is_read_off_the_shipped_sql() {
        let family = cell_family();
        let names: Vec<&str> = family.metrics.iter().map(|m| m.name.as_str()).collect();
        let sql = views::VIEWS.iter().find(|(n, _)| *n == "cell_metrics").unwrap().1;
        let ratios = sql.lines().filter(|l| l.contains("/ nullif(")).count();
        assert_eq!(names.len(), ratios);
        assert_eq!(names.first(), Some(&"avs_rate"));
        assert!(names.contains(&"mean_score") && names.contains(&"selective_risk"));
        let (_, risk) = find_metric("selective_risk").unwrap();
        assert_eq!(risk.description, "accepted_wrong / accepted_known");
        assert_eq!(risk.direction, Direction::Lower);
        assert_eq!(find_metric("coverage").unwrap().1.direction, Direction::Higher);
    }

    #[test]
    fn rates_of_a_bad_thing_rank_lower_first() {
        for name in ["f_i", "f_j", "false_accept_rate", "phi", "m_hir", "posture_share:stale", "label_share:failed"] {
            assert_eq!(find_metric(name).unwrap().1.direction, Direction::Lower, "{name}");
        }
        for name in ["posture_share:current", "label_share:autonomous_verified_success", "top1_all", "repair_rate"] {
            assert_eq!(find_metric(name).unwrap().1.direction, Direction::Higher, "{name}");
        }
    }

    #[test]
    fn formulas_follow_the_contract() {
        let ratio = Formula::Ratio { num: vec![0, 1], den: 2 };
        assert_eq!(ratio.evaluate(&[1.0, 2.0, 4.0]), Some(0.75));
        assert_eq!(ratio.evaluate(&[1.0, 2.0, 0.0]), None);
        // n11 = 2, n10 = 1, n01 = 1, n00 = 4, n0 = 8: D = 2/8 - (3/8)(3/8).
        let d = Formula::ExcessJoint { n11: 0, n10: 1, n01: 2, n0: 4 };
        assert_eq!(d.evaluate(&[2.0, 1.0, 1.0, 4.0, 8.0]), Some(0.25 - 9.0 / 64.0));
        let phi = Formula::Phi { n11: 0, n10: 1, n01: 2, n00: 3, n0: 4 };
        assert_eq!(phi.evaluate(&[2.0, 1.0, 1.0, 4.0, 8.0]), Some((8.0 - 1.0) / (3.0f64 * 5.0 * 3.0 * 5.0).sqrt()));
        assert_eq!(phi.evaluate(&[2.0, 0.0, 0.0, 0.0, 2.0]), None);
        assert_eq!(phi.denominator(), 4);
    }
}
