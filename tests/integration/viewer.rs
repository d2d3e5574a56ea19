//! The episode viewer end to end: the data an episode page carries (revision bands,
//! checks current or stale, the four fields never collapsed into one "success"), the
//! same pages in headless Chromium, a published leaderboard folder navigated from the
//! board to an episode and back, and `epistore ui` as a read-only web server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::util::{copy_tree, dataset, minimal_package, repo_root, text, walk, write_package, TestStore};

/// The JSON a page embeds (`const DATA = ...;`).
fn page_data(html: &str) -> Value {
    let start = html.find("const DATA = ").expect("a page embeds its data") + "const DATA = ".len();
    let line = html[start..].lines().next().unwrap();
    serde_json::from_str(line.trim_end().trim_end_matches(';')).unwrap()
}

/// The rows of a list page sent as a table (`/episodes`: column names once, a list of
/// values per row), as objects.
fn table_rows(doc: &Value) -> Vec<Value> {
    let columns = doc["table"]["columns"].as_array().expect("a table of rows");
    doc["table"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            Value::Object(
                columns
                    .iter()
                    .zip(r.as_array().unwrap())
                    .map(|(c, v)| (c.as_str().unwrap().to_string(), v.clone()))
                    .collect(),
            )
        })
        .collect()
}

/// The bundled dataset's store and the id of its H3 episode.
fn dataset_store() -> (TestStore, String) {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let id = store.h3_episode();
    (store, id)
}

fn show_html(store: &TestStore, id: &str) -> (PathBuf, Value) {
    let path = store.dir.path().join(format!("{}.html", &id[..12]));
    let out = store.run(&["show", id, "--format", "html", "--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let data = page_data(&std::fs::read_to_string(&path).unwrap());
    (path, data)
}

/// Chromium and playwright-core. The tests that call this are ignored unless the build
/// found both (or CI requires them), so here a missing one is a failure.
pub(crate) fn browser() -> (String, String) {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let playwright = std::env::var("PLAYWRIGHT_CORE").ok();
    match playwright {
        Some(p) if Path::new(&chromium).exists() => (chromium, p),
        _ => panic!("Chromium ({chromium}) or PLAYWRIGHT_CORE is missing"),
    }
}

/// `tests/browser/check_page.mjs MODE URL SCREENSHOT`: its JSON summary.
fn check_page(mode: &str, url: &str, screenshot: &str) -> Value {
    check_page_with(mode, url, screenshot, &[])
}

/// [`check_page`] with environment for the script (`EPISTORE_WIDTH`, `EPISTORE_FIND`).
fn check_page_with(mode: &str, url: &str, screenshot: &str, env: &[(&str, &str)]) -> Value {
    let (chromium, playwright) = browser();
    let shot = repo_root().join("target").join(screenshot);
    let out = Command::new("node")
        .arg(repo_root().join("tests/browser/check_page.mjs"))
        .args([mode, url, shot.to_str().unwrap()])
        .env("CHROMIUM", chromium)
        .env("PLAYWRIGHT_CORE", playwright)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "check_page {mode} {url}: {}{}", text(&out.stdout), text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["console"], json!([]), "{summary}");
    assert_eq!(summary["requests"], json!([]), "{summary}");
    assert_eq!(summary["ok"], json!(true), "{summary}");
    summary
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn checks_by_id(data: &Value) -> std::collections::BTreeMap<String, Value> {
    data["traces"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["check_id"].as_str().unwrap().into(), c.clone()))
        .collect()
}

/// The H3 episode of the bundled dataset: one edit (S0 -> S1), the reproduction check
/// bound to S0 and so stale, the full regression timed out on S1, so the derived
/// posture is `failure` while the recorded label says `autonomous_verified_success`:
/// the page carries both, and every piece of evidence on its revision.
#[test]
fn episode_page_data_on_the_bundled_dataset() {
    let (store, id) = dataset_store();
    let (_, data) = show_html(&store, &id);
    assert_eq!(data["kind"], "episode");
    assert_eq!(data["id"], json!(id));
    assert_eq!(data["final_revision"], 1);
    assert_eq!(data["revisions"], json!([{"revision": 0, "mutation_seq": null}, {"revision": 1, "mutation_seq": 14}]));
    let v = &data["verdicts"];
    assert_eq!(
        (&v["claim"], &v["posture"], &v["admission"], &v["correct"], &v["label"]),
        (&json!(true), &json!("failure"), &json!("accepted"), &json!(true), &json!("autonomous_verified_success"))
    );
    let checks = checks_by_id(&data);
    let repro = &checks["repro-empty-password"];
    assert_eq!(
        (&repro["bound_revision"], &repro["state"], &repro["result"]),
        (&json!(0), &json!("stale"), &json!("fail"))
    );
    let full = &checks["full-regression"];
    assert_eq!(
        (&full["bound_revision"], &full["state"], &full["result"]),
        (&json!(1), &json!("current"), &json!("timeout"))
    );
    // "recorded, none" and a record's own fields
    assert_eq!(data["traces"]["interventions"], json!([]));
    let attribution = &data["traces"]["attributions"][1];
    assert_eq!(
        attribution["extra"]["note"],
        "the runner printed nothing before the kill; cause of the hang not observable from the trace"
    );
    // the patch, the reports and every file with its size
    assert!(data["patch"]["text"].as_str().unwrap().starts_with("diff --git a/src/validate.js"));
    assert_eq!(data["reports"].as_array().unwrap().len(), 2);
    let sizes: Vec<(String, u64)> = data["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["path"].as_str().unwrap().to_string(), a["size"].as_u64().unwrap()))
        .collect();
    let h3 = dataset().join("H3");
    for (path, size) in &sizes {
        assert_eq!(std::fs::metadata(h3.join(path)).unwrap().len(), *size, "{path}");
    }
    assert_eq!(sizes.len(), 13);
    // repro.log is a tool's output: its whole text is on the page once, in the tool's
    // record (its step), and the file's row points there instead of inlining it again.
    let log = data["artifacts"].as_array().unwrap().iter().find(|a| a["path"] == "artifacts/repro.log").unwrap();
    let tool =
        data["traces"]["tools"].as_array().unwrap().iter().find(|t| t["output"] == "artifacts/repro.log").unwrap();
    assert_eq!(tool["output_text"].as_str().unwrap(), std::fs::read_to_string(h3.join("artifacts/repro.log")).unwrap());
    assert_eq!((&log["text"], &log["step"]), (&Value::Null, &tool["seq"]));
    // the other levels of the same task, none in the same cell
    assert_eq!(data["attempts"], json!([]));
    assert_eq!(data["same_task"].as_array().unwrap().len(), 3);
}

/// Hostile text in the data: a 200,000-character word in the outcome's notes wraps
/// instead of widening the page, and a model named with a right-to-left override is
/// drawn with its controls marked (check_page fails on either), on the episode page and
/// the board.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn long_words_wrap_and_bidi_controls_are_marked_in_chromium() {
    let store = TestStore::new();
    let mut files = minimal_package("hostile");
    let manifest = json!({
        "format": "episode-package/1", "episode": "hostile",
        "model": {"name": "claude-\u{202E}evil\u{202C}"}, "harness": {"level": "H1"}, "task": {"id": "t1"},
    });
    files.insert("manifest.json".into(), manifest.to_string().into_bytes());
    let outcome = json!({"label": "failed", "correct": false, "notes": "x".repeat(200_000)});
    files.insert("outcome.json".into(), outcome.to_string().into_bytes());
    let dir = store.dir.path().join("pkg");
    write_package(&dir, &files);
    assert!(store.ingest(&[&dir]).status.success());
    let id = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();
    let (path, _) = show_html(&store, &id);
    let summary = check_page("episode", &file_url(&path), "hostile-episode-screenshot.png");
    assert_eq!(summary["kind"], "episode");
    let (site, _) = publish(&store, &[]);
    check_page("navigate", &file_url(&site.join("index.html")), "hostile-board-screenshot.png");
}

/// The same page in headless Chromium: bands, stale and current checks, the posture
/// beside the label, no console errors, no network.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn episode_page_renders_in_headless_chromium() {
    let (store, id) = dataset_store();
    let (path, _) = show_html(&store, &id);
    let summary = check_page("episode", &file_url(&path), "episode-screenshot.png");
    assert_eq!(summary["kind"], "episode");
    assert_eq!(summary["bands"], 2, "{summary}");
    let checks: std::collections::BTreeMap<String, Value> = summary["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["check_id"].as_str().unwrap().to_string(), c.clone()))
        .collect();
    assert_eq!(checks["repro-empty-password"]["state"], "stale", "{summary}");
    assert_eq!(checks["full-regression"]["state"], "current", "{summary}");
    assert_eq!(checks["full-regression"]["result"], "timeout", "{summary}");
    let verdicts = &summary["verdicts"];
    assert!(verdicts["posture"].as_str().unwrap().contains("failure"), "{summary}");
    assert!(verdicts["label"].as_str().unwrap().contains("autonomous_verified_success"), "{summary}");
    assert!(summary["summary"].as_str().unwrap().contains("full-regression"), "{summary}");
    assert!(summary["details"].as_str().unwrap().contains("check_id"), "{summary}");
    assert!(summary["patch_lines"].as_u64().unwrap() >= 10, "{summary}");
    // Selecting a record makes it the page's address; a deep link opens its record.
    let seq = summary["details_seq"].as_u64().unwrap();
    assert!(summary["url_after_click"].as_str().unwrap().ends_with(&format!("#seq-{seq}")), "{summary}");
    assert_eq!(summary["details_seq_on_load"], Value::Null, "{summary}");
    let linked = check_page("episode", &format!("{}#seq-14", file_url(&path)), "episode-deep-link-screenshot.png");
    assert_eq!(linked["details_seq_on_load"], 14, "{linked}");
}

/// On a synthetic population with forced revisions, an episode whose oracle said
/// correct on one revision and wrong on a later one shows both, each on its revision.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn oracle_verdicts_stand_on_their_revisions() {
    let store = TestStore::synthetic(120, 11);
    let found = store.sql(
        "SELECT a.episode_id, a.revision AS good, b.revision AS bad FROM oracle_verdicts a \
         JOIN oracle_verdicts b ON a.episode_id = b.episode_id AND a.y = 1 AND b.y = 0 AND b.revision > a.revision \
         ORDER BY a.episode_id, a.revision, b.revision LIMIT 1",
    );
    let row = found.first().expect("a forced-revision episode that lost correctness");
    let (id, good, bad) =
        (row["episode_id"].as_str().unwrap(), row["good"].as_u64().unwrap(), row["bad"].as_u64().unwrap());
    let (path, data) = show_html(&store, id);
    let oracle: Vec<(u64, String)> = data["traces"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["actor"] == "evaluator" && c["method"] == "oracle")
        .map(|c| (c["bound_revision"].as_u64().unwrap(), c["result"].as_str().unwrap().to_string()))
        .collect();
    assert!(oracle.contains(&(good, "pass".into())) && oracle.contains(&(bad, "fail".into())), "{oracle:?}");
    let summary = check_page("episode", &file_url(&path), "episode-oracle-screenshot.png");
    let texts: Vec<String> =
        summary["oracle"].as_array().unwrap().iter().map(|o| o["text"].as_str().unwrap_or("").to_string()).collect();
    assert!(texts.iter().any(|t| t.contains(&format!("correct at S{good}"))), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains(&format!("wrong at S{bad}"))), "{texts:?}");
    assert_eq!(summary["bands"].as_u64().unwrap(), data["final_revision"].as_u64().unwrap() + 1);
}

