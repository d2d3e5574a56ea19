//! Observer integrity in CI: `benches/observer_bench.py` on a small seeded sample of
//! generated transcripts of ten sources (Claude Code, Codex, Inspect, Gemini CLI,
//! OpenHands, SWE-agent, mini-SWE-agent, ATIF, Pi, OpenCode) with known truth and
//! injected hazards. It fails on any over-claim (a derived `current` posture or check
//! where the truth is not, or a completion claim the log does not show) outside the
//! known, documented blind spots (`silent_script`: an opaque program that writes after
//! the last test and prints nothing, so only a state digest shows the write; a test in
//! another tree in the logs that name no working directory, Inspect and ATIF), and on any
//! score below what this round measured (`benches/observer-baseline.json`), so the scores
//! can only improve.

use std::process::Command;

use crate::util::{repo_root, text, BIN};

#[test]
fn the_derived_posture_never_over_claims_on_generated_hazards() {
    let out = Command::new("python3")
        .arg(repo_root().join("benches/observer_bench.py"))
        .args(["--bin", BIN, "--seed", "1", "--per-hazard", "2", "--pairs", "16", "--check"])
        .args(["--allow", "silent_script", "--allow", "inspect:elsewhere", "--allow", "atif:elsewhere"])
        .arg("--baseline")
        .arg(repo_root().join("benches/observer-baseline.json"))
        .output()
        .expect("python3 runs the benchmark");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let report = text(&out.stdout);
    for source in [
        "claude-code: 54",
        "codex: 46",
        "inspect: 44",
        "gemini-cli: 42",
        "openhands: 42",
        "swe-agent: 38",
        "mini-swe-agent: 40",
        "atif: 40",
        "pi: 42",
        "opencode: 44",
    ] {
        assert!(report.contains(&format!("{source} scenarios")), "{report}");
    }
}
