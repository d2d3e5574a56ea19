//! Ingest, round trip, idempotence, dedupe, archives and the read-only SQL surface.

use std::path::Path;

use serde_json::Value;

use crate::util::*;

#[test]
fn export_package_is_byte_identical_and_keeps_unknown_fields() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let pkg = work.path().join("pkg");
    let mut files = read_tree(&dataset().join("H3"));
    // Unknown fields at every level must survive, in the bytes and in SQL.
    let manifest = String::from_utf8(files["manifest.json"].clone()).unwrap();
    let manifest = manifest.replacen('{', "{\"x_vendor\": {\"run\": 7},", 1);
    files.insert("manifest.json".into(), manifest.into_bytes());
    let mut actions = files["traces/actions.jsonl"].clone();
    actions.extend_from_slice(b"\n\n"); // blank lines are kept byte for byte too
    files.insert("traces/actions.jsonl".into(), actions);
    write_package(&pkg, &files);

    let out = store.ingest(&[&pkg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = store.sql("SELECT episode_id, manifest_extra FROM episodes");
    assert_eq!(rows.len(), 1);
    let id = rows[0]["episode_id"].as_str().unwrap().to_string();
    let extra: Value = serde_json::from_str(rows[0]["manifest_extra"].as_str().unwrap()).unwrap();
    assert_eq!(extra["x_vendor"]["run"], 7);

    let out_dir = work.path().join("exported");
    let out = store.run(&["export-package", &id[..8], out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(read_tree(&out_dir), files);
    // Exporting again over existing files is refused rather than overwriting them.
    let again = store.run(&["export-package", &id, out_dir.to_str().unwrap()]);
    assert!(!again.status.success());
}

#[test]
fn episode_id_matches_an_independent_computation() {
    let store = TestStore::new();
    store.ingest(&[&dataset().join("H0")]);
    let files = read_tree(&dataset().join("H0"));
    let mut hasher = blake3::Hasher::new();
    for (path, bytes) in &files {
        hasher.update(path.as_bytes());
        hasher.update(&[0]);
        hasher.update(blake3::hash(bytes).as_bytes());
    }
    let rows = store.sql("SELECT episode_id FROM episodes");
    assert_eq!(rows[0]["episode_id"], hasher.finalize().to_hex().as_str());
}

#[test]
fn ingesting_twice_adds_nothing_and_shared_files_are_stored_once() {
    let store = TestStore::new();
    let (code, first) = store.ingest_json(&[&dataset()]);
    assert_eq!(code, 0);
    assert_eq!(first["added"], 4);
    let (_, before) = store.verify();

    let (code, second) = store.ingest_json(&[&dataset()]);
    assert_eq!(code, 0);
    assert_eq!(second["added"], 0);
    assert_eq!(second["already_present"], 4);
    assert_eq!(second["batches"].as_array().unwrap().len(), 0);
    let (ok, after) = store.verify();
    assert!(ok);
    assert_eq!(before, after);

    // Distinct contents of the dataset's shared files (format 3: large artifacts; the
    // rest live in each episode's own file record) = blobs in the store.
    let mut distinct = std::collections::HashSet::new();
    for level in ["H0", "H1", "H2", "H3"] {
        for (path, bytes) in read_tree(&dataset().join(level)) {
            if epistore_store::shared_file(&path, bytes.len() as u64) {
                distinct.insert(blake3::hash(&bytes));
            }
        }
    }
    assert_eq!(after["blobs"], distinct.len());
}

#[test]
fn a_folder_of_many_packages_dedupes_shared_artifacts() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    many_packages(work.path(), 300);
    let (code, summary) = store.ingest_json(&[work.path()]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["added"], 300);
    let (ok, report) = store.verify();
    assert!(ok, "{report}");
    // Each package has 5 files. The 4 KiB artifact, identical in all, is the one shared
    // file (format 3): stored once. The others live in each episode's own file record.
    assert_eq!(report["blobs"], 1);
    let cells = store.sql("SELECT count(DISTINCT model || harness_level || task) AS n FROM episodes");
    assert_eq!(cells[0]["n"], 60);
}

fn tar_of(packages: &[(&str, std::collections::BTreeMap<String, Vec<u8>>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (dir, files) in packages {
        for (path, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, format!("{dir}/{path}"), bytes.as_slice()).unwrap();
        }
    }
    builder.into_inner().unwrap()
}

#[test]
fn archives_of_every_kind_hold_several_packages() {
    let work = tempfile::tempdir().unwrap();
    let a = minimal_package("a");
    let b = minimal_package("b");
    let mut c = minimal_package("c");
    c.insert("artifacts/nested/manifest.json".into(), b"{}".to_vec()); // an artifact, not a package
    let tar = tar_of(&[("runs/a", a.clone()), ("runs/b", b), ("c", c)]);
    std::fs::write(work.path().join("x.tar"), &tar).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    std::fs::write(work.path().join("x.tar.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(work.path().join("x.tar.zst"), zstd::encode_all(tar.as_slice(), 3).unwrap()).unwrap();

    for name in ["x.tar", "x.tar.gz", "x.tar.zst"] {
        let store = TestStore::new();
        let (code, summary) = store.ingest_json(&[&work.path().join(name)]);
        assert_eq!(code, 0, "{summary}");
        assert_eq!(summary["added"], 3, "{name}: {summary}");
        let names: Vec<String> = summary["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["package"].as_str().unwrap().to_string())
            .collect();
        assert!(names.iter().any(|n| n.ends_with(&format!("{name}!runs/a"))), "{names:?}");
        // The same package as a directory has the same id as inside the archive.
        let dir = work.path().join("a-dir");
        if !dir.exists() {
            write_package(&dir, &a);
        }
        let (_, again) = store.ingest_json(&[&dir]);
        assert_eq!(again["already_present"], 1, "{again}");
    }
}

#[test]
fn a_bad_package_does_not_stop_the_good_ones() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    let mut bad = minimal_package("bad");
    bad.remove("outcome.json");
    write_package(&work.path().join("1-bad"), &bad);
    write_package(&work.path().join("2-good"), &minimal_package("good"));
    let (code, summary) = store.ingest_json(&[work.path()]);
    assert_eq!(code, 1);
    assert_eq!(summary["added"], 1);
    assert_eq!(summary["rejected"], 1);
    let bad_row = summary["packages"].as_array().unwrap().iter().find(|p| p["status"] == "rejected").unwrap();
    assert!(bad_row["reason"].as_str().unwrap().contains("outcome.json"), "{bad_row}");
    assert_eq!(store.episode_count(), 1);
}

#[test]
fn sql_is_read_only() {
    let store = TestStore::new();
    store.ingest(&[&dataset()]);
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("out.csv");
    for statement in [
        format!("COPY (SELECT 1) TO '{}'", target.display()),
        "CREATE TABLE t AS SELECT 1".to_string(),
        "CREATE VIEW v AS SELECT 1".to_string(),
        format!("CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '{}'", work.path().display()),
        "INSERT INTO episodes SELECT * FROM episodes".to_string(),
        "DROP TABLE episodes".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
    ] {
        let out = store.run(&["sql", &statement]);
        assert_eq!(out.status.code(), Some(2), "{statement} was not refused: {}", text(&out.stdout));
    }
    assert!(!target.exists());
    assert_eq!(store.episode_count(), 4);
}

#[test]
fn sql_formats_keep_nulls() {
    let store = TestStore::new();
    store.ingest(&[&dataset()]);
    // H0..H2 have no interventions trace: n_interventions is NULL, not 0; H3's is empty: 0.
    let rows = store.sql("SELECT harness_level, n_interventions FROM episodes ORDER BY harness_level");
    assert_eq!(rows[0]["n_interventions"], Value::Null);
    assert_eq!(rows[3]["n_interventions"], 0);
    let csv = store.run(&["sql", "--format", "csv", "SELECT harness_level, n_interventions FROM episodes ORDER BY 1"]);
    let csv = text(&csv.stdout);
    assert_eq!(csv.lines().next(), Some("harness_level,n_interventions"));
    assert_eq!(csv.lines().nth(1), Some("H0,"));
    assert_eq!(csv.lines().nth(4), Some("H3,0"));
    let empty = store.sql("SELECT * FROM episodes WHERE false");
    assert!(empty.is_empty());
}

#[test]
fn commands_on_a_missing_store_fail_clearly() {
    let store = TestStore::new();
    for args in [&["ls"][..], &["verify"], &["sql", "SELECT 1"]] {
        let out = store.run(args);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("no store"), "{}", text(&out.stderr));
    }
    assert!(!Path::new(&store.path()).exists(), "a read command created the store");
}

#[test]
fn ls_and_show_use_the_cell_index() {
    let store = TestStore::new();
    store.ingest(&[&dataset()]);
    let out = store.run(&["ls", "--format", "json"]);
    let cells: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cells.len(), 4);
    assert!(cells.iter().all(|c| c["episodes"] == 1 && c["task"] == "login-validation"));
    let id = store.h3_episode();
    let out = store.run(&["show", &id[..6], "--format", "json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["episode_id"], id.as_str());
    assert_eq!(shown["posture"], "failure");
    let missing = store.run(&["show", "ffffffffffff"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn compact_gives_back_space_and_changes_nothing_stored() {
    let store = TestStore::new();
    let work = tempfile::tempdir().unwrap();
    many_packages(work.path(), 200);
    assert!(store.ingest(&[work.path()]).status.success());
    let (_, before) = store.verify();
    let file = store.path().join("epistore.redb");
    let size_before = std::fs::metadata(&file).unwrap().len();
    let out = store.run(&["compact"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (ok, after) = store.verify();
    assert!(ok);
    assert_eq!(before, after);
    // A store this small has next to no free space to give back, and redb's compaction
    // moves the two 64 KiB dictionary values (the dictionary and its second copy, each
    // one contiguous run of pages) to where they fit: the file may grow by at most
    // their size (measured: 561,152 -> 598,016 bytes), never by more.
    let size_after = std::fs::metadata(&file).unwrap().len();
    assert!(size_after <= size_before + (128 << 10), "{size_before} -> {size_after}");
    assert_eq!(store.episode_count(), 200);
}

#[test]
fn synth_ingest_stores_what_ingesting_the_written_files_stores() {
    // 2 models x 4 levels x 3 tasks: 24 cells, most with several episodes, so the
    // metrics compare more than single episodes.
    let population = ["--seed", "3", "--models", "2", "--tasks", "3", "--output-scale", "0.05", "--quiet"];
    // From files: synth --out, then ingest.
    let from_files = TestStore::new();
    let pop = from_files.dir.path().join("pop");
    let out =
        from_files.run(&[&["synth", "--episodes", "40", "--out", pop.to_str().unwrap()][..], &population].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(from_files.ingest(&[&pop]).status.success());
    // Straight into a store, in two parts (the scale benchmark's way).
    let direct = TestStore::new();
    for (first, episodes, added) in [("0", "25", 25), ("25", "15", 15)] {
        let args = ["synth", "--ingest", "--episodes", episodes, "--first", first, "--format", "json"];
        let out = direct.run(&[&args[..], &population].concat());
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["added"], added, "{summary}");
        assert_eq!(summary["rejected"], 0, "{summary}");
    }
    let ids = "SELECT episode_id, package_bytes, model, harness_level, task FROM episodes ORDER BY episode_id";
    assert_eq!(direct.sql(ids), from_files.sql(ids));
    let metrics = "SELECT * FROM cell_metrics ORDER BY model, harness_level, task";
    let rows = direct.sql(metrics);
    assert!(rows.len() < 40 && rows.iter().any(|r| r["episodes"].as_i64() > Some(1)), "{rows:?}");
    assert_eq!(rows, from_files.sql(metrics));
    // The same episodes, so the written files add nothing.
    let (code, summary) = direct.ingest_json(&[&pop]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!((summary["added"].as_u64(), summary["already_present"].as_u64()), (Some(0), Some(40)));
    let (ok, report) = direct.verify();
    assert!(ok, "{report}");
}
