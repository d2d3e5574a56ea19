//! Helpers shared by the integration tests: a store in a temp dir, running the CLI,
//! and writing packages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_epistore");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn dataset() -> PathBuf {
    repo_root().join("datasets/login-validation")
}

/// A store in its own temporary directory, driven through the CLI.
pub struct TestStore {
    pub dir: TempDir,
}

impl TestStore {
    pub fn new() -> TestStore {
        TestStore { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.arg("--store").arg(self.path()).env_remove("EPISTORE_STORE");
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().unwrap()
    }

    /// Every base table exported as JSON Lines (uncompressed text, so a string in any
    /// column shows in the bytes) into `dir`, one file per table.
    pub fn export_tables_jsonl(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for table in ["episodes", "actions", "tools", "messages", "checks", "interventions", "context", "entropy"] {
            let file = dir.join(format!("{table}.jsonl"));
            let out = self.run(&["export", "--table", table, "--format", "jsonl", "--out", file.to_str().unwrap()]);
            assert!(out.status.success(), "export {table}: {}", text(&out.stderr));
        }
    }

    /// `epistore serve` on a free loopback port with `extra` arguments: the running
    /// child and the address it printed (`host:port`).
    pub fn serve(&self, extra: &[&str]) -> (std::process::Child, String) {
        self.listening("serve", "grpc", extra, std::process::Stdio::null())
    }

    /// A server command (`serve`, `ui`, `collect`) on a free loopback port with `extra`
    /// arguments, started and waited for: the running child (its standard error as
    /// `stderr` says) and the address of its `listening on SCHEME://ADDR` line.
    pub fn listening(
        &self,
        command: &str,
        scheme: &str,
        extra: &[&str],
        stderr: std::process::Stdio,
    ) -> (std::process::Child, String) {
        let mut child = self
            .command()
            .args([command, "--addr", "127.0.0.1:0"])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        let prefix = format!("listening on {scheme}://");
        let addr = line.trim().strip_prefix(&prefix).unwrap_or_else(|| panic!("{line:?}")).to_string();
        (child, addr)
    }

    /// Writes a synthetic population (`epistore synth`, small tool outputs) beside the
    /// store and returns its directory; nothing is ingested.
    pub fn synth(&self, episodes: usize, seed: u64) -> PathBuf {
        let pop = self.dir.path().join("pop");
        let (episodes, seed) = (episodes.to_string(), seed.to_string());
        let out = self.run(&[
            "synth",
            "--episodes",
            &episodes,
            "--out",
            pop.to_str().unwrap(),
            "--seed",
            &seed,
            "--output-scale",
            "0.05",
            "--quiet",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        pop
    }

    /// A store holding a synthetic population of `episodes` ([`TestStore::synth`]).
    pub fn synthetic(episodes: usize, seed: u64) -> TestStore {
        let store = TestStore::new();
        let pop = store.synth(episodes, seed);
        assert!(store.ingest(&[&pop]).status.success());
        store
    }

    pub fn ingest(&self, paths: &[&Path]) -> Output {
        let mut cmd = self.command();
        cmd.arg("ingest").arg("--quiet");
        cmd.args(paths);
        cmd.output().unwrap()
    }

    /// Ingests and returns the JSON summary.
    pub fn ingest_json(&self, paths: &[&Path]) -> (i32, Value) {
        let mut cmd = self.command();
        cmd.args(["ingest", "--quiet", "--format", "json"]).args(paths);
        let out = cmd.output().unwrap();
        let value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("ingest printed no JSON ({e}): {}{}", text(&out.stdout), text(&out.stderr)));
        (out.status.code().unwrap(), value)
    }

    pub fn sql(&self, query: &str) -> Vec<Value> {
        let out = self.run(&["sql", "--format", "json", query]);
        assert!(out.status.success(), "sql failed: {}", text(&out.stderr));
        match serde_json::from_slice(&out.stdout).unwrap() {
            Value::Array(rows) => rows,
            other => panic!("not an array: {other}"),
        }
    }

    /// The id of the bundled dataset's H3 episode (after ingesting it).
    pub fn h3_episode(&self) -> String {
        self.sql("SELECT episode_id FROM episodes WHERE harness_level = 'H3'")[0]["episode_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn episode_count(&self) -> i64 {
        self.sql("SELECT count(*) AS n FROM episodes")[0]["n"].as_i64().unwrap()
    }

    /// `verify --format json`, asserting nothing.
    pub fn verify(&self) -> (bool, Value) {
        let out = self.run(&["verify", "--format", "json"]);
        let value: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("verify printed no JSON ({e}): {}", text(&out.stderr)));
        (out.status.success(), value)
    }
}

/// Copies the folder `from` into `to` (created), at any depth.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file under `dir`, at any depth.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The files of a small valid package; tests change what they need.
pub fn minimal_package(episode: &str) -> BTreeMap<String, Vec<u8>> {
    let manifest = serde_json::json!({
        "format": "episode-package/1",
        "episode": episode,
        "model": {"name": "m1"},
        "harness": {"level": "H1"},
        "task": {"id": "t1"},
        "requirements": [{"id": "R1"}],
    });
    let outcome = serde_json::json!({"label": "failed", "correct": false});
    let mut files = BTreeMap::new();
    files.insert("manifest.json".to_string(), manifest.to_string().into_bytes());
    files.insert("outcome.json".to_string(), outcome.to_string().into_bytes());
    files.insert(
        "traces/actions.jsonl".to_string(),
        b"{\"seq\":0,\"kind\":\"read\",\"paths\":[\"a.js\"]}\n{\"seq\":1,\"kind\":\"edit\",\"paths\":[\"a.js\"]}\n"
            .to_vec(),
    );
    files.insert(
        "traces/verification.jsonl".to_string(),
        b"{\"seq\":2,\"check_id\":\"c1\",\"actor\":\"agent\",\"result\":\"pass\",\"requirements\":[\"R1\"]}\n".to_vec(),
    );
    files
}

pub fn write_package(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    for (path, bytes) in files {
        let target = dir.join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

/// Every file under `dir`, relative path -> bytes.
pub fn read_tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_str().unwrap().replace('\\', "/");
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Writes `count` distinct valid packages under `dir` (pkg-00000, ...), spread over
/// a few cells; returns their directories.
pub fn many_packages(dir: &Path, count: usize) -> Vec<PathBuf> {
    (0..count)
        .map(|i| {
            let mut files = minimal_package(&format!("gen/{i}"));
            let manifest = serde_json::json!({
                "format": "episode-package/1",
                "episode": format!("gen/{i}"),
                "model": {"name": format!("model-{}", i % 3)},
                "harness": {"level": format!("H{}", i % 4)},
                "task": {"id": format!("task-{}", i % 5)},
                "seed": i,
            });
            files.insert("manifest.json".into(), manifest.to_string().into_bytes());
            // A shared artifact: stored once however many packages carry it.
            files.insert("artifacts/shared.log".into(), vec![b'x'; 4096]);
            let path = dir.join(format!("pkg-{i:05}"));
            write_package(&path, &files);
            path
        })
        .collect()
}
