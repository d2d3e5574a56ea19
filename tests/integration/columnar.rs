//! Columnar segments are derived data: built after an ingest, rebuilt when missing,
//! one more per ingest, never needed for `verify`.

use std::path::{Path, PathBuf};

use crate::util::*;

fn segments(store: &TestStore) -> Vec<String> {
    let dir = store.path().join("columnar").join(epistore_sql::columnar::schema_dir());
    let mut names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name().into_string().unwrap()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn segments_follow_ingests_and_rebuild_from_the_store() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    assert_eq!(segments(&store), ["000000000001-000000000001"]);
    let before = store.sql("SELECT * FROM cell_metrics ORDER BY harness_level");

    std::fs::remove_dir_all(store.path().join("columnar")).unwrap();
    assert_eq!(
        store.sql("SELECT * FROM cell_metrics ORDER BY harness_level"),
        before,
        "rebuilt from the store, same answers"
    );
    assert_eq!(segments(&store), ["000000000001-000000000001"]);

    let work = tempfile::tempdir().unwrap();
    write_package(&work.path().join("extra"), &minimal_package("extra"));
    assert!(store.ingest(&[work.path()]).status.success());
    assert_eq!(segments(&store), ["000000000001-000000000001", "000000000002-000000000002"]);
    assert_eq!(store.episode_count(), 5);
    let (ok, _) = store.verify();
    assert!(ok);
}

#[test]
fn a_segment_abandoned_mid_build_is_cleared_and_rebuilt() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let dir = store.path().join("columnar").join(epistore_sql::columnar::schema_dir());
    // What a process killed while building leaves: a hidden temporary directory. Its pid
    // (u32::MAX - 1) cannot be a running process.
    let abandoned = dir.join(format!(".000000000001-000000000001.{}.tmp", u32::MAX - 1));
    std::fs::create_dir_all(&abandoned).unwrap();
    std::fs::write(abandoned.join("actions.parquet"), b"half").unwrap();
    std::fs::remove_dir_all(dir.join("000000000001-000000000001")).unwrap();
    assert_eq!(store.episode_count(), 4);
    assert!(!abandoned.exists(), "abandoned build left behind");
    assert_eq!(segments(&store), ["000000000001-000000000001"]);
}

/// Every row of `sql` as text, sorted (row order is not part of a view's answer).
fn sorted_rows(engine: &epistore_sql::Engine, sql: &str) -> Vec<String> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let batches = runtime.block_on(engine.query(sql)).unwrap();
    let text = epistore_sql::format_batches(&batches, epistore_sql::Format::Csv).unwrap();
    let mut rows: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
    rows.sort();
    rows
}

#[test]
fn stored_per_episode_views_equal_their_sql_over_the_tables() {
    let store = TestStore::new();
    let pop = store.synth(160, 5);
    // Three ingests taking every third package, so every cell, and the attempts of one
    // seed, are spread over three segments: a view that reached beyond one episode (a
    // cell total, the latest attempt) would differ from its SQL over the whole store.
    let mut packages: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![pop.clone()];
    while let Some(dir) = dirs.pop() {
        if dir.join("manifest.json").is_file() {
            packages.push(dir);
            continue;
        }
        dirs.extend(std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()));
    }
    packages.sort();
    assert_eq!(packages.len(), 160);
    for part in 0..3 {
        let paths: Vec<&Path> = packages.iter().skip(part).step_by(3).map(PathBuf::as_path).collect();
        assert!(store.ingest(&paths).status.success());
    }
    let segments = segments(&store);
    assert_eq!(segments.len(), 3, "{segments:?}");
    for segment in &segments {
        for view in epistore_sql::views::PER_EPISODE {
            let file = store
                .path()
                .join("columnar")
                .join(epistore_sql::columnar::schema_dir())
                .join(segment)
                .join(format!("{view}.parquet"));
            assert!(file.is_file(), "{} missing", file.display());
        }
    }

    let reader = epistore_store::Store::open_read_only(store.path()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stored = runtime.block_on(epistore_sql::Engine::open(&reader)).unwrap();
    let computed = runtime.block_on(epistore_sql::Engine::open_direct(&reader)).unwrap();
    for view in epistore_sql::views::PER_EPISODE {
        let sql = format!("SELECT * FROM {view}");
        let (a, b) = (sorted_rows(&stored, &sql), sorted_rows(&computed, &sql));
        assert!(!b.is_empty() || *view == "localisation_facts", "{view}: the population should give it rows");
        assert_eq!(a, b, "{view}: stored rows differ from the SQL over the tables");
    }
    // The catalog still calls them views.
    let kinds = sorted_rows(
        &stored,
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_name = 'episode_facts'",
    );
    assert_eq!(kinds, ["episode_facts,VIEW"]);
}

#[test]
fn compact_removes_segments_of_other_builds_only() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let old = store.path().join("columnar").join("epistore-sql-1").join("000000000001-000000000001");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("episodes.parquet"), b"old build").unwrap();
    let out = store.run(&["compact"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!old.parent().unwrap().exists(), "segments of another build kept");
    assert_eq!(segments(&store), ["000000000001-000000000001"]);
    assert_eq!(store.episode_count(), 4);
}

/// `revision_correctness` computes from where held states change; queries/
/// revision_held.sql builds every episode's held state at every revision (the rows the
/// intervals resample). Both must give the same rows, to the last bit of every double,
/// on populations with revisions, passes lost and regained, and cells whose episodes end
/// at different revisions.
#[test]
fn revision_correctness_equals_its_definition_from_held_states() {
    for (episodes, seed) in [(240, 11), (90, 12)] {
        let store = TestStore::synthetic(episodes, seed);
        let reader = epistore_store::Store::open_read_only(store.path()).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let engine = runtime.block_on(epistore_sql::Engine::open(&reader)).unwrap();
        let view = sorted_rows(&engine, "SELECT * FROM revision_correctness");
        let held = sorted_rows(&engine, epistore_sql::views::REVISION_HELD);
        assert!(view.len() > 20, "too few rows to compare: {view:?}");
        assert_eq!(view, held, "revision_correctness and queries/revision_held.sql differ ({episodes} episodes)");
    }
}
