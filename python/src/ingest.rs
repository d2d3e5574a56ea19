//! `Database.ingest` and `Database.import_logs`: the command line's own ingest and
//! import (`epistore_cli`), returning the summary `--format json` prints instead of
//! printing it.

use std::path::PathBuf;

use epistore_package::{discover, read_source_within};
use epistore_store::{IngestOptions, Store};

use crate::Result;

/// `epistore ingest PATHS --format json`, as JSON text.
pub fn ingest(store: &Store, paths: &[PathBuf], chunk: usize) -> Result<String> {
    let sources = discover(paths)?;
    let label = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let options = IngestOptions { label, chunk_sources: chunk, ..IngestOptions::default() };
    let summary = epistore_cli::ingest_with_segments(
        store,
        &sources,
        |s, r| read_source_within(s, &options.limits, r),
        &options,
        |_| {},
    )?;
    Ok(serde_json::to_string(&summary)?)
}

/// `epistore import ... --summary-format json`, as JSON text. `store` may be None only
/// with `args.out` (package directories need no store).
pub fn import(store: Option<&Store>, args: &epistore_cli::ImportArgs) -> Result<String> {
    Ok(serde_json::to_string(&epistore_cli::import_summary(store, args)?)?)
}
