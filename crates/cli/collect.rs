//! `epistore collect`: the OTLP/HTTP receiver (crates/collect) with the store as its
//! committer. A session file is committed as `watch` commits a log: an import into the
//! store, opened for that commit only, so `import`, `annotate` and other writers get
//! their turn between commits.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use epistore_collect::{Collector, Committed, Committer, Config};
use epistore_store::Store;

use crate::import::{self, ImportArgs};

#[derive(clap::Args)]
pub struct CollectArgs {
    /// Where to listen. Any address but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:4318")]
    pub addr: SocketAddr,
    /// Also receive OTLP/gRPC here (Gemini CLI's default: 127.0.0.1:4317). Any address
    /// but loopback needs --token.
    #[arg(long, value_name = "ADDR")]
    pub grpc_addr: Option<SocketAddr>,
    /// Bearer token every request must carry (`Authorization: Bearer TOKEN`; agents:
    /// OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer TOKEN").
    #[arg(long, env = "EPISTORE_COLLECT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Seconds without a record after which a session is committed as an episode.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    pub idle: f64,
    /// Where each session's records wait for their commit (default: STORE/collect).
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Uncommitted spool bytes (MiB) past which the quietest sessions are committed
    /// early and senders are asked to retry.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub max_pending_mib: u64,
    /// Replace what looks like a secret in the episodes' source copies and records.
    #[arg(long)]
    pub redact: bool,
    /// Print nothing but the listening line.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Commits a session file through `epistore import`'s path.
struct StoreCommitter {
    store_dir: PathBuf,
    redact: bool,
}

impl Committer for StoreCommitter {
    fn commit(&self, file: &Path) -> std::result::Result<Committed, String> {
        let store = open_waiting(&self.store_dir).map_err(|e| format!("{e:#}"))?;
        let args = ImportArgs::for_watch(vec![file.to_path_buf()], None, self.redact);
        let summary = import::import_summary(Some(&store), &args).map_err(|e| format!("{e:#}"))?;
        drop(store);
        let total = |key: &str| -> u64 {
            summary["formats"].as_array().into_iter().flatten().filter_map(|f| f[key].as_u64()).sum()
        };
        let refused = summary["refused"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["reason"].as_str().unwrap_or("").to_string())
            .collect();
        Ok(Committed {
            imported: total("imported"),
            superseding: total("superseding"),
            already: total("already_present"),
            refused,
        })
    }
}

/// The store for writing, waiting a while for another writer to finish.
fn open_waiting(dir: &Path) -> Result<Store> {
    let start = Instant::now();
    loop {
        match Store::open_or_create(dir) {
            Err(epistore_store::Error::Busy(_)) if start.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(100));
            }
            other => return other.with_context(|| format!("opening the store at {}", dir.display())),
        }
    }
}

/// Ctrl-C or SIGTERM: either stops the collector, which then commits what it holds.
async fn stopped() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let term = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

pub fn collect(store_dir: &Path, args: &CollectArgs) -> Result<ExitCode> {
    use std::io::Write;
    let token = args.token.clone().filter(|t| !t.is_empty());
    epistore_server::check_exposure(args.addr, token.as_deref())?;
    if let Some(grpc) = args.grpc_addr {
        epistore_server::check_exposure(grpc, token.as_deref())?;
    }
    if !(args.idle.is_finite() && args.idle > 0.0) {
        anyhow::bail!("--idle must be a number of seconds above 0");
    }
    // The store exists (and is ours to write) before anything is accepted.
    drop(open_waiting(store_dir)?);
    let mut config = Config::new(args.spool.clone().unwrap_or_else(|| store_dir.join("collect")));
    config.token = token;
    config.idle = Duration::from_secs_f64(args.idle);
    config.max_pending = args.max_pending_mib << 20;
    config.tick = config.idle.min(Duration::from_millis(500));
    let quiet = args.quiet;
    let committer = StoreCommitter { store_dir: store_dir.to_path_buf(), redact: args.redact };
    let collector = Collector::new(config, committer, move |line| {
        if !quiet {
            eprintln!("{}: {}", chrono::Utc::now().format("%H:%M:%S"), epistore_sql::printable(line));
        }
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let listener =
            tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding {}", args.addr))?;
        let local = listener.local_addr()?;
        let grpc = match args.grpc_addr {
            Some(a) => Some(tokio::net::TcpListener::bind(a).await.with_context(|| format!("binding {a}"))?),
            None => None,
        };
        // Scripts wait for these lines (and read the ports from them when asked for 0):
        // the gRPC one first, so the HTTP one says both are ready.
        if let Some(g) = &grpc {
            println!("listening on grpc://{}", g.local_addr()?);
        }
        println!("listening on http://{local}");
        let _ = std::io::stdout().flush();
        collector.serve(listener, grpc, stopped()).await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
