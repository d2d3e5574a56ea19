//! `epistore watch`: sessions imported while their agents write them, with `watch`
//! killed at random points.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::util::{repo_root, TestStore};

const CLAUDE: &str =
    "tests/fixtures/real/claude-code/generated/projects/-srv-counter/555cbe93-d68e-41b1-9012-c94ca9ff3588.jsonl";
const CODEX: &str =
    "tests/fixtures/real/codex/generated/rollout-2026-12-01T09-03-11-01a230d7-ffed-7313-9f3e-3e14281f1679.jsonl";

/// A small deterministic generator (the trials are the same on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// What each stored episode is: (format, label, tools, messages, final revision).
fn contents(store: &TestStore) -> Vec<String> {
    store
        .sql("SELECT harness_name, episode, n_tools, n_messages, final_revision FROM episodes ORDER BY 1")
        .iter()
        .map(|r| r.to_string())
        .collect()
}

/// Appends `bytes` to `file` as a writer does: in two writes, the first ending
/// mid-line when the chunk is long enough.
fn append(file: &Path, bytes: &[u8], split: usize) {
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    let cut = split.min(bytes.len());
    f.write_all(&bytes[..cut]).unwrap();
    f.flush().unwrap();
    f.write_all(&bytes[cut..]).unwrap();
}

#[test]
fn watch_killed_at_random_points_ends_with_exactly_the_final_episodes() {
    let store = TestStore::new();
    let logs = store.dir.path().join("logs");
    let project = logs.join("projects/-srv-counter");
    std::fs::create_dir_all(&project).unwrap();
    let sources = [repo_root().join(CLAUDE), repo_root().join(CODEX)];
    let targets =
        [project.join(Path::new(CLAUDE).file_name().unwrap()), logs.join(Path::new(CODEX).file_name().unwrap())];
    let full: Vec<Vec<u8>> = sources.iter().map(|s| std::fs::read(s).unwrap()).collect();
    // Each log starts with its first lines; the rest is written while watch runs.
    let mut written: Vec<usize> = Vec::new();
    for (bytes, target) in full.iter().zip(&targets) {
        let first = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(2).unwrap().0 + 1;
        std::fs::write(target, &bytes[..first]).unwrap();
        written.push(first);
    }
    let mut rng = Lcg(7);
    let trials = 24;
    for trial in 0..trials {
        let mut child = store
            .command()
            .args(["watch", "--quiet", "--debounce-ms", "30"])
            .arg(&logs)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Append a few lines (the last trial writes the rest), sometimes cut mid-line.
        for (k, (bytes, target)) in full.iter().zip(&targets).enumerate() {
            let rest = &bytes[written[k]..];
            let lines = 1 + rng.next(6) as usize;
            let end = if trial == trials - 1 {
                rest.len()
            } else {
                rest.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(lines - 1).map_or(rest.len(), |(i, _)| i + 1)
            };
            let chunk = &rest[..end];
            append(target, chunk, rng.next(chunk.len().max(1) as u64) as usize);
            written[k] += end;
        }
        std::thread::sleep(Duration::from_millis(rng.next(400)));
        child.kill().unwrap();
        child.wait().unwrap();
    }
    assert_eq!(written, full.iter().map(Vec::len).collect::<Vec<_>>());
    // A last watch reads what the killed ones left, and stops once idle.
    let out = store.command().args(["watch", "--quiet", "--exit-when-idle-ms", "1000"]).arg(&logs).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Exactly the episodes of the finished logs: one per log, as a direct import of
    // the final files makes them (earlier imports of shorter copies are superseded).
    let direct = TestStore::new();
    let out = direct.command().args(["import", "--quiet"]).args(&targets).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(contents(&store), contents(&direct));
    assert_eq!(store.episode_count(), 2);
    let (intact, report) = store.verify();
    assert!(intact, "{report}");
}

