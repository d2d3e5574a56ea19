//! Intervals and leaderboards: `metrics(ci=True)` and `leaderboard()`, computed by the
//! same library calls as `epistore metrics --ci` and `epistore leaderboard`, returned as
//! Arrow batches (or the board's text).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int64Array, ListBuilder, StringArray, StringBuilder, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use epistore_leaderboard::{Leaderboard, Spec};
use epistore_sql::intervals::Direction;
use epistore_sql::Engine;
use epistore_stats::Bootstrap;

use crate::stream::ArrowStream;
use crate::Result;

/// Bootstrap settings: the command line's defaults (B = 2000, its fixed seed) unless
/// given.
pub fn bootstrap(replicates: Option<usize>, seed: Option<u64>) -> Bootstrap {
    let default = Bootstrap::default();
    Bootstrap { replicates: replicates.unwrap_or(default.replicates), seed: seed.unwrap_or(default.seed), ..default }
}

/// `metrics --ci`: one row per entry and metric with its interval, the columns
/// `epistore metrics --ci` prints (keys, `keyN` for the keys of a family's own, metric,
/// value, lo, hi, n, clusters, replicates_used, replicates_dropped, seed).
pub async fn metric_intervals(
    engine: &Engine,
    keys: &[&str],
    filter: Option<&str>,
    all: bool,
    settings: &Bootstrap,
) -> Result<ArrowStream> {
    let metrics: Vec<&str> =
        if all { vec![] } else { epistore_sql::HEADLINE.iter().copied().filter(|m| *m != "episodes").collect() };
    let intervals = engine.metric_intervals(&metrics, keys, filter, settings).await?;
    let width = intervals.iter().map(|i| i.key.len()).max().unwrap_or(keys.len()).max(keys.len());
    let mut fields: Vec<Field> = keys.iter().map(|k| Field::new(*k, DataType::Utf8, true)).collect();
    for i in keys.len()..width {
        fields.push(Field::new(format!("key{}", i + 1), DataType::Utf8, true));
    }
    let mut columns: Vec<ArrayRef> = (0..width)
        .map(|k| Arc::new(intervals.iter().map(|i| i.key.get(k).cloned()).collect::<StringArray>()) as ArrayRef)
        .collect();
    let float = |f: &dyn Fn(&epistore_sql::intervals::MetricInterval) -> Option<f64>| {
        Arc::new(intervals.iter().map(f).collect::<Float64Array>()) as ArrayRef
    };
    let int = |f: &dyn Fn(&epistore_sql::intervals::MetricInterval) -> usize| {
        Arc::new(intervals.iter().map(|i| f(i) as i64).collect::<Int64Array>()) as ArrayRef
    };
    fields.extend([
        Field::new("metric", DataType::Utf8, false),
        Field::new("value", DataType::Float64, true),
        Field::new("lo", DataType::Float64, true),
        Field::new("hi", DataType::Float64, true),
        Field::new("n", DataType::Float64, false),
        Field::new("clusters", DataType::Int64, false),
        Field::new("replicates_used", DataType::Int64, false),
        Field::new("replicates_dropped", DataType::Int64, false),
        Field::new("seed", DataType::UInt64, false),
    ]);
    columns.extend([
        Arc::new(intervals.iter().map(|i| Some(i.metric.as_str())).collect::<StringArray>()) as ArrayRef,
        float(&|i| i.interval.estimate),
        float(&|i| i.interval.lo),
        float(&|i| i.interval.hi),
        float(&|i| Some(i.n)),
        int(&|i| i.clusters),
        int(&|i| i.interval.used),
        int(&|i| i.interval.dropped),
        Arc::new(UInt64Array::from(vec![settings.seed; intervals.len()])) as ArrayRef,
    ]);
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(ArrowStream::batches(schema, vec![batch]))
}

/// What `epistore leaderboard --metric M --by KEYS ...` ranks.
#[allow(clippy::too_many_arguments)] // the keyword arguments of `Store.leaderboard`, one for one
pub fn spec(
    metric: String,
    by: Vec<String>,
    filter: Option<String>,
    better: Option<&str>,
    alpha: f64,
    replicates: Option<usize>,
    seed: Option<u64>,
    errors: Option<&str>,
) -> Result<Spec> {
    let direction = match better {
        None => None,
        Some("higher") => Some(Direction::Higher),
        Some("lower") => Some(Direction::Lower),
        Some(other) => anyhow::bail!("better must be \"higher\" or \"lower\", not {other:?}"),
    };
    let errors = match errors {
        None => None,
        Some("fail") => Some(epistore_leaderboard::Errors::Fail),
        Some("exclude") => Some(epistore_leaderboard::Errors::Exclude),
        Some(other) => anyhow::bail!("errors must be \"fail\" or \"exclude\", not {other:?}"),
    };
    Ok(Spec {
        metric,
        by,
        filter,
        bootstrap: bootstrap(replicates, seed),
        alpha,
        direction,
        errors,
        generated_by: format!("epistore {}", env!("CARGO_PKG_VERSION")),
    })
}

