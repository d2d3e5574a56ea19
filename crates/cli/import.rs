//! `epistore import`: the logs agent tools write, read by `epistore-import` into
//! packages, committed through the store's normal ingest (or written as package
//! directories with `--out`). Contract: docs/importers.md §7.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context as _, Result};
use epistore_import::otel::{Agent, MERGED_NOTE};
use epistore_import::{plan, read_unit, Companion, Context, Format, Options, Part, Prior, Refusal, Run, Unit};
use epistore_package::{hex, Hash};
use epistore_store::{FileEntry, IngestOptions, PackageOutcome, Snapshot, Store};
use serde_json::{json, Value};

use crate::commands::{print_rows, progress_bar};
use crate::OutputFormat;

#[derive(clap::Args)]
pub struct ImportArgs {
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long = "format", value_name = "FORMAT", value_parser = parse_source_format, help = source_format_help())]
    pub source_format: Option<Format>,
    /// The model, for logs that name none (or to override what they name).
    #[arg(long)]
    pub model: Option<String>,
    /// The harness level (default: the tool's name).
    #[arg(long)]
    pub harness_level: Option<String>,
    /// The task id (default: what the log names, else each run its own task).
    #[arg(long)]
    pub task: Option<String>,
    /// The task cluster (default: the repository when known).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Inspect: the scorer whose value is the verdict (default: each sample's first).
    #[arg(long)]
    pub scorer: Option<String>,
    /// aider: a `git log -p` file that fills the edited paths.
    #[arg(long)]
    pub git_log: Option<PathBuf>,
    /// Trajectory datasets: a JSON file naming the columns (run_id, instance_id,
    /// messages, model, outcome, patch, content, role, roles, harness); without it the
    /// public corpora's usual names are used.
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    /// Write package directories here instead of ingesting them.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Import runs whose source files are already in the store again, as new episodes
    /// that supersede the earlier imports (after an upgrade that writes more).
    #[arg(long)]
    pub reimport: bool,
    /// Replace what looks like a secret (API keys, tokens, private keys) in the
    /// source copies and records before packaging; noted in the provenance.
    #[arg(long)]
    pub redact: bool,
    /// Summary format (`--format` names the log format here, as the importer
    /// contract spells it).
    #[arg(long = "summary-format", value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Memory the reader threads may hold at once, all together, counted as four times
    /// the size of each log (or archive member) being read; a larger one is read alone.
    #[arg(long, default_value_t = epistore_store::DEFAULT_MEMORY_BUDGET >> 20)]
    pub memory_budget_mib: u64,
    /// The logs are being written (`watch`): a JSON Lines file whose last line has not
    /// ended yet is left for later.
    #[arg(skip)]
    pub growing: bool,
}

impl ImportArgs {
    /// One pass of `watch` over `paths`.
    pub fn for_watch(paths: Vec<PathBuf>, model: Option<String>, redact: bool) -> ImportArgs {
        ImportArgs {
            paths,
            source_format: None,
            model,
            harness_level: None,
            task: None,
            cluster: None,
            scorer: None,
            git_log: None,
            mapping: None,
            out: None,
            reimport: false,
            redact,
            format: OutputFormat::Json,
            quiet: true,
            memory_budget_mib: epistore_store::DEFAULT_MEMORY_BUDGET >> 20,
            growing: true,
        }
    }

    /// What the importer itself is told (section 2's overrides).
    fn options(&self) -> Options {
        Options {
            format: self.source_format,
            model: self.model.clone(),
            harness_level: self.harness_level.clone(),
            task: self.task.clone(),
            cluster: self.cluster.clone(),
            scorer: self.scorer.clone(),
            git_log: self.git_log.clone(),
            mapping: self.mapping.clone(),
            redact: self.redact,
            growing: self.growing,
            // Parquet corpora: read here, where Arrow may be (never in the import crate).
            row_files: Some(epistore_import_parquet::Parquet::reader()),
        }
    }
}

