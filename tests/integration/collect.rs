//! `epistore collect` end to end: the agents' telemetry posted over HTTP in every
//! encoding, sessions committed when idle and again when they grow, a session seen both
//! through telemetry and through its file as one episode, refusals that store nothing,
//! and many senders at once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{repo_root, text, TestStore};

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(repo_root().join("tests/fixtures/constructed/otlp").join(rel)).unwrap()
}

const TRANSCRIPT: &str = "tests/fixtures/real/claude-code/tool_heavy.jsonl";
const TRANSCRIPT_TELEMETRY: &str = "claude-code/tool-heavy-session-telemetry.json";

/// A running `epistore collect`; stopped (SIGTERM, so it commits what it holds) by
/// [`Collect::stop`], killed if dropped.
struct Collect {
    child: Option<Child>,
    addr: String,
}

impl Collect {
    fn start(store: &TestStore, extra: &[&str]) -> Collect {
        let (child, addr) = store.listening("collect", "http", extra, Stdio::piped());
        Collect { child: Some(child), addr }
    }

    /// Stops it as a service manager would; returns what it printed on stderr.
    fn stop(mut self) -> String {
        let mut child = self.child.take().unwrap();
        // SAFETY: a plain kill(2) of our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let status = child.wait().unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success(), "collect exited {status}: {err}");
        err
    }

    fn post(&self, body: &[u8], headers: &[(&str, &str)], chunked: bool) -> u16 {
        post(&self.addr, "/v1/logs", body, headers, chunked)
    }
}

impl Drop for Collect {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One HTTP/1.1 POST: its status. `chunked`: 4 KiB chunks, no Content-Length.
fn post(addr: &str, path: &str, body: &[u8], headers: &[(&str, &str)], chunked: bool) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        // A server that refuses a body early closes before it is all sent: the writes
        // may fail; the answer is still there to read.
        let _ = (|| -> std::io::Result<()> {
            for chunk in body.chunks(4096) {
                s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())?;
                s.write_all(chunk)?;
                s.write_all(b"\r\n")?;
            }
            s.write_all(b"0\r\n\r\n")
        })();
    } else {
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes()).unwrap();
        let _ = s.write_all(body);
    }
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const PROTO: (&str, &str) = ("Content-Type", "application/x-protobuf");
const GZIP: (&str, &str) = ("Content-Encoding", "gzip");

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

fn proto(json: &[u8]) -> Vec<u8> {
    epistore_collect::decode::logs_protobuf(json).unwrap()
}

