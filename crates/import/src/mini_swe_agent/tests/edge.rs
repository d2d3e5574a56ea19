//! Refusals of damaged copies, and the 1.x and 2.x shapes on small logs written here.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{actions, checks, interventions, s, tools};
use crate::testing::{fixture, import_paths};
use crate::{Options, Run};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn truncated_copy_is_refused_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(fixture("mini-swe-agent/generated/slugify.success.traj.json")).unwrap();
    let cut = &whole[..whole.len() * 2 / 3];
    let p = write(dir.path(), "cut.traj.json", cut);
    let (_, runs) = import_paths(&[p], &Options::default());
    let err = runs[0].as_ref().unwrap_err();
    assert!(err.file.ends_with("cut.traj.json"));
    let lines = cut.iter().filter(|b| **b == b'\n').count() + 1;
    assert_eq!(err.place.as_deref(), Some(format!("line {lines}").as_str()));
    assert!(err.reason.contains("truncated JSON"));
    let p = write(dir.path(), "other.traj.json", b"{\"info\": {}, \"turns\": []}");
    let (_, runs) = import_paths(&[p], &Options::default());
    assert!(runs[0].as_ref().unwrap_err().reason.contains("no `messages`"));
}

/// mini-swe-agent 1.x: no `extra`; actions in ```` ```bash ```` blocks, results in
/// `<returncode>` tags, a person's rejection and interruption in the harness's words.
#[test]
fn a_1x_trajectory_with_a_person_in_the_loop() {
    let traj = json!({
        "info": {"exit_status": "Submitted", "submission": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n",
                 "model_stats": {"instance_cost": 0.5, "api_calls": 6}, "mini_version": "1.9.0",
                 "config": {"agent": {"mode": "confirm"}, "model": {"model_name": "claude-sonnet-4"},
                            "environment": {"cwd": "/work/proj"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix x.py"},
            {"role": "assistant", "content": "THOUGHT: look\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx.py\n</output>"},
            {"role": "assistant", "content": "two\n```bash\nls\n```\n```bash\npwd\n```"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action in triple backticks."},
            {"role": "assistant", "content": "```bash\nsleep 100\n```"},
            {"role": "user", "content": "The last command <command>sleep 100</command> timed out and has been killed.\nThe output of the command was:\n <output>\n\n</output>"},
            {"role": "assistant", "content": "```bash\nrm -rf src\n```"},
            {"role": "user", "content": "Command not executed. The user rejected your command with the following message: keep src"},
            {"role": "assistant", "content": "```bash\npython -m pytest tests/test_x.py\n```"},
            {"role": "user", "content": "<returncode>1</returncode>\n<output>\n1 failed in 0.1s\n</output>"},
            {"role": "user", "content": "Interrupted by user: look at y.py too"},
            {"role": "assistant", "content": "```bash\nsed -i s/a/b/ x.py && echo MINI_SWE_AGENT_FINAL_OUTPUT && git diff\n```"},
            {"role": "user", "content": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"}
        ]
    });
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "x-1.traj.json", &serde_json::to_vec_pretty(&traj).unwrap());
    let (plan, runs) = import_paths(&[p], &Options::default());
    assert!(plan.refused.is_empty());
    let e = &runs[0].as_ref().unwrap().package.episode;
    assert_eq!(e.manifest.model, "claude-sonnet-4");
    assert_eq!(e.manifest.cluster, "proj");
    assert_eq!(
        tools(e),
        vec![
            (s("shell"), s("ls"), Some(0), s("none")),
            (s("shell"), s("sleep 100"), None, s("timeout")),
            (s("shell"), s("rm -rf src"), None, s("permission_denied")),
            (s("shell"), s("python -m pytest tests/test_x.py"), Some(1), s("nonzero_exit")),
            (s("shell"), s("sed -i s/a/b/ x.py && echo MINI_SWE_AGENT_FINAL_OUTPUT && git diff"), None, s("none")),
        ]
    );
    assert_eq!(e.tools.as_ref().unwrap()[0].common.grade, "derived", "the <returncode> tag is text");
    assert_eq!(
        actions(e),
        vec![
            (s("read"), false, true, 0), // ls
            (s("run"), false, true, 0),  // sleep 100: opaque
            (s("run"), false, false, 0), // rm -rf src: rejected, did not run
            (s("edit"), true, true, 0),  // sed -i
            (s("read"), false, true, 1), // echo
            (s("read"), false, true, 1), // git diff
            (s("complete"), false, true, 1),
        ]
    );
    assert_eq!(checks(e), vec![(s("targeted_test"), s("fail"), s("agent"), s("derived"), 0)]);
    assert_eq!(e.derived.final_revision, 1);
    assert_eq!(e.derived.posture, "stale");
    assert_eq!(
        interventions(e),
        vec![
            (
                s("human"),
                s("other"),
                s("Command not executed. The user rejected your command with the following message: keep src")
            ),
            (s("human"), s("abort"), s("Interrupted by user: look at y.py too")),
        ]
    );
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.outcome.stop_reason, "completed");
    let notes = e.manifest.provenance().unwrap()["notes"].to_string();
    assert!(notes.contains("confirm mode"), "{notes}");
}

/// mini-swe-agent 2.x with tool calls, in a SWE-bench run folder (`preds.json` above
/// `<id>/<id>.traj.json`): results by `tool_call_id`, a rejection after the padded "not
/// executed" results, a person's command in human mode, a timeout, a step limit.
#[test]
fn a_2x_toolcall_run_folder() {
    let id = "django__django-11099";
    let call = |cid: &str, cmd: &str| json!({"id": cid, "type": "function", "function": {"name": "bash", "arguments": json!({"command": cmd}).to_string()}});
    let traj = json!({
        "info": {"exit_status": "LimitsExceeded", "submission": "", "mini_version": "2.1.0",
                 "model_stats": {"instance_cost": 1.0, "api_calls": 3},
                 "config": {"agent": {"mode": "confirm"}, "model": {"model_name": "openai/gpt-5"},
                            "environment": {"cwd": "/testbed"}}},
        "instance_id": id,
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [call("c1", "ls"), call("c2", "cat > /tmp/x.py <<'EOF'\nprint(1)\nEOF")],
             "extra": {"actions": [{"command": "ls", "tool_call_id": "c1"}, {"command": "cat > /tmp/x.py <<'EOF'\nprint(1)\nEOF", "tool_call_id": "c2"}],
                       "cost": 0.1, "timestamp": 1700000000.0, "response": {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}}},
            {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>", "extra": {"raw_output": "a\n", "returncode": 0, "timestamp": 1700000001.5}},
            {"role": "tool", "tool_call_id": "c2", "content": "<returncode>0</returncode>", "extra": {"raw_output": "", "returncode": 0, "timestamp": 1700000002.0}},
            {"role": "assistant", "content": "", "tool_calls": [call("c3", "git checkout -- .")],
             "extra": {"actions": [{"command": "git checkout -- .", "tool_call_id": "c3"}], "timestamp": 1700000010.0,
                       "response": {"usage": {"prompt_tokens": 200, "completion_tokens": 20}}}},
            {"role": "tool", "tool_call_id": "c3", "content": "", "extra": {"raw_output": "", "returncode": -1, "timestamp": 1700000011.0, "exception_info": "action was not executed"}},
            {"role": "user", "content": "Commands not executed. The user rejected your commands with the following message: keep my changes", "extra": {"interrupt_type": "UserRejection"}},
            {"role": "user", "content": "User command: \n```bash\npytest -q\n```", "extra": {"actions": [{"command": "pytest -q"}]}},
            {"role": "user", "content": "<returncode>1</returncode>", "extra": {"raw_output": "2 failed, 1 passed in 0.3s\n", "returncode": 1, "timestamp": 1700000020.0}},
            {"role": "assistant", "content": "", "tool_calls": [call("c4", "sleep 60")],
             "extra": {"actions": [{"command": "sleep 60", "tool_call_id": "c4"}], "timestamp": 1700000030.0}},
            {"role": "tool", "tool_call_id": "c4", "content": "<exception>..</exception>", "extra": {"raw_output": "", "returncode": -1, "timestamp": 1700000060.0,
             "exception_info": "An error occurred while executing the command: Command 'sleep 60' timed out after 30 seconds", "exception_type": "TimeoutExpired"}},
            {"role": "user", "content": "Interrupted by user: stop sleeping", "extra": {"interrupt_type": "UserInterruption"}},
            {"role": "exit", "content": "", "extra": {"exit_status": "LimitsExceeded", "submission": ""}}
        ],
        "trajectory_format": "mini-swe-agent-1.1"
    });
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &format!("{id}/{id}.traj.json"), &serde_json::to_vec_pretty(&traj).unwrap());
    let preds = json!({id: {"model_name_or_path": "openai/gpt-5", "instance_id": id, "model_patch": ""}});
    write(dir.path(), "preds.json", preds.to_string().as_bytes());
    let (plan, runs) = import_paths(&[dir.path().to_path_buf()], &Options::default());
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    assert_eq!(plan.covered.len(), 1, "preds.json repeats the run's submission");
    assert_eq!(runs.len(), 1);
    let run: &Run = runs[0].as_ref().unwrap();
    let e = &run.package.episode;
    assert_eq!(e.manifest.task, id);
    assert_eq!(e.manifest.cluster, "django/django");
    assert_eq!(e.manifest.model, "openai/gpt-5");
    assert_eq!(
        tools(e),
        vec![
            (s("bash"), s("ls"), Some(0), s("none")),
            (s("bash"), s("cat > /tmp/x.py <<'EOF'\nprint(1)\nEOF"), Some(0), s("none")),
            (s("bash"), s("git checkout -- ."), None, s("permission_denied")),
            (s("shell"), s("pytest -q"), Some(1), s("nonzero_exit")),
            (s("bash"), s("sleep 60"), None, s("timeout")),
        ]
    );
    let t = e.tools.as_ref().unwrap();
    assert_eq!(t[0].common.ts.as_deref(), Some("2023-11-14T22:13:20.000000Z"));
    assert_eq!(t[0].duration_ms, Some(1500.0));
    assert_eq!(t[1].common.ts.as_deref(), Some("2023-11-14T22:13:21.500000Z"));
    assert_eq!(t[1].duration_ms, Some(500.0));
    assert!(t[4].timed_out);
    assert_eq!(
        actions(e),
        vec![
            (s("read"), false, true, 0),
            (s("edit"), false, true, 0), // a write under /tmp does not change the workspace
            (s("run"), false, false, 0), // git checkout -- . rejected
            (s("run"), false, true, 0),  // sleep 60
        ]
    );
    // The person's `pytest -q` is a check by a human; the agent ran none.
    assert_eq!(checks(e), vec![(s("regression"), s("fail"), s("human"), s("observed"), 0)]);
    assert_eq!(e.derived.posture, "gap");
    assert_eq!(
        interventions(e),
        vec![
            (
                s("human"),
                s("other"),
                s("Commands not executed. The user rejected your commands with the following message: keep my changes")
            ),
            (s("human"), s("other"), s("pytest -q")),
            (s("human"), s("abort"), s("Interrupted by user: stop sleeping")),
        ]
    );
    assert_eq!(e.outcome.stop_reason, "budget_exhausted");
    assert_eq!(e.outcome.agent_reported_complete, Some(false));
    assert_eq!((e.outcome.tokens_in, e.outcome.tokens_out, e.outcome.cost_usd), (Some(300), Some(30), Some(1.0)));
    assert_eq!(e.manifest.started_at.as_deref(), Some("2023-11-14T22:13:20.000000Z"));
    assert_eq!(e.manifest.ended_at.as_deref(), Some("2023-11-14T22:14:20.000000Z"));
    assert!(!run.package.raw.files.iter().any(|f| f.path == "patch.diff"), "an empty submission");
}

