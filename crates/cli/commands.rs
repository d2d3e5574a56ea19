//! One function per subcommand. Each returns the process exit code: 0 success,
//! 1 when the command ran but found something wrong (a rejected package, a damaged
//! store); errors (exit 2) come back as `Err`.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use epistore_package::{discover, hex, read_source_within, RawPackage, Reservation, Source};
use epistore_sql::{format_batches, Engine, Format};
use epistore_store::{IngestOptions, PackageOutcome, PackageRead, Store};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::{
    Better, BoardFormat, BootstrapArgs, EntriesArgs, ErrorsArg, ExportArgs, ExportFormatArg, IngestArgs,
    LeaderboardArgs, McpArgs, MetricsArgs, OutputFormat, SearchArgs, ServeArgs, ShowArgs, SqlArgs,
};

/// An error and its causes on one line, skipping causes whose text an earlier part
/// already says (DataFusion errors repeat their sources in their own message).
pub fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

fn sql_format(f: OutputFormat) -> Format {
    match f {
        OutputFormat::Table => Format::Table,
        OutputFormat::Csv => Format::Csv,
        OutputFormat::Json => Format::Json,
    }
}

/// Prints rows of scalars in the chosen format (for commands that are not SQL).
pub(crate) fn print_rows(headers: &[&str], rows: &[Vec<Value>], format: OutputFormat) {
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match format {
        OutputFormat::Table => {
            let mut table = Table::new();
            table.load_preset(UTF8_FULL_CONDENSED).set_header(headers.to_vec());
            for row in rows {
                // A missing value reads NULL in a table, as in `epistore sql`; fractions are
                // cut to 4 decimals for the eye (csv and json keep every digit).
                let cell = |v: &Value| match v {
                    Value::Null => "NULL".to_string(),
                    Value::Number(n) if n.is_f64() => {
                        format!("{:.4}", n.as_f64().unwrap_or_default())
                    }
                    other => text(other),
                };
                table.add_row(row.iter().map(cell).collect::<Vec<_>>());
            }
            println!("{}", epistore_sql::printable(&table.to_string()));
        }
        OutputFormat::Csv => {
            println!("{}", headers.join(","));
            for row in rows {
                let cells: Vec<String> = row
                    .iter()
                    .map(|v| {
                        let t = text(v);
                        if t.contains([',', '"', '\n']) {
                            format!("\"{}\"", t.replace('"', "\"\""))
                        } else {
                            t
                        }
                    })
                    .collect();
                println!("{}", cells.join(","));
            }
        }
        OutputFormat::Json => {
            let objects: Vec<Value> = rows
                .iter()
                .map(|row| Value::Object(headers.iter().map(|h| h.to_string()).zip(row.iter().cloned()).collect()))
                .collect();
            println!("{}", serde_json::to_string_pretty(&objects).expect("json"));
        }
    }
}

pub(crate) fn open_read(store: &Path) -> Result<Store> {
    Store::open_read_only(store).with_context(|| format!("opening the store at {}", store.display()))
}

/// The store opened read-only and a runtime to run on: what every command that runs
/// async code over the store starts with (the servers take the store itself).
pub(crate) fn open_read_with_runtime(store_dir: &Path) -> Result<(Store, tokio::runtime::Runtime)> {
    let store = open_read(store_dir)?;
    let runtime = epistore_sql::statement::runtime()?;
    Ok((store, runtime))
}

/// A read-only SQL session for one command (`sql`, `metrics`, `export`, `leaderboard`,
/// `compare`): an engine over one snapshot of the store, with the runtime its queries
/// run on. A struct rather than a helper taking an async closure, because the shell
/// (`repl`) runs many statements between blocking reads of the terminal.
pub(crate) struct Session {
    // Declared in drop order: the engine before the runtime it ran on, the store last,
    // as when these were locals.
    pub engine: Engine,
    pub runtime: tokio::runtime::Runtime,
    pub store: Store,
}

impl Session {
    /// Opens the store read-only and an engine over it (its columnar segments built
    /// first where missing, as `Engine::open` does).
    pub fn open(store_dir: &Path) -> Result<Session> {
        let (store, runtime) = open_read_with_runtime(store_dir)?;
        let engine = runtime.block_on(Engine::open(&store))?;
        Ok(Session { engine, runtime, store })
    }

    /// Runs `future` to its end on the session's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// A progress bar on standard error, hidden when quiet or not on a terminal.
pub(crate) fn progress_bar(quiet: bool, length: u64, unit: &str) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(length);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}"
        ))
        .expect("template")
        .progress_chars("=> "),
    );
    bar
}

