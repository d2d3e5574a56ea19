//! The receiver against the constructed agent payloads (tests/fixtures/constructed/otlp),
//! over real HTTP on loopback, with a committer that records what it is given.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::*;

fn fixture(agent: &str, name: &str) -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/constructed/otlp").join(agent).join(name);
    std::fs::read(path).unwrap()
}

/// The events the importer reads from a request (as OTLP JSON).
fn events_of(request: &Value) -> Vec<(String, String, u64, String)> {
    epistore_import::otel::request_events(request)
        .into_iter()
        .map(|e| (e.session, e.name, e.nanos, Value::Object(e.attrs).to_string()))
        .collect()
}

#[test]
fn json_and_protobuf_decode_to_the_events_of_the_payload() {
    for (agent, name) in [
        ("claude-code", "claude-code-logs.json"),
        ("claude-code", "claude-code-logs.js-numbers.json"),
        ("codex", "codex-logs.json"),
        ("gemini-cli", "gemini-cli-logs.json"),
    ] {
        let body = fixture(agent, name);
        let original: Value = serde_json::from_slice(&body).unwrap();
        let want = events_of(&original);
        assert!(want.len() >= 7, "{name}");
        let from_json = decode::decode(Signal::Logs, Encoding::Json, &body).unwrap();
        assert_eq!(events_of(&from_json), want, "{name} as JSON");
        let proto = decode::logs_protobuf(&body).unwrap();
        let from_proto = decode::decode(Signal::Logs, Encoding::Protobuf, &proto).unwrap();
        assert_eq!(events_of(&from_proto), want, "{name} as protobuf");
    }
}

#[test]
fn bodies_that_are_not_otlp_are_refused_saying_why() {
    assert!(decode::decode(Signal::Logs, Encoding::Json, b"{\"resourceLogs\": 3}")
        .unwrap_err()
        .contains("not an OTLP"));
    assert!(decode::decode(Signal::Logs, Encoding::Protobuf, b"\xff\xff\xff").is_err());
    assert_eq!(Encoding::of(Some("application/json; charset=utf-8")), Some(Encoding::Json));
    assert_eq!(Encoding::of(Some("text/plain")), None);
    // A gzip bomb stops at the limit.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![b'{'; 1 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(matches!(decode::decompress(Some("gzip"), &bomb, 1000), Err(decode::Refused::TooLarge(_))));
    assert!(matches!(decode::decompress(Some("br"), b"x", 1000), Err(decode::Refused::Unsupported(_))));
    assert!(matches!(decode::decompress(Some("gzip"), b"not gzip", 1000), Err(decode::Refused::Malformed(_))));
}

#[test]
fn a_request_of_two_sessions_is_cut_in_two_and_strangers_are_counted() {
    let one: Value = serde_json::from_slice(&fixture("codex", "codex-logs.json")).unwrap();
    let text = one.to_string();
    let other: Value =
        serde_json::from_str(&text.replace("019d7a3e-5c21-7b40-9e8f-2a6c4d1b3e57", "other-session")).unwrap();
    let mut both = one.clone();
    both["resourceLogs"].as_array_mut().unwrap().extend(other["resourceLogs"].as_array().unwrap().iter().cloned());
    // A record of no known agent.
    both["resourceLogs"].as_array_mut().unwrap().push(serde_json::json!({
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "some-app"}}]},
        "scopeLogs": [{"scope": {"name": "x"}, "logRecords": [{"body": {"stringValue": "hello"}}]}]
    }));
    let split = spool::split(&both);
    assert_eq!(split.sessions.len(), 2);
    assert_eq!(split.unattributed, 1);
    assert_eq!(split.records, 2 * 10 + 1);
    for (session, part, _) in &split.sessions {
        let events = events_of(part);
        assert_eq!(events.len(), 10);
        assert!(events.iter().all(|e| e.0 == session.id));
    }
}

/// A committed file: its name and its bytes.
type Kept = (String, Vec<u8>);

/// A committer that keeps a copy of every file it is given.
#[derive(Clone, Default)]
struct Recording(Arc<Mutex<Vec<Kept>>>);

impl Committer for Recording {
    fn commit(&self, file: &Path) -> std::result::Result<Committed, String> {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        self.0.lock().unwrap().push((name, std::fs::read(file).unwrap()));
        Ok(Committed { imported: 1, ..Committed::default() })
    }
}

struct Running {
    addr: SocketAddr,
    grpc: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: Option<std::thread::JoinHandle<()>>,
}

fn loopback() -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

