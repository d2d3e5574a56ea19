//! Damage: what a flipped byte, a zeroed page or a deleted file can do. Every damage
//! is either found by `verify`, refused by reads with an error that says what is
//! damaged, or without effect on any answer; never a silent wrong answer, never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use epistore_package::hex;
use epistore_store::Store;

use crate::util::*;

/// The one columnar segment directory of a small store.
fn segment_dirs(store: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for schema in std::fs::read_dir(store.join("columnar")).unwrap() {
        for seg in std::fs::read_dir(schema.unwrap().path()).unwrap() {
            let path = seg.unwrap().path();
            if !path.file_name().unwrap().to_string_lossy().starts_with('.') {
                out.push(path);
            }
        }
    }
    out
}

const COUNTS: &str =
    "SELECT (SELECT count(*) FROM episodes) AS episodes, (SELECT count(*) FROM actions WHERE seq > 3) \
                      AS actions, (SELECT count(*) FROM episode_facts) AS facts";

#[test]
fn a_damaged_segment_is_never_answered_from() {
    let store = TestStore::synthetic(60, 7);
    let baseline = store.sql(COUNTS);
    let metrics = store.run(&["metrics", "--format", "json"]);
    assert!(metrics.status.success(), "{}", text(&metrics.stderr));

    // 1. Every segment's episodes.parquet deleted.
    for seg in segment_dirs(&store.path()) {
        std::fs::remove_file(seg.join("episodes.parquet")).unwrap();
    }
    let (ok, report) = store.verify();
    assert!(!ok, "verify passed a store whose segments lost a file: {report}");
    assert!(report["problems"].to_string().contains("episodes.parquet"), "{report}");
    assert_eq!(store.sql(COUNTS), baseline, "answers from a segment that lost a file");
    assert!(store.verify().0, "the session rebuilt the segment");

    // 2. episode_facts.parquet emptied: metrics must not answer over what is left.
    for seg in segment_dirs(&store.path()) {
        std::fs::write(seg.join("episode_facts.parquet"), b"").unwrap();
    }
    let again = store.run(&["metrics", "--format", "json"]);
    assert_eq!(text(&again.stdout), text(&metrics.stdout), "metrics from an emptied segment file");

    // 3. One byte flipped in a Parquet footer (the size stays; the time changes).
    for seg in segment_dirs(&store.path()) {
        let path = seg.join("actions.parquet");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() - 40;
        bytes[at] ^= 250;
        std::fs::write(&path, &bytes).unwrap();
    }
    assert_eq!(store.sql(COUNTS), baseline, "answers from a segment with a flipped byte");

    // 4. The same flip with the file's time put back: a session's quick check cannot
    // see it, `verify` does, and `verify --repair` rebuilds the segment.
    for seg in segment_dirs(&store.path()) {
        let path = seg.join("checks.parquet");
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
    }
    let (ok, report) = store.verify();
    assert!(!ok && report["problems"].to_string().contains("checks.parquet"), "{report}");
    let out = store.run(&["verify", "--repair"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(store.sql(COUNTS), baseline);

    // 5. Bit rot in a footer (row counts, statistics), size and time kept: a session
    // checks every footer, so no `count(*)` is answered from it, whatever byte it hit.
    for back in [12, 30, 60, 100] {
        for seg in segment_dirs(&store.path()) {
            let path = seg.join("episodes.parquet");
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            let mut bytes = std::fs::read(&path).unwrap();
            let at = bytes.len() - back;
            bytes[at] ^= 1;
            std::fs::write(&path, &bytes).unwrap();
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
        }
        assert_eq!(store.sql(COUNTS), baseline, "answered from a footer with a flipped bit {back} bytes from its end");
    }
    let out = store.run(&["verify", "--repair"]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    assert!(store.verify().0);
    assert_eq!(store.sql(COUNTS), baseline);
}

/// Where each episode's stored record value (packed: compressed with the store's
/// dictionary or without) sits in the store file.
fn record_offsets(store: &TestStore, file: &[u8]) -> Vec<(usize, usize)> {
    let opened = Store::open_read_only(store.path()).unwrap();
    let snapshot = opened.snapshot().unwrap();
    let mut out = Vec::new();
    for record in snapshot.episodes().unwrap() {
        let value = snapshot.record_bytes(&record.id).unwrap().unwrap();
        let at = file.windows(value.len()).position(|w| w == value.as_slice()).expect("a value sits whole in a page");
        out.push((at, value.len()));
    }
    out
}

#[test]
fn a_flipped_byte_in_a_stored_record_is_found_never_answered_from_and_repaired_where_it_can_be() {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let labels_before = store.sql("SELECT episode_id, label FROM episodes ORDER BY episode_id");
    let file = store.path().join("epistore.redb");
    let original = std::fs::read(&file).unwrap();
    let offsets = record_offsets(&store, &original);
    assert_eq!(offsets.len(), 4);
    // The middle and the end of each value: a compressed record's last bytes hold its
    // derived fields, its first ones its file listing.
    let flips: Vec<usize> = offsets.iter().flat_map(|(at, len)| [at + len / 2, at + len - 2, at + len - 1]).collect();
    for at in flips {
        let mut bytes = original.clone();
        bytes[at] ^= 0x08;
        std::fs::write(&file, &bytes).unwrap();
        let (ok, report) = store.verify();
        assert!(!ok, "a flipped record byte at {at} passed verify: {report}");
        // Segments built before the damage still answer rightly; a read that decodes
        // the record (here: building the segments again) refuses it.
        let _ = std::fs::remove_dir_all(store.path().join("columnar"));
        let out = store.run(&["sql", "select label, count(*) from episodes group by label"]);
        assert!(!out.status.success(), "sql answered from a damaged record: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains("checksum"), "{}", text(&out.stderr));
        // What repair can rebuild it does; a flip that garbled the file listing (which
        // is ingested, not derived) leaves the store refused, the problem named.
        let repair = store.run(&["verify", "--repair"]);
        let said = format!("{}{}", text(&repair.stdout), text(&repair.stderr));
        if repair.status.success() {
            assert!(said.contains("repaired: episode"), "{said}");
            assert_eq!(store.sql("SELECT episode_id, label FROM episodes ORDER BY episode_id"), labels_before);
        } else {
            assert!(said.contains("file listing does not hash") || said.contains("checksum"), "{said}");
            assert!(!store.verify().0);
        }
        std::fs::write(&file, &original).unwrap();
    }
    // Repairing a record whose listing survived is tested in the store crate
    // (`verify_tests`): a flip inside a compressed value rarely leaves it readable.
}

#[test]
fn a_zeroed_page_gives_an_error_that_says_so_never_a_panic() {
    let store = TestStore::synthetic(40, 3);
    let file = store.path().join("epistore.redb");
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[4096..8192].fill(0);
    std::fs::write(&file, &bytes).unwrap();
    for args in [&["verify"][..], &["ls"], &["sql", "select count(*) from episodes"], &["verify", "--repair"]] {
        let out = store.run(args);
        let stderr = text(&out.stderr);
        let said = format!("{}{stderr}", text(&out.stdout));
        assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{args:?} panicked: {stderr}");
        assert!(!out.status.success(), "{args:?} succeeded on a zeroed page");
        assert_ne!(out.status.code(), Some(101), "{args:?} exited as a panic does");
        assert!(said.contains("damaged") || said.contains("corrupted"), "{args:?} did not say what is wrong: {said}");
        // `verify` gives its verdict (1: damaged), as the README says, not a usage error.
        if args[0] == "verify" {
            assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        }
    }
}

/// Everything a reader can be told about a store, as one comparable value: records,
/// traces, every file's bytes (by hash), cells, the log.
fn answers(store: &Store) -> epistore_store::Result<BTreeMap<String, String>> {
    let snapshot = store.snapshot()?;
    let mut out = BTreeMap::new();
    for record in snapshot.episodes()? {
        for (file, bytes) in record.files.iter().zip(snapshot.files(&record)?) {
            out.insert(format!("{} {}", hex(&record.id), file.path), hex(blake3::hash(&bytes).as_bytes()));
        }
        out.insert(hex(&record.id), format!("{record:?}"));
    }
    snapshot.for_each_traces(|id, episode| {
        out.insert(format!("{} traces", hex(&id)), format!("{episode:?}"));
        Ok(true)
    })?;
    out.insert("cells".into(), format!("{:?}", snapshot.cells()?));
    out.insert("log".into(), format!("{:?}", snapshot.ingest_log()?));
    out.insert("count".into(), snapshot.episode_count()?.to_string());
    Ok(out)
}

#[derive(Debug, Default)]
struct Sweep {
    found_by_verify: usize,
    refused: usize,
    no_effect: usize,
    silent: Vec<usize>,
    panics: Vec<usize>,
}

/// One flip: what verify says and, when it finds nothing, what reads give.
fn try_flip(dir: &Path, baseline: &BTreeMap<String, String>, sweep: &mut Sweep, at: usize) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<bool, String> {
        let store = Store::open_read_only(dir).map_err(|e| e.to_string())?;
        let report = store.snapshot().and_then(|s| s.verify()).map_err(|e| e.to_string())?;
        if !report.problems.is_empty() {
            return Ok(true);
        }
        match answers(&store) {
            Ok(found) if &found == baseline => Ok(false),
            Ok(_) => Err("SILENT".into()),
            Err(e) => Err(e.to_string()),
        }
    }));
    match outcome {
        Ok(Ok(true)) => sweep.found_by_verify += 1,
        Ok(Ok(false)) => sweep.no_effect += 1,
        Ok(Err(e)) if e == "SILENT" => sweep.silent.push(at),
        Ok(Err(_)) => sweep.refused += 1,
        Err(_) => sweep.panics.push(at),
    }
}

#[test]
fn a_seeded_byte_flip_sweep_finds_no_silent_wrong_answer_and_no_panic() {
    let store = TestStore::synthetic(24, 11);
    let file = store.path().join("epistore.redb");
    let original = std::fs::read(&file).unwrap();
    let baseline = answers(&Store::open_read_only(store.path()).unwrap()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let flipped = work.path().join("epistore.redb");

    // Half the flips anywhere in the file, half in its pages that hold data (not
    // zero-filled free space), where they can do harm.
    let used: Vec<usize> =
        (0..original.len() / 4096).filter(|p| original[p * 4096..(p + 1) * 4096].iter().any(|b| *b != 0)).collect();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ 20261201;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let flips: usize = std::env::var("EPISTORE_FLIPS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let mut sweep = Sweep::default();
    for i in 0..flips {
        let at = if i % 2 == 0 {
            next() as usize % original.len()
        } else {
            used[next() as usize % used.len()] * 4096 + next() as usize % 4096
        };
        let mut bytes = original.clone();
        bytes[at] ^= 1 << (next() % 8);
        std::fs::write(&flipped, &bytes).unwrap();
        try_flip(work.path(), &baseline, &mut sweep, at);
    }
    eprintln!(
        "byte-flip sweep over {} bytes, {flips} flips: {} found by verify, {} refused by reads, {} without effect, {} silent, {} panics",
        original.len(),
        sweep.found_by_verify,
        sweep.refused,
        sweep.no_effect,
        sweep.silent.len(),
        sweep.panics.len()
    );
    assert_eq!(sweep.silent, Vec::<usize>::new(), "flips that changed an answer and passed verify: {sweep:?}");
    assert_eq!(sweep.panics, Vec::<usize>::new(), "flips that panicked: {sweep:?}");
    assert!(sweep.found_by_verify + sweep.refused > flips / 10, "the sweep hit nothing that matters: {sweep:?}");
}
