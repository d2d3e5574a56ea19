//! `epistore`: the command line over an epistore store.

mod commands;


use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Examples:
  epistore ingest datasets/login-validation          # add packages (folders and .tar/.tar.gz/.tar.zst)
  epistore ls                                        # episodes by cell (model, harness level, task)
  epistore sql \"SELECT harness_level, posture, has_verification FROM episodes ORDER BY 1\"
  epistore sql --format json \"SELECT * FROM episodes\" # NULL stays null
  epistore show 3fa9                                 # an episode by id prefix
  epistore export-package 3fa9 /tmp/out              # the package back out, byte-identical
  epistore verify                                    # re-hash every blob, check every index

The store lives in --store DIR, else $EPISTORE_STORE, else ./.epistore; `ingest`
creates it. Any number of readers may run while one `ingest` writes.";

#[derive(Parser)]
#[command(name = "epistore", version, about = "Embedded trace store and SQL engine for coding-agent episode packages", after_help = AFTER_HELP)]
struct Cli {
    /// Store directory.
    #[arg(long, global = true, env = "EPISTORE_STORE", default_value = ".epistore")]
    store: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Add episode packages to the store (created on first use).
    ///
    /// PATH is a package directory (it holds manifest.json), a .tar/.tar.gz/.tar.zst
    /// archive of packages, or any folder, searched recursively for both. Valid packages
    /// go in even when others are rejected; a package already stored is skipped. Exits
    /// 1 when any package was rejected, naming its file, line and field.
    Ingest {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Summary format.
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// Sources prepared and committed per write transaction.
        #[arg(long, default_value_t = 512, hide_short_help = true)]
        chunk: usize,
    },
    /// Run one read-only SQL query (DataFusion dialect) over the store's tables.
    ///
    /// Tables: `episodes` (one row per episode). Statements that write files or change
    /// the catalog (COPY, CREATE, INSERT, SET, ...) are refused.
    Sql {
        query: String,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// List cells (model, harness level, task) with their episode counts.
    Ls {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Show one episode: identity, outcome, derived state, files.
    Show {
        /// Episode id or a unique prefix of it (at least 4 hex digits).
        episode: String,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Write an episode's package into DIR, byte-identical to what was ingested.
    ExportPackage {
        episode: String,
        dir: PathBuf,
    },
    /// Re-hash every blob and check every index. Exits 0 only when the store is intact.
    Verify {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ingest { paths, format, quiet, chunk } => commands::ingest(&cli.store, &paths, format, quiet, chunk),
        Command::Sql { query, format } => commands::sql(&cli.store, &query, format),
        Command::Ls { format } => commands::ls(&cli.store, format),
        Command::Show { episode, format } => commands::show(&cli.store, &episode, format),
        Command::ExportPackage { episode, dir } => commands::export_package(&cli.store, &episode, &dir),
        Command::Verify { format } => commands::verify(&cli.store, format),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
