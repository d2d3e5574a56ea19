//! Crash consistency: an ingesting child process is killed (SIGKILL) at 100 random
//! points, and sessions building columnar segments at more. After each kill the store
//! opens (read-only, as any reader would), `verify` passes (every record and trace
//! derived again from its files), every episode is whole, and no committed episode is
//! ever lost.

use std::process::Stdio;
use std::time::{Duration, Instant};

use epistore_store::Store;

use crate::util::*;

/// A small xorshift: the kill points are random but the same on every run.
struct Points(u64);

impl Points {
    fn below(&mut self, limit: Duration) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        limit.mul_f64((self.0 % 10_000) as f64 / 10_000.0)
    }
}

/// Opens the store as a reader would after a crash and verifies it in full; returns
/// its episode count. A reader process recovers it first, from the allocator state the
/// last commit saved: never by walking the whole file.
fn verified_count(store: &TestStore, after: &str) -> u64 {
    let out = store.run(&["ls", "--format", "csv"]);
    assert!(out.status.success(), "no read after {after}: {}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("walked the whole file"), "after {after}: {}", text(&out.stderr));
    let opened = Store::open_read_only(store.path()).unwrap_or_else(|e| panic!("no open after {after}: {e}"));
    let snapshot = opened.snapshot().unwrap();
    let report = snapshot.verify().unwrap();
    assert_eq!(report.problems, Vec::<String>::new(), "store damaged after {after}");
    assert_eq!(report.cells, report.episodes, "after {after}");
    assert_eq!(report.rederived, report.episodes, "after {after}");
    report.episodes
}

#[test]
fn sigkill_at_a_hundred_points_never_loses_or_tears_an_episode() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let total = 240;
    many_packages(work.path(), total);
    let ingest = || {
        store
            .command()
            .args(["ingest", "--quiet", "--chunk", "8"])
            .arg(work.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };

    // How long a whole ingest takes here: the kill points spread over it.
    let started = Instant::now();
    assert!(ingest().wait().unwrap().success());
    let whole = started.elapsed();
    std::fs::remove_dir_all(store.path()).unwrap();

    let mut points = Points(0x5eed_2026_1201);
    let (mut kills_mid_ingest, mut committed, mut fresh_stores) = (0, 0u64, 1);
    // The machine's speed changes under load (CI runs other tests beside this one): the
    // range the kill points are drawn from shrinks after a kill that came too late and
    // grows back slowly after one that landed, so most kills land mid-ingest whatever
    // the one timing measured above said.
    let mut limit = whole;
    for kill in 0..100 {
        // An ingest skips what is already stored, so it gets shorter as episodes are
        // committed: start a fresh store once half are in, and draw the kill point
        // below the time what remains should take (the fixed start-up cost included),
        // so that most kills land mid-ingest on a slow machine and a fast one alike.
        if committed * 2 >= total as u64 {
            std::fs::remove_dir_all(store.path()).unwrap();
            (committed, fresh_stores) = (0, fresh_stores + 1);
        }
        let remaining = (total as u64 - committed) as f64 / total as f64;
        let delay = points.below(limit.mul_f64(0.25 + 0.75 * remaining));
        let mut child = ingest();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            kills_mid_ingest += 1;
            limit = limit.mul_f64(1.05).min(whole * 3);
        } else {
            limit = limit.mul_f64(0.8);
        }
        child.kill().unwrap(); // SIGKILL on Unix: no cleanup runs
        child.wait().unwrap();
        if !store.path().join("epistore.redb").exists() {
            continue; // killed before the store was created
        }
        let after = format!("kill {kill} at {delay:?}");
        let count = verified_count(&store, &after);
        assert!(count >= committed, "episodes lost: {count} < {committed} after {after}");
        committed = count;
    }
    assert!(kills_mid_ingest >= 60, "only {kills_mid_ingest} of 100 kills landed mid-ingest (whole ingest: {whole:?})");

    // Kills while a session builds the columnar segments (the store itself is not
    // written): the next session answers in full.
    let out = store.ingest(&[work.path()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for kill in 0..10 {
        std::fs::remove_dir_all(store.path().join("columnar")).unwrap();
        let mut child = store
            .command()
            .args(["sql", "select count(*) from actions"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(points.below(Duration::from_millis(400)));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(store.episode_count(), total as i64, "after session kill {kill}");
    }
    assert!(store.verify().0);
    eprintln!(
        "crash test: 100 kills ({kills_mid_ingest} mid-ingest) over {fresh_stores} stores; whole ingest {whole:?}"
    );
}
