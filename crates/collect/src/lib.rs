//! `epistore collect`: an OTLP/HTTP receiver for the telemetry coding agents export
//! (docs/importers.md §9.18). It has three jobs, one module each:
//!
//! 1. [`decode`]: a request's body, as sent (protobuf or JSON, gzip or not), decoded
//!    with the protocol's own definitions (`opentelemetry-proto`) into OTLP JSON.
//! 2. [`spool`]: each agent session's records appended to its own file, so memory holds
//!    counters, not events, and a stop loses nothing.
//! 3. Committing: a session idle for long enough (or finished, or the collector
//!    stopping) is handed to the [`Committer`] (the command line's import into the
//!    store), which reads the session file with the `*-otel` importers. A session that
//!    grows after its commit is committed again and supersedes its earlier episode.
//!
//! No store here: the committer is the one place that writes.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

pub mod decode;
mod grpc;
pub mod spool;

pub use decode::{Encoding, Signal};

/// One error type for the crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("serving: {0}")]
    Serve(std::io::Error),
    #[error("{0}: another collector is using this spool (give each its own --spool)")]
    SpoolInUse(PathBuf),
}

pub type Result<T> = std::result::Result<T, Error>;

/// What the collector is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// `Authorization: Bearer` token every request must carry, when set.
    pub token: Option<String>,
    /// Seconds without a record after which a session is committed.
    pub idle: Duration,
    /// Where the session files are kept.
    pub spool: PathBuf,
    /// The largest body, before and after decompression.
    pub max_body: usize,
    /// The most uncommitted spool bytes before sessions are committed early and
    /// senders are asked to retry.
    pub max_pending: u64,
    /// How often idle sessions are looked for.
    pub tick: Duration,
}

impl Config {
    pub fn new(spool: PathBuf) -> Config {
        Config {
            token: None,
            idle: Duration::from_secs(300),
            spool,
            max_body: 16 << 20,
            max_pending: 1 << 30,
            tick: Duration::from_millis(500),
        }
    }
}

/// What committing one session file did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// Episodes written (new or superseding).
    pub imported: u64,
    /// Of them, episodes that supersede an earlier one.
    pub superseding: u64,
    /// The file was stored already (nothing new since its last commit).
    pub already: u64,
    /// Why the file was refused, when it was (a session that names no model yet).
    pub refused: Vec<String>,
}

/// The store side: imports one session file. A refusal is a [`Committed`] with
/// reasons; an `Err` (the store busy, a disk error) is retried at the next tick.
pub trait Committer: Send + Sync + 'static {
    fn commit(&self, file: &Path) -> std::result::Result<Committed, String>;
}

/// The counts `GET /stats` answers with.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub refused_requests: AtomicU64,
    pub records: AtomicU64,
    pub unattributed: AtomicU64,
    pub spans: AtomicU64,
    pub metric_points: AtomicU64,
    pub commits: AtomicU64,
    pub episodes: AtomicU64,
    pub commit_errors: AtomicU64,
}

struct Inner {
    config: Config,
    committer: Box<dyn Committer>,
    spool: Mutex<spool::Spool>,
    stats: Stats,
    /// Wakes the commit loop early (a finished session, the pending cap reached).
    wake: tokio::sync::Notify,
    /// One commit at a time: the store has one writer.
    committing: Mutex<()>,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

/// The receiver; cheap to clone (the router's state).
#[derive(Clone)]
pub struct Collector {
    inner: Arc<Inner>,
}

impl Collector {
    /// A collector over `config.spool`; session files left there by an earlier run are
    /// taken up to be committed at the first tick.
    pub fn new(config: Config, committer: impl Committer, log: impl Fn(&str) + Send + Sync + 'static) -> Result<Self> {
        let spool = spool::Spool::open(&config.spool)?;
        Ok(Collector {
            inner: Arc::new(Inner {
                config,
                committer: Box::new(committer),
                spool: Mutex::new(spool),
                stats: Stats::default(),
                wake: tokio::sync::Notify::new(),
                committing: Mutex::new(()),
                log: Box::new(log),
            }),
        })
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The HTTP routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/logs", post(logs))
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .route("/stats", get(stats))
            // axum's own limit (2 MiB) would refuse bodies this collector takes.
            .layer(axum::extract::DefaultBodyLimit::max(self.inner.config.max_body))
            .with_state(self.clone())
    }

