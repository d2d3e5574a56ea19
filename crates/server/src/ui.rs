//! `epistore ui`: the viewer's pages over a store, rendered on request by a local,
//! read-only web server.
//!
//! - `/`: the index (headline metrics, cells, the leaderboards on offer);
//! - `/leaderboards/{metric}?by=KEYS&where=COND`: a leaderboard as `leaderboard --format
//!   html` draws it, each entry linked to `/leaderboards/{metric}/entries/{n}?...`;
//! - `/cell?model=&harness_level=&task=`: redirects to `/episodes` with those filters;
//! - `/episodes?model=&...&q=`: every episode matching field filters and a full-text
//!   query, the filters in the address;
//! - `/compare?a=ID&b=ID`: two episodes side by side, aligned step by step;
//! - `/episodes/{id}`: an episode page; `/episodes/{id}/files/{path}`: one file of its
//!   package, byte for byte.
//!
//! Read-only by construction: GET and HEAD only, every route reads a snapshot, and a
//! file is served only when its path is one of the episode's own files (so no path,
//! encoded or not, reaches the file system). Loopback only unless a token is set, as
//! `serve`; with a token, a browser opens `/?token=TOKEN` once and keeps a cookie.
//! Requests beyond `max_concurrent` wait their turn, so fifty at once cost what
//! `max_concurrent` cost.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Path, Query, RawQuery, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use epistore_leaderboard::{BoardLinks, Leaderboard, Spec};
use epistore_package::hex;
use epistore_sql::episode_list::{EpisodeQuery, Known};
use epistore_sql::{format_batches, Engine, Format};
use epistore_store::Store;
use epistore_view::{
    compare_doc, encode, episode_doc, index_doc, list_doc, list_rows, message_doc, render, FilePolicy, Links,
};
use serde_json::{json, Value};
use tokio::sync::{Mutex, Semaphore};

use crate::{same_secret, Result};

/// Settings of the viewer's server.
#[derive(Clone, Debug)]
pub struct UiSettings {
    pub addr: SocketAddr,
    pub token: Option<String>,
    /// Requests rendered at once; the others wait.
    pub max_concurrent: usize,
    /// Host names accepted besides the bound address and the loopback names, when
    /// there is no token (see [`host_allowed`]).
    pub allowed_hosts: Vec<String>,
}

/// Groups (model, level, source format) listed on the index page, at most.
const INDEX_GROUPS: usize = 2_000;
/// Leaderboards kept built (each is a bootstrap over the store).
const BOARD_CACHE: usize = 16;
const TOKEN_COOKIE: &str = "epistore_ui_token";
struct Ui {
    store: Arc<Store>,
    settings: UiSettings,
    session: Mutex<Option<Arc<Engine>>>,
    boards: Mutex<HashMap<String, Arc<Leaderboard>>>,
    /// The episode list's filter values, for the snapshot they were read at (they do
    /// not depend on the filters).
    facets: Mutex<Option<(epistore_store::Generation, Arc<Vec<Value>>)>>,
    permits: Semaphore,
}

/// What a handler answers when it cannot give the page: a status and a page that
/// says why.
struct Failure(StatusCode, String);

/// Anything else that fails is the server's fault (500), with its message.
macro_rules! internal {
    ($($error:ty),*) => {$(
        impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            }
        }
    )*};
}
internal!(
    epistore_sql::Error,
    epistore_store::Error,
    epistore_leaderboard::Error,
    serde_json::Error,
    tokio::task::JoinError
);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let title = match self.0 {
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::BAD_REQUEST => "Bad request",
            _ => "Error",
        };
        page(self.0, &message_doc(title, &self.1, &Links::Server))
    }
}

type Answer = std::result::Result<Response, Failure>;

fn not_found(what: impl Into<String>) -> Failure {
    Failure(StatusCode::NOT_FOUND, what.into())
}

fn bad_request(what: impl Into<String>) -> Failure {
    Failure(StatusCode::BAD_REQUEST, what.into())
}

