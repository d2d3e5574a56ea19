//! `epistore`: the command line over an epistore store. A library so that the same
//! command line ships inside the Python package (`epistore` on its PATH) as well as
//! the `epistore` binary (`main.rs`).

mod annotate;
mod collect;
mod commands;
mod import;
mod publish;
mod shell;
mod watch;

// What the Python package shares with the command line (one implementation of each).
pub use commands::{describe, ingest_with_segments};
pub use import::{import_summary, parse_source_format, ImportArgs};

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Examples:
  epistore import ~/.claude/projects                 # the logs agents write: Inspect, Claude Code,
                                                     # Codex, SWE-agent, mini-SWE-agent, OpenHands, aider
  epistore metrics --by source_format               # metrics of what was imported
  epistore ingest datasets/login-validation          # add packages (folders, archives)
  epistore ls                                        # episodes by cell (model, harness level, task)
  epistore sql \"SELECT harness_level, posture, has_verification FROM episodes ORDER BY 1\"
  epistore sql --format json \"SELECT * FROM episodes\" # NULL stays null
  epistore metrics --by model,harness_level          # the headline metrics, pooled
  epistore metrics --by model --ci                   # with task-cluster bootstrap intervals
  epistore export --table episodes --format parquet --out episodes.parquet
  epistore export --all --out export/                # every table and view, hive-partitioned
  epistore serve --addr 127.0.0.1:50051              # Arrow Flight SQL for notebooks (ADBC)
  epistore leaderboard --metric avs_rate --format html --out board.html
  epistore compare --metric sound_completion --by model   # paired tests, Holm-adjusted
  epistore sql \"SELECT * FROM cell_metrics\"          # every metric per cell
  epistore sql                                       # interactive SQL shell
  epistore show 3fa9                                 # an episode by id prefix
  epistore show 3fa9 --format html --out ep.html     # its timeline: revisions, checks, freshness
  epistore ui                                        # browse cells, boards, episodes at :8765
  epistore leaderboard --metric sound_completion --format html --out site/ --with-episodes
  epistore export-package 3fa9 /tmp/out              # the package back out, byte-identical
  epistore verify                                    # check every blob, record, index and segment
  epistore synth --episodes 10000 --out /tmp/pop     # a realistic synthetic population

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

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
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
    Ingest(IngestArgs),
    /// Import the logs agent tools write: Inspect AI (.eval, .json), Claude Code
    /// (~/.claude/projects, stream-json), Codex (rollouts, exec --json), SWE-agent
    /// (.traj, all_preds.jsonl), mini-SWE-agent (.traj.json), OpenHands (trajectories,
    /// output.jsonl, session folders), aider (.aider.chat.history.md), SWE-bench reports,
    /// ATIF trajectories and Harbor trials, Gemini CLI, Pi and Copilot CLI sessions
    /// (`epistore formats` lists them).
    ///
    /// Each file's format is detected from its content; folders are walked. Every run
    /// becomes an episode package (format episode-package/1.2: the conversation, each
    /// tool's output and each edit's diff included; source files kept under
    /// artifacts/source/) committed through the normal ingest, or written to --out.
    /// Importing the same files again adds nothing. Exits 1 when a log was refused,
    /// naming its file and line; the other logs still go in.
    Import(import::ImportArgs),
    /// Import agent sessions as they are written: every path once, then each change.
    ///
    /// Default paths: the session stores of the agents found in the home directory.
    /// A log that grew becomes a new episode superseding its earlier import; a line
    /// still being written waits for its end. Safe to stop at any moment: nothing
    /// committed is lost or imported twice. Idle, it waits on file-system notifications.
    Watch(watch::WatchArgs),
    /// The log formats this build imports: each source's `--format` name, the tool
    /// that writes it, what it reads and the file names it is found under.
    Formats {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Run read-only SQL (DataFusion dialect) over the store's tables and metric views.
    ///
    /// With QUERY: run it. With --file: run every statement of the file. With neither:
    /// read statements from standard input, or, on a terminal, start an interactive
    /// shell (line editing, history in ~/.epistore_history; end statements with `;`).
    /// Tables: episodes, actions, tools, context, checks, attributions, interventions,
    /// entropy, messages, requirements, fault_locations. Views: cell_metrics,
    /// label_shares, posture_shares, revision_correctness, revision_transitions,
    /// verifier_stats, verifier_pairs, localisation, label_audit, latest_attempts,
    /// episode_facts; table functions verifier_pairs_at(c) and search(query [, limit]);
    /// JSON functions json_get_str(json, key...) and kin. Statements that write files or change the catalog
    /// (COPY, CREATE, INSERT, SET, ...) are refused.
    Sql(SqlArgs),
    /// Find runs by what happened in them: full-text search over the messages, tool
    /// output, commands and edit diffs of every episode.
    ///
    /// QUERY: words (all must match), "a phrase", AND / OR / NOT, and field filters
    /// role:assistant, tool:Bash, kind:output (system, user, assistant, tool, output,
    /// command, diff), path:"src/app.py". Hits are best first, with the episode id and
    /// the record's seq to join with the SQL tables; the same rows as
    /// `SELECT * FROM search('QUERY', LIMIT)`.
    Search(SearchArgs),
    /// The headline population metrics (docs/metrics.md §A-§C), pooled over the chosen keys.
    ///
    /// Every ratio is a sum of numerators over a sum of denominators (never a mean of
    /// ratios); a zero denominator prints as NULL. The SQL is queries/cell_metrics.sql
    /// regrouped: run `epistore metrics --show-sql` to see it.
    Metrics(MetricsArgs),
    /// Write a table, a view, a query result or everything as files for notebooks and
    /// other engines (Arrow IPC, Parquet, CSV, JSON Lines).
    ///
    /// Streams (memory does not grow with the result), keeps nested and typed columns
    /// (CSV carries nested values as JSON text), records the schema version and the store
    /// snapshot in the file metadata (a `.epistore.json` sidecar for CSV and JSON Lines),
    /// writes beside the target and renames, and never overwrites.
    #[command(group(clap::ArgGroup::new("what").required(true).args(["table", "query", "all"])))]
    Export(ExportArgs),
    /// Serve the store over Arrow Flight SQL (read-only), for notebooks and BI tools.
    ///
    /// Bound to loopback unless told otherwise; a token is required for any other
    /// address. Clients send `authorization: Bearer TOKEN` (ADBC:
    /// db_kwargs={"adbc.flight.sql.authorization_header": "Bearer TOKEN"}). Prints
    /// `listening on grpc://ADDR` once ready; stops on Ctrl-C.
    Serve(ServeArgs),
    /// Rank entries on one metric with intervals, paired tests and tie groups.
    ///
    /// Each entry gets its pooled value, a 95% percentile bootstrap interval over task
    /// clusters, paired sign-flip tests against every other entry (Holm-adjusted over
    /// all pairs, as `compare`; McNemar's exact test beside them on single binary
    /// outcomes), a tie group, how often its rank holds over random halves of the
    /// tasks, and the episode ids behind its score; with repeated attempts, the pass@k
    /// and pass^k curve. A pass rate (`pass_rate`, `resolve_rate`) counts errored
    /// attempts as failures unless `--errors exclude`. The HTML format is one
    /// self-contained page with a sortable table and charts.
    Leaderboard(LeaderboardArgs),
    /// Browse the store in a web browser: a read-only local server of the viewer's
    /// pages (index of cells and headline metrics -> leaderboards -> an entry's
    /// episodes -> an episode's timeline).
    ///
    /// Bound to loopback unless told otherwise; any other address needs --token (open
    /// http://ADDR/?token=TOKEN once; the browser keeps a cookie). GET only. Prints
    /// `listening on http://ADDR` once ready; stops on Ctrl-C.
    Ui(UiArgs),
    /// Paired comparisons of every pair of entries on one metric (same task clusters),
    /// Holm-adjusted over the family.
    Compare {
        #[command(flatten)]
        entries: EntriesArgs,
        #[command(flatten)]
        bootstrap: BootstrapArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// List cells (model, harness level, task) with their episode counts.
    Ls {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
    },
    /// Show one episode: identity, outcome, derived state, files.
    ///
    /// `--format html` writes the episode page: its timeline over the revisions it went
    /// through (every check marked current or stale), the claim, posture, admission,
    /// verdict and label side by side, the patch, reports and files.
    Show(ShowArgs),
    /// Answer a coding agent's questions about the store over the Model Context
    /// Protocol (stdio): read-only tools to list tables, run SQL, search the runs,
    /// summarise an episode, compute a metric with its interval and compare two
    /// entries. Register it with your agent as docs/mcp.md shows.
    Mcp(McpArgs),
    /// Receive the telemetry coding agents export (OTLP over HTTP, and gRPC with
    /// --grpc-addr: Claude Code, Codex, Gemini CLI) and store each agent session as an
    /// episode.
    ///
    /// Records are grouped by session id and kept in a session file until the session
    /// has been quiet for --idle seconds (or Gemini CLI says it finished, or the
    /// collector stops), then imported; a session that goes on is committed again and
    /// supersedes its earlier episode. A session whose file is imported too becomes one
    /// episode (docs/importers.md §9.18). Loopback unless told otherwise; any other
    /// address needs --token. Prints `listening on http://ADDR` once ready.
    Collect(collect::CollectArgs),
    /// Record a person's judgement of an episode ("reward hacking", "flaky test", ...),
    /// or withdraw one with --retract.
    ///
    /// Append-only beside the data: the package, its derived fields and every metric
    /// stay as they are (docs/annotations.md). Select by it with `--where
    /// "annotated(episode_id, 'LABEL')"`; list with `epistore annotations`.
    Annotate(annotate::AnnotateArgs),
    /// List people's annotations (active labels unless --all), or --export the labelled
    /// episodes with their annotations for judge validation.
    Annotations(annotate::AnnotationsArgs),
    /// Write an episode's package into DIR, byte-identical to what was ingested.
    ExportPackage { episode: String, dir: PathBuf },
    /// Write a deterministic synthetic population of valid episode packages.
    ///
    /// Models x harness levels H0..H3 x tasks in clusters x seeds x attempts, with the
    /// harness ladder's evidence gradient, forced-revision trajectories with oracle
    /// verdicts, verifiers with correlated false accepts, interventions, entropy audits
    /// and shared artifacts. The same arguments always write the same bytes.
    Synth(SynthArgs),
    /// Give back the free space left in the store file by page allocation.
    Compact,
    /// Copy a store written by an older build (format epistore-store/1, /2 or /3) into
    /// the current format. The old file is kept beside it (epistore.redb.formatN)
    /// until you delete it.
    Migrate {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check the whole store: every blob re-hashed, every record and trace against its
    /// checksum and derived again from its files, every index, every columnar segment
    /// against its manifest. Exits 0 only when the store is intact.
    Verify {
        #[arg(long, value_enum, default_value = "table")]
        format: OutputFormat,
        /// Rebuild what is derived (records, traces, cell entries, checksums, segments)
        /// for episodes whose files are intact. Damaged files cannot be rebuilt: they
        /// stay reported.
        #[arg(long)]
        repair: bool,
    },
}

// The arguments of the commands that take more than a few, one struct each (as
// `ImportArgs`), so each command function takes one value instead of a long list.
// A command's help text is the doc comment on its `Command` variant above (clap sets
// the variant's last, over any the struct had), so the structs carry plain comments;
// their fields' doc comments are the flags' help. Field names are the argument ids
// that `conflicts_with`, `required_unless_present` and the `what` group refer to.

// `epistore ingest`.
#[derive(clap::Args)]
pub struct McpArgs {
    /// Rows a tool returns unless the call asks for fewer or more.
    #[arg(long, default_value_t = 100)]
    pub max_rows: usize,
    /// Bytes of text in one answer.
    #[arg(long, default_value_t = 48 << 10)]
    pub max_bytes: usize,
    /// Where `epistore ui` serves this store (http://127.0.0.1:8765): episode summaries
    /// link to their pages there.
    #[arg(long, value_name = "URL")]
    pub ui_url: Option<String>,
    /// Seconds one query may take, planning included.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
}

#[derive(clap::Args)]
pub(crate) struct IngestArgs {
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
    /// Package bytes the reader threads may hold in memory at once, all together
    /// (one source at a time may read past it, up to its own size limits).
    #[arg(long, default_value_t = epistore_store::DEFAULT_MEMORY_BUDGET >> 20)]
    memory_budget_mib: u64,
}

// `epistore sql`.
#[derive(clap::Args)]
pub(crate) struct SqlArgs {
    query: Option<String>,
    /// Run the statements of this file.
    #[arg(long, short, conflicts_with = "query")]
    file: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
    /// One field per line (for rows wider than the terminal); table format only.
    #[arg(long, short = 'x')]
    expanded: bool,
}

// `epistore search`.
#[derive(clap::Args)]
pub(crate) struct SearchArgs {
    query: String,
    /// Only episodes matching this SQL condition on episode_facts columns
    /// (model, harness_level, task, label, posture, source_format, ...).
    #[arg(long = "where", value_parser = where_condition)]
    filter: Option<String>,
    /// At most this many hits.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
}

// `epistore metrics` (and, with --ci, its intervals).
#[derive(clap::Args)]
pub(crate) struct MetricsArgs {
    /// Comma-separated keys to pool over: model, harness_level, task, cluster.
    /// Empty (`--by ''`) pools the whole store.
    #[arg(long, default_value = "model,harness_level")]
    by: String,
    /// Only episodes matching this SQL condition on episode_facts columns
    /// (model, harness_level, task, cluster, label, posture, seed, attempt, ...).
    #[arg(long = "where", value_parser = where_condition)]
    filter: Option<String>,
    /// Which metrics: `runs` (what an analyst asks first of imported runs: correct
    /// rate, posture shares, stale checks, tool calls, edits, tokens, cost, time) or
    /// `ladder` (the harness-ladder metrics of docs/metrics.md). Default: `runs` when
    /// every episode was imported from logs, else `ladder`.
    #[arg(long, value_enum)]
    preset: Option<Preset>,
    /// Every metric column, not only the headline ones (ladder).
    #[arg(long)]
    all: bool,
    /// Print the SQL instead of running it (with --ci: the per-cluster sums the
    /// bootstrap resamples).
    #[arg(long)]
    show_sql: bool,
    /// 95% task-cluster bootstrap intervals (docs/metrics.md §G), one row per entry and
    /// metric. With --all: every metric of sections A to F (shares, revision
    /// transitions, verifiers, verifier pairs, localisation included).
    #[arg(long)]
    ci: bool,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
    /// One field per line (for rows wider than the terminal); table format only.
    #[arg(long, short = 'x')]
    expanded: bool,
}

/// `metrics --preset`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Preset {
    Runs,
    Ladder,
}

// `epistore export`; exactly one of --table, --query, --all (the `what` group above).
#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// A table or view (`epistore sql "SHOW TABLES"` lists them).
    #[arg(long)]
    table: Option<String>,
    /// A read-only SQL query.
    #[arg(long)]
    query: Option<String>,
    /// Every table and view as a hive-partitioned Parquet dataset with a manifest.
    #[arg(long)]
    all: bool,
    #[arg(long, value_enum, default_value = "parquet")]
    format: ExportFormatArg,
    /// The file (or, partitioned and --all, the directory) to write.
    #[arg(long)]
    out: PathBuf,
    /// Comma-separated columns: one `column=value/` directory level each.
    /// --all defaults to model,harness_level (for the tables that have them).
    #[arg(long)]
    partition_by: Option<String>,
    /// No progress on standard error.
    #[arg(long, short)]
    quiet: bool,
}