    /// Serves on `listener` until `shutdown` completes, committing idle sessions as it
    /// goes, then commits every session with uncommitted records.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        grpc: Option<tokio::net::TcpListener>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        // One stop for both transports.
        let (stopping, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stopping.send(true);
        });
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let grpc = grpc.map(|l| tokio::spawn(grpc::serve(self.clone(), l, stopped(stop_rx.clone()))));
        let stop = Arc::new(tokio::sync::Notify::new());
        let ticker = {
            let me = self.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(me.inner.config.tick) => {}
                        _ = me.inner.wake.notified() => {}
                        _ = stop.notified() => break,
                    }
                    let me2 = me.clone();
                    let _ = tokio::task::spawn_blocking(move || me2.commit_due(false)).await;
                }
            })
        };
        let served = axum::serve(listener, self.router()).with_graceful_shutdown(stopped(stop_rx)).await;
        if let Some(g) = grpc {
            match g.await {
                Ok(Err(e)) => (self.inner.log)(&format!("the gRPC receiver stopped: {e}")),
                Err(e) => (self.inner.log)(&format!("the gRPC receiver stopped: {e}")),
                Ok(Ok(())) => {}
            }
        }
        stop.notify_one();
        let _ = ticker.await;
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || me.commit_due(true)).await;
        served.map_err(Error::Serve)
    }

    /// Commits the sessions that are due (all with uncommitted records when `all`).
    pub fn commit_due(&self, all: bool) {
        let _one = self.inner.committing.lock().unwrap_or_else(|e| e.into_inner());
        let due = {
            let spool = self.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
            spool.due(Instant::now(), self.inner.config.idle, self.inner.config.max_pending, all)
        };
        for file in due {
            self.commit_one(&file);
        }
    }

    fn commit_one(&self, file: &Path) {
        let snapshot = {
            let mut spool = self.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
            match spool.snapshot(file) {
                Ok(s) => s,
                Err(e) => {
                    (self.inner.log)(&format!("cannot snapshot {}: {e}", file.display()));
                    return;
                }
            }
        };
        let Some(taken) = snapshot else { return };
        let snapshot = taken.copy.clone();
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match self.inner.committer.commit(&snapshot) {
            Ok(done) => {
                self.inner.stats.commits.fetch_add(1, Ordering::Relaxed);
                let mut spool = self.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = spool.committed(file, &taken) {
                    (self.inner.log)(&format!("cannot mark {} committed: {e}", file.display()));
                }
                drop(spool);
                self.inner.stats.episodes.fetch_add(done.imported, Ordering::Relaxed);
                let what = if !done.refused.is_empty() {
                    format!("refused: {}", done.refused.join("; "))
                } else if done.imported > 0 {
                    format!(
                        "{} episode{}{}",
                        done.imported,
                        if done.imported == 1 { "" } else { "s" },
                        if done.superseding > 0 { " (superseding its earlier commit)" } else { "" }
                    )
                } else {
                    "nothing new".to_string()
                };
                (self.inner.log)(&format!("committed {name}: {what}"));
            }
            Err(e) => {
                self.inner.stats.commit_errors.fetch_add(1, Ordering::Relaxed);
                (self.inner.log)(&format!("commit of {name} failed (retried at the next tick): {e}"));
                let mut spool = self.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
                spool.uncommit(file, &taken);
            }
        }
        let _ = std::fs::remove_file(&snapshot);
    }

    fn authorised(&self, headers: &HeaderMap) -> bool {
        self.token_ok(headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()))
    }

    /// Checks and decodes a request's body, or the status and message that refuse it.
    fn accept(
        &self,
        signal: Signal,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> std::result::Result<(Encoding, Value), (StatusCode, String)> {
        self.inner.stats.requests.fetch_add(1, Ordering::Relaxed);
        let refuse = |status: StatusCode, message: String| {
            self.inner.stats.refused_requests.fetch_add(1, Ordering::Relaxed);
            (status, message)
        };
        if !self.authorised(headers) {
            return Err(refuse(StatusCode::UNAUTHORIZED, "a missing or wrong bearer token".into()));
        }
        let header_str = |name| headers.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
        let encoding = match decode::Encoding::of(header_str(header::CONTENT_TYPE)) {
            Some(e) => e,
            None => {
                return Err(refuse(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!(
                        "content type {:?}: OTLP/HTTP is application/x-protobuf or application/json",
                        header_str(header::CONTENT_TYPE).unwrap_or("(none)")
                    ),
                ))
            }
        };
        let raw = match decode::decompress(header_str(header::CONTENT_ENCODING), body, self.inner.config.max_body) {
            Ok(raw) => raw,
            Err(decode::Refused::TooLarge(m)) => return Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, m)),
            Err(decode::Refused::Unsupported(m)) => return Err(refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, m)),
            Err(decode::Refused::Malformed(m)) => return Err(refuse(StatusCode::BAD_REQUEST, m)),
        };
        match decode::decode(signal, encoding, &raw) {
            Ok(v) => Ok((encoding, v)),
            Err(m) => Err(refuse(StatusCode::BAD_REQUEST, m)),
        }
    }
}

/// Why decoded records were not taken.
pub(crate) enum Untaken {
    /// Over the pending cap: the oldest sessions are being committed; retry shortly.
    Busy,
    /// The session file could not be written.
    Failed(String),
}