/// An HTML page from its data, with the view's policy for it: an episode page (and
/// anything its data might smuggle into it) can reach no network; a live page only
/// this server.
fn page(status: StatusCode, data: &Value) -> Response {
    let csp = epistore_view::policy(data);
    match render(data) {
        Ok(html) => (
            status,
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CONTENT_SECURITY_POLICY, csp),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            html,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A page's data as JSON (`?format=json`), for a live page to render itself again.
fn data_json(data: &Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")], data.to_string())
        .into_response()
}

/// A live page: its data with the snapshot it was read at, as HTML or (`format=json`)
/// as JSON.
fn live_page(mut data: Value, snapshot: u64, q: &BTreeMap<String, String>) -> Response {
    data["live"] = json!({"snapshot": snapshot, "poll": "/api/snapshot", "every_ms": LIVE_POLL_MS});
    match q.get("format").map(String::as_str) {
        Some("json") => data_json(&data),
        _ => page(StatusCode::OK, &data),
    }
}

/// How often a live page asks for the snapshot.
const LIVE_POLL_MS: u64 = 2_000;

/// `GET /api/snapshot`: the latest committed ingest (a live page polls it; one read).
async fn snapshot(State(ui): State<Arc<Ui>>) -> Answer {
    let store = ui.store.clone();
    let seq = blocking(move || Ok(store.snapshot()?.ingest_seq()?)).await?;
    Ok(data_json(&json!({"snapshot": seq})))
}

fn html(html: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, epistore_view::PAGE_POLICY),
        ],
        html,
    )
        .into_response()
}

impl Ui {
    /// The SQL session for the latest committed snapshot (rebuilt after an ingest or an
    /// annotation).
    async fn engine(&self) -> std::result::Result<Arc<Engine>, Failure> {
        let store = self.store.clone();
        let seq = blocking(move || Ok(store.snapshot()?.generation()?)).await?;
        let mut session = self.session.lock().await;
        if let Some(engine) = session.as_ref().filter(|e| e.generation == seq) {
            return Ok(engine.clone());
        }
        let engine = Arc::new(Engine::open(&self.store).await?);
        *session = Some(engine.clone());
        Ok(engine)
    }

    async fn query(&self, sql: &str) -> std::result::Result<Vec<Value>, Failure> {
        let batches = self.engine().await?.query(sql).await?;
        match serde_json::from_str(&format_batches(&batches, Format::Json)?)? {
            Value::Array(rows) => Ok(rows),
            _ => Err(Failure(StatusCode::INTERNAL_SERVER_ERROR, "query result is not a list".into())),
        }
    }

    /// The episode list's filter values, read once per snapshot and annotation count.
    async fn facets(&self) -> std::result::Result<Arc<Vec<Value>>, Failure> {
        let seq = self.engine().await?.generation;
        if let Some((at, facets)) = self.facets.lock().await.as_ref() {
            if *at == seq {
                return Ok(facets.clone());
            }
        }
        let facets = Arc::new(self.query(&epistore_sql::episode_list::facets_sql(FACET_VALUES)).await?);
        *self.facets.lock().await = Some((seq, facets.clone()));
        Ok(facets)
    }

    /// A leaderboard, built once per (metric, keys, filter, snapshot).
    async fn board(
        &self,
        metric: &str,
        by: &[String],
        filter: Option<String>,
    ) -> std::result::Result<Arc<Leaderboard>, Failure> {
        if let Some(f) = &filter {
            epistore_sql::sql_text::check_filter(f).map_err(|e| bad_request(format!("?where=: {e}")))?;
        }
        let engine = self.engine().await?;
        let key = format!(
            "{metric}\u{0}{}\u{0}{}\u{0}{:?}",
            by.join(","),
            filter.as_deref().unwrap_or(""),
            // With the annotation count: a `where=` may select by annotations.
            engine.generation
        );
        if let Some(board) = self.boards.lock().await.get(&key) {
            return Ok(board.clone());
        }
        let spec = Spec {
            metric: metric.to_string(),
            by: by.to_vec(),
            filter,
            bootstrap: Default::default(),
            alpha: 0.05,
            direction: None,
            errors: None,
            generated_by: format!("epistore {}", env!("CARGO_PKG_VERSION")),
        };
        let board = Arc::new(epistore_leaderboard::build(&engine, &spec).await.map_err(|e| match e {
            epistore_leaderboard::Error::Sql(epistore_sql::Error::Usage(m)) | epistore_leaderboard::Error::Usage(m) => {
                bad_request(m)
            }
            // A `where=` that does not plan (unknown column, bad syntax) is the request's fault.
            epistore_leaderboard::Error::Sql(epistore_sql::Error::DataFusion(e)) if planning_error(&e) => {
                bad_request(e.to_string())
            }
            e => Failure::from(e),
        })?);
        let mut boards = self.boards.lock().await;
        if boards.len() >= BOARD_CACHE {
            boards.clear();
        }
        boards.insert(key, board.clone());
        Ok(board)
    }
}

