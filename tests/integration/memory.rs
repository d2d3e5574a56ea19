//! Memory follows the ingest budget, not the reader thread count: four archives that
//! each expand to a gigabyte (decompression bombs: no package inside) are read side by
//! side by the ingest threads, and the process stays near the budget plus one archive.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use crate::util::*;

/// A `.tar.zst` of `members` zero-filled files of `member_mib` MiB each: a few hundred
/// kilobytes on disk.
fn zero_bomb(path: &Path, members: usize, member_mib: usize) {
    let file = std::fs::File::create(path).unwrap();
    let encoder = zstd::stream::write::Encoder::new(file, 1).unwrap().auto_finish();
    let mut tar = tar::Builder::new(encoder);
    for i in 0..members {
        let mut header = tar::Header::new_gnu();
        header.set_size((member_mib << 20) as u64);
        header.set_mode(0o644);
        header.set_cksum();
        let zeros = std::io::Read::take(std::io::repeat(0), (member_mib << 20) as u64);
        tar.append_data(&mut header, format!("zeros/{i}.bin"), zeros).unwrap();
    }
    tar.into_inner().unwrap().flush().unwrap();
}

/// Runs the command to its end and returns (exit code, peak resident memory in bytes),
/// from the kernel's own account of that child (wait4).
fn run_measured(command: &mut Command) -> (i32, u64) {
    let child = command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; the pointers are valid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child); // already reaped
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64 * 1024)
}

#[test]
fn four_bombs_read_side_by_side_stay_within_the_budget_plus_one_archive() {
    let work = tempfile::tempdir().unwrap();
    let bombs = work.path().join("bombs");
    std::fs::create_dir(&bombs).unwrap();
    for i in 0..4 {
        zero_bomb(&bombs.join(format!("bomb-{i}.tar.zst")), 4, 200); // 800 MiB each
    }
    let store = TestStore::new();
    let (code, peak) = run_measured(
        store
            .command()
            .args(["ingest", "--quiet", "--memory-budget-mib", "128"])
            .arg(&bombs)
            .env("EPISTORE_INGEST_THREADS", "8"),
    );
    assert_eq!(code, 1, "the bombs hold no package: each is refused");
    // Budget 128 MiB plus one archive of 800 MiB read past it; four read at once
    // would hold 3.2 GiB.
    let mib = peak >> 20;
    eprintln!("four 800 MiB bombs, budget 128 MiB, 8 reader threads: peak RSS {mib} MiB");
    assert!(mib < 1300, "peak {mib} MiB: memory followed the threads, not the budget");
}