pub fn ingest(store_dir: &Path, args: &IngestArgs) -> Result<ExitCode> {
    let sources = discover(&args.paths)?;
    if sources.is_empty() {
        // Nothing to ingest: say what was given instead, and create no store.
        let shown = crate::import::shown_paths(&args.paths);
        let found = epistore_import::plan(&args.paths, &epistore_import::Options::default());
        let mut formats: Vec<&str> = found.units.iter().map(|u| u.format.name()).collect();
        formats.sort_unstable();
        formats.dedup();
        if !found.units.is_empty() {
            anyhow::bail!(
                "{shown} holds agent logs ({}: {} runs), not episode packages: import them with `epistore import {shown}`",
                formats.join(", "),
                found.units.len()
            );
        }
        anyhow::bail!(
            "no episode package under {shown}: ingest reads package folders (holding manifest.json) and \
             .tar, .tar.gz and .tar.zst archives of them"
        );
    }
    let label = args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let memory_budget = args.memory_budget_mib << 20;
    let options = IngestOptions { label, chunk_sources: args.chunk, memory_budget, ..IngestOptions::default() };
    let read = |s: &Source, r: &mut Reservation| read_source_within(s, &options.limits, r);
    ingest_units(store_dir, &sources, "sources", read, &options, args.format, args.quiet)
}

