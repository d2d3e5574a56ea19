//! The TableProvider over the store: pushes projection, equality filters on the cell
//! keys (model, harness_level, task) and LIMIT down, so a query on one model or one
//! cell decodes only that part of the store (through the cell index).
//!
//! Decoded episodes are cached per selection for the life of the session: the metric
//! views read the same tables many times, and the snapshot never changes under them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::Session;
use datafusion::common::ScalarValue;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use epistore_package::hex;
use epistore_store::{EpisodeRecord, Snapshot};

use crate::error::{Error, Result};
use crate::tables::{Loaded, TableKind};

/// Which episodes a scan needs: equality constraints on the cell keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selection {
    pub model: Option<String>,
    pub harness_level: Option<String>,
    pub task: Option<String>,
}

impl Selection {
    fn is_all(&self) -> bool {
        self.model.is_none() && self.harness_level.is_none() && self.task.is_none()
    }

    /// `column = 'literal'` on a cell key, in either order.
    fn cell_equality(expr: &Expr) -> Option<(&'static str, String)> {
        let Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) = expr else {
            return None;
        };
        let (column, value) = match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => (c, v),
            _ => return None,
        };
        let key = match column.name.as_str() {
            "model" => "model",
            "harness_level" => "harness_level",
            "task" => "task",
            _ => return None,
        };
        match value {
            ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => {
                Some((key, s.clone()))
            }
            _ => None,
        }
    }

    fn from_filters(filters: &[Expr]) -> Selection {
        let mut s = Selection::default();
        for (key, value) in filters.iter().filter_map(Selection::cell_equality) {
            let slot = match key {
                "model" => &mut s.model,
                "harness_level" => &mut s.harness_level,
                _ => &mut s.task,
            };
            // Two different values for one key select nothing; keep the first and let
            // DataFusion's own filter (kept above the scan) remove the rows.
            slot.get_or_insert(value);
        }
        s
    }
}

/// The snapshot and what has been decoded from it.
pub struct StoreData {
    snapshot: Mutex<Snapshot>,
    records: Mutex<HashMap<Selection, Arc<Vec<EpisodeRecord>>>>,
    traces: Mutex<HashMap<Selection, Arc<Vec<Loaded>>>>,
    decoded: AtomicU64,
}

impl std::fmt::Debug for StoreData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreData").field("decoded", &self.decoded).finish()
    }
}

impl StoreData {
    pub fn new(snapshot: Snapshot) -> StoreData {
        StoreData {
            snapshot: Mutex::new(snapshot),
            records: Mutex::default(),
            traces: Mutex::default(),
            decoded: AtomicU64::new(0),
        }
    }

    /// Episodes decoded (records or traces) so far: how much of the store was read.
    pub fn decoded(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    fn ids(snapshot: &Snapshot, s: &Selection) -> Result<Vec<[u8; 32]>> {
        Ok(snapshot.select_ids(s.model.as_deref(), s.harness_level.as_deref(), s.task.as_deref())?)
    }

    fn records(&self, s: &Selection, limit: Option<usize>) -> Result<Arc<Vec<EpisodeRecord>>> {
        if let Some(hit) = self.records.lock().unwrap().get(s) {
            return Ok(hit.clone());
        }
        let snapshot = self.snapshot.lock().unwrap();
        let mut out = Vec::new();
        // Under a LIMIT, stop decoding as soon as enough rows are in.
        let wants_more = |out: &Vec<EpisodeRecord>| limit.is_none_or(|n| out.len() < n);
        if s.is_all() {
            snapshot.for_each_episode(|r| {
                out.push(r);
                Ok(wants_more(&out))
            })?;
        } else {
            for id in Self::ids(&snapshot, s)? {
                if !wants_more(&out) {
                    break;
                }
                out.extend(snapshot.episode(&id)?);
            }
        }
        self.decoded.fetch_add(out.len() as u64, Ordering::Relaxed);
        let out = Arc::new(out);
        if limit.is_none() {
            self.records.lock().unwrap().insert(s.clone(), out.clone());
        }
        Ok(out)
    }

    fn traces(&self, kind: TableKind, s: &Selection, limit: Option<usize>) -> Result<Arc<Vec<Loaded>>> {
        if let Some(hit) = self.traces.lock().unwrap().get(s) {
            return Ok(hit.clone());
        }
        let snapshot = self.snapshot.lock().unwrap();
        let mut out = Vec::new();
        let mut rows = 0usize;
        // Adds one decoded episode; says whether more rows are wanted (LIMIT).
        let mut take = |out: &mut Vec<Loaded>, loaded: Loaded| {
            rows += kind.rows_in(&loaded);
            out.push(loaded);
            limit.is_none_or(|n| rows < n)
        };
        if s.is_all() {
            snapshot.for_each_traces(|id, episode| Ok(take(&mut out, Loaded { id: hex(&id), episode })))?;
        } else {
            for id in Self::ids(&snapshot, s)? {
                if let Some(episode) = snapshot.episode_traces(&id)? {
                    if !take(&mut out, Loaded { id: hex(&id), episode }) {
                        break;
                    }
                }
            }
        }
        self.decoded.fetch_add(out.len() as u64, Ordering::Relaxed);
        let out = Arc::new(out);
        if limit.is_none() {
            self.traces.lock().unwrap().insert(s.clone(), out.clone());
        }
        Ok(out)
    }

    /// The rows of `kind` for a selection, at most `limit` when given.
    pub(crate) fn batch(&self, kind: TableKind, s: &Selection, limit: Option<usize>) -> Result<RecordBatch> {
        let batch = if kind.needs_traces() {
            kind.build_traces(&self.traces(kind, s, limit)?)?
        } else {
            kind.build_records(&self.records(s, limit)?)?
        };
        Ok(match limit {
            Some(n) if batch.num_rows() > n => batch.slice(0, n),
            _ => batch,
        })
    }
}

#[derive(Debug)]
pub struct StoreTable {
    kind: TableKind,
    schema: SchemaRef,
    data: Arc<StoreData>,
}

impl StoreTable {
    pub fn new(kind: TableKind, data: Arc<StoreData>) -> StoreTable {
        StoreTable { kind, schema: kind.schema(), data }
    }
}

fn df(e: Error) -> datafusion::error::DataFusionError {
    match e {
        Error::DataFusion(e) => e,
        other => datafusion::error::DataFusionError::External(Box::new(other)),
    }
}

#[async_trait]
impl TableProvider for StoreTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Cell-key equalities narrow what is read; DataFusion still applies them
        // (Inexact), which keeps results right whatever the scan returns.
        Ok(filters
            .iter()
            .map(|f| match Selection::cell_equality(f) {
                Some(_) => TableProviderFilterPushDown::Inexact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let selection = Selection::from_filters(filters);
        let batch = self.data.batch(self.kind, &selection, limit).map_err(df)?;
        let exec = MemorySourceConfig::try_new_exec(&[vec![batch]], self.schema.clone(), projection.cloned())?;
        Ok(exec)
    }
}
