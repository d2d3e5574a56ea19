//! `annotate` and `annotations`: a person's judgements beside the data
//! (docs/annotations.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use epistore_package::hex;
use epistore_store::{Annotated, AnnotationKind, Judgement, Snapshot, Store, StoredAnnotation};
use serde_json::{json, Value};

use crate::commands::{open_read, print_rows};
use crate::OutputFormat;

#[derive(Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["episode", "retract"]))]
pub struct AnnotateArgs {
    /// The episode judged: its id or a unique prefix of it.
    #[arg(requires = "label")]
    pub episode: Option<String>,
    /// The judgement: "reward hacking", "env failure", "flaky test", ...
    #[arg(long, short)]
    pub label: Option<String>,
    /// Withdraw this annotation (an id or a unique prefix) instead.
    #[arg(long, value_name = "ANNOTATION", conflicts_with = "label")]
    pub retract: Option<String>,
    /// Why: free text kept with the record.
    #[arg(long, short)]
    pub note: Option<String>,
    /// Who judges.
    #[arg(long, short, env = "EPISTORE_AUTHOR")]
    pub author: Option<String>,
    /// Seconds to wait for another process writing to the store.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub wait: f64,
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

#[derive(Args)]
pub struct AnnotationsArgs {
    /// Only annotations with this label.
    #[arg(long, short)]
    pub label: Option<String>,
    /// Only the annotations of this episode (an id or a unique prefix).
    #[arg(long)]
    pub episode: Option<String>,
    /// Every record: withdrawn labels and retractions too (default: active labels).
    #[arg(long)]
    pub all: bool,
    /// Write the annotated episodes' packages and `annotations.jsonl` into this new
    /// directory, for judge validation.
    #[arg(long, value_name = "DIR")]
    pub export: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// Opens the store for writing, waiting up to `wait` for another writer to finish.
fn open_writer_waiting(store_dir: &Path, wait: Duration) -> Result<Store> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match Store::open_or_create(store_dir) {
            Err(epistore_store::Error::Busy(_)) if start.elapsed() < wait => {
                std::thread::sleep(pause.min(wait.saturating_sub(start.elapsed())));
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(e @ epistore_store::Error::Busy(_)) => {
                return Err(e).with_context(|| format!("waited {:.0} s for the other writer", wait.as_secs_f64()))
            }
            other => return Ok(other?),
        }
    }
}

pub fn annotate(store_dir: &Path, args: &AnnotateArgs) -> Result<ExitCode> {
    if !store_dir.join(epistore_store::DB_FILE).is_file() {
        // Annotating creates nothing: a mistyped --store must not make an empty store.
        return Err(epistore_store::Error::NoStore(store_dir.to_path_buf()).into());
    }
    if !(args.wait.is_finite() && args.wait >= 0.0) {
        bail!("--wait must be a number of seconds, at least 0");
    }
    let store = open_writer_waiting(store_dir, Duration::from_secs_f64(args.wait))?;
    let written = match (&args.retract, &args.episode, &args.label) {
        (Some(target), _, _) => store.retract(target, args.note.clone(), args.author.clone())?,
        (None, Some(episode), Some(label)) => store.annotate(
            episode,
            Judgement { label: label.clone(), note: args.note.clone(), author: args.author.clone() },
        )?,
        _ => bail!("give an EPISODE with --label, or --retract ANNOTATION"),
    };
    report(&written, args.format);
    Ok(ExitCode::SUCCESS)
}

fn report(written: &Annotated, format: OutputFormat) {
    let a = &written.annotation;
    match format {
        OutputFormat::Table => {
            let what = match a.kind {
                AnnotationKind::Label => format!("annotated episode {} with \"{}\"", hex(&a.episode), a.label),
                AnnotationKind::Retraction => format!(
                    "retracted \"{}\" ({}) on episode {}",
                    a.label,
                    a.retracts.as_ref().map(hex).unwrap_or_default(),
                    hex(&a.episode)
                ),
            };
            let again = if written.added { "" } else { " (already stored: nothing added)" };
            println!("{what}: annotation {}{again}", hex(&written.id));
        }
        _ => {
            println!("{}", written.to_json());
        }
    }
}

/// The annotations `args` selects, with whether each is withdrawn.
fn selected(snapshot: &Snapshot, args: &AnnotationsArgs) -> Result<Vec<StoredAnnotation>> {
    let episode = args.episode.as_deref().map(|e| snapshot.resolve_stored(e)).transpose()?;
    Ok(snapshot
        .annotations()?
        .into_iter()
        .filter(|a| args.all || a.is_active())
        .filter(|a| args.label.as_deref().is_none_or(|l| a.annotation.label == l))
        .filter(|a| episode.is_none_or(|e| a.annotation.episode == e))
        .collect())
}

pub fn annotations(store_dir: &Path, args: &AnnotationsArgs) -> Result<ExitCode> {
    let store = open_read(store_dir)?;
    let snapshot = store.snapshot()?;
    let chosen = selected(&snapshot, args)?;
    if let Some(dir) = &args.export {
        return export(&snapshot, &chosen, dir);
    }
    let headers = ["id", "episode_id", "kind", "label", "author", "created", "note", "retracted_by"];
    let rows: Vec<Vec<Value>> = chosen
        .iter()
        .map(|a| {
            let r = &a.annotation;
            let id = hex(&a.id);
            let episode = hex(&r.episode);
            // Ids are long: a table shows the 12 digits that `annotate --retract` and
            // `show` take; csv and json keep them whole.
            let short = |s: String| if matches!(args.format, OutputFormat::Table) { s[..12].to_string() } else { s };
            vec![
                json!(short(id)),
                json!(short(episode)),
                json!(r.kind.name()),
                json!(r.label),
                json!(r.author),
                json!(r.created),
                json!(r.note),
                json!(a.retracted_by.as_ref().map(|b| short(hex(b)))),
            ]
        })
        .collect();
    print_rows(&headers, &rows, args.format);
    Ok(ExitCode::SUCCESS)
}

/// Writes the selected annotations and their episodes' packages into a new directory,
/// built beside it and renamed into place.
fn export(snapshot: &Snapshot, chosen: &[StoredAnnotation], dir: &Path) -> Result<ExitCode> {
    if dir.exists() {
        bail!("{}: already exists (annotations --export writes a new directory)", dir.display());
    }
    let mut partial = dir.as_os_str().to_os_string();
    partial.push(".epistore-partial");
    let partial = PathBuf::from(partial);
    let _ = std::fs::remove_dir_all(&partial);
    let written = (|| -> Result<usize> {
        std::fs::create_dir_all(partial.join("episodes")).with_context(|| partial.display().to_string())?;
        let mut lines = String::new();
        let mut episodes = std::collections::BTreeSet::new();
        for a in chosen {
            let value = a.to_json();
            lines.push_str(&value.to_string());
            lines.push('\n');
            episodes.insert(a.annotation.episode);
        }
        for id in &episodes {
            snapshot.export_package(id, &partial.join("episodes").join(hex(id)))?;
        }
        let file = partial.join("annotations.jsonl");
        std::fs::write(&file, lines).with_context(|| file.display().to_string())?;
        Ok(episodes.len())
    })();
    let episodes = match written {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, dir).with_context(|| format!("renaming into {}", dir.display()))?;
    println!("wrote {} annotations and {episodes} episode packages to {}", chosen.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The label annotations of one episode for `show`: each stored record with its id and
/// the retraction that withdraws it (null while active).
pub(crate) fn of_episode(snapshot: &Snapshot, episode: &[u8; 32]) -> Result<Vec<Value>> {
    Ok(snapshot.labels_of(episode)?.iter().map(|(label, _)| label.to_json()).collect())
}
