//! `epistore export` edge cases the Python tests do not reach: more partitions than
//! open writers, and partition column names that look like paths.

use crate::util::{text, TestStore};

fn synthetic(episodes: usize) -> TestStore {
    TestStore::synthetic(episodes, 2)
}

/// More partitions than the 64 writers kept open: every row is written once.
#[test]
fn more_partitions_than_open_writers() {
    let store = synthetic(200);
    let out = store.dir.path().join("by_episode");
    let run = store.run(&[
        "export",
        "--table",
        "checks",
        "--partition-by",
        "episode_id",
        "--format",
        "jsonl",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let total = store.sql("SELECT count(*) AS n FROM checks")[0]["n"].as_u64().unwrap();
    let mut rows = 0;
    let mut partitions = 0;
    for dir in std::fs::read_dir(&out).unwrap() {
        let dir = dir.unwrap().path();
        partitions += 1;
        for file in std::fs::read_dir(&dir).unwrap() {
            rows += std::fs::read_to_string(file.unwrap().path()).unwrap().lines().count() as u64;
        }
    }
    let episodes = store.sql("SELECT count(DISTINCT episode_id) AS n FROM checks")[0]["n"].as_u64().unwrap();
    assert!(episodes > 64, "only {episodes} partitions: the test needs more than 64");
    assert_eq!(partitions, episodes);
    assert_eq!(rows, total);
}

/// A partition column named like a path stays a directory name inside --out.
#[test]
fn partition_column_names_cannot_leave_the_output() {
    let store = synthetic(4);
    let root = store.dir.path().join("nested");
    std::fs::create_dir_all(&root).unwrap();
    let out = root.join("out");
    let run = store.run(&[
        "export",
        "--query",
        "SELECT 'v' AS \"../../outside\", 2 AS x",
        "--partition-by",
        "../../outside",
        "--format",
        "csv",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(!store.dir.path().join("outside=v").exists());
    let inside: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(inside.len(), 1);
    assert!(inside[0].to_string_lossy().starts_with("..%2F..%2Foutside="), "{inside:?}");
}