/// `epistore formats`: the registry's sources, in its order.
pub fn formats(format: OutputFormat) -> Result<ExitCode> {
    let rows: Vec<Vec<Value>> = epistore_import::IMPORTERS
        .iter()
        .map(|i| vec![json!(i.format().name()), json!(i.harness()), json!(i.about()), json!(i.file_names())])
        .collect();
    print_rows(&["format", "harness", "reads", "file_names"], &rows, format);
    Ok(ExitCode::SUCCESS)
}

/// `--format`'s help: the registry's formats.
fn source_format_help() -> String {
    let names: Vec<&str> = Format::all().map(|f| f.name()).collect();
    format!("Read every file as this log format instead of detecting it ({})", names.join(", "))
}

pub fn parse_source_format(name: &str) -> Result<Format, String> {
    Format::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Format::all().map(|f| f.name()).collect();
        format!("unknown log format `{name}`; one of {}", names.join(", "))
    })
}

/// Counts per source format, as the summary prints them.
#[derive(Default, Clone)]
struct Tally {
    found: usize,
    imported: usize,
    already_present: usize,
    covered: usize,
    refused: usize,
    superseding: usize,
    /// Runs already stored without a verdict, imported again with a report's.
    without_verdict: usize,
}

/// What an import did, for the summary.
#[derive(Default, Clone)]
struct Summary {
    tally: BTreeMap<String, Tally>,
    refusals: Vec<(String, Refusal)>,
    covered: Vec<(String, String, String)>,
    unmatched_reports: Vec<String>,
    /// Possible secrets found per pattern, and in how many runs.
    secrets: BTreeMap<&'static str, usize>,
    runs_with_secrets: usize,
    /// `--redact`: the secrets found were replaced.
    redacted: bool,
    /// The SWE-bench instances of the runs read, for reporting unmatched reports.
    instances: Vec<String>,
    /// What went wrong beside the runs (derived data not built).
    warnings: Vec<String>,
    /// Files of the folders walked that no importer takes, by reason: how many, and
    /// the first (in path order).
    skipped: BTreeMap<String, (usize, String)>,
}

impl Summary {
    fn of(&mut self, format: &str) -> &mut Tally {
        self.tally.entry(format.to_string()).or_default()
    }
    fn secrets(&mut self, run: &Run) {
        if !run.secrets.is_empty() {
            self.runs_with_secrets += 1;
        }
        for (pattern, n) in &run.secrets {
            *self.secrets.entry(pattern).or_default() += n;
        }
    }
    fn refuse(&mut self, format: Option<Format>, refusal: Refusal) {
        let name = format.map_or("unknown".to_string(), |f| f.name().to_string());
        self.of(&name).refused += 1;
        self.refusals.push((name, refusal));
    }
}

/// Earlier imports in the store: their source keys (for "already present") and, per
/// (format, episode label), the source file they were read from (for "grown").
struct StoredImports {
    /// Source key -> the latest import of it (ingest order), and whether it has a verdict.
    keys: HashMap<String, (Hash, bool)>,
    /// `--reimport`: a run imported again supersedes its earlier import.
    reimport: bool,
    by_label: HashMap<(String, String), Vec<(Hash, FileEntry)>>,
    /// The latest stored episode of every (source format, episode label).
    latest: HashMap<(String, String), (u64, Hash)>,
    /// Episodes a later one supersedes: never superseded a second time.
    superseded: std::collections::HashSet<Hash>,
    snapshot: Mutex<Snapshot>,
}