/// 2.x interactive `confirm_exit`: the agent submits, a person gives a new task instead of
/// ending the run, the agent works on and submits again.
#[test]
fn a_new_task_after_a_submission() {
    let bash = |cmd: &str| format!("THOUGHT\n```mswea_bash_command\n{cmd}\n```");
    let act = |cmd: &str| json!({"role": "assistant", "content": bash(cmd), "extra": {"actions": [{"command": cmd}]}});
    let traj = json!({
        "info": {"exit_status": "Submitted", "submission": "", "mini_version": "2.4.6",
                 "config": {"model": {"model_name": "m"}, "environment": {"cwd": "/w/app"}}},
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            act("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
            {"role": "user", "content": "The user added a new task: also update the docs", "extra": {"interrupt_type": "UserNewTask"}},
            act("touch docs.md"),
            {"role": "user", "content": "<returncode>0</returncode>", "extra": {"raw_output": "", "returncode": 0}},
            act("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}
        ],
        "trajectory_format": "mini-swe-agent-1.1"
    });
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "app.traj.json", &serde_json::to_vec(&traj).unwrap());
    let (_, runs) = import_paths(&[p], &Options::default());
    let e = &runs[0].as_ref().unwrap().package.episode;
    let kinds: Vec<String> = actions(e).into_iter().map(|a| a.0).collect();
    assert_eq!(kinds, ["read", "complete", "create", "read", "complete"]);
    assert_eq!(interventions(e), vec![(s("human"), s("other"), s("The user added a new task: also update the docs"))]);
    let seqs: Vec<u64> = e.actions.iter().flatten().map(|a| a.common.seq).collect();
    let person = e.interventions.as_ref().unwrap()[0].common.seq;
    assert!(seqs[1] < person && person < seqs[2], "the new task comes after the first claim");
    assert_eq!(e.outcome.agent_reported_complete, Some(true));
    assert_eq!(e.derived.final_revision, 1);
}

#[test]
fn exit_statuses_map_to_stop_reasons() {
    use crate::mini_swe_agent::stop_reason;
    assert_eq!(stop_reason("Submitted"), None);
    assert_eq!(stop_reason("LimitsExceeded"), Some("budget_exhausted"));
    assert_eq!(stop_reason("TimeExceeded"), Some("budget_exhausted"));
    assert_eq!(stop_reason("FormatError"), Some("invalid_action"));
    assert_eq!(stop_reason("RuntimeError"), Some("infra_error"));
}