impl Collector {
    /// Takes a decoded logs request (OTLP JSON), whichever transport brought it: its
    /// records cut by session and appended to the session files.
    pub(crate) async fn take_logs(&self, request: Value) -> std::result::Result<(), Untaken> {
        let split = spool::split(&request);
        let me = self.clone();
        let written = tokio::task::spawn_blocking(move || {
            let mut spool = me.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
            if spool.pending() > me.inner.config.max_pending {
                return Err(Untaken::Busy);
            }
            // Counted once taken: a retried request is not counted twice.
            me.inner.stats.records.fetch_add(split.records, Ordering::Relaxed);
            me.inner.stats.unattributed.fetch_add(split.unattributed, Ordering::Relaxed);
            spool.append(split.sessions).map_err(|e| Untaken::Failed(format!("cannot write the session file: {e}")))
        })
        .await
        .map_err(|e| Untaken::Failed(e.to_string()))?;
        match written {
            Ok(finished) => {
                if finished {
                    self.inner.wake.notify_one();
                }
                Ok(())
            }
            Err(e) => {
                // Over the cap, the commit loop starts on the oldest sessions now.
                self.inner.wake.notify_one();
                Err(e)
            }
        }
    }

    /// Counts a decoded traces or metrics request (neither is stored).
    pub(crate) fn count(&self, signal: Signal, request: &Value) {
        let (counter, path) = match signal {
            Signal::Traces => (&self.inner.stats.spans, ["resourceSpans", "scopeSpans", "spans"]),
            Signal::Metrics => (&self.inner.stats.metric_points, ["resourceMetrics", "scopeMetrics", "metrics"]),
            Signal::Logs => return,
        };
        counter.fetch_add(decode::count(request, &path), Ordering::Relaxed);
    }

    /// Whether a bearer token given as `authorization` is the one required.
    pub(crate) fn token_ok(&self, authorization: Option<&str>) -> bool {
        let Some(token) = &self.inner.config.token else { return true };
        let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
        // Compared as hashes: the time taken says nothing about the token.
        blake3::hash(given.as_bytes()) == blake3::hash(token.as_bytes())
    }
}

/// A refusal: the status and a message saying what failed.
fn refusal(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"code": status.as_u16(), "message": message}).to_string(),
    )
        .into_response()
}

/// The success answer, in the request's encoding (an empty `Export…ServiceResponse`).
fn success(encoding: Encoding) -> Response {
    match encoding {
        Encoding::Json => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from("{}")).into_response()
        }
        Encoding::Protobuf => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-protobuf")], Body::from(Vec::new())).into_response()
        }
    }
}

async fn logs(State(c): State<Collector>, headers: HeaderMap, body: Bytes) -> Response {
    let (encoding, request) = match c.accept(Signal::Logs, &headers, &body) {
        Ok(ok) => ok,
        Err((status, why)) => return refusal(status, &why),
    };
    match c.take_logs(request).await {
        Ok(()) => success(encoding),
        Err(Untaken::Busy) => {
            let mut r = refusal(StatusCode::SERVICE_UNAVAILABLE, "the collector is committing sessions: retry shortly");
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
            r
        }
        Err(Untaken::Failed(why)) => refusal(StatusCode::INTERNAL_SERVER_ERROR, &why),
    }
}

async fn traces(State(c): State<Collector>, headers: HeaderMap, body: Bytes) -> Response {
    counted(c, Signal::Traces, headers, body)
}

async fn metrics(State(c): State<Collector>, headers: HeaderMap, body: Bytes) -> Response {
    counted(c, Signal::Metrics, headers, body)
}

fn counted(c: Collector, signal: Signal, headers: HeaderMap, body: Bytes) -> Response {
    match c.accept(signal, &headers, &body) {
        Ok((encoding, request)) => {
            c.count(signal, &request);
            success(encoding)
        }
        Err((status, why)) => refusal(status, &why),
    }
}

async fn stats(State(c): State<Collector>, headers: HeaderMap) -> Response {
    if !c.authorised(&headers) {
        return refusal(StatusCode::UNAUTHORIZED, "a missing or wrong bearer token");
    }
    let s = &c.inner.stats;
    let (open, pending) = {
        let spool = c.inner.spool.lock().unwrap_or_else(|e| e.into_inner());
        (spool.open_sessions(), spool.pending())
    };
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let body = json!({
        "requests": n(&s.requests), "refused_requests": n(&s.refused_requests), "records": n(&s.records),
        "unattributed_records": n(&s.unattributed), "spans": n(&s.spans), "metric_points": n(&s.metric_points),
        "commits": n(&s.commits), "episodes": n(&s.episodes), "commit_errors": n(&s.commit_errors),
        "sessions_uncommitted": open, "pending_bytes": pending,
    });
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

#[cfg(test)]
mod tests;
