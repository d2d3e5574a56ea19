//! The four formats of a leaderboard.

use std::fmt::Write;

use epistore_view::{escape_html, script_json, with_dom_helpers};

use crate::{Entry, Leaderboard, Result};

const TEMPLATE: &str = include_str!("leaderboard.html");

pub(crate) fn number(v: Option<f64>) -> String {
    v.map_or_else(|| "NULL".to_string(), |v| format!("{v:.3}"))
}

fn p_value(v: f64) -> String {
    if v < 0.001 {
        format!("{v:.1e}")
    } else {
        format!("{v:.3}")
    }
}

fn interval(e: &Entry) -> String {
    match (e.lo, e.hi) {
        (Some(lo), Some(hi)) => format!("[{lo:.3}, {hi:.3}]"),
        // Every replicate would be the one cluster again: no interval, said why.
        _ if e.clusters == 1 => "NULL (one task cluster)".into(),
        _ => "NULL".into(),
    }
}

fn count(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

pub fn to_json(board: &Leaderboard) -> Result<String> {
    Ok(serde_json::to_string_pretty(board)? + "\n")
}

/// One row per entry; the episode ids space-separated in the last column.
pub fn to_csv(board: &Leaderboard) -> Result<String> {
    let mut out = String::from(
        "rank,entry,value,lo,hi,n,episodes,clusters,replicates_used,replicates_dropped,tie_group,mean_difference_vs_above,p_vs_above,p_holm_vs_above,mcnemar_p_vs_above,rank_stability,cost_per_episode,cost_lo,cost_hi,duration_ms_per_episode,pareto,episode_ids\n",
    );
    let field = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let o = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for e in &board.entries {
        let vs = e.vs_above.as_ref();
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            e.rank.map(|r| r.to_string()).unwrap_or_default(),
            field(&e.label),
            o(e.value),
            o(e.lo),
            o(e.hi),
            count(e.n),
            e.episodes,
            e.clusters,
            e.replicates_used,
            e.replicates_dropped,
            e.tie_group.map(|g| g.to_string()).unwrap_or_default(),
            o(vs.map(|v| v.mean_difference)),
            o(vs.map(|v| v.p)),
            o(vs.map(|v| v.p_holm)),
            o(vs.and_then(|v| v.mcnemar.as_ref()).map(|m| m.p)),
            o(e.rank_stability),
            o(e.cost_per_episode.as_ref().and_then(|c| c.value)),
            o(e.cost_per_episode.as_ref().and_then(|c| c.lo)),
            o(e.cost_per_episode.as_ref().and_then(|c| c.hi)),
            o(e.duration_ms_per_episode.as_ref().and_then(|c| c.value)),
            e.pareto,
            e.episode_ids.join(" ")
        );
    }
    Ok(out)
}

fn errors_word(rule: crate::Errors) -> &'static str {
    match rule {
        crate::Errors::Fail => "counted as failures",
        crate::Errors::Exclude => "left out",
    }
}

