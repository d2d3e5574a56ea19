//! A Terminal-Bench 1.x run folder read by hand
//! (tests/fixtures/constructed/terminal-bench/README.md).

use crate::testing::{fixtures, import_paths};
use crate::Options;

#[test]
fn a_run_folder_gives_one_episode_per_trial() {
    let (plan, runs) = import_paths(&[fixtures("constructed/terminal-bench/runs")], &Options::default());
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    // The run's summary and metadata are covered by the trials.
    assert_eq!(plan.covered.len(), 2, "{:?}", plan.covered);
    let mut runs: Vec<_> = runs.into_iter().map(|r| r.expect("imports")).collect();
    runs.sort_by(|a, b| a.package.episode.manifest.episode.cmp(&b.package.episode.manifest.episode));
    assert_eq!(runs.len(), 2);

    // fix-permissions: not resolved (is_resolved false), a timeout (failure_mode
    // agent_timeout); its agent's log is not Terminus's: no action trace at all.
    let e = &runs[0].package.episode;
    assert_eq!(e.manifest.episode, "fix-permissions.1-of-1.2025-06-01__12-00-00");
    assert_eq!(e.manifest.task, "fix-permissions");
    assert_eq!(e.outcome.correct, Some(false));
    assert_eq!(e.outcome.stop_reason, "timeout");
    assert!(e.actions.is_none() && e.tools.is_none(), "not recorded, not recorded-none");
    assert_eq!(e.outcome.agent_reported_complete, None);

    // hello-world: resolved; run_metadata.json's agent and model; Terminus's two
    // commands (the keystrokes ending in Enter), the screen after them as the last
    // one's output, then its claim (is_task_complete in episode 1).
    let e = &runs[1].package.episode;
    assert_eq!(e.manifest.task, "hello-world");
    assert_eq!(e.manifest.model, "anthropic/claude-sonnet-4-20250514");
    assert_eq!(e.manifest.harness_name.as_deref(), Some("terminus"));
    assert_eq!(e.outcome.correct, Some(true));
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(
        e.manifest.task_prompt.as_deref(),
        Some("Create a file called hello.txt in the current directory. Write \"Hello, world!\" to it.")
    );
    let commands: Vec<(String, Option<i64>)> =
        e.tools.iter().flatten().map(|t| (t.command.clone().unwrap_or_default(), t.exit_code)).collect();
    assert_eq!(commands, [("echo 'Hello, world!' > hello.txt".to_string(), None), ("cat hello.txt".to_string(), None)]);
    // The redirect writes hello.txt: a mutation, by the shell rules.
    let wrote: Vec<_> = e.actions.iter().flatten().filter(|a| a.mutates).collect();
    assert_eq!(wrote.len(), 1);
    let out = e.tools.iter().flatten().nth(1).and_then(|t| t.output.clone()).expect("the screen");
    assert!(String::from_utf8_lossy(runs[1].package.raw.file(&out).unwrap()).contains("Hello, world!"));
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out), (Some(2812), Some(311)));
}

#[test]
fn a_trial_cut_short_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("results.json");
    std::fs::write(&file, "{\n  \"trial_name\": \"t\",\n  \"task_id\": \"x\",\n  \"is_resolved\": tr").unwrap();
    let options = Options { format: crate::Format::from_name("terminal-bench"), ..Options::default() };
    let (plan, _) = import_paths(&[file], &options);
    let r = &plan.refused[0].1;
    assert_eq!(r.place.as_deref(), Some("line 4"), "{r}");
}