/// A line still being written waits; once it ends, the grown log supersedes its first
/// import, which is then counted once.
#[test]
fn a_half_written_line_waits_and_a_grown_log_supersedes() {
    let store = TestStore::new();
    let logs = store.dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let bytes = std::fs::read(repo_root().join(CODEX)).unwrap();
    let target = logs.join(Path::new(CODEX).file_name().unwrap());
    let newlines: Vec<usize> = bytes.iter().enumerate().filter(|(_, &b)| b == b'\n').map(|(i, _)| i).collect();
    // Half of the log, then half of its next line.
    let half = newlines[newlines.len() / 2] + 1;
    let mid = half + (newlines[newlines.len() / 2 + 1] - half) / 2;
    std::fs::write(&target, &bytes[..mid]).unwrap();
    let watch = |store: &TestStore| {
        let out = store.command().args(["watch", "--exit-when-idle-ms", "300"]).arg(&logs).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let said = watch(&store);
    assert_eq!(store.episode_count(), 0, "the log waits for its last line: {said}");
    std::fs::write(&target, &bytes[..half]).unwrap();
    watch(&store);
    assert_eq!(store.episode_count(), 1);
    std::fs::write(&target, &bytes).unwrap();
    let said = watch(&store);
    assert!(said.contains("1 grew"), "{said}");
    assert_eq!(store.episode_count(), 1, "the grown log supersedes its first import");
    let all = store.sql("SELECT count(*) AS n FROM all_episodes");
    assert_eq!(all[0]["n"], 2, "both imports are kept");
}

/// One OpenCode message with one text part, as OpenCode 1.2 writes them.
fn opencode_message(db: &rusqlite::Connection, n: i64, role: &str, text: &str) {
    let (mid, pid) = (format!("msg_{n:04}"), format!("prt_{n:04}"));
    let data = match role {
        "user" => serde_json::json!({"role": "user", "time": {"created": 1_770_000_000_000i64 + n}}),
        _ => {
            serde_json::json!({"role": "assistant", "modelID": "gpt-5.2", "time": {"created": 1_770_000_000_000i64 + n}})
        }
    };
    db.execute("INSERT INTO message VALUES (?1, 'ses_live', ?2, ?2, ?3)", rusqlite::params![mid, n, data.to_string()])
        .unwrap();
    let part = serde_json::json!({"type": "text", "text": text});
    db.execute(
        "INSERT INTO part VALUES (?1, ?2, 'ses_live', ?3, ?3, ?4)",
        rusqlite::params![pid, mid, n, part.to_string()],
    )
    .unwrap();
}

#[test]
fn an_opencode_store_written_while_watched_is_read_through_its_write_ahead_log() {
    let store = TestStore::new();
    let data = store.dir.path().join("opencode");
    std::fs::create_dir_all(&data).unwrap();
    // OpenCode keeps its connection open in WAL mode: what it writes sits in the log.
    let db = rusqlite::Connection::open(data.join("opencode.db")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
         CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
         CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
         INSERT INTO session VALUES ('ses_live', 'global', NULL, 's', '/w', 't', '1.2.0', 1, 1);",
    )
    .unwrap();
    opencode_message(&db, 1, "user", "Rename the flag.");
    opencode_message(&db, 2, "assistant", "Renamed it.");
    let mut child = store
        .command()
        .args(["watch", "--quiet", "--debounce-ms", "50", "--exit-when-idle-ms", "4000"])
        .arg(&data)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !store.path().join("epistore.redb").exists() || store.episode_count() == 0 {
        assert!(std::time::Instant::now() < deadline, "the session never arrived");
        std::thread::sleep(Duration::from_millis(200));
    }
    let first = store.sql("SELECT episode_id FROM episodes")[0]["episode_id"].as_str().unwrap().to_string();
    // The person goes on, in the same session.
    opencode_message(&db, 3, "user", "Also update the docs.");
    opencode_message(&db, 4, "assistant", "Updated them.");
    assert!(child.wait().unwrap().success());
    let current = store.sql("SELECT supersedes FROM episodes");
    assert_eq!(current.len(), 1, "{current:?}");
    assert_eq!(current[0]["supersedes"], first.as_str());
    assert_eq!(store.sql("SELECT count(*) AS n FROM all_episodes")[0]["n"], 2);
    assert_eq!(store.sql("SELECT count(*) AS n FROM interventions")[0]["n"], 1, "the second prompt");
    drop(db);
}