/// Whether DataFusion refused a statement while reading or planning it (the
/// statement's fault), rather than failing to run it.
fn planning_error(e: &datafusion::error::DataFusionError) -> bool {
    use datafusion::error::DataFusionError as E;
    matches!(e.find_root(), E::SQL(..) | E::Plan(_) | E::SchemaError(..) | E::NotImplemented(_))
}

/// Runs store reads (which block) off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::result::Result<T, Failure> + Send + 'static,
) -> std::result::Result<T, Failure> {
    tokio::task::spawn_blocking(f).await.map_err(Failure::from)?
}

impl From<epistore_view::Error> for Failure {
    fn from(e: epistore_view::Error) -> Self {
        match e {
            epistore_view::Error::NoEpisode(id) => not_found(format!("no episode {id} in this store")),
            e => Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

async fn index(State(ui): State<Arc<Ui>>, Query(q): Query<BTreeMap<String, String>>) -> Answer {
    let keys = ["model", "harness_level"];
    let headline = ui.query(&Engine::headline_sql(&keys, None)?).await?;
    let columns: Vec<&str> = keys.iter().copied().chain(epistore_sql::HEADLINE.iter().copied()).collect();
    let rows: Vec<Value> =
        headline.iter().map(|r| Value::Array(columns.iter().map(|c| r[*c].clone()).collect())).collect();
    // The index stays small at any number of cells: one row per model, level and source
    // format (imported sessions are a cell each), linked to the list of its episodes.
    let groups = ui
        .query(&format!(
            "SELECT model, harness_level, source_format, count(DISTINCT task) AS tasks, count(*) AS episodes \
             FROM episodes GROUP BY model, harness_level, source_format \
             ORDER BY model, harness_level, source_format NULLS FIRST LIMIT {}",
            INDEX_GROUPS + 1
        ))
        .await?;
    let truncated = groups.len() > INDEX_GROUPS;
    let groups: Vec<Value> = groups
        .into_iter()
        .take(INDEX_GROUPS)
        .map(|mut g| {
            g["href"] = json!(list_link(&g, &["model", "harness_level", "source_format"]));
            g
        })
        .collect();
    let headline_hrefs: Vec<Value> =
        headline.iter().map(|r| json!(list_link(r, &["model", "harness_level"]))).collect();
    let counts = ui
        .query("SELECT count(*) AS n, count(DISTINCT concat_ws('\u{1f}', model, harness_level, task)) AS cells FROM episodes")
        .await?;
    let episodes = counts[0]["n"].as_i64().unwrap_or(0);
    let cells = counts[0]["cells"].as_i64().unwrap_or(0);
    let boards: Vec<Value> = epistore_sql::intervals::families()
        .iter()
        .flat_map(|f| f.metrics.iter().map(move |m| (f, m)))
        .map(|(f, m)| {
            json!({
                "family": f.view,
                "metric": m.name,
                "description": m.description,
                "href": format!("/leaderboards/{}?by=model", encode(&m.name)),
            })
        })
        .collect();
    let snapshot = ui.engine().await?.snapshot_seq;
    let store = json!({
        "episodes": episodes,
        "cells": cells,
        "groups_truncated": truncated,
        "list_href": Links::Server.episodes(&[]),
        "snapshot": snapshot,
        // The folder's name only: a page may be shared, the machine's paths are not.
        "dir": ui.store.dir().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
    });
    let headline = json!({"columns": columns, "rows": rows, "hrefs": headline_hrefs});
    Ok(live_page(index_doc(store, headline, groups, boards), snapshot, &q))
}

/// The episode list of a query result's row: filtered by the row's values of `keys`
/// (a NULL value is the list's `null`, "not recorded").
fn list_link(row: &Value, keys: &[&str]) -> Option<String> {
    let filters: Vec<(&str, &str)> = keys.iter().map(|k| (*k, row[*k].as_str().unwrap_or("null"))).collect();
    Links::Server.episodes(&filters)
}

/// `by` and `where` of a leaderboard's query string.
fn board_query(q: &BTreeMap<String, String>) -> (Vec<String>, Option<String>, String) {
    let by: Vec<String> = q
        .get("by")
        .map(String::as_str)
        .unwrap_or("model")
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string)
        .collect();
    let filter = q.get("where").filter(|w| !w.trim().is_empty()).cloned();
    let mut text = format!("by={}", encode(&by.join(",")));
    if let Some(f) = &filter {
        text.push_str(&format!("&where={}", encode(f)));
    }
    (by, filter, text)
}

async fn leaderboard(
    State(ui): State<Arc<Ui>>,
    Path(metric): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Answer {
    let (by, filter, query) = board_query(&q);
    let board = ui.board(&metric, &by, filter).await?;
    let mut board = (*board).clone();
    board.links = Some(BoardLinks {
        home: Some("/".into()),
        entries: (0..board.entries.len())
            .map(|i| Some(format!("/leaderboards/{}/entries/{i}?{query}", encode(&metric))))
            .collect(),
        episode: "/episodes/{id}".into(),
        linked: None,
        unlinked: None,
    });
    Ok(html(epistore_leaderboard::to_html(&board)?))
}

async fn entry(
    State(ui): State<Arc<Ui>>,
    Path((metric, n)): Path<(String, usize)>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Answer {
    let (by, filter, query) = board_query(&q);
    let board = ui.board(&metric, &by, filter).await?;
    let store = ui.store.clone();
    let board_href = format!("/leaderboards/{}?{query}", encode(&metric));
    let doc = blocking(move || {
        let snapshot = store.snapshot()?;
        epistore_leaderboard::entry_list(&board, n, &snapshot, &Links::Server, Some(board_href))?
            .ok_or_else(|| not_found(format!("the board has no entry {n}")))
    })
    .await?;
    Ok(page(StatusCode::OK, &doc))
}

/// `/cell?model=&harness_level=&task=`, the address a cell's list had: the store's list
/// with the same filters now.
async fn cell(RawQuery(q): RawQuery) -> Redirect {
    Redirect::permanent(&format!("/episodes?{}", q.unwrap_or_default()))
}

/// Rows an episode list shows by default, and at most (`?limit=`).
const LIST_ROWS: usize = 5_000;
const LIST_ROWS_MAX: usize = 20_000;
/// Values offered per filter field.
const FACET_VALUES: usize = 500;
/// The fields of `/episodes` that filter, in the order a page names them.
const LIST_FIELDS: [&str; 10] =
    ["model", "harness_level", "task", "source_format", "posture", "label", "annotation", "claim", "correct", "q"];

/// The filters given in `/episodes?...`, in [`LIST_FIELDS`] order: an empty value is no
/// filter.
fn given_filters(q: &BTreeMap<String, String>) -> Vec<(&'static str, String)> {
    LIST_FIELDS
        .iter()
        .filter_map(|k| q.get(*k).map(|v| v.trim()).filter(|v| !v.is_empty()).map(|v| (*k, v.to_string())))
        .collect()
}

/// The filters of `/episodes?...`: `null` is "not recorded" for the fields that may be;
/// `claim` and `correct` take `yes`, `no` or `null`.
fn episode_query(given: &[(&str, String)]) -> std::result::Result<EpisodeQuery, Failure> {
    let get = |k: &str| given.iter().find(|(f, _)| *f == k).map(|(_, v)| v.clone());
    let known = |k: &str| get(k).map(|v| if v == "null" { Known::NotRecorded } else { Known::Is(v) });
    let known_bool = |k: &str| -> std::result::Result<Option<Known<bool>>, Failure> {
        match get(k).as_deref() {
            None => Ok(None),
            Some("yes" | "true") => Ok(Some(Known::Is(true))),
            Some("no" | "false") => Ok(Some(Known::Is(false))),
            Some("null") => Ok(Some(Known::NotRecorded)),
            Some(other) => Err(bad_request(format!("?{k}={other}: give yes, no or null"))),
        }
    };
    Ok(EpisodeQuery {
        model: get("model"),
        harness_level: get("harness_level"),
        task: get("task"),
        source_format: known("source_format"),
        posture: get("posture"),
        label: known("label"),
        annotation: get("annotation"),
        claim: known_bool("claim")?,
        correct: known_bool("correct")?,
        text: get("q"),
    })
}

/// `/episodes?model=&harness_level=&task=&source_format=&posture=&label=&claim=&correct=&q=&limit=`:
/// every episode of the store that matches, in one list whose address is its filters.
/// A full-text query that does not parse is said on the page, with no rows.
async fn episodes(State(ui): State<Arc<Ui>>, Query(q): Query<BTreeMap<String, String>>) -> Answer {
    let given = given_filters(&q);
    let query = episode_query(&given)?;
    let limit = match q.get("limit").map(|l| l.trim()).filter(|l| !l.is_empty()) {
        None => LIST_ROWS,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=LIST_ROWS_MAX).contains(n))
            .ok_or_else(|| bad_request(format!("?limit={l}: give a number from 1 to {LIST_ROWS_MAX}")))?,
    };
    let refused = query.text.as_deref().and_then(|t| epistore_sql::search::check_query(t).err());
    let facets = ui.facets().await?;
    // The rows and how many match, at once.
    let (rows, total) = match refused {
        Some(_) => (vec![], 0),
        None => {
            let (rows_sql, count_sql) = (query.rows_sql(limit + 1), query.count_sql());
            let (rows, count) = tokio::join!(ui.query(&rows_sql), ui.query(&count_sql));
            (rows?, count?[0]["n"].as_u64().unwrap_or(0))
        }
    };
    let error = refused.map(|e| e.to_string());
    let truncated = rows.len() > limit;
    // Up to 20,000 rows: sent as a table (the column names once, a list of values per
    // row), which halves the page a browser parses.
    let columns: Vec<String> = rows
        .first()
        .and_then(Value::as_object)
        .map(|r| r.keys().cloned().chain(["href".to_string()]).collect())
        .unwrap_or_default();
    let values: Vec<Value> = rows
        .into_iter()
        .take(limit)
        .map(|mut r| {
            let href = json!(r["id"].as_str().and_then(|id| Links::Server.episode(id)));
            let mut row: Vec<Value> = columns.iter().filter(|c| *c != "href").map(|c| r[c.as_str()].take()).collect();
            row.push(href);
            Value::Array(row)
        })
        .collect();
    let title = "Episodes";
    let subtitle = if given.is_empty() {
        "Every episode of the store (superseded imports left out, as SQL does).".to_string()
    } else {
        format!(
            "Episodes where {}.",
            given
                .iter()
                .map(|(k, v)| if *k == "q" { format!("the run's content matches {v:?}") } else { format!("{k} = {v}") })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let nav = Links::Server.nav(&[(title, None)]);
    let mut doc = list_doc(title, Some(&subtitle), nav, Vec::new(), truncated);
    doc.as_object_mut().expect("a page is an object").remove("rows");
    // Built by moving the rows in (`json!` would copy all of them).
    let table: serde_json::Map<String, Value> =
        [("columns".to_string(), Value::from(columns)), ("rows".to_string(), Value::Array(values))]
            .into_iter()
            .collect();
    doc["table"] = Value::Object(table);
    doc["counts"]["episodes"] = json!(total);
    let mut facet_values = serde_json::Map::new();
    for f in facets.iter() {
        let field = f["field"].as_str().unwrap_or_default().to_string();
        let entry = facet_values.entry(field).or_insert_with(|| json!([]));
        entry.as_array_mut().unwrap().push(json!({"value": f["value"], "episodes": f["episodes"]}));
    }
    doc["query"] = json!({
        "action": Links::Server.episodes(&[]),
        "given": given.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "facets": facet_values,
        "error": error,
        "limit": limit,
    });
    let seq = ui.engine().await?.snapshot_seq;
    Ok(live_page(doc, seq, &q))
}

/// `/compare?a=ID&b=ID` (ids or unique prefixes): two episodes side by side.
async fn compare(State(ui): State<Arc<Ui>>, Query(q): Query<BTreeMap<String, String>>) -> Answer {
    let id = |k: &str| q.get(k).cloned().ok_or_else(|| bad_request(format!("a comparison needs `{k}`")));
    let (a, b) = (id("a")?, id("b")?);
    let store = ui.store.clone();
    let doc = blocking(move || {
        let snapshot = store.snapshot()?;
        let resolve = |text: &str| match snapshot.resolve(text) {
            Ok(id) => Ok(id),
            Err(epistore_store::Error::Ambiguous { prefix, candidates, .. }) => Err(bad_request(format!(
                "`{prefix}` matches {} episodes ({}, ...): give more of the id",
                candidates.len(),
                candidates.iter().take(3).map(|c| &c[..12.min(c.len())]).collect::<Vec<_>>().join(", ")
            ))),
            Err(_) => Err(not_found(format!("no episode {text} in this store"))),
        };
        let (a, b) = (resolve(&a)?, resolve(&b)?);
        Ok(compare_doc(&snapshot, &a, &b, &Links::Server, FilePolicy::SERVER)?)
    })
    .await?;
    Ok(page(StatusCode::OK, &doc))
}

async fn episode(State(ui): State<Arc<Ui>>, Path(id): Path<String>) -> Answer {
    let store = ui.store.clone();
    let doc = blocking(move || {
        let snapshot = store.snapshot()?;
        match snapshot.resolve(&id) {
            Ok(id) => Ok(episode_doc(&snapshot, &id, &Links::Server, FilePolicy::SERVER)?),
            // An ambiguous prefix lists the episodes it matches, as the CLI names them.
            Err(epistore_store::Error::Ambiguous { prefix, candidates, more }) => {
                let ids: Vec<_> = candidates.iter().filter_map(|c| epistore_package::parse_hex(c)).collect();
                let rows = list_rows(&snapshot, &ids, &Links::Server)?;
                let title = format!("Episodes whose id starts with {prefix}");
                let subtitle = format!(
                    "`{prefix}` matches {}{} episodes: choose one, or give more of the id.",
                    if more { "more than " } else { "" },
                    candidates.len()
                );
                let nav = Links::Server.nav(&[(&title, None)]);
                Ok(list_doc(&title, Some(&subtitle), nav, rows, more))
            }
            Err(_) => Err(not_found(format!("no episode {id} in this store"))),
        }
    })
    .await?;
    Ok(page(StatusCode::OK, &doc))
}

/// One file of an episode's package. Only paths the episode has are served; its bytes
/// go out as text or as a download, never as a page that could run.
async fn file(State(ui): State<Arc<Ui>>, Path((id, path)): Path<(String, String)>) -> Answer {
    let store = ui.store.clone();
    let bytes = blocking(move || {
        let snapshot = store.snapshot()?;
        let id = snapshot.resolve(&id).map_err(|_| not_found(format!("no episode {id} in this store")))?;
        let record = snapshot.episode(&id)?.ok_or_else(|| not_found(format!("no episode {}", hex(&id))))?;
        let entry = record
            .files
            .iter()
            .find(|f| f.path == path)
            .ok_or_else(|| not_found(format!("episode {} has no file {path}", hex(&id))))?;
        Ok(snapshot.file(&record, entry)?)
    })
    .await?;
    let kind =
        if std::str::from_utf8(&bytes).is_ok() { "text/plain; charset=utf-8" } else { "application/octet-stream" };
    Ok((
        [
            (header::CONTENT_TYPE, kind),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; sandbox"),
        ],
        bytes,
    )
        .into_response())
}

async fn fallback() -> Failure {
    not_found("no such page")
}

/// GET and HEAD only: nothing here changes anything.
async fn read_only(request: Request, next: Next) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response =
            (StatusCode::METHOD_NOT_ALLOWED, format!("{} refused: this server is read-only\n", request.method()))
                .into_response();
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    next.run(request).await
}

/// With a token: `Authorization: Bearer TOKEN`, the cookie, or `?token=TOKEN` (which
/// sets the cookie, so a browser needs it once).
async fn authorise(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    let Some(token) = ui.settings.token.clone() else {
        return next.run(request).await;
    };
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same_secret(t, &token));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().strip_prefix(TOKEN_COOKIE).and_then(|c| c.strip_prefix('=')))
        .any(|t| same_secret(t, &token));
    let in_query = request
        .uri()
        .query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.strip_prefix("token="))
        .any(|t| same_secret(t, &token));
    if !(bearer || cookie || in_query) {
        return Failure(StatusCode::UNAUTHORIZED, "this server needs its token: open /?token=TOKEN once".into())
            .into_response();
    }
    let mut response = next.run(request).await;
    if in_query {
        if let Ok(v) = HeaderValue::from_str(&format!("{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response
}

/// At most `max_concurrent` requests are being answered; the rest queue.
async fn bounded(State(ui): State<Arc<Ui>>, request: Request, next: Next) -> Response {
    let Ok(_permit) = ui.permits.acquire().await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    next.run(request).await
}

/// Serves the viewer until `shutdown` completes; `ready` gets the bound address.
pub async fn serve_ui(
    store: Store,
    settings: UiSettings,
    ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (listener, local) = crate::bind(settings.addr, settings.token.as_deref()).await?;
    let ui = Arc::new(Ui {
        store: Arc::new(store),
        permits: Semaphore::new(settings.max_concurrent.max(1)),
        settings,
        session: Mutex::new(None),
        boards: Mutex::new(HashMap::new()),
        facets: Mutex::new(None),
    });
    // The first session now, so a broken store fails at start, not at the first page.
    ui.engine().await.map_err(|f| epistore_sql::Error::Usage(f.1))?;
    let acceptor = crate::connections::Acceptor::new(listener, crate::connections::MAX_CONNECTIONS);
    let app = Router::new()
        .route("/", get(index))
        .route("/api/snapshot", get(snapshot))
        .route("/leaderboards/{metric}", get(leaderboard))
        .route("/leaderboards/{metric}/entries/{n}", get(entry))
        .route("/cell", get(cell))
        .route("/episodes", get(episodes))
        .route("/compare", get(compare))
        .route("/episodes/{id}", get(episode))
        .route("/episodes/{id}/files/{*path}", get(file))
        .fallback(fallback)
        .layer(middleware::from_fn_with_state(ui.clone(), bounded))
        .layer(middleware::from_fn_with_state(ui.clone(), authorise))
        .layer(middleware::from_fn(read_only))
        .layer(middleware::from_fn_with_state((ui.clone(), local), allowed_host))
        .with_state(ui);
    ready(local);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let connection = tokio::select! {
            connection = acceptor.accept() => connection,
            () = &mut shutdown => return Ok(()),
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let (stream, slot) = connection.into_parts();
            // A client that has not sent its request head within the timeout (slowly,
            // a line at a time, or not at all) is closed.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(crate::connections::HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            drop(slot);
        });
    }
}

/// Without a token, a request must name this server by its bound address, a loopback
/// name or a name given with `--allow-host`: a page whose domain re-resolves to
/// 127.0.0.1 (DNS rebinding) sends its own name and is refused. With a token, the
/// token decides.
async fn allowed_host(State((ui, local)): State<(Arc<Ui>, SocketAddr)>, request: Request, next: Next) -> Response {
    if ui.settings.token.is_none() {
        let host = request.headers().get(header::HOST).map(|h| h.to_str().unwrap_or("\u{0}"));
        if let Some(host) = host.filter(|h| !host_allowed(h, local, &ui.settings.allowed_hosts)) {
            return Failure(
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this server answers to {local}, localhost and the names given with --allow-host, not {:?}",
                    host.chars().take(100).collect::<String>()
                ),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Whether a `Host` header names this server: its name (any port) is a loopback name,
/// the bound IP address, or one of `allowed`.
pub fn host_allowed(host: &str, local: SocketAddr, allowed: &[String]) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    }
    .to_ascii_lowercase();
    let name = name.trim_end_matches('.');
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip == local.ip())
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}
