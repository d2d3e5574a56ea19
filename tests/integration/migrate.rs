//! Stores written by older builds: refused with a way forward, and migrated into the
//! current format without losing or changing anything (tests/fixtures/store-v1,
//! store-v2 and store-v3, written by the last builds of formats 1, 2 and 3).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{dataset, repo_root, text, walk, TestStore};

/// A kept store of an older format.
#[derive(Clone, Copy)]
struct Fixture {
    format: u32,
    /// (episodes, ingest batches) it holds.
    holds: (u64, u64),
}

const FORMAT1: Fixture = Fixture { format: 1, holds: (4, 2) };
const FORMAT2: Fixture = Fixture { format: 2, holds: (9, 3) };
const FORMAT3: Fixture = Fixture { format: 3, holds: (9, 3) };

impl Fixture {
    fn dir(self) -> PathBuf {
        repo_root().join(format!("tests/fixtures/store-v{}", self.format))
    }
    fn name(self) -> String {
        format!("epistore-store/{}", self.format)
    }
    fn kept(self) -> String {
        format!("epistore.redb.format{}", self.format)
    }
    /// A store holding a copy of the fixture file.
    fn store(self) -> TestStore {
        let store = TestStore::new();
        std::fs::create_dir_all(store.path()).unwrap();
        std::fs::copy(self.dir().join("epistore.redb"), store.path().join("epistore.redb")).unwrap();
        store
    }
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
        // empty table printed no header (and must print no row still).
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
        if header.is_none() && lines.len() == 1 {
            // An empty result is its header line alone now (older builds printed an
            // empty line).
            lines = vec![String::new()];
        }
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

/// Tables and views added after the format-1 fixture was written (the format-2 one has
/// all but `revision_changes`, the format-3 one all but `messages`; none has the cost
/// view, the price table or annotations).
const NEW_TABLES: &[&str] = &[
    "all_episodes",
    "annotations",
    "revision_changes",
    "messages",
    "episode_costs",
    "model_prices",
    "run_consistency",
    "task_consistency",
];
/// The format this build writes.
const CURRENT: &str = "epistore-store/4";

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// `verify` of the store, asserting it is intact and counts the episodes, cell entries
/// and batches the old build printed for the fixture (`verify.txt`). Blobs are not
/// compared: format 3 keeps an episode's own files in its file record, not as blobs.
fn assert_verify_as_old(store: &TestStore, fixture: Fixture) {
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
    let then = std::fs::read_to_string(fixture.dir().join("verify.txt")).unwrap();
    let figure = |word: &str| -> u64 {
        let at = then.find(word).unwrap_or_else(|| panic!("no {word} in {then}"));
        let digits: String = then[..at].trim_end().chars().rev().take_while(char::is_ascii_digit).collect();
        digits.chars().rev().collect::<String>().parse().unwrap()
    };
    let expected = [figure(" episodes"), figure(" cell index entries"), figure(" ingest batches")];
    let now: Vec<u64> = ["episodes", "cells", "batches"]
        .iter()
        .map(|k| report[*k].as_u64().unwrap_or_else(|| panic!("no {k} in {report}")))
        .collect();
    assert_eq!(now, expected, "the old build's verify said: {then}");
    assert_eq!(report["rederived"], report["episodes"], "{report}");
}

/// Every file of every episode, exported from `store`, as (episode, path) -> blake3.
fn exported_files(store: &TestStore) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for row in store.sql("SELECT episode_id FROM episodes") {
        let id = row["episode_id"].as_str().unwrap().to_string();
        let dir = store.dir.path().join(format!("export-{id}"));
        let done = store.run(&["export-package", &id, dir.to_str().unwrap()]);
        assert!(done.status.success(), "{}", text(&done.stderr));
        for path in walk(&dir) {
            let name = path.strip_prefix(&dir).unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).unwrap();
            out.insert((id.clone(), name), blake3::hash(&bytes).to_hex().to_string());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    out
}

fn migrate(store: &TestStore) -> Value {
    let out = store.run(&["migrate", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

// Opening the old file for writing (which takes the writer lock and would roll back a
// crashed write) lets redb update its own header and allocator pages, so the tests
// compare what is stored, not the file's bytes.

fn refused_with_the_way_forward(fixture: Fixture) {
    let store = fixture.store();
    for args in [&["ls"][..], &["sql", "SELECT 1"], &["verify"], &["ingest", dataset().to_str().unwrap()]] {
        let out = store.run(args);
        assert!(!out.status.success(), "{args:?} succeeded on a format-{} store", fixture.format);
        let err = text(&out.stderr);
        assert!(err.contains(&fixture.name()) && err.contains("migrate"), "{args:?}: {err}");
    }
    // The refused ingest stored nothing: the store migrates to exactly the fixture.
    assert_eq!(migrate(&store)["episodes"], fixture.holds.0);
    assert_verify_as_old(&store, fixture);
}

#[test]
fn a_format1_store_is_refused_with_the_way_forward() {
    refused_with_the_way_forward(FORMAT1);
}

#[test]
fn a_format2_store_is_refused_with_the_way_forward() {
    refused_with_the_way_forward(FORMAT2);
}

fn migration_keeps_every_answer_and_the_old_store(fixture: Fixture) {
    let store = fixture.store();
    // The packages as the old build stores them, read back through this build's
    // reader of the old format: the migration's own copy.
    let report = migrate(&store);
    assert_eq!(report["from"], fixture.name());
    assert_eq!(report["to"], CURRENT);
    assert_eq!(
        (report["episodes"].as_u64(), report["batches"].as_u64()),
        (Some(fixture.holds.0), Some(fixture.holds.1)),
        "{report}"
    );
    assert_eq!(files_in(&store.path()), ["epistore.redb".to_string(), fixture.kept()]);

    // Intact, and every table and view answers what the old build answered.
    assert_verify_as_old(&store, fixture);
    let expected = std::fs::read_to_string(fixture.dir().join("tables.txt")).unwrap();
    let answered = tables_as_in(&store, &expected);
    if answered != expected {
        let first = answered.lines().zip(expected.lines()).find(|(a, e)| a != e);
        panic!("the migrated store answers differently from {}/tables.txt: {first:?}", fixture.dir().display());
    }
    let fixture_tables: Vec<&str> = expected.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    for name in table_names(&store) {
        if !fixture_tables.contains(&name.as_str()) && !NEW_TABLES.contains(&name.as_str()) {
            panic!("table {name} is in neither {}/tables.txt nor NEW_TABLES", fixture.dir().display());
        }
    }
    let info = store.sql("SELECT value FROM epistore_info WHERE key = 'store_format'");
    assert_eq!(info[0]["value"], CURRENT);

    // The packages come back byte for byte: the bundled ones against their files, and
    // every package of the migrated store against a migration of the kept old file.
    let h3 = store.sql("SELECT episode_id FROM episodes WHERE harness_level = 'H3' AND task = 'login-validation'");
    let id = h3[0]["episode_id"].as_str().unwrap();
    let out_dir = store.dir.path().join("h3");
    let out = store.run(&["export-package", id, out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in ["manifest.json", "outcome.json", "patch.diff"] {
        let original = std::fs::read(dataset().join("H3").join(name)).unwrap();
        assert!(std::fs::read(out_dir.join(name)).unwrap() == original, "{name} differs");
    }
    let files = exported_files(&store);
    assert!(files.len() as u64 > fixture.holds.0 * 3, "{files:?}");

    // The kept file is still the whole old store: it migrates to the same.
    let old = TestStore::new();
    std::fs::create_dir_all(old.path()).unwrap();
    std::fs::copy(store.path().join(fixture.kept()), old.path().join("epistore.redb")).unwrap();
    assert_eq!(migrate(&old)["episodes"], fixture.holds.0);
    assert_verify_as_old(&old, fixture);
    assert!(exported_files(&old) == files, "a second migration of the kept file exports other bytes");

    // The migrated store works as any other: the same packages add nothing, a second
    // migration has nothing to do.
    let (code, summary) = store.ingest_json(&[&dataset()]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!((summary["added"].as_u64(), summary["already_present"].as_u64()), (Some(0), Some(4)));
    let again = migrate(&store);
    assert_eq!(again["migrated"], false, "{again}");
    assert_eq!(
        (again["episodes"].as_u64(), again["batches"].as_u64()),
        (Some(fixture.holds.0), Some(fixture.holds.1)),
        "{again}"
    );
}

#[test]
fn migrating_a_format1_store_keeps_every_answer_and_the_old_store() {
    migration_keeps_every_answer_and_the_old_store(FORMAT1);
}

#[test]
fn migrating_a_format2_store_keeps_every_answer_and_the_old_store() {
    migration_keeps_every_answer_and_the_old_store(FORMAT2);
}

#[test]
fn a_format3_store_is_refused_with_the_way_forward() {
    refused_with_the_way_forward(FORMAT3);
}

/// Format 3 kept records and traces as bincode of the package model of its day; the
/// migration derives them again from the files, so the imported episodes (written as
/// revision 1.1 then) keep their ids, answers and bytes.
#[test]
fn migrating_a_format3_store_keeps_every_answer_and_the_old_store() {
    migration_keeps_every_answer_and_the_old_store(FORMAT3);
}

#[test]
fn a_migration_in_the_way_of_an_older_one_is_refused_and_a_crashed_one_starts_over() {
    let fixture = FORMAT2;
    // An old file from an earlier migration is in the way: refuse before writing.
    let store = fixture.store();
    let in_the_way = store.path().join(fixture.kept());
    std::fs::write(&in_the_way, b"an older copy").unwrap();
    let out = store.run(&["migrate"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&fixture.kept()), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&in_the_way).unwrap(), b"an older copy");
    assert_eq!(files_in(&store.path()), ["epistore.redb".to_string(), fixture.kept()]);

    // A migration that died after giving the old file its second name, before the
    // rename: that name is the store itself, so the next migration drops it and runs.
    std::fs::remove_file(&in_the_way).unwrap();
    std::fs::hard_link(store.path().join("epistore.redb"), &in_the_way).unwrap();
    std::fs::write(store.path().join("epistore.redb.migrating"), b"half a copy").unwrap();
    assert_eq!(migrate(&store)["from"], fixture.name());
    assert_eq!(files_in(&store.path()), ["epistore.redb".to_string(), fixture.kept()]);
    assert_verify_as_old(&store, fixture);
}