// `epistore serve`.
#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Address to bind; port 0 picks a free port (printed).
    #[arg(long, default_value = "127.0.0.1:50051")]
    addr: std::net::SocketAddr,
    /// Token clients must present.
    #[arg(long, env = "EPISTORE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Memory all queries together may use, in MiB (operators spill or fail beyond it).
    #[arg(long, default_value_t = 2048)]
    memory_limit_mib: usize,
    /// Queries streaming at once; more wait their turn.
    #[arg(long, default_value_t = 4)]
    max_queries: usize,
    /// Time one query may take, in seconds (planning and streaming).
    #[arg(long, default_value_t = 300)]
    query_timeout_secs: u64,
}

// `epistore leaderboard` (with --with-episodes, a published folder: publish.rs).
#[derive(clap::Args)]
pub(crate) struct LeaderboardArgs {
    #[command(flatten)]
    entries: EntriesArgs,
    #[arg(long, value_enum, default_value = "md")]
    format: BoardFormat,
    /// Write here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override which way the metric is better.
    #[arg(long, value_enum)]
    better: Option<Better>,
    /// Holm-adjusted p-value under which an entry leaves the group of the one above.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
    #[command(flatten)]
    publish: PublishArgs,
}

// `epistore ui`.
#[derive(clap::Args)]
pub(crate) struct UiArgs {
    /// Address to bind; port 0 picks a free port (printed).
    #[arg(long, default_value = "127.0.0.1:8765")]
    addr: std::net::SocketAddr,
    /// Token a browser must present.
    #[arg(long, env = "EPISTORE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Requests answered at once (the others wait).
    #[arg(long, default_value_t = 8)]
    max_concurrent: usize,
    /// A host name the pages may be asked for by, besides the bound address and
    /// `localhost` (without a token, any other `Host` is refused: a page whose domain
    /// re-resolves to this machine must not read the store). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_host: Vec<String>,
}