impl StoredImports {
    fn read(store: &Store, reimport: bool) -> Result<StoredImports> {
        let snapshot = store.snapshot()?;
        let mut keys = HashMap::new();
        let mut by_label: HashMap<(String, String), Vec<(Hash, FileEntry)>> = HashMap::new();
        let mut latest: HashMap<(String, String), (u64, Hash)> = HashMap::new();
        snapshot.for_each_episode(|record| {
            let Some(provenance) = record.manifest.provenance() else {
                return Ok(true);
            };
            let format = provenance.get("source_format").and_then(Value::as_str).unwrap_or("").to_string();
            let files = provenance.get("source_files").and_then(Value::as_array).cloned().unwrap_or_default();
            let has_verdict = record.outcome.correct.is_some();
            let newest = latest.entry((format.clone(), record.manifest.episode.clone())).or_insert((0, record.id));
            if record.ingest_seq >= newest.0 {
                *newest = (record.ingest_seq, record.id);
            }
            for (i, f) in files.iter().enumerate() {
                let Some(hash) = f.get("blake3").and_then(Value::as_str) else {
                    continue;
                };
                let key = match f.get("part") {
                    Some(Value::String(p)) => format!("{hash}#{p}"),
                    Some(Value::Number(n)) => format!("{hash}#{n}"),
                    _ => hash.to_string(),
                };
                keys.insert(key, (record.id, has_verdict));
                // The first source file is the log itself; it is what grows.
                if i == 0 && f.get("part").is_none() {
                    let name = f.get("name").and_then(Value::as_str).unwrap_or("");
                    let path = format!("artifacts/source/{name}");
                    if let Some(stored) = record.files.iter().find(|e| e.path == path) {
                        by_label
                            .entry((format.clone(), record.manifest.episode.clone()))
                            .or_default()
                            .push((record.id, stored.clone()));
                    }
                }
            }
            Ok(true)
        })?;
        let superseded = snapshot.superseded()?.into_iter().map(|(old, _)| old).collect();
        Ok(StoredImports { keys, reimport, by_label, latest, superseded, snapshot: Mutex::new(snapshot) })
    }

    /// Whether the unit's main source part (its first file, and the part of it) was the
    /// source of a stored import: the key a run read from it would have.
    fn unit_already(&self, unit: &Unit) -> bool {
        let Some(first) = unit.files.first() else { return false };
        let Ok(hash) = first.blake3() else { return false };
        let key = match &unit.part {
            Part::Whole => hash,
            Part::Member(m) | Part::Object(m) => format!("{hash}#{m}"),
            Part::Line(n) => format!("{hash}#{n}"),
        };
        self.keys.contains_key(&key)
    }

    /// The stored episode a run's own source files came from, and whether it has a verdict.
    fn already(&self, run: &Run) -> Option<(Hash, bool)> {
        run.source_keys.iter().find_map(|k| self.keys.get(k).copied())
    }
}

/// How a log on disk relates to the stored copy of a run of the same format and label.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Copy {
    /// The stored copy is a proper prefix of the log: the log has grown since.
    Grown,
    /// The log is a proper prefix of the stored copy: an older copy (a backup) of a
    /// run whose later state is stored.
    Older,
}

/// `new` against the stored copy `old`.
fn copy_relation(old: &[u8], new: &[u8]) -> Option<Copy> {
    if old.len() < new.len() && new.starts_with(old) {
        Some(Copy::Grown)
    } else if new.len() < old.len() && old.starts_with(new) {
        Some(Copy::Older)
    } else {
        None
    }
}

impl StoredImports {
    /// The stored run of `format` and `episode` that `file` relates to as `wanted`.
    fn stored_copy(&self, format: Format, episode: &str, file: &Path, wanted: Copy) -> Option<Hash> {
        let candidates = self.by_label.get(&(format.name().to_string(), episode.to_string()))?;
        let new = std::fs::read(file).ok()?;
        // The log as `import --redact` would have stored it (the same secrets give the
        // same replacements, so a grown log's redacted form still starts with the
        // redacted copy): made once, when a copy as written does not match.
        let mut redacted: Option<Vec<u8>> = None;
        let snapshot = self.snapshot.lock().ok()?;
        // A log imported three times as it grew has two stored copies that are each a
        // prefix of it: the new import supersedes the longest, the latest one (which
        // superseded the other), so the chain stays one episode.
        let mut best: Option<(usize, Hash)> = None;
        for (id, file) in candidates {
            // A superseded import is not the run's latest state (a merged episode with
            // the same session file superseded it): the chain goes on from its successor.
            if self.superseded.contains(id) {
                continue;
            }
            let Ok(Some(record)) = snapshot.episode(id) else {
                continue;
            };
            let Ok(old) = snapshot.file(&record, file) else {
                continue;
            };
            let relation = copy_relation(&old, &new).or_else(|| {
                copy_relation(&old, redacted.get_or_insert_with(|| epistore_import::secrets::redact(&new).0))
            });
            // On a tie the later import (candidates are in ingest order) is the latest.
            if relation == Some(wanted) && best.is_none_or(|(len, _)| old.len() >= len) {
                best = Some((old.len(), *id));
            }
        }
        best.map(|(_, id)| id)
    }
}

