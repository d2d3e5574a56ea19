//! The store-wide episode list (`epistore ui`'s `/episodes`): which episodes match a set
//! of field filters and a full-text query, as SQL. The filters are values, never SQL:
//! each is quoted here as a literal, so a list's address can hold any text.

use crate::sql_text::quote_literal;

/// A three-way filter on a field that may be unrecorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Known<T> {
    /// The field holds this value.
    Is(T),
    /// The field is NULL ("not recorded").
    NotRecorded,
}

/// What an episode list keeps: every field given must match (absent = any).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpisodeQuery {
    pub model: Option<String>,
    pub harness_level: Option<String>,
    pub task: Option<String>,
    pub source_format: Option<Known<String>>,
    pub posture: Option<String>,
    pub label: Option<Known<String>>,
    /// An active annotation label a person gave (docs/annotations.md).
    pub annotation: Option<String>,
    /// `agent_reported_complete`.
    pub claim: Option<Known<bool>>,
    pub correct: Option<Known<bool>>,
    /// A full-text query over the run's content (the `search` table function's
    /// language): only episodes with a hit.
    pub text: Option<String>,
}

/// How many full-text hits a list looks through for its episodes (the `search`
/// function's own bound).
pub const TEXT_HITS: usize = 100_000;

impl EpisodeQuery {
    /// The `WHERE` clause over `episodes` (aliased `e`), empty when nothing is filtered.
    fn condition(&self) -> String {
        let mut parts = Vec::new();
        let text = |col: &str, v: &Option<String>, parts: &mut Vec<String>| {
            if let Some(v) = v {
                parts.push(format!("e.{col} = {}", quote_literal(v)));
            }
        };
        text("model", &self.model, &mut parts);
        text("harness_level", &self.harness_level, &mut parts);
        text("task", &self.task, &mut parts);
        text("posture", &self.posture, &mut parts);
        let known_text = |col: &str, v: &Option<Known<String>>, parts: &mut Vec<String>| match v {
            Some(Known::Is(v)) => parts.push(format!("e.{col} = {}", quote_literal(v))),
            Some(Known::NotRecorded) => parts.push(format!("e.{col} IS NULL")),
            None => {}
        };
        known_text("source_format", &self.source_format, &mut parts);
        known_text("label", &self.label, &mut parts);
        let known_bool = |col: &str, v: &Option<Known<bool>>, parts: &mut Vec<String>| match v {
            Some(Known::Is(b)) => parts.push(format!("e.{col} = {b}")),
            Some(Known::NotRecorded) => parts.push(format!("e.{col} IS NULL")),
            None => {}
        };
        known_bool("agent_reported_complete", &self.claim, &mut parts);
        known_bool("correct", &self.correct, &mut parts);
        if let Some(label) = &self.annotation {
            parts.push(format!("annotated(e.episode_id, {})", quote_literal(label)));
        }
        if let Some(q) = &self.text {
            parts.push(format!("e.episode_id IN (SELECT episode_id FROM search({}, {TEXT_HITS}))", quote_literal(q)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", parts.join(" AND "))
        }
    }

    /// The list's rows, at most `limit`: one per episode, with what tells episodes
    /// apart at a glance (the columns of an episode list page), in model, level, task
    /// and attempt order.
    pub fn rows_sql(&self, limit: usize) -> String {
        format!(
            "SELECT e.episode_id AS id, e.model, e.harness_level, e.task, e.\"cluster\", e.attempt, e.posture, \
             e.label, e.correct, e.agent_reported_complete AS claim, e.admission, e.final_revision, \
             e.n_verification AS checks, k.stale AS stale_checks, e.n_interventions AS interventions, e.source_format, \
             a.annotations \
             FROM episodes e LEFT JOIN (SELECT episode_id, count(*) FILTER (WHERE freshness = 'stale') AS stale \
             FROM checks GROUP BY episode_id) k ON k.episode_id = e.episode_id \
             LEFT JOIN (SELECT episode_id, string_agg(label, ', ' ORDER BY label) AS annotations \
             FROM annotations WHERE active GROUP BY episode_id) a ON a.episode_id = e.episode_id{} \
             ORDER BY e.model, e.harness_level, e.task, e.attempt, e.episode_id LIMIT {limit}",
            self.condition()
        )
    }

    /// How many episodes match.
    pub fn count_sql(&self) -> String {
        format!("SELECT count(*) AS n FROM episodes e{}", self.condition())
    }
}

/// The values a list can be filtered by, per field (`field`, `value`; NULL = not
/// recorded), each field's at most `per_field`.
pub fn facets_sql(per_field: usize) -> String {
    ["model", "harness_level", "source_format", "posture", "label"]
        .iter()
        .map(|f| {
            format!(
                "SELECT * FROM (SELECT '{f}' AS field, {f} AS value, count(*) AS episodes FROM episodes \
                 GROUP BY {f} ORDER BY {f} NULLS LAST LIMIT {per_field})"
            )
        })
        .chain(std::iter::once(format!(
            "SELECT * FROM (SELECT 'annotation' AS field, label AS value, count(DISTINCT episode_id) AS episodes \
             FROM annotations WHERE active GROUP BY label ORDER BY label LIMIT {per_field})"
        )))
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_never_spliced() {
        let q = EpisodeQuery {
            model: Some("o'brien".into()),
            label: Some(Known::NotRecorded),
            claim: Some(Known::Is(true)),
            text: Some("it's \"x\"".into()),
            annotation: Some("env 'failure'".into()),
            ..Default::default()
        };
        let sql = q.rows_sql(10);
        assert!(sql.contains("e.model = 'o''brien'"), "{sql}");
        assert!(sql.contains("e.label IS NULL"), "{sql}");
        assert!(sql.contains("e.agent_reported_complete = true"), "{sql}");
        assert!(sql.contains("search('it''s \"x\"', 100000)"), "{sql}");
        assert!(sql.contains("annotated(e.episode_id, 'env ''failure''')"), "{sql}");
        assert_eq!(EpisodeQuery::default().count_sql(), "SELECT count(*) AS n FROM episodes e");
    }
}