/// Ingests packages read from `units` (package sources, or generated packages), building
/// their columnar segments on the way, and prints the summary.
fn ingest_units<U: Sync>(
    store_dir: &Path,
    units: &[U],
    unit_name: &str,
    read: impl Fn(&U, &mut Reservation) -> Vec<PackageRead> + Sync + Send,
    options: &IngestOptions,
    format: OutputFormat,
    quiet: bool,
) -> Result<ExitCode> {
    let store = Store::open_or_create(store_dir)?;
    let bar = progress_bar(quiet, units.len() as u64, unit_name);
    let summary = ingest_with_segments(&store, units, read, options, |p| {
        bar.set_position(p.sources_done as u64);
        bar.set_message(format!("{} packages, {:.1} MB", p.packages_done, p.bytes_read as f64 / 1e6));
    })?;
    bar.finish_and_clear();
    for warning in summary["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", warning.as_str().unwrap_or_default());
    }
    let count = |k: &str| summary[k].as_u64().unwrap_or(0);
    match format {
        OutputFormat::Json => {
            let mut shown = summary.clone();
            shown.as_object_mut().expect("an object").remove("warnings");
            println!("{}", serde_json::to_string_pretty(&shown)?);
        }
        _ => {
            let packages = summary["packages"].as_array().map_or(0, Vec::len);
            for p in summary["packages"].as_array().into_iter().flatten().filter(|p| p["status"] == "rejected") {
                eprintln!("rejected: {}", p["reason"].as_str().unwrap_or_default());
            }
            let seconds = summary["seconds"].as_f64().unwrap_or_default();
            let mb = count("bytes_read") as f64 / 1e6;
            println!(
                "{} added, {} already present, {} rejected ({packages} packages, {mb:.1} MB in {seconds:.2} s: {:.0} packages/s, {:.1} MB/s)",
                count("added"),
                count("already_present"),
                count("rejected"),
                packages as f64 / seconds.max(1e-9),
                mb / seconds.max(1e-9),
            );
            if count("added") > 0 {
                let columnar = summary["columnar_seconds"].as_f64().unwrap_or_default();
                println!("(of which {columnar:.2} s building the columnar segments for SQL)");
            }
            if count("added") == 0 && count("rejected") == 0 && packages > 0 {
                println!("nothing new: the store is unchanged");
            }
        }
    }
    Ok(if count("rejected") == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The one ingest of the command line and the Python package: packages read from
/// `units` go into `store`, their columnar segments built from each commit's episodes
/// as they come (so nothing is decoded twice). Returns the summary `ingest --format
/// json` prints, plus `warnings` (segments are derived data: if building them fails,
/// the ingest goes on and queries build what is missing).
pub fn ingest_with_segments<U: Sync>(
    store: &Store,
    units: &[U],
    read: impl Fn(&U, &mut Reservation) -> Vec<PackageRead> + Sync + Send,
    options: &IngestOptions,
    progress: impl FnMut(epistore_store::IngestProgress),
) -> Result<Value> {
    let started = Instant::now();
    let epistore_sql::columnar::SegmentedIngest { report, columnar_seconds, segment_error } =
        epistore_sql::columnar::ingest(store, units, read, options, progress)?;
    let warnings: Vec<String> = segment_error
        .map(|e| format!("columnar segments not built ({e}); queries will build them"))
        .into_iter()
        .collect();
    // Wall time of the whole ingest, segments included.
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
    Ok(json!({
        "added": report.added(), "already_present": report.already_present(), "rejected": report.rejected(),
        "bytes_read": report.bytes_read, "blobs_added": report.blobs_added, "batches": report.batches,
        "seconds": seconds, "columnar_seconds": columnar_seconds, "packages": packages, "warnings": warnings,
    }))
}

/// Prints one result. An empty one in table format is its header and "(0 rows)", never
/// an empty frame (`++`); in CSV its header line, in JSON `[]`.
/// Prints a result one field per line (`sql --expanded`, `\\x` in the shell).
pub(crate) fn print_expanded(batches: &[datafusion::arrow::record_batch::RecordBatch]) -> Result<()> {
    print!("{}", epistore_sql::format_expanded(batches)?);
    Ok(())
}

pub(crate) fn print_result(
    batches: &[datafusion::arrow::record_batch::RecordBatch],
    format: OutputFormat,
) -> Result<()> {
    let text = format_batches(batches, sql_format(format))?;
    println!("{}", text.trim_end());
    if matches!(format, OutputFormat::Table) && batches.iter().all(|b| b.num_rows() == 0) {
        println!("(0 rows)");
    }
    Ok(())
}

pub fn sql(store_dir: &Path, args: &SqlArgs) -> Result<ExitCode> {
    let session = Session::open(store_dir)?;
    let script = match (&args.query, &args.file) {
        (Some(q), _) => q.clone(),
        (None, Some(path)) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        (None, None) if std::io::stdin().is_terminal() => return crate::shell::repl(&session, args.format),
        (None, None) => std::io::read_to_string(std::io::stdin()).context("reading SQL from standard input")?,
    };
    // `epistore sql '\d episodes'`: the shell's commands work one-shot too.
    if let Some(meta) = crate::shell::Meta::parse(&script) {
        let mut expanded = args.expanded;
        crate::shell::run_meta(&session, &meta, args.format, &mut expanded)?;
        return Ok(ExitCode::SUCCESS);
    }
    for statement in Engine::split_statements(&script)? {
        let batches = session.block_on(session.engine.query(&statement))?;
        if args.expanded && args.format == OutputFormat::Table {
            print_expanded(&batches)?;
        } else {
            print_result(&batches, args.format)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn search(store_dir: &Path, args: &SearchArgs) -> Result<ExitCode> {
    let session = Session::open(store_dir)?;
    let hits = session.block_on(session.engine.search(&args.query, args.limit, args.filter.as_deref()))?;
    if hits.num_rows() == 0 && matches!(args.format, OutputFormat::Table) {
        eprintln!("no hits");
        return Ok(ExitCode::SUCCESS);
    }
    print_result(&[hits], args.format)?;
    Ok(ExitCode::SUCCESS)
}

pub fn metrics(store_dir: &Path, args: &MetricsArgs) -> Result<ExitCode> {
    let keys = split_keys(&args.by);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let filter = args.filter.as_deref();
    let ladder = || if args.all { Engine::metrics_sql(&keys, filter) } else { Engine::headline_sql(&keys, filter) };
    if args.show_sql {
        let sql = match args.preset {
            Some(crate::Preset::Runs) => Engine::runs_sql(&keys, filter)?,
            _ => ladder()?,
        };
        println!("{sql}");
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open(store_dir)?;
    let preset = match args.preset {
        Some(preset) => preset,
        None if session.block_on(session.engine.all_imported())? => {
            eprintln!("metrics: the runs preset (every episode was imported from logs; --preset ladder for the harness-ladder metrics)");
            crate::Preset::Runs
        }
        None => crate::Preset::Ladder,
    };
    if preset == crate::Preset::Runs && args.all {
        anyhow::bail!("--all lists every ladder metric: give it with --preset ladder");
    }
    let sql = match preset {
        crate::Preset::Runs => Engine::runs_sql(&keys, filter)?,
        crate::Preset::Ladder => ladder()?,
    };
    let batches = session.block_on(session.engine.query(&sql))?;
    if args.expanded && args.format == OutputFormat::Table {
        print_expanded(&batches)?;
    } else {
        print_result(&batches, args.format)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn ls(store_dir: &Path, format: OutputFormat) -> Result<ExitCode> {
    let store = open_read(store_dir)?;
    let cells = store.snapshot()?.cells()?;
    let rows: Vec<Vec<Value>> =
        cells.iter().map(|c| vec![json!(c.model), json!(c.harness_level), json!(c.task), json!(c.episodes)]).collect();
    print_rows(&["model", "harness_level", "task", "episodes"], &rows, format);
    Ok(ExitCode::SUCCESS)
}

/// `show EPISODE` in a format other than html (that is `publish::show_html`).
pub fn show(store_dir: &Path, args: &ShowArgs) -> Result<ExitCode> {
    let format = args.format.as_output();
    let store = open_read(store_dir)?;
    let snapshot = store.snapshot()?;
    let id = snapshot.resolve(&args.episode)?;
    let r = snapshot.episode(&id)?.context("episode vanished")?;
    let counts: Vec<Value> = epistore_package::TRACE_FILES
        .iter()
        .zip(r.trace_counts)
        .map(|((file, _), n)| json!({"trace": file, "records": n}))
        .collect();
    let value = json!({
        "episode_id": hex(&r.id),
        "episode": r.manifest.episode,
        "model": r.manifest.model,
        "harness_level": r.manifest.harness_level,
        "task": r.manifest.task,
        "cluster": r.manifest.cluster,
        "seed": r.manifest.seed,
        "attempt": r.manifest.attempt,
        "label": r.outcome.label,
        "agent_reported_complete": r.outcome.agent_reported_complete,
        "posture": r.derived.posture,
        "recorded_posture": r.outcome.recorded_posture,
        "admission": r.outcome.admission,
        "correct": r.outcome.correct,
        "final_revision": r.derived.final_revision,
        "stop_reason": r.outcome.stop_reason,
        "task_prompt": r.manifest.task_prompt,
        "final_message": r.outcome.final_message,
        "ingest_seq": r.ingest_seq,
        "source": r.source,
        "provenance": r.manifest.provenance(),
        "traces": counts,
        "files": r.files.iter().map(|f| json!({"path": f.path, "bytes": f.size, "blake3": hex(&f.hash)})).collect::<Vec<_>>(),
        "annotations": crate::annotate::of_episode(&snapshot, &id)?,
    });
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&value)?),
        _ => {
            let Value::Object(map) = &value else { unreachable!() };
            let rows: Vec<Vec<Value>> = map
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "files" | "traces" | "provenance" | "annotations"))
                .map(|(k, v)| vec![json!(k), v.clone()])
                .collect();
            print_rows(&["field", "value"], &rows, format);
            if let Some(provenance) = r.manifest.provenance() {
                print_rows(&["provenance", "value"], &provenance_rows(&provenance), format);
            }
            let traces: Vec<Vec<Value>> = epistore_package::TRACE_FILES
                .iter()
                .zip(r.trace_counts)
                .map(|((file, _), n)| vec![json!(file), n.map_or(json!("not recorded"), |n| json!(n))])
                .collect();
            print_rows(&["trace", "records"], &traces, format);
            // Tool outputs (one file per call, revision 1.2) are one row here; `--format
            // json` lists each, and SQL reads them (`tools.output_text`).
            let (outputs, others): (Vec<_>, Vec<_>) =
                r.files.iter().partition(|f| f.path.starts_with("artifacts/tool-output/"));
            let mut files: Vec<Vec<Value>> =
                others.iter().map(|f| vec![json!(f.path), json!(f.size), json!(hex(&f.hash))]).collect();
            if !outputs.is_empty() {
                let bytes: u64 = outputs.iter().map(|f| f.size).sum();
                files.push(vec![
                    json!(format!("artifacts/tool-output/ ({} files)", outputs.len())),
                    json!(bytes),
                    json!(""),
                ]);
            }
            print_rows(&["file", "bytes", "blake3"], &files, format);
            if let Value::Array(list) = &value["annotations"] {
                let rows: Vec<Vec<Value>> = list
                    .iter()
                    .map(|a| {
                        let state = if a["retracted_by"].is_null() { "active" } else { "retracted" };
                        vec![
                            a["label"].clone(),
                            json!(state),
                            a["author"].clone(),
                            a["created"].clone(),
                            a["id"].clone(),
                        ]
                    })
                    .collect();
                if !rows.is_empty() {
                    print_rows(&["annotation", "state", "author", "created", "id"], &rows, format);
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The provenance of an imported episode (docs/format.md §8), one row per field:
/// the source format and version, each source file (name, part, blake3), the opaque
/// calls and every note, so a reader sees what the import could not tell.
fn provenance_rows(provenance: &serde_json::Map<String, Value>) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    for key in ["source_format", "source_version", "importer", "opaque_calls", "supersedes"] {
        if let Some(v) = provenance.get(key) {
            rows.push(vec![json!(key), v.clone()]);
        }
    }
    for f in provenance.get("source_files").and_then(Value::as_array).into_iter().flatten() {
        let part = f
            .get("part")
            .map(|p| format!(" (part {})", p.as_str().map_or(p.to_string(), str::to_string)))
            .unwrap_or_default();
        let text = format!(
            "{}{part} blake3 {}",
            f.get("name").and_then(Value::as_str).unwrap_or("?"),
            f.get("blake3").and_then(Value::as_str).unwrap_or("?")
        );
        rows.push(vec![json!("source_file"), json!(text)]);
    }
    for note in provenance.get("notes").and_then(Value::as_array).into_iter().flatten() {
        rows.push(vec![json!("note"), note.clone()]);
    }
    rows
}

pub fn export_package(store_dir: &Path, episode: &str, dir: &Path) -> Result<ExitCode> {
    let store = open_read(store_dir)?;
    let snapshot = store.snapshot()?;
    let id = snapshot.resolve(episode)?;
    let record = snapshot.export_package(&id, dir)?;
    println!(
        "wrote {} files ({} bytes) of episode {} to {}",
        record.files.len(),
        record.package_bytes(),
        hex(&id),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn verify(store_dir: &Path, format: OutputFormat, repair: bool) -> Result<ExitCode> {
    match verify_store(store_dir, format, repair) {
        // Damage found on the way (a page redb cannot read, a value that fails its
        // checksum where verify cannot go on) is still a verdict: damaged, exit 1.
        Err(e) => match e.downcast_ref::<epistore_store::Error>() {
            Some(damage @ (epistore_store::Error::Damaged(_) | epistore_store::Error::Corrupt(_))) => {
                let problem = damage.to_string();
                match format {
                    OutputFormat::Json => println!("{}", json!({"intact": false, "problems": [problem]})),
                    _ => println!("DAMAGED: the store cannot be verified\nproblem: {problem}"),
                }
                Ok(ExitCode::from(1))
            }
            _ => Err(e),
        },
        verdict => verdict,
    }
}

fn verify_store(store_dir: &Path, format: OutputFormat, repair: bool) -> Result<ExitCode> {
    let (report, repaired, segments, segment_problems) = if repair {
        if !store_dir.join(epistore_store::DB_FILE).is_file() {
            return Err(epistore_store::Error::NoStore(store_dir.to_path_buf()).into());
        }
        // A plain writable open: redb's own page check (`set_check_integrity_on_open`)
        // refuses any file with a damaged page and cannot mend one, where rewriting the
        // derived values puts them on fresh pages.
        let store = Store::open_or_create(store_dir)?;
        let repaired = store.repair()?;
        let snapshot = store.snapshot()?;
        let (segments, mut segment_problems) = epistore_sql::columnar::verify_segments(&store, &snapshot, true)?;
        drop(snapshot);
        if !segment_problems.is_empty() {
            // Removed above; built again from the (repaired) store now.
            epistore_sql::columnar::refresh(&store, &|_, _| {})?;
            let snapshot = store.snapshot()?;
            segment_problems = epistore_sql::columnar::verify_segments(&store, &snapshot, false)?.1;
        }
        (store.snapshot()?.verify()?, Some(repaired), segments, segment_problems)
    } else {
        let store = match Store::open_read_only(store_dir) {
            Ok(store) => store,
            // Damage that stops the file from opening is still a verdict: damaged.
            Err(e @ epistore_store::Error::Damaged(_)) => {
                let problem = e.to_string();
                match format {
                    OutputFormat::Json => println!("{}", json!({"intact": false, "problems": [problem]})),
                    _ => println!("DAMAGED: the store cannot be opened\nproblem: {problem}"),
                }
                return Ok(ExitCode::from(1));
            }
            Err(e) => return Err(e).with_context(|| format!("opening the store at {}", store_dir.display())),
        };
        let snapshot = store.snapshot()?;
        let (segments, segment_problems) = epistore_sql::columnar::verify_segments(&store, &snapshot, false)?;
        (snapshot.verify()?, None, segments, segment_problems)
    };
    let problems: Vec<&String> = report.problems.iter().chain(&segment_problems).collect();
    let intact = problems.is_empty();
    let repaired_ids: Vec<String> = repaired.iter().flat_map(|r| r.repaired.iter().map(hex)).collect();
    let restored: Vec<u32> = repaired.iter().flat_map(|r| r.dictionaries_restored.iter().copied()).collect();
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "intact": intact, "episodes": report.episodes, "rederived": report.rederived, "blobs": report.blobs,
                "blob_bytes": report.blob_bytes, "cells": report.cells, "batches": report.batches,
                "segments": segments, "annotations": report.annotations, "problems": problems,
                "repairable": report.repairable.iter().map(hex).collect::<Vec<_>>(),
                "repaired": repaired_ids,
                "dictionaries_to_restore": report.dictionaries_to_restore,
                "dictionaries_restored": restored,
            }))?
        ),
        _ => {
            println!(
                "{}: {} episodes ({} derived again from their files), {} blobs ({} bytes), {} cell index entries, \
                 {} ingest batches, {} columnar segments",
                if intact { "intact" } else { "DAMAGED" },
                report.episodes,
                report.rederived,
                report.blobs,
                report.blob_bytes,
                report.cells,
                report.batches,
                segments
            );
            if report.annotations > 0 {
                println!("{} annotations checked", report.annotations);
            }
            for number in &restored {
                println!("repaired: compression dictionary {number} (written again from its intact copy)");
            }
            for id in &repaired_ids {
                println!("repaired: episode {id} (record, traces, checksums and cell entry derived again)");
            }
            for p in &problems {
                println!("problem: {p}");
            }
            if !intact && !repair && !report.repairable.is_empty() {
                println!(
                    "{} episodes have intact files and damaged derived data: `epistore verify --repair` rebuilds it",
                    report.repairable.len()
                );
            }
        }
    }
    Ok(if intact { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub fn synth(config: &epistore_synth::Config, out: &Path, quiet: bool) -> Result<ExitCode> {
    let started = Instant::now();
    let bar = progress_bar(quiet, config.episodes as u64, "episodes");
    let summary = epistore_synth::generate(config, out, |done| bar.set_position(done as u64))?;
    bar.finish_and_clear();
    println!(
        "wrote {} episodes ({} files, {:.1} MB) to {} in {:.2} s",
        summary.episodes,
        summary.files,
        summary.bytes as f64 / 1e6,
        out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// `synth --ingest`: the population goes straight into the store, each package built
/// in memory on the ingest threads, as if read from the files `synth --out` writes.
pub fn synth_ingest(
    config: &epistore_synth::Config,
    store_dir: &Path,
    format: OutputFormat,
    quiet: bool,
) -> Result<ExitCode> {
    let generator = epistore_synth::Generator::new(config)?;
    let label = format!(
        "synth --episodes {} --first {} --seed {} --models {} --tasks {} --output-scale {}",
        config.episodes, config.first, config.seed, config.models, config.tasks, config.output_scale
    );
    let options = IngestOptions { label, ..IngestOptions::default() };
    let indices: Vec<usize> = (0..generator.len()).collect();
    ingest_units(
        store_dir,
        &indices,
        "episodes",
        |&i, _| {
            let (dir, files) = generator.package(i);
            vec![Ok(RawPackage::new(format!("synth/{dir}"), files.into_iter().collect()))]
        },
        &options,
        format,
        quiet,
    )
}

pub fn compact(store_dir: &Path) -> Result<ExitCode> {
    if !store_dir.join(epistore_store::DB_FILE).is_file() {
        anyhow::bail!("no store at {}", store_dir.display());
    }
    let file = store_dir.join(epistore_store::DB_FILE);
    let before = std::fs::metadata(&file)?.len();
    let mut store = Store::open_or_create(store_dir)?;
    store.compact()?;
    drop(store);
    let after = std::fs::metadata(&file)?.len();
    println!("{:.1} MB -> {:.1} MB", before as f64 / 1e6, after as f64 / 1e6);
    for dir in epistore_sql::columnar::remove_other_builds(store_dir)? {
        println!("removed columnar segments of another build: {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn migrate(store_dir: &Path, format: OutputFormat, quiet: bool) -> Result<ExitCode> {
    let bar = progress_bar(quiet, 0, "episodes");
    let report = Store::migrate(store_dir, |p| {
        bar.set_length(p.episodes_total);
        bar.set_position(p.episodes_done);
    })?;
    bar.finish_and_clear();
    let mb = |b: u64| b as f64 / 1e6;
    match format {
        OutputFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "from": report.from, "to": epistore_store::STORE_FORMAT, "migrated": report.kept.is_some(),
                "episodes": report.episodes, "blobs": report.blobs, "batches": report.batches,
                "kept": report.kept, "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
            }))?
        ),
        _ => match &report.kept {
            None => println!("already {}: nothing to do", report.from),
            Some(kept) => {
                println!(
                    "{} -> {}: {} episodes, {} blobs, {} ingest batches ({:.1} MB -> {:.1} MB)",
                    report.from,
                    epistore_store::STORE_FORMAT,
                    report.episodes,
                    report.blobs,
                    report.batches,
                    mb(report.bytes_before),
                    mb(report.bytes_after)
                );
                println!(
                    "the old file is kept as {}; delete it once `epistore verify` says the store is intact",
                    kept.display()
                );
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

fn split_keys(by: &str) -> Vec<String> {
    by.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_string).collect()
}

/// `metrics --ci`: one row per entry and metric with its bootstrap interval.
pub fn metric_intervals(store_dir: &Path, args: &MetricsArgs) -> Result<ExitCode> {
    let settings = args.bootstrap.settings();
    let keys = split_keys(&args.by);
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let filter = args.filter.as_deref();
    let metrics: Vec<&str> =
        if args.all { vec![] } else { epistore_sql::HEADLINE.iter().copied().filter(|m| *m != "episodes").collect() };
    if args.show_sql {
        // The sums the bootstrap resamples; the resampling itself is not SQL.
        println!("{}", Engine::intervals_sql(&metrics, &keys, filter)?);
        return Ok(ExitCode::SUCCESS);
    }
    let session = Session::open(store_dir)?;
    let intervals = session.block_on(session.engine.metric_intervals(&metrics, &keys, filter, &settings))?;
    let width = intervals.iter().map(|i| i.key.len()).max().unwrap_or(keys.len());
    let mut headers: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    // Families with keys of their own (verifier, verifier_i/_j) add columns.
    for i in keys.len()..width {
        headers.push(format!("key{}", i + 1));
    }
    headers.extend(
        ["metric", "value", "lo", "hi", "n", "clusters", "replicates_used", "replicates_dropped", "seed"]
            .map(String::from),
    );
    let rows: Vec<Vec<Value>> = intervals
        .iter()
        .map(|i| {
            let mut row: Vec<Value> = i.key.iter().map(|k| json!(k)).collect();
            row.resize(width, Value::Null);
            row.extend([
                json!(i.metric),
                json!(i.interval.estimate),
                json!(i.interval.lo),
                json!(i.interval.hi),
                if i.n.fract() == 0.0 { json!(i.n as i64) } else { json!(i.n) },
                json!(i.clusters),
                json!(i.interval.used),
                json!(i.interval.dropped),
                json!(settings.seed),
            ]);
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    print_rows(&headers, &rows, args.format);
    Ok(ExitCode::SUCCESS)
}

pub fn board_spec(
    entries: &EntriesArgs,
    bootstrap: &BootstrapArgs,
    alpha: f64,
    better: Option<Better>,
) -> epistore_leaderboard::Spec {
    use epistore_sql::intervals::Direction;
    epistore_leaderboard::Spec {
        metric: entries.metric.clone(),
        by: split_keys(&entries.by),
        filter: entries.filter.clone(),
        bootstrap: bootstrap.settings(),
        alpha,
        direction: better.map(|b| match b {
            Better::Higher => Direction::Higher,
            Better::Lower => Direction::Lower,
        }),
        errors: entries.errors.map(|e| match e {
            ErrorsArg::Fail => epistore_leaderboard::Errors::Fail,
            ErrorsArg::Exclude => epistore_leaderboard::Errors::Exclude,
        }),
        generated_by: format!("epistore {}", env!("CARGO_PKG_VERSION")),
    }
}

/// The spec of the board `leaderboard` ranks (with or without --with-episodes).
pub(crate) fn leaderboard_spec(args: &LeaderboardArgs) -> epistore_leaderboard::Spec {
    board_spec(&args.entries, &args.bootstrap, args.alpha, args.better)
}

/// `leaderboard` without --with-episodes (with it: `publish::publish_board`).
pub fn leaderboard(store_dir: &Path, args: &LeaderboardArgs) -> Result<ExitCode> {
    let spec = leaderboard_spec(args);
    let session = Session::open(store_dir)?;
    let mut board = session.block_on(epistore_leaderboard::build(&session.engine, &spec))?;
    if let Some(template) = &args.publish.episode_url {
        board.links =
            Some(epistore_leaderboard::BoardLinks::hosted_elsewhere(template, vec![None; board.entries.len()]));
    }
    let text = match args.format {
        BoardFormat::Md => epistore_leaderboard::to_markdown(&board)?,
        BoardFormat::Html => epistore_leaderboard::to_html(&board)?,
        BoardFormat::Json => epistore_leaderboard::to_json(&board)?,
        BoardFormat::Csv => epistore_leaderboard::to_csv(&board)?,
    };
    match args.out.as_deref() {
        Some(path) => {
            // Written beside and renamed: a reader never sees half a page.
            let tmp = path.with_extension("epistore-tmp");
            std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} ({} entries)", path.display(), board.entries.len());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(store_dir: &Path, spec: &epistore_leaderboard::Spec, format: OutputFormat) -> Result<ExitCode> {
    let session = Session::open(store_dir)?;
    let comparisons = session.block_on(epistore_leaderboard::compare_all(&session.engine, spec))?;
    let rows: Vec<Vec<Value>> = comparisons
        .iter()
        .map(|c| {
            vec![
                json!(c.a),
                json!(c.b),
                json!(c.clusters),
                json!(c.mean_difference),
                json!(c.lo),
                json!(c.hi),
                json!(c.p),
                json!(c.p_holm),
                json!(if c.exact { "exact" } else { "monte carlo" }),
                json!(c.mcnemar.as_ref().map(|m| m.p)),
            ]
        })
        .collect();
    print_rows(
        &["a", "b", "clusters", "mean_difference", "lo", "hi", "p", "p_holm", "p_method", "mcnemar_p"],
        &rows,
        format,
    );
    if format == OutputFormat::Table {
        eprintln!(
            "{}: per task cluster present in both, a - b; family of {} comparisons, Holm-adjusted; B = {}, seed {}; \
             mcnemar_p: McNemar's exact test (unadjusted) where every shared cluster has one binary outcome per side",
            spec.metric,
            comparisons.len(),
            spec.bootstrap.replicates,
            spec.bootstrap.seed
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn export(store_dir: &Path, args: &ExportArgs) -> Result<ExitCode> {
    use epistore_sql::export::ExportFormat;
    let (out, partition_by, quiet) = (args.out.as_path(), args.partition_by.as_deref(), args.quiet);
    let format = match args.format {
        ExportFormatArg::Arrow => ExportFormat::Arrow,
        ExportFormatArg::Parquet => ExportFormat::Parquet,
        ExportFormatArg::Csv => ExportFormat::Csv,
        ExportFormatArg::Jsonl => ExportFormat::Jsonl,
    };
    let started = Instant::now();
    let session = Session::open(store_dir)?;
    let written = session.block_on(async {
        let engine = &session.engine;
        if args.all {
            if format != ExportFormat::Parquet {
                anyhow::bail!("--all writes a Parquet dataset; drop --format or use --format parquet");
            }
            let keys = split_keys(partition_by.unwrap_or("model,harness_level"));
            let bar = progress_bar(quiet, epistore_sql::export::exportable().len() as u64, "tables");
            let written = engine
                .export_all(out, &keys, &|name| {
                    bar.set_message(name.to_string());
                    bar.inc(1);
                })
                .await?;
            bar.finish_and_clear();
            Ok(written)
        } else {
            let keys = split_keys(partition_by.unwrap_or(""));
            let (name, sql) = match (&args.table, &args.query) {
                (Some(t), _) => (t.clone(), format!("SELECT * FROM {}", epistore_sql::sql_text::quote_ident(t))),
                (None, Some(q)) => ("query".to_string(), q.clone()),
                _ => unreachable!("clap requires one of --table, --query, --all"),
            };
            Ok(vec![engine.export_query(&name, &sql, format, out, &keys).await?])
        }
    })?;
    let rows: u64 = written.iter().map(|w| w.rows).sum();
    let files: usize = written.iter().map(|w| w.files).sum();
    if !quiet {
        eprintln!(
            "wrote {} ({} {}, {rows} rows, {files} files) in {:.2} s",
            out.display(),
            written.len(),
            if written.len() == 1 { "table" } else { "tables" },
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn serve(store_dir: &Path, args: &ServeArgs) -> Result<ExitCode> {
    use std::io::Write;
    let settings = epistore_server::Settings {
        addr: args.addr,
        token: args.token.clone().filter(|t| !t.is_empty()),
        memory_limit: args.memory_limit_mib << 20,
        max_queries: args.max_queries,
        query_timeout: std::time::Duration::from_secs(args.query_timeout_secs),
    };
    // Refuse before touching the store: the refusal is about the command line.
    epistore_server::check_exposure(args.addr, settings.token.as_deref())?;
    let (store, runtime) = open_read_with_runtime(store_dir)?;
    runtime.block_on(epistore_server::serve(
        store,
        settings,
        |local| {
            // Scripts wait for this line (and read the port from it when asked for 0).
            println!("listening on grpc://{local}");
            let _ = std::io::stdout().flush();
        },
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// `mcp`: the Model Context Protocol server on stdin and stdout (nothing else may be
/// printed there: it is the protocol's channel).
pub fn mcp(store_dir: &Path, args: &McpArgs) -> Result<ExitCode> {
    if args.max_rows == 0 || args.max_bytes < 1024 || !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--max-rows must be at least 1, --max-bytes at least 1024 and --timeout above 0 seconds");
    }
    let store = open_read(store_dir)?;
    let limits = epistore_mcp::Limits {
        rows: args.max_rows,
        max_rows_cap: args.max_rows.max(epistore_mcp::Limits::default().max_rows_cap),
        bytes: args.max_bytes,
        query_time: std::time::Duration::from_secs_f64(args.timeout),
    };
    let options = epistore_mcp::Options { limits, ui_url: args.ui_url.clone() };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(epistore_mcp::serve_stdio(store, options))?;
    Ok(ExitCode::SUCCESS)
}
