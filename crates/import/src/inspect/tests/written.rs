//! Small logs written by the tests, for the shapes the fixtures lack.

use std::io::Write;
use std::path::{Path, PathBuf};

use epistore_package::Episode;
use serde_json::{json, Value};
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

use super::{checks, completes, interventions, mutations, tools};
use crate::testing::import_paths;
use crate::Options;

pub(super) fn header() -> Value {
    json!({
        "version": 2, "status": "success",
        "eval": {"task": "synthetic", "model": "anthropic/claude-x", "packages": {"inspect_ai": "0.3.200"}},
        "plan": {"steps": [{"solver": "basic_agent", "params": {"submit_name": "finish"}}]}
    })
}

pub(super) fn sample(id: &str, events: Vec<Value>) -> Value {
    json!({"id": id, "epoch": 1, "input": "fix it", "target": "", "events": events,
           "scores": {"check": {"value": "C"}}, "metadata": {}, "attachments": {}})
}

pub(super) fn span(id: &str, parent: &str, ty: &str, name: &str) -> Value {
    json!({"event": "span_begin", "id": id, "span_id": id, "parent_id": parent, "type": ty, "name": name,
           "timestamp": "2026-01-01T00:00:01+00:00"})
}

pub(super) fn tool_event(id: &str, function: &str, args: Value, span: &str, error: Option<Value>) -> Value {
    let mut e = json!({"event": "tool", "id": id, "function": function, "arguments": args, "span_id": span,
                       "result": "", "timestamp": "2026-01-01T00:00:01+00:00", "completed": "2026-01-01T00:00:02+00:00"});
    if let Some(err) = error {
        e["error"] = err;
    }
    e
}

/// An event two seconds later than the helpers write it.
fn later(mut event: Value) -> Value {
    for (key, at) in [("timestamp", "2026-01-01T00:00:03"), ("completed", "2026-01-01T00:00:04")] {
        if let Some(v) = event.get_mut(key) {
            let frac = v.as_str().unwrap_or("").split_once('.').map(|(_, f)| format!(".{f}"));
            *v = json!(frac.map_or(format!("{at}+00:00"), |f| format!("{at}{f}")));
        }
    }
    event
}

pub(super) fn exec(span: &str, cmd: &str, result: i64) -> Value {
    json!({"event": "sandbox", "action": "exec", "cmd": cmd, "result": result, "span_id": span,
           "timestamp": "2026-01-01T00:00:01.5+00:00"})
}

pub(super) fn write_eval(dir: &Path, name: &str, samples: &[Value], method: CompressionMethod) -> PathBuf {
    let mut members: Vec<(String, Vec<u8>)> = vec![("header.json".into(), header().to_string().into_bytes())];
    for s in samples {
        members.push((format!("samples/{}_epoch_1.json", s["id"].as_str().unwrap()), s.to_string().into_bytes()));
    }
    write_zip(dir, name, &members, method)
}