/// Polls `query` until `done` holds for its rows (the collector commits in the
/// background).
fn wait_for(store: &TestStore, query: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let rows = store.sql(query);
        if done(&rows) {
            return rows;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "still {rows:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn each_agents_telemetry_in_every_encoding_becomes_its_sessions_episode() {
    let store = TestStore::new();
    let collect = Collect::start(&store, &["--idle", "600"]);
    let claude = fixture("claude-code/claude-code-logs.json");
    let claude_numbers = fixture("claude-code/claude-code-logs.js-numbers.json");
    let codex = fixture("codex/codex-logs.json");
    let gemini = fixture("gemini-cli/gemini-cli-logs.json");
    assert_eq!(collect.post(&claude, &[JSON], false), 200);
    // The same records again, as the JS exporter writes numbers, gzipped and chunked:
    // a retried batch, counted once.
    assert_eq!(collect.post(&gzip(&claude_numbers), &[JSON, GZIP], true), 200);
    assert_eq!(collect.post(&proto(&codex), &[PROTO], true), 200);
    assert_eq!(collect.post(&gzip(&proto(&gemini)), &[PROTO, GZIP], false), 200);
    let log = collect.stop();
    assert_eq!(log.matches("committed").count(), 3, "{log}");
    let rows = store.sql(
        "SELECT episode, source_format, model, tokens_in, tokens_out, n_tools, agent_reported_complete FROM episodes \
         ORDER BY source_format",
    );
    let got: Vec<(String, String, i64, i64)> = rows
        .iter()
        .map(|r| {
            assert!(r["agent_reported_complete"].is_null(), "never guessed: {r}");
            (
                r["source_format"].as_str().unwrap().to_string(),
                r["model"].as_str().unwrap().to_string(),
                r["tokens_in"].as_i64().unwrap(),
                r["n_tools"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("claude-code-otel".into(), "claude-sonnet-4-5-20250929".into(), 36589, 2),
            ("codex-otel".into(), "gpt-5.1-codex-max".into(), 8231 + 8912, 2),
            ("gemini-cli-otel".into(), "gemini-2.5-pro".into(), 9120 + 9398, 1),
        ]
    );
    let verify = store.run(&["verify"]);
    assert!(verify.status.success(), "{}", text(&verify.stdout));
}

/// The Claude Code payload cut at record `at`: (first part, the rest).
fn halves(at: usize) -> (Vec<u8>, Vec<u8>) {
    let request: Value = serde_json::from_slice(&fixture("claude-code/claude-code-logs.json")).unwrap();
    let records = request.pointer("/resourceLogs/0/scopeLogs/0/logRecords").unwrap().as_array().unwrap().clone();
    let part = |r: &[Value]| {
        let mut p = request.clone();
        p["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = Value::Array(r.to_vec());
        p.to_string().into_bytes()
    };
    (part(&records[..at]), part(&records[at..]))
}

#[test]
fn an_idle_session_is_committed_and_superseded_when_it_goes_on() {
    let store = TestStore::new();
    let collect = Collect::start(&store, &["--idle", "0.3"]);
    // The first half: the prompt, a request, its reply and the Bash decision.
    let (first, rest) = halves(4);
    assert_eq!(collect.post(&first, &[JSON], false), 200);
    let q = "SELECT n_tools, supersedes IS NOT NULL AS grew, cost_usd FROM episodes";
    let rows = wait_for(&store, q, |r| r.len() == 1);
    assert_eq!(rows[0]["n_tools"], 0);
    assert_eq!(rows[0]["grew"], false);
    assert_eq!(collect.post(&rest, &[JSON], true), 200);
    let rows = wait_for(&store, q, |r| r.len() == 1 && r[0]["grew"] == true);
    assert_eq!(rows[0]["n_tools"], 2);
    assert!((rows[0]["cost_usd"].as_f64().unwrap() - 0.0323151).abs() < 1e-6, "{rows:?}");
    collect.stop();
    // Both commits are kept; the later supersedes the earlier.
    let all = store.sql("SELECT count(*) AS n FROM all_episodes");
    assert_eq!(all[0]["n"], 2);
}

fn import(store: &TestStore, path: &std::path::Path) {
    let out = store.run(&["import", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The merged episode: the transcript's six tools, the telemetry's cost, and the
/// telemetry's facts on the two Bash calls it names.
fn assert_merged(store: &TestStore) {
    let rows = store.sql("SELECT source_format, n_tools, cost_usd, supersedes IS NOT NULL AS merged FROM episodes");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["source_format"], "claude-code");
    assert_eq!(rows[0]["n_tools"], 6);
    assert!((rows[0]["cost_usd"].as_f64().unwrap() - 0.0528).abs() < 1e-9);
    assert_eq!(rows[0]["merged"], true);
    let facts = store.sql(
        "SELECT json_get_str(extra, 'telemetry', 'decision_source') AS source, \
         json_get_float(extra, 'telemetry', 'duration_ms') AS ms FROM tools \
         WHERE json_get_str(extra, 'telemetry', 'from') = 'telemetry' ORDER BY seq",
    );
    let facts: Vec<(String, f64)> =
        facts.iter().map(|r| (r["source"].as_str().unwrap().to_string(), r["ms"].as_f64().unwrap())).collect();
    assert_eq!(facts, vec![("user_temporary".to_string(), 1150.0), ("config".to_string(), 72.0)]);
}

#[test]
fn telemetry_arriving_after_the_session_file_merges_into_its_episode() {
    let store = TestStore::new();
    import(&store, &repo_root().join(TRANSCRIPT));
    let collect = Collect::start(&store, &["--idle", "600"]);
    assert_eq!(collect.post(&fixture(TRANSCRIPT_TELEMETRY), &[JSON], false), 200);
    collect.stop();
    assert_merged(&store);
}

#[test]
fn a_session_file_imported_after_its_telemetry_merges_into_one_episode() {
    let store = TestStore::new();
    let collect = Collect::start(&store, &["--idle", "600"]);
    assert_eq!(collect.post(&proto(&fixture(TRANSCRIPT_TELEMETRY)), &[PROTO], false), 200);
    collect.stop();
    assert_eq!(store.sql("SELECT source_format FROM episodes")[0]["source_format"], "claude-code-otel");
    import(&store, &repo_root().join(TRANSCRIPT));
    assert_merged(&store);
}

#[test]
fn refused_requests_store_nothing_and_an_open_collector_needs_a_token() {
    let store = TestStore::new();
    // Off loopback without a token: refused before anything is created.
    let out = store.run(&["collect", "--addr", "0.0.0.0:0"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--token"), "{}", text(&out.stderr));
    assert!(!store.path().exists());
    let collect = Collect::start(&store, &["--token", "t0ken", "--idle", "0.2"]);
    let body = fixture("codex/codex-logs.json");
    let auth = ("Authorization", "Bearer t0ken");
    assert_eq!(collect.post(&body, &[JSON], false), 401);
    assert_eq!(collect.post(&body, &[JSON, ("Authorization", "Bearer nope")], false), 401);
    assert_eq!(collect.post(&body[..body.len() / 2], &[JSON, auth], false), 400);
    assert_eq!(collect.post(b"\x0a\x05\x0a\x03\xff", &[PROTO, auth], false), 400);
    assert_eq!(collect.post(&body, &[("Content-Type", "text/csv"), auth], false), 415);
    assert_eq!(collect.post(&vec![b' '; 17 << 20], &[JSON, auth], true), 413);
    std::thread::sleep(Duration::from_millis(600));
    collect.stop();
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes")[0]["n"], 0);
}

/// The Claude Code payload as session `id`'s request number `n`: its records with
/// their own sequence numbers and times, so no two requests repeat a record.
fn numbered(base: &Value, id: &str, n: usize) -> Vec<u8> {
    let mut r = base.clone();
    let records = r.pointer_mut("/resourceLogs/0/scopeLogs/0/logRecords").unwrap().as_array_mut().unwrap();
    let per = records.len();
    for (i, rec) in records.iter_mut().enumerate() {
        let t: u64 = rec["timeUnixNano"].as_str().unwrap().parse().unwrap();
        rec["timeUnixNano"] = Value::String((t + (n as u64) * 60_000_000_000).to_string());
        for kv in rec["attributes"].as_array_mut().unwrap() {
            match kv["key"].as_str().unwrap() {
                "session.id" => kv["value"] = serde_json::json!({"stringValue": id}),
                "event.sequence" => kv["value"] = serde_json::json!({"intValue": (n * per + i).to_string()}),
                "event.timestamp" => kv["value"] = serde_json::json!({"stringValue": format!("n{n}")}),
                _ => {}
            }
        }
    }
    r.to_string().into_bytes()
}

#[test]
fn fifty_concurrent_senders_lose_nothing() {
    const SENDERS: usize = 50;
    const REQUESTS: usize = 8;
    let store = TestStore::new();
    let collect = Collect::start(&store, &["--idle", "600"]);
    let base: Value = serde_json::from_slice(&fixture("claude-code/claude-code-logs.json")).unwrap();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for s in 0..SENDERS {
            let (addr, base) = (&collect.addr, &base);
            scope.spawn(move || {
                let id = format!("session-{s:02}");
                for n in 0..REQUESTS {
                    let body = numbered(base, &id, n);
                    let (body, headers): (Vec<u8>, Vec<(&str, &str)>) = match n % 3 {
                        0 => (body, vec![JSON]),
                        1 => (proto(&body), vec![PROTO]),
                        _ => (gzip(&body), vec![JSON, GZIP]),
                    };
                    assert_eq!(post(addr, "/v1/logs", &body, &headers, n % 2 == 0), 200, "{id} #{n}");
                }
            });
        }
    });
    let sent = started.elapsed();
    assert!(sent < Duration::from_secs(60), "{SENDERS} senders took {sent:?}");
    collect.stop();
    let rows = store.sql("SELECT episode, n_tools, tokens_out FROM episodes ORDER BY episode");
    assert_eq!(rows.len(), SENDERS);
    for r in rows {
        assert_eq!(r["n_tools"], (2 * REQUESTS) as i64, "{r}");
        assert_eq!(r["tokens_out"], (330 * REQUESTS) as i64, "{r}");
    }
}

/// The transcript's first `keep` lines (a session file as it was earlier).
fn transcript_head(dir: &std::path::Path, keep: usize) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo_root().join(TRANSCRIPT)).unwrap();
    let head: String = text.lines().take(keep).map(|l| format!("{l}\n")).collect();
    let path = dir.join("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl");
    std::fs::write(&path, head).unwrap();
    path
}

#[test]
fn a_session_file_that_grows_after_the_merge_supersedes_the_merged_episode() {
    let store = TestStore::new();
    let logs = store.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    // The file as it was, then its telemetry (merged), then the file grown to its end.
    import(&store, &transcript_head(&logs, 20));
    let telemetry = store.dir.path().join("telemetry.json");
    std::fs::write(&telemetry, fixture(TRANSCRIPT_TELEMETRY)).unwrap();
    import(&store, &telemetry);
    std::fs::copy(repo_root().join(TRANSCRIPT), logs.join("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")).unwrap();
    import(&store, &logs.join("d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl"));
    // One current episode: the grown file with the telemetry, superseding the merge.
    assert_merged(&store);
    let chain = store.sql("SELECT count(*) AS n FROM all_episodes WHERE superseded_by IS NOT NULL");
    assert_eq!(chain[0]["n"], 2, "the first import and the first merge are both superseded");
}

#[test]
fn a_session_with_subagents_keeps_their_calls_when_its_telemetry_merges() {
    let store = TestStore::new();
    let big = repo_root().join("tests/fixtures/real/claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl");
    let subagents = repo_root().join("tests/fixtures/real/claude-code/4d5611e5-241a-462a-8d15-5122611a9569");
    let out = store.run(&["import", big.to_str().unwrap(), subagents.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let before = store.sql("SELECT n_tools FROM episodes")[0]["n_tools"].as_i64().unwrap();
    // Telemetry of the same session (the constructed payload, its session id changed).
    let telemetry = String::from_utf8(fixture(TRANSCRIPT_TELEMETRY))
        .unwrap()
        .replace("d6e0bada-1959-4eec-a9d2-0bfade768d8f", "4d5611e5-241a-462a-8d15-5122611a9569");
    let path = store.dir.path().join("telemetry.json");
    std::fs::write(&path, telemetry).unwrap();
    import(&store, &path);
    let rows = store.sql("SELECT source_format, n_tools, cost_usd FROM episodes");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["source_format"], "claude-code");
    assert_eq!(rows[0]["n_tools"].as_i64().unwrap(), before, "the subagents' calls are still there");
    // Importing the session again finds its telemetry in the merged episode, not in its
    // subagents' transcripts: nothing changes.
    let again = store.run(&["import", big.to_str().unwrap(), subagents.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes")[0]["n"], 2);
}