impl Running {
    /// The collector on two loopback ports: OTLP/HTTP and OTLP/gRPC.
    fn start(config: Config, committer: Recording) -> Running {
        let collector = Collector::new(config, committer, |_| {}).unwrap();
        let (http, grpc) = (loopback(), loopback());
        let (addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(async move {
                let http = tokio::net::TcpListener::from_std(http).unwrap();
                let grpc = tokio::net::TcpListener::from_std(grpc).unwrap();
                collector
                    .serve(http, Some(grpc), async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Running { addr, grpc: grpc_addr, stop: Some(stop), done: Some(done) }
    }

    fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.done.take().unwrap().join().unwrap();
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, body). `chunked` sends the body
/// in 1 KiB chunks without a Content-Length.
fn send(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &[u8], chunked: bool) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        for chunk in body.chunks(1024) {
            s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).unwrap();
            s.write_all(chunk).unwrap();
            s.write_all(b"\r\n").unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
    } else {
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body).unwrap();
    }
    let mut response = Vec::new();
    s.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const PROTO: (&str, &str) = ("Content-Type", "application/x-protobuf");

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

#[test]
fn every_encoding_reaches_the_session_file_and_a_stop_commits_it() {
    let dir = tempfile::tempdir().unwrap();
    let committed = Recording::default();
    let run = Running::start(Config::new(dir.path().join("spool")), committed.clone());
    let body = fixture("codex", "codex-logs.json");
    let proto = decode::logs_protobuf(&body).unwrap();
    assert_eq!(send(run.addr, "/v1/logs", &[JSON], &body, false), (200, "{}".to_string()));
    assert_eq!(send(run.addr, "/v1/logs", &[PROTO], &proto, true).0, 200);
    assert_eq!(send(run.addr, "/v1/logs", &[PROTO, ("Content-Encoding", "gzip")], &gzip(&proto), false).0, 200);
    assert_eq!(send(run.addr, "/v1/logs", &[JSON, ("Content-Encoding", "gzip")], &gzip(&body), true).0, 200);
    run.stop();
    let files = committed.0.lock().unwrap().clone();
    assert_eq!(files.len(), 1, "one session, committed once at the stop");
    assert_eq!(files[0].0, "019d7a3e-5c21-7b40-9e8f-2a6c4d1b3e57.otlp.jsonl");
    let text = String::from_utf8(files[0].1.clone()).unwrap();
    assert_eq!(text.lines().count(), 4);
    // Each line reads as the payload's events, whatever its encoding on the wire.
    let want = events_of(&serde_json::from_slice(&body).unwrap());
    for line in text.lines() {
        assert_eq!(events_of(&serde_json::from_str(line).unwrap()), want);
    }
}

#[test]
fn refused_requests_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let committed = Recording::default();
    let mut config = Config::new(dir.path().join("spool"));
    config.token = Some("s3cret".into());
    config.max_body = 64 * 1024;
    let run = Running::start(config, committed.clone());
    let body = fixture("claude-code", "claude-code-logs.json");
    let auth = ("Authorization", "Bearer s3cret");
    assert_eq!(send(run.addr, "/v1/logs", &[JSON], &body, false).0, 401);
    assert_eq!(send(run.addr, "/v1/logs", &[JSON, ("Authorization", "Bearer wrong")], &body, false).0, 401);
    assert_eq!(send(run.addr, "/v1/logs", &[("Content-Type", "text/plain"), auth], &body, false).0, 415);
    let (status, why) = send(run.addr, "/v1/logs", &[JSON, auth], b"{\"resourceLogs\": [{\"scopeLogs\": 7}]}", false);
    assert_eq!(status, 400);
    assert!(why.contains("ExportLogsServiceRequest"), "{why}");
    assert_eq!(send(run.addr, "/v1/logs", &[PROTO, auth], b"\x0a\xff\xff\xff\xff", false).0, 400);
    let big = vec![b' '; 100 * 1024];
    assert_eq!(send(run.addr, "/v1/logs", &[JSON, auth], &big, true).0, 413);
    assert_eq!(send(run.addr, "/v1/logs", &[JSON, auth, ("Content-Encoding", "gzip")], &gzip(&big), false).0, 413);
    // Traces and metrics are decoded and counted, not stored.
    assert_eq!(send(run.addr, "/v1/traces", &[JSON, auth], b"{\"resourceSpans\": []}", false).0, 200);
    assert_eq!(send(run.addr, "/v1/metrics", &[JSON, auth], b"{}", false).0, 200);
    run.stop();
    assert!(committed.0.lock().unwrap().is_empty());
    // Nothing spooled: no session file (the spool's lock file aside).
    let spooled: Vec<_> = walk(&dir.path().join("spool")).into_iter().filter(|p| !p.ends_with(".lock")).collect();
    assert!(spooled.is_empty(), "{spooled:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn an_idle_session_is_committed_and_committed_again_when_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let committed = Recording::default();
    let mut config = Config::new(dir.path().join("spool"));
    config.idle = Duration::from_millis(300);
    config.tick = Duration::from_millis(50);
    let run = Running::start(config, committed.clone());
    let body = fixture("claude-code", "claude-code-logs.json");
    let request: Value = serde_json::from_slice(&body).unwrap();
    // The session split across two requests: its first four records, then the rest.
    let records = request.pointer("/resourceLogs/0/scopeLogs/0/logRecords").unwrap().as_array().unwrap().clone();
    let mut first = request.clone();
    first["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = Value::Array(records[..4].to_vec());
    let mut rest = request.clone();
    rest["resourceLogs"][0]["scopeLogs"][0]["logRecords"] = Value::Array(records[4..].to_vec());
    assert_eq!(send(run.addr, "/v1/logs", &[JSON], first.to_string().as_bytes(), false).0, 200);
    let wait = |n: usize| {
        let start = std::time::Instant::now();
        while committed.0.lock().unwrap().len() < n {
            assert!(start.elapsed() < Duration::from_secs(20), "no commit");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(1);
    assert_eq!(send(run.addr, "/v1/logs", &[JSON], rest.to_string().as_bytes(), false).0, 200);
    wait(2);
    run.stop();
    let files = committed.0.lock().unwrap().clone();
    assert_eq!(files.len(), 2, "nothing left to commit at the stop");
    // The second commit's file grew from the first: the earlier one is its prefix.
    assert!(files[1].1.starts_with(&files[0].1));
    let all: usize = String::from_utf8(files[1].1.clone())
        .unwrap()
        .lines()
        .map(|l| events_of(&serde_json::from_str(l).unwrap()).len())
        .sum();
    assert_eq!(all, records.len());
}

#[test]
fn session_files_left_by_a_stopped_collector_are_committed_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool");
    let left = spool_dir.join("codex-otel").join("s.otlp.jsonl");
    std::fs::create_dir_all(left.parent().unwrap()).unwrap();
    std::fs::write(&left, b"{\"resourceLogs\": []}\n").unwrap();
    let committed = Recording::default();
    let mut config = Config::new(spool_dir);
    config.tick = Duration::from_millis(50);
    let run = Running::start(config, committed.clone());
    let start = std::time::Instant::now();
    while committed.0.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    run.stop();
    assert_eq!(committed.0.lock().unwrap()[0].0, "s.otlp.jsonl");
}

/// One OTLP/gRPC logs export, gzip-compressed as Gemini CLI sends it: the status code.
fn export_grpc(addr: SocketAddr, json: &[u8], token: Option<&str>) -> tonic::Code {
    use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    let request: ExportLogsServiceRequest = serde_json::from_slice(json).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let mut client = LogsServiceClient::connect(format!("http://{addr}"))
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        let mut req = tonic::Request::new(request);
        if let Some(t) = token {
            req.metadata_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        match client.export(req).await {
            Ok(_) => tonic::Code::Ok,
            Err(status) => status.code(),
        }
    })
}

#[test]
fn grpc_exports_reach_the_same_session_file_as_http() {
    let dir = tempfile::tempdir().unwrap();
    let committed = Recording::default();
    let mut config = Config::new(dir.path().join("spool"));
    config.token = Some("t".into());
    let run = Running::start(config, committed.clone());
    let body = fixture("gemini-cli", "gemini-cli-logs.json");
    assert_eq!(export_grpc(run.grpc, &body, None), tonic::Code::Unauthenticated);
    assert_eq!(export_grpc(run.grpc, &body, Some("t")), tonic::Code::Ok);
    assert_eq!(send(run.addr, "/v1/logs", &[JSON, ("Authorization", "Bearer t")], &body, false).0, 200);
    run.stop();
    let files = committed.0.lock().unwrap().clone();
    assert_eq!(files.len(), 1);
    let want = events_of(&serde_json::from_slice(&body).unwrap());
    let lines: Vec<&str> = std::str::from_utf8(&files[0].1).unwrap().lines().collect();
    assert_eq!(lines.len(), 2, "the refused export left nothing");
    for line in lines {
        assert_eq!(events_of(&serde_json::from_str(line).unwrap()), want);
    }
}

#[test]
fn a_reopened_spool_commits_only_what_is_new_and_drops_a_torn_line() {
    let dir = tempfile::tempdir().unwrap();
    let spool_dir = dir.path().join("spool");
    let codex = spool_dir.join("codex-otel");
    std::fs::create_dir_all(&codex).unwrap();
    // Committed whole before the stop: nothing to do.
    let done = codex.join("done.otlp.jsonl");
    std::fs::write(&done, b"{\"resourceLogs\": []}\n").unwrap();
    std::fs::write(codex.join("done.otlp.jsonl.committed"), b"21").unwrap();
    // Grew after its commit, and a write was cut mid-line.
    let grew = codex.join("grew.otlp.jsonl");
    std::fs::write(&grew, b"{\"resourceLogs\": []}\n{\"resourceLogs\": []}\n{\"resourceLo").unwrap();
    std::fs::write(codex.join("grew.otlp.jsonl.committed"), b"21").unwrap();
    let spool = spool::Spool::open(&spool_dir).unwrap();
    assert_eq!(spool.pending(), 21, "the new whole line only");
    assert_eq!(spool.open_sessions(), 1);
    assert_eq!(std::fs::read(&grew).unwrap(), b"{\"resourceLogs\": []}\n{\"resourceLogs\": []}\n");
    // One collector per spool.
    assert!(matches!(spool::Spool::open(&spool_dir), Err(Error::SpoolInUse(_))));
    drop(spool);
    assert!(spool::Spool::open(&spool_dir).is_ok());
}