fn publish(store: &TestStore, extra: &[&str]) -> (PathBuf, Value) {
    let dir = store.dir.path().join("site");
    let mut args = vec!["leaderboard", "--metric", "sound_completion", "--format", "html", "--out"];
    args.push(dir.to_str().unwrap());
    args.extend_from_slice(&["--with-episodes", "--replicates", "200"]);
    args.extend_from_slice(extra);
    let out = store.run(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let board = store.run(&["leaderboard", "--metric", "sound_completion", "--format", "json", "--replicates", "200"]);
    (dir, serde_json::from_slice(&board.stdout).unwrap())
}

/// A published folder: the board, a list per entry whose rows are the entry's episodes
/// (as many as SQL counts for its key), a page per episode up to --max-episodes, and
/// no dead links.
#[test]
fn published_board_links_entries_to_episode_pages() {
    let store = TestStore::synthetic(60, 5);
    let (dir, board) = publish(&store, &[]);
    let entries = board["entries"].as_array().unwrap();
    for (i, entry) in entries.iter().enumerate() {
        let list = page_data(&std::fs::read_to_string(dir.join(format!("entries/{i}.html"))).unwrap());
        let model = entry["key"]["model"].as_str().unwrap();
        let counted = store.sql(&format!("SELECT count(*) AS n FROM episode_facts WHERE model = '{model}'"))[0]["n"]
            .as_u64()
            .unwrap();
        assert_eq!(list["rows"].as_array().unwrap().len() as u64, counted, "entry {i} ({model})");
        for row in list["rows"].as_array().unwrap() {
            let href = row["href"].as_str().expect("every episode has a page");
            assert!(dir.join("entries").join(href).exists(), "{href}");
        }
    }
    // The breadcrumb of an episode page: the board, an entry it stands behind, the episode.
    let first = entries[0]["episode_ids"][0].as_str().unwrap();
    let page = page_data(&std::fs::read_to_string(dir.join(format!("episodes/{first}.html"))).unwrap());
    let nav: Vec<(String, Value)> = page["nav"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["label"].as_str().unwrap().to_string(), n["href"].clone()))
        .collect();
    assert_eq!(nav.len(), 3, "{nav:?}");
    assert_eq!(nav[0].1, json!("../index.html"));
    assert_eq!((nav[1].0.as_str(), &nav[1].1), (entries[0]["label"].as_str().unwrap(), &json!("../entries/0.html")));
    let pages = std::fs::read_dir(dir.join("episodes")).unwrap().count();
    assert_eq!(pages as i64, store.episode_count());

    // Bounded: 10 pages, only those linked, a share for every entry (failures and
    // label disagreements first, listed first), and each list says why the others
    // have no link.
    let (dir, _) = publish(&store, &["--max-episodes", "10"]);
    assert_eq!(std::fs::read_dir(dir.join("episodes")).unwrap().count(), 10);
    for i in 0..entries.len() {
        let list = page_data(&std::fs::read_to_string(dir.join(format!("entries/{i}.html"))).unwrap());
        let rows = list["rows"].as_array().unwrap();
        let linked: Vec<bool> = rows.iter().map(|r| r["href"].is_string()).collect();
        assert!(linked[0], "entry {i} has no published page");
        assert!(linked.windows(2).all(|w| w[0] || !w[1]), "entry {i}: published pages are not listed first");
        for row in rows.iter().filter(|r| r["href"].is_string()) {
            assert!(dir.join("entries").join(row["href"].as_str().unwrap()).exists());
        }
        if linked.iter().any(|l| !l) {
            assert!(list["subtitle"].as_str().unwrap().contains("--max-episodes"), "{}", list["subtitle"]);
            // A failure or an over-claiming label gets its page before a quiet episode.
            let first_unlinked = linked.iter().position(|l| !l).unwrap();
            let loud = |r: &Value| {
                r["posture"] == "failure"
                    || r["correct"] == json!(false)
                    || (matches!(
                        r["label"].as_str(),
                        Some("autonomous_verified_success" | "assisted_verified_success")
                    ) && r["posture"] != "current")
            };
            if rows[first_unlinked..].iter().any(loud) {
                assert!(rows[..first_unlinked].iter().all(loud), "entry {i}: a quiet episode was published first");
            }
        }
    }
    assert!(!dir.with_file_name("site.epistore-staging").exists());
    // The board says why the other ids have no link.
    let board = page_data(&std::fs::read_to_string(dir.join("index.html")).unwrap());
    assert!(board["links"]["unlinked"].as_str().unwrap().contains("--max-episodes 10"), "{}", board["links"]);
}