// `epistore show` (`--format html`: publish.rs).
#[derive(clap::Args)]
pub(crate) struct ShowArgs {
    /// Episode id or a unique prefix of it (at least 4 hex digits).
    episode: String,
    #[arg(long, value_enum, default_value = "table")]
    format: ShowFormat,
    /// Write here instead of standard output (html).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Carry the source logs of an imported episode (artifacts/source/) in the
    /// page; left out by default, since transcripts can hold secrets.
    #[arg(long)]
    with_sources: bool,
}

// `epistore synth`: files under --out, or (--ingest) straight into the store.
#[derive(clap::Args)]
pub(crate) struct SynthArgs {
    #[arg(long)]
    episodes: usize,
    /// Write episodes FIRST..FIRST+EPISODES of the population: parts written this
    /// way (each to its own directory, or ingested) equal one run of all of them.
    #[arg(long, default_value_t = 0)]
    first: usize,
    /// Directory to write the packages to.
    #[arg(long, required_unless_present = "ingest", conflicts_with = "ingest")]
    out: Option<PathBuf>,
    /// Ingest the packages into --store instead of writing files: each is built in
    /// memory and ingested as if read from its files (for populations whose files
    /// would not fit on the disk). The limits on file and archive sizes, which guard
    /// reading untrusted input, are not applied to these generated packages.
    #[arg(long)]
    ingest: bool,
    /// Summary format with --ingest.
    #[arg(long, value_enum, default_value = "table")]
    format: OutputFormat,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 4)]
    models: usize,
    #[arg(long, default_value_t = 50)]
    tasks: usize,
    /// Scale of the large tool-output logs (1: 10-200 KB as in real runs; 0.05 for
    /// million-episode scale tests).
    #[arg(long, default_value_t = 1.0)]
    output_scale: f64,
    #[arg(long, short)]
    quiet: bool,
}

