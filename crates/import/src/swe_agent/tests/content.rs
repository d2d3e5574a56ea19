//! Revision 1.2 content (docs/format.md §9) of the real trajectories, asserted by hand
//! (line numbers are of the fixture files as committed), and a 1.x `str_replace_editor`
//! run written here (the fixtures have no `str_replace_editor` call).

use serde_json::json;

use super::file;
use crate::testing::{fixture, import_ok, import_paths};
use crate::{Options, Run};

/// `(role, author, text prefix)` of each message record that has text.
fn said(run: &Run) -> Vec<(String, Option<String>, String)> {
    let msgs = run.package.episode.messages.as_ref().expect("messages recorded");
    msgs.iter()
        .filter_map(|m| {
            let text = m.text.as_deref()?;
            Some((m.role.clone(), m.author.clone(), text.chars().take(40).collect()))
        })
        .collect()
}

fn s(v: &str) -> String {
    v.to_string()
}

fn said_row(role: &str, author: Option<&str>, prefix: &str) -> (String, Option<String>, String) {
    (s(role), author.map(s), s(prefix))
}

/// The `tools` record `i`'s output path, and that file's bytes.
fn output(run: &Run, i: usize) -> (String, Vec<u8>) {
    let t = &run.package.episode.tools.as_ref().unwrap()[i];
    let path = t.output.clone().expect("the output is named");
    assert_eq!(path, format!("artifacts/tool-output/{}.txt", t.common.seq));
    let bytes = file(run, &path).expect("the output file").to_vec();
    (path, bytes)
}

/// The diffs on the actions, by the `tools` record they belong to.
fn diffs(run: &Run) -> Vec<(u64, String)> {
    let e = &run.package.episode;
    e.actions.iter().flatten().filter_map(|a| Some((a.tool_seq?, a.diff.clone()?))).collect()
}

fn notes(run: &Run) -> String {
    run.package.episode.manifest.provenance().unwrap()["notes"].to_string()
}

fn step_observation(rel: &str, step: usize) -> String {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture(rel)).unwrap()).unwrap();
    doc["trajectory"][step]["observation"].as_str().unwrap().to_string()
}

#[test]
fn pydicom_0x_content_by_hand() {
    let runs = import_ok(&["swe-agent/pydicom__pydicom-1458.traj", "swe-agent/pydicom.args.yaml"], &Options::default());
    let run = &runs[0];
    let e = &run.package.episode;
    // The task: what the instance template (args.yaml line 390, `ISSUE:\n{issue}\n\nINSTRUCTIONS:`)
    // puts in the first user message (history, line 102).
    let prompt = e.manifest.task_prompt.as_deref().unwrap();
    assert!(prompt.starts_with("Pixel Representation attribute should be optional for pixel data handler\n**Describe"));
    assert!(!prompt.contains("INSTRUCTIONS:") && !prompt.contains("ISSUE:"), "{prompt}");
    let m = said(run);
    assert_eq!(
        m[..5],
        [
            // history line 91: the system prompt
            said_row("system", None, "SETTING: You are an autonomous programme"),
            // line 98: the demonstration (`is_demo`), the harness's
            said_row("user", Some("harness"), "Here is a demonstration of how to correc"),
            // line 102: the instance template's rendering
            said_row("user", None, "We're currently solving the following is"),
            // line 106: the first reply's `thought` (the action is the call)
            said_row("assistant", None, "First, I'll create a new Python script t"),
            said_row("assistant", None, "Now let's paste in the example code from"),
        ]
    );
    // Twelve steps, one reply each; the observations are the calls' results, not text.
    assert_eq!(m.len(), 3 + 12);
    let msgs = e.messages.as_ref().unwrap();
    assert_eq!(msgs.iter().filter(|m| m.role == "tool").count(), 12);
    assert!(msgs.iter().filter(|m| m.role == "tool").all(|m| m.text.is_none() && m.tool.as_deref() == Some("shell")));
    assert!(e
        .outcome
        .final_message
        .as_deref()
        .unwrap()
        .starts_with("The `reproduce_bug.py` script has been successfully removed."));

    // Step 2 (line 19, `python reproduce_bug.py`): the traceback, byte for byte.
    let (_, bytes) = output(run, 2);
    let obs = step_observation("swe-agent/pydicom__pydicom-1458.traj", 2);
    assert_eq!(bytes, obs.as_bytes());
    assert!(
        obs.starts_with("Traceback (most recent call last):\n  File \"/pydicom__pydicom/reproduce_bug.py\", line 17")
    );
    assert!(obs.ends_with("missing from the dataset: PixelRepresentation\n"));
    let t = &e.tools.as_ref().unwrap()[2];
    assert!(t.output_text.as_deref().unwrap().starts_with("Traceback"));
    // Step 10 (`rm reproduce_bug.py`) printed nothing: a 0-byte file.
    assert_eq!(output(run, 10).1, b"");

    // Step 1 (line 12): `edit 1:1` over the line the `create` window showed (`1:`).
    // Step 8 (line 61): `edit 287:296` over lines the rejected edits' "original code"
    // windows showed (lines 282-300); the three rejected edits (steps 5-7) have none.
    let tools = e.tools.as_ref().unwrap();
    let d = diffs(run);
    assert_eq!(d.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [tools[1].common.seq, tools[8].common.seq]);
    assert!(d[0]
        .1
        .starts_with("--- a/reproduce_bug.py\n+++ b/reproduce_bug.py\n@@ -1 +1,18 @@\n+import numpy as np\n"));
    assert_eq!(
        d[1].1,
        "--- a/pydicom/pixel_data_handlers/numpy_handler.py\n+++ b/pydicom/pixel_data_handlers/numpy_handler.py\n\
         @@ -285,9 +285,10 @@\n         )\n \n     required_elements = [\n\
         -        'BitsAllocated', 'Rows', 'Columns', 'PixelRepresentation',\n\
         -        'SamplesPerPixel', 'PhotometricInterpretation'\n\
         +        'BitsAllocated', 'Rows', 'Columns', 'SamplesPerPixel', 'PhotometricInterpretation'\n     ]\n\
         +    if 'PixelData' in ds:\n+        required_elements.append('PixelRepresentation')\n\
         \x20    missing = [elem for elem in required_elements if elem not in ds]\n     if missing:\n\
         \x20        raise AttributeError(\n"
    );
    // The file's own line numbers: nothing numbered within a fragment.
    assert!(!notes(run).contains("numbered within"));
    // The log's own patch (info.submission) stays the patch.
    let patch = String::from_utf8(file(run, "patch.diff").unwrap().to_vec()).unwrap();
    assert!(patch.contains("+    if 'PixelData' in ds:"));
}

