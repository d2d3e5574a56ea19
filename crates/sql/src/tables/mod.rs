//! The store's tables as Arrow: what each holds and how it is built.

pub(crate) mod columns;
mod episodes;
mod traces;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use epistore_store::EpisodeRecord;

use crate::error::Result;
pub(crate) use traces::Loaded;

/// Every base table, in the order `docs/sql-schema.md` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TableKind {
    Episodes,
    Actions,
    Tools,
    Context,
    Checks,
    Attributions,
    Interventions,
    Entropy,
    Requirements,
    FaultLocations,
    Messages,
}

impl TableKind {
    pub const ALL: [TableKind; 11] = [
        TableKind::Episodes,
        TableKind::Actions,
        TableKind::Tools,
        TableKind::Context,
        TableKind::Checks,
        TableKind::Attributions,
        TableKind::Interventions,
        TableKind::Entropy,
        TableKind::Requirements,
        TableKind::FaultLocations,
        TableKind::Messages,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TableKind::Episodes => "episodes",
            TableKind::Actions => "actions",
            TableKind::Tools => "tools",
            TableKind::Context => "context",
            TableKind::Checks => "checks",
            TableKind::Attributions => "attributions",
            TableKind::Interventions => "interventions",
            TableKind::Entropy => "entropy",
            TableKind::Requirements => "requirements",
            TableKind::FaultLocations => "fault_locations",
            TableKind::Messages => "messages",
        }
    }

    /// The episodes table reads episode records only; the others decode traces.
    pub fn needs_traces(self) -> bool {
        self != TableKind::Episodes
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            TableKind::Episodes => episodes::batch(&[]),
            _ => self.build_traces(&[]),
        }
        .expect("an empty table always builds")
        .schema()
    }

    pub(crate) fn build_records(self, rows: &[EpisodeRecord]) -> Result<RecordBatch> {
        debug_assert_eq!(self, TableKind::Episodes);
        episodes::batch(rows)
    }

    pub(crate) fn build_traces(self, loaded: &[Loaded]) -> Result<RecordBatch> {
        match self {
            TableKind::Episodes => unreachable!("episodes are built from records"),
            TableKind::Actions => traces::actions(loaded),
            TableKind::Tools => traces::tools(loaded),
            TableKind::Context => traces::context(loaded),
            TableKind::Checks => traces::checks(loaded),
            TableKind::Attributions => traces::attributions(loaded),
            TableKind::Interventions => traces::interventions(loaded),
            TableKind::Entropy => traces::entropy(loaded),
            TableKind::Requirements => traces::requirements(loaded),
            TableKind::FaultLocations => traces::fault_locations(loaded),
            TableKind::Messages => traces::messages(loaded),
        }
    }

    /// Rows this table gets from one episode (to stop early under a LIMIT).
    pub(crate) fn rows_in(self, loaded: &Loaded) -> usize {
        use epistore_package::TraceKind as T;
        let e = &loaded.episode;
        match self {
            TableKind::Episodes => 1,
            TableKind::Actions => e.trace_len(T::Actions).unwrap_or(0),
            TableKind::Tools => e.trace_len(T::Tools).unwrap_or(0),
            TableKind::Context => e.trace_len(T::Context).unwrap_or(0),
            TableKind::Checks => e.trace_len(T::Verification).unwrap_or(0),
            TableKind::Attributions => e.trace_len(T::Attribution).unwrap_or(0),
            TableKind::Interventions => e.trace_len(T::Interventions).unwrap_or(0),
            TableKind::Entropy => e.trace_len(T::Entropy).unwrap_or(0),
            TableKind::Requirements => e.manifest.requirements.len(),
            TableKind::FaultLocations => e.outcome.fault_locations.as_ref().map_or(0, Vec::len),
            TableKind::Messages => e.trace_len(T::Messages).unwrap_or(0),
        }
    }
}
