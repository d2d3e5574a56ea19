//! `Database.ingest`: packages into the store, with the columnar segments SQL reads
//! built on the way; the summary `epistore ingest --format json` prints.
//!
//! The same steps as `ingest_units` in crates/cli/commands.rs (which prints rather than
//! returns, so it cannot be called from here).

use std::path::PathBuf;
use std::time::Instant;

use epistore_package::{discover, read_source};
use epistore_store::{IngestOptions, PackageOutcome, Store};
use serde_json::{json, Value};

use crate::Result;

pub fn ingest(store: &Store, paths: &[PathBuf], chunk: usize) -> Result<String> {
    let started = Instant::now();
    let sources = discover(paths)?;
    let label = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let options = IngestOptions { label, chunk_sources: chunk, ..IngestOptions::default() };
    let mut warnings = Vec::new();
    let mut segments = Some(epistore_sql::columnar::IngestSegments::new(store));
    let mut segment_error = None;
    let mut columnar_time = std::time::Duration::ZERO;
    let report = store.ingest_from(
        &sources,
        |s| read_source(s, &options.limits),
        &options,
        |_| {},
        |seq, episodes| {
            let started = Instant::now();
            if let Some(builder) = segments.as_mut() {
                if let Err(e) = builder.push(seq, episodes) {
                    segment_error = Some(e.to_string());
                    segments = None;
                }
            }
            columnar_time += started.elapsed();
            Ok(())
        },
    )?;
    let columnar_started = Instant::now();
    finish_segments(store, segments, report.added() > 0, segment_error, &mut warnings);
    let columnar_seconds = (columnar_time + columnar_started.elapsed()).as_secs_f64();
    let seconds = started.elapsed().as_secs_f64();
    let packages: Vec<Value> = report
        .packages
        .iter()
        .map(|p| {
            let (status, reason) = match &p.outcome {
                PackageOutcome::Added => ("added", None),
                PackageOutcome::AlreadyPresent => ("already_present", None),
                PackageOutcome::Rejected(r) => ("rejected", Some(r.clone())),
            };
            json!({"package": p.name, "episode_id": p.episode_id, "status": status, "reason": reason})
        })
        .collect();
    let summary = json!({
        "added": report.added(), "already_present": report.already_present(), "rejected": report.rejected(),
        "bytes_read": report.bytes_read, "blobs_added": report.blobs_added, "batches": report.batches,
        "seconds": seconds, "columnar_seconds": columnar_seconds, "packages": packages,
        "warnings": warnings,
    });
    Ok(serde_json::to_string(&summary)?)
}

/// Finishes the segments built during an ingest and builds whatever they miss; a
/// failure is a warning (segments are derived data: queries build what is missing).
pub fn finish_segments(
    store: &Store,
    segments: Option<epistore_sql::columnar::IngestSegments>,
    added: bool,
    mut error: Option<String>,
    warnings: &mut Vec<String>,
) {
    if let Some(builder) = segments {
        if let Err(e) = builder.finish() {
            error = Some(e.to_string());
        }
    }
    if added && error.is_none() {
        if let Err(e) = epistore_sql::columnar::refresh(store, &|_, _| {}) {
            error = Some(e.to_string());
        }
    }
    if let Some(e) = error {
        warnings.push(format!("columnar segments not built ({e}); queries will build them"));
    }
}