#[derive(Clone, Copy)]
pub enum BoardFormat {
    Md,
    Html,
    Json,
    Csv,
    Table,
}

impl BoardFormat {
    pub fn parse(name: &str) -> Result<BoardFormat> {
        Ok(match name {
            "md" | "markdown" => BoardFormat::Md,
            "html" => BoardFormat::Html,
            "json" => BoardFormat::Json,
            "csv" => BoardFormat::Csv,
            "table" => BoardFormat::Table,
            other => anyhow::bail!("unknown leaderboard format {other:?}: one of md, html, json, csv, table"),
        })
    }
}

pub enum Rendered {
    Text(String),
    Table(ArrowStream),
}

pub fn render(board: &Leaderboard, format: BoardFormat) -> Result<Rendered> {
    Ok(Rendered::Text(match format {
        BoardFormat::Md => epistore_leaderboard::to_markdown(board)?,
        BoardFormat::Html => epistore_leaderboard::to_html(board)?,
        BoardFormat::Json => epistore_leaderboard::to_json(board)?,
        BoardFormat::Csv => epistore_leaderboard::to_csv(board)?,
        BoardFormat::Table => return Ok(Rendered::Table(entries(board)?)),
    }))
}

/// The board's entries, one row each in rank order: the columns of the CSV board, the
/// entry's key values as columns of their own, and the episode ids as a list.
fn entries(board: &Leaderboard) -> Result<ArrowStream> {
    let e = &board.entries;
    let mut fields = vec![Field::new("rank", DataType::Int64, true), Field::new("entry", DataType::Utf8, false)];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(e.iter().map(|e| e.rank.map(|r| r as i64)).collect::<Int64Array>()),
        Arc::new(e.iter().map(|e| Some(e.label.as_str())).collect::<StringArray>()),
    ];
    for key in &board.by {
        fields.push(Field::new(key, DataType::Utf8, true));
        columns.push(Arc::new(e.iter().map(|e| e.key.get(key).map(String::as_str)).collect::<StringArray>()));
    }
    let float = |f: &dyn Fn(&epistore_leaderboard::Entry) -> Option<f64>| {
        Arc::new(e.iter().map(f).collect::<Float64Array>()) as ArrayRef
    };
    let int = |f: &dyn Fn(&epistore_leaderboard::Entry) -> Option<usize>| {
        Arc::new(e.iter().map(|e| f(e).map(|v| v as i64)).collect::<Int64Array>()) as ArrayRef
    };
    for (name, kind) in [
        ("value", DataType::Float64),
        ("lo", DataType::Float64),
        ("hi", DataType::Float64),
        ("n", DataType::Float64),
        ("episodes", DataType::Int64),
        ("clusters", DataType::Int64),
        ("replicates_used", DataType::Int64),
        ("replicates_dropped", DataType::Int64),
        ("tie_group", DataType::Int64),
        ("vs_above", DataType::Utf8),
        ("mean_difference_vs_above", DataType::Float64),
        ("p_vs_above", DataType::Float64),
        ("p_holm_vs_above", DataType::Float64),
    ] {
        fields.push(Field::new(name, kind, true));
    }
    columns.extend([
        float(&|e| e.value),
        float(&|e| e.lo),
        float(&|e| e.hi),
        float(&|e| Some(e.n)),
        int(&|e| Some(e.episodes)),
        int(&|e| Some(e.clusters)),
        int(&|e| Some(e.replicates_used)),
        int(&|e| Some(e.replicates_dropped)),
        int(&|e| e.tie_group),
        Arc::new(e.iter().map(|e| e.vs_above.as_ref().map(|v| v.label.as_str())).collect::<StringArray>()),
        float(&|e| e.vs_above.as_ref().map(|v| v.mean_difference)),
        float(&|e| e.vs_above.as_ref().map(|v| v.p)),
        float(&|e| e.vs_above.as_ref().map(|v| v.p_holm)),
    ]);
    let mut ids = ListBuilder::new(StringBuilder::new());
    for entry in e {
        for id in &entry.episode_ids {
            ids.values().append_value(id);
        }
        ids.append(true);
    }
    let ids = ids.finish();
    fields.push(Field::new("episode_ids", ids.data_type().clone(), false));
    columns.push(Arc::new(ids));
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(ArrowStream::batches(schema, vec![batch]))
}
