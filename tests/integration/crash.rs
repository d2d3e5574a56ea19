//! Crash consistency: an ingesting child process is killed (SIGKILL) at many points.
//! After each kill the store opens, `verify` passes, every episode is whole, and no
//! committed episode is ever lost.

use std::process::Stdio;
use std::time::Duration;

use crate::util::*;

#[test]
fn sigkill_during_ingest_never_loses_or_tears_an_episode() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let total = 400;
    many_packages(work.path(), total);

    let mut committed = 0i64;
    let mut kills_mid_ingest = 0;
    for delay_ms in [1u64, 5, 15, 30, 50, 80, 120, 170, 230, 300, 400, 550] {
        let mut child = store
            .command()
            .args(["ingest", "--quiet", "--chunk", "8"])
            .arg(work.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            kills_mid_ingest += 1;
        }
        child.kill().unwrap(); // SIGKILL on Unix: no cleanup runs
        child.wait().unwrap();
        if !store.path().join("epistore.redb").exists() {
            continue; // killed before the store was created
        }
        let (ok, report) = store.verify();
        assert!(ok, "store damaged after a kill at {delay_ms} ms: {report}");
        let count = report["episodes"].as_i64().unwrap();
        assert!(count >= committed, "episodes lost: {count} < {committed} after a kill at {delay_ms} ms");
        // Episodes arrive in whole transactions of 8 sources at most.
        assert_eq!(report["cells"].as_i64().unwrap(), count);
        committed = count;
    }
    assert!(kills_mid_ingest >= 3, "the child finished too fast to test anything ({kills_mid_ingest} kills)");

    // Finishing the ingest afterwards completes the store.
    let out = store.ingest(&[work.path()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
    assert_eq!(report["episodes"].as_i64().unwrap(), total as i64);
}
