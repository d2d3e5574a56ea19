//! Full-text search in SQL and for the command line: the `search(query [, limit])`
//! table function and [`Engine::search`](crate::Engine::search), over the search index
//! each columnar segment carries (`<segment>/search/`, built by
//! [`epistore_search::write_index`] with the segment's Parquet files, listed in its
//! manifest, checked and rebuilt like them). The index is derived data: the store is
//! the truth, and a damaged index is a damaged segment, discarded and built again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, ScalarValue};
use datafusion::datasource::MemTable;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::Expr;
pub use epistore_search::check_query;
use epistore_search::{Hit, SearchOptions};

use crate::columnar::Segment;
use crate::error::{Error, Result};
use crate::tables::Loaded;

/// The index directory inside a segment.
pub const INDEX_DIR: &str = "search";
/// Rows `search(query)` returns when no limit is given.
pub const DEFAULT_LIMIT: usize = 100;
/// The most rows one search returns.
pub const MAX_LIMIT: usize = 100_000;

/// Writes the search index of a segment's episodes into `<segment_tmp>/search`. A
/// failure is one of writing the segment (a full disk), so a reader falls back to the
/// store as for any segment it cannot build.
pub(crate) fn write_segment_index(segment_tmp: &Path, loaded: &[Loaded]) -> Result<u64> {
    let episodes: Vec<(&str, &epistore_package::Episode)> =
        loaded.iter().map(|l| (l.id.as_str(), &l.episode)).collect();
    let dir = segment_tmp.join(INDEX_DIR);
    epistore_search::write_index(&dir, &episodes).map_err(|e| {
        Error::Store(epistore_store::Error::Io { path: dir.clone(), source: std::io::Error::other(e.to_string()) })
    })
}

pub(crate) fn search_error(e: epistore_search::Error) -> Error {
    match e {
        epistore_search::Error::Query { .. } => Error::Usage(format!("search: {e}")),
        other => Error::Store(epistore_store::Error::Corrupt(format!("search index: {other}"))),
    }
}

/// The schema of a search result: joins with every table on (`episode_id`, `seq`).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("episode_id", DataType::Utf8, false),
        Field::new("seq", DataType::Int64, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("tool", DataType::Utf8, true),
        Field::new("snippet", DataType::Utf8, false),
        Field::new("score", DataType::Float64, false),
    ]))
}

/// Hits as a record batch of [`schema`].
pub fn batch(hits: &[Hit]) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(hits.iter().map(|h| h.episode_id.as_str()))),
            Arc::new(Int64Array::from_iter_values(hits.iter().map(|h| h.seq as i64))),
            Arc::new(StringArray::from_iter_values(hits.iter().map(|h| h.kind.name()))),
            Arc::new(hits.iter().map(|h| h.tool.as_deref()).collect::<StringArray>()),
            Arc::new(StringArray::from_iter_values(hits.iter().map(|h| h.snippet.as_str()))),
            Arc::new(Float64Array::from_iter_values(hits.iter().map(|h| f64::from(h.score)))),
        ],
    )?)
}

/// What a session searches: the index of every segment of its snapshot, less the
/// episodes a later import supersedes (as its `episodes` table leaves them out).
#[derive(Debug, Clone)]
pub struct SearchIndexes {
    dirs: Option<Vec<PathBuf>>,
    excluded: Arc<HashSet<String>>,
}

impl SearchIndexes {
    pub(crate) fn over(segments: &[Segment], excluded: &[String]) -> SearchIndexes {
        SearchIndexes {
            dirs: Some(segments.iter().map(|s| s.dir.join(INDEX_DIR)).collect()),
            excluded: Arc::new(excluded.iter().cloned().collect()),
        }
    }

    /// A session reading the store directly (no segments could be written): no index.
    pub(crate) fn none() -> SearchIndexes {
        SearchIndexes { dirs: None, excluded: Arc::default() }
    }

    /// The best `limit` hits of `query`, only in `episodes` when given.
    pub fn search(&self, query: &str, limit: usize, episodes: Option<HashSet<String>>) -> Result<Vec<Hit>> {
        let Some(dirs) = &self.dirs else {
            return Err(Error::Usage(
                "search needs the store's columnar segments, which this session could not write (a read-only \
                 store directory?)"
                    .into(),
            ));
        };
        if limit == 0 || limit > MAX_LIMIT {
            return Err(Error::Usage(format!("search: the limit must be between 1 and {MAX_LIMIT}")));
        }
        // Superseded episodes are left out after the search: ask for as many more.
        let episodes = episodes.map(|set| set.into_iter().filter(|id| !self.excluded.contains(id)).collect());
        let options = SearchOptions { limit: limit + self.excluded.len().min(MAX_LIMIT), episodes };
        let mut hits = epistore_search::search(dirs, query, &options).map_err(search_error)?;
        hits.retain(|h| !self.excluded.contains(&h.episode_id));
        hits.truncate(limit);
        Ok(hits)
    }
}

/// `search(query [, limit])`: the hits as a table, best first.
#[derive(Debug)]
pub(crate) struct SearchFunction(pub SearchIndexes);

fn literal_text(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s.clone()),
        _ => None,
    }
}

fn literal_count(e: &Expr) -> Option<usize> {
    match e {
        Expr::Literal(ScalarValue::Int64(Some(n)), _) => usize::try_from(*n).ok(),
        Expr::Literal(ScalarValue::Int32(Some(n)), _) => usize::try_from(*n).ok(),
        Expr::Literal(ScalarValue::UInt64(Some(n)), _) => usize::try_from(*n).ok(),
        _ => None,
    }
}

impl TableFunctionImpl for SearchFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> DfResult<Arc<dyn TableProvider>> {
        let usage = "search(query [, limit]) takes a text query and an optional row count, both literals";
        let (query, limit) = match args.exprs() {
            [q] => (literal_text(q), Some(DEFAULT_LIMIT)),
            [q, n] => (literal_text(q), literal_count(n)),
            _ => return plan_err!("{usage}"),
        };
        let (Some(query), Some(limit)) = (query, limit) else {
            return plan_err!("{usage}");
        };
        let hits = self.0.search(&query, limit, None).map_err(|e| DataFusionError::Plan(e.to_string()))?;
        let table =
            MemTable::try_new(schema(), vec![vec![batch(&hits).map_err(|e| DataFusionError::External(Box::new(e)))?]])?;
        Ok(Arc::new(table))
    }
}
