//! Columnar segments are derived data: built after an ingest, rebuilt when missing,
//! one more per ingest, never needed for `verify`.

use crate::util::*;

fn segments(store: &TestStore) -> Vec<String> {
    let dir = store.path().join("columnar").join(epistore_sql::columnar::SCHEMA_DIR);
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
    assert_eq!(store.sql("SELECT * FROM cell_metrics ORDER BY harness_level"), before, "rebuilt from the store, same answers");
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
    let dir = store.path().join("columnar").join(epistore_sql::columnar::SCHEMA_DIR);
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