#[test]
fn marshmallow_1x_function_calling_content_by_hand() {
    let runs = import_ok(&["swe-agent/marshmallow-1867.function_calling_replace.traj"], &Options::default());
    let run = &runs[0];
    let e = &run.package.episode;
    // replay_config.problem_statement.text (line 576)
    let prompt = e.manifest.task_prompt.as_deref().unwrap();
    assert!(prompt.starts_with("TimeDelta serialization precision\nHi there!\n\nI just found quite strange behaviour"));
    assert!(prompt.ends_with("fields.py#L1474\n"));
    let msgs = e.messages.as_ref().unwrap();
    // history: system prompt, instance (an observation message), then per step the
    // thought, the call (with the tool call's id and arguments) and its result.
    assert_eq!(
        said(run)[..3],
        [
            said_row("system", None, "SETTING: You are an autonomous programme"),
            said_row("user", None, "We're currently solving the following is"),
            said_row("assistant", None, "Let's first start by reproducing the res"),
        ]
    );
    // line 152: the first call, `create` with {"filename":"reproduce.py"}, and its result.
    let call = &msgs[3];
    assert_eq!((call.role.as_str(), call.tool.as_deref()), ("assistant", Some("create")));
    assert_eq!(call.tool_call_id.as_deref(), Some("call_cyI71DYnRdoLHWwtZgIaW2wr"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(call.arguments.as_deref().unwrap()).unwrap(),
        json!({"filename": "reproduce.py"})
    );
    let tools = e.tools.as_ref().unwrap();
    assert_eq!(call.tool_seq, Some(tools[0].common.seq));
    let result = msgs.iter().find(|m| m.role == "tool").unwrap();
    assert_eq!(result.tool_call_id.as_deref(), Some("call_cyI71DYnRdoLHWwtZgIaW2wr"));
    assert_eq!((result.tool_seq, result.text.as_deref()), (Some(tools[0].common.seq), None));
    assert_eq!(e.outcome.final_message.as_deref(), Some("Calling `submit` to submit."));

    // The trajectory's observations, not the history's (which add the `(Open file: ..)`
    // prompt lines): step 2 `python reproduce.py` printed "344" (line 27), step 9
    // `rm reproduce.py` nothing (line 104; the history says "Your command ran
    // successfully and did not produce any output.").
    assert_eq!(output(run, 2).1, b"344");
    assert_eq!(output(run, 9).1, b"");
    assert_eq!(output(run, 0).1, b"[File: reproduce.py (1 lines total)]\r\n1:");

    // Step 1 `insert` (line 16): appended after the one line `create` made, numbered by the
    // window it printed (10 lines total). Step 7 `edit <search> <replace>` (line 82,
    // "Text replaced."): the replaced text only; step 6 (line 71) was rejected.
    let d = diffs(run);
    assert_eq!(d.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [tools[1].common.seq, tools[7].common.seq]);
    assert_eq!(
        d[0].1,
        "--- a/reproduce.py\n+++ b/reproduce.py\n@@ -1 +1,10 @@\n \n+from marshmallow.fields import TimeDelta\n\
         +from datetime import timedelta\n+\n+td_field = TimeDelta(precision=\"milliseconds\")\n+\n+obj = dict()\n\
         +obj[\"td_field\"] = timedelta(milliseconds=345)\n+\n+print(td_field.serialize(\"td_field\", obj))\n"
    );
    assert_eq!(
        d[1].1,
        "--- a/src/marshmallow/fields.py\n+++ b/src/marshmallow/fields.py\n@@ -1 +1,2 @@\n\
         -return int(value.total_seconds() / base_unit.total_seconds())\n+# round to nearest int\n\
         +        return int(round(value.total_seconds() / base_unit.total_seconds()))\n"
    );
    assert!(notes(run).contains("numbered within the replaced text"), "{}", notes(run));
}

#[test]
fn test_repo_i1_windowed_edit_and_output_by_hand() {
    let runs = import_ok(&["swe-agent/test-repo-i1.traj"], &Options::default());
    let run = &runs[0];
    let e = &run.package.episode;
    // args.yaml's instance template around the issue (history line 47).
    assert!(e
        .manifest
        .task_prompt
        .as_deref()
        .unwrap()
        .starts_with("SyntaxError: invalid syntax\nI'm running `missing_colon.py`"));
    // Step 3 (line 26): `python tests/missing_colon.py` printed "8.2\n".
    assert_eq!(output(run, 3).1, b"8.2\n");
    // Step 2 (line 19): `edit 4:4` over the window `open` printed (step 1): the file's lines.
    let d = diffs(run);
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0].1,
        "--- a/tests/missing_colon.py\n+++ b/tests/missing_colon.py\n@@ -1,7 +1,7 @@\n #!/usr/bin/env python3\n \n \n\
         -def division(a: float, b: float) -> float\n+def division(a: float, b: float) -> float:\n     return a/b\n \n \n"
    );
    let action = e.actions.as_ref().unwrap().iter().find(|a| a.diff.is_some()).unwrap();
    assert_eq!(action.paths, ["tests/missing_colon.py"], "the open file");
}

