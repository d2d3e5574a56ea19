//! People's annotations through the CLI: append, retract, annotate again; concurrent
//! annotators in separate processes; `verify`; packages unchanged; the labelled set
//! exported; labels in `--where`, boards and SQL.

use serde_json::Value;

use crate::util::{dataset, read_tree, text, TestStore};

fn dataset_store() -> TestStore {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    store
}

/// `annotate ... --format json`: the record printed.
fn annotate(store: &TestStore, args: &[&str]) -> Value {
    let out = store.run(&[&["annotate", "--format", "json"], args].concat());
    assert!(out.status.success(), "annotate {args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn listed(store: &TestStore, args: &[&str]) -> Vec<Value> {
    let out = store.run(&[&["annotations", "--format", "json"], args].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Array(rows) => rows,
        other => panic!("{other}"),
    }
}

fn export_package(
    store: &TestStore,
    episode: &str,
    into: &std::path::Path,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    let out = store.run(&["export-package", episode, into.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    read_tree(into)
}

#[test]
fn annotate_retract_and_annotate_again_leave_packages_and_metrics_alone() {
    let store = dataset_store();
    let h3 = store.h3_episode();
    let before = export_package(&store, &h3, &store.dir.path().join("before"));
    let metrics_before = store.sql("SELECT * FROM cell_metrics ORDER BY harness_level");

    let first = annotate(&store, &[&h3[..10], "--label", "flaky test", "--note", "fails on main", "--author", "ana"]);
    assert_eq!(first["episode"], h3.as_str());
    assert_eq!(first["kind"], "label");
    assert_eq!(first["added"], true);
    let id = first["id"].as_str().unwrap().to_string();
    let gone = annotate(&store, &["--retract", &id[..8], "--note", "a real failure", "--author", "bo"]);
    assert_eq!(gone["kind"], "retraction");
    assert_eq!(gone["retracts"], id.as_str());
    assert_eq!(gone["label"], "flaky test");
    std::thread::sleep(std::time::Duration::from_millis(5));
    let again = annotate(&store, &[&h3, "--label", "flaky test"]);
    assert_ne!(again["id"], first["id"]);

    // Active labels by default; --all shows the withdrawn one and the retraction.
    let active = listed(&store, &[]);
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["id"], again["id"]);
    let all = listed(&store, &["--all"]);
    assert_eq!(all.iter().map(|a| a["kind"].as_str().unwrap()).collect::<Vec<_>>(), ["label", "retraction", "label"]);
    assert_eq!(all[0]["retracted_by"], gone["id"]);

    let rows = store.sql("SELECT kind, label, active, author, retracted_by FROM annotations ORDER BY created");
    assert_eq!(rows.iter().map(|r| r["active"].as_bool().unwrap()).collect::<Vec<_>>(), [false, false, true]);
    assert_eq!(rows[0]["author"], "ana");
    assert_eq!(rows[0]["retracted_by"], gone["id"]);
    let joined =
        store.sql("SELECT e.harness_level FROM annotations a JOIN episodes e USING (episode_id) WHERE a.active");
    assert_eq!(joined[0]["harness_level"], "H3");

    // A second writer would be refused: a label is withdrawn once, a retraction never.
    let retraction = gone["id"].as_str().unwrap().to_string();
    for (target, needle) in [(&id, "already retracted"), (&retraction, "is a retraction")] {
        let out = store.run(&["annotate", "--retract", target]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains(needle), "{}", text(&out.stderr));
    }

    // Packages, derived fields and metrics are what they were.
    let after = export_package(&store, &h3, &store.dir.path().join("after"));
    assert_eq!(before, after, "export-package changed by annotations");
    assert_eq!(store.sql("SELECT * FROM cell_metrics ORDER BY harness_level"), metrics_before);
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
    assert_eq!(report["annotations"], 3);
    // `show` lists the episode's labels with their state.
    let out = store.run(&["show", &h3, "--format", "json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<bool> =
        shown["annotations"].as_array().unwrap().iter().map(|a| a["retracted_by"].is_null()).collect();
    assert_eq!(states, [false, true]);
}

#[test]
fn labels_select_episodes_in_where_boards_and_sql() {
    let store = dataset_store();
    let ids: Vec<String> = store
        .sql("SELECT episode_id FROM episodes ORDER BY harness_level")
        .iter()
        .map(|r| r["episode_id"].as_str().unwrap().to_string())
        .collect();
    for id in &ids[..2] {
        annotate(&store, &[id, "--label", "env failure"]);
    }
    let count = |filter: &str| -> i64 {
        let rows = store.sql(&format!("SELECT count(*) AS n FROM episode_facts WHERE {filter}"));
        rows[0]["n"].as_i64().unwrap()
    };
    assert_eq!(count("annotated(episode_id, 'env failure')"), 2);
    assert_eq!(count("NOT annotated(episode_id, 'env failure')"), 2);
    assert_eq!(count("annotated(episode_id, 'other')"), 0);
    let out = store.run(&[
        "metrics",
        "--by",
        "harness_level",
        "--where",
        "NOT annotated(episode_id, 'env failure')",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let levels: Vec<&str> = rows.iter().map(|r| r["harness_level"].as_str().unwrap()).collect();
    assert_eq!(levels, ["H2", "H3"]);
    let out = store.run(&[
        "leaderboard",
        "--metric",
        "avs_rate",
        "--by",
        "harness_level",
        "--where",
        "annotated(episode_id, 'env failure')",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let board: Value = serde_json::from_slice(&out.stdout).unwrap();
    let board_text = board.to_string();
    assert!(board_text.contains("H0") && board_text.contains("H1") && !board_text.contains("\"H3\""), "{board_text}");
}

#[test]
fn concurrent_annotators_in_separate_processes_lose_nothing() {
    let store = dataset_store();
    let h3 = store.h3_episode();
    let children: Vec<_> = (0..8)
        .map(|i| {
            store
                .command()
                .args(["annotate", &h3, "--label", &format!("annotator {i}"), "--wait", "60"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let mut labels: Vec<String> =
        listed(&store, &[]).iter().map(|a| a["label"].as_str().unwrap().to_string()).collect();
    labels.sort();
    assert_eq!(labels, (0..8).map(|i| format!("annotator {i}")).collect::<Vec<_>>());
    assert!(store.verify().0);
}

#[test]
fn refusals_write_nothing() {
    let store = TestStore::new();
    // No store: annotating does not create one.
    let out = store.run(&["annotate", "abcd", "--label", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no store at"), "{}", text(&out.stderr));
    assert!(!store.path().exists());
    assert!(store.ingest(&[&dataset()]).status.success());
    let h3 = store.h3_episode();
    for (args, needle) in [
        (vec!["annotate", "ffffffff", "--label", "x"], "no episode matches"),
        (vec!["annotate", &h3, "--label", "   "], "label is empty"),
        (vec!["annotate", &h3, "--label", "a\u{7}b"], "control character"),
        (vec!["annotate", "--retract", "abcdef"], "no annotation matches"),
        (vec!["annotate", &h3], "--label"),
    ] {
        let out = store.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(needle), "{args:?}: {}", text(&out.stderr));
    }
    assert!(listed(&store, &["--all"]).is_empty());
}

#[test]
fn the_labelled_set_exports_with_its_packages_for_judge_validation() {
    let store = dataset_store();
    let ids: Vec<String> =
        store.sql("SELECT episode_id FROM episodes").iter().map(|r| r["episode_id"].as_str().unwrap().into()).collect();
    annotate(&store, &[&ids[0], "--label", "reward hacking", "--note", "edited the test"]);
    annotate(&store, &[&ids[1], "--label", "reward hacking"]);
    let withdrawn = annotate(&store, &[&ids[2], "--label", "reward hacking"]);
    annotate(&store, &["--retract", withdrawn["id"].as_str().unwrap()]);
    annotate(&store, &[&ids[3], "--label", "fine"]);
    let dir = store.dir.path().join("judged");
    let out = store.run(&["annotations", "--label", "reward hacking", "--export", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = std::fs::read_to_string(dir.join("annotations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "active labels only");
    assert_eq!(lines[0]["note"], "edited the test");
    let mut exported: Vec<String> = std::fs::read_dir(dir.join("episodes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    exported.sort();
    let mut expected = vec![ids[0].clone(), ids[1].clone()];
    expected.sort();
    assert_eq!(exported, expected);
    // Byte-identical packages: ingested elsewhere they are the same episodes.
    let other = TestStore::new();
    let (code, summary) = other.ingest_json(&[&dir.join("episodes")]);
    assert_eq!(code, 0, "{summary}");
    let mut again: Vec<String> =
        other.sql("SELECT episode_id FROM episodes").iter().map(|r| r["episode_id"].as_str().unwrap().into()).collect();
    again.sort();
    assert_eq!(again, expected);
    // An existing directory is refused, and left as it was.
    let out = store.run(&["annotations", "--export", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_dir(dir.join("episodes")).unwrap().count(), 2);
}
