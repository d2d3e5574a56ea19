//! Every rejection rule of docs/format.md §7, plus archive escapes: each is refused with a
//! message naming file, line and field, and leaves the store exactly as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::*;

type Files = BTreeMap<String, Vec<u8>>;

fn set(files: &mut Files, path: &str, content: &str) {
    files.insert(path.to_string(), content.as_bytes().to_vec());
}

fn append(files: &mut Files, path: &str, line: &str) {
    let entry = files.entry(path.to_string()).or_default();
    entry.extend_from_slice(line.as_bytes());
    entry.push(b'\n');
}

const MANIFEST: &str =
    r#"{"format":"episode-package/1","episode":"e","model":{"name":"m"},"harness":{"level":"H1"},"task":{"id":"t"}}"#;

/// (name, how to break the minimal package, text the error must contain)
/// A change that breaks a package, with its name and the message expected.
type Breakage = (&'static str, Box<dyn Fn(&mut Files)>, &'static str);

fn cases() -> Vec<Breakage> {
    vec![
        (
            "missing manifest",
            Box::new(|f: &mut Files| {
                f.remove("manifest.json");
            }),
            "manifest.json: required file is missing",
        ),
        (
            "missing outcome",
            Box::new(|f: &mut Files| {
                f.remove("outcome.json");
            }),
            "outcome.json: required file is missing",
        ),
        (
            "missing model.name",
            Box::new(|f: &mut Files| set(f, "manifest.json", &MANIFEST.replace(r#""name":"m""#, r#""version":"1""#))),
            "manifest.json: field `model.name`: required field is missing",
        ),
        (
            "missing harness.level",
            Box::new(|f: &mut Files| set(f, "manifest.json", &MANIFEST.replace(r#""level":"H1""#, r#""name":"x""#))),
            "field `harness.level`",
        ),
        (
            "missing task.id",
            Box::new(|f: &mut Files| set(f, "manifest.json", &MANIFEST.replace(r#""id":"t""#, r#""family":"x""#))),
            "field `task.id`",
        ),
        (
            "missing episode",
            Box::new(|f: &mut Files| set(f, "manifest.json", &MANIFEST.replace(r#""episode":"e","#, ""))),
            "field `episode`",
        ),
        (
            "missing label",
            Box::new(|f: &mut Files| set(f, "outcome.json", r#"{"correct":true}"#)),
            "outcome.json: field `label`",
        ),
        (
            "unsupported format",
            Box::new(|f: &mut Files| {
                set(f, "manifest.json", &MANIFEST.replace("episode-package/1", "episode-package/2"))
            }),
            "field `format`: unsupported format",
        ),
        (
            "manifest not JSON",
            Box::new(|f: &mut Files| set(f, "manifest.json", "{\"format\":\n")),
            "manifest.json:2: not valid JSON",
        ),
        (
            "manifest not an object",
            Box::new(|f: &mut Files| set(f, "manifest.json", "[1,2]")),
            "manifest.json: expected a JSON object",
        ),
        (
            "not UTF-8",
            Box::new(|f: &mut Files| {
                f.insert(
                    "traces/tools.jsonl".into(),
                    b"{\"seq\":9,\"tool\":\"a\"}\n{\"seq\":10,\"tool\":\"\xff\"}\n".to_vec(),
                );
            }),
            "traces/tools.jsonl:2: not valid UTF-8",
        ),
        (
            "bad JSON line after blank lines",
            Box::new(|f: &mut Files| set(f, "traces/tools.jsonl", "{\"seq\":9,\"tool\":\"a\"}\n\n\n{\"seq\":10,\n")),
            "traces/tools.jsonl:4: not valid JSON",
        ),
        (
            "line not an object",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", "[9]")),
            "traces/tools.jsonl:1: expected a JSON object",
        ),
        (
            "missing seq",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"tool":"bash"}"#)),
            "traces/tools.jsonl:1: field `seq`: required field is missing",
        ),
        (
            "negative seq",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"seq":-1,"tool":"bash"}"#)),
            "field `seq`: -1 is below the minimum 0",
        ),
        (
            "missing tool",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"seq":9}"#)),
            "traces/tools.jsonl:1: field `tool`",
        ),
        (
            "missing artifact",
            Box::new(|f: &mut Files| append(f, "traces/context.jsonl", r#"{"seq":9,"kind":"doc"}"#)),
            "traces/context.jsonl:1: field `artifact`",
        ),
        (
            "missing check_id",
            Box::new(|f: &mut Files| {
                append(f, "traces/verification.jsonl", r#"{"seq":9,"actor":"agent","result":"pass"}"#)
            }),
            "traces/verification.jsonl:2: field `check_id`",
        ),
        (
            "verifier without verdict",
            Box::new(|f: &mut Files| {
                append(
                    f,
                    "traces/verification.jsonl",
                    r#"{"seq":9,"check_id":"v","actor":"verifier","verifier":"judge-a"}"#,
                )
            }),
            "traces/verification.jsonl:2: field `verdict`",
        ),
        (
            "verifier without identity",
            Box::new(|f: &mut Files| {
                append(
                    f,
                    "traces/verification.jsonl",
                    r#"{"seq":9,"check_id":"v","actor":"verifier","verdict":"accept"}"#,
                )
            }),
            "field `verifier`",
        ),
        (
            "missing failure_seq",
            Box::new(|f: &mut Files| append(f, "traces/attribution.jsonl", r#"{"seq":9,"category":"tool"}"#)),
            "traces/attribution.jsonl:1: field `failure_seq`",
        ),
        (
            "enum value",
            Box::new(|f: &mut Files| append(f, "traces/actions.jsonl", r#"{"seq":9,"kind":"teleport"}"#)),
            "traces/actions.jsonl:3: field `kind`: `teleport` is not one of",
        ),
        (
            "label enum",
            Box::new(|f: &mut Files| set(f, "outcome.json", r#"{"label":"success"}"#)),
            "outcome.json: field `label`",
        ),
        (
            "wrong type",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"seq":9,"tool":"bash","timed_out":"yes"}"#)),
            "field `timed_out`: expected true or false",
        ),
        (
            "severity range",
            Box::new(|f: &mut Files| append(f, "traces/entropy.jsonl", r#"{"seq":9,"category":"code","severity":4}"#)),
            "traces/entropy.jsonl:1: field `severity`: 4 is outside",
        ),
        (
            "confidence range",
            Box::new(|f: &mut Files| {
                append(f, "traces/tools.jsonl", r#"{"seq":8,"tool":"t","exit_code":1}"#);
                append(f, "traces/attribution.jsonl", r#"{"seq":9,"failure_seq":8,"confidence":1.5}"#)
            }),
            "field `confidence`",
        ),
        (
            "score range",
            Box::new(|f: &mut Files| set(f, "outcome.json", r#"{"label":"failed","score":1.2}"#)),
            "outcome.json: field `score`",
        ),
        (
            "bad timestamp",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"seq":9,"tool":"t","ts":"yesterday"}"#)),
            "field `ts`: `yesterday` is not an RFC 3339 timestamp",
        ),
        (
            "component enum",
            Box::new(|f: &mut Files| {
                set(f, "manifest.json", &MANIFEST.replace(r#""level":"H1""#, r#""level":"H1","components":["magic"]"#))
            }),
            "field `harness.components[0]`",
        ),
        (
            "seq repeats across files",
            Box::new(|f: &mut Files| append(f, "traces/tools.jsonl", r#"{"seq":1,"tool":"bash"}"#)),
            "field `seq`: seq 1 repeats",
        ),
        (
            "dangling tool_seq",
            Box::new(|f: &mut Files| append(f, "traces/actions.jsonl", r#"{"seq":9,"kind":"run","tool_seq":77}"#)),
            "traces/actions.jsonl:3: field `tool_seq`: refers to seq 77",
        ),
        (
            "dangling recovered_by",
            Box::new(|f: &mut Files| {
                append(f, "traces/tools.jsonl", r#"{"seq":9,"tool":"t","exit_code":2,"recovered_by":50}"#)
            }),
            "field `recovered_by`: refers to seq 50",
        ),
        (
            "dangling failure_seq",
            Box::new(|f: &mut Files| append(f, "traces/attribution.jsonl", r#"{"seq":9,"failure_seq":40}"#)),
            "field `failure_seq`: refers to seq 40",
        ),
        (
            "failure_seq names an action",
            Box::new(|f: &mut Files| append(f, "traces/attribution.jsonl", r#"{"seq":9,"failure_seq":0}"#)),
            "field `failure_seq`: seq 0 is a record of the actions trace",
        ),
        (
            "dangling evidence",
            Box::new(|f: &mut Files| {
                append(f, "traces/attribution.jsonl", r#"{"seq":9,"failure_seq":2,"evidence":[0,31]}"#)
            }),
            "field `evidence[1]`: refers to seq 31",
        ),
        (
            "revision above final",
            Box::new(|f: &mut Files| {
                append(
                    f,
                    "traces/verification.jsonl",
                    r#"{"seq":9,"check_id":"c","actor":"agent","result":"pass","revision":2}"#,
                )
            }),
            "traces/verification.jsonl:2: field `revision`: revision 2 lies outside 0..=1",
        ),
        (
            "report JSON invalid",
            Box::new(|f: &mut Files| set(f, "reports/final.json", "{oops")),
            "reports/final.json:1: not valid JSON",
        ),
    ]
}

/// A store holding the dataset, and its `verify` report and count, to compare after.
fn loaded_store() -> (TestStore, serde_json::Value, i64) {
    let store = TestStore::new();
    assert!(store.ingest(&[&dataset()]).status.success());
    let (ok, report) = store.verify();
    assert!(ok);
    let count = store.episode_count();
    (store, report, count)
}

fn assert_refused(store: &TestStore, before: &serde_json::Value, count: i64, path: &Path, expect: &str, name: &str) {
    let out = store.ingest(&[path]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{name}: not rejected: {}{stderr}", text(&out.stdout));
    assert!(stderr.contains(expect), "{name}: message does not say `{expect}`:\n{stderr}");
    assert!(text(&out.stdout).contains("0 added"), "{name}: {}", text(&out.stdout));
    let (ok, after) = store.verify();
    assert!(ok, "{name}: store damaged: {after}");
    assert_eq!(&after, before, "{name}: store changed");
    assert_eq!(store.episode_count(), count, "{name}");
}

#[test]
fn every_rule_of_spec_6_rejects_and_leaves_the_store_as_it_was() {
    let (store, before, count) = loaded_store();
    let work = tempfile::tempdir().unwrap();
    for (i, (name, breakage, expect)) in cases().into_iter().enumerate() {
        let mut files = minimal_package(name);
        breakage(&mut files);
        let dir = work.path().join(format!("case-{i}"));
        write_package(&dir, &files);
        // A directory ingested as a folder must still find the package (or the lack of one).
        if files.contains_key("manifest.json") {
            assert_refused(&store, &before, count, &dir, expect, name);
        } else {
            // Without a manifest there is no package to find in a folder: the archive
            // form shows the rejection instead.
            let tar = work.path().join(format!("case-{i}.tar"));
            let mut builder = tar::Builder::new(std::fs::File::create(&tar).unwrap());
            builder.append_dir_all("pkg", &dir).unwrap();
            builder.into_inner().unwrap();
            if name == "missing manifest" {
                assert_refused(&store, &before, count, &tar, "no package (no manifest.json)", name);
            } else {
                assert_refused(&store, &before, count, &tar, expect, name);
            }
        }
    }
}

/// A tar whose member names are written raw, bypassing the tar crate's own checks.
/// A tar member written by hand: path bytes, type, content, link target.
type TarMember<'a> = (&'a [u8], tar::EntryType, &'a [u8], Option<&'a str>);

fn raw_tar(path: &PathBuf, members: &[TarMember<'_>]) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, kind, data, link) in members {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        if let Some(link) = link {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap();
}

#[test]
fn archive_members_that_escape_the_package_are_refused() {
    let (store, before, count) = loaded_store();
    let work = tempfile::tempdir().unwrap();
    let files = minimal_package("escape");
    let manifest = files["manifest.json"].as_slice();
    let outcome = files["outcome.json"].as_slice();
    let regular = tar::EntryType::Regular;
    let cases: Vec<(&str, Vec<TarMember<'_>>, &str)> = vec![
        (
            "dotdot",
            vec![
                (b"p/manifest.json", regular, manifest, None),
                (b"p/outcome.json", regular, outcome, None),
                (b"p/../../evil.txt", regular, b"x", None),
            ],
            "escapes the package",
        ),
        (
            "absolute",
            vec![
                (b"p/manifest.json", regular, manifest, None),
                (b"p/outcome.json", regular, outcome, None),
                (b"/tmp/evil.txt", regular, b"x", None),
            ],
            "absolute",
        ),
        (
            "symlink",
            vec![
                (b"p/manifest.json", regular, manifest, None),
                (b"p/outcome.json", regular, outcome, None),
                (b"p/artifacts/link", tar::EntryType::Symlink, b"", Some("/etc/passwd")),
            ],
            "is a link",
        ),
        (
            "hardlink",
            vec![
                (b"p/manifest.json", regular, manifest, None),
                (b"p/outcome.json", regular, outcome, None),
                (b"p/artifacts/hard", tar::EntryType::Link, b"", Some("p/manifest.json")),
            ],
            "is a link",
        ),
    ];
    for (name, members, expect) in cases {
        let path = work.path().join(format!("{name}.tar"));
        raw_tar(&path, &members);
        assert_refused(&store, &before, count, &path, expect, name);
    }
    assert!(!work.path().join("evil.txt").exists());
}

#[cfg(unix)]
#[test]
fn links_inside_a_package_directory_are_refused() {
    let (store, before, count) = loaded_store();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("pkg");
    write_package(&dir, &minimal_package("link"));
    std::os::unix::fs::symlink("/etc/hostname", dir.join("artifacts-link")).unwrap();
    assert_refused(&store, &before, count, &dir, "links are not allowed", "symlink in dir");
}

/// A `manifest.json` that is no regular file (a FIFO, a link to a device) makes its
/// folder a package that is refused by name, not a folder skipped with exit 0 (which
/// also would have blocked reading the FIFO forever).
#[test]
fn a_manifest_that_is_no_regular_file_is_refused_by_name() {
    let (store, before, count) = loaded_store();
    let fifo_pkg = store.dir.path().join("fifo-pkg");
    std::fs::create_dir_all(&fifo_pkg).unwrap();
    let made = std::process::Command::new("mkfifo").arg(fifo_pkg.join("manifest.json")).status().unwrap();
    assert!(made.success());
    assert_refused(&store, &before, count, &fifo_pkg, "manifest.json: not a regular file", "a FIFO");

    let link_pkg = store.dir.path().join("link-pkg");
    std::fs::create_dir_all(&link_pkg).unwrap();
    std::os::unix::fs::symlink("/dev/zero", link_pkg.join("manifest.json")).unwrap();
    assert_refused(&store, &before, count, &link_pkg, "links are not allowed", "a link to /dev/zero");
    // Found inside a folder of packages too.
    let parent = store.dir.path().join("folder");
    std::fs::create_dir_all(&parent).unwrap();
    std::fs::rename(&link_pkg, parent.join("link-pkg")).unwrap();
    assert_refused(&store, &before, count, &parent, "links are not allowed", "a link, in a folder");
}