#[test]
fn history_only_outputs_drop_the_prompt_lines() {
    let options = Options { model: Some("gpt-4o".into()), ..Options::default() };
    let runs = import_ok(&["swe-agent/function_calling_simple.traj"], &options);
    let run = &runs[0];
    // history[9]: "8.2\n(Open file: ..)\n(Current directory: ..)\nbash-$"
    assert_eq!(output(run, 3).1, b"8.2");
    // No `info.submission`: the patch the `submit` observation printed.
    let patch = String::from_utf8(file(run, "patch.diff").unwrap().to_vec()).unwrap();
    assert!(patch.starts_with("diff --git a/tests/missing_colon.py b/tests/missing_colon.py\n"), "{patch}");
    assert!(notes(run).contains("the patch is the one the `submit` step printed"));
}

/// A SWE-agent 1.x `str_replace_editor` run (function calling), in the shapes SWE-agent
/// writes them: the action as `str_replace_editor COMMAND PATH --flag 'value'`, the
/// arguments in the history's tool calls.
#[test]
fn str_replace_editor_edits_get_diffs() {
    let call = |id: &str, args: serde_json::Value| json!([{"id": id, "type": "function", "function": {"name": "str_replace_editor", "arguments": args.to_string()}}]);
    let step = |action: &str, obs: &str| json!({"action": action, "observation": obs, "thought": "t", "response": "t", "execution_time": 0.5, "state": {"working_dir": "/testbed", "open_file": "n/a"}, "query": [], "extra_info": {}});
    let create_args = json!({"command": "create", "path": "/testbed/repro.py", "file_text": "print(1)\nprint(2)\n"});
    let replace_args = json!({"command": "str_replace", "path": "/testbed/src/m.py", "old_str": "    return a/b", "new_str": "    if b == 0:\n        return None\n    return a/b"});
    let insert_args =
        json!({"command": "insert", "path": "/testbed/src/m.py", "insert_line": 3, "new_str": "# checked"});
    let bad_args = json!({"command": "str_replace", "path": "/testbed/src/m.py", "old_str": "nope", "new_str": "x"});
    let actions = [
        "str_replace_editor create /testbed/repro.py --file_text 'print(1)\nprint(2)\n'",
        "str_replace_editor str_replace /testbed/src/m.py   --old_str '    return a/b' --new_str '    if b == 0:\n        return None\n    return a/b'",
        "str_replace_editor insert /testbed/src/m.py --insert_line 3 --new_str '# checked'",
        "str_replace_editor str_replace /testbed/src/m.py   --old_str nope --new_str x",
    ];
    let observations = [
        "File created successfully at: /testbed/repro.py",
        "The file /testbed/src/m.py has been edited. Here's the result of running `cat -n` on a snippet of /testbed/src/m.py:\n     4\t    if b == 0:\nReview the changes and make sure they are as expected. Edit the file again if necessary.",
        "The file /testbed/src/m.py has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     4\t# checked\nReview the changes and make sure they are as expected (correct indentation, no duplicate lines, etc). Edit the file again if necessary.",
        "No replacement was performed, old_str `nope` did not appear verbatim in /testbed/src/m.py.",
    ];
    let all_args = [create_args, replace_args, insert_args, bad_args];
    let mut history = vec![
        json!({"role": "system", "content": "You are a helpful assistant", "message_type": "system_prompt", "agent": "main"}),
        json!({"role": "user", "content": "<uploaded_files>\n/testbed\n</uploaded_files>\n<pr_description>\nDivide by zero\n</pr_description>", "message_type": "observation", "agent": "main"}),
    ];
    for (k, ((action, obs), args)) in actions.iter().zip(observations).zip(&all_args).enumerate() {
        let id = format!("toolu_{k}");
        history.push(json!({"role": "assistant", "content": format!("step {k}"), "thought": format!("step {k}"), "action": action, "agent": "main", "message_type": "action", "tool_calls": call(&id, args.clone()),
            "thinking_blocks": [{"type": "thinking", "thinking": format!("thinking {k}")}]}));
        history.push(json!({"role": "tool", "content": obs, "tool_call_ids": [id], "agent": "main", "message_type": "observation"}));
    }
    let traj = json!({
        "trajectory": actions.iter().zip(observations).map(|(a, o)| step(a, o)).collect::<Vec<_>>(),
        "history": history,
        "info": {"exit_status": "submitted", "submission": "", "swe_agent_version": "1.1.0", "model_stats": {"tokens_sent": 10, "tokens_received": 2, "instance_cost": 0.1}},
        "replay_config": {"agent": {"model": {"name": "claude-sonnet-4"}}, "problem_statement": {"text": "Divide by zero\n", "id": "octo__m-1"}}
    });
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("octo__m-1.traj");
    std::fs::write(&p, serde_json::to_vec_pretty(&traj).unwrap()).unwrap();
    let (_, runs) = import_paths(&[p], &Options::default());
    let run = runs[0].as_ref().unwrap();
    let e = &run.package.episode;
    assert_eq!(e.manifest.task_prompt.as_deref(), Some("Divide by zero\n"));
    let tools = e.tools.as_ref().unwrap();
    let d = diffs(run);
    assert_eq!(
        d.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        [tools[0].common.seq, tools[1].common.seq, tools[2].common.seq]
    );
    // create: the whole file
    assert_eq!(d[0].1, "--- /dev/null\n+++ b/repro.py\n@@ -0,0 +1,2 @@\n+print(1)\n+print(2)\n");
    // str_replace: old_str -> new_str, numbered within them
    assert_eq!(
        d[1].1,
        "--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1,3 @@\n+    if b == 0:\n+        return None\n     return a/b\n"
    );
    // insert after line 3: the file's own numbers
    assert_eq!(d[2].1, "--- a/src/m.py\n+++ b/src/m.py\n@@ -3,0 +4 @@\n+# checked\n");
    assert!(notes(run).contains("numbered within the replaced text"));
    // The failed replacement changed nothing: an edit that is not ok (it moves no
    // revision), no diff.
    let kinds: Vec<(String, bool, bool)> = e
        .actions
        .iter()
        .flatten()
        .filter(|a| a.kind.as_deref() != Some("complete"))
        .map(|a| (a.kind.clone().unwrap(), a.diff.is_some(), a.ok))
        .collect();
    assert_eq!(
        kinds,
        [(s("create"), true, true), (s("edit"), true, true), (s("edit"), true, true), (s("edit"), false, false)]
    );
    assert_eq!(e.derived.final_revision, 3);
    // No patch of the log's own: the edits' diffs, in order, make the derived patch.
    let patch = String::from_utf8(file(run, "patch.diff").unwrap().to_vec()).unwrap();
    assert_eq!(patch, d.iter().map(|(_, d)| d.as_str()).collect::<String>());
    // Thinking blocks are the replies' reasoning; the call has its id and arguments.
    let msgs = e.messages.as_ref().unwrap();
    let reply = msgs.iter().find(|m| m.text.as_deref() == Some("step 1")).unwrap();
    assert_eq!(reply.reasoning.as_deref(), Some("thinking 1"));
    let calls: Vec<&str> = msgs
        .iter()
        .filter(|m| m.role == "assistant" && m.tool.is_some())
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(calls, ["toolu_0", "toolu_1", "toolu_2", "toolu_3"]);
    assert_eq!(output(run, 3).1, observations[3].as_bytes());
}