impl SynthArgs {
    /// The population these arguments ask for (the rest of the config at its defaults).
    fn config(&self) -> epistore_synth::Config {
        epistore_synth::Config {
            episodes: self.episodes,
            first: self.first,
            seed: self.seed,
            models: self.models,
            tasks: self.tasks,
            output_scale: self.output_scale,
            ..Default::default()
        }
    }
}

/// What `leaderboard` and `compare` rank: one metric, one entry per value of the keys.
#[derive(clap::Args, Clone, Debug)]
pub struct EntriesArgs {
    /// The metric (a column of cell_metrics, `label_share:LABEL`,
    /// `posture_share:POSTURE`, repair_rate, verifier_accuracy, phi, top1_all, ...).
    #[arg(long)]
    metric: String,
    /// Comma-separated keys, one entry per value: model, harness_level, task, cluster.
    #[arg(long, default_value = "model")]
    by: String,
    /// Only episodes matching this SQL condition on episode_facts columns.
    #[arg(long = "where", value_parser = where_condition)]
    filter: Option<String>,
    /// For a pass rate: count an attempt that errored, timed out or ran out of budget
    /// before it was judged as a failure (`fail`, the default: pass_rate_all) or leave
    /// it out (`exclude`: pass_rate). Printed on the board.
    #[arg(long, value_enum)]
    errors: Option<ErrorsArg>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum ErrorsArg {
    Fail,
    Exclude,
}

/// A leaderboard published with its episodes (`leaderboard --format html --out DIR
/// --with-episodes`).
#[derive(clap::Args, Clone, Debug)]
pub struct PublishArgs {
    /// Write a folder: the board (DIR/index.html), each entry's episode list
    /// (DIR/entries/) and a page per episode (DIR/episodes/), ready to publish.
    #[arg(long)]
    with_episodes: bool,
    /// Episode pages written at most (entries in rank order, each entry's episodes in
    /// order); the rest are listed without a page.
    #[arg(long, default_value_t = 2000, requires = "with_episodes")]
    max_episodes: usize,
    /// Carry imported episodes' source logs (artifacts/source/) in the pages.
    #[arg(long, requires = "with_episodes")]
    with_sources: bool,
    /// Trajectories hosted elsewhere: link every episode id to this URL, `{id}`
    /// standing for the id (https://example.org/runs/{id}.html, or a relative path);
    /// with --with-episodes no episode page is written.
    #[arg(long, value_name = "TEMPLATE", value_parser = episode_url_template)]
    episode_url: Option<String>,
}

/// `--episode-url`: a template with `{id}`, http(s) or relative (a `javascript:` or
/// `file:` link is refused: the board is published).
fn episode_url_template(text: &str) -> std::result::Result<String, String> {
    if !text.contains("{id}") {
        return Err("the template needs {id} where the episode id goes, e.g. https://example.org/runs/{id}.html".into());
    }
    if let Some((scheme, _)) = text.split_once(':') {
        let is_scheme = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if is_scheme && !["http", "https"].contains(&scheme.to_ascii_lowercase().as_str()) {
            return Err(format!("links may be http, https or relative, not {scheme}:"));
        }
    }
    Ok(text.to_string())
}

/// Bootstrap settings shared by `metrics --ci`, `leaderboard` and `compare`.
#[derive(clap::Args, Clone, Debug)]
pub struct BootstrapArgs {
    /// Bootstrap replicates B.
    #[arg(long, default_value_t = 2000)]
    replicates: usize,
    /// Seed of the bootstrap (reported beside the intervals).
    #[arg(long, default_value_t = epistore_stats::Bootstrap::default().seed)]
    seed: u64,
}

impl BootstrapArgs {
    pub fn settings(&self) -> epistore_stats::Bootstrap {
        epistore_stats::Bootstrap { replicates: self.replicates, seed: self.seed, ..Default::default() }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    Table,
    Csv,
    Json,
    Html,
}

impl ShowFormat {
    fn as_output(self) -> OutputFormat {
        match self {
            ShowFormat::Table | ShowFormat::Html => OutputFormat::Table,
            ShowFormat::Csv => OutputFormat::Csv,
            ShowFormat::Json => OutputFormat::Json,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BoardFormat {
    Md,
    Html,
    Json,
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    Arrow,
    Parquet,
    Csv,
    Jsonl,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Better {
    Higher,
    Lower,
}

/// Runs the command line on `args` (the first is the program name), as `main` does.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    // `epistore sql ... | head` should end quietly when `head` closes the pipe, as other
    // Unix tools do, not panic on the failed print. Not for `serve`, whose sockets must
    // never kill the process.
    #[cfg(unix)]
    if !matches!(cli.command, Command::Serve(_) | Command::Ui(_)) {
        // SAFETY: called once at start, before this thread starts any other.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let result = match cli.command {
        Command::Ingest(args) => commands::ingest(&cli.store, &args),
        Command::Import(args) => import::import(&cli.store, args),
        Command::Formats { format } => import::formats(format),
        Command::Watch(args) => watch::watch(&cli.store, args),
        Command::Sql(args) => commands::sql(&cli.store, &args),
        Command::Search(args) => commands::search(&cli.store, &args),
        Command::Metrics(args) if args.ci => commands::metric_intervals(&cli.store, &args),
        Command::Metrics(args) => commands::metrics(&cli.store, &args),
        Command::Export(args) => commands::export(&cli.store, &args),
        Command::Serve(args) => commands::serve(&cli.store, &args),
        Command::Leaderboard(args) if args.publish.with_episodes => publish::publish_board(&cli.store, &args),
        Command::Leaderboard(args) => commands::leaderboard(&cli.store, &args),
        Command::Ui(args) => publish::ui(&cli.store, &args),
        Command::Compare { entries, bootstrap, format } => {
            let spec = commands::board_spec(&entries, &bootstrap, 0.05, None);
            commands::compare(&cli.store, &spec, format)
        }
        Command::Ls { format } => commands::ls(&cli.store, format),
        Command::Show(args) if args.format == ShowFormat::Html => publish::show_html(&cli.store, &args),
        Command::Show(args) => commands::show(&cli.store, &args),
        Command::Mcp(args) => commands::mcp(&cli.store, &args),
        Command::Collect(args) => collect::collect(&cli.store, &args),
        Command::Annotate(args) => annotate::annotate(&cli.store, &args),
        Command::Annotations(args) => annotate::annotations(&cli.store, &args),
        Command::ExportPackage { episode, dir } => commands::export_package(&cli.store, &episode, &dir),
        Command::Verify { format, repair } => commands::verify(&cli.store, format, repair),
        Command::Compact => commands::compact(&cli.store),
        Command::Migrate { format, quiet } => commands::migrate(&cli.store, format, quiet),
        // clap asks for exactly one of --out and --ingest.
        Command::Synth(args) => match &args.out {
            Some(out) => commands::synth(&args.config(), out, args.quiet),
            None => commands::synth_ingest(&args.config(), &cli.store, args.format, args.quiet),
        },
    };
    if epistore_store::full_repairs() > 0 {
        // Stores this build writes reopen after a crash from the allocator state saved
        // with each commit; a walk means the last commit came from an older build.
        eprintln!(
            "note: the store was left mid-write by a crash, and recovering it walked the whole file \
             (its last commit was written without quick repair, by an older build)"
        );
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", commands::describe(&e));
            ExitCode::from(2)
        }
    }
}

/// A `--where` condition, checked on its own so that a mistake is reported in the
/// user's text (clap prints it as an invalid value; exit 2).
fn where_condition(text: &str) -> std::result::Result<String, String> {
    epistore_sql::sql_text::check_filter(text).map(|()| text.to_string()).map_err(|e| e.to_string())
}