/// A published folder's pages share one copy of the template's script and style
/// (`assets/`, named by content), so the folder grows by the data alone; each page
/// points at them, and no page repeats them.
#[test]
fn published_pages_share_the_templates_script_and_style() {
    let store = TestStore::synthetic(60, 5);
    let (dir, _) = publish(&store, &[]);
    let assets: Vec<String> = std::fs::read_dir(dir.join("assets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(assets.len(), 2, "{assets:?}");
    let script = assets.iter().find(|a| a.ends_with(".js")).unwrap();
    let js = std::fs::read_to_string(dir.join("assets").join(script)).unwrap();
    assert!(js.contains("function renderEpisode") && js.contains("function el("), "the shared script is the page's");
    let mut pages = 0;
    for entry in walk(&dir).into_iter().filter(|p| p.extension().is_some_and(|e| e == "html")) {
        if entry.ends_with("index.html") {
            continue;
        }
        let html = std::fs::read_to_string(&entry).unwrap();
        assert!(
            html.contains(&format!("src=\"../assets/{script}\"")),
            "{} does not load the shared script",
            entry.display()
        );
        assert!(!html.contains("function renderEpisode"), "{} repeats the template", entry.display());
        page_data(&html);
        pages += 1;
    }
    assert!(pages > 60, "{pages} pages");
}

/// `--episode-url`: trajectories hosted elsewhere. Every id of the board and of the
/// entry lists links to the template with the id in place, no episode page is written;
/// a single-file board links the same way, and a template that is not http(s) or
/// relative is refused.
#[test]
fn episode_ids_link_to_trajectories_hosted_elsewhere() {
    let store = TestStore::synthetic(40, 5);
    let template = "https://example.org/runs/{id}.html";
    let (dir, _) = publish(&store, &["--episode-url", template]);
    assert_eq!(std::fs::read_dir(dir.join("episodes")).unwrap().count(), 0);
    let board = page_data(&std::fs::read_to_string(dir.join("index.html")).unwrap());
    assert_eq!(board["links"]["episode"], template);
    assert_eq!(board["links"]["linked"], Value::Null);
    let list = page_data(&std::fs::read_to_string(dir.join("entries/0.html")).unwrap());
    for row in list["rows"].as_array().unwrap() {
        assert_eq!(
            row["href"].as_str().unwrap(),
            format!("https://example.org/runs/{}.html", row["id"].as_str().unwrap())
        );
    }
    let single = store.dir.path().join("board.html");
    let out = store.run(&[
        "leaderboard",
        "--metric",
        "sound_completion",
        "--format",
        "html",
        "--replicates",
        "100",
        "--episode-url",
        template,
        "--out",
        single.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(page_data(&std::fs::read_to_string(&single).unwrap())["links"]["episode"], template);
    for bad in ["javascript:alert({id})", "file:///runs/{id}", "https://example.org/runs/"] {
        let out = store.run(&["leaderboard", "--metric", "sound_completion", "--format", "html", "--episode-url", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--episode-url"), "{}", text(&out.stderr));
    }
}

/// Board -> an entry's episodes -> an episode page -> back, in Chromium; the counts on
/// each page are the SQL counts.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn published_board_navigates_in_headless_chromium() {
    let store = TestStore::synthetic(60, 5);
    let (dir, board) = publish(&store, &[]);
    let summary = check_page("navigate", &file_url(&dir.join("index.html")), "navigate-screenshot.png");
    let first = &board["entries"][0];
    assert_eq!(summary["list_rows"], first["episodes"], "{summary}");
    assert_eq!(summary["episode_kind"], "episode", "{summary}");
    assert_eq!(summary["back_to_board"], true, "{summary}");
    assert_eq!(summary["board_entries"].as_u64().unwrap() as usize, board["entries"].as_array().unwrap().len());
    // `n`, `episodes` and `clusters` say what they count, in the text and on their headers.
    let howto = summary["board_howto"].as_str().unwrap();
    assert!(
        howto.contains("n is the metric\u{2019}s pooled denominator") && howto.contains("clusters, its"),
        "{howto}"
    );
    assert!(summary["board_header_titles"]["n"].as_str().unwrap().contains("denominator"), "{summary}");
}

/// A running `epistore ui`, stopped when dropped.
struct Ui {
    child: Child,
    addr: String,
}

impl Ui {
    fn start(store: &TestStore, extra: &[&str]) -> Ui {
        let (child, addr) = store.listening("ui", "http", extra, Stdio::piped());
        Ui { child, addr }
    }

    fn request(&self, method: &str, target: &str, headers: &[&str]) -> (u16, String) {
        http(&self.addr, method, target, headers)
    }

    fn get(&self, target: &str) -> (u16, String) {
        http(&self.addr, "GET", target, &[])
    }
}

/// One raw HTTP/1.1 request (the target sent exactly as given, not normalised by a
/// client library): status and body.
fn http(addr: &str, method: &str, target: &str, headers: &[&str]) -> (u16, String) {
    http_to(addr, addr, method, target, headers)
}

/// [`http`] with the `Host` header given.
fn http_to(addr: &str, host: &str, method: &str, target: &str, headers: &[&str]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ui` serves the pages, GET only; no path reaches beyond an episode's own files; an
/// unknown id is a 404 page; fifty requests at once all get their page.
#[test]
fn ui_serves_pages_read_only() {
    let (store, id) = dataset_store();
    let ui = Ui::start(&store, &["--max-concurrent", "4"]);
    let (status, body) = ui.get("/");
    assert_eq!(status, 200, "{body}");
    let index = page_data(&body);
    assert_eq!(index["kind"], "index");
    assert_eq!(index["cells"].as_array().unwrap().len(), 4);
    assert_eq!(index["store"]["episodes"], 4);
    // The store's folder by name, not the machine's path to it.
    let folder = store.path().file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(index["store"]["dir"], json!(folder));
    assert!(!body.contains(store.dir.path().to_str().unwrap()), "the page shows the store's path");

    let (status, body) = ui.get(&format!("/episodes/{id}"));
    assert_eq!(status, 200);
    assert_eq!(page_data(&body)["verdicts"]["posture"], "failure");
    let (status, body) = ui.get(&format!("/episodes/{}", &id[..8]));
    assert_eq!((status, page_data(&body)["id"].as_str()), (200, Some(id.as_str())));
    let (status, body) = ui.get(&format!("/episodes/{id}/files/patch.diff"));
    assert_eq!((status, body), (200, std::fs::read_to_string(dataset().join("H3/patch.diff")).unwrap()));

    let cell = index["cells"].as_array().unwrap().iter().find(|c| c["harness_level"] == "H3").unwrap();
    let (status, body) = ui.get(cell["href"].as_str().unwrap());
    assert_eq!(status, 200);
    let list = page_data(&body);
    let rows = table_rows(&list);
    assert_eq!(rows[0]["id"], json!(id));
    assert_eq!(rows[0]["stale_checks"], 1);
    // A cell's old address leads to the same list.
    let (status, _) = ui.get("/cell?model=qwen2.5-coder-14b&harness_level=H3&task=login-validation");
    assert_eq!(status, 308);

    let (status, body) = ui.get("/leaderboards/sound_completion?by=harness_level");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/leaderboards/sound_completion/entries/0?by=harness_level"));
    let (status, body) = ui.get("/leaderboards/sound_completion/entries/0?by=harness_level");
    assert_eq!((status, page_data(&body)["rows"].as_array().unwrap().len()), (200, 1));
    let (status, _) = ui.get("/leaderboards/no_such_metric");
    assert_eq!(status, 400);
    // A `where=` that cannot plan is the request's fault (400), however it fails:
    // unknown column, bad syntax, past the statement limits.
    let deep = format!("({})%3D0", vec!["1"; 5_000].join("%3C%3C"));
    for condition in ["no_such_column%3D1", "posture%20%3D%3D%3D", deep.as_str()] {
        let (status, body) = ui.get(&format!("/leaderboards/sound_completion?by=harness_level&where={condition}"));
        assert_eq!(status, 400, "{}: {}", &condition[..condition.len().min(40)], &body[..body.len().min(300)]);
    }

    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let (status, _) = ui.request(method, "/", &[]);
        assert_eq!(status, 405, "{method}");
    }
    for target in [
        format!("/episodes/{id}/files/../../../../etc/passwd"),
        format!("/episodes/{id}/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd"),
        format!("/episodes/{id}/files/..%2f..%2f..%2fetc%2fpasswd"),
        format!("/episodes/{id}/files//etc/passwd"),
        "/../../../etc/passwd".to_string(),
        "/%2e%2e/%2e%2e/etc/passwd".to_string(),
    ] {
        let (status, body) = ui.get(&target);
        assert!(status == 404 || status == 400, "{target}: {status}");
        assert!(!body.contains("root:x:0:0"), "{target}");
    }
    let (status, body) = ui.get(&format!("/episodes/{}", "0".repeat(64)));
    assert_eq!(status, 404);
    assert_eq!(page_data(&body)["kind"], "message");

    let threads: Vec<_> = (0..50)
        .map(|i| {
            let addr = ui.addr.clone();
            let target = if i % 2 == 0 { format!("/episodes/{id}") } else { "/".to_string() };
            std::thread::spawn(move || http(&addr, "GET", &target, &[]).0)
        })
        .collect();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
}

/// Without a token, only requests naming this server are answered: a page on another
/// domain that re-resolves to 127.0.0.1 (DNS rebinding) sends its own `Host`.
#[test]
fn ui_answers_only_its_own_host_names_without_a_token() {
    let (store, _) = dataset_store();
    let ui = Ui::start(&store, &["--allow-host", "board.lan"]);
    let port = ui.addr.rsplit(':').next().unwrap().to_string();
    for host in [ui.addr.clone(), format!("localhost:{port}"), "board.lan".into(), format!("[::1]:{port}")] {
        assert_eq!(http_to(&ui.addr, &host, "GET", "/", &[]).0, 200, "{host}");
    }
    for host in [format!("rebind.attacker.example:{port}"), "127.0.0.1.nip.io".into(), "board.lan.evil".into()] {
        let (status, body) = http_to(&ui.addr, &host, "GET", "/", &[]);
        assert_eq!(status, 421, "{host}: {body}");
        assert!(!body.contains("\"kind\":\"index\""), "{host}: the page was served");
    }
    // A token decides on its own: any name, with the token.
    let ui = Ui::start(&store, &["--token", "s3cret"]);
    assert_eq!(http_to(&ui.addr, "epistore.example", "GET", "/", &["Authorization: Bearer s3cret"]).0, 200);
}

/// Slow clients (a header line every few seconds, or nothing) hold a connection for
/// the header timeout at most, and no more connections than the cap: the server keeps
/// its descriptors and answers once they are gone.
#[test]
fn slow_clients_are_cut_off_and_cannot_lock_others_out() {
    let (store, _) = dataset_store();
    let mut ui = Ui::start(&store, &[]);
    // More than the cap (512), each having sent half a request head.
    let slow: Vec<TcpStream> = (0..530)
        .filter_map(|_| {
            let mut s = TcpStream::connect(&ui.addr).ok()?;
            s.write_all(b"GET / HTTP/1.1\r\nX-Slow: 1\r\n").ok()?;
            Some(s)
        })
        .collect();
    assert!(slow.len() >= 513, "{} connections", slow.len());
    // Past the header timeout (10 s) every slow connection has been closed ...
    std::thread::sleep(std::time::Duration::from_secs(12));
    let open = slow.iter().filter(|s| still_open(s)).count();
    assert_eq!(open, 0, "{open} slow connections still open past the header timeout");
    // ... and a client is answered.
    assert_eq!(ui.get("/").0, 200);
    assert!(ui.child.try_wait().unwrap().is_none(), "the server exited");
}

/// Whether the server still holds `stream` open: reads time out rather than end
/// (whatever it sent first, such as a 408, is read past).
fn still_open(mut stream: &TcpStream) -> bool {
    stream.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        }
    }
}

/// Beyond loopback only with a token; with one, every request must carry it.
#[test]
fn ui_needs_a_token_beyond_loopback() {
    let (store, _) = dataset_store();
    let out = store.run(&["ui", "--addr", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("without --token"), "{}", text(&out.stderr));

    let ui = Ui::start(&store, &["--token", "s3cret"]);
    assert_eq!(ui.get("/").0, 401);
    assert_eq!(ui.request("GET", "/", &["Authorization: Bearer wrong"]).0, 401);
    assert_eq!(ui.request("GET", "/", &["Authorization: Bearer s3cret"]).0, 200);
    assert_eq!(ui.get("/?token=s3cret").0, 200);
    assert_eq!(ui.request("GET", "/", &["Cookie: epistore_ui_token=s3cret"]).0, 200);
}

/// `/episodes`: the store-wide list whose address is its filters. Each filter keeps
/// exactly the episodes SQL keeps for it (field values, "not recorded", the run's
/// content through the search index); the index links each row into it; a search
/// query that does not parse is said on the page, a bad value is a 400.
#[test]
fn the_episode_list_filters_by_field_and_content_in_its_address() {
    let store = TestStore::new();
    let logs = repo_root().join("tests/fixtures/real/claude-code");
    assert!(store.run(&["import", "--quiet", logs.to_str().unwrap()]).status.success());
    let pop = store.synth(40, 3);
    assert!(store.ingest(&[&pop]).status.success());
    let ui = Ui::start(&store, &[]);
    let list = |query: &str| {
        let (status, body) = ui.get(&format!("/episodes?{query}&format=json"));
        assert_eq!(status, 200, "{query}: {body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        let mut ids: Vec<String> = table_rows(&doc).iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
        ids.sort();
        (ids, doc)
    };
    let sql_ids = |condition: &str| {
        let mut ids: Vec<String> = store
            .sql(&format!("SELECT episode_id FROM episodes WHERE {condition}"))
            .iter()
            .map(|r| r["episode_id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    let all = sql_ids("true");
    assert_eq!(list("").0, all);
    for (query, condition) in [
        ("posture=stale", "posture = 'stale'"),
        ("source_format=claude-code", "source_format = 'claude-code'"),
        ("source_format=null&posture=failure", "source_format IS NULL AND posture = 'failure'"),
        ("label=null", "label IS NULL"),
        ("claim=yes&correct=null", "agent_reported_complete AND correct IS NULL"),
        ("q=AssertionError", "episode_id IN (SELECT episode_id FROM tools WHERE output_text LIKE '%AssertionError%')"),
    ] {
        let (ids, doc) = list(query);
        let want = sql_ids(condition);
        assert!(!want.is_empty() && want.len() < all.len(), "{query}: a filter that tells nothing: {}", want.len());
        assert_eq!(ids, want, "{query}");
        assert_eq!(doc["counts"]["episodes"].as_u64().unwrap() as usize, want.len(), "{query}");
    }
    let (ids, doc) = list("limit=3");
    assert_eq!((ids.len(), &doc["truncated"], &doc["counts"]["episodes"]), (3, &json!(true), &json!(all.len())));
    // A query the search index refuses is said on the page; a bad value is the request's fault.
    let (ids, doc) = list("q=%22unclosed");
    assert!(ids.is_empty() && doc["query"]["error"].as_str().unwrap().contains("search query refused"), "{doc}");
    assert_eq!(ui.get("/episodes?claim=maybe").0, 400);
    assert_eq!(ui.get("/episodes?limit=0").0, 400);
    // The index groups imported sessions by model, level and source, each row a link
    // that reproduces its list.
    let (_, body) = ui.get("/?format=json");
    let index: Value = serde_json::from_str(&body).unwrap();
    let groups = index["cells"].as_array().unwrap();
    assert!(groups.len() < all.len(), "{groups:?}");
    let total: u64 = groups.iter().map(|g| g["episodes"].as_u64().unwrap()).sum();
    assert_eq!(total as usize, all.len());
    for g in groups {
        let href = g["href"].as_str().unwrap();
        let (ids, _) = list(href.trim_start_matches("/episodes?"));
        assert_eq!(ids.len() as u64, g["episodes"].as_u64().unwrap(), "{href}");
    }
}

/// Two episodes of one task side by side (`/compare`, linked from "same task, other
/// cells"): the aligned steps share exactly the common prefix of what the two runs did
/// (tool calls with their commands, edits, checks with their results, read from SQL),
/// and the first divergence is the row after it.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn two_episodes_of_a_task_compare_side_by_side_from_their_first_divergence() {
    let store = TestStore::synthetic(60, 5);
    let pair = store.sql(
        "SELECT a.episode_id AS a, b.episode_id AS b FROM episodes a JOIN episodes b \
         ON a.task = b.task AND a.harness_level = b.harness_level AND a.model < b.model \
         WHERE a.harness_level = 'H3' ORDER BY a.episode_id, b.episode_id LIMIT 1",
    );
    let (a, b) = (pair[0]["a"].as_str().unwrap().to_string(), pair[0]["b"].as_str().unwrap().to_string());
    // What each run did, in seq order, as the page aligns it.
    let did = |id: &str| -> Vec<String> {
        store
            .sql(&format!(
                "SELECT seq, 'tool ' || tool || ' ' || coalesce(command, '') AS s FROM tools WHERE episode_id = '{id}' \
                 UNION ALL SELECT seq, 'check ' || check_id || ' ' || coalesce(result, '') FROM checks WHERE episode_id = '{id}' \
                 UNION ALL SELECT seq, 'action ' || kind || ' ' || array_to_string(paths, ',') FROM actions \
                 WHERE episode_id = '{id}' AND tool_seq IS NULL ORDER BY seq"
            ))
            .iter()
            .map(|r| r["s"].as_str().unwrap().split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    let (da, db) = (did(&a), did(&b));
    let common = da.iter().zip(&db).take_while(|(x, y)| x == y).count();
    assert!(common < da.len().min(db.len()), "the two runs must diverge somewhere");

    let ui = Ui::start(&store, &[]);
    let (_, body) = ui.get(&format!("/episodes/{a}"));
    let page = page_data(&body);
    let other = page["same_task"].as_array().unwrap().iter().find(|o| o["id"] == json!(b)).expect("b is a task-mate");
    let href = other["compare_href"].as_str().unwrap();
    assert_eq!(href, format!("/compare?a={a}&b={b}"));
    let summary = check_page("compare", &format!("http://{}{href}", ui.addr), "compare-screenshot.png");
    assert_eq!(summary["kind"], "compare");
    assert_eq!(summary["common"].as_u64().unwrap() as usize, common, "{summary}");
    assert_eq!(summary["first"].as_u64().unwrap() as usize, common, "{summary}");
    let row = summary["first_row"].as_array().unwrap();
    let seq_of = |id: &str, k: usize| {
        store.sql(&format!(
            "SELECT seq FROM (SELECT seq FROM tools WHERE episode_id = '{id}' UNION ALL SELECT seq FROM checks WHERE episode_id = '{id}' \
             UNION ALL SELECT seq FROM actions WHERE episode_id = '{id}' AND tool_seq IS NULL) ORDER BY seq LIMIT 1 OFFSET {k}"
        ))[0]["seq"]
            .as_u64()
            .unwrap()
    };
    // The divergent row names a step of A or of B at the first differing position.
    let (ta, tb) = (row[1].as_str().unwrap(), row[2].as_str().unwrap());
    assert!(
        ta.starts_with(&format!("seq {} ", seq_of(&a, common)))
            || tb.starts_with(&format!("seq {} ", seq_of(&b, common))),
        "{row:?}"
    );
    assert!(summary["links"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(ui.get("/compare?a=nope&b=nope").0, 404);
    assert_eq!(ui.get("/compare?a=1").0, 400);
}

/// Index -> cell -> episode over the running server, in Chromium: two clicks from the
/// index to the H3 timeline.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn ui_pages_render_in_headless_chromium() {
    let (store, _) = dataset_store();
    let ui = Ui::start(&store, &[]);
    let index = check_page("index", &format!("http://{}/", ui.addr), "ui-index-screenshot.png");
    assert_eq!(index["cells_rows"], 4, "{index}");
    assert_eq!(index["headline_rows"], 4, "{index}");
    let h3 = index["cell_links"].as_array().unwrap().iter().find(|h| h.as_str().unwrap().contains("H3")).unwrap();
    let list = check_page("list", &format!("http://{}{}", ui.addr, h3.as_str().unwrap()), "ui-list-screenshot.png");
    assert_eq!(list["rows"], 1, "{list}");
}

/// `epistore ui`'s index follows the store: a run imported while the page is open is
/// drawn without a reload (the page polls `/api/snapshot`, then its own data).
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn the_ui_index_draws_new_episodes_without_a_reload() {
    let (store, _) = dataset_store();
    let ui = Ui::start(&store, &[]);
    let (chromium, playwright) = browser();
    let mut check = Command::new("node")
        .arg(repo_root().join("tests/browser/check_page.mjs"))
        .args(["live", &format!("http://{}/", ui.addr), repo_root().join("target/ui-live.png").to_str().unwrap()])
        .env("CHROMIUM", chromium)
        .env("PLAYWRIGHT_CORE", playwright)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(check.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "rendered", "check_page did not start: {line}");
    // A run arrives while the page is open.
    let session = repo_root().join("tests/fixtures/real/claude-code/generated/projects");
    let out = store.run(&["import", "--quiet", session.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let done = check.wait_with_output().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(done.status.success(), "{}{rest}", text(&done.stdout));
    let summary: Value = serde_json::from_slice(&done.stdout).unwrap();
    let episodes = summary["episodes"].as_array().unwrap();
    assert_eq!(episodes[1].as_i64().unwrap(), episodes[0].as_i64().unwrap() + 1, "{summary}");
    assert_ne!(summary["snapshots"][0], summary["snapshots"][1], "{summary}");
    assert_eq!(summary["requests"], json!([]), "only its own server was asked: {summary}");
    // The snapshot endpoint answers JSON, and a live page's data comes as JSON too.
    let (status, body) = ui.get("/api/snapshot");
    assert_eq!(status, 200);
    assert!(serde_json::from_str::<Value>(&body).unwrap()["snapshot"].as_u64().is_some(), "{body}");
    let (status, body) = ui.get("/?format=json");
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["kind"], "index");
}

/// The page's "posture and label disagree" warning and `label_audit` ask one rule
/// (`epistore_package::label_claims_verified`): on every episode of a synthetic
/// population, every label included, the page warns exactly where SQL flags
/// `verified_without_current_posture`. Before, the page's test also matched
/// `unverified_success` and warned on most pages. The SQL view spells the same list.
#[test]
fn the_label_warning_agrees_with_label_audit_on_every_episode() {
    let store = TestStore::new();
    let pop = store.synth(400, 7);
    assert!(store.ingest(&[&pop]).status.success());
    let flagged: std::collections::BTreeMap<String, bool> = store
        .sql("SELECT episode_id, coalesce(verified_without_current_posture, false) AS f FROM label_audit")
        .into_iter()
        .map(|r| (r["episode_id"].as_str().unwrap().to_string(), r["f"].as_bool().unwrap()))
        .collect();
    let labels: std::collections::BTreeSet<String> = store
        .sql("SELECT DISTINCT label FROM episodes")
        .iter()
        .filter_map(|r| r["label"].as_str().map(String::from))
        .collect();
    assert!(labels.contains("unverified_success") && labels.contains("autonomous_verified_success"), "{labels:?}");
    let read = epistore_store::Store::open_read_only(store.path()).unwrap();
    let snapshot = read.snapshot().unwrap();
    let (mut warned, mut unverified_not_current) = (0, 0);
    for (id, flag) in &flagged {
        let hash = epistore_package::parse_hex(id).unwrap();
        let data = epistore_view::episode_doc(
            &snapshot,
            &hash,
            &epistore_view::Links::None,
            epistore_view::FilePolicy::STATIC,
        )
        .unwrap();
        let v = &data["verdicts"];
        // What page.html tests before drawing the warning.
        let warns = v["label_claims_verified"] == json!(true) && v["posture"] != json!("current");
        assert_eq!(warns, *flag, "{id}: label {} posture {}", v["label"], v["posture"]);
        warned += usize::from(warns);
        unverified_not_current += usize::from(v["label"] == "unverified_success" && v["posture"] != "current");
    }
    assert!(warned > 0 && unverified_not_current > 0, "the population lacks a case: {warned} {unverified_not_current}");
    let sql = std::fs::read_to_string(repo_root().join("queries/label_audit.sql")).unwrap();
    let list =
        epistore_package::VERIFIED_SUCCESS_LABELS.iter().map(|l| format!("'{l}'")).collect::<Vec<_>>().join(", ");
    assert!(
        sql.contains(&format!("label IN ({list}) AND posture <> 'current'")),
        "label_audit.sql spells another list"
    );
}

/// A published site holds no path of the machine that built it: packages ingested
/// from an absolute folder and the store's own folder appear nowhere in any file
/// (episode pages named the folder each package came from).
#[test]
fn a_published_site_holds_no_path_of_the_publishing_machine() {
    let store = TestStore::new();
    let packages = store.dir.path().join("maintainers-private-folder");
    copy_tree(&dataset(), &packages);
    assert!(store.ingest(&[&packages]).status.success());
    let (dir, _) = publish(&store, &["--with-sources"]);
    let private =
        [packages.display().to_string(), store.path().display().to_string(), "maintainers-private-folder".into()];
    let mut files = 0;
    for entry in walk(&dir) {
        let bytes = std::fs::read(&entry).unwrap();
        let content = String::from_utf8_lossy(&bytes);
        for needle in &private {
            assert!(!content.contains(needle.as_str()), "{} holds {needle}", entry.display());
        }
        files += 1;
    }
    assert!(files > 4, "{files} files published");
}

/// A real imported Claude Code session: the page's first screen reads the run (the task
/// as given and the agent's last message, as SQL holds them), drawn in Chromium.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn an_imported_sessions_first_screen_shows_the_task_and_the_agents_last_message() {
    let store = TestStore::new();
    let logs = repo_root().join("tests/fixtures/real/claude-code");
    let out = store.run(&["import", "--model", "m", logs.to_str().unwrap()]);
    assert!(store.path().exists(), "{}", text(&out.stderr));
    let rows = store.sql(
        "SELECT episode_id, task_prompt, final_message FROM episodes \
         WHERE task_prompt IS NOT NULL AND final_message IS NOT NULL ORDER BY length(task_prompt) LIMIT 1",
    );
    let row = rows.first().expect("a session with a prompt and a last message");
    let id = row["episode_id"].as_str().unwrap();
    let (path, data) = show_html(&store, id);
    assert_eq!(data["task_prompt"], row["task_prompt"]);
    let summary = check_page("episode", &file_url(&path), "imported-episode-screenshot.png");
    let shown = summary["run_text"].as_array().unwrap();
    for (block, column) in shown.iter().zip(["task_prompt", "final_message"]) {
        let want = row[column].as_str().unwrap();
        let got = block["text"].as_str().unwrap();
        let head: String = want.chars().take(700).collect();
        assert!(got.starts_with(head.trim_end()) || got == want, "{column}: {got:?} is not {want:?}");
        assert_eq!(block["first_screen"], true, "{column} is below the first screen: {summary}");
    }
}

/// A real Claude Code session (the counter fix that wrote CHANGELOG.md after its
/// passing test) read from its page: the step list holds the failing test's output and
/// the `Edit`'s diff as the log has them, the edit names the check it made stale, the
/// evidence summary names the change behind the stale posture, the search finds a phrase
/// of a tool output, and a link to a step opens it, at laptop and at phone width.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn a_sessions_steps_show_output_diffs_and_why_a_check_is_stale() {
    let store = TestStore::new();
    let session = repo_root().join("tests/fixtures/real/claude-code/generated/projects");
    let out = store.run(&["import", "--quiet", session.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();
    let (path, data) = show_html(&store, &id);
    assert_eq!(data["verdicts"]["posture"], "stale", "the session's last passing test came before CHANGELOG.md");
    // Each tool output is carried once: whole in its step, and its file not inlined again.
    let tools = data["traces"]["tools"].as_array().unwrap();
    for t in tools.iter().filter(|t| t["output"].is_string()) {
        let file = data["artifacts"].as_array().unwrap().iter().find(|a| a["path"] == t["output"]).unwrap();
        assert!(t["output_text"].is_string() && file["text"].is_null() && file["step"] == t["seq"], "{file}");
    }
    // From the log: the Bash call `python3 test_counter.py` (seq 14) printed the
    // assertion, and the Edit of counter.py (seq 26) replaced `range(1, n)`.
    let edit_seq = store.sql(&format!(
        "SELECT t.seq FROM tools t JOIN actions a ON a.episode_id = t.episode_id AND a.tool_seq = t.seq \
         WHERE t.episode_id = '{id}' AND t.tool = 'Edit'"
    ))[0]["seq"]
        .as_u64()
        .unwrap();
    // The first screen at laptop size reads the run up to the failing test: the task,
    // the claim and the test's step (its output beginning at the fold or above).
    let first = check_page_with("episode", &file_url(&path), "steps-first-screen.png", &[("EPISTORE_WIDTH", "1400")]);
    let failing_seq = store
        .sql(&format!("SELECT seq FROM tools WHERE episode_id = '{id}' AND exit_code = 1 ORDER BY seq LIMIT 1"))[0]
        ["seq"]
        .as_u64()
        .unwrap();
    let in_view: Vec<u64> = first["steps_in_view"].as_array().unwrap().iter().map(|s| s.as_u64().unwrap()).collect();
    assert!(
        in_view.contains(&failing_seq),
        "the failing test (seq {failing_seq}) is below the first screen: {in_view:?}"
    );
    assert!(first["run_text"].as_array().unwrap().iter().all(|b| b["first_screen"] == json!(true)), "{first}");
    for (width, shot) in [("1400", "steps-laptop.png"), ("400", "steps-phone.png")] {
        let summary = check_page_with(
            "episode",
            &format!("{}#seq-{edit_seq}", file_url(&path)),
            shot,
            &[("EPISTORE_WIDTH", width), ("EPISTORE_FIND", "AssertionError")],
        );
        let steps = &summary["steps"];
        let drawn = steps["drawn"].as_array().unwrap();
        assert_eq!(steps["total"].as_u64().unwrap() as usize, drawn.len(), "a short run is drawn whole: {steps}");
        let step = |pred: &dyn Fn(&str) -> bool| drawn.iter().find(|s| pred(s["text"].as_str().unwrap())).cloned();
        let failing =
            step(&|t| t.contains("python3 test_counter.py") && t.contains("exit 1")).expect("the failing test");
        assert!(failing["text"].as_str().unwrap().contains("AssertionError: [1, 2]"), "{failing}");
        let edit = drawn.iter().find(|s| s["seq"].as_u64() == Some(edit_seq)).expect("the Edit's step");
        let edit_text = edit["text"].as_str().unwrap();
        for line in ["-    return list(range(1, n))", "+    return list(range(1, n + 1))", "made stale:"] {
            assert!(edit_text.contains(line), "{line:?} not in {edit_text}");
        }
        assert!(drawn
            .iter()
            .any(|s| s["kind"] == "person" && s["text"].as_str().unwrap().contains("count_up_to(n) should include n")));
        let cause = summary["summary"].as_str().unwrap();
        assert!(
            cause.contains("Changed after the last passing check") && cause.contains("CHANGELOG.md (create, seq"),
            "{cause}"
        );
        // The grades behind the posture: the checks are derived from Bash calls, the
        // edits observed (Edit, Write).
        assert!(cause.contains("How it is known: agent checks 2 derived; mutating actions 2 observed"), "{cause}");
        assert_eq!(summary["key_cells_out_of_sight"], json!([]), "at {width} px: {summary}");
        if width == "400" {
            // Too narrow for the timeline: "Fit to width" draws the whole run in the view.
            let fit = &summary["fit"];
            assert!(fit["before"]["timeline"].as_u64() > fit["before"]["view"].as_u64(), "{fit}");
            assert!(fit["after"]["timeline"].as_u64() <= fit["after"]["view"].as_u64().map(|v| v + 1), "{fit}");
            assert_eq!(fit["after"]["marks"], fit["before"]["marks"], "{fit}");
        }
        assert_eq!(summary["step_on_load"]["seq"].as_u64(), Some(edit_seq), "{summary}");
        assert_eq!(summary["step_on_load"]["in_view"], true, "{summary}");
        // The search keeps the one step whose output has the phrase, and marks it.
        let find = &summary["find"];
        let kept: Vec<u64> = find["drawn"].as_array().unwrap().iter().map(|s| s["seq"].as_u64().unwrap()).collect();
        assert_eq!(kept, vec![failing["seq"].as_u64().unwrap()], "{find}");
        assert!(find["marks"].as_u64().unwrap() >= 1 && find["count"].as_str().unwrap().starts_with("1 of"), "{find}");
    }
}

/// A long real session (a Claude Code session of 183 tool calls): at 1400 px its
/// timeline is wider than the view and the overview strip shows the whole run; fitted,
/// the whole run is in the view and no two labels overlap.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn a_long_sessions_timeline_has_its_overview() {
    let store = TestStore::new();
    let logs = repo_root().join("tests/fixtures/real/claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    assert!(store.run(&["import", "--quiet", logs.to_str().unwrap()]).status.success());
    let id = store.sql("SELECT episode_id FROM episodes ORDER BY n_tools DESC LIMIT 1")[0]["episode_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (path, _) = show_html(&store, &id);
    let summary = check_page_with("episode", &file_url(&path), "long-session.png", &[("EPISTORE_WIDTH", "1400")]);
    assert!(summary["timeline_records"].as_u64().unwrap() > 300, "{}", summary["timeline_records"]);
    assert_eq!(summary["overview_visible"], true, "{summary}");
    let fit = &summary["fit"];
    assert!(fit["after"]["timeline"].as_u64() <= fit["after"]["view"].as_u64().map(|v| v + 1), "{fit}");
    assert_eq!(summary["label_overlaps"], 0);
}

/// An id prefix several episodes share: the browser lists them (each linking to its
/// page) and the CLI names them, instead of "no episode".
#[test]
fn an_ambiguous_id_prefix_lists_the_episodes_it_matches() {
    let store = TestStore::synthetic(1000, 11);
    let ids: Vec<String> = store
        .sql("SELECT episode_id FROM all_episodes ORDER BY episode_id")
        .iter()
        .map(|r| r["episode_id"].as_str().unwrap().to_string())
        .collect();
    // The 4-character prefix most ids share (1,000 ids over 65,536 prefixes: about 7
    // pairs expected; the seed is fixed).
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for id in &ids {
        *counts.entry(&id[..4]).or_default() += 1;
    }
    let (prefix, n) = counts.iter().max_by_key(|(_, n)| **n).map(|(p, n)| (p.to_string(), *n)).unwrap();
    assert!(n >= 2, "no shared prefix among {} ids", ids.len());
    let want: Vec<&String> = ids.iter().filter(|id| id.starts_with(&prefix)).collect();

    let ui = Ui::start(&store, &[]);
    let (status, body) = ui.get(&format!("/episodes/{prefix}"));
    assert_eq!(status, 200, "{body}");
    let data = page_data(&body);
    assert_eq!(data["kind"], "list");
    let listed: Vec<&str> = data["rows"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(listed, want.iter().map(|s| s.as_str()).collect::<Vec<_>>());

    let out = store.run(&["show", &prefix]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(want.iter().all(|id| err.contains(id.as_str())), "{err}");
}

/// People's annotations on the viewer: the episode page lists them (a withdrawn one
/// struck through, with who withdrew it), at laptop and phone widths, and refreshes
/// after a new one without a restart; the list filters by them and shows each
/// episode's active labels.
#[test]
#[cfg_attr(not(epistore_browser), ignore = "needs Chromium and playwright-core (.ci/run installs them)")]
fn annotations_show_on_the_episode_page_and_filter_the_list() {
    let (store, h3) = dataset_store();
    let ui = Ui::start(&store, &[]);
    let annotate = |args: &[&str]| -> Value {
        let out = store.run(&[&["annotate", "--format", "json"], args].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // The page before any annotation, so the server holds a session to outdate.
    let (status, _) = ui.get(&format!("/episodes/{h3}"));
    assert_eq!(status, 200);
    let long_note = "the checker passes because the test file was rewritten to assert True; ".repeat(3);
    let hacked = annotate(&[&h3, "--label", "reward hacking", "--note", &long_note, "--author", "ana"]);
    let flaky = annotate(&[&h3, "--label", "flaky test", "--author", "bo"]);
    annotate(&["--retract", flaky["id"].as_str().unwrap(), "--note", "it is stable", "--author", "ana"]);

    let (_, body) = ui.get(&format!("/episodes/{h3}"));
    let doc = page_data(&body);
    let listed: Vec<(&str, bool)> = doc["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["label"].as_str().unwrap(), a["retraction"].is_object()))
        .collect();
    assert_eq!(listed, [("reward hacking", false), ("flaky test", true)]);

    for (width, shot) in [("1280", "annotations-laptop.png"), ("400", "annotations-phone.png")] {
        let url = format!("http://{}/episodes/{h3}", ui.addr);
        let page = check_page_with("episode", &url, shot, &[("EPISTORE_WIDTH", width)]);
        let drawn = page["annotations"].as_array().unwrap();
        assert_eq!(drawn.len(), 2, "{page}");
        assert_eq!(drawn[0]["id"], hacked["id"]);
        assert_eq!((drawn[0]["withdrawn"].as_bool(), drawn[1]["withdrawn"].as_bool()), (Some(false), Some(true)));
        assert!(drawn[0]["text"].as_str().unwrap().contains("rewritten to assert True"), "{page}");
        assert!(drawn[1]["text"].as_str().unwrap().contains("withdrawn by ana: it is stable"), "{page}");
        assert!(drawn.iter().all(|a| a["within_window"] == json!(true)), "{width}px: {page}");
    }

    // The list: filtered by an active label, each row with its labels; a withdrawn
    // label selects nothing.
    let rows = |query: &str| {
        let (status, body) = ui.get(&format!("/episodes?{query}&format=json"));
        assert_eq!(status, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        table_rows(&doc)
    };
    let hacking = rows("annotation=reward+hacking");
    assert_eq!(hacking.len(), 1);
    assert_eq!(hacking[0]["id"], h3.as_str());
    assert_eq!(hacking[0]["annotations"], "reward hacking");
    assert!(rows("annotation=flaky+test").is_empty());
    assert_eq!(rows("").len(), 4);
    let url = format!("http://{}/episodes?annotation=reward+hacking", ui.addr);
    let list = check_page_with("list", &url, "annotations-list-phone.png", &[("EPISTORE_WIDTH", "400")]);
    assert_eq!(list["rows"], 1, "{list}");
}