pub(super) fn write_zip(dir: &Path, name: &str, members: &[(String, Vec<u8>)], method: CompressionMethod) -> PathBuf {
    let path = dir.join(name);
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = SimpleFileOptions::default().compression_method(method);
    for (member, bytes) in members {
        zip.start_file(member.as_str(), options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

pub(super) fn run_of(path: &Path, options: &Options) -> Episode {
    let (plan, runs) = import_paths(&[path.to_path_buf()], options);
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    runs.into_iter().next().unwrap().unwrap().package.episode
}

pub(super) fn refusal_of(path: &Path) -> String {
    let (plan, runs) = import_paths(&[path.to_path_buf()], &Options::default());
    let mut all: Vec<String> = plan.refused.iter().map(|(_, r)| r.to_string()).collect();
    all.extend(runs.into_iter().filter_map(|r| r.err()).map(|r| r.to_string()));
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

/// A human approver rejecting a bash call, then approving a text editor edit; an
/// automatic approver's rejection is a refusal without an intervention; the renamed
/// submit tool is the completion claim; a timeout and a user's cancel.
#[test]
fn approvals_edits_and_people() {
    let dir = tempfile::tempdir().unwrap();
    let a = "agent";
    let events = vec![
        span(a, "", "agent", "basic_agent"),
        json!({"event": "model", "model": "anthropic/claude-x", "span_id": a, "timestamp": "2026-01-01T00:00:00+00:00"}),
        json!({"event": "approval", "approver": "human", "decision": "reject", "explanation": "not rm -rf",
               "call": {"id": "c1", "function": "bash", "arguments": {"cmd": "rm -rf /"}}, "message": "",
               "span_id": a, "timestamp": "2026-01-01T00:00:01+00:00"}),
        tool_event(
            "c1",
            "bash",
            json!({"cmd": "rm -rf /"}),
            a,
            Some(json!({"type": "approval", "message": "not rm -rf"})),
        ),
        json!({"event": "approval", "approver": "policy", "decision": "reject",
               "call": {"id": "c2", "function": "bash", "arguments": {"cmd": "curl x"}}, "message": "", "span_id": a,
               "timestamp": "2026-01-01T00:00:01+00:00"}),
        tool_event("c2", "bash", json!({"cmd": "curl x"}), a, Some(json!({"type": "approval", "message": "policy"}))),
        json!({"event": "approval", "approver": "human", "decision": "approve",
               "call": {"id": "c3", "function": "text_editor", "arguments": {}}, "message": "", "span_id": a,
               "timestamp": "2026-01-01T00:00:01+00:00"}),
        span("s3", a, "tool", "text_editor"),
        tool_event(
            "c3",
            "text_editor",
            json!({"command": "str_replace", "path": "/repo/app.py", "old_str": "a", "new_str": "b"}),
            a,
            None,
        ),
        exec("s3", "inspect-tool-support exec", 0),
        span("s4", a, "tool", "text_editor"),
        tool_event(
            "c4",
            "text_editor",
            json!({"command": "create", "path": "/repo/new.py", "file_text": "x"}),
            a,
            Some(json!({"type": "unknown", "message": "File already exists"})),
        ),
        // The tests start after the edits ended (at 2 s): one after the other.
        span("s5", a, "tool", "bash"),
        later(tool_event(
            "c5",
            "bash",
            json!({"cmd": "pytest"}),
            a,
            Some(json!({"type": "timeout", "message": "timed out"})),
        )),
        span("s6", a, "tool", "bash"),
        later(tool_event("c6", "bash", json!({"cmd": "pytest tests/test_app.py"}), a, None)),
        later(exec("s6", "bash --login -c 'pytest tests/test_app.py'", 0)),
        json!({"event": "input", "input": "looks good, finish up", "input_ansi": "", "span_id": a,
               "timestamp": "2026-01-01T00:00:03+00:00"}),
        span("s7", a, "tool", "finish"),
        tool_event("c7", "finish", json!({"answer": "done"}), a, None),
        json!({"event": "interrupt", "source": "user_cancel", "interrupted": "between_turns", "span_id": a,
               "timestamp": "2026-01-01T00:00:04+00:00"}),
    ];
    let path = write_eval(dir.path(), "people.eval", &[sample("p1", events)], CompressionMethod::Zstd);
    let ep = run_of(&path, &Options::default());
    let t = ep.tools.as_ref().unwrap();
    let ft: Vec<&str> = t.iter().map(|t| t.failure_type.as_str()).collect();
    assert_eq!(ft, ["permission_denied", "permission_denied", "none", "other", "timeout", "none", "none"]);
    assert_eq!(t[2].exit_code, None, "the tool-support helper's exec is not the edit's exit code");
    assert_eq!(t[5].exit_code, Some(0));
    let actions = ep.actions.as_ref().unwrap();
    let refused: Vec<(&str, bool)> =
        actions.iter().filter(|a| !a.ok).map(|a| (a.kind.as_deref().unwrap(), a.mutates)).collect();
    // Two refused bash calls (run, not ok), and the failed create (a mutation, not ok).
    assert_eq!(refused, [("run", false), ("run", false), ("create", true)]);
    assert_eq!(
        mutations(&ep),
        vec![("edit".into(), true, "observed".into()), ("create".into(), false, "observed".into())]
    );
    assert_eq!(ep.derived.final_revision, 1);
    let paths: Vec<Vec<String>> = actions.iter().filter(|a| a.mutates).map(|a| a.paths.clone()).collect();
    assert_eq!(paths, [vec!["/repo/app.py".to_string()], vec!["/repo/new.py".to_string()]]);
    let c = checks(&ep);
    assert_eq!(c[0], ("agent".into(), "regression".into(), "timeout".into(), 1, "regression:pytest".into()));
    assert_eq!(
        c[1],
        ("agent".into(), "targeted_test".into(), "pass".into(), 1, "targeted_test:pytest tests/test_app.py".into())
    );
    assert_eq!(ep.derived.posture, "failure"); // the timed-out pytest is on the final revision
    assert_eq!(
        interventions(&ep),
        vec![
            ("other".into(), "not rm -rf".into()), // the human's rejection; the policy's is no intervention
            ("approval".into(), "approve".into()),
            ("other".into(), "looks good, finish up".into()),
            ("abort".into(), "user_cancel".into()),
        ]
    );
    assert_eq!(completes(&ep), 1);
    // The person's cancel came after the claim: the run's last turn does not end with it.
    assert_eq!(ep.outcome.agent_reported_complete, Some(false));
    assert_eq!(ep.outcome.label.as_deref(), Some("unverified_success"));
}

/// A chunked sample (`samples/{id}_epoch_{n}/`): shell, metadata, event chunks, and
/// attachments referenced by index; every member of the folder is a source copy.
#[test]
fn chunked_sample() {
    let dir = tempfile::tempdir().unwrap();
    let shell = json!({"id": 7, "epoch": 2, "scores": {"check": {"value": 0.5}}, "message_refs": [],
                       "limit": {"type": "message", "limit": 30}});
    let events_0 =
        json!([span("t1", "", "tool", "bash"), tool_event("c1", "bash", json!({"cmd": "attachment://0"}), "", None)]);
    let events_2 = json!([
        exec("t1", "bash --login -c 'sed -i s/a/b/ app.py'", 0),
        json!({"event": "model", "model": "openai/gpt-5", "timestamp": "2026-01-01T00:00:03+00:00"})
    ]);
    let members: Vec<(String, Vec<u8>)> = vec![
        ("_journal/start.json".into(), header().to_string().into_bytes()),
        ("samples/7_epoch_2/sample.json".into(), shell.to_string().into_bytes()),
        ("samples/7_epoch_2/metadata.json".into(), json!({"repo": "org/app"}).to_string().into_bytes()),
        ("samples/7_epoch_2/events/2.json".into(), events_2.to_string().into_bytes()),
        ("samples/7_epoch_2/events/0.json".into(), events_0.to_string().into_bytes()),
        ("samples/7_epoch_2/attachments/0.json".into(), json!(["sed -i s/a/b/ app.py"]).to_string().into_bytes()),
    ];
    let path = write_zip(dir.path(), "chunked.eval", &members, CompressionMethod::Zstd);
    let (plan, runs) = import_paths(&[path], &Options::default());
    assert_eq!(plan.units.len(), 1);
    let run = runs.into_iter().next().unwrap().unwrap();
    let ep = &run.package.episode;
    assert_eq!(ep.manifest.episode, "synthetic/7/epoch-2");
    assert_eq!(ep.manifest.attempt, 2);
    assert_eq!(ep.manifest.cluster, "org/app");
    assert_eq!(tools(ep), vec![("bash".into(), Some("sed -i s/a/b/ app.py".into()), Some(0))]);
    assert_eq!(ep.derived.final_revision, 1);
    assert_eq!(ep.outcome.score, Some(0.5));
    assert_eq!(ep.outcome.correct, Some(false));
    assert_eq!(ep.outcome.stop_reason, "budget_exhausted"); // sample limit
                                                            // eval.model once, the ModelEvent once: a tie goes to the first named; the other noted.
    assert_eq!(ep.manifest.model, "anthropic/claude-x");
    let copies: Vec<&str> =
        run.package.raw.files.iter().map(|f| f.path.as_str()).filter(|p| p.starts_with("artifacts/source/")).collect();
    assert_eq!(copies.len(), 6, "{copies:?}"); // five sample members and the journal's start.json
}

/// Logs without spans: the exec between a call's start and its result (flat), or
/// nested in the call (the first logs).
#[test]
fn step_logs_flat_and_nested_execs() {
    let dir = tempfile::tempdir().unwrap();
    let t = |s: &str| format!("2026-01-01T00:00:0{s}+00:00");
    let events = vec![
        json!({"event": "step", "action": "begin", "type": "solver", "name": "agent", "timestamp": t("0")}),
        json!({"event": "tool", "id": "a", "function": "bash", "arguments": {"cmd": "make test"}, "timestamp": t("1"),
               "completed": t("3"), "result": ""}),
        json!({"event": "sandbox", "action": "exec", "cmd": "bash -c 'make test'", "result": 2, "timestamp": t("2")}),
        json!({"event": "model", "model": "anthropic/claude-x", "timestamp": t("4")}),
        json!({"event": "tool", "id": "b", "function": "python", "arguments": {"code": "open('f.py','w').write('x')"},
               "timestamp": t("5"), "completed": t("6"), "result": "",
               "events": [{"event": "sandbox", "action": "exec", "cmd": "python3 -", "result": 0, "timestamp": t("5")}]}),
        json!({"event": "step", "action": "end", "type": "solver", "name": "agent", "timestamp": t("7")}),
        json!({"event": "step", "action": "begin", "type": "scorer", "name": "check", "timestamp": t("8")}),
        json!({"event": "tool", "id": "x", "function": "bash", "arguments": {"cmd": "pytest"}, "timestamp": t("8")}),
        json!({"event": "step", "action": "end", "type": "scorer", "name": "check", "timestamp": t("9")}),
    ];
    let path = write_eval(dir.path(), "steps.eval", &[sample("s", events)], CompressionMethod::Deflated);
    let ep = run_of(&path, &Options::default());
    assert_eq!(
        tools(&ep),
        vec![
            ("bash".into(), Some("make test".into()), Some(2)),
            ("python".into(), Some("open('f.py','w').write('x')".into()), Some(0)),
        ]
    );
    assert_eq!(ep.derived.final_revision, 1); // the python code wrote f.py
    let notes = ep.manifest.provenance().unwrap()["notes"].clone();
    assert!(notes.to_string().contains("scorers"), "{notes}");
}

#[test]
fn scorer_option_picks_the_verdict_and_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = sample("s1", vec![]);
    s["scores"] = json!({"first": {"value": "I"}, "second": {"value": 1}, "third": {"value": {"a": 1}}});
    let path = write_eval(dir.path(), "scores.eval", &[s], CompressionMethod::Deflated);
    let ep = run_of(&path, &Options::default());
    assert_eq!(ep.outcome.correct, Some(false)); // the first scorer
    let options = Options { scorer: Some("second".into()), ..Options::default() };
    let ep = run_of(&path, &options);
    assert_eq!(ep.outcome.correct, Some(true));
    assert_eq!(checks(&ep)[0].4, "second");
    let extra: Value = serde_json::from_str(ep.outcome.extra.as_deref().unwrap()).unwrap();
    assert_eq!(extra["scores"], json!({"first": 0.0, "third": {"a": 1}}));
}

/// The first logs: events and attachments in a `transcript` object, one unnamed `score`
/// (named after the eval's first scorer).
#[test]
fn first_logs_transcript_and_single_score() {
    let dir = tempfile::tempdir().unwrap();
    let s = json!({
        "id": 3, "epoch": 1, "score": {"value": "P"},
        "transcript": {
            "events": [{"event": "tool", "id": "a", "function": "bash", "arguments": {"cmd": "attachment://h1"},
                        "timestamp": "2026-01-01T00:00:01+00:00", "result": "Exit code: 3"}],
            "content": {"h1": "cargo test"}
        }
    });
    let mut h = header();
    h["eval"]["scorers"] = json!([{"name": "grader"}]);
    let members = vec![
        ("header.json".to_string(), h.to_string().into_bytes()),
        ("samples/3_epoch_1.json".to_string(), s.to_string().into_bytes()),
    ];
    let path = write_zip(dir.path(), "first.eval", &members, CompressionMethod::Deflated);
    let ep = run_of(&path, &Options::default());
    // No exec in the log: the exit code is read from the output, graded derived.
    assert_eq!(tools(&ep), vec![("bash".into(), Some("cargo test".into()), Some(3))]);
    assert_eq!(ep.tools.as_ref().unwrap()[0].common.grade, "derived");
    assert_eq!(checks(&ep)[0].2, "fail");
    assert_eq!(checks(&ep)[1], ("evaluator".into(), "oracle".into(), "fail".into(), 0, "grader".into()));
    assert_eq!(ep.outcome.score, Some(0.5));
}