impl Prior for StoredImports {
    fn grown_from(&self, format: Format, episode: &str, file: &Path) -> Option<String> {
        self.stored_copy(format, episode, file, Copy::Grown).map(|id| hex(&id))
    }

    fn latest(&self, format: Format, episode: &str) -> Option<String> {
        self.latest.get(&(format.name().to_string(), episode.to_string())).map(|(_, id)| hex(id))
    }

    fn replaced(&self, source_keys: &[String]) -> Option<String> {
        if !self.reimport {
            return None;
        }
        source_keys.iter().find_map(|k| self.keys.get(k)).map(|(id, _)| hex(id))
    }

    fn companion(&self, format: Format, episode: &str) -> Option<Companion> {
        let (agent, telemetry) = Agent::of(format)?;
        // Telemetry pairs with the session file's episode (plain or merged); a session
        // file with the newest current episode holding the session's telemetry
        // (collected, or merged).
        let formats = if telemetry { vec![agent.transcript()] } else { vec![agent.format(), agent.transcript()] };
        let snapshot = self.snapshot.lock().ok()?;
        let mut found: Vec<(u64, Hash, Format)> = formats
            .into_iter()
            .filter_map(|f| self.latest.get(&(f.name().to_string(), episode.to_string())).map(|(s, id)| (*s, *id, f)))
            .filter(|(_, id, _)| !self.superseded.contains(id))
            .collect();
        found.sort_by_key(|(seq, _, _)| std::cmp::Reverse(*seq));
        // The newest candidate that has what is asked for, and only it: an older one is
        // not the session's latest state.
        let (id, format, record) = found.into_iter().find_map(|(_, id, format)| {
            let record = snapshot.episode(&id).ok()??;
            let notes = record.manifest.provenance()?.get("notes")?.as_array()?.clone();
            let merged = notes.iter().filter_map(Value::as_str).any(|n| n.starts_with(MERGED_NOTE));
            // A session file's plain episode has no telemetry to give a session file.
            (telemetry || format == agent.format() || merged).then_some((id, format, record))
        })?;
        let files = record.manifest.provenance()?.get("source_files")?.as_array()?.clone();
        let mut sources = Vec::new();
        for f in &files {
            let name = f.get("name").and_then(Value::as_str)?;
            let hash = f.get("blake3").and_then(Value::as_str).unwrap_or("");
            let part = match f.get("part") {
                Some(Value::String(p)) => Some(p.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            };
            // A copy left out (over the package file limit): nothing is merged.
            let entry = record.files.iter().find(|e| e.path == epistore_import::source_artifact(name))?;
            let bytes = snapshot.file(&record, entry).ok()?;
            sources.push(epistore_import::Source { name: name.to_string(), blake3: hash.to_string(), part, bytes });
        }
        Some(Companion { episode_id: hex(&id), format, sources })
    }
}

pub fn import(store_dir: &Path, args: ImportArgs) -> Result<ExitCode> {
    let planned = plan(&args.paths, &args.options());
    if planned.units.is_empty() && planned.refused.is_empty() {
        // Episode packages given to `import`: say which command reads them, create nothing.
        if let Ok(sources) = epistore_package::discover(&args.paths) {
            if !sources.is_empty() {
                anyhow::bail!(
                    "{} holds episode packages ({} found), not agent logs: add them with `epistore ingest {}`",
                    shown_paths(&args.paths),
                    sources.len(),
                    shown_paths(&args.paths)
                );
            }
        }
    }
    let store = match &args.out {
        Some(_) => None,
        None => Some(
            Store::open_or_create(store_dir)
                .with_context(|| format!("opening the store at {}", store_dir.display()))?,
        ),
    };
    let (mut summary, seconds) = run_planned(store.as_ref(), &args, planned)?;
    for warning in &summary.warnings {
        eprintln!("warning: {}", epistore_sql::printable(warning));
    }
    print_summary(&mut summary, args.format, seconds)?;
    Ok(if summary.refusals.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `epistore import` without printing, for the Python package: the summary
/// `--summary-format json` prints, with the `warnings` the command line prints on
/// standard error. `store` may be None only with `args.out`.
pub fn import_summary(store: Option<&Store>, args: &ImportArgs) -> Result<Value> {
    let (mut summary, seconds) = run(store, args)?;
    let mut value = summary_json(&mut summary, seconds);
    value["warnings"] = json!(summary.warnings);
    Ok(value)
}

/// Plans, reads and commits (or writes) the runs under `args.paths`.
fn run(store: Option<&Store>, args: &ImportArgs) -> Result<(Summary, f64)> {
    run_planned(store, args, plan(&args.paths, &args.options()))
}

/// Reads and commits (or writes) the runs `planned` found.
fn run_planned(store: Option<&Store>, args: &ImportArgs, planned: epistore_import::Plan) -> Result<(Summary, f64)> {
    let started = Instant::now();
    let mut summary = Summary { redacted: args.redact, ..Summary::default() };
    // Every found item is exactly one of imported, already present, covered or refused
    // (files no importer takes are `skipped`, outside the table): what planning
    // refused or found covered was found too.
    for (format, refusal) in planned.refused.iter().cloned() {
        let name = format.map_or("unknown", |f| f.name()).to_string();
        summary.of(&name).found += 1;
        summary.refuse(format, refusal);
    }
    for (path, reason) in &planned.skipped {
        let entry = summary.skipped.entry(reason.clone()).or_insert_with(|| (0, path.display().to_string()));
        entry.0 += 1;
    }
    for (format, file, reason) in &planned.covered {
        summary.of(format.name()).found += 1;
        summary.of(format.name()).covered += 1;
        summary.covered.push((format.name().to_string(), file.clone(), reason.clone()));
    }
    match (&args.out, store) {
        (Some(out), _) => write_packages(out, &planned, args, &mut summary)?,
        (None, Some(store)) => ingest_runs(store, &planned, args, &mut summary)?,
        (None, None) => anyhow::bail!("importing into a store needs the store"),
    }
    summary.unmatched_reports =
        planned.unmatched_reports(&summary.instances).into_iter().map(|r| r.instance_id.clone()).collect();
    Ok((summary, started.elapsed().as_secs_f64()))
}

/// Reads every unit on the ingest threads and commits the packages through the
/// store's ingest; a run already imported (by its source files) is skipped first.
fn ingest_runs(store: &Store, planned: &epistore_import::Plan, args: &ImportArgs, summary: &mut Summary) -> Result<()> {
    let stored = StoredImports::read(store, args.reimport)?;
    let options = args.options();
    let ctx = Context { options: &options, reports: &planned.reports, prior: Some(&stored) };
    let shared = Mutex::new(std::mem::take(summary));
    // A unit whose source part is already stored is skipped unread, unless the call asks
    // to import again or brings reports (a verdict may make a new episode of an old run).
    let fast_already = !args.reimport && planned.reports.is_empty();
    let bar = progress_bar(args.quiet, planned.units.len() as u64, "logs");
    let label = format!("import {}", args.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" "));
    let options = IngestOptions {
        label,
        chunk_sources: 64,
        memory_budget: args.memory_budget_mib << 20,
        ..IngestOptions::default()
    };
    let mut segments = Some(epistore_sql::columnar::IngestSegments::new(store));
    // Package name -> episode label, to name a package the store rejects.
    let names: Mutex<HashMap<String, String>> = Mutex::new(HashMap::new());
    // The file each (format, episode label) of this import was read from: a second file
    // giving the same label (a copy, a backup) is reported, not stored silently twice.
    let labels: Mutex<HashMap<(String, String), String>> = Mutex::new(HashMap::new());
    let report = store.ingest_from(
        &planned.units,
        |unit: &Unit, reservation: &mut epistore_package::Reservation| {
            let mut packages = Vec::new();
            if fast_already && stored.unit_already(unit) {
                // Its own source part is in the store: not even read again.
                let mut s = shared.lock().expect("summary lock");
                s.of(unit.format.name()).found += 1;
                s.of(unit.format.name()).already_present += 1;
                return packages;
            }
            // The memory budget bounds import as it bounds ingest: a large log waits
            // for room (or is read alone), its bytes held until its packages are stored.
            reservation.charge(epistore_import::unit_bytes(unit));
            for run in read_unit(unit, &ctx) {
                let mut s = shared.lock().expect("summary lock");
                s.of(unit.format.name()).found += 1;
                match run {
                    Err(refusal) => s.refuse(Some(unit.format), refusal),
                    Ok(run) => {
                        let label = run.package.episode.manifest.episode.clone();
                        // An older copy of a stored run (a backup beside the log):
                        // everything it holds is stored already.
                        let older = match unit.part {
                            Part::Whole if !args.reimport => {
                                stored.stored_copy(unit.format, &label, &unit.files[0].path, Copy::Older)
                            }
                            _ => None,
                        };
                        if let Some(newer) = older {
                            s.of(unit.format.name()).covered += 1;
                            s.covered.push((
                                unit.format.name().to_string(),
                                unit.files[0].path.display().to_string(),
                                format!(
                                    "an older copy of a run already stored in full (episode {})",
                                    &hex(&newer)[..12]
                                ),
                            ));
                            continue;
                        }
                        if let Some((_, has_verdict)) = stored.already(&run).filter(|_| !args.reimport) {
                            if run.verdict_from_report && !has_verdict {
                                s.of(unit.format.name()).without_verdict += 1;
                            } else {
                                s.of(unit.format.name()).already_present += 1;
                                s.instances.extend(run.instance_id.clone());
                                continue;
                            }
                        }
                        s.secrets(&run);
                        if run.package.episode.manifest.supersedes().is_some() {
                            s.of(unit.format.name()).superseding += 1;
                        }
                        s.instances.extend(run.instance_id.clone());
                        let mut package = run.package;
                        let name = format!("{}:{}", unit.format.name(), label);
                        package.raw.name = name.clone();
                        if matches!(unit.part, Part::Whole) {
                            let file = unit.files[0].path.display().to_string();
                            let key = (unit.format.name().to_string(), label.clone());
                            let mut labels = labels.lock().expect("labels lock");
                            match labels.get(&key) {
                                Some(first) if *first != file => s.warnings.push(format!(
                                    "{} run {label} was read from both {first} and {file}; stored as two episodes \
                                     (if one is an older copy of the other, remove it: importing the two one at a \
                                     time keeps the longer)",
                                    unit.format.name()
                                )),
                                Some(_) => {}
                                None => {
                                    labels.insert(key, file);
                                }
                            }
                        }
                        names.lock().expect("names lock").insert(name, label);
                        packages.push(Ok(package));
                    }
                }
            }
            packages
        },
        &options,
        |p| bar.set_position(p.sources_done as u64),
        |seq, episodes| {
            if let Some(builder) = segments.as_mut() {
                if builder.push(seq, episodes).is_err() {
                    segments = None;
                }
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let segments_built = segments.map(|b| b.finish().is_ok()).unwrap_or(false);
    *summary = shared.into_inner().expect("summary lock");
    if report.added() > 0 && (!segments_built || epistore_sql::columnar::refresh(store, &|_, _| {}).is_err()) {
        summary.warnings.push("columnar segments not built; queries will build them".into());
    }
    let names = names.into_inner().expect("names lock");
    for p in &report.packages {
        let format = p.name.split_once(':').map_or("unknown", |(f, _)| f).to_string();
        match &p.outcome {
            PackageOutcome::Added => summary.of(&format).imported += 1,
            PackageOutcome::AlreadyPresent => summary.of(&format).already_present += 1,
            PackageOutcome::Rejected(reason) => {
                let file = names.get(&p.name).cloned().unwrap_or_else(|| p.name.clone());
                summary.refuse(Format::from_name(&format), Refusal::new(file, None, reason.clone()));
            }
        }
    }
    Ok(())
}

/// A refusal's place as a sort key: `line 7` before `line 10`.
fn place_key(place: &Option<String>) -> (u64, String) {
    let text = place.clone().unwrap_or_default();
    let number = text.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    (number, text)
}

/// `--out DIR`: every run as a package directory `DIR/FORMAT/LABEL-ID12`, written whole
/// or not at all; a directory already there is the same package (its name holds the id).
fn write_packages(out: &Path, planned: &epistore_import::Plan, args: &ImportArgs, summary: &mut Summary) -> Result<()> {
    use rayon::prelude::*;
    let options = args.options();
    let ctx = Context { options: &options, reports: &planned.reports, prior: None };
    let bar = progress_bar(args.quiet, planned.units.len() as u64, "logs");
    // A chunk of units at a time, read in parallel and written before the next is read,
    // so memory holds one chunk of packages whatever the size of the input.
    for chunk in planned.units.chunks(64) {
        let results: Vec<(Format, Vec<Result<Run, Refusal>>)> = chunk
            .par_iter()
            .map(|unit| {
                let runs = read_unit(unit, &ctx);
                bar.inc(1);
                (unit.format, runs)
            })
            .collect();
        for (format, runs) in results {
            for run in runs {
                write_run(out, format, run, summary)?;
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// One run of `--out`: refused, already there, or written whole.
fn write_run(out: &Path, format: Format, run: Result<Run, Refusal>, summary: &mut Summary) -> Result<()> {
    summary.of(format.name()).found += 1;
    let run = match run {
        Ok(run) => run,
        Err(refusal) => {
            summary.refuse(Some(format), refusal);
            return Ok(());
        }
    };
    let id = hex(run.package.id());
    let label = &run.package.episode.manifest.episode;
    let dir = out.join(format.name()).join(format!("{}-{}", file_safe(label), &id[..12]));
    if dir.join("manifest.json").is_file() {
        summary.of(format.name()).already_present += 1;
        summary.instances.extend(run.instance_id.clone());
        return Ok(());
    }
    summary.secrets(&run);
    run.package.write_dir(&dir).with_context(|| format!("writing {}", dir.display()))?;
    summary.of(format.name()).imported += 1;
    summary.instances.extend(run.instance_id.clone());
    Ok(())
}

/// An episode label as one path component: `/` and other awkward characters become `_`.
fn file_safe(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
        .take(80)
        .collect();
    s.trim_start_matches('.').to_string()
}

fn print_summary(summary: &mut Summary, format: OutputFormat, seconds: f64) -> Result<()> {
    sort_summary(summary);
    let summary = &*summary;
    let rows: Vec<(&String, &Tally)> = summary.tally.iter().collect();
    match format {
        OutputFormat::Json => {
            let value = summary_json(&mut summary.clone(), seconds);
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        _ => {
            // File names and what logs said reach the terminal escaped.
            let shown = |text: String| epistore_sql::printable(&text);
            // Refusals grouped by reason (its words with the quoted names left out), the
            // first of each group shown whole; every one is in --summary-format json.
            let mut groups: Vec<(String, usize, &Refusal)> = Vec::new();
            for (_, r) in &summary.refusals {
                let key = reason_kind(&r.reason);
                match groups.iter_mut().find(|(k, _, _)| *k == key) {
                    Some(group) => group.1 += 1,
                    None => groups.push((key, 1, r)),
                }
            }
            for (_, n, first) in &groups {
                match n {
                    1 => eprintln!("refused: {}", shown(first.to_string())),
                    n => eprintln!("refused: {n} runs for one reason, the first: {}", shown(first.to_string())),
                }
            }
            for (_, file, why) in &summary.covered {
                eprintln!("covered: {}: {}", shown(file.to_string()), shown(why.to_string()));
            }
            for (why, (n, first)) in &summary.skipped {
                let files = if *n == 1 { "1 file".to_string() } else { format!("{n} files") };
                eprintln!("skipped: {files} ({}{}): {why}", shown(first.clone()), if *n > 1 { ", ..." } else { "" });
            }
            if summary.runs_with_secrets > 0 && summary.redacted {
                let kinds: Vec<String> = summary.secrets.iter().map(|(p, n)| format!("{p} {n}")).collect();
                eprintln!(
                    "redacted: {} runs held what looks like secrets ({})",
                    summary.runs_with_secrets,
                    kinds.join(", ")
                );
            } else if summary.runs_with_secrets > 0 {
                let kinds: Vec<String> = summary.secrets.iter().map(|(p, n)| format!("{p} {n}")).collect();
                eprintln!(
                    "warning: {} runs hold what looks like secrets ({}); they are in the packages as in the logs \
                     unless imported with --redact",
                    summary.runs_with_secrets,
                    kinds.join(", ")
                );
            }
            for id in &summary.unmatched_reports {
                eprintln!(
                    "report: instance {} matches no run of this call (nothing imported for it)",
                    shown(id.to_string())
                );
            }
            let table: Vec<Vec<Value>> = rows
                .iter()
                .map(|(name, t)| {
                    vec![
                        json!(name),
                        json!(t.found),
                        json!(t.imported),
                        json!(t.already_present),
                        json!(t.covered),
                        json!(t.refused),
                    ]
                })
                .collect();
            print_rows(
                &["source_format", "found", "imported", "already_present", "covered", "refused"],
                &table,
                format,
            );
            for (name, t) in &rows {
                if t.without_verdict > 0 {
                    println!("{name}: already stored without a verdict: {} runs (imported again with the report's verdict, as new episodes)", t.without_verdict);
                }
                if t.superseding > 0 {
                    println!(
                        "{name}: {} runs grew since their last import (new episodes that supersede the old)",
                        t.superseding
                    );
                }
            }
            if format == OutputFormat::Table {
                println!("({seconds:.2} s)");
            }
        }
    }
    Ok(())
}

/// The summary as `--summary-format json` prints it.
fn summary_json(summary: &mut Summary, seconds: f64) -> Value {
    sort_summary(summary);
    let rows: Vec<(&String, &Tally)> = summary.tally.iter().collect();
    let formats: Vec<Value> = rows
        .iter()
        .map(|(name, t)| {
            json!({"source_format": name, "found": t.found, "imported": t.imported,
                   "already_present": t.already_present, "covered": t.covered, "refused": t.refused,
                   "superseding": t.superseding, "already_stored_without_verdict": t.without_verdict})
        })
        .collect();
    let refused: Vec<Value> = summary
        .refusals
        .iter()
        .map(|(f, r)| json!({"source_format": f, "file": r.file, "place": r.place, "reason": r.reason}))
        .collect();
    let covered: Vec<Value> =
        summary.covered.iter().map(|(f, file, why)| json!({"source_format": f, "file": file, "reason": why})).collect();
    let skipped: Vec<Value> =
        summary.skipped.iter().map(|(why, (n, first))| json!({"reason": why, "files": n, "first": first})).collect();
    json!({"formats": formats, "refused": refused, "covered": covered, "skipped": skipped,
           "unmatched_reports": summary.unmatched_reports, "secrets": summary.secrets,
           "runs_with_secrets": summary.runs_with_secrets, "seconds": seconds})
}

/// Units are read in parallel: sort, so the same call gives the same report.
fn sort_summary(summary: &mut Summary) {
    summary.refusals.sort_by(|a, b| (&a.1.file, place_key(&a.1.place)).cmp(&(&b.1.file, place_key(&b.1.place))));
    summary.covered.sort();
}

/// Paths as one argument list for a message.
pub(crate) fn shown_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| epistore_sql::printable(&p.display().to_string())).collect::<Vec<_>>().join(" ")
}

/// A refusal's reason with what it quotes (names, ids, lines) left out, so that refusals
/// for one cause group together.
fn reason_kind(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut quoted = false;
    for c in reason.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                if quoted {
                    out.push('…');
                }
            }
            _ if quoted => {}
            c if c.is_ascii_digit() => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            c => out.push(c),
        }
    }
    out
}
