//! Observer integrity in CI: `benches/observer_bench.py` on a small seeded sample of
//! generated Claude Code and Codex transcripts with known truth and injected hazards.
//! It fails on any over-claim (a derived `current` posture or check where the truth is
//! not, or a completion claim the log does not show) outside the one known, documented
//! blind spot (`silent_script`: an opaque program that writes after the last test and
//! prints nothing, so no log shows the write), and on any score below what this round
//! measured (`benches/observer-baseline.json`), so the scores can only improve.

use std::process::Command;

use crate::util::{repo_root, text, BIN};

#[test]
fn the_derived_posture_never_over_claims_on_generated_hazards() {
    let out = Command::new("python3")
        .arg(repo_root().join("benches/observer_bench.py"))
        .args([
            "--bin",
            BIN,
            "--seed",
            "1",
            "--per-hazard",
            "2",
            "--pairs",
            "16",
            "--check",
            "--allow",
            "silent_script",
        ])
        .arg("--baseline")
        .arg(repo_root().join("benches/observer-baseline.json"))
        .output()
        .expect("python3 runs the benchmark");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let report = text(&out.stdout);
    for source in ["claude-code: 42 scenarios", "codex: 42 scenarios"] {
        assert!(report.contains(source), "{report}");
    }
}
