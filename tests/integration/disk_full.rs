//! A full disk: an ingest that runs out of space says what went in and what did not,
//! leaves the store intact, and a reader on the full disk still reads.
//!
//! Needs a small tmpfs, which this test mounts itself when it may (as root, as `.ci/run`
//! runs); elsewhere it says so and checks nothing.

use std::path::Path;
use std::process::Command;

use crate::util::*;

/// A mounted tmpfs, unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let size = format!("size={bytes}");
        let status = Command::new("mount").args(["-t", "tmpfs", "-o", &size, "tmpfs"]).arg(dir.path()).output().ok()?;
        status.status.success().then_some(Tmpfs(dir))
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Packages with an incompressible artifact each, so the store grows with every one.
fn bulky_packages(dir: &Path, count: usize) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in 0..count {
        let mut files = minimal_package(&format!("bulky/{i}"));
        let noise: Vec<u8> = (0..48 * 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        files.insert("artifacts/noise.bin".into(), noise);
        write_package(&dir.join(format!("pkg-{i:04}")), &files);
    }
}

#[test]
#[cfg_attr(not(epistore_root), ignore = "needs root, to mount a 6 MiB tmpfs (CI runs as root)")]
fn a_full_disk_stops_the_ingest_with_what_went_in_and_readers_still_read() {
    let disk = Tmpfs::mount(6 << 20)
        .expect("running as root, but a tmpfs would not mount (a container without CAP_SYS_ADMIN?)");
    let work = tempfile::tempdir().unwrap();
    bulky_packages(work.path(), 400); // ~19 MB of files into a 6 MB disk
    let store_dir = disk.path().join("store");
    let run = |args: &[&str]| Command::new(BIN).arg("--store").arg(&store_dir).args(args).output().unwrap();

    let out = run(&["ingest", "--quiet", "--chunk", "16", work.path().to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "an ingest into a full disk succeeded: {}", text(&out.stdout));
    assert!(stderr.contains("No space left on device"), "{stderr}");
    let said: u64 = stderr
        .split("Committed before it: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the error does not say what went in: {stderr}"));
    assert!(said > 0 && said < 400, "{said} packages said committed: {stderr}");
    assert!(stderr.contains("of 400 sources"), "{stderr}");

    // The store holds exactly what the error said, intact; a reader on the full disk
    // answers (from the store itself when it cannot write segments).
    let verify = run(&["verify", "--format", "json"]);
    assert!(verify.status.success(), "{}{}", text(&verify.stdout), text(&verify.stderr));
    let report: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["episodes"].as_u64(), Some(said), "{report}");
    let sql = run(&["sql", "--format", "json", "select count(*) as n from episodes"]);
    assert!(sql.status.success(), "sql on a full disk: {}", text(&sql.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&sql.stdout).unwrap();
    assert_eq!(rows[0]["n"].as_u64(), Some(said));
}
