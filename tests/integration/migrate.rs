//! Stores written by an older build: refused with a way forward, and migrated into the
//! current format without losing or changing anything (tests/fixtures/store-v1).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{dataset, repo_root, text, TestStore};

fn fixture() -> PathBuf {
    repo_root().join("tests/fixtures/store-v1")
}

/// A store holding a copy of the format-1 fixture file.
fn format1_store() -> TestStore {
    let store = TestStore::new();
    std::fs::create_dir_all(store.path()).unwrap();
    std::fs::copy(fixture().join("epistore.redb"), store.path().join("epistore.redb")).unwrap();
    store
}

/// Every table and view of `expected` (`tables.txt`: `## name`, then the CSV lines
/// sorted, header among them), answered by `store` in the same form. Only the columns
/// the fixture has are asked for: a column added since (e.g. `source_format`) is new
/// information, not a changed answer; a column the fixture has and the store lacks
/// fails the query.
fn tables_as_in(store: &TestStore, expected: &str) -> String {
    let mut out = String::new();
    for section in expected.split("## ").filter(|s| !s.is_empty()) {
        let (name, body) = section.split_once('\n').unwrap();
        let columns: Vec<String> = store
            .sql(&format!(
                "SELECT column_name FROM information_schema.columns WHERE table_name = '{name}' ORDER BY ordinal_position"
            ))
            .into_iter()
            .map(|r| r["column_name"].as_str().unwrap().to_string())
            .collect();
        // The header is the line whose every field is a column name of the table; an
        // empty table printed no header (and must print nothing still).
        let header = body
            .lines()
            .filter(|l| l.split(',').all(|f| columns.iter().any(|c| c == f)))
            .max_by_key(|l| l.split(',').count());
        let query = match header {
            Some(header) => {
                let select: Vec<String> = header.split(',').map(|c| format!("\"{c}\"")).collect();
                format!("SELECT {} FROM {name}", select.join(", "))
            }
            None if body.trim().is_empty() => format!("SELECT * FROM {name}"),
            None => panic!("no header for {name} in tables.txt"),
        };
        let csv = store.run(&["sql", "--format", "csv", &query]);
        assert!(csv.status.success(), "{}", text(&csv.stderr));
        let mut lines: Vec<String> = text(&csv.stdout).lines().map(str::to_string).collect();
        lines.sort();
        out.push_str(&format!("## {name}\n"));
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Every table and view the store has but `epistore_info`.
fn table_names(store: &TestStore) -> Vec<String> {
    store
        .sql(
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = 'public' AND table_name <> 'epistore_info' ORDER BY 1",
        )
        .into_iter()
        .map(|r| r["table_name"].as_str().unwrap().to_string())
        .collect()
}

/// Tables and views added after the format-1 fixture was written.
const NEW_TABLES: &[&str] = &["all_episodes"];

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// `verify` of the store, asserting it is intact and counts what the format-1 build
/// printed for the fixture (`verify.txt`; today's `verify` says more, so the figures
/// are compared, not the text).
fn assert_verify_as_format1(store: &TestStore) {
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
    let then = std::fs::read_to_string(fixture().join("verify.txt")).unwrap();
    let figures: Vec<u64> =
        then.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).map(|w| w.parse().unwrap()).collect();
    let now: Vec<u64> = ["episodes", "blobs", "blob_bytes", "cells", "batches"]
        .iter()
        .map(|k| report[*k].as_u64().unwrap_or_else(|| panic!("no {k} in {report}")))
        .collect();
    assert_eq!(now, figures, "format-1 verify said: {then}");
    assert_eq!(report["rederived"], report["episodes"], "{report}");
}

fn migrate(store: &TestStore) -> Value {
    let out = store.run(&["migrate", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

// Opening the old file for writing (which takes the writer lock and would roll back a
// crashed write) lets redb update its own header and allocator pages, so the tests
// compare what is stored, not the file's bytes.

#[test]
fn a_format1_store_is_refused_with_the_way_forward() {
    let store = format1_store();
    for args in [&["ls"][..], &["sql", "SELECT 1"], &["verify"], &["ingest", dataset().to_str().unwrap()]] {
        let out = store.run(args);
        assert!(!out.status.success(), "{args:?} succeeded on a format-1 store");
        let err = text(&out.stderr);
        assert!(err.contains("epistore-store/1") && err.contains("migrate"), "{args:?}: {err}");
    }
    // The refused ingest stored nothing: the store migrates to exactly the fixture.
    assert_eq!(migrate(&store)["episodes"], 4);
    assert_verify_as_format1(&store);
}

#[test]
fn migrating_a_format1_store_keeps_every_answer_and_the_old_store() {
    let store = format1_store();
    let report = migrate(&store);
    assert_eq!(report["from"], "epistore-store/1");
    assert_eq!(report["to"], "epistore-store/2");
    assert_eq!((report["episodes"].as_u64(), report["batches"].as_u64()), (Some(4), Some(2)), "{report}");
    assert_eq!(files_in(&store.path()), ["epistore.redb", "epistore.redb.format1"]);

    // Intact, and every table and view answers what the format-1 build answered.
    assert_verify_as_format1(&store);
    let expected = std::fs::read_to_string(fixture().join("tables.txt")).unwrap();
    assert!(
        tables_as_in(&store, &expected) == expected,
        "the migrated store answers differently from tests/fixtures/store-v1/tables.txt"
    );
    let fixture_tables: Vec<&str> = expected.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    for name in table_names(&store) {
        // Tables added since the fixture was written (e.g. all_episodes) are new.
        if !fixture_tables.contains(&name.as_str()) && !NEW_TABLES.contains(&name.as_str()) {
            panic!("table {name} is in neither tests/fixtures/store-v1/tables.txt nor NEW_TABLES");
        }
    }
    let info = store.sql("SELECT value FROM epistore_info WHERE key = 'store_format'");
    assert_eq!(info[0]["value"], "epistore-store/2");

    // The packages come back byte for byte.
    let h3 = store.sql("SELECT episode_id FROM episodes WHERE harness_level = 'H3'");
    let id = h3[0]["episode_id"].as_str().unwrap();
    let out_dir = store.dir.path().join("h3");
    let out = store.run(&["export-package", id, out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in ["manifest.json", "outcome.json", "patch.diff"] {
        let original = std::fs::read(dataset().join("H3").join(name)).unwrap();
        assert!(std::fs::read(out_dir.join(name)).unwrap() == original, "{name} differs");
    }

    // The kept file is still the whole format-1 store: it migrates to the same.
    let old = TestStore::new();
    std::fs::create_dir_all(old.path()).unwrap();
    std::fs::copy(store.path().join("epistore.redb.format1"), old.path().join("epistore.redb")).unwrap();
    assert_eq!(migrate(&old)["episodes"], 4);
    assert_verify_as_format1(&old);

    // The migrated store works as any other: the same packages add nothing, a second
    // migration has nothing to do.
    let (code, summary) = store.ingest_json(&[&dataset()]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!((summary["added"].as_u64(), summary["already_present"].as_u64()), (Some(0), Some(4)));
    let again = migrate(&store);
    assert_eq!(again["migrated"], false, "{again}");
    assert_eq!((again["episodes"].as_u64(), again["batches"].as_u64()), (Some(4), Some(2)), "{again}");
}

#[test]
fn a_migration_in_the_way_of_an_older_one_is_refused_and_a_crashed_one_starts_over() {
    // A format-1 file from an earlier migration is in the way: refuse before writing.
    let store = format1_store();
    let in_the_way = store.path().join("epistore.redb.format1");
    std::fs::write(&in_the_way, b"an older copy").unwrap();
    let out = store.run(&["migrate"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("epistore.redb.format1"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&in_the_way).unwrap(), b"an older copy");
    assert_eq!(files_in(&store.path()), ["epistore.redb", "epistore.redb.format1"]);

    // A migration that died after giving the old file its second name, before the
    // rename: that name is the store itself, so the next migration drops it and runs.
    std::fs::remove_file(&in_the_way).unwrap();
    std::fs::hard_link(store.path().join("epistore.redb"), &in_the_way).unwrap();
    std::fs::write(store.path().join("epistore.redb.migrating"), b"half a copy").unwrap();
    assert_eq!(migrate(&store)["from"], "epistore-store/1");
    assert_eq!(files_in(&store.path()), ["epistore.redb", "epistore.redb.format1"]);
    assert_verify_as_format1(&store);
}
