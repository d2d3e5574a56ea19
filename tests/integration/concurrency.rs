//! Readers during ingest: another process ingests while this one takes snapshots;
//! every snapshot holds whole episodes only, and counts never go backwards.

use std::process::Stdio;
use std::time::{Duration, Instant};

use epistore_store::Store;

use crate::util::*;

#[test]
fn a_reader_during_ingest_sees_whole_episodes_only() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let total = 300;
    many_packages(work.path(), total);
    // Create the store first so the reader has something to open.
    assert!(store.ingest(&[&dataset()]).status.success());

    let mut child = store
        .command()
        .args(["ingest", "--quiet", "--chunk", "4"])
        .arg(work.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = Store::open_read_only(store.path()).expect("a reader opens while a writer holds the store");
    let mut last = 0u64;
    let mut distinct_counts = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running = child.try_wait().unwrap().is_none();
        let snapshot = reader.snapshot().unwrap();
        let count = snapshot.episode_count().unwrap();
        assert!(count >= last, "count went backwards: {count} < {last}");
        last = count;
        distinct_counts.insert(count);
        let logged: usize = snapshot.ingest_log().unwrap().iter().map(|b| b.episodes.len()).sum();
        assert_eq!(logged as u64, count, "ingest log and episodes disagree within one snapshot");
        snapshot
            .for_each_episode(|record| {
                for file in &record.files {
                    let bytes = snapshot.blob(&file.hash)?;
                    assert_eq!(bytes.len() as u64, file.size);
                }
                assert!(snapshot.episode_traces(&record.id)?.is_some(), "episode without traces");
                Ok(true)
            })
            .unwrap();
        if !running || Instant::now() > deadline {
            break;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    let final_count = reader.snapshot().unwrap().episode_count().unwrap();
    assert_eq!(final_count, (total + 4) as u64);
    assert!(distinct_counts.len() >= 3, "the reader saw too few intermediate states: {distinct_counts:?}");
}