pub fn to_markdown(board: &Leaderboard) -> Result<String> {
    let mut out = String::new();
    let b = &board.bootstrap;
    let _ = writeln!(out, "# {}\n", board.title);
    let _ = writeln!(
        out,
        "`{}` = {} ({} is better). Store snapshot {}{}.\n",
        board.metric,
        board.metric_description,
        board.direction,
        board.store_snapshot,
        board.filter.as_ref().map(|f| format!(", episodes where `{f}`")).unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "Intervals: {:.0}% percentile bootstrap over task clusters, B = {}, seed {}. \
         Comparisons: a paired sign-flip test for every pair of ranked entries that shares a task \
         cluster, Holm-adjusted ({}). Tie groups, at alpha = {}: {}.\n",
        b.level * 100.0,
        b.replicates,
        b.seed,
        match board.comparison.family {
            // No two entries share a task cluster: nothing was compared.
            0 if board.entries.len() > 1 => {
                "no comparisons: no two entries share a task cluster, so their order is untested".to_string()
            }
            n => format!("family of {n} comparisons"),
        },
        board.comparison.alpha,
        board.comparison.groups,
    );
    if let Some(errors) = &board.errors {
        let _ = writeln!(out, "Errors ({}, {}): {}.\n", errors_word(errors.rule), errors.chosen, errors.text);
    }
    out.push_str(
        "| rank | entry | value | interval | n | episodes | clusters | tie group | vs above (Holm p) | rank held |\n",
    );
    out.push_str("|---:|---|---:|---|---:|---:|---:|---:|---|---:|\n");
    for e in &board.entries {
        let vs = e
            .vs_above
            .as_ref()
            .map(|v| {
                let mcnemar = v.mcnemar.as_ref().map(|m| format!("; McNemar p {}", p_value(m.p))).unwrap_or_default();
                format!("{:+.3} (p {}{mcnemar})", v.mean_difference, p_value(v.p_holm))
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            e.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
            escape_html(&e.label).replace('|', "\\|").replace(['\n', '\r'], " "),
            number(e.value),
            interval(e),
            count(e.n),
            e.episodes,
            e.clusters,
            e.tie_group.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            vs,
            e.rank_stability.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "-".into()),
        );
    }
    let _ = writeln!(
        out,
        "\nColumns: **value** the metric pooled over the entry's episodes; **interval** its {:.0}% bootstrap \
         interval over task clusters (`NULL (one task cluster)` when the entry has a single cluster: no between-cluster \
         information, no interval); **n** the metric's pooled denominator; **episodes** the entry's episodes; \
         **clusters** its task clusters (the unit resampled); **tie group** as stated above; **vs above** the mean \
         per-cluster difference from the entry ranked above and its Holm-adjusted p (McNemar's exact p, unadjusted, \
         where every shared cluster has one binary outcome); **rank held** how often the entry keeps its rank over \
         {} random halves of the task clusters (seed {}).",
        b.level * 100.0,
        board.stability.halves,
        board.stability.seed
    );
    let costed: Vec<&crate::Entry> = board.entries.iter().filter(|e| e.cost_per_episode.is_some()).collect();
    let c = &board.cost;
    let _ = writeln!(
        out,
        "\n## Cost and duration\n\nCosts: {} episodes as their logs state (observed), {} derived from their tokens with \
         price table {} ({}), {} unknown (left out, never counted as 0).\n",
        c.observed, c.derived, c.price_version, c.price_date, c.unknown
    );
    if costed.is_empty() {
        out.push_str("No entry has an episode with a known cost.\n");
    } else {
        out.push_str("| entry | value | cost / episode (USD) | interval | episodes costed | duration / episode | on the frontier |\n");
        out.push_str("|---|---:|---:|---|---:|---:|---|\n");
        for e in &board.entries {
            let cost = e.cost_per_episode.as_ref();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                escape_html(&e.label).replace('|', "\\|"),
                number(e.value),
                cost.and_then(|c| c.value).map(|v| format!("{v:.4}")).unwrap_or_else(|| "NULL".into()),
                match cost.map(|c| (c.lo, c.hi)) {
                    Some((Some(lo), Some(hi))) => format!("[{lo:.4}, {hi:.4}]"),
                    _ => "-".into(),
                },
                cost.map(|c| count(c.n)).unwrap_or_else(|| "0".into()),
                e.duration_ms_per_episode
                    .as_ref()
                    .and_then(|d| d.value)
                    .map(|ms| format!("{:.1} s", ms / 1000.0))
                    .unwrap_or_else(|| "NULL".into()),
                if e.pareto { "yes" } else { "" },
            );
        }
        out.push_str(
            "\nOn the frontier: no other entry is at most as costly per episode and at least as good on the metric, \
             and strictly one of the two.\n",
        );
    }
    if !board.pass_k.is_empty() {
        out.push_str(
            "\n## Reliability over attempts\n\npass@k: at least one of k attempts of a task resolved; pass^k: all k \
             resolved (unbiased estimators over each task's judged attempts, mean over tasks with at least k, \
             shown where at least 5 tasks have k; intervals over task clusters).\n\n| model / harness level | k | tasks | pass@k | interval | pass^k | interval |\n\
             |---|---:|---:|---:|---|---:|---|\n",
        );
        for series in &board.pass_k {
            for p in &series.points {
                let ci = |lo: Option<f64>, hi: Option<f64>| match (lo, hi) {
                    (Some(lo), Some(hi)) => format!("[{lo:.3}, {hi:.3}]"),
                    _ => "-".into(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    escape_html(&series.label).replace('|', "\\|"),
                    p.k,
                    p.tasks,
                    number(p.pass_at_k),
                    ci(p.pass_at_k_lo, p.pass_at_k_hi),
                    number(p.pass_hat_k),
                    ci(p.pass_hat_k_lo, p.pass_hat_k_hi),
                );
            }
        }
    }
    out.push_str("\n## Episodes behind each entry\n\n");
    for e in &board.entries {
        let _ =
            writeln!(out, "<details><summary>{} ({} episodes)</summary>\n", escape_html(&e.label), e.episode_ids.len());
        for id in &e.episode_ids {
            let _ = writeln!(out, "- `{id}`");
        }
        out.push_str("\n</details>\n\n");
    }
    Ok(out)
}

/// One static page, no network: the data is embedded as JSON and drawn by the page's
/// own script.
pub fn to_html(board: &Leaderboard) -> Result<String> {
    let data = script_json(board)?;
    Ok(with_dom_helpers(TEMPLATE).replacen("EPISTORE_LEADERBOARD_TITLE", &escape_html(&board.title), 1).replacen(
        "/*EPISTORE_LEADERBOARD_DATA*/null",
        &data,
        1,
    ))
}
